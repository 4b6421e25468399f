/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for election.c, the pure election state machine: tables of
 * events (each with the actions, role and phase it must lead to) drive the
 * rules of doc/design.md, "Election rules". Time, session ids, zxids and uuids are all
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
 * Tests in the "regressions" case guard defects found and fixed in election.c
 * (issue numbers refer to the project's issue tracker).
 *
 * Time: T = 6 s, so a report interval (and a renewal period) is T/6 = 1 s,
 * a full lease is 2T/3 = 4 s after a renewal's send, and the lease of a
 * round trip sent at s is min(s + 4 s, q + 5 s) with q the latest request
 * sent at least 1 s before s on the same connection.
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
#define SIXTH		1000			/* T/6: report interval, renewal period */
#define LEASE		4000			/* 2T/3 */
#define ZK_TICK		500			/* zookeeper.tick_time: T/12 */
#define T0		((uint64_t)100000)
#define CZ1		((int64_t)0x100000002)	/* our node's czxid */
#define E1		((int64_t)0x100000004)	/* first epoch */
#define E2		((int64_t)0x100000010)	/* a later one */
#define E3		((int64_t)0x100000020)
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
/* A fresh session, its handle opened 10 ms before: a touch at the leader. */
#define CONNECTED_NEW(t) \
	{ .type = EV_SESSION, .session = SESSION_CONNECTED, .session_id = SID, \
	  .timeout_ms = T, .now = (t), .sent = (t) - 10 }
#define CONNECTED_AS(sid, t)	SESS(SESSION_CONNECTED, sid, t)
#define CONNECTING(t)		SESS(SESSION_CONNECTING, 0, t)
#define EXPIRED(t)		SESS(SESSION_EXPIRED, 0, t)
#define READONLY(t)		SESS(SESSION_READONLY, 0, t)
#define AUTH_FAILED(t)		SESS(SESSION_AUTH_FAILED, 0, t)
#define CREATED(nm, own, t) \
	{ .type = EV_CREATED, .rc = ZOK, .name = (nm), .owner = (own), \
	  .czxid = CZ1, .now = (t) }
#define CREATE_FAILED(r, t)	{ .type = EV_CREATED, .rc = (r), .now = (t) }
#define PARENT_CREATED(r, t)	{ .type = EV_PARENT_CREATED, .rc = (r), .now = (t) }
#define CHILDREN(t)		{ .type = EV_CHILDREN, .rc = ZOK, .now = (t) }
#define LIST_FAILED(r, t)	{ .type = EV_CHILDREN, .rc = (r), .now = (t) }
#define PRED_SET(nm, r, t) \
	{ .type = EV_PRED_SET, .name = (nm), .rc = (r), .now = (t) }
#define PRED_WRITTEN(nm, t) \
	{ .type = EV_PRED_CHANGED, .name = (nm), .deleted = false, .now = (t) }
#define PRED_GONE(nm, t) \
	{ .type = EV_PRED_CHANGED, .name = (nm), .deleted = true, .now = (t) }
#define OWNER(nm, r, own, t) \
	{ .type = EV_OWNER, .rc = (r), .name = (nm), .owner = (own), \
	  .czxid = CZ1, .now = (t) }
#define CLAIMED(z, t) \
	{ .type = EV_CLAIMED, .rc = ZOK, .zxid = (z), .failed_op = -1, .now = (t) }
#define CLAIM_FAILED(r, op, t) \
	{ .type = EV_CLAIMED, .rc = (r), .failed_op = (op), .now = (t) }
/* A renewal: our node (owner, czxid), then the election node (data, zxids). */
#define RENEWED(own, d, mz, pz, t) \
	{ .type = EV_RENEWED, .rc = ZOK, .owner = (own), .czxid = CZ1, \
	  .data = (d), .datalen = (int)sizeof(d) - 1, .zxid = (mz), \
	  .pzxid = (pz), .now = (t) }
#define RENEW_FAILED(r, op, t) \
	{ .type = EV_RENEWED, .rc = (r), .failed_op = (op), .now = (t) }
#define CLAIM_DATA(d, mz, pz, t) \
	{ .type = EV_CLAIM_DATA, .rc = ZOK, .data = (d), \
	  .datalen = (int)sizeof(d) - 1, .zxid = (mz), .pzxid = (pz), .now = (t) }
#define CLAIM_READ_FAILED(r, t)	{ .type = EV_CLAIM_DATA, .rc = (r), .now = (t) }
#define CLAIM_CHANGED(t)	{ .type = EV_CLAIM_CHANGED, .now = (t) }
#define SUCC_DATA(nm, d, t) \
	{ .type = EV_SUCCESSOR_DATA, .rc = ZOK, .name = (nm), .data = (d), \
	  .datalen = (int)sizeof(d) - 1, .now = (t) }
#define RELEASED(r, op, t) \
	{ .type = EV_RELEASED, .rc = (r), .failed_op = (op), .now = (t) }
#define SELF_SET(nm, r, t)	{ .type = EV_SELF_SET, .name = (nm), .rc = (r), .now = (t) }
#define SELF_CHANGED(nm, del, t) \
	{ .type = EV_SELF_CHANGED, .name = (nm), .deleted = (del), .now = (t) }
#define CHILDREN_CHANGED(t)	{ .type = EV_CHILDREN_CHANGED, .now = (t) }
#define TICK(t)			{ .type = EV_TICK, .now = (t) }
#define RESIGN(h, t)		{ .type = EV_RESIGN, .hold_ms = (h), .now = (t) }
#define STOP(t)			{ .type = EV_STOP, .now = (t) }
/* The app has heard of every loss so far. */
#define NOTIFIED(t)		{ .type = EV_NOTIFIED, .told = UINT64_MAX, .now = (t) }
#define NOTIFIED_OF(n, t)	{ .type = EV_NOTIFIED, .told = (n), .now = (t) }
#define AHEAD(nm, r, t) \
	{ .type = EV_AHEAD_CHECKED, .name = (nm), .rc = (r), .now = (t) }

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

/* zookeeper.tick_time of the next new_election (setup: ZK_TICK). */
static int stated_tick = ZK_TICK;

static void
new_election(struct election *e, bool candidate)
{
	if (current == e)
		election_free(e);	/* a second scenario on the same one */
	current = e;
	uuid_counter = 0;
	election_init(e, MY_ID, NULL, candidate);
	e->tick_ms = stated_tick;
	e->uuid_gen = test_uuid;
	e->uuid_arg = &uuid_counter;
}

static void
setup(void)
{
	current = NULL;
	stated_tick = ZK_TICK;
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
		before.now = e->now;	/* the clock moves for every event */
		before.trail_n = e->trail_n;	/* and each step's trail starts */
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

static const struct election_action *
find_notify(const struct election_actions *o)
{
	int i;

	for (i = 0; i < o->n; i++)
		if (o->a[i].type == ACT_NOTIFY)
			return &o->a[i];
	return NULL;
}

static bool
has_notify_to(const struct election_actions *o, enum election_role to)
{
	int i;

	for (i = 0; i < o->n; i++)
		if (o->a[i].type == ACT_NOTIFY && o->a[i].to == to)
			return true;
	return false;
}

/*
 * A follower reads the election node every T/6, each at a time of its own:
 * the tick that reads it next.
 */
static void
poll_claim(struct election *e)
{
	uint64_t at = e->poll_at;

	ck_assert_uint_ne(at, 0);
	ck_assert_uint_le(at, e->now + T / 3);
	feed(e, (struct election_event)TICK(at));
	ck_assert_str_eq(rendered, "read_claim");
	ck_assert_uint_eq(e->poll_at, at + T / 6);
}

/*
 * The common start: connect (a new session, its handle opened at T0 - 10),
 * create ME(1,03), find it lowest, find the election node naming somebody
 * else, claim (sent at T0 + 9, answered at T0 + 20). The session's creation
 * is a touch at the ZooKeeper leader: the lease runs to the earlier of
 * T0 + 9 + 2T/3 and T0 - 10 + 5T/6, more than a renewal interval and T/6
 * away, so the term starts at once.
 */
#define LEAD_AT		(T0 + 20)
#define DEADLINE1	(T0 + 9 + LEASE)

static void
join_leader_at(struct election *e, uint64_t deadline)
{
	const struct step s[] = {
		{ CONNECTED_NEW(T0), "read_claim create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 3, T0 + 1), "" },
		{ CREATED(ME(1, 03), SID, T0 + 5), "list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 8), "watch_self:" ME(1, 03) " read_claim",
		  R(ELECTION_UNKNOWN), PH(PHASE_TAKEOVER), KIDS(ME(1, 03), E04) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 2, T0 + 9), "claim:" ME(1, 03),
		  PH(PHASE_CLAIMING) },
		{ CLAIMED(E1, LEAD_AT), "notify:unknown>leader watch_children",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
	};

	new_election(e, true);
	RUN(e, s);
	ck_assert_uint_eq(e->epoch, (uint64_t)E1);
	ck_assert_uint_eq(e->lease_deadline, deadline);
}

static void
join_leader(struct election *e)
{
	join_leader_at(e, DEADLINE1);
}

/* A follower: ME(1,05) queued behind F03 and E04, D07 behind us. */
static void
join_follower(struct election *e)
{
	const struct step s[] = {
		{ CONNECTED(T0), "read_claim create" },
		{ CLAIM_DATA("", E1 - 3, E1 - 3, T0 + 1), "" },
		{ CREATED(ME(1, 05), SID, T0 + 5), "list" },
		{ CHILDREN(T0 + 8), "notify:unknown>follower watch_pred:" E04,
		  R(ELECTION_FOLLOWER), PH(PHASE_WATCHING),
		  KIDS(D07, ME(1, 05), E04, F03) },
		{ PRED_SET(E04, ZOK, T0 + 9), "", R(ELECTION_FOLLOWER),
		  PH(PHASE_WATCHING) },
	};

	new_election(e, true);
	RUN(e, s);
}

/*
 * Next in line: ME(1,05) behind F03 only, on a new session. It renews like
 * a leader, so that a takeover needs no round trip of its own: the first
 * renewal (sent T0 + 8) earns the session's own lease (opened T0 - 10:
 * until T0 + 8 + 2T/3), the next one T/6 after it was sent (T0 + 1008)
 * earns T0 + 1008 + 2T/3 (its q, the first renewal, allows as much: T0 + 8
 * + 5T/6).
 */
static void
join_next(struct election *e)
{
	const struct step s[] = {
		{ CONNECTED_NEW(T0), "read_claim create" },
		{ CREATED(ME(1, 05), SID, T0 + 5), "list" },
		{ CHILDREN(T0 + 8), "notify:unknown>follower watch_pred:" F03,
		  R(ELECTION_FOLLOWER), PH(PHASE_WATCHING), KIDS(ME(1, 05), F03) },
		{ CLAIM_DATA("f", E1, E1, T0 + 8), "" },
		{ PRED_SET(F03, ZOK, T0 + 8), "" },
		{ TICK(T0 + 8), "renew:" ME(1, 05) },
		{ RENEWED(SID, "f", E1, E1, T0 + 10), "", PH(PHASE_WATCHING) },
		{ TICK(T0 + 1007), "" },
		{ TICK(T0 + 1008), "renew:" ME(1, 05) },
		{ RENEWED(SID, "f", E1, E1, T0 + 1012), "", R(ELECTION_FOLLOWER) },
	};

	new_election(e, true);
	RUN(e, s);
	ck_assert_uint_eq(e->lease_deadline, T0 + 1008 + 4000);
	ck_assert_uint_eq(election_next_tick(e), T0 + 1008 + 1000);
}

/* ------------------------------------------------------------------ */
/* Joining                                                              */

START_TEST(test_join_leader)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;

	join_leader(&e);
	ck_assert_str_eq(e.uuid, U(1));
	ck_assert_str_eq(e.node, ME(1, 03));
	ck_assert_int_eq(election_role_at(&e, DEADLINE1 - 1), ELECTION_LEADER);
	ck_assert_int_eq(election_role_at(&e, DEADLINE1), ELECTION_UNKNOWN);
	ck_assert_uint_eq(election_lease_remaining(&e, LEAD_AT), DEADLINE1 - LEAD_AT);
	ck_assert_uint_eq(election_lease_remaining(&e, DEADLINE1), 0);
	/* Renewals were due from the takeover on. */
	ck_assert_uint_eq(election_next_tick(&e), T0 + 8);

	election_report(&e, &r);
	ck_assert_int_eq(r.role, ELECTION_LEADER);
	ck_assert_uint_eq(r.epoch, (uint64_t)E1);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, MY_ID);
	ck_assert(!r.has_value);
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E1);
	ck_assert_int_eq(r.candidates, 2);
	ck_assert_int_eq(r.position, 0);
	ck_assert_int_eq(r.session, SESSION_CONNECTED);
	ck_assert_int_eq(r.timeout_ms, T);
}
END_TEST

/* The value travels with the claim: in our node, our claim and the report. */
START_TEST(test_join_with_value)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;

	new_election(&e, true);
	election_free(&e);
	election_init(&e, MY_ID, "10.0.0.5:8080", true);
	e.uuid_gen = test_uuid;
	e.uuid_arg = &uuid_counter;
	feed(&e, (struct election_event)CONNECTED_NEW(T0));
	ck_assert_int_eq(out.a[1].type, ACT_CREATE);
	ck_assert_int_eq(out.a[1].datalen, 16);
	ck_assert_mem_eq(out.a[1].data, "me\n10.0.0.5:8080", 16);
	feed(&e, (struct election_event)CREATED(ME(1, 03), SID, T0 + 5));
	{
		struct step s[] = {
			{ CHILDREN(T0 + 8), "read_claim", PH(PHASE_TAKEOVER),
			  KIDS(ME(1, 03)) },
			{ CLAIM_DATA("", E1 - 3, E1 - 3, T0 + 9), "claim:" ME(1, 03) },
		};
		RUN(&e, s);
	}
	ck_assert_mem_eq(out.a[0].data, "me\n10.0.0.5:8080", 16);
	feed(&e, (struct election_event)CLAIMED(E1, T0 + 20));
	feed(&e, (struct election_event)TICK(T0 + 1100));
	feed(&e, (struct election_event)RENEWED(SID, "me\n10.0.0.5:8080", E1, E1 - 1,
	    T0 + 1110));
	ck_assert_int_eq(e.role, ELECTION_LEADER);
	election_report(&e, &r);
	ck_assert(r.has_value);
	ck_assert_str_eq(r.leader_id, MY_ID);
	ck_assert_str_eq(r.leader_value, "10.0.0.5:8080");
}
END_TEST

