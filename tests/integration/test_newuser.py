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

import pytest

from zkharness import ZKELECTCTL, SLOW, ZKELECTD, poll  # noqa: E402

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


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


# --- bug 1: two agents with one election.id ---------------------------------------

CHANGE_HOOK = """#!/bin/sh
echo "$ZKELECT_LEADER_ID $ZKELECT_LEADER_EPOCH" >> "$1"
"""


@pytest.fixture
def twin_set(zk_hostport, election, request):
    """A second AgentSet on the same election (its own directory, so an
    agent there may share an id with one in `agents`)."""
    import zkharness
    aset = zkharness.AgentSet(zk_hostport, election)
    aset.logs_in_report(request)
    try:
        yield aset
    finally:
        aset.cleanup()


def test_duplicate_id_is_warned_and_the_real_leader_reported(agents, twin_set, tmp_path):
    marks = tmp_path / "changes.txt"
    hook = tmp_path / "change.sh"
    hook.write_text(CHANGE_HOOK)
    hook.chmod(0o755)
    yaml = "notify:\n  on_leader_change: [\"%s\", \"%s\"]\n" % (hook, marks)
    first = agents.new("twin", extra_yaml=yaml)
    s1 = first.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    second = twin_set.new("twin")
    # The second one follows, names the first as leader, and both say that
    # the id is used twice: the follower from the claim, the leader from its
    # successor's node.
    s2 = second.wait_for(lambda s: s["role"] == "follower" and s["leader"] is not None,
                         10 * SLOW, what="follows and names the leader")
    assert s2["leader"]["id"] == "twin" and s2["leader"]["epoch"] == s1["epoch"], s2
    second.wait_for(lambda s: s.get("duplicate_id") is True, 10 * SLOW,
                    what="reports the duplicate id")
    first.wait_for(lambda s: s.get("duplicate_id") is True, 10 * SLOW,
                   what="reports the duplicate id")
    for a in (first, second):
        poll(lambda: "another agent" in a.log_text() and "election.id" in a.log_text(),
             10 * SLOW, what="%s warns of the duplicate id" % a.log_path)
    # The first lets go; the duplicate leads, and the first reports it (and
    # runs on_leader_change) as it would any other leader.
    r = ctl(first.socket, "resign", "--hold", "60s")
    assert r.returncode == 0, r
    s2 = second.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    s1 = first.wait_for(lambda s: s["leader"] is not None, 10 * SLOW,
                        what="names the duplicate as leader")
    assert s1["leader"] == {"id": "twin", "epoch": s2["epoch"], "value": None}, s1
    assert s1["role"] == "follower" and s1["is_leader"] is False, s1
    poll(lambda: marks.exists() and ("twin %d" % s2["epoch"]) in marks.read_text(),
         10 * SLOW, what="on_leader_change for the duplicate's term")
    r = ctl(first.socket, "status")
    assert "leader twin" in r.stdout and "id twin is also used" in r.stdout, r.stdout


def test_members_marks_an_id_used_twice(agents, twin_set, tmp_path):
    first = agents.new("twin")
    first.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    agents.new("other").wait_for(lambda s: s["role"] == "follower", 10 * SLOW,
                                 what="follows")
    twin_set.new("twin").wait_for(lambda s: s["role"] == "follower", 10 * SLOW,
                                  what="follows")
    r = run([ZKELECTCTL, "members", "-c", first.config])
    assert r.returncode == 0, r
    assert "WARNING: id twin is used by 2 contenders (positions 0, 2)" in r.stdout, r.stdout
    r = run([ZKELECTCTL, "members", "-c", first.config, "--json"])
    assert r.returncode == 0, r
    dup = [c["duplicate_id"] for c in json.loads(r.stdout)["contenders"]]
    assert dup == [True, False, True], r.stdout


# --- bug 2: a candidate count the agent can stand behind ---------------------------

