# SPDX-License-Identifier: MIT
"""Integration tests of zkelectd against a real ZooKeeper server (doc/design.md "Tests and benchmarks").

Every wait is a poll with a deadline. The only deliberate pauses are fault
durations (how long a process stays SIGSTOPped), never synchronisation.
"""

import re
import signal
import subprocess
import time

from zkharness import (CONTENDER_RE, SLOW, ZKELECTD, ZooKeeperServer, free_port, poll,
                       settled)


# --------------------------------------------------------------------------
# helpers

def start_agents(agents, n, **kw):
    return [agents.new("a%d" % (i + 1), **kw) for i in range(n)]


def wait_leader_among(pool, timeout, what):
    """Poll /v1/leader of `pool` until exactly one answers 200; return
    (agent, time it was seen)."""
    def probe():
        ls = [a for a in pool if a.is_leader(timeout=0.5)]
        return ls[0] if len(ls) == 1 else None
    a = poll(probe, timeout, interval=0.01, what=what)
    return a, time.monotonic()


# --------------------------------------------------------------------------
# election

def test_three_agents_one_leader(agents, observer, election):
    pool = start_agents(agents, 3)
    lead, ls, st = settled(pool)
    epoch = ls["epoch"]

    # The election node names the leader; its mzxid is the epoch (the claim write).
    data, stat = observer.election_node(election)
    assert data == lead.id
    assert stat.mzxid == epoch, "epoch %d != election node mzxid %d" % (epoch, stat.mzxid)

    cs = observer.contenders(election)
    assert len(cs) == 3, [c[0] for c in cs]
    for name, d, s in cs:
        assert CONTENDER_RE.match(name), "contender node name %r" % name
        assert s.ephemeralOwner != 0, "%s is not ephemeral" % name
    assert sorted(c[1] for c in cs) == ["a1", "a2", "a3"]
    assert len({c[2].ephemeralOwner for c in cs}) == 3, "one session per agent"
    assert cs[0][1] == lead.id, "the lowest node's owner must be the leader"
    # Nobody ever writes a contender node after creating it (Curator compatibility).
    assert all(c[2].version == 0 for c in cs), [(c[0], c[2].version) for c in cs]
    for a in pool:
        assert st[a.id]["id"] == a.id
        assert st[a.id]["session"]["state"] == "connected"
        assert st[a.id]["session"]["timeout_ms"] > 0
    assert ls["lease_remaining_ms"] > 0
    # Every agent, the leader included, counts the three candidates.
    settled(pool, timeout=15, candidates=True)


def test_graceful_handover(agents, observer, election):
    pool = start_agents(agents, 3)
    lead, ls, _ = settled(pool)
    old_nodes = [c[0] for c in observer.nodes_of(election, lead.id)]
    assert len(old_nodes) == 1
    others = [a for a in pool if a is not lead]

    t0 = time.monotonic()
    lead.signal(signal.SIGTERM)
    succ, t1 = wait_leader_among(others, 20, "a successor after SIGTERM of the leader")
    print("graceful handover: %.1f ms (SIGTERM -> successor /v1/leader 200)"
          % ((t1 - t0) * 1000))
    rc = lead.proc.wait(15 * SLOW)
    assert rc == 0, "SIGTERM should exit 0, got %s" % rc
    s = succ.status()
    assert s["is_leader"] and s["epoch"] > ls["epoch"]
    names = [c[0] for c in observer.contenders(election)]
    assert old_nodes[0] not in names, "stopped leader's node still there"
    data, stat = observer.election_node(election)
    assert data == succ.id and stat.mzxid == s["epoch"]


def test_kill9_failover_within_session_timeout(agents, observer, election):
    pool = start_agents(agents, 3)
    lead, ls, _ = settled(pool)
    others = [a for a in pool if a is not lead]
    timeout_ms = min(others[0].status()["session"]["timeout_ms"],
                     others[1].status()["session"]["timeout_ms"])

    t0 = time.monotonic()
    lead.kill()
    succ, t1 = wait_leader_among(others, 30, "a successor after kill -9 of the leader")
    dt = t1 - t0
    print("crash failover: %.1f ms (negotiated session timeout %d ms)"
          % (dt * 1000, timeout_ms))
    assert dt <= timeout_ms / 1000.0 + 1.0 * SLOW, \
        "failover took %.2fs, session timeout %.2fs" % (dt, timeout_ms / 1000.0)
    s = succ.status()
    assert s["epoch"] > ls["epoch"]


