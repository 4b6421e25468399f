/* SPDX-License-Identifier: MIT */
/*
 * The ZooKeeper driver. It performs the election's actions as async calls
 * on libzookeeper_mt and turns what comes back into election events.
 *
 * The ZooKeeper client runs an IO thread and a completion thread; every
 * callback and watcher runs on the latter. They do no work there: they copy
 * what arrived into a message, queue it under a mutex and wake the libevent
 * loop, which owns all state (rule 11: never block in a callback, never
 * close a handle from one). Completions and watches carry the generation
 * they were started under; the election drops stale ones (rule 7).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <zookeeper/zookeeper.h>

#include "agent.h"
#include "clock.h"
#include "fleet.h"
#include "held.h"
#include "log.h"
#include "probe.h"
#include "watchdog.h"
#include "zk.h"
#include "zkplan.h"

/* What a completion or watch was for. */
enum zk_kind {
	ZK_SESSION, ZK_PARENT, ZK_CREATE, ZK_LIST, ZK_PRED_SET, ZK_PRED_WATCH,
	ZK_OWNER, ZK_CLAIM, ZK_RENEW, ZK_CLAIM_DATA, ZK_CLAIM_WATCH,
	ZK_SUCCESSOR, ZK_RELEASE, ZK_NOTIFIED, ZK_CHILD_WATCH,
	ZK_SELF_SET, ZK_SELF_WATCH, ZK_AHEAD,
	/* partitions: our member node and the member listing */
	ZK_MEMBER_CREATE, ZK_MEMBER_LIST, ZK_MEMBER_WATCH, ZK_MEMBER_DATA,
	ZK_MEMBER_DELETE, ZK_SESSION_RENEW, ZK_MEMBER_SET, ZK_MEMBER_DATA_WATCH,
};

static const char *const zk_kind_names[] = {
	"session", "create election path", "create", "list", "watch predecessor",
	"predecessor watch", "owner", "claim", "renew", "read claim",
	"claim watch", "read successor", "release", "notified",
	"children watch", "watch own node", "own node watch", "check ahead",
	"create member node", "list members", "members watch", "read member",
	"delete member node", "renew session", "write member node",
	"member data watch",
};

/*
 * One request in flight, freed by the completion that answers it. A renewal
 * is three pipelined calls sharing one request; the last of them to
 * complete reports all three. A multi keeps its ops and results here.
 */
struct zk_req {
	struct zk	*zk;
	struct part	*pt;		/* whose election; NULL: members */
	enum zk_kind	 kind;
	uint64_t	 gen;
	char		 name[ELECTION_NAME_MAX];
	int		 refs;		/* completions still to come */
	int		 rc;		/* the first failure */
	int		 failed_op;
	int64_t		 owner, czxid, mzxid, pzxid;
	char		*data;
	int		 datalen;
	zoo_op_t	 ops[3];
	zoo_op_result_t	 results[3];
	struct Stat	 set_stat;
	int		 nops;
	char		 paths[3][CONFIG_ZK_PATH_MAX];
	int		 queued;	/* our requests out when it was made */
	uint64_t	 asked;		/* the fleet's time of the step that sent
					   it: no later than its send */
};

/* A message from the ZooKeeper thread to the loop. */
struct zk_msg {
	struct zk_msg	*next;
	struct part	*pt;		/* answers: whose election */
	char		*path;		/* watches: the node's whole path */
	enum zk_kind	 kind;
	uint64_t	 gen;
	int		 rc;
	int		 failed_op;
	int		 state;		/* session events */
	int64_t		 session_id;
	int		 timeout_ms;
	int		 type;		/* watch event type */
	char		*name;
	char		*data;
	int		 datalen;
	char		**names;
	int		 count;
	int64_t		 zxid;
	int64_t		 pzxid;
	int64_t		 czxid;
	int64_t		 ctime;		/* member data: the node's ctime */
	int64_t		 owner;
	int		 queued;	/* answers: our requests out at its send */
	uint64_t	 asked;		/* answers: the request's asked */
	zhandle_t	*zh;		/* session events: which handle */
};

struct zk {
	struct agent	*agent;
	struct fleet	*fleet;		/* the session and its elections */
	struct zk_cb	 cb;		/* what we report upward */
	zhandle_t	*zh;
	zhandle_t	*retiring;	/* a dead session's, closed later */
	uint64_t	 retire_by;	/* at the latest */
	struct event	*ev_retire;
	int		 reqs_live;	/* zk_reqs not yet freed (atomic) */
	struct held_queues held;	/* held back (zk_hold; held.h) */
	struct event	*ev_exit;	/* a stop waits for them (zk_exit) */
	bool		 exiting;
	uint64_t	 exit_by;	/* then leaves the loop anyway */
	int		 exit_linger_ms;
	struct ACL_vector acl;
	struct ACL	 acl_entries[2];
	struct ACL_vector *aclp;
	struct event	*ev_wake;
	struct event	*ev_tick;
	struct event	*ev_reopen;
	pthread_mutex_t	 lock;
	struct zk_msg	*head, **tail;
	bool		 disconnected;	/* an outage is under way (log it once) */
	bool		 ever_connected;
	struct sockaddr_storage *addrs;	/* the servers, for zk_kick */
	int		 naddrs;
	uint64_t	 opened;	/* when the handle was opened */
	struct event	*ev_nag;	/* "still not connected" */
	uint64_t	 nag_since, nag_ms;
	struct probe	*probe;		/* what the server we are on is */
	uint64_t	 connects;	/* CONNECTED events: which connection */
	uint64_t	 probe_connect;	/* ... the probe asks about */
	char		 probe_peer[NI_MAXHOST + NI_MAXSERV + 2];
	bool		 probe_warned;	/* "cannot tell" said once */
	bool		 probe_limits_warned; /* "cannot learn" said once */
	char		 probe_why[256]; /* the last decision, said once */
	int		 told_min_timeout; /* minSessionTimeout last logged */
	struct probe_memory probe_mem;	/* what earlier probes learned */
	uint64_t	 resolved_at;	/* the names last resolved again */
	int		 told_timeout;	/* negotiated timeout last logged */
	bool		 told_short;	/* "below twice tick_time" said */
};




static void	zk_handle_open(struct zk *);
static void	zk_schedule_tick(struct zk *);
static int	zk_resolve_servers(struct zk *, bool);
static void	zk_nag_start(struct zk *);
static void	zk_probe_start(struct zk *);
static void	zk_run(struct zk *, const struct fleet_event *);
static void	zk_perform(struct zk *, const struct fleet_actions *);
static void	zk_release_held(struct zk *);

static void
zk_trace(const char *step)
{
	log_debug("trace: %s at=%" PRIu64, step, clock_now_us());
}

/* --- ZooKeeper threads: copy, queue, wake. --- */

static void
zk_enqueue(struct zk *zk, struct zk_msg *m)
{
	pthread_mutex_lock(&zk->lock);
	*zk->tail = m;
	zk->tail = &m->next;
	pthread_mutex_unlock(&zk->lock);
	event_active(zk->ev_wake, EV_READ, 0);
}

static struct zk_msg *
zk_msg_new(enum zk_kind kind, uint64_t gen, int rc)
{
	struct zk_msg *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort();
	m->kind = kind;
	m->gen = gen;
	m->rc = rc;
	m->failed_op = -1;
	return m;
}

static char *
zk_dup(const char *s, int len)
{
	char *p;

	if (s == NULL || len < 0)
		return NULL;
	p = malloc((size_t)len + 1);
	if (p == NULL)
		abort();
	memcpy(p, s, (size_t)len);
	p[len] = '\0';
	return p;
}

/*
 * Watch contexts are the kind alone: no allocation (a watch may never fire)
 * and no generation. The client keeps one watcher per (function, context)
 * and path, and re-registers it after a reconnect within the session, so a
 * constant context means one watcher per node however often we reconnect
 * (a generation in it would pile up a watcher per reconnect). The election
 * checks each event against its current state by node name.
 */
#define ZK_WATCH_CTX(kind)	((void *)(uintptr_t)(kind))

static void
zk_session_watcher(zhandle_t *zh, int type, int state, const char *path,
    void *ctx)
{
	struct zk *zk = (struct zk *)(uintptr_t)zoo_get_context(zh);
	struct zk_msg *m;
	const clientid_t *cid;

	if (type != ZOO_SESSION_EVENT || zk == NULL)
		return;
	m = zk_msg_new(ZK_SESSION, 0, ZOK);
	m->state = state;
	m->zh = zh;
	if (state == ZOO_CONNECTED_STATE) {
		cid = zoo_client_id(zh);
		m->session_id = cid != NULL ? cid->client_id : 0;
		m->timeout_ms = zoo_recv_timeout(zh);
	}
	zk_enqueue(zk, m);
}

static void
zk_node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	struct zk *zk = (struct zk *)(uintptr_t)zoo_get_context(zh);
	uintptr_t v = (uintptr_t)ctx;
	struct zk_msg *m;
	const char *slash;

	/* Rule 5: session events are for the session watcher alone. */
	if (type == ZOO_SESSION_EVENT || zk == NULL)
		return;
	log_debug("zookeeper: watch fired: %s %s (type %d)",
	    zk_kind_names[v < sizeof(zk_kind_names) / sizeof(zk_kind_names[0]) ?
	    v : 0], path != NULL ? path : "", type);
	m = zk_msg_new((enum zk_kind)v, 0, ZOK);
	m->type = type;
	if (path != NULL) {
		slash = strrchr(path, '/');
		m->name = strdup(slash != NULL ? slash + 1 : path);
		m->path = strdup(path);
	}
	zk_enqueue(zk, m);
}

