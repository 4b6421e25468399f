/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_CTL_H
#define ZKELECT_CTL_H

/* zkelectctl's exit status, the same for every command. */
#define EXIT_USAGE	1	/* usage or configuration error */
#define EXIT_NOT_LEADER	1	/* is-leader: any status but 0 means "do not lead" */
#define EXIT_AGENT	2	/* agent (or ZooKeeper) unreachable, or an error */
#define EXIT_TIMEOUT	3	/* wait: the condition did not come in time */

#define DEFAULT_CONFIG	CONFIG_DEFAULT_FILE	/* config.h: the agent's own */

/* members.c */
int	members_cmd(int argc, char *argv[]);

/* lock.c */
int	lock_cmd(const char *verb, int argc, char *argv[]);
int	hold_cmd(int argc, char *argv[]);

#endif
