/* SPDX-License-Identifier: MIT */
/*
 * The election state machine. It decides, from what ZooKeeper told the
 * driver, what to ask of ZooKeeper next and what this agent may report.
 * It keeps one promise above all: the role is "leader" only after a write
 * through the quorum named this agent while its node was the lowest (its own
 * claim, or its predecessor's release), and only while the session lease
 * lasts: the time our session is known to outlive, derived below from the
 * way the ZooKeeper leader expires sessions. Everything here is
 * deterministic; the unit tests drive it with tables, the simulator with
 * a model of ZooKeeper.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "election.h"

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	5000
#define HOLD_MAX_MS	((uint64_t)24 * 3600 * 1000)
#define LATCH_TAG	"latch-"

static void	election_rejoin(struct election *, struct election_actions *);
static void	election_create(struct election *, struct election_actions *);
static void	election_lose(struct election *, enum election_role,
		    enum election_reason,
		    struct election_actions *);
static void	election_set_ahead(struct election *, char *const *, int);
static void	election_takeover(struct election *, struct election_actions *);
static void	election_let_go(struct election *, struct election_actions *);
static void	election_lose_standing(struct election *, enum election_reason,
		    struct election_actions *);
static void	election_release(struct election *, enum election_reason,
		    struct election_actions *);
static bool	election_barred(const struct election *);
static void	election_watch_self(struct election *, struct election_actions *);
static uint64_t	election_jitter(const struct election *, unsigned);

const char *
election_role_name(enum election_role role)
{
	switch (role) {
	case ELECTION_FOLLOWER:	return "follower";
	case ELECTION_LEADER:	return "leader";
	case ELECTION_OBSERVER:	return "observer";
	default:		return "unknown";
	}
}

const char *
election_reason_name(enum election_reason reason)
{
	/* REASON_NONE: as the API says it before the first change. */
	static const char *const names[REASON_MAX] = {
		[REASON_NONE] = "starting",
		[REASON_ACCESS_REFUSED] = "access refused (NOAUTH)",
		[REASON_AUTH_FAILED] = "authentication failed",
		[REASON_CLAIM_OVERWRITTEN] = "claim overwritten",
		[REASON_CLAIMED] = "claimed",
		[REASON_OBSERVER_SERVER] = "connected to an observer",
		[REASON_CONNECTION_LOST] = "connection lost",
		[REASON_PATH_DELETED] = "election path deleted",
		[REASON_LEASE_LAPSED_DISCONNECTED] =
		    "lease lapsed while disconnected",
		[REASON_LEASE_LAPSED] = "lease lapsed",
		[REASON_NAMED] = "named by the last leader",
		[REASON_NEW_SESSION] = "new session",
		[REASON_NO_LEASE] = "no lease can be proven",
		[REASON_NO_LONGER_LOWEST] = "no longer lowest",
		[REASON_NOT_ASSIGNED] = "not assigned",
		[REASON_OBSERVING] = "observing",
		[REASON_OWN_NODE_DELETED] = "own node deleted",
		[REASON_OWN_NODE_VANISHED] = "own node vanished",
		[REASON_QUEUED] = "queued",
		[REASON_READONLY_SERVER] = "read-only server",
		[REASON_REASSIGNED] = "reassigned",
		[REASON_REQUEST_FAILED] = "request failed",
		[REASON_RESIGNED] = "resigned",
		[REASON_SESSION_EXPIRED] = "session expired",
		[REASON_STOPPING] = "stopping",
	};

	return names[reason];
}

const char *
election_session_name(enum election_session s)
{
	switch (s) {
	case SESSION_CONNECTED:		return "connected";
	case SESSION_EXPIRED:		return "expired";
	case SESSION_AUTH_FAILED:	return "auth_failed";
	case SESSION_READONLY:		return "readonly";
	case SESSION_CLOSED:		return "closed";
	default:			return "connecting";
	}
}

const char *
election_phase_name(enum election_phase p)
{
	static const char *const names[] = {
		"idle", "parent", "creating", "listing", "adopting",
		"watching", "takeover", "claiming", "leading", "releasing",
		"deleting", "holding", "observing", "stopped",
	};
	return names[p];
}

/*
 * Every change of phase goes through here, so that a step's path through
 * the phases is kept (e->trail, reset by each election_step) for the
 * driver to log.
 */
static void
election_phase(struct election *e, enum election_phase p)
{
	if (e->phase == p)
		return;
	if (e->trail_n < ELECTION_TRAIL_MAX)
		e->trail[e->trail_n++] = (uint8_t)p;
	e->phase = p;
}

const char *
election_server_name(enum election_server s)
{
	switch (s) {
	case SERVER_VOTING:	return "voting";
	case SERVER_OBSERVER:	return "observer";
	case SERVER_UNIDENTIFIED: return "unidentified";
	default:		return "unknown";
	}
}

const char *
election_tick_from_name(enum election_tick_from f)
{
	switch (f) {
	case TICK_STATED:	return "tick_time";
	case TICK_LEARNED:	return "servers";
	default:		return "assumed";
	}
}

const char *
election_bar_name(enum election_bar b)
{
	switch (b) {
	case BAR_OBSERVER:
		return "connected to an observer: leading needs a voting server";
	case BAR_SHORT_TIMEOUT:
		return "session timeout below twice zookeeper.tick_time (or "
		    "the servers' tickTime bound): no lease can be proven";
	case BAR_EPOCH_BACKWARDS:
		return "ZooKeeper's zxid went below an epoch this agent led "
		    "under (restored from an older snapshot?)";
	case BAR_SLOW_ZOOKEEPER:
		return "round trips to ZooKeeper too slow to start a term";
	case BAR_NO_ACCESS:
		return "ZooKeeper refuses access to the election path (NOAUTH): "
		    "check its ACL and zookeeper.auth";
	case BAR_NO_CHROOT:
		return "the election path cannot be created: the chroot of "
		    "zookeeper.servers does not exist";
	case BAR_UNIDENTIFIED:
		return "this connection's server cannot be told from an "
		    "observer (a proxy in front of an ensemble with observers: "
		    "list the servers' own addresses in zookeeper.servers; or "
		    "/zookeeper/config not read: the log says why)";
	default:
		return NULL;
	}
}

const char *
election_bar_text(const struct election_report *r, char *buf, size_t len)
{
	if (r->bar != BAR_SLOW_ZOOKEEPER)
		return election_bar_name(r->bar);
	snprintf(buf, len, "round trips to ZooKeeper (%" PRIu64 " ms of a %d ms "
	    "session timeout) leave too little lease to start a term",
	    r->slow_rtt_ms, r->timeout_ms);
	return buf;
}

const char *
election_action_name(enum election_action_type t)
{
	static const char *const names[] = {
		"create_parent", "create", "list", "watch_children",
		"watch_pred", "get_owner", "claim", "renew", "watch_claim",
		"read_claim", "watch_self", "read_successor", "release", "check_ahead", "kick",
		"new_session", "notify", "exit",
	};
	return names[t];
}

int64_t
election_node_seq(const char *name)
{
	size_t len = strlen(name), tag = strlen(LATCH_TAG);
	int64_t seq = 0;
	size_t i;

	if (len < tag + 10 || len >= ELECTION_NAME_MAX)
		return -1;
	if (strncmp(name + len - 10 - tag, LATCH_TAG, tag) != 0)
		return -1;
	for (i = len - 10; i < len; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		seq = seq * 10 + (name[i] - '0');
	}
	return seq;
}

/* --- The session lease (rule 2). --- */

/*
 * The arithmetic is lease.c's (doc/design.md, "The lease"); here is what
 * feeds it. The ring below keeps the send times of this connection's
 * requests and, for those whose answer we see, when they were answered; a
 * request sent on an earlier connection counts for nothing (its server may
 * be the one that stopped). One touch needs no report: the ZooKeeper
 * leader creates a session itself, expiring it no sooner than T after, and
 * it cannot have done so before we opened the handle that asked for it;
 * so the opening time counts as an anchor for the whole session. T is the
 * smallest timeout the session was ever negotiated with: a server touches
 * with the timeout negotiated on its connection, and a new ZooKeeper
 * leader restores the one the session was created with. Nothing is earned
 * through an observer, whose touches reach the ZooKeeper leader through
 * another server a report later. (The simulator in tests/sim found each of
 * these.)
 */
static bool
election_is_request(enum election_action_type t)
{
	return t != ACT_KICK && t != ACT_NEW_SESSION && t != ACT_NOTIFY &&
	    t != ACT_EXIT;
}

static void
election_note_sent(struct election *e)
{
	if (e->nsent > 0 && e->sent[e->nsent - 1] == e->now)
		return;
	if (e->nsent == ELECTION_SENT_RING) {
		memmove(&e->sent[0], &e->sent[1],
		    (ELECTION_SENT_RING - 1) * sizeof(e->sent[0]));
		memmove(&e->acked[0], &e->acked[1],
		    (ELECTION_SENT_RING - 1) * sizeof(e->acked[0]));
		e->nsent--;
	}
	e->acked[e->nsent] = 0;
	e->sent[e->nsent++] = e->now;
}

/*
 * A round trip came back. A term that starts must last: a leader's renewal
 * unanswered for kick is stalled, and its term may not survive the move to
 * another server. So no term starts after slow round trips in a row (one
 * alone may be a write waiting for a disk) until fast ones in a row say the
 * link is well again: the gap between the two thresholds keeps a link near
 * one of them from starting term after term (doc/design.md, "A slow
 * ZooKeeper").
 */
/* Round trips behind more of our own requests than this time our burst,
 * not the link: they do not count. */
#define ELECTION_RTT_QUEUED_MAX	2

static void
election_note_rtt(struct election *e, uint64_t rtt)
{
	if (e->lease_naive || !e->shape.ok ||
	    e->ev_queued > ELECTION_RTT_QUEUED_MAX)
		return;
	if (rtt >= e->shape.slow) {
		e->fast_runs = 0;
		if (++e->slow_runs >= ELECTION_SLOW_RUNS && e->slow_rtt == 0)
			e->slow_rtt = rtt;
		return;
	}
	e->slow_runs = 0;
	if (e->slow_rtt != 0 && rtt < e->shape.fast) {
		if (++e->fast_runs >= ELECTION_FAST_RUNS) {
			e->slow_rtt = 0;
			e->fast_runs = 0;
		}
	} else
		e->fast_runs = 0;
}

/* The request sent at s was answered now. */
static void
election_note_acked(struct election *e, uint64_t s)
{
	int i;

	if (s > e->last_answer_sent)
		e->last_answer_sent = s;
	for (i = e->nsent - 1; i >= 0; i--)
		if (e->sent[i] == s) {
			if (e->acked[i] == 0) {
				e->acked[i] = e->now;
				/* Sent on this connection (not queued while
				 * the client reconnected): a round trip. */
				election_note_rtt(e, e->now - s);
			}
			return;
		}
}

/* Through an observer, or a server that may be one, no lease is earned. */
static bool
election_no_lease_here(const struct election *e)
{
	return e->server == SERVER_OBSERVER || e->server == SERVER_UNIDENTIFIED;
}

/*
 * The bound on tickTime the lease counts with (doc/design.md, "The
 * lease"): zookeeper.tick_time, or half the largest minSessionTimeout a
 * server gave, whichever is larger (a stated tick below what the servers
 * imply is not believed); 0 when neither is known (lease_shape assumes
 * T/2).
 */
