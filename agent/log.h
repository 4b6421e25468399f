/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_LOG_H
#define ZKELECT_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_TEXT, LOG_JSON };

void log_init(enum log_level level, enum log_format format);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
const char *log_level_name(enum log_level level);

/* log_warn appends strerror(errno); log_warnx does not. */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* One line a hook or the child printed, as SOURCE[PID] (JSON: its fields). */
void log_output(const char *source, long pid, const char *text);

/*
 * From log_start() on, lines go through a bounded queue to a writer thread:
 * no caller waits for stderr, and lines that find the queue full are
 * dropped and counted (log_dropped). log_flush waits up to TIMEOUT_MS for
 * the queue to be written and says whether it was; log_stop flushes, then
 * writes in line again. Before log_start every line is written in line.
 */
#define LOG_EXIT_FLUSH_MS	1000
int log_start(void);
bool log_flush(int timeout_ms);
void log_stop(int timeout_ms);
uint64_t log_dropped(void);

void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
