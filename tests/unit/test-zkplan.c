/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for zkplan.c: each election action gives the ZooKeeper calls
 * that zk.c sends and the simulator models (which call, on which path,
 * with what data, watch and multi ops, and what answers the request).
 */
#include <stdio.h>
#include <string.h>

#include <check.h>

#include "zkplan.h"

#define PATH	"/svc/db/leader"
#define PREFIX	PATH "/_c_"
#define UUID	"0f8fad5b-d9cb-469f-a165-70867728950e"
#define NODE	"_c_" UUID "-latch-0000000004"
#define SUCC	"_c_aaaa-latch-0000000007"

static struct election_action
action(enum election_action_type type, const char *name)
{
	struct election_action a;

	memset(&a, 0, sizeof(a));
	a.type = type;
	snprintf(a.name, sizeof(a.name), "%s", name);
	return a;
}

static struct zkplan
build(const struct election_action *a)
{
	struct zkplan p;

	ck_assert_int_eq(zkplan_build(a, PATH, PREFIX, UUID, &p), 0);
	return p;
}

/* One call that answers, on path, with watch w. */
static void
assert_one(const struct zkplan *p, enum zkplan_for what,
    enum zkplan_call_type type, const char *path, enum zkplan_watch w)
{
	ck_assert_int_eq(p->what, what);
	ck_assert_int_eq(p->ncalls, 1);
	ck_assert_int_eq(zkplan_answers(p), 1);
	ck_assert_int_eq(p->calls[0].type, type);
	ck_assert_str_eq(p->calls[0].path, path);
	ck_assert_int_eq(p->calls[0].watch, w);
	ck_assert(p->calls[0].answers);
	ck_assert(!p->calls[0].parents);
	if (type != ZKC_MULTI)
		ck_assert_int_eq(p->calls[0].nitems, 0);
}

static void
assert_item(const struct zkplan_item *it, enum zkplan_item_type type,
    const char *path, const char *data)
{
	ck_assert_int_eq(it->type, type);
	ck_assert_str_eq(it->path, path);
	ck_assert_int_eq(it->version, -1);
	if (data == NULL)
		ck_assert_ptr_null(it->data);
	else {
		ck_assert_int_eq(it->datalen, (int)strlen(data));
		ck_assert(memcmp(it->data, data, strlen(data)) == 0);
	}
}

START_TEST(test_create_parent)
{
	struct election_action a = action(ACT_CREATE_PARENT, "");
	struct zkplan p = build(&a);

	ck_assert_int_eq(p.what, ZKF_PARENT);
	ck_assert_str_eq(p.name, "");
	ck_assert_int_eq(p.ncalls, 1);
	ck_assert_int_eq(p.calls[0].type, ZKC_CREATE);
	ck_assert_str_eq(p.calls[0].path, PATH);
	ck_assert(p.calls[0].parents);
	ck_assert(p.calls[0].answers);
	ck_assert_int_eq(p.calls[0].datalen, 0);
}
END_TEST

START_TEST(test_create)
{
	struct election_action a = action(ACT_CREATE, "");
	struct zkplan p;

	a.data = "a1\nvalue";
	a.datalen = 8;
	p = build(&a);
	assert_one(&p, ZKF_CREATE, ZKC_CREATE_SEQ,
	    PREFIX UUID "-latch-", ZKW_NONE);
	ck_assert_str_eq(p.name, "");
	ck_assert_ptr_eq(p.calls[0].data, a.data);
	ck_assert_int_eq(p.calls[0].datalen, 8);
}
END_TEST

