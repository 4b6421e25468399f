#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: partitions at scale (issue 31), one table row per partition
count P (64, 256, 1024, 4096; 16384 with --max 16384), K agents (--agents,
8), session timeout T (--session-timeout, 2 s; the agents are told
`tick_time` 200 ms, the servers' tickTime). Each row has a standalone
ZooKeeper of its own, started fresh, and in it:

  cold start   all K agents started at once on the fresh server (the paths
               absent) until settled (partharness.settled: every agent
               counts K members, owns exactly what it is assigned, the
               shares are floor/ceil of P/K, every partition has one owner);
               also from the first member node's creation (its ctime);
               with it, the CPU it cost (utime+stime): ZooKeeper's, and the
               agents' since they started, at the settle and once the
               fleet is quiet (the first of ZooKeeper's packet counts,
               sampled every 0.5 s, from which it receives 10 a second per
               agent or fewer, twice a settled agent's, for 2T running; at
               most 60 s): work an agent still owes at the settle (a
               partition it does not own reads its claim again T after
               finding no node) counts, whether the settle came before it
               or after; the growth table compares both between rows;
  restart      all K stopped with SIGTERM (each waited for), then all
               started again, the paths now present, until settled;
  steady state settled, --quiet s (2), then a --window (20 s) with nothing
               done: each agent's CPU % (utime+stime of /proc/PID/stat over
               the window; the finer schedstat as well), mean and max over
               the agents; ZooKeeper packets received per agent per second
               (mntr's zk_packets_received over the window / K); VmRSS;
  leave        SIGTERM of the oldest member (the lowest member node), until
               the K-1 left are settled, and how many partitions changed
               owner (owner maps before and after) against doc/design.md's
               bound: only the leaver's own partitions move;
  join         it starts again, timed from its member node's creation (its
               start-up is not timed) until the K are settled; partitions
               moved against the bound ceil(P/K), all to the newcomer;
  logs         over the whole row, lines of the agents' logs with "lease
               lapsed", "too little lease", the watchdog's and "moving to
               another server" (a connection kicked), except those an agent
               writes once told to stop, and agents that exited
               without being told to (a watchdog kill, a crash, a refused
               configuration), with their last error line. "stalls" are the
               watchdog's warnings (the loop did not run for T/4), "watchdog
               kills" its kills (T/2).

A phase that does not settle within --timeout (120 s) or in which an agent
dies is reported in its row, and the rest of that row is skipped. Before
every clock starts the agents are settled and --quiet s pass.

Reference, same run: one agent leading a single election alone, on a
server of its own with the same T, ZooKeeper packets per second measured
the same way (partitions_cost.py), and its CPU %.

Growth: between consecutive rows, the ratio of each settle time and of the
CPU per partition (a ratio of 1 is linear growth).

With --baseline PATH (another build's zkelectd, snapshotted as the agent
is), every row is run with it too, in the same invocation, alternating
which goes first, and a last table gives this build's figures over the
baseline's: a change measured before and after in one run. With
--cold-runs N as well, only cold starts are run: N of each build per
size, alternating, each on a fresh server and timed as above (the settle,
and the agents' CPU and ZooKeeper's packets until quiet), and the medians
compared. With --move-runs N (and --baseline), only leaves and joins: per
size, each build's fleet cold started on a fresh server (the builds
alternating which goes first), then N leaves and joins of its oldest
member, each timed and counted as above, and the medians compared.

    tests/bench/partitions_scale.py [--agents 8] [--sizes 64,256,1024,4096]
        [--max 16384] [--session-timeout 2s] [--window 20] [--quiet 2]
        [--timeout 120] [--interval 0.05] [--max-load 1.0] [--baseline PATH]
        [--cold-runs N] [--move-runs N]
