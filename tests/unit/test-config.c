/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for config.c: the good corpus loads with the values a user
 * wrote (and the documented defaults), every file of the bad corpus is
 * refused with exactly the messages in its NAME.yaml.expected (where FILE
 * stands for the path), and the duration and signal parsers accept what
 * doc/design.md "Configuration" promises and nothing else. The corpus is found through
 * $CONFIG_DATA_DIR, else the compile-time CONFIG_DATA_DIR.
 */

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "config.h"

#ifndef CONFIG_DATA_DIR
#define CONFIG_DATA_DIR "tests/data/config"
#endif

static const char *
data_dir(void)
{
	const char *dir = getenv("CONFIG_DATA_DIR");

	return dir != NULL && dir[0] != '\0' ? dir : CONFIG_DATA_DIR;
}

static char *
data_path(const char *sub, const char *name)
{
	char *path;

	ck_assert_int_ne(asprintf(&path, "%s/%s/%s", data_dir(), sub, name), -1);
	return path;
}

static char *
slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	int c;

	ck_assert_msg(fp != NULL, "cannot open %s", path);
	out = open_memstream(&buf, &len);
	ck_assert_ptr_nonnull(out);
	while ((c = fgetc(fp)) != EOF)
		fputc(c, out);
	fclose(out);
	fclose(fp);
	return buf;
}

/* Replaces every "FILE" in TEXT by PATH. */
static char *
substitute_file(const char *text, const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	const char *p, *hit;
	FILE *out = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(out);
	for (p = text; (hit = strstr(p, "FILE")) != NULL; p = hit + 4) {
		fwrite(p, 1, (size_t)(hit - p), out);
		fputs(path, out);
	}
	fputs(p, out);
	fclose(out);
	return buf;
}

/* Loads PATH; returns the config and, in *ERRS_OUT, what was printed. */
static struct config *
load(const char *path, char **errs_out)
{
	struct config *conf;
	size_t len = 0;
	FILE *errs;

	*errs_out = NULL;
	errs = open_memstream(errs_out, &len);
	ck_assert_ptr_nonnull(errs);
	conf = config_load(path, errs);
	fclose(errs);
	return conf;
}

static struct config *
load_good(const char *name)
{
	struct config *conf;
	char *path = data_path("good", name), *errs;

	conf = load(path, &errs);
	ck_assert_msg(conf != NULL, "%s refused:\n%s", path, errs);
	ck_assert_str_eq(errs, "");
	ck_assert_str_eq(conf->file, path);
	free(errs);
	free(path);
	return conf;
}

static void
assert_argv(config_argv argv, const char *const *want)
{
	size_t i;

	ck_assert_ptr_nonnull(argv);
	for (i = 0; want[i] != NULL; i++) {
		ck_assert_ptr_nonnull(argv[i]);
		ck_assert_str_eq(argv[i], want[i]);
	}
	ck_assert_ptr_null(argv[i]);
}

