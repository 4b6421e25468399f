# SPDX-License-Identifier: MIT
"""zkelectctl against real agents and a real ZooKeeper: `run` across freezes
of the agent and of zkelectctl itself, what `run` says when it stops its
command, the one-shot checks (`is-leader`, `wait --timeout 0`), and the
`members` view read straight from ZooKeeper.

`run`'s command here is a small shell script that appends "start" and "stop"
lines to a marker file; the tests read them back.
"""

import json
import os
import signal
import stat
import subprocess
import threading
import time
import uuid

import pytest

from zkharness import ZKELECTCTL, SLOW, poll  # noqa: E402


# $1 = marker file, $2 = "term" to stop on SIGTERM, "ignore" to need SIGKILL.
COMMAND = """#!/bin/sh
echo "$(date +%s.%N) start epoch=$ZKELECT_EPOCH pid=$$" >> "$1"
if [ "$2" = ignore ]; then
    trap '' TERM
else
    trap 'echo "$(date +%s.%N) stop pid=$$" >> "$1"; exit 0' TERM
fi
while :; do sleep 0.05; done
"""


def ctl(sock, *args, timeout=30):
    return subprocess.run([ZKELECTCTL, "--socket", sock] + list(args),
                          capture_output=True, text=True, timeout=timeout * SLOW)


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Run:
    """`zkelectctl run` of the marker command; its stderr kept with times."""

    def __init__(self, agent, tmp_path, on_term="term"):
        self.marks = tmp_path / ("run-%s-%s.txt" % (agent.id, uuid.uuid4().hex[:6]))
        script = tmp_path / "command.sh"
        if not script.exists():
            script.write_text(COMMAND)
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.proc = subprocess.Popen(
            [ZKELECTCTL, "--socket", agent.socket, "run", "--", str(script),
             str(self.marks), on_term],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def stderr(self):
        return "\n".join(text for _, text in self.lines)

    def events(self):
        """[(kind, {key: value})] from the marker file, in order."""
        out = []
        if not self.marks.exists():
            return out
        for line in self.marks.read_text().splitlines():
            parts = line.split()
            out.append((parts[1], dict(p.split("=", 1) for p in parts[2:])))
        return out

    def starts(self):
        return [kv for kind, kv in self.events() if kind == "start"]

    def running_under(self, epoch):
        """The pid of the command if it runs now under epoch, else None."""
        ev = self.events()
        if not ev or ev[-1][0] != "start" or ev[-1][1]["epoch"] != str(epoch):
            return None
        pid = int(ev[-1][1]["pid"])
        return pid if alive(pid) else None

    def wait_running(self, epoch, timeout, what):
        """Poll until the command runs under epoch; return its pid."""
        try:
            return poll(lambda: self.running_under(epoch), timeout, what=what)
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.explain())) from None

    def explain(self):
        return "marks: %s\nzkelectctl said:\n%s" % (self.events(), self.stderr())

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(15 * SLOW)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._t.join(5)
        return rc


@pytest.fixture
def runs():
    made = []
    yield made
    for r in made:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()
        for kv in r.starts():
            if alive(int(kv["pid"])):
                os.kill(int(kv["pid"]), signal.SIGKILL)


def lease_ms(agent):
    """The lease the agent can hold at most after a renewal (2T/3)."""
    return agent.status()["session"]["timeout_ms"] * 2 // 3


# --- run: the lease is measured from answers that were not held back -------

def test_run_keeps_its_command_through_a_short_agent_freeze(agents, tmp_path, runs):
    # Issue 16, bug 2: a 1.2 s SIGSTOP of the agent made `run` stop its
    # command ("no longer leading (leader)") and never start it again while
    # the agent went on leading under the same epoch.
    a = agents.new("a1", session_timeout="4s")
    e1 = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")["epoch"]
    r = Run(a, tmp_path)
    runs.append(r)
    pid = r.wait_running(e1, 10 * SLOW, "command started")

    # Freeze right after a renewal, 1.5 s: the agent's lease (2T/3 = 2.67 s)
    # holds through it; the long poll zkelectctl had open is answered late.
    lease = lease_ms(a)
    a.wait_for(lambda s: s["lease_remaining_ms"] >= lease - 150, 10 * SLOW,
               what="a fresh renewal")
    a.pause()
    time.sleep(1.5)                 # the fault itself, not a synchronisation
    a.resume()
    s = a.wait_for(lambda s: s["role"] in ("leader", "unknown", "follower"),
                   10 * SLOW, what="a1 answers again")
    if s["is_leader"] and s["epoch"] == e1:
        # The term went on: the command must not have been touched. Watch
        # for longer than any lease it could have seen before the freeze.
        end = time.monotonic() + (lease_ms(a) + 1000) / 1000.0
        while time.monotonic() < end:
            assert r.running_under(e1) == pid, r.explain()
            time.sleep(0.05)
        assert len(r.starts()) == 1 and "stopping" not in r.stderr(), r.explain()
    else:
        # A loaded machine stretched the freeze past the lease: a new term
        # then, and the command must come back under its epoch.
        e2 = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads again")["epoch"]
        r.wait_running(e2, 10 * SLOW, "command restarted")
    assert a.is_leader()
    assert r.stop() == 0


