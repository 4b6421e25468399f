#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: what partitions cost ZooKeeper at steady state (doc/design.md,
"Partitions", one session, flat cost).

ZooKeeper's own counter of requests received (`mntr`: zk_packets_received),
over a window of --seconds (default 20), on a server of its own:
  reference  one agent leading a single election, alone;
  measured   4 agents in --partitions (default 256) partitions, settled
             (each leads what it is assigned, N/4, and knows every
             partition's leader), counted per agent (the total over 4).
Both sides use the same session timeout; each window opens once its side is
settled and --quiet s (default 1) have passed.

    tests/bench/partitions_cost.py [--partitions 256] [--seconds 20]
        [--session-timeout 6s] [--quiet 1]
"""

import argparse
import sys
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer
import zkharness


def window(zk, seconds):
    m0 = bl.mntr(zk)
    t0 = time.monotonic()
    time.sleep(seconds)
    m1 = bl.mntr(zk)
    t1 = time.monotonic()
    key = "zk_packets_received"
    if key not in m0:
        raise AssertionError("mntr has no %s: %r" % (key, sorted(m0)))
    return (m1[key] - m0[key]) / (t1 - t0)


def settled(agents, n):
    want = n // len(agents)
    for a in agents:
        try:
            r = a.get("/v1/partitions", timeout=2.0)
        except OSError:
            return False
        if r.status != 200:
            return False
        doc = r.json()
        owned = sum(1 for e in doc["partitions"] if e["is_leader"])
        if doc["members"] != len(agents) or owned not in (want, want + 1):
            return False
        # Steady: leading what is assigned, every leader known (a
        # partition whose claim node did not exist at the first look is
        # looked at again after T, a start-up cost, not a steady one).
        if any(e["is_leader"] != e["assigned"] or e["leader"] is None
               for e in doc["partitions"]):
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--session-timeout", default="6s")
    ap.add_argument("--quiet", type=float, default=1.0)
    args = ap.parse_args()

    bl.header("partitions: ZooKeeper requests/s per agent, %d partitions x 4 "
              "agents, against one single-election leader" % args.partitions)
    zk = ZooKeeperServer()
    zk.start()
    try:
        aset = BenchAgentSet(zk.hostport, zkharness.new_election_path())
        try:
            a = aset.new("single", session_timeout=args.session_timeout)
            a.wait_for(lambda s: s["role"] == "leader", 30, what="the leader")
            bl.quiet(args.quiet)
            single = window(zk, args.seconds)
        finally:
            aset.cleanup()

        parts = "partitions:\n  count: %d\n" % args.partitions
        aset = BenchAgentSet(zk.hostport, zkharness.new_election_path())
        try:
            four = [aset.new("p%d" % i, session_timeout=args.session_timeout,
                             extra_yaml=parts) for i in range(4)]
            t0 = time.monotonic()
            zkharness.poll(lambda: settled(four, args.partitions), 120,
                           interval=0.2, what="4 agents settled")
            print("settled in %.2f s (4 agents started one after another)"
                  % (time.monotonic() - t0))
            bl.quiet(args.quiet)
            total = window(zk, args.seconds)
        finally:
            aset.cleanup()
    finally:
        zk.cleanup()
    per_agent = total / 4
    print("single-election leader:       %8.2f requests/s" % single)
    print("4 agents x %d partitions:    %8.2f requests/s in all, %.2f per agent"
          % (args.partitions, total, per_agent))
    print("per agent / single leader:    %8.2f (target: at most 2)"
          % bl.ratio(per_agent, single))
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
