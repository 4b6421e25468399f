/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for notify.c.
 *
 * Pure functions: what a pidfile may hold (one decimal in 2..INT_MAX, so
 * that a bad pidfile never becomes kill(-1), kill(0) or kill(1)), and how a
 * partition's argv is made ("{partition}" replaced anywhere in an element).
 *
 * Behaviour, with real processes and a real libevent loop the test drives:
 * hooks are small /bin/sh scripts in a temporary directory that write what
 * they see to a trace file; the test calls notify_transition() as main.c
 * does and runs the loop until a condition holds, with a deadline. The
 * agent's log goes to a file (stderr is redirected) so that a test can
 * look for the line a user would read.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include <check.h>

#include "agent.h"
#include "clock.h"
#include "log.h"
#include "notify.h"

/* --- helpers: the fixture --- */

#define WAIT_MS		8000	/* a deadline for what should take moments */
#define NPARTS		2

static char tmpdir[] = "/tmp/zkelect-notify-XXXXXX";
static char logpath[PATH_MAX];
static struct config conf;
static struct agent agent;
/* The fleet notify.c serves: part 0 the single election (unnamed), parts
 * 1.. partitions (a real fleet has one kind; notify.c treats each part on
 * its own). */
#define SINGLE		(&agent.fleet.parts[0])
#define PART(i)		(&agent.fleet.parts[(i) + 1])
static const char *const part_names[NPARTS] = { "p0", "p1" };
static struct notify *nt;

/* What the callbacks saw, in order. */
static struct {
	int		 told;		/* calls of told */
	uint64_t	 told_arg;
	bool		 child_alive_at_told;	/* the child, when told came */
	int		 part_told[NPARTS];
	uint64_t	 part_told_arg[NPARTS];
	bool		 part_child_alive_at_told[NPARTS];
	int		 resigns;
	uint64_t	 resign_hold;
} seen;

/* The child's pid, as it wrote it (0: not known), per election. */
static pid_t watch_child;
static pid_t watch_part_child[NPARTS];

static bool
alive(pid_t pid)
{
	return pid > 0 && kill(pid, 0) == 0;
}

static void
cb_resign(void *arg, struct part *pt, uint64_t hold_ms)
{
	seen.resigns++;
	seen.resign_hold = hold_ms;
}

static void
cb_told(void *arg, struct part *pt, uint64_t told)
{
	int i = pt->idx - 1;

	if (pt == SINGLE) {
		seen.told++;
		seen.told_arg = told;
		seen.child_alive_at_told = alive(watch_child);
		return;
	}
	ck_assert_int_ge(i, 0);
	ck_assert_int_lt(i, NPARTS);
	seen.part_told[i]++;
	seen.part_told_arg[i] = told;
	seen.part_child_alive_at_told[i] = alive(watch_part_child[i]);
}

static const struct notify_cb callbacks = {
	.resign = cb_resign,
	.told = cb_told,
};

static void
setup(void)
{
	int fd, i;

	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(logpath, sizeof(logpath), "%s/agent.log", tmpdir);
	fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	close(fd);
	log_init(LOG_DEBUG, LOG_TEXT);

	memset(&conf, 0, sizeof(conf));
	memset(&seen, 0, sizeof(seen));
	watch_child = 0;
	memset(watch_part_child, 0, sizeof(watch_part_child));
	conf.election_id = strdup("agent-1");
	conf.election_path = strdup("/zkelect/test");
	conf.api_socket = strdup("/run/zkelect/test.sock");
	conf.notify_hook_timeout_ms = 5000;

	memset(&agent, 0, sizeof(agent));
	agent.conf = &conf;
	ck_assert_ptr_nonnull(agent.base = event_base_new());
	agent.fleet.nparts = NPARTS + 1;
	ck_assert_ptr_nonnull(agent.fleet.parts = calloc(NPARTS + 1,
	    sizeof(*agent.fleet.parts)));
	for (i = 0; i < NPARTS + 1; i++) {
		agent.fleet.parts[i].idx = i;
		agent.fleet.parts[i].name = i == 0 ? NULL : part_names[i - 1];
		agent.fleet.parts[i].path = conf.election_path;
		election_init(&agent.fleet.parts[i].e, "agent-1", NULL, true);
		agent.fleet.parts[i].e.role = ELECTION_FOLLOWER;
	}
	ck_assert_ptr_nonnull(nt = notify_open(&agent, &callbacks));
}

