/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ctl/cluster.c, the cluster view's judgement: a member
 * node's data read field by field (old agents' "ID" and "ID\0parts=...",
 * drained=1 and avoid=, fields of newer agents ignored, unreadable data
 * refused); quotas floor/ceil of N/K by join order over the members not
 * drained; the assignment fed back as the owners is settled and balanced;
 * an unowned partition, a drained owner, an avoided partition, members
 * that run different partitions and a node no member runs, each judged
 * as the agents would.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "cluster.h"

#define DATA(s)	(s), (int)(sizeof(s) - 1)

START_TEST(test_parse_old_agents)
{
	struct cluster_member m;

	ck_assert_int_eq(cluster_member_parse(&m, DATA("w1")), 0);
	ck_assert_str_eq(m.id, "w1");
	ck_assert_int_eq(m.nparts, -1);
	ck_assert(!m.parts_bad && !m.drained && m.navoid == 0);
	cluster_member_free(&m);

	ck_assert_int_eq(cluster_member_parse(&m, DATA("w1\0parts=count:3")), 0);
	ck_assert_str_eq(m.id, "w1");
	ck_assert_int_eq(m.nparts, 3);
	ck_assert_str_eq(m.parts[0], "0");
	ck_assert_str_eq(m.parts[2], "2");
	ck_assert(!m.drained);
	cluster_member_free(&m);

	/* Names in the agents' order (length, then bytes), twins once. */
	ck_assert_int_eq(cluster_member_parse(&m,
	    DATA("w2\0parts=names:us,apac,eu,10,2,eu")), 0);
	ck_assert_int_eq(m.nparts, 5);
	ck_assert_str_eq(m.parts[0], "2");
	ck_assert_str_eq(m.parts[1], "10");
	ck_assert_str_eq(m.parts[2], "eu");
	ck_assert_str_eq(m.parts[3], "us");
	ck_assert_str_eq(m.parts[4], "apac");
	cluster_member_free(&m);
}
END_TEST

START_TEST(test_parse_new_fields)
{
	struct cluster_member m;

	ck_assert_int_eq(cluster_member_parse(&m,
	    DATA("w3\0parts=count:12\0drained=1\0avoid=7,3\0zone=eu-1")), 0);
	ck_assert_str_eq(m.id, "w3");
	ck_assert_int_eq(m.nparts, 12);
	ck_assert(m.drained);
	ck_assert_int_eq(m.navoid, 2);
	ck_assert_str_eq(m.avoid[0], "3");
	ck_assert_str_eq(m.avoid[1], "7");
	cluster_member_free(&m);

	/* In any order; drained=0 is not drained; an empty avoid is none. */
	ck_assert_int_eq(cluster_member_parse(&m,
	    DATA("w4\0avoid=\0drained=0\0parts=names:a")), 0);
	ck_assert(!m.drained);
	ck_assert_int_eq(m.navoid, 0);
	ck_assert_int_eq(m.nparts, 1);
	cluster_member_free(&m);

	/* A trailing NUL, as a C string written whole would leave. */
	ck_assert_int_eq(cluster_member_parse(&m,
	    DATA("w5\0parts=count:2\0drained=1\0")), 0);
	ck_assert(m.drained);
	ck_assert_int_eq(m.nparts, 2);
	cluster_member_free(&m);
}
END_TEST

