/* SPDX-License-Identifier: MIT */
/*
 * Reading and validating the configuration (doc/design.md "Configuration"). The file is
 * loaded whole with libyaml's document API, then walked against a table of
 * known keys per section. Every problem is printed as "FILE:LINE:COL: message"
 * (1-based) and the walk goes on, so that one run shows all of them; the load
 * fails if there was any. Every value is a string to us: plain and quoted
 * scalars are treated alike, and YAML's own typing is ignored.
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <yaml.h>

#include "config.h"

#define DEFAULT_SOCKET_MODE	0660
#define DEFAULT_SESSION_MS	6000
#define DEFAULT_HOOK_MS		10000
#define SESSION_MIN_MS		100
#define SESSION_MAX_MS		(10 * 60 * 1000)
#define ID_MAX			255
#define SIGNAL_MAX		64
#define SUN_PATH_LEN		sizeof(((struct sockaddr_un *)NULL)->sun_path)
#define SHOW_MAX		64	/* bytes of a user's value shown in a message */

struct loader {
	const char	*file;		/* the file, or the program (flags) */
	FILE		*errs;
	const struct config_flag *flags; /* config_from_flags: marks name these */
	int		 nflags;
	yaml_document_t	*doc;
	struct config	*conf;
	int		 nerrors;
	bool		 pidfile_seen;
	bool		 signal_seen;
	yaml_mark_t	 signal_mark;	/* of the first signal key */
	const char	*signal_key;
	bool		 session_seen;		/* zookeeper.session_timeout */
	yaml_mark_t	 session_mark;		/* of its value */
	bool		 tick_seen;		/* zookeeper.tick_time */
	yaml_mark_t	 tick_mark;
	bool		 run_seen;		/* notify.run */
	bool		 run_exit_seen;		/* notify.run_exit, notify.run_output */
	yaml_mark_t	 run_exit_mark;
	bool		 run_output_seen;
	yaml_mark_t	 run_output_mark;
	bool		 partitions_seen;	/* the partitions: key */
	yaml_mark_t	 partitions_mark;
	int		 partitions_keys;	/* count: and names: seen */
	yaml_mark_t	 partitions_second;	/* of the second of them */
};

enum kind {
	K_SECTION,
	K_STRING,
	K_DURATION,
	K_BOOL,
	K_ARGV,
	K_SIGNAL,
	K_MODE,
	K_ENUM,		/* one of the names of the key's choices */
	K_COUNT,	/* partitions.count */
	K_NAMES,	/* partitions.names */
};

/* The names K_ENUM accepts, and the value each stores. */
#define CHOICES_MAX	5
struct choices {
	const char	*noun;		/* "invalid NOUN 'x'" */
	struct {
		const char	*name;	/* NULL ends the list */
		int		 value;
	} c[CHOICES_MAX];
};

struct key;
typedef void (*check_fn)(struct loader *, const char *, const yaml_mark_t *,
    const char *);

struct key {
	const char		*name;
	enum kind		 kind;
	size_t			 off;		/* field in struct config */
	bool			 required;	/* sections: report required children when absent */
	check_fn		 check;		/* K_STRING: extra validation */
	const struct key	*sub;		/* K_SECTION: its keys */
	uint64_t		 min_ms, max_ms; /* K_DURATION: bounds */
	const struct choices	*choices;	/* K_ENUM */
	size_t			 size;		/* K_ENUM: of the field (a bool or an enum) */
};

static void check_servers(struct loader *, const char *, const yaml_mark_t *, const char *);
static void check_path(struct loader *, const char *, const yaml_mark_t *, const char *);
static void check_id(struct loader *, const char *, const yaml_mark_t *, const char *);
static void check_socket(struct loader *, const char *, const yaml_mark_t *, const char *);
static void check_listen(struct loader *, const char *, const yaml_mark_t *, const char *);
static void check_value(struct loader *, const char *, const yaml_mark_t *, const char *);
static void check_pidfile(struct loader *, const char *, const yaml_mark_t *, const char *);

#define F(field)	offsetof(struct config, field)

static const struct choices disconnect_choices = { "value",
	{ { "hold_lease", false }, { "step_down", true }, { NULL, 0 } } };
static const struct choices failure_choices = { "value",
	{ { "keep", false }, { "resign", true }, { NULL, 0 } } };
static const struct choices run_exit_choices = { "value",
	{ { "restart", false }, { "stop", true }, { NULL, 0 } } };
static const struct choices run_output_choices = { "value",
	{ { "log", false }, { "inherit", true }, { NULL, 0 } } };
static const struct choices level_choices = { "level",
	{ { "debug", LOG_DEBUG }, { "info", LOG_INFO }, { "warn", LOG_WARN },
	  { "error", LOG_ERROR }, { NULL, 0 } } };
static const struct choices format_choices = { "format",
	{ { "text", LOG_TEXT }, { "json", LOG_JSON }, { NULL, 0 } } };

