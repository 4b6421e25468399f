/* SPDX-License-Identifier: MIT */
/*
 * zkelectctl members: the whole election as ZooKeeper holds it, read on
 * demand straight from ZooKeeper with the agent's configuration file
 * (servers, chroot, auth, election path), or with --zookeeper SERVERS PATH
 * from any host; no agent and no socket needed.
 * It lists the contenders in queue order with their ids and values, and
 * says who leads under which epoch, by the same test the agents use: the
 * election node's claim names the first contender, and was written after
 * that contender's node was created. A partitioned election (PATH/members
 * and PATH/partitions) is shown as its members and each partition's
 * owner, by the same test per partition.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zookeeper/zookeeper.h>

#include "config.h"
#include "ctl.h"
#include "election.h"
#include "zkread.h"

#define MEMBERS_DATA_MAX	4096	/* bytes of node data shown */

/* Node data "id[\nvalue]", kept as read. */
struct members_data {
	char	*buf;
	int	 len;		/* -1: the node holds no data */
	int	 idlen;		/* bytes before the first '\n' */
};

struct members_node {
	int64_t			 seq;
	char			*name;
	int64_t			 czxid;
	struct members_data	 data;
};

/* The election as read: contenders sorted by sequence, and the claim. */
struct members_view {
	struct members_node	*nodes;
	int			 n;
	struct members_data	 claim;		/* the election node's data */
	int64_t			 epoch;		/* its mzxid */
	int			 leader;	/* index in nodes, or -1 */
};

static void
members_data_read(struct members_data *d, const char *buf, int len)
{
	const char *nl;

	d->len = len;
	d->buf = malloc(len > 0 ? (size_t)len : 1);
	if (d->buf == NULL)
		abort();
	if (len > 0)
		memcpy(d->buf, buf, (size_t)len);
	/* "id", "id\nvalue" (a contender's claim data), or "id\0parts=..."
	 * (a member node's: doc/design.md, "Partitions"). */
	nl = len > 0 ? memchr(d->buf, '\n', (size_t)len) : NULL;
	d->idlen = nl != NULL ? (int)(nl - d->buf) : (len > 0 ? len : 0);
	nl = len > 0 ? memchr(d->buf, '\0', (size_t)d->idlen) : NULL;
	if (nl != NULL)
		d->idlen = (int)(nl - d->buf);
}

static bool
members_data_has_value(const struct members_data *d)
{
	return d->len > d->idlen;
}

static int
members_node_cmp(const void *a, const void *b)
{
	const struct members_node *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Reads path's data into d; returns the ZooKeeper result. */
static int
members_get(zhandle_t *zh, const char *path, struct members_data *d,
    struct Stat *st)
{
	char buf[MEMBERS_DATA_MAX];
	int len = sizeof(buf), rc;

	rc = zoo_get(zh, path, 0, buf, &len, st);
	if (rc != ZOK)
		return rc;
	if (st->dataLength > (int32_t)sizeof(buf))
		fprintf(stderr, "zkelectctl: members: %s holds %d bytes; only the "
		    "first %zu are shown\n", path, st->dataLength, sizeof(buf));
	members_data_read(d, buf, len);
	return ZOK;
}

/* Reads the election at path; 0, or the ZooKeeper error. */
static int
members_read(zhandle_t *zh, const char *path, struct members_view *v)
{
	struct String_vector kids;
	struct Stat st;
	struct members_node *nd;
	char child[CONFIG_ZK_PATH_MAX + ELECTION_NAME_MAX];
	int64_t seq;
	int i, rc;

	memset(v, 0, sizeof(*v));
	v->leader = -1;
	memset(&kids, 0, sizeof(kids));
	if ((rc = zoo_get_children2(zh, path, 0, &kids, &st)) != ZOK)
		return rc;
	v->nodes = calloc((size_t)kids.count + 1, sizeof(*v->nodes));
	if (v->nodes == NULL)
		abort();
	for (i = 0; i < kids.count; i++) {
		/* Contenders only, named as the agents and Curator name them. */
		if ((seq = election_node_seq(kids.data[i])) == -1)
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, kids.data[i]);
		nd = &v->nodes[v->n];
		rc = members_get(zh, child, &nd->data, &st);
		if (rc == ZNONODE)
			continue;	/* it left while we read */
		if (rc != ZOK) {
			deallocate_String_vector(&kids);
			return rc;
		}
		nd->seq = seq;
		nd->czxid = st.czxid;
		if ((nd->name = strdup(kids.data[i])) == NULL)
			abort();
		v->n++;
	}
	deallocate_String_vector(&kids);
	qsort(v->nodes, (size_t)v->n, sizeof(*v->nodes), members_node_cmp);

	/* Read after the queue: a claim newer than the queue names a
	 * contender we saw, or shows as not yet the first one's. */
	if ((rc = members_get(zh, path, &v->claim, &st)) != ZOK)
		return rc;
	v->epoch = st.mzxid;
	if (v->n > 0 && v->claim.idlen > 0 &&
	    v->claim.idlen == v->nodes[0].data.idlen &&
	    memcmp(v->claim.buf, v->nodes[0].data.buf, (size_t)v->claim.idlen) == 0 &&
	    v->nodes[0].czxid < v->epoch)
		v->leader = 0;
	return ZOK;
}

