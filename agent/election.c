/* SPDX-License-Identifier: MIT */
/*
 * The election state machine. It decides, from what ZooKeeper told the
 * driver, what to ask of ZooKeeper next and what this agent may report.
 * It keeps one promise above all: the role is "leader" only after a claim
 * write proved, through the quorum, that our node was the lowest, and only
 * while the lease taken from the last acknowledged round trip lasts.
 * Everything here is deterministic; the unit tests drive it with tables.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include "election.h"

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	5000
#define LATCH_TAG	"latch-"

static void	election_rejoin(struct election *, struct election_actions *);
static void	election_create(struct election *, struct election_actions *);
static void	election_lose(struct election *, enum election_role, const char *,
		    struct election_actions *);
static void	election_set_ahead(struct election *, char *const *, int);
static void	election_next_lowest(struct election *, struct election_actions *);

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
		"watching", "claiming", "leading", "releasing", "deleting",
		"holding", "observing", "stopped",
	};
	return names[p];
}

const char *
election_action_name(enum election_action_type t)
{
	static const char *const names[] = {
		"create_parent", "create", "list", "watch_children",
		"watch_pred", "get_owner",
		"claim", "renew", "watch_claim", "watch_lowest", "watch_self",
		"delete",
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

static struct election_action *
election_push(struct election_actions *out, enum election_action_type type,
    const char *name)
{
	struct election_action *a;

	if (out->n >= ELECTION_ACTIONS_MAX)
		abort();	/* a broken invariant: no step emits this many */
	a = &out->a[out->n++];
	memset(a, 0, sizeof(*a));
	a->type = type;
	if (name != NULL)
		snprintf(a->name, sizeof(a->name), "%s", name);
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
    const char *reason, bool wait, struct election_actions *out)
{
	struct election_action *a;

	if (e->role == role)
		return;
	a = election_push(out, ACT_NOTIFY, NULL);
	a->from = e->role;
	a->to = role;
	a->reason = reason;
	a->wait = wait;
	if (e->role == ELECTION_LEADER)
		e->epoch = 0;
	e->role = role;
}

/*
 * (Re)arms the data watch on the election node. getData sets no watch on a
 * node that does not exist, so until a read succeeds the watch is owed and
 * is asked for again as soon as the node is known to exist.
 */
static void
election_watch_claim(struct election *e, struct election_actions *out)
{
	e->claim_watch_armed = true;
	election_push(out, ACT_WATCH_CLAIM, NULL);
}

static void
election_new_uuid(struct election *e)
{
	e->uuid_gen(e->uuid, e->uuid_arg);
	e->node[0] = '\0';
}

static void
election_forget_view(struct election *e)
{
	election_set_ahead(e, NULL, 0);
	e->claim_known = false;
	e->lowest[0] = '\0';
	e->lowest_known = false;
	e->candidates = 0;
	e->position = -1;
}

static void
election_retry(struct election *e, uint64_t now, struct election_actions *out)
{
	/* Whatever failed, a leader is not sure any more (rule 4). */
	if (e->role == ELECTION_LEADER)
		election_lose(e, ELECTION_UNKNOWN, "request failed", out);
	e->backoff_ms = e->backoff_ms == 0 ? BACKOFF_MIN_MS : e->backoff_ms * 2;
	if (e->backoff_ms > BACKOFF_MAX_MS)
		e->backoff_ms = BACKOFF_MAX_MS;
	e->retry_at = now + e->backoff_ms;
	e->phase = PHASE_IDLE;
}

/* Rule 7: anything begun before this point is void. */
static void
election_next_gen(struct election *e)
{
	e->gen++;
	e->renew_inflight = false;
	e->retry_at = 0;
}

void
election_init(struct election *e, const char *id, bool candidate)
{
	memset(e, 0, sizeof(*e));
	snprintf(e->id, sizeof(e->id), "%s", id);
	e->candidate = candidate;
	e->lease_num = 2;
	e->lease_den = 3;
	e->session = SESSION_CONNECTING;
	e->phase = PHASE_IDLE;
	e->role = ELECTION_UNKNOWN;
	e->position = -1;
	e->gen = 1;
	e->last.position = -1;
}