static uint64_t
election_tick_bound(const struct election *e)
{
	uint64_t learned = ((uint64_t)e->min_timeout_ms + 1) / 2;

	return (uint64_t)e->tick_ms > learned ? (uint64_t)e->tick_ms : learned;
}

/* The lease a round trip sent at s earns, or 0 if it earns none. */
static uint64_t
election_lease_until(const struct election *e, uint64_t s)
{
	uint64_t born = e->session_born, q;

	if (e->lease_naive)
		return s + (uint64_t)e->timeout_ms * 2 / 3;
	if (election_no_lease_here(e))
		return 0;
	/* Any request of the session on this connection anchors the lease
	 * (doc/design.md, "The lease"): with partitions, the session's own
	 * renewals, whichever partition asks. */
	if (e->session_ring != NULL &&
	    (q = lease_anchor(&e->shape, e->session_ring, s)) > born)
		born = q;
	return lease_until(&e->shape, e->sent, e->acked, e->nsent, born, s);
}

uint64_t
election_lease_for(const struct election *e, uint64_t s)
{
	return election_lease_until(e, s);
}

static uint64_t
election_renew_every(const struct election *e)
{
	uint64_t every;

	every = (uint64_t)e->timeout_ms / (e->renew_div != 0 ? e->renew_div : 6);
	/* Not less often than the lease's own period (T/6 or more, T/6
	 * with a short tick): the more often, the more lease a leader has in hand when a
	 * disconnect begins (doc/design.md, "The lease"). */
	if (!e->lease_naive && e->shape.ok && e->shape.renew < every)
		every = e->shape.renew;
	return every;
}

/* The next renewal, this long after the last answer (it anchors the next). */
static uint64_t
election_renew_after(const struct election *e)
{
	return e->lease_naive ? (uint64_t)e->timeout_ms / 5 : e->shape.renew;
}

/* Since when the renewal in flight has had no answer, and the connection
 * none to any request of ours either. */
static uint64_t
election_stalled_since(const struct election *e)
{
	if (e->last_answer != NULL && *e->last_answer > e->renew_sent)
		return *e->last_answer;
	return e->renew_sent;
}

/* A renewal or a reconnection unanswered this long is stalled: move on. */
static uint64_t
election_kick_after(const struct election *e)
{
	return e->lease_naive ? (uint64_t)e->timeout_ms / 6 : e->shape.kick;
}

/* The lease's figures follow T: the session's smallest timeout. */
static void
election_set_timeout(struct election *e, int timeout_ms)
{
	e->timeout_ms = timeout_ms;
	lease_shape(&e->shape, (uint64_t)timeout_ms, election_tick_bound(e));
}

/* --- Actions. --- */

static struct election_action *
election_push(struct election *e, struct election_actions *out,
    enum election_action_type type, const char *name)
{
	struct election_action *a;

	if (out->n >= ELECTION_ACTIONS_MAX)
		abort();	/* a broken invariant: no step emits this many */
	a = &out->a[out->n++];
	memset(a, 0, sizeof(*a));
	a->type = type;
	if (name != NULL)
		snprintf(a->name, sizeof(a->name), "%s", name);
	if (election_is_request(type))
		election_note_sent(e);
	return a;
}

/*
 * The one place the role changes. Every change becomes an ACT_NOTIFY, which
 * the driver logs once and passes on to the app. A loss of leadership is
 * emitted before any action that lets our node go, because actions are
 * performed in order.
 */
static void
election_set_role(struct election *e, enum election_role role,
    enum election_reason reason, bool wait, struct election_actions *out)
{
	struct election_action *a;

	if (e->role == role)
		return;
	a = election_push(e, out, ACT_NOTIFY, NULL);
	a->from = e->role;
	a->to = role;
	a->reason = reason;
	a->wait = wait;
	a->node_stands = wait;	/* a release: the node goes after EV_NOTIFIED */
	e->role_reason = reason;
	if (e->role == ELECTION_LEADER) {
		/* Rule 10: whatever comes next, our node goes only once the
		 * app has heard of this loss (EV_NOTIFIED). */
		a->wait = true;
		a->told = ++e->losses;
		e->app_owed = true;
		/* Our watch on the queue kept the count current until now. */
		if (e->session == SESSION_CONNECTED && e->candidates_counted)
			e->candidates_at = e->now;
		if (e->epoch > e->spent_epoch)
			e->spent_epoch = e->epoch;
		e->epoch = 0;
		e->riding_since = 0;
	}
	e->role = role;
}

/*
 * Reads the election node: the claim, who leads. Observers leave a data
 * watch on it, to hear of every claim at once. Candidates do not: with the
 * release that names a successor being the claim, a watch would wake every
 * follower, and make ZooKeeper send them all a notification, at the very
 * moment the successor takes over. Followers read it every T/6 instead,
 * each at a time of its own, and the leader with each renewal.
 */
/* Who watches the claim rather than reads it: observers, partitions out
 * of the queue, and a partition's leader, whose lease the session's
 * renewal extends (doc/design.md, "Partitions"). */
static bool
election_claim_watched(const struct election *e)
{
	return !e->candidate || e->parked ||
	    (e->session_renewal && e->phase == PHASE_LEADING);
}

static void
election_watch_claim(struct election *e, struct election_actions *out)
{
	if (e->claim_reads < ELECTION_READS_MAX)
		e->claim_read_sent[e->claim_reads] = e->now;
	e->claim_reads++;
	e->claim_owed = false;
	/* A partition we are not in the queue of is watched, not polled:
	 * an agent in many partitions must not read each every T/6. */
	if (e->parked)
		e->parked_watch = true;
	if (election_claim_watched(e))
		e->claim_watch_sent = e->now;
	election_push(e, out, election_claim_watched(e) ? ACT_WATCH_CLAIM :
	    ACT_READ_CLAIM, NULL);
}

static void
election_new_uuid(struct election *e)
{
	e->uuid_gen(e->uuid, e->uuid_arg);
	e->node[0] = '\0';
	e->node_czxid = 0;
	e->self_watched = false;
}

static void
election_forget_view(struct election *e)
{
	election_set_ahead(e, NULL, 0);
	e->candidates = 0;
	e->candidates_counted = false;
	e->position = -1;
	e->succ[0] = '\0';
	e->succ_datalen = -1;
}

/* Rule 7: anything begun before this point is void. */
static void
election_next_gen(struct election *e)
{
	e->gen++;
	e->renew_inflight = false;
	e->kicked = false;
	e->claim_inflight = false;
	e->retry_at = 0;
}

static void
election_backoff(struct election *e)
{
	e->backoff_ms = e->backoff_ms == 0 ? BACKOFF_MIN_MS : e->backoff_ms * 2;
	if (e->backoff_ms > BACKOFF_MAX_MS)
		e->backoff_ms = BACKOFF_MAX_MS;
	e->retry_at = e->now + e->backoff_ms;
}

static void
election_retry(struct election *e, struct election_actions *out)
{
	/* Whatever failed, a leader is not sure any more (rule 4). */
	if (e->role == ELECTION_LEADER)
		election_lose_standing(e, REASON_REQUEST_FAILED, out);
	election_backoff(e);
	e->next_renew = 0;
	election_phase(e, PHASE_IDLE);
}

void
election_init(struct election *e, const char *id, const char *value,
    bool candidate)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->id, sizeof(e->id), "%s", id);
	if (value != NULL)
		snprintf(e->claim_data, sizeof(e->claim_data), "%s\n%s", id, value);
	else
		snprintf(e->claim_data, sizeof(e->claim_data), "%s", id);
	e->claim_datalen = (int)strlen(e->claim_data);
	e->candidate = candidate;
	e->renew_div = 6;
	e->session = SESSION_CONNECTING;
	election_phase(e, PHASE_IDLE);
	e->role = ELECTION_UNKNOWN;
	e->position = -1;
	e->gen = 1;
	e->succ_datalen = -1;
	e->last.position = -1;
}

/* Leadership ends here for every reason but a graceful release. */
static void
election_lose(struct election *e, enum election_role role,
    enum election_reason reason,
    struct election_actions *out)
{
	election_set_role(e, role, reason, false, out);
	e->renew_inflight = false;
}

/*
 * The same, for losses that leave our node (and session) standing until the
 * lease deadline: nobody can lead before then, so the app may take until
 * shortly before it to stop. After any other loss (our node deleted, the
 * session expired, someone else's claim) a successor may lead already.
 */
static void
election_lose_standing(struct election *e, enum election_reason reason,
    struct election_actions *out)
{
	int n = out->n;

	election_lose(e, ELECTION_UNKNOWN, reason, out);
	if (out->n > n && out->a[n].type == ACT_NOTIFY)
		out->a[n].node_stands = true;
}

/* A node (re)created soon after the last one vanished waits: a path that
 * eats our nodes must not become a create loop. */
static void
election_recreate(struct election *e, struct election_actions *out)
{
	e->uuid[0] = '\0';
	e->node[0] = '\0';
	e->next_renew = 0;
	if (e->backoff_ms == 0) {
		e->backoff_ms = BACKOFF_MIN_MS;
		election_create(e, out);
		return;
	}
	election_backoff(e);
	election_phase(e, PHASE_IDLE);
}

/* The renewals (and so the lease) run while we lead or are next in line. */
static void
election_schedule_renewals(struct election *e, bool on)
{
	/* Partitions: one next in line, or taking over, keeps no lease of
	 * its own: the session's renewal is the lease a named successor
	 * leads on (election_try_lead; if it falls short, election_decide
	 * renews), and a claim is a round trip of its own. One next in
	 * line reads the claim as followers do. */
	if (e->session_renewal && (e->phase == PHASE_WATCHING ||
	    e->phase == PHASE_TAKEOVER))
		on = false;
	if (!on)
		e->next_renew = 0;
	else if (e->next_renew == 0)
		e->next_renew = e->now;
}

/* Rule 8: the session is gone, and with it our node, lease and watches. */
static void
election_forget_session(struct election *e)
{
	e->session_id = 0;
	e->session_born = 0;
	e->uuid[0] = '\0';
	e->node[0] = '\0';
	e->self_watched = false;
	e->self_watch_sent = 0;
	e->claim_watch_sent = 0;
	e->lease_deadline = 0;
	e->term_epoch = 0;
	e->next_renew = 0;
	e->claim_owed = true;
	election_forget_view(e);
}

/*
 * A reconnect negotiated a smaller timeout (a server with a lower
 * maxSessionTimeout): its revalidation touched the session with it, which
 * can bring the expiry forward. A larger one counts for nothing: a new
 * ZooKeeper leader restores the timeout the session was created with.
 */
static void
election_shrink(struct election *e, int timeout_ms)
{
	uint64_t until;

	election_set_timeout(e, timeout_ms);
	until = lease_after_shrink(e->last_answer_sent, (uint64_t)timeout_ms,
	    election_tick_bound(e));
	if (e->lease_deadline > until)
		e->lease_deadline = until;
}

