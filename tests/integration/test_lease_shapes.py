# SPDX-License-Identifier: MIT
"""What the agent makes of the ZooKeeper it finds (doc/design.md, "The
lease"), against real ZooKeeper servers and real agents:

  * a session timeout the server raised: said, with what it means;
  * zookeeper.tick_time above half the negotiated timeout: no lease can be
    proven, so the agent never leads, and says why (status reason, one log
    line), while another agent leads;
  * the server says what it is (srvr, and /zookeeper/config read on a
    session of the probe's own): session.server in the status; a server
    that tells nothing earns no lease and says why, and a read that fails
    after one that worked decides with the ensemble read then.
"""

import socket
import subprocess
import threading

from zkharness import ZKELECTCTL, SLOW, ZooKeeperServer, poll  # noqa: E402



def test_raised_timeout_is_said(agents):
    """The harness's server has minSessionTimeout 400 ms: a 100 ms request
    is raised, and the log says so, with the failover time it implies."""
    a = agents.new("a", session_timeout="100ms", tick_time="")
    s = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a leads")
    assert s["session"]["timeout_ms"] == 400, s
    poll(lambda: "raised the session timeout from 100 to 400 ms" in a.log_text(200000),
         10 * SLOW, what="the warning")
    assert "replaced only after 400 ms" in a.log_text(200000)


def test_tick_time_above_half_the_timeout_refuses_to_lead(agents):
    """A server whose maxSessionTimeout (2 s) lowers the 4 s asked for, with
    tick_time 1.5 s: the negotiated T is below twice tick_time, which
    ZooKeeper's defaults would not negotiate, so the lease cannot be proven.
    a never answers true, says why in its status and once in its log; b,
    configured right, leads. (A file that asks for under 2 x tick_time
    itself is refused by --check-config: tests/data/config/bad.)"""
    zk = ZooKeeperServer(max_session_ms=2000).start()
    try:
        a = agents.new("a", session_timeout="4s", tick_time="1500ms",
                       zk_hostport=zk.hostport)
        s = a.wait_for(lambda s: s["session"]["state"] == "connected" and s["reason"],
                       20 * SLOW, what="a to say why it does not lead")
        assert s["session"]["timeout_ms"] == 2000, s
        assert "below twice zookeeper.tick_time" in s["reason"], s
        assert s["is_leader"] is False
        b = agents.new("b", session_timeout="2s", zk_hostport=zk.hostport)
        b.wait_for(lambda s: s["is_leader"], 30 * SLOW, what="b leads")
        s = a.wait_for(lambda s: s["leader"] and s["leader"]["id"] == "b", 10 * SLOW,
                       what="a to name b as the leader")
        assert s["is_leader"] is False and s["position"] == -1, s
        line = subprocess.run([ZKELECTCTL, "-s", a.socket, "status"], capture_output=True,
                              text=True, timeout=10)
        assert "not leading: session timeout below twice zookeeper.tick_time" in \
            line.stdout, line.stdout + line.stderr
        log = a.log_text(400000)
        assert log.count("no lease can be proven, so this agent will not lead") == 1, \
            log[-3000:]
        assert log.count("election: not leading: session timeout below twice") == 1, \
            log[-3000:]
    finally:
        agents.cleanup()
        zk.cleanup()


def test_server_kind_in_status(agents):
    """A standalone server answers srvr: it votes."""
    a = agents.new("a")
    s = a.wait_for(lambda s: s["session"].get("server") == "voting", 20 * SLOW,
                   what="a to know its server votes")
    assert s["reason"] is None, s


