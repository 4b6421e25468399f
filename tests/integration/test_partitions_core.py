# SPDX-License-Identifier: MIT
"""Partitions, the core (doc/design.md "Partitions"): agents spread N
partition elections between them over one session each.

  - 3 agents x 12 partitions settle to 4 each; every partition has exactly
    one owner, seen through every agent's GET /v1/partitions, and its epoch
    is the mzxid of the claim node read from ZooKeeper;
  - an owner stopped with SIGTERM hands its partitions over, and only its
    partitions move;
  - an agent killed with kill -9: only its partitions move, after the
    session timeout;
  - throughout, no two agents ever answer is_leader true for one partition
    at the same instant (every agent polled continuously);
  - an agent whose session expired while it was frozen leaves no request
    of that session out.

The broader suite (zkelectctl, hooks, benchmarks) is elsewhere.
"""

import os
import re
import signal
import time

import pytest

import zkharness
from zkharness import SLOW, poll
from partharness import new_part_agent, wait_settled

N = 12
PARTS_YAML = "partitions:\n  count: %d\n" % N


def parts_doc(agent, timeout=1.0):
    try:
        r = agent.get("/v1/partitions", timeout=timeout)
    except OSError:
        return None
    if r.status != 200:
        return None
    return r.json()


def owners(agents):
    """{partition: [agent ids that answer is_leader]} over the agents, and
    the epochs they report; None if an agent did not answer."""
    seen = {str(p): [] for p in range(N)}
    epochs = {}
    for a in agents:
        doc = parts_doc(a)
        if doc is None:
            return None, None
        for e in doc["partitions"]:
            if e["is_leader"]:
                seen[e["name"]].append(a.id)
                epochs[e["name"]] = e["epoch"]
    return seen, epochs


def settled(agents, want):
    """Every partition has exactly one owner, the counts per agent are WANT
    (a sorted list), every agent agrees on the member count, and each leads
    exactly the partitions it is assigned."""
    seen, epochs = owners(agents)
    if seen is None:
        return None
    if any(len(v) != 1 for v in seen.values()):
        return None
    counts = {}
    for v in seen.values():
        counts[v[0]] = counts.get(v[0], 0) + 1
    if sorted(counts.values()) != want or len(counts) != len(want):
        return None
    for a in agents:
        doc = parts_doc(a)
        if doc is None or doc["members"] != len(agents):
            return None
        # Settled: what it leads is what it is assigned, and no more.
        if any(e["is_leader"] != e["assigned"] for e in doc["partitions"]):
            return None
    return {p: v[0] for p, v in seen.items()}, epochs


class OverlapWatch(zkharness.AgentPoller):
    """Polls every agent's /v1/partitions continuously and keeps, per
    partition, a zkharness.Sample for every entry that says is_leader; the
    samples of each partition then go through zkharness.check_single_leader
    (its docstring gives the argument: ordered answers must never show an
    epoch going back or two agents under one epoch)."""

    def __init__(self, agents):
        super().__init__(list(agents), 0.01, 0.5)
        self.agents = list(agents)
        self.samples = {}        # partition -> [Sample]
        self.rounds = 0

    def ask(self, agent):
        t0 = time.monotonic()
        doc = parts_doc(agent, timeout=0.5)
        t1 = time.monotonic()
        if doc is None:
            return
        with self._lock:
            self.rounds += 1
            for e in doc["partitions"]:
                if e["is_leader"]:
                    self.samples.setdefault(e["name"], []).append(
                        zkharness.Sample(agent.id, t0, t1, True, True,
                                         e["epoch"], e["role"]))

    def violations(self):
        assert self.rounds >= 2 * len(self.agents), \
            "the watch hardly polled (%d)" % self.rounds
        bad = []
        for p, ss in sorted(self.samples.items()):
            bad += ["partition %s: %s" % (p, v)
                    for v in zkharness.check_single_leader(ss)]
        return bad


@pytest.fixture
def observer(zk_hostport):
    o = zkharness.Observer(zk_hostport)
    yield o
    o.close()


def claim_epochs(observer, path):
    out = {}
    for p in range(N):
        data, stat = observer.election_node("%s/partitions/%d" % (path, p))
        out[str(p)] = (data.split("\n")[0], stat.mzxid)
    return out


def log_lines(agent, pattern):
    """(wall-clock seconds, match) for each line of AGENT's log matching
    PATTERN (its text format starts with an ISO 8601 UTC time, ms)."""
    import calendar
    out = []
    with open(agent.log_path, "rb") as f:
        for line in f.read().decode(errors="replace").splitlines():
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z .*?" + pattern, line)
            if m:
                t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
                out.append((t + int(m.group(2)) / 1000.0, m))
    return out


