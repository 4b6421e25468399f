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
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "agent.h"
#include "clock.h"
#include "log.h"
#include "notify.h"
#include "sdnotify.h"
#include "version.h"

#define STOP_GRACE_MS	5000	/* stop anyway if ZooKeeper does not answer */

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: zkelectd -c FILE [--check-config]\n"
	    "\n"
	    "Leader-election sidecar: joins a ZooKeeper election and tells the\n"
	    "local app, over a Unix socket, whether it leads and under which epoch.\n"
	    "\n"
	    "  -c, --config FILE   configuration file (YAML)\n"
	    "      --check-config  validate the configuration and exit\n"
	    "  -V, --version       print the version and exit\n"
	    "  -h, --help          print this help and exit\n"
	    "\n"
	    "Exit status: 0 clean stop, 1 configuration or usage error, 2 runtime error.\n");
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

void
agent_notify(struct agent *agent, const struct election_action *a)
{
	struct election *e = &agent->election;

	struct agent_stats *st = &agent->stats;
	int i;

	st->transitions++;
	st->role_since = clock_now_ms();
	for (i = 0; i < AGENT_REASONS_MAX; i++) {
		struct agent_transition_count *t = &st->by_reason[i];
		if (t->reason == NULL) {
			t->to = a->to;
			t->reason = a->reason;
		}
		if (t->to == (int)a->to && strcmp(t->reason, a->reason) == 0) {
			t->count++;
			break;
		}
	}
	if (a->to == ELECTION_LEADER)
		log_info("role %s -> %s (%s, epoch %" PRIu64 " = 0x%" PRIx64 ")",
		    election_role_name(a->from), election_role_name(a->to),
		    a->reason, e->epoch, e->epoch);
	else
		log_info("role %s -> %s (%s)", election_role_name(a->from),
		    election_role_name(a->to), a->reason);
	notify_transition(agent->notify, a);
}

/* The report changed: wake long polls, tell systemd. */
void
agent_changed(struct agent *agent)
{
	struct election_report r;
	char status[512];

	api_changed(agent->api);
	election_report(&agent->election, &r);
	if (r.role == ELECTION_LEADER)
		snprintf(status, sizeof(status), "leader, epoch %" PRIu64
		    ", %d candidates", r.epoch, r.candidates);
	else if (r.has_leader)
		snprintf(status, sizeof(status), "%s; leader %s (epoch %" PRIu64
		    "), %d candidates", election_role_name(r.role), r.leader_id,
		    r.leader_epoch, r.candidates);
	else
		snprintf(status, sizeof(status), "%s; no leader known; session %s",
		    election_role_name(r.role), election_session_name(r.session));
	sdnotify_status(status);
}

static void
agent_watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	sdnotify_watchdog();
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
	char *errs = NULL, *line, *save = NULL;
	size_t errlen = 0;
	FILE *f;

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
	if (old->election_candidate != new->election_candidate)
		log_warnx("reload: election.candidate changed; it takes a restart");
	if (old->api_socket_mode != new->api_socket_mode)
		log_warnx("reload: api.socket_mode changed; it takes a restart");

	/* Swap in what can change; the rest of new is freed with it. */
#define SWAP(field) do {						\
	__typeof__(old->field) tmp = old->field;			\
	old->field = new->field;					\
	new->field = tmp;						\
} while (0)
	SWAP(notify_on_leader);
	SWAP(notify_on_follower);
	SWAP(notify_hook_timeout_ms);
	SWAP(notify_pidfile);
	SWAP(notify_leader_signal);
	SWAP(notify_follower_signal);
	SWAP(notify_run);
	SWAP(log_level);
	SWAP(log_format);
	SWAP(api_tcp_resign);
#undef SWAP
	config_free(new);
	log_init(old->log_level, old->log_format);
	log_info("reload: configuration reloaded from %s", old->file);
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

	log_warnx("stop: ZooKeeper did not confirm the delete in time; "
	    "closing the session instead");
	event_base_loopexit(agent->base, NULL);
}

