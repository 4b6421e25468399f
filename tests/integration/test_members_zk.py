# SPDX-License-Identifier: MIT
"""`zkelectctl members` from any host, without a configuration file
(issue 33), and what it says when the chroot is missing (issue 32, item 7).

  members --zookeeper HOST:PORT PATH [--json]

reads the election straight from ZooKeeper as `members -c FILE` does; when
PATH holds a partitioned election (PATH/members and PATH/partitions), it
lists the members and each partition's owner and epoch, read from the
claim nodes.
"""

import json
import subprocess
import uuid

from zkharness import ZKELECTCTL, SLOW, poll  # noqa: E402


def members(*args, timeout=30):
    return subprocess.run([ZKELECTCTL, "members"] + list(args), capture_output=True,
                          text=True, timeout=timeout * SLOW)


def test_members_says_the_chroot_is_missing(zk_hostport, tmp_path):
    chroot = "/nochroot-%s" % uuid.uuid4().hex[:8]
    conf = tmp_path / "c.yaml"
    conf.write_text("zookeeper:\n  servers: \"%s%s\"\nelection:\n  path: /zkelect/x\n"
                    % (zk_hostport, chroot))
    r = members("-c", str(conf))
    assert r.returncode == 2, r
    assert "no agent has joined" not in r.stderr, r.stderr
    assert "the chroot %s of zookeeper.servers does not exist" % chroot in r.stderr, \
        r.stderr
    # The same from the command line.
    r = members("--zookeeper", zk_hostport + chroot, "/zkelect/x")
    assert r.returncode == 2 and "the chroot %s" % chroot in r.stderr, r
    # A missing parent is named too, and the path itself as before.
    r = members("--zookeeper", zk_hostport, "/zkelect-none-%s/x" % uuid.uuid4().hex[:8])
    assert r.returncode == 2 and "does not exist" in r.stderr and \
        "no agent has joined" in r.stderr, r


def test_members_from_the_command_line(agents, observer, election):
    a = agents.new("a")
    a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a leads")
    b = agents.new("b")
    b.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="b follows")
    poll(lambda: len(observer.contenders(election)) == 2, 10 * SLOW, what="two nodes")
    r = members("--zookeeper", a.zk_hostport, election, "--json")
    assert r.returncode == 0, r
    m = json.loads(r.stdout)
    assert [c["id"] for c in m["contenders"]] == ["a", "b"], m
    data, stat = observer.zk.get(election)
    assert m["leader"]["id"] == "a" and m["leader"]["epoch"] == stat.mzxid, m
    # The file's way gives the same.
    r2 = members("-c", a.config, "--json")
    assert r2.returncode == 0 and json.loads(r2.stdout) == m, (r2, m)
    r = members("--zookeeper", a.zk_hostport, election)
    assert r.returncode == 0 and ("leader a, epoch %d" % stat.mzxid) in r.stdout, r


def test_members_of_a_partitioned_election(agents, observer, election):
    parts = "partitions:\n  count: 4\n"
    a = agents.new("a", extra_yaml=parts)
    b = agents.new("b", extra_yaml=parts)

    # Balanced, two each: a 3-1 split is still moving (the first agent up
    # takes all four, then hands two over), and the view read below would
    # race the handover.
    def settled():
        pa = a.get("/v1/partitions", timeout=2).json()
        owners = {p["name"]: p["leader"]["id"] for p in pa["partitions"] if p["leader"]}
        return len(owners) == 4 and sorted(owners.values()) == ["a", "a", "b", "b"] and \
            pa["members"] == 2 and owners
    owners = poll(settled, 40 * SLOW, what="4 partitions owned by a and b, two each")

    # Read twice, the second with the agents' file, until both agree: an
    # agent that queued in a partition it is no longer given may still be
    # leaving its queue (a contender fewer in the second read).
    def both():
        r = members("--zookeeper", a.zk_hostport, election, "--json")
        r2 = members("-c", a.config, "--json")
        assert r.returncode == 0 and r2.returncode == 0, (r, r2)
        m = json.loads(r.stdout)
        return m == json.loads(r2.stdout) and m
    m = poll(both, 10, what="the same members view from --zookeeper and -c")
    assert sorted(x["id"] for x in m["members"]) == ["a", "b"], m
    assert [p["name"] for p in m["partitions"]] == ["0", "1", "2", "3"], m
    for p in m["partitions"]:
        data, stat = observer.zk.get("%s/partitions/%s" % (election, p["name"]))
        assert p["leader"]["id"] == owners[p["name"]], (p, owners)
        assert p["leader"]["epoch"] == stat.mzxid, (p, stat)
        assert p["contenders"] >= 1, p
    r = members("--zookeeper", a.zk_hostport, election)
    assert r.returncode == 0, r
    assert "2 members, 4 partitions" in r.stdout, r.stdout
    for name, owner in owners.items():
        assert any(line.split()[:2] == [name, owner] for line in r.stdout.splitlines()), \
            r.stdout


def test_members_command_line_errors(zk_hostport, tmp_path):
    r = members("--zookeeper", zk_hostport)
    assert r.returncode == 1 and "usage" in r.stderr and "PATH" in r.stderr, r
    r = members("--zookeeper", zk_hostport, "relative/path")
    assert r.returncode == 1 and "election.path: must start with '/'" in r.stderr, r
    r = members("--zookeeper", zk_hostport + "/chroot/", "/x")
    assert r.returncode == 1 and "must not end with '/'" in r.stderr, r
    conf = tmp_path / "c.yaml"
    conf.write_text("zookeeper:\n  servers: \"%s\"\nelection:\n  path: /x\n" % zk_hostport)
    r = members("-c", str(conf), "--zookeeper", zk_hostport, "/x")
    assert r.returncode == 1 and "exclude each other" in r.stderr, r
    r = members("-c", str(conf), "/x")
    assert r.returncode == 1 and "unexpected argument '/x'" in r.stderr, r
