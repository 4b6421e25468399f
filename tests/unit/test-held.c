/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for held.c, what the window on the connection holds back
 * (zk.c): a parked partition's second look at a claim node that was not
 * there waits behind everything else, and one partition's requests still
 * go out in the order asked (election.c counts each answer to a claim
 * read as the oldest one out).
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "held.h"

#define WINDOW	64
#define NPARTS	3

static struct held_queues hq;
static struct election parts[NPARTS];

static void
setup(void)
{
	int i;

	held_init(&hq, NPARTS);
	memset(parts, 0, sizeof(parts));
	for (i = 0; i < NPARTS; i++)
		parts[i].phase = PHASE_IDLE;
}

static void
teardown(void)
{
	held_free(&hq);
}

/* Partition part parked, its node absent at the last look. */
static void
parked_absent(int part)
{
	parts[part].parked = true;
	parts[part].phase = PHASE_HOLDING;
	parts[part].claim_absent = true;
}

/* Asks for an action of part with `out` requests out: held (and in which
 * queue) or sent at once (-1). */
static int
ask(enum election_action_type type, int part, int out)
{
	struct fleet_action fa;
	struct held *h;
	int q;

	memset(&fa, 0, sizeof(fa));
	fa.type = FACT_ELECTION;
	fa.part = part;
	fa.a.type = type;
	if (!held_must_wait(&hq, &fa, &parts[part], out, WINDOW, &q))
		return -1;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		abort();
	h->fa = fa;
	held_push(&hq, q, h);
	return q;
}

/* The next held action: its part and type; -1 when none. */
static int
next(enum election_action_type *type)
{
	struct held *h = held_next(&hq);
	int part;

	if (h == NULL)
		return -1;
	part = h->fa.part;
	*type = h->fa.a.type;
	free(h);
	return part;
}

START_TEST(test_second_look_goes_last)
{
	enum election_action_type t;

	parked_absent(0);
	/* Window full: p0's second look waits in the second queue, p1's
	 * steps in the first, and go out before it. */
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 0, WINDOW), HELD_LATER);
	ck_assert_int_eq(ask(ACT_CREATE, 1, WINDOW), HELD_SOON);
	ck_assert_int_eq(ask(ACT_LIST, 1, WINDOW), HELD_SOON);
	ck_assert_int_eq(next(&t), 1);
	ck_assert_int_eq(t, ACT_CREATE);
	ck_assert_int_eq(next(&t), 1);
	ck_assert_int_eq(t, ACT_LIST);
	ck_assert_int_eq(next(&t), 0);
	ck_assert_int_eq(t, ACT_WATCH_CLAIM);
	ck_assert_int_eq(next(&t), -1);
}
END_TEST

START_TEST(test_other_reads_are_not_held_back)
{
	/* A first read (node not known absent), a read of a partition we
	 * are queued for, a held partition that is not parked: all in the
	 * first queue. */
	parts[0].parked = true;
	parts[0].phase = PHASE_HOLDING;
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 0, WINDOW), HELD_SOON);
	parts[1].phase = PHASE_LEADING;
	parts[1].claim_absent = true;
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 1, WINDOW), HELD_SOON);
	parts[2].phase = PHASE_HOLDING;
	parts[2].claim_absent = true;
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 2, WINDOW), HELD_SOON);
}
END_TEST

START_TEST(test_a_partition_keeps_its_order)
{
	enum election_action_type t;

	parked_absent(0);
	parked_absent(1);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 1, WINDOW), HELD_LATER);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 0, WINDOW), HELD_LATER);
	ck_assert_int_eq(ask(ACT_CREATE, 2, WINDOW), HELD_SOON);
	/* p0 is assigned to us: its own steps go in the first queue, and
	 * its second look, asked before them, moves there ahead of them. */
	parts[0].parked = false;
	parts[0].phase = PHASE_CREATING;
	ck_assert_int_eq(ask(ACT_CREATE, 0, WINDOW), HELD_SOON);
	ck_assert_int_eq(next(&t), 2);
	ck_assert_int_eq(next(&t), 0);
	ck_assert_int_eq(t, ACT_WATCH_CLAIM);
	ck_assert_int_eq(next(&t), 0);
	ck_assert_int_eq(t, ACT_CREATE);
	ck_assert_int_eq(next(&t), 1);
	ck_assert_int_eq(t, ACT_WATCH_CLAIM);
	ck_assert_int_eq(next(&t), -1);
}
END_TEST

START_TEST(test_a_request_behind_its_partitions_second_look_waits)
{
	enum election_action_type t;

	parked_absent(0);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 0, WINDOW), HELD_LATER);
	/* The window has room again, but p0's second look is still held:
	 * its next request goes behind it, not out at once. */
	parts[0].parked = false;
	parts[0].phase = PHASE_CREATING;
	ck_assert_int_eq(ask(ACT_CREATE, 0, 0), HELD_SOON);
	ck_assert_int_eq(next(&t), 0);
	ck_assert_int_eq(t, ACT_WATCH_CLAIM);
	ck_assert_int_eq(next(&t), 0);
	ck_assert_int_eq(t, ACT_CREATE);
	/* With nothing held and room, a request goes out at once; with the
	 * window full it waits. */
	ck_assert_int_eq(ask(ACT_LIST, 0, WINDOW - 1), -1);
	ck_assert_int_eq(ask(ACT_LIST, 0, WINDOW), HELD_SOON);
}
END_TEST

START_TEST(test_a_second_look_waits_behind_held_ones)
{
	parked_absent(0);
	parked_absent(1);
	/* Room in the window, but a second look is held already: the next
	 * one waits behind it, in its queue. */
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 0, WINDOW), HELD_LATER);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 1, 0), HELD_LATER);
	/* With nothing held, it goes out at once. */
	held_free(&hq);
	held_init(&hq, NPARTS);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 1, 0), -1);
}
END_TEST

START_TEST(test_the_second_queue_goes_on_after_its_last_moved)
{
	enum election_action_type t;

	parked_absent(0);
	parked_absent(1);
	parked_absent(2);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 1, WINDOW), HELD_LATER);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 0, WINDOW), HELD_LATER);
	/* p0's look, the last in the second queue, moves to the first;
	 * the second queue takes the next look behind p1's. */
	parts[0].parked = false;
	parts[0].phase = PHASE_CREATING;
	ck_assert_int_eq(ask(ACT_CREATE, 0, WINDOW), HELD_SOON);
	ck_assert_int_eq(ask(ACT_WATCH_CLAIM, 2, WINDOW), HELD_LATER);
	ck_assert_int_eq(next(&t), 0);
	ck_assert_int_eq(t, ACT_WATCH_CLAIM);
	ck_assert_int_eq(next(&t), 0);
	ck_assert_int_eq(t, ACT_CREATE);
	ck_assert_int_eq(next(&t), 1);
	ck_assert_int_eq(next(&t), 2);
	ck_assert_int_eq(next(&t), -1);
}
END_TEST

static Suite *
held_suite(void)
{
	Suite *s = suite_create("held");
	TCase *tc = tcase_create("held");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_second_look_goes_last);
	tcase_add_test(tc, test_other_reads_are_not_held_back);
	tcase_add_test(tc, test_a_partition_keeps_its_order);
	tcase_add_test(tc, test_a_request_behind_its_partitions_second_look_waits);
	tcase_add_test(tc, test_a_second_look_waits_behind_held_ones);
	tcase_add_test(tc, test_the_second_queue_goes_on_after_its_last_moved);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(held_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
