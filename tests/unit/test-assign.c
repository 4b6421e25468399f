/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for assign.c: every agent computes the same owners from the
 * same members and owners whatever order it lists them in; each of K
 * members owns floor(N/K) or ceil(N/K) of N partitions; an answer fed back
 * as the current owners changes nothing; a join moves at most
 * ceil(N/(K+1)) partitions, all to the new member; any member leaving (or
 * crashing: the same input) moves only its own partitions.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "assign.h"

#define MEMBERS_MAX	24
#define N_MAX		ASSIGN_PARTITIONS_MAX

struct world {
	char			 ids[MEMBERS_MAX][48];
	struct assign_member	 m[MEMBERS_MAX];
	int			 k;
	char			 names_buf[N_MAX][12];
	const char		*names[N_MAX];
	int			 n;
};

static void
world_init(struct world *w, int n, int k, unsigned seed)
{
	int i;

	memset(w, 0, sizeof(*w));
	for (i = 0; i < n; i++) {
		snprintf(w->names_buf[i], sizeof(w->names_buf[i]), "%d", i);
		w->names[i] = w->names_buf[i];
	}
	w->n = n;
	for (i = 0; i < k; i++) {
		snprintf(w->ids[i], sizeof(w->ids[i]), "node-%u-%d:%u", seed, i,
		    1000 + seed * 31 + (unsigned)i * 7);
		w->m[i].id = w->ids[i];
		w->m[i].seq = (int64_t)seed * 100 + i;
	}
	w->k = k;
}

static void
check_balance(const struct world *w, const int *owner)
{
	int load[MEMBERS_MAX] = { 0 }, p, i;
	int lo = w->n / w->k, hi = (w->n + w->k - 1) / w->k;

	for (p = 0; p < w->n; p++) {
		ck_assert_int_ge(owner[p], 0);
		ck_assert_int_lt(owner[p], w->k);
		load[owner[p]]++;
	}
	for (i = 0; i < w->k; i++) {
		ck_assert_msg(load[i] >= lo && load[i] <= hi,
		    "N=%d K=%d: member %d owns %d, not %d..%d", w->n, w->k, i,
		    load[i], lo, hi);
	}
}

START_TEST(test_score_fixed)
{
	/* The hash is part of the contract: every version must agree. */
	ck_assert_uint_eq(assign_score("a", "0"), assign_score("a", "0"));
	ck_assert_uint_ne(assign_score("a", "0"), assign_score("a", "1"));
	ck_assert_uint_ne(assign_score("a", "0"), assign_score("b", "0"));
	/* "ab" + "c" is not "a" + "bc": the id ends with its NUL. */
	ck_assert_uint_ne(assign_score("ab", "c"), assign_score("a", "bc"));
	ck_assert_uint_eq(assign_score("", ""), 0x25fc6dd36ce04b20ULL);
}
END_TEST

START_TEST(test_no_members)
{
	struct assign_member m[1] = { { "a", 1 } };
	const char *names[] = { "0" };
	int owner[1] = { 7 };

	ck_assert_int_eq(assign_partitions(m, 0, names, 1, NULL, owner), -1);
	ck_assert_int_eq(owner[0], 7);
}
END_TEST

START_TEST(test_balance)
{
	static struct world w;
	static int owner[N_MAX];
	static const int ns[] = { 1, 2, 3, 7, 12, 64, 100, 256, 1024 };
	unsigned seed;
	size_t i;
	int k;

	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		for (k = 1; k <= 20; k++) {
			for (seed = 0; seed < (ns[i] >= 256 ? 3u : 20u); seed++) {
				world_init(&w, ns[i], k, seed);
				ck_assert_int_eq(assign_partitions(w.m, w.k,
				    w.names, w.n, NULL, owner), 0);
				check_balance(&w, owner);
			}
		}
	}
}
END_TEST

/*
 * Members that do not all run the same partitions (issue 30): each
 * partition goes only to a member that runs it, and every partition a
 * member runs has an owner, even when that member is over its quota; with
 * every member eligible the answer is assign_partitions's.
 */
