/* SPDX-License-Identifier: MIT */
/*
 * zkelectctl: the app's and the operator's side of the local API.
 *   zkelectctl status [-p NAME] [--json]
 *   zkelectctl is-leader [-p NAME] [--quiet]
 *   zkelectctl wait [-p NAME] --leader|--follower|--change [--timeout 30s]
 *   zkelectctl resign [--hold 10s]
 *   zkelectctl run [-p NAME] -- CMD [ARGS...]
 *   zkelectctl partitions [--json]           (this agent's view)
 *   zkelectctl partitions -c FILE|--cluster|--zookeeper SERVERS PATH [--json]
 *                                            (the cluster view: partitions.c)
 *   zkelectctl members [-c FILE] [--json]   (reads ZooKeeper: members.c)
 *   zkelectctl members --zookeeper SERVERS PATH [--json]
 *   zkelectctl lock [--zookeeper SERVERS] PATH -- CMD [ARGS...]  (lock.c)
 *   zkelectctl elect [--zookeeper SERVERS] PATH [ID]
 *   zkelectctl hold                          (what elect runs)
 * Exit status: 0 success (for wait: the condition holds), 1 usage error
 * (is-leader: not leading), 2 the agent could not be reached or answered
 * an error, 3 wait timed out (the cluster view: not balanced and settled).
 */
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "guard.h"
#include "config.h"
#include "ctl.h"
#include "version.h"

static const char *socket_path = CONFIG_DEFAULT_SOCKET;
static const char *partition;	/* -p NAME: that partition, not the election */

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: zkelectctl [--socket PATH] COMMAND [OPTIONS]\n"
	    "\n"
	    "Commands that ask this instance's agent (over its socket):\n"
	    "  status [-p NAME] [--json]   show this instance's role, epoch and leader\n"
	    "  is-leader [-p NAME] [-q|--quiet]\n"
	    "                              check once, without waiting: exit 0 if this\n"
	    "                              instance leads now, 1 if not, 2 if the agent\n"
	    "                              cannot be asked; prints the role unless -q\n"
	    "  wait [-p NAME] --leader|--follower|--change [--timeout DURATION]\n"
	    "                              block until this instance leads, follows,\n"
	    "                              or its status changes; --timeout 0 checks\n"
	    "                              once and does not wait\n"
	    "  resign [-p NAME] [--hold DURATION]\n"
	    "                              step down now; rejoin after the hold;\n"
	    "                              -p: move partition NAME to another\n"
	    "                              member, not taken back before the hold\n"
	    "  drain                       hand every partition over, staying a\n"
	    "                              member that owns none\n"
	    "  undrain                     take a share of the partitions again\n"
	    "  run [-p NAME] [-q|--quiet] -- CMD [ARGS...]\n"
	    "                              run CMD only while this instance leads:\n"
	    "                              started on each term, stopped (SIGTERM,\n"
	    "                              then SIGKILL) before the lease can lapse;\n"
	    "                              says once that it waits to lead, and\n"
	    "                              for whom, unless -q\n"
	    "  partitions [--json] [--timeout DURATION]\n"
	    "                              every partition: its owner, epoch, this\n"
	    "                              instance's role and lease; then the balance\n"
	    "  -p, --partition NAME        (status, is-leader, wait, run) ask about\n"
	    "                              partition NAME instead of the election\n"
	    "\n"
	    "Commands that read ZooKeeper themselves (no agent or socket needed):\n"
	    "  members [-c|--config FILE] [--json] [--timeout DURATION]\n"
	    "                              the whole election: contenders in queue\n"
	    "                              order, their ids and values, the leader\n"
	    "                              and its epoch; servers, chroot, auth and\n"
	    "                              election path come from the agent's FILE\n"
	    "                              (default $ZKELECT_CONFIG or\n"
	    "                              " DEFAULT_CONFIG ")\n"
	    "  members --zookeeper SERVERS PATH [--json] [--timeout DURATION]\n"
	    "                              the same with no file, from any host; a\n"
	    "                              partitioned election: members and each\n"
	    "                              partition's owner and epoch\n"
	    "  partitions -c FILE|--cluster [--json] [--timeout DURATION]\n"
	    "  partitions --zookeeper SERVERS PATH [--json] [--timeout DURATION]\n"
	    "                              the cluster view of a partitioned election:\n"
	    "                              every partition's owner, epoch and age; the\n"
	    "                              members in join order with what each runs,\n"
	    "                              owns and its quota, drained and avoided;\n"
	    "                              balanced, settled, unowned (exit 3: read\n"
	    "                              but not balanced and settled); --cluster:\n"
	    "                              the default FILE, as members\n"
	    "\n"
	    "Commands that run an agent of their own (no file, no agent needed;\n"
	    "SERVERS defaults to $ZKELECT_ZOOKEEPER):\n"
	    "  lock [--zookeeper SERVERS] [--id ID] [--session-timeout D]\n"
	    "       [--tick-time D] [--log-level LEVEL] [-v] PATH -- CMD [ARGS...]\n"
	    "                              run CMD while this process leads PATH;\n"
	    "                              exit with its status (75: the term was\n"
	    "                              lost while it ran); SIGTERM or Ctrl-C\n"
	    "                              stops it and hands over\n"
	    "  elect [--zookeeper SERVERS] [OPTIONS] PATH [ID]\n"
	    "                              wait to lead, print the epoch, hold until\n"
	    "                              SIGTERM or Ctrl-C, hand over, exit 0\n"
	    "\n"
	    "Options:\n"
	    "  -s, --socket PATH   the agent's socket (default $ZKELECT_SOCKET or\n"
	    "                      " CONFIG_DEFAULT_SOCKET ")\n"
	    "  -h, --help          this help\n"
	    "  -V, --version       print the version\n"
	    "\n"
	    "Exit status: 0 ok, 1 usage or configuration error (is-leader: not\n"
	    "leading), 2 agent or ZooKeeper unreachable, or an error, 3 wait timed\n"
	    "out (--timeout 0: the condition does not hold; partitions' cluster\n"
	    "view: not balanced and settled); run, lock and elect exit with their\n"
	    "command's status (zkelectctl(1)).\n");
}

/* Anything left after a command's options is refused, with usage. */
static int
stray_arguments(const char *cmd, int argc, char *argv[])
{
	if (optind >= argc)
		return 0;
	fprintf(stderr, "zkelectctl: %s: unexpected argument '%s'\n", cmd,
	    argv[optind]);
	usage(stderr);
	return -1;
}