/* Rule 5, and contenders sort by the numeric suffix only. */
START_TEST(test_follower_predecessor)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ CONNECTED(T0), "read_claim create" },
		{ CREATED(ME(1, 05), SID, T0 + 5), "list" },
		/* By string, _c_0000... would be lowest; by suffix it is third. */
		{ CHILDREN(T0 + 8), "notify:unknown>follower watch_pred:" E04,
		  R(ELECTION_FOLLOWER), PH(PHASE_WATCHING),
		  KIDS(D07, ME(1, 05), "_c_x-lock-0000000001", E04, F03) },
		/* The predecessor went before the watch was set: list again. */
		{ PRED_SET(E04, ZNONODE, T0 + 9), "list", R(ELECTION_FOLLOWER),
		  PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 12), "watch_pred:" F03, R(ELECTION_FOLLOWER),
		  PH(PHASE_WATCHING), KIDS(D07, ME(1, 05), F03) },
		{ PRED_SET(F03, ZOK, T0 + 13), "", PH(PHASE_WATCHING) },
		/* A watch on some other node is not ours to act on. */
		{ PRED_GONE(E04, T0 + 14), "", PH(PHASE_WATCHING) },
		/* The predecessor left and nobody else was ahead of us: we
		 * are the lowest; which claim stands, the election node says. */
		{ PRED_GONE(F03, T0 + 15), "read_claim", R(ELECTION_FOLLOWER),
		  PH(PHASE_TAKEOVER) },
	};

	new_election(&e, true);
	RUN(&e, s);
	election_report(&e, &r);
	/* The count stays as last listed (others may have joined behind us
	 * since), with its age; our place is exact (issue 25, bug 2). */
	ck_assert_int_eq(r.candidates, 3);
	ck_assert_int_eq(election_candidates_age(&e, T0 + 15), 3);
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
	/* Not next in line: no renewals, only a read of the claim now and
	 * then. */
	ck_assert_uint_eq(e.next_renew, 0);
	ck_assert_uint_eq(election_next_tick(&e), e.poll_at);
}
END_TEST

/* Only the agent next in line renews; one that moves up starts to. */
START_TEST(test_next_in_line_renews)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ PRED_GONE(E04, T0 + 100), "watch_pred:" F03, PH(PHASE_WATCHING) },
		{ TICK(T0 + 100), "renew:" ME(1, 05) },
		{ TICK(T0 + 150), "" },		/* one at a time */
		{ RENEWED(SID, "f", E1, E1, T0 + 160), "" },
	};

	join_follower(&e);
	RUN(&e, s);
	/* The first renewal earns no lease: no request of this connection was
	 * answered R before it (and the session is not a new one). The next
	 * one goes out T/6 after it was sent, and earns min(q + 5T/6,
	 * s + 2T/3) from it: sent a little later than T/6 after q, the
	 * first bound binds. */
	ck_assert_uint_eq(e.lease_deadline, 0);
	ck_assert_uint_eq(election_next_tick(&e), T0 + 100 + 1000);
	feed(&e, (struct election_event)TICK(T0 + 1160));
	ck_assert_str_eq(rendered, "renew:" ME(1, 05));
	feed(&e, (struct election_event)RENEWED(SID, "f", E1, E1, T0 + 1165));
	ck_assert_uint_eq(e.lease_deadline, T0 + 100 + 5000);
	ck_assert_int_eq(election_role_at(&e, T0 + 1600), ELECTION_FOLLOWER);
}
END_TEST

/* A new claim: the first node ahead may have left. A follower that counts
 * two or more ahead checks it (it does not watch it, so as not to be woken
 * with everyone else when it goes); gone, it moves up, and the next in
 * line starts to renew. */
START_TEST(test_follower_checks_ahead_on_a_new_claim)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_follower(&e);
	feed(&e, (struct election_event)CLAIM_DATA("e", E2, E2, T0 + 100));
	ck_assert_str_eq(rendered, "check_ahead:" F03);
	/* Still there (the same leader claimed again): nothing changes. */
	feed(&e, (struct election_event)AHEAD(F03, ZOK, T0 + 101));
	ck_assert_str_eq(rendered, "");
	ck_assert_int_eq(e.position, 2);
	/* The same claim read again: no check. */
	feed(&e, (struct election_event)CLAIM_DATA("e", E2, E2, T0 + 200));
	ck_assert_str_eq(rendered, "");
	/* The next claim; this time F03 is gone. */
	feed(&e, (struct election_event)CLAIM_DATA("e", E3, E3, T0 + 2000));
	ck_assert_str_eq(rendered, "check_ahead:" F03);
	feed(&e, (struct election_event)AHEAD(F03, ZNONODE, T0 + 2001));
	ck_assert_str_eq(rendered, "");
	ck_assert_int_eq(e.position, 1);
	ck_assert_int_eq(e.nahead, 1);
	ck_assert_str_eq(e.predecessor, E04);
	/* Next in line: renewals begin (and replace the polls). */
	ck_assert_uint_eq(election_next_tick(&e), T0 + 2001);
	feed(&e, (struct election_event)TICK(T0 + 2001));
	ck_assert_str_eq(rendered, "renew:" ME(1, 05));
	/* None when next in line. */
	feed(&e, (struct election_event)CLAIM_DATA("e", E3 + 1, E3 + 1, T0 + 2002));
	ck_assert_str_eq(rendered, "");
}
END_TEST

/* Followers not next in line read the claim every T/6; it tells them who
 * leads, and keeps their connection's requests recent. */
START_TEST(test_follower_polls_the_claim)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;

	join_follower(&e);
	ck_assert_uint_ge(e.poll_at, T0 + T / 6);
	ck_assert_uint_lt(e.poll_at, T0 + T / 3);
	ck_assert_uint_eq(election_next_tick(&e), e.poll_at);
	poll_claim(&e);
	feed(&e, (struct election_event)CLAIM_DATA("f\nhttp://f:80", E1, E1 - 1,
	    e.now + 2));
	election_report(&e, &r);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, "f");
	poll_claim(&e);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The lease (rule 2)                                                   */

START_TEST(test_lease_with_steady_renewals)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t s, prev = 0;
	int i;

	join_leader(&e);
	for (i = 1; i <= 6; i++) {
		s = election_next_tick(&e);
		feed(&e, (struct election_event)TICK(s));
		ck_assert_str_eq(rendered, "renew:" ME(1, 03));
		feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1, s + 7));
		/* The next one T/6 after this one was sent. */
		ck_assert_uint_eq(e.next_renew, s + 1000);
		if (prev != 0) {
			/* q = the previous renewal, answered more than R
			 * before this one was sent: prev + 5T/6 = s + 2T/3,
			 * the cap. */
			ck_assert_uint_eq(s, prev + 1000);
			ck_assert_uint_eq(e.lease_deadline, s + 4000);
		}
		prev = s;
	}
	ck_assert_uint_eq(e.renewals, 6);
}
END_TEST

/* A new session was made by the ZooKeeper leader no sooner than we opened
 * the handle: that touch needs no report, so a fresh agent leads at once. */
START_TEST(test_lease_from_a_new_session)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event c = CONNECTED(T0);

	new_election(&e, true);
	c.sent = T0 - 20;
	feed(&e, c);
	feed(&e, (struct election_event)CREATED(ME(1, 03), SID, T0 + 5));
	{
		struct step st[] = {
			{ CHILDREN(T0 + 8), "read_claim", KIDS(ME(1, 03)) },
			{ CLAIM_DATA("", E1 - 3, E1 - 3, T0 + 9), "claim:" ME(1, 03) },
			{ CLAIMED(E1, T0 + 20), "notify:unknown>leader watch_children",
			  R(ELECTION_LEADER) },
		};
		RUN(&e, st);
	}
	/* min(s + 2T/3, opened + 5T/6) */
	ck_assert_uint_eq(e.lease_deadline, T0 + 9 + LEASE);
	/* The same session over a new connection keeps that bound. */
	feed(&e, (struct election_event)CONNECTING(T0 + 100));
	c.now = T0 + 200;
	c.sent = T0 + 150;	/* not a new session: ignored */
	feed(&e, c);
	ck_assert_uint_eq(e.session_born, T0 - 20);
}
END_TEST

/* A renewal sent late earns less: the gap before it counts. */
START_TEST(test_lease_shrinks_after_a_gap)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t s1 = T0 + 2100, s2 = s1 + 1700;

	join_leader(&e);
	feed(&e, (struct election_event)TICK(s1));
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1, s1 + 5));
	/* q = the claim (sent T0 + 9): its answer came long before s1. */
	ck_assert_uint_eq(e.lease_deadline, T0 + 9 + 5000);
	/* The loop was late by 500 ms: q = s1, so s1 + 5 s, not s2 + 4 s. */
	feed(&e, (struct election_event)TICK(s2));
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1, s2 + 5));
	ck_assert_uint_eq(e.lease_deadline, s1 + 5000);
	ck_assert(e.lease_deadline < s2 + LEASE);
}
END_TEST

/* The old lease, kept for the simulator's demonstration. */
START_TEST(test_lease_naive)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	new_election(&e, true);
	e.lease_naive = true;
	e.renew_div = 3;
	feed(&e, (struct election_event)CONNECTED(T0));
	feed(&e, (struct election_event)CREATED(ME(1, 03), SID, T0 + 5));
	{
		struct step s[] = {
			{ CHILDREN(T0 + 8), "read_claim", KIDS(ME(1, 03)) },
			{ CLAIM_DATA("", E1 - 3, E1 - 3, T0 + 9), "claim:" ME(1, 03) },
			{ CLAIMED(E1, T0 + 20), "notify:unknown>leader watch_children",
			  R(ELECTION_LEADER) },
		};
		RUN(&e, s);
	}
	ck_assert_uint_eq(e.lease_deadline, T0 + 9 + LEASE);
	/* Renewals were due from the takeover on; then every T/3. */
	ck_assert_uint_eq(election_next_tick(&e), T0 + 8);
	feed(&e, (struct election_event)TICK(T0 + 30));
	ck_assert_uint_eq(e.next_renew, T0 + 30 + 2000);
}
END_TEST

/* Rule 2: no renewal back by the deadline (a pause): step down, and a new
 * term needs a new claim, so a new epoch. */
START_TEST(test_rule2_pause_past_deadline)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(DEADLINE1 + 3000), "notify:leader>unknown/wait list",
		  R(ELECTION_UNKNOWN), PH(PHASE_LISTING) },
		{ CHILDREN(DEADLINE1 + 3010), "read_claim", PH(PHASE_TAKEOVER),
		  KIDS(ME(1, 03)) },
		/* The election node still names us with our spent epoch. */
		{ CLAIM_DATA(MY_ID, E1, E1, DEADLINE1 + 3020), "claim:" ME(1, 03),
		  PH(PHASE_CLAIMING) },
		{ CLAIMED(E2, DEADLINE1 + 3030), "", R(ELECTION_UNKNOWN) },
	};

	join_leader(&e);
	ck_assert_int_eq(election_role_at(&e, DEADLINE1), ELECTION_UNKNOWN);
	RUN(&e, s);
	ck_assert_uint_eq(e.term_epoch, (uint64_t)E2);
	ck_assert_uint_eq(e.spent_epoch, (uint64_t)E1);
}
END_TEST

/* The renewal hangs: after T/6 the stalled connection is kicked, once. */
START_TEST(test_rule2_stalled_renewal_kicked)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(T0 + 2100), "renew:" ME(1, 03) },
		{ TICK(T0 + 2100 + SIXTH - 1), "" },
		{ TICK(T0 + 2100 + SIXTH), "kick", R(ELECTION_LEADER) },
		{ TICK(T0 + 2100 + SIXTH + 500), "", R(ELECTION_LEADER) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.kicks, 1);
}
END_TEST

START_TEST(test_rule2_renewal_owner_mismatch)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(T0 + 2100), "renew:" ME(1, 03) },
		{ RENEWED(OTHER_SID, MY_ID, E1, E1, T0 + 2105),
		  "notify:leader>unknown/wait create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

START_TEST(test_rule2_renewal_nonode)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(T0 + 2100), "renew:" ME(1, 03) },
		{ RENEW_FAILED(ZNONODE, 1, T0 + 2105), "notify:leader>unknown/wait create",
		  R(ELECTION_UNKNOWN), PH(PHASE_CREATING) },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

/* Other failures leave the decision to the lease or the session event. */
START_TEST(test_rule2_renewal_error)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(T0 + 2100), "renew:" ME(1, 03) },
		{ RENEW_FAILED(ZCONNECTIONLOSS, 0, T0 + 2105), "", R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
		{ TICK(T0 + 3100), "renew:" ME(1, 03) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.lease_deadline, DEADLINE1);
}
END_TEST

/* The election node written while we lead: not our term any more. */
START_TEST(test_rule2_renewal_sees_claim_overwritten)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ TICK(T0 + 2100), "renew:" ME(1, 03) },
		{ RENEWED(SID, "intruder", E2, E1, T0 + 2105),
		  "notify:leader>unknown/wait list", R(ELECTION_UNKNOWN),
		  PH(PHASE_LISTING) },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Taking over (rules 3 and 10): named by the last leader, or claimed   */

START_TEST(test_takeover_named)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ PRED_GONE(F03, T0 + 1500), "read_claim", PH(PHASE_TAKEOVER) },
		/* The same change seen by the claim watch: the read under way
		 * brings it. */
		{ CLAIM_CHANGED(T0 + 1500), "" },
		/* The release multi deleted F03 and wrote our data: one
		 * transaction, so mzxid == pzxid, after our node's creation. */
		{ CLAIM_DATA(MY_ID, E2, E2, T0 + 1502),
		  "notify:follower>leader watch_children", R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
	};

	join_next(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, (uint64_t)E2);
	/* The lease is the one the renewals while next in line earned. */
	ck_assert_uint_eq(e.lease_deadline, T0 + 1008 + LEASE);
	election_report(&e, &r);
	ck_assert_str_eq(r.leader_id, MY_ID);
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E2);
}
END_TEST

