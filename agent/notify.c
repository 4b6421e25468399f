/* SPDX-License-Identifier: MIT */
/*
 * Telling the app: hooks, signals and the supervised child.
 *
 * Hooks run one at a time, in the order of the transitions, each under
 * hook_timeout (then SIGTERM, then SIGKILL). A loss of leadership stops the
 * supervised child at once (SIGTERM, then SIGKILL before the lease could
 * lapse; SIGKILL straight away when our node may be gone, since a successor
 * may lead already), sends the follower signal and queues on_follower; the
 * election lets its node go only when all of that is done (EV_NOTIFIED).
 *
 * Every hook and the child run under a guard process (guard.c): their whole
 * process tree ends with them and with the agent, even on kill -9. Their
 * output comes back through a pipe and is logged line by line (as JSON
 * with log.format json). A queued step owns a copy of what it will run, so
 * that a reload cannot pull it away. Guards are reaped from SIGCHLD in the
 * loop.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "agent.h"
#include "clock.h"
#include "guard.h"
#include "log.h"
#include "notify.h"

#define NOTIFY_QUEUE_MAX	16
#define NOTIFY_KILL_GRACE_MS	2000	/* hook: SIGTERM -> SIGKILL */
#define NOTIFY_KILL_MARGIN_MS	200	/* child: SIGKILL this long before the lease ends */
#define NOTIFY_REAP_MS		2000	/* a guard told to kill is gone within this */
#define NOTIFY_LINE_MAX		1024	/* output lines longer than this are split */
#define NOTIFY_HOLD_MIN_MS	1000	/* on_leader_failure: resign: the first hold, */
#define NOTIFY_HOLD_MAX_MS	300000	/* doubled on each failure in a row, up to this */

extern char **environ;

#define NOTIFY_KILL_GRACE_MS	2000	/* hook: SIGTERM -> SIGKILL */
#define NOTIFY_KILL_MARGIN_MS	200	/* child: SIGKILL this long before the lease ends */
#define NOTIFY_REAP_MS		2000	/* a guard told to kill is gone within this */
#define NOTIFY_LINE_MAX		1024	/* output lines longer than this are split */
#define NOTIFY_HOLD_MIN_MS	1000	/* on_leader_failure: resign: the first hold, */
#define NOTIFY_HOLD_MAX_MS	300000	/* doubled on each failure in a row, up to this */

extern char **environ;

enum notify_step {
	STEP_HOOK_LEADER,
	STEP_HOOK_FOLLOWER,
	STEP_HOOK_CHANGE,
	STEP_START_CHILD,
};

struct notify_item {
	enum notify_step step;
	enum election_role role;	/* the role it announces */
	uint64_t	 epoch;		/* ours, while leading */
	char		 leader_id[ELECTION_ID_MAX];
	uint64_t	 leader_epoch;	/* 0: no leader known */
	char		*leader_value;	/* owned */
	char		 reason[64];
	uint64_t	 term;		/* which of its part's terms it is of */
	char		**argv;		/* owned copy: a reload cannot change it */
	struct part	*part;		/* whose change (the single election is
					   part 0, unnamed) */
	bool		 ack;		/* acknowledge the loss once it ends */
	uint64_t	 ack_told;	/* ... numbered this */
};

/* A hook or a child, running under its guard. */
struct notify_proc {
	struct notify	*n;
	struct guard	 g;		/* g.pid > 0 while it runs */
	struct notify_item it;		/* what runs (owns it.argv) */
	pid_t		 cmd;		/* the command itself, once the guard said */
	uint64_t	 started;
	struct event	*ev_out, *ev_ctl;
	char		 line[NOTIFY_LINE_MAX + 1];
	size_t		 len;
};

/* One part's app side: its child (notify.run), its losses to acknowledge,
 * the leader it last reported. The single election is part 0. */
struct notify_child {
	struct notify	*n;
	struct part	*part;
	struct notify_proc p;
	bool		 stopping;
	uint64_t	 kill_at;
	struct event	*timer;
	uint64_t	 term;		/* bumped on each gain */
	char		**run;		/* notify.run as of the gain: a reload
					   changes it from the next term on */
	bool		 start_owed;	/* start once the last one is reaped */
	bool		 owe;		/* a loss to acknowledge once it is dead */
	uint64_t	 owe_told;
	bool		 seen_leader;	/* on_leader_change: the last reported */
	bool		 seen_duplicate; /* warned of a duplicate id */
	char		 seen_id[ELECTION_ID_MAX];
	uint64_t	 seen_epoch;
	unsigned	 failures;	/* on_leader failures in a row */
};

struct notify {
	struct agent	*agent;
	struct notify_cb cb;
	/* hooks of every part, one at a time, in the order of the changes */
	struct notify_item *q;
	int		 qhead, qlen, qcap;

	struct notify_proc hook;
	int		 hook_stage;	/* 0 running, 1 SIGTERM sent, 2 SIGKILL sent */
	struct event	*hook_timer;

	struct notify_child *c;		/* one per part */
	int		 nc;

	/* on_leader_failure: resign */
	uint64_t	 resign_hold_ms;
	uint64_t	 resign_term;
	struct part	*resign_part;
	struct event	*ev_resign;

	/* notify.run_exit: stop: how the child ended, for main.c */
	int		 run_status;
	bool		 run_by_itself;
	struct event	*ev_run_exited;

	struct event	*ev_sigchld;
	struct notify_stats stats;
};

static void	notify_progress(struct notify *);