def test_candidates_are_current_or_carry_their_age(agents, observer, election):
    import time
    a = agents.new("a")
    a.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    b = agents.new("b")
    b.wait_for(lambda s: s["role"] == "follower", 10 * SLOW, what="follows")
    joined = time.monotonic()
    c = agents.new("c")
    c.wait_for(lambda s: s["role"] == "follower", 10 * SLOW, what="follows")
    d = agents.new("d")
    d.wait_for(lambda s: s["role"] == "follower", 10 * SLOW, what="follows")
    assert len(observer.contenders(election)) == 4
    # The leader watches the queue: its count is current, of age 0.
    a.wait_for(lambda s: s["candidates"] == 4 and s["candidates_age_ms"] == 0,
               10 * SLOW, what="counts 4, current")
    # b counted when it joined, before c and d: it says how old that is.
    s = b.status()
    assert s["candidates"] == 2, s
    assert s["candidates_age_ms"] >= (time.monotonic() - joined) * 1000 - 50, s
    # A resigned agent is not in the queue: its old count carries its age,
    # which grows.
    r = ctl(a.socket, "resign", "--hold", "60s")
    assert r.returncode == 0, r
    s1 = a.wait_for(lambda s: s["position"] == -1, 10 * SLOW, what="holds")
    s2 = a.wait_for(lambda s: s["candidates_age_ms"] > s1["candidates_age_ms"] + 100,
                    10 * SLOW, what="the count ages")
    assert s2["candidates_age_ms"] > 0 and s2["candidates"] == s1["candidates"], (s1, s2)
    # The new leader counts the queue afresh.
    b.wait_for(lambda s: s["role"] == "leader" and s["candidates"] == 3 and
               s["candidates_age_ms"] == 0, 10 * SLOW, what="leads, counts 3")
    assert len(observer.contenders(election)) == 3


# --- friction 2 and 6: the one-line status says what the agent is doing --------

def test_status_line_says_the_agent_holds_off_after_a_resign(agents):
    a = agents.new("a")
    a.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    b = agents.new("b")
    b.wait_for(lambda s: s["role"] == "follower", 10 * SLOW, what="follows")
    r = ctl(b.socket, "status")
    assert r.returncode == 0 and "b: follower, queued at position 1 (next in line)," in \
        r.stdout, r.stdout
    assert "leader a, " in r.stdout, r.stdout
    r = ctl(a.socket, "resign", "--hold", "60s")
    assert r.returncode == 0, r
    s = a.wait_for(lambda s: s["leader"] is not None and s["leader"]["id"] == "b",
                   10 * SLOW, what="names b")
    assert s["role_reason"] == "resigned", s
    r = ctl(a.socket, "status")
    assert r.returncode == 0, r
    line = r.stdout
    assert line.startswith("a: follower, holding off after a resign: rejoins the queue in "), line
    assert "leader b, " in line and "counted " in line, line


def test_status_shows_why_zookeeper_cannot_be_reached(agents):
    from zkharness import free_port
    a = agents.new("a", zk_hostport="127.0.0.1:%d" % free_port(), log_level="info")
    s = a.wait_for(lambda s: "refused" in (s["session"].get("last_error") or ""),
                   10 * SLOW, what="the refusal in the status")
    assert s["session"]["state"] == "connecting" and s["role"] == "unknown", s
    r = ctl(a.socket, "status")
    assert r.returncode == 0, r
    assert r.stdout.startswith("a: unknown, waiting to connect to ZooKeeper (last error: "), \
        r.stdout
    assert "refused" in r.stdout, r.stdout


# --- friction 3: run on a follower says that it waits, and for whom -----------

def run_bg(sock, *args):
    import threading
    p = subprocess.Popen([ZKELECTCTL, "--socket", sock, "run"] + list(args),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    t = threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True)
    t.start()
    return p, lines


