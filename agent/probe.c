/* SPDX-License-Identifier: MIT */
/*
 * What a new connection's server is, and what the ensemble is, learned
 * beside the session, on connections of their own (doc/design.md, "The
 * lease"). Two probes go to the address of the client's connection:
 *  - srvr, a four-letter word ZooKeeper 3.8 answers whatever
 *    4lw.commands.whitelist says: "Mode: leader|follower|observer|...";
 *  - a session of our own that asks for a timeout of 1 ms. The server
 *    raises it to its minSessionTimeout, which is at least 2 x tickTime
 *    unless an operator set it lower, so half of it bounds tickTime. In
 *    that session we read /zookeeper/config (every server line, observers
 *    included, with or without reconfigEnabled) and close it. It costs the
 *    ensemble two transactions (createSession, closeSession) per new
 *    connection of ours, and it speaks the client protocol, so it works
 *    wherever the client's own connection does (a tunnel included).
 * With both answers (or either probe's failure) probe_decide() says what
 * the server is, and the callback hears it once.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "probe.h"

#define PROBE_SRVR_MAX		4096
#define PROBE_PACKET_MAX	(64 * 1024)	/* the config is a few lines */
#define PROBE_CONFIG_NODE	"/zookeeper/config"
#define PROBE_XID_GET		1
#define PROBE_XID_CLOSE		2
#define PROBE_OP_GETDATA	4
#define PROBE_OP_CLOSE		(-11)
#define PROBE_ZNONODE		(-101)	/* ZooKeeper's error codes */
#define PROBE_ZNOAUTH		(-102)
#define PROBE_ZNEEDSASL		(-124)	/* SESSIONCLOSEDREQUIRESASLAUTH */

enum probe_stage { STAGE_CONNECT, STAGE_GET, STAGE_CLOSE, STAGE_DONE };

struct probe {
	probe_cb		 cb;
	void			*arg;
	struct event		*ev_done;	/* the callback, from the loop */
	struct bufferevent	*srvr;		/* NULL once ended */
	struct bufferevent	*sess;		/* NULL once ended */
	enum probe_stage	 stage;
	struct sockaddr_storage	 peer;
	struct probe_result	 r;
	enum election_server	 srvr_server;
	struct probe_ensemble	 ens;
	struct probe_memory	 mem;		/* earlier probes' */
};

/* --- Pure parts --- */

enum election_server
probe_srvr_mode(const char *text, const char **mode)
{
	static const char *const voting[] = { "leader", "follower",
	    "standalone" };
	const char *m = strstr(text, "Mode: ");
	size_t i, n;

	*mode = NULL;
	if (m == NULL)
		return SERVER_UNKNOWN;
	m += 6;
	if (strncmp(m, "observer", 8) == 0) {
		*mode = "observer";
		return SERVER_OBSERVER;
	}
	for (i = 0; i < sizeof(voting) / sizeof(voting[0]); i++) {
		n = strlen(voting[i]);
		if (strncmp(m, voting[i], n) == 0) {
			*mode = voting[i];
			return SERVER_VOTING;
		}
	}
	return SERVER_UNKNOWN;
}

static uint8_t *
probe_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

static uint8_t *
probe_put64(uint8_t *p, uint64_t v)
{
	p = probe_put32(p, (uint32_t)(v >> 32));
	return probe_put32(p, (uint32_t)v);
}

static uint32_t
probe_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/*
 * ConnectRequest (zookeeper.jute): protocolVersion, lastZxidSeen,
 * timeOut, sessionId 0 (a new session), a 16-byte password, readOnly
 * false; after the frame's length.
 */
size_t
probe_connect_request(uint8_t *out, int timeout_ms)
{
	uint8_t *p = out + 4;

	p = probe_put32(p, 0);
	p = probe_put64(p, 0);
	p = probe_put32(p, (uint32_t)timeout_ms);
	p = probe_put64(p, 0);
	p = probe_put32(p, 16);
	memset(p, 0, 16);
	p += 16;
	*p++ = 0;
	probe_put32(out, (uint32_t)(p - out - 4));
	return (size_t)(p - out);
}

