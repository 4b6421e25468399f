/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for election.c, the pure election state machine: tables of
 * events (each with the actions, role and phase it must lead to) drive the
 * rules of DESIGN.md section 2. Time, session ids, zxids and uuids are all
 * made up here, so every run is the same.
 *
 * A table row is { event, "expected actions", R(role), PH(phase), KIDS(..) },
 * the last three being designated initializers, each optional.
 * Expected actions are space separated; a token "type" matches an action of
 * that type, "type:detail" matches the type and its detail exactly, where
 * the detail is the node name, or "from>to" for notify (with "/wait" when
 * the driver must answer with EV_NOTIFIED). "" means no action at all,
 * NULL means "not checked". R() and PH() of 0 are not checked either.
 * Events are delivered with the machine's current generation unless the
 * row says .old = N (N generations back); such stale events must change
 * nothing at all (rule 7), which the runner checks byte for byte.
 *
 * Tests in the "regressions" case guard defects found and fixed in election.c.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <zookeeper/zookeeper.h>

#include "election.h"

/* Table rows name only the fields they check; the rest are zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* ------------------------------------------------------------------ */
/* Fixed values                                                         */

#define SID		((int64_t)0x1000000aa)	/* our session */
#define SID2		((int64_t)0x1000000bb)	/* our next session */
#define OTHER_SID	((int64_t)0x2000000cc)	/* somebody else's */
#define T		6000			/* negotiated session timeout */
#define LEASE		4000			/* 2/3 T */
#define RENEW_EVERY	2000			/* T/3 */
#define T0		((uint64_t)100000)
#define E1		((int64_t)0x100000004)	/* first epoch */
#define E2		((int64_t)0x100000010)	/* a later one */
#define MY_ID		"me"

/* Our uuids, as the test generator makes them: they sort before the
 * others by string, the opposite of the sequence numbers used below. */
#define U(n)		"00000000-0000-4000-8000-00000000000" #n
#define ME(n, s)	"_c_" U(n) "-latch-00000000" #s
#define HF		"ffffffff-ffff-4fff-bfff-ffffffffffff"
#define HE		"eeeeeeee-eeee-4eee-beee-eeeeeeeeeeee"
#define HD		"dddddddd-dddd-4ddd-bddd-dddddddddddd"
#define NODE(h, s)	"_c_" h "-latch-00000000" #s
#define F01		NODE(HF, 01)
#define F03		NODE(HF, 03)
#define E04		NODE(HE, 04)
#define D07		NODE(HD, 07)

/* ------------------------------------------------------------------ */
/* Events                                                               */

#define SESS(st, sid, t) \
	{ .type = EV_SESSION, .session = (st), .session_id = (sid), \
	  .timeout_ms = T, .now = (t) }
#define CONNECTED(t)		SESS(SESSION_CONNECTED, SID, t)
#define CONNECTED_AS(sid, t)	SESS(SESSION_CONNECTED, sid, t)
#define CONNECTING(t)		SESS(SESSION_CONNECTING, 0, t)
#define EXPIRED(t)		SESS(SESSION_EXPIRED, 0, t)
#define READONLY(t)		SESS(SESSION_READONLY, 0, t)
#define AUTH_FAILED(t)		SESS(SESSION_AUTH_FAILED, 0, t)
#define CREATED(nm, own, t) \
	{ .type = EV_CREATED, .rc = ZOK, .name = (nm), .owner = (own), .now = (t) }
#define CREATE_FAILED(r, t)	{ .type = EV_CREATED, .rc = (r), .now = (t) }
#define PARENT_CREATED(r, t)	{ .type = EV_PARENT_CREATED, .rc = (r), .now = (t) }
#define CHILDREN(t)		{ .type = EV_CHILDREN, .rc = ZOK, .now = (t) }
#define LIST_FAILED(r, t)	{ .type = EV_CHILDREN, .rc = (r), .now = (t) }
#define PRED_SET(r, t)		{ .type = EV_PRED_SET, .rc = (r), .now = (t) }
#define PRED_WRITTEN(nm, t) \
	{ .type = EV_PRED_CHANGED, .name = (nm), .deleted = false, .now = (t) }
#define PRED_CHANGED(nm, t) \
	{ .type = EV_PRED_CHANGED, .name = (nm), .deleted = true, .now = (t) }
#define OWNER(nm, r, own, t) \
	{ .type = EV_OWNER, .rc = (r), .name = (nm), .owner = (own), .now = (t) }
#define CLAIMED(z, s, t) \
	{ .type = EV_CLAIMED, .rc = ZOK, .zxid = (z), .sent = (s), .now = (t) }
#define CLAIM_FAILED(r, t)	{ .type = EV_CLAIMED, .rc = (r), .now = (t) }
#define RENEWED(own, s, t) \
	{ .type = EV_RENEWED, .rc = ZOK, .owner = (own), .sent = (s), .now = (t) }
#define RENEW_FAILED(r, s, t) \
	{ .type = EV_RENEWED, .rc = (r), .sent = (s), .now = (t) }
#define CLAIM_DATA(d, z, t) \
	{ .type = EV_CLAIM_DATA, .rc = ZOK, .data = (d), \
	  .datalen = (int)sizeof(d) - 1, .zxid = (z), .now = (t) }
#define CLAIM_CHANGED(t)	{ .type = EV_CLAIM_CHANGED, .now = (t) }
#define LOWEST_DATA(nm, d, cz, t) \
	{ .type = EV_LOWEST_DATA, .rc = ZOK, .name = (nm), .data = (d), \
	  .datalen = (int)sizeof(d) - 1, .zxid = (cz), .now = (t) }
#define LOWEST_CHANGED(nm, del, t) \
	{ .type = EV_LOWEST_CHANGED, .name = (nm), .deleted = (del), .now = (t) }
#define DELETED(r, t)		{ .type = EV_DELETED, .rc = (r), .now = (t) }
#define SELF_SET(nm, r, t)	{ .type = EV_SELF_SET, .name = (nm), .rc = (r), .now = (t) }
#define SELF_CHANGED(nm, del, t) \
	{ .type = EV_SELF_CHANGED, .name = (nm), .deleted = (del), .now = (t) }
#define CHILDREN_CHANGED(t)	{ .type = EV_CHILDREN_CHANGED, .now = (t) }
#define TICK(t)			{ .type = EV_TICK, .now = (t) }
#define RESIGN(h, t)		{ .type = EV_RESIGN, .hold_ms = (h), .now = (t) }
#define STOP(t)			{ .type = EV_STOP, .now = (t) }
#define NOTIFIED(t)		{ .type = EV_NOTIFIED, .now = (t) }

/* ------------------------------------------------------------------ */
/* The table runner                                                     */

#define KIDS_MAX	12
#define R(x)		.role = (int)(x) + 1
#define PH(x)		.phase = (int)(x) + 1
#define KIDS(...)	.kids = { __VA_ARGS__ }

struct step {
	struct election_event ev;
	const char	*acts;		/* NULL: not checked */
	int		 role;		/* R(role), 0: not checked */
	int		 phase;		/* PH(phase), 0: not checked */
	const char	*kids[KIDS_MAX];/* children for EV_CHILDREN */
	int		 old;		/* generations back; must be a no-op */
};

static struct election_actions out;	/* what the last step emitted */
static char rendered[2048];		/* ... and as text */
static int uuid_counter;

static void
test_uuid(char buf[ELECTION_UUID_LEN + 1], void *arg)
{
	int *n = arg;

	snprintf(buf, ELECTION_UUID_LEN + 1, "00000000-0000-4000-8000-%012d",
	    ++*n);
}

/* The election a test drives, freed by the fixture when the test ends. */
static struct election *current;

static void
new_election(struct election *e, bool candidate)
{
	if (current == e)
		election_free(e);	/* a second scenario on the same one */
	current = e;
	uuid_counter = 0;
	election_init(e, MY_ID, candidate);
	e->uuid_gen = test_uuid;
	e->uuid_arg = &uuid_counter;
}

static void
setup(void)
{
	current = NULL;
}

static void
teardown(void)
{
	if (current != NULL)
		election_free(current);
	current = NULL;
}

