/* SPDX-License-Identifier: MIT */
/*
 * What must hold, checked exactly:
 * - at every step, no two agents would answer is_leader: true at the same
 *   instant (election_role_at on each agent's own clock; leadership starts
 *   only at a step, so checking right after every step is exact), and a
 *   lease never comes back to life without a new term;
 * - each term's epoch is the mzxid of the write that named that agent (its
 *   claim, or its predecessor's release), written while its node was the
 *   lowest, and epochs strictly increase from term to term;
 * - no term starts during a resign's hold; the node is let go only after
 *   the app has been told (rule 10); no session ever owns two contender
 *   nodes (rule 6);
 * - liveness: once the last fault has healed, some agent leads within the
 *   stated bound, still leads later, and no node is left behind.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "sim.h"

#define BACKOFF_MAX_MS	5000	/* election.c */

static bool
check_leads(const struct agent *a)
{
	return a->running &&
	    election_role_at(a->e, agent_now_ms(a)) == ELECTION_LEADER;
}

/* When the lease of a leader that has not stepped down lapses, in true
 * time. */
static stime
check_lapse_at(const struct agent *a, uint64_t deadline_ms)
{
	return agent_true_at(a, deadline_ms * 1000);
}

/*
 * doc/design.md, Targets, "Safety margin": in the worst alignment, the successor's first
 * is_leader comes at least T/6 after the old leader's last one. The lease
 * (at most 5T/6 after a request the session outlives by T) is measured on
 * a clock that may run slow by the rate bound; allow that, and 5 ms for
 * the network's jitter around the followers' reports.
 */
/* Within 6T of the ZooKeeper leader's deposition (--shape deposed). */
static bool
check_after_depose(void)
{
	return S->last_depose_at != 0 && S->now - S->last_depose_at < 6 * S->T;
}

static int64_t
check_margin(int T_ms)
{
	double rho = (double)S->drift_ppm / 1e6, T = (double)T_ms * 1000;

	return (int64_t)(T / 6 - T * 5 / 6 * rho / (1 - rho)) - 5000;
}

