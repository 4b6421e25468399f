# SPDX-License-Identifier: MIT
"""docker/compose.yaml, run for real with podman-compose: a three-server
ZooKeeper ensemble, three agents built from docker/Dockerfile, and beside
each agent the fenced writer of examples/ writing to one shared SQLite
ledger. One agent leads and only its app writes, under its epoch; stopping
it (`podman-compose stop`) exits 0 and hands over to another agent, whose
app writes under a higher epoch; the ledger's epochs never go down.

The images a registry would give (zookeeper:3.8, python:3.11-slim) are
built here from Debian's packages (tests/integration/standins/), and
standins/compose.loopback.yaml puts every service on the host's loopback
(the ZooKeeper servers on 127.0.0.11-13). Skipped only where podman cannot
run a container, or podman-compose is missing."""

import os
import shutil
import socket
import sqlite3
import subprocess
import time
import uuid

import pytest

import podmanharness  # noqa: E402
from podmanharness import TOP  # noqa: E402
from zkharness import poll, unix_request  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.join(HERE, "standins")
AGENTS = ("agent1", "agent2", "agent3")


@pytest.fixture(scope="module")
def podman():
    p = podmanharness.podman_or_skip()
    if not shutil.which("podman-compose"):
        pytest.skip("podman-compose not installed (scripts/install-deps.sh --test installs it)")
    return p


def standin(podman, tag, dockerfile):
    """Build a stand-in image once; it stays in the test cache."""
    if not podman.exists(tag):
        podman.build(tag, os.path.join(STANDINS, dockerfile), context=STANDINS)


def ports_free():
    for addr, ports in (("127.0.0.11", (2181, 2888, 3888)), ("127.0.0.12", (2181, 2888, 3888)),
                        ("127.0.0.13", (2181, 2888, 3888)),
                        ("127.0.0.1", (8471, 8472, 8473))):
        for port in ports:
            with socket.socket() as s:
                # As the servers bind: a connection of an earlier run that
                # lingers in TIME_WAIT does not keep them from listening.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((addr, port))
                except OSError as e:
                    raise AssertionError("%s:%d is taken (%s); the compose test needs it"
                                         % (addr, port, e))


