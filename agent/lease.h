/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_LEASE_H
#define ZKELECT_LEASE_H

/*
 * The session lease as arithmetic: how long our ZooKeeper session is known
 * to outlive a round trip, for a session timeout T and a bound X on the
 * servers' tickTime. Pure: no clock, no state. doc/design.md, "The lease",
 * derives every figure here.
 */

#include <stdbool.h>
#include <stdint.h>

/* Everything the lease needs to know of one shape of deployment, in ms. */
struct lease_shape {
	bool		 ok;	/* false: T < 2X, no lease can be proven */
	uint64_t	 T;	/* the smallest timeout the session has had */
	uint64_t	 X;	/* tickTime bound: tick_time, or T/2 */
	uint64_t	 M;	/* margin for clock rates and our own delays: T/6 */
	uint64_t	 R;	/* a follower's touch reaches the ZooKeeper
				   leader within R of being taken: 3X/5 */
	uint64_t	 span;	/* a renewal's lease reaches at most s + span */
	uint64_t	 renew;	/* the next renewal, after the last answer */
	uint64_t	 kick;	/* a renewal unanswered this long is stalled */
	uint64_t	 start;	/* a term starts only with this much lease */
	uint64_t	 slow;	/* round trips this long: no term starts */
	uint64_t	 fast;	/* ... until they are back under this */
};

/* The send times of a connection's requests, and when each was answered. */
#define LEASE_RING	32
struct lease_ring {
	uint64_t	 sent[LEASE_RING];
	uint64_t	 acked[LEASE_RING];	/* 0: not answered (yet) */
	int		 n;
};

/* A request sent at s (the oldest falls out of a full ring). */
void	lease_ring_sent(struct lease_ring *r, uint64_t s);
/* The request sent at s was answered at now; false if it is not in the
 * ring (sent on another connection) or was answered already. */
bool	lease_ring_acked(struct lease_ring *r, uint64_t s, uint64_t now);
/* The latest send of the ring answered at least R before s, or 0. */
uint64_t lease_anchor(const struct lease_shape *ls, const struct lease_ring *r,
	    uint64_t s);

/* Fills ls for timeout T and tickTime bound tick (0 = unknown: T/2). */
void	lease_shape(struct lease_shape *ls, uint64_t T, uint64_t tick);

/*
 * The lease a round trip sent at s earns: the session outlives it by M.
 * sent/acked: this connection's requests, oldest first, with when each was
 * answered (0 = not yet); born: when the handle that created the session
 * was opened (0 = not known). Returns 0 if it earns none.
 */
uint64_t lease_until(const struct lease_shape *ls, const uint64_t *sent,
	    const uint64_t *acked, int n, uint64_t born, uint64_t s);

/*
 * A reconnect within the session negotiated T_new < the T the lease was
 * earned under: the revalidation touched the session with T_new no sooner
 * than last_answer_sent (every request answered so far was sent before the
 * connection that carried it ended). The lease may reach no later than this.
 */
uint64_t lease_after_shrink(uint64_t last_answer_sent, uint64_t T_new,
	    uint64_t tick);

#endif