START_TEST(test_among)
{
	static const char *const names[12] = { "0", "1", "2", "3", "4", "5",
	    "6", "7", "8", "9", "10", "11" };
	struct assign_member m[3] = { { "a", 1 }, { "b", 2 }, { "c", 3 } };
	bool eligible[12 * 3];
	int owner[12], plain[12], count[3] = { 0 }, p, i;

	/* a and b run 0-7, c runs 0-11. */
	for (p = 0; p < 12; p++)
		for (i = 0; i < 3; i++)
			eligible[p * 3 + i] = p < 8 || i == 2;
	ck_assert_int_eq(assign_partitions_among(m, 3, names, 12, NULL,
	    eligible, owner), 0);
	for (p = 0; p < 12; p++) {
		ck_assert_int_ge(owner[p], 0);
		ck_assert(eligible[p * 3 + owner[p]]);
		count[owner[p]]++;
	}
	ck_assert_int_eq(count[0] + count[1] + count[2], 12);
	for (p = 8; p < 12; p++)
		ck_assert_int_eq(owner[p], 2);
	/* Only c runs 4 partitions, and b is gone: c takes them over its
	 * quota (6 of 12 with 2 members). */
	m[1] = m[2];
	for (p = 0; p < 12; p++) {
		eligible[p * 2] = p < 8;
		eligible[p * 2 + 1] = true;
	}
	ck_assert_int_eq(assign_partitions_among(m, 2, names, 12, NULL,
	    eligible, owner), 0);
	for (p = 8; p < 12; p++)
		ck_assert_int_eq(owner[p], 1);
	for (p = 0; p < 12; p++)
		ck_assert_int_ge(owner[p], 0);
	/* A partition nobody runs has no owner. */
	for (p = 0; p < 12; p++)
		eligible[p * 2] = eligible[p * 2 + 1] = p != 5;
	ck_assert_int_eq(assign_partitions_among(m, 2, names, 12, NULL,
	    eligible, owner), 0);
	ck_assert_int_eq(owner[5], -1);
	/* Everyone eligible: as assign_partitions. */
	ck_assert_int_eq(assign_partitions_among(m, 2, names, 12, NULL, NULL,
	    owner), 0);
	ck_assert_int_eq(assign_partitions(m, 2, names, 12, NULL, plain), 0);
	ck_assert_int_eq(memcmp(owner, plain, sizeof(owner)), 0);
}
END_TEST

START_TEST(test_same_answer_any_order)
{
	static struct world w;
	struct assign_member rev[MEMBERS_MAX];
	int a[256], b[256], p, i;

	world_init(&w, 256, 7, 3);
	for (i = 0; i < w.k; i++)
		rev[i] = w.m[w.k - 1 - i];
	int cur[256], rcur[256];

	/* Some current owners (a few partitions without one). */
	for (p = 0; p < w.n; p++) {
		cur[p] = p % 11 == 0 ? -1 : (p * 7 + p / 5) % w.k;
		rcur[p] = cur[p] == -1 ? -1 : w.k - 1 - cur[p];
	}
	ck_assert_int_eq(assign_partitions(w.m, w.k, w.names, w.n, NULL, a),
	    0);
	ck_assert_int_eq(assign_partitions(rev, w.k, w.names, w.n, NULL, b),
	    0);
	for (p = 0; p < w.n; p++)
		ck_assert_str_eq(w.m[a[p]].id, rev[b[p]].id);
	ck_assert_int_eq(assign_partitions(w.m, w.k, w.names, w.n, cur, a), 0);
	ck_assert_int_eq(assign_partitions(rev, w.k, w.names, w.n, rcur, b),
	    0);
	check_balance(&w, a);
	for (p = 0; p < w.n; p++)
		ck_assert_str_eq(w.m[a[p]].id, rev[b[p]].id);
}
END_TEST

/* A join moves at most ceil(N/(K+1)) partitions, each to the newcomer. */
START_TEST(test_join_moves_little)
{
	static struct world w;
	static int before[N_MAX], after[N_MAX];
	static const int ns[] = { 3, 12, 64, 256, 1024 };
	unsigned seed;
	size_t i;
	int k, p, moved, bound;

	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		for (k = 1; k < 16; k++) {
			for (seed = 0; seed < 10; seed++) {
				world_init(&w, ns[i], k + 1, seed);
				ck_assert_int_eq(assign_partitions(w.m, k,
				    w.names, w.n, NULL, before), 0);
				ck_assert_int_eq(assign_partitions(w.m, k + 1,
				    w.names, w.n, before, after), 0);
				moved = 0;
				for (p = 0; p < w.n; p++) {
					if (before[p] == after[p])
						continue;
					ck_assert_int_eq(after[p], k);
					moved++;
				}
				bound = (w.n + k) / (k + 1);
				ck_assert_int_le(moved, bound);
				ck_assert_int_eq(moved, assign_moved(w.m,
				    before, w.m, after, w.n));
			}
		}
	}
}
END_TEST

