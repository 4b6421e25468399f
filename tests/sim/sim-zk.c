/* SPDX-License-Identifier: MIT */
/*
 * A model of a ZooKeeper ensemble, faithful where the election depends on
 * it (apache/zookeeper, 3.8):
 * - server 0 leads; writes go to it, get a zxid from one counter and are
 *   applied on each server after a replication (and apply) delay, in order;
 *   a lagging follower answers reads from an older state; a sync makes a
 *   server catch up to what the leader had committed when it processed it;
 *   failed writes are error transactions with zxids of their own;
 * - only the leader expires sessions (SessionTrackerImpl, ExpiryQueue): a
 *   touch sets expiry = roundUp(leader's now + T) and the leader checks at
 *   tick boundaries; a follower records touches in a table and reports them
 *   when the leader pings it every tickTime/2 (LearnerSessionTracker,
 *   Learner.ping); forwarded requests do not touch at the leader; a
 *   reconnect revalidates at the leader (a direct touch, and the session's
 *   owner moves: a write from another server fails with ZSESSIONMOVED);
 *   expiry is a closeSession transaction that deletes the ephemerals;
 * - a server refuses a client that has seen a zxid it has not applied;
 * - watches are per connection and one-shot; SetWatches re-arms them after
 *   a reconnect, firing at once for what changed after the client's zxid;
 * - a follower that hears nothing from the leader for syncLimit ticks stops
 *   serving (closes its clients) until it has rejoined and resynced;
 * - with --shape deposed, the leader is cut off from the quorum (or fails):
 *   once a quorum of voters looks, one of them leads after an election and
 *   its session tracker starts afresh (every live session expires at
 *   roundUp(its start + the session's creation timeout)); the old one
 *   serves reads and syncs, never writes, until a tick after that;
 * - with --shape shrink a server may have a lower maxSessionTimeout, and a
 *   revalidation touches with the timeout negotiated on its connection;
 * - with --shape relay observers report touches through an ObserverMaster
 *   follower, a report later, lost if it is not serving; an observer's
 *   sync goes to its master, which forwards it to the leader, and comes
 *   back the same way (LearnerSyncRequest): the observer answers it once
 *   it has applied what the leader had committed when it sent it back.
 *   An observer gives up on its master (and closes its clients) when the
 *   master stops following, or after syncLimit ticks without its pings,
 *   and attaches to a following voter again (never to the leader, which
 *   runs no ObserverMaster). Its writes, sessions and commits still go
 *   straight to the leader and back;
 * - with --shape failover the leader's process exits (its sockets close:
 *   clients and followers see it at once) or its host stops (nobody hears
 *   anything); the new leader's tracker starts afresh as above, its ticks
 *   at another phase, and the old one rejoins as a follower.
 * The tree is the election node and its children: all the agents use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "sim.h"

#define W_DATA	0
#define W_CHILD	1
#define W_EXIST	2

static void	zk_pump(struct conn *);
static void	zk_apply_run(int);
static void	zk_apply_txn(int, struct txn *);
static void	zk_relay_cb(void *, uint64_t);
static void	zk_maybe_elect(void);
static void	zk_sync_queue(struct server *, int64_t, struct conn *,
		    uint64_t);
static int	zk_obs_master(int);
static void	zk_master_synced(int, const struct msg *);
static void	zk_go_looking(int);

/* The ZooKeeper leader, serving as one (not deposed, not in an election). */
static bool
zk_is_leader(int s)
{
	return s == S->leader && !S->leaderless;
}

int
zk_leader(void)
{
	return S->leader;
}

bool
zk_leaderless(void)
{
	return S->leaderless;
}

static bool
zk_serving(int s)
{
	return zk_is_leader(s) || S->servers[s].serving ||
	    S->servers[s].deposed;
}

/* The next tick boundary of the leader's clock after t (its ticks fall at
 * tick_phase + k tick; tick_phase < tick <= t). */
static stime
zk_round_up(stime t)
{
	return ((t - S->tick_phase) / S->tick + 1) * S->tick + S->tick_phase;
}

const struct ztree *
zk_truth(void)
{
	return &S->servers[S->leader].tree;
}

struct txn *
zk_txn(int64_t zxid)
{
	int64_t i = zxid - SIM_ZXID_BASE - 1;

	if (i < 0 || i >= S->nlog)
		return NULL;
	return &S->log[i];
}

/* --- The tree --- */

static int
tree_find(const struct ztree *t, const char *name)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->child[i].name, name) == 0)
			return i;
	return -1;
}

/* The contender that sorts first (by its sequence suffix), or -1. */
static int
tree_lowest(const struct ztree *t)
{
	int64_t seq, best = -1;
	int i, at = -1;

	for (i = 0; i < t->n; i++) {
		seq = election_node_seq(t->child[i].name);
		if (seq >= 0 && (best < 0 || seq < best)) {
			best = seq;
			at = i;
		}
	}
	return at;
}

static void
tree_stat(const struct ztree *t, const char *name, struct zstat *st)
{
	int i;

	memset(st, 0, sizeof(*st));
	if (name[0] == '\0') {
		st->czxid = t->czxid;
		st->mzxid = t->mzxid;
		st->pzxid = t->pzxid;
		return;
	}
	i = tree_find(t, name);
	st->czxid = t->child[i].czxid;
	st->mzxid = t->child[i].mzxid;
	st->pzxid = t->child[i].czxid;
	st->owner = t->child[i].owner;
}

static bool
tree_exists(const struct ztree *t, const char *name)
{
	return name[0] == '\0' ? t->exists : t->exists && tree_find(t, name) >= 0;
}

/* One operation of a transaction on tree t at zxid; op->name of a create
 * becomes the name made. Returns the ZooKeeper code. */
static int
tree_do(struct ztree *t, struct top *op, int64_t zxid, int64_t session)
{
	int i;

	switch (op->type) {
	case ZOP_CREATE_PARENT:
		if (t->exists)
			return ZNODEEXISTS;
		memset(t, 0, sizeof(*t));
		t->exists = true;
		t->datalen = -1;
		t->czxid = t->mzxid = t->pzxid = zxid;
		return ZOK;
	case ZOP_CREATE:
		if (!t->exists)
			return ZNONODE;
		if (op->owner == 0) {
			/* Prepared here: EPHEMERAL_SEQUENTIAL takes its suffix
			 * from the parent's cversion (PrepRequestProcessor). */
			size_t len = strlen(op->name);

			snprintf(op->name + len, sizeof(op->name) - len, "%010d",
			    t->cversion);
			op->owner = session;
		}
		if (tree_find(t, op->name) >= 0)
			return ZNODEEXISTS;
		if (t->n == SIM_CHILDREN_MAX) {
			sim_fail("more than %d children: a create loop?",
			    SIM_CHILDREN_MAX);
			return ZNONODE;
		}
		i = t->n++;
		memset(&t->child[i], 0, sizeof(t->child[i]));
		snprintf(t->child[i].name, sizeof(t->child[i].name), "%s",
		    op->name);
		memcpy(t->child[i].data, op->data, (size_t)op->datalen);
		t->child[i].datalen = op->datalen;
		t->child[i].czxid = t->child[i].mzxid = zxid;
		t->child[i].owner = op->owner;
		t->cversion++;
		t->pzxid = zxid;
		return ZOK;
	case ZOP_DELETE:
		if (!t->exists || (i = tree_find(t, op->name)) < 0)
			return ZNONODE;
		t->child[i] = t->child[--t->n];
		t->cversion++;
		t->pzxid = zxid;
		return ZOK;
	case ZOP_SET:
		if (!t->exists)
			return ZNONODE;
		memcpy(t->data, op->data, (size_t)op->datalen);
		t->datalen = op->datalen;
		t->mzxid = zxid;
		return ZOK;
	case ZOP_CHECK:
		return tree_exists(t, op->name) ? ZOK : ZNONODE;
	default:
		abort();
	}
}

/* --- Server-side watches --- */

static void
zk_watch_add(struct server *s, struct conn *c, const char *name, int kind)
{
	struct swatch *w;
	int i;

	for (i = 0; i < s->nwatches; i++)
		if (s->watches[i].conn == c && s->watches[i].kind == kind &&
		    strcmp(s->watches[i].name, name) == 0)
			return;
	if (s->nwatches == s->capwatches) {
		s->capwatches = s->capwatches == 0 ? 16 : s->capwatches * 2;
		s->watches = realloc(s->watches,
		    (size_t)s->capwatches * sizeof(*s->watches));
		if (s->watches == NULL)
			abort();
	}
	w = &s->watches[s->nwatches++];
	w->conn = c;
	w->kind = kind;
	snprintf(w->name, sizeof(w->name), "%s", name);
}

