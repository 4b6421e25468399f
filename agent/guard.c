/* SPDX-License-Identifier: MIT */
/*
 * The guard: a small process between the agent (or zkelectctl run) and each
 * command it starts (hooks, the supervised child, run's command), so that
 * the command's whole process tree ends with the command and with whoever
 * started it, kill -9 included, with or without systemd.
 *
 * The guard is a forked copy of its starter that never execs. It makes
 * itself a child subreaper, so that whatever the tree orphans is re-parented
 * to it rather than to init, starts the command in a process group of its
 * own, and waits. It ends the tree (SIGKILL to the group, then to every
 * process re-parented to it, until it has no child left) when the command
 * exits, when the starter asks, and when the starter dies. It learns of that
 * death without a race: it holds one end of a socket pair whose other end
 * only the starter holds, so the death reads as end-of-file, however early.
 * PR_SET_PDEATHSIG alone would reach the direct child only, and only if set
 * before the parent died.
 *
 * The starter may be multithreaded (libzookeeper's threads), so between the
 * fork and the command's exec only async-signal-safe calls are made, and
 * all signals stay blocked across the fork, so that no handler of the
 * starter ever runs in the guard or the command.
 */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guard.h"

extern char **environ;

struct guard_msg {
	int32_t		 pid;		/* the command, or -1 if the fork failed */
	int32_t		 err;		/* 0, or errno of the failed fork or exec */
};

#define GUARD_TERM	'T'
#define GUARD_KILL	'K'

/* Closes descriptors lo..hi (inclusive). */
static void
guard_close_range(int lo, int hi)
{
	struct rlimit rl;
	int fd;

	if (lo > hi)
		return;
	if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0) == 0)
		return;
	/* No close_range (before Linux 5.9): one by one, up to the limit. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (rlim_t)hi + 1)
		hi = (int)rl.rlim_cur - 1;
	if (hi > 65535)
		hi = 65535;
	for (fd = lo; fd <= hi; fd++)
		close(fd);
}

/* Closes every descriptor above stderr except the (up to) three in KEEP. */
static void
guard_close_except(int keep[3])
{
	int i, j, t, lo = 3;

	for (i = 0; i < 3; i++)
		for (j = i + 1; j < 3; j++)
			if (keep[j] < keep[i]) {
				t = keep[i];
				keep[i] = keep[j];
				keep[j] = t;
			}
	for (i = 0; i < 3; i++) {
		if (keep[i] < lo)
			continue;
		guard_close_range(lo, keep[i] - 1);
		lo = keep[i] + 1;
	}
	guard_close_range(lo, 0x7fffffff);
}

/* Moves FD above stderr (our 0-2 are the command's to set). */
static int
guard_lift(int fd)
{
	int n;

	if (fd < 0 || fd > 2)
		return fd;
	n = fcntl(fd, F_DUPFD, 3);
	return n == -1 ? fd : n;
}

/* Parses the ppid out of /proc/PID/stat text: "pid (comm) S ppid ...". */
static pid_t
guard_stat_ppid(const char *buf, size_t len)
{
	const char *p = NULL, *end = buf + len;
	pid_t ppid = 0;
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] == ')')
			p = buf + i;		/* the last ')': comm may hold one */
	if (p == NULL || end - p < 5)
		return -1;
	p += 4;					/* ") S " */
	for (; p < end && *p >= '0' && *p <= '9'; p++)
		ppid = ppid * 10 + (*p - '0');
	return ppid;
}

/* What getdents64 returns (the libc's struct dirent may differ). */
struct guard_dirent {
	uint64_t	 d_ino;
	int64_t		 d_off;
	unsigned short	 d_reclen;
	unsigned char	 d_type;
	char		 d_name[];
};

/*
 * SIGKILL to each of our children, found by a scan of /proc. Each of them
 * is ours until we reap it, so its pid cannot have been reused meanwhile.
 */
