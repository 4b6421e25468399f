/* SPDX-License-Identifier: MIT */
/*
 * zkelectd: reads its configuration, opens the local API, joins the
 * ZooKeeper election and runs the libevent loop until told to stop.
 * SIGTERM and SIGINT stop gracefully: the app is told first, then our node
 * is deleted, so the successor takes over in one round trip (rule 10).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <limits.h>
#include <stdbool.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "agent.h"
#include "api.h"
#include "clock.h"
#include "guard.h"
#include "log.h"
#include "notify.h"
#include "sdnotify.h"
#include "version.h"
#include "watchdog.h"
#include "zk.h"

#define STOP_GRACE_MS	5000	/* stop anyway if ZooKeeper does not answer */
#define STOP_WAIT_MAX_MS (24ULL * 3600 * 1000)	/* a hook_timeout of years */

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: zkelectd [-c FILE] [--check-config]\n"
	    "       zkelectd --zookeeper SERVERS --path PATH [OPTIONS] [-- CMD [ARGS...]]\n"
	    "\n"
	    "Leader-election sidecar: joins a ZooKeeper election and tells the\n"
	    "local app, over a Unix socket, whether it leads and under which epoch.\n"
	    "\n"
	    "  -c, --config FILE   configuration file (YAML; default $ZKELECT_CONFIG\n"
	    "                      or " CONFIG_DEFAULT_FILE ", as zkelectctl)\n"
	    "      --check-config  validate the configuration and exit\n"
	    "  -V, --version       print the version and exit\n"
	    "  -h, --help          print this help and exit\n"
	    "\n"
	    "Without a file, the configuration from flags (each sets the key named,\n"
	    "with its checks and default; zkelect.yaml(5)):\n"
	    "  --zookeeper SERVERS      zookeeper.servers (required)\n"
	    "  --path PATH              election.path (required)\n"
	    "  --id ID                  election.id\n"
	    "  --value TEXT             election.value\n"
	    "  --session-timeout D      zookeeper.session_timeout\n"
	    "  --tick-time D            zookeeper.tick_time\n"
	    "  --socket PATH            api.socket (default: a private directory,\n"
	    "                           removed at exit)\n"
	    "  --listen ADDR            api.listen\n"
	    "  --log-level LEVEL        log.level\n"
	    "  --log-format FORMAT      log.format\n"
	    "  --run-exit restart|stop  notify.run_exit\n"
	    "  --run-output log|inherit notify.run_output\n"
	    "  -- CMD [ARGS...]         notify.run (CMD looked up in PATH)\n"
	    "\n"
	    "Exit status: 0 clean stop, 1 configuration or usage error, 2 runtime error;\n"
	    "with run_exit: stop, the command's status (see zkelectd(8)).\n");
}

/* zkelectd's configuration flags and the keys they set. */
static const struct {
	const char	*flag;		/* "--" and getopt's name */
	const char	*key;
} agent_flag_keys[] = {
	{ "--zookeeper", "zookeeper.servers" },
	{ "--path", "election.path" },
	{ "--id", "election.id" },
	{ "--value", "election.value" },
	{ "--session-timeout", "zookeeper.session_timeout" },
	{ "--tick-time", "zookeeper.tick_time" },
	{ "--socket", "api.socket" },
	{ "--listen", "api.listen" },
	{ "--log-level", "log.level" },
	{ "--log-format", "log.format" },
	{ "--run-exit", "notify.run_exit" },
	{ "--run-output", "notify.run_output" },
};
#define AGENT_NFLAGS	(sizeof(agent_flag_keys) / sizeof(agent_flag_keys[0]))
#define AGENT_FLAG_OPT	256	/* getopt's val of agent_flag_keys[i]: 256 + i */

/*
 * The configuration from zkelectd's flags (no file), with CMD (argv, may
 * be NULL) as notify.run. Without --socket, the socket goes in a private
 * directory made here (*dir, removed at exit). NULL, said, on an error.
 */