START_TEST(test_good_full)
{
	static const char *const on_leader[] = { "/bin/true", "--fast", NULL };
	static const char *const on_follower[] = { "/bin/false", NULL };
	static const char *const run[] = { "/bin/sleep", "--port", "8080", NULL };
	static const char *const change[] = { "/bin/echo", NULL };
	struct config *conf = load_good("full.yaml");

	ck_assert_str_eq(conf->zk_servers,
	    "zk1:2181,zk2:2181,zk3:2181/optional/chroot");
	ck_assert_uint_eq(conf->zk_session_timeout_ms, 4500);
	ck_assert_uint_eq(conf->zk_tick_ms, 1500);
	ck_assert_str_eq(conf->zk_auth_scheme, "digest");
	ck_assert_str_eq(conf->zk_auth_credentials, "user:secret");
	ck_assert_str_eq(conf->election_path, "/zkelect/orders");
	ck_assert_str_eq(conf->election_id, "orders-1");
	ck_assert(!conf->election_candidate);
	ck_assert(conf->election_step_down);
	ck_assert_str_eq(conf->election_value, "10.0.0.5:8080 \u00fcnicode");
	ck_assert_str_eq(conf->api_socket, "/run/zkelect/orders.sock");
	ck_assert_uint_eq(conf->api_socket_mode, 0600);
	ck_assert_str_eq(conf->api_listen, "127.0.0.1:8471");
	ck_assert(conf->api_tcp_resign);
	assert_argv(conf->notify_on_leader, on_leader);
	assert_argv(conf->notify_on_follower, on_follower);
	assert_argv(conf->notify_run, run);
	assert_argv(conf->notify_on_leader_change, change);
	ck_assert(conf->notify_resign_on_failure);
	ck_assert_uint_eq(conf->notify_hook_timeout_ms, 1500);
	ck_assert_str_eq(conf->notify_pidfile, "/run/orders.pid");
	ck_assert_int_eq(conf->notify_leader_signal, SIGUSR1);
	ck_assert_int_eq(conf->notify_follower_signal, SIGUSR2);
	ck_assert_int_eq(conf->log_level, LOG_DEBUG);
	ck_assert_int_eq(conf->log_format, LOG_JSON);
	config_free(conf);
}
END_TEST

START_TEST(test_good_defaults)
{
	struct config *conf = load_good("minimal.yaml"), *other;
	char host[256], *want;

	ck_assert_str_eq(conf->zk_servers, "localhost:2181");
	ck_assert_uint_eq(conf->zk_session_timeout_ms, 6000);
	ck_assert_ptr_null(conf->zk_auth_scheme);
	ck_assert_ptr_null(conf->zk_auth_credentials);
	ck_assert_str_eq(conf->election_path, "/svc");
	ck_assert(conf->election_candidate);
	ck_assert(!conf->election_step_down);
	ck_assert_ptr_null(conf->election_value);
	ck_assert_str_eq(conf->api_socket, "/run/zkelect/zkelect.sock");
	ck_assert_uint_eq(conf->api_socket_mode, 0660);
	ck_assert_ptr_null(conf->api_listen);
	ck_assert(!conf->api_tcp_resign);
	ck_assert_ptr_null(conf->notify_on_leader);
	ck_assert_ptr_null(conf->notify_on_follower);
	ck_assert_ptr_null(conf->notify_run);
	ck_assert_ptr_null(conf->notify_on_leader_change);
	ck_assert(!conf->notify_resign_on_failure);
	ck_assert_uint_eq(conf->notify_hook_timeout_ms, 10000);
	ck_assert_ptr_null(conf->notify_pidfile);
	ck_assert_int_eq(conf->notify_leader_signal, 0);
	ck_assert_int_eq(conf->notify_follower_signal, 0);
	ck_assert_int_eq(conf->log_level, LOG_INFO);
	ck_assert_int_eq(conf->log_format, LOG_TEXT);
	ck_assert_ptr_null(conf->partitions);	/* one election, as ever */
	ck_assert_int_eq(conf->npartitions, 0);

	/* The default id is hostname:pid: and 8 hex digits of chance, so
	 * that pid 1 of two containers on one host differ. */
	ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
	ck_assert_int_ne(asprintf(&want, "%s:%ld:", host, (long)getpid()), -1);
	ck_assert_int_eq(strncmp(conf->election_id, want, strlen(want)), 0);
	ck_assert_uint_eq(strlen(conf->election_id), strlen(want) + 8);
	ck_assert_uint_eq(strspn(conf->election_id + strlen(want),
	    "0123456789abcdef"), 8);
	other = load_good("minimal.yaml");
	ck_assert_str_ne(conf->election_id, other->election_id);
	config_free(other);
	free(want);
	config_free(conf);
}
END_TEST

