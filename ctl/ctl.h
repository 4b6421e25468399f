/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_CTL_H
#define ZKELECT_CTL_H

/* zkelectctl's exit status, the same for every command. */
#define EXIT_USAGE	1	/* usage error */
#define EXIT_NOT_LEADER	1	/* is-leader: any status but 0 means "do not lead" */
#define EXIT_AGENT	2	/* the agent unreachable, or an error */
#define EXIT_TIMEOUT	3	/* wait: the condition did not come in time */

#endif
