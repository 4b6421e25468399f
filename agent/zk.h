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
struct election;
struct election_action;
struct election_event;
struct part;
struct zk;

struct zk_cb {
	/* The single election's report changed. */
	void	(*changed)(void *arg);
	/* The single election's role changed: log it, tell the app. */
	void	(*notify)(void *arg, const struct election_action *a);
	/* The same for a partition's election. */
	void	(*notify_part)(void *arg, struct part *pt,
		    const struct election_action *a);
	/* A partition's report changed (PT), or the member listing did
	 * (PT is NULL). */
	void	(*parts_changed)(void *arg, struct part *pt);
	void	*arg;
};

struct zk *zk_open(struct agent *agent, const struct zk_cb *cb);
void zk_close(struct zk *zk);
/* Feeds one event to the election (with partitions, to every partition's)
 * and performs the resulting actions. */
void zk_feed(struct zk *zk, struct election_event *ev);
/* Tells the election (from the loop) that the app has been told of the
 * losses up to told. */
void zk_notified(struct zk *zk, uint64_t told);
/* The same for one partition's election. */
void zk_part_notified(struct zk *zk, struct part *pt, uint64_t told);
/* Partitions: a graceful stop (delete the member node, hand over, stop). */
void zk_parts_stop(struct zk *zk);
/* The election that speaks for the session (the single one, or the first
 * partition's). */
struct election *zk_session_election(struct agent *agent);
/* The ZooKeeper client's last complaint ("" if none since the handle opened). */
void zk_last_error(char *buf, size_t len);

#endif