/* The name a step's process goes by in the log. */
static const char *
notify_source(enum notify_step s)
{
	switch (s) {
	case STEP_HOOK_LEADER:		return "on_leader";
	case STEP_HOOK_FOLLOWER:	return "on_follower";
	case STEP_HOOK_CHANGE:		return "on_leader_change";
	default:			return "run";
	}
}

static const char *
notify_label(enum notify_step s)
{
	switch (s) {
	case STEP_HOOK_LEADER:		return "on_leader hook";
	case STEP_HOOK_FOLLOWER:	return "on_follower hook";
	case STEP_HOOK_CHANGE:		return "on_leader_change hook";
	default:			return "child";
	}
}

/* "SIGKILL", or "signal 40" for one without a name. */
static const char *
notify_signame(int sig, char *buf, size_t len)
{
	const char *abbrev = sigabbrev_np(sig);

	if (abbrev != NULL)
		snprintf(buf, len, "SIG%s", abbrev);
	else
		snprintf(buf, len, "signal %d", sig);
	return buf;
}

/* How a process ended, for the log: "exited with status 3", ... */
static const char *
notify_how(int status, char *buf, size_t len)
{
	char sig[32];

	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by %s",
		    notify_signame(WTERMSIG(status), sig, sizeof(sig)));
	else
		snprintf(buf, len, "ended (wait status %d)", status);
	return buf;
}

static char **
notify_argv_dup(char *const *argv)
{
	size_t n = 0, i;
	char **copy;

	while (argv[n] != NULL)
		n++;
	if ((copy = calloc(n + 1, sizeof(*copy))) == NULL)
		abort();
	for (i = 0; i < n; i++)
		if ((copy[i] = strdup(argv[i])) == NULL)
			abort();
	return copy;
}

/* A copy of ARGV with each "{partition}" replaced by NAME (see notify.h). */
char **
notify_argv_part(char *const *argv, const char *name)
{
	static const char key[] = "{partition}";
	size_t n = 0, i, klen = sizeof(key) - 1, nlen = strlen(name), len;
	const char *src, *at;
	char **copy, *dst;

	while (argv[n] != NULL)
		n++;
	if ((copy = calloc(n + 1, sizeof(*copy))) == NULL)
		abort();
	for (i = 0; i < n; i++) {
		len = strlen(argv[i]);
		for (at = argv[i]; (at = strstr(at, key)) != NULL; at += klen)
			len += nlen;	/* at most: the key's own length spare */
		if ((copy[i] = malloc(len + 1)) == NULL)
			abort();
		dst = copy[i];
		for (src = argv[i]; (at = strstr(src, key)) != NULL;
		    src = at + klen) {
			memcpy(dst, src, (size_t)(at - src));
			dst += at - src;
			memcpy(dst, name, nlen);
			dst += nlen;
		}
		strcpy(dst, src);
	}
	return copy;
}

static void
notify_argv_free(char **argv)
{
	size_t i;

	for (i = 0; argv != NULL && argv[i] != NULL; i++)
		free(argv[i]);
	free(argv);
}

static void
notify_item_free(struct notify_item *it)
{
	notify_argv_free(it->argv);
	free(it->leader_value);
	it->argv = NULL;
	it->leader_value = NULL;
}

/* Variables of ours that describe the agent to systemd, not to the app. */
static bool
notify_env_strip(const char *var)
{
	static const char *const strip[] = {
		"ZKELECT_", "NOTIFY_SOCKET=", "WATCHDOG_", "LISTEN_FDS=",
		"LISTEN_PID=", "LISTEN_FDNAMES=", NULL
	};
	int i;

	for (i = 0; strip[i] != NULL; i++)
		if (strncmp(var, strip[i], strlen(strip[i])) == 0)
			return true;
	return false;
}

/* The environment of a hook or child: ours, with ZKELECT_* set and the
 * systemd variables meant for the agent alone taken out. */
static char **
notify_env(struct notify *n, const struct notify_item *it)
{
	const struct config *conf = n->agent->conf;
	size_t count = 0, i, k = 0;
	char **env;

	while (environ[count] != NULL)
		count++;
	env = calloc(count + 10, sizeof(*env));
	if (env == NULL)
		abort();
	for (i = 0; i < count; i++)
		if (!notify_env_strip(environ[i]) &&
		    (env[k++] = strdup(environ[i])) == NULL)
			abort();
	if (asprintf(&env[k++], "ZKELECT_ROLE=%s", election_role_name(it->role)) < 0 ||
	    (it->epoch != 0 ?
	    asprintf(&env[k++], "ZKELECT_EPOCH=%" PRIu64, it->epoch) :
	    asprintf(&env[k++], "ZKELECT_EPOCH=")) < 0 ||
	    asprintf(&env[k++], "ZKELECT_ID=%s", conf->election_id) < 0 ||
	    asprintf(&env[k++], "ZKELECT_LEADER_ID=%s", it->leader_id) < 0 ||
	    (it->leader_epoch != 0 ?
	    asprintf(&env[k++], "ZKELECT_LEADER_EPOCH=%" PRIu64, it->leader_epoch) :
	    asprintf(&env[k++], "ZKELECT_LEADER_EPOCH=")) < 0 ||
	    asprintf(&env[k++], "ZKELECT_LEADER_VALUE=%s",
	    it->leader_value != NULL ? it->leader_value : "") < 0 ||
	    asprintf(&env[k++], "ZKELECT_PATH=%s", conf->election_path) < 0 ||
	    asprintf(&env[k++], "ZKELECT_SOCKET=%s", conf->api_socket) < 0)
		abort();
	if (it->part != NULL && it->part->name != NULL &&
	    asprintf(&env[k++], "ZKELECT_PARTITION=%s", it->part->name) < 0)
		abort();
	env[k] = NULL;
	return env;
}

