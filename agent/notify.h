/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_NOTIFY_H
#define ZKELECT_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

struct agent;
struct election_action;
struct notify;

struct notify_stats {
	uint64_t	 hook_runs;
	uint64_t	 hook_failures;	/* non-zero exit, signal, or not started */
	uint64_t	 hook_ms_total;
	uint64_t	 signals;
	uint64_t	 signal_failures;
	uint64_t	 child_starts;
};

struct notify *notify_open(struct agent *agent);
void notify_close(struct notify *n);

/*
 * A role change: queue hooks, send signals, start or stop the child. When
 * a->wait is set, zk_notified() follows once the app has been told (hooks
 * done, child dead).
 */
void notify_transition(struct notify *n, const struct election_action *a);

bool notify_busy(const struct notify *n);
const struct notify_stats *notify_get_stats(const struct notify *n);

#endif