@pytest.mark.parametrize("quiet", [False, True])
def test_run_on_a_follower_says_it_waits(agents, tmp_path, quiet):
    a = agents.new("a")
    a.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    b = agents.new("b")
    b.wait_for(lambda s: s["role"] == "follower" and s["leader"] is not None,
               10 * SLOW, what="follows and names a")
    marker = tmp_path / "ran"
    args = (["--quiet"] if quiet else []) + ["--", "/bin/sh", "-c", "touch %s; exec sleep 60" % marker]
    p, lines = run_bg(b.socket, *args)
    try:
        if not quiet:
            poll(lambda: any("waiting to lead" in x for x in lines), 10 * SLOW,
                 what="run says it waits")
            line = [x for x in lines if "waiting to lead" in x][0]
            assert "leader a (epoch " in line and "/bin/sh" in line, line
        r = ctl(a.socket, "resign", "--hold", "60s")
        assert r.returncode == 0, r
        poll(marker.exists, 20 * SLOW, what="the command runs once b leads")
        poll(lambda: any("started" in x for x in lines), 5 * SLOW, what="run says it started")
        waits = [x for x in lines if "waiting to lead" in x]
        assert len(waits) == (0 if quiet else 1), lines
    finally:
        p.terminate()
        p.wait(15)


# --- friction 4: a hook whose #! interpreter is missing ------------------------

def write_script(path, interp, body="exit 0\n"):
    path.write_text("#!%s\n%s" % (interp, body))
    path.chmod(0o755)
    return path


def test_check_config_names_a_missing_interpreter(tmp_path):
    hook = write_script(tmp_path / "hook.sh", "/nonexistent/zkelect-interp -e")
    env_hook = write_script(tmp_path / "env-hook", "/usr/bin/env zkelect-no-such-interp")
    cfg = tmp_path / "a.yaml"
    cfg.write_text("zookeeper:\n  servers: \"127.0.0.1:1\"\nelection:\n  path: /e\n"
                   "api:\n  socket: %s\nnotify:\n  on_leader: [\"%s\"]\n"
                   "  on_follower: [\"%s\"]\n" % (tmp_path / "a.sock", hook, env_hook))
    r = run([ZKELECTD, "-c", str(cfg), "--check-config"])
    assert r.returncode == 1, r
    assert ("%s:8:15: notify.on_leader[0]: cannot run '%s': its interpreter "
            "'/nonexistent/zkelect-interp' (its #! line): No such file or directory"
            % (cfg, hook)) in r.stderr, r.stderr
    assert ("notify.on_follower[0]: cannot run '%s': its interpreter "
            "'/usr/bin/env zkelect-no-such-interp' (its #! line): "
            "zkelect-no-such-interp not found in PATH" % env_hook) in r.stderr, r.stderr


def test_a_hook_whose_interpreter_went_away_is_named_at_run_time(agents, tmp_path):
    interp = tmp_path / "interp"
    os.symlink("/bin/sh", str(interp))
    hook = write_script(tmp_path / "demote.sh", str(interp))
    a = agents.new("a", extra_yaml="notify:\n  on_follower: [\"%s\"]\n" % hook)
    a.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    interp.unlink()
    r = ctl(a.socket, "resign", "--hold", "60s")
    assert r.returncode == 0, r
    poll(lambda: "cannot run %s: its interpreter '%s' (its #! line): No such file or "
         "directory" % (hook, interp) in a.log_text(), 10 * SLOW,
         what="the missing interpreter named in the log")


def test_run_names_a_missing_interpreter(agents, tmp_path):
    cmd = write_script(tmp_path / "cmd.sh", "/nonexistent/zkelect-interp")
    a = agents.new("a")
    a.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    r = ctl(a.socket, "run", "--", str(cmd))
    assert r.returncode == 127, r
    assert "cannot run %s: its interpreter '/nonexistent/zkelect-interp' (its #! line): " \
        "No such file or directory" % cmd in r.stderr, r.stderr


# --- friction 8: one default configuration for zkelectd and zkelectctl ---------