/* ConnectResponse: protocolVersion, timeOut, sessionId, passwd, ... */
int
probe_connect_timeout(const uint8_t *body, size_t len)
{
	int32_t t;

	if (len < 16)
		return -1;
	t = (int32_t)probe_get32(body + 4);
	return t > 0 ? t : -1;
}

size_t
probe_get_request(uint8_t *out, size_t len, int32_t xid, const char *path)
{
	size_t plen = strlen(path), n = 4 + 8 + 4 + plen + 1;
	uint8_t *p = out;

	if (len < n)
		return 0;
	p = probe_put32(p, (uint32_t)(n - 4));
	p = probe_put32(p, (uint32_t)xid);
	p = probe_put32(p, PROBE_OP_GETDATA);
	p = probe_put32(p, (uint32_t)plen);
	memcpy(p, path, plen);
	p += plen;
	*p = 0;			/* no watch */
	return n;
}

size_t
probe_close_request(uint8_t *out, int32_t xid)
{
	uint8_t *p = probe_put32(out, 8);

	p = probe_put32(p, (uint32_t)xid);
	probe_put32(p, (uint32_t)PROBE_OP_CLOSE);
	return 12;
}

/* ReplyHeader: xid, zxid, err; then, for a getData, data (a buffer). */
int
probe_reply(const uint8_t *body, size_t len, int32_t *xid, int32_t *err,
    const uint8_t **data, int32_t *datalen)
{
	if (len < 16)
		return -1;
	*xid = (int32_t)probe_get32(body);
	*err = (int32_t)probe_get32(body + 12);
	*data = NULL;
	*datalen = -1;
	if (*err != 0)
		return 0;
	if (len < 20)
		return -1;	/* a success without its data's length */
	*datalen = (int32_t)probe_get32(body + 16);
	if (*datalen > 0 && (size_t)*datalen > len - 20)
		return -1;
	if (*datalen > 0)
		*data = body + 20;
	return 0;
}

/*
 * A host of the config, cut to fit: only a numeric address is ever
 * compared, and no numeric address is that long, so a longer name (a
 * Kubernetes service's, say) is still a name.
 */
static void
probe_copy_host(char *host, size_t hlen, const char *h, size_t l)
{
	if (l >= hlen)
		l = hlen - 1;
	memcpy(host, h, l);
	host[l] = '\0';
}

/* "host:port", "[v6]:port" or "port" (no host) into host and port. */
static int
probe_hostport(const char *s, size_t n, char *host, size_t hlen, int *port)
{
	const char *colon = NULL, *h = s;
	size_t i, l;
	char num[8];

	for (i = n; i > 0; i--)
		if (s[i - 1] == ':') {
			colon = s + i - 1;
			break;
		}
	host[0] = '\0';
	if (colon == NULL) {
		l = n;
		colon = s - 1;
	} else {
		l = (size_t)(colon - h);
		if (l >= 2 && h[0] == '[' && h[l - 1] == ']') {
			h++;
			l -= 2;
		}
		probe_copy_host(host, hlen, h, l);
		l = n - (size_t)(colon + 1 - s);
	}
	if (port == NULL)
		return 0;
	if (l == 0 || l >= sizeof(num))
		return -1;
	memcpy(num, colon + 1, l);
	num[l] = '\0';
	*port = atoi(num);
	return *port > 0 && *port < 65536 ? 0 : -1;
}

/*
 * One line "server.N=host:quorum:election[:role][;[clienthost:]port]".
 * The quorum address may be a list (host:q:e|host:q:e); the first host
 * counts.
 */