/* Named, but no lease yet (not next in line long enough): renew first. */
START_TEST(test_takeover_named_waits_for_a_lease)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ PRED_GONE(E04, T0 + 100), "watch_pred:" F03 },
		{ PRED_GONE(F03, T0 + 101), "read_claim", PH(PHASE_TAKEOVER) },
		{ CLAIM_DATA(MY_ID, E2, E2, T0 + 103), "", R(ELECTION_FOLLOWER),
		  PH(PHASE_TAKEOVER) },
		{ TICK(T0 + 103), "renew:" ME(1, 05) },
		/* Nothing of ours was answered R before it. */
		{ RENEWED(SID, MY_ID, E2, E2, T0 + 105), "", R(ELECTION_FOLLOWER) },
		{ TICK(T0 + 1102), "" },
		{ TICK(T0 + 1103), "renew:" ME(1, 05) },
		{ RENEWED(SID, MY_ID, E2, E2, T0 + 1107),
		  "notify:follower>leader watch_children", R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
	};

	join_follower(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, (uint64_t)E2);
}
END_TEST

/* What is not a naming: each leads to a claim of our own. */
START_TEST(test_takeover_not_named_claims)
{
	static const struct {
		const char	*data;
		int64_t		 mzxid, pzxid;
	} cases[] = {
		{ "f", E2, E2 },		/* another agent's data */
		{ MY_ID, E2, E2 + 1 },		/* a join since: not one multi */
		{ MY_ID, CZ1 - 1, CZ1 - 1 },	/* before our node existed */
		{ "", E2, E2 },			/* nobody named */
	};
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event ev;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		join_next(&e);
		feed(&e, (struct election_event)PRED_GONE(F03, T0 + 1500));
		ev = (struct election_event)CLAIM_DATA("", 0, 0, T0 + 1502);
		ev.data = cases[i].data;
		ev.datalen = (int)strlen(cases[i].data);
		ev.zxid = cases[i].mzxid;
		ev.pzxid = cases[i].pzxid;
		feed(&e, ev);
		ck_assert_msg(strcmp(rendered, "claim:" ME(1, 05)) == 0,
		    "case %zu: [%s]", i, rendered);
		ck_assert_int_eq(e.role, ELECTION_FOLLOWER);
		feed(&e, (struct election_event)CLAIMED(E3, T0 + 1510));
		ck_assert_int_eq(e.role, ELECTION_LEADER);
		ck_assert_uint_eq(e.epoch, (uint64_t)E3);
	}
}
END_TEST

/* An epoch we led under is never taken again (rule 3). */
START_TEST(test_takeover_spent_epoch_not_reused)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ PRED_GONE(F03, T0 + 1500), "read_claim" },
		{ CLAIM_DATA(MY_ID, E2, E2, T0 + 1502), "notify:follower>leader "
		  "watch_children", R(ELECTION_LEADER) },
		{ TICK(T0 + 1008 + LEASE), "notify:leader>unknown/wait list",
		  R(ELECTION_UNKNOWN) },
		{ CHILDREN(T0 + 5020), "read_claim", PH(PHASE_TAKEOVER),
		  KIDS(ME(1, 05)) },
		{ CLAIM_DATA(MY_ID, E2, E2, T0 + 5022), "claim:" ME(1, 05) },
	};

	join_next(&e);
	RUN(&e, s);
}
END_TEST

/* Reads sent before our predecessor left do not decide the takeover. */
START_TEST(test_takeover_old_read_ignored)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event old, oldr;
	uint64_t gen_before;

	join_next(&e);
	feed(&e, (struct election_event)TICK(T0 + 2412));
	ck_assert_str_eq(rendered, "renew:" ME(1, 05));
	gen_before = e.gen;
	feed(&e, (struct election_event)PRED_GONE(F03, T0 + 2414));
	ck_assert_str_eq(rendered, "read_claim");
	ck_assert_uint_gt(e.gen, gen_before);
	/* A read and the renewal sent before: before the naming. */
	old = (struct election_event)CLAIM_DATA("f", E1, E1, T0 + 2415);
	old.gen = gen_before;
	feed(&e, old);
	ck_assert_str_eq(rendered, "");
	oldr = (struct election_event)RENEWED(SID, "f", E1, E1, T0 + 2416);
	oldr.gen = gen_before;
	feed(&e, oldr);
	ck_assert_str_eq(rendered, "");
	ck_assert_int_eq(e.phase, PHASE_TAKEOVER);
	feed(&e, (struct election_event)CLAIM_DATA(MY_ID, E2, E2, T0 + 2417));
	ck_assert_int_eq(e.role, ELECTION_LEADER);
}
END_TEST

/* The takeover's read is slow or lost: the next renewal (synced, sent
 * after the takeover began) decides instead; a read that fails for good
 * is retried. */
START_TEST(test_takeover_decided_by_renewal)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ PRED_GONE(F03, T0 + 1500), "read_claim", PH(PHASE_TAKEOVER) },
		{ TICK(T0 + 2412), "renew:" ME(1, 05) },
		{ RENEWED(SID, MY_ID, E2, E2, T0 + 2414),
		  "notify:follower>leader watch_children", R(ELECTION_LEADER) },
	};
	const struct step s2[] = {
		{ PRED_GONE(F03, T0 + 1500), "read_claim", PH(PHASE_TAKEOVER) },
		{ CLAIM_READ_FAILED(ZNOAUTH, T0 + 1501), "", PH(PHASE_IDLE) },
		{ TICK(T0 + 1601), "list", PH(PHASE_LISTING) },
	};

	join_next(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, (uint64_t)E2);
	join_next(&e);
	RUN(&e, s2);
}
END_TEST

/* What the last claim read found (zk.c holds a parked partition's read of
 * a node found absent behind its other requests): absent after "no node",
 * present after a read that found it, unchanged by a read that failed. */
START_TEST(test_claim_absent_is_what_the_last_read_found)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_next(&e);
	ck_assert(!e.claim_absent);
	feed(&e, (struct election_event)CLAIM_READ_FAILED(ZNONODE, T0 + 1501));
	ck_assert(e.claim_absent);
	feed(&e, (struct election_event)CLAIM_READ_FAILED(ZCONNECTIONLOSS,
	    T0 + 1502));
	ck_assert(e.claim_absent);
	feed(&e, (struct election_event)CLAIM_DATA("f", E1, E1, T0 + 1503));
	ck_assert(!e.claim_absent);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 1: connection lost while leading                                */

START_TEST(test_rule1_ride_through)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	uint64_t lost = T0 + 1500, back = lost + 1200;
	const struct step s[] = {
		/* A hanging connection attempt is kicked every T/6. */
		{ TICK(lost + SIXTH), "kick", R(ELECTION_LEADER) },
		{ TICK(lost + SIXTH + 10), "" },
		/* Back, same session: one renewal confirms the term. The
		 * queue's listing never answered (join_leader feeds none), so
		 * its watch is set again. */
		{ CONNECTED(back), "renew:" ME(1, 03) " watch_children",
		  R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
		{ RENEWED(SID, MY_ID, E1, E1 - 1, back + 4), "", R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
	};

	join_leader(&e);
	feed(&e, (struct election_event)CONNECTING(lost));
	ck_assert_uint_eq(e.riding_since, lost);
	election_report(&e, &r);
	ck_assert_int_eq(r.role, ELECTION_LEADER);
	ck_assert_int_eq(r.session, SESSION_CONNECTING);
	ck_assert_int_eq(election_role_at(&e, lost + 100), ELECTION_LEADER);
	ck_assert_uint_eq(election_lease_remaining(&e, lost + 100),
	    DEADLINE1 - lost - 100);
	ck_assert_str_eq(rendered, "");
	RUN(&e, s);
	ck_assert_uint_eq(e.epoch, (uint64_t)E1);
	ck_assert_uint_eq(e.riding_since, 0);
	ck_assert_uint_eq(e.rides_kept, 1);
	ck_assert_uint_eq(e.rides_lost, 0);
	/* The confirming renewal had no earlier answer on the new connection:
	 * it earns only what the session's creation (T0 - 10) allows; the
	 * next one, T/6 after it, earns the full lease from it: q + 5T/6,
	 * which binds as it was sent a little later than T/6 after q. */
	ck_assert_uint_eq(e.lease_deadline, T0 - 10 + 5000);
	ck_assert_uint_eq(election_next_tick(&e), back + 1000);
	feed(&e, (struct election_event)TICK(back + 1004));
	ck_assert_str_eq(rendered, "renew:" ME(1, 03));
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1, back + 1007));
	ck_assert_uint_eq(e.lease_deadline, back + 5000);
}
END_TEST

/*
 * A renewal asked for after the client lost its connection, before the loop
 * heard of it, waits in the client and goes out after the reconnect, ahead
 * of the renewal that confirms the term. Its answer comes first, under the
 * generation before the loss, and earns nothing: crediting it to the later
 * renewal's send would overstate the lease by as long as the loop took to
 * hear of the reconnect (the fleet's session renewal has no generation:
 * test-fleet.c's twin).
 */
START_TEST(test_renewal_queued_over_a_reconnect_is_void)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event a = RENEWED(SID, MY_ID, E1, E1 - 1, 0);
	struct election_event b = RENEWED(SID, MY_ID, E1, E1 - 1, 0);
	uint64_t s1, lost, back, before;

	join_leader(&e);
	s1 = LEAD_AT + 600;	/* the renewal due since the claim */
	ck_assert_uint_le(election_next_tick(&e), s1);
	feed(&e, (struct election_event)TICK(s1));
	ck_assert_str_eq(rendered, "renew:" ME(1, 03));
	a.gen = e.gen;
	lost = s1 + 2;
	back = lost + 300;
	feed(&e, (struct election_event)CONNECTING(lost));
	feed(&e, (struct election_event)CONNECTED(back));
	ck_assert_str_eq(rendered, "renew:" ME(1, 03) " watch_children");
	ck_assert_uint_ne(e.gen, a.gen);
	before = e.lease_deadline;
	a.now = back + 4;
	feed(&e, a);
	ck_assert_str_eq(rendered, "");
	ck_assert_uint_eq(e.lease_deadline, before);
	ck_assert_uint_ne(e.riding_since, 0);	/* not confirmed by it */
	ck_assert(e.renew_inflight);
	/* The confirming renewal's own answer, from its own send. */
	b.now = back + 8;
	feed(&e, b);
	ck_assert(!e.renew_inflight);
	ck_assert_uint_eq(e.riding_since, 0);
	ck_assert_uint_eq(e.lease_deadline, back + LEASE);
}
END_TEST

/* The disconnect outlasts the lease: unknown at the deadline, not before. */
START_TEST(test_rule1_ride_lapses)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 1500), "", R(ELECTION_LEADER) },
		{ TICK(DEADLINE1 - 1), NULL, R(ELECTION_LEADER) },
		{ TICK(DEADLINE1), "notify:leader>unknown/wait", R(ELECTION_UNKNOWN),
		  PH(PHASE_IDLE) },
		/* Back later: list, and a new claim (a new epoch). */
		{ CONNECTED(DEADLINE1 + 500), "read_claim list", PH(PHASE_LISTING) },
		{ CHILDREN(DEADLINE1 + 510), "read_claim", PH(PHASE_TAKEOVER),
		  KIDS(ME(1, 03)) },
		{ CLAIM_DATA(MY_ID, E1, E1 - 1, DEADLINE1 + 520), "claim:" ME(1, 03) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(find_notify(&out) == NULL ? "lease lapsed while disconnected" :
	    "", "lease lapsed while disconnected");
	ck_assert_uint_eq(e.rides_lost, 1);
	ck_assert_uint_eq(e.rides_kept, 0);
}
END_TEST

START_TEST(test_rule1_ride_lapse_reason)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct election_action *a;

	join_leader(&e);
	feed(&e, (struct election_event)CONNECTING(T0 + 1500));
	feed(&e, (struct election_event)TICK(DEADLINE1));
	a = find_notify(&out);
	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(election_reason_name(a->reason),
	    "lease lapsed while disconnected");
	/* Our node stands until the deadline: the app may take its time. */
	ck_assert(a->node_stands);
}
END_TEST

/* Back, but the election node was written meanwhile: not our term. */
START_TEST(test_rule1_ride_confirm_fails)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 1500), "" },
		{ CONNECTED(T0 + 1600), "renew:" ME(1, 03) " watch_children" },
		{ RENEWED(SID, "other", E2, E2, T0 + 1605), "notify:leader>unknown/wait list",
		  R(ELECTION_UNKNOWN), PH(PHASE_LISTING) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.rides_kept, 0);
}
END_TEST

/* The session expired while we rode: unknown, and start over. */
START_TEST(test_rule1_ride_then_expired)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 1500), "" },
		{ EXPIRED(T0 + 1600), "notify:leader>unknown/wait new_session",
		  R(ELECTION_UNKNOWN) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_eq(e.rides_lost, 1);
	ck_assert_uint_eq(e.lease_deadline, 0);
}
END_TEST

/* election.disconnect: step_down keeps the stricter behaviour. */
START_TEST(test_rule1_step_down)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 1500), "notify:leader>unknown/wait", R(ELECTION_UNKNOWN),
		  PH(PHASE_IDLE) },
		{ CONNECTED(T0 + 1600), "read_claim list", PH(PHASE_LISTING) },
	};

	join_leader(&e);
	e.step_down = true;
	RUN(&e, s);
}
END_TEST