def handed_over(leaver, moved, by_id, owner, epochs, since, path):
    """How each partition in MOVED went from LEAVER to its new owner: handed
    over, not taken after the leaver's session expired. Says so from the
    logs: the leaver released its node of the partition (`election:
    releasing PATH/partitions/P/...`) after SINCE (time.time() when it was
    told to leave), and the new owner gained it (`partition P: gained
    (..., epoch E`, E the epoch it answers under) no earlier than that
    release; and the leaver did not wait out its bound for successors (`no
    successor queued in time`). The new owner may have been named by the
    release or have claimed at the deletion of the leaver's node, which
    raced with reading the claim: both are a handover. Returns the
    problems."""
    bad = []
    for p in sorted(moved, key=int):
        rel = [t for t, _ in log_lines(leaver, r"election: releasing %s/partitions/%s/"
                                       % (re.escape(path), re.escape(p))) if t >= since - 0.001]
        gain = [(t, m.group(1)) for t, m in log_lines(
            by_id[owner[p]], r"partition %s: gained \(([^,]*), epoch %d " % (re.escape(p),
                                                                            epochs[p]))]
        if not rel:
            bad.append("partition %s: %s never released it" % (p, leaver.id))
        elif not gain:
            bad.append("partition %s: %s has no line for gaining it under epoch %d"
                       % (p, owner[p], epochs[p]))
        elif gain[-1][0] < rel[-1]:
            bad.append("partition %s: %s gained it (%s) before %s released it"
                       % (p, owner[p], gain[-1][1], leaver.id))
    if log_lines(leaver, r"no successor queued in time"):
        bad.append("%s waited out its bound for successors" % leaver.id)
    return bad


def assert_handed_over(leaver, moved, by_id, owner, epochs, since, path):
    """handed_over() finds no problem, once the logs caught up: an agent
    writes its log from a thread of its own, so a line can reach the file
    just after the state it tells of is answered."""
    bad = []

    def clean():
        bad[:] = handed_over(leaver, moved, by_id, owner, epochs, since, path)
        return not bad
    try:
        poll(clean, 10, what="the handovers in the logs")
    except AssertionError:
        raise AssertionError(bad) from None


def start3(agents):
    return [agents.new("a%d" % i, extra_yaml=PARTS_YAML) for i in range(3)]


def test_three_agents_settle_and_epochs_are_the_claims(agents, election, observer):
    trio = start3(agents)
    watch = OverlapWatch(trio).start()
    try:
        got = poll(lambda: settled(trio, [4, 4, 4]), 60, interval=0.1,
                   what="3 agents owning 4 of 12 partitions each")
        owner, epochs = got
        # Held for 3 session timeouts: the same owners under the same
        # epochs, so each lease was renewed (by the session's one renewal)
        # and none lapsed.
        t_end = time.monotonic() + 6.0
        while time.monotonic() < t_end:
            time.sleep(0.5)
        again = settled(trio, [4, 4, 4])
        assert again is not None and again == (owner, epochs), again
        # Every partition's epoch is its claim node's mzxid, and the claim
        # names the owner.
        claims = claim_epochs(observer, election)
        for p in owner:
            cid, mzxid = claims[p]
            assert cid == owner[p], (p, cid, owner[p])
            assert epochs[p] == mzxid, (p, epochs[p], mzxid)
        # The member nodes are there, one per agent, with the ids and the
        # partitions each runs (id, NUL, parts=count:N).
        names = observer.zk.get_children(election + "/members")
        data = sorted(observer.zk.get("%s/members/%s" % (election, n))[0]
                      for n in names)
        assert [d.split(b"\0") for d in data] == [
            [b"a%d" % i, b"parts=count:%d" % N] for i in range(3)], data
        # Every agent names each partition's leader and epoch, owned or not.
        def leaders_known():
            for a in trio:
                for e in parts_doc(a)["partitions"]:
                    if e["leader"] != {"id": owner[e["name"]],
                                       "epoch": epochs[e["name"]]}:
                        return None
            return True
        poll(leaders_known, 10, what="every agent to report every leader")
        # The metrics count the same.
        for a in trio:
            text = a.get("/metrics").body
            assert "\nzkelect_partitions_owned 4\n" in text, text
            assert "\nzkelect_partitions_assigned 4\n" in text
            assert "\nzkelect_members 3\n" in text
        # One partition's entry, and its leader endpoint.
        p0 = owner["0"]
        for a in trio:
            r = a.get("/v1/partitions/0")
            assert r.status == 200 and r.json()["name"] == "0"
            r = a.get("/v1/partitions/0/leader")
            assert r.status == (200 if a.id == p0 else 503), (a.id, p0, r)
        assert trio[0].get("/v1/partitions/nope").status == 404
        # Each agent's own count, as its status says it.
        for a in trio:
            st = a.status()
            assert st["partitions"]["owned"] == 4, st
            assert st["partitions"]["count"] == N
            assert st["is_leader"] is False
    finally:
        watch.stop()
    assert watch.violations() == []