static void
notify_env_free(char **env)
{
	size_t i;

	for (i = 0; env[i] != NULL; i++)
		free(env[i]);
	free(env);
}

/* A pidfile's text as a pid in 2..INT_MAX (see notify.h). */
int
notify_parse_pid(const char *text, pid_t *pid)
{
	const char *p = text;
	long long v = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (*p - '0');
		if (v > INT_MAX)
			return -1;
	}
	while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
		p++;
	if (*p != '\0' || v < 2)
		return -1;
	*pid = (pid_t)v;
	return 0;
}

/*
 * pidfile + signal: a missing, stale or unreadable pidfile is a warning, no
 * more. The pid must be one process (never 0, 1, -1 or a group). As root,
 * a pidfile that is a symbolic link or writable by others is refused: its
 * owner could aim our signal at any process.
 */
static void
notify_signal_app(struct notify *n, int sig)
{
	const char *file = n->agent->conf->notify_pidfile;
	char buf[64], show[32], name[32];
	bool root = geteuid() == 0;
	struct stat st;
	ssize_t got;
	size_t i;
	pid_t pid;
	int fd;

	if (file == NULL || sig == 0)
		return;
	notify_signame(sig, name, sizeof(name));
	fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
	    (root ? O_NOFOLLOW : 0));
	if (fd == -1) {
		if (root && errno == ELOOP)
			log_warnx("notify: pidfile %s is a symbolic link; the agent "
			    "runs as root and does not follow it (no %s sent)",
			    file, name);
		else
			log_warn("notify: pidfile %s (no %s sent)", file, name);
		goto fail;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		log_warnx("notify: pidfile %s is not a regular file (no %s sent)",
		    file, name);
		close(fd);
		goto fail;
	}
	if (root && (st.st_mode & S_IWOTH) != 0) {
		log_warnx("notify: pidfile %s is writable by others; the agent "
		    "runs as root and does not trust it (no %s sent)", file, name);
		close(fd);
		goto fail;
	}
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got < 0) {
		log_warn("notify: pidfile %s (no %s sent)", file, name);
		goto fail;
	}
	buf[got] = '\0';
	if ((size_t)got == sizeof(buf) - 1 || notify_parse_pid(buf, &pid) == -1) {
		for (i = 0; i < sizeof(show) - 1 && buf[i] != '\0' &&
		    buf[i] != '\n'; i++)
			show[i] = (buf[i] < 0x20 || buf[i] == 0x7f) ? '?' : buf[i];
		show[i] = '\0';
		log_warnx("notify: pidfile %s: '%s' is not a pid (a decimal "
		    "number in 2..%d); no %s sent", file, show, INT_MAX, name);
		goto fail;
	}
	if (kill(pid, sig) == -1) {
		log_warn("notify: %s to pid %d (from %s)", name, (int)pid, file);
		goto fail;
	}
	n->stats.signals++;
	log_info("notify: sent %s to pid %d (from %s)", name, (int)pid, file);
	return;
fail:
	n->stats.signal_failures++;
}

/* --- the queue of hooks --- */

/* A new item at the queue's end, zeroed. */
static struct notify_item *
notify_push(struct notify *n)
{
	struct notify_item *it, *grown;
	int i;

	if (n->qlen == n->qcap) {
		grown = calloc((size_t)(n->qcap == 0 ? 16 : n->qcap * 2),
		    sizeof(*grown));
		if (grown == NULL)
			abort();
		for (i = 0; i < n->qlen; i++)
			grown[i] = n->q[(n->qhead + i) % n->qcap];
		free(n->q);
		n->q = grown;
		n->qhead = 0;
		n->qcap = n->qcap == 0 ? 16 : n->qcap * 2;
	}
	it = &n->q[(n->qhead + n->qlen++) % n->qcap];
	memset(it, 0, sizeof(*it));
	return it;
}

/* ARGV for part pt: with partitions, each "{partition}" replaced by its
 * name; else as written. */
static char **
notify_argv_for(char *const *argv, const struct part *pt)
{
	return pt->name != NULL ? notify_argv_part(argv, pt->name) :
	    notify_argv_dup(argv);
}

/* An item of pt announcing ROLE with the leader of report r (ours while
 * we lead). */
static void
notify_item_fill(struct notify *n, struct notify_item *it, struct part *pt,
    enum notify_step step, enum election_role role, const char *reason,
    char *const *argv)
{
	const struct config *conf = n->agent->conf;
	struct election_report r;

	it->step = step;
	it->role = role;
	it->term = n->c[pt->idx].term;
	it->argv = notify_argv_for(argv, pt);
	it->part = pt;
	snprintf(it->reason, sizeof(it->reason), "%s", reason);
	if (role == ELECTION_LEADER) {
		it->epoch = pt->e.epoch;
		snprintf(it->leader_id, sizeof(it->leader_id), "%s",
		    conf->election_id);
		it->leader_epoch = it->epoch;
		if (conf->election_value != NULL &&
		    (it->leader_value = strdup(conf->election_value)) == NULL)
			abort();
		return;
	}
	election_report(&pt->e, &r);
	if (r.has_leader) {
		snprintf(it->leader_id, sizeof(it->leader_id), "%s",
		    r.leader_id);
		it->leader_epoch = r.leader_epoch;
		if (r.has_value &&
		    (it->leader_value = strdup(r.leader_value)) == NULL)
			abort();
	}
}