"""

import argparse
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer

import partbench as pb
import zkharness

SIZES = [64, 256, 1024, 4096, 16384]


def new_server():
    return ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()


def single_reference(args):
    """One agent leading a single election alone: packets/s and CPU %."""
    zk = new_server()
    aset = BenchAgentSet(zk.hostport, "/zkelect/bench-single")
    try:
        a = aset.new("single", session_timeout=args.session_timeout, tick_time="200ms")
        a.wait_for(lambda s: s["role"] == "leader", 30, what="the leader")
        bl.quiet(args.quiet)
        c0 = (pb.cpu_ticks(a.pid), pb.cpu_ns(a.pid), time.monotonic())
        m0 = bl.mntr(zk)["zk_packets_received"]
        t0 = time.monotonic()
        time.sleep(args.window)
        m1 = bl.mntr(zk)["zk_packets_received"]
        secs = time.monotonic() - t0
        c1 = (pb.cpu_ticks(a.pid), pb.cpu_ns(a.pid), time.monotonic())
        return {"mntr": (m1 - m0) / secs,
                "cpu_stat": 100.0 * (c1[0] - c0[0]) / pb.CLK_TCK / (c1[2] - c0[2]),
                "cpu_ns": 100.0 * (c1[1] - c0[1]) / 1e9 / (c1[2] - c0[2]),
                "rss": pb.rss_kib(a.pid)}
    finally:
        aset.cleanup()
        zk.cleanup()


def one_row(n, args):
    k = args.agents
    row = {"P": n, "notes": [], "load": pb.wait_load(args.max_load)}
    zk = new_server()
    side = pb.ZkelectSide(zk.hostport, "/zkelect/bench-scale", k, n, args.session_timeout)
    ms = side.members
    try:
        # cold start, paths absent
        z0 = pb.cpu_ticks(zk.proc.pid)
        t0 = time.monotonic()
        for m in ms:
            side.start(m)
        s = pb.wait_settled(side, ms, t0, args.timeout, args.interval)
        row["cold"] = s
        if not s.ok:
            row["owned_at_end"] = side.owned_total([m for m in ms if m.running()])
            return row
        # CPU seconds the cold start cost: ZooKeeper's over it, and the
        # agents' whole lives so far (their start-up included).
        row["cold_cpu_zk"] = (pb.cpu_ticks(zk.proc.pid) - z0) / pb.CLK_TCK
        row["cold_cpu_agents"] = sum(pb.cpu_ticks(m.pid) for m in ms) / pb.CLK_TCK
        row["cold_first"] = s.wall - side.first_ctime() / 1000.0
        # ... and once quiet: what the cold start still owed at the settle.
        q = pb.wait_quiet(zk, [m.pid for m in ms], t0,
                          2 * pb.duration_s(args.session_timeout))
        tq = None
        if q is not None:
            tq = q[0]
            row["cold_cpu_zk_quiet"] = q[1] - z0 / pb.CLK_TCK
            row["cold_cpu_agents_quiet"] = q[2]
            row["cold_packets_quiet"] = q[3]
        print("  P=%d: cold start %s; CPU ZooKeeper %.2f s, the %d agents %.2f s; "
              "quiet %s: ZooKeeper %.2f s, the agents %.2f s" % (
                  n, s.fmt(), row["cold_cpu_zk"], k, row["cold_cpu_agents"],
                  "%.2f s" % tq if tq is not None else "not within 60 s",
                  row.get("cold_cpu_zk_quiet", 0), row.get("cold_cpu_agents_quiet", 0)),
              flush=True)

        # restart, paths present
        bl.quiet(args.quiet)
        t0 = time.monotonic()
        for m in ms:
            side.term(m)
        rcs = {m.id: side.wait_exit(m) for m in ms}
        row["stop_all"] = time.monotonic() - t0
        bad = {i: rc for i, rc in rcs.items() if rc != 0}
        if bad:
            row["notes"].append("stop: exit statuses %s" % bad)
        t0 = time.monotonic()
        for m in ms:
            side.start(m)
        s = pb.wait_settled(side, ms, t0, args.timeout, args.interval)
        row["restart"] = s
        if not s.ok:
            row["owned_at_end"] = side.owned_total([m for m in ms if m.running()])
            return row
        print("  P=%d: restart %s" % (n, s.fmt()), flush=True)

        # steady state
        st = pb.steady(zk, side, ms, args.quiet, args.window)
        row["steady"] = st
        if not st["still"]:
            row["notes"].append("not settled at the end of the window")
        before = pb.wait_settled(side, ms, time.monotonic(), args.timeout, args.interval)
        if not before.ok:
            row["notes"].append("after the window: %s" % before.note)
            return row

        leave_then_join(side, ms, before, row, args)
        side.check_deaths(ms)
    finally:
        side.check_deaths([m for m in ms if m.proc is not None])
        row["deaths"] = list(side.deaths)
        row["logs"] = side.log_counts()
        side.cleanup()
        zk.cleanup()
    return row


def secs(row, key):
    s = row.get(key)
    return s.secs if s is not None and s.ok else None


def fmt_s(row, key):
    s = row.get(key)
    if s is None:
        return "-"
    return "%.2f" % s.secs if s.ok else "**failed**"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--sizes", default="64,256,1024,4096")
    ap.add_argument("--max", type=int, default=4096,
                    help="the largest P of 64, 256, 1024, 4096, 16384 to run")
    ap.add_argument("--session-timeout", default="2s")
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--quiet", type=float, default=2.0)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--max-load", type=float, default=0.0,
                    help="wait before each row until the 1-minute load average is "
                         "below this (0: do not wait)")
    ap.add_argument("--baseline", metavar="PATH",
                    help="another zkelectd: every row is run with it too, and "
                         "compared")
    ap.add_argument("--cold-runs", type=int, default=0, metavar="N",
                    help="with --baseline: only cold starts, N of each build "
                         "per size")
    ap.add_argument("--move-runs", type=int, default=0, metavar="N",
                    help="with --baseline: only leaves and joins, N of each "
                         "per build and size, on one fleet per build")
    args = ap.parse_args()
    if (args.cold_runs or args.move_runs) and not args.baseline:
        ap.error("--cold-runs and --move-runs need --baseline")
    base_bin = None
    if args.baseline:
        snap = tempfile.mkdtemp(prefix="zkbench-base-", dir="/tmp")
        base_bin = os.path.join(snap, "zkelectd")
        shutil.copy2(args.baseline, base_bin)
        print("baseline: %s (snapshot of %s)" % (base_bin, args.baseline))
    sizes = [int(x) for x in args.sizes.split(",")]
    sizes += [p for p in SIZES if max(sizes) < p <= args.max]
    sizes = [p for p in sizes if p <= args.max]

    bl.header("partitions at scale: %d agents, P = %s, T = %s, tickTime 200 ms" % (
        args.agents, ", ".join(map(str, sizes)), args.session_timeout))
    if args.cold_runs or args.move_runs:
        if args.cold_runs:
            cold_compare(sizes, args, base_bin)
        if args.move_runs:
            moves_compare(sizes, args, base_bin)
        shutil.rmtree(os.path.dirname(base_bin), True)
        return 0
    load = pb.wait_load(args.max_load)
    ref = single_reference(args)
    print("reference: a single-election leader alone, %.2f packets/s (mntr), CPU %.3f%% "
          "(schedstat; %.2f%% utime+stime), VmRSS %.1f MiB (load average %.2f at its "
          "start)" % (ref["mntr"], ref["cpu_ns"], ref["cpu_stat"], ref["rss"] / 1024.0,
                      load), flush=True)
    rows, base_rows = [], []
    for i, n in enumerate(sizes):
        order = ["ours", "baseline"] if base_bin else ["ours"]
        if base_bin and i % 2 == 0:
            order.reverse()
        for who in order:
            zkharness.ZKELECTD = bl.ZKELECTD if who == "ours" else base_bin
            r = one_row(n, args)
            r["who"] = who
            (rows if who == "ours" else base_rows).append(r)
            report_row(r)
    zkharness.ZKELECTD = bl.ZKELECTD
    if base_bin:
        print("\nthe baseline's rows:")
        table(base_rows, args, ref)
        print("\nthis build's rows:")
    table(rows, args, ref)
    if base_bin:
        compare(rows, base_rows)
        shutil.rmtree(os.path.dirname(base_bin), True)
    return 0


def cold_once(n, args):
    """One cold start of K agents x n partitions on a fresh server: the
    settle's seconds, and the agents' CPU seconds and ZooKeeper's packets
    once quiet (None if it did not settle or quieten)."""
    zk = new_server()
    side = pb.ZkelectSide(zk.hostport, "/zkelect/bench-scale", args.agents, n,
                          args.session_timeout)
    try:
        t0 = time.monotonic()
        for m in side.members:
            side.start(m)
        s = pb.wait_settled(side, side.members, t0, args.timeout, args.interval)
        if not s.ok:
            return None
        q = pb.wait_quiet(zk, [m.pid for m in side.members], t0,
                          2 * pb.duration_s(args.session_timeout))
        if q is None:
            return None
        side.check_deaths(side.members)
        return (s.secs, q[2], q[3]) if not side.deaths else None
    finally:
        side.cleanup()
        zk.cleanup()


def cold_compare(sizes, args, base_bin):
    print("| P | build | cold start, each run (s) | median | agents' CPU until quiet, "
          "median (s) | ZooKeeper packets until quiet, median |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        res = {"this build": [], "baseline": []}
        failed = {"this build": 0, "baseline": 0}
        for i in range(args.cold_runs):
            order = ["baseline", "this build"] if i % 2 == 0 else ["this build", "baseline"]
            for who in order:
                pb.wait_load(args.max_load)
                zkharness.ZKELECTD = bl.ZKELECTD if who == "this build" else base_bin
                r = cold_once(n, args)
                if r is None:
                    failed[who] += 1
                else:
                    res[who].append(r)
                print("  P=%d %s: %s" % (n, who, "cold start %.2f s, agents' CPU %.2f s, "
                                         "packets %d" % r if r else "did not settle or "
                                         "quieten"), flush=True)
        zkharness.ZKELECTD = bl.ZKELECTD
        med = {}
        for who, rs in res.items():
            if not rs:
                print("| %d | %s | all %d failed | - | - | - |" % (n, who, failed[who]))
                continue
            med[who] = [statistics.median(r[j] for r in rs) for j in range(3)]
            print("| %d | %s | %s%s | %.2f | %.2f | %d |" % (
                n, who, " ".join("%.2f" % r[0] for r in sorted(rs)),
                " (%d failed)" % failed[who] if failed[who] else "",
                med[who][0], med[who][1], med[who][2]))
        if len(med) == 2:
            a, b = med["this build"], med["baseline"]
            print("| %d | this / baseline | | %.2f | %.2f | %.2f |" % (
                n, a[0] / b[0], a[1] / b[1], a[2] / b[2]), flush=True)


def leave_then_join(side, ms, before, row, args):
    """The oldest member leaves (SIGTERM) and starts again; into row: the
    leave and the join (Settle), each timed as the module's doc says, and
    the partitions each moved against its bound. BEFORE: the settle before
    the leave. Stops at a phase that did not settle."""
    n, k = side.n, len(ms)
    ctimes = {m.id: side.member_ctime(m) for m in ms}
    leaver = min(ms, key=lambda m: ctimes[m.id])
    rest = [m for m in ms if m is not leaver]
    bl.quiet(args.quiet)
    t0 = time.monotonic()
    side.term(leaver)
    s = pb.wait_settled(side, rest, t0, args.timeout, args.interval)
    rc = side.wait_exit(leaver)
    if rc != 0:
        row["notes"].append("%s exited %s after SIGTERM" % (leaver.id, rc))
    row["leave"] = s
    if not s.ok:
        return
    mv = pb.moved(before.owners, s.owners)
    row["leave_moved"] = len(mv)
    row["leave_bound"] = sum(1 for o in before.owners.values() if o == leaver.id)
    row["leave_others"] = sum(1 for p in mv if before.owners[p] != leaver.id)

    # join: the same agent again, from its member node's creation
    before = s
    bl.quiet(args.quiet)
    side.start(leaver)
    s = pb.wait_settled(side, ms, time.monotonic(), args.timeout, args.interval)
    row["join"] = s
    if not s.ok:
        return
    s.secs = s.wall - side.member_ctime(leaver) / 1000.0
    mv = pb.moved(before.owners, s.owners)
    row["join_moved"] = len(mv)
    row["join_bound"] = math.ceil(n / k)
    row["join_elsewhere"] = sum(1 for p in mv if s.owners[p] != leaver.id)


def leave_join(side, ms, args):
    """One leave and join as in a row: (leave s, moved, bound, join s,
    moved, bound, moved elsewhere), or None if a phase did not settle, the
    leaver's exit failed or an agent died."""
    bl.quiet(args.quiet)
    before = pb.wait_settled(side, ms, time.monotonic(), args.timeout, args.interval)
    if not before.ok:
        return None
    row = {"notes": []}
    leave_then_join(side, ms, before, row, args)
    side.check_deaths(ms)
    if row["notes"] or "join" not in row or not row["join"].ok or side.deaths:
        return None
    return (row["leave"].secs, row["leave_moved"], row["leave_bound"],
            row["join"].secs, row["join_moved"], row["join_bound"],
            row["join_elsewhere"])


