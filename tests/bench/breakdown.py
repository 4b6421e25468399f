#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: where the time of a graceful handover goes (issue 11).

Two agents at log.level debug. Each run: both settled (as in handover.py),
then SIGTERM of the leader's agent, and a long poll of the successor's
/v1/leader (waiting there before the clock starts) until it answers 200. The agents' own debug lines
`trace: <step> at=<us>` (CLOCK_BOOTTIME microseconds, one clock for every
process on the machine) give the time of each step of the graceful path:

  on the departing agent   stop          SIGTERM received
                           told          the app has been told of the loss
                           release-sent  the release request sent to ZooKeeper
                           release-done  its answer
  on the successor         pred-gone     the successor saw its predecessor go
                           confirm-sent  the successor's takeover request sent
                           confirm-done  its answer
  by this benchmark        first-200     the first 200 from the successor's
                                         /v1/leader (its own long poll)

For each step it prints the median and p95 time from the SIGTERM (as sent by
the benchmark) and the median time from the step before it. A step the
agent did not log is named, with the number of runs it was missing from.
The agents log at debug level here, so the total can be a little longer than
handover.py's (agents at info level).

    tests/bench/breakdown.py [--runs 20] [--warmup 2] [--quiet 0.5]
    tests/bench/breakdown.py --self-test     (the parser on synthetic lines)
"""

import argparse
import os
import signal
import statistics
import sys
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer
from handover import zk_wait_pair

DEPARTING = ("stop", "told", "release-sent", "release-done")
SUCCESSOR = ("pred-gone", "confirm-sent", "confirm-done")
STEPS = DEPARTING + SUCCESSOR + ("first-200",)


def extract(departing_lines, successor_lines, t0_us, t200_us=None):
    """{step: µs after t0} for one handover: the first line of each step at
    or after t0 in the log of the agent that takes that step (`departing_lines`
    and `successor_lines` are the lines each agent logged during the run).
    first-200 comes from the benchmark's own client (t200_us)."""
    out = {}
    for lines, steps in ((departing_lines, DEPARTING), (successor_lines, SUCCESSOR)):
        for step, at in bl.zkharness.parse_traces(lines):
            if step in steps and step not in out and at >= t0_us:
                out[step] = at - t0_us
    if t200_us is not None:
        out["first-200"] = t200_us - t0_us
    return out


