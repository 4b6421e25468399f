/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_ELECTION_H
#define ZKELECT_ELECTION_H

/*
 * The election as a pure state machine: election_step(e, event) changes the
 * state and appends the actions the driver (zk.c) must perform. Nothing in
 * here calls ZooKeeper, libevent or the clock; time comes in with each event.
 * Rules numbered "rule N" are those of doc/design.md, "Election rules".
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease.h"

#define ELECTION_NAME_MAX	128	/* a contender node name, without the path */
#define ELECTION_ID_MAX		256	/* an agent id, as stored in node data */
#define ELECTION_VALUE_MAX	1025	/* election.value, with its NUL */
#define ELECTION_DATA_MAX	(ELECTION_ID_MAX + ELECTION_VALUE_MAX)
#define ELECTION_UUID_LEN	36
#define ELECTION_ACTIONS_MAX	10
#define ELECTION_SENT_RING	32	/* request send times kept for the lease */
#define ELECTION_READS_MAX	8	/* claim reads in flight, by send time */
/*
 * After a release that named a successor, our next write (a rejoin's
 * create, the session's close) waits this long: a server serves reads behind
 * the writes it is logging, and the successor's first read must not wait.
 */
#define ELECTION_RELEASE_LINGER_MS 100

enum election_role {
	ELECTION_UNKNOWN,
	ELECTION_FOLLOWER,
	ELECTION_LEADER,
	ELECTION_OBSERVER,
};

/*
 * Why the role changed. The names (election_reason_name) are what users
 * read: the API's role_reason, the log, the metric labels.
 */
enum election_reason {
	REASON_NONE,		/* no change yet */
	REASON_ACCESS_REFUSED,
	REASON_AUTH_FAILED,
	REASON_CLAIM_OVERWRITTEN,
	REASON_CLAIMED,
	REASON_OBSERVER_SERVER,
	REASON_CONNECTION_LOST,
	REASON_PATH_DELETED,
	REASON_LEASE_LAPSED_DISCONNECTED,
	REASON_LEASE_LAPSED,
	REASON_NAMED,
	REASON_NEW_SESSION,
	REASON_NO_LEASE,
	REASON_NO_LONGER_LOWEST,
	REASON_NOT_ASSIGNED,
	REASON_OBSERVING,
	REASON_OWN_NODE_DELETED,
	REASON_OWN_NODE_VANISHED,
	REASON_QUEUED,
	REASON_READONLY_SERVER,
	REASON_REASSIGNED,
	REASON_REQUEST_FAILED,
	REASON_RESIGNED,
	REASON_SESSION_EXPIRED,
	REASON_STOPPING,
	REASON_MAX
};

enum election_session {
	SESSION_CONNECTING,	/* no usable connection (also before the first) */
	SESSION_CONNECTED,
	SESSION_EXPIRED,
	SESSION_AUTH_FAILED,
	SESSION_READONLY,
	SESSION_CLOSED,
};

/* What the server we are connected to is (zk.c asks it). */
enum election_server {
	SERVER_UNKNOWN,		/* not asked yet, or it would not say */
	SERVER_VOTING,		/* leader, follower or standalone */
	SERVER_OBSERVER,	/* relays touches: no lease through it */
	SERVER_UNIDENTIFIED,	/* nothing tells it from an observer (a
				   proxy in front of an ensemble with them,
				   or the config not read): no lease */
};

/* Where the bound on tickTime that the lease counts with comes from. */
enum election_tick_from {
	TICK_ASSUMED,		/* neither stated nor learned: T/2 */
	TICK_STATED,		/* zookeeper.tick_time */
	TICK_LEARNED,		/* half the servers' minSessionTimeout */
};

