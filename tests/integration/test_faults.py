# SPDX-License-Identifier: MIT
"""Fault scenarios (GitHub issue "Prove it under faults", doc/design.md "Election rules" and "Tests and benchmarks").

Real ZooKeeper (standalone, and a 3-server ensemble from zkensemble.py), real
zkelectd processes, a loopback TCP proxy (zkproxy.py) to cut, stall or
corrupt one agent's link to ZooKeeper. Over each run:

  * the StatusRecorder samples every agent's /v1/status; check_single_leader
    proves there were never two leaders at once and that epochs only grow;
  * a ZKChecker thread reads ZooKeeper directly: every claim it sees on the
    election node (data = id, mzxid = epoch), and every contender node's
    `version` (a contender must never be written after its creation);
  * at the end every agent is stopped with SIGTERM and the election path must
    become empty (no orphan contender nodes);
  * every agent's leadership intervals, from its own `audit:` debug log lines
    (CLOCK_BOOTTIME), must not overlap another agent's, and every is_leader
    true answer the recorder saw must lie inside one (zkharness.check_audit;
    ZKELECT_AUDIT=off turns this off, loudly).

Every wait is a poll with a deadline; the only sleeps hold a fault for a
duration. Figures measured are printed (run with -s to see them live; they
are also in the captured output of a failing test).
"""

import json
import os
import re
import socket
import threading
import time

import pytest

from zkharness import (AgentSet, Observer, SLOW, StatusRecorder, audit_agents, audit_enabled,
                       format_audit_figures, poll, settled)
from zkensemble import ensemble  # noqa: F401 - the module-scoped fixture

# --------------------------------------------------------------------------
# helpers


class ZKChecker:
    """Reads ZooKeeper directly, in a thread of its own, for the whole test.

    claims:   {mzxid: id} of every state of the election node it saw (a data
              watch plus polling, so one claim per term is not missed)
    written:  {(name, version)} of contender nodes seen with version > 0
    """

    def __init__(self, hosts, path, interval=0.03, timeout=10.0):
        from kazoo.client import KazooClient
        self.path = path
        self.zk = KazooClient(hosts=hosts, timeout=timeout)
        self.zk.start(timeout=30)
        self.claims = {}
        self.written = set()
        self.polls = 0
        self._interval = interval
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self.zk.DataWatch(self.path, self._on_data)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _on_data(self, data, stat, *args):
        if stat is not None and data:
            self._record(data, stat)

    def _record(self, data, stat):
        with self._lock:
            self.claims.setdefault(stat.mzxid, data.decode(errors="replace"))

    def _run(self):
        from kazoo.exceptions import NoNodeError
        while not self._stop.is_set():
            try:
                data, stat = self.zk.get(self.path)
                if data:
                    self._record(data, stat)
                for n in self.zk.get_children(self.path):
                    try:
                        st = self.zk.exists("%s/%s" % (self.path, n))
                    except NoNodeError:
                        continue
                    if st is not None and st.version > 0:
                        with self._lock:
                            self.written.add((n, st.version))
                self.polls += 1
            except Exception:  # noqa: BLE001 - no node yet, or ZooKeeper faulted
                pass
            self._stop.wait(self._interval)

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001
            pass

    def epoch_problems(self, leader_samples):
        """Every epoch an agent answered is_leader with must be the mzxid of
        the election node when that agent's id was its data (the claim)."""
        out = []
        with self._lock:
            claims = dict(self.claims)
        for e in sorted({(s.agent, s.epoch) for s in leader_samples}, key=lambda t: t[1]):
            agent, epoch = e
            if claims.get(epoch) != agent:
                out.append("%s led with epoch %s, but the election node had mzxid %s "
                           "with data %r (claims seen: %s)"
                           % (agent, epoch, epoch, claims.get(epoch),
                              sorted(claims.items())[-8:]))
        return out


def leader_among(pool, timeout, what, min_epoch=None):
    """Poll /v1/status until exactly one of `pool` answers is_leader (with an
    epoch above min_epoch); returns (agent, status, time seen)."""
    def probe():
        got = []
        for a in pool:
            s = a.status(timeout=0.5)
            if s and s["is_leader"] is True and (min_epoch is None or s["epoch"] > min_epoch):
                got.append((a, s))
        return got[0] if len(got) == 1 else None
    a, s = poll(probe, timeout, interval=0.01, what=what)
    return a, s, time.monotonic()



def uuid_of(name):
    return name.split("-latch-")[0]


def one_node_each(observer, path, pool, timeout=40):
    """Poll until the election has exactly one node per agent of `pool` and
    nothing else; returns {id: (name, data, stat)}."""
    want = sorted(a.id for a in pool)
    last = {}

    def probe():
        cs = observer.contenders(path)
        last["cs"] = [(c[0], c[1], hex(c[2].ephemeralOwner)) for c in cs]
        if sorted(c[1] for c in cs) != want:
            return None
        return {c[1]: c for c in cs}
    try:
        return poll(probe, timeout, what="exactly one contender node per agent %s" % want)
    except AssertionError as e:
        raise AssertionError("%s; nodes: %s; statuses: %s" % (
            e, last.get("cs"), {a.id: a.status() for a in pool})) from None


def check_claim_matches(observer, path, lead, ls):
    data, stat = observer.election_node(path)
    assert data == lead.id, "election node names %r, %s leads" % (data, lead.id)
    assert stat.mzxid == ls["epoch"], \
        "%s reports epoch %d, election node mzxid is %d" % (lead.id, ls["epoch"], stat.mzxid)


