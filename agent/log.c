/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr, as text or one JSON object per line, so that journald
 * or a container runtime can pick it up. Safe to call from any thread: each
 * line is formatted into a buffer and written whole.
 *
 * Once log_start() has run, no caller ever waits for stderr. A line goes
 * into a bounded queue and a writer thread of its own writes it out; when
 * the destination stops reading (a stalled journald, a dead logger at the
 * end of a pipe) the queue fills and further lines are dropped and counted,
 * rather than the event loop (or ZooKeeper's threads, which log too)
 * standing still in write(2). When the queue has drained again, one line
 * says how many were lost. stderr itself stays blocking: O_NONBLOCK would
 * be set on the open file description, which journald's stream socket and
 * the hooks that inherit it share.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_QUEUE_BYTES	(64 * 1024)	/* about 600 lines of 100 bytes */

static enum log_level	log_level_min = LOG_INFO;
static enum log_format	log_fmt = LOG_TEXT;
/* stderr is journald's stream: each line starts with "<N>", its syslog
 * priority, which journald takes off and keeps as the entry's PRIORITY=
 * (sd-daemon(3)); without it every line would be info. */
static bool		log_journal;
static const char *const log_prefixes[] = { "<7>", "<6>", "<4>", "<3>" };

/* The queue: a ring of bytes, whole lines only, between the callers and
 * the writer thread. */
static struct {
	pthread_mutex_t	 lock;
	pthread_cond_t	 wake;		/* the writer: lines, or stop */
	pthread_cond_t	 drained;	/* log_flush: the queue is empty */
	pthread_t	 thread;
	bool		 running;
	bool		 stop;
	bool		 writing;	/* the writer holds bytes it took */
	char		 ring[LOG_QUEUE_BYTES];
	size_t		 head;		/* next byte to write */
	size_t		 len;		/* bytes queued */
	uint64_t	 dropped;	/* lines dropped, ever */
	uint64_t	 unreported;	/* dropped since the last notice */
} log_q = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.wake = PTHREAD_COND_INITIALIZER,
	.drained = PTHREAD_COND_INITIALIZER,
};

static const char *const log_names[] = { "debug", "info", "warn", "error" };

/* Whether stderr is the stream journald gave us: systemd names it, as
 * "device:inode", in JOURNAL_STREAM (systemd.exec(5)). */