def test_run_keeps_its_command_after_zkelectctl_itself_was_stopped(agents, tmp_path, runs):
    # The same cause seen from the other side: an answer that sat in the
    # socket while zkelectctl was stopped is older than it looks. zkelectctl
    # must ask again, not drop the command for good.
    a = agents.new("a1", session_timeout="4s")
    e1 = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")["epoch"]
    r = Run(a, tmp_path)
    runs.append(r)
    r.wait_running(e1, 10 * SLOW, "command started")

    r.proc.send_signal(signal.SIGSTOP)
    time.sleep((lease_ms(a) + 500) / 1000.0)    # past any lease it saw
    r.proc.send_signal(signal.SIGCONT)
    s = a.wait_for(lambda s: True, 10 * SLOW)
    assert s["is_leader"] and s["epoch"] == e1, s
    # Still the same term: the command is kept (or, if zkelectctl could not
    # confirm the lease in time, started again at once under the same
    # epoch); never left stopped.
    pid = r.wait_running(e1, 5 * SLOW, "command running under %s" % e1)
    end = time.monotonic() + (lease_ms(a) + 1000) / 1000.0
    while time.monotonic() < end:
        assert r.running_under(e1) == pid, r.explain()
        time.sleep(0.05)
    assert len(r.starts()) <= 2, r.explain()
    assert r.stop() == 0


def test_run_kills_its_command_before_the_lease_lapses_then_follows_the_new_term(
        agents, tmp_path, runs):
    # A freeze longer than the lease: the command (which ignores SIGTERM)
    # must be dead before the lease zkelectctl saw could have run out, and
    # come back under the new term's epoch once the agent leads again.
    a = agents.new("a1", session_timeout="4s")
    e1 = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")["epoch"]
    lease = lease_ms(a) / 1000.0
    r = Run(a, tmp_path, on_term="ignore")
    runs.append(r)
    pid = r.wait_running(e1, 10 * SLOW, "command started")

    a.pause()
    t_pause = time.monotonic()
    # No renewal after the pause: the agent's lease ends by t_pause + lease.
    last_alive = t_pause
    deadline = t_pause + lease + 5 * SLOW
    while alive(pid):
        last_alive = time.monotonic()
        assert last_alive < deadline, "command still alive: %s" % r.stderr()
        time.sleep(0.005)
    assert last_alive < t_pause + lease, "alive %.3f s after the pause, lease %.3f s; %s" % (
        last_alive - t_pause, lease, r.explain())
    # Keep the agent stopped until its lease is surely over.
    time.sleep(max(0.0, t_pause + lease + 0.5 - time.monotonic()))
    a.resume()

    def new_term_running():
        s = a.status()
        if s and s["is_leader"] and s["epoch"] != e1 and r.running_under(s["epoch"]):
            return s["epoch"]
        return None
    try:
        e2 = poll(new_term_running, 20 * SLOW, what="command running under a new term")
    except AssertionError as e:
        raise AssertionError("%s\n%s" % (e, r.explain())) from None
    epochs = [int(kv["epoch"]) for kv in r.starts()]
    assert epochs[0] == e1 and epochs[-1] == e2 > e1, r.explain()
    assert epochs == sorted(set(epochs)), r.explain()
    assert r.stop() == 0


