/* SPDX-License-Identifier: MIT */
/*
 * The agents: each runs the real election state machine on its own clock
 * (offset + rate x true time) and performs its actions as zk.c does:
 * the same plan of calls (agent/zkplan.c, which zk.c runs too), the same
 * watch contexts, the same way of turning what comes back into events,
 * queued and applied in order by the loop. A
 * paused agent applies nothing (its client does not run either) while
 * time goes on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "sim.h"
#include "zkplan.h"

#define STOP_GRACE_MS	5000	/* main.c */

static void	agent_feed(struct agent *, struct election_event *);
static void	agent_restart_cb(void *, uint64_t);
static void	agent_clear_inbox(struct agent *);
static void	agent_note_resign(struct agent *, uint64_t);

/* --- Clocks --- */

uint64_t
agent_local_us(const struct agent *a, stime t)
{
	return (uint64_t)(a->offset_us + (int64_t)t +
	    (int64_t)t * a->ppm / 1000000);
}

uint64_t
agent_now_ms(const struct agent *a)
{
	return agent_local_us(a, S->now) / 1000;
}

/* The first true time at which the agent's clock reads local_us (which
 * may be in the past; sim_at runs a past time now). */
stime
agent_true_at(const struct agent *a, uint64_t local_us)
{
	int64_t t;

	if (local_us <= agent_local_us(a, 0))
		return 0;
	t = ((int64_t)local_us - a->offset_us) * 1000000 /
	    (1000000 + a->ppm);
	if (t < 0)
		t = 0;
	while (agent_local_us(a, (stime)t) < local_us)
		t++;
	while (t > 0 && agent_local_us(a, (stime)t - 1) >= local_us)
		t--;
	return (stime)t;
}

static void
agent_uuid(char out[ELECTION_UUID_LEN + 1], void *arg)
{
	uint64_t x = sim_rand(), y = sim_rand();

	snprintf(out, ELECTION_UUID_LEN + 1,
	    "%08x-%04x-4%03x-%04x-%012" PRIx64, (unsigned)(x >> 32),
	    (unsigned)(x >> 16) & 0xffff, (unsigned)x & 0xfff,
	    (unsigned)(y >> 48 & 0x3fff) | 0x8000,
	    (uint64_t)(y & 0xffffffffffffULL));
}

/* --- The inbox: what the ZooKeeper threads queue for the loop --- */

struct inmsg *
inmsg_new(uint64_t hid, enum election_event_type type)
{
	struct inmsg *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort();
	m->hid = hid;
	m->type = type;
	m->failed_op = -1;
	return m;
}

static void
inmsg_free(struct inmsg *m)
{
	int i;

	for (i = 0; i < m->count; i++)
		free(m->names[i]);
	free(m->names);
	free(m->name);
	free(m->data);
	free(m);
}

static void
agent_run_cb(void *p, uint64_t incarnation)
{
	struct agent *a = p;
	struct election_event ev;
	struct inmsg *m;

	if (incarnation != a->incarnation)
		return;
	a->run_scheduled = false;
	while (a->running && !a->paused && (m = a->in_head) != NULL) {
		a->in_head = m->next;
		if (a->in_head == NULL)
			a->in_tail = &a->in_head;
		/* zk_apply(): session events of a closed handle are dropped. */
		if (m->type == EV_SESSION && (a->h == NULL || m->hid != a->h->id)) {
			inmsg_free(m);
			continue;
		}
		if (m->type == EV_RESIGN) {
			if (a->stopping || !a->candidate) {
				inmsg_free(m);
				continue;
			}
			agent_note_resign(a, m->hold_ms);
		}
		memset(&ev, 0, sizeof(ev));
		ev.type = m->type;
		ev.gen = m->gen;
		ev.now = agent_now_ms(a);
		ev.rc = m->rc;
		ev.failed_op = m->failed_op;
		ev.session = m->session;
		ev.session_id = m->session_id;
		ev.timeout_ms = m->timeout_ms;
		ev.name = m->name;
		ev.data = m->data;
		ev.datalen = m->datalen;
		ev.names = m->names;
		ev.count = m->count;
		ev.zxid = m->zxid;
		ev.pzxid = m->pzxid;
		ev.czxid = m->czxid;
		ev.owner = m->owner;
		ev.hold_ms = m->hold_ms;
		ev.sent = m->sent;
		ev.deleted = m->deleted;
		ev.server = m->server;
		ev.min_timeout_ms = m->min_timeout_ms;
		if (m->type == EV_NOTIFIED)
			ev.told = (uint64_t)m->zxid;
		agent_feed(a, &ev);
		inmsg_free(m);
	}
}

