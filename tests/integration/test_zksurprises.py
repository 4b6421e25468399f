# SPDX-License-Identifier: MIT
"""ZooKeeper surprises while the agents run (issue 23, item 5), against a
real ZooKeeper: an operator deletes the election path, changes its ACL,
overwrites the claim, leaves a stray child in it, or removes the chroot.
Each time: a clear log line (once), a status that says so, never two
leaders (a StatusRecorder polls every agent), and recovery without a
restart once the operator puts things right."""

import re
import time
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.security import make_digest_acl

from zkharness import SLOW, poll

T = 2.0
AUTH = '  auth: {scheme: digest, credentials: "zkelect:s3cret"}\n'


def client(hostport, auth=None):
    zk = KazooClient(hosts=hostport, timeout=10.0,
                     auth_data=[("digest", auth)] if auth else None)
    zk.start(timeout=15)
    return zk


def close(zk):
    try:
        zk.stop()
        zk.close()
    except Exception:  # noqa: BLE001
        pass


def delete_all(zk, path):
    """As `deleteall` does (zkCli deletes the tree in one multi): every
    child and the node, in one transaction. An agent that queued again
    between the listing and the transaction makes it fail whole; then it
    tries again. (Children one by one, as kazoo's recursive delete goes,
    never won under ASan: each agent queued again within milliseconds of
    losing its node, and the node was never empty.)"""
    def tree(p):
        """p and every node below it, parents first."""
        out = [p]
        for k in zk.get_children(p):
            try:
                out += tree("%s/%s" % (p, k))
            except NoNodeError:
                pass
        return out
    deadline = time.monotonic() + 20
    while True:
        try:
            nodes = tree(path)
        except NoNodeError:
            return
        t = zk.transaction()
        for n in reversed(nodes):
            t.delete(n)
        results = t.commit()
        if all(r is True for r in results):
            return
        if time.monotonic() > deadline:
            raise AssertionError("deleteall of %s kept failing: %r" % (path, results))


def count(agent, pattern):
    return len(re.findall(pattern, agent.log_text(limit=10**8)))


def figure(name, **kw):
    """A measured figure, for the README's "What it survives" (run with -s)."""
    print("\nFIGURE %s: %s" % (name, ", ".join("%s=%.2f s" % kv for kv in kw.items())))


def no_two_leaders(recorder):
    v = recorder.violations()
    assert not v, v[:3]


def pool(agents, n, **kw):
    out = [agents.new("a%d" % i, session_timeout="2s", **kw) for i in range(1, n + 1)]
    lead = agents.wait_one_leader(30 * SLOW)
    s = lead.status()
    return out, lead, s


def test_1_election_path_deleted_recursively(agents, observer, election, recorder):
    """An operator's `deleteall` of the election path while a leader leads
    and two followers wait: the leader stops, the agents re-create the path
    (rule 9) and one of them leads under a higher epoch; never two leaders.
    (Passed before.)"""
    recorder.start()
    ags, lead, s = pool(agents, 3)
    for a in ags:
        if a is not lead:
            a.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="%s follows" % a.id)
    t0 = time.monotonic()
    delete_all(observer.zk, election)
    lead.wait_for(lambda st: not st["is_leader"] or st["epoch"] != s["epoch"], 10 * SLOW,
                  what="the leader's term to end")
    t_down = time.monotonic() - t0
    poll(lambda: re.search(r"election path deleted|own node vanished|node deleted",
                           lead.log_text(limit=10**8)), 10, what="the leader's log line")
    # The leader and its answer from one look: while the deleteall still
    # runs, an agent may lead for a few ms and lose its node again.
    def one_leader():
        ls = [st for st in (a.status() for a in ags) if st and st["is_leader"]]
        return ls[0] if len(ls) == 1 else None
    s2 = poll(one_leader, 30 * SLOW, what="exactly one leader")
    figure("path-deleted", old_term_ended=t_down, new_leader=time.monotonic() - t0)
    assert s2["epoch"] > s["epoch"]
    poll(lambda: len(observer.contenders(election)) == 3, 30 * SLOW,
         what="every agent queued again")
    time.sleep(T)
    recorder.stop()
    no_two_leaders(recorder)


