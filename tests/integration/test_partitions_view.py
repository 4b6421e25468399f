# SPDX-License-Identifier: MIT
"""The cluster view of a partitioned election (issue 31; doc/design.md,
"The cluster view"): `zkelectctl partitions -c FILE | --zookeeper SERVERS
PATH | --cluster` reads ZooKeeper itself, with no agent:

  - against 3 real agents x 10 partitions: every owner and epoch is what
    the owning agent's own GET /v1/partitions says, the partition the view
    assigns each member is what that agent says is assigned to it, quotas
    are 4/3/3 by join order, balanced and settled, exit 0; the text says
    what the JSON says; -c, --zookeeper, --cluster and $ZKELECT_ZOOKEEPER
    read the same; members says it is partitioned and names this view;
  - after kill -9 of one agent, before its session expires, the view still
    shows it as a member owning its partitions (ZooKeeper cannot know
    yet); once it has expired, its partitions are owned by the others
    under higher epochs, with younger ages, and the view is settled again;
  - a drained member (its member data written by hand with kazoo, as an
    agent that drains will write it) counts for no quota and shows its
    flags; a member that owns nothing while it should makes the view not
    balanced, not settled, exit 3;
  - bad input: ZooKeeper unreachable, a path that is not a partitioned
    election, a missing path or file, conflicting options.
"""

import json
import os
import subprocess
import time
import uuid

from partharness import new_part_agent, plist, wait_settled
from zkharness import ZKELECTCTL, SLOW, poll

N = 10
NAMES = [str(i) for i in range(N)]


def ctl(*args, env=None, timeout=30):
    return subprocess.run([ZKELECTCTL] + list(args), capture_output=True, text=True,
                          env=env, timeout=timeout * SLOW, stdin=subprocess.DEVNULL)


def view(zk, path, *extra):
    """(exit status, JSON document) of the cluster view."""
    r = ctl("partitions", "--zookeeper", zk, path, "--json", *extra)
    assert r.returncode in (0, 3), r
    return r.returncode, json.loads(r.stdout)


def agents_view(live):
    """{partition: (owner id, epoch)} and {partition: assigned id} as the
    agents themselves answer; None if one does not answer."""
    owners, assigned = {}, {}
    for a in live:
        d = plist(a, timeout=2)
        if d is None:
            return None, None
        for p in d["partitions"]:
            if p["is_leader"] is True:
                owners[p["name"]] = (a.id, p["epoch"])
            if p.get("assigned") is True:
                assigned[p["name"]] = a.id
    return owners, assigned


def view_owners(doc):
    return {p["name"]: (p["owner"], p["epoch"]) for p in doc["partitions"] if p["owner"]}


def member_nodes(observer, path):
    """[(node, id)] of PATH/members in join order (sequence), from ZooKeeper."""
    out = []
    for n in observer.zk.get_children(path + "/members"):
        data, _ = observer.zk.get("%s/members/%s" % (path, n))
        out.append((n, data.split(b"\0", 1)[0].decode()))
    return sorted(out, key=lambda t: int(t[0][2:]))


