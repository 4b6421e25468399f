# SPDX-License-Identifier: MIT
"""Partitions: the members and what they agree on (doc/design.md
"Partitions", issue 30), against a real ZooKeeper and real agents:

  - a member node deleted by hand is made again while the session lives,
    and the agent's partitions stay owned (before: it never came back, and
    with one agent every partition lapsed and stayed unowned);
  - two agents with one id among the members are reported: status reason,
    one log line naming the id (before: nothing said it); an agent started
    again after a graceful stop is no duplicate of its previous run
    (before: one warning per partition whose claim named the old run);
  - agents that disagree on the partitions (the middle of a rolling change
    of partitions.count) leave no partition that a live agent knows without
    an owner, and say so (before: partitions every view gave to another
    agent stayed unowned while it lasted); the rolling change, as README
    documents it, leaves no partition unowned for longer than a handover
    and ends balanced over the new count.
"""

import re
import signal
import time

import partharness as ph
from zkharness import SLOW, Observer, poll


def member_nodes(obs, path):
    """{node name: (id, ephemeralOwner)} under path/members."""
    base = path + "/members"
    out = {}
    for n in obs.zk.get_children(base):
        data, st = obs.zk.get("%s/%s" % (base, n))
        out[n] = (data.split(b"\0", 1)[0].decode(errors="replace"), st.ephemeralOwner)
    return out


def test_member_node_deleted_by_hand_is_made_again(agents, zk_hostport, election):
    a = ph.new_part_agent(agents, "a", count=8, session_timeout="2s")
    ph.wait_settled([a], [str(i) for i in range(8)], timeout=60 * SLOW)
    obs = Observer(zk_hostport)
    try:
        before = member_nodes(obs, election)
        assert [v[0] for v in before.values()] == ["a"], before
        for n in before:
            obs.zk.delete("%s/members/%s" % (election, n))
        # A new member node of a's session, and its partitions owned all
        # along: for 3 T after the delete every partition stays owned.
        poll(lambda: [n for n, v in member_nodes(obs, election).items()
                      if v[0] == "a" and n not in before], 10 * SLOW,
             what="a to make its member node again")
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            d = ph.plist(a)
            assert d is not None and len(ph.owned(d)) == 8, d
            time.sleep(0.05)
        assert "member node" in a.log_text(10**7)
    finally:
        obs.close()


def test_duplicate_ids_are_reported(agents):
    a = ph.new_part_agent(agents, "twin", count=4, session_timeout="2s")
    a.wait_for(lambda s: s["partitions"]["members"] == 1, 30 * SLOW, what="a member")
    b = agents.new("twin-2", start=False, session_timeout="2s",
                   extra_yaml=ph.partitions_yaml(4))
    b.id = "twin"
    b.write_config()
    b.start()
    for x in (a, b):
        s = x.wait_for(lambda s: (s.get("reason") or "").find("twin") >= 0,
                       30 * SLOW, what="%s to report the duplicate id" % x.id)
        assert "election.id" in s["reason"], s
    poll(lambda: a.log_text(10**7).count("share the id 'twin'") == 1, 10 * SLOW,
         what="one log line naming the id")


def test_a_restart_is_no_duplicate_of_the_previous_run(agents):
    n = 16
    a = ph.new_part_agent(agents, "again", count=n, session_timeout="2s")
    ph.wait_settled([a], names(n), timeout=60 * SLOW)
    assert a.stop() == 0
    a.start()
    ph.wait_settled([a], names(n), timeout=60 * SLOW)
    st = a.status()
    assert "election.id" not in (st.get("reason") or ""), st
    second = a.log_text(10**7).split("start #2 of again")[1]
    assert "uses this agent's election.id" not in second, second[-3000:]


def names(n):
    return [str(i) for i in range(n)]


def union_owners(live, n):
    """{partition: [ids answering is_leader]} over 0..n-1, from every live
    agent's /v1/partitions (each lists only the partitions it runs); None
    if one did not answer."""
    seen = {p: [] for p in names(n)}
    for a in live:
        d = ph.plist(a)
        if d is None:
            return None
        for e in d["partitions"]:
            if e["is_leader"] and e["name"] in seen:
                seen[e["name"]].append(a.id)
    return seen


