# SPDX-License-Identifier: MIT
"""Helpers for partitioned agents (issue 22): their config, the settled
state (every partition owned once, the owners' shares balanced, each agent
owning exactly what it is assigned), and a checker that polls every
agent's `GET /v1/partitions` all along a test and judges the answers.

Used by test_partitions.py, test_partitioned_runner.py and
tests/bench/partitions.py.

The checker's two judgements, both sound (no alarm against a correct agent):

  * per partition, the answers' order: an answer is written at some
    instant inside its request's window [t0, t1] (test's monotonic clock);
    zkharness.check_single_leader then proves two owners at once (B said
    true between two true answers of A with A's one epoch), an epoch that
    goes back, and one epoch claimed by two agents;
  * the lease of an agent that can no longer let go (SIGSTOP, kill -9; the
    test calls freeze() just before it sends the signal, and freeze() asks
    the agent once more, so that its last answer is its state then, not one
    from before a graceful release the poller missed): that answer, if true
    with lease L, holds it until at least t0 + L (written after t0, with L
    left then). Any other agent's true answer for that
    partition written surely before that point (its t1 < t0 + L) is two
    owners at once. The windows are shrunk, never widened: the check can
    miss an overlap of less than a request's duration, it cannot invent one.
    It is not applied to an agent that hands over gracefully: such an agent
    drops its partitions before its lease ends, on purpose (rule 10).
"""

import json
import math
import time

from zkharness import (HARNESS_START_PREFIX, SLOW, AgentPoller, Sample, audit_samples_outside,
                       check_audit, check_single_leader, parse_audit, poll,
                       read_log_lines, unix_request)


def partitions_yaml(count=None, names=None):
    if names is not None:
        return "partitions:\n  names: [%s]\n" % ", ".join(names)
    return "partitions:\n  count: %d\n" % count


def new_part_agent(agents, agent_id, count=None, names=None, session_timeout="3s",
                   extra_yaml="", start=True, **kw):
    return agents.new(agent_id, session_timeout=session_timeout,
                      extra_yaml=partitions_yaml(count, names) + extra_yaml,
                      start=start, **kw)


def plist(agent, timeout=1.0):
    """The agent's /v1/partitions document, or None."""
    try:
        r = unix_request(agent.socket, "GET", "/v1/partitions", timeout=timeout)
    except Exception:  # noqa: BLE001 - refused, timed out: no answer
        return None
    if r.status != 200:
        return None
    return r.json()


def owned(doc):
    return {p["name"] for p in doc["partitions"] if p["is_leader"] is True}


def assigned(doc):
    return {p["name"] for p in doc["partitions"] if p.get("assigned") is True}


def fair(n, k):
    return n // k, -(-n // k)


def settled(live, names):
    """{partition: owner id} when the live agents have settled: each answers,
    counts len(live) members, owns exactly what it is assigned, the shares
    are floor/ceil of N/K and every partition has one owner. Else None."""
    k = len(live)
    lo, hi = fair(len(names), k)
    owner = {}
    for a in live:
        d = plist(a)
        if d is None or d.get("members") != k:
            return None
        mine = owned(d)
        if mine != assigned(d) or not lo <= len(mine) <= hi:
            return None
        for p in mine:
            if p in owner:
                return None
            owner[p] = a.id
    if set(owner) != set(names):
        return None
    return owner


def wait_settled(live, names, timeout=90, what="partitions to settle"):
    last = {}

    def probe():
        m = settled(live, names)
        if m is None:
            last["state"] = {a.id: _brief(plist(a)) for a in live}
        return m
    try:
        return poll(probe, timeout, interval=0.1, what="%s over %s" % (
            what, ", ".join(a.id for a in live)))
    except AssertionError as e:
        raise AssertionError("%s; last: %s" % (e, json.dumps(last.get("state"))[:3000])) \
            from None


def _brief(d):
    if d is None:
        return None
    return {"members": d.get("members"), "owned": sorted(owned(d)),
            "assigned": sorted(assigned(d))}


