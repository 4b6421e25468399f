# SPDX-License-Identifier: MIT
"""GET /metrics as a fleet's Prometheus reads it (issue 32, item 5):
real agents, a real ZooKeeper. zkelect_role and zkelect_is_leader say
what the status document says, with partitions too (the landed agent
said `unknown` while the status said `follower`)."""

import re

from zkharness import poll


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


def roles(m):
    """The roles zkelect_role gives 1 to (one, when all is well)."""
    on = [s for s, v in m.items() if s.startswith("zkelect_role{") and v == 1]
    return [re.search(r'role="(\w+)"', s).group(1) for s in on]


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
        assert m["zkelect_partitions_owned"] == 2