static void
election_on_session(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	enum election_session old = e->session;

	/* A repeated state is news only as a CONNECTED of another session. */
	if (ev->session == old && (old != SESSION_CONNECTED ||
	    ev->session_id == e->session_id))
		return;
	e->session = ev->session;
	election_next_gen(e);
	e->parked_watch = false;	/* set again once connected */
	e->nsent = 0;		/* a new connection: earlier sends count no more */
	e->claim_reads = 0;
	memset(e->claim_read_sent, 0, sizeof(e->claim_read_sent));
	e->server = SERVER_UNKNOWN;

	switch (ev->session) {
	case SESSION_CONNECTED:
		if (e->session_id != 0 && e->session_id != ev->session_id) {
			/* Another session: nothing of the old one holds. */
			election_lose(e, ELECTION_UNKNOWN, REASON_NEW_SESSION, out);
			election_forget_session(e);
		}
		if (e->session_id != ev->session_id) {
			e->session_born = ev->sent;
			e->last_answer_sent = 0;
			election_set_timeout(e, ev->timeout_ms);
		} else if (ev->timeout_ms < e->timeout_ms)
			election_shrink(e, ev->timeout_ms);
		e->session_id = ev->session_id;
		e->backoff_ms = 0;
		if (e->role == ELECTION_LEADER && e->phase == PHASE_LEADING) {
			/*
			 * Rule 1: back within the lease, same session. One
			 * renewal confirms the term (our node, our epoch on
			 * the election node); the next one, a report interval
			 * later, extends the lease.
			 */
			e->renew_inflight = true;
			e->renew_sent = e->now;
			e->next_renew = e->now + election_renew_every(e);
			election_push(e, out, ACT_RENEW, e->node);
			/* A watch on the queue whose listing was lost with the
			 * connection was never set: without it a parked leader
			 * never learns of its successor, and never hands over. */
			if (e->children_owed)
				election_push(e, out, ACT_WATCH_CHILDREN, NULL);
			/* So do the watches on our node and on the claim whose
			 * reads failed with the connection (a partition's
			 * lease rests on them). */
			election_watch_self(e, out);
			if (election_claim_watched(e) && e->claim_watch_sent == 0)
				election_watch_claim(e, out);
			return;
		}
		if (e->stopping) {
			if (e->phase == PHASE_RELEASING)
				return;		/* the app is not told yet (rule 10) */
			if (e->phase == PHASE_DELETING) {
				election_let_go(e, out);
				return;
			}
			election_phase(e, PHASE_STOPPED);
			election_push(e, out, ACT_EXIT, NULL);
			return;
		}
		election_forget_view(e);
		election_watch_claim(e, out);
		e->poll_at = election_jitter(e, 6);
		if (e->phase == PHASE_HOLDING || e->phase == PHASE_RELEASING)
			return;
		if (e->phase == PHASE_DELETING) {
			election_let_go(e, out);
			return;
		}
		election_rejoin(e, out);
		return;
	case SESSION_EXPIRED:
		/* Rule 8: nothing of the old session survives. */
		if (e->riding_since != 0)
			e->rides_lost++;
		election_lose(e, ELECTION_UNKNOWN, REASON_SESSION_EXPIRED, out);
		election_forget_session(e);
		if (e->stopping) {
			election_phase(e, PHASE_STOPPED);
			election_push(e, out, ACT_EXIT, NULL);
			return;
		}
		/* A resign's hold outlives the session; the node did not. */
		if (e->phase == PHASE_DELETING)
			election_phase(e, PHASE_HOLDING);
		else if (e->phase != PHASE_HOLDING && e->phase != PHASE_RELEASING)
			election_phase(e, PHASE_IDLE);
		e->session = SESSION_CONNECTING;
		election_push(e, out, ACT_NEW_SESSION, NULL);
		return;
	case SESSION_AUTH_FAILED:
		/* Rule 12; the handle is dead, retry with a new one. */
		election_lose(e, ELECTION_UNKNOWN, REASON_AUTH_FAILED, out);
		election_forget_session(e);
		if (e->stopping) {
			election_phase(e, PHASE_STOPPED);
			election_push(e, out, ACT_EXIT, NULL);
			return;
		}
		if (e->phase != PHASE_RELEASING && e->phase != PHASE_HOLDING)
			election_phase(e, PHASE_IDLE);
		e->retry_at = ev->now + BACKOFF_MAX_MS;
		return;
	default:
		if (e->role == ELECTION_LEADER && e->phase == PHASE_LEADING &&
		    ev->session == SESSION_CONNECTING && !e->step_down) {
			/*
			 * Rule 1: the connection dropped, the session did not
			 * (yet). It cannot expire before our lease ends, and no
			 * one can claim while our node lives: lead on until the
			 * deadline, not a moment longer.
			 */
			if (e->riding_since == 0)
				e->riding_since = e->now;
			e->last_kick = e->now;
			return;
		}
		/*
		 * Connection lost with step_down, read-only (rule 12), or not
		 * leading: we cannot know whether our session survives; say
		 * so at once. Expiry is only learnt after reconnecting.
		 */
		if (e->riding_since != 0)
			e->rides_lost++;
		election_lose_standing(e,
		    ev->session == SESSION_READONLY ? REASON_READONLY_SERVER :
		    REASON_CONNECTION_LOST, out);
		e->term_epoch = 0;
		if (e->phase != PHASE_HOLDING && e->phase != PHASE_RELEASING &&
		    e->phase != PHASE_DELETING)
			election_phase(e, PHASE_IDLE);
		/* Stopping without a connection: the node goes with the session. */
		if (e->stopping && e->phase != PHASE_RELEASING) {
			election_phase(e, PHASE_STOPPED);
			election_push(e, out, ACT_EXIT, NULL);
		}
		return;
	}
}

/* Joins (create), or re-evaluates our place (list). */
static void
election_rejoin(struct election *e, struct election_actions *out)
{
	struct election_action *a;

	if (e->session != SESSION_CONNECTED)
		return;
	if (election_barred(e) || (e->off_queue && e->server == SERVER_UNKNOWN)) {
		/* Out of the queue until a server where a lease can be earned
		 * says so (EV_SERVER follows every connect). */
		e->off_queue = true;
		election_phase(e, PHASE_HOLDING);
		return;
	}
	if (!e->candidate) {
		election_phase(e, PHASE_OBSERVING);
		election_push(e, out, ACT_LIST, NULL);
		return;
	}
	if (e->parked) {
		/*
		 * A node of ours may still stand in the queue (this session's,
		 * made before the connection dropped): it would block every
		 * contender behind it. Let it go, as a parked follower does.
		 */
		if (e->node[0] != '\0' || e->uuid[0] != '\0') {
			election_release(e, REASON_NOT_ASSIGNED, out);
			return;
		}
		election_phase(e, PHASE_HOLDING);	/* until assigned */
		return;
	}
	/*
	 * Rule 6: with a uuid but no node name, a create may have succeeded
	 * without our hearing of it; listing finds it (or not) by uuid. The
	 * sync first makes the listing current even on a lagging server.
	 */
	if (e->uuid[0] == '\0') {
		election_create(e, out);
		return;
	}
	election_phase(e, PHASE_LISTING);
	a = election_push(e, out, ACT_LIST, NULL);
	a->sync = e->node[0] == '\0';
}

static void
election_create(struct election *e, struct election_actions *out)
{
	struct election_action *a;

	if (e->uuid[0] == '\0')
		election_new_uuid(e);
	e->node[0] = '\0';
	election_phase(e, PHASE_CREATING);
	a = election_push(e, out, ACT_CREATE, NULL);
	a->data = e->claim_data;
	a->datalen = e->claim_datalen;
}

static void
election_on_created(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	const char *slash;

	if (e->phase != PHASE_CREATING)
		return;
	if (ev->rc == ZOK && ev->name != NULL && ev->owner != e->session_id) {
		/* Rule 3: not ours to claim with (cannot happen unless the
		 * session changed under us); leave it and look again. */
		election_phase(e, PHASE_LISTING);
		election_push(e, out, ACT_LIST, NULL);
	} else if (ev->rc == ZOK && ev->name != NULL) {
		slash = strrchr(ev->name, '/');
		slash = slash != NULL ? slash + 1 : ev->name;
		if (election_node_seq(slash) < 0) {
			/* Not a name we can sort by: never claim with it. */
			election_retry(e, out);
			return;
		}
		snprintf(e->node, sizeof(e->node), "%s", slash);
		e->node_czxid = ev->czxid;
		e->self_watched = false;
		election_phase(e, PHASE_LISTING);
		election_push(e, out, ACT_LIST, NULL);
	} else if (ev->rc == ZNONODE) {
		/* Rule 9: the election path is gone; make it again. */
		election_phase(e, PHASE_PARENT);
		election_push(e, out, ACT_CREATE_PARENT, NULL);
	} else if (ev->rc == ZCONNECTIONLOSS || ev->rc == ZOPERATIONTIMEOUT) {
		/* Outcome unknown (rule 6): reconnecting will list first. */
		election_phase(e, PHASE_IDLE);
	} else
		election_retry(e, out);
}

static void
election_on_parent(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_PARENT)
		return;
	e->no_chroot = ev->rc == ZNONODE;
	if (ev->rc == ZOK || ev->rc == ZNODEEXISTS) {
		election_watch_claim(e, out);
		if (e->candidate)
			election_create(e, out);
		else {
			election_phase(e, PHASE_OBSERVING);
			election_push(e, out, ACT_LIST, NULL);
		}
	} else
		election_retry(e, out);
}

struct election_seq_name {
	int64_t		 seq;
	char		*name;
};

static int
election_seq_cmp(const void *a, const void *b)
{
	int64_t x = ((const struct election_seq_name *)a)->seq;
	int64_t y = ((const struct election_seq_name *)b)->seq;

	return x < y ? -1 : x > y;
}

/* Keeps a copy of the first n sorted names: who is ahead of us. */
static void
election_set_ahead(struct election *e, char *const *sorted, int n)
{
	int i;

	for (i = 0; i < e->nahead; i++)
		free(e->ahead[i]);
	free(e->ahead);
	e->ahead = NULL;
	e->nahead = 0;
	if (n <= 0)
		return;
	e->ahead = calloc((size_t)n, sizeof(*e->ahead));
	if (e->ahead == NULL)
		abort();
	for (i = 0; i < n; i++)
		if ((e->ahead[i] = strdup(sorted[i])) == NULL)
			abort();
	e->nahead = n;
}

/* A node ahead of us is gone: forget it; we are one place further on. */
static void
election_drop_ahead(struct election *e, const char *name)
{
	int i;

	for (i = 0; i < e->nahead; i++)
		if (strcmp(e->ahead[i], name) == 0) {
			free(e->ahead[i]);
			memmove(&e->ahead[i], &e->ahead[i + 1],
			    (size_t)(e->nahead - i - 1) * sizeof(*e->ahead));
			e->nahead--;
			/* Our place is a fact (nodes only join behind us);
			 * the count is not (they may have): it stays as
			 * listed, with its age (election_candidates_age). */
			if (e->position > 0)
				e->position--;
			return;
		}
}

/* The leader keeps its successor's name and data, to name it on release. */
static void
election_set_successor(struct election *e, const char *name,
    struct election_actions *out)
{
	if (name == NULL) {
		e->succ[0] = '\0';
		e->succ_datalen = -1;
		return;
	}
	if (strcmp(e->succ, name) == 0 && e->succ_datalen >= 0)
		return;
	snprintf(e->succ, sizeof(e->succ), "%s", name);
	e->succ_datalen = -1;
	election_push(e, out, ACT_READ_SUCCESSOR, name);
}

/* Our node's own watch (rule 5): once per node and session. */
static void
election_watch_self(struct election *e, struct election_actions *out)
{
	if (e->self_watched || e->node[0] == '\0')
		return;
	e->self_watched = true;
	e->self_watch_sent = e->now;
	election_push(e, out, ACT_WATCH_SELF, e->node);
}

