/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr, as text or one JSON object per line, so that journald
 * or a container runtime can pick it up. Safe to call from any thread: each
 * line is formatted into a buffer and written with one write(2).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
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

/* Length of the valid UTF-8 sequence at S (1..4), or 0 if there is none. */
static size_t
log_utf8_len(const unsigned char *s)
{
	size_t n, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;	/* overlong, a surrogate, or past Unicode */
	return n;
}

/*
 * SRC as the inside of a JSON string: quotes, backslashes and control
 * characters escaped, and every byte that is not valid UTF-8 (hooks and the
 * child may print anything) replaced by U+FFFD, so that the line parses.
 */
static size_t
log_json_escape(char *dst, size_t cap, const char *src)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t n = 0, len;

	while (*p != '\0' && n + 7 < cap) {
		if (*p == '"' || *p == '\\') {
			dst[n++] = '\\';
			dst[n++] = (char)*p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", *p++);
		} else if ((len = log_utf8_len(p)) == 0) {
			memcpy(dst + n, "\xef\xbf\xbd", 3);
			n += 3;
			p++;
		} else {
			memcpy(dst + n, p, len);
			n += len;
			p += len;
		}
	}
	dst[n] = '\0';
	return n;
}

/* Writes one line; SOURCE and PID (when not NULL) name a hook or child. */
static void
log_emit(enum log_level level, const char *source, long pid, const char *msg)
{
	char line[4600], ts[40], esc[4200], src[160];
	struct timespec now;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = (int)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - (size_t)n, ".%03ldZ", now.tv_nsec / 1000000);

	if (log_fmt == LOG_JSON) {
		log_json_escape(esc, sizeof(esc), msg);
		if (source != NULL) {
			log_json_escape(src, sizeof(src), source);
			n = snprintf(line, sizeof(line),
			    "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\","
			    "\"source\":\"%s\",\"pid\":%ld}\n", ts, log_names[level],
			    esc, src, pid);
		} else
			n = snprintf(line, sizeof(line),
			    "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n",
			    ts, log_names[level], esc);
	} else if (source != NULL)
		n = snprintf(line, sizeof(line), "%s zkelectd %s: %s[%ld]: %s\n",
		    ts, log_names[level], source, pid, msg);
	else
		n = snprintf(line, sizeof(line), "%s zkelectd %s: %s\n", ts,
		    log_names[level], msg);
	/* The escaped text stops short of its buffer, so a JSON line always
	 * fits; a text line is cut, and stays a line. */
	if (n > (int)sizeof(line) - 1) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to say it */
	}
}

static void __attribute__((format(printf, 3, 0)))
log_vwrite(enum log_level level, int errnum, const char *fmt, va_list ap)
{
	char msg[2048];
	int n;

	if (level < log_level_min)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if (errnum != 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(errnum));
	log_emit(level, NULL, 0, msg);
}

/* A line of output from a hook or the child, at info. */
void
log_output(const char *source, long pid, const char *text)
{
	if (LOG_INFO < log_level_min)
		return;
	log_emit(LOG_INFO, source, pid, text);
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