void
agent_push(struct agent *a, struct inmsg *m)
{
	if (!a->running) {
		inmsg_free(m);
		return;
	}
	m->next = NULL;
	*a->in_tail = m;
	a->in_tail = &m->next;
	if (!a->paused && !a->run_scheduled) {
		a->run_scheduled = true;
		sim_at(S->now, agent_run_cb, a, a->incarnation);
	}
}

/* --- The driver's callbacks (zk.c) --- */

static char *
dup_data(const char *data, int len)
{
	char *p;

	if (len < 0)
		return NULL;
	p = malloc((size_t)len + 1);
	if (p == NULL)
		abort();
	memcpy(p, data, (size_t)len);
	p[len] = '\0';
	return p;
}

static struct agent *
driver_agent(const struct handle *h)
{
	return &S->agents[h->agent];
}

void
driver_session(struct handle *h, enum election_session state)
{
	struct inmsg *m = inmsg_new(h->id, EV_SESSION);

	m->session = state;
	if (state == SESSION_CONNECTED) {
		m->session_id = h->session_id;
		m->timeout_ms = h->timeout_ms;
		m->sent = h->opened_ms;		/* zk_apply: zk->opened */
	}
	agent_push(driver_agent(h), m);
}

/* zk.c asks the server it connected to what it is (the srvr four-letter
 * word, a round trip on a connection of its own) and reports EV_SERVER
 * for that connection only. */
static void
driver_srvr_cb(void *p, uint64_t conn_id)
{
	struct handle *h = p;
	struct inmsg *m;

	if (h->state != HS_CONNECTED || h->conn == NULL ||
	    h->conn->id != conn_id || !h->connected ||
	    driver_agent(h)->h != h)
		return;
	m = inmsg_new(h->id, EV_SERVER);
	m->server = S->servers[h->conn->server].observer ? SERVER_OBSERVER :
	    SERVER_VOTING;
	/* probe.c's session of 1 ms: the server's minSessionTimeout, 2 ticks
	 * (ZooKeeper's default), unless this seed's probes fail. */
	m->min_timeout_ms = S->no_learn || S->learn_fails ? 0 : 2 * S->tick_ms;
	agent_push(driver_agent(h), m);
}

void
driver_connected(struct handle *h)
{
	sim_at(S->now + net_delay() + net_delay(), driver_srvr_cb, h,
	    h->conn->id);
}

void
driver_watch(struct handle *h, enum wctx ctx, const char *name, int wtype)
{
	static const enum election_event_type types[] = {
		EV_TICK, EV_PRED_CHANGED, EV_SELF_CHANGED, EV_CLAIM_CHANGED,
		EV_CHILDREN_CHANGED,
	};
	struct inmsg *m = inmsg_new(h->id, types[ctx]);

	/* zk_node_watcher: the last component of the path. */
	m->name = strdup(name[0] != '\0' ? name : "e");
	m->deleted = wtype == WT_DELETED;
	agent_push(driver_agent(h), m);
}

/* The first op of a failed multi that says why (zk_multi_failed_op). */
static int
driver_failed_op(const struct zreply *rep, int nops)
{
	int i;

	for (i = 0; rep != NULL && i < nops; i++)
		if (rep->results[i] != ZOK &&
		    rep->results[i] != ZRUNTIMEINCONSISTENCY)
			return i;
	return -1;
}