def test_run_starts_each_term_once_across_handovers(agents, tmp_path, runs):
    # Issue 16: the command was seen to stop about 2 s after it started and
    # to start again under the same epoch. Over several handovers (each
    # leader stopped and started again), every term gets exactly one start.
    aa = [agents.new("a0", session_timeout="4s")]
    aa[0].wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a0 leads")
    aa += [agents.new(n, session_timeout="4s") for n in ("a1", "a2")]
    for x in aa[1:]:
        x.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="follows")
    rs = {x.id: Run(x, tmp_path) for x in aa}
    runs.extend(rs.values())
    terms = []
    for _ in range(5):
        lead = agents.wait_one_leader(20 * SLOW)
        e = lead.status()["epoch"]
        terms.append((lead.id, e))
        rs[lead.id].wait_running(e, 10 * SLOW, "%s's command runs under %s" % (lead.id, e))
        lead.wait_for(lambda s: s["candidates"] == 3, 20 * SLOW, what="all queued")
        lead.stop()
        lead.start()
    for x in aa:
        assert x.running()
    epochs = {}
    for agent_id, r in rs.items():
        for kv in r.starts():
            epochs.setdefault(kv["epoch"], []).append(agent_id)
    for agent_id, e in terms:
        assert epochs.get(str(e)) == [agent_id], (terms, epochs,
                                                   {k: r.stderr() for k, r in rs.items()})
    for r in rs.values():
        assert r.stop() == 0


def test_run_follows_an_agent_that_was_restarted(agents, tmp_path, runs):
    # A restarted agent counts its status index from the start again.
    # zkelectctl long-polled it with the index of the agent before, and so
    # did not hear of its leadership until the new count passed the old.
    b = agents.new("b1")
    e1 = b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads")["epoch"]
    a = agents.new("a1")
    b.wait_for(lambda s: s["candidates"] == 2, 20 * SLOW, what="a1 queued")
    r = Run(b, tmp_path)
    runs.append(r)
    r.wait_running(e1, 10 * SLOW, "command started")
    # Contenders come and go: b1's index climbs well past a fresh agent's.
    for i in range(6):
        c = agents.new("c%d" % i)
        b.wait_for(lambda s: s["candidates"] == 3, 20 * SLOW, what="c%d queued" % i)
        c.stop()
        b.wait_for(lambda s: s["candidates"] == 2, 20 * SLOW, what="c%d gone" % i)
    old_index = b.status()["index"]
    b.stop()
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    poll(lambda: r.running_under(e1) is None, 10 * SLOW, what="command stopped")
    b.start()
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows again")
    a.stop()
    s = b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads again")
    assert s["index"] <= old_index, (s, old_index)   # the case under test
    r.wait_running(s["epoch"], 10 * SLOW, "command started under %s" % s["epoch"])
    assert r.stop() == 0


# --- run: what it says --------------------------------------------------------

def test_run_says_why_it_stops(agents, tmp_path, runs):
    # Issue 16: "no longer leading (unknown)" on its own SIGTERM, and
    # "(leader)" after a freeze. Each message must say what happened.
    a = agents.new("a1")
    e1 = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")["epoch"]
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    ra = Run(a, tmp_path)
    runs.append(ra)
    ra.wait_running(e1, 10 * SLOW, "command started under a1")
    assert "leading (epoch %d); started" % e1 in ra.stderr()

    # A resign: the agent says it follows now.
    assert ctl(a.socket, "resign", "--hold", "30s").returncode == 0
    poll(lambda: "stopping" in ra.stderr(), 10 * SLOW, what="a1's command stopped")
    assert "no longer leading: the agent reports role follower" in ra.stderr() \
        or "no longer leading: the agent reports role unknown" in ra.stderr(), ra.stderr()

    # The agent goes away: zkelectctl says it cannot reach it.
    e2 = b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads")["epoch"]
    rb = Run(b, tmp_path)
    runs.append(rb)
    rb.wait_running(e2, 10 * SLOW, "command started under b1")
    b.kill()
    poll(lambda: "cannot reach the agent at %s" % b.socket in rb.stderr(), 10 * SLOW,
         what="zkelectctl says it cannot reach b1")
    assert rb.running_under(e2) is None, rb.explain()
    assert "no longer leading (" not in rb.stderr()

    # Its own SIGTERM: it says so, and nothing about leadership.
    n = len(ra.lines)
    assert ra.stop() == 0
    said = "\n".join(t for _, t in ra.lines[n:])
    assert "SIGTERM" in said and "no longer leading" not in said, said
    n = len(rb.lines)
    assert rb.stop(signal.SIGINT) == 0
    said = "\n".join(t for _, t in rb.lines[n:])
    assert "SIGINT" in said and "no longer leading" not in said, said