def test_zkelectd_and_zkelectctl_share_the_default_config(tmp_path):
    cfg = tmp_path / "a.yaml"
    cfg.write_text("zookeeper:\n  servers: \"127.0.0.1:1\"\nelection:\n  path: /e\n"
                   "api:\n  socket: %s\n" % (tmp_path / "a.sock"))
    env = dict(os.environ, ZKELECT_CONFIG=str(cfg))
    r = run([ZKELECTD, "--check-config"], env=env)
    assert r.returncode == 0 and r.stdout == "configuration OK\n", r
    env.pop("ZKELECT_CONFIG")
    for argv in ([ZKELECTD, "--check-config"], [ZKELECTCTL, "members", "--timeout", "1s"]):
        r = run(argv, env=env)
        if os.path.exists("/etc/zkelect/zkelect.yaml"):
            continue        # a machine with zkelect installed: nothing to compare
        assert r.returncode == 1, r
        assert "/etc/zkelect/zkelect.yaml" in r.stderr, r
    r = run([ZKELECTD, "--help"])
    assert "ZKELECT_CONFIG" in r.stdout and "/etc/zkelect/zkelect.yaml" in r.stdout, r.stdout


# --- friction 7: the guard is named in ps by its argv, not only its comm --------

PPID_SCRIPT = """#!/bin/sh
echo "$PPID $*" > "$1.tmp" && mv "$1.tmp" "$1"
exec sleep 30
"""


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().rstrip(b"\0").replace(b"\0", b" ").decode()