/* Leadership ends here for every reason but a graceful release. */
static void
election_lose(struct election *e, enum election_role role, const char *reason,
    struct election_actions *out)
{
	election_set_role(e, role, reason, false, out);
	e->renew_inflight = false;
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

	switch (ev->session) {
	case SESSION_CONNECTED:
		/*
		 * Same session after a reconnect, or a fresh one. Either way
		 * our view is stale: list again. A node we knew stays ours
		 * only within the same session (rule 6 finds it by uuid).
		 */
		if (e->session_id != 0 && e->session_id != ev->session_id) {
			election_lose(e, ELECTION_UNKNOWN, "new session", out);
			e->node[0] = '\0';
			e->uuid[0] = '\0';
		}
		e->session_id = ev->session_id;
		e->timeout_ms = ev->timeout_ms;
		e->backoff_ms = 0;
		election_forget_view(e);
		if (e->phase == PHASE_DELETING && e->node[0] != '\0') {
			/* A resign or stop was cut short: finish it. */
			election_push(out, ACT_DELETE, e->node);
			return;
		}
		if (e->stopping) {
			e->phase = PHASE_STOPPED;
			election_push(out, ACT_EXIT, NULL);
			return;
		}
		election_watch_claim(e, out);
		if (e->phase == PHASE_HOLDING || e->phase == PHASE_RELEASING)
			return;
		if (e->phase == PHASE_DELETING)
			e->phase = PHASE_HOLDING;
		else
			election_rejoin(e, out);
		return;
	case SESSION_EXPIRED:
		/* Rule 8: nothing of the old session survives. */
		election_lose(e, ELECTION_UNKNOWN, "session expired", out);
		e->session_id = 0;
		e->uuid[0] = '\0';
		e->node[0] = '\0';
		election_forget_view(e);
		if (e->stopping) {
			e->phase = PHASE_STOPPED;
			election_push(out, ACT_EXIT, NULL);
			return;
		}
		/* A resign's hold outlives the session; the node did not. */
		if (e->phase == PHASE_DELETING || e->phase == PHASE_RELEASING)
			e->phase = PHASE_HOLDING;
		else if (e->phase != PHASE_HOLDING)
			e->phase = PHASE_IDLE;
		e->session = SESSION_CONNECTING;
		election_push(out, ACT_NEW_SESSION, NULL);
		return;
	case SESSION_AUTH_FAILED:
		/* Rule 12; the handle is dead, retry with a new one. */
		election_lose(e, ELECTION_UNKNOWN, "authentication failed", out);
		e->session_id = 0;
		e->uuid[0] = '\0';
		e->node[0] = '\0';
		election_forget_view(e);
		e->phase = PHASE_IDLE;
		e->retry_at = ev->now + BACKOFF_MAX_MS;
		return;
	default:
		/*
		 * Rule 1: connection lost (or read-only, rule 12). We cannot
		 * know whether our session survives; say so at once. Expiry
		 * is only learnt after reconnecting, too late to act on.
		 */
		election_lose(e, ELECTION_UNKNOWN,
		    ev->session == SESSION_READONLY ? "read-only server" :
		    "connection lost", out);
		if (e->phase != PHASE_HOLDING && e->phase != PHASE_RELEASING &&
		    e->phase != PHASE_DELETING)
			e->phase = PHASE_IDLE;
		/* Stopping without a connection: the node goes with the session. */
		if (e->stopping && e->phase != PHASE_RELEASING) {
			e->phase = PHASE_STOPPED;
			election_push(out, ACT_EXIT, NULL);
		}
		return;
	}
}

/* Joins (create), or re-evaluates our place (list). */
static void
election_rejoin(struct election *e, struct election_actions *out)
{
	if (e->session != SESSION_CONNECTED)
		return;
	if (!e->candidate) {
		e->phase = PHASE_OBSERVING;
		election_push(out, ACT_LIST, NULL);
		return;
	}
	/*
	 * Rule 6: with a uuid but no node name, a create may have succeeded
	 * without our hearing of it; listing finds it (or not) by uuid.
	 */
	if (e->uuid[0] == '\0') {
		election_create(e, out);
		return;
	}
	e->phase = PHASE_LISTING;
	election_push(out, ACT_LIST, NULL);
}

