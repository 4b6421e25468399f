/* SPDX-License-Identifier: MIT */
/*
 * The cluster view's judgement (doc/design.md, "The cluster view"): from
 * what ZooKeeper holds (each member node's data, each partition's owner)
 * it works out what the agents themselves would: the partitions the
 * members run (the union, as "Agents that disagree" has it), each
 * member's quota (assign.c over the members not drained, in join order),
 * and the member assign.c gives each partition given the current owners.
 * The cluster is settled when every partition is owned by that member,
 * balanced when every member owns its quota. Pure: a unit test feeds it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assign.h"
#include "cluster.h"
#include "election.h"

/* Orders partition names as every agent does: by length, then bytes. */
int
cluster_name_cmp(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(a, b);
}

static int
cluster_name_pcmp(const void *a, const void *b)
{
	return cluster_name_cmp(*(const char *const *)a,
	    *(const char *const *)b);
}

static bool
cluster_has(char *const *names, int n, const char *name)
{
	return n > 0 && bsearch(&name, names, (size_t)n, sizeof(*names),
	    cluster_name_pcmp) != NULL;
}

/*
 * Splits S (in place) at commas into *out, sorted, twins dropped. An empty
 * S is no name; an empty name between commas makes it unreadable (-1)
 * when strict, else is skipped. Returns the count, or -1.
 */
static int
cluster_split(char *s, char ***out, bool strict)
{
	char **v, *p, *comma;
	int n = 0, i, u;

	*out = NULL;
	if (*s == '\0')
		return 0;
	for (p = s, i = 1; *p != '\0'; p++)
		i += *p == ',';
	if ((v = calloc((size_t)i + 1, sizeof(*v))) == NULL)
		abort();
	for (p = s;; p = comma + 1) {
		if ((comma = strchr(p, ',')) != NULL)
			*comma = '\0';
		if (*p == '\0' && strict) {
			free(v);
			return -1;
		}
		if (*p != '\0')
			v[n++] = p;
		if (comma == NULL)
			break;
	}
	qsort(v, (size_t)n, sizeof(*v), cluster_name_pcmp);
	for (i = 0, u = 0; i < n; i++)
		if (u == 0 || strcmp(v[u - 1], v[i]) != 0)
			v[u++] = v[i];
	*out = v;
	return u;
}

/* "count:N": the names "0".."N-1", in the agents' order already. */
static int
cluster_count(const char *spec, char ***out, char **store)
{
	char *end, **v, *p;
	long n, i;

	if (spec[0] < '0' || spec[0] > '9')
		return -1;
	n = strtol(spec, &end, 10);
	if (*end != '\0' || n < 0 || n > CLUSTER_PARTS_MAX)
		return -1;
	if ((v = calloc((size_t)n + 1, sizeof(*v))) == NULL ||
	    (*store = malloc((size_t)n * 8 + 1)) == NULL)
		abort();
	for (i = 0, p = *store; i < n; i++) {
		v[i] = p;
		p += sprintf(p, "%ld", i) + 1;
	}
	*out = v;
	return (int)n;
}

/* A member's data: "ID" NUL "parts=..." NUL "drained=1" NUL "avoid=..." */
int
cluster_member_parse(struct cluster_member *m, const char *data, int len)
{
	char *f, *end, *store = NULL;
	size_t idlen;

	m->id = m->store = NULL;
	m->parts = m->avoid = NULL;
	m->nparts = -1;
	m->navoid = 0;
	m->parts_bad = m->drained = false;
	m->buf = NULL;
	if (data == NULL || len <= 0)
		return -1;
	idlen = strnlen(data, (size_t)len);
	if (idlen == 0 || idlen >= ELECTION_ID_MAX)
		return -1;	/* agents do not count it either (fleet.c) */
	if ((m->buf = malloc((size_t)len + 1)) == NULL)
		abort();
	memcpy(m->buf, data, (size_t)len);
	m->buf[len] = '\0';
	m->id = m->buf;
	end = m->buf + len;
	for (f = m->buf + idlen + 1; f < end; f += strlen(f) + 1) {
		if (strncmp(f, "parts=", 6) == 0) {
			free(m->parts);
			free(store);
			store = NULL;
			m->parts = NULL;
			if (strncmp(f + 6, "count:", 6) == 0)
				m->nparts = cluster_count(f + 12, &m->parts,
				    &store);
			else if (strncmp(f + 6, "names:", 6) == 0)
				m->nparts = cluster_split(f + 12, &m->parts,
				    true);
			else
				m->nparts = -1;
			m->parts_bad = m->nparts < 0;
		} else if (strcmp(f, "drained=1") == 0)
			m->drained = true;
		else if (strcmp(f, "drained=0") == 0)
			m->drained = false;
		else if (strncmp(f, "avoid=", 6) == 0) {
			free(m->avoid);
			m->navoid = cluster_split(f + 6, &m->avoid, false);
		}
		/* Anything else: a field of a newer agent; ignored. */
	}
	m->store = store;
	return 0;
}

