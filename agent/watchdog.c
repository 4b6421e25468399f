/* SPDX-License-Identifier: MIT */
/*
 * The watchdog: a thread outside the event loop that ends the process when
 * the loop stops beating, so that the agent's ZooKeeper session never
 * outlives its loop.
 *
 * libzookeeper pings from a thread of its own. A loop that stands still
 * (blocked in a system call, spinning in a bug) while that thread runs
 * keeps the session, and so its node, alive for ever: the app gets no
 * answer and no other agent can lead. The loop beats at least every
 * T/WATCHDOG_BEAT (T: the negotiated session timeout; main.c says when);
 * when this thread has watched it stay silent for T/2, it kills the
 * process with SIGKILL. Silence counts from the last beat, idle time
 * included, so a stall shorter than T/2 - T/6 = T/3 never kills. The
 * pings stop with it, the server expires the session at most T (rounded
 * up to a tick) after the last one, and the successor, woken by the
 * deletion of our node, claims. A process that is dead answers nothing,
 * so nothing it says can overlap its successor's term; a loop that
 * resumes before the bound answers through the lease check as always,
 * and its first beat says how long it was silent if that was T/4 or more.
 *
 * Far from T/2 of silence this thread sleeps until a little before it (a
 * second at most), not a beat at a time: waking it at every beat cost as
 * much as the beat. Near it, it sleeps T/WATCHDOG_LOOK at a time, and it
 * kills only on a wake that came after such a short sleep, on time.
 *
 * Only time this thread saw pass counts against the loop: when its own
 * sleep overran by a wide margin, or SIGCONT came, the whole process was
 * stopped (SIGSTOP, a debugger, a frozen VM) or starved, and the loop gets
 * a fresh T/2 from then. A stopped process stops libzookeeper's thread
 * too, so ZooKeeper already deals with that case.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "watchdog.h"

struct watchdog {
	pthread_t		 thread;
	pthread_mutex_t		 lock;		/* for the stop only */
	pthread_cond_t		 wake;
	_Atomic uint64_t	 beat;		/* ms, CLOCK_MONOTONIC; 0: not armed */
	_Atomic uint64_t	 ref;		/* ms: the process ran again after a stop */
	_Atomic uint64_t	 due;		/* ms: when this thread wakes next */
	_Atomic uint32_t	 timeout_ms;	/* T */
	atomic_bool		 stop;
};

