/* SPDX-License-Identifier: MIT */
/*
 * Telling the app: hooks, signals and the supervised child.
 *
 * Hooks run one at a time, in the order of the transitions, each in its own
 * process group under hook_timeout (then SIGTERM, then SIGKILL to the
 * group). A loss of leadership stops the supervised child at once (SIGTERM,
 * then SIGKILL before the lease could lapse), sends the follower signal and
 * queues on_follower; the election lets its node go only when all of that is
 * done (EV_NOTIFIED). Children are reaped from SIGCHLD in the loop.
 */
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "agent.h"
#include "clock.h"
#include "log.h"
#include "notify.h"

#define NOTIFY_QUEUE_MAX	16
#define NOTIFY_KILL_GRACE_MS	2000	/* hook: SIGTERM -> SIGKILL */
#define NOTIFY_KILL_MARGIN_MS	200	/* child: SIGKILL this long before the lease ends */

extern char **environ;

enum notify_step { STEP_HOOK_LEADER, STEP_HOOK_FOLLOWER, STEP_START_CHILD };

struct notify_item {
	enum notify_step step;
	enum election_role role;	/* the role it announces */
	uint64_t	 epoch;
	char		 leader_id[ELECTION_ID_MAX];
	char		 reason[64];
	uint64_t	 term;		/* which leadership term it belongs to */
};

struct notify {
	struct agent	*agent;
	struct notify_item q[NOTIFY_QUEUE_MAX];
	int		 qhead, qlen;
	uint64_t	 term;		/* bumped on each leadership gain */

	/* the running hook */
	pid_t		 hook_pid;
	struct notify_item hook;
	uint64_t	 hook_started;
	int		 hook_stage;	/* 0 running, 1 SIGTERM sent, 2 SIGKILL sent */
	struct event	*hook_timer;

	/* the supervised child (notify.run) */
	pid_t		 child_pid;
	uint64_t	 child_term;
	bool		 child_stopping;
	struct event	*child_timer;

	bool		 owe_notified;	/* EV_NOTIFIED once all is done */
	struct event	*ev_sigchld;
	struct notify_stats stats;
};

static void	notify_progress(struct notify *);

static const char *
notify_step_name(enum notify_step s)
{
	switch (s) {
	case STEP_HOOK_LEADER:		return "on_leader";
	case STEP_HOOK_FOLLOWER:	return "on_follower";
	default:			return "run";
	}
}

