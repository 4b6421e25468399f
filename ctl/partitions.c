/* SPDX-License-Identifier: MIT */
/*
 * zkelectctl partitions -c FILE | --zookeeper SERVERS PATH | --cluster: the
 * cluster view of a partitioned election, read straight from ZooKeeper
 * with no agent (doc/design.md, "The cluster view"). Every partition with
 * its owner, epoch and the age of its owner's term; the members in join
 * order with what each runs, owns and should own; and whether the whole is
 * balanced and settled, judged by cluster.c as the agents would judge it.
 * The reads are pipelined (one round of asynchronous calls per step, not
 * one round trip per node), so thousands of partitions read in a few
 * round trips' time.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

#include "cluster.h"
#include "config.h"
#include "ctl.h"
#include "election.h"
#include "zkread.h"

#define PARTITIONS_SHOW_MAX	12	/* names listed in a text verdict line */

/* One node read asynchronously: its data and stat, or its children. */
struct partitions_read {
	struct zkread	*r;
	int		 rc;
	char		*data;		/* a copy; NULL: none */
	int		 len;
	struct Stat	 st;
	char		*first;		/* children: the first contender */
	int		 count;		/* children: how many contenders */
};

/* A partition as read: its queue, its claim, its first contender. */
struct partitions_slot {
	char			*name;
	struct partitions_read	 queue;
	struct partitions_read	 claim;
	struct partitions_read	 head;
};

/*
 * Everything the async calls write into: freed only once the session is
 * closed (a call out when a wait gives up may still complete until then).
 */
struct partitions_reads {
	struct partitions_read	*members;
	int			 nmembers;
	struct partitions_slot	*slots;
	int			 nslots;
};

static void
partitions_reads_free(struct partitions_reads *rs)
{
	int i;

	for (i = 0; i < rs->nmembers; i++)
		free(rs->members[i].data);
	for (i = 0; i < rs->nslots; i++) {
		free(rs->slots[i].name);
		free(rs->slots[i].queue.first);
		free(rs->slots[i].claim.data);
		free(rs->slots[i].head.data);
	}
	free(rs->members);
	free(rs->slots);
}

static void
partitions_data_cb(int rc, const char *value, int len, const struct Stat *st,
    const void *arg)
{
	struct partitions_read *rd = (struct partitions_read *)(uintptr_t)arg;

	rd->rc = rc;
	if (rc == ZOK) {
		if (st != NULL)
			rd->st = *st;
		if (value != NULL && len > 0) {
			if ((rd->data = malloc((size_t)len + 1)) == NULL)
				abort();
			memcpy(rd->data, value, (size_t)len);
			rd->data[len] = '\0';	/* not part of len */
			rd->len = len;
		}
	}
	zkread_done(rd->r, rc);
}

static void
partitions_children_cb(int rc, const struct String_vector *kids,
    const void *arg)
{
	struct partitions_read *rd = (struct partitions_read *)(uintptr_t)arg;
	int64_t seq, best = -1;
	int i;

	rd->rc = rc;
	for (i = 0; rc == ZOK && kids != NULL && i < kids->count; i++) {
		/* Contenders only, named as the agents and Curator name them. */
		if ((seq = election_node_seq(kids->data[i])) == -1)
			continue;
		rd->count++;
		if (best == -1 || seq < best || (seq == best &&
		    strcmp(kids->data[i], rd->first) < 0)) {
			best = seq;
			free(rd->first);
			if ((rd->first = strdup(kids->data[i])) == NULL)
				abort();
		}
	}
	zkread_done(rd->r, rc);
}

static void
partitions_aget(struct zkread *r, const char *path, struct partitions_read *rd)
{
	int rc;

	rd->r = r;
	zkread_begin(r);
	if ((rc = zoo_aget(r->zh, path, 0, partitions_data_cb, rd)) != ZOK) {
		rd->rc = rc;
		zkread_done(r, rc);
	}
}

static void
partitions_achildren(struct zkread *r, const char *path,
    struct partitions_read *rd)
{
	int rc;

