/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for notify.c: what a pidfile may hold. A pid is one decimal
 * in 2..INT_MAX; anything else (0, 1, negatives, values past int that wrap
 * to -1 or 1 when cast to pid_t, signs, junk) is refused, so that a bad
 * pidfile can never turn into kill(-1), kill(0) or kill(1). And how a
 * partition's argv is made: "{partition}" replaced anywhere in an element.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "agent.h"
#include "notify.h"

START_TEST(test_good_pids)
{
	static const struct {
		const char	*text;
		pid_t		 pid;
	} good[] = {
		{ "2", 2 }, { "1234\n", 1234 }, { " 42 \n", 42 }, { "42\r\n", 42 },
		{ "\t77\t", 77 }, { "2147483647", INT_MAX }, { "007\n", 7 },
	};
	size_t i;
	pid_t pid;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		pid = -5;
		ck_assert_msg(notify_parse_pid(good[i].text, &pid) == 0,
		    "refused '%s'", good[i].text);
		ck_assert_int_eq(pid, good[i].pid);
	}
}
END_TEST

START_TEST(test_bad_pids)
{
	static const char *const bad[] = {
		"", "\n", "0", "1", "1\n", "-1", "-1234", "+5", "4294967295",
		"4294967297", "2147483648", "99999999999999999999999", "12 34",
		"12abc", "0x10", "1e3", "12\n34\n", "\n12", " ",
	};
	size_t i;
	pid_t pid = 99;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(notify_parse_pid(bad[i], &pid) == -1,
		    "accepted '%s'", bad[i]);
		ck_assert_int_eq(pid, 99);
	}
}
END_TEST

START_TEST(test_argv_part)
{
	static const struct {
		const char	*in;
		const char	*name;
		const char	*out;
	} cases[] = {
		{ "{partition}", "7", "7" },
		{ "--shard={partition}", "eu-west.1", "--shard=eu-west.1" },
		{ "{partition}/{partition}", "ab", "ab/ab" },
		{ "{partition}{partition}", "a_very_long_partition_name",
		    "a_very_long_partition_namea_very_long_partition_name" },
		{ "no key here", "3", "no key here" },
		{ "{partition", "3", "{partition" },
		{ "{PARTITION}", "3", "{PARTITION}" },
		{ "{{partition}}", "3", "{3}" },
		{ "", "3", "" },
	};
	size_t i, k;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char job[] = "/bin/job", in[128];
		char *argv[] = { job, in, NULL };
		char **out;

		snprintf(in, sizeof(in), "%s", cases[i].in);
		out = notify_argv_part(argv, cases[i].name);

		ck_assert_str_eq(out[0], "/bin/job");
		ck_assert_msg(strcmp(out[1], cases[i].out) == 0,
		    "'%s' with %s: got '%s', want '%s'", cases[i].in,
		    cases[i].name, out[1], cases[i].out);
		ck_assert_ptr_null(out[2]);
		for (k = 0; out[k] != NULL; k++)
			free(out[k]);
		free(out);
	}
}
END_TEST

static Suite *
notify_suite(void)
{
	Suite *s = suite_create("notify");
	TCase *tc = tcase_create("pidfile");

	tcase_add_test(tc, test_good_pids);
	tcase_add_test(tc, test_bad_pids);
	suite_add_tcase(s, tc);
	tc = tcase_create("argv");
	tcase_add_test(tc, test_argv_part);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(notify_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
