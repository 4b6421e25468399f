/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_CLUSTER_H
#define ZKELECT_CLUSTER_H

/*
 * The cluster view of a partitioned election (doc/design.md, "Partitions",
 * "The cluster view"): from the members and each partition's owner as read
 * from ZooKeeper, each member's quota, the member the agents' assignment
 * (assign.c) gives each partition, and the verdict: balanced, settled,
 * unowned partitions. Pure: nothing here calls ZooKeeper or the clock.
 * Functions return 0, or -1 and leave their output as it was.
 */

#include <stdbool.h>
#include <stdint.h>

#define CLUSTER_PARTS_MAX	(1 << 20)	/* parts=count:N, as fleet.c */

/* A member node, and what its data says (written by its agent). */
struct cluster_member {
	char		*node;		/* "m-NNNNNNNNNN" (the caller's) */
	int64_t		 seq;		/* its sequence number */
	char		*id;		/* NULL: data unreadable (no id, or too
					   long): agents do not count it */
	char		**parts;	/* the partitions it runs, sorted as
					   agents sort them (length, then
					   bytes), no twins */
	int		 nparts;	/* -1: it did not say (an agent before
					   issue 30) or said it unreadably */
	bool		 parts_bad;	/* parts= was there but unreadable */
	bool		 drained;	/* drained=1: owns nothing by choice */
	char		**avoid;	/* avoid=P1,P2: resigned, not to be
					   taken for a while */
	int		 navoid;
	char		*buf;		/* what id, names and avoid point into */
	char		*store;		/* what count:N's names point into */

	/* cluster_judge: */
	bool		 counted;	/* in the quotas (not drained, unless
					   every member is) */
	bool		 duplicate_id;	/* an older member has its id */
	bool		 runs_other;	/* it does not run every partition
					   the members run */
	int		 quota;		/* floor/ceil of N/K by join order;
					   0 when not counted */
	int		 owns;
	int		 assigned;	/* how many the assignment gives it */
};

/* A partition: its claim as read. */
struct cluster_part {
	char		*name;
	char		*owner;		/* the id of whom holds it now (its claim
					   names its first contender); NULL:
					   nobody */
	int64_t		 epoch;		/* the claim's mzxid, when owned */
	int64_t		 mtime_ms;	/* the claim's mtime (ZooKeeper's
					   clock), when owned */
	int		 contenders;
	bool		 exists;	/* its node is in ZooKeeper */

	/* cluster_judge: */
	bool		 run;		/* some member runs it */
	int		 owner_member;	/* index in members; -1: nobody, or no
					   member by that id */
	int		 assigned_member; /* whom assign.c gives it; -1: none */
};

struct cluster {
	struct cluster_member	*members;
	int			 nmembers;
	struct cluster_part	*parts;
	int			 nparts;

	/* cluster_judge: */
	int			 counted;	/* K: members in the quotas */
	int			 nrun;		/* N: partitions members run */
	int			 owned;		/* of those, owned by a member */
	int			 unowned;	/* of those, owned by nobody */
	bool			 balanced;	/* each member owns its quota */
	bool			 settled;	/* each partition owned by whom
						   assign.c gives it */
	bool			 disagree;	/* members run different sets */
};

/*
 * Parses a member node's data: "ID", then NUL-separated fields
 * "parts=count:N" or "parts=names:a,b,...", "drained=1", "avoid=P1,P2";
 * others are ignored. Fills m (all but node and seq; free with
 * cluster_member_free). Returns 0, or -1 when no id can be read (m->id
 * NULL, the rest empty).
 */
int cluster_member_parse(struct cluster_member *m, const char *data,
    int len);
void cluster_member_free(struct cluster_member *m);

/*
 * Judges the cluster: sorts members by join order (sequence, then id) and
 * partitions as agents do, adds a partition some member runs that has no
 * node yet, and fills every field marked cluster_judge. Returns 0, or -1
 * (out of memory).
 */
int cluster_judge(struct cluster *c);

/* Frees members, partitions and what they hold. */
void cluster_free(struct cluster *c);

/* Orders partition names as every agent does: by length, then bytes. */
int cluster_name_cmp(const char *a, const char *b);

#endif
