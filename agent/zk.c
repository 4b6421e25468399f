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
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <zookeeper/zookeeper.h>

#include "agent.h"
#include "clock.h"
#include "log.h"

/* What a completion or watch was for. */
enum zk_kind {
	ZK_SESSION, ZK_PARENT, ZK_CREATE, ZK_LIST, ZK_PRED_SET, ZK_PRED_WATCH,
	ZK_OWNER, ZK_CLAIM, ZK_RENEW, ZK_CLAIM_DATA, ZK_CLAIM_WATCH,
	ZK_LOWEST_DATA, ZK_LOWEST_WATCH, ZK_DELETE, ZK_NOTIFIED, ZK_CHILD_WATCH,
	ZK_SELF_SET, ZK_SELF_WATCH,
};

static const char *const zk_kind_names[] = {
	"session", "create election path", "create", "list", "watch predecessor",
	"predecessor watch", "owner", "claim", "renew", "read claim",
	"claim watch", "read lowest", "lowest watch", "delete", "notified",
	"children watch", "watch own node", "own node watch",
};

/* One request in flight; freed by the loop once its completion is applied. */
struct zk_req {
	struct zk	*zk;
	enum zk_kind	 kind;
	uint64_t	 gen;
	uint64_t	 sent;
	char		 name[ELECTION_NAME_MAX];
	/* the claim multi */
	zoo_op_t	 ops[2];
	zoo_op_result_t	 results[2];
	struct Stat	 set_stat;
};

/* A message from the ZooKeeper thread to the loop. */
struct zk_msg {
	struct zk_msg	*next;
	enum zk_kind	 kind;
	uint64_t	 gen;
	uint64_t	 sent;
	int		 rc;
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
	int64_t		 owner;
	zhandle_t	*zh;		/* session events: which handle */
};

struct zk {
	struct agent	*agent;
	zhandle_t	*zh;
	char		*path;		/* election path */
	char		*prefix;	/* path + "/_c_" */
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
};

static void	zk_perform(struct zk *, const struct election_action *);

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

/* Watch contexts are integers, not allocations: a watch may never fire. */
#define ZK_WATCH_CTX(gen, kind)	((void *)(uintptr_t)(((gen) << 8) | (kind)))

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
	m = zk_msg_new((enum zk_kind)(v & 0xff), (uint64_t)(v >> 8), ZOK);
	m->type = type;
	if (path != NULL) {
		slash = strrchr(path, '/');
		m->name = strdup(slash != NULL ? slash + 1 : path);
	}
	zk_enqueue(zk, m);
}

static void
zk_void_cb(int rc, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m;

	if (req == NULL)
		return;
	m = zk_msg_new(req->kind, req->gen, rc);
	m->sent = req->sent;
	m->name = strdup(req->name);
	if (req->kind == ZK_CLAIM && rc == ZOK)
		m->zxid = req->set_stat.mzxid;
	if (req->kind == ZK_CLAIM && rc != ZOK && req->results[0].err != ZOK)
		m->rc = req->results[0].err;	/* the check op: our node */
	zk_enqueue(req->zk, m);
	free(req);
}

static void
zk_string_cb(int rc, const char *value, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;

	/* Intermediate creates of the election path have no request. */
	if (req == NULL)
		return;
	zk_enqueue(req->zk, zk_msg_new(req->kind, req->gen, rc));
	free(req);
}

static void
zk_string_stat_cb(int rc, const char *value, const struct Stat *stat,
    const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_new(req->kind, req->gen, rc);

	if (rc == ZOK && value != NULL)
		m->name = strdup(value);
	if (rc == ZOK && stat != NULL)
		m->owner = stat->ephemeralOwner;
	zk_enqueue(req->zk, m);
	free(req);
}

static void
zk_stat_cb(int rc, const struct Stat *stat, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_new(req->kind, req->gen, rc);

	m->sent = req->sent;
	m->name = strdup(req->name);
	if (rc == ZOK && stat != NULL)
		m->owner = stat->ephemeralOwner;
	zk_enqueue(req->zk, m);
	free(req);
}

static void
zk_data_cb(int rc, const char *value, int value_len, const struct Stat *stat,
    const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_new(req->kind, req->gen, rc);

	m->name = strdup(req->name);
	if (rc == ZOK) {
		m->data = zk_dup(value, value_len);
		m->datalen = value != NULL ? value_len : -1;
		if (stat != NULL)
			m->zxid = req->kind == ZK_LOWEST_DATA ? stat->czxid :
			    stat->mzxid;
	}
	zk_enqueue(req->zk, m);
	free(req);
}