static void
argv_free(char **argv)
{
	size_t i;

	for (i = 0; argv != NULL && argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

static void
teardown(void)
{
	char cmd[PATH_MAX + 16];

	notify_close(nt);
	nt = NULL;
	event_base_free(agent.base);
	free(agent.fleet.parts);
	argv_free(conf.notify_on_leader);
	argv_free(conf.notify_on_follower);
	argv_free(conf.notify_on_leader_change);
	argv_free(conf.notify_run);
	free(conf.notify_pidfile);
	free(conf.election_value);
	free(conf.election_id);
	free(conf.election_path);
	free(conf.api_socket);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	memcpy(tmpdir + strlen(tmpdir) - 6, "XXXXXX", 6);
}

/* --- helpers: files and scripts --- */

/* PATH in the test's directory (a static buffer of four, round robin). */
static const char *
in_dir(const char *name)
{
	static char bufs[4][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 4];

	snprintf(b, PATH_MAX, "%s/%s", tmpdir, name);
	return b;
}

/* The whole of FILE ("" when it is not there), malloc'd. */
static char *
slurp(const char *file)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f, *mem;
	int ch;

	mem = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(mem);
	if ((f = fopen(file, "r")) != NULL) {
		while ((ch = fgetc(f)) != EOF)
			fputc(ch, mem);
		fclose(f);
	}
	fclose(mem);
	return text;
}

static void
write_file(const char *file, const char *text)
{
	FILE *f = fopen(file, "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

/*
 * Writes an executable /bin/sh script NAME with BODY (printf format), in
 * which $D is the test's directory and "note WORDS" appends a line to
 * $D/trace. Returns an argv for the config, [script, ARG] (ARG may be NULL).
 */
static char **
script(const char *name, const char *arg, const char *fmt, ...)
{
	const char *path = in_dir(name);
	char **argv;
	va_list ap;
	FILE *f;

	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#!/bin/sh\nD='%s'\nnote() { echo \"$*\" >> \"$D/trace\"; }\n",
	    tmpdir);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(chmod(path, 0755), 0);
	argv = calloc(3, sizeof(*argv));
	ck_assert_ptr_nonnull(argv);
	argv[0] = strdup(path);
	argv[1] = arg != NULL ? strdup(arg) : NULL;
	return argv;
}

static char *
trace(void)
{
	return slurp(in_dir("trace"));
}

static char *
logtext(void)
{
	return slurp(logpath);
}

/* Asserts the agent's log has a line with TEXT; prints the log if not. */
static void
assert_log_has(const char *text)
{
	char *log = logtext();

	ck_assert_msg(strstr(log, text) != NULL, "no '%s' in the log:\n%s",
	    text, log);
	free(log);
}

static void
assert_trace_is(const char *want)
{
	char *got = trace(), *log = logtext();

	ck_assert_msg(strcmp(got, want) == 0, "trace:\n%s\nwanted:\n%s\nlog:\n%s",
	    got, want, log);
	free(got);
	free(log);
}

/* --- helpers: the loop --- */

static uint64_t
ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
}

/* Runs the loop for MS milliseconds at most, or until COND(ARG) holds;
 * returns whether it did. A 10 ms tick lets it look at files. */
static bool
run_until(bool (*cond)(const void *), const void *arg, uint64_t ms)
{
	struct timeval tv = { 0, 10 * 1000 };
	struct event *tick = event_new(agent.base, -1, EV_PERSIST, tick_cb, NULL);
	uint64_t end = ms_now() + ms;
	bool ok;

	event_add(tick, &tv);
	while (!(ok = cond != NULL && cond(arg)) && ms_now() < end)
		event_base_loop(agent.base, EVLOOP_ONCE);
	event_free(tick);
	return ok;
}

static bool
trace_has(const void *text)
{
	char *t = trace();
	bool ok = strstr(t, text) != NULL;

	free(t);
	return ok;
}

static bool
file_exists(const void *name)
{
	return access(in_dir(name), F_OK) == 0;
}

/* The process (a pid_t) is gone. */
static bool
proc_gone(const void *pid)
{
	return !alive(*(const pid_t *)pid);
}

static bool
resigned(const void *want)
{
	return seen.resigns >= *(const int *)want;
}

static bool
is_idle(const void *unused)
{
	return !notify_busy(nt);
}

static bool
told_count(const void *want)
{
	return seen.told >= *(const int *)want;
}

static bool
part_told_count(const void *which)
{
	return seen.part_told[*(const int *)which] > 0;
}

static void
wait_for_trace(const char *text)
{
	if (!run_until(trace_has, text, WAIT_MS)) {
		char *t = trace(), *log = logtext();

		ck_abort_msg("no '%s' in the trace after %d ms:\n%s\nlog:\n%s",
		    text, WAIT_MS, t, log);
	}
}

static void
wait_idle(void)
{
	ck_assert_msg(run_until(is_idle, NULL, WAIT_MS), "still busy");
}

/* NAME is written whole: there, and ending in a newline. */
static bool
file_complete(const void *name)
{
	char *text = slurp(in_dir(name));
	size_t len = strlen(text);
	bool ok = len > 0 && text[len - 1] == '\n';

	free(text);
	return ok;
}

/* The pid a script wrote to $D/NAME. */
static pid_t
read_pid(const char *name)
{
	char *text;
	pid_t pid = 0;

	ck_assert_msg(run_until(file_complete, name, WAIT_MS), "no %s", name);
	text = slurp(in_dir(name));
	ck_assert_int_eq(notify_parse_pid(text, &pid), 0);
	free(text);
	return pid;
}

/* --- helpers: transitions, as the election makes them --- */

/* pt's election follows, connected, and the last claim it read names ID
 * under EPOCH (with VALUE, or none); then notify.c hears the report
 * changed. */
static void
leader_seen(struct part *pt, const char *id, uint64_t epoch, const char *value)
{
	struct election *e = &pt->e;

	e->session = SESSION_CONNECTED;
	e->claim_known = true;
	e->claim_mine = false;
	snprintf(e->claim_id, sizeof(e->claim_id), "%s", id);
	e->claim_epoch = epoch;
	e->claim_has_value = value != NULL;
	snprintf(e->claim_value, sizeof(e->claim_value), "%s",
	    value != NULL ? value : "");
	notify_leader_seen(nt, pt);
}

static void
gain(uint64_t epoch)
{
	struct election_action a = { .type = ACT_NOTIFY };

	SINGLE->e.role = ELECTION_LEADER;
	SINGLE->e.epoch = epoch;
	a.from = ELECTION_FOLLOWER;
	a.to = ELECTION_LEADER;
	a.reason = REASON_CLAIMED;
	notify_transition(nt, SINGLE, &a);
}

/* A loss numbered TOLD; STANDS: our node stays until the lease deadline,
 * LEASE_MS from now. */
static void
lose(uint64_t told, bool stands, uint64_t lease_ms)
{
	struct election_action a = { .type = ACT_NOTIFY };

	SINGLE->e.role = ELECTION_FOLLOWER;
	SINGLE->e.lease_deadline = clock_now_ms() + lease_ms;
	a.from = ELECTION_LEADER;
	a.to = ELECTION_FOLLOWER;
	a.reason = stands ? REASON_RESIGNED : REASON_SESSION_EXPIRED;
	a.wait = true;
	a.told = told;
	a.node_stands = stands;
	notify_transition(nt, SINGLE, &a);
}

static void
part_gain(int i, uint64_t epoch)
{
	struct election_action a = { .type = ACT_NOTIFY };

	PART(i)->e.role = ELECTION_LEADER;
	PART(i)->e.epoch = epoch;
	a.from = ELECTION_FOLLOWER;
	a.to = ELECTION_LEADER;
	a.reason = REASON_CLAIMED;
	notify_transition(nt, PART(i), &a);
}

static void
part_lose(int i, uint64_t told)
{
	struct election_action a = { .type = ACT_NOTIFY };

	PART(i)->e.role = ELECTION_FOLLOWER;
	PART(i)->e.lease_deadline = clock_now_ms() + 5000;
	a.from = ELECTION_LEADER;
	a.to = ELECTION_FOLLOWER;
	a.reason = REASON_REASSIGNED;
	a.wait = true;
	a.told = told;
	a.node_stands = true;
	notify_transition(nt, PART(i), &a);
}

/* A script that waits for $D/NAME to appear (the test's say-so). */
#define WAIT_FOR(name)	"while [ ! -e \"$D/" name "\" ]; do sleep 0.01; done\n"

/* A child: writes its pid, notes TERM, runs until killed. */
#define CHILD_BODY \
	"echo $$ > \"$D/child-$1.pid\"\n" \
	"note child $1 $ZKELECT_ROLE $ZKELECT_EPOCH $ZKELECT_PARTITION\n" \
	"trap 'note term $1; exit 0' TERM\n" \
	"while :; do sleep 1 & wait $!; done\n"

/* The same, but on SIGTERM it lingers until $D/die-$1 appears. */
#define SLOW_CHILD_BODY \
	"echo $$ > \"$D/child-$1.pid\"\n" \
	"note child $1 $ZKELECT_ROLE $ZKELECT_EPOCH $ZKELECT_PARTITION\n" \
	"trap 'note term $1; " \
	"while [ ! -e \"$D/die-$1\" ]; do sleep 0.01; done; exit 0' TERM\n" \
	"while :; do sleep 1 & wait $!; done\n"

/* --- pure functions --- */

START_TEST(test_good_pids)
{
	static const struct {
		const char	*text;
		pid_t		 pid;
	} good[] = {
		{ "2", 2 }, { "1234\n", 1234 }, { " 42 \n", 42 }, { "42\r\n", 42 },
		{ "\t77\t", 77 }, { "2147483647", INT_MAX }, { "007\n", 7 },
	};
	size_t i;
	pid_t pid;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		pid = -5;
		ck_assert_msg(notify_parse_pid(good[i].text, &pid) == 0,
		    "refused '%s'", good[i].text);
		ck_assert_int_eq(pid, good[i].pid);
	}
}
END_TEST