static bool
log_stderr_is_journal(void)
{
	const char *e;
	unsigned long long dev, ino;
	struct stat st;

	if ((e = getenv("JOURNAL_STREAM")) == NULL ||
	    sscanf(e, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) == -1)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

void
log_init(enum log_level level, enum log_format format)
{
	log_level_min = level;
	log_fmt = format;
	log_journal = log_stderr_is_journal();
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

/* Writes all of BUF to stderr, waiting as long as it takes. Returns -1
 * if stderr refuses it (closed, a broken pipe). */
static int
log_write_all(const char *buf, size_t len)
{
	struct pollfd pfd = { .fd = STDERR_FILENO, .events = POLLOUT };
	ssize_t n;

	while (len > 0) {
		n = write(STDERR_FILENO, buf, len);
		if (n > 0) {
			buf += n;
			len -= (size_t)n;
		} else if (n == -1 && errno == EINTR)
			continue;
		else if (n == -1 && errno == EAGAIN)
			/* someone else made the description non-blocking */
			(void)poll(&pfd, 1, 1000);
		else
			return -1;
	}
	return 0;
}

/* Formats one line into LINE (LOG_LINE_MAX); returns its length. */
#define LOG_LINE_MAX	4600
static size_t
log_format_line(char *line, enum log_level level, const char *source, long pid,
    const char *msg)
{
	char ts[40], esc[4200], src[160];
	const char *pfx;
	struct timespec now;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = (int)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - (size_t)n, ".%03ldZ", now.tv_nsec / 1000000);

	pfx = log_journal ? log_prefixes[level] : "";
	if (log_fmt == LOG_JSON) {
		log_json_escape(esc, sizeof(esc), msg);
		if (source != NULL) {
			log_json_escape(src, sizeof(src), source);
			n = snprintf(line, LOG_LINE_MAX,
			    "%s{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\","
			    "\"source\":\"%s\",\"pid\":%ld}\n", pfx, ts,
			    log_names[level], esc, src, pid);
		} else
			n = snprintf(line, LOG_LINE_MAX,
			    "%s{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"%s\"}\n",
			    pfx, ts, log_names[level], esc);
	} else if (source != NULL)
		n = snprintf(line, LOG_LINE_MAX, "%s%s zkelectd %s: %s[%ld]: %s\n",
		    pfx, ts, log_names[level], source, pid, msg);
	else
		n = snprintf(line, LOG_LINE_MAX, "%s%s zkelectd %s: %s\n", pfx,
		    ts, log_names[level], msg);
	/* The escaped text stops short of its buffer, so a JSON line always
	 * fits; a text line is cut, and stays a line. */
	if (n > LOG_LINE_MAX - 1) {
		n = LOG_LINE_MAX - 1;
		line[n - 1] = '\n';
	}
	return (size_t)n;
}

/*
 * Queues one line for the writer, or drops it (and counts it) when the
 * queue has no room for it whole. Never waits for stderr.
 */
static void
log_enqueue(const char *line, size_t n)
{
	size_t tail, first;

	pthread_mutex_lock(&log_q.lock);
	if (n > LOG_QUEUE_BYTES - log_q.len) {
		log_q.dropped++;
		log_q.unreported++;
		pthread_mutex_unlock(&log_q.lock);
		return;
	}
	tail = (log_q.head + log_q.len) % LOG_QUEUE_BYTES;
	first = LOG_QUEUE_BYTES - tail;
	if (first > n)
		first = n;
	memcpy(log_q.ring + tail, line, first);
	memcpy(log_q.ring, line + first, n - first);
	log_q.len += n;
	pthread_cond_signal(&log_q.wake);
	pthread_mutex_unlock(&log_q.lock);
}

/* Writes one line; SOURCE and PID (when not NULL) name a hook or child. */
static void
log_emit(enum log_level level, const char *source, long pid, const char *msg)
{
	char line[LOG_LINE_MAX];
	size_t n;
	bool queued;

	n = log_format_line(line, level, source, pid, msg);
	pthread_mutex_lock(&log_q.lock);
	queued = log_q.running;
	pthread_mutex_unlock(&log_q.lock);
	if (queued)
		log_enqueue(line, n);
	else
		(void)log_write_all(line, n);	/* before start, after stop */
}

/*
 * The writer thread: writes what is queued, without the lock (callers only
 * ever add behind what it writes). Once the queue is empty again after
 * lines were dropped, it says how many.
 */
static void *
log_writer(void *arg)
{
	char note[LOG_LINE_MAX], msg[160];
	size_t n, chunk;
	uint64_t lost;

	(void)arg;
	pthread_mutex_lock(&log_q.lock);
	for (;;) {
		while (log_q.len == 0 && log_q.unreported == 0 && !log_q.stop) {
			pthread_cond_broadcast(&log_q.drained);
			pthread_cond_wait(&log_q.wake, &log_q.lock);
		}
		if (log_q.len == 0 && log_q.unreported == 0)
			break;	/* stopping, and nothing left */
		if (log_q.len > 0) {
			chunk = LOG_QUEUE_BYTES - log_q.head;
			if (chunk > log_q.len)
				chunk = log_q.len;
			log_q.writing = true;
			pthread_mutex_unlock(&log_q.lock);
			(void)log_write_all(log_q.ring + log_q.head, chunk);
			pthread_mutex_lock(&log_q.lock);
			log_q.writing = false;
			log_q.head = (log_q.head + chunk) % LOG_QUEUE_BYTES;
			log_q.len -= chunk;
			continue;
		}
		/* Drained after a loss: one line for all that was lost. */
		lost = log_q.unreported;
		log_q.unreported = 0;
		pthread_mutex_unlock(&log_q.lock);
		snprintf(msg, sizeof(msg), "log: %" PRIu64 " line%s dropped: "
		    "stderr did not take them in time", lost, lost == 1 ? "" : "s");
		n = log_format_line(note, LOG_WARN, NULL, 0, msg);
		(void)log_write_all(note, n);
		pthread_mutex_lock(&log_q.lock);
	}
	pthread_cond_broadcast(&log_q.drained);
	pthread_mutex_unlock(&log_q.lock);
	return NULL;
}

int
log_start(void)
{
	sigset_t all, old;
	int rc;

	pthread_mutex_lock(&log_q.lock);
	if (log_q.running) {
		pthread_mutex_unlock(&log_q.lock);
		return 0;
	}
	log_q.stop = false;
	/* The writer takes no signal: they are the loop's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&log_q.thread, NULL, log_writer, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		log_q.running = true;
	pthread_mutex_unlock(&log_q.lock);
	if (rc != 0) {
		errno = rc;
		log_warn("log: cannot start the writer thread; writing in line");
		return -1;
	}
	return 0;
}

/* Waits (up to TIMEOUT_MS) until the queue is written out. */
bool
log_flush(int timeout_ms)
{
	struct timespec until;
	bool empty;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&log_q.lock);
	while (log_q.running && (log_q.len > 0 || log_q.unreported > 0 ||
	    log_q.writing))
		if (pthread_cond_clockwait(&log_q.drained, &log_q.lock,
		    CLOCK_MONOTONIC, &until) != 0)
			break;
	empty = log_q.len == 0;
	pthread_mutex_unlock(&log_q.lock);
	return empty;
}

void
log_stop(int timeout_ms)
{
	bool done;

	if (!log_flush(timeout_ms)) {
		/* stderr is stuck: leave the writer where it is; the process
		 * is about to exit. */
		return;
	}
	pthread_mutex_lock(&log_q.lock);
	done = log_q.running;
	log_q.stop = true;
	log_q.running = false;
	pthread_cond_signal(&log_q.wake);
	pthread_mutex_unlock(&log_q.lock);
	if (done)
		pthread_join(log_q.thread, NULL);
}

uint64_t
log_dropped(void)
{
	uint64_t n;

	pthread_mutex_lock(&log_q.lock);
	n = log_q.dropped;
	pthread_mutex_unlock(&log_q.lock);
	return n;
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
	log_stop(LOG_EXIT_FLUSH_MS);
	exit(2);
}

void
fatalx(const char *fmt, ...)
{
	LOG_BODY(LOG_ERROR, 0);
	log_stop(LOG_EXIT_FLUSH_MS);
	exit(2);
}
