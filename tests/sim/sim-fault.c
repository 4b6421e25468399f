/* SPDX-License-Identifier: MIT */
/*
 * Seeded faults. A plan of faults at random times over a window of 40 T;
 * each picks its target when it fires (often the leading agent). Some are
 * armed and fire on a later event: a server stopped right after relaying a
 * renewal to the leading agent (the worst case of
 * doc/design.md, "The lease"), a reply lost after the server
 * applied the request. The three scenarios of issue 14 are in the mix.
 * The ensemble keeps a quorum: at most (n-1)/2 voting followers are
 * impaired at a time; the ZooKeeper leader is never stopped, but with
 * --shape deposed it is cut off from the quorum (or fails) and replaced,
 * and with --shape failover its process exits or its host stops (fault
 * 17) and a new leader takes over.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

enum fault_kind {
	F_PAUSE, F_PART_AGENT, F_PART_FOLLOWER, F_STOP_FOLLOWER, F_WORST,
	F_LOSE_REPLY, F_DROP_CONN, F_LAG, F_RESIGN, F_STOP, F_CRASH,
	F_ISOLATE, F_RESIGN_UNRESOLVED, F_STOP_RECONNECT, F_LAGGING_CREATE,
	F_WORST_DELAYED, F_DEPOSE, F_LEADER_FAIL, F_KINDS,
};

static const char *const fault_names[] = {
	"pause", "partition agent", "partition follower", "stop follower",
	"worst case", "lose reply", "drop connection", "lag", "resign", "stop",
	"crash", "isolate", "resign with create unresolved",
	"stop then reconnect", "lost create through a lagging server",
	"worst case after a short cut", "the ZooKeeper leader deposed",
	"the ZooKeeper leader fails",
};

/* How often each kind is drawn, out of the sum. */
static const unsigned fault_weights[F_KINDS] = {
	10, 8, 6, 6, 12, 8, 6, 5, 8, 5, 4, 4, 4, 4, 4, 6,
	0,	/* F_DEPOSE: 10 with --shape deposed */
	0,	/* F_LEADER_FAIL: 10 with --shape failover */
};

static unsigned
fault_weight(unsigned k)
{
	if (k == F_DEPOSE && (S->shapes & SHAPE_DEPOSED))
		return 10;
	/* Mixed limits: a new leader restores the creation timeout. */
	if (k == F_DEPOSE && (S->shapes & SHAPE_SHRINK))
		return 5;
	if (k == F_LEADER_FAIL && (S->shapes & SHAPE_FAILOVER))
		return 10;
	return fault_weights[k];
}

struct lose_arm {
	stime		 until;
	enum kind	 kind;		/* K_NONE: any request */
	uint64_t	 resign_hold_ms;	/* then resign, if not 0 */
	bool		 resign;
};

static struct {
	stime		 worst_until, worst_for;
	bool		 worst_cut;	/* cut it off rather than stop it */
	int		 worst_skip;	/* renewals to let through first */
	struct lose_arm	 lose[SIM_AGENTS_MAX];
	stime		 busy_until[SIM_SERVERS_MAX];
} F;

/* At a heal time: does somebody lead already? */
static void
fault_heal_probe_cb(void *p, uint64_t t)
{
	if (t == S->last_heal)
		check_note_leaders();
}

void
fault_heal_at(stime t)
{
	if (t >= S->last_heal) {
		S->last_heal = t;
		sim_at(t, fault_heal_probe_cb, NULL, t);
	}
}

/* A duration: short, about a session, or longer than one. */
static stime
fault_duration(void)
{
	unsigned r = (unsigned)sim_below(100);

	if (r < 40)
		return sim_range(1000, S->T / 3);
	if (r < 70)
		return sim_range(S->T / 3, S->T);
	return sim_range(S->T, 3 * S->T);
}

static struct agent *
fault_pick_agent(bool leader_first)
{
	struct agent *a;
	int i, n = 0, pick[SIM_AGENTS_MAX];

	if (leader_first && sim_chance(60))
		for (i = 0; i < S->nagents; i++) {
			a = &S->agents[i];
			if (a->running && a->e->role == ELECTION_LEADER)
				return a;
		}
	for (i = 0; i < S->nagents; i++)
		if (S->agents[i].running)
			pick[n++] = i;
	return n == 0 ? NULL : &S->agents[pick[sim_below((uint64_t)n)]];
}

