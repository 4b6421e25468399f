#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Breaks the agent on purpose, one change at a time, and runs the tests
that must catch each break: do the checks reach the code that runs?

Each breakage is one edit of agent/fleet.c or agent/zk.c (the session, its
members and its elections, and zk.c's handling of the member node). For
each, the tree is copied (committed files and the working tree's changes)
into a scratch directory, the edit is applied (it must apply exactly
once), zkelect is built there, and the breakage's tests run: a unit or
simulator test by its meson name, or an integration file with pytest
against a real ZooKeeper. A breakage is "caught" when a test fails.

    scripts/breakages.py              every breakage (about 10 minutes)
    scripts/breakages.py --list       what they are
    scripts/breakages.py NAME...      some of them

Exit status: 0 if every breakage was caught, 1 if one was not, 2 on an
error (an edit that no longer applies, a build that fails).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SIM = "sim-parts"                   # seeds 1-300, 4 agents x 8 partitions
SIM_ALL = "sim-parts-shape-all"     # the same under every shape
SIM_FAIL = "sim-parts-failover"
ONE = "sim"                         # zkelect-sim, seeds 1-3000
CORE = "tests/integration/test_partitions_core.py"
MEMBERS = "tests/integration/test_partitions_members.py"
STICKY = "tests/integration/test_partitions_sticky.py"
RIDE = "tests/integration/test_ride_through.py"

# (name, file, text to replace, replacement, tests, what it breaks)
BREAKAGES = [
    ("no-recreate", "agent/fleet.c",
     "\t    f->session == SESSION_CONNECTED)\n\t\tfleet_member_create(f, out);",
     "\t    f->session == SESSION_CONNECTED && false)\n\t\tfleet_member_create(f, out);",
     [SIM, SIM_ALL],
     "a listing without our member node does not create it again (the "
     "member node made once per session)"),
    ("no-member-on-session", "agent/fleet.c",
     "\t\tf->member_creating = false;\n\t\tfleet_member_create(f, out);",
     "\t\tf->member_creating = false;",
     [SIM, CORE],
     "a new session makes no member node"),
    ("unsticky", "agent/fleet.c",
     "\t    f->assign_unsticky ? NULL : cur, owner)",
     "\t    NULL, owner)",
     [SIM, STICKY],
     "the assignment ignores who owns what now"),
    ("leader-change-no-assign", "agent/fleet.c",
     "\t    strcmp(leader, pt->leader) != 0)\n\t\tf->assign_owed = true;",
     "\t    strcmp(leader, pt->leader) != 0)\n\t\t(void)0;",
     [SIM, SIM_ALL, STICKY],
     "a partition's new leader does not make the fleet assign again"),
    ("members-watch-ignored", "agent/fleet.c",
     "\t\tif (f->session == SESSION_CONNECTED && f->partitioned)\n"
     "\t\t\tfleet_members_list(f, out);",
     "\t\tif (false)\n\t\t\tfleet_members_list(f, out);",
     [SIM, CORE],
     "a change of the member list is not listed again"),
    ("srenew-not-fed", "agent/fleet.c",
     "\t\tif (f->parts[i].leading)\n\t\t\tfleet_feed(f, &f->parts[i], &rev, out);",
     "\t\tif (f->parts[i].leading && false)\n\t\t\tfleet_feed(f, &f->parts[i], &rev, out);",
     [SIM, CORE],
     "the session's renewal extends no partition's lease"),
    ("srenew-not-counted", "agent/fleet.c",
     "\t\tif (f->parts[i].leading)\n\t\t\telection_session_sent(&f->parts[i].e, f->now);",
     "\t\tif (false)\n\t\t\telection_session_sent(&f->parts[i].e, f->now);",
     [SIM, CORE],
     "the session's renewal is not counted among a leader's requests "
     "(its lease has no anchor)"),
    ("leading-not-counted", "agent/fleet.c",
     "\tif (leading != pt->leading)\n\t\tf->nleading += leading ? 1 : -1;",
     "\tif (leading != pt->leading && false)\n\t\tf->nleading += leading ? 1 : -1;",
     [SIM, CORE, RIDE],
     "the count of leading partitions is not kept (a leader's hung connection "
     "is never dropped)"),
    ("no-schedule", "agent/fleet.c",
     "\tfleet_avoid_check(f, pt);\n\tfleet_schedule(f, pt);",
     "\tfleet_avoid_check(f, pt);",
     [ONE, SIM],
     "a part's next tick is not scheduled after its step"),
    ("stop-keeps-member", "agent/fleet.c",
     "\tif (f->member_node[0] != '\\0' && f->session == SESSION_CONNECTED) {\n"
     "\t\tlog_info(\"partitions: leaving",
     "\tif (false) {\n\t\tlog_info(\"partitions: leaving",
     [SIM, CORE],
     "a graceful stop leaves the member node (the others do not queue "
     "behind the leaver)"),
    ("stop-keeps-assignment", "agent/fleet.c",
     "\tfor (i = 0; i < f->nparts; i++)\n\t\tif (f->parts[i].assigned)\n"
     "\t\t\tfleet_assign_part(f, &f->parts[i], false, out);\n\tf->view.assigned = 0;\n"
     "\tfleet_check_stop(f, out);",
     "\tf->view.assigned = 0;\n\tfleet_check_stop(f, out);",
     [SIM, CORE, MEMBERS],
     "a graceful stop does not park its partitions (no handover to a "
     "successor before the stop's timeout)"),
    ("resign-ignored", "agent/fleet.c",
     "\t\tif (!f->partitioned && fev->part == 0)\n"
     "\t\t\tfleet_feed(f, &f->parts[0], &ev, out);",
     "\t\tif (false)\n\t\t\tfleet_feed(f, &f->parts[0], &ev, out);",
     [ONE, "tests/integration/test_election.py"],
     "a resign of the single election is dropped"),
    ("member-gone-kept", "agent/fleet.c",
     "\t    fleet_member_find(f, f->member_node) == NULL && !f->stopping) {",
     "\t    fleet_member_find(f, f->member_node) == NULL && false) {",
     [MEMBERS],
     "a member node deleted by hand is not made again"),
    ("disagreement-ignored", "agent/fleet.c",
     "\t\trc = v->disagree == 0 && !avoid ?",
     "\t\trc = !avoid ?",
     [MEMBERS],
     "members that run other partitions are assigned as if they ran ours"),
    ("no-session-lease", "agent/fleet.c",
     "\t\t\tpt->e.session_lease = &f->session_lease;",
     "\t\t\t(void)0;",
     [MEMBERS],
     "a named successor does not lead on the session's lease"),
    ("standing-join-waits", "agent/fleet.c",
     "\tif (f->join_until != 0 && fleet_join_standing(f)) {",
     "\tif (f->join_until != 0 && fleet_join_standing(f) && 0) {",
     [MEMBERS],
     "an agent joining a standing fleet waits out the join window"),
    ("zk-members-watch-lost", "agent/zk.c",
     "\tcase ZK_MEMBER_WATCH:\tfev.type = FEV_MEMBERS_CHANGED; break;",
     "\tcase ZK_MEMBER_WATCH:\tfev.type = FEV_MEMBER_DELETED; break;",
     [CORE],
     "zk.c: the member listing's watch event is not passed on"),
]


def copy_tree(dst):
    """The committed files plus the working tree's changes."""
    files = subprocess.run(["git", "-C", TOP, "ls-files", "-co", "--exclude-standard"],
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        src = os.path.join(TOP, f)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(os.path.join(dst, f)), exist_ok=True)
        shutil.copy2(src, os.path.join(dst, f))


def run(cmd, cwd, env=None, timeout=1800):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def try_breakage(b, work):
    name, path, old, new, tests, _ = b
    tree = os.path.join(work, name)
    copy_tree(tree)
    f = os.path.join(tree, path)
    text = open(f).read()
    if text.count(old) != 1:
        return "error", "the edit no longer applies to %s" % path
    open(f, "w").write(text.replace(old, new))
    r = run(["meson", "setup", "build", "-Dsystemd=disabled"], tree)
    if r.returncode == 0:
        r = run(["ninja", "-C", "build"], tree)
    if r.returncode != 0:
        return "error", "build failed: " + (r.stdout + r.stderr)[-800:]
    caught = []
    for t in tests:
        if t.startswith("tests/"):
            env = dict(os.environ, ZKELECTD=os.path.join(tree, "build/agent/zkelectd"),
                       ZKELECTCTL=os.path.join(tree, "build/ctl/zkelectctl"))
            r = run(["/usr/bin/python3", "-m", "pytest", "-q", "-x", "-p",
                     "no:cacheprovider", t], tree, env=env)
        else:
            r = run(["meson", "test", "-C", "build", "--suite", "unit", t], tree)
        if r.returncode != 0:
            caught.append(t)
    shutil.rmtree(tree, ignore_errors=True)
    if caught:
        return "caught", "by " + ", ".join(caught)
    return "missed", "no test of %s failed" % ", ".join(tests)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="breakages to try (default: all)")
    ap.add_argument("--list", action="store_true", help="list them and exit")
    args = ap.parse_args()
    known = {b[0]: b for b in BREAKAGES}
    for n in args.names:
        if n not in known:
            ap.error("no breakage named %r (see --list)" % n)
    if args.list:
        for b in BREAKAGES:
            print("%-26s %s: %s" % (b[0], b[1], b[5]))
        return 0
    chosen = [known[n] for n in args.names] if args.names else BREAKAGES
    status = 0
    work = tempfile.mkdtemp(prefix="zkelect-breakages-")
    try:
        for b in chosen:
            verdict, why = try_breakage(b, work)
            print("%-26s %-7s %s" % (b[0], verdict, why), flush=True)
            if verdict == "error":
                status = 2
            elif verdict == "missed" and status == 0:
                status = 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
