# SPDX-License-Identifier: MIT
"""The supervised child, the hooks and `zkelectctl run` as whole process
trees, against a real ZooKeeper and real agents, without systemd.

What a hook or the child starts ends with it and with the agent (kill -9
included), whether it stayed in the process group or left it; they inherit
no descriptors of the agent and no systemd variables; a signal sent to the
agent's helper processes never stops the agent; and a leader whose node
another client deleted kills its child at once.
"""

import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from zkharness import SLOW, free_port, poll  # noqa: E402
from test_notify import ZKELECTCTL, markfile, marks, script  # noqa: E402,F401

# A worker that ignores SIGTERM, as a careless daemon would.
WORKER = """#!/bin/sh
echo "$(date +%s.%N) $1 worker-$2 pid=$$" >> "$MARKS"
trap '' TERM
while :; do sleep 0.05; done
"""

# Starts one worker in its own process group and one that leaves it for a
# new session, then waits for them.
WRAPPER = """#!/bin/sh
"%(worker)s" "$1" group &
setsid "%(worker)s" "$1" session &
echo "$(date +%%s.%%N) $1 wrapper pid=$$" >> "$MARKS"
wait
"""

# Starts a worker in a new session and ends at once.
LEAVER = """#!/bin/sh
setsid "%(worker)s" "$1" session &
while ! grep -q " $1 worker-session" "$MARKS" 2>/dev/null; do sleep 0.02; done
exit 0
"""