/* An answer fed back as the current owners gives itself. */
START_TEST(test_stable)
{
	static struct world w;
	static int a[N_MAX], b[N_MAX];
	static const int ns[] = { 1, 3, 12, 64, 256, 1024 };
	size_t i;
	int k, p;

	for (i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		for (k = 1; k <= 20; k++) {
			world_init(&w, ns[i], k, (unsigned)k);
			ck_assert_int_eq(assign_partitions(w.m, k, w.names,
			    w.n, NULL, a), 0);
			ck_assert_int_eq(assign_partitions(w.m, k, w.names,
			    w.n, a, b), 0);
			for (p = 0; p < w.n; p++)
				ck_assert_int_eq(a[p], b[p]);
		}
	}
}
END_TEST

/*
 * Any member leaving, gracefully or not (the input is the same: the member
 * is gone from the list, its partitions' claims still name it), moves only
 * its own partitions; the answer is balanced and stable again.
 */
START_TEST(test_any_leave_moves_its_own)
{
	static struct world w;
	struct assign_member rest[MEMBERS_MAX];
	static int before[N_MAX], cur[N_MAX], after[N_MAX], again[N_MAX];
	static const int ns[] = { 3, 12, 24, 256, 1024 };
	int p, k, i, j, leaver, map[MEMBERS_MAX];
	size_t x;

	for (x = 0; x < sizeof(ns) / sizeof(ns[0]); x++) {
		for (k = 2; k <= 12; k++) {
			for (leaver = 0; leaver < k; leaver++) {
				world_init(&w, ns[x], k,
				    (unsigned)(k + leaver));
				for (i = 0, j = 0; i < k; i++) {
					map[i] = i == leaver ? -1 : j;
					if (i != leaver)
						rest[j++] = w.m[i];
				}
				ck_assert_int_eq(assign_partitions(w.m, k,
				    w.names, w.n, NULL, before), 0);
				for (p = 0; p < w.n; p++)
					cur[p] = map[before[p]];
				ck_assert_int_eq(assign_partitions(rest, k - 1,
				    w.names, w.n, cur, after), 0);
				for (p = 0; p < w.n; p++) {
					if (before[p] != leaver)
						ck_assert_int_eq(after[p],
						    map[before[p]]);
				}
				w.k = k - 1;
				memcpy(w.m, rest, sizeof(rest));
				check_balance(&w, after);
				ck_assert_int_eq(assign_partitions(rest, k - 1,
				    w.names, w.n, after, again), 0);
				for (p = 0; p < w.n; p++)
					ck_assert_int_eq(again[p], after[p]);
			}
		}
	}
}
END_TEST

/*
 * The figures for doc/design.md: 256 partitions, 20 seeds, K members from
 * scratch, then a join (moved, against ceil(N/(K+1))) and each member in
 * turn leaving (partitions other than the leaver's that moved).
 */
START_TEST(test_measured)
{
	static struct world w;
	struct assign_member rest[MEMBERS_MAX];
	static int base[256], joined[256], cur[256], after[256];
	int k, p, i, j, leaver, moved, others, worst_join, worst_other;
	int map[MEMBERS_MAX];
	unsigned seed;

	memset(rest, 0, sizeof(rest));
	for (k = 2; k <= 9; k++) {
		worst_join = worst_other = 0;
		for (seed = 0; seed < 20; seed++) {
			world_init(&w, 256, k + 1, seed);
			ck_assert_int_eq(assign_partitions(w.m, k, w.names,
			    w.n, NULL, base), 0);
			ck_assert_int_eq(assign_partitions(w.m, k + 1, w.names,
			    w.n, base, joined), 0);
			moved = assign_moved(w.m, base, w.m, joined, w.n);
			if (moved > worst_join)
				worst_join = moved;
			for (leaver = 0; leaver < k; leaver++) {
				for (i = 0, j = 0; i < k; i++) {
					map[i] = i == leaver ? -1 : j;
					if (i != leaver)
						rest[j++] = w.m[i];
				}
				for (p = 0; p < w.n; p++)
					cur[p] = map[base[p]];
				ck_assert_int_eq(assign_partitions(rest, k - 1,
				    w.names, w.n, cur, after), 0);
				others = 0;
				for (p = 0; p < w.n; p++)
					if (cur[p] != -1 && after[p] != cur[p])
						others++;
				if (others > worst_other)
					worst_other = others;
			}
		}
		printf("assign: 256 partitions, %d members: a join moves at "
		    "most %d (bound %d); any member leaving moves at most %d "
		    "others (20 seeds)\n", k, worst_join, (256 + k) / (k + 1),
		    worst_other);
		ck_assert_int_le(worst_join, (256 + k) / (k + 1));
		ck_assert_int_eq(worst_other, 0);
	}
}
END_TEST

/*
 * A move in flight: whatever subset of the moves an answer asks for has
 * happened (and its claims are seen), the answer is the same, so agents
 * that see the claims at different times still agree on where the rest go.
 * From arbitrary owners (some none, some over quota) and from a join.
 */