/* The environment of a hook or child: ours, with ZKELECT_* set. */
static char **
notify_env(struct notify *n, const struct notify_item *it)
{
	const struct config *conf = n->agent->conf;
	size_t count = 0, i, k = 0;
	char **env;

	while (environ[count] != NULL)
		count++;
	env = calloc(count + 6, sizeof(*env));
	if (env == NULL)
		abort();
	for (i = 0; i < count; i++)
		if (strncmp(environ[i], "ZKELECT_", 8) != 0)
			env[k++] = strdup(environ[i]);
	if (asprintf(&env[k++], "ZKELECT_ROLE=%s", election_role_name(it->role)) < 0 ||
	    (it->epoch != 0 ?
	    asprintf(&env[k++], "ZKELECT_EPOCH=%" PRIu64, it->epoch) :
	    asprintf(&env[k++], "ZKELECT_EPOCH=")) < 0 ||
	    asprintf(&env[k++], "ZKELECT_ID=%s", conf->election_id) < 0 ||
	    asprintf(&env[k++], "ZKELECT_LEADER_ID=%s", it->leader_id) < 0 ||
	    asprintf(&env[k++], "ZKELECT_PATH=%s", conf->election_path) < 0)
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

/*
 * fork + execve in a new process group, stdout joined to our stderr (the
 * agent's log). The child dies with the agent (PR_SET_PDEATHSIG) so that a
 * kill -9 of the agent cannot leave a leader-only process running.
 */
static pid_t
notify_spawn(char *const argv[], char *const env[], bool die_with_agent)
{
	pid_t pid;
	int devnull;

	pid = fork();
	if (pid == -1) {
		log_warn("notify: fork");
		return -1;
	}
	if (pid == 0) {
		sigset_t all;

		setpgid(0, 0);
		if (die_with_agent)
			prctl(PR_SET_PDEATHSIG, SIGKILL);
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		devnull = open("/dev/null", O_RDONLY);
		if (devnull != -1) {
			dup2(devnull, STDIN_FILENO);
			close(devnull);
		}
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execve(argv[0], argv, env);
		dprintf(STDERR_FILENO, "zkelectd: cannot run %s: %s\n", argv[0],
		    strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);	/* both sides, so no race with a kill */
	return pid;
}

/* pidfile + signal: a missing or stale pidfile is a warning, no more. */
static void
notify_signal_app(struct notify *n, int sig)
{
	const char *file = n->agent->conf->notify_pidfile;
	char buf[32];
	FILE *f;
	long pid;
	char *end;

	if (file == NULL || sig == 0)
		return;
	f = fopen(file, "r");
	if (f == NULL) {
		log_warn("notify: pidfile %s", file);
		n->stats.signal_failures++;
		return;
	}
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	errno = 0;
	pid = strtol(buf, &end, 10);
	if (errno != 0 || end == buf || (*end != '\0' && *end != '\n') || pid <= 1) {
		log_warnx("notify: pidfile %s holds no pid", file);
		n->stats.signal_failures++;
		return;
	}
	if (kill((pid_t)pid, sig) == -1) {
		log_warn("notify: signal %s to pid %ld (from %s)", strsignal(sig),
		    pid, file);
		n->stats.signal_failures++;
		return;
	}
	n->stats.signals++;
	log_info("notify: sent %s to pid %ld", strsignal(sig), pid);
}

static void
notify_push(struct notify *n, enum notify_step step, enum election_role role,
    const char *reason)
{
	struct notify_item *it;
	struct election_report r;

	if (n->qlen == NOTIFY_QUEUE_MAX) {
		/* Cannot happen with the cancellation below; say so if it does. */
		log_error("notify: queue full; dropping %s", notify_step_name(step));
		return;
	}
	it = &n->q[(n->qhead + n->qlen++) % NOTIFY_QUEUE_MAX];
	memset(it, 0, sizeof(*it));
	it->step = step;
	it->role = role;
	it->term = n->term;
	it->epoch = role == ELECTION_LEADER ? n->agent->election.epoch : 0;
	election_report(&n->agent->election, &r);
	snprintf(it->leader_id, sizeof(it->leader_id), "%s",
	    role == ELECTION_LEADER ? n->agent->conf->election_id :
	    r.has_leader ? r.leader_id : "");
	snprintf(it->reason, sizeof(it->reason), "%s", reason);
}

/* Drops queued, not yet started, steps of the given term; true when its
 * on_leader hook was among them (the app never heard of the term). */
static bool
notify_cancel_term(struct notify *n, uint64_t term)
{
	struct notify_item keep[NOTIFY_QUEUE_MAX];
	int i, k = 0;
	bool dropped = false;

	for (i = 0; i < n->qlen; i++) {
		struct notify_item *it = &n->q[(n->qhead + i) % NOTIFY_QUEUE_MAX];
		if (it->term == term && it->step != STEP_HOOK_FOLLOWER) {
			log_info("notify: skipping %s of a term already over",
			    notify_step_name(it->step));
			if (it->step == STEP_HOOK_LEADER)
				dropped = true;
		} else
			keep[k++] = *it;
	}
	memcpy(n->q, keep, sizeof(keep[0]) * (size_t)k);
	n->qhead = 0;
	n->qlen = k;
	return dropped;
}

static void
notify_child_stop(struct notify *n)
{
	struct election *e = &n->agent->election;
	uint64_t now = clock_now_ms(), kill_at, wait_ms;
	struct timeval tv;

	if (n->child_pid <= 0 || n->child_stopping)
		return;
	n->child_stopping = true;
	/*
	 * The child must be dead before the lease could have lapsed: SIGKILL
	 * shortly before the deadline of the term that just ended.
	 */
	kill_at = e->lease_deadline > now + NOTIFY_KILL_MARGIN_MS ?
	    e->lease_deadline - NOTIFY_KILL_MARGIN_MS : now;
	wait_ms = kill_at - now;
	log_info("notify: stopping child %d (SIGTERM now, SIGKILL in %" PRIu64
	    " ms)", (int)n->child_pid, wait_ms);
	if (wait_ms == 0) {
		kill(-n->child_pid, SIGKILL);
		return;
	}
	kill(-n->child_pid, SIGTERM);
	tv.tv_sec = (time_t)(wait_ms / 1000);
	tv.tv_usec = (suseconds_t)(wait_ms % 1000) * 1000;
	evtimer_add(n->child_timer, &tv);
}

static void
notify_child_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;

	if (n->child_pid > 0) {
		log_warnx("notify: child %d still running at its deadline; SIGKILL",
		    (int)n->child_pid);
		kill(-n->child_pid, SIGKILL);
	}
}

static void
notify_hook_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;
	struct timeval grace = { NOTIFY_KILL_GRACE_MS / 1000, 0 };

	if (n->hook_pid <= 0)
		return;
	if (n->hook_stage == 0) {
		log_warnx("notify: %s hook (pid %d) timed out; SIGTERM",
		    notify_step_name(n->hook.step), (int)n->hook_pid);
		kill(-n->hook_pid, SIGTERM);
		n->hook_stage = 1;
		evtimer_add(n->hook_timer, &grace);
	} else {
		log_warnx("notify: %s hook (pid %d) ignored SIGTERM; SIGKILL",
		    notify_step_name(n->hook.step), (int)n->hook_pid);
		kill(-n->hook_pid, SIGKILL);
		n->hook_stage = 2;
	}
}