def alive(pid):
    """True while pid runs (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@pytest.fixture
def leftovers():
    """pids to SIGKILL at teardown, so that a failing test leaves nothing."""
    pids = []
    yield pids
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def workers(markfile, who, leftovers, n=2):
    ws = poll(lambda: (lambda xs: xs if len(xs) >= n else None)(
        [m for m in marks(markfile) if m[1] == who and m[2].startswith("worker-")]),
        15 * SLOW, what="%s's workers started" % who)
    pids = [int(m[3]["pid"]) for m in ws]
    leftovers.extend(pids)
    return pids


def tree_scripts(d):
    worker = script(d, "worker.sh", WORKER)
    wrapper = script(d, "wrapper.sh", WRAPPER % {"worker": worker})
    leaver = script(d, "leaver.sh", LEAVER % {"worker": worker})
    return wrapper, leaver


def test_child_tree_dies_with_a_killed_agent(agents, markfile, leftovers):
    wrapper, _ = tree_scripts(agents.dir)
    a = agents.new("a1", extra_yaml="notify:\n  run: [\"%s\", \"a1\"]\n" % wrapper)
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    pids = workers(markfile, "a1", leftovers)
    a.kill()
    poll(lambda: not any(alive(p) for p in pids), 10 * SLOW,
         what="both workers (in the group and out of it) killed with the agent")


def test_hook_tree_dies_with_a_killed_agent(agents, markfile, leftovers):
    wrapper, _ = tree_scripts(agents.dir)
    a = agents.new("a1", extra_yaml="notify:\n  on_leader: [\"%s\", \"a1\"]\n"
                   "  hook_timeout: 5m\n" % wrapper)
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    pids = workers(markfile, "a1", leftovers)
    a.kill()
    poll(lambda: not any(alive(p) for p in pids), 10 * SLOW,
         what="the hook's workers killed with the agent")


def test_zkelectctl_run_tree_dies_with_a_killed_zkelectctl(agents, markfile, leftovers):
    wrapper, _ = tree_scripts(agents.dir)
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    run = subprocess.Popen([ZKELECTCTL, "--socket", a.socket, "run", "--", wrapper, "ctl"],
                           stderr=subprocess.PIPE)
    try:
        pids = workers(markfile, "ctl", leftovers)
        run.kill()
        run.wait(10)
        poll(lambda: not any(alive(p) for p in pids), 10 * SLOW,
             what="the command's workers killed with zkelectctl run")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(10)


def test_zkelectctl_run_stops_the_whole_tree_when_leadership_ends(agents, markfile,
                                                                   leftovers):
    wrapper, _ = tree_scripts(agents.dir)
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    run = subprocess.Popen([ZKELECTCTL, "--socket", a.socket, "run", "--", wrapper, "ctl"],
                           stderr=subprocess.PIPE)
    try:
        pids = workers(markfile, "ctl", leftovers)
        r = a.request("POST", "/v1/resign?hold=60s", timeout=5)
        assert r.status == 200
        poll(lambda: not any(alive(p) for p in pids), 15 * SLOW,
             what="the command's workers stopped when a1 stopped leading")
        assert run.poll() is None
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(15)


def test_child_tree_ends_with_the_term(agents, markfile, leftovers):
    wrapper, _ = tree_scripts(agents.dir)
    a = agents.new("a1", extra_yaml="notify:\n  run: [\"%s\", \"a1\"]\n" % wrapper)
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    pids = workers(markfile, "a1", leftovers)
    r = a.request("POST", "/v1/resign?hold=60s", timeout=5)
    assert r.status == 200
    a.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="a1 follows")
    poll(lambda: not any(alive(p) for p in pids), 10 * SLOW,
         what="both workers gone once the term ended")
    assert a.running()


def test_what_a_hook_leaves_behind_dies_with_it(agents, markfile, leftovers):
    _, leaver = tree_scripts(agents.dir)
    a = agents.new("a1", extra_yaml="notify:\n  on_leader: [\"%s\", \"a1\"]\n" % leaver)
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    pids = workers(markfile, "a1", leftovers, n=1)
    poll(lambda: not alive(pids[0]), 10 * SLOW,
         what="the worker the hook left in a new session was killed")


def fd_problems(pid):
    """Descriptors above stderr that are not plain files (the agent's sockets,
    pipes, eventfds...), as 'fd -> target'."""
    bad = []
    d = "/proc/%d/fd" % pid
    for fd in os.listdir(d):
        if int(fd) <= 2:
            continue
        try:
            target = os.readlink(os.path.join(d, fd))
        except FileNotFoundError:
            continue
        if not target.startswith("/") or target.startswith("/dev/"):
            bad.append("%s -> %s" % (fd, target))
    return bad


def test_hooks_and_child_inherit_no_descriptors(agents, markfile):
    child = script(agents.dir, "child.sh", "#!/bin/sh\necho \"$(date +%s.%N) $1 child "
                   "pid=$$\" >> \"$MARKS\"\nwhile :; do sleep 0.05; done\n")
    hook = script(agents.dir, "hook.sh", "#!/bin/sh\necho \"$(date +%s.%N) $1 hook "
                  "pid=$$\" >> \"$MARKS\"\nwhile :; do sleep 0.05; done\n")
    a = agents.new("a1", extra_yaml="notify:\n  run: [\"%s\", \"a1\"]\n"
                   "  on_follower: [\"%s\", \"a1\"]\n  hook_timeout: 5m\n" % (child, hook),
                   listen="127.0.0.1:%d" % free_port())
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    c = poll(lambda: [m for m in marks(markfile) if m[2] == "child"], 10 * SLOW,
             what="child started")
    assert fd_problems(int(c[0][3]["pid"])) == []
    # An open API connection while the hook starts: it must not leak either.
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(a.socket)
    try:
        r = a.request("POST", "/v1/resign?hold=60s", timeout=5)
        assert r.status == 200
        h = poll(lambda: [m for m in marks(markfile) if m[2] == "hook"], 10 * SLOW,
                 what="on_follower hook started")
        assert fd_problems(int(h[0][3]["pid"])) == []
    finally:
        conn.close()


ENV_DUMP = """#!/bin/sh
echo "$(date +%%s.%%N) $1 %s vars=$(env | grep -E '^(NOTIFY_SOCKET|WATCHDOG_)' | \
sed 's/=.*//' | sort | tr '\\n' ',') zkelect=$ZKELECT_ROLE" >> "$MARKS"
%s
"""


def test_hooks_and_child_do_not_see_systemd_variables(agents, markfile, monkeypatch,
                                                      tmp_path):
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "no-such-notify.sock"))
    monkeypatch.setenv("WATCHDOG_USEC", "60000000")
    monkeypatch.setenv("WATCHDOG_PID", "1")      # not the agent: no watchdog for it
    hook = script(agents.dir, "hook.sh", ENV_DUMP % ("hook", ""))
    child = script(agents.dir, "child.sh", ENV_DUMP % ("child", "while :; do sleep 0.05; "
                                                       "done"))
    a = agents.new("a1", extra_yaml="notify:\n  on_leader: [\"%s\", \"a1\"]\n"
                   "  run: [\"%s\", \"a1\"]\n" % (hook, child))
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    got = poll(lambda: (lambda xs: xs if len(xs) == 2 else None)(
        [m for m in marks(markfile) if m[2] in ("hook", "child")]), 10 * SLOW,
        what="hook and child ran")
    for m in got:
        assert m[3]["vars"] == "", m
        assert m[3]["zkelect"] == "leader", m


def test_signals_to_the_agents_helpers_never_stop_the_agent(agents, markfile):
    """Every process the agent forks (before and after it execs anything)
    gets SIGTERM, SIGINT and SIGHUP over and over while terms come and go:
    none of it may reach the agent's own handlers."""
    hook = script(agents.dir, "hook.sh", "#!/bin/sh\nexit 0\n")
    child = script(agents.dir, "child.sh", "#!/bin/sh\nwhile :; do sleep 0.05; done\n")
    a = agents.new("a1", extra_yaml="notify:\n  on_leader: [\"%s\"]\n  on_follower: "
                   "[\"%s\"]\n  run: [\"%s\"]\n" % (hook, hook, child))
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    stop = threading.Event()
    hits = [0]

    def pester():
        me = a.pid
        while not stop.is_set():
            try:
                tasks = os.listdir("/proc/%d/task" % me)
            except OSError:
                return
            for t in tasks:
                try:
                    with open("/proc/%d/task/%s/children" % (me, t)) as f:
                        kids = [int(x) for x in f.read().split()]
                except (OSError, ValueError):
                    continue
                for k in kids:
                    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                        try:
                            os.kill(k, sig)
                            hits[0] += 1
                        except ProcessLookupError:
                            pass
    th = threading.Thread(target=pester, daemon=True)
    th.start()
    try:
        epoch = a.status()["epoch"]
        for _ in range(25):
            r = a.request("POST", "/v1/resign?hold=0s", timeout=5)
            assert r.status == 200
            s = a.wait_for(lambda s: s["is_leader"] and s["epoch"] != epoch, 20 * SLOW,
                           what="a1 leads a new term")
            epoch = s["epoch"]
    finally:
        stop.set()
        th.join(5)
    assert hits[0] > 0
    assert a.running()
    assert not re.search(r"(Terminated|Interrupt|Hangup): stopping|reload:",
                         a.log_text(400000))


