/* SPDX-License-Identifier: MIT */
#ifndef HELD_H
#define HELD_H

/*
 * What the window on the connection holds back (zk.c, doc/design.md,
 * "Thousands of partitions"): at most a window's worth of our requests are
 * out at once, and the rest wait here, in two queues. HELD_LATER takes only
 * the claim read of a parked partition we are not queued for
 * (PHASE_HOLDING) whose node was absent at its last look (a second look,
 * T after the first, that only says who leads); the rest
 * goes in HELD_SOON, which is sent first. One partition's requests still go
 * out in the order asked: before one of them goes out or into HELD_SOON,
 * what the partition has in HELD_LATER moves, in order, to HELD_SOON's
 * tail. Pure: no ZooKeeper, no libevent.
 */

#include <stdbool.h>
#include <stdint.h>

#include "election.h"
#include "fleet.h"

enum { HELD_SOON, HELD_LATER, HELD_NQUEUES };

/* An action held back: a copy, with the bytes it points at, the generation
 * and the uuid it was asked under. */
struct held {
	struct held	*next;
	struct fleet_action fa;
	uint64_t	 gen;
	char		 uuid[ELECTION_UUID_LEN + 1];
	char		*bytes;
};

struct held_queues {
	struct held	*head[HELD_NQUEUES], **tail[HELD_NQUEUES];
	int		*nlater;	/* per part: its actions in HELD_LATER */
};

void		 held_init(struct held_queues *, int nparts);
void		 held_free(struct held_queues *);
/* Whether fa (a request; e its partition's election, NULL for none) must
 * wait with `out` of ours out and room for `window`, and in which queue
 * (*q). Moves what fa's partition has in HELD_LATER first if fa goes in
 * HELD_SOON. */
bool		 held_must_wait(struct held_queues *,
		    const struct fleet_action *fa, const struct election *e,
		    int out, int window, int *q);
void		 held_push(struct held_queues *, int q, struct held *);
/* The next to send (HELD_SOON first), taken off its queue; NULL if none. */
struct held	*held_next(struct held_queues *);

#endif