static void
guard_kill_children(pid_t me)
{
	char buf[4096], path[32], stat[128];
	const struct guard_dirent *d;
	const char *s;
	long n, off;
	int dir, fd;
	ssize_t len;
	size_t k;
	pid_t pid;

	dir = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir == -1)
		return;
	while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (off = 0; off < n; off += d->d_reclen) {
			d = (const struct guard_dirent *)(void *)(buf + off);
			s = d->d_name;
			if (s[0] < '1' || s[0] > '9')
				continue;
			for (pid = 0, k = 0; s[k] >= '0' && s[k] <= '9' && k < 10; k++)
				pid = pid * 10 + (s[k] - '0');
			if (s[k] != '\0')
				continue;
			memcpy(path, "/proc/", 6);
			memcpy(path + 6, s, k);
			memcpy(path + 6 + k, "/stat", 6);
			if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
				continue;
			len = read(fd, stat, sizeof(stat));
			close(fd);
			if (len > 0 && guard_stat_ppid(stat, (size_t)len) == me)
				kill(pid, SIGKILL);
		}
	}
	close(dir);
}

/*
 * Ends the tree: SIGKILL to the command's group while the command is not
 * yet reaped (so that its group id cannot be anyone else's), then to every
 * child we have (orphans come to us, the subreaper) until none is left.
 */
static void
guard_end_tree(pid_t me, pid_t cmd, int *status, bool *reaped)
{
	pid_t pid;
	int st;

	if (!*reaped)
		kill(-cmd, SIGKILL);
	for (;;) {
		guard_kill_children(me);
		pid = waitpid(-1, &st, 0);
		if (pid == -1) {
			if (errno == EINTR)
				continue;
			break;		/* ECHILD: nothing of the tree is left */
		}
		if (pid == cmd) {
			*status = st;
			*reaped = true;
		}
	}
}

/* Exits as the command did: the same code, or killed by the same signal. */
static void __attribute__((noreturn))
guard_exit_as(int status)
{
	struct sigaction sa;
	struct rlimit none = { 0, 0 };
	sigset_t one;
	int sig;

	if (WIFEXITED(status))
		_exit(WEXITSTATUS(status));
	if (!WIFSIGNALED(status))
		_exit(127);
	sig = WTERMSIG(status);
	/* No core file of ours for the command's crash. */
	setrlimit(RLIMIT_CORE, &none);
	prctl(PR_SET_DUMPABLE, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
	sigemptyset(&one);
	sigaddset(&one, sig);
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	kill(getpid(), sig);
	_exit(128 + sig);
}

/*
 * The process's argv and environment strings, one contiguous area that
 * /proc/PID/cmdline (so ps) shows; set once at start-up, before any
 * thread, and written only in a guard, a copy of the process.
 */
static char	*guard_title_area;
static size_t	 guard_title_size;

void
guard_set_title_area(int argc, char *argv[])
{
	char *end;
	int i, j;

	if (argc < 1 || argv[0] == NULL)
		return;
	end = argv[0];
	for (i = 0; i < argc && argv[i] == end; i++)
		end = argv[i] + strlen(argv[i]) + 1;
	/* The guard execs nothing after its command's fork, and reads no
	 * variable: the environment's strings may carry the title too. */
	for (j = 0; i == argc && environ[j] != NULL && environ[j] == end; j++)
		end = environ[j] + strlen(environ[j]) + 1;
	guard_title_area = argv[0];
	guard_title_size = (size_t)(end - argv[0]);
}

/* "zkelect-guard CMD" over the title area (async-signal-safe; the command
 * is forked already: its argv may lie in that area). */
static void
guard_retitle(const char *title)
{
	size_t i;

	if (guard_title_area == NULL || guard_title_size < 2)
		return;
	for (i = 0; i < guard_title_size - 1 && title[i] != '\0'; i++)
		guard_title_area[i] = title[i];
	for (; i < guard_title_size; i++)
		guard_title_area[i] = '\0';
}

/* The command, between the fork and its exec (never returns). */
static void __attribute__((noreturn))
guard_exec(pid_t guard, int ctl, int out, int devnull, int status_fd,
    int go_fd, char *const argv[], char *const envp[], int flags)
{
	sigset_t none;
	char c;
	int err;

	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != guard)
		_exit(127);		/* the guard died before we could know */
	/* The guard has its title once this ends (end of file): whoever
	 * the command tells its parent's pid finds it named in ps. */
	while (read(go_fd, &c, 1) == -1 && errno == EINTR)
		;
	close(go_fd);
	if (devnull != -1)
		dup2(devnull, STDIN_FILENO);
	if (out != -1) {
		dup2(out, STDOUT_FILENO);
		dup2(out, STDERR_FILENO);
	}
	close(ctl);
	if (out > 2)
		close(out);
	if (devnull > 2)
		close(devnull);
	/* Handlers were reset in the guard; the mask is the last thing. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (flags & GUARD_SEARCH_PATH)
		execvpe(argv[0], argv, envp);
	else
		execve(argv[0], argv, envp);
	err = errno;
	if (write(status_fd, &err, sizeof(err)) < 0) {
		/* the guard reports 0 then; the exit status says 127 */
	}
	_exit(127);
}