/* Followers are unknown while disconnected; a read-only server is a loss. */
START_TEST(test_rule1_follower_and_readonly)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s1[] = {
		{ CONNECTING(T0 + 100), "notify:follower>unknown", R(ELECTION_UNKNOWN),
		  PH(PHASE_IDLE) },
		{ CONNECTED(T0 + 200), "read_claim list", PH(PHASE_LISTING) },
	};
	const struct step s2[] = {
		{ READONLY(T0 + 1500), "notify:leader>unknown/wait", R(ELECTION_UNKNOWN) },
	};

	join_follower(&e);
	RUN(&e, s1);
	join_leader(&e);
	RUN(&e, s2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rules 3 to 9                                                         */

START_TEST(test_rule3_created_foreign_owner)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "read_claim create" },
		{ CREATED(ME(1, 03), OTHER_SID, T0 + 5), "list", PH(PHASE_LISTING) },
		/* Not ours: the uuid search adopts only our own session's. */
		{ CHILDREN(T0 + 8), "get_owner:" ME(1, 03), PH(PHASE_ADOPTING),
		  KIDS(ME(1, 03)) },
		{ OWNER(ME(1, 03), ZOK, OTHER_SID, T0 + 9), "create",
		  PH(PHASE_CREATING) },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

/* Rule 4: a listing that does not show us lowest ends the term. */
START_TEST(test_rule4_not_lowest_while_leading)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN_CHANGED(T0 + 1500), "watch_children" },
		{ CHILDREN(T0 + 1505), "notify:leader>follower/wait watch_pred:" F01,
		  R(ELECTION_FOLLOWER), PH(PHASE_WATCHING), KIDS(ME(1, 03), F01) },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

/* The leader keeps its successor's name and data, read once each. */
START_TEST(test_leader_tracks_successor)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN(T0 + 1120), "read_successor:" E04, R(ELECTION_LEADER),
		  KIDS(ME(1, 03), E04, D07) },
		{ SUCC_DATA(E04, "e\nvalue", T0 + 1121), "" },
		{ CHILDREN_CHANGED(T0 + 1500), "watch_children" },
		{ CHILDREN(T0 + 1505), "", KIDS(ME(1, 03), E04, D07, NODE(HF, 09)) },
		{ CHILDREN_CHANGED(T0 + 1600), "watch_children" },
		{ CHILDREN(T0 + 1605), "read_successor:" D07, KIDS(ME(1, 03), D07) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_int_eq(e.candidates, 2);
	ck_assert_int_eq(e.succ_datalen, -1);
}
END_TEST

START_TEST(test_rule6_adopt)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "read_claim create" },
		/* The reply is lost: the outcome is unknown. */
		{ CREATE_FAILED(ZCONNECTIONLOSS, T0 + 5), "", PH(PHASE_IDLE) },
		{ CONNECTING(T0 + 6), "" },
		/* Back: the listing is synced first (a lagging server could
		 * miss our node), and finds it by uuid. */
		{ CONNECTED(T0 + 100), "read_claim list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 110), "get_owner:" ME(1, 07), PH(PHASE_ADOPTING),
		  KIDS(F03, ME(1, 07)) },
		{ OWNER(ME(1, 07), ZOK, SID, T0 + 111), "list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 120), "notify:unknown>follower watch_pred:" F03,
		  PH(PHASE_WATCHING), KIDS(F03, ME(1, 07)) },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_str_eq(e.node, ME(1, 07));
	ck_assert_str_eq(e.uuid, U(1));
}
END_TEST

/* Regression (issue 14, suspicion 2): the uuid search is a synced listing,
 * so a server that has not applied our create yet cannot hide it. */
START_TEST(test_rule6_search_is_synced)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	new_election(&e, true);
	feed(&e, (struct election_event)CONNECTED(T0));
	feed(&e, (struct election_event)CREATE_FAILED(ZOPERATIONTIMEOUT, T0 + 5));
	feed(&e, (struct election_event)CONNECTING(T0 + 6));
	feed(&e, (struct election_event)CONNECTED(T0 + 100));
	ck_assert_str_eq(rendered, "read_claim list");
	ck_assert(out.a[1].sync);
	/* An evaluation with a known node needs no sync. */
	join_follower(&e);
	feed(&e, (struct election_event)PRED_WRITTEN(E04, T0 + 100));
	ck_assert_str_eq(rendered, "list");
	ck_assert(!out.a[0].sync);
}
END_TEST

START_TEST(test_rule6_not_found_and_foreign)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "read_claim create" },
		{ CREATE_FAILED(ZCONNECTIONLOSS, T0 + 5), "" },
		{ CONNECTING(T0 + 6), "" },
		{ CONNECTED(T0 + 100), "read_claim list" },
		/* Not there: the create never happened; create (same uuid). */
		{ CHILDREN(T0 + 110), "create", PH(PHASE_CREATING), KIDS(F03) },
		{ CREATE_FAILED(ZCONNECTIONLOSS, T0 + 115), "" },
		{ CONNECTING(T0 + 116), "" },
		{ CONNECTED(T0 + 200), "read_claim list" },
		{ CHILDREN(T0 + 210), "get_owner:" ME(1, 09), KIDS(F03, ME(1, 09)) },
		/* Gone meanwhile: a fresh uuid. */
		{ OWNER(ME(1, 09), ZNONODE, 0, T0 + 211), "create", PH(PHASE_CREATING) },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
}
END_TEST

/* Rule 7: completions of an older generation change nothing at all. */
START_TEST(test_rule7_stale_generation)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 100), "notify:follower>unknown" },
		{ CONNECTED(T0 + 200), "read_claim list" },
		{ CHILDREN(T0 + 210), "", .old = 2, KIDS(ME(1, 05)) },
		{ PRED_SET(E04, ZNONODE, T0 + 211), "", .old = 2 },
		{ CLAIMED(E2, T0 + 212), "", .old = 1 },
		{ RENEWED(SID, "x", E2, E2, T0 + 213), "", .old = 1 },
		{ RELEASED(ZOK, -1, T0 + 214), "", .old = 1 },
		{ CREATED(ME(2, 11), SID, T0 + 215), "", .old = 1 },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* Watches carry no generation: one for our predecessor counts whenever it
 * comes; any other node's is ignored. */
START_TEST(test_rule7_watches_checked_by_name)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ PRED_GONE(D07, T0 + 100), "", PH(PHASE_WATCHING) },
		{ PRED_WRITTEN(F03, T0 + 101), "", PH(PHASE_WATCHING) },
		{ SELF_CHANGED(ME(9, 99), true, T0 + 102), "", R(ELECTION_FOLLOWER) },
		{ PRED_GONE(E04, T0 + 103), "watch_pred:" F03, PH(PHASE_WATCHING) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule8_expiry)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ EXPIRED(T0 + 1500), "notify:leader>unknown/wait new_session",
		  R(ELECTION_UNKNOWN), PH(PHASE_IDLE) },
		{ CONNECTED_AS(SID2, T0 + 1600), "read_claim create",
		  PH(PHASE_CREATING) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));
	ck_assert_uint_eq(e.lease_deadline, 0);
}
END_TEST

START_TEST(test_rule8_new_session_id)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 100), "notify:follower>unknown" },
		{ CONNECTED_AS(SID2, T0 + 200), "read_claim create", PH(PHASE_CREATING) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule9_paths_gone)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s1[] = {
		{ CONNECTED(T0), "read_claim create" },
		{ CREATE_FAILED(ZNONODE, T0 + 5), "create_parent", PH(PHASE_PARENT) },
		{ PARENT_CREATED(ZNODEEXISTS, T0 + 10), "read_claim create",
		  PH(PHASE_CREATING) },
	};
	const struct step s2[] = {
		{ CHILDREN_CHANGED(T0 + 1500), "watch_children" },
		{ LIST_FAILED(ZNONODE, T0 + 1505), "notify:leader>unknown/wait create_parent",
		  R(ELECTION_UNKNOWN), PH(PHASE_PARENT) },
		{ PARENT_CREATED(ZSYSTEMERROR, T0 + 1510), "", PH(PHASE_IDLE) },
		{ TICK(T0 + 1510 + 100), "create", PH(PHASE_CREATING) },
	};

	new_election(&e, true);
	RUN(&e, s1);
	join_leader(&e);
	RUN(&e, s2);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 10: stop and resign tell the app first, then let the node go    */

START_TEST(test_rule10_stop_leader_names_successor)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct election_action *a;
	const struct step s[] = {
		{ CHILDREN(T0 + 1120), "read_successor:" E04, KIDS(ME(1, 03), E04) },
		{ SUCC_DATA(E04, "e", T0 + 1121), "" },
		{ STOP(T0 + 1500), "notify:leader>unknown/wait", R(ELECTION_UNKNOWN),
		  PH(PHASE_RELEASING) },
		/* Nothing lets the node go before the app has been told. */
		{ TICK(T0 + 1600), "", PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 1700), "release:" ME(1, 03), PH(PHASE_DELETING) },
	};

	join_leader(&e);
	RUN(&e, s);
	a = &out.a[0];
	ck_assert_str_eq(a->successor, E04);
	ck_assert(a->write_claim);
	ck_assert_int_eq(a->datalen, 1);
	ck_assert_mem_eq(a->data, "e", 1);
	feed(&e, (struct election_event)RELEASED(ZOK, -1, T0 + 1710));
	ck_assert_str_eq(rendered, "exit");
	ck_assert_int_eq(e.phase, PHASE_STOPPED);
}
END_TEST

/* The last one out says nobody leads; its successor gone meanwhile, it
 * lets go without naming anyone. */
START_TEST(test_rule10_release_without_successor)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CHILDREN(T0 + 1120), "read_successor:" E04, KIDS(ME(1, 03), E04) },
		{ SUCC_DATA(E04, "e", T0 + 1121), "" },
		{ RESIGN(0, T0 + 1500), "notify:leader>follower/wait",
		  R(ELECTION_FOLLOWER), PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 1510), "release:" ME(1, 03) },
		/* The check of E04 failed: it left. */
		{ RELEASED(ZNONODE, 0, T0 + 1515), "release:" ME(1, 03) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_str_eq(out.a[0].successor, "");
	ck_assert(out.a[0].write_claim);
	ck_assert_int_eq(out.a[0].datalen, 0);
	feed(&e, (struct election_event)RELEASED(ZOK, -1, T0 + 1520));
	ck_assert_int_eq(e.phase, PHASE_HOLDING);
	ck_assert_str_eq(e.node, "");
}
END_TEST

/* A follower lets go with a plain delete; ours gone already is fine. */

/*
 * Rule 10 after a term that ended without a release: under step_down the
 * connection drop ends the term at once (the app is told, its child may
 * run until shortly before the lease deadline); the agent reconnects on
 * the same session, still lowest, and a stop or a resign comes before it
 * leads again. Our node, which outlived the term, must not go until the
 * app has heard of the loss (EV_NOTIFIED).
 */
START_TEST(test_rule10_release_after_standing_loss_waits_for_app)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step back[] = {
		{ CONNECTED(T0 + 1600), "read_claim list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 1610), "read_claim", PH(PHASE_TAKEOVER),
		  KIDS(ME(1, 03), E04) },
	};
	const struct step stop[] = {
		{ STOP(T0 + 1620), "", R(ELECTION_UNKNOWN), PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 3000), "release:" ME(1, 03), PH(PHASE_DELETING) },
	};
	const struct step resign[] = {
		{ RESIGN(5000, T0 + 1620), "notify:unknown>follower",
		  R(ELECTION_FOLLOWER), PH(PHASE_RELEASING) },
		{ TICK(T0 + 2000), NULL, PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 3000), "release:" ME(1, 03), PH(PHASE_DELETING) },
	};
	const struct election_action *a;

	join_leader(&e);
	e.step_down = true;
	feed(&e, (struct election_event)CONNECTING(T0 + 1500));
	a = find_notify(&out);
	ck_assert_ptr_nonnull(a);
	ck_assert(a->wait && a->node_stands);
	RUN(&e, back);
	RUN(&e, stop);

	join_leader(&e);
	e.step_down = true;
	feed(&e, (struct election_event)CONNECTING(T0 + 1500));
	RUN(&e, back);
	RUN(&e, resign);
}
END_TEST

/*
 * An acknowledgement counts only for the losses up to the one it names: one
 * queued before a later loss must not let the node go while the app is
 * still hearing of that one (the simulator found it: a lapse applied at
 * the top of the step that carried the older acknowledgement).
 */
START_TEST(test_rule10_stale_acknowledgement_does_not_release)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0 + 1600), "read_claim list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 1610), "read_claim", PH(PHASE_TAKEOVER),
		  KIDS(ME(1, 03), E04) },
		{ STOP(T0 + 1620), "", PH(PHASE_RELEASING) },
		{ NOTIFIED_OF(0, T0 + 1700), "", PH(PHASE_RELEASING) },
		{ NOTIFIED_OF(1, T0 + 3000), "release:" ME(1, 03),
		  PH(PHASE_DELETING) },
	};
	const struct election_action *a;

	join_leader(&e);
	e.step_down = true;
	feed(&e, (struct election_event)CONNECTING(T0 + 1500));
	a = find_notify(&out);
	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq(a->told, 1);
	RUN(&e, s);
}
END_TEST

/* Told already: a release after a standing loss goes at once. */
START_TEST(test_rule10_release_after_told_goes_at_once)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 1500), "notify:leader>unknown/wait" },
		{ NOTIFIED(T0 + 1550), "" },
		{ CONNECTED(T0 + 1600), "read_claim list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 1610), "read_claim", PH(PHASE_TAKEOVER),
		  KIDS(ME(1, 03), E04) },
		{ STOP(T0 + 1620), "release:" ME(1, 03), PH(PHASE_DELETING) },
	};

	join_leader(&e);
	e.step_down = true;
	RUN(&e, s);
}
END_TEST

/*
 * A reconnect within the session negotiated a smaller T (a server with a
 * lower maxSessionTimeout): its revalidation touched the session with it,
 * no sooner than the send of the last request answered (T0 + 9, the
 * claim). The lease may reach no later than T0 + 9 + 2000 - 2000/6, and T
 * stays the smaller one when a later reconnect offers more (a new
 * ZooKeeper leader restores the session's first timeout, a server the
 * one it negotiated).
 */
START_TEST(test_lease_after_timeout_shrinks)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event ev = CONNECTED(T0 + 1600);

	join_leader(&e);
	feed(&e, (struct election_event)CONNECTING(T0 + 1500));
	ev.timeout_ms = 2000;
	feed(&e, ev);
	ck_assert_str_eq(rendered, "renew:" ME(1, 03) " watch_children");
	ck_assert_int_eq(e.timeout_ms, 2000);
	ck_assert_uint_eq(e.lease_deadline, T0 + 9 + 2000 - 333);
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1,
	    T0 + 1604));
	ck_assert_uint_le(e.lease_deadline, T0 + 9 + 2000 - 333);
	feed(&e, (struct election_event)CONNECTING(T0 + 1610));
	feed(&e, (struct election_event)CONNECTED(T0 + 1620));
	ck_assert_int_eq(e.timeout_ms, 2000);
}
END_TEST

