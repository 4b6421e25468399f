/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for guard.c with real processes: a command's whole tree (its
 * process group and what left it) ends when the command ends, when it is
 * killed, and when its starter goes away; the command inherits no
 * descriptor, handler, ignored or blocked signal of the starter; its exit
 * status comes back as the guard's; exec errors are reported; output is
 * captured.
 */
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <check.h>

#include "guard.h"

static char tmpdir[] = "/tmp/zkelect-guard-XXXXXX";

static void
setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	memcpy(tmpdir + strlen(tmpdir) - 6, "XXXXXX", 6);
}

static uint64_t
ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
nap(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };

	nanosleep(&ts, NULL);
}

/* Starts sh -c SCRIPT under a guard, with $D the test's directory. */
static void
spawn_sh(struct guard *g, const char *script, int flags)
{
	char sh[] = "/bin/sh", c[] = "-c", name[] = "sh", *copy = strdup(script);
	char *argv[] = { sh, c, copy, name, tmpdir, NULL };

	ck_assert_ptr_nonnull(copy);
	ck_assert_int_eq(guard_spawn(g, argv, NULL, flags), 0);
	free(copy);
	ck_assert_int_gt(g->pid, 0);
}

/* The guard's report, waiting up to 5 s. */
static void
wait_report(struct guard *g, pid_t *pid, int *err)
{
	struct pollfd pfd = { g->ctl, POLLIN, 0 };

	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	ck_assert_int_eq(guard_report(g, pid, err), 1);
}

/* Reads the pid the script wrote into $D/NAME, waiting up to 5 s. */
static pid_t
read_pid(const char *name)
{
	char path[128], buf[32];
	uint64_t until = ms_now() + 5000;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	for (;;) {
		if ((fd = open(path, O_RDONLY)) != -1) {
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (n > 0 && buf[n - 1] == '\n') {
				buf[n] = '\0';
				return (pid_t)atoi(buf);
			}
		}
		ck_assert_msg(ms_now() < until, "%s never written", path);
		nap();
	}
}

/* True while PID runs (a zombie, whoever's, counts as gone). */
static bool
alive(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY)) == -1)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[2] != 'Z';
}

static void
assert_gone(pid_t pid)
{
	uint64_t until = ms_now() + 5000;

	while (alive(pid)) {
		ck_assert_msg(ms_now() < until, "pid %d still running", (int)pid);
		nap();
	}
}

/* One worker stays in the command's group, one leaves it for a session. */
static const char tree[] =
    "trap '' TERM; "
    "sh -c 'trap \"\" TERM; echo $$ > \"$0/group\"; "
    "while :; do sleep 0.05; done' \"$1\" & "
    "setsid sh -c 'trap \"\" TERM; echo $$ > \"$0/session\"; "
    "while :; do sleep 0.05; done' \"$1\" & "
    "wait";

START_TEST(test_tree_ends_when_the_starter_goes)
{
	struct guard g;
	pid_t group, session;
	int status;

	spawn_sh(&g, tree, 0);
	group = read_pid("group");
	session = read_pid("session");
	ck_assert(alive(group) && alive(session));
	/* Our end of the socket closed: what our death looks like to it. */
	close(g.ctl);
	g.ctl = -1;
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	ck_assert(!alive(group));
	ck_assert(!alive(session));
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	guard_release(&g);
}
END_TEST

START_TEST(test_kill_ends_the_whole_tree)
{
	struct guard g;
	pid_t group, session;
	int status;

	spawn_sh(&g, tree, 0);
	group = read_pid("group");
	session = read_pid("session");
	guard_term(&g);		/* everyone ignores it */
	guard_kill(&g);
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	assert_gone(group);
	assert_gone(session);
	guard_release(&g);
}
END_TEST

START_TEST(test_what_the_command_leaves_ends_with_it)
{
	struct guard g;
	pid_t session;
	int status;

	spawn_sh(&g, "setsid sh -c 'echo $$ > \"$0/session\"; "
	    "while :; do sleep 0.05; done' \"$1\" & "
	    "while [ ! -s \"$1/session\" ]; do sleep 0.01; done; exit 4", 0);
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 4);
	session = read_pid("session");
	ck_assert(!alive(session));
	guard_release(&g);
}
END_TEST

START_TEST(test_term_reaches_the_group)
{
	struct guard g;
	int status;

	spawn_sh(&g, "echo $$ > \"$1/cmd\"; while :; do sleep 0.05; done", 0);
	read_pid("cmd");
	guard_term(&g);
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	guard_release(&g);
}
END_TEST

START_TEST(test_status_and_report)
{
	struct guard g;
	char path[] = "/nonexistent/zkelect-cmd", *missing[] = { path, NULL };
	pid_t pid;
	int err, status;

	spawn_sh(&g, "exit 7", 0);
	wait_report(&g, &pid, &err);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 7);
	guard_release(&g);

	spawn_sh(&g, "kill -SEGV $$", 0);
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
	ck_assert(!WCOREDUMP(status));
	guard_release(&g);

	ck_assert_int_eq(guard_spawn(&g, missing, NULL, 0), 0);
	wait_report(&g, &pid, &err);
	ck_assert_int_eq(err, ENOENT);
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 127);
	guard_release(&g);
}
END_TEST

static void
on_usr1(int sig)
{
}

START_TEST(test_command_inherits_nothing)
{
	struct sigaction sa;
	struct guard g;
	sigset_t block, old;
	char buf[512];
	size_t got = 0;
	ssize_t n;
	int leak[2], status;
	struct pollfd pfd;

	/* A descriptor without close-on-exec, a handler, an ignored and a
	 * blocked signal: none of it may reach the command. */
	ck_assert_int_eq(pipe(leak), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGUSR2);
	sigprocmask(SIG_BLOCK, &block, &old);
	snprintf(buf, sizeof(buf), "for fd in %d %d; do [ -e /proc/$$/fd/$fd ] && "
	    "echo leaked $fd; done; grep -E '^Sig(Blk|Ign)' /proc/self/status; "
	    "[ -t 0 ] || head -c 1 <&0 | wc -c", leak[0], leak[1]);
	spawn_sh(&g, buf, GUARD_CAPTURE);
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(leak[0]);
	close(leak[1]);
	pfd.fd = g.out;
	pfd.events = POLLIN;
	for (;;) {
		ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
		n = read(g.out, buf + got, sizeof(buf) - 1 - got);
		if (n == -1 && errno == EAGAIN)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	ck_assert_int_eq(waitpid(g.pid, &status, 0), g.pid);
	ck_assert_ptr_null(strstr(buf, "leaked"));
	ck_assert_ptr_nonnull(strstr(buf, "SigBlk:\t0000000000000000\n"));
	ck_assert_ptr_nonnull(strstr(buf, "SigIgn:\t0000000000000000\n"));
	/* stdin is /dev/null: nothing to read. */
	ck_assert_msg(strstr(buf, "\n0\n") != NULL, "%s", buf);
	guard_release(&g);
}
END_TEST

static Suite *
guard_suite(void)
{
	Suite *s = suite_create("guard");
	TCase *tc = tcase_create("guard");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_tree_ends_when_the_starter_goes);
	tcase_add_test(tc, test_kill_ends_the_whole_tree);
	tcase_add_test(tc, test_what_the_command_leaves_ends_with_it);
	tcase_add_test(tc, test_term_reaches_the_group);
	tcase_add_test(tc, test_status_and_report);
	tcase_add_test(tc, test_command_inherits_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(guard_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