START_TEST(test_bad_pids)
{
	static const char *const bad[] = {
		"", "\n", "0", "1", "1\n", "-1", "-1234", "+5", "4294967295",
		"4294967297", "2147483648", "99999999999999999999999", "12 34",
		"12abc", "0x10", "1e3", "12\n34\n", "\n12", " ",
	};
	size_t i;
	pid_t pid = 99;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(notify_parse_pid(bad[i], &pid) == -1,
		    "accepted '%s'", bad[i]);
		ck_assert_int_eq(pid, 99);
	}
}
END_TEST

START_TEST(test_argv_part)
{
	static const struct {
		const char	*in;
		const char	*name;
		const char	*out;
	} cases[] = {
		{ "{partition}", "7", "7" },
		{ "--shard={partition}", "eu-west.1", "--shard=eu-west.1" },
		{ "{partition}/{partition}", "ab", "ab/ab" },
		{ "{partition}{partition}", "a_very_long_partition_name",
		    "a_very_long_partition_namea_very_long_partition_name" },
		{ "no key here", "3", "no key here" },
		{ "{partition", "3", "{partition" },
		{ "{PARTITION}", "3", "{PARTITION}" },
		{ "{{partition}}", "3", "{3}" },
		{ "", "3", "" },
	};
	size_t i, k;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char job[] = "/bin/job", in[128];
		char *argv[] = { job, in, NULL };
		char **out;

		snprintf(in, sizeof(in), "%s", cases[i].in);
		out = notify_argv_part(argv, cases[i].name);

		ck_assert_str_eq(out[0], "/bin/job");
		ck_assert_msg(strcmp(out[1], cases[i].out) == 0,
		    "'%s' with %s: got '%s', want '%s'", cases[i].in,
		    cases[i].name, out[1], cases[i].out);
		ck_assert_ptr_null(out[2]);
		for (k = 0; out[k] != NULL; k++)
			free(out[k]);
		free(out);
	}
}
END_TEST