static int
probe_server_line(const char *s, size_t n, struct probe_server *sv)
{
	const char *eq = memchr(s, '=', n), *semi, *end = s + n, *c1, *bar;
	size_t l;

	memset(sv, 0, sizeof(*sv));
	if (eq == NULL)
		return -1;
	s = eq + 1;
	semi = memchr(s, ';', (size_t)(end - s));
	if (semi != NULL) {
		/* The client address: "port", "host:port" or "[v6]:port". */
		if (probe_hostport(semi + 1, (size_t)(end - semi - 1),
		    sv->client_host, sizeof(sv->client_host),
		    &sv->client_port) == -1)
			return -1;
		end = semi;
	}
	if ((bar = memchr(s, '|', (size_t)(end - s))) != NULL)
		end = bar;
	l = (size_t)(end - s);
	sv->observer = l >= 9 && memcmp(end - 9, ":observer", 9) == 0;
	/* The host: up to the colon before the quorum port. */
	if (s < end && *s == '[') {
		c1 = memchr(s, ']', l);
		if (c1 == NULL)
			return -1;
		probe_copy_host(sv->host, sizeof(sv->host), s + 1,
		    (size_t)(c1 - s - 1));
	} else {
		c1 = memchr(s, ':', l);
		if (c1 == NULL)
			return -1;
		probe_copy_host(sv->host, sizeof(sv->host), s,
		    (size_t)(c1 - s));
	}
	return sv->host[0] != '\0' ? 0 : -1;
}

int
probe_config_parse(const char *text, size_t len, struct probe_ensemble *ens)
{
	const char *line = text, *end = text + len, *nl;
	size_t n;

	memset(ens, 0, sizeof(*ens));
	while (line < end) {
		nl = memchr(line, '\n', (size_t)(end - line));
		n = nl != NULL ? (size_t)(nl - line) : (size_t)(end - line);
		if (n > 0 && line[n - 1] == '\r')
			n--;
		if (n > 7 && memcmp(line, "server.", 7) == 0) {
			if (ens->n == PROBE_SERVERS_MAX) {
				ens->truncated = true;
				/* Still count the observers we do not keep. */
				if (n >= 9 && memchr(line, ';', n) == NULL &&
				    memcmp(line + n - 9, ":observer", 9) == 0)
					ens->observers++;
			} else {
				if (probe_server_line(line, n,
				    &ens->server[ens->n]) == -1)
					return -1;
				if (ens->server[ens->n].observer)
					ens->observers++;
				ens->n++;
			}
		}
		line += n + (nl != NULL ? 1 + (line[n] == '\r') : 0);
		if (nl == NULL)
			break;
	}
	return 0;
}

/* An address in its numeric form, without the port, for comparison. */
static bool
probe_addr_text(const struct sockaddr_storage *ss, char *buf, size_t len,
    int *port)
{
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET) {
		*port = ntohs(a4->sin_port);
		return inet_ntop(AF_INET, &a4->sin_addr, buf, (socklen_t)len) !=
		    NULL;
	}
	if (ss->ss_family == AF_INET6) {
		*port = ntohs(a6->sin6_port);
		return inet_ntop(AF_INET6, &a6->sin6_addr, buf,
		    (socklen_t)len) != NULL;
	}
	return false;
}

/* A host of the config in the same numeric form; false for a name. */
static bool
probe_host_numeric(const char *host, char *buf, size_t len)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (inet_pton(AF_INET, host, &a4) == 1)
		return inet_ntop(AF_INET, &a4, buf, (socklen_t)len) != NULL;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return inet_ntop(AF_INET6, &a6, buf, (socklen_t)len) != NULL;
	return false;
}

static bool
probe_wildcard(const char *host)
{
	return host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 ||
	    strcmp(host, "::") == 0;
}

/*
 * Through an observer no lease is earned (doc/design.md, "The lease"),
 * and srvr goes to the address of the client's connection, which behind
 * a proxy, a load balancer or a virtual address may reach another server
 * than the session's. So:
 *  - srvr says observer: an observer (moving on costs little);
 *  - the ensemble lists no observer: every server votes, whatever srvr
 *    says or whether it answers;
 *  - the address is a server's own client address (";host:port" in its
 *    server line): that server's role;
 *  - every server is named by a numeric address and ours is none of them:
 *    a proxy in front of an ensemble with observers, and nothing tells
 *    which server the session is on: unidentified, no lease;
 *  - otherwise srvr's answer; if it did not say, unidentified as well.
 * Without the config srvr decides, as before, but only where the server
 * answered that it has none for us (before 3.5, an ACL: `absent`). A read
 * that got no answer (the probe's session failed or timed out) or one we
 * cannot parse tells nothing of observers, and behind a proxy srvr may
 * speak for another server: unidentified, unless srvr says observer. The
 * next connection asks again.
 */