def test_2_noauth(agents, observer, election, recorder, zk_hostport):
    """The agents (one set of digest credentials) lose access to the
    election path: an operator sets an ACL that leaves them out. The leader
    stops at its next renewal (it cannot prove it leads), every agent says
    why in its status and once in its log; when the ACL is put back, one
    leads again, without a restart. (Failed before: the leader answered
    true until its lease ran out, no reason, a warning per request.)"""
    recorder.start()
    ags, lead, s = pool(agents, 2, zk_yaml=AUTH)
    other = [a for a in ags if a is not lead][0]
    other.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="the other follows")
    op = client(zk_hostport, auth="zkelect:s3cret")
    try:
        acl_before, _ = op.get_acls(election)
        op.set_acls(election, [make_digest_acl("admin", "adm1n", all=True)])
        t0 = time.monotonic()
        lead.wait_for(lambda st: not st["is_leader"], 10 * SLOW, what="the leader stops")
        dt = time.monotonic() - t0
        # A renewal goes every T/5 at least: it learns within about that.
        assert dt < 0.6 * T * SLOW, "the leader led on for %.2f s without access" % dt
        for a in ags:
            st = a.wait_for(lambda st: st["reason"] is not None, 10 * T * SLOW,
                            what="%s says why" % a.id)
            assert "NOAUTH" in st["reason"], st
            assert not st["is_leader"]
        # Several T without access: still one line each, nobody leads.
        time.sleep(3 * T)
        for a in ags:
            assert count(a, r"not leading: ZooKeeper refuses access") == 1, a.log_text()
            assert count(a, r"warn: zookeeper: [^\n]*not authenticated") <= 1, a.log_text()
            assert not a.is_leader()
        # The operator puts the ACL back.
        admin = client(zk_hostport, auth="admin:adm1n")
        try:
            admin.set_acls(election, acl_before)
        finally:
            close(admin)
        t1 = time.monotonic()
        lead2 = agents.wait_one_leader(20 * T * SLOW)
        figure("noauth", leader_stopped=dt, leads_after_acl_restored=time.monotonic() - t1)
        s2 = lead2.status()
        assert s2["epoch"] > s["epoch"] and s2["reason"] is None
        for a in ags:
            assert a.starts == 1
            poll(lambda: count(a, r"may lead again") >= 1, 10 * SLOW,
                 what="%s's all-clear line" % a.id)
    finally:
        close(op)
    recorder.stop()
    no_two_leaders(recorder)


def test_3_claim_overwritten(agents, observer, election, recorder, zk_hostport):
    """Another client writes the election node (the claim): the leader ends
    its term at its next renewal, says so, and leads again under a higher
    epoch (its node is still lowest); the follower never leads. (Passed
    before.)"""
    recorder.start()
    ags, lead, s = pool(agents, 2)
    other = [a for a in ags if a is not lead][0]
    other.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="the other follows")
    observer.zk.set(election, b"intruder")
    t0 = time.monotonic()
    poll(lambda: (lead.status() or {}).get("epoch") != s["epoch"], 10 * SLOW,
         what="the leader's old term to end")
    dt = time.monotonic() - t0
    assert dt < 0.6 * T * SLOW
    poll(lambda: "claim overwritten" in lead.log_text(limit=10**8), 10, what="the log line")
    s2 = lead.wait_for(lambda st: st["is_leader"], 20 * SLOW, what="it leads again")
    figure("claim-overwritten", old_term_ended=dt, leads_again=time.monotonic() - t0)
    assert s2["epoch"] > s["epoch"]
    data, stat = observer.election_node(election)
    assert data == "a%s" % lead.id[1:] and stat.mzxid == s2["epoch"]
    assert not other.is_leader()
    recorder.stop()
    no_two_leaders(recorder)
    assert not [x for x in recorder.leader_samples() if x.agent == other.id]


def test_4_stray_child_is_ignored(agents, observer, election, recorder):
    """A child of the election path that is not a candidate node (an
    operator's `junk`, persistent, with a child of its own): ignored, with
    one log line per agent that lists it, and the queue moves on past it:
    the leader's stop hands over to the next. (The log line failed before.)"""
    recorder.start()
    a1 = agents.new("a1", session_timeout="2s")
    a1.wait_for(lambda s: s["is_leader"], 30 * SLOW, what="a1 leads")
    observer.zk.create(election + "/junk", b"x")
    observer.zk.create(election + "/junk/inner", b"y")
    a2 = agents.new("a2", session_timeout="2s")
    a2.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="a2 follows")
    poll(lambda: count(a1, r"ignoring \d+ child") >= 1, 10 * SLOW, what="a1's log line")
    time.sleep(T)
    assert count(a1, r"ignoring \d+ child") == 1, a1.log_text()
    assert count(a2, r"ignoring \d+ child") <= 1
    s1 = a1.status()
    assert s1["candidates"] == 2, s1
    recorder.stop()
    no_two_leaders(recorder)