START_TEST(test_parse_unreadable)
{
	struct cluster_member m;
	char big[300];

	ck_assert_int_eq(cluster_member_parse(&m, "", 0), -1);
	ck_assert_ptr_null(m.id);
	ck_assert_int_eq(cluster_member_parse(&m, DATA("\0parts=count:1")), -1);
	ck_assert_ptr_null(m.id);
	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(cluster_member_parse(&m, big, (int)sizeof(big)), -1);

	/* An id with parts that cannot be read: runs what the others run. */
	ck_assert_int_eq(cluster_member_parse(&m, DATA("w\0parts=count:x")), 0);
	ck_assert(m.parts_bad);
	ck_assert_int_eq(m.nparts, -1);
	cluster_member_free(&m);
	ck_assert_int_eq(cluster_member_parse(&m,
	    DATA("w\0parts=names:a,,b")), 0);
	ck_assert(m.parts_bad);
	cluster_member_free(&m);
	ck_assert_int_eq(cluster_member_parse(&m, DATA("w\0parts=count:-1")), 0);
	ck_assert(m.parts_bad);
	cluster_member_free(&m);
	ck_assert_int_eq(cluster_member_parse(&m, DATA("w\0parts=ranges:0-9")),
	    0);
	ck_assert(m.parts_bad);
	cluster_member_free(&m);
}
END_TEST

/* --- judging ---------------------------------------------------------- */

static void
add_member(struct cluster *c, int64_t seq, const char *data, int len)
{
	struct cluster_member *m;
	char node[32];

	c->members = realloc(c->members, (size_t)(c->nmembers + 1) *
	    sizeof(*c->members));
	ck_assert_ptr_nonnull(c->members);
	m = &c->members[c->nmembers++];
	memset(m, 0, sizeof(*m));
	snprintf(node, sizeof(node), "m-%010lld", (long long)seq);
	m->node = strdup(node);
	m->seq = seq;
	cluster_member_parse(m, data, len);
}

static struct cluster_part *
part(struct cluster *c, const char *name)
{
	int i;

	for (i = 0; i < c->nparts; i++)
		if (strcmp(c->parts[i].name, name) == 0)
			return &c->parts[i];
	return NULL;
}

static struct cluster_member *
member(struct cluster *c, const char *id)
{
	int i;

	for (i = 0; i < c->nmembers; i++)
		if (c->members[i].id != NULL && strcmp(c->members[i].id, id) == 0)
			return &c->members[i];
	return NULL;
}

/* Partition nodes 0..n-1, with no owner. */
static void
add_parts(struct cluster *c, int n)
{
	char name[16];
	int i;

	c->parts = calloc((size_t)n + 1, sizeof(*c->parts));
	ck_assert_ptr_nonnull(c->parts);
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%d", i);
		c->parts[i].name = strdup(name);
		c->parts[i].exists = true;
		c->parts[i].contenders = 0;
	}
	c->nparts = n;
}

static void
own(struct cluster *c, const char *name, const char *id)
{
	struct cluster_part *pt = part(c, name);

	ck_assert_ptr_nonnull(pt);
	free(pt->owner);
	pt->owner = id != NULL ? strdup(id) : NULL;
	pt->epoch = 4294967296LL;
}

/* Every partition owned by whom the last judgement assigned it. */
static void
own_as_assigned(struct cluster *c)
{
	int i;

	for (i = 0; i < c->nparts; i++) {
		free(c->parts[i].owner);
		c->parts[i].owner = c->parts[i].assigned_member < 0 ? NULL :
		    strdup(c->members[c->parts[i].assigned_member].id);
	}
}

