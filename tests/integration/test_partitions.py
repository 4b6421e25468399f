# SPDX-License-Identifier: MIT
"""Partitions (issue 22) end to end, with real agents and a real ZooKeeper:
balance and movement as agents join, leave and crash; never two owners of
one partition at once (a checker polls every agent's /v1/partitions all
along); each partition's epoch grows and is its claim node's mzxid; a
paused owner replaced only after its lease; hooks and a supervised child per
partition; zkelectctl's `partitions` verb and `-p`.

The small core tests of the agent side are in test_partitions_core.py.
"""

import json
import signal
import stat
import subprocess
import time

import pytest

from zkharness import ZKELECTCTL, SLOW, poll  # noqa: E402
from partharness import (PartitionChecker, claim, epochs, max_moves,  # noqa: E402
                         new_part_agent, plist, wait_settled)


N = 24
NAMES = [str(i) for i in range(N)]


@pytest.fixture
def checker(agents):
    c = PartitionChecker(agents)
    try:
        yield c
    finally:
        c.stop()


def assert_clean(checker):
    problems = checker.stop().violations()
    assert not problems, "\n".join(problems)
    assert checker.polls > 0


def assert_claims(observer, path, live, owner):
    """Each partition's owner answers an epoch equal to the mzxid of its claim
    node, and the claim names it."""
    ep = epochs(live)
    for name, aid in owner.items():
        cid, mzxid = claim(observer, path, name)
        assert cid == aid, "partition %s: claim names %r, %s answers leader" % (name, cid, aid)
        assert ep.get(name) == mzxid, "partition %s: %s answers epoch %s, claim mzxid %d" % (
            name, aid, ep.get(name), mzxid)


def moved(before_owner, before_epoch, after_owner, after_epoch):
    """Partitions that changed term (a new epoch) between two settled states;
    a partition that left and came back counts too."""
    return {p for p in before_owner
            if after_owner[p] != before_owner[p] or after_epoch[p] != before_epoch[p]}


# --- balance and movement ---------------------------------------------------

def test_balance_join_sigterm_kill(agents, observer, election, checker):
    """3 agents, then 4 (join), then 3 (SIGTERM), then 2 (kill -9), over 24
    partitions: balanced after each step; a join moves at most
    ceil(N/(K+1)); a graceful leave moves only the leaver's partitions; a
    crash only the dead agent's; never two owners at once. Every step runs
    and the movement found at each is said at the end."""
    wrong = []

    def movement(what, m, o_before, o_after):
        return "%s moved %s" % (what, ", ".join(
            "%s (%s -> %s)" % (p, o_before[p], o_after[p]) for p in sorted(m, key=int)))

    live = [new_part_agent(agents, "a%d" % i, count=N) for i in range(3)]
    checker.start()
    o3 = wait_settled(live, NAMES, what="3 agents")
    e3 = epochs(live)
    assert_claims(observer, election, live, o3)

    live.append(new_part_agent(agents, "a3", count=N))
    o4 = wait_settled(live, NAMES, what="4 agents after a join")
    e4 = epochs(live)
    assert_claims(observer, election, live, o4)
    m = moved(o3, e3, o4, e4)
    if len(m) > max_moves(N, 3) or any(o4[p] != "a3" for p in m):
        wrong.append("join of a3: at most %d partitions may move, all to a3; %s"
                     % (max_moves(N, 3), movement("it", m, o3, o4)))

    leaver = live[1]
    theirs = {p for p, a in o4.items() if a == leaver.id}
    assert leaver.stop() == 0
    live.remove(leaver)
    o3b = wait_settled(live, NAMES, what="3 agents after a SIGTERM")
    e3b = epochs(live)
    assert_claims(observer, election, live, o3b)
    m = moved(o4, e4, o3b, e3b)
    if m != theirs:
        wrong.append("SIGTERM of %s (of a0..a3): only its %s may move; %s" % (
            leaver.id, sorted(theirs, key=int), movement("it", m, o4, o3b)))

    dead = live[0]
    theirs = {p for p, a in o3b.items() if a == dead.id}
    checker.freeze(dead)
    dead.kill()
    live.remove(dead)
    o2 = wait_settled(live, NAMES, what="2 agents after a kill -9")
    e2 = epochs(live)
    assert_claims(observer, election, live, o2)
    m = moved(o3b, e3b, o2, e2)
    if m != theirs:
        wrong.append("kill -9 of %s: only its %s may move; %s" % (
            dead.id, sorted(theirs, key=int), movement("it", m, o3b, o2)))
    for p in NAMES:
        assert e2[p] >= e3[p]
    assert_clean(checker)
    assert not wrong, "\n".join(wrong)