def test_deleted_node_kills_the_child_at_once(agents, markfile, observer):
    """Another client deletes the leader's node: a successor may lead at
    once, so the old leader's child gets no SIGTERM grace (the lease no
    longer protects anything)."""
    stubborn = script(agents.dir, "stubborn.sh", "#!/bin/sh\necho \"$(date +%s.%N) $1 "
                      "child-start pid=$$ epoch=$ZKELECT_EPOCH\" >> \"$MARKS\"\ntrap '' TERM\n"
                      "while :; do sleep 0.05; done\n")
    y = "notify:\n  run: [\"%s\", \"%%s\"]\n" % stubborn
    a = agents.new("a1", session_timeout="10s", extra_yaml=y % "a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1", session_timeout="10s", extra_yaml=y % "b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    start = poll(lambda: [m for m in marks(markfile) if m[1] == "a1"], 10 * SLOW,
                 what="a1's child started")
    pid = int(start[0][3]["pid"])
    left = a.status()["lease_remaining_ms"]
    assert left > 3000, left          # a SIGTERM grace would run past 2.8 s
    node = observer.contenders(agents.path)[0][0]
    t0 = time.monotonic()
    observer.zk.delete("%s/%s" % (agents.path, node))
    poll(lambda: not alive(pid), 10 * SLOW, what="a1's child killed")
    took = time.monotonic() - t0
    assert took < 1.5 * SLOW, "a1's child lived %.2fs after its node was deleted" % took
    b.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="b1 leads")
    poll(lambda: [m for m in marks(markfile) if m[1] == "b1"], 10 * SLOW,
         what="b1's child started")
    assert "stopping child %d at once" % pid in a.log_text()
