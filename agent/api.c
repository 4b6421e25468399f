/* SPDX-License-Identifier: MIT */
/*
 * The local API: a small HTTP/1.1 server on libevent bufferevents, on the
 * Unix socket and, when configured, a loopback TCP listener. It is written
 * here rather than on evhttp or libmicrohttpd because neither lets it make
 * room at the connection cap, put a deadline on a whole request, or notice
 * a client that leaves during a long poll. Every answer that states a role
 * is built at the moment it is written, so the lease is checked then
 * (rule 2): an answer queued while the process was paused says "unknown".
 *
 * A connection is in one state at a time: idle (nothing pending), partial
 * (part of a request read), waiting (a parked long poll), busy (output not
 * yet written) or closing (its last answer is going out; then the write
 * side is shut and the input drained, so the client reads the answer and
 * never gets a reset). Each state has one deadline. At the connection cap
 * the oldest partial, else idle, else waiting connection makes room.
 */
#include <sys/file.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "agent.h"
#include "api.h"
#include "clock.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "watchdog.h"
#include "zk.h"

#define API_MAX_CONNS		256	/* slots: connections not closing */
#define API_MAX_CLOSING		256	/* connections sending their last answer */
#define API_IDLE_MS		10000	/* an idle keep-alive connection */
#define API_REQUEST_MS		3000	/* from a request's first byte to its end */
#define API_WRITE_MS		10000	/* output not drained for this long */
#define API_CLOSE_MS		2000	/* last answer out and the input drained */
#define API_MAX_WAIT_MS		(10 * 60 * 1000)
#define API_MAX_HOLD_MS		(24 * 3600 * 1000ULL)
#define API_INPUT_MAX		(16 * 1024)	/* read no further ahead */
#define API_OUTPUT_MAX		(16 * 1024)	/* answer no further ahead */
#define API_REQUEST_MAX		(HTTP_MAX_HEADER + HTTP_MAX_BODY)
#define API_ACCEPT_RETRY_MS	100	/* accepts paused: try again */
#define API_ACCEPT_LOG_MS	60000	/* one line per cause per minute */

enum api_state {
	CONN_IDLE, CONN_PARTIAL, CONN_WAITING, CONN_BUSY, CONN_CLOSING, CONN_NEW
};

TAILQ_HEAD(api_conn_q, api_conn);

struct api_conn {
	struct api		*api;
	struct bufferevent	*bev;
	enum api_state		 state;
	uint64_t		 since;		/* ms, when the state began */
	struct event		*timer;		/* the state's deadline */
	uint64_t		 timer_at;	/* ms; 0 when not armed */
	struct event		*resume;	/* go on reading after a long poll */
	bool			 tcp;
	bool			 keepalive;	/* of the request being answered */
	bool			 http10;
	bool			 head;		/* answer without a body */
	bool			 eof;		/* the client shut its sending side */
	bool			 shut;		/* our sending side is shut */
	bool			 closing;	/* free once the last answer is out */
	bool			 dead;		/* free now */
	/* a long poll */
	bool			 waiting;
	uint64_t		 wait_index;
	uint64_t		 wait_until;
	enum api_endpoint	 wait_endpoint;
	int			 wait_part;	/* partitions: -1 = the list */
	bool			 wait_leader;	/* partitions: NAME/leader */
	TAILQ_ENTRY(api_conn)	 entry;		/* in the queue of its state */
};

struct api {
	struct agent		*agent;
	struct evconnlistener	*unix_listener;
	struct evconnlistener	*tcp_listener;
	char			*socket_path;
	dev_t			 socket_dev;	/* the socket file we bound */
	ino_t			 socket_ino;
	int			 nconns;	/* not closing */
	int			 nclosing;
	struct api_conn_q	 queues[CONN_NEW];
	struct api_stats	 stats;
	struct api_cb		 cb;
	/* Out of descriptors: a spare one, and accepts paused until a
	 * descriptor is free (or the retry timer). */
	int			 reserve_fd;
	bool			 accept_paused;
	struct event		*accept_retry;
	struct event		*accept_log_timer;
	struct {
		uint64_t	 pending;	/* failures not yet logged */
		uint64_t	 last_log;	/* ms; 0: none logged */
	}			 accept_log[API_ACCEPT_CAUSES];
};

static void	api_read_cb(struct bufferevent *, void *);
static void	api_write_cb(struct bufferevent *, void *);
static void	api_event_cb(struct bufferevent *, short, void *);
static void	api_conn_update(struct api_conn *);
static void	api_accept_resume(struct api *);

/* The figures for the metrics, as of now. */
static const struct api_stats *
api_stats_now(struct api *api)
{
	struct api_conn *c;

	api->stats.connections = (uint64_t)api->nconns;
	api->stats.closing = (uint64_t)api->nclosing;
	api->stats.long_polls = 0;
	TAILQ_FOREACH(c, &api->queues[CONN_WAITING], entry)
		api->stats.long_polls++;
	return &api->stats;
}

static const char *
api_reason(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Payload Too Large";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default:  return "Error";
	}
}

static int
api_code_index(int code)
{
	static const int codes[API_CODE_MAX] = API_CODES;
	int i;

	for (i = 0; i < API_CODE_MAX - 1; i++)
		if (codes[i] == code)
			return i;
	return API_CODE_MAX - 1;
}

/*
 * The length of the well-formed UTF-8 sequence (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF) at p, or 0.
 */
/*
 * The fields a status document and a partition's entry share: role,
 * is_leader, epoch, lease_remaining_ms and leader (with its value when
 * with_value), as ROLE says at NOW.
 */
static void
api_role_json(const struct election *e, enum election_role role,
    const struct election_report *r, uint64_t now, bool with_value,
    struct evbuffer *out)
{
	evbuffer_add_printf(out, ",\"role\":\"%s\",\"is_leader\":%s,\"epoch\":",
	    election_role_name(role), role == ELECTION_LEADER ? "true" : "false");
	if (role == ELECTION_LEADER)
		evbuffer_add_printf(out, "%" PRIu64, e->epoch);
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"lease_remaining_ms\":%" PRIu64 ",\"leader\":",
	    election_lease_remaining(e, now));
	/* Our own last claim names no leader once we no longer lead. */
	if (!r->has_leader || (r->role == ELECTION_LEADER &&
	    role != ELECTION_LEADER)) {
		evbuffer_add_printf(out, "null");
		return;
	}
	evbuffer_add_printf(out, "{\"id\":");
	api_json_string(out, r->leader_id);
	evbuffer_add_printf(out, ",\"epoch\":%" PRIu64, r->leader_epoch);
	if (with_value) {
		evbuffer_add_printf(out, ",\"value\":");
		if (r->has_value)
			api_json_string(out, r->leader_value);
		else
			evbuffer_add_printf(out, "null");
	}
	evbuffer_add(out, "}", 1);
}