static void
zk_notify(struct conn *c, const char *name, int wtype)
{
	struct msg *m;

	if (c->server_closed)
		return;
	m = msg_new(M_WATCH);
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->wtype = wtype;
	chan_send(&c->s2c, m);
}

/* Fires (and removes) the watches on name whose kind is in mask. */
static void
zk_fire(struct server *s, const char *name, unsigned mask, int wtype)
{
	int i = 0;
	struct conn *c;

	while (i < s->nwatches) {
		if ((mask & (1u << s->watches[i].kind)) == 0 ||
		    strcmp(s->watches[i].name, name) != 0) {
			i++;
			continue;
		}
		c = s->watches[i].conn;
		s->watches[i] = s->watches[--s->nwatches];
		zk_notify(c, name, wtype);
	}
}

static void
zk_unwatch_conn(struct server *s, const struct conn *c)
{
	int i = 0;

	while (i < s->nwatches)
		if (s->watches[i].conn == c)
			s->watches[i] = s->watches[--s->nwatches];
		else
			i++;
}

/* --- Connections, server side --- */

struct conn *
conn_new(struct handle *h, int server)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		abort();
	c->id = ++S->next_conn;
	c->h = h;
	c->agent = h->agent;
	c->server = server;
	c->client_open = true;
	c->q_tail = &c->q_head;
	chan_init(&c->c2s, CH_C2S, c, server);
	chan_init(&c->s2c, CH_S2C, c, server);
	c->all_next = S->conns;
	S->conns = c;
	return c;
}

static void
zk_sreq_free_all(struct conn *c)
{
	struct sreq *r;
	int i;

	while ((r = c->q_head) != NULL) {
		c->q_head = r->next;
		for (i = 0; i < r->rep.nchildren; i++)
			free(r->rep.children[i]);
		free(r->rep.children);
		free(r);
	}
	c->q_tail = &c->q_head;
}

void
zk_server_close_conn(struct conn *c, bool eof)
{
	if (c->server_closed)
		return;
	c->server_closed = true;
	c->server_open = false;
	c->established = false;
	zk_unwatch_conn(&S->servers[c->server], c);
	zk_sreq_free_all(c);
	if (eof)
		chan_send(&c->s2c, msg_new(M_EOF));
}

static void
zk_connected(struct conn *c, int64_t session, bool valid, int timeout_ms)
{
	struct msg *m;

	if (c->server_closed)
		return;
	m = msg_new(M_CONNECTED);
	m->session = valid ? session : 0;
	m->timeout_ms = valid ? timeout_ms : 0;
	chan_send(&c->s2c, m);
	if (!valid) {
		zk_server_close_conn(c, true);
		return;
	}
	c->established = true;
	c->session = session;
	sim_trace("zk s%d: session 0x%llx of a%d connected (conn %llu)",
	    c->server, (unsigned long long)session, c->agent,
	    (unsigned long long)c->id);
}

/* --- The leader: sessions and transactions --- */

static struct zsession *
zk_session(int64_t id)
{
	int i;

	for (i = 0; i < S->nsessions; i++)
		if (S->sessions[i].id == id)
			return &S->sessions[i];
	return NULL;
}

static void
zk_touch_at_leader(int64_t id)
{
	struct zsession *z = zk_session(id);

	if (z != NULL && !z->closing)
		z->expiry = zk_round_up(S->now + (stime)z->timeout_ms * 1000);
}

/*
 * A reconnect: the ZooKeeper leader touches the session with the timeout
 * negotiated on the new connection (touchSession(id, to)), and later
 * touches use it too (--shape shrink makes it differ from the last).
 */
static bool
zk_revalidate(int64_t id, int origin, int timeout_ms)
{
	struct zsession *z = zk_session(id);

	if (z == NULL || z->closing)
		return false;
	if (z->timeout_ms != timeout_ms)
		sim_trace("zk: session 0x%llx of a%d now has timeout %d ms "
		    "(was %d)", (unsigned long long)id, z->agent, timeout_ms,
		    z->timeout_ms);
	z->timeout_ms = timeout_ms;
	zk_touch_at_leader(id);
	z->owner = origin;
	return true;
}

/*
 * The leader answers a sync once what was proposed before it is committed
 * (Leader.processSync, sendSync): on its own connection, or with a SYNC to
 * the follower that forwarded it, behind the commits sent before. A sync
 * that an ObserverMaster forwarded for an observer carries that observer,
 * and the commit point its answer must wait for there.
 */
static void
zk_sync_answer(const struct syncw *w)
{
	struct sreq *r;
	struct msg *m;

	if (w->server == S->leader) {
		for (r = w->conn->q_head; r != NULL; r = r->next)
			if (r->id == w->req_id)
				r->done = true;
		zk_pump(w->conn);
		return;
	}
	if (!S->servers[w->server].in_quorum)
		return;
	m = msg_new(M_SYNCED);
	m->incarnation = S->servers[w->server].incarnation;
	m->conn = w->conn;
	m->req_id = w->req_id;
	m->zxid = S->committed;
	m->via_master = w->via_master;
	m->observer = w->observer;
	m->obs_incarnation = w->obs_incarnation;
	chan_send(&S->servers[w->server].l2f, m);
}

static void
zk_leader_commit_cb(void *p, uint64_t zxid)
{
	struct txn *t = zk_txn((int64_t)zxid);
	struct syncw *w;
	struct msg *m;
	int f, L = S->leader;

	/* No leader: a new one commits what the quorum logged (zk_elected). */
	if (S->leaderless || t->zxid <= S->committed)
		return;
	/* The leader applies at commit, then tells the followers. */
	S->committed = t->zxid;
	zk_apply_txn(L, t);
	for (f = 0; f < S->nservers; f++) {
		if (f == L || !S->servers[f].in_quorum)
			continue;
		m = msg_new(M_COMMIT);
		m->incarnation = S->servers[f].incarnation;
		m->zxid = t->zxid;
		chan_send(&S->servers[f].l2f, m);
	}
	while ((w = t->syncs) != NULL) {
		t->syncs = w->next;
		zk_sync_answer(w);
		free(w);
	}
}

static struct txn *
zk_txn_new(enum txn_type type, int origin, struct conn *c, uint64_t req_id,
    int64_t session)
{
	struct txn *t;
	stime at;

	if (S->nlog == S->caplog) {
		S->caplog = S->caplog == 0 ? 256 : S->caplog * 2;
		S->log = realloc(S->log, (size_t)S->caplog * sizeof(*S->log));
		if (S->log == NULL)
			abort();
	}
	t = &S->log[S->nlog];
	memset(t, 0, sizeof(*t));
	t->zxid = zxid_of(S->nlog);
	S->nlog++;
	t->type = type;
	t->origin = origin;
	t->conn = c;
	t->req_id = req_id;
	t->session = session;
	t->writer = c != NULL ? c->agent : -1;
	t->prepped_at = S->now;
	t->rep.zxid = t->zxid;
	/* Committed once a quorum acknowledged the proposal, in order. */
	at = S->now + sim_range(100, 1500);
	if (at < S->last_commit_at)
		at = S->last_commit_at;
	S->last_commit_at = at;
	t->commit_at = at;
	S->st.txns++;
	sim_at(at, zk_leader_commit_cb, NULL, (uint64_t)t->zxid);
	return t;
}

static void
zk_new_session(int origin, struct conn *c, int timeout_ms)
{
	struct zsession *z;
	struct txn *t;

	if (S->nsessions == S->capsessions) {
		S->capsessions = S->capsessions == 0 ? 16 : S->capsessions * 2;
		S->sessions = realloc(S->sessions,
		    (size_t)S->capsessions * sizeof(*S->sessions));
		if (S->sessions == NULL)
			abort();
	}
	z = &S->sessions[S->nsessions++];
	memset(z, 0, sizeof(*z));
	z->id = S->next_session++;
	z->timeout_ms = z->create_timeout_ms = timeout_ms;
	z->expiry = zk_round_up(S->now + (stime)timeout_ms * 1000);
	z->owner = origin;
	z->agent = c->agent;
	t = zk_txn_new(TXN_NEWSESSION, origin, c, 0, z->id);
	t->rep.st.owner = z->id;
	t->rep.datalen = timeout_ms;
	sim_trace("zk: new session 0x%llx for a%d via s%d (zxid 0x%llx)",
	    (unsigned long long)z->id, c->agent, origin,
	    (unsigned long long)t->zxid);
}

