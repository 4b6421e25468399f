# SPDX-License-Identifier: MIT
"""Partitions and the app's own processes (doc/design.md "Partitions"):
notify.run as one supervised child per owned partition, and
notify.on_leader_change per partition, against a real ZooKeeper and real
agents.

  - exactly one live child per owned partition, `{partition}` replaced in
    its argv, ZKELECT_PARTITION and the partition's epoch in its env;
  - when a partition moves (a join, SIGTERM of an owner, kill -9 of an
    owner) the old owner's child is dead before the new owner's starts:
    each child, as it starts, notes any other live child of its partition;
  - a child that ignores SIGTERM is SIGKILLed before its partition's lease
    could end, and the other partitions' handovers do not wait for it;
  - no child is left once the agents are gone;
  - on_leader_change runs per partition with the new leader's id and epoch.
"""

import os
import threading
import time

from zkharness import SLOW, poll
from test_partitions_core import settled

N = 12   # as test_partitions_core.settled() counts


def yaml(run=None, change=None):
    y = "partitions:\n  count: %d\n" % N
    if run or change:
        y += "notify:\n"
    if run:
        y += "  run: [\"%s\", \"--shard={partition}\"]\n" % run
    if change:
        y += "  on_leader_change: [\"%s\", \"p{partition}\"]\n" % change
    return y


# The child: records its start (with any other live child of its partition)
# and its stop, on CLOCK_MONOTONIC; takes 0.3 s to stop on SIGTERM, or
# ignores it while a file says so.
CHILD = r"""#!/usr/bin/python3
import os, signal, sys, time
D = %(dir)r
name = sys.argv[1][len("--shard="):]
def now():
    return "%%.6f" %% time.clock_gettime(time.CLOCK_MONOTONIC)
def line(*w):
    with open(os.path.join(D, "children.log"), "a") as f:
        f.write(" ".join(w) + "\n")
def alive(pid):
    try:
        with open("/proc/%%d/stat" %% pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
me = os.getpid()
open(os.path.join(D, "pids", "%%s.%%d" %% (name, me)), "w").close()
others = [f.rsplit(".", 1)[1] for f in os.listdir(os.path.join(D, "pids"))
          if f.rsplit(".", 1)[0] == name and int(f.rsplit(".", 1)[1]) != me
          and alive(int(f.rsplit(".", 1)[1]))]
e = os.environ
line("start", now(), name, e.get("ZKELECT_PARTITION", "?"),
     e.get("ZKELECT_EPOCH", "?") or "?", e.get("ZKELECT_ID", "?"), str(me),
     ",".join(others) or "-")
def term(sig, frame):
    if os.path.exists(os.path.join(D, "stubborn-" + name)):
        line("ignored", now(), name, str(me))
        return
    time.sleep(0.3)   # an app's own shutdown takes a while
    line("stop", now(), name, str(me))
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
while True:
    time.sleep(0.05)
"""


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Children:
    def __init__(self, agents):
        self.dir = agents.dir
        os.mkdir(os.path.join(self.dir, "pids"))
        self.path = os.path.join(self.dir, "child.py")
        with open(self.path, "w") as f:
            f.write(CHILD % {"dir": self.dir})
        os.chmod(self.path, 0o755)

    def lines(self):
        try:
            with open(os.path.join(self.dir, "children.log")) as f:
                return [ln.split() for ln in f.read().splitlines()]
        except FileNotFoundError:
            return []

    def starts(self):
        """{pid: (t, partition, argv name, env partition, epoch, id, others)}"""
        return {int(w[6]): (float(w[1]), w[2], w[2], w[3], w[4], w[5], w[7])
                for w in self.lines() if w[0] == "start"}

    def live(self):
        """{partition: [start records of live children]}"""
        out = {}
        for pid, s in self.starts().items():
            if alive(pid):
                out.setdefault(s[1], []).append(s)
        return out


