/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_FLEET_H
#define ZKELECT_FLEET_H

/*
 * fleet.c: one ZooKeeper session and the elections it takes part in, as a
 * pure state machine (doc/design.md, "Architecture"). A single election is
 * a fleet of one unnamed part with no member node; with partitions, each
 * part is a partition's election, and the fleet owns the member node, the
 * member list, the assignment's inputs, the session's renewal and the
 * graceful stop. fleet_step() takes one event and appends the actions the
 * driver performs (zk.c with the ZooKeeper client, the simulator with its
 * model); nothing here calls ZooKeeper, libevent or the clock. Every
 * election is stepped here, and each step is shown to the driver's
 * stepped() callback (its logs).
 */

#include <stdbool.h>
#include <stdint.h>

#include "election.h"
#include "lease.h"

struct config;

#define FLEET_MEMBER_NAME_MAX	32		/* "m-" and 10 digits */
/* A graceful stop with partitions waits this long for successors. */
#define FLEET_STOP_WAIT_MS	5000

/* One election of the fleet: the single one, or a partition's. */
struct part {
	const char	*name;		/* NULL: the single election */
	int		 idx;		/* in fleet->parts */
	char		*path;		/* its election node */
	char		*prefix;	/* path "/_c_" */
	struct election	 e;
	bool		 assigned;	/* ours per the last assignment */
	bool		 owned;		/* leading, as last counted */
	bool		 leading;	/* e.phase == PHASE_LEADING, as counted */
	bool		 queued;	/* holds a node in its queue, as counted */
	bool		 releasing;	/* e.phase == PHASE_RELEASING, as counted */
	char		 leader[ELECTION_ID_MAX]; /* the last leader seen
					 * ("": none yet) */
	bool		 looked;	/* a read of its claim answered */
	int		 owner;		/* its member in the last assignment,
					   in fleet->owner_ids; -1: none */
	uint64_t	 due;		/* election_next_tick, as scheduled */
	int		 heap;		/* its place in fleet->heap, -1: none */
	/* resigned (FEV_PART_RESIGN): no member node of ours may own it
	 * until it has moved and avoid_hold_ms more have passed */
	bool		 avoiding;
	uint64_t	 avoid_hold_ms;
	uint64_t	 avoid_until;	/* 0: not moved yet */
};

/*
 * A member node: "m-" and ten digits. Its data is the agent's id, then
 * fields, each after a NUL: "parts=" with the partitions the agent runs,
 * "count:N" (the names 0..N-1) or "names:" and the names separated by
 * commas; "drained=1" while it is drained; "avoid=" and the partitions it
 * resigned, separated by commas, while it avoids them. Unknown fields are
 * ignored. (An agent before issue 30 wrote its id alone; its partitions
 * are taken to be ours.)
 */
struct fleet_member {
	char		 name[FLEET_MEMBER_NAME_MAX];
	int64_t		 seq;
	char		 id[ELECTION_ID_MAX];
	int64_t		 owner;		/* its session */
	int64_t		 ctime;		/* its node's ctime (ms, ZooKeeper's
					   clock); 0 = not read */
	bool		 known;		/* id read */
	bool		 stale;		/* a read of its data failed: the next
					   listing reads it again */
	char		*parts;		/* its "parts=" value; NULL: ours */
	bool		 drained;	/* "drained=1" */
	char		*avoid;		/* its "avoid=" value; NULL: none */
};

/* What the API and the metrics show of the members and partitions. */
struct fleet_view {
	int		 count;		/* live members, 0 = not listed yet */
	int		 assigned;	/* partitions assigned to us */
	int		 owned;		/* partitions we lead */
	uint64_t	 ownership_changes;
	uint64_t	 rebalance_started;	/* 0 = settled */
	uint64_t	 rebalance_ms;	/* how long the last one took */
	uint64_t	 index;		/* moves with any partition's report */
	char		 duplicate[ELECTION_ID_MAX]; /* an id two members
					   share ("": none) */
	int		 disagree;	/* members whose partitions differ from
					   ours (0: every member runs ours) */
	char		 disagreement[512]; /* who has which, for the status */
	int		 drained;	/* members drained (not counted) */
	bool		 drain_ignored;	/* every member is: counted anyway */
};

