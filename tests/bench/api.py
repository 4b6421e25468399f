#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: local API throughput and latency (doc/design.md, Targets, "Local API").

1. wrk -t1 -c16 -d10s --latency on GET /v1/status of a leading agent over its
   loopback TCP listener, beside nginx (nginx-light, worker_processes 1 to
   match the agent's single loop thread) serving a static JSON file of the
   same byte size at the same URL, in the same run.
2. tests/bench/uload.c (compiled here with cc): a closed-loop generator with
   N keep-alive connections, run against the agent's Unix socket and its TCP
   port (and nginx), so Unix vs TCP is compared with one tool.

Before the first measurement, each server (the agent on TCP and on its Unix
socket, and nginx) gets a --warmup run of the same load (default 2 s, not
counted), so that no server is timed cold. nginx is stopped with SIGQUIT
(graceful: its master waits for its worker) and the process group is then
cleared; the benchmark checks that no process it started is left.

    tests/bench/api.py [--seconds 10] [--conns 16] [--warmup 2]
"""

import argparse
import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import benchlib as bl
from benchlib import BenchAgentSet, ZooKeeperServer, poll

HERE = os.path.dirname(os.path.abspath(__file__))

NGINX_CONF = """\
# written by tests/bench/api.py
worker_processes 1;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp;
    scgi_temp_path {dir}/tmp;
    keepalive_requests 10000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            root {dir}/www;
            default_type application/json;
        }}
    }}
}}
"""


def tcp_get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read(), r.getheaders()
    finally:
        c.close()


def parse_wrk(out):
    def lat(label):
        m = re.search(r"^\s*%s\s+([\d.]+)(us|ms|s)\s*$" % re.escape(label), out, re.M)
        if not m:
            return None
        v = float(m.group(1))
        return v * {"us": 1, "ms": 1000, "s": 1000000}[m.group(2)]
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors:.*", out)
    return {"rps": float(m.group(1)) if m else None,
            "p50_us": lat("50%"), "p99_us": lat("99%"),
            "non2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errs.group(0) if errs else ""}


def run_wrk(port, seconds, conns):
    argv = ["wrk", "-t1", "-c%d" % conns, "-d%ds" % seconds, "--latency",
            "http://127.0.0.1:%d/v1/status" % port]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    if p.returncode != 0:
        raise AssertionError("wrk failed: %s %s" % (p.stdout, p.stderr))
    r = parse_wrk(p.stdout)
    if r["rps"] is None:
        raise AssertionError("cannot parse wrk output:\n" + p.stdout)
    return r


def build_uload(tmpdir):
    exe = os.path.join(tmpdir, "uload")
    subprocess.run(["cc", "-O2", "-o", exe, os.path.join(HERE, "uload.c")], check=True)
    return exe


def run_uload(exe, target, seconds, conns):
    p = subprocess.run([exe, "-c", str(conns), "-d", str(seconds), target],
                       capture_output=True, text=True, timeout=seconds + 60)
    if p.returncode != 0:
        raise AssertionError("uload %s failed (%d): %s %s"
                             % (target, p.returncode, p.stdout, p.stderr))
    d = dict(kv.split("=", 1) for kv in p.stdout.split())
    return {"rps": float(d["rps"]), "p50_us": float(d["p50_us"]),
            "p99_us": float(d["p99_us"]), "non2xx": int(d["non200"]),
            "errors": int(d["errors"])}


def row(label, r):
    print("%-46s %10.0f req/s   p50 %7.0f us   p99 %7.0f us%s" % (
        label, r["rps"], r["p50_us"], r["p99_us"],
        ("   non-2xx %d" % r["non2xx"]) if r.get("non2xx") else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=2,
                    help="seconds of uncounted load on each server first (0: none)")
    args = ap.parse_args()
    if not 1 <= args.seconds <= 300 or not 1 <= args.conns <= 200:
        ap.error("--seconds 1..300, --conns 1..200 (the agent caps connections at 256)")
    if not 0 <= args.warmup <= 60:
        ap.error("--warmup 0..60")
    for tool in ("wrk", "nginx", "cc"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            sys.exit("api: %s not installed (scripts/install-deps.sh --test)" % tool)
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"

    bl.header("api: GET /v1/status, %d connections, %d s per measurement"
              % (args.conns, args.seconds))
    tmp = tempfile.mkdtemp(prefix="zkbench-api-", dir="/tmp")
    os.chmod(tmp, 0o755)    # nginx's worker (nobody when started as root) reads www/
    zk = ZooKeeperServer(tick_ms=200, min_session_ms=400, max_session_ms=20000).start()
    aset = BenchAgentSet(zk.hostport, "/zkelect/bench-api")
    ngx = None
    results = {}
    try:
        exe = build_uload(tmp)
        aport = bl.zkharness.free_port()
        agent = aset.new("api-a", session_timeout="6s", listen="127.0.0.1:%d" % aport)
        agent.wait_for(lambda s: s.get("is_leader"), 30, what="lead")
        poll(lambda: tcp_get(aport, "/v1/status")[0] == 200, 10, what="TCP listener")
        _, body, hdrs = tcp_get(aport, "/v1/status")
        size = len(body)

        # nginx with a static file of the same size at the same URL
        os.makedirs(os.path.join(tmp, "www", "v1"))
        os.makedirs(os.path.join(tmp, "tmp"))
        with open(os.path.join(tmp, "www", "v1", "status"), "wb") as f:
            f.write(body)
        nport = bl.zkharness.free_port()
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(dir=tmp, port=nport))
        nlog = open(os.path.join(tmp, "nginx.out"), "wb")
        ngx = subprocess.Popen([nginx_bin, "-p", tmp, "-c", conf, "-g", "daemon off;"],
                               stdin=subprocess.DEVNULL, stdout=nlog, stderr=nlog,
                               start_new_session=True)
        def nginx_up():
            if ngx.poll() is not None:
                nlog.flush()
                with open(os.path.join(tmp, "nginx.out"), errors="replace") as f:
                    raise bl.zkharness.PollAbort("nginx exited %s: %s" % (ngx.returncode,
                                                                        f.read()))
            return tcp_get(nport, "/v1/status")[0] == 200
        poll(nginx_up, 10, what="nginx on 127.0.0.1:%d" % nport)
        nstatus, nbody, nhdrs = tcp_get(nport, "/v1/status")
        assert len(nbody) == size, (len(nbody), size)

        def hdr_bytes(h):
            return sum(len(k) + len(v) + 4 for k, v in h)
        print("body: %d bytes from both; response headers: agent %d bytes, nginx %d bytes"
              % (size, hdr_bytes(hdrs), hdr_bytes(nhdrs)))
        print("nginx: worker_processes 1 (the agent answers on one thread), access_log off,"
              " keepalive_requests 10000000")
        print()
        sys.stdout.flush()

        # warm-up, not counted: every server has answered the same load once
        if args.warmup:
            for target in ("127.0.0.1:%d" % nport, "127.0.0.1:%d" % aport,
                           "unix:" + agent.socket):
                run_uload(exe, target, args.warmup, args.conns)

        # interleave the two servers so that background load hits both alike
        results["wrk_nginx"] = run_wrk(nport, args.seconds, args.conns)
        results["wrk_agent"] = run_wrk(aport, args.seconds, args.conns)
        results["ul_unix"] = run_uload(exe, "unix:" + agent.socket, args.seconds, args.conns)
        results["ul_tcp"] = run_uload(exe, "127.0.0.1:%d" % aport, args.seconds, args.conns)
        results["ul_nginx"] = run_uload(exe, "127.0.0.1:%d" % nport, args.seconds, args.conns)
        if not agent.running():
            raise AssertionError("agent died under load; see %s" % agent.log_path)
        st = agent.status()
        print("agent after load: role %s, is_leader %s" % (st["role"], st["is_leader"]))
    finally:
        if ngx is not None:
            # SIGQUIT: graceful shutdown, the master waits for its worker;
            # stop_group then clears the group if anything lingers.
            rc = bl.stop_group(ngx, signal.SIGQUIT, wait=10)
            if rc not in (0, None):
                print("nginx exited %s on SIGQUIT" % rc)
        aset.cleanup()
        zk.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    print()
    print("wrk -t1 -c%d -d%ds --latency (loopback TCP):" % (args.conns, args.seconds))
    row("  nginx static file (worker_processes 1)", results["wrk_nginx"])
    row("  zkelectd /v1/status over TCP", results["wrk_agent"])
    print("uload (tests/bench/uload.c), %d keep-alive connections:" % args.conns)
    row("  zkelectd /v1/status over the Unix socket", results["ul_unix"])
    row("  zkelectd /v1/status over TCP", results["ul_tcp"])
    row("  nginx static file over TCP", results["ul_nginx"])
    print()
    r1 = bl.ratio(results["wrk_agent"]["rps"], results["wrk_nginx"]["rps"])
    r2 = bl.ratio(results["ul_unix"]["rps"], results["ul_tcp"]["rps"])
    r3 = bl.ratio(results["ul_tcp"]["rps"], results["ul_nginx"]["rps"])
    p99 = max(results["wrk_agent"]["p99_us"], results["ul_unix"]["p99_us"],
              results["ul_tcp"]["p99_us"])
    print("ratio zkelect TCP / nginx (wrk req/s):   %.2f   %s" % (
        r1, "target met (>= 0.8)" if r1 >= 0.8 else "target NOT met (< 0.8)"))
    print("ratio zkelect TCP / nginx (uload req/s): %.2f" % r3)
    print("ratio Unix / TCP (uload req/s):          %.2f   %s" % (
        r2, "target met (>= 1)" if r2 >= 1.0 else "target NOT met (< 1)"))
    print("zkelect p99 at that load (worst of the three): %.0f us   %s" % (
        p99, "target met (< 1 ms)" if p99 < 1000 else "target NOT met (>= 1 ms)"))
    print("  (nginx p99 in the same run: wrk %.0f us, uload %.0f us; p99 on a 2-core machine"
          " is dominated by scheduling of the client, the server and anything else running)"
          % (results["wrk_nginx"]["p99_us"], results["ul_nginx"]["p99_us"]))
    return 0


if __name__ == "__main__":
    sys.exit(bl.run_main(main))