START_TEST(test_quotas_by_join_order_and_settled)
{
	struct cluster c;
	int i, total = 0;

	memset(&c, 0, sizeof(c));
	/* Listed out of join order: the view sorts them. */
	add_member(&c, 7, DATA("c\0parts=count:10"));
	add_member(&c, 2, DATA("a\0parts=count:10"));
	add_member(&c, 5, DATA("b\0parts=count:10"));
	add_parts(&c, 10);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_str_eq(c.members[0].id, "a");
	ck_assert_str_eq(c.members[2].id, "c");
	ck_assert_int_eq(c.counted, 3);
	ck_assert_int_eq(c.nrun, 10);
	/* 10 over 3: the oldest gets 4. */
	ck_assert_int_eq(member(&c, "a")->quota, 4);
	ck_assert_int_eq(member(&c, "b")->quota, 3);
	ck_assert_int_eq(member(&c, "c")->quota, 3);
	ck_assert_int_eq(c.unowned, 10);
	ck_assert(!c.settled && !c.balanced);

	/* The assignment fed back as the owners: settled and balanced. */
	own_as_assigned(&c);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert(c.settled && c.balanced);
	ck_assert_int_eq(c.unowned, 0);
	ck_assert_int_eq(c.owned, 10);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(c.members[i].owns, c.members[i].quota);
		total += c.members[i].owns;
	}
	ck_assert_int_eq(total, 10);

	/* One owner gone: that partition is unowned, nothing settled. */
	own(&c, "4", NULL);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(c.unowned, 1);
	ck_assert(!c.settled && !c.balanced);
	ck_assert_int_ge(part(&c, "4")->assigned_member, 0);

	/* Owned by an id that is no member (it left): not settled, not
	 * unowned either. */
	own(&c, "4", "gone");
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(c.unowned, 0);
	ck_assert_int_eq(part(&c, "4")->owner_member, -1);
	ck_assert(!c.settled);
	cluster_free(&c);
}
END_TEST

START_TEST(test_drained_members_have_no_quota)
{
	struct cluster c;

	memset(&c, 0, sizeof(c));
	add_member(&c, 1, DATA("old\0parts=count:10\0drained=1"));
	add_member(&c, 2, DATA("a\0parts=count:10"));
	add_member(&c, 3, DATA("b\0parts=count:10"));
	add_member(&c, 4, DATA("c\0parts=count:10"));
	add_parts(&c, 10);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(c.counted, 3);
	ck_assert(!member(&c, "old")->counted);
	ck_assert_int_eq(member(&c, "old")->quota, 0);
	ck_assert_int_eq(member(&c, "a")->quota, 4);
	ck_assert_int_eq(member(&c, "b")->quota, 3);
	own_as_assigned(&c);
	ck_assert_int_eq(member(&c, "old")->assigned, 0);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert(c.settled && c.balanced);

	/* The drained member still owning one: neither. */
	own(&c, "0", "old");
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(member(&c, "old")->owns, 1);
	ck_assert(!c.settled && !c.balanced);
	cluster_free(&c);

	/* Every member drained: the quotas count them all. */
	memset(&c, 0, sizeof(c));
	add_member(&c, 1, DATA("a\0parts=count:4\0drained=1"));
	add_member(&c, 2, DATA("b\0parts=count:4\0drained=1"));
	add_parts(&c, 4);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(c.counted, 2);
	ck_assert_int_eq(member(&c, "a")->quota, 2);
	ck_assert_int_eq(member(&c, "b")->quota, 2);
	cluster_free(&c);
}
END_TEST

START_TEST(test_avoided_partition_goes_elsewhere)
{
	struct cluster c;
	struct cluster_member *a;

	memset(&c, 0, sizeof(c));
	add_member(&c, 1, DATA("a\0parts=count:6"));
	add_member(&c, 2, DATA("b\0parts=count:6"));
	add_parts(&c, 6);
	ck_assert_int_eq(cluster_judge(&c), 0);
	own_as_assigned(&c);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert(c.settled);

	/* a resigns one of its own and avoids it: it must move to b, a
	 * takes one of b's instead. */
	a = member(&c, "a");
	{
		const char *mine = NULL;
		char data[64];
		int i, len;

		for (i = 0; i < c.nparts; i++)
			if (c.parts[i].owner_member == (int)(a - c.members))
				mine = c.parts[i].name;
		ck_assert_ptr_nonnull(mine);
		len = snprintf(data, sizeof(data), "a%cparts=count:6%cavoid=%s",
		    0, 0, mine);
		data[len] = '\0';
		{
			char keep[16];

			snprintf(keep, sizeof(keep), "%s", mine);
			cluster_member_free(a);
			ck_assert_int_eq(cluster_member_parse(a, data, len), 0);
			ck_assert_int_eq(a->navoid, 1);
			ck_assert_int_eq(cluster_judge(&c), 0);
			ck_assert(!c.settled);
			ck_assert(c.balanced);	/* counts are still right */
			ck_assert_str_eq(c.members[part(&c, keep)->
			    assigned_member].id, "b");
			/* Followed as the agents would: it settles with
			 * the avoided partition never back on a (b may end
			 * over its quota: assign.c gives a partition whose
			 * eligible members are full to one of them). */
			for (i = 0; i < 4 && !c.settled; i++) {
				own_as_assigned(&c);
				ck_assert_int_eq(cluster_judge(&c), 0);
				ck_assert_str_eq(part(&c, keep)->owner, "b");
			}
			ck_assert(c.settled);
		}
	}
	cluster_free(&c);
}
END_TEST

