/* SPDX-License-Identifier: MIT */
/* sdnotify.h on libsystemd. */
#include <stdbool.h>

#include <systemd/sd-daemon.h>

#include "sdnotify.h"

void
sdnotify_ready(void)
{
	sd_notify(0, "READY=1");
}

void
sdnotify_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

void
sdnotify_reloading(void)
{
	sd_notify(0, "RELOADING=1");
}

void
sdnotify_status(const char *status)
{
	sd_notifyf(0, "STATUS=%s", status);
}

uint64_t
sdnotify_watchdog_usec(void)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0)
		return 0;
	return usec;
}

void
sdnotify_watchdog(void)
{
	sd_notify(0, "WATCHDOG=1");
}

void
sdnotify_watchdog_set_usec(uint64_t usec)
{
	sd_notifyf(0, "WATCHDOG_USEC=%llu", (unsigned long long)usec);
}
