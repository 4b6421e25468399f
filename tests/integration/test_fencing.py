# SPDX-License-Identifier: MIT
"""Fencing end to end (README "Fencing: the part you must do", doc/design.md rule 13).

The agent can only narrow the window in which a paused leader still believes
it leads; the resource closes it by checking the epoch. Here two copies of
examples/fenced-writer.py, each beside its own zkelectd, write to one SQLite
database through the conditional write

    UPDATE fence SET epoch = :e WHERE name = 'demo' AND epoch <= :e
    (and only then) INSERT INTO ledger(writer, epoch, seq) ...

and the seed fault (scenario 1: the leader SIGSTOPped past its lease and
session) is played with the classic pause: the leader's app has already read
is_leader=true with epoch E and is frozen (app *and* agent) before its write;
a successor leads with E' > E and writes; the old app wakes and tries its
write with E. The database must refuse it.
"""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

from zkharness import SLOW, poll  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FENCED_WRITER = os.path.join(ROOT, "examples", "fenced-writer.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

LINE_RE = re.compile(r"^(\w[\w ]*?): (?:stale epoch )?(.*)$")


class App:
    """One fenced-writer process; its stdout lines are collected with the
    monotonic time they were read."""

    def __init__(self, workdir, name, sock, db, extra=()):
        self.name = name
        self.log_path = os.path.join(workdir, "%s.out" % name)
        self.argv = [PYTHON, FENCED_WRITER, "--socket", sock, "--db", db,
                     "--writer", name, "--interval", "30ms"] + list(extra)
        self.lines = []          # (t_read, kind, {key: value}, raw)
        self._cv = threading.Condition()
        self._err = open(os.path.join(workdir, "%s.err" % name), "wb")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self._err,
                                     text=True, start_new_session=True)
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        with open(self.log_path, "w") as log:
            for raw in self.proc.stdout:
                t = time.monotonic()
                raw = raw.rstrip("\n")
                log.write("%.6f %s\n" % (t, raw))
                log.flush()
                m = LINE_RE.match(raw)
                kind, kv = (m.group(1), dict(p.split("=", 1) for p in m.group(2).split()
                                             if "=" in p)) if m else ("?", {})
                with self._cv:
                    self.lines.append((t, kind, kv, raw))
                    self._cv.notify_all()

    def events(self, kind):
        with self._cv:
            return [x for x in self.lines if x[1] == kind]

    def wait_line(self, kind, timeout, pred=lambda kv: True, what=None):
        def probe():
            if self.proc.poll() is not None and not self._t.is_alive():
                ev = [x for x in self.events(kind) if pred(x[2])]
                if ev:
                    return ev[0]
                raise AssertionError("%s exited %s before printing %s; output:\n%s\n"
                                     "stderr:\n%s" % (self.name, self.proc.returncode, kind,
                                                      self.text(), self.stderr()))
            ev = [x for x in self.events(kind) if pred(x[2])]
            return ev[0] if ev else None
        return poll(probe, timeout, interval=0.02,
                    what=what or "%s to print %r" % (self.name, kind))

    def stderr(self):
        self._err.flush()
        with open(self._err.name, errors="replace") as f:
            return f.read()[-4000:]

    def text(self):
        with self._cv:
            return "\n".join("%.3f %s" % (x[0], x[3]) for x in self.lines[-60:])

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout * SLOW)
        finally:
            self._t.join(5)
            self._err.close()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(15)
        self._t.join(5)
        if not self._err.closed:
            self._err.close()


def ledger(db_path):
    with sqlite3.connect(db_path, timeout=10) as db:
        rows = db.execute("SELECT id, writer, epoch, seq FROM ledger ORDER BY id").fetchall()
        fence = db.execute("SELECT epoch FROM fence WHERE name = 'demo'").fetchone()
    return rows, (fence[0] if fence else None)


