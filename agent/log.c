/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr, as text or one JSON object per line, so that journald
 * or a container runtime can pick it up. Safe to call from any thread: each
 * line is formatted into a buffer and written with one write(2).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static enum log_level	log_level_min = LOG_INFO;
static enum log_format	log_fmt = LOG_TEXT;

static const char *const log_names[] = { "debug", "info", "warn", "error" };

void
log_init(enum log_level level, enum log_format format)
{
	log_level_min = level;
	log_fmt = format;
}

void
log_set_level(enum log_level level)
{
	log_level_min = level;
}

enum log_level
log_get_level(void)
{
	return log_level_min;
}

const char *
log_level_name(enum log_level level)
{
	return log_names[level];
}

static size_t
log_json_escape(char *dst, size_t cap, const char *src)
{
	size_t n = 0;

	for (; *src != '\0' && n + 7 < cap; src++) {
		unsigned char c = (unsigned char)*src;
		if (c == '"' || c == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", c);
		} else
			dst[n++] = (char)c;
	}
	dst[n] = '\0';
	return n;
}

static void __attribute__((format(printf, 3, 0)))
log_vwrite(enum log_level level, int errnum, const char *fmt, va_list ap)
{
	char msg[2048], line[4600], ts[40];
	struct timespec now;
	struct tm tm;
	int n;

	if (level < log_level_min)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if (errnum != 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(errnum));

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = (int)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - (size_t)n, ".%03ldZ", now.tv_nsec / 1000000);

	if (log_fmt == LOG_JSON) {
		char esc[4200];
		log_json_escape(esc, sizeof(esc), msg);
		n = snprintf(line, sizeof(line),
		    "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n",
		    ts, log_names[level], esc);
	} else
		n = snprintf(line, sizeof(line), "%s zkelectd %s: %s\n", ts,
		    log_names[level], msg);
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to say it */
	}
}

#define LOG_BODY(level, errnum) do {		\
	va_list ap;				\
	va_start(ap, fmt);			\
	log_vwrite(level, errnum, fmt, ap);	\
	va_end(ap);				\
} while (0)

void log_debug(const char *fmt, ...) { LOG_BODY(LOG_DEBUG, 0); }
void log_info(const char *fmt, ...) { LOG_BODY(LOG_INFO, 0); }
void log_warnx(const char *fmt, ...) { LOG_BODY(LOG_WARN, 0); }
void log_error(const char *fmt, ...) { LOG_BODY(LOG_ERROR, 0); }

void
log_warn(const char *fmt, ...)
{
	int saved = errno;
	LOG_BODY(LOG_WARN, saved);
	errno = saved;
}

void
fatal(const char *fmt, ...)
{
	int saved = errno;
	LOG_BODY(LOG_ERROR, saved);
	exit(2);
}

void
fatalx(const char *fmt, ...)
{
	LOG_BODY(LOG_ERROR, 0);
	exit(2);
}
