# SPDX-License-Identifier: MIT
"""Integration-test harness for zkelect: a real ZooKeeper server, real zkelectd
processes, an HTTP-over-Unix-socket client for the local API, an independent
observer that reads ZooKeeper directly, and a recorder that samples every
agent's /v1/status during a test to check "never two leaders at once".

Everything here synchronises by polling with a deadline; nothing sleeps to
"let things settle".
"""

import collections
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   "..", "..", ".."))
ZKELECTD = os.environ.get("ZKELECTD", os.path.join(TOP, "build", "agent", "zkelectd"))
ZKELECTCTL = os.environ.get("ZKELECTCTL", os.path.join(TOP, "build", "ctl", "zkelectctl"))
ZK_JAR = os.environ.get("ZKELECT_TEST_ZK_JAR", "/usr/share/java/zookeeper.jar")
ZK_EXTRA_JARS = ["/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"]

# Deadlines are generous: the suite runs on loaded 2-core CI machines.
SLOW = float(os.environ.get("ZKELECT_TEST_SLOWDOWN", "1"))

# Curator LeaderLatch naming: _c_<uuid>-latch-<10 digits>.
CONTENDER_RE = re.compile(
    r"^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-latch-(\d{10})$")


def free_port():
    """A loopback TCP port nobody listens on right now (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def four_letter(host, port, cmd, timeout=1.0):
    """Send a ZooKeeper four-letter word, return the answer (str), or None."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(cmd.encode())
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                b = s.recv(4096)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


class PollAbort(AssertionError):
    """Raised by a probe to end a poll at once (e.g. the process died)."""


def poll(pred, timeout, interval=0.02, what="condition"):
    """Call pred() until it returns a truthy value or the deadline passes.
    Returns the value; raises AssertionError naming `what` on timeout."""
    deadline = time.monotonic() + timeout * SLOW
    last_exc = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except PollAbort:
            raise
        except Exception as e:  # noqa: BLE001 - a failing probe is "not yet"
            last_exc = e
        if time.monotonic() >= deadline:
            msg = "timed out after %.1fs waiting for %s" % (timeout * SLOW, what)
            if last_exc is not None:
                msg += " (last error: %r)" % (last_exc,)
            raise AssertionError(msg)
        time.sleep(interval)


# --------------------------------------------------------------------------
# ZooKeeper server