/* Starts the next queued step if nothing runs; settles EV_NOTIFIED. */
static void
notify_progress(struct notify *n)
{
	const struct config *conf = n->agent->conf;
	struct notify_item it;
	char **env;
	config_argv argv;
	struct timeval tv;

	while (n->hook_pid <= 0 && n->qlen > 0) {
		it = n->q[n->qhead];
		n->qhead = (n->qhead + 1) % NOTIFY_QUEUE_MAX;
		n->qlen--;
		env = notify_env(n, &it);
		if (it.step == STEP_START_CHILD) {
			if (n->child_pid > 0 || it.term != n->term ||
			    n->agent->election.role != ELECTION_LEADER) {
				notify_env_free(env);
				continue;
			}
			n->child_pid = notify_spawn(conf->notify_run, env, true);
			n->child_term = it.term;
			n->child_stopping = false;
			if (n->child_pid > 0) {
				n->stats.child_starts++;
				log_info("notify: started child %d (%s, epoch %" PRIu64 ")",
				    (int)n->child_pid, conf->notify_run[0], it.epoch);
			}
			notify_env_free(env);
			continue;
		}
		argv = it.step == STEP_HOOK_LEADER ? conf->notify_on_leader :
		    conf->notify_on_follower;
		n->hook_pid = notify_spawn(argv, env, false);
		notify_env_free(env);
		if (n->hook_pid <= 0) {
			n->hook_pid = 0;
			n->stats.hook_failures++;
			continue;
		}
		n->hook = it;
		n->hook_stage = 0;
		n->hook_started = clock_now_ms();
		log_info("notify: running %s hook %s (pid %d, role %s, %s)",
		    notify_step_name(it.step), argv[0], (int)n->hook_pid,
		    election_role_name(it.role), it.reason);
		tv.tv_sec = (time_t)(conf->notify_hook_timeout_ms / 1000);
		tv.tv_usec = (suseconds_t)(conf->notify_hook_timeout_ms % 1000) * 1000;
		evtimer_add(n->hook_timer, &tv);
	}
	if (n->owe_notified && n->hook_pid <= 0 && n->qlen == 0 &&
	    n->child_pid <= 0) {
		n->owe_notified = false;
		zk_notified(n->agent->zk);
	}
}

