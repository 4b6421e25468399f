/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_SIM_H
#define ZKELECT_SIM_H

/*
 * A deterministic simulator of zkelect agents against a model of a
 * ZooKeeper ensemble. The agents run the real election.c; the model stands
 * for the servers (sim-zk.c), the C client (sim-client.c) and the driver
 * zk.c (sim-agent.c); seeded faults (sim-fault.c) and exact checks
 * (sim-check.c) run on one simulated clock in microseconds of true time.
 * One PRNG seeded from the command line drives everything, so a seed
 * replays bit for bit.
 */

#include <stdbool.h>
#include <stdint.h>

#include "election.h"
#include "fleet.h"

#define SIM_AGENTS_MAX		6
#define SIM_SERVERS_MAX		5
#define SIM_CHILDREN_MAX	48
#define SIM_DATA_MAX		32
#define SIM_CWATCH_MAX		24
#define SIM_ZXID_BASE		((int64_t)1 << 32)	/* epoch 1, counter 0 */

typedef uint64_t stime;		/* true time, microseconds */

struct handle;
struct conn;
struct msg;

/* --- sim.c: the clock, the queue, the PRNG, the trace --- */

typedef void (*sim_fn)(void *p, uint64_t a);

uint64_t sim_rand(void);
uint64_t sim_below(uint64_t n);		/* uniform in [0, n) */
uint64_t sim_range(uint64_t lo, uint64_t hi);	/* uniform in [lo, hi] */
bool	 sim_chance(unsigned percent);
void	 sim_at(stime t, sim_fn fn, void *p, uint64_t a);
void	 sim_at_msg(stime t, sim_fn fn, struct msg *m);
void	 sim_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void	 sim_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- Nodes, transactions, requests and replies --- */

struct znode {
	char		 name[ELECTION_NAME_MAX];
	char		 data[SIM_DATA_MAX];
	int		 datalen;
	int64_t		 czxid, mzxid, owner;
};

/* The election node and its children: all the tree the agents use. */
struct ztree {
	bool		 exists;
	char		 data[SIM_DATA_MAX];
	int		 datalen;		/* -1 = null data */
	int64_t		 czxid, mzxid, pzxid;
	int		 cversion;
	int		 n;
	struct znode	 child[SIM_CHILDREN_MAX];
};

enum zop {
	ZOP_PING, ZOP_SETWATCHES, ZOP_SYNC, ZOP_EXISTS, ZOP_GET, ZOP_CHILDREN,
	ZOP_CREATE_PARENT, ZOP_CREATE, ZOP_DELETE, ZOP_SET, ZOP_CHECK,
	ZOP_MULTI, ZOP_CLOSE,
};

/* One operation; name "" is the election node itself. */
struct zop_one {
	enum zop	 type;
	char		 name[ELECTION_NAME_MAX];
	char		 data[SIM_DATA_MAX];
	int		 datalen;
};

/* What a request is for, as zk.c's kinds (and for the fault triggers). */
enum kind {
	K_NONE, K_PARENT, K_CREATE, K_LIST, K_SYNC, K_PRED_SET, K_OWNER,
	K_CLAIM, K_RENEW, K_CLAIM_DATA, K_SUCCESSOR, K_RELEASE, K_SELF_SET,
	K_CLOSE, K_AHEAD,
};

/* Watch contexts, constant per kind as in zk.c. */
enum wctx { W_NONE, W_PRED, W_SELF, W_CLAIM, W_CHILD };

enum wtype { WT_CREATED = 1, WT_DELETED = 2, WT_CHANGED = 3, WT_CHILD = 4 };

struct zreq {
	int		 xid;
	enum kind	 kind;		/* metadata for traces and faults */
	int		 sub;		/* renewal: which of its three calls */
	enum zop	 type;
	bool		 watch;
	int		 nops;
	struct zop_one	 op[3];		/* op[0] alone unless ZOP_MULTI */
	int64_t		 rel_zxid;	/* ZOP_SETWATCHES */
	int		 nwdata, nwchild;
	char		 wdata[SIM_CWATCH_MAX][ELECTION_NAME_MAX];
	char		 wchild[2][ELECTION_NAME_MAX];
};

