#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: partitions (issue 22), each figure against a single election
measured the same way in the same run.

(a) Rebalance time, 4 agents over --partitions (256) partitions:
    * graceful leave: SIGTERM of one of 4 settled agents until the 3 left
      are settled again (each owns exactly what it is assigned, floor/ceil
      of N/3, every partition owned once), seen by a poll of every agent's
      /v1/partitions every --interval; the oldest member leaves on even
      runs, the newest on odd ones, and each is also reported apart;
    * join: the agent started again; the clock starts at the creation of
      its member node (its ctime, ZooKeeper's wall clock, read afterwards),
      so that the process's start-up and connection are not timed, and
      stops when the 4 are settled, seen by the same poll;
    * reference: SIGTERM of the leader of a single election of 2 agents
      until the other answers is_leader true, seen by a poll of its
      /v1/status every --interval.
    Before each clock starts both sides are settled and --quiet s pass.
(b) ZooKeeper requests per second of each agent at steady state, from the
    server's own per-connection counters: `cons` gives, per session, the
    packets the server received (requests and pings); the counters are
    reset (`crst`), --window s pass, and each agent's session (the
    ephemeralOwner of its member or contender node) is looked up. The
    4 partitioned agents and the reference (the leader, and its follower, of
    a single election with the same session timeout) run on the same
    server in the same window. `mntr`'s zk_packets_received over the window
    is printed as a cross-check of the sum.
(c) RSS (VmRSS, VmHWM) of each of those 4 agents, owning 64 partitions each
    with the default 256, against the single-election leader, read at the
    end of the same window.

    tests/bench/partitions.py [--partitions 256] [--runs 3] [--window 30]
        [--session-timeout 6s] [--interval 0.01] [--quiet 0.5]
