# SPDX-License-Identifier: MIT
"""The lease against ZooKeeper's own session expiry, in its worst case
(issue 9, item 2; doc/design.md rule 2 and "The lease").

Only the ZooKeeper leader expires sessions, and it hears of a client of a
follower only through that follower's touch reports (every tickTime/2). So
the worst case for the lease is: the leading agent A talks to one follower F
only; F is stopped right after relaying one of A's renewals, and never
reports it; the successor B talks to the ZooKeeper leader, which expires A's
session from the touch before that renewal. A's lease must run out before B
can lead.

On a 3-server ensemble of its own with a small tick (50 ms, so that the
round-up of the expiry to a tick does not hide the margin) and T = 400 ms,
each trial takes a fresh election path: A (servers: F only) leads, B
(servers: the ZooKeeper leader only) follows; as soon as A logs a new
acknowledged renewal (`audit: lease epoch=E until=MS`, debug level) F is
SIGSTOPped. Both agents' /v1/leader are probed every millisecond. The gap is
B's first `is_leader: true` (the request's send time) minus A's last one (the
answer's arrival): a lower bound of the real gap. With the agent's audit
lines it is also computed exactly: B's term start minus the end of A's term
(its end line or its lease deadline). Then F is resumed and the quorum
heals. Every trial's gap must be positive; min and median are printed.

    ZKELECT_LEASE_TRIALS=N   number of trials (default 15)

tests/bench/lease_margin.py runs the same trials and prints the figure
against T/6.
"""

import os
import statistics
import time

import pytest

from zkharness import (AUDIT_RE, AgentSet, LeaderProbe, SLOW, log_messages, new_election_path,
                       parse_audit, poll, read_log_lines)
from zkensemble import Ensemble

TICK_MS = 50
SESSION = "400ms"
T_MS = 400


