/* SPDX-License-Identifier: MIT */
/*
 * zkelectctl: the app's and the operator's side of the local API.
 *   zkelectctl status [--json]
 *   zkelectctl wait --leader|--follower|--change [--timeout 30s]
 *   zkelectctl resign [--hold 10s]
 *   zkelectctl run -- CMD [ARGS...]
 * Exit status: 0 success (for wait: the condition holds), 1 usage error,
 * 2 the agent could not be reached or answered an error, 3 wait timed out.
 */
#include <sys/prctl.h>
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
#include "version.h"

#define DEFAULT_SOCKET	"/run/zkelect/zkelect.sock"
#define EXIT_USAGE	1
#define EXIT_AGENT	2
#define EXIT_TIMEOUT	3

static const char *socket_path = DEFAULT_SOCKET;

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: zkelectctl [--socket PATH] COMMAND [OPTIONS]\n"
	    "\n"
	    "Commands:\n"
	    "  status [--json]             show this instance's role, epoch and leader\n"
	    "  wait --leader|--follower|--change [--timeout DURATION]\n"
	    "                              block until this instance leads, follows,\n"
	    "                              or its status changes\n"
	    "  resign [--hold DURATION]    step down now; rejoin after the hold\n"
	    "  run -- CMD [ARGS...]        run CMD only while this instance leads:\n"
	    "                              started on each term, stopped (SIGTERM,\n"
	    "                              then SIGKILL) before the lease can lapse\n"
	    "\n"
	    "Options:\n"
	    "  -s, --socket PATH   the agent's socket (default $ZKELECT_SOCKET or\n"
	    "                      " DEFAULT_SOCKET ")\n"
	    "  -h, --help          this help\n"
	    "  -V, --version       print the version\n"
	    "\n"
	    "Exit status: 0 ok, 1 usage error, 2 agent unreachable or error,\n"
	    "3 wait timed out.\n");
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

static void
print_human(const char *json)
{
	char role[32] = "?", epoch[32] = "null", lease[32] = "0", id[300] = "?",
	    leader[600] = "null", lid[300] = "", cands[16] = "0", state[32] = "?";

	client_json_get(json, "role", role, sizeof(role));
	client_json_get(json, "epoch", epoch, sizeof(epoch));
	client_json_get(json, "lease_remaining_ms", lease, sizeof(lease));
	client_json_get(json, "id", id, sizeof(id));
	client_json_get(json, "leader", leader, sizeof(leader));
	client_json_get(json, "candidates", cands, sizeof(cands));
	client_json_get(json, "state", state, sizeof(state));
	if (strcmp(leader, "null") != 0)
		client_json_get(leader, "id", lid, sizeof(lid));
	printf("%s: %s", id, role);
	if (strcmp(role, "leader") == 0)
		printf(" (epoch %s, lease %s ms)", epoch, lease);
	printf(", leader %s, %s candidate%s, session %s\n",
	    lid[0] != '\0' ? lid : "none", cands,
	    strcmp(cands, "1") == 0 ? "" : "s", state);
}