static struct agent *
fault_pick_candidate(bool leader_first)
{
	struct agent *a = fault_pick_agent(leader_first);

	return a != NULL && a->candidate && !a->stopping && !a->paused ? a :
	    NULL;
}

static bool
fault_impaired(int i)
{
	return F.busy_until[i] > S->now || S->servers[i].stopped ||
	    S->servers[i].part_leader || !S->servers[i].serving ||
	    S->servers[i].deposed;
}

/* Voting followers impaired now (observers do not count for the quorum). */
static int
fault_busy_voters(int except)
{
	int i, busy = 0;

	for (i = 0; i < S->nservers; i++)
		if (i != zk_leader() && i != except &&
		    !S->servers[i].observer && fault_impaired(i))
			busy++;
	return busy;
}

/* A follower that may be impaired until `until` without losing quorum. */
static int
fault_pick_follower(stime until)
{
	int i, n = 0, pick[SIM_SERVERS_MAX];

	if (zk_leaderless())
		return -1;
	for (i = 0; i < S->nservers; i++)
		if (i != zk_leader() && !fault_impaired(i))
			pick[n++] = i;
	if (n == 0 || fault_busy_voters(-1) >= (S->nvoters - 1) / 2)
		return -1;
	i = pick[sim_below((uint64_t)n)];
	/* It rejoins up to half a second after the fault ends. */
	F.busy_until[i] = until + 600000;
	return i;
}

static bool
fault_follower_free(int s, stime until)
{
	if (s == zk_leader() || zk_leaderless() || S->servers[s].deposed ||
	    fault_busy_voters(s) >= (S->nvoters - 1) / 2 ||
	    F.busy_until[s] > S->now || S->servers[s].stopped ||
	    S->servers[s].part_leader)
		return false;
	F.busy_until[s] = until + 600000;
	return true;
}

static void
fault_unpart_cb(void *p, uint64_t arg)
{
	int a = (int)(arg >> 8), s = (int)(arg & 0xff);
	struct conn *c;

	S->part_as[a][s] = false;
	sim_trace("a%d and s%d are in touch again", a, s);
	for (c = S->conns; c != NULL; c = c->all_next)
		if (c->agent == a && c->server == s) {
			chan_release(&c->c2s, false);
			chan_release(&c->s2c, false);
		}
}

static void
fault_partition(int a, int s, stime d)
{
	if (S->part_as[a][s])
		return;
	S->part_as[a][s] = true;
	sim_trace("a%d CUT OFF from s%d for %" PRIu64 " ms", a, s, d / 1000);
	sim_at(S->now + d, fault_unpart_cb, NULL, ((uint64_t)a << 8) |
	    (uint64_t)s);
	fault_heal_at(S->now + d);
}

static void
fault_unlag_cb(void *p, uint64_t s)
{
	S->servers[s].lag = 0;
	sim_trace("zk s%d: lag over", (int)s);
}

static void
fault_lag(int s, stime lag, stime d)
{
	S->servers[s].lag = lag;
	sim_trace("zk s%d: LAGS %" PRIu64 " ms behind for %" PRIu64 " ms", s,
	    lag / 1000, d / 1000);
	sim_at(S->now + d, fault_unlag_cb, NULL, (uint64_t)s);
	fault_heal_at(S->now + d);
}

static void
fault_drop_conn(struct agent *a)
{
	struct conn *c = a->h != NULL ? a->h->conn : NULL;

	if (c == NULL || c->server_closed)
		return;
	sim_trace("%s: its connection to s%d is RESET", a->id, c->server);
	zk_server_close_conn(c, true);
}

static bool
fault_others_lead(const struct agent *a)
{
	int i;

	for (i = 0; i < S->nagents; i++)
		if (&S->agents[i] != a && S->agents[i].running &&
		    S->agents[i].candidate && !S->agents[i].stopping &&
		    S->agents[i].e->phase != PHASE_HOLDING)
			return true;
	return false;
}