static void
render(const struct election_actions *o, char *buf, size_t len)
{
	size_t used = 0;
	int i, w;

	buf[0] = '\0';
	for (i = 0; i < o->n; i++) {
		const struct election_action *a = &o->a[i];

		if (a->type == ACT_NOTIFY)
			w = snprintf(buf + used, len - used, "%s%s:%s>%s%s",
			    i ? " " : "", election_action_name(a->type),
			    election_role_name(a->from),
			    election_role_name(a->to), a->wait ? "/wait" : "");
		else if (a->name[0] != '\0')
			w = snprintf(buf + used, len - used, "%s%s:%s",
			    i ? " " : "", election_action_name(a->type), a->name);
		else
			w = snprintf(buf + used, len - used, "%s%s",
			    i ? " " : "", election_action_name(a->type));
		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
}

/*
 * Does the rendered list match the expected one, token by token? The watch
 * on our own node is set on every first evaluation of a generation; tables
 * that do not mention watch_self do not have to spell it out.
 */
static bool
acts_match(const char *expected, const char *actual)
{
	static char filtered[4096];
	const char *x = expected, *y = actual, *p;
	size_t used = 0, l;

	if (strstr(expected, "watch_self") == NULL) {
		for (p = actual; *p != '\0'; p += l) {
			while (*p == ' ')
				p++;
			l = strcspn(p, " ");
			if (l == 0 || strncmp(p, "watch_self", 10) == 0)
				continue;
			used += (size_t)snprintf(filtered + used,
			    sizeof(filtered) - used, "%s%.*s", used ? " " : "",
			    (int)l, p);
		}
		filtered[used] = '\0';
		y = filtered;
	}

	for (;;) {
		size_t xl, yl, ytype;

		while (*x == ' ')
			x++;
		if (*x == '\0' || *y == '\0')
			return *x == '\0' && *y == '\0';
		xl = strcspn(x, " ");
		yl = strcspn(y, " ");
		ytype = strcspn(y, ": ");
		if (memchr(x, ':', xl) != NULL) {
			if (xl != yl || strncmp(x, y, xl) != 0)
				return false;
		} else if (xl != ytype || strncmp(x, y, xl) != 0)
			return false;
		x += xl;
		y += yl;
		if (*y == ' ')
			y++;
	}
}

/* One event; returns what it emitted. gen 0 stands for "current". */
static const struct election_actions *
feed(struct election *e, struct election_event ev)
{
	if (ev.gen == 0)
		ev.gen = e->gen;
	memset(&out, 0, sizeof(out));
	election_step(e, &ev, &out);
	render(&out, rendered, sizeof(rendered));
	return &out;
}

static void
run_table(struct election *e, const struct step *s, size_t n, int line)
{
	static char kidbuf[KIDS_MAX][ELECTION_NAME_MAX];
	char *kidp[KIDS_MAX];
	struct election before;
	size_t i;
	int k;

	for (i = 0; i < n; i++) {
		struct election_event ev = s[i].ev;

		if (ev.type == EV_CHILDREN) {
			for (k = 0; k < KIDS_MAX && s[i].kids[k] != NULL; k++) {
				snprintf(kidbuf[k], sizeof(kidbuf[k]), "%s",
				    s[i].kids[k]);
				kidp[k] = kidbuf[k];
			}
			ev.names = kidp;
			ev.count = k;
		}
		if (s[i].old > 0) {
			ck_assert_msg(e->gen > (uint64_t)s[i].old,
			    "line %d step %zu: no generation that old", line, i);
			ev.gen = e->gen - (uint64_t)s[i].old;
		}
		memcpy(&before, e, sizeof(before));
		feed(e, ev);
		if (s[i].old > 0) {
			ck_assert_msg(out.n == 0 &&
			    memcmp(&before, e, sizeof(before)) == 0,
			    "line %d step %zu: stale event (gen %" PRIu64
			    ", current %" PRIu64 ") was not dropped: [%s]",
			    line, i, ev.gen, e->gen, rendered);
		}
		if (s[i].acts != NULL)
			ck_assert_msg(acts_match(s[i].acts, rendered),
			    "line %d step %zu: actions [%s], expected [%s]",
			    line, i, rendered, s[i].acts);
		if (s[i].role != 0)
			ck_assert_msg((int)e->role + 1 == s[i].role,
			    "line %d step %zu: role %s, expected %s", line, i,
			    election_role_name(e->role),
			    election_role_name((enum election_role)(s[i].role - 1)));
		if (s[i].phase != 0)
			ck_assert_msg((int)e->phase + 1 == s[i].phase,
			    "line %d step %zu: phase %s, expected %s", line, i,
			    election_phase_name(e->phase),
			    election_phase_name((enum election_phase)(s[i].phase - 1)));
	}
}

#define RUN(e, tbl) run_table((e), (tbl), sizeof(tbl) / sizeof((tbl)[0]), __LINE__)

static bool
has_action(const struct election_actions *o, enum election_action_type t)
{
	int i;

	for (i = 0; i < o->n; i++)
		if (o->a[i].type == t)
			return true;
	return false;
}

static const struct election_action *
find_notify(const struct election_actions *o)
{
	int i;

	for (i = 0; i < o->n; i++)
		if (o->a[i].type == ACT_NOTIFY)
			return &o->a[i];
	return NULL;
}

/*
 * The common start: connect, create ME(1,03), find it lowest, claim with
 * the claim sent at T0 + 10 and answered at T0 + 20: leader, epoch E1,
 * lease until T0 + 10 + LEASE, next renewal at T0 + 10 + RENEW_EVERY.
 */
#define CLAIM_SENT	(T0 + 10)
#define DEADLINE1	(CLAIM_SENT + LEASE)
#define RENEW1		(CLAIM_SENT + RENEW_EVERY)

static void
join_leader(struct election *e)
{
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
		{ CREATED(ME(1, 03), SID, T0 + 5), "list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 8), "watch_lowest:" ME(1, 03) " claim:" ME(1, 03),
		  R(ELECTION_UNKNOWN), PH(PHASE_CLAIMING), KIDS(ME(1, 03), E04) },
		{ LOWEST_DATA(ME(1, 03), MY_ID, E1 - 1, T0 + 9), "" },
		{ CLAIMED(E1, CLAIM_SENT, T0 + 20), "notify:unknown>leader watch_children",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
	};

	new_election(e, true);
	RUN(e, s);
	ck_assert_uint_eq(e->epoch, (uint64_t)E1);
	ck_assert_uint_eq(e->lease_deadline, DEADLINE1);
}

/* A follower: ME(1,05) queued behind F03 and E04, D07 behind us. */
static void
join_follower(struct election *e)
{
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ CREATED(ME(1, 05), SID, T0 + 5), "list" },
		{ CHILDREN(T0 + 8), "watch_lowest:" F03 " notify:unknown>follower"
		  " watch_pred:" E04, R(ELECTION_FOLLOWER), PH(PHASE_WATCHING),
		  KIDS(D07, ME(1, 05), E04, F03) },
		{ PRED_SET(ZOK, T0 + 9), "", R(ELECTION_FOLLOWER),
		  PH(PHASE_WATCHING) },
	};

	new_election(e, true);
	RUN(e, s);
}

/* ------------------------------------------------------------------ */
/* Joining                                                              */

START_TEST(test_join_leader)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct election_action *a;
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
		/* The name may come with its path; only the last part counts. */
		{ CREATED("/zkelect/orders/" ME(1, 03), SID, T0 + 5), "list",
		  R(ELECTION_UNKNOWN), PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 8), "watch_lowest:" ME(1, 03) " claim:" ME(1, 03),
		  R(ELECTION_UNKNOWN), PH(PHASE_CLAIMING),
		  KIDS(E04, "not-a-contender", ME(1, 03)) },
		{ CLAIMED(E1, T0 + 10, T0 + 30), "notify:unknown>leader watch_children",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
	};

	new_election(&e, true);
	RUN(&e, s);
	a = find_notify(&out);
	ck_assert_ptr_nonnull(a);
	ck_assert(!a->wait);
	ck_assert_str_eq(e.uuid, U(1));
	ck_assert_str_eq(e.node, ME(1, 03));
	ck_assert_uint_eq(e.epoch, (uint64_t)E1);
	/* The lease counts from when the claim was sent, not answered. */
	ck_assert_uint_eq(e.lease_deadline, T0 + 10 + LEASE);
	ck_assert_int_eq(election_role_at(&e, T0 + 10 + LEASE - 1), ELECTION_LEADER);
	ck_assert_int_eq(election_role_at(&e, T0 + 10 + LEASE), ELECTION_UNKNOWN);
	ck_assert_int_eq(election_role_at(&e, T0 + 10 + LEASE + 5000), ELECTION_UNKNOWN);
	ck_assert_uint_eq(election_lease_remaining(&e, T0 + 30), LEASE - 20);
	ck_assert_uint_eq(election_lease_remaining(&e, T0 + 10 + LEASE), 0);
	ck_assert_uint_eq(election_next_tick(&e), T0 + 10 + RENEW_EVERY);

	election_report(&e, &r);
	ck_assert_int_eq(r.role, ELECTION_LEADER);
	ck_assert_uint_eq(r.epoch, (uint64_t)E1);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, MY_ID);
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E1);
	ck_assert_int_eq(r.candidates, 2);
	ck_assert_int_eq(r.position, 0);
	ck_assert_int_eq(r.session, SESSION_CONNECTED);
	ck_assert_int_eq(r.timeout_ms, T);
}
END_TEST

