/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_ELECTION_H
#define ZKELECT_ELECTION_H

/*
 * The election as a pure state machine: election_step(e, event) changes the
 * state and appends the actions the driver (zk.c) must perform. Nothing in
 * here calls ZooKeeper, libevent or the clock; time comes in with each event.
 * Rules numbered "rule N" are those of DESIGN.md section 2.
 */

#include <stdbool.h>
#include <stdint.h>

#define ELECTION_NAME_MAX	128	/* a contender node name, without the path */
#define ELECTION_ID_MAX		256	/* an agent id, as stored in node data */
#define ELECTION_UUID_LEN	36
#define ELECTION_ACTIONS_MAX	8

enum election_role {
	ELECTION_UNKNOWN,
	ELECTION_FOLLOWER,
	ELECTION_LEADER,
	ELECTION_OBSERVER,
};

enum election_session {
	SESSION_CONNECTING,	/* no usable connection (also before the first) */
	SESSION_CONNECTED,
	SESSION_EXPIRED,
	SESSION_AUTH_FAILED,
	SESSION_READONLY,
	SESSION_CLOSED,
};

enum election_phase {
	PHASE_IDLE,		/* not connected, or waiting for a retry */
	PHASE_PARENT,		/* creating the election path */
	PHASE_CREATING,		/* create of our node in flight */
	PHASE_LISTING,		/* children listed to evaluate */
	PHASE_ADOPTING,		/* reading the owner of a node found by uuid */
	PHASE_WATCHING,		/* follower: watch set on the predecessor */
	PHASE_CLAIMING,		/* the claim multi in flight */
	PHASE_LEADING,
	PHASE_RELEASING,	/* resign/stop: waiting for the app to be told */
	PHASE_DELETING,		/* resign/stop: delete of our node in flight */
	PHASE_HOLDING,		/* resigned: waiting out the hold */
	PHASE_OBSERVING,	/* observer: never joins */
	PHASE_STOPPED,
};

enum election_event_type {
	EV_SESSION,		/* zstate, session_id, timeout_ms */
	EV_PARENT_CREATED,	/* rc */
	EV_CREATED,		/* rc, name, owner (from the create's Stat) */
	EV_CHILDREN,		/* rc, names/count */
	EV_PRED_SET,		/* rc: the awget on the predecessor */
	EV_PRED_CHANGED,	/* watch_type: the predecessor's watch fired */
	EV_OWNER,		/* rc, name, owner: stat of a node found by uuid */
	EV_CLAIMED,		/* rc, zxid (mzxid of the claim), sent */
	EV_RENEWED,		/* rc, owner, sent */
	EV_CLAIM_DATA,		/* rc, data/datalen, zxid (mzxid of election node) */
	EV_CLAIM_CHANGED,	/* watch on the election node fired */
	EV_LOWEST_DATA,		/* rc, name, data/datalen, zxid (czxid) */
	EV_LOWEST_CHANGED,	/* name: watch on the lowest node fired */
	EV_DELETED,		/* rc: our node deleted (resign/stop) */
	EV_CHILDREN_CHANGED,	/* the leader's watch on the children fired */
	EV_SELF_SET,		/* rc: the awget on our own node */
	EV_SELF_CHANGED,	/* name, deleted: the watch on our own node fired */
	EV_TICK,		/* time passed; check lease, renewal, retries */
	EV_RESIGN,		/* hold_ms */
	EV_STOP,
	EV_NOTIFIED,		/* the app has been told of a loss */
};

struct election_event {
	enum election_event_type type;
	uint64_t	 gen;		/* generation the call was made under */
	uint64_t	 now;		/* ms, CLOCK_BOOTTIME */
	int		 rc;		/* ZooKeeper return code (ZOK = 0) */
	enum election_session session;
	int64_t		 session_id;
	int		 timeout_ms;
	const char	*name;
	const char	*data;
	int		 datalen;
	char *const	*names;
	int		 count;
	int64_t		 zxid;
	int64_t		 owner;
	uint64_t	 sent;		/* when the request was sent (ms) */
	uint64_t	 hold_ms;
	bool		 deleted;	/* watch said the node was deleted */
};

