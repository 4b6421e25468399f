# SPDX-License-Identifier: MIT
"""Telling the app: hooks, signals, the supervised child, resign, observer
mode and zkelectctl, against a real ZooKeeper and real agent processes.

Hooks and children here are small shell scripts that append lines to a
marker file; the tests read the markers back and check order and timing.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from zkharness import SLOW, poll  # noqa: E402

ZKELECTCTL = os.environ.get(
    "ZKELECTCTL",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "ctl",
                 "zkelectctl"))

HOOK = """#!/bin/sh
# $1 = agent id, $2 = which hook
echo "$(date +%s.%N) $1 $2 role=$ZKELECT_ROLE epoch=$ZKELECT_EPOCH id=$ZKELECT_ID \
leader=$ZKELECT_LEADER_ID path=$ZKELECT_PATH" >> "$MARKS"
"""

CHILD = """#!/bin/sh
# A leader-only process: says when it starts and when it is told to stop.
echo "$(date +%s.%N) $1 child-start epoch=$ZKELECT_EPOCH pid=$$" >> "$MARKS"
trap 'echo "$(date +%s.%N) $1 child-stop" >> "$MARKS"; exit 0' TERM
while :; do sleep 0.05; done
"""


def script(dirname, name, text):
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def marks(path):
    """The marker file as a list of (time, agent, what, {key: value})."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) < 3:
                continue
            kv = dict(p.split("=", 1) for p in parts[3:] if "=" in p)
            out.append((float(parts[0]), parts[1], parts[2], kv))
    return out


@pytest.fixture
def markfile(agents, monkeypatch):
    path = os.path.join(agents.dir, "marks.txt")
    # Hooks inherit the agent's environment, and the agent inherits ours.
    monkeypatch.setenv("MARKS", path)
    return path


def notify_yaml(agent_id, hook, child=None, timeout="5s", extra=""):
    y = "notify:\n"
    y += "  on_leader: [\"%s\", \"%s\", \"on_leader\"]\n" % (hook, agent_id)
    y += "  on_follower: [\"%s\", \"%s\", \"on_follower\"]\n" % (hook, agent_id)
    y += "  hook_timeout: %s\n" % timeout
    if child:
        y += "  run: [\"%s\", \"%s\"]\n" % (child, agent_id)
    return y + extra


def resign(agent, hold="0s"):
    r = agent.request("POST", "/v1/resign?hold=%s" % hold, timeout=5)
    assert r.status == 200, r.body
    return r


def test_hooks_run_in_order_with_environment(agents, markfile):
    hook = script(agents.dir, "hook.sh", HOOK)
    a = agents.new("a1", extra_yaml=notify_yaml("a1", hook))
    s = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    poll(lambda: [m for m in marks(markfile) if m[2] == "on_leader"], 10 * SLOW,
         what="on_leader hook ran")
    b = agents.new("b1", extra_yaml=notify_yaml("b1", hook))
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")

    assert a.stop() == 0
    b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 takes over")
    poll(lambda: [m for m in marks(markfile) if m[1] == "b1" and m[2] == "on_leader"],
         10 * SLOW, what="b1's on_leader hook")

    m = marks(markfile)
    a_marks = [x for x in m if x[1] == "a1"]
    assert [x[2] for x in a_marks] == ["on_leader", "on_follower"], m
    lead = a_marks[0][3]
    assert lead["role"] == "leader" and lead["id"] == "a1" and lead["leader"] == "a1"
    assert int(lead["epoch"]) == s["epoch"]
    assert lead["path"] == agents.path
    assert a_marks[1][3]["role"] == "unknown" and a_marks[1][3]["epoch"] == ""
    # The loss was told before the node went: b1's term starts after it.
    b_lead = [x for x in m if x[1] == "b1" and x[2] == "on_leader"][0]
    assert b_lead[0] > a_marks[1][0], m
    assert int(b_lead[3]["epoch"]) > int(lead["epoch"])