static uint64_t
watchdog_now_ms(void)
{
	struct timespec ts;

	/* MONOTONIC, not BOOTTIME: a suspended machine is a stopped process,
	 * not a stalled loop. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t
watchdog_clamp(uint64_t p)
{
	if (p < WATCHDOG_PERIOD_MIN_MS)
		p = WATCHDOG_PERIOD_MIN_MS;
	if (p > WATCHDOG_PERIOD_MAX_MS)
		p = WATCHDOG_PERIOD_MAX_MS;
	return p;
}

uint64_t
watchdog_beat_ms(uint32_t timeout_ms)
{
	return watchdog_clamp(timeout_ms / WATCHDOG_BEAT);
}

/* How often this thread looks once near T/2 of silence. */
static uint64_t
watchdog_look_ms(uint32_t timeout_ms)
{
	return watchdog_clamp(timeout_ms / WATCHDOG_LOOK);
}

static void
watchdog_fire(uint64_t silent_ms, uint32_t t)
{
	log_error("watchdog: the event loop has not run for %llu ms (the bound "
	    "is half the session timeout of %u ms); killing the agent so that "
	    "ZooKeeper expires its session and another agent can lead",
	    (unsigned long long)silent_ms, t);
	/* Say why if stderr takes it soon; never wait long for it. */
	(void)log_flush(100);
	kill(getpid(), SIGKILL);
	/* Process 1 of a PID namespace (a container) ignores a SIGKILL sent
	 * from inside it; exiting ends every thread all the same. */
	_exit(2);
}

/* The one watchdog, for the SIGCONT handler. */
static struct watchdog *_Atomic watchdog_self;

/* Continued after a stop: the time stood still counts for nothing. */
static void
watchdog_cont(int sig)
{
	struct watchdog *wd = atomic_load(&watchdog_self);
	int saved = errno;

	(void)sig;
	if (wd != NULL)
		atomic_store(&wd->ref, watchdog_now_ms());
	errno = saved;
}

/* A wake this late: the whole process stood still, not the loop alone. */
static bool
watchdog_overslept(uint64_t now, uint64_t due, uint64_t period)
{
	return due != 0 && now > due + period + WATCHDOG_OVERSLEEP_MS;
}

/* When the loop last showed life, stops of the whole process left out. */
static uint64_t
watchdog_since(struct watchdog *wd, uint64_t beat)
{
	uint64_t ref = atomic_load(&wd->ref);

	return beat > ref ? beat : ref;
}

static void *
watchdog_main(void *arg)
{
	struct watchdog *wd = arg;
	uint64_t now, due, wait, beat, since, period, lead;
	uint32_t t;
	struct timespec ts;

	now = watchdog_now_ms();
	while (!atomic_load(&wd->stop)) {
		t = atomic_load(&wd->timeout_ms);
		period = watchdog_look_ms(t);
		beat = atomic_load(&wd->beat);
		since = watchdog_since(wd, beat);
		/* A long sleep ends this far before T/2 of silence: a wake up
		 * to the overslept bound late still finds less than T/2, so a
		 * stop that ended just after it cannot pass for a stall. */
		lead = 2 * period + WATCHDOG_OVERSLEEP_MS;
		wait = period;
		if (beat != 0 && since + t / 2 > now + lead + period)
			wait = since + t / 2 - lead - now;
		if (wait > WATCHDOG_PERIOD_MAX_MS)
			wait = WATCHDOG_PERIOD_MAX_MS;
		due = now + wait;
		atomic_store(&wd->due, due);
		ts.tv_sec = (time_t)(due / 1000);
		ts.tv_nsec = (long)(due % 1000) * 1000000;
		pthread_mutex_lock(&wd->lock);
		while (!atomic_load(&wd->stop) && pthread_cond_clockwait(&wd->wake,
		    &wd->lock, CLOCK_MONOTONIC, &ts) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&wd->lock);
		now = watchdog_now_ms();
		/* Overslept: this thread did not run either. Do not count it. */
		if (watchdog_overslept(now, due, period))
			atomic_store(&wd->ref, now);
		beat = atomic_load(&wd->beat);
		if (beat == 0 || atomic_load(&wd->stop))
			continue;
		since = watchdog_since(wd, beat);
		if (now > since && now - since >= (uint64_t)t / 2)
			watchdog_fire(now - beat, t);
	}
	return NULL;
}

struct watchdog *
watchdog_start(uint32_t timeout_ms)
{
	struct watchdog *wd;
	struct sigaction sa;
	sigset_t all, old;
	int rc;

	if ((wd = calloc(1, sizeof(*wd))) == NULL) {
		log_warn("watchdog");
		return NULL;
	}
	pthread_mutex_init(&wd->lock, NULL);
	pthread_cond_init(&wd->wake, NULL);
	atomic_init(&wd->beat, 0);
	atomic_init(&wd->ref, 0);
	atomic_init(&wd->due, 0);
	atomic_init(&wd->timeout_ms, timeout_ms);
	atomic_init(&wd->stop, false);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&wd->thread, NULL, watchdog_main, wd);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		errno = rc;
		log_warn("watchdog: cannot start its thread");
		free(wd);
		return NULL;
	}
	atomic_store(&watchdog_self, wd);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog_cont;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCONT, &sa, NULL) == -1)
		log_warn("watchdog: SIGCONT");
	return wd;
}

/* The loop runs: beat, and say so once it had been silent for T/4. Not
 * after a disarmed spell, nor for a stop of the whole process: SIGCONT or
 * the thread saw it, or the thread should have woken long ago and has not
 * run yet either. */
static void
watchdog_stamp(struct watchdog *wd, uint32_t t)
{
	uint64_t now = watchdog_now_ms(), last;

	last = atomic_exchange(&wd->beat, now);
	if (last == 0 || watchdog_overslept(now, atomic_load(&wd->due),
	    watchdog_look_ms(t)))
		return;
	last = watchdog_since(wd, last);
	if (now > last && now - last >= (uint64_t)t / 4)
		log_warnx("watchdog: the event loop did not run for %llu ms; at "
		    "%u ms (half the session timeout) the agent is killed",
		    (unsigned long long)(now - last), t / 2);
}

void
watchdog_beat(struct watchdog *wd, uint32_t timeout_ms)
{
	if (wd == NULL)
		return;
	atomic_store(&wd->timeout_ms, timeout_ms);
	watchdog_stamp(wd, timeout_ms);
}

void
watchdog_alive(struct watchdog *wd)
{
	if (wd != NULL && atomic_load_explicit(&wd->beat, memory_order_relaxed) != 0)
		watchdog_stamp(wd, atomic_load(&wd->timeout_ms));
}

void
watchdog_hold(struct watchdog *wd, bool hold)
{
	if (wd == NULL)
		return;
	atomic_store(&wd->beat, hold ? 0 : watchdog_now_ms());
}

void
watchdog_stop(struct watchdog *wd)
{
	if (wd == NULL)
		return;
	atomic_store(&wd->beat, 0);
	signal(SIGCONT, SIG_DFL);
	atomic_store(&watchdog_self, NULL);
	pthread_mutex_lock(&wd->lock);
	atomic_store(&wd->stop, true);
	pthread_cond_signal(&wd->wake);
	pthread_mutex_unlock(&wd->lock);
	pthread_join(wd->thread, NULL);
	pthread_mutex_destroy(&wd->lock);
	pthread_cond_destroy(&wd->wake);
	free(wd);
}