static void
members_view_free(struct members_view *v)
{
	int i;

	for (i = 0; i < v->n; i++) {
		free(v->nodes[i].name);
		free(v->nodes[i].data.buf);
	}
	free(v->nodes);
	free(v->claim.buf);
}

/* Writes bytes as a JSON string (UTF-8 passed through). */
void
members_json_bytes(FILE *f, const char *p, int len)
{
	int i;

	fputc('"', f);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void
members_json_data(FILE *f, const struct members_data *d)
{
	fputs("\"id\":", f);
	members_json_bytes(f, d->buf, d->idlen);
	fputs(",\"value\":", f);
	if (members_data_has_value(d))
		members_json_bytes(f, d->buf + d->idlen + 1, d->len - d->idlen - 1);
	else
		fputs("null", f);
}

/* Does another contender carry the id of contender i? Ids must be unique. */
static bool
members_id_twice(const struct members_view *v, int i)
{
	const struct members_data *a = &v->nodes[i].data, *b;
	int j;

	if (a->idlen <= 0)
		return false;
	for (j = 0; j < v->n; j++) {
		b = &v->nodes[j].data;
		if (j != i && b->idlen == a->idlen &&
		    memcmp(a->buf, b->buf, (size_t)a->idlen) == 0)
			return true;
	}
	return false;
}

static void
members_print_json(FILE *f, const char *path, const struct members_view *v)
{
	int i;

	fputs("{\"path\":", f);
	members_json_bytes(f, path, (int)strlen(path));
	fputs(",\"partitioned\":false,\"leader\":", f);
	if (v->leader >= 0) {
		fputc('{', f);
		members_json_data(f, &v->claim);
		fprintf(f, ",\"epoch\":%" PRId64 ",\"node\":", v->epoch);
		members_json_bytes(f, v->nodes[v->leader].name,
		    (int)strlen(v->nodes[v->leader].name));
		fputc('}', f);
	} else
		fputs("null", f);
	fputs(",\"claim\":", f);
	if (v->claim.idlen > 0) {
		fputc('{', f);
		members_json_data(f, &v->claim);
		fprintf(f, ",\"epoch\":%" PRId64 "}", v->epoch);
	} else
		fputs("null", f);
	fputs(",\"contenders\":[", f);
	for (i = 0; i < v->n; i++) {
		fprintf(f, "%s{\"position\":%d,\"node\":", i > 0 ? "," : "", i);
		members_json_bytes(f, v->nodes[i].name, (int)strlen(v->nodes[i].name));
		fputc(',', f);
		members_json_data(f, &v->nodes[i].data);
		fprintf(f, ",\"leader\":%s,\"duplicate_id\":%s}",
		    i == v->leader ? "true" : "false",
		    members_id_twice(v, i) ? "true" : "false");
	}
	fputs("]}\n", f);
}

/* Bytes for a terminal (free it): control characters escaped, C style. */
char *
members_text(const char *p, int len)
{
	char *out, *q;
	int i;

	if ((out = q = malloc((size_t)len * 4 + 1)) == NULL)
		abort();
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c == '\n') {
			*q++ = '\\';
			*q++ = 'n';
		} else if (c < 0x20 || c == 0x7f)
			q += sprintf(q, "\\x%02x", c);
		else
			*q++ = (char)c;
	}
	*q = '\0';
	return out;
}

