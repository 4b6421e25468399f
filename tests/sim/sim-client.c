/* SPDX-License-Identifier: MIT */
/*
 * A model of the ZooKeeper C client (zookeeper-client-c, 3.8), as far as
 * the election sees it:
 * - a ping after recv_timeout/3 without sending anything, and only when no
 *   request awaits its reply; a connection (or connection attempt) given up
 *   after 2/3 of recv_timeout without receiving anything;
 * - replies in order on one connection; on connection loss the CONNECTING
 *   session event is queued first, then every outstanding request fails
 *   (cleanup() in zookeeper.c), with ZOPERATIONTIMEOUT after a timeout and
 *   ZCONNECTIONLOSS otherwise;
 * - the server list shuffled per handle and walked as zookeeper.c does,
 *   with the double step of handle_error() and zoo_cycle_next_server()
 *   (ZOOKEEPER-2466: with an even number of servers the client cycles
 *   through only some of them) and a pause of recv_timeout/60 after the
 *   end of the list;
 * - the zxid of the last reply sent in each handshake (a server behind it
 *   refuses the client);
 * - one-shot watches, registered when their read succeeds, deduplicated per
 *   (path, context), removed when they fire and re-armed by SetWatches
 *   after a reconnect within the session.
 * Time is the agent's own clock: the client runs in the agent's process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "sim.h"

static void	client_schedule(struct handle *);
static void	client_connect(struct handle *);

static struct agent *
client_agent(const struct handle *h)
{
	return &S->agents[h->agent];
}

static uint64_t
client_now(const struct handle *h)
{
	return agent_local_us(client_agent(h), S->now);
}

static bool
addrvec_atend(const struct addrvec *v)
{
	return v->count > 0 && v->next >= v->count;
}

static int
addrvec_next(struct addrvec *v)
{
	if (addrvec_atend(v))
		v->next = 0;
	if (v->next >= v->count)
		return -1;
	return v->data[v->next++];
}

/* zoo_cycle_next_server(): the first walk goes through the "new" list of
 * the initial reconfiguration, then the usual round robin. */
static int
client_cycle(struct handle *h)
{
	if (h->reconfig) {
		if (h->addrs_new.next < h->addrs_new.count)
			return h->addrs_new.data[h->addrs_new.next++];
		h->reconfig = false;
	}
	return addrvec_next(&h->addrs);
}

int
client_peek_next(const struct handle *h)
{
	struct handle copy = *h;

	(void)addrvec_next(&copy.addrs);
	return client_cycle(&copy);
}

struct handle *
client_open(int agent)
{
	struct agent *a = &S->agents[agent];
	struct handle *h = calloc(1, sizeof(*h));
	int i, j, tmp;

	if (h == NULL)
		abort();
	h->id = ++S->next_handle;
	h->agent = agent;
	h->state = HS_CONNECTING;
	h->timeout_ms = S->T_ms;
	h->opened_ms = agent_now_ms(a);
	h->out_tail = &h->out;
	/* resolve_hosts() shuffles the list of each handle. */
	h->addrs.count = a->nservers;
	memcpy(h->addrs.data, a->servers, sizeof(h->addrs.data));
	for (i = h->addrs.count - 1; i > 0; i--) {
		j = (int)sim_below((uint64_t)i + 1);
		tmp = h->addrs.data[i];
		h->addrs.data[i] = h->addrs.data[j];
		h->addrs.data[j] = tmp;
	}
	h->addrs_new = h->addrs;
	h->reconfig = true;
	h->all_next = S->handles;
	S->handles = h;
	client_connect(h);
	return h;
}

static void
client_connect(struct handle *h)
{
	struct msg *m;
	int s = client_cycle(h);

	h->conn = conn_new(h, s);
	h->connected = false;
	h->last_recv = h->last_send = client_now(h);
	m = msg_new(M_CONNECT);
	m->session = h->session_id;
	m->zxid = h->last_zxid;
	m->timeout_ms = h->timeout_ms;
	chan_send(&h->conn->c2s, m);
	sim_trace("a%d: connecting to s%d (session 0x%llx, zxid 0x%llx)",
	    h->agent, s, (unsigned long long)h->session_id,
	    (unsigned long long)h->last_zxid);
	client_schedule(h);
}