def moves_compare(sizes, args, base_bin):
    """Per size and build (alternating which goes first), one fleet on a
    fresh server, cold started, then --move-runs leaves and joins."""
    print("| P | build | leave, each run (s) | median | join, each run (s) | median "
          "| moved / bound (leave; join) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for i, n in enumerate(sizes):
        order = ["baseline", "this build"] if i % 2 == 0 else ["this build", "baseline"]
        med = {}
        for who in order:
            pb.wait_load(args.max_load)
            zkharness.ZKELECTD = bl.ZKELECTD if who == "this build" else base_bin
            zk = new_server()
            side = pb.ZkelectSide(zk.hostport, "/zkelect/bench-scale", args.agents, n,
                                  args.session_timeout)
            runs, failed = [], 0
            try:
                t0 = time.monotonic()
                for m in side.members:
                    side.start(m)
                s = pb.wait_settled(side, side.members, t0, args.timeout, args.interval)
                for _ in range(args.move_runs if s.ok else 0):
                    r = leave_join(side, side.members, args)
                    print("  P=%d %s: %s" % (n, who, "leave %.2f s (%d/%d), join %.2f s "
                                             "(%d/%d, %d elsewhere)" % r if r else
                                             "did not settle, or an agent died"),
                          flush=True)
                    if r is None:
                        failed += 1
                        break
                    runs.append(r)
            finally:
                side.cleanup()
                zk.cleanup()
            if not runs:
                print("| %d | %s | failed | - | - | - | - |" % (n, who))
                continue
            med[who] = (statistics.median(r[0] for r in runs),
                        statistics.median(r[3] for r in runs))
            print("| %d | %s | %s | %.2f | %s | %.2f | %s |" % (
                n, who, " ".join("%.2f" % r[0] for r in runs), med[who][0],
                " ".join("%.2f" % r[3] for r in runs), med[who][1],
                " ".join("%d/%d; %d/%d" % (r[1], r[2], r[4], r[5]) for r in runs)),
                flush=True)
        zkharness.ZKELECTD = bl.ZKELECTD
        if len(med) == 2:
            a, b = med["this build"], med["baseline"]
            print("| %d | this / baseline | | %.2f | | %.2f | |" % (
                n, a[0] / b[0], a[1] / b[1]), flush=True)


def report_row(r):
    n = r["P"]
    print("P = %d, %s (load average %.2f at its start)" % (
        n, r["who"], r["load"]), flush=True)
    for note in r["notes"]:
        print("  note: %s" % note)
    for phase in ("cold", "restart", "leave", "join"):
        s = r.get(phase)
        if s is not None and not s.ok:
            print("  %s: %s" % (phase, s.note))
    if "owned_at_end" in r:
        print("  partitions owned when it was given up: %d of %d"
              % (r["owned_at_end"], n))
    for d in r["deaths"]:
        print("  died: %s, exit status %s, last line: %s" % d)
    stop = ["%s %d" % (k, r["logs"]["stopping_" + k]) for k, _ in pb.LOG_MARKS
            if r["logs"]["stopping_" + k]]
    print("  log lines of the row: %s; after a SIGTERM (not in the table): %s" % (
        ", ".join("%s %d" % (k, r["logs"][k]) for k, _ in pb.LOG_MARKS),
        ", ".join(stop) or "none"))
    sys.stdout.flush()


def table(rows, args, ref):
    print()
    print("K = %d agents, T = %s; times in seconds; CPU %% of one core per agent over "
          "a %.0f s window (utime+stime; schedstat in brackets)" % (
              args.agents, args.session_timeout, args.window))
    print("| P | load | cold start | (from 1st member) | restart | leave | moved / bound "
          "| join | moved / bound | CPU mean | CPU max | packets/agent/s | x single "
          "| RSS MiB mean / max | lapsed | too little | stalls | watchdog kills | kicks "
          "| died |")
    print("|" + " --- |" * 20)
    for r in rows:
        st = r.get("steady")
        cs = list(st["cpu_stat"].values()) if st else []
        cn = list(st["cpu_ns"].values()) if st else []
        rs = list(st["rss"].values()) if st else []
        lg = r["logs"]
        print("| %d | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
              "| %d | %d | %d | %d | %d | %d |" % (
                  r["P"], r["load"], fmt_s(r, "cold"),
                  "%.2f" % r["cold_first"] if "cold_first" in r else "-",
                  fmt_s(r, "restart"), fmt_s(r, "leave"),
                  "%d / %d%s" % (r["leave_moved"], r["leave_bound"],
                                 " (%d others')" % r["leave_others"]
                                 if r["leave_others"] else "")
                  if "leave_moved" in r else "-",
                  fmt_s(r, "join"),
                  "%d / %d%s" % (r["join_moved"], r["join_bound"],
                                 " (%d elsewhere)" % r["join_elsewhere"]
                                 if r["join_elsewhere"] else "")
                  if "join_moved" in r else "-",
                  "%.2f (%.2f)" % (statistics.mean(cs), statistics.mean(cn)) if cs else "-",
                  "%.2f (%.2f)" % (max(cs), max(cn)) if cs else "-",
                  "%.2f" % st["mntr"] if st else "-",
                  "%.2f" % bl.ratio(st["mntr"], ref["mntr"]) if st else "-",
                  "%.1f / %.1f" % (statistics.mean(rs) / 1024.0, max(rs) / 1024.0)
                  if rs else "-",
                  lg["lapsed"], lg["too_little"], lg["stalls"], lg["watchdog_kills"],
                  lg["kicks"],
                  len(r["deaths"])))
    print()
    print("growth between consecutive rows (P x4; 1.00 per partition = linear)")
    print("| P | cold start | restart | leave | join | cold start CPU: ZooKeeper "
          "| agents | to quiet: ZooKeeper | agents | CPU per agent | CPU per partition |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for a, b in zip(rows, rows[1:]):
        cells = []
        for key in ("cold", "restart", "leave", "join"):
            x, y = secs(a, key), secs(b, key)
            cells.append("x%.2f" % (y / x) if x and y else "-")
        for key in ("cold_cpu_zk", "cold_cpu_agents", "cold_cpu_zk_quiet",
                    "cold_cpu_agents_quiet"):
            x, y = a.get(key), b.get(key)
            cells.append("x%.2f" % (y / x) if x and y else "-")
        ca = statistics.mean(a["steady"]["cpu_ns"].values()) if a.get("steady") else None
        cb = statistics.mean(b["steady"]["cpu_ns"].values()) if b.get("steady") else None
        if ca and cb:
            cells.append("x%.2f" % (cb / ca))
            cells.append("%.2f" % ((cb / b["P"]) / (ca / a["P"])))
        else:
            cells += ["-", "-"]
        print("| %d -> %d | %s |" % (a["P"], b["P"], " | ".join(cells)))
    print("(CPU from schedstat; P grows x%s between rows)" % ", x".join(
        "%g" % (b["P"] / a["P"]) for a, b in zip(rows, rows[1:])))


def compare(rows, base_rows):
    """This build's figures over the baseline's, row by row."""
    print()
    print("this build / the baseline (below 1: this build is faster or cheaper)")
    print("| P | cold start | restart | leave | join | agents' CPU, cold start "
          "until quiet | ZooKeeper's | ZooKeeper packets until quiet "
          "| steady CPU per agent |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    def r_(x, y):
        return "%.2f" % (x / y) if x and y else "-"

    for a, b in zip(rows, base_rows):
        cells = [r_(secs(a, k), secs(b, k)) for k in ("cold", "restart", "leave", "join")]
        cells += [r_(a.get(k), b.get(k)) for k in (
            "cold_cpu_agents_quiet", "cold_cpu_zk_quiet", "cold_packets_quiet")]
        ca = statistics.mean(a["steady"]["cpu_ns"].values()) if a.get("steady") else None
        cb = statistics.mean(b["steady"]["cpu_ns"].values()) if b.get("steady") else None
        cells.append(r_(ca, cb))
        print("| %d | %s |" % (a["P"], " | ".join(cells)))
        print("|   (absolute: this build / baseline) | agents' CPU %.2f / %.2f s, "
              "ZooKeeper's %.2f / %.2f s, packets %d / %d |" % (
                  a.get("cold_cpu_agents_quiet", 0), b.get("cold_cpu_agents_quiet", 0),
                  a.get("cold_cpu_zk_quiet", 0), b.get("cold_cpu_zk_quiet", 0),
                  a.get("cold_packets_quiet", 0), b.get("cold_packets_quiet", 0)))


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