/* The guard itself (never returns). All signals are blocked on entry. */
static void __attribute__((noreturn))
guard_main(int ctl, int out, int devnull, char *const argv[],
    char *const envp[], int flags)
{
	struct guard_msg msg;
	struct sigaction sa;
	struct pollfd pfd[2];
	sigset_t chld;
	pid_t me = getpid(), cmd;
	int keep[3], ep[2], gp[2], err = 0, sfd, st, status = 0, i;
	bool reaped = false;
	char cmds[16], title[512];
	size_t t, k;
	ssize_t n;

	/* The starter's handlers (libevent's) must never run here. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP)
			sigaction(i, &sa, NULL);
	/* Everything stays blocked: only SIGKILL ends the guard, and
	 * SIGCHLD is read from a signalfd. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	prctl(PR_SET_NAME, "zkelect-guard");
	/* Copied now: argv[0] may lie in the area the title overwrites. */
	for (t = 0; "zkelect-guard "[t] != '\0'; t++)
		title[t] = "zkelect-guard "[t];
	for (k = 0; argv[0][k] != '\0' && t < sizeof(title) - 1; k++)
		title[t++] = argv[0][k];
	title[t] = '\0';

	ctl = guard_lift(ctl);
	out = guard_lift(out);
	devnull = guard_lift(devnull);
	keep[0] = ctl;
	keep[1] = out;
	keep[2] = devnull;
	guard_close_except(keep);

	if (pipe2(ep, O_CLOEXEC) == -1) {
		cmd = -1;
		err = errno;
	} else if (pipe2(gp, O_CLOEXEC) == -1) {
		cmd = -1;
		err = errno;
		close(ep[0]);
		close(ep[1]);
	} else if ((cmd = fork()) == 0) {
		close(ep[0]);
		close(gp[1]);
		guard_exec(me, ctl, out, devnull, ep[1], gp[0], argv,
		    envp != NULL ? envp : environ, flags);
	} else if (cmd == -1) {
		err = errno;
		close(ep[0]);
		close(ep[1]);
		close(gp[0]);
		close(gp[1]);
	} else {
		setpgid(cmd, cmd);	/* both sides: no race with a kill */
		close(ep[1]);
		close(gp[0]);
		/* ps: not a second zkelectd -c FILE; the command's argv may
		 * lie in the area, but it is forked: its copy is its own. */
		guard_retitle(title);
		close(gp[1]);		/* go */
		/* End of file: the exec worked (the pipe is close-on-exec). */
		while ((n = read(ep[0], &err, sizeof(err))) == -1 &&
		    errno == EINTR)
			;
		if (n != (ssize_t)sizeof(err))
			err = 0;
		close(ep[0]);
	}
	if (cmd == -1)
		guard_retitle(title);
	if (out != -1)
		close(out);	/* only the command holds it now */
	if (devnull != -1)
		close(devnull);
	msg.pid = cmd;
	msg.err = err;
	if (send(ctl, &msg, sizeof(msg), MSG_NOSIGNAL) < 0) {
		/* the starter is gone: found below */
	}
	if (cmd == -1)
		_exit(127);

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	for (;;) {
		siginfo_t si;

		/* Peek (WNOWAIT): the command stays a zombie, its pid and
		 * group id ours, until the tree is ended. */
		memset(&si, 0, sizeof(si));
		while (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid != 0) {
			if (si.si_pid == cmd)
				goto end;
			waitpid(si.si_pid, &st, 0);	/* an orphan that ended */
			memset(&si, 0, sizeof(si));
		}
		pfd[0].fd = ctl;
		pfd[0].events = POLLIN;
		pfd[1].fd = sfd;
		pfd[1].events = POLLIN;
		if (poll(pfd, sfd != -1 ? 2 : 1, sfd != -1 ? -1 : 100) == -1)
			continue;
		if (sfd != -1 && pfd[1].revents != 0) {
			struct signalfd_siginfo ssi[8];

			while (read(sfd, ssi, sizeof(ssi)) > 0)
				;
		}
		if (pfd[0].revents == 0)
			continue;
		n = read(ctl, cmds, sizeof(cmds));
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			goto end;	/* the starter died (or closed): end it all */
		for (i = 0; i < n; i++) {
			if (cmds[i] == GUARD_KILL)
				goto end;
			if (cmds[i] == GUARD_TERM)
				kill(-cmd, SIGTERM);
		}
	}
end:
	guard_end_tree(me, cmd, &status, &reaped);
	if (!reaped)
		_exit(127);
	guard_exit_as(status);
}