START_TEST(test_good_variants)
{
	struct config *conf = load_good("variants.yaml");

	ck_assert_str_eq(conf->zk_servers, "zk:2181");
	ck_assert_uint_eq(conf->zk_session_timeout_ms, 600000);
	ck_assert_str_eq(conf->election_path, "/a/b.c/..d");
	ck_assert_str_eq(conf->election_id, "node 7 ünïcode");
	ck_assert(conf->election_candidate);
	ck_assert_str_eq(conf->api_listen, "[::1]:65535");
	ck_assert_uint_eq(conf->api_socket_mode, 0640);
	ck_assert(!conf->api_tcp_resign);
	ck_assert_int_eq(conf->notify_leader_signal, 10);
	ck_assert_int_eq(conf->notify_follower_signal, SIGHUP);
	ck_assert_uint_eq(conf->notify_hook_timeout_ms, 120000);
	ck_assert_int_eq(conf->log_level, LOG_WARN);
	ck_assert_int_eq(conf->log_format, LOG_TEXT);
	config_free(conf);
}
END_TEST

START_TEST(test_good_empty_sections)
{
	struct config *conf = load_good("empty-sections.yaml");

	ck_assert_uint_eq(conf->zk_session_timeout_ms, 100);
	ck_assert_str_eq(conf->api_listen, "localhost:1");
	ck_assert_int_eq(conf->log_level, LOG_INFO);
	config_free(conf);
}
END_TEST

START_TEST(test_good_partitions)
{
	struct config *conf = load_good("partitions-count.yaml");
	int i;
	char want[16];

	ck_assert_int_eq(conf->npartitions, 12);
	for (i = 0; i < 12; i++) {
		snprintf(want, sizeof(want), "%d", i);
		ck_assert_str_eq(conf->partitions[i], want);
	}
	config_free(conf);

	conf = load_good("partitions-names.yaml");
	ck_assert_int_eq(conf->npartitions, 4);
	ck_assert_str_eq(conf->partitions[0], "eu");
	ck_assert_str_eq(conf->partitions[1], "us");
	ck_assert_str_eq(conf->partitions[2], "apac");
	ck_assert_str_eq(conf->partitions[3], "tenant_7.b-2");
	config_free(conf);
}
END_TEST

/* Every file in good/ loads; every file in bad/ has an .expected file. */
START_TEST(test_corpus_complete)
{
	char *dir = data_path("good", ""), *path, *errs;
	struct dirent *de;
	struct config *conf;
	DIR *d;
	int n = 0;

	d = opendir(dir);
	ck_assert_msg(d != NULL, "cannot open %s", dir);
	while ((de = readdir(d)) != NULL) {
		if (strstr(de->d_name, ".yaml") == NULL)
			continue;
		path = data_path("good", de->d_name);
		conf = load(path, &errs);
		ck_assert_msg(conf != NULL, "%s refused:\n%s", path, errs);
		config_free(conf);
		free(errs);
		free(path);
		n++;
	}
	closedir(d);
	free(dir);
	ck_assert_int_ge(n, 4);
}
END_TEST

static char **bad_files;
static int nbad;

static int
yaml_only(const struct dirent *de)
{
	size_t n = strlen(de->d_name);

	return n > 5 && strcmp(de->d_name + n - 5, ".yaml") == 0;
}

static void
find_bad_files(void)
{
	struct dirent **list;
	char *dir;
	int i;

	if (asprintf(&dir, "%s/bad", data_dir()) == -1)
		abort();
	nbad = scandir(dir, &list, yaml_only, alphasort);
	if (nbad < 0) {
		fprintf(stderr, "cannot read %s\n", dir);
		exit(1);
	}
	if ((bad_files = calloc((size_t)nbad, sizeof(*bad_files))) == NULL)
		abort();
	for (i = 0; i < nbad; i++) {
		if ((bad_files[i] = strdup(list[i]->d_name)) == NULL)
			abort();
		free(list[i]);
	}
	free(list);
	free(dir);
}

