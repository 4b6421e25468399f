/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_WATCHDOG_H
#define ZKELECT_WATCHDOG_H

#include <stdbool.h>
#include <stdint.h>

/*
 * A thread that kills the process (SIGKILL) once the event loop has not
 * beaten for half the session timeout T, so that the session, and our
 * node, cannot outlive a stalled loop (see watchdog.c for the bound).
 * The loop beats at least every T/WATCHDOG_BEAT (watchdog_beat_ms); this
 * thread, near the bound, looks every T/WATCHDOG_LOOK; both within the
 * limits below.
 */
#define WATCHDOG_BEAT		6
#define WATCHDOG_LOOK		12
#define WATCHDOG_PERIOD_MIN_MS	10
#define WATCHDOG_PERIOD_MAX_MS	1000
#define WATCHDOG_OVERSLEEP_MS	100	/* more than this late: we were stopped */

struct watchdog;

struct watchdog *watchdog_start(uint32_t timeout_ms);
/* From the loop: it runs, and T is now TIMEOUT_MS. */
void watchdog_beat(struct watchdog *wd, uint32_t timeout_ms);
/* From a callback that may run long (a burst of accepts): the loop is not
 * stalled, it works. Does not arm a held or stopped watchdog. */
void watchdog_alive(struct watchdog *wd);
/*
 * Around the making of a ZooKeeper handle, when no session lives and
 * resolving names may block the loop: HOLD disarms until the next beat,
 * and !HOLD beats now.
 */
void watchdog_hold(struct watchdog *wd, bool hold);
/* Disarms and ends the thread. */
void watchdog_stop(struct watchdog *wd);
/* The longest the loop may go without a beat when idle. */
uint64_t watchdog_beat_ms(uint32_t timeout_ms);

#endif