/* Where are we in the sorted queue, and what follows from it. */
static void
election_evaluate(struct election *e, char **sorted, int n,
    struct election_actions *out)
{
	char uuidtag[ELECTION_UUID_LEN + 8];
	const char *found = NULL;
	int i, mine = -1;

	if (!e->candidate) {
		e->position = -1;
		if (e->role != ELECTION_OBSERVER)
			election_set_role(e, ELECTION_OBSERVER, REASON_OBSERVING,
			    false, out);
		return;
	}

	if (e->node[0] == '\0') {
		/* Rule 6: was our create applied after all? */
		snprintf(uuidtag, sizeof(uuidtag), "_c_%s-", e->uuid);
		for (i = 0; i < n && found == NULL; i++)
			if (strncmp(sorted[i], uuidtag, strlen(uuidtag)) == 0)
				found = sorted[i];
		if (found != NULL) {
			election_phase(e, PHASE_ADOPTING);
			election_push(e, out, ACT_GET_OWNER, found);
		} else
			election_create(e, out);
		return;
	}

	for (i = 0; i < n; i++)
		if (strcmp(sorted[i], e->node) == 0)
			mine = i;
	if (mine < 0) {
		/* Our node is gone (deleted by hand?): rejoin at the back. */
		election_lose(e, ELECTION_UNKNOWN, REASON_OWN_NODE_VANISHED, out);
		e->position = -1;
		e->term_epoch = 0;
		election_recreate(e, out);
		return;
	}
	e->position = mine;
	e->backoff_ms = 0;
	election_watch_self(e, out);
	if (mine == 0) {
		if (e->phase == PHASE_LEADING) {
			election_set_successor(e, n > 1 ? sorted[1] : NULL, out);
			return;
		}
		election_takeover(e, out);
		return;
	}
	/* Rule 4: not the lowest, so not the leader. */
	election_set_role(e, ELECTION_FOLLOWER,
	    e->role == ELECTION_LEADER ? REASON_NO_LONGER_LOWEST : REASON_QUEUED,
	    false, out);
	e->term_epoch = 0;
	snprintf(e->predecessor, sizeof(e->predecessor), "%s", sorted[mine - 1]);
	election_phase(e, PHASE_WATCHING);
	election_push(e, out, ACT_WATCH_PRED, e->predecessor);
	/* Next in line: keep a lease ready, so a takeover needs no round trip
	 * of its own. */
	election_schedule_renewals(e, mine == 1);
}

static void
election_on_children(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	struct election_seq_name *byseq;
	char **sorted, uuidtag[ELECTION_UUID_LEN + 8];
	int i, n = 0, ahead;

	if (e->phase == PHASE_DELETING) {
		/* Letting go of a node we never learnt the name of (rule 6). */
		if (ev->rc != ZOK) {
			if (ev->rc == ZNONODE) {
				/* The path is gone, and any node under it:
				 * nothing to find (else this lists forever). */
				e->uuid[0] = '\0';
				election_let_go(e, out);
			}
			return;		/* reconnecting searches again */
		}
		snprintf(uuidtag, sizeof(uuidtag), "_c_%s-", e->uuid);
		for (i = 0; i < ev->count; i++)
			if (strncmp(ev->names[i], uuidtag, strlen(uuidtag)) == 0 &&
			    election_node_seq(ev->names[i]) >= 0) {
				election_push(e, out, ACT_GET_OWNER, ev->names[i]);
				return;
			}
		e->uuid[0] = '\0';	/* the create never happened */
		election_let_go(e, out);
		return;
	}
	if (e->phase != PHASE_LISTING && e->phase != PHASE_OBSERVING &&
	    e->phase != PHASE_WATCHING && e->phase != PHASE_LEADING)
		return;
	if (e->phase == PHASE_LEADING && ev->rc == ZOK)
		e->children_owed = false;	/* the watch is set */
	if (ev->rc == ZNONODE) {
		/* Rule 9: the parent went away, and our node with it. */
		if (e->role == ELECTION_LEADER)
			election_lose(e, ELECTION_UNKNOWN,
			    REASON_PATH_DELETED, out);
		election_forget_view(e);
		e->node[0] = '\0';
		e->uuid[0] = '\0';	/* nothing created under it yet */
		e->next_renew = 0;
		e->claim_owed = true;
		election_phase(e, PHASE_PARENT);
		election_push(e, out, ACT_CREATE_PARENT, NULL);
		return;
	}
	if (ev->rc != ZOK) {
		/* A leader's view refresh failing changes nothing: the lease
		 * decides. Elsewhere, try again later. */
		if (e->phase != PHASE_LEADING && ev->rc != ZCONNECTIONLOSS &&
		    ev->rc != ZOPERATIONTIMEOUT && ev->rc != ZSESSIONEXPIRED &&
		    ev->rc != ZCLOSING)
			election_retry(e, out);
		return;
	}

	ahead = -1;
	/* Validate what ZooKeeper gave us; contenders sort by suffix,
	 * parsed once each. */
	byseq = calloc((size_t)ev->count + 1, sizeof(*byseq));
	sorted = calloc((size_t)ev->count + 1, sizeof(*sorted));
	if (byseq == NULL || sorted == NULL)
		abort();
	e->strangers = 0;
	for (i = 0; i < ev->count; i++)
		if ((byseq[n].seq = election_node_seq(ev->names[i])) >= 0)
			byseq[n++].name = ev->names[i];
		else if (e->strangers++ == 0)
			snprintf(e->stranger, sizeof(e->stranger), "%s",
			    ev->names[i]);
	qsort(byseq, (size_t)n, sizeof(*byseq), election_seq_cmp);
	for (i = 0; i < n; i++) {
		sorted[i] = byseq[i].name;
		if (ahead < 0 && e->node[0] != '\0' &&
		    strcmp(sorted[i], e->node) == 0)
			ahead = i;
	}
	if (ahead < 0)
		ahead = n;	/* not queued: everyone is ahead */
	free(byseq);
	e->candidates = n;
	e->candidates_at = e->now;
	e->candidates_counted = true;
	/* Who is ahead of us: where to look for the next leader without
	 * listing again when this one leaves. */
	election_set_ahead(e, sorted, ahead);
	/* The election node exists now: owe no watch on it. */
	if (e->claim_owed)
		election_watch_claim(e, out);
	election_evaluate(e, sorted, n, out);
	free(sorted);
}

static void
election_on_owner(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (ev->name == NULL)
		return;
	if (e->phase == PHASE_DELETING) {
		if (ev->rc == ZOK && ev->owner == e->session_id) {
			snprintf(e->node, sizeof(e->node), "%s", ev->name);
			election_let_go(e, out);
		} else if (ev->rc == ZOK || ev->rc == ZNONODE) {
			e->uuid[0] = '\0';	/* gone, or not ours */
			election_let_go(e, out);
		}
		return;		/* connection trouble: reconnecting searches again */
	}
	if (e->phase != PHASE_ADOPTING)
		return;
	if (ev->rc == ZOK && ev->owner == e->session_id) {
		snprintf(e->node, sizeof(e->node), "%s", ev->name);
		e->node_czxid = ev->czxid;
		e->self_watched = false;
		election_phase(e, PHASE_LISTING);
		election_push(e, out, ACT_LIST, NULL);
		return;
	}
	/* Gone, or another session's (rule 6): ignore it and create. */
	if (ev->rc == ZOK || ev->rc == ZNONODE) {
		election_new_uuid(e);
		election_create(e, out);
	} else
		election_retry(e, out);
}

static void
election_on_pred_set(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_WATCHING || ev->name == NULL ||
	    strcmp(ev->name, e->predecessor) != 0)
		return;
	if (ev->rc == ZOK)
		return;
	/* Rule 5: gone before the watch was set; look again. */
	if (ev->rc == ZNONODE) {
		election_phase(e, PHASE_LISTING);
		election_push(e, out, ACT_LIST, NULL);
	} else if (ev->rc != ZCONNECTIONLOSS && ev->rc != ZSESSIONEXPIRED &&
	    ev->rc != ZCLOSING && ev->rc != ZOPERATIONTIMEOUT)
		election_retry(e, out);
}

static void
election_on_pred_changed(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	/*
	 * Watches carry no generation: the client keeps one watcher per node
	 * across reconnects. An event counts only for our predecessor now.
	 */
	if (e->phase != PHASE_WATCHING || e->session != SESSION_CONNECTED ||
	    ev->name == NULL || strcmp(ev->name, e->predecessor) != 0)
		return;
	if (!ev->deleted) {
		election_phase(e, PHASE_LISTING);
		election_push(e, out, ACT_LIST, NULL);
		return;
	}
	/*
	 * Our predecessor left. Nodes only ever join behind us (sequence
	 * numbers grow), so the nodes ahead of us are those of our last
	 * listing that have not left since: with none left we are the
	 * lowest and take over (rule 3) without listing a long queue;
	 * otherwise the last of them is our new predecessor (rule 5: its
	 * absence makes us list again).
	 */
	election_drop_ahead(e, e->predecessor);
	if (e->nahead == 0) {
		e->position = 0;
		election_takeover(e, out);
		return;
	}
	snprintf(e->predecessor, sizeof(e->predecessor), "%s",
	    e->ahead[e->nahead - 1]);
	election_push(e, out, ACT_WATCH_PRED, e->predecessor);
	election_schedule_renewals(e, e->nahead == 1);
}

/*
 * Our node is the lowest. Either the leader before us named us in the
 * multi that deleted its node, or we claim ourselves (rule 3). Which, the
 * election node says: read it afresh (a new generation, so that no read
 * sent before our predecessor left decides).
 */
static void
election_takeover(struct election *e, struct election_actions *out)
{
	if (e->phase == PHASE_TAKEOVER || e->phase == PHASE_CLAIMING)
		return;
	election_next_gen(e);
	election_phase(e, PHASE_TAKEOVER);
	e->term_epoch = 0;
	election_schedule_renewals(e, true);
	election_watch_claim(e, out);
}

/*
 * A term, named or claimed, starts once the lease has time left: a renewal
 * interval and T/6 more, so that the next renewal (due an interval after
 * the last answer) comes back and extends it before it lapses (else the
 * term would flap: leader, unknown, leader under a new epoch).
 */
static void
election_try_lead(struct election *e, enum election_reason reason,
    struct election_actions *out)
{
	if ((e->phase != PHASE_TAKEOVER && e->phase != PHASE_CLAIMING) ||
	    e->term_epoch == 0)
		return;
	/* Partitions: the lease is the session's. Named by our predecessor
	 * (or our claim written) while our node stands, we lead as long as
	 * the session is known to live, without a round trip of our own. */
	if (e->session_lease != NULL && e->session == SESSION_CONNECTED &&
	    !e->lease_naive && *e->session_lease > e->lease_deadline)
		e->lease_deadline = *e->session_lease;
	if (e->now + (e->lease_naive ?
	    election_renew_every(e) + (uint64_t)e->timeout_ms / 6 :
	    e->shape.start) >= e->lease_deadline) {
		/* Too little lease: earn one (partitions renew here only). */
		if (e->next_renew == 0 && !e->renew_inflight)
			e->next_renew = e->now;
		return;
	}
	if (!e->lease_naive && e->slow_rtt != 0)
		return;		/* it would not last: wait for faster trips */
	if (!e->lease_naive && e->term_epoch <= e->spent_epoch) {
		/*
		 * A claim below an epoch we already led under: ZooKeeper's
		 * history went back (a restore from an older snapshot). The
		 * app was told a higher epoch; never publish a lower one.
		 * Claim again later (each claim is a newer zxid).
		 */
		e->epoch_behind = true;
		e->term_epoch = 0;
		election_retry(e, out);
		return;
	}
	e->epoch_behind = false;
	election_phase(e, PHASE_LEADING);
	e->epoch = e->term_epoch;
	e->term_epoch = 0;
	e->riding_since = 0;
	/* Our claim is the view too; older reads no longer count. */
	e->claim_known = true;
	e->claim_mine = true;
	e->claim_epoch = e->epoch;
	if (e->claim_seen < e->epoch)
		e->claim_seen = e->epoch;
	election_set_role(e, ELECTION_LEADER, reason, false, out);
	/* Only the leader watches the whole queue, to keep its candidate
	 * count and its successor fresh; one agent, one notification. */
	e->children_owed = true;
	election_push(e, out, ACT_WATCH_CHILDREN, NULL);
	/* Partitions: the session's renewal extends the lease only while a
	 * watch stands on the claim (and one on our node). */
	if (e->session_renewal) {
		election_watch_claim(e, out);
		election_watch_self(e, out);
	}
}