/* The lease's figures for one T and each bound on tickTime (lease.c). */
START_TEST(test_lease_shapes)
{
	static const struct {
		uint64_t timeout, tick;
		bool ok;
		uint64_t X, R, span, renew, kick, start;
	} rows[] = {
		/* tick unknown: T/2 assumed, a deposed leader may serve T/2 */
		{ 6000, 0, true, 3000, 1800, 2000, 1000, 500, 1500 },
		/* tick = T/3: ZooKeeper's 2 s tick under a 6 s session */
		{ 6000, 2000, true, 2000, 1200, 3000, 1200, 900, 1700 },
		/* tick = T/12: the old 2T/3 cap binds */
		{ 6000, 500, true, 500, 300, 4000, 1000, 1000, 1500 },
		{ 6000, 3000, true, 3000, 1800, 2000, 1000, 500, 1500 },
		/* tick above T/2: the servers' limits were changed */
		{ 6000, 3001, false, 3001, 1800, 0, 0, 0, 500 },
	};
	struct lease_shape ls;
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		lease_shape(&ls, rows[i].timeout, rows[i].tick);
		ck_assert_msg(ls.ok == rows[i].ok, "row %zu: ok", i);
		ck_assert_uint_eq(ls.X, rows[i].X);
		ck_assert_uint_eq(ls.M, rows[i].timeout / 6);
		ck_assert_uint_eq(ls.R, rows[i].R);
		ck_assert_uint_eq(ls.span, rows[i].span);
		ck_assert_uint_eq(ls.renew, rows[i].renew);
		ck_assert_uint_eq(ls.kick, rows[i].kick);
		ck_assert_uint_eq(ls.start, rows[i].start);
		/* a slow ZooKeeper: no term starts past kick/2, and once
		 * barred, none until round trips are back under kick/4 */
		ck_assert_uint_eq(ls.slow, rows[i].kick / 2);
		ck_assert_uint_eq(ls.fast, rows[i].kick / 4);
	}
}
END_TEST

/* lease_until: the anchor is answered R before s, and both caps bind. */
START_TEST(test_lease_until_anchor)
{
	struct lease_shape ls;
	uint64_t sent[] = { 1000, 2000, 2500 }, acked[] = { 1010, 2010, 0 };

	lease_shape(&ls, 6000, 2000);	/* R 1200, span 3000, M 1000 */
	/* s = 3100: 2010 + 1200 > 3100, so q = 1000; q + 5000 < s + 3000 */
	ck_assert_uint_eq(lease_until(&ls, sent, acked, 3, 0, 3100), 6000);
	/* s = 3300: q = 2000, s + 3000 binds */
	ck_assert_uint_eq(lease_until(&ls, sent, acked, 3, 0, 3300), 6300);
	/* nothing answered long enough before, no session birth: none */
	ck_assert_uint_eq(lease_until(&ls, sent, acked, 3, 0, 2100), 0);
	/* the session's birth anchors it */
	ck_assert_uint_eq(lease_until(&ls, sent, acked, 3, 900, 2100), 5100);
	/* T below 2 x tick: nothing */
	lease_shape(&ls, 6000, 3500);
	ck_assert_uint_eq(lease_until(&ls, sent, acked, 3, 900, 3300), 0);
	/* a shrink: the revalidation came no sooner than the last answer */
	ck_assert_uint_eq(lease_after_shrink(2000, 3000, 0), 2000 + 3000 - 500);
	ck_assert_uint_eq(lease_after_shrink(0, 3000, 0), 0);
}
END_TEST

/*
 * tick_time says tickTime is 3.5 s while T = 6 s: ZooKeeper would not
 * have negotiated that under its defaults, and no lease can be proven.
 * The candidate stays out of the queue (at its head it would block
 * everyone, claiming but never leading) and says why; a new session with a
 * timeout that allows a lease lets it join.
 */
START_TEST(test_short_timeout_refuses_to_lead)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	struct election_event ev = CONNECTED_AS(SID2, T0 + 5000);
	struct election_event server = { .type = EV_SERVER,
	    .server = SERVER_VOTING, .now = T0 + 5001 };

	new_election(&e, true);
	e.tick_ms = 3500;
	feed(&e, (struct election_event)CONNECTED_NEW(T0));
	ck_assert_str_eq(rendered, "read_claim");
	ck_assert_int_eq(e.phase, PHASE_HOLDING);
	election_report(&e, &r);
	ck_assert_int_eq(r.bar, BAR_SHORT_TIMEOUT);
	feed(&e, (struct election_event)TICK(T0 + 2000));
	ck_assert_ptr_null(strstr(rendered, "create"));
	server.now = T0 + 2001;
	feed(&e, server);
	ck_assert_str_eq(rendered, "");
	feed(&e, (struct election_event)EXPIRED(T0 + 4000));
	ev.timeout_ms = 8000;
	feed(&e, ev);
	ck_assert_ptr_null(strstr(rendered, "create"));
	server.now = T0 + 5001;
	feed(&e, server);
	ck_assert_str_eq(rendered, "create");
	election_report(&e, &r);
	ck_assert_int_eq(r.bar, BAR_NONE);
}
END_TEST

/*
 * Connected to an observer: nothing earned through it, and a leader (or
 * anyone who needs a lease) drops the connection to move on, at most once
 * per T; a follower further back stays.
 */
START_TEST(test_observer_earns_nothing_and_is_left)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event obs = { .type = EV_SERVER,
	    .server = SERVER_OBSERVER, .now = T0 + 30 };
	struct election_report r;
	uint64_t before;

	join_leader(&e);
	feed(&e, obs);
	ck_assert_str_eq(rendered, "kick:observer");
	obs.now = T0 + 40;
	feed(&e, obs);
	ck_assert_str_eq(rendered, "");	/* once per T */
	before = e.lease_deadline;
	feed(&e, (struct election_event)TICK(T0 + 1230));		/* the next renewal */
	ck_assert_str_eq(rendered, "renew:" ME(1, 03));
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1,
	    T0 + 1240));
	ck_assert_uint_eq(e.lease_deadline, before);	/* nothing earned */
	feed(&e, (struct election_event)TICK(T0 + 6030));
	ck_assert_ptr_nonnull(strstr(rendered, "kick:observer"));

	/*
	 * A follower waits out of the queue (it would block everyone behind
	 * it once first), and joins again once a server says it votes.
	 */
	join_follower(&e);
	obs.now = T0 + 300;
	feed(&e, obs);
	ck_assert_str_eq(rendered, "release:" ME(1, 05) " kick:observer");
	election_report(&e, &r);
	ck_assert_int_eq(r.bar, BAR_OBSERVER);
	feed(&e, (struct election_event)RELEASED(ZOK, -1, T0 + 310));
	ck_assert_int_eq(e.phase, PHASE_HOLDING);
	feed(&e, (struct election_event)TICK(T0 + 2000));
	ck_assert_ptr_null(strstr(rendered, "create"));
	feed(&e, (struct election_event)CONNECTING(T0 + 2100));
	feed(&e, (struct election_event)CONNECTED(T0 + 2200));
	ck_assert_ptr_null(strstr(rendered, "create"));
	obs.server = SERVER_VOTING;
	obs.now = T0 + 2210;
	feed(&e, obs);
	ck_assert_str_eq(rendered, "create");
	election_report(&e, &r);
	ck_assert_int_eq(r.bar, BAR_NONE);
}
END_TEST

/*
 * The tick's bound learned from the servers (doc/design.md, "The lease"):
 * without zookeeper.tick_time the agent assumes T/2 (a lease of T/3 after a
 * renewal) until a server's minSessionTimeout says tickTime is at most half
 * of it; from the next renewal on the lease counts with that.
 */
START_TEST(test_tick_bound_learned)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event srv = { .type = EV_SERVER,
	    .server = SERVER_VOTING, .min_timeout_ms = 1000, .now = T0 + 30 };
	struct election_report r;
	uint64_t s;
	int i;

	stated_tick = 0;		/* not stated: T/2 assumed */
	join_leader_at(&e, T0 + 9 + T / 3);
	election_report(&e, &r);
	ck_assert_int_eq(r.tick_from, TICK_ASSUMED);
	ck_assert_uint_eq(r.tick_bound_ms, T / 2);
	for (i = 0; i < 4; i++) {
		s = election_next_tick(&e);
		feed(&e, (struct election_event)TICK(s));
		ck_assert_str_eq(rendered, "renew:" ME(1, 03));
		feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1,
		    s + 7));
	}
	ck_assert_uint_le(e.lease_deadline, s + T / 3);	/* span T/3 */
	srv.now = s + 8;
	feed(&e, srv);
	election_report(&e, &r);
	ck_assert_int_eq(r.tick_from, TICK_LEARNED);
	ck_assert_uint_eq(r.tick_bound_ms, 500);
	ck_assert_int_eq(r.min_timeout_ms, 1000);
	ck_assert(!r.tick_understated);
	for (i = 0; i < 4; i++) {
		s = election_next_tick(&e);
		feed(&e, (struct election_event)TICK(s));
		ck_assert_str_eq(rendered, "renew:" ME(1, 03));
		feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1,
		    s + 7));
	}
	ck_assert_uint_eq(e.lease_deadline, s + LEASE);	/* the 2T/3 cap */
	/* A server with a smaller minSessionTimeout lowers nothing. */
	srv.min_timeout_ms = 400;
	srv.now = s + 10;
	feed(&e, srv);
	election_report(&e, &r);
	ck_assert_uint_eq(r.tick_bound_ms, 500);
}
END_TEST

/*
 * zookeeper.tick_time understated: told 500 ms while a server's
 * minSessionTimeout (4 s) allows a tickTime up to 2 s. The larger bound
 * counts (a lease of T/2 after a renewal, not 2T/3), and the report says
 * the stated value is below it.
 */
START_TEST(test_understated_tick_not_believed)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event srv = { .type = EV_SERVER,
	    .server = SERVER_VOTING, .min_timeout_ms = 4000, .now = T0 + 30 };
	struct election_report r;
	uint64_t s;
	int i;

	join_leader(&e);
	feed(&e, srv);
	election_report(&e, &r);
	ck_assert_int_eq(r.tick_from, TICK_LEARNED);
	ck_assert_uint_eq(r.tick_bound_ms, 2000);
	ck_assert(r.tick_understated);
	for (i = 0; i < 4; i++) {
		s = election_next_tick(&e);
		feed(&e, (struct election_event)TICK(s));
		feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1,
		    s + 7));
	}
	ck_assert_uint_le(e.lease_deadline, s + T / 2);	/* span T/2 */
	/* Stated at least as large as the servers' bound: stated. */
	e.tick_ms = 2500;
	election_report(&e, &r);
	ck_assert_int_eq(r.tick_from, TICK_STATED);
	ck_assert(!r.tick_understated);
}
END_TEST

/*
 * An ensemble with observers behind an address that is none of its
 * servers (probe.c's SERVER_UNIDENTIFIED): no lease, as through an
 * observer; the reason says which.
 */
START_TEST(test_unidentified_server_earns_nothing)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_event srv = { .type = EV_SERVER,
	    .server = SERVER_UNIDENTIFIED, .now = T0 + 300 };
	struct election_report r;

	join_follower(&e);
	feed(&e, srv);
	ck_assert_str_eq(rendered, "release:" ME(1, 05) " kick:unidentified");
	election_report(&e, &r);
	ck_assert_int_eq(r.bar, BAR_UNIDENTIFIED);
	ck_assert_str_eq(election_server_name(r.server), "unidentified");
}
END_TEST

/*
 * ZooKeeper's history went back (restored from an older snapshot): our
 * claim's zxid is below an epoch we already led under. Never publish it;
 * say why, and claim again later.
 */
START_TEST(test_epoch_backwards_refused)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ CHILDREN(T0 + 1210), "read_claim", PH(PHASE_TAKEOVER),
		  KIDS(ME(2, 03), E04) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 2, T0 + 1211),
		  "claim:" ME(2, 03) },
		{ CLAIMED(E1 - 1, T0 + 1220), "", R(ELECTION_FOLLOWER),
		  PH(PHASE_IDLE) },
	};

	join_leader(&e);
	feed(&e, (struct election_event)RESIGN(0, T0 + 1000));
	feed(&e, (struct election_event)NOTIFIED(T0 + 1001));
	feed(&e, (struct election_event)RELEASED(ZOK, -1, T0 + 1002));
	/* The hold is over: rejoin (a tick may read the claim first). */
	while (e.phase == PHASE_HOLDING)
		feed(&e, (struct election_event)TICK(T0 + 1200));
	ck_assert_str_eq(rendered, "create");
	feed(&e, (struct election_event)CREATED(ME(2, 03), SID, T0 + 1205));
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert_int_eq(r.bar, BAR_EPOCH_BACKWARDS);
	ck_assert_uint_ne(e.retry_at, 0);
}
END_TEST

/*
 * A slow ZooKeeper (doc/design.md, "A slow ZooKeeper"): with kick = 1000
 * ms, round trips of 600 ms (two in a row at or over kick/2) bar a term,
 * even with the lease to start one; three renewals in a row under kick/4
 * lift the bar, and the agent leads under the claim it made meanwhile.
 */
