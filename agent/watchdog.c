/* SPDX-License-Identifier: MIT */
/*
 * The watchdog: a thread outside the event loop that ends the process when
 * the loop stops beating, so that the agent's ZooKeeper session never
 * outlives its loop.
 *
 * libzookeeper pings from a thread of its own. A loop that stands still
 * (blocked in a system call, spinning in a bug) while that thread runs
 * keeps the session, and so its node, alive for ever: the app gets no
 * answer and no other agent can lead. The loop beats every WATCHDOG_BEAT
 * of T (the negotiated session timeout); when this thread has watched it
 * stay silent for T/2, it kills the process with SIGKILL. The pings stop
 * with it, the server expires the session at most T (rounded up to a tick)
 * after the last one, and the successor, woken by the deletion of our
 * node, claims. A process that is dead answers nothing, so nothing it says
 * can overlap its successor's term; a loop that resumes before the bound
 * answers through the lease check as always.
 *
 * Only time this thread saw pass counts against the loop: when its own
 * sleep overran by a wide margin, the whole process was stopped (SIGSTOP,
 * a debugger, a frozen VM) or starved, and the loop gets a fresh T/2 from
 * then. A stopped process stops libzookeeper's thread too, so ZooKeeper
 * already deals with that case.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "watchdog.h"

struct watchdog {
	pthread_t		 thread;
	pthread_mutex_t		 lock;		/* for the stop only */
	pthread_cond_t		 wake;
	_Atomic uint64_t	 beat;		/* ms, CLOCK_MONOTONIC; 0: not armed */
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

/* The beat period for a session timeout of T ms. */
uint64_t
watchdog_period_ms(uint32_t timeout_ms)
{
	uint64_t p = timeout_ms / WATCHDOG_BEAT;

	if (p < WATCHDOG_PERIOD_MIN_MS)
		p = WATCHDOG_PERIOD_MIN_MS;
	if (p > WATCHDOG_PERIOD_MAX_MS)
		p = WATCHDOG_PERIOD_MAX_MS;
	return p;
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

static void *
watchdog_main(void *arg)
{
	struct watchdog *wd = arg;
	uint64_t now, last_wake, ref = 0, beat, period, since, warned = 0;
	uint32_t t;
	struct timespec ts;

	last_wake = watchdog_now_ms();

	while (!atomic_load(&wd->stop)) {
		t = atomic_load(&wd->timeout_ms);
		period = watchdog_period_ms(t);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(period / 1000);
		ts.tv_nsec += (long)(period % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&wd->lock);
		while (!atomic_load(&wd->stop) && pthread_cond_clockwait(&wd->wake,
		    &wd->lock, CLOCK_MONOTONIC, &ts) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&wd->lock);
		now = watchdog_now_ms();
		/* Overslept: this thread did not run either. Do not count it. */
		if (now - last_wake > 2 * period + WATCHDOG_OVERSLEEP_MS)
			ref = now;
		last_wake = now;
		beat = atomic_load(&wd->beat);
		if (beat == 0 || atomic_load(&wd->stop))
			continue;
		since = beat > ref ? beat : ref;
		if (now > since && now - since >= (uint64_t)t / 2)
			watchdog_fire(now - beat, t);
		/* Half way there: say so once, for whoever reads the log. */
		if (now > since && now - since >= (uint64_t)t / 4 &&
		    warned != beat) {
			warned = beat;
			log_warnx("watchdog: the event loop has not run for %llu "
			    "ms; at %u ms (half the session timeout) the agent "
			    "is killed", (unsigned long long)(now - beat), t / 2);
		}
	}
	return NULL;
}

struct watchdog *
watchdog_start(uint32_t timeout_ms)
{
	struct watchdog *wd;
	sigset_t all, old;
	int rc;

	if ((wd = calloc(1, sizeof(*wd))) == NULL) {
		log_warn("watchdog");
		return NULL;
	}
	pthread_mutex_init(&wd->lock, NULL);
	pthread_cond_init(&wd->wake, NULL);
	atomic_init(&wd->beat, 0);
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
	return wd;
}

void
watchdog_beat(struct watchdog *wd, uint32_t timeout_ms)
{
	if (wd == NULL)
		return;
	atomic_store(&wd->timeout_ms, timeout_ms);
	atomic_store(&wd->beat, watchdog_now_ms());
}

void
watchdog_alive(struct watchdog *wd)
{
	if (wd != NULL && atomic_load_explicit(&wd->beat, memory_order_relaxed) != 0)
		atomic_store(&wd->beat, watchdog_now_ms());
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
	pthread_mutex_lock(&wd->lock);
	atomic_store(&wd->stop, true);
	pthread_cond_signal(&wd->wake);
	pthread_mutex_unlock(&wd->lock);
	pthread_join(wd->thread, NULL);
	pthread_mutex_destroy(&wd->lock);
	pthread_cond_destroy(&wd->wake);
	free(wd);
}
