# SPDX-License-Identifier: MIT
"""The local API against a real agent: the endpoints, pipelining, long polls,
half-close, slow and abandoned clients, output backpressure, HTTP details,
valid JSON whatever the node data, and the ownership of the socket file."""

import json
import os
import re
import select
import socket
import subprocess
import threading
import time
import uuid

import pytest

from zkharness import SLOW, ZKELECTD, poll, unix_request


# --------------------------------------------------------------------------
# helpers

def connect(agent, timeout=5.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout * SLOW)
    s.connect(agent.socket)
    return s


def req(target, method="GET", headers="", version="HTTP/1.1"):
    return ("%s %s %s\r\nHost: localhost\r\n%s\r\n" % (method, target, version, headers)).encode()


class Reader:
    """Reads HTTP/1.x responses one by one from a socket (Content-Length framed)."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        b = self.sock.recv(65536)
        if not b:
            self.eof = True
            raise EOFError("server closed the connection")
        self.buf += b

    def response(self, head_request=False):
        """(status, headers dict with lower-case names, body bytes)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for l in lines[1:]:
            k, v = l.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        n = 0 if head_request else int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, body

    def rest(self):
        """Everything until the server closes (raises ConnectionResetError on a reset)."""
        while not self.eof:
            try:
                self._fill()
            except EOFError:
                break
        out, self.buf = self.buf, b""
        return out


def leads(agents, name="a1"):
    a = agents.new(name)
    s = a.wait_for(lambda s: s["is_leader"], 20, what="%s leads" % name)
    return a, s


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def vm_rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def metric(agent, name):
    t = agent.get("/metrics").body
    m = re.search(r"^%s (\d+)" % re.escape(name), t, re.M)
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------
# issue 15, item 4: one answer per request, never one request late

def test_pipelined_resign_during_long_polls_answers_each_request_once(agents):
    """B holds a long poll; A pipelines a resign behind its own long poll;
    another agent joins. Each connection gets exactly one answer per request,
    in order, and later requests on B get fresh answers."""
    a1, s = leads(agents)
    n = s["index"]
    b = connect(a1, 30)
    b.sendall(req("/v1/status?wait=20s&index=%d" % n))
    a = connect(a1, 30)
    a.sendall(req("/v1/status?wait=20s&index=%d" % n) + req("/v1/resign?hold=2s", "POST",
                                                             "Content-Length: 0\r\n"))
    # One round trip through the agent's loop: A's and B's requests, sent
    # before, have been read and parked by the time this is answered.
    assert a1.get("/v1/health").status == 200
    agents.new("a2")
    ra, rb = Reader(a), Reader(b)
    st, _, body = rb.response()
    assert st == 200 and json.loads(body)["index"] > n
    st, _, body = ra.response()
    assert st == 200 and json.loads(body)["index"] > n
    st, _, body = ra.response()
    assert st == 200 and json.loads(body)["resigned"] is True
    # B asked once: nothing more may be waiting for it.
    assert rb.buf == b"", "B got an answer it did not ask for: %r" % rb.buf[:300]
    b.settimeout(0.5)
    with pytest.raises(socket.timeout):
        extra = b.recv(65536)
        raise AssertionError("B got an answer it did not ask for: %r" % extra[:200])
    # B's next request is answered with the state of now, not a stale one.
    b.settimeout(5 * SLOW)
    for _ in range(3):
        b.sendall(req("/v1/status"))
        st, _, body = rb.response()
        d = json.loads(body)
        now = a1.status()
        assert d["index"] <= now["index"] and d["index"] >= now["index"] - 2, (d, now)
    a.close()
    b.close()
    assert a1.running()


# --------------------------------------------------------------------------
# item 7: an abandoned long poll frees its slot

def test_abandoned_long_polls_free_their_slots(agents):
    a1, s = leads(agents)
    base = open_fds(a1.pid)
    socks = []
    for _ in range(256):
        c = connect(a1)
        c.sendall(req("/v1/status?wait=10m&index=%d" % (s["index"] + 1000)))
        socks.append(c)
    poll(lambda: open_fds(a1.pid) >= base + 250, 10, what="long polls parked")
    for c in socks:
        c.close()
    poll(lambda: open_fds(a1.pid) <= base + 5, 10,
         what="the agent to close the abandoned long polls (fds %d, at start %d)"
         % (open_fds(a1.pid), base))
    assert a1.get("/v1/health").status == 200


# --------------------------------------------------------------------------
# item 8: output backpressure

