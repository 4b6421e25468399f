# SPDX-License-Identifier: MIT
"""What the agent makes of the ZooKeeper it finds (doc/design.md, "The
lease"), against real ZooKeeper servers and real agents:

  * a session timeout the server raised: said, with what it means;
  * zookeeper.tick_time above half the negotiated timeout: no lease can be
    proven, so the agent never leads, and says why (status reason, one log
    line), while another agent leads;
  * the server says what it is (srvr): session.server in the status; a
    server that will not say (a tunnel, a TLS port) is taken for a voting
    one, and the log says once what that assumes.
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

    def __init__(self, upstream):
        self.upstream = upstream
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.hostport = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.refused = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

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


def test_server_that_will_not_say_is_taken_for_voting(agents, zk_hostport):
    """srvr refused: the agent cannot tell an observer from a voting
    server; it leads, reports the server unknown, and says once what it
    assumes."""
    p = NoSrvrProxy(zk_hostport)
    try:
        a = agents.new("a", zk_hostport=p.hostport)
        s = a.wait_for(lambda s: s["is_leader"], 30 * SLOW, what="a leads")
        assert s["session"]["server"] == "unknown", s
        assert p.refused >= 1
        log = a.log_text(200000)
        assert log.count("cannot tell whether %s is an observer" % p.hostport) == 1, \
            log[-3000:]
        assert "allow srvr" in log
    finally:
        p.close()