/* closeSession: by the client, or expiry (c == NULL). */
static void
zk_close_session(struct zsession *z, int origin, struct conn *c,
    uint64_t req_id)
{
	struct txn *t;
	int i, j;

	z->closing = true;
	t = zk_txn_new(TXN_CLOSESESSION, origin, c, req_id, z->id);
	t->writer = z->agent;
	t->ops = calloc((size_t)S->prep.n + 1, sizeof(*t->ops));
	if (t->ops == NULL)
		abort();
	for (i = 0; i < S->prep.n; i++)
		if (S->prep.child[i].owner == z->id) {
			t->ops[t->nops].type = ZOP_DELETE;
			snprintf(t->ops[t->nops].name, sizeof(t->ops[0].name),
			    "%s", S->prep.child[i].name);
			t->nops++;
		}
	for (j = 0; j < t->nops; j++)
		(void)tree_do(&S->prep, &t->ops[j], t->zxid, 0);
	sim_trace("zk: %s session 0x%llx of a%d (zxid 0x%llx, %d node%s)",
	    c == NULL ? "EXPIRED" : "closed", (unsigned long long)z->id,
	    z->agent, (unsigned long long)t->zxid, t->nops,
	    t->nops == 1 ? "" : "s");
}

/* The session is alive at the leader and owns a contender node. */
bool
zk_session_holds_node(int64_t session)
{
	struct zsession *z = zk_session(session);
	int i;

	if (z == NULL || z->closing)
		return false;
	for (i = 0; i < S->prep.n; i++)
		if (S->prep.child[i].owner == session)
			return true;
	return false;
}

static void
zk_expiry_cb(void *p, uint64_t gen)
{
	struct agent *ag;
	int i;

	if (gen != S->expiry_gen)
		return;		/* a failed leader's ticks */
	for (i = 0; i < S->nsessions && !S->leaderless; i++)
		if (!S->sessions[i].closing && S->sessions[i].expiry <= S->now) {
			ag = &S->agents[S->sessions[i].agent];
			if (ag->h != NULL && ag->h->session_id == S->sessions[i].id)
				ag->expired_at = S->now;
			zk_close_session(&S->sessions[i], -1, NULL, 0);
		}
	sim_at(S->now + S->tick, zk_expiry_cb, NULL, gen);
}

static const char *
zop_name(enum zop t)
{
	static const char *const names[] = {
		"ping", "setwatches", "sync", "exists", "get", "children",
		"create-parent", "create", "delete", "set", "check", "multi",
		"close",
	};
	return names[t];
}

/* PrepRequestProcessor: checks the session, runs the ops on the leader's
 * outstanding view, and makes a transaction (an error one if they fail). */
static void
zk_prep(int origin, struct conn *c, uint64_t req_id, int64_t session,
    const struct zreq *r)
{
	struct zsession *z = zk_session(session);
	struct ztree *scratch;
	struct txn *t;
	int i, rc = ZOK, failed = -1, lowest;

	if (r->type == ZOP_CLOSE) {
		if (z != NULL && !z->closing)
			zk_close_session(z, origin, c, req_id);
		else
			(void)zk_txn_new(TXN_OP, origin, c, req_id, session);
		return;
	}
	t = zk_txn_new(TXN_OP, origin, c, req_id, session);
	t->nops = r->type == ZOP_MULTI ? r->nops : 1;
	t->ops = calloc((size_t)t->nops, sizeof(*t->ops));
	if (t->ops == NULL)
		abort();
	for (i = 0; i < t->nops; i++) {
		t->ops[i].type = r->op[i].type;
		snprintf(t->ops[i].name, sizeof(t->ops[i].name), "%s",
		    r->op[i].name);
		memcpy(t->ops[i].data, r->op[i].data, (size_t)r->op[i].datalen);
		t->ops[i].datalen = r->op[i].datalen;
	}
	if (z != NULL && !z->closing && z->owner == -1)
		z->owner = origin;	/* checkSession: the first claims it */
	if (z == NULL || z->closing)
		rc = ZSESSIONEXPIRED;
	else if (z->owner != origin)
		rc = ZSESSIONMOVED;
	if (rc != ZOK) {
		t->rc = t->rep.rc = rc;
		sim_trace("zk: %s by a%d fails: %s (zxid 0x%llx)",
		    zop_name(r->type), c->agent, zerror(rc),
		    (unsigned long long)t->zxid);
		return;
	}
	scratch = malloc(sizeof(*scratch));
	if (scratch == NULL)
		abort();
	*scratch = S->prep;
	for (i = 0; i < t->nops; i++) {
		if (failed >= 0) {
			t->ops[i].rc = ZRUNTIMEINCONSISTENCY;
			continue;
		}
		if (t->ops[i].type == ZOP_CREATE)
			check_create(t, session);
		t->ops[i].rc = tree_do(scratch, &t->ops[i], t->zxid, session);
		if (t->ops[i].rc != ZOK) {
			failed = i;
			rc = t->ops[i].rc;
			/* Ops before the failed one read ZOK (DataTree). */
		}
	}
	t->rc = t->rep.rc = rc;
	if (rc == ZOK) {
		/* Who does this write name as leader, and is that one the
		 * lowest (rule 3)? A claim: check own node, set. A release
		 * that names: check successor, delete own, set. */
		if (r->type == ZOP_MULTI && t->nops == 2 &&
		    t->ops[0].type == ZOP_CHECK && t->ops[1].type == ZOP_SET) {
			t->is_claim = true;
			snprintf(t->named_node, sizeof(t->named_node), "%s",
			    t->ops[0].name);
		} else if (r->type == ZOP_MULTI && t->nops == 3 &&
		    t->ops[0].type == ZOP_CHECK && t->ops[2].type == ZOP_SET) {
			t->is_release = true;
			snprintf(t->named_node, sizeof(t->named_node), "%s",
			    t->ops[0].name);
		}
		if (t->is_claim || t->is_release) {
			lowest = tree_lowest(scratch);
			t->lowest = lowest >= 0 && strcmp(
			    scratch->child[lowest].name, t->named_node) == 0;
		}
		S->prep = *scratch;
	}
	free(scratch);
	/* The reply, made now, sent when the origin server applies it. */
	for (i = 0; i < t->nops && r->type == ZOP_MULTI; i++) {
		t->rep.results[i] = t->ops[i].rc;
		if (t->ops[i].type == ZOP_SET && t->ops[i].rc == ZOK)
			t->rep.set_mzxid = t->zxid;
	}
	if (r->type == ZOP_CREATE && rc == ZOK) {
		snprintf(t->rep.path, sizeof(t->rep.path), "/e/%s",
		    t->ops[0].name);
		t->rep.st.czxid = t->rep.st.mzxid = t->rep.st.pzxid = t->zxid;
		t->rep.st.owner = session;
	}
	if (S->verbose) {
		char what[400];
		int off = 0;

		for (i = 0; i < t->nops; i++)
			off += snprintf(what + off, sizeof(what) - (size_t)off,
			    "%s%s %s%s%.*s", i ? ", " : "",
			    zop_name(t->ops[i].type), t->ops[i].name[0] ?
			    t->ops[i].name : "/e", t->ops[i].type == ZOP_SET ?
			    " = " : "", t->ops[i].type == ZOP_SET ?
			    t->ops[i].datalen : 0, t->ops[i].data);
		sim_trace("zk: zxid 0x%llx by a%d via s%d: %s -> %s%s",
		    (unsigned long long)t->zxid, c->agent, origin, what,
		    zerror(rc), t->is_claim ? " (claim)" : t->is_release ?
		    " (release naming)" : "");
	}
}

/* A sync at the leader, from its own client or forwarded by a follower
 * (fwd: the M_FORWARD, which says whether it came from an observer). */
