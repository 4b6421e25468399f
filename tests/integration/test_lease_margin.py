# SPDX-License-Identifier: MIT
"""The lease against ZooKeeper's own session expiry, in its worst case
(issue 9, item 2; issue 20; doc/design.md rule 2 and "The lease").

Only the ZooKeeper leader expires sessions, and it hears of a client of a
follower only through that follower's touch reports (every tickTime/2). So
the worst case for the lease is: the leading agent A talks to one follower F
only; F is stopped right after relaying one of A's renewals, and never
reports it; the successor B talks to the ZooKeeper leader, which expires A's
session from the touch before that renewal. A's lease must run out before B
can lead.

Each case runs on a 3-server ensemble of its own, T = 400 ms:

  t8      tickTime 50 ms = T/8 (the case of issue 9: a small tick, so that
          the round-up of the expiry to a tick does not hide the margin)
  t2      tickTime 200 ms = T/2 (the largest tick ZooKeeper allows for
          this T: minSessionTimeout defaults to 2 ticks)
  obs-t8  tickTime 50 ms, plus one observer O, and observerMasterPort on
          every server: O syncs from a follower F's ObserverMaster, not from
          the ZooKeeper leader. A talks to O only; O reports A's touches to
          F, F to the leader, so the leader's view lags by up to two report
          intervals, and stopping F loses both.
  obs-t2  the same with tickTime 200 ms
  t3, obs-t3  tickTime 133 ms, about T/3, the largest tick the lease's
          design assumes (benchmark only)

Each trial takes a fresh election path: A (servers: F, or O) leads, B
(servers: the ZooKeeper leader only) follows; as soon as A logs a new
acknowledged renewal (`audit: lease epoch=E until=MS`, debug level) F (in
the observer cases: the follower O syncs from, read from O's log) is
SIGSTOPped. Both agents' /v1/leader are probed every millisecond. The gap is
B's first `is_leader: true` (the request's send time) minus A's last one (the
answer's arrival): a lower bound of the real gap. With the agent's audit
lines it is also computed exactly: B's term start minus the end of A's term
(its end line or its lease deadline). Then F is resumed and the quorum
heals. No trial may show B's first true before A's last: exactly from the
audit lines, or surely from the probes (B's answer arrived before A's
request was sent); a trial where only the probes' lower bound is <= 0 and
the audit lines say no is printed as doubtful (see verdict()). Min and
median are printed.

An agent that will not lead through an observer passes the observer cases
if A never answers `is_leader: true`, alone (for 15 s, or until its status
says for 1 s that its server, an observer, bars it: `session.server` and
`reason`), then beside B until B leads or for 10 T (B need not lead if A's
node stays first in line); such a trial is counted as "refused", no gap.

    ZKELECT_LEASE_TRIALS=N       trials per case (default 3)
    ZKELECT_LEASE_CASES=t8,t2    the cases to run (default t8,t2,obs-t8,obs-t2)

tests/bench/lease_margin.py runs the same trials, more of them, and prints
the figures against T.
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


class Case:
    """One worst-case setup: the ensemble's tick, and whether the leading
    agent's only server is an observer (syncing from a follower's
    ObserverMaster)."""

    def __init__(self, name, tick_ms, observer):
        self.name = name
        self.tick_ms = tick_ms
        self.observer = observer

    @property
    def label(self):
        return "%stick %d ms = T/%.3g" % ("observer, " if self.observer else "", self.tick_ms,
                                        T_MS / float(self.tick_ms))

    def __repr__(self):
        return self.name


CASES = {c.name: c for c in (Case("t8", 50, False), Case("t2", 200, False),
                             Case("obs-t8", 50, True), Case("obs-t2", 200, True),
                             Case("t3", 133, False), Case("obs-t3", 133, True))}
TEST_CASES = ("t8", "t2", "obs-t8", "obs-t2")


def case_ensemble(case):
    """The Ensemble (zkensemble.py, not started) of a case: 3 voters, and in
    the observer cases one observer and an ObserverMaster on every
    follower; initLimit and syncLimit stay 4 s and 2 s whatever the tick."""
    return Ensemble(3, observers=1 if case.observer else 0, tick_ms=case.tick_ms,
                    observer_master=case.observer)


def small_tick_ensemble(tick_ms=TICK_MS):
    """A 3-server Ensemble whose servers run with `tick_ms` (the case t8)."""
    return Ensemble(3, tick_ms=tick_ms)


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


def _relay_of(ens, case, zl):
    """(the server A talks to, the follower F to stop): F itself, or in the
    observer cases the observer and the follower whose ObserverMaster it
    syncs from now."""
    if not case.observer:
        F = [s for s in ens.voters if s is not zl][0]
        assert F.mode() == "follower" and zl.mode() == "leader", ens.modes()
        return F, F
    O = ens.observers[0]
    sid = poll(lambda: O.learner_master(), 10, what="the observer's learner master in its log")
    F = [s for s in ens.servers if s.myid == sid][0]
    modes = ens.modes()
    assert modes[F.myid] == "follower" and modes[O.myid] == "observer" and \
        zl.mode() == "leader", "observer %d syncs from %d: %s" % (O.myid, sid, modes)
    return O, F


def _barred_by_observer(st):
    """A status that says the agent will not lead because its server is an
    observer (agents that report session.server and reason)."""
    return bool(st) and st.get("is_leader") is not True and \
        (st.get("session") or {}).get("server") == "observer" and bool(st.get("reason"))


def lease_trial(ens, trigger="log", case=None, tell_tick=False):
    """One worst-case trial. Returns a dict: gap_ms (probes), audit_gap_ms (or
    None), refused (A never led through an observer), and what was seen.
    tell_tick: configure the agents with the servers' tickTime
    (`zookeeper.tick_time`; agents that know the option)."""
    case = case or CASES["t8"]
    zl = ens.ensure_healthy()
    server, F = _relay_of(ens, case, zl)
    aset = AgentSet(server.hostport, new_election_path())
    zk_yaml = "  tick_time: %dms\n" % case.tick_ms if tell_tick else ""
    pa = pb = None
    try:
        A = aset.new("A", session_timeout=SESSION, zk_hostport=server.hostport,
                     zk_yaml=zk_yaml, tick_time="")
        if case.observer:
            st = _wait_lead_or_refusal(A)
            if st is None or st.get("is_leader") is not True:
                return _refused_trial(aset, A, zl, F, server, zk_yaml)
        else:
            A.wait_for(lambda s: s["is_leader"] is True, 30, what="A to lead")
        B = aset.new("B", session_timeout=SESSION, zk_hostport=zl.hostport, zk_yaml=zk_yaml, tick_time="")
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
               "sure_gap_ms": (b_first[1] - a_last[0]) * 1000.0,
               "a_last_rtt_ms": (a_last[1] - a_last[0]) * 1000.0,
               "b_first_rtt_ms": (b_first[1] - b_first[0]) * 1000.0,
               "a_last_after_stop_ms": (a_last[1] - t_stop[0]) * 1000.0,
               "b_first_after_stop_ms": (b_first[0] - t_stop[0]) * 1000.0,
               "seen": seen, "audit_gap_ms": None, "refused": False,
               "stopped": F.myid, "via": server.myid}
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
        ens.wait_quorum(90, expect=len(ens.servers), what="the quorum healed after the trial")


def _wait_lead_or_refusal(A, timeout=15):
    """A's status once it leads, or says (for 1 s on end) that the observer
    it is on bars it from leading; None if neither within `timeout` s."""
    since = [None]

    def probe():
        st = A.status(timeout=0.5)
        if st and st.get("is_leader") is True:
            return st
        if _barred_by_observer(st):
            since[0] = since[0] or time.monotonic()
            if time.monotonic() - since[0] >= 1.0:
                return st
        else:
            since[0] = None
        return None
    try:
        return poll(probe, timeout, interval=0.02, what="A to lead or to say why not")
    except AssertionError:
        return None


def _refused_trial(aset, A, zl, F, server, zk_yaml=""):
    """A did not lead through the observer (within 15 s, or it said why).
    B (on the ZooKeeper leader) joins; A must never answer true while both
    are probed for 10 T or until B leads (B may not: A's node, first in
    line, may still stand)."""
    st_a = A.status(timeout=1.0)
    pa = LeaderProbe(A).start()
    b_led = False
    try:
        B = aset.new("B", session_timeout=SESSION, zk_hostport=zl.hostport, zk_yaml=zk_yaml, tick_time="")
        pb = LeaderProbe(B).start()
        try:
            t_end = time.monotonic() + 10 * T_MS / 1000.0 * SLOW
            poll(lambda: pb.leading() or time.monotonic() > t_end, 20, interval=0.005,
                 what="B to lead or 10 T to pass")
            b_led = bool(pb.leading())
            t0 = time.monotonic()
            poll(lambda: time.monotonic() > t0 + 2 * T_MS / 1000.0, 5, interval=0.01,
                 what="the probing window")
        finally:
            pb.stop()
    finally:
        pa.stop()
    assert not pa.leading(), "A answered is_leader true %d times after not leading for " \
        "15 s" % len(pa.leading())
    return {"gap_ms": None, "audit_gap_ms": None, "refused": True, "sure_gap_ms": None,
            "b_led": b_led, "a_status": st_a, "stopped": None, "via": server.myid,
            "a_last_after_stop_ms": None, "b_first_after_stop_ms": None, "seen": None}


def verdict(f):
    """'ok', 'overlap' or 'doubtful' for one trial.

    A probe's answer was true at some instant between its request's send
    and its answer's arrival. So B's first true *surely* preceded A's last
    if B's answer arrived before A's request was sent (sure_gap_ms <= 0),
    and *may* have if B's request was sent before A's answer arrived
    (gap_ms <= 0). The agents' audit lines (CLOCK_BOOTTIME, one machine) give
    the order exactly. A trial overlaps if the audit says so, or the probes
    say so surely, or (without audit lines) they say it may; it is doubtful
    if only the probes' lower bound is <= 0 (a probe thread that stalled
    between taking its send time and sending, on a loaded machine: its
    round trip shows it)."""
    if f.get("refused"):
        return "ok"
    if f["sure_gap_ms"] <= 0:
        return "overlap"
    if f["audit_gap_ms"] is not None:
        if f["audit_gap_ms"] <= 0:
            return "overlap"
        return "doubtful" if f["gap_ms"] <= 0 else "ok"
    return "overlap" if f["gap_ms"] <= 0 else "ok"


def summarize(figs, case=None):
    case = case or CASES["t8"]
    led = [f for f in figs if not f.get("refused")]
    gaps = [f["gap_ms"] for f in led]
    audit = [f["audit_gap_ms"] for f in led if f["audit_gap_ms"] is not None]
    out = {"case": case.name, "label": case.label, "tick_ms": case.tick_ms,
           "trials": len(figs), "refused": len(figs) - len(led), "led": len(led),
           "overlaps": sum(1 for f in led if verdict(f) == "overlap"),
           "doubtful": sum(1 for f in led if verdict(f) == "doubtful")}
    if gaps:
        out.update(min_ms=min(gaps), median_ms=statistics.median(gaps), max_ms=max(gaps))
    if audit:
        out.update(audit_trials=len(audit), audit_min_ms=min(audit),
                   audit_median_ms=statistics.median(audit))
    return out


def format_summary(sm):
    s = "%s: %d trials, tickTime %d ms, T %d ms" % (sm["case"], sm["trials"], sm["tick_ms"],
                                                    T_MS)
    if sm["refused"]:
        s += ", %d refused to lead through the observer" % sm["refused"]
    if "min_ms" in sm:
        s += (": gap (probes) min %.1f ms (%.3f T), median %.1f ms (%.3f T), max %.1f ms" % (
            sm["min_ms"], sm["min_ms"] / T_MS, sm["median_ms"], sm["median_ms"] / T_MS,
            sm["max_ms"]))
    if "audit_min_ms" in sm:
        s += "; gap (audit, exact) min %.1f ms (%.3f T), median %.1f ms (%.3f T) over %d" % (
            sm["audit_min_ms"], sm["audit_min_ms"] / T_MS, sm["audit_median_ms"],
            sm["audit_median_ms"] / T_MS, sm["audit_trials"])
    s += "; two leaders at once in %d of %d" % (sm["overlaps"], sm["led"])
    if sm["doubtful"]:
        s += " (%d doubtful: only the probes' lower bound <= 0, the audit lines say no)" % (
            sm["doubtful"])
    return s


def format_trial(i, f):
    if f.get("refused"):
        return "trial %2d: A did not lead through observer zk%d (status %s); A never answered " \
               "true; B %s" % (i, f["via"], repr(f.get("a_status"))[:400],
                               "led" if f.get("b_led") else "did not lead within 10 T")
    v = verdict(f)
    return ("trial %2d: gap %6.1f ms (audit %s); after zk%d stopped: A's last true %5.1f ms "
            "(rtt %.1f), B's first true %5.1f ms (rtt %.1f)%s" % (
                i, f["gap_ms"], "%.1f ms" % f["audit_gap_ms"]
                if f["audit_gap_ms"] is not None else "n/a", f["stopped"],
                f["a_last_after_stop_ms"], f["a_last_rtt_ms"], f["b_first_after_stop_ms"],
                f["b_first_rtt_ms"], "" if v == "ok" else "  ** %s **" % v.upper()))


def _test_cases():
    names = os.environ.get("ZKELECT_LEASE_CASES")
    names = [n.strip() for n in names.split(",") if n.strip()] if names else TEST_CASES
    for n in names:
        if n not in CASES:
            raise ValueError("ZKELECT_LEASE_CASES: no case %r (cases: %s)"
                             % (n, ", ".join(CASES)))
    return names


@pytest.fixture(scope="module", params=_test_cases())
def case_ens(request):
    case = CASES[request.param]
    ens = case_ensemble(case)
    try:
        ens.start()
    except Exception:
        ens.cleanup()
        raise
    try:
        yield case, ens
    finally:
        ens.cleanup()


def test_lease_ends_before_expiry_through_a_stopped_follower(case_ens):
    case, ens = case_ens
    n = int(os.environ.get("ZKELECT_LEASE_TRIALS", "3"))
    figs = []
    for i in range(n):
        f = lease_trial(ens, case=case)
        print("[%s] %s" % (case.name, format_trial(i + 1, f)))
        figs.append(f)
    sm = summarize(figs, case)
    print("[lease-margin] " + format_summary(sm))
    bad = [(i + 1, f) for i, f in enumerate(figs) if verdict(f) == "overlap"]
    assert not bad, "%s: two leaders at once in %d of %d trials: %s; %s" % (
        case.label, len(bad), n, bad, format_summary(sm))