/* --- hooks --- */

/*
 * on_leader, then the child, then on_follower: one at a time, each waiting
 * for the one before; the loss is told only after on_follower has ended.
 */
START_TEST(test_hooks_in_order)
{
	int one = 1;

	conf.notify_on_leader = script("leader.sh", NULL,
	    "note on_leader start\n" WAIT_FOR("go") "note on_leader end\n");
	conf.notify_on_follower = script("follower.sh", NULL,
	    "note on_follower start\n" WAIT_FOR("go2") "note on_follower end\n");
	conf.notify_run = script("child.sh", "single", CHILD_BODY);

	gain(5);
	wait_for_trace("on_leader start");
	/* The child waits for on_leader: nothing else starts meanwhile. */
	run_until(NULL, NULL, 300);
	assert_trace_is("on_leader start\n");
	lose(1, true, 5000);
	run_until(NULL, NULL, 200);
	assert_trace_is("on_leader start\n");
	ck_assert_int_eq(seen.told, 0);

	write_file(in_dir("go"), "");
	wait_for_trace("on_follower start");
	/* The child of a term that ended before it started never runs. */
	ck_assert_int_eq(notify_get_stats(nt)->child_starts, 0);
	run_until(NULL, NULL, 200);
	ck_assert_int_eq(seen.told, 0);

	write_file(in_dir("go2"), "");
	ck_assert(run_until(told_count, &one, WAIT_MS));
	assert_trace_is("on_leader start\non_leader end\n"
	    "on_follower start\non_follower end\n");
	ck_assert_int_eq(seen.told_arg, 1);
	ck_assert_int_eq(notify_get_stats(nt)->hook_runs, 2);
	ck_assert_int_eq(notify_get_stats(nt)->hook_failures, 0);
	assert_log_has("on_leader hook exited with status 0 after");
	ck_assert(!notify_busy(nt));
}
END_TEST

/* The child starts once on_leader has ended. */
START_TEST(test_child_after_on_leader)
{
	conf.notify_on_leader = script("leader.sh", NULL,
	    "note on_leader start\n" WAIT_FOR("go") "note on_leader end\n");
	conf.notify_run = script("child.sh", "single", CHILD_BODY);

	gain(9);
	wait_for_trace("on_leader start");
	run_until(NULL, NULL, 300);
	ck_assert(!file_exists("child-single.pid"));
	write_file(in_dir("go"), "");
	wait_for_trace("child single");
	assert_trace_is("on_leader start\non_leader end\n"
	    "child single leader 9\n");
	ck_assert_int_eq(notify_get_stats(nt)->child_starts, 1);
}
END_TEST

/*
 * A term whose on_leader never started (queued behind a slow hook) is
 * skipped whole: neither its on_leader nor its on_follower runs.
 */
START_TEST(test_unstarted_term_skipped)
{
	int one = 1;

	conf.notify_on_leader = script("leader.sh", NULL,
	    "note on_leader $ZKELECT_EPOCH\n" WAIT_FOR("go"));
	conf.notify_on_follower = script("follower.sh", NULL,
	    "note on_follower\n");

	gain(1);
	wait_for_trace("on_leader 1");
	lose(1, true, 5000);
	gain(2);
	lose(2, true, 5000);
	write_file(in_dir("go"), "");
	ck_assert(run_until(told_count, &one, WAIT_MS));
	wait_idle();
	assert_trace_is("on_leader 1\non_follower\n");
	/* Told once, of both losses. */
	ck_assert_int_eq(seen.told, 1);
	ck_assert_int_eq(seen.told_arg, 2);
	assert_log_has("skipping on_leader hook of a term already over");
}
END_TEST

