# SPDX-License-Identifier: MIT
"""A flood of hostile or buggy local clients against the agent's API, and an
app-like client that polls /v1/status meanwhile (shared by
tests/integration/test_api_flood.py and tests/bench/flood.py).

The flood, as a leaky or scanning neighbour would act: connections held
with half a request line, connections opened and closed as fast as
possible, garbage. The app opens a fresh connection for every poll (as
zkelectctl does), so each poll also goes through the listen backlog and
the connection cap.
"""

import errno
import json
import os
import random
import resource
import socket
import threading
import time


def raise_nofile(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


def _socket(target):
    if target[0] == "unix":
        return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), target[1]
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM), ("127.0.0.1", target[1])


def connect(target, timeout=None):
    s, addr = _socket(target)
    s.settimeout(timeout)
    try:
        s.connect(addr)
    except OSError:
        s.close()
        raise
    return s


class Poll:
    __slots__ = ("t", "latency", "outcome", "is_leader", "epoch")

    def __init__(self, t, latency, outcome, is_leader=None, epoch=None):
        self.t = t
        self.latency = latency
        self.outcome = outcome        # "ok", "status NNN", "reset", "refused", ...
        self.is_leader = is_leader
        self.epoch = epoch

    def __repr__(self):
        return "<poll %.3f %.1fms %s leader=%s epoch=%s>" % (
            self.t, self.latency * 1000, self.outcome, self.is_leader, self.epoch)


_REQ = b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


def poll_once(target, timeout=2.0):
    """One GET /v1/status on a fresh connection; returns a Poll."""
    t0 = time.monotonic()
    try:
        s = connect(target, timeout)
    except ConnectionRefusedError:
        return Poll(t0, time.monotonic() - t0, "refused")
    except BlockingIOError:
        return Poll(t0, time.monotonic() - t0, "refused (backlog full)")
    except socket.timeout:
        return Poll(t0, time.monotonic() - t0, "connect timeout")
    except OSError as e:
        return Poll(t0, time.monotonic() - t0, "connect %s" % e)
    buf = b""
    try:
        s.sendall(_REQ)
        while True:
            b = s.recv(65536)
            if not b:
                break
            buf += b
    except ConnectionResetError:
        return Poll(t0, time.monotonic() - t0, "reset after %d bytes" % len(buf))
    except socket.timeout:
        return Poll(t0, time.monotonic() - t0, "timeout after %d bytes" % len(buf))
    except OSError as e:
        return Poll(t0, time.monotonic() - t0, "error %s" % e)
    finally:
        s.close()
    t1 = time.monotonic()
    head, _, body = buf.partition(b"\r\n\r\n")
    try:
        code = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return Poll(t0, t1 - t0, "no answer (%d bytes)" % len(buf))
    if code != 200:
        return Poll(t0, t1 - t0, "status %d %r" % (code, body[:80]))
    try:
        d = json.loads(body)
    except ValueError:
        return Poll(t0, t1 - t0, "bad JSON %r" % body[:80])
    return Poll(t0, t1 - t0, "ok", d.get("is_leader"), d.get("epoch"))


class AppPoller:
    """Polls every `interval` s in a thread until stopped; keeps every Poll."""

    def __init__(self, target, interval=0.005, timeout=2.0):
        self.target = target
        self.interval = interval
        self.timeout = timeout
        self.polls = []
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._th.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.polls.append(poll_once(self.target, self.timeout))
            self._stop.wait(self.interval)

    def stop(self):
        self._stop.set()
        self._th.join(30)
        return self.polls