START_TEST(test_list)
{
	struct election_action a = action(ACT_LIST, "");
	struct zkplan p = build(&a);

	assert_one(&p, ZKF_LIST, ZKC_CHILDREN, PATH, ZKW_NONE);

	/* Authoritative: a sync first, whose reply the listing repeats. */
	a.sync = true;
	p = build(&a);
	ck_assert_int_eq(p.what, ZKF_LIST);
	ck_assert_int_eq(p.ncalls, 2);
	ck_assert_int_eq(zkplan_answers(&p), 1);
	ck_assert_int_eq(p.calls[0].type, ZKC_SYNC);
	ck_assert_str_eq(p.calls[0].path, PATH);
	ck_assert(!p.calls[0].answers);
	ck_assert_int_eq(p.calls[1].type, ZKC_CHILDREN);
	ck_assert_str_eq(p.calls[1].path, PATH);
	ck_assert(p.calls[1].answers);
	ck_assert_int_eq(p.calls[1].watch, ZKW_NONE);
}
END_TEST

START_TEST(test_watch_children)
{
	struct election_action a = action(ACT_WATCH_CHILDREN, "");
	struct zkplan p = build(&a);

	assert_one(&p, ZKF_LIST, ZKC_CHILDREN, PATH, ZKW_CHILDREN);
}
END_TEST

START_TEST(test_node_reads)
{
	/* Rule 5: watches on contender nodes are left by getData. */
	static const struct {
		enum election_action_type type;
		enum zkplan_for what;
		enum zkplan_call_type call;
		enum zkplan_watch watch;
	} cases[] = {
		{ ACT_WATCH_PRED, ZKF_PRED_SET, ZKC_GET, ZKW_PRED },
		{ ACT_WATCH_SELF, ZKF_SELF_SET, ZKC_GET, ZKW_SELF },
		{ ACT_GET_OWNER, ZKF_OWNER, ZKC_EXISTS, ZKW_NONE },
		{ ACT_CHECK_AHEAD, ZKF_AHEAD, ZKC_EXISTS, ZKW_NONE },
		{ ACT_READ_SUCCESSOR, ZKF_SUCCESSOR, ZKC_GET, ZKW_NONE },
	};
	struct election_action a;
	struct zkplan p;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		a = action(cases[i].type, NODE);
		p = build(&a);
		assert_one(&p, cases[i].what, cases[i].call, PATH "/" NODE,
		    cases[i].watch);
		ck_assert_str_eq(p.name, NODE);
	}
}
END_TEST

START_TEST(test_claim_reads)
{
	struct election_action a = action(ACT_READ_CLAIM, "");
	struct zkplan p = build(&a);

	assert_one(&p, ZKF_CLAIM_DATA, ZKC_GET, PATH, ZKW_NONE);
	a = action(ACT_WATCH_CLAIM, "");
	p = build(&a);
	assert_one(&p, ZKF_CLAIM_DATA, ZKC_GET, PATH, ZKW_CLAIM);
}
END_TEST

START_TEST(test_claim)
{
	struct election_action a = action(ACT_CLAIM, NODE);
	struct zkplan p;

	a.data = "a1";
	a.datalen = 2;
	p = build(&a);
	assert_one(&p, ZKF_CLAIM, ZKC_MULTI, PATH, ZKW_NONE);
	ck_assert_str_eq(p.name, NODE);
	ck_assert_int_eq(p.calls[0].nitems, 2);
	assert_item(&p.calls[0].items[0], ZKI_CHECK, PATH "/" NODE, NULL);
	assert_item(&p.calls[0].items[1], ZKI_SET, PATH, "a1");
}
END_TEST

