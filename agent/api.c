/* SPDX-License-Identifier: MIT */
/*
 * The local API: a small HTTP/1.1 server on libevent bufferevents, on the
 * Unix socket and, when configured, a loopback TCP listener. It is written
 * here rather than on evhttp because libevent 2.1's evhttp can neither cap
 * its connections nor tell us when one closes. Every answer that states a
 * role is built at the moment it is written, so the lease is checked then
 * (rule 2): an answer queued while the process was paused says "unknown".
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
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

#define API_MAX_CONNS		256
#define API_MAX_HEADER		HTTP_MAX_HEADER
#define API_IDLE_TIMEOUT_S	10
#define API_MAX_WAIT_MS		(10 * 60 * 1000)

struct api_conn {
	struct api		*api;
	struct bufferevent	*bev;
	bool			 tcp;
	bool			 keepalive;
	bool			 closing;	/* free once the output drains */
	bool			 busy;		/* a request is being answered */
	/* a long poll */
	struct event		*wait_timer;
	uint64_t		 wait_index;
	enum api_endpoint	 wait_endpoint;
	struct api_conn		*next_waiter;
	struct api_conn		*prev, *next;	/* all open connections */
};

struct api {
	struct agent		*agent;
	struct evconnlistener	*unix_listener;
	struct evconnlistener	*tcp_listener;
	char			*socket_path;
	int			 nconns;
	struct api_conn		*conns;
	struct api_conn		*waiters;
	uint64_t		 requests[API_ENDPOINT_MAX][API_CODE_MAX];
};

static void	api_read_cb(struct bufferevent *, void *);
static void	api_write_cb(struct bufferevent *, void *);
static void	api_event_cb(struct bufferevent *, short, void *);

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

/* Appends s as a JSON string, quotes included. */
void
api_json_string(struct evbuffer *out, const char *s)
{
	const unsigned char *p;

	evbuffer_add(out, "\"", 1);
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			evbuffer_add_printf(out, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			evbuffer_add_printf(out, "\\u%04x", *p);
		else
			evbuffer_add(out, p, 1);
	}
	evbuffer_add(out, "\"", 1);
}

/* The status document of DESIGN section 1, as of now. */
void
api_status_json(const struct election *e, uint64_t now, struct evbuffer *out)
{
	struct election_report r;
	enum election_role role = election_role_at(e, now);

	election_report(e, &r);
	evbuffer_add_printf(out, "{\"id\":");
	api_json_string(out, e->id);
	evbuffer_add_printf(out, ",\"role\":\"%s\",\"is_leader\":%s,\"epoch\":",
	    election_role_name(role),
	    role == ELECTION_LEADER ? "true" : "false");
	if (role == ELECTION_LEADER)
		evbuffer_add_printf(out, "%" PRIu64, e->epoch);
	else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"lease_remaining_ms\":%" PRIu64 ",\"leader\":",
	    election_lease_remaining(e, now));
	if (r.has_leader && !(r.role == ELECTION_LEADER && role != ELECTION_LEADER)) {
		evbuffer_add_printf(out, "{\"id\":");
		api_json_string(out, r.leader_id);
		evbuffer_add_printf(out, ",\"epoch\":%" PRIu64 "}", r.leader_epoch);
	} else
		evbuffer_add_printf(out, "null");
	evbuffer_add_printf(out, ",\"candidates\":%d,\"position\":%d,"
	    "\"index\":%" PRIu64 ",\"session\":{\"state\":\"%s\","
	    "\"timeout_ms\":%d}}\n", r.candidates, r.position, e->index,
	    election_session_name(r.session), r.timeout_ms);
}

static void
api_conn_free(struct api_conn *c)
{
	struct api *api = c->api;
	struct api_conn **pp;

	for (pp = &api->waiters; *pp != NULL; pp = &(*pp)->next_waiter)
		if (*pp == c) {
			*pp = c->next_waiter;
			break;
		}
	if (c->wait_timer != NULL)
		event_free(c->wait_timer);
	bufferevent_free(c->bev);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		api->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	api->nconns--;
	free(c);
}

