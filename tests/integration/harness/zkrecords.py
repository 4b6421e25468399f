# SPDX-License-Identifier: MIT
"""ZooKeeper's own records of an election, and the stale-answer check built
on them (issue 20; used by tests/chaos/chaos.py, tested by
test_zkrecords.py with synthetic logs).

ZooKeeper writes every transaction it commits to its transaction logs
(`dataDir/version-2/log.*`): a header (the session that asked, the zxid,
the time, the type) and the operation. From them this module rebuilds,
without asking the agents anything:

  * every claim: a setData of the election node (alone, or in a multi), its
    zxid (the epoch), its data (the agent it names) and the contender node
    the same multi checked (the claimant's own node, or the successor's in a
    handover);
  * every contender node: created by which session, for which agent, and
    when and how it went (deleted by its own session, by another session,
    or with its session's closeSession);
  * every session: its createSession and its closeSession (the client's own
    close, or the expiry the ZooKeeper leader decided).

check_answers() then judges the StatusRecorder's answers against them: an
`is_leader: true` with epoch e is stale when the request it answers was sent
after a later claim, or after the node of e's claim, or its session, was
gone (see check_answers for the clocks and the direction of their errors).

The txn log format (apache/zookeeper 3.8, FileTxnLog and the jute records in
zookeeper.jute): a file header "ZKLG", version (int), dbid (long); then per
transaction a crc (long), a length (int), the record (TxnHeader, the txn,
in 3.6+ a TxnDigest we do not read) and 'B' (0x42); preallocated zeros at
the end. All integers big-endian; a jute string or buffer is an int length
(-1 for null) and the bytes; a vector is an int count and the elements.
Read here in Python rather than with ZooKeeper's own tools, which start a
JVM per file. Debian's 3.8 ships both LogFormatter (it prints nothing
useful on this classpath) and TxnLogToolkit; to look at a log by hand:

    CP=/etc/zookeeper/conf:$(ls /usr/share/java/{zookeeper,zookeeper-jute,slf4j-api,\
    log4j-1.2,netty-buffer,commons-cli}*.jar | tr '\n' :)
    java -cp "$CP" org.apache.zookeeper.server.persistence.TxnLogToolkit -d FILE

It lists the same transactions as parse_txnlog (checked on a chaos run's
logs: 219 of 219, the same sessions, zxids, paths and data).
"""

import bisect
import collections
import glob
import os
import struct

# OpCodes (ZooDefs.OpCode).
OP_CREATE = 1
OP_DELETE = 2
OP_SETDATA = 5
OP_CHECK = 13
OP_MULTI = 14
OP_CREATE2 = 15
OP_CREATE_CONTAINER = 19
OP_DELETE_CONTAINER = 20
OP_CREATE_TTL = 21
OP_CREATE_SESSION = -10
OP_CLOSE_SESSION = -11
OP_ERROR = -1


class Txn:
    """One committed transaction: header fields and its operations, each a
    tuple (type, path, data, ephemeral). A failed multi has no operations."""
    __slots__ = ("session", "cxid", "zxid", "time_ms", "type", "ops")

    def __init__(self, session, cxid, zxid, time_ms, type_, ops):
        self.session = session
        self.cxid = cxid
        self.zxid = zxid
        self.time_ms = time_ms
        self.type = type_
        self.ops = ops

    def __repr__(self):
        return "<txn %#x t=%d sid=%#x type=%d %r>" % (self.zxid, self.time_ms, self.session,
                                                      self.type, self.ops)


def _string(buf, off):
    (n,) = struct.unpack_from(">i", buf, off)
    off += 4
    if n < 0:
        return None, off
    if off + n > len(buf):
        raise struct.error("string past the end")
    return bytes(buf[off:off + n]), off + n


def _acls(buf, off):
    (n,) = struct.unpack_from(">i", buf, off)
    off += 4
    for _ in range(max(n, 0)):
        off += 4                        # perms
        _, off = _string(buf, off)      # scheme
        _, off = _string(buf, off)      # id
    return off


