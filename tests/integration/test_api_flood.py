# SPDX-License-Identifier: MIT
"""Issue 12: the local API keeps answering its app under a flood of local
clients (connections held half-sent, thousands opened and dropped, garbage),
on the Unix socket and on the loopback TCP listener."""

import pytest

import apiflood
from zkharness import SLOW, free_port


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_app_is_answered_through_a_flood(agents, transport):
    apiflood.raise_nofile(8192)
    port = free_port()
    a1 = agents.new("a1", listen="127.0.0.1:%d" % port, log_level="info")
    s = a1.wait_for(lambda s: s["is_leader"], 20, what="a1 leads")
    target = ("unix", a1.socket) if transport == "unix" else ("tcp", port)
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
    # The flood itself was delivered, most of it. When the agent falls
    # behind (an ASan build, or a loaded 2-core machine: once a plain build
    # in CI, 1,406 of 16,000), the churner fills the listen backlog and the
    # kernel refuses its next connects at once (EAGAIN); the app's polls
    # were all answered even then (a sequential app has at most one connect
    # queued at a time).
    made = counts["churned"] + counts["half-sent held"] + counts["garbage"]
    assert counts["connect failed"] <= (made + counts["connect failed"]) // 4, counts
    # And it is serving normally afterwards.
    a1.wait_for(lambda d: d["is_leader"] and d["epoch"] == s["epoch"], 10,
                what="a1 still leads with its epoch")
