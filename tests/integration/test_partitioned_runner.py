# SPDX-License-Identifier: MIT
"""examples/partitioned-runner end to end: 3 real agents over 6 partitions,
each running one worker per owned partition (notify.run with {partition})
that writes jobs with its partition's epoch to the fenced store. The
owners are frozen with their workers (SIGSTOP, as a frozen host), killed
(kill -9) and stopped (SIGTERM); the store's log then shows that no write
from a stale owner landed: per partition, every accepted write's epoch is
at least every earlier accepted one's, and the frozen owner's workers,
woken after their partitions moved, were refused.
"""

import os
import signal
import subprocess
import sys

import pytest

from zkharness import ZKELECTCTL, poll  # noqa: E402
from partharness import (PartitionChecker, epochs, new_part_agent,  # noqa: E402
                         wait_settled)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(ROOT, "examples", "partitioned-runner", "worker.py")
STORE = os.path.join(ROOT, "examples", "partitioned-runner", "store.py")
NAMES = [str(i) for i in range(6)]


def descendants(pid):
    """Every process below pid (from /proc/*/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


class StoreLog:
    """The store's log, read back: accepted and refused writes in order."""

    def __init__(self, path):
        self.path = path

    def entries(self):
        out = []
        try:
            with open(self.path) as f:
                for line in f:
                    kind, *kv = line.split()
                    d = dict(x.split("=", 1) for x in kv)
                    for k in ("epoch", "seq", "fence", "id"):
                        if k in d:
                            d[k] = int(d[k])
                    out.append((kind, d))
        except OSError:
            pass
        return out

    def accepted(self):
        return [d for k, d in self.entries() if k == "accepted"]

    def refused(self):
        return [d for k, d in self.entries() if k == "refused"]

    def writing(self, owner_epochs):
        """Every partition has accepted writes under its owner's epoch."""
        have = {(d["part"], d["epoch"]) for d in self.accepted()}
        return all((p, e) in have for p, e in owner_epochs.items())