def verify_run(recorder, checker, min_samples=100):
    """The whole-run checks: single leader, epochs only grow, every epoch is a
    claim write, no contender node ever written. Returns figures."""
    # A fast scenario may be over before the recorder sampled much: keep it
    # sampling the settled end state until it has enough to mean something.
    poll(lambda: len(recorder.samples) >= min_samples, 20,
         what="the recorder to take %d samples" % min_samples)
    recorder.stop()
    checker.stop()
    ls = recorder.leader_samples()
    v = recorder.violations()
    assert not v, "leadership violations:\n" + "\n".join(v)
    ep = checker.epoch_problems(ls)
    assert not ep, "epochs that are not claim writes:\n" + "\n".join(ep)
    assert not checker.written, "contender nodes written after creation " \
        "(version > 0): %s" % sorted(checker.written)
    n = len(recorder.samples)
    assert n >= min_samples, "recorder took only %d samples" % n
    assert checker.polls >= 3, "the ZooKeeper checker barely ran (%d polls)" % checker.polls
    fig = {"samples": n, "leader_samples": len(ls), "claims_seen": len(checker.claims),
           "checker_polls": checker.polls, "violations": 0}
    fig.update(verify_audit(recorder.agent_set.agents, recorder.samples, "run"))
    return fig


def verify_audit(agents, samples=None, when="end"):
    """The exact check (issue 9, item 4): every agent's leadership intervals
    from its audit log lines; no two agents' intervals overlap, and (with
    `samples`) every is_leader true answer the recorder saw lies inside one.
    Fails if an agent led without logging audit lines. ZKELECT_AUDIT=off
    turns it off (said loudly). Returns figures."""
    if not audit_enabled():
        print("[audit/%s] AUDIT CHECK OFF (ZKELECT_AUDIT=off): leadership intervals not "
              "checked" % when)
        return {"audit": "off"}
    problems, fig = audit_agents(agents, samples)
    print("[audit/%s] %s" % (when, format_audit_figures(fig)))
    assert not problems, "leadership audit (%s):\n%s" % (when, "\n".join(problems))
    return {"audit_terms": fig["terms"], "audit_min_gap_ms": fig["min_gap_ms"]}


def finish(aset, observer, path, timeout=40, audit=True):
    """Rule 10 / doc/design.md "Tests and benchmarks": every agent stops gracefully (exit 0); the election path
    must then have no children (poll: expiry of earlier sessions may lag).
    With `audit`, the complete logs then pass the leadership audit."""
    for a in aset.agents:
        if a.running():
            rc = a.stop()
            assert rc == 0, "%s exited %s on SIGTERM" % (a.id, rc)
    if audit:
        verify_audit(aset.agents)
    t0 = time.monotonic()
    from kazoo.exceptions import NoNodeError

    def empty():
        try:
            return observer.zk.get_children(path) == []
        except NoNodeError:
            return True
    try:
        poll(empty, timeout, interval=0.05, what="election path %s to have no children" % path)
    except AssertionError as e:
        raise AssertionError("%s; orphan nodes: %r" % (
            e, [(c[0], c[1], hex(c[2].ephemeralOwner)) for c in observer.contenders(path)])) \
            from None
    return time.monotonic() - t0


class LogCursor:
    """Reads what an agent logs from now on."""

    def __init__(self, agent):
        self.path = agent.log_path
        try:
            self.offset = os.path.getsize(self.path)
        except OSError:
            self.offset = 0

    def text(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def find(self, pattern):
        m = re.search(pattern, self.text())
        return m.group(0) if m else None


def report(name, **fig):
    print("[%s] %s" % (name, ", ".join("%s=%s" % (k, ("%.3f" % v) if isinstance(v, float)
                                                   else v) for k, v in fig.items())))


def parked_status(agent, timeout=60.0):
    """Send GET /v1/status now (e.g. to a stopped agent: the kernel queues it)
    and collect the answer in a thread. Returns (thread, box)."""
    box = {}
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(agent.socket)
    s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")

    def reader():
        try:
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            box["t"] = time.monotonic()
            head, _, body = data.partition(b"\r\n\r\n")
            box["code"] = int(head.split()[1])
            box["json"] = json.loads(body.decode())
        except Exception as e:  # noqa: BLE001
            box["e"] = e
        finally:
            s.close()
    th = threading.Thread(target=reader, daemon=True)
    th.start()
    return th, box


# --------------------------------------------------------------------------
# fixtures


@pytest.fixture
def checker(zk_hostport, election):
    c = ZKChecker(zk_hostport, election)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def ens(ensemble):  # noqa: F811
    """The module's ensemble, healthy (a full quorum) at the start of a test."""
    ensemble.ensure_healthy()
    yield ensemble
    ensemble.ensure_healthy()


@pytest.fixture
def ens_agents(ens, election, request):
    aset = AgentSet(ens.hostports, election)
    aset.logs_in_report(request)
    try:
        yield aset
    finally:
        aset.cleanup()


@pytest.fixture
def ens_observer(ens):
    obs = Observer(ens.hostports)
    try:
        yield obs
    finally:
        obs.close()


@pytest.fixture
def ens_checker(ens, election):
    # A short session: when its server is stopped it moves on quickly.
    c = ZKChecker(ens.hostports, election, timeout=3.0)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def ens_recorder(ens_agents):
    rec = StatusRecorder(ens_agents)
    try:
        yield rec
    finally:
        rec.stop()


def start_pool(aset, n, session_timeout="4s", servers=None):
    """Start n agents. The first one leads (the election path then exists)
    before the others start: agents racing to create the path expose a
    separate defect that test_g_claim_watch_after_parent_race isolates."""
    pool = []
    for i in range(n):
        kw = {"session_timeout": session_timeout}
        if servers is not None:
            kw["zk_hostport"] = servers[i % len(servers)]
        a = aset.new("a%d" % (i + 1), **kw)
        if i == 0:
            a.wait_for(lambda s: s["is_leader"] is True, 30, what="the first agent to lead")
        pool.append(a)
    return pool


# --------------------------------------------------------------------------
# a. leader agent SIGSTOPped past its lease

@pytest.mark.parametrize("case,timeout,hold", [
    # stopped past its lease (2/3 T) but not its session (T): it wakes still
    # owning the lowest node and must start a new term with a new epoch.
    ("past_lease", "9s", 6.5),
    # stopped past its session: a successor leads; the old one follows.
    ("past_session", "2s", 5.0),
])
def test_a_paused_leader(agents, observer, election, recorder, checker, case, timeout, hold):
    checker.start()
    recorder.start()
    pool = start_pool(agents, 3, session_timeout=timeout)
    lead, ls, _ = settled(pool)
    old_epoch = ls["epoch"]
    check_claim_matches(observer, election, lead, ls)
    old_node = observer.nodes_of(election, lead.id)
    assert len(old_node) == 1
    old_name, _, old_stat = old_node[0]
    others = [a for a in pool if a is not lead]

    t_pause = time.monotonic()
    lead.pause()
    # A request that reaches the stopped agent waits in its socket backlog.
    th, box = parked_status(lead)
    t_succ = None
    if case == "past_session":
        succ, s, t_succ = leader_among(others, 30, "a successor while the leader is stopped",
                                       min_epoch=old_epoch)
    remaining = t_pause + hold - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)        # the fault's duration, not a synchronisation
    t_resume = time.monotonic()
    lead.resume()

    th.join(30)
    assert "e" not in box, "parked request failed: %r" % box.get("e")
    parked = box["json"]
    # Rule 2: woken past its lease, the first answer must not be the old term.
    assert not (parked["is_leader"] and parked["epoch"] == old_epoch), \
        "woken leader answered a queued request with its old term: %r" % parked
    if parked["is_leader"]:
        assert parked["epoch"] > old_epoch, parked

    lead2, ls2, st2 = settled(pool, what="a settled election after the pause")
    assert ls2["epoch"] > old_epoch, "epoch did not grow: %d -> %d" % (old_epoch, ls2["epoch"])
    check_claim_matches(observer, election, lead2, ls2)
    after = observer.nodes_of(election, lead.id)
    assert len(after) == 1, "nodes of %s: %r" % (lead.id, [n[0] for n in after])
    survived = after[0][0] == old_name and after[0][2].ephemeralOwner == old_stat.ephemeralOwner
    if case == "past_session":
        assert not survived, "session outlived a %.1fs stop with T=%s" % (hold, timeout)
        assert lead2 is not lead and lead2 is succ
        assert st2[lead.id]["role"] == "follower"
        assert uuid_of(after[0][0]) != uuid_of(old_name), "rejoin needs a new uuid (rule 8)"
    elif survived:
        # Same session, same (lowest) node: the same agent, a new term.
        assert lead2 is lead, "%s leads although %s still owns the lowest node" \
            % (lead2.id, lead.id)
    one_node_each(observer, election, pool)

    figs = verify_run(recorder, checker)
    stale = [x for x in recorder.leader_samples()
             if x.agent == lead.id and x.epoch == old_epoch and x.t_start >= t_resume]
    assert not stale, "stale is_leader answers after resume: %r" % stale[:5]
    t_new = min([x.t_end for x in recorder.leader_samples() if x.epoch == ls2["epoch"]]
                or [float("nan")])
    report("a/" + case, stopped_s=t_resume - t_pause, session_survived=survived,
           successor_after_s=(t_succ - t_pause) if t_succ else -1.0,
           new_term_rel_resume_s=t_new - t_resume,
           old_epoch=hex(old_epoch), new_epoch=hex(ls2["epoch"]),
           parked_answer="%s/%s" % (parked["role"], parked["epoch"]),
           stale_answers=len(stale), **figs)
    report("a/" + case + "/cleanup", empty_after_s=finish(agents, observer, election))