class Flood:
    """The hostile side. Each phase returns when done; held sockets stay
    open until close().

    A connect the kernel refuses at once (EAGAIN: the Unix socket's listen
    backlog is full) is tried again, at once, until one goes through: each
    accept by the agent lets one in, so a stretch of refused connects lasts
    exactly as long as the agent took nothing from a full backlog, however
    much flood is left (it used to move on to its next connect, and a
    stopped agent's stretch ended with the flood, 145 ms). A stretch
    longer than `stall_limit` s gives up: the rest of the flood then tries
    each connect once until the agent accepts again. `progress`, a
    multiprocessing.Value, counts the connects refused so far."""

    def __init__(self, target, seed=1, stall_limit=30.0, progress=None):
        self.target = target
        self.held = []
        self.rng = random.Random(seed)
        self.stall_limit = stall_limit
        self.progress = progress
        self.counts = {"half-sent held": 0, "churned": 0, "garbage": 0,
                       "connect failed": 0, "longest refused stretch ms": 0.0}
        self._refused_since = None

    def _open(self):
        while True:
            try:
                s = connect(self.target, 5.0)
            except OSError as e:
                self.counts["connect failed"] += 1
                why = "connect failed: %s" % (errno.errorcode.get(e.errno, e.errno)
                                              if e.errno else type(e).__name__)
                self.counts[why] = self.counts.get(why, 0) + 1
                if self.progress is not None:
                    with self.progress.get_lock():
                        self.progress.value += 1
                now = time.monotonic()
                if self._refused_since is None:
                    self._refused_since = now
                if (isinstance(e, BlockingIOError)
                        and now - self._refused_since < self.stall_limit):
                    continue
                return None
            self._refused_end()
            return s

    def _refused_end(self):
        """A stretch of refused connects ends: a connect went through (the
        agent took one from the backlog) or the flood stopped."""
        if self._refused_since is not None:
            ms = (time.monotonic() - self._refused_since) * 1000.0
            if ms > self.counts["longest refused stretch ms"]:
                self.counts["longest refused stretch ms"] = ms
            self._refused_since = None

    def half_sent(self, n):
        """n connections, each with half a request line, held open."""
        for _ in range(n):
            s = self._open()
            if s is None:
                continue
            try:
                s.sendall(b"GET /v1/sta")
            except OSError:
                pass
            self.held.append(s)
            self.counts["half-sent held"] += 1

    def churn(self, n):
        """n connections opened and closed at once, as fast as possible."""
        for _ in range(n):
            s = self._open()
            if s is not None:
                s.close()
                self.counts["churned"] += 1

    def garbage(self, n):
        """n connections sending random bytes (some never end their line)."""
        for i in range(n):
            s = self._open()
            if s is None:
                continue
            data = bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(1, 600)))
            try:
                s.sendall(data)
            except OSError:
                pass
            if i % 2:
                s.close()
            else:
                self.held.append(s)
            self.counts["garbage"] += 1

    def close(self):
        for s in self.held:
            s.close()
        self.held = []


def standard_flood(fl):
    """The flood of issue 12 and more: 200 half-sent, 2,000 churned,
    500 half-sent, 5,000 churned, 300 garbage."""
    fl.half_sent(200)
    fl.churn(2000)
    fl.half_sent(500)
    fl.churn(5000)
    fl.garbage(300)


def _flood_child(target, rounds, hold_seconds, conn, progress):
    raise_nofile(8192)
    fl = Flood(target, progress=progress)
    try:
        for _ in range(rounds):
            standard_flood(fl)
            fl._refused_end()
            time.sleep(hold_seconds)    # the half-sent stay held meanwhile
            fl.close()
        conn.send(fl.counts)
    finally:
        fl.close()
        conn.close()


def run_flood(target, rounds=1, hold_seconds=1.0, progress=None):
    """The standard flood, `rounds` times, in a child process (the app's
    poller keeps this interpreter to itself); each round keeps its
    half-sent connections open `hold_seconds` more. Returns the counts.
    `progress`: see Flood (a multiprocessing.Value("l") of the fork context)."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_flood_child, args=(target, rounds, hold_seconds, child,
                                               progress), daemon=True)
    p.start()
    child.close()
    try:
        if not parent.poll(300):
            raise AssertionError("the flood did not finish in 300 s")
        return parent.recv()
    finally:
        p.join(30)
        if p.is_alive():
            p.kill()
            p.join(10)
        parent.close()


def pct(values, p):
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(v) - 1)
    return v[f] + (v[c] - v[f]) * (k - f)


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))