static char *
members_text_id(const struct members_data *d)
{
	return members_text(d->buf, d->idlen);
}

static char *
members_text_value(const struct members_data *d)
{
	if (!members_data_has_value(d))
		return members_text("-", 1);
	return members_text(d->buf + d->idlen + 1, d->len - d->idlen - 1);
}

/* One warning line per id that more than one contender carries. */
static void
members_print_twins(FILE *f, const struct members_view *v)
{
	const struct members_data *a, *b;
	char *id;
	int i, j, count;

	for (i = 0; i < v->n; i++) {
		if (!members_id_twice(v, i))
			continue;
		a = &v->nodes[i].data;
		for (j = 0; j < i; j++) {	/* said at its first contender */
			b = &v->nodes[j].data;
			if (b->idlen == a->idlen &&
			    memcmp(a->buf, b->buf, (size_t)a->idlen) == 0)
				break;
		}
		if (j < i)
			continue;
		id = members_text_id(a);
		for (count = 0, j = i; j < v->n; j++) {
			b = &v->nodes[j].data;
			if (b->idlen == a->idlen &&
			    memcmp(a->buf, b->buf, (size_t)a->idlen) == 0)
				count++;
		}
		fprintf(f, "WARNING: id %s is used by %d contenders (positions",
		    id, count);
		for (count = 0, j = i; j < v->n; j++) {
			b = &v->nodes[j].data;
			if (b->idlen == a->idlen &&
			    memcmp(a->buf, b->buf, (size_t)a->idlen) == 0)
				fprintf(f, "%s %d", count++ > 0 ? "," : "", j);
		}
		fprintf(f, "); ids must be unique (election.id)\n");
		free(id);
	}
}

static void
members_print_text(FILE *f, const char *path, const struct members_view *v)
{
	char *id, *val;
	int i, wid = 2, wval = 5, len;
	bool values = members_data_has_value(&v->claim);

	fprintf(f, "%s: ", path);
	id = members_text_id(&v->claim);
	if (v->leader >= 0) {
		fprintf(f, "leader %s, epoch %" PRId64, id, v->epoch);
		if (members_data_has_value(&v->claim)) {
			val = members_text_value(&v->claim);
			fprintf(f, ", value %s", val);
			free(val);
		}
	} else if (v->claim.idlen == 0)
		fprintf(f, "no leader named");
	else
		fprintf(f, "no leader right now (the election node names %s, "
		    "epoch %" PRId64 ", not the first contender)", id, v->epoch);
	free(id);
	fprintf(f, ", %d contender%s\n", v->n, v->n == 1 ? "" : "s");
	if (v->n == 0)
		return;

	for (i = 0; i < v->n; i++) {
		id = members_text_id(&v->nodes[i].data);
		val = members_text_value(&v->nodes[i].data);
		if ((len = (int)strlen(id)) > wid)
			wid = len;
		if ((len = (int)strlen(val)) > wval)
			wval = len;
		if (members_data_has_value(&v->nodes[i].data))
			values = true;
		free(id);
		free(val);
	}
	fprintf(f, "%-3s  %-*s  %-6s  ", "POS", wid, "ID", "ROLE");
	if (values)
		fprintf(f, "%-*s  ", wval, "VALUE");
	fprintf(f, "NODE\n");
	for (i = 0; i < v->n; i++) {
		id = members_text_id(&v->nodes[i].data);
		fprintf(f, "%-3d  %-*s  %-6s  ", i, wid, id,
		    i == v->leader ? "leader" : i == 0 ? "first" : "queued");
		if (values) {
			val = members_text_value(&v->nodes[i].data);
			fprintf(f, "%-*s  ", wval, val);
			free(val);
		}
		fprintf(f, "%s\n", v->nodes[i].name);
		free(id);
	}
	members_print_twins(f, v);
}