def test_sigterm_moves_only_the_leavers_partitions(agents, election, observer):
    trio = start3(agents)
    watch = OverlapWatch(trio).start()
    try:
        owner, _ = poll(lambda: settled(trio, [4, 4, 4]), 60, interval=0.1,
                        what="3 x 4")
        # The newest member leaves (test_partitions_sticky.py stops and
        # kills older ones).
        leaver = trio[2]
        mine = {p for p, a in owner.items() if a == leaver.id}
        t0, since = time.monotonic(), time.time()
        leaver.signal(15)
        rest = trio[:2]
        after, epochs = poll(lambda: settled(rest, [6, 6]), 30, interval=0.05,
                             what="2 x 6 after SIGTERM")
        took = time.monotonic() - t0
        moved = {p for p in owner if owner[p] != after[p]}
        assert moved == mine, (moved, mine)
        leaver.proc.wait(20)
        left = time.monotonic() - t0
        assert leaver.proc.returncode == 0
        # A graceful handover: each partition was released by the leaver
        # and gained after that (no session timeout, 2 s, waited for), and
        # the leaver left once they were handed over, not at the end of its
        # bounded wait for successors (5 s). The times are bounded too, with
        # the suite's slowdown; the logs say how it happened.
        assert_handed_over(leaver, moved, {a.id: a for a in rest}, after, epochs, since,
                           election)
        print("SIGTERM: partitions moved in %.3f s, the leaver exited in %.3f s"
              % (took, left))
        assert took < 2.0 * SLOW, took
        assert left < 4.0 * SLOW, left
        # The successors were named by the leaver's release: the claim
        # names each new owner.
        claims = claim_epochs(observer, election)
        for p in moved:
            assert claims[p][0] == after[p]
    finally:
        watch.stop()
    assert watch.violations() == []


def test_kill9_moves_only_the_dead_agents_partitions(agents, election):
    trio = start3(agents)
    watch = OverlapWatch(trio).start()
    try:
        owner, epochs = poll(lambda: settled(trio, [4, 4, 4]), 60,
                             interval=0.1, what="3 x 4")
        dead = trio[2]
        mine = {p for p, a in owner.items() if a == dead.id}
        t0, since = time.monotonic(), time.time()
        dead.kill()
        rest = trio[:2]
        after, epochs2 = poll(lambda: settled(rest, [6, 6]), 30,
                              interval=0.05, what="2 x 6 after kill -9")
        took = time.monotonic() - t0
        moved = {p for p in owner if owner[p] != after[p]}
        assert moved == mine, (moved, mine)
        # Nobody took them before the session could have expired.
        assert took >= 1.0, took
        # Nothing was handed over: the dead agent released nothing, each
        # new owner claimed once its node expired (and so the check the
        # SIGTERM test makes tells the two apart).
        bad = handed_over(dead, moved, {a.id: a for a in rest}, after, epochs2, since,
                          election)
        assert bad == ["partition %s: %s never released it" % (p, dead.id)
                       for p in sorted(moved, key=int)], bad
        for p in moved:
            assert epochs2[p] > epochs[p]
        for p in set(owner) - moved:
            assert epochs2[p] == epochs[p]
    finally:
        watch.stop()
    assert watch.violations() == []


def test_without_partitions_the_endpoints_answer_404(agents):
    a = agents.new("single")
    a.wait_for(lambda s: s["role"] == "leader", 20, what="the single leader")
    r = a.get("/v1/partitions")
    assert r.status == 404
    assert r.json() == {"error": "no partitions configured"}
    assert a.get("/v1/partitions/0/leader").status == 404


