#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""One member of kazoo's SetPartitioner (Debian's python3-kazoo,
kazoo.recipe.partitioner): the reference the partition benchmarks measure
zkelect against (tests/bench/partitions_kazoo.py).

It runs kazoo's documented loop (failed / release / acquired / allocating),
except that it sleeps on the partitioner's `state_change_event` (a
constructor argument kazoo sets on every state change) instead of spinning
while acquired, so that an idle member is idle, as an app would run it:

    failed      the partitioner cannot be used again: a new one is made
    release     the app stops using its partitions, then release_set()
    acquired    the app uses list(qp) until the state changes
    allocating  wait for the next state change (wait_for_acquire's event)

The set is the names "0".."P-1"; kazoo's own partition function splits it
(sorted names, sorted member identifiers, every K-th name). What the member
holds is published for the benchmark in --state, a JSON file replaced
atomically on every change:

    {"id", "pid", "session", "state", "seq", "members", "held": [...]}

("session": its ZooKeeper session id; "members": how many identifiers the
party had when kazoo split the set; "held": empty unless "acquired"). The
member also appends one JSON line per change to --events, stamped with
CLOCK_MONOTONIC (shared by every process on the machine), from which the
benchmark rebuilds every member's ownership intervals and checks that no
two members held one partition at once:

    {"t", "ev": "acquired", "held": [...]}   after kazoo acquired every lock
    {"t", "ev": "release"}                   before release_set() lets go
    {"t", "ev": "finish"}                    SIGTERM: before finish() lets go
    {"t", "ev": "failed"}                    the partitioner failed

SIGTERM is a graceful leave: finish() (every lock released, the party
left), the client closed, exit 0. kazoo gives the app no fencing token.

    kazoo_partitioner.py --hosts H:P --path /p --id k0 --partitions 256
        --session-timeout 2 --state FILE --events FILE
        [--time-boundary 1] [--max-reaction-time 1]
"""

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.partitioner import SetPartitioner


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--path", required=True)
    ap.add_argument("--id", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--session-timeout", type=float, required=True, help="seconds")
    ap.add_argument("--time-boundary", type=float, default=1.0,
                    help="kazoo's time_boundary: the party must be still this long "
                         "before the set is split (kazoo's default: 30 s)")
    ap.add_argument("--max-reaction-time", type=float, default=1.0,
                    help="kazoo's max_reaction_time (its default: 1 s)")
    ap.add_argument("--state", required=True)
    ap.add_argument("--events", required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    names = [str(i) for i in range(args.partitions)]
    stop = threading.Event()
    changed = threading.Event()

    def on_term(signum, frame):
        stop.set()
        changed.set()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    events = open(args.events, "a", buffering=1)

    def event(ev, **kw):
        kw.update(t=time.monotonic(), ev=ev)
        events.write(json.dumps(kw, separators=(",", ":")) + "\n")

    client = KazooClient(hosts=args.hosts, timeout=args.session_timeout)
    client.start(timeout=30)
    seq = [0]
    seen = {"members": 0}

    def publish(state, held=()):
        seq[0] += 1
        cid = client.client_id
        doc = {"id": args.id, "pid": os.getpid(), "session": cid[0] if cid else None,
               "state": state, "seq": seq[0], "members": seen["members"],
               "held": list(held)}
        tmp = args.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        os.replace(tmp, args.state)

    def split(identifier, members, partitions):
        # kazoo's own partition function, the number of members noted
        seen["members"] = len(members)
        return SetPartitioner._partitioner(None, identifier, members, partitions)

    publish("starting")
    while not stop.is_set():
        qp = client.SetPartitioner(args.path, set=names, partition_func=split,
                                   identifier=args.id, time_boundary=args.time_boundary,
                                   max_reaction_time=args.max_reaction_time,
                                   state_change_event=changed)
        told = None         # the state_id whose acquisition the app was told
        while not stop.is_set():
            changed.clear()
            if qp.failed:
                event("failed")
                publish("failed")
                break                   # kazoo: make a new partitioner
            elif qp.release:
                if told is not None:
                    event("release")
                    told = None
                publish("release")
                qp.release_set()
            elif qp.acquired:
                if told != qp.state_id:
                    held = list(qp)
                    event("acquired", held=held, members=seen["members"])
                    publish("acquired", held)
                    told = qp.state_id
                changed.wait(3600)
            elif qp.allocating:
                publish("allocating")
                changed.wait(3600)      # set on the move to acquired (or failed)
        if stop.is_set():
            event("finish")
            publish("stopping")
            qp.finish()
    client.stop()
    client.close()
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
