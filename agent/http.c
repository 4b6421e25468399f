/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/1.x request framing and parsing of the local API, kept apart
 * from the sockets so that it can be tested and fuzzed on its own. It is
 * stateless: given the bytes a connection has sent so far, it finds the
 * first whole request or says that more bytes are needed, so a request cut
 * across any number of writes reads the same as one sent at once. It
 * accepts what a local client sends (curl, an HTTP library, zkelectctl)
 * and refuses the rest with a status code: no chunked bodies, no bodies
 * over 1 KiB, no folded header lines, no conflicting Content-Length.
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

/* Cuts the line at *p (ending in CRLF) and moves *p past it; NULL if none. */
static char *
http_line(char **p)
{
	char *line = *p, *eol;

	eol = strstr(line, "\r\n");
	if (eol == NULL)
		return NULL;
	*eol = '\0';
	*p = eol + 2;
	return line;
}

int
http_parse_head(char *head, struct http_request *req, const char **error)
{
	char *p = head, *line, *method, *target, *version, *colon, *v, *end;
	bool conn_close = false, conn_keep = false, have_clen = false;
	unsigned long long clen = 0, n;
	size_t vlen;

	memset(req, 0, sizeof(*req));
	*error = "malformed request";
	if ((line = http_line(&p)) == NULL)
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
		req->http10 = false;
	else if (strcmp(version, "HTTP/1.0") == 0)
		req->http10 = true;
	else
		return 400;
	if (target[0] != '/' || !http_token_ok(method) || !http_token_ok(target))
		return 400;

	for (;;) {
		if ((line = http_line(&p)) == NULL)
			return 400;
		if (*line == '\0')
			break;			/* the empty line ending the head */
		if (strpbrk(line, "\r\n") != NULL)
			return 400;		/* a bare CR or LF */
		if (*line == ' ' || *line == '\t') {
			*error = "folded header lines are not accepted";
			return 400;
		}
		colon = strchr(line, ':');
		if (colon == NULL)
			return 400;
		*colon = '\0';
		if (!http_token_ok(line))
			return 400;		/* also space before the colon */
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		vlen = strlen(v);
		while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
			v[--vlen] = '\0';
		if (strcasecmp(line, "Content-Length") == 0) {
			if (*v < '0' || *v > '9')
				return 400;
			errno = 0;
			n = strtoull(v, &end, 10);
			if (errno != 0 || *end != '\0')
				return 400;
			if (have_clen && n != clen) {
				*error = "conflicting Content-Length headers";
				return 400;
			}
			have_clen = true;
			clen = n;
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
	req->head = strcmp(method, "HEAD") == 0;
	req->target = target;
	req->query = NULL;
	v = strchr(target, '?');
	if (v != NULL) {
		*v++ = '\0';
		req->query = v;
	}
	req->keepalive = !conn_close && (!req->http10 || conn_keep);
	req->content_length = (size_t)clen;
	*error = NULL;
	return 0;
}

int
http_next_request(const char *buf, size_t len, char *head,
    struct http_request *req, size_t *used, const char **error)
{
	const char *end;
	size_t skip = 0, scan, hlen;
	int code;

	*used = 0;
	*error = NULL;
	/* Empty lines before a request line are ignored (RFC 9112, 2.2). */
	while (skip + 1 < len && buf[skip] == '\r' && buf[skip + 1] == '\n')
		skip += 2;
	scan = len < HTTP_MAX_HEADER ? len : HTTP_MAX_HEADER;
	end = scan > skip ? memmem(buf + skip, scan - skip, "\r\n\r\n", 4) : NULL;
	if (end == NULL) {
		if (len >= HTTP_MAX_HEADER) {
			*error = "request header too large";
			return 431;
		}
		return HTTP_INCOMPLETE;
	}
	hlen = (size_t)(end + 4 - (buf + skip));
	memcpy(head, buf + skip, hlen);
	head[hlen] = '\0';
	if (memchr(head, '\0', hlen) != NULL) {
		*error = "malformed request";
		return 400;
	}
	code = http_parse_head(head, req, error);
	if (code != 0)
		return code;
	if (len - skip - hlen < req->content_length)
		return HTTP_INCOMPLETE;
	*used = skip + hlen + req->content_length;
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