/* A partitioned election: members (m-NNNNNNNNNN, data the id) and each
 * partition's view. */
struct members_parts {
	struct members_data	*members;
	char			**member_nodes;
	int			 nmembers;
	char			**names;
	struct members_view	*views;
	int			 nparts;
};

static int
members_str_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t lx = strlen(x), ly = strlen(y);
	bool nx = strspn(x, "0123456789") == lx, ny = strspn(y, "0123456789") == ly;

	/* Numbered partitions (count: N) in numeric order, then the rest. */
	if (nx && ny && lx != ly)
		return lx < ly ? -1 : 1;
	if (nx != ny)
		return nx ? -1 : 1;
	return strcmp(x, y);
}

static void
members_parts_free(struct members_parts *mp)
{
	int i;

	for (i = 0; i < mp->nmembers; i++) {
		free(mp->members[i].buf);
		free(mp->member_nodes[i]);
	}
	for (i = 0; i < mp->nparts; i++) {
		members_view_free(&mp->views[i]);
		free(mp->names[i]);
	}
	free(mp->members);
	free(mp->member_nodes);
	free(mp->views);
	free(mp->names);
}

/* Reads the members and every partition's election; 0, or the error. */
static int
members_read_parts(zhandle_t *zh, const char *path, struct members_parts *mp)
{
	struct String_vector kids;
	struct Stat st;
	char dir[CONFIG_ZK_PATH_MAX + 16], child[2 * CONFIG_ZK_PATH_MAX];
	int i, rc;

	memset(mp, 0, sizeof(*mp));
	memset(&kids, 0, sizeof(kids));
	snprintf(dir, sizeof(dir), "%s/members", path);
	if ((rc = zoo_get_children(zh, dir, 0, &kids)) != ZOK)
		return rc;
	qsort(kids.data, (size_t)kids.count, sizeof(*kids.data), members_str_cmp);
	mp->members = calloc((size_t)kids.count + 1, sizeof(*mp->members));
	mp->member_nodes = calloc((size_t)kids.count + 1,
	    sizeof(*mp->member_nodes));
	if (mp->members == NULL || mp->member_nodes == NULL)
		abort();
	for (i = 0; i < kids.count; i++) {
		snprintf(child, sizeof(child), "%s/%s", dir, kids.data[i]);
		rc = members_get(zh, child, &mp->members[mp->nmembers], &st);
		if (rc == ZNONODE)
			continue;	/* it left while we read */
		if (rc != ZOK) {
			deallocate_String_vector(&kids);
			return rc;
		}
		if ((mp->member_nodes[mp->nmembers++] = strdup(kids.data[i])) ==
		    NULL)
			abort();
	}
	deallocate_String_vector(&kids);
	snprintf(dir, sizeof(dir), "%s/partitions", path);
	if ((rc = zoo_get_children(zh, dir, 0, &kids)) != ZOK)
		return rc;
	qsort(kids.data, (size_t)kids.count, sizeof(*kids.data), members_str_cmp);
	mp->names = calloc((size_t)kids.count + 1, sizeof(*mp->names));
	mp->views = calloc((size_t)kids.count + 1, sizeof(*mp->views));
	if (mp->names == NULL || mp->views == NULL)
		abort();
	for (i = 0; i < kids.count; i++) {
		snprintf(child, sizeof(child), "%s/%s", dir, kids.data[i]);
		rc = members_read(zh, child, &mp->views[mp->nparts]);
		if (rc == ZNONODE) {
			members_view_free(&mp->views[mp->nparts]);
			continue;
		}
		if ((mp->names[mp->nparts++] = strdup(kids.data[i])) == NULL)
			abort();
		if (rc != ZOK) {
			deallocate_String_vector(&kids);
			return rc;
		}
	}
	deallocate_String_vector(&kids);
	return ZOK;
}

