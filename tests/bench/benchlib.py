# SPDX-License-Identifier: MIT
"""Shared helpers of the zkelect benchmarks (tests/bench/*.py).

They reuse the integration harness (tests/integration/harness/zkharness.py) by import:
ZooKeeperServer, Agent, AgentSet, poll. Benchmarks are not tests: they print
figures and ratios against a reference measured in the same run and fail
only on breakage (an exception, a process that dies, a deadline passed).
"""

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))  # test_*.py
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "harness"))

BUILD = os.environ.get("ZKELECT_BUILD", os.path.join(ROOT, "build"))
SRC_ZKELECTD = os.environ.get("ZKELECTD", os.path.join(BUILD, "agent", "zkelectd"))
SRC_ZKELECTCTL = os.environ.get("ZKELECTCTL", os.path.join(BUILD, "ctl", "zkelectctl"))

# Snapshot the binaries once per run, so that a concurrent rebuild of build/
# cannot swap the agent between two runs of one benchmark. zkharness reads
# ZKELECTD at import time, so set it before importing.
_SNAP = tempfile.mkdtemp(prefix="zkbench-bin-", dir="/tmp")
for _src, _name in ((SRC_ZKELECTD, "zkelectd"), (SRC_ZKELECTCTL, "zkelectctl")):
    if not os.access(_src, os.X_OK):
        sys.exit("benchmark: %s not found or not executable (build first: meson "
                 "setup build && ninja -C build)" % _src)
    # Under its own name, whatever the source's: ZKELECTD=/tmp/old-zkelectd.
    shutil.copy2(_src, os.path.join(_SNAP, _name))
ZKELECTD = os.path.join(_SNAP, "zkelectd")
ZKELECTCTL = os.path.join(_SNAP, "zkelectctl")
os.environ["ZKELECTD"] = ZKELECTD

import zkharness  # noqa: E402
from zkharness import Agent, AgentSet, ZooKeeperServer, poll, four_letter  # noqa: E402,F401

import atexit  # noqa: E402
atexit.register(shutil.rmtree, _SNAP, True)


# --------------------------------------------------------------------------
# No process left behind
#
# The benchmark makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
# a process it started, directly or not, that outlives its parent (an nginx
# worker whose master was killed, a JVM's helper) is re-parented to the
# benchmark instead of init. So "nothing left behind" is exactly "the
# benchmark has no descendant left", whatever the process is called, and
# processes of other users of the machine (other test runs) are never
# mistaken for ours.

PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper():
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


SUBREAPER = _become_subreaper()


def _proc_stat(pid):
    """(comm, state, ppid) of a process from /proc/PID/stat, or None."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    rest = s[s.rindex(")") + 2:].split()
    return comm, rest[0], int(rest[1])


def descendants(root=None):
    """[(pid, comm, state, cmdline)] of every live process under `root`
    (default: this process), found by walking /proc's parent links."""
    root = root if root is not None else os.getpid()
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = _proc_stat(d)
        if st is not None:
            kids.setdefault(st[2], []).append((int(d), st[0], st[1]))
    out, todo = [], [root]
    while todo:
        for pid, comm, state in kids.get(todo.pop(), []):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmd = ""
            out.append((pid, comm, state, cmd))
            todo.append(pid)
    return out


