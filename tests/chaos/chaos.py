#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A long randomized chaos run against zkelect (see tests/chaos/README.md).

    /usr/bin/python3 tests/chaos/chaos.py --minutes 10 --seed N --agents 4 [--ensemble]
        [--worst-case P] [--partitions N]

It starts ZooKeeper (standalone, or a 3-server ensemble with --ensemble),
N agents, each behind its own zkproxy instances (one per ZooKeeper server),
the integration harness's StatusRecorder polling every agent and its
ZKChecker reading ZooKeeper directly. Then, for the given time, it injects
faults chosen with a seeded RNG, each held for a random time and healed.
At the end it heals everything, waits for the election to settle, stops
every agent with SIGTERM and checks the invariants over the whole run:

  * never two leaders at once, epochs only grow, one epoch per agent
    (zkharness.check_single_leader, the rule the fault tests use);
  * every epoch an agent answered is_leader with is the mzxid of a claim
    naming that agent (seen by the ZKChecker or, when it was blind to a
    short-lived claim, found in ZooKeeper's transaction logs);
  * no contender node ever written after its creation (ZKChecker);
  * no stale answer, judged from ZooKeeper's own records (its transaction
    logs, zkrecords.py), not from the faults injected nor the agents' logs:
    no is_leader=true with epoch e whose request was sent after a later
    claim, or after the node or the session of e's claim was gone, or by
    a process started after that session was created;
  * each SIGTERM exits 0, no agent dies by itself, the election settles at
    every checkpoint, and no node is left behind once every agent stopped;
  * the exact audit: every agent's leadership intervals, from its own
    `audit:` debug log lines on CLOCK_BOOTTIME, overlap no other agent's,
    and every is_leader true sample lies inside one (zkharness.check_audit;
    ZKELECT_AUDIT=off turns it off, loudly). The smallest gap between
    consecutive terms of different agents is printed. It rests on the
    agents' own lines: a second opinion, which the stale check does not use.

With --partitions N the agents run N partitions: the traffic polls
/v1/partitions, and every check above is made per partition (see
tests/chaos/README.md, "Partitions").

With --worst-case P (and --ensemble), after each round with probability P,
the lease's worst case is staged: the leading agent's ZooKeeper follower is
stopped and the agent cut off right after an acknowledged renewal.
ZKELECT_TEST_LEGACY_LEASE=1 runs the agents with the old lease.