static void
zk_strings_cb(int rc, const struct String_vector *strings, const void *data)
{
	struct zk_req *req = (struct zk_req *)(uintptr_t)data;
	struct zk_msg *m = zk_msg_new(req->kind, req->gen, rc);
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
	free(req);
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
	free(m->data);
	free(m);
}

static enum election_session
zk_session_of(int state)
{
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
		log_warnx("zookeeper: connected to a read-only server; not leading");
		break;
	default:
		if (!zk->disconnected) {
			zk->disconnected = true;
			log_warnx("zookeeper: connection lost; reconnecting to %s",
			    zk->agent->conf->zk_servers);
		}
		break;
	}
}

static void
zk_apply(struct zk *zk, struct zk_msg *m)
{
	struct election_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.gen = m->gen;
	ev.now = clock_now_ms();
	ev.rc = m->rc;
	ev.sent = m->sent;
	ev.name = m->name;
	ev.data = m->data;
	ev.datalen = m->datalen;
	ev.names = m->names;
	ev.count = m->count;
	ev.zxid = m->zxid;
	ev.owner = m->owner;
	ev.deleted = m->type == ZOO_DELETED_EVENT;

	switch (m->kind) {
	case ZK_SESSION:
		if (m->zh != zk->zh)
			return;		/* a handle we already closed */
		ev.type = EV_SESSION;
		ev.session = zk_session_of(m->state);
		ev.session_id = m->session_id;
		ev.timeout_ms = m->timeout_ms;
		if (ev.session != zk->agent->election.session ||
		    ev.session == SESSION_CONNECTED)
			zk_log_session(zk, ev.session, m);
		break;
	case ZK_PARENT:		ev.type = EV_PARENT_CREATED; break;
	case ZK_CREATE:		ev.type = EV_CREATED; break;
	case ZK_LIST:		ev.type = EV_CHILDREN; break;
	case ZK_PRED_SET:	ev.type = EV_PRED_SET; break;
	case ZK_PRED_WATCH:	ev.type = EV_PRED_CHANGED; break;
	case ZK_OWNER:		ev.type = EV_OWNER; break;
	case ZK_CLAIM:		ev.type = EV_CLAIMED; break;
	case ZK_RENEW:		ev.type = EV_RENEWED; break;
	case ZK_CLAIM_DATA:	ev.type = EV_CLAIM_DATA; break;
	case ZK_CLAIM_WATCH:	ev.type = EV_CLAIM_CHANGED; break;
	case ZK_LOWEST_DATA:	ev.type = EV_LOWEST_DATA; break;
	case ZK_LOWEST_WATCH:	ev.type = EV_LOWEST_CHANGED; break;
	case ZK_DELETE:		ev.type = EV_DELETED; break;
	case ZK_NOTIFIED:	ev.type = EV_NOTIFIED; break;
	case ZK_CHILD_WATCH:	ev.type = EV_CHILDREN_CHANGED; break;
	case ZK_SELF_SET:	ev.type = EV_SELF_SET; break;
	case ZK_SELF_WATCH:	ev.type = EV_SELF_CHANGED; break;
	}
	if (ev.rc != ZOK && ev.rc != ZNONODE && ev.rc != ZNODEEXISTS &&
	    ev.rc != ZCONNECTIONLOSS && ev.rc != ZCLOSING &&
	    ev.rc != ZSESSIONEXPIRED && ev.rc != ZOPERATIONTIMEOUT)
		log_warnx("zookeeper: %s%s%s: %s", zk_kind_names[m->kind],
		    m->name != NULL ? " " : "", m->name != NULL ? m->name : "",
		    zerror(ev.rc));
	else if (ev.rc != ZOK)
		log_debug("zookeeper: %s%s%s: %s", zk_kind_names[m->kind],
		    m->name != NULL ? " " : "", m->name != NULL ? m->name : "",
		    zerror(ev.rc));
	zk_feed(zk, &ev);
}

static void
zk_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;
	struct zk_msg *list, *m;

	pthread_mutex_lock(&zk->lock);
	list = zk->head;
	zk->head = NULL;
	zk->tail = &zk->head;
	pthread_mutex_unlock(&zk->lock);

	while ((m = list) != NULL) {
		list = m->next;
		zk_apply(zk, m);
		zk_msg_free(m);
	}
}

static void
zk_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct zk *zk = arg;
	struct election_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = EV_TICK;
	ev.now = clock_now_ms();
	zk_feed(zk, &ev);
}