/* Why a candidate that could lead does not: reported, logged once. */
enum election_bar {
	BAR_NONE,
	BAR_OBSERVER,		/* connected to an observer */
	BAR_SHORT_TIMEOUT,	/* T < 2 x zookeeper.tick_time */
	BAR_EPOCH_BACKWARDS,	/* our claim's zxid is below an epoch we led under */
	BAR_SLOW_ZOOKEEPER,	/* round trips too slow to start a term on */
	BAR_NO_ACCESS,		/* ZooKeeper answers NOAUTH on the election path */
	BAR_NO_CHROOT,		/* the election path cannot be created: no chroot */
	BAR_UNIDENTIFIED,	/* SERVER_UNIDENTIFIED */
};

/* Slow round trips in a row that bar a term, fast ones that lift the bar. */
#define ELECTION_SLOW_RUNS	2
#define ELECTION_FAST_RUNS	3

#define ELECTION_TRAIL_MAX	8

enum election_phase {
	PHASE_IDLE,		/* not connected, or waiting for a retry */
	PHASE_PARENT,		/* creating the election path */
	PHASE_CREATING,		/* create of our node in flight */
	PHASE_LISTING,		/* children listed to evaluate */
	PHASE_ADOPTING,		/* reading the owner of a node found by uuid */
	PHASE_WATCHING,		/* follower: watch set on the predecessor */
	PHASE_TAKEOVER,		/* nobody ahead: were we named by the last leader? */
	PHASE_CLAIMING,		/* the claim multi in flight */
	PHASE_LEADING,
	PHASE_RELEASING,	/* resign/stop: waiting for the app to be told */
	PHASE_DELETING,		/* resign/stop: the release of our node under way */
	PHASE_HOLDING,		/* resigned: waiting out the hold */
	PHASE_OBSERVING,	/* observer: never joins */
	PHASE_STOPPED,
};

enum election_event_type {
	EV_SESSION,		/* session, session_id, timeout_ms; sent: when the
				   handle that got it was opened */
	EV_PARENT_CREATED,	/* rc */
	EV_CREATED,		/* rc, name, owner, czxid */
	EV_CHILDREN,		/* rc, names/count */
	EV_PRED_SET,		/* rc, name: the awget on the predecessor */
	EV_PRED_CHANGED,	/* name, deleted: the predecessor's watch fired */
	EV_OWNER,		/* rc, name, owner, czxid: node found by uuid */
	EV_CLAIMED,		/* rc, zxid (mzxid of the claim), failed_op */
	EV_RENEWED,		/* rc, owner, czxid (own node); data, zxid, pzxid
				   (election node) */
	EV_CLAIM_DATA,		/* rc, data/datalen, zxid (mzxid), pzxid */
	EV_CLAIM_CHANGED,	/* the watch on the election node fired */
	EV_SUCCESSOR_DATA,	/* rc, name, data/datalen: the leader's successor */
	EV_RELEASED,		/* rc, failed_op: the release multi */
	EV_AHEAD_CHECKED,	/* rc, name: is the first node ahead of us still there */
	EV_CHILDREN_CHANGED,	/* the leader's watch on the children fired */
	EV_SELF_SET,		/* rc, name: the awget on our own node */
	EV_SELF_CHANGED,	/* name, deleted: the watch on our own node fired */
	EV_TICK,		/* time passed; check lease, renewal, retries */
	EV_RESIGN,		/* hold_ms */
	EV_STOP,
	EV_NOTIFIED,		/* the app has been told of a loss */
	EV_SERVER,		/* server: what the connected server is */
	EV_ASSIGN,		/* assigned: partitions only (doc/design.md,
				   "Partitions"): may we queue here */
	EV_SESSION_RENEWED,	/* rc, owner (our session when answered),
				   sent: the session's renewal (partitions),
				   a sync sent at sent */
};