/* Rule 5, and contenders sort by the numeric suffix only. */
START_TEST(test_follower_predecessor)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ CREATED(ME(1, 05), SID, T0 + 5), "list" },
		/* By string, _c_0000... would be lowest; by suffix it is third. */
		{ CHILDREN(T0 + 8), "watch_lowest:" F03 " notify:unknown>follower"
		  " watch_pred:" E04, R(ELECTION_FOLLOWER), PH(PHASE_WATCHING),
		  KIDS(D07, ME(1, 05), "_c_x-lock-0000000001", E04, F03) },
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 9), "" },
		/* The predecessor went before the watch was set: list again. */
		{ PRED_SET(ZNONODE, T0 + 9), "list", R(ELECTION_FOLLOWER),
		  PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 12), "watch_pred:" F03, R(ELECTION_FOLLOWER),
		  PH(PHASE_WATCHING), KIDS(D07, ME(1, 05), F03) },
		{ PRED_SET(ZOK, T0 + 13), "", R(ELECTION_FOLLOWER),
		  PH(PHASE_WATCHING) },
		/* A watch on some other node is not ours to act on. */
		{ PRED_CHANGED(E04, T0 + 14), "", PH(PHASE_WATCHING) },
		/* The predecessor left and nobody else was ahead of us: we
		 * are the lowest and claim without listing again. */
		{ PRED_CHANGED(F03, T0 + 15), "watch_lowest:" ME(1, 05) " claim:"
		  ME(1, 05), R(ELECTION_FOLLOWER), PH(PHASE_CLAIMING) },
		{ CHILDREN(T0 + 16), "", R(ELECTION_FOLLOWER), PH(PHASE_CLAIMING),
		  KIDS(ME(1, 05), D07) },
		{ CLAIMED(E2, T0 + 16, T0 + 18), "notify:follower>leader watch_children",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, (uint64_t)E2);
	election_report(&e, &r);
	ck_assert_int_eq(r.candidates, 2);
	ck_assert_int_eq(r.position, 0);
}
END_TEST

START_TEST(test_follower_position)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;

	join_follower(&e);
	ck_assert_str_eq(e.predecessor, E04);
	election_report(&e, &r);
	ck_assert_int_eq(r.role, ELECTION_FOLLOWER);
	ck_assert_int_eq(r.candidates, 4);
	ck_assert_int_eq(r.position, 2);
	ck_assert_uint_eq(r.epoch, 0);
	ck_assert(!r.has_leader);
	ck_assert_int_eq(election_role_at(&e, T0 + 100), ELECTION_FOLLOWER);
	ck_assert_uint_eq(election_lease_remaining(&e, T0 + 100), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 1: connection lost                                              */

START_TEST(test_rule1_connection_lost)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t t = T0 + 500;
	const struct step s1[] = {
		{ TICK(RENEW1), "renew:" ME(1, 03), R(ELECTION_LEADER) },
		/* Lost: unknown at once, and the app is told first. */
		{ CONNECTING(RENEW1 + 1), "notify:leader>unknown",
		  R(ELECTION_UNKNOWN), PH(PHASE_IDLE) },
	};
	const struct step s2[] = {
		/* What was in flight belongs to the old generation. */
		{ RENEWED(SID, RENEW1, RENEW1 + 2), "", .old = 1 },
		{ CLAIMED(E2, RENEW1, RENEW1 + 2), "", .old = 1 },
		{ CHILDREN(RENEW1 + 2), "", .old = 1, KIDS(ME(1, 03)) },
		{ TICK(DEADLINE1 + 1), "", R(ELECTION_UNKNOWN) },
		/* Same session again: list (our node is known), never create. */
		{ CONNECTED(t), "watch_claim list", R(ELECTION_UNKNOWN),
		  PH(PHASE_LISTING) },
		{ RENEWED(SID, RENEW1, t + 1), "", .old = 2 },
		/* Lowest again: a new term needs a new claim (rule 3). */
		{ CHILDREN(t + 2), "watch_lowest:" ME(1, 03) " claim:" ME(1, 03),
		  R(ELECTION_UNKNOWN), PH(PHASE_CLAIMING), KIDS(ME(1, 03), E04) },
		{ CLAIMED(E2, t + 2, t + 3), "notify:unknown>leader watch_children",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
	};

	join_leader(&e);
	RUN(&e, s1);
	ck_assert_int_eq(out.a[0].type, ACT_NOTIFY);
	ck_assert_int_eq(out.a[0].from, ELECTION_LEADER);
	ck_assert_int_eq(out.a[0].to, ELECTION_UNKNOWN);
	ck_assert_int_eq(election_role_at(&e, RENEW1 + 1), ELECTION_UNKNOWN);
	ck_assert_uint_eq(e.epoch, 0);
	RUN(&e, s2);
	ck_assert_uint_eq(e.epoch, (uint64_t)E2);
	ck_assert_uint_gt(e.epoch, (uint64_t)E1);
	ck_assert_uint_eq(e.lease_deadline, t + 2 + LEASE);
	ck_assert_str_eq(e.uuid, U(1));
}
END_TEST

/* Losing the connection while claiming: the claim's answer is void. */
START_TEST(test_rule1_lost_while_claiming)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ CREATED(ME(1, 03), SID, T0 + 1), "list" },
		{ CHILDREN(T0 + 2), "watch_lowest claim", PH(PHASE_CLAIMING),
		  KIDS(ME(1, 03)) },
		{ CONNECTING(T0 + 3), "", R(ELECTION_UNKNOWN), PH(PHASE_IDLE) },
		{ CLAIMED(E1, T0 + 2, T0 + 4), "", .old = 1 },
		{ CLAIM_FAILED(ZCONNECTIONLOSS, T0 + 4), "", R(ELECTION_UNKNOWN),
		  .old = 1 },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 2: the lease                                                    */

START_TEST(test_rule2_lease_renewal)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t before;
	const struct step s1[] = {
		{ TICK(RENEW1 - 1), "", R(ELECTION_LEADER) },
		{ TICK(RENEW1), "renew:" ME(1, 03), R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
		/* One renewal in flight at a time. */
		{ TICK(RENEW1 + 300), "", R(ELECTION_LEADER) },
		/* Acknowledged 700 ms after sending: the lease counts from
		 * the send time. */
		{ RENEWED(SID, RENEW1, RENEW1 + 700), "", R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
	};
	const struct step s2[] = {
		{ TICK(RENEW1 + RENEW_EVERY), "renew:" ME(1, 03),
		  R(ELECTION_LEADER) },
		/* No answer: the lease runs out; unknown, then look again. */
		{ TICK(RENEW1 + LEASE - 1), "", R(ELECTION_LEADER) },
		{ TICK(RENEW1 + LEASE), "notify:leader>unknown list",
		  R(ELECTION_UNKNOWN), PH(PHASE_LISTING) },
		/* The late answer of the lapsed term is void. */
		{ RENEWED(SID, RENEW1 + RENEW_EVERY, RENEW1 + LEASE + 1), "",
		  .old = 1 },
		/* Still lowest: a fresh claim, a fresh (higher) epoch. */
		{ CHILDREN(RENEW1 + LEASE + 2), "claim:" ME(1, 03),
		  R(ELECTION_UNKNOWN), PH(PHASE_CLAIMING), KIDS(ME(1, 03), E04) },
		{ CLAIMED(E2, RENEW1 + LEASE + 2, RENEW1 + LEASE + 3),
		  "notify:unknown>leader watch_children", R(ELECTION_LEADER), PH(PHASE_LEADING) },
	};

	join_leader(&e);
	before = e.index;
	RUN(&e, s1);
	ck_assert_uint_eq(e.lease_deadline, RENEW1 + LEASE);
	ck_assert_uint_eq(e.renewals, 1);
	ck_assert_int_eq(election_role_at(&e, RENEW1 + LEASE - 1), ELECTION_LEADER);
	ck_assert_int_eq(election_role_at(&e, RENEW1 + LEASE), ELECTION_UNKNOWN);
	/* Renewing changes nothing the status document shows. */
	ck_assert_uint_eq(e.index, before);
	ck_assert_uint_eq(election_next_tick(&e), RENEW1 + RENEW_EVERY);
	RUN(&e, s2);
	ck_assert_uint_eq(e.epoch, (uint64_t)E2);
}
END_TEST

/* A renewal sent before a long pause cannot stretch the lease. */
START_TEST(test_rule2_late_renewal)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(RENEW1), "renew:" ME(1, 03) },
		/* The process stalled: the answer is handled 3.9 s later. */
		{ RENEWED(SID, RENEW1, RENEW1 + 3900), "", R(ELECTION_LEADER) },
		/* An even older acknowledgement never shortens it either. */
		{ RENEWED(SID, CLAIM_SENT, RENEW1 + 3901), "", R(ELECTION_LEADER) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.lease_deadline, RENEW1 + LEASE);
	ck_assert_int_eq(election_role_at(&e, RENEW1 + LEASE - 1), ELECTION_LEADER);
	ck_assert_int_eq(election_role_at(&e, RENEW1 + LEASE), ELECTION_UNKNOWN);
	ck_assert_int_eq(election_role_at(&e, RENEW1 + 3900 + LEASE - 1),
	    ELECTION_UNKNOWN);
}
END_TEST

/* Paused past the deadline: the first tick after it steps down. */
START_TEST(test_rule2_pause_past_deadline)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(DEADLINE1 + 60000), "notify:leader>unknown list",
		  R(ELECTION_UNKNOWN), PH(PHASE_LISTING) },
	};

	join_leader(&e);
	ck_assert_int_eq(election_role_at(&e, DEADLINE1 + 60000), ELECTION_UNKNOWN);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, 0);
	ck_assert_uint_eq(election_lease_remaining(&e, DEADLINE1), 0);
}
END_TEST