	rd->r = r;
	zkread_begin(r);
	if ((rc = zoo_aget_children(r->zh, path, 0, partitions_children_cb,
	    rd)) != ZOK) {
		rd->rc = rc;
		zkread_done(r, rc);
	}
}

/* The id in claim or contender data: up to a newline or a NUL. */
static size_t
partitions_idlen(const char *data, int len)
{
	const char *nl;
	size_t n;

	if (data == NULL || len <= 0)
		return 0;
	n = strnlen(data, (size_t)len);
	nl = memchr(data, '\n', n);
	return nl != NULL ? (size_t)(nl - data) : n;
}

/* Says why a read failed; the exit status. */
static int
partitions_read_failed(struct zkread *r, const char *what, int rc)
{
	fprintf(stderr, "zkelectctl: partitions: cannot read %s on %s: %s%s\n",
	    what, r->conf->zk_servers, zerror(rc), rc == ZNOAUTH ?
	    " (check zookeeper.auth)" : "");
	return EXIT_AGENT;
}

/*
 * Lists DIR's children; 0, or the ZooKeeper error. *child grows to hold
 * DIR/CHILD/CONTENDER for any of them (node names are ZooKeeper's, of any
 * length: none is cut short into another's path).
 */
static int
partitions_list(struct zkread *r, const char *dir, struct String_vector *kids,
    char **child, size_t *clen)
{
	size_t need, max = 0;
	int i, rc;

	memset(kids, 0, sizeof(*kids));
	if ((rc = zoo_get_children(r->zh, dir, 0, kids)) != ZOK)
		return rc;
	for (i = 0; i < kids->count; i++)
		if (strlen(kids->data[i]) > max)
			max = strlen(kids->data[i]);
	need = strlen(dir) + max + ELECTION_NAME_MAX + 3;
	if (need > *clen) {
		if ((*child = realloc(*child, need)) == NULL)
			abort();
		*clen = need;
	}
	return ZOK;
}

/*
 * Reads the members and every partition's claim into c, through rs (free
 * it after closing the session). Returns 0, or an exit status after saying
 * why.
 */
static int
partitions_read(struct zkread *r, const char *path, struct cluster *c,
    struct partitions_reads *rs)
{
	struct String_vector kids;
	struct partitions_read *mr;
	struct partitions_slot *s;
	struct cluster_member *m;
	struct cluster_part *pt;
	char dir[CONFIG_ZK_PATH_MAX + 16], *child = NULL;
	size_t clen = 0, a, b;
	int i, rc, status = EXIT_AGENT;
	int64_t seq;

	/* The members, then all their data at once. */
	snprintf(dir, sizeof(dir), "%s/members", path);
	if ((rc = partitions_list(r, dir, &kids, &child, &clen)) != ZOK) {
		status = partitions_read_failed(r, dir, rc);
		goto out;
	}
	if ((rs->members = calloc((size_t)kids.count + 1,
	    sizeof(*rs->members))) == NULL ||
	    (c->members = calloc((size_t)kids.count + 1,
	    sizeof(*c->members))) == NULL)
		abort();
	for (i = 0; i < kids.count; i++) {
		if ((seq = zkread_member_seq(kids.data[i])) < 0)
			continue;	/* not a member node: agents skip it too */
		m = &c->members[c->nmembers++];
		if ((m->node = strdup(kids.data[i])) == NULL)
			abort();
		m->seq = seq;
		snprintf(child, clen, "%s/%s", dir, kids.data[i]);
		partitions_aget(r, child, &rs->members[rs->nmembers++]);
	}
	deallocate_String_vector(&kids);
	if (zkread_wait(r) == -1)
		goto out;
	for (i = 0; i < rs->nmembers; i++) {
		mr = &rs->members[i];
		m = &c->members[i];
		if (mr->rc != ZOK && mr->rc != ZNONODE) {
			snprintf(child, clen, "%s/%s", dir, m->node);
			status = partitions_read_failed(r, child, mr->rc);
			goto out;
		}
		/* A member gone while we read (ZNONODE) is unreadable here
		 * and dropped below. */
		cluster_member_parse(m, mr->data, mr->len);
	}
	for (i = 0, a = 0; i < c->nmembers; i++) {
		if (rs->members[i].rc == ZNONODE) {
			cluster_member_free(&c->members[i]);
			free(c->members[i].node);
			continue;
		}
		c->members[a++] = c->members[i];
	}
	c->nmembers = (int)a;