struct election_event {
	enum election_event_type type;
	uint64_t	 gen;		/* generation the call was made under */
	uint64_t	 now;		/* ms, CLOCK_BOOTTIME */
	int		 rc;		/* ZooKeeper return code (ZOK = 0) */
	int		 failed_op;	/* multi: index of the op that failed, or -1 */
	enum election_session session;
	int64_t		 session_id;
	int		 timeout_ms;
	const char	*name;
	const char	*data;
	int		 datalen;
	char *const	*names;
	int		 count;
	int64_t		 zxid;
	int64_t		 pzxid;
	int64_t		 czxid;
	int64_t		 ctime;		/* FEV_MEMBER_DATA: the node's ctime (ms,
					   the ZooKeeper leader's clock) */
	int64_t		 owner;
	uint64_t	 hold_ms;
	uint64_t	 sent;		/* EV_SESSION: the handle's opening;
					   EV_SESSION_RENEWED: the sync's send */
	bool		 deleted;	/* watch said the node was deleted */
	enum election_server server;	/* EV_SERVER */
	int		 min_timeout_ms;	/* EV_SERVER: the server's
					   minSessionTimeout, 0 = not learned */
	bool		 assigned;	/* EV_ASSIGN */
	uint64_t	 told;		/* EV_NOTIFIED: the loss it acknowledges
					   (an action's told; all before it too) */
	int		 queued;	/* replies: our requests still out when
					   this one was sent (a round trip behind
					   our own burst says nothing of the link) */
};

enum election_action_type {
	ACT_CREATE_PARENT,	/* create every component of the path */
	ACT_CREATE,		/* create _c_<uuid>-latch- EPHEMERAL_SEQUENTIAL,
				   data = our claim data */
	ACT_LIST,		/* get children (after a sync when a->sync) */
	ACT_WATCH_CHILDREN,	/* the same, with a child watch (leader only) */
	ACT_WATCH_PRED,		/* awget name (watch + NONODE check) */
	ACT_GET_OWNER,		/* exists name, for its ephemeralOwner, czxid */
	ACT_CLAIM,		/* multi: check name, setData(path, claim data) */
	ACT_RENEW,		/* sync path, exists name, get path (no watch) */
	ACT_WATCH_CLAIM,	/* awget the election node (observers) */
	ACT_READ_CLAIM,		/* get the election node, no watch (candidates) */
	ACT_WATCH_SELF,		/* awget name: our own node, to learn of its deletion */
	ACT_READ_SUCCESSOR,	/* get name (no watch): the leader's successor */
	ACT_RELEASE,		/* multi: [check successor], delete name,
				   [setData(path, data)] */
	ACT_CHECK_AHEAD,	/* exists name (no watch): the first node ahead */
	ACT_KICK,		/* drop the connection to a stalled server (or,
				   with name "observer", to an observer) */
	ACT_NEW_SESSION,	/* close the handle, open a fresh one */
	ACT_NOTIFY,		/* role changed: log it, tell the app */
	ACT_EXIT,		/* stopped: leave the loop */
};

struct election_action {
	enum election_action_type type;
	char		 name[ELECTION_NAME_MAX];	/* node, when it applies */
	bool		 sync;		/* ACT_LIST: sync first (authoritative) */
	/* ACT_RELEASE */
	char		 successor[ELECTION_NAME_MAX];	/* "" = no check op */
	bool		 write_claim;	/* set the election node to data */
	/* ACT_CREATE, ACT_CLAIM, ACT_RELEASE: bytes owned by the election,
	 * valid until its next step */
	const char	*data;
	int		 datalen;
	/* ACT_NOTIFY */
	enum election_role from, to;
	enum election_reason reason;
	bool		 wait;		/* answer with EV_NOTIFIED: every loss
					   of leadership; a release waits for it */
	uint64_t	 told;		/* the loss's number, for EV_NOTIFIED */
	bool		 node_stands;	/* a loss after which our node (and so
					   no successor) stands until the lease
					   deadline: the child may get time */
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
	char		 leader_value[ELECTION_VALUE_MAX];
	bool		 has_value;
	uint64_t	 leader_epoch;
	int		 candidates;
	int		 position;	/* ours among contenders, -1 if none */
	bool		 holding;	/* resigned, waiting out the hold */
	enum election_bar bar;		/* why we do not lead, if we could */
	enum election_server server;	/* what the connected server is */
	bool		 duplicate_id;	/* another contender has our id */
	uint64_t	 slow_rtt_ms;	/* BAR_SLOW_ZOOKEEPER: the round trip */
	uint64_t	 tick_bound_ms;	/* the lease's bound on tickTime */
	enum election_tick_from tick_from;
	int		 min_timeout_ms; /* the largest minSessionTimeout a
					   server has given, 0 = none yet */
	bool		 tick_understated; /* zookeeper.tick_time is below
					   what the servers imply */
};