/* What a hook finds in its environment. */
START_TEST(test_hook_environment)
{
	static const char dump[] =
	    "env | grep -E '^(ZKELECT_|NOTIFY_SOCKET|ZKT_)' | LC_ALL=C sort > \"$D/env.$1\"\n"
	    "note $1\n";
	char *env;

	setenv("ZKT_KEEP", "kept", 1);
	setenv("ZKELECT_STALE", "from-the-agent", 1);
	setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
	conf.election_value = strdup("http://a:1");
	conf.notify_on_leader = script("hook.sh", "leader", dump);
	conf.notify_on_follower = script("hook.sh", "follower", dump);
	conf.notify_on_leader_change = script("hook.sh", "change", dump);

	gain(4660);
	lose(1, true, 5000);
	wait_for_trace("follower");
	leader_seen(SINGLE, "agent-2", 77, "http://b:2");
	wait_for_trace("change");
	wait_idle();

	env = slurp(in_dir("env.leader"));
	ck_assert_str_eq(env,
	    "ZKELECT_EPOCH=4660\n"
	    "ZKELECT_ID=agent-1\n"
	    "ZKELECT_LEADER_EPOCH=4660\n"
	    "ZKELECT_LEADER_ID=agent-1\n"
	    "ZKELECT_LEADER_VALUE=http://a:1\n"
	    "ZKELECT_PATH=/zkelect/test\n"
	    "ZKELECT_ROLE=leader\n"
	    "ZKELECT_SOCKET=/run/zkelect/test.sock\n"
	    "ZKT_KEEP=kept\n");
	free(env);
	env = slurp(in_dir("env.follower"));
	ck_assert_str_eq(env,
	    "ZKELECT_EPOCH=\n"
	    "ZKELECT_ID=agent-1\n"
	    "ZKELECT_LEADER_EPOCH=\n"
	    "ZKELECT_LEADER_ID=\n"
	    "ZKELECT_LEADER_VALUE=\n"
	    "ZKELECT_PATH=/zkelect/test\n"
	    "ZKELECT_ROLE=follower\n"
	    "ZKELECT_SOCKET=/run/zkelect/test.sock\n"
	    "ZKT_KEEP=kept\n");
	free(env);
	env = slurp(in_dir("env.change"));
	ck_assert_str_eq(env,
	    "ZKELECT_EPOCH=\n"
	    "ZKELECT_ID=agent-1\n"
	    "ZKELECT_LEADER_EPOCH=77\n"
	    "ZKELECT_LEADER_ID=agent-2\n"
	    "ZKELECT_LEADER_VALUE=http://b:2\n"
	    "ZKELECT_PATH=/zkelect/test\n"
	    "ZKELECT_ROLE=follower\n"
	    "ZKELECT_SOCKET=/run/zkelect/test.sock\n"
	    "ZKT_KEEP=kept\n");
	free(env);
	unsetenv("ZKT_KEEP");
	unsetenv("ZKELECT_STALE");
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

/* on_leader_change runs once per new leader, and not on the leader. */
START_TEST(test_leader_change_once_per_leader)
{
	conf.notify_on_leader_change = script("change.sh", NULL,
	    "note change $ZKELECT_LEADER_ID $ZKELECT_LEADER_EPOCH\n");
	leader_seen(SINGLE, "agent-2", 10, NULL);
	wait_idle();
	leader_seen(SINGLE, "agent-2", 10, NULL);	/* the same leader again */
	leader_seen(SINGLE, "agent-2", 11, NULL);	/* the same agent, a new term */
	wait_idle();
	SINGLE->e.role = ELECTION_LEADER;	/* we lead: on_leader tells */
	leader_seen(SINGLE, "agent-1", 12, NULL);
	wait_idle();
	assert_trace_is("change agent-2 10\nchange agent-2 11\n");
	assert_log_has("on_leader_change hook");
}
END_TEST

/* A hook that hangs is stopped at hook_timeout; the next one runs. */
START_TEST(test_hook_timeout)
{
	uint64_t t0;

	/* Long enough for the hook to write its line first, even on a
	 * loaded machine under ASan. */
	conf.notify_hook_timeout_ms = 1000;
	conf.notify_on_leader = script("leader.sh", NULL,
	    "note on_leader start\nsleep 30\nnote on_leader end\n");
	conf.notify_on_follower = script("follower.sh", NULL,
	    "note on_follower\n");

	t0 = ms_now();		/* before the hook starts: its clock runs later */
	gain(3);
	wait_for_trace("on_leader start");
	lose(1, true, 5000);
	wait_for_trace("on_follower");
	/* Not stopped before its timeout. The loop's timers count from the
	 * loop's cached time, which may be a few ms behind this clock, and
	 * both ends are truncated to ms: 999 was seen, 1 run in 6. */
	ck_assert_uint_ge(ms_now() - t0, 1000 - 10);
	wait_idle();
	assert_trace_is("on_leader start\non_follower\n");
	assert_log_has("on_leader hook (pid ");
	assert_log_has("timed out after 1000 ms; SIGTERM");
	assert_log_has("on_leader hook was killed by SIGTERM after ");
	assert_log_has("(timed out)");
	ck_assert_int_eq(notify_get_stats(nt)->hook_runs, 2);
	ck_assert_int_eq(notify_get_stats(nt)->hook_failures, 1);
}
END_TEST

/* A hook that ignores SIGTERM gets SIGKILL, with its whole tree. */
START_TEST(test_hook_timeout_sigkill)
{
	pid_t pid;

	/* Long enough for the shell to set its trap before SIGTERM comes,
	 * even on a loaded machine under ASan. */
	conf.notify_hook_timeout_ms = 1500;
	conf.notify_on_leader = script("leader.sh", NULL,
	    "trap '' TERM\nsleep 60 &\necho $! > \"$D/sub.pid\"\n"
	    "note on_leader start\nwhile :; do sleep 0.05; done\n");
	conf.notify_on_follower = script("follower.sh", NULL,
	    "note on_follower\n");

	gain(3);
	wait_for_trace("on_leader start");
	lose(1, true, 5000);
	wait_for_trace("on_follower");
	wait_idle();
	pid = read_pid("sub.pid");
	ck_assert_msg(!alive(pid), "the hook's own child %d survived", pid);
	assert_log_has("still running 2 s after SIGTERM; SIGKILL");
	assert_log_has("on_leader hook was killed by SIGKILL");
	ck_assert_int_eq(notify_get_stats(nt)->hook_failures, 1);
}
END_TEST

/* A failing hook is counted and logged, with what it printed. */
START_TEST(test_hook_failure)
{
	conf.notify_on_leader = script("leader.sh", NULL,
	    "echo 'disk is full' >&2\nnote on_leader\nexit 3\n");
	conf.notify_on_follower = script("nothere.sh", NULL, "");
	unlink(conf.notify_on_follower[0]);

	gain(3);
	lose(1, true, 5000);
	wait_idle();
	assert_trace_is("on_leader\n");
	assert_log_has("on_leader hook exited with status 3 after ");
	assert_log_has("disk is full");
	assert_log_has("on_follower hook: cannot run ");
	assert_log_has("nothere.sh: No such file or directory");
	ck_assert_int_eq(notify_get_stats(nt)->hook_failures, 2);
	ck_assert_int_eq(seen.resigns, 0);	/* on_leader_failure: keep */
}
END_TEST

/*
 * A hook's output is logged under the hook's own pid, the one its
 * "started (pid N" line gives, even when it prints before its guard has
 * reported that pid (the guard reports once the exec has worked). The
 * hook prints its pid at once; 30 terms make the race likely.
 */
START_TEST(test_hook_output_under_its_pid)
{
	char *log, *at, want[64];
	int i, lines = 0;

	conf.notify_on_leader = script("leader.sh", NULL,
	    "echo \"pid $$\"\n");
	for (i = 1; i <= 30; i++) {
		gain((uint64_t)i);
		lose((uint64_t)i, true, 5000);
		wait_idle();
	}
	log = logtext();
	for (at = strstr(log, "]: pid "); at != NULL;
	    at = strstr(at + 1, "]: pid ")) {
		const char *open = at, *pid = at + strlen("]: pid ");
		size_t n = strspn(pid, "0123456789");

		while (open > log && open[-1] != '[')
			open--;
		ck_assert_msg(n > 0 && (size_t)(at - open) == n &&
		    strncmp(open, pid, n) == 0, "a hook's line under another "
		    "pid: %.*s", (int)(strchr(at, '\n') - open + 1), open - 1);
		snprintf(want, sizeof(want), "started (pid %.*s,", (int)n, pid);
		ck_assert_msg(strstr(log, want) != NULL, "no '%s' in the log",
		    want);
		lines++;
	}
	ck_assert_int_eq(lines, 30);
	free(log);
}
END_TEST

/* on_leader_failure: resign: a failed on_leader resigns, with a hold
 * that doubles on each failure in a row. */
START_TEST(test_hook_failure_resigns)
{
	int one = 1, two = 2;

	conf.notify_resign_on_failure = true;
	conf.notify_on_leader = script("leader.sh", NULL,
	    "note on_leader $ZKELECT_EPOCH\nexit 1\n");

	gain(1);
	/* The resign comes from the loop, after the hook was reaped. */
	ck_assert(run_until(resigned, &one, WAIT_MS));
	ck_assert(trace_has("on_leader 1"));
	ck_assert_int_eq(seen.resigns, 1);
	ck_assert_int_eq(seen.resign_hold, 1000);
	lose(1, true, 5000);
	ck_assert(run_until(told_count, &one, WAIT_MS));
	gain(2);
	ck_assert(run_until(resigned, &two, WAIT_MS));
	ck_assert_int_eq(seen.resigns, 2);
	ck_assert_int_eq(seen.resign_hold, 2000);
	assert_log_has("on_leader failed; resigning (hold 2s)");
}
END_TEST

/* --- signals to the app's pidfile --- */

/* Starts an app that notes USR1 and USR2; returns its pid. */
static pid_t
start_app(void)
{
	char **argv = script("app.sh", NULL,
	    "trap 'note usr1' USR1\ntrap 'note usr2' USR2\n"
	    "note app ready\nwhile :; do sleep 1 & wait $!; done\n");
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	argv_free(argv);
	wait_for_trace("app ready");
	return pid;
}

static void
stop_app(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);	/* or notify reaped it: either way gone */
}