	/*
	 * Each partition: its queue, then its claim, in that order on the
	 * one connection (ZooKeeper answers a session's requests in order):
	 * a claim newer than the queue names a contender we saw, or shows as
	 * not yet the first one's. Then the first contender's data.
	 */
	snprintf(dir, sizeof(dir), "%s/partitions", path);
	if ((rc = partitions_list(r, dir, &kids, &child, &clen)) != ZOK) {
		status = partitions_read_failed(r, dir, rc);
		goto out;
	}
	if ((rs->slots = calloc((size_t)kids.count + 1,
	    sizeof(*rs->slots))) == NULL)
		abort();
	for (i = 0; i < kids.count; i++) {
		s = &rs->slots[rs->nslots++];
		if ((s->name = strdup(kids.data[i])) == NULL)
			abort();
		snprintf(child, clen, "%s/%s", dir, kids.data[i]);
		partitions_achildren(r, child, &s->queue);
		partitions_aget(r, child, &s->claim);
	}
	deallocate_String_vector(&kids);
	if (zkread_wait(r) == -1)
		goto out;
	for (i = 0; i < rs->nslots; i++) {
		s = &rs->slots[i];
		snprintf(child, clen, "%s/%s", dir, s->name);
		if (s->queue.rc != ZOK && s->queue.rc != ZNONODE) {
			status = partitions_read_failed(r, child, s->queue.rc);
			goto out;
		}
		if (s->claim.rc != ZOK && s->claim.rc != ZNONODE) {
			status = partitions_read_failed(r, child, s->claim.rc);
			goto out;
		}
		s->head.rc = ZNONODE;
		if (s->claim.rc == ZOK && s->queue.first != NULL &&
		    partitions_idlen(s->claim.data, s->claim.len) > 0) {
			snprintf(child, clen, "%s/%s/%s", dir, s->name,
			    s->queue.first);
			partitions_aget(r, child, &s->head);
		}
	}
	if (zkread_wait(r) == -1)
		goto out;

	if ((c->parts = calloc((size_t)rs->nslots + 1,
	    sizeof(*c->parts))) == NULL)
		abort();
	for (i = 0; i < rs->nslots; i++) {
		s = &rs->slots[i];
		if (s->claim.rc == ZNONODE)
			continue;	/* deleted while we read */
		if (s->head.rc != ZOK && s->head.rc != ZNONODE) {
			snprintf(child, clen, "%s/%s/%s", dir, s->name,
			    s->queue.first);
			status = partitions_read_failed(r, child, s->head.rc);
			goto out;
		}
		pt = &c->parts[c->nparts++];
		pt->name = s->name;
		s->name = NULL;
		pt->exists = true;
		pt->contenders = s->queue.count;
		/* Held: the claim names the first contender, and was
		 * written after that contender's node was made (members.c's
		 * test, the agents' own). */
		a = partitions_idlen(s->claim.data, s->claim.len);
		b = partitions_idlen(s->head.data, s->head.len);
		if (s->head.rc == ZOK && a > 0 && a == b &&
		    memcmp(s->claim.data, s->head.data, a) == 0 &&
		    s->head.st.czxid < s->claim.st.mzxid) {
			if ((pt->owner = strndup(s->claim.data, a)) == NULL)
				abort();
			pt->epoch = s->claim.st.mzxid;
			pt->mtime_ms = s->claim.st.mtime;
		}
	}
	status = 0;
out:
	free(child);
	return status;
}

/* --- Printing --- */