class Compose:
    def __init__(self, podman, project):
        self.podman = podman
        self.project = project
        self.argv = ["podman-compose", "--podman-path", os.path.join(STANDINS, "podman-host-net"),
                     "-p", project,
                     "-f", os.path.join(TOP, "docker/compose.yaml"),
                     "-f", os.path.join(STANDINS, "compose.loopback.yaml")]

    def __call__(self, *args, timeout=300, check=True):
        r = subprocess.run(self.argv + list(args), capture_output=True, text=True,
                           env=self.podman.env, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError("podman-compose %s: exit %d\n%s%s" % (
                " ".join(args), r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
        return r

    def running(self):
        return sorted(self.podman.run(
            "ps", "--filter", "label=io.podman.compose.project=%s" % self.project,
            "--format", "{{.Names}}").stdout.split())

    def logs(self):
        """The end of every container's log, for a failure report."""
        out = []
        for n in self.podman.run("ps", "-a", "--filter",
                                 "label=io.podman.compose.project=%s" % self.project,
                                 "--format", "{{.Names}}").stdout.split():
            r = self.podman.run("logs", "--tail", "25", n, check=False)
            out.append("---- %s\n%s%s" % (n, r.stdout, r.stderr))
        return "\n".join(out)

    def container(self, service):
        return "%s_%s_1" % (self.project, service)

    def volume_path(self, volume):
        return self.podman.run("volume", "inspect", "-f", "{{.Mountpoint}}",
                               "%s_%s" % (self.project, volume)).stdout.strip()


def status(sock):
    try:
        r = unix_request(sock, "GET", "/v1/status", timeout=1.0)
    except OSError:
        return None
    return r.json() if r.status == 200 else None


def ledger(path):
    """[(id, writer, epoch)] in commit order ([] until the first write)."""
    if not os.path.exists(path):
        return []
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=5)
    try:
        return db.execute("SELECT id, writer, epoch FROM ledger ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def test_compose_demo_elects_fences_and_hands_over(podman):
    ports_free()
    standin(podman, "docker.io/library/zookeeper:3.8", "zookeeper.Dockerfile")
    standin(podman, "docker.io/library/python:3.11-slim", "python.Dockerfile")
    podmanharness.zkelect_image(podman)
    compose = Compose(podman, "zkit%s" % uuid.uuid4().hex[:8])
    try:
        t0 = time.monotonic()
        up = compose("up", "-d", "--no-build")
        # podman-compose 1.0 exits 0 even when a container failed to start.
        services = ["zk1", "zk2", "zk3"] + list(AGENTS) + ["app1", "app2", "app3"]
        assert compose.running() == sorted(compose.container(s) for s in services), \
            up.stdout[-4000:] + up.stderr[-4000:]
        socks = {a: os.path.join(compose.volume_path("run%s" % a[-1]), "zkelect.sock")
                 for a in AGENTS}
        db = os.path.join(compose.volume_path("ledger"), "ledger.db")

        def one_leader(among):
            st = {a: status(socks[a]) for a in among}
            ls = [a for a, s in st.items() if s and s["is_leader"]]
            if len(ls) != 1:
                return None
            lead = st[ls[0]]
            if all(s and s["leader"] and s["leader"]["id"] == ls[0] for s in st.values()):
                return ls[0], lead
            return None
        first, s1 = poll(lambda: one_leader(AGENTS), 180, interval=0.2,
                         what="one leader among the three agents, named by all")
        print("compose: ensemble up and %s leads %.1f s after `up`"
              % (first, time.monotonic() - t0))
        assert s1["candidates"] == 3, s1
        app1 = "app" + first[-1]
        poll(lambda: any(w == app1 and e == s1["epoch"] for _, w, e in ledger(db)), 60,
             interval=0.2, what="%s to write under epoch %d" % (app1, s1["epoch"]))

        # Stop the leader: SIGTERM, exit 0, another agent leads at once.
        t1 = time.monotonic()
        stop = subprocess.Popen(compose.argv + ["stop", "-t", "30", first], env=podman.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        rest = [a for a in AGENTS if a != first]
        second, s2 = poll(lambda: one_leader(rest), 30, interval=0.01,
                          what="a successor after stopping %s" % first)
        t2 = time.monotonic()
        out = stop.communicate(timeout=120)[0]
        assert stop.returncode == 0, out
        print("compose: %s leads %.0f ms after `podman-compose stop %s` began "
              "(it returned after %.0f ms)" % (second, (t2 - t1) * 1000, first,
                                               (time.monotonic() - t1) * 1000))
        state, code = podmanharness.container_exit(podman, compose.container(first))
        assert state == "exited" and code == 0, (state, code)
        assert s2["epoch"] > s1["epoch"], (s1, s2)
        app2 = "app" + second[-1]
        poll(lambda: any(w == app2 and e == s2["epoch"] for _, w, e in ledger(db)), 60,
             interval=0.2, what="%s to write under epoch %d" % (app2, s2["epoch"]))
        logs = podman.run("logs", compose.container(second))
        assert "hook: %s leads, epoch %d" % (second, s2["epoch"]) in logs.stdout + logs.stderr

        rows = ledger(db)
        epochs = [e for _, _, e in rows]
        assert epochs == sorted(epochs), "ledger epochs went down: %r" % rows
        writers = {(w, e) for _, w, e in rows}
        # Only the leading agent's app wrote, each under its own agent's epoch.
        assert writers <= {(app1, s1["epoch"]), (app2, s2["epoch"])}, writers
    except BaseException:
        print(compose.logs())
        raise
    finally:
        compose("down", "-v", "-t", "30", check=False)
        left = podman.run("ps", "-a", "--filter", "label=io.podman.compose.project=%s"
                          % compose.project, "--format", "{{.Names}}").stdout.split()
        vols = [v for v in podman.run("volume", "ls", "--format", "{{.Name}}").stdout.split()
                if v.startswith(compose.project + "_")]
        for n in left:
            podman.run("rm", "--force", "--time", "0", n, check=False)
        for v in vols:
            podman.run("volume", "rm", "--force", v, check=False)
        # podman-compose 1.0 creates the project's network, unused here, and
        # leaves it behind.
        podman.run("network", "rm", "--force", compose.project + "_default", check=False)
    assert not left and not vols, (left, vols)