START_TEST(test_slow_round_trips_start_no_term)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	char buf[256];
	const struct step s[] = {
		{ CONNECTED_NEW(T0), "read_claim create", PH(PHASE_CREATING) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 3, T0 + 1), "" },
		{ CREATED(ME(1, 03), SID, T0 + 5), "list", PH(PHASE_LISTING) },
		{ CHILDREN(T0 + 8), "watch_self:" ME(1, 03) " read_claim",
		  PH(PHASE_TAKEOVER), KIDS(ME(1, 03), E04) },
		/* the read took 600 ms, the claim 600 more */
		{ CLAIM_DATA("someone", E1 - 3, E1 - 2, T0 + 608),
		  "claim:" ME(1, 03), PH(PHASE_CLAIMING) },
		{ CLAIMED(E1, T0 + 1208), "", R(ELECTION_UNKNOWN),
		  PH(PHASE_CLAIMING) },
	};
	uint64_t t;
	int i;

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_uint_eq(e.shape.kick, 1000);
	ck_assert_uint_ge(e.lease_deadline, T0 + 1208 + e.shape.start);
	election_report(&e, &r);
	ck_assert_int_eq(r.bar, BAR_SLOW_ZOOKEEPER);
	ck_assert_uint_eq(r.slow_rtt_ms, 600);
	ck_assert_str_eq(election_bar_text(&r, buf, sizeof(buf)),
	    "round trips to ZooKeeper (600 ms of a 6000 ms session timeout) "
	    "leave too little lease to start a term");
	/* Quick round trips: not under kick/4 (250 ms) yet, then three. */
	t = T0 + 1300;
	for (i = 0; i < 4; i++) {
		while (e.next_renew > t || e.renew_inflight)
			t += 50;
		feed(&e, (struct election_event)TICK(t));
		ck_assert_str_eq(rendered, "renew:" ME(1, 03));
		t += i == 0 ? 300 : 20;
		feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1, t));
		if (i < 3) {
			ck_assert_int_eq(e.role, ELECTION_UNKNOWN);
			ck_assert_int_eq(e.last.bar, BAR_SLOW_ZOOKEEPER);
		}
	}
	ck_assert_str_eq(rendered, "notify:unknown>leader watch_children");
	ck_assert_uint_eq(e.epoch, (uint64_t)E1);
	ck_assert_int_eq(e.last.bar, BAR_NONE);
}
END_TEST

/*
 * NOAUTH on the election path (rule 14): a leader whose renewal is refused
 * stops at once and says why until a request succeeds again.
 */
START_TEST(test_noauth_ends_the_term)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_leader(&e);
	feed(&e, (struct election_event)TICK(LEAD_AT + 1200));
	ck_assert_str_eq(rendered, "renew:" ME(1, 03));
	feed(&e, (struct election_event)RENEW_FAILED(ZNOAUTH, 2,
	    LEAD_AT + 1210));
	ck_assert_str_eq(rendered, "notify:leader>unknown/wait");
	ck_assert_int_eq(e.last.bar, BAR_NO_ACCESS);
	ck_assert_uint_ne(e.retry_at, 0);
	feed(&e, (struct election_event)NOTIFIED(LEAD_AT + 1220));
	feed(&e, (struct election_event)TICK(e.retry_at));
	ck_assert_str_eq(rendered, "list");
	feed(&e, (struct election_event)LIST_FAILED(ZNOAUTH, e.now + 5));
	ck_assert_int_eq(e.last.bar, BAR_NO_ACCESS);
	feed(&e, (struct election_event)TICK(e.retry_at));
	ck_assert_str_eq(rendered, "list");
	{
		static char k1[] = ME(1, 03), k2[] = "junk";
		char *kids[] = { k1, k2 };
		struct election_event ev = CHILDREN(e.now + 5);

		ev.names = kids;
		ev.count = 2;
		feed(&e, ev);
	}
	ck_assert_int_eq(e.last.bar, BAR_NONE);
	ck_assert_int_eq(e.strangers, 1);
	ck_assert_str_eq(e.stranger, "junk");
	ck_assert_int_eq(e.candidates, 1);
	ck_assert_int_eq(e.phase, PHASE_TAKEOVER);
}
END_TEST

/* The chroot is missing: the path's creation finds no parent (rule 14). */
START_TEST(test_missing_chroot_is_a_reason)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	new_election(&e, true);
	feed(&e, (struct election_event)CONNECTED_NEW(T0));
	feed(&e, (struct election_event)CREATE_FAILED(ZNONODE, T0 + 5));
	ck_assert_str_eq(rendered, "create_parent");
	feed(&e, (struct election_event)PARENT_CREATED(ZNONODE, T0 + 8));
	ck_assert_int_eq(e.last.bar, BAR_NO_CHROOT);
	ck_assert_int_eq(e.role, ELECTION_UNKNOWN);
	ck_assert_uint_ne(e.retry_at, 0);
	feed(&e, (struct election_event)TICK(e.retry_at));
	ck_assert_str_eq(rendered, "list");
	feed(&e, (struct election_event)LIST_FAILED(ZNONODE, e.now + 5));
	ck_assert_str_eq(rendered, "create_parent");
	ck_assert_int_eq(e.last.bar, BAR_NO_CHROOT);
	feed(&e, (struct election_event)PARENT_CREATED(ZOK, e.now + 5));
	ck_assert_int_eq(e.last.bar, BAR_NONE);
	ck_assert_str_eq(rendered, "read_claim create");
}
END_TEST

/*
 * After a new session a candidate reads the election node once (the read
 * at the connect), not again when it lists: it owes no watch on it.
 */
START_TEST(test_new_session_reads_claim_once)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ EXPIRED(T0 + 100), "notify:follower>unknown new_session" },
		{ CONNECTED_AS(SID2, T0 + 200), "read_claim create" },
		{ CREATED(ME(2, 05), SID2, T0 + 205), "list" },
		{ CHILDREN(T0 + 208), "watch_self:" ME(2, 05)
		  " notify:unknown>follower watch_pred:" E04,
		  R(ELECTION_FOLLOWER), KIDS(D07, ME(2, 05), E04, F03) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/*
 * Letting go of a node whose create went unanswered: the listing that looks
 * for it by uuid finds the election path gone, so there is nothing to
 * find; it must not list again and again (the simulator's relay shape
 * found the loop).
 */
START_TEST(test_let_go_with_path_gone_does_not_loop)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED_NEW(T0), "read_claim create" },
		{ CREATE_FAILED(ZCONNECTIONLOSS, T0 + 5), "" },
		{ RESIGN(5000, T0 + 6), "notify:unknown>follower list",
		  PH(PHASE_DELETING) },
	};

	new_election(&e, true);
	RUN(&e, s);
	feed(&e, (struct election_event)LIST_FAILED(ZNONODE, T0 + 9));
	ck_assert_str_eq(rendered, "");
	ck_assert_int_eq(e.phase, PHASE_HOLDING);
}
END_TEST

/*
 * Two reads of the election node in flight: the first answer is the first
 * read's (replies come in order), and earns the lease's anchor for that
 * read's send time, not the later one's.
 */
START_TEST(test_claim_read_credits_the_read_answered)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_follower(&e);
	ck_assert_int_ge(e.claim_reads, 0);
	e.claim_reads = 2;
	e.claim_read_sent[0] = T0 + 100;
	e.claim_read_sent[1] = T0 + 200;
	e.nsent = 2;
	e.sent[0] = T0 + 100;
	e.sent[1] = T0 + 200;
	e.acked[0] = e.acked[1] = 0;
	feed(&e, (struct election_event)CLAIM_DATA("someone", E1, E1, T0 + 210));
	ck_assert_uint_eq(e.acked[0], T0 + 210);
	ck_assert_uint_eq(e.acked[1], 0);
	ck_assert_int_eq(e.claim_reads, 1);
	ck_assert_uint_eq(e.claim_read_sent[0], T0 + 200);
}
END_TEST

START_TEST(test_rule10_stop_follower)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ STOP(T0 + 100), "notify:follower>unknown release:" ME(1, 05),
		  R(ELECTION_UNKNOWN), PH(PHASE_DELETING) },
		{ RELEASED(ZNONODE, 0, T0 + 105), "exit", PH(PHASE_STOPPED) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

START_TEST(test_rule10_resign_hold_rejoin)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ RESIGN(10000, T0 + 1500), "notify:leader>follower/wait",
		  R(ELECTION_FOLLOWER), PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 1510), "release:" ME(1, 03), PH(PHASE_DELETING) },
		{ RELEASED(ZOK, -1, T0 + 1515), "", PH(PHASE_HOLDING) },
	};
	const struct step s2[] = {
		/* While holding, the view stays: the new leader is reported. */
		{ CLAIM_DATA("e", E2, E2, T0 + 1517), "" },
		{ TICK(T0 + 1500 + 10000 - 1), NULL, PH(PHASE_HOLDING) },
		{ TICK(T0 + 1500 + 10000), "create", PH(PHASE_CREATING) },
	};

	join_leader(&e);
	RUN(&e, s);
	ck_assert_uint_ne(e.poll_at, 0);
	RUN(&e, s2);
	ck_assert_str_eq(e.uuid, U(2));
	election_report(&e, &r);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, "e");
}
END_TEST

START_TEST(test_rule10_report_while_holding)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;

	join_follower(&e);
	feed(&e, (struct election_event)CLAIM_DATA("f", E1, E1, T0 + 20));
	feed(&e, (struct election_event)RESIGN(30000, T0 + 100));
	feed(&e, (struct election_event)RELEASED(ZOK, -1, T0 + 105));
	election_report(&e, &r);
	ck_assert(r.holding);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, "f");
	ck_assert_uint_eq(election_hold_remaining(&e, T0 + 1100), 29000);
	ck_assert_uint_eq(election_hold_remaining(&e, T0 + 30100), 0);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Rule 12, observers, the view                                         */

START_TEST(test_rule12_auth_failed)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ AUTH_FAILED(T0 + 1500), "notify:leader>unknown/wait", R(ELECTION_UNKNOWN),
		  PH(PHASE_IDLE) },
		{ TICK(T0 + 1500 + 5000), "new_session" },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

START_TEST(test_observer)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	const struct step s[] = {
		{ CONNECTED(T0), "watch_claim list", PH(PHASE_OBSERVING) },
		{ CHILDREN(T0 + 5), "notify:unknown>observer", R(ELECTION_OBSERVER),
		  KIDS(F03, E04) },
		{ CLAIM_DATA("f\nhttp://f:80", E1, E1 - 1, T0 + 6), "list" },
		{ CHILDREN(T0 + 7), "", KIDS(F03, E04, D07) },
		/* Nobody named: the last one out cleared the claim. */
		{ CLAIM_CHANGED(T0 + 100), "watch_claim" },
		{ CLAIM_DATA("", E2, E2, T0 + 101), "list" },
	};

	new_election(&e, false);
	RUN(&e, s);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
	ck_assert_int_eq(r.candidates, 3);
	ck_assert_int_eq(r.position, -1);
	ck_assert_int_eq(election_role_at(&e, T0 + 200), ELECTION_OBSERVER);
}
END_TEST

START_TEST(test_view_reports_the_claim)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	uint64_t i;
	const struct step s[] = {
		{ CLAIM_DATA("f\nhttp://f:80", E1, E1 - 1, T0 + 20),
		  "check_ahead:" F03 },
		/* An older read (answered late) does not undo a newer one. */
		{ CLAIM_DATA("old", E1 - 2, E1 - 2, T0 + 21), "" },
	};

	join_follower(&e);
	i = e.index;
	RUN(&e, s);
	ck_assert_uint_eq(e.index, i + 1);
	election_report(&e, &r);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, "f");
	ck_assert(r.has_value);
	ck_assert_str_eq(r.leader_value, "http://f:80");
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E1);
	/* Not while disconnected. */
	feed(&e, (struct election_event)CONNECTING(T0 + 30));
	election_report(&e, &r);
	ck_assert(!r.has_leader);
}
END_TEST

/*
 * A claim naming our own data under an epoch we never led under is another
 * agent's with our id (or an earlier run of ours, whose session still
 * stands): it names the leader, and the id is flagged as used twice
 * (issue 25, bug 1). A claim of a term we led is ours and is not reported.
 */
START_TEST(test_view_own_claim_not_reported)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;

	join_follower(&e);
	feed(&e, (struct election_event)CLAIM_DATA(MY_ID, E1, E1, T0 + 20));
	election_report(&e, &r);
	ck_assert(r.has_leader);
	ck_assert_str_eq(r.leader_id, MY_ID);
	ck_assert_uint_eq(r.leader_epoch, (uint64_t)E1);
	ck_assert(r.duplicate_id);
	e.spent_epoch = (uint64_t)E1;	/* as if we had led under E1 */
	election_report(&e, &r);
	ck_assert(!r.has_leader);
	ck_assert(!r.duplicate_id);
	e.spent_epoch = 0;
	e.taken_epoch = (uint64_t)E1;	/* named under E1, lost before leading */
	election_report(&e, &r);
	ck_assert(!r.has_leader);
	ck_assert(!r.duplicate_id);
}
END_TEST

/* Regression (issue 15 item 12): bytes that are not an id never reach the
 * report as one. */
START_TEST(test_view_bad_claim_data)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	struct election_report r;
	struct election_event ev = CLAIM_DATA("x", E1, E1, T0 + 20);

	join_follower(&e);
	ev.data = "nul\0inside";
	ev.datalen = 10;
	feed(&e, ev);
	election_report(&e, &r);
	ck_assert(!r.has_leader);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Our own node                                                         */

START_TEST(test_self_deleted_leader_stops_at_once)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ SELF_CHANGED(ME(1, 03), true, T0 + 1500),
		  "notify:leader>unknown/wait create", R(ELECTION_UNKNOWN),
		  PH(PHASE_CREATING) },
	};

	join_leader(&e);
	RUN(&e, s);
	/* A successor may lead already: nothing may be left running. */
	ck_assert(!find_notify(&out)->node_stands);
}
END_TEST

START_TEST(test_self_deleted_follower_rejoins)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ SELF_SET(ME(1, 05), ZNONODE, T0 + 10), "notify:follower>unknown create",
		  R(ELECTION_UNKNOWN), PH(PHASE_CREATING) },
	};

	join_follower(&e);
	RUN(&e, s);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Regressions                                                          */

/*
 * Issue 14 item 1: a node name we cannot sort by (a path cut short) must
 * not be claimed with, and nodes that keep vanishing are re-created with a
 * growing backoff, not in a tight loop.
 */