struct election {
	/* configuration */
	char		 id[ELECTION_ID_MAX];
	char		 claim_data[ELECTION_DATA_MAX];	/* id, or id "\n" value */
	int		 claim_datalen;
	bool		 candidate;
	bool		 step_down;	/* election.disconnect: step_down */
	unsigned	 renew_div;	/* renew at most T/renew_div after the last
					   send (6) and the lease's renew after the
					   last answer; 3 (with lease_naive) is the
					   old agent */
	bool		 lease_naive;	/* tests only: the old s + 2T/3 lease */
	int		 tick_ms;	/* zookeeper.tick_time; 0 = not stated */
	int		 min_timeout_ms; /* the largest minSessionTimeout the
					   servers gave (EV_SERVER), 0 = none:
					   half of it bounds tickTime */
	void		(*uuid_gen)(char out[ELECTION_UUID_LEN + 1], void *arg);
	void		*uuid_arg;

	/* session */
	enum election_session session;
	int64_t		 session_id;
	int		 timeout_ms;		/* T: the smallest timeout this
						   session was negotiated with */
	struct lease_shape shape;		/* the lease's figures for T */
	enum election_server server;		/* of this connection */
	uint64_t	 last_answer_sent;	/* latest send time of a request
						   answered in this session */
	uint64_t	 gen;			/* rule 7 */
	uint64_t	 sent[ELECTION_SENT_RING]; /* requests on this connection */
	uint64_t	 acked[ELECTION_SENT_RING]; /* when answered, 0 = not known */
	int		 nsent;
	uint64_t	 session_born;	/* the handle that made our session opened */

	/* our place in the queue */
	enum election_phase phase;	/* set by election_phase() only */
	/* The phases the last step went through, in order (at most
	 * ELECTION_TRAIL_MAX; the driver logs them). */
	uint8_t		 trail[ELECTION_TRAIL_MAX];
	int		 trail_n;
	char		 uuid[ELECTION_UUID_LEN + 1];	/* "" = none yet */
	char		 node[ELECTION_NAME_MAX];	/* "" = not known */
	int64_t		 node_czxid;
	char		 predecessor[ELECTION_NAME_MAX];
	bool		 self_watched;	/* our node's watch is set (this session) */
	int		 candidates;	/* as of our last listing */
	uint64_t	 candidates_at;	/* when that was */
	bool		 candidates_counted;
	int		 position;
	char		**ahead;	/* contenders ahead of us, as last listed */
	int		 nahead;
	uint64_t	 poll_at;	/* when a follower reads the election node */

	/* the session lease: our session lives at least until lease_deadline
	 * (doc/design.md rule 2); leadership is reported only before it */
	enum election_role role;
	uint64_t	 epoch;
	uint64_t	 lease_deadline;
	uint64_t	 next_renew;	/* 0 = no renewals (not leading, not next) */
	bool		 renew_inflight;
	uint64_t	 renew_sent;
	bool		 kicked;	/* this renewal's connection was kicked */
	uint64_t	 riding_since;	/* leading through a disconnect since */
	uint64_t	 last_kick;
	uint64_t	 last_observer_kick;
	uint64_t	 renewals;		/* acknowledged, and their */
	uint64_t	 renewal_ms_total;	/* round trips summed, */
	uint64_t	 renewal_ms_max;	/* and the slowest */
	uint64_t	 rides_kept;	/* disconnects ridden through */
	uint64_t	 rides_lost;	/* disconnects that cost the term */
	uint64_t	 kicks;

