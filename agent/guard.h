/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_GUARD_H
#define ZKELECT_GUARD_H

#include <sys/types.h>

#define GUARD_SEARCH_PATH	0x1	/* look argv[0] up in PATH (execvpe) */
#define GUARD_CAPTURE		0x2	/* the command's stdout and stderr to g->out */

/*
 * A command started under a guard process. The guard is our child; the
 * command is the guard's. The guard exits with the command's status (or is
 * killed by the signal that killed it) once the command and everything it
 * started are gone.
 */
struct guard {
	pid_t	 pid;		/* the guard */
	int	 ctl;		/* commands to the guard; its report comes back here */
	int	 out;		/* read end of the command's output, or -1 */
};

/*
 * Starts ARGV with environment ENVP (NULL: ours) under a new guard. The
 * command gets /dev/null as stdin and, with GUARD_CAPTURE, a pipe as stdout
 * and stderr; it inherits no other descriptor, no signal handler and no
 * blocked signal. Returns 0, or -1 with errno set. ctl and out are
 * non-blocking and close-on-exec.
 */
int guard_spawn(struct guard *g, char *const argv[], char *const envp[],
    int flags);

/*
 * Reads the guard's report: the command's pid, and 0 or the errno of a
 * failed exec. Returns 1 when read, 0 when not there yet, -1 when the guard
 * is gone without one.
 */
int guard_report(struct guard *g, pid_t *pid, int *err);

/* SIGTERM to the command's process group. */
void guard_term(const struct guard *g);

/* SIGKILL to the whole tree: the group and whatever left it. */
void guard_kill(const struct guard *g);

/* Closes our descriptors (once the guard has been reaped). */
void guard_release(struct guard *g);
/*
 * Called first thing in main(): notes where the process's argv and
 * environment strings lie, so that a guard can show itself in ps as
 * "zkelect-guard COMMAND" rather than as a copy of its starter.
 */
void guard_set_title_area(int argc, char *argv[]);

#endif