static size_t
api_utf8_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;
		else if (p[0] == 0xed)
			hi = 0x9f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		if (p[0] == 0xf0)
			lo = 0x90;
		else if (p[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/*
 * Appends s as a JSON string, quotes included. Bytes that are not UTF-8
 * (node data written by any ZooKeeper client) become U+FFFD, one per byte,
 * so that every answer is valid JSON.
 */
void
api_json_string(struct evbuffer *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *run = p;
	char esc[8];
	size_t n;

	evbuffer_add(out, "\"", 1);
	while (*p != '\0') {
		if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') {
			p++;
			continue;
		}
		if (*p >= 0x80 && (n = api_utf8_len(p)) != 0) {
			p += n;
			continue;
		}
		evbuffer_add(out, run, (size_t)(p - run));
		if (*p == '"' || *p == '\\')
			evbuffer_add_printf(out, "\\%c", *p);
		else if (*p < 0x80) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			evbuffer_add(out, esc, 6);
		} else
			evbuffer_add(out, "\\ufffd", 6);
		run = ++p;
	}
	evbuffer_add(out, run, (size_t)(p - run));
	evbuffer_add(out, "\"", 1);
}

/*
 * The status document's "session": the connection, the server it is on,
 * and the bound on tickTime the lease counts with (doc/design.md, "The
 * lease"), with a warning when zookeeper.tick_time understates it.
 */
static void
api_session_json(const struct election *e, struct evbuffer *out)
{
	struct election_report r;
	char why[256];

	election_report(e, &r);
	evbuffer_add_printf(out, ",\"session\":{\"state\":\"%s\","
	    "\"timeout_ms\":%d,\"server\":\"%s\",\"last_error\":",
	    election_session_name(r.session), r.timeout_ms,
	    election_server_name(r.server));
	/* Why we are not connected, as the client last said. */
	zk_last_error(why, sizeof(why));
	if (r.session != SESSION_CONNECTED && why[0] != '\0')
		api_json_string(out, why);
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"tick_bound_ms\":%" PRIu64 ",\"tick_bound_from\":"
	    "\"%s\",\"min_session_timeout_ms\":", r.tick_bound_ms,
	    election_tick_from_name(r.tick_from));
	if (r.min_timeout_ms > 0)
		evbuffer_add_printf(out, "%d", r.min_timeout_ms);
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"warning\":");
	if (r.tick_understated) {
		snprintf(why, sizeof(why), "zookeeper.tick_time (%d ms) is "
		    "below what the servers imply (minSessionTimeout %d ms: "
		    "tickTime up to %" PRIu64 " ms); the lease counts with %"
		    PRIu64 " ms", e->tick_ms, r.min_timeout_ms, r.tick_bound_ms,
		    r.tick_bound_ms);
		api_json_string(out, why);
	} else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, "}");
}

/* The status document of doc/design.md "Local API", as of now. */
void
api_status_json(const struct election *e, uint64_t now, struct evbuffer *out)
{
	struct election_report r;
	char bar[256];
	enum election_role role = election_role_at(e, now);

	election_report(e, &r);
	evbuffer_add_printf(out, "{\"id\":");
	api_json_string(out, e->id);
	api_role_json(e, role, &r, now, true, out);
	evbuffer_add_printf(out, ",\"candidates\":%d,\"position\":%d,"
	    "\"hold_remaining_ms\":%" PRIu64 ",\"reason\":",
	    r.candidates, r.position, election_hold_remaining(e, now));
	/* Why a candidate that could lead does not (null: nothing bars it). */
	if (r.bar != BAR_NONE)
		api_json_string(out, election_bar_text(&r, bar, sizeof(bar)));
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"index\":%" PRIu64, e->index);
	api_session_json(e, out);
	evbuffer_add_printf(out, ",\"duplicate_id\":%s,\"candidates_age_ms\":",
	    r.duplicate_id ? "true" : "false");
	if (election_candidates_age(e, now) < 0)
		evbuffer_add_printf(out, "null");
	else
		evbuffer_add_printf(out, "%" PRId64, election_candidates_age(e, now));
	/* Why the role is what it is: the reason of its last change. */
	evbuffer_add_printf(out, ",\"role_reason\":");
	if (role != r.role)
		/* The tick is due. */
		api_json_string(out, election_reason_name(REASON_LEASE_LAPSED));
	else
		api_json_string(out, election_reason_name(e->role_reason));
	evbuffer_add_printf(out, "}\n");
}

/* One entry of GET /v1/partitions (doc/design.md, "Local API"). */
static void
api_part_json(const struct part *pt, uint64_t now, struct evbuffer *out)
{
	const struct election *e = &pt->e;
	enum election_role role = fleet_role(pt, now);
	struct election_report r;

	election_report(e, &r);
	evbuffer_add_printf(out, "{\"name\":");
	api_json_string(out, pt->name);
	api_role_json(e, role, &r, now, false, out);
	evbuffer_add_printf(out, ",\"assigned\":%s,\"resigned\":%s}",
	    pt->assigned ? "true" : "false", pt->avoiding ? "true" : "false");
}

/* GET /v1/partitions: every partition, owned or not. */
static void
api_parts_json(const struct agent *agent, uint64_t now, struct evbuffer *out)
{
	int i;

	evbuffer_add_printf(out, "{\"id\":");
	api_json_string(out, agent->conf->election_id);
	evbuffer_add_printf(out, ",\"members\":%d,\"drained\":%s,\"index\":%"
	    PRIu64 ",\"partitions\":[", agent->fleet.view.count,
	    agent->fleet.drained ? "true" : "false", agent->fleet.view.index);
	for (i = 0; i < agent->fleet.nparts; i++) {
		if (i > 0)
			evbuffer_add(out, ",", 1);
		api_part_json(&agent->fleet.parts[i], now, out);
	}
	evbuffer_add_printf(out, "]}\n");
}

/*
 * Why the partitions may not be as they should, for the status's reason:
 * two members with one id, members that run other partitions, or what
 * keeps the session from a lease (an observer, a slow ZooKeeper, ...).
 * NULL: nothing.
 */