# --------------------------------------------------------------------------
# b. partition between one agent and ZooKeeper (the proxy blackholes)

def test_b_partition_shorter_than_session(agents, observer, election, recorder, checker,
                                          proxies):
    checker.start()
    recorder.start()
    p = proxies()
    a1 = agents.new("a1", zk_hostport=p.hostport, session_timeout="4s")
    s = a1.wait_for(lambda s: s["is_leader"] is True, 30, what="a1 leads alone")
    a2 = agents.new("a2", session_timeout="4s")
    lead, ls, _ = settled([a1, a2])
    assert lead is a1
    e1 = ls["epoch"]
    T = s["session"]["timeout_ms"] / 1000.0
    (name, _, stat), = observer.nodes_of(election, "a1")

    t0 = time.monotonic()
    p.blackhole()
    # Rule 1/2: within 2/3 T (lease, or the client's receive timeout) a1 must
    # say unknown while the partition still holds; the session (T) survives.
    seen = None
    while time.monotonic() - t0 < T * 0.9:
        st = a1.status(timeout=0.5)
        if st is not None and st["role"] == "unknown" and st["is_leader"] is False:
            seen = time.monotonic()
            break
        time.sleep(0.02)
    assert seen is not None, "a1 still %r %.2fs into a partition (T=%.1fs): it must " \
        "report unknown once its lease (2/3 T) lapses" % (st, time.monotonic() - t0, T)
    hold_until = t0 + 1.5
    if time.monotonic() < hold_until:
        time.sleep(hold_until - time.monotonic())   # the fault's duration
    t_heal = time.monotonic()
    p.heal()
    assert t_heal - t0 < T, "partition lasted %.2fs >= T; the test is void" % (t_heal - t0)

    s = a1.wait_for(lambda s: s["is_leader"] is True and s["epoch"] > e1, 30,
                    what="a1 leads again with a new epoch")
    t_back = time.monotonic()
    (name2, _, stat2), = observer.nodes_of(election, "a1")
    assert name2 == name and stat2.ephemeralOwner == stat.ephemeralOwner, \
        "session or node changed: %s/%x -> %s/%x" % (name, stat.ephemeralOwner, name2,
                                                     stat2.ephemeralOwner)
    lead, ls, _ = settled([a1, a2])
    assert lead is a1 and ls["epoch"] > e1
    check_claim_matches(observer, election, a1, ls)
    figs = verify_run(recorder, checker)
    assert not [x for x in recorder.leader_samples() if x.agent == "a2"], "a2 led"
    late = [x for x in recorder.leader_samples()
            if x.agent == "a1" and x.epoch == e1 and x.t_start >= seen]
    assert not late, "a1 answered its old term after saying unknown: %r" % late[:3]
    report("b/short", T_s=T, unknown_after_s=seen - t0, partition_s=t_heal - t0,
           leads_again_after_heal_s=t_back - t_heal, old_epoch=hex(e1),
           new_epoch=hex(ls["epoch"]), stale_answers=0, proxy=dict(p.stats), **figs)
    report("b/short/cleanup", empty_after_s=finish(agents, observer, election))