static struct config *
agent_config_from_flags(struct config_flag *flags, int n, char **cmd,
    char **dir)
{
	static char sock[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	bool have_zk = false, have_path = false, have_socket = false;
	struct config *conf;
	int i;

	for (i = 0; i < n; i++) {
		have_zk |= strcmp(flags[i].key, "zookeeper.servers") == 0;
		have_path |= strcmp(flags[i].key, "election.path") == 0;
		have_socket |= strcmp(flags[i].key, "api.socket") == 0;
	}
	if (!have_zk || !have_path) {
		fprintf(stderr, "zkelectd: without a configuration file, --zookeeper "
		    "SERVERS and --path PATH are needed\n");
		usage(stderr);
		return NULL;
	}
	if (cmd != NULL) {
		flags[n].flag = "the command after --";
		flags[n].key = "notify.run";
		flags[n].value = NULL;
		flags[n++].argv = cmd;
	}
	if (!have_socket) {
		/* Only this user may reach it: the directory is 0700. */
		if (tmp == NULL || tmp[0] != '/')
			tmp = "/tmp";
		if (asprintf(dir, "%s/zkelectd.XXXXXX", tmp) == -1)
			abort();
		if (mkdtemp(*dir) == NULL) {
			fprintf(stderr, "zkelectd: cannot make a directory for the "
			    "API socket in %s: %s (give one with --socket)\n", tmp,
			    strerror(errno));
			free(*dir);
			*dir = NULL;
			return NULL;
		}
		snprintf(sock, sizeof(sock), "%s/api.sock", *dir);
		flags[n].flag = "the private socket";
		flags[n].key = "api.socket";
		flags[n].value = sock;
		flags[n++].argv = NULL;
	}
	conf = config_from_flags("zkelectd", flags, n, stderr);
	if (conf == NULL && *dir != NULL) {
		rmdir(*dir);
		free(*dir);
		*dir = NULL;
	}
	return conf;
}

/* A random (version 4) UUID, as Curator's protected mode uses. */
static void
agent_uuid(char out[ELECTION_UUID_LEN + 1], void *arg)
{
	unsigned char b[16];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(b)) {
		n = getrandom(b + got, sizeof(b) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fatal("getrandom");
		}
		got += (size_t)n;
	}
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, ELECTION_UUID_LEN + 1,
	    "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
	    b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/*
 * main.c is the hub: zk.c, notify.c and api.c report upward only through
 * the callbacks below, given to them when they are opened
 * (doc/design.md, "Architecture").
 */

/*
 * A part's role changed (the single election's, or a partition's): count
 * it, log it once (one line per gain or loss of a partition, with its
 * epoch and why), and tell the app through notify.c, which acknowledges a
 * loss once the app has heard.
 */
static void
agent_notify(void *arg, struct part *pt, const struct election_action *a)
{
	struct agent *agent = arg;
	struct agent_stats *st = &agent->stats;
	const char *why = election_reason_name(a->reason);
	int i;

	st->transitions++;
	if (pt->name == NULL)
		st->role_since = clock_now_ms();
	for (i = 0; i < AGENT_REASONS_MAX; i++) {
		struct agent_transition_count *t = &st->by_reason[i];
		if (t->reason == REASON_NONE) {
			t->to = a->to;
			t->reason = a->reason;
		}
		if (t->to == (int)a->to && t->reason == a->reason) {
			t->count++;
			break;
		}
	}
	if (pt->name == NULL && a->to == ELECTION_LEADER)
		log_info("role %s -> %s (%s, epoch %" PRIu64 " = 0x%" PRIx64 ")",
		    election_role_name(a->from), election_role_name(a->to),
		    why, pt->e.epoch, pt->e.epoch);
	else if (pt->name == NULL)
		log_info("role %s -> %s (%s)", election_role_name(a->from),
		    election_role_name(a->to), why);
	else if (a->to == ELECTION_LEADER)
		log_info("partition %s: gained (%s, epoch %" PRIu64 " = 0x%"
		    PRIx64 ")", pt->name, why, pt->e.epoch, pt->e.epoch);
	else if (a->from == ELECTION_LEADER)
		log_info("partition %s: lost (%s -> %s, %s, epoch %" PRIu64 ")",
		    pt->name, election_role_name(a->from),
		    election_role_name(a->to), why, pt->e.spent_epoch);
	else
		log_debug("partition %s: role %s -> %s (%s)", pt->name,
		    election_role_name(a->from), election_role_name(a->to),
		    why);
	notify_transition(agent->notify, pt, a);
}

/*
 * A part's report changed (pt; a newly reported leader runs
 * on_leader_change), or the members or the assignment did (pt NULL): wake
 * long polls, tell systemd when what it shows changed.
 */
static void
agent_changed(void *arg, struct part *pt)
{
	struct agent *agent = arg;
	const struct fleet *f = &agent->fleet;
	struct election_report r;
	char status[512];

	if (pt != NULL)
		notify_leader_seen(agent->notify, pt);
	api_changed(agent->api);
	if (f->partitioned)
		snprintf(status, sizeof(status), "partitions: leading %d of %d "
		    "(%d assigned), %d members", f->view.owned, f->nparts,
		    f->view.assigned, f->view.count);
	else {
		election_report(&f->parts[0].e, &r);
		if (r.role == ELECTION_LEADER)
			snprintf(status, sizeof(status), "leader, epoch %" PRIu64
			    ", %d candidate%s", r.epoch, r.candidates,
			    r.candidates == 1 ? "" : "s");
		else if (r.has_leader)
			snprintf(status, sizeof(status), "%s; leader %s (epoch %"
			    PRIu64 "), %d candidate%s",
			    election_role_name(r.role), r.leader_id,
			    r.leader_epoch, r.candidates,
			    r.candidates == 1 ? "" : "s");
		else
			snprintf(status, sizeof(status), "%s; no leader known; "
			    "session %s", election_role_name(r.role),
			    election_session_name(r.session));
	}
	if (strcmp(status, agent->sd_status) != 0) {
		snprintf(agent->sd_status, sizeof(agent->sd_status), "%s",
		    status);
		sdnotify_status(status);
	}
}

/* A resign, asked by the API or by on_leader_failure: resign. */
static void
agent_resign(void *arg, struct part *pt, uint64_t hold_ms)
{
	struct agent *agent = arg;

	zk_resign(agent->zk, pt, hold_ms);
}

/* A drain or undrain, asked by the API. */
static void
agent_drain_asked(void *arg, bool drain)
{
	struct agent *agent = arg;

	zk_drain(agent->zk, drain);
}

/* The app has been told of a loss: the election may let its node go. */
static void
agent_told(void *arg, struct part *pt, uint64_t told)
{
	struct agent *agent = arg;

	zk_notified(agent->zk, pt, told);
}

/* T: the negotiated session timeout once known, else the requested one. */
static uint32_t
agent_session_timeout(const struct agent *agent)
{
	const struct election *e = fleet_session(&agent->fleet);

	if (e->timeout_ms > 0)
		return (uint32_t)e->timeout_ms;
	return (uint32_t)agent->conf->zk_session_timeout_ms;
}

/*
 * The loop's heartbeat: it feeds the watchdog thread, which kills the
 * process once the loop has been silent for T/2, and systemd's watchdog,
 * the second line, whose interval is set to T. The driver beats at every
 * tick and every batch of ZooKeeper's answers (zk_cb.beat), and this
 * timer, put off by each beat, beats when neither has for T/6: an idle
 * agent's renewal, every T/6, beats for it, so the loop wakes for nothing
 * else (it woke every T/12 for this alone: 6 of an idle agent's 24
 * wakeups a second at T = 2 s).
 */
static void
agent_beat(void *arg)
{
	struct agent *agent = arg;
	uint32_t t = agent_session_timeout(agent);
	uint64_t period = watchdog_beat_ms(t), now = clock_now_ms();
	struct timeval tv = { (time_t)(period / 1000),
	    (suseconds_t)(period % 1000) * 1000 };

	watchdog_beat(agent->watchdog, t);
	/* systemd's, at most every T/6: a beat may come thousands of times
	 * a second. */
	if (agent->sd_watchdog && now >= agent->sd_pinged + period) {
		/* While stopping, the interval set for the stop stays. */
		if (agent->sd_watchdog_ms != t && !agent->stopping) {
			sdnotify_watchdog_set_usec((uint64_t)t * 1000);
			agent->sd_watchdog_ms = t;
		}
		sdnotify_watchdog();
		agent->sd_pinged = now;
	}
	evtimer_add(agent->ev_watchdog, &tv);
}

static void
agent_watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	agent_beat(arg);
}