static void
election_create(struct election *e, struct election_actions *out)
{
	if (e->uuid[0] == '\0')
		election_new_uuid(e);
	e->node[0] = '\0';
	e->phase = PHASE_CREATING;
	election_push(out, ACT_CREATE, NULL);
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
		e->phase = PHASE_LISTING;
		election_push(out, ACT_LIST, NULL);
	} else if (ev->rc == ZOK && ev->name != NULL) {
		slash = strrchr(ev->name, '/');
		snprintf(e->node, sizeof(e->node), "%s",
		    slash != NULL ? slash + 1 : ev->name);
		e->backoff_ms = 0;
		e->phase = PHASE_LISTING;
		election_push(out, ACT_LIST, NULL);
	} else if (ev->rc == ZNONODE) {
		/* Rule 9: the election path is gone; make it again. */
		e->phase = PHASE_PARENT;
		election_push(out, ACT_CREATE_PARENT, NULL);
	} else if (ev->rc == ZCONNECTIONLOSS || ev->rc == ZOPERATIONTIMEOUT) {
		/* Outcome unknown (rule 6): reconnecting will list first. */
		e->phase = PHASE_IDLE;
	} else
		election_retry(e, ev->now, out);
}

static void
election_on_parent(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_PARENT)
		return;
	if (ev->rc == ZOK || ev->rc == ZNODEEXISTS) {
		election_watch_claim(e, out);
		if (e->candidate)
			election_create(e, out);
		else {
			e->phase = PHASE_OBSERVING;
			election_push(out, ACT_LIST, NULL);
		}
	} else
		election_retry(e, ev->now, out);
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
			if (e->position > 0)
				e->position--;
			if (e->candidates > 0)
				e->candidates--;
			return;
		}
}

/* The leader as everyone reports it: only a claim by the lowest counts. */
static void
election_update_lowest(struct election *e, const char *lowest,
    struct election_actions *out)
{
	if (lowest == NULL) {
		e->lowest[0] = '\0';
		e->lowest_known = false;
		return;
	}
	if (strcmp(e->lowest, lowest) == 0 && e->lowest_known)
		return;
	snprintf(e->lowest, sizeof(e->lowest), "%s", lowest);
	e->lowest_known = false;
	election_push(out, ACT_WATCH_LOWEST, lowest);
}

/* The first node ahead of us becomes the one to read and watch; with
 * none left, list again (we may be next, or the queue changed). */
static void
election_next_lowest(struct election *e, struct election_actions *out)
{
	if (e->nahead > 0)
		election_update_lowest(e, e->ahead[0], out);
	else if (e->phase == PHASE_OBSERVING)
		election_push(out, ACT_LIST, NULL);
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
			election_set_role(e, ELECTION_OBSERVER, "observing", false, out);
		return;
	}

	if (e->node[0] == '\0') {
		/* Rule 6: was our create applied after all? */
		snprintf(uuidtag, sizeof(uuidtag), "_c_%s-", e->uuid);
		for (i = 0; i < n && found == NULL; i++)
			if (strncmp(sorted[i], uuidtag, strlen(uuidtag)) == 0)
				found = sorted[i];
		if (found != NULL) {
			e->phase = PHASE_ADOPTING;
			election_push(out, ACT_GET_OWNER, found);
		} else
			election_create(e, out);
		return;
	}

	for (i = 0; i < n; i++)
		if (strcmp(sorted[i], e->node) == 0)
			mine = i;
	if (mine < 0) {
		/* Our node is gone (deleted by hand?): rejoin at the back. */
		election_lose(e, ELECTION_UNKNOWN, "own node vanished", out);
		e->position = -1;
		election_new_uuid(e);
		election_create(e, out);
		return;
	}
	e->position = mine;
	e->backoff_ms = 0;
	if (e->self_watch_gen != e->gen) {
		e->self_watch_gen = e->gen;
		election_push(out, ACT_WATCH_SELF, e->node);
	}
	if (mine == 0) {
		if (e->phase == PHASE_LEADING)
			return;
		/* Rule 3: the node is ours (created or adopted in this
		 * session); a fresh claim write starts the term. */
		e->phase = PHASE_CLAIMING;
		election_push(out, ACT_CLAIM, e->node);
		return;
	}
	/* Rule 4: not the lowest, so not the leader. */
	election_set_role(e, ELECTION_FOLLOWER,
	    e->role == ELECTION_LEADER ? "no longer lowest" : "queued", false, out);
	snprintf(e->predecessor, sizeof(e->predecessor), "%s", sorted[mine - 1]);
	e->phase = PHASE_WATCHING;
	election_push(out, ACT_WATCH_PRED, e->predecessor);
}

