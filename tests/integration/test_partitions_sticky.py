# SPDX-License-Identifier: MIT
"""Partitions: the assignment is sticky on the current owners (doc/design.md
"Partitions"), so ANY member leaving moves only its own partitions, not
just the newest member.

4 agents x 24 partitions settle to 6 each; the OLDEST member (lowest member
node sequence, the one whose leaving disturbed the most before the
assignment was sticky) is stopped with SIGTERM: only its 6 partitions move,
by graceful handovers, and the 3 left own 8 each. Then the oldest of those
is killed with kill -9: only its 8 move, after the session timeout, and the
2 left own 12 each. Partitions that stay keep their epochs. Throughout,
every agent is polled and no two ever answer is_leader for one partition at
the same instant.

A fourth agent joining 3 x 8 creates contender nodes only in the partitions
it ends up owning (at most 6), all handed over by the others.
"""

import re
import time

import zkharness
from zkharness import SLOW, poll
from test_partitions_core import OverlapWatch, assert_handed_over, parts_doc

N = 24
PARTS_YAML = "partitions:\n  count: %d\n" % N


def settled(agents, want):
    """(owner, epochs) once every partition has exactly one owner, the
    counts per agent are WANT (sorted), every agent lists len(agents)
    members and leads exactly what it is assigned; else None."""
    seen = {str(p): [] for p in range(N)}
    epochs = {}
    for a in agents:
        doc = parts_doc(a)
        if doc is None or doc["members"] != len(agents):
            return None
        for e in doc["partitions"]:
            if e["is_leader"] != e["assigned"]:
                return None
            if e["is_leader"]:
                seen[e["name"]].append(a.id)
                epochs[e["name"]] = e["epoch"]
    if any(len(v) != 1 for v in seen.values()):
        return None
    counts = {}
    for v in seen.values():
        counts[v[0]] = counts.get(v[0], 0) + 1
    if sorted(counts.values()) != want:
        return None
    return {p: v[0] for p, v in seen.items()}, epochs


def oldest(observer, election, agents):
    """The agent whose member node has the lowest sequence number."""
    path = election + "/members"
    names = sorted(observer.zk.retry(observer.zk.get_children, path))
    by_id = {a.id: a for a in agents}
    # A member node's data: the id, a NUL, parts=... (doc/design.md).
    ids = [observer.zk.retry(observer.zk.get, "%s/%s" % (path, n))[0]
           .split(b"\0", 1)[0].decode() for n in names]
    assert sorted(ids) == sorted(by_id), (ids, list(by_id))
    return by_id[ids[0]]


def test_an_older_member_leaving_or_crashing_moves_only_its_own(
        agents, election):
    obs = zkharness.Observer(agents.zk_hostport)
    four = [agents.new("s%d" % i, extra_yaml=PARTS_YAML) for i in range(4)]
    watch = OverlapWatch(four).start()
    try:
        owner, epochs = poll(lambda: settled(four, [6, 6, 6, 6]), 90,
                             interval=0.1, what="4 agents x 6 partitions")

        # SIGTERM of the oldest member: only its partitions move.
        leaver = oldest(obs, election, four)
        mine = {p for p, a in owner.items() if a == leaver.id}
        t0, since = time.monotonic(), time.time()
        leaver.signal(15)
        three = [a for a in four if a is not leaver]
        after, epochs2 = poll(lambda: settled(three, [8, 8, 8]), 30,
                              interval=0.05, what="3 x 8 after SIGTERM")
        took = time.monotonic() - t0
        moved = {p for p in owner if owner[p] != after[p]}
        assert moved == mine, (sorted(moved), sorted(mine))
        for p in set(owner) - moved:
            assert epochs2[p] == epochs[p], p
        # Graceful handovers: each partition was released by the leaver
        # and gained after that (the logs say so), so none waited for the
        # session timeout (2 s); the time is bounded too, with the slowdown.
        assert_handed_over(leaver, moved, {a.id: a for a in three}, after, epochs2, since,
                           election)
        print("SIGTERM of the oldest: its partitions moved in %.3f s" % took)
        assert took < 2.0 * SLOW, took
        leaver.proc.wait(20)
        assert leaver.proc.returncode == 0

        # kill -9 of the oldest of the three: only its partitions move.
        dead = oldest(obs, election, three)
        mine = {p for p, a in after.items() if a == dead.id}
        t0 = time.monotonic()
        dead.kill()
        two = [a for a in three if a is not dead]
        final, epochs3 = poll(lambda: settled(two, [12, 12]), 30,
                              interval=0.05, what="2 x 12 after kill -9")
        took = time.monotonic() - t0
        moved = {p for p in after if after[p] != final[p]}
        assert moved == mine, (sorted(moved), sorted(mine))
        # Nobody took them before the session could have expired.
        assert took >= 1.0, took
        for p in moved:
            assert epochs3[p] > epochs2[p], p
        for p in set(after) - moved:
            assert epochs3[p] == epochs2[p], p
    finally:
        watch.stop()
        obs.close()
    assert watch.violations() == []


def queued_for(agent):
    """The partitions AGENT created a contender node in (its debug log's
    `election: P:create` lines)."""
    with open(agent.log_path, "rb") as f:
        text = f.read().decode(errors="replace")
    return set(re.findall(r"election: ([A-Za-z0-9._-]+):create ", text))


def test_a_newcomer_queues_only_for_what_the_rule_gives_it(agents):
    """A fourth agent joins 3 x 8: it assigns from the leaders it sees (it
    watches every partition's claim), so it queues only for the partitions
    the others hand it (at most ceil(24/4) = 6, by graceful handovers),
    never behind a leader that keeps its partition."""
    trio = [agents.new("q%d" % i, extra_yaml=PARTS_YAML) for i in range(3)]
    owner, epochs = poll(lambda: settled(trio, [8, 8, 8]), 90, interval=0.1,
                         what="3 agents x 8 partitions")
    new = agents.new("q3", extra_yaml=PARTS_YAML, start=False)
    watch = OverlapWatch(trio + [new]).start()
    try:
        new.start()
        four = trio + [new]
        after, epochs2 = poll(lambda: settled(four, [6, 6, 6, 6]), 30,
                              interval=0.05, what="4 x 6 after a join")
        moved = {p for p in owner if owner[p] != after[p]}
        assert all(after[p] == new.id for p in moved), (moved, after)
        assert len(moved) <= 6, moved
        for p in set(owner) - moved:
            assert epochs2[p] == epochs[p], p
        queued = queued_for(new)
        assert queued == moved, (sorted(queued), sorted(moved))
    finally:
        watch.stop()
    assert watch.violations() == []