static int
request(const char *method, const char *target, int timeout_ms,
    struct client_response *resp)
{
	if (client_request(socket_path, method, target, timeout_ms, resp) == -1) {
		fprintf(stderr, "zkelectctl: cannot reach the agent at %s: %s\n",
		    socket_path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Milliseconds as seconds for a person: "8.2 s", "41 s". */
static void
print_seconds(const char *ms)
{
	double sec = strtod(ms, NULL) / 1000.0;

	printf(sec < 10 ? "%.1f s" : "%.0f s", sec);
}

/* --- partitions --- */

/* "/v1/partitions/NAME" and suffix, the name percent-encoded. */
static void
partition_target(char *buf, size_t len, const char *suffix)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *c;
	size_t n;

	n = (size_t)snprintf(buf, len, "/v1/partitions/");
	for (c = (const unsigned char *)partition; *c != '\0' && n + 4 < len;
	    c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || strchr("-._~", *c) != NULL)
			buf[n++] = (char)*c;
		else {
			buf[n++] = '%';
			buf[n++] = hex[*c >> 4];
			buf[n++] = hex[*c & 15];
		}
	}
	buf[n] = '\0';
	snprintf(buf + n, len - n, "%s", suffix);
}

/*
 * Says why the agent refused a partition request (an unknown name, an
 * agent without partitions, anything else) and gives zkelectctl's status.
 */
static int
partition_refused(const char *what, struct client_response *resp)
{
	char err[300] = "";

	if (client_json_member(resp->body, "error", err, sizeof(err)) == -1)
		snprintf(err, sizeof(err), "%s", resp->body);
	err[strcspn(err, "\n")] = '\0';
	if (resp->code == 404 && strcmp(err, "no partitions configured") == 0)
		fprintf(stderr, "zkelectctl: %s: the agent at %s has no "
		    "partitions (it answered: %s)\n", what, socket_path, err);
	else if (resp->code == 404 && partition != NULL)
		fprintf(stderr, "zkelectctl: %s: the agent at %s has no partition "
		    "'%s' (it answered 404: %s); zkelectctl partitions lists "
		    "them\n", what, socket_path, partition, err);
	else
		fprintf(stderr, "zkelectctl: %s: the agent at %s answered %d: %s\n",
		    what, socket_path, resp->code, err);
	return EXIT_AGENT;
}

/* The entry named `partition` in a /v1/partitions list (free it), or NULL. */
static char *
partition_entry(const char *list)
{
	const char *cur = client_json_items(list, "partitions");
	char *e, name[512];

	while ((e = client_json_next(&cur)) != NULL) {
		if (client_json_member(e, "name", name, sizeof(name)) == 0 &&
		    strcmp(name, partition) == 0)
			return e;
		free(e);
	}
	return NULL;
}

/*
 * One look at partition `partition`: with wait_ms 0 its own entry
 * (/v1/partitions/NAME), else a long poll of the list past index. Returns
 * the entry (free it) and the list's index in index (unchanged by a look
 * at the entry alone), or NULL: *err is the errno of a failed request, or
 * 0 when the agent answered but not with that partition (said here).
 */
static char *
partition_look(const char *what, uint64_t wait_ms, int timeout_ms,
    char *index, size_t ilen, int *err)
{
	struct client_response resp;
	char target[1024], *e;

	if (wait_ms == 0)
		partition_target(target, sizeof(target), "");
	else
		snprintf(target, sizeof(target), "/v1/partitions?wait=%" PRIu64
		    "ms&index=%s", wait_ms, index);
	if (client_request(socket_path, "GET", target, timeout_ms, &resp) == -1) {
		*err = errno;
		return NULL;
	}
	*err = 0;
	if (resp.code != 200) {
		partition_refused(what, &resp);
		client_response_free(&resp);
		return NULL;
	}
	if (wait_ms == 0) {
		e = resp.body;	/* the entry itself */
		resp.body = NULL;
		return e;
	}
	if (client_json_member(resp.body, "index", index, ilen) == -1 ||
	    (e = partition_entry(resp.body)) == NULL) {
		fprintf(stderr, "zkelectctl: %s: the agent at %s lists no "
		    "partition '%s'\n", what, socket_path, partition);
		client_response_free(&resp);
		return NULL;
	}
	client_response_free(&resp);
	return e;
}

/*
 * What wait --change compares for a partition: this instance's role and
 * epoch there, and the owner it names with the owner's epoch.
 */
static void
partition_term(const char *e, char *buf, size_t len)
{
	char role[32] = "", epoch[32] = "", leader[600] = "null", lid[300] = "",
	    lepoch[32] = "";

	client_json_member(e, "role", role, sizeof(role));
	client_json_member(e, "epoch", epoch, sizeof(epoch));
	if (client_json_member(e, "leader", leader, sizeof(leader)) == 0 &&
	    strcmp(leader, "null") != 0) {
		client_json_member(leader, "id", lid, sizeof(lid));
		client_json_member(leader, "epoch", lepoch, sizeof(lepoch));
	}
	snprintf(buf, len, "%s %s %s %s", role, epoch, lid, lepoch);
}

/* One line about one partition's entry. */
static void
print_partition(const char *e)
{
	char name[512] = "?", role[32] = "?", epoch[32] = "null", lease[32] = "0",
	    leader[600] = "null", lid[300] = "", lepoch[32] = "", assigned[8] = "";

	client_json_member(e, "name", name, sizeof(name));
	client_json_member(e, "role", role, sizeof(role));
	client_json_member(e, "epoch", epoch, sizeof(epoch));
	client_json_member(e, "lease_remaining_ms", lease, sizeof(lease));
	client_json_member(e, "assigned", assigned, sizeof(assigned));
	if (client_json_member(e, "leader", leader, sizeof(leader)) == 0 &&
	    strcmp(leader, "null") != 0) {
		client_json_member(leader, "id", lid, sizeof(lid));
		client_json_member(leader, "epoch", lepoch, sizeof(lepoch));
	}
	printf("partition %s: %s", name, role);
	if (strcmp(role, "leader") == 0)
		printf(" (epoch %s, lease %s ms)", epoch, lease);
	if (lid[0] != '\0')
		printf(", leader %s (epoch %s)", lid, lepoch);
	else
		printf(", leader none known");
	printf(", %s\n", strcmp(assigned, "true") == 0 ?
	    "assigned to this instance" : "not assigned to this instance");
}

static void
partitions_usage(FILE *f)
{
	fprintf(f, "usage: zkelectctl partitions [--json] [--timeout DURATION]\n"
	    "       zkelectctl partitions -c FILE | --cluster [--json] "
	    "[--timeout DURATION]\n"
	    "       zkelectctl partitions --zookeeper SERVERS PATH [--json] "
	    "[--timeout DURATION]\n");
}

/*
 * partitions: this agent's view over its socket; or, with -c FILE,
 * --zookeeper SERVERS PATH, --cluster, or a PATH and $ZKELECT_ZOOKEEPER,
 * the cluster view read from ZooKeeper (partitions.c).
 */
static int
cmd_partitions(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "config", required_argument, NULL, 'c' },
		{ "zookeeper", required_argument, NULL, 'z' },
		{ "cluster", no_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 } };
	struct client_response resp;
	const char *cur, *file = NULL, *servers = NULL, *env;
	char *e, id[300] = "?", members[16] = "0", name[512], role[32],
	    leader[600], owner[300], epoch[32], lease[32], assigned[8],
	    is_leader[8];
	uint64_t timeout_ms = 0;
	bool json = false, cluster = false;
	int ch, wname = 9, wowner = 5, n = 0, owned = 0, nassigned = 0, k;

	/* 0: getopt starts afresh, options may follow PATH (main's "+"
	 * would otherwise stay in force). */
	optind = 0;
	while ((ch = getopt_long(argc, argv, "jc:", opts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			json = true;
			break;
		case 'c':
			file = optarg;
			cluster = true;
			break;
		case 'z':
			servers = optarg;
			cluster = true;
			break;
		case 'C':
			cluster = true;
			break;
		case 't':
			if (config_parse_duration(optarg, &timeout_ms) == -1 ||
			    timeout_ms == 0) {
				fprintf(stderr, "zkelectctl: partitions: invalid "
				    "--timeout '%s' (use e.g. 10s)\n", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			partitions_usage(stderr);
			return EXIT_USAGE;
		}
	}
	/* A PATH with $ZKELECT_ZOOKEEPER is the command line's way too, as
	 * for members. */
	if (!cluster && optind < argc && (env = getenv("ZKELECT_ZOOKEEPER")) !=
	    NULL && env[0] != '\0')
		cluster = true;
	if (cluster)
		return partitions_cluster(file, servers, argc - optind,
		    argv + optind, json, timeout_ms > 0 ? timeout_ms : 10000,
		    partitions_usage);
	if (optind < argc) {
		fprintf(stderr, "zkelectctl: partitions: unexpected argument "
		    "'%s' (a PATH needs --zookeeper SERVERS or "
		    "$ZKELECT_ZOOKEEPER)\n", argv[optind]);
		partitions_usage(stderr);
		return EXIT_USAGE;
	}
	if (timeout_ms == 0)
		timeout_ms = 5000;
	if (request("GET", "/v1/partitions", timeout_ms > INT32_MAX ? INT32_MAX :
	    (int)timeout_ms, &resp) == -1)
		return EXIT_AGENT;
	if (resp.code != 200) {
		partition_refused("partitions", &resp);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	if (json) {
		fputs(resp.body, stdout);
		client_response_free(&resp);
		return 0;
	}
	if (client_json_items(resp.body, "partitions") == NULL) {
		fprintf(stderr, "zkelectctl: partitions: unexpected answer: %s",
		    resp.body);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	client_json_member(resp.body, "id", id, sizeof(id));
	client_json_member(resp.body, "members", members, sizeof(members));
	/* Two passes: the widths, then the rows. */
	for (k = 0; k < 2; k++) {
		if (k == 1)
			printf("%-*s  %-*s  %-20s  %-9s  %s\n", wname, "PARTITION",
			    wowner, "OWNER", "EPOCH", "ROLE", "LEASE");
		cur = client_json_items(resp.body, "partitions");
		while ((e = client_json_next(&cur)) != NULL) {
			strcpy(name, "?");
			strcpy(role, "?");
			strcpy(owner, "-");
			strcpy(epoch, "-");
			strcpy(lease, "0");
			assigned[0] = is_leader[0] = '\0';
			client_json_member(e, "name", name, sizeof(name));
			client_json_member(e, "role", role, sizeof(role));
			client_json_member(e, "lease_remaining_ms", lease,
			    sizeof(lease));
			client_json_member(e, "assigned", assigned,
			    sizeof(assigned));
			client_json_member(e, "is_leader", is_leader,
			    sizeof(is_leader));
			if (client_json_member(e, "leader", leader,
			    sizeof(leader)) == 0 && strcmp(leader, "null") != 0) {
				client_json_member(leader, "id", owner,
				    sizeof(owner));
				client_json_member(leader, "epoch", epoch,
				    sizeof(epoch));
			}
			free(e);
			if (k == 0) {
				if ((int)strlen(name) > wname)
					wname = (int)strlen(name);
				if ((int)strlen(owner) > wowner)
					wowner = (int)strlen(owner);
				n++;
				owned += strcmp(is_leader, "true") == 0;
				nassigned += strcmp(assigned, "true") == 0;
				continue;
			}
			printf("%-*s  %-*s  %-20s  %-9s  ", wname, name, wowner,
			    owner, strcmp(epoch, "null") == 0 ? "-" : epoch, role);
			if (strcmp(is_leader, "true") == 0)
				print_seconds(lease);
			else
				printf("-");
			printf("\n");
		}
	}
	k = atoi(members);
	printf("%s: %s member%s, owns %d of %d partition%s, %d assigned to it",
	    id, members, k == 1 ? "" : "s", owned, n, n == 1 ? "" : "s",
	    nassigned);
	if (k > 0)
		printf(" (fair share %d to %d)", n / k, (n + k - 1) / k);
	printf("\n");
	client_response_free(&resp);
	return 0;
}

/*
 * One line: who, the role, what the agent is doing about it, the leader,
 * the count (with its age when it is not kept current), the session:
 *   orders-2: follower, holding off after a resign: rejoins the queue in
 *   8.2 s, leader orders-1, 3 candidates (counted 2.1 s ago), session
 *   connected
 */
static void
print_human(const char *json)
{
	char role[32] = "?", epoch[32] = "null", lease[32] = "0", id[300] = "?",
	    leader[600] = "null", lid[300] = "", cands[16] = "0", state[32] = "?",
	    dup[8] = "", age[32] = "null", pos[16] = "-1", hold[32] = "0",
	    why[300] = "", reason[64] = "", bar[160] = "", parts[300],
	    pcount[16] = "?", powned[16] = "?", passigned[16] = "?",
	    pmembers[16] = "?", warning[300] = "";

	client_json_get(json, "role", role, sizeof(role));
	client_json_get(json, "epoch", epoch, sizeof(epoch));
	client_json_get(json, "lease_remaining_ms", lease, sizeof(lease));
	client_json_get(json, "id", id, sizeof(id));
	client_json_get(json, "leader", leader, sizeof(leader));
	client_json_get(json, "candidates", cands, sizeof(cands));
	client_json_get(json, "candidates_age_ms", age, sizeof(age));
	client_json_get(json, "position", pos, sizeof(pos));
	client_json_get(json, "hold_remaining_ms", hold, sizeof(hold));
	client_json_get(json, "state", state, sizeof(state));
	client_json_get(json, "role_reason", reason, sizeof(reason));
	if (client_json_get(json, "reason", bar, sizeof(bar)) == 0 &&
	    strcmp(bar, "null") == 0)
		bar[0] = '\0';
	if (client_json_get(json, "last_error", why, sizeof(why)) == 0 &&
	    strcmp(why, "null") == 0)
		why[0] = '\0';
	if (strcmp(leader, "null") != 0)
		client_json_get(leader, "id", lid, sizeof(lid));
	/* The session's warning (an understated zookeeper.tick_time). */
	if (client_json_get(json, "warning", warning, sizeof(warning)) == 0 &&
	    strcmp(warning, "null") == 0)
		warning[0] = '\0';
	if (client_json_member(json, "partitions", parts, sizeof(parts)) == 0 &&
	    parts[0] == '{') {
		/* Leadership is per partition: say what this agent owns. */
		client_json_member(parts, "count", pcount, sizeof(pcount));
		client_json_member(parts, "owned", powned, sizeof(powned));
		client_json_member(parts, "assigned", passigned,
		    sizeof(passigned));
		client_json_member(parts, "members", pmembers, sizeof(pmembers));
		printf("%s: owns %s of %s partitions (%s assigned to it, %s "
		    "member%s), session %s; zkelectctl partitions shows each%s%s\n",
		    id, powned, pcount, passigned, pmembers,
		    strcmp(pmembers, "1") == 0 ? "" : "s", state,
		    warning[0] != '\0' ? "; WARNING: " : "", warning);
		return;
	}
	printf("%s: %s", id, role);
	if (strcmp(role, "leader") == 0) {
		printf(" (epoch %s, lease %s ms)", epoch, lease);
		if (strcmp(state, "connected") != 0)
			printf(", riding out a lost connection to ZooKeeper "
			    "within the lease");
	} else if (strcmp(hold, "0") != 0) {
		printf(", holding off after a resign: rejoins the queue in ");
		print_seconds(hold);
	} else if (strcmp(state, "connecting") == 0)
		printf(", waiting to connect to ZooKeeper%s%s%s",
		    why[0] != '\0' ? " (last error: " : "", why,
		    why[0] != '\0' ? ")" : "");
	else if (strcmp(state, "connected") != 0)
		printf(", not leading: session %s", state);
	else if (bar[0] != '\0')
		printf(", not leading: %s", bar);
	else if (strcmp(role, "observer") == 0)
		printf(", observing (not a candidate)");
	else if (strcmp(role, "unknown") == 0)
		printf(", not leading (%s)", reason[0] != '\0' ? reason : "?");
	else if (strcmp(role, "follower") == 0 && strcmp(pos, "-1") != 0 &&
	    strcmp(pos, "0") != 0)
		printf(", queued at position %s%s", pos,
		    strcmp(pos, "1") == 0 ? " (next in line)" : "");
	else if (strcmp(pos, "0") == 0)
		printf(", first in the queue, taking over");
	else if (reason[0] != '\0')
		printf(", not leading (%s)", reason);
	printf(", leader %s, %s candidate%s", lid[0] != '\0' ? lid : "none",
	    cands, strcmp(cands, "1") == 0 ? "" : "s");
	if (strcmp(age, "null") == 0)
		printf(" (not counted yet)");
	else if (strcmp(age, "0") != 0) {
		printf(" (counted ");
		print_seconds(age);
		printf(" ago)");
	}
	printf(", session %s", state);
	if (client_json_get(json, "duplicate_id", dup, sizeof(dup)) == 0 &&
	    strcmp(dup, "true") == 0)
		printf("; WARNING: id %s is also used by another agent in this "
		    "election", id);
	if (warning[0] != '\0')
		printf("; WARNING: %s", warning);
	printf("\n");
}

static int
cmd_status(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "partition", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 } };
	struct client_response resp;
	char target[1024];
	bool json = false;
	int ch;

	while ((ch = getopt_long(argc, argv, "jp:", opts, NULL)) != -1) {
		if (ch == 'p')
			partition = optarg;
		else if (ch == 'j')
			json = true;
		else {
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (stray_arguments("status", argc, argv) == -1)
		return EXIT_USAGE;
	if (partition != NULL)
		partition_target(target, sizeof(target), "");
	else
		snprintf(target, sizeof(target), "/v1/status");
	if (request("GET", target, 5000, &resp) == -1)
		return EXIT_AGENT;
	if (resp.code != 200 && partition != NULL) {
		partition_refused("status", &resp);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	if (resp.code != 200) {
		fprintf(stderr, "zkelectctl: agent answered %d: %s", resp.code, resp.body);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	if (json)
		fputs(resp.body, stdout);
	else if (partition != NULL)
		print_partition(resp.body);
	else
		print_human(resp.body);
	client_response_free(&resp);
	return 0;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A duration as in the config ("500ms", "30s"); a bare "0" too. */
static int
parse_duration(const char *text, uint64_t *ms)
{
	if (strcmp(text, "0") == 0) {
		*ms = 0;
		return 0;
	}
	return config_parse_duration(text, ms);
}

/* Reads role and index from a status answer; -1 (said) if it has none. */
static int
status_fields(const char *what, struct client_response *resp, char *role,
    size_t rlen, char *index, size_t ilen)
{
	if (resp->code == 200 &&
	    client_json_get(resp->body, "role", role, rlen) == 0 &&
	    client_json_get(resp->body, "index", index, ilen) == 0)
		return 0;
	fprintf(stderr, "zkelectctl: %s: unexpected answer %d: %s", what,
	    resp->code, resp->body);
	return -1;
}

static int
cmd_wait(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "leader", no_argument, NULL, 'l' },
		{ "follower", no_argument, NULL, 'f' },
		{ "change", no_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "partition", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 } };
	struct client_response resp;
	char target[128], role[32], index[32], term[1024], first[1024], *e;
	uint64_t timeout_ms = 0, deadline = 0, now, first_index = 0, left;
	bool forever = true, held;
	int ch, want = 0, polls = 0, err;

	while ((ch = getopt_long(argc, argv, "p:", opts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			partition = optarg;
			break;
		case 'l': case 'f': case 'c':
			if (want != 0) {
				fprintf(stderr, "zkelectctl: wait: choose one of "
				    "--leader, --follower, --change\n");
				return EXIT_USAGE;
			}
			want = ch;
			break;
		case 't':
			if (parse_duration(optarg, &timeout_ms) == -1) {
				fprintf(stderr, "zkelectctl: wait: invalid --timeout "
				    "'%s' (use e.g. 30s, or 0 to check once)\n",
				    optarg);
				return EXIT_USAGE;
			}
			forever = false;
			break;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (stray_arguments("wait", argc, argv) == -1)
		return EXIT_USAGE;
	if (want == 0) {
		fprintf(stderr, "zkelectctl: wait: say what to wait for: "
		    "--leader, --follower or --change\n");
		return EXIT_USAGE;
	}
	if (!forever)
		deadline = now_ms() + timeout_ms;
	for (;;) {
		now = now_ms();
		left = forever ? 30000 : deadline > now ? deadline - now : 0;
		if (left > 30000)
			left = 30000;
		if (partition != NULL) {
			/* The first look, and the last, at the entry itself;
			 * the rest long poll the list. */
			e = partition_look("wait", polls == 0 ? 0 : left,
			    (int)left + 5000, index, sizeof(index), &err);
			if (e == NULL && err != 0)
				fprintf(stderr, "zkelectctl: cannot reach the agent "
				    "at %s: %s\n", socket_path, strerror(err));
			if (e == NULL)
				return EXIT_AGENT;
			if (client_json_member(e, "role", role,
			    sizeof(role)) == -1)
				strcpy(role, "?");
			partition_term(e, term, sizeof(term));
			free(e);
			if (polls++ == 0) {
				snprintf(first, sizeof(first), "%s", term);
				strcpy(index, "0");	/* the list's own, next */
			}
			held = (want == 'l' && strcmp(role, "leader") == 0) ||
			    (want == 'f' && strcmp(role, "follower") == 0) ||
			    (want == 'c' && strcmp(term, first) != 0);
			goto check;
		}
		/* The first look, and the last, answer at once. */
		if (polls == 0 || left == 0)
			snprintf(target, sizeof(target), "/v1/status");
		else
			snprintf(target, sizeof(target), "/v1/status?wait=%" PRIu64
			    "ms&index=%s", left, index);
		if (request("GET", target, (int)left + 5000, &resp) == -1)
			return EXIT_AGENT;
		if (status_fields("wait", &resp, role, sizeof(role), index,
		    sizeof(index)) == -1) {
			client_response_free(&resp);
			return EXIT_AGENT;
		}
		client_response_free(&resp);
		if (polls++ == 0)
			first_index = strtoull(index, NULL, 10);
		held = (want == 'l' && strcmp(role, "leader") == 0) ||
		    (want == 'f' && strcmp(role, "follower") == 0) ||
		    (want == 'c' && strtoull(index, NULL, 10) != first_index);
check:
		if (held) {
			printf("%s\n", role);
			return 0;
		}
		if (!forever && timeout_ms == 0) {
			fprintf(stderr, "zkelectctl: wait: %s (role %s; checked "
			    "once, --timeout 0)\n", want == 'l' ? "not leading" :
			    want == 'f' ? "not following" : "no change", role);
			return EXIT_TIMEOUT;
		}
		if (!forever && now_ms() >= deadline) {
			fprintf(stderr, "zkelectctl: wait: timed out (role %s)\n", role);
			return EXIT_TIMEOUT;
		}
	}
}

/*
 * One look, no waiting: exit 0 when this instance leads at the moment the
 * agent answers, 1 when it does not, 2 when the agent cannot be asked.
 */
static int
cmd_is_leader(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "partition", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 } };
	struct client_response resp;
	char role[32], index[32], is_leader[16], target[1024];
	bool quiet = false;
	int ch;

	while ((ch = getopt_long(argc, argv, "qp:", opts, NULL)) != -1) {
		if (ch == 'p')
			partition = optarg;
		else if (ch == 'q')
			quiet = true;
		else {
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (stray_arguments("is-leader", argc, argv) == -1)
		return EXIT_USAGE;
	if (partition != NULL) {
		/* 200 while this instance owns it, 503 while not. */
		partition_target(target, sizeof(target), "/leader");
		if (request("GET", target, 5000, &resp) == -1)
			return EXIT_AGENT;
		if (resp.code != 200 && resp.code != 503) {
			partition_refused("is-leader", &resp);
			client_response_free(&resp);
			return EXIT_AGENT;
		}
		if (client_json_member(resp.body, "role", role,
		    sizeof(role)) == -1)
			strcpy(role, resp.code == 200 ? "leader" : "not leading");
		ch = resp.code;
		client_response_free(&resp);
		if (!quiet)
			printf("%s\n", role);
		return ch == 200 ? 0 : EXIT_NOT_LEADER;
	}
	if (request("GET", "/v1/status", 5000, &resp) == -1)
		return EXIT_AGENT;
	if (status_fields("is-leader", &resp, role, sizeof(role), index,
	    sizeof(index)) == -1 || client_json_get(resp.body, "is_leader",
	    is_leader, sizeof(is_leader)) == -1) {
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	client_response_free(&resp);
	if (!quiet)
		printf("%s\n", role);
	return strcmp(is_leader, "true") == 0 ? 0 : EXIT_NOT_LEADER;
}

static int
cmd_resign(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "hold", required_argument, NULL, 'H' },
		{ "partition", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 } };
	struct client_response resp;
	const char *hold = NULL;
	char target[512];
	size_t n;
	uint64_t ms;
	int ch;

	while ((ch = getopt_long(argc, argv, "p:", opts, NULL)) != -1) {
		if (ch == 'p') {
			partition = optarg;
			continue;
		}
		if (ch != 'H') {
			usage(stderr);
			return EXIT_USAGE;
		}
		hold = optarg;
		if (config_parse_duration(hold, &ms) == -1) {
			fprintf(stderr, "zkelectctl: resign: invalid --hold '%s' "
			    "(use e.g. 10s)\n", hold);
			return EXIT_USAGE;
		}
	}
	if (stray_arguments("resign", argc, argv) == -1)
		return EXIT_USAGE;
	/* -p NAME: that partition moves to another member. */
	if (partition != NULL)
		partition_target(target, sizeof(target), "/resign");
	else
		snprintf(target, sizeof(target), "/v1/resign");
	n = strlen(target);
	if (hold != NULL)
		snprintf(target + n, sizeof(target) - n, "?hold=%s", hold);
	if (request("POST", target, 10000, &resp) == -1)
		return EXIT_AGENT;
	if (resp.code != 200) {
		fprintf(stderr, "zkelectctl: resign refused (%d): %s", resp.code,
		    resp.body);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	if (partition != NULL)
		printf("resigned partition %s\n", partition);
	else
		printf("resigned\n");
	client_response_free(&resp);
	return 0;
}

/* --- drain, undrain: every partition handed over, or a share again. --- */

static int
cmd_drain(const char *cmd, int argc, char *argv[])
{
	struct client_response resp;
	char target[32];

	if (stray_arguments(cmd, argc, argv) == -1)
		return EXIT_USAGE;
	snprintf(target, sizeof(target), "/v1/%s", cmd);
	if (request("POST", target, 10000, &resp) == -1)
		return EXIT_AGENT;
	if (resp.code != 200) {
		fprintf(stderr, "zkelectctl: %s refused (%d): %s", cmd,
		    resp.code, resp.body);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	printf("%s\n", strcmp(cmd, "drain") == 0 ? "drained: every partition "
	    "is handed over" : "undrained: a share is taken again");
	client_response_free(&resp);
	return 0;
}

/* --- run: a command that lives only while this instance leads. --- */

#define RUN_POLL_MS		100	/* long-poll slice while the command runs */
#define RUN_IDLE_WAIT_MS	30000	/* long poll while not leading */
#define RUN_FRESH_MS		150	/* an answer this quick measures the lease */
#define RUN_CONFIRM_MS		100	/* a last quick look before giving up */
#define RUN_KILL_MARGIN_MS	200	/* SIGKILL this long before the lease ends */

static volatile sig_atomic_t run_stop_sig;

static void
run_on_signal(int sig)
{
	run_stop_sig = sig;
}

/*
 * What the agent said last. Its lease ends no earlier than the moment we
 * sent the request plus the lease_remaining_ms it answered: it wrote the
 * answer after we sent. That bound falls short by at most the time the
 * answer took, which is fine for a 100 ms slice (RUN_FRESH_MS). A long
 * poll that waited seconds for a change, or an answer that sat in the
 * socket while the agent or we were stopped, gives a bound that looks
 * lapsed while the lease runs; so such an answer, when it says leader, is
 * checked at once with a request that does not wait (run_look).
 */
struct run_view {
	bool	 ok;			/* the agent answered */
	int	 err;			/* errno when it did not */
	char	 role[32];
	char	 epoch[32];
	char	 session[32];
	char	 index[32];		/* "0": the next long poll answers at once */
	char	 leader[300];		/* the leader's id, "" when none is known */
	uint64_t deadline;		/* lease end, when role is leader */
	uint64_t took;			/* ms from sending to the whole answer */
	bool	 refused;		/* -p: the agent has no such partition */
};

/*
 * Fills v from an answer's object (the status document, or a partition's
 * entry): role, epoch, lease, the leader, and the session's state when the
 * object has one. False when a field the view needs is missing.
 */
static bool
run_view_read(struct run_view *v, const char *obj, uint64_t sent)
{
	char lease[32], leader[600], lepoch[32], session[300];

	if (client_json_member(obj, "role", v->role, sizeof(v->role)) == -1 ||
	    client_json_member(obj, "epoch", v->epoch, sizeof(v->epoch)) == -1 ||
	    client_json_member(obj, "lease_remaining_ms", lease,
	    sizeof(lease)) == -1)
		return false;
	/* A partition's entry has no session of its own. */
	if (client_json_member(obj, "session", session, sizeof(session)) == -1 ||
	    client_json_member(session, "state", v->session,
	    sizeof(v->session)) == -1)
		strcpy(v->session, "?");
	v->leader[0] = '\0';
	if (client_json_member(obj, "leader", leader, sizeof(leader)) == 0 &&
	    strcmp(leader, "null") != 0 &&
	    client_json_member(leader, "id", v->leader, sizeof(v->leader)) == 0 &&
	    client_json_member(leader, "epoch", lepoch, sizeof(lepoch)) == 0)
		snprintf(v->leader + strlen(v->leader),
		    sizeof(v->leader) - strlen(v->leader), " (epoch %s)", lepoch);
	if (strcmp(v->role, "leader") == 0)
		v->deadline = sent + strtoull(lease, NULL, 10);
	return true;
}

/* run_ask for partition `partition`: its entry as run_ask reads status. */
static void
run_ask_partition(struct run_view *v, int wait_ms, int timeout_ms)
{
	char *e;
	uint64_t sent = now_ms();
	int err;

	v->ok = false;
	e = partition_look("run", (uint64_t)wait_ms, timeout_ms, v->index,
	    sizeof(v->index), &err);
	if (e == NULL) {
		/* Not answered (err), or answered without the partition
		 * (said by partition_look): the agent lost it, or never had it. */
		v->err = err != 0 ? err : EPROTO;
		v->refused = err == 0;
		strcpy(v->index, "0");
		return;
	}
	v->took = now_ms() - sent;
	if (run_view_read(v, e, sent))
		v->ok = true;
	else {
		v->err = EPROTO;
		strcpy(v->index, "0");
	}
	free(e);
}

/* One request: a long poll of up to wait_ms (0: answer now). */
static void
run_ask(struct run_view *v, int wait_ms, int timeout_ms)
{
	struct client_response resp;
	char target[128];
	uint64_t sent = now_ms();

	if (partition != NULL) {
		run_ask_partition(v, wait_ms, timeout_ms);
		return;
	}
	if (wait_ms > 0)
		snprintf(target, sizeof(target), "/v1/status?wait=%dms&index=%s",
		    wait_ms, v->index);
	else
		snprintf(target, sizeof(target), "/v1/status");
	v->ok = false;
	if (client_request(socket_path, "GET", target, timeout_ms, &resp) == -1) {
		v->err = errno;
		/* A restarted agent counts its index from 1 again: never long
		 * poll a new connection with the index of an old one. */
		strcpy(v->index, "0");
		return;
	}
	v->took = now_ms() - sent;
	if (resp.code == 200 &&
	    client_json_member(resp.body, "index", v->index,
	    sizeof(v->index)) == 0 && run_view_read(v, resp.body, sent))
		v->ok = true;
	else {
		v->err = EPROTO;
		strcpy(v->index, "0");
	}
	client_response_free(&resp);
}

/* Time left before the kill point of a lease ending at deadline. */
static uint64_t
run_time_left(uint64_t deadline)
{
	uint64_t now = now_ms();

	return deadline > now + RUN_KILL_MARGIN_MS ?
	    deadline - RUN_KILL_MARGIN_MS - now : 0;
}

/*
 * Asks, then asks again at once if a leader answer was not quick. With a
 * command running under epoch term, the lease of that term is extended
 * from each answer that names it, and no request outlasts its kill point
 * but the last quick look (RUN_CONFIRM_MS).
 */
static void
run_look(struct run_view *v, int wait_ms, const char *term, uint64_t *lease_end)
{
	uint64_t left = 0;
	int timeout_ms;

	if (lease_end != NULL) {
		left = run_time_left(*lease_end);
		if (left <= (uint64_t)wait_ms)
			wait_ms = 0;
		timeout_ms = left > RUN_CONFIRM_MS ? (int)left : RUN_CONFIRM_MS;
	} else
		timeout_ms = wait_ms + 2000;
	run_ask(v, wait_ms, timeout_ms);
	if (v->ok && lease_end != NULL && strcmp(v->role, "leader") == 0 &&
	    strcmp(v->epoch, term) == 0 && v->deadline > *lease_end)
		*lease_end = v->deadline;	/* same term: the lease runs on */
	if (!v->ok || v->took <= RUN_FRESH_MS || strcmp(v->role, "leader") != 0 ||
	    run_stop_sig != 0)
		return;
	if (lease_end != NULL) {
		left = run_time_left(*lease_end);
		timeout_ms = left > RUN_CONFIRM_MS ? (int)left : RUN_CONFIRM_MS;
	} else
		timeout_ms = 2000;
	run_ask(v, 0, timeout_ms);
	if (v->ok && lease_end != NULL && strcmp(v->role, "leader") == 0 &&
	    strcmp(v->epoch, term) == 0 && v->deadline > *lease_end)
		*lease_end = v->deadline;
}

/*
 * Starts the command under a guard process (agent/guard.c): the command's
 * whole process tree ends when the command does, when we stop it, and when
 * we die, kill -9 included. Waits for the guard's report: returns the
 * command's pid, or -1 (an exec error is said here, once; the guard then
 * exits 127 and the caller reaps it).
 */
static pid_t
run_spawn(struct guard *g, char *argv[], const char *epoch)
{
	struct pollfd pfd;
	char why[512];
	pid_t pid = -1;
	int err;

	setenv("ZKELECT_ROLE", "leader", 1);
	setenv("ZKELECT_EPOCH", epoch, 1);
	if (partition != NULL)
		setenv("ZKELECT_PARTITION", partition, 1);
	if (guard_spawn(g, argv, NULL, GUARD_SEARCH_PATH) == -1) {
		perror("zkelectctl: run: cannot start the command's guard");
		return -1;
	}
	pfd.fd = g->ctl;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 5000) == 1 && guard_report(g, &pid, &err) == 1 &&
	    err != 0) {
		/* ENOENT for a file that is there: its #! interpreter is not. */
		if ((err == ENOENT || err == EACCES) && strchr(argv[0], '/') !=
		    NULL && config_check_interpreter(argv[0], why,
		    sizeof(why)) == -1)
			fprintf(stderr, "zkelectctl: run: cannot run %s: %s\n",
			    argv[0], why);
		else
			fprintf(stderr, "zkelectctl: run: cannot run %s: %s\n",
			    argv[0], strerror(err));
		return -1;
	}
	return pid;
}

/* Stops the command: SIGTERM now, SIGKILL to its whole tree by kill_at;
 * returns its status once nothing of it is left. */
static int
run_stop(struct guard *g, uint64_t kill_at)
{
	int status = 0;
	bool killed = false, grace = now_ms() < kill_at;

	guard_term(g);
	for (;;) {
		if (waitpid(g->pid, &status, WNOHANG) == g->pid)
			break;
		if (!killed && now_ms() >= kill_at) {
			if (grace)	/* else the caller said why: no time left */
				fprintf(stderr, "zkelectctl: run: the command did "
				    "not stop in time; SIGKILL to its process tree\n");
			guard_kill(g);
			killed = true;
		}
		usleep(5000);
	}
	guard_release(g);
	g->pid = -1;
	return status;
}

/* The command's exit status as zkelectctl's own, said on stderr. */
static int
run_ended(const char *cmd, pid_t pid, int status)
{
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "zkelectctl: run: %s (pid %d) was killed by SIG%s "
		    "while leading\n", cmd, (int)pid,
		    sigabbrev_np(WTERMSIG(status)) != NULL ?
		    sigabbrev_np(WTERMSIG(status)) : "?");
		return 128 + WTERMSIG(status);
	}
	fprintf(stderr, "zkelectctl: run: %s (pid %d) exited with status %d "
	    "while leading\n", cmd, (int)pid, WEXITSTATUS(status));
	return WEXITSTATUS(status);
}

/* Says why, then stops the command by the kill point of its lease. */
static void
run_halt(const char *cmd, struct guard *g, pid_t pid, uint64_t lease_end,
    const char *why)
{
	uint64_t left = run_time_left(lease_end);

	if (left > 0)
		fprintf(stderr, "zkelectctl: run: %s; stopping %s (pid %d): SIGTERM, "
		    "SIGKILL in %" PRIu64 " ms\n", why, cmd, (int)pid, left);
	else
		fprintf(stderr, "zkelectctl: run: %s; stopping %s (pid %d) with "
		    "SIGKILL: no time is left on the lease it ran under\n", why,
		    cmd, (int)pid);
	run_stop(g, lease_end - RUN_KILL_MARGIN_MS);
}

static int
cmd_run(int argc, char *argv[])
{
	struct run_view v;
	struct sigaction sa;
	char why[256], child_epoch[32] = "";
	const char *cmd;
	uint64_t lease_end = 0, kill_at;
	struct guard guard = { -1, -1, -1 };
	pid_t child = -1;		/* the command, under guard.pid */
	bool reachable = true, leading, quiet = false, said_wait = false;
	int status;

	/* Options before the command only: the command's own are its own. */
	while (argc > 1 && argv[1][0] == '-') {
		if (strcmp(argv[1], "--") == 0) {
			argc--;
			argv++;
			break;
		}
		if (strcmp(argv[1], "-p") == 0 ||
		    strcmp(argv[1], "--partition") == 0) {
			if (argc < 3) {
				fprintf(stderr, "zkelectctl: run: %s needs a "
				    "partition's name\n", argv[1]);
				usage(stderr);
				return EXIT_USAGE;
			}
			partition = argv[2];
			argc -= 2;
			argv += 2;
			continue;
		}
		if (strncmp(argv[1], "--partition=", 12) == 0) {
			partition = argv[1] + 12;
			argc--;
			argv++;
			continue;
		}
		if (strcmp(argv[1], "-q") != 0 && strcmp(argv[1], "--quiet") != 0) {
			fprintf(stderr, "zkelectctl: run: unknown option '%s' (use: "
			    "zkelectctl run [-p NAME] [-q] -- CMD [ARGS...])\n",
			    argv[1]);
			usage(stderr);
			return EXIT_USAGE;
		}
		quiet = true;
		argc--;
		argv++;
	}
	if (argc < 2) {
		fprintf(stderr, "zkelectctl: run: no command (use: zkelectctl run "
		    "[-p NAME] [-q] -- CMD [ARGS...])\n");
		return EXIT_USAGE;
	}
	if (partition != NULL && partition[0] == '\0') {
		fprintf(stderr, "zkelectctl: run: empty partition name\n");
		return EXIT_USAGE;
	}
	cmd = argv[1];
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = run_on_signal;	/* no SA_RESTART: a signal ends a wait */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	memset(&v, 0, sizeof(v));
	strcpy(v.index, "0");

	for (;;) {
		if (guard.pid > 0 && waitpid(guard.pid, &status, WNOHANG) ==
		    guard.pid) {
			/* The guard exits with the command's status once the
			 * command and all it started are gone. */
			guard_release(&guard);
			guard.pid = -1;
			if (child <= 0)
				return EXIT_AGENT;	/* it could not be run */
			return run_ended(cmd, child, status);
		}
		if (run_stop_sig != 0)
			break;

		/*
		 * While the command runs, no request may outlast the kill point
		 * of its lease: a stopped agent must not keep it alive. Past
		 * that point (we were stopped ourselves, say) one quick look
		 * decides. While it does not run, a long poll: any change
		 * answers at once.
		 */
		if (child > 0)
			run_look(&v, RUN_POLL_MS, child_epoch, &lease_end);
		else if (v.ok && strcmp(v.role, "leader") == 0)
			/* It leads, with too little lease left to start on:
			 * look again soon. */
			run_look(&v, RUN_POLL_MS, NULL, NULL);
		else
			run_look(&v, RUN_IDLE_WAIT_MS, NULL, NULL);
		if (run_stop_sig != 0)
			break;

		if (!v.ok && v.refused) {
			/* Said by partition_look: the agent has no such
			 * partition (any more). Not leading it, for good. */
			if (child > 0)
				run_halt(cmd, &guard, child, lease_end, "the "
				    "agent no longer has the partition");
			return EXIT_AGENT;
		}
		if (!v.ok) {
			if (v.err == ETIMEDOUT && child > 0)
				snprintf(why, sizeof(why), "the agent at %s did not "
				    "answer before the kill point of the lease of "
				    "epoch %s", socket_path, child_epoch);
			else if (v.err == ETIMEDOUT)
				snprintf(why, sizeof(why), "the agent at %s did not "
				    "answer in %d s", socket_path,
				    (RUN_IDLE_WAIT_MS + 2000) / 1000);
			else if (v.err == EPROTO)
				snprintf(why, sizeof(why), "lost the agent at %s "
				    "(the connection ended without an answer)",
				    socket_path);
			else
				snprintf(why, sizeof(why), "cannot reach the agent "
				    "at %s: %s", socket_path, strerror(v.err));
			if (child > 0) {
				run_halt(cmd, &guard, child, lease_end, why);
				child = -1;
			} else if (reachable && v.err != EPROTO) {
				/* Said once; retried quietly until it answers. */
				fprintf(stderr, "zkelectctl: run: %s; not leading "
				    "until it answers\n", why);
				reachable = false;
			}
			poll(NULL, 0, RUN_POLL_MS);	/* a signal ends it */
			continue;
		}
		if (!reachable) {
			fprintf(stderr, "zkelectctl: run: the agent at %s answers "
			    "again (role %s)\n", socket_path, v.role);
			reachable = true;
		}

		leading = strcmp(v.role, "leader") == 0;
		if (!leading && child <= 0 && !said_wait && !quiet)
			fprintf(stderr, "zkelectctl: run: waiting to lead%s%s "
			    "before starting %s: this instance is %s, leader %s\n",
			    partition != NULL ? " partition " : "",
			    partition != NULL ? partition : "", cmd,
			    v.role, v.leader[0] != '\0' ? v.leader :
			    "none known yet");
		said_wait = !leading && child <= 0 ? true : leading ? false :
		    said_wait;
		if (child > 0) {
			why[0] = '\0';
			if (!leading && partition != NULL)
				snprintf(why, sizeof(why), "no longer leading "
				    "partition %s: the agent reports role %s",
				    partition, v.role);
			else if (!leading)
				snprintf(why, sizeof(why), "no longer leading: the "
				    "agent reports role %s (session %s)", v.role,
				    v.session);
			else if (strcmp(v.epoch, child_epoch) != 0)
				snprintf(why, sizeof(why), "a new term (epoch %s) "
				    "replaces epoch %s", v.epoch, child_epoch);
			else if (run_time_left(lease_end) == 0)
				snprintf(why, sizeof(why), "the lease of epoch %s "
				    "was not confirmed in time", child_epoch);
			if (why[0] != '\0') {
				run_halt(cmd, &guard, child, lease_end, why);
				child = -1;
			}
		}
		if (guard.pid <= 0 && leading &&
		    run_time_left(v.deadline) > RUN_POLL_MS) {
			child = run_spawn(&guard, &argv[1], v.epoch);
			if (child == -1) {
				/* Said why; the guard exits as a shell would
				 * (127: not found, 126: not executable). */
				if (guard.pid <= 0)
					return EXIT_AGENT;
				waitpid(guard.pid, &status, 0);
				guard_release(&guard);
				return WIFEXITED(status) ? WEXITSTATUS(status) :
				    EXIT_AGENT;
			}
			snprintf(child_epoch, sizeof(child_epoch), "%s", v.epoch);
			lease_end = v.deadline;
			fprintf(stderr, "zkelectctl: run: leading%s%s (epoch %s); "
			    "started %s (pid %d)\n",
			    partition != NULL ? " partition " : "",
			    partition != NULL ? partition : "", v.epoch, cmd,
			    (int)child);
		}
	}
	fprintf(stderr, "zkelectctl: run: got SIG%s; ", sigabbrev_np(run_stop_sig));
	if (child > 0) {
		/* Five seconds to stop, but never past the lease. */
		kill_at = now_ms() + 5000;
		if (lease_end - RUN_KILL_MARGIN_MS < kill_at)
			kill_at = lease_end - RUN_KILL_MARGIN_MS;
		fprintf(stderr, "stopping %s (pid %d): SIGTERM, SIGKILL in %"
		    PRIu64 " ms\n", cmd, (int)child, run_time_left(lease_end) <
		    5000 ? run_time_left(lease_end) : 5000);
		run_stop(&guard, kill_at);
	} else
		fprintf(stderr, "exiting (%s is not running)\n", cmd);
	return 0;
}

int
main(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 } };
	const char *cmd, *env;
	int ch;

	guard_set_title_area(argc, argv);	/* run's guard names itself */
	env = getenv("ZKELECT_SOCKET");
	if (env != NULL && env[0] != '\0')
		socket_path = env;
	/* Options before the command only; the command parses the rest. */
	while ((ch = getopt_long(argc, argv, "+s:hV", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			socket_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("zkelectctl %s\n", ZKELECT_VERSION);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[optind];
	argc -= optind;
	argv += optind;
	optind = 1;
	/* --socket may also follow the command. */
	for (ch = 1; ch < argc - 1 && strcmp(argv[ch], "--") != 0; ch++)
		if (strcmp(argv[ch], "--socket") == 0 || strcmp(argv[ch], "-s") == 0) {
			socket_path = argv[ch + 1];
			memmove(&argv[ch], &argv[ch + 2],
			    (size_t)(argc - ch - 1) * sizeof(*argv));
			argc -= 2;
			break;
		}
	if (strcmp(cmd, "status") == 0)
		return cmd_status(argc, argv);
	if (strcmp(cmd, "wait") == 0)
		return cmd_wait(argc, argv);
	if (strcmp(cmd, "is-leader") == 0)
		return cmd_is_leader(argc, argv);
	if (strcmp(cmd, "resign") == 0)
		return cmd_resign(argc, argv);
	if (strcmp(cmd, "drain") == 0 || strcmp(cmd, "undrain") == 0)
		return cmd_drain(cmd, argc, argv);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc, argv);
	if (strcmp(cmd, "members") == 0)
		return members_cmd(argc, argv);
	if (strcmp(cmd, "partitions") == 0)
		return cmd_partitions(argc, argv);
	if (strcmp(cmd, "lock") == 0 || strcmp(cmd, "elect") == 0)
		return lock_cmd(cmd, argc, argv);
	if (strcmp(cmd, "hold") == 0)
		return hold_cmd(argc, argv);
	fprintf(stderr, "zkelectctl: unknown command '%s'\n", cmd);
	usage(stderr);
	return EXIT_USAGE;
}