static void
election_claim(struct election *e, struct election_actions *out)
{
	struct election_action *a;

	election_phase(e, PHASE_CLAIMING);
	e->claim_inflight = true;
	e->claim_sent = e->now;		/* the claim is a round trip too */
	a = election_push(e, out, ACT_CLAIM, e->node);
	a->data = e->claim_data;
	a->datalen = e->claim_datalen;
}

static void
election_on_claimed(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	uint64_t until;

	if (e->phase != PHASE_CLAIMING || !e->claim_inflight)
		return;
	e->claim_inflight = false;
	if (ev->rc == ZOK) {
		/* The write went through the quorum while our node existed:
		 * our session was alive, which is a lease of its own. */
		until = election_lease_until(e, e->claim_sent);
		if (until > e->lease_deadline)
			e->lease_deadline = until;
		election_note_acked(e, e->claim_sent);
		e->term_epoch = (uint64_t)ev->zxid;
		e->taken_epoch = e->term_epoch;
		election_try_lead(e, REASON_CLAIMED, out);
		return;
	}
	if (ev->rc == ZNONODE) {
		/* The check op failed: our node is gone. */
		election_recreate(e, out);
	} else if (ev->rc != ZCONNECTIONLOSS && ev->rc != ZOPERATIONTIMEOUT &&
	    ev->rc != ZSESSIONEXPIRED && ev->rc != ZCLOSING) {
		election_retry(e, out);
	}
}

/*
 * Our node is gone while we still count on it (deleted by hand, say):
 * a leader must stop at once, since a successor may claim at any moment,
 * and anyone must rejoin, or it would wait in a queue it is not in.
 */
static void
election_self_deleted(struct election *e, struct election_actions *out)
{
	if (e->phase == PHASE_RELEASING || e->phase == PHASE_DELETING ||
	    e->phase == PHASE_HOLDING || e->phase == PHASE_STOPPED ||
	    e->node[0] == '\0')
		return;
	election_lose(e, ELECTION_UNKNOWN, REASON_OWN_NODE_DELETED, out);
	election_next_gen(e);
	election_forget_view(e);
	e->term_epoch = 0;
	election_recreate(e, out);
}

/* What the election node says: "id" or "id\nvalue", and its mzxid. */
static void
election_take_claim(struct election *e, const char *data, int datalen,
    int64_t mzxid, int64_t pzxid)
{
	const char *nl;
	size_t idlen;

	if ((uint64_t)mzxid < e->claim_seen)
		return;		/* older than what we know */
	e->claim_seen = (uint64_t)mzxid;
	e->claim_known = false;
	e->claim_has_value = false;
	e->claim_epoch = (uint64_t)mzxid;
	e->claim_pzxid = pzxid;
	e->claim_mine = data != NULL && datalen == e->claim_datalen &&
	    memcmp(data, e->claim_data, (size_t)datalen) == 0;
	if (data == NULL || datalen <= 0 || datalen >= ELECTION_DATA_MAX ||
	    memchr(data, '\0', (size_t)datalen) != NULL)
		return;		/* nobody's claim, or not ours to read */
	nl = memchr(data, '\n', (size_t)datalen);
	idlen = nl != NULL ? (size_t)(nl - data) : (size_t)datalen;
	if (idlen == 0 || idlen >= sizeof(e->claim_id))
		return;
	memcpy(e->claim_id, data, idlen);
	e->claim_id[idlen] = '\0';
	if (nl != NULL && (size_t)datalen - idlen - 1 < sizeof(e->claim_value)) {
		memcpy(e->claim_value, nl + 1, (size_t)datalen - idlen - 1);
		e->claim_value[datalen - idlen - 1] = '\0';
		e->claim_has_value = true;
	}
	e->claim_known = true;
}

/*
 * Named by the leader before us: its release multi checked our node,
 * deleted its own and wrote our claim data into the election node, so that
 * write's mzxid is our epoch. It is that multi if the election node's last
 * data write and last change of children are one transaction (mzxid ==
 * pzxid), after our node was created, with our data, and not an epoch we
 * already led under (rule 3: a new term, a new epoch).
 */
static bool
election_named(const struct election *e)
{
	return e->claim_mine && (int64_t)e->claim_epoch == e->claim_pzxid &&
	    (int64_t)e->claim_epoch > e->node_czxid &&
	    e->claim_epoch > e->spent_epoch;
}

/* In PHASE_TAKEOVER, once a current read of the election node is in. */
static void
election_decide(struct election *e, struct election_actions *out)
{
	if (e->phase != PHASE_TAKEOVER || e->term_epoch != 0 || e->claim_inflight)
		return;
	if (election_named(e)) {
		e->term_epoch = e->claim_epoch;
		e->taken_epoch = e->term_epoch;
		election_try_lead(e, REASON_NAMED, out);
		if (e->phase == PHASE_TAKEOVER && !e->renew_inflight)
			e->next_renew = e->now;	/* earn a lease now */
	} else
		election_claim(e, out);
}

/* A time of our own in [now + T/k, now + 2T/k): spreads the agents' work. */
static uint64_t
election_jitter(const struct election *e, unsigned k)
{
	uint64_t span = (uint64_t)e->timeout_ms / k, h = 14695981039346656037u;
	const char *p;

	if (span == 0)
		return e->now + 1;
	for (p = e->uuid; *p != '\0'; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211u;
	return e->now + span + h % span;
}

/*
 * A new claim means a new term, most often because the lowest node left;
 * followers do not watch it (see election_watch_claim), so one that still
 * counts two or more ahead checks the first of them. That keeps positions
 * current and tells the next in line that it is.
 */
static void
election_check_ahead(struct election *e, struct election_actions *out)
{
	if (e->phase == PHASE_WATCHING && e->nahead >= 2 &&
	    e->session == SESSION_CONNECTED)
		election_push(e, out, ACT_CHECK_AHEAD, e->ahead[0]);
}

static void
election_on_ahead(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_WATCHING || e->nahead < 2 || ev->name == NULL ||
	    strcmp(ev->name, e->ahead[0]) != 0 || ev->rc != ZNONODE)
		return;
	election_drop_ahead(e, ev->name);
	if (e->nahead >= 2)
		election_push(e, out, ACT_CHECK_AHEAD, e->ahead[0]);
	else
		election_schedule_renewals(e, true);	/* next in line now */
}

static void
election_on_claim_data(struct election *e, const struct election_event *ev,
    uint64_t sent, struct election_actions *out)
{
	bool current = ev->gen == e->gen;
	uint64_t before;

	if (ev->rc == ZOK || ev->rc == ZNONODE)
		e->claim_absent = ev->rc == ZNONODE;
	if (ev->rc != ZOK) {
		if (ev->rc == ZNONODE)
			e->claim_owed = true;	/* no watch was set */
		/* The client sets a watch only with a successful reply: a
		 * failed read that carried it left none, and the session's
		 * renewal proves nothing of the claim until one is set again
		 * (on reconnecting, for a leader). */
		if (sent == 0 || sent == e->claim_watch_sent)
			e->claim_watch_sent = 0;
		if (e->parked) {
			/* No node, so no watch: look again in a while (a
			 * partition nobody has joined yet). */
			e->parked_watch = false;
			e->parked_retry = e->now + (uint64_t)e->timeout_ms;
		}
		if (e->phase != PHASE_TAKEOVER || !current)
			return;
		if (ev->rc == ZNONODE)
			election_claim(e, out);	/* rule 9 is the claim's to find */
		else if (ev->rc != ZCONNECTIONLOSS && ev->rc != ZOPERATIONTIMEOUT &&
		    ev->rc != ZSESSIONEXPIRED && ev->rc != ZCLOSING)
			election_retry(e, out);
		/* Connection trouble: the session event, or the next renewal
		 * (which reads the election node too), decides. */
		return;
	}
	before = e->claim_epoch;
	if (sent != 0)
		election_note_acked(e, sent);
	election_take_claim(e, ev->data, ev->datalen, ev->zxid, ev->pzxid);
	if (e->claim_epoch != before && before != 0)
		election_check_ahead(e, out);
	if (e->phase == PHASE_LEADING && e->claim_epoch != e->epoch) {
		/* Someone wrote the election node while we lead: the view
		 * and our term disagree. Stop, and look again. */
		election_lose(e, ELECTION_UNKNOWN, REASON_CLAIM_OVERWRITTEN, out);
		election_next_gen(e);
		election_phase(e, PHASE_LISTING);
		election_push(e, out, ACT_LIST, NULL);
		return;
	}
	if (e->phase == PHASE_TAKEOVER && current) {
		election_decide(e, out);
		return;
	}
	if (e->phase == PHASE_OBSERVING)
		election_push(e, out, ACT_LIST, NULL);	/* recount */
}

static void
election_on_claim_changed(struct election *e, struct election_actions *out)
{
	/* Observers (and parked partitions) only. A read still in flight
	 * was answered after this change (replies and events come in
	 * order): it brings the news. */
	e->parked_watch = false;
	e->claim_watch_sent = 0;	/* fired: set no more */
	if (!election_claim_watched(e) || e->session != SESSION_CONNECTED ||
	    e->claim_reads > 0)
		return;
	election_watch_claim(e, out);
}

