# SPDX-License-Identifier: MIT
"""The chaos run's stale-answer check (zkrecords.py) on synthetic records:
txn log files written here in ZooKeeper's format, and recorder samples made
up to fall just before or just after each event. No ZooKeeper, no agent;
it runs in well under a second.

The story, times in ms after W (wall clock):
    0  a1 opens session S1;   5  creates node N1 (data a1)
   10  a1 claims (check N1, set election node "a1"): epoch E1
   20  a2 opens session S2;  25  creates node N2 (data a2)
 1000  S1 expires (closeSession by the ZooKeeper leader)
 1010  a2 claims (check N2): epoch E2
 2000  a2 hands over to nobody: one multi deleting N2, empty claim
 3000  a3 opens S3, creates N3, claims E3 at 3010
 4000  an operator (session S9) deletes N3
 9000  S2 closes
plus one uncommitted claim for a1 that only one server logged.
"""

import struct

import pytest

import zkrecords as zr
from zkharness import Sample

PATH = "/zkelect/t"
W = 1_800_000_000_000           # ms
S1, S2, S3, S9 = 0x101, 0x102, 0x103, 0x109


def jstr(b):
    if b is None:
        return struct.pack(">i", -1)
    if isinstance(b, str):
        b = b.encode()
    return struct.pack(">i", len(b)) + b


def create(path, data, eph=True):
    acl = struct.pack(">i", 1) + struct.pack(">i", 31) + jstr("world") + jstr("anyone")
    return 1, jstr(path) + jstr(data) + acl + (b"\x01" if eph else b"\x00") + \
        struct.pack(">i", 3)


def delete(path):
    return 2, jstr(path)


def setdata(path, data):
    return 5, jstr(path) + jstr(data) + struct.pack(">i", -1)


def check(path):
    return 13, jstr(path) + struct.pack(">i", -1)


def multi(*ops):
    body = struct.pack(">i", len(ops))
    for typ, b in ops:
        body += struct.pack(">i", typ) + jstr(b)
    return 14, body


def record(sid, zxid, t, op):
    typ, body = op
    rec = struct.pack(">qiqqi", sid, 0, zxid, W + t, typ) + body
    return struct.pack(">qi", 0, len(rec)) + rec + b"B"


def logfile(tmp_path, name, records):
    p = tmp_path / name / "version-2"
    p.mkdir(parents=True)
    hdr = b"ZKLG" + struct.pack(">iq", 2, 0)
    (p / "log.1").write_bytes(hdr + b"".join(records) + b"\0" * 64)
    return str(tmp_path / name)


N1, N2, N3 = (PATH + "/_c_%d-latch-000000000%d" % (i, i) for i in (1, 2, 3))
E1, E2, E3 = 0x10000003, 0x10000007, 0x1000000c
EX = 0x10000009                 # the uncommitted claim


def committed(tmp_path):
    recs = [
        record(S1, 0x10000001, 0, (-10, struct.pack(">i", 3000))),
        record(S1, 0x10000002, 5, create(N1, "a1")),
        record(S1, E1, 10, multi(check(N1), setdata(PATH, "a1"))),
        record(S2, 0x10000004, 20, (-10, struct.pack(">i", 3000))),
        record(S2, 0x10000005, 25, create(N2, "a2")),
        record(S1, 0x10000006, 1000, (-11, struct.pack(">i", 0))),
        record(S2, E2, 1010, multi(check(N2), setdata(PATH, "a2"))),
        record(S2, 0x10000008, 2000, multi(delete(N2), setdata(PATH, ""))),
        record(S3, 0x1000000a, 3000, (-10, struct.pack(">i", 3000))),
        record(S3, 0x1000000b, 3005, create(N3, "a3")),
        record(S3, E3, 3010, multi(check(N3), setdata(PATH, "a3"))),
        record(S9, 0x1000000d, 4000, delete(N3)),
        record(S2, 0x1000000e, 9000, (-11, struct.pack(">i", 0))),
    ]
    stray = record(S1, EX, 1500, multi(check(N1), setdata(PATH, "a1")))
    # Servers 1 and 2 logged everything; server 3 only the uncommitted claim
    # (a paused ZooKeeper leader's proposal nobody acknowledged).
    dirs = [logfile(tmp_path, "zk1", recs), logfile(tmp_path, "zk2", recs),
            logfile(tmp_path, "zk3", [stray])]
    txns, dropped = zr.read_txnlogs([zr.txnlog_files(d) for d in dirs], 2)
    return zr.Records(txns, PATH), dropped