static void
client_drop_conn(struct handle *h)
{
	struct conn *c = h->conn;

	if (c == NULL)
		return;
	c->client_open = false;
	c->h = NULL;
	chan_drop(&c->s2c);
	chan_send(&c->c2s, msg_new(M_FIN));
	h->conn = NULL;
	h->connected = false;
}

static void
client_fail_all(struct handle *h, int rc)
{
	struct creq *r;

	while ((r = h->out) != NULL) {
		h->out = r->next;
		if (h->out == NULL)
			h->out_tail = &h->out;
		driver_complete(h, r, rc, NULL);
		free(r->agg != NULL && r->agg->refs == 0 ? r->agg : NULL);
		free(r);
	}
}

/* handle_error(): cleanup, then on to the next server. */
static void
client_error(struct handle *h, int rc)
{
	bool was = h->connected;

	sim_trace("a%d: connection to s%d ends: %s", h->agent,
	    h->conn != NULL ? h->conn->server : -1, zerror(rc));
	client_drop_conn(h);
	h->state = HS_CONNECTING;
	if (S->loss_completions_first)
		client_fail_all(h, rc);
	if (was)
		driver_session(h, SESSION_CONNECTING);
	client_fail_all(h, rc);
	if (h->resign_on_loss) {
		/* The app resigns now: its request is applied after what the
		 * loop has queued (the loss of the connection). */
		struct inmsg *m = inmsg_new(0, EV_RESIGN);

		h->resign_on_loss = false;
		m->hold_ms = h->resign_hold_ms;
		agent_push(client_agent(h), m);
	}
	h->delay = addrvec_atend(&h->addrs);
	(void)addrvec_next(&h->addrs);
	if (h->delay) {
		h->reconnect_at = client_now(h) +
		    (uint64_t)h->timeout_ms * 1000 / 60;
		client_schedule(h);
	} else
		client_connect(h);
}

static void
client_send(struct handle *h, struct creq *r)
{
	struct msg *m = msg_new(M_REQUEST);

	m->req = r->req;
	chan_send(&h->conn->c2s, m);
	r->sent = true;
	h->last_send = client_now(h);
}

void
client_submit(struct handle *h, struct creq *r)
{
	if (h->state == HS_EXPIRED || h->state == HS_CLOSED) {
		driver_complete(h, r, ZINVALIDSTATE, NULL);
		free(r->agg != NULL && r->agg->refs == 0 ? r->agg : NULL);
		free(r);
		return;
	}
	r->req.xid = ++h->xid;
	r->next = NULL;
	*h->out_tail = r;
	h->out_tail = &r->next;
	if (h->connected) {
		client_send(h, r);
		client_schedule(h);
	}
}

void
client_kick(struct handle *h)
{
	if (h->conn == NULL || h->state == HS_CLOSED || h->state == HS_EXPIRED)
		return;
	/* zk.c's zk_kick: one zoo_cycle_next_server() first with an even
	 * number of addresses, so that the double step moves on. */
	if (h->addrs.count % 2 == 0)
		(void)client_cycle(h);
	client_error(h, ZCONNECTIONLOSS);
}

/* zookeeper_close(): a closeSession if connected; outstanding calls
 * complete with ZCLOSING. */
void
client_close(struct handle *h, bool send_close)
{
	struct msg *m;

	if (h->state == HS_CLOSED)
		return;
	if (send_close && h->connected && h->conn != NULL) {
		m = msg_new(M_REQUEST);
		m->req.xid = ++h->xid;
		m->req.type = ZOP_CLOSE;
		m->req.kind = K_CLOSE;
		chan_send(&h->conn->c2s, m);
	}
	client_drop_conn(h);
	h->state = HS_CLOSED;
	h->timer_ver++;
	client_fail_all(h, ZCLOSING);
}

