/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_NOTIFY_H
#define ZKELECT_NOTIFY_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

struct agent;
struct election_action;
struct election_report;
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

/* At exit: kills what still runs (hooks, the child, their process trees)
 * and reaps it. Call it before the session is closed. */
void notify_close(struct notify *n);

/*
 * A role change: queue hooks, send signals, start or stop the child. When
 * a->wait is set, zk_notified() follows once the app has been told (hooks
 * done, child dead).
 */
void notify_transition(struct notify *n, const struct election_action *a);

/*
 * A partition's role changed (doc/design.md, "Partitions"). When a->wait
 * is set, zk_part_notified() follows once the app has been told.
 */
struct part;
void notify_part_transition(struct notify *n, struct part *pt,
    const struct election_action *a);

/* The report changed: on followers and observers, a newly reported leader
 * runs on_leader_change. */
void notify_leader_seen(struct notify *n, const struct election_report *r);

/* An upper bound of the time (ms) until what is queued or running now is
 * done, each hook given its timeout and kill grace, the child its deadline. */
uint64_t notify_drain_ms(const struct notify *n, uint64_t now);

bool notify_busy(const struct notify *n);
const struct notify_stats *notify_get_stats(const struct notify *n);

/* A pidfile's text as a pid: one decimal in 2..INT_MAX, with nothing but
 * blanks and a newline around it. Returns 0, or -1. */
int notify_parse_pid(const char *text, pid_t *pid);

#endif