/* A resign heals at once if another candidate can lead meanwhile; else
 * the hold is part of the fault. */
void
fault_note_resign(struct agent *a, uint64_t hold_ms)
{
	if (!fault_others_lead(a))
		fault_heal_at(S->now + hold_ms * 1000 + 1000);
	else
		fault_heal_at(S->now);
}

static void
fault_stop_drop_cb(void *p, uint64_t incarnation)
{
	struct agent *a = p;

	if (a->incarnation == incarnation && a->running)
		fault_drop_conn(a);
}

static void
fault_lagging_create_cb(void *p, uint64_t incarnation)
{
	struct agent *a = p;
	stime d = 2 * S->T;
	int s;

	if (a->incarnation != incarnation || !a->running || a->h == NULL)
		return;
	/* The server its client tries next lags: it has not applied the
	 * create when the client gets there. */
	s = client_peek_next(a->h);
	if (s > 0 && fault_follower_free(s, S->now + d))
		fault_lag(s, sim_range(S->T / 2, 2 * S->T), d);
	F.lose[a->idx].until = S->now + 2 * S->T;
	F.lose[a->idx].kind = K_CREATE;
	F.lose[a->idx].resign = false;
	fault_heal_at(S->now + 2 * S->T);
}

static void
fault_fire_cb(void *p, uint64_t kind)
{
	struct agent *a;
	stime d;
	int s, i;

	S->st.faults++;
	sim_trace("FAULT: %s", fault_names[kind]);
	switch ((enum fault_kind)kind) {
	case F_PAUSE:
		if ((a = fault_pick_agent(true)) == NULL)
			break;
		d = fault_duration();
		agent_pause(a, d);
		fault_heal_at(S->now + d);
		break;
	case F_PART_AGENT:
		if ((a = fault_pick_agent(true)) == NULL)
			break;
		s = a->h != NULL && a->h->conn != NULL && sim_chance(70) ?
		    a->h->conn->server : a->servers[sim_below(
		    (uint64_t)a->nservers)];
		fault_partition(a->idx, s, fault_duration());
		break;
	case F_PART_FOLLOWER:
		d = sim_range(S->tick, 4 * S->T);
		if ((s = fault_pick_follower(S->now + d)) < 0)
			break;
		zk_server_partition(s, d);
		fault_heal_at(S->now + d + 600000);
		break;
	case F_STOP_FOLLOWER:
		d = sim_range(1000, 4 * S->T);
		if ((s = fault_pick_follower(S->now + d)) < 0)
			break;
		zk_server_stop(s, d);
		fault_heal_at(S->now + d + 600000);
		break;
	case F_WORST:
		F.worst_until = S->now + 3 * S->T;
		F.worst_for = sim_range(S->T, 4 * S->T);
		F.worst_cut = sim_chance(30);
		fault_heal_at(F.worst_until);
		break;
	case F_LOSE_REPLY:
		if ((a = fault_pick_agent(true)) == NULL)
			break;
		F.lose[a->idx].until = S->now + 2 * S->T;
		F.lose[a->idx].resign = false;
		if (sim_chance(50))
			F.lose[a->idx].kind = K_NONE;
		else {
			static const enum kind kinds[] = {
				K_CREATE, K_CLAIM, K_RELEASE, K_RENEW, K_LIST,
				K_CLAIM_DATA,
			};
			F.lose[a->idx].kind = kinds[sim_below(6)];
		}
		fault_heal_at(S->now + 2 * S->T);
		break;
	case F_DROP_CONN:
		if ((a = fault_pick_agent(true)) != NULL)
			fault_drop_conn(a);
		break;
	case F_LAG:
		d = sim_range(S->T / 2, 4 * S->T);
		if ((s = fault_pick_follower(S->now + d)) >= 0) {
			F.busy_until[s] = 0;	/* it still serves */
			fault_lag(s, sim_range(5000, S->T), d);
		}
		break;
	case F_RESIGN: {
		static const unsigned holds[] = { 0, 3, 20, 50 };

		if ((a = fault_pick_candidate(true)) == NULL)
			break;
		agent_resign(a, (uint64_t)S->T_ms * holds[sim_below(4)] / 10);
		break;
	}
	case F_STOP:
		if ((a = fault_pick_candidate(true)) == NULL)
			break;
		agent_stop(a, sim_range(0, 2 * S->T));
		/* Healed when it restarts (agent_exit says when). */
		fault_heal_at(S->now + 1000);
		break;
	case F_CRASH:
		if ((a = fault_pick_agent(true)) != NULL)
			agent_crash(a, sim_range(0, 3 * S->T));
		break;
	case F_ISOLATE:
		if ((a = fault_pick_agent(true)) == NULL)
			break;
		d = sim_range(S->T, 3 * S->T);
		for (i = 0; i < a->nservers; i++)
			fault_partition(a->idx, a->servers[i], d);
		break;
	case F_RESIGN_UNRESOLVED:
		/* Issue 14 (2): resign while our own create is unresolved.
		 * A resign without hold makes the agent create again; that
		 * create's reply is lost, and it resigns again, with a long
		 * hold, while disconnected. */
		if ((a = fault_pick_candidate(true)) == NULL)
			break;
		F.lose[a->idx].until = S->now + 2 * S->T;
		F.lose[a->idx].kind = K_CREATE;
		F.lose[a->idx].resign = true;
		F.lose[a->idx].resign_hold_ms = sim_range(3, 6) * (uint64_t)S->T_ms;
		agent_resign(a, 0);
		fault_heal_at(S->now + 2 * S->T);
		break;
	case F_STOP_RECONNECT:
		/* Issue 14 (3): stop; the connection drops and comes back
		 * while the app is being told. */
		if ((a = fault_pick_candidate(true)) == NULL)
			break;
		a->next_hook_us = sim_range(S->T / 2, S->T);
		agent_stop(a, sim_range(0, S->T));
		sim_at(S->now + a->next_hook_us / 3, fault_stop_drop_cb, a,
		    a->incarnation);
		fault_heal_at(S->now + 1000);
		break;
	case F_LAGGING_CREATE:
		/* Issue 14 (suspicion 2): a lost create, and a reconnect to a
		 * server that has not applied it yet. */
		if ((a = fault_pick_candidate(false)) == NULL)
			break;
		d = sim_range(S->T / 2, S->T);
		agent_resign(a, d / 1000);
		sim_at(S->now + (d > 2000 ? d - 2000 : 0), fault_lagging_create_cb,
		    a, a->incarnation);
		break;
	case F_WORST_DELAYED:
		/* The leading agent is cut off from its follower for a little
		 * less than T/6 (too short for a kick): a renewal waits in TCP
		 * and arrives just before the next one, which the follower
		 * relays before it stops. */
		for (i = 0, a = NULL; i < S->nagents; i++)
			if (S->agents[i].running &&
			    S->agents[i].e->role == ELECTION_LEADER)
				a = &S->agents[i];
		if (a == NULL || a->h == NULL || a->h->conn == NULL ||
		    (s = a->h->conn->server) == zk_leader() ||
		    S->servers[s].deposed)
			break;
		d = sim_range(S->T / 12, S->T / 6 - S->T / 60);
		fault_partition(a->idx, s, d);
		F.worst_until = S->now + d + S->T;
		F.worst_for = sim_range(S->T, 4 * S->T);
		F.worst_cut = false;
		F.worst_skip = 1;
		fault_heal_at(F.worst_until);
		break;
	case F_DEPOSE: {
		/* The ZooKeeper leader is cut off from the quorum (or, one
		 * time in four, fails) while every voter is well: the others
		 * elect a new leader after syncLimit ticks and an election. */
		stime limit = (stime)S->sync_limit * S->tick;

		if (zk_leaderless() || fault_busy_voters(-1) > 0)
			break;
		d = limit + 3 * S->tick + 600000 + sim_range(0, 2 * S->T);
		for (i = 0; i < S->nservers; i++)
			if (F.busy_until[i] < S->now + d + 600000)
				F.busy_until[i] = S->now + d + 600000;
		zk_depose(d, sim_chance(25));
		fault_heal_at(S->now + d + 600000);
		break;
	}
	case F_LEADER_FAIL: {
		/* The ZooKeeper leader's process exits, or its host stops,
		 * while every voter is well; it is back after d, as a
		 * follower, once a new leader has taken over. */
		stime limit = (stime)S->sync_limit * S->tick;

		if (zk_leaderless() || fault_busy_voters(-1) > 0)
			break;
		d = limit + 3 * S->tick + 600000 + sim_range(0, 2 * S->T);
		for (i = 0; i < S->nservers; i++)
			if (F.busy_until[i] < S->now + d + 600000)
				F.busy_until[i] = S->now + d + 600000;
		zk_leader_fail(d, sim_chance(50));
		fault_heal_at(S->now + d + 600000);
		break;
	}
	case F_KINDS:
		break;
	}
}