"""

import argparse
import re
import signal
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer, four_letter

import partharness as ph
from zkharness import Observer, unix_request

CONS_RE = re.compile(r"\[\d+\]\((.*)\)")


def cons(zk):
    """{session id (int): packets received} from `cons`."""
    out = four_letter(zk.host, zk.port, "cons", timeout=10.0) or ""
    d = {}
    for line in out.splitlines():
        m = CONS_RE.search(line)
        if not m:
            continue
        kv = dict(p.split("=", 1) for p in m.group(1).split(",") if "=" in p)
        if "sid" in kv:
            d[int(kv["sid"], 16)] = int(kv.get("recved", 0))
    return d


def rss(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def wait_settled_at(live, names, timeout, interval):
    """Poll settled() every interval; the wall-clock and monotonic time at
    the end of the first poll that sees it."""
    deadline = time.monotonic() + timeout
    while True:
        m = ph.settled(live, names)
        if m is not None:
            return time.time(), time.monotonic()
        if time.monotonic() >= deadline:
            raise AssertionError("not settled within %.0f s over %s" % (
                timeout, ", ".join(a.id for a in live)))
        time.sleep(interval)


def leading(agent):
    try:
        r = unix_request(agent.socket, "GET", "/v1/status", timeout=1.0)
        return r.status == 200 and r.json().get("is_leader") is True
    except Exception:  # noqa: BLE001
        return False


def member_ctime(obs, path, agent_id):
    """ctime (ms, ZooKeeper's wall clock) of agent_id's member node."""
    base = path + "/members"
    best = None
    for n in obs.zk.get_children(base):
        data, st = obs.zk.get("%s/%s" % (base, n))
        if data.split(b"\0", 1)[0].decode(errors="replace").split("\n", 1)[0] == agent_id:
            best = st.ctime if best is None else max(best, st.ctime)
    if best is None:
        raise AssertionError("no member node of %s under %s" % (agent_id, base))
    return best


def session_of(obs, path, agent_id, under):
    """ephemeralOwner of agent_id's node under path/under ("" for the
    contenders of a single election)."""
    base = path + ("/" + under if under else "")
    for n in obs.zk.get_children(base):
        data, st = obs.zk.get("%s/%s" % (base, n))
        if st.ephemeralOwner and data.split(b"\0", 1)[0].decode(errors="replace").split("\n", 1)[0] == agent_id:
            return st.ephemeralOwner
    raise AssertionError("no node of %s under %s" % (agent_id, base))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--session-timeout", default="6s")
    ap.add_argument("--interval", type=float, default=0.01)
    ap.add_argument("--quiet", type=float, default=0.5)
    args = ap.parse_args()
    n = args.partitions
    names = [str(i) for i in range(n)]

    bl.header("partitions: rebalance, ZooKeeper requests and RSS, %d partitions, 4 agents"
              % n)
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    parts = BenchAgentSet(zk.hostport, "/zkelect/bench-parts")
    single = BenchAgentSet(zk.hostport, "/zkelect/bench-single")
    obs = None
    leave, join, ref, leave_old, leave_new = [], [], [], [], []
    try:
        obs = Observer(zk.hostport)
        st = args.session_timeout
        agents = [parts.new("p%d" % i, session_timeout=st,
                            extra_yaml=ph.partitions_yaml(n)) for i in range(4)]
        s1 = single.new("s1", session_timeout=st)
        single.wait_one_leader(timeout=30)
        s2 = single.new("s2", session_timeout=st)
        s2.wait_for(lambda s: s.get("role") == "follower", 30, what="follow")
        wait_settled_at(agents, names, 300, args.interval)
        order = list(agents)    # by joining order

        # (a) rebalance, against one graceful handover
        for run in range(args.runs):
            # reference: the single election's leader, SIGTERMed
            ldr = s1 if leading(s1) else s2
            oth = s2 if ldr is s1 else s1
            oth.wait_for(lambda s: s.get("role") == "follower" and s.get("leader"), 30,
                         what="follow the leader")
            bl.quiet(args.quiet)
            t0 = time.monotonic()
            ldr.signal(signal.SIGTERM)
            while not leading(oth):
                if time.monotonic() - t0 > 60:
                    raise AssertionError("no successor within 60 s")
                time.sleep(args.interval)
            ref.append(time.monotonic() - t0)
            ldr.proc.wait(30)
            ldr.start()
            ldr.wait_for(lambda s: s.get("role") == "follower", 30, what="follow again")

            # leave: SIGTERM of one of the 4 partitioned agents, the oldest
            # member on even runs, the newest on odd ones (the assignment
            # moves only the leaver's partitions when it is the newest)
            newest = run % 2 == 1
            leaver = order[-1] if newest else order[0]
            rest = [a for a in agents if a is not leaver]
            bl.quiet(args.quiet)
            t0 = time.monotonic()
            leaver.signal(signal.SIGTERM)
            _, t1 = wait_settled_at(rest, names, 300, args.interval)
            (leave_new if newest else leave_old).append(t1 - t0)
            leave.append(t1 - t0)
            leaver.proc.wait(60)
            order.remove(leaver)
            order.append(leaver)     # it joins again: the newest

            # join: the same agent again, timed from its member node's creation
            leaver.start()
            w1, _ = wait_settled_at(agents, names, 300, args.interval)
            join.append(w1 - member_ctime(obs, parts.path, leaver.id) / 1000.0)
            bl.quiet(args.quiet)
            print("run %d: graceful handover %s, leave of the %s member %s, join %s" % (
                run + 1, bl.fmt_ms(ref[-1] * 1000), "newest" if newest else "oldest",
                bl.fmt_ms(leave[-1] * 1000), bl.fmt_ms(join[-1] * 1000)), flush=True)

        # (b) and (c): steady state, every agent settled and knowing every
        # partition's leader (an agent looks again at a claim node missing
        # at its start; that is not steady state), one window
        wait_settled_at(agents, names, 300, args.interval)
        bl.poll(lambda: all(p["leader"] is not None for a in agents
                            for p in ph.plist(a)["partitions"]), 120, interval=0.1,
                what="every agent to know every partition's leader")
        ldr = s1 if leading(s1) else s2
        fol = s2 if ldr is s1 else s1
        sids = {a.id: session_of(obs, parts.path, a.id, "members") for a in agents}
        sids[ldr.id] = session_of(obs, single.path, ldr.id, "")
        sids[fol.id] = session_of(obs, single.path, fol.id, "")
        owned = {a.id: len(ph.owned(ph.plist(a))) for a in agents}
        obs.close()     # its pings would count in mntr's total
        obs = None
        bl.quiet(args.quiet)
        m0 = bl.mntr(zk)["zk_packets_received"]
        four_letter(zk.host, zk.port, "crst", timeout=10.0)
        t0 = time.monotonic()
        time.sleep(args.window)
        c = cons(zk)
        secs = time.monotonic() - t0
        m1 = bl.mntr(zk)["zk_packets_received"]
        mem = {a.id: rss(a.pid) for a in agents + [ldr, fol]}
        if ph.settled(agents, names) is None or not leading(ldr):
            raise AssertionError("the agents did not stay settled through the window")
    finally:
        if obs is not None:
            obs.close()
        parts.cleanup()
        single.cleanup()
        zk.cleanup()

    def med(v):
        return bl.summary_ms(v)[0]
    print()
    print("(a) rebalance, %d runs, median (min..max)" % args.runs)
    print("  single election, graceful handover (SIGTERM): %s (%s..%s)" % (
        bl.fmt_ms(med(ref)), bl.fmt_ms(min(ref) * 1000), bl.fmt_ms(max(ref) * 1000)))
    for what, v in (("graceful leave (SIGTERM of 1 of 4)", leave),
                    ("  of which the oldest member's", leave_old),
                    ("  of which the newest member's", leave_new),
                    ("join (3 -> 4, from its member node)", join)):
        if not v:
            continue
        print("  %s%s: %s (%s..%s), %.1fx the handover" % (
            "" if what.startswith(" ") else "%d partitions, " % n, what, bl.fmt_ms(med(v)), bl.fmt_ms(min(v) * 1000), bl.fmt_ms(max(v) * 1000),
            bl.ratio(med(v), med(ref))))
    print()
    print("(b) ZooKeeper packets received per agent at steady state (cons, %.1f s)" % secs)
    rate = {}
    for aid, sid in sids.items():
        rate[aid] = c.get(sid, 0) / secs
    for aid in sorted(sids):
        print("  %-4s %-40s %7.2f /s" % (aid, "owns %d of %d partitions" % (owned[aid], n)
                                        if aid in owned else
                                        ("single-election leader" if aid == ldr.id else
                                         "single-election follower"), rate[aid]))
    worst = max(rate[a.id] for a in agents)
    print("  the busiest partitioned agent: %.2f /s, %.2fx the single-election leader "
          "(%.2f /s); target at most 2x" % (worst, bl.ratio(worst, rate[ldr.id]),
                                            rate[ldr.id]))
    print("  cross-check: mntr zk_packets_received grew by %d, the sessions above sum "
          "to %d" % (m1 - m0, sum(c.get(s, 0) for s in sids.values())))
    print()
    print("(c) RSS at the end of the window")
    for aid in sorted(mem):
        print("  %-4s VmRSS %6d KiB  VmHWM %6d KiB" % (aid, mem[aid]["VmRSS"],
                                                      mem[aid]["VmHWM"]))
    big = max(mem[a.id]["VmRSS"] for a in agents)
    print("  largest partitioned agent (%d partitions owned) %.2f MiB, %.2fx the "
          "single-election leader (%.2f MiB)" % (max(owned.values()), big / 1024.0,
                                                 bl.ratio(big, mem[ldr.id]["VmRSS"]),
                                                 mem[ldr.id]["VmRSS"] / 1024.0))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(bl.run_main(main))