static const char *
api_parts_reason(const struct agent *agent, char *buf, size_t len)
{
	const struct fleet_view *v = &agent->fleet.view;
	struct election_report r;
	char bar[256];

	if (v->duplicate[0] != '\0')
		snprintf(buf, len, "two members share the id '%s' (election.id "
		    "must differ)", v->duplicate);
	else if (v->disagree > 0)
		snprintf(buf, len, "the members do not run the same partitions "
		    "(%s); each partition goes to a member that runs it",
		    v->disagreement);
	else {
		election_report(fleet_session(&agent->fleet), &r);
		if (r.bar == BAR_NONE || r.bar == BAR_EPOCH_BACKWARDS)
			return NULL;
		snprintf(buf, len, "%s", election_bar_text(&r, bar,
		    sizeof(bar)));
	}
	return buf;
}

/* GET /v1/status with partitions: the session, and a count of partitions;
 * leadership is per partition, so never is_leader here. */
static void
api_parts_status_json(struct agent *agent, uint64_t now,
    struct evbuffer *out)
{
	const struct election *e = fleet_session(&agent->fleet);
	char why[700];

	evbuffer_add_printf(out, "{\"id\":");
	api_json_string(out, agent->conf->election_id);
	evbuffer_add_printf(out, ",\"role\":\"%s\",\"is_leader\":false,"
	    "\"epoch\":null,\"lease_remaining_ms\":0,\"leader\":null,"
	    "\"index\":%" PRIu64, election_role_name(fleet_status_role(
	    &agent->fleet, now)), agent->fleet.view.index);
	api_session_json(e, out);
	evbuffer_add_printf(out, ",\"reason\":");
	if (api_parts_reason(agent, why, sizeof(why)) != NULL)
		api_json_string(out, why);
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"partitions\":{\"count\":%d,\"owned\":%d,"
	    "\"assigned\":%d,\"members\":%d,\"drained\":%s}}\n",
	    agent->fleet.nparts, agent->fleet.view.owned,
	    agent->fleet.view.assigned, agent->fleet.view.count,
	    agent->fleet.drained ? "true" : "false");
}

/* ------------------------------------------------------------------ */
/* Connections: states, deadlines, writing */

/*
 * libevent closes a freed bufferevent's socket only when its finalizer
 * runs, after the current callback; in one burst of accepts, hundreds of
 * closed connections held their descriptors (1,182 open at once, against
 * the 256 + 256 connections the API keeps). Close it now.
 */
static void
api_bev_free(struct bufferevent *bev)
{
	evutil_socket_t fd = bufferevent_getfd(bev);

	if (fd != -1) {
		bufferevent_setfd(bev, -1);
		evutil_closesocket(fd);
	}
	bufferevent_free(bev);
}

static void
api_conn_free(struct api_conn *c)
{
	struct api *api = c->api;

	if (c->state != CONN_NEW)
		TAILQ_REMOVE(&api->queues[c->state], c, entry);
	if (c->state == CONN_CLOSING)
		api->nclosing--;
	else
		api->nconns--;
	if (c->timer != NULL)
		event_free(c->timer);
	if (c->resume != NULL)
		event_free(c->resume);
	api_bev_free(c->bev);
	free(c);
	/* A descriptor is free: the spare comes first (so that it is not
	 * left to another thread), then a paused listener may accept. */
	if (api->reserve_fd == -1)
		api->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	api_accept_resume(api);
}

static void
api_conn_set_state(struct api_conn *c, enum api_state state, uint64_t now)
{
	struct api *api = c->api;

	if (c->state == state)
		return;
	if (c->state != CONN_NEW)
		TAILQ_REMOVE(&api->queues[c->state], c, entry);
	if (state == CONN_CLOSING) {
		api->nconns--;
		api->nclosing++;
	}
	c->state = state;
	c->since = now;
	TAILQ_INSERT_TAIL(&api->queues[state], c, entry);
}

static uint64_t
api_conn_deadline(const struct api_conn *c)
{
	switch (c->state) {
	case CONN_IDLE:		return c->since + API_IDLE_MS;
	case CONN_PARTIAL:	return c->since + API_REQUEST_MS;
	case CONN_WAITING:	return c->wait_until;
	case CONN_BUSY:		return c->since + API_WRITE_MS;
	default:		return c->since + API_CLOSE_MS;
	}
}

/* Arms the timer for the state's deadline; a later deadline waits its turn. */
static void
api_conn_arm(struct api_conn *c, uint64_t now)
{
	uint64_t at = api_conn_deadline(c), ms;
	struct timeval tv;

	if (c->timer_at != 0 && c->timer_at <= at)
		return;
	ms = at > now ? at - now : 0;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(c->timer, &tv);
	c->timer_at = at;
}

/* Writes what is queued now; the bufferevent writes the rest when it can. */
static void
api_conn_flush(struct api_conn *c)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	int n;

	if (evbuffer_get_length(out) > 0) {
		/* As the bufferevent does around its own writes. */
		evbuffer_unfreeze(out, 1);
		n = evbuffer_write(out, bufferevent_getfd(c->bev));
		evbuffer_freeze(out, 1);
		if (n == -1 && errno != EAGAIN && errno != EINTR)
			c->dead = true;
	}
	if (evbuffer_get_length(out) > 0)
		bufferevent_enable(c->bev, EV_WRITE);
	else
		bufferevent_disable(c->bev, EV_WRITE);
}

static void
api_respond(struct api_conn *c, enum api_endpoint ep, int code,
    struct evbuffer *body, const char *content_type, const char *extra)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	const char *conn = "";

	c->api->stats.requests[ep][api_code_index(code)]++;
	c->api->agent->stats.api_requests++;
	if (!c->keepalive)
		conn = "Connection: close\r\n";
	else if (c->http10)
		conn = "Connection: keep-alive\r\n";
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\nCache-Control: no-store\r\n%s%s\r\n",
	    code, api_reason(code), content_type, evbuffer_get_length(body),
	    extra != NULL ? extra : "", conn);
	if (c->head)
		evbuffer_drain(body, evbuffer_get_length(body));
	else
		evbuffer_add_buffer(out, body);
	if (!c->keepalive)
		c->closing = true;
}

static void
api_error(struct api_conn *c, enum api_endpoint ep, int code, const char *msg,
    const char *extra)
{
	struct evbuffer *body = evbuffer_new();

	evbuffer_add_printf(body, "{\"error\":");
	api_json_string(body, msg);
	evbuffer_add_printf(body, "}\n");
	api_respond(c, ep, code, body, "application/json", extra);
	evbuffer_free(body);
}

/* An answer that ends the connection (refused, evicted, timed out). */
static void
api_error_close(struct api_conn *c, int code, const char *msg)
{
	c->keepalive = false;
	c->head = false;
	api_error(c, API_OTHER, code, msg, NULL);
}

