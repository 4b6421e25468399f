# SPDX-License-Identifier: MIT
"""The example clients of examples/clients/ (Go: net/http over a Unix-socket
dialer; Java 17: a Unix-domain SocketChannel) against real agents: each one
reads /v1/status, long-polls for changes, and writes "epoch=E" only under
the epoch of an answer that said it leads. Over resigns and a handover the
file holds exactly this agent's epochs of its own terms, in order; a change
reaches the client through the long poll at once (not after its wait);
a stopped agent means no writes; SIGTERM ends the client."""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from zkharness import SLOW, poll  # noqa: E402

# The clients' long-poll wait in these tests: ten minutes, the agent's
# most, so that a change that reached a client in seconds (the bound below,
# with the suite's slowdown) came through the long poll, not its timeout.
WAIT_S = 600

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLIENTS = os.path.join(TOP, "examples", "clients")


@pytest.fixture(scope="module")
def go_client():
    if not shutil.which("go"):
        pytest.skip("go not installed (scripts/install-deps.sh --test installs golang-go)")
    d = tempfile.mkdtemp(prefix="zkit-go-")
    try:
        # A build cache of its own, removed afterwards; no module downloads.
        env = dict(os.environ, GOCACHE=os.path.join(d, "cache"), GOPROXY="off",
                   GOFLAGS="-mod=mod", GOPATH=os.path.join(d, "gopath"))
        r = subprocess.run(["go", "build", "-o", os.path.join(d, "client"), "."],
                           cwd=os.path.join(CLIENTS, "go"), env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        r = subprocess.run(["go", "vet", "."], cwd=os.path.join(CLIENTS, "go"), env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        yield lambda sock, out: [os.path.join(d, "client"), "-socket", sock, "-out", out,
                                 "-wait", "%ds" % WAIT_S]
    finally:
        subprocess.run(["chmod", "-R", "u+w", d])   # Go marks its module cache read-only
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def java_client():
    if not (shutil.which("javac") and shutil.which("java")):
        pytest.skip("javac not installed (scripts/install-deps.sh --test installs default-jdk-headless)")
    d = tempfile.mkdtemp(prefix="zkit-java-")
    try:
        r = subprocess.run(["javac", "-Xlint:all", "-Werror", "-d", d,
                            os.path.join(CLIENTS, "java", "ZkelectClient.java")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        yield lambda sock, out: ["java", "-Xmx64m", "-cp", d, "ZkelectClient",
                                 "--socket", sock, "--out", out,
                                 "--wait-ms", str(WAIT_S * 1000)]
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(params=["go", "java"])
def client(request):
    return request.getfixturevalue(request.param + "_client")


class Client:
    def __init__(self, argv, workdir):
        self.out = os.path.join(workdir, "writes.txt")
        self.log_path = os.path.join(workdir, "client.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=self._log,
                                     stdin=subprocess.DEVNULL)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def writes(self):
        try:
            with open(self.out) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def test_client_follows_leadership_and_writes_under_its_epochs(client, agents, tmp_path):
    a1 = agents.new("a1")
    agents.wait_one_leader(20)
    a2 = agents.new("a2")
    assert a1.wait_for(lambda s: s["is_leader"], 20)["is_leader"]
    a2.wait_for(lambda s: s["role"] == "follower", 20)
    e1 = a1.status()["epoch"]

    c = Client(client(a1.socket, str(tmp_path / "writes.txt")), str(tmp_path))
    try:
        poll(lambda: c.writes() == ["epoch=%d" % e1], 60,
             what="the client's first write, under epoch %d" % e1)

        # a1 steps down (and stays out for 2 s): the long poll returns at
        # once with role follower, long before its wait (WAIT_S).
        t0 = time.monotonic()
        r = a1.request("POST", "/v1/resign?hold=2s")
        assert r.status == 200, r
        poll(lambda: "role=follower" in c.log() or "role=unknown" in c.log(), 10,
             what="the client to hear of the resign")
        heard = time.monotonic() - t0
        assert heard < 5 * SLOW < WAIT_S, "the change took %.1f s to reach the client" % heard
        print("client heard of the resign %.0f ms after it was asked" % (heard * 1000))
        a2.wait_for(lambda s: s["is_leader"], 20)

        # a2 hands back: a1 leads again under a higher epoch, and the
        # client's next write carries it.
        a1.wait_for(lambda s: s["position"] == 1, 20)
        r = a2.request("POST", "/v1/resign?hold=0s")
        assert r.status == 200, r
        e2 = a1.wait_for(lambda s: s["is_leader"], 20)["epoch"]
        assert e2 > e1
        poll(lambda: "epoch=%d" % e2 in c.writes(), 20,
             what="a write under the new epoch %d" % e2)

        # The agent stops: unreachable means "not leader", no more writes.
        n = len(c.writes())
        a1.stop()
        poll(lambda: "not leader" in c.log(), 10, what="the client to notice the agent is gone")
        assert len(c.writes()) == n
        # Only a1's own epochs, in order, each term's first.
        w = c.writes()
        assert set(w) == {"epoch=%d" % e1, "epoch=%d" % e2}, w
        assert w.index("epoch=%d" % e2) > max(i for i, x in enumerate(w) if x == "epoch=%d" % e1)
    finally:
        code = c.stop()
    assert code in (0, 128 + signal.SIGTERM, -signal.SIGTERM), (code, c.log())