void
driver_complete(struct handle *h, struct creq *r, int rc,
    const struct zreply *rep)
{
	struct agent *a = driver_agent(h);
	struct inmsg *m;
	struct agg *g;
	int i;

	switch (r->kind) {
	case K_NONE:
	case K_SYNC:
	case K_CLOSE:
		return;
	case K_RENEW:
		/* Three pipelined calls; the last to complete reports. */
		g = r->agg;
		if (rc != ZOK && g->rc == ZOK) {
			g->rc = rc;
			g->failed_op = r->sub;
		}
		if (rc == ZOK && r->sub == 1) {
			g->owner = rep->st.owner;
			g->czxid = rep->st.czxid;
		}
		if (rc == ZOK && r->sub == 2) {
			g->has_data = rep->datalen >= 0;
			g->datalen = rep->datalen >= 0 ? rep->datalen : 0;
			memcpy(g->data, rep->data, (size_t)g->datalen);
			g->mzxid = rep->st.mzxid;
			g->pzxid = rep->st.pzxid;
		}
		if (--g->refs > 0)
			return;
		m = inmsg_new(h->id, EV_RENEWED);
		m->gen = r->gen;
		m->rc = g->rc;
		m->failed_op = g->failed_op;
		m->name = strdup(r->name);
		m->owner = g->owner;
		m->czxid = g->czxid;
		m->zxid = g->mzxid;
		m->pzxid = g->pzxid;
		m->data = g->has_data ? dup_data(g->data, g->datalen) : NULL;
		m->datalen = g->datalen;
		agent_push(a, m);
		return;
	case K_PARENT:
		m = inmsg_new(h->id, EV_PARENT_CREATED);
		break;
	case K_CREATE:
		m = inmsg_new(h->id, EV_CREATED);
		if (rc == ZOK) {
			m->name = strdup(rep->path);
			m->owner = rep->st.owner;
			m->czxid = rep->st.czxid;
		}
		break;
	case K_LIST:
		m = inmsg_new(h->id, EV_CHILDREN);
		if (rc == ZOK && rep->nchildren > 0) {
			m->names = calloc((size_t)rep->nchildren, sizeof(char *));
			if (m->names == NULL)
				abort();
			for (i = 0; i < rep->nchildren; i++)
				m->names[m->count++] = strdup(rep->children[i]);
		}
		break;
	case K_AHEAD:
		m = inmsg_new(h->id, EV_AHEAD_CHECKED);
		m->name = strdup(r->name);
		break;
	case K_OWNER:
		m = inmsg_new(h->id, EV_OWNER);
		m->name = strdup(r->name);
		if (rc == ZOK) {
			m->owner = rep->st.owner;
			m->czxid = rep->st.czxid;
		}
		break;
	case K_PRED_SET:
	case K_SELF_SET:
	case K_SUCCESSOR:
	case K_CLAIM_DATA:
		m = inmsg_new(h->id, r->kind == K_PRED_SET ? EV_PRED_SET :
		    r->kind == K_SELF_SET ? EV_SELF_SET : r->kind == K_SUCCESSOR ?
		    EV_SUCCESSOR_DATA : EV_CLAIM_DATA);
		m->name = strdup(r->name);
		if (rc == ZOK) {
			m->data = dup_data(rep->data, rep->datalen);
			m->datalen = rep->datalen >= 0 ? rep->datalen : 0;
			m->zxid = rep->st.mzxid;
			m->pzxid = rep->st.pzxid;
			m->czxid = rep->st.czxid;
		}
		break;
	case K_CLAIM:
	case K_RELEASE:
		m = inmsg_new(h->id, r->kind == K_CLAIM ? EV_CLAIMED :
		    EV_RELEASED);
		m->name = strdup(r->name);
		if (rc == ZOK && r->kind == K_CLAIM)
			m->zxid = rep->set_mzxid;
		if (rc != ZOK) {
			m->failed_op = driver_failed_op(rep, r->req.nops);
			if (m->failed_op >= 0)
				rc = rep->results[m->failed_op];
		}
		break;
	default:
		abort();
	}
	m->gen = r->gen;
	m->rc = rc;
	agent_push(a, m);
}