def small_tick_ensemble(tick_ms=TICK_MS):
    """A 3-server Ensemble (zkensemble.py) whose servers run with `tick_ms`;
    initLimit and syncLimit keep the same length in seconds (4 s, 2 s)."""
    ens = Ensemble(3)
    limits = {"tickTime": tick_ms, "initLimit": -(-4000 // tick_ms),
              "syncLimit": -(-2000 // tick_ms)}
    for s in ens.servers:
        with open(s.cfg) as f:
            lines = f.read().splitlines()
        out = []
        for line in lines:
            key = line.split("=", 1)[0]
            out.append("%s=%d" % (key, limits[key]) if key in limits else line)
        with open(s.cfg, "w") as f:
            f.write("\n".join(out) + "\n")
    return ens


class LeaseLines:
    """Follows an agent's log: the acknowledged renewals it logs from now on."""

    def __init__(self, agent):
        self.path = agent.log_path
        try:
            self.off = os.path.getsize(self.path)
        except OSError:
            self.off = 0

    def new_lease(self):
        """The `until` (ms) of the first `audit: lease` line logged since the
        last call, or None."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.off)
                data = f.read()
        except OSError:
            return None
        cut = data.rfind(b"\n") + 1
        self.off += cut
        for kind, msg in log_messages(data[:cut].decode(errors="replace").splitlines()):
            m = AUDIT_RE.match(msg) if kind == "msg" else None
            if m and m.group(1) == "lease":
                return msg
        return None


def wait_renewal_then(agent, action, timeout=5.0, trigger="log"):
    """Call action() as soon as `agent` has a renewal acknowledged.

    trigger "log": a new `audit: lease` line in its log (read every 0.5 ms).
    trigger "status": its /v1/status lease_remaining_ms jumps up between two
    polls (for agent builds without audit lines; slower to react).
    Returns what was seen."""
    deadline = time.monotonic() + timeout * SLOW
    if trigger == "log":
        tail = LeaseLines(agent)
        while time.monotonic() < deadline:
            line = tail.new_lease()
            if line is not None:
                action()
                return line
            time.sleep(0.0005)
        raise AssertionError(
            "%s logged no 'audit: lease epoch=E until=MS' line within %.1fs while leading: "
            "this agent build does not log its acknowledged renewals (debug level), so "
            "the worst case cannot be set up" % (agent.id, timeout * SLOW))
    prev = None
    while time.monotonic() < deadline:
        st = agent.status(timeout=0.5)
        rem = st.get("lease_remaining_ms") if st else None
        if rem is not None and prev is not None and rem > prev + 5:
            action()
            return "lease_remaining_ms %d -> %d" % (prev, rem)
        prev = rem
    raise AssertionError("%s: no renewal seen in /v1/status within %.1fs"
                         % (agent.id, timeout * SLOW))


def lease_trial(ens, trigger="log"):
    """One worst-case trial. Returns a dict: gap_ms (probes), audit_gap_ms (or
    None), and what was seen."""
    zl = ens.ensure_healthy()
    followers = [s for s in ens.servers if s is not zl]
    F = followers[0]
    assert F.mode() == "follower" and zl.mode() == "leader", ens.modes()
    aset = AgentSet(F.hostport, new_election_path())
    pa = pb = None
    try:
        A = aset.new("A", session_timeout=SESSION, zk_hostport=F.hostport)
        A.wait_for(lambda s: s["is_leader"] is True, 30, what="A to lead")
        B = aset.new("B", session_timeout=SESSION, zk_hostport=zl.hostport)
        B.wait_for(lambda s: s["role"] == "follower" and (s["leader"] or {}).get("id") == "A",
                   30, what="B to follow A")
        st = A.wait_for(lambda s: s["candidates"] == 2, 30, what="A to count 2")
        assert st["session"]["timeout_ms"] == T_MS, st["session"]
        pa, pb = LeaderProbe(A).start(), LeaderProbe(B).start()
        poll(lambda: pa.leading(), 5, interval=0.005, what="a probe of A answered 200")
        t_stop = [None]

        def stop_f():
            F.pause()
            t_stop[0] = time.monotonic()
        seen = wait_renewal_then(A, stop_f, trigger=trigger)
        poll(lambda: pb.leading(), 10 + T_MS / 1000.0, interval=0.005,
             what="B to lead once A's session expired")
        t_b = pb.leading()[0][0]
        # keep probing A a while: a late true answer from A would show here
        poll(lambda: time.monotonic() > t_b + 2 * T_MS / 1000.0, 5, interval=0.01,
             what="the probing window")
        pa.stop()
        pb.stop()
        a_last = pa.leading()[-1]
        b_first = pb.leading()[0]
        fig = {"gap_ms": (b_first[0] - a_last[1]) * 1000.0,
               "a_last_after_stop_ms": (a_last[1] - t_stop[0]) * 1000.0,
               "b_first_after_stop_ms": (b_first[0] - t_stop[0]) * 1000.0,
               "seen": seen, "audit_gap_ms": None}
        ia, _, _ = parse_audit(read_log_lines(A.log_path), "A")
        ib, _, _ = parse_audit(read_log_lines(B.log_path), "B")
        if ia and ib:
            before = [i for i in ia if i.start < ib[0].start]
            if before:
                fig["audit_gap_ms"] = (ib[0].start - before[-1].end) / 1000.0
        return fig
    finally:
        for p in (pa, pb):
            if p is not None:
                p.stop()
        F.resume()
        aset.cleanup()
        ens.wait_quorum(90, expect=3, what="the quorum healed after the trial")


def summarize(figs):
    gaps = [f["gap_ms"] for f in figs]
    audit = [f["audit_gap_ms"] for f in figs if f["audit_gap_ms"] is not None]
    out = {"trials": len(figs), "min_ms": min(gaps), "median_ms": statistics.median(gaps),
           "max_ms": max(gaps)}
    if audit:
        out.update(audit_trials=len(audit), audit_min_ms=min(audit),
                   audit_median_ms=statistics.median(audit))
    return out


def format_summary(sm):
    s = ("%d trials, tickTime %d ms, T %d ms: gap (probes) min %.1f ms, median %.1f ms, "
         "max %.1f ms" % (sm["trials"], TICK_MS, T_MS, sm["min_ms"], sm["median_ms"],
                          sm["max_ms"]))
    if "audit_min_ms" in sm:
        s += "; gap (audit, exact) min %.1f ms, median %.1f ms over %d trials" % (
            sm["audit_min_ms"], sm["audit_median_ms"], sm["audit_trials"])
    return s


@pytest.fixture(scope="module")
def small_ensemble():
    ens = small_tick_ensemble()
    try:
        ens.start()
    except Exception:
        ens.cleanup()
        raise
    try:
        yield ens
    finally:
        ens.cleanup()


def test_lease_ends_before_expiry_through_a_stopped_follower(small_ensemble):
    n = int(os.environ.get("ZKELECT_LEASE_TRIALS", "15"))
    figs = []
    for i in range(n):
        f = lease_trial(small_ensemble)
        print("trial %d: gap %.1f ms (audit %s); A's last true %.1f ms and B's first true "
              "%.1f ms after F stopped" % (
                  i + 1, f["gap_ms"],
                  "%.1f ms" % f["audit_gap_ms"] if f["audit_gap_ms"] is not None else "n/a",
                  f["a_last_after_stop_ms"], f["b_first_after_stop_ms"]))
        figs.append(f)
    sm = summarize(figs)
    print("[lease-margin] " + format_summary(sm))
    bad = [(i + 1, f) for i, f in enumerate(figs)
           if f["gap_ms"] <= 0 or (f["audit_gap_ms"] is not None and f["audit_gap_ms"] <= 0)]
    assert not bad, "two leaders at once in %d of %d trials: %s; %s" % (
        len(bad), n, bad, format_summary(sm))
