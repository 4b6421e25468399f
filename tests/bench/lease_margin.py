#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: the lease's margin in its worst case, per tick ratio and through an
observer (issues 9 and 20).

The trials of tests/integration/test_lease_margin.py (read its docstring), on
an ensemble of its own per case, T = 400 ms:

  t8      tickTime 50 ms = T/8; A's only server is a follower F
  t2      tickTime 200 ms = T/2; the same
  obs-t8  tickTime 50 ms; A's only server is an observer syncing from F's
          ObserverMaster (observerMasterPort on every server)
  obs-t2  the same with tickTime 200 ms
  t3, obs-t3  tickTime 133 ms (about T/3, the largest tick the first lease assumed)

In every case F is SIGSTOPped right after A's renewal is acknowledged, and
the successor B talks to the ZooKeeper leader only. The gap is B's first
is_leader true minus A's last one (probes every 1 ms; and, when the agent
logs audit lines, exactly from them). This prints, per case, the trials, the
min and median gap in ms and as fractions of T (and against T/6, the margin
doc/design.md, "The lease", keeps), and the trials with two leaders at once (see
verdict() in the test: the audit lines, or the probes surely), and those
where only the probes' lower bound was <= 0 ("doubtful").

    tests/bench/lease_margin.py [--trials 30] [--cases t8,t2,obs-t8,obs-t2]
                                [--trigger log|status] [--tell-tick]

The default runs every case. --tell-tick writes `zookeeper.tick_time` (the
servers' real tick) into the agents' configuration.

--trigger status detects the acknowledged renewal from /v1/status
(lease_remaining_ms jumping up) instead of the `audit: lease` log line, for
agent builds that do not log audit lines; it reacts a little later.
ZKELECTD=path runs another agent binary (benchlib snapshots it).
"""

import argparse
import sys

import benchlib as bl
import test_lease_margin as lm


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=30, help="trials per case")
    ap.add_argument("--cases", default=",".join(lm.CASES),
                    help="comma-separated, of: %s" % ", ".join(lm.CASES))
    ap.add_argument("--trigger", choices=("log", "status"), default="log")
    ap.add_argument("--tell-tick", action="store_true",
                    help="configure the agents with the servers' tickTime "
                         "(zookeeper.tick_time, agents that know the option)")
    args = ap.parse_args()
    if not 1 <= args.trials <= 1000:
        ap.error("--trials must be 1..1000")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    for c in cases:
        if c not in lm.CASES:
            ap.error("no case %r (cases: %s)" % (c, ", ".join(lm.CASES)))
    bl.header("lease margin: worst case through a stopped ZooKeeper follower, T %d ms, "
              "%d trials per case (%s), trigger %s%s" % (
                  lm.T_MS, args.trials, ", ".join(cases), args.trigger,
                  ", agents told the tick" if args.tell_tick else ""))
    sums = []
    for name in cases:
        case = lm.CASES[name]
        print()
        print("--- case %s: %s, T %d ms" % (name, case.label, lm.T_MS))
        sys.stdout.flush()
        ens = lm.case_ensemble(case)
        figs = []
        try:
            ens.start()
            for i in range(args.trials):
                f = lm.lease_trial(ens, trigger=args.trigger, case=case,
                                   tell_tick=args.tell_tick)
                figs.append(f)
                print(lm.format_trial(i + 1, f))
                sys.stdout.flush()
        finally:
            ens.cleanup()
        sm = lm.summarize(figs, case)
        sums.append(sm)
        print(lm.format_summary(sm))
        sys.stdout.flush()
    t = float(lm.T_MS)
    print()
    print("summary, T = %d ms (T/6 = %.1f ms = 0.167 T); gaps from the probes (audit, exact, "
          "in brackets)" % (lm.T_MS, t / 6))
    print("%-7s %-30s %6s %7s %16s %16s %9s" % ("case", "tick", "trials", "refused",
                                                 "min gap / T", "median gap / T", "overlaps"))
    for sm in sums:
        if "min_ms" in sm:
            mn = "%.3f" % (sm["min_ms"] / t)
            md = "%.3f" % (sm["median_ms"] / t)
            if "audit_min_ms" in sm:
                mn += " (%.3f)" % (sm["audit_min_ms"] / t)
                md += " (%.3f)" % (sm["audit_median_ms"] / t)
        else:
            mn = md = "n/a"
        print("%-7s %-30s %6d %7d %16s %16s %5d of %d%s" % (
            sm["case"], sm["label"], sm["trials"], sm["refused"], mn, md, sm["overlaps"],
            sm["led"], " (%d doubtful)" % sm["doubtful"] if sm["doubtful"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