/* A message answering REQ. */
/* Frees a request (any thread); a stop waits until none is left. */
static void
zk_req_free(struct zk_req *req)
{
	__atomic_sub_fetch(&req->zk->reqs_live, 1, __ATOMIC_ACQ_REL);
	free(req);
}

/*
 * How long a stop waits for the requests still out before it closes the
 * handle: closing with one out races the C client's completion thread,
 * which can then drop it (and our request with it) without a callback.
 */
#define ZK_EXIT_DRAIN_MS	1000
#define ZK_RESOLVE_DELAY_MS	60000	/* zoo_set_servers_resolution_delay */

/* Leaves the loop (after LINGER_MS) once no request is out, or at the
 * drain's bound. */
static void
zk_exit_check(struct zk *zk)
{
	struct timeval tv = { 0, 20 * 1000 };
	int live = __atomic_load_n(&zk->reqs_live, __ATOMIC_ACQUIRE);

	if (!zk->exiting)
		return;
	/* A dead session's handle waits for its answers as in a new
	 * session (zk_retire_check), and closes without opening one. */
	if (live > 0 && (zk->retiring != NULL || (zk->zh != NULL &&
	    zoo_state(zk->zh) == ZOO_CONNECTED_STATE))) {
		if (clock_now_ms() < zk->exit_by) {
			evtimer_add(zk->ev_exit, &tv);
			return;
		}
		log_warnx("zookeeper: %d request%s had no answer within %d ms "
		    "of the stop; closing the session all the same", live,
		    live == 1 ? "" : "s", ZK_EXIT_DRAIN_MS);
	}
	if (zk->exit_linger_ms > 0) {
		tv.tv_sec = zk->exit_linger_ms / 1000;
		tv.tv_usec = (zk->exit_linger_ms % 1000) * 1000;
		event_base_loopexit(zk->agent->base, &tv);
	} else
		event_base_loopexit(zk->agent->base, NULL);
}

static void
zk_exit_cb(evutil_socket_t fd, short what, void *arg)
{
	zk_exit_check(arg);
}

static void
zk_exit(struct zk *zk, int linger_ms)
{
	if (zk->exiting)
		return;
	zk->exiting = true;
	zk->exit_linger_ms = linger_ms;
	zk->exit_by = clock_now_ms() + ZK_EXIT_DRAIN_MS;
	zk_exit_check(zk);
}

static struct zk_msg *
zk_msg_req(const struct zk_req *req, int rc)
{
	struct zk_msg *m = zk_msg_new(req->kind, req->gen, rc);

	m->pt = req->pt;
	m->queued = req->queued;
	m->asked = req->asked;
	return m;
}

/* The first op of a failed multi that says why (later ones only say
 * "rolled back"). */
static int
zk_multi_failed_op(const struct zk_req *req)
{
	int i;

	for (i = 0; i < req->nops; i++)
		if (req->results[i].err != ZOK &&
		    req->results[i].err != ZRUNTIMEINCONSISTENCY)
			return i;
	return -1;
}

/* A multi (claim or release) answered. */
static void
zk_multi_cb(int rc, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_req(req, rc);

	m->name = strdup(req->name);
	if (rc == ZOK && req->kind == ZK_CLAIM)
		m->zxid = req->set_stat.mzxid;
	if (rc != ZOK) {
		m->failed_op = zk_multi_failed_op(req);
		if (m->failed_op >= 0)
			m->rc = req->results[m->failed_op].err;
	}
	zk_enqueue(req->zk, m);
	zk_req_free(req);
}

