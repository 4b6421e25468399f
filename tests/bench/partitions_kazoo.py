#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: partitions against kazoo's SetPartitioner (issue 31), both
measured the same way in the same run.

The reference: K processes of tests/bench/kazoo_partitioner.py, each one
member of kazoo's SetPartitioner (Debian's python3-kazoo) over the same
partition names ("0".."P-1"), with the same session timeout T as the K
zkelect agents (`tick_time` 200 ms given to the agents; the servers'
tickTime is 200 ms). kazoo waits for the party to be still for its
`time_boundary` before it splits the set (its default is 30 s; here
--time-boundary, 1 s by default, kazoo's default max_reaction_time), and
every change of the party makes every member release everything and
acquire its new share (kazoo's documented loop).

The runs alternate: zkelect, kazoo, zkelect, kazoo, ... (--runs each), so
that the machine's load falls on both alike. Each side's run has a
ZooKeeper of its own, started fresh (so every cold start finds the paths
absent, on both sides), and in it:

  cold start   all K members started at once, until settled (as
               partharness.settled: every member counts K members, owns
               exactly its share, floor/ceil of P/K, every partition one
               owner; for kazoo: every member in `acquired` with K in the
               party, the held sets disjoint and covering the set); also
               from the first member node's creation (ZooKeeper's ctime),
               which leaves the processes' start-up (a Python interpreter
               importing kazoo; an agent reading its config) out;
  steady state --quiet s, then a --window with nothing done: ZooKeeper
               packets received per member per second (mntr's
               zk_packets_received / K / window, and per session from
               `cons` after `crst`), CPU % of each member (utime+stime of
               /proc/PID/stat, and schedstat), VmRSS, and how often its
               threads were woken (voluntary context switches);
  leave        SIGTERM of the first member until the K-1 left are settled;
  join         it starts again, timed from its member node's ctime (its
               start-up is not timed) until the K are settled;
  crash        SIGKILL of the second member until the K-1 left are
               settled (its session must expire first: T);