static void
election_on_children(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	struct election_seq_name *byseq;
	char **sorted;
	int i, n = 0, ahead;

	if (e->phase != PHASE_LISTING && e->phase != PHASE_OBSERVING &&
	    e->phase != PHASE_WATCHING && e->phase != PHASE_LEADING)
		return;
	if (ev->rc == ZNONODE) {
		/* Rule 9: the parent went away, and our node with it. */
		if (e->role == ELECTION_LEADER)
			election_lose(e, ELECTION_UNKNOWN,
			    "election path deleted", out);
		election_forget_view(e);
		if (e->candidate) {
			e->node[0] = '\0';
			election_new_uuid(e);
		}
		e->phase = PHASE_PARENT;
		election_push(out, ACT_CREATE_PARENT, NULL);
		return;
	}
	if (ev->rc != ZOK) {
		/* A leader's view refresh failing changes nothing: the lease
		 * decides. Elsewhere, try again later. */
		if (e->phase != PHASE_LEADING && ev->rc != ZCONNECTIONLOSS &&
		    ev->rc != ZOPERATIONTIMEOUT && ev->rc != ZSESSIONEXPIRED &&
		    ev->rc != ZCLOSING)
			election_retry(e, ev->now, out);
		return;
	}

	ahead = -1;
	/* Validate what ZooKeeper gave us; contenders sort by suffix,
	 * parsed once each. */
	byseq = calloc((size_t)ev->count + 1, sizeof(*byseq));
	sorted = calloc((size_t)ev->count + 1, sizeof(*sorted));
	if (byseq == NULL || sorted == NULL)
		abort();
	for (i = 0; i < ev->count; i++)
		if ((byseq[n].seq = election_node_seq(ev->names[i])) >= 0)
			byseq[n++].name = ev->names[i];
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
	/* Who is ahead of us: where to look for the next leader without
	 * listing again when this one leaves. */
	election_set_ahead(e, sorted, ahead);
	/* The election node exists now: owe no watch on it. */
	if (!e->claim_watch_armed)
		election_watch_claim(e, out);
	election_update_lowest(e, n > 0 ? sorted[0] : NULL, out);

	election_evaluate(e, sorted, n, out);
	free(sorted);
}

static void
election_on_owner(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_ADOPTING || ev->name == NULL)
		return;
	if (ev->rc == ZOK && ev->owner == e->session_id) {
		snprintf(e->node, sizeof(e->node), "%s", ev->name);
		e->phase = PHASE_LISTING;
		election_push(out, ACT_LIST, NULL);
		return;
	}
	/* Gone, or another session's (rule 6): ignore it and create. */
	if (ev->rc == ZOK || ev->rc == ZNONODE) {
		election_new_uuid(e);
		election_create(e, out);
	} else
		election_retry(e, ev->now, out);
}

static void
election_on_pred_set(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_WATCHING)
		return;
	if (ev->rc == ZOK)
		return;
	/* Rule 5: gone before the watch was set; look again. */
	if (ev->rc == ZNONODE) {
		e->phase = PHASE_LISTING;
		election_push(out, ACT_LIST, NULL);
	} else if (ev->rc != ZCONNECTIONLOSS && ev->rc != ZSESSIONEXPIRED &&
	    ev->rc != ZCLOSING)
		election_retry(e, ev->now, out);
}