def test_b_partition_past_session_timeout(agents, observer, election, recorder, checker,
                                          proxies):
    checker.start()
    recorder.start()
    p = proxies()
    a1 = agents.new("a1", zk_hostport=p.hostport, session_timeout="4s")
    a1.wait_for(lambda s: s["is_leader"] is True, 30, what="a1 leads alone")
    a2 = agents.new("a2", session_timeout="4s")
    lead, ls, _ = settled([a1, a2])
    assert lead is a1
    e1 = ls["epoch"]
    (name, _, stat), = observer.nodes_of(election, "a1")

    t0 = time.monotonic()
    p.blackhole()
    a1.wait_for(lambda s: s["role"] == "unknown", 10, what="a1 unknown in the partition")
    t_unknown = time.monotonic()
    poll(lambda: all(c[2].ephemeralOwner != stat.ephemeralOwner
                     for c in observer.contenders(election)), 30,
         what="a1's session to expire and its node to go")
    t_expired = time.monotonic()
    succ, s2, t_succ = leader_among([a2], 30, "a2 to take over", min_epoch=e1)
    # Keep the partition a little longer, then heal: a1 learns of the expiry.
    time.sleep(0.5)
    t_heal = time.monotonic()
    p.heal()
    s = a1.wait_for(lambda s: s["role"] == "follower" and s["session"]["state"] == "connected"
                    and s["leader"] == {"id": "a2", "epoch": s2["epoch"], "value": None}, 40,
                    what="a1 rejoins as a follower of a2")
    t_rejoin = time.monotonic()
    assert s["is_leader"] is False and s["epoch"] is None
    got = one_node_each(observer, election, [a1, a2])
    name2, _, stat2 = got["a1"]
    assert uuid_of(name2) != uuid_of(name), "rejoin after expiry needs a new uuid (rule 8)"
    assert stat2.ephemeralOwner not in (0, stat.ephemeralOwner)
    lead, ls, _ = settled([a1, a2])
    assert lead is a2 and ls["epoch"] == s2["epoch"] > e1
    check_claim_matches(observer, election, a2, ls)
    figs = verify_run(recorder, checker)
    report("b/expiry", unknown_after_s=t_unknown - t0, node_expired_after_s=t_expired - t0,
           takeover_after_s=t_succ - t0, rejoined_after_heal_s=t_rejoin - t_heal,
           old_epoch=hex(e1), new_epoch=hex(ls["epoch"]), stale_answers=0, **figs)
    report("b/expiry/cleanup", empty_after_s=finish(agents, observer, election))


def test_b_slow_link_delay(agents, observer, election, recorder, checker, proxies):
    """A slow link (every chunk 300 ms late) to the leader: round trips take
    ~600 ms, far under the lease; it keeps leading without a double leader,
    and its answers stay honest when the link gets worse than the lease."""
    checker.start()
    recorder.start()
    p = proxies()
    a1 = agents.new("a1", zk_hostport=p.hostport, session_timeout="4s")
    a1.wait_for(lambda s: s["is_leader"] is True, 30, what="a1 leads alone")
    a2 = agents.new("a2", session_timeout="4s")
    lead, ls, _ = settled([a1, a2])
    assert lead is a1
    p.delay(300)
    t0 = time.monotonic()
    time.sleep(4.0)     # hold the slow link over several renewals
    s = a1.status()
    figs_mid = s["is_leader"], s["lease_remaining_ms"]
    # 2 s each way: a renewal's round trip (4 s) exceeds the lease (2.67 s).
    p.delay(2000)
    a1.wait_for(lambda s: s["is_leader"] is False, 10, what="a1 to stop leading on a 4 s RTT")
    t_lost = time.monotonic()
    p.heal()
    lead, ls2, _ = settled([a1, a2], timeout=60)
    assert ls2["epoch"] > ls["epoch"]
    figs = verify_run(recorder, checker)
    report("b/delay", leading_at_300ms=figs_mid[0], lease_left_ms_at_300ms=figs_mid[1],
           lost_after_s=t_lost - t0, final_leader=lead.id, stale_answers=0,
           proxy=dict(p.stats), **figs)
    assert figs_mid[0] is True, "a1 lost leadership on a 600 ms round trip"
    report("b/delay/cleanup", empty_after_s=finish(agents, observer, election))


# --------------------------------------------------------------------------
# c. agents spread over an ensemble

def ens_pool(ens_agents, ens, n=3, session_timeout="4s"):
    k = len(ens.servers)
    orders = [[(i + j) % k for j in range(k)] for i in range(n)]
    return start_pool(ens_agents, n, session_timeout=session_timeout,
                      servers=[ens.connect_string(o) for o in orders])


