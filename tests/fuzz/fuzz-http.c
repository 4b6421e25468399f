/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the local API's request framing and parsing (http.c)
 * on what a connection may send: the input is read as one stream of
 * pipelined requests, first whole, then cut into writes of sizes drawn
 * from the input itself, and both readings must find the same requests
 * (the server is stateless between writes). Each request's query values
 * (wait, index, hold) go through the duration parser, and its target
 * through the JSON string writer, whose output must be valid UTF-8 with no
 * raw control character, exactly as api.c uses them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "agent.h"
#include "api.h"
#include "config.h"
#include "http.h"

#define MAX_REQUESTS	64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	int	code;
	size_t	used;
	size_t	content_length;
	bool	keepalive, head;
};

/* An independent check: a JSON string in well-formed UTF-8. */
static void
check_json_string(const unsigned char *p, size_t n)
{
	size_t i = 1, k, len;
	uint32_t cp;

	if (n < 2 || p[0] != '"' || p[n - 1] != '"')
		abort();
	while (i < n - 1) {
		if (p[i] < 0x20 || (p[i] == '"' && i != n - 1))
			abort();
		if (p[i] == '\\') {
			if (i + 1 >= n - 1 || strchr("\"\\u", p[i + 1]) == NULL)
				abort();
			i += p[i + 1] == 'u' ? 6 : 2;
			continue;
		}
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		len = p[i] >= 0xf0 ? 4 : p[i] >= 0xe0 ? 3 : p[i] >= 0xc0 ? 2 : 0;
		if (len == 0 || i + len > n - 1)
			abort();
		cp = p[i] & (0x7f >> len);
		for (k = 1; k < len; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				abort();
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			abort();
		i += len;
	}
}

static void
use_request(const struct http_request *req)
{
	static const char *const keys[] = { "wait", "index", "hold" };
	struct evbuffer *b;
	uint64_t ms;
	size_t i;
	char *v;

	if (req->query != NULL)
		for (i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
			v = http_query_get(req->query, keys[i]);
			if (v != NULL)
				(void)config_parse_duration(v, &ms);
			free(v);
		}
	b = evbuffer_new();
	api_json_string(b, req->target);
	check_json_string(evbuffer_pullup(b, -1), evbuffer_get_length(b));
	evbuffer_free(b);
}

/* Reads the stream as a server would, n bytes arriving per write. */
static size_t
read_stream(const uint8_t *data, size_t size, const uint8_t *cuts, size_t ncuts,
    struct outcome *out, bool use)
{
	static char head[HTTP_MAX_HEADER + 1];
	struct http_request req;
	const char *error;
	size_t have = 0, off = 0, nout = 0, step, c = 0;
	int code;

	while (nout < MAX_REQUESTS) {
		code = http_next_request((const char *)data + off, have - off, head,
		    &req, &out[nout].used, &error);
		if (code == HTTP_INCOMPLETE && have < size) {
			step = ncuts > 0 ? (size_t)cuts[c++ % ncuts] + 1 : size;
			have = have + step > size ? size : have + step;
			continue;
		}
		if ((code != 0 && code != HTTP_INCOMPLETE && error == NULL) ||
		    (code == 0 && (out[nout].used == 0 || off + out[nout].used > have)))
			abort();
		out[nout].code = code;
		if (code == 0) {
			out[nout].content_length = req.content_length;
			out[nout].keepalive = req.keepalive;
			out[nout].head = req.head;
			if (use)
				use_request(&req);
			off += out[nout].used;
		}
		nout++;
		if (code != 0)
			break;
	}
	return nout;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct outcome whole[MAX_REQUESTS], split[MAX_REQUESTS];
	struct http_request req;
	const char *error;
	size_t nw, ns, i, ncuts;
	char *head;

	if (size > 4 * HTTP_MAX_HEADER)
		return 0;
	/* One head on its own, as the parser sees it. */
	if (size <= HTTP_MAX_HEADER && (head = malloc(size + 1)) != NULL) {
		memcpy(head, data, size);
		head[size] = '\0';
		(void)http_parse_head(head, &req, &error);
		free(head);
	}
	/* The stream whole, then cut by the input's last bytes. */
	memset(whole, 0, sizeof(whole));
	memset(split, 0, sizeof(split));
	nw = read_stream(data, size, NULL, 0, whole, true);
	ncuts = size < 8 ? size : 8;
	ns = read_stream(data, size, data + size - ncuts, ncuts, split, false);
	if (nw != ns)
		abort();
	for (i = 0; i < nw; i++)
		if (memcmp(&whole[i], &split[i], sizeof(whole[i])) != 0)
			abort();
	return 0;
}