/* The renewal's read says the node is not (or no longer) ours. */
START_TEST(test_rule2_renewal_owner_mismatch)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(RENEW1), "renew:" ME(1, 03) },
		{ RENEWED(OTHER_SID, RENEW1, RENEW1 + 5),
		  "notify:leader>unknown watch_claim create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
		{ CREATED(ME(2, 09), SID, RENEW1 + 6), "list" },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_int_eq(out.n, 1);
	ck_assert_str_eq(e.uuid, U(2));
	ck_assert_uint_eq(e.epoch, 0);
	ck_assert_int_eq(election_role_at(&e, RENEW1 + 6), ELECTION_UNKNOWN);
}
END_TEST

START_TEST(test_rule2_renewal_nonode)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(RENEW1), "renew:" ME(1, 03) },
		{ RENEW_FAILED(ZNONODE, RENEW1, RENEW1 + 5),
		  "notify:leader>unknown watch_claim create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

/* A renewal error that proves nothing: the lease simply runs down. */
START_TEST(test_rule2_renewal_error)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(RENEW1), "renew:" ME(1, 03) },
		{ RENEW_FAILED(ZOPERATIONTIMEOUT, RENEW1, RENEW1 + 5), "",
		  R(ELECTION_LEADER) },
		{ TICK(DEADLINE1), "notify:leader>unknown list",
		  R(ELECTION_UNKNOWN) },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 3: only our own node, only with a claim write                   */

START_TEST(test_rule3_created_foreign_owner)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		/* The create's Stat names another session: not ours. */
		{ CREATED(ME(1, 03), OTHER_SID, T0 + 1), "list",
		  R(ELECTION_UNKNOWN), PH(PHASE_LISTING) },
		/* Lowest, but not known to be ours: ask, do not claim. */
		{ CHILDREN(T0 + 2), "watch_lowest get_owner:" ME(1, 03),
		  R(ELECTION_UNKNOWN), PH(PHASE_ADOPTING), KIDS(ME(1, 03)) },
		{ LOWEST_DATA(ME(1, 03), "x1", 0x100000001, T0 + 3), "" },
		{ OWNER(ME(1, 03), ZOK, OTHER_SID, T0 + 3), "create",
		  R(ELECTION_UNKNOWN), PH(PHASE_CREATING) },
		{ CREATED(ME(2, 04), SID, T0 + 4), "list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 5), "notify:unknown>follower watch_pred:" ME(1, 03),
		  R(ELECTION_FOLLOWER), KIDS(ME(1, 03), ME(2, 04)) },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_str_eq(e.node, ME(2, 04));
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 4: an evaluation that does not find us lowest                   */

START_TEST(test_rule4_not_lowest_while_leading)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		/* Somebody else's claim shows up: look again. */
		{ CLAIM_DATA("f1", E2, T0 + 100), "list", R(ELECTION_LEADER) },
		{ CHILDREN(T0 + 101), "watch_lowest:" F01
		  " notify:leader>follower watch_pred:" F01, R(ELECTION_FOLLOWER),
		  PH(PHASE_WATCHING), KIDS(ME(1, 03), F01) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, 0);
	ck_assert_int_eq(election_role_at(&e, T0 + 102), ELECTION_FOLLOWER);
}
END_TEST

START_TEST(test_rule4_own_node_missing_while_leading)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CLAIM_DATA("e1", E2, T0 + 100), "list", R(ELECTION_LEADER) },
		{ CHILDREN(T0 + 101), "watch_lowest:" E04
		  " notify:leader>unknown create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING), KIDS(E04) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, 0);
	ck_assert_str_eq(e.uuid, U(2));
	ck_assert_int_eq(election_role_at(&e, T0 + 102), ELECTION_UNKNOWN);
}
END_TEST

/* Our own claim, seen through the claim watch, changes nothing. */
START_TEST(test_rule4_own_claim_seen)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t before;
	const struct step s[] = {
		{ CLAIM_CHANGED(T0 + 21), "watch_claim", R(ELECTION_LEADER) },
		{ CLAIM_DATA(MY_ID, E1, T0 + 22), "", R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
	};

	join_leader(&e);
	before = e.index;
	RUN(&e, s);
	ck_assert_uint_eq(e.index, before);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 6: a create whose reply was lost                                */

static void
lost_create(struct election *e, int rc)
{
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ CREATE_FAILED(rc, T0 + 1), "", R(ELECTION_UNKNOWN), PH(PHASE_IDLE) },
		{ CONNECTING(T0 + 2), "", R(ELECTION_UNKNOWN) },
		/* Back with the same session: list first, never create blind. */
		{ CONNECTED(T0 + 500), "watch_claim list", PH(PHASE_LISTING) },
	};

	new_election(e, true);
	RUN(e, s);
	ck_assert_str_eq(e->uuid, U(1));
	ck_assert_str_eq(e->node, "");
}

START_TEST(test_rule6_adopt)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN(T0 + 501), "watch_lowest:" F03 " get_owner:" ME(1, 04),
		  PH(PHASE_ADOPTING), KIDS(ME(1, 04), F03) },
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 502), "" },
		{ OWNER(ME(1, 04), ZOK, SID, T0 + 503), "list", PH(PHASE_LISTING) },
		/* Adopted: no second create. */
		{ CHILDREN(T0 + 504), "notify:unknown>follower watch_pred:" F03,
		  R(ELECTION_FOLLOWER), PH(PHASE_WATCHING), KIDS(ME(1, 04), F03) },
		{ PRED_CHANGED(F03, T0 + 505), "watch_lowest:" ME(1, 04) " claim:"
		  ME(1, 04), PH(PHASE_CLAIMING) },
	};

	lost_create(&e, ZCONNECTIONLOSS);
	RUN(&e, s);
	ck_assert_str_eq(e.node, ME(1, 04));
	ck_assert_str_eq(e.uuid, U(1));
}
END_TEST

START_TEST(test_rule6_adopt_after_timeout)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN(T0 + 501), "watch_lowest:" ME(1, 04) " get_owner:" ME(1, 04),
		  PH(PHASE_ADOPTING), KIDS(ME(1, 04)) },
		{ LOWEST_DATA(ME(1, 04), MY_ID, 0x100000001, T0 + 502), "" },
		{ OWNER(ME(1, 04), ZOK, SID, T0 + 503), "list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 504), "claim:" ME(1, 04), PH(PHASE_CLAIMING),
		  KIDS(ME(1, 04)) },
	};

	lost_create(&e, ZOPERATIONTIMEOUT);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule6_foreign_match)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN(T0 + 501), "watch_lowest get_owner:" ME(1, 04),
		  PH(PHASE_ADOPTING), KIDS(ME(1, 04), F03) },
		/* A node with our uuid, owned by another session: ignore it
		 * and join with a new uuid. */
		{ OWNER(ME(1, 04), ZOK, OTHER_SID, T0 + 503), "create",
		  R(ELECTION_UNKNOWN), PH(PHASE_CREATING) },
	};

	lost_create(&e, ZCONNECTIONLOSS);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
	ck_assert_str_eq(e.node, "");
}
END_TEST

START_TEST(test_rule6_match_gone)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN(T0 + 501), "watch_lowest get_owner:" ME(1, 04),
		  PH(PHASE_ADOPTING), KIDS(ME(1, 04), F03) },
		{ OWNER(ME(1, 04), ZNONODE, 0, T0 + 503), "create",
		  PH(PHASE_CREATING) },
	};

	lost_create(&e, ZCONNECTIONLOSS);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule6_not_found)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		/* Not among the children: the create never happened. */
		{ CHILDREN(T0 + 501), "watch_lowest:" F03 " create",
		  R(ELECTION_UNKNOWN), PH(PHASE_CREATING),
		  KIDS(F03, NODE(HE, 05)) },
		{ CREATED(ME(1, 06), SID, T0 + 502), "list", PH(PHASE_LISTING) },
	};

	lost_create(&e, ZCONNECTIONLOSS);
	RUN(&e, s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 7: generations                                                  */

START_TEST(test_rule7_stale_generation)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 100), "notify:follower>unknown", R(ELECTION_UNKNOWN),
		  PH(PHASE_IDLE) },
		{ CONNECTED(T0 + 200), "watch_claim list", PH(PHASE_LISTING) },
		/* Everything below was asked for before the reconnect. */
		{ CHILDREN(T0 + 201), "", .old = 2, KIDS(ME(1, 05)) },
		{ CHILDREN(T0 + 201), "", .old = 1, KIDS(ME(1, 05)) },
		{ LIST_FAILED(ZNONODE, T0 + 201), "", .old = 2 },
		{ CREATED(ME(1, 05), SID, T0 + 202), "", .old = 2 },
		{ CREATE_FAILED(ZNONODE, T0 + 202), "", .old = 2 },
		{ PARENT_CREATED(ZOK, T0 + 202), "", .old = 2 },
		{ PRED_SET(ZNONODE, T0 + 203), "", .old = 2 },
		{ PRED_CHANGED(E04, T0 + 204), "", .old = 2 },
		{ OWNER(ME(1, 05), ZOK, SID, T0 + 205), "", .old = 2 },
		{ CLAIMED(E1, T0 + 190, T0 + 206), "", .old = 2 },
		{ CLAIM_FAILED(ZNONODE, T0 + 206), "", .old = 2 },
		{ RENEWED(OTHER_SID, T0 + 190, T0 + 207), "", .old = 2 },
		{ DELETED(ZOK, T0 + 208), "", .old = 2 },
		/* The current generation is heard. */
		{ CHILDREN(T0 + 210), "watch_lowest:" F03 " notify:unknown>follower"
		  " watch_pred:" E04, R(ELECTION_FOLLOWER), PH(PHASE_WATCHING),
		  KIDS(F03, E04, ME(1, 05)) },
		{ PRED_CHANGED(E04, T0 + 211), "", .old = 1 },
		/* F03 is still ahead: it becomes the predecessor. */
		{ PRED_CHANGED(E04, T0 + 212), "watch_pred:" F03, PH(PHASE_WATCHING) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* While disconnected, even the view watches of old generations are void. */
START_TEST(test_rule7_stale_view_while_disconnected)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 100), "notify:follower>unknown", R(ELECTION_UNKNOWN) },
		{ CLAIM_DATA("f1", E2, T0 + 101), "", .old = 1 },
		{ CLAIM_CHANGED(T0 + 101), "", .old = 1 },
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 102), "", .old = 1 },
		{ LOWEST_CHANGED(F03, true, T0 + 103), "", .old = 1 },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 8: expiry                                                       */