/* Drops pt's queued, not started, items of STEP (and of term, unless 0);
 * true if one went. */
static bool
notify_drop(struct notify *n, const struct part *pt, enum notify_step step,
    uint64_t term)
{
	struct notify_item *it;
	bool gone = false;
	int i, k = 0;

	for (i = 0; i < n->qlen; i++) {
		it = &n->q[(n->qhead + i) % n->qcap];
		if (it->part == pt && it->step == step &&
		    (term == 0 || it->term == term)) {
			if (step != STEP_HOOK_CHANGE)
				log_info("notify: skipping %s of a term already "
				    "over", notify_label(step));
			notify_item_free(it);
			gone = true;
		} else
			n->q[(n->qhead + k++) % n->qcap] = *it;
	}
	n->qlen = k;
	return gone;
}

/* --- the processes: output, report, start, end --- */

static void
notify_proc_line(struct notify_proc *p)
{
	p->line[p->len] = '\0';
	log_output(notify_source(p->it.step), (long)(p->cmd > 0 ? p->cmd :
	    p->g.pid), p->line);
	p->len = 0;
}

/* Reads the guard's report (the command's pid, or why it could not run). */
static void
notify_proc_report(struct notify_proc *p)
{
	const struct config *conf = p->n->agent->conf;
	char why[512];
	pid_t pid;
	int err, rc;

	if (p->ev_ctl == NULL)
		return;
	if ((rc = guard_report(&p->g, &pid, &err)) == 0)
		return;
	event_free(p->ev_ctl);
	p->ev_ctl = NULL;
	/* Now its output, under the pid just learnt (or the guard's). */
	if (p->ev_out != NULL)
		event_add(p->ev_out, NULL);
	if (rc == -1)
		return;
	p->cmd = pid;
	if (err != 0) {
		/* ENOENT for a file that is there: its #! interpreter is not. */
		if ((err == ENOENT || err == EACCES) && config_check_interpreter(
		    p->it.argv[0], why, sizeof(why)) == -1)
			log_warnx("notify: %s: cannot run %s: %s",
			    notify_label(p->it.step), p->it.argv[0], why);
		else
			log_warnx("notify: %s: cannot run %s: %s",
			    notify_label(p->it.step), p->it.argv[0], strerror(err));
		return;
	}
	if (p->it.step == STEP_START_CHILD)
		log_info("notify: child %s started (pid %d, epoch %" PRIu64
		    "%s%s)", p->it.argv[0], (int)pid, p->it.epoch,
		    p->it.part->name != NULL ? ", partition " : "",
		    p->it.part->name != NULL ? p->it.part->name : "");
	else if (p->it.step == STEP_HOOK_CHANGE)
		log_info("notify: %s %s started (pid %d, leader %s, epoch %"
		    PRIu64 ")", notify_label(p->it.step), p->it.argv[0],
		    (int)pid, p->it.leader_id, p->it.leader_epoch);
	else
		log_info("notify: %s %s started (pid %d, role %s, %s; timeout "
		    "%" PRIu64 " ms)", notify_label(p->it.step), p->it.argv[0],
		    (int)pid, election_role_name(p->it.role), p->it.reason,
		    conf->notify_hook_timeout_ms);
}

/* Logs what the process printed, line by line; at end of file, the rest
 * (only once its pid is known: notify_proc_start). */
static void
notify_proc_read(struct notify_proc *p)
{
	char buf[4096];
	ssize_t got, i;

	if (p->ev_out == NULL)
		return;
	for (;;) {
		got = read(p->g.out, buf, sizeof(buf));
		if (got == -1 && errno == EINTR)
			continue;
		if (got == -1 && errno == EAGAIN)
			return;
		if (got <= 0)
			break;
		for (i = 0; i < got; i++) {
			if (buf[i] == '\n') {
				notify_proc_line(p);
				continue;
			}
			p->line[p->len++] = buf[i];
			if (p->len == NOTIFY_LINE_MAX)
				notify_proc_line(p);
		}
	}
	if (p->len > 0)
		notify_proc_line(p);
	event_free(p->ev_out);
	p->ev_out = NULL;
}

static void
notify_out_cb(evutil_socket_t fd, short what, void *arg)
{
	notify_proc_read(arg);
}

static void
notify_ctl_cb(evutil_socket_t fd, short what, void *arg)
{
	notify_proc_report(arg);
}

/* Starts IT (whose copies P takes over) under a guard; -1 if it cannot. */
static int
notify_proc_start(struct notify *n, struct notify_proc *p,
    struct notify_item *it)
{
	char **env;
	int rc;