static bool
client_awaits_reply(const struct handle *h)
{
	return h->out != NULL && h->out->sent;
}

static void
client_ping(struct handle *h)
{
	struct msg *m = msg_new(M_REQUEST);

	m->req.xid = XID_PING;
	m->req.type = ZOP_PING;
	chan_send(&h->conn->c2s, m);
	h->last_send = client_now(h);
}

/* zookeeper_interest(): the timeouts, and the ping. */
void
client_check(struct handle *h)
{
	uint64_t now = client_now(h), T = (uint64_t)h->timeout_ms * 1000;

	if (h->state == HS_EXPIRED || h->state == HS_CLOSED)
		return;
	if (h->conn == NULL) {
		if (now >= h->reconnect_at)
			client_connect(h);
		else
			client_schedule(h);
		return;
	}
	if (now - h->last_recv >= T * 2 / 3) {
		client_error(h, ZOPERATIONTIMEOUT);
		return;
	}
	if (h->connected && now - h->last_send >= T / 3 &&
	    !client_awaits_reply(h))
		client_ping(h);
	client_schedule(h);
}

static void
client_timer_cb(void *p, uint64_t ver)
{
	struct handle *h = p;
	struct agent *a = client_agent(h);

	if (ver != h->timer_ver || a->paused || a->h != h)
		return;
	client_check(h);
}

static void
client_schedule(struct handle *h)
{
	struct agent *a = client_agent(h);
	uint64_t now = client_now(h), T = (uint64_t)h->timeout_ms * 1000, at;

	h->timer_ver++;
	if (h->state == HS_EXPIRED || h->state == HS_CLOSED)
		return;
	if (h->conn == NULL)
		at = h->reconnect_at;
	else {
		at = h->last_recv + T * 2 / 3;
		if (h->connected) {
			uint64_t ping = h->last_send + T / 3;

			if (ping <= now)
				ping = now + T / 3;	/* a reply is awaited */
			if (ping < at)
				at = ping;
		}
	}
	sim_at(agent_true_at(a, at), client_timer_cb, h, h->timer_ver);
}

static void
client_watch_add(struct cwatch *tab, int *n, int max, const char *name,
    enum wctx ctx)
{
	int i;

	for (i = 0; i < *n; i++)
		if (tab[i].ctx == ctx && strcmp(tab[i].name, name) == 0)
			return;
	if (*n == max) {
		sim_fail("the client holds more than %d watches", max);
		return;
	}
	snprintf(tab[*n].name, sizeof(tab[*n].name), "%s", name);
	tab[(*n)++].ctx = ctx;
}

/* collectWatchers(): the watches an event fires, removed as it fires. */
static int
client_watch_take(struct cwatch *tab, int *n, const char *name,
    enum wctx *out, int nout)
{
	int i = 0;

	while (i < *n) {
		if (strcmp(tab[i].name, name) == 0) {
			out[nout++] = tab[i].ctx;
			memmove(&tab[i], &tab[i + 1],
			    (size_t)(*n - i - 1) * sizeof(*tab));
			(*n)--;
		} else
			i++;
	}
	return nout;
}

static void
client_set_watches(struct handle *h)
{
	struct msg *m;
	int i, j;

	if (h->ndata == 0 && h->nchild == 0)
		return;
	m = msg_new(M_REQUEST);
	m->req.xid = XID_SETWATCHES;
	m->req.type = ZOP_SETWATCHES;
	m->req.rel_zxid = h->last_zxid;
	for (i = 0; i < h->ndata; i++) {
		for (j = 0; j < m->req.nwdata; j++)
			if (strcmp(m->req.wdata[j], h->data[i].name) == 0)
				break;
		if (j == m->req.nwdata)
			snprintf(m->req.wdata[m->req.nwdata++],
			    sizeof(m->req.wdata[0]), "%s", h->data[i].name);
	}
	for (i = 0; i < h->nchild && m->req.nwchild < 2; i++)
		snprintf(m->req.wchild[m->req.nwchild++],
		    sizeof(m->req.wchild[0]), "%s", h->child[i].name);
	chan_send(&h->conn->c2s, m);
}

