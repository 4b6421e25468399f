#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""store: a tiny fenced job store, one fence per partition (Python 3
standard library only). It stands for the database a real runner writes
to; what matters is the check it makes on every write.

    store.py serve --socket PATH --log FILE

Clients connect to the Unix socket and send one line per write:

    WRITE <partition> <writer> <epoch> <seq>

The store keeps, per partition, the highest epoch it has accepted (the
fence). A write whose epoch is below its partition's fence comes from an
owner that has been replaced: it is refused. Otherwise the fence moves up
to the epoch and the write is accepted. Answers, one line each:

    OK <id>                 accepted, the id-th write of the store
    REFUSED <fence>         a newer owner has written with epoch <fence>

Every accepted and refused write is appended to the log file as it is
decided, one line each, so the log is the store's history in order:

    accepted id=I part=P writer=W epoch=E seq=S
    refused part=P writer=W epoch=E seq=S fence=F

A client frozen halfway through a write holds nothing: the store serves
each connection on its own thread and decides each write under one lock.
Restarted on the same log, the store reads its fences back from it.
"""

import argparse
import os
import re
import socketserver
import sys
import threading

LINE = re.compile(r"^accepted id=(\d+) part=(\S+) writer=\S+ epoch=(\d+) ")


class Store:
    def __init__(self, log_path):
        self.lock = threading.Lock()
        self.fence = {}
        self.count = 0
        if os.path.exists(log_path):
            with open(log_path) as f:
                for line in f:
                    m = LINE.match(line)
                    if m:
                        self.count = max(self.count, int(m.group(1)))
                        part, epoch = m.group(2), int(m.group(3))
                        self.fence[part] = max(self.fence.get(part, 0), epoch)
        self.log = open(log_path, "a", buffering=1)

    def write(self, part, writer, epoch, seq):
        with self.lock:
            fence = self.fence.get(part, 0)
            if epoch < fence:
                self.log.write("refused part=%s writer=%s epoch=%d seq=%d fence=%d\n"
                               % (part, writer, epoch, seq, fence))
                return "REFUSED %d" % fence
            self.fence[part] = epoch
            self.count += 1
            self.log.write("accepted id=%d part=%s writer=%s epoch=%d seq=%d\n"
                           % (self.count, part, writer, epoch, seq))
            return "OK %d" % self.count


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            f = raw.decode(errors="replace").split()
            if len(f) == 5 and f[0] == "WRITE" and f[3].isdigit() and f[4].isdigit():
                answer = self.server.store.write(f[1], f[2], int(f[3]), int(f[4]))
            else:
                answer = "ERROR expected: WRITE <partition> <writer> <epoch> <seq>"
            self.wfile.write((answer + "\n").encode())


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["serve"])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args(argv)
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    srv = Server(args.socket, Handler)
    srv.store = Store(args.log)
    print("store: serving on %s, log %s" % (args.socket, args.log), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
