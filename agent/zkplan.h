/* SPDX-License-Identifier: MIT */
#ifndef ZKPLAN_H
#define ZKPLAN_H

/*
 * The mapping from an election action to ZooKeeper calls, as plain data:
 * which calls, in what order, on which paths, with what data, watch and
 * multi ops, and what their replies answer. zk.c runs a plan with the C
 * client; the simulator (tests/sim) runs the same plan against its model
 * of ZooKeeper. Nothing here calls ZooKeeper or libevent.
 */

#include <stdbool.h>

#include "config.h"
#include "election.h"
#include "fleet.h"

/* The calls. */
enum zkplan_call_type {
	ZKC_CREATE,		/* a persistent node, no data */
	ZKC_CREATE_SEQ,		/* EPHEMERAL_SEQUENTIAL, with its Stat */
	ZKC_SYNC,
	ZKC_GET,		/* getData */
	ZKC_EXISTS,
	ZKC_CHILDREN,
	ZKC_MULTI,		/* the items, atomically */
	ZKC_DELETE,		/* delete (any version) */
};

/* The ops of a multi. */
enum zkplan_item_type {
	ZKI_CHECK,		/* the node exists (any version) */
	ZKI_SET,		/* setData (any version) */
	ZKI_DELETE,		/* delete (any version) */
};

/* What the action's request is for: which event its answer becomes. */
enum zkplan_for {
	ZKF_NONE,		/* not a ZooKeeper call (kick, notify, ...) */
	ZKF_PARENT, ZKF_CREATE, ZKF_LIST, ZKF_PRED_SET, ZKF_OWNER, ZKF_CLAIM,
	ZKF_RENEW, ZKF_CLAIM_DATA, ZKF_SUCCESSOR, ZKF_RELEASE, ZKF_SELF_SET,
	ZKF_AHEAD,
	/* partitions: the fleet's member node, listing and renewal */
	ZKF_MEMBER_CREATE, ZKF_MEMBERS, ZKF_MEMBER_DATA, ZKF_MEMBER_DELETE,
	ZKF_SESSION_RENEW, ZKF_MEMBER_SET,
};

/* The watch a read leaves, by its (constant) context. */
enum zkplan_watch {
	ZKW_NONE, ZKW_PRED, ZKW_SELF, ZKW_CLAIM, ZKW_CHILDREN, ZKW_MEMBERS,
	ZKW_MEMBER_DATA,
};

#define ZKPLAN_CALLS_MAX	3
#define ZKPLAN_ITEMS_MAX	3

struct zkplan_item {
	enum zkplan_item_type type;
	char		 path[CONFIG_ZK_PATH_MAX];
	int		 version;	/* -1: any */
	const char	*data;		/* ZKI_SET */
	int		 datalen;
};

struct zkplan_call {
	enum zkplan_call_type type;
	char		 path[CONFIG_ZK_PATH_MAX];
	bool		 parents;	/* ZKC_CREATE: each ancestor of path
					   first, pipelined, their replies
					   ignored (they may exist) */
	bool		 answers;	/* its reply answers the request; false:
					   ignored (a sync before a listing,
					   whose failure the listing repeats) */
	enum zkplan_watch watch;	/* reads: leave this watch */
	const char	*data;		/* ZKC_CREATE_SEQ */
	int		 datalen;
	int		 nitems;	/* ZKC_MULTI */
	struct zkplan_item items[ZKPLAN_ITEMS_MAX];
};

/*
 * One action's calls, sent in order on one connection. The answering calls
 * share one request of kind `what` about node `name`; when there are
 * several (the renewal), the last of them to complete reports them all,
 * and a call's index among them says which failed first.
 */
struct zkplan {
	enum zkplan_for	 what;		/* ZKF_NONE: nothing to send */
	char		 name[ELECTION_NAME_MAX];	/* "" = none */
	int		 ncalls;
	struct zkplan_call calls[ZKPLAN_CALLS_MAX];
};

/*
 * The plan for action a in the election whose node is path, its contenders
 * prefix + uuid + "-latch-" (prefix is path "/_c_"). Returns 0, or -1 when
 * a path would not fit (out->what and out->name are set all the same, so
 * the caller can report the request failed).
 */
int	zkplan_build(const struct election_action *a, const char *path,
	    const char *prefix, const char *uuid, struct zkplan *out);

/*
 * The plan for a fleet action about the members (fleet.h): our member node
 * (members_path "/m-", sequential, with data, after members_path's
 * ancestors, itself and parts_path), the listing (after a sync), a
 * member's read, our node's delete, or the session's renewal. Returns 0,
 * or -1 when a path would not fit (out->what is set all the same).
 */
int	zkplan_member(const struct fleet_action *fa, const char *members_path,
	    const char *parts_path, const char *data, int datalen,
	    struct zkplan *out);

/* The number of calls whose reply answers the request. */
int	zkplan_answers(const struct zkplan *p);

/* "create", "list", ...: for traces and tests. */
const char *zkplan_call_name(enum zkplan_call_type t);

#endif