struct zstat {
	int64_t		 czxid, mzxid, pzxid, owner;
};

struct zreply {
	int		 xid;
	int		 rc;
	int64_t		 zxid;		/* header */
	char		 path[ELECTION_NAME_MAX + 8];	/* create: what was made */
	struct zstat	 st;
	char		 data[SIM_DATA_MAX];
	int		 datalen;	/* -1 = null */
	int		 nchildren;
	char		**children;
	int		 results[3];	/* multi */
	int64_t		 set_mzxid;	/* multi: the setData's stat */
};

#define XID_PING	(-2)
#define XID_SETWATCHES	(-8)

/* --- Channels: FIFO links that hold messages while blocked --- */

/* CH_O2M and CH_M2O: an observer's link to its ObserverMaster (--shape
 * relay), which its syncs take both ways. */
enum chan_kind { CH_C2S, CH_S2C, CH_L2F, CH_F2L, CH_O2M, CH_M2O };

struct chan {
	enum chan_kind	 kind;
	struct conn	*conn;		/* CH_C2S, CH_S2C */
	int		 server;	/* CH_L2F, CH_F2L: the follower;
					   CH_O2M, CH_M2O: the observer */
	stime		 last_at;
	struct msg	*held, **held_tail;
	bool		 draining;
};

enum msg_type {
	M_CONNECT, M_REQUEST, M_FIN,			/* client -> server */
	M_CONNECTED, M_REPLY, M_WATCH, M_EOF,		/* server -> client */
	M_FORWARD, M_NEWSESSION, M_REVALIDATE, M_PING_ACK, /* follower -> leader */
	M_COMMIT, M_SYNCED, M_REVALIDATED, M_PING,	/* leader -> follower */
};

struct msg {
	struct msg	*next;
	enum msg_type	 type;
	struct chan	*chan;
	uint64_t	 incarnation;	/* leader links: the follower's */
	struct conn	*conn;		/* leader links: the client's */
	uint64_t	 req_id;
	int64_t		 session, zxid;
	int		 timeout_ms;
	bool		 valid;
	int		 wtype;
	char		 name[ELECTION_NAME_MAX];
	int64_t		*sessions;	/* M_PING_ACK */
	int		 nsessions;
	/* M_FORWARD, M_SYNCED: a sync an observer sent through its
	 * ObserverMaster (LearnerSyncRequest), for that observer's link */
	bool		 via_master;
	int		 observer;
	uint64_t	 obs_incarnation;
	struct zreq	 req;		/* M_REQUEST, M_FORWARD */
	struct zreply	 rep;		/* M_REPLY */
};

struct msg *msg_new(enum msg_type type);
void	 msg_free(struct msg *m);
void	 chan_init(struct chan *c, enum chan_kind kind, struct conn *conn,
	    int server);
void	 chan_send(struct chan *c, struct msg *m);
void	 chan_release(struct chan *c, bool at_once);
void	 chan_drop(struct chan *c);
void	 chan_arrive_cb(void *p, uint64_t a);
stime	 net_delay(void);

/* --- sim-zk.c: the ensemble; server 0 leads it --- */

struct sreq {
	struct sreq	*next;
	uint64_t	 id;
	struct zreq	 req;
	bool		 done;
	struct zreply	 rep;
};

/* A connection, both ends. */
struct conn {
	struct conn	*all_next;
	uint64_t	 id;
	struct handle	*h;		/* the client end, NULL once it closed */
	int		 agent, server;
	bool		 client_open, server_open, server_closed;
	bool		 established;	/* server side: the handshake is done */
	bool		 syn_lost;	/* its connect met a partition */
	int64_t		 session;	/* server side */
	struct chan	 c2s, s2c;
	struct sreq	*q_head, **q_tail;
	uint64_t	 next_req;
};