def test_4_junk_child_never_blocks_the_queue(agents, observer, election, recorder):
    """Junk first, then candidates: the first candidate leads, and on its
    stop the next one does; the junk is counted nowhere. (Passed before,
    but for the log line.)"""
    observer.zk.ensure_path(election)
    observer.zk.create(election + "/junk", b"x")
    recorder.start()
    a1 = agents.new("a1", session_timeout="2s")
    a1.wait_for(lambda s: s["is_leader"], 30 * SLOW, what="a1 leads")
    a2 = agents.new("a2", session_timeout="2s")
    a2.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="a2 follows")
    assert a1.status()["candidates"] == 2
    a1.stop()
    a2.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a2 leads")
    assert count(a2, r"ignoring 1 child of [^ ]+ that is not a candidate node \(junk\)") >= 1
    recorder.stop()
    no_two_leaders(recorder)


def test_5_chroot_missing_then_created_then_deleted(agents, observer, zk_hostport, recorder):
    """servers: host:port/app where /app does not exist: the agent does not
    lead and says why (status and one log line); created, it leads without a
    restart; deleted while it leads, it stops, says so again, and leads
    once more when /app is back. (Failed before: no reason.)"""
    chroot = "/zkelect-app-%s" % uuid.uuid4().hex[:8]
    recorder.start()
    a = agents.new("a1", zk_hostport=zk_hostport + chroot, session_timeout="2s")
    st = a.wait_for(lambda s: s["reason"] is not None, 10 * T * SLOW, what="a says why")
    assert "chroot" in st["reason"] and not st["is_leader"], st
    time.sleep(2 * T)
    assert count(a, r"not leading: the election path cannot be created") == 1, a.log_text()
    observer.zk.create(chroot)
    t0 = time.monotonic()
    s = a.wait_for(lambda s: s["is_leader"], 20 * T * SLOW, what="a leads once /app exists")
    t_lead = time.monotonic() - t0
    assert s["reason"] is None and a.starts == 1
    # Deleted while it leads.
    t0 = time.monotonic()
    delete_all(observer.zk, chroot)
    a.wait_for(lambda st: not st["is_leader"], 10 * SLOW, what="a stops")
    t_down = time.monotonic() - t0
    st = a.wait_for(lambda s: s["reason"] is not None, 10 * T * SLOW, what="a says why again")
    assert "chroot" in st["reason"]
    # Only once the agent stopped re-creating the path under it:
    poll(lambda: not observer.zk.exists(chroot), 10, what="the chroot to stay gone")
    observer.zk.create(chroot)
    t0 = time.monotonic()
    s2 = a.wait_for(lambda s: s["is_leader"], 20 * T * SLOW, what="a leads again")
    figure("chroot", leads_once_created=t_lead, stopped_once_deleted=t_down,
           leads_once_recreated=time.monotonic() - t0)
    assert s2["epoch"] > s["epoch"]
    assert count(a, r"not leading: the election path cannot be created") == 2
    delete_all(observer.zk, chroot)
    recorder.stop()
    no_two_leaders(recorder)


def test_4_persistent_lookalike_is_named(agents, observer, election):
    """A persistent node with a contender's name ahead of the agents (made
    by hand): it never leaves, and the agents cannot skip it (they must all
    agree on who is lowest), so the one behind it says so, once, and leads
    as soon as an operator deletes it. (The log line failed before.)"""
    observer.zk.ensure_path(election)
    junk = observer.zk.create(election + "/_c_byhand-latch-", b"x", sequence=True)
    a1 = agents.new("a1", session_timeout="2s")
    a1.wait_for(lambda s: s["role"] == "follower", 20 * SLOW, what="a1 queues behind it")
    poll(lambda: count(a1, r"is not ephemeral") == 1, 10 * SLOW, what="a1's warning")
    time.sleep(T)
    assert count(a1, r"is not ephemeral") == 1
    assert junk.rsplit("/", 1)[1] in a1.log_text(limit=10**8)
    assert not a1.is_leader()
    observer.zk.delete(junk)
    a1.wait_for(lambda s: s["is_leader"], 10 * SLOW, what="a1 leads once it is deleted")