/* --- Performing actions (zk_perform) --- */

/*
 * The agents' election node. The model holds it and its children only: a
 * path is a node's name under it, "" for itself, and the ancestors the
 * plan creates first are not modelled (they exist).
 */
#define DRIVER_PATH	"/zkelect"
#define DRIVER_PREFIX	DRIVER_PATH "/_c_"

static const char *
driver_name(const char *path)
{
	size_t n = strlen(DRIVER_PATH);

	if (strncmp(path, DRIVER_PATH, n) != 0 ||
	    (path[n] != '\0' && path[n] != '/'))
		abort();
	return path[n] == '\0' ? "" : path + n + 1;
}

/* zk.c's kinds (zk_plan_kinds) and watch contexts (zk_plan_watches). */
static const enum kind driver_kinds[] = {
	[ZKF_NONE] = K_NONE, [ZKF_PARENT] = K_PARENT, [ZKF_CREATE] = K_CREATE,
	[ZKF_LIST] = K_LIST, [ZKF_PRED_SET] = K_PRED_SET,
	[ZKF_OWNER] = K_OWNER, [ZKF_CLAIM] = K_CLAIM, [ZKF_RENEW] = K_RENEW,
	[ZKF_CLAIM_DATA] = K_CLAIM_DATA, [ZKF_SUCCESSOR] = K_SUCCESSOR,
	[ZKF_RELEASE] = K_RELEASE, [ZKF_SELF_SET] = K_SELF_SET,
	[ZKF_AHEAD] = K_AHEAD,
};

static const enum wctx driver_watches[] = {
	[ZKW_NONE] = W_NONE, [ZKW_PRED] = W_PRED, [ZKW_SELF] = W_SELF,
	[ZKW_CLAIM] = W_CLAIM, [ZKW_CHILDREN] = W_CHILD,
};

static void
driver_op(struct zop_one *op, enum zop type, const char *path,
    const char *data, int datalen)
{
	op->type = type;
	snprintf(op->name, sizeof(op->name), "%s", driver_name(path));
	if (datalen > (int)sizeof(op->data))
		abort();
	if (datalen > 0)
		memcpy(op->data, data, (size_t)datalen);
	op->datalen = datalen;
}

/* One call of a plan as the model's request (zk_plan_send). */
static struct creq *
driver_req(struct agent *a, const struct zkplan *p,
    const struct zkplan_call *c)
{
	static const enum zop zops[] = {
		[ZKC_CREATE] = ZOP_CREATE_PARENT, [ZKC_CREATE_SEQ] = ZOP_CREATE,
		[ZKC_SYNC] = ZOP_SYNC, [ZKC_GET] = ZOP_GET,
		[ZKC_EXISTS] = ZOP_EXISTS, [ZKC_CHILDREN] = ZOP_CHILDREN,
		[ZKC_MULTI] = ZOP_MULTI,
	};
	static const enum zop items[] = {
		[ZKI_CHECK] = ZOP_CHECK, [ZKI_SET] = ZOP_SET,
		[ZKI_DELETE] = ZOP_DELETE,
	};
	struct creq *r = calloc(1, sizeof(*r));
	int i;

	if (r == NULL)
		abort();
	/* The model creates only the election node (ZOP_CREATE_PARENT). */
	if (c->type == ZKC_CREATE && strcmp(c->path, DRIVER_PATH) != 0)
		abort();
	r->kind = c->answers ? driver_kinds[p->what] :
	    c->type == ZKC_SYNC ? K_SYNC : K_NONE;
	r->gen = a->e->gen;
	snprintf(r->name, sizeof(r->name), "%s", p->name);
	r->req.kind = r->kind;
	r->req.type = zops[c->type];
	r->req.nops = 1;
	driver_op(&r->req.op[0], zops[c->type], c->path, c->data, c->datalen);
	if (c->type == ZKC_MULTI) {
		for (i = 0; i < c->nitems; i++)
			driver_op(&r->req.op[i], items[c->items[i].type],
			    c->items[i].path, c->items[i].data,
			    c->items[i].datalen);
		r->req.nops = c->nitems;
	}
	if (c->watch != ZKW_NONE) {
		r->req.watch = true;
		r->wctx = driver_watches[c->watch];
		r->child_watch = c->type == ZKC_CHILDREN;
	}
	return r;
}

