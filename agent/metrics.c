/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics: the agent's state in the Prometheus text format, written
 * from the same election state the status document reads.
 */
#include <inttypes.h>

#include <event2/buffer.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "api.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "version.h"
#include "zk.h"

static const char *const metrics_endpoints[API_ENDPOINT_MAX] = {
	"status", "leader", "health", "resign", "metrics", "partitions",
	"drain", "other",
};

/*
 * The label of each status reason (the status document's "reason", in
 * words there): what zkelect_status_reason says. Indexed by enum
 * election_bar; the members' two come after.
 */
static const char *const metrics_bars[] = {
	[BAR_OBSERVER] = "observer_server",
	[BAR_SHORT_TIMEOUT] = "short_session_timeout",
	[BAR_EPOCH_BACKWARDS] = "epoch_backwards",
	[BAR_SLOW_ZOOKEEPER] = "slow_zookeeper",
	[BAR_NO_ACCESS] = "no_access",
	[BAR_NO_CHROOT] = "no_chroot",
	[BAR_UNIDENTIFIED] = "unidentified_server",
};
#define METRICS_NBARS	((int)(sizeof(metrics_bars) / sizeof(metrics_bars[0])))
#define METRICS_DUPLICATE_ID	"duplicate_id"
#define METRICS_OTHER_PARTITIONS "other_partitions"

/* Length of the well-formed UTF-8 sequence at p (RFC 3629), or 0. */
static size_t
metrics_utf8_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		lo = p[0] == 0xe0 ? 0xa0 : lo;
		hi = p[0] == 0xed ? 0x9f : hi;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		lo = p[0] == 0xf0 ? 0x90 : lo;
		hi = p[0] == 0xf4 ? 0x8f : hi;
	} else
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/*
 * Appends s as a label value, quotes included: backslash, quote and
 * newline escaped as the text format asks, and each byte that is not
 * UTF-8 as U+FFFD, since Prometheus refuses such a label value (the
 * default id holds the host name, which nothing checks).
 */
static void
metrics_label(struct evbuffer *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	evbuffer_add(out, "\"", 1);
	while (*p != '\0') {
		if (*p == '\\' || *p == '"') {
			evbuffer_add_printf(out, "\\%c", *p);
			p++;
		} else if (*p == '\n') {
			evbuffer_add(out, "\\n", 2);
			p++;
		} else if (*p < 0x80) {
			evbuffer_add(out, p, 1);
			p++;
		} else if ((n = metrics_utf8_len(p)) != 0) {
			evbuffer_add(out, p, n);
			p += n;
		} else {
			evbuffer_add(out, "\xef\xbf\xbd", 3);
			p++;
		}
	}
	evbuffer_add(out, "\"", 1);
}

/*
 * zkelect_info: who this agent is, for joins (`* on (job, instance)
 * group_left (id, election) zkelect_info`): its id, the election's path in
 * ZooKeeper (the chroot of zookeeper.servers, if any, then election.path,
 * so that elections of one ensemble under different chroots differ), the
 * version, and how many partitions it runs (0: one election).
 */
static void
metrics_info(const struct agent *agent, struct evbuffer *out)
{
	const struct config *conf = agent->conf;
	const char *chroot = strchr(conf->zk_servers, '/');
	char *election;

	if (chroot == NULL || strcmp(chroot, "/") == 0)
		chroot = "";
	if (asprintf(&election, "%s%s", chroot, conf->election_path) == -1)
		election = NULL;
	evbuffer_add_printf(out,
	    "# HELP zkelect_info This agent: its id, its election's path in "
	    "ZooKeeper (chroot included), its version, its partitions (0: none).\n"
	    "# TYPE zkelect_info gauge\nzkelect_info{id=");
	metrics_label(out, conf->election_id);
	evbuffer_add_printf(out, ",election=");
	metrics_label(out, election != NULL ? election : conf->election_path);
	evbuffer_add_printf(out, ",version=");
	metrics_label(out, ZKELECT_VERSION);
	evbuffer_add_printf(out, ",partitions=\"%d\"} 1\n",
	    agent->fleet.partitioned ? agent->fleet.nparts : 0);
	free(election);
}

/*
 * The status document's reason, as a label (NULL: it gives none). With
 * partitions it is what api.c's api_parts_reason says: two members with
 * one id, members that run other partitions, else what keeps the session
 * from a lease (but not a zxid gone backwards, which is per partition).
 */