class LogTail:
    """The lines an agent's log file gained since the last call."""

    def __init__(self, path):
        self.path = path
        try:
            self.off = os.path.getsize(path)
        except OSError:
            self.off = 0

    def new_lines(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except OSError:
            return []
        # only whole lines; a partial last line waits for the next call
        cut = data.rfind(b"\n") + 1
        self.off += cut
        return data[:cut].decode(errors="replace").splitlines()


def run(args):
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    aset = BenchAgentSet(zk.hostport, "/zkelect/bench-breakdown")
    runs = []
    try:
        a = aset.new("bd-a", session_timeout=args.session_timeout, log_level="debug")
        b = aset.new("bd-b", session_timeout=args.session_timeout, log_level="debug")
        leader = aset.wait_one_leader(timeout=30)
        other = b if leader is a else a
        zk_wait_pair(leader, other, args.quiet)
        for i in range(args.warmup + args.runs):
            tl, to = LogTail(leader.log_path), LogTail(other.log_path)
            w = bl.LeaderLongPoll(other.socket)
            t0_us = bl.zkharness.boottime_us()
            t0 = time.monotonic()
            leader.signal(signal.SIGTERM)
            dt = w.wait_200(t0, 20)
            t200_us = t0_us + int(dt * 1e6)
            rc = leader.proc.wait(20)
            if rc != 0:
                raise AssertionError("%s exited %s on SIGTERM" % (leader.id, rc))
            leader.close_out()
            # the successor's lines of this handover are written before its 200
            if i >= args.warmup:
                runs.append(extract(tl.new_lines(), to.new_lines(), t0_us, t200_us))
            leader.start()
            leader, other = other, leader
            zk_wait_pair(leader, other, args.quiet)
    finally:
        aset.cleanup()
        zk.cleanup()
    return runs


def report(runs):
    n = len(runs)
    print("%-14s %-10s %11s %11s %14s" % ("step", "found", "median", "p95",
                                          "median step"))
    print("%-14s %-10s %11s %11s %14s" % ("", "(runs)", "from SIGTERM", "from SIGTERM",
                                          "from previous"))
    missing = []
    for k, step in enumerate(STEPS):
        vals = [r[step] / 1000.0 for r in runs if step in r]
        incs = []
        for r in runs:
            if step not in r:
                continue
            prev = [r[s] for s in STEPS[:k] if s in r]
            incs.append((r[step] - (prev[-1] if prev else 0)) / 1000.0)
        if vals:
            print("%-14s %3d of %-3d %8.2f ms %8.2f ms %11.2f ms" % (
                step, len(vals), n, statistics.median(vals), bl.pct(vals, 95),
                statistics.median(incs)))
        else:
            print("%-14s %3d of %-3d %11s %11s %14s" % (step, 0, n, "-", "-", "-"))
        if len(vals) < n:
            missing.append((step, n - len(vals)))
    out_of_order = sum(1 for r in runs
                       if [s for s in STEPS if s in r] != sorted((s for s in STEPS if s in r),
                                                                 key=lambda s: r[s]))
    print()
    if out_of_order:
        print("note: in %d run(s) the steps were not in the order above" % out_of_order)
    for step, k in missing:
        where = ("the departing agent's" if step in DEPARTING else
                 "the successor's" if step in SUCCESSOR else "the benchmark's")
        print("NOT FOUND: step %r missing from %d of %d runs: no line 'trace: %s at=<us>' in "
              "%s log after the SIGTERM%s" % (
                  step, k, n, step, where,
                  " (in no run at all)" if k == n else ""))
    if not missing:
        print("every step was found in every run")


def self_test():
    T = "2026-12-01T10:00:00.000Z zkelectd debug: trace: %s at=%d"
    J = '{"ts":"2026-12-01T10:00:00.000Z","level":"debug","msg":"trace: %s at=%d"}'
    dep = [T % ("stop", 900),                 # an older run: before t0
           T % ("stop", 1010), J % ("told", 1100), T % ("release-sent", 1200),
           "2026-12-01T10:00:00.000Z zkelectd info: stopping",
           T % ("release-done", 2500), T % ("pred-gone", 9999)]   # not the departing's step
    suc = [T % ("pred-gone", 2600), T % ("confirm-sent", 2700), T % ("confirm-sent", 2800),
           T % ("confirm-done", 4000)]
    got = extract(dep, suc, 1000, 5000)
    want = {"stop": 10, "told": 100, "release-sent": 200, "release-done": 1500,
            "pred-gone": 1600, "confirm-sent": 1700, "confirm-done": 3000, "first-200": 4000}
    assert got == want, got
    assert extract([], [], 1000, 1500) == {"first-200": 500}
    # the report names what it did not find
    report([want, {"first-200": 4000}])
    print("self-test passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--quiet", type=float, default=0.5,
                    help="seconds of quiet after both agents settled, before each SIGTERM")
    ap.add_argument("--session-timeout", default="2s")
    ap.add_argument("--self-test", action="store_true",
                    help="check the trace parser on synthetic lines and exit")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not 1 <= args.runs <= 1000 or not 0 <= args.warmup <= 100:
        ap.error("--runs 1..1000, --warmup 0..100")
    bl.header("breakdown: graceful handover step by step, from the agents' trace lines, "
              "%d runs (+%d warm-up)" % (args.runs, args.warmup))
    runs = run(args)
    print()
    report(runs)
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