def ans(agent, epoch, t_ms, lat_ms=2.0):
    """An is_leader true answer whose request was sent at W + t_ms."""
    s = Sample(agent, 0.0, 0.0, True, True, epoch, "leader")
    s.w_start = (W + t_ms) / 1000.0
    s.w_end = s.w_start + lat_ms / 1000.0
    return s


def test_records_rebuilt(tmp_path):
    rec, dropped = committed(tmp_path)
    assert dropped == 1, "the claim only one server logged must not count"
    assert [(c.zxid, c.agent, c.node) for c in rec.claims] == [
        (E1, "a1", N1), (E2, "a2", N2), (0x10000008, None, None), (E3, "a3", N3)]
    assert rec.nodes[N1].dby == "close" and rec.nodes[N1].dtime_ms == W + 1000
    assert rec.nodes[N2].dby == "own" and rec.nodes[N3].dby == "other"
    assert rec.sessions[S1].etime_ms == W + 1000 and rec.sessions[S3].etime_ms is None


@pytest.mark.parametrize("agent,epoch,t_ms,why", [
    ("a1", E1, 998, None),                  # before its session expired
    ("a1", E1, 1002, "its session"),        # after (the ms of the txn time is whole)
    ("a1", E1, 1000.5, None),               # within the txn time's millisecond
    ("a2", E2, 1999, None),
    ("a2", E2, 2002, "0x10000008"),         # after its own release (the node and the claim)
    ("a3", E3, 4500, None),                 # an operator's delete: notice allowed
    ("a3", E3, 5002, "its node"),           # ... for FOREIGN_DELETE_NOTICE_S only
])
def test_stale_rules(tmp_path, agent, epoch, t_ms, why):
    rec, _ = committed(tmp_path)
    stale, problems, fig = zr.check_answers(rec, [ans(agent, epoch, t_ms)])
    assert not problems, problems
    if why is None:
        assert not stale, stale
    else:
        assert len(stale) == 1 and why in stale[0], stale
        assert fig["stale_answers"] == 1


def test_later_claim(tmp_path):
    # a1's session lives on in this variant: only E2 ends its term.
    rec, _ = committed(tmp_path)
    rec.sessions[S1].etime_ms = rec.sessions[S1].ezxid = None
    rec.nodes[N1].dzxid = rec.nodes[N1].dtime_ms = rec.nodes[N1].dby = None
    stale, _, _ = zr.check_answers(rec, [ans("a1", E1, 1008), ans("a1", E1, 1012)])
    assert len(stale) == 1 and "a later claim 0x10000007" in stale[0], stale


def test_ride_through_is_not_stale(tmp_path):
    # Answers all along a term with no event: nothing to say, whatever the
    # agent's server did meanwhile (nothing of it is in the records).
    rec, _ = committed(tmp_path)
    samples = [ans("a2", E2, t) for t in range(1015, 1999, 20)]
    stale, problems, fig = zr.check_answers(rec, samples)
    assert not stale and not problems
    assert fig["answers_checked"] == len(samples) and fig["terms"] == 1


def test_restarted_process(tmp_path):
    rec, _ = committed(tmp_path)
    starts = {"a2": [(W - 100) / 1000.0, (W + 1500) / 1000.0]}
    stale, _, _ = zr.check_answers(rec, [ans("a2", E2, 1400), ans("a2", E2, 1600)],
                                   starts=starts)
    assert len(stale) == 1 and "a process that is gone" in stale[0], stale


def test_epoch_problems(tmp_path):
    rec, _ = committed(tmp_path)
    _, problems, _ = zr.check_answers(rec, [ans("a1", E2, 1500), ans("a1", EX, 1600)])
    assert len(problems) == 2, problems
    # An answer that arrived before its claim's txn time: the clocks disagree.
    _, problems, _ = zr.check_answers(rec, [ans("a1", E1, 5, lat_ms=1)])
    assert len(problems) == 1 and "clocks" in problems[0], problems
