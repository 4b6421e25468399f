/* SPDX-License-Identifier: MIT */
/*
 * A sticky assignment with a bound on load (doc/design.md, "Partitions").
 * Member m scores partition p with mix(fnv1a64(m.id "\0" p)). Quotas
 * depend on the member list alone: with K members in join order (member
 * node sequence, then id), q = N/K and r = N mod K, the r oldest may own
 * q + 1 and the others q. Each member keeps the partitions it owns now (the
 * current leaders every agent sees), its highest scored first, up to its
 * quota; every other partition (no owner, an owner that is not a member, or
 * over its owner's quota) goes to a member with room, highest score first.
 *
 * So: each member ends with exactly its quota; an answer fed back as the
 * current owners gives itself; a join (the newest node, quota q') takes
 * only what the others hold over their new quotas, at most ceil(N/(K+1));
 * any member leaving frees only its own partitions, and the others' quotas
 * do not shrink. Tested in tests/unit/test-assign.c.
 */

#include <stdlib.h>
#include <string.h>

#include "assign.h"

struct ranked {
	uint64_t	 score;
	int		 p;
};

struct pair {
	uint64_t	 score;
	int		 p;
	int		 m;		/* the member's rank in join order */
};

/* FNV-1a, 64 bits. */
static uint64_t
fnv1a(uint64_t h, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The splitmix64 finaliser: spreads FNV's weak low-order mixing. */
static uint64_t
mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The rendezvous score of member ID for partition NAME. */
uint64_t
assign_score(const char *id, const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	h = fnv1a(h, id, strlen(id) + 1);	/* with its NUL */
	h = fnv1a(h, name, strlen(name));
	return mix(h);
}

static int
ranked_cmp(const void *va, const void *vb)
{
	const struct ranked *a = va, *b = vb;

	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->p < b->p ? -1 : a->p > b->p;
}

/* Orders members by join: sequence, then id. */
static int
member_cmp(const void *va, const void *vb)
{
	const struct assign_member *a = *(const struct assign_member *const *)va;
	const struct assign_member *b = *(const struct assign_member *const *)vb;

	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return strcmp(a->id, b->id);
}

/* Orders pairs by score, highest first, then partition, then member. */
static int
pair_cmp(const void *va, const void *vb)
{
	const struct pair *a = va, *b = vb;

	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	if (a->p != b->p)
		return a->p < b->p ? -1 : 1;
	return a->m < b->m ? -1 : a->m > b->m;
}

/*
 * Gives each partition to a member: the quota of the member J-th in join
 * order is N/K + 1 for J < N mod K, else N/K. Each member keeps, of the
 * partitions CUR says it owns, its highest scored up to its quota; the
 * rest go, highest score first, to members with room.
 */
int
assign_partitions(const struct assign_member *members, int k,
    const char *const *names, int n, const int *cur, int *owner)
{
	return assign_partitions_among(members, k, names, n, cur, NULL, owner);
}

/* Whether member i may own partition p. */
#define ELIGIBLE(p, i)	(eligible == NULL || eligible[(size_t)(p) * (size_t)k + (size_t)(i)])

/*
 * The same, where member i may own partition p only if ELIGIBLE(p, i)
 * (the members do not all know the same partitions). A partition that no
 * eligible member with room takes goes to its highest scored eligible
 * member beyond its quota: every partition some member knows has an
 * owner. owner[p] is -1 only when no member may own p.
 */
int
assign_partitions_among(const struct assign_member *members, int k,
    const char *const *names, int n, const int *cur, const bool *eligible,
    int *owner)
{
	uint64_t best_score, sc;
	const struct assign_member **order;
	struct ranked *mine;
	struct pair *pairs;
	int *room, *rank, j, p, i, np, o;

	if (k <= 0)
		return -1;
	if (n == 0)
		return 0;
	mine = calloc((size_t)n, sizeof(*mine));
	order = calloc((size_t)k, sizeof(*order));
	room = calloc((size_t)k, sizeof(*room));
	rank = calloc((size_t)k, sizeof(*rank));
	pairs = calloc((size_t)n * (size_t)k, sizeof(*pairs));
	if (mine == NULL || order == NULL || room == NULL || rank == NULL ||
	    pairs == NULL) {
		free(mine);
		free(order);
		free(room);
		free(rank);
		free(pairs);
		return -1;
	}
	for (j = 0; j < k; j++)
		order[j] = &members[j];
	qsort(order, (size_t)k, sizeof(*order), member_cmp);
	for (j = 0; j < k; j++) {
		i = (int)(order[j] - members);
		rank[i] = j;
		room[i] = n / k + (j < n % k ? 1 : 0);
	}

	/* Each member keeps its highest scored current partitions. */
	for (p = 0; p < n; p++)
		owner[p] = -1;
	for (i = 0; i < k && cur != NULL; i++) {
		np = 0;
		for (p = 0; p < n; p++) {
			if (cur[p] != i || !ELIGIBLE(p, i))
				continue;
			mine[np].score = assign_score(members[i].id, names[p]);
			mine[np++].p = p;
		}
		qsort(mine, (size_t)np, sizeof(*mine), ranked_cmp);
		for (j = 0; j < np && room[i] > 0; j++) {
			owner[mine[j].p] = i;
			room[i]--;
		}
	}

	/* The rest, to members with room, highest score first. */
	np = 0;
	for (p = 0; p < n; p++) {
		if (owner[p] != -1)
			continue;
		for (i = 0; i < k; i++) {
			if (room[i] == 0 || !ELIGIBLE(p, i))
				continue;
			pairs[np].score = assign_score(members[i].id, names[p]);
			pairs[np].p = p;
			pairs[np++].m = rank[i];
		}
	}
	qsort(pairs, (size_t)np, sizeof(*pairs), pair_cmp);
	for (j = 0; j < np; j++) {
		p = pairs[j].p;
		o = (int)(order[pairs[j].m] - members);
		if (owner[p] != -1 || room[o] == 0)
			continue;
		owner[p] = o;
		room[o]--;
	}

	/* Left over only when its eligible members are full: the best of
	 * them takes it anyway. */
	for (p = 0; eligible != NULL && p < n; p++) {
		if (owner[p] != -1)
			continue;
		best_score = 0;
		for (i = 0; i < k; i++) {
			if (!ELIGIBLE(p, i))
				continue;
			sc = assign_score(members[i].id, names[p]);
			if (owner[p] == -1 || sc > best_score ||
			    (sc == best_score && rank[i] < rank[owner[p]])) {
				owner[p] = i;
				best_score = sc;
			}
		}
	}
	free(mine);
	free(order);
	free(room);
	free(rank);
	free(pairs);
	return 0;
}

/* How many partitions change owner between two answers, by member id. */
int
assign_moved(const struct assign_member *a, const int *owner_a,
    const struct assign_member *b, const int *owner_b, int n)
{
	int p, moved = 0;

	for (p = 0; p < n; p++)
		if (strcmp(a[owner_a[p]].id, b[owner_b[p]].id) != 0)
			moved++;
	return moved;
}
