# SPDX-License-Identifier: MIT
"""examples/prometheus/zkelect-rules.yml (issue 32, item 5): `promtool
check rules` passes, and every alert fires against a real Prometheus
(Debian's `prometheus`) scraping real agents, each for a fault staged for
real, and only where it is staged.

Prometheus loads a copy of the rules in which every `for:` is 0s and the
5-minute rate windows are 10 s (a test cannot wait minutes); the
expressions are otherwise the file's. It scrapes and evaluates every
250 ms. Each test polls Prometheus's /api/v1/alerts until the alerts
expected are firing, with a deadline.

The faults: an election whose agents are all killed (no leader); a
leader whose link to ZooKeeper is cut, T = 10 s, so that its lease runs
down for 6.7 s (low lease, then lapsed); a leader whose round trips
become 0.06 T (slow renewals, a figure it keeps its term at:
test_slowzk.py); a candidate whose round trips are 0.25 T (slow
ZooKeeper: it does not lead); a candidate under a missing chroot (cannot
lead); a member of a partitioned election behind a 0.25 T link (its
partitions unowned); members with 4 and 6 partitions (they disagree); two
members with one id; a leader whose stderr nobody reads (log lines
dropped); a leader at its descriptor limit with idle local clients
(descriptor pressure, staged as test_grayfail.py stages it).

Two leaders of one election cannot be staged for real: zkelect exists so
that they never happen. Two leaders of two elections are made to look
like one election by Prometheus itself (metric_relabel_configs rewrites
the second's `election` label), which is what an operator sees who
scrapes two ensembles that use one path.

Skipped where prometheus is not installed (scripts/install-deps.sh)."""

import calendar
import fcntl
import os
import resource
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
import uuid

import pytest
import yaml

import zkharness
from promharness import Prometheus
from zkharness import ZKELECTD, free_port, poll

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(TOP, "examples/prometheus/zkelect-rules.yml")
T = 2.0
F_SETPIPE_SZ = 1031

pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None,
                                reason="prometheus not installed "
                                "(scripts/install-deps.sh installs Debian's package)")


def rules():
    with open(RULES) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