static void
zk_sync_done(int origin, struct conn *c, uint64_t req_id,
    const struct msg *fwd)
{
	struct txn *last = S->nlog > 0 ? &S->log[S->nlog - 1] : NULL;
	struct syncw *w, now;

	memset(&now, 0, sizeof(now));
	now.server = origin;
	now.conn = c;
	now.req_id = req_id;
	if (fwd != NULL && fwd->via_master) {
		now.via_master = true;
		now.observer = fwd->observer;
		now.obs_incarnation = fwd->obs_incarnation;
	}
	/* Answered once everything proposed before it is committed. */
	if (last != NULL && last->zxid > S->committed) {
		w = malloc(sizeof(*w));
		if (w == NULL)
			abort();
		*w = now;
		w->next = last->syncs;
		last->syncs = w;
		return;
	}
	zk_sync_answer(&now);
}

/* --- Applying committed transactions on a server --- */

static void
zk_complete(struct conn *c, uint64_t req_id, const struct zreply *rep)
{
	struct sreq *r;

	if (c == NULL || c->server_closed)
		return;
	for (r = c->q_head; r != NULL; r = r->next)
		if (r->id == req_id) {
			r->rep = *rep;
			r->rep.nchildren = 0;
			r->rep.children = NULL;
			r->done = true;
		}
	zk_pump(c);
}

static void
zk_apply_txn(int s, struct txn *t)
{
	struct server *sv = &S->servers[s];
	struct top op;
	struct conn *c;
	int i;

	for (i = 0; i < t->nops && (t->rc == ZOK ||
	    t->type == TXN_CLOSESESSION); i++) {
		op = t->ops[i];
		if (tree_do(&sv->tree, &op, t->zxid, t->session) != ZOK)
			continue;
		switch (op.type) {
		case ZOP_CREATE_PARENT:
			zk_fire(sv, "", 1u << W_EXIST, WT_CREATED);
			break;
		case ZOP_CREATE:
			zk_fire(sv, op.name, 1u << W_EXIST, WT_CREATED);
			zk_fire(sv, "", 1u << W_CHILD, WT_CHILD);
			break;
		case ZOP_DELETE:
			zk_fire(sv, op.name, (1u << W_DATA) | (1u << W_CHILD) |
			    (1u << W_EXIST), WT_DELETED);
			zk_fire(sv, "", 1u << W_CHILD, WT_CHILD);
			break;
		case ZOP_SET:
			zk_fire(sv, "", (1u << W_DATA) | (1u << W_EXIST),
			    WT_CHANGED);
			break;
		default:
			break;
		}
	}
	sv->applied = t->zxid;
	if (t->type == TXN_CLOSESESSION) {
		/* The server drops every connection of the closed session. */
		for (c = S->conns; c != NULL; c = c->all_next)
			if (c->server == s && !c->server_closed &&
			    c->session == t->session)
				zk_server_close_conn(c, true);
	}
	if (t->origin != s || t->conn == NULL)
		return;
	if (t->type == TXN_NEWSESSION)
		zk_connected(t->conn, t->session, true, t->rep.datalen);
	else
		zk_complete(t->conn, t->req_id, &t->rep);
}

static void
zk_apply_cb(void *p, uint64_t s)
{
	zk_apply_run((int)s);
}

static void
zk_apply_run(int s)
{
	struct server *sv = &S->servers[s];
	struct apply_item *it;
	struct sreq *r;

	if (sv->stopped)
		return;
	while ((it = sv->aq_head) != NULL && it->ready_at <= S->now) {
		sv->aq_head = it->next;
		if (sv->aq_head == NULL)
			sv->aq_tail = &sv->aq_head;
		if (it->zxid != 0)
			zk_apply_txn(s, zk_txn(it->zxid));
		else if (!it->conn->server_closed) {
			for (r = it->conn->q_head; r != NULL; r = r->next)
				if (r->id == it->req_id)
					r->done = true;
			zk_pump(it->conn);
		}
		free(it);
	}
}

static void
zk_apply_queue(struct server *sv, int64_t zxid, struct conn *c,
    uint64_t req_id)
{
	struct apply_item *it = calloc(1, sizeof(*it));
	stime at = S->now;

	if (it == NULL)
		abort();
	it->zxid = zxid;
	it->conn = c;
	it->req_id = req_id;
	if (zxid != 0)
		at += sim_range(20, 300) + sv->lag;
	if (at < sv->aq_last)
		at = sv->aq_last;
	sv->aq_last = at;
	it->ready_at = at;
	*sv->aq_tail = it;
	sv->aq_tail = &it->next;
	sim_at(at, zk_apply_cb, NULL, (uint64_t)sv->idx);
	if (zxid == 0)
		return;
	/* Syncs that came back through the master before this commit came
	 * from the leader follow it now. */
	sv->aq_zxid = zxid;
	while ((it = sv->sync_wait) != NULL && it->point <= zxid) {
		sv->sync_wait = it->next;
		zk_apply_queue(sv, 0, it->conn, it->req_id);
		free(it);
	}
}

/*
 * An observer's sync, back from its ObserverMaster with the leader's
 * commit point: answered in order behind the commits up to that point
 * (Observer.processPacket, case SYNC: CommitProcessor). A real observer
 * gets those commits through the master, ahead of the SYNC; here they
 * come straight from the leader, and may not be there yet: the sync
 * waits for them.
 */
static void
zk_sync_queue(struct server *sv, int64_t point, struct conn *c,
    uint64_t req_id)
{
	struct apply_item *it, **tail;

	if (sv->applied >= point || sv->aq_zxid >= point) {
		zk_apply_queue(sv, 0, c, req_id);
		return;
	}
	it = calloc(1, sizeof(*it));
	if (it == NULL)
		abort();
	it->point = point;
	it->conn = c;
	it->req_id = req_id;
	for (tail = &sv->sync_wait; *tail != NULL; tail = &(*tail)->next)
		;
	*tail = it;
}

static void
zk_apply_clear(struct server *sv)
{
	struct apply_item *it;

	while ((it = sv->aq_head) != NULL) {
		sv->aq_head = it->next;
		free(it);
	}
	while ((it = sv->sync_wait) != NULL) {
		sv->sync_wait = it->next;
		free(it);
	}
	sv->aq_tail = &sv->aq_head;
	sv->aq_last = 0;
	sv->aq_zxid = 0;
}

/* --- Requests from clients --- */

static bool
zk_is_write(enum zop t)
{
	return t >= ZOP_CREATE_PARENT;
}

static void
zk_read(struct server *sv, struct conn *c, struct sreq *r, struct zreply *rep)
{
	const struct ztree *t = &sv->tree;
	const char *name = r->req.op[0].name;
	int i;

	rep->rc = ZOK;
	switch (r->req.type) {
	case ZOP_PING:
	case ZOP_SYNC:
		break;
	case ZOP_EXISTS:
		if (!tree_exists(t, name))
			rep->rc = ZNONODE;
		else
			tree_stat(t, name, &rep->st);
		break;
	case ZOP_GET:
		if (!tree_exists(t, name)) {
			rep->rc = ZNONODE;	/* and no watch */
			break;
		}
		tree_stat(t, name, &rep->st);
		if (name[0] == '\0') {
			rep->datalen = t->datalen;
			if (t->datalen > 0)
				memcpy(rep->data, t->data, (size_t)t->datalen);
		} else {
			i = tree_find(t, name);
			rep->datalen = t->child[i].datalen;
			memcpy(rep->data, t->child[i].data,
			    (size_t)t->child[i].datalen);
		}
		if (r->req.watch)
			zk_watch_add(sv, c, name, W_DATA);
		break;
	case ZOP_CHILDREN:
		if (!t->exists) {
			rep->rc = ZNONODE;
			break;
		}
		rep->nchildren = t->n;
		rep->children = calloc((size_t)t->n + 1, sizeof(char *));
		if (rep->children == NULL)
			abort();
		for (i = 0; i < t->n; i++)
			if ((rep->children[i] = strdup(t->child[i].name)) == NULL)
				abort();
		if (r->req.watch)
			zk_watch_add(sv, c, "", W_CHILD);
		break;
	case ZOP_SETWATCHES:
		/* Re-arm, or fire at once for what changed after the zxid the
		 * client had seen (DataTree.setWatches). */
		for (i = 0; i < r->req.nwdata; i++) {
			name = r->req.wdata[i];
			if (!tree_exists(t, name))
				zk_notify(c, name, WT_DELETED);
			else {
				struct zstat st;

				tree_stat(t, name, &st);
				if (st.mzxid > r->req.rel_zxid)
					zk_notify(c, name, WT_CHANGED);
				else
					zk_watch_add(sv, c, name, W_DATA);
			}
		}
		for (i = 0; i < r->req.nwchild; i++) {
			name = r->req.wchild[i];
			if (!tree_exists(t, name))
				zk_notify(c, name, WT_DELETED);
			else if (t->pzxid > r->req.rel_zxid)
				zk_notify(c, name, WT_CHILD);
			else
				zk_watch_add(sv, c, name, W_CHILD);
		}
		break;
	default:
		abort();
	}
}