START_TEST(test_release)
{
	struct election_action a = action(ACT_RELEASE, NODE);
	struct zkplan p = build(&a);

	/* A contender that did not lead: its node goes, nothing else. */
	assert_one(&p, ZKF_RELEASE, ZKC_MULTI, PATH, ZKW_NONE);
	ck_assert_str_eq(p.name, NODE);
	ck_assert_int_eq(p.calls[0].nitems, 1);
	assert_item(&p.calls[0].items[0], ZKI_DELETE, PATH "/" NODE, NULL);

	/* A leader with nobody after it: says nobody leads. */
	a.write_claim = true;
	a.data = "";
	a.datalen = 0;
	p = build(&a);
	ck_assert_int_eq(p.calls[0].nitems, 2);
	assert_item(&p.calls[0].items[0], ZKI_DELETE, PATH "/" NODE, NULL);
	assert_item(&p.calls[0].items[1], ZKI_SET, PATH, "");

	/* A leader naming its successor, whose node must still exist. */
	snprintf(a.successor, sizeof(a.successor), "%s", SUCC);
	a.data = "b2";
	a.datalen = 2;
	p = build(&a);
	ck_assert_int_eq(p.calls[0].nitems, 3);
	assert_item(&p.calls[0].items[0], ZKI_CHECK, PATH "/" SUCC, NULL);
	assert_item(&p.calls[0].items[1], ZKI_DELETE, PATH "/" NODE, NULL);
	assert_item(&p.calls[0].items[2], ZKI_SET, PATH, "b2");
}
END_TEST

START_TEST(test_renew)
{
	struct election_action a = action(ACT_RENEW, NODE);
	struct zkplan p = build(&a);
	int i;

	/* sync, exists our node, get the election node: all three answer. */
	ck_assert_int_eq(p.what, ZKF_RENEW);
	ck_assert_str_eq(p.name, NODE);
	ck_assert_int_eq(p.ncalls, 3);
	ck_assert_int_eq(zkplan_answers(&p), 3);
	ck_assert_int_eq(p.calls[0].type, ZKC_SYNC);
	ck_assert_str_eq(p.calls[0].path, PATH);
	ck_assert_int_eq(p.calls[1].type, ZKC_EXISTS);
	ck_assert_str_eq(p.calls[1].path, PATH "/" NODE);
	ck_assert_int_eq(p.calls[2].type, ZKC_GET);
	ck_assert_str_eq(p.calls[2].path, PATH);
	for (i = 0; i < 3; i++) {
		ck_assert(p.calls[i].answers);
		ck_assert_int_eq(p.calls[i].watch, ZKW_NONE);
	}
}
END_TEST

START_TEST(test_local_actions)
{
	static const enum election_action_type types[] = {
		ACT_KICK, ACT_NEW_SESSION, ACT_NOTIFY, ACT_EXIT,
	};
	struct election_action a;
	struct zkplan p;
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		a = action(types[i], "observer");
		p = build(&a);
		ck_assert_int_eq(p.what, ZKF_NONE);
		ck_assert_int_eq(p.ncalls, 0);
	}
}
END_TEST

