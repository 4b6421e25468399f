/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for fleet.c: its lookups (a watched path or an API's name
 * finds its partition by name, a bsearch over the names, not a scan of
 * every partition, and a name that is only a prefix of one, or longer than
 * one, finds nothing), the session's renewal credited to its own send, and
 * a joiner's first assignment made once it knows every partition's leader.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <zookeeper/zookeeper.h>

#include "config.h"
#include "fleet.h"

static void
uuid_fixed(char out[ELECTION_UUID_LEN + 1], void *arg)
{
	(void)arg;
	memset(out, 'a', ELECTION_UUID_LEN);
	out[ELECTION_UUID_LEN] = '\0';
}

static void
fleet_of(struct fleet *f, char **names, int n)
{
	struct config conf;

	memset(&conf, 0, sizeof(conf));
	conf.election_id = (char *)(uintptr_t)"a1";
	conf.election_path = (char *)(uintptr_t)"/zkelect/svc";
	conf.election_candidate = true;
	conf.partitions = names;
	conf.npartitions = n;
	fleet_init(f, &conf, uuid_fixed, NULL);
}

START_TEST(test_part_named_finds_every_name_and_no_other)
{
	static char buf[][8] = { "10", "2", "b", "1", "a", "ab", "100x" };
	const int n = (int)(sizeof(buf) / sizeof(buf[0]));
	char *names[sizeof(buf) / sizeof(buf[0])];
	static const char *absent[] = { "", "0", "3", "100", "aa", "abc",
	    "100xy", "c" };
	struct fleet f;
	struct part *pt;
	int i;

	for (i = 0; i < n; i++)
		names[i] = buf[i];
	fleet_of(&f, names, n);
	for (i = 0; i < n; i++) {
		pt = fleet_part_named(&f, names[i], strlen(names[i]));
		ck_assert_ptr_nonnull(pt);
		ck_assert_str_eq(pt->name, names[i]);
		ck_assert_int_eq(pt->idx, i);
	}
	for (i = 0; i < (int)(sizeof(absent) / sizeof(absent[0])); i++)
		ck_assert_msg(fleet_part_named(&f, absent[i],
		    strlen(absent[i])) == NULL, "'%s' found", absent[i]);
	/* A path's component is not NUL-terminated: LEN bytes count. */
	pt = fleet_part_named(&f, "100xy", 1);
	ck_assert_ptr_nonnull(pt);
	ck_assert_str_eq(pt->name, "1");
	pt = fleet_part_named(&f, "100xy", 4);
	ck_assert_ptr_nonnull(pt);
	ck_assert_str_eq(pt->name, "100x");
	fleet_free(&f);
}
END_TEST

START_TEST(test_part_of_path_takes_the_component_after_the_base)
{
	static char buf[][4] = { "1", "10", "11" };
	char *names[] = { buf[0], buf[1], buf[2] };
	struct fleet f;
	struct part *pt;

	fleet_of(&f, names, 3);
	pt = fleet_part_of_path(&f, "/zkelect/svc/partitions/10/_c_x-latch-"
	    "0000000001");
	ck_assert_ptr_nonnull(pt);
	ck_assert_str_eq(pt->name, "10");
	pt = fleet_part_of_path(&f, "/zkelect/svc/partitions/1");
	ck_assert_ptr_nonnull(pt);
	ck_assert_str_eq(pt->name, "1");
	ck_assert_ptr_null(fleet_part_of_path(&f,
	    "/zkelect/svc/partitions/12/_c_x"));
	ck_assert_ptr_null(fleet_part_of_path(&f, "/zkelect/svc/partitionsX/1"));
	ck_assert_ptr_null(fleet_part_of_path(&f, "/zkelect/other/partitions/1"));
	fleet_free(&f);
}
END_TEST

/* Thousands of names, as partitions.count makes them: each is found. */
START_TEST(test_part_named_at_the_limit)
{
	static char buf[4096][8], *names[4096];
	struct fleet f;
	struct part *pt;
	int i;

	for (i = 0; i < 4096; i++) {
		snprintf(buf[i], sizeof(buf[i]), "%d", i);
		names[i] = buf[i];
	}
	fleet_of(&f, names, 4096);
	for (i = 0; i < 4096; i++) {
		pt = fleet_part_named(&f, buf[i], strlen(buf[i]));
		ck_assert_ptr_nonnull(pt);
		ck_assert_int_eq(pt->idx, i);
	}
	ck_assert_ptr_null(fleet_part_named(&f, "4096", 4));
	fleet_free(&f);
}
END_TEST

/* The session's renewal: T = 6 s, tick_time unknown (X = T/2), so the
 * lease of a sync sent at s is min(born + 5 s, s + 2 s). */
#define SID	((int64_t)0x1000000aa)
#define T0	((uint64_t)100000)

static void
step(struct fleet *f, enum fleet_event_type type, struct election_event ev)
{
	struct fleet_event fev;
	struct fleet_actions out = { 0 };

	memset(&fev, 0, sizeof(fev));
	fev.type = type;
	fev.part = -1;
	fev.ev = ev;
	fleet_step(f, &fev, &out);
	fleet_actions_free(&out);
}