/* Replies go out in the order the requests came (CommitProcessor keeps a
 * session's requests in order): a read waits for the writes before it. */
static void
zk_pump(struct conn *c)
{
	struct server *sv = &S->servers[c->server];
	struct sreq *r;
	struct msg *m;
	struct zreply rep;

	while (!c->server_closed && (r = c->q_head) != NULL) {
		memset(&rep, 0, sizeof(rep));
		if (r->req.type == ZOP_SYNC || zk_is_write(r->req.type)) {
			if (!r->done)
				return;
			rep = r->rep;
			r->rep.children = NULL;
		} else
			zk_read(sv, c, r, &rep);
		c->q_head = r->next;
		if (c->q_head == NULL)
			c->q_tail = &c->q_head;
		if (rep.rc == ZSESSIONMOVED) {
			/* FinalRequestProcessor: a connection-level error, the
			 * server closes the connection (ZOOKEEPER-710). */
			sim_trace("zk s%d: session of a%d moved; closes the "
			    "connection", c->server, c->agent);
			free(r);
			zk_server_close_conn(c, true);
			return;
		}
		rep.xid = r->req.xid;
		rep.zxid = sv->applied;
		if (fault_lose_reply(c, &r->req)) {
			int i;

			sim_trace("zk s%d: the reply to a%d's %s is LOST; the "
			    "connection breaks", c->server, c->agent,
			    zop_name(r->req.type));
			for (i = 0; i < rep.nchildren; i++)
				free(rep.children[i]);
			free(rep.children);
			free(r);
			zk_server_close_conn(c, true);
			return;
		}
		m = msg_new(M_REPLY);
		m->rep = rep;
		chan_send(&c->s2c, m);
		if (fault_stop_after_reply(c, &r->req)) {
			free(r);
			return;
		}
		free(r);
	}
}

static void
zk_touch(int s, int64_t session)
{
	struct server *sv = &S->servers[s];
	int i;

	if (session == 0 || sv->deposed)
		return;		/* a deposed leader's touches are lost */
	if (zk_is_leader(s)) {
		zk_touch_at_leader(session);
		return;
	}
	for (i = 0; i < sv->ntouched; i++)
		if (sv->touched[i] == session)
			return;
	if (sv->ntouched < (int)(sizeof(sv->touched) / sizeof(sv->touched[0])))
		sv->touched[sv->ntouched++] = session;
}

static void
zk_connect(struct server *sv, struct conn *c, const struct msg *m)
{
	struct conn *o;
	struct msg *f;
	int timeout = m->timeout_ms, s = sv->idx;

	if (!zk_serving(s) || m->zxid > sv->applied) {
		/* Not serving, or behind what the client has seen: "client
		 * must try another server". */
		if (zk_serving(s))
			sim_trace("zk s%d: refuses a%d, who has seen zxid 0x%llx"
			    " (applied 0x%llx)", s, c->agent,
			    (unsigned long long)m->zxid,
			    (unsigned long long)sv->applied);
		zk_server_close_conn(c, true);
		return;
	}
	c->server_open = true;
	/* minSessionTimeout 2 ticks, maxSessionTimeout 20 ticks or this
	 * server's own (--shape shrink), as ZooKeeperServer negotiates. */
	if (timeout < 2 * S->tick_ms)
		timeout = 2 * S->tick_ms;
	if (timeout > sv->max_timeout_ms)
		timeout = sv->max_timeout_ms;
	if (m->session == 0) {
		if (zk_is_leader(s))
			zk_new_session(s, c, timeout);
		else if (sv->deposed)
			return;		/* createSession never commits */
		else {
			f = msg_new(M_NEWSESSION);
			f->incarnation = sv->incarnation;
			f->conn = c;
			f->timeout_ms = timeout;
			chan_send(&sv->f2l, f);
		}
		return;
	}
	/* A reconnect closes this server's older connections of the session. */
	for (o = S->conns; o != NULL; o = o->all_next)
		if (o != c && o->server == s && !o->server_closed &&
		    o->session == m->session)
			zk_server_close_conn(o, true);
	c->session = m->session;
	if (zk_is_leader(s)) {
		zk_connected(c, m->session, zk_revalidate(m->session, s,
		    timeout), timeout);
		return;
	}
	if (sv->deposed) {
		/* It still thinks it leads: revalidates in its own tracker,
		 * which nobody will read again. A session its successor
		 * made is not in it: expired, the client is told
		 * (ZooKeeperServer.revalidateSession). */
		struct zsession *z = zk_session(m->session);

		zk_connected(c, m->session, z != NULL && !z->closing &&
		    z - S->sessions < S->dep_nsessions, timeout);
		return;
	}
	f = msg_new(M_REVALIDATE);
	f->incarnation = sv->incarnation;
	f->conn = c;
	f->session = m->session;
	f->timeout_ms = timeout;
	chan_send(&sv->f2l, f);
}

void
zk_server_recv(struct conn *c, struct msg *m)
{
	struct server *sv = &S->servers[c->server];
	struct sreq *r;
	struct msg *f;

	if (c->server_closed) {
		msg_free(m);
		return;
	}
	switch (m->type) {
	case M_CONNECT:
		if (c->syn_lost && !c->client_open)
			c->server_closed = true;
		else
			zk_connect(sv, c, m);
		break;
	case M_REQUEST:
		if (!c->established)
			break;
		zk_touch(sv->idx, c->session);
		r = calloc(1, sizeof(*r));
		if (r == NULL)
			abort();
		r->id = ++c->next_req;
		r->req = m->req;
		*c->q_tail = r;
		c->q_tail = &r->next;
		if (zk_is_write(m->req.type) || m->req.type == ZOP_SYNC) {
			if (zk_is_leader(sv->idx)) {
				if (m->req.type == ZOP_SYNC)
					zk_sync_done(sv->idx, c, r->id, NULL);
				else
					zk_prep(sv->idx, c, r->id, c->session,
					    &m->req);
			} else if (sv->deposed) {
				/* Leader.processSync answers at once when no
				 * proposal is outstanding; a proposal now never
				 * commits, nor does anything behind it. */
				if (m->req.type == ZOP_SYNC && !sv->dep_hang)
					r->done = true;
				else if (m->req.type != ZOP_SYNC) {
					sv->dep_hang = true;
					sim_trace("zk s%d (deposed): a%d's %s "
					    "will never commit", sv->idx,
					    c->agent, zop_name(m->req.type));
				}
			} else {
				f = msg_new(M_FORWARD);
				f->incarnation = sv->incarnation;
				f->conn = c;
				f->req_id = r->id;
				f->session = c->session;
				f->req = m->req;
				if (m->req.type == ZOP_SYNC &&
				    zk_obs_master(sv->idx) >= 0) {
					/* ObserverRequestProcessor: to
					 * its learner master, the
					 * ObserverMaster. */
					f->via_master = true;
					f->observer = sv->idx;
					f->obs_incarnation = sv->incarnation;
					S->st.obs_syncs++;
					sim_trace("zk s%d: a%d's sync goes to "
					    "ObserverMaster s%d", sv->idx,
					    c->agent, sv->master);
					chan_send(&sv->o2m, f);
				} else
					chan_send(&sv->f2l, f);
			}
		}
		zk_pump(c);
		break;
	case M_FIN:
		zk_server_close_conn(c, false);
		break;
	default:
		abort();
	}
	msg_free(m);
}

/* --- An observer and its ObserverMaster (--shape relay) --- */

/* The ObserverMaster observer s is attached to, or -1: it is no observer,
 * or its master leads now (its learner master is then the leader). */
static int
zk_obs_master(int s)
{
	const struct server *sv = &S->servers[s];

	return sv->observer && sv->master != S->leader ? sv->master : -1;
}