/*
 * The loop's timers count on CLOCK_MONOTONIC, not libevent's default, its
 * coarse variant (a jiffy's resolution): a timer set for a deadline of the
 * agent's clock then fired up to a jiffy early, and again each millisecond
 * until the deadline had passed. Measured on an idle agent of 4 x 256
 * partitions: 27 wakeups a second of the loop, 16 with this.
 */
static struct event_base *
agent_base_new(void)
{
	struct event_config *cfg;
	struct event_base *base;

	if ((cfg = event_config_new()) == NULL)
		return NULL;
	if (event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER) == -1) {
		event_config_free(cfg);
		return NULL;
	}
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

static bool
agent_argv_differ(char *const *a, char *const *b)
{
	if (a == NULL || b == NULL)
		return a != b;
	for (; *a != NULL && *b != NULL; a++, b++)
		if (strcmp(*a, *b) != 0)
			return true;
	return *a != *b;
}

static bool
agent_str_differ(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a != b;
	return strcmp(a, b) != 0;
}

/* Names the reloadable keys whose value changes, as "changed: a, b". */
static void
agent_reload_changes(const struct config *old, const struct config *new,
    char *buf, size_t len)
{
	const struct {
		const char	*name;
		bool		 differ;
	} keys[] = {
		{ "notify.on_leader", agent_argv_differ(old->notify_on_leader,
		    new->notify_on_leader) },
		{ "notify.on_follower", agent_argv_differ(old->notify_on_follower,
		    new->notify_on_follower) },
		{ "notify.on_leader_change", agent_argv_differ(
		    old->notify_on_leader_change, new->notify_on_leader_change) },
		{ "notify.on_leader_failure", old->notify_resign_on_failure !=
		    new->notify_resign_on_failure },
		{ "notify.hook_timeout", old->notify_hook_timeout_ms !=
		    new->notify_hook_timeout_ms },
		{ "notify.pidfile", agent_str_differ(old->notify_pidfile,
		    new->notify_pidfile) },
		{ "notify.leader_signal", old->notify_leader_signal !=
		    new->notify_leader_signal },
		{ "notify.follower_signal", old->notify_follower_signal !=
		    new->notify_follower_signal },
		{ "notify.run", agent_argv_differ(old->notify_run, new->notify_run) },
		{ "notify.run_exit", old->notify_run_exit_stop !=
		    new->notify_run_exit_stop },
		{ "notify.run_output", old->notify_run_inherit !=
		    new->notify_run_inherit },
		{ "log.level", old->log_level != new->log_level },
		{ "log.format", old->log_format != new->log_format },
		{ "api.allow_tcp_resign", old->api_tcp_resign != new->api_tcp_resign },
	};
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!keys[i].differ)
			continue;
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s",
		    n == 0 ? "changed: " : ", ", keys[i].name);
		if (n >= len)
			break;
	}
}

