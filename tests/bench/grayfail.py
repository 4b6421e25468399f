#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: gray failures (issue 23). Three faults, each staged for real
against a real ZooKeeper (tickTime 200 ms) and real agents; prints what the
app and the other agents see. Run it on two builds to compare them:

    tests/bench/grayfail.py [--runs 3] [--timeout 2s]
    ZKELECTD=/path/to/old/zkelectd tests/bench/grayfail.py

1. A stalled loop: the leader's event loop blocks (a reload opens a FIFO
   nobody writes, as a hung file system would) while libzookeeper's thread
   keeps its session: time from the stall to the successor's first
   /v1/leader 200, polled every 1 ms (given up after 30 s).
2. A stalled log: the leader's stderr is a pipe nobody reads and its
   supervised child prints 2,000 lines a second into the agent's log: for
   5 s the app asks /v1/leader every 50 ms (1 s timeout); how many were
   answered, the slowest answer, and whether the leader kept its term.
3. Out of descriptors: the agent runs under RLIMIT_NOFILE 64 and 104 idle
   local clients connect: its CPU use and log lines per second over 2 s
   at the limit, then how long the app's next request waits (given up
   after 15 s).
"""

import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import threading
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer

CHATTY = ("notify:\n"
          "  run: [\"/bin/sh\", \"-c\", \"while :; do seq 200; sleep 0.1; done\"]\n")


def start_with(agent, stderr=None, nofile=None):
    agent.out = open(agent.log_path, "ab")
    agent.starts += 1

    def pre():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    agent.proc = subprocess.Popen([bl.ZKELECTD, "-c", agent.config], stdin=subprocess.DEVNULL,
                                  stdout=agent.out,
                                  stderr=stderr if stderr is not None else agent.out,
                                  start_new_session=True, preexec_fn=pre)
    agent.wait_for(lambda s: True, 20, what="API socket")
    return agent


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stalled_loop(zk, timeout, runs):
    print("\n1. stalled loop (T = %s): stall -> successor's first 200" % timeout)
    took = []
    for i in range(runs):
        aset = BenchAgentSet(zk.hostport, bl.zkharness.new_election_path())
        try:
            a = aset.new("a", session_timeout=timeout)
            a.wait_for(lambda s: s["is_leader"], 20, what="a leads")
            b = aset.new("b", session_timeout=timeout)
            b.wait_for(lambda s: s["role"] == "follower", 20, what="b follows")
            bl.quiet(0.5)
            fifo = a.config + ".fifo"
            os.mkfifo(fifo)
            t0 = time.monotonic()
            os.replace(fifo, a.config)
            a.signal(signal.SIGHUP)
            try:
                dt = bl.wait_leader_200(b.socket, t0, 30.0, proc=b.proc)
            except AssertionError:
                dt = None
            killed = a.proc.poll() is not None
            took.append(dt)
            print("  run %d: %s; stalled agent %s" % (
                i + 1, "successor led after %.0f ms" % (dt * 1000) if dt is not None
                else "no successor within 30 s",
                "killed (%s)" % a.proc.returncode if killed else "still alive, holding its node"))
        finally:
            aset.cleanup()
    ok = [t for t in took if t is not None]
    if ok:
        print("  successor led after: median %.0f ms, max %.0f ms (%d of %d runs)" % (
            statistics.median(ok) * 1000, max(ok) * 1000, len(ok), len(took)))
    else:
        print("  no successor in any run")


def stalled_log(zk, timeout):
    print("\n2. stalled log: the app polls the leader every 50 ms for 5 s")
    aset = BenchAgentSet(zk.hostport, bl.zkharness.new_election_path())
    r, w = os.pipe()
    os.set_blocking(r, False)
    draining = [True]

    def drain():
        while draining[0]:
            try:
                if not os.read(r, 65536):
                    return
            except BlockingIOError:
                time.sleep(0.01)
            except OSError:
                return
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    try:
        a = aset.new("a", start=False, session_timeout=timeout, extra_yaml=CHATTY)
        start_with(a, stderr=w)
        os.close(w)
        s = a.wait_for(lambda s: s["is_leader"], 20, what="a leads")
        b = aset.new("b", session_timeout=timeout)
        b.wait_for(lambda s: s["role"] == "follower", 20, what="b follows")
        draining[0] = False
        t.join()
        bl.quiet(1.0)  # the pipe fills
        asked = answered = leading = 0
        worst = 0.0
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            st = a.status(timeout=1.0)
            dt = time.monotonic() - t0
            asked += 1
            if st is not None:
                answered += 1
                worst = max(worst, dt)
                leading += st["is_leader"] and st["epoch"] == s["epoch"]
            time.sleep(max(0.0, 0.05 - dt))
        print("  %d of %d requests answered within 1 s (slowest %.1f ms); %d said "
              "is_leader with the same epoch; successor leads: %s" % (
                  answered, asked, worst * 1000, leading, b.is_leader()))
        if answered:
            r2 = a.get("/metrics", timeout=2.0)
            for line in r2.body.splitlines():
                if line.startswith("zkelect_log_lines_dropped_total "):
                    print("  " + line)
    finally:
        aset.cleanup()
        os.close(r)


def out_of_descriptors(zk, timeout):
    print("\n3. out of descriptors (RLIMIT_NOFILE 64, 104 idle clients)")
    aset = BenchAgentSet(zk.hostport, bl.zkharness.new_election_path())
    hogs = []
    try:
        a = aset.new("a", start=False, session_timeout=timeout)
        start_with(a, nofile=64)
        a.wait_for(lambda s: s["is_leader"], 20, what="a leads")
        for _ in range(104):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(a.socket)
            hogs.append(c)
        bl.poll(lambda: len(os.listdir("/proc/%d/fd" % a.pid)) >= 63, 10, what="at the limit")
        n0 = a.log_text(limit=10**9).count("api: accept")
        c0 = cpu_seconds(a.pid)
        t0 = time.monotonic()
        time.sleep(2.0)  # the fault: two seconds at the limit
        wall = time.monotonic() - t0
        cpu = cpu_seconds(a.pid) - c0
        lines = a.log_text(limit=10**9).count("api: accept") - n0
        print("  at the limit: %.0f %% CPU, %.0f accept log lines a second" % (
            100 * cpu / wall, lines / wall))
        t1 = time.monotonic()
        st = a.status(timeout=15.0)
        dt = time.monotonic() - t1
        print("  the app's request: %s" % ("answered after %.1f ms" % (dt * 1000)
                                          if st is not None else "no answer within 15 s"))
    finally:
        for c in hogs:
            c.close()
        aset.cleanup()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", default="2s", help="session timeout T")
    args = ap.parse_args()
    bl.header("gray failures: a stalled loop, a stalled log, out of descriptors")
    zk = ZooKeeperServer(tick_ms=200)
    zk.start()
    try:
        stalled_loop(zk, args.timeout, args.runs)
        stalled_log(zk, args.timeout)
        out_of_descriptors(zk, args.timeout)
    finally:
        zk.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(bl.run_main(main))
