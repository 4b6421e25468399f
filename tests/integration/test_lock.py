# SPDX-License-Identifier: MIT
"""`zkelectctl lock` and `zkelectctl elect`: a leader in one line (issue 33).

  zkelectctl lock --zookeeper HOST:PORT PATH -- CMD ARGS...
  zkelectctl elect --zookeeper HOST:PORT PATH [ID]

Both exec zkelectd with its configuration as flags and
notify.run_exit: stop, so they are the agent's own election and child
supervision. Here, real ZooKeeper, real agents, a real command (a Python
script that keeps a marker file while it runs and logs its start and end
on CLOCK_BOOTTIME, the clock of the agents' audit lines):

  * two locks on one PATH never run their commands at once (a poller
    samples the markers of live commands; every command's run lies inside
    its agent's audited term), the second starts within a handover's time
    after the first's command exits, and a kill -9 of the first hands over
    within about T;
  * a command that ignores SIGTERM is killed before its term's lease could
    end, and only then does the next lock start its command (SIGTERM of
    the lock, a graceful handover);
  * the command's exit status comes back; SIGINT stops it and hands over;
    bad flags give usage and exit 1 (zkelectctl's usage status);
  * elect prints the epoch it leads under, holds until SIGTERM (exit 0),
    and exits 75 when its term is lost.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from zkharness import (SLOW, ZKELECTCTL, ZKELECTD, boottime_us, check_audit, parse_audit,
                       poll, read_log_lines)  # noqa: E402

T_MS = 2000
TICK_MS = 200

# argv: DIR NAME MODE; MODE is "run:SECONDS", "forever", "stubborn"
# (forever, and SIGTERM ignored) or "exit:N".
COMMAND = r'''#!/usr/bin/python3
import os, signal, sys, time
d, name, mode = sys.argv[1:4]
bt = lambda: time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1000
marker = os.path.join(d, "running-%s-%d" % (name, os.getpid()))
log = open(os.path.join(d, "cmd-%s.log" % name), "a")
epoch = os.environ.get("ZKELECT_EPOCH", "")
def end(code):
    log.write("end %d %s %d\n" % (bt(), epoch, code))
    log.flush()
    os.unlink(marker)
    sys.exit(code)
signal.signal(signal.SIGTERM, lambda *a: end(0))
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(marker, "w") as f:
    f.write(str(os.getpid()))
log.write("start %d %s %s\n" % (bt(), epoch, os.environ.get("ZKELECT_SOCKET", "")))
log.flush()
if mode.startswith("exit:"):
    end(int(mode[5:]))
deadline = time.monotonic() + (float(mode[4:]) if mode.startswith("run:") else 1e9)
while time.monotonic() < deadline:
    time.sleep(0.01)
end(0)
'''


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Lock:
    """One `zkelectctl lock` (after its exec, zkelectd itself) running the
    marker command; its stderr (the agent's log, debug level) kept."""

    def __init__(self, tmp, zk, path, name, mode, verb="lock"):
        self.tmp, self.name = tmp, name
        self.log_path = str(tmp / ("lock-%s.log" % name))
        self.err = open(self.log_path, "ab")
        script = tmp / "command.py"
        if not script.exists():
            script.write_text(COMMAND)
            script.chmod(0o755)
        self.proc = subprocess.Popen(
            [ZKELECTCTL, verb, "--zookeeper", zk, "--session-timeout", "%dms" % T_MS,
             "--tick-time", "%dms" % TICK_MS, "--log-level", "debug", "--id", name, path,
             "--", str(script), str(tmp), name, mode],
            stdin=subprocess.DEVNULL, stdout=self.err, stderr=self.err,
            start_new_session=True, env=dict(os.environ, ZKELECTD=ZKELECTD))

    def events(self):
        """[(what, boottime_us, epoch, rest)] from the command's own log."""
        try:
            with open(self.tmp / ("cmd-%s.log" % self.name)) as f:
                return [(w[0], int(w[1]), w[2], w[3:]) for w in
                        (line.split() for line in f) if len(w) >= 3]
        except OSError:
            return []

    def first(self, what):
        return next((e for e in self.events() if e[0] == what), None)

    def wait(self, timeout):
        try:
            return self.proc.wait(timeout * SLOW)
        finally:
            self.err.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


@pytest.fixture
def locks(tmp_path, request):
    made = []

    def new(*a, **kw):
        lk = Lock(tmp_path, *a, **kw)
        made.append(lk)
        return lk
    yield new
    for lk in made:
        lk.stop()


class MarkerPoller:
    """Samples the markers of live commands every 2 ms: never two at once."""

    def __init__(self, d):
        self.d, self.samples, self.both = d, 0, []
        self.done = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done:
            live = []
            for n in os.listdir(self.d):
                if n.startswith("running-"):
                    try:
                        with open(os.path.join(self.d, n)) as f:
                            pid = int(f.read() or 0)
                    except (OSError, ValueError):
                        continue
                    if pid and alive(pid):
                        live.append(n)
            self.samples += 1
            if len(live) > 1:
                self.both.append((time.monotonic(), live))
            time.sleep(0.002)

    def stop(self):
        self.done = True
        self.thread.join(5)


def contenders(observer, path):
    return len(observer.contenders(path)) if observer.zk.exists(path) else 0


def audit_check(locks_, cmds):
    """The agents' audit intervals never overlap; each command started
    inside its own agent's audited term of that epoch and ended before
    that term's lease ran out (after the term ends, on a stop, the command
    has until then: the node goes only once it is dead, rule 10); and no
    command's run meets another agent's term."""
    logs = {lk.name: read_log_lines(lk.log_path) for lk in locks_}
    problems, fig = check_audit(logs)
    assert problems == [], problems
    terms = {lk.name: parse_audit(logs[lk.name], lk.name)[0] for lk in locks_}
    for lk in cmds:
        start, end = lk.first("start"), lk.first("end")
        assert start is not None, lk.name
        term = [i for i in terms[lk.name] if str(i.epoch) == start[2]]
        assert term, (lk.name, start, terms[lk.name])
        assert start[1] >= term[0].start, (lk.name, start, term)
        if end is not None:
            assert end[1] <= term[0].until_ms * 1000, (lk.name, end, term)
        stop = end[1] if end is not None else term[0].until_ms * 1000
        for other, iv in terms.items():
            for i in iv:
                if other != lk.name:
                    assert stop <= i.start or start[1] >= i.end, (lk.name, start, end, i)
    return fig


def a_leads_b_queued(locks, zk, election, observer, tmp_path, a_mode):
    """Lock a running its command (in a_mode), lock b queued behind it;
    returns (a, b, the pid of a's command)."""
    a = locks(zk, election, "a", a_mode)
    poll(lambda: a.first("start"), 20 * SLOW, what="a's command to start")
    b = locks(zk, election, "b", "forever")
    poll(lambda: contenders(observer, election) == 2, 20 * SLOW, what="b queued")
    a_cmd = int(open(tmp_path / [n for n in os.listdir(tmp_path)
                                 if n.startswith("running-a-")][0]).read())
    return a, b, a_cmd


def test_two_locks_take_turns(locks, zk_hostport, election, observer, tmp_path):
    poller = MarkerPoller(str(tmp_path))
    try:
        a = locks(zk_hostport, election, "a", "run:1.5")
        poll(lambda: a.first("start"), 20 * SLOW, what="a's command to start")
        b = locks(zk_hostport, election, "b", "run:0.5")
        poll(lambda: contenders(observer, election) == 2, 20 * SLOW, what="b queued")
        assert b.first("start") is None
        assert a.wait(30) == 0
        assert b.wait(30) == 0
    finally:
        poller.stop()
    assert poller.both == [], poller.both[:5]
    assert poller.samples > 100, poller.samples
    a_end, b_start = a.first("end"), b.first("start")
    gap_ms = (b_start[1] - a_end[1]) / 1000.0
    print("\n[lock] a's command ended -> b's command started: %.1f ms" % gap_ms)
    assert 0 < gap_ms < 1500 * SLOW, gap_ms
    assert int(b_start[2]) > int(a_end[2])
    audit_check([a, b], [a, b])
    # Nothing left behind: the nodes, the private socket directories.
    assert contenders(observer, election) == 0
    for lk in (a, b):
        sock = lk.first("start")[3][0]
        assert not os.path.exists(os.path.dirname(sock)), sock


def test_kill_9_hands_over_within_t(locks, zk_hostport, election, observer, tmp_path):
    poller = MarkerPoller(str(tmp_path))
    try:
        a, b, a_cmd = a_leads_b_queued(locks, zk_hostport, election, observer, tmp_path,
                                       "forever")
        killed = boottime_us()
        a.proc.kill()
        assert a.wait(10) == -signal.SIGKILL
        # The guard takes the command with the agent.
        poll(lambda: not alive(a_cmd), 5 * SLOW, what="a's command to end with a")
        poll(lambda: b.first("start"), (T_MS / 1000.0 + 10) * SLOW,
             what="b's command to start")
        b.proc.send_signal(signal.SIGTERM)
        assert b.wait(20) == 0
    finally:
        poller.stop()
    assert poller.both == [], poller.both[:5]
    took_ms = (b.first("start")[1] - killed) / 1000.0
    print("\n[lock] kill -9 of a -> b's command started: %.0f ms (T = %d ms)"
          % (took_ms, T_MS))
    assert took_ms < (T_MS + TICK_MS + 1000) * SLOW, took_ms
    audit_check([a, b], [b])


def test_sigterm_kills_a_stubborn_command_before_the_lease(locks, zk_hostport, election,
                                                          observer, tmp_path):
    """SIGTERM of a lock whose command ignores SIGTERM: the command is
    killed (SIGKILL, with its tree) before the lease of its term could
    end, and only then does the lock go to the next one, which starts its
    command; never two commands at once."""
    poller = MarkerPoller(str(tmp_path))
    try:
        a, b, a_cmd = a_leads_b_queued(locks, zk_hostport, election, observer, tmp_path,
                                       "stubborn")
        stopped = boottime_us()
        a.proc.send_signal(signal.SIGTERM)
        poll(lambda: b.first("start"), (T_MS / 1000.0 + 10) * SLOW,
             what="b's command to start")
        assert not alive(a_cmd), "a's command still runs while b's does"
        assert a.wait(20) == 128 + signal.SIGKILL
        b.proc.send_signal(signal.SIGTERM)
        assert b.wait(20) == 0
    finally:
        poller.stop()
    assert poller.both == [], poller.both[:5]
    assert poller.samples > 100, poller.samples
    assert a.first("end") is None       # it never saw its SIGTERM
    log = open(a.log_path, errors="replace").read()
    assert "still running at its deadline; SIGKILL to its process tree" in log, log[-3000:]
    took_ms = (b.first("start")[1] - stopped) / 1000.0
    print("\n[lock] SIGTERM of a (its command ignores SIGTERM) -> b's command "
          "started: %.0f ms (T = %d ms)" % (took_ms, T_MS))
    assert took_ms < (T_MS + 1000) * SLOW, took_ms
    audit_check([a, b], [b])
    # a's term ended before b's began, and a's command was gone by then.
    logs = {lk.name: read_log_lines(lk.log_path) for lk in (a, b)}
    a_term = parse_audit(logs["a"], "a")[0][0]
    b_term = parse_audit(logs["b"], "b")[0][0]
    assert a_term.end <= b_term.start, (a_term, b_term)


def test_exit_status_comes_back(locks, zk_hostport, election, tmp_path):
    a = locks(zk_hostport, election, "a", "exit:7")
    assert a.wait(30) == 7
    r = subprocess.run([ZKELECTCTL, "lock", "--zookeeper", zk_hostport, election, "--",
                        "sh", "-c", 'kill -USR1 $$'], capture_output=True, text=True,
                       timeout=30 * SLOW, env=dict(os.environ, ZKELECTD=ZKELECTD))
    assert r.returncode == 128 + signal.SIGUSR1, r
    # The command's output is its own (not the agent's log), and its
    # environment has the epoch and a socket that answers.
    r = subprocess.run([ZKELECTCTL, "lock", "--zookeeper", zk_hostport, election, "--",
                        "sh", "-c", 'echo "epoch=$ZKELECT_EPOCH"; "$0" status --json',
                        ZKELECTCTL], capture_output=True, text=True, timeout=30 * SLOW,
                       env=dict(os.environ, ZKELECTD=ZKELECTD))
    assert r.returncode == 0, r
    first, status = r.stdout.split("\n", 1)
    s = json.loads(status)
    assert first == "epoch=%d" % s["epoch"] and s["is_leader"] is True, r.stdout
    assert r.stderr == "", r.stderr   # the default log level is warn


def test_sigint_stops_the_command_and_hands_over(locks, zk_hostport, election, observer):
    a = locks(zk_hostport, election, "a", "forever")
    poll(lambda: a.first("start"), 20 * SLOW, what="a's command to start")
    b = locks(zk_hostport, election, "b", "forever")
    poll(lambda: contenders(observer, election) == 2, 20 * SLOW, what="b queued")
    a.proc.send_signal(signal.SIGINT)
    assert a.wait(20) == 0     # the command's own status: it ended on SIGTERM
    poll(lambda: b.first("start"), 5 * SLOW, what="b's command to start")
    gap_ms = (b.first("start")[1] - a.first("end")[1]) / 1000.0
    print("\n[lock] SIGINT: a's command ended -> b's started: %.1f ms" % gap_ms)
    assert 0 < gap_ms < 1500 * SLOW, gap_ms
    # Interrupted before its command ran: 128 + SIGINT.
    c = locks(zk_hostport, election, "c", "forever")
    poll(lambda: contenders(observer, election) == 2, 20 * SLOW, what="c queued")
    c.proc.send_signal(signal.SIGINT)
    assert c.wait(20) == 128 + signal.SIGINT
    assert c.first("start") is None
    b.proc.send_signal(signal.SIGTERM)
    assert b.wait(20) == 0
    audit_check([a, b, c], [a, b])


@pytest.mark.parametrize("args,says", [
    (["lock", "/x", "--", "true"], "say which ZooKeeper"),
    (["lock", "--zookeeper", "127.0.0.1:1", "/x", "true"], "the command goes after --"),
    (["lock", "--zookeeper", "127.0.0.1:1", "/x", "--"], "no command after --"),
    (["lock", "--zookeeper", "127.0.0.1:1", "--"], "no election PATH"),
    (["lock", "--zookeeper", "127.0.0.1:1", "--bogus", "/x", "--", "true"], "usage"),
    (["elect", "--zookeeper", "127.0.0.1:1", "/x", "id", "extra"], "unexpected argument"),
    (["elect", "--zookeeper", "127.0.0.1:1"], "no election PATH"),
    (["hold"], "no $ZKELECT_EPOCH"),
])
def test_usage_errors_exit_1(args, says):
    r = subprocess.run([ZKELECTCTL] + args, capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, ZKELECTD=ZKELECTD, ZKELECT_ZOOKEEPER=""))
    assert r.returncode == 1 and says in r.stderr, r