START_TEST(test_in_flight)
{
	static struct world w;
	static int cur[256], target[256], mid[256], again[256];
	unsigned r = 777;
	int round, p, k;

	for (round = 0; round < 200; round++) {
		k = 1 + round % 9;
		world_init(&w, round % 2 ? 256 : 24, k, (unsigned)round);
		for (p = 0; p < w.n; p++) {
			r = r * 1103515245u + 12345u;
			/* A join (balanced over k - 1), or anything. */
			if (round % 3 == 0)
				cur[p] = -1;
			else
				cur[p] = (int)((r >> 16) %
				    (unsigned)(k + 1)) - 1;
		}
		if (round % 3 == 0 && k > 1)
			ck_assert_int_eq(assign_partitions(w.m, k - 1, w.names,
			    w.n, NULL, cur), 0);
		ck_assert_int_eq(assign_partitions(w.m, k, w.names, w.n, cur,
		    target), 0);
		for (p = 0; p < w.n; p++) {
			r = r * 1103515245u + 12345u;
			mid[p] = (r >> 16) % 2 ? target[p] : cur[p];
		}
		ck_assert_int_eq(assign_partitions(w.m, k, w.names, w.n, mid,
		    again), 0);
		for (p = 0; p < w.n; p++)
			ck_assert_int_eq(again[p], target[p]);
	}
}
END_TEST

/*
 * A history of joins and leaves, each answer fed to the next: balanced at
 * every step, each join within its bound, each leave only the leaver's.
 * The figures are printed for doc/design.md.
 */
START_TEST(test_history)
{
	static struct world w;
	static int cur[256], next[256];
	struct assign_member live[MEMBERS_MAX];
	char ids[64][48];
	int nlive = 0, step, p, i, j, moved, gone, seq = 0, worst_join = 0,
	    worst_other = 0;
	unsigned r = 12345;

	world_init(&w, 256, 0, 0);
	for (p = 0; p < w.n; p++)
		cur[p] = -1;
	for (step = 0; step < 64; step++) {
		r = r * 1103515245u + 12345u;
		if (nlive < 2 || (nlive < 8 && (r >> 16) % 2 == 0)) {
			snprintf(ids[step], sizeof(ids[step]), "h-%d", step);
			live[nlive].id = ids[step];
			live[nlive++].seq = seq++;
			ck_assert_int_eq(assign_partitions(live, nlive,
			    w.names, w.n, cur, next), 0);
			moved = 0;
			for (p = 0; p < w.n; p++) {
				if (next[p] == cur[p])
					continue;
				if (cur[p] != -1) {
					ck_assert_int_eq(next[p], nlive - 1);
					moved++;
				}
			}
			if (nlive > 1) {
				ck_assert_int_le(moved, (w.n + nlive - 1) /
				    nlive);
				if (moved > worst_join)
					worst_join = moved;
			}
		} else {
			gone = (int)((r >> 16) % (unsigned)nlive);
			for (p = 0; p < w.n; p++)
				if (cur[p] == gone)
					cur[p] = -1;
				else if (cur[p] > gone)
					cur[p]--;
			for (i = gone; i < nlive - 1; i++)
				live[i] = live[i + 1];
			nlive--;
			ck_assert_int_eq(assign_partitions(live, nlive,
			    w.names, w.n, cur, next), 0);
			for (p = 0; p < w.n; p++)
				if (cur[p] != -1 && next[p] != cur[p])
					worst_other++;
		}
		for (i = 0; i < nlive; i++) {
			for (j = 0, moved = 0; j < w.n; j++)
				moved += next[j] == i;
			ck_assert_int_ge(moved, w.n / nlive);
			ck_assert_int_le(moved, (w.n + nlive - 1) / nlive);
		}
		memcpy(cur, next, sizeof(cur));
	}
	ck_assert_int_eq(worst_other, 0);
	printf("assign: 256 partitions, 64 joins and leaves of up to 8 "
	    "members: a join moved at most %d, a leave moved %d others\n",
	    worst_join, worst_other);
}
END_TEST

static Suite *
assign_suite(void)
{
	Suite *s = suite_create("assign");
	TCase *tc = tcase_create("assign");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_score_fixed);
	tcase_add_test(tc, test_no_members);
	tcase_add_test(tc, test_balance);
	tcase_add_test(tc, test_among);
	tcase_add_test(tc, test_same_answer_any_order);
	tcase_add_test(tc, test_join_moves_little);
	tcase_add_test(tc, test_stable);
	tcase_add_test(tc, test_any_leave_moves_its_own);
	tcase_add_test(tc, test_measured);
	tcase_add_test(tc, test_in_flight);
	tcase_add_test(tc, test_history);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(assign_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
