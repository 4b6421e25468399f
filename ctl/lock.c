/* SPDX-License-Identifier: MIT */
/*
 * zkelectctl lock and elect: a leader in one line, with no configuration
 * file and no agent started beforehand. Both exec zkelectd with its
 * configuration as flags (zkelectd(8)), so the election, the lease, the
 * supervised child and the audit lines are the agent's own:
 *
 *   lock PATH -- CMD [ARGS...]   zkelectd ... --run-exit stop
 *                                --run-output inherit -- CMD ARGS...
 *   elect PATH [ID]              the same with "zkelectctl hold" as CMD
 *   hold                         prints $ZKELECT_EPOCH, waits for SIGTERM
 *
 * zkelectd is $ZKELECTD, else the one next to this zkelectctl (or in the
 * build tree's agent/ beside ctl/), else the first in PATH.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ctl.h"

#define LOCK_ARGS_MAX	32	/* zkelectd's own, before the command */

static void
lock_usage(FILE *f, const char *verb)
{
	if (strcmp(verb, "elect") == 0)
		fprintf(f, "usage: zkelectctl elect [--zookeeper SERVERS] "
		    "[--session-timeout D] [--tick-time D]\n"
		    "                        [--log-level LEVEL] [-v] PATH [ID]\n");
	else
		fprintf(f, "usage: zkelectctl lock [--zookeeper SERVERS] [--id ID] "
		    "[--session-timeout D]\n"
		    "                       [--tick-time D] [--log-level LEVEL] [-v] "
		    "PATH -- CMD [ARGS...]\n");
	fprintf(f, "  SERVERS defaults to $ZKELECT_ZOOKEEPER; see zkelectctl(1)\n");
}

/* The directory of this program, from /proc/self/exe; "" if unknown. */
static void
lock_self_dir(char *buf, size_t len)
{
	char exe[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	buf[0] = '\0';
	if (n <= 0)
		return;
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) != NULL) {
		*slash = '\0';
		snprintf(buf, len, "%s", exe);
	}
}

/* Runs zkelectd with ARGV (argv[0] is replaced); returns only on failure. */
static int
lock_exec(const char *verb, const char *argv[])
{
	char *const *av = (char *const *)(uintptr_t)argv;
	const char *env = getenv("ZKELECTD");
	char dir[PATH_MAX], path[PATH_MAX + 32];
	int err;

	if (env != NULL && env[0] != '\0') {
		argv[0] = env;
		execv(env, av);
		fprintf(stderr, "zkelectctl: %s: cannot run $ZKELECTD (%s): %s\n",
		    verb, env, strerror(errno));
		return EXIT_AGENT;
	}
	lock_self_dir(dir, sizeof(dir));
	if (dir[0] != '\0') {
		snprintf(path, sizeof(path), "%s/zkelectd", dir);
		if (access(path, X_OK) == 0) {
			argv[0] = path;
			execv(path, av);
		}
		snprintf(path, sizeof(path), "%s/../agent/zkelectd", dir);
		if (access(path, X_OK) == 0) {
			argv[0] = path;
			execv(path, av);
		}
	}
	argv[0] = "zkelectd";
	execvp("zkelectd", av);
	err = errno;
	fprintf(stderr, "zkelectctl: %s: cannot run zkelectd (not $ZKELECTD, "
	    "not beside %s, not in PATH): %s\n", verb, dir[0] != '\0' ? dir :
	    "zkelectctl", strerror(err));
	return EXIT_AGENT;
}

/*
 * lock and elect: the options, then PATH and, for lock, "--" and the
 * command, for elect an optional ID; then exec zkelectd.
 */
