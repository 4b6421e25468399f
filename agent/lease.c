/* SPDX-License-Identifier: MIT */
/*
 * The lease arithmetic of doc/design.md, "The lease". Only the ZooKeeper
 * leader expires a session: at (its clock when it processed the last
 * touch) + T, rounded up to a tick. In short:
 *  - a request answered by a follower was touched there before it was
 *    answered, and reached the ZooKeeper leader in the follower's next
 *    report (every tickTime/2, some jitter: R = 3X/5 in all) if the
 *    follower was still alive R later, which an answer to a later request
 *    sent R after shows: so the request q, answered R before a renewal
 *    sent at s, holds the session until q + T;
 *  - a deposed ZooKeeper leader (or a follower still behind it) answers
 *    for up to a tick after its successor took over and reset every
 *    session's clock to T from then: so a renewal answered at all holds the
 *    session until s - X + T, and no later;
 *  - the lease ends M = T/6 before the earlier of the two (clock rates, our
 *    own delays), and never more than 2T/3 after s.
 */
#include <string.h>

#include "lease.h"

static uint64_t
lease_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

void
lease_shape(struct lease_shape *ls, uint64_t T, uint64_t tick)
{
	ls->T = T;
	ls->X = tick != 0 ? tick : T / 2;
	ls->ok = T > 0 && 2 * ls->X <= T;
	ls->M = T / 6;
	ls->R = ls->X * 3 / 5;
	ls->span = ls->ok ? lease_min(T - ls->X - ls->M, T * 2 / 3) : 0;
	/* Renew T/6 after the last renewal was sent (R if longer, so that
	 * an answer can anchor a later renewal), at least twice per span.
	 * The more often, the more lease is left when a disconnect begins,
	 * to ride out a ZooKeeper leader's election, and the more requests
	 * and wakeups: T/6 keeps at least the lease of ZooKeeper's default
	 * tick (T/3: 7T/30 before the next renewal) for every tick up to
	 * T/3 (doc/design.md). */
	ls->renew = lease_min(ls->R > T / 6 ? ls->R : T / 6, ls->span / 2);
	ls->kick = lease_min(T / 6, (ls->span - ls->renew) / 2);
	ls->start = ls->renew + T / 12;
	/*
	 * A leader's renewal unanswered for kick is stalled, and the term
	 * seldom survives the move to another server over the same slow link;
	 * a leader was measured to hold up to round trips of about 0.6 kick.
	 * So a term starts only while round trips stay under half of kick,
	 * and after round trips that did not, only once they are back under
	 * a quarter of it (doc/design.md, "A slow ZooKeeper").
	 */
	ls->slow = ls->kick / 2;
	ls->fast = ls->slow / 2;
}

uint64_t
lease_until(const struct lease_shape *ls, const uint64_t *sent,
    const uint64_t *acked, int n, uint64_t born, uint64_t s)
{
	uint64_t q = born, until;
	int i;

	if (!ls->ok)
		return 0;
	for (i = n - 1; i >= 0; i--)
		if (acked[i] != 0 && acked[i] + ls->R <= s) {
			if (sent[i] > q)
				q = sent[i];
			break;
		}
	if (q == 0 || q + ls->T <= ls->M + s)
		return 0;
	until = lease_min(q + ls->T - ls->M, s + ls->span);
	return until;
}

uint64_t
lease_after_shrink(uint64_t last_answer_sent, uint64_t T_new, uint64_t tick)
{
	struct lease_shape ls;

	lease_shape(&ls, T_new, tick);
	if (!ls.ok || last_answer_sent == 0)
		return 0;
	return last_answer_sent + ls.T - ls.M;
}

void
lease_ring_sent(struct lease_ring *r, uint64_t s)
{
	if (r->n > 0 && r->sent[r->n - 1] == s)
		return;
	if (r->n == LEASE_RING) {
		memmove(&r->sent[0], &r->sent[1], (LEASE_RING - 1) *
		    sizeof(r->sent[0]));
		memmove(&r->acked[0], &r->acked[1], (LEASE_RING - 1) *
		    sizeof(r->acked[0]));
		r->n--;
	}
	r->acked[r->n] = 0;
	r->sent[r->n++] = s;
}

bool
lease_ring_acked(struct lease_ring *r, uint64_t s, uint64_t now)
{
	int i;

	for (i = r->n - 1; i >= 0; i--)
		if (r->sent[i] == s) {
			if (r->acked[i] != 0)
				return false;
			r->acked[i] = now;
			return true;
		}
	return false;
}

uint64_t
lease_anchor(const struct lease_shape *ls, const struct lease_ring *r,
    uint64_t s)
{
	int i;

	for (i = r->n - 1; i >= 0; i--)
		if (r->acked[i] != 0 && r->acked[i] + ls->R <= s)
			return r->sent[i];
	return 0;
}