def one_child_each(children, agents):
    """Settled, and each partition has exactly one live child, started by
    its owner under its epoch with the name in argv and env; None if not."""
    got = settled(agents, sorted([N // len(agents) + (1 if i < N % len(agents)
                                  else 0) for i in range(len(agents))]))
    if got is None:
        return None
    owner, epochs = got
    live = children.live()
    for p in owner:
        if len(live.get(p, [])) != 1:
            return None
        t, part, argv_name, env_name, epoch, aid, _ = live[p][0]
        if (argv_name, env_name, aid, epoch) != (p, p, owner[p],
                                                 str(epochs[p])):
            return None
    if set(live) != set(owner):
        return None
    return owner, epochs


def no_overlap(children):
    """No child started while another child of its partition lived, and a
    child stopped by SIGTERM wrote its stop before its successor started."""
    bad = []
    starts = sorted((s[0], s[1], pid, s[6]) for pid, s in
                    children.starts().items())
    stops = {int(w[3]): float(w[1]) for w in children.lines()
             if w[0] == "stop"}
    last = {}
    for t, p, pid, others in starts:
        if others != "-":
            bad.append("partition %s: child %d started while %s lived"
                       % (p, pid, others))
        if p in last and last[p] in stops and stops[last[p]] >= t:
            bad.append("partition %s: child %d stopped at %.3f, after %d "
                       "started at %.3f" % (p, last[p], stops[last[p]], pid, t))
        last[p] = pid
    return bad


def test_a_child_per_partition_moves_without_overlap(agents):
    children = Children(agents)
    y = yaml(run=children.path)
    duo = [agents.new("c%d" % i, extra_yaml=y) for i in range(2)]
    poll(lambda: one_child_each(children, duo), 60, interval=0.1,
         what="one child per partition under 2 agents")
    # A third agent joins: partitions move to it by graceful handovers.
    trio = duo + [agents.new("c2", extra_yaml=y)]
    poll(lambda: one_child_each(children, trio), 60, interval=0.1,
         what="one child per partition under 3 agents")
    # An owner stops with SIGTERM: its children are stopped (SIGTERM, they
    # exit) before its successors' start; none is left after it exits.
    leaver = trio[1]
    mine = [pid for pid, s in children.starts().items()
            if s[5] == leaver.id and alive(pid)]
    assert mine
    leaver.signal(15)
    rest = [trio[0], trio[2]]
    poll(lambda: one_child_each(children, rest), 30, interval=0.05,
         what="one child per partition after SIGTERM")
    leaver.proc.wait(20 * SLOW)
    assert not any(alive(pid) for pid in mine)
    stopped = {int(w[3]) for w in children.lines() if w[0] == "stop"}
    assert set(mine) <= stopped, "the leaver's children got no SIGTERM"
    # An owner killed with kill -9: its children die with it (the guard),
    # and the survivor's start only after the session could have expired.
    dead = rest[1]
    mine = [pid for pid, s in children.starts().items()
            if s[5] == dead.id and alive(pid)]
    assert mine
    dead.kill()
    poll(lambda: not any(alive(pid) for pid in mine), 10,
         what="the killed agent's children to end with it")
    poll(lambda: one_child_each(children, rest[:1]), 30, interval=0.05,
         what="one child per partition after kill -9")
    assert no_overlap(children) == []
    # The last agent stops: no child is left.
    rest[0].stop()
    left = [pid for pid in children.starts() if alive(pid)]
    assert left == [], left


