/* SPDX-License-Identifier: MIT */
/*
 * zkelect-sim: runs the real election state machine of several agents
 * against a model of a ZooKeeper ensemble, under seeded faults, and checks
 * at every step that no two agents would answer is_leader at once. This
 * file holds the clock, the event queue, the PRNG, the links between
 * processes, the per-seed set-up and the command line.
 */
#include <sys/time.h>
#include <sys/wait.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim.h"

struct qent {
	stime		 t;
	uint64_t	 seq;
	sim_fn		 fn;
	void		*p;
	uint64_t	 a;
	bool		 owns_msg;
};

struct sim *S;

/* --- PRNG: splitmix64, one stream per seed --- */

uint64_t
sim_rand(void)
{
	uint64_t z = (S->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t
sim_below(uint64_t n)
{
	return n == 0 ? 0 : sim_rand() % n;
}

uint64_t
sim_range(uint64_t lo, uint64_t hi)
{
	return hi <= lo ? lo : lo + sim_below(hi - lo + 1);
}

bool
sim_chance(unsigned percent)
{
	return sim_below(100) < percent;
}

/* --- The event queue: a binary heap on (time, sequence) --- */

static bool
qent_less(const struct qent *x, const struct qent *y)
{
	return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static void
sim_push(stime t, sim_fn fn, void *p, uint64_t a, bool owns_msg)
{
	struct qent e, tmp;
	int i, parent;

	if (t < S->now)
		t = S->now;
	if (S->nheap == S->capheap) {
		S->capheap = S->capheap == 0 ? 1024 : S->capheap * 2;
		S->heap = realloc(S->heap, (size_t)S->capheap * sizeof(*S->heap));
		if (S->heap == NULL)
			abort();
	}
	e.t = t;
	e.seq = S->qseq++;
	e.fn = fn;
	e.p = p;
	e.a = a;
	e.owns_msg = owns_msg;
	i = S->nheap++;
	S->heap[i] = e;
	while (i > 0) {
		parent = (i - 1) / 2;
		if (!qent_less(&S->heap[i], &S->heap[parent]))
			break;
		tmp = S->heap[i];
		S->heap[i] = S->heap[parent];
		S->heap[parent] = tmp;
		i = parent;
	}
}

static bool
sim_pop(struct qent *out)
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
		if (l < S->nheap && qent_less(&S->heap[l], &S->heap[m]))
			m = l;
		if (r < S->nheap && qent_less(&S->heap[r], &S->heap[m]))
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

void
sim_at(stime t, sim_fn fn, void *p, uint64_t a)
{
	sim_push(t, fn, p, a, false);
}

void
sim_at_msg(stime t, sim_fn fn, struct msg *m)
{
	sim_push(t, fn, m, 0, true);
}

void
sim_trace(const char *fmt, ...)
{
	va_list ap;

	if (!S->verbose)
		return;
	printf("%4" PRIu64 ".%06" PRIu64 " ", S->now / 1000000,
	    S->now % 1000000);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

void
sim_fail(const char *fmt, ...)
{
	va_list ap;

	if (S->failed)
		return;
	S->failed = true;
	S->fail_at = S->now;
	va_start(ap, fmt);
	vsnprintf(S->failure, sizeof(S->failure), fmt, ap);
	va_end(ap);
	sim_trace("FAIL: %s", S->failure);
}

/* --- Messages and links --- */

struct msg *
msg_new(enum msg_type type)
{
	struct msg *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort();
	m->type = type;
	return m;
}

void
msg_free(struct msg *m)
{
	int i;

	if (m == NULL)
		return;
	for (i = 0; i < m->rep.nchildren; i++)
		free(m->rep.children[i]);
	free(m->rep.children);
	free(m->sessions);
	free(m);
}

/* Loopback-like: tens to hundreds of microseconds, now and then a few ms. */
stime
net_delay(void)
{
	stime d = sim_range(30, 250);

	if (sim_chance(2))
		d += sim_below(3000);
	return d;
}

void
chan_init(struct chan *c, enum chan_kind kind, struct conn *conn, int server)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->conn = conn;
	c->server = server;
	c->held_tail = &c->held;
}

/*
 * A link is blocked while a partition cuts it or its receiver does not run
 * (a stopped server, a paused agent): TCP keeps what was sent, in order,
 * and delivers it once the link works again.
 */
static bool
chan_blocked(const struct chan *c)
{
	switch (c->kind) {
	case CH_C2S:
		return S->part_as[c->conn->agent][c->conn->server] ||
		    S->servers[c->conn->server].stopped;
	case CH_S2C:
		return S->part_as[c->conn->agent][c->conn->server] ||
		    S->agents[c->conn->agent].paused;
	case CH_L2F:
		return S->servers[c->server].part_leader ||
		    S->servers[c->server].stopped ||
		    S->servers[S->leader].part_leader;
	case CH_F2L:
		return S->servers[c->server].part_leader ||
		    S->servers[S->leader].part_leader;
	case CH_O2M:
		return S->servers[S->servers[c->server].master].stopped;
	case CH_M2O:
		return S->servers[c->server].stopped;
	}
	return false;
}

static void
chan_deliver(struct msg *m)
{
	struct chan *c = m->chan;

	switch (c->kind) {
	case CH_C2S:
		zk_server_recv(c->conn, m);
		break;
	case CH_S2C:
		client_recv(c->conn, m);
		break;
	case CH_L2F:
		zk_follower_recv(c->server, m);
		break;
	case CH_F2L:
		zk_leader_recv(c->server, m);
		break;
	case CH_O2M:
		zk_master_recv(c->server, m);
		break;
	case CH_M2O:
		zk_observer_recv(c->server, m);
		break;
	}
}

void
chan_send(struct chan *c, struct msg *m)
{
	stime at = S->now + net_delay();

	if (at < c->last_at)
		at = c->last_at;
	c->last_at = at;
	m->chan = c;
	sim_at_msg(at, chan_arrive_cb, m);
}

void
chan_arrive_cb(void *p, uint64_t a)
{
	struct msg *m = p;
	struct chan *c = m->chan;

	if (c->held != NULL || chan_blocked(c)) {
		/* A connect cut off by a partition: no TCP handshake, so
		 * nothing of it arrives once the client has given up. */
		if (m->type == M_CONNECT &&
		    S->part_as[c->conn->agent][c->conn->server])
			c->conn->syn_lost = true;
		m->next = NULL;
		*c->held_tail = m;
		c->held_tail = &m->next;
		return;
	}
	chan_deliver(m);
}

/* Retransmitted after a partition: one by one, in order; whatever
 * arrives meanwhile queues behind. */
static void
chan_drain_cb(void *p, uint64_t a)
{
	struct chan *c = p;
	struct msg *m;

	c->draining = false;
	if (c->held == NULL || chan_blocked(c))
		return;
	m = c->held;
	c->held = m->next;
	if (c->held == NULL)
		c->held_tail = &c->held;
	m->next = NULL;
	chan_deliver(m);
	if (c->held != NULL && !c->draining) {
		c->draining = true;
		sim_at(S->now + sim_range(5, 50), chan_drain_cb, c, 0);
	}
}

/* The block is over: what was held arrives, at once (it sat in the
 * receiver's buffers) or after a fresh delay (retransmitted). */
void
chan_release(struct chan *c, bool at_once)
{
	struct msg *m;

	if (!at_once) {
		if (c->held != NULL && !c->draining) {
			c->draining = true;
			sim_at(S->now + net_delay(), chan_drain_cb, c, 0);
		}
		return;
	}
	while ((m = c->held) != NULL && !chan_blocked(c)) {
		c->held = m->next;
		if (c->held == NULL)
			c->held_tail = &c->held;
		m->next = NULL;
		chan_deliver(m);
	}
}

void
chan_drop(struct chan *c)
{
	struct msg *m;

	while ((m = c->held) != NULL) {
		c->held = m->next;
		msg_free(m);
	}
	c->held_tail = &c->held;
}

/* --- One seed --- */

static void
sim_configure(void)
{
	static const int Ts[] = { 400, 600, 1000, 2000, 4000, 6000 };
	static const int divs[] = { 3, 4, 5, 6, 8, 10, 15, 20 };
	int i, j, k, n;

	S->nservers = sim_chance(80) ? 3 : 5;
	S->nagents = (int)sim_range(2, 5);
	S->T_ms = Ts[sim_below(sizeof(Ts) / sizeof(Ts[0]))];
	S->tick_ms = S->T_ms / divs[sim_below(sizeof(divs) / sizeof(divs[0]))];
	/* The smallest session ZooKeeper's defaults accept: T = 2 ticks. */
	if (S->shapes & SHAPE_TICK_HALF)
		S->tick_ms = S->T_ms / 2;
	if (S->tick_ms < 1)
		S->tick_ms = 1;
	S->T = (stime)S->T_ms * 1000;
	S->tick = (stime)S->tick_ms * 1000;
	S->sync_limit = 5;
	S->nvoters = S->nservers;
	if (S->shapes & SHAPE_RELAY) {
		/* Three voters, and one or two observers, each behind an
		 * ObserverMaster follower (servers 1 and 2 follow at first). */
		S->nvoters = 3;
		S->nservers = 3 + (int)sim_range(1, 2);
		for (i = 3; i < S->nservers; i++) {
			S->servers[i].observer = true;
			S->servers[i].master = (int)sim_range(1, 2);
		}
	}
	for (i = 0; i < S->nservers; i++)
		S->servers[i].max_timeout_ms = 20 * S->tick_ms;
	if (S->shapes & SHAPE_SHRINK) {
		/* Mixed limits: a server or two with a lower maxSessionTimeout
		 * (T/2 or 2T/3, never under minSessionTimeout = 2 ticks). */
		n = (int)sim_range(1, (uint64_t)(S->nservers - 1) / 2 + 1);
		for (j = 0; j < n; j++) {
			k = (int)sim_below((uint64_t)S->nservers);
			S->servers[k].max_timeout_ms = sim_chance(50) ?
			    S->T_ms / 2 : S->T_ms * 2 / 3;
			if (S->servers[k].max_timeout_ms < 2 * S->tick_ms)
				S->servers[k].max_timeout_ms = 2 * S->tick_ms;
		}
	}
	for (i = 0; i < S->nagents; i++) {
		struct agent *a = &S->agents[i];

		a->idx = i;
		snprintf(a->id, sizeof(a->id), "a%d", i);
		a->candidate = i < 2 || !sim_chance(10);
		a->offset_us = (int64_t)sim_below(1000000000ULL);
		a->ppm = (int)sim_range(0, 2 * (uint64_t)S->drift_ppm) -
		    S->drift_ppm;
		a->hook_us = sim_chance(50) ? 0 : sim_range(100, S->T / 4);
		/* A server list: often one server only (the worst case of a
		 * stalled server), else a few in a random order. */
		n = sim_chance(35) ? 1 : (int)sim_range(2, (uint64_t)S->nservers);
		a->nservers = 0;
		while (a->nservers < n) {
			k = (int)sim_below((uint64_t)S->nservers);
			for (j = 0; j < a->nservers; j++)
				if (a->servers[j] == k)
					break;
			if (j == a->nservers)
				a->servers[a->nservers++] = k;
		}
		if (S->shapes & SHAPE_RELAY) {
			/* Agents 0 and 1 (candidates) can always reach a voting
			 * server; the others have only observers one time in
			 * four (and must then never lead). */
			bool voter = false;

			for (j = 0; j < a->nservers; j++)
				voter |= !S->servers[a->servers[j]].observer;
			if (!voter && (i < 2 || sim_chance(75)))
				a->servers[sim_below((uint64_t)a->nservers)] =
				    (int)sim_below(3);
			else if (voter && i >= 2 && sim_chance(25)) {
				a->nservers = (int)sim_range(1, (uint64_t)
				    S->nservers - 3);
				for (j = 0; j < a->nservers; j++)
					a->servers[j] = 3 + j;
			}
			a->only_observers = true;
			for (j = 0; j < a->nservers; j++)
				if (!S->servers[a->servers[j]].observer)
					a->only_observers = false;
		}
	}
	/* The operator's zookeeper.tick_time: the real tickTime, or not
	 * given (0: the agent assumes tickTime <= T/2). Never less than the
	 * real one: the lease would be too long. */
	S->tick_known = sim_chance(50) || S->understate > 1;
	/* One seed in ten, the probes learn nothing (a server that will not
	 * answer them): the agent counts with tick_time, or T/2. Not drawn
	 * from the PRNG, so that every seed's run stays as it was. */
	S->learn_fails = S->seed % 10 == 7 && S->understate == 1;
}

static void
sim_start_cb(void *p, uint64_t a)
{
	agent_start(&S->agents[a]);
}

static void
sim_free_queue(void)
{
	struct qent e;

	while (sim_pop(&e))
		if (e.owns_msg)
			msg_free(e.p);
	free(S->heap);
	S->heap = NULL;
}

static bool	 opt_completions_first;
static unsigned	 opt_shapes;
static bool	 opt_safety_only;
static int	 opt_understate = 1;
static bool	 opt_no_learn;
static bool	 last_overlap, last_overlap_dep, last_tick_known;

static bool
sim_run_seed(uint64_t seed, int verbose, bool legacy, int drift_ppm,
    int fault_mix, struct sim_stats *st, stime *simulated)
{
	struct qent e;
	bool failed;
	int i;

	S = calloc(1, sizeof(*S));
	if (S == NULL)
		abort();
	S->seed = seed;
	S->rng = seed * 0x2545f4914f6cdd1dULL + 0x1234567;
	S->verbose = verbose;
	S->legacy = legacy;
	S->drift_ppm = drift_ppm;
	S->fault_mix = fault_mix;
	S->shapes = opt_shapes;
	S->safety_only = opt_safety_only;
	S->understate = opt_understate;
	S->no_learn = opt_no_learn;
	S->loss_completions_first = opt_completions_first;
	S->st.min_gap_us = INT64_MAX;
	S->st.min_lapse_gap_us = INT64_MAX;
	S->st.min_lapse_gap_t = 1e9;
	S->st.min_lapse_gap_own = 1e9;
	S->st.min_dep_gap_own = 1e9;
	sim_configure();
	sim_trace("seed %" PRIu64 ": %d servers, %d agents, T %d ms, tick %d ms"
	    " (%s to the agents%s), rates within %d ppm%s", seed, S->nservers,
	    S->nagents, S->T_ms, S->tick_ms, S->tick_known ? (S->understate > 1
	    ? "understated" : "given") : "not given", S->no_learn ||
	    S->learn_fails ? ", not learned" : ", learned", S->drift_ppm,
	    legacy ? ", legacy lease" : "");
	for (i = 0; i < S->nservers && verbose; i++)
		if (S->servers[i].observer ||
		    S->servers[i].max_timeout_ms != 20 * S->tick_ms)
			sim_trace("server s%d: %s (master s%d), "
			    "maxSessionTimeout %d ms", i, S->servers[i].observer ?
			    "observer" : "voting", S->servers[i].master,
			    S->servers[i].max_timeout_ms);
	for (i = 0; i < S->nagents && verbose; i++) {
		const struct agent *a = &S->agents[i];
		char list[64];
		int j, off = 0;

		for (j = 0; j < a->nservers; j++)
			off += snprintf(list + off, sizeof(list) - (size_t)off,
			    "%s%d", j ? "," : "", a->servers[j]);
		sim_trace("agent %s: %s, clock %+d ppm, servers %s, hooks %"
		    PRIu64 " us", a->id, a->candidate ? "candidate" : "observer",
		    a->ppm, list, (uint64_t)a->hook_us);
	}
	zk_init();
	for (i = 0; i < S->nagents; i++)
		sim_at(sim_below(S->T), sim_start_cb, NULL, (uint64_t)i);
	fault_plan();

	while (!S->failed && !S->stop && sim_pop(&e)) {
		S->now = e.t;
		S->st.events++;
		e.fn(e.p, e.a);
	}
	failed = S->failed;
	last_overlap = S->overlap;
	last_overlap_dep = S->overlap_dep;
	last_tick_known = S->tick_known;
	if (failed && !verbose)
		printf("seed %" PRIu64 ": FAIL at %.6f s: %s\n", seed,
		    (double)S->fail_at / 1e6, S->failure);
	if (S->legacy && S->st.margin_fails > 0 && !verbose)
		printf("seed %" PRIu64 ": %" PRIu64 " takeover%s closer than the "
		    "margin (%" PRIu64 " within 6T of a deposition, the old "
		    "leader on it; %" PRIu64 " from a leader under a timeout "
		    "not the one asked for)\n", seed, S->st.margin_fails,
		    S->st.margin_fails == 1 ? "" : "s", S->st.dep_margin_fails,
		    S->st.shrunk_margin_fails);
	*st = S->st;
	*simulated = S->now;

	sim_free_queue();
	for (i = 0; i < S->nagents; i++)
		agent_free(&S->agents[i]);
	client_free_all();
	zk_free();
	free(S);
	S = NULL;
	return failed;
}

/* --- The command line --- */

static void
usage(void)
{
	fprintf(stderr,
	    "usage: zkelect-sim [--seed N] [--seeds COUNT | --minutes M] "
	    "[--jobs J]\n"
	    "                   [--verbose] [--legacy] [--expect-overlap] "
	    "[--drift PPM] [--faults K]\n"
	    "  --seed N       first seed (default 1)\n"
	    "  --seeds COUNT  run seeds N .. N+COUNT-1 (default 1)\n"
	    "  --minutes M    run consecutive seeds for M minutes of wall time\n"
	    "  --jobs J       split the seeds over J processes\n"
	    "  --verbose      print the trace of every step (one seed)\n"
	    "  --legacy       the old lease: renew every T/3, lease s + 2T/3\n"
	    "  --expect-overlap  exit 0 only if some seed has two leaders at once\n"
	    "  --drift PPM    bound on clock-rate differences (default 10000)\n"
	    "  --faults K     only fault kind K (see sim-fault.c), -1 = all\n"
	    "  --completions-first  on connection loss, fail the calls before\n"
	    "                 the CONNECTING event (zookeeper.c does the reverse)\n"
	    "  --shape S[,S]  shapes of deployment (repeatable): shrink, relay,\n"
	    "                 tick-half, deposed, failover, all (README.md)\n"
	    "  --expect-margin-failure  exit 0 only if some takeover came closer\n"
	    "                 than the margin (or two leaders were at once)\n"
	    "  --safety-only  count liveness failures (nobody leads) and go on\n"
	    "  --understate K every agent is told zookeeper.tick_time = tickTime/K\n"
	    "  --no-learn     the agents never learn minSessionTimeout (probe.c's\n"
	    "                 session): they believe tick_time, or assume T/2\n");
	exit(2);
}

/* --shape shrink,relay,... (repeatable); "all" for every one. */
static bool
parse_shapes(const char *arg)
{
	static const struct { const char *name; unsigned bit; } names[] = {
		{ "shrink", SHAPE_SHRINK }, { "relay", SHAPE_RELAY },
		{ "tick-half", SHAPE_TICK_HALF }, { "deposed", SHAPE_DEPOSED },
		{ "failover", SHAPE_FAILOVER },
		{ "all", SHAPE_SHRINK | SHAPE_RELAY | SHAPE_TICK_HALF |
		    SHAPE_DEPOSED | SHAPE_FAILOVER },
	};
	char buf[256], *tok, *save;
	size_t i;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strcmp(tok, names[i].name) == 0)
				break;
		if (i == sizeof(names) / sizeof(names[0])) {
			fprintf(stderr, "zkelect-sim: no shape %s\n", tok);
			return false;
		}
		opt_shapes |= names[i].bit;
	}
	return true;
}

static double
wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct totals {
	uint64_t	 seeds, failures, first_failure, overlaps;
	double		 sim_seconds;
	double		 min_lapse_gap_t, min_lapse_gap_own, min_dep_gap;
	uint64_t	 min_lapse_seed, min_own_seed, min_dep_seed;
	double		 max_recovery_t;
	uint64_t	 max_recovery_seed;
	uint64_t	 terms, steps, expiry_takeovers, flaps, flap_seeds,
			 first_flap_seed;
	uint64_t	 margin_fails, margin_seeds, first_margin_seed;
	uint64_t	 liveness_fails;
	uint64_t	 flaps_tick_known, seeds_tick_known;
	uint64_t	 depositions, depositions_under, dep_margin_fails,
			 dep_overlaps;
	uint64_t	 obs_syncs, obs_syncs_back, obs_master_lost;
};

/* Runs seeds first, first+stride, ... (until count or the deadline). */
static void
run_range(uint64_t first, uint64_t count, uint64_t stride, double deadline,
    int verbose, bool legacy, int drift, int mix, struct totals *tot)
{
	struct sim_stats st;
	stime simulated;
	uint64_t seed, i;

	memset(tot, 0, sizeof(*tot));
	tot->min_lapse_gap_t = 1e9;
	tot->min_lapse_gap_own = 1e9;
	tot->min_dep_gap = 1e9;
	for (i = 0, seed = first; count == 0 || i < count; i++, seed += stride) {
		if (deadline > 0 && wall_now() >= deadline)
			break;
		if (sim_run_seed(seed, verbose, legacy, drift, mix, &st,
		    &simulated)) {
			if (tot->failures++ == 0)
				tot->first_failure = seed;
			if (last_overlap)
				tot->overlaps++;
		}
		tot->seeds++;
		tot->sim_seconds += (double)simulated / 1e6;
		tot->terms += st.terms;
		tot->steps += st.steps;
		tot->expiry_takeovers += st.expiry_takeovers;
		tot->depositions += st.depositions;
		tot->liveness_fails += st.liveness_fails;
		if (last_tick_known) {
			tot->seeds_tick_known++;
			tot->flaps_tick_known += st.flaps;
		}
		tot->depositions_under += st.depositions_under;
		tot->dep_margin_fails += st.dep_margin_fails;
		tot->obs_syncs += st.obs_syncs;
		tot->obs_syncs_back += st.obs_syncs_back;
		tot->obs_master_lost += st.obs_master_lost;
		if (last_overlap && last_overlap_dep)
			tot->dep_overlaps++;
		if (st.margin_fails > 0 && tot->margin_seeds++ == 0)
			tot->first_margin_seed = seed;
		tot->margin_fails += st.margin_fails;
		if (st.flaps > 0 && tot->flap_seeds++ == 0)
			tot->first_flap_seed = seed;
		tot->flaps += st.flaps;
		if (st.min_dep_gap_own < tot->min_dep_gap) {
			tot->min_dep_gap = st.min_dep_gap_own;
			tot->min_dep_seed = seed;
		}
		if (st.min_lapse_gap_own < tot->min_lapse_gap_own) {
			tot->min_lapse_gap_own = st.min_lapse_gap_own;
			tot->min_own_seed = seed;
		}
		if (st.min_lapse_gap_t < tot->min_lapse_gap_t) {
			tot->min_lapse_gap_t = st.min_lapse_gap_t;
			tot->min_lapse_seed = seed;
		}
		if (st.max_recovery_t > tot->max_recovery_t) {
			tot->max_recovery_t = st.max_recovery_t;
			tot->max_recovery_seed = seed;
		}
		fflush(stdout);
	}
}

static void
totals_add(struct totals *t, const struct totals *u)
{
	if (u->failures > 0 && (t->failures == 0 ||
	    u->first_failure < t->first_failure))
		t->first_failure = u->first_failure;
	t->seeds += u->seeds;
	t->failures += u->failures;
	t->overlaps += u->overlaps;
	t->sim_seconds += u->sim_seconds;
	t->terms += u->terms;
	t->steps += u->steps;
	t->expiry_takeovers += u->expiry_takeovers;
	t->depositions += u->depositions;
	t->liveness_fails += u->liveness_fails;
	t->seeds_tick_known += u->seeds_tick_known;
	t->flaps_tick_known += u->flaps_tick_known;
	t->depositions_under += u->depositions_under;
	t->dep_margin_fails += u->dep_margin_fails;
	t->obs_syncs += u->obs_syncs;
	t->obs_syncs_back += u->obs_syncs_back;
	t->obs_master_lost += u->obs_master_lost;
	t->dep_overlaps += u->dep_overlaps;
	if (u->margin_seeds > 0 && (t->margin_seeds == 0 ||
	    u->first_margin_seed < t->first_margin_seed))
		t->first_margin_seed = u->first_margin_seed;
	t->margin_fails += u->margin_fails;
	t->margin_seeds += u->margin_seeds;
	if (u->flap_seeds > 0 && (t->flap_seeds == 0 ||
	    u->first_flap_seed < t->first_flap_seed))
		t->first_flap_seed = u->first_flap_seed;
	t->flaps += u->flaps;
	t->flap_seeds += u->flap_seeds;
	if (u->min_dep_gap < t->min_dep_gap) {
		t->min_dep_gap = u->min_dep_gap;
		t->min_dep_seed = u->min_dep_seed;
	}
	if (u->min_lapse_gap_own < t->min_lapse_gap_own) {
		t->min_lapse_gap_own = u->min_lapse_gap_own;
		t->min_own_seed = u->min_own_seed;
	}
	if (u->min_lapse_gap_t < t->min_lapse_gap_t) {
		t->min_lapse_gap_t = u->min_lapse_gap_t;
		t->min_lapse_seed = u->min_lapse_seed;
	}
	if (u->max_recovery_t > t->max_recovery_t) {
		t->max_recovery_t = u->max_recovery_t;
		t->max_recovery_seed = u->max_recovery_seed;
	}
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "seed",	 required_argument, NULL, 's' },
		{ "seeds",	 required_argument, NULL, 'n' },
		{ "minutes",	 required_argument, NULL, 'm' },
		{ "jobs",	 required_argument, NULL, 'j' },
		{ "verbose",	 no_argument,	    NULL, 'v' },
		{ "legacy",	 no_argument,	    NULL, 'l' },
		{ "expect-overlap", no_argument,    NULL, 'x' },
		{ "drift",	 required_argument, NULL, 'd' },
		{ "faults",	 required_argument, NULL, 'f' },
		{ "completions-first", no_argument, NULL, 'c' },
		{ "shape",	 required_argument, NULL, 'S' },
		{ "expect-margin-failure", no_argument, NULL, 'M' },
		{ "safety-only", no_argument,	    NULL, 'L' },
		{ "understate",	 required_argument, NULL, 'U' },
		{ "no-learn",	 no_argument,	    NULL, 'N' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t first = 1, count = 1;
	double minutes = 0, start, elapsed, deadline = 0;
	int ch, jobs = 1, verbose = 0, drift = 10000, mix = -1, j;
	bool legacy = false, expect_overlap = false, expect_margin = false;
	struct totals tot, part;
	int pipes[64][2];
	pid_t pids[64];

	while ((ch = getopt_long(argc, argv, "s:n:m:j:vlxd:f:cS:MLU:N", longopts,
	    NULL)) != -1) {
		switch (ch) {
		case 's': first = strtoull(optarg, NULL, 10); break;
		case 'n': count = strtoull(optarg, NULL, 10); break;
		case 'm': minutes = strtod(optarg, NULL); count = 0; break;
		case 'j': jobs = atoi(optarg); break;
		case 'v': verbose = 1; break;
		case 'l': legacy = true; break;
		case 'x': expect_overlap = true; break;
		case 'd': drift = atoi(optarg); break;
		case 'f': mix = atoi(optarg); break;
		case 'c': opt_completions_first = true; break;
		case 'S': if (!parse_shapes(optarg)) usage(); break;
		case 'M': expect_margin = true; break;
		case 'L': opt_safety_only = true; break;
		case 'U': opt_understate = atoi(optarg); break;
		case 'N': opt_no_learn = true; break;
		default: usage();
		}
	}
	if (optind != argc || jobs < 1 || jobs > 64 || drift < 0 ||
	    opt_understate < 1 ||
	    drift > 300000 || (count == 0 && minutes <= 0))
		usage();
	if (verbose)
		jobs = 1;

	start = wall_now();
	if (minutes > 0)
		deadline = start + minutes * 60;
	if (jobs == 1)
		run_range(first, count, 1, deadline, verbose, legacy, drift, mix,
		    &tot);
	else {
		/* Seed first+j, first+j+jobs, ... in job j; totals come back
		 * through a pipe. */
		memset(&tot, 0, sizeof(tot));
		tot.min_lapse_gap_t = 1e9;
		tot.min_lapse_gap_own = 1e9;
		tot.min_dep_gap = 1e9;
		for (j = 0; j < jobs; j++) {
			if (pipe(pipes[j]) == -1 || (pids[j] = fork()) == -1) {
				perror("zkelect-sim");
				return 2;
			}
			if (pids[j] == 0) {
				uint64_t n = count == 0 ? 0 :
				    (count + (uint64_t)(jobs - j - 1)) / (uint64_t)jobs;
				close(pipes[j][0]);
				if (count == 0 || n > 0)
					run_range(first + (uint64_t)j, n,
					    (uint64_t)jobs, deadline, 0, legacy,
					    drift, mix, &part);
				else
					memset(&part, 0, sizeof(part));
				if (write(pipes[j][1], &part, sizeof(part)) !=
				    (ssize_t)sizeof(part))
					_exit(2);
				_exit(0);
			}
			close(pipes[j][1]);
		}
		for (j = 0; j < jobs; j++) {
			memset(&part, 0, sizeof(part));
			if (read(pipes[j][0], &part, sizeof(part)) !=
			    (ssize_t)sizeof(part)) {
				fprintf(stderr, "zkelect-sim: job %d died\n", j);
				return 2;
			}
			close(pipes[j][0]);
			waitpid(pids[j], NULL, 0);
			totals_add(&tot, &part);
		}
	}
	elapsed = wall_now() - start;
	if (elapsed <= 0)
		elapsed = 1e-9;

	if (!verbose || tot.seeds > 1) {
		printf("%" PRIu64 " seeds from %" PRIu64 " in %.2f s with %d "
		    "job%s: %" PRIu64 " failed%s", tot.seeds, first, elapsed,
		    jobs, jobs == 1 ? "" : "s", tot.failures,
		    legacy ? " (legacy lease)" : "");
		if (tot.failures > 0)
			printf(", first failing seed %" PRIu64, tot.first_failure);
		printf("\n%.1f seeds/s, %.0f seeds/min, %.1f simulated hours/min;"
		    " %" PRIu64 " terms, %" PRIu64 " steps\n",
		    (double)tot.seeds / elapsed, (double)tot.seeds / elapsed * 60,
		    tot.sim_seconds / 3600 / (elapsed / 60), tot.terms, tot.steps);
		if (tot.min_lapse_gap_t < 1e8)
			printf("takeovers after an expiry: %" PRIu64 ", smallest "
			    "gap %.3f T (seed %" PRIu64 ")\n",
			    tot.expiry_takeovers, tot.min_lapse_gap_t,
			    tot.min_lapse_seed);
		if (tot.min_lapse_gap_own < 1e8)
			printf("smallest gap in the old leader's own T (its "
			    "session's smallest timeout): %.3f T' (seed %" PRIu64
			    ")\n", tot.min_lapse_gap_own, tot.min_own_seed);
		if (tot.min_dep_gap < 1e8)
			printf("smallest gap after an old leader on a deposed "
			    "ZooKeeper leader: %.3f T' (seed %" PRIu64 ")\n",
			    tot.min_dep_gap, tot.min_dep_seed);
		printf("slowest recovery after the last fault: %.2f T (seed %"
		    PRIu64 ")\n", tot.max_recovery_t, tot.max_recovery_seed);
		if (tot.depositions > 0)
			printf("ZooKeeper leaders deposed or failed: %" PRIu64
			    " (%" PRIu64 " with the leading agent on it); within "
			    "6T of one: %" PRIu64 " takeovers closer than the "
			    "margin from an old leader on it, %" PRIu64 " seeds "
			    "with two leaders\n",
			    tot.depositions, tot.depositions_under,
			    tot.dep_margin_fails, tot.dep_overlaps);
		if (tot.obs_syncs > 0)
			printf("syncs through an ObserverMaster: %" PRIu64
			    ", %" PRIu64 " came back (the others lost with the "
			    "link or the connection); observers that gave up "
			    "on their master: %" PRIu64 "\n", tot.obs_syncs,
			    tot.obs_syncs_back, tot.obs_master_lost);
		if (opt_safety_only)
			printf("seeds where nobody led in time (not failed): %"
			    PRIu64 "\n", tot.liveness_fails);
		printf("takeovers closer than the margin: %" PRIu64 " in %"
		    PRIu64 " seeds", tot.margin_fails, tot.margin_seeds);
		if (tot.margin_seeds > 0)
			printf(" (first seed %" PRIu64 ")", tot.first_margin_seed);
		printf("; seeds with two leaders at once: %" PRIu64 "\n",
		    tot.overlaps);
		if (tot.flaps > 0)
			printf("terms lost to a lapse while connected: %" PRIu64
			    " in %" PRIu64 " seeds (first seed %" PRIu64 ")\n",
			    tot.flaps, tot.flap_seeds, tot.first_flap_seed);
		if (tot.flaps > 0)
			printf("  %" PRIu64 " of them in the %" PRIu64 " seeds that "
			    "gave the agents tickTime, %" PRIu64 " in the %" PRIu64
			    " that did not\n", tot.flaps_tick_known,
			    tot.seeds_tick_known, tot.flaps - tot.flaps_tick_known,
			    tot.seeds - tot.seeds_tick_known);
	}
	if (expect_margin) {
		printf("%" PRIu64 " seed%s closer than the margin or with two "
		    "leaders at once%s\n", tot.margin_seeds + tot.overlaps,
		    tot.margin_seeds + tot.overlaps == 1 ? "" : "s",
		    tot.margin_seeds + tot.overlaps > 0 ? ", as expected" :
		    "; one was expected");
		return tot.margin_seeds + tot.overlaps > 0 ? 0 : 1;
	}
	if (expect_overlap) {
		printf("%" PRIu64 " seed%s with two leaders at once%s\n",
		    tot.overlaps, tot.overlaps == 1 ? "" : "s",
		    tot.overlaps > 0 ? ", as expected" : "; one was expected");
		return tot.overlaps > 0 ? 0 : 1;
	}
	return tot.failures > 0 ? 1 : 0;
}