static void
election_on_renewed(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	uint64_t until, rtt, after;

	if (!e->renew_inflight)
		return;
	e->renew_inflight = false;
	e->kicked = false;
	if (ev->rc != ZOK) {
		if (ev->rc == ZNONODE)
			election_self_deleted(e, out);	/* our node, or its parent */
		else if (ev->rc == ZNOAUTH) {
			/* Rule 4: it cannot renew, nor prove anything. */
			if (e->role == ELECTION_LEADER)
				election_lose_standing(e,
				    REASON_ACCESS_REFUSED, out);
			election_retry(e, out);
		}
		/* Other errors: the lease runs down, or a session event comes. */
		return;
	}
	if (ev->owner != e->session_id) {
		election_self_deleted(e, out);	/* rule 3: not ours */
		return;
	}
	e->node_czxid = ev->czxid;
	/* The sync went through the ZooKeeper leader and our node was still
	 * there after it: the session was alive then (rule 2). */
	until = election_lease_until(e, e->renew_sent);
	if (until > e->lease_deadline)
		e->lease_deadline = until;
	election_note_acked(e, e->renew_sent);
	/*
	 * The next renewal goes a renewal period after this one was sent (at
	 * once if the answer took longer): a slow round trip then shortens
	 * the wait, not the lease, which is anchored on whichever renewal
	 * was answered R before the next is sent.
	 */
	rtt = ev->now - e->renew_sent;
	after = election_renew_after(e);
	if (!e->lease_naive)
		after = after > rtt ? after - rtt : 0;
	if (e->next_renew != 0 && e->next_renew < e->now + after)
		e->next_renew = e->now + after;
	e->renewals++;
	e->renewal_ms_total += rtt;
	if (rtt > e->renewal_ms_max)
		e->renewal_ms_max = rtt;
	election_take_claim(e, ev->data, ev->datalen, ev->zxid, ev->pzxid);

	if (e->phase == PHASE_LEADING) {
		if (e->claim_epoch != e->epoch) {
			election_lose(e, ELECTION_UNKNOWN,
			    REASON_CLAIM_OVERWRITTEN, out);
			election_next_gen(e);
			election_phase(e, PHASE_LISTING);
			election_push(e, out, ACT_LIST, NULL);
			return;
		}
		if (e->riding_since != 0) {
			/* Rule 1: the same term goes on, same epoch. */
			e->rides_kept++;
			e->riding_since = 0;
			if (e->succ[0] != '\0' && e->succ_datalen < 0)
				election_push(e, out, ACT_READ_SUCCESSOR, e->succ);
		}
		return;
	}
	if (e->phase == PHASE_TAKEOVER && e->term_epoch == 0) {
		/* Sent after the takeover began (an older one is of an older
		 * generation) and read after a sync: as good as the claim read,
		 * should that one be slow or lost. */
		election_decide(e, out);
		return;
	}
	if (e->phase == PHASE_TAKEOVER || e->phase == PHASE_CLAIMING) {
		if (e->term_epoch != 0 && e->claim_epoch != e->term_epoch) {
			/* Named, then written over before we led: look again. */
			e->term_epoch = 0;
			election_next_gen(e);
			election_phase(e, PHASE_LISTING);
			election_push(e, out, ACT_LIST, NULL);
			return;
		}
		election_try_lead(e, e->phase == PHASE_CLAIMING ? REASON_CLAIMED :
		    REASON_NAMED, out);
	}
}

static void
election_on_successor(struct election *e, const struct election_event *ev)
{
	if (ev->name == NULL || strcmp(ev->name, e->succ) != 0)
		return;
	if (ev->rc == ZOK && ev->datalen >= 0 && ev->datalen < ELECTION_DATA_MAX &&
	    (ev->datalen == 0 || memchr(ev->data, '\0', (size_t)ev->datalen) == NULL)) {
		if (ev->datalen > 0)
			memcpy(e->succ_data, ev->data, (size_t)ev->datalen);
		e->succ_datalen = ev->datalen;
	} else if (ev->rc == ZNONODE) {
		e->succ[0] = '\0';	/* gone: the children watch says who next */
		e->succ_datalen = -1;
	}
}

static void
election_on_self(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (ev->name == NULL || strcmp(ev->name, e->node) != 0)
		return;
	if (ev->type == EV_SELF_SET && ev->rc != ZOK && ev->rc != ZNONODE) {
		/* No watch was set (the client sets one only with a
		 * successful reply): set it again on reconnecting. */
		e->self_watched = false;
		e->self_watch_sent = 0;
		return;
	}
	if (ev->type == EV_SELF_SET ? ev->rc == ZNONODE : ev->deleted)
		election_self_deleted(e, out);
	else if (ev->type == EV_SELF_CHANGED && e->session == SESSION_CONNECTED) {
		/* Someone wrote our node: keep watching, nothing else. */
		e->self_watched = false;
		e->self_watch_sent = 0;
		election_watch_self(e, out);
	}
}

/* The release: delete our node; a leader also names its successor. */
static void
election_push_release(struct election *e, struct election_actions *out)
{
	struct election_action *a;

	a = election_push(e, out, ACT_RELEASE, e->node);
	e->release_succ = false;
	if (!e->release_claim)
		return;
	a->write_claim = true;
	if (e->succ[0] != '\0' && e->succ_datalen >= 0) {
		snprintf(a->successor, sizeof(a->successor), "%s", e->succ);
		a->data = e->succ_data;
		a->datalen = e->succ_datalen;
		e->release_succ = true;
	} else {
		a->data = "";	/* nobody left: no leader named */
		a->datalen = 0;
	}
}

/* After the app was told (rule 10): let our node go, or find it first. */
static void
election_let_go(struct election *e, struct election_actions *out)
{
	if (e->session != SESSION_CONNECTED) {
		if (e->stopping) {
			/* Without a connection the node goes with the session. */
			election_phase(e, PHASE_STOPPED);
			election_push(e, out, ACT_EXIT, NULL);
		} else if (e->node[0] != '\0' || e->uuid[0] != '\0')
			election_phase(e, PHASE_DELETING);	/* once reconnected */
		else
			election_phase(e, PHASE_HOLDING);
		return;
	}
	election_phase(e, PHASE_DELETING);
	if (e->node[0] != '\0') {
		election_push_release(e, out);
	} else if (e->uuid[0] != '\0') {
		/* A create may have been applied unheard of (rule 6): find
		 * it by uuid, so that no node of ours blocks the queue. */
		election_push(e, out, ACT_LIST, NULL)->sync = true;
	} else if (e->stopping) {
		election_phase(e, PHASE_STOPPED);
		election_push(e, out, ACT_EXIT, NULL);
	} else
		election_phase(e, PHASE_HOLDING);
}

/* Resign or stop: tell the app first, then let the node go (rule 10). */
static void
election_release(struct election *e, enum election_reason reason,
    struct election_actions *out)
{
	bool leading = e->role == ELECTION_LEADER;

	election_next_gen(e);
	e->next_renew = 0;
	e->term_epoch = 0;
	e->release_claim = leading && e->phase == PHASE_LEADING;
	if (leading) {
		election_phase(e, PHASE_RELEASING);
		election_set_role(e, e->stopping ? ELECTION_UNKNOWN :
		    ELECTION_FOLLOWER, reason, true, out);
		return;
	}
	if (e->stopping)
		election_set_role(e, ELECTION_UNKNOWN, reason, false, out);
	else if (e->role == ELECTION_UNKNOWN && e->session == SESSION_CONNECTED)
		election_set_role(e, ELECTION_FOLLOWER, reason, false, out);
	if (e->app_owed) {
		/*
		 * An earlier term ended without a release (a lapse, a drop
		 * under step_down) and the app is still being told: its
		 * hook runs, its child stops. Our node, which may have
		 * outlived that term, goes only after (rule 10).
		 */
		election_phase(e, PHASE_RELEASING);
		return;
	}
	election_let_go(e, out);
}

static void
election_released(struct election *e, struct election_actions *out)
{
	e->node[0] = '\0';
	e->uuid[0] = '\0';
	e->node_czxid = 0;
	e->self_watched = false;
	e->position = -1;
	e->backoff_ms = 0;
	if (e->stopping) {
		election_phase(e, PHASE_STOPPED);
		election_push(e, out, ACT_EXIT, NULL);
	} else {
		election_phase(e, PHASE_HOLDING);
		if (e->release_succ &&
		    e->hold_until < e->now + ELECTION_RELEASE_LINGER_MS)
			e->hold_until = e->now + ELECTION_RELEASE_LINGER_MS;
	}
}

static void
election_on_released(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	int delete_op = e->release_succ ? 1 : 0;

	if (e->phase != PHASE_DELETING)
		return;
	if (ev->rc == ZOK) {
		election_released(e, out);
		return;
	}
	if (ev->rc == ZNONODE && e->release_succ && ev->failed_op == 0) {
		/* Our successor left meanwhile: let go without naming one. */
		e->succ[0] = '\0';
		e->succ_datalen = -1;
		election_push_release(e, out);
		return;
	}
	if (ev->rc == ZNONODE && ev->failed_op == delete_op) {
		election_released(e, out);	/* ours was gone already */
		return;
	}
	if (ev->rc == ZCONNECTIONLOSS || ev->rc == ZOPERATIONTIMEOUT ||
	    ev->rc == ZSESSIONEXPIRED || ev->rc == ZCLOSING)
		return;		/* reconnecting lets it go again */
	if (e->stopping) {
		election_phase(e, PHASE_STOPPED);	/* it goes with the session */
		election_push(e, out, ACT_EXIT, NULL);
		return;
	}
	if (ev->rc == ZNONODE || ev->rc == ZBADVERSION) {
		/* The election node is gone (rule 9): delete without it. */
		e->release_claim = false;
		election_push_release(e, out);
		return;
	}
	election_backoff(e);
}

/*
 * Rule 2: no renewal came back in time (the process may have been paused,
 * or the connection is gone). Step down; a later term needs a fresh claim
 * and so a higher epoch (rule 3).
 */
static void
election_lapse(struct election *e, struct election_actions *out)
{
	if (e->riding_since != 0)
		e->rides_lost++;
	election_lose_standing(e, e->riding_since != 0 ?
	    REASON_LEASE_LAPSED_DISCONNECTED : REASON_LEASE_LAPSED, out);
	election_next_gen(e);
	e->next_renew = 0;
	if (e->session == SESSION_CONNECTED) {
		election_phase(e, PHASE_LISTING);
		election_push(e, out, ACT_LIST, NULL);
	} else
		election_phase(e, PHASE_IDLE);
}

/* A renewal is due at next_renew only in these states: the tick asks for
 * no other time (or the loop would spin on a deadline it cannot meet). */
static bool
election_may_renew(const struct election *e)
{
	if (e->session_renewal && e->phase == PHASE_LEADING &&
	    e->riding_since == 0)
		return false;	/* the session's renewal does it */
	return e->next_renew != 0 && !e->renew_inflight &&
	    e->session == SESSION_CONNECTED && e->node[0] != '\0' &&
	    (e->phase == PHASE_LEADING || e->phase == PHASE_TAKEOVER ||
	    e->phase == PHASE_CLAIMING || e->phase == PHASE_WATCHING);
}

/* A follower waiting in the queue, or resigned, that does not renew. */
static bool
election_polling(const struct election *e)
{
	return e->candidate && !e->parked && e->session == SESSION_CONNECTED &&
	    e->poll_at != 0 && e->next_renew == 0 &&
	    (e->phase == PHASE_WATCHING || e->phase == PHASE_HOLDING);
}

/*
 * No lease can be earned on this connection: through an observer, or with
 * a timeout below twice zookeeper.tick_time (doc/design.md, The lease).
 */
static bool
election_barred(const struct election *e)
{
	return e->candidate && e->session == SESSION_CONNECTED &&
	    (election_no_lease_here(e) ||
	    (!e->lease_naive && e->timeout_ms > 0 && !e->shape.ok));
}

/* Whether we need a lease (leading, taking over, next in line), or wait
 * out of the queue for a server to earn one through. */
static bool
election_wants_lease(const struct election *e)
{
	return e->candidate && (e->off_queue || e->phase == PHASE_LEADING ||
	    e->phase == PHASE_TAKEOVER || e->phase == PHASE_CLAIMING ||
	    (e->phase == PHASE_WATCHING && e->next_renew != 0));
}

/* When the next move off an observer is due, or 0. */
static uint64_t
election_observer_kick_at(const struct election *e)
{
	if (!election_no_lease_here(e) || e->session != SESSION_CONNECTED ||
	    !election_wants_lease(e))
		return 0;
	if (e->last_observer_kick == 0)
		return e->now;
	return e->last_observer_kick + (uint64_t)e->timeout_ms;
}