def each_owned_once(live, n):
    seen = union_owners(live, n)
    return seen is not None and all(len(v) == 1 for v in seen.values())


def unowned_spans(checker, since):
    """{partition: the longest time (s) after `since`, and after it was first
    owned, that no agent answered is_leader true for it}."""
    out = {}
    for name, lst in checker.snapshot().items():
        true = sorted((x.t0, x.t1) for x in lst if x.is_leader and x.t1 >= since)
        longest, last_end = 0.0, None
        for t0, t1 in true:
            if last_end is not None and t0 > last_end:
                longest = max(longest, t0 - last_end)
            last_end = t1 if last_end is None else max(last_end, t1)
        out[name] = longest
    return out


def restart_with(agent, n):
    agent.stop()
    agent.extra_yaml = ph.partitions_yaml(n)
    agent.write_config()
    agent.start()


def test_agents_that_disagree_leave_no_partition_unowned(agents):
    """The middle of a rolling change of partitions.count (README,
    "Partitions", "Changing the count"): a, b, c run 8 partitions; c is
    restarted with 12, then b is killed. Every partition a live agent runs
    has one owner (8-11 only c runs, so c owns them), within about T of
    the kill, and the agents say they disagree. Then a and b (started
    again) move to 12: balanced, 4 each, and nothing said any more. No
    partition, once owned, is without an owner for longer than the killed
    agent's session takes to expire. (Before: partitions each agent's view
    gave to another stayed unowned for as long as the views differed: 32 s
    watched.)"""
    T = 2.0
    a, b, c = [ph.new_part_agent(agents, x, count=8, session_timeout="2s")
               for x in ("a", "b", "c")]
    ph.wait_settled([a, b, c], names(8), timeout=60 * SLOW)
    checker = ph.PartitionChecker(agents).start()
    try:
        since = time.monotonic()
        restart_with(c, 12)
        poll(lambda: each_owned_once([a, b, c], 12), 30 * SLOW,
             what="every partition of the 12 owned once, with c on 12")
        for x in (a, b, c):
            s = x.wait_for(lambda s: "do not run the same partitions" in
                           (s.get("reason") or ""), 20 * SLOW,
                           what="%s to say the members disagree" % x.id)
            assert "count:12" in s["reason"] and "count:8" in s["reason"], s
        # Said once (the log may lag the status by a line).
        poll(lambda: "do not run the same partitions" in a.log_text(10**7), 10,
             what="a to log that the members disagree")
        assert a.log_text(10**7).count("do not run the same partitions") == 1
        b.kill()
        checker.freeze(b)
        poll(lambda: each_owned_once([a, c], 12), (T + 10) * SLOW,
             what="a and c owning all 12 after b's session ends")
        restart_with(a, 12)
        b.extra_yaml = ph.partitions_yaml(12)
        b.write_config()
        b.start()
        ph.wait_settled([a, b, c], names(12), timeout=60 * SLOW)
        for x in (a, b, c):
            x.wait_for(lambda s: s.get("reason") is None, 20 * SLOW,
                       what="%s to agree" % x.id)
        poll(lambda: "every member runs the same partitions again" in c.log_text(10**7),
             10, what="c to log that the members agree again")
        spans = unowned_spans(checker, since)
        worst = max(spans.values())
        print("longest unowned span of a partition once owned: %.3f s (%s)" % (
            worst, ", ".join("%s %.3f" % kv for kv in sorted(spans.items()))))
        assert worst < (T + 2.0) * SLOW, spans
        assert not checker.violations(), checker.violations()
    finally:
        checker.stop()