/* One loop iteration per file of bad/: exact messages, and no config. */
START_TEST(test_bad_file)
{
	const char *name = bad_files[_i];
	char *path = data_path("bad", name), *expected_path, *expected_raw;
	char *expected, *errs;
	struct config *conf;

	ck_assert_int_ne(asprintf(&expected_path, "%s.expected", path), -1);
	expected_raw = slurp(expected_path);
	expected = substitute_file(expected_raw, path);

	conf = load(path, &errs);
	ck_assert_msg(conf == NULL, "%s was accepted", path);
	ck_assert_msg(strcmp(errs, expected) == 0,
	    "%s:\n--- expected\n%s--- got\n%s", name, expected, errs);

	free(errs);
	free(expected);
	free(expected_raw);
	free(expected_path);
	free(path);
}
END_TEST

START_TEST(test_missing_file)
{
	char *path = data_path("bad", "no-such-file.yaml"), *errs, *want;

	ck_assert_ptr_null(load(path, &errs));
	ck_assert_int_ne(asprintf(&want, "%s: cannot open: No such file or "
	    "directory\n", path), -1);
	ck_assert_str_eq(errs, want);
	free(want);
	free(errs);
	free(path);
}
END_TEST

START_TEST(test_directory)
{
	char *path = data_path("bad", ""), *errs, *want;

	ck_assert_ptr_null(load(path, &errs));
	ck_assert_int_ne(asprintf(&want, "%s: cannot read: Is a directory\n",
	    path), -1);
	ck_assert_str_eq(errs, want);
	free(want);
	free(errs);
	free(path);
}
END_TEST

/* config_from_flags: the file's keys and checks, messages naming flags. */
static struct config *
from_flags(const struct config_flag *flags, int n, char **errs_out)
{
	struct config *conf;
	size_t len = 0;
	FILE *errs;

	*errs_out = NULL;
	errs = open_memstream(errs_out, &len);
	ck_assert_ptr_nonnull(errs);
	conf = config_from_flags("zkelectd", flags, n, errs);
	fclose(errs);
	return conf;
}