static void
check_term_start(struct agent *a)
{
	const struct election *e = a->e;
	const struct txn *t;
	const struct agent *b, *prev = NULL;
	stime end, prev_end = 0;
	bool lapsed = false;
	int prev_T = S->T_ms;
	int i;

	S->st.terms++;
	sim_trace("%s: LEADS, epoch 0x%" PRIx64 ", lease until %" PRIu64
	    " (now %" PRIu64 ")", a->id, e->epoch, e->lease_deadline, e->now);
	if (a->only_observers)
		sim_fail("%s leads, though it can reach observers only (now on "
		    "s%d)", a->id, a->h != NULL && a->h->conn != NULL ?
		    a->h->conn->server : -1);
	if (e->now < a->hold_until)
		sim_fail("%s leads during its resign hold (until %" PRIu64
		    ", now %" PRIu64 ")", a->id, a->hold_until, e->now);
	/* A term must outlast the next renewal, or it flaps: leader,
	 * unknown, leader again under a new epoch. */
	if (e->lease_deadline - e->now <= (uint64_t)e->timeout_ms /
	    (e->renew_div != 0 ? e->renew_div : 6))
		sim_fail("%s starts a term with %" PRIu64 " ms of lease, less "
		    "than a renewal interval: it lapses before the next renewal",
		    a->id, e->lease_deadline - e->now);
	/* A resign rejoins at the back of the queue: with a new node. */
	if (a->resigned_at != 0 && (t = zk_txn(e->node_czxid)) != NULL &&
	    t->prepped_at < a->resigned_at)
		sim_fail("%s leads with node %s, made before its resign: it "
		    "did not rejoin at the back of the queue", a->id, e->node);
	t = zk_txn((int64_t)e->epoch);
	if (t == NULL || t->rc != ZOK || !(t->is_claim || t->is_release)) {
		sim_fail("%s leads under epoch 0x%" PRIx64 ", which is no claim "
		    "or naming write", a->id, e->epoch);
		return;
	}
	if (t->ops[t->nops - 1].datalen != e->claim_datalen ||
	    memcmp(t->ops[t->nops - 1].data, e->claim_data,
	    (size_t)e->claim_datalen) != 0)
		sim_fail("%s leads under epoch 0x%" PRIx64 ", a write of "
		    "another's data", a->id, e->epoch);
	if (strcmp(t->named_node, e->node) != 0)
		sim_fail("%s leads with node %s under epoch 0x%" PRIx64
		    ", which named %s", a->id, e->node, e->epoch, t->named_node);
	if (t->is_claim && t->session != a->h->session_id)
		sim_fail("%s leads under a claim of another session", a->id);
	if (!t->lowest)
		sim_fail("%s leads under epoch 0x%" PRIx64 ", written while %s "
		    "was not the lowest node", a->id, e->epoch, t->named_node);
	if (e->epoch <= S->max_epoch)
		sim_fail("%s leads under epoch 0x%" PRIx64 ", not above the "
		    "last one 0x%" PRIx64, a->id, e->epoch, S->max_epoch);
	S->max_epoch = e->epoch;
	a->lead_start = S->now;

	/* The gap since the previous leader's last is_leader: true. */
	for (i = 0; i < S->nagents; i++) {
		b = &S->agents[i];
		if (b == a)
			continue;
		if (b->running && b->e->role == ELECTION_LEADER) {
			end = check_lapse_at(b, b->e->lease_deadline);
			if (end > S->now)
				continue;	/* an overlap: reported below */
			if (end >= prev_end) {
				prev_end = end;
				prev = b;
				lapsed = true;
				prev_T = b->e->timeout_ms;
			}
		} else if (b->lead_end != 0 && b->lead_end >= prev_end) {
			prev_end = b->lead_end;
			prev = b;
			lapsed = b->end_lapsed;	/* ended by its lease */
			prev_T = b->lead_T_ms;
		}
	}
	if (prev != NULL) {
		int64_t gap = (int64_t)(S->now - prev_end);

		if (gap < S->st.min_gap_us)
			S->st.min_gap_us = gap;
		/* The margin that matters: the old lease lapsed, and the
		 * successor could only claim once the ZooKeeper leader had
		 * expired the old session. */
		if (lapsed && prev->expired_at >= prev_end) {
			S->st.expiry_takeovers++;
			if (check_after_depose() &&
			    prev->last_server == S->last_deposed &&
			    (double)gap / (prev_T * 1000.0) <
			    S->st.min_dep_gap_own)
				S->st.min_dep_gap_own = (double)gap /
				    (prev_T * 1000.0);
			if ((double)gap / (prev_T * 1000.0) <
			    S->st.min_lapse_gap_own)
				S->st.min_lapse_gap_own = (double)gap /
				    (prev_T * 1000.0);
			if (gap < S->st.min_lapse_gap_us) {
				S->st.min_lapse_gap_us = gap;
				S->st.min_lapse_gap_t = (double)gap /
				    (double)S->T;
			}
			/* The margin is the old lease's own T/6: T is the
			 * smallest timeout its session had (--shape shrink);
			 * the legacy lease is only counted. */
			if (gap < check_margin(prev_T)) {
				S->st.margin_fails++;
				/* ... on the deposed leader, lately */
				if (prev_T != S->T_ms)
					S->st.shrunk_margin_fails++;
				if (check_after_depose() &&
				    prev->last_server == S->last_deposed)
					S->st.dep_margin_fails++;
				if (S->legacy)
					sim_trace("MARGIN: %s leads %.1f ms after "
					    "%s's lease ended", a->id,
					    (double)gap / 1000, prev->id);
				else
					sim_fail("%s leads %.1f ms after %s's lease"
					    " ended and its session expired: the "
					    "margin is %.3f T, not T/6 less the "
					    "clock-rate allowance (%.3f T, T = %d "
					    "ms)", a->id, (double)gap / 1000,
					    prev->id, (double)gap / (double)
					    (prev_T * 1000), (double)check_margin(
					    prev_T) / (double)(prev_T * 1000),
					    prev_T);
			}
		}
		sim_trace("%s: %s %" PRIu64 " us after %s's last is_leader",
		    a->id, "leads", (uint64_t)gap, prev->id);
	}
}

