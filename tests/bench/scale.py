#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: 500 candidates in one election (doc/design.md, Targets, "Scale").

1. Reference, same run: the 2-candidate handover (SIGTERM of the leader's
   agent -> successor's /v1/leader 200, by a long poll at the successor) on its
   own election path of the same ZooKeeper, before the crowd starts.
2. Start N agents (default 500; each a process with its own socket) in
   batches, polling readiness: time until all have joined (role leader or
   follower).
3. One handover with everything else idle, measured by ZooKeeper's own
   counters: zxid (every write transaction adds one), the election node's
   Stat (version = claims, mzxid = epoch, cversion), per-connection packet
   counts (`crst` then `cons`) against an idle window of the same length,
   watches fired by kind (`mntr`), watch counts (`wchs`, `wchc`).
4. --runs handovers timed as in 1, ratio to the 2-candidate median.

Every timed handover, with 2 candidates and with N, starts from the same
settled state: every agent reports the leader, the leader counts all
candidates, then --quiet s (default 0.5) with nothing done. For each one,
ZooKeeper's own watch counters (`mntr`: zk_sum_node_{deleted,changed,
children,created}_watch_count, the number of watch notifications sent, and
the zk_cnt_* counts of the events that fired them) are read before the
SIGTERM and once every remaining agent reports the successor, so the
notifications per leader change are counted, not estimated.

    tests/bench/scale.py [--candidates 500] [--runs 5] [--batch 25]
                         [--session-timeout 10s] [--quiet 0.5]