START_TEST(test_rule8_expiry)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ EXPIRED(T0 + 100), "notify:leader>unknown new_session",
		  R(ELECTION_UNKNOWN), PH(PHASE_IDLE) },
		{ RENEWED(SID, T0 + 90, T0 + 101), "", .old = 1 },
		{ CHILDREN(T0 + 101), "", .old = 1, KIDS(ME(1, 03)) },
		/* A fresh session: a fresh node, under a new uuid. */
		{ CONNECTED_AS(SID2, T0 + 300), "watch_claim create",
		  R(ELECTION_UNKNOWN), PH(PHASE_CREATING) },
		{ CREATED(ME(2, 08), SID2, T0 + 301), "list" },
		{ CHILDREN(T0 + 302), "watch_lowest:" ME(1, 03)
		  " notify:unknown>follower watch_pred:" ME(1, 03),
		  R(ELECTION_FOLLOWER), KIDS(ME(1, 03), ME(2, 08)) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
	ck_assert_str_eq(e.node, ME(2, 08));
	ck_assert_int_eq(e.session_id, SID2);
	ck_assert_uint_eq(e.epoch, 0);
}
END_TEST

/* A different session id after a reconnect means the same as expiry. */
START_TEST(test_rule8_new_session_id)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 100), "notify:leader>unknown" },
		{ CONNECTED_AS(SID2, T0 + 300), "watch_claim create",
		  PH(PHASE_CREATING) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 9: the election path disappears                                 */

START_TEST(test_rule9_create_nonode)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ CREATE_FAILED(ZNONODE, T0 + 1), "create_parent", PH(PHASE_PARENT) },
		{ PARENT_CREATED(ZOK, T0 + 2), "watch_claim create",
		  PH(PHASE_CREATING) },
		{ CREATED(ME(1, 00), SID, T0 + 3), "list" },
	};

	new_election(&e, true);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule9_list_nonode)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 100), "notify:follower>unknown" },
		{ CONNECTED(T0 + 200), "watch_claim list", PH(PHASE_LISTING) },
		{ LIST_FAILED(ZNONODE, T0 + 201), "create_parent", PH(PHASE_PARENT) },
		/* Somebody else made it first: just as good. */
		{ PARENT_CREATED(ZNODEEXISTS, T0 + 202), "watch_claim create",
		  PH(PHASE_CREATING) },
	};

	join_follower(&e);
	RUN(&e, s);
	/* Our node went with the parent: a new uuid. */
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

START_TEST(test_rule9_list_nonode_while_leading)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CLAIM_DATA("zz", E2, T0 + 100), "list" },
		{ LIST_FAILED(ZNONODE, T0 + 101), "notify:leader>unknown create_parent",
		  R(ELECTION_UNKNOWN), PH(PHASE_PARENT) },
		{ PARENT_CREATED(ZOK, T0 + 102), "watch_claim create" },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_int_eq(out.a[0].type, ACT_WATCH_CLAIM);
}
END_TEST

START_TEST(test_rule9_parent_error_retries)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ CREATE_FAILED(ZNONODE, T0 + 1), "create_parent" },
		{ PARENT_CREATED(ZNOAUTH, T0 + 2), "", PH(PHASE_IDLE) },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_uint_gt(election_next_tick(&e), T0 + 2);
	feed(&e, (struct election_event)TICK(election_next_tick(&e)));
	ck_assert_msg(acts_match("list", rendered), "[%s]", rendered);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 10: stop and resign                                             */

START_TEST(test_rule10_stop_leader)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		/* Tell the app first and wait for it; no delete yet. */
		{ STOP(T0 + 100), "notify:leader>unknown/wait", R(ELECTION_UNKNOWN),
		  PH(PHASE_RELEASING) },
		{ TICK(T0 + 200), "" },
		{ TICK(DEADLINE1 + 10), "" },
		{ STOP(T0 + 300), "" },
		{ NOTIFIED(T0 + 400), "delete:" ME(1, 03), PH(PHASE_DELETING) },
		{ DELETED(ZOK, T0 + 401), "exit", PH(PHASE_STOPPED) },
		/* Stopped: deaf to everything. */
		{ CONNECTED(T0 + 500), "", PH(PHASE_STOPPED) },
		{ TICK(T0 + 600), "", PH(PHASE_STOPPED) },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule10_stop_follower)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ STOP(T0 + 100), "notify:follower>unknown delete:" ME(1, 05),
		  R(ELECTION_UNKNOWN), PH(PHASE_DELETING) },
		{ DELETED(ZNONODE, T0 + 101), "exit", PH(PHASE_STOPPED) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule10_resign_leader)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t t = T0 + 1000, hold = 5000;
	const struct step s[] = {
		{ RESIGN(hold, t), "notify:leader>follower/wait",
		  R(ELECTION_FOLLOWER), PH(PHASE_RELEASING) },
		{ TICK(t + 1), "" },
		{ NOTIFIED(t + 50), "delete:" ME(1, 03), PH(PHASE_DELETING) },
		{ DELETED(ZOK, t + 51), "", R(ELECTION_FOLLOWER), PH(PHASE_HOLDING) },
		{ TICK(t + hold - 1), "", PH(PHASE_HOLDING) },
		{ TICK(t + hold), "create", PH(PHASE_CREATING) },
		{ CREATED(ME(2, 09), SID, t + hold + 1), "list" },
		/* At the back of the queue now. */
		{ CHILDREN(t + hold + 2), "watch_lowest:" E04 " watch_pred:" E04,
		  R(ELECTION_FOLLOWER), KIDS(E04, ME(2, 09)) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
	ck_assert_uint_eq(e.epoch, 0);
}
END_TEST

START_TEST(test_rule10_resign_holding_next_tick)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ RESIGN(3000, T0 + 100), "notify:leader>follower/wait" },
		{ NOTIFIED(T0 + 101), "delete" },
		{ DELETED(ZOK, T0 + 102), "", PH(PHASE_HOLDING) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(election_next_tick(&e), T0 + 100 + 3000);
}
END_TEST

START_TEST(test_rule10_resign_follower)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ RESIGN(0, T0 + 100), "delete:" ME(1, 05), R(ELECTION_FOLLOWER),
		  PH(PHASE_DELETING) },
		{ DELETED(ZOK, T0 + 101), "", PH(PHASE_HOLDING) },
		{ TICK(T0 + 102), "create" },
	};

	join_follower(&e);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 12: read-only and failed authentication                         */

START_TEST(test_rule12_readonly)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ READONLY(T0 + 100), "notify:leader>unknown", R(ELECTION_UNKNOWN),
		  PH(PHASE_IDLE) },
		{ TICK(T0 + 200), "", R(ELECTION_UNKNOWN) },
		{ CLAIMED(E2, T0 + 100, T0 + 201), "", .old = 1 },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_int_eq(election_role_at(&e, T0 + 200), ELECTION_UNKNOWN);
}
END_TEST

START_TEST(test_rule12_auth_failed)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ AUTH_FAILED(T0 + 100), "notify:leader>unknown", R(ELECTION_UNKNOWN),
		  PH(PHASE_IDLE) },
		{ TICK(T0 + 101), "" },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_int_eq(election_role_at(&e, T0 + 101), ELECTION_UNKNOWN);
	ck_assert_uint_gt(election_next_tick(&e), T0 + 101);
	feed(&e, (struct election_event)TICK(election_next_tick(&e)));
	ck_assert_msg(acts_match("new_session", rendered), "[%s]", rendered);
}
END_TEST

START_TEST(test_rule12_follower_readonly)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ READONLY(T0 + 100), "notify:follower>unknown",
		  R(ELECTION_UNKNOWN) },
		{ CONNECTED(T0 + 200), "watch_claim list" },
		{ CHILDREN(T0 + 201), "watch_lowest:" ME(1, 05) " claim:" ME(1, 05),
		  KIDS(ME(1, 05)) },
		/* Read-only again before the claim returns: no leadership. */
		{ READONLY(T0 + 202), "", R(ELECTION_UNKNOWN) },
		{ CLAIMED(E2, T0 + 201, T0 + 203), "", .old = 1 },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Observers                                                            */