static void
notify_reaped(struct notify *n, pid_t pid, int status)
{
	uint64_t now = clock_now_ms();
	char how[64];

	if (WIFEXITED(status))
		snprintf(how, sizeof(how), "exited %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "killed by %s", strsignal(WTERMSIG(status)));
	else
		snprintf(how, sizeof(how), "ended (status %d)", status);

	if (pid == n->hook_pid) {
		uint64_t took = now - n->hook_started;
		bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (ok)
			log_info("notify: %s hook %s after %" PRIu64 " ms",
			    notify_step_name(n->hook.step), how, took);
		else
			log_warnx("notify: %s hook %s after %" PRIu64 " ms",
			    notify_step_name(n->hook.step), how, took);
		n->stats.hook_runs++;
		n->stats.hook_ms_total += took;
		if (!ok)
			n->stats.hook_failures++;
		/* Anything left in its group goes with it. */
		kill(-pid, SIGKILL);
		evtimer_del(n->hook_timer);
		n->hook_pid = 0;
	} else if (pid == n->child_pid) {
		(n->child_stopping ? log_info : log_warnx)("notify: child %d %s",
		    (int)pid, how);
		kill(-pid, SIGKILL);
		evtimer_del(n->child_timer);
		n->child_pid = 0;
		n->child_stopping = false;
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

void
notify_transition(struct notify *n, const struct election_action *a)
{
	const struct config *conf = n->agent->conf;
	bool was_leader = a->from == ELECTION_LEADER;

	if (a->to == ELECTION_LEADER) {
		n->term++;
		notify_signal_app(n, conf->notify_leader_signal);
		if (conf->notify_on_leader != NULL)
			notify_push(n, STEP_HOOK_LEADER, a->to, a->reason);
		if (conf->notify_run != NULL)
			notify_push(n, STEP_START_CHILD, a->to, a->reason);
	} else if (was_leader) {
		/* Rule 1 and 10: the child stops now, not after queued hooks. */
		notify_child_stop(n);
		notify_signal_app(n, conf->notify_follower_signal);
		/* If on_leader of this term never started, the app never heard
		 * of the term: skip both instead of telling it twice. */
		if (!notify_cancel_term(n, n->term) &&
		    conf->notify_on_follower != NULL)
			notify_push(n, STEP_HOOK_FOLLOWER, a->to, a->reason);
	}
	if (a->wait)
		n->owe_notified = true;
	notify_progress(n);
}

struct notify *
notify_open(struct agent *agent)
{
	struct notify *n = calloc(1, sizeof(*n));

	if (n == NULL)
		return NULL;
	n->agent = agent;
	n->hook_timer = evtimer_new(agent->base, notify_hook_timer_cb, n);
	n->child_timer = evtimer_new(agent->base, notify_child_timer_cb, n);
	n->ev_sigchld = evsignal_new(agent->base, SIGCHLD, notify_sigchld_cb, n);
	evsignal_add(n->ev_sigchld, NULL);
	return n;
}

/* At exit: nothing we started may outlive us. */
void
notify_close(struct notify *n)
{
	if (n == NULL)
		return;
	if (n->hook_pid > 0) {
		kill(-n->hook_pid, SIGKILL);
		waitpid(n->hook_pid, NULL, 0);
	}
	if (n->child_pid > 0) {
		log_warnx("notify: child %d still running at exit; SIGKILL",
		    (int)n->child_pid);
		kill(-n->child_pid, SIGKILL);
		waitpid(n->child_pid, NULL, 0);
	}
	event_free(n->hook_timer);
	event_free(n->child_timer);
	event_free(n->ev_sigchld);
	free(n);
}

const struct notify_stats *
notify_get_stats(const struct notify *n)
{
	return &n->stats;
}

bool
notify_busy(const struct notify *n)
{
	return n->hook_pid > 0 || n->child_pid > 0 || n->qlen > 0;
}