"""

import argparse
import collections
import os
import re
import signal
import statistics
import sys
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer, poll, four_letter


def statuses(agents, timeout=2.0):
    out = {}
    for a in agents:
        out[a] = a.status(timeout=timeout)
    return out


def find_leader_successor(agents):
    st = statuses(agents)
    leaders = [a for a, s in st.items() if s and s.get("is_leader")]
    succ = [a for a, s in st.items() if s and s.get("position") == 1]
    if len(leaders) != 1 or len(succ) != 1:
        return None
    return leaders[0], succ[0], st


def handover(leader, successor, timeout=30):
    w = bl.LeaderLongPoll(successor.socket)
    t0 = time.monotonic()
    leader.signal(signal.SIGTERM)
    dt = w.wait_200(t0, timeout)
    rc = leader.proc.wait(30)
    leader.close_out()
    if rc != 0:
        raise AssertionError("%s exited %s on SIGTERM" % (leader.id, rc))
    return dt


def wait_settled(agents, leader_id, n, timeout):
    """Every agent reports `leader_id` as leader, and (when n is not None)
    the leader counts n candidates: it watches the queue, while a follower
    recounts only when it lists (its own place changed)."""
    def ok():
        for a in agents:
            s = a.status(timeout=2.0)
            if not s or (s.get("leader") or {}).get("id") != leader_id:
                return False
            if n is not None and s.get("role") == "leader" and s.get("candidates") != n:
                return False
        return True
    poll(ok, timeout, interval=0.05, what="all agents to report %s leading (%s candidates)" % (leader_id, n))


def wait_rejoined(agent, leader, n, timeout=60):
    agent.wait_for(lambda s: s.get("role") == "follower", timeout, what="rejoin")
    leader.wait_for(lambda s: s.get("candidates") == n, timeout, what="count %d" % n)


WATCH_KINDS = ("deleted", "changed", "children", "created")


def watch_counters(zk):
    """{kind: (notifications, events)} from mntr: zk_sum_node_<kind>_watch_count
    is the number of watchers a <kind> event fired, summed over events;
    zk_cnt_... the number of events that fired at least one watch."""
    m = bl.mntr(zk)
    for k in WATCH_KINDS:
        if "zk_sum_node_%s_watch_count" % k not in m:
            raise AssertionError("ZooKeeper's mntr has no zk_sum_node_%s_watch_count: %s"
                                 % (k, sorted(x for x in m if "watch" in x)))
    return {k: (int(m["zk_sum_node_%s_watch_count" % k]),
                int(m["zk_cnt_node_%s_watch_count" % k])) for k in WATCH_KINDS}


def watch_delta(w0, w1):
    return {k: (w1[k][0] - w0[k][0], w1[k][1] - w0[k][1]) for k in WATCH_KINDS}


def timed_change(zk, agents, L, S, n, quiet):
    """From a settled election (every agent of `agents` reports L, L counts n):
    a quiet spell, then SIGTERM of L timed until S answers 200; then wait until
    every other agent reports S. Returns (seconds, watch counter deltas)."""
    wait_settled(agents, L.id, n, 120)
    bl.quiet(quiet)
    w0 = watch_counters(zk)
    dt = handover(L, S)
    wait_settled([a for a in agents if a is not L], S.id, n - 1, 120)
    return dt, watch_delta(w0, watch_counters(zk))


def fmt_watches(deltas):
    """Median notifications per change, total and by kind (events in brackets)."""
    tot = statistics.median(sum(d[k][0] for k in WATCH_KINDS) for d in deltas)
    parts = []
    for k in WATCH_KINDS:
        ns = statistics.median(d[k][0] for d in deltas)
        es = statistics.median(d[k][1] for d in deltas)
        if ns or es:
            parts.append("%s %g (%g events)" % (k, ns, es))
    return "%g notifications: %s" % (tot, ", ".join(parts) or "none")


# -------------------------------------------------------------------------
# ZooKeeper's own counters

CONS_RE = re.compile(r"\[\d+\]\((.*)\)")


def cons(zk):
    """{sid: (recved, sent, lop)} from `cons`, one entry per connection."""
    out = four_letter(zk.host, zk.port, "cons", timeout=10.0) or ""
    d = {}
    for line in out.splitlines():
        m = CONS_RE.search(line)
        if not m:
            continue
        kv = dict(p.split("=", 1) for p in m.group(1).split(",") if "=" in p)
        if "sid" in kv:
            d[kv["sid"]] = (int(kv.get("recved", 0)), int(kv.get("sent", 0)), kv.get("lop", ""))
    return d


def wchs(zk):
    out = four_letter(zk.host, zk.port, "wchs", timeout=10.0) or ""
    m = re.search(r"Total watches:\s*(\d+)", out)
    return int(m.group(1)) if m else None, " ".join(out.split())


def wchc_hist(zk, path):
    """Histogram of (watches on `path`, on its children) per session, from `wchc`."""
    out = four_letter(zk.host, zk.port, "wchc", timeout=30.0) or ""
    per = collections.defaultdict(lambda: [0, 0])
    sid = None
    for line in out.splitlines():
        if line.startswith("0x"):
            sid = line.strip()
        elif line.strip().startswith("/") and sid is not None:
            p = line.strip()
            if p == path:
                per[sid][0] += 1
            elif p.startswith(path + "/"):
                per[sid][1] += 1
    return collections.Counter(tuple(v) for v in per.values())


def window_counts(zk, exclude_sids, settle):
    """crst, run settle(), then per-connection packets received (sessions
    present at both ends only, excluding exclude_sids). Returns (dict, secs)."""
    four_letter(zk.host, zk.port, "crst", timeout=10.0)
    t0 = time.monotonic()
    settle()
    secs = time.monotonic() - t0
    c = cons(zk)
    return {k: v for k, v in c.items() if k not in exclude_sids}, secs


def cpu_ns(pids):
    """Sum of on-CPU time (ns) of every thread of `pids` (/proc/PID/task/*/schedstat)."""
    total = 0
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total


def hist(values):
    c = collections.Counter(values)
    return ", ".join("%d:%d" % (k, c[k]) for k in sorted(c))


# -------------------------------------------------------------------------

def two_candidate_reference(zk, args):
    aset = BenchAgentSet(zk.hostport, "/zkelect/bench-scale-two")
    times, watches = [], []
    try:
        a = aset.new("two-a", session_timeout=args.session_timeout)
        b = aset.new("two-b", session_timeout=args.session_timeout)
        leader = aset.wait_one_leader(timeout=30)
        other = b if leader is a else a
        wait_rejoined(other, leader, 2)
        for i in range(args.warmup + args.runs):
            dt, w = timed_change(zk, [leader, other], leader, other, 2, args.quiet)
            if i >= args.warmup:
                times.append(dt)
                watches.append(w)
            leader.start()
            leader, other = other, leader
            wait_rejoined(other, leader, 2)
    finally:
        aset.cleanup()
    return times, watches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", type=int, default=500)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--session-timeout", default="10s")
    ap.add_argument("--quiet", type=float, default=0.5,
                    help="seconds of quiet after the election settled, before each timed "
                         "handover (2 and N candidates alike)")
    ap.add_argument("--herd-runs", type=int, default=3,
                    help="handovers with the other N-2 agents SIGSTOPped (0 = skip)")
    args = ap.parse_args()
    n = args.candidates
    if not 2 <= n <= 2000:
        ap.error("--candidates must be 2..2000")
    if not 1 <= args.runs <= 50 or not 1 <= args.batch <= 200 or not 0 <= args.herd_runs <= 20:
        ap.error("--runs 1..50, --batch 1..200, --herd-runs 0..20")

    nofile = bl.raise_nofile(4 * n + 1024)
    bl.header("scale: %d candidates in one election (batches of %d, session %s), "
              "RLIMIT_NOFILE %d" % (n, args.batch, args.session_timeout, nofile))
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=60000).start()
    path = "/zkelect/bench-scale"
    aset = BenchAgentSet(zk.hostport, path)
    obs = None
    rep = {}
    try:
        print("2-candidate reference (%d runs + %d warm-up) ..." % (args.runs, args.warmup))
        sys.stdout.flush()
        rep["two"], rep["two_watches"] = two_candidate_reference(zk, args)

        # ---- join
        print("starting %d agents ..." % n)
        sys.stdout.flush()
        t0 = time.monotonic()
        for start in range(0, n, args.batch):
            batch = [aset.new("s%04d" % i, start=False, session_timeout=args.session_timeout)
                     for i in range(start, min(n, start + args.batch))]
            for a in batch:
                a.start(wait_ready=False)
            for a in batch:
                a.wait_for(lambda s: s.get("role") in ("leader", "follower"), 120,
                           what="join")
        t_join = time.monotonic() - t0
        agents = aset.agents
        leader = aset.wait_one_leader(timeout=60)
        leader.wait_for(lambda s: s.get("candidates") == n, 120, what="count %d" % n)
        wait_settled(agents, leader.id, None, 120)
        t_all = time.monotonic() - t0
        rss = []
        for a in agents:
            with open("/proc/%d/status" % a.pid) as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        rss.append(int(line.split()[1]))
        rep["join"] = (t_join, t_all, statistics.median(rss), sum(rss))

        # ---- one handover under ZooKeeper's counters
        obs = bl.zkharness.Observer(zk.hostport)
        obs_sid = "0x%x" % obs.zk.client_id[0]
        _, st0 = obs.election_node(path)
        zx0 = bl.zk_zxid(zk)
        m0 = bl.mntr(zk)
        w0, wtxt0 = wchs(zk)
        wh0 = wchc_hist(zk, path)
        found = find_leader_successor(agents)
        if not found:
            raise AssertionError("cannot tell leader and successor apart")
        L, S, _ = found
        others = [a for a in agents if a is not L]
        # idle window first, as long as the handover window will be (bounded)
        idle_len = [None]

        agent_pids = [a.pid for a in agents]

        def do_handover():
            t = time.monotonic()
            c0, j0 = cpu_ns(agent_pids), cpu_ns([zk.proc.pid])
            rep["counted_handover"] = handover(L, S)
            wait_settled(others, S.id, n - 1, 120)
            c1, j1 = cpu_ns(agent_pids), cpu_ns([zk.proc.pid])
            rep["cpu"] = ((c1 - c0) / 1e6, (j1 - j0) / 1e6)
            idle_len[0] = time.monotonic() - t

        busy, busy_secs = window_counts(zk, {obs_sid}, do_handover)
        zx1 = bl.zk_zxid(zk)
        m1 = bl.mntr(zk)
        w1, wtxt1 = wchs(zk)
        wh1 = wchc_hist(zk, path)
        _, st1 = obs.election_node(path)
        idle_target = time.monotonic() + busy_secs

        def idle():
            while time.monotonic() < idle_target:
                time.sleep(min(0.05, max(0.0, idle_target - time.monotonic())))
        idle_counts, idle_secs = window_counts(zk, {obs_sid}, idle)
        sess = {}
        for a in others:
            s = a.status()
            sess[a.id] = s
        rep["zk"] = dict(zx=zx1 - zx0, version=st1.version - st0.version,
                         cversion=st1.cversion - st0.cversion, mzxid0=st0.mzxid,
                         mzxid1=st1.mzxid, epoch=sess[S.id].get("epoch"),
                         w0=w0, w1=w1, wtxt0=wtxt0, wtxt1=wtxt1, wh0=wh0, wh1=wh1,
                         busy=busy, busy_secs=busy_secs, idle=idle_counts, idle_secs=idle_secs,
                         m0=m0, m1=m1)
        # who is the successor's connection: the one whose last op was the claim
        L.start()
        wait_rejoined(L, S, n, 120)

        # ---- timed handovers with n candidates, settled as the 2-candidate ones
        times, watches = [], []
        for i in range(args.runs):
            found = poll(lambda: find_leader_successor(agents), 60, interval=0.1,
                         what="leader and successor")
            L, S, _ = found
            dt, w = timed_change(zk, agents, L, S, n, args.quiet)
            times.append(dt)
            watches.append(w)
            L.start()
            wait_rejoined(L, S, n, 120)
        rep["times"] = times
        rep["watches"] = watches

        # ---- the same with every agent but the leader and its successor
        # stopped (SIGSTOP, well inside the session timeout): what remains is
        # ZooKeeper's fan-out and the successor's own work, without the
        # reaction of the N-2 others (their wake-ups, reads and CPU).
        paused = []
        for i in range(args.herd_runs):
            L, S, _ = poll(lambda: find_leader_successor(agents), 60, interval=0.1,
                           what="leader and successor")
            rest = [a for a in agents if a is not L and a is not S]
            wait_settled(agents, L.id, n, 120)
            bl.quiet(args.quiet)
            for a in rest:
                a.pause()
            try:
                paused.append(handover(L, S))
            finally:
                for a in rest:
                    a.resume()
            wait_settled([a for a in agents if a is not L], S.id, n - 1, 120)
            L.start()
            wait_rejoined(L, S, n, 120)
        rep["paused"] = paused
        if any(not a.running() for a in agents):
            raise AssertionError("agents died: %s" % [a.id for a in agents if not a.running()])
    finally:
        if obs:
            obs.close()
        t = time.monotonic()
        aset.cleanup()
        zk.cleanup()
        rep["cleanup"] = time.monotonic() - t

    # ---- report
    print()
    tj, ta, rss_med, rss_sum = rep["join"]
    print("join: %d agents joined in %.1f s (%.0f agents/s, batches of %d); all reporting the "
          "leader and %d candidates after %.1f s" % (n, tj, n / tj, args.batch, n, ta))
    print("agent anonymous RSS: median %d KiB, %d MiB over all %d agents" % (
        rss_med, rss_sum // 1024, n))
    z = rep["zk"]
    print()
    print("one leader change with all else idle (%d candidates -> %d):" % (n, n - 1))
    print("  write transactions (zxid delta): %d   (expected 2: the leader's release "
          "multi, which names its successor, and its closeSession)" % z["zx"])
    print("  election node: version +%d (claims), cversion +%d, mzxid 0x%x -> 0x%x = "
          "successor's epoch %s" % (z["version"], z["cversion"], z["mzxid0"], z["mzxid1"],
                                    z["epoch"]))
    m0, m1 = z["m0"], z["m1"]

    def d(k):
        return (m1.get(k, 0) or 0) - (m0.get(k, 0) or 0)
    print("  watches fired (mntr sums): data-changed %d in %d events, deleted %d in %d "
          "events, children %d in %d events" % (
              d("zk_sum_node_changed_watch_count"), d("zk_cnt_node_changed_watch_count"),
              d("zk_sum_node_deleted_watch_count"), d("zk_cnt_node_deleted_watch_count"),
              d("zk_sum_node_children_watch_count"), d("zk_cnt_node_children_watch_count")))
    print("  ZooKeeper packets received %d, sent %d, bytes sent %d in the change window" % (
        d("zk_packets_received"), d("zk_packets_sent"), d("zk_response_bytes")))
    print("  watches (wchs): before %s; after %s" % (z["wtxt0"], z["wtxt1"]))
    print("  watches per session on (election node, its children) before: %s" % (
        ", ".join("%s x%d" % (k, v) for k, v in sorted(z["wh0"].items()))))
    print("  ... after: %s" % (", ".join("%s x%d" % (k, v) for k, v in sorted(z["wh1"].items()))))
    busy = [v[0] for v in z["busy"].values()]
    idle = [v[0] for v in z["idle"].values()]
    top = sorted(z["busy"].items(), key=lambda kv: -kv[1][0])[:3]
    print("  requests per connection in the change window (%.2f s), count:connections: %s"
          % (z["busy_secs"], hist(busy)))
    print("  ... in an idle window of the same length (%.2f s, pings and the leader's "
          "lease renewals): %s" % (z["idle_secs"], hist(idle)))
    print("  busiest connections in the change window: %s" % ", ".join(
        "%s recved=%d lop=%s" % (k, v[0], v[2]) for k, v in top))
    extra = (sum(busy) - sum(idle))
    print("  => requests caused by the change: %d over %d connections = %.2f per agent "
          "(median per connection: change %.0f, idle %.0f)" % (
              extra, len(busy), extra / max(1, len(busy)), statistics.median(busy or [0]),
              statistics.median(idle or [0])))
    print()
    print("handover SIGTERM -> successor /v1/leader 200 (a long poll at the successor):")
    print("  %-28s %9s %9s %9s %9s" % ("", "median", "p95", "min", "max"))
    for label, v in (("2 candidates (%d runs)" % len(rep["two"]), rep["two"]),
                     ("%d candidates (%d runs)" % (n, len(rep["times"])), rep["times"])):
        m, p95, lo, hi = bl.summary_ms(v)
        print("  %-28s %6.1f ms %6.1f ms %6.1f ms %6.1f ms" % (label, m, p95, lo, hi))
    if rep.get("paused"):
        m, p95, lo, hi = bl.summary_ms(rep["paused"])
        print("  %-28s %6.1f ms %6.1f ms %6.1f ms %6.1f ms" % (
            "%d, other %d SIGSTOPped" % (n, n - 2), m, p95, lo, hi))
    print("  the counted change above (first with %d): %.1f ms" % (
        n, rep["counted_handover"] * 1000))
    if "cpu" in rep:
        print("  CPU used by the counted change until all agents settled: all %d agents "
              "%.0f ms, ZooKeeper JVM %.0f ms" % (n, rep["cpu"][0], rep["cpu"][1]))
    print()
    print("watch notifications per leader change (ZooKeeper mntr, median over the timed "
          "changes, from SIGTERM until every agent reports the successor):")
    print("  2 candidates: %s" % fmt_watches(rep["two_watches"]))
    print("  %d candidates: %s" % (n, fmt_watches(rep["watches"])))
    r = bl.summary_ms(rep["times"])[0] / bl.summary_ms(rep["two"])[0]
    r95 = bl.summary_ms(rep["times"])[1] / bl.summary_ms(rep["two"])[1]
    print()
    print("ratio %d-candidate / 2-candidate handover (median): %.2f   %s" % (
        n, r, "target met (<= 2)" if r <= 2 else "target NOT met (> 2)"))
    print("ratio %d-candidate / 2-candidate handover (p95):    %.2f" % (n, r95))
    print("writes per leader change: %d transactions, %d claim   %s" % (
        z["zx"], z["version"], "target met (one claim: the departing leader's release, "
        "which names the successor; then its session's close)" if z["version"] == 1 and
        z["zx"] <= 2 else "CHECK: more writes than the release and the close"))
    print("(teardown of %d agents took %.1f s)" % (n, rep["cleanup"]))
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