def test_run_exit_status_and_message_when_the_command_ends(agents, tmp_path):
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    r = ctl(a.socket, "run", "--", "/bin/sh", "-c", "exit 7")
    assert r.returncode == 7 and "exited with status 7 while leading" in r.stderr, r
    r = ctl(a.socket, "run", "--", "/bin/sh", "-c", "kill -KILL $$")
    assert r.returncode == 128 + 9 and "killed by SIGKILL while leading" in r.stderr, r
    r = ctl(a.socket, "run", "--", str(tmp_path / "no-such-command"))
    assert r.returncode == 127 and "cannot run" in r.stderr, r


# --- one-shot checks ------------------------------------------------------------

def test_wait_timeout_zero_checks_once(agents):
    # Issue 16: `wait --timeout 0s` blocked for ever.
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    for zero in ("0s", "0", "0ms"):
        r = ctl(b.socket, "wait", "--leader", "--timeout", zero, timeout=5)
        assert r.returncode == 3 and "not leading" in r.stderr, r
        r = ctl(a.socket, "wait", "--leader", "--timeout", zero, timeout=5)
        assert r.returncode == 0 and r.stdout.strip() == "leader", r
    r = ctl(b.socket, "wait", "--follower", "--timeout", "0s", timeout=5)
    assert r.returncode == 0 and r.stdout.strip() == "follower", r
    r = ctl(b.socket, "wait", "--change", "--timeout", "0s", timeout=5)
    assert r.returncode == 3, r
    r = ctl(b.socket, "wait", "--leader", "--timeout", "-1s", timeout=5)
    assert r.returncode == 1 and "invalid --timeout" in r.stderr, r


def test_is_leader_checks_once(agents, tmp_path):
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    o = agents.new("o1", candidate=False)
    o.wait_for(lambda s: s["role"] == "observer", 20 * SLOW, what="o1 observes")

    r = ctl(a.socket, "is-leader", timeout=5)
    assert r.returncode == 0 and r.stdout.strip() == "leader", r
    r = ctl(b.socket, "is-leader", timeout=5)
    assert r.returncode == 1 and r.stdout.strip() == "follower", r
    r = ctl(b.socket, "is-leader", "--quiet", timeout=5)
    assert r.returncode == 1 and r.stdout == "" and r.stderr == "", r
    r = ctl(a.socket, "is-leader", "-q", timeout=5)
    assert r.returncode == 0 and r.stdout == "", r
    r = ctl(o.socket, "is-leader", timeout=5)
    assert r.returncode == 1 and r.stdout.strip() == "observer", r
    r = ctl(str(tmp_path / "nope.sock"), "is-leader", timeout=5)
    assert r.returncode == 2 and "cannot reach the agent" in r.stderr, r
    # A frozen agent: no answer is "not leading" too, within the timeout.
    a.pause()
    try:
        r = subprocess.run([ZKELECTCTL, "--socket", a.socket, "is-leader"],
                           capture_output=True, text=True, timeout=30 * SLOW)
        assert r.returncode == 2 and "timed out" in r.stderr, r
    finally:
        a.resume()


def test_help_names_every_command():
    r = subprocess.run([ZKELECTCTL, "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    for word in ("status", "wait", "is-leader", "resign", "run", "members",
                 "partitions", "--partition NAME", "--timeout 0", "--config", "--json",
                 "ZKELECT_CONFIG"):
        assert word in r.stdout, word


# --- members: the election read straight from ZooKeeper ------------------------

def members(config, *args, timeout=30):
    return subprocess.run([ZKELECTCTL, "members", "-c", str(config)] + list(args),
                          capture_output=True, text=True, timeout=timeout * SLOW)


def members_json(config):
    r = members(config, "--json")
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def write_config(path, servers, election, extra=""):
    path.write_text("zookeeper:\n  servers: \"%s\"\n%selection:\n  path: %s\n"
                    % (servers, extra, election))
    return path


def test_members_shows_queue_order_leader_and_epoch(agents, observer, election):
    a = agents.new("a1")
    e1 = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")["epoch"]
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    c = agents.new("c1")
    c.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="c1 follows")
    o = agents.new("o1", candidate=False)
    o.wait_for(lambda s: s["role"] == "observer", 20 * SLOW, what="o1 observes")

    # Any agent's configuration file will do; the agents need not run.
    m = members_json(o.config)
    queue = observer.contenders(election)
    assert [x["node"] for x in m["contenders"]] == [n for n, _, _ in queue]
    assert [x["id"] for x in m["contenders"]] == ["a1", "b1", "c1"]
    assert [x["position"] for x in m["contenders"]] == [0, 1, 2]
    assert [x["leader"] for x in m["contenders"]] == [True, False, False]
    assert m["path"] == election
    assert m["leader"] == {"id": "a1", "value": None, "epoch": e1,
                           "node": queue[0][0]}
    assert m["claim"] == {"id": "a1", "value": None, "epoch": e1}

    r = members(a.config)
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    assert lines[0] == "%s: leader a1, epoch %d, 3 contenders" % (election, e1), r.stdout
    assert lines[1].split() == ["POS", "ID", "ROLE", "NODE"], r.stdout
    assert [ln.split()[:3] for ln in lines[2:]] == [
        ["0", "a1", "leader"], ["1", "b1", "queued"], ["2", "c1", "queued"]], r.stdout

    # A handover: the view follows, read afresh each time.
    assert ctl(a.socket, "resign").returncode == 0
    e2 = b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads")["epoch"]
    m = poll(lambda: (lambda m: m if len(m["contenders"]) == 3 else None)(
        members_json(c.config)), 20 * SLOW, what="a1 queued again")
    assert [x["id"] for x in m["contenders"]] == ["b1", "c1", "a1"]
    assert m["leader"]["id"] == "b1" and m["leader"]["epoch"] == e2 > e1
    for x in agents.agents:
        x.kill()
    assert poll(lambda: members_json(o.config)["contenders"] == [], 20 * SLOW,
                what="every contender gone") is not None
    m = members_json(o.config)
    assert m["leader"] is None and m["claim"]["id"] == "b1", m