static void
election_on_pred_changed(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_WATCHING)
		return;
	if (ev->name != NULL && strcmp(ev->name, e->predecessor) != 0)
		return;
	if (!ev->deleted) {
		e->phase = PHASE_LISTING;
		election_push(out, ACT_LIST, NULL);
		return;
	}
	/*
	 * Our predecessor left. Nodes only ever join behind us (sequence
	 * numbers grow), so the nodes ahead of us are those of our last
	 * listing that have not left since: with none left we are the
	 * lowest and claim at once (rule 3), without listing a long queue;
	 * otherwise the last of them is our new predecessor (rule 5: its
	 * absence makes us list again).
	 */
	election_drop_ahead(e, e->predecessor);
	if (e->nahead == 0) {
		e->position = 0;
		election_update_lowest(e, e->node, out);
		e->phase = PHASE_CLAIMING;
		election_push(out, ACT_CLAIM, e->node);
		return;
	}
	snprintf(e->predecessor, sizeof(e->predecessor), "%s",
	    e->ahead[e->nahead - 1]);
	election_push(out, ACT_WATCH_PRED, e->predecessor);
}

static uint64_t
election_lease_len(const struct election *e)
{
	return (uint64_t)e->timeout_ms * e->lease_num / e->lease_den;
}

static void
election_on_claimed(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_CLAIMING)
		return;
	if (ev->rc == ZOK && ev->now >= ev->sent + election_lease_len(e)) {
		/* The answer came too late to lead on (we were paused?):
		 * this term's lease is already over. Look again; a new claim
		 * will carry a new epoch. */
		election_next_gen(e);
		e->phase = PHASE_LISTING;
		election_push(out, ACT_LIST, NULL);
		return;
	}
	if (ev->rc == ZOK) {
		e->phase = PHASE_LEADING;
		e->epoch = (uint64_t)ev->zxid;
		e->lease_deadline = ev->sent + election_lease_len(e);
		e->next_renew = ev->sent + (uint64_t)e->timeout_ms / 3;
		e->renew_inflight = false;
		/* Our own claim is the view too. */
		e->claim_known = true;
		snprintf(e->claim_id, sizeof(e->claim_id), "%s", e->id);
		e->claim_epoch = e->epoch;
		election_set_role(e, ELECTION_LEADER, "claimed", false, out);
		/* Only the leader watches the whole queue, to keep its
		 * candidate count fresh; one agent, one notification. */
		election_push(out, ACT_WATCH_CHILDREN, NULL);
		return;
	}
	if (ev->rc == ZNONODE) {
		/* The check op failed: our node is gone. */
		election_new_uuid(e);
		election_create(e, out);
	} else if (ev->rc != ZCONNECTIONLOSS && ev->rc != ZOPERATIONTIMEOUT &&
	    ev->rc != ZSESSIONEXPIRED && ev->rc != ZCLOSING) {
		election_retry(e, ev->now, out);
	}
}

static void
election_on_renewed(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	uint64_t deadline;

	if (e->phase != PHASE_LEADING)
		return;
	e->renew_inflight = false;
	if (ev->rc == ZOK && ev->owner == e->session_id) {
		e->renewals++;
		e->renewal_ms_total += ev->now - ev->sent;
		if (ev->now - ev->sent > e->renewal_ms_max)
			e->renewal_ms_max = ev->now - ev->sent;
		deadline = ev->sent + election_lease_len(e);
		if (deadline > e->lease_deadline)
			e->lease_deadline = deadline;
		return;
	}
	if (ev->rc == ZOK || ev->rc == ZNONODE) {
		election_lose(e, ELECTION_UNKNOWN, "own node vanished", out);
		election_next_gen(e);
		election_forget_view(e);
		election_watch_claim(e, out);
		election_new_uuid(e);
		election_create(e, out);
	}
	/* Other errors: the lease runs down, or the session event comes. */
}

