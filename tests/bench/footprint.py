#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: footprint (doc/design.md, Targets, "Footprint").

An idle leader and an idle follower (two agents, one election, no API
traffic): RSS (VmRSS and VmHWM from /proc/PID/status) and CPU time
(utime+stime from /proc/PID/stat, and the finer per-thread schedstat) over a
window of --seconds (default 60); plus the sizes of zkelectd and zkelectctl,
as built and stripped. Reference, same run: the same figures of an idle
`sleep` (the floor of a dynamically linked C process on this system).

The reference starts first and every process has settled (the agents lead or
follow, `sleep` sleeps), then --quiet s (default 1) pass before the window
opens.

    tests/bench/footprint.py [--seconds 60] [--session-timeout 6s] [--quiet 1]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_status(pid):
    d = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            d[k] = v.strip()
    return d


def kib(v):
    return int(v.split()[0])


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    # fields[0] is state (field 3); utime is field 14, stime field 15
    return int(fields[11]) + int(fields[12])


def cpu_ns(pid):
    """On-CPU time of all threads in ns (/proc/PID/task/*/schedstat), finer than ticks."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def snapshot(pid):
    st = proc_status(pid)
    return {"rss": kib(st["VmRSS"]), "hwm": kib(st["VmHWM"]),
            "anon": kib(st.get("RssAnon", "0 kB")), "file": kib(st.get("RssFile", "0 kB")),
            "threads": int(st["Threads"]), "ticks": cpu_ticks(pid), "ns": cpu_ns(pid),
            "t": time.monotonic()}


def sizes(paths):
    tmp = tempfile.mkdtemp(prefix="zkbench-strip-", dir="/tmp")
    out = []
    try:
        for p in paths:
            s = os.path.join(tmp, os.path.basename(p))
            subprocess.run(["strip", "-o", s, p], check=True)
            out.append((os.path.basename(p), os.path.getsize(p), os.path.getsize(s)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--session-timeout", default="6s")
    ap.add_argument("--quiet", type=float, default=1.0,
                    help="seconds between all settled and the window opening")
    args = ap.parse_args()
    if not 1 <= args.seconds <= 3600:
        ap.error("--seconds must be 1..3600")

    bl.header("footprint: idle leader and follower over %.0f s" % args.seconds)
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    aset = BenchAgentSet(zk.hostport, "/zkelect/bench-footprint")
    ref = None
    try:
        # The reference starts first and is settled (it has exec'd sleep and
        # sleeps) before the window opens, as the agents are (they lead or
        # follow): no start-up of either falls inside the measured window.
        ref = subprocess.Popen(["sleep", str(int(args.seconds) + 600)],
                               stdin=subprocess.DEVNULL)

        def ref_sleeping():
            with open("/proc/%d/stat" % ref.pid) as f:
                st = f.read()
            return st[st.index("(") + 1:st.rindex(")")] == "sleep" and \
                st[st.rindex(")") + 2] == "S"
        bl.poll(ref_sleeping, 10, interval=0.01, what="the reference sleep to run")
        a = aset.new("fp-a", session_timeout=args.session_timeout)
        b = aset.new("fp-b", session_timeout=args.session_timeout)
        leader = aset.wait_one_leader(timeout=30)
        follower = b if leader is a else a
        leader.wait_for(lambda s: s.get("candidates") == 2, 30, what="2 candidates")
        follower.wait_for(lambda s: s.get("role") == "follower", 30, what="follow")
        t_neg = leader.status()["session"]["timeout_ms"]
        bl.quiet(args.quiet)
        procs = [("leader", leader.pid), ("follower", follower.pid), ("sleep (ref)", ref.pid)]
        before = {n: snapshot(p) for n, p in procs}
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            if not (leader.running() and follower.running()):
                raise AssertionError("an agent exited during the idle window")
        after = {n: snapshot(p) for n, p in procs}
        still = leader.status()
        if not still or not still.get("is_leader"):
            raise AssertionError("leader lost leadership while idle: %s" % still)
    finally:
        bl.kill_quietly(ref)
        aset.cleanup()
        zk.cleanup()

    print("negotiated session timeout %d ms (the leader and the next in line renew "
          "about every T/5; followers read the claim every T/6; idle)" % t_neg)
    print()
    print("%-12s %9s %9s %9s %9s %7s %13s %12s %9s" % (
        "process", "VmRSS", "VmHWM", "RssAnon", "RssFile", "threads", "utime+stime",
        "schedstat", "CPU %"))
    for n, _ in procs:
        b0, b1 = before[n], after[n]
        cpu_s = (b1["ticks"] - b0["ticks"]) / CLK_TCK
        ns_ms = (b1["ns"] - b0["ns"]) / 1e6
        wall = b1["t"] - b0["t"]
        print("%-12s %6d KiB %6d KiB %6d KiB %6d KiB %7d %11.2f s %9.1f ms %8.4f%%" % (
            n, b1["rss"], b1["hwm"], b1["anon"], b1["file"], b1["threads"], cpu_s, ns_ms,
            100.0 * ns_ms / 1000.0 / wall))
    print("(utime+stime from /proc/PID/stat in ticks of 1/%d s; schedstat: on-CPU ns of all "
          "threads; CPU %% from schedstat over %.0f s)" % (CLK_TCK, after["leader"]["t"]
                                                         - before["leader"]["t"]))
    print()
    print("%-12s %12s %12s" % ("binary", "as built", "stripped"))
    for name, full, stripped in sizes([bl.ZKELECTD, bl.ZKELECTCTL]):
        print("%-12s %8d B %9d B  (%.0f KiB stripped)" % (name, full, stripped,
                                                         stripped / 1024.0))
    print()
    lrss = after["leader"]["rss"]
    lhwm = after["leader"]["hwm"]
    cpu_pct = 100.0 * (after["leader"]["ns"] - before["leader"]["ns"]) / 1e9 / (
        after["leader"]["t"] - before["leader"]["t"])
    print("leader RSS %.2f MiB (peak %.2f MiB) vs target < 4 MiB: %s; ratio to sleep's RSS %.1f"
          % (lrss / 1024.0, lhwm / 1024.0, "met" if lhwm < 4096 else "NOT met",
             lrss / max(1, after["sleep (ref)"]["rss"])))
    print("leader CPU %.4f%% vs target ~0%%: %s" % (cpu_pct, "met" if cpu_pct < 0.1 else
                                                   "NOT met (>= 0.1%)"))
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