	/* the claim, as the election node says */
	bool		 claim_known;
	bool		 claim_absent;	/* the last read found no election node
					   (zk.c sends a parked partition's
					   next read after others) */
	char		 claim_id[ELECTION_ID_MAX];
	char		 claim_value[ELECTION_VALUE_MAX];
	bool		 claim_has_value;
	bool		 claim_mine;	/* its data is our claim data */
	uint64_t	 claim_epoch;
	int64_t		 claim_pzxid;

	/* the leader's successor, named when it lets go */
	char		 succ[ELECTION_NAME_MAX];
	char		 succ_data[ELECTION_DATA_MAX];
	int		 succ_datalen;	/* -1 = not read yet */

	/* a term to start once the lease allows it (PHASE_TAKEOVER) */
	uint64_t	 term_epoch;	/* named or claimed; 0 = none yet */
	bool		 claim_inflight;
	uint64_t	 claim_sent;
	uint64_t	 claim_read_sent[ELECTION_READS_MAX]; /* reads of the
					   election node in flight, oldest first */
	uint64_t	 spent_epoch;	/* the highest epoch we have led under */
	uint64_t	 taken_epoch;	/* the last we were named or claimed under */
	int		 claim_reads;	/* reads of the election node in flight */
	bool		 claim_owed;	/* the election node's watch is not set */
	uint64_t	 claim_seen;	/* highest mzxid of it we have read */
	bool		 release_claim;	/* the release writes the election node */
	bool		 release_succ;	/* ... and checks the successor */

	/* retries, resign and stop */
	uint64_t	 retry_at;		/* 0 = none */
	uint64_t	 backoff_ms;
	uint64_t	 hold_until;
	bool		 stopping;
	bool		 app_owed;	/* a loss the app has not finished
					   hearing of (no EV_NOTIFIED yet) */
	uint64_t	 losses;	/* losses of leadership so far */
	bool		 epoch_behind;	/* BAR_EPOCH_BACKWARDS */
	bool		 off_queue;	/* out of the queue: no lease here */
	/* a partition's election (doc/design.md, "Partitions"): not
	 * assigned to us, so out of the queue; a leader stays until a
	 * successor queues, then releases to it. Never set in one election. */
	bool		 parked;
	bool		 parked_watch;	/* the claim's watch is set meanwhile */
	uint64_t	 parked_retry;	/* no claim node yet: look again then */
	bool		 session_renewal; /* partitions: a leader's lease is
					   extended by the session's renewal */
	const struct lease_ring *session_ring; /* partitions: the session's
					   renewals on this connection, which
					   anchor every lease (NULL: none) */
	const uint64_t	*last_answer;	/* when the connection last answered any
					   request of ours (the driver's; NULL:
					   only our own answers count): a renewal
					   is stalled only when nothing is */
	int		 ev_queued;	/* the event being applied: its queued */
	const int	*releasing;	/* partitions: how many of the fleet's
					   elections wait for their app to hear
					   of a release; a parked leader lets go
					   only when none does (NULL: at once) */
	const uint64_t	*session_lease;	/* partitions: until when the session
					   is known to live, from its renewals
					   (fleet.c): a named successor leads
					   on it at once (NULL: none) */
	uint64_t	 claim_watch_sent; /* when the claim's watch was last
					   set, 0 = not set this session */
	uint64_t	 self_watch_sent;  /* ... our node's */
	bool		 children_owed;	/* a leader's watch on the queue is not
					   known to be set (its listing did not
					   answer): set again on reconnecting */

