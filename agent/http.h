/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_HTTP_H
#define ZKELECT_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_HEADER	8192	/* request line and headers */
#define HTTP_MAX_BODY	1024

/* One parsed request head; the strings point into the parsed buffer. */
struct http_request {
	const char	*method;
	char		*target;	/* path; the query is split off */
	const char	*query;		/* after '?', or NULL */
	bool		 keepalive;
	size_t		 content_length;
};

/*
 * Parses a request head (request line and headers, NUL-terminated, ending
 * in an empty line), modifying it in place. Returns 0, or the HTTP status
 * to answer with (400, 413, 501) and sets *error to a message.
 */
int http_parse_head(char *head, struct http_request *req, const char **error);

/* Finds "name=value" in a query string; returns a malloc'd value or NULL. */
char *http_query_get(const char *query, const char *name);

#endif