def test_hanging_hook_is_killed_and_the_next_one_runs(agents, markfile):
    hang = script(agents.dir, "hang.sh", "#!/bin/sh\nsleep 300 &\necho \"$(date +%s.%N) $1 "
                  "hang-start pid=$! \" >> \"$MARKS\"\nwait\n")
    hook = script(agents.dir, "hook.sh", HOOK)
    y = ("notify:\n  on_leader: [\"%s\", \"a1\"]\n  on_follower: [\"%s\", \"a1\", "
         "\"on_follower\"]\n  hook_timeout: 1s\n" % (hang, hook))
    a = agents.new("a1", extra_yaml=y)
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    started = poll(lambda: [m for m in marks(markfile) if m[2] == "hang-start"], 10 * SLOW,
                   what="hanging hook started")
    sleeper = int(started[0][3]["pid"])
    t0 = time.monotonic()
    resign(a, hold="60s")
    poll(lambda: [m for m in marks(markfile) if m[2] == "on_follower"], 15 * SLOW,
         what="on_follower ran after the hung on_leader was killed")
    took = time.monotonic() - t0
    assert took < 10 * SLOW, took
    assert "timed out; SIGTERM" in a.log_text()
    # The hung hook's whole process group is gone, its sleep included.
    poll(lambda: not os.path.exists("/proc/%d" % sleeper) or
         open("/proc/%d/stat" % sleeper).read().split()[2] == "Z", 5 * SLOW,
         what="the hook's background sleep was killed with its group")
    assert a.status()["role"] == "follower"


def test_crashing_hook_is_logged_and_agent_carries_on(agents, markfile):
    crash = script(agents.dir, "crash.sh", "#!/bin/sh\nkill -SEGV $$\n")
    missing = os.path.join(agents.dir, "does-not-exist")
    y = ("notify:\n  on_leader: [\"%s\"]\n  on_follower: [\"%s\"]\n" % (crash, missing))
    a = agents.new("a1", extra_yaml=y)
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    poll(lambda: "on_leader hook killed by" in a.log_text(), 10 * SLOW,
         what="crash logged")
    resign(a)
    poll(lambda: "on_follower hook exited 127" in a.log_text(), 10 * SLOW,
         what="missing hook logged")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads again after the hold")
    assert a.running()


def test_child_is_stopped_before_the_successor_leads(agents, markfile):
    hook = script(agents.dir, "hook.sh", HOOK)
    child = script(agents.dir, "child.sh", CHILD)
    a = agents.new("a1", extra_yaml=notify_yaml("a1", hook, child))
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1", extra_yaml=notify_yaml("b1", hook, child))
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    poll(lambda: [m for m in marks(markfile) if m[1] == "a1" and m[2] == "child-start"],
         10 * SLOW, what="a1's child started")

    resign(a, hold="60s")
    b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 takes over")
    poll(lambda: [m for m in marks(markfile) if m[1] == "b1" and m[2] == "child-start"],
         10 * SLOW, what="b1's child started")
    m = marks(markfile)
    a_stop = [x for x in m if x[1] == "a1" and x[2] == "child-stop"]
    b_start = [x for x in m if x[1] == "b1" and x[2] == "child-start"]
    b_lead = [x for x in m if x[1] == "b1" and x[2] == "on_leader"]
    assert a_stop, m
    assert a_stop[0][0] < b_lead[0][0] <= b_start[0][0], m
    # The resigned agent runs no child while it follows.
    a_starts = [x for x in m if x[1] == "a1" and x[2] == "child-start"]
    assert len(a_starts) == 1


def test_child_restarts_on_the_next_term(agents, markfile):
    hook = script(agents.dir, "hook.sh", HOOK)
    child = script(agents.dir, "child.sh", CHILD)
    a = agents.new("a1", extra_yaml=notify_yaml("a1", hook, child))
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    e1 = a.status()["epoch"]
    poll(lambda: [m for m in marks(markfile) if m[2] == "child-start"], 10 * SLOW,
         what="child started")
    resign(a, hold="0s")   # alone: it rejoins and leads again, a new term
    s = a.wait_for(lambda s: s["is_leader"] and s["epoch"] != e1, 20 * SLOW,
                   what="a1 leads a second term")
    starts = poll(lambda: (lambda xs: xs if len(xs) == 2 else None)(
        [m for m in marks(markfile) if m[2] == "child-start"]), 10 * SLOW,
        what="child started again")
    assert int(starts[0][3]["epoch"]) == e1
    assert int(starts[1][3]["epoch"]) == s["epoch"] > e1
    stops = [m for m in marks(markfile) if m[2] == "child-stop"]
    assert len(stops) == 1 and starts[0][0] < stops[0][0] < starts[1][0]