enum election_server
probe_decide(const struct probe_ensemble *ens, bool absent,
    const struct sockaddr_storage *peer, enum election_server srvr,
    char *why, size_t len)
{
	char addr[INET6_ADDRSTRLEN], host[INET6_ADDRSTRLEN];
	const struct probe_server *sv;
	bool named = false, numeric = true, same_host = false;
	int i, port = 0;

	if (srvr == SERVER_OBSERVER) {
		snprintf(why, len, "srvr says it is an observer");
		return SERVER_OBSERVER;
	}
	if (ens == NULL && !absent) {
		snprintf(why, len, "/zookeeper/config was not read: "
		    "nothing tells whether the ensemble has observers, or, "
		    "behind a proxy, which server the session is on");
		return SERVER_UNIDENTIFIED;
	}
	if (ens == NULL) {
		snprintf(why, len, "srvr%s (the server has no /zookeeper/config "
		    "for us)", srvr == SERVER_VOTING ? " says it votes" :
		    " would not say");
		return srvr;
	}
	if (ens->observers == 0) {
		snprintf(why, len, "/zookeeper/config lists no observer: every "
		    "server votes");
		return SERVER_VOTING;
	}
	if (probe_addr_text(peer, addr, sizeof(addr), &port))
		named = true;
	for (i = 0; named && i < ens->n; i++) {
		sv = &ens->server[i];
		if (sv->client_port == port && probe_host_numeric(
		    probe_wildcard(sv->client_host) ? sv->host :
		    sv->client_host, host, sizeof(host)) &&
		    strcmp(host, addr) == 0) {
			snprintf(why, len, "%s:%d is a%s's own client address in "
			    "/zookeeper/config", addr, port, sv->observer ?
			    "n observer" : " voting server");
			return sv->observer ? SERVER_OBSERVER : SERVER_VOTING;
		}
		if (!probe_host_numeric(sv->host, host, sizeof(host)))
			numeric = false;
		else if (strcmp(host, addr) == 0)
			same_host = true;
	}
	if (named && numeric && !same_host && !ens->truncated) {
		snprintf(why, len, "%s is none of the %d servers of "
		    "/zookeeper/config, which lists %d observer%s: a proxy or a "
		    "virtual address, behind which nothing tells which server "
		    "the session is on", addr, ens->n, ens->observers,
		    ens->observers == 1 ? "" : "s");
		return SERVER_UNIDENTIFIED;
	}
	if (srvr == SERVER_VOTING) {
		snprintf(why, len, "srvr says it votes (the ensemble has %d "
		    "observer%s)", ens->observers, ens->observers == 1 ? "" :
		    "s");
		return SERVER_VOTING;
	}
	snprintf(why, len, "srvr would not say, and the ensemble has %d "
	    "observer%s", ens->observers, ens->observers == 1 ? "" : "s");
	return SERVER_UNIDENTIFIED;
}

/* --- The probes --- */

/* Both probes have ended: decide, and call back from the loop (not from
 * inside a bufferevent's callback: the caller may free the probe). */
static void
probe_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct probe *p = arg;
	struct probe_ensemble *ens;
	bool absent = p->r.config_absent;

	p->r.config_fresh = p->r.config_known;
	if (!p->r.config_known && p->mem.ens_known) {
		/* Not read this time: the ensemble as last read. */
		p->ens = p->mem.ens;
		p->r.config_known = true;
		p->r.observers = p->ens.observers;
	} else if (!p->r.config_known && p->mem.absent)
		absent = true;		/* none for us, as a server said */
	ens = p->r.config_known ? &p->ens : NULL;
	p->r.server = probe_decide(ens, absent, &p->peer, p->srvr_server,
	    p->r.why, sizeof(p->r.why));
	p->cb(p->arg, &p->r);
}

static void
probe_finish(struct probe *p)
{
	if (p->srvr == NULL && p->sess == NULL)
		event_active(p->ev_done, 0, 0);
}