void
cluster_member_free(struct cluster_member *m)
{
	free(m->parts);
	free(m->avoid);
	free(m->buf);
	free(m->store);
	m->parts = m->avoid = NULL;
	m->buf = m->id = m->store = NULL;
}

void
cluster_free(struct cluster *c)
{
	int i;

	for (i = 0; i < c->nmembers; i++) {
		cluster_member_free(&c->members[i]);
		free(c->members[i].node);
	}
	for (i = 0; i < c->nparts; i++) {
		free(c->parts[i].name);
		free(c->parts[i].owner);
	}
	free(c->members);
	free(c->parts);
	c->members = NULL;
	c->parts = NULL;
	c->nmembers = c->nparts = 0;
}

/* Join order: member node sequence, then id (assign.c's). */
static int
cluster_member_cmp(const void *va, const void *vb)
{
	const struct cluster_member *a = va, *b = vb;

	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	if (a->id != NULL && b->id != NULL && strcmp(a->id, b->id) != 0)
		return strcmp(a->id, b->id);
	return strcmp(a->node != NULL ? a->node : "",
	    b->node != NULL ? b->node : "");
}

static int
cluster_part_cmp(const void *va, const void *vb)
{
	const struct cluster_part *a = va, *b = vb;

	return cluster_name_cmp(a->name, b->name);
}

static struct cluster_part *
cluster_part_find(struct cluster *c, const char *name)
{
	struct cluster_part key;

	key.name = (char *)(uintptr_t)name;
	return c->nparts == 0 ? NULL : bsearch(&key, c->parts,
	    (size_t)c->nparts, sizeof(*c->parts), cluster_part_cmp);
}

/* Does member m run partition name? (One that did not say runs all.) */
static bool
cluster_runs(const struct cluster_member *m, const char *name)
{
	return m->nparts < 0 || cluster_has(m->parts, m->nparts, name);
}

/* The first member in join order carrying id, or -1. */
static int
cluster_member_by_id(const struct cluster *c, const char *id)
{
	int i;

	for (i = 0; id != NULL && i < c->nmembers; i++)
		if (c->members[i].id != NULL &&
		    strcmp(c->members[i].id, id) == 0)
			return i;
	return -1;
}

/* The union of the partitions the members run (or, if none says, the
 * partitions ZooKeeper has): sorted, no twins. */
static char **
cluster_union(struct cluster *c, int *nu)
{
	const struct cluster_member *m;
	char **all;
	size_t n = 0;
	int i, j, u = 0;
	bool said = false;

	for (i = 0; i < c->nmembers; i++) {
		m = &c->members[i];
		if (m->id != NULL && m->nparts >= 0) {
			n += (size_t)m->nparts;
			said = true;
		}
	}
	if (!said)
		n = (size_t)c->nparts;
	if ((all = calloc(n + 1, sizeof(*all))) == NULL)
		abort();
	n = 0;
	for (i = 0; said && i < c->nmembers; i++) {
		m = &c->members[i];
		for (j = 0; m->id != NULL && j < m->nparts; j++)
			all[n++] = m->parts[j];
	}
	for (i = 0; !said && i < c->nparts; i++)
		if (c->parts[i].exists)
			all[n++] = c->parts[i].name;
	qsort(all, n, sizeof(*all), cluster_name_pcmp);
	for (i = 0; i < (int)n; i++)
		if (u == 0 || strcmp(all[u - 1], all[i]) != 0)
			all[u++] = all[i];
	*nu = u;
	return all;
}

/* Adds the union's partitions that have no node yet, then sorts. */
static void
cluster_add_parts(struct cluster *c, char **u, int nu)
{
	struct cluster_part *np;
	int i, n = c->nparts;

	qsort(c->parts, (size_t)c->nparts, sizeof(*c->parts),
	    cluster_part_cmp);
	for (i = 0; i < nu; i++)
		if (cluster_part_find(c, u[i]) == NULL)
			n++;
	if (n == c->nparts)
		return;
	if ((np = reallocarray(c->parts, (size_t)n, sizeof(*np))) == NULL)
		abort();
	c->parts = np;
	n = c->nparts;
	for (i = 0; i < nu; i++) {
		/* Found among the first c->nparts only: they are sorted. */
		if (bsearch(&(struct cluster_part){ .name = u[i] }, c->parts,
		    (size_t)c->nparts, sizeof(*c->parts), cluster_part_cmp) !=
		    NULL)
			continue;
		memset(&np[n], 0, sizeof(np[n]));
		if ((np[n].name = strdup(u[i])) == NULL)
			abort();
		n++;
	}
	c->nparts = n;
	qsort(c->parts, (size_t)c->nparts, sizeof(*c->parts),
	    cluster_part_cmp);
}