def test_child_dies_with_a_killed_agent(agents, markfile):
    child = script(agents.dir, "child.sh", CHILD)
    a = agents.new("a1", extra_yaml="notify:\n  run: [\"%s\", \"a1\"]\n" % child)
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    start = poll(lambda: [m for m in marks(markfile) if m[2] == "child-start"], 10 * SLOW,
                 what="child started")
    pid = int(start[0][3]["pid"])
    a.kill()

    def gone():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open("/proc/%d/stat" % pid) as f:   # a zombie counts as gone
            return f.read().split()[2] == "Z"
    poll(gone, 10 * SLOW, what="child killed with its agent")


def test_resign_with_hold(agents, observer):
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    e1 = a.status()["epoch"]
    t0 = time.monotonic()
    resign(a, hold="3s")
    s = b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads after a1 resigns")
    assert s["epoch"] > e1
    st = a.status()
    assert not st["is_leader"] and st["role"] == "follower"
    assert len(observer.contenders(agents.path)) == 1
    # After the hold a1 is back, at the back of the queue.
    poll(lambda: len(observer.contenders(agents.path)) == 2, 20 * SLOW,
         what="a1 rejoined after the hold")
    assert time.monotonic() - t0 >= 3.0
    a.wait_for(lambda s: s["role"] == "follower" and s["position"] == 1, 10 * SLOW,
               what="a1 follows at the back")
    assert b.is_leader()


def test_observer_reports_the_leader_and_never_joins(agents, observer):
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    o = agents.new("obs", candidate=False)
    s = o.wait_for(lambda s: s["role"] == "observer" and s["leader"] is not None,
                   20 * SLOW, what="observer sees the leader")
    assert s["leader"]["id"] == "a1" and not s["is_leader"] and s["epoch"] is None
    assert s["candidates"] == 1 and s["position"] == -1
    assert [c[1] for c in observer.contenders(agents.path)] == ["a1"] or \
        len(observer.contenders(agents.path)) == 1
    r = o.request("POST", "/v1/resign")
    assert r.status == 400
    assert o.leader_code() == 503


def test_pidfile_signals_and_stale_pidfile(agents, tmp_path):
    sigs = tmp_path / "signals.txt"
    app = subprocess.Popen([sys.executable, "-c", """
import signal, sys, time
out = open(sys.argv[1], "a", buffering=1)
for s in (signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, lambda n, f: out.write(signal.Signals(n).name + "\\n"))
out.write("ready\\n")
while True:
    time.sleep(0.05)
""", str(sigs)])
    try:
        poll(lambda: sigs.exists() and "ready" in sigs.read_text(), 10 * SLOW,
             what="app ready for signals")
        pidfile = tmp_path / "app.pid"
        pidfile.write_text("%d\n" % app.pid)
        y = ("notify:\n  pidfile: %s\n  leader_signal: SIGUSR1\n"
             "  follower_signal: USR2\n" % pidfile)
        a = agents.new("a1", extra_yaml=y)
        a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
        poll(lambda: sigs.exists() and "SIGUSR1" in sigs.read_text(), 10 * SLOW,
             what="leader signal")
        resign(a, hold="0s")
        poll(lambda: "SIGUSR2" in sigs.read_text(), 10 * SLOW, what="follower signal")
        assert sigs.read_text().split()[:3] == ["ready", "SIGUSR1", "SIGUSR2"]

        # A stale pidfile: the process is gone. A warning, not a crash.
        dead = subprocess.Popen(["true"])
        dead.wait()
        pidfile.write_text("%d\n" % dead.pid)
        a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads again")
        resign(a, hold="0s")
        poll(lambda: "notify: signal" in a.log_text() and "No such process" in a.log_text(),
             10 * SLOW, what="stale pidfile warning")
        a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 still works")
        pidfile.unlink()
        resign(a, hold="0s")
        poll(lambda: "notify: pidfile" in a.log_text(), 10 * SLOW,
             what="missing pidfile warning")
        assert a.running()
    finally:
        app.kill()
        app.wait()


