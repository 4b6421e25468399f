/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_SDNOTIFY_H
#define ZKELECT_SDNOTIFY_H

#include <stdint.h>

/*
 * systemd's notify protocol (Type=notify): READY once the API listens,
 * STATUS lines with role and epoch, WATCHDOG pings from the loop, STOPPING
 * on shutdown. Built on libsystemd when the meson feature 'systemd' finds
 * it (sdnotify-systemd.c), otherwise every call does nothing
 * (sdnotify-none.c).
 */
void sdnotify_ready(void);
void sdnotify_stopping(void);
void sdnotify_reloading(void);
void sdnotify_status(const char *status);
/* The watchdog interval systemd asked for, in microseconds; 0 if none. */
uint64_t sdnotify_watchdog_usec(void);
void sdnotify_watchdog(void);
/* Sets the watchdog interval (WATCHDOG_USEC=, systemd 236 and later). */
void sdnotify_watchdog_set_usec(uint64_t usec);

#endif
