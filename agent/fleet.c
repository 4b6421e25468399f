/* SPDX-License-Identifier: MIT */
/*
 * One ZooKeeper session and the elections it takes part in (doc/design.md,
 * "Partitions" and "Architecture"), as a pure state machine. The driver
 * (zk.c, or the simulator) turns what ZooKeeper says into fleet events and
 * performs the actions fleet_step() returns; every election is stepped
 * here. A single election is a fleet of one unnamed part. With partitions
 * the fleet also owns:
 *  - the member node (one ephemeral sequential node per live agent, made on
 *    each new session) and the member listing, whose ids the assignment
 *    (assign.c) reads with each partition's leader;
 *  - the session's renewal: one sync every renewal period, whatever the
 *    number of partitions, which extends every leading partition's lease;
 *  - the graceful stop: the member node first, then each leader hands over
 *    once a successor queues, the rest after FLEET_STOP_WAIT_MS.
 * Work per event does not grow with the number of partitions: the parts'
 * next ticks are kept in a heap, and what the renewal and the stop ask of
 * the parts (who leads, who holds a node, who has stopped) in counts kept
 * as each part steps.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "assign.h"
#include "config.h"
#include "fleet.h"
#include "log.h"

static void	fleet_feed(struct fleet *, struct part *,
		    const struct election_event *, struct fleet_actions *);
static void	fleet_assign(struct fleet *, struct fleet_actions *);
static uint64_t	fleet_join_end(const struct fleet *);
static void	fleet_look(struct fleet *, struct part *);
static void	fleet_check_stop(struct fleet *, struct fleet_actions *);
static void	fleet_avoid_check(struct fleet *, struct part *);
static void	fleet_member_set(struct fleet *, struct fleet_actions *);
static void	fleet_member_data_build(struct fleet *);
static struct fleet_member *fleet_member_find(struct fleet *, const char *);

static struct fleet_action *
fleet_push(struct fleet_actions *out, enum fleet_action_type type, int part)
{
	struct fleet_action *a;

	if (out->n == out->cap) {
		out->cap = out->cap == 0 ? 16 : out->cap * 2;
		if ((out->a = reallocarray(out->a, (size_t)out->cap,
		    sizeof(*out->a))) == NULL)
			abort();
	}
	a = &out->a[out->n++];
	memset(a, 0, sizeof(*a));
	a->type = type;
	a->part = part;
	return a;
}

/* --- The parts' next ticks: a binary heap on due (0: not in it). --- */

static bool
fleet_heap_less(const struct fleet *f, int i, int j)
{
	return f->parts[f->heap[i]].due < f->parts[f->heap[j]].due;
}

static void
fleet_heap_swap(struct fleet *f, int i, int j)
{
	int t = f->heap[i];

	f->heap[i] = f->heap[j];
	f->heap[j] = t;
	f->parts[f->heap[i]].heap = i;
	f->parts[f->heap[j]].heap = j;
}

