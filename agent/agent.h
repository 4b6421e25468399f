/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_AGENT_H
#define ZKELECT_AGENT_H

/*
 * The one struct agent, owned by main() and passed to every callback. It
 * lives on the main thread; only the libevent loop touches it.
 *
 * Error contract for every module: functions return 0 on success and -1 on
 * failure, having logged why; fatal()/fatalx() only at start-up.
 */

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "election.h"

struct event_base;
struct event;
struct zk;
struct api;
struct notify;
struct watchdog;

#define AGENT_REASONS_MAX	32
/* A graceful stop with partitions waits this long for successors. */
#define AGENT_PARTS_STOP_WAIT_MS 5000

/*
 * One election the driver runs: the single one at election.path, or a
 * partition's at election.path/partitions/NAME (doc/design.md, "Partitions").
 */
struct part {
	const char	*name;		/* NULL: the single election */
	char		*path;		/* its election node */
	char		*prefix;	/* path "/_c_" */
	struct election	*e;		/* agent->election, or &own */
	struct election	 own;
	bool		 assigned;	/* ours per the last member listing */
	bool		 owned;		/* leading, as last counted */
	char		 leader[ELECTION_ID_MAX]; /* the last leader seen
					 * ("": none yet) */
};

/* The members of a partitioned agent, as the last listing said. */
struct agent_members {
	int		 count;		/* live members, 0 = not listed yet */
	int		 assigned;	/* partitions assigned to us */
	int		 owned;		/* partitions we lead */
	uint64_t	 ownership_changes;
	uint64_t	 rebalance_started;	/* 0 = settled */
	uint64_t	 rebalance_ms;	/* how long the last one took */
	uint64_t	 index;		/* moves with any partition's report */
};

struct agent_transition_count {
	int		 to;			/* enum election_role */
	const char	*reason;		/* a string constant of election.c */
	uint64_t	 count;
};

struct agent_stats {
	uint64_t	 transitions;		/* role changes */
	struct agent_transition_count by_reason[AGENT_REASONS_MAX];
	uint64_t	 role_since;		/* ms, when the role last changed */
	uint64_t	 api_requests;
	uint64_t	 api_rejected;		/* connections over the cap */
};

struct agent {
	struct config		*conf;
	struct event_base	*base;
	struct election		 election;
	struct part		*parts;		/* partitions: NULL = none */
	int			 nparts;
	struct agent_members	 members;
	struct zk		*zk;
	struct api		*api;
	struct notify		*notify;
	struct event		*ev_sigterm, *ev_sigint, *ev_sighup;
	struct event		*ev_watchdog;	/* the loop's heartbeat */
	struct watchdog		*watchdog;	/* watchdog.c: kills a stalled loop */
	bool			 sd_watchdog;	/* systemd asked for pings */
	uint32_t		 sd_watchdog_ms; /* the interval we last set: T */
	struct event		*ev_stop_timeout;
	struct agent_stats	 stats;
	uint64_t		 started;	/* ms, clock_now_ms */
	bool			 stop_now;	/* second signal, or the stop timed out */
	int			 exit_code;
};

/* zk.c: the driver that turns election actions into ZooKeeper calls. */
struct zk *zk_open(struct agent *agent);
void zk_close(struct zk *zk);
/* Feeds one event to the election and performs the resulting actions. */
void zk_feed(struct zk *zk, struct election_event *ev);
/* Tells the election (from the loop) that the app has been told of a loss. */
void zk_notified(struct zk *zk, uint64_t told);
/* The same for one partition's election. */
void zk_part_notified(struct zk *zk, struct part *pt, uint64_t told);
/* Feeds one event to one partition's election. */
void zk_feed_part(struct zk *zk, struct part *pt, struct election_event *ev);
/* Partitions: a graceful stop (delete the member node, hand over, stop). */
void zk_parts_stop(struct zk *zk);
/* The election that speaks for the session (the single one, or the first
 * partition's). */
struct election *zk_session_election(struct agent *agent);
/* The ZooKeeper client's last complaint ("" if none since the handle opened). */
void zk_last_error(char *buf, size_t len);

/* api.c: the local HTTP API on the Unix socket and the TCP listener. */
struct api *api_open(struct agent *agent);
void api_close(struct api *api);
/* Called after every election step whose report changed (long polls). */
void api_changed(struct api *api);

/* main.c */
/* The status report changed: wake long polls, update systemd's STATUS. */
void agent_changed(struct agent *agent);
/* The election told us our role changed: log it once, tell the app. */
void agent_notify(struct agent *agent, const struct election_action *a);
/* The same for a partition's election. */
void agent_notify_part(struct agent *agent, struct part *pt,
    const struct election_action *a);
/* A partition's report changed (long polls on /v1/partitions). */
void agent_parts_changed(struct agent *agent);

#endif