struct zsession {
	int64_t		 id;
	int		 timeout_ms;
	stime		 expiry;
	bool		 closing;
	int		 owner;		/* server it last (re)validated on, -1 =
					   none yet (a new ZooKeeper leader) */
	int		 agent;		/* for traces and checks */
	int		 create_timeout_ms;	/* negotiated at its creation: a
					   new ZooKeeper leader restores it */
};

struct syncw {
	struct syncw	*next;
	int		 server;
	struct conn	*conn;
	uint64_t	 req_id;
	bool		 via_master;	/* server is the ObserverMaster ... */
	int		 observer;	/* ... of the observer it came from */
	uint64_t	 obs_incarnation;
};

enum txn_type { TXN_OP, TXN_NEWSESSION, TXN_CLOSESESSION };

struct top {
	enum zop	 type;		/* ZOP_CREATE_PARENT .. ZOP_CHECK */
	char		 name[ELECTION_NAME_MAX];
	char		 data[SIM_DATA_MAX];
	int		 datalen;
	int64_t		 owner;
	int		 rc;
};

struct txn {
	int64_t		 zxid;
	enum txn_type	 type;
	int		 rc;
	int		 nops;
	struct top	*ops;
	int64_t		 session;
	int		 origin;	/* server, or -1 */
	struct conn	*conn;
	uint64_t	 req_id;
	stime		 prepped_at, commit_at;
	struct zreply	 rep;
	struct syncw	*syncs;
	/* for the checks */
	int		 writer;	/* agent, or -1 */
	bool		 lowest;	/* the node it names is the lowest */
	char		 named_node[ELECTION_NAME_MAX];
	bool		 is_claim, is_release;
};

struct apply_item {
	struct apply_item *next;
	int64_t		 zxid;		/* 0 = a sync */
	struct conn	*conn;
	uint64_t	 req_id;
	stime		 ready_at;
	int64_t		 point;		/* a sync through an ObserverMaster,
					   parked: the commit it waits for */
};

struct swatch {
	struct conn	*conn;
	char		 name[ELECTION_NAME_MAX];
	int		 kind;		/* 0 data, 1 child, 2 exist */
};

struct server {
	int		 idx;
	bool		 stopped;
	stime		 stopped_at;
	bool		 serving;	/* follower: following, serving clients */
	bool		 in_quorum;	/* leader's view of this follower */
	bool		 part_leader;	/* cut off from the leader */
	uint64_t	 incarnation;
	stime		 heard;		/* last message from the leader */
	stime		 acked;		/* leader: last message from it */
	stime		 lag;		/* extra apply delay of commits */
	bool		 rejoining;
	struct ztree	 tree;
	int64_t		 applied;
	struct chan	 l2f, f2l;
	struct apply_item *aq_head, **aq_tail;
	stime		 aq_last;
	int64_t		 aq_zxid;	/* the last commit queued */
	struct apply_item *sync_wait;	/* syncs back through the master
					   before the commits they follow */
	int64_t		 touched[SIM_AGENTS_MAX * 8];
	int		 ntouched;
	int		 max_timeout_ms;	/* maxSessionTimeout */
	bool		 observer;	/* --shape relay: an observer ... */
	int		 master;	/* ... behind this ObserverMaster */
	struct chan	 o2m, m2o;	/* ... linked to it both ways */
	uint64_t	 master_inc;	/* ... in its incarnation then */
	stime		 master_heard;	/* ... which pinged it last then */
	bool		 deposed;	/* --shape deposed: a ZooKeeper leader cut
					   off from the quorum, still serving
					   reads and syncs to its clients */
	bool		 dep_hang;	/* ... with a proposal that will never
					   commit: its syncs hang */
	struct swatch	*watches;
	int		 nwatches, capwatches;
};

void	 zk_init(void);
void	 zk_free(void);
void	 zk_server_recv(struct conn *c, struct msg *m);
void	 zk_follower_recv(int s, struct msg *m);
void	 zk_leader_recv(int s, struct msg *m);
void	 zk_master_recv(int o, struct msg *m);
void	 zk_observer_recv(int o, struct msg *m);
void	 zk_server_stop(int s, stime duration);
void	 zk_server_partition(int s, stime duration);
void	 zk_server_close_conn(struct conn *c, bool eof);
void	 zk_depose(stime duration, bool crash);
void	 zk_leader_fail(stime duration, bool host);
bool	 zk_leaderless(void);
int	 zk_leader(void);
struct txn *zk_txn(int64_t zxid);
struct conn *conn_new(struct handle *h, int server);
const struct ztree *zk_truth(void);