static void
probe_srvr_done(struct probe *p, const char *why)
{
	char text[PROBE_SRVR_MAX + 1];
	ev_ssize_t n;

	n = evbuffer_copyout(bufferevent_get_input(p->srvr), text,
	    PROBE_SRVR_MAX);
	text[n > 0 ? n : 0] = '\0';
	bufferevent_free(p->srvr);
	p->srvr = NULL;
	p->srvr_server = why == NULL ? probe_srvr_mode(text, &p->r.srvr_mode) :
	    SERVER_UNKNOWN;
	if (why != NULL || p->r.srvr_mode == NULL)
		snprintf(p->r.srvr_note, sizeof(p->r.srvr_note), "%s",
		    why != NULL ? why : "no Mode line");
	probe_finish(p);
}

static void
probe_srvr_read_cb(struct bufferevent *bev, void *arg)
{
	/* The answer ends with the connection; past the cap, it is not one. */
	if (evbuffer_get_length(bufferevent_get_input(bev)) > PROBE_SRVR_MAX)
		probe_srvr_done(arg, "answer too long");
}

static const char *
probe_event_why(short what)
{
	if (what & BEV_EVENT_EOF)
		return "the server closed the connection";
	if (what & BEV_EVENT_TIMEOUT)
		return "no answer";
	return evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR());
}

static void
probe_srvr_event_cb(struct bufferevent *bev, short what, void *arg)
{
	if (what & BEV_EVENT_CONNECTED)
		return;
	probe_srvr_done(arg, (what & BEV_EVENT_EOF) ? NULL :
	    probe_event_why(what));
}

static void
probe_sess_done(struct probe *p, const char *why)
{
	if (why != NULL && p->r.session_note[0] == '\0')
		snprintf(p->r.session_note, sizeof(p->r.session_note), "%s",
		    why);
	bufferevent_free(p->sess);
	p->sess = NULL;
	p->stage = STAGE_DONE;
	probe_finish(p);
}

/* One framed packet of the session probe. */
static void
probe_sess_packet(struct probe *p, const uint8_t *body, size_t len)
{
	const uint8_t *data;
	int32_t xid, err, dlen;
	int t;

	switch (p->stage) {
	case STAGE_CONNECT:
		if ((t = probe_connect_timeout(body, len)) == -1) {
			probe_sess_done(p, "not a ZooKeeper connect answer");
			return;
		}
		p->r.min_timeout_ms = t;
		p->stage = STAGE_GET;	/* sent with the connect request */
		return;
	case STAGE_GET:
		if (probe_reply(body, len, &xid, &err, &data, &dlen) == -1 ||
		    xid != PROBE_XID_GET) {
			probe_sess_done(p, "not an answer to getData");
			return;
		}
		if (err != 0) {
			/* None for us, for good: ZNONODE before 3.5, ZNOAUTH
			 * under an ACL, a session refused without SASL. Any
			 * other error (a throttle, a timeout) is no answer. */
			p->r.config_absent = err == PROBE_ZNONODE ||
			    err == PROBE_ZNOAUTH || err == PROBE_ZNEEDSASL;
			snprintf(p->r.session_note, sizeof(p->r.session_note),
			    "/zookeeper/config: error %d", (int)err);
		} else if (probe_config_parse((const char *)data,
		    dlen > 0 ? (size_t)dlen : 0, &p->ens) == -1)
			snprintf(p->r.session_note, sizeof(p->r.session_note),
			    "/zookeeper/config: a server line we cannot read");
		else {
			p->r.config_known = true;
			p->r.observers = p->ens.observers;
		}
		p->stage = STAGE_CLOSE;	/* sent with the connect request */
		return;
	case STAGE_CLOSE:
		probe_sess_done(p, NULL);	/* closed: done */
		return;
	case STAGE_DONE:
		return;
	}
}

