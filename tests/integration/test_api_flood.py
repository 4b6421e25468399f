# SPDX-License-Identifier: MIT
"""Issue 12: the local API keeps answering its app under a flood of local
clients (connections held half-sent, thousands opened and dropped, garbage),
on the Unix socket and on the loopback TCP listener."""

import multiprocessing
import threading
import time

import pytest

import apiflood
from zkharness import SLOW, free_port, poll

# The longest the agent may leave a full backlog untouched under the flood
# (test_app_is_answered_through_a_flood); a stopped agent's stretch lasts as
# long as its stop (test_the_stall_check_tells_a_stopped_agent).
STALL_BOUND_MS = 100 * SLOW


def fdsize(pid):
    """The size of a process's descriptor table (it only grows)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("FDSize:"):
                return int(line.split()[1])
    raise AssertionError("no FDSize in /proc/%d/status" % pid)


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_app_is_answered_through_a_flood(agents, transport):
    apiflood.raise_nofile(8192)
    port = free_port()
    a1 = agents.new("a1", listen="127.0.0.1:%d" % port, log_level="info")
    s = a1.wait_for(lambda s: s["is_leader"], 20, what="a1 leads")
    target = ("unix", a1.socket) if transport == "unix" else ("tcp", port)
    fdsize0 = fdsize(a1.pid)
    app = apiflood.AppPoller(target, interval=0.005, timeout=2.0 * SLOW).start()
    try:
        counts = apiflood.run_flood(target, rounds=2, hold_seconds=1.0)
    finally:
        polls = app.stop()
    print("\nflood over %s: %r; app polls %d" % (transport, counts, len(polls)))
    assert a1.running(), "the agent died under the flood"
    bad = [p for p in polls if p.outcome != "ok"]
    assert not bad, "%d of %d polls not answered: %r" % (len(bad), len(polls), bad[:10])
    lost = [p for p in polls if p.is_leader is not True or p.epoch != s["epoch"]]
    assert not lost, "leadership not kept: %r" % lost[:10]
    assert len(polls) >= 100, "too few polls to mean anything: %d" % len(polls)
    # The agent's descriptor table did not grow under the flood: it was
    # made big enough at start, and closed connections give their
    # descriptors back at once.
    assert fdsize(a1.pid) == fdsize0, "descriptor table grew from %d to %d" % (
        fdsize0, fdsize(a1.pid))
    # The agent never stood still. The kernel refuses a connect at once
    # (EAGAIN) only while the listen backlog (4,096) is full, and every
    # accept lets the next connect in, so a stretch of refused connects
    # lasts as long as the agent took nothing from a full backlog. It used
    # to stand still, twice in CI (1,405 of 16,000 refused, and then the
    # app's polls too): each growth of the descriptor table in a process
    # with threads waits for an RCU grace period, and libevent closed freed
    # sockets only after a whole burst of accepts. How many connects are
    # refused says only how much faster the flooder is than the agent, which
    # varies with the build and the machine (an ASan build in CI: 1,277 of
    # 16,000 while every poll of the app was answered); it is printed.
    # Staged here under ASan: the agent starved (nice 19, its core shared
    # with three busy loops) refused 2,210 connects in stretches of at most
    # 12 ms. A stopped agent's stretch lasts as long as its stop, since the
    # flood tries a refused connect again until it goes through (the next
    # test). Over TCP the kernel refuses nothing on a full backlog: it drops
    # the SYN and the connect waits (up to the flood's 5 s), so there a
    # stretch counts only connects that timed out.
    longest = counts["longest refused stretch ms"]
    assert longest < STALL_BOUND_MS, (
        "the agent took nothing from a full backlog for %.0f ms: %r" % (longest, counts))
    # And it is serving normally afterwards.
    a1.wait_for(lambda d: d["is_leader"] and d["epoch"] == s["epoch"], 10,
                what="a1 still leads with its epoch")


def test_the_stall_check_tells_a_stopped_agent(agents):
    """The bound above tells an agent that stood still from one that kept
    accepting by how it measures, not by luck: the agent stopped (SIGSTOP)
    once the flood found its backlog full, and kept stopped for three times
    the bound, gives a refused stretch at least that long. (With the flood
    moving on after each refused connect, as it did, the stretch ended with
    the flood: 145 ms, under the bound once it is scaled by a slowdown of 2.)"""
    apiflood.raise_nofile(8192)
    a1 = agents.new("a1", log_level="info")
    poll(lambda: a1.status(), 20, what="a1 answers")
    progress = multiprocessing.get_context("fork").Value("l", 0)
    box = {}

    def flood():
        box["counts"] = apiflood.run_flood(("unix", a1.socket), rounds=1, hold_seconds=0,
                                           progress=progress)
    hold = 3 * STALL_BOUND_MS / 1000.0
    a1.pause()
    th = threading.Thread(target=flood, daemon=True)
    try:
        th.start()
        poll(lambda: progress.value > 0, 60, interval=0.005,
             what="the flood to find the stopped agent's backlog full")
        t0 = time.monotonic()
        while time.monotonic() - t0 < hold:     # the stop, staged: its length
            time.sleep(0.01)
    finally:
        a1.resume()
    th.join(300 * SLOW)
    assert not th.is_alive(), "the flood did not finish"
    counts = box["counts"]
    print("\nstopped %.0f ms with a full backlog: %r" % (hold * 1000, counts))
    longest = counts["longest refused stretch ms"]
    assert longest >= hold * 1000 > STALL_BOUND_MS, counts
    # Once continued, it took the rest of the flood: nothing was given up.
    assert counts["churned"] == 7000 and counts["half-sent held"] == 700, counts