/* --- sim-client.c: the C client --- */

enum hstate { HS_CONNECTING, HS_CONNECTED, HS_EXPIRED, HS_CLOSED };

struct agg {
	int		 refs, rc, failed_op;
	int64_t		 owner, czxid, mzxid, pzxid;
	char		 data[SIM_DATA_MAX];
	int		 datalen;
	bool		 has_data;
};

struct creq {
	struct creq	*next;
	enum kind	 kind;
	uint64_t	 gen;
	char		 name[ELECTION_NAME_MAX];
	enum wctx	 wctx;		/* activate on success */
	bool		 child_watch;
	struct agg	*agg;
	int		 sub;
	bool		 sent;
	struct zreq	 req;
};

struct cwatch {
	char		 name[ELECTION_NAME_MAX];
	enum wctx	 ctx;
};

struct addrvec {
	int		 data[SIM_SERVERS_MAX];
	int		 count, next;
};

struct handle {
	struct handle	*all_next;
	uint64_t	 id;
	int		 agent;
	enum hstate	 state;
	int64_t		 session_id;
	int		 timeout_ms;
	uint64_t	 opened_ms;	/* the agent's clock when it was opened */
	struct addrvec	 addrs, addrs_new;
	bool		 reconfig, delay;
	struct conn	*conn;
	bool		 connected;
	uint64_t	 last_send, last_recv;	/* the agent's clock, µs */
	uint64_t	 reconnect_at;
	struct creq	*out, **out_tail;
	int64_t		 last_zxid;
	int		 xid;
	struct cwatch	 data[SIM_CWATCH_MAX];
	int		 ndata;
	struct cwatch	 child[4];
	int		 nchild;
	uint64_t	 timer_ver;
	bool		 resign_on_loss;	/* a fault: resign once it drops */
	uint64_t	 resign_hold_ms;
};

struct handle *client_open(int agent);
void	 client_close(struct handle *h, bool send_close);
void	 client_free(struct handle *h);
void	 client_submit(struct handle *h, struct creq *r);
void	 client_kick(struct handle *h);
void	 client_recv(struct conn *c, struct msg *m);
void	 client_check(struct handle *h);
int	 client_peek_next(const struct handle *h);
bool	 zk_session_holds_node(int64_t session);
void	 client_free_all(void);

/* --- sim-agent.c: agents, the driver, the inbox --- */

struct inmsg {
	struct inmsg	*next;
	uint64_t	 hid;		/* handle that produced it, 0 = none */
	enum election_event_type type;
	uint64_t	 gen;
	int		 rc, failed_op;
	enum election_session session;
	int64_t		 session_id;
	int		 timeout_ms;
	char		*name;
	char		*data;
	int		 datalen;
	char		**names;
	int		 count;
	int64_t		 zxid, pzxid, czxid, owner;
	uint64_t	 hold_ms;
	uint64_t	 sent;		/* EV_SESSION: the handle's opening (ms) */
	bool		 deleted;
	enum election_server server;	/* EV_SERVER */
	int		 min_timeout_ms;	/* EV_SERVER */
};