START_TEST(test_observer)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim list", R(ELECTION_UNKNOWN),
		  PH(PHASE_OBSERVING) },
		{ CHILDREN(T0 + 1), "watch_lowest:" F03 " notify:unknown>observer",
		  R(ELECTION_OBSERVER), PH(PHASE_OBSERVING), KIDS(E04, F03) },
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 2), "" },
		{ CLAIM_DATA("f1", E2, T0 + 3), "", R(ELECTION_OBSERVER) },
		{ CHILDREN(T0 + 4), "", R(ELECTION_OBSERVER), KIDS(E04, F03) },
		{ RESIGN(1000, T0 + 5), "", R(ELECTION_OBSERVER) },
		{ TICK(T0 + 5000), "", R(ELECTION_OBSERVER) },
		{ CONNECTING(T0 + 6000), "notify:observer>unknown", R(ELECTION_UNKNOWN) },
		{ CONNECTED(T0 + 7000), "watch_claim list", PH(PHASE_OBSERVING) },
		{ CHILDREN(T0 + 7001), "watch_lowest notify:unknown>observer",
		  R(ELECTION_OBSERVER), KIDS(E04, F03) },
		{ STOP(T0 + 8000), "notify:observer>unknown exit", PH(PHASE_STOPPED) },
	};

	new_election(&e, false);
	RUN(&e, s);
}
END_TEST

START_TEST(test_observer_reports_leader)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim list", PH(PHASE_OBSERVING) },
		{ CHILDREN(T0 + 1), "watch_lowest:" F03 " notify:unknown>observer",
		  R(ELECTION_OBSERVER), KIDS(E04, F03) },
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 2), "" },
		{ CLAIM_DATA("f1", E2, T0 + 3), "" },
	};

	new_election(&e, false);
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert_int_eq(r.role, ELECTION_OBSERVER);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, "f1");
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E2);
	ck_assert_uint_eq(r.epoch, 0);
	ck_assert_int_eq(r.candidates, 2);
	ck_assert_int_eq(r.position, -1);
	ck_assert_int_eq(election_role_at(&e, T0 + 4), ELECTION_OBSERVER);
}
END_TEST

START_TEST(test_observer_parent_missing)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim list", PH(PHASE_OBSERVING) },
		{ LIST_FAILED(ZNONODE, T0 + 1), "create_parent", PH(PHASE_PARENT) },
		{ PARENT_CREATED(ZNODEEXISTS, T0 + 2), "watch_claim list",
		  PH(PHASE_OBSERVING) },
		{ CHILDREN(T0 + 3), "notify:unknown>observer", R(ELECTION_OBSERVER),
		  KIDS(NULL) },
	};

	new_election(&e, false);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, "");
}
END_TEST

/* ------------------------------------------------------------------ */
/* The leader as followers see it                                       */

START_TEST(test_view_leader)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s1[] = {
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 10), "" },
		{ CLAIM_DATA("f1", E2, T0 + 11), "", R(ELECTION_FOLLOWER) },
		{ CHILDREN(T0 + 12), "watch_pred:" E04, R(ELECTION_FOLLOWER),
		  KIDS(D07, ME(1, 05), E04, F03) },
	};
	const struct step s2[] = {
		/* The claimant left: nobody named until the next claim. */
		{ LOWEST_CHANGED(F03, true, T0 + 20), "",
		  R(ELECTION_FOLLOWER) },
	};

	join_follower(&e);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
	RUN(&e, s1);
	election_report(&e, &r);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, "f1");
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E2);
	ck_assert_int_eq(r.role, ELECTION_FOLLOWER);
	ck_assert_uint_eq(r.epoch, 0);
	RUN(&e, s2);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
}
END_TEST

START_TEST(test_view_claim_by_other_id)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 10), "" },
		/* The election node names somebody who is not the lowest. */
		{ CLAIM_DATA("e1", E2, T0 + 11), "" },
	};

	join_follower(&e);
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
}
END_TEST

START_TEST(test_view_claim_older_than_lowest)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		/* "f1" claimed once, then rejoined: its new node is younger
		 * than the claim, so the claim is not this node's. */
		{ LOWEST_DATA(F03, "f1", E2 + 5, T0 + 10), "" },
		{ CLAIM_DATA("f1", E2, T0 + 11), "" },
	};

	join_follower(&e);
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
}
END_TEST

START_TEST(test_view_empty_claim)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 10), "" },
		{ CLAIM_DATA("f1", E2, T0 + 11), "" },
		{ { .type = EV_CLAIM_DATA, .rc = ZOK, .data = "", .datalen = 0,
		    .zxid = E2 + 1, .now = T0 + 12 }, "" },
	};

	join_follower(&e);
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
}
END_TEST

START_TEST(test_view_not_while_disconnected)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 10), "" },
		{ CLAIM_DATA("f1", E2, T0 + 11), "" },
		{ CONNECTING(T0 + 12), "notify:follower>unknown" },
	};

	join_follower(&e);
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
}
END_TEST

START_TEST(test_view_lowest_changed_not_deleted)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 10), "" },
		{ LOWEST_CHANGED(E04, false, T0 + 11), "" },
		{ LOWEST_CHANGED(F03, false, T0 + 12), "watch_lowest:" F03 },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The status index                                                     */

START_TEST(test_index)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t i0, i;

	new_election(&e, true);
	i0 = e.index;
	feed(&e, (struct election_event)CONNECTED(T0));
	ck_assert_uint_gt(e.index, i0);		/* the session changed */
	i = e.index;
	feed(&e, (struct election_event)CREATED(ME(1, 03), SID, T0 + 1));
	ck_assert_uint_eq(e.index, i);		/* nothing reported changed */
	{
		const struct step s[] = {
			{ CHILDREN(T0 + 2), "watch_lowest claim", KIDS(ME(1, 03), E04) },
		};
		RUN(&e, s);
	}
	ck_assert_uint_eq(e.index, i + 1);	/* candidates and position */
	i = e.index;
	feed(&e, (struct election_event)CLAIMED(E1, T0 + 2, T0 + 3));
	ck_assert_uint_eq(e.index, i + 1);	/* role and epoch, one change */
	i = e.index;
	/* Renewing moves only the lease clock, which is not indexed. */
	feed(&e, (struct election_event)TICK(T0 + 2 + RENEW_EVERY));
	ck_assert(has_action(&out, ACT_RENEW));
	feed(&e, (struct election_event)RENEWED(SID, T0 + 2 + RENEW_EVERY,
	    T0 + 2 + RENEW_EVERY + 5));
	feed(&e, (struct election_event)TICK(T0 + 2 + RENEW_EVERY + 10));
	feed(&e, (struct election_event)CLAIM_DATA(MY_ID, E1, T0 + 2 + RENEW_EVERY + 11));
	ck_assert_uint_eq(e.index, i);
	/* Stale events change nothing, the index included. */
	{
		struct election_event ev = CHILDREN(T0 + 3000);
		ev.gen = e.gen - 1;
		feed(&e, ev);
	}
	ck_assert_uint_eq(e.index, i);
	feed(&e, (struct election_event)CONNECTING(T0 + 3001));
	ck_assert_uint_eq(e.index, i + 1);
}
END_TEST

START_TEST(test_index_follower_candidates)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t i;
	const struct step s1[] = {
		{ PRED_WRITTEN(E04, T0 + 10), "list" },
		/* Same queue, same report. */
		{ CHILDREN(T0 + 11), "watch_pred:" E04, KIDS(D07, ME(1, 05), E04, F03) },
	};
	const struct step s2[] = {
		{ PRED_WRITTEN(E04, T0 + 20), "list" },
		/* One more behind us: candidates change. */
		{ CHILDREN(T0 + 21), "watch_pred:" E04,
		  KIDS(D07, ME(1, 05), E04, F03, NODE(HD, 08)) },
	};
	const struct step s3[] = {
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 30), "" },
		{ CLAIM_DATA("f1", E2, T0 + 31), "" },
	};

	join_follower(&e);
	/* join_follower leaves lowest_known false; fill it in first so
	 * the relisting does not ask for the lowest node again. */
	feed(&e, (struct election_event)LOWEST_DATA(F03, "x", 0x100000001, T0 + 9));
	i = e.index;
	RUN(&e, s1);
	ck_assert_uint_eq(e.index, i);
	RUN(&e, s2);
	ck_assert_uint_eq(e.index, i + 1);
	i = e.index;
	RUN(&e, s3);
	ck_assert_uint_eq(e.index, i + 1);	/* a leader is named */
}
END_TEST

/* ------------------------------------------------------------------ */
/* election_node_seq                                                    */

static const struct {
	const char	*name;
	int64_t		 seq;
} seq_cases[] = {
	{ "_c_" U(1) "-latch-0000000003", 3 },
	{ "_c_" HF "-latch-0000000000", 0 },
	{ "_c_" HF "-latch-9999999999", INT64_C(9999999999) },
	{ "_c_" HF "-latch-2147483647", INT64_C(2147483647) },
	{ "latch-0000000042", 42 },
	{ "_c_" HF "-latch-000000003", -1 },		/* 9 digits */
	{ "_c_" HF "-latch-00000000003", -1 },		/* 11 digits */
	{ "_c_" HF "-latch-00000a0003", -1 },		/* not a digit */
	{ "_c_" HF "-latch-+000000003", -1 },
	{ "_c_" HF "-latch--000000003", -1 },
	{ "_c_" HF "-latch-0000000003 ", -1 },
	{ "_c_" HF "-latch-", -1 },			/* no suffix */
	{ "_c_" HF "-lock-0000000003", -1 },
	{ "_c_" HF "-0000000003", -1 },
	{ "0000000003", -1 },
	{ "atch-0000000003", -1 },
	{ "", -1 },
};