def quotas(n, k):
    """floor/ceil of N/K, the oldest members the larger (assign.c's rule)."""
    return [n // k + (1 if j < n % k else 0) for j in range(k)]


def strip_clock(doc):
    """The document without what depends on when it was read."""
    d = json.loads(json.dumps(doc))
    d.pop("now_ms")
    for p in d["partitions"]:
        p.pop("age_ms")
    return d


def text_matches_json(text, doc):
    """The text view says what the JSON says: each partition's owner,
    epoch and assignee, each member's counts, quota and flags, the
    verdict."""
    lines = text.splitlines()
    head = lines[0]
    assert head.startswith("%s: partitioned election, %d members, %d partitions: " % (
        doc["path"], len(doc["members"]), doc["partitions_run"])), head
    assert head.endswith("%s, %s" % ("balanced" if doc["balanced"] else "not balanced",
                                     "settled" if doc["settled"] else "not settled")), head
    assert lines[1].split()[:5] == ["PARTITION", "OWNER", "EPOCH", "AGE", "ASSIGNED"], lines[1]
    rows = lines[2:2 + len(doc["partitions"])]
    for p, row in zip(doc["partitions"], rows):
        f = row.split()
        assert f[0] == p["name"] and f[1] == (p["owner"] or "-"), (row, p)
        assert f[2] == (str(p["epoch"]) if p["epoch"] is not None else "-"), (row, p)
        assert f[4] == (p["assigned"] or "-"), (row, p)
    i = 2 + len(doc["partitions"])
    assert lines[i].split() == ["POS", "ID", "NODE", "RUNS", "OWNS", "QUOTA", "FLAGS"], lines[i]
    for m, row in zip(doc["members"], lines[i + 1:i + 1 + len(doc["members"])]):
        f = row.split()
        runs = "?" if m["runs"] is None else str(m["runs"])
        assert f[:6] == [str(m["position"]), m["id"], m["node"], runs,
                         str(m["owns"]), str(m["quota"])], (row, m)
        flags = [x.split("=")[0] for x in f[6:] if x != "-"]
        assert flags == m["flags"], (row, m)
    tail = lines[i + 1 + len(doc["members"]):]
    assert tail[0].startswith("balanced: %s" % ("yes" if doc["balanced"] else "no")), tail
    assert tail[1].startswith("settled: %s" % ("yes" if doc["settled"] else "no")), tail
    if doc["unowned"]:
        assert tail[2].startswith("unowned: %d:" % len(doc["unowned"])), tail
    else:
        assert tail[2] == "unowned: none", tail


def start_three(agents, session_timeout="3s"):
    live = [new_part_agent(agents, x, count=N, session_timeout=session_timeout)
            for x in ("a", "b", "c")]
    wait_settled(live, NAMES)
    return live


def test_cluster_view_is_what_the_agents_say(agents, observer, election, zk_hostport,
                                             tmp_path):
    t0 = time.time()
    live = start_three(agents)

    # The view (read between two looks at the agents that agree) is what
    # the agents say: owners, epochs, and what each is assigned.
    def agree():
        before, assigned = agents_view(live)
        status, doc = view(zk_hostport, election)
        after, _ = agents_view(live)
        if before is None or before != after or len(before) != N:
            return None
        assert view_owners(doc) == before, (doc, before)
        assert {p["name"]: p["assigned"] for p in doc["partitions"]} == assigned, \
            (doc, assigned)
        return status, doc
    status, doc = poll(agree, 30, interval=0.1, what="the view to match the agents")
    assert status == 0, doc
    assert doc["balanced"] and doc["settled"] and doc["unowned"] == [] and \
        doc["moving"] == [], doc
    assert doc["path"] == election and doc["partitions_run"] == N and \
        doc["members_counted"] == 3 and doc["owned"] == N and not doc["disagree"], doc

    # Each epoch is the claim node's mzxid, each age its mtime's.
    for p in doc["partitions"]:
        _, stat = observer.zk.get("%s/partitions/%s" % (election, p["name"]))
        assert p["epoch"] == stat.mzxid, (p, stat)
        assert p["age_ms"] == max(0, doc["now_ms"] - stat.mtime), (p, stat, doc["now_ms"])
        assert 0 <= p["age_ms"] <= (time.time() - t0) * 1000 + 1000, p
        assert p["run"] and p["exists"] and p["owner_is_member"] and \
            p["contenders"] >= 1, p

    # Members in join order with their quotas: floor/ceil of 10/3, 4 to the
    # oldest; each owns what its agent leads.
    order = member_nodes(observer, election)
    assert [(m["node"], m["id"]) for m in doc["members"]] == order, (doc, order)
    assert [m["quota"] for m in doc["members"]] == quotas(N, 3) == [4, 3, 3], doc
    owners = view_owners(doc)
    for m in doc["members"]:
        assert m["runs"] == N and m["counted"] and not m["drained"] and \
            m["avoid"] == [] and m["flags"] == [], m
        assert m["owns"] == sum(1 for o, _ in owners.values() if o == m["id"]) == \
            m["quota"] == m["assigned"], m

    # The text says the same.
    r = ctl("partitions", "--zookeeper", zk_hostport, election)
    assert r.returncode == 0, r
    text_matches_json(r.stdout, doc)

    # Every way of choosing the servers reads the same.
    same = strip_clock(doc)
    r = ctl("partitions", "-c", live[1].config, "--json")
    assert r.returncode == 0 and strip_clock(json.loads(r.stdout)) == same, r
    env = dict(os.environ, ZKELECT_CONFIG=live[2].config)
    r = ctl("partitions", "--cluster", "--json", env=env)
    assert r.returncode == 0 and strip_clock(json.loads(r.stdout)) == same, r
    env = dict(os.environ, ZKELECT_ZOOKEEPER=zk_hostport)
    env.pop("ZKELECT_CONFIG", None)
    r = ctl("partitions", election, "--json", "--timeout", "20s", env=env)
    assert r.returncode == 0 and strip_clock(json.loads(r.stdout)) == same, r
    # Without them, as before: this agent's own view, over its socket.
    r = ctl("--socket", live[0].socket, "partitions", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["id"] == "a", r

    # members says what this is, and where the cluster view is.
    r = ctl("members", "--zookeeper", zk_hostport, election)
    assert r.returncode == 0 and "partitioned election, 3 members, 10 partitions" in \
        r.stdout, r
    assert "zkelectctl partitions --zookeeper %s %s" % (zk_hostport, election) in r.stdout, r
    r = ctl("members", "-c", live[0].config)
    assert "zkelectctl partitions -c %s" % live[0].config in r.stdout, r
    r = ctl("members", "-c", live[0].config, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["partitioned"] is True, r


def test_cluster_view_through_a_crash(agents, observer, election, zk_hostport):
    # A session long enough to look before it expires.
    live = start_three(agents, session_timeout="8s")
    _, before = poll(lambda: (lambda s, d: d["settled"] and (s, d))(
        *view(zk_hostport, election)), 30, what="a settled view")
    old = view_owners(before)
    victim = live[1]
    theirs = {p for p, (o, _) in old.items() if o == victim.id}
    assert theirs, old

    victim.kill()
    status, doc = view(zk_hostport, election)
    # Its member node and contenders outlive it until its session expires:
    # ZooKeeper, and so the view, still count it, as a member that owns
    # its partitions under the same epochs, and nothing to move.
    assert observer.zk.exists("%s/members/%s" % (election, next(
        m["node"] for m in before["members"] if m["id"] == victim.id))), \
        "the view was read after the session of %s expired" % victim.id
    assert [m["id"] for m in doc["members"]] == ["a", "b", "c"], doc
    assert view_owners(doc) == old, (doc, old)
    assert status == 0 and doc["settled"] and doc["balanced"], doc

    # Once it has expired, the others own its partitions under new epochs;
    # nothing else moved.
    def resettled():
        s, d = view(zk_hostport, election)
        ids = [m["id"] for m in d["members"]]
        return s == 0 and d["settled"] and d["balanced"] and ids == ["a", "c"] and d
    doc = poll(resettled, 40, interval=0.1, what="the view to settle on a and c")
    now = view_owners(doc)
    assert [m["quota"] for m in doc["members"]] == [5, 5], doc
    for p, (o, e) in now.items():
        if p in theirs:
            assert o in ("a", "c") and e > old[p][1], (p, now[p], old[p])
        else:
            assert (o, e) == old[p], (p, now[p], old[p])
    ages = {p["name"]: p["age_ms"] for p in doc["partitions"]}
    assert max(ages[p] for p in theirs) < min(ages[p] for p in NAMES if p not in theirs), \
        ages
    # As the live agents say, once each has read the claims the view read
    # (a new owner's claim is in ZooKeeper a moment before its agent
    # answers for it).
    seen = []
    try:
        poll(lambda: seen.append(agents_view([live[0], live[2]])[0]) or seen[-1] == now, 10,
             what="the agents to answer as the view")
    except AssertionError:
        raise AssertionError((seen[-1:], now)) from None


def fake_member(observer, election, data):
    """A member node as an agent writes it, from a kazoo session (gone with
    the node at the end of the test)."""
    return observer.zk.create(election + "/members/m-", data, ephemeral=True, sequence=True)


def test_cluster_view_of_a_drained_member(agents, observer, election, zk_hostport):
    start_three(agents)
    _, doc = poll(lambda: (lambda s, d: d["settled"] and (s, d))(
        *view(zk_hostport, election)), 30, what="a settled view")
    owners = view_owners(doc)

    # A drained member with partitions it avoids: no quota, and shown so.
    # (Agents that do not know drained=1 assign it a share it never takes;
    # owners keep what they lead, so nothing moves.)
    z = fake_member(observer, election, b"z\0parts=count:10\0drained=1\0avoid=7,3\0next=x")
    status, doc = view(zk_hostport, election)
    zm = doc["members"][-1]
    assert zm["node"] == z.rsplit("/", 1)[1] and zm["id"] == "z", doc
    assert zm["drained"] and not zm["counted"] and zm["quota"] == 0 and zm["owns"] == 0, zm
    assert zm["avoid"] == ["3", "7"] and zm["flags"] == ["drained", "avoid"], zm
    assert zm["runs"] == N, zm
    assert doc["members_counted"] == 3, doc
    assert [m["quota"] for m in doc["members"]] == [4, 3, 3, 0], doc
    assert view_owners(doc) == owners, (doc, owners)
    assert status == 0 and doc["balanced"] and doc["settled"], doc
    r = ctl("partitions", "--zookeeper", zk_hostport, election)
    assert r.returncode == 0, r
    text_matches_json(r.stdout, doc)
    zrow = [l for l in r.stdout.splitlines() if l.split()[1:2] == ["z"]]
    assert zrow and zrow[0].split()[6:] == ["drained", "avoid=3,7"], r.stdout

    # A member that is not drained and owns nothing (it never queues): it
    # has a quota, so the cluster is neither balanced nor settled, exit 3.
    y = fake_member(observer, election, b"y\0parts=count:10")
    status, doc = view(zk_hostport, election)
    assert [m["id"] for m in doc["members"]] == ["a", "b", "c", "z", "y"], doc
    assert [m["quota"] for m in doc["members"]] == [3, 3, 2, 0, 2], doc
    ym = doc["members"][-1]
    assert ym["owns"] == 0 and ym["assigned"] == 2, ym
    assert status == 3 and not doc["balanced"] and not doc["settled"], doc
    assert sorted(doc["moving"]) == sorted(p["name"] for p in doc["partitions"]
                                           if p["assigned"] == "y"), doc
    assert doc["unowned"] == [], doc
    r = ctl("partitions", "--zookeeper", zk_hostport, election)
    assert r.returncode == 3, r
    text_matches_json(r.stdout, doc)
    assert "y owns 0 (quota 2)" in r.stdout, r.stdout

    # Gone again: settled as before.
    observer.zk.delete(y)
    status, doc = view(zk_hostport, election)
    assert status == 0 and doc["settled"] and view_owners(doc) == owners, doc


def test_cluster_view_of_nodes_made_by_hand(observer, zk_hostport):
    """What the view makes of each kind of node, written with kazoo: a
    claim with no contender, a claim older than its first contender, a
    claim of a contender with a value, an owner that is no member, a
    claim that names a contender not the first, a partition no member
    runs, one with no node yet, and a member of an
    agent before issue 30 (its id alone: it runs what the others run)."""
    zk = observer.zk
    path = "/zkelect/hand-%s" % uuid.uuid4().hex[:8]
    zk.create(path + "/members", b"", makepath=True)
    fake_member(observer, path, b"x\0parts=names:4,0,1,5,2,3")
    fake_member(observer, path, b"old")

    def contender(name, data):
        return zk.create("%s/partitions/%s/_c_%s-latch-" % (path, name, uuid.uuid4()), data,
                         ephemeral=True, sequence=True, makepath=True)
    zk.create(path + "/partitions/0", b"ghost", makepath=True)   # its owner's gone
    contender("1", b"x")
    contender("1", b"old")
    zk.set(path + "/partitions/1", b"x")                          # x claims, after
    contender("2", b"old\nhttp://old:8080")
    zk.set(path + "/partitions/2", b"old\nhttp://old:8080")
    zk.create(path + "/partitions/4", b"x")                       # claimed first...
    contender("4", b"x")                                          # ...queued after
    contender("5", b"x")
    contender("5", b"y")
    zk.set(path + "/partitions/5", b"y")                          # not the first's
    zk.create(path + "/partitions/9", b"zed")                     # no member runs 9
    contender("9", b"zed")
    zk.set(path + "/partitions/9", b"zed")
    # (partition 3: no node yet)

    r = ctl("partitions", "--zookeeper", zk_hostport, path, "--json")
    assert r.returncode == 3, r
    doc = json.loads(r.stdout)
    parts = {p["name"]: p for p in doc["partitions"]}
    assert list(parts) == ["0", "1", "2", "3", "4", "5", "9"], doc
    _, st1 = zk.get(path + "/partitions/1")
    assert (parts["1"]["owner"], parts["1"]["epoch"], parts["1"]["contenders"]) == \
        ("x", st1.mzxid, 2), parts["1"]
    assert parts["2"]["owner"] == "old" and parts["2"]["owner_is_member"], parts["2"]
    for name in ("0", "3", "4", "5"):
        assert parts[name]["owner"] is None and parts[name]["epoch"] is None and \
            parts[name]["run"], parts[name]
    assert not parts["3"]["exists"] and parts["4"]["contenders"] == 1 and \
        parts["5"]["contenders"] == 2, doc
    assert parts["9"]["owner"] == "zed" and not parts["9"]["owner_is_member"] and \
        not parts["9"]["run"], parts["9"]
    assert doc["unowned"] == ["0", "3", "4", "5"] and doc["partitions_run"] == 6, doc
    m = doc["members"]
    assert [(x["id"], x["runs"], x["quota"], x["owns"], x["flags"]) for x in m] == \
        [("x", 6, 3, 1, []), ("old", None, 3, 1, ["no-parts"])], m
    assert not doc["balanced"] and not doc["settled"], doc
    r = ctl("partitions", "--zookeeper", zk_hostport, path)
    assert r.returncode == 3, r
    text_matches_json(r.stdout, doc)
    notes = {l.split()[0]: l for l in r.stdout.splitlines()[2:9]}
    assert notes["3"].endswith("no node yet") and notes["9"].endswith("no member runs it"), \
        r.stdout
    assert "unowned: 4: 0, 3, 4, 5" in r.stdout, r.stdout


def test_cluster_view_errors(zk_hostport, observer, tmp_path):
    from zkharness import free_port
    # Nobody listens: a clear error within the timeout, exit 2.
    t0 = time.monotonic()
    r = ctl("partitions", "--zookeeper", "127.0.0.1:%d" % free_port(), "/zkelect/x",
            "--timeout", "1s")
    assert r.returncode == 2 and "cannot connect to ZooKeeper at 127.0.0.1:" in r.stderr, r
    assert time.monotonic() - t0 < 10 * SLOW
    # A single election, or any node that is not a partitioned election.
    path = "/zkelect/single-%s" % uuid.uuid4().hex[:8]
    observer.zk.create(path, b"", makepath=True)
    r = ctl("partitions", "--zookeeper", zk_hostport, path)
    assert r.returncode == 2 and "is not a partitioned election" in r.stderr and \
        "zkelectctl members" in r.stderr, r
    # A path nobody has joined.
    r = ctl("partitions", "--zookeeper", zk_hostport, path + "/none")
    assert r.returncode == 2 and "does not exist" in r.stderr, r
    # A missing file: the configuration's own message, exit 1.
    r = ctl("partitions", "-c", str(tmp_path / "missing.yaml"))
    assert r.returncode == 1 and "missing.yaml" in r.stderr, r
    env = dict(os.environ, ZKELECT_CONFIG=str(tmp_path / "gone.yaml"))
    r = ctl("partitions", "--cluster", env=env)
    assert r.returncode == 1 and "gone.yaml" in r.stderr, r
    # Usage.
    r = ctl("partitions", "-c", str(tmp_path / "x.yaml"), "--zookeeper", zk_hostport, "/x")
    assert r.returncode == 1 and "exclude each other" in r.stderr, r
    r = ctl("partitions", "--zookeeper", zk_hostport)
    assert r.returncode == 1 and "needs the election's PATH" in r.stderr, r
    env = dict(os.environ)
    env.pop("ZKELECT_ZOOKEEPER", None)
    r = ctl("partitions", "/x", env=env)
    assert r.returncode == 1 and "needs --zookeeper SERVERS" in r.stderr, r
    r = ctl("partitions", "--timeout", "soon", "--cluster")
    assert r.returncode == 1 and "invalid --timeout" in r.stderr, r
    # No option: the agent's view, as before.
    r = ctl("--socket", str(tmp_path / "none.sock"), "partitions")
    assert r.returncode == 2 and "cannot reach the agent" in r.stderr, r