static void
probe_sess_read_cb(struct bufferevent *bev, void *arg)
{
	struct probe *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[4], *body;
	uint32_t n;

	while (p->sess != NULL && evbuffer_copyout(in, hdr, 4) == 4) {
		n = probe_get32(hdr);
		if (n > PROBE_PACKET_MAX) {
			probe_sess_done(p, "answer too long");
			return;
		}
		if (evbuffer_get_length(in) < 4 + (size_t)n)
			return;
		evbuffer_drain(in, 4);
		body = evbuffer_pullup(in, (ev_ssize_t)n);
		probe_sess_packet(p, body, n);
		if (p->sess != NULL)
			evbuffer_drain(in, n);
	}
}

static void
probe_sess_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct probe *p = arg;

	if (what & BEV_EVENT_CONNECTED)
		return;
	/* After our closeSession was sent, the server's close ends it. */
	probe_sess_done(p, p->stage == STAGE_CLOSE && (what & BEV_EVENT_EOF) ?
	    NULL : probe_event_why(what));
}

static struct bufferevent *
probe_connect(struct event_base *base, const struct sockaddr_storage *peer,
    socklen_t len, int timeout_ms, bufferevent_data_cb rd,
    bufferevent_event_cb ev, void *arg, const void *first, size_t n)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	struct bufferevent *bev;

	bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		return NULL;
	bufferevent_setcb(bev, rd, NULL, ev, arg);
	bufferevent_set_timeouts(bev, &tv, &tv);
	bufferevent_enable(bev, EV_READ);
	evbuffer_add(bufferevent_get_output(bev), first, n);
	if (bufferevent_socket_connect(bev, (const struct sockaddr *)peer,
	    (int)len) == -1) {
		bufferevent_free(bev);
		return NULL;
	}
	return bev;
}

struct probe *
probe_start(struct event_base *base, const struct sockaddr_storage *peer,
    socklen_t len, int timeout_ms, const struct probe_memory *mem,
    probe_cb cb, void *arg)
{
	struct probe *p = calloc(1, sizeof(*p));
	uint8_t req[160];	/* connect 49, getData 38, close 12 */
	size_t n;

	if (p == NULL)
		return NULL;
	p->cb = cb;
	p->arg = arg;
	if (mem != NULL)
		p->mem = *mem;
	memcpy(&p->peer, peer, sizeof(p->peer));
	if ((p->ev_done = event_new(base, -1, 0, probe_done_cb, p)) == NULL) {
		free(p);
		return NULL;
	}
	p->srvr = probe_connect(base, peer, len, timeout_ms, probe_srvr_read_cb,
	    probe_srvr_event_cb, p, "srvr", 4);
	/*
	 * The three requests go at once: the server reads nothing after a
	 * connect request until the session is made, then answers in order.
	 * So the read takes one round trip, and a session of a 400 ms
	 * timeout outlives it over a link whose round trips are longer
	 * (sent one by one, the getData came after the session expired).
	 */
	n = probe_connect_request(req, 1);
	n += probe_get_request(req + n, sizeof(req) - n, PROBE_XID_GET,
	    PROBE_CONFIG_NODE);
	n += probe_close_request(req + n, PROBE_XID_CLOSE);
	p->sess = probe_connect(base, peer, len, timeout_ms, probe_sess_read_cb,
	    probe_sess_event_cb, p, req, n);
	if (p->srvr == NULL || p->sess == NULL) {
		probe_free(p);
		return NULL;
	}
	return p;
}

void
probe_free(struct probe *p)
{
	if (p == NULL)
		return;
	if (p->srvr != NULL)
		bufferevent_free(p->srvr);
	if (p->sess != NULL)
		bufferevent_free(p->sess);
	event_free(p->ev_done);
	free(p);
}

void
probe_remember(struct probe_memory *mem, const struct probe *p,
    const struct probe_result *r)
{
	if (r->config_fresh) {
		mem->ens = p->ens;
		mem->ens_known = true;
	}
	if (r->config_absent)
		mem->absent = true;
}

bool
probe_has_fd(const struct probe *p, int fd)
{
	return p != NULL && ((p->srvr != NULL && bufferevent_getfd(p->srvr) ==
	    fd) || (p->sess != NULL && bufferevent_getfd(p->sess) == fd));
}