def _op(typ, body):
    """(type, path, data, ephemeral) of one operation's txn record, or None
    for the ones we do not need."""
    if typ in (OP_CREATE, OP_CREATE2, OP_CREATE_CONTAINER, OP_CREATE_TTL):
        path, o = _string(body, 0)
        data, o = _string(body, o)
        eph = False
        if typ in (OP_CREATE, OP_CREATE2):
            o = _acls(body, o)
            eph = body[o] != 0
        return (OP_CREATE, path.decode(errors="replace"), data or b"", eph)
    if typ in (OP_DELETE, OP_DELETE_CONTAINER):
        path, _ = _string(body, 0)
        return (OP_DELETE, path.decode(errors="replace"), None, False)
    if typ == OP_SETDATA:
        path, o = _string(body, 0)
        data, o = _string(body, o)
        return (OP_SETDATA, path.decode(errors="replace"), data or b"", False)
    if typ == OP_CHECK:
        path, _ = _string(body, 0)
        return (OP_CHECK, path.decode(errors="replace"), None, False)
    return None


def parse_txnlog(data):
    """The transactions in one txn log file's bytes (a list of Txn). Stops at
    the first record that is cut off or not terminated (the preallocated
    end, or a record being written)."""
    out = []
    if data[:4] != b"ZKLG":
        return out
    off = 16
    while off + 12 <= len(data):
        _crc, ln = struct.unpack_from(">qi", data, off)
        if ln <= 0 or off + 12 + ln + 1 > len(data) or data[off + 12 + ln] != 0x42:
            break
        rec = data[off + 12:off + 12 + ln]
        off += 12 + ln + 1
        try:
            sid, cxid, zxid, t, typ = struct.unpack_from(">qiqqi", rec, 0)
        except struct.error:
            break
        body = rec[32:]             # the header: q i q q i
        ops = []
        try:
            if typ == OP_MULTI:
                (cnt,) = struct.unpack_from(">i", body, 0)
                p = 4
                inner = []
                for _ in range(max(cnt, 0)):
                    (ityp,) = struct.unpack_from(">i", body, p)
                    b, p = _string(body, p + 4)
                    inner.append((ityp, b or b""))
                # A failed multi is written with an error txn for each op.
                if not any(ityp == OP_ERROR for ityp, _ in inner):
                    for ityp, b in inner:
                        op = _op(ityp, b)
                        if op is not None:
                            ops.append(op)
            elif typ in (OP_CREATE_SESSION, OP_CLOSE_SESSION, OP_ERROR):
                pass
            else:
                op = _op(typ, body)
                if op is not None:
                    ops.append(op)
        except (struct.error, IndexError):
            ops = []
        out.append(Txn(sid, cxid, zxid, t, typ, ops))
    return out


