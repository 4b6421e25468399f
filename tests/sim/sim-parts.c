/* SPDX-License-Identifier: MIT */
/*
 * zkelect-sim-parts: agents over several partitions (doc/design.md,
 * "Partitions"), each agent one ZooKeeper session, a member node, and the
 * real election.c per partition; assign.c decides who queues where. The
 * member listing, the session's renewal and the graceful stop are driven
 * as agent/zk.c drives them. ZooKeeper is modelled as one linearizable
 * server (the ZooKeeper leader: sessions expire from its own touches,
 * rounded up to ticks), with per-agent FIFO links that can be cut, and
 * the C client's pings, 2T/3 give-up, reconnects and watch re-arming.
 * With --failover that leader also fails, and a new one takes over with a
 * new session tracker (zkelect-sim's fault 17). With --shape, zkelect-sim's
 * shapes of deployment as switches of this model (p_shapes_init): a
 * deposed leader serving its side, observers relaying touches and syncs
 * through an ObserverMaster, tickTime = T/2, a lower maxSessionTimeout on
 * some servers.
 * Checked at every step (README.md, "Partitions"): one owner per
 * partition at any instant, each partition's epochs grow, balance after
 * the faults heal, and a graceful leave moves only the leaver's
 * partitions. One PRNG per seed: a failing seed replays bit for bit.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "assign.h"
#include "config.h"
#include "election.h"
#include "fleet.h"
#include "log.h"
#include "zkplan.h"

#define PA_MAX		6	/* agents */
#define PP_MAX		16	/* partitions */
#define PT_MAX		(PP_MAX + 1)	/* trees: 0 members, 1 + p partition p */
#define PC_MAX		40	/* children of a tree */
#define PM_MAX		64	/* members listed */
#define PD_MAX		64	/* node data */
#define PW_MAX		64	/* a client's watches */
#define NAME		ELECTION_NAME_MAX
#define STOP_WAIT_MS	5000	/* AGENT_PARTS_STOP_WAIT_MS */
#define PS_MAX		8	/* servers (--shape) */
#define PR_RING		2048	/* touches relayed, in flight */
#define PR_SESS		16	/* sessions in one report */

typedef uint64_t stime;		/* true time, microseconds */
typedef void (*pfn)(void *p, uint64_t a);

/* --- The clock, the queue, the PRNG, the trace --- */

struct qent {
	stime		 t;
	uint64_t	 seq;
	pfn		 fn;
	void		*p;
	uint64_t	 a;
	bool		 owns_msg;
};

enum mtype {
	M_CONNECT, M_REQ, M_PING, M_CLOSE, M_FIN,	/* to the server */
	M_CONNECTED, M_REPLY, M_WATCH, M_PONG, M_EOF,	/* to the client */
};

enum op {
	O_SYNC, O_EXISTS, O_GET, O_CHILDREN, O_CREATE_PARENT, O_CREATE,
	O_DELETE, O_SET, O_CHECK, O_MULTI,
};

/* What a call is for: what its completion becomes (zk.c's kinds). */
enum kind {
	K_NONE, K_PARENT, K_CREATE, K_LIST, K_PRED_SET, K_SELF_SET, K_OWNER,
	K_CLAIM, K_RELEASE, K_RENEW, K_CLAIM_DATA, K_SUCCESSOR, K_AHEAD,
	K_MCREATE, K_MLIST, K_MDATA, K_MDELETE, K_SRENEW, K_MSET,
};

/* Watch contexts, as zk.c's. */
enum ctx { C_PRED, C_SELF, C_CLAIM, C_CHILD, C_MEMBERS, C_MDATA };
enum wkind { WK_DATA, WK_CHILD };
enum wtype { WT_CREATED = 1, WT_DELETED = 2, WT_CHANGED = 3, WT_CHILD = 4 };

struct pop {
	enum op		 type;
	char		 name[NAME];	/* "" = the tree's node itself */
	char		 data[PD_MAX];
	int		 datalen;
};

struct preq {
	int		 xid;
	int		 tree;
	bool		 watch;
	int		 nops;
	struct pop	 op[3];
};

struct prep {
	int		 xid, rc;
	char		 path[NAME];
	int64_t		 czxid, mzxid, pzxid, owner;
	int64_t		 ctime;
	char		 data[PD_MAX];
	int		 datalen;		/* -1 = null */
	char		**children;
	int		 nchildren;
	int		 results[3];
	int64_t		 set_mzxid;
};

struct wreg {
	int		 tree;
	char		 name[NAME];
	enum wkind	 kind;
	enum ctx	 ctx;
	int		 part;
};

struct pconn;

struct pmsg {
	struct pmsg	*next;		/* a paused agent's socket */
	enum mtype	 type;
	struct pconn	*c;
	int64_t		 session, zxid;
	int		 timeout_ms;
	bool		 valid;
	struct preq	 req;
	struct prep	 rep;
	int		 tree, wtype;
	char		 name[NAME];
	struct wreg	*w;		/* M_CONNECT: the watches to set again */
	int		 nw;
};

struct pconn {
	struct pconn	*next;
	uint64_t	 id;
	int		 agent;
	int		 server;	/* --shape: the server it is on */
	bool		 dep;		/* on the deposed leader's side */
	bool		 hung;		/* a request that never commits: what
					   follows it waits too */
	bool		 syncing;	/* --shape relay: a sync on its way
					   through the ObserverMaster ... */
	struct preq	 sync_req;
	struct pmsg	*wait_head, **wait_tail;	/* ... and what
					   came after it, waiting */
	bool		 client_open, server_open;
	int64_t		 session;
	stime		 c2s_last, s2c_last;
	struct phandle	*h;
};

/* --- The server --- */

struct pnode {
	char		 name[NAME];
	char		 data[PD_MAX];
	int		 datalen;
	int64_t		 czxid, mzxid, owner;
	int64_t		 ctime;		/* ms, the model's wall clock */
};

struct ptree {
	bool		 exists;
	char		 data[PD_MAX];
	int		 datalen;
	int64_t		 czxid, mzxid, pzxid;
	int		 cversion;
	int		 n;
	struct pnode	 c[PC_MAX];
};

struct psess {
	int64_t		 id;
	int		 timeout_ms;
	int		 create_timeout_ms;	/* a new leader restores it */
	bool		 dep_alive;	/* alive in the deposed leader's view */
	stime		 expiry;
	bool		 alive;
	struct pconn	*conn;
	int		 agent;
};

struct swatch {
	struct pconn	*c;
	int		 tree;
	char		 name[NAME];
	enum wkind	 kind;
};

/*
 * --shape: the servers a connection can be on. The tree and the session
 * tracker are still the ZooKeeper leader's alone; a server is what a
 * connection sees of them: its maxSessionTimeout (shrink), whether it is
 * an observer whose touches and syncs go through an ObserverMaster
 * (relay), whether it is on the deposed leader's side (deposed).
 */
struct psrv {
	bool		 observer;
	int		 master;	/* an observer's ObserverMaster */
	int		 max_timeout_ms;
	bool		 down;		/* stopped (a master), or an observer
					   whose master is gone */
	bool		 dep_side;	/* the deposed leader, or attached to it */
	int64_t		 touched[PR_SESS];
	int		 ntouched;
};

/* Touches on their way: observer -> master, or master -> leader. */
struct prelay {
	int		 to;		/* the master, or -1 for the leader */
	int		 n;
	int64_t		 s[PR_SESS];
};

/* --- The client --- */

struct agg {
	int		 refs, rc, failed_op;
	int64_t		 owner, czxid, mzxid, pzxid;
	char		 data[PD_MAX];
	int		 datalen;
	bool		 has_data;
	uint64_t	 asked;		/* the fleet's step time (ms), as zk.c
					   passes back a renewal's */
};

struct pcreq {
	struct pcreq	*next;
	enum kind	 kind;
	int		 part;
	uint64_t	 gen;
	char		 name[NAME];
	bool		 set_watch;
	enum ctx	 ctx;
	enum wkind	 wkind;
	struct agg	*agg;
	int		 sub;
	bool		 sent;
	struct preq	 req;
};

enum hstate { HS_CONNECTING, HS_CONNECTED, HS_EXPIRED, HS_CLOSED };

struct phandle {
	struct phandle	*next;
	uint64_t	 id;
	int		 agent;
	enum hstate	 state;
	int64_t		 session;
	int		 timeout_ms;
	uint64_t	 opened_ms;
	struct pconn	*conn;
	bool		 connected;
	uint64_t	 last_send, last_recv;	/* the agent's clock, µs */
	struct pcreq	*out, **out_tail;
	int		 xid;
	int64_t		 last_zxid;
	struct wreg	 w[PW_MAX];
	int		 nw;
	uint64_t	 ver;
	struct pmsg	*pend, **pend_tail;	/* arrived while paused */
	int		 perm[PS_MAX];	/* --shape: its server list, shuffled */
	int		 next_srv;
};

/* --- The agents --- */

enum iwhat { I_EV, I_MEMBER, I_SRENEW, I_MDATA_WATCH };

struct item {
	struct item	*next;
	uint64_t	 hid;
	enum iwhat	 what;
	enum kind	 kind;		/* I_MEMBER: which answer */
	bool		 watch;		/* I_MEMBER: the listing's watch */
	int		 part;		/* I_EV: -1 = every partition */
	struct election_event ev;
	char		*name, *data, **names;
};


struct pagent {
	int		 idx;
	char		 id[16];
	bool		 started, running, paused, stopping;
	uint64_t	 inc;
	int64_t		 offset_us;
	int		 ppm;
	stime		 hook_us;
	stime		 restart_after;	/* 0 = do not come back */
	struct fleet	 f;		/* its session and partitions (fleet.c) */
	struct phandle	*h;
	struct item	*in_head, **in_tail;
	bool		 run_sched;
	uint64_t	 tick_ver;
	/* checks */
	uint64_t	 last_tick_ms, ticks_same_ms;
};

struct psim {
	uint64_t	 seed, rng;
	stime		 now;
	uint64_t	 qseq;
	struct qent	*heap;
	int		 nheap, capheap;
	int		 verbose;
	bool		 failed, stop;
	char		 failure[512];
	stime		 fail_at;

	int		 nagents, nparts, T_ms, tick_ms;
	stime		 T, tick;
	bool		 tick_known;
	char		 pname[PP_MAX][12];

	struct ptree	 tree[PT_MAX];
	int64_t		 zxid;
	struct psess	*sess;
	int		 nsess, capsess;
	int64_t		 next_session;
	struct swatch	*sw;
	int		 nsw, capsw;
	stime		 blocked_until[PA_MAX];
	bool		 lose_reply[PA_MAX];
	/* --failover: the ZooKeeper leader fails; until a new one takes
	 * over, no connection is served. Its ticks fall at tick_phase. */
	bool		 zk_down;
	stime		 tick_phase;
	uint64_t	 expiry_gen, failovers;
	/* --shape */
	int		 nservers, nvoters, zk_leader;
	struct psrv	 srv[PS_MAX];
	struct prelay	 relay[PR_RING];
	int		 relay_next, relay_inflight;
	bool		 dep_active;	/* a deposed leader serves its side */
	bool		 dep_leaderless;	/* ... and no new leader yet */
	bool		 dep_hang;	/* a write to it: its syncs hang */
	int64_t		 dep_zxid;	/* what it has applied */
	struct ptree	 dep_tree[PT_MAX];	/* ... and its tree */
	uint64_t	 depositions, relays_lost, shrinks, master_stops;
	uint64_t	 obs_syncs, obs_syncs_back;	/* syncs through an
					   ObserverMaster; came back */
	stime		 master_worst_until;	/* armed (p_master_stop) */
	uint64_t	 dep_under;	/* depositions with a partition's
					   leader on the deposed side */
	struct pconn	*conns;
	uint64_t	 next_conn;
	struct phandle	*handles;
	uint64_t	 next_handle;

	struct pagent	 agents[PA_MAX];

	/* checks */
	uint64_t	 max_epoch[PP_MAX];
	stime		 last_heal, bound, settled_at, faults_end;
	bool		 settled;
	int		 leaver;	/* the graceful leave, -1 before it */
	int		 owner_before[PP_MAX];
	stime		 leave_at;
	uint64_t	 steps, terms, faults, moved;
	stime		 max_settle, max_leave;
	uint64_t	 drains, resigns;
	uint64_t	 losses_in_step;	/* --loss-in-step */
	uint64_t	 earlier;	/* renewals answered with a later one
					   out: sent before the reconnect */
};

static struct psim *S;

/*
 * The partitions' election nodes, as zk.c names them: election_path
 * "/partitions/" + the partition's name. The model holds each as a tree of
 * its own; a path is a node's name in that tree, "" for the tree's node.
 * Their ancestors are not modelled (they exist), as in sim-agent.c.
 */
#define P_PATH		"/zkelect"
#define P_PARTS		P_PATH "/partitions/"
#define P_MEMBERS	P_PATH "/members"

/* --break: a deliberately broken variant, which the checks must catch:
 * "lease", the answer ignores the lease (is_leader = the role alone);
 * "sticky", the assignment ignores who owns what now. */
static int opt_break;
#define BREAK_LEASE	1
#define BREAK_STICKY	2
/* --failover: the ZooKeeper leader's failure is one of the faults drawn
 * (without it, the draws, and so every seed, are as before). */
static bool opt_failover;
/* --shape: zkelect-sim's shapes of deployment, in this model (README.md,
 * "Partitions"). Without it, the draws, and so every seed, are as before. */
static unsigned opt_shapes;
#define SH_SHRINK	0x1	/* mixed maxSessionTimeout */
#define SH_RELAY	0x2	/* observers behind an ObserverMaster */
#define SH_TICK_HALF	0x4	/* tickTime = T/2 */
#define SH_DEPOSED	0x8	/* the ZooKeeper leader deposed */
/* --break naive: the old lease (s + 2T/3 from each renewal sent at s) in
 * every partition, as zkelect-sim's --legacy; the session's renewal keeps
 * its cadence (zk.c's, shape.renew). */
#define BREAK_NAIVE	3
/* --break srvr: the driver never learns what its server is (zk.c when
 * srvr is not allowed: an observer taken for a voting server). */
#define BREAK_SRVR	4
/* --break asked: the agent is told the timeout it asked for, not the one
 * the server negotiated (a lower one, with --shape shrink). */
#define BREAK_ASKED	5
/* --controls: an operator's drains, undrains and resigns of single
 * partitions (with holds) among the faults; at the end one agent may stay
 * drained (doc/design.md, "Moving partitions"). Without it, the draws,
 * and so every seed, are as before. */
static bool opt_controls;
/* --loss-in-step: the connection ends while the loop asks for a renewal
 * (1 in 256 of them, while faults come): the loss is heard after the step,
 * and the renewal goes out after the reconnect, as zookeeper.c queues it. */
static bool opt_loss_in_step;
/* --break drain: a drained member keeps counting in the assignment;
 * --break avoid: a resigned partition stays where it is. */
#define BREAK_DRAIN	6
#define BREAK_AVOID	7

static void p_client_drop(struct phandle *, bool eof);
static void p_agent_push(struct pagent *, struct item *);
static void p_schedule_tick(struct pagent *);
static void p_check_owners(int part);
static void p_check_settled(void);
static void p_heal_at(stime t);
static void p_shapes_init(void);