static int
cmd_status(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 } };
	struct client_response resp;
	bool json = false;
	int ch;

	while ((ch = getopt_long(argc, argv, "j", opts, NULL)) != -1) {
		if (ch != 'j') {
			usage(stderr);
			return EXIT_USAGE;
		}
		json = true;
	}
	if (request("GET", "/v1/status", 5000, &resp) == -1)
		return EXIT_AGENT;
	if (resp.code != 200) {
		fprintf(stderr, "zkelectctl: agent answered %d: %s", resp.code, resp.body);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	if (json)
		fputs(resp.body, stdout);
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

static int
cmd_wait(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "leader", no_argument, NULL, 'l' },
		{ "follower", no_argument, NULL, 'f' },
		{ "change", no_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 } };
	struct client_response resp;
	char target[128], role[32], index[32];
	uint64_t timeout_ms = 0, deadline, now, first_index = 0, left;
	int ch, want = 0, polls = 0;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'l': case 'f': case 'c':
			if (want != 0) {
				fprintf(stderr, "zkelectctl: wait: choose one of "
				    "--leader, --follower, --change\n");
				return EXIT_USAGE;
			}
			want = ch;
			break;
		case 't':
			if (config_parse_duration(optarg, &timeout_ms) == -1) {
				fprintf(stderr, "zkelectctl: wait: invalid --timeout "
				    "'%s' (use e.g. 30s)\n", optarg);
				return EXIT_USAGE;
			}
			break;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (want == 0) {
		fprintf(stderr, "zkelectctl: wait: say what to wait for: "
		    "--leader, --follower or --change\n");
		return EXIT_USAGE;
	}
	deadline = timeout_ms != 0 ? now_ms() + timeout_ms : 0;
	for (;;) {
		now = now_ms();
		left = deadline == 0 ? 30000 : deadline > now ? deadline - now : 0;
		if (left > 30000)
			left = 30000;
		if (polls == 0 || left == 0)
			snprintf(target, sizeof(target), "/v1/status");
		else
			snprintf(target, sizeof(target), "/v1/status?wait=%" PRIu64
			    "ms&index=%s", left, index);
		if (request("GET", target, (int)left + 5000, &resp) == -1)
			return EXIT_AGENT;
		if (resp.code != 200 ||
		    client_json_get(resp.body, "role", role, sizeof(role)) == -1 ||
		    client_json_get(resp.body, "index", index, sizeof(index)) == -1) {
			fprintf(stderr, "zkelectctl: unexpected answer %d: %s",
			    resp.code, resp.body);
			client_response_free(&resp);
			return EXIT_AGENT;
		}
		client_response_free(&resp);
		if (polls++ == 0)
			first_index = strtoull(index, NULL, 10);
		if ((want == 'l' && strcmp(role, "leader") == 0) ||
		    (want == 'f' && strcmp(role, "follower") == 0) ||
		    (want == 'c' && strtoull(index, NULL, 10) != first_index)) {
			printf("%s\n", role);
			return 0;
		}
		if (deadline != 0 && now_ms() >= deadline) {
			fprintf(stderr, "zkelectctl: wait: timed out (role %s)\n", role);
			return EXIT_TIMEOUT;
		}
	}
}

static int
cmd_resign(int argc, char *argv[])
{
	static const struct option opts[] = {
		{ "hold", required_argument, NULL, 'H' }, { NULL, 0, NULL, 0 } };
	struct client_response resp;
	const char *hold = NULL;
	char target[128];
	uint64_t ms;
	int ch;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
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
	if (hold != NULL)
		snprintf(target, sizeof(target), "/v1/resign?hold=%s", hold);
	else
		snprintf(target, sizeof(target), "/v1/resign");
	if (request("POST", target, 10000, &resp) == -1)
		return EXIT_AGENT;
	if (resp.code != 200) {
		fprintf(stderr, "zkelectctl: resign refused (%d): %s", resp.code,
		    resp.body);
		client_response_free(&resp);
		return EXIT_AGENT;
	}
	printf("resigned\n");
	client_response_free(&resp);
	return 0;
}

/* --- run: a command that lives only while this instance leads. --- */

#define RUN_POLL_MS		100	/* long-poll slice; bounds reaction time */
#define RUN_KILL_MARGIN_MS	200	/* SIGKILL this long before the lease ends */

static volatile sig_atomic_t run_stop_sig;

static void
run_on_signal(int sig)
{
	run_stop_sig = sig;
}

/* Asks the agent; on success fills role, epoch and the lease deadline. */
static int
run_poll(const char *target, int timeout_ms, char *role, size_t rlen, char *epoch, size_t elen,
    uint64_t *lease_deadline, char *index, size_t ilen)
{
	struct client_response resp;
	char lease[32];
	uint64_t sent = now_ms();
	int rc = -1;

	if (client_request(socket_path, "GET", target, timeout_ms, &resp) == -1)
		return -1;
	if (resp.code == 200 &&
	    client_json_get(resp.body, "role", role, rlen) == 0 &&
	    client_json_get(resp.body, "epoch", epoch, elen) == 0 &&
	    client_json_get(resp.body, "index", index, ilen) == 0 &&
	    client_json_get(resp.body, "lease_remaining_ms", lease,
	    sizeof(lease)) == 0) {
		/* Measured from when we asked: the answer may be late. Only
		 * a leader's answer moves it; a loss keeps the last term's. */
		if (strcmp(role, "leader") == 0)
			*lease_deadline = sent + strtoull(lease, NULL, 10);
		rc = 0;
	}
	client_response_free(&resp);
	return rc;
}

/*
 * Starts the command under a guard process (agent/guard.c): the command's
 * whole process tree ends when the command does, when we stop it, and when
 * we die, kill -9 included. Waits for the guard's report: exec errors are
 * said here, once.
 */