/* A follower an observer can attach to: it runs an ObserverMaster (only a
 * follower does, Follower.followLeader), following now. */
static bool
zk_master_usable(int m)
{
	const struct server *mv = &S->servers[m];

	return !mv->observer && m != S->leader && !mv->stopped &&
	    mv->serving && !mv->part_leader && !mv->deposed;
}

/*
 * A sync from observer o reaches its ObserverMaster (LearnerHandler, case
 * REQUEST: a LearnerSyncRequest), which forwards it to the leader as its
 * own requests (FollowerRequestProcessor). Lost if the link is gone: the
 * observer or the master looked for a new leader since it was sent.
 */
void
zk_master_recv(int o, struct msg *m)
{
	struct server *ov = &S->servers[o];
	int mi = ov->master;
	struct server *mv = &S->servers[mi];

	if (m->obs_incarnation != ov->incarnation || !ov->serving ||
	    ov->master_inc != mv->incarnation || !mv->serving ||
	    zk_is_leader(mi)) {
		sim_trace("zk s%d: a%d's sync through ObserverMaster s%d is "
		    "LOST", o, m->conn->agent, mi);
		msg_free(m);
		return;
	}
	m->incarnation = mv->incarnation;
	chan_send(&mv->f2l, m);
}

/* The leader's SYNC for an observer's sync reaches the ObserverMaster,
 * which passes it on at once (FollowerZooKeeperServer.sync), behind the
 * commits it passed on before (ObserverMaster.proposalCommitted). */
static void
zk_master_synced(int mi, const struct msg *m)
{
	struct server *ov = &S->servers[m->observer];
	struct msg *f;

	if (m->obs_incarnation != ov->incarnation || !ov->serving ||
	    ov->master != mi || ov->master_inc != S->servers[mi].incarnation) {
		sim_trace("zk s%d: a%d's sync back to observer s%d is LOST", mi,
		    m->conn->agent, m->observer);
		return;
	}
	f = msg_new(M_SYNCED);
	f->incarnation = m->obs_incarnation;
	f->conn = m->conn;
	f->req_id = m->req_id;
	f->zxid = m->zxid;
	chan_send(&ov->m2o, f);
}

/* The SYNC back at the observer (Observer.processPacket, case SYNC). */
void
zk_observer_recv(int o, struct msg *m)
{
	struct server *ov = &S->servers[o];

	if (m->incarnation != ov->incarnation || !ov->serving) {
		msg_free(m);
		return;
	}
	ov->master_heard = S->now;
	S->st.obs_syncs_back++;
	zk_sync_queue(ov, m->zxid, m->conn, m->req_id);
	msg_free(m);
}

/*
 * An observer attached to an ObserverMaster hears from it (its pings every
 * tick/2, ObserverMaster's pinger), not from the leader: it stops serving
 * when the link closes (the master stopped following: ObserverMaster.stop
 * shuts its LearnerHandlers) or after syncLimit ticks without a ping (the
 * Learner's socket timeout). Called every tick/2, and when it resumes.
 */
static void
zk_observer_check(int o)
{
	struct server *ov = &S->servers[o], *mv;
	int mi = zk_obs_master(o);
	bool linked;

	if (mi < 0 || !ov->serving)
		return;
	mv = &S->servers[mi];
	linked = ov->master_inc == mv->incarnation && mv->serving;
	if (linked && !mv->stopped)
		ov->master_heard = S->now;
	if (ov->stopped || (linked && S->now - ov->master_heard <=
	    (stime)S->sync_limit * S->tick))
		return;
	S->st.obs_master_lost++;
	if (!linked)
		sim_trace("zk s%d: its ObserverMaster s%d closed the link", o,
		    mi);
	else
		sim_trace("zk s%d: nothing from its ObserverMaster s%d for "
		    "syncLimit ticks", o, mi);
	zk_go_looking(o);
}

/* What was held for a stopped master (its observers' syncs) arrives. */
static void
zk_master_release(int mi)
{
	int o;

	for (o = 0; o < S->nservers; o++)
		if (S->servers[o].observer && S->servers[o].master == mi)
			chan_release(&S->servers[o].o2m, true);
}

/* --- Between the leader and its followers --- */

void
zk_follower_recv(int s, struct msg *m)
{
	struct server *sv = &S->servers[s];
	struct msg *ack;

	if (m->incarnation != sv->incarnation || !sv->serving) {
		msg_free(m);
		return;
	}
	sv->heard = S->now;
	switch (m->type) {
	case M_PING:
		/* Learner.ping: answer with the sessions touched since the
		 * last answer. */
		ack = msg_new(M_PING_ACK);
		ack->incarnation = sv->incarnation;
		if (sv->observer && sv->ntouched > 0) {
			/* An observer reports to its ObserverMaster, which
			 * reports in its own next answer to the leader. */
			struct msg *rl = msg_new(M_PING_ACK);
			int mi = sv->master;

			rl->wtype = mi;
			rl->incarnation = S->servers[mi].incarnation;
			rl->nsessions = sv->ntouched;
			rl->sessions = malloc((size_t)sv->ntouched *
			    sizeof(int64_t));
			if (rl->sessions == NULL)
				abort();
			memcpy(rl->sessions, sv->touched, (size_t)sv->ntouched *
			    sizeof(int64_t));
			sv->ntouched = 0;
			sim_at_msg(S->now + net_delay(), zk_relay_cb, rl);
		}
		ack->nsessions = sv->ntouched;
		if (sv->ntouched > 0) {
			ack->sessions = malloc((size_t)sv->ntouched *
			    sizeof(int64_t));
			if (ack->sessions == NULL)
				abort();
			memcpy(ack->sessions, sv->touched, (size_t)sv->ntouched *
			    sizeof(int64_t));
		}
		sv->ntouched = 0;
		chan_send(&sv->f2l, ack);
		break;
	case M_COMMIT:
		zk_apply_queue(sv, m->zxid, NULL, 0);
		break;
	case M_SYNCED:
		if (m->via_master)
			zk_master_synced(s, m);
		else
			zk_apply_queue(sv, 0, m->conn, m->req_id);
		break;
	case M_REVALIDATED:
		zk_connected(m->conn, m->session, m->valid, m->timeout_ms);
		break;
	default:
		abort();
	}
	msg_free(m);
}

void
zk_leader_recv(int s, struct msg *m)
{
	struct server *sv = &S->servers[s];
	struct msg *r;
	int i;

	if (!sv->in_quorum || m->incarnation != sv->incarnation) {
		msg_free(m);
		return;
	}
	sv->acked = S->now;
	switch (m->type) {
	case M_FORWARD:
		if (m->req.type == ZOP_SYNC)
			zk_sync_done(s, m->conn, m->req_id, m);
		else
			zk_prep(s, m->conn, m->req_id, m->session, &m->req);
		break;
	case M_NEWSESSION:
		zk_new_session(s, m->conn, m->timeout_ms);
		break;
	case M_REVALIDATE:
		r = msg_new(M_REVALIDATED);
		r->incarnation = sv->incarnation;
		r->conn = m->conn;
		r->session = m->session;
		r->timeout_ms = m->timeout_ms;
		r->valid = zk_revalidate(m->session, s, m->timeout_ms);
		chan_send(&sv->l2f, r);
		break;
	case M_PING_ACK:
		/* LearnerHandler, case PING: touch what the follower saw. */
		for (i = 0; i < m->nsessions; i++)
			zk_touch_at_leader(m->sessions[i]);
		break;
	default:
		abort();
	}
	msg_free(m);
}

/* An observer's touches reach its ObserverMaster, which reports them in
 * its next answer to the leader; lost if it is not serving then. */
static void
zk_relay_cb(void *p, uint64_t a)
{
	struct msg *m = p;
	struct server *mv = &S->servers[m->wtype];
	int i;

	if (zk_is_leader(m->wtype))
		for (i = 0; i < m->nsessions; i++)
			zk_touch_at_leader(m->sessions[i]);
	else if (mv->stopped || !mv->serving || mv->deposed ||
	    mv->incarnation != (uint64_t)m->incarnation)
		sim_trace("zk s%d: %d touches relayed from an observer are "
		    "LOST", m->wtype, m->nsessions);
	else
		for (i = 0; i < m->nsessions; i++)
			zk_touch(m->wtype, m->sessions[i]);
	msg_free(m);
}