/*
 * Submits the calls of action x's plan (agent/zkplan.c), in order, as
 * zk_plan_run does; the model's client refuses nothing. Several answering
 * calls (the renewal) share one aggregate: the last to complete reports.
 */
static void
driver_plan(struct agent *a, const struct election_action *x)
{
	struct zkplan plan;
	struct agg *g = NULL;
	struct creq *r;
	int i, sub = 0;

	if (zkplan_build(x, DRIVER_PATH, DRIVER_PREFIX, a->e->uuid, &plan) == -1)
		abort();	/* the model's names are short */
	if (zkplan_answers(&plan) > 1) {
		g = calloc(1, sizeof(*g));
		if (g == NULL)
			abort();
		g->refs = zkplan_answers(&plan);
		g->failed_op = -1;
	}
	for (i = 0; i < plan.ncalls; i++) {
		r = driver_req(a, &plan, &plan.calls[i]);
		if (g != NULL && plan.calls[i].answers) {
			r->agg = g;
			r->sub = r->req.sub = sub++;
		}
		client_submit(a->h, r);
	}
}

static void notified_cb(void *p, uint64_t incarnation);

static void
agent_exit(struct agent *a)
{
	sim_trace("%s: exits", a->id);
	a->running = false;
	client_close(a->h, true);
	agent_clear_inbox(a);
	a->paused = false;
	a->stopping = false;
	if (election_role_at(a->e, agent_now_ms(a)) == ELECTION_LEADER) {
		a->lead_end = S->now;
		a->lead_T_ms = a->e->timeout_ms;
	}
	fault_heal_at(S->now + a->restart_after);
	sim_at(S->now + a->restart_after, agent_restart_cb, a, a->incarnation);
}

/* zk_perform: what a fleet step asks. */
static void
driver_perform(struct agent *a, const struct fleet_actions *out)
{
	const struct election_action *x;
	uint64_t incarnation = a->incarnation;
	int i;

	for (i = 0; i < out->n && a->running && a->incarnation == incarnation;
	    i++) {
		x = &out->a[i].a;
		switch (out->a[i].type) {
		case FACT_ELECTION:
			if (x->type != ACT_NOTIFY) {
				driver_plan(a, x);
				break;
			}
			if (x->wait) {
				stime d = a->next_hook_us != 0 ? a->next_hook_us :
				    a->hook_us;

				a->next_hook_us = 0;
				a->telling = true;
				if (x->told > a->told_owed)
					a->told_owed = x->told;
				/* The app is told of this loss (and of those
				 * before it) after d: the acknowledgement
				 * carries its number. */
				sim_at(S->now + d, notified_cb, a,
				    a->incarnation << 32 |
				    (x->told & 0xffffffffu));
			}
			break;
		case FACT_KICK:
			sim_trace("%s: kicks its connection", a->id);
			client_kick(a->h);
			break;
		case FACT_NEW_SESSION:
			client_close(a->h, true);
			a->h = client_open(a->idx);
			break;
		case FACT_EXIT:
			agent_exit(a);
			break;
		default:
			break;		/* no member node in one election */
		}
	}
}

