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
#include "fleet.h"

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
	struct fleet		 fleet;		/* the session and its elections:
						   zk.c steps it, others read it */
	struct zk		*zk;
	struct api		*api;
	struct notify		*notify;
	struct event		*ev_sigterm, *ev_sigint, *ev_sighup;
	struct event		*ev_watchdog;	/* the loop's heartbeat */
	struct watchdog		*watchdog;	/* watchdog.c: kills a stalled loop */
	bool			 sd_watchdog;	/* systemd asked for pings */
	uint32_t		 sd_watchdog_ms; /* the interval we last set: T */
	uint64_t		 sd_pinged;	/* ms: its last ping */
	char			 sd_status[512]; /* the STATUS= we last sent */
	struct event		*ev_stop_timeout;
	struct agent_stats	 stats;
	uint64_t		 started;	/* ms, clock_now_ms */
	bool			 stopping;	/* a graceful stop is under way */
	bool			 stop_now;	/* second signal, or the stop timed out */
	int			 exit_code;
	bool		 run_exit_decided; /* notify.run_exit: stop: the first
					   command's end decided exit_code */
};

#endif
