/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the local API's request parsing (http.c), then the
 * query values the API reads (wait, index, hold) through the duration
 * parser, exactly as api.c does.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = { "wait", "index", "hold" };
	struct http_request req;
	const char *error;
	char *head, *v;
	uint64_t ms;
	size_t i;

	if (size > HTTP_MAX_HEADER)
		return 0;
	head = malloc(size + 1);
	if (head == NULL)
		return 0;
	memcpy(head, data, size);
	head[size] = '\0';
	if (http_parse_head(head, &req, &error) == 0 && req.query != NULL) {
		for (i = 0; i < sizeof(keys) / sizeof(*keys); i++) {
			v = http_query_get(req.query, keys[i]);
			if (v != NULL)
				(void)config_parse_duration(v, &ms);
			free(v);
		}
	}
	free(head);
	return 0;
}
