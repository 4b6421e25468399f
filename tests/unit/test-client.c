/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ctl/client.c's JSON reading: a member of an object itself
 * (never of an object nested in it), in any spacing, past strings that
 * hold quotes, braces and commas; the elements of an array one by one;
 * and nothing (not a crash) from JSON cut short.
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "client.h"

static const char *entry =
    "{\"name\":\"7\",\"leader\":{\"id\":\"a\\\"{,}\",\"epoch\":5},"
    "\"epoch\":9,\"is_leader\":true,\"lease_remaining_ms\":1200}";

START_TEST(test_member_is_the_objects_own)
{
	char buf[64];

	ck_assert_int_eq(client_json_member(entry, "epoch", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "9");
	ck_assert_int_eq(client_json_member(entry, "name", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "7");
	ck_assert_int_eq(client_json_member(entry, "is_leader", buf,
	    sizeof(buf)), 0);
	ck_assert_str_eq(buf, "true");
	ck_assert_int_eq(client_json_member(entry, "leader", buf, sizeof(buf)),
	    0);
	ck_assert_str_eq(buf, "{\"id\":\"a\\\"{,}\",\"epoch\":5}");
	ck_assert_int_eq(client_json_member(buf, "epoch", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "5");
	/* "id" is only in the nested object. */
	ck_assert_int_eq(client_json_member(entry, "id", buf, sizeof(buf)), -1);
	ck_assert_int_eq(client_json_member(entry, "epo", buf, sizeof(buf)), -1);
}
END_TEST

START_TEST(test_member_with_spaces_and_truncation)
{
	const char *doc = " { \"a\" : [1, {\"b\": 2}] ,\n \"b\" : \"xyz\" } ";
	char buf[3];
	char big[64];

	ck_assert_int_eq(client_json_member(doc, "a", big, sizeof(big)), 0);
	ck_assert_str_eq(big, "[1, {\"b\": 2}]");
	ck_assert_int_eq(client_json_member(doc, "b", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "xy");
}
END_TEST

START_TEST(test_array_elements)
{
	const char *doc = "{\"id\":\"x\",\"partitions\": [ {\"name\":\"0\"} , "
	    "{\"name\":\"]\"},{\"name\":\"2\",\"leader\":null} ],\"index\":3}";
	const char *cur;
	char *e, name[16];
	int n = 0;

	cur = client_json_items(doc, "partitions");
	ck_assert_ptr_nonnull(cur);
	while ((e = client_json_next(&cur)) != NULL) {
		ck_assert_int_eq(client_json_member(e, "name", name,
		    sizeof(name)), 0);
		ck_assert_str_eq(name, n == 0 ? "0" : n == 1 ? "]" : "2");
		free(e);
		n++;
	}
	ck_assert_int_eq(n, 3);
	ck_assert_ptr_null(client_json_items(doc, "id"));
	ck_assert_ptr_null(client_json_items(doc, "none"));
	cur = client_json_items("{\"p\":[]}", "p");
	ck_assert_ptr_null(client_json_next(&cur));
}
END_TEST

START_TEST(test_cut_short)
{
	const char *bad[] = { "", "{", "{\"a\"", "{\"a\":", "{\"a\":\"x",
	    "{\"a\":{\"b\":1", "{\"a\":1,", "[1]", "{\"p\":[{\"a\":1}" };
	const char *cur;
	char buf[16], *e;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(client_json_member(bad[i], "b", buf,
		    sizeof(buf)), -1);
		cur = client_json_items(bad[i], "p");
		while ((e = client_json_next(&cur)) != NULL)
			free(e);
	}
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("json");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_member_is_the_objects_own);
	tcase_add_test(tc, test_member_with_spaces_and_truncation);
	tcase_add_test(tc, test_array_elements);
	tcase_add_test(tc, test_cut_short);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
