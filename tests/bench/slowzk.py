#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: a slow ZooKeeper (issue 23, item 4). How slow may the link to
ZooKeeper be, as a round trip over the session timeout T, before a leader
loses its term, and before an agent can no longer start one?

    tests/bench/slowzk.py [--timeout 2s] [--tick-time 200ms|none]
                          [--fractions 0.04,0.08,...] [--runs 1]
    ZKELECTD=/path/to/old/zkelectd tests/bench/slowzk.py

A real ZooKeeper (tickTime 200 ms); each agent reaches it through its own
loopback proxy (tests/integration/harness/zkproxy.py) that holds every chunk for
f*T/2 in each direction, so that a round trip takes about f*T. For each
fraction f, at once (each in its own election):

  hold   the agent leads on a quick link; then the delay is set, and for
         8 T its status is read every 50 ms: held if it answered
         is_leader true with the same epoch throughout;
  start  the delay is set before the agent starts; for 8 T after it
         connects: whether it led, how many terms began and ended (a term
         that starts and lapses is a flap), and its status `reason`.

The measured renewal round trip (zkelect_renewal_seconds) is printed beside
each fraction. The figures: the largest f held in every run, and the largest
f at which a term started and lasted in every run.
"""

import argparse
import threading
import time

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer
from zkproxy import ZKProxy

FRACTIONS = "0.04,0.06,0.08,0.10,0.12,0.14,0.16,0.18,0.20,0.25,0.30"


def seconds(text):
    text = text.strip()
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    if text.endswith("s"):
        return float(text[:-1])
    raise SystemExit("bad duration: %s" % text)


def renewal_rtt(agent):
    """(mean, max) renewal round trip in ms from /metrics, or (None, None)."""
    try:
        body = agent.get("/metrics", timeout=2.0).body
    except Exception:  # noqa: BLE001 - an agent that does not answer has none
        return None, None
    vals = {}
    for line in body.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].startswith("zkelect_renewal"):
            vals[parts[0]] = float(parts[1])
    n = vals.get("zkelect_renewal_seconds_count", 0)
    if not n:
        return None, None
    return (1000 * vals["zkelect_renewal_seconds_sum"] / n,
            1000 * vals.get("zkelect_renewal_max_seconds", 0))


def watch(agent, seconds_, out):
    """Reads the status every 50 ms for seconds_: terms begun and ended,
    epochs seen, the last reason."""
    terms = ended = 0
    epochs = []
    leading = False
    reason = None
    deadline = time.monotonic() + seconds_
    while time.monotonic() < deadline:
        s = agent.status(timeout=1.0)
        now_leading = bool(s and s["is_leader"])
        if now_leading and (not leading or s["epoch"] not in epochs):
            terms += 1
            epochs.append(s["epoch"])
        if leading and not now_leading:
            ended += 1
        leading = now_leading
        if s is not None:
            reason = s.get("reason")
        time.sleep(0.05)
    out.update(terms=terms, ended=ended, epochs=epochs, leading=leading, reason=reason)


def hold_trial(zk, f, T, tick, out):
    aset = BenchAgentSet(zk.hostport, bl.zkharness.new_election_path())
    p = ZKProxy(zk.hostport)
    try:
        a = aset.new("a", zk_hostport=p.hostport, session_timeout="%dms" % (T * 1000),
                     tick_time=tick)
        s = a.wait_for(lambda s: s["is_leader"], 30, what="a leads on a quick link")
        p.delay(int(f * T * 1000 / 2))
        w = {}
        watch(a, 8 * T, w)
        out["held"] = w["terms"] == 1 and w["ended"] == 0 and w["epochs"] == [s["epoch"]]
        out.update(w)
        out["rtt"] = renewal_rtt(a)
    except Exception as e:  # noqa: BLE001 - a broken trial is reported, not fatal
        out["error"] = str(e)[:200]
    finally:
        aset.cleanup()
        p.close()


def start_trial(zk, f, T, tick, out):
    aset = BenchAgentSet(zk.hostport, bl.zkharness.new_election_path())
    p = ZKProxy(zk.hostport)
    try:
        p.delay(int(f * T * 1000 / 2))
        a = aset.new("a", zk_hostport=p.hostport, session_timeout="%dms" % (T * 1000),
                     tick_time=tick)
        a.wait_for(lambda s: s["session"]["state"] == "connected", 60,
                   what="a connects through the slow link")
        w = {}
        watch(a, 8 * T, w)
        out.update(w)
        out["lasting"] = w["terms"] == 1 and w["ended"] == 0
        out["rtt"] = renewal_rtt(a)
    except Exception as e:  # noqa: BLE001
        out["error"] = str(e)[:200]
    finally:
        aset.cleanup()
        p.close()


def wave(fn, zk, fractions, T, tick):
    """One trial per fraction, all at once (each its own election)."""
    results = {f: {} for f in fractions}
    threads = [threading.Thread(target=fn, args=(zk, f, T, tick, results[f]), daemon=True)
               for f in fractions]
    for t in threads:
        t.start()
        time.sleep(0.2)
    for t in threads:
        t.join(120)
    return results


def fmt_rtt(rtt, T):
    if not rtt or rtt[0] is None:
        return "no renewal"
    return "renewal RTT mean %.3f T, max %.3f T" % (rtt[0] / 1000 / T, rtt[1] / 1000 / T)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", default="2s", help="session timeout T (default 2s)")
    ap.add_argument("--tick-time", default="200ms",
                    help="zookeeper.tick_time of the agents, or 'none' (default 200ms)")
    ap.add_argument("--fractions", default=FRACTIONS,
                    help="round trips to try, as fractions of T")
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    T = seconds(args.timeout)
    tick = "" if args.tick_time == "none" else args.tick_time
    fractions = [float(x) for x in args.fractions.split(",")]
    bl.header("a slow ZooKeeper: T = %s, zookeeper.tick_time %s" % (
        args.timeout, tick or "unset"))
    zk = ZooKeeperServer(tick_ms=200)
    zk.start()
    held_all = {f: True for f in fractions}
    lasted_all = {f: True for f in fractions}
    try:
        for run in range(args.runs):
            print("\nrun %d: hold (the delay set under a leader, watched for 8 T)" % (run + 1))
            for f, r in sorted(wave(hold_trial, zk, fractions, T, tick).items()):
                if "error" in r:
                    held_all[f] = False
                    print("  RTT %.2f T: error: %s" % (f, r["error"]))
                    continue
                held_all[f] &= r["held"]
                print("  RTT %.2f T: %s (terms %d, ended %d; %s)%s" % (
                    f, "held" if r["held"] else "LOST", r["terms"], r["ended"],
                    fmt_rtt(r["rtt"], T),
                    "; reason: %s" % r["reason"] if r["reason"] else ""))
            print("\nrun %d: start (the agent starts behind the delay, watched for 8 T)"
                  % (run + 1))
            for f, r in sorted(wave(start_trial, zk, fractions, T, tick).items()):
                if "error" in r:
                    lasted_all[f] = False
                    print("  RTT %.2f T: error: %s" % (f, r["error"]))
                    continue
                lasted_all[f] &= r["lasting"]
                what = ("led, lasting" if r["lasting"] else
                        "FLAPPED" if r["terms"] > 0 else "did not lead")
                print("  RTT %.2f T: %s (terms %d, ended %d; %s)%s" % (
                    f, what, r["terms"], r["ended"], fmt_rtt(r["rtt"], T),
                    "; reason: %s" % r["reason"] if r["reason"] else ""))
    finally:
        zk.cleanup()

    def largest(ok):
        best = None
        for f in sorted(fractions):
            if not ok[f]:
                break
            best = f
        return best
    h, s = largest(held_all), largest(lasted_all)
    print("\nlargest round trip at which a leader held its term: %s" %
          ("%.2f T" % h if h is not None else "none tried"))
    print("largest round trip at which an agent started a lasting term: %s" %
          ("%.2f T" % s if s is not None else "none tried"))
    return 0


if __name__ == "__main__":
    raise SystemExit(bl.run_main(main))