START_TEST(test_pidfile_signals)
{
	char text[32];
	pid_t app = start_app();

	conf.notify_pidfile = strdup(in_dir("app.pid"));
	conf.notify_leader_signal = SIGUSR1;
	conf.notify_follower_signal = SIGUSR2;
	snprintf(text, sizeof(text), "%d\n", (int)app);
	write_file(conf.notify_pidfile, text);

	gain(3);
	wait_for_trace("usr1");
	lose(1, true, 5000);
	wait_for_trace("usr2");
	stop_app(app);
	assert_trace_is("app ready\nusr1\nusr2\n");
	ck_assert_int_eq(notify_get_stats(nt)->signals, 2);
	ck_assert_int_eq(notify_get_stats(nt)->signal_failures, 0);
	snprintf(text, sizeof(text), "sent SIGUSR1 to pid %d", (int)app);
	assert_log_has(text);
	snprintf(text, sizeof(text), "sent SIGUSR2 to pid %d", (int)app);
	assert_log_has(text);
}
END_TEST

/* A missing or garbled pidfile sends nothing, and says so. */
START_TEST(test_pidfile_refused)
{
	char want[PATH_MAX + 64];
	pid_t app = start_app();

	conf.notify_pidfile = strdup(in_dir("app.pid"));
	conf.notify_leader_signal = SIGUSR1;
	conf.notify_follower_signal = SIGUSR2;

	gain(3);	/* no pidfile yet */
	snprintf(want, sizeof(want), "pidfile %s (no SIGUSR1 sent): No such "
	    "file or directory", conf.notify_pidfile);
	assert_log_has(want);
	write_file(conf.notify_pidfile, "hello\n");
	lose(1, true, 5000);
	assert_log_has("'hello' is not a pid (a decimal number in "
	    "2..2147483647); no SIGUSR2 sent");
	write_file(conf.notify_pidfile, "1\n");
	gain(4);
	assert_log_has("'1' is not a pid");
	snprintf(want, sizeof(want), "%d junk\n", (int)app);
	write_file(conf.notify_pidfile, want);
	lose(2, true, 5000);
	wait_idle();
	run_until(NULL, NULL, 200);	/* a stray signal would show */
	stop_app(app);
	assert_trace_is("app ready\n");
	ck_assert_int_eq(notify_get_stats(nt)->signals, 0);
	ck_assert_int_eq(notify_get_stats(nt)->signal_failures, 4);
}
END_TEST