def test_paused_leader_never_overlaps(agents, observer, election, recorder):
    """The seed scenario: the leader is SIGSTOPped past its lease and its
    session timeout; a successor takes over; the old leader wakes up and must
    never claim leadership with its old epoch."""
    recorder.start()
    pool = start_agents(agents, 3)
    lead, ls, _ = settled(pool)
    old_epoch = ls["epoch"]
    others = [a for a in pool if a is not lead]

    t_pause = time.monotonic()
    lead.pause()
    succ, t_succ = wait_leader_among(others, 20, "a successor while the leader is stopped")
    new_epoch = succ.status()["epoch"]
    assert new_epoch > old_epoch
    # Fault duration, not synchronisation: keep the old leader stopped ~5 s.
    remaining = t_pause + 5.0 - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)
    t_resume = time.monotonic()
    lead.resume()

    s = lead.wait_for(lambda s: s["role"] == "follower" and s["leader"] is not None
                      and s["leader"]["id"] == succ.id, 30,
                      what="woken old leader to follow %s" % succ.id)
    assert s["is_leader"] is False
    assert s["leader"]["epoch"] == new_epoch
    # One more settled view of all three, still under the recorder.
    lead2, ls2, _ = settled(pool)
    assert lead2 is succ and ls2["epoch"] == new_epoch
    recorder.stop()

    woke = [x for x in recorder.leader_samples()
            if x.agent == lead.id and x.t_end > t_resume]
    stale = [x for x in woke if x.epoch == old_epoch]
    assert not stale, "woken agent answered is_leader with its old epoch: %r" % stale[:5]
    v = recorder.violations()
    assert not v, "\n".join(v)
    n = len(recorder.samples)
    print("recorder: %d samples, %d leader answers; stopped %.1fs, successor after %.0f ms"
          % (n, len(recorder.leader_samples()), t_resume - t_pause, (t_succ - t_pause) * 1000))
    assert n > 100, "recorder took too few samples to mean anything"


def test_session_expiry_and_rejoin(agents, observer, election):
    pool = start_agents(agents, 3)
    lead, ls, _ = settled(pool)
    f = [a for a in pool if a is not lead][0]
    old = observer.nodes_of(election, f.id)
    assert len(old) == 1
    old_name, _, old_stat = old[0]
    old_owner = old_stat.ephemeralOwner
    timeout_ms = f.status()["session"]["timeout_ms"]

    t0 = time.monotonic()
    f.pause()
    # The server expires the stopped agent's session and removes its node.
    poll(lambda: all(c[2].ephemeralOwner != old_owner
                     for c in observer.contenders(election)),
         timeout_ms / 1000.0 + 10, what="expiry to remove %s" % old_name)
    print("session expired %.0f ms after SIGSTOP (timeout %d ms)"
          % ((time.monotonic() - t0) * 1000, timeout_ms))
    # The leader, which watches the queue, notices one candidate fewer.
    lead.wait_for(lambda s: s["candidates"] == 2, 10, what="leader counts 2 candidates")
    f.resume()

    s = f.wait_for(lambda s: s["role"] == "follower" and s["session"]["state"] == "connected"
                   and s["candidates"] == 3 and s["leader"] is not None
                   and s["leader"]["id"] == lead.id, 30,
                   what="rejoin as follower of %s" % lead.id)
    assert s["is_leader"] is False and s["epoch"] is None
    new = observer.nodes_of(election, f.id)
    assert len(new) == 1, "exactly one node for %s, got %r" % (f.id, [n[0] for n in new])
    new_name, _, new_stat = new[0]
    assert new_name != old_name
    assert new_name.split("-latch-")[0] != old_name.split("-latch-")[0], "rejoin needs a new uuid"
    assert new_stat.ephemeralOwner not in (0, old_owner)
    assert all(c[2].ephemeralOwner != old_owner for c in observer.contenders(election))
    # Leadership did not move: the leader's node was lower all along.
    lead2, ls2, _ = settled(pool)
    assert lead2 is lead and ls2["epoch"] == ls["epoch"]
    settled(pool, timeout=15, candidates=True)


def test_epochs_strictly_increase_over_ten_handovers(agents, observer, election, recorder):
    recorder.start()
    pool = start_agents(agents, 3)
    epochs = []
    for i in range(10):
        lead, ls, _ = settled(pool)
        e = ls["epoch"]
        data, stat = observer.election_node(election)
        assert data == lead.id and stat.mzxid == e, (i, data, stat.mzxid, e)
        if epochs:
            assert e > epochs[-1], "epoch %d after %d (round %d)" % (e, epochs[-1], i)
        epochs.append(e)
        rc = lead.stop()
        assert rc == 0, "%s exited %s on SIGTERM" % (lead.id, rc)
        lead.start()
    lead, ls, _ = settled(pool)
    assert ls["epoch"] > epochs[-1]
    epochs.append(ls["epoch"])
    print("epochs: %s" % [hex(e) for e in epochs])
    recorder.stop()
    v = recorder.violations()
    assert not v, "\n".join(v)


def test_zookeeper_down_at_start(agents, election):
    port = free_port()
    a = agents.new("a1", zk_hostport="127.0.0.1:%d" % port, start=False)
    a.start()
    s = a.wait_for(lambda s: s["session"]["state"] == "connecting", 20,
                   what="session state connecting")
    assert s["role"] == "unknown"
    assert s["is_leader"] is False
    assert s["epoch"] is None
    assert a.leader_code() == 503
    srv = ZooKeeperServer(port=port)
    try:
        srv.start()
        s = a.wait_for(lambda s: s["is_leader"] is True, 40,
                       what="leadership once ZooKeeper is up")
        assert s["role"] == "leader" and s["session"]["state"] == "connected"
        assert a.leader_code() == 200
    finally:
        a.kill()
        srv.cleanup()