static void
api_respond(struct api_conn *c, enum api_endpoint ep, int code,
    struct evbuffer *body, const char *content_type)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	c->api->requests[ep][api_code_index(code)]++;
	c->api->agent->stats.api_requests++;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\nCache-Control: no-store\r\n%s\r\n",
	    code, api_reason(code), content_type, evbuffer_get_length(body),
	    c->keepalive ? "" : "Connection: close\r\n");
	evbuffer_add_buffer(out, body);
	c->busy = false;
	if (!c->keepalive) {
		c->closing = true;
		bufferevent_disable(c->bev, EV_READ);
	}
}

static void
api_error(struct api_conn *c, enum api_endpoint ep, int code, const char *msg)
{
	struct evbuffer *body = evbuffer_new();

	evbuffer_add_printf(body, "{\"error\":");
	api_json_string(body, msg);
	evbuffer_add_printf(body, "}\n");
	api_respond(c, ep, code, body, "application/json");
	evbuffer_free(body);
}

static void
api_answer_status(struct api_conn *c, enum api_endpoint ep)
{
	struct agent *agent = c->api->agent;
	struct evbuffer *body = evbuffer_new();
	uint64_t now = clock_now_ms();
	int code = 200;

	api_status_json(&agent->election, now, body);
	if (ep == API_LEADER &&
	    election_role_at(&agent->election, now) != ELECTION_LEADER)
		code = 503;
	api_respond(c, ep, code, body, "application/json");
	evbuffer_free(body);
}

static void
api_wait_done(struct api_conn *c)
{
	struct api_conn **pp;

	for (pp = &c->api->waiters; *pp != NULL; pp = &(*pp)->next_waiter)
		if (*pp == c) {
			*pp = c->next_waiter;
			break;
		}
	c->next_waiter = NULL;
	event_del(c->wait_timer);
	api_answer_status(c, c->wait_endpoint);
	/* Resume reading: a pipelined request may be waiting. */
	if (!c->closing) {
		bufferevent_enable(c->bev, EV_READ);
		api_read_cb(c->bev, c);
	}
}

static void
api_wait_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	api_wait_done(arg);
}

void
api_changed(struct api *api)
{
	struct api_conn *c, *next;
	uint64_t index;

	if (api == NULL)
		return;
	index = api->agent->election.index;
	for (c = api->waiters; c != NULL; c = next) {
		next = c->next_waiter;
		if (index > c->wait_index)
			api_wait_done(c);
	}
}

static void
api_handle_status(struct api_conn *c, enum api_endpoint ep, const char *query)
{
	struct agent *agent = c->api->agent;
	char *wait = NULL, *index = NULL, *end;
	uint64_t wait_ms = 0, idx = 0;
	struct timeval tv;

	if (query != NULL) {
		wait = http_query_get(query, "wait");
		index = http_query_get(query, "index");
	}
	if (wait != NULL && config_parse_duration(wait, &wait_ms) == -1) {
		api_error(c, ep, 400, "wait: not a duration (use e.g. 30s)");
		goto out;
	}
	if (index != NULL) {
		errno = 0;
		idx = strtoull(index, &end, 10);
		if (errno != 0 || *end != '\0' || end == index || index[0] == '-') {
			api_error(c, ep, 400, "index: not a non-negative integer");
			goto out;
		}
	}
	if (wait == NULL || wait_ms == 0 || index == NULL ||
	    agent->election.index > idx) {
		api_answer_status(c, ep);
		goto out;
	}
	if (wait_ms > API_MAX_WAIT_MS)
		wait_ms = API_MAX_WAIT_MS;
	/* Long poll: stop reading until answered, no idle timeout. */
	bufferevent_disable(c->bev, EV_READ);
	c->wait_index = idx;
	c->wait_endpoint = ep;
	if (c->wait_timer == NULL)
		c->wait_timer = evtimer_new(bufferevent_get_base(c->bev),
		    api_wait_timeout_cb, c);
	tv.tv_sec = (time_t)(wait_ms / 1000);
	tv.tv_usec = (suseconds_t)(wait_ms % 1000) * 1000;
	evtimer_add(c->wait_timer, &tv);
	c->next_waiter = c->api->waiters;
	c->api->waiters = c;
out:
	free(wait);
	free(index);
}