/* --- the child (notify.run) --- */

/*
 * Started on gain with the leader's environment; on a loss after which our
 * node stands, SIGTERM; the loss is told only once it is gone (rule 10).
 */
START_TEST(test_child_stopped_then_told)
{
	int one = 1;

	conf.notify_run = script("child.sh", "single", CHILD_BODY);
	gain(42);
	wait_for_trace("child single leader 42");
	watch_child = read_pid("child-single.pid");
	ck_assert(alive(watch_child));
	ck_assert_int_eq(notify_get_stats(nt)->child_starts, 1);
	run_until(NULL, NULL, 100);
	ck_assert(alive(watch_child));	/* it stays while we lead */

	lose(7, true, 5000);
	ck_assert(run_until(told_count, &one, WAIT_MS));
	ck_assert_int_eq(seen.told_arg, 7);
	ck_assert_msg(!seen.child_alive_at_told, "told while the child ran");
	ck_assert(!alive(watch_child));
	assert_trace_is("child single leader 42\nterm single\n");
	assert_log_has("(SIGTERM now, SIGKILL in ");
	assert_log_has("exited with status 0");
}
END_TEST

/* A child that ignores SIGTERM is killed before the lease deadline. */
START_TEST(test_child_sigkill_before_deadline)
{
	int one = 1;
	uint64_t t0;

	conf.notify_run = script("child.sh", NULL,
	    "echo $$ > \"$D/child-stubborn.pid\"\ntrap '' TERM\n"
	    "note child\nwhile :; do sleep 0.05; done\n");
	gain(1);
	wait_for_trace("child");
	watch_child = read_pid("child-stubborn.pid");
	t0 = clock_now_ms();
	lose(1, true, 800);	/* SIGKILL 200 ms before: at 600 ms */
	ck_assert(run_until(told_count, &one, WAIT_MS));
	ck_assert_uint_ge(clock_now_ms() - t0, 550);
	ck_assert_msg(clock_now_ms() < t0 + 800 + 2000,
	    "the child outlived the lease by far");
	ck_assert(!seen.child_alive_at_told);
	assert_log_has("still running at its deadline; SIGKILL");
	assert_log_has("was killed by SIGKILL");
}
END_TEST

/* After a loss where a successor may lead already, SIGKILL at once. */
START_TEST(test_child_killed_at_once)
{
	int one = 1;

	conf.notify_run = script("child.sh", "single", CHILD_BODY);
	gain(1);
	wait_for_trace("child single");
	watch_child = read_pid("child-single.pid");
	lose(1, false, 5000);
	ck_assert(run_until(told_count, &one, 1500));
	ck_assert(!seen.child_alive_at_told);
	assert_trace_is("child single leader 1\n");	/* no "term" */
	assert_log_has("at once (SIGKILL to its process tree)");
}
END_TEST

/* notify_close ends what runs: a hook and the child, with their trees. */
START_TEST(test_close_kills_all)
{
	pid_t hook;

	conf.notify_run = script("child.sh", NULL,
	    "echo $$ > \"$D/child.pid\"\ntrap '' TERM\n"
	    "note child\nwhile :; do sleep 0.05; done\n");
	conf.notify_on_follower = script("follower.sh", NULL,
	    "echo $$ > \"$D/hook.pid\"\nnote hook\nsleep 60\n");
	gain(1);
	wait_for_trace("child");
	watch_child = read_pid("child.pid");
	/* The child ignores SIGTERM, with a minute until its SIGKILL. */
	lose(1, true, 60000);
	wait_for_trace("hook");
	hook = read_pid("hook.pid");
	ck_assert(alive(hook));
	ck_assert(alive(watch_child));
	notify_close(nt);
	nt = NULL;
	ck_assert(!alive(hook));
	ck_assert(!alive(watch_child));
	assert_log_has("on_follower hook (pid ");
	assert_log_has("still running at exit; killing its process tree");
	ck_assert_int_eq(seen.told, 0);
}
END_TEST

