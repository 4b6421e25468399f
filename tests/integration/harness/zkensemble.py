# SPDX-License-Identifier: MIT
"""A 3-server ZooKeeper ensemble on loopback for the fault tests.

Each server has its own client, quorum and election ports, its own data dir
(with myid), zoo.cfg (tickTime=200 unless told, initLimit/syncLimit of 4 s
and 2 s whatever the tick, 4lw whitelist, admin server off) and log4j
configuration writing to a file.

Ensemble(size, observers=K) adds K observers (`server.N=...:observer` in
every cfg, `peerType=observer` in the observer's own). With
observer_master=True every server also gets `observerMasterPort=`: each
follower then serves observers on that port, and an observer connects to a
follower (chosen at random, the leader never: ZooKeeper 3.8 starts an
ObserverMaster only in a follower) instead of to the leader, so the
follower relays the observer's requests and session touches. An observer
derives each voter's ObserverMaster address from that voter's quorum address
and its *own* observerMasterPort, so the port is one for all servers, and
with observer_master=True server N listens on its own loopback address
127.0.0.N (client, quorum, election and ObserverMaster ports). tick_ms sets
the ensemble's tickTime; reconfig_enabled writes `reconfigEnabled=true`
(ZooKeeper then moves the server lines to a zoo.cfg.dynamic.* file and
rewrites zoo.cfg, without peerType); client_in_server_lines appends each
server's `;host:clientPort` to its server line, so that /zookeeper/config
names the client addresses too. Servers can be
started, stopped (SIGTERM), killed (SIGKILL), paused (SIGSTOP) and resumed.
wait_quorum() polls `srvr` on every server with a deadline until one leads
and the others follow.

The `ensemble` fixture (module scope) starts one ensemble per test module;
each test should call ensemble.ensure_healthy() first, which restarts or
resumes what an earlier test left broken.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from zkharness import (LOG4J, SLOW, PollAbort, ZooKeeperProcess, four_letter, free_port, poll,
                       start_zookeeper)

TICK_MS = 200
INIT_LIMIT = 20       # ticks: 4 s for a follower to connect and sync (slow JVMs)
SYNC_LIMIT = 10       # ticks: 2 s before a silent follower/leader is dropped
INIT_MS = INIT_LIMIT * TICK_MS
SYNC_MS = SYNC_LIMIT * TICK_MS


def _mode_of(srvr_answer):
    if not srvr_answer:
        return None
    for line in srvr_answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


class EnsembleServer(ZooKeeperProcess):
    def __init__(self, myid, base_dir, client_port, quorum_port, election_port,
                 observer=False, host="127.0.0.1"):
        self.myid = myid
        self.host = host
        self.observer = observer
        self.port = client_port
        self.quorum_port = quorum_port
        self.election_port = election_port
        self.dir = os.path.join(base_dir, "zk%d" % myid)
        self.data = os.path.join(self.dir, "data")
        self.conf = os.path.join(self.dir, "conf")
        self.cfg = os.path.join(self.dir, "zoo.cfg")
        self.proc = None
        self.paused = False
        self.out = None
        self.starts = 0

    def write_config(self, peers, tick_ms=TICK_MS, observer_master_port=None,
                     reconfig_enabled=False, client_in_server_lines=False):
        """zoo.cfg for this server; `peers` is every server, itself included."""
        os.makedirs(self.data, exist_ok=True)
        os.makedirs(self.conf, exist_ok=True)
        with open(os.path.join(self.data, "myid"), "w") as f:
            f.write("%d\n" % self.myid)
        with open(os.path.join(self.conf, "log4j.properties"), "w") as f:
            f.write(LOG4J)
        with open(self.cfg, "w") as f:
            f.write("tickTime=%d\n" % tick_ms)
            f.write("initLimit=%d\n" % -(-INIT_MS // tick_ms))
            f.write("syncLimit=%d\n" % -(-SYNC_MS // tick_ms))
            f.write("dataDir=%s\n" % self.data)
            f.write("clientPort=%d\n" % self.port)
            f.write("clientPortAddress=%s\n" % self.host)
            f.write("minSessionTimeout=400\n")
            f.write("maxSessionTimeout=10000\n")
            f.write("admin.enableServer=false\n")
            f.write("4lw.commands.whitelist=*\n")
            f.write("maxClientCnxns=0\n")
            f.write("standaloneEnabled=false\n")
            f.write("reconfigEnabled=%s\n" % ("true" if reconfig_enabled else "false"))
            if self.observer:
                f.write("peerType=observer\n")
            if observer_master_port:
                f.write("observerMasterPort=%d\n" % observer_master_port)
            for p in peers:
                f.write("server.%d=%s:%d:%d%s%s\n" % (
                    p.myid, p.host, p.quorum_port, p.election_port,
                    ":observer" if p.observer else "",
                    ";%s:%d" % (p.host, p.port) if client_in_server_lines else ""))

    def start(self):
        assert not self.running(), "zk%d already running" % self.myid
        self.starts += 1
        self.proc, self.out = start_zookeeper(
            self.dir, self.conf, self.cfg, mode="ab",
            extra_props=["-Dzookeeper.4lw.commands.whitelist=*",
                         "-Dzookeeper.cnxTimeout=1000"])
        self.paused = False
        return self

    def srvr(self, timeout=1.0):
        if not self.running() or self.paused:
            return None
        return four_letter(self.host, self.port, "srvr", timeout=timeout)

    def mode(self):
        """'leader', 'follower', 'observer', or None (down, paused, not
        serving)."""
        return _mode_of(self.srvr())

    def zxid(self):
        a = self.srvr()
        for line in (a or "").splitlines():
            if line.startswith("Zxid:"):
                return int(line.split(":", 1)[1].strip(), 16)
        return None

    def session_ids(self):
        """Session ids of the clients connected to this server (from `cons`)."""
        if not self.running() or self.paused:
            return set()
        a = four_letter(self.host, self.port, "cons", timeout=1.0) or ""
        out = set()
        for line in a.splitlines():
            i = line.find("sid=")
            if i >= 0:
                v = line[i + 4:].split(",")[0].split(")")[0].strip()
                try:
                    out.add(int(v, 16))
                except ValueError:
                    pass
        return out

    def stop(self, timeout=20):
        """SIGTERM (a clean shutdown), SIGKILL if it lingers."""
        if self.paused:
            self.resume()
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.close_out()


    def learner_master(self):
        """For an observer: the myid of the server it last began to observe
        through (its log's last `Observing new leader sid=N`: the leader, or
        with observerMasterPort a follower's ObserverMaster), or None."""
        try:
            with open(self.log_path, "rb") as f:
                data = f.read().decode(errors="replace")
        except OSError:
            return None
        m = None
        for m in re.finditer(r"Observing new leader sid=(\d+)", data):
            pass
        return int(m.group(1)) if m else None

    def log_tail(self, n=3000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def __repr__(self):
        return "<zk%d %s %s>" % (self.myid, self.hostport,
                                 "paused" if self.paused else
                                 ("up" if self.running() else "down"))


class Ensemble:
    def __init__(self, size=3, observers=0, tick_ms=TICK_MS, observer_master=False,
                 reconfig_enabled=False, client_in_server_lines=False):
        """`size` voting servers (myid 1..size), then `observers` observers."""
        self.dir = tempfile.mkdtemp(prefix="zkit-ens-", dir="/tmp")
        self.tick_ms = tick_ms
        self._shape = (size, observers, observer_master, reconfig_enabled,
                       client_in_server_lines)
        self._configure(0)

    def _configure(self, attempt):
        """Servers on fresh free ports, each in <dir>/try<attempt>/zkN (the
        first try in <dir>/zkN), with their zoo.cfg written."""
        size, observers, observer_master, reconfig_enabled, cis = self._shape
        base = self.dir if attempt == 0 else os.path.join(self.dir, "try%d" % attempt)
        self.servers = []
        for i in range(1, size + observers + 1):
            host = "127.0.0.%d" % i if observer_master else "127.0.0.1"
            self.servers.append(EnsembleServer(i, base, free_port(), free_port(),
                                               free_port(), observer=i > size, host=host))
        self.observer_master_port = free_port() if observer_master else None
        for s in self.servers:
            s.write_config(self.servers, tick_ms=self.tick_ms,
                           observer_master_port=self.observer_master_port,
                           reconfig_enabled=reconfig_enabled,
                           client_in_server_lines=cis)

    @property
    def voters(self):
        return [s for s in self.servers if not s.observer]

    @property
    def observers(self):
        return [s for s in self.servers if s.observer]

    def start(self, timeout=120, attempts=2):
        """Start every server and wait for the quorum. A server that exits
        before the quorum forms (a free port taken meanwhile, a JVM that
        failed) ends the wait at once; the ensemble is then tried again on
        fresh ports, and the last failure names each server's own words."""
        if not shutil.which("java"):
            raise RuntimeError("java not found: install the zookeeper package")
        for attempt in range(attempts):
            if attempt:
                self._configure(attempt)
            for s in self.servers:
                s.start()
            try:
                self.wait_quorum(timeout, abort_on_exit=True)
                return self
            except AssertionError as e:
                why = "%s\n%s" % (e, self.diagnostics())
                self.stop()
                if attempt + 1 == attempts:
                    raise AssertionError("ensemble did not start in %d tries: %s"
                                         % (attempts, why)) from None
                print("zkensemble: try %d failed, again on fresh ports: %s"
                      % (attempt + 1, why))
        return self

    def diagnostics(self, n=1500):
        """Each server's state, exit status and the end of its stdout and log."""
        out = []
        for s in self.servers:
            rc = s.proc.poll() if s.proc is not None else None
            try:
                with open(os.path.join(s.dir, "stdout.log"), "rb") as f:
                    so = f.read()[-n:].decode(errors="replace")
            except OSError:
                so = ""
            out.append("--- %r exit=%s\n[stdout] %s\n[log] %s"
                       % (s, rc, so.strip(), s.log_tail(n).strip()))
        return "\n".join(out)

    def connect_string(self, order=None):
        """host:port list; `order` is a list of indexes (0-based) into servers."""
        order = order if order is not None else range(len(self.servers))
        return ",".join(self.servers[i].hostport for i in order)

    @property
    def hostports(self):
        return self.connect_string()

    def modes(self):
        return {s.myid: s.mode() for s in self.servers}

    def wait_quorum(self, timeout=90, expect=None, what=None, abort_on_exit=False):
        """Poll `srvr` until exactly one server leads and every other live one
        follows (an observer: observes); `expect` = how many must serve
        (default: every server that runs and is not paused). Returns the
        leading EnsembleServer. abort_on_exit: a server that exits ends the
        wait at once."""
        last = {}

        def probe():
            if abort_on_exit:
                gone = [s for s in self.servers if s.proc is not None and not s.running()]
                if gone:
                    raise PollAbort("%s exited while the quorum formed" % gone)
            live = [s for s in self.servers if s.running() and not s.paused]
            want = expect if expect is not None else len(live)
            ms = {s.myid: s.mode() for s in live}
            last["m"] = ms
            leaders = [s for s in live if ms[s.myid] == "leader"]
            followers = [s for s in live
                         if ms[s.myid] == ("observer" if s.observer else "follower")]
            if len(leaders) == 1 and len(leaders) + len(followers) == want:
                return leaders[0]
            return None
        try:
            return poll(probe, timeout, interval=0.1,
                        what=what or "ZooKeeper quorum (one leader, the rest followers)")
        except AssertionError as e:
            raise AssertionError("%s; modes %s; %s" % (e, last.get("m"), self.servers)) \
                from None

    def leader(self):
        """The server that says it leads now, or None."""
        for s in self.servers:
            if s.mode() == "leader":
                return s
        return None

    def server_of_session(self, session_id):
        """The server a client session is connected to (from `cons`), or None."""
        for s in self.servers:
            if session_id in s.session_ids():
                return s
        return None

    def ensure_healthy(self, timeout=120):
        """Resume paused servers, start stopped ones, wait for a full quorum."""
        for s in self.servers:
            if s.paused:
                s.resume()
            if not s.running():
                s.start()
        return self.wait_quorum(timeout, expect=len(self.servers),
                                what="full ensemble quorum")

    def stop(self):
        for s in self.servers:
            try:
                if s.paused:
                    s.resume()
                s.kill()
            except Exception:  # noqa: BLE001 - teardown must reach every server
                pass

    def cleanup(self):
        self.stop()
        if os.environ.get("ZKELECT_TEST_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self):
        return "<Ensemble %s>" % self.servers


@pytest.fixture(scope="module")
def ensemble():
    ens = Ensemble(3)
    try:
        ens.start()
    except Exception:
        ens.cleanup()
        raise
    try:
        yield ens
    finally:
        ens.cleanup()