# --- a paused owner -----------------------------------------------------------

def test_paused_owner_replaced_after_its_lease(agents, observer, election, checker):
    """An owner SIGSTOPped: the others take its partitions only after its
    lease (the checker holds its last answers' leases against theirs); once
    SIGCONT it answers is_leader false for every partition it lost."""
    names = [str(i) for i in range(12)]
    live = [new_part_agent(agents, "a%d" % i, count=12) for i in range(3)]
    checker.start()
    o = wait_settled(live, names, what="3 agents")
    e = epochs(live)
    victim = live[0]
    lost = {p for p, a in o.items() if a == victim.id}
    assert lost
    checker.freeze(victim)
    victim.pause()
    others = live[1:]
    o2 = wait_settled(others, names, timeout=60, what="the others, with a0 paused")
    for p in lost:
        assert o2[p] != victim.id
    e2 = epochs(others)
    assert all(e2[p] > e[p] for p in lost)
    t_resume = time.monotonic()
    victim.resume()

    # Its first answers after SIGCONT say false for everything it lost.
    def first_answer():
        d = plist(victim)
        return d
    d = poll(first_answer, 20, what="a0 to answer after SIGCONT")
    stale = {p["name"] for p in d["partitions"]
             if p["name"] in lost and p["is_leader"] and p["epoch"] == e[p["name"]]}
    assert not stale, "a0 still answers leader of %s under its old epochs" % sorted(stale)
    # And it rejoins: balanced over 3 again, with new epochs.
    o3 = wait_settled(live, names, what="3 agents after a0 is back")
    assert_claims(observer, election, live, o3)
    snap = checker.snapshot()
    for p in lost:
        late = [x for x in snap.get(p, []) if x.agent == victim.id and x.t0 > t_resume
                and x.is_leader and x.epoch == e[p]]
        assert not late, "partition %s: a0 answered true under its old epoch after " \
            "SIGCONT: %r" % (p, late[0])
    gaps = checker.lease_gaps()
    assert gaps and min(gaps) > 0, "gaps after the lease: %s" % gaps
    assert_clean(checker)


# --- hooks and the supervised child per partition -----------------------------

HOOK = """#!/bin/sh
echo "$1 $ZKELECT_PARTITION $ZKELECT_EPOCH" >> "$2"
"""

CHILD = """#!/bin/sh
# $1: the partition ({partition} in notify.run), $2: the marks file
echo "start $1 $ZKELECT_PARTITION $ZKELECT_EPOCH $$" >> "$2"
trap 'echo "stop $1 $$" >> "$2"; exit 0' TERM
while :; do sleep 0.05; done
"""