def test_a_stubborn_child_is_killed_in_time_and_holds_up_no_other(agents):
    children = Children(agents)
    y = yaml(run=children.path)
    duo = [agents.new("s%d" % i, extra_yaml=y, session_timeout="4s")
           for i in range(2)]
    owner, _ = poll(lambda: one_child_each(children, duo), 60, interval=0.1,
                    what="one child per partition under 2 agents")
    leaver = duo[1]
    mine = sorted(p for p in owner if owner[p] == leaver.id)
    stubborn = mine[0]
    open(os.path.join(children.dir, "stubborn-" + stubborn), "w").close()
    pid = [p for p, s in children.starts().items()
           if s[1] == stubborn and alive(p)][0]
    died = []

    def watch():
        while alive(pid):
            time.sleep(0.005)
        died.append(time.clock_gettime(time.CLOCK_MONOTONIC))
        died.append(time.clock_gettime(time.CLOCK_BOOTTIME) * 1000)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    leaver.signal(15)
    leaver.proc.wait(30 * SLOW)
    t.join(10)
    assert died, "the stubborn child outlived its agent"

    def successors():
        succ = {s[1]: s[0] for p, s in children.starts().items()
                if s[5] == duo[0].id and s[0] > t0}
        return succ if set(succ) == set(mine) else None
    succ = poll(successors, 20, what="a successor's child per partition")
    # The stubborn child died (as the watch saw it, a little late) before
    # its partition's lease could end: the last deadline the leaver's audit
    # lines give for it (ms on CLOCK_BOOTTIME, the agent's clock); its
    # successor started only after.
    until = [int(ln.split(" until=")[1].split()[0])
             for ln in leaver.log_text(10**7).splitlines()
             if "audit: l" in ln and ln.endswith(" partition=" + stubborn)]
    assert until, "no audit line for partition %s" % stubborn
    assert died[1] < max(until), (died[1], max(until))
    assert succ[stubborn] > died[0]
    # The other partitions moved without waiting for it.
    for p in mine[1:]:
        assert succ[p] < died[0], (p, succ[p] - t0, died[0] - t0)
    assert no_overlap(children) == []
    ignored = [w for w in children.lines() if w[0] == "ignored"]
    assert [w[2] for w in ignored] == [stubborn], ignored
    assert "still running at its deadline; SIGKILL" in leaver.log_text(10**6)


def test_on_leader_change_per_partition(agents):
    """Each agent runs on_leader_change for each partition it does not
    lead, with ZKELECT_PARTITION and the leader's id and epoch, and again
    when a join moves the partition; never for its own gains."""
    log = os.path.join(agents.dir, "changes.log")
    hook = os.path.join(agents.dir, "change.sh")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\n"
                "echo \"$1 $ZKELECT_ID $ZKELECT_PARTITION $ZKELECT_ROLE "
                "$ZKELECT_LEADER_ID $ZKELECT_LEADER_EPOCH\" >> %s\n" % log)
    os.chmod(hook, 0o755)
    y = yaml(change=hook)

    def lines():
        try:
            with open(log) as f:
                return [ln.split() for ln in f.read().splitlines()]
        except FileNotFoundError:
            return []

    def told(group):
        got = settled(group, sorted([N // len(group)] * len(group)))
        if got is None:
            return None
        owner, epochs = got
        last = {}
        for w in lines():
            assert len(w) == 6 and w[0] == "p" + w[2], w
            assert w[1] != w[4], "a leader was told of itself: %s" % w
            assert w[3] == "follower", w
            last[(w[1], w[2])] = (w[4], int(w[5]))
        # What an agent leads now it may have seen another lead before.
        want = {(a.id, p): (owner[p], epochs[p])
                for a in group for p in owner if owner[p] != a.id}
        got = {k: v for k, v in last.items() if k in want}
        return owner if got == want else None

    duo = [agents.new("l%d" % i, extra_yaml=y) for i in range(2)]
    before = poll(lambda: told(duo), 60, interval=0.1,
                  what="on_leader_change per partition, 2 agents")
    trio = duo + [agents.new("l2", extra_yaml=y)]
    after = poll(lambda: told(trio), 60, interval=0.1,
                 what="on_leader_change per partition, 3 agents")
    moved = {p for p in before if before[p] != after[p]}
    assert moved and all(after[p] == "l2" for p in moved), (before, after)