void
client_recv(struct conn *c, struct msg *m)
{
	struct handle *h = c->h;
	struct creq *r, *q;
	enum wctx fired[SIM_CWATCH_MAX + 4];
	int i, n;

	if (!c->client_open || h == NULL || h->conn != c) {
		msg_free(m);
		return;
	}
	h->last_recv = client_now(h);
	switch (m->type) {
	case M_CONNECTED:
		if (h->session_id != 0 && m->session != h->session_id) {
			/* The session is gone: the handle is dead. */
			sim_trace("a%d: session 0x%llx EXPIRED (told by s%d)",
			    h->agent, (unsigned long long)h->session_id,
			    c->server);
			client_drop_conn(h);
			h->state = HS_EXPIRED;
			h->timer_ver++;
			driver_session(h, SESSION_EXPIRED);
			client_fail_all(h, ZSESSIONEXPIRED);
			break;
		}
		h->session_id = m->session;
		h->timeout_ms = m->timeout_ms;
		h->connected = true;
		h->state = HS_CONNECTED;
		h->reconfig = false;
		S->agents[h->agent].last_server = c->server;
		sim_trace("a%d: connected to s%d, session 0x%llx", h->agent,
		    c->server, (unsigned long long)h->session_id);
		client_set_watches(h);
		driver_session(h, SESSION_CONNECTED);
		driver_connected(h);
		for (q = h->out; q != NULL && h->conn == c; q = q->next)
			if (!q->sent)
				client_send(h, q);
		break;
	case M_REPLY:
		if (m->rep.xid == XID_PING || m->rep.xid == XID_SETWATCHES)
			break;
		r = h->out;
		if (r == NULL || r->req.xid != m->rep.xid) {
			sim_fail("a%d: reply xid %d out of order", h->agent,
			    m->rep.xid);
			break;
		}
		h->out = r->next;
		if (h->out == NULL)
			h->out_tail = &h->out;
		if (m->rep.zxid > 0)
			h->last_zxid = m->rep.zxid;
		if (m->rep.rc == ZOK && r->wctx != W_NONE) {
			if (r->child_watch)
				client_watch_add(h->child, &h->nchild, 4,
				    r->req.op[0].name, r->wctx);
			else
				client_watch_add(h->data, &h->ndata,
				    SIM_CWATCH_MAX, r->req.op[0].name, r->wctx);
		}
		driver_complete(h, r, m->rep.rc, &m->rep);
		free(r->agg != NULL && r->agg->refs == 0 ? r->agg : NULL);
		free(r);
		break;
	case M_WATCH:
		n = 0;
		if (m->wtype != WT_CHILD)
			n = client_watch_take(h->data, &h->ndata, m->name, fired, n);
		if (m->wtype == WT_CHILD || m->wtype == WT_DELETED)
			n = client_watch_take(h->child, &h->nchild, m->name,
			    fired, n);
		for (i = 0; i < n; i++)
			driver_watch(h, fired[i], m->name, m->wtype);
		break;
	case M_EOF:
		client_error(h, ZCONNECTIONLOSS);
		break;
	default:
		abort();
	}
	msg_free(m);
	if (h->conn != NULL && h->state == HS_CONNECTED && h->conn == c)
		client_check(h);
}

void
client_free(struct handle *h)
{
	struct creq *r;

	while ((r = h->out) != NULL) {
		h->out = r->next;
		if (r->agg != NULL && --r->agg->refs == 0)
			free(r->agg);
		free(r);
	}
	h->out_tail = &h->out;
}

void
client_free_all(void)
{
	struct handle *h;

	while ((h = S->handles) != NULL) {
		S->handles = h->all_next;
		client_free(h);
		free(h);
	}
}
