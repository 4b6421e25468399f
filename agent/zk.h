/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_ZK_H
#define ZKELECT_ZK_H

/*
 * zk.c: the driver that turns election actions into ZooKeeper calls. It
 * reports upward only through the callbacks it is opened with (main.c
 * wires them; doc/design.md, "Architecture").
 */

#include <stddef.h>
#include <stdint.h>

struct agent;
struct election_action;
struct part;
struct zk;

struct zk_cb {
	/* A part's report changed (PT), or the members or the assignment
	 * did (PT NULL). */
	void	(*changed)(void *arg, struct part *pt);
	/* A part's role changed: log it, tell the app. */
	void	(*notify)(void *arg, struct part *pt,
		    const struct election_action *a);
	/* The loop runs (a tick, answers to apply): feed the watchdogs. */
	void	(*beat)(void *arg);
	void	*arg;
};

/* Opens the driver of agent->fleet: connects, and runs from the loop. */
struct zk *zk_open(struct agent *agent, const struct zk_cb *cb);
void zk_close(struct zk *zk);
/* The app has been told of part pt's losses up to told (from the loop). */
void zk_notified(struct zk *zk, struct part *pt, uint64_t told);
/* A resign of part pt's term, staying out hold_ms. */
void zk_resign(struct zk *zk, struct part *pt, uint64_t hold_ms);
/* A drain (true) or undrain of a partitioned agent. */
void zk_drain(struct zk *zk, bool drain);
/* A graceful stop (rule 10; with partitions, doc/design.md "Partitions"). */
void zk_stop(struct zk *zk);
/* The ZooKeeper client's last complaint ("" if none since the handle opened). */
void zk_last_error(char *buf, size_t len);

#endif