/* "4.2s", "41s", "5m07s", "3h05m", "2d04h". */
static void
partitions_age(char *buf, size_t len, int64_t ms)
{
	int64_t s = ms / 1000;

	if (ms < 10000)
		snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
	else if (s < 60)
		snprintf(buf, len, "%" PRId64 "s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRId64 "h%02" PRId64 "m", s / 3600,
		    s / 60 % 60);
	else
		snprintf(buf, len, "%" PRId64 "d%02" PRId64 "h", s / 86400,
		    s / 3600 % 24);
}

static int64_t
partitions_age_ms(const struct cluster_part *pt, int64_t now_ms)
{
	return pt->mtime_ms < now_ms ? now_ms - pt->mtime_ms : 0;
}

/* What a partition's row notes, or "". */
static const char *
partitions_note(const struct cluster_part *pt)
{
	if (!pt->run)
		return "no member runs it";
	if (!pt->exists)
		return "no node yet";
	if (pt->owner != NULL && pt->owner_member < 0)
		return "owner is not a member";
	return "";
}

static const char *
partitions_member_id(const struct cluster *c, int i)
{
	return i >= 0 && c->members[i].id != NULL ? c->members[i].id : NULL;
}

/* A member's flags, space-separated, into buf ("-": none). */
static void
partitions_flags(const struct cluster_member *m, char *buf, size_t len)
{
	size_t n = 0;
	int i;

	buf[0] = '\0';
#define ADD(...) do { if (n < len) n += (size_t)snprintf(buf + n, len - n, \
	    __VA_ARGS__); } while (0)
	if (m->id == NULL)
		ADD("%sunreadable", n > 0 ? " " : "");
	if (m->drained)
		ADD("%sdrained", n > 0 ? " " : "");
	if (m->navoid > 0) {
		ADD("%savoid=", n > 0 ? " " : "");
		for (i = 0; i < m->navoid; i++)
			ADD("%s%s", i > 0 ? "," : "", m->avoid[i]);
	}
	if (m->duplicate_id)
		ADD("%sduplicate-id", n > 0 ? " " : "");
	if (m->id != NULL && m->nparts < 0 && !m->parts_bad)
		ADD("%sno-parts", n > 0 ? " " : "");
	if (m->parts_bad)
		ADD("%sbad-parts", n > 0 ? " " : "");
	if (m->runs_other)
		ADD("%sruns-other", n > 0 ? " " : "");
#undef ADD
	if (buf[0] == '\0')
		snprintf(buf, len, "-");
}