static uint64_t
p_rand(void)
{
	uint64_t z = (S->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t
p_below(uint64_t n)
{
	return n == 0 ? 0 : p_rand() % n;
}

static uint64_t
p_range(uint64_t lo, uint64_t hi)
{
	return lo + p_below(hi - lo + 1);
}

static bool
p_chance(unsigned percent)
{
	return p_below(100) < percent;
}

static bool
q_less(const struct qent *a, const struct qent *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void
p_at2(stime t, pfn fn, void *p, uint64_t a, bool owns)
{
	struct qent e, tmp;
	int i;

	if (t < S->now)
		t = S->now;
	if (S->nheap == S->capheap) {
		S->capheap = S->capheap ? S->capheap * 2 : 256;
		S->heap = realloc(S->heap, (size_t)S->capheap * sizeof(*S->heap));
		if (S->heap == NULL)
			abort();
	}
	e.t = t;
	e.seq = S->qseq++;
	e.fn = fn;
	e.p = p;
	e.a = a;
	e.owns_msg = owns;
	i = S->nheap++;
	S->heap[i] = e;
	while (i > 0 && q_less(&S->heap[i], &S->heap[(i - 1) / 2])) {
		tmp = S->heap[i];
		S->heap[i] = S->heap[(i - 1) / 2];
		S->heap[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
}

static void
p_at(stime t, pfn fn, void *p, uint64_t a)
{
	p_at2(t, fn, p, a, false);
}

static bool
p_pop(struct qent *out)
{
	struct qent tmp;
	int i = 0, l, r, m;

	if (S->nheap == 0)
		return false;
	*out = S->heap[0];
	S->heap[0] = S->heap[--S->nheap];
	for (;;) {
		l = 2 * i + 1;
		r = l + 1;
		m = i;
		if (l < S->nheap && q_less(&S->heap[l], &S->heap[m]))
			m = l;
		if (r < S->nheap && q_less(&S->heap[r], &S->heap[m]))
			m = r;
		if (m == i)
			break;
		tmp = S->heap[i];
		S->heap[i] = S->heap[m];
		S->heap[m] = tmp;
		i = m;
	}
	return true;
}

static void __attribute__((format(printf, 1, 2)))
p_trace(const char *fmt, ...)
{
	va_list ap;

	if (!S->verbose)
		return;
	printf("%10.6f ", (double)S->now / 1e6);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void __attribute__((format(printf, 1, 2)))
p_fail(const char *fmt, ...)
{
	va_list ap;

	if (S->failed)
		return;
	va_start(ap, fmt);
	vsnprintf(S->failure, sizeof(S->failure), fmt, ap);
	va_end(ap);
	S->failed = true;
	S->fail_at = S->now;
	p_trace("FAIL: %s", S->failure);
}

/* --- Clocks --- */

static uint64_t
a_local_us(const struct pagent *a, stime t)
{
	return (uint64_t)(a->offset_us + (int64_t)t +
	    (int64_t)t * a->ppm / 1000000);
}

static uint64_t
a_now_ms(const struct pagent *a)
{
	return a_local_us(a, S->now) / 1000;
}

static stime
a_true_at(const struct pagent *a, uint64_t local_us)
{
	int64_t t;

	if (local_us <= a_local_us(a, 0))
		return 0;
	t = ((int64_t)local_us - a->offset_us) * 1000000 / (1000000 + a->ppm);
	if (t < 0)
		t = 0;
	while (a_local_us(a, (stime)t) < local_us)
		t++;
	while (t > 0 && a_local_us(a, (stime)t - 1) >= local_us)
		t--;
	return (stime)t;
}

/* --- The network: FIFO links per connection; a cut holds, in order --- */

static stime
p_delay(void)
{
	stime d = p_range(30, 250);

	if (p_chance(2))
		d += p_below(3000);
	return d;
}

static void
msg_free(struct pmsg *m)
{
	int i;

	for (i = 0; i < m->rep.nchildren; i++)
		free(m->rep.children[i]);
	free(m->rep.children);
	free(m->w);
	free(m);
}

static struct pmsg *
msg_new(enum mtype type, struct pconn *c)
{
	struct pmsg *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort();
	m->type = type;
	m->c = c;
	return m;
}

static void p_server_recv(void *, uint64_t);
static void p_client_recv(void *, uint64_t);
static void p_srvr_cb(void *, uint64_t);
static void p_server_refuse(struct pconn *, bool);

static void
p_send(struct pmsg *m, bool to_server)
{
	struct pconn *c = m->c;
	stime *last = to_server ? &c->c2s_last : &c->s2c_last;
	stime t = S->now + p_delay();

	if (S->blocked_until[c->agent] > S->now &&
	    t < S->blocked_until[c->agent] + p_delay())
		t = S->blocked_until[c->agent] + p_delay();
	if (t <= *last)
		t = *last + 1;
	*last = t;
	p_at2(t, to_server ? p_server_recv : p_client_recv, m, 0, true);
}

/* --- The server --- */

/* The next tick boundary of the leader's clock after t (its ticks fall at
 * tick_phase + k tick; tick_phase < tick <= t). */
static stime
round_up(stime t)
{
	return ((t - S->tick_phase) / S->tick + 1) * S->tick + S->tick_phase;
}

static struct psess *
sess_find(int64_t id)
{
	int i;

	for (i = 0; i < S->nsess; i++)
		if (S->sess[i].id == id)
			return &S->sess[i];
	return NULL;
}

static void
sess_touch(struct psess *z)
{
	stime e = round_up(S->now + (stime)z->timeout_ms * 1000);

	if (e > z->expiry)
		z->expiry = e;
}

/* Session ID is in SV's table of touches to report (once). */
static void
p_touched_add(struct psrv *sv, int64_t id)
{
	int i;

	for (i = 0; i < sv->ntouched; i++)
		if (sv->touched[i] == id)
			return;
	if (sv->ntouched < PR_SESS)
		sv->touched[sv->ntouched++] = id;
}

/* A touch where C is: at the leader, or in an observer's table, reported
 * to its ObserverMaster at the leader's next ping (p_relay_cb). */
static void
p_touch(struct pconn *c, struct psess *z)
{
	struct psrv *sv = &S->srv[c->server];

	if (!sv->observer)
		sess_touch(z);
	else
		p_touched_add(sv, z->id);
}

static int
tree_find(const struct ptree *t, const char *name)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->c[i].name, name) == 0)
			return i;
	return -1;
}

static void
sw_add(struct pconn *c, int tree, const char *name, enum wkind kind)
{
	int i;

	for (i = 0; i < S->nsw; i++)
		if (S->sw[i].c == c && S->sw[i].tree == tree &&
		    S->sw[i].kind == kind && strcmp(S->sw[i].name, name) == 0)
			return;
	if (S->nsw == S->capsw) {
		S->capsw = S->capsw ? S->capsw * 2 : 64;
		S->sw = realloc(S->sw, (size_t)S->capsw * sizeof(*S->sw));
		if (S->sw == NULL)
			abort();
	}
	S->sw[S->nsw].c = c;
	S->sw[S->nsw].tree = tree;
	snprintf(S->sw[S->nsw].name, NAME, "%s", name);
	S->sw[S->nsw++].kind = kind;
}

static void
sw_drop_conn(const struct pconn *c)
{
	int i;

	for (i = 0; i < S->nsw; )
		if (S->sw[i].c == c)
			S->sw[i] = S->sw[--S->nsw];
		else
			i++;
}

/* Fires (one-shot) the watches of KIND on (tree, name), in order. */
static void
sw_fire(int tree, const char *name, enum wkind kind, int wtype)
{
	struct pmsg *m;
	int i;

	for (i = 0; i < S->nsw; ) {
		if (S->sw[i].tree != tree || S->sw[i].kind != kind ||
		    strcmp(S->sw[i].name, name) != 0) {
			i++;
			continue;
		}
		if (S->sw[i].c->server_open) {
			m = msg_new(M_WATCH, S->sw[i].c);
			m->tree = tree;
			m->wtype = wtype;
			snprintf(m->name, NAME, "%s", name);
			m->zxid = S->zxid;
			p_send(m, false);
		}
		S->sw[i] = S->sw[--S->nsw];
	}
}

struct fired {
	int		 tree;
	char		 name[NAME];
	enum wkind	 kind;
	int		 wtype;
};

/* One write on a copy of a tree; notes the watches it fires. */
static int
tree_do(struct ptree *t, int tree, struct pop *op, int64_t zxid,
    int64_t session, struct prep *rep, struct fired *f, int *nf)
{
	int i;

	switch (op->type) {
	case O_CREATE_PARENT:
		if (t->exists)
			return ZNODEEXISTS;
		memset(t, 0, sizeof(*t));
		t->exists = true;
		t->datalen = -1;
		t->czxid = t->mzxid = t->pzxid = zxid;
		return ZOK;
	case O_CREATE:
		if (!t->exists)
			return ZNONODE;
		if (t->n == PC_MAX) {
			p_fail("tree %d: too many children", tree);
			return ZNODEEXISTS;
		}
		i = t->n++;
		if (snprintf(t->c[i].name, NAME, "%s%010d", op->name,
		    t->cversion) >= NAME)
			abort();
		memcpy(t->c[i].data, op->data, (size_t)op->datalen);
		t->c[i].datalen = op->datalen;
		t->c[i].czxid = t->c[i].mzxid = zxid;
		/* ZooKeeper's ctime is the leader's clock at the create; the
		 * model's starts a day in, so that 0 means none. */
		t->c[i].ctime = (int64_t)(S->now / 1000) + 86400000;
		t->c[i].owner = session;
		t->cversion++;
		t->pzxid = zxid;
		snprintf(rep->path, NAME, "%s", t->c[i].name);
		rep->czxid = zxid;
		rep->owner = session;
		f[*nf].tree = tree;
		f[*nf].name[0] = '\0';
		f[*nf].kind = WK_CHILD;
		f[(*nf)++].wtype = WT_CHILD;
		return ZOK;
	case O_DELETE:
		if (!t->exists || (i = tree_find(t, op->name)) < 0)
			return ZNONODE;
		t->c[i] = t->c[--t->n];
		t->cversion++;
		t->pzxid = zxid;
		f[*nf].tree = tree;
		snprintf(f[*nf].name, NAME, "%s", op->name);
		f[*nf].kind = WK_DATA;
		f[(*nf)++].wtype = WT_DELETED;
		f[*nf].tree = tree;
		f[*nf].name[0] = '\0';
		f[*nf].kind = WK_CHILD;
		f[(*nf)++].wtype = WT_CHILD;
		return ZOK;
	case O_SET:
		if (!t->exists)
			return ZNONODE;
		if (op->name[0] == '\0') {
			memcpy(t->data, op->data, (size_t)op->datalen);
			t->datalen = op->datalen;
			t->mzxid = zxid;
		} else {
			if ((i = tree_find(t, op->name)) < 0)
				return ZNONODE;
			memcpy(t->c[i].data, op->data, (size_t)op->datalen);
			t->c[i].datalen = op->datalen;
			t->c[i].mzxid = zxid;
		}
		rep->set_mzxid = zxid;
		f[*nf].tree = tree;
		snprintf(f[*nf].name, NAME, "%s", op->name);
		f[*nf].kind = WK_DATA;
		f[(*nf)++].wtype = WT_CHANGED;
		return ZOK;
	case O_CHECK:
		if (!t->exists || (op->name[0] != '\0' &&
		    tree_find(t, op->name) < 0))
			return ZNONODE;
		return ZOK;
	default:
		abort();
	}
}

static void
p_server_reply(struct pconn *c, struct pmsg *rm)
{
	if (!c->server_open) {
		msg_free(rm);
		return;
	}
	if (rm->type == M_REPLY && S->lose_reply[c->agent]) {
		/* The fault: applied, the reply never arrives, the
		 * connection breaks. */
		S->lose_reply[c->agent] = false;
		p_trace("a%d: reply to xid %d LOST, connection breaks",
		    c->agent, rm->rep.xid);
		msg_free(rm);
		c->server_open = false;
		sw_drop_conn(c);
		p_send(msg_new(M_EOF, c), false);
		return;
	}
	p_send(rm, false);
}

/* Expiry or close: the ephemerals go in one transaction. */
static void
sess_close(struct psess *z, const char *why)
{
	struct fired f[PT_MAX * PC_MAX * 2];
	struct prep dummy;
	struct pop op;
	int t, i, nf = 0;

	if (!z->alive)
		return;
	z->alive = false;
	S->zxid++;
	p_trace("zk: session %" PRIx64 " of a%d %s (zxid %" PRIx64 ")",
	    (uint64_t)z->id, z->agent, why, (uint64_t)S->zxid);
	for (t = 0; t < PT_MAX; t++) {
		for (i = 0; i < S->tree[t].n; ) {
			if (S->tree[t].c[i].owner != z->id) {
				i++;
				continue;
			}
			memset(&op, 0, sizeof(op));
			op.type = O_DELETE;
			snprintf(op.name, NAME, "%s", S->tree[t].c[i].name);
			tree_do(&S->tree[t], t, &op, S->zxid, z->id, &dummy, f,
			    &nf);
		}
	}
	for (i = 0; i < nf; i++)
		sw_fire(f[i].tree, f[i].name, f[i].kind, f[i].wtype);
	if (z->conn != NULL && z->conn->server_open) {
		z->conn->server_open = false;
		sw_drop_conn(z->conn);
		p_send(msg_new(M_EOF, z->conn), false);
	}
}

static void
p_expiry_cb(void *p, uint64_t gen)
{
	int i;

	(void)p;
	if (gen != S->expiry_gen)
		return;		/* that leader failed */
	for (i = 0; i < S->nsess; i++)
		if (S->sess[i].alive && S->sess[i].expiry <= S->now)
			sess_close(&S->sess[i], "EXPIRES");
	if (!S->stop)
		p_at(S->now + S->tick, p_expiry_cb, NULL, gen);
}

/*
 * A new ZooKeeper leader takes over (--failover). The nodes and the zxids
 * are the old leader's (replicated); zxids go on in a new epoch. Its
 * session tracker is new (SessionTrackerImpl, filled from the data tree):
 * every live session expires a whole timeout from now, rounded up to the
 * new leader's next tick, and its ticks fall at another phase (another
 * process, another clock). Touches the old leader took count for nothing.
 */
static void
p_takeover_cb(void *p, uint64_t unused)
{
	int i;

	(void)p;
	(void)unused;
	S->zk_down = false;
	S->dep_leaderless = false;
	S->tick_phase = p_below(S->tick);
	S->zxid = ((S->zxid >> 32) + 1) << 32;
	for (i = 0; i < S->nsess; i++) {
		S->sess[i].conn = NULL;
		S->sess[i].timeout_ms = S->sess[i].create_timeout_ms;
		if (S->sess[i].alive)
			S->sess[i].expiry = round_up(S->now +
			    (stime)S->sess[i].timeout_ms * 1000);
	}
	p_trace("zk: a NEW LEADER takes over (zxid %" PRIx64 ", ticks at "
	    "+%" PRIu64 " us): every session expires a timeout from now",
	    (uint64_t)S->zxid, S->tick_phase);
	S->expiry_gen++;
	p_at(round_up(S->now), p_expiry_cb, NULL, S->expiry_gen);
}

/*
 * The ZooKeeper leader fails (--failover; zkelect-sim's fault 17, in the
 * one-server model). Half the time its process exits: the kernel closes
 * the sockets, every client sees its connection drop at once, and the
 * followers look for a new leader at once. Otherwise its host stops:
 * nothing is closed, the clients hear nothing and give up after 2T/3,
 * and the followers look after syncLimit (5) ticks without a ping. An
 * election (50-600 ms) follows. Until the new leader takes over, a
 * connection is refused (a follower that is not serving closes it) and
 * nothing expires.
 */
static void
p_zk_fail(void)
{
	bool host = p_chance(50);
	stime d = p_range(50000, 600000), heal;
	struct pconn *c;

	if (S->zk_down || S->dep_active)
		return;
	if (host)
		d += 5 * S->tick + p_below(S->tick / 2);
	S->zk_down = true;
	S->failovers++;
	S->expiry_gen++;
	p_trace("zk: the ZooKeeper leader's %s FAILS; a new leader in %" PRIu64
	    " ms", host ? "host" : "process", d / 1000);
	for (c = S->conns; c != NULL; c = c->next) {
		if (!c->server_open)
			continue;
		c->server_open = false;
		sw_drop_conn(c);
		if (!host)
			p_send(msg_new(M_EOF, c), false);
	}
	p_at(S->now + d, p_takeover_cb, NULL, 0);
	/* Healed once the new leader serves and every client has given up
	 * a silent connection. */
	heal = S->now + 2 * S->T / 3 + S->T / 60;
	p_heal_at(S->now + d > heal ? S->now + d : heal);
}

/* --- The shapes (--shape) --- */

static void
p_relay_arrive_cb(void *p, uint64_t i)
{
	struct prelay *r = &S->relay[i];
	struct psess *z;
	int k;

	(void)p;
	S->relay_inflight--;
	if (S->zk_down || S->dep_leaderless || (r->to >= 0 &&
	    (S->srv[r->to].down || S->srv[r->to].dep_side))) {
		S->relays_lost++;
		p_trace("zk: %d touches relayed %s are LOST", r->n, r->to >= 0 ?
		    "from an observer" : "to the leader");
		return;
	}
	if (r->to < 0 || r->to == S->zk_leader) {
		for (k = 0; k < r->n; k++)
			if ((z = sess_find(r->s[k])) != NULL && z->alive)
				sess_touch(z);
		return;
	}
	for (k = 0; k < r->n; k++)
		p_touched_add(&S->srv[r->to], r->s[k]);
}

/* The leader pings its learners every tick/2 (Learner.ping): each answers
 * with the sessions touched since; an observer answers its ObserverMaster,
 * which reports them in its own next answer. */
static void
p_relay_cb(void *p, uint64_t unused)
{
	struct psrv *sv;
	struct prelay *r;
	int s, i;

	(void)p;
	(void)unused;
	for (s = 0; s < S->nservers; s++) {
		sv = &S->srv[s];
		if (s == S->zk_leader || sv->ntouched == 0)
			continue;
		if (sv->down) {
			sv->ntouched = 0;
			continue;
		}
		if (S->relay_inflight++ == PR_RING) {
			p_fail("too many reports of touches in flight");
			return;
		}
		i = S->relay_next++ % PR_RING;
		r = &S->relay[i];
		r->to = sv->observer ? sv->master : -1;
		r->n = sv->ntouched;
		memcpy(r->s, sv->touched, sizeof(r->s));
		sv->ntouched = 0;
		p_at(S->now + p_delay(), p_relay_arrive_cb, NULL, (uint64_t)i);
	}
	if (!S->stop)
		p_at(S->now + S->tick / 2, p_relay_cb, NULL, 0);
}

/* Closes the clients of server s (it stops serving). */
static void
p_server_close_all(int s, bool dep_only, bool live_only)
{
	struct pconn *c;

	for (c = S->conns; c != NULL; c = c->next)
		if (c->server_open && (s < 0 || c->server == s) &&
		    (!dep_only || c->dep) && (!live_only || !c->dep))
			p_server_refuse(c, true);
}

static void
p_master_up_cb(void *p, uint64_t m)
{
	int o;

	(void)p;
	S->srv[m].down = false;
	for (o = 0; o < S->nservers; o++)
		if (S->srv[o].observer && S->srv[o].master == (int)m)
			S->srv[o].down = false;
	p_trace("zk s%d: the ObserverMaster is back", (int)m);
}

/* Its observers hear nothing for syncLimit ticks: they stop serving. */
static void
p_master_gone_cb(void *p, uint64_t m)
{
	int o;

	(void)p;
	if (!S->srv[m].down)
		return;
	for (o = 0; o < S->nservers; o++)
		if (S->srv[o].observer && S->srv[o].master == (int)m) {
			p_trace("zk s%d: the observer lost its master; stops "
			    "serving", o);
			S->srv[o].down = true;
			S->srv[o].ntouched = 0;
			p_server_close_all(o, false, false);
		}
}

/*
 * --shape relay: an ObserverMaster's process exits for a while. Its clients
 * see their connections close; its observers serve on for syncLimit ticks,
 * answering pings; the touches they relay to it, and their clients' syncs
 * that go through it, are lost.
 */
static void
p_master_stop_m(int m)
{
	stime d = p_range(S->T / 6, 3 * S->T);

	if (m == S->zk_leader || S->srv[m].down || S->zk_down || S->dep_active)
		return;
	S->master_stops++;
	S->srv[m].down = true;
	S->srv[m].ntouched = 0;
	p_trace("zk s%d: the ObserverMaster STOPS for %" PRIu64 " ms", m,
	    d / 1000);
	p_server_close_all(m, false, false);
	p_at(S->now + 5 * S->tick, p_master_gone_cb, NULL, (uint64_t)m);
	p_at(S->now + d, p_master_up_cb, NULL, (uint64_t)m);
	p_heal_at(S->now + d + 2 * S->T / 3 + S->T / 60);
}

static int
p_some_master(void)
{
	return S->srv[S->nvoters + (int)p_below((uint64_t)(S->nservers -
	    S->nvoters))].master;
}

/* The worst case was not met in time: a master stops all the same. */
static void
p_master_worst_end_cb(void *p, uint64_t until)
{
	(void)p;
	if (S->master_worst_until != (stime)until || S->leaver >= 0)
		return;
	S->master_worst_until = 0;
	p_master_stop_m(p_some_master());
}

/* The master of a random observer stops now; or, half the time, the
 * worst case is armed: within 3T, the master that passes back the sync
 * of a partition's leader (its renewal, or the listing's) stops right
 * then (p_osync_cb), the touches reported to it since its last report
 * lost; if none does, a random one stops at the end. */
static void
p_master_stop(void)
{
	int m = p_some_master();

	if (p_chance(50)) {
		S->master_worst_until = S->now + 3 * S->T;
		p_heal_at(S->master_worst_until);
		p_at(S->master_worst_until, p_master_worst_end_cb, NULL,
		    S->master_worst_until);
		return;
	}
	p_master_stop_m(m);
}

/* The deposed leader sees it lost its quorum: its side stops serving. */
static void
p_dep_end_cb(void *p, uint64_t unused)
{
	int s;

	(void)p;
	(void)unused;
	p_trace("zk (deposed): lost its quorum; stops serving");
	p_server_close_all(-1, true, false);
	S->dep_active = false;
	S->dep_hang = false;
	for (s = 0; s < S->nservers; s++)
		S->srv[s].dep_side = false;
}

/* The others elected a new leader: a new session tracker (p_takeover_cb);
 * the deposed one serves its side for up to a tick more. */
static void
p_dep_takeover_cb(void *p, uint64_t unused)
{
	int pick[PS_MAX], n = 0, s;
	stime d;

	(void)p;
	(void)unused;
	for (s = 0; s < S->nvoters; s++)
		if (!S->srv[s].dep_side && !S->srv[s].down)
			pick[n++] = s;
	if (n == 0)
		for (s = 0; s < S->nvoters; s++)
			if (!S->srv[s].dep_side)
				pick[n++] = s;
	S->zk_leader = pick[p_below((uint64_t)n)];
	p_trace("zk s%d: LEADS the ensemble", S->zk_leader);
	p_takeover_cb(NULL, 0);
	d = p_chance(50) ? S->tick : p_below(S->tick + 1);
	p_trace("zk (deposed): serves its side %" PRIu64 " ms more", d / 1000);
	p_at(S->now + d, p_dep_end_cb, NULL, 0);
}

/* The followers that lost the leader stop serving their clients. */
static void
p_dep_detect_cb(void *p, uint64_t unused)
{
	(void)p;
	(void)unused;
	p_trace("zk: the followers lost the leader; stop serving");
	p_server_close_all(-1, false, true);
}

/*
 * --shape deposed: the ZooKeeper leader is cut off from the quorum, with
 * (one time in two, in a five-voter ensemble) a follower still attached,
 * and the observers behind it. That side goes on answering its clients'
 * pings (its touches count for nothing), reads (from its tree, frozen) and
 * syncs (at once, unless a write was sent to it: that never commits, nor
 * does anything behind it), until a tick after a new leader took over.
 * The others stop serving after syncLimit ticks; an election follows; the
 * new leader's session tracker starts afresh at another tick phase.
 */
static void
p_depose(void)
{
	int L = S->zk_leader, s, n = 0, pick[PS_MAX], k;
	char side[4 * PS_MAX + 1];
	struct pconn *c;
	stime detect, elect;

	if (S->zk_down || S->dep_active)
		return;
	for (s = 0; s < S->nservers; s++)
		if (S->srv[s].down)
			return;		/* one fault of the ensemble at once */
	S->dep_active = S->dep_leaderless = true;
	S->dep_hang = false;
	S->depositions++;
	S->dep_zxid = S->zxid;
	memcpy(S->dep_tree, S->tree, sizeof(S->tree));
	for (s = 0; s < S->nservers; s++)
		S->srv[s].dep_side = s == L;
	if (S->nvoters >= 5 && p_chance(50)) {
		for (s = 0; s < S->nvoters; s++)
			if (s != L)
				pick[n++] = s;
		S->srv[pick[p_below((uint64_t)n)]].dep_side = true;
	}
	for (s = S->nvoters; s < S->nservers; s++)
		S->srv[s].dep_side = S->srv[S->srv[s].master].dep_side;
	for (k = 0; k < S->nsess; k++)
		S->sess[k].dep_alive = S->sess[k].alive;
	S->expiry_gen++;	/* nothing expires until a new leader */
	for (c = S->conns; c != NULL; c = c->next)
		if (c->server_open && S->srv[c->server].dep_side) {
			c->dep = true;
			sw_drop_conn(c);	/* nothing commits there */
		}
	for (n = 0; n < S->nagents; n++) {
		const struct pagent *a = &S->agents[n];

		if (!a->running || a->h == NULL || a->h->conn == NULL ||
		    !a->h->conn->dep)
			continue;
		for (k = 0; k < S->nparts; k++)
			if (a->f.parts[k].e.role == ELECTION_LEADER)
				break;
		if (k < S->nparts) {
			S->dep_under++;
			break;
		}
	}
	detect = 5 * S->tick + p_below(S->tick);
	elect = p_range(50000, 600000);
	side[0] = '\0';
	for (s = 0; s < S->nservers; s++)
		if (S->srv[s].dep_side)
			snprintf(side + strlen(side), sizeof(side) - strlen(side),
			    " s%d", s);
	p_trace("zk s%d: the ZooKeeper leader is DEPOSED (side:%s); a new "
	    "leader in %" PRIu64 " ms", L, side, (detect + elect) / 1000);
	p_at(S->now + detect, p_dep_detect_cb, NULL, 0);
	p_at(S->now + detect + elect, p_dep_takeover_cb, NULL, 0);
	p_heal_at(S->now + detect + elect + S->tick + 2 * S->T / 3 +
	    S->T / 60);
}

static void
p_stat_child(const struct pnode *n, struct prep *rep)
{
	rep->czxid = n->czxid;
	rep->ctime = n->ctime;
	rep->mzxid = n->mzxid;
	rep->pzxid = n->czxid;
	rep->owner = n->owner;
	memcpy(rep->data, n->data, (size_t)n->datalen);
	rep->datalen = n->datalen;
}

static void
p_server_req(struct pconn *c, struct psess *z, const struct preq *q)
{
	struct ptree *t = c->dep ? &S->dep_tree[q->tree] : &S->tree[q->tree];
	struct ptree copy;
	struct fired f[8];
	struct pmsg *rm = msg_new(M_REPLY, c);
	struct prep *rep = &rm->rep;
	struct pop op;
	int i, nf = 0, rc;

	rep->xid = q->xid;
	rep->datalen = -1;
	rep->rc = ZOK;
	switch (q->op[0].type) {
	case O_SYNC:
		break;
	case O_EXISTS:
	case O_GET:
		if (!t->exists) {
			rep->rc = ZNONODE;
			break;
		}
		if (q->op[0].name[0] == '\0') {
			rep->czxid = t->czxid;
			rep->mzxid = t->mzxid;
			rep->pzxid = t->pzxid;
			memcpy(rep->data, t->data, t->datalen > 0 ?
			    (size_t)t->datalen : 0);
			rep->datalen = t->datalen;
		} else if ((i = tree_find(t, q->op[0].name)) >= 0)
			p_stat_child(&t->c[i], rep);
		else {
			rep->rc = ZNONODE;
			break;
		}
		if (q->watch && !c->dep)
			sw_add(c, q->tree, q->op[0].name, WK_DATA);
		break;
	case O_CHILDREN:
		if (!t->exists) {
			rep->rc = ZNONODE;
			break;
		}
		rep->children = calloc((size_t)t->n + 1, sizeof(char *));
		if (rep->children == NULL)
			abort();
		for (i = 0; i < t->n; i++)
			rep->children[rep->nchildren++] = strdup(t->c[i].name);
		if (q->watch && !c->dep)
			sw_add(c, q->tree, "", WK_CHILD);
		break;
	default:
		/* A write, or a multi: on a copy, kept only if all is well. */
		copy = *t;
		S->zxid++;
		for (i = 0; i < q->nops; i++) {
			op = q->op[i];
			rc = tree_do(&copy, q->tree, &op, S->zxid, z->id, rep, f,
			    &nf);
			rep->results[i] = rc;
			if (rc != ZOK) {
				rep->rc = rc;
				for (i++; i < q->nops; i++)
					rep->results[i] = ZRUNTIMEINCONSISTENCY;
				break;
			}
		}
		if (rep->rc == ZOK) {
			*t = copy;
			for (i = 0; i < nf; i++)
				sw_fire(f[i].tree, f[i].name, f[i].kind,
				    f[i].wtype);
		}
		rm->zxid = S->zxid;
		break;
	}
	p_server_reply(c, rm);
}

/* The server refuses or closes C ("client must try another server"). */
static void
p_server_refuse(struct pconn *c, bool eof)
{
	c->server_open = false;
	sw_drop_conn(c);
	if (eof)
		p_send(msg_new(M_EOF, c), false);
}

/* What a deposed leader (or a follower still attached to it) does with a
 * request: reads from its tree, a sync at once unless a proposal is out
 * (Leader.processSync), a write never commits, nor anything behind it. */
static void
p_dep_req(struct pconn *c, const struct preq *q)
{
	switch (q->op[0].type) {
	case O_SYNC:
		if (S->dep_hang) {
			c->hung = true;
			return;
		}
		/* FALLTHROUGH */
	case O_EXISTS:
	case O_GET:
	case O_CHILDREN:
		p_server_req(c, NULL, q);
		return;
	default:
		S->dep_hang = c->hung = true;
		p_trace("zk (deposed): a%d's write will never commit", c->agent);
		return;
	}
}

/* A write or a sync needs a leader: without one it waits for ever. */
static bool
p_needs_leader(const struct preq *q)
{
	return q->op[0].type != O_EXISTS && q->op[0].type != O_GET &&
	    q->op[0].type != O_CHILDREN;
}

/* --- An observer's sync through its ObserverMaster (--shape relay) --- */

/* What a connection sent behind a sync still on its way is being replayed
 * (it touched the session when it arrived). */
static bool p_replaying;

/* A leads some partition. */
static bool
p_leads(const struct pagent *a)
{
	int k;

	for (k = 0; a->running && k < S->nparts; k++)
		if (a->f.parts[k].e.role == ELECTION_LEADER)
			return true;
	return false;
}

/* C is on an observer behind an ObserverMaster: a follower, its learner
 * master (the leader, once the master leads, runs none). */
static bool
p_via_master(const struct pconn *c)
{
	const struct psrv *sv = &S->srv[c->server];

	return sv->observer && sv->master != S->zk_leader;
}

static void
p_wait_drop(struct pconn *c)
{
	struct pmsg *m;

	while ((m = c->wait_head) != NULL) {
		c->wait_head = m->next;
		msg_free(m);
	}
	c->wait_tail = &c->wait_head;
}

/* A request or a ping arriving touches the session there and then, even
 * when its answer waits (ZooKeeperServer.submitRequest). */
static void
p_wait_touch(struct pconn *c)
{
	struct psess *z;

	if (c->dep || S->dep_leaderless || p_replaying)
		return;
	if ((z = sess_find(c->session)) != NULL && z->alive && z->conn == c)
		p_touch(c, z);
}

/* M waits behind the sync on its way (CommitProcessor keeps a session's
 * requests in order; a ping too). */
static void
p_wait_add(struct pconn *c, struct pmsg *m)
{
	if (c->wait_head == NULL)
		c->wait_tail = &c->wait_head;
	m->next = NULL;
	*c->wait_tail = m;
	c->wait_tail = &m->next;
}

/*
 * The sync's way, one network delay a hop: 1 at the ObserverMaster
 * (LearnerHandler, case REQUEST: a LearnerSyncRequest, forwarded to the
 * leader as the follower's own, FollowerRequestProcessor), 2 at the
 * leader (Leader.processSync: answered at once, no proposal being out
 * here but a deposed leader's), 3 back at the master
 * (FollowerZooKeeperServer.sync passes the SYNC on), 4 at the observer,
 * which answers it and then what came after it. A master down (stopped)
 * loses it, and so does a leader that cannot answer: nothing more is
 * answered on that connection, until the client gives up on it or the
 * observer, losing its master, closes it.
 */
static void
p_osync_cb(void *p, uint64_t stage)
{
	struct pconn *c = p;
	int m = S->srv[c->server].master;
	const char *lost = NULL;
	struct pmsg *w;

	if (!c->server_open) {
		/* Closed meanwhile: by its client, the observer, a failover. */
		c->syncing = false;
		p_wait_drop(c);
		return;
	}
	switch (stage) {
	case 1:
	case 3:
		if (m != S->zk_leader && S->srv[m].down)
			lost = "its ObserverMaster is down";
		break;
	case 2:
		if (c->dep ? S->dep_hang : S->dep_leaderless)
			lost = "the leader cannot answer it";
		break;
	default:
		c->syncing = false;
		S->obs_syncs_back++;
		p_server_req(c, NULL, &c->sync_req);
		/* What came after it, in order; a sync among it goes its way
		 * and holds the rest again. */
		w = c->wait_head;
		c->wait_head = NULL;
		c->wait_tail = &c->wait_head;
		p_replaying = true;
		while (w != NULL) {
			struct pmsg *next = w->next;

			w->next = NULL;
			p_server_recv(w, 0);
			w = next;
		}
		p_replaying = false;
		return;
	}
	if (lost != NULL) {
		p_trace("zk s%d: a%d's sync through ObserverMaster s%d is LOST "
		    "(%s)", c->server, c->agent, m, lost);
		c->syncing = false;
		c->hung = true;
		p_wait_drop(c);
		return;
	}
	if (stage == 3 && S->master_worst_until >= S->now &&
	    S->leaver < 0 && p_leads(&S->agents[c->agent])) {
		S->master_worst_until = 0;
		p_trace("the worst case: ObserverMaster s%d passed a%d's sync "
		    "back", m, c->agent);
		p_master_stop_m(m);
	}
	p_at(S->now + p_delay(), p_osync_cb, c, stage + 1);
}

static void
p_osync_start(struct pconn *c, const struct preq *q)
{
	S->obs_syncs++;
	c->syncing = true;
	c->sync_req = *q;
	p_trace("zk s%d: a%d's sync goes to ObserverMaster s%d", c->server,
	    c->agent, S->srv[c->server].master);
	p_at(S->now + p_delay(), p_osync_cb, c, 1);
}

static void
p_server_recv(void *p, uint64_t unused)
{
	struct pmsg *m = p, *rm, *last;
	struct pconn *c = m->c;
	struct psess *z;
	const struct ptree *trees = S->tree;
	int i, timeout;

	(void)unused;
	if (!c->server_open) {
		msg_free(m);
		return;
	}
	if (S->zk_down) {
		/* No leader: the server closes the connection. */
		c->server_open = false;
		sw_drop_conn(c);
		if (m->type != M_FIN)
			p_send(msg_new(M_EOF, c), false);
		msg_free(m);
		return;
	}
	if (m->type == M_CONNECT && opt_shapes != 0) {
		struct psrv *sv = &S->srv[c->server];

		if (sv->down || (S->dep_leaderless && !sv->dep_side) ||
		    (sv->dep_side && m->zxid > S->dep_zxid)) {
			/* Stopped, looking for a leader, or behind what the
			 * client has seen. */
			p_server_refuse(c, m->type != M_FIN);
			msg_free(m);
			return;
		}
		c->dep = S->dep_active && sv->dep_side;
	}
	if (c->dep)
		trees = S->dep_tree;
	switch (m->type) {
	case M_CONNECT:
		rm = msg_new(M_CONNECTED, c);
		/* minSessionTimeout 2 ticks, maxSessionTimeout this server's
		 * (--shape; 20 ticks, or lower with shrink). */
		timeout = m->timeout_ms;
		if (opt_shapes != 0) {
			if (timeout < 2 * S->tick_ms)
				timeout = 2 * S->tick_ms;
			if (timeout > S->srv[c->server].max_timeout_ms)
				timeout = S->srv[c->server].max_timeout_ms;
		}
		if (c->dep) {
			/* It still thinks it leads: a new session never
			 * commits; a reconnect revalidates in its own
			 * tracker, which nobody will read again. */
			if (m->session == 0 ||
			    (z = sess_find(m->session)) == NULL) {
				msg_free(rm);
				break;
			}
			rm->valid = z->dep_alive;
			rm->session = z->id;
			rm->timeout_ms = timeout;
			c->session = z->id;
			p_send(rm, false);
			if (!rm->valid) {
				c->server_open = false;
				break;
			}
			p_trace("a%d: connects to the deposed leader's side "
			    "(s%d)", c->agent, c->server);
			goto setwatches;
		}
		if (m->session == 0) {
			if (S->nsess == S->capsess) {
				S->capsess = S->capsess ? S->capsess * 2 : 16;
				S->sess = realloc(S->sess, (size_t)S->capsess *
				    sizeof(*S->sess));
				if (S->sess == NULL)
					abort();
			}
			z = &S->sess[S->nsess++];
			memset(z, 0, sizeof(*z));
			z->id = S->next_session++;
			z->timeout_ms = z->create_timeout_ms = timeout;
			z->alive = true;
			z->agent = c->agent;
			S->zxid++;	/* createSession */
		} else
			z = sess_find(m->session);
		if (z == NULL || !z->alive) {
			rm->valid = false;
			p_send(rm, false);
			c->server_open = false;
			msg_free(m);
			return;
		}
		/* A reconnect revalidates; the older connection is done. */
		if (z->conn != NULL && z->conn != c && z->conn->server_open) {
			z->conn->server_open = false;
			sw_drop_conn(z->conn);
			p_send(msg_new(M_EOF, z->conn), false);
		}
		z->conn = c;
		c->session = z->id;
		/* A revalidation touches with the timeout negotiated on this
		 * connection (--shape shrink: lower than it was). */
		if (z->timeout_ms != timeout) {
			p_trace("zk: session %" PRIx64 " of a%d now has "
			    "timeout %d ms (was %d), on s%d", (uint64_t)z->id,
			    z->agent, timeout, z->timeout_ms, c->server);
			if (timeout < z->timeout_ms)
				S->shrinks++;
			z->timeout_ms = timeout;
		}
		if (!S->dep_leaderless)
			sess_touch(z);
		rm->valid = true;
		rm->session = z->id;
		rm->timeout_ms = z->timeout_ms;
		p_send(rm, false);
		/* SetWatches: what changed since the client's zxid fires now,
		 * the rest is set again (the deposed side's never fire). The
		 * zxid the client takes from it comes with the last event:
		 * zookeeper.c takes none from a notification, and the reply
		 * that has one follows them all, so a connection closed
		 * midway leaves the client's zxid where it was. */
setwatches:
		last = NULL;
		for (i = 0; i < m->nw; i++) {
			const struct wreg *w = &m->w[i];
			const struct ptree *t = &trees[w->tree];
			int k = w->name[0] ? tree_find(t, w->name) : -1;
			struct pmsg *wm;
			int wt = 0;

			if (w->kind == WK_CHILD) {
				if (!t->exists)
					wt = WT_DELETED;
				else if (t->pzxid > m->zxid)
					wt = WT_CHILD;
			} else if (w->name[0] == '\0') {
				if (!t->exists)
					wt = WT_DELETED;
				else if (t->mzxid > m->zxid)
					wt = WT_CHANGED;
			} else if (k < 0)
				wt = WT_DELETED;
			else if (t->c[k].mzxid > m->zxid)
				wt = WT_CHANGED;
			if (wt == 0) {
				if (!c->dep)
					sw_add(c, w->tree, w->name, w->kind);
				continue;
			}
			wm = msg_new(M_WATCH, c);
			wm->tree = w->tree;
			wm->wtype = wt;
			snprintf(wm->name, NAME, "%s", w->name);
			p_send(wm, false);
			last = wm;
		}
		if (last != NULL)
			last->zxid = c->dep ? S->dep_zxid : S->zxid;
		break;
	case M_PING:
		if (c->hung)
			break;	/* behind a request that waits */
		if (c->syncing) {
			p_wait_touch(c);
			p_wait_add(c, m);
			return;
		}
		if (c->dep) {
			/* Touches in a tracker nobody reads again. */
			p_send(msg_new(M_PONG, c), false);
			break;
		}
		if ((z = sess_find(c->session)) != NULL && z->alive &&
		    z->conn == c) {
			if (!S->dep_leaderless && !p_replaying)
				p_touch(c, z);
			p_send(msg_new(M_PONG, c), false);
		}
		break;
	case M_REQ:
		if (c->hung)
			break;
		if (c->syncing) {
			p_wait_touch(c);
			p_wait_add(c, m);
			return;
		}
		if (c->dep) {
			if (m->req.op[0].type == O_SYNC && p_via_master(c))
				p_osync_start(c, &m->req);
			else
				p_dep_req(c, &m->req);
			break;
		}
		if ((z = sess_find(c->session)) == NULL || !z->alive ||
		    z->conn != c)
			break;
		if (m->req.op[0].type == O_SYNC && p_via_master(c)) {
			if (!S->dep_leaderless && !p_replaying)
				p_touch(c, z);
			p_osync_start(c, &m->req);
			break;
		}
		if (S->dep_leaderless && p_needs_leader(&m->req)) {
			c->hung = true;
			break;
		}
		if (!S->dep_leaderless && !p_replaying)
			p_touch(c, z);
		p_server_req(c, z, &m->req);
		break;
	case M_CLOSE:
		if (c->syncing) {
			p_wait_add(c, m);
			return;
		}
		if (c->dep || S->dep_leaderless)
			break;	/* closeSession never commits */
		if ((z = sess_find(c->session)) != NULL && z->conn == c)
			sess_close(z, "closed by its client");
		break;
	case M_FIN:
		c->server_open = false;
		sw_drop_conn(c);
		break;
	default:
		abort();
	}
	msg_free(m);
}

/* --- The client (zookeeper.c's shape) --- */

static struct pagent *
h_agent(const struct phandle *h)
{
	return &S->agents[h->agent];
}

static uint64_t
h_now_us(const struct phandle *h)
{
	return a_local_us(h_agent(h), S->now);
}

static struct item *
item_new(uint64_t hid, enum iwhat what, int part)
{
	struct item *it = calloc(1, sizeof(*it));

	if (it == NULL)
		abort();
	it->hid = hid;
	it->what = what;
	it->part = part;
	it->ev.failed_op = -1;
	return it;
}

static char *
dup_data(const char *data, int len)
{
	char *p;

	if (len < 0)
		return NULL;
	if ((p = malloc((size_t)len + 1)) == NULL)
		abort();
	memcpy(p, data, (size_t)len);
	p[len] = '\0';
	return p;
}

static void
h_session_event(struct phandle *h, enum election_session s)
{
	struct item *it = item_new(h->id, I_EV, -1);

	it->ev.type = EV_SESSION;
	it->ev.session = s;
	if (s == SESSION_CONNECTED) {
		it->ev.session_id = h->session;
		it->ev.timeout_ms = opt_break == BREAK_ASKED ? S->T_ms :
		    h->timeout_ms;
		it->ev.sent = h->opened_ms;
	}
	p_agent_push(h_agent(h), it);
}

/* A completion becomes an event (zk.c's callbacks). */
static void
h_complete(struct phandle *h, struct pcreq *r, int rc, const struct prep *rep)
{
	struct item *it;
	struct agg *g;
	int i;

	if (r->kind == K_NONE)
		return;
	if (r->kind == K_RENEW || r->kind == K_SRENEW) {
		g = r->agg;
		if (rc != ZOK && g->rc == ZOK) {
			g->rc = rc;
			g->failed_op = r->sub;
		}
		if (rc == ZOK && r->sub == 1) {
			g->owner = rep->owner;
			g->czxid = rep->czxid;
		}
		if (rc == ZOK && r->sub == 2) {
			g->has_data = rep->datalen >= 0;
			g->datalen = rep->datalen >= 0 ? rep->datalen : 0;
			memcpy(g->data, rep->data, (size_t)g->datalen);
			g->mzxid = rep->mzxid;
			g->pzxid = rep->pzxid;
		}
		if (--g->refs > 0)
			return;
		if (r->kind == K_SRENEW) {
			it = item_new(h->id, I_SRENEW, -1);
			it->ev.sent = g->asked;
			it->ev.rc = g->rc;
			it->ev.owner = g->owner;
		} else {
			it = item_new(h->id, I_EV, r->part);
			it->ev.type = EV_RENEWED;
			it->ev.sent = g->asked;
			it->ev.rc = g->rc;
			it->ev.failed_op = g->failed_op;
			it->name = strdup(r->name);
			it->ev.owner = g->owner;
			it->ev.czxid = g->czxid;
			it->ev.zxid = g->mzxid;
			it->ev.pzxid = g->pzxid;
			it->data = g->has_data ? dup_data(g->data, g->datalen) :
			    NULL;
			it->ev.datalen = g->datalen;
		}
		it->ev.gen = r->gen;
		free(g);
		p_agent_push(h_agent(h), it);
		return;
	}
	if (r->kind >= K_MCREATE) {
		it = item_new(h->id, I_MEMBER, -1);
		it->kind = r->kind;
		it->ev.gen = r->gen;
		it->ev.rc = rc;
		it->name = strdup(r->name);
		if (rc == ZOK && r->kind == K_MCREATE) {
			free(it->name);
			it->name = strdup(rep->path);
		}
		if (rc == ZOK && r->kind == K_MDATA) {
			it->data = dup_data(rep->data, rep->datalen);
			it->ev.datalen = rep->datalen >= 0 ? rep->datalen : 0;
			it->ev.owner = rep->owner;
			it->ev.ctime = rep->ctime;
		}
		if (rc == ZOK && r->kind == K_MLIST && rep->nchildren > 0) {
			it->names = calloc((size_t)rep->nchildren, sizeof(char *));
			if (it->names == NULL)
				abort();
			for (i = 0; i < rep->nchildren; i++)
				it->names[it->ev.count++] =
				    strdup(rep->children[i]);
		}
		p_agent_push(h_agent(h), it);
		return;
	}
	it = item_new(h->id, I_EV, r->part);
	it->ev.gen = r->gen;
	switch (r->kind) {
	case K_PARENT:
		it->ev.type = EV_PARENT_CREATED;
		break;
	case K_CREATE:
		it->ev.type = EV_CREATED;
		if (rc == ZOK) {
			it->name = strdup(rep->path);
			it->ev.owner = rep->owner;
			it->ev.czxid = rep->czxid;
		}
		break;
	case K_LIST:
		it->ev.type = EV_CHILDREN;
		if (rc == ZOK && rep->nchildren > 0) {
			it->names = calloc((size_t)rep->nchildren, sizeof(char *));
			if (it->names == NULL)
				abort();
			for (i = 0; i < rep->nchildren; i++)
				it->names[it->ev.count++] =
				    strdup(rep->children[i]);
		}
		break;
	case K_AHEAD:
		it->ev.type = EV_AHEAD_CHECKED;
		it->name = strdup(r->name);
		break;
	case K_OWNER:
		it->ev.type = EV_OWNER;
		it->name = strdup(r->name);
		if (rc == ZOK) {
			it->ev.owner = rep->owner;
			it->ev.czxid = rep->czxid;
		}
		break;
	case K_PRED_SET:
	case K_SELF_SET:
	case K_SUCCESSOR:
	case K_CLAIM_DATA:
		it->ev.type = r->kind == K_PRED_SET ? EV_PRED_SET :
		    r->kind == K_SELF_SET ? EV_SELF_SET :
		    r->kind == K_SUCCESSOR ? EV_SUCCESSOR_DATA : EV_CLAIM_DATA;
		it->name = strdup(r->name);
		if (rc == ZOK) {
			it->data = dup_data(rep->data, rep->datalen);
			it->ev.datalen = rep->datalen >= 0 ? rep->datalen : 0;
			it->ev.zxid = rep->mzxid;
			it->ev.pzxid = rep->pzxid;
			it->ev.czxid = rep->czxid;
		}
		break;
	case K_CLAIM:
	case K_RELEASE:
		it->ev.type = r->kind == K_CLAIM ? EV_CLAIMED : EV_RELEASED;
		it->name = strdup(r->name);
		if (rc == ZOK && r->kind == K_CLAIM)
			it->ev.zxid = rep->set_mzxid;
		if (rc != ZOK && rep != NULL) {
			for (i = 0; i < r->req.nops; i++)
				if (rep->results[i] != ZOK &&
				    rep->results[i] != ZRUNTIMEINCONSISTENCY)
					break;
			if (i < r->req.nops) {
				it->ev.failed_op = i;
				rc = rep->results[i];
			}
		}
		break;
	default:
		abort();
	}
	it->ev.rc = rc;
	p_agent_push(h_agent(h), it);
}

static void
h_send_req(struct phandle *h, struct pcreq *r)
{
	struct pmsg *m = msg_new(M_REQ, h->conn);

	r->sent = true;
	r->req.xid = r->req.xid ? r->req.xid : ++h->xid;
	m->req = r->req;
	h->last_send = h_now_us(h);
	p_send(m, true);
}

static void
h_submit(struct phandle *h, struct pcreq *r)
{
	if (opt_loss_in_step && h->connected && S->now < S->faults_end &&
	    (r->kind == K_SRENEW || r->kind == K_RENEW) &&
	    p_below(256) == 0) {
		S->losses_in_step++;
		p_heal_at(S->now);	/* a fault: settling is timed after */
		p_client_drop(h, false);
	}
	if (h->state == HS_EXPIRED || h->state == HS_CLOSED) {
		h_complete(h, r, h->state == HS_EXPIRED ? ZSESSIONEXPIRED :
		    ZCLOSING, NULL);
		free(r);
		return;
	}
	r->req.xid = ++h->xid;
	r->next = NULL;
	*h->out_tail = r;
	h->out_tail = &r->next;
	if (h->connected)
		h_send_req(h, r);
}

/* Fails every call (connection loss, expiry, close). */
static void
h_fail_all(struct phandle *h, int rc)
{
	struct pcreq *r;

	while ((r = h->out) != NULL) {
		h->out = r->next;
		if (h->out == NULL)
			h->out_tail = &h->out;
		h_complete(h, r, rc, NULL);
		free(r);
	}
}

static void h_connect(struct phandle *h);

static void
h_check_cb(void *p, uint64_t ver)
{
	struct phandle *h = p;
	struct pagent *a = h_agent(h);
	uint64_t now, T3 = (uint64_t)h->timeout_ms * 1000 / 3;

	if (ver != h->ver || h->state == HS_CLOSED || h->state == HS_EXPIRED)
		return;
	if (!a->paused) {
		now = h_now_us(h);
		if (h->conn == NULL)
			h_connect(h);
		else if (now >= h->last_recv + 2 * T3) {
			p_trace("a%d: client gives up its connection", h->agent);
			p_client_drop(h, false);
		} else if (h->connected && now >= h->last_send + T3) {
			h->last_send = now;
			p_send(msg_new(M_PING, h->conn), true);
		}
	}
	p_at(S->now + (stime)h->timeout_ms * 1000 / 30, h_check_cb, h, h->ver);
}

static void
h_connect(struct phandle *h)
{
	struct pconn *c = calloc(1, sizeof(*c));
	struct pmsg *m;

	if (c == NULL)
		abort();
	c->id = ++S->next_conn;
	c->agent = h->agent;
	if (opt_shapes != 0) {
		/* The next server of its shuffled list, as zookeeper.c. */
		c->server = h->perm[h->next_srv++ % S->nservers];
	}
	c->client_open = c->server_open = true;
	c->h = h;
	c->next = S->conns;
	S->conns = c;
	h->conn = c;
	h->connected = false;
	h->last_recv = h->last_send = h_now_us(h);
	m = msg_new(M_CONNECT, c);
	m->session = h->session;
	m->timeout_ms = h->timeout_ms;
	m->zxid = h->last_zxid;
	if (h->session != 0 && h->nw > 0) {
		m->w = calloc((size_t)h->nw, sizeof(*m->w));
		if (m->w == NULL)
			abort();
		memcpy(m->w, h->w, (size_t)h->nw * sizeof(*m->w));
		m->nw = h->nw;
	}
	p_send(m, true);
}

/* The connection is lost (given up, kicked, or closed by the server). */
static void
p_client_drop(struct phandle *h, bool eof)
{
	bool was = h->connected;

	(void)eof;
	if (h->conn != NULL) {
		h->conn->client_open = false;
		p_send(msg_new(M_FIN, h->conn), true);
		h->conn = NULL;
	}
	h->connected = false;
	if (h->state == HS_CONNECTED) {
		h->state = HS_CONNECTING;
		if (was)
			h_session_event(h, SESSION_CONNECTING);
	}
	h_fail_all(h, ZCONNECTIONLOSS);
	/* The next server after a short pause. */
	h->ver++;
	p_at(S->now + (stime)h->timeout_ms * 1000 / 60, h_check_cb, h, h->ver);
}

static void
h_watch_fired(struct phandle *h, int tree, const char *name, int wtype)
{
	struct item *it;
	enum wkind kind = wtype == WT_CHILD ? WK_CHILD : WK_DATA;
	int i, j;

	for (i = 0; i < h->nw; ) {
		const struct wreg *w = &h->w[i];

		if (w->tree != tree || strcmp(w->name, name) != 0 ||
		    (w->kind != kind && !(wtype == WT_DELETED))) {
			i++;
			continue;
		}
		if (w->ctx == C_MEMBERS) {
			it = item_new(h->id, I_MEMBER, -1);
			it->watch = true;
		} else if (w->ctx == C_MDATA) {
			/* zk.c passes on a change of a member's data only */
			if (wtype != WT_CHANGED) {
				for (j = i; j < h->nw - 1; j++)
					h->w[j] = h->w[j + 1];
				h->nw--;
				continue;
			}
			it = item_new(h->id, I_MDATA_WATCH, -1);
			it->name = strdup(name);
		} else {
			static const enum election_event_type types[] = {
				EV_PRED_CHANGED, EV_SELF_CHANGED,
				EV_CLAIM_CHANGED, EV_CHILDREN_CHANGED,
			};

			it = item_new(h->id, I_EV, w->part);
			it->ev.type = types[w->ctx];
			/* zk_node_watcher: the path's last component. */
			it->name = strdup(name[0] != '\0' ? name :
			    S->pname[w->part]);
			it->ev.deleted = wtype == WT_DELETED;
		}
		p_agent_push(h_agent(h), it);
		for (j = i; j < h->nw - 1; j++)
			h->w[j] = h->w[j + 1];
		h->nw--;
	}
}

static void
h_watch_add(struct phandle *h, const struct pcreq *r)
{
	int i;

	for (i = 0; i < h->nw; i++)
		if (h->w[i].tree == r->req.tree && h->w[i].ctx == r->ctx &&
		    h->w[i].kind == r->wkind && h->w[i].part == r->part &&
		    strcmp(h->w[i].name, r->req.op[0].name) == 0)
			return;
	if (h->nw == PW_MAX) {
		p_fail("a%d: too many watches", h->agent);
		return;
	}
	h->w[h->nw].tree = r->req.tree;
	snprintf(h->w[h->nw].name, NAME, "%s", r->req.op[0].name);
	h->w[h->nw].kind = r->wkind;
	h->w[h->nw].ctx = r->ctx;
	h->w[h->nw++].part = r->part;
}

static void
h_read(struct pmsg *m)
{
	struct pconn *c = m->c;
	struct phandle *h = c->h;
	struct pcreq *r;

	if (!c->client_open || h == NULL || h->conn != c) {
		msg_free(m);
		return;
	}
	h->last_recv = h_now_us(h);
	if (m->zxid > h->last_zxid)
		h->last_zxid = m->zxid;
	switch (m->type) {
	case M_CONNECTED:
		if (!m->valid) {
			p_trace("a%d: session %" PRIx64 " EXPIRED", h->agent,
			    (uint64_t)h->session);
			h->state = HS_EXPIRED;
			h->conn->client_open = false;
			h->conn = NULL;
			h->connected = false;
			h->nw = 0;
			h->ver++;
			h_session_event(h, SESSION_EXPIRED);
			h_fail_all(h, ZSESSIONEXPIRED);
			break;
		}
		h->session = m->session;
		h->timeout_ms = m->timeout_ms;
		h->state = HS_CONNECTED;
		h->connected = true;
		h_session_event(h, SESSION_CONNECTED);
		/* zk.c asks the server what it is (srvr, a round trip on a
		 * connection of its own): EV_SERVER for this connection
		 * (with --shape; the one server alone leaves it unknown). */
		if (opt_shapes != 0 && opt_break != BREAK_SRVR)
			p_at(S->now + p_delay() + p_delay(), p_srvr_cb, h,
			    c->id);
		for (r = h->out; r != NULL; r = r->next)
			if (!r->sent)
				h_send_req(h, r);
		break;
	case M_PONG:
		break;
	case M_WATCH:
		h_watch_fired(h, m->tree, m->name, m->wtype);
		break;
	case M_REPLY:
		if ((r = h->out) == NULL || r->req.xid != m->rep.xid) {
			p_fail("a%d: reply out of order", h->agent);
			break;
		}
		h->out = r->next;
		if (h->out == NULL)
			h->out_tail = &h->out;
		if (m->rep.rc == ZOK && r->set_watch)
			h_watch_add(h, r);
		h_complete(h, r, m->rep.rc, &m->rep);
		free(r);
		break;
	case M_EOF:
		p_client_drop(h, true);
		break;
	default:
		abort();
	}
	msg_free(m);
}

static void
p_srvr_cb(void *p, uint64_t conn_id)
{
	struct phandle *h = p;
	struct pagent *a = h_agent(h);
	struct item *it;

	if (h->state != HS_CONNECTED || h->conn == NULL ||
	    h->conn->id != conn_id || !h->connected || a->h != h ||
	    !a->running)
		return;
	it = item_new(h->id, I_EV, -1);
	it->ev.type = EV_SERVER;
	it->ev.server = S->srv[h->conn->server].observer ? SERVER_OBSERVER :
	    SERVER_VOTING;
	/* probe.c's session of 1 ms: minSessionTimeout, 2 ticks, unless this
	 * seed's probes learn nothing (one seed in ten). */
	it->ev.min_timeout_ms = S->seed % 10 == 7 ? 0 : 2 * S->tick_ms;
	p_agent_push(a, it);
}

static void
p_client_recv(void *p, uint64_t unused)
{
	struct pmsg *m = p;
	struct phandle *h = m->c->h;

	(void)unused;
	if (h != NULL && h_agent(h)->paused) {
		/* It waits in the socket until the agent resumes. */
		m->next = NULL;
		*h->pend_tail = m;
		h->pend_tail = &m->next;
		return;
	}
	h_read(m);
}

/* A resumed agent's client reads what waited, in order. */
static void
h_drain(struct phandle *h)
{
	struct pmsg *m;

	while ((m = h->pend) != NULL) {
		h->pend = m->next;
		if (h->pend == NULL)
			h->pend_tail = &h->pend;
		h_read(m);
	}
}

static void
h_free(struct phandle *h)
{
	struct pcreq *r;
	struct pmsg *m;

	while ((r = h->out) != NULL) {
		h->out = r->next;
		if (r->agg != NULL && --r->agg->refs == 0)
			free(r->agg);
		free(r);
	}
	while ((m = h->pend) != NULL) {
		h->pend = m->next;
		msg_free(m);
	}
	free(h);
}

static struct phandle *
h_open(struct pagent *a)
{
	struct phandle *h = calloc(1, sizeof(*h));

	if (h == NULL)
		abort();
	h->id = ++S->next_handle;
	h->agent = a->idx;
	h->state = HS_CONNECTING;
	h->timeout_ms = S->T_ms;
	h->opened_ms = a_now_ms(a);
	h->out_tail = &h->out;
	h->pend_tail = &h->pend;
	if (opt_shapes != 0) {
		int i, j, x;

		for (i = 0; i < S->nservers; i++)
			h->perm[i] = i;
		for (i = S->nservers - 1; i > 0; i--) {
			j = (int)p_below((uint64_t)i + 1);
			x = h->perm[i];
			h->perm[i] = h->perm[j];
			h->perm[j] = x;
		}
	}
	h->next = S->handles;
	S->handles = h;
	h->ver++;
	p_at(S->now + p_below(2000), h_check_cb, h, h->ver);
	return h;
}

/* zookeeper_close: closeSession when connected, calls end ZCLOSING. */
static void
h_close(struct phandle *h, bool send_close)
{
	if (h == NULL || h->state == HS_CLOSED)
		return;
	if (h->conn != NULL) {
		if (send_close && h->connected)
			p_send(msg_new(M_CLOSE, h->conn), true);
		h->conn->client_open = false;
		p_send(msg_new(M_FIN, h->conn), true);
		h->conn = NULL;
	}
	h->connected = false;
	h->state = HS_CLOSED;
	h->ver++;
	h_fail_all(h, ZCLOSING);
}

static struct pcreq *
h_req(struct pagent *a, int part, uint64_t gen, enum kind kind, enum op type,
    int tree, const char *name)
{
	struct pcreq *r = calloc(1, sizeof(*r));

	if (r == NULL)
		abort();
	r->kind = kind;
	r->part = part;
	r->gen = gen;
	snprintf(r->name, NAME, "%s", name != NULL ? name : "");
	r->req.tree = tree;
	r->req.nops = 1;
	r->req.op[0].type = type;
	snprintf(r->req.op[0].name, NAME, "%s", name != NULL ? name : "");
	return r;
}

static void
h_op(struct pop *op, enum op type, const char *name, const char *data,
    int datalen)
{
	op->type = type;
	snprintf(op->name, NAME, "%s", name);
	if (datalen > PD_MAX)
		abort();
	if (datalen > 0)
		memcpy(op->data, data, (size_t)datalen);
	op->datalen = datalen > 0 ? datalen : 0;
}

/* --- The agents: fleet.c, driven as zk.c drives it --- */

static void
a_uuid(char out[ELECTION_UUID_LEN + 1], void *arg)
{
	uint64_t x = p_rand(), y = p_rand();

	(void)arg;
	snprintf(out, ELECTION_UUID_LEN + 1,
	    "%08x-%04x-4%03x-%04x-%012" PRIx64, (unsigned)(x >> 32),
	    (unsigned)(x >> 16) & 0xffff, (unsigned)x & 0xfff,
	    (unsigned)(y >> 48 & 0x3fff) | 0x8000,
	    (uint64_t)(y & 0xffffffffffffULL));
}

static void
item_free(struct item *it)
{
	int i;

	for (i = 0; it->names != NULL && i < it->ev.count; i++)
		free(it->names[i]);
	free(it->names);
	free(it->name);
	free(it->data);
	free(it);
}

static void p_run_cb(void *, uint64_t);

static void
p_agent_push(struct pagent *a, struct item *it)
{
	if (!a->running) {
		item_free(it);
		return;
	}
	it->next = NULL;
	*a->in_tail = it;
	a->in_tail = &it->next;
	if (!a->paused && !a->run_sched) {
		a->run_sched = true;
		p_at(S->now, p_run_cb, a, a->inc);
	}
}

static void
p_exit(struct pagent *a, uint64_t linger_ms);

static void p_notified_cb(void *p, uint64_t arg);

/*
 * The tree of path and the name of the node in it: tree 0 the members
 * (P_MEMBERS and its children), tree part + 1 a partition's election node
 * and its children; a path is a node's name in its tree, "" for the
 * tree's node. PART is the part a plan is for, -1 for the members.
 */
static int
p_plan_node(int part, const char *path, char name[NAME])
{
	char base[CONFIG_ZK_PATH_MAX];
	int tree = part + 1;
	size_t n;

	if (part < 0)
		snprintf(base, sizeof(base), "%s", P_MEMBERS);
	else
		snprintf(base, sizeof(base), P_PARTS "%s", S->pname[part]);
	n = strlen(base);
	if (strncmp(path, base, n) != 0 || (path[n] != '\0' && path[n] != '/'))
		abort();
	if (snprintf(name, NAME, "%s", path[n] == '\0' ? "" : path + n + 1) >=
	    NAME)
		abort();
	return tree;
}

/* zk.c's kinds (zk_plan_kinds) and watch contexts (zk_plan_watches). */
static const enum kind p_plan_kinds[] = {
	[ZKF_NONE] = K_NONE, [ZKF_PARENT] = K_PARENT, [ZKF_CREATE] = K_CREATE,
	[ZKF_LIST] = K_LIST, [ZKF_PRED_SET] = K_PRED_SET,
	[ZKF_OWNER] = K_OWNER, [ZKF_CLAIM] = K_CLAIM, [ZKF_RENEW] = K_RENEW,
	[ZKF_CLAIM_DATA] = K_CLAIM_DATA, [ZKF_SUCCESSOR] = K_SUCCESSOR,
	[ZKF_RELEASE] = K_RELEASE, [ZKF_SELF_SET] = K_SELF_SET,
	[ZKF_AHEAD] = K_AHEAD, [ZKF_MEMBER_CREATE] = K_MCREATE,
	[ZKF_MEMBERS] = K_MLIST, [ZKF_MEMBER_DATA] = K_MDATA,
	[ZKF_MEMBER_DELETE] = K_MDELETE, [ZKF_SESSION_RENEW] = K_SRENEW,
	[ZKF_MEMBER_SET] = K_MSET,
};

static const enum ctx p_plan_ctxs[] = {
	[ZKW_PRED] = C_PRED, [ZKW_SELF] = C_SELF, [ZKW_CLAIM] = C_CLAIM,
	[ZKW_CHILDREN] = C_CHILD, [ZKW_MEMBERS] = C_MEMBERS,
	[ZKW_MEMBER_DATA] = C_MDATA,
};

/* One call of a plan as the model's request (zk_plan_send). */
static struct pcreq *
p_plan_req(struct pagent *a, int part, uint64_t gen, const struct zkplan *p,
    const struct zkplan_call *c)
{
	static const enum op ops[] = {
		[ZKC_CREATE] = O_CREATE_PARENT, [ZKC_CREATE_SEQ] = O_CREATE,
		[ZKC_SYNC] = O_SYNC, [ZKC_GET] = O_GET,
		[ZKC_EXISTS] = O_EXISTS, [ZKC_CHILDREN] = O_CHILDREN,
		[ZKC_MULTI] = O_MULTI, [ZKC_DELETE] = O_DELETE,
	};
	static const enum op items[] = {
		[ZKI_CHECK] = O_CHECK, [ZKI_SET] = O_SET, [ZKI_DELETE] = O_DELETE,
	};
	char name[NAME];
	struct pcreq *r;
	int i, tree;

	tree = p_plan_node(part, c->path, name);
	r = h_req(a, part, gen, c->answers ? p_plan_kinds[p->what] : K_NONE,
	    ops[c->type], tree, name);
	snprintf(r->name, NAME, "%s", p->name);
	h_op(&r->req.op[0], ops[c->type], name, c->data, c->datalen);
	if (c->type == ZKC_MULTI) {
		for (i = 0; i < c->nitems; i++) {
			if (p_plan_node(part, c->items[i].path, name) != tree)
				abort();
			h_op(&r->req.op[i], items[c->items[i].type], name,
			    c->items[i].data, c->items[i].datalen);
		}
		r->req.nops = c->nitems;
	}
	if (c->watch != ZKW_NONE) {
		r->req.watch = r->set_watch = true;
		r->ctx = p_plan_ctxs[c->watch];
		r->wkind = c->type == ZKC_CHILDREN ? WK_CHILD : WK_DATA;
	}
	return r;
}

/*
 * Submits a plan's calls (agent/zkplan.c) for part (-1: the members), in
 * order, as zk_plan_run does; the model's client refuses nothing (a
 * closed handle fails each call). Creates whose replies zk.c ignores (the
 * ancestors of a path, the members' and partitions' nodes) are not sent:
 * the model holds those nodes already (sim-agent.c does the same). Several
 * answering calls (a renewal) share one aggregate: the last to complete
 * reports.
 */
static void
p_plan_run(struct pagent *a, int part, uint64_t gen, const struct zkplan *plan)
{
	const struct zkplan_call *c;
	struct agg *g = NULL;
	struct pcreq *r;
	int i, sub = 0;

	if (plan->what == ZKF_NONE)
		return;
	if (zkplan_answers(plan) > 1 || plan->what == ZKF_SESSION_RENEW) {
		if ((g = calloc(1, sizeof(*g))) == NULL)
			abort();
		g->refs = zkplan_answers(plan);
		g->failed_op = -1;
		g->asked = a->f.now;
	}
	for (i = 0; i < plan->ncalls; i++) {
		c = &plan->calls[i];
		if (c->type == ZKC_CREATE && !c->answers)
			continue;
		r = p_plan_req(a, part, gen, plan, c);
		if (g != NULL && c->answers) {
			r->agg = g;
			r->sub = sub++;
		}
		h_submit(a->h, r);
	}
}

/* zk_perform: what a fleet step asks. */
static void
p_perform(struct pagent *a, const struct fleet_actions *out)
{
	const struct fleet_action *fa;
	struct part *pt;
	struct zkplan plan;
	uint64_t inc = a->inc;
	int i;

	for (i = 0; i < out->n && a->running && a->inc == inc; i++) {
		fa = &out->a[i];
		pt = fa->part >= 0 ? &a->f.parts[fa->part] : NULL;
		switch (fa->type) {
		case FACT_ELECTION:
			if (fa->a.type == ACT_NOTIFY) {
				if (fa->a.wait)
					p_at(S->now + a->hook_us, p_notified_cb,
					    a, (a->inc << 40) |
					    ((uint64_t)pt->idx << 32) |
					    (fa->a.told & 0xffffffffu));
				break;
			}
			if (zkplan_build(&fa->a, pt->path, pt->prefix,
			    pt->e.uuid, &plan) == -1)
				abort();	/* the model's names are short */
			p_plan_run(a, pt->idx, pt->e.gen, &plan);
			break;
		case FACT_KICK:
			p_trace("%s: kicks its connection", a->id);
			if (a->h->conn != NULL)
				p_client_drop(a->h, false);
			break;
		case FACT_NEW_SESSION:
			h_close(a->h, true);
			a->h = h_open(a);
			break;
		case FACT_EXIT:
			a->stopping = true;
			p_exit(a, fa->linger_ms);
			break;
		case FACT_CHANGED:
			break;
		default:
			if (zkplan_member(fa, a->f.members_path, a->f.parts_path,
			    a->f.member_data, a->f.member_datalen, &plan) == -1)
				abort();
			p_plan_run(a, -1, fa->gen, &plan);
			break;
		}
	}
}

/* One fleet step of agent A, and what it asks. */
static void
p_step(struct pagent *a, const struct fleet_event *fev)
{
	struct fleet_actions out = { 0 };

	fleet_step(&a->f, fev, &out);
	p_perform(a, &out);
	fleet_actions_free(&out);
}

static void
p_notified_cb(void *p, uint64_t arg)
{
	struct pagent *a = p;
	struct item *it;

	if ((arg >> 40) != (a->inc & 0xffffff) || !a->running)
		return;
	it = item_new(a->h->id, I_EV, (int)((arg >> 32) & 0xff));
	it->ev.type = EV_NOTIFIED;
	it->ev.told = arg & 0xffffffffu;
	p_agent_push(a, it);
}

static void
p_trace_step(const struct pagent *a, int part, const struct election_glance *before,
    const struct election *e, const struct election_actions *out)
{
	char acts[1024];
	int i, off = 0;

	if (!S->verbose)
		return;
	acts[0] = '\0';
	for (i = 0; i < out->n && off < (int)sizeof(acts); i++)
		off += snprintf(acts + off, sizeof(acts) - (size_t)off, " %s%s%s",
		    election_action_name(out->a[i].type),
		    out->a[i].name[0] ? ":" : "", out->a[i].name);
	p_trace("%s/p%d: %s/%s -> %s/%s epoch %" PRIx64 " lease %" PRIu64
	    " (now %" PRIu64 ")%s%s |%s", a->id, part,
	    election_phase_name(before->phase), election_role_name(before->role),
	    election_phase_name(e->phase), election_role_name(e->role),
	    e->epoch, e->lease_deadline, e->now, e->parked ? " parked" : "",
	    a->f.parts[part].assigned ? " assigned" : "", acts);
}

/* What must hold after each step of partition PART of agent A. */
static void
p_check_step(struct pagent *a, int part, const struct election_glance *before)
{
	const struct election *e = &a->f.parts[part].e;
	uint64_t now = a_now_ms(a);
	bool was = before->role == ELECTION_LEADER &&
	    now < before->lease_deadline;	/* election_role_at() */
	bool is = election_role_at(e, now) == ELECTION_LEADER;

	S->steps++;
	if (is && (!was || e->epoch != before->epoch)) {
		S->terms++;
		p_trace("%s: LEADS partition %d, epoch %" PRIx64, a->id, part,
		    e->epoch);
		if (e->epoch <= S->max_epoch[part])
			p_fail("partition %d: %s leads under epoch %" PRIx64
			    ", not above %" PRIx64, part, a->id, e->epoch,
			    S->max_epoch[part]);
		S->max_epoch[part] = e->epoch;
		if (S->leaver >= 0 && S->owner_before[part] != a->idx &&
		    S->owner_before[part] != S->leaver)
			p_fail("partition %d moved to %s during %s's graceful "
			    "leave, though a%d owned it", part, a->id,
			    S->agents[S->leaver].id, S->owner_before[part]);
		if (S->leaver >= 0 && S->owner_before[part] == S->leaver)
			S->moved++;
	}
	p_check_owners(part);
}

/* fleet.c stepped one partition's election (its stepped callback). */
static void
p_stepped(void *arg, struct part *pt, const struct election_glance *before,
    const struct election_actions *out)
{
	struct pagent *a = arg;

	p_trace_step(a, pt->idx, before, &pt->e, out);
	p_check_step(a, pt->idx, before);
}

/* --- Ticks, the loop, the stop --- */

static void p_tick_cb(void *, uint64_t);

static void
p_schedule_tick(struct pagent *a)
{
	uint64_t at = fleet_next_tick(&a->f), t;

	a->tick_ver++;
	if (at == 0 || !a->running)
		return;
	/* The loop's timer fires a little after its deadline. */
	t = a_true_at(a, at * 1000);
	p_at((t > S->now ? t : S->now) + 1 + p_below(300), p_tick_cb, a,
	    a->tick_ver);
}

/* zk_wake_cb's end: one assignment for the batch. */
static void
p_after_batch(struct pagent *a)
{
	struct fleet_actions out = { 0 };

	if (!a->running)
		return;
	fleet_flush(&a->f, a_now_ms(a), &out);
	p_perform(a, &out);
	fleet_actions_free(&out);
	if (a->running)
		p_schedule_tick(a);
}

static void
p_tick_cb(void *p, uint64_t ver)
{
	struct pagent *a = p;
	struct fleet_event fev;

	if (ver != a->tick_ver || !a->running)
		return;
	if (a->paused) {
		p_at(S->now + S->T / 20, p_tick_cb, a, ver);
		return;
	}
	memset(&fev, 0, sizeof(fev));
	fev.type = FEV_TICK;
	fev.part = -1;
	fev.ev.now = a_now_ms(a);
	/* A timer due again at once, over and over, is a busy loop. */
	if (fev.ev.now == a->last_tick_ms) {
		if (++a->ticks_same_ms > 1000) {
			p_fail("%s: busy loop of ticks at %" PRIu64 " ms", a->id,
			    fev.ev.now);
			return;
		}
	} else {
		a->last_tick_ms = fev.ev.now;
		a->ticks_same_ms = 0;
	}
	p_step(a, &fev);
	p_after_batch(a);
}

/* An item from the model's client, as zk_apply makes it a fleet event. */
static void
p_apply(struct pagent *a, struct item *it)
{
	static const enum fleet_event_type members[] = {
		[K_MCREATE] = FEV_MEMBER_CREATED, [K_MLIST] = FEV_MEMBERS,
		[K_MDATA] = FEV_MEMBER_DATA, [K_MDELETE] = FEV_MEMBER_DELETED,
		[K_MSET] = FEV_MEMBER_SET,
	};
	struct fleet_event fev;

	memset(&fev, 0, sizeof(fev));
	fev.ev = it->ev;
	fev.part = it->part;
	switch (it->what) {
	case I_MEMBER:
		fev.type = it->watch ? FEV_MEMBERS_CHANGED : members[it->kind];
		break;
	case I_SRENEW:
		fev.type = FEV_SESSION_RENEWED;
		if (a->f.srenew_inflight && it->ev.sent != a->f.srenew_sent)
			S->earlier++;
		break;
	case I_MDATA_WATCH:
		fev.type = FEV_MEMBER_DATA_CHANGED;
		break;
	case I_EV:
		if (it->ev.type == EV_SESSION)
			fev.type = FEV_SESSION;
		else if (it->ev.type == EV_SERVER)
			fev.type = FEV_SERVER;
		else if (it->ev.type == EV_NOTIFIED)
			fev.type = FEV_NOTIFIED;
		else
			fev.type = FEV_ELECTION;
		break;
	}
	p_step(a, &fev);
}

static void
p_run_cb(void *p, uint64_t inc)
{
	struct pagent *a = p;
	struct item *it;

	if (inc != a->inc || !a->running)
		return;
	a->run_sched = false;
	while (a->running && a->inc == inc && !a->paused &&
	    (it = a->in_head) != NULL) {
		a->in_head = it->next;
		if (a->in_head == NULL)
			a->in_tail = &a->in_head;
		if (it->hid != a->h->id && it->what == I_EV &&
		    it->ev.type == EV_SESSION) {
			/* zk_apply: a closed handle's session events are
			 * dropped. */
			item_free(it);
			continue;
		}
		it->ev.now = a_now_ms(a);
		it->ev.name = it->name;
		it->ev.data = it->data;
		it->ev.names = it->names;
		p_apply(a, it);
		item_free(it);
	}
	if (a->running && a->inc == inc)
		p_after_batch(a);
}

static void
p_clear_inbox(struct pagent *a)
{
	struct item *it;

	while ((it = a->in_head) != NULL) {
		a->in_head = it->next;
		item_free(it);
	}
	a->in_tail = &a->in_head;
}

static void p_start(struct pagent *a);

static void
p_restart_cb(void *p, uint64_t inc)
{
	struct pagent *a = p;

	if (a->running || inc != a->inc)
		return;
	p_start(a);
}

static void
p_exit_cb(void *p, uint64_t inc)
{
	struct pagent *a = p;

	if (inc != a->inc || !a->running)
		return;
	p_trace("%s: exits", a->id);
	h_close(a->h, true);
	a->running = false;
	a->stopping = false;
	p_clear_inbox(a);
	if (a->restart_after != 0) {
		if (S->now + a->restart_after > S->last_heal)
			S->last_heal = S->now + a->restart_after;
		p_at(S->now + a->restart_after, p_restart_cb, a, a->inc);
	}
}

/* zk_exit: the session closes after the linger. */
static void
p_exit(struct pagent *a, uint64_t linger_ms)
{
	p_at(S->now + linger_ms * 1000, p_exit_cb, a, a->inc);
}

/* zk_stop: a graceful stop (SIGTERM). */
static void
p_parts_stop(struct pagent *a, stime restart_after)
{
	struct fleet_event fev;

	if (!a->running || a->paused || a->f.stopping)
		return;
	p_trace("%s: STOP (graceful)", a->id);
	a->restart_after = restart_after;
	memset(&fev, 0, sizeof(fev));
	fev.type = FEV_STOP;
	fev.part = -1;
	fev.ev.now = a_now_ms(a);
	p_step(a, &fev);
	if (a->running)
		p_schedule_tick(a);
}

/* The configuration every agent runs with (main.c's, for fleet_init). */
static void
p_config(struct pagent *a, struct config *conf)
{
	static char *names[PP_MAX];
	int i;

	for (i = 0; i < S->nparts; i++)
		names[i] = S->pname[i];
	memset(conf, 0, sizeof(*conf));
	conf->election_id = a->id;
	conf->election_path = (char *)(uintptr_t)P_PATH;
	conf->election_candidate = true;
	conf->zk_tick_ms = S->tick_known ? (uint64_t)S->tick_ms : 0;
	conf->partitions = names;
	conf->npartitions = S->nparts;
}

static void
p_start(struct pagent *a)
{
	struct config conf;
	int i;

	p_clear_inbox(a);
	if (a->started)
		fleet_free(&a->f);
	a->started = a->running = true;
	a->paused = a->stopping = false;
	a->inc++;
	a->run_sched = false;
	p_config(a, &conf);
	fleet_init(&a->f, &conf, a_uuid, a);
	a->f.stepped = p_stepped;
	a->f.stepped_arg = a;
	if (opt_break == BREAK_STICKY)
		a->f.assign_unsticky = true;
	if (opt_break == BREAK_DRAIN)
		a->f.drain_counted = true;
	/* An agent with a hook (its app hears of a change later) has an
	 * on_follower: it lets go of partitions one at a time. */
	fleet_serial_releases(&a->f, a->hook_us > 0);
	if (opt_break == BREAK_AVOID)
		a->f.avoid_ignored = true;
	for (i = 0; i < S->nparts; i++)
		if (opt_break == BREAK_NAIVE)
			a->f.parts[i].e.lease_naive = true;
	p_trace("%s: starts (incarnation %" PRIu64 ")", a->id, a->inc);
	a->h = h_open(a);
}

static void
p_start_cb(void *p, uint64_t unused)
{
	(void)unused;
	p_start(p);
}

/* --- Faults --- */

static void
p_heal_at(stime t)
{
	if (t > S->last_heal)
		S->last_heal = t;
}

static void
p_resume_cb(void *p, uint64_t inc)
{
	struct pagent *a = p;

	if (inc != a->inc || !a->running || !a->paused)
		return;
	a->paused = false;
	p_trace("%s: resumed", a->id);
	h_drain(a->h);
	if (!a->running || a->inc != inc)
		return;
	if (a->in_head != NULL && !a->run_sched) {
		a->run_sched = true;
		p_at(S->now, p_run_cb, a, a->inc);
	}
	p_schedule_tick(a);
}

static void
p_crash(struct pagent *a, stime restart_after)
{
	p_trace("%s: CRASHES (restart in %" PRIu64 " ms)", a->id,
	    restart_after / 1000);
	if (a->h->conn != NULL) {
		a->h->conn->client_open = false;
		p_send(msg_new(M_FIN, a->h->conn), true);
		a->h->conn = NULL;
	}
	a->h->state = HS_CLOSED;
	a->h->ver++;
	a->running = false;
	a->paused = false;
	p_clear_inbox(a);
	p_heal_at(S->now + restart_after);
	p_at(S->now + restart_after, p_restart_cb, a, a->inc);
}

/* An agent's operator asks (an API call): drain, undrain, or resign a
 * partition it owns. */
static void
p_ask(struct pagent *a, enum fleet_event_type type, int part, bool drained,
    uint64_t hold_ms)
{
	struct fleet_event fev;

	memset(&fev, 0, sizeof(fev));
	fev.type = type;
	fev.part = part;
	fev.ev.now = a_now_ms(a);
	fev.ev.assigned = drained;
	fev.ev.hold_ms = hold_ms;
	p_step(a, &fev);
	p_after_batch(a);
}

static void
p_control_cb(void *p, uint64_t last)
{
	struct pagent *a;
	int i, j, part, live = 0, drained = 0;
	uint64_t hold;

	(void)p;
	for (i = 0; i < S->nagents; i++)
		if (S->agents[i].running && !S->agents[i].f.stopping &&
		    !S->agents[i].paused) {
			live++;
			drained += S->agents[i].f.drained;
		}
	if (last) {
		/* The end: every agent undrained but the first, which stays
		 * drained on odd draws (when others are left to own). */
		bool keep = S->nagents >= 3 && p_chance(50);

		for (i = 0; i < S->nagents; i++) {
			a = &S->agents[i];
			if (!a->running || a->paused || a->f.stopping)
				continue;
			if (a->f.drained != (keep && i == 0)) {
				p_trace("%s: %s (the last control)", a->id,
				    keep && i == 0 ? "DRAINED" : "UNDRAINED");
				S->drains++;
				p_ask(a, FEV_DRAIN, -1, keep && i == 0, 0);
			}
		}
		p_heal_at(S->now);
		S->settled = false;	/* a new settle starts here */
		return;
	}
	if (live == 0)
		return;
	if (p_chance(40)) {
		i = (int)p_below((uint64_t)S->nagents);
		a = &S->agents[i];
		if (!a->running || a->paused || a->f.stopping ||
		    (!a->f.drained && drained + 1 >= live))
			return;		/* never every live agent */
		p_trace("%s: %s", a->id, a->f.drained ? "UNDRAINED" :
		    "DRAINED");
		S->drains++;
		p_ask(a, FEV_DRAIN, -1, !a->f.drained, 0);
		p_heal_at(S->now);
		S->settled = false;
		return;
	}
	part = (int)p_below((uint64_t)S->nparts);
	a = NULL;
	for (j = 0; j < S->nagents && a == NULL; j++)
		if (S->agents[j].running && !S->agents[j].paused &&
		    !S->agents[j].f.stopping && S->agents[j].f.parts[part].owned)
			a = &S->agents[j];
	if (a == NULL)
		return;
	hold = p_chance(30) ? 0 : p_range(S->T / 3, 2 * S->T) / 1000;
	p_trace("%s: RESIGNS partition %d, hold %" PRIu64 " ms", a->id, part,
	    hold);
	S->resigns++;
	p_ask(a, FEV_PART_RESIGN, part, false, hold);
	p_heal_at(S->now + hold * 1000);
	S->settled = false;
}

static void
p_fault_cb(void *p, uint64_t unused)
{
	struct pagent *a;
	stime d;
	int k, i, kinds[12], nk;

	(void)unused;
	(void)p;
	if (S->leaver >= 0)
		return;
	i = (int)p_below((uint64_t)S->nagents);
	a = &S->agents[i];
	if (!a->running || a->paused || a->f.stopping)
		return;
	/* A leader of some partition, more often than not. */
	for (k = 0; k < 4 && p_chance(60); k++) {
		int j = (int)p_below((uint64_t)S->nagents), q;

		for (q = 0; q < S->nparts; q++)
			if (S->agents[j].running &&
			    S->agents[j].f.parts[q].e.role == ELECTION_LEADER) {
				a = &S->agents[j];
				break;
			}
		if (q < S->nparts)
			break;
	}
	S->faults++;
	nk = 0;
	for (k = 0; k < 6; k++)
		kinds[nk++] = k;
	if (opt_failover)
		kinds[nk++] = 6;
	if (opt_shapes & SH_DEPOSED) {
		kinds[nk++] = 7;
		kinds[nk++] = 7;
	} else if (opt_shapes & SH_SHRINK)
		kinds[nk++] = 7;	/* a new leader restores the creation
					   timeout (zkelect-sim does the same) */
	if (opt_shapes & SH_RELAY) {
		kinds[nk++] = 8;
		kinds[nk++] = 8;
	}
	switch (kinds[p_below((uint64_t)nk)]) {
	case 0:
		d = p_range(S->T / 10, 3 * S->T);
		p_trace("%s: PAUSED for %" PRIu64 " ms", a->id, d / 1000);
		a->paused = true;
		p_at(S->now + d, p_resume_cb, a, a->inc);
		p_heal_at(S->now + d);
		break;
	case 1:
		d = p_range(S->T / 6, 3 * S->T);
		p_trace("%s: CUT OFF for %" PRIu64 " ms", a->id, d / 1000);
		if (S->now + d > S->blocked_until[a->idx])
			S->blocked_until[a->idx] = S->now + d;
		p_heal_at(S->now + d);
		break;
	case 2:
		S->lose_reply[a->idx] = true;
		p_heal_at(S->now + S->T);
		break;
	case 3:
		p_trace("%s: connection RESET", a->id);
		if (a->h->conn != NULL)
			p_client_drop(a->h, false);
		p_heal_at(S->now + S->T);
		break;
	case 4:
		p_crash(a, p_range(S->T / 2, 5 * S->T));
		break;
	case 5:
		p_parts_stop(a, p_range(S->T / 2, 5 * S->T));
		p_heal_at(S->now + (stime)(STOP_WAIT_MS + 2 * S->T_ms) * 1000);
		break;
	case 6:
		p_zk_fail();
		break;
	case 7:
		p_depose();
		break;
	case 8:
		p_master_stop();
		break;
	}
}

/* --- The checks that span agents --- */

static int
p_owner_of(int part, int *count)
{
	int i, owner = -1;

	*count = 0;
	for (i = 0; i < S->nagents; i++) {
		struct pagent *a = &S->agents[i];

		if (!a->running)
			continue;
		if (opt_break == BREAK_LEASE ?
		    a->f.parts[part].e.role == ELECTION_LEADER :
		    election_role_at(&a->f.parts[part].e, a_now_ms(a)) ==
		    ELECTION_LEADER) {
			(*count)++;
			owner = i;
		}
	}
	return owner;
}

/* One owner per partition at any instant. */
static void
p_check_owners(int part)
{
	int count, i;

	(void)p_owner_of(part, &count);
	if (count <= 1)
		return;
	for (i = 0; i < S->nagents; i++)
		if (S->agents[i].running && election_role_at(
		    &S->agents[i].f.parts[part].e,
		    a_now_ms(&S->agents[i])) == ELECTION_LEADER)
			p_trace("  a%d leads partition %d, epoch %" PRIx64
			    ", lease until %" PRIu64 " (now %" PRIu64 ")", i, part,
			    S->agents[i].f.parts[part].e.epoch,
			    S->agents[i].f.parts[part].e.lease_deadline,
			    a_now_ms(&S->agents[i]));
	p_fail("partition %d: %d agents answer is_leader true at once", part,
	    count);
}

/* Every partition has one owner among the live agents, and each owns
 * floor(N/K) or ceil(N/K). Says why not in WHY. */
static bool
p_balanced(char *why, size_t len)
{
	int own[PA_MAX] = { 0 }, live = 0, drained = 0, i, p, o, count;

	for (i = 0; i < S->nagents; i++)
		if (S->agents[i].running && !S->agents[i].f.stopping) {
			live++;
			drained += S->agents[i].f.drained;
		}
	/* A drained agent owns none and counts for nothing, unless every
	 * live agent is drained. */
	if (drained == live)
		drained = 0;
	live -= drained;
	if (live == 0) {
		snprintf(why, len, "no live agent");
		return false;
	}
	for (p = 0; p < S->nparts; p++) {
		o = p_owner_of(p, &count);
		if (count != 1) {
			snprintf(why, len, "partition %d has %d owners", p, count);
			return false;
		}
		own[o]++;
	}
	for (i = 0; i < S->nagents; i++) {
		const struct pagent *a = &S->agents[i];
		bool alive = a->running && !a->f.stopping;

		/* A resign moves the partition, when another may take it. */
		for (p = 0; alive && live > 1 && p < S->nparts; p++)
			if (a->f.parts[p].avoiding && a->f.parts[p].owned &&
			    !(drained > 0 && a->f.drained)) {
				snprintf(why, len, "%s still owns partition %d "
				    "it resigned", a->id, p);
				return false;
			}
		if (!alive && own[i] > 0) {
			snprintf(why, len, "%s (leaving) owns %d", a->id, own[i]);
			return false;
		}
		if (alive && drained > 0 && a->f.drained) {
			if (own[i] > 0) {
				snprintf(why, len, "%s (drained) owns %d",
				    a->id, own[i]);
				return false;
			}
			continue;
		}
		if (alive && (own[i] < S->nparts / live ||
		    own[i] > (S->nparts + live - 1) / live)) {
			snprintf(why, len, "%s owns %d of %d with %d live agents",
			    a->id, own[i], S->nparts, live);
			return false;
		}
	}
	return true;
}

static void p_leave_cb(void *, uint64_t);

/* The state of every agent's partitions, for the trace of a failure. */
static void
p_dump(void)
{
	int i, p;

	for (i = 0; i < S->nagents && S->verbose; i++) {
		const struct pagent *a = &S->agents[i];

		p_trace("%s: %s%s, member %s, %d members, %d listed, reads %d",
		    a->id, a->running ? "running" : "down",
		    a->f.stopping ? " stopping" : "", a->f.member_node,
		    a->f.view.count, a->f.nmembers, a->f.member_reads);
		for (p = 0; p < a->f.nmembers && a->running; p++)
			p_trace("  member %s: %s%s%s%s avoid %s",
			    a->f.members[p].name, a->f.members[p].id,
			    a->f.members[p].known ? "" : " (unknown)",
			    a->f.members[p].drained ? " drained" : "",
			    a->f.drained && strcmp(a->f.members[p].name,
			    a->f.member_node) == 0 ? " (us, drained)" : "",
			    a->f.members[p].avoid != NULL ?
			    a->f.members[p].avoid : "-");
		for (p = 0; p < S->nparts && a->running; p++) {
			const struct part *pt = &a->f.parts[p];

			p_trace("  p%d: %s/%s%s%s node %s pred %s succ %s claim "
			    "%s leader %s retry %" PRIu64 " now %" PRIu64, p,
			    election_phase_name(pt->e.phase),
			    election_role_name(pt->e.role),
			    pt->e.parked ? " parked" : "",
			    pt->assigned ? " assigned" : "", pt->e.node,
			    pt->e.predecessor, pt->e.succ,
			    pt->e.claim_known ? pt->e.claim_id : "-",
			    pt->leader, pt->e.retry_at, a_now_ms(a));
		}
	}
}

/* After the last fault: balanced within the bound, and it stays. */
static void
p_settle_cb(void *p, uint64_t round)
{
	char why[256];

	(void)p;
	if (round == 0 && (S->now < S->faults_end ||
	    S->now < S->last_heal + S->bound)) {
		p_at(S->faults_end > S->last_heal + S->bound ? S->faults_end :
		    S->last_heal + S->bound, p_settle_cb, NULL, 0);
		return;
	}
	if (!p_balanced(why, sizeof(why))) {
		p_dump();
		p_fail("not balanced %.2f T after the last fault healed: %s",
		    (double)(S->now - S->last_heal) / (double)S->T, why);
		return;
	}
	if (round == 0) {
		p_at(S->now + 2 * S->T, p_settle_cb, NULL, 1);
		return;
	}
	if (S->settled_at - S->last_heal > S->max_settle)
		S->max_settle = S->settled_at - S->last_heal;
	p_leave_cb(NULL, 0);
}

/* Notes the first balanced instant after the last heal. */
static void
p_check_settled(void)
{
	char why[8];

	if (S->now < S->last_heal) {
		S->settled = false;
		return;
	}
	if (p_balanced(why, sizeof(why))) {
		if (!S->settled) {
			S->settled = true;
			S->settled_at = S->now;
		}
	} else
		S->settled = false;
}

/* A graceful leave in a settled state: only the leaver's partitions
 * move, each once, to the others, balanced again. */
static void
p_leave_cb(void *p, uint64_t phase)
{
	char why[256];
	int i, live = 0, pick, count, n;

	(void)p;
	if (phase == 0) {
		for (i = 0; i < S->nagents; i++)
			if (S->agents[i].running)
				live++;
		if (live < 2) {
			S->stop = true;
			return;
		}
		pick = (int)p_below((uint64_t)live);
		for (i = 0; i < S->nagents; i++)
			if (S->agents[i].running && pick-- == 0)
				break;
		S->leaver = i;
		S->leave_at = S->now;
		for (n = 0; n < S->nparts; n++)
			S->owner_before[n] = p_owner_of(n, &count);
		p_parts_stop(&S->agents[i], 0);
		p_at(S->now + S->bound, p_leave_cb, NULL, 1);
		return;
	}
	if (!p_balanced(why, sizeof(why))) {
		p_dump();
		p_fail("not balanced %.2f T after %s left: %s",
		    (double)(S->now - S->leave_at) / (double)S->T,
		    S->agents[S->leaver].id, why);
		return;
	}
	if (S->agents[S->leaver].running) {
		p_fail("%s has not exited %.2f T after its stop",
		    S->agents[S->leaver].id,
		    (double)(S->now - S->leave_at) / (double)S->T);
		return;
	}
	for (n = 0; n < S->nparts; n++) {
		i = p_owner_of(n, &count);
		if (S->owner_before[n] != S->leaver && i != S->owner_before[n]) {
			p_fail("partition %d: a%d owned it before %s left, a%d "
			    "after", n, S->owner_before[n],
			    S->agents[S->leaver].id, i);
			return;
		}
	}
	if (S->settled_at > S->leave_at &&
	    S->settled_at - S->leave_at > S->max_leave)
		S->max_leave = S->settled_at - S->leave_at;
	S->stop = true;
}

/* --- A seed --- */

/* The servers of this seed (--shape; one server without it). */
static void
p_shapes_init(void)
{
	int i, j, k, n;

	S->nservers = S->nvoters = 1;
	S->srv[0].max_timeout_ms = 20 * S->tick_ms;
	if (opt_shapes == 0)
		return;
	/* Five voters when deposed, so that a follower can stay with it. */
	S->nvoters = S->nservers = opt_shapes & SH_DEPOSED ? 5 : 3;
	if (opt_shapes & SH_RELAY) {
		/* One or two observers, each behind an ObserverMaster
		 * follower (servers 1 and 2 follow at first). */
		S->nservers += (int)p_range(1, 2);
		for (i = S->nvoters; i < S->nservers; i++) {
			S->srv[i].observer = true;
			S->srv[i].master = (int)p_range(1, 2);
		}
	}
	for (i = 0; i < S->nservers; i++)
		S->srv[i].max_timeout_ms = 20 * S->tick_ms;
	if (opt_shapes & SH_SHRINK) {
		/* Mixed limits, as zkelect-sim: a server or two with a lower
		 * maxSessionTimeout (T/2 or 2T/3, never under 2 ticks). */
		n = (int)p_range(1, (uint64_t)(S->nservers - 1) / 2 + 1);
		for (j = 0; j < n; j++) {
			k = (int)p_below((uint64_t)S->nservers);
			S->srv[k].max_timeout_ms = p_chance(50) ?
			    S->T_ms / 2 : S->T_ms * 2 / 3;
			if (S->srv[k].max_timeout_ms < 2 * S->tick_ms)
				S->srv[k].max_timeout_ms = 2 * S->tick_ms;
		}
	}
	for (i = 0; i < S->nservers; i++)
		p_trace("s%d: %s%s, maxSessionTimeout %d ms", i, i == 0 ?
		    "leader" : S->srv[i].observer ? "observer" : "follower",
		    S->srv[i].observer ? (S->srv[i].master == 1 ?
		    " behind s1" : " behind s2") : "",
		    S->srv[i].max_timeout_ms);
}

static bool
p_run_seed(uint64_t seed, int verbose, int nagents, int nparts,
    struct psim *out)
{
	struct qent e;
	struct pconn *c;
	struct phandle *h;
	bool failed;
	int i, j, nf;

	S = calloc(1, sizeof(*S));
	if (S == NULL)
		abort();
	S->seed = seed;
	S->rng = seed * 0x2545f4914f6cdd1dULL + 0x7654321;
	S->verbose = verbose;
	S->nagents = nagents;
	S->nparts = nparts;
	S->leaver = -1;
	S->zxid = (int64_t)1 << 32;
	S->next_session = 0x100000000LL;
	S->T_ms = (int)p_range(400, 6000);
	S->tick_ms = S->T_ms / (int)p_range(3, 20);
	if (opt_shapes & SH_TICK_HALF)
		S->tick_ms = S->T_ms / 2;	/* the smallest T ZooKeeper takes */
	S->T = (stime)S->T_ms * 1000;
	S->tick = (stime)S->tick_ms * 1000;
	S->tick_known = p_chance(50);
	p_shapes_init();
	/* A rebalance: the members' lists, a crashed leader's session,
	 * handovers (a queued contender read, the app told), retries. */
	S->bound = 6 * S->T + 2 * S->tick + 10000000;
	for (i = 0; i < nparts; i++)
		snprintf(S->pname[i], sizeof(S->pname[i]), "%d", i);
	S->tree[0].exists = true;	/* members: zk_member_create's parents */
	S->tree[0].datalen = -1;
	p_trace("seed %" PRIu64 ": %d agents, %d partitions, T %d ms, tick %d "
	    "ms (%s)", seed, nagents, nparts, S->T_ms, S->tick_ms,
	    S->tick_known ? "given" : "not given");
	for (i = 0; i < nagents; i++) {
		struct pagent *a = &S->agents[i];
		stime start;

		a->idx = i;
		snprintf(a->id, sizeof(a->id), "a%d", i);
		a->in_tail = &a->in_head;
		a->offset_us = (int64_t)p_below(1000000000ULL);
		a->ppm = (int)p_range(0, 20000) - 10000;
		a->hook_us = p_chance(50) ? 0 : p_range(100, S->T / 4);
		/* Most start together; the others join later. */
		start = i < 2 || p_chance(50) ? p_below(S->T) :
		    p_range(S->T, 30 * S->T);
		p_heal_at(start);
		p_at(start, p_start_cb, a, 0);
	}
	p_at(S->tick, p_expiry_cb, NULL, 0);
	if (opt_shapes & SH_RELAY)
		p_at(S->tick / 2, p_relay_cb, NULL, 0);
	nf = (int)p_range(3, 15);
	for (j = 0; j < nf; j++) {
		stime t = p_range(2 * S->T, 40 * S->T);

		if (t > S->faults_end)
			S->faults_end = t;
		p_at(t, p_fault_cb, NULL, 0);
	}
	if (opt_controls) {
		stime last = 0;

		nf = (int)p_range(2, 10);
		for (j = 0; j < nf; j++) {
			stime t = p_range(2 * S->T, 40 * S->T);

			if (t > last)
				last = t;
			p_at(t, p_control_cb, NULL, 0);
		}
		last += S->T;
		if (last > S->faults_end)
			S->faults_end = last;
		p_at(last, p_control_cb, NULL, 1);
	}
	p_at(2 * S->T, p_settle_cb, NULL, 0);

	while (!S->failed && !S->stop && p_pop(&e)) {
		if (e.t > S->now)
			p_check_settled();
		S->now = e.t;
		e.fn(e.p, e.a);
		if (S->now > 600 * S->T + 600000000)
			p_fail("runs on at %.1f s", (double)S->now / 1e6);
	}
	failed = S->failed;
	if (failed && !verbose)
		printf("seed %" PRIu64 ": FAIL at %.6f s: %s\n", seed,
		    (double)S->fail_at / 1e6, S->failure);
	*out = *S;

	while (p_pop(&e))
		if (e.owns_msg)
			msg_free(e.p);
	free(S->heap);
	for (i = 0; i < nagents; i++) {
		p_clear_inbox(&S->agents[i]);
		if (S->agents[i].started)
			fleet_free(&S->agents[i].f);
	}
	while ((h = S->handles) != NULL) {
		S->handles = h->next;
		h_free(h);
	}
	while ((c = S->conns) != NULL) {
		S->conns = c->next;
		p_wait_drop(c);
		free(c);
	}
	free(S->sess);
	free(S->sw);
	free(S);
	S = NULL;
	return failed;
}

/* --- The command line --- */

struct ptotals {
	uint64_t	 seeds, failures, first_failure, steps, terms, faults,
			 moved, failovers, depositions, relays_lost, shrinks,
			 master_stops, dep_under, drains, resigns, obs_syncs,
			 obs_syncs_back, losses_in_step, earlier;
	double		 max_settle_t, max_leave_t, sim_s;
	uint64_t	 settle_seed, leave_seed;
};

static void
run_range(uint64_t first, uint64_t count, uint64_t stride, int verbose,
    int na, int np, struct ptotals *t)
{
	struct psim st;
	uint64_t i, seed;
	double x;

	memset(t, 0, sizeof(*t));
	for (i = 0, seed = first; i < count; i++, seed += stride) {
		if (p_run_seed(seed, verbose, na, np, &st) &&
		    t->failures++ == 0)
			t->first_failure = seed;
		t->seeds++;
		t->steps += st.steps;
		t->terms += st.terms;
		t->faults += st.faults;
		t->drains += st.drains;
		t->resigns += st.resigns;
		t->losses_in_step += st.losses_in_step;
		t->earlier += st.earlier;
		t->moved += st.moved;
		t->failovers += st.failovers;
		t->depositions += st.depositions;
		t->relays_lost += st.relays_lost;
		t->shrinks += st.shrinks;
		t->master_stops += st.master_stops;
		t->obs_syncs += st.obs_syncs;
		t->obs_syncs_back += st.obs_syncs_back;
		t->dep_under += st.dep_under;
		t->sim_s += (double)st.now / 1e6;
		x = (double)st.max_settle / (double)st.T;
		if (x > t->max_settle_t) {
			t->max_settle_t = x;
			t->settle_seed = seed;
		}
		x = (double)st.max_leave / (double)st.T;
		if (x > t->max_leave_t) {
			t->max_leave_t = x;
			t->leave_seed = seed;
		}
		fflush(stdout);
	}
}

static void
usage(void)
{
	fprintf(stderr, "usage: zkelect-sim-parts [--seed N] [--seeds COUNT] "
	    "[--jobs J] [--agents A] [--partitions P] [--verbose]\n"
	    "                         [--break lease|sticky] [--expect-failure]\n"
	    "                         [--failover] [--controls] [--loss-in-step]\n"
	    "                         [--shape shrink,relay,tick-half,deposed|"
	    "all]\n"
	    "  --agents A       2 to %d (default 4)\n"
	    "  --partitions P   1 to %d (default 8)\n"
	    "  --break lease    the answer ignores the lease (role alone)\n"
	    "  --break sticky   the assignment ignores the current owners\n"
	    "  --break naive    the old lease (s + 2T/3 from a renewal at s)\n"
	    "  --break srvr     observers taken for voting servers\n"
	    "  --break asked    the timeout asked for taken for the one given\n"
	    "  --break drain    a drained member still counts (--controls)\n"
	    "  --break avoid    a resigned partition stays (--controls)\n"
	    "  --expect-failure exit 0 only if some seed fails\n"
	    "  --failover       the ZooKeeper leader fails, and a new one\n"
	    "                   takes over, among the faults\n"
	    "  --controls       drains, undrains and resigns of partitions\n"
	    "                   among the faults\n"
	    "  --loss-in-step   the connection ends while the loop asks\n"
	    "                   for a renewal (1 in 256): it goes out after\n"
	    "                   the reconnect\n"
	    "  --shape LIST     zkelect-sim's shapes of deployment, in this\n"
	    "                   model (README.md, \"Partitions\")\n",
	    PA_MAX, PP_MAX);
	exit(2);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "seed",	required_argument, NULL, 's' },
		{ "seeds",	required_argument, NULL, 'n' },
		{ "jobs",	required_argument, NULL, 'j' },
		{ "agents",	required_argument, NULL, 'a' },
		{ "partitions",	required_argument, NULL, 'p' },
		{ "verbose",	no_argument,	   NULL, 'v' },
		{ "break",	required_argument, NULL, 'b' },
		{ "expect-failure", no_argument,   NULL, 'x' },
		{ "failover",	no_argument,	   NULL, 'f' },
		{ "shape",	required_argument, NULL, 'S' },
		{ "controls",	no_argument,	   NULL, 'C' },
		{ "loss-in-step", no_argument,	   NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t first = 1, count = 1;
	int ch, jobs = 1, verbose = 0, na = 4, np = 8, j;
	bool expect_failure = false;
	struct ptotals tot, part;
	int pipes[64][2];
	pid_t pids[64];
	struct timespec t0, t1;
	double el;

	/* fleet.c logs as it would in the agent: errors only, here. */
	log_init(LOG_ERROR, LOG_TEXT);
	while ((ch = getopt_long(argc, argv, "s:n:j:a:p:vb:xfCLS:", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 's': first = strtoull(optarg, NULL, 10); break;
		case 'n': count = strtoull(optarg, NULL, 10); break;
		case 'j': jobs = atoi(optarg); break;
		case 'a': na = atoi(optarg); break;
		case 'p': np = atoi(optarg); break;
		case 'v': verbose = 1; break;
		case 'b':
			if (strcmp(optarg, "lease") == 0)
				opt_break = BREAK_LEASE;
			else if (strcmp(optarg, "sticky") == 0)
				opt_break = BREAK_STICKY;
			else if (strcmp(optarg, "naive") == 0)
				opt_break = BREAK_NAIVE;
			else if (strcmp(optarg, "srvr") == 0)
				opt_break = BREAK_SRVR;
			else if (strcmp(optarg, "asked") == 0)
				opt_break = BREAK_ASKED;
			else if (strcmp(optarg, "drain") == 0)
				opt_break = BREAK_DRAIN;
			else if (strcmp(optarg, "avoid") == 0)
				opt_break = BREAK_AVOID;
			else
				usage();
			break;
		case 'S': {
			char *list = optarg, *w;

			while ((w = strsep(&list, ",")) != NULL) {
				if (strcmp(w, "shrink") == 0)
					opt_shapes |= SH_SHRINK;
				else if (strcmp(w, "relay") == 0)
					opt_shapes |= SH_RELAY;
				else if (strcmp(w, "tick-half") == 0)
					opt_shapes |= SH_TICK_HALF;
				else if (strcmp(w, "deposed") == 0)
					opt_shapes |= SH_DEPOSED;
				else if (strcmp(w, "all") == 0)
					opt_shapes |= SH_SHRINK | SH_RELAY |
					    SH_TICK_HALF | SH_DEPOSED;
				else
					usage();
			}
			break;
		}
		case 'x': expect_failure = true; break;
		case 'f': opt_failover = true; break;
		case 'C': opt_controls = true; break;
		case 'L': opt_loss_in_step = true; break;
		default: usage();
		}
	}
	if (optind != argc || jobs < 1 || jobs > 64 || na < 2 ||
	    na > PA_MAX || np < 1 || np > PP_MAX || count == 0)
		usage();
	if (verbose)
		jobs = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (jobs == 1)
		run_range(first, count, 1, verbose, na, np, &tot);
	else {
		memset(&tot, 0, sizeof(tot));
		for (j = 0; j < jobs; j++) {
			if (pipe(pipes[j]) == -1 || (pids[j] = fork()) == -1) {
				perror("zkelect-sim-parts");
				return 2;
			}
			if (pids[j] == 0) {
				uint64_t n = (count + (uint64_t)(jobs - j - 1)) /
				    (uint64_t)jobs;

				close(pipes[j][0]);
				memset(&part, 0, sizeof(part));
				if (n > 0)
					run_range(first + (uint64_t)j, n,
					    (uint64_t)jobs, 0, na, np, &part);
				if (write(pipes[j][1], &part, sizeof(part)) !=
				    (ssize_t)sizeof(part))
					_exit(2);
				_exit(0);
			}
			close(pipes[j][1]);
		}
		for (j = 0; j < jobs; j++) {
			if (read(pipes[j][0], &part, sizeof(part)) !=
			    (ssize_t)sizeof(part)) {
				fprintf(stderr, "zkelect-sim-parts: job %d died\n",
				    j);
				return 2;
			}
			close(pipes[j][0]);
			waitpid(pids[j], NULL, 0);
			if (part.failures > 0 && (tot.failures == 0 ||
			    part.first_failure < tot.first_failure))
				tot.first_failure = part.first_failure;
			tot.seeds += part.seeds;
			tot.failures += part.failures;
			tot.steps += part.steps;
			tot.terms += part.terms;
			tot.faults += part.faults;
			tot.moved += part.moved;
			tot.failovers += part.failovers;
			tot.depositions += part.depositions;
			tot.relays_lost += part.relays_lost;
			tot.shrinks += part.shrinks;
			tot.master_stops += part.master_stops;
			tot.obs_syncs += part.obs_syncs;
			tot.obs_syncs_back += part.obs_syncs_back;
			tot.dep_under += part.dep_under;
			tot.drains += part.drains;
			tot.resigns += part.resigns;
			tot.losses_in_step += part.losses_in_step;
			tot.earlier += part.earlier;
			tot.sim_s += part.sim_s;
			if (part.max_settle_t > tot.max_settle_t) {
				tot.max_settle_t = part.max_settle_t;
				tot.settle_seed = part.settle_seed;
			}
			if (part.max_leave_t > tot.max_leave_t) {
				tot.max_leave_t = part.max_leave_t;
				tot.leave_seed = part.leave_seed;
			}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	el = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%" PRIu64 " seeds from %" PRIu64 " (%d agents, %d partitions) "
	    "in %.2f s with %d job%s: %" PRIu64 " failed", tot.seeds, first, na,
	    np, el, jobs, jobs == 1 ? "" : "s", tot.failures);
	if (tot.failures > 0)
		printf(", first failing seed %" PRIu64, tot.first_failure);
	printf("\n%.1f simulated hours; %" PRIu64 " terms, %" PRIu64 " steps, %"
	    PRIu64 " faults", tot.sim_s / 3600, tot.terms, tot.steps,
	    tot.faults);
	if (opt_failover)
		printf(", %" PRIu64 " ZooKeeper leader failovers",
		    tot.failovers);
	if (opt_controls)
		printf(", %" PRIu64 " drains and undrains, %" PRIu64
		    " partitions resigned", tot.drains, tot.resigns);
	if (opt_shapes & (SH_DEPOSED | SH_SHRINK))
		printf(", %" PRIu64 " ZooKeeper leaders deposed (%" PRIu64
		    " with a partition's leader on its side)",
		    tot.depositions, tot.dep_under);
	if (opt_shapes & SH_RELAY)
		printf(", %" PRIu64 " ObserverMaster stops (%" PRIu64
		    " relays lost), %" PRIu64 " syncs through an "
		    "ObserverMaster (%" PRIu64 " came back)", tot.master_stops,
		    tot.relays_lost, tot.obs_syncs, tot.obs_syncs_back);
	if (opt_shapes & SH_SHRINK)
		printf(", %" PRIu64 " timeouts shrunk on a reconnect",
		    tot.shrinks);
	printf("\n");
	printf("slowest settle after the last fault: %.2f T (seed %" PRIu64
	    "); slowest after a graceful leave: %.2f T (seed %" PRIu64 "); "
	    "%" PRIu64 " partitions moved by leaves\n", tot.max_settle_t,
	    tot.settle_seed, tot.max_leave_t, tot.leave_seed, tot.moved);
	if (opt_loss_in_step) {
		printf("connections lost as a renewal was asked for: %" PRIu64
		    "; renewals answered after the reconnect with a later one "
		    "out (credited to their own send): %" PRIu64 "\n",
		    tot.losses_in_step, tot.earlier);
		if (tot.earlier == 0) {
			printf("no renewal was answered that way: the run "
			    "did not stage what it was asked to\n");
			return 1;
		}
	}
	if (expect_failure) {
		printf("%s\n", tot.failures > 0 ? "failed, as expected" :
		    "no seed failed; a failure was expected");
		return tot.failures > 0 ? 0 : 1;
	}
	return tot.failures > 0 ? 1 : 0;
}