enum fleet_event_type {
	FEV_SESSION,		/* ev: every part hears it */
	FEV_SERVER,		/* ev: every part hears it */
	FEV_ELECTION,		/* ev for part */
	FEV_NOTIFIED,		/* part's app has been told (ev.told) */
	FEV_TICK,		/* time passed (ev.now) */
	FEV_RESIGN,		/* ev.hold_ms; the single election */
	FEV_STOP,		/* a graceful stop */
	FEV_MEMBER_CREATED,	/* rc, name (the whole path), owner */
	FEV_MEMBERS,		/* rc, names/count: the listing */
	FEV_MEMBER_DATA,	/* rc, name, data/datalen, owner */
	FEV_MEMBERS_CHANGED,	/* the listing's watch fired */
	FEV_MEMBER_DELETED,	/* rc: our member node's delete (a stop) */
	FEV_SESSION_RENEWED,	/* rc, owner, sent: the session's renewal,
				   sent when asked for (0: the latest) */
	FEV_MEMBER_DATA_CHANGED, /* name: a member node's data watch fired */
	FEV_MEMBER_SET,		/* rc: our member node's data written */
	FEV_DRAIN,		/* ev.assigned: drained (true) or not */
	FEV_PART_RESIGN,	/* part, ev.hold_ms: move it off this agent */
};

struct fleet_event {
	enum fleet_event_type type;
	int		 part;		/* FEV_ELECTION, FEV_NOTIFIED */
	struct election_event ev;	/* now, gen, and what each type says */
};

enum fleet_action_type {
	FACT_ELECTION,		/* a of part: its plan, or ACT_NOTIFY */
	FACT_MEMBER_CREATE,	/* our member node (after its parents) */
	FACT_MEMBERS_LIST,	/* sync, then list with a watch */
	FACT_MEMBER_READ,	/* name: a member's id */
	FACT_MEMBER_DELETE,	/* name: our member node, on a stop */
	FACT_SESSION_RENEW,	/* name: sync, exists of our member node */
	FACT_MEMBER_SET,	/* name: write member_data to our node */
	FACT_KICK,		/* a.name: why ("observer", ... or "") */
	FACT_NEW_SESSION,	/* close the handle, open a new one */
	FACT_EXIT,		/* linger_ms, then leave the loop */
	FACT_CHANGED,		/* part's report changed (part -1: the
				   members or the assignment) */
};

struct fleet_action {
	enum fleet_action_type type;
	int		 part;		/* FACT_ELECTION, FACT_CHANGED */
	struct election_action a;	/* FACT_ELECTION, FACT_KICK */
	char		 name[FLEET_MEMBER_NAME_MAX];
	uint64_t	 gen;		/* member requests: their generation */
	uint64_t	 linger_ms;	/* FACT_EXIT */
};

/* A step's actions, as many as its fan-out makes (every partition may
 * ask for something). Zero it before the first step; fleet_actions_free()
 * when done. */
struct fleet_actions {
	int		 n, cap;
	struct fleet_action *a;
};

/* Called after each election's step, for the driver's logs. */
typedef void (*fleet_stepped_fn)(void *arg, struct part *pt,
    const struct election_glance *before, const struct election_actions *out);

struct fleet {
	bool		 partitioned;	/* a member node, assignment, ... */
	int		 nparts;
	struct part	*parts;
	struct part	**by_name;	/* parts sorted by name: found by
					   bsearch, not a scan of P */
	char		*members_path;	/* election.path "/members" */
	char		*member_data;	/* our member node's data (id NUL parts=
					   ..., fleet.h above) */
	int		 member_datalen;
	char		*member_base;	/* its id and parts, always the same */
	int		 member_baselen;
	const char	*parts_spec;	/* ours, in member_base: "count:N", ... */
	bool		 drained;	/* FEV_DRAIN: we own no partition */
	bool		 member_set_owed; /* our data changed, not written yet */
	uint64_t	 avoid_next;	/* the next avoid_until to come, 0: none */
	char		*parts_path;	/* election.path "/partitions" */
	const char	*id;		/* election.id */
	fleet_stepped_fn stepped;
	void		*stepped_arg;
	bool		 assign_unsticky; /* tests only: the assignment
					   ignores who owns what now */
	bool		 drain_counted;	/* tests only: drained members count */
	bool		 avoid_ignored;	/* tests only: resigns move nothing */

	/* the session, as every part hears it */
	enum election_session session;
	int64_t		 session_id;
	uint64_t	 now;