def epochs(live):
    """{partition: epoch} from the owners' answers."""
    out = {}
    for a in live:
        d = plist(a)
        for p in d["partitions"] if d else []:
            if p["is_leader"] is True:
                out[p["name"]] = p["epoch"]
    return out


def claim(observer, path, name):
    """(owner id, mzxid) of partition name's claim node, read from ZooKeeper."""
    data, stat = observer.zk.retry(observer.zk.get, "%s/partitions/%s" % (path, name))
    text = data.decode(errors="replace")
    return text.split("\n", 1)[0], stat.mzxid


def max_moves(n, k_before):
    """At most ceil(N/(K+1)) partitions move when a K+1-th agent joins."""
    return math.ceil(n / (k_before + 1))


class Answer:
    __slots__ = ("agent", "t0", "t1", "is_leader", "epoch", "lease_ms", "w0", "w1")

    def __init__(self, agent, t0, t1, is_leader, epoch, lease_ms, w0=None, w1=None):
        self.agent, self.t0, self.t1 = agent, t0, t1
        self.is_leader, self.epoch, self.lease_ms = is_leader, epoch, lease_ms
        self.w0, self.w1 = w0, w1       # the same window on the wall clock

    def sample(self):
        """As a zkharness.Sample (what check_single_leader and
        zkrecords.check_answers judge)."""
        s = Sample(self.agent, self.t0, self.t1, True, self.is_leader, self.epoch,
                   "leader" if self.is_leader else None)
        s.w_start, s.w_end = self.w0, self.w1
        return s

    def __repr__(self):
        return "<%s [%.3f,%.3f] leader=%s epoch=%s lease=%s>" % (
            self.agent, self.t0, self.t1, self.is_leader, self.epoch, self.lease_ms)


def last_before(answers, agent_id, t):
    """Agent's answer asked last (greatest t0) of those back before t."""
    before = [x for x in answers if x.agent == agent_id and x.t1 < t]
    return max(before, key=lambda x: x.t0) if before else None


class PartitionChecker(AgentPoller):
    """Polls /v1/partitions of every agent of an AgentSet (every `interval`
    s) and keeps, per partition, every answer."""

    def __init__(self, agent_set, interval=0.03, timeout=0.5):
        super().__init__(agent_set, interval, timeout)
        self.answers = {}       # partition -> [Answer]
        self.freezes = []       # (agent id, t): SIGSTOP or kill -9 at t
        self.polls = 0

    def ask(self, agent):
        t0 = time.monotonic()
        w0 = time.time()        # both before the request is sent
        try:
            r = unix_request(agent.socket, "GET", "/v1/partitions", timeout=self.timeout)
            w1 = time.time()
            t1 = time.monotonic()
            d = r.json() if r.status == 200 else None
        except Exception:  # noqa: BLE001 - no answer: leads nothing
            d = None
        if d is not None:
            with self._lock:
                self.polls += 1
                for p in d.get("partitions", []):
                    self.answers.setdefault(p["name"], []).append(Answer(
                        agent.id, t0, t1, p.get("is_leader") is True,
                        p.get("epoch"), p.get("lease_remaining_ms") or 0, w0, w1))

    def freeze(self, agent):
        """Say that agent is about to be SIGSTOPped or killed: from now on it
        cannot let go of anything before its lease ends. Its answer now is
        the last one: a partition it gave away since the poller last asked
        (a handover just before the test saw the fleet settled) is not
        taken for one it still holds."""
        self.ask(agent)
        with self._lock:
            self.freezes.append((agent.id, time.monotonic()))

    def snapshot(self):
        with self._lock:
            return {p: list(v) for p, v in self.answers.items()}

    def violations(self):
        problems = []
        answers = self.snapshot()
        for name, lst in sorted(answers.items()):
            true = [Sample(x.agent, x.t0, x.t1, True, True, x.epoch, "leader")
                    for x in lst if x.is_leader]
            for v in check_single_leader(true):
                problems.append("partition %s: %s" % (name, v))
            for aid, t in self.freezes:
                last = last_before(lst, aid, t)
                if last is None or not last.is_leader:
                    continue
                until = last.t0 + last.lease_ms / 1000.0 - 0.001
                for x in lst:
                    if x.agent != aid and x.is_leader and x.t0 > last.t1 and x.t1 < until:
                        problems.append(
                            "partition %s: %r answered true while the lease of %r "
                            "(frozen at %.3f) still ran until %.3f"
                            % (name, x, last, t, until))
                        break
        return problems[:40]

    def lease_gaps(self):
        """For each frozen agent's partition taken over: seconds from the end
        of its last lease to the successor's first true answer (t1)."""
        gaps = []
        answers = self.snapshot()
        for name, lst in answers.items():
            for aid, t in self.freezes:
                last = last_before(lst, aid, t)
                if last is None or not last.is_leader:
                    continue
                nxt = [x for x in lst if x.agent != aid and x.is_leader and x.t0 > t]
                if nxt:
                    gaps.append(nxt[0].t1 - (last.t0 + last.lease_ms / 1000.0))
        return gaps