	env = notify_env(n, it);
	/* notify.run_output: inherit: the child writes where we do. */
	rc = guard_spawn(&p->g, it->argv, env, it->step == STEP_START_CHILD &&
	    n->agent->conf->notify_run_inherit ? 0 : GUARD_CAPTURE);
	notify_env_free(env);
	if (rc == -1) {
		log_warn("notify: %s: cannot start %s", notify_label(it->step),
		    it->argv[0]);
		notify_item_free(it);
		p->g.pid = 0;
		return -1;
	}
	p->n = n;
	p->it = *it;
	p->cmd = 0;
	p->len = 0;
	p->started = clock_now_ms();
	p->ev_out = p->g.out == -1 ? NULL : event_new(n->agent->base, p->g.out,
	    EV_READ | EV_PERSIST, notify_out_cb, p);
	p->ev_ctl = event_new(n->agent->base, p->g.ctl, EV_READ | EV_PERSIST,
	    notify_ctl_cb, p);
	/*
	 * The guard reports the command's pid once its exec has worked, and
	 * the command may print before that: its output is read only after
	 * the report (or the guard's end), so that every line carries the
	 * pid its "started (pid N" line gives. A command that fills the pipe
	 * meanwhile waits for moments; the guard does not.
	 */
	if (p->ev_ctl != NULL)
		event_add(p->ev_ctl, NULL);
	else if (p->ev_out != NULL)
		event_add(p->ev_out, NULL);
	return 0;
}

/* The guard is reaped: take its last words and output, close up. */
static void
notify_proc_finish(struct notify_proc *p)
{
	notify_proc_report(p);
	notify_proc_read(p);
	if (p->ev_ctl != NULL)
		event_free(p->ev_ctl);
	p->ev_ctl = NULL;
	guard_release(&p->g);
	p->g.pid = 0;
}

/* pid for the log: the command's, else its guard's. */
static int
notify_proc_pid(const struct notify_proc *p)
{
	return (int)(p->cmd > 0 ? p->cmd : p->g.pid);
}

/* --- on_leader_failure: resign --- */

static void
notify_resign_cb(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;
	struct part *pt = n->resign_part;

	if (pt == NULL || n->resign_term != n->c[pt->idx].term ||
	    pt->e.role != ELECTION_LEADER)
		return;		/* that term is over anyway */
	n->cb.resign(n->cb.arg, pt, n->resign_hold_ms);
}

/*
 * on_leader of IT ended (OK or not). With on_leader_failure: resign, a
 * failure hands the term over, and rejoins after a hold that doubles on
 * each failure in a row, so that an election of one does not spin.
 */
static void
notify_leader_hook_done(struct notify *n, const struct notify_item *it, bool ok)
{
	struct notify_child *c = &n->c[it->part->idx];
	const struct election *e = &it->part->e;
	uint64_t hold = NOTIFY_HOLD_MIN_MS;
	unsigned i;

	if (ok) {
		c->failures = 0;
		return;
	}
	if (!n->agent->conf->notify_resign_on_failure || it->term != c->term ||
	    e->role != ELECTION_LEADER || e->stopping)
		return;
	c->failures++;
	for (i = 1; i < c->failures && hold < NOTIFY_HOLD_MAX_MS; i++)
		hold *= 2;
	if (hold > NOTIFY_HOLD_MAX_MS)
		hold = NOTIFY_HOLD_MAX_MS;
	log_warnx("notify: on_leader failed; resigning (hold %" PRIu64 "s)",
	    hold / 1000);
	n->resign_hold_ms = hold;
	n->resign_term = it->term;
	n->resign_part = it->part;
	/* Not from inside the reaping: from the loop, right after. */
	event_active(n->ev_resign, EV_TIMEOUT, 0);
}

/* notify.run_exit: stop: tells main.c how the child ended. */
static void
notify_run_exited_cb(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;

	n->cb.run_exited(n->cb.arg, n->run_status, n->run_by_itself);
}

/* --- the child --- */

/*
 * After a release (the node goes after EV_NOTIFIED) or a loss that leaves
 * our node standing until the lease deadline (the election says which),
 * nobody can claim before our lease ends: the child gets SIGTERM and time
 * until shortly before the deadline. After any other loss a successor may
 * lead already, and the child is killed at once.
 */
static void
notify_child_stop(struct notify_child *c, uint64_t deadline, bool at_once,
    const char *why)
{
	uint64_t now = clock_now_ms(), kill_at, wait_ms;
	struct timeval tv;
	char in[CONFIG_PARTITION_NAME_MAX + 16] = "";

	if (c->p.g.pid <= 0 || (c->stopping && !at_once))
		return;
	if (c->part->name != NULL)
		snprintf(in, sizeof(in), " of partition %s", c->part->name);
	if (at_once) {
		if (c->stopping && c->kill_at <= now)
			return;
		log_warnx("notify: stopping child %d%s at once (SIGKILL to its "
		    "process tree): the term ended with '%s', so our node may "
		    "be gone and a successor may lead already",
		    notify_proc_pid(&c->p), in, why);
		c->stopping = true;
		c->kill_at = now;
		evtimer_del(c->timer);
		guard_kill(&c->p.g);
		return;
	}
	c->stopping = true;
	/*
	 * The child must be dead before the lease could have lapsed: SIGKILL
	 * shortly before the deadline of the term that just ended.
	 */
	kill_at = deadline > now + NOTIFY_KILL_MARGIN_MS ?
	    deadline - NOTIFY_KILL_MARGIN_MS : now;
	wait_ms = kill_at - now;
	c->kill_at = kill_at;
	if (wait_ms == 0) {
		log_info("notify: stopping child %d%s (SIGKILL: the lease is "
		    "over)", notify_proc_pid(&c->p), in);
		guard_kill(&c->p.g);
		return;
	}
	log_info("notify: stopping child %d%s (SIGTERM now, SIGKILL in %"
	    PRIu64 " ms)", notify_proc_pid(&c->p), in, wait_ms);
	guard_term(&c->p.g);
	tv.tv_sec = (time_t)(wait_ms / 1000);
	tv.tv_usec = (suseconds_t)(wait_ms % 1000) * 1000;
	evtimer_add(c->timer, &tv);
}