/*
 * SIGHUP: reload what can change in place (log level and format, hooks,
 * signals, hook timeout, the supervised command). Keys that need a restart
 * are reported and left alone; a bad file is rejected whole.
 */
static void
agent_reload(struct agent *agent)
{
	struct config *old = agent->conf, *new;
	char *errs = NULL, *line, *save = NULL, changed[512];
	int i;
	size_t errlen = 0;
	FILE *f;

	if (old->file == NULL) {
		log_info("reload: the configuration came from the command line; "
		    "nothing to reload");
		return;
	}
	sdnotify_reloading();
	f = open_memstream(&errs, &errlen);
	if (f == NULL) {
		log_warn("reload: open_memstream");
		return;
	}
	new = config_load(old->file, f);
	fclose(f);
	if (new == NULL) {
		for (line = strtok_r(errs, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save))
			log_error("reload: %s", line);
		log_error("reload: configuration rejected; the old one stays in force");
		free(errs);
		sdnotify_ready();
		return;
	}
	free(errs);
#define NEEDS_RESTART(field, name) do {					\
	if ((old->field == NULL) != (new->field == NULL) ||		\
	    (old->field != NULL && strcmp(old->field, new->field) != 0))	\
		log_warnx("reload: %s changed; it takes a restart", name);	\
} while (0)
	NEEDS_RESTART(zk_servers, "zookeeper.servers");
	NEEDS_RESTART(zk_auth_scheme, "zookeeper.auth");
	NEEDS_RESTART(zk_auth_credentials, "zookeeper.auth");
	NEEDS_RESTART(election_path, "election.path");
	NEEDS_RESTART(election_id, "election.id");
	NEEDS_RESTART(api_socket, "api.socket");
	NEEDS_RESTART(api_listen, "api.listen");