static const char *
metrics_reason(const struct agent *agent)
{
	const struct fleet *f = &agent->fleet;
	struct election_report r;

	if (f->partitioned && f->view.duplicate[0] != '\0')
		return METRICS_DUPLICATE_ID;
	if (f->partitioned && f->view.disagree > 0)
		return METRICS_OTHER_PARTITIONS;
	election_report(fleet_session(f), &r);
	if (r.bar == BAR_NONE ||
	    (f->partitioned && r.bar == BAR_EPOCH_BACKWARDS))
		return NULL;
	if ((int)r.bar < METRICS_NBARS && metrics_bars[r.bar] != NULL)
		return metrics_bars[r.bar];
	return "other";
}

static void
metrics_status_reason(const struct agent *agent, struct evbuffer *out)
{
	const char *why = metrics_reason(agent), *name;
	bool other = why != NULL;
	int b;

	evbuffer_add_printf(out,
	    "# HELP zkelect_status_reason 1 for the reason the status document "
	    "gives why this agent does not lead though it could, or what is "
	    "wrong with the members (all 0: none).\n"
	    "# TYPE zkelect_status_reason gauge\n");
	for (b = 0; b < METRICS_NBARS + 2; b++) {
		if (b < METRICS_NBARS && metrics_bars[b] == NULL)
			continue;
		name = b < METRICS_NBARS ? metrics_bars[b] :
		    b == METRICS_NBARS ? METRICS_DUPLICATE_ID :
		    METRICS_OTHER_PARTITIONS;
		if (why != NULL && strcmp(why, name) == 0)
			other = false;
		evbuffer_add_printf(out, "zkelect_status_reason{reason=\"%s\"} %d\n",
		    name, why != NULL && strcmp(why, name) == 0);
	}
	evbuffer_add_printf(out, "zkelect_status_reason{reason=\"other\"} %d\n",
	    other);
}

/*
 * Partitions whose ownership is to change here: assigned but not led
 * (to gain), led but not assigned (to hand over); both 0 once settled.
 */
static void
metrics_moving(const struct fleet *f, int *in, int *out, int *resigned)
{
	int i;

	*in = *out = *resigned = 0;
	for (i = 0; i < f->nparts; i++) {
		*resigned += f->parts[i].avoiding;
		if (f->parts[i].assigned && !f->parts[i].owned)
			(*in)++;
		else if (!f->parts[i].assigned && f->parts[i].owned)
			(*out)++;
	}
}

/* With partitions (doc/design.md, "Partitions"): counts, not one series
 * per partition. */
static void
metrics_partitions(const struct agent *agent, struct evbuffer *out)
{
	const struct fleet_view *mb = &agent->fleet.view;
	int in, away, resigned;

	metrics_moving(&agent->fleet, &in, &away, &resigned);
	evbuffer_add_printf(out,
	    "# HELP zkelect_partitions Partitions configured.\n"
	    "# TYPE zkelect_partitions gauge\nzkelect_partitions %d\n"
	    "# HELP zkelect_partitions_owned Partitions this agent leads.\n"
	    "# TYPE zkelect_partitions_owned gauge\nzkelect_partitions_owned %d\n"
	    "# HELP zkelect_partitions_assigned Partitions the assignment gives this agent.\n"
	    "# TYPE zkelect_partitions_assigned gauge\nzkelect_partitions_assigned %d\n"
	    "# HELP zkelect_partitions_moving Partitions whose owner is to change here: "
	    "assigned but not led (in), led but not assigned (out).\n"
	    "# TYPE zkelect_partitions_moving gauge\n"
	    "zkelect_partitions_moving{direction=\"in\"} %d\n"
	    "zkelect_partitions_moving{direction=\"out\"} %d\n"
	    "# HELP zkelect_partition_ownership_changes_total Partitions gained or lost.\n"
	    "# TYPE zkelect_partition_ownership_changes_total counter\n"
	    "zkelect_partition_ownership_changes_total %" PRIu64 "\n"
	    "# HELP zkelect_rebalance_seconds How long the last rebalance took, from a "
	    "member-list change until the owned set equalled the assigned set.\n"
	    "# TYPE zkelect_rebalance_seconds gauge\nzkelect_rebalance_seconds %.3f\n"
	    "# HELP zkelect_members Live members, as last listed.\n"
	    "# TYPE zkelect_members gauge\nzkelect_members %d\n"
	    "# HELP zkelect_members_other_partitions Members that run other "
	    "partitions than this agent (partitions.count or names differ).\n"
	    "# TYPE zkelect_members_other_partitions gauge\n"
	    "zkelect_members_other_partitions %d\n"
	    "# HELP zkelect_members_duplicate_id 1 while two members share an id.\n"
	    "# TYPE zkelect_members_duplicate_id gauge\n"
	    "zkelect_members_duplicate_id %d\n"
	    "# HELP zkelect_members_drained Members drained (they own no "
	    "partition), this agent included.\n"
	    "# TYPE zkelect_members_drained gauge\nzkelect_members_drained %d\n"
	    "# HELP zkelect_drained 1 while this agent is drained.\n"
	    "# TYPE zkelect_drained gauge\nzkelect_drained %d\n"
	    "# HELP zkelect_partitions_resigned Partitions this agent resigned "
	    "and does not take back until their hold ends.\n"
	    "# TYPE zkelect_partitions_resigned gauge\n"
	    "zkelect_partitions_resigned %d\n",
	    agent->fleet.nparts, mb->owned, mb->assigned, in, away,
	    mb->ownership_changes,
	    (double)mb->rebalance_ms / 1000.0, mb->count, mb->disagree,
	    mb->duplicate[0] != '\0', mb->drained, agent->fleet.drained,
	    resigned);
}