@pytest.fixture
def checker(agents):
    c = PartitionChecker(agents)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def store(tmp_path):
    sock = str(tmp_path / "store.sock")
    log = str(tmp_path / "store.log")
    proc = subprocess.Popen([sys.executable, STORE, "serve", "--socket", sock, "--log", log],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("store: serving")
        yield sock, StoreLog(log)
    finally:
        proc.kill()
        proc.wait()


class Host:
    """One instance of the runner: its agent and, when the workers are
    started by zkelectctl rather than by the agent, one `zkelectctl run -p`
    per partition."""

    def __init__(self, agents, aid, starter, store_sock, start=True):
        worker = [WORKER, "--store", store_sock, "--writer", aid, "--interval", "50ms"]
        if starter == "notify.run":
            extra = "notify:\n  run: [%s, --partition, \"{partition}\"]\n" % ", ".join(worker)
        else:
            extra = ""
        self.agent = new_part_agent(agents, aid, count=len(NAMES), extra_yaml=extra,
                                    start=start)
        self.id = aid
        self.runs = []
        if starter != "notify.run" and start:
            self.runs = [subprocess.Popen([ZKELECTCTL, "--socket", self.agent.socket, "run",
                                           "-q", "-p", p, "--"] + worker,
                                          stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL) for p in NAMES]

    def below(self):
        """Every process below the agent and the zkelectctl runs: guards and
        workers."""
        out = descendants(self.agent.pid)
        for r in self.runs:
            out += descendants(r.pid)
        return out

    def freeze(self):
        """SIGSTOP the whole instance: agent, zkelectctl runs, workers.
        Returns the guards and workers stopped."""
        self.agent.pause()
        for r in self.runs:
            r.send_signal(signal.SIGSTOP)
        kids = self.below()
        for k in kids:
            os.kill(k, signal.SIGSTOP)
        return kids

    def thaw(self):
        for r in self.runs:
            r.send_signal(signal.SIGCONT)
        self.agent.resume()

    def kill(self):
        self.agent.kill()
        for r in self.runs:
            r.kill()     # its guard ends the worker's tree
            r.wait()

    def stop(self):
        rc = self.agent.stop()
        for r in self.runs:
            r.send_signal(signal.SIGTERM)
            r.wait(15)
        return rc


@pytest.fixture
def hosts():
    made = []
    yield made
    for h in made:
        for r in h.runs:
            if r.poll() is None:
                r.send_signal(signal.SIGCONT)
                r.kill()
                r.wait()


@pytest.mark.parametrize("starter", ["notify.run", "zkelectctl run -p"])
def test_no_stale_write_lands(agents, checker, store, hosts, starter):
    sock, db = store
    hosts += [Host(agents, "r%d" % i, starter, sock) for i in range(3)]
    live = [h.agent for h in hosts]
    checker.start()
    o = wait_settled(live, NAMES, what="3 runners")
    e = epochs(live)
    poll(lambda: db.writing(e), 30, what="every partition's worker to write")

    # 1. A frozen host: the agent, its workers (and the zkelectctl runs)
    # SIGSTOPped together. The partitions move once its session expires;
    # its workers, woken first (the agent and zkelectctl still frozen,
    # unable to stop them), write with the old epochs: the store refuses
    # every such write.
    frozen = hosts[0]
    lost = {p: e[p] for p, a in o.items() if a == frozen.id}
    assert lost
    checker.freeze(frozen.agent)
    kids = frozen.freeze()
    assert kids, "no worker under %s" % frozen.id
    others = live[1:]
    wait_settled(others, NAMES, timeout=60, what="the others, r0 frozen")
    e2 = epochs(others)
    poll(lambda: db.writing(e2), 30, what="the new owners to write")
    for k in kids:
        try:
            os.kill(k, signal.SIGCONT)
        except ProcessLookupError:
            pass
    poll(lambda: {(d["part"], d["epoch"]) for d in db.refused()
                  if d["writer"] == frozen.id} >= set(lost.items()),
         30, what="the frozen owner's workers to be refused")
    frozen.thaw()
    o3 = wait_settled(live, NAMES, what="3 runners after the thaw")
    e3 = epochs(live)
    poll(lambda: db.writing(e3), 30, what="writes after the thaw")

    # 2. kill -9 of an owner (with its zkelectctl runs): its workers die
    # with it (their guards).
    victim = next(h for h in hosts[1:] if any(x == h.id for x in o3.values()))
    checker.freeze(victim.agent)
    victim.kill()
    live.remove(victim.agent)
    o4 = wait_settled(live, NAMES, timeout=60, what="2 runners after kill -9")
    e4 = epochs(live)
    poll(lambda: db.writing(e4), 30, what="writes after kill -9")

    # 3. SIGTERM of an owner: a graceful handover per partition.
    leaver = next(h for h in hosts if h is not victim and h.agent is live[1])
    assert leaver.stop() == 0
    live.remove(leaver.agent)
    o5 = wait_settled(live, NAMES, what="1 runner after SIGTERM")
    e5 = epochs(live)
    poll(lambda: db.writing(e5), 30, what="writes after SIGTERM")
    for h in hosts:
        if h.agent in live:
            assert h.stop() == 0

    # The store's log: per partition, accepted epochs never go back in
    # commit order; every refused write was below the partition's fence and
    # below an epoch already accepted before it.
    acc = db.accepted()
    assert acc
    high = {}
    for d in acc:
        assert d["epoch"] >= high.get(d["part"], 0), (
            "partition %s: write %d by %s under epoch %d landed after epoch %d"
            % (d["part"], d["id"], d["writer"], d["epoch"], high[d["part"]]))
        high[d["part"]] = d["epoch"]
    ref = db.refused()
    assert ref
    for d in ref:
        assert d["epoch"] < d["fence"], d
    # Each epoch wrote for one owner only, and every partition was written.
    owners = {}
    for d in acc:
        owners.setdefault((d["part"], d["epoch"]), set()).add(d["writer"])
    assert all(len(w) == 1 for w in owners.values()), owners
    assert {p for p, _ in owners} == set(NAMES)
    problems = checker.stop().violations()
    assert not problems, "\n".join(problems)
    print("store: %d accepted, %d refused; moves: freeze %d, kill %d, term %d" % (
        len(acc), len(ref), len(lost), sum(1 for p in NAMES if o4[p] != o3[p]),
        sum(1 for p in NAMES if o5[p] != o4[p])))
