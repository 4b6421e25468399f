/* SPDX-License-Identifier: MIT */
/*
 * Rendezvous (highest random weight) hashing with a bound on load
 * (doc/design.md, "Partitions"). Member m scores partition p with
 * mix(fnv1a64(m.id "\0" p)). Alone, the highest score gives each member
 * N/K partitions on average only; to hold every member to floor(N/K) or
 * ceil(N/K) and still move little, the answer is built by adding the
 * members one at a time in the order they joined (their member nodes'
 * sequence numbers): the first owns everything, and each next member takes,
 * from its highest score down, the partitions of members that hold more
 * than their new share, until every member holds its share. A member that
 * joins (it has the highest sequence) adds one step, so only the partitions
 * it takes move, ceil(N/(K+1)) at most; the newest member leaving undoes
 * one, so only its own partitions move. An older member leaving changes the
 * steps after it, and some other partitions move too (measured in
 * tests/unit/test-assign.c and the design).
 */

#include <stdlib.h>
#include <string.h>

#include "assign.h"

struct ranked {
	uint64_t	 score;
	int		 p;
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

/*
 * Adds member X (the J+1th) to an answer for the J before it: X takes, from
 * its highest score down, partitions of members over their new share. With
 * K = J + 1, q = N/K and r = N mod K, a member is over with more than q + 1,
 * or with q + 1 while more than r members hold q + 1 or more (HI).
 */
static void
assign_add(int x, int k, int n, const struct ranked *mine, int *owner,
    int *load)
{
	int q = n / k, r = n % k, hi = 0, big = 0, i, m, o, p;

	for (m = 0; m < k; m++) {
		if (load[m] >= q + 1)
			hi++;
		if (load[m] > q + 1)
			big++;
	}
	for (i = 0; i < n && (big > 0 || hi > r); i++) {
		p = mine[i].p;
		o = owner[p];
		if (o == x)
			continue;
		if (!(load[o] > q + 1 || (load[o] == q + 1 && hi > r)))
			continue;
		if (!(load[x] < q || (load[x] == q && hi < r)))
			break;
		if (load[o] == q + 2)
			big--;
		if (load[o] == q + 1)
			hi--;
		load[o]--;
		owner[p] = x;
		load[x]++;
		if (load[x] == q + 1)
			hi++;
	}
}

/* Gives each partition to a member, floor(N/K) or ceil(N/K) each. */
int
assign_partitions(const struct assign_member *members, int k,
    const char *const *names, int n, int *owner)
{
	const struct assign_member **order;
	struct ranked *mine;
	int *load, *got, j, p;

	if (k <= 0)
		return -1;
	if (n == 0)
		return 0;
	mine = calloc((size_t)n, sizeof(*mine));
	order = calloc((size_t)k, sizeof(*order));
	load = calloc((size_t)k, sizeof(*load));
	got = calloc((size_t)n, sizeof(*got));
	if (mine == NULL || order == NULL || load == NULL || got == NULL) {
		free(mine);
		free(order);
		free(load);
		free(got);
		return -1;
	}
	for (j = 0; j < k; j++)
		order[j] = &members[j];
	qsort(order, (size_t)k, sizeof(*order), member_cmp);

	/* got[] and load[] count in join order; owner[] names members. */
	load[0] = n;
	for (j = 1; j < k; j++) {
		for (p = 0; p < n; p++) {
			mine[p].score = assign_score(order[j]->id,
			    names[p]);
			mine[p].p = p;
		}
		qsort(mine, (size_t)n, sizeof(*mine), ranked_cmp);
		assign_add(j, j + 1, n, mine, got, load);
	}
	for (p = 0; p < n; p++)
		owner[p] = (int)(order[got[p]] - members);
	free(mine);
	free(order);
	free(load);
	free(got);
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
