/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_NOTIFY_H
#define ZKELECT_NOTIFY_H

#include <sys/types.h>

#include <stdbool.h>
#include <stdint.h>

struct agent;
struct election_action;
struct notify;
struct part;

struct notify_stats {
	uint64_t	 hook_runs;
	uint64_t	 hook_failures;	/* non-zero exit, signal, or not started */
	uint64_t	 hook_ms_total;
	uint64_t	 signals;
	uint64_t	 signal_failures;
	uint64_t	 child_starts;
};

/* What notify.c reports upward (main.c wires it). */
struct notify_cb {
	/* on_leader_failure: resign: hand part pt's term over, stay out
	 * hold_ms. */
	void	(*resign)(void *arg, struct part *pt, uint64_t hold_ms);
	/* The app has been told of part pt's losses up to told. */
	void	(*told)(void *arg, struct part *pt, uint64_t told);
	/* notify.run_exit: stop: the single election's command ended with
	 * STATUS (waitpid's), by itself or stopped by the agent. */
	void	(*run_exited)(void *arg, int status, bool by_itself);
	void	*arg;
};

struct notify *notify_open(struct agent *agent, const struct notify_cb *cb);

/* At exit: kills what still runs (hooks, the children, their process
 * trees) and reaps it. Call it before the session is closed. */
void notify_close(struct notify *n);

/*
 * Part pt's role changed (the single election is part 0; doc/design.md,
 * "Hooks, signals and the supervised child", "Partitions"): queue hooks,
 * send signals, start or stop its child. When a->wait is set, the told
 * callback follows once the app has been told (hooks done, child dead).
 */
void notify_transition(struct notify *n, struct part *pt,
    const struct election_action *a);

/* Part pt's report changed: on followers and observers, a newly reported
 * leader runs on_leader_change (with ZKELECT_PARTITION for a partition). */
void notify_leader_seen(struct notify *n, struct part *pt);

/* A copy of ARGV (to free as the hooks' copies are) with each
 * "{partition}" in an element replaced by NAME. */
char **notify_argv_part(char *const *argv, const char *name);

/* An upper bound of the time (ms) until what is queued or running now is
 * done, each hook given its timeout and kill grace, the child its deadline. */
uint64_t notify_drain_ms(const struct notify *n, uint64_t now);

bool notify_busy(const struct notify *n);
const struct notify_stats *notify_get_stats(const struct notify *n);

/* A pidfile's text as a pid: one decimal in 2..INT_MAX, with nothing but
 * blanks and a newline around it. Returns 0, or -1. */
int notify_parse_pid(const char *text, pid_t *pid);

#endif