@pytest.mark.parametrize("target", ["leader_agents_server", "zk_follower"])
def test_c_zk_server_paused(ens, ens_agents, ens_observer, election, ens_recorder,
                            ens_checker, target):
    """SIGSTOP one ZooKeeper server that agents are connected to (the leader
    agent's own server, or a ZK follower serving at least one agent), hold it
    past the agents' receive timeout, resume it. Followers on it must go
    unknown (rule 1), reconnect elsewhere within their session, and the
    election must end with one leader. The leader rides the disconnect
    through within its lease (rule 1): it keeps its epoch if its client
    reaches another server in time, and otherwise leads again only with a
    new epoch (rule 3)."""
    ens_checker.start()
    ens_recorder.start()
    pool = ens_pool(ens_agents, ens)
    lead, ls, _ = settled(pool)
    e0 = ls["epoch"]
    got0 = one_node_each(ens_observer, election, pool)
    owners = {aid: c[2].ephemeralOwner for aid, c in got0.items()}
    where = {}

    def locate():
        for aid, sid in owners.items():
            where[aid] = ens.server_of_session(sid)
        return all(where.values())
    poll(locate, 20, what="the server each agent's session is connected to")
    zk_leader = ens.leader()
    if target == "leader_agents_server":
        srv = where[lead.id]
    else:
        cands = [s for s in ens.servers if s is not zk_leader and s in where.values()]
        cands.sort(key=lambda s: s is not where[lead.id])    # prefer the leader agent's
        srv = cands[0] if cands else [s for s in ens.servers if s is not zk_leader][0]
    victims = [a for a in pool if where[a.id] is srv]
    if srv is zk_leader:
        victims = list(pool)          # followers drop their clients when the leader goes
    layout = "paused zk%d (zk leader: zk%s); agents on servers: %s" % (
        srv.myid, zk_leader.myid if zk_leader else "?",
        {aid: "zk%d" % w.myid for aid, w in where.items()})
    cursors = {a.id: LogCursor(a) for a in victims}
    t0 = time.monotonic()
    srv.pause()
    t_unknown = {}
    for a in victims:
        # The unknown spell of a follower that reconnects elsewhere can be a
        # few ms: too short for polling, so read the agent's log (rule 1).
        # The leader logs that it leads on through the disconnect instead.
        pattern = (r"connection lost while leading|role leader -> unknown \("
                   if a is lead else r"role \w+ -> unknown \(")
        try:
            poll(lambda: cursors[a.id].find(pattern), 20,
                 what="%s to log the loss of its server" % a.id)
            assert a.running()
        except AssertionError as e:
            raise AssertionError("%s\n%s; modes now %s" % (e, layout, ens.modes())) from None
        t_unknown[a.id] = round(time.monotonic() - t0, 3)
    new, s, t_new = leader_among(pool, 60, "a leader after the pause", min_epoch=e0 - 1)
    time.sleep(max(0.0, t0 + 3.0 - time.monotonic()))   # hold the fault >= 3 s
    srv.resume()
    ens.wait_quorum(90, expect=3, what="the resumed server back in the quorum")
    lead2, ls2, _ = settled(pool, timeout=60)
    if lead in victims:
        rode = lead2 is lead and ls2["epoch"] == e0
        if not rode:
            assert ls2["epoch"] > e0, "leadership after an unknown spell needs a new epoch"
        else:
            assert "role leader -> unknown" not in lead.log_text(), \
                "the leader kept its epoch after an unknown spell"
    else:
        assert lead2 is lead and ls2["epoch"] == e0, "an unaffected leader changed term"
    check_claim_matches(ens_observer, election, lead2, ls2)
    got = one_node_each(ens_observer, election, pool)
    same = {aid: got[aid][2].ephemeralOwner == owners[aid] for aid in got}
    if srv is not zk_leader:
        assert all(same.values()), "sessions must survive a paused follower server " \
            "(reconnect within T): %s" % same
    figs = verify_run(ens_recorder, ens_checker)
    report("c/pause-server/" + target,
           paused="zk%d%s" % (srv.myid, " (zk leader)" if srv is zk_leader else ""),
           agents_on_it=[a.id for a in victims if where[a.id] is srv],
           unknown_after_s=t_unknown, leader_after_s=t_new - t0, leader=new.id,
           sessions_kept=sum(same.values()),
           old_epoch=hex(e0), new_epoch=hex(ls2["epoch"]), stale_answers=0, **figs)
    report("c/pause-server/cleanup", empty_after_s=finish(ens_agents, ens_observer, election))


def test_c_zk_leader_killed(ens, ens_agents, ens_observer, election, ens_recorder,
                            ens_checker):
    ens_checker.start()
    ens_recorder.start()
    pool = ens_pool(ens_agents, ens)
    lead, ls, _ = settled(pool)
    e0 = ls["epoch"]
    zl = ens.leader()
    assert zl is not None
    t0 = time.monotonic()
    zl.kill()
    new_zl = ens.wait_quorum(60, expect=2, what="a new ZooKeeper leader among two")
    t_quorum = time.monotonic()
    # Followers drop their clients when they lose the ZK leader: every agent
    # is disconnected. The leading agent rides that through within its
    # lease (rule 1) and keeps its term if its client is back in time;
    # otherwise a new term needs a new epoch.
    new, s, t_new = leader_among(pool, 60, "a leader after the ZK leader died",
                                 min_epoch=e0 - 1)
    lead2, ls2, _ = settled(pool, timeout=60)
    assert ls2["epoch"] > e0 or (lead2 is lead and ls2["epoch"] == e0 and
                                 "role leader -> unknown" not in lead.log_text())
    check_claim_matches(ens_observer, election, lead2, ls2)
    one_node_each(ens_observer, election, pool)
    zl.start()
    ens.wait_quorum(90, expect=3, what="the killed server back in the quorum")
    lead3, ls3, _ = settled(pool, timeout=60)
    assert ls3["epoch"] >= ls2["epoch"]
    one_node_each(ens_observer, election, pool)
    figs = verify_run(ens_recorder, ens_checker)
    report("c/kill-zk-leader", killed="zk%d" % zl.myid, new_zk_leader="zk%d" % new_zl.myid,
           quorum_after_s=t_quorum - t0, agent_leader_after_s=t_new - t0,
           old_epoch=hex(e0), new_epoch=hex(ls2["epoch"]),
           zk_epoch_grew=(ls2["epoch"] >> 32) > (e0 >> 32), stale_answers=0, **figs)
    report("c/kill-zk-leader/cleanup", empty_after_s=finish(ens_agents, ens_observer, election))


def test_c_rolling_restart(ens, ens_agents, ens_observer, election, ens_recorder,
                           ens_checker):
    ens_checker.start()
    ens_recorder.start()
    pool = ens_pool(ens_agents, ens)
    lead, ls, _ = settled(pool)
    epochs = [ls["epoch"]]
    steps = []
    for srv in ens.servers:
        t0 = time.monotonic()
        srv.stop()
        ens.wait_quorum(60, expect=2, what="quorum without zk%d" % srv.myid)
        srv.start()
        ens.wait_quorum(90, expect=3, what="zk%d back in the quorum" % srv.myid)
        lead, ls, _ = settled(pool, timeout=60, what="one leader after restarting zk%d"
                             % srv.myid)
        assert ls["epoch"] >= epochs[-1]
        epochs.append(ls["epoch"])
        steps.append("zk%d:%.1fs" % (srv.myid, time.monotonic() - t0))
    check_claim_matches(ens_observer, election, lead, ls)
    got = one_node_each(ens_observer, election, pool)
    assert len({c[2].ephemeralOwner for c in got.values()}) == 3
    figs = verify_run(ens_recorder, ens_checker)
    report("c/rolling-restart", steps=steps, epochs=[hex(e) for e in epochs],
           leader=lead.id, stale_answers=0, **figs)
    report("c/rolling-restart/cleanup", empty_after_s=finish(ens_agents, ens_observer,
                                                              election))