static void
election_on_claim_data(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	char id[ELECTION_ID_MAX];

	if (ev->rc != ZOK) {
		e->claim_known = false;
		if (ev->rc != ZCONNECTIONLOSS && ev->rc != ZSESSIONEXPIRED &&
		    ev->rc != ZCLOSING)
			e->claim_watch_armed = false;	/* none was set */
		return;
	}
	if (ev->datalen <= 0 || ev->datalen >= (int)sizeof(id) ||
	    memchr(ev->data, '\0', (size_t)ev->datalen) != NULL) {
		e->claim_known = false;	/* nobody's claim, or not ours to read */
		return;
	}
	memcpy(id, ev->data, (size_t)ev->datalen);
	id[ev->datalen] = '\0';
	if (e->claim_known && e->claim_epoch == (uint64_t)ev->zxid)
		return;
	e->claim_known = true;
	snprintf(e->claim_id, sizeof(e->claim_id), "%s", id);
	e->claim_epoch = (uint64_t)ev->zxid;
	/* A new claim: the lowest node is being read already (see
	 * election_on_lowest_changed), or we look for it now. */
	if ((e->phase == PHASE_WATCHING || e->phase == PHASE_OBSERVING) &&
	    e->lowest[0] == '\0')
		election_next_lowest(e, out);
	else if (e->phase == PHASE_LEADING && e->claim_epoch != e->epoch) {
		/* Someone else claimed while we lead: look again. */
		election_push(out, ACT_LIST, NULL);
	}
}

static void
election_on_lowest_data(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (ev->name == NULL || strcmp(ev->name, e->lowest) != 0)
		return;
	if (ev->rc == ZOK && ev->datalen > 0 &&
	    ev->datalen < (int)sizeof(e->lowest_id) &&
	    memchr(ev->data, '\0', (size_t)ev->datalen) == NULL) {
		memcpy(e->lowest_id, ev->data, (size_t)ev->datalen);
		e->lowest_id[ev->datalen] = '\0';
		e->lowest_czxid = ev->zxid;
		e->lowest_known = true;
	} else if (ev->rc == ZNONODE) {
		/* Gone already: the next one ahead is the lowest now. */
		election_drop_ahead(e, ev->name);
		election_update_lowest(e, NULL, out);
		election_next_lowest(e, out);
	} else
		e->lowest_known = false;
}

/*
 * Our own node is gone while we still count on it (deleted by hand, say):
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
	election_lose(e, ELECTION_UNKNOWN, "own node deleted", out);
	election_next_gen(e);
	election_forget_view(e);
	election_watch_claim(e, out);
	election_new_uuid(e);
	election_create(e, out);
}

static void
election_on_self(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (ev->name == NULL || strcmp(ev->name, e->node) != 0)
		return;
	if (ev->type == EV_SELF_SET ? ev->rc == ZNONODE : ev->deleted)
		election_self_deleted(e, out);
	else if (ev->type == EV_SELF_CHANGED) {
		/* Someone wrote our node: keep watching, nothing else. */
		e->self_watch_gen = e->gen;
		election_push(out, ACT_WATCH_SELF, e->node);
	}
}

static void
election_on_lowest_changed(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (ev->name == NULL || strcmp(ev->name, e->lowest) != 0)
		return;
	if (strcmp(ev->name, e->node) == 0 && ev->deleted) {
		election_self_deleted(e, out);
		return;
	}
	if (!ev->deleted) {
		/* Written (a contender never is): read it again. */
		e->lowest_known = false;
		election_push(out, ACT_WATCH_LOWEST, e->lowest);
		return;
	}
	/*
	 * The claimant left: nobody is named until the next claim. Its
	 * successor is the next node ahead of us that still exists; it is
	 * read (and watched) when the claim comes: one read each, however
	 * long the queue, and no listing.
	 */
	election_drop_ahead(e, ev->name);
	election_update_lowest(e, NULL, out);
	/* The next one is read when its claim comes (election_on_claim_data):
	 * reading now would load ZooKeeper while the successor claims. */
}

/* Resign or stop: tell the app first, then let the node go (rule 10). */
static void
election_release(struct election *e, const char *reason,
    struct election_actions *out)
{
	bool leading = e->role == ELECTION_LEADER;