LOG4J = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=${zookeeper.log.dir}/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
"""


class Process:
    """What the harness's processes share: a Popen in `proc` (None until
    started), SIGSTOP and SIGCONT with `paused` kept, SIGKILL; `out` is the
    file the process writes to, closed once it is gone."""

    proc = None
    paused = False
    out = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        if self.running():
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def kill(self):
        if self.running():
            self.proc.kill()
            self.proc.wait(30)
        self.paused = False
        self.close_out()

    def close_out(self):
        if self.out:
            self.out.close()
            self.out = None


def start_zookeeper(server_dir, conf_dir, cfg, extra_jars=(), extra_props=(),
                    mode="wb"):
    """Start QuorumPeerMain on `cfg` (log4j from `conf_dir`, logs in
    `server_dir`/zookeeper.log, stdout in stdout.log) in a session of its
    own. Returns (Popen, the open stdout file)."""
    if not shutil.which("java"):
        raise RuntimeError("java not found: install the zookeeper package")
    cp = ":".join([conf_dir, ZK_JAR] + [j for j in list(ZK_EXTRA_JARS) + list(extra_jars)
                                        if os.path.exists(j)])
    argv = (["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dzookeeper.admin.enableServer=false"] + list(extra_props) +
            ["-Dzookeeper.log.dir=%s" % server_dir,
             "-Dlog4j.configuration=file:%s" % os.path.join(conf_dir, "log4j.properties"),
             "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg])
    out = open(os.path.join(server_dir, "stdout.log"), mode)
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    return proc, out


class ZooKeeperProcess(Process):
    """A ZooKeeper server process: its client address and its log."""

    @property
    def hostport(self):
        return "%s:%d" % (self.host, self.port)

    @property
    def log_path(self):
        return os.path.join(self.dir, "zookeeper.log")


class ZooKeeperServer(ZooKeeperProcess):
    """A standalone ZooKeeper server in a fresh temp dir on a loopback port."""

    def __init__(self, port=None, tick_ms=200, min_session_ms=400, max_session_ms=10000):
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="zkit-zk-", dir="/tmp")
        self.tick_ms = tick_ms
        self.min_session_ms = min_session_ms
        self.max_session_ms = max_session_ms

    def start(self, timeout=60):
        conf = os.path.join(self.dir, "conf")
        data = os.path.join(self.dir, "data")
        os.makedirs(conf, exist_ok=True)
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(conf, "log4j.properties"), "w") as f:
            f.write(LOG4J)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("tickTime=%d\n" % self.tick_ms)
            f.write("dataDir=%s\n" % data)
            f.write("clientPort=%d\n" % self.port)
            f.write("clientPortAddress=%s\n" % self.host)
            f.write("minSessionTimeout=%d\n" % self.min_session_ms)
            f.write("maxSessionTimeout=%d\n" % self.max_session_ms)
            f.write("admin.enableServer=false\n")
            f.write("4lw.commands.whitelist=*\n")
            f.write("maxClientCnxns=0\n")
        self.proc, self.out = start_zookeeper(self.dir, conf, cfg)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=60):
        def ready():
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError("ZooKeeper exited with %s; see %s"
                                     % (self.proc.returncode, self.dir))
            a = four_letter(self.host, self.port, "srvr", timeout=1.0)
            return a is not None and "Mode:" in a
        poll(ready, timeout, interval=0.1, what="ZooKeeper on %s to answer srvr" % self.hostport)

    def stop(self):
        """Kill the JVM (SIGKILL: nothing to flush that tests care about)."""
        self.kill()

    def cleanup(self):
        self.stop()
        if os.environ.get("ZKELECT_TEST_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


def settled(pool, timeout=40, candidates=False, what=None):
    """Wait until exactly one agent of `pool` leads and every other one is a
    follower naming it with its epoch (and, with candidates=True, the leader
    counts len(pool) candidates: it watches the queue; followers refresh
    their count only when they list, at each change of leader, so theirs
    may lag and is only checked to cover their own place in the queue).
    Returns (leader_agent, leader_status, {id: status})."""
    last = {}

    def probe():
        st = {a.id: a.status() for a in pool}
        last["st"] = st
        if any(s is None for s in st.values()):
            return None
        leaders = [a for a in pool if st[a.id]["is_leader"] is True]
        if len(leaders) != 1:
            return None
        lead = leaders[0]
        ls = st[lead.id]
        if ls["role"] != "leader" or not isinstance(ls["epoch"], int):
            return None
        for a in pool:
            s = st[a.id]
            if candidates and a is lead and s["candidates"] != len(pool):
                return None
            if candidates and not (s["position"] < s["candidates"] <= len(pool)):
                return None
            if s["leader"] != {"id": lead.id, "epoch": ls["epoch"], "value": None}:
                return None
            if a is not lead and (s["role"] != "follower" or s["is_leader"] is not False):
                return None
        return (lead, ls, st)
    try:
        return poll(probe, timeout,
                    what=what or "one leader and %d settled followers" % (len(pool) - 1))
    except AssertionError as e:
        raise AssertionError("%s; last statuses:\n%s" % (e, "\n".join(
            "  %s: %s" % (k, json.dumps(v)) for k, v in last.get("st", {}).items()))) from None

# --------------------------------------------------------------------------
# HTTP over a Unix socket

class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=1.0):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Response:
    def __init__(self, status, body, t_start, t_end, headers=None):
        self.status = status
        self.body = body
        self.t_start = t_start
        self.t_end = t_end
        self.headers = headers or {}

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<Response %s %r>" % (self.status, self.body[:300])


def unix_request(sock_path, method, target, timeout=1.0, headers=None, body=None):
    """One HTTP request on a fresh connection. Returns Response; raises OSError
    (refused, timed out, reset) or http.client exceptions on failure."""
    conn = UnixHTTPConnection(sock_path, timeout=timeout)
    t0 = time.monotonic()
    try:
        conn.request(method, target, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        t1 = time.monotonic()
        return Response(r.status, data.decode(errors="replace"), t0, t1, dict(r.getheaders()))
    finally:
        conn.close()


# --------------------------------------------------------------------------
# The agent

# zookeeper.tick_time of every agent: unset, the default configuration (the
# agent learns a bound on tickTime from the servers' minSessionTimeout);
# ZKELECT_TEST_ZK_TICK=200ms states the harness's servers' tickTime instead.
DEFAULT_TICK_TIME = os.environ.get("ZKELECT_TEST_ZK_TICK", "")


class Agent(Process):
    """One zkelectd process with its own config, socket and log file."""

    def __init__(self, workdir, zk_hostport, path, agent_id, session_timeout="2s",
                 candidate=True, extra_yaml="", log_level="debug", listen=None,
                 tick_time=None, zk_yaml=""):
        """extra_yaml is appended to the config; zk_yaml goes inside its
        `zookeeper:` section (indented lines)."""
        self.id = agent_id
        self.path = path
        self.zk_hostport = zk_hostport
        self.dir = workdir
        self.socket = os.path.join(workdir, "%s.sock" % agent_id)
        self.config = os.path.join(workdir, "%s.yaml" % agent_id)
        self.log_path = os.path.join(workdir, "%s.log" % agent_id)
        self.session_timeout = session_timeout
        self.candidate = candidate
        self.extra_yaml = extra_yaml
        self.zk_yaml = zk_yaml
        self.log_level = log_level
        self.listen = listen          # optional loopback TCP listener
        # zookeeper.tick_time: "" leaves it unset (the agent learns a bound
        # from the servers, or assumes T/2 until it has one).
        self.tick_time = DEFAULT_TICK_TIME if tick_time is None else tick_time
        self.proc = None
        self.paused = False
        self.starts = 0
        self.out = None
        self.write_config()

    def write_config(self):
        with open(self.config, "w") as f:
            f.write("zookeeper:\n")
            f.write("  servers: \"%s\"\n" % self.zk_hostport)
            f.write("  session_timeout: %s\n" % self.session_timeout)
            if self.tick_time and "tick_time:" not in self.zk_yaml:
                f.write("  tick_time: %s\n" % self.tick_time)
            f.write(self.zk_yaml)
            f.write("election:\n")
            f.write("  path: %s\n" % self.path)
            f.write("  id: %s\n" % self.id)
            if not self.candidate:
                f.write("  candidate: false\n")
            f.write("api:\n")
            f.write("  socket: %s\n" % self.socket)
            if self.listen:
                f.write("  listen: %s\n" % self.listen)
            f.write("log:\n")
            f.write("  level: %s\n" % self.log_level)
            f.write(self.extra_yaml)

    def start(self, wait_ready=True):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        if not os.access(ZKELECTD, os.X_OK):
            raise RuntimeError("zkelectd not found at %s (set ZKELECTD)" % ZKELECTD)
        self.out = open(self.log_path, "ab")
        self.starts += 1
        self.out.write(b"==== harness: start #%d of %s ====\n" % (self.starts, self.id.encode()))
        self.out.flush()
        self.proc = subprocess.Popen([ZKELECTD, "-c", self.config], stdin=subprocess.DEVNULL,
                                     stdout=self.out, stderr=self.out,
                                     start_new_session=True)
        self.paused = False
        if wait_ready:
            self.wait_for(lambda s: True, 20, what="API socket to answer /v1/status")
        return self

    @property
    def pid(self):
        return self.proc.pid

    # -- API -------------------------------------------------------------
    def request(self, method, target, timeout=1.0, **kw):
        return unix_request(self.socket, method, target, timeout=timeout, **kw)

    def get(self, target, timeout=1.0):
        return self.request("GET", target, timeout=timeout)

    def status(self, timeout=1.0):
        """The /v1/status document, or None if the agent did not answer."""
        try:
            r = self.get("/v1/status", timeout=timeout)
        except (OSError, http.client.HTTPException):
            return None
        if r.status != 200:
            return None
        return r.json()

    def leader_code(self, timeout=0.5):
        """HTTP status of /v1/leader; None when refused or timed out
        (which an app must treat as "not leader")."""
        try:
            return self.get("/v1/leader", timeout=timeout).status
        except (OSError, http.client.HTTPException):
            return None

    def is_leader(self, timeout=0.5):
        return self.leader_code(timeout) == 200

    def wait_for(self, pred, timeout, what="condition"):
        """Poll /v1/status until pred(status) holds; return that status."""
        last = [None]

        def probe():
            if not self.running():
                raise PollAbort("%s exited with status %s while waiting for %s"
                                     % (self.id, self.proc.returncode if self.proc else None,
                                        what))
            s = self.status(timeout=1.0)
            if s is not None:
                last[0] = s
                return s if pred(s) else None
            return None
        try:
            return poll(probe, timeout, interval=0.02, what="%s: %s" % (self.id, what))
        except AssertionError as e:
            # Never answered: the loop may be stuck; say where.
            raise AssertionError("%s; last status: %s%s" % (
                e, json.dumps(last[0]),
                "\n" + self.threads() if last[0] is None and self.running() else "")) from None

    # -- process control ---------------------------------------------------
    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit status."""
        if not self.running():
            return self.proc.returncode if self.proc else None
        if self.paused:
            self.resume()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout * SLOW)
        finally:
            self.close_out()

    def log_text(self, limit=20000):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except OSError:
            return ""
        return data[-limit:].decode(errors="replace")

    def threads(self):
        """What each of the agent's threads is doing, for a failure's
        message: name, state, kernel wait channel and system call (from
        /proc), and every thread's stack when gdb is installed."""
        base = "/proc/%d/task" % self.proc.pid

        def rd(tid, name):
            try:
                with open(os.path.join(base, tid, name)) as f:
                    return f.read().strip()
            except OSError:
                return "?"
        try:
            tids = sorted(os.listdir(base), key=int)
        except OSError as e:
            return "the agent's threads: %s" % e
        out = ["the agent's threads:"]
        for tid in tids:
            stat = rd(tid, "stat")
            state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
            out.append("  %s %s: state %s, wchan %s, syscall %s" % (
                tid, rd(tid, "comm"), state, rd(tid, "wchan"),
                rd(tid, "syscall").split(" ")[0]))
        gdb = shutil.which("gdb")
        if gdb:
            try:
                r = subprocess.run([gdb, "-batch", "-p", str(self.proc.pid), "-ex",
                                    "thread apply all bt"], capture_output=True,
                                   text=True, timeout=30)
                out.append(r.stdout[-8000:])
            except (OSError, subprocess.TimeoutExpired) as e:
                out.append("gdb: %s" % e)
        return "\n".join(out)

    def __repr__(self):
        return "<Agent %s pid=%s>" % (self.id, self.proc.pid if self.proc else None)