def test_hooks_per_partition_and_the_app_hears_before_the_node_goes(agents):
    """on_leader and on_follower run per partition with ZKELECT_PARTITION and
    ZKELECT_EPOCH; a leaver's on_follower for a partition (which takes
    0.3 s) ends before the successor gains that partition."""
    log = os.path.join(agents.dir, "hooks.log")
    hook = os.path.join(agents.dir, "hook.sh")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\n"
                "[ \"$ZKELECT_ROLE\" = leader ] || sleep 0.3\n"
                "echo \"$1 $ZKELECT_ID $ZKELECT_PARTITION $ZKELECT_ROLE "
                "$ZKELECT_EPOCH\" >> %s\n" % log)
    os.chmod(hook, 0o755)
    yaml = PARTS_YAML + ("notify:\n  on_leader: [\"%s\", gained]\n"
                         "  on_follower: [\"%s\", lost]\n" % (hook, hook))
    duo = [agents.new("h%d" % i, extra_yaml=yaml) for i in range(2)]
    owner, epochs = poll(lambda: settled(duo, [6, 6]), 60, interval=0.1,
                         what="2 x 6")

    def lines():
        try:
            with open(log) as f:
                return [ln.split() for ln in f.read().splitlines()]
        except FileNotFoundError:
            return []

    def gained_now():
        got = {}
        for w in lines():
            if w[0] == "gained":
                got[w[2]] = (w[1], int(w[4]))
        return got if got == {p: (owner[p], epochs[p]) for p in owner} else None

    # The last gain of each partition names its owner and epoch.
    poll(gained_now, 20, what="an on_leader per partition, with its epoch")
    leaver = duo[1]
    mine = sorted(p for p, a in owner.items() if a == leaver.id)
    leaver.signal(15)
    after, _ = poll(lambda: settled(duo[:1], [12]), 30, interval=0.05,
                    what="1 x 12 after SIGTERM")
    leaver.proc.wait(20)
    # The successor's on_leader runs after it gained the partition: wait
    # for its lines after the leaver's (whose on_follower ran before its
    # release; h0 had gained each of them once already, at the start).
    def taken():
        ls = lines()
        for p in mine:
            lost = [i for i, w in enumerate(ls)
                    if w[0] == "lost" and w[1] == leaver.id and w[2] == p]
            if not any(w[0] == "gained" and w[1] == duo[0].id and w[2] == p
                       for w in ls[(lost[-1] if lost else 0):]):
                return False
        return True
    poll(taken, 20, what="%s's on_leader for each partition it took" % duo[0].id)
    ls = lines()
    for p in mine:
        lost = [i for i, w in enumerate(ls)
                if w[0] == "lost" and w[1] == leaver.id and w[2] == p]
        won = [i for i, w in enumerate(ls)
               if w[0] == "gained" and w[1] == duo[0].id and w[2] == p]
        assert lost and won, (p, ls)
        # The leaver's hook ended (after its 0.3 s) before the successor led.
        assert lost[-1] < won[-1], (p, ls)
        # A loss carries no epoch, as for one election.
        assert len(ls[lost[-1]]) == 4, ls[lost[-1]]


def test_a_join_moves_few_and_only_to_the_newcomer(agents):
    """A fourth agent joins 3 x 4: each ends with 3, and the partitions that
    move (at most ceil(12/4) = 3) all go to the newcomer, by graceful
    handovers (no overlap)."""
    trio = start3(agents)
    owner, epochs = poll(lambda: settled(trio, [4, 4, 4]), 60, interval=0.1,
                         what="3 x 4")
    new = agents.new("a3", extra_yaml=PARTS_YAML, start=False)
    watch = OverlapWatch(trio + [new]).start()   # before the join
    try:
        new.start()
        four = trio + [new]
        after, epochs2 = poll(lambda: settled(four, [3, 3, 3, 3]), 30,
                              interval=0.05, what="4 x 3 after a join")
        moved = {p for p in owner if owner[p] != after[p]}
        assert all(after[p] == new.id for p in moved), (moved, after)
        assert len(moved) <= 3, moved
        for p in set(owner) - moved:
            assert epochs2[p] == epochs[p]
        text = new.get("/metrics").body
        assert "\nzkelect_members 4\n" in text
        # The watch saw the settled state from every agent, too.
        poll(lambda: watch.rounds >= 3 * len(four), 10,
             what="the watch to poll every agent")
    finally:
        watch.stop()
    assert watch.violations() == []


def test_a_session_that_ended_leaves_no_request_out(agents):
    """A frozen agent's session expires with requests out on it; thawed, it
    opens a new session, and stopped, its stop waits for nothing: every
    request of the old session was answered (the client fakes an answer
    for each) before the old handle was closed. Closing it at once raced
    the client's completion thread, which then dropped some answers: our
    requests leaked (ASan's leak check failed the exit, about one thaw in
    eight) and, counted as out for ever, made the stop wait its whole
    drain for answers that could not come (it now says so)."""
    names = [str(i) for i in range(16)]
    a = new_part_agent(agents, "a", count=16, session_timeout="2s")
    b = new_part_agent(agents, "b", count=16, session_timeout="2s")
    wait_settled([a, b], names, what="a and b")
    for i in range(6):
        a.signal(signal.SIGSTOP)
        # b alone: a's session has expired (its member node is gone).
        wait_settled([b], names, timeout=30 * SLOW, what="b alone, a frozen")
        a.signal(signal.SIGCONT)
        wait_settled([a, b], names, timeout=30 * SLOW,
                     what="a back on a new session (thaw %d)" % i)
        assert a.stop() == 0, "a's exit after thaw %d: %s" % (i, a.log_text(4000))
        log = a.log_text(10**8)
        assert "had no answer within" not in log, log[-3000:]
        a.start()
        wait_settled([a, b], names, timeout=30 * SLOW, what="a started again")
