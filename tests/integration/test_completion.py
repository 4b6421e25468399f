# SPDX-License-Identifier: MIT
"""completion/zkelectctl.bash, sourced in a real bash: verbs, each verb's
options (each one zkelectctl takes), file names after --socket, commands
after `run --`, and partition names after -p asked of the agent
(`zkelectctl partitions --json`): none when the agent does not answer."""

import os
import shutil
import subprocess

import pytest

from zkharness import ZKELECTCTL  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(TOP, "completion/zkelectctl.bash")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")


def complete(line, path=None, cwd=None):
    """The completions bash offers for LINE (cursor at its end)."""
    words = line.split(" ")
    prog = ('source "$1"; COMP_WORDS=("${@:3}"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
            'COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; _zkelectctl; '
            'printf "%s\\n" "${COMPREPLY[@]}"')
    env = dict(os.environ)
    env["PATH"] = (path + ":" if path else "") + os.path.dirname(os.path.abspath(ZKELECTCTL)) \
        + ":" + env.get("PATH", "/usr/bin:/bin")
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog, "bash", SCRIPT, line] + words,
                       capture_output=True, text=True, env=env, cwd=cwd, timeout=30)
    assert r.returncode == 0, r.stderr
    return sorted(w for w in r.stdout.split("\n") if w)


def test_verbs_and_options(tmp_path):
    assert complete("zkelectctl ") == sorted(
        ["status", "is-leader", "wait", "resign", "drain", "undrain", "run", "members",
         "partitions", "lock", "elect"])
    assert complete("zkelectctl s") == ["status"]
    assert complete("zkelectctl --so") == ["--socket"]
    assert complete("zkelectctl -s /run/x.sock w") == ["wait"]
    assert complete("zkelectctl wait --") == ["--change", "--follower", "--leader",
                                              "--partition", "--timeout"]
    assert complete("zkelectctl status -") == ["--json", "--partition", "-p"]
    assert complete("zkelectctl is-leader -") == ["--partition", "--quiet", "-p", "-q"]
    assert complete("zkelectctl resign --h") == ["--hold"]
    assert complete("zkelectctl resign -") == ["--hold", "--partition", "-p"]
    assert complete("zkelectctl d") == ["drain"]
    assert complete("zkelectctl members -") == ["--config", "--json", "--timeout",
                                                "--zookeeper", "-c"]
    assert complete("zkelectctl lock --") == ["--", "--id", "--log-level",
                                              "--session-timeout", "--tick-time",
                                              "--verbose", "--zookeeper"]
    assert complete("zkelectctl elect --z") == ["--zookeeper"]
    assert complete("zkelectctl lock --log-level w") == ["warn"]
    assert complete("zkelectctl partitions -") == ["--cluster", "--config", "--json",
                                                   "--timeout", "--zookeeper", "-c"]
    assert complete("zkelectctl partitions --c") == ["--cluster", "--config"]
    assert complete("zkelectctl wait --timeout ") == []


def test_file_names_and_commands(tmp_path):
    (tmp_path / "orders.sock").write_text("")
    (tmp_path / "orders.yaml").write_text("")
    assert complete("zkelectctl --socket ord", cwd=str(tmp_path)) == ["orders.sock", "orders.yaml"]
    assert complete("zkelectctl members -c orders.y", cwd=str(tmp_path)) == ["orders.yaml"]
    assert complete("zkelectctl partitions --config orders.y", cwd=str(tmp_path)) == \
        ["orders.yaml"]
    # After `run ... --`: a command to run, from PATH.
    assert "true" in complete("zkelectctl run -q -- tru")
    assert "true" in complete("zkelectctl lock --zookeeper zk:2181 /x -- tru")


def test_partition_names_from_the_agent(tmp_path):
    # No agent on that socket: nothing offered, and no error on the terminal.
    assert complete("zkelectctl -s %s/none.sock status -p " % tmp_path) == []
    # An agent that answers (a stand-in for `zkelectctl partitions --json`,
    # as the verb is not in this tree yet): its names, filtered by the
    # prefix, with the socket option passed on.
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "zkelectctl").write_text(
        '#!/bin/sh\n'
        '[ "$1 $2 $3 $4" = "-s /run/zkelect/orders.sock partitions --json" ] || exit 2\n'
        'echo \'{"partitions": [{"name": "eu-1", "owner": "a"}, {"name": "eu-2"},'
        ' {"name": "us-1"}]}\'\n')
    (stub / "zkelectctl").chmod(0o755)
    assert complete("zkelectctl -s /run/zkelect/orders.sock status -p ",
                    path=str(stub)) == ["eu-1", "eu-2", "us-1"]
    assert complete("zkelectctl -s /run/zkelect/orders.sock wait --partition eu",
                    path=str(stub)) == ["eu-1", "eu-2"]


def refused(args):
    """zkelectctl's own word on ARGS (no agent at the socket): the
    getopt complaint if it refuses an option, else None."""
    r = subprocess.run([ZKELECTCTL, "-s", "/nonexistent/zkit.sock"] + args,
                       capture_output=True, text=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    for line in r.stderr.splitlines():
        if "unrecognized option" in line or "invalid option" in line:
            return line
    return None


# An argument for each option that takes one (a duration, a partition,
# a file); `run` gets a command after them.
ARG = {"--timeout": "1s", "--hold": "1s", "-p": "x", "--partition": "x",
       "-c": "/nonexistent/zkit.yaml", "--config": "/nonexistent/zkit.yaml",
       "--zookeeper": "127.0.0.1:1", "--id": "x", "--session-timeout": "2s",
       "--tick-time": "200ms", "--log-level": "warn"}


@pytest.mark.parametrize("verb", ["status", "is-leader", "wait", "resign", "run", "members",
                                  "partitions", "lock", "elect"])
def test_every_option_offered_is_accepted(verb):
    """What the completion offers for a verb, zkelectctl takes: each option
    alone after the verb is not refused as unknown (issue 32: `resign`
    offered --partition, which it refuses)."""
    offered = [o for o in complete("zkelectctl %s -" % verb) if o != "--"]
    assert offered, verb
    bad = []
    for opt in offered:
        args = [verb, opt] + ([ARG[opt]] if opt in ARG else [])
        if verb == "wait" and opt not in ("--leader", "--follower", "--change"):
            args.append("--leader")
        if verb == "run":
            args += ["--", "true"]
        why = refused(args) if verb != "run" else refused_run(args)
        if why:
            bad.append("%s: %s" % (" ".join(args), why))
    assert bad == [], bad


def refused_run(args):
    """`run` waits for its agent instead of exiting: its first line on
    stderr says either that it refuses an option or that it cannot reach
    the agent; then it is ended."""
    p = subprocess.Popen([ZKELECTCTL, "-s", "/nonexistent/zkit.sock"] + args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    try:
        first = p.stderr.readline()
    finally:
        p.terminate()
        p.communicate(timeout=20)
    assert first, "zkelectctl %s said nothing" % " ".join(args)
    if "unrecognized option" in first or "invalid option" in first:
        return first.strip()
    assert "cannot reach the agent" in first, first
    return None