static void
notify_child_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct notify_child *c = arg;

	if (c->p.g.pid > 0) {
		log_warnx("notify: child %d%s%s still running at its deadline; "
		    "SIGKILL to its process tree", notify_proc_pid(&c->p),
		    c->part->name != NULL ? " of partition " : "",
		    c->part->name != NULL ? c->part->name : "");
		guard_kill(&c->p.g);
	}
}

/*
 * A loss of C's part is acknowledged (EV_NOTIFIED to its election) once
 * its child is dead and its hooks that tell of the loss have ended, so
 * that its node goes only after the app has heard (rule 10). Other parts'
 * children do not count.
 */
static void
notify_settle(struct notify *n, struct notify_child *c)
{
	int i;

	if (!c->owe || c->p.g.pid > 0)
		return;
	if (n->hook.g.pid > 0 && n->hook.it.part == c->part && n->hook.it.ack)
		return;
	for (i = 0; i < n->qlen; i++) {
		const struct notify_item *it = &n->q[(n->qhead + i) % n->qcap];

		if (it->part == c->part && it->ack)
			return;
	}
	c->owe = false;
	n->cb.told(n->cb.arg, c->part, c->owe_told);
}

/* Starts C's child for its part's current term, once the last one is gone
 * (notify.run; with partitions, "{partition}" replaced by the name). */
static void
notify_child_start(struct notify *n, struct notify_child *c)
{
	struct notify_item it;

	if (c->run == NULL || c->part->e.role != ELECTION_LEADER)
		return;
	if (c->p.g.pid > 0) {
		c->start_owed = true;
		return;
	}
	c->start_owed = false;
	memset(&it, 0, sizeof(it));
	notify_item_fill(n, &it, c->part, STEP_START_CHILD, ELECTION_LEADER,
	    "gained", c->run);
	if (notify_proc_start(n, &c->p, &it) == 0) {
		c->stopping = false;
		n->stats.child_starts++;
	}
}

/* A hook is over (or could not start): after its part's on_leader of the
 * current term the child starts; a loss may be acknowledged. */
static void
notify_hook_done(struct notify *n, const struct notify_item *it, bool ok)
{
	struct notify_child *c = &n->c[it->part->idx];

	if (it->step == STEP_HOOK_LEADER) {
		notify_leader_hook_done(n, it, ok);
		if (it->term == c->term)
			notify_child_start(n, c);
	}
	notify_settle(n, c);
}

/* A child's guard was reaped. */
static void
notify_child_reaped(struct notify *n, struct notify_child *c, int status,
    const char *how)
{
	const struct config *conf = n->agent->conf;
	bool by_itself = !c->stopping;

	notify_proc_finish(&c->p);
	(c->stopping || conf->notify_run_exit_stop ? log_info : log_warnx)(
	    "notify: child %d%s%s %s%s", notify_proc_pid(&c->p),
	    c->part->name != NULL ? " of partition " : "",
	    c->part->name != NULL ? c->part->name : "", how, c->stopping ? "" :
	    conf->notify_run_exit_stop ? " while leading (run_exit: stop)" :
	    " while leading; it is started again on the next term");
	notify_item_free(&c->p.it);
	evtimer_del(c->timer);
	c->stopping = false;
	if (conf->notify_run_exit_stop && n->cb.run_exited != NULL) {
		/* Not from inside the reaping: from the loop. */
		n->run_status = status;
		n->run_by_itself = by_itself;
		event_active(n->ev_run_exited, EV_TIMEOUT, 0);
	}
	if (c->start_owed)
		notify_child_start(n, c);
	notify_settle(n, c);
}

/* --- hooks --- */

static void
notify_hook_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;
	struct timeval grace = { NOTIFY_KILL_GRACE_MS / 1000, 0 };

	if (n->hook.g.pid <= 0)
		return;
	if (n->hook_stage == 0) {
		log_warnx("notify: %s (pid %d) timed out after %" PRIu64
		    " ms; SIGTERM", notify_label(n->hook.it.step),
		    notify_proc_pid(&n->hook),
		    n->agent->conf->notify_hook_timeout_ms);
		guard_term(&n->hook.g);
		n->hook_stage = 1;
		evtimer_add(n->hook_timer, &grace);
	} else {
		log_warnx("notify: %s (pid %d) still running %d s after SIGTERM; "
		    "SIGKILL to its process tree", notify_label(n->hook.it.step),
		    notify_proc_pid(&n->hook), NOTIFY_KILL_GRACE_MS / 1000);
		guard_kill(&n->hook.g);
		n->hook_stage = 2;
	}
}

/* Starts the next queued hook if none runs. */
static void
notify_progress(struct notify *n)
{
	const struct config *conf = n->agent->conf;
	struct notify_item it;
	struct timeval tv;

	while (n->hook.g.pid <= 0 && n->qlen > 0) {
		it = n->q[n->qhead];
		n->qhead = (n->qhead + 1) % n->qcap;
		n->qlen--;
		if (notify_proc_start(n, &n->hook, &it) == -1) {
			n->stats.hook_failures++;
			it.argv = NULL;		/* freed by notify_proc_start */
			notify_hook_done(n, &it, false);
			continue;
		}
		n->hook_stage = 0;
		tv.tv_sec = (time_t)(conf->notify_hook_timeout_ms / 1000);
		tv.tv_usec = (suseconds_t)(conf->notify_hook_timeout_ms % 1000) *
		    1000;
		evtimer_add(n->hook_timer, &tv);
	}
}