def test_rules_pass_promtool_and_each_is_documented():
    r = subprocess.run(["promtool", "check", "rules", RULES], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    names = [x["alert"] for x in rules()]
    assert "SUCCESS: %d rules found" % len(names) in r.stdout, r.stdout
    with open(os.path.join(TOP, "README.md")) as f:
        readme = f.read()
    section = readme[readme.index("### Alerts"):]
    section = section[:section.index("\n### ", 1)]
    for x in rules():
        assert x["labels"]["severity"] in ("warning", "critical"), x
        assert x["annotations"]["summary"] and x["annotations"]["description"], x
        assert "`%s`" % x["alert"] in section, "README's Alerts omits %s" % x["alert"]


def rules_for_tests(dirname, fors=None):
    """The rules as the tests load them: `for: 0s` (or fors[alert]),
    5-minute windows 10 s."""
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    for g in doc["groups"]:
        for r in g["rules"]:
            r["for"] = (fors or {}).get(r["alert"], "0s")
            r["expr"] = r["expr"].replace("[5m]", "[10s]")
    path = os.path.join(dirname, "rules.yml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path



class Elections:
    """AgentSets, one per election path (or per set of agents sharing a
    path but not a directory), reaped together; their logs in the report."""

    def __init__(self, zk_hostport, request):
        self.zk = zk_hostport
        self.request = request
        self.sets = []

    def new(self, path=None):
        s = zkharness.AgentSet(self.zk, path or zkharness.new_election_path())
        self.sets.append(s.logs_in_report(self.request))
        return s

    def cleanup(self):
        for s in self.sets:
            s.cleanup()


@pytest.fixture
def elections(zk_hostport, request):
    e = Elections(zk_hostport, request)
    try:
        yield e
    finally:
        e.cleanup()


def agent(aset, agent_id, **kw):
    """An agent of aset with a loopback listener; returns (agent, target)."""
    port = free_port()
    a = aset.new(agent_id, listen="127.0.0.1:%d" % port, **kw)
    return a, "127.0.0.1:%d" % port


def active(prom, alert, **labels):
    """Firing alerts named `alert` whose labels include `labels`."""
    return [a for a in prom.alerts() if a["alertname"] == alert and
            all(a.get(k) == v for k, v in labels.items())]


def wait_firing(prom, expected, forbidden=(), timeout=60, interval=0.25):
    """Polls until each (alert, labels) of expected is firing and none of
    forbidden is; returns the firing alerts."""
    last = [[]]

    def probe():
        firing = prom.alerts()
        last[0] = firing

        def has(alert, labels):
            return any(a["alertname"] == alert and
                       all(a.get(k) == v for k, v in labels.items()) for a in firing)
        if all(has(n, ls) for n, ls in expected) and \
                not any(has(n, ls) for n, ls in forbidden):
            return firing or True
        return None
    try:
        return poll(probe, timeout, interval=interval,
                    what="firing %s, not %s" % (expected, list(forbidden)))
    except AssertionError as e:
        raise AssertionError("%s; firing: %s" % (e, sorted(
            "%s %s" % (a["alertname"], {k: v for k, v in a.items()
                                        if k in ("id", "election", "reason")})
            for a in last[0]))) from None


def test_election_alerts_fire_where_staged(elections, proxies, zk_hostport, tmp_path):
    gone, lapse, slowrenew, slowzk, twin_a, twin_b = (elections.new() for _ in range(6))
    a1, ta1 = agent(gone, "a1")
    pl = proxies()
    l1, tl1 = agent(lapse, "l1", zk_hostport=pl.hostport, session_timeout="10s")
    pr = proxies()
    r1, tr1 = agent(slowrenew, "r1", zk_hostport=pr.hostport)
    ps = proxies()
    ps.delay(int(0.25 * T * 1000 / 2))
    s1, ts1 = agent(slowzk, "s1", zk_hostport=ps.hostport)
    chroot = "/zkelect-alerts-%s" % uuid.uuid4().hex[:8]
    nochroot = elections.new()
    c1, tc1 = agent(nochroot, "c1", zk_hostport=zk_hostport + chroot)
    t1, tt1 = agent(twin_a, "t1")
    t2, tt2 = agent(twin_b, "t2")
    twins = {"job_name": "twins", "static_configs": [{"targets": [tt1, tt2]}],
             # t2's election is taken for t1's: two leaders of "one" election.
             "metric_relabel_configs": [{"source_labels": ["election"],
                                         "regex": twin_b.path, "target_label": "election",
                                         "replacement": twin_a.path}]}
    prom = Prometheus([ta1, tl1, tr1, ts1, tc1], interval="250ms", jobs=[twins],
                      rules=[rules_for_tests(str(tmp_path))])
    try:
        for a in (a1, l1, r1, t1, t2):
            a.wait_for(lambda s: s["is_leader"], 30, what="leads")
        s1.wait_for(lambda s: s["reason"] and "round trips" in s["reason"], 30,
                    what="the slow reason")
        c1.wait_for(lambda s: s["reason"] and "chroot" in s["reason"], 30,
                    what="the chroot reason")
        # Before any fault: what is staged from the start fires, and
        # nothing fires for the healthy elections.
        healthy = [("ZkelectNoLeader", {"election": e.path})
                   for e in (gone, lapse, slowrenew, twin_a)]
        healthy += [(n, {"id": i}) for n in ("ZkelectLeaseLow", "ZkelectLeaseLapsed",
                                              "ZkelectRenewalsSlow", "ZkelectCannotLead",
                                              "ZkelectSlowZooKeeper")
                    for i in ("a1", "l1", "r1", "t1", "t2")]
        wait_firing(prom, [
            ("ZkelectSlowZooKeeper", {"id": "s1", "election": slowzk.path}),
            ("ZkelectNoLeader", {"election": slowzk.path}),
            ("ZkelectCannotLead", {"id": "c1", "reason": "no_chroot",
                                   "election": chroot + nochroot.path}),
            ("ZkelectNoLeader", {"election": chroot + nochroot.path}),
            ("ZkelectTwoLeaders", {"election": twin_a.path}),
        ], forbidden=healthy, timeout=60)
        assert not active(prom, "ZkelectTwoLeaders", election=gone.path)

        # The faults.
        a1.kill()
        pl.blackhole()
        pr.delay(int(0.06 * T * 1000 / 2))
        t0 = time.monotonic()
        # The cut leader's lease runs down from at most 6.7 s; the alert
        # holds for its last second, while it still leads.
        wait_firing(prom, [("ZkelectLeaseLow", {"id": "l1", "election": lapse.path})],
                    timeout=30, interval=0.05)
        print("ZkelectLeaseLow fired %.1f s after the cut" % (time.monotonic() - t0))
        wait_firing(prom, [
            ("ZkelectLeaseLapsed", {"id": "l1"}),
            ("ZkelectNoLeader", {"election": lapse.path}),
            ("ZkelectNoLeader", {"election": gone.path}),
            ("ZkelectRenewalsSlow", {"id": "r1", "election": slowrenew.path}),
        ], forbidden=[("ZkelectNoLeader", {"election": slowrenew.path})], timeout=60)
        print("the rest fired %.1f s after the faults" % (time.monotonic() - t0))
        # The slow leader kept its term through it.
        assert r1.status()["is_leader"]
    finally:
        prom.stop()


def start_agent(a, stderr=None, nofile=None):
    """Agent.start with stderr of our choosing and a descriptor limit (as
    test_grayfail.py starts its agents)."""
    a.out = open(a.log_path, "ab")
    a.starts += 1

    def pre():
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    a.proc = subprocess.Popen([ZKELECTD, "-c", a.config], stdin=subprocess.DEVNULL,
                              stdout=a.out, stderr=stderr if stderr is not None else a.out,
                              start_new_session=True, preexec_fn=pre)
    a.wait_for(lambda s: True, 20, what="API socket to answer /v1/status")
    return a


CHATTY = ("notify:\n"
          "  run: [\"/bin/sh\", \"-c\", \"while :; do seq 200; sleep 0.1; done\"]\n")


def test_partition_and_host_alerts_fire_where_staged(elections, proxies, tmp_path):
    unowned, disagree, logs, fds = (elections.new() for _ in range(4))
    dup_path = zkharness.new_election_path()
    dups = [elections.new(dup_path) for _ in range(2)]
    pu = proxies()
    pu.delay(int(0.25 * T * 1000 / 2))
    u1, tu1 = agent(unowned, "u1", zk_hostport=pu.hostport,
                    extra_yaml="partitions:\n  count: 4\n")
    d1, td1 = agent(disagree, "d1", extra_yaml="partitions:\n  count: 4\n")
    d2, td2 = agent(disagree, "d2", extra_yaml="partitions:\n  count: 6\n")
    twins = [agent(s, "dup", extra_yaml="partitions:\n  count: 4\n") for s in dups]
    # A leader whose stderr is a pipe, read until the fault, and a chatty
    # child.
    r, w = os.pipe()
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
    reading = threading.Event()
    reading.set()

    def reader():
        while True:
            reading.wait()
            try:
                if not os.read(r, 65536):
                    return
            except OSError:
                return
    drain = threading.Thread(target=reader, daemon=True)
    drain.start()
    port = free_port()
    g1 = logs.new("g1", start=False, listen="127.0.0.1:%d" % port, extra_yaml=CHATTY)
    start_agent(g1, stderr=w)
    os.close(w)
    tg1 = "127.0.0.1:%d" % port
    # A leader at a descriptor limit of 64.
    port = free_port()
    f1 = fds.new("f1", start=False, listen="127.0.0.1:%d" % port, log_level="info")
    start_agent(f1, nofile=64)
    tf1 = "127.0.0.1:%d" % port
    hogs = []
    prom = Prometheus([tu1, td1, td2, tg1, tf1] + [t for _, t in twins],
                      interval="250ms", rules=[rules_for_tests(str(tmp_path))])
    try:
        for a in (g1, f1):
            a.wait_for(lambda s: s["is_leader"], 30, what="leads")
        u1.wait_for(lambda s: s["partitions"]["assigned"] == 4, 30, what="4 assigned")
        for a in (d1, d2):
            a.wait_for(lambda s: s["reason"] and "partitions" in s["reason"], 30,
                       what="the members disagree")
        healthy = [("ZkelectPartitionsUnowned", {"election": disagree.path}),
                   ("ZkelectNoLeader", {"election": disagree.path})]
        healthy += [(n, {"id": i}) for n in ("ZkelectLogLinesDropped",
                                              "ZkelectDescriptorPressure",
                                              "ZkelectDuplicateId")
                    for i in ("g1", "f1", "d1", "d2", "u1")]
        wait_firing(prom, [
            ("ZkelectPartitionsUnowned", {"election": unowned.path}),
            ("ZkelectNoLeader", {"election": unowned.path}),
            ("ZkelectPartitionsDisagree", {"id": "d1", "election": disagree.path}),
            ("ZkelectPartitionsDisagree", {"id": "d2", "election": disagree.path}),
            ("ZkelectDuplicateId", {"id": "dup", "election": dup_path}),
        ], forbidden=healthy, timeout=60)
        # Both agents that share the id say so, each in its own time (each
        # sees the other at its next listing); the first firing is enough
        # for wait_firing, so the second is waited for here.
        poll(lambda: len(active(prom, "ZkelectDuplicateId", id="dup")) == 2, 30,
             interval=0.25, what="ZkelectDuplicateId firing for both agents named dup")
        # The union of what the members run (6) is owned: not "unowned".
        # (Polled: a scrape that times out on this loaded machine resolves
        # it for an evaluation.)
        def unowned_value():
            return [float(a["value"]) for a in prom.api("alerts")["alerts"]
                    if a["labels"]["alertname"] == "ZkelectPartitionsUnowned"
                    and a["labels"]["election"] == unowned.path
                    and a["state"] == "firing"]
        assert poll(unowned_value, 30, interval=0.25,
                    what="ZkelectPartitionsUnowned firing") == [4.0]

        # Nobody reads g1's stderr any more: its child's lines fill the
        # pipe, then the agent's queue. f1 at its limit: idle local clients
        # take every descriptor.
        reading.clear()
        for _ in range(64 + 40):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(f1.socket)
            hogs.append(s)
        wait_firing(prom, [
            ("ZkelectLogLinesDropped", {"id": "g1", "election": logs.path}),
            ("ZkelectDescriptorPressure", {"id": "f1", "election": fds.path}),
        ], timeout=60)
    finally:
        for s in hogs:
            s.close()
        prom.stop()
        # With g1 gone the pipe has no writer: the reader sees its end.
        g1.kill()
        reading.set()
        drain.join(10)
        os.close(r)


def _rfc3339(ts):
    """Seconds since the epoch of Prometheus's "2026-12-06T22:10:00.123456789Z"."""
    day, _, frac = ts.rstrip("Z").partition(".")
    whole = calendar.timegm(time.strptime(day, "%Y-%m-%dT%H:%M:%S"))
    return whole + (float("0." + frac) if frac else 0.0)


def test_handovers_do_not_fire_two_leaders(agents, tmp_path):
    """Prometheus scrapes each agent at a moment of its own, so a handover
    can show the old leader's last sample beside the new one's first, for
    up to a scrape interval: ZkelectTwoLeaders with a `for` of 1 s (four
    intervals here) never fires through 10 resigns, each waited for until
    Prometheus sees the new leader alone and has evaluated the rule since.
    And no sample of an earlier term was taken after one of a later term
    was answered: the overlaps are the scrapes' skew, not two leaders."""
    ports = [free_port() for _ in range(2)]
    duo = [agents.new("h%d" % i, listen="127.0.0.1:%d" % p) for i, p in enumerate(ports)]
    prom = Prometheus(["127.0.0.1:%d" % p for p in ports], interval="250ms",
                      rules=[rules_for_tests(str(tmp_path),
                                             {"ZkelectTwoLeaders": "1s"})])
    seen = {"pending": 0, "firing": [], "errors": []}
    done = threading.Event()

    def watch():
        while not done.is_set():
            try:
                for a in prom.api("alerts")["alerts"]:
                    if a["labels"]["alertname"] == "ZkelectTwoLeaders":
                        if a["state"] == "firing":
                            seen["firing"].append(a)
                        else:
                            seen["pending"] += 1
            except (OSError, AssertionError, ValueError) as e:
                seen["errors"].append(repr(e))
            done.wait(0.05)

    def evaluated_inactive_since(w):
        for g in prom.api("rules", type="alert")["groups"]:
            for r in g["rules"]:
                if r["name"] == "ZkelectTwoLeaders":
                    return _rfc3339(r["lastEvaluation"]) > w and r["alerts"] == []
        raise AssertionError("no rule ZkelectTwoLeaders loaded")
    t = threading.Thread(target=watch, daemon=True)
    try:
        t0 = time.time()
        t.start()
        for _ in range(10):
            leader = agents.wait_one_leader(30)
            # The other is queued again (a resign rejoins at the back).
            epoch = leader.wait_for(lambda s: s["candidates"] == 2, 30,
                                    what="the other queued")["epoch"]
            assert leader.request("POST", "/v1/resign", timeout=10).status == 200
            def successor():
                for a in duo:
                    st = a.status()
                    if a is not leader and st and st["is_leader"] and st["epoch"] > epoch:
                        return a
            new = poll(successor, 30, what="the next leader")
            port = ports[duo.index(new)]
            # Prometheus has scraped both since, and evaluated the rule
            # after that: each overlap is judged on its own, not run into
            # the next handover's.
            poll(lambda: [m["instance"] for m, _ in prom.query("zkelect_is_leader == 1")]
                 == ["127.0.0.1:%d" % port], 30, what="prometheus sees the new leader alone")
            w = time.time()
            poll(lambda: evaluated_inactive_since(w), 30,
                 what="ZkelectTwoLeaders evaluated, inactive, after the new leader alone")
        done.set()
        t.join(10)
        t1 = time.time()
        counts = prom.api("query_range", query="count(zkelect_is_leader == 1)",
                          start="%.3f" % t0, end="%.3f" % t1, step="0.05")["result"]
        runs, run = [], 0
        for _, v in counts[0]["values"] + [(0, "1")]:
            if float(v) > 1:
                run += 1
            elif run:
                runs.append(round(run * 0.05, 2))
                run = 0
        # Every sample as scraped: its scrape's start (Prometheus's
        # timestamp) and how long the scrape took. The agent answered
        # within that span, so an earlier term's sample started after a
        # later term's scrape had ended would be two leaders at once.
        span = "[%ds]" % (int(t1 - t0) + 10)
        raw = {}
        for q, key in (("zkelect_is_leader", "leader"), ("zkelect_epoch", "epoch"),
                       ('scrape_duration_seconds{job="zkelect"}', "took")):
            for r in prom.api("query", query=q + span, time="%.3f" % t1)["result"]:
                for ts, v in r["values"]:
                    raw.setdefault((r["metric"]["instance"], ts), {})[key] = float(v)
        terms = sorted((x["epoch"], ts, ts + x["took"], inst) for (inst, ts), x in raw.items()
                       if x.get("leader") == 1 and len(x) == 3)
        # Each of the 10 new terms was seen (the first may end before the
        # first scrape).
        assert len({e for e, _, _, _ in terms}) >= 10, \
            " ".join("%d" % e for e in sorted({e for e, _, _, _ in terms}))
        # (Prometheus keeps a sample's time in whole milliseconds.)
        late = [(a, b) for a in terms for b in terms if a[0] < b[0] and a[1] >= b[2] + 0.002]
        missed = [line for line in urllib.request.urlopen(prom.url + "/metrics", timeout=30)
                  .read().decode().splitlines()
                  if line.startswith("prometheus_rule_group_iterations_missed_total")]
        print("10 handovers: two leaders seen %d times, for %s s; ZkelectTwoLeaders "
              "pending in %d looks, firing in %d; %d term samples; %s; watch errors %s"
              % (len(runs), runs, seen["pending"], len(seen["firing"]), len(terms),
                 missed, seen["errors"]))
        assert late == [], late
        # A rule evaluated late sees the overlap longer than it was: fired
        # only through evaluations Prometheus missed (it stalled), the
        # samples' order above is the verdict.
        stalled = any(float(line.split()[-1]) > 0 for line in missed)
        assert seen["firing"] == [] or stalled, (seen["firing"], missed)
    finally:
        done.set()
        prom.stop()
