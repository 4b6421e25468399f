/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_HTTP_H
#define ZKELECT_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_HEADER	8192	/* request line and headers */
#define HTTP_MAX_BODY	1024
#define HTTP_INCOMPLETE	1	/* http_next_request: wait for more bytes */

/* One parsed request head; the strings point into the parsed buffer. */
struct http_request {
	const char	*method;
	char		*target;	/* path; the query is split off */
	const char	*query;		/* after '?', or NULL */
	bool		 head;		/* HEAD: answer without a body */
	bool		 http10;
	bool		 keepalive;
	size_t		 content_length;
};

/*
 * Parses a request head (request line and headers, NUL-terminated, ending
 * in an empty line), modifying it in place. Returns 0, or the HTTP status
 * to answer with (400, 413, 501) and sets *error to a message.
 */
int http_parse_head(char *head, struct http_request *req, const char **error);

/*
 * Finds the first whole request (head and body) in the len bytes at buf, as
 * they came from a connection. Returns 0 with *used set to its size and req
 * pointing into head (HTTP_MAX_HEADER + 1 bytes, a copy of the head);
 * HTTP_INCOMPLETE when more bytes are needed; or the HTTP status to answer
 * with (400, 413, 431, 501) and *error set, after which the connection is
 * out of step and must be closed.
 */
int http_next_request(const char *buf, size_t len, char *head,
    struct http_request *req, size_t *used, const char **error);

/* Finds "name=value" in a query string; returns a malloc'd value or NULL. */
char *http_query_get(const char *query, const char *name);

#endif
