# SPDX-License-Identifier: MIT
"""The default election.id does not collide (issue 32, item 8).

Containers on a host network share the hostname, and each agent is
process 1 of its own PID namespace: `hostname:pid` was `vm:1` in every one
of them. Two such agents, with no election.id, must show two distinct ids
in `zkelectctl members`, neither flagged as a duplicate, and each id must
still start with the hostname and the pid the operator sees in `ps`.
"""

import json
import os
import signal
import socket
import subprocess

import pytest

from zkharness import ZKELECTCTL, ZKELECTD, SLOW, poll  # noqa: E402


def write_config(path, zk_hostport, election, sock):
    path.write_text("zookeeper:\n  servers: \"%s\"\n  session_timeout: 2s\n"
                    "  tick_time: 200ms\nelection:\n  path: %s\napi:\n  socket: %s\n"
                    % (zk_hostport, election, sock))
    return path


def test_default_ids_differ_for_process_1_of_two_pid_namespaces(zk_hostport, election,
                                                                   tmp_path):
    if subprocess.run(["unshare", "--pid", "--fork", "true"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        pytest.skip("unshare --pid is not permitted here")
    procs = []
    try:
        for name in ("a", "b"):
            conf = write_config(tmp_path / ("%s.yaml" % name), zk_hostport, election,
                                tmp_path / ("%s.sock" % name))
            log = open(tmp_path / ("%s.log" % name), "ab")
            procs.append(subprocess.Popen(
                ["unshare", "--pid", "--fork", "--kill-child", ZKELECTD, "-c", str(conf)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True))

        def both_queued():
            r = subprocess.run([ZKELECTCTL, "members", "-c", str(tmp_path / "a.yaml"),
                                "--json"], capture_output=True, text=True,
                               timeout=30 * SLOW)
            return r.returncode == 0 and len(json.loads(r.stdout)["contenders"]) == 2 \
                and json.loads(r.stdout)
        m = poll(both_queued, 30 * SLOW, what="both agents in the queue")
        ids = [c["id"] for c in m["contenders"]]
        host = socket.gethostname()
        assert ids[0] != ids[1], ids
        assert not any(c["duplicate_id"] for c in m["contenders"]), m
        for i in ids:
            # hostname:pid, the pid as the agent sees itself (1), then what
            # tells two such apart.
            assert i.startswith("%s:1:" % host), ids
    finally:
        for p in procs:
            # unshare --fork ignores SIGTERM: stop the agent inside.
            try:
                with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                    for pid in f.read().split():
                        os.kill(int(pid), signal.SIGTERM)
            except OSError:
                p.kill()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
