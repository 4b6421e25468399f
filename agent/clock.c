/* SPDX-License-Identifier: MIT */
/* The one clock of the agent: CLOCK_BOOTTIME in milliseconds, injectable. */
#include <time.h>

#include "clock.h"

static uint64_t
clock_boottime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t (*clock_source)(void) = clock_boottime_ms;

uint64_t
clock_now_ms(void)
{
	return clock_source();
}

void
clock_set_source(uint64_t (*source)(void))
{
	clock_source = source != NULL ? source : clock_boottime_ms;
}

uint64_t
clock_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}
