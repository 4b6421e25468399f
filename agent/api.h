/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_API_H
#define ZKELECT_API_H

#include <stdint.h>

struct agent;
struct evbuffer;
struct api;
struct election;
struct part;

enum api_endpoint {
	API_STATUS, API_LEADER, API_HEALTH, API_RESIGN, API_METRICS,
	API_PARTITIONS, API_DRAIN, API_OTHER,
	API_ENDPOINT_MAX
};

/* Response codes counted per endpoint; the last slot counts the rest. */
#define API_CODES	{ 200, 400, 403, 404, 405, 408, 409, 413, 431, 501, 503, \
			  0 }
#define API_CODE_MAX	12

/* Why accept(2) failed, for the log and the metrics. */
enum api_accept_cause {
	API_ACCEPT_EMFILE, API_ACCEPT_ENFILE, API_ACCEPT_NOMEM, API_ACCEPT_OTHER,
	API_ACCEPT_CAUSES
};
#define API_ACCEPT_CAUSE_NAMES	{ "EMFILE", "ENFILE", "ENOMEM", "other" }

/* The API's figures for the metrics. */
struct api_stats {
	uint64_t	requests[API_ENDPOINT_MAX][API_CODE_MAX]; /* answered */
	uint64_t	connections;		/* open, not closing */
	uint64_t	closing;		/* sending their last answer */
	uint64_t	long_polls;		/* parked */
	uint64_t	evicted_partial;	/* half-sent, refused at the cap */
	uint64_t	evicted_idle;		/* idle keep-alive, closed at the cap */
	uint64_t	evicted_waiting;	/* long poll, answered early at the cap */
	uint64_t	shed;			/* closed to free a descriptor */
	uint64_t	accept_errors[API_ACCEPT_CAUSES];
};

/* What the API asks of the rest of the agent (main.c wires it). */
struct api_cb {
	/* POST /v1/resign: hand part pt's term over, stay out for hold_ms. */
	void	(*resign)(void *arg, struct part *pt, uint64_t hold_ms);
	/* POST /v1/drain, /v1/undrain: partitions only. */
	void	(*drain)(void *arg, bool drain);
	void	*arg;
};

/* api.c: the local HTTP API on the Unix socket and the TCP listener. */
struct api *api_open(struct agent *agent, const struct api_cb *cb);
void api_close(struct api *api);
/* Called after every election step whose report changed (long polls). */
void api_changed(struct api *api);

void api_json_string(struct evbuffer *out, const char *s);
void api_status_json(const struct election *e, uint64_t now, struct evbuffer *out);

#endif