class NoSrvrProxy:
    """Forwards to ZooKeeper, but answers a connection that opens with
    "srvr" as a server that refuses it would, and closes it (ZooKeeper 3.8
    itself answers srvr whatever 4lw.commands.whitelist says; a TLS-only
    port, or a tunnel, would not)."""

    def __init__(self, upstream, refuse_probe=False):
        self.upstream = upstream
        # Also close a connection whose ConnectRequest asks for a 1 ms
        # session (probe.c's), as if nothing could be learned from it.
        self.refuse_probe = refuse_probe
        self.probes_refused = 0
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.hostport = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.refused = 0
        self.closed = False
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def drop_all(self):
        """Ends every connection forwarded so far (the agent reconnects)."""
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        first = c.recv(4096)
        if first.startswith(b"srvr"):
            self.refused += 1
            c.sendall(b"srvr is not executed because it is not in the whitelist.\n")
            c.close()
            return
        if self.refuse_probe and len(first) >= 20 and first[16:20] == b"\0\0\0\x01":
            self.probes_refused += 1
            c.close()
            return
        self.conns.append(c)
        host, port = self.upstream.split(":")
        u = socket.create_connection((host, int(port)))
        u.sendall(first)

        def pump(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        threading.Thread(target=pump, args=(u, c), daemon=True).start()
        pump(c, u)

    def close(self):
        self.closed = True
        self.lsock.close()


def test_server_that_will_not_say_is_known_by_the_ensembles_config(agents, zk_hostport):
    """srvr refused: the ensemble's config (/zookeeper/config, read in the
    probe's own session) lists no observer, so every server votes: the
    agent leads, reports the server voting, and warns of nothing. (Before
    the config was read it reported "unknown" and warned.)"""
    p = NoSrvrProxy(zk_hostport)
    try:
        a = agents.new("a", zk_hostport=p.hostport)
        s = a.wait_for(lambda s: s["is_leader"], 30 * SLOW, what="a leads")
        s = a.wait_for(lambda s: s["session"]["server"] != "unknown", 10 * SLOW,
                       what="the probe to end")
        assert s["session"]["server"] == "voting", s
        assert p.refused >= 1
        log = a.log_text(200000)
        assert "cannot tell whether" not in log, log[-3000:]
        assert "lists no observer" in log
    finally:
        p.close()


def test_server_that_tells_nothing_earns_no_lease(agents, zk_hostport):
    """srvr refused and the probe's session closed before it read the
    ensemble's config: nothing tells an observer from a voting server, or
    (behind a proxy) which server the session is on. The agent earns no
    lease through it, says why, and asks again on its next connection (at
    most once per T): once the probe gets through, it leads. (Before, it
    took such a server for a voting one and led; with srvr answering from
    another backend behind a proxy, that led through an observer:
    test_observers.py.)"""
    p = NoSrvrProxy(zk_hostport, refuse_probe=True)
    try:
        a = agents.new("a", zk_hostport=p.hostport)
        s = a.wait_for(lambda s: s["session"]["server"] == "unidentified",
                       30 * SLOW, what="a to find its server unidentified")
        assert s["is_leader"] is False, s
        assert "cannot be told from an observer" in s["reason"], s
        assert s["session"]["tick_bound_from"] == "assumed", s
        # It moves on and asks again, and still learns nothing: no lead.
        poll(lambda: p.probes_refused >= 2, 10 * SLOW, what="a second probe")
        s = a.status()
        assert s is None or s["is_leader"] is False, s
        log = a.log_text(200000)
        assert "audit: lead " not in log, log[-3000:]
        assert log.count("no lease through %s: /zookeeper/config was not read"
                         % p.hostport) == 1, log[-3000:]
        assert log.count("cannot learn the servers' minSessionTimeout") == 1, log[-3000:]
        # The probe gets through: the next connection's server votes.
        p.refuse_probe = False
        s = a.wait_for(lambda s: s["is_leader"], 20 * SLOW, what="a leads")
        assert s["session"]["server"] == "voting", s
        assert s["session"]["tick_bound_from"] == "servers", s
    finally:
        p.close()


def test_a_read_that_fails_later_decides_with_the_one_before(agents, zk_hostport):
    """The ensemble an earlier probe read stands for a read that gets no
    answer: a leader whose next connection's probe is refused keeps its
    server "voting" (this ensemble has no observer) and its term, instead
    of finding its server unidentified and losing the term."""
    p = NoSrvrProxy(zk_hostport)
    try:
        a = agents.new("a", zk_hostport=p.hostport)
        s = a.wait_for(lambda s: s["is_leader"] and s["session"]["server"] == "voting",
                       30 * SLOW, what="a leads through a voting server")
        epoch = s["epoch"]
        p.refuse_probe = True
        p.drop_all()
        poll(lambda: p.probes_refused >= 1, 10 * SLOW, what="a refused probe")
        s = a.wait_for(lambda s: s["session"]["state"] == "connected" and
                       s["session"]["server"] != "unknown", 10 * SLOW,
                       what="the probe of the new connection to end")
        assert s["session"]["server"] == "voting", s
        assert s["is_leader"] and s["epoch"] == epoch, s
        log = a.log_text(200000)
        assert "no lease through" not in log, log[-3000:]
        assert log.count("audit: lead ") == 1, log[-3000:]
    finally:
        p.close()


def test_tick_bound_learned_from_the_servers(agents):
    """No zookeeper.tick_time (the default): the agent learns that tickTime
    is at most 200 ms (the harness's servers: minSessionTimeout 400 ms)
    and says where its bound comes from; stated below that (20 ms, 10x
    too low), the status and the log warn and the servers' bound counts."""
    a = agents.new("a", tick_time="")
    s = a.wait_for(lambda s: s["session"]["tick_bound_from"] == "servers",
                   20 * SLOW, what="a to learn the bound")
    assert s["session"]["tick_bound_ms"] == 200, s
    assert s["session"]["min_session_timeout_ms"] == 400, s
    assert s["session"]["warning"] is None, s
    b = agents.new("b", tick_time="20ms")
    s = b.wait_for(lambda s: s["session"]["warning"] is not None, 20 * SLOW,
                   what="b to warn of its tick_time")
    assert s["session"]["tick_bound_ms"] == 200, s
    assert s["session"]["tick_bound_from"] == "servers", s
    assert "zookeeper.tick_time (20 ms) is below" in s["session"]["warning"], s
    line = subprocess.run([ZKELECTCTL, "-s", b.socket, "status"],
                          capture_output=True, text=True, timeout=10 * SLOW)
    assert "tick_time (20 ms) is below" in line.stdout, line.stdout
    log = b.log_text(200000)
    assert log.count("zookeeper.tick_time (20 ms) is below what") == 1, log[-3000:]
    c = agents.new("c", tick_time="300ms")
    s = c.wait_for(lambda s: s["session"]["min_session_timeout_ms"] is not None,
                   20 * SLOW, what="c to learn the servers' limits")
    assert s["session"]["tick_bound_from"] == "tick_time", s
    assert s["session"]["tick_bound_ms"] == 300 and s["session"]["warning"] is None, s