def test_members_values_and_curator_style_nodes(observer, zk_hostport, election, tmp_path):
    # Contenders written as Curator's LeaderLatch writes them, data
    # "id[\nvalue]", plus a child that is no contender and must be ignored.
    zk = observer.zk
    zk.ensure_path(election)
    zk.create(election + "/lock-0000000000", b"not a contender")
    first = zk.create(election + "/_c_%s-latch-" % uuid.uuid4(), b"x1\nhttp://10.0.0.1:80",
                      ephemeral=True, sequence=True)
    second = zk.create(election + "/_c_%s-latch-" % uuid.uuid4(), b"x2",
                       ephemeral=True, sequence=True)
    third = zk.create(election + "/_c_%s-latch-" % uuid.uuid4(), b"x3\nline\tone\nline two",
                      ephemeral=True, sequence=True)
    conf = write_config(tmp_path / "m.yaml", zk_hostport, election)

    m = members_json(conf)
    assert m["leader"] is None and m["claim"] is None   # nobody has claimed
    assert [(x["node"], x["id"], x["value"]) for x in m["contenders"]] == [
        (first.rsplit("/", 1)[1], "x1", "http://10.0.0.1:80"),
        (second.rsplit("/", 1)[1], "x2", None),
        (third.rsplit("/", 1)[1], "x3", "line\tone\nline two")]
    r = members(conf)
    assert r.returncode == 0, r
    assert r.stdout.splitlines()[0] == \
        "%s: no leader named, 3 contenders" % election
    assert r.stdout.splitlines()[1].split() == ["POS", "ID", "ROLE", "VALUE", "NODE"]
    assert r.stdout.splitlines()[2].split()[:4] == ["0", "x1", "first", "http://10.0.0.1:80"]
    assert r.stdout.splitlines()[3].split()[:4] == ["1", "x2", "queued", "-"]
    assert "line\\x09one\\nline two" in r.stdout.splitlines()[4], r.stdout

    # The first contender claims: the election node's data and mzxid.
    st = zk.set(election, b"x1\nhttp://10.0.0.1:80")
    m = members_json(conf)
    assert m["leader"] == {"id": "x1", "value": "http://10.0.0.1:80", "epoch": st.mzxid,
                           "node": first.rsplit("/", 1)[1]}
    assert m["contenders"][0]["leader"] is True
    r = members(conf)
    assert r.stdout.splitlines()[0] == "%s: leader x1, epoch %d, value http://10.0.0.1:80, " \
        "3 contenders" % (election, st.mzxid), r.stdout

    # It leaves; the claim stays but names no one at the head of the queue.
    zk.delete(first)
    m = members_json(conf)
    assert m["leader"] is None
    assert m["claim"] == {"id": "x1", "value": "http://10.0.0.1:80", "epoch": st.mzxid}
    assert [x["id"] for x in m["contenders"]] == ["x2", "x3"]
    r = members(conf)
    assert "no leader right now (the election node names x1, epoch %d, " \
        "not the first contender)" % st.mzxid in r.stdout, r.stdout
    # A claim older than the first contender's node is not its claim.
    zk.set(election, b"x3")
    n = zk.create(election + "/_c_%s-latch-" % uuid.uuid4(), b"x3", ephemeral=True,
                  sequence=True)
    zk.delete(second)
    zk.delete(third)
    m = members_json(conf)
    assert m["contenders"][0]["node"] == n.rsplit("/", 1)[1] and m["leader"] is None, m