static void
api_answer_status(struct api_conn *c, enum api_endpoint ep)
{
	struct agent *agent = c->api->agent;
	struct evbuffer *body = evbuffer_new();
	uint64_t now = clock_now_ms();
	int code = 200;

	if (ep == API_PARTITIONS) {
		if (c->wait_part < 0)
			api_parts_json(agent, now, body);
		else {
			const struct part *pt = &agent->fleet.parts[c->wait_part];

			api_part_json(pt, now, body);
			evbuffer_add(body, "\n", 1);
			if (c->wait_leader &&
			    fleet_role(pt, now) != ELECTION_LEADER)
				code = 503;
		}
		api_respond(c, ep, code, body, "application/json", NULL);
		evbuffer_free(body);
		return;
	}
	if (agent->fleet.partitioned) {
		/* One election per partition: none for the agent. */
		api_parts_status_json(agent, now, body);
		api_respond(c, ep, ep == API_LEADER ? 503 : 200, body,
		    "application/json", NULL);
		evbuffer_free(body);
		return;
	}
	api_status_json(&agent->fleet.parts[0].e, now, body);
	if (ep == API_LEADER &&
	    election_role_at(&agent->fleet.parts[0].e, now) != ELECTION_LEADER)
		code = 503;
	api_respond(c, ep, code, body, "application/json", NULL);
	evbuffer_free(body);
}

/*
 * Answers a parked long poll. Reading the requests pipelined behind it is
 * left to the loop (the resume event): this runs inside api_changed, which
 * runs inside an election step, and a pipelined resign must not start
 * another step from here.
 */
static void
api_wait_done(struct api_conn *c)
{
	c->waiting = false;
	api_answer_status(c, c->wait_endpoint);
	api_conn_flush(c);
	if (!c->closing)
		event_active(c->resume, EV_READ, 0);
	api_conn_update(c);
}

void
api_changed(struct api *api)
{
	struct api_conn *c, *next;
	uint64_t index;

	if (api == NULL)
		return;
	index = fleet_index(&api->agent->fleet);
	for (c = TAILQ_FIRST(&api->queues[CONN_WAITING]); c != NULL; c = next) {
		next = TAILQ_NEXT(c, entry);
		if (index > c->wait_index)
			api_wait_done(c);
	}
}

/* ------------------------------------------------------------------ */
/* Requests */

static void
api_handle_status(struct api_conn *c, enum api_endpoint ep, const char *query)
{
	struct agent *agent = c->api->agent;
	char *wait = NULL, *index = NULL, *end;
	uint64_t wait_ms = 0, idx = 0, now;

	if (query != NULL) {
		wait = http_query_get(query, "wait");
		index = http_query_get(query, "index");
	}
	if (wait != NULL && config_parse_duration(wait, &wait_ms) == -1) {
		api_error(c, ep, 400, "wait: not a duration (use e.g. 30s)", NULL);
		goto out;
	}
	if (index != NULL) {
		errno = 0;
		idx = strtoull(index, &end, 10);
		if (errno != 0 || *end != '\0' || end == index || index[0] == '-') {
			api_error(c, ep, 400, "index: not a non-negative integer", NULL);
			goto out;
		}
	}
	/* A client that has shut its sending side gets its answer now. */
	if (wait == NULL || wait_ms == 0 || index == NULL ||
	    fleet_index(&agent->fleet) > idx || c->eof) {
		api_answer_status(c, ep);
		goto out;
	}
	if (wait_ms > API_MAX_WAIT_MS)
		wait_ms = API_MAX_WAIT_MS;
	now = clock_now_ms();
	c->waiting = true;
	c->wait_index = idx;
	c->wait_endpoint = ep;
	c->wait_until = now + wait_ms;
out:
	free(wait);
	free(index);
}

static void
api_handle_resign(struct api_conn *c, const char *query, struct part *pt)
{
	struct agent *agent = c->api->agent;
	const struct fleet_view *v = &agent->fleet.view;
	struct evbuffer *body;
	char *hold = NULL, msg[64];
	uint64_t hold_ms = 0;
	int bad = 0;

	if (c->tcp && !agent->conf->api_tcp_resign) {
		api_error(c, API_RESIGN, 403,
		    "resign is accepted on the Unix socket only "
		    "(set api.allow_tcp_resign to allow it on TCP)", NULL);
		return;
	}
	if (!agent->conf->election_candidate) {
		api_error(c, API_RESIGN, 400, "an observer cannot resign", NULL);
		return;
	}
	if (agent->fleet.partitioned && pt == NULL) {
		api_error(c, API_RESIGN, 400, "with partitions, resign one: "
		    "POST /v1/partitions/NAME/resign (or drain the agent: "
		    "POST /v1/drain)", NULL);
		return;
	}
	if (query != NULL)
		hold = http_query_get(query, "hold");
	if (hold != NULL && config_parse_duration(hold, &hold_ms) == -1)
		bad = 1;
	else if (hold_ms > API_MAX_HOLD_MS)
		bad = 2;
	free(hold);
	if (bad != 0) {
		snprintf(msg, sizeof(msg), bad == 1 ?
		    "hold: not a duration (use e.g. 10s)" :
		    "hold: at most 24h");
		api_error(c, API_RESIGN, 400, msg, NULL);
		return;
	}
	if (pt == NULL) {
		c->api->cb.resign(c->api->cb.arg, &agent->fleet.parts[0],
		    hold_ms);
		body = evbuffer_new();
		evbuffer_add_printf(body, "{\"resigned\":true,\"hold_ms\":%"
		    PRIu64 "}\n", hold_ms);
		api_respond(c, API_RESIGN, 200, body, "application/json", NULL);
		evbuffer_free(body);
		return;
	}
	/* A partition moves to another member (doc/design.md, "Moving
	 * partitions"): one that leads it, and one to move it to. */
	if (fleet_role(pt, clock_now_ms()) != ELECTION_LEADER) {
		snprintf(msg, sizeof(msg), "this agent does not lead it");
		api_error(c, API_RESIGN, 409, msg, NULL);
		return;
	}
	if (v->count - (v->drain_ignored ? 0 : v->drained) < 2) {
		api_error(c, API_RESIGN, 409, "no other member to take it "
		    "(every other member is drained, or there is none)", NULL);
		return;
	}
	c->api->cb.resign(c->api->cb.arg, pt, hold_ms);
	body = evbuffer_new();
	evbuffer_add_printf(body, "{\"resigned\":true,\"partition\":");
	api_json_string(body, pt->name);
	evbuffer_add_printf(body, ",\"hold_ms\":%" PRIu64 "}\n", hold_ms);
	api_respond(c, API_RESIGN, 200, body, "application/json", NULL);
	evbuffer_free(body);
}