Exit status: 0 when every invariant held, 1 on a violation (printed with
the seed to reproduce it; logs are kept), 2 when the harness itself failed
(ZooKeeper did not come up, ...), 130 on Ctrl-C.
"""

import argparse
import bisect
import collections
import datetime
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "harness"))

# Snapshot the agent binary before importing the harness (which reads
# ZKELECTD at import time): a rebuild of build/ during a long run must not
# swap the agent between two restarts.
_SRC_ZKELECTD = os.environ.get("ZKELECTD", os.path.join(ROOT, "build", "agent", "zkelectd"))
_BIN_DIR = tempfile.mkdtemp(prefix="zkchaos-bin-", dir="/tmp")
if not os.access(_SRC_ZKELECTD, os.X_OK):
    shutil.rmtree(_BIN_DIR, ignore_errors=True)
    sys.exit("chaos: %s not found (build first: meson setup build && ninja -C build, "
             "or set ZKELECTD)" % _SRC_ZKELECTD)
shutil.copy2(_SRC_ZKELECTD, _BIN_DIR)
os.environ["ZKELECTD"] = os.path.join(_BIN_DIR, os.path.basename(_SRC_ZKELECTD))

import zkharness  # noqa: E402
from zkharness import (AgentSet, Observer, StatusRecorder, ZooKeeperServer,  # noqa: E402
                       new_election_path)
from zkensemble import Ensemble  # noqa: E402
from zkproxy import ZKProxy  # noqa: E402
from test_faults import ZKChecker, finish, one_node_each  # noqa: E402
from zkharness import settled as settle  # noqa: E402
import partharness  # noqa: E402
import zkrecords  # noqa: E402

SESSION_TIMEOUTS = ["2s", "2.5s", "3s", "3.5s", "4s"]

AGENT_KINDS = ["pause_short", "pause_long", "kill9_restart", "sigterm_restart",
               "resign_hold0", "resign_hold2", "proxy_blackhole", "proxy_reset",
               "proxy_delay", "proxy_drop_replies", "delete_contender"]
# With --partitions an agent cannot resign (POST /v1/resign answers 400).
PART_AGENT_KINDS = [k for k in AGENT_KINDS if not k.startswith("resign")]
ZK_KINDS = ["zk_pause", "zk_kill_restart"]


class Violation(Exception):
    """An invariant broke (exit 1)."""


class HarnessError(Exception):
    """The harness could not do its job (exit 2)."""


class Interrupted(BaseException):
    """SIGTERM / SIGALRM (the global deadline) received."""


class PartZKChecker(ZKChecker):
    """ZKChecker for --partitions: every partition's claim node (a data
    watch on each, and polling) and its contender nodes. claims:
    {mzxid: "PARTITION/id"} (a zxid is one transaction: one claim)."""

    def __init__(self, hosts, path, names, interval=0.1, timeout=10.0):
        super().__init__(hosts, path, interval=interval, timeout=timeout)
        self.names = names

    def start(self):
        for name in self.names:
            self.zk.DataWatch("%s/partitions/%s" % (self.path, name),
                              lambda d, st, *a, name=name: self._on_part(name, d, st))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _on_part(self, name, data, stat):
        if stat is not None and data:
            with self._lock:
                self.claims.setdefault(stat.mzxid, "%s/%s" % (name, zkrecords.agent_of(data)))

    def _run(self):
        from kazoo.exceptions import NoNodeError
        n = 0
        while not self._stop.is_set():
            n += 1
            for name in self.names:
                ppath = "%s/partitions/%s" % (self.path, name)
                try:
                    data, stat = self.zk.get(ppath)
                    self._on_part(name, data, stat)
                    if n % 5:
                        continue
                    for c in self.zk.get_children(ppath):
                        try:
                            st = self.zk.exists("%s/%s" % (ppath, c))
                        except NoNodeError:
                            continue
                        if st is not None and st.version > 0:
                            with self._lock:
                                self.written.add(("%s/%s" % (name, c), st.version))
                except Exception:  # noqa: BLE001 - no node yet, or ZooKeeper faulted
                    pass
            self.polls += 1
            self._stop.wait(self._interval)


T0 = time.monotonic()
# kazoo logs every reconnection at WARNING: expected here, and noisy.
logging.getLogger("kazoo").setLevel(logging.ERROR)


def say(msg):
    now = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
    print("%s +%8.3fs  %s" % (now, time.monotonic() - T0, msg), flush=True)


# --------------------------------------------------------------------------

class Fault:
    """One injected fault: applied, held, healed."""

    def __init__(self, kind, target, hold, detail=""):
        self.kind = kind
        self.target = target            # agent id, "zkN", or a node name
        self.hold = hold
        self.detail = detail
        self.t_before = None            # just before the fault was applied
        self.t_applied = None           # once it surely took effect
        self.t_heal = None              # just before the heal began
        self.victims = []               # agent ids it hits (for the takeover figures)
        self.affected = None            # agent ids it disturbs (default: victims)
        self.leader_at_start = None     # (agent, epoch) leading when it began
        self.heal_fn = None
        self.done = False
        self.owners_at_start = None     # --partitions: {partition: (agent, epoch)}
        self.part_hit = None            # --partitions: (partition, owner) of a deleted node


class Chaos:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.zk = None                  # ZooKeeperServer
        self.ens = None                 # Ensemble
        self.upstreams = []             # ZooKeeper client host:port list
        self.zk_hosts = None
        self.path = new_election_path()
        self.aset = None
        self.proxies = {}               # agent id -> [ZKProxy]
        self.recorder = None
        self.checker = None
        self.observer = None
        self.pool = []
        self.never_restart = {"a%d" % (i + 1) for i in range(args.never_restart)}
        self.lease = {}                 # agent id -> 2/3 T (s)
        self.counts = collections.Counter()
        self.faults = []
        self.starts = collections.defaultdict(list)   # agent id -> wall times started
        self.worst_rng = random.Random(args.seed * 7919 + 1) if args.worst_case else None
        self.staged = collections.Counter()
        self.problems = []
        self.checkpoints = 0
        self.journal = []
        self.deadline_hit = False
        self.audit_fig = None
        self.stale_fig = None
        self.names = [str(i) for i in range(args.partitions)]   # [] without --partitions

    # -- setup ---------------------------------------------------------------
    def start(self):
        a = self.args
        life = a.minutes * 60 + 1200
        if a.ensemble:
            say("starting a 3-server ZooKeeper ensemble")
            self.ens = Ensemble(3)
            self.ens.start()
            self.upstreams = [s.hostport for s in self.ens.servers]
            self.zk_hosts = self.ens.hostports
        else:
            say("starting a standalone ZooKeeper")
            self.zk = ZooKeeperServer().start()
            self.upstreams = [self.zk.hostport]
            self.zk_hosts = self.zk.hostport
        say("ZooKeeper up: %s (%s); election path %s" % (
            self.zk_hosts, self.ens.dir if self.ens else self.zk.dir, self.path))
        self.observer = Observer(self.zk_hosts)
        if self.names:
            self.checker = PartZKChecker(self.zk_hosts, self.path, self.names,
                                         timeout=3.0 if a.ensemble else 10.0).start()
        else:
            self.checker = ZKChecker(self.zk_hosts, self.path,
                                     timeout=3.0 if a.ensemble else 10.0).start()
        self.aset = AgentSet(self.zk_hosts, self.path)
        say("agent configs and logs in %s" % self.aset.dir)
        if self.names:
            # Per partition: every agent's /v1/partitions, every partition's answer.
            self.recorder = partharness.PartitionChecker(self.aset, interval=0.03).start()
        else:
            self.recorder = StatusRecorder(self.aset).start()
        k = len(self.upstreams)
        for i in range(a.agents):
            aid = "a%d" % (i + 1)
            order = [(i + j) % k for j in range(k)]
            ps = [ZKProxy(self.upstreams[o], max_lifetime=life, name="proxy-%s-%d" % (aid, o))
                  for o in order]
            self.proxies[aid] = ps
            st = self.rng.choice(SESSION_TIMEOUTS)
            ag = self.aset.new(aid, start=False, zk_hostport=",".join(p.hostport for p in ps),
                               session_timeout=st, extra_yaml=partharness.partitions_yaml(
                                   a.partitions) if self.names else "")
            self.starts[aid].append(time.time())
            ag.start()
            self.pool.append(ag)
            if i == 0 and self.names:
                # The first one owns every partition (the nodes then exist)
                # before the others start.
                partharness.wait_settled([ag], self.names, timeout=60,
                                         what="the first agent to own every partition")
            elif i == 0:
                # The first one leads (the election path then exists) before
                # the others start, as the fault tests' start_pool does.
                ag.wait_for(lambda s: s["is_leader"] is True, 30,
                            what="the first agent to lead")
        for ag in self.pool:
            s = ag.wait_for(lambda s: s["session"]["state"] == "connected", 30,
                            what="a connected session")
            T = s["session"].get("timeout_ms") or 0
            self.lease[ag.id] = (T or 4000) / 1000.0 * 2.0 / 3.0
        if self.names:
            owner = partharness.wait_settled(self.pool, self.names, timeout=60,
                                             what="the first balance")
            say("%d agents up (%s); %d partitions: %s" % (
                len(self.pool), ", ".join("%s T=%.1fs" % (g.id, self.lease[g.id] * 1.5)
                                          for g in self.pool), len(self.names),
                self.shares(owner)))
            return
        lead, ls, _ = settle(self.pool, timeout=60, what="the first election")
        one_node_each(self.observer, self.path, self.pool, timeout=60)
        say("%d agents up (%s); %s leads, epoch %#x" % (
            len(self.pool), ", ".join("%s T=%.1fs" % (g.id, self.lease[g.id] * 1.5)
                                      for g in self.pool), lead.id, ls["epoch"]))

    # -- helpers -------------------------------------------------------------
    def agent(self, aid):
        return [g for g in self.pool if g.id == aid][0]

    def shares(self, owner):
        n = collections.Counter(owner.values())
        return ", ".join("%s owns %d" % (g.id, n[g.id]) for g in self.pool)

    def owners_now(self, window=1.5):
        """--partitions: {partition: (agent id, epoch)} of each partition's
        latest is_leader answer within `window` s."""
        out = {}
        now = time.monotonic()
        with self.recorder._lock:
            for name, lst in self.recorder.answers.items():
                for x in reversed(lst[-200:]):
                    if x.is_leader and x.t1 > now - window:
                        out[name] = (x.agent, x.epoch)
                        break
        return out

    def current_leader(self, window=1.5):
        """(agent id, epoch) of the latest is_leader sample, or (None, None);
        with --partitions, of partition 0's (the faults favour its owner)."""
        if self.names:
            return self.owners_now(window).get(self.names[0], (None, None))
        with self.recorder._lock:
            tail = self.recorder.samples[-600:]
        for s in reversed(tail):
            if s.is_leader and s.t_end > time.monotonic() - window:
                return s.agent, s.epoch
        return None, None

    def sessions_by_agent(self):
        out = {}
        try:
            for name, data, stat in self.observer.contenders(self.path):
                out.setdefault(data, stat.ephemeralOwner)
        except Exception:  # noqa: BLE001 - ZooKeeper faulted: unknown
            pass
        return out

    def check_alive(self):
        for g in self.pool:
            if g.proc is not None and g.proc.poll() is not None:
                raise Violation("%s died by itself with status %s (not killed by the run)"
                                % (g.id, g.proc.returncode))

    def start_agent(self, g):
        # The wall time before the process exists: every answer sent after
        # it comes from this process or a later one (zkrecords.check_answers).
        self.starts[g.id].append(time.time())
        try:
            g.start()
        except (AssertionError, zkharness.PollAbort) as e:
            raise Violation("%s did not come back after a restart: %s" % (g.id, e)) from None

    # -- faults ---------------------------------------------------------------
    def pick_round(self):
        """One fault, or (with --overlap probability) two on distinct targets."""
        n = 2 if self.rng.random() < self.args.overlap else 1
        kinds = (PART_AGENT_KINDS if self.names else AGENT_KINDS) + \
            (ZK_KINDS if self.args.ensemble else [])
        picked, used_agents, zk_used = [], set(), False
        for _ in range(n):
            for _try in range(20):
                kind = self.rng.choice(kinds)
                if kind in ZK_KINDS:
                    if zk_used:
                        continue
                    zk_used = True
                    picked.append((kind, None))
                    break
                if kind == "delete_contender":
                    # Alone: an operator's delete is noticed from the
                    # owner's watch, which a paused or cut-off owner does
                    # not get (doc/design.md, "What an operator may do").
                    if picked or n > 1:
                        continue
                    picked.append((kind, None))
                    break
                free = [g.id for g in self.pool if g.id not in used_agents]
                if kind in ("kill9_restart", "sigterm_restart"):
                    # --never-restart: these live the whole run, so that
                    # their memory and descriptors can be watched.
                    free = [x for x in free if x not in self.never_restart]
                if not free:
                    continue
                # Favour the leader: most interesting faults hit it.
                lead, _ = self.current_leader()
                if lead in free and self.rng.random() < 0.5:
                    aid = lead
                else:
                    aid = self.rng.choice(free)
                used_agents.add(aid)
                picked.append((kind, aid))
                break
        return picked

    def apply(self, kind, aid, rnd):
        rng = self.rng
        f = None
        lead = self.current_leader()
        if aid is not None:
            g = self.agent(aid)
            lease = self.lease[aid]
            T = lease * 1.5
        t_before = time.monotonic()
        if kind in ("pause_short", "pause_long"):
            hold = rng.uniform(0.2, 0.9 * T) if kind == "pause_short" \
                else rng.uniform(1.2 * T, 1.2 * T + 4.0)
            f = Fault(kind, aid, hold, "T=%.1fs" % T)
            g.pause()
            f.victims = [aid]
            f.heal_fn = g.resume
        elif kind in ("kill9_restart", "sigterm_restart"):
            hold = rng.uniform(0.0, 3.0)
            f = Fault(kind, aid, hold)
            if kind == "kill9_restart":
                g.kill()
            else:
                try:
                    rc = g.stop(timeout=15)
                except subprocess.TimeoutExpired:
                    g.kill()
                    raise Violation("%s did not exit within 15 s of SIGTERM" % aid) from None
                if rc != 0:
                    raise Violation("%s exited with status %s on SIGTERM" % (aid, rc))
            f.victims = [aid]
            f.heal_fn = lambda: self.start_agent(g)
        elif kind in ("resign_hold0", "resign_hold2"):
            h = "0s" if kind == "resign_hold0" else "2s"
            f = Fault(kind, aid, 0.0, "hold=%s" % h)
            try:
                r = g.request("POST", "/v1/resign?hold=%s" % h, timeout=5.0)
            except Exception as e:  # noqa: BLE001
                raise Violation("%s: POST /v1/resign failed: %r" % (aid, e)) from None
            if r.status != 200 or r.json().get("resigned") is not True:
                raise Violation("%s: POST /v1/resign answered %s %r" % (aid, r.status, r.body))
        elif kind.startswith("proxy_"):
            ps = self.proxies[aid]
            hold = rng.choice([rng.uniform(0.2, 0.9 * lease),
                               rng.uniform(lease + 0.3, 1.5 * T + 2.0)])
            if kind == "proxy_blackhole":
                for p in ps:
                    p.blackhole()
                f = Fault(kind, aid, hold)
            elif kind == "proxy_reset":
                for p in ps:
                    p.reset()
                f = Fault(kind, aid, hold)
            elif kind == "proxy_drop_replies":
                for p in ps:
                    p.drop_replies()
                f = Fault(kind, aid, hold)
            else:
                ms = rng.choice([50, 200, 500, 1000, 2000])
                hold = rng.uniform(1.0, 6.0)
                for p in ps:
                    p.delay(ms)
                f = Fault(kind, aid, hold, "delay=%dms" % ms)
                f.delay_s = ms / 1000.0
            f.victims = [aid]

            def heal(ps=ps):
                for p in ps:
                    p.passthrough()
            f.heal_fn = heal
        elif kind == "delete_contender":
            # With --partitions: a contender of a random partition.
            cpath = self.path
            if self.names:
                cpath = "%s/partitions/%s" % (self.path, rng.choice(self.names))
            try:
                cs = self.observer.contenders(cpath)
            except Exception as e:  # noqa: BLE001
                cs = []
                say("  (could not list contenders: %r)" % (e,))
            # Only a node whose owner is connected and running: one that
            # is still riding out the last round's fault could not hear of
            # the delete (see pick_round).
            ok = set()
            for g in self.pool:
                st = g.status() if g.running() and not g.paused else None
                if st is not None and st["session"]["state"] == "connected":
                    ok.add(g.id)
            cs = [c for c in cs if c[1] in ok]
            if not cs:
                f = Fault(kind, "-", 0.0, "no node of a connected agent to delete")
            else:
                name, data, _st = rng.choice(cs)
                f = Fault(kind, "node", 0.0, "%s%s, owner %s%s" % (
                    "partition %s: " % cpath.rsplit("/", 1)[1] if self.names else "",
                    name.split("-")[0] + "..." + name[-10:], data,
                    " (the leader)" if data == lead[0] and not self.names else ""))
                if self.names:
                    own = self.owners_now().get(cpath.rsplit("/", 1)[1], (None, None))
                    if data == own[0]:
                        f.detail += " (the owner)"
                        f.part_hit = (cpath.rsplit("/", 1)[1], data)
                from kazoo.exceptions import NoNodeError
                try:
                    self.observer.zk.delete("%s/%s" % (cpath, name))
                except NoNodeError:
                    f.detail += ", already gone"
                except Exception as e:  # noqa: BLE001 - ZooKeeper faulted
                    f.detail += ", delete failed: %r" % (e,)
        elif kind in ZK_KINDS:
            srv = rng.choice(self.ens.servers)
            zk_leader = self.ens.leader()
            where = {}
            for a_id, sid in self.sessions_by_agent().items():
                s = self.ens.server_of_session(sid)
                if s is not None:
                    where[a_id] = s
            is_leader = srv is zk_leader
            f = Fault(kind, "zk%d" % srv.myid, 0.0, "%s; agents on it: %s" % (
                "ZK leader" if is_leader else ("ZK follower" if zk_leader else "ZK mode ?"),
                sorted(a_id for a_id, s in where.items() if s is srv)))
            if kind == "zk_pause":
                f.hold = rng.choice([rng.uniform(0.5, 2.0), rng.uniform(3.0, 7.0)])
                srv.pause()
                # With the ZooKeeper leader stopped no agent can renew; with
                # a follower stopped, the agents connected to it cannot
                # there, until they move to another server.
                f.victims = [g.id for g in self.pool] if is_leader else \
                    [a_id for a_id, s in where.items() if s is srv]

                def heal(srv=srv):
                    srv.resume()
                    self.ens.wait_quorum(90, expect=3, what="zk%d back in the quorum"
                                         % srv.myid)
            else:
                f.hold = rng.uniform(0.5, 5.0)
                srv.kill()
                # Its clients lose their connection at once and move to
                # another server (the lease rule is not applied: renewals
                # may succeed there within the lease).
                f.affected = [g.id for g in self.pool] if is_leader else \
                    [a_id for a_id, s in where.items() if s is srv]

                def heal(srv=srv):
                    srv.start()
                    self.ens.wait_quorum(90, expect=3, what="zk%d back in the quorum"
                                         % srv.myid)
            f.heal_fn = heal
        f.t_before = t_before
        f.t_applied = time.monotonic()
        f.leader_at_start = lead
        f.owners_at_start = self.owners_now() if self.names else None
        f.round = rnd
        self.counts[kind] += 1
        self.faults.append(f)
        lead_txt = "leader %s e=%#x" % lead if lead[0] else "no leader"
        say("#%d %-19s %-6s hold=%5.2fs  %s%s" % (
            rnd, kind, f.target, f.hold, lead_txt, ("; " + f.detail) if f.detail else ""))
        self.journal.append((rnd, kind, f.target, f.hold, f.detail))
        return f

    def heal(self, f):
        f.t_heal = time.monotonic()
        if f.heal_fn is not None:
            try:
                f.heal_fn()
            except AssertionError as e:
                raise HarnessError("healing %s %s: %s" % (f.kind, f.target, e)) from None
            say("   heal %-14s %-6s after %.2fs" % (f.kind, f.target, f.t_heal - f.t_applied))
        f.done = True

    def run_round(self, rnd):
        picked = self.pick_round()
        faults = []
        try:
            for kind, aid in picked:
                faults.append(self.apply(kind, aid, rnd))
            pending = sorted([f for f in faults if f.heal_fn is not None],
                             key=lambda f: f.t_applied + f.hold)
            for f in faults:
                if f.heal_fn is None:
                    f.t_heal = f.t_applied
                    f.done = True
            for f in pending:
                wait = f.t_applied + f.hold - time.monotonic()
                if wait > 0:
                    time.sleep(wait)       # the fault's duration
                self.heal(f)
        finally:
            for f in faults:
                if not f.done and f.heal_fn is not None:
                    try:
                        self.heal(f)
                    except BaseException:  # noqa: BLE001 - cleanup heals the rest
                        pass
        self.check_alive()
        gap = self.rng.uniform(0.0, 2.0)
        time.sleep(gap)                    # a quiet spell between faults
        self.check_alive()

    def stage_worst_case(self, rnd):
        """--worst-case: the lease's worst case (zk-session-tracking.md). If
        the leading agent talks to a ZooKeeper follower F, then right after
        the leader logs an acknowledged renewal (`audit: lease`): SIGSTOP F,
        so that the touches it took since its last report never reach the
        ZooKeeper leader, and black-hole all the agent's proxies, so that it
        cannot move to another server (alone, it would, and ride through).
        Hold past the session timeout, then heal both. Its own RNG: the
        seeded fault sequence is unchanged."""
        from test_lease_margin import wait_renewal_then
        lead, e0 = self.current_leader()
        zl = self.ens.leader()
        where = {}
        for a_id, sid in self.sessions_by_agent().items():
            srv = self.ens.server_of_session(sid)
            if srv is not None:
                where[a_id] = srv
        srv = where.get(lead)
        if lead is None or zl is None or srv is None or srv is zl:
            self.staged["not staged (leader on the ZK leader, or unknown)"] += 1
            say("#%d worst case not staged: leader %s on %s, ZK leader %s" % (
                rnd, lead, srv and "zk%d" % srv.myid, zl and "zk%d" % zl.myid))
            return
        g = self.agent(lead)
        T = self.lease[lead] * 1.5
        ps = self.proxies[lead]
        t_before = time.monotonic()

        def cut(srv=srv, ps=ps):
            srv.pause()
            for p in ps:
                p.blackhole()
        try:
            seen = wait_renewal_then(g, cut, timeout=T, trigger="log")
        except AssertionError as e:
            self.staged["not staged (no renewal seen)"] += 1
            say("#%d worst case not staged: %s" % (rnd, str(e)[:120]))
            return
        f = Fault("zk_pause_renewed", "zk%d" % srv.myid, T + self.worst_rng.uniform(1.0, 3.0),
                  "ZK follower under leader %s, stopped and the leader cut off right "
                  "after its renewal (%s)"
                  % (lead, seen.strip()[-60:]))
        f.t_before = t_before
        f.t_applied = time.monotonic()
        f.leader_at_start = (lead, e0)
        f.round = rnd
        f.victims = [a_id for a_id, s_ in where.items() if s_ is srv]

        def heal(srv=srv, ps=ps):
            for p in ps:
                p.passthrough()
            srv.resume()
            self.ens.wait_quorum(90, expect=3, what="zk%d back in the quorum" % srv.myid)
        f.heal_fn = heal
        self.counts[f.kind] += 1
        self.staged["staged"] += 1
        self.faults.append(f)
        say("#%d %-19s %-6s hold=%5.2fs  leader %s e=%#x; %s" % (
            rnd, f.kind, f.target, f.hold, lead, e0, f.detail))
        try:
            time.sleep(max(0.0, f.t_applied + f.hold - time.monotonic()))
            self.heal(f)
        finally:
            if not f.done:
                try:
                    self.heal(f)
                except BaseException:  # noqa: BLE001
                    pass
        self.check_alive()
        time.sleep(self.worst_rng.uniform(0.5, 2.0))

    def members(self):
        """--partitions: the agent ids of the member nodes, sorted."""
        mpath = "%s/members" % self.path
        out = []
        for c in self.observer.zk.get_children(mpath):
            try:
                data, _st = self.observer.zk.get("%s/%s" % (mpath, c))
            except Exception:  # noqa: BLE001 - gone meanwhile
                continue
            out.append(data.decode(errors="replace"))
        return sorted(out)

    def part_checkpoint(self, what):
        """--partitions: every agent up and healed: one member node per agent,
        the partitions balanced (each agent owns exactly what it is
        assigned, floor or ceil of N/K), and each claim node names its owner
        with the epoch it answers."""
        want = sorted(g.id for g in self.pool)
        for attempt in range(3):
            try:
                owner = partharness.wait_settled(self.pool, self.names, timeout=60, what=what)
                zkharness.poll(lambda: self.members() == want, 60,
                               what="one member node per agent %s" % want)
            except AssertionError as e:
                raise Violation("the partitions did not settle (%s): %s" % (what, e)) from None
            ep = partharness.epochs(self.pool)
            wrong = {}
            for name in self.names:
                cid, mzxid = partharness.claim(self.observer, self.path, name)
                if cid != owner.get(name) or mzxid != ep.get(name):
                    wrong[name] = (owner.get(name), ep.get(name), cid, mzxid)
            if not wrong:
                break
            # A term may have begun in between: settle once more.
        else:
            raise Violation("settled, but claim nodes disagree (owner, epoch answered, claim "
                            "names, mzxid): %s" % wrong)
        say("checkpoint %d: balanced: %s; one member node per agent" % (
            self.checkpoints, self.shares(owner)))
        return owner

    def checkpoint(self, what):
        """Every agent up and healed: the election must settle."""
        self.checkpoints += 1
        if self.names:
            return self.part_checkpoint(what)
        try:
            lead, ls, _ = settle(self.pool, timeout=60, what=what)
            one_node_each(self.observer, self.path, self.pool, timeout=60)
        except AssertionError as e:
            raise Violation("the election did not settle (%s): %s" % (what, e)) from None
        data, stat = self.observer.election_node(self.path)
        if data != lead.id or stat.mzxid != ls["epoch"]:
            # A new term may have begun in between: settle once more.
            lead, ls, _ = settle(self.pool, timeout=60, what=what)
            data, stat = self.observer.election_node(self.path)
            if data != lead.id or stat.mzxid != ls["epoch"]:
                raise Violation("settled on %s epoch %#x, but the election node names %r "
                                "with mzxid %#x" % (lead.id, ls["epoch"], data, stat.mzxid))
        say("checkpoint %d: %s leads, epoch %#x, one node per agent" % (
            self.checkpoints, lead.id, ls["epoch"]))
        return lead, ls

    def chaos(self):
        end = time.monotonic() + self.args.minutes * 60
        rnd = 0
        while time.monotonic() < end:
            rnd += 1
            self.run_round(rnd)
            if self.worst_rng is not None and self.args.ensemble and \
                    self.worst_rng.random() < self.args.worst_case and time.monotonic() < end:
                self.stage_worst_case(rnd)
            if self.args.checkpoint_every and rnd % self.args.checkpoint_every == 0 \
                    and time.monotonic() < end:
                self.checkpoint("checkpoint after round %d" % rnd)
        return rnd

    # -- the end -------------------------------------------------------------
    def heal_all(self):
        for ps in self.proxies.values():
            for p in ps:
                try:
                    p.passthrough()
                except Exception:  # noqa: BLE001
                    pass
        if self.ens is not None:
            self.ens.ensure_healthy(120)
        for g in self.pool:
            if g.paused and g.running():
                g.resume()
            if not g.running():
                self.start_agent(g)

    def txn_records(self):
        """The transactions a quorum of servers logged, and how many were not."""
        if self.ens is not None:
            by_server = [zkrecords.txnlog_files(s.data) for s in self.ens.servers]
            quorum = len(by_server) // 2 + 1
        else:
            by_server = [zkrecords.txnlog_files(os.path.join(self.zk.dir, "data"))]
            quorum = 1
        return zkrecords.read_txnlogs(by_server, quorum)

    def verify_partitions(self, rounds):
        """--partitions: every invariant of verify(), per partition: its
        answers (from /v1/partitions), its claims (PartZKChecker, else the
        txn logs) and its records (zkrecords.Records at its claim node)."""
        answers = self.recorder.snapshot()
        txns, uncommitted = self.txn_records()
        with self.checker._lock:
            claims = dict(self.checker.claims)
        n_samples = n_leaders = tl_total = from_log = n_terms = changes = 0
        takeovers, max_gap = [], 0.0
        sfig = {"answers_checked": 0, "answers_without_wall_clock": 0, "terms": 0,
                "stale_answers": 0, "stale_groups": 0, "claims": 0, "sessions": 0,
                "nodes": 0, "min_claim_to_answer_ms": None}
        margin_values = collections.defaultdict(list)
        n_stale_lines = 0
        for name in self.names:
            samples = [x.sample() for x in answers.get(name, [])]
            leaders = [x for x in samples if x.is_leader]
            n_samples += len(samples)
            n_leaders += len(leaders)
            for x in zkharness.check_single_leader(leaders):
                self.problems.append("partition %s: single leader / epochs: %s" % (name, x))
            rec = zkrecords.Records(txns, "%s/partitions/%s" % (self.path, name))
            tl = rec.claim_map()
            tl_total += len(tl)
            for a, e in sorted({(x.agent, x.epoch) for x in leaders
                                if isinstance(x.epoch, int)}, key=lambda t: t[1]):
                if claims.get(e) == "%s/%s" % (name, a):
                    continue
                if tl.get(e) == a:
                    from_log += 1
                else:
                    self.problems.append(
                        "partition %s: %s led with epoch %#x, but no claim with that mzxid "
                        "names it (PartZKChecker saw %r, txn log has %r)"
                        % (name, a, e, claims.get(e), tl.get(e)))
            if not rec.claims or not rec.sessions:
                raise HarnessError("partition %s: the transaction logs gave %d claims and %d "
                                   "sessions: nothing to judge the answers by"
                                   % (name, len(rec.claims), len(rec.sessions)))
            stale, sproblems, sf = zkrecords.check_answers(rec, samples, starts=self.starts)
            for x in sproblems[:10]:
                self.problems.append("partition %s: ZooKeeper records: %s" % (name, x))
            for x in stale[:10]:
                self.problems.append("partition %s: stale answer: %s" % (name, x))
            n_stale_lines += len(stale)
            for k in ("answers_checked", "answers_without_wall_clock", "terms",
                      "stale_answers", "stale_groups", "claims", "nodes"):
                sfig[k] += sf[k]
            sfig["sessions"] = max(sfig["sessions"], sf["sessions"])
            if sf["min_claim_to_answer_ms"] is not None and (
                    sfig["min_claim_to_answer_ms"] is None or
                    sf["min_claim_to_answer_ms"] < sfig["min_claim_to_answer_ms"]):
                sfig["min_claim_to_answer_ms"] = sf["min_claim_to_answer_ms"]
            for k, v in sf["margin_values"].items():
                margin_values[k] += v

            # Figures: terms, owner changes, takeovers, gaps without an owner.
            first_seen = {}
            for x in sorted(leaders, key=lambda x: x.t_end):
                first_seen.setdefault(x.epoch, x.t_end)
            terms = sorted(first_seen.items(), key=lambda t: t[1])
            owner = {x.epoch: x.agent for x in leaders}
            n_terms += len(terms)
            changes += sum(1 for (e1, _), (e2, _) in zip(terms, terms[1:])
                           if owner[e1] != owner[e2])
            last_seen = {}
            for x in leaders:
                last_seen[x.epoch] = max(last_seen.get(x.epoch, 0.0), x.t_end)
            ends = sorted((x.t_end, x.epoch) for x in leaders)
            keys = [t for t, _ in ends]
            for f in self.faults:
                lead, e0 = (f.owners_at_start or {}).get(name, (None, None))
                if lead is None:
                    continue
                hit = lead in (f.affected if f.affected is not None else f.victims) or \
                    f.part_hit == (name, lead)
                if not hit or last_seen.get(e0, 0.0) > f.t_heal + 0.5:
                    continue
                i = bisect.bisect_left(keys, f.t_before)
                t_new = next((t for t, e in ends[i:] if e > e0), None)
                if t_new is not None:
                    takeovers.append((t_new - f.t_before, "round %d %s %s, partition %s" % (
                        f.round, f.kind, f.target, name)))
            gaps = [b - a for a, b in zip(keys, keys[1:])]
            if gaps:
                max_gap = max(max_gap, max(gaps))
        if sfig["answers_without_wall_clock"]:
            raise HarnessError("%d answers have no wall-clock time"
                               % sfig["answers_without_wall_clock"])
        if self.checker.written:
            self.problems.append("contender nodes written after creation (version > 0): %s"
                                 % sorted(self.checker.written))
        if self.checker.polls < 3:
            self.problems.append("the ZooKeeper checker barely ran (%d polls)"
                                 % self.checker.polls)
        sfig["margins"] = {k: (min(v), sorted(v)[len(v) // 2], len(v))
                           for k, v in margin_values.items()}
        sfig["uncommitted"] = uncommitted
        sfig["txns"] = len(txns)
        self.stale_fig = sfig
        return {
            "rounds": rounds,
            "samples": n_samples,
            "leader_samples": n_leaders,
            "terms": n_terms,
            "leader_changes": changes,
            "claims_seen_by_checker": len(claims),
            "claims_in_txn_log": tl_total,
            "epochs_verified_from_txn_log": from_log,
            "checker_polls": self.checker.polls,
            "stale_answers": sfig["stale_answers"],
            "takeovers": takeovers,
            "max_leaderless_gap_s": max_gap,
            "violations_single_leader": 0,
        }

    def verify(self, rounds):
        """The whole-run invariants; returns the summary figures."""
        if self.names:
            return self.verify_partitions(rounds)
        samples = list(self.recorder.samples)
        leaders = [s for s in samples if s.is_leader]
        v = zkharness.check_single_leader(leaders)
        for x in v:
            self.problems.append("single leader / epochs: " + x)

        # ZooKeeper's own records: the transactions a quorum of servers logged.
        if self.ens is not None:
            by_server = [zkrecords.txnlog_files(s.data) for s in self.ens.servers]
            quorum = len(by_server) // 2 + 1
        else:
            by_server = [zkrecords.txnlog_files(os.path.join(self.zk.dir, "data"))]
            quorum = 1
        txns, uncommitted = zkrecords.read_txnlogs(by_server, quorum)
        rec = zkrecords.Records(txns, self.path)
        tl = rec.claim_map()

        # Every epoch is a claim's mzxid (the checker, else the txn logs).
        with self.checker._lock:
            claims = dict(self.checker.claims)
        pairs = sorted({(s.agent, s.epoch) for s in leaders
                        if isinstance(s.epoch, int)}, key=lambda t: t[1])
        missing = [(a, e) for a, e in pairs if claims.get(e) != a]
        from_log = 0
        for a, e in missing:
            if tl.get(e) == a:
                from_log += 1
            else:
                self.problems.append(
                    "%s led with epoch %#x, but no claim with that mzxid names it "
                    "(ZKChecker saw %r, txn log has %r)" % (a, e, claims.get(e), tl.get(e)))
        if self.checker.written:
            self.problems.append("contender nodes written after creation (version > 0): %s"
                                 % sorted(self.checker.written))
        if self.checker.polls < 3:
            self.problems.append("the ZooKeeper checker barely ran (%d polls)"
                                 % self.checker.polls)

        # Stale answers, judged from ZooKeeper's records alone (zkrecords).
        if not rec.claims or not rec.sessions:
            raise HarnessError("the transaction logs gave %d claims and %d sessions (%d "
                               "transactions): nothing to judge the answers by"
                               % (len(rec.claims), len(rec.sessions), len(txns)))
        stale, sproblems, sfig = zkrecords.check_answers(rec, samples, starts=self.starts)
        for x in sproblems[:20]:
            self.problems.append("ZooKeeper records: " + x)
        for x in stale[:20]:
            self.problems.append("stale answer: " + x)
        if len(stale) > 20:
            self.problems.append("... and %d more stale answers" % (len(stale) - 20))
        if sfig["answers_without_wall_clock"]:
            raise HarnessError("%d answers have no wall-clock time"
                               % sfig["answers_without_wall_clock"])
        sfig["uncommitted"] = uncommitted
        sfig["txns"] = len(txns)
        self.stale_fig = sfig

        # Figures: terms, leader changes, takeover times.
        first_seen = {}
        for s in sorted(leaders, key=lambda s: s.t_end):
            first_seen.setdefault(s.epoch, s.t_end)
        terms = sorted(first_seen.items(), key=lambda t: t[1])
        owner = {s.epoch: s.agent for s in leaders}
        changes = sum(1 for (e1, _), (e2, _) in zip(terms, terms[1:])
                      if owner[e1] != owner[e2])
        takeovers = []
        last_seen = {}
        for s in leaders:
            last_seen[s.epoch] = max(last_seen.get(s.epoch, 0.0), s.t_end)
        ends = sorted((s.t_end, s.epoch) for s in leaders)
        keys = [t for t, _ in ends]
        for f in self.faults:
            lead, e0 = f.leader_at_start
            if lead is None:
                continue
            hit = lead in (f.affected if f.affected is not None else f.victims) or (f.kind.startswith("resign") and f.target == lead) \
                or (f.kind == "delete_contender" and "(the leader)" in f.detail)
            # Only faults that ended the leader's term (it did not answer
            # is_leader with that epoch after the heal).
            if not hit or last_seen.get(e0, 0.0) > f.t_heal + 0.5:
                continue
            i = bisect.bisect_left(keys, f.t_before)
            t_new = next((t for t, e in ends[i:] if e > e0), None)
            if t_new is not None:
                takeovers.append((t_new - f.t_before, "round %d %s %s" % (
                    f.round, f.kind, f.target)))
        gaps = [b - a for a, b in zip(keys, keys[1:])]
        return {
            "rounds": rounds,
            "samples": len(samples),
            "leader_samples": len(leaders),
            "terms": len(terms),
            "leader_changes": changes,
            "claims_seen_by_checker": len(claims),
            "claims_in_txn_log": len(tl),
            "epochs_verified_from_txn_log": from_log,
            "checker_polls": self.checker.polls,
            "stale_answers": sfig["stale_answers"],
            "takeovers": takeovers,
            "max_leaderless_gap_s": max(gaps) if gaps else float("nan"),
            "violations_single_leader": len(v),
        }

    def audit(self):
        """The exact check: every agent's leadership intervals from its audit
        log lines (complete once every agent stopped), no two overlapping, and
        every is_leader true sample inside one (zkharness.audit_agents)."""
        if not zkharness.audit_enabled():
            self.audit_fig = None
            say("AUDIT CHECK OFF (ZKELECT_AUDIT=off): leadership intervals not checked")
            return
        try:
            if self.names:
                problems, self.audit_fig = partharness.audit_partitions(
                    self.pool, self.recorder.snapshot())
            else:
                problems, self.audit_fig = zkharness.audit_agents(self.pool,
                                                                  self.recorder.samples)
        except Exception as e:  # noqa: BLE001 - a broken parser is a broken run
            raise HarnessError("the leadership audit failed: %r" % (e,)) from None
        for p in problems:
            self.problems.append("audit: " + p)

    def dump_logs(self):
        print("\n---- agent logs (tails) ----")
        for g in self.pool:
            print("==== %s (%s) ====" % (g.id, g.log_path))
            print(g.log_text(6000))
        print("---- kept: agents %s, ZooKeeper %s ----" % (
            self.aset.dir if self.aset else None,
            self.ens.dir if self.ens else (self.zk.dir if self.zk else None)))

    def cleanup(self):
        for step in (lambda: getattr(self, "sampler", None) and self.sampler.stop(),
                     lambda: self.recorder and self.recorder.stop(),
                     lambda: self.checker and self.checker.stop(),
                     lambda: self.aset and self.aset.cleanup(),
                     lambda: [p.close() for ps in self.proxies.values() for p in ps],
                     lambda: self.observer and self.observer.close(),
                     lambda: self.ens and self.ens.cleanup(),
                     lambda: self.zk and self.zk.cleanup()):
            try:
                step()
            except BaseException:  # noqa: BLE001 - reach every process
                pass


class ResourceSampler:
    """Every `every` seconds, each running agent's resident memory and open
    descriptors from /proc, to tell a leak from noise over a long run. A
    process restarted by a fault starts a new series; slopes are fitted per
    process lifetime (least squares) over lifetimes long enough to mean
    something."""

    def __init__(self, pool, every):
        self.pool = pool
        self.every = every
        self.samples = []           # (t_monotonic, agent id, pid, rss KiB, fds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)

    def sample(self):
        t = time.monotonic()
        for g in list(self.pool):
            proc = g.proc
            if proc is None or proc.poll() is not None:
                continue
            try:
                with open("/proc/%d/status" % proc.pid) as f:
                    rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
                fds = len(os.listdir("/proc/%d/fd" % proc.pid))
            except (OSError, StopIteration, ValueError):
                continue        # it ended between the check and the read
            self.samples.append((t, g.id, proc.pid, rss, fds))
            say("resources: %s pid %d rss %d KiB, %d descriptors" % (g.id, proc.pid, rss, fds))

    def _run(self):
        self.sample()
        while not self._stop.wait(self.every):
            self.sample()

    @staticmethod
    def _slope(points):
        n = len(points)
        mx = sum(x for x, _ in points) / n
        my = sum(y for _, y in points) / n
        den = sum((x - mx) ** 2 for x, _ in points)
        return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0

    WARMUP_S = 600.0    # the allocator's arenas and the log queue fill up first

    def figures(self, min_span_s):
        """[(agent, pid, minutes, n, rss first/after the warm-up/last KiB,
        KiB per hour, fds first/last, descriptors per hour)] for each
        lifetime of at least min_span_s with three samples or more after
        WARMUP_S; the slopes are fitted after WARMUP_S."""
        by = {}
        for t, aid, pid, rss, fds in self.samples:
            by.setdefault((aid, pid), []).append((t, rss, fds))
        out = []
        for (aid, pid), pts in sorted(by.items()):
            if len(pts) < 3 or pts[-1][0] - pts[0][0] < min_span_s:
                continue
            settled = [p for p in pts if p[0] - pts[0][0] >= self.WARMUP_S]
            if len(settled) < 3:
                continue
            hours = [((t - pts[0][0]) / 3600.0) for t, _, _ in settled]
            out.append((aid, pid, (pts[-1][0] - pts[0][0]) / 60.0, len(pts),
                        pts[0][1], settled[0][1], pts[-1][1],
                        self._slope([(h, r) for h, (_, r, _) in zip(hours, settled)]),
                        pts[0][2], pts[-1][2],
                        self._slope([(h, d) for h, (_, _, d) in zip(hours, settled)])))
        return out


def finish_partitions(c, timeout=60):
    """--partitions: every agent stops gracefully (exit 0); then no member
    node and no contender node of any partition is left (poll: an earlier
    session's expiry may lag). Returns the seconds that took."""
    for a in c.aset.agents:
        if a.running():
            rc = a.stop()
            assert rc == 0, "%s exited %s on SIGTERM" % (a.id, rc)
    t0 = time.monotonic()
    paths = ["%s/members" % c.path] + ["%s/partitions/%s" % (c.path, n) for n in c.names]
    left = {}

    def empty():
        left.clear()
        for p in paths:
            ch = c.observer.zk.get_children(p)
            if ch:
                left[p] = ch
        return not left
    try:
        zkharness.poll(empty, timeout, interval=0.05,
                       what="no member or contender node left")
    except AssertionError as e:
        raise AssertionError("%s; left: %r" % (e, left)) from None
    return time.monotonic() - t0


def summary_lines(c, fig, t_settle, t_empty):
    out = ["summary (seed %d, %s, %d agents, %s%.1f min):" % (
        c.args.seed, "3-server ensemble" if c.args.ensemble else "standalone ZooKeeper",
        c.args.agents, "%d partitions, " % len(c.names) if c.names else "", c.args.minutes)]
    out.append("  rounds: %d, faults: %d, checkpoints settled: %d" % (
        fig["rounds"], sum(c.counts.values()), c.checkpoints))
    out.append("  actions: " + ", ".join("%s=%d" % kv for kv in sorted(c.counts.items())))
    out.append("  samples taken: %d (is_leader true: %d), checker polls: %d" % (
        fig["samples"], fig["leader_samples"], fig["checker_polls"]))
    out.append("  terms (epochs answered): %d, leader changes: %d, claims seen by checker: "
               "%d, claims committed (txn log): %d, epochs verified only from txn log: %d"
               % (fig["terms"], fig["leader_changes"], fig["claims_seen_by_checker"],
                  fig["claims_in_txn_log"], fig["epochs_verified_from_txn_log"]))
    sf = getattr(c, "stale_fig", None)
    if sf is not None:
        out.append("  stale answers (from ZooKeeper's records): %d, in %d groups; is_leader "
                   "answers checked: %d over %d terms, against %d committed txns (%d logged "
                   "without a quorum, ignored): %d claims, %d sessions, %d contender nodes" % (
                       sf["stale_answers"], sf["stale_groups"], sf["answers_checked"],
                       sf["terms"], sf["txns"], sf["uncommitted"], sf["claims"],
                       sf["sessions"], sf["nodes"]))
        if sf["min_claim_to_answer_ms"] is not None:
            out.append("  clocks: the earliest answer arrived %.1f ms after its claim's txn "
                       "time (never before: the clocks agree)" % sf["min_claim_to_answer_ms"])
        for kind, (mn, med, n) in sorted(sf["margins"].items()):
            out.append("  term ended by %s: last is_leader true sent %.0f ms before its txn "
                       "time (min; median %.0f ms, %d terms)%s" % (
                           kind, mn * 1000.0, med * 1000.0, n,
                           "; an operator's delete: %.0f ms allowed after it"
                           % (zkrecords.FOREIGN_DELETE_NOTICE_S * 1000.0)
                           if kind == "delete-other" else ""))
    if c.staged:
        out.append("  worst case staged (--worst-case): " + ", ".join(
            "%s=%d" % kv for kv in sorted(c.staged.items())))
    tk = sorted(fig["takeovers"])
    if tk:
        out.append("  takeover (fault that ended the leader's term -> first is_leader "
                   "with a higher epoch): n=%d, median %.2fs, max %.2fs (%s)" % (
                       len(tk), tk[len(tk) // 2][0], tk[-1][0], tk[-1][1]))
    out.append("  max leaderless gap: %.2fs; final settle %.2fs; path empty %.2fs after "
               "the last SIGTERM" % (fig["max_leaderless_gap_s"], t_settle, t_empty))
    af = getattr(c, "audit_fig", None)
    if af is not None and c.names:
        out.append("  exact " + partharness.format_partition_audit(af))
    elif af is not None:
        out.append("  exact " + zkharness.format_audit_figures(af) +
                   "; is_leader answers checked against them: %d" % af.get("answers_checked", 0))
    else:
        out.append("  exact audit: OFF (ZKELECT_AUDIT=off)")
    rs = getattr(c, "sampler", None)
    if rs is not None:
        figs = rs.figures(min_span_s=max(3 * rs.every, 2 * ResourceSampler.WARMUP_S))
        out.append("  resources: %d samples every %gs; %d agent lifetimes of 20 min or more; "
                   "slopes fitted after the first %.0f min" % (
                       len(rs.samples), rs.every, len(figs), ResourceSampler.WARMUP_S / 60))
        for (aid, pid, mins, n, r0, rw, r1, rslope, f0, f1, fslope) in figs:
            out.append("    %s pid %d, %.0f min, %d samples: rss %d KiB at start, %d after the "
                       "warm-up, %d at the end (%+.1f KiB/h after the warm-up), descriptors "
                       "%d -> %d (%+.2f /h)" % (aid, pid, mins, n, r0, rw, r1, rslope, f0, f1,
                                                fslope))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--ensemble", action="store_true",
                    help="a 3-server ensemble (and ZooKeeper server faults)")
    ap.add_argument("--overlap", type=float, default=0.3,
                    help="probability that a round injects two faults at once (0.3)")
    ap.add_argument("--checkpoint-every", type=int, default=6,
                    help="settle check every N rounds (6; 0: only at the end)")
    ap.add_argument("--keep", action="store_true", help="keep temp dirs even on success")
    ap.add_argument("--worst-case", type=float, default=0.0, metavar="P",
                    help="with --ensemble: after each round, with probability P, stage the "
                    "lease's worst case (SIGSTOP the leader's ZooKeeper follower right after "
                    "its renewal); its own RNG, so the seed's faults stay the same (0)")
    ap.add_argument("--sample-every", type=float, default=60.0, metavar="S",
                    help="sample each agent's RSS and open descriptors every S seconds (60)")
    ap.add_argument("--partitions", type=int, default=0, metavar="N",
                    help="agents run N partitions (partitions.count); traffic, checks and "
                    "the audit are per partition (0: one election)")
    ap.add_argument("--never-restart", type=int, default=0, metavar="N",
                    help="the first N agents get every fault but kill -9 and SIGTERM, so "
                    "they live the whole run (for --sample-every's slopes) (0)")
    args = ap.parse_args()
    if not 0 <= args.never_restart < args.agents:
        ap.error("--never-restart must be at least 0 and below --agents")
    if args.sample_every <= 0:
        ap.error("--sample-every must be positive")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 10 ** 6)
    if args.agents < 2:
        ap.error("--agents must be at least 2")
    if not 0 <= args.partitions <= 1024:
        ap.error("--partitions must be 0 to 1024")
    if args.partitions and args.worst_case:
        ap.error("--worst-case stages one election's worst case: not with --partitions")
    if args.keep:
        os.environ["ZKELECT_TEST_KEEP"] = "1"

    def on_signal(signum, frame):
        raise Interrupted(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGALRM, on_signal)
    # Everything is bounded: setup, the run, settling, stopping.
    budget = int(args.minutes * 60 + 600)
    signal.alarm(budget)

    repro = "/usr/bin/python3 tests/chaos/chaos.py --minutes %g --seed %d --agents %d%s%s" % (
        args.minutes, args.seed, args.agents, " --ensemble" if args.ensemble else "",
        " --worst-case %g" % args.worst_case if args.worst_case else "") + (
        " --partitions %d" % args.partitions if args.partitions else "") + (
        " --never-restart %d" % args.never_restart if args.never_restart else "")
    say("zkelect chaos: seed %d (reproduce: %s); agent binary %s%s"
        % (args.seed, repro, os.environ["ZKELECTD"],
           "; ZKELECT_TEST_LEGACY_LEASE=1: THE OLD LEASE"
           if os.environ.get("ZKELECT_TEST_LEGACY_LEASE") == "1" else ""))
    c = Chaos(args)
    rc = 0
    try:
        try:
            c.start()
        except (AssertionError, RuntimeError, OSError) as e:
            raise HarnessError("setup failed: %s" % e) from None
        c.sampler = ResourceSampler(c.pool, args.sample_every).start()
        rounds = 0
        fatal = None
        try:
            rounds = c.chaos()
            say("chaos over after %d rounds: healing everything" % rounds)
            c.heal_all()
            t0 = time.monotonic()
            c.checkpoint("the final settle")
            t_settle = time.monotonic() - t0
        except Violation as e:
            fatal = str(e)
            t_settle = float("nan")
        c.recorder.stop()
        c.checker.stop()
        c.sampler.stop()
        fig = c.verify(rounds or len({f.round for f in c.faults}))
        if fatal:
            c.problems.insert(0, fatal)
        t_empty = float("nan")
        if not fatal:
            try:
                t_empty = finish_partitions(c) if c.names else \
                    finish(c.aset, c.observer, c.path, timeout=60, audit=False)
            except AssertionError as e:
                c.problems.append("at the end: %s" % e)
        c.audit()
        for line in summary_lines(c, fig, t_settle, t_empty):
            say(line)
        if c.problems:
            rc = 1
            os.environ["ZKELECT_TEST_KEEP"] = "1"
            say("INVARIANT VIOLATED (seed %d; reproduce: %s):" % (args.seed, repro))
            for p in c.problems:
                print("  - " + p)
            c.dump_logs()
        else:
            say("OK: every invariant held (seed %d)" % args.seed)
    except HarnessError as e:
        rc = 2
        os.environ["ZKELECT_TEST_KEEP"] = "1"
        say("HARNESS ERROR (seed %d): %s" % (args.seed, e))
        traceback.print_exc()
        c.dump_logs()
    except (KeyboardInterrupt, Interrupted) as e:
        rc = 130
        say("interrupted (%s); seed %d; stopping everything" % (
            type(e).__name__ if isinstance(e, KeyboardInterrupt) else e, args.seed))
    except Exception:  # noqa: BLE001
        rc = 2
        os.environ["ZKELECT_TEST_KEEP"] = "1"
        say("HARNESS ERROR (seed %d): unexpected exception" % args.seed)
        traceback.print_exc()
        c.dump_logs()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        c.cleanup()
        shutil.rmtree(_BIN_DIR, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