static void
notified_cb(void *p, uint64_t arg)
{
	struct agent *a = p;
	struct inmsg *m;

	if (arg >> 32 != (a->incarnation & 0xffffffffu) || !a->running)
		return;
	if ((arg & 0xffffffffu) > a->told_done)
		a->told_done = arg & 0xffffffffu;
	a->telling = a->told_done < a->told_owed;
	m = inmsg_new(0, EV_NOTIFIED);
	m->zxid = (int64_t)(arg & 0xffffffffu);
	agent_push(a, m);
}

/* --- Steps and ticks --- */

static const char *
event_name(enum election_event_type t)
{
	static const char *const names[] = {
		[EV_SESSION] = "session",
		[EV_PARENT_CREATED] = "parent_created",
		[EV_CREATED] = "created",
		[EV_CHILDREN] = "children",
		[EV_PRED_SET] = "pred_set",
		[EV_PRED_CHANGED] = "pred_changed",
		[EV_OWNER] = "owner",
		[EV_CLAIMED] = "claimed",
		[EV_RENEWED] = "renewed",
		[EV_CLAIM_DATA] = "claim_data",
		[EV_CLAIM_CHANGED] = "claim_changed",
		[EV_SUCCESSOR_DATA] = "successor_data",
		[EV_RELEASED] = "released",
		[EV_AHEAD_CHECKED] = "ahead_checked",
		[EV_CHILDREN_CHANGED] = "children_changed",
		[EV_SELF_SET] = "self_set",
		[EV_SELF_CHANGED] = "self_changed",
		[EV_TICK] = "tick",
		[EV_RESIGN] = "resign",
		[EV_STOP] = "stop",
		[EV_NOTIFIED] = "notified",
		[EV_SERVER] = "server",
	};

	if ((unsigned)t >= sizeof(names) / sizeof(names[0]) ||
	    names[t] == NULL)
		return "?";
	return names[t];
}

static void agent_tick_cb(void *p, uint64_t ver);

static void
agent_schedule_tick(struct agent *a)
{
	uint64_t t = fleet_next_tick(&a->f);

	a->tick_ver++;
	if (t == 0 || !a->running)
		return;
	/* The loop's timer fires a little after its deadline. */
	sim_at(agent_true_at(a, t * 1000) + sim_below(300), agent_tick_cb, a,
	    a->tick_ver);
}
static void
agent_trace_step(const struct agent *a, const struct election_glance *before,
    const struct election_actions *out)
{
	char acts[1024];
	int i, off = 0;

	acts[0] = '\0';
	for (i = 0; i < out->n; i++) {
		const struct election_action *x = &out->a[i];

		off += snprintf(acts + off, sizeof(acts) - (size_t)off, " %s%s%s",
		    election_action_name(x->type), x->name[0] ? ":" : "",
		    x->name);
		if (x->type == ACT_NOTIFY)
			off += snprintf(acts + off, sizeof(acts) - (size_t)off,
			    "(%s->%s %s%s)", election_role_name(x->from),
			    election_role_name(x->to),
			    election_reason_name(x->reason),
			    x->wait ? ", wait" : "");
		if ((size_t)off >= sizeof(acts))
			break;
	}
	sim_trace("%s: %s%s%s rc=%d gen=%" PRIu64 " | %s/%s -> %s/%s lease %"
	    PRIu64 " (now %" PRIu64 ") |%s", a->id, event_name(a->ev_type),
	    a->ev_name != NULL ? " " : "", a->ev_name != NULL ? a->ev_name : "",
	    a->ev_rc, a->ev_gen, election_phase_name(before->phase),
	    election_role_name(before->role), election_phase_name(a->e->phase),
	    election_role_name(a->e->role), a->e->lease_deadline, a->e->now,
	    acts);
}

/* fleet.c stepped the election (its stepped callback): trace, check. */
static void
agent_stepped(void *arg, struct part *pt, const struct election_glance *before,
    const struct election_actions *out)
{
	struct agent *a = arg;

	S->st.steps++;
	if (S->verbose)
		agent_trace_step(a, before, out);
	check_step(a, before, out);
}

