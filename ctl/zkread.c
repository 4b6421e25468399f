/* SPDX-License-Identifier: MIT */
/*
 * The read-only ZooKeeper session of zkelectctl's members and of the
 * cluster view of partitions: which configuration the command line chose
 * (an agent's file, or --zookeeper SERVERS PATH), a session connected with
 * its credentials and synced (the server read from has caught up with the
 * ensemble's leader, so the view is current), every wait bounded by one
 * deadline, and reads pipelined as asynchronous calls counted here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "ctl.h"
#include "zkread.h"

/*
 * The client library's log callback takes no context: the last message it
 * logged (an error: the reason a connection fails) is kept here.
 */
static pthread_mutex_t	 zkread_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char		 zkread_log_last[512];

static void
zkread_log_cb(const char *message)
{
	const char *p;

	/* "date:pid(tid):ZOO_ERROR@function@line: text": keep the text. */
	if ((p = strstr(message, "ZOO_")) != NULL &&
	    (p = strstr(p, ": ")) != NULL)
		message = p + 2;
	pthread_mutex_lock(&zkread_log_lock);
	snprintf(zkread_log_last, sizeof(zkread_log_last), "%s", message);
	pthread_mutex_unlock(&zkread_log_lock);
}

static void
zkread_log_copy(char *buf, size_t len)
{
	pthread_mutex_lock(&zkread_log_lock);
	snprintf(buf, len, "%s", zkread_log_last);
	pthread_mutex_unlock(&zkread_log_lock);
}

static void
zkread_watcher(zhandle_t *zh, int type, int state, const char *path,
    void *ctx)
{
	struct zkread *r = ctx;

	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&r->lock);
	r->state = state;
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

/* One more async call out; its completion calls zkread_done. */
void
zkread_begin(struct zkread *r)
{
	pthread_mutex_lock(&r->lock);
	r->pending++;
	pthread_mutex_unlock(&r->lock);
}