	/* reporting */
	enum election_reason role_reason; /* of the last role change */
	uint64_t	 now;		/* of the event being applied */
	uint64_t	 index;
	struct election_report last;

	/* a slow ZooKeeper (doc/design.md, "A slow ZooKeeper"); ZooKeeper
	 * surprises (rule 14) */
	uint64_t	 slow_rtt;	/* the round trip that barred terms; 0: none */
	int		 slow_runs;	/* slow round trips in a row */
	int		 fast_runs;	/* fast ones in a row, while barred */
	bool		 no_access;	/* the last answer on the path was NOAUTH */
	bool		 no_chroot;	/* the path's top could not be created */
	int		 strangers;	/* children of the path that are not
					   contenders, in the last listing */
	char		 stranger[ELECTION_NAME_MAX];	/* the first of them */
};

/*
 * What a step's observers compare before and after it (fleet.c's stepped
 * callback: the driver's logs, the simulators' checks): a few hundred
 * bytes, where a copy of the whole election would be seven kilobytes on
 * every step of every partition.
 */
struct election_glance {
	enum election_role role;
	enum election_phase phase;
	enum election_session session;
	enum election_bar bar;		/* last.bar */
	int		 timeout_ms;
	int		 strangers;
	uint64_t	 epoch;
	uint64_t	 lease_deadline;
	uint64_t	 riding_since;
	uint64_t	 index;		/* moves when the report changes */
	char		 stranger[ELECTION_NAME_MAX];
};

void	election_glance(const struct election *e, struct election_glance *g);

/* Sets up an election for ID; VALUE (may be NULL) travels in its claims. */
void election_init(struct election *e, const char *id, const char *value,
    bool candidate);
/* Frees what the election holds (the list of contenders ahead). */
void election_free(struct election *e);

/* Applies one event; appends actions to out (which the caller zeroes). */
void election_step(struct election *e, const struct election_event *ev,
    struct election_actions *out);

/*
 * Partitions: the session's renewal was sent at now on this connection; a
 * leading election counts it among its requests (the lease's anchor).
 */
void election_session_sent(struct election *e, uint64_t now);

/* The lease a round trip of this election's connection, sent at s and
 * answered, earns (0: none): the deadline a renewal answered now would
 * give. */
uint64_t election_lease_for(const struct election *e, uint64_t s);

/* The role to report at time now: leader only while the lease has time. */
enum election_role election_role_at(const struct election *e, uint64_t now);

/* Lease time left at now, in ms (0 when not leading or lapsed). */
uint64_t election_lease_remaining(const struct election *e, uint64_t now);

/* Age of the candidate count at now, in ms (0: kept current; -1: none). */
int64_t election_candidates_age(const struct election *e, uint64_t now);

/* Hold time left at now, in ms (0 unless resigned and holding). */
uint64_t election_hold_remaining(const struct election *e, uint64_t now);

/* Fills the reportable view (leader as followers see it, etc.). */
void election_report(const struct election *e, struct election_report *r);

/* The earliest time an EV_TICK is due, or 0 if none is. */
uint64_t election_next_tick(const struct election *e);

/* Parses a contender name "..latch-NNNNNNNNNN"; -1 if it is not one. */
int64_t election_node_seq(const char *name);

const char *election_role_name(enum election_role role);
const char *election_reason_name(enum election_reason reason);
const char *election_session_name(enum election_session s);
const char *election_phase_name(enum election_phase p);
const char *election_action_name(enum election_action_type t);
const char *election_server_name(enum election_server s);
/* "assumed", "tick_time" or "servers". */
const char *election_tick_from_name(enum election_tick_from f);
/* Why a candidate does not lead, in words; NULL for BAR_NONE. */
const char *election_bar_name(enum election_bar b);
/* The same for a report, with its figures (the slow round trip), in buf. */
const char *election_bar_text(const struct election_report *r, char *buf,
    size_t len);

#endif