	election_next_gen(e);
	if (leading) {
		e->phase = PHASE_RELEASING;
		election_set_role(e, e->stopping ? ELECTION_UNKNOWN :
		    ELECTION_FOLLOWER, reason, true, out);
		return;
	}
	if (e->stopping)
		election_set_role(e, ELECTION_UNKNOWN, reason, false, out);
	else if (e->role == ELECTION_UNKNOWN && e->session == SESSION_CONNECTED)
		election_set_role(e, ELECTION_FOLLOWER, reason, false, out);
	if (e->node[0] != '\0' && e->session == SESSION_CONNECTED) {
		e->phase = PHASE_DELETING;
		election_push(out, ACT_DELETE, e->node);
	} else if (e->stopping) {
		e->phase = PHASE_STOPPED;
		election_push(out, ACT_EXIT, NULL);
	} else if (e->node[0] != '\0') {
		e->phase = PHASE_DELETING;	/* once reconnected */
	} else
		e->phase = PHASE_HOLDING;	/* a lost create is found by uuid */
}

static void
election_on_deleted(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase != PHASE_DELETING)
		return;
	if (ev->rc != ZOK && ev->rc != ZNONODE) {
		if (ev->rc == ZCONNECTIONLOSS || ev->rc == ZOPERATIONTIMEOUT ||
		    ev->rc == ZSESSIONEXPIRED || ev->rc == ZCLOSING)
			return;		/* reconnecting deletes it again */
		if (e->stopping) {
			e->phase = PHASE_STOPPED;	/* it goes with the session */
			election_push(out, ACT_EXIT, NULL);
			return;
		}
		e->backoff_ms = e->backoff_ms == 0 ? BACKOFF_MIN_MS :
		    e->backoff_ms * 2;
		if (e->backoff_ms > BACKOFF_MAX_MS)
			e->backoff_ms = BACKOFF_MAX_MS;
		e->retry_at = ev->now + e->backoff_ms;
		return;
	}
	e->node[0] = '\0';
	e->uuid[0] = '\0';
	e->position = -1;
	if (e->stopping) {
		e->phase = PHASE_STOPPED;
		election_push(out, ACT_EXIT, NULL);
	} else
		e->phase = PHASE_HOLDING;
}

static void
election_on_tick(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	uint64_t now = ev->now;

	if (e->phase == PHASE_LEADING) {
		if (now >= e->lease_deadline) {
			/*
			 * Rule 2: no renewal came back in time (the process
			 * may have been paused). Step down; a later term needs
			 * a fresh claim and so a higher epoch (rule 3).
			 */
			election_lose(e, ELECTION_UNKNOWN, "lease lapsed", out);
			election_next_gen(e);
			e->phase = PHASE_LISTING;
			election_push(out, ACT_LIST, NULL);
			return;
		}
		if (now >= e->next_renew && !e->renew_inflight) {
			e->renew_inflight = true;
			e->next_renew = now + (uint64_t)e->timeout_ms / 3;
			election_push(out, ACT_RENEW, e->node);
		}
		return;
	}
	if (e->phase == PHASE_HOLDING && now >= e->hold_until) {
		e->phase = PHASE_IDLE;
		election_rejoin(e, out);
		return;
	}
	if (e->retry_at != 0 && now >= e->retry_at) {
		e->retry_at = 0;
		if (e->session == SESSION_AUTH_FAILED) {
			e->session = SESSION_CONNECTING;
			election_push(out, ACT_NEW_SESSION, NULL);
			return;
		}
		if (e->phase == PHASE_DELETING && e->session == SESSION_CONNECTED)
			election_push(out, ACT_DELETE, e->node);
		else if (e->phase == PHASE_IDLE)
			election_rejoin(e, out);
	}
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
		return true;
	case EV_CLAIM_DATA:
	case EV_CLAIM_CHANGED:
	case EV_LOWEST_DATA:
	case EV_LOWEST_CHANGED:
		/* View reads survive a resign or a lapsed lease. */
		return ev->gen == e->gen || e->session == SESSION_CONNECTED;
	default:
		return ev->gen == e->gen;
	}
}