def test_rolling_count_change_as_documented(agents):
    """Changing partitions.count as README says ("Changing the count"): each
    agent in turn stopped gracefully and started with the new block, 8 to
    12. No partition, once owned, is without an owner for longer than a
    handover (no agent is killed here, so no session has to expire), and
    it ends balanced over the 12 with nothing said any more."""
    T = 2.0
    live = [ph.new_part_agent(agents, x, count=8, session_timeout="2s")
            for x in ("a", "b", "c")]
    ph.wait_settled(live, names(8), timeout=60 * SLOW)
    checker = ph.PartitionChecker(agents).start()
    try:
        since = time.monotonic()
        for x in live:
            restart_with(x, 12)
            poll(lambda: each_owned_once(live, 12), 30 * SLOW,
                 what="every partition a live agent runs owned once after %s's restart"
                 % x.id)
        ph.wait_settled(live, names(12), timeout=60 * SLOW)
        for x in live:
            x.wait_for(lambda s: s.get("reason") is None, 20 * SLOW,
                       what="%s to agree" % x.id)
        spans = unowned_spans(checker, since)
        worst = max(spans.values())
        print("rolling count change 8 -> 12, T = %.0f s: longest unowned span of a "
              "partition once owned: %.3f s (%s)" % (
                  T, worst, ", ".join("%s %.3f" % kv for kv in sorted(spans.items()))))
        assert worst < 0.5 * SLOW, spans
        assert not checker.violations(), checker.violations()
    finally:
        checker.stop()


def test_a_join_into_a_standing_fleet_does_not_wait_the_window(agents):
    """The join window (doc/design.md, "Thousands of partitions") is for a
    cold start, when members join in a burst: an agent started into a
    fleet whose members have stood still assigns as soon as it has read
    them (their nodes' ctimes are older than its own by the window's
    span) and every partition's claim, and says so at debug level."""
    n = 1024                            # a span of 256 ms at T = 2 s
    first = [ph.new_part_agent(agents, x, count=n, session_timeout="2s", log_level="debug")
             for x in ("a", "b")]
    ph.wait_settled(first, names(n), timeout=60 * SLOW)
    c = ph.new_part_agent(agents, "c", count=n, session_timeout="2s", log_level="debug")
    ph.wait_settled(first + [c], names(n), timeout=60 * SLOW)
    said = "the members stood still before we joined; assigning once every claim is read"
    assert said in c.log_text(10**8), c.log_text(10**8)[-3000:]


def test_graceful_leave_hands_each_partition_over_at_once(agents):
    """A graceful leave (every rolling deploy): each partition of the
    leaver goes to its successor in a handover's time. The successor is
    named by the leaver's release and leads on its read of the claim: its
    lease is anchored by the session's renewals, so no renewal of its own
    comes between (before: a successor whose lease was short sent one and
    waited for it, and a leaver's whole share was unowned for up to
    275 ms at T = 2 s, 2 s at T = 6 s). tests/bench/partition_handover.py
    measures the gaps."""
    n = 16
    live = [ph.new_part_agent(agents, "w%d" % i, count=n, session_timeout="6s",
                              tick_time="") for i in range(4)]
    ph.wait_settled(live, names(n), timeout=60 * SLOW)
    for a in live:
        a.wait_for(lambda s: s["session"]["tick_bound_from"] == "servers", 20 * SLOW,
                   what="%s to learn the tick's bound" % a.id)
    leaver, rest = live[0], live[1:]
    before = {a.id: len(a.log_text(10**8)) for a in rest}
    mine = ph.owned(ph.plist(leaver))
    assert mine, "the leaver owns nothing"
    leaver.signal(signal.SIGTERM)
    ph.wait_settled(rest, names(n), timeout=60 * SLOW)

    # The log is written by a thread of its own, so a line can reach the
    # file just after the state it tells of is answered: poll. A successor
    # that saw its node first in line at the deletion claims itself,
    # before it reads the claim naming it: a handover all the same.
    def gained():
        got = set()
        for a in rest:
            got |= set(re.findall(r"partition (\S+): gained \((?:named by|claimed)",
                                  a.log_text(10**8)[before[a.id]:]))
        return set(mine) <= got
    poll(gained, 10, what="a line for each of %s's partitions gained" % leaver.id)
    for a in rest:
        text = a.log_text(10**8)[before[a.id]:]
        assert not re.findall(r"election: \d+:renew \S+ \(phase takeover", text), \
            "%s renewed in a takeover before leading" % a.id
    # Every successor queued in time: the leaver handed each over and
    # did not wait out the stop's 5 s before releasing the rest.
    leaver.proc.wait(30)
    assert "no successor queued in time" not in leaver.log_text(10**8)