/*
 * The lease left, in ms: the single election's, as the status document
 * says; with partitions (whose status says 0), the least of the
 * partitions this agent leads, 0 when it leads none.
 */
static uint64_t
metrics_lease_left(const struct fleet *f, uint64_t now)
{
	uint64_t left, least = 0;
	bool any = false;
	int i;

	if (!f->partitioned)
		return election_lease_remaining(&f->parts[0].e, now);
	for (i = 0; i < f->nparts; i++) {
		if (fleet_role(&f->parts[i], now) != ELECTION_LEADER)
			continue;
		left = election_lease_remaining(&f->parts[i].e, now);
		if (!any || left < least)
			least = left;
		any = true;
	}
	return least;
}

/* Terms (or partitions' terms) that ended because the lease ran out. */
static uint64_t
metrics_lease_lapses(const struct agent_stats *st)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < AGENT_REASONS_MAX && st->by_reason[i].reason !=
	    REASON_NONE; i++)
		if (st->by_reason[i].reason == REASON_LEASE_LAPSED ||
		    st->by_reason[i].reason == REASON_LEASE_LAPSED_DISCONNECTED)
			n += st->by_reason[i].count;
	return n;
}

/* AS: the API's figures, which api.c passes in. */
void
metrics_write(struct agent *agent, const struct api_stats *as, uint64_t now,
    struct evbuffer *out)
{
	static const int codes[API_CODE_MAX] = API_CODES;
	static const char *const accept_causes[API_ACCEPT_CAUSES] =
	    API_ACCEPT_CAUSE_NAMES;
	const struct election *e = &agent->fleet.parts[0].e;
	/* With partitions, the session is the first partition's to report. */
	const struct election *se = fleet_session(&agent->fleet);
	enum election_role role = fleet_status_role(&agent->fleet, now), r;
	enum election_session s;
	const struct notify_stats *ns;
	int ep, ci, i;

