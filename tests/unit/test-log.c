/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for log.c: once the writer thread runs, a log call never waits
 * for stderr. With stderr a pipe nobody reads, calls return at once, the
 * lines that do not fit are dropped and counted, every line that comes out
 * is whole, and once the pipe is read again one line says how many were
 * dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "log.h"

#define LINES	2000

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(test_stalled_stderr_drops_and_counts)
{
	static char buf[1 << 20];
	char pad[101], *p, *nl, *notice;
	size_t len = 0;
	ssize_t n;
	double t0, deadline;
	uint64_t dropped, said;
	int fds[2], i, lines = 0, flags;

	ck_assert_int_eq(pipe(fds), 0);
	(void)fcntl(fds[1], F_SETPIPE_SZ, 4096);
	ck_assert_int_eq(dup2(fds[1], STDERR_FILENO), STDERR_FILENO);
	close(fds[1]);
	log_init(LOG_INFO, LOG_TEXT);
	ck_assert_int_eq(log_start(), 0);

	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	t0 = now_s();
	for (i = 0; i < LINES; i++)
		log_info("line %d %s", i, pad);
	/* Nobody reads the pipe: the calls did not wait for it. */
	ck_assert(now_s() - t0 < 1.0);
	dropped = log_dropped();
	ck_assert(dropped > 0);
	ck_assert(dropped < LINES);
	ck_assert(!log_flush(50));

	/* Read it again: everything queued comes out, then the notice. */
	flags = fcntl(fds[0], F_GETFL);
	fcntl(fds[0], F_SETFL, flags | O_NONBLOCK);
	deadline = now_s() + 10.0;
	notice = NULL;
	while (notice == NULL && now_s() < deadline) {
		n = read(fds[0], buf + len, sizeof(buf) - 1 - len);
		if (n > 0) {
			len += (size_t)n;
			buf[len] = '\0';
			notice = strstr(buf, "lines dropped");
		} else
			usleep(1000);
	}
	ck_assert_ptr_nonnull(notice);
	ck_assert(log_flush(1000));
	ck_assert_uint_eq(log_dropped(), dropped);
	p = strstr(buf, "log: ");
	ck_assert_ptr_nonnull(p);
	said = strtoull(p + 5, NULL, 10);
	ck_assert_uint_eq(said, dropped);
	/* Whole lines only: each one of ours carries its pad and newline. */
	for (p = buf; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		if (strncmp(p + 24, " zkelectd info: line ", 21) == 0) {
			ck_assert(nl - p > (ptrdiff_t)sizeof(pad));
			ck_assert(strncmp(nl - (sizeof(pad) - 1), pad,
			    sizeof(pad) - 1) == 0);
			lines++;
		}
	}
	ck_assert_int_eq(lines, LINES - (int)dropped);
	ck_assert(*p == '\0');
	log_stop(1000);
	close(fds[0]);
}
END_TEST

/*
 * Under systemd, stderr is journald's stream (JOURNAL_STREAM names it) and
 * each line starts with its priority, "<4>" for a warning, which journald
 * keeps as PRIORITY=; anywhere else lines are as they were.
 */
static size_t
read_all(int fd, char *buf, size_t len)
{
	ssize_t n;
	size_t got = 0;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (got < len - 1 && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	return got;
}

START_TEST(test_journal_priority_prefixes)
{
	char buf[8192], env[64];
	struct stat st;
	int fds[2];

	ck_assert_int_eq(pipe(fds), 0);
	ck_assert_int_eq(dup2(fds[1], STDERR_FILENO), STDERR_FILENO);
	close(fds[1]);
	ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	ck_assert_int_eq(setenv("JOURNAL_STREAM", env, 1), 0);

	log_init(LOG_DEBUG, LOG_TEXT);
	log_debug("d");
	log_info("i");
	log_warnx("w");
	log_error("e");
	log_output("hook", 42, "h");
	log_init(LOG_INFO, LOG_JSON);
	log_warnx("jw");
	read_all(fds[0], buf, sizeof(buf));
	ck_assert_msg(strncmp(buf, "<7>", 3) == 0, "%s", buf);
	ck_assert_ptr_nonnull(strstr(buf, "\n<6>"));
	ck_assert_ptr_nonnull(strstr(buf, " zkelectd warn: w\n"));
	ck_assert_ptr_nonnull(strstr(buf, "\n<4>"));
	ck_assert_ptr_nonnull(strstr(buf, "\n<3>"));
	ck_assert_ptr_nonnull(strstr(buf, "\n<4>{\"ts\":"));

	/* Another stream (the journal's is not stderr): no prefix. */
	ck_assert_int_eq(setenv("JOURNAL_STREAM", "1:1", 1), 0);
	log_init(LOG_INFO, LOG_TEXT);
	log_warnx("plain");
	read_all(fds[0], buf, sizeof(buf));
	ck_assert_msg(strncmp(buf, "20", 2) == 0, "%s", buf);
	close(fds[0]);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("queue");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_stalled_stderr_drops_and_counts);
	tcase_add_test(tc, test_journal_priority_prefixes);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