# --------------------------------------------------------------------------
# d. lost create reply (rule 6)

def test_d_lost_create_reply(agents, observer, election, recorder, checker, proxies):
    observer.zk.ensure_path(election)   # so the first request is the create
    checker.start()
    recorder.start()
    p = proxies()
    # The agent's probe of its server passes: learning nothing of it
    # would (rightly) take the agent out of the queue, its node with it.
    p.spare_probes = True
    p.drop_replies(keep_handshake=True)
    a1 = agents.new("a1", zk_hostport=p.hostport, session_timeout="4s")
    first = poll(lambda: observer.nodes_of(election, "a1"), 30,
                 what="a1's create to reach ZooKeeper")
    assert len(first) == 1
    name, _, stat = first[0]
    t_created = time.monotonic()
    s = a1.status()
    assert s["is_leader"] is False, "a1 leads without having heard its create's reply: %r" % s
    time.sleep(1.0)     # the reply stays lost for a while
    p.heal()
    t_heal = time.monotonic()
    s = a1.wait_for(lambda s: s["is_leader"] is True, 30, what="a1 leads after healing")
    t_lead = time.monotonic()
    mine = observer.nodes_of(election, "a1")
    assert len(mine) == 1, "a1 leaked nodes: %r" % [m[0] for m in mine]
    # Same session: rule 6 finds the node by uuid and keeps it.
    assert mine[0][0] == name and mine[0][2].ephemeralOwner == stat.ephemeralOwner, \
        "a1 uses %s, not the node it created (%s)" % (mine[0][0], name)
    check_claim_matches(observer, election, a1, s)
    a2 = agents.new("a2", session_timeout="4s")
    settled([a1, a2])
    one_node_each(observer, election, [a1, a2])
    figs = verify_run(recorder, checker)
    report("d/lost-reply", leads_after_heal_s=t_lead - t_heal, held_s=t_heal - t_created,
           node=name, nodes_of_a1=1, proxy=dict(p.stats), **figs)
    report("d/lost-reply/cleanup", empty_after_s=finish(agents, observer, election))


def test_d_lost_create_reply_then_expiry(agents, observer, election, recorder, checker,
                                         proxies):
    observer.zk.ensure_path(election)
    checker.start()
    recorder.start()
    p = proxies()
    # The agent's probe of its server passes: learning nothing of it
    # would (rightly) take the agent out of the queue, its node with it.
    p.spare_probes = True
    p.drop_replies(keep_handshake=True)
    a1 = agents.new("a1", zk_hostport=p.hostport, session_timeout="4s")
    first = poll(lambda: observer.nodes_of(election, "a1"), 30,
                 what="a1's create to reach ZooKeeper")
    name, _, stat = first[0]
    # Now cut the link entirely until the session (and the orphan) expires.
    p.blackhole()
    t0 = time.monotonic()
    poll(lambda: not any(c[0] == name for c in observer.contenders(election)), 30,
         what="the orphan %s to expire with its session" % name)
    t_exp = time.monotonic()
    p.heal()
    s = a1.wait_for(lambda s: s["is_leader"] is True, 40, what="a1 leads after expiry")
    t_lead = time.monotonic()
    mine = observer.nodes_of(election, "a1")
    assert len(mine) == 1, "a1 leaked nodes: %r" % [m[0] for m in mine]
    assert uuid_of(mine[0][0]) != uuid_of(name), "new session must use a new uuid (rule 8)"
    assert mine[0][2].ephemeralOwner != stat.ephemeralOwner
    check_claim_matches(observer, election, a1, s)
    assert len(observer.contenders(election)) == 1
    figs = verify_run(recorder, checker)
    report("d/lost-reply-expiry", orphan_expired_after_s=t_exp - t0,
           leads_after_heal_s=t_lead - t_exp, nodes_of_a1=1, **figs)
    report("d/lost-reply-expiry/cleanup", empty_after_s=finish(agents, observer, election))


# --------------------------------------------------------------------------
# e. nodes deleted under the agents

def delete_atomically(zk, paths):
    """Delete several nodes in one multi (all at once, or none)."""
    t = zk.transaction()
    for p in paths:
        t.delete(p)
    res = t.commit()
    bad = [r for r in res if isinstance(r, Exception)]
    assert not bad, "multi delete failed: %r" % res


def test_e_contenders_deleted(agents, observer, election, recorder, checker):
    """Several non-leader nodes deleted at once: every agent must notice its
    node is gone and rejoin; the leader, untouched, keeps its term."""
    checker.start()
    recorder.start()
    pool = start_pool(agents, 5, session_timeout="4s")
    lead, ls, _ = settled(pool)
    one_node_each(observer, election, pool)
    order = observer.contenders(election)
    assert order[0][1] == lead.id
    victims = [order[1], order[3]]        # not the leader's; not adjacent
    t0 = time.monotonic()
    delete_atomically(observer.zk, ["%s/%s" % (election, v[0]) for v in victims])
    try:
        got = one_node_each(observer, election, pool, timeout=30)
    except AssertionError as e:
        st = {a.id: a.status() for a in pool}
        raise AssertionError(
            "after deleting %s (owners %s) at once: %s\nstatuses of the victims: %s"
            % ([v[0] for v in victims], [v[1] for v in victims], e,
               {v[1]: st[v[1]] for v in victims})) from None
    t_rejoined = time.monotonic()
    for v in victims:
        assert got[v[1]][0] != v[0] and uuid_of(got[v[1]][0]) != uuid_of(v[0])
    lead2, ls2, _ = settled(pool)
    assert lead2 is lead and ls2["epoch"] == ls["epoch"], "the untouched leader's term changed"
    figs = verify_run(recorder, checker)
    report("e/contenders-deleted", victims=[v[1] for v in victims],
           all_rejoined_after_s=t_rejoined - t0, stale_answers=0, **figs)
    report("e/contenders-deleted/cleanup", empty_after_s=finish(agents, observer, election))


