# SPDX-License-Identifier: MIT
"""Interop with Apache Curator's LeaderLatch (doc/design.md "Nodes in ZooKeeper").

zkelect agents and Curator LeaderLatch participants share one election: both
create `_c_<uuid>-latch-NNNNNNNNNN` EPHEMERAL_SEQUENTIAL children and the
lowest suffix leads. A Curator latch is tests/integration/curator/Latch.java,
compiled here with javac against Debian's libcurator-recipes-java jars. It
prints one line per event with System.nanoTime(), which on Linux is
CLOCK_MONOTONIC like time.monotonic(), so its leadership intervals can be
compared with the agents' /v1/status samples on one time axis.

What "leads" means on each side:
  * an agent leads at the instants it answers is_leader=true (StatusRecorder
    samples, each only known to fall inside its request window);
  * the Curator app leads from its LEADER line (printed by the isLeader()
    callback, right after hasLeadership() turned true, which LeaderLatch does
    only after its predecessor's node was deleted) to its NOTLEADER line,
    which Latch.java prints before latch.close() deletes its node.

An overlap is proven only when an agent's whole true-sample window lies
inside a Curator leadership interval; windows straddling a boundary prove
nothing (the same soundness rule as zkharness.check_single_leader).
"""

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from zkharness import CONTENDER_RE, SLOW, check_single_leader, poll

HERE = os.path.dirname(os.path.abspath(__file__))
LATCH_SRC = os.path.join(HERE, "curator", "Latch.java")
JAVA_DIR = os.environ.get("ZKELECT_TEST_JAVA_DIR", "/usr/share/java")

# Jars the latch needs, by the unversioned names Debian installs. The first
# five come with libcurator-recipes-java and its dependencies (curator-client,
# curator-framework, libzookeeper-java, libguava-java, libslf4j-java).
REQUIRED_JARS = ["curator-recipes", "curator-framework", "curator-client",
                 "zookeeper", "guava", "slf4j-api"]
OPTIONAL_JARS = ["zookeeper-jute", "slf4j-simple"]   # jute may be folded into zookeeper.jar


def _find_jar(name):
    p = os.path.join(JAVA_DIR, name + ".jar")
    if os.path.exists(p):
        return p
    versioned = sorted(glob.glob(os.path.join(JAVA_DIR, name + "-[0-9]*.jar")))
    return versioned[-1] if versioned else None