/* An async call's completion (any thread). */
void
zkread_done(struct zkread *r, int rc)
{
	pthread_mutex_lock(&r->lock);
	r->rc = rc;
	/* Only the last answer wakes the waiter: thousands are pipelined. */
	if (--r->pending == 0)
		pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void
zkread_void_cb(int rc, const void *data)
{
	zkread_done((struct zkread *)(uintptr_t)data, rc);
}

static void
zkread_string_cb(int rc, const char *value, const void *data)
{
	zkread_done((struct zkread *)(uintptr_t)data, rc);
}

/*
 * Waits until the session is connected (connect) or no async call is out,
 * or until the deadline. Returns 0, or -1 on time out or a session that
 * failed; *state says which.
 */
static int
zkread_wait_for(struct zkread *r, bool connect, int *state)
{
	int rc = 0;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		*state = r->state;
		if (r->state == ZOO_AUTH_FAILED_STATE ||
		    r->state == ZOO_EXPIRED_SESSION_STATE) {
			rc = -1;
			break;
		}
		if (connect ? r->state == ZOO_CONNECTED_STATE : r->pending == 0)
			break;
		if (pthread_cond_timedwait(&r->cond, &r->lock, &r->deadline) ==
		    ETIMEDOUT) {
			rc = -1;
			break;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* Says why a wait for STEP failed. */
static void
zkread_say_failed(struct zkread *r, const char *step, int state)
{
	char last[sizeof(zkread_log_last)];

	zkread_log_copy(last, sizeof(last));
	if (state == ZOO_AUTH_FAILED_STATE)
		fprintf(stderr, "zkelectctl: %s: ZooKeeper at %s refused the "
		    "credentials of %s\n", r->cmd, r->conf->zk_servers,
		    r->source);
	else if (state == ZOO_EXPIRED_SESSION_STATE)
		fprintf(stderr, "zkelectctl: %s: the session with ZooKeeper at "
		    "%s expired while reading\n", r->cmd, r->conf->zk_servers);
	else
		fprintf(stderr, "zkelectctl: %s: cannot %s ZooKeeper at %s "
		    "within %" PRIu64 " ms%s%s\n", r->cmd, step,
		    r->conf->zk_servers, r->timeout_ms, last[0] != '\0' ?
		    "; last client error: " : "", last);
}

/* Waits until no async call is out; 0, or -1 (said). */
int
zkread_wait(struct zkread *r)
{
	int state;

	if (zkread_wait_for(r, false, &state) == 0)
		return 0;
	zkread_say_failed(r, "read the election from", state);
	return -1;
}

/* The configuration to read with: --zookeeper SERVERS PATH, or a file. */
struct config *
zkread_config(const char *cmd, const char *file, const char *servers,
    int nargs, char *const *args, const char **source,
    void (*usage)(FILE *))
{
	struct config_flag flags[2];
	struct config *conf;
	const char *env;
	char prog[64];

	/* A PATH means the command line's way: --zookeeper, or the
	 * $ZKELECT_ZOOKEEPER that lock and elect take too. */
	if (servers == NULL && nargs > 0 && file == NULL &&
	    (env = getenv("ZKELECT_ZOOKEEPER")) != NULL && env[0] != '\0')
		servers = env;
	if (servers != NULL && file != NULL) {
		fprintf(stderr, "zkelectctl: %s: -c FILE and --zookeeper "
		    "exclude each other\n", cmd);
		usage(stderr);
		return NULL;
	}
	if (servers != NULL && nargs == 0) {
		fprintf(stderr, "zkelectctl: %s: --zookeeper needs the "
		    "election's PATH\n", cmd);
		usage(stderr);
		return NULL;
	}
	if (nargs > (servers != NULL)) {
		fprintf(stderr, "zkelectctl: %s: unexpected argument '%s'\n",
		    cmd, args[servers != NULL]);
		usage(stderr);
		return NULL;
	}
	if (servers != NULL) {
		flags[0].flag = "--zookeeper";
		flags[0].key = "zookeeper.servers";
		flags[0].value = servers;
		flags[0].argv = NULL;
		flags[1].flag = "PATH";
		flags[1].key = "election.path";
		flags[1].value = args[0];
		flags[1].argv = NULL;
		snprintf(prog, sizeof(prog), "zkelectctl: %s", cmd);
		*source = "the command line";
		return config_from_flags(prog, flags, 2, stderr);
	}
	if (file == NULL) {
		env = getenv("ZKELECT_CONFIG");
		file = env != NULL && env[0] != '\0' ? env : DEFAULT_CONFIG;
	}
	if ((conf = config_load(file, stderr)) != NULL)
		*source = conf->file != NULL ? conf->file : file;
	return conf;
}

/* Connects, authenticates and syncs, within timeout_ms. */
int
zkread_open(struct zkread *r, const char *cmd, const struct config *conf,
    const char *source, uint64_t timeout_ms)
{
	pthread_condattr_t ca;
	char last[sizeof(zkread_log_last)];
	const char *step;
	int rc, state = 0;

	memset(r, 0, sizeof(*r));
	r->cmd = cmd;
	r->conf = conf;
	r->source = source;
	r->timeout_ms = timeout_ms;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	clock_gettime(CLOCK_MONOTONIC, &r->deadline);
	r->deadline.tv_sec += (time_t)(timeout_ms / 1000);
	r->deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (r->deadline.tv_nsec >= 1000000000) {
		r->deadline.tv_sec++;
		r->deadline.tv_nsec -= 1000000000;
	}

	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	r->zh = zookeeper_init2(conf->zk_servers, zkread_watcher,
	    (int)conf->zk_session_timeout_ms, NULL, r, 0, zkread_log_cb);
	if (r->zh == NULL) {
		/* Its errno is not telling (a name that does not resolve
		 * gives ENOENT); the library's own message is. */
		zkread_log_copy(last, sizeof(last));
		fprintf(stderr, "zkelectctl: %s: cannot use ZooKeeper servers "
		    "'%s': %s\n", cmd, conf->zk_servers, last[0] != '\0' ?
		    last : strerror(errno));
		return -1;
	}
	/* By default the client resolves the servers' names again every
	 * time it polls its socket: with thousands of reads pipelined that
	 * was a quarter of the view's time. A read of seconds needs none. */
	zoo_set_servers_resolution_delay(r->zh, -1);
	step = "connect to";
	if (zkread_wait_for(r, true, &state) == -1)
		goto fail;
	/* Credentials first: the reads after them are queued behind. */
	if (conf->zk_auth_scheme != NULL) {
		step = "authenticate";
		zkread_begin(r);
		rc = zoo_add_auth(r->zh, conf->zk_auth_scheme,
		    conf->zk_auth_credentials,
		    (int)strlen(conf->zk_auth_credentials), zkread_void_cb,
		    (void *)(uintptr_t)r);
		if (rc != ZOK)
			zkread_done(r, rc);
		if (rc != ZOK || zkread_wait_for(r, false, &state) == -1 ||
		    r->rc != ZOK) {
			fprintf(stderr, "zkelectctl: %s: ZooKeeper refused the "
			    "%s credentials of %s (%s)\n", cmd,
			    conf->zk_auth_scheme, source, zerror(rc != ZOK ? rc :
			    r->pending == 0 ? r->rc : ZOPERATIONTIMEOUT));
			return -1;
		}
	}
	/* A sync first: the server we read from has caught up with the
	 * leader of the ensemble, so the view is current. */
	step = "sync with";
	zkread_begin(r);
	rc = zoo_async(r->zh, conf->election_path, zkread_string_cb,
	    (void *)(uintptr_t)r);
	if (rc != ZOK)
		zkread_done(r, rc);
	if (rc != ZOK || zkread_wait_for(r, false, &state) == -1)
		goto fail;
	if (r->rc != ZOK && r->rc != ZNONODE) {
		fprintf(stderr, "zkelectctl: %s: cannot sync with ZooKeeper at "
		    "%s: %s\n", cmd, conf->zk_servers, zerror(r->rc));
		return -1;
	}
	return 0;

fail:
	zkread_say_failed(r, step, state);
	return -1;
}

void
zkread_close(struct zkread *r)
{
	/* After this no completion can run: what they point to may go. */
	if (r->zh != NULL)
		zookeeper_close(r->zh);
	r->zh = NULL;
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
}

/* Is PATH a partitioned election? 1 yes, 0 no, or a ZooKeeper error. */
int
zkread_partitioned(struct zkread *r, const char *path)
{
	char child[CONFIG_ZK_PATH_MAX + 16];
	struct Stat st;
	int rc;

	snprintf(child, sizeof(child), "%s/partitions", path);
	if ((rc = zoo_exists(r->zh, child, 0, &st)) == ZNONODE)
		return 0;
	if (rc != ZOK)
		return rc;
	snprintf(child, sizeof(child), "%s/members", path);
	if ((rc = zoo_exists(r->zh, child, 0, &st)) == ZNONODE)
		return 0;
	return rc == ZOK ? 1 : rc;
}

/*
 * The election path is missing: say what is, from the chroot down (the
 * chroot missing is not "nobody joined": no agent can create anything
 * under it).
 */
void
zkread_say_missing(struct zkread *r)
{
	const struct config *conf = r->conf;
	char part[CONFIG_ZK_PATH_MAX], *slash;
	const char *chroot = strchr(conf->zk_servers, '/');
	struct Stat st;
	size_t n;

	if (chroot != NULL && strcmp(chroot, "/") != 0 &&
	    zoo_exists(r->zh, "/", 0, &st) == ZNONODE) {
		fprintf(stderr, "zkelectctl: %s: the chroot %s of "
		    "zookeeper.servers does not exist on %.*s (create it, or fix "
		    "zookeeper.servers): nothing can join %s\n", r->cmd, chroot,
		    (int)(chroot - conf->zk_servers), conf->zk_servers,
		    conf->election_path);
		return;
	}
	/* The deepest component that is there. */
	snprintf(part, sizeof(part), "%s", conf->election_path);
	for (;;) {
		slash = strrchr(part, '/');
		if (slash == NULL || slash == part)
			break;
		*slash = '\0';
		if (zoo_exists(r->zh, part, 0, &st) == ZOK)
			break;
	}
	n = strlen(part);
	if (slash == NULL || slash == part)
		n = 0;
	fprintf(stderr, "zkelectctl: %s: %s does not exist on %s: no "
	    "agent has joined this election yet", r->cmd, conf->election_path,
	    conf->zk_servers);
	if (n > 0 && n + 1 < strlen(conf->election_path))
		fprintf(stderr, " (%s is there, nothing under it on the way)",
		    part);
	fputc('\n', stderr);
}

/* The sequence number of a member node's name (m-NNNNNNNNNN), or -1. */
int64_t
zkread_member_seq(const char *name)
{
	char *end;
	long long seq;

	if (strncmp(name, "m-", 2) != 0 || name[2] < '0' || name[2] > '9')
		return -1;
	errno = 0;
	seq = strtoll(name + 2, &end, 10);
	if (*end != '\0' || errno != 0)
		return -1;
	return (int64_t)seq;
}