def read_txnlogs(files_by_server, quorum):
    """{zxid: Txn} of the transactions found in the logs of at least `quorum`
    servers (`files_by_server`: one list of log files per server).

    Why a quorum: a ZooKeeper server writes a proposal to its log before it
    acknowledges it, and the leader commits it once a quorum acknowledged.
    So a committed transaction is in the logs of a quorum (a server that
    rejoins later drops only uncommitted ones), and a transaction logged by
    a quorum is committed (Zab elects a leader that has it). A proposal of
    a ZooKeeper leader that was paused or killed before a quorum had it may
    sit in its own log only: it never happened, and must not count.
    Also returns the number of zxids dropped for lack of a quorum."""
    seen = collections.defaultdict(set)
    txns = {}
    for i, files in enumerate(files_by_server):
        for fn in files:
            try:
                with open(fn, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            for t in parse_txnlog(data):
                seen[t.zxid].add(i)
                txns.setdefault(t.zxid, t)
    out = {z: t for z, t in txns.items() if len(seen[z]) >= quorum}
    return out, len(txns) - len(out)


def txnlog_files(data_dir):
    return sorted(glob.glob(os.path.join(data_dir, "version-2", "log.*")))


# --------------------------------------------------------------------------
# The election, rebuilt from the transactions.

class Claim:
    __slots__ = ("zxid", "time_ms", "agent", "node", "session")

    def __init__(self, zxid, time_ms, agent, node, session):
        self.zxid = zxid
        self.time_ms = time_ms
        self.agent = agent          # the id it names, None for an empty claim
        self.node = node            # the contender node the multi checked, or None
        self.session = session      # the session that wrote it


class Node:
    __slots__ = ("path", "agent", "owner", "czxid", "ctime_ms", "dzxid", "dtime_ms", "dby")

    def __init__(self, path, agent, owner, czxid, ctime_ms):
        self.path = path
        self.agent = agent
        self.owner = owner          # the session that created it (its ephemeralOwner)
        self.czxid = czxid
        self.ctime_ms = ctime_ms
        self.dzxid = None
        self.dtime_ms = None
        self.dby = None             # "own" (its session), "close" (closeSession), "other"


class Session:
    __slots__ = ("sid", "czxid", "ctime_ms", "ezxid", "etime_ms")

    def __init__(self, sid):
        self.sid = sid
        self.czxid = self.ctime_ms = None
        self.ezxid = self.etime_ms = None


def agent_of(data):
    """The agent id in a claim's or a contender's data ("id" or "id\\nvalue")."""
    if not data:
        return None
    return data.split(b"\n", 1)[0].decode(errors="replace")


class Records:
    """Claims, contender nodes and sessions of the election at `path`."""

    def __init__(self, txns, path):
        self.path = path
        self.claims = []            # in zxid order
        self.nodes = {}             # path -> Node (the latest of that path)
        self.sessions = {}          # sid -> Session
        self.txns = len(txns)
        prefix = path.rstrip("/") + "/"
        live_by_owner = collections.defaultdict(set)
        for z in sorted(txns):
            t = txns[z]
            if t.type == OP_CREATE_SESSION:
                s = self.sessions.setdefault(t.session, Session(t.session))
                s.czxid, s.ctime_ms = z, t.time_ms
                continue
            if t.type == OP_CLOSE_SESSION:
                s = self.sessions.setdefault(t.session, Session(t.session))
                if s.ezxid is None:
                    s.ezxid, s.etime_ms = z, t.time_ms
                for p in live_by_owner.pop(t.session, ()):
                    n = self.nodes[p]
                    if n.dzxid is None:
                        n.dzxid, n.dtime_ms, n.dby = z, t.time_ms, "close"
                continue
            checked = [p for typ, p, _, _ in t.ops if typ == OP_CHECK and p.startswith(prefix)]
            for typ, p, data, eph in t.ops:
                if typ == OP_CREATE and p.startswith(prefix) and "/" not in p[len(prefix):]:
                    n = Node(p, agent_of(data), t.session if eph else None, z, t.time_ms)
                    self.nodes[p] = n
                    if eph:
                        live_by_owner[t.session].add(p)
                elif typ == OP_DELETE and p in self.nodes and self.nodes[p].dzxid is None:
                    n = self.nodes[p]
                    n.dzxid, n.dtime_ms = z, t.time_ms
                    n.dby = "own" if t.session == n.owner else "other"
                    live_by_owner[n.owner].discard(p)
                elif typ == OP_SETDATA and p == path:
                    self.claims.append(Claim(z, t.time_ms, agent_of(data),
                                             checked[0] if checked else None, t.session))
        self.by_zxid = {c.zxid: c for c in self.claims}
        self._zxids = [c.zxid for c in self.claims]

    def claim_map(self):
        """{zxid: agent id} of every claim (as ZKChecker.claims)."""
        return {c.zxid: c.agent for c in self.claims}

    def next_claim(self, zxid):
        i = bisect.bisect_right(self._zxids, zxid)
        return self.claims[i] if i < len(self.claims) else None


# --------------------------------------------------------------------------
# The check.

# An operator's delete of a leader's node (chaos: delete_contender) is
# outside the lease: the agent can only learn of it from its watch, which
# comes when it comes. It must stop within this long (the bound
# test_faults.test_e_leader_node_deleted asserts); the successor's claim
# that follows such a delete is given the same allowance. Every other event
# (a later claim after the agent's own release or its session's end, its
# own release, its session's close or expiry) gets none.
FOREIGN_DELETE_NOTICE_S = 1.0
# The txn time is in whole milliseconds (System.currentTimeMillis(), cut
# down): the event happened before time_ms + 1.
MS = 0.001


def _fmt_ms(ms):
    import datetime
    return datetime.datetime.fromtimestamp(ms / 1000.0).strftime("%H:%M:%S.%f")[:-3]


def check_answers(rec, samples, starts=None, notice=FOREIGN_DELETE_NOTICE_S):
    """Judge every `is_leader: true` sample against ZooKeeper's records.

    `samples`: the StatusRecorder's (with w_start/w_end on the wall clock);
    `starts`: {agent id: [wall time each process of it was started]}, from
    the harness (optional).

    An answer with epoch e, whose request was sent at w (the earliest moment
    the agent could have composed it), is stale when, at w,
      * a later claim (zxid > e, any agent, or an empty one) was made; or
      * the node e's claim checked (the term's node) had been deleted: by
        its own session (a release) or with its session's close; by another
        session (an operator), `notice` later; or
      * that node's session had been closed (by the client, or expired); or
      * (with `starts`) the session was created before the process that
        answered was started: a term of a process that is gone.
    It also must be e's claim that names this agent, with a node of its.

    The clocks. Each transaction carries the wall clock (CLOCK_REALTIME) of
    the ZooKeeper leader when it processed the request; the recorder's
    w_start is the same clock on the same machine (a run on one host; a
    step of the clock during a run would void this). The errors go one
    way, towards not flagging a correct agent:
      * w_start is taken before the request is sent; the agent composed its
        answer later. A stale answer found this way was stale.
      * A session's expiry is decided by the leader before it processes the
        closeSession it then submits: the session was dead before the txn
        time. A release, a close or a handover is sent by the agent, which
        has stopped answering `is_leader: true` before it sends it, before
        the txn time.
      * A later claim's txn time precedes its commit by the quorum round
        (milliseconds): answers in between count as stale, although the
        claim was not committed yet. That is not an allowance a correct
        agent needs: a claim is made only after the old term's node or
        session was gone (or its holder released it), which it had to
        notice first; the one exception, an operator's delete, gets
        `notice`.
    Nothing else is allowed: no margin for the lease, whose formula this
    check does not know.

    Returns (stale, problems, figures): stale answers (grouped: one line
    per agent, epoch and cause, with the count), other problems (an epoch
    with no claim naming the agent, an answer before its claim's txn time),
    and figures."""
    stale = collections.OrderedDict()
    problems = []
    checked = 0
    no_wall = 0
    last_true = {}              # epoch -> (max w_start, agent)
    lead_in = []                # w_end - claim time, per answer (the clock sanity)
    ends = {}                   # epoch -> (end ms, cause)
    start_list = {a: sorted(v) for a, v in (starts or {}).items()}
    leaders = [s for s in samples if s.is_leader]
    for s in sorted(leaders, key=lambda s: (s.w_start or 0.0)):
        e = s.epoch
        if not isinstance(e, int) or isinstance(e, bool):
            problems.append("is_leader true without an integer epoch: %r" % (s,))
            continue
        if s.w_start is None:
            no_wall += 1
            continue
        checked += 1
        c = rec.by_zxid.get(e)
        if c is None or c.agent != s.agent:
            key = ("noclaim", s.agent, e)
            if key not in stale:
                problems.append("%s answered is_leader with epoch %#x, but the committed "
                                "transaction %#x %s" % (
                                    s.agent, e, e, "is no claim" if c is None
                                    else "names %r" % c.agent))
            stale.setdefault(key, [0, None])[0] += 1
            continue
        if s.w_end is not None and s.w_end < c.time_ms / 1000.0:
            problems.append("%s's answer with epoch %#x arrived %.3fs before the claim's txn "
                            "time: the clocks do not agree (%r)" % (
                                s.agent, e, c.time_ms / 1000.0 - s.w_end, s))
        elif s.w_end is not None:
            lead_in.append(s.w_end - c.time_ms / 1000.0)
        if e not in ends:
            ends[e] = _term_end(rec, c, notice)
            n = rec.nodes.get(c.node) if c.node else None
            if n is None or n.agent != s.agent:
                problems.append("the claim %#x naming %s checked %s, which is not a contender "
                                "node of %s in the logs" % (e, s.agent, c.node, s.agent))
        end_ms, cause, _kind, _at = ends[e]
        w = s.w_start
        prev = last_true.get(e)
        if prev is None or w > prev[0]:
            last_true[e] = (w, s.agent)
        why = None
        if end_ms is not None and w > end_ms / 1000.0 + MS:
            why = cause
        elif starts is not None and c.node in rec.nodes:
            sess = rec.sessions.get(rec.nodes[c.node].owner)
            st = start_list.get(s.agent, [])
            i = bisect.bisect_right(st, w) - 1
            if sess is not None and sess.ctime_ms is not None and i >= 0 and \
                    sess.ctime_ms / 1000.0 + MS < st[i]:
                why = ("its session %#x was created at %s, before this process of %s "
                       "was started (%s): a term of a process that is gone" % (
                           sess.sid, _fmt_ms(sess.ctime_ms), s.agent,
                           _fmt_ms(st[i] * 1000.0)))
                end_ms = st[i] * 1000.0
        if why is not None:
            key = (s.agent, e, why)
            g = stale.setdefault(key, [0, s, end_ms])
            g[0] += 1
    out = []
    n_stale = 0
    for key, g in stale.items():
        if key[0] == "noclaim":
            continue
        aid, e, why = key
        n, first, end_ms = g
        n_stale += n
        out.append("%s answered is_leader true with epoch %#x %d time(s), the first sent at "
                   "%s, %.0f ms after %s" % (aid, e, n, _fmt_ms(first.w_start * 1000.0),
                                            first.w_start * 1000.0 - end_ms, why))
    # Margins: the last true answer of each term against the txn time of the
    # event that ended it (positive: the agent had stopped; negative: after
    # it, stale unless within an operator's delete's allowance).
    margins = collections.defaultdict(list)
    for e, (w, _aid) in last_true.items():
        end_ms, _cause, kind, at_ms = ends.get(e, (None, None, None, None))
        if end_ms is not None:
            margins[kind].append(at_ms / 1000.0 - w)
    fig = {
        "answers_checked": checked,
        "answers_without_wall_clock": no_wall,
        "terms": len(last_true),
        "stale_answers": n_stale,
        "stale_groups": len(out),
        "claims": len(rec.claims),
        "sessions": len(rec.sessions),
        "nodes": len(rec.nodes),
        "min_claim_to_answer_ms": min(lead_in) * 1000.0 if lead_in else None,
        "margins": {k: (min(v), sorted(v)[len(v) // 2], len(v)) for k, v in margins.items()},
        "margin_values": {k: list(v) for k, v in margins.items()},
    }
    return out, problems, fig


def _term_end(rec, c, notice):
    """(ms, cause, kind, at) of the first event that ends the term of claim
    `c`: the time after which an answer is stale (on the wall clock, with
    the allowance the event gets), what it was, its kind, and its txn time;
    or Nones."""
    cands = []                  # (deadline, cause, kind, txn time)
    nxt = rec.next_claim(c.zxid)
    n = rec.nodes.get(c.node) if c.node else None
    foreign = n is not None and n.dby == "other"
    if nxt is not None:
        cands.append((nxt.time_ms + (notice * 1000.0 if foreign and
                                     n.dtime_ms <= nxt.time_ms else 0.0),
                      "a later claim %#x (naming %s) at %s" % (
                          nxt.zxid, nxt.agent or "nobody", _fmt_ms(nxt.time_ms)), "claim",
                      nxt.time_ms))
    if n is not None:
        if n.dzxid is not None and n.dby != "close":   # a close: the session's, below
            if n.dby == "own":
                what = "its node %s was deleted by its own session (%#x) at %s"
            else:
                what = "its node %s was deleted by another session (%#x) at %s"
            cands.append((n.dtime_ms + (notice * 1000.0 if n.dby == "other" else 0.0),
                          what % (n.path.rsplit("/", 1)[-1], n.dzxid, _fmt_ms(n.dtime_ms)),
                          "delete-" + n.dby, n.dtime_ms))
        sess = rec.sessions.get(n.owner)
        if sess is not None and sess.ezxid is not None:
            cands.append((sess.etime_ms, "its session %#x was closed or expired (%#x) at %s" % (
                sess.sid, sess.ezxid, _fmt_ms(sess.etime_ms)), "session", sess.etime_ms))
    if not cands:
        return None, None, None, None
    return min(cands, key=lambda x: x[0])
