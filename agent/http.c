/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/1.x request parsing of the local API, kept apart from the
 * sockets so that it can be tested and fuzzed on its own. It accepts what a
 * local client sends (curl, an HTTP library, zkelectctl) and refuses the
 * rest with a status code: no chunked bodies, no bodies over 1 KiB.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static bool
http_token_ok(const char *s)
{
	if (*s == '\0')
		return false;
	for (; *s != '\0'; s++)
		if (*s <= ' ' || *s >= 0x7f)
			return false;
	return true;
}

int
http_parse_head(char *head, struct http_request *req, const char **error)
{
	char *line, *save = NULL, *method, *target, *version, *colon, *v, *end;
	bool http10, conn_close = false, conn_keep = false;
	unsigned long long clen = 0;

	memset(req, 0, sizeof(*req));
	*error = "malformed request";
	line = strtok_r(head, "\r\n", &save);
	if (line == NULL)
		return 400;
	method = line;
	target = strchr(method, ' ');
	if (target == NULL)
		return 400;
	*target++ = '\0';
	version = strchr(target, ' ');
	if (version == NULL)
		return 400;
	*version++ = '\0';
	if (strcmp(version, "HTTP/1.1") == 0)
		http10 = false;
	else if (strcmp(version, "HTTP/1.0") == 0)
		http10 = true;
	else
		return 400;
	if (target[0] != '/' || !http_token_ok(method) || !http_token_ok(target))
		return 400;

	while ((line = strtok_r(NULL, "\r\n", &save)) != NULL) {
		colon = strchr(line, ':');
		if (colon == NULL || colon == line)
			return 400;
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		if (strcasecmp(line, "Content-Length") == 0) {
			if (*v < '0' || *v > '9')
				return 400;
			errno = 0;
			clen = strtoull(v, &end, 10);
			while (*end == ' ' || *end == '\t')
				end++;
			if (errno != 0 || *end != '\0')
				return 400;
		} else if (strcasecmp(line, "Transfer-Encoding") == 0) {
			*error = "chunked bodies are not accepted";
			return 501;
		} else if (strcasecmp(line, "Connection") == 0) {
			if (strcasestr(v, "close") != NULL)
				conn_close = true;
			if (strcasestr(v, "keep-alive") != NULL)
				conn_keep = true;
		}
	}
	if (clen > HTTP_MAX_BODY) {
		*error = "request body too large";
		return 413;
	}
	req->method = method;
	req->target = target;
	req->query = NULL;
	v = strchr(target, '?');
	if (v != NULL) {
		*v++ = '\0';
		req->query = v;
	}
	req->keepalive = !conn_close && (!http10 || conn_keep);
	req->content_length = (size_t)clen;
	*error = NULL;
	return 0;
}

char *
http_query_get(const char *query, const char *name)
{
	size_t len = strlen(name);
	const char *p = query, *end;

	while (p != NULL && *p != '\0') {
		end = strchr(p, '&');
		if (strncmp(p, name, len) == 0 && p[len] == '=') {
			p += len + 1;
			return strndup(p, end != NULL ? (size_t)(end - p) : strlen(p));
		}
		p = end != NULL ? end + 1 : NULL;
	}
	return NULL;
}