static int
run_spawn(struct guard *g, char *argv[], const char *epoch)
{
	struct pollfd pfd;
	pid_t pid;
	int err;

	setenv("ZKELECT_ROLE", "leader", 1);
	setenv("ZKELECT_EPOCH", epoch, 1);
	if (guard_spawn(g, argv, NULL, GUARD_SEARCH_PATH) == -1)
		return -1;
	pfd.fd = g->ctl;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 5000) == 1 && guard_report(g, &pid, &err) == 1) {
		if (err != 0)
			fprintf(stderr, "zkelectctl: run: cannot run %s: %s\n",
			    argv[0], strerror(err));
		else
			fprintf(stderr, "zkelectctl: run: leading (epoch %s); "
			    "started %s (pid %d)\n", epoch, argv[0], (int)pid);
	}
	return 0;
}

/* Stops the command: SIGTERM now, SIGKILL to its whole tree by kill_at;
 * returns its status once nothing of it is left. */
static int
run_stop(struct guard *g, uint64_t kill_at)
{
	int status = 0;
	bool killed = false;

	guard_term(g);
	for (;;) {
		if (waitpid(g->pid, &status, WNOHANG) == g->pid)
			break;
		if (!killed && now_ms() >= kill_at) {
			fprintf(stderr, "zkelectctl: run: the command did not stop; "
			    "SIGKILL to its process tree\n");
			guard_kill(g);
			killed = true;
		}
		usleep(5000);
	}
	guard_release(g);
	return status;
}

static int
cmd_run(int argc, char *argv[])
{
	char role[32], epoch[32], index[32] = "0", target[128];
	uint64_t deadline = 0, now, left;
	struct sigaction sa;
	struct guard child = { -1, -1, -1 };
	int status, wait_ms, timeout_ms;

	if (argc > 1 && strcmp(argv[1], "--") == 0) {
		argc--;
		argv++;
	}
	if (argc < 2) {
		fprintf(stderr, "zkelectctl: run: no command (use: zkelectctl run "
		    "-- CMD [ARGS...])\n");
		return EXIT_USAGE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = run_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	while (run_stop_sig == 0) {
		if (child.pid > 0 && waitpid(child.pid, &status, WNOHANG) == child.pid) {
			guard_release(&child);
			fprintf(stderr, "zkelectctl: run: %s ended while leading\n",
			    argv[1]);
			return WIFEXITED(status) ? WEXITSTATUS(status) :
			    128 + WTERMSIG(status);
		}
		/* Leading: short slices keep the lease deadline fresh. Not
		 * leading: a long wait, since any change answers at once. */
		wait_ms = child.pid > 0 ? RUN_POLL_MS : 30000;
		timeout_ms = wait_ms + 2000;
		if (child.pid > 0) {
			/* No single request may outlast the lease: a frozen
			 * agent must not keep the child alive. */
			now = now_ms();
			left = deadline > now + RUN_KILL_MARGIN_MS ?
			    deadline - now - RUN_KILL_MARGIN_MS : 1;
			if (left < (uint64_t)timeout_ms)
				timeout_ms = (int)left;
			if (timeout_ms < wait_ms)
				wait_ms = timeout_ms;
		}
		snprintf(target, sizeof(target), "/v1/status?wait=%dms&index=%s",
		    wait_ms, index);
		if (run_poll(target, timeout_ms, role, sizeof(role), epoch,
		    sizeof(epoch),
		    &deadline, index, sizeof(index)) == -1) {
			/* Unreachable agent: treat as not leading (rule 2). */
			strcpy(role, "unknown");
			if (child.pid <= 0)
				usleep(RUN_POLL_MS * 1000);
		}
		now = now_ms();
		if (strcmp(role, "leader") == 0 && now < deadline) {
			if (child.pid <= 0 &&
			    run_spawn(&child, &argv[1], epoch) == -1) {
				perror("zkelectctl: run: fork");
				return EXIT_AGENT;
			}
			continue;
		}
		if (child.pid > 0) {
			fprintf(stderr, "zkelectctl: run: no longer leading (%s); "
			    "stopping %s\n", role, argv[1]);
			run_stop(&child, deadline > now + RUN_KILL_MARGIN_MS ?
			    deadline - RUN_KILL_MARGIN_MS : now);
		}
	}
	if (child.pid > 0)
		run_stop(&child, now_ms() + 5000);
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
	if (strcmp(cmd, "resign") == 0)
		return cmd_resign(argc, argv);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc, argv);
	fprintf(stderr, "zkelectctl: unknown command '%s'\n", cmd);
	usage(stderr);
	return EXIT_USAGE;
}