/* POST /v1/drain, /v1/undrain: hand every partition over, as a member
 * that owns none; or take a share again. */
static void
api_handle_drain(struct api_conn *c, bool drain)
{
	struct agent *agent = c->api->agent;
	struct evbuffer *body;

	if (c->tcp && !agent->conf->api_tcp_resign) {
		api_error(c, API_DRAIN, 403, "drain is accepted on the Unix "
		    "socket only (set api.allow_tcp_resign to allow it on TCP)",
		    NULL);
		return;
	}
	if (!agent->fleet.partitioned) {
		api_error(c, API_DRAIN, 404, "no partitions configured", NULL);
		return;
	}
	c->api->cb.drain(c->api->cb.arg, drain);
	body = evbuffer_new();
	evbuffer_add_printf(body, "{\"drained\":%s}\n", drain ? "true" :
	    "false");
	api_respond(c, API_DRAIN, 200, body, "application/json", NULL);
	evbuffer_free(body);
}

/* /v1/partitions[/NAME[/leader]]: which one; -1 after an error answer. */
static int
api_route_partition(struct api_conn *c, const char *target)
{
	struct agent *agent = c->api->agent;
	const char *name = target + 14, *slash;
	struct part *pt;
	size_t len;

	if (!agent->fleet.partitioned) {
		api_error(c, API_PARTITIONS, 404, "no partitions configured",
		    NULL);
		return -1;
	}
	if (*name == '\0')
		return 0;
	name++;		/* the '/' */
	slash = strchr(name, '/');
	len = slash != NULL ? (size_t)(slash - name) : strlen(name);
	if (slash != NULL && strcmp(slash, "/leader") != 0 &&
	    strcmp(slash, "/resign") != 0) {
		api_error(c, API_PARTITIONS, 404, "no such endpoint", NULL);
		return -1;
	}
	if ((pt = fleet_part_named(&agent->fleet, name, len)) != NULL) {
		c->wait_part = pt->idx;
		c->wait_leader = slash != NULL && strcmp(slash, "/leader") == 0;
		return slash != NULL && strcmp(slash, "/resign") == 0 ? 1 : 0;
	}
	api_error(c, API_PARTITIONS, 404, "no such partition", NULL);
	return -1;
}

static void
api_route(struct api_conn *c, const struct http_request *req)
{
	const char *target = req->target;
	bool get = strcmp(req->method, "GET") == 0 || req->head;
	enum api_endpoint ep;
	struct evbuffer *body;

	if (strcmp(target, "/v1/status") == 0)
		ep = API_STATUS;
	else if (strcmp(target, "/v1/leader") == 0)
		ep = API_LEADER;
	else if (strcmp(target, "/v1/health") == 0)
		ep = API_HEALTH;
	else if (strcmp(target, "/v1/resign") == 0)
		ep = API_RESIGN;
	else if (strcmp(target, "/v1/drain") == 0 ||
	    strcmp(target, "/v1/undrain") == 0)
		ep = API_DRAIN;
	else if (strncmp(target, "/v1/partitions/", 15) == 0 &&
	    strlen(target) > 22 && strcmp(target + strlen(target) - 7,
	    "/resign") == 0)
		ep = API_RESIGN;
	else if (strcmp(target, "/metrics") == 0)
		ep = API_METRICS;
	else if (strcmp(target, "/v1/partitions") == 0 ||
	    strncmp(target, "/v1/partitions/", 15) == 0)
		ep = API_PARTITIONS;
	else {
		api_error(c, API_OTHER, 404, "no such endpoint", NULL);
		return;
	}
	if ((ep == API_RESIGN || ep == API_DRAIN) &&
	    strcmp(req->method, "POST") != 0) {
		api_error(c, ep, 405, "use POST", "Allow: POST\r\n");
		return;
	}
	if (ep != API_RESIGN && ep != API_DRAIN && !get) {
		api_error(c, ep, 405, "use GET", "Allow: GET, HEAD\r\n");
		return;
	}
	c->wait_part = -1;
	c->wait_leader = false;
	switch (ep) {
	case API_STATUS:
	case API_LEADER:
		api_handle_status(c, ep, req->query);
		break;
	case API_PARTITIONS:
		switch (api_route_partition(c, target)) {
		case 0:
			api_handle_status(c, ep, req->query);
			break;
		case 1:
			api_error(c, ep, 405, "use POST", "Allow: POST\r\n");
			break;
		}
		break;
	case API_HEALTH:
		body = evbuffer_new();
		evbuffer_add_printf(body, "{\"status\":\"ok\"}\n");
		api_respond(c, ep, 200, body, "application/json", NULL);
		evbuffer_free(body);
		break;
	case API_RESIGN:
		if (strcmp(target, "/v1/resign") == 0)
			api_handle_resign(c, req->query, NULL);
		else {
			int rc = api_route_partition(c, target);

			if (rc == 1)
				api_handle_resign(c, req->query,
				    &c->api->agent->fleet.parts[c->wait_part]);
			else if (rc == 0)
				api_error(c, ep, 404, "no such endpoint", NULL);
		}
		break;
	case API_DRAIN:
		api_handle_drain(c, strcmp(target, "/v1/drain") == 0);
		break;
	case API_METRICS:
		body = evbuffer_new();
		metrics_write(c->api->agent, api_stats_now(c->api),
		    clock_now_ms(), body);
		api_respond(c, ep, 200, body,
		    "text/plain; version=0.0.4; charset=utf-8", NULL);
		evbuffer_free(body);
		break;
	default:
		break;
	}
}

/*
 * Answers the whole requests that have arrived, in order, until one is
 * parked (a long poll), the connection is to close, or enough output is
 * queued: then it returns true, and the client must read before it is
 * answered further.
 */
static bool
api_conn_process(struct api_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer *out = bufferevent_get_output(c->bev);
	char head[HTTP_MAX_HEADER + 1];
	struct http_request req;
	const char *buf, *error;
	size_t len, used;
	int code;

	if (c->closing) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return false;
	}
	while (!c->closing && !c->waiting) {
		len = evbuffer_get_length(in);
		if (len == 0)
			break;
		if (evbuffer_get_length(out) >= API_OUTPUT_MAX)
			return true;
		if (len > API_REQUEST_MAX)
			len = API_REQUEST_MAX;
		buf = (const char *)evbuffer_pullup(in, (ssize_t)len);
		code = http_next_request(buf, len, head, &req, &used, &error);
		if (code == HTTP_INCOMPLETE) {
			/* A client that stopped sending cannot finish it. */
			if (c->eof)
				evbuffer_drain(in, evbuffer_get_length(in));
			break;
		}
		if (code != 0) {
			api_error_close(c, code, error);
			break;
		}
		evbuffer_drain(in, used);
		c->keepalive = req.keepalive;
		c->http10 = req.http10;
		c->head = req.head;
		api_route(c, &req);
	}
	/* Everything asked before a half-close is answered; then we close. */
	if (c->eof && !c->waiting && evbuffer_get_length(in) == 0)
		c->closing = true;
	return false;
}

