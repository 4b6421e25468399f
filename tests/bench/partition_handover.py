#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: a graceful leave, partition by partition (issue 30), against
one election's graceful handover, measured the same way in the same run.

A partition's unowned time in a graceful leave is the gap between the
leaver's last moment of ownership and its successor's first: from the
leaver's `audit: end ... partition=P` line (at=, CLOCK_BOOTTIME in us,
written when the leaver stops answering is_leader true, before it tells
its app and releases) to the successor's `audit: lead ... partition=P`
line (at=, when it starts answering true). Every agent runs on this
machine, so both clocks are one. The reference is the same gap for the
leader of a single election of 2 agents, SIGTERMed, from the same lines.

--agents agents (default 4) settle over --partitions (64) partitions;
then --runs times: SIGTERM of the oldest member, the gaps of every
partition it owned, the rest settled again, the leaver started again,
settled; and SIGTERM of the single election's leader, its gap, restarted.
Before each SIGTERM both sides are settled and --quiet s pass. The
agents run with the default configuration (no zookeeper.tick_time; the
servers' tickTime is 200 ms) and --session-timeout (6 s), logging at
debug level (the audit lines) on both sides.

    tests/bench/partition_handover.py [--agents 4] [--partitions 64]
        [--runs 3] [--session-timeout 6s] [--quiet 0.5]
"""

import argparse
import signal
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer

import partharness as ph
from zkharness import AUDIT_RE, AUDIT_KV_RE, log_messages, unix_request


def audit_events(agent, kind):
    """{partition or None: [at (us), ...]} of the agent's `audit: KIND` lines."""
    out = {}
    for k, msg in log_messages(agent.log_text(10**9).splitlines()):
        m = AUDIT_RE.match(msg) if k == "msg" else None
        if not m or m.group(1) != kind:
            continue
        kv = dict(AUDIT_KV_RE.findall(m.group(3)))
        if "at" in kv:
            out.setdefault(kv.get("partition"), []).append(int(kv["at"]))
    return out


def leading(agent):
    try:
        r = unix_request(agent.socket, "GET", "/v1/status", timeout=1.0)
        return r.status == 200 and r.json().get("is_leader") is True
    except Exception:  # noqa: BLE001
        return False


def gaps_after(leaver, rest, since_us, part):
    """For each partition (or the single election: part=False) the leaver
    stopped owning after since_us: the first start of a term by any of rest
    after that end, minus the end (ms)."""
    out = []
    ends = audit_events(leaver, "end")
    leads = [audit_events(a, "lead") for a in rest]
    for p, ats in ends.items():
        if (p is not None) != part:
            continue
        for end in ats:
            if end < since_us:
                continue
            nxt = [t for ld in leads for t in ld.get(p, []) if t >= end]
            if nxt:
                out.append((min(nxt) - end) / 1e6)     # seconds
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--session-timeout", default="6s")
    ap.add_argument("--quiet", type=float, default=0.5)
    args = ap.parse_args()
    n = args.partitions
    names = [str(i) for i in range(n)]

    bl.header("partition handover: a graceful leave, per partition, %d agents x %d "
              "partitions, T = %s, tick_time unset" % (args.agents, n,
                                                       args.session_timeout))
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    parts = BenchAgentSet(zk.hostport, "/zkelect/bench-phand")
    single = BenchAgentSet(zk.hostport, "/zkelect/bench-shand")
    part_gaps, ref_gaps, unsettled = [], [], []
    try:
        st = args.session_timeout
        agents = [parts.new("p%d" % i, session_timeout=st, log_level="debug",
                            tick_time="", extra_yaml=ph.partitions_yaml(n))
                  for i in range(args.agents)]
        s1 = single.new("s1", session_timeout=st, log_level="debug", tick_time="")
        single.wait_one_leader(timeout=30)
        s2 = single.new("s2", session_timeout=st, log_level="debug", tick_time="")
        s2.wait_for(lambda s: s.get("role") == "follower", 30, what="follow")
        bl.poll(lambda: ph.settled(agents, names), 300, interval=0.05,
                what="the partitions settled")
        order = list(agents)
        for run in range(args.runs):
            # reference: one election's leader, SIGTERMed
            ldr = s1 if leading(s1) else s2
            oth = s2 if ldr is s1 else s1
            oth.wait_for(lambda s: s.get("role") == "follower" and s.get("leader"), 30,
                         what="follow the leader")
            bl.quiet(args.quiet)
            since = time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1000
            ldr.signal(signal.SIGTERM)
            oth.wait_for(lambda s: s.get("is_leader"), 60, what="lead")
            ldr.proc.wait(30)
            ref_gaps += gaps_after(ldr, [oth], since, False)
            ldr.start()
            ldr.wait_for(lambda s: s.get("role") == "follower", 30, what="follow again")

            # the oldest member leaves
            leaver = order[0]
            rest = [a for a in agents if a is not leaver]
            bl.quiet(args.quiet)
            since = time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1000
            t0 = time.monotonic()
            leaver.signal(signal.SIGTERM)
            bl.poll(lambda: ph.settled(rest, names), 300, interval=0.01,
                    what="the rest settled")
            unsettled.append(time.monotonic() - t0)
            leaver.proc.wait(60)
            g = gaps_after(leaver, rest, since, True)
            part_gaps += g
            order.remove(leaver)
            order.append(leaver)
            leaver.start()
            bl.poll(lambda: ph.settled(agents, names), 300, interval=0.05,
                    what="settled again")
            print("run %d: %d partitions handed over, median %s, max %s; one "
                  "election %s; settled %s after the SIGTERM" % (
                      run + 1, len(g), bl.fmt_ms(bl.pct(g, 50) * 1000 if g else None),
                      bl.fmt_ms(max(g) * 1000 if g else None),
                      bl.fmt_ms(ref_gaps[-1] * 1000 if ref_gaps else None),
                      bl.fmt_ms(unsettled[-1] * 1000)), flush=True)
    finally:
        parts.cleanup()
        single.cleanup()
        zk.stop()

    print()
    print("%-52s %9s %9s %9s %9s" % ("", "median", "p95", "min", "max"))
    for label, v in (("a partition: the leaver's end -> successor's lead",
                      part_gaps),
                     ("one election: the leader's end -> successor's lead",
                      ref_gaps)):
        print("%-52s %9s %9s %9s %9s" % ((label,) + bl.summary_ms(v)))
    print("(%d partitions, %d handovers of one election; from the agents' own "
          "audit lines, CLOCK_BOOTTIME)" % (len(part_gaps), len(ref_gaps)))
    print()
    print("ratio partition/one election (median): %.2f" % bl.ratio(
        bl.pct(part_gaps, 50), bl.pct(ref_gaps, 50)))
    print("target: median under 50 ms per partition: %s" % (
        "met" if part_gaps and bl.pct(part_gaps, 50) < 0.050 else "NOT met"))


if __name__ == "__main__":
    bl.run_main(main)