static void
zk_schedule_tick(struct zk *zk)
{
	uint64_t at = election_next_tick(&zk->agent->election), now;
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

static void
zk_zoo_log_cb(const char *message)
{
	log_debug("libzookeeper: %s", message);
}

/* Opens a handle; on failure (say, a name that does not resolve yet) a
 * timer tries again. */
static void
zk_handle_open(struct zk *zk)
{
	struct config *conf = zk->agent->conf;
	struct timeval retry = { 1, 0 };

	zk->zh = zookeeper_init2(conf->zk_servers, zk_session_watcher,
	    (int)conf->zk_session_timeout_ms, NULL, zk, 0, zk_zoo_log_cb);
	if (zk->zh == NULL) {
		log_warn("zookeeper: cannot open a handle for %s; retrying",
		    conf->zk_servers);
		evtimer_add(zk->ev_reopen, &retry);
		return;
	}
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

static struct zk_req *
zk_req_new(struct zk *zk, enum zk_kind kind, const char *name)
{
	struct zk_req *req = calloc(1, sizeof(*req));

	if (req == NULL)
		abort();
	req->zk = zk;
	req->kind = kind;
	req->gen = zk->agent->election.gen;
	req->sent = clock_now_ms();
	if (name != NULL)
		snprintf(req->name, sizeof(req->name), "%s", name);
	return req;
}

static void
zk_node_path(struct zk *zk, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", zk->path, name);
}

/* A call the client refused outright (handle closing, bad state) is
 * reported to the election as that call's failure, from the loop. */
static void
zk_refused(struct zk *zk, struct zk_req *req, int rc)
{
	struct zk_msg *m = zk_msg_new(req->kind, req->gen, rc);

	m->name = strdup(req->name);
	zk_enqueue(zk, m);
	free(req);
}

/*
 * Reads a contender node and leaves a data watch on it (rule 5: getData,
 * not exists, so that no watch lingers on a node that is already gone).
 */
static int
zk_watch_node(struct zk *zk, const char *name, enum zk_kind read_kind,
    enum zk_kind watch_kind, struct zk_req **reqp)
{
	char path[1024];

	zk_node_path(zk, name, path, sizeof(path));
	*reqp = zk_req_new(zk, read_kind, name);
	return zoo_awget(zk->zh, path, zk_node_watcher,
	    ZK_WATCH_CTX(zk->agent->election.gen, watch_kind), zk_data_cb, *reqp);
}

static void
zk_perform(struct zk *zk, const struct election_action *a)
{
	struct agent *agent = zk->agent;
	struct election *e = &agent->election;
	char path[1024];
	struct zk_req *req = NULL;
	int rc = ZOK;

	if (a->type != ACT_NOTIFY && a->type != ACT_EXIT &&
	    a->type != ACT_NEW_SESSION && zk->zh == NULL)
		return;

	switch (a->type) {
	case ACT_CREATE_PARENT: {
		/* Every component, pipelined; the last one answers for all. */
		char *p;
		snprintf(path, sizeof(path), "%s", zk->path);
		for (p = strchr(path + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
			*p = '\0';
			(void)zoo_acreate(zk->zh, path, NULL, -1, zk->aclp, 0,
			    zk_string_cb, NULL);
			*p = '/';
		}
		log_info("election: creating the election path %s", path);
		req = zk_req_new(zk, ZK_PARENT, NULL);
		rc = zoo_acreate(zk->zh, path, NULL, -1, zk->aclp, 0,
		    zk_string_cb, req);
		break;
	}
	case ACT_CREATE:
		snprintf(path, sizeof(path), "%s%s-latch-", zk->prefix, e->uuid);
		req = zk_req_new(zk, ZK_CREATE, NULL);
		log_debug("election: creating %s", path);
		rc = zoo_acreate2(zk->zh, path, e->id, (int)strlen(e->id),
		    zk->aclp, ZOO_EPHEMERAL_SEQUENTIAL, zk_string_stat_cb, req);
		break;
	case ACT_LIST:
		req = zk_req_new(zk, ZK_LIST, NULL);
		rc = zoo_aget_children(zk->zh, zk->path, 0, zk_strings_cb, req);
		break;
	case ACT_WATCH_CHILDREN:
		req = zk_req_new(zk, ZK_LIST, NULL);
		rc = zoo_awget_children(zk->zh, zk->path, zk_node_watcher,
		    ZK_WATCH_CTX(e->gen, ZK_CHILD_WATCH), zk_strings_cb, req);
		break;
	case ACT_WATCH_PRED:
		rc = zk_watch_node(zk, a->name, ZK_PRED_SET, ZK_PRED_WATCH, &req);
		break;
	case ACT_GET_OWNER:
		zk_node_path(zk, a->name, path, sizeof(path));
		req = zk_req_new(zk, ZK_OWNER, a->name);
		rc = zoo_aexists(zk->zh, path, 0, zk_stat_cb, req);
		break;
	case ACT_CLAIM:
		/*
		 * One atomic multi: our node still exists, and the election
		 * node is written with our id. Its mzxid is the epoch: the
		 * quorum ordered it after our node's creation and after the
		 * previous claim, so epochs only grow.
		 */
		zk_node_path(zk, a->name, path, sizeof(path));
		req = zk_req_new(zk, ZK_CLAIM, a->name);
		/* The multi is serialised here; path need not outlive it. */
		zoo_check_op_init(&req->ops[0], path, -1);
		zoo_set_op_init(&req->ops[1], zk->path, e->id, (int)strlen(e->id),
		    -1, &req->set_stat);
		rc = zoo_amulti(zk->zh, 2, req->ops, req->results, zk_void_cb, req);
		break;
	case ACT_RENEW:
		/* sync goes through the ZooKeeper leader; the read after it
		 * proves our node (so our session) is alive there. */
		zk_node_path(zk, a->name, path, sizeof(path));
		req = zk_req_new(zk, ZK_RENEW, a->name);
		rc = zoo_async(zk->zh, zk->path, zk_string_cb, NULL);
		if (rc == ZOK)
			rc = zoo_aexists(zk->zh, path, 0, zk_stat_cb, req);
		break;
	case ACT_WATCH_CLAIM:
		req = zk_req_new(zk, ZK_CLAIM_DATA, NULL);
		rc = zoo_awget(zk->zh, zk->path, zk_node_watcher,
		    ZK_WATCH_CTX(e->gen, ZK_CLAIM_WATCH), zk_data_cb, req);
		break;
	case ACT_WATCH_LOWEST:
		rc = zk_watch_node(zk, a->name, ZK_LOWEST_DATA, ZK_LOWEST_WATCH, &req);
		break;
	case ACT_WATCH_SELF:
		rc = zk_watch_node(zk, a->name, ZK_SELF_SET, ZK_SELF_WATCH, &req);
		break;
	case ACT_DELETE:
		zk_node_path(zk, a->name, path, sizeof(path));
		req = zk_req_new(zk, ZK_DELETE, a->name);
		log_info("election: deleting %s", path);
		rc = zoo_adelete(zk->zh, path, -1, zk_void_cb, req);
		break;
	case ACT_NEW_SESSION:
		/* Rule 8; we are in the loop, not a ZooKeeper callback. */
		if (zk->zh != NULL)
			zookeeper_close(zk->zh);
		zk->zh = NULL;
		zk_handle_open(zk);
		return;
	case ACT_NOTIFY:
		/* When the app has been told (a->wait), EV_NOTIFIED follows
		 * from the queue, after the rest of this step's actions. */
		agent_notify(agent, a);
		return;
	case ACT_EXIT:
		event_base_loopexit(agent->base, NULL);
		return;
	}
	if (rc != ZOK && req != NULL)
		zk_refused(zk, req, rc);
}

/* The app has been told of a loss; the election may let the node go. */
void
zk_notified(struct zk *zk)
{
	zk_enqueue(zk, zk_msg_new(ZK_NOTIFIED, 0, ZOK));
}

void
zk_feed(struct zk *zk, struct election_event *ev)
{
	struct agent *agent = zk->agent;
	struct election *e = &agent->election;
	struct election_actions out;
	uint64_t before = e->index;
	int i;

	memset(&out, 0, sizeof(out));
	election_step(e, ev, &out);
	for (i = 0; i < out.n; i++) {
		log_debug("election: %s %s (phase %s, gen %" PRIu64 ")",
		    election_action_name(out.a[i].type), out.a[i].name,
		    election_phase_name(e->phase), e->gen);
		zk_perform(zk, &out.a[i]);
	}
	zk_schedule_tick(zk);
	if (e->index != before)
		agent_changed(agent);
}

struct zk *
zk_open(struct agent *agent)
{
	static char s_auth[] = "auth", s_empty[] = "", s_world[] = "world",
	    s_anyone[] = "anyone";
	struct config *conf = agent->conf;
	struct zk *zk;

	zk = calloc(1, sizeof(*zk));
	if (zk == NULL)
		return NULL;
	zk->agent = agent;
	zk->path = strdup(conf->election_path);
	if (asprintf(&zk->prefix, "%s/_c_", conf->election_path) == -1)
		abort();
	pthread_mutex_init(&zk->lock, NULL);
	zk->tail = &zk->head;
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
	if (zk->zh != NULL)
		zookeeper_close(zk->zh);
	while ((m = zk->head) != NULL) {
		zk->head = m->next;
		zk_msg_free(m);
	}
	event_free(zk->ev_wake);
	event_free(zk->ev_tick);
	event_free(zk->ev_reopen);
	pthread_mutex_destroy(&zk->lock);
	free(zk->path);
	free(zk->prefix);
	free(zk);
}