and for each event the partitions whose owner changed (the owner maps
before and after), against the ideal (the leaver's share; for a join
doc/design.md's bound ceil(P/K)). Both sides are settled and --quiet s
pass before every clock starts. kazoo's "never two owners" is checked
exactly from its members' own event lines (CLOCK_MONOTONIC): from the
moment the loop sees `acquired` to the moment it lets go. kazoo gives the
app no fencing token; zkelect gives each partition's epoch.

With --ensemble, only the cold start (and zkelect's "too little lease"
warnings in it) is measured, on a 3-server ensemble of its own per run
(tests/integration/harness/zkensemble.py), each member given the three
servers.

    tests/bench/partitions_kazoo.py [--agents 4] [--partitions 256]
        [--session-timeout 2s] [--runs 3] [--window 20] [--quiet 2]
        [--time-boundary 1] [--timeout 120] [--interval 0.02] [--ensemble]
        [--max-load 1.0]
"""

import argparse
import math
import statistics
import sys
import time

import benchlib as bl
from benchlib import ZooKeeperServer

import partbench as pb


def one_run(kind, args):
    """One side's run on a ZooKeeper of its own; a dict of figures."""
    res = {"side": kind, "notes": [], "load": pb.wait_load(args.max_load)}
    ens = zk = None
    if args.ensemble:
        from zkensemble import Ensemble
        ens = Ensemble(3)
        ens.start()
        hostport = ens.connect_string()
    else:
        zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
        hostport = zk.hostport
    if kind == "zkelect":
        side = pb.ZkelectSide(hostport, "/zkelect/bench-kazoo", args.agents,
                              args.partitions, args.session_timeout)
    else:
        side = pb.KazooSide(hostport, "/kazoo/bench", args.agents, args.partitions,
                            args.session_timeout, time_boundary=args.time_boundary)
    ms = side.members

    try:
        t0 = time.monotonic()
        for m in ms:
            side.start(m)
        s = pb.wait_settled(side, ms, t0, args.timeout, args.interval)
        res["cold"] = s
        if not s.ok:
            return res
        res["cold_first"] = s.wall - side.first_ctime() / 1000.0
        if args.ensemble:
            return res

        res["steady"] = pb.steady(zk, side, ms, args.quiet, args.window)
        if not res["steady"]["still"]:
            res["notes"].append("not settled at the end of the window")
        before = pb.wait_settled(side, ms, time.monotonic(), args.timeout, args.interval)
        if not before.ok:
            res["notes"].append("after the window: %s" % before.note)
            return res

        # leave: SIGTERM of the first member
        leaver, rest = ms[0], ms[1:]
        bl.quiet(args.quiet)
        t0 = time.monotonic()
        side.term(leaver)
        s = pb.wait_settled(side, rest, t0, args.timeout, args.interval)
        rc = side.wait_exit(leaver)
        if rc != 0:
            res["notes"].append("%s exited %s after SIGTERM" % (leaver.id, rc))
        res["leave"] = s
        if not s.ok:
            return res
        mv = pb.moved(before.owners, s.owners)
        res["leave_moved"] = len(mv)
        res["leave_ideal"] = sum(1 for o in before.owners.values() if o == leaver.id)
        res["leave_others"] = sum(1 for p in mv if before.owners[p] != leaver.id)

        # join: the same member again, from its member node's creation
        before = s
        bl.quiet(args.quiet)
        side.start(leaver)
        s = pb.wait_settled(side, ms, time.monotonic(), args.timeout, args.interval)
        res["join"] = s
        if not s.ok:
            return res
        s.secs = s.wall - side.member_ctime(leaver) / 1000.0
        mv = pb.moved(before.owners, s.owners)
        res["join_moved"] = len(mv)
        res["join_bound"] = math.ceil(args.partitions / len(ms))
        res["join_elsewhere"] = sum(1 for p in mv if s.owners[p] != leaver.id)

        # crash: SIGKILL of the second member
        before = s
        victim = ms[1]
        rest = [m for m in ms if m is not victim]
        bl.quiet(args.quiet)
        t0 = time.monotonic()
        side.kill(victim)
        s = pb.wait_settled(side, rest, t0, args.timeout, args.interval)
        side.wait_exit(victim)
        res["crash"] = s
        if not s.ok:
            return res
        mv = pb.moved(before.owners, s.owners)
        res["crash_moved"] = len(mv)
        res["crash_ideal"] = sum(1 for o in before.owners.values() if o == victim.id)
        res["crash_others"] = sum(1 for p in mv if before.owners[p] != victim.id)
    finally:
        res["deaths"] = list(side.deaths)
        res["logs"] = side.log_counts()
        if kind == "kazoo":
            res["intervals"], res["overlaps"] = side.overlaps()
        side.cleanup()
        if zk is not None:
            zk.cleanup()
        if ens is not None:
            ens.cleanup()
    return res


def fig(res, key):
    v = res.get(key)
    if isinstance(v, pb.Settle):
        return v.secs if v.ok else None
    return v


def run_line(i, r):
    parts = ["run %d %-7s (load %.2f)" % (i, r["side"], r["load"])]
    for k in ("cold", "leave", "join", "crash"):
        s = r.get(k)
        if s is None:
            continue
        extra = ""
        if k == "cold" and "cold_first" in r:
            extra = " (%.2f s from the first member node)" % r["cold_first"]
        if k + "_moved" in r:
            extra = ", moved %d (%s %d)" % (
                r[k + "_moved"], "bound" if k == "join" else "ideal",
                r.get(k + "_bound", r.get(k + "_ideal", 0)))
        parts.append("%s %s%s" % (k, s.fmt(3), extra))
    st = r.get("steady")
    if st:
        parts.append("packets/member %.2f/s (mntr), CPU mean %.3f%%, RSS max %.1f MiB" % (
            st["mntr"], statistics.mean(st["cpu_ns"].values()),
            max(st["rss"].values()) / 1024.0))
    if r["side"] == "zkelect":
        parts.append("log: %s" % ", ".join("%s %d" % kv for kv in r["logs"].items()
                                             if kv[1] or "stopping" not in kv[0]))
    else:
        parts.append("errors in its output %d; never two owners: %s" % (
            r["logs"]["errors"], "yes (%d intervals)" % r["intervals"]
            if not r["overlaps"] else "NO: %s" % r["overlaps"][:3]))
    if r["deaths"]:
        parts.append("DIED: %s" % r["deaths"])
    parts += r["notes"]
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=256)
    ap.add_argument("--session-timeout", default="2s")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--quiet", type=float, default=2.0)
    ap.add_argument("--time-boundary", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--interval", type=float, default=0.02)
    ap.add_argument("--ensemble", action="store_true")
    ap.add_argument("--max-load", type=float, default=0.0,
                    help="wait before each run until the 1-minute load average is "
                         "below this (0: do not wait)")
    args = ap.parse_args()

    bl.header("partitions against kazoo's SetPartitioner: %d members x %d partitions, "
              "T = %s, %s, kazoo time_boundary %g s" % (
                  args.agents, args.partitions, args.session_timeout,
                  "3-server ensemble, cold start only" if args.ensemble
                  else "standalone ZooKeeper", args.time_boundary))
    results = {"zkelect": [], "kazoo": []}
    for i in range(args.runs):
        for kind in ("zkelect", "kazoo"):
            r = one_run(kind, args)
            results[kind].append(r)
            print(run_line(i + 1, r), flush=True)

    def med(kind, key, sub=None):
        vals = []
        for r in results[kind]:
            if sub is None:
                v = fig(r, key)
            else:
                st = r.get(key)
                v = sub(st) if st else None
            if v is not None:
                vals.append(v)
        return (statistics.median(vals), len(vals)) if vals else (None, 0)

    rows = [("cold start, from starting all (s)", "cold", None),
            ("cold start, from the first member node (s)", "cold_first", None)]
    if not args.ensemble:
        rows += [("graceful leave, SIGTERM (s)", "leave", None),
                 ("  partitions moved", "leave_moved", None),
                 ("  ideal (the leaver's share)", "leave_ideal", None),
                 ("join, from its member node (s)", "join", None),
                 ("  partitions moved", "join_moved", None),
                 ("  bound ceil(P/K)", "join_bound", None),
                 ("crash, SIGKILL (s)", "crash", None),
                 ("  partitions moved", "crash_moved", None),
                 ("  ideal (the crashed member's share)", "crash_ideal", None),
                 ("ZooKeeper packets per member (mntr, /s)", "steady",
                  lambda st: st["mntr"]),
                 ("  per session (cons, mean, /s)", "steady",
                  lambda st: statistics.mean(st["cons"].values()) if st["cons"] else None),
                 ("idle CPU per member (schedstat, mean %)", "steady",
                  lambda st: statistics.mean(st["cpu_ns"].values())),
                 ("  (utime+stime, mean %)", "steady",
                  lambda st: statistics.mean(st["cpu_stat"].values())),
                 ("  (schedstat, max %)", "steady",
                  lambda st: max(st["cpu_ns"].values())),
                 ("  its threads' wakeups per member (/s)", "steady",
                  lambda st: statistics.mean(st["wakes"].values())),
                 ("VmRSS per member (max MiB)", "steady",
                  lambda st: max(st["rss"].values()) / 1024.0)]
    print()
    print("medians over the runs (runs that got that far: zkelect/kazoo)")
    print("| figure | zkelect | kazoo | zkelect / kazoo |")
    print("| --- | --- | --- | --- |")
    for label, key, sub in rows:
        a, na = med("zkelect", key, sub)
        b, nb = med("kazoo", key, sub)
        fmt = (lambda x: "n/a" if x is None else ("%d" % x if key.endswith(
            ("_moved", "_ideal", "_bound")) else "%.3f" % x))
        print("| %s | %s | %s | %s |%s" % (label, fmt(a), fmt(b),
                                          "%.2f" % bl.ratio(a, b) if a is not None and b
                                          else "n/a",
                                          "" if na == nb == args.runs else
                                          " (%d/%d runs)" % (na, nb)))
    z = results["zkelect"]
    print()
    print("zkelect, in all its runs: %s; deaths %d" % (
        ", ".join("%s %d" % (k, sum(r["logs"].get(k, 0) for r in z))
                  for k, _ in pb.LOG_MARKS), sum(len(r["deaths"]) for r in z)))
    k = results["kazoo"]
    problems = [p for r in k for p in r.get("overlaps", [])]
    print("kazoo, in all its runs: never two owners %s (%d ownership intervals checked, "
          "from its members' own lines); deaths %d; no fencing token" % (
              "held" if not problems else "BROKEN: %s" % problems[:5],
              sum(r.get("intervals", 0) for r in k), sum(len(r["deaths"]) for r in k)))
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
