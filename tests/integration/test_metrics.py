# SPDX-License-Identifier: MIT
"""GET /metrics as a fleet's Prometheus reads it (issue 32, item 5;
issue 31): real agents, a real ZooKeeper, faults staged for real (a
missing chroot, a slow link, a cut link through zkproxy.py).

- zkelect_info names the agent (id, the election's path in ZooKeeper,
  version, partitions), so that a query can group by election and show
  ids rather than scrape addresses;
- zkelect_role and zkelect_is_leader say what the status document says,
  with partitions too (the landed agent said `unknown` while the status
  said `follower`);
- zkelect_status_reason says the status's reason as a label;
- zkelect_partitions_moving counts the partitions whose owner is to
  change here; zkelect_lease_lapses_total the terms the lease ended."""

import re
import subprocess
import time
import uuid

from zkharness import SLOW, ZKELECTD, poll

T = 2.0


def metrics(agent):
    """{series: value} of the agent's /metrics, series as written
    (`name` or `name{labels}`)."""
    r = agent.get("/metrics", timeout=2.0)
    assert r.status == 200, r
    out = {}
    for line in r.body.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


def info_labels(m):
    """The labels of the zkelect_info series (there must be exactly one)."""
    infos = [s for s in m if s.startswith("zkelect_info{")]
    assert len(infos) == 1, infos
    assert m[infos[0]] == 1
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', infos[0]))


def roles(m):
    """The roles zkelect_role gives 1 to (one, when all is well)."""
    on = [s for s, v in m.items() if s.startswith("zkelect_role{") and v == 1]
    return [re.search(r'role="(\w+)"', s).group(1) for s in on]


def reasons(m):
    """The reasons zkelect_status_reason gives 1 to."""
    return sorted(re.search(r'reason="(\w+)"', s).group(1) for s, v in m.items()
                  if s.startswith("zkelect_status_reason{") and v == 1)


def version():
    out = subprocess.run([ZKELECTD, "--version"], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


def agrees(agent):
    """Status and metrics read back to back, when neither moved between
    (the status's index the same before and after): (status, metrics)."""
    before = agent.status()
    m = metrics(agent)
    after = agent.status()
    if before is None or after is None or before["index"] != after["index"] \
            or before["role"] != after["role"]:
        return None
    return after, m


def test_partitioned_agents_report_the_role_their_status_reports(agents):
    """Two agents with 4 partitions, two each. With partitions the status
    says `follower` while connected (leadership is per partition): the
    metrics say the same, and no agent counts as the election's leader.
    Failed on the landed agent (e2799e4), whose metrics read the first
    partition's election: both agents, the owner of partition 0 too,
    exported zkelect_role{role="unknown"} 1 while their status said
    `follower`, so an "unknown role" alert would fire for ever."""
    parts = "partitions:\n  count: 4\n"
    duo = [agents.new("p%d" % i, extra_yaml=parts) for i in range(2)]
    for a in duo:
        a.wait_for(lambda s: s["partitions"]["owned"] == 2 and
                   s["partitions"]["members"] == 2, 30, what="2 of 4 partitions")
    for a in duo:
        st, m = poll(lambda: agrees(a), 10, what="%s: a steady status" % a.id)
        assert st["role"] == "follower", st
        assert roles(m) == ["follower"], (a.id, roles(m))
        assert m["zkelect_is_leader"] == 0 and m["zkelect_epoch"] == 0, a.id
        # What the partitions add, from the same agent.
        assert m["zkelect_partitions_owned"] == 2
        assert m['zkelect_partitions_moving{direction="in"}'] == 0
        assert m['zkelect_partitions_moving{direction="out"}'] == 0
        # The lease of the partitions it leads (the status's is 0).
        assert 0 < m["zkelect_lease_remaining_seconds"] <= 2 * T / 3
        assert info_labels(m) == {"id": a.id, "election": a.path,
                                  "version": version(), "partitions": "4"}
        assert reasons(m) == []


def test_info_and_reason_follow_a_missing_chroot(agents, observer, zk_hostport):
    """An agent under a chroot that does not exist: its status's reason
    names the chroot, zkelect_status_reason{reason="no_chroot"} is 1; once
    the chroot is made it leads, and no reason is 1. zkelect_info's
    election is the path in ZooKeeper, chroot first, so that two chroots
    of one ensemble are two elections."""
    chroot = "/zkelect-metrics-%s" % uuid.uuid4().hex[:8]
    a = agents.new("c1", zk_hostport=zk_hostport + chroot)
    st = a.wait_for(lambda s: s["reason"] is not None, 20, what="a reason")
    assert "chroot" in st["reason"], st
    m = metrics(a)
    assert reasons(m) == ["no_chroot"], reasons(m)
    assert info_labels(m) == {"id": "c1", "election": chroot + a.path,
                              "version": version(), "partitions": "0"}
    observer.zk.create(chroot)
    try:
        a.wait_for(lambda s: s["is_leader"], 30, what="c1 leads once the chroot exists")
        poll(lambda: reasons(metrics(a)) == [] and metrics(a)["zkelect_is_leader"] == 1,
             10, what="no reason in the metrics")
    finally:
        a.kill()
        observer.zk.delete(chroot, recursive=True)


def test_a_member_behind_a_slow_link_shows_its_partitions_moving_in(agents, proxies):
    """The only member of a partitioned election, its round trips 0.25 T:
    the assignment gives it all 4 partitions and it leads none, so all 4
    are moving in, and it owns none; its status and metrics say why."""
    p = proxies()
    p.delay(int(0.25 * T * 1000 / 2))
    a = agents.new("slow", zk_hostport=p.hostport, extra_yaml="partitions:\n  count: 4\n")
    a.wait_for(lambda s: s["partitions"]["assigned"] == 4, 30, what="4 assigned")
    deadline = time.monotonic() + 2 * T
    while time.monotonic() < deadline:
        m = metrics(a)
        assert m['zkelect_partitions_moving{direction="in"}'] == 4, m
        assert m['zkelect_partitions_moving{direction="out"}'] == 0
        assert m["zkelect_partitions_owned"] == 0
        assert m["zkelect_lease_remaining_seconds"] == 0
        time.sleep(0.2)
    # And it says why, as one election would, on the connection it has:
    # an agent that leads nothing does not drop it for a slow renewal
    # (before: kicked every T/6 for ever, 'connecting', no reason).
    st = a.wait_for(lambda s: s["reason"] is not None, 10 * SLOW,
                    what="a reason for owning nothing")
    assert "round trips" in st["reason"], st
    assert st["session"]["state"] == "connected", st
    poll(lambda: reasons(metrics(a)) == ["slow_zookeeper"], 5 * SLOW,
         what="the reason in the metrics")


def test_a_lapsed_lease_is_counted(agents, proxies):
    """A leader whose link to ZooKeeper goes silent: the lease runs out,
    the status says `unknown` (lease lapsed while disconnected), and
    zkelect_lease_lapses_total, 0 from the start, is 1."""
    p = proxies()
    a = agents.new("l1", zk_hostport=p.hostport)
    a.wait_for(lambda s: s["is_leader"], 30, what="l1 leads")
    assert metrics(a)["zkelect_lease_lapses_total"] == 0
    p.blackhole()
    st = a.wait_for(lambda s: s["role"] == "unknown", 10, what="the lease lapses")
    assert st["role_reason"].startswith("lease lapsed"), st
    poll(lambda: metrics(a)["zkelect_lease_lapses_total"] == 1, 5 * SLOW,
         what="one lapse counted")