START_TEST(test_node_seq)
{
	ck_assert_msg(election_node_seq(seq_cases[_i].name) == seq_cases[_i].seq,
	    "election_node_seq(\"%s\") = %" PRId64 ", expected %" PRId64,
	    seq_cases[_i].name, election_node_seq(seq_cases[_i].name),
	    seq_cases[_i].seq);
}
END_TEST

START_TEST(test_node_seq_length)
{
	char name[ELECTION_NAME_MAX + 16];
	const char *tail = "-latch-0000000007";
	size_t pad;

	/* Longest that fits: ELECTION_NAME_MAX - 1 characters. */
	pad = ELECTION_NAME_MAX - 1 - strlen(tail);
	memset(name, 'a', pad);
	strcpy(name + pad, tail);
	ck_assert_uint_eq(strlen(name), ELECTION_NAME_MAX - 1);
	ck_assert_int_eq(election_node_seq(name), 7);
	/* One more is too long to be a name we can hold. */
	memset(name, 'a', pad + 1);
	strcpy(name + pad + 1, tail);
	ck_assert_int_eq(election_node_seq(name), -1);
	memset(name, 'a', pad + 10);
	strcpy(name + pad + 10, tail);
	ck_assert_int_eq(election_node_seq(name), -1);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Defects found in election.c (kept in the suite; they fail until fixed) */

/*
 * Regression: election_on_claimed() ignores ev->now. A claim answered after its
 * lease already ran out (the process was paused between sending the multi
 * and handling the answer) still sets role = leader and emits
 * ACT_NOTIFY(unknown>leader): the app's on_leader hook runs for a term
 * whose lease is over (rule 2: "every answer re-checks the deadline").
 */
START_TEST(test_bug_claimed_after_lease)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct election_action *a;
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ CREATED(ME(1, 03), SID, T0 + 1), "list" },
		{ CHILDREN(T0 + 2), "watch_lowest claim", KIDS(ME(1, 03)) },
	};

	new_election(&e, true);
	RUN(&e, s);
	/* Sent at T0 + 2, handled 5 s later (lease is 4 s). */
	feed(&e, (struct election_event)CLAIMED(E1, T0 + 2, T0 + 2 + LEASE + 1000));
	a = find_notify(&out);
	ck_assert_msg(a == NULL || a->to != ELECTION_LEADER,
	    "the app is told it leads with its lease already lapsed: [%s]",
	    rendered);
	ck_assert_int_ne(e.role, ELECTION_LEADER);
}
END_TEST

/*
 * Regression: election_on_children() answers a LIST error other than connection
 * loss/timeout (e.g. ZNOAUTH) with election_retry(), which sets phase IDLE
 * even while leading, and leaves role = leader. on_tick() checks the lease
 * only in PHASE_LEADING, so renewals stop and the lapse never emits
 * ACT_NOTIFY(leader>unknown): the app is never told it lost leadership
 * (rule 2). The retry then re-lists and re-claims with role already
 * leader, so the epoch changes without any notify either.
 */
START_TEST(test_bug_list_error_while_leading)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CLAIM_DATA("f1", E2, T0 + 100), "list", R(ELECTION_LEADER) },
		{ LIST_FAILED(ZNOAUTH, T0 + 101), NULL },
	};
	const struct election_action *a;

	join_leader(&e);
	RUN(&e, s);
	feed(&e, (struct election_event)TICK(DEADLINE1));
	a = find_notify(&out);
	ck_assert_msg(a != NULL && a->from == ELECTION_LEADER,
	    "lease lapsed at the tick, but no notify: [%s] (phase %s)",
	    rendered, election_phase_name(e.phase));
	ck_assert_int_ne(e.role, ELECTION_LEADER);
}
END_TEST

/*
 * Regression: EV_STOP while a resign is RELEASING (the app not yet told: no
 * EV_NOTIFIED) goes through election_release() with role = follower, so it
 * takes the "not leading" path and emits ACT_DELETE at once. The node is
 * let go before the app acknowledged the loss (rule 10, §1 "a loss of
 * leadership is always signalled before the agent lets its node go").
 */
START_TEST(test_bug_stop_during_resign_release)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ RESIGN(5000, T0 + 100), "notify:leader>follower/wait",
		  PH(PHASE_RELEASING) },
	};

	join_leader(&e);
	RUN(&e, s);
	feed(&e, (struct election_event)STOP(T0 + 101));
	ck_assert_msg(!has_action(&out, ACT_DELETE),
	    "node deleted before EV_NOTIFIED: [%s]", rendered);
	feed(&e, (struct election_event)NOTIFIED(T0 + 200));
	ck_assert_msg(has_action(&out, ACT_DELETE), "[%s]", rendered);
	feed(&e, (struct election_event)DELETED(ZOK, T0 + 201));
	ck_assert_msg(acts_match("exit", rendered), "[%s]", rendered);
}
END_TEST

/* Regression: the same with a second resign while the first is RELEASING. */
START_TEST(test_bug_resign_twice_during_release)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ RESIGN(5000, T0 + 100), "notify:leader>follower/wait",
		  PH(PHASE_RELEASING) },
	};

	join_leader(&e);
	RUN(&e, s);
	feed(&e, (struct election_event)RESIGN(5000, T0 + 101));
	ck_assert_msg(!has_action(&out, ACT_DELETE),
	    "node deleted before EV_NOTIFIED: [%s]", rendered);
}
END_TEST

/*
 * Regression: a resign whose delete fails with an error other than ZNONODE
 * (ZSYSTEMERROR, ZNOAUTH, ...) goes to election_retry(): phase IDLE with
 * node and uuid kept. The retry tick then calls election_rejoin(), which
 * LISTs, finds our node still lowest and CLAIMs: the resigned agent takes
 * leadership back at once instead of retrying the delete and holding.
 */
START_TEST(test_bug_resign_delete_error)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t t;
	const struct step s[] = {
		{ RESIGN(10000, T0 + 100), "notify:leader>follower/wait" },
		{ NOTIFIED(T0 + 101), "delete:" ME(1, 03) },
		{ DELETED(ZSYSTEMERROR, T0 + 102), NULL },
	};

	join_leader(&e);
	RUN(&e, s);
	t = election_next_tick(&e);
	ck_assert_uint_gt(t, 0);
	ck_assert_uint_lt(t, T0 + 100 + 10000);
	feed(&e, (struct election_event)TICK(t));
	ck_assert_msg(acts_match("delete:" ME(1, 03), rendered),
	    "retry of a failed resign delete: [%s], expected [delete]",
	    rendered);
}
END_TEST

/*
 * Regression: EV_RESIGN while disconnected (role already unknown, node known)
 * takes election_release()'s last branch: phase HOLDING with node and uuid
 * forgotten, no delete ever. When the same session reconnects, the node is
 * still there, still in the queue, and nobody owns it any more: once it is
 * lowest, nobody claims and the election stalls for the session's life.
 * (The RELEASING path, EV_NOTIFIED while disconnected, keeps the node and
 * deletes it on reconnect; this one does not.)
 */
START_TEST(test_bug_resign_while_disconnected)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 100), "notify:leader>unknown" },
		{ RESIGN(5000, T0 + 101), NULL },
	};

	join_leader(&e);
	RUN(&e, s);
	feed(&e, (struct election_event)CONNECTED(T0 + 200));
	ck_assert_msg(has_action(&out, ACT_DELETE),
	    "resigned while disconnected; on reconnecting [%s], but "
	    ME(1, 03) " is never deleted", rendered);
}
END_TEST

/*
 * Regression: EV_LOWEST_CHANGED(deleted) for our own node while leading (the
 * leader keeps the lowest-node watch on its own node) only clears the view;
 * the leader keeps leading until its next renewal (up to T/3 later) reads
 * ZNONODE, while the successor's predecessor watch fires at the same moment
 * and it may claim: two agents answer is_leader at once. Rule 4: an
 * evaluation that does not find us lowest clears leadership.
 */
START_TEST(test_bug_own_node_deleted_while_leading)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ LOWEST_CHANGED(ME(1, 03), true, T0 + 100), NULL },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_msg(election_role_at(&e, T0 + 100) != ELECTION_LEADER,
	    "own node deleted, still leader: [%s]", rendered);
}
END_TEST

/*
 * Regression: session expiry while holding after a resign drops the hold: EXPIRED
 * sets phase IDLE, and the new session's CONNECTED rejoins (ACT_CREATE) at
 * once instead of after hold_until.
 */
START_TEST(test_bug_expiry_during_hold)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ RESIGN(60000, T0 + 100), "notify:leader>follower/wait" },
		{ NOTIFIED(T0 + 101), "delete" },
		{ DELETED(ZOK, T0 + 102), "", PH(PHASE_HOLDING) },
		{ EXPIRED(T0 + 200), NULL },
	};

	join_leader(&e);
	RUN(&e, s);
	feed(&e, (struct election_event)CONNECTED_AS(SID2, T0 + 300));
	ck_assert_msg(!has_action(&out, ACT_CREATE),
	    "rejoined %d ms into a 60 s hold: [%s]", 200, rendered);
}
END_TEST