static void
agent_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct agent *agent = arg;
	struct election_event ev;
	uint64_t grace_ms = STOP_GRACE_MS;
	struct timeval grace;

	if (agent->election.stopping) {
		log_info("%s again: exiting now", strsignal((int)sig));
		event_base_loopexit(agent->base, NULL);
		return;
	}
	log_info("%s: stopping", strsignal((int)sig));
	log_debug("trace: stop at=%" PRIu64, clock_now_us());
	sdnotify_stopping();
	/* Hooks get their whole timeout and the kill grace before we give up. */
	if (agent->conf->notify_on_follower != NULL)
		grace_ms += agent->conf->notify_hook_timeout_ms + 2000;
	grace.tv_sec = (time_t)(grace_ms / 1000);
	grace.tv_usec = (suseconds_t)(grace_ms % 1000) * 1000;
	evtimer_add(agent->ev_stop_timeout, &grace);
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_STOP;
	ev.now = clock_now_ms();
	zk_feed(agent->zk, &ev);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "config",		required_argument,	NULL, 'c' },
		{ "check-config",	no_argument,		NULL, 'n' },
		{ "version",		no_argument,		NULL, 'V' },
		{ "help",		no_argument,		NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct agent agent;
	const char *file = NULL;
	bool check = false;
	uint64_t wd_usec;
	int ch;

	while ((ch = getopt_long(argc, argv, "c:Vh", longopts, NULL)) != -1) {
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
	if (optind != argc || file == NULL) {
		if (file == NULL)
			fprintf(stderr, "zkelectd: no configuration file (use -c FILE)\n");
		else
			fprintf(stderr, "zkelectd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 1;
	}

	memset(&agent, 0, sizeof(agent));
	agent.conf = config_load(file, stderr);
	if (agent.conf == NULL)
		return 1;
	if (check) {
		printf("configuration OK\n");
		config_free(agent.conf);
		return 0;
	}
	log_init(agent.conf->log_level, agent.conf->log_format);
	signal(SIGPIPE, SIG_IGN);

	/* ZooKeeper's threads wake the loop: libevent must be thread-aware. */
	if (evthread_use_pthreads() == -1)
		fatalx("libevent: no pthreads support");
	agent.base = event_base_new();
	if (agent.base == NULL)
		fatalx("libevent: cannot create the event base");
	agent.started = clock_now_ms();
	agent.stats.role_since = agent.started;

	election_init(&agent.election, agent.conf->election_id,
	    agent.conf->election_value, agent.conf->election_candidate);
	agent.election.step_down = agent.conf->election_step_down;
	agent.election.uuid_gen = agent_uuid;

	agent.ev_sigterm = evsignal_new(agent.base, SIGTERM, agent_signal_cb, &agent);
	agent.ev_sigint = evsignal_new(agent.base, SIGINT, agent_signal_cb, &agent);
	agent.ev_stop_timeout = evtimer_new(agent.base, agent_stop_timeout_cb, &agent);
	agent.ev_sighup = evsignal_new(agent.base, SIGHUP, agent_sighup_cb, &agent);
	evsignal_add(agent.ev_sigterm, NULL);
	evsignal_add(agent.ev_sigint, NULL);
	evsignal_add(agent.ev_sighup, NULL);

	agent.notify = notify_open(&agent);
	if (agent.notify == NULL)
		fatalx("cannot set up notifications");
	agent.api = api_open(&agent);
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
	if ((wd_usec = sdnotify_watchdog_usec()) != 0) {
		struct timeval tv = { (time_t)(wd_usec / 2000000),
		    (suseconds_t)(wd_usec / 2 % 1000000) };
		agent.ev_watchdog = event_new(agent.base, -1, EV_PERSIST,
		    agent_watchdog_cb, &agent);
		event_add(agent.ev_watchdog, &tv);
	}
	agent.zk = zk_open(&agent);
	if (agent.zk == NULL) {
		log_error("cannot start the ZooKeeper driver; exiting");
		agent.exit_code = 2;
		goto out;
	}

	event_base_dispatch(agent.base);
	log_info("stopped");

out:
	zk_close(agent.zk);
	notify_close(agent.notify);
	api_close(agent.api);
	event_free(agent.ev_sigterm);
	event_free(agent.ev_sigint);
	event_free(agent.ev_sighup);
	if (agent.ev_watchdog != NULL)
		event_free(agent.ev_watchdog);
	event_free(agent.ev_stop_timeout);
	event_base_free(agent.base);
	election_free(&agent.election);
	config_free(agent.conf);
	libevent_global_shutdown();
	return agent.exit_code;
}