/*
 * An observer behind an ObserverMaster reports our touches to a follower,
 * which reports them to the ZooKeeper leader a report later: the lease's
 * anchor would need a whole tickTime, not 3/5 of one. Nothing is earned
 * through it (election_lease_until). A candidate waits out of the queue,
 * so that it blocks nobody (it could claim there, but never lead): it lets
 * its node go, after the app has heard of any loss (rule 10), and joins
 * again once a server says it votes. A leader rides on within its lease.
 * Whoever needs a lease drops the connection, at most once per T, so that
 * the client tries another server (with only observers in its list, the
 * agent never leads, and says so).
 */
static void
election_leave_observer(struct election *e, struct election_actions *out)
{
	uint64_t at;

	if (election_barred(e) && !e->stopping && !e->off_queue &&
	    e->phase != PHASE_LEADING && e->phase != PHASE_RELEASING &&
	    e->phase != PHASE_DELETING && e->phase != PHASE_HOLDING &&
	    e->phase != PHASE_STOPPED) {
		e->off_queue = true;
		election_release(e, election_no_lease_here(e) ?
		    REASON_OBSERVER_SERVER : REASON_NO_LEASE, out);
	}
	at = election_observer_kick_at(e);
	if (at == 0 || e->now < at)
		return;
	e->last_observer_kick = e->now;
	e->kicks++;
	election_push(e, out, ACT_KICK, election_server_name(e->server));
}

static void
election_on_server(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->session != SESSION_CONNECTED)
		return;
	e->server = ev->server;
	/* The tick's bound only grows while the agent runs: a server that
	 * gives a smaller minSessionTimeout may share an ensemble with one
	 * whose tickTime the larger one bounds. */
	if (ev->min_timeout_ms > e->min_timeout_ms) {
		e->min_timeout_ms = ev->min_timeout_ms;
		if (e->timeout_ms > 0)
			election_set_timeout(e, e->timeout_ms);
	}
	if (!election_barred(e) && e->off_queue) {
		/* A lease can be earned here: join again. */
		e->off_queue = false;
		if (e->phase == PHASE_HOLDING && e->now >= e->hold_until) {
			election_phase(e, PHASE_IDLE);
			election_rejoin(e, out);
		}
		return;
	}
	election_leave_observer(e, out);
}

static void
election_on_tick(struct election *e, struct election_actions *out)
{
	uint64_t now = e->now, every = election_renew_every(e);
	uint64_t sixth = election_kick_after(e);

	election_leave_observer(e, out);
	if (e->phase == PHASE_LEADING) {
		if (now >= e->lease_deadline) {
			election_lapse(e, out);
			return;
		}
		if (e->riding_since != 0 && e->session != SESSION_CONNECTED) {
			/* A connection attempt that hangs (a stopped server)
			 * would take the client 2T/3 to give up. */
			if (now >= e->last_kick + sixth) {
				e->last_kick = now;
				e->kicks++;
				election_push(e, out, ACT_KICK, NULL);
			}
			return;
		}
		if (e->renew_inflight && !e->kicked &&
		    now >= election_stalled_since(e) + sixth) {
			/* The renewal hangs, and nothing else was answered
			 * meanwhile: the server may be stopped or cut off.
			 * Move to another one while the lease lasts. (A
			 * renewal queued behind our own requests, on a server
			 * that answers them, is not stalled.) */
			e->kicked = true;
			e->kicks++;
			election_push(e, out, ACT_KICK, NULL);
		}
	}
	if (now >= e->next_renew && election_may_renew(e)) {
		e->renew_inflight = true;
		e->renew_sent = now;
		e->kicked = false;
		e->next_renew = now + every;
		election_push(e, out, ACT_RENEW, e->node);
		return;
	}
	if (election_polling(e) && now >= e->poll_at) {
		/* A follower's look at the claim (renewals read it too). */
		e->poll_at = now + (uint64_t)e->timeout_ms / 6;
		if (e->claim_reads == 0) {
			election_watch_claim(e, out);
			return;
		}
	}
	if (e->phase == PHASE_HOLDING && now >= e->hold_until &&
	    !e->off_queue && !e->parked) {
		election_phase(e, PHASE_IDLE);
		election_rejoin(e, out);
		return;
	}
	if (e->retry_at != 0 && now >= e->retry_at) {
		e->retry_at = 0;
		if (e->session == SESSION_AUTH_FAILED) {
			e->session = SESSION_CONNECTING;
			election_push(e, out, ACT_NEW_SESSION, NULL);
			return;
		}
		if (e->phase == PHASE_DELETING && e->session == SESSION_CONNECTED)
			election_let_go(e, out);
		else if (e->phase == PHASE_IDLE)
			election_rejoin(e, out);
	}
}

static void
election_on_resign(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	uint64_t hold = ev->hold_ms < HOLD_MAX_MS ? ev->hold_ms : HOLD_MAX_MS;

	if (e->stopping || !e->candidate)
		return;
	if (e->now + hold > e->hold_until)
		e->hold_until = e->now + hold;
	/* Already letting go: the longer hold is all that changes. */
	if (e->phase == PHASE_RELEASING || e->phase == PHASE_DELETING ||
	    e->phase == PHASE_HOLDING)
		return;
	election_release(e, REASON_RESIGNED, out);
}

/* Partitions: the session's renewal was sent now (see election.h). */
void
election_session_sent(struct election *e, uint64_t now)
{
	e->now = now;
	election_note_sent(e);
}

/*
 * Partitions (doc/design.md, "Partitions", the session's renewal): a sync
 * sent at s and answered on this session's connection proves the session
 * alive at the ZooKeeper leader after s, as a leader's own renewal does
 * (the fleet passes our session id as the owner). That our partition node
 * and the claim stood too is proven by the watches on them: set before s
 * on this session, any change to either before the sync would have been
 * delivered before this answer (ZooKeeper sends a watch's event before the
 * reply to any later request), and would have ended the term or cleared
 * the watch's time.
 */
static void
election_on_session_renewed(struct election *e,
    const struct election_event *ev)
{
	uint64_t s = ev->sent, until;
	int i;

	if (!e->session_renewal || e->phase != PHASE_LEADING ||
	    e->session != SESSION_CONNECTED || e->riding_since != 0 ||
	    ev->rc != ZOK || ev->owner != e->session_id || ev->owner == 0)
		return;
	for (i = 0; i < e->nsent; i++)
		if (e->sent[i] == s)
			break;
	if (i == e->nsent)
		return;		/* not sent on this connection as we know it */
	election_note_acked(e, s);
	if (e->claim_watch_sent == 0 || e->claim_watch_sent >= s ||
	    e->self_watch_sent == 0 || e->self_watch_sent >= s ||
	    !e->self_watched || e->claim_epoch != e->epoch)
		return;
	until = election_lease_until(e, s);
	if (until > e->lease_deadline)
		e->lease_deadline = until;
	e->renewals++;
}

/*
 * A partition's election (doc/design.md, "Partitions"): the member listing
 * says whether we may queue here. Assigned, join (at once, or once a hold
 * ends); not assigned, nothing happens at once: election_parked_step lets
 * go when it is safe to.
 */
static void
election_on_assign(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->stopping || ev->assigned == !e->parked)
		return;
	e->parked = !ev->assigned;
	if (e->parked || e->phase != PHASE_HOLDING || e->off_queue ||
	    e->now < e->hold_until)
		return;
	election_phase(e, PHASE_IDLE);
	election_rejoin(e, out);
}

/*
 * After every step of a parked partition: a leader releases, naming its
 * successor, once one is queued and its data read (so that the partition
 * changes hands in one write, as a graceful handover does); a follower in
 * the queue leaves it; one out of it keeps a watch on the claim, to report
 * who leads.
 */
static void
election_parked_step(struct election *e, struct election_actions *out)
{
	if (!e->parked || e->stopping || e->session != SESSION_CONNECTED)
		return;
	if (e->phase == PHASE_LEADING && e->role == ELECTION_LEADER &&
	    e->succ[0] != '\0' && e->succ_datalen >= 0) {
		/* With on_follower hooks, one at a time: they run one at a
		 * time, and a partition stays owned until its turn (fleet.c
		 * wakes the next when one is done). */
		if (e->releasing != NULL && *e->releasing > 0)
			return;
		election_release(e, REASON_REASSIGNED, out);
		return;
	}
	if (e->phase == PHASE_WATCHING ||
	    (e->phase == PHASE_LISTING && e->node[0] != '\0')) {
		election_release(e, REASON_NOT_ASSIGNED, out);
		return;
	}
	if (e->phase == PHASE_HOLDING && !e->parked_watch &&
	    e->claim_reads == 0 && e->now >= e->parked_retry)
		election_watch_claim(e, out);
}

static void
election_on_stop(struct election *e, struct election_actions *out)
{
	if (e->stopping)
		return;
	e->stopping = true;
	if (e->phase == PHASE_RELEASING) {
		/* Finish the release under way, then exit (rule 10). */
		election_set_role(e, ELECTION_UNKNOWN, REASON_STOPPING, false, out);
		return;
	}
	if (e->phase == PHASE_DELETING) {
		election_set_role(e, ELECTION_UNKNOWN, REASON_STOPPING, false, out);
		if (e->session != SESSION_CONNECTED)
			election_let_go(e, out);	/* exits */
		return;
	}
	election_release(e, REASON_STOPPING, out);
}

static bool
election_is_current(const struct election *e, const struct election_event *ev)
{
	switch (ev->type) {
	case EV_SESSION:
	case EV_TICK:
	case EV_RESIGN:
	case EV_STOP:
	case EV_NOTIFIED:
	case EV_SERVER:		/* the driver sends it for this connection only */
	case EV_ASSIGN:
	case EV_SESSION_RENEWED:	/* checked against the ring */
	case EV_PRED_CHANGED:
	case EV_SELF_CHANGED:
	case EV_CLAIM_CHANGED:
	case EV_CHILDREN_CHANGED:
	case EV_CLAIM_DATA:
		/* Watches (checked by node name) and reads of the view. */
		return true;
	default:
		return ev->gen == e->gen;
	}
}

/*
 * Replies come in the order the reads were sent, so the oldest read in
 * flight is the one answered. (If a failed read of a closed connection is
 * counted against a newer one, an older send time is credited: the safe
 * way round.)
 */
static uint64_t
election_pop_claim_read(struct election *e)
{
	uint64_t sent;

	if (e->claim_reads <= 0)
		return 0;
	sent = e->claim_read_sent[0];
	memmove(&e->claim_read_sent[0], &e->claim_read_sent[1],
	    (ELECTION_READS_MAX - 1) * sizeof(e->claim_read_sent[0]));
	e->claim_read_sent[ELECTION_READS_MAX - 1] = 0;	/* not kept: unknown */
	e->claim_reads--;
	return sent;
}