enum election_action_type {
	ACT_CREATE_PARENT,	/* create every component of the path */
	ACT_CREATE,		/* create _c_<uuid>-latch- EPHEMERAL_SEQUENTIAL */
	ACT_LIST,		/* get children of the election path */
	ACT_WATCH_CHILDREN,	/* the same, with a child watch (leader only) */
	ACT_WATCH_PRED,		/* awget name (watch + NONODE check) */
	ACT_GET_OWNER,		/* exists name, for its ephemeralOwner */
	ACT_CLAIM,		/* multi: check name, setData(path, id) */
	ACT_RENEW,		/* sync, then exists name */
	ACT_WATCH_CLAIM,	/* awget the election node */
	ACT_WATCH_LOWEST,	/* awget name */
	ACT_WATCH_SELF,		/* awget name: our own node, to learn of its deletion */
	ACT_DELETE,		/* delete name */
	ACT_NEW_SESSION,	/* close the handle, open a fresh one */
	ACT_NOTIFY,		/* role changed: log it, tell the app */
	ACT_EXIT,		/* stopped: leave the loop */
};

struct election_action {
	enum election_action_type type;
	char		 name[ELECTION_NAME_MAX];	/* node, when it applies */
	enum election_role from, to;			/* ACT_NOTIFY */
	const char	*reason;			/* ACT_NOTIFY */
	bool		 wait;		/* ACT_NOTIFY: answer with EV_NOTIFIED */
};

struct election_actions {
	int		 n;
	struct election_action a[ELECTION_ACTIONS_MAX];
};

/* What the status document reports; index moves when this changes. */
struct election_report {
	enum election_role role;
	enum election_session session;
	int		 timeout_ms;
	uint64_t	 epoch;		/* ours while leading, else 0 */
	bool		 has_leader;
	char		 leader_id[ELECTION_ID_MAX];
	uint64_t	 leader_epoch;
	int		 candidates;
	int		 position;	/* ours among contenders, -1 if none */
};

struct election {
	/* configuration */
	char		 id[ELECTION_ID_MAX];
	bool		 candidate;
	unsigned	 lease_num, lease_den;	/* lease fraction of T, 2/3 */
	void		(*uuid_gen)(char out[ELECTION_UUID_LEN + 1], void *arg);
	void		*uuid_arg;

	/* session */
	enum election_session session;
	int64_t		 session_id;
	int		 timeout_ms;		/* negotiated T */
	uint64_t	 gen;			/* rule 7 */

	/* our place in the queue */
	enum election_phase phase;
	char		 uuid[ELECTION_UUID_LEN + 1];	/* "" = none yet */
	char		 node[ELECTION_NAME_MAX];	/* "" = not known */
	char		 predecessor[ELECTION_NAME_MAX];
	uint64_t	 self_watch_gen;	/* gen our own node's watch was set in */
	int		 candidates;
	int		 position;

	/* leadership and lease */
	enum election_role role;
	uint64_t	 epoch;
	uint64_t	 lease_deadline;	/* ms; meaningful while leading */
	uint64_t	 next_renew;
	bool		 renew_inflight;
	uint64_t	 renewals;		/* acknowledged, and their */
	uint64_t	 renewal_ms_total;	/* round trips summed, */
	uint64_t	 renewal_ms_max;	/* and the slowest */

	/* the claim others made, as followers see it */
	bool		 claim_watch_armed;	/* a read of the election node asked */
	bool		 claim_known;
	char		 claim_id[ELECTION_ID_MAX];
	uint64_t	 claim_epoch;
	char		**ahead;	/* contenders ahead of us, as last listed */
	int		 nahead;
	char		 lowest[ELECTION_NAME_MAX];
	bool		 lowest_known;
	char		 lowest_id[ELECTION_ID_MAX];
	int64_t		 lowest_czxid;

	/* retries, resign and stop */
	uint64_t	 retry_at;		/* 0 = none */
	uint64_t	 backoff_ms;
	uint64_t	 hold_until;
	bool		 stopping;

	/* reporting */
	uint64_t	 index;
	struct election_report last;
};

void election_init(struct election *e, const char *id, bool candidate);
/* Frees what the election holds (the list of contenders ahead). */
void election_free(struct election *e);

/* Applies one event; appends actions to out (which the caller zeroes). */
void election_step(struct election *e, const struct election_event *ev,
    struct election_actions *out);

/* The role to report at time now: leader only while the lease has time. */
enum election_role election_role_at(const struct election *e, uint64_t now);

/* Lease time left at now, in ms (0 when not leading or lapsed). */
uint64_t election_lease_remaining(const struct election *e, uint64_t now);

/* Fills the reportable view (leader as followers see it, etc.). */
void election_report(const struct election *e, struct election_report *r);

/* The earliest time an EV_TICK is due, or 0 if none is. */
uint64_t election_next_tick(const struct election *e);

/* Parses a contender name "..latch-NNNNNNNNNN"; -1 if it is not one. */
int64_t election_node_seq(const char *name);

const char *election_role_name(enum election_role role);
const char *election_session_name(enum election_session s);
const char *election_phase_name(enum election_phase p);
const char *election_action_name(enum election_action_type t);

#endif
