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
/* notify.run_exit: stop: the exit status when leadership ended while the
 * command ran (EX_TEMPFAIL of sysexits.h: the lock was lost, try again). */
#define AGENT_EXIT_LOST		75
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
	enum election_reason reason;		/* REASON_NONE: a free slot */
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

#endif