/* --- Followers leaving and rejoining the quorum --- */

static void
zk_go_looking(int s)
{
	struct server *sv = &S->servers[s];
	struct conn *c;
	int o;

	sim_trace("zk s%d: lost the leader; stops serving", s);
	sv->serving = false;
	sv->incarnation++;
	sv->ntouched = 0;	/* touches not reported are lost */
	zk_apply_clear(sv);
	for (c = S->conns; c != NULL; c = c->all_next)
		if (c->server == s && !c->server_closed)
			zk_server_close_conn(c, true);
	chan_drop(&sv->l2f);
	chan_drop(&sv->f2l);
	chan_drop(&sv->o2m);
	chan_drop(&sv->m2o);
	/* Its ObserverMaster stops: its observers see their links close (a
	 * stopped one when it resumes). */
	for (o = 0; o < S->nservers; o++)
		if (o != s && S->servers[o].observer &&
		    S->servers[o].master == s)
			zk_observer_check(o);
}

static void
zk_rejoin_cb(void *p, uint64_t s)
{
	struct server *sv = &S->servers[s];

	sv->rejoining = false;
	if (sv->stopped || sv->part_leader || sv->serving || sv->deposed ||
	    S->leaderless)
		return;
	if (sv->observer && !zk_master_usable(sv->master)) {
		/* Its master does not follow now: another voter that does
		 * (QuorumPeer.findLearnerMaster walks a shuffled list of
		 * them), or wait. */
		int pick[SIM_SERVERS_MAX], n = 0, i;

		for (i = 0; i < S->nservers; i++)
			if (zk_master_usable(i))
				pick[n++] = i;
		if (n == 0)
			return;		/* the next ping round tries again */
		sv->master = pick[sim_below((uint64_t)n)];
		sim_trace("zk s%d: attaches to ObserverMaster s%d", (int)s,
		    sv->master);
	}
	if (sv->observer) {
		sv->master_inc = S->servers[sv->master].incarnation;
		sv->master_heard = S->now;
		chan_drop(&sv->o2m);
		chan_drop(&sv->m2o);
	}
	sv->incarnation++;
	sv->tree = S->servers[S->leader].tree;
	sv->applied = S->servers[S->leader].applied;
	sv->serving = sv->in_quorum = true;
	sv->heard = sv->acked = S->now;
	sv->ntouched = 0;
	zk_apply_clear(sv);
	chan_drop(&sv->l2f);
	chan_drop(&sv->f2l);
	sim_trace("zk s%d: rejoined the quorum at zxid 0x%llx", (int)s,
	    (unsigned long long)sv->applied);
}

static void
zk_ping_cb(void *p, uint64_t a)
{
	stime limit = (stime)S->sync_limit * S->tick;
	struct server *sv;
	struct msg *m;
	int f;

	for (f = 0; f < S->nservers; f++) {
		sv = &S->servers[f];
		if (f == S->leader || sv->deposed)
			continue;
		if (sv->in_quorum && !S->leaderless) {
			if (S->now - sv->acked > limit) {
				sim_trace("zk: the leader drops s%d", f);
				sv->in_quorum = false;
			} else {
				m = msg_new(M_PING);
				m->incarnation = sv->incarnation;
				chan_send(&sv->l2f, m);
			}
		}
		if (!sv->stopped && sv->serving && S->now - sv->heard > limit)
			zk_go_looking(f);
		zk_observer_check(f);
		if (!sv->stopped && !sv->serving && !sv->part_leader &&
		    !sv->rejoining && !S->leaderless) {
			sv->rejoining = true;
			sim_at(S->now + sim_range(50000, 500000), zk_rejoin_cb,
			    NULL, (uint64_t)f);
		}
	}
	if (S->leaderless && !S->electing)
		zk_maybe_elect();
	sim_at(S->now + S->tick / 2, zk_ping_cb, NULL, 0);
}

static void
zk_resume_cb(void *p, uint64_t s)
{
	struct server *sv = &S->servers[s];
	struct conn *c;

	sv->stopped = false;
	sim_trace("zk s%d: resumed", (int)s);
	if (sv->serving && S->now - sv->heard > (stime)S->sync_limit * S->tick)
		zk_go_looking((int)s);
	zk_observer_check((int)s);
	chan_release(&sv->l2f, true);
	chan_release(&sv->m2o, true);
	zk_master_release((int)s);
	for (c = S->conns; c != NULL; c = c->all_next)
		if (c->server == (int)s)
			chan_release(&c->c2s, true);
	zk_apply_run((int)s);
	/* Replies it had ready when it stopped go out now. */
	for (c = S->conns; c != NULL; c = c->all_next)
		if (c->server == (int)s && !c->server_closed)
			zk_pump(c);
}

void
zk_server_stop(int s, stime duration)
{
	S->servers[s].stopped = true;
	S->servers[s].stopped_at = S->now;
	sim_trace("zk s%d: STOPPED for %llu ms", s,
	    (unsigned long long)(duration / 1000));
	sim_at(S->now + duration, zk_resume_cb, NULL, (uint64_t)s);
}

static void
zk_unpartition_cb(void *p, uint64_t s)
{
	if (S->servers[s].deposed || (S->leaderless && (int)s == S->leader)) {
		/* The old leader stays cut off until it is replaced. */
		sim_at(S->now + S->tick, zk_unpartition_cb, NULL, s);
		return;
	}
	S->servers[s].part_leader = false;
	sim_trace("zk s%d: back in touch with the leader", (int)s);
	chan_release(&S->servers[s].l2f, false);
	chan_release(&S->servers[s].f2l, false);
}

void
zk_server_partition(int s, stime duration)
{
	S->servers[s].part_leader = true;
	sim_trace("zk s%d: CUT OFF from the leader for %llu ms", s,
	    (unsigned long long)(duration / 1000));
	sim_at(S->now + duration, zk_unpartition_cb, NULL, (uint64_t)s);
}

void
zk_init(void)
{
	struct server *sv;
	int i;

	for (i = 0; i < S->nservers; i++) {
		sv = &S->servers[i];
		sv->idx = i;
		sv->serving = sv->in_quorum = true;
		sv->incarnation = 1;
		sv->applied = SIM_ZXID_BASE;
		sv->aq_tail = &sv->aq_head;
		if (sv->max_timeout_ms == 0)
			sv->max_timeout_ms = 20 * S->tick_ms;
		chan_init(&sv->l2f, CH_L2F, NULL, i);
		chan_init(&sv->f2l, CH_F2L, NULL, i);
		chan_init(&sv->o2m, CH_O2M, NULL, i);
		chan_init(&sv->m2o, CH_M2O, NULL, i);
	}
	for (i = 0; i < S->nservers; i++)
		if (S->servers[i].observer)
			S->servers[i].master_inc =
			    S->servers[S->servers[i].master].incarnation;
	S->committed = SIM_ZXID_BASE;
	S->next_session = 0x10a0000000000LL;
	sim_at(sim_below(S->tick / 2), zk_ping_cb, NULL, 0);
	sim_at(S->tick, zk_expiry_cb, NULL, 0);
}

void
zk_free(void)
{
	struct conn *c;
	struct syncw *w;
	int i;

	while ((c = S->conns) != NULL) {
		S->conns = c->all_next;
		chan_drop(&c->c2s);
		chan_drop(&c->s2c);
		zk_sreq_free_all(c);
		free(c);
	}
	for (i = 0; i < S->nservers; i++) {
		zk_apply_clear(&S->servers[i]);
		chan_drop(&S->servers[i].l2f);
		chan_drop(&S->servers[i].f2l);
		chan_drop(&S->servers[i].o2m);
		chan_drop(&S->servers[i].m2o);
		free(S->servers[i].watches);
	}
	for (i = 0; i < S->nlog; i++) {
		free(S->log[i].ops);
		while ((w = S->log[i].syncs) != NULL) {
			S->log[i].syncs = w->next;
			free(w);
		}
	}
	free(S->log);
	free(S->sessions);
}

/* --- The ZooKeeper leader deposed (--shape deposed) --- */

/* The old leader stops serving: it saw it had lost its quorum. */
static void
zk_depose_end_cb(void *p, uint64_t s)
{
	struct server *sv = &S->servers[s];

	if (!sv->deposed)
		return;
	sim_trace("zk s%d (deposed): lost its quorum; stops serving", (int)s);
	sv->deposed = false;
	sv->dep_hang = false;
	sv->serving = true;	/* for zk_go_looking */
	zk_go_looking((int)s);
	sv->in_quorum = false;
}

