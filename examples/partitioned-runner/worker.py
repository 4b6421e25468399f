#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""worker: the job runner of one partition, for as long as this instance
owns it (Python 3 standard library only).

zkelectd starts one per owned partition (`notify.run` with `{partition}`
in its argv) and stops it, SIGTERM then SIGKILL, before the lease of that
partition could end; `zkelectctl run -p NAME -- worker.py ...` does the
same from outside the agent. Either way the worker gets its term in the
environment: ZKELECT_PARTITION and ZKELECT_EPOCH (ZKELECT_ID names the
instance). It sends every job to the fenced store (store.py) with that
epoch. If the partition has had a newer owner since (this worker was
frozen with its host, say, while the partition moved), the store refuses
the write and the worker stops at once: the new owner's worker has taken
over.

    worker.py --store SOCKET [--partition NAME] [--writer W] [--interval 50ms]

One line on stdout per job: `wrote: part=P writer=W epoch=E seq=S id=I`
or `refused: part=P writer=W epoch=E seq=S fence=F`. Exit status 0 on
SIGTERM, 3 after a refused write, 2 without a term in the environment or
without the store.
"""

import argparse
import os
import signal
import socket
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="the store's Unix socket")
    ap.add_argument("--partition", default=os.environ.get("ZKELECT_PARTITION"),
                    help="default: $ZKELECT_PARTITION")
    ap.add_argument("--writer", default=os.environ.get("ZKELECT_ID") or
                    "%s:%d" % (socket.gethostname(), os.getpid()))
    ap.add_argument("--interval", default="50ms", help="between two jobs")
    args = ap.parse_args(argv)
    epoch = os.environ.get("ZKELECT_EPOCH", "")
    if not args.partition or not epoch.isdigit():
        sys.stderr.write("worker: no term: run me from notify.run or zkelectctl run -p "
                         "(ZKELECT_PARTITION=%r ZKELECT_EPOCH=%r)\n"
                         % (args.partition, epoch))
        return 2
    epoch = int(epoch)
    iv = args.interval
    interval = float(iv[:-2]) / 1000 if iv.endswith("ms") else float(iv.rstrip("s"))

    stopping = []
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    signal.signal(signal.SIGINT, lambda s, f: stopping.append(s))
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(args.store)
    except OSError as e:
        sys.stderr.write("worker: cannot reach the store at %s: %s\n" % (args.store, e))
        return 2
    answers = conn.makefile("r")
    seq = 0
    while not stopping:
        seq += 1
        conn.sendall(("WRITE %s %s %d %d\n" % (args.partition, args.writer, epoch,
                                               seq)).encode())
        answer = answers.readline().split()
        if answer[:1] == ["OK"]:
            print("wrote: part=%s writer=%s epoch=%d seq=%d id=%s"
                  % (args.partition, args.writer, epoch, seq, answer[1]), flush=True)
        elif answer[:1] == ["REFUSED"]:
            print("refused: part=%s writer=%s epoch=%d seq=%d fence=%s"
                  % (args.partition, args.writer, epoch, seq, answer[1]), flush=True)
            return 3
        else:
            sys.stderr.write("worker: the store answered %r\n" % (answer,))
            return 2
        time.sleep(interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