/* --- partitions --- */

/*
 * Each partition's hooks see ZKELECT_PARTITION and its own epoch; each
 * has its own child with "{partition}" replaced; a partition's loss is
 * told once its on_follower has ended and its child is dead (rule 10),
 * while the other partition's child runs on.
 */
START_TEST(test_partitions)
{
	int p0 = 0, p1 = 1;
	char *t, *l0, *l1, *c0, *c1;

	conf.notify_on_leader = script("leader.sh", NULL,
	    "note on_leader $ZKELECT_PARTITION $ZKELECT_EPOCH\n");
	conf.notify_on_follower = script("follower.sh", NULL,
	    "P=$ZKELECT_PARTITION\nnote on_follower $P $ZKELECT_ROLE\n"
	    "while [ ! -e \"$D/go-$P\" ]; do sleep 0.01; done\n"
	    "note on_follower end $P\n");
	conf.notify_run = script("child.sh", "{partition}", SLOW_CHILD_BODY);

	part_gain(0, 100);
	part_gain(1, 200);
	wait_for_trace("child p0");
	wait_for_trace("child p1");
	watch_part_child[0] = read_pid("child-p0.pid");
	watch_part_child[1] = read_pid("child-p1.pid");
	ck_assert_int_eq(notify_get_stats(nt)->child_starts, 2);
	/* on_leader before each partition's child, in the order of gains. */
	t = trace();
	l0 = strstr(t, "on_leader p0 100\n");
	l1 = strstr(t, "on_leader p1 200\n");
	c0 = strstr(t, "child p0 leader 100 p0\n");
	c1 = strstr(t, "child p1 leader 200 p1\n");
	ck_assert_msg(l0 && l1 && c0 && c1, "trace:\n%s", t);
	ck_assert_msg(l0 < l1 && l0 < c0 && l1 < c1, "trace:\n%s", t);
	free(t);

	/* p0 lost: on_follower ends first, the child lingers after SIGTERM. */
	part_lose(0, 3);
	wait_for_trace("on_follower p0 follower\n");
	wait_for_trace("term p0\n");
	write_file(in_dir("go-p0"), "");
	wait_for_trace("on_follower end p0\n");
	run_until(NULL, NULL, 200);
	ck_assert_int_eq(seen.part_told[0], 0);
	write_file(in_dir("die-p0"), "");
	ck_assert(run_until(part_told_count, &p0, WAIT_MS));
	ck_assert_int_eq(seen.part_told_arg[0], 3);
	ck_assert(!seen.part_child_alive_at_told[0]);
	ck_assert(alive(watch_part_child[1]));	/* p1's runs on */
	ck_assert_int_eq(seen.part_told[1], 0);

	/* p1 lost: the child goes first, on_follower still runs. */
	part_lose(1, 4);
	wait_for_trace("on_follower p1 follower\n");
	wait_for_trace("term p1\n");
	write_file(in_dir("die-p1"), "");
	ck_assert(run_until(proc_gone, &watch_part_child[1], WAIT_MS));
	run_until(NULL, NULL, 200);
	ck_assert_int_eq(seen.part_told[1], 0);
	write_file(in_dir("go-p1"), "");
	ck_assert(run_until(part_told_count, &p1, WAIT_MS));
	ck_assert(trace_has("on_follower end p1\n"));
	ck_assert_int_eq(seen.part_told_arg[1], 4);
	ck_assert_int_eq(seen.part_told[0], 1);
	ck_assert_int_eq(seen.told, 0);
}
END_TEST

static Suite *
notify_suite(void)
{
	Suite *s = suite_create("notify");
	TCase *tc;

	tc = tcase_create("pidfile");
	tcase_add_test(tc, test_good_pids);
	tcase_add_test(tc, test_bad_pids);
	suite_add_tcase(s, tc);
	tc = tcase_create("argv");
	tcase_add_test(tc, test_argv_part);
	suite_add_tcase(s, tc);

	tc = tcase_create("hooks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hooks_in_order);
	tcase_add_test(tc, test_child_after_on_leader);
	tcase_add_test(tc, test_unstarted_term_skipped);
	tcase_add_test(tc, test_hook_environment);
	tcase_add_test(tc, test_leader_change_once_per_leader);
	tcase_add_test(tc, test_hook_timeout);
	tcase_add_test(tc, test_hook_timeout_sigkill);
	tcase_add_test(tc, test_hook_failure);
	tcase_add_test(tc, test_hook_output_under_its_pid);
	tcase_add_test(tc, test_hook_failure_resigns);
	suite_add_tcase(s, tc);

	tc = tcase_create("signals");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pidfile_signals);
	tcase_add_test(tc, test_pidfile_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("child");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_child_stopped_then_told);
	tcase_add_test(tc, test_child_sigkill_before_deadline);
	tcase_add_test(tc, test_child_killed_at_once);
	tcase_add_test(tc, test_close_kills_all);
	tcase_add_test(tc, test_partitions);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	sr = srunner_create(notify_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