	metrics_info(agent, out);
	evbuffer_add_printf(out,
	    "# HELP zkelect_is_leader 1 while this agent leads and its lease has time left.\n"
	    "# TYPE zkelect_is_leader gauge\nzkelect_is_leader %d\n",
	    role == ELECTION_LEADER);
	evbuffer_add_printf(out,
	    "# HELP zkelect_role The role this agent reports (1 for the current one).\n"
	    "# TYPE zkelect_role gauge\n");
	for (r = ELECTION_UNKNOWN; r <= ELECTION_OBSERVER; r++)
		evbuffer_add_printf(out, "zkelect_role{role=\"%s\"} %d\n",
		    election_role_name(r), r == role);
	evbuffer_add_printf(out,
	    "# HELP zkelect_epoch The fencing token of the current term (0 when not leading).\n"
	    "# TYPE zkelect_epoch gauge\nzkelect_epoch %" PRIu64 "\n",
	    role == ELECTION_LEADER ? e->epoch : 0);
	evbuffer_add_printf(out,
	    "# HELP zkelect_lease_remaining_seconds Lease time left (with partitions, "
	    "the least of the partitions led).\n"
	    "# TYPE zkelect_lease_remaining_seconds gauge\n"
	    "zkelect_lease_remaining_seconds %.3f\n"
	    "# HELP zkelect_lease_lapses_total Terms that ended because the lease "
	    "ran out (a renewal did not come back in time).\n"
	    "# TYPE zkelect_lease_lapses_total counter\n"
	    "zkelect_lease_lapses_total %" PRIu64 "\n",
	    (double)metrics_lease_left(&agent->fleet, now) / 1000.0,
	    metrics_lease_lapses(&agent->stats));
	metrics_status_reason(agent, out);
	evbuffer_add_printf(out,
	    "# HELP zkelect_session_connected 1 while the ZooKeeper session is connected.\n"
	    "# TYPE zkelect_session_connected gauge\nzkelect_session_connected %d\n",
	    se->session == SESSION_CONNECTED);
	evbuffer_add_printf(out,
	    "# HELP zkelect_session_state The ZooKeeper session state (1 for the current one).\n"
	    "# TYPE zkelect_session_state gauge\n");
	for (s = SESSION_CONNECTING; s <= SESSION_CLOSED; s++)
		evbuffer_add_printf(out, "zkelect_session_state{state=\"%s\"} %d\n",
		    election_session_name(s), s == se->session);
	evbuffer_add_printf(out,
	    "# HELP zkelect_role_seconds Time since the role last changed.\n"
	    "# TYPE zkelect_role_seconds gauge\nzkelect_role_seconds %.3f\n",
	    (double)(now - agent->stats.role_since) / 1000.0);
	evbuffer_add_printf(out,
	    "# HELP zkelect_session_timeout_seconds The negotiated session timeout.\n"
	    "# TYPE zkelect_session_timeout_seconds gauge\n"
	    "zkelect_session_timeout_seconds %.3f\n", (double)se->timeout_ms / 1000.0);
	evbuffer_add_printf(out,
	    "# HELP zkelect_candidates Contenders in the election when last listed.\n"
	    "# TYPE zkelect_candidates gauge\nzkelect_candidates %d\n", e->candidates);
	evbuffer_add_printf(out,
	    "# HELP zkelect_transitions_total Role changes since start.\n"
	    "# TYPE zkelect_transitions_total counter\nzkelect_transitions_total %" PRIu64 "\n",
	    agent->stats.transitions);
	evbuffer_add_printf(out,
	    "# HELP zkelect_transitions_by_reason_total Role changes by new role and reason.\n"
	    "# TYPE zkelect_transitions_by_reason_total counter\n");
	for (i = 0; i < AGENT_REASONS_MAX &&
	    agent->stats.by_reason[i].reason != REASON_NONE; i++) {
		const struct agent_transition_count *t = &agent->stats.by_reason[i];
		char reason[64];
		size_t k;
		snprintf(reason, sizeof(reason), "%s",
		    election_reason_name(t->reason));
		for (k = 0; reason[k] != '\0'; k++)
			if (reason[k] == ' ' || reason[k] == '-')
				reason[k] = '_';
		evbuffer_add_printf(out, "zkelect_transitions_by_reason_total"
		    "{to=\"%s\",reason=\"%s\"} %" PRIu64 "\n",
		    election_role_name((enum election_role)t->to), reason, t->count);
	}
	evbuffer_add_printf(out,
	    "# HELP zkelect_disconnects_ridden_total Disconnects while leading, by outcome: "
	    "kept (reconnected within the lease, same term) or lost.\n"
	    "# TYPE zkelect_disconnects_ridden_total counter\n"
	    "zkelect_disconnects_ridden_total{outcome=\"kept\"} %" PRIu64 "\n"
	    "zkelect_disconnects_ridden_total{outcome=\"lost\"} %" PRIu64 "\n"
	    "# HELP zkelect_connection_kicks_total Connections to a silent ZooKeeper server "
	    "dropped to reach another within the lease.\n"
	    "# TYPE zkelect_connection_kicks_total counter\n"
	    "zkelect_connection_kicks_total %" PRIu64 "\n",
	    e->rides_kept, e->rides_lost, e->kicks + agent->fleet.kicks);
	evbuffer_add_printf(out,
	    "# HELP zkelect_renewals_total Lease renewals acknowledged.\n"
	    "# TYPE zkelect_renewals_total counter\nzkelect_renewals_total %" PRIu64 "\n",
	    e->renewals);
	evbuffer_add_printf(out,
	    "# HELP zkelect_renewal_seconds Round trip of acknowledged renewals (sync + read).\n"
	    "# TYPE zkelect_renewal_seconds summary\n"
	    "zkelect_renewal_seconds_sum %.3f\nzkelect_renewal_seconds_count %" PRIu64 "\n"
	    "# HELP zkelect_renewal_max_seconds Slowest acknowledged renewal.\n"
	    "# TYPE zkelect_renewal_max_seconds gauge\nzkelect_renewal_max_seconds %.3f\n",
	    (double)e->renewal_ms_total / 1000.0, e->renewals,
	    (double)e->renewal_ms_max / 1000.0);
	ns = notify_get_stats(agent->notify);
	evbuffer_add_printf(out,
	    "# HELP zkelect_hook_runs_total Hooks that ran to an end (any exit).\n"
	    "# TYPE zkelect_hook_runs_total counter\nzkelect_hook_runs_total %" PRIu64 "\n"
	    "# HELP zkelect_hook_failures_total Hooks that failed, timed out or did not start.\n"
	    "# TYPE zkelect_hook_failures_total counter\nzkelect_hook_failures_total %" PRIu64 "\n"
	    "# HELP zkelect_hook_seconds_total Time spent running hooks.\n"
	    "# TYPE zkelect_hook_seconds_total counter\nzkelect_hook_seconds_total %.3f\n"
	    "# HELP zkelect_signals_sent_total Leader/follower signals delivered.\n"
	    "# TYPE zkelect_signals_sent_total counter\nzkelect_signals_sent_total %" PRIu64 "\n"
	    "# HELP zkelect_signal_failures_total Signals not delivered (pidfile missing or stale).\n"
	    "# TYPE zkelect_signal_failures_total counter\nzkelect_signal_failures_total %" PRIu64 "\n"
	    "# HELP zkelect_child_starts_total Starts of the supervised child.\n"
	    "# TYPE zkelect_child_starts_total counter\nzkelect_child_starts_total %" PRIu64 "\n",
	    ns->hook_runs, ns->hook_failures, (double)ns->hook_ms_total / 1000.0,
	    ns->signals, ns->signal_failures, ns->child_starts);
	evbuffer_add_printf(out,
	    "# HELP zkelect_api_requests_total API requests answered, by endpoint and code.\n"
	    "# TYPE zkelect_api_requests_total counter\n");
	for (ep = 0; ep < API_ENDPOINT_MAX; ep++)
		for (ci = 0; ci < API_CODE_MAX; ci++) {
			uint64_t n = as->requests[ep][ci];
			if (n == 0)
				continue;
			evbuffer_add_printf(out, "zkelect_api_requests_total"
			    "{endpoint=\"%s\",code=\"%d\"} %" PRIu64 "\n",
			    metrics_endpoints[ep], codes[ci], n);
		}
	evbuffer_add_printf(out,
	    "# HELP zkelect_api_connections Open API connections (not closing).\n"
	    "# TYPE zkelect_api_connections gauge\nzkelect_api_connections %" PRIu64 "\n"
	    "# HELP zkelect_api_long_polls Long polls waiting for a change.\n"
	    "# TYPE zkelect_api_long_polls gauge\nzkelect_api_long_polls %" PRIu64 "\n"
	    "# HELP zkelect_api_connections_evicted_total Connections closed at the cap to make room, by state.\n"
	    "# TYPE zkelect_api_connections_evicted_total counter\n"
	    "zkelect_api_connections_evicted_total{state=\"partial\"} %" PRIu64 "\n"
	    "zkelect_api_connections_evicted_total{state=\"idle\"} %" PRIu64 "\n"
	    "zkelect_api_connections_evicted_total{state=\"long_poll\"} %" PRIu64 "\n",
	    as->connections, as->long_polls, as->evicted_partial, as->evicted_idle,
	    as->evicted_waiting);
	evbuffer_add_printf(out,
	    "# HELP zkelect_api_connections_rejected_total Connections refused over the cap.\n"
	    "# TYPE zkelect_api_connections_rejected_total counter\n"
	    "zkelect_api_connections_rejected_total %" PRIu64 "\n",
	    agent->stats.api_rejected);
	evbuffer_add_printf(out,
	    "# HELP zkelect_api_connections_shed_total Connections closed at the "
	    "descriptor limit to free a descriptor for a new one.\n"
	    "# TYPE zkelect_api_connections_shed_total counter\n"
	    "zkelect_api_connections_shed_total %" PRIu64 "\n"
	    "# HELP zkelect_api_accept_errors_total Failed accepts on the API "
	    "listeners, by cause (EMFILE: out of descriptors).\n"
	    "# TYPE zkelect_api_accept_errors_total counter\n", as->shed);
	for (i = 0; i < API_ACCEPT_CAUSES; i++)
		evbuffer_add_printf(out, "zkelect_api_accept_errors_total"
		    "{cause=\"%s\"} %" PRIu64 "\n", accept_causes[i],
		    as->accept_errors[i]);
	evbuffer_add_printf(out,
	    "# HELP zkelect_log_lines_dropped_total Log lines dropped because stderr "
	    "did not take them in time.\n"
	    "# TYPE zkelect_log_lines_dropped_total counter\n"
	    "zkelect_log_lines_dropped_total %" PRIu64 "\n", log_dropped());
	if (agent->fleet.partitioned)
		metrics_partitions(agent, out);
}