def test_e_election_path_deleted(agents, observer, election, recorder, checker):
    """The whole election parent deleted (children and all, in one multi):
    the agents re-create it (rule 9) and rejoin; one leader, one node each."""
    checker.start()
    recorder.start()
    pool = start_pool(agents, 3, session_timeout="4s")
    lead, ls, _ = settled(pool)
    e0 = ls["epoch"]
    t0 = time.monotonic()
    kids = observer.zk.get_children(election)
    delete_atomically(observer.zk, ["%s/%s" % (election, k) for k in kids] + [election])
    # It steps down; it may also be first to rejoin and lead again within
    # one poll interval, under a new term: either proves the old one ended.
    lead.wait_for(lambda s: s["is_leader"] is False or s["epoch"] != e0, 10,
                  what="leader to step down")
    t_down = time.monotonic()
    lead2, ls2, _ = settled(pool, timeout=60)
    t_lead = time.monotonic()
    assert ls2["epoch"] > e0
    check_claim_matches(observer, election, lead2, ls2)
    got = one_node_each(observer, election, pool)
    assert not set(c[0] for c in got.values()) & set(kids), "an old node came back?"
    figs = verify_run(recorder, checker)
    report("e/path-deleted", leader_down_after_s=t_down - t0, new_leader_after_s=t_lead - t0,
           old_leader=lead.id, new_leader=lead2.id, old_epoch=hex(e0),
           new_epoch=hex(ls2["epoch"]), stale_answers=0, **figs)
    report("e/path-deleted/cleanup", empty_after_s=finish(agents, observer, election))


def test_e_leader_node_deleted(agents, observer, election, recorder, checker):
    """The leader's own node deleted by hand: it must stop answering
    is_leader at once (its watch on the lowest node), not when its lease
    lapses; the next in line leads with a higher epoch."""
    checker.start()
    recorder.start()
    pool = start_pool(agents, 3, session_timeout="9s")
    lead, ls, _ = settled(pool)
    e0 = ls["epoch"]
    (name, _, _), = observer.nodes_of(election, lead.id)
    order = observer.contenders(election)
    heir = [a for a in pool if a.id == order[1][1]][0]
    lease_left = lead.status()["lease_remaining_ms"]
    t0 = time.monotonic()
    observer.zk.delete("%s/%s" % (election, name))
    t_del = time.monotonic()
    poll(lambda: not lead.is_leader(timeout=0.5), 10, interval=0.005,
         what="%s to stop answering is_leader" % lead.id)
    t_down = time.monotonic()
    dt = t_down - t_del
    succ, s, t_succ = leader_among(pool, 30, "a successor", min_epoch=e0)
    assert succ is heir, "%s leads, %s was next in line" % (succ.id, heir.id)
    lead2, ls2, _ = settled(pool)
    assert lead2 is heir and ls2["epoch"] > e0
    check_claim_matches(observer, election, heir, ls2)
    one_node_each(observer, election, pool)
    figs = verify_run(recorder, checker)
    stale = [x for x in recorder.leader_samples()
             if x.agent == lead.id and x.epoch == e0 and x.t_start > t_down]
    report("e/leader-node-deleted", stepped_down_after_s=dt, lease_left_ms=lease_left,
           successor_after_s=t_succ - t0, old_epoch=hex(e0), new_epoch=hex(ls2["epoch"]),
           stale_answers=len(stale), **figs)
    assert not stale, stale[:3]
    assert dt < 1.0 * SLOW and dt * 1000 < lease_left / 2, \
        "leader stepped down %.3fs after its node was deleted (lease had %d ms): " \
        "it must notice the deletion, not wait for the lease" % (dt, lease_left)
    report("e/leader-node-deleted/cleanup", empty_after_s=finish(agents, observer, election))


# --------------------------------------------------------------------------
# f. kill -9 and restart under the same id (as a supervisor would)

@pytest.mark.parametrize("who", ["leader", "follower"])
def test_f_kill9_restart_same_id(agents, observer, election, recorder, checker, who):
    checker.start()
    recorder.start()
    pool = start_pool(agents, 3, session_timeout="4s")
    lead, ls, _ = settled(pool)
    e0 = ls["epoch"]
    order = observer.contenders(election)
    victim = lead if who == "leader" else [a for a in pool if a.id == order[-1][1]][0]
    (name, _, stat), = observer.nodes_of(election, victim.id)
    t0 = time.monotonic()
    victim.kill()
    victim.start()           # same id, same config, at once
    t_started = time.monotonic()
    poll(lambda: not any(c[0] == name for c in observer.contenders(election)), 30,
         what="the killed process's node %s to expire" % name)
    t_exp = time.monotonic()
    got = one_node_each(observer, election, pool)
    lead2, ls2, st2 = settled(pool)
    t_settled = time.monotonic()
    if who == "leader":
        assert lead2 is not victim, "the restarted agent leads; its old node was lower"
        assert ls2["epoch"] > e0
    else:
        assert lead2 is lead and ls2["epoch"] == e0
    assert st2[victim.id]["role"] == "follower"
    assert got[victim.id][2].ephemeralOwner != stat.ephemeralOwner
    assert uuid_of(got[victim.id][0]) != uuid_of(name)
    check_claim_matches(observer, election, lead2, ls2)
    figs = verify_run(recorder, checker)
    restarted_led = [x for x in recorder.leader_samples()
                     if x.agent == victim.id and x.t_start > t_started]
    assert not restarted_led, "the restarted %s led: %r" % (victim.id, restarted_led[:3])
    report("f/kill9-restart-" + who, old_node_expired_after_s=t_exp - t0,
           settled_after_s=t_settled - t0, leader=lead2.id, old_epoch=hex(e0),
           new_epoch=hex(ls2["epoch"]), stale_answers=0, **figs)
    report("f/kill9-restart-%s/cleanup" % who, empty_after_s=finish(agents, observer, election))