/* Puts the connection in the state its buffers say, or frees it. */
static void
api_conn_update(struct api_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer *out = bufferevent_get_output(c->bev);
	uint64_t now = clock_now_ms();
	enum api_state state;

	if (c->dead) {
		api_conn_free(c);
		return;
	}
	if (c->closing) {
		api_conn_set_state(c, CONN_CLOSING, now);
		if (evbuffer_get_length(out) == 0) {
			if (c->eof) {
				api_conn_free(c);
				return;
			}
			/* Shut our side; drain theirs until they close. */
			if (!c->shut) {
				shutdown(bufferevent_getfd(c->bev), SHUT_WR);
				c->shut = true;
			}
			evbuffer_drain(in, evbuffer_get_length(in));
		}
		api_conn_arm(c, now);
		return;
	}
	if (c->waiting)
		state = CONN_WAITING;
	else if (evbuffer_get_length(out) > 0)
		state = CONN_BUSY;
	else if (evbuffer_get_length(in) > 0)
		state = CONN_PARTIAL;
	else
		state = CONN_IDLE;
	api_conn_set_state(c, state, now);
	api_conn_arm(c, now);
}

static void
api_read_cb(struct bufferevent *bev, void *arg)
{
	struct api_conn *c = arg;
	bool more;

	/* Until the client has to read before it is answered further. */
	do {
		more = api_conn_process(c);
		api_conn_flush(c);
	} while (more && !c->dead &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) == 0);
	api_conn_update(c);
}

static void
api_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	api_read_cb(NULL, arg);
}

static void
api_write_cb(struct bufferevent *bev, void *arg)
{
	struct api_conn *c = arg;

	/* All written: what was held back for it may go on. */
	bufferevent_disable(bev, EV_WRITE);
	if (c->state == CONN_BUSY)
		c->since = clock_now_ms();
	api_read_cb(bev, c);
}

static void
api_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct api_conn *c = arg;

	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) &&
	    (what & BEV_EVENT_READING)) {
		/* A half-close: answer what was asked, then close. */
		c->eof = true;
		if (c->waiting)
			api_wait_done(c);
		else
			api_read_cb(bev, c);
		return;
	}
	api_conn_free(c);
}

static void
api_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct api_conn *c = arg;
	uint64_t now = clock_now_ms();

	c->timer_at = 0;
	if (now < api_conn_deadline(c)) {
		api_conn_arm(c, now);
		return;
	}
	switch (c->state) {
	case CONN_IDLE:
		c->closing = true;
		break;
	case CONN_PARTIAL:
		api_error_close(c, 408, "request not completed in time");
		api_conn_flush(c);
		break;
	case CONN_WAITING:
		api_wait_done(c);
		return;
	default:
		/* Not reading its answers, or not closing: let it go. */
		c->dead = true;
		break;
	}
	api_conn_update(c);
}

/* ------------------------------------------------------------------ */
/* Accepting, and making room at the cap */

/*
 * Frees a slot for a new connection: the oldest half-sent request is
 * refused, else the oldest idle keep-alive is closed, else the oldest long
 * poll is answered now. Connections with an answer going out are left
 * alone. Returns false when nothing could be done.
 */
static bool
api_make_room(struct api *api)
{
	struct api_conn *c;

	if ((c = TAILQ_FIRST(&api->queues[CONN_PARTIAL])) != NULL) {
		api->stats.evicted_partial++;
		api_error_close(c, 503, "too many connections");
		api_conn_flush(c);
	} else if ((c = TAILQ_FIRST(&api->queues[CONN_IDLE])) != NULL) {
		api->stats.evicted_idle++;
		c->closing = true;
	} else if ((c = TAILQ_FIRST(&api->queues[CONN_WAITING])) != NULL) {
		api->stats.evicted_waiting++;
		c->waiting = false;
		c->keepalive = false;
		api_answer_status(c, c->wait_endpoint);
		api_conn_flush(c);
	} else
		return false;
	api_conn_update(c);
	return true;
}

/*
 * Out of descriptors (EMFILE), accept(2) fails while the listener stays
 * readable, and libevent would call it again at once, for ever: a busy
 * loop that logs each failure. Instead each failure frees a descriptor:
 * the connection that can best spare it is closed (one whose answer is
 * out, else the oldest half-sent request, idle keep-alive, long poll:
 * the order of making room at the cap), else the spare descriptor kept
 * for this is given up. Only when neither is there (the descriptors are
 * held elsewhere, or the whole system is out of them) are accepts paused,
 * until a connection closes or for API_ACCEPT_RETRY_MS. Either way the
 * next accept is the next client's, so the app is answered as soon as a
 * descriptor is free. Failures are logged once per cause per minute, with
 * a count (ntpd's client_log_error).
 */
static enum api_accept_cause
api_accept_cause(int err)
{
	switch (err) {
	case EMFILE:	return API_ACCEPT_EMFILE;
	case ENFILE:	return API_ACCEPT_ENFILE;
	case ENOBUFS:
	case ENOMEM:	return API_ACCEPT_NOMEM;
	default:	return API_ACCEPT_OTHER;
	}
}

static const int api_accept_errno[API_ACCEPT_CAUSES] = {
	EMFILE, ENFILE, ENOMEM, 0
};

/*
 * Logs a failed accept at once, then at most once per cause per
 * API_ACCEPT_LOG_MS: the failures in between are counted, and the timer
 * says how many when the interval is over.
 */
static void
api_accept_log(struct api *api, enum api_accept_cause cause, int err)
{
	uint64_t now = clock_now_ms(), wait;
	struct timeval tv;

	if (api->accept_log[cause].last_log != 0 &&
	    now - api->accept_log[cause].last_log < API_ACCEPT_LOG_MS) {
		api->accept_log[cause].pending++;
		if (api->accept_log_timer != NULL &&
		    !evtimer_pending(api->accept_log_timer, NULL)) {
			wait = api->accept_log[cause].last_log +
			    API_ACCEPT_LOG_MS - now;
			tv.tv_sec = (time_t)(wait / 1000);
			tv.tv_usec = (suseconds_t)(wait % 1000) * 1000;
			evtimer_add(api->accept_log_timer, &tv);
		}
		return;
	}
	api->accept_log[cause].last_log = now;
	log_warnx("api: accept: %s; %s (logged at most once a minute, with a "
	    "count)", strerror(err), cause == API_ACCEPT_EMFILE ?
	    "closing the connection that can best spare its descriptor, else "
	    "giving up the spare one, else pausing accepts" :
	    cause == API_ACCEPT_ENFILE ? "giving up the spare descriptor, "
	    "else pausing accepts" : "pausing accepts");
}

