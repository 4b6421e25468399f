# SPDX-License-Identifier: MIT
"""Partitions: an operator's controls (doc/design.md, "Moving partitions",
issue 31), against a real ZooKeeper, real agents and real hooks:

  - `zkelectctl resign -p NAME` moves one partition off its owner: it lands
    on another member under a higher epoch, the old owner's on_follower
    ran to its end before the new owner's on_leader, and the old owner
    does not take it back during the hold;
  - `zkelectctl drain` empties an agent by graceful handovers (no
    partition without an owner for longer than a handover), the agent
    stays up and a member, its status says drained, the cluster view
    shows it; `zkelectctl undrain` gives it its share back;
  - what is refused, and why: a partition this agent does not lead, the
    last member that could take it, a drain without partitions, a GET.
"""

import os
import subprocess
import threading
import time

import partharness as ph
from zkharness import SLOW, poll, unix_request

CTL = os.environ.get("ZKELECTCTL", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "ctl",
    "zkelectctl"))


def names(n):
    return [str(i) for i in range(n)]


def ctl(agent, *args):
    return subprocess.run([CTL, "--socket", agent.socket] + list(args),
                          capture_output=True, text=True, timeout=30)


def hooked(agents, n, count, session_timeout="6s"):
    """n agents over count partitions, each hook appending one line
    "gained|lost ID PARTITION EPOCH" to hooks.log when it ends (a loss
    takes 0.3 s)."""
    log = os.path.join(agents.dir, "hooks.log")
    hook = os.path.join(agents.dir, "hook.sh")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\n"
                "[ \"$ZKELECT_ROLE\" = leader ] || sleep 0.3\n"
                "echo \"$1 $ZKELECT_ID $ZKELECT_PARTITION $ZKELECT_EPOCH\" "
                ">> %s\n" % log)
    os.chmod(hook, 0o755)
    yaml = ("notify:\n  on_leader: [\"%s\", gained]\n"
            "  on_follower: [\"%s\", lost]\n" % (hook, hook))
    live = [ph.new_part_agent(agents, "c%d" % i, count=count,
                              session_timeout=session_timeout,
                              extra_yaml=yaml) for i in range(n)]
    return live, log


def hook_lines(log):
    try:
        with open(log) as f:
            return [ln.split() for ln in f.read().splitlines()]
    except FileNotFoundError:
        return []


def owner_of(live, part):
    """(agent, epoch) of the one agent that answers is_leader for part."""
    for a in live:
        d = ph.plist(a)
        if d is None:
            continue
        for p in d["partitions"]:
            if p["name"] == part and p["is_leader"] is True:
                return a, p["epoch"]
    return None, None


def test_resign_moves_one_partition_to_another_member(agents):
    live, log = hooked(agents, 3, 6)
    owner = ph.wait_settled(live, names(6), timeout=60 * SLOW)
    part = "0"
    old = next(a for a in live if a.id == owner[part])
    _, old_epoch = owner_of(live, part)
    r = ctl(old, "resign", "-p", part, "--hold", "20s")
    assert r.returncode == 0, r.stderr
    assert "resigned partition 0" in r.stdout

    def moved():
        a, epoch = owner_of(live, part)
        return (a, epoch) if a is not None and a is not old else None

    new, new_epoch = poll(moved, 20 * SLOW, what="partition 0 on another member")
    assert new_epoch > old_epoch, (old_epoch, new_epoch)
    # The old owner's app heard of the loss (its hook ended) before the
    # new owner's app heard of the gain.
    def this_gain(w):
        return w[0] == "gained" and w[1] == new.id and w[2] == part and \
            int(w[3]) == new_epoch

    ls = poll(lambda: (lambda v: v if any(this_gain(w) for w in v) else None)(
        hook_lines(log)), 10 * SLOW, what="the new owner's on_leader")
    lost = [i for i, w in enumerate(ls) if w[0] == "lost" and w[1] == old.id
            and w[2] == part]
    won = [i for i, w in enumerate(ls) if this_gain(w)]
    assert lost and won and lost[-1] < won[0], ls
    # Its status says it resigned; during the hold it does not come back,
    # whatever the rebalance after the move does.
    d = ph.plist(old)
    assert [p["resigned"] for p in d["partitions"] if p["name"] == part] == [True], d
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        a, _ = owner_of(live, part)
        assert a is not old, "the old owner took partition 0 back in its hold"
        time.sleep(0.05)