static void
session(struct fleet *f, enum election_session st, int64_t sid, uint64_t now)
{
	step(f, FEV_SESSION, (struct election_event){ .type = EV_SESSION,
	    .session = st, .session_id = sid, .timeout_ms = 6000, .now = now,
	    .sent = T0 - 10 });
}

/* When the ring's request sent at s was answered (0: not yet); fails if
 * the ring has no such request. */
static uint64_t
acked_at(const struct lease_ring *r, uint64_t s)
{
	int i;

	for (i = 0; i < r->n; i++)
		if (r->sent[i] == s)
			return r->acked[i];
	ck_abort_msg("no request sent at %llu in the ring",
	    (unsigned long long)s);
	return 0;
}

/* A tick; whether it sent the session's renewal. */
static bool
tick_renews(struct fleet *f, uint64_t now)
{
	struct fleet_event fev;
	struct fleet_actions out = { 0 };
	bool renewed = false;
	int i;

	memset(&fev, 0, sizeof(fev));
	fev.type = FEV_TICK;
	fev.part = -1;
	fev.ev.type = EV_TICK;
	fev.ev.now = now;
	fleet_step(f, &fev, &out);
	for (i = 0; i < out.n; i++)
		renewed |= out.a[i].type == FACT_SESSION_RENEW;
	fleet_actions_free(&out);
	return renewed;
}

/*
 * A renewal asked for after the client lost its connection, before the loop
 * heard of it, waits in the client and goes out after the reconnect, ahead
 * of the one sent since. Its answer comes first and earns what its own send
 * time allows, not what the later send's would: the loop may hear of the
 * reconnect late (a stall), and the later time overstates the lease by as
 * much.
 */
START_TEST(test_session_renewal_queued_over_a_reconnect_keeps_its_send_time)
{
	static char buf[][2] = { "0" };
	char *names[] = { buf[0] };
	struct fleet f;
	uint64_t t1 = T0 + 100, lost = t1 + 2, back = lost + 400, want;

	fleet_of(&f, names, 1);
	session(&f, SESSION_CONNECTED, SID, T0);
	/* A member leading a partition: the renewal is wanted. */
	snprintf(f.member_node, sizeof(f.member_node), "m-0000000001");
	f.nleading = 1;
	ck_assert(tick_renews(&f, t1));
	session(&f, SESSION_CONNECTING, 0, lost);
	session(&f, SESSION_CONNECTED, SID, back);
	ck_assert(tick_renews(&f, back));
	want = election_lease_for(&f.parts[0].e, t1);
	ck_assert_uint_eq(want, t1 + 2000);
	ck_assert_uint_lt(want, election_lease_for(&f.parts[0].e, back));
	step(&f, FEV_SESSION_RENEWED, (struct election_event){
	    .type = EV_SESSION_RENEWED, .rc = ZOK, .sent = t1, .now = back + 4 });
	ck_assert_uint_eq(f.session_lease, want);
	ck_assert(f.srenew_inflight);		/* the later one is still out */
	/* ... and unanswered in the ring that anchors later leases. */
	ck_assert_uint_eq(acked_at(&f.ring, back), 0);
	step(&f, FEV_SESSION_RENEWED, (struct election_event){
	    .type = EV_SESSION_RENEWED, .rc = ZOK, .sent = back,
	    .now = back + 8 });
	ck_assert(!f.srenew_inflight);
	ck_assert_uint_eq(acked_at(&f.ring, back), back + 8);
	ck_assert_uint_eq(f.session_lease, back + 2000);
	ck_assert_uint_eq(f.srenewals, 1);	/* one round trip timed */
	fleet_free(&f);
}
END_TEST

/* Steps ev (of part, or -1), then flushes as zk.c does after a batch; how
 * many creates of a partition's node that asked for. */
static int
step_flush(struct fleet *f, enum fleet_event_type type, int part,
    struct election_event ev)
{
	struct fleet_event fev;
	struct fleet_actions out = { 0 };
	int i, creates = 0;

	memset(&fev, 0, sizeof(fev));
	fev.type = type;
	fev.part = part;
	fev.ev = ev;
	fleet_step(f, &fev, &out);
	fleet_flush(f, ev.now, &out);
	for (i = 0; i < out.n; i++)
		creates += out.a[i].type == FACT_ELECTION &&
		    out.a[i].a.type == ACT_CREATE;
	fleet_actions_free(&out);
	return creates;
}

static int
assigned_count(const struct fleet *f)
{
	int i, n = 0;

	for (i = 0; i < f->nparts; i++)
		n += f->parts[i].assigned;
	return n;
}

/* We join a fleet where b1 has stood alone for a minute: our node is made
 * and the members are read (b1's node old, ours new, by their ctimes). */