static void
api_accept_log_cb(evutil_socket_t fd, short what, void *arg)
{
	struct api *api = arg;
	uint64_t now = clock_now_ms(), n, next = 0, at;
	struct timeval tv;
	int i;

	for (i = 0; i < API_ACCEPT_CAUSES; i++) {
		if ((n = api->accept_log[i].pending) == 0)
			continue;
		at = api->accept_log[i].last_log + API_ACCEPT_LOG_MS;
		if (at > now) {
			/* this cause's interval is not over yet */
			if (next == 0 || at < next)
				next = at;
			continue;
		}
		api->accept_log[i].pending = 0;
		api->accept_log[i].last_log = now;
		log_warnx("api: accept: %s: %" PRIu64 " more time%s in the last "
		    "%d s", i == API_ACCEPT_OTHER ? "other errors" :
		    strerror(api_accept_errno[i]), n, n == 1 ? "" : "s",
		    API_ACCEPT_LOG_MS / 1000);
	}
	if (next != 0) {
		tv.tv_sec = (time_t)((next - now) / 1000);
		tv.tv_usec = (suseconds_t)((next - now) % 1000) * 1000;
		evtimer_add(api->accept_log_timer, &tv);
	}
}

/* Closes one connection now to free its descriptor; false if none can go. */
static bool
api_shed_one(struct api *api)
{
	struct api_conn *c;

	TAILQ_FOREACH(c, &api->queues[CONN_CLOSING], entry)
		if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
			break;
	if (c == NULL && (c = TAILQ_FIRST(&api->queues[CONN_PARTIAL])) != NULL) {
		api_error_close(c, 503, "too many connections");
		api_conn_flush(c);
	}
	if (c == NULL)
		c = TAILQ_FIRST(&api->queues[CONN_IDLE]);
	if (c == NULL && (c = TAILQ_FIRST(&api->queues[CONN_WAITING])) != NULL) {
		c->waiting = false;
		c->keepalive = false;
		api_answer_status(c, c->wait_endpoint);
		api_conn_flush(c);
	}
	if (c == NULL)
		return false;
	api->stats.shed++;
	api_conn_free(c);
	return true;
}

static void
api_accept_pause(struct api *api)
{
	struct timeval tv = { 0, API_ACCEPT_RETRY_MS * 1000 };

	if (api->accept_paused || api->accept_retry == NULL)
		return;
	api->accept_paused = true;
	if (api->unix_listener != NULL)
		evconnlistener_disable(api->unix_listener);
	if (api->tcp_listener != NULL)
		evconnlistener_disable(api->tcp_listener);
	evtimer_add(api->accept_retry, &tv);
}

static void
api_accept_resume(struct api *api)
{
	if (!api->accept_paused)
		return;
	api->accept_paused = false;
	evtimer_del(api->accept_retry);
	if (api->unix_listener != NULL)
		evconnlistener_enable(api->unix_listener);
	if (api->tcp_listener != NULL)
		evconnlistener_enable(api->tcp_listener);
}

static void
api_accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	api_accept_resume(arg);
}

static void
api_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct api *api = arg;
	struct api_conn *c;
	struct event_base *base = evconnlistener_get_base(l);
	struct evbuffer *in;
	char first[API_INPUT_MAX];
	bool refuse = false;
	ssize_t n;

	/* libevent accepts a whole backlog in one callback: that is work,
	 * not a stall, however long it takes. */
	watchdog_alive(api->agent->watchdog);
	/* Take back the spare descriptor if one is free besides this. */
	if (api->reserve_fd == -1)
		api->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/*
	 * Read at once: a client that already left is let go before it can
	 * cost a slot or an eviction, and one that has sent its request is
	 * answered now, before the next accept could take it for idle.
	 */
	n = recv(fd, first, sizeof(first), 0);
	if (n == 0 || (n == -1 && errno != EAGAIN && errno != EINTR)) {
		close(fd);
		return;
	}
	if (api->nconns >= API_MAX_CONNS && !api_make_room(api)) {
		api->agent->stats.api_rejected++;
		refuse = true;
	}
	/* Past this many, the oldest closing connection goes at once. */
	while (api->nclosing >= API_MAX_CLOSING)
		api_conn_free(TAILQ_FIRST(&api->queues[CONN_CLOSING]));
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	c->api = api;
	c->state = CONN_NEW;
	c->tcp = sa->sa_family != AF_UNIX;
	c->keepalive = true;
	c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timer = evtimer_new(base, api_timer_cb, c);
	c->resume = event_new(base, -1, 0, api_resume_cb, c);
	if (c->bev == NULL || c->timer == NULL || c->resume == NULL) {
		if (c->bev != NULL)
			api_bev_free(c->bev);
		else
			close(fd);
		if (c->timer != NULL)
			event_free(c->timer);
		if (c->resume != NULL)
			event_free(c->resume);
		free(c);
		return;
	}
	api->nconns++;
	bufferevent_setcb(c->bev, api_read_cb, api_write_cb, api_event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0, API_INPUT_MAX);
	/* Answers are written at once; EV_WRITE only for what is left. */
	bufferevent_disable(c->bev, EV_WRITE);
	bufferevent_enable(c->bev, EV_READ);
	if (n > 0) {
		in = bufferevent_get_input(c->bev);
		evbuffer_unfreeze(in, 0);
		evbuffer_add(in, first, (size_t)n);
		evbuffer_freeze(in, 0);
	}
	if (refuse) {
		api_error_close(c, 503, "too many connections");
		api_conn_flush(c);
		api_conn_update(c);
		return;
	}
	api_read_cb(c->bev, c);
}

static void
api_listener_error_cb(struct evconnlistener *l, void *arg)
{
	struct api *api = arg;
	int err = EVUTIL_SOCKET_ERROR();
	enum api_accept_cause cause = api_accept_cause(err);

	api->stats.accept_errors[cause]++;
	api_accept_log(api, cause, err);
	/* Free a descriptor for the next client; the listener, still
	 * readable, calls accept again. */
	if (cause == API_ACCEPT_EMFILE && api_shed_one(api))
		return;
	if ((cause == API_ACCEPT_EMFILE || cause == API_ACCEPT_ENFILE) &&
	    api->reserve_fd != -1) {
		close(api->reserve_fd);
		api->reserve_fd = -1;
		return;
	}
	api_accept_pause(api);
}