#undef NEEDS_RESTART
	if (old->zk_session_timeout_ms != new->zk_session_timeout_ms)
		log_warnx("reload: zookeeper.session_timeout changed; it takes a restart");
	if (old->zk_tick_ms != new->zk_tick_ms)
		log_warnx("reload: zookeeper.tick_time changed; it takes a restart");
	if (old->election_candidate != new->election_candidate)
		log_warnx("reload: election.candidate changed; it takes a restart");
	if (old->api_socket_mode != new->api_socket_mode)
		log_warnx("reload: api.socket_mode changed; it takes a restart");
	if (old->npartitions != new->npartitions)
		log_warnx("reload: partitions changed; it takes a restart");
	else
		for (i = 0; i < old->npartitions; i++)
			if (strcmp(old->partitions[i], new->partitions[i]) != 0) {
				log_warnx("reload: partitions changed; it "
				    "takes a restart");
				break;
			}

	agent_reload_changes(old, new, changed, sizeof(changed));

	/* Swap in what can change; the rest of new is freed with it. Queued
	 * hooks and a child not yet started keep what they were queued with. */
#define SWAP(field) do {						\
	__typeof__(old->field) tmp = old->field;			\
	old->field = new->field;					\
	new->field = tmp;						\
} while (0)
	SWAP(notify_on_leader);
	SWAP(notify_on_follower);
	SWAP(notify_on_leader_change);
	SWAP(notify_resign_on_failure);
	SWAP(notify_hook_timeout_ms);
	SWAP(notify_pidfile);
	SWAP(notify_leader_signal);
	SWAP(notify_follower_signal);
	SWAP(notify_run);
	SWAP(notify_run_exit_stop);
	SWAP(notify_run_inherit);
	SWAP(log_level);
	SWAP(log_format);
	SWAP(api_tcp_resign);
#undef SWAP
	fleet_serial_releases(&agent->fleet, old->notify_on_follower != NULL);
	config_free(new);
	log_init(old->log_level, old->log_format);
	log_info("reload: configuration reloaded from %s; %s", old->file,
	    changed[0] != '\0' ? changed : "nothing changed");
	sdnotify_ready();
}

static void
agent_sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	agent_reload(arg);
}

static void
agent_stop_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *agent = arg;

	log_warnx("stop: the app was not told, or ZooKeeper did not confirm "
	    "the delete, in time; ending what still runs, then closing the "
	    "session");
	agent->stop_now = true;
	event_base_loopexit(agent->base, NULL);
}

static void
agent_drain_cb(evutil_socket_t fd, short what, void *arg)
{
	struct agent *agent = arg;

	if (!notify_busy(agent->notify))
		event_base_loopexit(agent->base, NULL);
}

/*
 * The election is done: our node is deleted, or goes when we close the
 * session. Rule 10 holds whatever the connection did meanwhile: hooks still
 * running and the child still stopping get their time (within the stop
 * timeout) before the session closes.
 */
static void
agent_drain(struct agent *agent)
{
	struct timeval tick = { 0, 50 * 1000 };
	struct event *ev;

	if (agent->stop_now || !notify_busy(agent->notify))
		return;
	log_info("stop: waiting for the hooks and the child to finish before "
	    "closing the session");
	ev = event_new(agent->base, -1, EV_PERSIST, agent_drain_cb, agent);
	event_add(ev, &tick);
	event_base_dispatch(agent->base);
	event_free(ev);
}

static void agent_stop(struct agent *);