/* One of the calls sharing a request is done: the last one reports. */
static void
zk_req_done(struct zk_req *req)
{
	struct zk_msg *m;

	if (__atomic_sub_fetch(&req->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	m = zk_msg_req(req, req->rc);
	m->failed_op = req->failed_op;
	m->name = strdup(req->name);
	m->owner = req->owner;
	m->czxid = req->czxid;
	m->zxid = req->mzxid;
	m->pzxid = req->pzxid;
	m->data = req->data;
	m->datalen = req->datalen;
	zk_enqueue(req->zk, m);
	zk_req_free(req);
}

static void
zk_req_fail(struct zk_req *req, int op, int rc)
{
	if (rc != ZOK && req->rc == ZOK) {
		req->rc = rc;
		req->failed_op = op;
	}
}

/* The renewal's three calls, answered in order on one connection. */
static void
zk_renew_sync_cb(int rc, const char *value, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;

	zk_req_fail(req, 0, rc);
	zk_req_done(req);
}

static void
zk_renew_exists_cb(int rc, const struct Stat *stat, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;

	zk_req_fail(req, 1, rc);
	if (rc == ZOK && stat != NULL) {
		req->owner = stat->ephemeralOwner;
		req->czxid = stat->czxid;
	}
	zk_req_done(req);
}

static void
zk_renew_get_cb(int rc, const char *value, int value_len,
    const struct Stat *stat, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;

	zk_req_fail(req, 2, rc);
	if (rc == ZOK && stat != NULL) {
		req->data = zk_dup(value, value_len);
		req->datalen = value != NULL ? value_len : 0;
		req->mzxid = stat->mzxid;
		req->pzxid = stat->pzxid;
	}
	zk_req_done(req);
}

static void
zk_void_cb(int rc, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;

	zk_enqueue(req->zk, zk_msg_req(req, rc));
	zk_req_free(req);
}

/* A sync before a listing: only its failure matters, the listing says it. */
static void
zk_sync_cb(int rc, const char *value, const void *data)
{
}

/* A sync that answers alone (the session's renewal): its result is all. */
static void
zk_sync_req_cb(int rc, const char *value, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;

	zk_enqueue(req->zk, zk_msg_req(req, rc));
	zk_req_free(req);
}

static void
zk_string_cb(int rc, const char *value, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;

	/* Intermediate creates of the election path have no request. */
	if (req == NULL)
		return;
	zk_enqueue(req->zk, zk_msg_req(req, rc));
	zk_req_free(req);
}

static void
zk_string_stat_cb(int rc, const char *value, const struct Stat *stat,
    const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_req(req, rc);

	if (rc == ZOK && value != NULL)
		m->name = strdup(value);
	if (rc == ZOK && stat != NULL) {
		m->owner = stat->ephemeralOwner;
		m->czxid = stat->czxid;
	}
	zk_enqueue(req->zk, m);
	zk_req_free(req);
}

static void
zk_stat_cb(int rc, const struct Stat *stat, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_req(req, rc);

	m->name = strdup(req->name);
	if (rc == ZOK && stat != NULL) {
		m->owner = stat->ephemeralOwner;
		m->czxid = stat->czxid;
	}
	zk_enqueue(req->zk, m);
	zk_req_free(req);
}

static void
zk_data_cb(int rc, const char *value, int value_len, const struct Stat *stat,
    const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_req(req, rc);

	m->name = strdup(req->name);
	if (rc == ZOK) {
		m->data = zk_dup(value, value_len);
		m->datalen = value != NULL ? value_len : 0;
		if (stat != NULL) {
			m->zxid = stat->mzxid;
			m->pzxid = stat->pzxid;
			m->czxid = stat->czxid;
			if (req->kind == ZK_PRED_SET ||
			    req->kind == ZK_MEMBER_DATA)
				m->owner = stat->ephemeralOwner;
			if (req->kind == ZK_MEMBER_DATA)
				m->ctime = stat->ctime;
		}
	}
	zk_enqueue(req->zk, m);
	zk_req_free(req);
}

static void
zk_strings_cb(int rc, const struct String_vector *strings, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_req(req, rc);
	int i;

	if (rc == ZOK && strings != NULL && strings->count > 0) {
		m->names = calloc((size_t)strings->count, sizeof(char *));
		if (m->names == NULL)
			abort();
		for (i = 0; i < strings->count; i++)
			if (strings->data[i] != NULL)
				m->names[m->count++] = strdup(strings->data[i]);
	}
	zk_enqueue(req->zk, m);
	zk_req_free(req);
}

/* --- The loop side. --- */

static void
zk_msg_free(struct zk_msg *m)
{
	int i;

	for (i = 0; i < m->count; i++)
		free(m->names[i]);
	free(m->names);
	free(m->name);
	free(m->path);
	free(m->data);
	free(m);
}

static enum election_session
zk_session_of(int state)
{
	/*
	 * ZOO_READONLY_STATE is not a read-only ZooKeeper here: the agent never
	 * asks for read-only mode, and a read-only server refuses a client
	 * that did not (ZooKeeperServer.processConnectRequest). The C client
	 * takes any 41 bytes after the connect for the handshake's reply and
	 * the last of them for the read-only flag, so the state means that
	 * something other than ZooKeeper answered (an HTTP server, a proxy's
	 * error page). It stays "not leading" (rule 12); zk_log_session says
	 * what it means.
	 */
	if (state == ZOO_CONNECTED_STATE)
		return SESSION_CONNECTED;
	if (state == ZOO_EXPIRED_SESSION_STATE)
		return SESSION_EXPIRED;
	if (state == ZOO_AUTH_FAILED_STATE)
		return SESSION_AUTH_FAILED;
	if (state == ZOO_READONLY_STATE)
		return SESSION_READONLY;
	return SESSION_CONNECTING;
}

static void
zk_log_session(struct zk *zk, enum election_session s, const struct zk_msg *m)
{

	switch (s) {
	case SESSION_CONNECTED:
		log_info("zookeeper: connected, session 0x%" PRIx64
		    ", timeout %d ms%s", (uint64_t)m->session_id, m->timeout_ms,
		    zk->ever_connected ? " (reconnected)" : "");
		zk->ever_connected = true;
		zk->disconnected = false;
		break;
	case SESSION_EXPIRED:
		log_warnx("zookeeper: session expired; opening a new one");
		break;
	case SESSION_AUTH_FAILED:
		log_error("zookeeper: authentication failed (check zookeeper.auth)");
		break;
	case SESSION_READONLY:
		/* Once per spell without ZooKeeper, as a lost connection: the
		 * client goes on trying, and zk_nag says how long for. */
		if (!zk->disconnected) {
			zk->disconnected = true;
			log_warnx("zookeeper: a server of %s does not answer as "
			    "ZooKeeper does (its reply to the handshake reads as a "
			    "read-only session, which this agent never asks for): "
			    "is it a ZooKeeper client port? Not leading; retrying",
			    zk->agent->conf->zk_servers);
			zk_nag_start(zk);
		}
		break;
	default:
		if (!zk->disconnected) {
			zk->disconnected = true;
			log_warnx("zookeeper: connection lost; reconnecting to %s",
			    zk->agent->conf->zk_servers);
			zk_nag_start(zk);
		}
		break;
	}
}

/*
 * What the negotiated timeout means, said once per new value: ZooKeeper
 * clamps the request into [minSessionTimeout, maxSessionTimeout] (2 and 20
 * ticks by default), and the lease counts with the smallest timeout the
 * session was ever given (a new ZooKeeper leader restores the first one).
 */
static void
zk_log_timeout(struct zk *zk, int negotiated)
{
	const struct config *conf = zk->agent->conf;
	const struct election *e = fleet_session(zk->fleet);
	int asked = (int)conf->zk_session_timeout_ms;

	if (negotiated != zk->told_timeout) {
		zk->told_timeout = negotiated;
		if (negotiated > asked)
			log_warnx("zookeeper: the server raised the session "
			    "timeout from %d to %d ms (its minSessionTimeout): "
			    "a crashed leader is replaced only after %d ms",
			    asked, negotiated, negotiated);
		else if (negotiated < asked)
			log_warnx("zookeeper: the server lowered the session "
			    "timeout from %d to %d ms (its maxSessionTimeout): "
			    "the lease is shorter, and so is a ride through a "
			    "disconnect", asked, negotiated);
		if (e->timeout_ms < negotiated)
			log_warnx("zookeeper: this session keeps counting with "
			    "%d ms, the smallest timeout it was given (a new "
			    "ZooKeeper leader restores the first)", e->timeout_ms);
	}
	if (!e->shape.ok && !zk->told_short) {
		zk->told_short = true;
		log_error("zookeeper: the session timeout (%d ms) is below "
		    "twice zookeeper.tick_time (%" PRIu64 " ms), which "
		    "ZooKeeper's defaults never negotiate: no lease can be "
		    "proven, so this agent will not lead; check tick_time",
		    e->timeout_ms, conf->zk_tick_ms);
	} else if (e->shape.ok)
		zk->told_short = false;
}

/*
 * A node with a contender's name that no session owns (made by hand, or by
 * a client that forgot EPHEMERAL) never leaves: every candidate behind it
 * waits for ever. The agent cannot skip it (every agent must agree on who
 * is lowest, and only a stat of each child would tell), so it says so,
 * once per node, for an operator to delete it.
 */
static void
zk_check_persistent(struct zk *zk, const struct zk_msg *m)
{
	static char	warned[ELECTION_NAME_MAX];

	if (m->rc != ZOK || m->owner != 0 || m->name == NULL ||
	    strcmp(warned, m->name) == 0)
		return;
	snprintf(warned, sizeof(warned), "%s", m->name);
	log_warnx("election: %s/%s, ahead of this agent, is not ephemeral: "
	    "no session owns it, it never leaves, and every candidate behind "
	    "it waits until it is deleted", m->pt != NULL ? m->pt->path :
	    zk->fleet->parts[0].path, m->name);
}

/* The fleet event a message from the ZooKeeper thread is. */
static void
zk_apply(struct zk *zk, struct zk_msg *m)
{
	struct fleet *f = zk->fleet;
	struct fleet_event fev;
	struct election_event *ev = &fev.ev;
	struct part *pt = m->pt;

	memset(&fev, 0, sizeof(fev));
	fev.part = -1;
	ev->gen = m->gen;
	ev->now = clock_now_ms();
	ev->rc = m->rc;
	ev->failed_op = m->failed_op;
	ev->name = m->name;
	ev->data = m->data;
	ev->datalen = m->datalen;
	ev->names = m->names;
	ev->count = m->count;
	ev->zxid = m->zxid;
	ev->pzxid = m->pzxid;
	ev->czxid = m->czxid;
	ev->ctime = m->ctime;
	ev->owner = m->owner;
	ev->deleted = m->type == ZOO_DELETED_EVENT;
	ev->queued = m->queued;

	switch (m->kind) {
	case ZK_SESSION:
		if (m->zh != zk->zh)
			return;		/* a handle we already closed */
		fev.type = FEV_SESSION;
		ev->session = zk_session_of(m->state);
		ev->session_id = m->session_id;
		ev->timeout_ms = m->timeout_ms;
		ev->sent = zk->opened;
		if (ev->session != fleet_session(f)->session ||
		    ev->session == SESSION_CONNECTED)
			zk_log_session(zk, ev->session, m);
		if (ev->session == SESSION_CONNECTED)
			zk->connects++;
		zk_run(zk, &fev);
		if (ev->session == SESSION_CONNECTED &&
		    fleet_session(f)->session == SESSION_CONNECTED) {
			zk_log_timeout(zk, ev->timeout_ms);
			zk_probe_start(zk);
		}
		return;
	case ZK_MEMBER_CREATE:	fev.type = FEV_MEMBER_CREATED; break;
	case ZK_MEMBER_LIST:	fev.type = FEV_MEMBERS; break;
	case ZK_MEMBER_WATCH:	fev.type = FEV_MEMBERS_CHANGED; break;
	case ZK_MEMBER_DATA:	fev.type = FEV_MEMBER_DATA; break;
	case ZK_MEMBER_DELETE:	fev.type = FEV_MEMBER_DELETED; break;
	case ZK_SESSION_RENEW:
		fev.type = FEV_SESSION_RENEWED;
		ev->sent = m->asked;
		break;
	case ZK_MEMBER_SET:	fev.type = FEV_MEMBER_SET; break;
	case ZK_MEMBER_DATA_WATCH:
		if (m->type != ZOO_CHANGED_EVENT)
			return;		/* gone: the listing's watch says so */
		fev.type = FEV_MEMBER_DATA_CHANGED;
		break;
	case ZK_NOTIFIED:
		fev.type = FEV_NOTIFIED;
		ev->told = (uint64_t)m->zxid;
		zk_trace("told");
		break;
	default:
		fev.type = FEV_ELECTION;
		break;
	}
	if (fev.type == FEV_ELECTION || fev.type == FEV_NOTIFIED) {
		switch (m->kind) {
		case ZK_PARENT:		ev->type = EV_PARENT_CREATED; break;
		case ZK_CREATE:		ev->type = EV_CREATED; break;
		case ZK_LIST:		ev->type = EV_CHILDREN; break;
		case ZK_PRED_SET:
			ev->type = EV_PRED_SET;
			zk_check_persistent(zk, m);
			break;
		case ZK_PRED_WATCH:	ev->type = EV_PRED_CHANGED; break;
		case ZK_OWNER:		ev->type = EV_OWNER; break;
		case ZK_CLAIM:		ev->type = EV_CLAIMED; break;
		case ZK_RENEW:		ev->type = EV_RENEWED; break;
		case ZK_CLAIM_DATA:	ev->type = EV_CLAIM_DATA; break;
		case ZK_CLAIM_WATCH:	ev->type = EV_CLAIM_CHANGED; break;
		case ZK_SUCCESSOR:	ev->type = EV_SUCCESSOR_DATA; break;
		case ZK_RELEASE:
			ev->type = EV_RELEASED;
			if (ev->rc == ZOK && pt != NULL && ev->gen == pt->e.gen)
				zk_trace("release-done");
			break;
		case ZK_CHILD_WATCH:	ev->type = EV_CHILDREN_CHANGED; break;
		case ZK_SELF_SET:	ev->type = EV_SELF_SET; break;
		case ZK_SELF_WATCH:	ev->type = EV_SELF_CHANGED; break;
		case ZK_AHEAD:		ev->type = EV_AHEAD_CHECKED; break;
		default:		break;
		}
		if (pt == NULL && m->path != NULL)
			pt = fleet_part_of_path(f, m->path);
		if (pt == NULL)
			return;		/* a watch of no part of ours */
		fev.part = pt->idx;
	}
	if (ev->rc != ZOK && ev->rc != ZNONODE && ev->rc != ZNODEEXISTS &&
	    ev->rc != ZCONNECTIONLOSS && ev->rc != ZCLOSING &&
	    ev->rc != ZSESSIONEXPIRED && ev->rc != ZOPERATIONTIMEOUT &&
	    (ev->rc != ZNOAUTH || !fleet_session(f)->no_access))
		log_warnx("zookeeper: %s%s%s: %s", zk_kind_names[m->kind],
		    m->name != NULL ? " " : "", m->name != NULL ? m->name : "",
		    zerror(ev->rc));
	else if (ev->rc != ZOK)
		log_debug("zookeeper: %s%s%s: %s", zk_kind_names[m->kind],
		    m->name != NULL ? " " : "", m->name != NULL ? m->name : "",
		    zerror(ev->rc));
	zk_run(zk, &fev);
}

/* Steps the fleet with one event and performs what it asks. */
static void
zk_run(struct zk *zk, const struct fleet_event *fev)
{
	struct fleet_actions out = { 0 };

	fleet_step(zk->fleet, fev, &out);
	zk_perform(zk, &out);
	fleet_actions_free(&out);
}

/*
 * Applies what the client's threads queued, in order. A burst (thousands
 * of answers with many partitions) is taken a slice at a time, the loop
 * running between slices: the API answers, the watchdog is fed, a tick
 * that is due runs. The assignment runs once the queue is drained.
 */
#define ZK_WAKE_SLICE_MS	20

static void
zk_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;
	struct zk_msg *m;
	struct fleet_actions out = { 0 };
	uint64_t until = clock_now_ms() + ZK_WAKE_SLICE_MS;
	int n = 0;

	zk->cb.beat(zk->cb.arg);
	for (;;) {
		pthread_mutex_lock(&zk->lock);
		if ((m = zk->head) != NULL && (zk->head = m->next) == NULL)
			zk->tail = &zk->head;
		pthread_mutex_unlock(&zk->lock);
		if (m == NULL)
			break;
		zk_apply(zk, m);
		zk_msg_free(m);
		if (++n % 64 == 0 && clock_now_ms() >= until) {
			/* The rest after the loop has run once. */
			zk_release_held(zk);
			event_active(zk->ev_wake, 0, 0);
			return;
		}
	}
	/* A partition's leader changed: assign again, once. */
	fleet_flush(zk->fleet, clock_now_ms(), &out);
	zk_perform(zk, &out);
	fleet_actions_free(&out);
	zk_release_held(zk);
	zk_exit_check(zk);
}

static void
zk_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;
	struct fleet_event fev;
	struct fleet_actions out = { 0 };

	zk->cb.beat(zk->cb.arg);
	memset(&fev, 0, sizeof(fev));
	fev.type = FEV_TICK;
	fev.ev.now = clock_now_ms();
	zk_run(zk, &fev);
	fleet_flush(zk->fleet, fev.ev.now, &out);
	zk_perform(zk, &out);
	fleet_actions_free(&out);
}