/* Creates the missing directories above path (mode 0755, less the umask). */
static int
api_mkdirs(const char *path)
{
	char *dir, *p;
	int rc = 0;

	if ((dir = strdup(path)) == NULL)
		return -1;
	for (p = strchr(dir + 1, '/'); p != NULL; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
			log_warn("api: mkdir %s", dir);
			rc = -1;
			break;
		}
		*p = '/';
	}
	free(dir);
	return rc;
}

/*
 * Whether a socket file at path is served (a process listens on it).
 * Returns 1 and the listener's pid, 0 when nobody listens, -1 on error.
 */
static int
api_socket_live(const struct sockaddr_un *sun, pid_t *pid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, rc;

	*pid = 0;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	if (connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0 ||
	    errno == EAGAIN) {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
			*pid = cred.pid;
		rc = 1;
	} else if (errno == ECONNREFUSED || errno == ENOENT)
		rc = 0;
	else
		rc = -1;
	close(fd);
	return rc;
}

static struct evconnlistener *
api_listen_unix(struct api *api, const char *path, unsigned mode)
{
	struct sockaddr_un sun;
	struct evconnlistener *l = NULL;
	struct stat st;
	char *dir, *slash;
	pid_t pid;
	int fd = -1, dfd = -1, live;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_warnx("api: socket path too long: %s", path);
		return NULL;
	}
	strcpy(sun.sun_path, path);

	/* Make the directories if they are missing (RuntimeDirectory may not be). */
	if (api_mkdirs(path) == -1)
		return NULL;
	/* One agent at a time decides about this path. */
	dir = strdup(path);
	slash = dir != NULL ? strrchr(dir, '/') : NULL;
	if (slash != NULL) {
		*slash = '\0';
		dfd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd != -1)
			flock(dfd, LOCK_EX);
	}
	free(dir);

	/* A socket left by an earlier run is replaced; a live one is not. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_warnx("api: %s exists and is not a socket", path);
			goto out;
		}
		live = api_socket_live(&sun, &pid);
		if (live == 1) {
			log_warnx("api: %s is in use by another process (pid %d), "
			    "probably another zkelectd with the same api.socket; "
			    "not taking it over", path, (int)pid);
			goto out;
		}
		if (live == -1) {
			log_warn("api: cannot tell whether %s is in use", path);
			goto out;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		log_warn("api: socket");
		goto out;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		log_warn("api: bind %s", path);
		goto out;
	}
	if (chmod(path, mode) == -1)
		log_warn("api: chmod %s", sun.sun_path);
	if (stat(path, &st) == 0) {
		api->socket_dev = st.st_dev;
		api->socket_ino = st.st_ino;
	}
	l = evconnlistener_new(api->agent->base, api_accept_cb, api,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, SOMAXCONN, fd);
	if (l == NULL) {
		log_warnx("api: cannot listen on %s", path);
		unlink(path);
		goto out;
	}
	fd = -1;
	evconnlistener_set_error_cb(l, api_listener_error_cb);
out:
	if (fd != -1)
		close(fd);
	if (dfd != -1)
		close(dfd);	/* and the lock with it */
	return l;
}

static struct evconnlistener *
api_listen_tcp(struct api *api, const char *listen)
{
	struct sockaddr_storage ss;
	struct evconnlistener *l;
	int sslen = sizeof(ss);
	char buf[300];

	/* "localhost:N" means 127.0.0.1:N; config only allows loopback. */
	if (strncmp(listen, "localhost:", 10) == 0) {
		snprintf(buf, sizeof(buf), "127.0.0.1:%s", listen + 10);
		listen = buf;
	}
	memset(&ss, 0, sizeof(ss));
	if (evutil_parse_sockaddr_port(listen, (struct sockaddr *)&ss, &sslen) == -1) {
		log_warnx("api: cannot parse listen address %s", listen);
		return NULL;
	}
	l = evconnlistener_new_bind(api->agent->base, api_accept_cb, api,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    SOMAXCONN, (struct sockaddr *)&ss, sslen);
	if (l == NULL) {
		log_warn("api: cannot listen on %s", listen);
		return NULL;
	}
	evconnlistener_set_error_cb(l, api_listener_error_cb);
	return l;
}

struct api *
api_open(struct agent *agent, const struct api_cb *cb)
{
	struct api *api;
	int i;

	api = calloc(1, sizeof(*api));
	if (api == NULL)
		return NULL;
	api->agent = agent;
	api->cb = *cb;
	for (i = 0; i < CONN_NEW; i++)
		TAILQ_INIT(&api->queues[i]);
	/* A spare descriptor, given up when accept runs out of them. */
	api->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	api->accept_retry = evtimer_new(agent->base, api_accept_retry_cb, api);
	api->accept_log_timer = evtimer_new(agent->base, api_accept_log_cb, api);
	api->socket_path = strdup(agent->conf->api_socket);
	api->unix_listener = api_listen_unix(api, agent->conf->api_socket,
	    agent->conf->api_socket_mode);
	if (api->unix_listener == NULL) {
		api_close(api);
		return NULL;
	}
	if (agent->conf->api_listen != NULL) {
		api->tcp_listener = api_listen_tcp(api, agent->conf->api_listen);
		if (api->tcp_listener == NULL) {
			api_close(api);
			return NULL;
		}
	}
	log_info("api: listening on %s%s%s", agent->conf->api_socket,
	    agent->conf->api_listen != NULL ? " and " : "",
	    agent->conf->api_listen != NULL ? agent->conf->api_listen : "");
	return api;
}

void
api_close(struct api *api)
{
	struct stat st;
	int i;

	if (api == NULL)
		return;
	for (i = 0; i < CONN_NEW; i++)
		while (!TAILQ_EMPTY(&api->queues[i]))
			api_conn_free(TAILQ_FIRST(&api->queues[i]));
	if (api->unix_listener != NULL) {
		evconnlistener_free(api->unix_listener);
		/* Only our own socket: another agent may have the path now. */
		if (stat(api->socket_path, &st) == 0 &&
		    st.st_dev == api->socket_dev && st.st_ino == api->socket_ino)
			unlink(api->socket_path);
	}
	if (api->tcp_listener != NULL)
		evconnlistener_free(api->tcp_listener);
	if (api->accept_retry != NULL)
		event_free(api->accept_retry);
	if (api->accept_log_timer != NULL)
		event_free(api->accept_log_timer);
	if (api->reserve_fd != -1)
		close(api->reserve_fd);
	free(api->socket_path);
	free(api);
}
