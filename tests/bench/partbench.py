# SPDX-License-Identifier: MIT
"""What the partition benchmarks at scale share (partitions_scale.py,
partitions_kazoo.py): two sides behind one interface, so that zkelect and
its reference, kazoo's SetPartitioner, are started, stopped, settled and
measured by the same code.

A side owns K members (ZkelectSide: zkelectd agents; KazooSide: processes of
kazoo_partitioner.py) on one ZooKeeper path and can:

    start(m), term(m) (SIGTERM), kill(m) (SIGKILL), wait_exit(m, timeout)
    quick(live)       a cheap look: None unless the live members look settled
    full(live, q)     the exact check: ({partition: owner id}, same) or
                      (None, False); `same` says nothing changed since quick
    describe(live)    one line on where each member stands, for a timeout
    sessions(live)    {member id: ZooKeeper session id}
    member_ctime(m)   ctime (ms) of m's node in the membership (the party)
    log_counts()      counts of the log lines the benchmark reports
    deaths            members that exited without being told to

"Settled" is partharness.settled's definition on both sides: every live
member counts the live members, owns exactly what it is assigned (zkelect)
or has acquired its whole share (kazoo), the shares are floor/ceil of P/K
and every partition has one owner. zkelect's cheap look reads
`/v1/status` (counts only); when the counts add up, every agent's
`/v1/partitions` is read, and when each agent's `index` (which grows on any
change of what it owns, leads, is assigned or counts) is the one the cheap
look saw, the settled state held already at the end of the cheap look, and
that is the time taken; otherwise the end of the exact check is.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import benchlib as bl
from benchlib import BenchAgentSet, four_letter

import partharness as ph
from zkharness import Observer

CLK_TCK = os.sysconf("SC_CLK_TCK")
KAZOO_MEMBER = os.path.join(bl.HERE, "kazoo_partitioner.py")
CONS_RE = re.compile(r"\[\d+\]\((.*)\)")

# What the scale table counts in the agents' logs (substrings of a line):
# a partition's lease lapsed; a term refused for slow round trips; the
# watchdog's warning that the event loop did not run for T/4, and its kill
# at T/2; a connection kicked.
LOG_MARKS = (("lapsed", "lease lapsed"),
             ("too_little", "too little lease"),
             ("stalls", "the agent is killed"),
             ("watchdog_kills", "killing the agent"),
             ("kicks", "moving to another server"))


def duration_s(text):
    """'2s', '1500ms', '2' -> seconds (float)."""
    t = text.strip()
    if t.endswith("ms"):
        return float(t[:-2]) / 1000.0
    if t.endswith("s"):
        return float(t[:-1])
    return float(t)


# --------------------------------------------------------------------------
# /proc and ZooKeeper's counters

def cpu_ticks(pid):
    """utime + stime of every thread, in clock ticks (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def per_thread(pid, name, value):
    """value(text) of /proc/PID/task/*/NAME, summed over the threads (a
    thread gone meanwhile, or a file that does not parse, counts 0)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/%s" % (pid, tid, name)) as f:
                total += value(f.read())
        except (OSError, ValueError, IndexError):
            pass
    return total


def cpu_ns(pid):
    """On-CPU time of every thread in ns (/proc/PID/task/*/schedstat)."""
    return per_thread(pid, "schedstat", lambda t: int(t.split()[0]))


def wakes(pid):
    """Times any thread of pid went to sleep and was woken again
    (voluntary context switches, /proc/PID/task/*/status), summed."""
    return per_thread(pid, "status", lambda t: int(
        t.split("\nvoluntary_ctxt_switches:", 1)[1].split()[0]))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cons(zk):
    """{session id (int): packets received} from `cons`."""
    out = four_letter(zk.host, zk.port, "cons", timeout=10.0) or ""
    d = {}
    for line in out.splitlines():
        m = CONS_RE.search(line)
        if not m:
            continue
        kv = dict(p.split("=", 1) for p in m.group(1).split(",") if "=" in p)
        if "sid" in kv:
            d[int(kv["sid"], 16)] = int(kv.get("recved", 0))
    return d


def loadavg():
    return os.getloadavg()[0]


def wait_load(limit, timeout=900):
    """With a limit, wait (up to `timeout` s) until the 1-minute load
    average is below it, so that each row or run starts on a quiet machine.
    Returns the load average it starts at."""
    if limit:
        deadline = time.monotonic() + timeout
        while loadavg() >= limit and time.monotonic() < deadline:
            time.sleep(5)
    return loadavg()


# --------------------------------------------------------------------------
# Settling and moving

class Settle:
    """The outcome of one wait: ok, seconds from the clock's start, the
    owner map, the wall-clock time (time.time()) it was seen, or a note."""

    def __init__(self, ok, secs=None, owners=None, wall=None, note=""):
        self.ok, self.secs, self.owners, self.wall, self.note = ok, secs, owners, wall, note

    def fmt(self, digits=2):
        if not self.ok:
            return "FAILED (%s)" % self.note
        return "%.*f s" % (digits, self.secs)

    def __repr__(self):
        return "<Settle %s>" % self.fmt(3)


def wait_settled(side, live, t0, timeout, interval):
    """Poll until `live` are settled; the clock runs from t0 (monotonic).
    A member of `live` that exits ends the wait: not an exception, a note."""
    deadline = t0 + timeout
    while True:
        dead = side.check_deaths(live)
        if dead:
            return Settle(False, note="%s exited (%s)" % (
                ", ".join(m.id for m in dead), side.death_text(dead)))
        q = side.quick(live)
        tq, wq = time.monotonic(), time.time()
        if q is not None:
            owners, same = side.full(live, q)
            if owners is not None:
                if not same:
                    tq, wq = time.monotonic(), time.time()
                return Settle(True, tq - t0, owners, wq)
        if time.monotonic() >= deadline:
            return Settle(False, note="not settled within %g s: %s" % (
                timeout, side.describe(live)))
        time.sleep(interval)


def wait_quiet(zk, pids, t0, calm_for, per_agent=10.0, step=0.5, limit=60.0):
    """Once ZooKeeper's packets received, sampled every `step` s, stay at
    `per_agent` a second or fewer per pid for `calm_for` s: the seconds from
    t0 (monotonic) to the first calm sample, the CPU seconds (utime+stime)
    of ZooKeeper and of the pids together then, and ZooKeeper's packets
    received by then (since it started). None after `limit` s."""
    def sample():
        return (time.monotonic(), bl.mntr(zk)["zk_packets_received"],
                cpu_ticks(zk.proc.pid) / CLK_TCK,
                sum(cpu_ticks(p) for p in pids) / CLK_TCK)
    deadline = time.monotonic() + limit
    last, first_calm = sample(), None
    while time.monotonic() < deadline:
        time.sleep(step)
        now = sample()
        if now[1] - last[1] <= per_agent * len(pids) * (now[0] - last[0]):
            first_calm = first_calm or last
            if now[0] - first_calm[0] >= calm_for:
                return (first_calm[0] - t0, first_calm[2], first_calm[3],
                        first_calm[1])
        else:
            first_calm = None
        last = now
    return None


def moved(before, after):
    """Partitions whose owner differs between two owner maps."""
    return sorted(p for p, o in after.items() if before.get(p) != o)


def steady(zk, side, live, quiet, window):
    """At steady state (the caller saw `live` settled): `quiet` s, then a
    window of `window` s with nothing done: ZooKeeper packets (mntr's
    zk_packets_received over the window, and each member's session from
    `cons` after `crst`), CPU (utime+stime, schedstat) and VmRSS of each
    member, and its threads' wakeups (voluntary context switches) a second.
    Whether they were still settled at the end."""
    sids = side.sessions(live)
    bl.quiet(quiet)
    c0 = {m.id: (cpu_ticks(m.pid), cpu_ns(m.pid), time.monotonic(), wakes(m.pid))
          for m in live}
    m0 = bl.mntr(zk)["zk_packets_received"]
    four_letter(zk.host, zk.port, "crst", timeout=10.0)
    t0 = time.monotonic()
    time.sleep(window)
    c = cons(zk)
    secs = time.monotonic() - t0
    m1 = bl.mntr(zk)["zk_packets_received"]
    c1 = {m.id: (cpu_ticks(m.pid), cpu_ns(m.pid), time.monotonic(), wakes(m.pid))
          for m in live}
    rss = {m.id: rss_kib(m.pid) for m in live}
    out = {"secs": secs, "mntr": (m1 - m0) / len(live) / secs,
           "cons": {mid: c.get(sid, 0) / secs for mid, sid in sids.items()},
           "cpu_stat": {}, "cpu_ns": {}, "wakes": {}, "rss": rss,
           "still": side.quick(live) is not None and not side.check_deaths(live)}
    for m in live:
        a, b = c0[m.id], c1[m.id]
        wall = b[2] - a[2]
        out["cpu_stat"][m.id] = 100.0 * (b[0] - a[0]) / CLK_TCK / wall
        out["cpu_ns"][m.id] = 100.0 * (b[1] - a[1]) / 1e9 / wall
        out["wakes"][m.id] = (b[3] - a[3]) / wall
    return out


# --------------------------------------------------------------------------
# zkelect

class ZkelectSide:
    name = "zkelect"

    def __init__(self, hostport, path, k, n, timeout="2s", tick_time="200ms", prefix="p"):
        self.n = n
        self.names = [str(i) for i in range(n)]
        self.hostport = hostport
        self.set = BenchAgentSet(hostport, path)
        self.path = path
        self.members = [self.set.new("%s%d" % (prefix, i), start=False,
                                     session_timeout=timeout, tick_time=tick_time,
                                     extra_yaml=ph.partitions_yaml(n))
                        for i in range(k)]
        self.told = set()       # members told to stop (SIGTERM/SIGKILL) since their start
        self.deaths = []        # (member id, exit status, what it was)
        self._seen_dead = set()

    # -- processes
    def start(self, m):
        self.told.discard(m.id)
        m.start(wait_ready=False)

    def term(self, m):
        self.told.add(m.id)
        m.signal(signal.SIGTERM)

    def kill(self, m):
        self.told.add(m.id)
        m.proc.kill()

    def wait_exit(self, m, timeout=60):
        """The exit status once m has exited (SIGKILL after `timeout`)."""
        try:
            rc = m.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            m.proc.kill()
            m.proc.wait(30)
            rc = "still running %.0f s after SIGTERM: killed" % timeout
        m.close_out()
        return rc

    def check_deaths(self, live):
        dead = []
        for m in live:
            if m.proc is not None and m.proc.poll() is not None and m.id not in self.told:
                dead.append(m)
                key = (m.id, m.proc.pid)
                if key not in self._seen_dead:
                    self._seen_dead.add(key)
                    self.deaths.append((m.id, m.proc.returncode, self.last_words(m)))
        return dead

    def death_text(self, dead):
        return "; ".join("%s: exit %s, %s" % (m.id, m.proc.returncode, self.last_words(m))
                         for m in dead)

    def last_words(self, m):
        """The agent's last error or warning line, for a death."""
        text = m.log_text(20000)
        start = text.rfind(bl.zkharness.HARNESS_START_PREFIX)
        lines = [ln for ln in text[max(start, 0):].splitlines()[1:] if ln.strip()]
        errs = [ln for ln in lines if " error: " in ln or " warn: " in ln]
        if errs:
            return errs[-1][:240]
        return lines[-1][:240] if lines else "no output"

    # -- state
    def quick(self, live):
        k = len(live)
        lo, hi = ph.fair(self.n, k)
        idx, total = {}, 0
        for a in live:
            s = a.status(timeout=2.0)
            if s is None or "partitions" not in s:
                return None
            p = s["partitions"]
            if p["members"] != k or p["owned"] != p["assigned"] or not lo <= p["owned"] <= hi:
                return None
            total += p["owned"]
            idx[a.id] = s["index"]
        return idx if total == self.n else None

    def full(self, live, q):
        k = len(live)
        lo, hi = ph.fair(self.n, k)
        owner, same = {}, True
        for a in live:
            d = ph.plist(a, timeout=5.0)
            if d is None or d.get("members") != k:
                return None, False
            mine = ph.owned(d)
            if mine != ph.assigned(d) or not lo <= len(mine) <= hi:
                return None, False
            for p in mine:
                if p in owner:
                    return None, False
                owner[p] = a.id
            same = same and d.get("index") == q.get(a.id)
        if len(owner) != self.n:
            return None, False
        return owner, same

    def describe(self, live):
        out = []
        for a in live:
            s = a.status(timeout=2.0)
            if s is None or "partitions" not in s:
                out.append("%s: no answer" % a.id)
                continue
            p = s["partitions"]
            out.append("%s: %d members, owns %d, assigned %d%s" % (
                a.id, p["members"], p["owned"], p["assigned"],
                ", reason %r" % s["reason"][:120] if s.get("reason") else ""))
        return "; ".join(out)

    def owned_total(self, live):
        n = 0
        for a in live:
            s = a.status(timeout=2.0)
            if s and "partitions" in s:
                n += s["partitions"]["owned"]
        return n

    # -- ZooKeeper
    def _children(self, obs):
        base = self.path + "/members"
        out = []
        for c in obs.zk.get_children(base):
            data, st = obs.zk.get("%s/%s" % (base, c))
            out.append((data.split(b"\0", 1)[0].decode(errors="replace").split("\n", 1)[0], st))
        return out

    def sessions(self, live):
        obs = Observer(self.hostport)
        try:
            ch = self._children(obs)
        finally:
            obs.close()     # its pings would count in mntr's total
        ids = {m.id for m in live}
        return {mid: st.ephemeralOwner for mid, st in ch if mid in ids}

    def member_ctime(self, m):
        obs = Observer(self.hostport)
        try:
            return max(st.ctime for mid, st in self._children(obs) if mid == m.id)
        finally:
            obs.close()

    def first_ctime(self):
        obs = Observer(self.hostport)
        try:
            return min(st.ctime for _, st in self._children(obs))
        finally:
            obs.close()

    def log_counts(self):
        """Counts of LOG_MARKS over every start of every member; a line
        written after the agent's "SIGNAL: stopping" line (until its next
        start) counts under "stopping_<mark>" instead: a stopping agent
        that nobody succeeds lets its partitions' leases lapse."""
        counts = {k: 0 for k, _ in LOG_MARKS}
        counts.update({"stopping_" + k: 0 for k, _ in LOG_MARKS})
        for m in self.members:
            stopping = False
            for line in bl.zkharness.read_log_lines(m.log_path):
                if line.startswith(bl.zkharness.HARNESS_START_PREFIX):
                    stopping = False
                elif line.endswith(": stopping") and " zkelectd info: " in line:
                    stopping = True
                for k, text in LOG_MARKS:
                    if text in line:
                        counts[("stopping_" if stopping else "") + k] += 1
        return counts

    def cleanup(self):
        self.set.cleanup()


# --------------------------------------------------------------------------
# kazoo's SetPartitioner

class KazooMember:
    def __init__(self, workdir, mid):
        self.id = mid
        self.state = os.path.join(workdir, "%s.json" % mid)
        self.events = os.path.join(workdir, "%s.events" % mid)
        self.log_path = os.path.join(workdir, "%s.log" % mid)
        self.proc = None
        self.out = None
        self.kills = []         # monotonic times of SIGKILLs (an open interval ends there)

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def close_out(self):
        if self.out:
            self.out.close()
            self.out = None

    def read_state(self):
        try:
            with open(self.state) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


class KazooSide:
    name = "kazoo"

    def __init__(self, hostport, path, k, n, timeout="2s", time_boundary=1.0,
                 max_reaction_time=1.0, prefix="k"):
        import tempfile
        self.n = n
        self.names = [str(i) for i in range(n)]
        self.hostport = hostport
        self.path = path
        self.timeout_s = duration_s(timeout)
        self.time_boundary = time_boundary
        self.max_reaction_time = max_reaction_time
        self.dir = tempfile.mkdtemp(prefix="zkbench-kazoo-", dir="/tmp")
        self.members = [KazooMember(self.dir, "%s%d" % (prefix, i)) for i in range(k)]
        self.told = set()
        self.deaths = []
        self._seen_dead = set()

    def start(self, m):
        assert not m.running()
        self.told.discard(m.id)
        try:
            os.unlink(m.state)
        except FileNotFoundError:
            pass
        m.out = open(m.log_path, "ab")
        m.proc = subprocess.Popen(
            [sys.executable, KAZOO_MEMBER, "--hosts", self.hostport, "--path", self.path,
             "--id", m.id, "--partitions", str(self.n),
             "--session-timeout", repr(self.timeout_s),
             "--time-boundary", repr(self.time_boundary),
             "--max-reaction-time", repr(self.max_reaction_time),
             "--state", m.state, "--events", m.events],
            stdin=subprocess.DEVNULL, stdout=m.out, stderr=subprocess.STDOUT,
            start_new_session=True)

    def term(self, m):
        self.told.add(m.id)
        m.proc.send_signal(signal.SIGTERM)

    def kill(self, m):
        self.told.add(m.id)
        m.kills.append(time.monotonic())
        m.proc.kill()

    def wait_exit(self, m, timeout=60):
        try:
            rc = m.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            m.kills.append(time.monotonic())
            m.proc.kill()
            m.proc.wait(30)
            rc = "still running %.0f s after SIGTERM: killed" % timeout
        m.close_out()
        return rc

    def check_deaths(self, live):
        dead = []
        for m in live:
            if m.proc is not None and m.proc.poll() is not None and m.id not in self.told:
                dead.append(m)
                key = (m.id, m.proc.pid)
                if key not in self._seen_dead:
                    self._seen_dead.add(key)
                    self.deaths.append((m.id, m.proc.returncode, self.last_words(m)))
        return dead

    def death_text(self, dead):
        return "; ".join("%s: exit %s, %s" % (m.id, m.proc.returncode, self.last_words(m))
                         for m in dead)

    def last_words(self, m):
        try:
            with open(m.log_path, "rb") as f:
                lines = f.read()[-4000:].decode(errors="replace").splitlines()
        except OSError:
            lines = []
        return lines[-1][:200] if lines else "no output"

    def quick(self, live):
        k = len(live)
        lo, hi = ph.fair(self.n, k)
        owner = {}
        for m in live:
            d = m.read_state()
            if d is None or d["state"] != "acquired" or d["members"] != k:
                return None
            if not lo <= len(d["held"]) <= hi:
                return None
            for p in d["held"]:
                if p in owner:
                    return None
                owner[p] = m.id
        return owner if len(owner) == self.n else None

    def full(self, live, q):
        return q, True

    def describe(self, live):
        out = []
        for m in live:
            d = m.read_state()
            out.append("%s: %s" % (m.id, "no state" if d is None else "%s, %d members, "
                                   "holds %d" % (d["state"], d["members"], len(d["held"]))))
        return "; ".join(out)

    def owned_total(self, live):
        return sum(len(d["held"]) for d in (m.read_state() for m in live)
                   if d and d["state"] == "acquired")

    def sessions(self, live):
        out = {}
        for m in live:
            d = m.read_state()
            if d and d.get("session"):
                out[m.id] = d["session"]
        return out

    def _party(self, obs):
        base = self.path + "/party"
        out = []
        for c in obs.zk.get_children(base):
            st = obs.zk.exists("%s/%s" % (base, c))
            if st is not None:
                out.append((c[c.find("-") + 1:], st))
        return out

    def member_ctime(self, m):
        obs = Observer(self.hostport)
        try:
            return max(st.ctime for mid, st in self._party(obs) if mid == m.id)
        finally:
            obs.close()

    def first_ctime(self):
        obs = Observer(self.hostport)
        try:
            return min(st.ctime for _, st in self._party(obs))
        finally:
            obs.close()

    def log_counts(self):
        n = 0
        for m in self.members:
            try:
                with open(m.log_path, "rb") as f:
                    n += sum(1 for ln in f.read().decode(errors="replace").splitlines()
                             if " ERROR " in ln or "Traceback" in ln)
            except OSError:
                pass
        return {"errors": n}

    def overlaps(self):
        """Two members holding one partition at once, from the members' own
        event lines (CLOCK_MONOTONIC, one clock for every process): each
        member holds what its `acquired` line names until its next
        release, finish or failed line, or the SIGKILL the benchmark sent.
        Returns (intervals, [problems])."""
        by = {}
        nint = 0
        for m in self.members:
            evs = []
            try:
                with open(m.events) as f:
                    for line in f:
                        try:
                            evs.append(json.loads(line))
                        except ValueError:
                            pass
            except OSError:
                pass
            evs += [{"t": t, "ev": "killed"} for t in m.kills]
            evs.sort(key=lambda e: e["t"])
            cur = None
            for e in evs:
                if e["ev"] == "acquired":
                    if cur is not None:
                        for p in cur[1]:
                            by.setdefault(p, []).append((cur[0], e["t"], m.id))
                        nint += 1
                    cur = (e["t"], e["held"])
                elif cur is not None:
                    for p in cur[1]:
                        by.setdefault(p, []).append((cur[0], e["t"], m.id))
                    nint += 1
                    cur = None
            if cur is not None:
                for p in cur[1]:
                    by.setdefault(p, []).append((cur[0], time.monotonic(), m.id))
                nint += 1
        problems = []
        for p, ivs in by.items():
            ivs.sort()
            for (s1, e1, a1), (s2, e2, a2) in zip(ivs, ivs[1:]):
                if a1 != a2 and s2 < e1:
                    problems.append("partition %s: %s held it until %.3f, %s from %.3f"
                                    % (p, a1, e1, a2, s2))
        return nint, problems

    def cleanup(self):
        import shutil
        for m in self.members:
            if m.running():
                m.kills.append(time.monotonic())
                m.proc.kill()
                m.proc.wait(30)
            m.close_out()
        self.kept = self.dir
        if os.environ.get("ZKELECT_TEST_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)
