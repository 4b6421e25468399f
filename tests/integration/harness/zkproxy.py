# SPDX-License-Identifier: MIT
"""A loopback TCP proxy the fault tests put between one agent and ZooKeeper.

The agent's `servers:` points at the proxy; the proxy forwards to one
upstream ZooKeeper. Its mode can be switched at any time from the test:

  pass          forward both directions at once
  blackhole     connections stay open; bytes are read and discarded in both
                directions; new connections are accepted and treated alike
  reset         every current connection is closed with RST (both sides);
                new connections are accepted and reset at once
  delay N ms    each chunk is forwarded N ms after it arrived (order kept)
  gate(n)       (with pass) forward the first n client frames of each
                connection, hold later client bytes until open_gate(): splits
                requests the client pipelined (e.g. a read and a create)
  drop_replies  client->server bytes are forwarded, server->client bytes are
                discarded (a create reaches ZooKeeper, its reply never comes).
                With keep_handshake=True (the default) the first frame the
                server sends on each connection (ZooKeeper's ConnectResponse:
                4-byte length + payload) still goes through, so the client
                gets a session and then sends requests whose replies are lost.

With spare_probes set, the agent's probes of the server it reached (srvr,
and the short session that asks for a 1 ms timeout to read
/zookeeper/config) pass whatever the mode, once accepted: for a test of the
agent's own session that starts with a fault, where a probe that learns
nothing would (rightly) keep the agent out of the queue.

A connection that lost bytes (blackhole, drop_replies) carries a desynced
ZooKeeper stream: when the proxy moves to another mode that forwards
anything (pass, delay, drop_replies) such "tainted" connections are reset, as a real partition long enough to
matter would end the TCP connection. Mode changes are applied by the proxy
thread before set_mode() returns.

One thread, selectors, non-blocking sockets. Stops with close(), and by
itself after `max_lifetime` seconds in case a test forgets (the fixture
closes it at teardown).
"""

import collections
import selectors
import socket
import struct
import threading
import time

PASS = "pass"
BLACKHOLE = "blackhole"
RESET = "reset"
DELAY = "delay"
DROP_REPLIES = "drop_replies"
MODES = (PASS, BLACKHOLE, RESET, DELAY, DROP_REPLIES)