static void
election_dispatch(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	uint64_t claim_sent = 0;

	if (e->phase == PHASE_STOPPED)
		return;
	if (ev->type == EV_CLAIM_DATA)
		claim_sent = election_pop_claim_read(e);
	/* A lease that ran out ends the term before anything else is
	 * applied: a reply older than the deadline must not revive it. */
	if (e->phase == PHASE_LEADING && ev->type != EV_TICK &&
	    e->now >= e->lease_deadline)
		election_lapse(e, out);
	/* Rule 14: NOAUTH on the election path until an answer says otherwise. */
	if (ev->rc == ZNOAUTH)
		e->no_access = true;
	else if (ev->rc == ZOK && (ev->type == EV_CHILDREN ||
	    ev->type == EV_CLAIM_DATA || ev->type == EV_RENEWED ||
	    ev->type == EV_CLAIMED || ev->type == EV_CREATED))
		e->no_access = false;
	if (!election_is_current(e, ev))
		return;		/* rule 7 */

	switch (ev->type) {
	case EV_SESSION:
		election_on_session(e, ev, out);
		break;
	case EV_PARENT_CREATED:
		election_on_parent(e, ev, out);
		break;
	case EV_CREATED:
		election_on_created(e, ev, out);
		break;
	case EV_CHILDREN:
		election_on_children(e, ev, out);
		break;
	case EV_PRED_SET:
		election_on_pred_set(e, ev, out);
		break;
	case EV_PRED_CHANGED:
		election_on_pred_changed(e, ev, out);
		break;
	case EV_OWNER:
		election_on_owner(e, ev, out);
		break;
	case EV_CLAIMED:
		election_on_claimed(e, ev, out);
		break;
	case EV_RENEWED:
		election_on_renewed(e, ev, out);
		break;
	case EV_CLAIM_DATA:
		election_on_claim_data(e, ev, claim_sent, out);
		break;
	case EV_CLAIM_CHANGED:
		election_on_claim_changed(e, out);
		break;
	case EV_SUCCESSOR_DATA:
		election_on_successor(e, ev);
		break;
	case EV_RELEASED:
		election_on_released(e, ev, out);
		break;
	case EV_AHEAD_CHECKED:
		election_on_ahead(e, ev, out);
		break;
	case EV_SELF_SET:
	case EV_SELF_CHANGED:
		election_on_self(e, ev, out);
		break;
	case EV_CHILDREN_CHANGED:
		if (e->phase != PHASE_LEADING)
			break;
		e->children_owed = true;
		if (e->session == SESSION_CONNECTED)
			election_push(e, out, ACT_WATCH_CHILDREN, NULL);
		break;
	case EV_TICK:
		election_on_tick(e, out);
		break;
	case EV_RESIGN:
		election_on_resign(e, ev, out);
		break;
	case EV_STOP:
		election_on_stop(e, out);
		break;
	case EV_NOTIFIED:
		/* An acknowledgement queued before a later loss does not
		 * cover it: that one's comes once the app has heard of it. */
		if (ev->told < e->losses)
			break;
		e->app_owed = false;
		if (e->phase == PHASE_RELEASING)
			election_let_go(e, out);
		break;
	case EV_SERVER:
		election_on_server(e, ev, out);
		break;
	case EV_ASSIGN:
		election_on_assign(e, ev, out);
		break;
	case EV_SESSION_RENEWED:
		election_on_session_renewed(e, ev);
		break;
	}
	election_parked_step(e, out);
}

void
election_step(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	struct election_report r;
	bool leading = e->role == ELECTION_LEADER;

	e->now = ev->now;
	e->ev_queued = ev->queued;
	e->trail_n = 0;
	election_dispatch(e, ev, out);
	/* The session's renewal answered, and the term goes on: only its
	 * lease moved, which the report does not hold. The step a
	 * partitioned agent takes most, for every partition it leads at
	 * every renewal: the report is not built again. */
	if (ev->type == EV_SESSION_RENEWED && leading && out->n == 0 &&
	    e->role == ELECTION_LEADER && e->phase == PHASE_LEADING)
		return;
	election_report(e, &r);
	if (memcmp(&r, &e->last, sizeof(r)) != 0) {
		e->index++;
		e->last = r;
	}
}

void
election_free(struct election *e)
{
	election_set_ahead(e, NULL, 0);
}

void
election_glance(const struct election *e, struct election_glance *g)
{
	size_t n = strnlen(e->stranger, sizeof(g->stranger) - 1);

	g->role = e->role;
	g->phase = e->phase;
	g->session = e->session;
	g->bar = e->last.bar;
	g->timeout_ms = e->timeout_ms;
	g->strangers = e->strangers;
	g->epoch = e->epoch;
	g->lease_deadline = e->lease_deadline;
	g->riding_since = e->riding_since;
	g->index = e->index;
	memcpy(g->stranger, e->stranger, n);
	g->stranger[n] = '\0';
}

enum election_role
election_role_at(const struct election *e, uint64_t now)
{
	if (e->role == ELECTION_LEADER && now >= e->lease_deadline)
		return ELECTION_UNKNOWN;
	return e->role;
}

uint64_t
election_lease_remaining(const struct election *e, uint64_t now)
{
	if (e->role != ELECTION_LEADER || now >= e->lease_deadline)
		return 0;
	return e->lease_deadline - now;
}

/*
 * How old the candidate count is at now, in ms: 0 for a connected leader,
 * whose watch on the queue keeps it current; -1 before the first count.
 * Followers count when they list (joining, or when a node ahead of them
 * is found missing), not as nodes join behind them: a watch on the queue
 * would wake them all at every change (doc/design.md, "Targets": scale).
 */
int64_t
election_candidates_age(const struct election *e, uint64_t now)
{
	if (!e->candidates_counted)
		return -1;
	if (e->phase == PHASE_LEADING && e->session == SESSION_CONNECTED)
		return 0;
	return now > e->candidates_at ? (int64_t)(now - e->candidates_at) : 0;
}

uint64_t
election_hold_remaining(const struct election *e, uint64_t now)
{
	if (e->phase != PHASE_HOLDING || now >= e->hold_until)
		return 0;
	return e->hold_until - now;
}

/*
 * An id names one agent (stored as node data: doc/design.md, "Nodes in
 * ZooKeeper"); two agents
 * configured with the same one are a mistake we can see in two places: a
 * claim with our id that is no term of ours (not one we led under, nor one
 * we were named or claimed under), and, for the leader, a successor whose node carries
 * our id. The first is also what this agent's previous run leaves until
 * ZooKeeper expires its session. Either way the claim names the leader.
 */
static bool
election_claim_foreign(const struct election *e)
{
	/* Partitions tell a twin by the members (fleet.c), exactly: a claim
	 * outlives the release that left no successor, so each partition
	 * our previous run led would look like one. */
	if (e->session_renewal)
		return false;
	return e->claim_known && e->role != ELECTION_LEADER &&
	    strcmp(e->claim_id, e->id) == 0 && e->claim_epoch > e->spent_epoch &&
	    e->claim_epoch != e->taken_epoch && e->phase != PHASE_TAKEOVER && e->phase != PHASE_CLAIMING &&
	    e->phase != PHASE_LEADING;
}

static bool
election_successor_twin(const struct election *e)
{
	size_t idlen = strlen(e->id);

	return e->role == ELECTION_LEADER && e->succ[0] != '\0' &&
	    e->succ_datalen >= (int)idlen && memcmp(e->succ_data, e->id,
	    idlen) == 0 && (e->succ_datalen == (int)idlen ||
	    e->succ_data[idlen] == '\n');
}

void
election_report(const struct election *e, struct election_report *r)
{
	const char *nl;

	memset(r, 0, sizeof(*r));
	r->role = e->role;
	r->session = e->session;
	r->timeout_ms = e->timeout_ms;
	r->epoch = e->role == ELECTION_LEADER ? e->epoch : 0;
	r->candidates = e->candidates;
	r->position = e->position;
	r->holding = e->phase == PHASE_HOLDING;
	r->server = e->session == SESSION_CONNECTED ? e->server : SERVER_UNKNOWN;
	if (!e->candidate || e->role == ELECTION_LEADER)
		r->bar = BAR_NONE;
	else if (e->epoch_behind)
		r->bar = BAR_EPOCH_BACKWARDS;
	else if (!e->lease_naive && e->timeout_ms > 0 && !e->shape.ok)
		r->bar = BAR_SHORT_TIMEOUT;
	else if (e->server == SERVER_OBSERVER &&
	    e->session == SESSION_CONNECTED)
		r->bar = BAR_OBSERVER;
	else if (e->server == SERVER_UNIDENTIFIED &&
	    e->session == SESSION_CONNECTED)
		r->bar = BAR_UNIDENTIFIED;
	else if (e->no_chroot)
		r->bar = BAR_NO_CHROOT;
	else if (e->no_access)
		r->bar = BAR_NO_ACCESS;
	else if (e->slow_rtt != 0) {
		r->bar = BAR_SLOW_ZOOKEEPER;
		r->slow_rtt_ms = e->slow_rtt;
	}
	r->duplicate_id = election_claim_foreign(e) || election_successor_twin(e);
	r->tick_bound_ms = e->shape.X;
	r->min_timeout_ms = e->min_timeout_ms;
	if ((uint64_t)e->tick_ms >= election_tick_bound(e) && e->tick_ms > 0)
		r->tick_from = TICK_STATED;
	else if (e->min_timeout_ms > 0)
		r->tick_from = TICK_LEARNED;
	else
		r->tick_from = TICK_ASSUMED;
	r->tick_understated = e->tick_ms > 0 &&
	    (uint64_t)e->tick_ms < election_tick_bound(e);
	if (e->role == ELECTION_LEADER) {
		r->has_leader = true;
		snprintf(r->leader_id, sizeof(r->leader_id), "%s", e->id);
		r->leader_epoch = e->epoch;
		nl = strchr(e->claim_data, '\n');
		if (nl != NULL) {
			r->has_value = true;
			snprintf(r->leader_value, sizeof(r->leader_value), "%s",
			    nl + 1);
		}
	} else if (e->session == SESSION_CONNECTED && e->claim_known &&
	    (!e->claim_mine || election_claim_foreign(e))) {
		/* The leader named by the last claim we saw (doc/design.md "Followers and observers"). */
		r->has_leader = true;
		snprintf(r->leader_id, sizeof(r->leader_id), "%s", e->claim_id);
		r->leader_epoch = e->claim_epoch;
		if (e->claim_has_value) {
			r->has_value = true;
			snprintf(r->leader_value, sizeof(r->leader_value), "%s",
			    e->claim_value);
		}
	}
}

uint64_t
election_next_tick(const struct election *e)
{
	uint64_t t = 0, sixth = election_kick_after(e);

#define EARLIEST(x) do { if ((x) != 0 && (t == 0 || (x) < t)) t = (x); } while (0)
	if (e->phase == PHASE_LEADING) {
		EARLIEST(e->lease_deadline);
		if (e->riding_since != 0 && e->session != SESSION_CONNECTED)
			EARLIEST(e->last_kick + sixth);
		else if (e->renew_inflight && !e->kicked)
			EARLIEST(election_stalled_since(e) + sixth);
	}
	if (election_may_renew(e))
		EARLIEST(e->next_renew);
	if (e->phase == PHASE_HOLDING && !e->off_queue && !e->parked)
		EARLIEST(e->hold_until == 0 ? 1 : e->hold_until);
	if (election_polling(e))
		EARLIEST(e->poll_at);
	/* As election_parked_step: not while a read of the claim is out
	 * (its answer steps the election; a tick would find nothing to do,
	 * and come again at once: a busy loop until the answer). */
	if (e->parked && e->phase == PHASE_HOLDING && !e->parked_watch &&
	    e->claim_reads == 0 && e->session == SESSION_CONNECTED &&
	    !e->stopping)
		EARLIEST(e->parked_retry == 0 ? 1 : e->parked_retry);
	EARLIEST(election_observer_kick_at(e));
	EARLIEST(e->retry_at);
#undef EARLIEST
	return t;
}