def test_errors_of_the_agent_flags(zk_hostport):
    env = dict(os.environ, ZKELECTD=ZKELECTD)
    r = subprocess.run([ZKELECTCTL, "lock", "--zookeeper", zk_hostport, "relative", "--",
                        "true"], capture_output=True, text=True, timeout=10, env=env)
    assert r.returncode == 1 and "--path: election.path: must start with '/'" in r.stderr, r
    r = subprocess.run([ZKELECTCTL, "lock", "--zookeeper", zk_hostport, "/x", "--",
                        "no-such-command-here"], capture_output=True, text=True,
                       timeout=10, env=env)
    assert r.returncode == 1 and "'no-such-command-here': not found in PATH" in r.stderr, r
    r = subprocess.run([ZKELECTCTL, "lock", "--zookeeper", zk_hostport, "/x", "--", "true"],
                       capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, ZKELECTD="/nonexistent/zkelectd"))
    assert r.returncode == 2 and "cannot run $ZKELECTD" in r.stderr, r


def test_elect_prints_the_epoch_holds_and_hands_over(zk_hostport, election, observer,
                                                     tmp_path):
    env = dict(os.environ, ZKELECTD=ZKELECTD)
    args = ["--session-timeout", "%dms" % T_MS, "--tick-time", "%dms" % TICK_MS]
    e1 = subprocess.Popen([ZKELECTCTL, "elect", "--zookeeper", zk_hostport] + args +
                          [election, "e1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, start_new_session=True)
    e2 = None
    try:
        line = e1.stdout.readline()
        epoch1 = int(line)
        data, stat = observer.zk.get(election)
        assert data.decode() == "e1" and stat.mzxid == epoch1, (data, stat, line)
        e2 = subprocess.Popen([ZKELECTCTL, "elect", "--zookeeper", zk_hostport] + args +
                              [election, "e2"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env,
                              start_new_session=True)
        poll(lambda: contenders(observer, election) == 2, 20 * SLOW, what="e2 queued")
        assert e1.poll() is None and e2.poll() is None
        t0 = time.monotonic()
        e1.send_signal(signal.SIGTERM)
        epoch2 = int(e2.stdout.readline())
        took = time.monotonic() - t0
        assert e1.wait(10 * SLOW) == 0
        assert epoch2 > epoch1
        data, stat = observer.zk.get(election)
        assert data.decode() == "e2" and stat.mzxid == epoch2
        print("\n[elect] SIGTERM of e1 -> e2 printed its epoch: %.0f ms" % (took * 1000))
        assert took < 2 * SLOW, took
        # e2's term lost (its node deleted under it): exit 75.
        node = [n for n in observer.zk.get_children(election) if "latch-" in n][0]
        observer.zk.delete("%s/%s" % (election, node))
        assert e2.wait(10 * SLOW) == 75
        assert "leadership ended while the command ran" in e2.stderr.read()
    finally:
        for p in (e1, e2):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
