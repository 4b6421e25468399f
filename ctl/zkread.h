/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_ZKREAD_H
#define ZKELECT_ZKREAD_H

/*
 * A short, read-only ZooKeeper session for the zkelectctl commands that
 * read an election themselves (members, partitions with -c, --zookeeper or
 * --cluster): the configuration the command line chose, a session
 * connected, authenticated and synced within a deadline, and asynchronous
 * reads pipelined on it. Every function that fails has said why on stderr
 * as "zkelectctl: CMD: ...", once.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

struct config;

struct zkread {
	zhandle_t		*zh;
	const struct config	*conf;
	const char		*cmd;		/* "members": for messages */
	const char		*source;	/* the file, or "the command line" */
	uint64_t		 timeout_ms;
	struct timespec		 deadline;	/* CLOCK_MONOTONIC */

	/* Shared with ZooKeeper's threads. */
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;
	int			 state;		/* last session state */
	int			 pending;	/* async calls not answered yet */
	int			 rc;		/* the last one's result */
};

/*
 * The configuration a command reads with: with SERVERS (--zookeeper, or
 * $ZKELECT_ZOOKEEPER when a PATH is given and no file was), SERVERS and the
 * one argument PATH, checked as the file's keys are; else FILE (NULL:
 * $ZKELECT_CONFIG, else the agent's default file), and no argument.
 * ARGS are the NARGS words left after the options. Returns it (free with
 * config_free) and sets *source, or NULL after saying why (a usage or
 * configuration error).
 */
struct config *zkread_config(const char *cmd, const char *file,
    const char *servers, int nargs, char *const *args, const char **source,
    void (*usage)(FILE *));

/*
 * Connects with CONF, adds its credentials and syncs PATH's server with the
 * ensemble, all within timeout_ms (which bounds every later wait too).
 * Returns 0, or -1 after saying why (zkread_close all the same).
 */
int zkread_open(struct zkread *r, const char *cmd, const struct config *conf,
    const char *source, uint64_t timeout_ms);
void zkread_close(struct zkread *r);

/* One more async call out; its completion calls zkread_done. */
void zkread_begin(struct zkread *r);
void zkread_done(struct zkread *r, int rc);

/* Waits until no async call is out; 0, or -1 on the deadline or a lost
 * session (said here). */
int zkread_wait(struct zkread *r);

/* Is PATH a partitioned election? 1 yes, 0 no, or a ZooKeeper error. */
int zkread_partitioned(struct zkread *r, const char *path);

/* The election path does not exist: says what does, from the chroot down. */
void zkread_say_missing(struct zkread *r);

/* The sequence number of a member node's name (m-NNNNNNNNNN), or -1. */
int64_t zkread_member_seq(const char *name);

#endif
