#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""fenced-writer: an app that writes only while its zkelect agent says it
leads, and lets the database refuse a stale leader (Python 3 stdlib only).

Loop:
  1. GET /v1/status from the agent over its Unix socket (1 s timeout; no
     answer, an error or a refused socket all count as "not leader").
  2. If is_leader is true (and lease_remaining_ms > 0), keep that answer's
     epoch E and write one ledger row, fenced by E, in one SQLite transaction:

        UPDATE fence SET epoch = :e WHERE name = 'demo' AND epoch <= :e;
        -- only if that updated a row:
        INSERT INTO ledger(writer, epoch, seq) VALUES (:w, :e, :seq);
        COMMIT

     If the UPDATE matched no row, a newer leader has written with a higher
     epoch: roll back and log "refused: stale epoch".

Between step 1 and step 2 a real app can be paused for any length of time
(GC, a frozen VM, SIGSTOP). --pause-before-write reproduces that pause on
purpose, so the refusal can be demonstrated (tests/integration/test_fencing.py):

  --pause-before-write 800ms   hold the fetched status 800 ms before writing
  --pause-before-write signal  hold it until SIGUSR1 arrives
  --pause-at N                 hold only before the N-th write attempt
                               (default: before every attempt)

Every event is one line on stdout, flushed:
  wrote: writer=W epoch=E seq=S id=ROWID
  holding: writer=W epoch=E seq=S until=SIGUSR1|<ms>ms
  refused: stale epoch writer=W epoch=E seq=S fence=F
  role: writer=W role=R is_leader=B epoch=E       (when the agent's answer changes)
SIGTERM or SIGINT ends the loop after the current step; exit status 0.
"""

import argparse
import http.client
import json
import signal
import socket
import sqlite3
import sys
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS fence (
    name  TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL
);
INSERT OR IGNORE INTO fence(name, epoch) VALUES ('demo', 0);
CREATE TABLE IF NOT EXISTS ledger (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,  -- commit order
    writer     TEXT    NOT NULL,
    epoch      INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    written_at REAL    NOT NULL DEFAULT (julianday('now'))
);
"""


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def agent_status(sock_path, timeout):
    """The agent's /v1/status document, or None (= not leader)."""
    conn = UnixHTTPConnection(sock_path, timeout)
    try:
        conn.request("GET", "/v1/status")
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            return None
        doc = json.loads(body)
        return doc if isinstance(doc, dict) else None
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()


def open_db(path, timeout=10.0):
    # isolation_level=None: no implicit transactions; we BEGIN ourselves.
    db = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    # Switching a new database to WAL does not wait for a lock held by
    # another writer doing the same at that moment: it fails at once with
    # "database is locked". Try again until the timeout.
    deadline = time.monotonic() + timeout
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
    db.executescript(SCHEMA)
    return db


def fenced_write(db, writer, epoch, seq):
    """One transaction: move the fence to `epoch` unless a higher epoch is
    already there, and only then insert the ledger row. Returns
    (True, rowid) or (False, current fence epoch)."""
    db.execute("BEGIN IMMEDIATE")   # take the write lock now: writers serialise
    try:
        cur = db.execute(
            "UPDATE fence SET epoch = :e WHERE name = 'demo' AND epoch <= :e",
            {"e": epoch})
        if cur.rowcount != 1:
            fence = db.execute("SELECT epoch FROM fence WHERE name = 'demo'").fetchone()[0]
            db.execute("ROLLBACK")
            return False, fence
        cur = db.execute(
            "INSERT INTO ledger(writer, epoch, seq) VALUES (:w, :e, :s)",
            {"w": writer, "e": epoch, "s": seq})
        rowid = cur.lastrowid
        db.execute("COMMIT")
        return True, rowid
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def parse_ms(text):
    t = text.strip()
    for suffix, mul in (("ms", 1), ("s", 1000)):
        if t.endswith(suffix):
            return float(t[:-len(suffix)]) * mul
    return float(t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True, help="the agent's Unix socket")
    ap.add_argument("--db", required=True, help="SQLite database file")
    ap.add_argument("--writer", required=True, help="this app's name in the ledger")
    ap.add_argument("--interval", default="50ms", help="loop period (default 50ms)")
    ap.add_argument("--count", type=int, default=0,
                    help="stop after this many written rows (0: run until SIGTERM)")
    ap.add_argument("--pause-before-write", default=None, metavar="MS|signal",
                    help="hold a fetched leader status this long (or until SIGUSR1) "
                         "before writing")
    ap.add_argument("--pause-at", type=int, default=0, metavar="N",
                    help="hold only before the N-th write attempt (default: every one)")
    ap.add_argument("--status-timeout", default="1s")
    args = ap.parse_args(argv)

    interval = parse_ms(args.interval) / 1000.0
    status_timeout = parse_ms(args.status_timeout) / 1000.0
    pause_signal = args.pause_before_write == "signal"
    pause_ms = None
    if args.pause_before_write is not None and not pause_signal:
        pause_ms = parse_ms(args.pause_before_write)

    stopping = []

    def on_term(signum, frame):
        stopping.append(signum)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    # SIGUSR1 stays blocked and is consumed with sigtimedwait while holding.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

    def out(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    db = open_db(args.db)
    seq = 0          # write attempts by this writer (also the ledger's seq)
    written = 0
    last_view = None
    while not stopping:
        st = agent_status(args.socket, status_timeout)
        leading = (st is not None and st.get("is_leader") is True
                   and isinstance(st.get("epoch"), int)
                   and st.get("lease_remaining_ms", 0) > 0)
        view = (st.get("role") if st else "unreachable", leading,
                st.get("epoch") if leading else None)
        if view != last_view:
            out("role: writer=%s role=%s is_leader=%s epoch=%s"
                % (args.writer, view[0], str(leading).lower(), view[2]))
            last_view = view
        if leading:
            epoch = st["epoch"]
            seq += 1
            if (pause_signal or pause_ms is not None) and args.pause_at in (0, seq):
                # Drop a stale SIGUSR1 so only one sent from now on releases us.
                while signal.sigtimedwait([signal.SIGUSR1], 0) is not None:
                    pass
                out("holding: writer=%s epoch=%d seq=%d until=%s"
                    % (args.writer, epoch, seq,
                       "SIGUSR1" if pause_signal else "%gms" % pause_ms))
                if pause_signal:
                    while not stopping and signal.sigtimedwait([signal.SIGUSR1], 0.2) is None:
                        pass
                    if stopping:
                        break
                else:
                    time.sleep(pause_ms / 1000.0)
                    if stopping:
                        break
            ok, what = fenced_write(db, args.writer, epoch, seq)
            if ok:
                written += 1
                out("wrote: writer=%s epoch=%d seq=%d id=%d" % (args.writer, epoch, seq, what))
                if args.count and written >= args.count:
                    break
            else:
                out("refused: stale epoch writer=%s epoch=%d seq=%d fence=%d"
                    % (args.writer, epoch, seq, what))
        time.sleep(interval)
    db.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