static void
members_print_parts_json(FILE *f, const char *path,
    const struct members_parts *mp)
{
	const struct members_view *v;
	int i;

	fputs("{\"path\":", f);
	members_json_bytes(f, path, (int)strlen(path));
	fputs(",\"partitioned\":true,\"members\":[", f);
	for (i = 0; i < mp->nmembers; i++) {
		fprintf(f, "%s{\"node\":", i > 0 ? "," : "");
		members_json_bytes(f, mp->member_nodes[i],
		    (int)strlen(mp->member_nodes[i]));
		fputc(',', f);
		members_json_data(f, &mp->members[i]);
		fputc('}', f);
	}
	fputs("],\"partitions\":[", f);
	for (i = 0; i < mp->nparts; i++) {
		v = &mp->views[i];
		fprintf(f, "%s{\"name\":", i > 0 ? "," : "");
		members_json_bytes(f, mp->names[i], (int)strlen(mp->names[i]));
		fputs(",\"leader\":", f);
		if (v->leader >= 0) {
			fputc('{', f);
			members_json_data(f, &v->claim);
			fprintf(f, ",\"epoch\":%" PRId64 "}", v->epoch);
		} else
			fputs("null", f);
		fputs(",\"claim\":", f);
		if (v->claim.idlen > 0) {
			fputc('{', f);
			members_json_data(f, &v->claim);
			fprintf(f, ",\"epoch\":%" PRId64 "}", v->epoch);
		} else
			fputs("null", f);
		fprintf(f, ",\"contenders\":%d}", v->n);
	}
	fputs("]}\n", f);
}

static void
members_print_parts_text(FILE *f, const char *path,
    const struct members_parts *mp, const char *view)
{
	const struct members_view *v;
	char *id, epoch[32];
	int i, wname = 9, wid = 5, len;

	fprintf(f, "%s: partitioned election, %d member%s, %d partition%s\n",
	    path, mp->nmembers, mp->nmembers == 1 ? "" : "s", mp->nparts,
	    mp->nparts == 1 ? "" : "s");
	fprintf(f, "(no one leader: each partition has its own; owners, "
	    "quotas and the balance: %s)\n", view);
	for (i = 0; i < mp->nmembers; i++) {
		id = members_text_id(&mp->members[i]);
		fprintf(f, "member %s  %s\n", id, mp->member_nodes[i]);
		free(id);
	}
	for (i = 0; i < mp->nparts; i++) {
		if ((len = (int)strlen(mp->names[i])) > wname)
			wname = len;
		id = members_text_id(&mp->views[i].claim);
		if ((len = (int)strlen(id)) > wid)
			wid = len;
		free(id);
	}
	fprintf(f, "%-*s  %-*s  %-20s  %s\n", wname, "PARTITION", wid, "OWNER",
	    "EPOCH", "CONTENDERS");
	for (i = 0; i < mp->nparts; i++) {
		v = &mp->views[i];
		id = v->leader >= 0 ? members_text_id(&v->claim) :
		    members_text("-", 1);
		if (v->leader >= 0)
			snprintf(epoch, sizeof(epoch), "%" PRId64, v->epoch);
		else
			strcpy(epoch, "-");
		fprintf(f, "%-*s  %-*s  %-20s  %d\n", wname, mp->names[i], wid,
		    id, epoch, v->n);
		free(id);
	}
}