def test_guards_are_named_in_ps(agents, tmp_path):
    script = write_script(tmp_path / "ppid.sh", "/bin/sh", PPID_SCRIPT.split("\n", 1)[1])
    hook_mark = tmp_path / "hook-ppid"
    a = agents.new("a", extra_yaml="notify:\n  on_leader: [\"%s\", \"%s\", \"x y\"]\n"
                   % (script, hook_mark))
    poll(hook_mark.exists, 20 * SLOW, what="the hook ran")
    guard, args = hook_mark.read_text().split(" ", 1)
    assert args.strip() == "%s x y" % hook_mark, args
    assert cmdline(int(guard)) == "zkelect-guard %s" % script, cmdline(int(guard))
    assert cmdline(a.pid).startswith("%s -c " % ZKELECTD), cmdline(a.pid)
    # zkelectctl run's guard too; the command's own arguments are intact.
    run_mark = tmp_path / "run-ppid"
    p = subprocess.Popen([ZKELECTCTL, "--socket", a.socket, "run", "--", str(script),
                          str(run_mark), "a b"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        poll(run_mark.exists, 20 * SLOW, what="run's command ran")
        guard, args = run_mark.read_text().split(" ", 1)
        assert args.strip() == "%s a b" % run_mark, args
        assert cmdline(int(guard)) == "zkelect-guard %s" % script, \
            cmdline(int(guard))
        assert cmdline(p.pid).startswith(ZKELECTCTL), cmdline(p.pid)
    finally:
        p.terminate()
        p.wait(15)


# --- friction 1: the README's "by hand" section works as written ----------------

def test_readme_by_hand_section_runs(zk_hostport, tmp_path):
    import re
    text = open(os.path.join(TOP, "README.md")).read()
    block = re.search(r"### By hand\n.*?```sh\n(.*?)```", text, re.S).group(1)
    lines = [line.split("   #")[0].strip() for line in block.strip().split("\n")]
    assert [line.split()[0] for line in lines] == [
        "meson", "scripts/zk-server.sh", "printf", "build/agent/zkelectd",
        "build/ctl/zkelectctl"], lines
    # Against the suite's ZooKeeper and this build, in a directory of our own.

    def local(line):
        return (line.replace("127.0.0.1:2181", zk_hostport)
                .replace("/tmp/", str(tmp_path) + "/")
                .replace("/zkelect/try", "/zkelect/try-%d" % os.getpid())
                .replace("build/agent/zkelectd", ZKELECTD)
                .replace("build/ctl/zkelectctl", ZKELECTCTL))
    r = run(["bash", "-c", local(lines[2])])
    assert r.returncode == 0, r
    agent = subprocess.Popen(local(lines[3]).split(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        def leads():
            r = run(local(lines[4]).split())
            return r.stdout if r.returncode == 0 and r.stdout.startswith(
                "a: leader (epoch ") else None
        poll(leads, 20 * SLOW, what="the agent started by hand leads")
    finally:
        agent.terminate()
        agent.wait(15)


def test_readme_one_liners_run_as_written(zk_hostport):
    """README's "Try it in one line": its three commands, as written but for
    the ZooKeeper address, the paths (this run's own) and the binaries
    (this build's). Two `lock`s at once take turns, the second under a
    higher epoch, and print what README shows; `members` names the holder
    of `elect`, as README shows."""
    import re
    import time
    text = open(os.path.join(TOP, "README.md")).read()
    block = re.search(r"## Try it in one line\n.*?```sh\n(.*?)```", text, re.S).group(1)
    lines = [line for line in block.strip().split("\n") if line and not line.startswith("#")]
    assert [line.split()[:2] for line in lines] == [
        ["zkelectctl", "lock"], ["zkelectctl", "elect"], ["zkelectctl", "members"]], lines
    tag = "%d-%d" % (os.getpid(), time.monotonic_ns())

    def local(line):
        return (line.replace("127.0.0.1:2181", zk_hostport)
                .replace("/zkelect/demo", "/zkelect/demo-" + tag)
                .replace("/zkelect/cron", "/zkelect/cron-" + tag)
                .replace("zkelectctl ", ZKELECTCTL + " ", 1))
    env = dict(os.environ, ZKELECTD=ZKELECTD)
    two = [subprocess.Popen(["sh", "-c", local(lines[0])], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=60 * SLOW) for p in two]
    assert [p.returncode for p in two] == [0, 0], outs
    said = sorted(int(re.fullmatch(r"leading under epoch (\d+)\n", o[0]).group(1))
                  for o in outs)
    assert said[0] < said[1], said
    shown = re.findall(r"^leading under epoch (\d+)$", text, re.M)
    assert len(shown) == 2 and int(shown[0]) < int(shown[1]), shown
    elect = subprocess.Popen(["sh", "-c", "exec " + local(lines[1])], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        epoch = elect.stdout.readline().strip()
        assert epoch.isdigit(), (epoch, elect.stderr.read() if elect.poll() is not None else "")
        r = run(["sh", "-c", local(lines[2])])
        assert r.returncode == 0, r
        first = r.stdout.split("\n")[0]
        assert re.fullmatch(r"/zkelect/cron-%s: leader web1, epoch %s, 1 contender" % (
            tag, epoch), first), r.stdout
        assert re.search(r"^/zkelect/cron: leader web1, epoch \d+, 1 contender$", text,
                         re.M), "README's sample output changed"
    finally:
        elect.send_signal(signal.SIGTERM)
        assert elect.wait(15 * SLOW) == 0


def test_a_resigned_leaders_count_is_dated_from_its_resign(agents):
    import time
    a = agents.new("a")
    a.wait_for(lambda s: s["role"] == "leader", 20 * SLOW, what="leads")
    agents.new("b").wait_for(lambda s: s["role"] == "follower", 10 * SLOW, what="follows")
    # The leader's count was last listed when b joined; it stays current
    # (age 0) while the watch holds. Some time passes without a change.
    a.wait_for(lambda s: s["candidates"] == 2, 10 * SLOW, what="counts 2")
    listed = time.monotonic()
    poll(lambda: time.monotonic() > listed + 1.0, 5, what="a second without changes")
    t0 = time.monotonic()
    r = ctl(a.socket, "resign", "--hold", "60s")
    assert r.returncode == 0, r
    s = a.wait_for(lambda s: s["position"] == -1, 10 * SLOW, what="holds")
    # Dated from the resign, not from the listing a second before it.
    assert s["candidates_age_ms"] <= (time.monotonic() - t0) * 1000 + 50, s