def script(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(p)


def lines(path):
    try:
        with open(path) as f:
            return [ln.split() for ln in f.read().splitlines() if ln.strip()]
    except OSError:
        return []


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_hooks_per_partition(agents, election, checker, tmp_path):
    """on_leader and on_follower run once per partition with its name and
    epoch: every partition an agent gains shows up in its file with the
    epoch it answers, every one it gives away as lost."""
    hook = script(tmp_path, "hook.sh", HOOK)
    names = [str(i) for i in range(8)]

    def agent(aid):
        out = str(tmp_path / ("%s.hooks" % aid))
        extra = ("notify:\n  on_leader: [%s, lead, %s]\n  on_follower: [%s, lost, %s]\n"
                 % (hook, out, hook, out))
        return new_part_agent(agents, aid, count=8, extra_yaml=extra), out

    a, fa = agent("a0")
    b, fb = agent("a1")
    checker.start()
    o = wait_settled([a, b], names, what="2 agents")
    e = epochs([a, b])

    def told(path, owner_id):
        want = {(p, str(e2[p])) for p, x in cur.items() if x == owner_id}
        got = {(ln[1], ln[2]) for ln in lines(path) if ln[0] == "lead" and len(ln) == 3}
        return want <= got
    cur, e2 = o, e
    poll(lambda: told(fa, "a0") and told(fb, "a1"), 30, what="on_leader per partition")
    for path in (fa, fb):
        for ln in lines(path):
            assert ln[0] in ("lead", "lost") and ln[1] in names, ln
            assert ln[0] != "lead" or len(ln) == 3, "on_leader without an epoch: %s" % ln

    c, fc = agent("a2")
    o3 = wait_settled([a, b, c], names, what="3 agents")
    e3 = epochs([a, b, c])
    cur, e2 = o3, e3
    poll(lambda: told(fa, "a0") and told(fb, "a1") and told(fc, "a2"), 30,
         what="on_leader for the partitions that moved")
    gone = {p for p in names if o[p] != o3[p]}
    assert gone and all(o3[p] == "a2" for p in gone)
    for p in gone:
        path = fa if o[p] == "a0" else fb
        poll(lambda: any(ln[0] == "lost" and ln[1] == p for ln in lines(path)), 30,
             what="on_follower for partition %s at %s" % (p, o[p]))
    # No partition was told lead twice with one epoch, nor lead by an agent
    # that does not own it now without a lost after.
    for path, aid in ((fa, "a0"), (fb, "a1"), (fc, "a2")):
        last = {}
        for ln in lines(path):
            last[ln[1]] = ln[0]
        mine = {p for p, x in o3.items() if x == aid}
        assert {p for p, k in last.items() if k == "lead"} == mine, (aid, last, mine)
    assert_clean(checker)


def test_child_per_partition(agents, election, checker, tmp_path):
    """notify.run with {partition}: one live child per owned partition, its
    argv naming the partition and its environment the epoch; killed when
    its partition moves away, started at the new owner."""
    child = script(tmp_path, "child.sh", CHILD)
    names = [str(i) for i in range(6)]

    def agent(aid, start=True):
        out = str(tmp_path / ("%s.children" % aid))
        extra = "notify:\n  run: [%s, \"{partition}\", %s]\n" % (child, out)
        return new_part_agent(agents, aid, count=6, extra_yaml=extra, start=start), out

    def live_children(path):
        started, stopped = {}, set()
        for ln in lines(path):
            if ln[0] == "start":
                started[int(ln[-1])] = ln
            elif ln[0] == "stop":
                stopped.add(int(ln[2]))
        return {pid: ln for pid, ln in started.items() if pid not in stopped and alive(pid)}

    def matches(pairs, owner, ep):
        for path, aid in pairs:
            kids = live_children(path)
            by_part = {}
            for pid, ln in kids.items():
                by_part.setdefault(ln[1], []).append(ln)
            mine = {p for p, x in owner.items() if x == aid}
            if set(by_part) != mine or any(len(v) != 1 for v in by_part.values()):
                return False
            for p, (ln,) in by_part.items():
                # argv {partition}, ZKELECT_PARTITION, ZKELECT_EPOCH
                if ln[1] != p or ln[2] != p or ln[3] != str(ep[p]):
                    return False
        return True

    a, fa = agent("a0")
    b, fb = agent("a1")
    checker.start()
    o = wait_settled([a, b], names, what="2 agents")
    e = epochs([a, b])
    poll(lambda: matches([(fa, "a0"), (fb, "a1")], o, e), 30,
         what="one child per owned partition")
    before = {**live_children(fa), **live_children(fb)}

    c, fc = agent("a2")
    o3 = wait_settled([a, b, c], names, what="3 agents")
    e3 = epochs([a, b, c])
    poll(lambda: matches([(fa, "a0"), (fb, "a1"), (fc, "a2")], o3, e3), 30,
         what="children follow the partitions")
    for pid, ln in before.items():
        if o3[ln[1]] != o[ln[1]]:
            assert not alive(pid), "the child of moved partition %s still runs" % ln[1]
        else:
            assert alive(pid), "the child of partition %s, which stayed, was restarted" % ln[1]
    for ag in (a, b, c):
        assert ag.stop() == 0
    for path in (fa, fb, fc):
        assert not live_children(path), "a child outlived its agent"
    assert_clean(checker)


def test_every_agent_names_every_owner(agents, election, checker):
    """doc/design.md, Partitions: out of a partition's queue its claim is
    watched, to report its leader. Once settled, every agent's entry for
    every partition names the owner and its epoch, owned or not."""
    names = [str(i) for i in range(6)]
    live = [new_part_agent(agents, "a%d" % i, count=6) for i in range(3)]
    checker.start()
    o = wait_settled(live, names, what="3 agents")
    e = epochs(live)

    def named():
        wrong = []
        for a in live:
            for p in plist(a)["partitions"]:
                want = {"id": o[p["name"]], "epoch": e[p["name"]]}
                if p["leader"] != want:
                    wrong.append("%s says partition %s: leader %s, not %s" % (
                        a.id, p["name"], p["leader"], want))
        named.wrong = wrong
        return not wrong
    try:
        poll(named, 20, what="every agent to name every owner")
    except AssertionError as ex:
        raise AssertionError("%s: %s" % (ex, "; ".join(named.wrong[:6]))) from None
    assert_clean(checker)


# --- zkelectctl --------------------------------------------------------------

def ctl(sock, *args, timeout=30):
    return subprocess.run([ZKELECTCTL, "--socket", sock] + list(args),
                          capture_output=True, text=True, timeout=timeout * SLOW)


REGIONS = ["eu", "us", "apac", "sa"]


def test_ctl_partitions_and_p(agents, election, checker):
    """`partitions` shows every partition with its owner and epoch and the
    balance; `status`, `is-leader` and `wait` with -p answer for one
    partition; unknown names and agents without partitions exit 2 with the
    agent's reason; stray arguments are refused with usage."""
    a = new_part_agent(agents, "a0", names=REGIONS)
    b = new_part_agent(agents, "a1", names=REGIONS)
    plain = agents.new("plain")
    checker.start()
    o = wait_settled([a, b], REGIONS, what="2 agents")
    e = epochs([a, b])

    def table(agent=a):
        r = ctl(agent.socket, "partitions")
        assert r.returncode == 0, r.stderr
        return r.stdout.splitlines()

    def knows_all(agent):
        t = table(agent)
        return t if all(ln.split()[1] != "-" for ln in t[1:-1]) else None
    # Every owner as each agent last read it: it reads a claim it does not
    # hold when it changes (a watch), or every T while the claim node is
    # missing. a1 too: its answers for the partitions it follows are asked
    # below.
    poll(lambda: knows_all(b), 20, what="a1 to know every owner")
    out = poll(lambda: knows_all(a), 20, what="a0 to know every owner")
    assert out[0].split() == ["PARTITION", "OWNER", "EPOCH", "ROLE", "LEASE"]
    rows = {ln.split()[0]: ln.split() for ln in out[1:-1]}
    assert set(rows) == set(REGIONS)
    for p in REGIONS:
        assert rows[p][1:3] == [o[p], str(e[p])], rows[p]
        assert rows[p][3] == ("leader" if o[p] == "a0" else "follower"), rows[p]
        assert (rows[p][4] == "-") == (o[p] != "a0"), rows[p]
    mine = sum(1 for p in REGIONS if o[p] == "a0")
    assert out[-1].startswith("a0: 2 members, owns %d of 4 partitions, %d assigned" % (
        mine, mine)), out[-1]

    r = ctl(a.socket, "status")
    assert r.returncode == 0
    assert r.stdout.startswith("a0: owns %d of 4 partitions (%d assigned to it, 2 members), "
                               "session connected" % (mine, mine)), r.stdout

    r = ctl(a.socket, "partitions", "--json")
    assert r.returncode == 0
    d = json.loads(r.stdout)
    assert d["id"] == "a0" and {p["name"] for p in d["partitions"]} == set(REGIONS)

    for p in REGIONS:
        own, other = (a, b) if o[p] == "a0" else (b, a)
        r = ctl(own.socket, "is-leader", "-p", p)
        assert r.returncode == 0 and r.stdout.strip() == "leader", (p, r)
        r = ctl(other.socket, "is-leader", "--partition", p)
        assert r.returncode == 1 and r.stdout.strip() == "follower", (p, r)
        r = ctl(other.socket, "is-leader", "-q", "-p", p)
        assert r.returncode == 1 and r.stdout == ""
        r = ctl(own.socket, "status", "-p", p)
        assert r.returncode == 0
        assert r.stdout.startswith("partition %s: leader (epoch %d" % (p, e[p])), r.stdout
        r = ctl(other.socket, "status", "-p", p)
        assert r.returncode == 0
        assert r.stdout.strip() == ("partition %s: follower, leader %s (epoch %d), not "
                                    "assigned to this instance" % (p, own.id, e[p])), r.stdout
        r = ctl(own.socket, "status", "-p", p, "--json")
        assert json.loads(r.stdout)["epoch"] == e[p]
        assert ctl(own.socket, "wait", "-p", p, "--leader", "--timeout", "0").returncode == 0
        assert ctl(other.socket, "wait", "-p", p, "--leader", "--timeout", "0").returncode == 3
        assert ctl(other.socket, "wait", "-p", p, "--follower", "--timeout", "5s").returncode == 0

    for args in (["status", "-p", "mars"], ["is-leader", "-p", "mars"],
                 ["wait", "-p", "mars", "--leader", "--timeout", "2s"]):
        r = ctl(a.socket, *args)
        assert r.returncode == 2, (args, r)
        assert "no partition 'mars'" in r.stderr, r.stderr
    for args in (["partitions"], ["status", "-p", "eu"], ["is-leader", "-p", "eu"],
                 ["wait", "-p", "eu", "--leader", "--timeout", "1s"],
                 ["run", "-p", "eu", "--", "true"]):
        r = ctl(plain.socket, *args)
        assert r.returncode == 2, (args, r)
        assert "no partitions configured" in r.stderr, (args, r.stderr)
    for args in (["partitions", "x"], ["status", "-p", "eu", "x"],
                 ["is-leader", "-p", "eu", "x"], ["partitions", "--bogus"]):
        r = ctl(a.socket, *args)
        assert r.returncode == 1, (args, r)
        assert "usage:" in r.stderr, r.stderr
    r = ctl(a.socket, "run", "-p")
    assert r.returncode == 1 and "needs a partition" in r.stderr, r.stderr
    assert_clean(checker)


RUN_CMD = """#!/bin/sh
echo "start $ZKELECT_PARTITION $ZKELECT_EPOCH $$" >> "$1"
trap 'echo "stop $ZKELECT_PARTITION $$" >> "$1"; exit 0' TERM
while :; do sleep 0.05; done
"""


def test_ctl_wait_change_and_run_partition(agents, election, checker, tmp_path):
    """`run -p NAME` runs its command only while this agent owns NAME, with
    ZKELECT_PARTITION and ZKELECT_EPOCH; the owner's SIGTERM moves NAME and
    the command follows it; `wait -p NAME --change` returns on that move."""
    cmd = script(tmp_path, "cmd.sh", RUN_CMD)
    a = new_part_agent(agents, "a0", names=REGIONS)
    b = new_part_agent(agents, "a1", names=REGIONS)
    checker.start()
    o = wait_settled([a, b], REGIONS, what="2 agents")
    e = epochs([a, b])
    p = sorted(REGIONS)[0]
    own, other = (a, b) if o[p] == "a0" else (b, a)
    marks = {x.id: str(tmp_path / ("%s.run" % x.id)) for x in (a, b)}
    runs = {}
    waiter = subprocess.Popen([ZKELECTCTL, "--socket", other.socket, "wait", "-p", p,
                               "--change", "--timeout", "60s"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        # The waiter has made its first look once its long poll waits.
        poll(lambda: "\nzkelect_api_long_polls 1\n" in other.get("/metrics").body, 20,
             what="wait -p to long poll")
        runs = {x.id: subprocess.Popen([ZKELECTCTL, "--socket", x.socket, "run", "-p", p,
                                        "--", cmd, marks[x.id]], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True) for x in (a, b)}
        def running(path):
            ls = lines(path)
            starts = [ln for ln in ls if ln[0] == "start"]
            stops = {ln[2] for ln in ls if ln[0] == "stop"}
            return [ln for ln in starts if ln[3] not in stops and alive(int(ln[3]))]
        poll(lambda: running(marks[own.id]), 20, what="run -p at the owner")
        (ln,) = running(marks[own.id])
        assert ln[1] == p and ln[2] == str(e[p]), ln
        assert not lines(marks[other.id]), "run -p started at an agent that does not own it"
        old_pid = int(ln[3])

        assert own.stop() == 0
        got = poll(lambda: running(marks[other.id]), 30, what="run -p at the new owner")
        assert got[0][1] == p and int(got[0][2]) > e[p], got
        poll(lambda: not alive(old_pid), 10, what="the old owner's command to end")
        # The first change it saw: the partition on its way to this agent
        # (unknown for a moment, or still follower with the owner it names
        # gone or changed) or already led here. Nothing changed before the
        # owner's stop, so returning at all is the move.
        assert waiter.wait(30 * SLOW) == 0, waiter.stderr.read()
        assert waiter.stdout.read().strip() in ("unknown", "follower", "leader")
        assert other.stop() == 0
        poll(lambda: not running(marks[other.id]), 20, what="the command to stop")
        # An agent that is gone: run keeps waiting (as run without -p does);
        # stop it.
        for r in runs.values():
            if r.poll() is None:
                r.send_signal(signal.SIGTERM)
                assert r.wait(15 * SLOW) == 0
    finally:
        for r in list(runs.values()) + [waiter]:
            if r.poll() is None:
                r.kill()
                r.wait()
    assert_clean(checker)


# --- the checker itself, on made-up answers ------------------------------------

def test_checker_judges_made_up_answers():
    """The checker flags two owners at once and a successor inside a frozen
    owner's lease, and nothing else: answers whose windows only touch, a
    graceful handover (the old owner drops before its lease), a successor
    after the lease."""
    from partharness import Answer

    def judged(answers, freezes=()):
        c = PartitionChecker(None)
        c.answers = {"7": answers}
        c.freezes = list(freezes)
        return c.violations()

    # A owns 7 under epoch 10 at 1.0 and 2.0; B says true at 1.5: two at once.
    both = [Answer("A", 1.00, 1.01, True, 10, 3000), Answer("B", 1.50, 1.51, True, 11, 3000),
            Answer("A", 2.00, 2.01, True, 10, 3000)]
    assert judged(both)
    # A hands over gracefully: its last true at 1.0 with 3 s left, B from 1.2.
    graceful = [Answer("A", 1.00, 1.01, True, 10, 3000), Answer("B", 1.20, 1.21, True, 11, 3000),
                Answer("A", 1.30, 1.31, False, None, 0)]
    assert judged(graceful) == []
    # The same, but A was frozen at 1.05: B at 1.2 is inside A's lease (4.0).
    assert judged(graceful, [("A", 1.05)])
    # B after the lease: fine; B with a window that may start before it ends
    # (its t1 past the lease's end): not provably inside, not flagged.
    after = [Answer("A", 1.00, 1.01, True, 10, 3000), Answer("B", 4.20, 4.21, True, 11, 3000)]
    assert judged(after, [("A", 1.05)]) == []
    edge = [Answer("A", 1.00, 1.01, True, 10, 3000), Answer("B", 3.90, 4.10, True, 11, 3000)]
    assert judged(edge, [("A", 1.05)]) == []
    # An epoch that goes back.
    back = [Answer("B", 1.00, 1.01, True, 11, 3000), Answer("A", 2.00, 2.01, True, 10, 3000)]
    assert judged(back)