struct agent {
	int		 idx;
	char		 id[16];
	bool		 candidate;
	bool		 running;
	bool		 paused;
	stime		 resumed_at;
	bool		 stopping;	/* EV_STOP given, not exited yet */
	uint64_t	 incarnation;
	int64_t		 offset_us;
	int		 ppm;		/* clock rate: 1 + ppm / 1e6 */
	int		 servers[SIM_SERVERS_MAX];
	int		 nservers;
	struct fleet	 f;		/* a fleet of one (fleet.c), as zk.c runs it */
	struct election	*e;		/* its election: &f.parts[0].e */
	/* the event being stepped, for the trace */
	enum election_event_type ev_type;
	const char	*ev_name;
	int		 ev_rc;
	uint64_t	 ev_gen;
	struct handle	*h;
	struct inmsg	*in_head, **in_tail;
	bool		 run_scheduled;
	uint64_t	 tick_ver;
	bool		 tick_due;
	uint64_t	 ticks_same_ms, last_tick_ms;
	stime		 hook_us;	/* how long telling the app takes */
	stime		 next_hook_us;	/* one-off override, 0 = none */
	stime		 restart_after;	/* once exited: restart after this */
	/* checks */
	bool		 telling;	/* a loss is being told, not done */
	uint64_t	 told_owed;	/* the latest loss the app must hear of */
	uint64_t	 told_done;	/* ... and the latest it has heard of */
	uint64_t	 hold_until;	/* local ms: no term before this */
	stime		 resigned_at;	/* no term with a node made before */
	stime		 lead_start;	/* true time its last term began */
	stime		 lead_end;	/* true time its last term ended */
	bool		 end_lapsed;	/* ... because its lease lapsed */
	stime		 expired_at;	/* the ZooKeeper leader expired it */
	int		 lead_T_ms;	/* T of its last term's session */
	bool		 only_observers;	/* --shape relay: its servers */
	int		 last_server;	/* its last connection's */
};

uint64_t agent_local_us(const struct agent *a, stime t);
uint64_t agent_now_ms(const struct agent *a);
stime	 agent_true_at(const struct agent *a, uint64_t local_us);
void	 agent_start(struct agent *a);
void	 agent_push(struct agent *a, struct inmsg *m);
struct inmsg *inmsg_new(uint64_t hid, enum election_event_type type);
void	 agent_pause(struct agent *a, stime duration);
void	 agent_crash(struct agent *a, stime restart_after);
void	 agent_stop(struct agent *a, stime restart_after);
void	 agent_resign(struct agent *a, uint64_t hold_ms);
void	 agent_free(struct agent *a);

/* The driver's callbacks (zk.c's), called by the client. */
void	 driver_complete(struct handle *h, struct creq *r, int rc,
	    const struct zreply *rep);
void	 driver_watch(struct handle *h, enum wctx ctx, const char *name,
	    int wtype);
void	 driver_session(struct handle *h, enum election_session state);
void	 driver_connected(struct handle *h);

/* --- sim-check.c: what must hold at every step --- */

void	 check_step(struct agent *a, const struct election_glance *before,
	    const struct election_actions *out);
void	 check_create(const struct txn *t, int64_t session);
void	 check_liveness_cb(void *p, uint64_t a);
void	 check_note_leaders(void);

/* --- sim-fault.c --- */

void	 fault_plan(void);
void	 fault_heal_at(stime t);
void	 fault_note_resign(struct agent *a, uint64_t hold_ms);
bool	 fault_lose_reply(struct conn *c, const struct zreq *r);
bool	 fault_stop_after_reply(struct conn *c, const struct zreq *r);

/* --- The run --- */

struct sim_stats {
	uint64_t	 steps, terms, txns, faults, events;
	int64_t		 min_gap_us;	/* new leader's start - old one's end */
	int64_t		 min_lapse_gap_us;	/* same, after the old one's lease
						   lapsed and its session expired */
	double		 min_lapse_gap_t;	/* that gap over T */
	double		 min_lapse_gap_own;
	double		 min_dep_gap_own;	/* same, for an old leader on a
						   deposed ZooKeeper leader */	/* over the old leader's own T
						   (its session's smallest) */
	uint64_t	 expiry_takeovers;
	uint64_t	 liveness_fails;	/* with --safety-only */
	uint64_t	 margin_fails;	/* takeovers closer than the margin */
	uint64_t	 depositions;	/* ZooKeeper leaders deposed or failed */
	uint64_t	 depositions_under;	/* ... with the leading agent
						   connected to it */
	uint64_t	 dep_margin_fails;
	uint64_t	 shrunk_margin_fails;	/* ... from a leader whose T was
						   not the one asked for */	/* margin failures within 6T of
						   a deposition */
	uint64_t	 flaps;		/* terms lost to a lapse while connected
					   and running */
	uint64_t	 obs_syncs;	/* --shape relay: syncs an observer sent
					   through its ObserverMaster ... */
	uint64_t	 obs_syncs_back;	/* ... that came back to it */
	uint64_t	 obs_master_lost;	/* observers that gave up on
						   their master */
	stime		 max_recovery_us;	/* first leader after the last heal */
	double		 max_recovery_t;
};