static void
partitions_print_text(FILE *f, const char *path, const struct cluster *c,
    int64_t now_ms)
{
	const struct cluster_part *pt;
	const struct cluster_member *m;
	char **name, **owner, **assigned, epoch[24], age[24], flags[1024], *fl;
	const char *note;
	int i, n, wname = 9, wowner = 5, wassigned = 8, wid = 2, wnode = 4;
	bool notes = false;

	fprintf(f, "%s: partitioned election, %d member%s, %d partition%s: "
	    "%s, %s\n", path, c->nmembers, c->nmembers == 1 ? "" : "s",
	    c->nrun, c->nrun == 1 ? "" : "s",
	    c->balanced ? "balanced" : "not balanced",
	    c->settled ? "settled" : "not settled");

	/* Names and ids are ZooKeeper's bytes: escaped for a terminal. */
	name = calloc((size_t)c->nparts + 1, sizeof(*name));
	owner = calloc((size_t)c->nparts + 1, sizeof(*owner));
	assigned = calloc((size_t)c->nparts + 1, sizeof(*assigned));
	if (name == NULL || owner == NULL || assigned == NULL)
		abort();
	for (i = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		name[i] = members_text(pt->name, (int)strlen(pt->name));
		owner[i] = pt->owner != NULL ? members_text(pt->owner,
		    (int)strlen(pt->owner)) : members_text("-", 1);
		assigned[i] = partitions_member_id(c, pt->assigned_member) !=
		    NULL ? members_text(c->members[pt->assigned_member].id,
		    (int)strlen(c->members[pt->assigned_member].id)) :
		    members_text("-", 1);
		if ((n = (int)strlen(name[i])) > wname)
			wname = n;
		if ((n = (int)strlen(owner[i])) > wowner)
			wowner = n;
		if ((n = (int)strlen(assigned[i])) > wassigned)
			wassigned = n;
		if (partitions_note(pt)[0] != '\0')
			notes = true;
	}
	fprintf(f, "%-*s  %-*s  %-20s  %-7s  %-*s%s\n", wname, "PARTITION",
	    wowner, "OWNER", "EPOCH", "AGE", notes ? wassigned : 0,
	    "ASSIGNED", notes ? "  NOTE" : "");
	for (i = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		if (pt->owner != NULL) {
			snprintf(epoch, sizeof(epoch), "%" PRId64, pt->epoch);
			partitions_age(age, sizeof(age),
			    partitions_age_ms(pt, now_ms));
		} else {
			strcpy(epoch, "-");
			strcpy(age, "-");
		}
		note = partitions_note(pt);
		fprintf(f, "%-*s  %-*s  %-20s  %-7s  %-*s%s%s\n", wname,
		    name[i], wowner, owner[i], epoch, age,
		    note[0] != '\0' ? wassigned : 0, assigned[i],
		    note[0] != '\0' ? "  " : "", note);
	}

	for (i = 0; i < c->nmembers; i++) {
		m = &c->members[i];
		if (m->id != NULL && (n = (int)strlen(m->id)) > wid)
			wid = n;
		if ((n = (int)strlen(m->node)) > wnode)
			wnode = n;
	}
	fprintf(f, "%-3s  %-*s  %-*s  %-5s  %-5s  %-5s  %s\n", "POS", wid, "ID",
	    wnode, "NODE", "RUNS", "OWNS", "QUOTA", "FLAGS");
	for (i = 0; i < c->nmembers; i++) {
		char *id, runs[16];

		m = &c->members[i];
		id = m->id != NULL ? members_text(m->id, (int)strlen(m->id)) :
		    members_text("?", 1);
		if (m->nparts >= 0)
			snprintf(runs, sizeof(runs), "%d", m->nparts);
		else
			strcpy(runs, "?");
		partitions_flags(m, flags, sizeof(flags));
		fl = members_text(flags, (int)strlen(flags));
		fprintf(f, "%-3d  %-*s  %-*s  %-5s  %-5d  %-5d  %s\n", i, wid, id,
		    wnode, m->node, runs, m->owns, m->quota, fl);
		free(fl);
		free(id);
	}

	/* The verdict, one line each. */
	if (c->balanced)
		fprintf(f, "balanced: yes, every member owns its quota\n");
	else if (c->counted == 0)
		fprintf(f, "balanced: no, no member to own the partitions\n");
	else {
		fprintf(f, "balanced: no:");
		for (i = 0, n = 0; i < c->nmembers; i++) {
			m = &c->members[i];
			if (m->id == NULL || m->owns == m->quota)
				continue;
			if (n++ < PARTITIONS_SHOW_MAX) {
				char *id = members_text(m->id,
				    (int)strlen(m->id));

				fprintf(f, "%s %s owns %d (quota %d)",
				    n > 1 ? ";" : "", id, m->owns, m->quota);
				free(id);
			}
		}
		if (n > PARTITIONS_SHOW_MAX)
			fprintf(f, "; and %d more", n - PARTITIONS_SHOW_MAX);
		fputc('\n', f);
	}
	if (c->settled)
		fprintf(f, "settled: yes, every partition is owned by the member "
		    "the assignment gives it\n");
	else {
		for (i = 0, n = 0; i < c->nparts; i++) {
			pt = &c->parts[i];
			if (pt->run && (pt->assigned_member < 0 ||
			    pt->owner_member != pt->assigned_member))
				n++;
		}
		fprintf(f, "settled: no, %d partition%s not where the "
		    "assignment puts %s:", n, n == 1 ? " is" : "s are",
		    n == 1 ? "it" : "them");
		for (i = 0, n = 0; i < c->nparts; i++) {
			pt = &c->parts[i];
			if (!pt->run || (pt->assigned_member >= 0 &&
			    pt->owner_member == pt->assigned_member))
				continue;
			if (n++ < PARTITIONS_SHOW_MAX)
				fprintf(f, "%s %s: %s -> %s", n > 1 ? "," : "",
				    name[i], pt->owner != NULL ? owner[i] :
				    "nobody", pt->assigned_member >= 0 ?
				    assigned[i] : "nobody");
		}
		if (n > PARTITIONS_SHOW_MAX)
			fprintf(f, ", and %d more", n - PARTITIONS_SHOW_MAX);
		fputc('\n', f);
	}
	if (c->unowned == 0)
		fprintf(f, "unowned: none\n");
	else {
		fprintf(f, "unowned: %d:", c->unowned);
		for (i = 0, n = 0; i < c->nparts; i++) {
			pt = &c->parts[i];
			if (!pt->run || pt->owner != NULL)
				continue;
			if (n++ < PARTITIONS_SHOW_MAX)
				fprintf(f, "%s %s", n > 1 ? "," : "", name[i]);
		}
		if (n > PARTITIONS_SHOW_MAX)
			fprintf(f, ", and %d more", n - PARTITIONS_SHOW_MAX);
		fputc('\n', f);
	}
	for (i = 0; i < c->nparts; i++) {
		free(name[i]);
		free(owner[i]);
		free(assigned[i]);
	}
	free(name);
	free(owner);
	free(assigned);
}