void
check_note_leaders(void)
{
	const struct agent *l[SIM_AGENTS_MAX];
	int i, n = 0;

	for (i = 0; i < S->nagents; i++)
		if (check_leads(&S->agents[i]))
			l[n++] = &S->agents[i];
	if (n > 0 && S->first_lead_after_heal < S->last_heal)
		S->first_lead_after_heal = S->now;
	if (n >= 2 && !S->failed) {
		S->overlap = true;
		S->overlap_dep = check_after_depose();
	}
	if (n >= 2)
		sim_fail("two leaders at once: %s (epoch 0x%" PRIx64 ", lease "
		    "until %" PRIu64 ", its clock %" PRIu64 ") and %s (epoch 0x%"
		    PRIx64 ", lease until %" PRIu64 ", its clock %" PRIu64 ")",
		    l[0]->id, l[0]->e->epoch, l[0]->e->lease_deadline,
		    agent_now_ms(l[0]), l[1]->id, l[1]->e->epoch,
		    l[1]->e->lease_deadline, agent_now_ms(l[1]));
}

void
check_step(struct agent *a, const struct election_glance *before,
    const struct election_actions *out)
{
	const struct election *e = a->e;
	bool telling = a->telling;
	int i;

	check_note_leaders();
	if (e->role == ELECTION_LEADER && before->role != ELECTION_LEADER)
		check_term_start(a);
	else if (e->role == ELECTION_LEADER) {
		if (e->epoch != before->epoch)
			sim_fail("%s: the epoch changed within a term", a->id);
		if (before->lease_deadline <= e->now &&
		    e->lease_deadline > e->now)
			sim_fail("%s: its lease lapsed at %" PRIu64 " and came "
			    "back at %" PRIu64 " without a new term", a->id,
			    before->lease_deadline, e->now);
	} else if (before->role == ELECTION_LEADER) {
		/* The term ended at this step, or earlier when its lease
		 * lapsed. */
		stime lapse = check_lapse_at(a, before->lease_deadline);

		a->end_lapsed = lapse <= S->now;
		a->lead_T_ms = before->timeout_ms;
		a->lead_end = a->end_lapsed ? lapse : S->now;
		/* Lost to a lapse though connected and running: the renewals
		 * did not keep the lease up (an availability wart). */
		if (a->end_lapsed && before->session == SESSION_CONNECTED &&
		    before->riding_since == 0 && !a->paused &&
		    lapse > a->resumed_at + S->T / 3 &&
		    lapse - a->lead_start < S->T) {
			if (S->st.flaps++ == 0)
				sim_trace("%s: FLAP: a term of %" PRIu64 " ms ends "
				    "by a lapse while connected", a->id,
				    (lapse - a->lead_start) / 1000);
		}
	}

	for (i = 0; i < out->n; i++) {
		const struct election_action *x = &out->a[i];

		if (x->type == ACT_NOTIFY && x->wait)
			telling = true;
		/* Every loss of leadership waits for the app (EV_NOTIFIED,
		 * which the driver sends for every waiting notify). */
		if (x->type == ACT_NOTIFY && x->from == ELECTION_LEADER &&
		    !x->wait)
			sim_fail("%s: a loss of leadership (%s) that does not wait "
			    "for the app", a->id,
			    election_reason_name(x->reason));
		/* An exit lets the node go if the session still holds it
		 * (the handle's close ends the session). */
		if (telling && (x->type == ACT_RELEASE || (x->type == ACT_EXIT &&
		    zk_session_holds_node(a->h->session_id))))
			sim_fail("%s lets its node go (%s) before the app was "
			    "told of the loss (rule 10)", a->id,
			    election_action_name(x->type));
	}
}

/* At prepare time of a create by session: rule 6 says a session never
 * owns two contenders (the second would sit behind an orphan). */
void
check_create(const struct txn *t, int64_t session)
{
	int i;

	for (i = 0; i < S->prep.n; i++)
		if (S->prep.child[i].owner == session)
			sim_fail("a%d: session 0x%llx creates a second contender "
			    "node (it owns %s)", t->writer,
			    (unsigned long long)session, S->prep.child[i].name);
}