def test_hook_order_under_rapid_flapping(agents, markfile):
    hook = script(agents.dir, "hook.sh", HOOK)
    a = agents.new("a1", extra_yaml=notify_yaml("a1", hook))
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1", extra_yaml=notify_yaml("b1", hook))
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    cur, other = a, b
    for _ in range(8):
        resign(cur, hold="0s")
        other.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="%s leads" % other.id)
        # The resigner is back at the back of the queue (it rejoins at least
        # 100 ms after naming its successor) before the next resign.
        cur.wait_for(lambda s: s["role"] == "follower" and s["position"] == 1,
                     20 * SLOW, what="%s queued again" % cur.id)
        cur, other = other, cur
    for x in (a, b):
        assert x.stop() == 0
    for who in ("a1", "b1"):
        seq = [m for m in marks(markfile) if m[1] == who]
        kinds = [m[2] for m in seq]
        # Strict alternation, starting with on_leader, ending with on_follower.
        assert kinds == ["on_leader", "on_follower"] * (len(kinds) // 2), kinds
        epochs = [int(m[3]["epoch"]) for m in seq if m[2] == "on_leader"]
        assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), epochs
    # Over both agents, terms never overlap: each on_leader follows the
    # previous holder's on_follower.
    allm = sorted((m for m in marks(markfile)), key=lambda m: int(m[3]["epoch"] or 0))
    lead = [m for m in marks(markfile) if m[2] == "on_leader"]
    lead.sort(key=lambda m: int(m[3]["epoch"]))
    assert len(lead) >= 9, allm


def ctl(agent, *args, timeout=30):
    return subprocess.run([ZKELECTCTL, "--socket", agent.socket] + list(args),
                          capture_output=True, text=True, timeout=timeout * SLOW)


def test_zkelectctl_verbs_and_exit_codes(agents, tmp_path):
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")

    r = ctl(a, "status")
    assert r.returncode == 0 and r.stdout.startswith("a1: leader (epoch "), r
    r = ctl(b, "status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["leader"]["id"] == "a1"
    r = subprocess.run([ZKELECTCTL, "--socket", str(tmp_path / "nope.sock"), "status"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "cannot reach the agent" in r.stderr
    r = ctl(a, "frobnicate")
    assert r.returncode == 1 and "unknown command" in r.stderr
    r = ctl(a, "wait")
    assert r.returncode == 1
    r = ctl(a, "wait", "--leader", "--timeout", "5s")
    assert r.returncode == 0 and r.stdout.strip() == "leader"
    r = ctl(b, "wait", "--leader", "--timeout", "1s")
    assert r.returncode == 3 and "timed out" in r.stderr
    r = ctl(b, "wait", "--follower", "--timeout", "5s")
    assert r.returncode == 0

    # wait --change returns when the status changes (here: a resign).
    w = subprocess.Popen([ZKELECTCTL, "--socket", b.socket, "wait", "--change",
                          "--timeout", "30s"], stdout=subprocess.PIPE, text=True)
    r = ctl(a, "resign", "--hold", "1s")
    assert r.returncode == 0 and r.stdout.strip() == "resigned"
    assert w.wait(30 * SLOW) == 0
    b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads")
    r = ctl(a, "resign", "--hold", "bogus")
    assert r.returncode == 1


def test_zkelectctl_run_follows_leadership(agents, tmp_path):
    out = tmp_path / "run.txt"
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    cmd = ["/bin/sh", "-c", "echo start $ZKELECT_EPOCH >> %s; trap 'echo stop >> %s; "
           "exit 0' TERM; while :; do sleep 0.05; done" % (out, out)]
    runs = [subprocess.Popen([ZKELECTCTL, "--socket", x.socket, "run", "--"] + cmd,
                             stderr=subprocess.PIPE, text=True) for x in (a, b)]
    try:
        e1 = a.status()["epoch"]
        poll(lambda: out.exists() and out.read_text().split() == ["start", str(e1)],
             10 * SLOW, what="command started under a1")
        resign(a, hold="30s")
        e2 = b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads")["epoch"]
        # zkelectctl run is a client of the API, not part of the agent's
        # release: it stops its command by the lease deadline it last saw,
        # but the successor's command may start before that (notify.run,
        # inside the agent, is the one ordered before the node goes).
        lines = poll(lambda: (lambda ls: ls if len(ls) == 3 else None)(
            out.read_text().splitlines()), 10 * SLOW,
            what="stopped under a1, started under b1")
        assert lines[0] == "start %d" % e1
        assert sorted(lines[1:]) == ["start %d" % e2, "stop"], lines
    finally:
        for r in runs:
            r.send_signal(signal.SIGTERM)
        for r in runs:
            r.wait(10)
    assert [r.returncode for r in runs] == [0, 0]