static void
partitions_json_str(FILE *f, const char *s)
{
	if (s == NULL)
		fputs("null", f);
	else
		members_json_bytes(f, s, (int)strlen(s));
}

static void
partitions_json_list(FILE *f, char *const *v, int n)
{
	int i;

	fputc('[', f);
	for (i = 0; i < n; i++) {
		if (i > 0)
			fputc(',', f);
		partitions_json_str(f, v[i]);
	}
	fputc(']', f);
}

static void
partitions_print_json(FILE *f, const char *path, const struct cluster *c,
    int64_t now_ms)
{
	const struct cluster_part *pt;
	const struct cluster_member *m;
	char flags[1024], *p, *sp;
	int i, n;

	fputs("{\"path\":", f);
	partitions_json_str(f, path);
	fprintf(f, ",\"now_ms\":%" PRId64 ",\"partitions\":[", now_ms);
	for (i = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		fprintf(f, "%s{\"name\":", i > 0 ? "," : "");
		partitions_json_str(f, pt->name);
		fputs(",\"owner\":", f);
		partitions_json_str(f, pt->owner);
		if (pt->owner != NULL)
			fprintf(f, ",\"epoch\":%" PRId64 ",\"age_ms\":%" PRId64,
			    pt->epoch, partitions_age_ms(pt, now_ms));
		else
			fputs(",\"epoch\":null,\"age_ms\":null", f);
		fputs(",\"assigned\":", f);
		partitions_json_str(f, partitions_member_id(c,
		    pt->assigned_member));
		fprintf(f, ",\"owner_is_member\":%s,\"run\":%s,\"exists\":%s,"
		    "\"contenders\":%d}", pt->owner_member >= 0 ? "true" :
		    "false", pt->run ? "true" : "false", pt->exists ? "true" :
		    "false", pt->contenders);
	}
	fputs("],\"members\":[", f);
	for (i = 0; i < c->nmembers; i++) {
		m = &c->members[i];
		fprintf(f, "%s{\"position\":%d,\"node\":", i > 0 ? "," : "", i);
		partitions_json_str(f, m->node);
		fputs(",\"id\":", f);
		partitions_json_str(f, m->id);
		if (m->nparts >= 0)
			fprintf(f, ",\"runs\":%d", m->nparts);
		else
			fputs(",\"runs\":null", f);
		fprintf(f, ",\"owns\":%d,\"quota\":%d,\"assigned\":%d,"
		    "\"counted\":%s,\"drained\":%s,\"avoid\":", m->owns,
		    m->quota, m->assigned, m->counted ? "true" : "false",
		    m->drained ? "true" : "false");
		partitions_json_list(f, m->avoid, m->navoid);
		fputs(",\"flags\":[", f);
		partitions_flags(m, flags, sizeof(flags));
		/* The text's flags, each a string (avoid= without its list). */
		for (p = strtok_r(flags, " ", &sp), n = 0; p != NULL &&
		    strcmp(p, "-") != 0; p = strtok_r(NULL, " ", &sp)) {
			if (strncmp(p, "avoid=", 6) == 0)
				p[5] = '\0';
			fprintf(f, "%s", n++ > 0 ? "," : "");
			partitions_json_str(f, p);
		}
		fputs("]}", f);
	}
	fprintf(f, "],\"members_counted\":%d,\"partitions_run\":%d,"
	    "\"owned\":%d,\"unowned\":[", c->counted, c->nrun, c->owned);
	for (i = 0, n = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		if (!pt->run || pt->owner != NULL)
			continue;
		fprintf(f, "%s", n++ > 0 ? "," : "");
		partitions_json_str(f, pt->name);
	}
	fputs("],\"moving\":[", f);
	for (i = 0, n = 0; i < c->nparts; i++) {
		pt = &c->parts[i];
		if (!pt->run || (pt->assigned_member >= 0 &&
		    pt->owner_member == pt->assigned_member))
			continue;
		fprintf(f, "%s", n++ > 0 ? "," : "");
		partitions_json_str(f, pt->name);
	}
	fprintf(f, "],\"disagree\":%s,\"balanced\":%s,\"settled\":%s}\n",
	    c->disagree ? "true" : "false", c->balanced ? "true" : "false",
	    c->settled ? "true" : "false");
}