START_TEST(test_bug_create_loop_backs_off)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t t = T0 + 5;
	int i;

	new_election(&e, true);
	feed(&e, (struct election_event)CONNECTED(T0));
	feed(&e, (struct election_event)CREATED("_c_" U(1) "-lat", SID, t));
	ck_assert_str_eq(rendered, "");
	ck_assert_int_eq(e.phase, PHASE_IDLE);
	ck_assert_uint_eq(election_next_tick(&e), t + 100);
	/* Created, but gone from every listing: each re-create waits longer. */
	new_election(&e, true);
	feed(&e, (struct election_event)CONNECTED(T0));
	for (i = 0; i < 6; i++) {
		struct election_event c = CREATED("", SID, t);
		struct election_event l = CHILDREN(t + 1);
		static char f03[] = F03;
		char *kids[1] = { f03 };
		char name[ELECTION_NAME_MAX];

		snprintf(name, sizeof(name), "_c_%s-latch-000000001%d", e.uuid, i);
		c.name = name;
		feed(&e, c);
		ck_assert_str_eq(rendered, "list");
		l.names = kids;
		l.count = 1;
		feed(&e, l);
		if (i == 0) {
			/* The first re-create is immediate. */
			ck_assert_str_eq(rendered, "create");
		} else {
			ck_assert_str_eq(rendered, "");
			ck_assert_uint_eq(election_next_tick(&e),
			    t + 1 + (100u << i));
			t = election_next_tick(&e);
			feed(&e, (struct election_event)TICK(t));
			ck_assert_str_eq(rendered, "create");
		}
		t += 1;
	}
}
END_TEST

/*
 * Issue 14 item 2: a resign while our own create is unresolved must find
 * the node by uuid and delete it, not sit in the queue for the whole hold
 * and lead afterwards.
 */
START_TEST(test_bug_resign_with_create_unresolved)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED(T0), "read_claim create" },
		{ CREATE_FAILED(ZCONNECTIONLOSS, T0 + 5), "" },
		{ CONNECTING(T0 + 6), "" },
		{ RESIGN(20000, T0 + 10), "", PH(PHASE_DELETING) },
		/* Back on the same session: search for the node by uuid. */
		{ CONNECTED(T0 + 100), "read_claim list", PH(PHASE_DELETING) },
		{ CHILDREN(T0 + 110), "get_owner:" ME(1, 04), KIDS(F03, ME(1, 04)) },
		{ OWNER(ME(1, 04), ZOK, SID, T0 + 111), "release:" ME(1, 04),
		  PH(PHASE_DELETING) },
		{ RELEASED(ZOK, -1, T0 + 115), "", PH(PHASE_HOLDING) },
		{ TICK(T0 + 10 + 20000), "create", PH(PHASE_CREATING) },
	};

	new_election(&e, true);
	RUN(&e, s);
	ck_assert_str_eq(e.uuid, U(2));		/* a new place at the back */
}
END_TEST

/* The same while connected: the search is a synced listing. */
START_TEST(test_bug_resign_with_create_unresolved_connected)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	new_election(&e, true);
	feed(&e, (struct election_event)CONNECTED(T0));
	feed(&e, (struct election_event)CREATE_FAILED(ZOPERATIONTIMEOUT, T0 + 5));
	feed(&e, (struct election_event)RESIGN(1000, T0 + 10));
	ck_assert_str_eq(rendered, "notify:unknown>follower list");
	ck_assert(out.a[1].sync);
	feed(&e, (struct election_event)CHILDREN(T0 + 11));	/* not there */
	ck_assert_int_eq(e.phase, PHASE_HOLDING);
	ck_assert_str_eq(e.uuid, "");
}
END_TEST

/*
 * Issue 14 item 3: stop, then a reconnect before the app has been told:
 * the node must wait for EV_NOTIFIED, whatever the connection does.
 */
START_TEST(test_bug_stop_reconnect_before_told)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ STOP(T0 + 1500), "notify:leader>unknown/wait", PH(PHASE_RELEASING) },
		{ CONNECTING(T0 + 1510), "", PH(PHASE_RELEASING) },
		{ CONNECTED(T0 + 1600), "", PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 3500), "release:" ME(1, 03), PH(PHASE_DELETING) },
		{ RELEASED(ZOK, -1, T0 + 3505), "exit", PH(PHASE_STOPPED) },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

/* Stopped while disconnected and told: exit, the node goes with the session. */
START_TEST(test_bug_stop_told_while_disconnected)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTING(T0 + 1500), "" },
		{ STOP(T0 + 1510), "notify:leader>unknown/wait", PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 1600), "exit", PH(PHASE_STOPPED) },
	};

	join_leader(&e);
	RUN(&e, s);
}
END_TEST

/* Issue 15 item 13: a huge hold does not wrap to zero; it is capped. */
START_TEST(test_bug_huge_hold)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_follower(&e);
	feed(&e, (struct election_event)RESIGN(UINT64_C(18446744073709551000), T0 + 100));
	ck_assert_uint_eq(e.hold_until, T0 + 100 + UINT64_C(24) * 3600 * 1000);
	feed(&e, (struct election_event)RELEASED(ZOK, -1, T0 + 105));
	feed(&e, (struct election_event)TICK(T0 + 200));
	ck_assert_int_eq(e.phase, PHASE_HOLDING);
}
END_TEST

/* A release cut off by a connection loss is done again on reconnecting. */
START_TEST(test_bug_release_interrupted)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ RELEASED(ZCONNECTIONLOSS, -1, T0 + 105), "", PH(PHASE_DELETING) },
		{ CONNECTING(T0 + 106), "notify:follower>unknown", PH(PHASE_DELETING) },
		{ CONNECTED(T0 + 200), "read_claim release:" ME(1, 05),
		  PH(PHASE_DELETING) },
		{ RELEASED(ZOK, -1, T0 + 205), "", PH(PHASE_HOLDING) },
		{ TICK(T0 + 205), "create" },
	};

	join_follower(&e);
	/* A resign as follower keeps reporting follower; no notify. */
	feed(&e, (struct election_event)RESIGN(0, T0 + 100));
	ck_assert_str_eq(rendered, "release:" ME(1, 05));
	RUN(&e, s);
}
END_TEST

/*
 * Found by the simulator (tests/sim), each a seed of its fault mix:
 * a leader paused across its deadline must not have the lease revived by a
 * renewal answer applied before the tick (seed 2620).
 */
START_TEST(test_sim_late_answer_does_not_revive_a_lapsed_lease)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_leader(&e);
	feed(&e, (struct election_event)TICK(T0 + 1500));
	ck_assert_str_eq(rendered, "renew:" ME(1, 03));
	/* Paused; wakes after the deadline with the answer queued. */
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1, DEADLINE1 + 50));
	ck_assert_int_eq(e.role, ELECTION_UNKNOWN);
	ck_assert(has_notify_to(&out, ELECTION_UNKNOWN));
	ck_assert_int_eq(election_role_at(&e, DEADLINE1 + 60), ELECTION_UNKNOWN);
}
END_TEST

/* A term starts only with a renewal interval and T/6 of lease left, or it
 * would flap (seed 114). */
START_TEST(test_sim_term_needs_lease_to_last)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_next(&e);
	/* Named when only 1.5 s of lease are left (T0 + 5008): not enough. */
	feed(&e, (struct election_event)PRED_GONE(F03, T0 + 3508));
	feed(&e, (struct election_event)CLAIM_DATA(MY_ID, E2, E2, T0 + 3510));
	ck_assert_int_eq(e.role, ELECTION_FOLLOWER);
	ck_assert_uint_eq(e.term_epoch, (uint64_t)E2);
	/* The renewal that is due (T0 + 2408) extends it: now it may start. */
	feed(&e, (struct election_event)TICK(T0 + 3510));
	ck_assert_str_eq(rendered, "renew:" ME(1, 05));
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E2, E2, T0 + 3512));
	ck_assert_int_eq(e.role, ELECTION_LEADER);
	ck_assert_uint_eq(e.epoch, (uint64_t)E2);
}
END_TEST

/* A request answered only just before the renewal is no anchor: TCP may
 * have held it through a short cut (seed 439). */
START_TEST(test_sim_anchor_is_answered_not_sent)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t s1 = T0 + 1500, s2 = T0 + 2900;

	join_leader(&e);
	feed(&e, (struct election_event)TICK(s1));
	/* Sent 1400 ms before s2, but answered only 100 ms before it: a round
	 * trip longer than the renewal period, so the next one goes at once. */
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1, s2 - 100));
	ck_assert_uint_eq(e.next_renew, s2 - 100);
	e.next_renew = s2;	/* as if it were due: what would it earn? */
	feed(&e, (struct election_event)TICK(s2));
	ck_assert_str_eq(rendered, "renew:" ME(1, 03));
	feed(&e, (struct election_event)RENEWED(SID, MY_ID, E1, E1 - 1, s2 + 5));
	/* q is the claim (answered T0 + 20), not s1. */
	ck_assert_uint_eq(e.lease_deadline, T0 + 9 + 5000);
}
END_TEST

/* No tick is asked for a renewal that cannot be sent (seed 5: the loop
 * spun while listing after a reconnect). */
START_TEST(test_sim_no_tick_for_a_renewal_not_sent)
{
	static struct election e;	/* outlives the test: the fixture frees it */

	join_next(&e);
	feed(&e, (struct election_event)CONNECTING(T0 + 3000));
	feed(&e, (struct election_event)CONNECTED(T0 + 3100));
	ck_assert_int_eq(e.phase, PHASE_LISTING);
	ck_assert_uint_lt(e.next_renew, T0 + 3100);	/* overdue, but */
	ck_assert(election_next_tick(&e) == 0 || election_next_tick(&e) > T0 + 3100);
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
}
END_TEST


/* ------------------------------------------------------------------ */
/* Partitions (doc/design.md, "Partitions")                             */

#define ASSIGN(a, t)		{ .type = EV_ASSIGN, .assigned = (a), .now = (t) }
#define SRENEWED(own, s, t) \
	{ .type = EV_SESSION_RENEWED, .rc = ZOK, .owner = (own), .sent = (s), \
	  .now = (t) }

/* A partition's election leading on a new session: as join_leader, but its
 * claim is watched once it leads (the session's renewal relies on it). */
static void
join_part_leader(struct election *e)
{
	const struct step s[] = {
		{ CONNECTED_NEW(T0), "read_claim create", PH(PHASE_CREATING) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 3, T0 + 1), "" },
		{ CREATED(ME(1, 03), SID, T0 + 5), "list" },
		{ CHILDREN(T0 + 8), "watch_self:" ME(1, 03) " read_claim",
		  PH(PHASE_TAKEOVER), KIDS(ME(1, 03), E04) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 2, T0 + 9), "claim:" ME(1, 03) },
		{ CLAIMED(E1, LEAD_AT),
		  "notify:unknown>leader watch_children watch_claim",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
		{ CLAIM_DATA(MY_ID, E1, E1, LEAD_AT + 2), "", R(ELECTION_LEADER) },
	};

	new_election(e, true);
	e->session_renewal = true;
	RUN(e, s);
	ck_assert_uint_eq(e->lease_deadline, DEADLINE1);
}

/* Not assigned: out of the queue, the claim watched (not polled); assigned,
 * it joins at once. */
START_TEST(test_part_parked_joins_only_when_assigned)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED_NEW(T0), "watch_claim", PH(PHASE_HOLDING) },
		{ CLAIM_DATA("other", E1, E1, T0 + 2), "" },
		{ TICK(T0 + 5000), "", PH(PHASE_HOLDING) },
		{ CLAIM_CHANGED(T0 + 6000), "watch_claim" },
		{ CLAIM_DATA("other2", E2, E2, T0 + 6002), "" },
		{ ASSIGN(true, T0 + 7000), "create", PH(PHASE_CREATING) },
	};

	new_election(&e, true);
	e.session_renewal = true;
	e.parked = true;
	RUN(&e, s);
	ck_assert_uint_eq(election_next_tick(&e), 0);
}
END_TEST

/* An owner no longer assigned leads on until a successor queues, then
 * tells the app and names it in the release; it does not join again. */
START_TEST(test_part_unassigned_leader_hands_over)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct election_action *a;
	const struct step s[] = {
		{ ASSIGN(false, T0 + 100), "", R(ELECTION_LEADER),
		  PH(PHASE_LEADING) },
		{ CHILDREN_CHANGED(T0 + 200), "watch_children" },
		{ CHILDREN(T0 + 205), "read_successor:" E04, R(ELECTION_LEADER),
		  KIDS(ME(1, 03), E04) },
		{ SUCC_DATA(E04, "e", T0 + 206), "notify:leader>follower/wait",
		  R(ELECTION_FOLLOWER), PH(PHASE_RELEASING) },
		{ NOTIFIED(T0 + 210), "release:" ME(1, 03), PH(PHASE_DELETING) },
	};

	join_part_leader(&e);
	RUN(&e, s);
	a = &out.a[0];
	ck_assert_str_eq(a->successor, E04);
	ck_assert(a->write_claim);
	feed(&e, (struct election_event)RELEASED(ZOK, -1, T0 + 215));
	ck_assert_int_eq(e.phase, PHASE_HOLDING);
	feed(&e, (struct election_event)TICK(T0 + 20000));
	ck_assert_int_eq(e.phase, PHASE_HOLDING);	/* parked: stays out */
}
END_TEST

/* A session renewal's answer that comes after the lease ran out ends the
 * term (the lapse first), and the status report says so at once: the step
 * that skips the report is only for a term that goes on. */
START_TEST(test_part_late_renewal_updates_the_report)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t idx;

	join_part_leader(&e);
	idx = e.index;
	ck_assert_int_eq(e.last.role, ELECTION_LEADER);
	feed(&e, (struct election_event)SRENEWED(SID, LEAD_AT + 10,
	    DEADLINE1 + 1));
	ck_assert_int_ne(e.role, ELECTION_LEADER);
	ck_assert_int_ne(e.last.role, ELECTION_LEADER);
	ck_assert_uint_gt(e.index, idx);
}
END_TEST

/* A follower in the queue that is no longer assigned leaves it. */
START_TEST(test_part_unassigned_follower_leaves)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ ASSIGN(false, T0 + 100), "release:" ME(1, 05),
		  R(ELECTION_FOLLOWER), PH(PHASE_DELETING) },
		/* Out of the queue: the claim watched, to report who leads. */
		{ RELEASED(ZOK, -1, T0 + 105), "watch_claim", PH(PHASE_HOLDING) },
	};

	join_follower(&e);
	e.session_renewal = true;
	RUN(&e, s);
}
END_TEST

