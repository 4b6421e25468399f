/* SPDX-License-Identifier: MIT */
/*
 * The app side of the local API: one HTTP/1.0 request over the Unix socket,
 * and just enough JSON reading for zkelectctl's human output.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

#define CLIENT_MAX_RESPONSE	(1024 * 1024)

int
client_request(const char *path, const char *method, const char *target,
    int timeout_ms, struct client_response *resp)
{
	struct sockaddr_un sun;
	struct pollfd pfd;
	char req[1024], *buf = NULL, *sep, *nbuf;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd, saved;

	memset(resp, 0, sizeof(*resp));
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		goto fail;
	n = snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: localhost\r\n"
	    "Content-Length: 0\r\n\r\n", method, target);
	if (n < 0 || (size_t)n >= sizeof(req)) {
		errno = EINVAL;
		goto fail;
	}
	if (write(fd, req, (size_t)n) != n)
		goto fail;
	for (;;) {
		pfd.fd = fd;
		pfd.events = POLLIN;
		n = poll(&pfd, 1, timeout_ms);
		if (n == 0) {
			errno = ETIMEDOUT;
			goto fail;
		}
		if (n < 0)
			goto fail;	/* EINTR included: the caller decides */
		if (len + 4096 + 1 > cap) {
			cap = cap == 0 ? 8192 : cap * 2;
			if (cap > CLIENT_MAX_RESPONSE) {
				errno = EMSGSIZE;
				goto fail;
			}
			nbuf = realloc(buf, cap);
			if (nbuf == NULL)
				goto fail;
			buf = nbuf;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (buf == NULL || sscanf(buf, "HTTP/1.%*d %d", &resp->code) != 1) {
		free(buf);
		errno = EPROTO;
		return -1;
	}
	buf[len] = '\0';
	sep = strstr(buf, "\r\n\r\n");
	resp->body = strdup(sep != NULL ? sep + 4 : "");
	free(buf);
	return resp->body != NULL ? 0 : -1;
fail:
	saved = errno;
	close(fd);
	free(buf);
	errno = saved;
	return -1;
}

void
client_response_free(struct client_response *resp)
{
	free(resp->body);
	resp->body = NULL;
}

int
client_json_get(const char *json, const char *key, char *buf, size_t len)
{
	char pat[128];
	const char *p, *end;
	size_t n;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	if (p == NULL)
		return -1;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	if (*p == '"') {
		p++;
		for (end = p; *end != '\0' && *end != '"'; end++)
			if (*end == '\\' && end[1] != '\0')
				end++;
	} else if (*p == '{') {
		int depth = 0;
		for (end = p; *end != '\0'; end++) {
			if (*end == '{')
				depth++;
			else if (*end == '}' && --depth == 0) {
				end++;
				break;
			}
		}
	} else
		for (end = p; *end != '\0' && *end != ',' && *end != '}'; end++)
			;
	n = (size_t)(end - p);
	if (n >= len)
		n = len - 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return 0;
}

/* Past the white space at p. */
static const char *
json_space(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* Past one JSON value at p (after white space); NULL if it is cut short. */
static const char *
json_skip(const char *p)
{
	int depth = 0;

	p = json_space(p);
	do {
		switch (*p) {
		case '\0':
			return NULL;
		case '"':
			for (p++; *p != '"'; p++) {
				if (*p == '\0')
					return NULL;
				if (*p == '\\' && p[1] != '\0')
					p++;
			}
			p++;
			break;
		case '{': case '[':
			depth++;
			p++;
			break;
		case '}': case ']':
			if (--depth < 0)
				return NULL;
			p++;
			break;
		default:
			if (depth == 0) {
				while (*p != '\0' && *p != ',' && *p != '}' &&
				    *p != ']' && *p != ' ' && *p != '\n')
					p++;
				return p;
			}
			p++;
		}
	} while (depth > 0);
	return p;
}

/* The value of key among the members of the object at json (not nested
 * deeper): its start, and its end in *end; NULL if there is none. */
static const char *
json_member(const char *json, const char *key, const char **end)
{
	const char *p = json_space(json), *k, *v;
	size_t klen = strlen(key), n;

	if (*p != '{')
		return NULL;
	p = json_space(p + 1);
	while (*p == '"') {
		k = p + 1;
		if ((p = json_skip(p)) == NULL)
			return NULL;
		n = (size_t)(p - k) - 1;	/* the key's length */
		p = json_space(p);
		if (*p != ':')
			return NULL;
		v = json_space(p + 1);
		if ((p = json_skip(v)) == NULL)
			return NULL;
		if (n == klen && strncmp(k, key, klen) == 0) {
			*end = p;
			return v;
		}
		p = json_space(p);
		if (*p != ',')
			return NULL;
		p = json_space(p + 1);
	}
	return NULL;
}

int
client_json_member(const char *json, const char *key, char *buf, size_t len)
{
	const char *v, *end;
	size_t n;

	if ((v = json_member(json, key, &end)) == NULL)
		return -1;
	if (*v == '"') {	/* the string without its quotes */
		v++;
		end--;
	}
	n = (size_t)(end - v);
	if (n >= len)
		n = len - 1;
	memcpy(buf, v, n);
	buf[n] = '\0';
	return 0;
}

const char *
client_json_items(const char *json, const char *key)
{
	const char *p, *end;

	if ((p = json_member(json, key, &end)) == NULL || *p != '[')
		return NULL;
	return json_space(p + 1);
}

char *
client_json_next(const char **cursor)
{
	const char *p = *cursor, *start;
	char *out;

	if (p == NULL || *p == ']' || *p == '\0')
		return NULL;
	start = p;
	if ((p = json_skip(p)) == NULL)
		return NULL;
	if ((out = malloc((size_t)(p - start) + 1)) == NULL)
		return NULL;
	memcpy(out, start, (size_t)(p - start));
	out[p - start] = '\0';
	p = json_space(p);
	if (*p == ',')
		p = json_space(p + 1);
	*cursor = p;
	return out;
}