int
lock_cmd(const char *verb, int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "zookeeper", required_argument, NULL, 'z' },
		{ "id", required_argument, NULL, 'i' },
		{ "session-timeout", required_argument, NULL, 't' },
		{ "tick-time", required_argument, NULL, 'k' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 } };
	const char *servers = getenv("ZKELECT_ZOOKEEPER"), *id = NULL,
	    *timeout = NULL, *tick = NULL, *level = "warn", *path;
	const char *args[LOCK_ARGS_MAX + 1];
	char self[PATH_MAX + 32], dir[PATH_MAX];
	char *const *cmd;
	bool elect = strcmp(verb, "elect") == 0;
	int ch, n = 0, ncmd = 0, i;

	/* "+": the command's own options are its own. */
	while ((ch = getopt_long(argc, argv, elect ? "+v" : "+v", opts,
	    NULL)) != -1) {
		switch (ch) {
		case 'z': servers = optarg; break;
		case 'i':
			if (elect) {
				fprintf(stderr, "zkelectctl: elect: the id is "
				    "the argument after PATH\n");
				lock_usage(stderr, verb);
				return EXIT_USAGE;
			}
			id = optarg;
			break;
		case 't': timeout = optarg; break;
		case 'k': tick = optarg; break;
		case 'l': level = optarg; break;
		case 'v': level = "info"; break;
		default:
			lock_usage(stderr, verb);
			return EXIT_USAGE;
		}
	}
	if (servers == NULL || servers[0] == '\0') {
		fprintf(stderr, "zkelectctl: %s: say which ZooKeeper: --zookeeper "
		    "HOST:PORT[,HOST:PORT...] (or $ZKELECT_ZOOKEEPER)\n", verb);
		lock_usage(stderr, verb);
		return EXIT_USAGE;
	}
	if (optind >= argc || strcmp(argv[optind], "--") == 0) {
		fprintf(stderr, "zkelectctl: %s: no election PATH\n", verb);
		lock_usage(stderr, verb);
		return EXIT_USAGE;
	}
	path = argv[optind++];
	if (elect) {
		if (optind < argc)
			id = argv[optind++];
		if (optind < argc) {
			fprintf(stderr, "zkelectctl: elect: unexpected argument "
			    "'%s'\n", argv[optind]);
			lock_usage(stderr, verb);
			return EXIT_USAGE;
		}
	} else {
		if (optind >= argc || strcmp(argv[optind], "--") != 0) {
			fprintf(stderr, "zkelectctl: lock: %s (use: zkelectctl "
			    "lock PATH -- CMD [ARGS...])\n", optind < argc ?
			    "the command goes after --" : "no command");
			lock_usage(stderr, verb);
			return EXIT_USAGE;
		}
		optind++;
		if (optind >= argc) {
			fprintf(stderr, "zkelectctl: lock: no command after --\n");
			lock_usage(stderr, verb);
			return EXIT_USAGE;
		}
	}
	cmd = &argv[optind];
	ncmd = argc - optind;

	args[n++] = "zkelectd";
	args[n++] = "--zookeeper";
	args[n++] = servers;
	args[n++] = "--path";
	args[n++] = path;
	if (id != NULL) {
		args[n++] = "--id";
		args[n++] = id;
	}
	if (timeout != NULL) {
		args[n++] = "--session-timeout";
		args[n++] = timeout;
	}
	if (tick != NULL) {
		args[n++] = "--tick-time";
		args[n++] = tick;
	}
	args[n++] = "--log-level";
	args[n++] = level;
	args[n++] = "--run-exit";
	args[n++] = "stop";
	args[n++] = "--run-output";
	args[n++] = "inherit";
	args[n++] = "--";
	args[n] = NULL;
	{
		const char **all = calloc((size_t)(n + ncmd + 3), sizeof(*all));

		if (all == NULL)
			abort();
		memcpy(all, args, (size_t)n * sizeof(*all));
		if (elect) {
			/* The holder is this very program. */
			lock_self_dir(dir, sizeof(dir));
			if (dir[0] == '\0') {
				fprintf(stderr, "zkelectctl: elect: cannot find "
				    "zkelectctl itself (/proc/self/exe)\n");
				free(all);
				return EXIT_AGENT;
			}
			snprintf(self, sizeof(self), "%s/zkelectctl", dir);
			all[n++] = self;
			all[n++] = "hold";
		} else
			for (i = 0; i < ncmd; i++)
				all[n++] = cmd[i];
		all[n] = NULL;
		fflush(NULL);
		i = lock_exec(verb, all);
		free(all);
		return i;
	}
}

/*
 * hold: what elect runs under the agent. Prints the epoch it leads under
 * ($ZKELECT_EPOCH) on a line of its own, then waits; SIGTERM (the agent
 * stops it: a stop, or the term's end), SIGINT or SIGHUP end it with 0.
 */
int
hold_cmd(int argc, char *argv[])
{
	const char *epoch = getenv("ZKELECT_EPOCH");
	sigset_t set;
	int sig;

	if (argc > 1) {
		fprintf(stderr, "zkelectctl: hold: unexpected argument '%s'\n",
		    argv[1]);
		return EXIT_USAGE;
	}
	if (epoch == NULL || epoch[0] == '\0') {
		fprintf(stderr, "zkelectctl: hold: no $ZKELECT_EPOCH: hold is what "
		    "zkelectd runs for zkelectctl elect while it leads\n");
		return EXIT_USAGE;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	printf("%s\n", epoch);
	if (fflush(stdout) == EOF)
		return EXIT_AGENT;
	while (sigwait(&set, &sig) != 0)
		;
	return 0;
}