/*
 * A partition's leader rides a disconnect through: the queue is listed and
 * watched again on reconnecting while a listing's answer is owed. The
 * listing a fired queue watch sent may have been lost with the connection
 * (here: the one sent on leading); without a new one, a
 * successor that queued meanwhile stays unknown and a parked leader never
 * hands over (the start-up stall of doc/design.md, "Partitions").
 */
START_TEST(test_part_ride_through_lists_the_queue_again)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const uint64_t lost = LEAD_AT + 200, back = lost + 300;
	const struct step s[] = {
		{ CONNECTING(lost), "", R(ELECTION_LEADER) },
		{ CONNECTED(back), "renew:" ME(1, 03) " watch_children",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
		{ RENEWED(SID, MY_ID, E1, E1 - 1, back + 4), "",
		  R(ELECTION_LEADER), PH(PHASE_LEADING) },
		{ ASSIGN(false, back + 10), "", R(ELECTION_LEADER) },
		{ CHILDREN(back + 12), "read_successor:" E04, KIDS(ME(1, 03), E04) },
		{ SUCC_DATA(E04, "e", back + 14), "notify:leader>follower/wait",
		  R(ELECTION_FOLLOWER), PH(PHASE_RELEASING) },
	};

	join_part_leader(&e);
	RUN(&e, s);
}
END_TEST

/*
 * Not assigned while its claim is in flight, then the connection drops and
 * comes back with the same session: the node, which lives on, is let go at
 * once (else the next contender waits behind it for as long as the session
 * lives: the other start-up stall). Before, it only went out of the queue
 * in its own view.
 */
START_TEST(test_part_unassigned_while_claiming_lets_go_on_reconnect)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	const struct step s[] = {
		{ CONNECTED_NEW(T0), "read_claim create", PH(PHASE_CREATING) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 3, T0 + 1), "" },
		{ CREATED(ME(1, 03), SID, T0 + 5), "list" },
		{ CHILDREN(T0 + 8), "watch_self:" ME(1, 03) " read_claim",
		  PH(PHASE_TAKEOVER), KIDS(ME(1, 03), E04) },
		{ CLAIM_DATA("someone", E1 - 3, E1 - 2, T0 + 9), "claim:" ME(1, 03),
		  PH(PHASE_CLAIMING) },
		{ ASSIGN(false, T0 + 20), "", PH(PHASE_CLAIMING) },
		{ CONNECTING(T0 + 30), "" },
		{ CONNECTED(T0 + 90),
		  "watch_claim notify:unknown>follower release:" ME(1, 03),
		  R(ELECTION_FOLLOWER), PH(PHASE_DELETING) },
		{ RELEASED(ZOK, -1, T0 + 95), "", PH(PHASE_HOLDING) },
	};

	new_election(&e, true);
	e.session_renewal = true;
	RUN(&e, s);
	ck_assert_str_eq(e.node, "");
}
END_TEST

/*
 * The session's renewal extends a leading partition's lease as its own
 * renewal would, and the partition sends none of its own; not when the
 * answer says the node is not ours, nor when the claim's watch fired after
 * the renewal was sent (it is set again only by a later read).
 */
START_TEST(test_part_session_renewal)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t s1 = T0 + 1000, s2 = T0 + 2200, s3 = T0 + 3400, d;

	join_part_leader(&e);
	/* No renewal of its own is ever due. */
	ck_assert_uint_eq(election_next_tick(&e), DEADLINE1);
	feed(&e, (struct election_event)TICK(T0 + 1500));
	ck_assert_str_eq(rendered, "");

	election_session_sent(&e, s1);
	feed(&e, (struct election_event)SRENEWED(SID, s1, s1 + 5));
	ck_assert_str_eq(rendered, "");
	ck_assert_uint_gt(e.lease_deadline, DEADLINE1);
	ck_assert_uint_le(e.lease_deadline, s1 + LEASE);
	d = e.lease_deadline;

	/* Somebody else's session, or an error: nothing earned. */
	election_session_sent(&e, s2);
	feed(&e, (struct election_event)SRENEWED(OTHER_SID, s2, s2 + 5));
	ck_assert_uint_eq(e.lease_deadline, d);

	/* The claim's watch fired after s3 was sent: s3 proves nothing of the
	 * claim, so it earns nothing; the read it triggers is answered first
	 * and finds the claim still ours. */
	election_session_sent(&e, s3);
	feed(&e, (struct election_event)CLAIM_CHANGED(s3 + 1));
	ck_assert_str_eq(rendered, "watch_claim");
	feed(&e, (struct election_event)CLAIM_DATA(MY_ID, E1, E1, s3 + 3));
	feed(&e, (struct election_event)SRENEWED(SID, s3, s3 + 5));
	ck_assert_uint_eq(e.lease_deadline, d);
	ck_assert_int_eq(e.role, ELECTION_LEADER);

	/* Not a partition: the event changes nothing. */
	e.session_renewal = false;
	election_session_sent(&e, s3 + 1200);
	feed(&e, (struct election_event)SRENEWED(SID, s3 + 1200, s3 + 1205));
	ck_assert_uint_eq(e.lease_deadline, d);
}
END_TEST

/*
 * Issue 30: a read that would set the claim's watch (or our node's) and
 * fails with the connection leaves no watch behind (the client registers
 * a watch only with a successful reply), so the session's renewal must
 * extend nothing until a watch is set again: on reconnecting, a leader
 * sets both again. (Before, the failed read left the watch counted as
 * set, and renewals went on extending the lease.)
 */
START_TEST(test_part_lost_claim_watch_earns_nothing)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t t1 = T0 + 1000, s = T0 + 1100, d;

	join_part_leader(&e);
	d = e.lease_deadline;
	feed(&e, (struct election_event)CLAIM_CHANGED(t1));
	ck_assert_str_eq(rendered, "watch_claim");
	feed(&e, (struct election_event)CLAIM_READ_FAILED(ZCONNECTIONLOSS, t1 + 5));
	election_session_sent(&e, s);
	feed(&e, (struct election_event)SRENEWED(SID, s, s + 5));
	ck_assert_uint_eq(e.lease_deadline, d);
	feed(&e, (struct election_event)CONNECTING(s + 10));
	feed(&e, (struct election_event)CONNECTED(s + 60));
	ck_assert_ptr_nonnull(strstr(rendered, "watch_claim"));
}
END_TEST

START_TEST(test_part_lost_self_watch_earns_nothing)
{
	static struct election e;	/* outlives the test: the fixture frees it */
	uint64_t t1 = T0 + 1000, s = T0 + 1100, d;

	join_part_leader(&e);
	d = e.lease_deadline;
	feed(&e, (struct election_event)SELF_CHANGED(ME(1, 03), false, t1));
	ck_assert_str_eq(rendered, "watch_self:" ME(1, 03));
	feed(&e, (struct election_event)SELF_SET(ME(1, 03), ZCONNECTIONLOSS,
	    t1 + 5));
	election_session_sent(&e, s);
	feed(&e, (struct election_event)SRENEWED(SID, s, s + 5));
	ck_assert_uint_eq(e.lease_deadline, d);
	feed(&e, (struct election_event)CONNECTING(s + 10));
	feed(&e, (struct election_event)CONNECTED(s + 60));
	ck_assert_ptr_nonnull(strstr(rendered, "watch_self:" ME(1, 03)));
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
	tcase_add_test(tc, test_join_with_value);
	tcase_add_test(tc, test_follower_predecessor);
	tcase_add_test(tc, test_follower_position);
	tcase_add_test(tc, test_next_in_line_renews);
	tcase_add_test(tc, test_follower_checks_ahead_on_a_new_claim);
	tcase_add_test(tc, test_follower_polls_the_claim);
	suite_add_tcase(s, tc);

	tc = tcase_create("partitions");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_part_parked_joins_only_when_assigned);
	tcase_add_test(tc, test_part_ride_through_lists_the_queue_again);
	tcase_add_test(tc, test_part_unassigned_while_claiming_lets_go_on_reconnect);
	tcase_add_test(tc, test_part_unassigned_leader_hands_over);
	tcase_add_test(tc, test_part_unassigned_follower_leaves);
	tcase_add_test(tc, test_part_late_renewal_updates_the_report);
	tcase_add_test(tc, test_part_session_renewal);
	tcase_add_test(tc, test_part_lost_claim_watch_earns_nothing);
	tcase_add_test(tc, test_part_lost_self_watch_earns_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("lease");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_lease_with_steady_renewals);
	tcase_add_test(tc, test_lease_shrinks_after_a_gap);
	tcase_add_test(tc, test_lease_from_a_new_session);
	tcase_add_test(tc, test_lease_naive);
	tcase_add_test(tc, test_rule2_pause_past_deadline);
	tcase_add_test(tc, test_rule2_stalled_renewal_kicked);
	tcase_add_test(tc, test_rule2_renewal_owner_mismatch);
	tcase_add_test(tc, test_rule2_renewal_nonode);
	tcase_add_test(tc, test_rule2_renewal_error);
	tcase_add_test(tc, test_rule2_renewal_sees_claim_overwritten);
	suite_add_tcase(s, tc);

	tc = tcase_create("takeover");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_takeover_named);
	tcase_add_test(tc, test_takeover_named_waits_for_a_lease);
	tcase_add_test(tc, test_takeover_not_named_claims);
	tcase_add_test(tc, test_takeover_spent_epoch_not_reused);
	tcase_add_test(tc, test_takeover_old_read_ignored);
	tcase_add_test(tc, test_takeover_decided_by_renewal);
	tcase_add_test(tc, test_claim_absent_is_what_the_last_read_found);
	suite_add_tcase(s, tc);

	tc = tcase_create("disconnect");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_rule1_ride_through);
	tcase_add_test(tc, test_renewal_queued_over_a_reconnect_is_void);
	tcase_add_test(tc, test_rule1_ride_lapses);
	tcase_add_test(tc, test_rule1_ride_lapse_reason);
	tcase_add_test(tc, test_rule1_ride_confirm_fails);
	tcase_add_test(tc, test_rule1_ride_then_expired);
	tcase_add_test(tc, test_rule1_step_down);
	tcase_add_test(tc, test_rule1_follower_and_readonly);
	suite_add_tcase(s, tc);

	tc = tcase_create("rules");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_rule3_created_foreign_owner);
	tcase_add_test(tc, test_rule4_not_lowest_while_leading);
	tcase_add_test(tc, test_leader_tracks_successor);
	tcase_add_test(tc, test_rule6_adopt);
	tcase_add_test(tc, test_rule6_search_is_synced);
	tcase_add_test(tc, test_rule6_not_found_and_foreign);
	tcase_add_test(tc, test_rule7_stale_generation);
	tcase_add_test(tc, test_rule7_watches_checked_by_name);
	tcase_add_test(tc, test_rule8_expiry);
	tcase_add_test(tc, test_rule8_new_session_id);
	tcase_add_test(tc, test_rule9_paths_gone);
	tcase_add_test(tc, test_rule10_stop_leader_names_successor);
	tcase_add_test(tc, test_rule10_release_without_successor);
	tcase_add_test(tc, test_rule10_stop_follower);
	tcase_add_test(tc, test_rule10_resign_hold_rejoin);
	tcase_add_test(tc, test_rule10_report_while_holding);
	tcase_add_test(tc, test_rule12_auth_failed);
	suite_add_tcase(s, tc);

	tc = tcase_create("view");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_observer);
	tcase_add_test(tc, test_view_reports_the_claim);
	tcase_add_test(tc, test_view_own_claim_not_reported);
	tcase_add_test(tc, test_view_bad_claim_data);
	tcase_add_test(tc, test_self_deleted_leader_stops_at_once);
	tcase_add_test(tc, test_self_deleted_follower_rejoins);
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_node_seq, 0,
	    (int)(sizeof(seq_cases) / sizeof(seq_cases[0])));
	tcase_add_test(tc, test_node_seq_length);
	suite_add_tcase(s, tc);

	tc = tcase_create("regressions");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_bug_create_loop_backs_off);
	tcase_add_test(tc, test_bug_resign_with_create_unresolved);
	tcase_add_test(tc, test_bug_resign_with_create_unresolved_connected);
	tcase_add_test(tc, test_bug_stop_reconnect_before_told);
	tcase_add_test(tc, test_bug_stop_told_while_disconnected);
	tcase_add_test(tc, test_bug_huge_hold);
	tcase_add_test(tc, test_bug_release_interrupted);
	tcase_add_test(tc, test_sim_late_answer_does_not_revive_a_lapsed_lease);
	tcase_add_test(tc, test_sim_term_needs_lease_to_last);
	tcase_add_test(tc, test_sim_anchor_is_answered_not_sent);
	tcase_add_test(tc, test_sim_no_tick_for_a_renewal_not_sent);
	tcase_add_test(tc, test_rule10_release_after_standing_loss_waits_for_app);
	tcase_add_test(tc, test_rule10_release_after_told_goes_at_once);
	tcase_add_test(tc, test_rule10_stale_acknowledgement_does_not_release);
	tcase_add_test(tc, test_lease_after_timeout_shrinks);
	tcase_add_test(tc, test_lease_shapes);
	tcase_add_test(tc, test_lease_until_anchor);
	tcase_add_test(tc, test_short_timeout_refuses_to_lead);
	tcase_add_test(tc, test_observer_earns_nothing_and_is_left);
	tcase_add_test(tc, test_tick_bound_learned);
	tcase_add_test(tc, test_understated_tick_not_believed);
	tcase_add_test(tc, test_unidentified_server_earns_nothing);
	tcase_add_test(tc, test_epoch_backwards_refused);
	tcase_add_test(tc, test_slow_round_trips_start_no_term);
	tcase_add_test(tc, test_noauth_ends_the_term);
	tcase_add_test(tc, test_missing_chroot_is_a_reason);
	tcase_add_test(tc, test_claim_read_credits_the_read_answered);
	tcase_add_test(tc, test_new_session_reads_claim_once);
	tcase_add_test(tc, test_let_go_with_path_gone_does_not_loop);
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