/* The tick's timer, at the fleet's next tick. */
static void
zk_schedule_tick(struct zk *zk)
{
	uint64_t at = fleet_next_tick(zk->fleet), now;
	struct timeval tv;

	if (at == 0) {
		event_del(zk->ev_tick);
		return;
	}
	now = clock_now_ms();
	at = at > now ? at - now : 0;
	tv.tv_sec = (time_t)(at / 1000);
	tv.tv_usec = (suseconds_t)(at % 1000) * 1000;
	evtimer_add(zk->ev_tick, &tv);
}

/*
 * The client's log callback has no context argument, so its last error or
 * warning is kept here, under a lock (it runs on the client's threads), for
 * the loop to report while we are not connected (one agent, one handle).
 */
static pthread_mutex_t zk_client_error_lock = PTHREAD_MUTEX_INITIALIZER;
static char zk_client_error[256];

static void
zk_set_client_error(const char *text)
{
	size_t n = strcspn(text, "\r\n");

	if (n >= sizeof(zk_client_error))
		n = sizeof(zk_client_error) - 1;
	pthread_mutex_lock(&zk_client_error_lock);
	memcpy(zk_client_error, text, n);
	zk_client_error[n] = '\0';
	pthread_mutex_unlock(&zk_client_error_lock);
}

static void
zk_zoo_log_cb(const char *message)
{
	const char *p;

	log_debug("libzookeeper: %s", message);
	/* "date time:pid(tid):ZOO_ERROR@function@line: text" */
	if ((p = strstr(message, "ZOO_ERROR@")) == NULL &&
	    (p = strstr(message, "ZOO_WARN@")) == NULL)
		return;
	/* The pause after every server failed says nothing of why: keep the
	 * failure itself (say "Connection reset by peer" from a TLS tunnel
	 * whose handshake failed). */
	if (strstr(p, "Delaying connection after exhaustively") != NULL)
		return;
	if ((p = strstr(p, ": ")) != NULL)
		zk_set_client_error(p + 2);
}

/* The client's last complaint, for the status while we are not connected;
 * "" when it has made none since the handle was opened. */
void
zk_last_error(char *buf, size_t len)
{
	pthread_mutex_lock(&zk_client_error_lock);
	snprintf(buf, len, "%s", zk_client_error);
	pthread_mutex_unlock(&zk_client_error_lock);
}

/*
 * While we are not connected, say so, with the client's last complaint, at
 * growing intervals (1 s, 2 s, 4 s, ... 1 min): an unreachable ZooKeeper is
 * a state worth a line now and then, not a line per attempt.
 */
static void
zk_nag_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;
	char why[sizeof(zk_client_error)];
	struct timeval tv;

	if (fleet_session(zk->fleet)->session == SESSION_CONNECTED)
		return;
	pthread_mutex_lock(&zk_client_error_lock);
	snprintf(why, sizeof(why), "%s", zk_client_error[0] != '\0' ?
	    zk_client_error : "no answer yet");
	pthread_mutex_unlock(&zk_client_error_lock);
	log_warnx("zookeeper: not connected to %s for %.1f s: %s",
	    zk->agent->conf->zk_servers,
	    (double)(clock_now_ms() - zk->nag_since) / 1000.0, why);
	zk->nag_ms = zk->nag_ms * 2 > 60000 ? 60000 : zk->nag_ms * 2;
	tv.tv_sec = (time_t)(zk->nag_ms / 1000);
	tv.tv_usec = (suseconds_t)(zk->nag_ms % 1000) * 1000;
	evtimer_add(zk->ev_nag, &tv);
}

/* Not connected (any more): start saying so, unless we already do. */
static void
zk_nag_start(struct zk *zk)
{
	struct timeval tv = { 1, 0 };

	if (evtimer_pending(zk->ev_nag, NULL))
		return;
	zk->nag_since = clock_now_ms();
	zk->nag_ms = 1000;
	zk_set_client_error("");
	evtimer_add(zk->ev_nag, &tv);
}

/* Opens a handle; on failure (say, a name that does not resolve yet) a
 * timer tries again. */
static void
zk_handle_open(struct zk *zk)
{
	struct config *conf = zk->agent->conf;
	struct timeval retry = { 1, 0 };

	zk->opened = clock_now_ms();
	zk_nag_start(zk);
	watchdog_hold(zk->agent->watchdog, true);	/* no session; may block */
	zk->zh = zookeeper_init2(conf->zk_servers, zk_session_watcher,
	    (int)conf->zk_session_timeout_ms, NULL, zk, 0, zk_zoo_log_cb);
	if (zk->zh == NULL) {
		/* Most likely no name resolves: say which and why. */
		if (zk_resolve_servers(zk, true) == 0)
			zk_set_client_error("cannot start the ZooKeeper client");
		evtimer_add(zk->ev_reopen, &retry);
		return;
	}
	watchdog_hold(zk->agent->watchdog, false);	/* a session may live */
	/*
	 * The client resolves the server names again on every turn of its
	 * I/O thread unless told otherwise (resolution delay 0): a
	 * getaddrinfo() per message, a fifth of the agent's time under a
	 * few thousand partitions. While connected, once a minute is plenty;
	 * a lost connection resolves again whatever the delay.
	 */
	if (zoo_set_servers_resolution_delay(zk->zh, ZK_RESOLVE_DELAY_MS) !=
	    ZOK)
		log_warnx("zookeeper: cannot set the resolution delay");
	if (conf->zk_auth_scheme != NULL &&
	    zoo_add_auth(zk->zh, conf->zk_auth_scheme, conf->zk_auth_credentials,
	    (int)strlen(conf->zk_auth_credentials), NULL, NULL) != ZOK)
		log_warnx("zookeeper: cannot add authentication");
}

static void
zk_reopen_cb(evutil_socket_t fd, short what, void *arg)
{
	zk_handle_open(arg);
}

/*
 * A session that is over (expired, or its authentication failed) ends with
 * its handle closed and a new one opened. The client has told us of the
 * end first, and then fakes an answer for every request still out on it
 * (cleanup_bufs), which its completion thread hands over. Closing the
 * handle at once raced that thread: zookeeper_close stops it, and the
 * answers it had not handed over yet were dropped, with our requests,
 * which then counted as out for ever (every later stop waited its whole
 * ZK_EXIT_DRAIN_MS; tests/integration/test_partitions_core.py). So the
 * old handle is closed, and the new one opened, once no request is out
 * (no new one is sent meanwhile: there is no handle), or ZK_RETIRE_MS
 * later at the latest.
 */
#define ZK_RETIRE_MS	250

static void
zk_retire_check(struct zk *zk)
{
	struct timeval tv = { 0, 5 * 1000 };
	int live = __atomic_load_n(&zk->reqs_live, __ATOMIC_ACQUIRE);

	/* While stopping, zk_exit_check waits and zk_close closes. */
	if (zk->retiring == NULL || zk->exiting)
		return;
	if (live > 0 && clock_now_ms() < zk->retire_by) {
		evtimer_add(zk->ev_retire, &tv);
		return;
	}
	if (live > 0)
		log_warnx("zookeeper: %d request%s on the session that ended "
		    "had no answer within %d ms; closing it all the same",
		    live, live == 1 ? "" : "s", ZK_RETIRE_MS);
	zookeeper_close(zk->retiring);
	zk->retiring = NULL;
	zk_handle_open(zk);
}

static void
zk_retire_cb(evutil_socket_t fd, short what, void *arg)
{
	zk_retire_check(arg);
}

static struct zk_req *
zk_req_new(struct zk *zk, struct part *pt, enum zk_kind kind, const char *name)
{
	struct zk_req *req = calloc(1, sizeof(*req));

	if (req == NULL)
		abort();
	req->zk = zk;
	req->queued = __atomic_fetch_add(&zk->reqs_live, 1, __ATOMIC_ACQ_REL);
	req->asked = zk->fleet->now;
	req->pt = pt;
	req->kind = kind;
	req->gen = pt != NULL ? pt->e.gen : 0;
	req->failed_op = -1;
	if (name != NULL)
		snprintf(req->name, sizeof(req->name), "%s", name);
	return req;
}