START_TEST(test_path_too_long)
{
	char path[CONFIG_ZK_PATH_MAX], prefix[CONFIG_ZK_PATH_MAX + 4];
	struct election_action a = action(ACT_WATCH_PRED, NODE);
	struct zkplan p;

	/* Never sent cut short; the request is still named, to fail it. */
	memset(path, 'x', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	ck_assert_int_eq(zkplan_build(&a, path, "/p/_c_", UUID, &p), -1);
	ck_assert_int_eq(p.what, ZKF_PRED_SET);
	ck_assert_str_eq(p.name, NODE);
	a = action(ACT_RENEW, NODE);
	ck_assert_int_eq(zkplan_build(&a, path, "/p/_c_", UUID, &p), -1);
	ck_assert_int_eq(p.what, ZKF_RENEW);
	a = action(ACT_RELEASE, NODE);
	snprintf(a.successor, sizeof(a.successor), "%s", SUCC);
	ck_assert_int_eq(zkplan_build(&a, path, "/p/_c_", UUID, &p), -1);
	ck_assert_int_eq(p.what, ZKF_RELEASE);
	snprintf(prefix, sizeof(prefix), "%s/_c_", path);
	a = action(ACT_CREATE, "");
	ck_assert_int_eq(zkplan_build(&a, PATH, prefix, UUID, &p), -1);
	ck_assert_int_eq(p.what, ZKF_CREATE);
}
END_TEST

/*
 * The fleet's member plans (partitions). The listing is made after a sync
 * (rule 6; issue 30: without it, a create whose reply was lost and a
 * reconnect to a lagging server could leave a member nobody runs, or hide
 * ours); our node is made after the members' and partitions' nodes, with
 * our data; the renewal is a sync then our member node.
 */
START_TEST(test_member_plans)
{
	static const char data[] = "w1\0parts=count:8";
	struct fleet_action fa;
	struct zkplan p;

	memset(&fa, 0, sizeof(fa));
	fa.type = FACT_MEMBERS_LIST;
	ck_assert_int_eq(zkplan_member(&fa, "/s/members", "/s/partitions", data,
	    (int)sizeof(data) - 1, &p), 0);
	ck_assert_int_eq(p.what, ZKF_MEMBERS);
	ck_assert_int_eq(p.ncalls, 2);
	ck_assert_int_eq(p.calls[0].type, ZKC_SYNC);
	ck_assert(!p.calls[0].answers);
	ck_assert_int_eq(p.calls[1].type, ZKC_CHILDREN);
	ck_assert_int_eq(p.calls[1].watch, ZKW_MEMBERS);
	ck_assert_str_eq(p.calls[1].path, "/s/members");

	fa.type = FACT_MEMBER_CREATE;
	ck_assert_int_eq(zkplan_member(&fa, "/s/members", "/s/partitions", data,
	    (int)sizeof(data) - 1, &p), 0);
	ck_assert_int_eq(p.what, ZKF_MEMBER_CREATE);
	ck_assert_int_eq(zkplan_answers(&p), 1);
	ck_assert_int_eq(p.calls[0].type, ZKC_CREATE);
	ck_assert(p.calls[0].parents && !p.calls[0].answers);
	ck_assert_str_eq(p.calls[1].path, "/s/partitions");
	ck_assert_int_eq(p.calls[2].type, ZKC_CREATE_SEQ);
	ck_assert_str_eq(p.calls[2].path, "/s/members/m-");
	ck_assert_int_eq(p.calls[2].datalen, (int)sizeof(data) - 1);
	ck_assert_int_eq(memcmp(p.calls[2].data, data, sizeof(data) - 1), 0);

	fa.type = FACT_SESSION_RENEW;
	snprintf(fa.name, sizeof(fa.name), "m-0000000003");
	ck_assert_int_eq(zkplan_member(&fa, "/s/members", "/s/partitions", data,
	    (int)sizeof(data) - 1, &p), 0);
	ck_assert_int_eq(p.what, ZKF_SESSION_RENEW);
	ck_assert_int_eq(zkplan_answers(&p), 1);
	ck_assert_int_eq(p.ncalls, 1);
	ck_assert_int_eq(p.calls[0].type, ZKC_SYNC);
	ck_assert_str_eq(p.calls[0].path, "/s/members");

	fa.type = FACT_MEMBER_DELETE;
	ck_assert_int_eq(zkplan_member(&fa, "/s/members", "/s/partitions", data,
	    (int)sizeof(data) - 1, &p), 0);
	ck_assert_int_eq(p.what, ZKF_MEMBER_DELETE);
	ck_assert_int_eq(p.calls[0].type, ZKC_DELETE);
}
END_TEST

static Suite *
zkplan_suite(void)
{
	Suite *s = suite_create("zkplan");
	TCase *tc = tcase_create("zkplan");

	tcase_add_test(tc, test_create_parent);
	tcase_add_test(tc, test_member_plans);
	tcase_add_test(tc, test_create);
	tcase_add_test(tc, test_list);
	tcase_add_test(tc, test_watch_children);
	tcase_add_test(tc, test_node_reads);
	tcase_add_test(tc, test_claim_reads);
	tcase_add_test(tc, test_claim);
	tcase_add_test(tc, test_release);
	tcase_add_test(tc, test_renew);
	tcase_add_test(tc, test_local_actions);
	tcase_add_test(tc, test_path_too_long);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(zkplan_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