START_TEST(test_flags)
{
	static char t0[] = "true", t1[] = "--x", n0[] = "no-such-command-zkelect";
	char *const cmd[] = { t0, t1, NULL };
	char *const nosuch[] = { n0, NULL };
	const struct config_flag good[] = {
		{ "--zookeeper", "zookeeper.servers", "127.0.0.1:2181/app", NULL },
		{ "--path", "election.path", "/zkelect/x", NULL },
		{ "--id", "election.id", "null", NULL },	/* text, not YAML's null */
		{ "--session-timeout", "zookeeper.session_timeout", "4s", NULL },
		{ "--run-exit", "notify.run_exit", "stop", NULL },
		{ "--run-output", "notify.run_output", "inherit", NULL },
		{ "--", "notify.run", NULL, cmd },
	};
	const struct config_flag bad[] = {
		{ "--zookeeper", "zookeeper.servers", "127.0.0.1:2181", NULL },
		{ "--path", "election.path", "/a/", NULL },
		{ "--id", "election.id", "", NULL },
		{ "--tick-time", "zookeeper.tick_time", "5s", NULL },
		{ "--run-exit", "notify.run_exit", "sometimes", NULL },
	};
	const struct config_flag missing[] = {
		{ "--zookeeper", "zookeeper.servers", "127.0.0.1:2181", NULL },
		{ "--path", "election.path", "/a", NULL },
		{ "--", "notify.run", NULL, nosuch },
	};
	static char x0[] = "true", x1[] = "a\xc3(";
	char *const badarg[] = { x0, x1, NULL };
	const struct config_flag notutf8[] = {
		{ "--zookeeper", "zookeeper.servers", "127.0.0.1:2181", NULL },
		{ "--path", "election.path", "/a", NULL },
		{ "--id", "election.id", "\xff", NULL },
		{ "--", "notify.run", NULL, badarg },
	};
	struct config *conf;
	char *errs;

	conf = from_flags(good, 7, &errs);
	ck_assert_msg(conf != NULL, "%s", errs);
	ck_assert_str_eq(errs, "");
	ck_assert_ptr_null(conf->file);
	ck_assert_str_eq(conf->zk_servers, "127.0.0.1:2181/app");
	ck_assert_str_eq(conf->election_path, "/zkelect/x");
	ck_assert_str_eq(conf->election_id, "null");
	ck_assert_uint_eq(conf->zk_session_timeout_ms, 4000);
	ck_assert(conf->notify_run_exit_stop);
	ck_assert(conf->notify_run_inherit);
	ck_assert_int_eq(conf->notify_run[0][0], '/');	/* found in PATH */
	ck_assert_str_eq(conf->notify_run[0] + strlen(conf->notify_run[0]) - 5,
	    "/true");
	ck_assert_str_eq(conf->notify_run[1], "--x");
	ck_assert_ptr_null(conf->notify_run[2]);
	ck_assert_str_eq(conf->api_socket, "/run/zkelect/zkelect.sock");
	config_free(conf);
	free(errs);

	ck_assert_ptr_null(from_flags(bad, 5, &errs));
	ck_assert_str_eq(errs,
	    "zkelectd: --path: election.path: must not end with '/'\n"
	    "zkelectd: --id: election.id: must not be empty\n"
	    "zkelectd: --run-exit: notify.run_exit: invalid value 'sometimes' "
	    "(use restart or stop)\n"
	    "zkelectd: --tick-time: zookeeper.tick_time: 5s is more than half "
	    "of zookeeper.session_timeout (6s, the default): the agent leads "
	    "only with T >= 2 x tick_time (set session_timeout to at least "
	    "10s)\n"
	    "zkelectd: --run-exit: notify.run_exit: needs notify.run (the "
	    "command whose end it is about)\n");
	free(errs);

	ck_assert_ptr_null(from_flags(missing, 3, &errs));
	ck_assert_str_eq(errs, "zkelectd: --: cannot run "
	    "'no-such-command-zkelect': not found in PATH\n");
	free(errs);

	/* Bytes that are not UTF-8 (a file's would be refused by the YAML
	 * parser): an error naming the flag, not an abort. */
	ck_assert_ptr_null(from_flags(notutf8, 4, &errs));
	ck_assert_str_eq(errs,
	    "zkelectd: --id: not valid UTF-8 text\n"
	    "zkelectd: --: not valid UTF-8 text\n");
	free(errs);
}
END_TEST

static const struct {
	const char	*text;
	int		 ok;
	uint64_t	 ms;
} durations[] = {
	{ "500ms", 1, 500 },
	{ "6s", 1, 6000 },
	{ "2m", 1, 120000 },
	{ "1h", 1, 3600000 },
	{ "1.5s", 1, 1500 },
	{ "0.25m", 1, 15000 },
	{ "0.001s", 1, 1 },
	{ "1.000s", 1, 1000 },
	{ "0s", 1, 0 },		/* a duration; callers decide whether 0 fits */
	{ "0ms", 1, 0 },
	{ "007s", 1, 7000 },
	{ "18446744073709551615ms", 1, UINT64_MAX },
	{ "", 0, 0 },
	{ "5", 0, 0 },		/* no unit */
	{ "1.5", 0, 0 },
	{ "-1s", 0, 0 },
	{ "+1s", 0, 0 },
	{ "5x", 0, 0 },
	{ "5 s", 0, 0 },
	{ " 5s", 0, 0 },
	{ "5s ", 0, 0 },
	{ "5S", 0, 0 },
	{ "5sec", 0, 0 },
	{ "1m30s", 0, 0 },
	{ "s", 0, 0 },
	{ ".5s", 0, 0 },
	{ "5.s", 0, 0 },
	{ "1.5ms", 0, 0 },	/* not a whole millisecond */
	{ "0.0001s", 0, 0 },
	{ "1e3ms", 0, 0 },
	{ "0x10s", 0, 0 },
	{ "18446744073709551616ms", 0, 0 },	/* 2^64 */
	{ "18446744073709552s", 0, 0 },		/* overflows when scaled */
	{ "5124095576030432h", 0, 0 },
	{ "99999999999999999999999999h", 0, 0 },
};