def test_drain_empties_an_agent_and_undrain_gives_its_share_back(agents, zk_hostport,
                                                                 election):
    n = 12
    live, log = hooked(agents, 3, n)
    ph.wait_settled(live, names(n), timeout=60 * SLOW)
    drained = live[2]
    # Sample who owns what, every 10 ms, for the longest time a partition
    # has no owner during the drain.
    gaps, last_owned, stop = {}, {}, threading.Event()

    def sample():
        while not stop.is_set():
            now = time.monotonic()
            owned = set()
            for a in live:
                d = ph.plist(a, timeout=0.5)
                if d is not None:
                    owned |= ph.owned(d)
            for p in names(n):
                if p in owned:
                    if p in last_owned and last_owned[p] is not None:
                        gaps[p] = max(gaps.get(p, 0.0), now - last_owned[p])
                    last_owned[p] = None
                elif last_owned.get(p) is None:
                    last_owned[p] = now
            time.sleep(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        r = ctl(drained, "drain")
        assert r.returncode == 0, r.stderr

        def emptied():
            d = ph.plist(drained)
            others = [ph.plist(a) for a in live[:2]]
            if d is None or any(o is None for o in others):
                return None
            if ph.owned(d) or ph.assigned(d):
                return None
            mine = [ph.owned(o) for o in others]
            if len(mine[0] | mine[1]) != n or len(mine[0]) != n // 2:
                return None
            return d

        d = poll(emptied, 30 * SLOW, what="the drained agent to own nothing")
    finally:
        stop.set()
        t.join(5)
    assert d["drained"] is True and d["members"] == 3, d
    st = drained.status()
    assert st["partitions"]["drained"] is True and drained.running(), st
    # No partition went without an owner for longer than a handover (its
    # hook's 0.3 s and a few round trips).
    assert max(gaps.values(), default=0.0) < 1.0 * SLOW, gaps
    # The cluster view, from ZooKeeper, says so.
    r = subprocess.run([CTL, "partitions", "--zookeeper", zk_hostport, election],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    row = [ln for ln in r.stdout.splitlines() if ln.split()[1:2] == [drained.id]]
    assert row and "drained" in row[0], r.stdout
    # Undrained, it takes its share again: 4 each.
    r = ctl(drained, "undrain")
    assert r.returncode == 0, r.stderr
    ph.wait_settled(live, names(n), timeout=30 * SLOW)
    assert len(ph.owned(ph.plist(drained))) == n // 3
    assert ph.plist(drained)["drained"] is False


def test_what_is_refused_and_why(agents):
    live = [ph.new_part_agent(agents, "r%d" % i, count=4, session_timeout="3s")
            for i in range(2)]
    owner = ph.wait_settled(live, names(4), timeout=60 * SLOW)
    a, b = live
    theirs = next(p for p, o in owner.items() if o == b.id)
    r = ctl(a, "resign", "-p", theirs)
    assert r.returncode == 2 and "409" in r.stderr and "does not lead" in r.stderr, r
    r = ctl(a, "resign", "-p", "nope")
    assert r.returncode == 2 and "404" in r.stderr, r
    r = ctl(a, "resign")
    assert r.returncode == 2 and "POST /v1/partitions/NAME/resign" in r.stderr, r
    resp = unix_request(a.socket, "GET", "/v1/drain")
    assert resp.status == 405, resp.status
    # With b drained, nobody is left to take a's partitions.
    assert ctl(b, "drain").returncode == 0
    mine = poll(lambda: (lambda d: d if d and len(ph.owned(d)) == 4 else None)(
        ph.plist(a)), 30 * SLOW, what="a to own all 4")
    r = ctl(a, "resign", "-p", sorted(ph.owned(mine))[0])
    assert r.returncode == 2 and "409" in r.stderr and "no other member" in r.stderr, r
    # Draining the last member too: the drain is ignored while every
    # member is drained, so that partitions keep owners (shared as usual).
    assert ctl(a, "drain").returncode == 0
    ph.wait_settled(live, names(4), timeout=30 * SLOW)
    assert "every member is drained" in a.log_text(10**7)
    assert ph.plist(a)["drained"] is True and ph.plist(b)["drained"] is True


def test_drain_without_partitions_is_refused(agents):
    a = agents.new("single")
    a.wait_for(lambda s: s["role"] == "leader", 30 * SLOW, what="lead")
    r = ctl(a, "drain")
    assert r.returncode == 2 and "404" in r.stderr and "no partitions" in r.stderr, r