START_TEST(test_members_that_disagree)
{
	struct cluster c;

	/* A rolling change from 4 to 6 partitions; an old agent that says
	 * nothing runs what the others run. */
	memset(&c, 0, sizeof(c));
	add_member(&c, 1, DATA("a\0parts=count:4"));
	add_member(&c, 2, DATA("b\0parts=count:6"));
	add_member(&c, 3, DATA("old"));
	add_parts(&c, 4);		/* 4 and 5 have no node yet */
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(c.nparts, 6);
	ck_assert_int_eq(c.nrun, 6);
	ck_assert(!part(&c, "5")->exists && part(&c, "5")->run);
	ck_assert(c.disagree);
	ck_assert(member(&c, "a")->runs_other);
	ck_assert(!member(&c, "b")->runs_other);
	ck_assert(!member(&c, "old")->runs_other);
	/* a may not own what it does not run. */
	ck_assert_str_ne(c.members[part(&c, "4")->assigned_member].id, "a");
	ck_assert_str_ne(c.members[part(&c, "5")->assigned_member].id, "a");
	own_as_assigned(&c);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert(c.settled);
	cluster_free(&c);

	/* A node left by an earlier count that no member runs: shown, not
	 * judged. */
	memset(&c, 0, sizeof(c));
	add_member(&c, 1, DATA("a\0parts=count:2"));
	add_parts(&c, 3);
	own(&c, "2", "gone");
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(c.nrun, 2);
	ck_assert(!part(&c, "2")->run);
	own_as_assigned(&c);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert(c.settled && c.balanced);
	cluster_free(&c);
}
END_TEST

START_TEST(test_duplicates_and_unreadable)
{
	struct cluster c;

	memset(&c, 0, sizeof(c));
	add_member(&c, 1, DATA("a\0parts=count:4"));
	add_member(&c, 2, DATA("a\0parts=count:4"));
	add_member(&c, 3, "", 0);
	add_parts(&c, 4);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert(!c.members[0].duplicate_id);
	ck_assert(c.members[1].duplicate_id);
	ck_assert_ptr_null(c.members[2].id);
	ck_assert(!c.members[2].counted);
	ck_assert_int_eq(c.counted, 2);
	cluster_free(&c);

	/* No member at all: nothing can be settled. */
	memset(&c, 0, sizeof(c));
	add_parts(&c, 2);
	ck_assert_int_eq(cluster_judge(&c), 0);
	ck_assert_int_eq(c.nrun, 2);
	ck_assert(!c.settled && !c.balanced);
	cluster_free(&c);
}
END_TEST

static Suite *
cluster_suite(void)
{
	Suite *s = suite_create("cluster");
	TCase *tc = tcase_create("cluster");

	tcase_add_test(tc, test_parse_old_agents);
	tcase_add_test(tc, test_parse_new_fields);
	tcase_add_test(tc, test_parse_unreadable);
	tcase_add_test(tc, test_quotas_by_join_order_and_settled);
	tcase_add_test(tc, test_drained_members_have_no_quota);
	tcase_add_test(tc, test_avoided_partition_goes_elsewhere);
	tcase_add_test(tc, test_members_that_disagree);
	tcase_add_test(tc, test_duplicates_and_unreadable);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(cluster_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