static void
notify_reaped(struct notify *n, pid_t pid, int status)
{
	uint64_t now = clock_now_ms(), took;
	struct notify_proc *p;
	struct notify_item it;
	char how[64];
	bool ok;
	int i;

	notify_how(status, how, sizeof(how));
	if (n->hook.g.pid > 0 && pid == n->hook.g.pid) {
		p = &n->hook;
		took = now - p->started;
		ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		notify_proc_finish(p);	/* its output before its end */
		(ok ? log_info : log_warnx)("notify: %s %s after %" PRIu64 " ms%s",
		    notify_label(p->it.step), how, took,
		    n->hook_stage > 0 ? " (timed out)" : "");
		n->stats.hook_runs++;
		n->stats.hook_ms_total += took;
		if (!ok)
			n->stats.hook_failures++;
		evtimer_del(n->hook_timer);
		it = p->it;
		memset(&p->it, 0, sizeof(p->it));
		notify_hook_done(n, &it, ok);
		notify_item_free(&it);
		return;
	}
	for (i = 0; i < n->nc; i++)
		if (n->c[i].p.g.pid > 0 && pid == n->c[i].p.g.pid) {
			notify_child_reaped(n, &n->c[i], status, how);
			return;
		}
}

static void
notify_sigchld_cb(evutil_socket_t sig, short what, void *arg)
{
	struct notify *n = arg;
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		notify_reaped(n, pid, status);
	notify_progress(n);
}

/*
 * A part's role changed: the signals; on_leader when a term starts,
 * on_follower when one ends (not for a part this agent merely follows),
 * with ZKELECT_PARTITION set for a partition. Hooks of every part run one
 * at a time, in the order of the changes. Each part has its own child
 * (notify.run): started after the gain's on_leader (at once without one),
 * stopped on a loss (rules 1 and 10: the child now, not after queued
 * hooks), whatever other parts' children do. If a term ends before its
 * on_leader started, both are skipped (the app never heard of it). A loss
 * is acknowledged once its hook has ended and its child is dead, so that
 * the node goes only after the app has heard (rule 10).
 */
void
notify_transition(struct notify *n, struct part *pt,
    const struct election_action *a)
{
	const struct config *conf = n->agent->conf;
	struct notify_child *c = &n->c[pt->idx];
	const char *why = election_reason_name(a->reason);
	char *const *argv = NULL;
	struct notify_item *it;

	if (a->to == ELECTION_LEADER) {
		c->term++;
		c->start_owed = false;
		notify_argv_free(c->run);
		c->run = conf->notify_run != NULL ? notify_argv_dup(conf->notify_run) :
		    NULL;
		notify_signal_app(n, conf->notify_leader_signal);
		argv = conf->notify_on_leader;
	} else if (a->from == ELECTION_LEADER) {
		c->start_owed = false;
		notify_child_stop(c, pt->e.lease_deadline, !a->node_stands, why);
		notify_signal_app(n, conf->notify_follower_signal);
		if (!notify_drop(n, pt, STEP_HOOK_LEADER, c->term))
			argv = conf->notify_on_follower;
	}
	if (a->wait) {
		c->owe = true;
		if (a->told > c->owe_told)
			c->owe_told = a->told;
	}
	if (argv == NULL) {
		if (a->to == ELECTION_LEADER)
			notify_child_start(n, c);
		notify_settle(n, c);
		notify_progress(n);
		return;
	}
	it = notify_push(n);
	notify_item_fill(n, it, pt, a->to == ELECTION_LEADER ?
	    STEP_HOOK_LEADER : STEP_HOOK_FOLLOWER, a->to, why, argv);
	it->ack = a->wait;
	it->ack_told = a->told;
	notify_progress(n);
}

/*
 * A part's report changed: when the leader it reports (by id and epoch) is
 * new, on followers and observers on_leader_change runs (with
 * ZKELECT_PARTITION for a partition); a change of the same part queued
 * and not started yet is replaced.
 */
void
notify_leader_seen(struct notify *n, struct part *pt)
{
	const struct config *conf = n->agent->conf;
	struct notify_child *c = &n->c[pt->idx];
	struct election_report r;
	enum election_role role;

	election_report(&pt->e, &r);
	if (r.duplicate_id && !c->seen_duplicate)
		log_warnx("election: another agent in %s uses this agent's "
		    "election.id '%s' (%s); ids must be unique: both take part, "
		    "but apps and operators cannot tell them apart (a restarted "
		    "agent also sees its previous run until ZooKeeper expires "
		    "that session)", pt->path, conf->election_id,
		    r.role == ELECTION_LEADER ? "it is queued next" :
		    "it leads");
	c->seen_duplicate = r.duplicate_id;
	/* Followers and observers; a partition out of the queue, on a live
	 * session, is followed (fleet_role). A partition's claim that names
	 * us (a predecessor's release read while we were out of the queue)
	 * is never told; in one election, a leader with our id is another
	 * agent (election.c never reports our own claim). */
	role = fleet_role(pt, clock_now_ms());
	if ((role != ELECTION_FOLLOWER && role != ELECTION_OBSERVER) ||
	    !r.has_leader || (pt->name != NULL &&
	    strcmp(r.leader_id, conf->election_id) == 0))
		return;
	if (c->seen_leader && c->seen_epoch == r.leader_epoch &&
	    strcmp(c->seen_id, r.leader_id) == 0)
		return;
	c->seen_leader = true;
	c->seen_epoch = r.leader_epoch;
	snprintf(c->seen_id, sizeof(c->seen_id), "%s", r.leader_id);
	if (conf->notify_on_leader_change == NULL)
		return;
	/* Only the latest leader matters: an older one not yet told goes. */
	notify_drop(n, pt, STEP_HOOK_CHANGE, 0);
	notify_item_fill(n, notify_push(n), pt, STEP_HOOK_CHANGE, role,
	    "leader changed", conf->notify_on_leader_change);
	notify_progress(n);
}