static void
fleet_heap_fix(struct fleet *f, int i)
{
	int c;

	while (i > 0 && fleet_heap_less(f, i, (i - 1) / 2)) {
		fleet_heap_swap(f, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		c = 2 * i + 1;
		if (c >= f->nheap)
			break;
		if (c + 1 < f->nheap && fleet_heap_less(f, c + 1, c))
			c++;
		if (!fleet_heap_less(f, c, i))
			break;
		fleet_heap_swap(f, i, c);
		i = c;
	}
}

/* The part's next tick changed (0: none). */
static void
fleet_schedule(struct fleet *f, struct part *pt)
{
	uint64_t due = election_next_tick(&pt->e);
	int i;

	if (due == pt->due && (due == 0) == (pt->heap < 0))
		return;
	pt->due = due;
	if (due == 0) {
		if ((i = pt->heap) < 0)
			return;
		fleet_heap_swap(f, i, --f->nheap);
		pt->heap = -1;
		if (i < f->nheap)
			fleet_heap_fix(f, i);
		return;
	}
	if (pt->heap < 0) {
		pt->heap = f->nheap;
		f->heap[f->nheap++] = pt->idx;
	}
	fleet_heap_fix(f, pt->heap);
}

/* --- Counting as parts step --- */

static bool
fleet_busy(enum election_role role, enum election_phase phase)
{
	return role == ELECTION_LEADER || phase == PHASE_RELEASING ||
	    phase == PHASE_DELETING;
}

/*
 * Who leads the partition, as an input of the assignment: us while we
 * lead; else whom the last claim read names ("" for nobody), even our own
 * id (a claim that names us while we do not lead: every other agent reads
 * the same claim, so we must count it as they do); NULL before any claim
 * was read.
 */
const char *
fleet_part_leader(const struct part *pt)
{
	const struct election *e = &pt->e;

	if (e->role == ELECTION_LEADER)
		return e->id;
	if (e->claim_seen == 0)
		return NULL;
	return e->claim_known ? e->claim_id : "";
}

/* Our ownership changed, or our assignment: a rebalance ends when every
 * partition we own is ours and every one that is ours we own. */
static void
fleet_settle(struct fleet *f)
{
	struct fleet_view *v = &f->view;

	if (f->nunsettled == 0 && v->rebalance_started != 0) {
		v->rebalance_ms = f->now - v->rebalance_started;
		v->rebalance_started = 0;
		log_info("partitions: settled in %" PRIu64 " ms: leading %d of "
		    "%d, with %d members", v->rebalance_ms, v->owned, f->nparts,
		    v->count);
	}
}

/* Keeps the counts (leading, queued, busy, stopped, owned, settled) as the
 * part's election now is. */
static void
fleet_count(struct fleet *f, struct part *pt)
{
	const struct election *e = &pt->e;
	bool leading = e->phase == PHASE_LEADING;
	bool queued = e->node[0] != '\0';
	bool releasing = e->phase == PHASE_RELEASING;
	bool owned = e->role == ELECTION_LEADER;
	bool was_unsettled = pt->owned != pt->assigned;

	if (leading != pt->leading)
		f->nleading += leading ? 1 : -1;
	if (queued != pt->queued)
		f->nqueued += queued ? 1 : -1;
	if (releasing != pt->releasing) {
		f->nreleasing += releasing ? 1 : -1;
		f->release_gate = f->serial_releases ? f->nreleasing : 0;
		if (f->nreleasing == 0)
			f->release_wake = true;
	}
	pt->leading = leading;
	pt->queued = queued;
	pt->releasing = releasing;
	if (!f->partitioned)
		return;
	if (owned != pt->owned) {
		pt->owned = owned;
		f->view.owned += owned ? 1 : -1;
		f->view.ownership_changes++;
	}
	if ((pt->owned != pt->assigned) != was_unsettled)
		f->nunsettled += was_unsettled ? -1 : 1;
}

/* --- Stepping one part --- */

/*
 * Steps one part's election and passes its actions on: its ZooKeeper calls
 * and notifications as they are; a kick, a new session and the exit once
 * for the fleet.
 */
static void
fleet_feed(struct fleet *f, struct part *pt, const struct election_event *ev,
    struct fleet_actions *out)
{
	struct election *e = &pt->e;
	struct election_actions acts;
	struct election_glance before;
	struct fleet_action *fa;
	const char *leader;
	bool busy, stopped;
	int i;

	acts.n = 0;		/* election_push() clears each action */
	election_glance(e, &before);
	election_step(e, ev, &acts);
	if (f->stepped != NULL)
		f->stepped(f->stepped_arg, pt, &before, &acts);
	for (i = 0; i < acts.n; i++) {
		switch (acts.a[i].type) {
		case ACT_KICK:
			/* Partitions ask together: one kick moves the
			 * connection. */
			if (f->partitioned && f->last_kick_at != 0 &&
			    ev->now < f->last_kick_at + 100)
				break;
			f->last_kick_at = ev->now;
			fa = fleet_push(out, FACT_KICK, pt->idx);
			fa->a = acts.a[i];
			break;
		case ACT_NEW_SESSION:
			/* Once for all parts, after the fan-out. */
			f->new_session_owed = true;
			break;
		case ACT_EXIT:
			if (!f->partitioned) {
				fa = fleet_push(out, FACT_EXIT, -1);
				/*
				 * Closing the session is a transaction of its
				 * own: right after a release that named a
				 * successor it would compete with the
				 * successor's read of the election node.
				 */
				fa->linger_ms = e->release_succ ?
				    ELECTION_RELEASE_LINGER_MS : 0;
			}
			break;
		default:
			fa = fleet_push(out, FACT_ELECTION, pt->idx);
			fa->a = acts.a[i];
			break;
		}
	}
	busy = fleet_busy(e->role, e->phase);
	stopped = e->phase == PHASE_STOPPED;
	if (busy != fleet_busy(before.role, before.phase))
		f->nbusy += busy ? 1 : -1;
	if (stopped != (before.phase == PHASE_STOPPED))
		f->nstopped += stopped ? 1 : -1;
	fleet_count(f, pt);
	fleet_avoid_check(f, pt);
	fleet_schedule(f, pt);
	if (f->partitioned)
		fleet_look(f, pt);
	/*
	 * A partition's leader is an input of the assignment: assign again
	 * once the events at hand are applied (fleet_flush). Unless the new
	 * leader is the member the last assignment gave it: run again, it
	 * would give the same answer (each member keeps what it holds up to
	 * its quota, and that one was within it), so a start or a rebalance
	 * settling does not assign over and over.
	 */
	if (f->partitioned && (leader = fleet_part_leader(pt)) != NULL &&
	    strcmp(leader, pt->leader) != 0) {
		if (pt->owner >= 0 &&
		    strcmp(leader, f->owner_ids[pt->owner]) == 0)
			snprintf(pt->leader, sizeof(pt->leader), "%s", leader);
		else
			f->assign_owed = true;
	}
	if (e->index != before.index) {
		if (f->partitioned)
			f->view.index++;
		fleet_push(out, FACT_CHANGED, pt->idx);
		if (f->partitioned && pt->owned != (before.role ==
		    ELECTION_LEADER))
			fleet_settle(f);
	}
	if (f->stopping)
		fleet_check_stop(f, out);
}

/* Every part hears ev (its generation its own), then a new session is
 * opened once if any asked. */
static void
fleet_fan_out(struct fleet *f, struct election_event *ev,
    struct fleet_actions *out)
{
	int i;

	f->new_session_owed = false;
	for (i = 0; i < f->nparts; i++) {
		ev->gen = f->parts[i].e.gen;
		fleet_feed(f, &f->parts[i], ev, out);
	}
}

static void
fleet_new_session_owed(struct fleet *f, struct fleet_actions *out)
{
	if (!f->new_session_owed)
		return;
	f->new_session_owed = false;
	fleet_push(out, FACT_NEW_SESSION, -1);
}

/* --- Partitions: the member node, the listing, the assignment --- */

static void
fleet_assign_part(struct fleet *f, struct part *pt, bool assigned,
    struct fleet_actions *out)
{
	struct election_event ev;
	bool was = pt->owned != pt->assigned;

	pt->assigned = assigned;
	if ((pt->owned != pt->assigned) != was)
		f->nunsettled += was ? -1 : 1;
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_ASSIGN;
	ev.now = f->now;
	ev.assigned = assigned;
	fleet_feed(f, pt, &ev, out);
}

static int
fleet_member_cmp(const void *va, const void *vb)
{
	const struct fleet_member *a = va, *b = vb;

	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Orders partition names as every agent does: by length, then bytes (so
 * "2" before "10"). */
static int
fleet_name_cmp(const void *va, const void *vb)
{
	const char *a = *(const char *const *)va, *b = *(const char *const *)vb;
	size_t la = strlen(a), lb = strlen(b);

	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(a, b);
}

/* One member's partitions as a sorted list of names (into *buf, owned by
 * the caller); spec NULL: ours. Returns the count, -1 if unreadable. */
static int
fleet_spec_names(const struct fleet *f, const char *spec, char ***names,
    char **buf)
{
	char **v = NULL, *p, *end;
	long n = 0, i;

	*names = NULL;
	*buf = NULL;
	if (spec == NULL)
		spec = f->parts_spec;
	if (strncmp(spec, "count:", 6) == 0) {
		n = strtol(spec + 6, &end, 10);
		if (*end != '\0' || n < 0 || n > 1 << 20)
			return -1;
		if ((v = calloc((size_t)n + 1, sizeof(*v))) == NULL ||
		    (*buf = malloc((size_t)n * 12 + 1)) == NULL)
			abort();
		for (i = 0, p = *buf; i < n; i++) {
			v[i] = p;
			p += sprintf(p, "%ld", i) + 1;
		}
	} else if (strncmp(spec, "names:", 6) == 0) {
		if ((*buf = strdup(spec + 6)) == NULL)
			abort();
		for (p = *buf; *p != '\0'; n++) {
			if ((v = reallocarray(v, (size_t)n + 2, sizeof(*v))) == NULL)
				abort();
			v[n] = p;
			if ((p = strchr(p, ',')) == NULL)
				p = v[n] + strlen(v[n]);
			else
				*p++ = '\0';
		}
		qsort(v, (size_t)n, sizeof(*v), fleet_name_cmp);
	} else
		return -1;
	*names = v;
	return (int)n;
}

static bool
fleet_spec_has(char **names, int n, const char *name)
{
	return n > 0 && bsearch(&name, names, (size_t)n, sizeof(*names),
	    fleet_name_cmp) != NULL;
}

/* The leader the assignment counts for part pt, as an index into am. */
static int
fleet_cur(struct part *pt, const struct assign_member *am, int k)
{
	const char *leader;
	int j;

	/* The last leader seen (a leader gone is no member). */
	if ((leader = fleet_part_leader(pt)) != NULL)
		snprintf(pt->leader, sizeof(pt->leader), "%s", leader);
	for (j = 0; j < k; j++)
		if (strcmp(am[j].id, pt->leader) == 0)
			return j;
	return -1;
}

/* Every member runs our partitions: assign.c over them. owner[i]: part
 * i's member, as an index into am. */
static int
fleet_assign_same(struct fleet *f, const struct assign_member *am, int k,
    int *owner)
{
	const char **names;
	int *cur, i, rc;

	names = calloc((size_t)f->nparts, sizeof(*names));
	cur = calloc((size_t)f->nparts, sizeof(*cur));
	if (names == NULL || cur == NULL)
		abort();
	for (i = 0; i < f->nparts; i++) {
		names[i] = f->parts[i].name;
		cur[i] = fleet_cur(&f->parts[i], am, k);
	}
	rc = assign_partitions(am, k, names, f->nparts,
	    f->assign_unsticky ? NULL : cur, owner);
	free(names);
	free(cur);
	return rc;
}

/* Does member m avoid partition name (a resign's hold)? */
static bool
fleet_avoids(const struct fleet_member *m, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	for (p = m->avoid; p != NULL && *p != '\0'; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
		if (strchr(p, ',') == NULL)
			break;
	}
	return false;
}

/*
 * The members do not all run the same partitions (the middle of a rolling
 * change of partitions.count): every agent assigns the union, each
 * partition only to a member that runs it (assign_partitions_among), so
 * that no partition a live agent knows is left to one that does not. Who
 * leads a partition counts only where every member runs it (only those
 * agents read its claim, and all must count from the same inputs).
 */
static int
fleet_assign_union(struct fleet *f, const struct assign_member *am,
    const struct fleet_member *const *mem, int k, int *part_owner)
{
	char ***sets, **bufs, **all = NULL, **u;
	int *nsets, *owner, *cur, n = 0, nu = 0, i, j, rc = -1;
	const char *name;
	bool *eligible, everywhere;
	struct part *pt;

	sets = calloc((size_t)k, sizeof(*sets));
	bufs = calloc((size_t)k, sizeof(*bufs));
	nsets = calloc((size_t)k, sizeof(*nsets));
	if (sets == NULL || bufs == NULL || nsets == NULL)
		abort();
	for (j = 0; j < k; j++) {
		if ((nsets[j] = fleet_spec_names(f, mem[j]->parts, &sets[j],
		    &bufs[j])) < 0 && (nsets[j] = fleet_spec_names(f, NULL,
		    &sets[j], &bufs[j])) < 0)
			goto out;
		n += nsets[j];
	}
	if ((all = calloc((size_t)n + 1, sizeof(*all))) == NULL)
		abort();
	for (j = 0, n = 0; j < k; j++)
		for (i = 0; i < nsets[j]; i++)
			all[n++] = sets[j][i];
	qsort(all, (size_t)n, sizeof(*all), fleet_name_cmp);
	for (i = 0; i < n; i++)
		if (nu == 0 || strcmp(all[nu - 1], all[i]) != 0)
			all[nu++] = all[i];
	u = all;
	eligible = calloc((size_t)nu * (size_t)k + 1, sizeof(*eligible));
	owner = calloc((size_t)nu + 1, sizeof(*owner));
	cur = calloc((size_t)nu + 1, sizeof(*cur));
	if (eligible == NULL || owner == NULL || cur == NULL)
		abort();
	for (i = 0; i < nu; i++) {
		bool *el = &eligible[(size_t)i * (size_t)k], any = false;

		everywhere = true;
		for (j = 0; j < k; j++) {
			el[j] = fleet_spec_has(sets[j], nsets[j], u[i]);
			everywhere &= el[j];
		}
		/* A resign's hold: not to the member that avoids it, unless
		 * every member that runs it does (it keeps an owner). */
		for (j = 0; j < k; j++)
			any |= el[j] && !fleet_avoids(mem[j], u[i]);
		for (j = 0; j < k && any; j++)
			el[j] = el[j] && !fleet_avoids(mem[j], u[i]);
		cur[i] = -1;
		if (everywhere && (pt = fleet_part_named(f, u[i],
		    strlen(u[i]))) != NULL)
			cur[i] = fleet_cur(pt, am, k);
	}
	rc = assign_partitions_among(am, k, (const char *const *)u, nu,
	    f->assign_unsticky ? NULL : cur, eligible, owner);
	for (i = 0; rc == 0 && i < f->nparts; i++) {
		name = f->parts[i].name;
		j = -1;
		{
			char **hit = bsearch(&name, u, (size_t)nu, sizeof(*u),
			    fleet_name_cmp);

			if (hit != NULL)
				j = (int)(hit - u);
		}
		part_owner[i] = j >= 0 ? owner[j] : -1;
	}
	free(eligible);
	free(owner);
	free(cur);
out:
	for (j = 0; j < k; j++) {
		free(sets[j]);
		free(bufs[j]);
	}
	free(sets);
	free(bufs);
	free(nsets);
	free(all);
	return rc;
}

/*
 * Every member's id is known, or a partition's leader changed: who should
 * own what (assign.c), from the members (and the partitions each runs) and
 * each partition's leader as we see them.
 */
static void
fleet_assign(struct fleet *f, struct fleet_actions *out)
{
	struct fleet_view *v = &f->view;
	const struct fleet_member **mem;
	struct assign_member *am;
	int i, j, k = 0, self = -1, assigned = 0, before, was, rc = 0,
	    known = 0, drained = 0;
	bool changed = false, mine, avoid = false, ignore_drain;
	int *owner;

	if (f->join_until != 0 && f->now < fleet_join_end(f)) {
		f->assign_owed = true;	/* the window's end assigns */
		return;
	}
	f->join_until = 0;
	f->assign_owed = false;
	f->assigned_at = f->now;
	if (f->stopping)
		return;
	/* A drained member counts for nothing, unless every member is
	 * drained: then the drain is ignored, so that partitions keep
	 * owners. */
	for (i = 0; i < f->nmembers; i++) {
		known += f->members[i].known;
		drained += f->members[i].known && f->members[i].drained;
	}
	ignore_drain = (drained > 0 && drained == known) || f->drain_counted;
	if (ignore_drain != v->drain_ignored && ignore_drain)
		log_warnx("partitions: every member is drained; the drain is "
		    "ignored until one is not, so that partitions keep owners");
	v->drain_ignored = ignore_drain;
	v->drained = drained;
	am = calloc((size_t)f->nmembers + 1, sizeof(*am));
	mem = calloc((size_t)f->nmembers + 1, sizeof(*mem));
	owner = calloc((size_t)f->nparts, sizeof(*owner));
	if (am == NULL || mem == NULL || owner == NULL)
		abort();
	for (i = 0; i < f->nmembers; i++) {
		if (!f->members[i].known ||
		    (f->members[i].drained && !ignore_drain))
			continue;
		if (strcmp(f->members[i].name, f->member_node) == 0)
			self = k;
		avoid |= f->members[i].avoid != NULL && !f->avoid_ignored;
		am[k].id = f->members[i].id;
		am[k].seq = f->members[i].seq;
		mem[k++] = &f->members[i];
	}
	before = v->count;
	was = v->assigned;
	if (k > 0)
		rc = v->disagree == 0 && !avoid ?
		    fleet_assign_same(f, am, k, owner) :
		    fleet_assign_union(f, am, mem, k, owner);
	if (rc == -1 || k == 0) {
		k = 0;
		for (i = 0; i < f->nparts; i++)
			owner[i] = -1;
	}
	/* Each partition's member, kept to tell a change of leader the
	 * assignment already made from one that asks for another. */
	if ((f->owner_ids = reallocarray(f->owner_ids, (size_t)k + 1,
	    sizeof(*f->owner_ids))) == NULL)
		abort();
	for (j = 0; j < k; j++)
		snprintf(f->owner_ids[j], sizeof(f->owner_ids[j]), "%s",
		    am[j].id);
	for (i = 0; i < f->nparts; i++) {
		f->parts[i].owner = owner[i];
		mine = self >= 0 && owner[i] == self;
		if (mine)
			assigned++;
		if (mine != f->parts[i].assigned) {
			changed = true;
			fleet_assign_part(f, &f->parts[i], mine, out);
		}
	}
	/* Members: every live one, drained ones too (the quotas count
	 * only the others). */
	if (k > 0 && !ignore_drain)
		k += drained;
	v->count = k;
	v->assigned = assigned;
	if (k != before || changed) {
		log_info("partitions: %d members (%d before)%s; %d of %d "
		    "assigned to us (%d before)", k, before, self >= 0 ? "" :
		    f->drained ? ", not counting us: drained" :
		    ", not one of them yet", assigned, f->nparts, was);
		v->index++;
		if (v->rebalance_started == 0)
			v->rebalance_started = f->now;
		fleet_settle(f);
		fleet_push(out, FACT_CHANGED, -1);
	}
	free(am);
	free(mem);
	free(owner);
}

void
fleet_actions_free(struct fleet_actions *out)
{
	free(out->a);
	memset(out, 0, sizeof(*out));
}

/*
 * When an assignment owed to a change of a partition's leader is due: at
 * most one every FLEET_ASSIGN_GAP_MS. A start or a rebalance changes
 * thousands of leaders over a second or two, and each assignment costs
 * O(N K log N K) (assign.c); a change of the members assigns at once.
 */
#define FLEET_ASSIGN_GAP_MS	100

static uint64_t
fleet_assign_due(const struct fleet *f)
{
	uint64_t t, end;

	if (!f->assign_owed)
		return 0;
	t = f->assigned_at != 0 ? f->assigned_at + FLEET_ASSIGN_GAP_MS : 1;
	end = f->join_until != 0 ? fleet_join_end(f) : 0;
	return end > t ? end : t;
}

/*
 * The join window (doc/design.md, "Thousands of partitions"): an agent
 * that has just made its first member node assigns once the member list
 * has stood still for a quiet span, and no later than FLEET_JOIN_SPANS
 * such spans after it joined. In a cold start the agents join within a
 * second or two of each other; the first to list would otherwise be
 * given every partition, queue in all of them, and hand most of them
 * over again behind its own backlog. The span grows with what that waste
 * would cost, a quarter of a millisecond per partition (1 s at 4,096),
 * and is at most T/2.
 */
#define FLEET_JOIN_US_PER_PART	250
#define FLEET_JOIN_SPANS	3

static uint64_t
fleet_join_quiet(const struct fleet *f)
{
	uint64_t q = (uint64_t)f->nparts * FLEET_JOIN_US_PER_PART / 1000,
	    half = (uint64_t)fleet_session(f)->timeout_ms / 2;

	return q < half ? q : half;
}

/*
 * The window also waits, at most T/2 from our node's creation, until the
 * first read of every partition's claim is answered (fleet_look): the
 * assignment keeps each partition with its leader, and a joiner that
 * assigned before it knew them chose partitions the others did not give
 * it. At 8 x 4,096 a join queued in 1,149 partitions and left 637 again.
 */
static uint64_t
fleet_join_end(const struct fleet *f)
{
	if (f->nlooked < f->nparts && f->look_cap > f->join_until)
		return f->look_cap;
	return f->join_until;
}

/* A partition's claim was read: once all are, the window may end (the
 * assignment it held back is owed, and the next flush makes it). */
static void
fleet_look(struct fleet *f, struct part *pt)
{
	if (pt->looked || (fleet_part_leader(pt) == NULL &&
	    !pt->e.claim_absent))
		return;
	pt->looked = true;
	f->nlooked++;
}

/*
 * A join into a standing fleet needs no quiet span: when every other
 * member's node is older than ours by a quiet span, the list had stood
 * still for that long when we joined, and no burst of joins is under way.
 * The ctimes all come from the ZooKeeper leader's clock, so they compare.
 */
static bool
fleet_join_standing(struct fleet *f)
{
	const struct fleet_member *me = fleet_member_find(f, f->member_node);
	int64_t youngest = 0;
	int i, others = 0;

	if (me == NULL || me->ctime == 0)
		return false;
	for (i = 0; i < f->nmembers; i++) {
		const struct fleet_member *mb = &f->members[i];

		if (mb == me)
			continue;
		if (mb->ctime == 0)
			return false;
		others++;
		if (mb->ctime > youngest)
			youngest = mb->ctime;
	}
	return others > 0 &&
	    me->ctime - youngest >= (int64_t)fleet_join_quiet(f);
}

/* A listing, or our node made: the window waits for a quiet span. */
static void
fleet_join_heard(struct fleet *f)
{
	uint64_t t;

	if (f->join_until == 0)
		return;
	t = f->now + fleet_join_quiet(f);
	f->join_until = t < f->join_cap ? t : f->join_cap;
}

void
fleet_flush(struct fleet *f, uint64_t now, struct fleet_actions *out)
{
	f->now = now;
	if (!f->partitioned || !f->assign_owed)
		return;
	if (f->member_reads > 0 || f->member_node[0] == '\0') {
		f->assign_owed = false;	/* the listing's end assigns */
		return;
	}
	if (now < fleet_assign_due(f))
		return;			/* the tick does it */
	fleet_assign(f, out);
}

/* Our member node, created for this session (after its parents). */
static void
fleet_member_create(struct fleet *f, struct fleet_actions *out)
{
	f->member_creating = true;
	f->member_set_owed = false;	/* the create writes what we have */
	fleet_push(out, FACT_MEMBER_CREATE, -1)->gen = f->member_gen;
}

/* Frees what a member's data said. */
static void
fleet_member_forget(struct fleet_member *m)
{
	free(m->parts);
	free(m->avoid);
	m->parts = NULL;
	m->avoid = NULL;
	m->drained = false;
}

/* A member's fields (fleet.h), from the NUL after its id to the end. */
static void
fleet_member_fields(struct fleet_member *m, const char *p, size_t len)
{
	const char *end = p + len, *f, *nul;
	char **into;
	size_t n;

	fleet_member_forget(m);
	for (f = p; f < end; f = nul + 1) {
		if (*f == '\0')
			f++;
		if (f >= end)
			break;
		if ((nul = memchr(f, '\0', (size_t)(end - f))) == NULL)
			nul = end;
		n = (size_t)(nul - f);
		into = NULL;
		if (n >= 6 && memcmp(f, "parts=", 6) == 0)
			into = &m->parts;
		else if (n >= 6 && memcmp(f, "avoid=", 6) == 0)
			into = &m->avoid;
		else if (n == 9 && memcmp(f, "drained=1", 9) == 0)
			m->drained = true;
		if (into != NULL && *into == NULL &&
		    (*into = strndup(f + 6, n - 6)) == NULL)
			abort();
	}
}

/* Lists the members, leaving a watch for the next change. */
static void
fleet_members_list(struct fleet *f, struct fleet_actions *out)
{
	f->member_gen++;
	f->member_reads = 0;
	fleet_push(out, FACT_MEMBERS_LIST, -1)->gen = f->member_gen;
}

static struct fleet_member *
fleet_member_find(struct fleet *f, const char *name)
{
	int i;

	for (i = 0; i < f->nmembers; i++)
		if (strcmp(f->members[i].name, name) == 0)
			return &f->members[i];
	return NULL;
}

/* The session changed: a new one needs a new member node. */
static void
fleet_members_session(struct fleet *f, const struct election_event *ev,
    struct fleet_actions *out)
{
	int i;

	if (ev->session == SESSION_EXPIRED) {
		/* Our member node went with the session; so did every
		 * partition's node. Out of every queue until listed again. */
		f->member_node[0] = '\0';
		f->member_session = 0;
		for (i = 0; i < f->nparts; i++)
			if (f->parts[i].assigned)
				fleet_assign_part(f, &f->parts[i], false, out);
		f->view.count = 0;
		f->view.assigned = 0;
		return;
	}
	if (ev->session != SESSION_CONNECTED || f->stopping)
		return;
	if (ev->session_id != f->member_session) {
		f->member_session = ev->session_id;
		f->member_node[0] = '\0';
		f->member_creating = false;
		fleet_member_create(f, out);
		/* The watches on the members' data went with the old
		 * session: read each again, setting them again. */
		for (i = 0; i < f->nmembers; i++)
			f->members[i].known = false;
	}
	fleet_member_set(f, out);	/* a write the connection lost */
	fleet_members_list(f, out);
}

/*
 * What the members disagree on, said once when it begins or changes and
 * once when it ends: an id two members share (the assignment tells members
 * apart by id), and partitions not every member runs (the union is
 * assigned: fleet_assign_union).
 */
static void
fleet_members_check(struct fleet *f)
{
	struct fleet_view *v = &f->view;
	char dup[ELECTION_ID_MAX] = "", text[sizeof(v->disagreement)];
	const struct fleet_member *m, *o;
	size_t off = 0;
	int i, j, differ = 0;

	for (i = 0; i < f->nmembers && dup[0] == '\0'; i++)
		for (j = i + 1; j < f->nmembers; j++)
			if (f->members[i].known && f->members[j].known &&
			    strcmp(f->members[i].id, f->members[j].id) == 0) {
				snprintf(dup, sizeof(dup), "%s", f->members[i].id);
				break;
			}
	if (strcmp(dup, v->duplicate) != 0) {
		if (dup[0] != '\0')
			log_warnx("partitions: two members share the id '%s' "
			    "(election.id must differ): the assignment cannot tell "
			    "them apart, so they may both be left out of a "
			    "partition's queue", dup);
		else
			log_info("partitions: no two members share an id any "
			    "more");
		snprintf(v->duplicate, sizeof(v->duplicate), "%s", dup);
	}
	text[0] = '\0';
	for (i = 0; i < f->nmembers; i++) {
		m = &f->members[i];
		if (!m->known || m->parts == NULL ||
		    strcmp(m->parts, f->parts_spec) == 0)
			continue;
		differ++;
		for (j = 0; j < i; j++) {
			o = &f->members[j];
			if (o->known && o->parts != NULL &&
			    strcmp(o->parts, m->parts) == 0)
				break;
		}
		if (j < i || off >= sizeof(text))
			continue;	/* said with the first of its kind */
		off += (size_t)snprintf(text + off, sizeof(text) - off,
		    "%s%s runs %.40s", off > 0 ? "; " : "", m->id, m->parts);
	}
	if (differ > 0 && off < sizeof(text))
		snprintf(text + off, sizeof(text) - off, "; we run %.40s",
		    f->parts_spec);
	if (differ != v->disagree || strcmp(text, v->disagreement) != 0) {
		if (differ > 0)
			log_warnx("partitions: the members do not run the same "
			    "partitions (%s): each partition goes to a member "
			    "that runs it, until they agree", text);
		else if (v->disagree > 0)
			log_info("partitions: every member runs the same "
			    "partitions again");
		v->disagree = differ;
		snprintf(v->disagreement, sizeof(v->disagreement), "%s", text);
		v->index++;
	}
}

/*
 * A listing is whole (every id read). If no node of our session is in it
 * and no create is out, our create never reached ZooKeeper (its connection
 * broke first, within the same session), or our node was deleted (by an
 * operator): create it again, or we would never be a member until the
 * next session. Then assign.
 */
static void
fleet_members_listed(struct fleet *f, struct fleet_actions *out)
{
	if (f->member_node[0] != '\0' && !f->member_creating &&
	    fleet_member_find(f, f->member_node) == NULL && !f->stopping) {
		log_warnx("partitions: our member node %s/%s is gone (deleted "
		    "by hand?); making it again", f->members_path,
		    f->member_node);
		f->member_node[0] = '\0';
	}
	if (f->member_node[0] == '\0' && !f->member_creating &&
	    !f->stopping && f->member_session != 0 &&
	    f->session == SESSION_CONNECTED)
		fleet_member_create(f, out);
	fleet_members_check(f);
	if (f->join_until != 0 && fleet_join_standing(f)) {
		log_debug("partitions: the members stood still before we "
		    "joined; assigning once every claim is read");
		f->join_cap = f->now;
		f->join_until = f->now;
	}
	fleet_join_heard(f);
	fleet_assign(f, out);
}

/* A listing's answer: keep what we know of the members still listed, read
 * the ids of new ones. */
static void
fleet_members_apply_list(struct fleet *f, const struct election_event *ev,
    struct fleet_actions *out)
{
	struct fleet_member *mb, *nm;
	int i, j, n = 0;
	int64_t seq;

	if (ev->gen != f->member_gen || ev->rc != ZOK)
		return;	/* the next connection lists again */
	nm = calloc((size_t)ev->count + 1, sizeof(*nm));
	if (nm == NULL)
		abort();
	for (i = 0; i < ev->count; i++) {
		const char *name = ev->names[i];
		char *end;

		if (strncmp(name, "m-", 2) != 0 ||
		    strlen(name) >= FLEET_MEMBER_NAME_MAX)
			continue;
		seq = strtoll(name + 2, &end, 10);
		if (*end != '\0' || seq < 0 || end == name + 2)
			continue;
		if ((mb = fleet_member_find(f, name)) != NULL)
			nm[n] = *mb;
		else {
			snprintf(nm[n].name, sizeof(nm[n].name), "%s", name);
			nm[n].seq = seq;
		}
		n++;
	}
	qsort(nm, (size_t)n, sizeof(*nm), fleet_member_cmp);
	/* What a member that left knew goes with it. */
	for (i = 0; i < f->nmembers; i++) {
		for (j = 0; j < n; j++)
			if (strcmp(nm[j].name, f->members[i].name) == 0)
				break;
		if (j == n)
			fleet_member_forget(&f->members[i]);
	}
	free(f->members);
	f->members = nm;
	f->nmembers = n;
	f->member_reads = 0;
	for (i = 0; i < n; i++) {
		if (nm[i].known && !nm[i].stale)
			continue;
		mb = &nm[i];
		{
			struct fleet_action *a = fleet_push(out,
			    FACT_MEMBER_READ, -1);

			snprintf(a->name, sizeof(a->name), "%s", mb->name);
			a->gen = f->member_gen;
		}
		f->member_reads++;
	}
	if (f->member_reads == 0)
		fleet_members_listed(f, out);
}

/* A member's id. */
static void
fleet_members_apply_data(struct fleet *f, const struct election_event *ev,
    struct fleet_actions *out)
{
	struct fleet_member *mb;
	size_t idlen;

	if (ev->gen != f->member_gen) {
		/* A read a newer listing overtook (a data watch's): it counts
		 * for no listing, but ZooKeeper answers in order, so what it
		 * read of a member already listed is the latest. */
		if (ev->rc != ZOK && ev->rc != ZNONODE && ev->name != NULL &&
		    (mb = fleet_member_find(f, ev->name)) != NULL)
			mb->stale = true;
		if (ev->rc == ZOK && ev->name != NULL && ev->datalen > 0 &&
		    (mb = fleet_member_find(f, ev->name)) != NULL && mb->known &&
		    (idlen = strnlen(ev->data, (size_t)ev->datalen)) ==
		    strlen(mb->id) && memcmp(ev->data, mb->id, idlen) == 0) {
			fleet_member_fields(mb, ev->data + idlen,
			    (size_t)ev->datalen - idlen);
			mb->stale = false;
			if (f->member_reads <= 0 && f->member_node[0] != '\0')
				fleet_assign(f, out);
		}
		return;
	}
	if (ev->name != NULL && (mb = fleet_member_find(f, ev->name)) != NULL) {
		if (ev->rc == ZOK && ev->datalen > 0 &&
		    (idlen = strnlen(ev->data, (size_t)ev->datalen)) > 0 &&
		    idlen < ELECTION_ID_MAX) {
			/* "id", then (agents since issue 30) a NUL and
			 * "parts=" with the partitions it runs. */
			memcpy(mb->id, ev->data, idlen);
			mb->id[idlen] = '\0';
			fleet_member_fields(mb, ev->data + idlen,
			    (size_t)ev->datalen - idlen);
			mb->owner = ev->owner;
			mb->ctime = ev->ctime;
			mb->known = true;
			mb->stale = false;
			/* Our create's answer was lost (rule 6's case): a
			 * node of our session is ours. */
			if (f->member_node[0] == '\0' && !f->member_creating &&
			    ev->owner == f->session_id && ev->owner != 0)
				snprintf(f->member_node, sizeof(f->member_node),
				    "%s", mb->name);
		} else if (ev->rc != ZNONODE) {
			/* Unknown; what we know of it stands meanwhile. */
			mb->stale = true;
		} else {
			/* Gone already: the watch lists again. */
			fleet_member_forget(mb);
			*mb = f->members[f->nmembers - 1];
			f->nmembers--;
			qsort(f->members, (size_t)f->nmembers,
			    sizeof(*f->members), fleet_member_cmp);
		}
	}
	if (--f->member_reads <= 0)
		fleet_members_listed(f, out);
}

/* Our create's answer. */
static void
fleet_members_apply_created(struct fleet *f, const struct election_event *ev,
    struct fleet_actions *out)
{
	const char *slash;

	f->member_creating = false;
	if (ev->rc == ZOK && ev->name != NULL && !f->stopping) {
		slash = strrchr(ev->name, '/');
		snprintf(f->member_node, sizeof(f->member_node), "%s",
		    slash != NULL ? slash + 1 : ev->name);
		log_info("partitions: joined as member %s/%s", f->members_path,
		    f->member_node);
		if (!f->joined_once) {
			f->joined_once = true;
			f->join_cap = f->now + FLEET_JOIN_SPANS *
			    fleet_join_quiet(f);
			f->look_cap = f->now +
			    (uint64_t)fleet_session(f)->timeout_ms / 2;
			f->join_until = f->now;
			fleet_join_heard(f);
		}
		fleet_member_set(f, out);	/* changed while it was made */
		fleet_assign(f, out);
	} else if (ev->rc != ZOK && ev->rc != ZCONNECTIONLOSS &&
	    ev->rc != ZOPERATIONTIMEOUT && ev->rc != ZCLOSING)
		log_warnx("partitions: cannot create the member node under %s: "
		    "%s", f->members_path, zerror(ev->rc));
}

/* --- Drain and resign (doc/design.md, "Moving partitions") --- */

/* Writes our member data, if it changed and our node is there to take
 * it; else it is written when it is (the create carries it). */
static void
fleet_member_set(struct fleet *f, struct fleet_actions *out)
{
	struct fleet_action *a;

	if (!f->member_set_owed || f->member_node[0] == '\0' ||
	    f->member_creating || f->session != SESSION_CONNECTED ||
	    f->stopping)
		return;
	f->member_set_owed = false;
	a = fleet_push(out, FACT_MEMBER_SET, -1);
	snprintf(a->name, sizeof(a->name), "%s", f->member_node);
	a->gen = f->member_gen;
}

static void
fleet_member_set_answered(struct fleet *f, const struct election_event *ev)
{
	if (ev->rc == ZOK || ev->rc == ZNONODE)
		return;		/* written, or the listing makes it again */
	f->member_set_owed = true;	/* on the next connection */
	if (ev->rc != ZCONNECTIONLOSS && ev->rc != ZOPERATIONTIMEOUT &&
	    ev->rc != ZCLOSING && ev->rc != ZSESSIONEXPIRED)
		log_warnx("partitions: cannot write our member node %s/%s: %s",
		    f->members_path, f->member_node, zerror(ev->rc));
}

/* Our drain or a resign changed our data: write it, and assign from our
 * own view at once (the others assign when their watch on our data
 * fires and they read it). */
static void
fleet_data_changed(struct fleet *f, struct fleet_actions *out)
{
	struct fleet_member *self;
	size_t idlen = strlen(f->id);

	fleet_member_data_build(f);
	if (f->member_node[0] != '\0' &&
	    (self = fleet_member_find(f, f->member_node)) != NULL &&
	    self->known)
		fleet_member_fields(self, f->member_data + idlen,
		    (size_t)f->member_datalen - idlen);
	f->member_set_owed = true;
	fleet_member_set(f, out);
	f->view.index++;
	fleet_push(out, FACT_CHANGED, -1);
	if (f->member_reads == 0 && f->member_node[0] != '\0')
		fleet_assign(f, out);
}

static void
fleet_drain(struct fleet *f, bool drained, struct fleet_actions *out)
{
	if (!f->partitioned || f->drained == drained || f->stopping)
		return;
	f->drained = drained;
	if (drained)
		log_info("partitions: drained: handing every partition over, "
		    "as a member that owns none");
	else
		log_info("partitions: undrained: taking a share again");
	fleet_data_changed(f, out);
}

static void
fleet_part_resign(struct fleet *f, struct part *pt, uint64_t hold_ms,
    struct fleet_actions *out)
{
	if (!f->partitioned || f->stopping)
		return;
	log_info("partition %s: resigned: it moves to another member, and "
	    "this one takes it again no sooner than %" PRIu64 " ms after",
	    pt->name, hold_ms);
	pt->avoiding = true;
	pt->avoid_hold_ms = hold_ms;
	pt->avoid_until = 0;
	fleet_data_changed(f, out);
}

/* After pt's step: a partition we resigned has moved once another
 * leads it; its hold starts then. */
static void
fleet_avoid_check(struct fleet *f, struct part *pt)
{
	const char *leader;

	if (!pt->avoiding || pt->avoid_until != 0 || pt->owned ||
	    pt->e.phase == PHASE_LEADING || pt->e.phase == PHASE_RELEASING ||
	    pt->e.phase == PHASE_DELETING ||
	    (leader = fleet_part_leader(pt)) == NULL || leader[0] == '\0' ||
	    strcmp(leader, f->id) == 0)
		return;
	pt->avoid_until = f->now + (pt->avoid_hold_ms > 0 ?
	    pt->avoid_hold_ms : 1);
	if (f->avoid_next == 0 || pt->avoid_until < f->avoid_next)
		f->avoid_next = pt->avoid_until;
}

/* Holds that ended: take those partitions again if assigned. */
static void
fleet_avoid_tick(struct fleet *f, struct fleet_actions *out)
{
	bool changed = false;
	int i;

	if (f->avoid_next == 0 || f->now < f->avoid_next)
		return;
	f->avoid_next = 0;
	for (i = 0; i < f->nparts; i++) {
		struct part *pt = &f->parts[i];

		if (!pt->avoiding || pt->avoid_until == 0)
			continue;
		if (pt->avoid_until <= f->now) {
			pt->avoiding = false;
			pt->avoid_until = 0;
			changed = true;
			log_info("partition %s: the resign's hold is over",
			    pt->name);
		} else if (f->avoid_next == 0 || pt->avoid_until < f->avoid_next)
			f->avoid_next = pt->avoid_until;
	}
	if (changed)
		fleet_data_changed(f, out);
}

/* A member's data watch fired: read it again (and set the watch again). */
static void
fleet_member_data_changed(struct fleet *f, const struct election_event *ev,
    struct fleet_actions *out)
{
	struct fleet_member *mb;
	struct fleet_action *a;

	if (!f->partitioned || f->session != SESSION_CONNECTED ||
	    ev->name == NULL || (mb = fleet_member_find(f, ev->name)) == NULL)
		return;
	a = fleet_push(out, FACT_MEMBER_READ, -1);
	snprintf(a->name, sizeof(a->name), "%s", mb->name);
	a->gen = f->member_gen;
	f->member_reads++;
}

/* --- The session's renewal (doc/design.md, "Partitions") --- */

/* While we lead any partition or queue in one, a renewal every renewal
 * period, whatever the number of partitions: it extends the leaders'
 * leases, and anchors the lease of a successor when it is named. */
static bool
fleet_srenew_wanted(const struct fleet *f)
{
	return f->partitioned && f->member_node[0] != '\0' &&
	    f->session == SESSION_CONNECTED &&
	    (f->nleading > 0 || f->nqueued > 0);
}

static void
fleet_srenew_send(struct fleet *f, struct fleet_actions *out)
{
	struct fleet_action *a;
	int i;

	a = fleet_push(out, FACT_SESSION_RENEW, -1);
	snprintf(a->name, sizeof(a->name), "%s", f->member_node);
	a->gen = f->member_gen;
	for (i = 0; i < f->nparts; i++)
		if (f->parts[i].leading)
			election_session_sent(&f->parts[i].e, f->now);
	lease_ring_sent(&f->ring, f->now);
	f->srenew_inflight = true;
	f->srenew_kicked = false;
	f->srenew_sent = f->now;
}

/* Since when the renewal has had no answer, nor any request of ours. */
static uint64_t
fleet_stalled_since(const struct fleet *f)
{
	return f->last_answer > f->srenew_sent ? f->last_answer :
	    f->srenew_sent;
}

/* When the renewal next needs a look: the next send, or the kick. */
static uint64_t
fleet_srenew_due(const struct fleet *f)
{
	const struct election *e = fleet_session(f);

	if (!f->partitioned)
		return 0;
	if (f->srenew_inflight && !f->srenew_kicked && f->nleading > 0)
		return fleet_stalled_since(f) + e->shape.kick;
	if (!f->srenew_inflight && fleet_srenew_wanted(f))
		return f->srenew_next == 0 ? 1 : f->srenew_next;
	return 0;
}

/* Time passed: send the renewal, or drop a connection on which it hangs
 * (the server may be stopped or cut off). */
static void
fleet_srenew_tick(struct fleet *f, struct fleet_actions *out)
{
	const struct election *e = fleet_session(f);
	struct fleet_action *a;

	if (f->srenew_inflight) {
		/* Only a leader's lease is at stake (as with one election):
		 * an agent that leads nothing stays on a slow server, and its
		 * round trips say why it does not lead. */
		if (!f->srenew_kicked && f->nleading > 0 &&
		    f->now >= fleet_stalled_since(f) + e->shape.kick) {
			f->srenew_kicked = true;
			f->last_kick_at = f->now;
			f->kicks++;
			a = fleet_push(out, FACT_KICK, -1);
			a->a.type = ACT_KICK;
		}
	} else if (fleet_srenew_wanted(f) && f->now >= f->srenew_next)
		fleet_srenew_send(f, out);
}

static void
fleet_srenew_answered(struct fleet *f, const struct election_event *ev,
    struct fleet_actions *out)
{
	const struct election *se = fleet_session(f);
	struct election_event rev;
	uint64_t rtt, after, until, s;
	bool earlier;
	int i;

	if (!f->srenew_inflight)
		return;
	/* Credited to its own send time, which zk.c passes back: one asked
	 * for after the connection was lost, before the loop heard of it,
	 * is answered after the reconnect, ahead of the one sent since (an
	 * election's own renewal is void then, by its generation; this one
	 * has none). */
	s = ev->sent != 0 ? ev->sent : f->srenew_sent;
	earlier = s != f->srenew_sent;
	if (!earlier) {
		f->srenew_inflight = false;
		rtt = f->now - s;
		after = se->shape.renew > rtt ? se->shape.renew - rtt : 0;
		f->srenew_next = f->now + after;
	}
	if (ev->rc == ZOK) {
		if (!earlier)
			f->srenewals++;
		lease_ring_acked(&f->ring, s, f->now);
		/* What the session is known to live until: a named successor
		 * leads on it (election_try_lead). */
		if (f->session_id != 0 &&
		    (until = election_lease_for(&f->parts[0].e, s)) >
		    f->session_lease)
			f->session_lease = until;
	}
	/* The sync was answered on this session's connection (a reply from
	 * an earlier handle comes before its end, which cleared inflight). */
	memset(&rev, 0, sizeof(rev));
	rev.type = EV_SESSION_RENEWED;
	rev.now = f->now;
	rev.rc = ev->rc;
	rev.owner = ev->rc == ZOK ? f->session_id : 0;
	rev.sent = s;
	for (i = 0; i < f->nparts; i++)
		if (f->parts[i].leading)
			fleet_feed(f, &f->parts[i], &rev, out);
}

/* --- A graceful stop --- */

/* Partitions: every election has stopped, or a stop waits no more. */
static void
fleet_stop_all(struct fleet *f, struct fleet_actions *out)
{
	struct election_event ev;

	if (f->stopped)
		return;
	f->stopped = true;
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_STOP;
	ev.now = f->now;
	fleet_fan_out(f, &ev, out);
	fleet_check_stop(f, out);
}

/*
 * After each step while stopping: once we lead no partition, stop every
 * election; once every one has stopped, leave the loop.
 */
static void
fleet_check_stop(struct fleet *f, struct fleet_actions *out)
{
	bool linger = false;
	int i;

	if (!f->stopping || !f->partitioned || f->exited)
		return;
	if (!f->stopped) {
		if (f->nbusy == 0)
			fleet_stop_all(f, out);
		return;
	}
	if (f->nstopped < f->nparts)
		return;
	for (i = 0; i < f->nparts; i++)
		if (f->parts[i].e.release_succ)
			linger = true;
	f->exited = true;
	fleet_push(out, FACT_EXIT, -1)->linger_ms = linger ?
	    ELECTION_RELEASE_LINGER_MS : 0;
}

/*
 * A graceful stop with partitions: our member node goes first, so that the
 * others count us out and queue behind us; each partition we lead is
 * released to its successor once one is queued (a parked leader does that
 * on its own); after FLEET_STOP_WAIT_MS the rest are released anyway.
 */
static void
fleet_stop(struct fleet *f, struct fleet_actions *out)
{
	struct fleet_action *a;
	int i;

	if (f->stopping)
		return;
	f->stopping = true;
	f->stop_by = f->now + FLEET_STOP_WAIT_MS;
	if (f->member_node[0] != '\0' && f->session == SESSION_CONNECTED) {
		log_info("partitions: leaving: deleting member %s/%s",
		    f->members_path, f->member_node);
		a = fleet_push(out, FACT_MEMBER_DELETE, -1);
		snprintf(a->name, sizeof(a->name), "%s", f->member_node);
		a->gen = f->member_gen;
	}
	for (i = 0; i < f->nparts; i++)
		if (f->parts[i].assigned)
			fleet_assign_part(f, &f->parts[i], false, out);
	f->view.assigned = 0;
	fleet_check_stop(f, out);
}

/* --- Events --- */

static void
fleet_on_tick(struct fleet *f, const struct election_event *tick,
    struct fleet_actions *out)
{
	struct election_event ev = *tick;
	struct part *pt;

	/* Each part that is due, earliest first. */
	while (f->nheap > 0 && (pt = &f->parts[f->heap[0]])->due <= f->now) {
		ev.gen = pt->e.gen;
		fleet_feed(f, pt, &ev, out);
		if (pt->heap >= 0 && pt->due <= f->now) {
			/* Still due: nothing moved it at this instant; look
			 * again a millisecond later, not in a loop now. */
			pt->due = f->now + 1;
			fleet_heap_fix(f, pt->heap);
		}
	}
	if (f->partitioned) {
		fleet_avoid_tick(f, out);
		fleet_flush(f, f->now, out);	/* an assignment now due */
		fleet_srenew_tick(f, out);
		if (f->stopping && !f->stopped && f->now >= f->stop_by) {
			log_warnx("stop: no successor queued in time for every "
			    "partition; releasing anyway");
			fleet_stop_all(f, out);
		}
	}
	fleet_new_session_owed(f, out);	/* an auth failure's retry */
}

/*
 * A release's app has heard of it (no partition waits in PHASE_RELEASING,
 * with serial_releases): the next parked leader whose successor is known
 * lets go (election_parked_step). One scan per release, on its end.
 */
static void
fleet_release_next(struct fleet *f, struct fleet_actions *out)
{
	struct election_event ev;
	struct part *pt;
	int i;

	if (!f->release_wake || !f->partitioned)
		return;
	f->release_wake = false;
	memset(&ev, 0, sizeof(ev));
	ev.type = EV_TICK;
	ev.now = f->now;
	for (i = 0; i < f->nparts && f->release_gate == 0; i++) {
		pt = &f->parts[i];
		if (pt->e.parked && pt->e.phase == PHASE_LEADING &&
		    pt->e.succ[0] != '\0' && pt->e.succ_datalen >= 0) {
			ev.gen = pt->e.gen;
			fleet_feed(f, pt, &ev, out);
		}
	}
	f->release_wake = false;	/* set again by that release's start */
}

void
fleet_serial_releases(struct fleet *f, bool on)
{
	f->serial_releases = on;
	f->release_gate = on ? f->nreleasing : 0;
	if (f->release_gate == 0)
		f->release_wake = true;	/* at the next step */
}

/* Is an event of this type ZooKeeper's (an answer or a watch)? */
static bool
fleet_event_answers(enum fleet_event_type t)
{
	switch (t) {
	case FEV_ELECTION:
	case FEV_MEMBER_CREATED:
	case FEV_MEMBERS:
	case FEV_MEMBER_DATA:
	case FEV_MEMBERS_CHANGED:
	case FEV_MEMBER_DELETED:
	case FEV_SESSION_RENEWED:
	case FEV_MEMBER_DATA_CHANGED:
	case FEV_MEMBER_SET:
		return true;
	default:
		return false;
	}
}

void
fleet_step(struct fleet *f, const struct fleet_event *fev,
    struct fleet_actions *out)
{
	struct election_event ev = fev->ev;
	struct part *pt;

	f->now = ev.now;
	/* ZooKeeper answered (a reply, not a failure of our own client, or
	 * a watch): the server is there, however busy. */
	if (fleet_event_answers(fev->type) &&
	    ev.rc != ZCONNECTIONLOSS && ev.rc != ZCLOSING &&
	    ev.rc != ZOPERATIONTIMEOUT && ev.rc != ZSESSIONEXPIRED)
		f->last_answer = ev.now;
	if (fev->type == FEV_SESSION && ev.session == SESSION_CONNECTED)
		f->last_answer = ev.now;
	switch (fev->type) {
	case FEV_SESSION:
		ev.type = EV_SESSION;
		if (ev.session != f->session || ev.session_id != f->session_id)
			memset(&f->ring, 0, sizeof(f->ring));
		/* A new connection may have a smaller timeout, a new session
		 * none of this one's lease: earned again by the renewals. */
		f->session_lease = 0;
		f->session = ev.session;
		if (ev.session == SESSION_CONNECTED)
			f->session_id = ev.session_id;
		if (ev.session != SESSION_CONNECTED) {
			f->srenew_inflight = false;
			f->srenew_kicked = false;
		}
		fleet_fan_out(f, &ev, out);
		if (f->partitioned)
			fleet_members_session(f, &ev, out);
		fleet_new_session_owed(f, out);
		break;
	case FEV_SERVER:
		ev.type = EV_SERVER;
		fleet_fan_out(f, &ev, out);
		fleet_new_session_owed(f, out);
		break;
	case FEV_ELECTION:
	case FEV_NOTIFIED:
		if (fev->part < 0 || fev->part >= f->nparts)
			break;
		pt = &f->parts[fev->part];
		if (fev->type == FEV_NOTIFIED)
			ev.type = EV_NOTIFIED;
		fleet_feed(f, pt, &ev, out);
		fleet_new_session_owed(f, out);
		break;
	case FEV_TICK:
		ev.type = EV_TICK;
		fleet_on_tick(f, &ev, out);
		break;
	case FEV_RESIGN:
		ev.type = EV_RESIGN;
		if (!f->partitioned && fev->part == 0)
			fleet_feed(f, &f->parts[0], &ev, out);
		break;
	case FEV_STOP:
		if (f->partitioned) {
			fleet_stop(f, out);
			break;
		}
		ev.type = EV_STOP;
		fleet_feed(f, &f->parts[0], &ev, out);
		break;
	case FEV_MEMBER_CREATED:
		fleet_members_apply_created(f, &ev, out);
		break;
	case FEV_MEMBERS:
		fleet_members_apply_list(f, &ev, out);
		break;
	case FEV_MEMBER_DATA:
		fleet_members_apply_data(f, &ev, out);
		break;
	case FEV_MEMBERS_CHANGED:
		if (f->session == SESSION_CONNECTED && f->partitioned)
			fleet_members_list(f, out);
		break;
	case FEV_MEMBER_DELETED:
		break;
	case FEV_SESSION_RENEWED:
		fleet_srenew_answered(f, &ev, out);
		break;
	case FEV_MEMBER_DATA_CHANGED:
		fleet_member_data_changed(f, &ev, out);
		break;
	case FEV_MEMBER_SET:
		fleet_member_set_answered(f, &ev);
		break;
	case FEV_DRAIN:
		fleet_drain(f, ev.assigned, out);
		break;
	case FEV_PART_RESIGN:
		if (fev->part >= 0 && fev->part < f->nparts)
			fleet_part_resign(f, &f->parts[fev->part], ev.hold_ms,
			    out);
		break;
	}
	fleet_release_next(f, out);
}

uint64_t
fleet_next_tick(const struct fleet *f)
{
	uint64_t t = f->nheap > 0 ? f->parts[f->heap[0]].due : 0, x;

	if ((x = fleet_srenew_due(f)) != 0 && (t == 0 || x < t))
		t = x;
	if (f->partitioned && f->stopping && !f->stopped &&
	    (t == 0 || f->stop_by < t))
		t = f->stop_by;
	if (f->partitioned && (x = fleet_assign_due(f)) != 0 &&
	    (t == 0 || x < t))
		t = x;
	if (f->partitioned && f->avoid_next != 0 &&
	    (t == 0 || f->avoid_next < t))
		t = f->avoid_next;
	return t;
}

/* --- Set-up --- */

const struct election *
fleet_session(const struct fleet *f)
{
	return &f->parts[0].e;
}

enum election_role
fleet_role(const struct part *pt, uint64_t now)
{
	enum election_role role = election_role_at(&pt->e, now);

	if (role == ELECTION_UNKNOWN && pt->e.parked &&
	    pt->e.session == SESSION_CONNECTED && pt->e.role ==
	    ELECTION_UNKNOWN && !pt->e.stopping)
		return ELECTION_FOLLOWER;
	return role;
}

enum election_role
fleet_status_role(const struct fleet *f, uint64_t now)
{
	const struct election *e = &f->parts[0].e;

	if (!f->partitioned)
		return election_role_at(e, now);
	return e->session == SESSION_CONNECTED && !f->stopping ?
	    ELECTION_FOLLOWER : ELECTION_UNKNOWN;
}

uint64_t
fleet_index(const struct fleet *f)
{
	return f->partitioned ? f->view.index : f->parts[0].e.index;
}

/* by_name's order: fleet_name_cmp's (length, then bytes). */
static int
fleet_part_cmp(const void *va, const void *vb)
{
	const struct part *a = *(struct part *const *)va;
	const struct part *b = *(struct part *const *)vb;

	return fleet_name_cmp(&a->name, &b->name);
}

/* A name that is not NUL-terminated (a path's component), against a
 * part of by_name, in the same order. */
struct fleet_name_key {
	const char	*name;
	size_t		 len;
};

static int
fleet_part_key_cmp(const void *vk, const void *vp)
{
	const struct fleet_name_key *k = vk;
	const char *name = (*(struct part *const *)vp)->name;
	size_t len = strlen(name);

	if (k->len != len)
		return k->len < len ? -1 : 1;
	return memcmp(k->name, name, len);
}

struct part *
fleet_part_named(struct fleet *f, const char *name, size_t len)
{
	struct fleet_name_key k = { name, len };
	struct part **hit;

	if (!f->partitioned)
		return NULL;
	hit = bsearch(&k, f->by_name, (size_t)f->nparts, sizeof(*f->by_name),
	    fleet_part_key_cmp);
	return hit != NULL ? *hit : NULL;
}

/* The partition a watched path belongs to: BASE "/" NAME [/ child]. */
struct part *
fleet_part_of_path(struct fleet *f, const char *path)
{
	size_t blen;
	const char *name, *slash;

	if (!f->partitioned)
		return &f->parts[0];
	blen = strlen(f->parts_path);
	if (strncmp(path, f->parts_path, blen) != 0 || path[blen] != '/')
		return NULL;
	name = path + blen + 1;
	slash = strchr(name, '/');
	return fleet_part_named(f, name, slash != NULL ?
	    (size_t)(slash - name) : strlen(name));
}

/* Our member node's data: the base, "drained=1" while drained, and
 * "avoid=" with the partitions we resigned while we avoid them. */
static void
fleet_member_data_build(struct fleet *f)
{
	size_t len = (size_t)f->member_baselen + 32, off, nl;
	int i, n = 0;

	for (i = 0; i < f->nparts; i++)
		if (f->parts[i].avoiding)
			len += strlen(f->parts[i].name) + 1;
	free(f->member_data);
	if ((f->member_data = malloc(len)) == NULL)
		abort();
	memcpy(f->member_data, f->member_base, (size_t)f->member_baselen);
	off = (size_t)f->member_baselen;
	if (f->drained) {
		memcpy(f->member_data + off, "\0drained=1", 10);
		off += 10;
	}
	for (i = 0; i < f->nparts; i++) {
		if (!f->parts[i].avoiding)
			continue;
		if (n++ == 0) {
			memcpy(f->member_data + off, "\0avoid=", 7);
			off += 7;
		} else
			f->member_data[off++] = ',';
		nl = strlen(f->parts[i].name);
		memcpy(f->member_data + off, f->parts[i].name, nl);
		off += nl;
	}
	f->member_datalen = (int)off;
}

/*
 * Our member node's data, the part that never changes: the id, a NUL, and
 * "parts=" with the partitions we run, "count:N" when they are the names
 * 0..N-1, else "names:" and the names separated by commas (a name has
 * none: config.c). fleet_member_data_build adds the rest.
 */
static void
fleet_member_base(struct fleet *f, const struct config *conf)
{
	size_t len, idlen = strlen(conf->election_id), i;
	bool counted = true;
	char num[24], *p;

	for (i = 0; i < (size_t)conf->npartitions && counted; i++) {
		snprintf(num, sizeof(num), "%zu", i);
		counted = strcmp(conf->partitions[i], num) == 0;
	}
	len = idlen + 1 + strlen("parts=names:") + 16;
	for (i = 0; !counted && i < (size_t)conf->npartitions; i++)
		len += strlen(conf->partitions[i]) + 1;
	if ((f->member_base = malloc(len)) == NULL)
		abort();
	memcpy(f->member_base, conf->election_id, idlen + 1);
	p = f->member_base + idlen + 1;
	f->parts_spec = p + strlen("parts=");
	if (counted)
		p += sprintf(p, "parts=count:%d", conf->npartitions);
	else {
		p += sprintf(p, "parts=names:");
		for (i = 0; i < (size_t)conf->npartitions; i++)
			p += sprintf(p, "%s%s", i > 0 ? "," : "",
			    conf->partitions[i]);
	}
	f->member_baselen = (int)(p - f->member_base);
	fleet_member_data_build(f);
}

void
fleet_init(struct fleet *f, const struct config *conf,
    void (*uuid_gen)(char out[ELECTION_UUID_LEN + 1], void *arg),
    void *uuid_arg)
{
	struct part *pt;
	int i;

	memset(f, 0, sizeof(*f));
	f->id = conf->election_id;
	f->partitioned = conf->npartitions > 0;
	f->nparts = f->partitioned ? conf->npartitions : 1;
	if (asprintf(&f->parts_path, "%s/partitions", conf->election_path) == -1 ||
	    asprintf(&f->members_path, "%s/members", conf->election_path) == -1)
		abort();
	if ((f->parts = calloc((size_t)f->nparts, sizeof(*f->parts))) == NULL ||
	    (f->by_name = calloc((size_t)f->nparts, sizeof(*f->by_name))) ==
	    NULL ||
	    (f->heap = calloc((size_t)f->nparts, sizeof(*f->heap))) == NULL)
		abort();
	if (f->partitioned)
		fleet_member_base(f, conf);
	f->serial_releases = conf->notify_on_follower != NULL;
	for (i = 0; i < f->nparts; i++) {
		pt = &f->parts[i];
		pt->idx = i;
		pt->heap = -1;
		pt->owner = -1;
		pt->name = f->partitioned ? conf->partitions[i] : NULL;
		f->by_name[i] = pt;
		if ((f->partitioned ? asprintf(&pt->path, "%s/%s",
		    f->parts_path, pt->name) : asprintf(&pt->path, "%s",
		    conf->election_path)) == -1 ||
		    asprintf(&pt->prefix, "%s/_c_", pt->path) == -1)
			abort();
		election_init(&pt->e, conf->election_id, conf->election_value,
		    f->partitioned ? true : conf->election_candidate);
		pt->e.last_answer = &f->last_answer;
		pt->e.step_down = conf->election_step_down;
		pt->e.tick_ms = (int)conf->zk_tick_ms;
		pt->e.uuid_gen = uuid_gen;
		pt->e.uuid_arg = uuid_arg;
		if (f->partitioned) {
			pt->e.parked = true;	/* until the member listing */
			pt->e.session_renewal = true;
			/* Every lease of the session is anchored by its
			 * renewals, whichever partition asks: a successor
			 * named in a handover leads at once. */
			pt->e.session_ring = &f->ring;
			pt->e.session_lease = &f->session_lease;
			pt->e.releasing = &f->release_gate;
		}
	}
	if (f->partitioned)
		qsort(f->by_name, (size_t)f->nparts, sizeof(*f->by_name),
		    fleet_part_cmp);
}

void
fleet_free(struct fleet *f)
{
	int i;

	for (i = 0; i < f->nparts; i++) {
		election_free(&f->parts[i].e);
		free(f->parts[i].path);
		free(f->parts[i].prefix);
	}
	free(f->parts);
	free(f->by_name);
	free(f->owner_ids);
	free(f->heap);
	for (i = 0; i < f->nmembers; i++)
		fleet_member_forget(&f->members[i]);
	free(f->members);
	free(f->member_data);
	free(f->member_base);
	free(f->members_path);
	free(f->parts_path);
	memset(f, 0, sizeof(*f));
}