static void
agent_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct agent *agent = arg;

	if (agent->stopping) {
		log_info("%s again: exiting now", strsignal((int)sig));
		agent->stop_now = true;
		event_base_loopexit(agent->base, NULL);
		return;
	}
	log_info("%s: stopping", strsignal((int)sig));
	/* run_exit: stop: 128 + the signal, as a shell says, unless the
	 * command ran and its status comes (agent_run_exited). */
	if (agent->conf->notify_run_exit_stop)
		agent->exit_code = 128 + (int)sig;
	agent_stop(agent);
}

/*
 * notify.run_exit: stop (doc/design.md, "Hooks, signals and the
 * supervised child"): the command ended. Its status becomes ours; if it
 * ended by itself, the agent stops gracefully (the app told, then the
 * release names the successor); if a loss of leadership stopped it, the
 * agent stops with AGENT_EXIT_LOST.
 */
static void
agent_run_exited(void *arg, int status, bool by_itself)
{
	struct agent *agent = arg;

	/* The first command's end decides: a stop under way may still start
	 * and stop another (a term that began again before the stop), whose
	 * status is not the one to report. */
	if (!agent->conf->notify_run_exit_stop || agent->run_exit_decided)
		return;
	agent->run_exit_decided = true;
	agent->exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) :
	    WEXITSTATUS(status);
	if (agent->stopping)
		return;		/* stopped by a signal: its status is ours */
	if (!by_itself) {
		agent->exit_code = AGENT_EXIT_LOST;
		log_warnx("run_exit: stop: leadership ended while the command "
		    "ran; stopping (exit status %d)", AGENT_EXIT_LOST);
	} else
		log_info("run_exit: stop: the command ended (exit status %d); "
		    "stopping, handing over", agent->exit_code);
	agent_stop(agent);
}

/* A graceful stop (rule 10): the app is told, then the node goes. */
static void
agent_stop(struct agent *agent)
{
	uint64_t grace_ms;
	struct timeval grace;

	log_debug("trace: stop at=%" PRIu64, clock_now_us());
	sdnotify_stopping();
	agent->stopping = true;		/* a second signal exits */
	zk_stop(agent->zk);
	/*
	 * Our node goes only once the app has been told (rule 10): give the
	 * hooks their timeouts and kill grace and the child its deadline,
	 * all now queued or running, and ZooKeeper time for the delete.
	 */
	grace_ms = STOP_GRACE_MS + notify_drain_ms(agent->notify, clock_now_ms());
	if (agent->fleet.partitioned)
		grace_ms += FLEET_STOP_WAIT_MS;
	if (grace_ms > STOP_WAIT_MAX_MS)
		grace_ms = STOP_WAIT_MAX_MS;
	grace.tv_sec = (time_t)(grace_ms / 1000);
	grace.tv_usec = (suseconds_t)(grace_ms % 1000) * 1000;
	evtimer_add(agent->ev_stop_timeout, &grace);
	/* systemd's watchdog must not end the stop that the app waits on:
	 * its interval now covers it, and the session's close after it. */
	if (agent->sd_watchdog) {
		agent->sd_watchdog_ms = 0;
		sdnotify_watchdog_set_usec((grace_ms +
		    agent_session_timeout(agent)) * 1000);
	}
}

/* libevent's own warnings, through our log (and its format). */
static void
agent_event_log_cb(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_warnx("libevent: %s", msg);
	else
		log_debug("libevent: %s", msg);
}

/*
 * Grows the descriptor table now, while the process has one thread. Linux
 * grows it by doubling when a descriptor above its size is opened, and in a
 * process with threads (ZooKeeper's) each growth waits for an RCU grace
 * period: measured here, the loop stood still long enough under a flood of
 * local clients for 4,096 of them to fill the listen backlog, so that the
 * app's own connect was refused. The API holds at most API_MAX_CONNS +
 * API_MAX_CLOSING connections, so the table is made ready for 1024, or the
 * descriptor limit if that is lower.
 */
static void
agent_reserve_fds(void)
{
	struct rlimit rl;
	int want = 1024, fd;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)want)
		want = (int)rl.rlim_cur;
	if ((fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, want - 1)) != -1)
		close(fd);
}