START_TEST(test_duration)
{
	uint64_t ms = 12345;
	int rc = config_parse_duration(durations[_i].text, &ms);

	if (durations[_i].ok) {
		ck_assert_msg(rc == 0, "'%s' refused", durations[_i].text);
		ck_assert_uint_eq(ms, durations[_i].ms);
	} else {
		ck_assert_msg(rc == -1, "'%s' accepted as %llu",
		    durations[_i].text, (unsigned long long)ms);
		ck_assert_uint_eq(ms, 12345);	/* untouched on error */
	}
}
END_TEST

static const struct {
	const char	*text;
	int		 sig;
} signals[] = {
	{ "SIGUSR1", SIGUSR1 },
	{ "USR1", SIGUSR1 },
	{ "SIGUSR2", SIGUSR2 },
	{ "USR2", SIGUSR2 },
	{ "SIGHUP", SIGHUP },
	{ "HUP", SIGHUP },
	{ "SIGTERM", SIGTERM },
	{ "SIGINT", SIGINT },
	{ "SIGKILL", SIGKILL },
	{ "SIGCONT", SIGCONT },
	{ "SIGWINCH", SIGWINCH },
	{ "sigusr1", SIGUSR1 },
	{ "1", 1 },
	{ "10", 10 },
	{ "64", 64 },
	{ "0", -1 },
	{ "65", -1 },
	{ "-1", -1 },
	{ "100", -1 },
	{ "", -1 },
	{ "SIG", -1 },
	{ "SIGFOO", -1 },
	{ "USR3", -1 },
	{ " SIGUSR1", -1 },
	{ "SIGUSR1 ", -1 },
	{ "SIGSIGUSR1", -1 },
	{ "1x", -1 },
};

START_TEST(test_signal)
{
	ck_assert_msg(config_parse_signal(signals[_i].text) == signals[_i].sig,
	    "'%s' -> %d, want %d", signals[_i].text,
	    config_parse_signal(signals[_i].text), signals[_i].sig);
}
END_TEST

START_TEST(test_free_null)
{
	config_free(NULL);
}
END_TEST

static Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc;

	tc = tcase_create("good");
	tcase_add_test(tc, test_good_full);
	tcase_add_test(tc, test_good_defaults);
	tcase_add_test(tc, test_good_variants);
	tcase_add_test(tc, test_good_empty_sections);
	tcase_add_test(tc, test_good_partitions);
	tcase_add_test(tc, test_corpus_complete);
	tcase_add_test(tc, test_free_null);
	tcase_add_test(tc, test_flags);
	suite_add_tcase(s, tc);

	tc = tcase_create("bad");
	tcase_add_loop_test(tc, test_bad_file, 0, nbad);
	tcase_add_test(tc, test_missing_file);
	tcase_add_test(tc, test_directory);
	suite_add_tcase(s, tc);

	tc = tcase_create("parse");
	tcase_add_loop_test(tc, test_duration, 0,
	    (int)(sizeof(durations) / sizeof(durations[0])));
	tcase_add_loop_test(tc, test_signal, 0,
	    (int)(sizeof(signals) / sizeof(signals[0])));
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed, i;

	find_bad_files();
	sr = srunner_create(config_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (i = 0; i < nbad; i++)
		free(bad_files[i]);
	free(bad_files);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
