/* SPDX-License-Identifier: MIT */
/* What the window holds back, in two queues (held.h). */
#include <stdlib.h>

#include "held.h"

void
held_init(struct held_queues *hq, int nparts)
{
	int q;

	for (q = 0; q < HELD_NQUEUES; q++) {
		hq->head[q] = NULL;
		hq->tail[q] = &hq->head[q];
	}
	/* + 1: calloc(0) may give NULL */
	if ((hq->nlater = calloc((size_t)nparts + 1, sizeof(*hq->nlater))) ==
	    NULL)
		abort();
}

void
held_free(struct held_queues *hq)
{
	struct held *h;

	while ((h = held_next(hq)) != NULL) {
		free(h->bytes);
		free(h);
	}
	free(hq->nlater);
	hq->nlater = NULL;
}

void
held_push(struct held_queues *hq, int q, struct held *h)
{
	h->next = NULL;
	*hq->tail[q] = h;
	hq->tail[q] = &h->next;
	if (q == HELD_LATER)
		hq->nlater[h->fa.part]++;
}

static struct held *
held_pop(struct held_queues *hq, int q)
{
	struct held *h = hq->head[q];

	if (h == NULL)
		return NULL;
	if ((hq->head[q] = h->next) == NULL)
		hq->tail[q] = &hq->head[q];
	if (q == HELD_LATER)
		hq->nlater[h->fa.part]--;
	return h;
}

struct held *
held_next(struct held_queues *hq)
{
	return held_pop(hq, hq->head[HELD_SOON] != NULL ? HELD_SOON :
	    HELD_LATER);
}

/* What part has in HELD_LATER goes, in order, to HELD_SOON's tail. */
static void
held_promote(struct held_queues *hq, int part)
{
	struct held **pp = &hq->head[HELD_LATER], *h;

	while (hq->nlater[part] > 0 && (h = *pp) != NULL) {
		if (h->fa.part != part) {
			pp = &h->next;
			continue;
		}
		if ((*pp = h->next) == NULL)
			hq->tail[HELD_LATER] = pp;
		hq->nlater[part]--;
		held_push(hq, HELD_SOON, h);
	}
}

bool
held_must_wait(struct held_queues *hq, const struct fleet_action *fa,
    const struct election *e, int out, int window, int *q)
{
	*q = HELD_SOON;
	if (fa->type == FACT_ELECTION && e != NULL) {
		if (fa->a.type == ACT_WATCH_CLAIM && e->parked &&
		    e->phase == PHASE_HOLDING && e->claim_absent)
			*q = HELD_LATER;
		else if (hq->nlater[fa->part] > 0)
			held_promote(hq, fa->part);
	}
	if (hq->head[HELD_SOON] != NULL ||
	    (*q == HELD_LATER && hq->head[HELD_LATER] != NULL))
		return true;
	return out >= window;
}
