/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_CLIENT_H
#define ZKELECT_CLIENT_H

#include <stddef.h>

/* A response from the agent's local API. */
struct client_response {
	int	 code;		/* HTTP status */
	char	*body;		/* NUL-terminated; free with client_response_free */
};

/*
 * Sends "METHOD TARGET" to the agent on the Unix socket PATH and reads the
 * whole response, waiting at most timeout_ms for each read. Returns 0, or
 * -1 with errno set (ECONNREFUSED, ENOENT, ETIMEDOUT, EPROTO...).
 */
int client_request(const char *path, const char *method, const char *target,
    int timeout_ms, struct client_response *resp);
void client_response_free(struct client_response *resp);

/*
 * Copies the raw JSON value of "key" (the first occurrence at any depth)
 * into buf, without quotes for strings. Returns 0, or -1 if absent.
 */
int client_json_get(const char *json, const char *key, char *buf, size_t len);

#endif
