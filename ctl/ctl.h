/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_CTL_H
#define ZKELECT_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* zkelectctl's exit status, the same for every command. */
#define EXIT_USAGE	1	/* usage or configuration error */
#define EXIT_NOT_LEADER	1	/* is-leader: any status but 0 means "do not lead" */
#define EXIT_AGENT	2	/* agent (or ZooKeeper) unreachable, or an error */
#define EXIT_TIMEOUT	3	/* wait: the condition did not come in time */
#define EXIT_UNSETTLED	3	/* partitions' cluster view: read, but not
				   balanced and settled (the condition does
				   not hold, as for wait --timeout 0) */

#define DEFAULT_CONFIG	CONFIG_DEFAULT_FILE	/* config.h: the agent's own */

/* members.c */
int	members_cmd(int argc, char *argv[]);
void	members_json_bytes(FILE *f, const char *p, int len);
char	*members_text(const char *p, int len);

/* partitions.c: the cluster view, read from ZooKeeper */
int	partitions_cluster(const char *file, const char *servers, int nargs,
	    char *const *args, bool json, uint64_t timeout_ms,
	    void (*usage)(FILE *));

/* lock.c */
int	lock_cmd(const char *verb, int argc, char *argv[]);
int	hold_cmd(int argc, char *argv[]);

#endif