/* The command that shows the cluster view, read the way we were told. */
static char *
members_cluster_hint(const struct config *conf, const char *source,
    const char *file)
{
	char *view;
	int rc;

	if (strcmp(source, "the command line") == 0)
		rc = asprintf(&view, "zkelectctl partitions --zookeeper %s %s",
		    conf->zk_servers, conf->election_path);
	else if (file != NULL)
		rc = asprintf(&view, "zkelectctl partitions -c %s", file);
	else
		rc = asprintf(&view, "zkelectctl partitions --cluster");
	if (rc == -1)
		abort();
	return view;
}

static void
members_usage(FILE *f)
{
	fprintf(f, "usage: zkelectctl members [-c FILE] [--json] "
	    "[--timeout DURATION]\n"
	    "       zkelectctl members --zookeeper SERVERS PATH [--json] "
	    "[--timeout DURATION]\n");
}

int
members_cmd(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "zookeeper", required_argument, NULL, 'z' },
		{ NULL, 0, NULL, 0 } };
	struct zkread r;
	struct members_view v;
	struct members_parts mp;
	struct config *conf;
	const char *servers = NULL, *file = NULL, *source = NULL;
	char *view;
	uint64_t timeout_ms = 10000;
	bool json = false;
	int ch, rc, status = EXIT_AGENT;

	/* 0: getopt starts afresh, options may follow PATH (main's "+"
	 * would otherwise stay in force). */
	optind = 0;
	while ((ch = getopt_long(argc, argv, "c:jz:", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			file = optarg;
			break;
		case 'z':
			servers = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 't':
			if (config_parse_duration(optarg, &timeout_ms) == -1 ||
			    timeout_ms == 0) {
				fprintf(stderr, "zkelectctl: members: invalid "
				    "--timeout '%s' (use e.g. 10s)\n", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			members_usage(stderr);
			return EXIT_USAGE;
		}
	}
	conf = zkread_config("members", file, servers, argc - optind,
	    argv + optind, &source, members_usage);
	if (conf == NULL)
		return EXIT_USAGE;
	if (zkread_open(&r, "members", conf, source, timeout_ms) == -1)
		goto out;
	if ((rc = zkread_partitioned(&r, conf->election_path)) == 1) {
		rc = members_read_parts(r.zh, conf->election_path, &mp);
		if (rc == ZOK) {
			if (json)
				members_print_parts_json(stdout,
				    conf->election_path, &mp);
			else {
				view = members_cluster_hint(conf, source, file);
				members_print_parts_text(stdout,
				    conf->election_path, &mp, view);
				free(view);
			}
			status = 0;
		} else
			fprintf(stderr, "zkelectctl: members: cannot read the "
			    "partitions of %s on %s: %s%s\n",
			    conf->election_path, conf->zk_servers, zerror(rc),
			    rc == ZNOAUTH ? " (check zookeeper.auth)" : "");
		members_parts_free(&mp);
		goto out;
	}
	rc = members_read(r.zh, conf->election_path, &v);
	if (rc == ZNONODE) {
		zkread_say_missing(&r);
		members_view_free(&v);
		goto out;
	}
	if (rc != ZOK) {
		fprintf(stderr, "zkelectctl: members: cannot read %s on %s: %s%s\n",
		    conf->election_path, conf->zk_servers, zerror(rc),
		    rc == ZNOAUTH ? " (check zookeeper.auth)" : "");
		members_view_free(&v);
		goto out;
	}
	if (json)
		members_print_json(stdout, conf->election_path, &v);
	else
		members_print_text(stdout, conf->election_path, &v);
	members_view_free(&v);
	status = 0;
out:
	zkread_close(&r);
	config_free(conf);
	return status;
}