static void
election_dispatch(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	if (e->phase == PHASE_STOPPED)
		return;
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
		election_on_claim_data(e, ev, out);
		break;
	case EV_CLAIM_CHANGED:
		if (e->session == SESSION_CONNECTED)
			election_watch_claim(e, out);
		break;
	case EV_SELF_SET:
	case EV_SELF_CHANGED:
		election_on_self(e, ev, out);
		break;
	case EV_CHILDREN_CHANGED:
		if (e->phase == PHASE_LEADING)
			election_push(out, ACT_WATCH_CHILDREN, NULL);
		break;
	case EV_LOWEST_DATA:
		election_on_lowest_data(e, ev, out);
		break;
	case EV_LOWEST_CHANGED:
		election_on_lowest_changed(e, ev, out);
		break;
	case EV_DELETED:
		election_on_deleted(e, ev, out);
		break;
	case EV_TICK:
		election_on_tick(e, ev, out);
		break;
	case EV_RESIGN:
		if (e->stopping || !e->candidate)
			break;
		if (ev->now + ev->hold_ms > e->hold_until)
			e->hold_until = ev->now + ev->hold_ms;
		/* Already letting go: the longer hold is all that changes. */
		if (e->phase == PHASE_RELEASING || e->phase == PHASE_DELETING ||
		    e->phase == PHASE_HOLDING)
			break;
		election_release(e, "resigned", out);
		break;
	case EV_STOP:
		if (e->stopping)
			break;
		e->stopping = true;
		if (e->phase == PHASE_RELEASING || e->phase == PHASE_DELETING) {
			/* Finish the release under way, then exit (rule 10). */
			election_set_role(e, ELECTION_UNKNOWN, "stopping", false, out);
			break;
		}
		election_release(e, "stopping", out);
		break;
	case EV_NOTIFIED:
		if (e->phase != PHASE_RELEASING)
			break;
		if (e->node[0] != '\0' && e->session == SESSION_CONNECTED) {
			e->phase = PHASE_DELETING;
			election_push(out, ACT_DELETE, e->node);
		} else if (e->stopping) {
			e->phase = PHASE_STOPPED;
			election_push(out, ACT_EXIT, NULL);
		} else if (e->node[0] != '\0') {
			e->phase = PHASE_DELETING;  /* when reconnected */
		} else {
			e->uuid[0] = '\0';
			e->phase = PHASE_HOLDING;
		}
		break;
	}
}

void
election_step(struct election *e, const struct election_event *ev,
    struct election_actions *out)
{
	struct election_report r;

	election_dispatch(e, ev, out);
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

void
election_report(const struct election *e, struct election_report *r)
{
	memset(r, 0, sizeof(*r));
	r->role = e->role;
	r->session = e->session;
	r->timeout_ms = e->timeout_ms;
	r->epoch = e->role == ELECTION_LEADER ? e->epoch : 0;
	r->candidates = e->candidates;
	r->position = e->position;
	if (e->role == ELECTION_LEADER) {
		r->has_leader = true;
		snprintf(r->leader_id, sizeof(r->leader_id), "%s", e->id);
		r->leader_epoch = e->epoch;
	} else if (e->session == SESSION_CONNECTED && e->claim_known &&
	    e->lowest_known && strcmp(e->lowest_id, e->claim_id) == 0 &&
	    (uint64_t)e->lowest_czxid < e->claim_epoch &&
	    e->phase != PHASE_CLAIMING) {
		r->has_leader = true;
		snprintf(r->leader_id, sizeof(r->leader_id), "%s", e->claim_id);
		r->leader_epoch = e->claim_epoch;
	}
}

uint64_t
election_next_tick(const struct election *e)
{
	uint64_t t = 0;

#define EARLIEST(x) do { if ((x) != 0 && (t == 0 || (x) < t)) t = (x); } while (0)
	if (e->phase == PHASE_LEADING) {
		EARLIEST(e->lease_deadline);
		if (!e->renew_inflight)
			EARLIEST(e->next_renew);
	}
	if (e->phase == PHASE_HOLDING)
		EARLIEST(e->hold_until == 0 ? 1 : e->hold_until);
	EARLIEST(e->retry_at);
#undef EARLIEST
	return t;
}
