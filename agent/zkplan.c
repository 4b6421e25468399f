/* SPDX-License-Identifier: MIT */
/*
 * Election actions to ZooKeeper calls (zkplan.h). Pure: no ZooKeeper, no
 * libevent, no logging; zk.c and the simulator both run what it says.
 */
#include <stdio.h>
#include <string.h>

#include "zkplan.h"

/* path into buf, or -1 if it would not fit (never sent cut short). */
static int
zkplan_path(char *buf, size_t len, const char *a, const char *b,
    const char *c)
{
	int n = snprintf(buf, len, "%s%s%s", a, b, c);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static struct zkplan_call *
zkplan_call(struct zkplan *p, enum zkplan_call_type type)
{
	struct zkplan_call *c = &p->calls[p->ncalls++];

	/* Field by field: a plan is large, and built for every action. */
	c->type = type;
	c->path[0] = '\0';
	c->parents = false;
	c->answers = true;
	c->watch = ZKW_NONE;
	c->data = NULL;
	c->datalen = 0;
	c->nitems = 0;
	return c;
}

/* A call on the election node itself. */
static struct zkplan_call *
zkplan_on_path(struct zkplan *p, enum zkplan_call_type type, const char *path)
{
	struct zkplan_call *c = zkplan_call(p, type);

	(void)zkplan_path(c->path, sizeof(c->path), path, "", "");
	return c;
}

/* A call on contender node name; NULL if its path would not fit. */
static struct zkplan_call *
zkplan_on_node(struct zkplan *p, enum zkplan_call_type type, const char *path,
    const char *name)
{
	struct zkplan_call *c = zkplan_call(p, type);

	if (zkplan_path(c->path, sizeof(c->path), path, "/", name) == -1)
		return NULL;
	return c;
}

static struct zkplan_item *
zkplan_item(struct zkplan_call *c, enum zkplan_item_type type)
{
	struct zkplan_item *it = &c->items[c->nitems++];

	it->type = type;
	it->path[0] = '\0';
	it->version = -1;
	it->data = NULL;
	it->datalen = 0;
	return it;
}

/* The claim or the release: one atomic multi (see election.h). */
static int
zkplan_multi(struct zkplan *p, const struct election_action *a,
    const char *path)
{
	struct zkplan_call *c = zkplan_on_path(p, ZKC_MULTI, path);
	struct zkplan_item *it;

	if (a->type == ACT_CLAIM) {
		/* Our node still exists, and the election node is written
		 * with our claim: its mzxid is the epoch. The quorum orders it
		 * after our node's creation and after every earlier claim. */
		it = zkplan_item(c, ZKI_CHECK);
		if (zkplan_path(it->path, sizeof(it->path), path, "/",
		    a->name) == -1)
			return -1;
		it = zkplan_item(c, ZKI_SET);
		(void)zkplan_path(it->path, sizeof(it->path), path, "", "");
		it->data = a->data;
		it->datalen = a->datalen;
		return 0;
	}
	/* Let go of our node; a leader names its successor in the same
	 * transaction (or says nobody leads), so the successor needs no
	 * write of its own. */
	if (a->successor[0] != '\0') {
		it = zkplan_item(c, ZKI_CHECK);
		if (zkplan_path(it->path, sizeof(it->path), path, "/",
		    a->successor) == -1)
			return -1;
	}
	it = zkplan_item(c, ZKI_DELETE);
	if (zkplan_path(it->path, sizeof(it->path), path, "/", a->name) == -1)
		return -1;
	if (a->write_claim) {
		it = zkplan_item(c, ZKI_SET);
		(void)zkplan_path(it->path, sizeof(it->path), path, "", "");
		it->data = a->data;
		it->datalen = a->datalen;
	}
	return 0;
}

int
zkplan_build(const struct election_action *a, const char *path,
    const char *prefix, const char *uuid, struct zkplan *p)
{
	struct zkplan_call *c;

	p->what = ZKF_NONE;
	p->name[0] = '\0';
	p->ncalls = 0;
	switch (a->type) {
	case ACT_CREATE_PARENT:
		/* Every component, pipelined; the last one answers for all. */
		p->what = ZKF_PARENT;
		zkplan_on_path(p, ZKC_CREATE, path)->parents = true;
		return 0;
	case ACT_CREATE:
		p->what = ZKF_CREATE;
		c = zkplan_call(p, ZKC_CREATE_SEQ);
		c->data = a->data;
		c->datalen = a->datalen;
		return zkplan_path(c->path, sizeof(c->path), prefix, uuid,
		    "-latch-");
	case ACT_LIST:
		p->what = ZKF_LIST;
		if (a->sync)
			zkplan_on_path(p, ZKC_SYNC, path)->answers = false;
		zkplan_on_path(p, ZKC_CHILDREN, path);
		return 0;
	case ACT_WATCH_CHILDREN:
		p->what = ZKF_LIST;
		zkplan_on_path(p, ZKC_CHILDREN, path)->watch = ZKW_CHILDREN;
		return 0;
	case ACT_WATCH_PRED:
	case ACT_WATCH_SELF:
		/* Rule 5: getData, not exists, so that no watch lingers on a
		 * node that is already gone. */
		p->what = a->type == ACT_WATCH_PRED ? ZKF_PRED_SET : ZKF_SELF_SET;
		snprintf(p->name, sizeof(p->name), "%s", a->name);
		if ((c = zkplan_on_node(p, ZKC_GET, path, a->name)) == NULL)
			return -1;
		c->watch = a->type == ACT_WATCH_PRED ? ZKW_PRED : ZKW_SELF;
		return 0;
	case ACT_GET_OWNER:
	case ACT_CHECK_AHEAD:
		p->what = a->type == ACT_GET_OWNER ? ZKF_OWNER : ZKF_AHEAD;
		snprintf(p->name, sizeof(p->name), "%s", a->name);
		return zkplan_on_node(p, ZKC_EXISTS, path, a->name) != NULL ?
		    0 : -1;
	case ACT_READ_SUCCESSOR:
		p->what = ZKF_SUCCESSOR;
		snprintf(p->name, sizeof(p->name), "%s", a->name);
		return zkplan_on_node(p, ZKC_GET, path, a->name) != NULL ?
		    0 : -1;
	case ACT_CLAIM:
	case ACT_RELEASE:
		p->what = a->type == ACT_CLAIM ? ZKF_CLAIM : ZKF_RELEASE;
		snprintf(p->name, sizeof(p->name), "%s", a->name);
		return zkplan_multi(p, a, path);
	case ACT_RENEW:
		/* A sync (it goes through the ZooKeeper leader), then a read
		 * of our own node (still ours after the sync: the session was
		 * alive at the leader) and of the election node (whose claim
		 * stands). Replies come in order; the last one reports. */
		p->what = ZKF_RENEW;
		snprintf(p->name, sizeof(p->name), "%s", a->name);
		zkplan_on_path(p, ZKC_SYNC, path);
		if (zkplan_on_node(p, ZKC_EXISTS, path, a->name) == NULL)
			return -1;
		zkplan_on_path(p, ZKC_GET, path);
		return 0;
	case ACT_WATCH_CLAIM:
	case ACT_READ_CLAIM:
		p->what = ZKF_CLAIM_DATA;
		c = zkplan_on_path(p, ZKC_GET, path);
		if (a->type == ACT_WATCH_CLAIM)
			c->watch = ZKW_CLAIM;
		return 0;
	case ACT_KICK:
	case ACT_NEW_SESSION:
	case ACT_NOTIFY:
	case ACT_EXIT:
		return 0;
	}
	return 0;
}

int
zkplan_member(const struct fleet_action *fa, const char *members_path,
    const char *parts_path, const char *data, int datalen, struct zkplan *p)
{
	struct zkplan_call *c;

	p->what = ZKF_NONE;
	p->name[0] = '\0';
	p->ncalls = 0;
	switch (fa->type) {
	case FACT_MEMBER_CREATE:
		/* The members' node and the partitions' (their replies do not
		 * matter: they may exist), then ours. */
		p->what = ZKF_MEMBER_CREATE;
		c = zkplan_on_path(p, ZKC_CREATE, members_path);
		c->parents = true;
		c->answers = false;
		zkplan_on_path(p, ZKC_CREATE, parts_path)->answers = false;
		c = zkplan_call(p, ZKC_CREATE_SEQ);
		c->data = data;
		c->datalen = datalen;
		return zkplan_path(c->path, sizeof(c->path), members_path,
		    "/m-", "");
	case FACT_MEMBERS_LIST:
		/* Rule 6: a create whose reply was lost, and a reconnect to a
		 * lagging server, must not hide our node: the sync makes the
		 * listing current. */
		p->what = ZKF_MEMBERS;
		zkplan_on_path(p, ZKC_SYNC, members_path)->answers = false;
		zkplan_on_path(p, ZKC_CHILDREN, members_path)->watch =
		    ZKW_MEMBERS;
		return 0;
	case FACT_MEMBER_READ:
		/* With a watch on its data: a drain or a resign changes it. */
		p->what = ZKF_MEMBER_DATA;
		snprintf(p->name, sizeof(p->name), "%s", fa->name);
		if ((c = zkplan_on_node(p, ZKC_GET, members_path,
		    fa->name)) == NULL)
			return -1;
		c->watch = ZKW_MEMBER_DATA;
		return 0;
	case FACT_MEMBER_DELETE:
		p->what = ZKF_MEMBER_DELETE;
		snprintf(p->name, sizeof(p->name), "%s", fa->name);
		return zkplan_on_node(p, ZKC_DELETE, members_path, fa->name) !=
		    NULL ? 0 : -1;
	case FACT_MEMBER_SET: {
		/* Our data, as one multi of one set (any version). */
		struct zkplan_item *it;

		p->what = ZKF_MEMBER_SET;
		snprintf(p->name, sizeof(p->name), "%s", fa->name);
		c = zkplan_on_path(p, ZKC_MULTI, members_path);
		it = zkplan_item(c, ZKI_SET);
		if (zkplan_path(it->path, sizeof(it->path), members_path, "/",
		    fa->name) == -1)
			return -1;
		it->data = data;
		it->datalen = datalen;
		return 0;
	}
	case FACT_SESSION_RENEW:
		/* One sync, through the ZooKeeper leader: its answer on this
		 * session's connection is the proof the lease needs. The
		 * member node is not read: the members' watch says if it goes
		 * (doc/design.md, "One session, flat cost"). */
		p->what = ZKF_SESSION_RENEW;
		snprintf(p->name, sizeof(p->name), "%s", fa->name);
		zkplan_on_path(p, ZKC_SYNC, members_path);
		return 0;
	default:
		return 0;
	}
}

int
zkplan_answers(const struct zkplan *p)
{
	int i, n = 0;

	for (i = 0; i < p->ncalls; i++)
		if (p->calls[i].answers)
			n++;
	return n;
}

const char *
zkplan_call_name(enum zkplan_call_type t)
{
	static const char *const names[] = {
		"create", "create sequential", "sync", "get", "exists",
		"children", "multi", "delete",
	};

	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] :
	    "?";
}