static const struct key auth_keys[] = {
	{ "scheme", K_STRING, F(zk_auth_scheme), true, NULL, NULL, 0, 0, NULL, 0 },
	{ "credentials", K_STRING, F(zk_auth_credentials), true, NULL, NULL, 0, 0, NULL, 0 },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

static const struct key zookeeper_keys[] = {
	{ "servers", K_STRING, F(zk_servers), true, check_servers, NULL, 0, 0, NULL, 0 },
	{ "session_timeout", K_DURATION, F(zk_session_timeout_ms), false, NULL, NULL,
	    SESSION_MIN_MS, SESSION_MAX_MS, NULL, 0 },
	{ "tick_time", K_DURATION, F(zk_tick_ms), false, NULL, NULL,
	    1, SESSION_MAX_MS / 2, NULL, 0 },
	{ "auth", K_SECTION, 0, false, NULL, auth_keys, 0, 0, NULL, 0 },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

static const struct key election_keys[] = {
	{ "path", K_STRING, F(election_path), true, check_path, NULL, 0, 0, NULL, 0 },
	{ "id", K_STRING, F(election_id), false, check_id, NULL, 0, 0, NULL, 0 },
	{ "candidate", K_BOOL, F(election_candidate), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "disconnect", K_ENUM, F(election_step_down), false, NULL, NULL, 0, 0,
	    &disconnect_choices, sizeof(((struct config *)0)->election_step_down) },
	{ "value", K_STRING, F(election_value), false, check_value, NULL, 0, 0, NULL, 0 },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

static const struct key api_keys[] = {
	{ "socket", K_STRING, F(api_socket), false, check_socket, NULL, 0, 0, NULL, 0 },
	{ "socket_mode", K_MODE, F(api_socket_mode), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "listen", K_STRING, F(api_listen), false, check_listen, NULL, 0, 0, NULL, 0 },
	{ "allow_tcp_resign", K_BOOL, F(api_tcp_resign), false, NULL, NULL, 0, 0, NULL, 0 },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

static const struct key notify_keys[] = {
	{ "on_leader", K_ARGV, F(notify_on_leader), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "on_follower", K_ARGV, F(notify_on_follower), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "hook_timeout", K_DURATION, F(notify_hook_timeout_ms), false, NULL, NULL,
	    1, UINT64_MAX, NULL, 0 },
	{ "pidfile", K_STRING, F(notify_pidfile), false, check_pidfile, NULL, 0, 0, NULL, 0 },
	{ "leader_signal", K_SIGNAL, F(notify_leader_signal), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "follower_signal", K_SIGNAL, F(notify_follower_signal), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "run", K_ARGV, F(notify_run), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "run_exit", K_ENUM, F(notify_run_exit_stop), false, NULL, NULL, 0, 0,
	    &run_exit_choices, sizeof(((struct config *)0)->notify_run_exit_stop) },
	{ "run_output", K_ENUM, F(notify_run_inherit), false, NULL, NULL, 0, 0,
	    &run_output_choices, sizeof(((struct config *)0)->notify_run_inherit) },
	{ "on_leader_change", K_ARGV, F(notify_on_leader_change), false, NULL, NULL, 0, 0, NULL, 0 },
	{ "on_leader_failure", K_ENUM, F(notify_resign_on_failure), false, NULL, NULL, 0, 0,
	    &failure_choices, sizeof(((struct config *)0)->notify_resign_on_failure) },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

static const struct key log_keys[] = {
	{ "level", K_ENUM, F(log_level), false, NULL, NULL, 0, 0,
	    &level_choices, sizeof(((struct config *)0)->log_level) },
	{ "format", K_ENUM, F(log_format), false, NULL, NULL, 0, 0,
	    &format_choices, sizeof(((struct config *)0)->log_format) },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

static const struct key partitions_keys[] = {
	{ "count", K_COUNT, 0, false, NULL, NULL, 0, 0, NULL, 0 },
	{ "names", K_NAMES, 0, false, NULL, NULL, 0, 0, NULL, 0 },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

static const struct key root_keys[] = {
	{ "zookeeper", K_SECTION, 0, true, NULL, zookeeper_keys, 0, 0, NULL, 0 },
	{ "election", K_SECTION, 0, true, NULL, election_keys, 0, 0, NULL, 0 },
	{ "api", K_SECTION, 0, false, NULL, api_keys, 0, 0, NULL, 0 },
	{ "notify", K_SECTION, 0, false, NULL, notify_keys, 0, 0, NULL, 0 },
	{ "log", K_SECTION, 0, false, NULL, log_keys, 0, 0, NULL, 0 },
	{ "partitions", K_SECTION, 0, false, NULL, partitions_keys, 0, 0, NULL, 0 },
	{ NULL, 0, 0, false, NULL, NULL, 0, 0, NULL, 0 }
};

#undef F

static const yaml_mark_t file_start = { 0, 0, 0 };

static void conf_error(struct loader *, const yaml_mark_t *, const char *, ...)
    __attribute__((format(printf, 3, 4)));

static void
conf_error(struct loader *ld, const yaml_mark_t *mark, const char *fmt, ...)
{
	va_list ap;

	/* From flags, a mark's index is the flag's (1-based; 0: none). */
	if (ld->flags != NULL && mark->index >= 1 &&
	    mark->index <= (size_t)ld->nflags)
		fprintf(ld->errs, "%s: %s: ", ld->file,
		    ld->flags[mark->index - 1].flag);
	else if (ld->flags != NULL)
		fprintf(ld->errs, "%s: ", ld->file);
	else
		fprintf(ld->errs, "%s:%zu:%zu: ", ld->file, mark->line + 1,
		    mark->column + 1);
	va_start(ap, fmt);
	vfprintf(ld->errs, fmt, ap);
	va_end(ap);
	fputc('\n', ld->errs);
	ld->nerrors++;
}

/*
 * Copies a user's text for an error message: control bytes become '?', and
 * long text is cut (at a UTF-8 boundary) and marked with "...".
 */
static const char *
show(char *buf, size_t len, const char *s)
{
	size_t i, n = strlen(s);
	bool cut = false;

	if (n > len - 4) {
		n = len - 4;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
		cut = true;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		buf[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	if (cut)
		memcpy(buf + i, "...", 4);
	else
		buf[i] = '\0';
	return buf;
}

static const char *
node_kind_name(const yaml_node_t *node)
{
	switch (node->type) {
	case YAML_SCALAR_NODE:
		return "a scalar";
	case YAML_SEQUENCE_NODE:
		return "a sequence";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "nothing";
	}
}

/* A plain empty, "~" or "null" scalar: YAML's null. */
static bool
node_is_null(const yaml_node_t *node)
{
	const char *s;

	if (node->type != YAML_SCALAR_NODE ||
	    node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	s = (const char *)node->data.scalar.value;
	return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	    strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/*
 * The text of a scalar value node, or NULL after reporting why there is
 * none (wrong node type, null, empty or an embedded NUL).
 */
static const char *
scalar_value(struct loader *ld, const char *what, const yaml_node_t *node)
{
	const char *s;

	if (node->type != YAML_SCALAR_NODE) {
		conf_error(ld, &node->start_mark, "%s: expected a scalar, not %s",
		    what, node_kind_name(node));
		return NULL;
	}
	if (node_is_null(node)) {
		conf_error(ld, &node->start_mark, "%s: missing value", what);
		return NULL;
	}
	s = (const char *)node->data.scalar.value;
	if (strlen(s) != node->data.scalar.length) {
		conf_error(ld, &node->start_mark, "%s: must not contain NUL bytes",
		    what);
		return NULL;
	}
	if (s[0] == '\0') {
		conf_error(ld, &node->start_mark, "%s: must not be empty", what);
		return NULL;
	}
	return s;
}

/* True when S holds a C0 or C1 control character (or DEL). */
static bool
has_control(const char *s)
{
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return true;
		if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return true;
	}
	return false;
}

/*
 * What is wrong with a ZooKeeper path as the C client checks it
 * (isValidPath): NULL when nothing is. The length is the caller's.
 */
static const char *
path_problem(const char *s)
{
	const char *p, *end;
	size_t n;

	if (s[0] != '/')
		return "must start with '/'";
	if (has_control(s))
		return "must not contain control characters";
	n = strlen(s);
	if (n > 1 && s[n - 1] == '/')
		return "must not end with '/'";
	for (p = s + 1; n > 1; p = end + 1) {
		end = strchr(p, '/');
		n = end != NULL ? (size_t)(end - p) : strlen(p);
		if (n == 0)
			return "must not contain empty components ('//')";
		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return "must not contain '.' or '..' components";
		if (end == NULL)
			break;
	}
	return NULL;
}

/*
 * "host:port[,host:port...][/chroot]", checked as the C client will parse
 * it (zookeeper_init fails on what is refused here, and the agent would
 * retry for ever): every host has a decimal port 1..65535, and the chroot
 * is a valid path ("/" alone means none).
 */
static void
check_servers(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *s)
{
	char buf[SHOW_MAX], host[SHOW_MAX];
	const char *chroot, *p, *end, *colon, *why;
	size_t n, hlen, plen;
	unsigned long port;

	if (has_control(s)) {
		conf_error(ld, mark, "%s: must not contain control characters",
		    what);
		return;
	}
	chroot = strchr(s, '/');
	if (chroot != NULL && strcmp(chroot, "/") != 0 &&
	    (why = path_problem(chroot)) != NULL) {
		conf_error(ld, mark, "%s: the chroot '%s' %s (the ZooKeeper "
		    "client refuses it)", what, show(buf, sizeof(buf), chroot),
		    why);
		return;
	}
	n = chroot != NULL ? (size_t)(chroot - s) : strlen(s);
	for (p = s; p < s + n; p = end + 1) {
		end = memchr(p, ',', (size_t)(s + n - p));
		if (end == NULL)
			end = s + n;
		hlen = (size_t)(end - p);
		if (hlen == 0)
			continue;	/* the client skips empty entries */
		snprintf(host, sizeof(host), "%.*s", (int)(hlen < sizeof(host) ?
		    hlen : sizeof(host) - 1), p);
		colon = memrchr(p, ':', hlen);
		if (colon == NULL || (p[0] == '[' && memchr(colon, ']',
		    (size_t)(end - colon)) != NULL)) {
			conf_error(ld, mark, "%s: '%s' has no port (use HOST:PORT, "
			    "e.g. %s:2181)", what, show(buf, sizeof(buf), host),
			    host);
			return;
		}
		plen = (size_t)(end - colon - 1);
		port = 0;
		if (plen >= 1 && plen <= 5 &&
		    strspn(colon + 1, "0123456789") >= plen)
			port = strtoul(colon + 1, NULL, 10);
		if (port < 1 || port > 65535) {
			conf_error(ld, mark, "%s: invalid port in '%s' (use "
			    "1..65535)", what, show(buf, sizeof(buf), host));
			return;
		}
	}
	if (n == 0 || strspn(s, ",") == n)
		conf_error(ld, mark, "%s: names no server (use HOST:PORT, e.g. "
		    "zk1:2181)", what);
}

static void
check_path(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *s)
{
	const char *why;
	size_t n = strlen(s);

	if (s[0] == '/' && !has_control(s) &&
	    n + 1 + CONFIG_NODE_NAME_LEN >= CONFIG_ZK_PATH_MAX) {
		conf_error(ld, mark, "%s: longer than %d bytes (the contender "
		    "nodes under it would not fit in a %d-byte path)", what,
		    CONFIG_ZK_PATH_MAX - 2 - CONFIG_NODE_NAME_LEN,
		    CONFIG_ZK_PATH_MAX);
		return;
	}
	if ((why = path_problem(s)) == NULL && n == 1)
		why = "must not end with '/'";	/* "/" itself: no election */
	if (why != NULL) {
		conf_error(ld, mark, "%s: %s", what, why);
		return;
	}
	if (strcmp(s, "/zookeeper") == 0 || strncmp(s, "/zookeeper/", 11) == 0)
		conf_error(ld, mark, "%s: /zookeeper is reserved by ZooKeeper",
		    what);
}

static void
check_id(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *s)
{
	if (strlen(s) > ID_MAX)
		conf_error(ld, mark, "%s: longer than %d bytes", what, ID_MAX);
	else if (has_control(s))
		conf_error(ld, mark, "%s: must not contain control characters",
		    what);
}

/* Any UTF-8 text without control characters (it travels in the claim). */
static void
check_value(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *s)
{
	if (strlen(s) > CONFIG_VALUE_MAX)
		conf_error(ld, mark, "%s: longer than %d bytes", what,
		    CONFIG_VALUE_MAX);
	else if (has_control(s))
		conf_error(ld, mark, "%s: must not contain control characters",
		    what);
}

static void
check_socket(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *s)
{
	char buf[SHOW_MAX];

	/* Relative to what? The agent may be started anywhere. */
	if (s[0] != '/')
		conf_error(ld, mark, "%s: must be an absolute path (not '%s'): "
		    "the agent may run in any directory (under systemd, /)",
		    what, show(buf, sizeof(buf), s));
	else if (strlen(s) >= SUN_PATH_LEN)
		conf_error(ld, mark, "%s: longer than %zu bytes (does not fit "
		    "in sun_path)", what, SUN_PATH_LEN - 1);
}

/* The agent may run from any directory (systemd: /): no relative pidfile. */
static void
check_pidfile(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *s)
{
	if (s[0] != '/')
		conf_error(ld, mark, "%s: must be an absolute path", what);
}

/* Is name an executable file in one of PATH's directories? */
static bool
config_in_path(const char *name)
{
	const char *path = getenv("PATH"), *p, *end;
	char file[PATH_MAX];
	struct stat st;

	if (path == NULL || path[0] == '\0')
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; ; p = end + 1) {
		end = strchr(p, ':');
		if (end == NULL)
			end = p + strlen(p);
		if (snprintf(file, sizeof(file), "%.*s/%s", (int)(end - p), p,
		    name) < (int)sizeof(file) && stat(file, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(file, X_OK) == 0)
			return true;
		if (*end == '\0')
			return false;
	}
}

int
config_check_interpreter(const char *path, char *why, size_t len)
{
	char line[256], *interp, *arg = NULL, *p;
	const char *base;
	struct stat st;
	size_t n;
	FILE *f;

	if ((f = fopen(path, "re")) == NULL)
		return 0;
	n = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[n] = '\0';
	if (n < 2 || line[0] != '#' || line[1] != '!')
		return 0;
	line[strcspn(line, "\n")] = '\0';
	interp = line + 2 + strspn(line + 2, " \t");
	p = interp + strcspn(interp, " \t");
	if (*p != '\0') {
		*p++ = '\0';
		p += strspn(p, " \t");
		if (*p != '\0') {
			arg = p;
			arg[strcspn(arg, " \t")] = '\0';
		}
	}
	if (interp[0] == '\0') {
		snprintf(why, len, "its #! line names no interpreter");
		return -1;
	}
	if (stat(interp, &st) == -1) {
		snprintf(why, len, "its interpreter '%s' (its #! line): %s",
		    interp, strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode) || access(interp, X_OK) == -1) {
		snprintf(why, len, "its interpreter '%s' (its #! line) is not an "
		    "executable file", interp);
		return -1;
	}
	/* "#!/usr/bin/env NAME": env looks NAME up in PATH when it runs. */
	base = strrchr(interp, '/') != NULL ? strrchr(interp, '/') + 1 : interp;
	if (strcmp(base, "env") == 0 && arg != NULL && arg[0] != '-' &&
	    strchr(arg, '=') == NULL && strchr(arg, '/') == NULL &&
	    !config_in_path(arg)) {
		snprintf(why, len, "its interpreter '%s %s' (its #! line): %s "
		    "not found in PATH", interp, arg, arg);
		return -1;
	}
	return 0;
}

/*
 * A hook or the child: an absolute path (no PATH search, no working
 * directory to depend on) to an executable regular file, checked now so
 * that a typo fails --check-config and a reload, not the first transition.
 */
static void
check_exec(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *path)
{
	char buf[512], why[512];
	struct stat st;

	if (path[0] != '/') {
		conf_error(ld, mark, "%s: must be an absolute path (not '%s')",
		    what, show(buf, sizeof(buf), path));
		return;
	}
	if (stat(path, &st) == -1)
		conf_error(ld, mark, "%s: cannot run '%s': %s", what,
		    show(buf, sizeof(buf), path), strerror(errno));
	else if (!S_ISREG(st.st_mode))
		conf_error(ld, mark, "%s: cannot run '%s': not a regular file",
		    what, show(buf, sizeof(buf), path));
	else if (access(path, X_OK) == -1)
		conf_error(ld, mark, "%s: cannot run '%s': not executable", what,
		    show(buf, sizeof(buf), path));
	else if (config_check_interpreter(path, why, sizeof(why)) == -1)
		conf_error(ld, mark, "%s: cannot run '%s': %s", what,
		    show(buf, sizeof(buf), path), why);
}

/* "HOST:PORT" where HOST is 127.x.x.x, localhost or [::1]. */
static void
check_listen(struct loader *ld, const char *what, const yaml_mark_t *mark,
    const char *s)
{
	char buf[SHOW_MAX], host[64];
	const char *colon, *port;
	struct in_addr a4;
	struct in6_addr a6;
	unsigned long n;
	size_t hlen;
	bool loopback;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (close == NULL || close[1] != ':')
			goto invalid;
		hlen = (size_t)(close - s - 1);
		if (hlen == 0 || hlen >= sizeof(host))
			goto invalid;
		memcpy(host, s + 1, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET6, host, &a6) != 1)
			goto invalid;
		loopback = IN6_IS_ADDR_LOOPBACK(&a6);
		port = close + 2;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || colon == s)
			goto invalid;
		hlen = (size_t)(colon - s);
		if (hlen >= sizeof(host) || memchr(s, ':', hlen) != NULL)
			goto invalid;
		memcpy(host, s, hlen);
		host[hlen] = '\0';
		if (strcasecmp(host, "localhost") == 0)
			loopback = true;
		else if (inet_pton(AF_INET, host, &a4) == 1)
			loopback = (ntohl(a4.s_addr) >> 24) == 127;
		else
			loopback = false;
		port = colon + 1;
	}

	if (port[0] == '\0' || strlen(port) > 5 ||
	    strspn(port, "0123456789") != strlen(port) ||
	    (n = strtoul(port, NULL, 10)) < 1 || n > 65535) {
		conf_error(ld, mark, "%s: invalid port in '%s' (use 1..65535)",
		    what, show(buf, sizeof(buf), s));
		return;
	}
	if (!loopback)
		conf_error(ld, mark, "%s: '%s' is not a loopback address (use "
		    "127.0.0.1, localhost or [::1])", what,
		    show(buf, sizeof(buf), s));
	return;

invalid:
	conf_error(ld, mark, "%s: invalid address '%s' (use HOST:PORT, e.g. "
	    "127.0.0.1:8471)", what, show(buf, sizeof(buf), s));
}

static int
parse_bool(const char *s, bool *out)
{
	if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0)
		*out = true;
	else if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0)
		*out = false;
	else
		return -1;
	return 0;
}

static int
parse_mode(const char *s, unsigned *out)
{
	size_t n = strlen(s);

	if (n < 1 || n > 4 || strspn(s, "01234567") != n)
		return -1;
	*out = (unsigned)strtoul(s, NULL, 8);
	return *out <= 0777 ? 0 : -1;
}

static const char *
format_ms(char *buf, size_t len, uint64_t ms)
{
	if (ms % 3600000 == 0)
		snprintf(buf, len, "%" PRIu64 "h", ms / 3600000);
	else if (ms % 60000 == 0)
		snprintf(buf, len, "%" PRIu64 "m", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(buf, len, "%" PRIu64 "ms", ms);
	return buf;
}

static void
set_string(char **field, const char *s)
{
	char *copy = strdup(s);

	if (copy == NULL)
		abort();	/* out of memory at start-up: nothing to save */
	free(*field);
	*field = copy;
}

static void
argv_free(config_argv argv)
{
	char **p;

	if (argv == NULL)
		return;
	for (p = argv; *p != NULL; p++)
		free(*p);
	free(argv);
}

static void
load_argv(struct loader *ld, const char *what, const yaml_node_t *node,
    config_argv *field)
{
	yaml_node_item_t *item;
	yaml_node_t *elem;
	char **argv, elem_what[160];
	const char *s;
	size_t n, i = 0;
	bool bad = false;

	if (node->type != YAML_SEQUENCE_NODE) {
		conf_error(ld, &node->start_mark, "%s: expected a sequence "
		    "(argv list, e.g. [\"/path/to/hook\", \"arg\"]), not %s",
		    what, node_kind_name(node));
		return;
	}
	n = (size_t)(node->data.sequence.items.top -
	    node->data.sequence.items.start);
	if (n == 0) {
		conf_error(ld, &node->start_mark, "%s: must not be an empty "
		    "list", what);
		return;
	}
	if ((argv = calloc(n + 1, sizeof(*argv))) == NULL)
		abort();
	for (item = node->data.sequence.items.start;
	    item < node->data.sequence.items.top; item++, i++) {
		elem = yaml_document_get_node(ld->doc, *item);
		snprintf(elem_what, sizeof(elem_what), "%s[%zu]", what, i);
		if ((s = scalar_value(ld, elem_what, elem)) == NULL) {
			bad = true;
			continue;
		}
		if ((argv[i] = strdup(s)) == NULL)
			abort();
	}
	if (bad) {
		/* argv has holes: free every slot, not up to the first NULL. */
		for (i = 0; i < n; i++)
			free(argv[i]);
		free(argv);
		return;
	}
	/* Every argv key is a notify.* command: argv[0] must be runnable. */
	snprintf(elem_what, sizeof(elem_what), "%s[0]", what);
	check_exec(ld, elem_what, &yaml_document_get_node(ld->doc,
	    *node->data.sequence.items.start)->start_mark, argv[0]);
	argv_free(*field);
	*field = argv;
}

static void
partitions_free(struct config *conf)
{
	int i;

	for (i = 0; i < conf->npartitions; i++)
		free(conf->partitions[i]);
	free(conf->partitions);
	conf->partitions = NULL;
	conf->npartitions = 0;
}

/*
 * A partition name becomes a ZooKeeper node name, an environment value and
 * a URL path component: 1..64 bytes of [A-Za-z0-9._-], not "." or "..".
 */
static bool
partition_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > CONFIG_PARTITION_NAME_MAX)
		return false;
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* partitions.count: N names "0".."N-1". */
static void
load_count(struct loader *ld, const char *what, const yaml_node_t *node,
    const char *s)
{
	char *end, name[16], buf[SHOW_MAX];
	long n;
	int i;

	errno = 0;
	n = strtol(s, &end, 10);
	if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno != 0 ||
	    n < 1 || n > CONFIG_PARTITIONS_MAX) {
		conf_error(ld, &node->start_mark, "%s: must be a whole number "
		    "from 1 to %d, not '%s'", what, CONFIG_PARTITIONS_MAX,
		    show(buf, sizeof(buf), s));
		return;
	}
	if (ld->conf->partitions != NULL)
		return;		/* names: came first; reported as both */
	if ((ld->conf->partitions = calloc((size_t)n,
	    sizeof(*ld->conf->partitions))) == NULL)
		abort();
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%d", i);
		set_string(&ld->conf->partitions[i], name);
	}
	ld->conf->npartitions = (int)n;
}

/* partitions.names: a sequence of unique names. */
static void
load_names(struct loader *ld, const char *what, const yaml_node_t *node)
{
	yaml_node_item_t *item;
	yaml_node_t *elem;
	char **names, elem_what[160], buf[SHOW_MAX];
	const char *s;
	size_t n, i = 0, j;
	bool bad = false;

	if (node->type != YAML_SEQUENCE_NODE) {
		conf_error(ld, &node->start_mark, "%s: expected a sequence "
		    "(e.g. [eu, us, apac]), not %s", what, node_kind_name(node));
		return;
	}
	n = (size_t)(node->data.sequence.items.top -
	    node->data.sequence.items.start);
	if (n == 0 || n > CONFIG_PARTITIONS_MAX) {
		conf_error(ld, &node->start_mark, "%s: must name 1 to %d "
		    "partitions, not %zu", what, CONFIG_PARTITIONS_MAX, n);
		return;
	}
	if ((names = calloc(n, sizeof(*names))) == NULL)
		abort();
	for (item = node->data.sequence.items.start;
	    item < node->data.sequence.items.top; item++, i++) {
		elem = yaml_document_get_node(ld->doc, *item);
		snprintf(elem_what, sizeof(elem_what), "%s[%zu]", what, i);
		if ((s = scalar_value(ld, elem_what, elem)) == NULL) {
			bad = true;
			continue;
		}
		if (!partition_name_ok(s)) {
			conf_error(ld, &elem->start_mark, "%s: invalid partition "
			    "name '%s' (1 to %d bytes of A-Z a-z 0-9 . _ -, not "
			    "'.' or '..')", elem_what, show(buf, sizeof(buf), s),
			    CONFIG_PARTITION_NAME_MAX);
			bad = true;
			continue;
		}
		for (j = 0; j < i; j++) {
			if (names[j] != NULL && strcmp(names[j], s) == 0) {
				conf_error(ld, &elem->start_mark, "%s: duplicate "
				    "partition name '%s'", elem_what, s);
				bad = true;
				break;
			}
		}
		if (j == i && (names[i] = strdup(s)) == NULL)
			abort();
	}
	if (bad || ld->conf->partitions != NULL) {
		for (i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return;
	}
	ld->conf->partitions = names;
	ld->conf->npartitions = (int)n;
}

static void walk_mapping(struct loader *, const struct key *, const char *,
    const yaml_node_t *, const yaml_mark_t *);

/* K_ENUM: S must be one of K's choices; "(use a, b or c)" otherwise. */
static void
load_choice(struct loader *ld, const struct key *k, const char *what,
    const yaml_node_t *node, const char *s)
{
	char *field = (char *)ld->conf + k->off;
	char buf[SHOW_MAX], names[128];
	size_t len = 0;
	int i;

	for (i = 0; k->choices->c[i].name != NULL; i++)
		if (strcmp(s, k->choices->c[i].name) == 0) {
			if (k->size == sizeof(bool))
				*(bool *)(void *)field = k->choices->c[i].value != 0;
			else
				*(int *)(void *)field = k->choices->c[i].value;
			return;
		}
	names[0] = '\0';
	for (i = 0; k->choices->c[i].name != NULL; i++) {
		snprintf(names + len, sizeof(names) - len, "%s%s", i == 0 ? "" :
		    k->choices->c[i + 1].name == NULL ? " or " : ", ",
		    k->choices->c[i].name);
		len = strlen(names);
	}
	conf_error(ld, &node->start_mark, "%s: invalid %s '%s' (use %s)", what,
	    k->choices->noun, show(buf, sizeof(buf), s), names);
}

static void
load_value(struct loader *ld, const struct key *k, const char *what,
    const yaml_node_t *key_node, const yaml_node_t *node)
{
	char *base = (char *)ld->conf;
	char buf[SHOW_MAX], b1[32], b2[32];
	const char *s;
	uint64_t ms;
	unsigned mode;
	bool b;
	int sig;

	if (k->kind == K_SECTION && k->sub == partitions_keys) {
		ld->partitions_seen = true;
		ld->partitions_mark = key_node->start_mark;
	}
	if (k->kind == K_COUNT || k->kind == K_NAMES) {
		if (++ld->partitions_keys == 2)
			ld->partitions_second = key_node->start_mark;
	}
	if (k->kind == K_NAMES) {
		load_names(ld, what, node);
		return;
	}
	if (k->kind == K_SECTION) {
		if (node_is_null(node)) {
			/* "log:" with nothing under it: an empty section. */
			walk_mapping(ld, k->sub, what, NULL, &key_node->start_mark);
			return;
		}
		if (node->type != YAML_MAPPING_NODE) {
			conf_error(ld, &node->start_mark, "%s: expected a "
			    "mapping, not %s", what, node_kind_name(node));
			return;
		}
		walk_mapping(ld, k->sub, what, node, &key_node->start_mark);
		return;
	}
	if (k->kind == K_ARGV) {
		load_argv(ld, what, node, (config_argv *)(void *)(base + k->off));
		return;
	}

	if ((s = scalar_value(ld, what, node)) == NULL)
		return;

	switch (k->kind) {
	case K_STRING:
		if (k->check != NULL) {
			int before = ld->nerrors;

			k->check(ld, what, &node->start_mark, s);
			if (ld->nerrors != before)
				return;
		}
		set_string((char **)(void *)(base + k->off), s);
		break;
	case K_DURATION:
		if (config_parse_duration(s, &ms) == -1) {
			conf_error(ld, &node->start_mark, "%s: invalid duration "
			    "'%s' (use e.g. 500ms, 6s, 2m)", what,
			    show(buf, sizeof(buf), s));
			return;
		}
		if (k->max_ms == UINT64_MAX && ms < k->min_ms) {
			conf_error(ld, &node->start_mark, "%s: must be greater "
			    "than 0", what);
			return;
		}
		if (ms < k->min_ms || ms > k->max_ms) {
			conf_error(ld, &node->start_mark, "%s: must be between "
			    "%s and %s", what, format_ms(b1, sizeof(b1), k->min_ms),
			    format_ms(b2, sizeof(b2), k->max_ms));
			return;
		}
		*(uint64_t *)(void *)(base + k->off) = ms;
		break;
	case K_BOOL:
		if (parse_bool(s, &b) == -1) {
			conf_error(ld, &node->start_mark, "%s: invalid boolean "
			    "'%s' (use true or false)", what,
			    show(buf, sizeof(buf), s));
			return;
		}
		*(bool *)(void *)(base + k->off) = b;
		break;
	case K_SIGNAL:
		if ((sig = config_parse_signal(s)) == -1) {
			conf_error(ld, &node->start_mark, "%s: unknown signal "
			    "'%s' (use e.g. SIGUSR1, SIGHUP or a number 1..%d)",
			    what, show(buf, sizeof(buf), s), SIGNAL_MAX);
			return;
		}
		*(int *)(void *)(base + k->off) = sig;
		break;
	case K_MODE:
		if (parse_mode(s, &mode) == -1) {
			conf_error(ld, &node->start_mark, "%s: invalid mode '%s' "
			    "(use an octal mode such as \"0660\")", what,
			    show(buf, sizeof(buf), s));
			return;
		}
		*(unsigned *)(void *)(base + k->off) = mode;
		break;
	case K_ENUM:
		load_choice(ld, k, what, node, s);
		break;
	case K_COUNT:
		load_count(ld, what, node, s);
		break;
	case K_SECTION:
	case K_ARGV:
	case K_NAMES:
		break;
	}
}

/* Reports the required keys under K (a table) as missing, at MARK. */
static void
report_missing(struct loader *ld, const struct key *k, const char *prefix,
    const yaml_mark_t *mark)
{
	char what[128];

	for (; k->name != NULL; k++) {
		if (!k->required)
			continue;
		if (prefix[0] != '\0')
			snprintf(what, sizeof(what), "%s.%s", prefix, k->name);
		else
			snprintf(what, sizeof(what), "%s", k->name);
		if (k->kind == K_SECTION)
			report_missing(ld, k->sub, what, mark);
		else
			conf_error(ld, mark, "missing required key '%s'", what);
	}
}

/* The index in KEYS of KEY_NODE's name, or -1 when it is not a known key. */
static int
find_key(const struct key *keys, const yaml_node_t *key_node)
{
	const char *name;
	int i;

	if (key_node->type != YAML_SCALAR_NODE)
		return -1;
	name = (const char *)key_node->data.scalar.value;
	if (strlen(name) != key_node->data.scalar.length)
		return -1;
	for (i = 0; keys[i].name != NULL; i++)
		if (strcmp(keys[i].name, name) == 0)
			return i;
	return -1;
}

/*
 * Walks one mapping (NULL: an empty section) against the key table KEYS.
 * PREFIX is the dotted path of the mapping ("" at the top). Missing required
 * keys are reported first, so that messages come in file order: at MARK, the
 * position of the section's key, or at 1:1 for the top level and for a
 * section that is absent altogether.
 */
static void
walk_mapping(struct loader *ld, const struct key *keys, const char *prefix,
    const yaml_node_t *map, const yaml_mark_t *mark)
{
	char what[128], buf[SHOW_MAX], in[SHOW_MAX + 16];
	bool present[16] = { false }, seen[16] = { false };
	yaml_node_pair_t *pair, *start = NULL, *top = NULL;
	yaml_node_t *key_node, *value;
	const struct key *k;
	int i;

	if (prefix[0] != '\0')
		snprintf(in, sizeof(in), " in '%s'", prefix);
	else
		in[0] = '\0';
	if (map != NULL) {
		start = map->data.mapping.pairs.start;
		top = map->data.mapping.pairs.top;
	}

	for (pair = start; pair < top; pair++) {
		key_node = yaml_document_get_node(ld->doc, pair->key);
		if ((i = find_key(keys, key_node)) != -1)
			present[i] = true;
	}
	for (i = 0, k = keys; k->name != NULL; k++, i++) {
		if (present[i] || !k->required)
			continue;
		if (prefix[0] != '\0')
			snprintf(what, sizeof(what), "%s.%s", prefix, k->name);
		else
			snprintf(what, sizeof(what), "%s", k->name);
		if (k->kind == K_SECTION)
			report_missing(ld, k->sub, what, &file_start);
		else
			conf_error(ld, mark, "missing required key '%s'", what);
	}

	for (pair = start; pair < top; pair++) {
		key_node = yaml_document_get_node(ld->doc, pair->key);
		value = yaml_document_get_node(ld->doc, pair->value);
		if (key_node->type != YAML_SCALAR_NODE) {
			conf_error(ld, &key_node->start_mark, "keys must be "
			    "scalars, not %s%s", node_kind_name(key_node), in);
			continue;
		}
		if ((i = find_key(keys, key_node)) == -1) {
			conf_error(ld, &key_node->start_mark, "unknown key "
			    "'%s'%s", show(buf, sizeof(buf),
			    (const char *)key_node->data.scalar.value), in);
			continue;
		}
		k = &keys[i];
		if (seen[i]) {
			conf_error(ld, &key_node->start_mark, "duplicate key "
			    "'%s'%s", k->name, in);
			continue;
		}
		seen[i] = true;
		if (k->kind == K_SIGNAL && !ld->signal_seen) {
			ld->signal_seen = true;
			ld->signal_mark = key_node->start_mark;
			ld->signal_key = k->name;
		} else if (k->kind == K_STRING &&
		    k->off == offsetof(struct config, notify_pidfile))
			ld->pidfile_seen = true;
		else if (k->kind == K_ARGV &&
		    k->off == offsetof(struct config, notify_run))
			ld->run_seen = true;
		else if (k->kind == K_ENUM &&
		    k->off == offsetof(struct config, notify_run_exit_stop)) {
			ld->run_exit_seen = true;
			ld->run_exit_mark = key_node->start_mark;
		} else if (k->kind == K_ENUM &&
		    k->off == offsetof(struct config, notify_run_inherit)) {
			ld->run_output_seen = true;
			ld->run_output_mark = key_node->start_mark;
		} else if (k->kind == K_DURATION &&
		    k->off == offsetof(struct config, zk_session_timeout_ms)) {
			ld->session_seen = true;
			ld->session_mark = value->start_mark;
		} else if (k->kind == K_DURATION &&
		    k->off == offsetof(struct config, zk_tick_ms)) {
			ld->tick_seen = true;
			ld->tick_mark = value->start_mark;
		}
		if (prefix[0] != '\0')
			snprintf(what, sizeof(what), "%s.%s", prefix, k->name);
		else
			snprintf(what, sizeof(what), "%s", k->name);
		load_value(ld, k, what, key_node, value);
	}
}

/* Checks that need more than one key, and defaults that need the system. */
static void
check_whole(struct loader *ld)
{
	struct config *conf = ld->conf;
	char host[200], id[ID_MAX + 1];	/* 199 + ':' pid ':' 8 fits */
	char b1[32], b2[32], b3[32];
	uint32_t rnd;

	/*
	 * ZooKeeper grants no session under 2 ticks (minSessionTimeout), and
	 * the lease counts on T >= 2 x tick_time (doc/design.md, "The
	 * lease"): below that the agent would never lead.
	 */
	if (conf->zk_tick_ms > 0 &&
	    conf->zk_session_timeout_ms < 2 * conf->zk_tick_ms) {
		format_ms(b1, sizeof(b1), conf->zk_session_timeout_ms);
		format_ms(b2, sizeof(b2), conf->zk_tick_ms);
		format_ms(b3, sizeof(b3), 2 * conf->zk_tick_ms);
		if (ld->session_seen)
			conf_error(ld, &ld->session_mark, "zookeeper.session_"
			    "timeout: %s is less than twice zookeeper.tick_time "
			    "(%s): ZooKeeper gives no session under 2 ticks, and "
			    "the agent leads only with T >= 2 x tick_time (use at "
			    "least %s)", b1, b2, b3);
		else
			conf_error(ld, &ld->tick_mark, "zookeeper.tick_time: %s "
			    "is more than half of zookeeper.session_timeout (%s, "
			    "the default): the agent leads only with T >= 2 x "
			    "tick_time (set session_timeout to at least %s)", b2,
			    b1, b3);
	}
	if (ld->signal_seen && !ld->pidfile_seen)
		conf_error(ld, &ld->signal_mark, "notify.%s: needs "
		    "notify.pidfile (the process to signal)", ld->signal_key);
	if (ld->run_exit_seen && !ld->run_seen)
		conf_error(ld, &ld->run_exit_mark, "notify.run_exit: needs "
		    "notify.run (the command whose end it is about)");
	else if (conf->notify_run_exit_stop && ld->partitions_seen)
		conf_error(ld, &ld->run_exit_mark, "notify.run_exit: stop "
		    "needs a single election (with partitions: one command "
		    "runs per partition; use restart)");
	else if (conf->notify_run_exit_stop && !conf->election_candidate)
		conf_error(ld, &ld->run_exit_mark, "notify.run_exit: stop "
		    "needs election.candidate: true (an observer never runs "
		    "the command)");
	if (ld->run_output_seen && !ld->run_seen)
		conf_error(ld, &ld->run_output_mark, "notify.run_output: "
		    "needs notify.run (the command whose output it is about)");
	if (conf->election_id == NULL) {
		/*
		 * hostname:pid for the operator (ps, the logs), and 32 random
		 * bits: containers on a host network share the hostname and
		 * each agent is pid 1 of its namespace, so hostname:pid alone
		 * was the same in all of them.
		 */
		if (gethostname(host, sizeof(host)) == -1)
			strcpy(host, "localhost");
		host[sizeof(host) - 1] = '\0';
		if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			rnd = (uint32_t)clock() ^ (uint32_t)time(NULL) ^
			    (uint32_t)getpid() << 16;
		snprintf(id, sizeof(id), "%s:%ld:%08" PRIx32, host,
		    (long)getpid(), rnd);
		set_string(&conf->election_id, id);
	}
	if (!ld->partitions_seen)
		return;
	if (ld->partitions_keys == 0)
		conf_error(ld, &ld->partitions_mark, "partitions: needs count "
		    "(partitions 0..N-1) or names (a list)");
	else if (ld->partitions_keys == 2)
		conf_error(ld, &ld->partitions_second, "partitions: count and "
		    "names exclude each other (use one)");
	else if (!conf->election_candidate)
		conf_error(ld, &ld->partitions_mark, "partitions: needs "
		    "election.candidate: true (an observer takes no part in "
		    "partitions)");
	else if (conf->election_path != NULL &&
	    strlen(conf->election_path) + CONFIG_PARTITION_PATH_LEN +
	    CONFIG_NODE_NAME_LEN >= CONFIG_ZK_PATH_MAX)
		conf_error(ld, &ld->partitions_mark, "partitions: election.path "
		    "is too long for partition nodes (at most %d bytes with "
		    "partitions)", CONFIG_ZK_PATH_MAX - 1 -
		    CONFIG_PARTITION_PATH_LEN - CONFIG_NODE_NAME_LEN);
}

/* Maps a byte offset of the input to a mark, for reader errors. */
static yaml_mark_t
offset_mark(const unsigned char *text, size_t len, size_t offset)
{
	yaml_mark_t mark = { offset, 0, 0 };
	size_t i;

	for (i = 0; i < offset && i < len; i++) {
		if (text[i] == '\n') {
			mark.line++;
			mark.column = 0;
		} else
			mark.column++;
	}
	return mark;
}

static void
report_parser_error(struct loader *ld, const yaml_parser_t *parser,
    const unsigned char *text, size_t len)
{
	yaml_mark_t mark;

	switch (parser->error) {
	case YAML_MEMORY_ERROR:
		conf_error(ld, &file_start, "out of memory");
		break;
	case YAML_READER_ERROR:
		mark = offset_mark(text, len, parser->problem_offset);
		conf_error(ld, &mark, "%s", parser->problem != NULL ?
		    parser->problem : "cannot decode input");
		break;
	default:
		conf_error(ld, &parser->problem_mark, "%s",
		    parser->problem != NULL ? parser->problem : "syntax error");
		break;
	}
}

static int
read_file(const char *file, FILE *errs, unsigned char **text, size_t *len)
{
	FILE *fp;
	unsigned char *buf = NULL, *nbuf;
	size_t cap = 0, n = 0, got;

	if ((fp = fopen(file, "r")) == NULL) {
		fprintf(errs, "%s: cannot open: %s\n", file, strerror(errno));
		return -1;
	}
	for (;;) {
		if (n == cap) {
			cap = cap == 0 ? 4096 : cap * 2;
			if ((nbuf = realloc(buf, cap)) == NULL)
				abort();
			buf = nbuf;
		}
		got = fread(buf + n, 1, cap - n, fp);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(fp)) {
		fprintf(errs, "%s: cannot read: %s\n", file, strerror(errno));
		free(buf);
		fclose(fp);
		return -1;
	}
	fclose(fp);
	*text = buf;
	*len = n;
	return 0;
}

/* Every key at its default. */
static struct config *
config_new(void)
{
	struct config *conf;

	if ((conf = calloc(1, sizeof(*conf))) == NULL)
		abort();
	conf->zk_session_timeout_ms = DEFAULT_SESSION_MS;
	conf->election_candidate = true;
	set_string(&conf->api_socket, CONFIG_DEFAULT_SOCKET);
	conf->api_socket_mode = DEFAULT_SOCKET_MODE;
	conf->notify_hook_timeout_ms = DEFAULT_HOOK_MS;
	conf->log_level = LOG_INFO;
	conf->log_format = LOG_TEXT;
	return conf;
}

/* A node added to a flags document carries its flag's index as a mark. */
static int
flags_node(yaml_document_t *doc, int id, int flag)
{
	if (id == 0)
		abort();	/* out of memory */
	yaml_document_get_node(doc, id)->start_mark.index = (size_t)flag;
	return id;
}

static int
flags_scalar(yaml_document_t *doc, const char *text, int flag)
{
	/* Double-quoted: "", "null" and "~" stay the text they are. */
	return flags_node(doc, yaml_document_add_scalar(doc, NULL,
	    (yaml_char_t *)(uintptr_t)text, (int)strlen(text),
	    YAML_DOUBLE_QUOTED_SCALAR_STYLE), flag);
}

/*
 * A flag's text as a scalar, or 0 with an error when libyaml refuses it:
 * it takes only UTF-8 (a file's other bytes are refused by its parser,
 * at file:line:col).
 */
static int
flags_text(struct loader *ld, yaml_document_t *doc, const char *text,
    int flag)
{
	yaml_mark_t mark = { (size_t)flag, 0, 0 };
	int id;

	id = yaml_document_add_scalar(doc, NULL,
	    (yaml_char_t *)(uintptr_t)text, (int)strlen(text),
	    YAML_DOUBLE_QUOTED_SCALAR_STYLE);
	if (id == 0) {
		conf_error(ld, &mark, "not valid UTF-8 text");
		return 0;
	}
	return flags_node(doc, id, flag);
}

/* The mapping under key NAME of mapping MAP, made if it is not there. */
static int
flags_section(yaml_document_t *doc, int map, const char *name, int flag)
{
	yaml_node_pair_t *pair;
	yaml_node_t *m = yaml_document_get_node(doc, map), *k;
	int sub;

	for (pair = m->data.mapping.pairs.start;
	    pair < m->data.mapping.pairs.top; pair++) {
		k = yaml_document_get_node(doc, pair->key);
		if (strcmp((const char *)k->data.scalar.value, name) == 0 &&
		    yaml_document_get_node(doc, pair->value)->type ==
		    YAML_MAPPING_NODE)
			return pair->value;
	}
	sub = flags_node(doc, yaml_document_add_mapping(doc, NULL,
	    YAML_BLOCK_MAPPING_STYLE), flag);
	if (!yaml_document_append_mapping_pair(doc, map,
	    flags_scalar(doc, name, flag), sub))
		abort();
	return sub;
}

/*
 * A command named on a command line is looked up as a shell would: a
 * name without '/' in PATH, a relative path from here. The absolute path
 * goes into notify.run (whose checks want one); NULL with *why set when
 * it is not found.
 */
static char *
flags_command(const char *name, const char **why)
{
	const char *path = getenv("PATH"), *p, *end;
	char file[PATH_MAX], cwd[PATH_MAX];
	struct stat st;
	char *out;

	*why = NULL;
	if (name[0] == '/')
		out = strdup(name);
	else if (strchr(name, '/') != NULL) {
		if (getcwd(cwd, sizeof(cwd)) == NULL) {
			*why = strerror(errno);
			return NULL;
		}
		if (asprintf(&out, "%s/%s", cwd, name) == -1)
			out = NULL;
	} else {
		if (path == NULL || path[0] == '\0')
			path = "/usr/local/bin:/usr/bin:/bin";
		for (p = path; ; p = end + 1) {
			end = strchr(p, ':');
			if (end == NULL)
				end = p + strlen(p);
			if (end > p && snprintf(file, sizeof(file), "%.*s/%s",
			    (int)(end - p), p, name) < (int)sizeof(file) &&
			    stat(file, &st) == 0 && S_ISREG(st.st_mode) &&
			    access(file, X_OK) == 0)
				break;
			if (*end == '\0') {
				*why = "not found in PATH";
				return NULL;
			}
		}
		out = strdup(file);
	}
	if (out == NULL)
		abort();
	return out;
}

/* A configuration from settings alone (see config.h). */
struct config *
config_from_flags(const char *prog, const struct config_flag *flags, int n,
    FILE *errs)
{
	struct loader ld = { .file = prog, .errs = errs, .flags = flags,
	    .nflags = n };
	yaml_document_t doc;
	struct config *conf;
	char key[128], *dot, *name, *cmd;
	const char *why;
	yaml_mark_t mark = { 0, 0, 0 };
	int root, map, seq, item, i, j;

	conf = config_new();
	ld.conf = conf;
	ld.doc = &doc;
	if (!yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1))
		abort();
	root = flags_node(&doc, yaml_document_add_mapping(&doc, NULL,
	    YAML_BLOCK_MAPPING_STYLE), 0);
	for (i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s", flags[i].key);
		map = root;
		for (name = key; (dot = strchr(name, '.')) != NULL;
		    name = dot + 1) {
			*dot = '\0';
			map = flags_section(&doc, map, name, i + 1);
		}
		if (flags[i].argv == NULL) {
			if ((item = flags_text(&ld, &doc, flags[i].value,
			    i + 1)) != 0 &&
			    !yaml_document_append_mapping_pair(&doc, map,
			    flags_scalar(&doc, name, i + 1), item))
				abort();
			continue;
		}
		seq = flags_node(&doc, yaml_document_add_sequence(&doc, NULL,
		    YAML_FLOW_SEQUENCE_STYLE), i + 1);
		for (j = 0; flags[i].argv[j] != NULL; j++) {
			cmd = NULL;
			if (j == 0 && flags[i].argv[0][0] != '\0' &&
			    (cmd = flags_command(flags[i].argv[0], &why)) ==
			    NULL) {
				mark.index = (size_t)i + 1;
				conf_error(&ld, &mark, "cannot run '%s': %s",
				    flags[i].argv[0], why);
			}
			item = flags_text(&ld, &doc, cmd != NULL ? cmd :
			    flags[i].argv[j], i + 1);
			free(cmd);
			if (item == 0)
				break;		/* said once per flag */
			if (!yaml_document_append_sequence_item(&doc, seq,
			    item))
				abort();
		}
		if (!yaml_document_append_mapping_pair(&doc, map,
		    flags_scalar(&doc, name, i + 1), seq))
			abort();
	}
	if (ld.nerrors == 0) {
		walk_mapping(&ld, root_keys, "", yaml_document_get_root_node(&doc),
		    &file_start);
		check_whole(&ld);
	}
	yaml_document_delete(&doc);
	if (ld.nerrors > 0) {
		config_free(conf);
		return NULL;
	}
	return conf;
}

/* Reads, checks and returns the configuration in FILE (see config.h). */
struct config *
config_load(const char *file, FILE *errs)
{
	struct loader ld = { .file = file, .errs = errs };
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	yaml_node_t *root;
	struct config *conf;
	unsigned char *text;
	size_t len;

	if (read_file(file, errs, &text, &len) == -1)
		return NULL;

	conf = config_new();
	set_string(&conf->file, file);
	ld.conf = conf;
	ld.doc = &doc;

	if (!yaml_parser_initialize(&parser))
		abort();
	yaml_parser_set_input_string(&parser, text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		report_parser_error(&ld, &parser, text, len);
		goto done;
	}
	root = yaml_document_get_root_node(&doc);
	if (root == NULL || node_is_null(root)) {
		conf_error(&ld, &file_start, "empty configuration");
	} else if (root->type != YAML_MAPPING_NODE) {
		conf_error(&ld, &root->start_mark, "expected a mapping at the "
		    "top level, not %s", node_kind_name(root));
	} else
		walk_mapping(&ld, root_keys, "", root, &file_start);

	/* A second document would be silently ignored: refuse it. */
	if (root != NULL) {
		if (!yaml_parser_load(&parser, &extra))
			report_parser_error(&ld, &parser, text, len);
		else {
			if (yaml_document_get_root_node(&extra) != NULL)
				conf_error(&ld, &extra.start_mark, "only one "
				    "YAML document is allowed");
			yaml_document_delete(&extra);
		}
	}
	yaml_document_delete(&doc);
	check_whole(&ld);
done:
	yaml_parser_delete(&parser);
	free(text);
	if (ld.nerrors > 0) {
		config_free(conf);
		return NULL;
	}
	return conf;
}

/* Frees a config returned by config_load; NULL is fine. */
void
config_free(struct config *conf)
{
	if (conf == NULL)
		return;
	free(conf->file);
	free(conf->zk_servers);
	free(conf->zk_auth_scheme);
	free(conf->zk_auth_credentials);
	free(conf->election_path);
	free(conf->election_id);
	free(conf->election_value);
	free(conf->api_socket);
	free(conf->api_listen);
	argv_free(conf->notify_on_leader);
	argv_free(conf->notify_on_follower);
	free(conf->notify_pidfile);
	argv_free(conf->notify_run);
	argv_free(conf->notify_on_leader_change);
	partitions_free(conf);
	free(conf);
}

/* "<number>[.<fraction>]<ms|s|m|h>" to whole milliseconds; -1 otherwise. */
int
config_parse_duration(const char *text, uint64_t *ms)
{
	static const struct {
		const char	*name;
		uint64_t	 ms;
	} units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
	};
	const char *p = text;
	uint64_t whole = 0, frac = 0, scale = 1, mult = 0, total, part;
	size_t i;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		if (__builtin_mul_overflow(whole, 10, &whole) ||
		    __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
			return -1;
	}
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return -1;
		for (; isdigit((unsigned char)*p); p++) {
			if (scale == 1000000000)
				return -1;	/* finer than anyone means */
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
		}
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(p, units[i].name) == 0)
			mult = units[i].ms;
	if (mult == 0)
		return -1;

	/* frac < 1e9 and mult <= 3.6e6: no overflow here. */
	part = frac * mult;
	if (part % scale != 0)
		return -1;	/* not a whole number of milliseconds */
	if (__builtin_mul_overflow(whole, mult, &total) ||
	    __builtin_add_overflow(total, part / scale, &total))
		return -1;
	*ms = total;
	return 0;
}

/* "SIGUSR1", "usr1" or "1".."64" to a signal number; -1 otherwise. */
int
config_parse_signal(const char *text)
{
	static const struct {
		const char	*name;
		int		 sig;
	} sigs[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT },
		{ "ILL", SIGILL }, { "TRAP", SIGTRAP }, { "ABRT", SIGABRT },
		{ "IOT", SIGABRT }, { "BUS", SIGBUS }, { "FPE", SIGFPE },
		{ "KILL", SIGKILL }, { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV },
		{ "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },
		{ "TERM", SIGTERM }, { "CHLD", SIGCHLD }, { "CONT", SIGCONT },
		{ "STOP", SIGSTOP }, { "TSTP", SIGTSTP }, { "TTIN", SIGTTIN },
		{ "TTOU", SIGTTOU }, { "URG", SIGURG }, { "XCPU", SIGXCPU },
		{ "XFSZ", SIGXFSZ }, { "VTALRM", SIGVTALRM }, { "PROF", SIGPROF },
		{ "WINCH", SIGWINCH }, { "IO", SIGIO }, { "SYS", SIGSYS },
#ifdef SIGPWR
		{ "PWR", SIGPWR },
#endif
#ifdef SIGPOLL
		{ "POLL", SIGPOLL },
#endif
#ifdef SIGSTKFLT
		{ "STKFLT", SIGSTKFLT },
#endif
	};
	const char *name = text;
	size_t i, n = strlen(text);
	unsigned long num;

	if (n > 0 && n <= 2 && strspn(text, "0123456789") == n) {
		num = strtoul(text, NULL, 10);
		return num >= 1 && num <= SIGNAL_MAX ? (int)num : -1;
	}
	if (strncasecmp(name, "SIG", 3) == 0)
		name += 3;
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcasecmp(name, sigs[i].name) == 0)
			return sigs[i].sig;
	return -1;
}