/*
 * A quorum of the others elected a new leader, which has synced them: it
 * commits what they had logged (the proposals of the old leader that were
 * out), and its session tracker starts afresh (SessionTrackerImpl: every
 * live session expires at roundUp(its start + the timeout the session was
 * created with); touches the old leader took are gone). The deposed one
 * serves on for up to a tick.
 */
static void
zk_elected_cb(void *p, uint64_t a)
{
	int L = S->leader, pick[SIM_SERVERS_MAX], n = 0, N, i;
	struct server *nv;
	struct zsession *z;
	struct syncw *w;
	struct txn *t;
	stime d;

	S->electing = false;
	for (i = 0; i < S->nservers; i++)
		if (i != L && !S->servers[i].observer && !S->servers[i].stopped &&
		    !S->servers[i].part_leader && !S->servers[i].serving)
			pick[n++] = i;
	if (n < S->nvoters / 2 + 1 - 0 || n == 0)
		return;		/* the next ping round tries again */
	N = pick[sim_below((uint64_t)n)];
	nv = &S->servers[N];
	S->leader = N;
	S->leaderless = false;
	nv->tree = S->servers[L].tree;
	nv->applied = S->servers[L].applied;
	nv->incarnation++;
	nv->serving = nv->in_quorum = true;
	nv->rejoining = false;
	nv->ntouched = 0;
	nv->lag = 0;
	nv->heard = nv->acked = S->now;
	zk_apply_clear(nv);
	chan_drop(&nv->l2f);
	chan_drop(&nv->f2l);
	for (i = 0; i < S->nservers; i++)
		if (i != N)
			S->servers[i].in_quorum = false;
	while (S->nlog > 0 && S->committed < S->log[S->nlog - 1].zxid) {
		t = zk_txn(S->committed + 1);
		S->committed = t->zxid;
		zk_apply_txn(N, t);
		while ((w = t->syncs) != NULL) {
			t->syncs = w->next;
			free(w);
		}
	}
	if (S->leader_failed) {
		/* Another process: its ticks (ExpiryQueue's intervals, on its
		 * own clock) fall at another phase. */
		S->leader_failed = false;
		S->tick_phase = sim_below((uint64_t)S->tick);
		S->expiry_gen++;
		sim_at(zk_round_up(S->now), zk_expiry_cb, NULL, S->expiry_gen);
	}
	for (i = 0; i < S->nsessions; i++) {
		z = &S->sessions[i];
		if (z->closing)
			continue;
		z->timeout_ms = z->create_timeout_ms;
		z->expiry = zk_round_up(S->now + (stime)z->timeout_ms * 1000);
		z->owner = -1;
	}
	d = S->servers[L].deposed ? (sim_chance(50) ? S->tick :
	    sim_below(S->tick + 1)) : 0;
	sim_trace("zk s%d: LEADS the ensemble at zxid 0x%llx (after s%d); "
	    "every session expires a timeout from now; s%d serves %llu ms "
	    "more", N, (unsigned long long)nv->applied, L, L,
	    (unsigned long long)(d / 1000));
	if (S->servers[L].deposed)
		sim_at(S->now + d, zk_depose_end_cb, NULL, (uint64_t)L);
}

/* Followers that lost the leader look for a new one: once a quorum of
 * them looks, an election (FastLeaderElection, then a sync) follows. */
static void
zk_maybe_elect(void)
{
	int i, n = 0;

	for (i = 0; i < S->nservers; i++)
		if (i != S->leader && !S->servers[i].observer &&
		    !S->servers[i].stopped && !S->servers[i].part_leader &&
		    !S->servers[i].serving)
			n++;
	if (n < S->nvoters / 2 + 1)
		return;
	S->electing = true;
	sim_at(S->now + sim_range(50000, 600000), zk_elected_cb, NULL, 0);
}

/* The ZooKeeper leader is gone (deposed or failed): counted, and the
 * ensemble has no leader until an election. */
static void
zk_leader_gone(void)
{
	int L = S->leader, i;

	S->leaderless = true;
	S->st.depositions++;
	S->last_depose_at = S->now;
	S->last_deposed = L;
	for (i = 0; i < S->nagents; i++)
		if (S->agents[i].running && S->agents[i].h != NULL &&
		    S->agents[i].h->conn != NULL &&
		    S->agents[i].h->conn->server == L &&
		    S->agents[i].e->role == ELECTION_LEADER)
			S->st.depositions_under++;
}

/*
 * The ZooKeeper leader is cut off from every other server for duration
 * (crash: it fails, closing its clients). Cut off, it goes on answering
 * reads and syncs (not writes, which never commit) of the clients still
 * connected to it, until a tick after a new leader took over.
 */
void
zk_depose(stime duration, bool crash)
{
	int L = S->leader;
	struct server *sv = &S->servers[L];

	if (S->leaderless)
		return;
	zk_leader_gone();
	sv->part_leader = true;
	sim_trace("zk s%d: the ZooKeeper leader %s for %llu ms", L,
	    crash ? "FAILS" : "is CUT OFF from the quorum",
	    (unsigned long long)(duration / 1000));
	sim_at(S->now + duration, zk_unpartition_cb, NULL, (uint64_t)L);
	if (crash) {
		sv->serving = true;
		zk_go_looking(L);
		sv->in_quorum = false;
		return;
	}
	sv->deposed = true;
	sv->dep_hang = S->nlog > 0 && S->log[S->nlog - 1].zxid > S->committed;
	S->dep_nsessions = S->nsessions;
}

/* --- The ZooKeeper leader fails (fault 17) --- */

/*
 * The failed leader is back (its process restarted, or its host): it
 * knows none of its old connections (a restarted host resets them) and
 * rejoins the new leader as a follower. It stays away until it has been
 * replaced.
 */
static void
zk_leader_back_cb(void *p, uint64_t s)
{
	struct server *sv = &S->servers[s];
	struct conn *c;

	if (S->leaderless && (int)s == S->leader) {
		sim_at(S->now + S->tick, zk_leader_back_cb, NULL, s);
		return;
	}
	sim_trace("zk s%d: the failed leader is back; rejoins as a follower",
	    (int)s);
	sv->stopped = false;
	sv->part_leader = false;
	sv->serving = true;	/* for zk_go_looking */
	zk_go_looking((int)s);	/* closes what was left of its connections */
	sv->in_quorum = false;
	/* What the clients had sent it meets a closed connection. */
	for (c = S->conns; c != NULL; c = c->all_next)
		if (c->server == (int)s)
			chan_release(&c->c2s, true);
}

/*
 * The ZooKeeper leader fails for duration:
 * - its process exits (host false): the kernel closes its sockets, so its
 *   clients and the followers see it at once; the followers look for a new
 *   leader at once, and an election follows;
 * - its host stops (host true): nothing is closed. Its clients hear
 *   nothing and give up after their timeout (2T/3); the followers hear no
 *   ping for syncLimit ticks, then look.
 * The new leader is another process: its session tracker starts afresh
 * (zk_elected_cb: every session expires a whole creation timeout after it
 * takes over; touches that the followers had not reported yet, and those
 * the old leader took, are gone), and its ticks fall at another phase.
 * The old one, back, rejoins as a follower.
 */
void
zk_leader_fail(stime duration, bool host)
{
	int L = S->leader, i;
	struct server *sv = &S->servers[L];

	if (S->leaderless)
		return;
	zk_leader_gone();
	S->leader_failed = true;
	sim_trace("zk s%d: the ZooKeeper leader's %s FAILS for %llu ms", L,
	    host ? "host" : "process", (unsigned long long)(duration / 1000));
	sim_at(S->now + duration, zk_leader_back_cb, NULL, (uint64_t)L);
	sv->part_leader = true;	/* nothing passes to or from the others */
	if (host) {
		sv->stopped = true;
		sv->stopped_at = S->now;
		return;
	}
	sv->serving = true;
	zk_go_looking(L);
	sv->in_quorum = false;
	for (i = 0; i < S->nservers; i++)
		if (i != L && S->servers[i].serving && !S->servers[i].stopped)
			zk_go_looking(i);
	zk_maybe_elect();
}