static void
join_standing(struct fleet *f, uint64_t now)
{
	static char m1[] = "m-0000000001", m2[] = "m-0000000002";
	char *const listing[] = { m1, m2 };

	step_flush(f, FEV_MEMBER_CREATED, -1, (struct election_event){
	    .rc = ZOK, .name = "/zkelect/svc/members/m-0000000002",
	    .owner = SID, .now = now });
	step_flush(f, FEV_MEMBERS, -1, (struct election_event){ .rc = ZOK,
	    .names = listing, .count = 2, .gen = f->member_gen, .now = now });
	step_flush(f, FEV_MEMBER_DATA, -1, (struct election_event){ .rc = ZOK,
	    .name = m1, .data = "b1", .datalen = 2, .owner = SID + 1,
	    .ctime = 1000, .gen = f->member_gen, .now = now });
	step_flush(f, FEV_MEMBER_DATA, -1, (struct election_event){ .rc = ZOK,
	    .name = m2, .data = "a1", .datalen = 2, .owner = SID,
	    .ctime = 61000, .gen = f->member_gen, .now = now });
}

/* Part i's first read of its claim: b1 leads it. */
static int
claim_read(struct fleet *f, int i, uint64_t now)
{
	return step_flush(f, FEV_ELECTION, i, (struct election_event){
	    .type = EV_CLAIM_DATA, .rc = ZOK, .data = "b1", .datalen = 2,
	    .zxid = 500 + i, .pzxid = 400, .gen = f->parts[i].e.gen,
	    .now = now });
}

/*
 * A joiner assigns only once it knows who leads each partition: b1 leads
 * all four, keeps two (the assignment keeps a partition with its leader,
 * up to the leader's quota) and gives us two. Had we assigned before the
 * reads were in, we would have queued in partitions chosen without their
 * leaders, not those b1 gives up (at 8 x 4,096: 1,149 queued, 637 left).
 */
START_TEST(test_a_joiner_assigns_once_it_knows_the_leaders)
{
	static char buf[][2] = { "0", "1", "2", "3" };
	char *names[] = { buf[0], buf[1], buf[2], buf[3] };
	struct fleet f;
	uint64_t now = T0 + 10;
	int i, creates = 0;

	fleet_of(&f, names, 4);
	session(&f, SESSION_CONNECTED, SID, T0);
	join_standing(&f, now);
	ck_assert_int_eq(f.nmembers, 2);
	ck_assert_int_eq(assigned_count(&f), 0);
	for (i = 0; i < 3; i++)
		creates += claim_read(&f, i, now + 1 + i);
	ck_assert_int_eq(creates, 0);
	ck_assert_int_eq(assigned_count(&f), 0);
	creates += claim_read(&f, 3, now + 5);
	ck_assert_int_eq(assigned_count(&f), 2);
	ck_assert_int_eq(creates, 2);
	fleet_free(&f);
}
END_TEST

/* A read that finds no claim node counts as read too: no leader to keep. */
START_TEST(test_a_joiner_counts_a_claim_found_absent_as_read)
{
	static char buf[][2] = { "0", "1", "2", "3" };
	char *names[] = { buf[0], buf[1], buf[2], buf[3] };
	struct fleet f;
	uint64_t now = T0 + 10;
	int i;

	fleet_of(&f, names, 4);
	session(&f, SESSION_CONNECTED, SID, T0);
	join_standing(&f, now);
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(assigned_count(&f), 0);
		(void)step_flush(&f, FEV_ELECTION, i, (struct election_event){
		    .type = EV_CLAIM_DATA, .rc = ZNONODE,
		    .gen = f.parts[i].e.gen, .now = now + 1 + i });
	}
	ck_assert_int_eq(assigned_count(&f), 2);
	fleet_free(&f);
}
END_TEST

/* ... but it does not wait longer than T/2 from its node's creation. */
START_TEST(test_a_joiner_waits_for_the_leaders_at_most_half_t)
{
	static char buf[][2] = { "0", "1", "2", "3" };
	char *names[] = { buf[0], buf[1], buf[2], buf[3] };
	struct fleet f;
	uint64_t now = T0 + 10;

	fleet_of(&f, names, 4);
	session(&f, SESSION_CONNECTED, SID, T0);
	join_standing(&f, now);
	(void)claim_read(&f, 0, now + 1);
	ck_assert_uint_eq(fleet_next_tick(&f), now + 3000);
	(void)tick_renews(&f, now + 2999);
	ck_assert_int_eq(assigned_count(&f), 0);
	(void)tick_renews(&f, now + 3000);
	ck_assert_int_eq(assigned_count(&f), 2);
	fleet_free(&f);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("fleet");
	TCase *tc = tcase_create("lookup");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_part_named_finds_every_name_and_no_other);
	tcase_add_test(tc, test_part_of_path_takes_the_component_after_the_base);
	tcase_add_test(tc, test_part_named_at_the_limit);
	suite_add_tcase(s, tc);
	tc = tcase_create("renewal");
	tcase_add_test(tc,
	    test_session_renewal_queued_over_a_reconnect_keeps_its_send_time);
	suite_add_tcase(s, tc);
	tc = tcase_create("join");
	tcase_add_test(tc, test_a_joiner_assigns_once_it_knows_the_leaders);
	tcase_add_test(tc, test_a_joiner_counts_a_claim_found_absent_as_read);
	tcase_add_test(tc, test_a_joiner_waits_for_the_leaders_at_most_half_t);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