class AgentSet:
    """Creates agents for one test (one election path) and reaps them all."""

    def __init__(self, zk_hostport, path):
        self.zk_hostport = zk_hostport
        self.path = path
        self.dir = tempfile.mkdtemp(prefix="zkit-", dir="/tmp")
        self.agents = []

    def logs_in_report(self, request):
        """If the test fails, its report shows these agents' logs
        (conftest.py's hook reads the list on the test's node)."""
        node = request.node
        node._zkelect_agent_sets = getattr(node, "_zkelect_agent_sets", []) + [self]
        # The report is written after the test's own cleanup (its
        # `finally:`): keep the logs until the test's teardown.
        self.keep_dir = True
        request.addfinalizer(self.finish)
        return self

    def new(self, agent_id, start=True, zk_hostport=None, **kw):
        a = Agent(self.dir, zk_hostport or self.zk_hostport, self.path, agent_id, **kw)
        self.agents.append(a)
        if start:
            a.start()
        return a

    def running(self):
        return [a for a in self.agents if a.running()]

    def leaders(self, timeout=0.5):
        return [a for a in self.running() if not a.paused and a.is_leader(timeout)]

    def wait_one_leader(self, timeout=20, among=None, what="exactly one leader"):
        """Poll until exactly one of `among` (default: running, not paused)
        answers /v1/leader 200; return it."""
        def probe():
            pool = among if among is not None else [a for a in self.running() if not a.paused]
            ls = [a for a in pool if a.is_leader()]
            return ls[0] if len(ls) == 1 else None
        return poll(probe, timeout, interval=0.02, what=what)

    def kill_all(self):
        for a in self.agents:
            try:
                if a.paused and a.running():
                    a.resume()
                a.kill()
            except Exception:  # noqa: BLE001 - teardown must reach every agent
                pass

    def cleanup(self):
        self.kill_all()
        if not getattr(self, "keep_dir", False):
            self.remove_dir()

    def finish(self):
        """The test's teardown, after its report: a fixture's own
        teardown may not have run yet (finalizers run last first)."""
        self.kill_all()
        self.remove_dir()

    def remove_dir(self):
        if os.environ.get("ZKELECT_TEST_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------
# Independent observer: reads ZooKeeper directly with kazoo

class Observer:
    def __init__(self, zk_hostport):
        from kazoo.client import KazooClient
        # On an ensemble a fault test may pause the server the observer is
        # connected to: a read then fails with ConnectionLoss while kazoo moves
        # to another server. Reads are retried for up to 60 s (the server a
        # test pauses is back within that), so the observer sees through it.
        self.zk = KazooClient(hosts=zk_hostport, timeout=10.0,
                              command_retry={"max_tries": -1, "delay": 0.05,
                                             "max_delay": 1.0, "deadline": 60})
        self.zk.start(timeout=30)

    def close(self):
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001
            pass

    def nodes_of(self, path, agent_id):
        """The contenders (as contenders()) whose data is `agent_id`."""
        return [c for c in self.contenders(path) if c[1] == agent_id]

    def contenders(self, path):
        """[(name, data, stat)] of the election's children, sorted by the
        10-digit suffix (as the contract says contenders sort)."""
        from kazoo.exceptions import NoNodeError
        try:
            names = self.zk.retry(self.zk.get_children, path)
        except NoNodeError:
            return []
        out = []
        for n in names:
            try:
                data, stat = self.zk.retry(self.zk.get, "%s/%s" % (path, n))
            except NoNodeError:
                continue
            out.append((n, data.decode(errors="replace"), stat))

        def key(t):
            m = re.search(r"(\d{10})$", t[0])
            return int(m.group(1)) if m else -1
        return sorted(out, key=key)

    def election_node(self, path):
        """(data, stat) of the election path node itself."""
        data, stat = self.zk.retry(self.zk.get, path)
        return data.decode(errors="replace"), stat


# --------------------------------------------------------------------------
# Status recorder and the "never two leaders" checker

class Sample:
    __slots__ = ("agent", "t_start", "t_end", "is_leader", "epoch", "role", "ok",
                 "w_start", "w_end")

    def __init__(self, agent, t_start, t_end, ok, is_leader=False, epoch=None, role=None):
        self.agent = agent
        # The same window on the wall clock (time.time(), CLOCK_REALTIME, the
        # clock ZooKeeper stamps its transactions with), when the recorder
        # took it; None otherwise.
        self.w_start = None
        self.w_end = None
        self.t_start = t_start
        self.t_end = t_end
        self.ok = ok
        self.is_leader = is_leader
        self.epoch = epoch
        self.role = role

    def __repr__(self):
        return "<%s [%.3f,%.3f] leader=%s epoch=%s role=%s>" % (
            self.agent, self.t_start, self.t_end, self.is_leader, self.epoch, self.role)


class AgentPoller:
    """Asks every agent of an AgentSet (or of a list), each from a thread of
    its own, every `interval` s, with `timeout` per request: ask(agent) does
    one round. Agents added to the set while it runs are followed."""

    def __init__(self, agent_set, interval, timeout):
        self.agent_set = agent_set
        self.interval = interval
        self.timeout = timeout
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = {}
        self._watcher = None

    def ask(self, agent):
        raise NotImplementedError

    def start(self):
        self._watcher = threading.Thread(target=self._supervise, daemon=True)
        self._watcher.start()
        return self

    def _supervise(self):
        while not self._stop.is_set():
            for a in list(getattr(self.agent_set, "agents", self.agent_set)):
                if a.id not in self._threads:
                    t = threading.Thread(target=self._run, args=(a,), daemon=True)
                    self._threads[a.id] = t
                    t.start()
            self._stop.wait(0.05)

    def _run(self, agent):
        while not self._stop.is_set():
            self.ask(agent)
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        if self._watcher:
            self._watcher.join(5)
        for t in self._threads.values():
            t.join(5)
        return self


class StatusRecorder(AgentPoller):
    """Polls /v1/status of every agent of an AgentSet (~every 20 ms, short
    timeout) and records Samples. A refused or timed-out request is recorded
    as not-leader, as an app would treat it.
    """

    def __init__(self, agent_set, interval=0.02, timeout=0.3):
        super().__init__(agent_set, interval, timeout)
        self.samples = []

    def ask(self, agent):
        t0 = time.monotonic()
        w0 = time.time()        # both before the request is sent
        try:
            r = unix_request(agent.socket, "GET", "/v1/status", timeout=self.timeout)
            w1 = time.time()
            t1 = time.monotonic()
            if r.status == 200:
                d = r.json()
                s = Sample(agent.id, t0, t1, True, d.get("is_leader") is True,
                           d.get("epoch"), d.get("role"))
            else:
                s = Sample(agent.id, t0, t1, False)
        except Exception:  # noqa: BLE001 - refused/timeout/garbage = not leader
            w1 = time.time()
            s = Sample(agent.id, t0, time.monotonic(), False)
        s.w_start, s.w_end = w0, w1
        with self._lock:
            self.samples.append(s)

    def leader_samples(self):
        with self._lock:
            return [s for s in self.samples if s.is_leader]

    def violations(self):
        return check_single_leader(self.leader_samples())


def check_single_leader(samples):
    """Return a list of human-readable violations among is_leader=true samples.

    Soundness rule (no false alarms against a correct agent):
    a sample only tells us the agent answered is_leader=true at *some* instant
    inside its request window [t_start, t_end]; two windows that overlap do
    not prove two simultaneous leaders, so overlapping pairs are never compared
    by time. What we can prove is order: if X.t_end < Y.t_start then X's
    "true" instant precedes Y's. Under the contract each term has its own,
    strictly higher epoch (doc/design.md rule 3) and a term is a single interval
    of one agent, so for every strictly ordered pair of true samples:
      * X.epoch <= Y.epoch                         (epochs never go back), and
      * X.agent != Y.agent  =>  X.epoch < Y.epoch  (another agent means a new term).
    Independently of time, one epoch belongs to one agent only, and a true
    answer must carry an integer epoch.

    This catches two leaders at once: if B answered true while A held a term
    (A true before and after B with one epoch e_A), the ordered pairs force
    e_A < e_B < e_A. It also catches a stale leader waking up and answering
    true with its old epoch after a successor led. It is checked in
    O(n log n) with a sweep over the samples ordered by t_end.
    """
    problems = []
    owner = {}
    for s in samples:
        if not isinstance(s.epoch, int) or isinstance(s.epoch, bool):
            problems.append("is_leader true without an integer epoch: %r" % (s,))
            continue
        if s.epoch in owner and owner[s.epoch].agent != s.agent:
            problems.append("epoch %d claimed by two agents: %r and %r"
                            % (s.epoch, owner[s.epoch], s))
        owner.setdefault(s.epoch, s)
    good = [s for s in samples if isinstance(s.epoch, int) and not isinstance(s.epoch, bool)]
    by_end = sorted(good, key=lambda s: s.t_end)
    by_start = sorted(good, key=lambda s: s.t_start)
    i = 0
    best = None            # sample with the highest epoch among those ended so far
    best_agents = {}       # agent -> a sample, for the samples carrying best.epoch
    for y in by_start:
        while i < len(by_end) and by_end[i].t_end < y.t_start:
            x = by_end[i]
            if best is None or x.epoch > best.epoch:
                best = x
                best_agents = {x.agent: x}
            elif x.epoch == best.epoch:
                best_agents.setdefault(x.agent, x)
            i += 1
        if best is None:
            continue
        if y.epoch < best.epoch:
            problems.append("epoch went back: %r answered before %r" % (best, y))
        elif y.epoch == best.epoch and any(a != y.agent for a in best_agents):
            other = [s for a, s in best_agents.items() if a != y.agent][0]
            problems.append("two agents led with one epoch: %r then %r" % (other, y))
        if len(problems) > 20:
            break
    return problems


# --------------------------------------------------------------------------
# The agent's own log: messages, debug traces, and the leadership audit
#
# The agent writes one line per message to stderr, as text
#   "2026-12-01T10:00:00.123Z zkelectd debug: <message>"
# or as JSON {"ts": ..., "level": ..., "msg": "<message>"} (log.format: json).
# The harness appends each start of an agent to the same log file, after a
# line "==== harness: start #N of ID ====" (see Agent.start).

TEXT_LINE_RE = re.compile(r"^\S+ zkelectd (debug|info|warn|error): (.*)$")
HARNESS_START_PREFIX = "==== harness: start #"
AUDIT_RE = re.compile(r"^audit: (lead|lease|end) epoch=(\S+)((?: \w+=\S*)*)")
AUDIT_KV_RE = re.compile(r" (\w+)=(\S*)")
TRACE_RE = re.compile(r"^trace: ([a-z][a-z-]*) at=(\d+)\b")
ROLE_LEADER_RE = re.compile(r"^role \S+ -> leader \(.*epoch (\d+)")


def boottime_us():
    """CLOCK_BOOTTIME in microseconds: the clock of the agent's audit and
    trace lines (shared by every process on the machine)."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) // 1000


def log_messages(lines):
    """Yield (kind, text) for an agent log: ("start", marker) at each harness
    start marker, ("msg", message) for each line the agent wrote (text or
    JSON format). Other lines (a hook's own output) are skipped."""
    for raw in lines:
        if isinstance(raw, bytes):
            raw = raw.decode(errors="replace")
        line = raw.rstrip("\r\n")
        if line.startswith(HARNESS_START_PREFIX):
            yield "start", line
            continue
        if line.startswith("{"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("msg"), str):
                yield "msg", d["msg"]
            continue
        m = TEXT_LINE_RE.match(line)
        if m:
            yield "msg", m.group(2)


def read_log_lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace").splitlines()
    except OSError:
        return []


def parse_epoch(text):
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def parse_traces(lines):
    """[(step, at_us)] of the agent's `trace: <step> at=<us>` debug lines, in
    log order (at: CLOCK_BOOTTIME microseconds)."""
    out = []
    for kind, msg in log_messages(lines):
        if kind == "msg":
            m = TRACE_RE.match(msg)
            if m:
                out.append((m.group(1), int(m.group(2))))
    return out


class LeaderInterval:
    """One term of one agent, from its audit lines, in CLOCK_BOOTTIME µs:
    [start, end) with end = min(the `end` line's at, last lease until x 1000).
    The agent answers is_leader true only inside it. `ended` says how the
    term closed: "end" (an `audit: end` line), or "until" when no end line
    came (killed, restarted, or still leading when the log was read)."""

    __slots__ = ("agent", "epoch", "start", "end", "until_ms", "end_at", "reason",
                 "ended", "leases")

    def __init__(self, agent, epoch, start, until_ms):
        self.agent = agent
        self.epoch = epoch
        self.start = start
        self.until_ms = until_ms
        self.end_at = None
        self.reason = None
        self.ended = None
        self.leases = 0
        self.end = None

    def close(self, end_at=None, reason=None):
        lease_end = self.until_ms * 1000
        if end_at is not None:
            self.end_at = end_at
            self.reason = reason
            self.ended = "end"
            self.end = min(end_at, lease_end)
        else:
            self.ended = "until"
            self.end = lease_end
        return self

    def __repr__(self):
        return "<%s epoch %s [%d, %d) us%s>" % (
            self.agent, self.epoch, self.start, self.end,
            "" if self.ended == "end" else " (no end line: ends at its lease)")


def parse_audit(lines, agent):
    """Leadership intervals of one agent from its log lines.

    Lines (debug level): `audit: lead epoch=E at=US until=MS` when a term
    starts, `audit: lease epoch=E until=MS` on each lease extension,
    `audit: end epoch=E at=US reason=TEXT` when it stops leading. A term left
    open by a restart (kill -9) or by the end of the log ends at its last
    `until`. Returns (intervals, led_epochs, problems): led_epochs are the
    epochs of the agent's info lines "role X -> leader (..., epoch E ...)",
    problems are audit lines that contradict each other."""
    intervals, led, problems = [], [], []
    cur = None
    for kind, msg in log_messages(lines):
        if kind == "start":
            if cur is not None:
                intervals.append(cur.close())
                cur = None
            continue
        m = ROLE_LEADER_RE.match(msg)
        if m:
            led.append(int(m.group(1)))
            continue
        m = AUDIT_RE.match(msg)
        if not m:
            continue
        what = m.group(1)
        kv = dict(AUDIT_KV_RE.findall(m.group(3)))
        try:
            epoch = parse_epoch(m.group(2))
            at = int(kv["at"]) if "at" in kv else None
            until = int(kv["until"]) if "until" in kv else None
        except ValueError:
            problems.append("%s: unreadable audit line: %r" % (agent, msg))
            continue
        if what == "lead":
            if at is None or until is None:
                problems.append("%s: audit lead line without at= or until=: %r" % (agent, msg))
                continue
            if cur is not None:
                problems.append("%s: term epoch %d began before term epoch %d ended "
                                "(no audit end line)" % (agent, epoch, cur.epoch))
                intervals.append(cur.close())
            cur = LeaderInterval(agent, epoch, at, until)
        elif what == "lease":
            if until is None:
                problems.append("%s: audit lease line without until=: %r" % (agent, msg))
            elif cur is None or cur.epoch != epoch:
                problems.append("%s: lease extension for epoch %d outside that term "
                                "(current term: %s)" % (agent, epoch,
                                                         cur.epoch if cur else "none"))
            else:
                cur.until_ms = max(cur.until_ms, until)
                cur.leases += 1
        else:
            if at is None:
                problems.append("%s: audit end line without at=: %r" % (agent, msg))
            elif cur is None or cur.epoch != epoch:
                problems.append("%s: end of epoch %d outside that term (current term: %s)"
                                % (agent, epoch, cur.epoch if cur else "none"))
            else:
                intervals.append(cur.close(at, kv.get("reason")))
                cur = None
    if cur is not None:
        intervals.append(cur.close())
    return intervals, led, problems


def audit_enabled():
    """The audit checks run unless ZKELECT_AUDIT=off (for an agent that does
    not log audit lines yet; the checks then say loudly that they were off)."""
    return os.environ.get("ZKELECT_AUDIT", "on").lower() not in ("off", "0", "no")


def check_audit(logs):
    """The exact "never two leaders" check, on every agent's audit intervals.

    `logs` is {agent id: list of log lines}. Returns (problems, figures).
    Problems: an agent that led (its log says "role X -> leader") without any
    audit line, or with a term whose epoch has no `audit: lead` line (so the
    check cannot silently pass); contradictory audit lines; two agents'
    intervals that overlap; terms whose epochs do not increase with time.
    Figures: terms, agents that led, the smallest and median gap (ms) between
    consecutive terms of different agents."""
    problems, intervals = [], []
    led_agents = 0
    for agent, lines in sorted(logs.items()):
        iv, led, pr = parse_audit(lines, agent)
        problems += pr
        intervals += iv
        if led:
            led_agents += 1
        if led and not iv:
            problems.append(
                "%s led %d time(s) (its log says 'role ... -> leader', epochs %s) but logged "
                "no 'audit: lead' line: the interval check cannot run. The agent must log "
                "its audit lines at debug level (log.level: debug); a build without them "
                "cannot pass (ZKELECT_AUDIT=off skips the check, loudly)" % (
                    agent, len(led), ", ".join(str(e) for e in led[:5])))
            continue
        have = {i.epoch for i in iv}
        missing = [e for e in led if e not in have]
        if missing:
            problems.append("%s led with epoch(s) %s without an 'audit: lead' line for it"
                            % (agent, ", ".join(str(e) for e in missing[:5])))
    ordered = sorted(intervals, key=lambda i: (i.start, i.end))
    # overlaps between different agents (sweep: every earlier term still
    # running when this one starts)
    active = []
    for b in ordered:
        active = [a for a in active if a.end > b.start]
        for a in active:
            if a.agent != b.agent and b.start < b.end:
                problems.append("two leaders at once: %r and %r overlap by %.3f ms"
                                % (a, b, (min(a.end, b.end) - b.start) / 1000.0))
        if b.end > b.start:
            active.append(b)
    real = [i for i in ordered if i.end > i.start]
    for a, b in zip(real, real[1:]):
        if b.epoch <= a.epoch:
            problems.append("epochs do not increase with time: %r then %r" % (a, b))
    gaps = [(b.start - a.end) / 1000.0 for a, b in zip(real, real[1:]) if a.agent != b.agent]
    figures = {
        "terms": len(intervals),
        "agents_led": led_agents,
        "open_terms": sum(1 for i in intervals if i.ended != "end"),
        "handovers": len(gaps),
        "min_gap_ms": min(gaps) if gaps else None,
        "median_gap_ms": sorted(gaps)[len(gaps) // 2] if gaps else None,
    }
    return problems[:50] + (["... and %d more" % (len(problems) - 50)]
                            if len(problems) > 50 else []), figures


def audit_agents(agents, samples=None):
    """check_audit over the log files of `agents` (Agent objects); with
    `samples` (StatusRecorder samples), also every is_leader true answer
    must lie inside an audited term of that agent and epoch."""
    logs = {a.id: read_log_lines(a.log_path) for a in agents}
    problems, figures = check_audit(logs)
    if samples is not None:
        intervals = []
        for aid, lines in logs.items():
            intervals += parse_audit(lines, aid)[0]
        audited = {i.agent for i in intervals}
        unaudited = collections.Counter(x.agent for x in samples
                                        if x.is_leader and x.agent not in audited)
        for aid, n in sorted(unaudited.items()):
            problems.append("%s answered is_leader true %d time(s) but its log has no audit "
                            "term at all" % (aid, n))
        outside = audit_samples_outside(intervals, [x for x in samples
                                                    if x.agent in audited])
        problems += outside[:20]
        if len(outside) > 20:
            problems.append("... and %d more answers outside the audit" % (len(outside) - 20))
        figures["answers_checked"] = sum(1 for x in samples
                                         if x.is_leader and x.agent in audited)
    return problems, figures


def audit_samples_outside(intervals, samples, slack_us=200):
    """Recorder samples (is_leader true) that no audit interval of the same
    agent and epoch covers: the sample's window [t_start, t_end] (monotonic
    seconds, converted to CLOCK_BOOTTIME) must meet [start, end). Proves the
    audit lines tell the truth about the answers the agent gave."""
    off = time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()
    by = {}
    for i in intervals:
        by.setdefault((i.agent, i.epoch), []).append(i)
    out = []
    for s in samples:
        if not s.is_leader:
            continue
        t0 = (s.t_start + off) * 1e6
        t1 = (s.t_end + off) * 1e6
        if not any(t1 + slack_us >= i.start and t0 - slack_us < i.end
                   for i in by.get((s.agent, s.epoch), [])):
            out.append("%r answered is_leader true outside its audited terms %s"
                       % (s, by.get((s.agent, s.epoch), "(none with that epoch)")))
    return out


def format_audit_figures(fig):
    return ("audit: %d terms of %d agents (%d without an end line), %d handovers between "
            "agents, smallest gap %s, median gap %s" % (
                fig["terms"], fig["agents_led"], fig["open_terms"], fig["handovers"],
                "%.3f ms" % fig["min_gap_ms"] if fig["min_gap_ms"] is not None else "n/a",
                "%.3f ms" % fig["median_gap_ms"] if fig["median_gap_ms"] is not None
                else "n/a"))


# --------------------------------------------------------------------------
# A fast prober of /v1/leader (one raw request per probe, no HTTP library)

_LEADER_REQ = b"GET /v1/leader HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


def leader_code_raw(sock_path, timeout=0.2):
    """HTTP status of GET /v1/leader on a fresh connection (reads the status
    line only), or None when the agent refused, reset or did not answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(_LEADER_REQ)
        buf = b""
        while b"\r\n" not in buf:
            b = s.recv(256)
            if not b:
                return None
            buf += b
        return int(buf.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return None
    finally:
        s.close()


class LeaderProbe:
    """Probes one agent's /v1/leader in a thread, one request after the other
    with `interval` s between them, and keeps (t_sent, t_answered, code) in
    time.monotonic() seconds. Code 200 = is_leader true."""

    def __init__(self, agent, interval=0.001, timeout=0.2):
        self.agent = agent
        self.interval = interval
        self.timeout = timeout
        self.records = []
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            t0 = time.monotonic()
            code = leader_code_raw(self.agent.socket, self.timeout)
            self.records.append((t0, time.monotonic(), code))
            if self.interval:
                self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        return self

    def leading(self):
        return [r for r in list(self.records) if r[2] == 200]


def new_election_path():
    return "/zkelect/test-%s" % uuid.uuid4().hex[:12]
