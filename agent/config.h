/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_CONFIG_H
#define ZKELECT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h"

/*
 * ZooKeeper paths the agent builds (election path + "/" + contender name)
 * must fit this many bytes with their NUL; config refuses longer paths.
 */
#define CONFIG_ZK_PATH_MAX	1024
#define CONFIG_NODE_NAME_LEN	56	/* "_c_" uuid(36) "-latch-" 10 digits */
#define CONFIG_VALUE_MAX	1024	/* election.value, bytes */
#define CONFIG_PARTITIONS_MAX	4096	/* partitions.count, or names */
#define CONFIG_PARTITION_NAME_MAX 64	/* bytes of a partition name */
/* What partitions add to election.path: "/partitions/" NAME "/". */
#define CONFIG_PARTITION_PATH_LEN (12 + CONFIG_PARTITION_NAME_MAX + 1)

/* A NULL-terminated argv list from the config; NULL when the key is absent. */
typedef char **config_argv;

struct config {
	char		*file;			/* path the config was read from;
						 * NULL: from flags */

	/* zookeeper: */
	char		*zk_servers;		/* "h:p,h:p/chroot"; required */
	uint64_t	 zk_session_timeout_ms;	/* requested; default 6000 */
	uint64_t	 zk_tick_ms;	/* the servers' tickTime; 0 = not known */
	char		*zk_auth_scheme;	/* NULL when no auth */
	char		*zk_auth_credentials;

	/* election: */
	char		*election_path;		/* required, absolute, no trailing '/' */
	char		*election_id;		/* default hostname:pid */
	bool		 election_candidate;	/* default true */
	bool		 election_step_down;	/* disconnect: step_down (default hold_lease) */
	char		*election_value;	/* published with leadership; NULL = none */

	/* partitions: (doc/design.md "Partitions"); npartitions 0 = no
	 * block, one election at election.path as always */
	char		**partitions;		/* names, in the config's order */
	int		 npartitions;

	/* api: */
	char		*api_socket;		/* default /run/zkelect/zkelect.sock */
	unsigned	 api_socket_mode;	/* default 0660 */
	char		*api_listen;		/* "127.0.0.1:8471"; NULL = off */
	bool		 api_tcp_resign;	/* allow POST /v1/resign on TCP; default false */

	/* notify: */
	config_argv	 notify_on_leader;
	config_argv	 notify_on_follower;
	uint64_t	 notify_hook_timeout_ms; /* default 10000 */
	char		*notify_pidfile;
	int		 notify_leader_signal;	/* 0 = none */
	int		 notify_follower_signal;
	config_argv	 notify_run;
	bool		 notify_run_exit_stop;	/* run_exit: stop (default restart) */
	bool		 notify_run_inherit;	/* run_output: inherit (default log) */
	config_argv	 notify_on_leader_change; /* followers: the leader changed */
	bool		 notify_resign_on_failure; /* on_leader_failure: resign (default keep) */

	/* log: */
	enum log_level	 log_level;		/* default info */
	enum log_format	 log_format;		/* default text */
};

/*
 * Reads and validates FILE. On success returns a config (free with
 * config_free). On failure prints every problem to ERRS as
 * "FILE:LINE:COL: message", one per line, and returns NULL.
 */
struct config *config_load(const char *file, FILE *errs);
void config_free(struct config *conf);

/* One setting given on a command line instead of in a file. */
struct config_flag {
	const char	*flag;		/* as the user wrote it: "--path" */
	const char	*key;		/* the file's key: "election.path" */
	const char	*value;		/* a scalar key's text */
	char *const	*argv;		/* an argv key's list (value NULL) */
};

/*
 * A configuration from settings alone (zkelectd's and zkelectctl's
 * flags): the keys, defaults and checks of config_load, each problem
 * printed to ERRS as "PROG: FLAG: message", one per line. An argv key's
 * command is looked up as a shell would (PATH, or from the working
 * directory) and stored as an absolute path. conf->file is NULL.
 */
struct config *config_from_flags(const char *prog,
    const struct config_flag *flags, int n, FILE *errs);

/*
 * Parses a duration such as "500ms", "6s", "2m", "1h" (also "1.5s") into
 * milliseconds. Returns 0, or -1 when the text is not a duration.
 */
int config_parse_duration(const char *text, uint64_t *ms);

/* Parses "SIGUSR1", "USR1" or a number into a signal; -1 when unknown. */
int config_parse_signal(const char *text);

/* The configuration zkelectd and zkelectctl read when given none (and no
 * $ZKELECT_CONFIG): where the package installs it. */
#define CONFIG_DEFAULT_FILE	"/etc/zkelect/zkelect.yaml"
/* api.socket when not set, and the socket zkelectctl asks by default. */
#define CONFIG_DEFAULT_SOCKET	"/run/zkelect/zkelect.sock"

/*
 * A script's #! interpreter, checked as the kernel will need it: -1 with
 * why ("its interpreter '/usr/bin/nope' (its #! line): No such file or
 * directory") when it is missing or cannot run, else 0 (also for files
 * without a #! line, or that cannot be read).
 */
int config_check_interpreter(const char *path, char *why, size_t len);

#endif
