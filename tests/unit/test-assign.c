/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for assign.c: every agent computes the same owners from the
 * same members whatever order it lists them in; each of K members owns
 * floor(N/K) or ceil(N/K) of N partitions; a join moves at most
 * ceil(N/(K+1)) partitions, all to the new member; the newest member
 * leaving moves only its own partitions; and how much an older member's
 * leaving moves stays measured.
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

	ck_assert_int_eq(assign_partitions(m, 0, names, 1, owner), -1);
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
				    w.names, w.n, owner), 0);
				check_balance(&w, owner);
			}
		}
	}
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
	ck_assert_int_eq(assign_partitions(w.m, w.k, w.names, w.n, a), 0);
	ck_assert_int_eq(assign_partitions(rev, w.k, w.names, w.n, b), 0);
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
				    w.names, w.n, before), 0);
				ck_assert_int_eq(assign_partitions(w.m, k + 1,
				    w.names, w.n, after), 0);
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

/* The newest member leaving moves only its own partitions. */
START_TEST(test_newest_leave_moves_its_own)
{
	static struct world w;
	int before[256], after[256], p, k;

	for (k = 2; k <= 12; k++) {
		world_init(&w, 256, k, (unsigned)k);
		ck_assert_int_eq(assign_partitions(w.m, k, w.names, w.n,
		    before), 0);
		ck_assert_int_eq(assign_partitions(w.m, k - 1, w.names, w.n,
		    after), 0);
		for (p = 0; p < w.n; p++)
			if (before[p] != k - 1)
				ck_assert_int_eq(after[p], before[p]);
	}
}
END_TEST

/*
 * An older member leaving: its partitions move, and some others. The
 * figures (worst over 20 seeds, 256 partitions, others moved) are printed
 * for doc/design.md and held under twice the new share, so that a change
 * to the scheme that moves much more fails here.
 */
START_TEST(test_older_leave_measured)
{
	static struct world w;
	struct assign_member rest[MEMBERS_MAX];
	int before[256], after[256], p, k, i, j, leaver, others, worst;
	unsigned seed;

	for (k = 3; k <= 9; k++) {
		worst = 0;
		for (seed = 0; seed < 20; seed++) {
			world_init(&w, 256, k, seed);
			leaver = (int)(seed % (unsigned)(k - 1));	/* not the newest */
			for (i = 0, j = 0; i < k; i++)
				if (i != leaver)
					rest[j++] = w.m[i];
			ck_assert_int_eq(assign_partitions(w.m, k, w.names,
			    w.n, before), 0);
			ck_assert_int_eq(assign_partitions(rest, k - 1,
			    w.names, w.n, after), 0);
			others = 0;
			for (p = 0; p < w.n; p++)
				if (before[p] != leaver && strcmp(
				    w.m[before[p]].id, rest[after[p]].id) != 0)
					others++;
			if (others > worst)
				worst = others;
		}
		printf("assign: 256 partitions, %d -> %d members, an older "
		    "member leaves: at most %d others moved (20 seeds)\n", k,
		    k - 1, worst);
		ck_assert_int_le(worst, 2 * ((256 + k - 2) / (k - 1)));
	}
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
	tcase_add_test(tc, test_same_answer_any_order);
	tcase_add_test(tc, test_join_moves_little);
	tcase_add_test(tc, test_newest_leave_moves_its_own);
	tcase_add_test(tc, test_older_leave_measured);
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