def wait_for_answers(checker, timeout=30):
    """Until the checker has polled at least once more than now."""
    n = checker.polls
    poll(lambda: checker.polls > n + 2, timeout * SLOW, what="the checker to poll")


# --- the exact audit, per partition -------------------------------------------

def partition_logs(agents):
    """{partition: {agent id: log lines}}: each agent's `audit:` lines for that
    partition (they end with ` partition=NAME`), with the harness's start
    markers, which close a term a restart cut short."""
    out = {}
    for a in agents:
        starts = []
        by = {}
        for raw in read_log_lines(a.log_path):
            if raw.startswith(HARNESS_START_PREFIX):
                starts.append(raw)
                for lst in by.values():
                    lst.append(raw)
                continue
            i = raw.find("audit: ")
            j = raw.rfind(" partition=")
            if i < 0 or j < 0:
                continue
            name = raw[j + len(" partition="):].rstrip().rstrip('"}')
            lst = by.setdefault(name, list(starts))
            lst.append(raw)
        for name, lst in by.items():
            out.setdefault(name, {})[a.id] = lst
    return out


def audit_partitions(agents, answers=None):
    """zkharness.check_audit per partition: the terms of every agent for one
    partition, from their audit lines, never overlap and their epochs grow;
    with `answers` ({partition: [Answer]}, a PartitionChecker's snapshot),
    every is_leader true answer lies inside an audited term of that agent,
    partition and epoch. Returns (problems, figures summed over partitions)."""
    problems = []
    fig = {"partitions": 0, "terms": 0, "open_terms": 0, "handovers": 0,
           "min_gap_ms": None, "answers_checked": 0}
    plogs = partition_logs(agents)
    for name, logs in sorted(plogs.items()):
        pr, f = check_audit(logs)
        problems += ["partition %s: %s" % (name, p) for p in pr]
        fig["partitions"] += 1
        fig["terms"] += f["terms"]
        fig["open_terms"] += f["open_terms"]
        fig["handovers"] += f["handovers"]
        if f["min_gap_ms"] is not None and (fig["min_gap_ms"] is None or
                                            f["min_gap_ms"] < fig["min_gap_ms"]):
            fig["min_gap_ms"] = f["min_gap_ms"]
    for name, lst in sorted((answers or {}).items()):
        intervals = []
        for aid, lines in plogs.get(name, {}).items():
            intervals += parse_audit(lines, aid)[0]
        true = [Sample(x.agent, x.t0, x.t1, True, True, x.epoch, "leader")
                for x in lst if x.is_leader]
        fig["answers_checked"] += len(true)
        problems += ["partition %s: %s" % (name, p)
                     for p in audit_samples_outside(intervals, true)[:10]]
    return problems[:60], fig


def format_partition_audit(fig):
    return ("per-partition audit: %d partitions, %d terms (%d without an end line), "
            "%d handovers between agents, smallest gap %s; is_leader answers checked "
            "against them: %d" % (
                fig["partitions"], fig["terms"], fig["open_terms"], fig["handovers"],
                "%.3f ms" % fig["min_gap_ms"] if fig["min_gap_ms"] is not None else "n/a",
                fig["answers_checked"]))