/* Forks the guard, which starts ARGV (see guard.h). */
int
guard_spawn(struct guard *g, char *const argv[], char *const envp[], int flags)
{
	int sv[2], outp[2] = { -1, -1 }, devnull, saved;
	sigset_t all, old;
	pid_t pid;

	g->pid = -1;
	g->ctl = -1;
	g->out = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
		return -1;
	if ((flags & GUARD_CAPTURE) && pipe2(outp, O_CLOEXEC) == -1) {
		saved = errno;
		close(sv[0]);
		close(sv[1]);
		errno = saved;
		return -1;
	}
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

	/* No handler of ours may run in the child before it resets them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = fork();
	if (pid == 0)
		guard_main(sv[1], outp[1], devnull, argv, envp, flags);
	saved = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	close(sv[1]);
	if (outp[1] != -1)
		close(outp[1]);
	if (devnull != -1)
		close(devnull);
	if (pid == -1) {
		close(sv[0]);
		if (outp[0] != -1)
			close(outp[0]);
		errno = saved;
		return -1;
	}
	g->pid = pid;
	g->ctl = sv[0];
	g->out = outp[0];
	fcntl(g->ctl, F_SETFL, fcntl(g->ctl, F_GETFL) | O_NONBLOCK);
	if (g->out != -1)
		fcntl(g->out, F_SETFL, fcntl(g->out, F_GETFL) | O_NONBLOCK);
	return 0;
}

/* The guard's one report: the command's pid and exec errno. */
int
guard_report(struct guard *g, pid_t *pid, int *err)
{
	struct guard_msg msg;
	ssize_t n;

	if (g->ctl == -1)
		return -1;
	n = recv(g->ctl, &msg, sizeof(msg), MSG_DONTWAIT);
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n != (ssize_t)sizeof(msg))
		return -1;
	*pid = msg.pid;
	*err = msg.err;
	return 1;
}

static void
guard_send(const struct guard *g, char c)
{
	if (g->ctl != -1 && send(g->ctl, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* gone already: its exit is reaped as usual */
	}
}

/* Asks the guard for SIGTERM to the command's process group. */
void
guard_term(const struct guard *g)
{
	guard_send(g, GUARD_TERM);
}

/* Asks the guard to SIGKILL the whole tree and exit. */
void
guard_kill(const struct guard *g)
{
	guard_send(g, GUARD_KILL);
}

/* Closes our ends, once the guard is reaped. */
void
guard_release(struct guard *g)
{
	if (g->ctl != -1)
		close(g->ctl);
	if (g->out != -1)
		close(g->out);
	g->ctl = -1;
	g->out = -1;
	g->pid = -1;
}