def reap_zombies():
    """Collect exited children (orphans re-parented to us included)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def leftover_processes(wait=5.0):
    """Processes the benchmark started that are still alive. Waits up to
    `wait` s for ones that are exiting (a stopped server's last threads)."""
    deadline = time.monotonic() + wait
    while True:
        reap_zombies()
        left = [p for p in descendants() if p[2] != "Z"]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def run_main(main):
    """Run a benchmark's main(), then check that it left no process behind:
    any survivor is listed, killed, and makes the benchmark exit 3."""
    rc = 1
    try:
        rc = main()
    finally:
        left = leftover_processes()
        if left:
            print()
            print("LEFT BEHIND: %d process(es) this benchmark started are still running "
                  "(killed now):" % len(left))
            for pid, comm, state, cmd in left:
                print("  pid %d (%s, state %s): %s" % (pid, comm, state, cmd[:160]))
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            leftover_processes(wait=5.0)
            rc = 3
        else:
            print("no process left behind (every process this benchmark started has exited%s)"
                  % ("" if SUBREAPER else "; subreaper unavailable: orphans re-parented to "
                     "init were not checked"))
        sys.stdout.flush()
    return rc


# --------------------------------------------------------------------------
# Agents configured for measuring (not for debugging)

class BenchAgent(Agent):
    """An Agent whose config logs at `log_level` (the harness writes `debug`,
    which would make every API request cost a log line) and may add a
    loopback TCP listener."""

    def __init__(self, workdir, zk_hostport, path, agent_id, log_level="info", **kw):
        super().__init__(workdir, zk_hostport, path, agent_id, log_level=log_level, **kw)


class BenchAgentSet(AgentSet):
    def new(self, agent_id, start=True, zk_hostport=None, **kw):
        a = BenchAgent(self.dir, zk_hostport or self.zk_hostport, self.path, agent_id, **kw)
        self.agents.append(a)
        if start:
            a.start()
        return a


# --------------------------------------------------------------------------
# A tight probe of /v1/leader on a Unix socket

# GET /v1/leader on a fresh connection, status line only (zkharness)
leader_code_fast = zkharness.leader_code_raw


def wait_leader_200(sock_path, t0, timeout, interval=0.001, proc=None):
    """Poll sock_path every `interval` s until /v1/leader answers 200.
    Returns seconds from t0 (time.monotonic()) to the end of the first 200
    answer. Raises AssertionError after `timeout` s."""
    deadline = t0 + timeout
    while True:
        code = leader_code_fast(sock_path)
        t = time.monotonic()
        if code == 200:
            return t - t0
        if proc is not None and proc.poll() is not None:
            raise AssertionError("successor agent exited (%s) while waiting" % proc.returncode)
        if t >= deadline:
            raise AssertionError("no 200 from %s within %.1fs" % (sock_path, timeout))
        time.sleep(interval)


class LeaderLongPoll:
    """Learns, as the app can, the moment an agent starts to lead: a long
    poll of /v1/leader (wait, index) already waiting at the agent before the
    clock starts, answered by the agent the moment its report changes; it
    asks again on the same connection until the answer is 200. So the
    figure has no polling granularity, as the etcd reference has none (it
    reads etcdctl's output as it comes)."""

    def __init__(self, sock_path, wait="30s"):
        import json as _json
        import socket as _socket
        self._json = _json
        self.path = sock_path
        self.wait = wait
        self.sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(sock_path)
        self.buf = b""
        # The current index, then the first long poll, pending at once.
        self._send("/v1/status")
        code, doc = self._read()
        self.index = doc["index"]
        self._send("/v1/leader?wait=%s&index=%d" % (self.wait, self.index))

    def _send(self, target):
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % target).encode())

    def _read(self):
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("the agent closed the long poll")
            self.buf += chunk
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        code = int(lines[0].split()[1])
        clen = 0
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            if k.strip().lower() == "content-length":
                clen = int(v)
        while len(rest) < clen:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("the agent closed the long poll")
            rest += chunk
        self.buf = rest[clen:]
        return code, self._json.loads(rest[:clen])

    def wait_200(self, t0, timeout):
        """Seconds from t0 (time.monotonic()) to the first 200."""
        deadline = t0 + timeout
        while True:
            code, doc = self._read()
            t = time.monotonic()
            if code == 200:
                self.sock.close()
                return t - t0
            if t >= deadline:
                raise AssertionError("no 200 from %s within %.1fs" % (self.path, timeout))
            self.index = doc["index"]
            self._send("/v1/leader?wait=%s&index=%d" % (self.wait, self.index))


# --------------------------------------------------------------------------
# Statistics and printing

def pct(values, p):
    """p-th percentile (0..100) by linear interpolation; None when empty."""
    v = sorted(values)
    if not v:
        return None
    if len(v) == 1:
        return v[0]
    k = (len(v) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)


def summary_ms(values):
    """(median, p95, min, max) in ms of a list of seconds."""
    ms = [x * 1000.0 for x in values]
    return (statistics.median(ms), pct(ms, 95), min(ms), max(ms))


def fmt_ms(x):
    return "%.1f ms" % x if x is not None else "n/a"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return float("nan")
    return a / b


def machine_note():
    """One line on the machine: cores and load (other runs may share it)."""
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return "machine: %d cores, load average %.2f %.2f %.2f at start%s" % (
        os.cpu_count() or 0, load[0], load[1], load[2],
        " (shared: other processes were busy)" if load[0] > 0.5 else "")


def header(title):
    print("=" * 72)
    print(title)
    print(machine_note())
    print("agent: %s (snapshot of %s)" % (ZKELECTD, SRC_ZKELECTD))
    print("=" * 72)
    sys.stdout.flush()


def quiet(seconds):
    """A quiet spell before a clock starts, once the thing measured and its
    reference have both reached their ready state (by polling). It is not a
    synchronisation: it lets the start-up work of a just-started process
    (page faults, GC, JIT, first connections) finish outside the timed
    interval, and every benchmark applies the same spell to both sides."""
    if seconds > 0:
        time.sleep(seconds)


def kill_quietly(proc, sig=signal.SIGKILL, wait=10):
    if proc is not None and proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(wait)
        except (OSError, subprocess.TimeoutExpired):
            pass


def stop_group(proc, sig=signal.SIGTERM, wait=10):
    """Stop a process started with start_new_session=True and everything in
    its process group: `sig` to the group, wait for the leader, then SIGKILL
    whatever of the group is left. Returns the leader's exit status."""
    if proc is None:
        return None
    pgid = proc.pid
    if proc.poll() is None:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(pgid, signal.SIGKILL)     # stragglers (workers), if any
    except OSError:
        pass
    if proc.poll() is None:
        proc.wait(wait)
    return proc.returncode


def raise_nofile(want):
    """Raise RLIMIT_NOFILE (soft) toward `want`, up to the hard limit."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def mntr(zk):
    """ZooKeeper `mntr` as a dict of str -> number (or str)."""
    out = four_letter(zk.host, zk.port, "mntr", timeout=5.0) or ""
    d = {}
    for line in out.splitlines():
        if "\t" not in line:
            continue
        k, v = line.split("\t", 1)
        try:
            d[k] = float(v) if "." in v else int(v)
        except ValueError:
            d[k] = v
    return d


def zk_zxid(zk):
    """The server's last zxid, from `srvr` (every write transaction adds 1)."""
    out = four_letter(zk.host, zk.port, "srvr", timeout=5.0) or ""
    for line in out.splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise AssertionError("srvr gave no Zxid: %r" % out)