@pytest.fixture(scope="session")
def latch_classpath():
    """Compile Latch.java once per session; returns the runtime classpath."""
    javac = shutil.which("javac")
    java = shutil.which("java")
    if not javac or not java:
        pytest.skip("Curator interop needs javac and java (scripts/install-deps.sh --test installs "
                    "default-jdk-headless); not found on PATH")
    jars = {n: _find_jar(n) for n in REQUIRED_JARS + OPTIONAL_JARS}
    missing = [n for n in REQUIRED_JARS if not jars[n]]
    if missing:
        pytest.skip("Curator interop needs libcurator-recipes-java (scripts/install-deps.sh --test "
                    "installs it); missing in %s: %s"
                    % (JAVA_DIR, ", ".join(n + ".jar" for n in missing)))
    outdir = tempfile.mkdtemp(prefix="zkit-latch-", dir="/tmp")
    cp = ":".join(jars[n] for n in REQUIRED_JARS + OPTIONAL_JARS if jars[n])
    r = subprocess.run([javac, "-d", outdir, "-cp", cp, LATCH_SRC],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        shutil.rmtree(outdir, ignore_errors=True)
        pytest.fail("javac failed on %s:\n%s" % (LATCH_SRC, r.stdout))
    try:
        yield outdir + ":" + cp
    finally:
        if os.environ.get("ZKELECT_TEST_KEEP") is None:
            shutil.rmtree(outdir, ignore_errors=True)


class CuratorLatch:
    """One Latch.java process. Events are (kind, t_mono_s, rest, t_read)."""

    def __init__(self, classpath, workdir, hostport, path, latch_id, session_ms=4000):
        self.id = latch_id
        self.path = path
        self.err_path = os.path.join(workdir, "curator-%s.err" % latch_id)
        self.out_path = os.path.join(workdir, "curator-%s.out" % latch_id)
        self.events = []
        self._cv = threading.Condition()
        self._err = open(self.err_path, "wb")
        self.t_spawn = time.monotonic()
        argv = [shutil.which("java"), "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp", classpath, "Latch", hostport, path, latch_id, str(session_ms)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, start_new_session=True)
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        with open(self.out_path, "w") as log:
            for raw in self.proc.stdout:
                t_read = time.monotonic()
                log.write("%.6f %s" % (t_read, raw))
                log.flush()
                parts = raw.split(None, 3)
                if len(parts) < 3 or parts[1] != self.id:
                    continue
                ev = (parts[0], int(parts[2]) / 1e9, parts[3].strip() if len(parts) > 3 else "",
                      t_read)
                with self._cv:
                    self.events.append(ev)
                    self._cv.notify_all()

    def of(self, kind):
        with self._cv:
            return [e for e in self.events if e[0] == kind]

    def wait_event(self, kind, timeout, after=0.0, what=None):
        """First `kind` event with a timestamp after `after`."""
        def probe():
            evs = [e for e in self.of(kind) if e[1] > after]
            if evs:
                return evs[0]
            if self.proc.poll() is not None and not self._t.is_alive():
                raise AssertionError("Curator latch %s exited %s; stderr tail:\n%s"
                                     % (self.id, self.proc.returncode, self.stderr_tail()))
            return None
        return poll(probe, timeout, interval=0.01,
                    what=what or "Curator latch %s to print %s" % (self.id, kind))

    def node(self, timeout=60):
        """Full path of its contender node (waits for the NODE line; a cold
        JVM needs a few seconds)."""
        return self.wait_event("NODE", timeout)[2]

    def leading(self):
        """Its latest printed state: True after LEADER, False after NOTLEADER/CLOSING."""
        with self._cv:
            for e in reversed(self.events):
                if e[0] == "LEADER":
                    return True
                if e[0] in ("NOTLEADER", "CLOSING", "CLOSED"):
                    return False
        return False

    def ask_state(self, timeout=10):
        """hasLeadership() right now, as the JVM answers a "state" line."""
        n = len(self.of("STATE"))
        self.proc.stdin.write("state\n")
        self.proc.stdin.flush()
        poll(lambda: len(self.of("STATE")) > n, timeout, interval=0.01,
             what="%s to answer state" % self.id)
        return self.of("STATE")[n][2] == "LEADER"

    def intervals(self, end=float("inf")):
        """[(start, stop)] of its leadership, on the monotonic clock."""
        out, start = [], None
        with self._cv:
            evs = list(self.events)
        for kind, t, _, _ in evs:
            if kind == "LEADER" and start is None:
                start = t
            elif kind in ("NOTLEADER", "CLOSING", "CLOSED") and start is not None:
                out.append((start, t))
                start = None
        if start is not None:
            out.append((start, end))
        return out

    def close(self, how="eof", timeout=30):
        """Close via stdin EOF or SIGTERM; return the exit status."""
        if how == "eof":
            self.proc.stdin.close()
        else:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout * SLOW)
        self._t.join(5)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(15)
        try:
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        self._t.join(5)
        self._err.close()

    def check_clock(self):
        """Every event's JVM timestamp lies between the spawn and the moment
        we read its line: System.nanoTime() and time.monotonic() share a clock."""
        with self._cv:
            evs = list(self.events)
        assert evs, "%s printed nothing" % self.id
        bad = [e for e in evs if not (self.t_spawn <= e[1] <= e[3] + 0.001)]
        assert not bad, ("JVM nanoTime is not CLOCK_MONOTONIC here (spawned %.6f): %r"
                         % (self.t_spawn, bad[:3]))

    def stderr_tail(self, n=4000):
        try:
            with open(self.err_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""


@pytest.fixture
def curators(latch_classpath, agents, zk_hostport, election, request):
    made = []
    failed_before = request.session.testsfailed

    def new(latch_id):
        c = CuratorLatch(latch_classpath, agents.dir, zk_hostport, election, latch_id)
        made.append(c)
        return c
    try:
        yield new
    finally:
        # The call phase's report is counted before teardown runs: on a
        # failure, show what the latches printed (captured teardown output).
        failed = request.session.testsfailed > failed_before
        for c in made:
            c.kill()
            if failed:
                print("---- Curator %s stdout (%s) ----" % (c.id, c.out_path))
                try:
                    with open(c.out_path) as f:
                        print(f.read())
                except OSError:
                    pass
                print("---- Curator %s stderr tail ----\n%s" % (c.id, c.stderr_tail()))


# --------------------------------------------------------------------------
# helpers

def queue(observer, path):
    """Owners (node data) of the election's contenders, lowest first."""
    return [c[1] for c in observer.contenders(path)]


def assert_nodes_well_formed(observer, path):
    cs = observer.contenders(path)
    for name, data, stat in cs:
        assert CONTENDER_RE.match(name), "contender node name %r" % name
        # Nobody writes a contender node after creating it: a Curator latch
        # queued behind it acts only on NodeDeleted (doc/design.md "Nodes in ZooKeeper").
        assert stat.version == 0, "%s (%s) was written: version %d" % (name, data, stat.version)
    return cs


def wait_agent_leads(agent, observer, path, timeout=30, what=None):
    """Wait until `agent` leads; check its epoch is the election node's
    mzxid and the election node names it. Returns its status."""
    s = agent.wait_for(lambda s: s["is_leader"] is True and s["role"] == "leader", timeout,
                       what=what or "%s to lead" % agent.id)
    data, stat = observer.election_node(path)
    assert data == agent.id, "election node names %r, not %s" % (data, agent.id)
    assert stat.mzxid == s["epoch"], "epoch %d != election node mzxid %d" % (s["epoch"],
                                                                          stat.mzxid)
    return s


def wait_follower(agent, timeout=30, leader=None, what=None):
    """Wait until `agent` is a settled follower. leader=None: it must report
    no agent leader (a Curator latch leads and never claims)."""
    def ok(s):
        if s["role"] != "follower" or s["is_leader"] is not False or s["epoch"] is not None:
            return False
        if leader is None:
            return s["leader"] is None
        return s["leader"] is not None and s["leader"]["id"] == leader
    return agent.wait_for(ok, timeout, what=what or "%s to follow (leader %s)"
                          % (agent.id, leader))


def curator_overlaps(samples, latches):
    """Agent is_leader=true samples whose whole request window lies inside a
    Curator leadership interval: proven double leadership."""
    bad = []
    for c in latches:
        for (start, stop) in c.intervals():
            for s in samples:
                if start < s.t_start and s.t_end < stop:
                    bad.append("%s answered is_leader=true in [%.3f, %.3f] while Curator %s "
                               "led [%.3f, %.3f]" % (s.agent, s.t_start, s.t_end, c.id,
                                                     start, stop))
    # Curator latches among themselves: intervals never intersect.
    ivs = sorted((iv, c.id) for c in latches for iv in c.intervals())
    for (a, ida), (b, idb) in zip(ivs, ivs[1:]):
        if b[0] < a[1]:
            bad.append("Curator %s led [%.3f, %.3f] and %s from %.3f" % (ida, a[0], a[1],
                                                                       idb, b[0]))
    return bad


def wait_recorded(recorder, agent, epoch, timeout=20):
    """Wait until the recorder holds an is_leader=true sample of `agent`
    with `epoch`, so that every term is in the record being checked."""
    poll(lambda: any(x.agent == agent.id and x.epoch == epoch
                     for x in recorder.leader_samples()),
         timeout, what="the recorder to sample %s leading with epoch %d" % (agent.id, epoch))


def last_true(samples, agent_id):
    ts = [s for s in samples if s.agent == agent_id]
    return max(ts, key=lambda s: s.t_end) if ts else None


def first_true(samples, agent_id, after=0.0):
    ts = [s for s in samples if s.agent == agent_id and s.t_start > after]
    return min(ts, key=lambda s: s.t_start) if ts else None


# --------------------------------------------------------------------------
# (a) Curator at the front, agents behind; back to Curator at the end

def test_curator_leads_agents_follow_then_hand_back(agents, observer, election, recorder,
                                                    curators):
    recorder.start()
    c1 = curators("cur1")
    c1.node()
    c1.wait_event("LEADER", 30, what="cur1 to lead an empty election")
    # An observer agent (never a candidate) reports who leads, from the claims.
    obs = agents.new("obs", candidate=False)
    a1 = agents.new("a1")
    a1.wait_for(lambda s: s["position"] == 1, 20, what="a1 queued behind cur1")
    a2 = agents.new("a2")
    poll(lambda: queue(observer, election) == ["cur1", "a1", "a2"], 20,
         what="queue cur1, a1, a2")
    assert_nodes_well_formed(observer, election)

    # Curator leads; the agents follow and name no agent leader (none claimed).
    for a in (a1, a2):
        s = wait_follower(a, 20, leader=None, what="%s to follow behind Curator" % a.id)
        assert s["position"] >= 1
    assert c1.ask_state() is True and c1.leading()
    assert obs.status()["leader"] is None
    assert a1.leader_code() == 503 and a2.leader_code() == 503

    # Close Curator: the next agent leads, claims, epoch = election node mzxid.
    t_close = time.monotonic()
    assert c1.close("eof") == 0, c1.stderr_tail()
    assert c1.of("CLOSED"), "cur1 did not print CLOSED"
    s1 = wait_agent_leads(a1, observer, election, what="a1 to lead after Curator closed")
    t_a1 = time.monotonic()
    wait_recorded(recorder, a1, s1["epoch"])
    wait_follower(a2, 20, leader="a1")
    obs.wait_for(lambda s: s["leader"] == {"id": "a1", "epoch": s1["epoch"],
                                           "value": None}, 20,
                 what="observer to report a1")
    assert queue(observer, election) == ["a1", "a2"]

    # A Curator latch joins at the back and waits.
    c2 = curators("cur2")
    node2 = c2.node()
    assert queue(observer, election) == ["a1", "a2", "cur2"]
    assert c2.ask_state() is False

    # Stop the agents one by one: leadership passes down to Curator.
    assert a1.stop() == 0
    s2 = wait_agent_leads(a2, observer, election, what="a2 to lead after a1 stopped")
    assert s2["epoch"] > s1["epoch"]
    wait_recorded(recorder, a2, s2["epoch"])
    assert c2.ask_state() is False, "cur2 leads while a2 is ahead of it"
    assert_nodes_well_formed(observer, election)   # a2 claimed without writing its node

    t_stop_a2 = time.monotonic()
    assert a2.stop() == 0
    lead2 = c2.wait_event("LEADER", 30, what="cur2 (behind a2) to lead once a2 stopped")
    t_c2 = time.monotonic()
    assert lead2[1] > t_stop_a2
    assert c2.ask_state() is True
    assert queue(observer, election) == ["cur2"]
    assert node2.rsplit("/", 1)[1] == observer.contenders(election)[0][0]
    # a2 let go by naming its successor, the latch, in the same multi that
    # deleted its node: the observer reports cur2 under that write's mzxid.
    so = obs.wait_for(lambda s: s["leader"] is not None and s["leader"]["id"] == "cur2", 20,
                      what="observer to report cur2, named by a2 on its way out")
    data, stat = observer.election_node(election)
    assert data == "cur2" and stat.mzxid == so["leader"]["epoch"] > s2["epoch"]

    recorder.stop()
    c1.check_clock()
    c2.check_clock()
    samples = recorder.leader_samples()
    assert not [s for s in samples if s.agent == "obs"], "the observer answered is_leader"
    v = check_single_leader(samples) + curator_overlaps(samples, [c1, c2])
    assert not v, "\n".join(v)
    # a1 first led after Curator let go; cur2 first led after a2's last true answer began.
    f1 = first_true(samples, "a1")
    assert f1 is not None and f1.t_end > c1.of("CLOSING")[0][1]
    l2 = last_true(samples, "a2")
    assert l2 is not None and l2.t_start < lead2[1]
    print("curator->agent: a1 led %.0f ms after cur1 closed; agent->curator: cur2 led %.0f ms "
          "after SIGTERM of a2; %d samples" % ((t_a1 - t_close) * 1000,
                                               (lead2[1] - t_stop_a2) * 1000,
                                               len(recorder.samples)))
    assert t_c2 >= lead2[1]
    assert c2.close("sigterm") in (0, 143), c2.stderr_tail()
    assert c2.of("CLOSED"), "cur2 did not close its latch on SIGTERM"
    assert queue(observer, election) == [], "orphan contender nodes"


# --------------------------------------------------------------------------
# (b) a mixed queue: agent, Curator, agent, Curator, agent

def test_mixed_queue_hands_down_without_overlap(agents, observer, election, recorder,
                                               curators):
    recorder.start()
    a1 = agents.new("a1")
    s = wait_agent_leads(a1, observer, election, what="a1 to lead alone")
    epochs = [s["epoch"]]
    wait_recorded(recorder, a1, s["epoch"])
    c1 = curators("cur1")
    c1.node()
    a2 = agents.new("a2")
    a2.wait_for(lambda s: s["position"] == 2, 20, what="a2 queued third")
    c2 = curators("cur2")
    c2.node()
    a3 = agents.new("a3")
    a3.wait_for(lambda s: s["position"] == 4, 20, what="a3 queued fifth")
    poll(lambda: queue(observer, election) == ["a1", "cur1", "a2", "cur2", "a3"], 20,
         what="queue a1, cur1, a2, cur2, a3")
    assert_nodes_well_formed(observer, election)
    for a in (a2, a3):
        wait_follower(a, 20, leader="a1")
    assert not c1.leading() and not c2.leading()

    handovers = []

    # a1 -> cur1: Curator must be woken by NodeDeleted of a1's node.
    t0 = time.monotonic()
    assert a1.stop() == 0
    ev = c1.wait_event("LEADER", 30, what="cur1 to lead after a1 stopped (woken by "
                                          "NodeDeleted of a1's node)")
    handovers.append(("a1->cur1", ev[1] - t0))
    assert ev[1] > t0
    # a1 named cur1 (its successor) on its way out: the followers say so.
    for a in (a2, a3):
        wait_follower(a, 20, leader="cur1", what="%s to report cur1, named by a1" % a.id)
    assert not c2.leading()
    assert queue(observer, election) == ["cur1", "a2", "cur2", "a3"]

    # cur1 -> a2 (closed by SIGTERM: its shutdown hook closes the latch).
    t0 = time.monotonic()
    rc = c1.close("sigterm")
    assert rc in (0, 143), "cur1 exited %s on SIGTERM:\n%s" % (rc, c1.stderr_tail())
    assert c1.of("CLOSED")
    s = wait_agent_leads(a2, observer, election, what="a2 to lead after cur1 closed")
    handovers.append(("cur1->a2", time.monotonic() - t0))
    assert s["epoch"] > epochs[-1]
    epochs.append(s["epoch"])
    wait_recorded(recorder, a2, s["epoch"])
    wait_follower(a3, 20, leader="a2")
    assert c2.ask_state() is False
    assert_nodes_well_formed(observer, election)

    # a2 -> cur2
    t0 = time.monotonic()
    assert a2.stop() == 0
    ev = c2.wait_event("LEADER", 30, what="cur2 to lead after a2 stopped")
    handovers.append(("a2->cur2", ev[1] - t0))
    wait_follower(a3, 20, leader="cur2")

    # cur2 -> a3 (closed by stdin EOF)
    t0 = time.monotonic()
    assert c2.close("eof") == 0, c2.stderr_tail()
    s = wait_agent_leads(a3, observer, election, what="a3 to lead after cur2 closed")
    handovers.append(("cur2->a3", time.monotonic() - t0))
    assert s["epoch"] > epochs[-1]
    epochs.append(s["epoch"])
    wait_recorded(recorder, a3, s["epoch"])
    assert queue(observer, election) == ["a3"]

    recorder.stop()
    c1.check_clock()
    c2.check_clock()
    samples = recorder.leader_samples()
    v = check_single_leader(samples) + curator_overlaps(samples, [c1, c2])
    assert not v, "\n".join(v)
    # Order across kinds, soundly: no agent answered true in a request it sent
    # after a Curator latch that followed it took over ...
    for prev, cur in (("a1", c1), ("a2", c2)):
        start = cur.of("LEADER")[0][1]
        late = [x for x in samples if x.agent == prev and x.t_start > start]
        assert not late, "%s answered is_leader after %s led: %r" % (prev, cur.id, late[:3])
    # ... and no successor agent answered true in a request that ended before
    # the Curator latch ahead of it announced it was closing.
    for cur, nxt in ((c1, "a2"), (c2, "a3")):
        closing = cur.of("CLOSING")[0][1]
        early = [x for x in samples if x.agent == nxt and x.t_end < closing]
        assert not early, "%s led before %s let go: %r" % (nxt, cur.id, early[:3])
    # Every agent term appears in the samples with its epoch.
    seen = sorted({x.epoch for x in samples})
    assert seen == epochs, "epochs sampled %r, expected %r" % (seen, epochs)
    print("handovers: %s; epochs %s; %d samples, %d leader answers"
          % (", ".join("%s %.0f ms" % (n, d * 1000) for n, d in handovers),
             [hex(e) for e in epochs], len(recorder.samples), len(samples)))
    assert len(recorder.samples) > 100
    assert a3.stop() == 0
    assert queue(observer, election) == []


# --------------------------------------------------------------------------
# (c) resign across kinds: a fresh term, and no stale naming of the resigner

def test_resign_to_curator_and_back(agents, observer, election, recorder, curators):
    recorder.start()
    a1 = agents.new("a1")
    s1 = wait_agent_leads(a1, observer, election, what="a1 to lead alone")
    wait_recorded(recorder, a1, s1["epoch"])
    c1 = curators("cur1")
    c1.node()
    a2 = agents.new("a2")
    wait_follower(a2, 20, leader="a1")
    poll(lambda: queue(observer, election) == ["a1", "cur1", "a2"], 20,
         what="queue a1, cur1, a2")

    # a1 resigns and rejoins at the back at once: cur1 leads, named by a1 in
    # the multi that deleted a1's node; every agent reports cur1.
    r = a1.request("POST", "/v1/resign?hold=0s", timeout=5)
    assert r.status == 200, r.body
    ev = c1.wait_event("LEADER", 30, what="cur1 to lead after a1 resigned")
    poll(lambda: queue(observer, election) == ["cur1", "a2", "a1"], 20,
         what="a1 to rejoin at the back")
    for a in (a1, a2):
        wait_follower(a, 20, leader="cur1", what="%s to report cur1 while it leads" % a.id)
    data, _ = observer.election_node(election)
    assert data == "cur1", "a1 did not name its successor on its way out"
    assert_nodes_well_formed(observer, election)

    # cur1 leaves: a2 leads with a new epoch; then a2 stops and a1 leads in a
    # new term, its epoch above both earlier ones.
    assert c1.close("eof") == 0, c1.stderr_tail()
    s2 = wait_agent_leads(a2, observer, election, what="a2 to lead after cur1 closed")
    assert s2["epoch"] > s1["epoch"]
    wait_recorded(recorder, a2, s2["epoch"])
    wait_follower(a1, 20, leader="a2")
    assert a2.stop() == 0
    s3 = wait_agent_leads(a1, observer, election, what="a1 to lead again")
    assert s3["epoch"] > s2["epoch"]
    wait_recorded(recorder, a1, s3["epoch"])

    recorder.stop()
    c1.check_clock()
    samples = recorder.leader_samples()
    v = check_single_leader(samples) + curator_overlaps(samples, [c1])
    assert not v, "\n".join(v)
    late = [x for x in samples if x.agent == "a1" and x.epoch == s1["epoch"]
            and x.t_start > ev[1]]
    assert not late, "a1 answered with its old term after resigning: %r" % late[:3]
    assert sorted({x.epoch for x in samples}) == [s1["epoch"], s2["epoch"], s3["epoch"]]
    assert a1.stop() == 0
    assert queue(observer, election) == []


# --------------------------------------------------------------------------
# the overlap checker itself (no processes)

class _FakeLatch:
    def __init__(self, latch_id, ivs):
        self.id = latch_id
        self._ivs = ivs

    def intervals(self):
        return self._ivs


def test_curator_overlap_checker():
    from zkharness import Sample
    cur = _FakeLatch("c", [(10.0, 20.0)])
    # Before and after, and windows straddling a boundary: no proof of overlap.
    ok = [Sample("a", 9.0, 9.5, True, True, 1), Sample("a", 9.9, 10.1, True, True, 1),
          Sample("b", 19.9, 20.2, True, True, 2), Sample("b", 21.0, 21.1, True, True, 2)]
    assert curator_overlaps(ok, [cur]) == []
    bad = ok + [Sample("a", 12.0, 12.1, True, True, 1)]
    assert len(curator_overlaps(bad, [cur])) == 1
    # An open interval (still leading at the end) counts to infinity.
    assert len(curator_overlaps([Sample("b", 30.0, 30.1, True, True, 2)],
                                [_FakeLatch("c", [(10.0, float("inf"))])])) == 1
    # Two latches whose intervals intersect.
    assert len(curator_overlaps([], [cur, _FakeLatch("d", [(19.0, 25.0)])])) == 1