	/* partitions: our member node and the members */
	int64_t		 member_session; /* the session our node is of */
	char		 member_node[FLEET_MEMBER_NAME_MAX]; /* "" = none */
	bool		 member_creating;
	struct fleet_member *members;
	int		 nmembers;
	uint64_t	 member_gen;	/* of the listing being read */
	int		 member_reads;	/* data reads of it in flight */
	bool		 assign_owed;	/* a partition's leader changed */
	char		 (*owner_ids)[ELECTION_ID_MAX]; /* the last
					   assignment's members, by index */
	uint64_t	 assigned_at;	/* the last assignment */
	uint64_t	 join_until;	/* the join window's end (0: over) */
	uint64_t	 join_cap;	/* and its latest */
	uint64_t	 look_cap;	/* the latest it waits for looks */
	int		 nlooked;	/* parts looked at */
	bool		 joined_once;	/* a member node made in this run */
	bool		 new_session_owed;
	uint64_t	 last_kick_at;
	uint64_t	 kicks;		/* the session renewal's kicks */

	/* the session's renewal: one for every partition */
	bool		 srenew_inflight;
	bool		 srenew_kicked;
	uint64_t	 srenew_sent;
	uint64_t	 srenew_next;
	uint64_t	 srenewals;
	struct lease_ring ring;		/* its sends on this connection */
	uint64_t	 last_answer;	/* when ZooKeeper last answered us on
					   this connection (kicks wait for
					   silence, not for a busy queue) */
	uint64_t	 session_lease;	/* the session lives at least until
					   then (its renewals' lease) */

	/* counts kept as parts step: no scan of every part per event */
	int		 nleading;	/* parts in PHASE_LEADING */
	int		 nqueued;	/* parts holding a node */
	int		 nbusy;		/* parts leading, releasing or deleting */
	int		 nstopped;	/* parts in PHASE_STOPPED */
	int		 nunsettled;	/* parts whose owned != assigned */
	int		 nreleasing;	/* parts waiting for the app to hear of
					   a release (PHASE_RELEASING) */
	bool		 serial_releases; /* notify.on_follower is set: its
					   hooks run one at a time, so parked
					   leaders let go one at a time */
	int		 release_gate;	/* nreleasing if serial_releases, else
					   0: what elections wait on */
	bool		 release_wake;	/* the gate fell to 0: the next goes */

	/* a graceful stop */
	bool		 stopping;
	bool		 stopped;	/* EV_STOP sent to every part */
	uint64_t	 stop_by;	/* then release anyway */
	bool		 exited;

	/* the parts' next ticks, earliest first */
	int		*heap;
	int		 nheap;

	struct fleet_view view;
};

/*
 * Sets up the fleet of conf (one part, or a part per partition); every
 * election as election_init with conf's id and value, and what zk.c set on
 * agent->election before (tick_time, disconnect, the uuid generator).
 */
void	fleet_init(struct fleet *f, const struct config *conf,
	    void (*uuid_gen)(char out[ELECTION_UUID_LEN + 1], void *arg),
	    void *uuid_arg);
void	fleet_free(struct fleet *f);

/* Frees the actions' array (out may be stepped into again). */
void	fleet_actions_free(struct fleet_actions *out);

/* Applies one event; appends actions to out (which the caller zeroes). */
void	fleet_step(struct fleet *f, const struct fleet_event *ev,
	    struct fleet_actions *out);

/*
 * After a batch of events: assign again if a partition's leader changed.
 * (The driver calls it once the messages at hand are applied, so that a
 * burst of answers is one assignment.)
 */
void	fleet_flush(struct fleet *f, uint64_t now, struct fleet_actions *out);

/* The earliest time a FEV_TICK is due, or 0 if none is. */
uint64_t fleet_next_tick(const struct fleet *f);

/* The election that speaks for the session (the single one, or the first
 * partition's). */
const struct election *fleet_session(const struct fleet *f);

/* The role part pt reports at now (election_role_at); a partition this
 * agent is out of the queue of, on a live session, is followed. */
enum election_role fleet_role(const struct part *pt, uint64_t now);

/* The role the status document reports for the agent at now: the single
 * election's; with partitions (leadership is per partition) follower
 * while connected, else unknown. */
enum election_role fleet_status_role(const struct fleet *f, uint64_t now);

/* What a long poll waits on: the single election's report index, or the
 * partitions' (fleet_view). */
uint64_t fleet_index(const struct fleet *f);

/* The part named NAME (len bytes), or NULL. */
struct part *fleet_part_named(struct fleet *f, const char *name, size_t len);

/* The part a path belongs to: its election node, or a node under it. */
struct part *fleet_part_of_path(struct fleet *f, const char *path);

/* notify.on_follower set or not (start-up, reload): parked leaders let
 * go one at a time while it is. */
void	fleet_serial_releases(struct fleet *f, bool on);

/* Who leads the partition, as an input of the assignment (NULL: no claim
 * read yet). */
const char *fleet_part_leader(const struct part *pt);

#endif
