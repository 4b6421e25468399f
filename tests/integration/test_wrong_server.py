# SPDX-License-Identifier: MIT
"""zookeeper.servers names something that is not a ZooKeeper client port
(issue 32, item 9).

Any 41 bytes the C client reads after connecting are taken for ZooKeeper's
handshake reply, their last byte for the "read-only" flag: an HTTP server
there (or a proxy's error page) made the agent log "connected to a
read-only server; not leading", twice, while the client logged EHOSTDOWN
(its name for the peer closing). A real ZooKeeper server never grants a
read-only session to a client that did not ask for one, and the agent
never asks. The agent must say what it found, once, and go on saying that
it is not connected, as for any unreachable server.
"""

import socket
import threading

from zkharness import Agent, SLOW, free_port, poll  # noqa: E402


class NotZooKeeper:
    """A loopback server that answers every connection with an HTTP 400."""

    def __init__(self):
        self.port = free_port()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.done = False
        self.accepted = 0
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            try:
                c.settimeout(1)
                c.recv(1000)
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                          b"Connection: close\r\n\r\n")
            except OSError:
                pass
            c.close()

    def close(self):
        self.done = True
        self.thread.join(5)
        self.sock.close()


def test_a_server_that_is_not_zookeeper_is_named_once(tmp_path, election):
    srv = NotZooKeeper()
    a = Agent(str(tmp_path), "127.0.0.1:%d" % srv.port, election, "a")
    try:
        a.start()
        # Past the client's first two attempts (the old message came once
        # for each) and the first "not connected" line.
        poll(lambda: srv.accepted >= 2 and "not connected to" in a.log_text(200000),
             20 * SLOW, what="two handshakes and the first 'not connected' line")
        log = a.log_text(200000)
        assert "read-only server" not in log, log[-3000:]
        assert log.count("does not answer as ZooKeeper does") == 1, log[-3000:]
        s = a.status()
        assert s["is_leader"] is False and s["role"] == "unknown", s
    finally:
        a.stop()
        srv.close()