static void
api_handle_resign(struct api_conn *c, const char *query)
{
	struct agent *agent = c->api->agent;
	struct election_event ev;
	struct evbuffer *body;
	char *hold = NULL;
	uint64_t hold_ms = 0;

	if (c->tcp && !agent->conf->api_tcp_resign) {
		api_error(c, API_RESIGN, 403,
		    "resign is accepted on the Unix socket only "
		    "(set api.allow_tcp_resign to allow it on TCP)");
		return;
	}
	if (!agent->conf->election_candidate) {
		api_error(c, API_RESIGN, 400, "an observer cannot resign");
		return;
	}
	if (query != NULL)
		hold = http_query_get(query, "hold");
	if (hold != NULL && config_parse_duration(hold, &hold_ms) == -1) {
		free(hold);
		api_error(c, API_RESIGN, 400, "hold: not a duration (use e.g. 10s)");
		return;
	}
	free(hold);
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_RESIGN;
	ev.now = clock_now_ms();
	ev.hold_ms = hold_ms;
	zk_feed(agent->zk, &ev);
	body = evbuffer_new();
	evbuffer_add_printf(body, "{\"resigned\":true,\"hold_ms\":%" PRIu64 "}\n",
	    hold_ms);
	api_respond(c, API_RESIGN, 200, body, "application/json");
	evbuffer_free(body);
}

static void
api_route(struct api_conn *c, const char *method, const char *target,
    const char *query)
{
	bool get = strcmp(method, "GET") == 0;
	enum api_endpoint ep;
	if (strcmp(target, "/v1/status") == 0)
		ep = API_STATUS;
	else if (strcmp(target, "/v1/leader") == 0)
		ep = API_LEADER;
	else if (strcmp(target, "/v1/health") == 0)
		ep = API_HEALTH;
	else if (strcmp(target, "/v1/resign") == 0)
		ep = API_RESIGN;
	else if (strcmp(target, "/metrics") == 0)
		ep = API_METRICS;
	else {
		api_error(c, API_OTHER, 404, "no such endpoint");
		return;
	}
	if (ep == API_RESIGN ? strcmp(method, "POST") != 0 : !get) {
		api_error(c, ep, 405, ep == API_RESIGN ? "use POST" : "use GET");
		return;
	}
	switch (ep) {
	case API_STATUS:
	case API_LEADER:
		api_handle_status(c, ep, query);
		break;
	case API_HEALTH: {
		struct evbuffer *body = evbuffer_new();
		evbuffer_add_printf(body, "{\"status\":\"ok\"}\n");
		api_respond(c, ep, 200, body, "application/json");
		evbuffer_free(body);
		break;
	}
	case API_RESIGN:
		api_handle_resign(c, query);
		break;
	case API_METRICS: {
		struct evbuffer *body = evbuffer_new();
		api_metrics(c->api, clock_now_ms(), body);
		api_respond(c, ep, 200, body,
		    "text/plain; version=0.0.4; charset=utf-8");
		evbuffer_free(body);
		break;
	}
	default:
		break;
	}
}

/* Parses one request head (NUL-terminated) and answers it. */
static void
api_parse(struct api_conn *c, char *head)
{
	struct http_request req;
	struct evbuffer *in;
	const char *error;
	int code;

	code = http_parse_head(head, &req, &error);
	if (code != 0) {
		c->keepalive = false;
		api_error(c, API_OTHER, code, error);
		return;
	}
	c->keepalive = req.keepalive;
	c->busy = true;
	/* A body (never needed) must have arrived with the head. */
	if (req.content_length > 0) {
		in = bufferevent_get_input(c->bev);
		if (evbuffer_get_length(in) < req.content_length) {
			c->keepalive = false;
			api_error(c, API_OTHER, 400, "incomplete request body");
			return;
		}
		evbuffer_drain(in, req.content_length);
	}
	api_route(c, req.method, req.target, req.query);
}

static void
api_read_cb(struct bufferevent *bev, void *arg)
{
	struct api_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end;
	char head[API_MAX_HEADER + 1];
	size_t len;

	while (!c->busy && !c->closing) {
		end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (end.pos < 0) {
			if (evbuffer_get_length(in) > API_MAX_HEADER) {
				c->keepalive = false;
				api_error(c, API_OTHER, 431,
				    "request header too large");
			}
			return;
		}
		len = (size_t)end.pos + 4;
		if (len > API_MAX_HEADER) {
			c->keepalive = false;
			api_error(c, API_OTHER, 431, "request header too large");
			return;
		}
		evbuffer_remove(in, head, len);
		head[len] = '\0';
		if (memchr(head, '\0', len) != NULL) {
			c->keepalive = false;
			api_error(c, API_OTHER, 400, "malformed request");
			return;
		}
		api_parse(c, head);
	}
}

