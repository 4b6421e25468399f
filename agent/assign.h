/* SPDX-License-Identifier: MIT */
#ifndef ZKELECT_ASSIGN_H
#define ZKELECT_ASSIGN_H

/*
 * Which live member should own which partition (doc/design.md,
 * "Partitions"). A pure function of the member list, the partition names
 * and the current owners: every agent that sees the same computes the same
 * answer, so no agent coordinates the others. Nothing here calls ZooKeeper,
 * libevent or the clock.
 */

#include <stdbool.h>
#include <stdint.h>

#define ASSIGN_PARTITIONS_MAX	4096
#define ASSIGN_NAME_MAX		64	/* bytes of a partition name */

struct assign_member {
	const char	*id;		/* the agent id its member node holds */
	int64_t		 seq;		/* its member node's sequence number */
};

/* The rendezvous score of member ID for partition NAME. */
uint64_t assign_score(const char *id, const char *name);

/*
 * Gives each of the N partitions NAMES to one of the K MEMBERS: owner[p] is
 * an index into MEMBERS. CUR (or NULL: none) is the current owner of each
 * partition, an index into MEMBERS or -1. Each member gets floor(N/K) or
 * ceil(N/K) of them, and keeps what it owns up to that. Returns 0, or -1
 * (owner untouched) when K is 0 or out of memory.
 */
int assign_partitions(const struct assign_member *members, int k,
    const char *const *names, int n, const int *cur, int *owner);

/*
 * The same, where member i may own partition p only if eligible[p * k + i]
 * (NULL: every member every partition). A partition no eligible member
 * with room takes goes to its highest scored eligible member beyond that
 * member's quota, so that every partition a member knows has an owner;
 * owner[p] is -1 only when no member may own p.
 */
int assign_partitions_among(const struct assign_member *members, int k,
    const char *const *names, int n, const int *cur, const bool *eligible,
    int *owner);

/* How many partitions change owner between two answers, by member id. */
int assign_moved(const struct assign_member *a, const int *owner_a,
    const struct assign_member *b, const int *owner_b, int n);

#endif