/* What a plan's request is for, and the context of the watch a call
 * leaves, as this driver's kinds. */
static const enum zk_kind zk_plan_kinds[] = {
	[ZKF_NONE] = ZK_SESSION, [ZKF_PARENT] = ZK_PARENT,
	[ZKF_CREATE] = ZK_CREATE, [ZKF_LIST] = ZK_LIST,
	[ZKF_PRED_SET] = ZK_PRED_SET, [ZKF_OWNER] = ZK_OWNER,
	[ZKF_CLAIM] = ZK_CLAIM, [ZKF_RENEW] = ZK_RENEW,
	[ZKF_CLAIM_DATA] = ZK_CLAIM_DATA, [ZKF_SUCCESSOR] = ZK_SUCCESSOR,
	[ZKF_RELEASE] = ZK_RELEASE, [ZKF_SELF_SET] = ZK_SELF_SET,
	[ZKF_AHEAD] = ZK_AHEAD, [ZKF_MEMBER_CREATE] = ZK_MEMBER_CREATE,
	[ZKF_MEMBERS] = ZK_MEMBER_LIST, [ZKF_MEMBER_DATA] = ZK_MEMBER_DATA,
	[ZKF_MEMBER_DELETE] = ZK_MEMBER_DELETE, [ZKF_MEMBER_SET] = ZK_MEMBER_SET,
	[ZKF_SESSION_RENEW] = ZK_SESSION_RENEW,
};

static const enum zk_kind zk_plan_watches[] = {
	[ZKW_NONE] = ZK_SESSION, [ZKW_PRED] = ZK_PRED_WATCH,
	[ZKW_SELF] = ZK_SELF_WATCH, [ZKW_CLAIM] = ZK_CLAIM_WATCH,
	[ZKW_CHILDREN] = ZK_CHILD_WATCH, [ZKW_MEMBERS] = ZK_MEMBER_WATCH,
	[ZKW_MEMBER_DATA] = ZK_MEMBER_DATA_WATCH,
};

/* A call the client refused outright (handle closing, bad state) is
 * reported to the election as that call's failure, from the loop. */
static void
zk_refused(struct zk *zk, struct zk_req *req, int rc)
{
	struct zk_msg *m = zk_msg_req(req, rc);

	m->name = strdup(req->name);
	zk_enqueue(zk, m);
	zk_req_free(req);
}

/* The multi of a plan (the claim or the release), its ops kept in req. */
static int
zk_plan_multi(struct zk *zk, struct zk_req *req, const struct zkplan_call *c)
{
	const struct zkplan_item *it;
	int i;

	for (i = 0; i < c->nitems; i++) {
		it = &c->items[i];
		snprintf(req->paths[i], sizeof(req->paths[i]), "%s", it->path);
		if (it->type == ZKI_CHECK)
			zoo_check_op_init(&req->ops[i], req->paths[i],
			    it->version);
		else if (it->type == ZKI_DELETE)
			zoo_delete_op_init(&req->ops[i], req->paths[i],
			    it->version);
		else
			zoo_set_op_init(&req->ops[i], req->paths[i], it->data,
			    it->datalen, it->version, &req->set_stat);
	}
	req->nops = c->nitems;
	return zoo_amulti(zk->zh, req->nops, req->ops, req->results,
	    zk_multi_cb, req);
}

/*
 * Sends one call of plan p for req. A renewal's calls share req: the last
 * of them to complete reports all three. A read with a watch leaves it
 * under a constant context; rule 5: the plan reads nodes with getData, not
 * exists, so that no watch lingers on a node that is already gone.
 */
static int
zk_plan_send(struct zk *zk, struct zk_req *req, const struct zkplan *p,
    const struct zkplan_call *c)
{
	void *ctx = ZK_WATCH_CTX(zk_plan_watches[c->watch]);
	bool shared = zkplan_answers(p) > 1;	/* a renewal's calls */
	char path[CONFIG_ZK_PATH_MAX], *s;

	switch (c->type) {
	case ZKC_CREATE:
		if (c->parents) {
			snprintf(path, sizeof(path), "%s", c->path);
			for (s = strchr(path + 1, '/'); s != NULL;
			    s = strchr(s + 1, '/')) {
				*s = '\0';
				(void)zoo_acreate(zk->zh, path, NULL, -1,
				    zk->aclp, 0, zk_string_cb, NULL);
				*s = '/';
			}
		}
		return zoo_acreate(zk->zh, c->path, NULL, -1, zk->aclp, 0,
		    zk_string_cb, c->answers ? req : NULL);
	case ZKC_CREATE_SEQ:
		return zoo_acreate2(zk->zh, c->path, c->data, c->datalen,
		    zk->aclp, ZOO_EPHEMERAL_SEQUENTIAL, zk_string_stat_cb, req);
	case ZKC_SYNC:
		if (!c->answers)
			return zoo_async(zk->zh, c->path, zk_sync_cb, NULL);
		if (!shared)
			return zoo_async(zk->zh, c->path, zk_sync_req_cb, req);
		return zoo_async(zk->zh, c->path, zk_renew_sync_cb, req);
	case ZKC_GET:
		if (shared)
			return zoo_aget(zk->zh, c->path, 0, zk_renew_get_cb, req);
		if (c->watch != ZKW_NONE)
			return zoo_awget(zk->zh, c->path, zk_node_watcher, ctx,
			    zk_data_cb, req);
		return zoo_aget(zk->zh, c->path, 0, zk_data_cb, req);
	case ZKC_EXISTS:
		if (shared)
			return zoo_aexists(zk->zh, c->path, 0,
			    zk_renew_exists_cb, req);
		if (c->watch != ZKW_NONE)
			return zoo_awexists(zk->zh, c->path, zk_node_watcher,
			    ctx, zk_stat_cb, req);
		return zoo_aexists(zk->zh, c->path, 0, zk_stat_cb, req);
	case ZKC_CHILDREN:
		if (c->watch != ZKW_NONE)
			return zoo_awget_children(zk->zh, c->path,
			    zk_node_watcher, ctx, zk_strings_cb, req);
		return zoo_aget_children(zk->zh, c->path, 0, zk_strings_cb,
		    req);
	case ZKC_MULTI:
		return zk_plan_multi(zk, req, c);
	case ZKC_DELETE:
		return zoo_adelete(zk->zh, c->path, -1, zk_void_cb, req);
	}
	return ZBADARGUMENTS;
}

/*
 * Runs plan p (zkplan.h) for req, in order; stops at the first call the
 * client refuses. Returns that refusal when no answering call was queued
 * (the caller reports req failed); otherwise the answering calls that were
 * not queued fail in req, as they would have.
 */
static int
zk_plan_run(struct zk *zk, struct zk_req *req, const struct zkplan *p)
{
	int i, rc = ZOK, sent = 0, n = zkplan_answers(p);

	if (n > 1)
		req->refs = n;
	for (i = 0; i < p->ncalls; i++) {
		rc = zk_plan_send(zk, req, p, &p->calls[i]);
		if (rc != ZOK)
			break;
		if (p->calls[i].answers)
			sent++;
	}
	if (rc == ZOK || sent == 0 || n < 2)
		return rc;
	for (; sent < n; sent++) {
		/* Calls that were not queued will not complete. */
		zk_req_fail(req, sent, rc);
		zk_req_done(req);
	}
	return ZOK;
}

/*
 * The window: at most ZK_WINDOW of our requests out at once; more are held
 * back (held.h) and sent as answers come. ZooKeeper answers a session's
 * requests in order, so without it a burst (thousands of partitions
 * joining, or taking their share) would queue every later request behind
 * all of it: round trips of seconds, lapsed leases, terms barred for slow
 * round trips the agent caused itself. The session's renewal and the calls
 * about the members pass what is held: every partition's lease stands on
 * the first, the assignment on the others, and none of them touches a
 * partition, so their order among the rest does not matter (our member
 * node is still made before the listing that must see it). One election
 * never has a window's worth out. A request sent later than its election
 * asked is safe: its lease counts from the step that asked, which is
 * earlier, and its round trip counts as queued (the slow-ZooKeeper bar,
 * doc/design.md, "A slow ZooKeeper").
 * A parked partition's second look at a claim node that was not there
 * waits behind everything else (held.h): a claim read sent later than
 * asked reads a newer claim, and ZooKeeper answers in the order sent, so
 * no answer about a partition is older than one before it.
 */
#define ZK_WINDOW	64

/* Whether fa must be held back, and in which queue (*q). */
static bool
zk_window_full(struct zk *zk, const struct fleet_action *fa, int *q)
{
	*q = HELD_SOON;
	switch (fa->type) {
	case FACT_ELECTION:
		if (fa->a.type == ACT_NOTIFY)
			return false;	/* not a request */
		break;
	case FACT_MEMBER_DELETE:
		break;
	default:
		/* The members' calls and the session's renewal (the
		 * member node is made before the listing that must see
		 * it). */
		return false;
	}
	return held_must_wait(&zk->held, fa, fa->type == FACT_ELECTION ?
	    &zk->fleet->parts[fa->part].e : NULL,
	    __atomic_load_n(&zk->reqs_live, __ATOMIC_ACQUIRE), ZK_WINDOW, q);
}

/* Holds fa back in queue q, with a copy of the bytes it points at. */
static void
zk_hold(struct zk *zk, const struct fleet_action *fa, int q)
{
	struct held *h = calloc(1, sizeof(*h));
	const struct part *pt;

	if (h == NULL)
		abort();
	h->fa = *fa;
	if (fa->type == FACT_ELECTION) {
		pt = &zk->fleet->parts[fa->part];
		h->gen = pt->e.gen;
		memcpy(h->uuid, pt->e.uuid, sizeof(h->uuid));
		if (fa->a.data != NULL && fa->a.datalen > 0) {
			if ((h->bytes = malloc((size_t)fa->a.datalen)) == NULL)
				abort();
			memcpy(h->bytes, fa->a.data, (size_t)fa->a.datalen);
			h->fa.a.data = h->bytes;
		}
	}
	held_push(&zk->held, q, h);
}

