/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for http.c and the JSON strings of api.c: request heads are
 * accepted or refused with the status a client should get (folded lines,
 * conflicting Content-Length, HEAD, HTTP/1.0 keep-alive), a request reads
 * the same however it is cut into writes and however many are pipelined,
 * and every string the API writes is valid JSON in valid UTF-8.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <event2/buffer.h>

#include "agent.h"
#include "api.h"
#include "http.h"

/* Parses a head (a copy of text); returns the code. */
static int
parse(const char *text, struct http_request *req, char **copy, const char **error)
{
	*copy = strdup(text);
	ck_assert_ptr_nonnull(*copy);
	return http_parse_head(*copy, req, error);
}

static const struct {
	const char	*head;
	int		 code;
	const char	*error;		/* a part of the message, or NULL */
} heads[] = {
	{ "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n", 0, NULL },
	{ "HEAD /v1/status HTTP/1.1\r\n\r\n", 0, NULL },
	{ "GET /v1/status HTTP/1.1\r\nX-A: a\r\n b: c\r\n\r\n", 400, "folded" },
	{ "GET /v1/status HTTP/1.1\r\nX-A: a\r\n\tb\r\n\r\n", 400, "folded" },
	{ "POST /v1/resign HTTP/1.1\r\nContent-Length: 0\r\n"
	  "Content-Length: 5\r\n\r\n", 400, "conflicting Content-Length" },
	{ "POST /v1/resign HTTP/1.1\r\nContent-Length: 2\r\n"
	  "content-length: 2 \r\n\r\n", 0, NULL },
	{ "POST /v1/resign HTTP/1.1\r\nContent-Length: 2x\r\n\r\n", 400, NULL },
	{ "POST /v1/resign HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, NULL },
	{ "POST /v1/resign HTTP/1.1\r\nContent-Length: "
	  "99999999999999999999999\r\n\r\n", 400, NULL },
	{ "POST /v1/resign HTTP/1.1\r\nContent-Length: 1025\r\n\r\n", 413, NULL },
	{ "POST /v1/resign HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501, NULL },
	{ "GET /v1/status HTTP/1.1\r\nHost : x\r\n\r\n", 400, NULL },
	{ "GET /v1/status HTTP/1.1\r\nHost\r\n\r\n", 400, NULL },
	{ "GET /v1/status HTTP/1.1\r\nA: b\nC: d\r\n\r\n", 400, NULL },
	{ "GET /v1/status HTTP/2.0\r\n\r\n", 400, NULL },
	{ "GET  /v1/status HTTP/1.1\r\n\r\n", 400, NULL },
	{ "GET v1/status HTTP/1.1\r\n\r\n", 400, NULL },
	{ "GET /v1/st atus HTTP/1.1\r\n\r\n", 400, NULL },
};

START_TEST(test_head)
{
	struct http_request req;
	const char *error;
	char *copy;
	int code;

	code = parse(heads[_i].head, &req, &copy, &error);
	ck_assert_msg(code == heads[_i].code, "%s: got %d, want %d",
	    heads[_i].head, code, heads[_i].code);
	if (heads[_i].error != NULL)
		ck_assert_msg(strstr(error, heads[_i].error) != NULL,
		    "%s: message '%s'", heads[_i].head, error);
	free(copy);
}
END_TEST

START_TEST(test_keepalive)
{
	static const struct {
		const char	*head;
		bool		 keepalive, http10, head_req;
	} t[] = {
		{ "GET / HTTP/1.1\r\n\r\n", true, false, false },
		{ "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", false, false, false },
		{ "GET / HTTP/1.0\r\n\r\n", false, true, false },
		{ "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true, true, false },
		{ "HEAD / HTTP/1.1\r\n\r\n", true, false, true },
	};
	struct http_request req;
	const char *error;
	char *copy;
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(*t); i++) {
		ck_assert_int_eq(parse(t[i].head, &req, &copy, &error), 0);
		ck_assert_msg(req.keepalive == t[i].keepalive, "%s", t[i].head);
		ck_assert(req.http10 == t[i].http10);
		ck_assert(req.head == t[i].head_req);
		free(copy);
	}
}
END_TEST

START_TEST(test_query)
{
	struct http_request req;
	const char *error;
	char *copy, *v;

	ck_assert_int_eq(parse("GET /v1/status?wait=30s&index=4 HTTP/1.1\r\n\r\n",
	    &req, &copy, &error), 0);
	ck_assert_str_eq(req.target, "/v1/status");
	v = http_query_get(req.query, "wait");
	ck_assert_str_eq(v, "30s");
	free(v);
	v = http_query_get(req.query, "index");
	ck_assert_str_eq(v, "4");
	free(v);
	ck_assert_ptr_null(http_query_get(req.query, "hold"));
	free(copy);
}
END_TEST

/* Every request found in text, fed whole, as "code:used " items. */
static void
frame_all(const char *text, size_t len, char *out, size_t outlen)
{
	char head[HTTP_MAX_HEADER + 1];
	struct http_request req;
	const char *error;
	size_t off = 0, used;
	int code;

	out[0] = '\0';
	for (;;) {
		code = http_next_request(text + off, len - off, head, &req, &used,
		    &error);
		snprintf(out + strlen(out), outlen - strlen(out), "%d:%zu ", code, used);
		if (code != 0)
			break;
		off += used;
	}
}

START_TEST(test_body_in_a_later_write)
{
	static const char req1[] = "POST /v1/resign HTTP/1.1\r\nContent-Length: 2\r\n\r\n";
	char head[HTTP_MAX_HEADER + 1], buf[256];
	struct http_request req;
	const char *error;
	size_t used;

	snprintf(buf, sizeof(buf), "%s", req1);
	ck_assert_int_eq(http_next_request(buf, strlen(buf), head, &req, &used,
	    &error), HTTP_INCOMPLETE);
	strcat(buf, "{");
	ck_assert_int_eq(http_next_request(buf, strlen(buf), head, &req, &used,
	    &error), HTTP_INCOMPLETE);
	strcat(buf, "}GET");
	ck_assert_int_eq(http_next_request(buf, strlen(buf), head, &req, &used,
	    &error), 0);
	ck_assert_uint_eq(used, strlen(req1) + 2);
	ck_assert_str_eq(req.method, "POST");
	ck_assert_uint_eq(req.content_length, 2);
}
END_TEST

START_TEST(test_pipelined_and_split)
{
	static const char text[] =
	    "GET /v1/status HTTP/1.1\r\n\r\n"
	    "\r\n"
	    "POST /v1/resign?hold=1s HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
	    "HEAD /v1/health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
	    "GET /metrics HTTP/1.1\r\nX: a\r\n b\r\n\r\n"
	    "GET /never HTTP/1.1\r\n\r\n";
	char whole[512], split[512], buf[sizeof(text)];
	char head[HTTP_MAX_HEADER + 1];
	struct http_request req;
	const char *error;
	size_t len = sizeof(text) - 1, have, off, used, step;
	int code;

	frame_all(text, len, whole, sizeof(whole));
	ck_assert_str_eq(whole, "0:27 0:60 0:52 400:0 ");
	/* Any cut into writes gives the same requests. */
	for (step = 1; step <= 17; step++) {
		split[0] = '\0';
		have = 0;
		off = 0;
		for (;;) {
			code = http_next_request(buf + off, have - off, head, &req,
			    &used, &error);
			if (code == HTTP_INCOMPLETE && have < len) {
				memcpy(buf + have, text + have,
				    have + step > len ? len - have : step);
				have = have + step > len ? len : have + step;
				continue;
			}
			snprintf(split + strlen(split), sizeof(split) - strlen(split),
			    "%d:%zu ", code, used);
			if (code != 0)
				break;
			off += used;
		}
		ck_assert_str_eq(split, whole);
	}
}
END_TEST

START_TEST(test_header_too_large)
{
	char *buf, head[HTTP_MAX_HEADER + 1];
	struct http_request req;
	const char *error;
	size_t used;

	buf = malloc(HTTP_MAX_HEADER + 100);
	ck_assert_ptr_nonnull(buf);
	memset(buf, 'a', HTTP_MAX_HEADER + 100);
	memcpy(buf, "GET / HTTP/1.1\r\nX: ", 19);
	ck_assert_int_eq(http_next_request(buf, HTTP_MAX_HEADER - 1, head, &req,
	    &used, &error), HTTP_INCOMPLETE);
	ck_assert_int_eq(http_next_request(buf, HTTP_MAX_HEADER + 100, head, &req,
	    &used, &error), 431);
	memcpy(buf + 40, "\r\n\r\n", 4);
	buf[30] = '\0';
	ck_assert_int_eq(http_next_request(buf, 44, head, &req, &used, &error), 400);
	free(buf);
}
END_TEST

/* api_json_string(s) as a C string. */
static char *
json(const char *s)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *out;

	api_json_string(b, s);
	n = evbuffer_get_length(b);
	out = malloc(n + 1);
	ck_assert_ptr_nonnull(out);
	evbuffer_remove(b, out, n);
	out[n] = '\0';
	evbuffer_free(b);
	return out;
}

START_TEST(test_json_string)
{
	static const struct {
		const char *in, *out;
	} t[] = {
		{ "orders-1", "\"orders-1\"" },
		{ "a\"b\\c", "\"a\\\"b\\\\c\"" },
		{ "tab\there\n\x01\x7f", "\"tab\\u0009here\\u000a\\u0001\\u007f\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
		/* not UTF-8: each bad byte becomes U+FFFD */
		{ "evil\xff\xfe-x", "\"evil\\ufffd\\ufffd-x\"" },
		{ "\xc0\xaf", "\"\\ufffd\\ufffd\"" },			/* overlong '/' */
		{ "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"" },	/* overlong */
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },	/* a surrogate */
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" }, /* > U+10FFFF */
		{ "cut \xe2\x82", "\"cut \\ufffd\\ufffd\"" },		/* cut short */
		{ "\x80x", "\"\\ufffdx\"" },				/* lone continuation */
	};
	size_t i;
	char *s;

	for (i = 0; i < sizeof(t) / sizeof(*t); i++) {
		s = json(t[i].in);
		ck_assert_msg(strcmp(s, t[i].out) == 0, "%zu: got %s want %s", i, s,
		    t[i].out);
		free(s);
	}
}
END_TEST

static Suite *
http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc;

	tc = tcase_create("parse");
	tcase_add_loop_test(tc, test_head, 0, sizeof(heads) / sizeof(*heads));
	tcase_add_test(tc, test_keepalive);
	tcase_add_test(tc, test_query);
	suite_add_tcase(s, tc);

	tc = tcase_create("frame");
	tcase_add_test(tc, test_body_in_a_later_write);
	tcase_add_test(tc, test_pipelined_and_split);
	tcase_add_test(tc, test_header_too_large);
	suite_add_tcase(s, tc);

	tc = tcase_create("json");
	tcase_add_test(tc, test_json_string);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(http_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
