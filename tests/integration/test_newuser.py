# SPDX-License-Identifier: MIT
"""What a new user meets (issue 25): stray arguments refused with usage,
two agents with one id, candidate counts an agent can stand behind, a
one-line status that says what the agent is doing, and the rough edges of
the first hour (hooks whose interpreter is missing, a relative socket, the
guard's name in ps, one default configuration path, zk-server.sh's tick).

Real ZooKeeper, real agents; everything polls with a deadline.
"""

import json
import os
import signal
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from zkharness import SLOW, ZKELECTD, poll  # noqa: E402

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ZKELECTCTL = os.environ.get("ZKELECTCTL", os.path.join(TOP, "build", "ctl", "zkelectctl"))


def run(argv, timeout=20, **kw):
    """Runs argv in its own process group; on timeout the whole group is
    killed (a script that wrongly starts servers leaves nothing behind)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, **kw)
    try:
        out, err = p.communicate(timeout=timeout * SLOW)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError("%s ran past %d s:\n%s\n%s" % (argv, timeout, out, err))
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


def ctl(sock, *args, timeout=20):
    return run([ZKELECTCTL, "--socket", sock] + list(args), timeout=timeout)


# --- bug 3: every command refuses what it does not understand ---------------

@pytest.mark.parametrize("args", [
    ["status", "extra"],
    ["status", "--json", "extra"],
    ["wait", "--leader", "extra"],
    ["resign", "extra"],
    ["resign", "--hold", "1s", "extra"],
    ["is-leader", "extra"],
])
def test_ctl_refuses_stray_arguments_with_usage(args, tmp_path):
    # No agent at this socket: a command that went ahead would exit 2.
    r = ctl(str(tmp_path / "none.sock"), *args)
    assert r.returncode == 1, r
    assert "unexpected argument 'extra'" in r.stderr, r.stderr
    assert "usage: zkelectctl" in r.stderr, r.stderr


@pytest.mark.parametrize("script", ["demo.sh", "test.sh", "zk-server.sh", "install-deps.sh"])
def test_scripts_answer_help_without_doing_anything(script):
    r = run([os.path.join(TOP, "scripts", script), "--help"], timeout=10,
            env=dict(os.environ, SKIP_INSTALL="1"))
    assert r.returncode == 0, r
    assert r.stdout.startswith("usage: "), r.stdout
    assert "==" not in r.stdout, r.stdout      # demo.sh's and test.sh's progress lines


@pytest.mark.parametrize("script", ["demo.sh", "test.sh", "install-deps.sh"])
def test_scripts_refuse_unknown_arguments(script):
    r = run([os.path.join(TOP, "scripts", script), "--bogus"], timeout=10,
            env=dict(os.environ, SKIP_INSTALL="1"))
    assert r.returncode == 1, r
    assert "usage: " in r.stderr and "--bogus" in r.stderr, r.stderr


# --- friction 9: zk-server.sh takes the tick as an option -----------------------

def test_zk_server_script_takes_a_tick_time(tmp_path):
    from zkharness import free_port, four_letter
    port = free_port()
    d = tmp_path / "zk"
    r = run([os.path.join(TOP, "scripts", "zk-server.sh"), "--tick-time", "2000", str(d),
             str(port)], timeout=120)
    assert r.returncode == 0, r
    pid = int(r.stdout.strip())
    try:
        cfg = (d / "conf" / "zoo.cfg").read_text()
        assert "tickTime=2000\n" in cfg and "minSessionTimeout=4000\n" in cfg \
            and "maxSessionTimeout=40000\n" in cfg, cfg
        assert "Mode:" in (four_letter("127.0.0.1", port, "srvr") or "")
    finally:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("args", [["--tick-time", "fast"], ["--tick-time", "0"],
                                  ["--tick-time"], ["--tock", "1"]])
def test_zk_server_script_refuses_a_bad_tick_time(args, tmp_path):
    d = tmp_path / "zk"
    r = run([os.path.join(TOP, "scripts", "zk-server.sh")] + args + [str(d), "1"], timeout=10)
    assert r.returncode == 1 and r.stdout == "", r
    assert "zk-server: " in r.stderr, r.stderr
    assert not d.exists()