/* Judges the cluster: quotas, the assignment, the verdict. */
int
cluster_judge(struct cluster *c)
{
	struct cluster_member *m;
	struct cluster_part *pt;
	struct assign_member *am = NULL;
	const char **names = NULL;
	char **u;
	int *idx = NULL, *owner = NULL, *cur = NULL, *qcount = NULL;
	bool *eligible = NULL, all_eligible = true, everywhere, any;
	int i, j, k = 0, n, nu, rc = -1;

	qsort(c->members, (size_t)c->nmembers, sizeof(*c->members),
	    cluster_member_cmp);
	/* u points into the members' data or the partitions' names,
	 * which stay where they are while the array of partitions grows. */
	u = cluster_union(c, &nu);
	cluster_add_parts(c, u, nu);

	/* The partitions the members run, in the agents' order. */
	if ((names = calloc((size_t)c->nparts + 1, sizeof(*names))) == NULL)
		abort();
	for (i = 0, n = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		pt->owner_member = pt->assigned_member = -1;
		if ((pt->run = cluster_has(u, nu, pt->name)))
			names[n++] = pt->name;
	}
	free(u);
	c->nrun = n;

	/* Who counts: the members not drained, unless every one is. */
	for (i = 0; i < c->nmembers; i++)
		if (c->members[i].id != NULL && !c->members[i].drained)
			k++;
	any = k > 0;
	k = 0;
	if ((am = calloc((size_t)c->nmembers + 1, sizeof(*am))) == NULL ||
	    (idx = calloc((size_t)c->nmembers + 1, sizeof(*idx))) == NULL)
		abort();
	c->disagree = false;
	for (i = 0; i < c->nmembers; i++) {
		m = &c->members[i];
		m->counted = m->id != NULL && (!any || !m->drained);
		m->duplicate_id = m->id != NULL &&
		    cluster_member_by_id(c, m->id) != i;
		m->quota = m->owns = m->assigned = 0;
		m->runs_other = false;
		for (j = 0; m->id != NULL && m->nparts >= 0 && j < n; j++)
			if (!cluster_has(m->parts, m->nparts, names[j]))
				m->runs_other = true;
		if (!m->counted)
			continue;
		if (m->runs_other)
			c->disagree = true;
		am[k].id = m->id;
		am[k].seq = m->seq;
		idx[k++] = i;
	}
	c->counted = k;

	owner = calloc((size_t)n + 1, sizeof(*owner));
	cur = calloc((size_t)n + 1, sizeof(*cur));
	qcount = calloc((size_t)k + 1, sizeof(*qcount));
	eligible = calloc((size_t)n * (size_t)k + 1, sizeof(*eligible));
	if (owner == NULL || cur == NULL || qcount == NULL || eligible == NULL)
		abort();

	/* Quotas: assign.c with no owners and every member eligible gives
	 * each exactly floor(N/K) or ceil(N/K), the oldest the more. */
	if (k > 0 && n > 0) {
		if (assign_partitions(am, k, names, n, NULL, owner) == -1)
			goto out;
		for (i = 0; i < n; i++)
			qcount[owner[i]]++;
		for (j = 0; j < k; j++)
			c->members[idx[j]].quota = qcount[j];
	}

	/* Who owns what now; what assign.c makes of it. */
	for (i = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		pt->owner_member = cluster_member_by_id(c, pt->owner);
		if (pt->owner_member >= 0)
			c->members[pt->owner_member].owns++;
	}
	for (i = 0; i < n; i++) {
		pt = cluster_part_find(c, names[i]);
		everywhere = true;
		for (j = 0; j < k; j++) {
			m = &c->members[idx[j]];
			if (!cluster_runs(m, names[i]))
				everywhere = false;
			eligible[(size_t)i * (size_t)k + (size_t)j] =
			    cluster_runs(m, names[i]) &&
			    !cluster_has(m->avoid, m->navoid, names[i]);
			all_eligible &= eligible[(size_t)i * (size_t)k +
			    (size_t)j];
		}
		/* As agents count it: only where every member runs it. */
		cur[i] = -1;
		for (j = 0; everywhere && pt->owner != NULL && j < k; j++)
			if (strcmp(am[j].id, pt->owner) == 0) {
				cur[i] = j;
				break;
			}
	}
	if (k > 0 && n > 0) {
		if (assign_partitions_among(am, k, names, n, cur,
		    all_eligible ? NULL : eligible, owner) == -1)
			goto out;
		for (i = 0; i < n; i++) {
			if (owner[i] < 0)
				continue;
			pt = cluster_part_find(c, names[i]);
			pt->assigned_member = idx[owner[i]];
			c->members[idx[owner[i]]].assigned++;
		}
	}

	/* The verdict. */
	c->owned = c->unowned = 0;
	c->settled = true;
	for (i = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		if (!pt->run)
			continue;
		if (pt->owner == NULL)
			c->unowned++;
		else if (pt->owner_member >= 0)
			c->owned++;
		if (pt->assigned_member < 0 ||
		    pt->owner_member != pt->assigned_member)
			c->settled = false;
	}
	c->balanced = k > 0 || n == 0;
	for (i = 0; i < c->nmembers; i++)
		if (c->members[i].id != NULL &&
		    c->members[i].owns != c->members[i].quota)
			c->balanced = false;
	rc = 0;
out:
	free(names);
	free(am);
	free(idx);
	free(owner);
	free(cur);
	free(qcount);
	free(eligible);
	return rc;
}