/* One event, as zk_apply makes it a fleet event, and what it asks. */
static void
agent_feed(struct agent *a, struct election_event *ev)
{
	struct fleet_actions out = { 0 };
	struct fleet_event fev;

	memset(&fev, 0, sizeof(fev));
	fev.ev = *ev;
	fev.part = 0;
	switch (ev->type) {
	case EV_SESSION:	fev.type = FEV_SESSION; break;
	case EV_SERVER:		fev.type = FEV_SERVER; break;
	case EV_NOTIFIED:	fev.type = FEV_NOTIFIED; break;
	case EV_TICK:		fev.type = FEV_TICK; break;
	case EV_RESIGN:		fev.type = FEV_RESIGN; break;
	case EV_STOP:		fev.type = FEV_STOP; break;
	default:		fev.type = FEV_ELECTION; break;
	}
	a->ev_type = ev->type;
	a->ev_name = ev->name;
	a->ev_rc = ev->rc;
	a->ev_gen = ev->gen;
	fleet_step(&a->f, &fev, &out);
	driver_perform(a, &out);
	fleet_actions_free(&out);
	if (a->running)
		agent_schedule_tick(a);
}

static void
agent_tick_cb(void *p, uint64_t ver)
{
	struct agent *a = p;
	struct election_event ev;
	uint64_t now;

	if (ver != a->tick_ver || !a->running)
		return;
	if (a->paused) {
		a->tick_due = true;
		return;
	}
	now = agent_now_ms(a);
	if (now == a->last_tick_ms) {
		if (++a->ticks_same_ms > 1000) {
			sim_fail("%s: busy loop of ticks at %" PRIu64 " ms", a->id,
			    now);
			return;
		}
	} else {
		a->last_tick_ms = now;
		a->ticks_same_ms = 0;
	}
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_TICK;
	ev.now = now;
	agent_feed(a, &ev);
}

/* --- Life cycle and faults on agents --- */

void
agent_start(struct agent *a)
{
	struct config conf;

	agent_clear_inbox(a);
	a->running = true;
	a->paused = false;
	a->stopping = false;
	a->incarnation++;
	a->run_scheduled = false;
	a->telling = false;
	a->told_owed = a->told_done = 0;
	a->hold_until = 0;
	a->resigned_at = 0;
	a->end_lapsed = false;
	a->expired_at = 0;
	memset(&conf, 0, sizeof(conf));
	conf.election_id = a->id;
	conf.election_path = (char *)(uintptr_t)DRIVER_PATH;
	conf.election_candidate = a->candidate;
	conf.zk_tick_ms = S->tick_known ? (uint64_t)(S->tick_ms /
	    S->understate) : 0;
	fleet_init(&a->f, &conf, agent_uuid, a);
	a->f.stepped = agent_stepped;
	a->f.stepped_arg = a;
	a->e = &a->f.parts[0].e;
	if (S->legacy) {
		a->e->renew_div = 3;
		a->e->lease_naive = true;
	}
	sim_trace("%s: starts (incarnation %" PRIu64 ")", a->id,
	    a->incarnation);
	a->h = client_open(a->idx);
}

static void
agent_restart_cb(void *p, uint64_t incarnation)
{
	struct agent *a = p;

	if (a->running || incarnation != a->incarnation)
		return;
	fleet_free(&a->f);
	agent_start(a);
}

static void
agent_clear_inbox(struct agent *a)
{
	struct inmsg *m;

	while ((m = a->in_head) != NULL) {
		a->in_head = m->next;
		inmsg_free(m);
	}
	a->in_tail = &a->in_head;
}