bool
fault_lose_reply(struct conn *c, const struct zreq *r)
{
	struct lose_arm *l = &F.lose[c->agent];
	struct handle *h = c->h;

	if (l->until < S->now || !c->client_open || h == NULL || r->xid < 0)
		return false;
	if (l->kind != K_NONE && l->kind != r->kind)
		return false;
	/* A renewal is lost as a whole or not at all: its last reply. */
	if (r->kind == K_RENEW && r->sub != 2)
		return false;
	l->until = 0;
	if (l->resign) {
		h->resign_on_loss = true;
		h->resign_hold_ms = l->resign_hold_ms;
	}
	return true;
}

bool
fault_stop_after_reply(struct conn *c, const struct zreq *r)
{
	const struct agent *a = &S->agents[c->agent];
	stime d = F.worst_for;
	int i, s;

	if (F.worst_until < S->now || c->server == zk_leader() ||
	    S->servers[c->server].deposed || r->kind != K_RENEW ||
	    r->sub != 2 || a->e->role != ELECTION_LEADER ||
	    S->part_as[c->agent][c->server])
		return false;
	if (F.worst_skip > 0) {
		F.worst_skip--;
		return false;
	}
	/* An observer's ObserverMaster (--shape relay), half the time: it
	 * passed the renewal's sync back; the touches the observer reported
	 * to it, or will, do not reach the leader. */
	s = c->server;
	if (S->servers[s].observer && S->servers[s].master != zk_leader() &&
	    sim_chance(50))
		s = S->servers[s].master;
	if (!fault_follower_free(s, S->now + d))
		return false;
	F.worst_until = 0;
	if (s == c->server)
		sim_trace("the worst case: s%d relayed %s's renewal and %s", s,
		    a->id, F.worst_cut ? "is cut off" : "stops");
	else
		sim_trace("the worst case: s%d, the ObserverMaster of s%d, "
		    "passed %s's renewal back and %s", s, c->server, a->id,
		    F.worst_cut ? "is cut off" : "stops");
	fault_heal_at(S->now + d + 600000);
	if (!F.worst_cut) {
		zk_server_stop(s, d);
		return s == c->server;
	}
	zk_server_partition(s, d);
	for (i = 0; i < S->nagents; i++)
		fault_partition(i, s, d);
	return false;
}

void
fault_plan(void)
{
	stime window = 40 * S->T, start = 3 * S->T, t;
	unsigned total = 0, r, n, i, k;

	memset(&F, 0, sizeof(F));
	for (k = 0; k < F_KINDS; k++)
		total += fault_weight(k);
	n = (unsigned)sim_range(5, 25);
	for (i = 0; i < n; i++) {
		t = start + sim_below(window);
		if (S->fault_mix >= 0 && S->fault_mix < F_KINDS)
			k = (unsigned)S->fault_mix;
		else {
			r = (unsigned)sim_below(total);
			for (k = 0; r >= fault_weight(k); k++)
				r -= fault_weight(k);
		}
		sim_at(t, fault_fire_cb, NULL, k);
	}
	S->faults_end = start + window + 4 * S->T + 1000000;
	S->last_heal = start;
	sim_at(S->faults_end, check_liveness_cb, NULL, 0);
}