static void
api_write_cb(struct bufferevent *bev, void *arg)
{
	struct api_conn *c = arg;

	if (c->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		api_conn_free(c);
}

static void
api_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct api_conn *c = arg;

	if (what & BEV_EVENT_TIMEOUT) {
		/* A client that connected and says nothing. */
		if (!c->busy && !c->closing &&
		    evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
			c->keepalive = false;
			api_error(c, API_OTHER, 408, "request timeout");
			bufferevent_enable(bev, EV_WRITE);
			return;
		}
	}
	/* EOF, error or timeout: the client is gone or wasted our time. */
	api_conn_free(c);
}

static void
api_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct api *api = arg;
	struct api_conn *c;
	struct timeval idle = { API_IDLE_TIMEOUT_S, 0 };
	static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
	    "Content-Type: application/json\r\nContent-Length: 36\r\n"
	    "Connection: close\r\n\r\n{\"error\":\"too many connections\"}\n\n\n\n";

	if (api->nconns >= API_MAX_CONNS) {
		api->agent->stats.api_rejected++;
		if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* the client will see the close */
		}
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		close(fd);
		return;
	}
	c->api = api;
	c->tcp = sa->sa_family != AF_UNIX;
	c->keepalive = true;
	c->bev = bufferevent_socket_new(evconnlistener_get_base(l), fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL) {
		close(fd);
		free(c);
		return;
	}
	api->nconns++;
	c->next = api->conns;
	if (api->conns != NULL)
		api->conns->prev = c;
	api->conns = c;
	bufferevent_setcb(c->bev, api_read_cb, api_write_cb, api_event_cb, c);
	bufferevent_set_timeouts(c->bev, &idle, &idle);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void
api_listener_error_cb(struct evconnlistener *l, void *arg)
{
	log_warn("api: accept");
}

static struct evconnlistener *
api_listen_unix(struct api *api, const char *path, unsigned mode)
{
	struct sockaddr_un sun;
	struct evconnlistener *l;
	struct stat st;
	char *dir, *slash;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_warnx("api: socket path too long: %s", path);
		return NULL;
	}
	strcpy(sun.sun_path, path);

	/* Make the directory if it is missing (RuntimeDirectory may not be). */
	dir = strdup(path);
	slash = dir != NULL ? strrchr(dir, '/') : NULL;
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0755) == -1 && errno != EEXIST)
			log_warn("api: mkdir %s", dir);
	}
	free(dir);

	/* A socket left by an earlier run is ours to replace. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_warnx("api: %s exists and is not a socket", path);
			return NULL;
		}
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		log_warn("api: socket");
		return NULL;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		log_warn("api: bind %s", path);
		close(fd);
		return NULL;
	}
	if (chmod(path, mode) == -1)
		log_warn("api: chmod %s", path);
	l = evconnlistener_new(api->agent->base, api_accept_cb, api,
	    LEV_OPT_CLOSE_ON_FREE, 128, fd);
	if (l == NULL) {
		log_warnx("api: cannot listen on %s", path);
		close(fd);
		unlink(path);
		return NULL;
	}
	evconnlistener_set_error_cb(l, api_listener_error_cb);
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
	    128, (struct sockaddr *)&ss, sslen);
	if (l == NULL) {
		log_warn("api: cannot listen on %s", listen);
		return NULL;
	}
	evconnlistener_set_error_cb(l, api_listener_error_cb);
	return l;
}

struct api *
api_open(struct agent *agent)
{
	struct api *api;

	api = calloc(1, sizeof(*api));
	if (api == NULL)
		return NULL;
	api->agent = agent;
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
	if (api == NULL)
		return;
	while (api->conns != NULL)
		api_conn_free(api->conns);
	if (api->unix_listener != NULL) {
		evconnlistener_free(api->unix_listener);
		unlink(api->socket_path);
	}
	if (api->tcp_listener != NULL)
		evconnlistener_free(api->tcp_listener);
	free(api->socket_path);
	free(api);
}

/* The request counter for the metrics. */
uint64_t
api_request_count(const struct api *api, enum api_endpoint ep, int code_index)
{
	return api->requests[ep][code_index];
}

/* The agent behind this API, for the metrics writer. */
struct agent *
api_agent(struct api *api)
{
	return api->agent;
}