/* The cluster view: reads, judges, prints; zkelectctl's exit status. */
int
partitions_cluster(const char *file, const char *servers, int nargs,
    char *const *args, bool json, uint64_t timeout_ms, void (*usage)(FILE *))
{
	struct zkread r;
	struct cluster c;
	struct partitions_reads rs;
	struct config *conf;
	struct timespec now;
	struct Stat st;
	const char *source = NULL;
	int64_t now_ms;
	int rc, status = EXIT_AGENT;

	memset(&c, 0, sizeof(c));
	memset(&rs, 0, sizeof(rs));
	conf = zkread_config("partitions", file, servers, nargs, args, &source,
	    usage);
	if (conf == NULL)
		return EXIT_USAGE;
	if (zkread_open(&r, "partitions", conf, source, timeout_ms) == -1)
		goto out;
	if ((rc = zkread_partitioned(&r, conf->election_path)) != 1) {
		if (rc == 0 && (rc = zoo_exists(r.zh, conf->election_path, 0,
		    &st)) == ZNONODE)
			zkread_say_missing(&r);
		else if (rc == 0 || rc == ZOK)
			fprintf(stderr, "zkelectctl: partitions: %s on %s is not "
			    "a partitioned election (it has no members and "
			    "partitions nodes): zkelectctl members shows it\n",
			    conf->election_path, conf->zk_servers);
		else
			partitions_read_failed(&r, conf->election_path, rc);
		goto out;
	}
	if ((status = partitions_read(&r, conf->election_path, &c, &rs)) != 0)
		goto out;
	clock_gettime(CLOCK_REALTIME, &now);
	now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	if (cluster_judge(&c) == -1) {
		fprintf(stderr, "zkelectctl: partitions: out of memory\n");
		status = EXIT_AGENT;
		goto out;
	}
	if (json)
		partitions_print_json(stdout, conf->election_path, &c, now_ms);
	else
		partitions_print_text(stdout, conf->election_path, &c, now_ms);
	status = c.balanced && c.settled ? 0 : EXIT_UNSETTLED;
out:
	zkread_close(&r);
	partitions_reads_free(&rs);
	cluster_free(&c);
	config_free(conf);
	return status;
}
