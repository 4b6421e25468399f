/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_CLOCK_H
#define ZKELECT_CLOCK_H

#include <stdint.h>

/*
 * Milliseconds on CLOCK_BOOTTIME: monotonic, and it keeps counting while the
 * machine is suspended, so a lease deadline taken from it cannot be outlived
 * by a suspend. Every deadline in the agent comes from here. Tests may
 * replace the source with clock_set_source().
 */
uint64_t clock_now_ms(void);
void clock_set_source(uint64_t (*source)(void));

/* Microseconds on CLOCK_BOOTTIME, not injectable: for logs that several
 * agents on one machine are compared by. */
uint64_t clock_now_us(void);

#endif
