# SPDX-License-Identifier: MIT
"""Observers behind one address (doc/design.md, "The lease", issue 29).

No lease is earned through an observer, and the agent asks the server it
connected to what it is (srvr) on a connection of its own, to the address
of the client's connection. Behind a proxy, a load balancer, a Kubernetes
Service or a virtual address, that connection can reach another server
than the session's. Here: a real 3-voter ensemble with an observer behind
an ObserverMaster (each server on its own loopback address, 127.0.0.N), and
a round-robin TCP proxy on 127.0.0.100 in front of the observer and a
follower. Before, the session sat on the observer, srvr reached the
follower and said "voting", and the agent led. Now the agent reads the
ensemble's config (/zookeeper/config, in its probe's own session): the
ensemble has an observer and 127.0.0.100 is none of its servers, so the
server cannot be told and nothing is earned; it says why and never leads,
while an agent that names the servers' own addresses leads.
"""

import re
import socket
import threading
import time

import pytest

from zkharness import SLOW, AgentSet, new_election_path
from zkensemble import Ensemble


class RoundRobinProxy:
    """Accepts on 127.0.0.100 and sends each new connection to the next of
    `upstreams` (host:port) in turn, as a TCP load balancer does."""

    def __init__(self, upstreams):
        self.upstreams = list(upstreams)
        self.next = 0
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.100", 0))
        self.lsock.listen(64)
        self.hostport = "127.0.0.100:%d" % self.lsock.getsockname()[1]
        self.closed = False
        self.socks = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                up = self.upstreams[self.next % len(self.upstreams)]
                self.next += 1
            threading.Thread(target=self._serve, args=(c, up), daemon=True).start()

    def _serve(self, c, up):
        host, port = up.rsplit(":", 1)
        try:
            u = socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            c.close()
            return
        u.settimeout(None)
        with self.lock:
            self.socks += [c, u]

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
        with self.lock:
            for s in self.socks:
                try:
                    s.close()
                except OSError:
                    pass


class ConfiglessProxy(RoundRobinProxy):
    """A round-robin proxy that resets the agent's probe session (its
    ConnectRequest asks for a timeout of 1 ms) before it reads
    /zookeeper/config: as a load balancer's hiccup, or a backend that
    refuses, would end it."""

    def _serve(self, c, up):
        c.settimeout(10)
        try:
            head = b""
            while len(head) < 20 and not head.startswith(b"srvr"):
                head = c.recv(20, socket.MSG_PEEK)
                if not head:
                    break
        except OSError:
            head = b""
        c.settimeout(None)
        if len(head) >= 20 and int.from_bytes(head[16:20], "big") == 1:
            c.close()
            return
        RoundRobinProxy._serve(self, c, up)


@pytest.fixture(scope="module")
def obs_ensemble():
    ens = Ensemble(3, observers=1, observer_master=True)
    try:
        ens.start()
    except Exception:
        ens.cleanup()
        raise
    try:
        yield ens
    finally:
        ens.cleanup()


def behind_a_proxy(ens, request, proxy_class):
    """A proxy of proxy_class in front of the observer and a follower, and
    an agent set on a new election whose logs go into a failure's report."""
    zl = ens.ensure_healthy()
    follower = [s for s in ens.voters if s is not zl][0]
    proxy = proxy_class([ens.observers[0].hostport, follower.hostport])
    aset = AgentSet(ens.connect_string(), new_election_path())
    aset.logs_in_report(request)
    return proxy, aset


def test_observer_behind_a_proxy_is_not_trusted(obs_ensemble, request):
    ens = obs_ensemble
    proxy, aset = behind_a_proxy(ens, request, RoundRobinProxy)
    try:
        a = aset.new("a", zk_hostport=proxy.hostport, session_timeout="2s")
        st = a.wait_for(lambda s: s["session"]["server"] == "unidentified",
                        30 * SLOW, what="a to find its server unidentified")
        assert st["is_leader"] is False, st
        assert "cannot be told from an observer" in (st["reason"] or ""), st
        # A candidate with the servers' own addresses leads meanwhile.
        b = aset.new("b", zk_hostport=",".join(s.hostport for s in ens.voters),
                     session_timeout="2s")
        b.wait_for(lambda s: s["is_leader"], 30 * SLOW, what="b leads")
        b.stop()
        # With b gone, a is the only candidate: for 3 T it never leads,
        # whichever backend its session lands on (it moves on at most
        # once per T).
        deadline = time.monotonic() + 3 * 2.0 * SLOW
        while time.monotonic() < deadline:
            s = a.status()
            assert s is None or s["is_leader"] is False, s
            time.sleep(0.05)
        log = a.log_text(10**7)
        assert not re.search(r"audit: lead ", log), "a led through the proxy"
        assert "is none of the 4 servers of /zookeeper/config" in log, log[-3000:]
    finally:
        aset.cleanup()
        proxy.close()


def test_no_config_read_through_a_proxy_is_not_trusted(obs_ensemble, request):
    """Behind the proxy, the probe's own session fails before it reads
    the ensemble's configuration, while srvr still answers (from another
    backend than the session's). Before, a failed read was taken for a
    server without one (ZooKeeper before 3.5): srvr decided, said
    "voting" from the follower while the session sat on the observer, and
    the agent led through the proxy at once."""
    proxy, aset = behind_a_proxy(obs_ensemble, request, ConfiglessProxy)
    try:
        a = aset.new("a", zk_hostport=proxy.hostport, session_timeout="2s")
        seen = set()
        st = a.wait_for(lambda s: s["session"]["server"] not in ("unknown", None),
                        30 * SLOW, what="a to hear what its server is")
        # It moves on at most once per T, each time through the proxy: for
        # 3 T it never leads, whichever backends its connections reach.
        deadline = time.monotonic() + 3 * 2.0 * SLOW
        while time.monotonic() < deadline:
            assert st is None or st["is_leader"] is False, st
            if st is not None:
                seen.add(st["session"]["server"])
                if st["session"]["server"] == "unidentified":
                    assert "cannot be told from an observer" in (st["reason"] or ""), st
            time.sleep(0.05)
            st = a.status()
        log = a.log_text(10**7)
        assert not re.search(r"audit: lead ", log), "a led through the proxy"
        assert "/zookeeper/config was not read" in log, log[-3000:]
        assert "unidentified" in seen and "voting" not in seen, seen
    finally:
        aset.cleanup()
        proxy.close()
