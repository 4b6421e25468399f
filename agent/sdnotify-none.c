/* SPDX-License-Identifier: MIT */
/* sdnotify.h without libsystemd: nothing to tell. */
#include "sdnotify.h"

void sdnotify_ready(void) { }
void sdnotify_stopping(void) { }
void sdnotify_reloading(void) { }
void sdnotify_status(const char *status) { (void)status; }
uint64_t sdnotify_watchdog_usec(void) { return 0; }
void sdnotify_watchdog(void) { }
void sdnotify_watchdog_set_usec(uint64_t usec) { (void)usec; }