static void
agent_resume_cb(void *p, uint64_t incarnation)
{
	struct agent *a = p;
	struct election_event ev;
	struct conn *c;

	if (incarnation != a->incarnation || !a->running || !a->paused)
		return;
	a->paused = false;
	a->resumed_at = S->now;
	sim_trace("%s: resumed", a->id);
	/* The IO thread reads what arrived, then looks at its timeouts;
	 * the loop runs its timer and its queue in either order. */
	for (c = S->conns; c != NULL; c = c->all_next)
		if (c->agent == a->idx && c->client_open)
			chan_release(&c->s2c, true);
	if (a->h != NULL)
		client_check(a->h);
	if (sim_chance(50)) {
		a->tick_due = false;
		memset(&ev, 0, sizeof(ev));
		ev.type = EV_TICK;
		ev.now = agent_now_ms(a);
		agent_feed(a, &ev);
	}
	if (a->in_head != NULL && !a->run_scheduled) {
		a->run_scheduled = true;
		sim_at(S->now, agent_run_cb, a, a->incarnation);
	}
	a->tick_due = false;
	if (a->running)
		agent_schedule_tick(a);
}

void
agent_pause(struct agent *a, stime duration)
{
	if (!a->running || a->paused)
		return;
	a->paused = true;
	sim_trace("%s: PAUSED for %" PRIu64 " ms", a->id, duration / 1000);
	sim_at(S->now + duration, agent_resume_cb, a, a->incarnation);
}

void
agent_crash(struct agent *a, stime restart_after)
{
	if (!a->running)
		return;
	sim_trace("%s: CRASHES (restart in %" PRIu64 " ms)", a->id,
	    restart_after / 1000);
	if (election_role_at(a->e, agent_now_ms(a)) == ELECTION_LEADER) {
		a->lead_end = S->now;
		a->lead_T_ms = a->e->timeout_ms;
	}
	client_close(a->h, false);
	a->running = false;
	a->paused = false;
	a->stopping = false;
	agent_clear_inbox(a);
	fault_heal_at(S->now + restart_after);
	sim_at(S->now + restart_after, agent_restart_cb, a, a->incarnation);
}

static void
agent_grace_cb(void *p, uint64_t incarnation)
{
	struct agent *a = p;

	if (incarnation != a->incarnation || !a->running || !a->stopping)
		return;
	sim_trace("%s: the stop grace is over", a->id);
	agent_exit(a);
}

void
agent_stop(struct agent *a, stime restart_after)
{
	struct election_event ev;
	uint64_t grace_ms;

	if (!a->running || a->paused || a->stopping)
		return;
	sim_trace("%s: STOP (restart %" PRIu64 " ms after it exits)", a->id,
	    restart_after / 1000);
	a->stopping = true;
	a->restart_after = restart_after;
	grace_ms = STOP_GRACE_MS + (uint64_t)S->T_ms + 2000;
	sim_at(agent_true_at(a, (agent_now_ms(a) + grace_ms) * 1000),
	    agent_grace_cb, a, a->incarnation);
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_STOP;
	ev.now = agent_now_ms(a);
	agent_feed(a, &ev);
}

/* What the API's resign does; the checks and the fault plan take note. */
static void
agent_note_resign(struct agent *a, uint64_t hold_ms)
{
	uint64_t now = agent_now_ms(a);

	sim_trace("%s: RESIGN, hold %" PRIu64 " ms", a->id, hold_ms);
	if (now + hold_ms > a->hold_until)
		a->hold_until = now + hold_ms;
	a->resigned_at = S->now;
	fault_note_resign(a, hold_ms);
}

void
agent_resign(struct agent *a, uint64_t hold_ms)
{
	struct election_event ev;

	if (!a->running || a->paused || a->stopping || !a->candidate)
		return;
	agent_note_resign(a, hold_ms);
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_RESIGN;
	ev.now = agent_now_ms(a);
	ev.hold_ms = hold_ms;
	agent_feed(a, &ev);
}

void
agent_free(struct agent *a)
{
	agent_clear_inbox(a);
	fleet_free(&a->f);
}