static void	zk_perform_election(struct zk *, struct part *,
		    const struct election_action *, const struct held *);
static void	zk_perform_member(struct zk *, const struct fleet_action *,
		    bool);

/* Sends what was held back while the window has room; with no handle
 * (closed for a new session) it is dropped, as the client drops what is
 * out when closed: each election has moved to a new generation. */
static void
zk_release_held(struct zk *zk)
{
	struct held *h;

	while ((zk->zh == NULL ||
	    __atomic_load_n(&zk->reqs_live, __ATOMIC_ACQUIRE) < ZK_WINDOW) &&
	    (h = held_next(&zk->held)) != NULL) {
		if (zk->zh != NULL && h->fa.type == FACT_ELECTION)
			zk_perform_election(zk, &zk->fleet->parts[h->fa.part],
			    &h->fa.a, h);
		else if (zk->zh != NULL)
			zk_perform_member(zk, &h->fa, true);
		free(h->bytes);
		free(h);
	}
}

/*
 * Resolves the configured servers once, so that zk_kick can tell the
 * client's socket among ours. A name that does not resolve yet is skipped.
 */
static int
zk_resolve_servers(struct zk *zk, bool report)
{
	char *list, *host, *save = NULL, *slash, *colon, why[300];
	struct addrinfo hints, *res, *ai;
	int rc, failed = 0;

	free(zk->addrs);
	zk->addrs = NULL;
	zk->naddrs = 0;
	if ((list = strdup(zk->agent->conf->zk_servers)) == NULL)
		abort();
	if ((slash = strchr(list, '/')) != NULL)
		*slash = '\0';		/* the chroot */
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	for (host = strtok_r(list, ",", &save); host != NULL;
	    host = strtok_r(NULL, ",", &save)) {
		colon = strrchr(host, ':');
		if (colon == NULL)
			continue;
		*colon = '\0';
		if (host[0] == '[' && colon[-1] == ']') {
			colon[-1] = '\0';
			host++;
		}
		if ((rc = getaddrinfo(host, colon + 1, &hints, &res)) != 0) {
			snprintf(why, sizeof(why), "cannot resolve %s: %s", host,
			    gai_strerror(rc));
			if (report && failed++ == 0) {
				zk_set_client_error(why);
				if (zk->nag_ms == 1000)
					log_warnx("zookeeper: %s; retrying", why);
			}
			continue;
		}
		for (ai = res; ai != NULL; ai = ai->ai_next) {
			zk->addrs = reallocarray(zk->addrs, (size_t)zk->naddrs + 1,
			    sizeof(*zk->addrs));
			if (zk->addrs == NULL)
				abort();
			memset(&zk->addrs[zk->naddrs], 0, sizeof(*zk->addrs));
			memcpy(&zk->addrs[zk->naddrs++], ai->ai_addr, ai->ai_addrlen);
		}
		freeaddrinfo(res);
	}
	free(list);
	return failed;
}

static bool
zk_is_server(const struct zk *zk, const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)ss, *b4;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss, *b6;
	int i;

	for (i = 0; i < zk->naddrs; i++) {
		if (ss->ss_family != zk->addrs[i].ss_family)
			continue;
		if (ss->ss_family == AF_INET) {
			b4 = (const struct sockaddr_in *)&zk->addrs[i];
			if (a4->sin_port == b4->sin_port &&
			    a4->sin_addr.s_addr == b4->sin_addr.s_addr)
				return true;
		} else if (ss->ss_family == AF_INET6) {
			b6 = (const struct sockaddr_in6 *)&zk->addrs[i];
			if (a6->sin6_port == b6->sin6_port &&
			    memcmp(&a6->sin6_addr, &b6->sin6_addr,
			    sizeof(a6->sin6_addr)) == 0)
				return true;
		}
	}
	return false;
}

/*
 * The client's socket to the server it is on: the one socket of ours whose
 * peer is one of the configured servers (the client has no call that says
 * which server it uses, safely from another thread). Returns the
 * descriptor, or -1; fills peer.
 */
static int
zk_server_socket(struct zk *zk, int after, struct sockaddr_storage *peer,
    socklen_t *plen)
{
	struct dirent *de;
	struct stat st;
	DIR *dir;
	int fd, found = -1;

	if (zk->naddrs == 0)
		zk_resolve_servers(zk, false);
	if ((dir = opendir("/proc/self/fd")) == NULL) {
		log_warn("zookeeper: cannot look for the server connection");
		return -1;
	}
	while (found == -1 && (de = readdir(dir)) != NULL) {
		fd = atoi(de->d_name);
		if (fd <= STDERR_FILENO || fd <= after || fd == dirfd(dir) ||
		    fstat(fd, &st) == -1 || !S_ISSOCK(st.st_mode))
			continue;
		*plen = sizeof(*peer);
		memset(peer, 0, sizeof(*peer));
		if (getpeername(fd, (struct sockaddr *)peer, plen) == 0 &&
		    zk_is_server(zk, peer) && !probe_has_fd(zk->probe, fd))
			found = fd;
	}
	closedir(dir);
	return found;
}

