# SPDX-License-Identifier: MIT
"""`meson install` puts everything where it belongs, and the systemd units
verify cleanly and stay within the hardening budget (exposure <= 2.0)."""

import os
import re
import shutil
import subprocess

import pytest

from zkharness import ZKELECTD  # noqa: E402

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(ZKELECTD)))


@pytest.fixture(scope="module")
def destdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("dest")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", str(d), "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def installed(destdir, suffix):
    hits = [os.path.join(root, f) for root, _, files in os.walk(destdir) for f in files
            if os.path.join(root, f).endswith(suffix)]
    assert len(hits) == 1, "%s: %r" % (suffix, hits)
    return hits[0]


def test_install_layout(destdir):
    for suffix in ("/bin/zkelectd", "/bin/zkelectctl", "/etc/zkelect/zkelect.yaml",
                   "/man8/zkelectd.8", "/man1/zkelectctl.1", "/man5/zkelect.yaml.5",
                   "/lib/systemd/system/zkelectd.service",
                   "/lib/systemd/system/zkelectd@.service", "/lib/sysusers.d/zkelect.conf",
                   "/share/bash-completion/completions/zkelectctl"):
        installed(destdir, suffix)
    conf = installed(destdir, "/etc/zkelect/zkelect.yaml")
    r = subprocess.run([installed(destdir, "/bin/zkelectd"), "-c", conf, "--check-config"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "configuration OK\n", r.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
@pytest.mark.parametrize("unit", ["zkelectd.service", "zkelectd@.service"])
def test_units_verify_and_security(destdir, tmp_path, unit):
    src = installed(destdir, "/lib/systemd/system/" + unit)
    binary = installed(destdir, "/bin/zkelectd")
    text = open(src).read()
    bindir = re.search(r"^ExecStart=(\S+)/zkelectd ", text, re.M).group(1)
    # Verify against the binary just installed, not one on this host.
    name = unit.replace("@.", "@test.")
    path = tmp_path / name
    path.write_text(text.replace(bindir + "/zkelectd", binary))
    env = dict(os.environ, MANPATH=os.path.dirname(os.path.dirname(
        installed(destdir, "/man8/zkelectd.8"))))
    r = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                       text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(path)],
                       capture_output=True, text=True, cwd=str(tmp_path))
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    print("%s: exposure %s" % (unit, m.group(1)))
    assert float(m.group(1)) <= 2.0


# --------------------------------------------------------------------------
# The scripts a new user runs first.

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def srvr(port):
    from zkharness import four_letter
    a = four_letter("127.0.0.1", port, "srvr")
    return a is not None and "Mode:" in a


def test_zk_server_script_starts_logs_and_stops(tmp_path):
    from zkharness import free_port
    port = free_port()
    d = tmp_path / "zk"
    r = subprocess.run([os.path.join(TOP, "scripts/zk-server.sh"), str(d), str(port)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    pid = int(r.stdout.strip())
    try:
        # It returns once the server answers, not before.
        assert srvr(port), "zk-server.sh returned before ZooKeeper answered"
        log = d / "zookeeper.log"
        assert log.exists() and "binding to port" in log.read_text(), \
            "no ZooKeeper log in %s: %r" % (d, os.listdir(d))
    finally:
        os.kill(pid, 9)


def test_zk_server_script_refuses_a_busy_port(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        d = tmp_path / "zk"
        r = subprocess.run([os.path.join(TOP, "scripts/zk-server.sh"), str(d), str(port)],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert "127.0.0.1:%d" % port in r.stderr and "in use" in r.stderr, r.stderr
    # No JVM left running for that directory.
    left = subprocess.run(["pgrep", "-f", str(d)], capture_output=True, text=True).stdout
    assert left == "", "processes left behind: %s" % left


def test_zk_server_script_reports_a_server_that_dies(tmp_path):
    # A data directory ZooKeeper cannot write: the JVM exits at start.
    from zkharness import free_port
    port = free_port()
    d = tmp_path / "zk"
    (d / "data").mkdir(parents=True)
    (d / "data" / "version-2").write_text("not a directory\n")
    r = subprocess.run([os.path.join(TOP, "scripts/zk-server.sh"), str(d), str(port)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert "did not start" in r.stderr, r.stderr
    assert not srvr(port)


def test_demo_runs_and_prints_no_job_lines():
    env = dict(os.environ, SKIP_INSTALL="1")
    r = subprocess.run([os.path.join(TOP, "scripts/demo.sh")], capture_output=True,
                       text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "graceful handover" in out and "crash failover" in out, out
    assert not re.search(r"\bKilled\b|\bTerminated\b", out), out
    # Each status shown names the agent that leads at that point: the demo
    # waits for the followers to read the claim before it shows them.
    blocks = re.split(r"^== ", r.stdout, flags=re.M)
    shown = 0
    for block in blocks:
        statuses = re.findall(r"^agent\d+: .*$", block, flags=re.M)
        leads = re.findall(r"^agent(\d+) leads\b", block, flags=re.M)
        leader = leads[0] if leads else None
        if leader is None:
            led = [line for line in statuses if ": leader (epoch" in line]
            if not led:
                continue
            leader = re.match(r"agent(\d+):", led[0]).group(1)
        for line in statuses:
            shown += 1
            assert "leader agent%s," % leader in line, (line, out)
    assert shown == 6, out