def test_fenced_writer_unit(tmp_path):
    """The conditional write on its own: equal and higher epochs land,
    a lower one is refused and leaves nothing behind."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("fenced_writer", FENCED_WRITER)
    fw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fw)
    db = fw.open_db(str(tmp_path / "u.db"))
    assert fw.fenced_write(db, "x", 10, 1)[0] is True
    assert fw.fenced_write(db, "x", 10, 2)[0] is True          # same term, next write
    assert fw.fenced_write(db, "y", 2 ** 40, 1)[0] is True     # a newer leader
    ok, fence = fw.fenced_write(db, "x", 10, 3)                 # the stale one
    assert ok is False and fence == 2 ** 40
    assert not db.in_transaction
    db.close()
    rows, fence = ledger(str(tmp_path / "u.db"))
    assert [(r[1], r[2], r[3]) for r in rows] == [("x", 10, 1), ("x", 10, 2), ("y", 2 ** 40, 1)]
    assert fence == 2 ** 40


def test_writer_waits_for_another_writers_lock_at_start(tmp_path):
    """Two copies of the example starting on a new database race to switch it
    to WAL. SQLite does not wait for that switch: a copy that meets another
    one's write lock gets "database is locked" at once, and the example died
    of it (seen in CI as an app that exited 1 before its first line). Here the
    other copy is the test, holding a write transaction on a new database
    while the example starts: it must wait for the lock and come up."""
    db = str(tmp_path / "fence.db")
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("CREATE TABLE IF NOT EXISTS fence (name TEXT PRIMARY KEY, epoch INTEGER NOT NULL)")
    other.execute("BEGIN IMMEDIATE")
    p = subprocess.Popen([PYTHON, FENCED_WRITER, "--socket", str(tmp_path / "none.sock"),
                          "--db", db, "--writer", "w", "--interval", "20ms"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        def opened():
            if p.poll() is not None:
                return True
            try:
                return any(os.readlink("/proc/%d/fd/%s" % (p.pid, fd)) == db
                           for fd in os.listdir("/proc/%d/fd" % p.pid))
            except OSError:
                return False
        poll(opened, 20, what="the example to open the database")
        # Keep the lock a while longer: the switch to WAL comes right after
        # the open, and it used to fail at once.
        try:
            p.wait(0.5)
        except subprocess.TimeoutExpired:
            pass
        other.execute("COMMIT")
        line = p.stdout.readline()
        assert line.startswith("role: ") and "role=unreachable" in line, \
            "the example exited %s before its first line:\n%s" % (p.wait(10), p.stderr.read())
    finally:
        other.close()
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(10 * SLOW)
        p.stdout.close()
        p.stderr.close()
    assert rc == 0
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert c.execute("SELECT epoch FROM fence WHERE name = 'demo'").fetchone() == (0,)


def test_paused_leader_write_is_refused(agents, observer, election, recorder, tmp_path):
    db_path = str(tmp_path / "fence.db")
    apps = []
    try:
        recorder.start()
        a1 = agents.new("a1")
        a1.wait_for(lambda s: s["is_leader"] is True, 20, what="a1 leads alone")
        a2 = agents.new("a2")
        a2.wait_for(lambda s: s["role"] == "follower" and s["leader"] is not None
                    and s["leader"]["id"] == "a1", 20, what="a2 follows a1")

        # app1 beside the leader: its 4th write attempt is held until SIGUSR1.
        app1 = App(agents.dir, "app1", a1.socket, db_path,
                   ["--pause-before-write", "signal", "--pause-at", "4"])
        apps.append(app1)
        app2 = App(agents.dir, "app2", a2.socket, db_path)
        apps.append(app2)

        held = app1.wait_line("holding", 20, what="app1 to hold its 4th write")
        e1 = int(held[2]["epoch"])
        held_seq = int(held[2]["seq"])
        assert held_seq == 4
        assert e1 == a1.status()["epoch"], "app1 holds the epoch a1 reports"
        assert len(app1.events("wrote")) == 3, app1.text()
        assert app2.events("wrote") == [], "app2 wrote while a2 followed:\n" + app2.text()

        # The classic pause: the app has read is_leader=true with epoch e1 and
        # is frozen before its write, together with its agent.
        t_pause = time.monotonic()
        app1.signal(signal.SIGSTOP)
        a1.pause()

        # The successor leads once a1's session has expired, and its app writes.
        a2.wait_for(lambda s: s["is_leader"] is True, 30,
                    what="a2 to lead while a1 is stopped")
        t_succ = time.monotonic()
        w2 = app2.wait_line("wrote", 20, what="app2 to write as the new leader")
        e2 = int(w2[2]["epoch"])
        assert e2 > e1, "successor epoch %d not above %d" % (e2, e1)
        data, stat = observer.election_node(election)
        assert data == "a2" and stat.mzxid == e2
        poll(lambda: len(app2.events("wrote")) >= 3, 20, what="app2 to write 3 rows")
        # The stopped leader's node is gone (its session expired): its belief is stale.
        assert [c[1] for c in observer.contenders(election)] == ["a2"]

        # Wake the old leader and its app, then let the held write go.
        a1.resume()
        app1.signal(signal.SIGCONT)
        t_resume = time.monotonic()
        n2_before = len(app2.events("wrote"))
        assert a2.is_leader(), "a2 must still lead when the stale write is tried"
        app1.signal(signal.SIGUSR1)
        ref = app1.wait_line("refused", 20, what="app1 to print 'refused: stale epoch'")
        assert "refused: stale epoch" in ref[3]
        assert int(ref[2]["epoch"]) == e1 and int(ref[2]["seq"]) == held_seq
        assert int(ref[2]["fence"]) >= e2

        # The new leader's writes keep landing after the refusal.
        poll(lambda: len(app2.events("wrote")) >= n2_before + 3, 20,
             what="app2 to keep writing after the refusal")
        # The old agent comes back as a follower of a2; app1 stops trying.
        a1.wait_for(lambda s: s["role"] == "follower" and s["leader"] is not None
                    and s["leader"]["id"] == "a2", 30, what="a1 to follow a2 after waking")

        for app in apps:
            rc = app.stop()
            assert rc == 0, "%s exited %s:\n%s" % (app.name, rc, app.text())
        recorder.stop()

        rows, fence = ledger(db_path)
        assert rows, "empty ledger"
        epochs = [r[2] for r in rows]
        assert all(x <= y for x, y in zip(epochs, epochs[1:])), \
            "ledger epochs go back in commit order: %r" % rows
        assert (("app1", e1, held_seq) not in [(r[1], r[2], r[3]) for r in rows]), \
            "the stale write landed"
        app1_rows = [r for r in rows if r[1] == "app1"]
        app2_rows = [r for r in rows if r[1] == "app2"]
        assert [(r[2], r[3]) for r in app1_rows] == [(e1, 1), (e1, 2), (e1, 3)], app1_rows
        assert app2_rows and all(r[2] == e2 for r in app2_rows), app2_rows
        assert max(r[0] for r in app1_rows) < min(r[0] for r in app2_rows), \
            "an app1 row was committed after app2's first row: %r" % rows
        assert fence == e2
        # Every ledger row matches a "wrote" line of its app, and nothing else.
        for app, rs in ((app1, app1_rows), (app2, app2_rows)):
            wrote = [(int(x[2]["epoch"]), int(x[2]["seq"]), int(x[2]["id"]))
                     for x in app.events("wrote")]
            assert wrote == [(r[2], r[3], r[0]) for r in rs], (app.name, wrote, rs)
        assert len(app1.events("refused")) == 1, app1.text()
        assert app2.events("refused") == [], app2.text()

        v = recorder.violations()
        assert not v, "\n".join(v)
        print("fencing: e1=%#x e2=%#x; successor after %.0f ms of pause; app1 woke %.1f s "
              "after pausing; ledger %d rows (app1 %d, app2 %d); stale write refused"
              % (e1, e2, (t_succ - t_pause) * 1000, t_resume - t_pause, len(rows),
                 len(app1_rows), len(app2_rows)))
    finally:
        for app in apps:
            app.kill()