def test_pipelined_metrics_without_reading_do_not_grow_memory(agents):
    a1, _ = leads(agents)
    rss0 = vm_rss_kb(a1.pid)
    one = req("/metrics")
    count = 680 * 1024 // len(one)
    data = one * count
    c = connect(a1)
    c.setblocking(False)
    sent = 0
    # Send until the agent stops taking more (it must stop reading).
    deadline = time.monotonic() + 10 * SLOW
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += c.send(data[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(0.05)
            try:
                sent += c.send(data[sent:sent + 65536])
            except BlockingIOError:
                break
    # AddressSanitizer keeps freed memory in quarantine: RSS means nothing there.
    check_rss = "asan" not in ZKELECTD
    time.sleep(0.2)   # let the agent answer what it took (not a synchronisation: RSS is sampled after)
    grown = vm_rss_kb(a1.pid) - rss0
    assert grown < 8 * 1024 or not check_rss, \
        "RSS grew by %d KiB with %d bytes of unread requests" % (grown, sent)
    # Reading lets it go on: every request is answered, in order.
    c.setblocking(True)
    c.settimeout(10 * SLOW)
    r = Reader(c)
    got = 0

    def sender():
        c2 = c.dup()
        try:
            c2.sendall(data[sent:])
        finally:
            c2.close()
    th = threading.Thread(target=sender, daemon=True)
    th.start()
    while got < count:
        st, _, body = r.response()
        assert st == 200 and body.startswith(b"# HELP")
        got += 1
    th.join(10)
    c.close()
    assert vm_rss_kb(a1.pid) - rss0 < 8 * 1024 or not check_rss


# --------------------------------------------------------------------------
# item 10: a slow sender has a deadline for the whole request

def test_slow_sender_is_cut_off(agents):
    a1, _ = leads(agents)
    c = connect(a1)
    data = req("/v1/status", headers="X-Pad: %s\r\n" % ("y" * 100))
    t0 = time.monotonic()
    closed_after = None
    out = b""
    for i in range(len(data)):
        if time.monotonic() - t0 > 15 * SLOW:
            break
        try:
            c.send(data[i:i + 1])
        except OSError:
            closed_after = time.monotonic() - t0
            break
        c.settimeout(0.5)
        try:
            b = c.recv(4096)
            out += b
            if not b or b"\r\n\r\n" in out:
                closed_after = time.monotonic() - t0
                break
        except socket.timeout:
            pass
    c.close()
    assert closed_after is not None, "one byte every 0.5 s kept a connection for 15 s"
    assert closed_after < 8 * SLOW, closed_after
    if out:
        assert out.startswith(b"HTTP/1.1 408 "), out


# --------------------------------------------------------------------------
# item 11: a body sent in a separate write

def test_body_in_a_separate_write(agents):
    a1, _ = leads(agents)
    c = connect(a1)
    c.sendall(b"POST /v1/resign?hold=1s HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n")
    time.sleep(0.05)  # the point of the test: the body comes in a later write
    c.sendall(b"{}")
    st, _, body = Reader(c).response()
    c.close()
    assert st == 200, body
    assert json.loads(body)["resigned"] is True


# --------------------------------------------------------------------------
# item 12: every answer is valid JSON, whatever ZooKeeper holds

def test_leader_id_with_invalid_utf8_is_valid_json(agents, observer):
    path = agents.path
    zk = observer.zk
    zk.ensure_path(path)
    evil = b"evil\xff\xfe-x\x01\"\\"
    zk.create("%s/_c_%s-latch-" % (path, uuid.uuid4()), evil, ephemeral=True, sequence=True)
    zk.set(path, evil)            # its claim
    a1 = agents.new("a1")

    conn_bytes = []

    def leader_seen():
        c = connect(a1)
        try:
            c.sendall(req("/v1/status"))
            st, _, body = Reader(c).response()
        finally:
            c.close()
        conn_bytes.append(body)
        d = json.loads(body.decode("utf-8", "strict"))   # strict: raises on invalid UTF-8
        return d if d["leader"] is not None and d["role"] == "follower" else None
    d = poll(leader_seen, 20, what="a1 reports the foreign leader (last: %r)"
             % (conn_bytes[-1:] or None,))
    assert d["leader"]["id"] == "evil\ufffd\ufffd-x\x01\"\\", d
    assert d["role"] == "follower"


# --------------------------------------------------------------------------
# item 13: a hold beyond the cap is refused

@pytest.mark.parametrize("hold", ["18446744073709551s", "25h", "86401s"])
def test_hold_beyond_a_day_is_refused(agents, hold):
    a1, s = leads(agents)
    r = a1.request("POST", "/v1/resign?hold=%s" % hold, body=b"")
    assert r.status == 400, r
    assert "hold" in r.json()["error"]
    s2 = a1.status()
    assert s2["is_leader"] and s2["epoch"] == s["epoch"]


# --------------------------------------------------------------------------
# item 14: everything asked before a half-close is answered

def test_pipelined_requests_then_half_close_all_answered(agents):
    a1, _ = leads(agents)
    c = connect(a1, 10)
    c.sendall((req("/v1/status") + req("/metrics")) * 50)
    c.shutdown(socket.SHUT_WR)
    r = Reader(c)
    for i in range(100):
        st, _, body = r.response()
        assert st == 200, (i, body)
        if i % 2 == 0:
            json.loads(body)
        else:
            assert body.startswith(b"# HELP") and body.endswith(b"\n"), body[-100:]
    assert r.rest() == b""
    c.close()


def test_long_poll_then_half_close_is_answered(agents):
    """A client that shuts its sending side after a long poll still gets its
    answer (at once), and the slot is freed."""
    a1, s = leads(agents)
    c = connect(a1, 10)
    c.sendall(req("/v1/status?wait=10m&index=%d" % (s["index"] + 100)))
    c.shutdown(socket.SHUT_WR)
    r = Reader(c)
    st, _, body = r.response()
    assert st == 200 and json.loads(body)["is_leader"] is True
    assert r.rest() == b""
    c.close()


# --------------------------------------------------------------------------
# item 15: HTTP details

def test_head_has_no_body_and_keeps_the_connection_in_step(agents):
    a1, _ = leads(agents)
    c = connect(a1)
    c.sendall(req("/v1/status", "HEAD") + req("/v1/resign", "HEAD") + req("/v1/health"))
    r = Reader(c)
    st, h, _ = r.response(head_request=True)
    assert st == 200 and int(h["content-length"]) > 0
    st, h, _ = r.response(head_request=True)
    assert st == 405 and "POST" in h.get("allow", "")
    st, _, body = r.response()
    assert st == 200 and json.loads(body) == {"status": "ok"}, body
    c.close()


def test_conflicting_content_lengths_are_refused(agents):
    a1, _ = leads(agents)
    c = connect(a1)
    c.sendall(b"POST /v1/resign HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
              b"Content-Length: 5\r\n\r\nhello")
    st, _, body = Reader(c).response()
    c.close()
    assert st == 400, body
    assert a1.status()["is_leader"] is True


def test_folded_header_is_refused(agents):
    a1, _ = leads(agents)
    c = connect(a1)
    c.sendall(b"GET /v1/status HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n"
              b" Connection: close\r\n\r\n")
    st, _, body = Reader(c).response()
    c.close()
    assert st == 400 and "fold" in json.loads(body)["error"], body


def test_http10_keep_alive_is_confirmed(agents):
    a1, _ = leads(agents)
    c = connect(a1)
    c.sendall(req("/v1/status", version="HTTP/1.0", headers="Connection: keep-alive\r\n"))
    r = Reader(c)
    st, h, _ = r.response()
    assert st == 200 and h.get("connection", "").lower() == "keep-alive", h
    c.sendall(req("/v1/health", version="HTTP/1.0"))     # no keep-alive this time
    st, h, _ = r.response()
    assert st == 200 and h.get("connection", "").lower() == "close", h
    assert r.rest() == b""
    c.close()


# --------------------------------------------------------------------------
# issue 12: the listen backlog and a refused client

def test_burst_of_connections_fits_the_backlog(agents):
    """1,000 clients connect while the agent is busy (stopped): none is refused."""
    a1, _ = leads(agents)
    socks = []
    a1.pause()
    try:
        for i in range(1000):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.setblocking(False)
            try:
                c.connect(a1.socket)
            except BlockingIOError:
                c.close()
                raise AssertionError("connect %d refused with EAGAIN: backlog full" % i)
            socks.append(c)
    finally:
        a1.resume()
        for c in socks:
            c.close()
    a1.wait_for(lambda s: s["is_leader"], 10, what="still leading")


def test_refused_client_reads_its_503(agents):
    """Every slot busy writing to a client that does not read: a new client
    is refused, and reads the whole 503 (no reset)."""
    a1, _ = leads(agents)
    hogs = []
    try:
        for _ in range(256):
            c = connect(a1)
            c.setblocking(False)
            try:
                c.send(req("/metrics") * 200)
            except BlockingIOError:
                pass
            hogs.append(c)

        # A hog is busy once the agent is writing to it: until then it may
        # still count as idle, and an idle one makes room for the newcomer.
        watch = select.poll()
        for c in hogs:
            watch.register(c, select.POLLIN)

        def all_answered():
            return len(watch.poll(0)) == len(hogs)
        poll(all_answered, 20, what="the agent to be writing to all 256 connections")
        for attempt in range(3):
            c = connect(a1)
            c.sendall(req("/v1/status") + b"X" * 50000 if attempt else req("/v1/status"))
            r = Reader(c)
            st, _, body = r.response()
            assert st == 503 and b"too many connections" in body, body
            assert r.rest() == b""       # a clean close, not a reset
            c.close()
    finally:
        for c in hogs:
            c.close()
    a1.wait_for(lambda s: s["is_leader"], 10, what="serving again")


# --------------------------------------------------------------------------
# issue 16: the socket file

def second_config(a1, tmp_path, name="dup"):
    cfg = tmp_path / ("%s.yaml" % name)
    text = open(a1.config).read().replace("id: %s" % a1.id, "id: %s" % name)
    cfg.write_text(text)
    return cfg


def test_second_agent_refuses_a_live_socket(agents, tmp_path):
    a1, s = leads(agents)
    cfg = second_config(a1, tmp_path)
    r = subprocess.run([ZKELECTD, "-c", str(cfg)], capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert r.returncode == 2, r.stderr
    assert "in use by another process (pid %d)" % a1.pid in r.stderr, r.stderr
    d = a1.status()
    assert d["id"] == "a1" and d["is_leader"] and d["epoch"] == s["epoch"]


def test_stale_socket_is_replaced(agents):
    a1, _ = leads(agents)
    a1.kill()
    assert os.path.exists(a1.socket)      # left behind by SIGKILL
    a1.start()
    a1.wait_for(lambda s: s["is_leader"], 20, what="a1 leads again")


def test_socket_removed_at_exit_only_if_still_ours(agents, tmp_path):
    a1, _ = leads(agents)
    os.unlink(a1.socket)                  # someone removed it by hand...
    a2 = agents.new("a2", start=False)
    a2.socket = a1.socket                 # ...and another agent took the path
    a2.write_config()
    a2.start()
    ino = os.stat(a1.socket).st_ino
    assert a1.stop() == 0
    assert os.path.exists(a1.socket) and os.stat(a1.socket).st_ino == ino
    assert a2.status()["id"] == "a2"
    assert a2.stop() == 0
    assert not os.path.exists(a1.socket)


def test_socket_directory_is_created_with_parents(agents):
    a1 = agents.new("a1", start=False)
    deep = os.path.join(agents.dir, "run", "zkelect", "deep")
    a1.socket = os.path.join(deep, "a1.sock")
    a1.write_config()
    old = os.umask(0o022)
    try:
        a1.start()
    finally:
        os.umask(old)
    a1.wait_for(lambda s: s["is_leader"], 20, what="a1 leads")
    for d in (os.path.join(agents.dir, "run"), os.path.dirname(deep), deep):
        assert os.stat(d).st_mode & 0o777 == 0o755, (d, oct(os.stat(d).st_mode))


# --------------------------------------------------------------------------
# the endpoints, oversized headers, idle clients, long polls

STATUS_KEYS = {"id", "role", "is_leader", "epoch", "lease_remaining_ms", "leader",
               "candidates", "index", "session"}


def test_api_endpoints(agents):
    a = agents.new("a1")
    a.wait_for(lambda s: s["is_leader"] is True, 20, what="sole agent leads")
    r = a.get("/v1/health")
    assert r.status == 200
    r = a.get("/v1/status")
    assert r.status == 200
    assert r.headers.get("Content-Type", "").startswith("application/json")
    d = r.json()
    assert STATUS_KEYS <= set(d), set(d) ^ STATUS_KEYS
    assert d["role"] == "leader" and d["candidates"] == 1 and isinstance(d["index"], int)
    r = a.get("/v1/leader")
    assert r.status == 200 and r.json()["is_leader"] is True

    r = a.get("/v1/no-such-thing")
    assert r.status == 404, r
    assert isinstance(r.json().get("error"), str)
    r = a.request("POST", "/v1/status", body=b"")
    assert r.status == 405, r
    assert isinstance(r.json().get("error"), str)


def raw_exchange(path, payload, timeout=5.0):
    """Send raw bytes, return whatever the server answers (bytes) before it
    closes or the timeout passes. Tolerates the server cutting us off."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    try:
        try:
            s.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            out += b
            if b"\r\n\r\n" in out:
                break
        return out
    finally:
        s.close()


def test_api_huge_headers_rejected(agents):
    a = agents.new("a1")
    pad = "x" * 1000
    req = "GET /v1/status HTTP/1.1\r\nHost: localhost\r\n"
    req += "".join("X-Pad-%d: %s\r\n" % (i, pad) for i in range(66))
    req += "\r\n"
    assert len(req) > 64 * 1024
    out = raw_exchange(a.socket, req.encode())
    line = out.split(b"\r\n", 1)[0].decode(errors="replace")
    assert line.startswith("HTTP/1."), "no HTTP answer to 64 KiB of headers: %r" % out[:200]
    code = int(line.split()[1])
    assert code in (400, 413, 431), line
    assert a.get("/v1/health").status == 200
    assert a.status() is not None


def test_api_idle_client_does_not_block_others(agents):
    a = agents.new("a1")
    idle = []
    try:
        for _ in range(3):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(a.socket)
            idle.append(s)
        half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        half.connect(a.socket)
        half.sendall(b"GET /v1/sta")
        idle.append(half)
        for _ in range(20):
            t0 = time.monotonic()
            r = a.get("/v1/status", timeout=2.0)
            assert r.status == 200
            assert time.monotonic() - t0 < 1.0 * SLOW
    finally:
        for s in idle:
            s.close()
    assert a.get("/v1/health").status == 200


def long_poll(agent, index, wait, timeout):
    return unix_request(agent.socket, "GET", "/v1/status?wait=%s&index=%d" % (wait, index),
                        timeout=timeout)


def park_long_poll(agent, index, wait, timeout):
    """Start a long poll in a thread; returns (thread, box) where box gets
    "r" (Response) or "e" (exception) and "t" (monotonic time answered)."""
    box = {}

    def waiter():
        try:
            box["r"] = long_poll(agent, index, wait, timeout)
        except Exception as e:  # noqa: BLE001
            box["e"] = e
        box["t"] = time.monotonic()
    th = threading.Thread(target=waiter, daemon=True)
    th.start()
    return th, box


def sole_leader(a1):
    return a1.wait_for(lambda s: s["is_leader"] is True and s["candidates"] == 1
                       and s["leader"] == {"id": a1.id, "epoch": s["epoch"], "value": None}
                       and s["session"]["state"] == "connected", 20, what="sole agent leads")


def test_long_poll_times_out_unchanged(agents):
    a1 = agents.new("a1")
    n = sole_leader(a1)["index"]
    t0 = time.monotonic()
    r = long_poll(a1, n, "1s", timeout=10)
    dt = time.monotonic() - t0
    assert r.status == 200
    assert r.json()["index"] == n, "index moved while nothing happened: %r" % r
    assert 0.9 <= dt < 5.0 * SLOW, "wait=1s answered after %.2fs" % dt


def test_long_poll_wakes_on_leader_change(agents):
    a1 = agents.new("a1")
    sole_leader(a1)
    a2 = agents.new("a2")
    s = a2.wait_for(lambda s: s["role"] == "follower" and s["leader"] is not None
                    and s["leader"]["id"] == "a1", 20, what="a2 follows a1")
    n = s["index"]
    th, box = park_long_poll(a2, n, "20s", timeout=30)
    t_change = time.monotonic()
    assert a1.stop() == 0
    th.join(40)
    assert "e" not in box, box.get("e")
    d = box["r"].json()
    assert d["index"] > n, "long poll answered after %.2fs without a change: %r" \
        % (box["t"] - t_change, box["r"])
    assert box["t"] - t_change < 10.0 * SLOW, "long poll answered %.2fs after the change" \
        % (box["t"] - t_change)


def test_long_poll_wakes_on_join(agents):
    """Another candidate joins: `candidates` changes, so `index` does."""
    a1 = agents.new("a1")
    n = sole_leader(a1)["index"]
    th, box = park_long_poll(a1, n, "20s", timeout=30)
    # If a2 joins before the request is parked, the answer is immediate: also fine.
    t_join = time.monotonic()
    agents.new("a2")
    th.join(40)
    assert "e" not in box, box.get("e")
    r = box["r"]
    d = r.json()
    assert d["index"] > n, "long poll answered after %.2fs without a change (candidates %s): %r" \
        % (box["t"] - t_join, d["candidates"], r)
    assert box["t"] - t_join < 10.0 * SLOW, "long poll answered %.2fs after the change" \
        % (box["t"] - t_join)
    a1.wait_for(lambda s: s["candidates"] == 2, 20, what="candidates == 2")
