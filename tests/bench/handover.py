#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: graceful handover latency (doc/design.md, Targets, "Graceful handover").

zkelect: two agents; SIGTERM the leader's agent and poll the successor's
/v1/leader on its Unix socket, by a long poll (wait, index) that waits at
the successor before the clock starts and is answered the moment it leads
(asked again on the same connection until the answer is 200). The stopped
agent is restarted after each run so there are always two candidates.
Then the same with `POST /v1/resign?hold=0s` on the leader's socket instead
of SIGTERM (the resigned agent rejoins at the back at once).

The one-shot, same run: two `zkelectctl elect --zookeeper HOST PATH NAME`
(each a zkelectd configured by flags, running `zkelectctl hold`, which
prints the epoch once it leads); SIGTERM the leader's, time until the other
prints its epoch line: the same events as the reference's below. The
stopped one is restarted each run, and the pair settled as the agents'
are (the leader counts 2 candidates, the other follows it).

Reference, same run: Debian's etcd (single node, loopback, temp dir) and two
`etcdctl elect NAME PROPOSAL`; SIGTERM the leader's etcdctl, time until the
other prints its proposal line (it then leads). The stopped etcdctl is
restarted each run.

Both sides are timed on the same events (SIGTERM of the leader's process ->
the successor reports leadership) and settled the same way before each
clock starts: the leader leads, the other candidate is queued and waiting
(zkelect: the leader counts 2 candidates and the other reports `follower`;
etcd: the leader printed its proposal, both keys exist and etcd counts one
watcher, the waiting campaign's), then --quiet seconds (default 0.5) pass
with nothing done, so that no start-up work of the restarted process falls
inside the timed interval of either side.

    tests/bench/handover.py [--runs 20] [--quiet 0.5] [--session-timeout 2s] [--no-etcd]
                            [--no-elect]
"""

import argparse
import base64
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer, poll


# --------------------------------------------------------------------------
# zkelect

def zk_wait_pair(leader, follower, quiet=0.0):
    """Both agents joined: the leader leads and counts 2, the other follows
    (queued, its watch set); then `quiet` s with nothing done."""
    leader.wait_for(lambda s: s.get("is_leader") and s.get("candidates") == 2, 30,
                    what="lead with 2 candidates")
    follower.wait_for(lambda s: s.get("role") == "follower"
                      and (s.get("leader") or {}).get("id") == leader.id, 30,
                      what="follow %s" % leader.id)
    bl.quiet(quiet)


def run_zkelect(args):
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    aset = BenchAgentSet(zk.hostport, "/zkelect/bench-handover")
    out = {"sigterm": [], "resign": []}
    try:
        a = aset.new("ho-a", session_timeout=args.session_timeout)
        b = aset.new("ho-b", session_timeout=args.session_timeout)
        leader = aset.wait_one_leader(timeout=30)
        other = b if leader is a else a
        zk_wait_pair(leader, other, args.quiet)
        st = leader.status()
        print("zkelect: negotiated session timeout %d ms; ZooKeeper tickTime %d ms"
              % (st["session"]["timeout_ms"], zk.tick_ms))

        # warm-up handover (not counted): JIT of the ZooKeeper server, caches
        for i in range(args.warmup + args.runs):
            w = bl.LeaderLongPoll(other.socket)
            t0 = time.monotonic()
            leader.signal(signal.SIGTERM)
            dt = w.wait_200(t0, 20)
            rc = leader.proc.wait(20)
            if rc != 0:
                raise AssertionError("%s exited %s on SIGTERM" % (leader.id, rc))
            leader.close_out()
            if i >= args.warmup:
                out["sigterm"].append(dt)
            leader.start()
            leader, other = other, leader
            zk_wait_pair(leader, other, args.quiet)

        for i in range(args.warmup + args.runs):
            w = bl.LeaderLongPoll(other.socket)
            t0 = time.monotonic()
            r = leader.request("POST", "/v1/resign?hold=0s", timeout=5)
            if r.status != 200:
                raise AssertionError("resign answered %s %s" % (r.status, r.body))
            dt = w.wait_200(t0, 20)
            if i >= args.warmup:
                out["resign"].append(dt)
            leader, other = other, leader
            zk_wait_pair(leader, other, args.quiet)
    finally:
        aset.cleanup()
        zk.cleanup()
    return out


# --------------------------------------------------------------------------
# zkelect's one-shot: `zkelectctl elect`, beside `etcdctl elect`

class OneShot:
    """One `zkelectctl elect --zookeeper HOST PATH NAME`: after its exec, a
    zkelectd configured by flags that runs `zkelectctl hold` while it leads.
    A thread timestamps its stdout lines (the epoch, once it leads); another
    reads its log (info) for its private socket, to settle on its status."""

    def __init__(self, hostport, path, name, args):
        self.hostport, self.path, self.name, self.args = hostport, path, name, args
        self.proc = None
        self.socket = None

    def start(self):
        self.socket = None
        self.proc = subprocess.Popen(
            [bl.ZKELECTCTL, "elect", "--zookeeper", self.hostport, "--session-timeout",
             self.args.session_timeout, "--tick-time", "200ms", "--log-level", "info",
             self.path, self.name],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, bufsize=0)
        self.lines = queue.Queue()
        threading.Thread(target=Elector._read, args=(self.proc, self.lines),
                         daemon=True).start()
        threading.Thread(target=self._log, args=(self.proc,), daemon=True).start()
        return self

    def _log(self, proc):
        for line in proc.stderr:
            text = line.decode(errors="replace")
            if self.socket is None and "api: listening on " in text:
                self.socket = text.rsplit("api: listening on ", 1)[1].strip()

    def status(self):
        return bl.zkharness.unix_request(self.socket, "GET", "/v1/status", timeout=2).json()

    def wait_leads(self, timeout):
        """Block until it prints its epoch; return that time."""
        t, line = self.lines.get(timeout=timeout)
        if line is None or not line.isdigit():
            raise AssertionError("zkelectctl elect %s: %r (exit %s) before leading"
                                 % (self.name, line, self.proc.poll()))
        return t


def oneshot_settle(leader, other, quiet):
    """As zk_wait_pair: the leader leads and counts 2 candidates, the other
    follows it; then `quiet` s with nothing done."""
    def ok(e, pred):
        if e.proc.poll() is not None:
            raise bl.zkharness.PollAbort("zkelectctl elect %s exited (%s)"
                                         % (e.name, e.proc.returncode))
        if e.socket is None:
            return False
        try:
            return pred(e.status())
        except (OSError, ValueError):
            return False
    poll(lambda: ok(leader, lambda s: s.get("is_leader") and s.get("candidates") == 2) and
         ok(other, lambda s: s.get("role") == "follower" and
            (s.get("leader") or {}).get("id") == leader.name), 30, interval=0.01,
         what="the one-shots settled")
    bl.quiet(quiet)


def run_oneshot(args):
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    path = "/zkelect/bench-oneshot"
    out = []
    ea = eb = None
    try:
        ea = OneShot(zk.hostport, path, "os-a", args).start()
        ea.wait_leads(30)
        eb = OneShot(zk.hostport, path, "os-b", args).start()
        leader, other = ea, eb
        oneshot_settle(leader, other, args.quiet)
        for i in range(args.warmup + args.runs):
            t0 = time.monotonic()
            leader.proc.send_signal(signal.SIGTERM)
            t1 = other.wait_leads(20)
            rc = leader.proc.wait(20)
            if rc != 0:
                raise AssertionError("zkelectctl elect %s exited %s on SIGTERM"
                                     % (leader.name, rc))
            if i >= args.warmup:
                out.append(t1 - t0)
            leader.start()
            leader, other = other, leader
            oneshot_settle(leader, other, args.quiet)
    finally:
        for e in (ea, eb):
            if e is not None:
                bl.stop_group(e.proc, signal.SIGTERM, wait=10)
        zk.cleanup()
    return out


# --------------------------------------------------------------------------
# etcd reference

class Etcd:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="zkbench-etcd-", dir="/tmp")
        self.client_port = bl.zkharness.free_port()
        self.peer_port = bl.zkharness.free_port()
        self.proc = None
        self._log = None

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.client_port

    def start(self):
        cu = "http://127.0.0.1:%d" % self.client_port
        pu = "http://127.0.0.1:%d" % self.peer_port
        self._log = open(os.path.join(self.dir, "etcd.log"), "wb")
        self.proc = subprocess.Popen(
            ["etcd", "--name", "bench", "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", cu, "--advertise-client-urls", cu,
             "--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
             "--initial-cluster", "bench=" + pu, "--initial-cluster-state", "new"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            start_new_session=True)

        def ready():
            if self.proc.poll() is not None:
                raise bl.zkharness.PollAbort("etcd exited %s; see %s"
                                             % (self.proc.returncode, self.dir))
            return self.count_prefix("zkbench-probe") is not None
        poll(ready, 60, interval=0.1, what="etcd to answer on %s" % self.endpoint)
        return self

    def count_prefix(self, prefix):
        """Keys under `prefix/` through the v3 JSON gateway, or None."""
        key = (prefix + "/").encode()
        end = key[:-1] + bytes([key[-1] + 1])
        body = json.dumps({"key": base64.b64encode(key).decode(),
                           "range_end": base64.b64encode(end).decode(),
                           "count_only": True}).encode()
        try:
            req = urllib.request.Request("http://%s/v3/kv/range" % self.endpoint, data=body,
                                         method="POST")
            with urllib.request.urlopen(req, timeout=2) as r:
                return int(json.loads(r.read()).get("count", 0))
        except OSError:
            return None

    def metric(self, name):
        """One counter or gauge from etcd's /metrics, or None."""
        try:
            with urllib.request.urlopen("http://%s/metrics" % self.endpoint, timeout=2) as r:
                text = r.read().decode(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def cleanup(self):
        rc = bl.stop_group(self.proc, signal.SIGTERM, wait=20)
        if rc not in (0, None, -signal.SIGTERM):
            print("etcd exited %s on SIGTERM" % rc)
        if self._log:
            self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Elector:
    """One `etcdctl elect NAME PROPOSAL`; a thread timestamps its stdout lines."""

    def __init__(self, etcd, name, proposal):
        self.etcd = etcd
        self.name = name
        self.proposal = proposal
        self.lines = queue.Queue()
        self.proc = None

    def start(self):
        env = dict(os.environ, ETCDCTL_API="3")
        self.proc = subprocess.Popen(
            ["etcdctl", "--endpoints=" + self.etcd.endpoint, "elect", self.name, self.proposal],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True, bufsize=0)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()
        return self

    @staticmethod
    def _read(proc, q):
        f = proc.stdout
        while True:
            line = f.readline()
            t = time.monotonic()
            if not line:
                q.put((t, None))
                return
            q.put((t, line.decode(errors="replace").rstrip("\n")))

    def wait_leads(self, timeout):
        """Block until this elector prints its proposal line; return that time."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("etcdctl elect %s did not lead within %.0fs"
                                     % (self.proposal, timeout))
            try:
                t, line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("etcdctl elect %s exited (%s) before leading"
                                     % (self.proposal, self.proc.poll()))
            if line == self.proposal:
                return t


def etcd_settle(etcd, name, leader, other, quiet):
    """The reference settled as zkelect's pair is: `leader` has printed its
    proposal (the caller waited for it), both campaign keys exist, and the
    waiting campaign has its watch registered in etcd (etcd counts exactly one
    watcher: the waiting elector's, on the key ahead of it); then `quiet` s
    with nothing done."""
    def ready():
        for e in (leader, other):
            if e.proc.poll() is not None:
                raise bl.zkharness.PollAbort("etcdctl elect %s exited (%s)"
                                             % (e.proposal, e.proc.returncode))
        return etcd.count_prefix(name) == 2 and \
            etcd.metric("etcd_debugging_mvcc_watcher_total") == 1
    poll(ready, 30, interval=0.01,
         what="two etcd candidates, the second one waiting on its watch")
    bl.quiet(quiet)


def run_etcd(args):
    etcd = Etcd().start()
    name = "zkbench-elect"
    out = []
    ea = eb = None
    try:
        ea = Elector(etcd, name, "prop-a").start()
        ea.wait_leads(30)
        eb = Elector(etcd, name, "prop-b").start()
        leader, other = ea, eb
        etcd_settle(etcd, name, leader, other, args.quiet)
        for i in range(args.warmup + args.runs):
            t0 = time.monotonic()
            leader.proc.send_signal(signal.SIGTERM)
            t1 = other.wait_leads(20)
            rc = leader.proc.wait(20)
            if rc != 0:
                raise AssertionError("etcdctl elect %s exited %s on SIGTERM"
                                     % (leader.proposal, rc))
            if i >= args.warmup:
                out.append(t1 - t0)
            leader.start()
            leader, other = other, leader
            etcd_settle(etcd, name, leader, other, args.quiet)
    finally:
        for e in (ea, eb):
            if e is not None:
                bl.stop_group(e.proc, signal.SIGTERM, wait=10)
        etcd.cleanup()
    return out


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2, help="uncounted runs first")
    ap.add_argument("--quiet", type=float, default=0.5,
                    help="seconds of quiet after both sides settled, before each clock "
                         "starts (the same for zkelect and etcd)")
    ap.add_argument("--session-timeout", default="2s")
    ap.add_argument("--no-etcd", action="store_true", help="skip the etcd reference")
    ap.add_argument("--no-elect", action="store_true",
                    help="skip zkelectctl elect (for a build before it, as ZKELECTD)")
    args = ap.parse_args()
    if not 1 <= args.runs <= 1000:
        ap.error("--runs must be 1..1000")
    if not 0 <= args.quiet <= 10:
        ap.error("--quiet must be 0..10 s")

    bl.header("handover: graceful leader change, %d runs each (+%d warm-up), each clock "
              "started %.2f s after both candidates settled" % (args.runs, args.warmup,
                                                               args.quiet))
    zres = run_zkelect(args)
    ores = None if args.no_elect else run_oneshot(args)
    eres = None
    if not args.no_etcd:
        if shutil.which("etcd") and shutil.which("etcdctl"):
            eres = run_etcd(args)
        else:
            print("etcd/etcdctl not installed (apt-get install etcd-server etcd-client): "
                  "no reference")

    print()
    print("%-44s %9s %9s %9s %9s" % ("", "median", "p95", "min", "max"))
    rows = [("zkelect SIGTERM -> successor /v1/leader 200", zres["sigterm"]),
            ("zkelect resign?hold=0s -> successor 200", zres["resign"])]
    if ores:
        rows.append(("zkelectctl elect SIGTERM -> other prints", ores))
    if eres:
        rows.append(("etcdctl elect SIGTERM -> other prints", eres))
    for label, v in rows:
        m, p95, lo, hi = bl.summary_ms(v)
        print("%-44s %6.1f ms %6.1f ms %6.1f ms %6.1f ms" % (label, m, p95, lo, hi))
    print("(zkelect: a long poll of the successor's /v1/leader, waiting there before the "
          "clock starts, answered the moment it leads; zkelectctl elect and etcd: the "
          "output read as it comes)")
    if eres:
        em = bl.summary_ms(eres)[0]
        zs = bl.summary_ms(zres["sigterm"])[0]
        zr = bl.summary_ms(zres["resign"])[0]
        print()
        print("ratio zkelect/etcd (median), SIGTERM: %.2f   %s" %
              (zs / em, "target met (<= 1)" if zs <= em else "target NOT met (> 1)"))
        print("ratio zkelect/etcd (median), resign:  %.2f   %s" %
              (zr / em, "target met (<= 1)" if zr <= em else "target NOT met (> 1)"))
        if ores:
            zo = bl.summary_ms(ores)[0]
            print("ratio zkelectctl elect/etcdctl elect (median): %.2f" % (zo / em))
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
