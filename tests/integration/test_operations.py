# SPDX-License-Identifier: MIT
"""Operating the agent: systemd notifications, metrics, reload on SIGHUP,
ZooKeeper auth and ACLs, the command line, and a valgrind run."""

import os
import re
import shutil
import signal
import socket
import subprocess
import threading

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from zkharness import SLOW, ZKELECTD, poll  # noqa: E402


class NotifySocket:
    """A fake systemd NOTIFY_SOCKET that records every datagram."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.messages.extend(data.decode().split("\n"))

    def seen(self, prefix):
        with self.lock:
            return [m for m in self.messages if m.startswith(prefix)]

    def close(self):
        self.stop = True
        self.thread.join(2)
        self.sock.close()


def test_systemd_notify_ready_status_watchdog_stopping(agents, tmp_path, monkeypatch):
    ns = NotifySocket(str(tmp_path / "notify.sock"))
    try:
        monkeypatch.setenv("NOTIFY_SOCKET", ns.path)
        monkeypatch.setenv("WATCHDOG_USEC", "400000")
        monkeypatch.delenv("WATCHDOG_PID", raising=False)
        a = agents.new("a1")
        poll(lambda: ns.seen("READY=1"), 10 * SLOW, what="READY=1")
        s = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
        poll(lambda: [m for m in ns.seen("STATUS=") if "leader, epoch %d" % s["epoch"] in m],
             10 * SLOW, what="STATUS with role and epoch")
        poll(lambda: len(ns.seen("WATCHDOG=1")) >= 3, 10 * SLOW,
             what="watchdog pings every WATCHDOG_USEC/2")
        # The interval follows the session timeout T (2 s here): the
        # watchdog thread ends a stalled loop at T/2, systemd at T.
        poll(lambda: ns.seen("WATCHDOG_USEC=2000000"), 10 * SLOW,
             what="WATCHDOG_USEC set to the session timeout")
        assert a.stop() == 0
        assert ns.seen("STOPPING=1")
        # The stop is not cut short by systemd's watchdog: its interval
        # was raised to cover the stop.
        assert ns.seen("WATCHDOG_USEC=")[-1] != "WATCHDOG_USEC=2000000"
        assert int(ns.seen("WATCHDOG_USEC=")[-1].split("=")[1]) > 5000000
        # READY came before any STATUS naming a leader.
        msgs = ns.messages
        assert msgs.index("READY=1") < min(i for i, m in enumerate(msgs)
                                           if m.startswith("STATUS=leader"))
    finally:
        ns.close()


def metric(text, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    assert m, "no metric %s in:\n%s" % (name, text)
    return float(m.group(1))


def test_metrics(agents):
    a = agents.new("a1")
    s = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b1 follows")
    # Renewals happen every T/3; wait for a few.
    poll(lambda: metric(a.get("/metrics").body, "zkelect_renewals_total") >= 2,
         10 * SLOW, what="renewals counted")
    r = a.get("/metrics")
    assert r.status == 200
    assert r.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4")
    t = r.body
    assert metric(t, "zkelect_is_leader") == 1
    assert metric(t, 'zkelect_role{role="leader"}') == 1
    assert metric(t, "zkelect_epoch") == s["epoch"]
    assert 0 < metric(t, "zkelect_lease_remaining_seconds") <= 2 * 2 / 3
    assert metric(t, 'zkelect_session_state{state="connected"}') == 1
    assert metric(t, "zkelect_session_timeout_seconds") == 2.0
    assert metric(t, "zkelect_candidates") == 2
    assert metric(t, 'zkelect_transitions_by_reason_total{to="leader",reason="claimed"}') == 1
    assert metric(t, "zkelect_renewal_seconds_count") >= 2
    assert metric(t, 'zkelect_api_requests_total{endpoint="metrics",code="200"}') >= 1
    # Every sample line is "name{labels} value"; HELP and TYPE for each family.
    for line in t.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) zkelect_[a-z_]+ ", line), line
        else:
            assert re.match(r'^zkelect_[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? '
                            r'-?[0-9.e+]+$', line), line
    tb = b.get("/metrics").body
    assert metric(tb, "zkelect_is_leader") == 0 and metric(tb, "zkelect_epoch") == 0
    assert metric(tb, 'zkelect_role{role="follower"}') == 1
    a.get("/nope")
    assert metric(a.get("/metrics").body,
                  'zkelect_api_requests_total{endpoint="other",code="404"}') == 1


def test_reload_on_sighup(agents, tmp_path):
    marks = tmp_path / "marks"
    hook = tmp_path / "hook.sh"
    hook.write_text("#!/bin/sh\necho \"$1 $ZKELECT_ROLE\" >> %s\n" % marks)
    hook.chmod(0o755)
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    # 1. A good new config: hooks added, log level raised to warn.
    a.extra_yaml = ("notify:\n  on_leader: [\"%s\", \"lead\"]\n"
                    "  on_follower: [\"%s\", \"follow\"]\n" % (hook, hook))
    a.write_config()
    with open(a.config) as f:
        text = f.read().replace("level: debug", "level: info")
    with open(a.config, "w") as f:
        f.write(text)
    a.signal(signal.SIGHUP)
    poll(lambda: "reload: configuration reloaded" in a.log_text(), 10 * SLOW,
         what="reload logged")
    r = a.request("POST", "/v1/resign?hold=0s", timeout=5)
    assert r.status == 200
    poll(lambda: marks.exists() and marks.read_text().split("\n")[:2] == ["follow unknown"]
         or (marks.exists() and "lead leader" in marks.read_text()), 20 * SLOW,
         what="hooks from the reloaded config ran")
    # 2. A bad config is rejected whole; the agent keeps running as it was.
    with open(a.config, "a") as f:
        f.write("bogus_key: 1\n")
    a.signal(signal.SIGHUP)
    poll(lambda: "configuration rejected" in a.log_text(), 10 * SLOW, what="rejection logged")
    assert re.search(r"reload: .*\.yaml:\d+:\d+: unknown key 'bogus_key'", a.log_text())
    assert a.running()
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="still leading")
    # 3. A key that needs a restart is reported and left alone.
    a.extra_yaml = ""
    a.write_config()
    with open(a.config) as f:
        text = f.read().replace(a.path, a.path + "-other")
    with open(a.config, "w") as f:
        f.write(text)
    a.signal(signal.SIGHUP)
    poll(lambda: "election.path changed; it takes a restart" in a.log_text(), 10 * SLOW,
         what="restart-needed warning")
    s = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="still leading")
    assert s["leader"]["id"] == "a1"


def test_auth_acl_refuses_foreign_writes(agents, zk_hostport):
    a = agents.new("a1", start=False)
    # The zookeeper section gets digest credentials before the first start,
    # so that the election path itself is created with the ACL.
    with open(a.config) as f:
        text = f.read()
    text = text.replace("zookeeper:\n", "zookeeper:\n  auth: {scheme: digest, credentials: "
                        "\"zkelect:s3cret\"}\n", 1)
    with open(a.config, "w") as f:
        f.write(text)
    a.start()
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads with auth")
    zk = KazooClient(hosts=zk_hostport)
    zk.start(timeout=15)
    try:
        kids = zk.get_children(agents.path)
        assert len(kids) == 1
        node = agents.path + "/" + kids[0]
        data, _ = zk.get(node)            # world may read
        assert data == b"a1"
        with pytest.raises(NoAuthError):
            zk.delete(node)
        with pytest.raises(NoAuthError):
            zk.set(agents.path, b"intruder")
        with pytest.raises(NoAuthError):
            zk.create(agents.path + "/_c_x-latch-", b"x", ephemeral=True, sequence=True)
        acl, _ = zk.get_acls(node)
        assert {(x.id.scheme, x.perms) for x in acl} == {("digest", 31), ("world", 1)}
        # With the same credentials the node may be removed.
        zk2 = KazooClient(hosts=zk_hostport, auth_data=[("digest", "zkelect:s3cret")])
        zk2.start(timeout=15)
        try:
            zk2.get(node)
        finally:
            zk2.stop()
            zk2.close()
    finally:
        zk.stop()
        zk.close()
    assert a.is_leader()


def test_command_line(tmp_path):
    r = subprocess.run([ZKELECTD, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("zkelectd ")
    r = subprocess.run([ZKELECTD, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--check-config" in r.stdout
    r = subprocess.run([ZKELECTD], capture_output=True, text=True)
    assert r.returncode == 1 and "no configuration file" in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("zookeeper:\n  servers: \"127.0.0.1:1\"\n  sesion_timeout: 2s\n"
                   "election:\n  path: nope\n")
    r = subprocess.run([ZKELECTD, "-c", str(bad), "--check-config"], capture_output=True,
                       text=True)
    assert r.returncode == 1
    lines = r.stderr.strip().split("\n")
    assert "%s:3:3: unknown key 'sesion_timeout' in 'zookeeper'" % bad in lines, lines
    assert any(l.startswith("%s:5:9: election.path" % bad) for l in lines), lines
    good = tmp_path / "good.yaml"
    good.write_text("zookeeper: {servers: \"127.0.0.1:1\"}\nelection: {path: /x}\n")
    r = subprocess.run([ZKELECTD, "-c", str(good), "--check-config"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout == "configuration OK\n"
    # A socket path that cannot be bound is a runtime error (exit 2), not a crash.
    nodir = tmp_path / "file"
    nodir.write_text("")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("zookeeper: {servers: \"127.0.0.1:1\"}\nelection: {path: /x}\n"
                   "api: {socket: %s/sub/a.sock}\n" % nodir)
    r = subprocess.run([ZKELECTD, "-c", str(cfg)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "cannot open the local API" in r.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")
def test_valgrind_start_lead_handover_stop(agents, monkeypatch):
    """The agent under valgrind: no leaks, no errors, through a whole cycle."""
    if "asan" in ZKELECTD:
        pytest.skip("valgrind runs on the plain build only")
    wrapper = os.path.join(agents.dir, "vg.sh")
    vglog = os.path.join(agents.dir, "valgrind.log")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec valgrind --quiet --leak-check=full --show-leak-kinds=definite,"
                "indirect --errors-for-leak-kinds=definite,indirect --error-exitcode=99 "
                "--log-file=%s %s \"$@\"\n" % (vglog, ZKELECTD))
    os.chmod(wrapper, 0o755)
    import zkharness
    monkeypatch.setattr(zkharness, "ZKELECTD", wrapper)
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 60 * SLOW, what="a1 leads under valgrind")
    with open("/proc/%d/cmdline" % a.pid, "rb") as f:
        assert b"valgrind" in f.read()     # really under valgrind
    monkeypatch.setattr(zkharness, "ZKELECTD", ZKELECTD)
    b = agents.new("b1")
    b.wait_for(lambda s: s["role"] == "follower", 30 * SLOW, what="b1 follows")
    for _ in range(20):
        a.get("/v1/status")
        a.get("/metrics")
        a.get("/nope")
    # Clients still connected at exit (a long poll, an idle one) are freed too.
    held = []
    for req in (b"GET /v1/status?wait=60s&index=999999 HTTP/1.1\r\n\r\n", b"GET /v1/st"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(a.socket)
        s.sendall(req)
        held.append(s)
    assert a.stop(timeout=60) == 0, open(vglog).read()
    for s in held:
        s.close()
    b.wait_for(lambda s: s["is_leader"], 30 * SLOW, what="b1 takes over")
    report = open(vglog).read()
    assert "definitely lost" not in report and "Invalid" not in report, report


def test_json_logs(agents):
    import json
    a = agents.new("a1", extra_yaml="")
    with open(a.config) as f:
        text = f.read().replace("level: debug", "level: info\n  format: json")
    a.stop()
    with open(a.config, "w") as f:
        f.write(text)
    start = len(open(a.log_path, "rb").read())
    a.start()
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    assert a.stop() == 0
    lines = [l for l in open(a.log_path, "rb").read()[start:].decode().splitlines()
             if l and not l.startswith("====")]
    docs = [json.loads(l) for l in lines]          # every line is one JSON object
    assert all(set(d) == {"ts", "level", "msg"} for d in docs), docs
    roles = [d["msg"] for d in docs if d["msg"].startswith("role ")]
    # One line per role change, with the reason (and the epoch when leading).
    assert roles[0].startswith("role unknown -> leader (claimed, epoch ")
    assert roles[-1] == "role leader -> unknown (stopping)"


def test_connection_cap_and_idle_clients(agents):
    """At the cap, the oldest idle connections make room (closed cleanly),
    so 300 idle clients do not keep the app from its answer."""
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a1 leads")
    socks = []
    try:
        for _ in range(300):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(a.socket)
            socks.append(s)
        r = a.get("/v1/status", timeout=5 * SLOW)
        assert r.status == 200 and r.json()["is_leader"] is True
        # The first ones were closed to make room: EOF, not a reset.
        s = socks[0]
        s.settimeout(5 * SLOW)
        assert s.recv(4096) == b""
    finally:
        for s in socks:
            s.close()
    t = a.get("/metrics").body
    m = re.search(r'^zkelect_api_connections_evicted_total\{state="idle"\} (\d+)', t, re.M)
    assert m and int(m.group(1)) >= 44, t