/* ------------------------------------------------------------------ */


/* ------------------------------------------------------------------ */
/* Our own node and the leader's queue watch                           */

/* A follower whose node is deleted by someone else rejoins at once. */
START_TEST(test_self_deleted_follower_rejoins)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ SELF_CHANGED(ME(1, 05), true, T0 + 50),
		  "notify:follower>unknown watch_claim create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
		{ CREATED(ME(2, 08), SID, T0 + 55), "list" },
		{ CHILDREN(T0 + 60), "watch_lowest:" F03 " watch_self:" ME(2, 08)
		  " notify:unknown>follower watch_pred:" D07, R(ELECTION_FOLLOWER),
		  KIDS(D07, ME(2, 08), E04, F03) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* The awget on our own node finds it gone: the same as its deletion. */
START_TEST(test_self_set_nonode_rejoins)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ SELF_SET(ME(1, 05), ZNONODE, T0 + 50),
		  "notify:follower>unknown watch_claim create", PH(PHASE_CREATING) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* A leader whose node is deleted stops leading before anything else. */
START_TEST(test_self_deleted_leader_stops_at_once)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ SELF_CHANGED(ME(1, 03), true, T0 + 100),
		  "notify:leader>unknown watch_claim create", R(ELECTION_UNKNOWN) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert(election_role_at(&e, T0 + 100) == ELECTION_UNKNOWN);
}
END_TEST

/* A watch on a node that is no longer ours, a data change, or our own
 * delete during a resign change nothing (but the data change re-arms). */
START_TEST(test_self_watch_ignored_cases)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ SELF_CHANGED(E04, true, T0 + 50), "" },
		{ SELF_CHANGED(ME(1, 05), false, T0 + 51), "watch_self:" ME(1, 05) },
		{ RESIGN(1000, T0 + 60), "delete:" ME(1, 05), PH(PHASE_DELETING) },
	};
	const struct step t[] = {
		{ SELF_CHANGED(ME(1, 05), true, T0 + 61), "", PH(PHASE_DELETING) },
	};

	join_follower(&e);
	RUN(&e, s);
	RUN(&e, t);
}
END_TEST

/* Only the leader watches the whole queue, and re-arms the watch. */
START_TEST(test_leader_watches_children)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN_CHANGED(T0 + 100), "watch_children" },
		{ CHILDREN(T0 + 102), "", R(ELECTION_LEADER), PH(PHASE_LEADING),
		  KIDS(ME(1, 03), E04, D07) },
	};
	const struct step f[] = {
		{ CHILDREN_CHANGED(T0 + 100), "" },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_int_eq(e.candidates, 3);
	join_follower(&e);
	RUN(&e, f);
}
END_TEST


/* The election node did not exist when the claim watch was asked for (no
 * watch is set then): it is asked for again once the node is seen. */
START_TEST(test_claim_watch_rearmed_after_nonode)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim create" },
		{ { .type = EV_CLAIM_DATA, .rc = ZNONODE, .now = T0 + 1 }, "" },
		{ CREATED(ME(1, 05), SID, T0 + 5), "list" },
		{ CHILDREN(T0 + 8), "watch_claim watch_lowest:" F03
		  " notify:unknown>follower watch_pred:" E04,
		  KIDS(ME(1, 05), E04, F03) },
		{ CLAIM_DATA("f", E1, T0 + 9), "" },
		{ CHILDREN(T0 + 10), "watch_lowest:" F03 " watch_pred:" E04,
		  KIDS(ME(1, 05), E04, F03) },
	};

	new_election(&e, true);
	RUN(&e, s);
}
END_TEST


/* A leader change costs a follower further back no listing: it reads the
 * next node ahead of it, then the claim, and names the new leader. */
START_TEST(test_view_next_leader_without_listing)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ LOWEST_DATA(F03, "f1", 0x100000001, T0 + 10), "" },
		{ CLAIM_DATA("f1", E1, T0 + 11), "" },
		/* The leader left: nothing to read until the next claim. */
		{ LOWEST_CHANGED(F03, true, T0 + 20), "" },
		{ CLAIM_CHANGED(T0 + 22), "watch_claim" },
		/* The claim: now read the next node ahead of us. */
		{ CLAIM_DATA("e1", E2, T0 + 23), "watch_lowest:" E04 },
		{ LOWEST_DATA(E04, "e1", 0x100000002, T0 + 24), "" },
	};

	join_follower(&e);
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, "e1");
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E2);
	/* One node ahead of us went: one place further on, one fewer. */
	ck_assert_int_eq(r.position, 1);
	ck_assert_int_eq(r.candidates, 3);
	election_free(&e);
}
END_TEST

static Suite *
election_suite(void)
{
	Suite *s = suite_create("election");
	TCase *tc;

	tc = tcase_create("join");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_join_leader);
	tcase_add_test(tc, test_follower_predecessor);
	tcase_add_test(tc, test_follower_position);
	suite_add_tcase(s, tc);

	tc = tcase_create("rules");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_rule1_connection_lost);
	tcase_add_test(tc, test_rule1_lost_while_claiming);
	tcase_add_test(tc, test_rule2_lease_renewal);
	tcase_add_test(tc, test_rule2_late_renewal);
	tcase_add_test(tc, test_rule2_pause_past_deadline);
	tcase_add_test(tc, test_rule2_renewal_owner_mismatch);
	tcase_add_test(tc, test_rule2_renewal_nonode);
	tcase_add_test(tc, test_rule2_renewal_error);
	tcase_add_test(tc, test_rule3_created_foreign_owner);
	tcase_add_test(tc, test_rule4_not_lowest_while_leading);
	tcase_add_test(tc, test_rule4_own_node_missing_while_leading);
	tcase_add_test(tc, test_rule4_own_claim_seen);
	tcase_add_test(tc, test_rule6_adopt);
	tcase_add_test(tc, test_rule6_adopt_after_timeout);
	tcase_add_test(tc, test_rule6_foreign_match);
	tcase_add_test(tc, test_rule6_match_gone);
	tcase_add_test(tc, test_rule6_not_found);
	tcase_add_test(tc, test_rule7_stale_generation);
	tcase_add_test(tc, test_rule7_stale_view_while_disconnected);
	tcase_add_test(tc, test_rule8_expiry);
	tcase_add_test(tc, test_rule8_new_session_id);
	tcase_add_test(tc, test_rule9_create_nonode);
	tcase_add_test(tc, test_rule9_list_nonode);
	tcase_add_test(tc, test_rule9_list_nonode_while_leading);
	tcase_add_test(tc, test_rule9_parent_error_retries);
	tcase_add_test(tc, test_rule10_stop_leader);
	tcase_add_test(tc, test_rule10_stop_follower);
	tcase_add_test(tc, test_rule10_resign_leader);
	tcase_add_test(tc, test_rule10_resign_holding_next_tick);
	tcase_add_test(tc, test_rule10_resign_follower);
	tcase_add_test(tc, test_rule12_readonly);
	tcase_add_test(tc, test_rule12_auth_failed);
	tcase_add_test(tc, test_rule12_follower_readonly);
	suite_add_tcase(s, tc);

	tc = tcase_create("view");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_observer);
	tcase_add_test(tc, test_observer_reports_leader);
	tcase_add_test(tc, test_observer_parent_missing);
	tcase_add_test(tc, test_view_leader);
	tcase_add_test(tc, test_view_claim_by_other_id);
	tcase_add_test(tc, test_view_claim_older_than_lowest);
	tcase_add_test(tc, test_view_empty_claim);
	tcase_add_test(tc, test_view_not_while_disconnected);
	tcase_add_test(tc, test_view_lowest_changed_not_deleted);
	tcase_add_test(tc, test_index);
	tcase_add_test(tc, test_index_follower_candidates);
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_node_seq, 0,
	    (int)(sizeof(seq_cases) / sizeof(seq_cases[0])));
	tcase_add_test(tc, test_node_seq_length);
	suite_add_tcase(s, tc);

	tc = tcase_create("own-node");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_self_deleted_follower_rejoins);
	tcase_add_test(tc, test_self_set_nonode_rejoins);
	tcase_add_test(tc, test_self_deleted_leader_stops_at_once);
	tcase_add_test(tc, test_self_watch_ignored_cases);
	tcase_add_test(tc, test_leader_watches_children);
	tcase_add_test(tc, test_claim_watch_rearmed_after_nonode);
	tcase_add_test(tc, test_view_next_leader_without_listing);
	suite_add_tcase(s, tc);

	tc = tcase_create("regressions");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_bug_claimed_after_lease);
	tcase_add_test(tc, test_bug_list_error_while_leading);
	tcase_add_test(tc, test_bug_stop_during_resign_release);
	tcase_add_test(tc, test_bug_resign_twice_during_release);
	tcase_add_test(tc, test_bug_resign_delete_error);
	tcase_add_test(tc, test_bug_resign_while_disconnected);
	tcase_add_test(tc, test_bug_own_node_deleted_while_leading);
	tcase_add_test(tc, test_bug_expiry_during_hold);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(election_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