def _rst(sock):
    """Close with RST (SO_LINGER on, timeout 0)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class _Conn:
    """One accepted client connection and its upstream connection."""

    def __init__(self, client, server):
        self.client = client
        self.server = server            # None: no upstream (blackholed from the start)
        self.out = {}                   # sock -> bytearray waiting to be written to it
        self.delayed = collections.deque()   # (release_time, dst_sock, bytes)
        self.tainted = False
        self.s2c_seen = 0               # bytes received from the server so far
        self.s2c_head = bytearray()     # first 4 bytes from the server (frame length)
        self.closed = False
        self.c2s_held = bytearray()      # client bytes held back by the gate
        self.c2s_frames = 0              # client frames forwarded while gated
        self.probe = None                # the agent's probe? (its first bytes)
        self.fin_after_delayed = False   # a side closed; the delay drains first
        self.out[client] = bytearray()
        if server is not None:
            self.out[server] = bytearray()

    def peer(self, sock):
        return self.server if sock is self.client else self.client

    def first_frame_end(self):
        if len(self.s2c_head) < 4:
            return None
        return 4 + struct.unpack(">i", bytes(self.s2c_head[:4]))[0]


class ZKProxy:
    def __init__(self, upstream, max_lifetime=900.0, name="zkproxy"):
        host, port = upstream.rsplit(":", 1) if isinstance(upstream, str) else upstream
        self.upstream = (host, int(port))
        self.name = name
        self.mode = PASS
        self.delay_ms = 0
        self.keep_handshake = True
        self.gate_after = None
        self.spare_probes = False
        self.max_lifetime = max_lifetime
        self.stats = collections.Counter()
        self._conns = []
        self._sel = selectors.DefaultSelector()
        self._lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind(("127.0.0.1", 0))
        self._lsock.listen(64)
        self._lsock.setblocking(False)
        self.port = self._lsock.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._lsock, selectors.EVENT_READ, ("listen", None))
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._calls = collections.deque()
        self._lock = threading.Lock()
        self._stop = False
        self._born = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # -- public API (any thread) -------------------------------------------
    @property
    def hostport(self):
        return "127.0.0.1:%d" % self.port

    def set_mode(self, mode, delay_ms=None, keep_handshake=True):
        assert mode in MODES, mode

        def apply():
            previous = self.mode
            self.mode = mode
            self.keep_handshake = keep_handshake
            if mode == DELAY:
                self.delay_ms = int(delay_ms or 0)
            if mode == RESET:
                for c in list(self._conns):
                    self._close(c, rst=True)
                    self.stats["reset"] += 1
            elif mode != BLACKHOLE and mode != previous:
                for c in list(self._conns):
                    if c.tainted or c.server is None:
                        self._close(c, rst=True)
                        self.stats["reset_tainted"] += 1
            self.stats["mode_" + mode] += 1
        self._call(apply)

    def passthrough(self):
        self.set_mode(PASS)

    def blackhole(self):
        self.set_mode(BLACKHOLE)

    def reset(self):
        self.set_mode(RESET)

    def delay(self, ms):
        self.set_mode(DELAY, delay_ms=ms)

    def drop_replies(self, keep_handshake=True):
        self.set_mode(DROP_REPLIES, keep_handshake=keep_handshake)

    def gate(self, frames):
        """Frame-aware hold (in pass mode): on each connection forward the
        first `frames` client->server frames (4-byte length + payload; the
        ConnectRequest is frame 1), hold every later client byte until
        open_gate(). Server->client bytes flow as usual."""
        def apply():
            self.gate_after = int(frames)
        self._call(apply)

    def open_gate(self):
        def apply():
            self.gate_after = None
            for c in list(self._conns):
                if c.c2s_held and c.server is not None and not c.closed:
                    data, c.c2s_held = bytes(c.c2s_held), bytearray()
                    self._send(c, c.server, data)
        self._call(apply)

    def heal(self):
        """Reset everything, then forward again: the end of a partition."""
        self.set_mode(RESET)
        self.set_mode(PASS)

    def connections(self):
        box = []
        self._call(lambda: box.append(len(self._conns)))
        return box[0] if box else 0

    def close(self):
        if self._stop:
            return
        self._stop = True
        self._wake()
        self._thread.join(5)

    # -- internals -----------------------------------------------------------
    def _wake(self):
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _call(self, fn, timeout=5.0):
        """Run fn on the proxy thread; wait until it ran."""
        if self._stop or not self._thread.is_alive():
            fn()
            return
        done = threading.Event()
        with self._lock:
            self._calls.append((fn, done))
        self._wake()
        if not done.wait(timeout):
            raise RuntimeError("%s: proxy thread did not answer" % self.name)

    def _loop(self):
        try:
            while not self._stop:
                if time.monotonic() - self._born > self.max_lifetime:
                    break
                timeout = 0.5
                now = time.monotonic()
                for c in self._conns:
                    if c.delayed:
                        timeout = min(timeout, max(0.0, c.delayed[0][0] - now))
                for key, ev in self._sel.select(timeout):
                    kind, conn = key.data
                    if kind == "listen":
                        self._accept()
                    elif kind == "wake":
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                    elif not conn.closed:
                        if ev & selectors.EVENT_READ:
                            self._readable(conn, key.fileobj)
                        if not conn.closed and ev & selectors.EVENT_WRITE:
                            self._writable(conn, key.fileobj)
                while True:
                    with self._lock:
                        if not self._calls:
                            break
                        fn, done = self._calls.popleft()
                    try:
                        fn()
                    finally:
                        done.set()
                self._release_delayed()
        finally:
            for c in list(self._conns):
                self._close(c, rst=True)
            for s in (self._lsock, self._wake_r, self._wake_w):
                try:
                    self._sel.unregister(s)
                except (KeyError, ValueError, OSError):
                    pass
                try:
                    s.close()
                except OSError:
                    pass
            with self._lock:
                calls, self._calls = list(self._calls), collections.deque()
            for fn, done in calls:
                done.set()
            self._stop = True

    def _accept(self):
        try:
            cs, _ = self._lsock.accept()
        except OSError:
            return
        self.stats["accepted"] += 1
        if self.mode == RESET:
            _rst(cs)
            self.stats["refused"] += 1
            return
        cs.setblocking(False)
        ss = None
        if self.mode != BLACKHOLE:
            try:
                ss = socket.create_connection(self.upstream, timeout=2.0)
                ss.setblocking(False)
            except OSError:
                _rst(cs)
                self.stats["upstream_refused"] += 1
                return
        c = _Conn(cs, ss)
        if ss is None:
            c.tainted = True
        for s in (cs, ss):
            if s is not None:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._sel.register(s, selectors.EVENT_READ, ("conn", c))
        self._conns.append(c)

    def _close(self, c, rst=True):
        if c.closed:
            return
        c.closed = True
        for s in (c.client, c.server):
            if s is None:
                continue
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError, OSError):
                pass
            if rst:
                _rst(s)
            else:
                try:
                    s.close()
                except OSError:
                    pass
        if c in self._conns:
            self._conns.remove(c)

    def _readable(self, c, sock):
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            # One side closed: close the pair (FIN on the other side),
            # once what the delay still holds has gone out before it.
            if c.delayed:
                c.fin_after_delayed = True
                try:
                    self._sel.unregister(sock)
                except (KeyError, ValueError, OSError):
                    pass
                return
            self._close(c, rst=False)
            return
        from_server = sock is c.server
        start = c.s2c_seen
        if from_server:
            need = 4 - len(c.s2c_head)
            if need > 0:
                c.s2c_head += data[:need]
            c.s2c_seen += len(data)
        if not from_server and c.probe is None:
            c.probe = data.startswith(b"srvr") or (
                len(data) >= 20 and struct.unpack(">i", data[16:20])[0] == 1)
        mode = self.mode
        if self.spare_probes and c.probe:
            mode = PASS
        if mode == BLACKHOLE or c.server is None:
            c.tainted = True
            self.stats["discarded"] += len(data)
            return
        if mode == DROP_REPLIES and from_server:
            keep = b""
            if self.keep_handshake:
                end = c.first_frame_end()
                if end is not None and start < end:
                    keep = data[:end - start]
            if len(keep) < len(data):
                c.tainted = True
                self.stats["discarded"] += len(data) - len(keep)
            data = keep
            if not data:
                return
        dst = c.peer(sock)
        if not from_server and (self.gate_after is not None or c.c2s_held):
            data = self._gated(c, data)
            if not data:
                return
        if (mode == DELAY and self.delay_ms > 0) or c.delayed:
            # Chunks still queued from a delay go first: order is kept.
            d = self.delay_ms / 1000.0 if mode == DELAY else 0.0
            c.delayed.append((time.monotonic() + d, dst, data))
            return
        self._send(c, dst, data)

    def _gated(self, c, data):
        """Returns the part of client data that may pass the gate now."""
        c.c2s_held += data
        if self.gate_after is None:
            data, c.c2s_held = bytes(c.c2s_held), bytearray()
            return data
        out = bytearray()
        while c.c2s_frames < self.gate_after and len(c.c2s_held) >= 4:
            n = 4 + struct.unpack(">i", bytes(c.c2s_held[:4]))[0]
            if len(c.c2s_held) < n:
                break
            out += c.c2s_held[:n]
            del c.c2s_held[:n]
            c.c2s_frames += 1
        return bytes(out)

    def _send(self, c, dst, data):
        buf = c.out[dst]
        buf += data
        self.stats["forwarded"] += len(data)
        self._flush(c, dst)

    def _flush(self, c, dst):
        buf = c.out[dst]
        while buf:
            try:
                n = dst.send(buf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(c, rst=True)
                return
            del buf[:n]
        try:
            self._sel.modify(dst, selectors.EVENT_READ |
                             (selectors.EVENT_WRITE if buf else 0), ("conn", c))
        except (KeyError, ValueError, OSError):
            pass

    def _writable(self, c, sock):
        self._flush(c, sock)

    def _release_delayed(self):
        now = time.monotonic()
        for c in list(self._conns):
            while c.delayed and c.delayed[0][0] <= now and not c.closed:
                _, dst, data = c.delayed.popleft()
                self._send(c, dst, data)
            if c.fin_after_delayed and not c.delayed and not c.closed:
                self._close(c, rst=False)

    def __repr__(self):
        return "<ZKProxy %s -> %s:%d mode=%s>" % (self.hostport, self.upstream[0],
                                                   self.upstream[1], self.mode)