static void
zk_peer_name(const struct sockaddr_storage *peer, socklen_t len, char *buf,
    size_t size)
{
	char host[NI_MAXHOST], port[NI_MAXSERV];

	if (getnameinfo((const struct sockaddr *)peer, len, host, sizeof(host),
	    port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
		snprintf(buf, size, "?");
	else if (peer->ss_family == AF_INET6)
		snprintf(buf, size, "[%s]:%s", host, port);
	else
		snprintf(buf, size, "%s:%s", host, port);
}

/*
 * The leader's renewal has hung, or a reconnection attempt has: the server
 * may be stopped or cut off. Or the server is an observer, through which
 * no lease is earned. The C client would wait 2T/3 of silence before
 * trying another one, by which time the lease is gone. The client has no
 * call to move on, so shut its socket down: its IO thread sees the
 * connection end, as it would if the server had reset it, and reconnects
 * to the next server within the same session.
 */
static void
zk_kick(struct zk *zk, const char *server)
{
	struct sockaddr_storage peer;
	char name[NI_MAXHOST + NI_MAXSERV + 2];
	socklen_t len;
	int fd = -1;

	/*
	 * After a connection ends the client steps to the next server twice
	 * (handle_error, then zookeeper_interest): with an even number of
	 * addresses that is the same server again. One more step first.
	 */
	if (zk->naddrs % 2 == 0 && zk->zh != NULL)
		zoo_cycle_next_server(zk->zh);
	name[0] = '\0';
	while ((fd = zk_server_socket(zk, fd, &peer, &len)) != -1) {
		/* Another socket to the server is a probe's, freed but not
		 * closed yet: shut it as well, and say it once. */
		shutdown(fd, SHUT_RDWR);
		if (name[0] == '\0')
			zk_peer_name(&peer, len, name, sizeof(name));
	}
	if (name[0] != '\0') {
		if (server != NULL && strcmp(server, "observer") == 0)
			log_warnx("zookeeper: %s is an observer, and no lease "
			    "is earned through one; moving to another server",
			    name);
		else if (server != NULL)
			log_warnx("zookeeper: %s may be an observer (%s), and no "
			    "lease is earned through one; moving to another "
			    "server", name, zk->probe_why);
		else
			log_warnx("zookeeper: no answer from %s for %" PRIu64
			    " ms; moving to another server", name,
			    fleet_session(zk->fleet)->shape.kick);
	}
}

/* --- What the server we are on is, and the ensemble (probe.c). --- */

#define ZK_PROBE_MS	2000

static void
zk_probe_end(struct zk *zk)
{
	probe_free(zk->probe);
	zk->probe = NULL;
}

/*
 * What probe.c learned of this connection's server: its kind (no lease
 * through an observer, or a server that may be one) and the servers'
 * minSessionTimeout (half of it bounds tickTime). Each partition's
 * election hears it.
 */
static void
zk_probe_cb(void *arg, const struct probe_result *r)
{
	struct zk *zk = arg;
	const struct config *conf = zk->agent->conf;
	const struct election *e = fleet_session(zk->fleet);
	struct probe_result res = *r;	/* r is the probe's, freed now */
	struct fleet_event fev;
	int bound;

	r = &res;
	if (zk->probe != NULL)
		probe_remember(&zk->probe_mem, zk->probe, r);
	zk_probe_end(zk);
	if (zk->probe_connect != zk->connects ||
	    e->session != SESSION_CONNECTED)
		return;		/* another connection by now */
	log_debug("zookeeper: %s is %s: %s; minSessionTimeout %d ms%s%s",
	    zk->probe_peer, election_server_name(r->server), r->why,
	    r->min_timeout_ms, r->session_note[0] != '\0' ? "; " : "",
	    r->session_note);
	if (r->server == SERVER_UNKNOWN && !zk->probe_warned) {
		zk->probe_warned = true;
		log_warnx("zookeeper: cannot tell whether %s is an observer "
		    "(srvr: %s; /zookeeper/config: %s); taking it for a voting "
		    "server. Through an observer the lease would be too long: "
		    "allow srvr on the client port if the ensemble has "
		    "observers", zk->probe_peer, r->srvr_note[0] != '\0' ?
		    r->srvr_note : "no answer", r->session_note[0] != '\0' ?
		    r->session_note : "not read");
	} else if (r->server == SERVER_UNIDENTIFIED &&
	    strcmp(zk->probe_why, r->why) != 0)
		log_warnx("zookeeper: no lease through %s: %s%s%s%s",
		    zk->probe_peer, r->why, r->config_known ? "" : " (",
		    r->config_known ? "" : (r->session_note[0] != '\0' ?
		    r->session_note : "no answer"), r->config_known ? "" : ")");
	snprintf(zk->probe_why, sizeof(zk->probe_why), "%s", r->why);
	if (r->min_timeout_ms > zk->told_min_timeout) {
		zk->told_min_timeout = r->min_timeout_ms;
		bound = (r->min_timeout_ms + 1) / 2;
		if (conf->zk_tick_ms > 0 && conf->zk_tick_ms < (uint64_t)bound)
			log_warnx("zookeeper: zookeeper.tick_time (%" PRIu64
			    " ms) is below what %s implies (minSessionTimeout "
			    "%d ms: tickTime up to %d ms); the lease counts with "
			    "%d ms", conf->zk_tick_ms, zk->probe_peer,
			    r->min_timeout_ms, bound, bound);
		else if (conf->zk_tick_ms == 0)
			log_info("zookeeper: minSessionTimeout is %d ms on %s, "
			    "so tickTime is at most %d ms; the lease counts with "
			    "that", r->min_timeout_ms, zk->probe_peer, bound);
	} else if (r->min_timeout_ms == 0 && zk->told_min_timeout == 0 &&
	    !zk->probe_limits_warned) {
		zk->probe_limits_warned = true;
		log_warnx("zookeeper: cannot learn the servers' "
		    "minSessionTimeout from %s (%s); the lease assumes %s",
		    zk->probe_peer, r->session_note, conf->zk_tick_ms > 0 ?
		    "zookeeper.tick_time" : "tickTime up to half the session "
		    "timeout");
	}
	memset(&fev, 0, sizeof(fev));
	fev.type = FEV_SERVER;
	fev.part = -1;
	fev.ev.now = clock_now_ms();
	fev.ev.server = r->server;
	fev.ev.min_timeout_ms = r->min_timeout_ms;
	zk_run(zk, &fev);
}

/* Asks the server this connection is on what it is (EV_SERVER). */
static void
zk_probe_start(struct zk *zk)
{
	struct sockaddr_storage peer;
	struct probe_result r;
	socklen_t len;
	int fd;

	zk_probe_end(zk);
	zk->probe_connect = zk->connects;
	memset(&r, 0, sizeof(r));
	memset(&peer, 0, sizeof(peer));
	fd = zk_server_socket(zk, -1, &peer, &len);
	if (fd == -1 && clock_now_ms() >= zk->resolved_at + 60000) {
		/* The names may have moved (a server's pod started again
		 * elsewhere): resolve them again, at most once a minute. */
		zk->resolved_at = clock_now_ms();
		watchdog_hold(zk->agent->watchdog, true);	/* may block */
		zk_resolve_servers(zk, false);
		watchdog_hold(zk->agent->watchdog, false);
		fd = zk_server_socket(zk, -1, &peer, &len);
	}
	if (fd != -1) {
		zk_peer_name(&peer, len, zk->probe_peer,
		    sizeof(zk->probe_peer));
		zk->probe = probe_start(zk->agent->base, &peer, len,
		    ZK_PROBE_MS, &zk->probe_mem, zk_probe_cb, zk);
		if (zk->probe != NULL)
			return;
		snprintf(r.srvr_note, sizeof(r.srvr_note), "%s",
		    strerror(errno));
	} else {
		/* Gone again (the next connection asks), or not found. */
		memset(&peer, 0, sizeof(peer));
		snprintf(zk->probe_peer, sizeof(zk->probe_peer), "the server");
		snprintf(r.srvr_note, sizeof(r.srvr_note), "its connection was "
		    "not found");
	}
	/* Nothing asked: the election must hear something either way, as
	 * earlier probes would have it. */
	snprintf(r.session_note, sizeof(r.session_note), "%s", r.srvr_note);
	r.server = probe_decide(zk->probe_mem.ens_known ? &zk->probe_mem.ens :
	    NULL, zk->probe_mem.absent, &peer, SERVER_UNKNOWN, r.why,
	    sizeof(r.why));
	zk_probe_cb(zk, &r);
}

/* One election action of part pt: its calls (zkplan.c), or the app told;
 * h: held back (zk_hold) until now, under its generation and uuid. */
static void
zk_perform_election(struct zk *zk, struct part *pt,
    const struct election_action *a, const struct held *h)
{
	struct election *e = &pt->e;
	struct zkplan plan;
	struct zk_req *req;
	int rc;

	if (a->type == ACT_NOTIFY) {
		/* When the app has been told (a->wait), EV_NOTIFIED follows
		 * from the queue, after the rest of this step's actions. */
		zk->cb.notify(zk->cb.arg, pt, a);
		return;
	}
	if (zk->zh == NULL)
		return;
	/* The calls: zkplan.c, which the simulator runs too. */
	rc = zkplan_build(a, pt->path, pt->prefix, h != NULL ? h->uuid :
	    e->uuid, &plan);
	if (plan.what == ZKF_NONE)
		return;
	req = zk_req_new(zk, pt, zk_plan_kinds[plan.what], plan.name);
	if (h != NULL) {
		req->gen = h->gen;
		req->queued = ZK_WINDOW;	/* its wait counts as queued */
	}
	if (rc == -1) {
		/* config keeps paths short enough; never sent cut short */
		log_error("zookeeper: a path under %s too long; not sent",
		    pt->path);
		zk_refused(zk, req, ZBADARGUMENTS);
		return;
	}
	switch (a->type) {
	case ACT_CREATE_PARENT:
		if (e->no_chroot)	/* said once already */
			log_debug("election: creating the election path %s",
			    pt->path);
		else
			log_info("election: creating the election path %s",
			    pt->path);
		break;
	case ACT_CREATE:
		log_debug("election: creating %s", plan.calls[0].path);
		break;
	case ACT_CLAIM:
		zk_trace("confirm-sent");
		break;
	case ACT_RELEASE:
		zk_trace("release-sent");
		log_info("election: releasing %s/%s%s%s", pt->path, a->name,
		    a->successor[0] != '\0' ? "; naming the next leader " : "",
		    a->successor);
		break;
	case ACT_WATCH_CLAIM:
	case ACT_READ_CLAIM:
		if (e->phase == PHASE_TAKEOVER)
			zk_trace("confirm-sent");
		break;
	default:
		break;
	}
	rc = zk_plan_run(zk, req, &plan);
	if (rc != ZOK)
		zk_refused(zk, req, rc);
}

/* A fleet action about the members (partitions): its calls (zkplan.c);
 * held: held back until now. */
static void
zk_perform_member(struct zk *zk, const struct fleet_action *fa, bool held)
{
	const struct fleet *f = zk->fleet;
	struct zkplan plan;
	struct zk_req *req;
	int rc;

	if (zk->zh == NULL)
		return;
	rc = zkplan_member(fa, f->members_path, f->parts_path, f->member_data,
	    f->member_datalen, &plan);
	if (plan.what == ZKF_NONE)
		return;
	req = zk_req_new(zk, NULL, zk_plan_kinds[plan.what], plan.name);
	req->gen = fa->gen;
	if (held)
		req->queued = ZK_WINDOW;
	if (rc == -1) {
		log_error("zookeeper: a path under %s too long; not sent",
		    f->members_path);
		zk_refused(zk, req, ZBADARGUMENTS);
		return;
	}
	rc = zk_plan_run(zk, req, &plan);
	if (rc != ZOK)
		zk_refused(zk, req, rc);
}

/* Performs what a fleet step asked, in order, and sets the tick. */
static void
zk_perform(struct zk *zk, const struct fleet_actions *out)
{
	const struct fleet_action *fa;
	struct part *pt;
	int i, q;

	for (i = 0; i < out->n; i++) {
		fa = &out->a[i];
		pt = fa->part >= 0 ? &zk->fleet->parts[fa->part] : NULL;
		switch (fa->type) {
		case FACT_ELECTION:
			if (zk_window_full(zk, fa, &q))
				zk_hold(zk, fa, q);
			else
				zk_perform_election(zk, pt, &fa->a, NULL);
			break;
		case FACT_KICK:
			if (zk->zh != NULL)
				zk_kick(zk, fa->a.name[0] != '\0' ? fa->a.name :
				    NULL);
			break;
		case FACT_NEW_SESSION:
			/* Rule 8; we are in the loop, not a ZooKeeper
			 * callback. */
			if (zk->retiring != NULL)
				break;	/* its close opens the next */
			zk->retiring = zk->zh;
			zk->retire_by = clock_now_ms() + ZK_RETIRE_MS;
			zk->zh = NULL;
			/* What the old session held back fails with it. */
			zk_release_held(zk);
			zk_retire_check(zk);
			break;
		case FACT_EXIT:
			zk_exit(zk, (int)fa->linger_ms);
			break;
		case FACT_CHANGED:
			zk->cb.changed(zk->cb.arg, pt);
			break;
		default:
			if (zk_window_full(zk, fa, &q))
				zk_hold(zk, fa, q);
			else
				zk_perform_member(zk, fa, false);
			break;
		}
	}
	zk_release_held(zk);	/* what held_must_wait moved, if room */
	zk_schedule_tick(zk);
}

/* The app has been told of part pt's losses up to told; its election may
 * let the node go. */
void
zk_notified(struct zk *zk, struct part *pt, uint64_t told)
{
	struct zk_msg *m = zk_msg_new(ZK_NOTIFIED, 0, ZOK);

	m->pt = pt;
	m->zxid = (int64_t)told;
	zk_enqueue(zk, m);
}

/* A resign of part pt's term, from the loop. */
void
zk_resign(struct zk *zk, struct part *pt, uint64_t hold_ms)
{
	struct fleet_event fev;

	memset(&fev, 0, sizeof(fev));
	/* With partitions, the partition moves to another member. */
	fev.type = zk->fleet->partitioned ? FEV_PART_RESIGN : FEV_RESIGN;
	fev.part = pt->idx;
	fev.ev.now = clock_now_ms();
	fev.ev.hold_ms = hold_ms;
	zk_run(zk, &fev);
}

/* A drain (or its end) of a partitioned agent. */
void
zk_drain(struct zk *zk, bool drain)
{
	struct fleet_event fev;

	memset(&fev, 0, sizeof(fev));
	fev.type = FEV_DRAIN;
	fev.part = -1;
	fev.ev.now = clock_now_ms();
	fev.ev.assigned = drain;
	zk_run(zk, &fev);
}

/* A graceful stop (rule 10), from the loop. */
void
zk_stop(struct zk *zk)
{
	struct fleet_event fev;

	memset(&fev, 0, sizeof(fev));
	fev.type = FEV_STOP;
	fev.part = -1;
	fev.ev.now = clock_now_ms();
	zk_run(zk, &fev);
}

/*
 * What a step changed that a person or a test wants to read in the log:
 * each term's start and end, and each lease extension, on CLOCK_BOOTTIME
 * which every agent on a machine shares ("audit:", debug level; an agent
 * answers is_leader only inside [lead at, min(end at, until))), and how a
 * disconnect while leading began and ended.
 */
static void
zk_log_step(struct zk *zk, struct part *pt,
    const struct election_glance *before,
    const struct election_actions *out)
{
	const struct election *e = &pt->e;
	char in[CONFIG_PARTITION_NAME_MAX + 16] = "";
	enum election_reason reason = REASON_NONE;
	char bartext[256];
	uint64_t now;
	int i;

	for (i = 0; i < out->n; i++)
		if (out->a[i].type == ACT_NOTIFY)
			reason = out->a[i].reason;
	if (log_get_level() > LOG_DEBUG && e->role == before->role &&
	    e->phase == before->phase && e->riding_since ==
	    before->riding_since && e->last.bar == before->bar &&
	    e->strangers == 0)
		return;		/* nothing to log (the common step) */
	now = clock_now_ms();
	if (pt->name != NULL)
		snprintf(in, sizeof(in), " partition=%s", pt->name);
	if (e->role == ELECTION_LEADER && before->role != ELECTION_LEADER) {
		zk_trace("confirm-done");
		log_debug("audit: lead epoch=%" PRIu64 " at=%" PRIu64 " until=%"
		    PRIu64 "%s", e->epoch, clock_now_us(), e->lease_deadline, in);
	} else if (e->role == ELECTION_LEADER &&
	    e->lease_deadline > before->lease_deadline)
		log_debug("audit: lease epoch=%" PRIu64 " until=%" PRIu64 "%s",
		    e->epoch, e->lease_deadline, in);
	else if (e->role != ELECTION_LEADER && before->role == ELECTION_LEADER)
		log_debug("audit: end epoch=%" PRIu64 " at=%" PRIu64
		    " reason=%s%s", before->epoch, clock_now_us(),
		    reason != REASON_NONE ? election_reason_name(reason) : "", in);

	if (e->strangers > 0 && (before->strangers != e->strangers ||
	    strncmp(before->stranger, e->stranger,
	    sizeof(before->stranger) - 1) != 0))
		log_warnx("election: ignoring %d child%s of %s that %s not "
		    "a candidate node (%s%s)", e->strangers,
		    e->strangers == 1 ? "" : "ren", pt->path,
		    e->strangers == 1 ? "is" : "are", e->stranger,
		    e->strangers == 1 ? "" : ", ...");
	if (before->bar != e->last.bar) {
		if (e->last.bar != BAR_NONE)
			log_warnx("election: not leading: %s",
			    election_bar_text(&e->last, bartext,
			    sizeof(bartext)));
		else
			log_info("election: may lead again (%s no more)",
			    election_bar_name(before->bar));
	}
	if (before->phase == PHASE_WATCHING && e->phase == PHASE_TAKEOVER)
		zk_trace("pred-gone");
	if (before->phase == PHASE_HOLDING && e->phase != PHASE_HOLDING &&
	    !e->stopping && pt->name == NULL)
		log_info("election: the resign's hold is over; rejoining");
	if (before->riding_since == 0 && e->riding_since != 0)
		log_warnx("election: connection lost while leading; leading on "
		    "within the lease (%" PRIu64 " ms left) while reconnecting",
		    election_lease_remaining(e, now));
	else if (before->riding_since != 0 && e->riding_since == 0) {
		if (e->role == ELECTION_LEADER)
			log_info("election: reconnected after %" PRIu64 " ms with "
			    "%" PRIu64 " ms of lease left; the term goes on "
			    "(epoch %" PRIu64 ")", now - before->riding_since,
			    election_lease_remaining(e, now), e->epoch);
		else
			log_warnx("election: the disconnect (%" PRIu64 " ms) "
			    "cost the term", now - before->riding_since);
	}
}

/* At debug level, the phases a step went through ("listing > watching"). */
static void
zk_log_trail(struct part *pt, const struct election_glance *before)
{
	const struct election *e = &pt->e;
	char buf[256];
	size_t off;
	int i;

	if (e->trail_n == 0 || log_get_level() > LOG_DEBUG)
		return;
	off = (size_t)snprintf(buf, sizeof(buf), "%s",
	    election_phase_name(before->phase));
	for (i = 0; i < e->trail_n && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, " > %s",
		    election_phase_name((enum election_phase)e->trail[i]));
	log_debug("election: %s%sphase %s", pt->name != NULL ? pt->name : "",
	    pt->name != NULL ? ":" : "", buf);
}

/* fleet.c stepped part pt's election: log what changed, and each action. */
static void
zk_stepped(void *arg, struct part *pt, const struct election_glance *before,
    const struct election_actions *out)
{
	struct zk *zk = arg;
	int i;

	zk_log_step(zk, pt, before, out);
	zk_log_trail(pt, before);
	if (log_get_level() > LOG_DEBUG)
		return;
	for (i = 0; i < out->n; i++)
		log_debug("election: %s%s%s %s (phase %s, gen %" PRIu64 ")",
		    pt->name != NULL ? pt->name : "", pt->name != NULL ? ":" : "",
		    election_action_name(out->a[i].type), out->a[i].name,
		    election_phase_name(pt->e.phase), pt->e.gen);
}

struct zk *
zk_open(struct agent *agent, const struct zk_cb *cb)
{
	static char s_auth[] = "auth", s_empty[] = "", s_world[] = "world",
	    s_anyone[] = "anyone";
	struct config *conf = agent->conf;
	struct zk *zk;

	zk = calloc(1, sizeof(*zk));
	if (zk == NULL)
		return NULL;
	zk->agent = agent;
	zk->fleet = &agent->fleet;
	zk->fleet->stepped = zk_stepped;
	zk->fleet->stepped_arg = zk;
	zk->cb = *cb;
	pthread_mutex_init(&zk->lock, NULL);
	zk->tail = &zk->head;
	held_init(&zk->held, zk->fleet->nparts);
	if (conf->zk_auth_scheme != NULL) {
		/* Creator may do all; everyone else may only read. */
		zk->acl_entries[0].perms = ZOO_PERM_ALL;
		zk->acl_entries[0].id.scheme = s_auth;
		zk->acl_entries[0].id.id = s_empty;
		zk->acl_entries[1].perms = ZOO_PERM_READ;
		zk->acl_entries[1].id.scheme = s_world;
		zk->acl_entries[1].id.id = s_anyone;
		zk->acl.count = 2;
		zk->acl.data = zk->acl_entries;
		zk->aclp = &zk->acl;
	} else
		zk->aclp = &ZOO_OPEN_ACL_UNSAFE;
	zk->ev_wake = event_new(agent->base, -1, 0, zk_wake_cb, zk);
	zk->ev_tick = evtimer_new(agent->base, zk_tick_cb, zk);
	zk->ev_reopen = evtimer_new(agent->base, zk_reopen_cb, zk);
	zoo_set_debug_level(log_get_level() == LOG_DEBUG ? ZOO_LOG_LEVEL_INFO :
	    ZOO_LOG_LEVEL_ERROR);
	zk->ev_nag = evtimer_new(agent->base, zk_nag_cb, zk);
	zk->ev_exit = evtimer_new(agent->base, zk_exit_cb, zk);
	zk->ev_retire = evtimer_new(agent->base, zk_retire_cb, zk);
	zk_resolve_servers(zk, false);
	log_info("zookeeper: connecting to %s", conf->zk_servers);
	zk_handle_open(zk);
	return zk;
}

void
zk_close(struct zk *zk)
{
	struct zk_msg *m;

	if (zk == NULL)
		return;
	/* Closing ends the session: ZooKeeper drops our ephemeral node at
	 * once, which a successor sees as a deletion. */
	if (zk->retiring != NULL)
		zookeeper_close(zk->retiring);
	if (zk->zh != NULL)
		zookeeper_close(zk->zh);
	zk_probe_end(zk);
	held_free(&zk->held);
	while ((m = zk->head) != NULL) {
		zk->head = m->next;
		zk_msg_free(m);
	}
	event_free(zk->ev_wake);
	event_free(zk->ev_tick);
	event_free(zk->ev_reopen);
	event_free(zk->ev_nag);
	if (zk->ev_exit != NULL)
		event_free(zk->ev_exit);
	if (zk->ev_retire != NULL)
		event_free(zk->ev_retire);
	pthread_mutex_destroy(&zk->lock);
	free(zk->addrs);
	zk->fleet->stepped = NULL;
	free(zk);
}