static uint64_t
notify_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX / 2 || b > UINT64_MAX / 2 ? UINT64_MAX / 2 : a + b;
}

/* How long what is queued or running may still take, at most. */
uint64_t
notify_drain_ms(const struct notify *n, uint64_t now)
{
	uint64_t per, t = 0;
	int i;

	per = notify_add(n->agent->conf->notify_hook_timeout_ms,
	    NOTIFY_KILL_GRACE_MS + NOTIFY_REAP_MS);
	if (n->hook.g.pid > 0)
		t = notify_add(t, per);
	for (i = 0; i < n->qlen; i++)
		t = notify_add(t, per);
	/* Hooks and the children's stops run side by side; the sum bounds
	 * both. */
	for (i = 0; i < n->nc; i++) {
		const struct notify_child *c = &n->c[i];

		if (c->p.g.pid > 0)
			t = notify_add(t, NOTIFY_REAP_MS + (c->stopping ?
			    (c->kill_at > now ? c->kill_at - now : 0) :
			    election_lease_remaining(&c->part->e, now)));
	}
	return t;
}

/* Sets up the queue, a child slot per part, timers and SIGCHLD handling. */
struct notify *
notify_open(struct agent *agent, const struct notify_cb *cb)
{
	struct notify *n = calloc(1, sizeof(*n));
	int i;

	if (n == NULL)
		return NULL;
	n->agent = agent;
	n->cb = *cb;
	n->nc = agent->fleet.nparts;
	if ((n->c = calloc((size_t)n->nc, sizeof(*n->c))) == NULL)
		abort();
	for (i = 0; i < n->nc; i++) {
		n->c[i].n = n;
		n->c[i].part = &agent->fleet.parts[i];
		n->c[i].timer = evtimer_new(agent->base, notify_child_timer_cb,
		    &n->c[i]);
	}
	n->hook_timer = evtimer_new(agent->base, notify_hook_timer_cb, n);
	n->ev_resign = evtimer_new(agent->base, notify_resign_cb, n);
	n->ev_run_exited = evtimer_new(agent->base, notify_run_exited_cb, n);
	n->ev_sigchld = evsignal_new(agent->base, SIGCHLD, notify_sigchld_cb, n);
	evsignal_add(n->ev_sigchld, NULL);
	return n;
}

/* At exit: P's tree is killed and its guard reaped (SIGKILLed if slow). */
static void
notify_proc_kill_wait(struct notify_proc *p)
{
	struct timespec tick = { 0, 10 * 1000 * 1000 };
	pid_t pid = p->g.pid, r;
	int i, status;

	guard_kill(&p->g);
	for (i = 0; i < NOTIFY_REAP_MS / 10; i++) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid || (r == -1 && errno != EINTR))
			goto done;
		nanosleep(&tick, NULL);
	}
	log_warnx("notify: the guard of %s (pid %d) did not end; SIGKILL",
	    notify_label(p->it.step), (int)pid);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
done:
	notify_proc_finish(p);
	notify_item_free(&p->it);
}

/* At exit: kill and reap what still runs, before the session closes. */
void
notify_close(struct notify *n)
{
	int i;

	if (n == NULL)
		return;
	if (n->hook.g.pid > 0) {
		log_warnx("notify: %s (pid %d) still running at exit; killing "
		    "its process tree", notify_label(n->hook.it.step),
		    notify_proc_pid(&n->hook));
		notify_proc_kill_wait(&n->hook);
	}
	for (i = 0; i < n->nc; i++) {
		if (n->c[i].p.g.pid > 0) {
			log_warnx("notify: child %d%s%s still running at exit; "
			    "killing its process tree",
			    notify_proc_pid(&n->c[i].p),
			    n->c[i].part->name != NULL ? " of partition " : "",
			    n->c[i].part->name != NULL ? n->c[i].part->name :
			    "");
			notify_proc_kill_wait(&n->c[i].p);
		}
		event_free(n->c[i].timer);
		notify_argv_free(n->c[i].run);
	}
	free(n->c);
	for (i = 0; i < n->qlen; i++)
		notify_item_free(&n->q[(n->qhead + i) % n->qcap]);
	free(n->q);
	event_free(n->hook_timer);
	event_free(n->ev_resign);
	event_free(n->ev_run_exited);
	event_free(n->ev_sigchld);
	free(n);
}

/* Counters for /metrics. */
const struct notify_stats *
notify_get_stats(const struct notify *n)
{
	return &n->stats;
}

/* True while a hook or a child runs, or a hook is queued. */
bool
notify_busy(const struct notify *n)
{
	int i;

	for (i = 0; i < n->nc; i++)
		if (n->c[i].p.g.pid > 0)
			return true;
	return n->hook.g.pid > 0 || n->qlen > 0;
}