# --------------------------------------------------------------------------
# g. a follower's watch on the election node (its view of who leads)

def test_g_claim_watch_after_parent_race(agents, observer, election, proxies):
    """An agent reads the election node (to watch claims) before the path
    exists, and its create succeeds because another agent made the path in
    between. The proxy makes that interleaving certain: it forwards the
    agent's ConnectRequest and its first request (the claim read), holds
    the create, while a second agent creates the path and claims; then it
    lets the create through. The follower must still learn who leads: a
    claim read that found no node leaves no watch, so it has to read again
    once the path exists (doc/design.md "Followers and observers": followers read the
    election node; `leader` is null only between a leader's exit and the
    next claim)."""
    p = proxies()
    p.gate(2)
    x = agents.new("x", zk_hostport=p.hostport, session_timeout="10s")
    cur = LogCursor(x)
    cur.offset = 0
    poll(lambda: cur.find(r"read claim\s*:\s*no node"), 20,
         what="x's claim read to find no election node")
    t0 = time.monotonic()
    lead = agents.new("l", session_timeout="10s")
    lead.wait_for(lambda s: s["is_leader"] is True, 20, what="l leads")
    p.open_gate()
    x.wait_for(lambda s: s["role"] == "follower", 20, what="x follows")
    t_follow = time.monotonic()
    assert t_follow - t0 < 6.0, "held x's create too long (%.1fs): void" % (t_follow - t0)
    (xn, _, _), = observer.nodes_of(election, "x")
    ls = lead.status()
    try:
        x.wait_for(lambda s: s["leader"] == {"id": "l", "epoch": ls["epoch"], "value": None}, 15,
                   what="x to report l as leader")
    except AssertionError as e:
        raise AssertionError(
            "%s\nx's claim read found no node before l created the path; x never "
            "read the election node again, so it reports leader: null while l leads "
            "(x's log: %r)" % (e, [ln for ln in cur.text().splitlines()
                                if "claim" in ln or "creat" in ln or "list" in ln][-8:])) \
            from None
    report("g/claim-watch-race", x_node=xn, leader_epoch=hex(ls["epoch"]))
    report("g/claim-watch-race/cleanup", empty_after_s=finish(agents, observer, election))


# --------------------------------------------------------------------------
# a resign while the agent's own create is unresolved; watchers across reconnects

def test_resign_with_create_unresolved(agents, observer, election, proxies):
    """B's create reaches ZooKeeper but its reply is lost; B resigns (hold
    20 s) meanwhile. Once B is back on the same session, its node must be
    found by uuid and deleted: C, queued behind it, must lead as soon as A
    stops, and B must not lead at the end of its hold."""
    observer.zk.ensure_path(election)
    a = agents.new("a", session_timeout="3s")
    a.wait_for(lambda s: s["is_leader"] is True, 30, what="a to lead")
    p = proxies()
    p.drop_replies(keep_handshake=True)
    b = agents.new("b", zk_hostport=p.hostport, session_timeout="3s")
    poll(lambda: observer.nodes_of(election, "b"), 30, what="b's create to reach ZooKeeper")
    c = agents.new("c", session_timeout="3s")
    c.wait_for(lambda s: s["role"] == "follower" and s["position"] == 2, 30,
               what="c queued behind b")
    r = b.request("POST", "/v1/resign?hold=20s", timeout=5)
    assert r.status == 200, r.body
    p.heal()
    poll(lambda: not observer.nodes_of(election, "b"), 15,
         what="b's node, found by uuid, deleted after its resign")
    t0 = time.monotonic()
    assert a.stop() == 0
    c.wait_for(lambda s: s["is_leader"] is True, 10, what="c to lead once a stopped")
    took = time.monotonic() - t0
    s = b.status()
    assert s["is_leader"] is False and s["position"] == -1, s
    print("\nc led %.2f s after a stopped (b's hold: 20 s)" % took)



def test_watchers_do_not_pile_up(agents, observer, election, proxies):
    """100 reconnects within one session, then one change of the agent's
    own node: its watcher must fire once, not once per reconnect."""
    p = proxies()
    a = agents.new("a", zk_hostport=p.hostport, session_timeout="4s")
    a.wait_for(lambda s: s["is_leader"] is True, 30, what="a to lead")
    sid = None
    for m in re.finditer(r"connected, session 0x([0-9a-f]+)", a.log_text()):
        sid = m.group(1)
    def rss_kib():
        with open("/proc/%d/status" % a.proc.pid) as f:
            return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))
    rss_before = rss_kib()
    for i in range(100):
        n = a.log_text(limit=10 ** 8).count("(reconnected)")
        p.reset()
        p.passthrough()
        poll(lambda: a.log_text(limit=10 ** 8).count("(reconnected)") > n, 20,
             what="reconnect %d" % (i + 1))
    text = a.log_text(limit=10 ** 8)
    assert set(re.findall(r"connected, session 0x([0-9a-f]+)", text)) == {sid}, \
        "the session changed: the test must stay within one session"
    poll(lambda: a.status()["session"]["state"] == "connected", 10, what="a connected")
    mine = observer.nodes_of(election, "a")
    assert len(mine) == 1
    before = a.log_text(limit=10 ** 8).count("watch fired: own node watch")
    observer.zk.set("%s/%s" % (election, mine[0][0]), b"a")   # a test may write it
    poll(lambda: a.log_text(limit=10 ** 8).count("watch fired: own node watch") > before,
         10, what="a's own node watch to fire")
    # Whatever else is queued has arrived by the time a read answers.
    a.get("/v1/status")
    time.sleep(0.2 * SLOW)     # let any further callbacks of this one change land
    fired = a.log_text(limit=10 ** 8).count("watch fired: own node watch") - before
    print("\nafter 100 reconnects, one change of the own node fired %d watcher(s); "
          "VmRSS %d KiB before the reconnects, %d KiB after" % (fired, rss_before, rss_kib()))
    assert fired == 1, "%d watchers fired for one change after 100 reconnects" % fired
