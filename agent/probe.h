/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_PROBE_H
#define ZKELECT_PROBE_H

/*
 * probe.c: what the server a new connection reached is, and what the
 * ensemble is, learned beside the session (doc/design.md, "The lease"):
 *  - srvr, a four-letter word: the server's Mode;
 *  - a session of its own asking for a timeout of 1 ms, which the server
 *    raises to its minSessionTimeout (half of it bounds tickTime), in
 *    which it reads /zookeeper/config (the ensemble's servers, observers
 *    among them) and which it then closes.
 * The parsing and the decision are pure functions, tested on their own.
 */

#include <sys/socket.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "election.h"

struct event_base;
struct probe;

#define PROBE_SERVERS_MAX	64
#define PROBE_HOST_MAX		64

/* One server line of /zookeeper/config. */
struct probe_server {
	bool	 observer;
	char	 host[PROBE_HOST_MAX];		/* the quorum address's host */
	char	 client_host[PROBE_HOST_MAX];	/* "" when no ";client" part */
	int	 client_port;			/* 0: none given */
};

/* The ensemble as /zookeeper/config describes it. */
struct probe_ensemble {
	int	 n;				/* 0: standalone (empty config) */
	int	 observers;
	bool	 truncated;			/* more lines than we keep */
	struct probe_server server[PROBE_SERVERS_MAX];
};

/* What this agent's earlier probes learned of the ensemble: a probe whose
 * own read gets no answer decides with it. */
struct probe_memory {
	bool	 ens_known;		/* a probe read /zookeeper/config: */
	struct probe_ensemble ens;	/* ... the last ensemble read */
	bool	 absent;		/* a server answered that it has none
					   for us (before 3.5, an ACL) */
};

/* What a probe learned, for EV_SERVER and the log. */
struct probe_result {
	enum election_server server;
	int	 min_timeout_ms;	/* the server's minSessionTimeout; 0 = not
					   learned (the note says why) */
	bool	 config_known;		/* /zookeeper/config was read */
	bool	 config_fresh;		/* ... by this probe (else the last
					   read, given to probe_start) */
	bool	 config_absent;		/* this probe's read was answered:
					   none for us */
	int	 observers;		/* ... and lists this many observers */
	const char *srvr_mode;		/* "leader", ..., or NULL */
	char	 srvr_note[128];	/* why srvr did not say, or "" */
	char	 session_note[128];	/* why the limits were not learned, or "" */
	char	 why[256];		/* how the server kind was decided */
};

typedef void (*probe_cb)(void *arg, const struct probe_result *r);

/*
 * Starts both probes to PEER (the address of the client's connection);
 * CB is called once, from the loop, when both have ended (each within
 * timeout_ms). MEM is what earlier probes learned, decided with if this
 * one's read gets no answer. Returns NULL (and calls nothing) if it
 * cannot start.
 */
struct probe *probe_start(struct event_base *base,
    const struct sockaddr_storage *peer, socklen_t len, int timeout_ms,
    const struct probe_memory *mem, probe_cb cb, void *arg);
/* Records what r (a probe's result, in its callback) learned in mem. */
void	probe_remember(struct probe_memory *mem, const struct probe *p,
	    const struct probe_result *r);
/* Stops a probe; its callback is not called. */
void	probe_free(struct probe *p);
/* Whether fd is one of the probe's connections (p may be NULL). */
bool	probe_has_fd(const struct probe *p, int fd);

/* --- Pure parts, for the unit tests. --- */

/* srvr's answer: SERVER_VOTING or SERVER_OBSERVER by its Mode line, or
 * SERVER_UNKNOWN (*mode NULL) without one. */
enum election_server probe_srvr_mode(const char *text, const char **mode);

/* The ConnectRequest of a session that asks for timeout_ms, framed (with
 * its length); returns its size (out must hold 49 bytes). */
size_t	probe_connect_request(uint8_t *out, int timeout_ms);
/* The timeout a framed ConnectResponse's body grants, or -1 if it is not
 * one. */
int	probe_connect_timeout(const uint8_t *body, size_t len);
/* A framed getData (no watch) of path with this xid; returns its size, or
 * 0 if out (of size len) is too small. */
size_t	probe_get_request(uint8_t *out, size_t len, int32_t xid,
	    const char *path);
/* A framed closeSession with this xid (12 bytes). */
size_t	probe_close_request(uint8_t *out, int32_t xid);
/* A reply's body: its xid and error; for a getData, its data (pointing
 * into body, *datalen -1 for none). Returns 0, or -1 if it is cut short. */
int	probe_reply(const uint8_t *body, size_t len, int32_t *xid, int32_t *err,
	    const uint8_t **data, int32_t *datalen);

/* /zookeeper/config's text: its server lines. Returns 0, or -1 if a
 * server line cannot be read. */
int	probe_config_parse(const char *text, size_t len,
	    struct probe_ensemble *ens);

/*
 * What the server behind PEER is, from srvr's answer and the ensemble's
 * config (NULL: not read; absent: a server answered that it has none for
 * us, rather than not at all). why (of size len) says how it was decided.
 */
enum election_server probe_decide(const struct probe_ensemble *ens,
	    bool absent, const struct sockaddr_storage *peer,
	    enum election_server srvr, char *why, size_t len);

#endif
