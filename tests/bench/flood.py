#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: the app's GET /v1/status latency under a flood of local clients
(doc/design.md, Targets, "Local API": under hostile neighbours; issue 12).

A leading agent; an app-like client polls /v1/status every 5 ms on a fresh
connection (as zkelectctl does). First it polls with nothing else going on
(the reference), then while a child process floods the same socket, round
after round: 200 connections held with half a request line, 2,000 opened and
closed as fast as possible, 500 more half-sent, 5,000 more churned, 300
sending garbage, the half-sent held one more second. Both on the Unix socket
and on the loopback TCP listener, in the same run, with the same client.

    tests/bench/flood.py [--seconds 5] [--rounds 5]
"""

import argparse
import sys

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer

import apiflood


def measure(target, seconds=None, rounds=None):
    app = apiflood.AppPoller(target, interval=0.005, timeout=2.0).start()
    counts = None
    try:
        if rounds is None:
            import time
            time.sleep(seconds)     # the idle reference: polling is the measurement
        else:
            counts = apiflood.run_flood(target, rounds=rounds, hold_seconds=1.0)
    finally:
        polls = app.stop()
    return polls, counts


def summary(label, polls):
    ok = [p.latency * 1000.0 for p in polls if p.outcome == "ok" and p.is_leader]
    bad = len(polls) - len(ok)
    p50, p99 = apiflood.pct(ok, 50), apiflood.pct(ok, 99)
    print("%-34s %6d polls  %4d not answered/not leader   p50 %7.3f ms   p99 %7.3f ms"
          "   max %7.3f ms" % (label, len(polls), bad, p50 or 0, p99 or 0, max(ok or [0])))
    return p50, p99, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=5, help="idle reference, per transport")
    ap.add_argument("--rounds", type=int, default=5, help="flood rounds, per transport")
    args = ap.parse_args()
    if not 1 <= args.seconds <= 120 or not 1 <= args.rounds <= 50:
        ap.error("--seconds 1..120, --rounds 1..50")
    apiflood.raise_nofile(8192)
    bl.header("flood: the app's GET /v1/status every 5 ms, idle against a flood "
              "(%d rounds)" % args.rounds)
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    aset = BenchAgentSet(zk.hostport, "/zkelect/bench-flood")
    rows = {}
    try:
        port = bl.zkharness.free_port()
        agent = aset.new("flood-a", session_timeout="6s", listen="127.0.0.1:%d" % port)
        st = agent.wait_for(lambda s: s.get("is_leader"), 30, what="lead")
        for name, target in (("unix", ("unix", agent.socket)), ("tcp", ("tcp", port))):
            rows[name, "idle"] = measure(target, seconds=args.seconds)[0]
            polls, counts = measure(target, rounds=args.rounds)
            rows[name, "flood"] = polls
            rows[name, "counts"] = counts
            if not agent.running():
                raise AssertionError("agent died under the flood; see %s" % agent.log_path)
        end = agent.status()
        kept = end is not None and end["is_leader"] and end["epoch"] == st["epoch"]
    finally:
        aset.cleanup()
        zk.cleanup()

    print()
    for name in ("unix", "tcp"):
        c = rows[name, "counts"]
        print("%s: the flood opened %d half-sent, %d churned, %d garbage connections "
              "(%d connects failed)" % (name, c["half-sent held"], c["churned"],
                                        c["garbage"], c["connect failed"]))
        i50, i99, _ = summary("  %s idle (reference)" % name, rows[name, "idle"])
        f50, f99, fbad = summary("  %s during the flood" % name, rows[name, "flood"])
        print("  ratio flood / idle: p50 %.2f, p99 %.2f; polls not answered during the "
              "flood: %d" % (bl.ratio(f50, i50), bl.ratio(f99, i99), fbad))
    print("leadership kept through both floods (same epoch): %s" % ("yes" if kept else "NO"))
    print("(the client is Python: its own overhead is in both figures alike)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
