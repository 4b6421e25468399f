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

/*
 * The same for a member of the object json itself, never of an object
 * nested in it: "epoch" is the entry's own, not its leader's.
 */
int client_json_member(const char *json, const char *key, char *buf,
    size_t len);

/*
 * The elements of the array that is the member "key" of the object json:
 * client_json_items() gives a cursor on the first (NULL if there is no
 * such array), client_json_next() each element in turn as a new string
 * (free it), NULL after the last.
 */
const char *client_json_items(const char *json, const char *key);
char *client_json_next(const char **cursor);

#endif