def test_members_uses_chroot_and_auth_from_the_config(observer, zk_hostport, agents,
                                                      tmp_path):
    from kazoo.client import KazooClient
    from kazoo.security import make_digest_acl
    chroot = "/chroot-%s" % uuid.uuid4().hex[:8]
    observer.zk.ensure_path(chroot)
    auth = "  auth: {scheme: digest, credentials: \"ops:s3cret\"}\n"

    # A real agent behind a chroot, with credentials.
    a = agents.new("a1", start=False, zk_hostport=zk_hostport + chroot)
    text = open(a.config).read().replace("zookeeper:\n", "zookeeper:\n" + auth, 1)
    with open(a.config, "w") as f:
        f.write(text)
    a.start()
    e = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")["epoch"]
    m = members_json(a.config)
    assert m["path"] == agents.path and m["leader"]["id"] == "a1" and \
        m["leader"]["epoch"] == e
    assert observer.zk.exists(chroot + agents.path)

    # An election only the credentials may read.
    path = "/private-%s" % uuid.uuid4().hex[:8]
    zk = KazooClient(hosts=zk_hostport, auth_data=[("digest", "ops:s3cret")])
    zk.start(timeout=15)
    try:
        acl = [make_digest_acl("ops", "s3cret", all=True)]
        zk.create(path, b"", acl=acl)
        zk.create(path + "/_c_%s-latch-" % uuid.uuid4(), b"p1", acl=acl,
                  ephemeral=True, sequence=True)
        with_auth = write_config(tmp_path / "auth.yaml", zk_hostport, path, auth)
        without = write_config(tmp_path / "noauth.yaml", zk_hostport, path)
        m = members_json(with_auth)
        assert [x["id"] for x in m["contenders"]] == ["p1"]
        r = members(without)
        assert r.returncode == 2 and "cannot read %s" % path in r.stderr and \
            "check zookeeper.auth" in r.stderr, r
        bad = write_config(tmp_path / "bad.yaml", zk_hostport, path,
                           auth.replace("s3cret", "wrong"))
        r = members(bad)
        assert r.returncode == 2 and "check zookeeper.auth" in r.stderr, r
    finally:
        zk.stop()
        zk.close()


def test_members_errors(zk_hostport, tmp_path, monkeypatch):
    from zkharness import free_port
    # Nobody listens: a clear error within the timeout, exit 2.
    conf = write_config(tmp_path / "down.yaml", "127.0.0.1:%d" % free_port(), "/zkelect/x")
    t0 = time.monotonic()
    r = members(conf, "--timeout", "1s")
    assert r.returncode == 2 and "cannot connect to ZooKeeper at 127.0.0.1:" in r.stderr, r
    assert time.monotonic() - t0 < 10 * SLOW
    # An election nobody has joined.
    conf = write_config(tmp_path / "none.yaml", zk_hostport,
                        "/zkelect/none-%s" % uuid.uuid4().hex[:8])
    r = members(conf)
    assert r.returncode == 2 and "does not exist" in r.stderr, r
    # Configuration errors are the agent's own messages, exit 1.
    r = members(tmp_path / "missing.yaml")
    assert r.returncode == 1 and "missing.yaml" in r.stderr, r
    bad = tmp_path / "bad.yaml"
    bad.write_text("zookeeper:\n  servers: \"%s\"\n  bogus: 1\nelection:\n  path: /x\n"
                   % zk_hostport)
    r = members(bad)
    assert r.returncode == 1 and "bad.yaml:3:" in r.stderr, r
    # The default file comes from ZKELECT_CONFIG.
    env = dict(os.environ, ZKELECT_CONFIG=str(conf))
    r = subprocess.run([ZKELECTCTL, "members"], capture_output=True, text=True, env=env,
                       timeout=30 * SLOW)
    assert r.returncode == 2 and "does not exist" in r.stderr, r
    r = subprocess.run([ZKELECTCTL, "members", "extra"], capture_output=True, text=True)
    assert r.returncode == 1, r