def test_unreachable_zookeeper_is_logged_with_its_reason(agents):
    """Refused, or a name that does not resolve: the agent says why within a
    couple of seconds, at growing intervals, and keeps answering (unknown)."""
    a = agents.new("a1", zk_hostport="127.0.0.1:%d" % free_port(), log_level="info")
    poll(lambda: "not connected to" in a.log_text() and
         "Connection refused" in a.log_text(), 5, what="the refusal in a1's log")
    b = agents.new("b1", zk_hostport="nonexistent.invalid:2181", log_level="info")
    poll(lambda: "cannot resolve nonexistent.invalid" in b.log_text(), 5,
         what="the name that does not resolve in b1's log")
    for x in (a, b):
        s = x.status()
        assert s["role"] == "unknown" and s["session"]["state"] == "connecting", s
    # Not a line per attempt: a few lines over several seconds.
    t_end = time.monotonic() + 4
    poll(lambda: time.monotonic() >= t_end, 10, what="time to pass")
    n = a.log_text().count("not connected to")
    assert 2 <= n <= 4, "%d 'not connected' lines in ~5 s" % n


def test_value_travels_with_the_claim(agents, observer, election):
    """election.value: in the claim (the election node's data, "id\\nvalue"),
    in the leader's own status and in every follower's."""
    a = agents.new("a1", start=False)
    with open(a.config) as f:
        text = f.read()
    with open(a.config, "w") as f:
        f.write(text.replace("election:\n", "election:\n  value: \"http://10.0.0.1:8080\"\n",
                             1))
    a.start()
    s = a.wait_for(lambda s: s["is_leader"] is True, 20, what="a1 to lead")
    assert s["leader"] == {"id": "a1", "epoch": s["epoch"], "value": "http://10.0.0.1:8080"}
    data, stat = observer.election_node(election)
    assert data == "a1\nhttp://10.0.0.1:8080" and stat.mzxid == s["epoch"]
    b = agents.new("b1")
    sb = b.wait_for(lambda s: s["role"] == "follower" and s["leader"] is not None, 20,
                    what="b1 to report a1")
    assert sb["leader"] == s["leader"]
    assert sb["hold_remaining_ms"] == 0


def test_resigned_agent_reports_the_leader_and_its_hold(agents):
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"] is True, 20, what="a1 to lead")
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20, what="b1 to follow")
    r = a.request("POST", "/v1/resign?hold=30s", timeout=5)
    assert r.status == 200, r.body
    sb = b.wait_for(lambda s: s["is_leader"] is True, 20, what="b1 to lead")
    s = a.wait_for(lambda s: s["leader"] is not None and s["leader"]["id"] == "b1", 20,
                   what="a1, holding, to report b1")
    assert s["role"] == "follower" and s["position"] == -1
    assert 20000 < s["hold_remaining_ms"] <= 30000, s
    assert s["leader"]["epoch"] == sb["epoch"]


def test_graceful_stop_leaves_no_orphans(agents, observer, election):
    pool = start_agents(agents, 3)
    settled(pool)
    assert len(observer.contenders(election)) == 3
    for a in pool:
        rc = a.stop()
        assert rc == 0, "%s exited %s on SIGTERM" % (a.id, rc)
    left = observer.contenders(election)
    assert left == [], "orphan contender nodes: %r" % [(c[0], c[1]) for c in left]


# --------------------------------------------------------------------------
# local API


# --------------------------------------------------------------------------
# election paths at the length limit

def path_of(length):
    """An absolute path of exactly `length` bytes."""
    return "/zkelect/" + "p" * (length - len("/zkelect/"))



def test_long_election_path_refused(agents, tmp_path):
    cfg = tmp_path / "long.yaml"
    cfg.write_text("zookeeper:\n  servers: 127.0.0.1:2181\nelection:\n  path: %s\n"
                   % path_of(1001))
    r = subprocess.run([ZKELECTD, "-c", str(cfg), "--check-config"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 1, "a 1001-byte election path was accepted: %r" % (r,)
    assert re.search(r"long\.yaml:4:9: election\.path: longer than 966 bytes", r.stderr), \
        r.stderr



def test_longest_election_path_works(agents, observer, zk_hostport):
    """The longest path allowed: the node name fits whole, the agent leads,
    and it never creates a second node."""
    path = path_of(966)
    a = agents.new("a1", start=False)
    with open(a.config) as f:
        text = f.read()
    with open(a.config, "w") as f:
        f.write(text.replace("  path: %s\n" % agents.path, "  path: %s\n" % path))
    a.start()
    s = a.wait_for(lambda s: s["is_leader"] is True, 30, what="a1 to lead")
    got = observer.nodes_of(path, "a1")
    assert len(got) == 1 and re.search(r"-latch-\d{10}$", got[0][0]), got
    # Three more renewals' worth of time: still one node, still leading.
    t_end = time.monotonic() + 1.5
    poll(lambda: time.monotonic() >= t_end, 5, what="time to pass")
    assert len(observer.contenders(path)) == 1
    assert a.status()["epoch"] == s["epoch"]
