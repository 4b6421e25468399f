/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_METRICS_H
#define ZKELECT_METRICS_H

/* metrics.c: the Prometheus text exposition of GET /metrics. api.c calls
 * it and passes its own figures; metrics.c never calls api.c. */

#include <stdint.h>

struct agent;
struct api_stats;
struct evbuffer;

void metrics_write(struct agent *agent, const struct api_stats *as,
    uint64_t now, struct evbuffer *out);

#endif