static void check_final_cb(void *p, uint64_t a);

static stime
check_bound(void)
{
	/*
	 * After the last fault heals: a client may wait 2T/3 to give up a
	 * connection that hung and T/60 before trying again; a node of a
	 * dead session lives up to T plus a tick after its last touch; a
	 * request that failed retries after at most BACKOFF_MAX_MS; a fresh
	 * connection earns a lease once a call of its own was answered R
	 * before, and a term starts with T/3 of lease (under T of renewals).
	 * Rounded up with a tick and some slack.
	 */
	return 3 * S->T + 2 * S->tick + (stime)BACKOFF_MAX_MS * 1000;
}

void
check_liveness_cb(void *p, uint64_t arg)
{
	stime deadline = S->last_heal + check_bound(), took;
	int i;

	/* An agent still stopping, or down until its restart, heals later. */
	for (i = 0; i < S->nagents; i++)
		if (!S->agents[i].running || S->agents[i].stopping) {
			sim_at(S->now + S->T / 10, check_liveness_cb, NULL, 0);
			return;
		}
	if (S->first_lead_after_heal >= S->last_heal) {
		took = S->first_lead_after_heal - S->last_heal;
		if (took > S->st.max_recovery_us) {
			S->st.max_recovery_us = took;
			S->st.max_recovery_t = (double)took / (double)S->T;
		}
		sim_at(S->now + 2 * S->T > deadline ? S->now + 2 * S->T :
		    deadline, check_final_cb, NULL, 0);
		return;
	}
	if (S->now < deadline) {
		sim_at(deadline, check_liveness_cb, NULL, 0);
		return;
	}
	{
		char who[512];
		int off = 0;

		/* Where each agent stands, and on what kind of server. */
		who[0] = '\0';
		for (i = 0; i < S->nagents && off < (int)sizeof(who) - 64; i++) {
			const struct agent *b = &S->agents[i];
			int sv = b->h != NULL && b->h->conn != NULL ?
			    b->h->conn->server : -1;

			off += snprintf(who + off, sizeof(who) - (size_t)off,
			    " %s:%s@s%d%s%s", b->id,
			    election_phase_name(b->e->phase), sv,
			    sv >= 0 && S->servers[sv].observer ? "(observer)" : "",
			    b->only_observers ? "[observers only]" : "");
		}
		if (S->safety_only) {
			S->st.liveness_fails++;
			sim_trace("LIVENESS: nobody leads:%s", who);
			S->stop = true;
			return;
		}
		sim_fail("nobody leads %.3f s after the last fault healed (at "
		    "%.6f s; bound 3T + 2 ticks + %d ms):%s",
		    (double)check_bound() / 1e6, (double)S->last_heal / 1e6,
		    BACKOFF_MAX_MS, who);
	}
}

static void
check_final_cb(void *p, uint64_t arg)
{
	const struct ztree *t = zk_truth();
	const struct agent *a;
	int i, j, n = 0;

	if (S->first_lead_after_heal < S->last_heal) {
		/* A fault healed late (a stop's restart): look again. */
		sim_at(S->now, check_liveness_cb, NULL, 0);
		return;
	}
	for (i = 0; i < S->nagents; i++)
		if (check_leads(&S->agents[i]))
			n++;
	if (n != 1 && S->safety_only) {
		S->st.liveness_fails++;
		S->stop = true;
		return;
	}
	if (n != 1)
		sim_fail("%d leaders at the end of the run", n);
	/* No node left behind: each belongs to a running agent's session
	 * and is that agent's node. */
	for (i = 0; i < t->n; i++) {
		for (j = 0; j < S->nagents; j++) {
			a = &S->agents[j];
			if (a->running && a->h != NULL &&
			    a->h->session_id == t->child[i].owner &&
			    strcmp(a->e->node, t->child[i].name) == 0)
				break;
		}
		if (j == S->nagents)
			sim_fail("node %s (session 0x%llx) is left behind at the "
			    "end", t->child[i].name,
			    (unsigned long long)t->child[i].owner);
	}
	S->stop = true;
}