struct sim {
	uint64_t	 seed;
	uint64_t	 rng;
	stime		 now;
	uint64_t	 qseq;
	struct qent	*heap;
	int		 nheap, capheap;
	int		 verbose;
	bool		 failed;
	bool		 overlap;	/* the failure is two leaders at once */
	bool		 overlap_dep;	/* ... within 6T of a deposition */
	stime		 last_depose_at;
	int		 last_deposed;	/* that leader */
	char		 failure[1024];
	stime		 fail_at;
	bool		 stop;

	/* the configuration of this seed */
	int		 nservers, nagents;
	int		 T_ms, tick_ms;
	stime		 T, tick;
	int		 sync_limit;
	int		 drift_ppm;	/* the bound on clock rates */
	bool		 legacy;
	bool		 loss_completions_first;	/* not zookeeper.c's order */
	int		 fault_mix;	/* -1 all, else one fault kind */
	unsigned	 shapes;	/* SHAPE_* */
	bool		 tick_known;	/* the agents' e.tick_ms is tickTime */
	int		 understate;	/* ... tickTime / understate (--understate) */
	bool		 no_learn;	/* --no-learn: the probe never learns
					   minSessionTimeout (the agent before
					   it asked) */
	bool		 learn_fails;	/* this seed's probes learn nothing */
	bool		 safety_only;	/* liveness failures only counted */
	int		 leader;	/* the ZooKeeper leader (or the last) */
	bool		 leaderless;	/* deposed, no new leader yet */
	bool		 electing;	/* ... its election under way */
	int		 dep_nsessions;	/* the sessions a deposed leader's
					   tracker holds: those made before */
	bool		 leader_failed;	/* zk_leader_fail: the next leader is
					   another process, its ticks at
					   another phase */
	stime		 tick_phase;	/* the leader's tick boundaries are
					   tick_phase + k tick */
	uint64_t	 expiry_gen;	/* of the leader's expiry ticks */
	int		 nvoters;	/* servers that are not observers */

	struct server	 servers[SIM_SERVERS_MAX];
	struct ztree	 prep;		/* the leader's outstanding view */
	struct txn	*log;
	int		 nlog, caplog;
	int64_t		 committed;
	stime		 last_commit_at;
	struct zsession	*sessions;
	int		 nsessions, capsessions;
	int64_t		 next_session;
	stime		 ping_phase;
	bool		 part_as[SIM_AGENTS_MAX][SIM_SERVERS_MAX];

	struct agent	 agents[SIM_AGENTS_MAX];
	struct conn	*conns;
	struct handle	*handles;
	uint64_t	 next_conn, next_handle;

	/* checks */
	uint64_t	 max_epoch;
	stime		 last_heal;
	stime		 faults_end;
	stime		 end_at;
	stime		 first_lead_after_heal;
	stime		 liveness_bound;

	struct sim_stats st;
};

extern struct sim *S;

/* Shapes of deployment (--shape), each a switch of the model. */
#define SHAPE_SHRINK	0x1	/* mixed maxSessionTimeout */
#define SHAPE_RELAY	0x2	/* observers behind an ObserverMaster */
#define SHAPE_TICK_HALF	0x4	/* tickTime = T/2 */
#define SHAPE_DEPOSED	0x8	/* the ZooKeeper leader deposed or failed */
#define SHAPE_FAILOVER	0x10	/* the ZooKeeper leader's process or host
				   fails (fault 17) */

static inline int64_t
zxid_of(int idx)
{
	return SIM_ZXID_BASE + 1 + idx;
}

#endif