int
main(int argc, char *argv[])
{
	struct option longopts[5 + AGENT_NFLAGS] = {
		{ "config",		required_argument,	NULL, 'c' },
		{ "check-config",	no_argument,		NULL, 'n' },
		{ "version",		no_argument,		NULL, 'V' },
		{ "help",		no_argument,		NULL, 'h' },
	};
	struct config_flag flags[AGENT_NFLAGS + 2];
	char **cmd = NULL, *sockdir = NULL;
	int nflags = 0;
	size_t k;
	struct agent agent;
	/* What the modules report upward, wired here. */
	const struct zk_cb zk_cb = {
		.changed = agent_changed,
		.notify = agent_notify,
		.beat = agent_beat,
		.arg = &agent,
	};
	const struct notify_cb notify_cb = {
		.resign = agent_resign,
		.told = agent_told,
		.run_exited = agent_run_exited,
		.arg = &agent,
	};
	const struct api_cb api_cb = { .resign = agent_resign,
	    .drain = agent_drain_asked, .arg = &agent };
	const char *file = NULL;
	bool check = false;
	int ch, i;

	guard_set_title_area(argc, argv);	/* before getopt reorders argv */
	for (k = 0; k < AGENT_NFLAGS; k++) {
		longopts[4 + k].name = agent_flag_keys[k].flag + 2;
		longopts[4 + k].has_arg = required_argument;
		longopts[4 + k].val = AGENT_FLAG_OPT + (int)k;
	}
	/* "+": options stop at the first other word; a command follows --. */
	while ((ch = getopt_long(argc, argv, "+c:Vh", longopts, NULL)) != -1) {
		if (ch >= AGENT_FLAG_OPT) {
			k = (size_t)(ch - AGENT_FLAG_OPT);
			if (nflags == (int)AGENT_NFLAGS) {
				/* One of them twice at least: the check says
				 * which, up to here. */
				fprintf(stderr, "zkelectd: %s: each flag may be "
				    "given once\n", agent_flag_keys[k].flag);
				usage(stderr);
				return 1;
			}
			flags[nflags].flag = agent_flag_keys[k].flag;
			flags[nflags].key = agent_flag_keys[k].key;
			flags[nflags].value = optarg;
			flags[nflags++].argv = NULL;
			continue;
		}
		switch (ch) {
		case 'c':
			file = optarg;
			break;
		case 'n':
			check = true;
			break;
		case 'V':
			printf("zkelectd %s\n", ZKELECT_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind != argc && nflags > 0 && optind > 1 &&
	    strcmp(argv[optind - 1], "--") == 0)
		cmd = &argv[optind];	/* notify.run, from the flags */
	else if (optind != argc) {
		fprintf(stderr, "zkelectd: unexpected argument '%s'%s\n",
		    argv[optind], nflags > 0 ? " (a command goes after --)" : "");
		usage(stderr);
		return 1;
	}
	if (nflags > 0 && file != NULL) {
		fprintf(stderr, "zkelectd: -c FILE and the configuration flags "
		    "(%s, ...) exclude each other\n", flags[0].flag);
		usage(stderr);
		return 1;
	}
	memset(&agent, 0, sizeof(agent));
	if (nflags > 0) {
		agent.conf = agent_config_from_flags(flags, nflags, cmd, &sockdir);
		if (agent.conf == NULL)
			return 1;
		if (check) {
			printf("configuration OK\n");
			config_free(agent.conf);
			rmdir(sockdir);
			free(sockdir);
			return 0;
		}
		goto configured;
	}
	if (file == NULL) {
		/* The same default as zkelectctl members. */
		file = getenv("ZKELECT_CONFIG");
		if (file == NULL || file[0] == '\0')
			file = CONFIG_DEFAULT_FILE;
		if (access(file, F_OK) == -1 && errno == ENOENT) {
			fprintf(stderr, "zkelectd: no configuration file at %s "
			    "(the default; give one with -c FILE or "
			    "$ZKELECT_CONFIG)\n", file);
			return 1;
		}
	}

	agent.conf = config_load(file, stderr);
	if (agent.conf == NULL)
		return 1;
	if (check) {
		printf("configuration OK\n");
		config_free(agent.conf);
		return 0;
	}
configured:
	log_init(agent.conf->log_level, agent.conf->log_format);
	/* From here no line waits for stderr (a stalled journald, a pipe
	 * nobody reads): the loop must never stand still in a write. */
	log_start();
	event_set_log_callback(agent_event_log_cb);
	signal(SIGPIPE, SIG_IGN);

	agent_reserve_fds();

	/* ZooKeeper's threads wake the loop: libevent must be thread-aware. */
	if (evthread_use_pthreads() == -1)
		fatalx("libevent: no pthreads support");
	agent.base = agent_base_new();
	if (agent.base == NULL)
		fatalx("libevent: cannot create the event base");
	agent.started = clock_now_ms();
	agent.stats.role_since = agent.started;

	fleet_init(&agent.fleet, agent.conf, agent_uuid, NULL);
	/* Tests only (tests/chaos): the old lease, s + 2T/3 renewed every T/3. */
	if (getenv("ZKELECT_TEST_LEGACY_LEASE") != NULL &&
	    strcmp(getenv("ZKELECT_TEST_LEGACY_LEASE"), "1") == 0) {
		for (i = 0; i < agent.fleet.nparts; i++) {
			agent.fleet.parts[i].e.lease_naive = true;
			agent.fleet.parts[i].e.renew_div = 3;
		}
		log_warnx("ZKELECT_TEST_LEGACY_LEASE=1: the old, unsafe lease (tests only)");
	}

	agent.ev_sigterm = evsignal_new(agent.base, SIGTERM, agent_signal_cb, &agent);
	agent.ev_sigint = evsignal_new(agent.base, SIGINT, agent_signal_cb, &agent);
	agent.ev_stop_timeout = evtimer_new(agent.base, agent_stop_timeout_cb, &agent);
	agent.ev_sighup = evsignal_new(agent.base, SIGHUP, agent_sighup_cb, &agent);
	evsignal_add(agent.ev_sigterm, NULL);
	evsignal_add(agent.ev_sigint, NULL);
	evsignal_add(agent.ev_sighup, NULL);

	agent.notify = notify_open(&agent, &notify_cb);
	if (agent.notify == NULL)
		fatalx("cannot set up notifications");
	agent.api = api_open(&agent, &api_cb);
	if (agent.api == NULL) {
		log_error("cannot open the local API; exiting");
		agent.exit_code = 2;
		goto out;
	}
	log_info("zkelectd %s starting: id %s, election %s%s", ZKELECT_VERSION,
	    agent.conf->election_id, agent.conf->election_path,
	    agent.conf->election_candidate ? "" : " (observer)");
	/* Ready means the API answers (role "unknown" until we know). */
	sdnotify_ready();
	sdnotify_status("unknown; connecting to ZooKeeper");
	agent.sd_watchdog = sdnotify_watchdog_usec() != 0;
	agent.ev_watchdog = evtimer_new(agent.base, agent_watchdog_cb, &agent);
	agent.zk = zk_open(&agent, &zk_cb);
	if (agent.zk == NULL) {
		log_error("cannot start the ZooKeeper driver; exiting");
		agent.exit_code = 2;
		goto out;
	}

	/* The loop runs from here: its heartbeat arms the watchdog. */
	agent.watchdog = watchdog_start(agent_session_timeout(&agent));
	agent_beat(&agent);
	event_base_dispatch(agent.base);
	agent_drain(&agent);
	/* Closing the session may take a while; nothing answers now. */
	watchdog_stop(agent.watchdog);
	agent.watchdog = NULL;
	log_info("stopped");

out:
	watchdog_stop(agent.watchdog);
	/* Hooks and the child (their whole trees) end before the session
	 * does: closing it lets our node go (rule 10). */
	notify_close(agent.notify);
	zk_close(agent.zk);
	api_close(agent.api);
	event_free(agent.ev_sigterm);
	event_free(agent.ev_sigint);
	event_free(agent.ev_sighup);
	if (agent.ev_watchdog != NULL)
		event_free(agent.ev_watchdog);
	event_free(agent.ev_stop_timeout);
	event_base_free(agent.base);
	fleet_free(&agent.fleet);
	config_free(agent.conf);
	if (sockdir != NULL) {
		rmdir(sockdir);	/* the socket in it is gone with api_close */
		free(sockdir);
	}
	libevent_global_shutdown();
	log_stop(LOG_EXIT_FLUSH_MS);
	return agent.exit_code;
}
