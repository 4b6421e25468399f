/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for fleet.c's lookups: a watched path or an API's name finds
 * its partition by name (a bsearch over the names, not a scan of every
 * partition), and a name that is only a prefix of one, or longer than one,
 * finds nothing.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

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
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
