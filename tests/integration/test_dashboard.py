# SPDX-License-Identifier: MIT
"""examples/grafana/zkelect.json against a real Prometheus (Debian's
`prometheus`): it scrapes six real agents' /metrics (api.listen on
loopback, every second): three in one election, and three with a
`partitions:` block (6 partitions, their own election path; with partitions
the election at election.path is not used, so these are other agents). Both
go through a failover: the leader, and one of the partitioned agents, are
killed with SIGKILL; another takes over the election, the other two take
over the dead one's partitions; the killed ones come back (the partitioned
one gets its share back). Then every query of every panel is evaluated over
the run through Prometheus's HTTP API (query_range) and must return data:
a query that returns nothing fails the test, the partition panels' too.
Grafana's variables are given the values Grafana would: $job and
$election all (.*), $__rate_interval 15 s. At the end, the panels an
operator reads first must say what the agents say: the leader by id, one
leader in the election and none in the partitioned one, the epoch the
leader leads under, each partitioned member owning 2 partitions, none
unowned.

With ZKELECT_DASHBOARD_PNG=FILE, it also draws the run's series (who leads,
epoch, lease left, transitions) with gnuplot into FILE: README's picture is
made that way.

Skipped where prometheus is not installed (scripts/install-deps.sh --test)."""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

import zkharness
from promharness import Prometheus
from zkharness import free_port, poll  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(TOP, "examples/grafana/zkelect.json")
NPARTS = 6
PARTS_YAML = "partitions:\n  count: %d\n" % NPARTS

pytestmark = pytest.mark.skipif(shutil.which("prometheus") is None,
                                reason="prometheus not installed "
                                "(scripts/install-deps.sh --test installs Debian's package)")


def dashboard_queries():
    """(panel title, expr) for every target of every panel."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    return out


def grafana_vars(expr):
    """expr as Grafana sends it with every variable on All (allValue .*)."""
    return expr.replace("$__rate_interval", "15s").replace('"$job"', '".*"') \
        .replace('"$election"', '".*"')


def panel_query(title, n=0):
    """The n-th query of the panel titled `title`, as Grafana sends it."""
    return grafana_vars([e for t, e in dashboard_queries() if t == title][n])


def owned(agent):
    st = agent.status()
    return None if st is None else st["partitions"]["owned"]


def test_every_dashboard_query_returns_data_through_a_failover(agents, zk_hostport, request):
    ports = [free_port() for _ in range(3)]
    hook = "notify:\n  on_leader: [\"/bin/true\"]\n"
    ag = [agents.new("dash-%d" % i, listen="127.0.0.1:%d" % p, extra_yaml=hook)
          for i, p in enumerate(ports)]
    # The partitioned agents: their own election path, reaped (and their
    # logs reported on failure) as the fixture's are.
    parts = zkharness.AgentSet(zk_hostport,
                               zkharness.new_election_path()).logs_in_report(request)
    prom = None
    try:
        pports = [free_port() for _ in range(3)]
        pag = [parts.new("part-%d" % i, listen="127.0.0.1:%d" % p,
                         extra_yaml=hook + PARTS_YAML)
               for i, p in enumerate(pports)]
        prom = Prometheus(["127.0.0.1:%d" % p for p in ports + pports])
        first = agents.wait_one_leader(30)
        poll(lambda: [owned(a) for a in pag] == [NPARTS // 3] * 3, 60, interval=0.2,
             what="3 partitioned agents owning %d partitions each" % (NPARTS // 3))
        # A few scrapes of a steady election, and API traffic to count.
        poll(lambda: len(prom.api("query", query="up == 1")["result"]) == 6, 30,
             interval=0.5, what="six targets up")
        t0 = time.time() - 1
        for a in ag:
            a.status()
        time.sleep(5)  # steady-state samples for the picture, not synchronisation
        old_epoch = first.status()["epoch"]
        first.kill()
        pag[0].kill()
        second = agents.wait_one_leader(30, among=[a for a in ag if a is not first],
                                        what="a new leader")
        assert second.status()["epoch"] > old_epoch
        poll(lambda: sum(owned(a) or 0 for a in pag[1:]) == NPARTS, 60, interval=0.2,
             what="the other two owning the killed agent's partitions")
        first.start()
        pag[0].start()
        poll(lambda: [owned(a) for a in pag] == [NPARTS // 3] * 3, 60, interval=0.2,
             what="the restarted agent's share back")
        # Wait until Prometheus has seen the new leader and the old one back.
        poll(lambda: len(prom.api("query", query="zkelect_is_leader == 1")["result"]) == 1
             and prom.api("query", query='zkelect_epoch{instance="127.0.0.1:%d"}'
                          % ports[ag.index(second)])["result"][0]["value"][1]
             != "0" and len(prom.api("query", query="up == 1")["result"]) == 6
             and len(prom.api("query", query='increase(zkelect_transitions_total[60s]) > 0')[
                 "result"]) > 0
             and len(prom.api("query", query="sum(zkelect_partitions_owned) == %d and "
                              "count(zkelect_partitions_owned == %d) == 3"
                              % (NPARTS, NPARTS // 3))["result"]) == 1
             and len(prom.api("query", query="increase("
                              "zkelect_partition_ownership_changes_total[60s]) > 0")[
                 "result"]) > 0, 60, interval=0.5, what="prometheus saw the failover")
        time.sleep(5)  # samples after the failover, for the picture
        t1 = time.time()

        empty = []
        for title, expr in dashboard_queries():
            q = grafana_vars(expr)
            res = prom.api("query_range", query=q, start="%.3f" % t0, end="%.3f" % t1,
                           step="1")["result"]
            if not res:
                empty.append("%s: %s" % (title, q))
            else:
                print("%-22s %3d series  %s" % (title, len(res), expr))
        assert not empty, "dashboard queries with no data:\n" + "\n".join(empty)

        # What the panels say now, as an operator reads them: by election
        # and id (zkelect_info), not by scrape address.
        epoch = second.status()["epoch"]
        want = {"Leader": {(agents.path, second.id)},
                "Leaders": {agents.path: 1, parts.path: 0},
                "Epoch": {agents.path: epoch, parts.path: 0},
                "Owned per member": {a.id: NPARTS // 3 for a in pag},
                "unowned": {parts.path: 0}}

        def panels_now():
            got = {
                "Leader": {(m["election"], m["id"])
                           for m, _ in prom.query(panel_query("Leader"))},
                "Leaders": {m["election"]: v for m, v in prom.query(panel_query("Leaders"))},
                "Epoch": {m["election"]: v for m, v in prom.query(panel_query("Epoch"))},
                "Owned per member": {m["id"]: v for m, v in
                                     prom.query(panel_query("Owned per member"))},
                "unowned": {m["election"]: v for m, v in
                            prom.query(panel_query("Moving and unowned", 1))},
            }
            return got if got == want else print("panels now: %s" % got)
        poll(panels_now, 30, interval=0.5, what="the panels to show %s" % want)

        png = os.environ.get("ZKELECT_DASHBOARD_PNG")
        if png:
            draw(prom, t0, t1, ports, png)
            print("picture: %s" % png)
    finally:
        if prom is not None:
            prom.stop()
        parts.cleanup()


def draw(prom, t0, t1, ports, png):
    """The run's series, as the dashboard shows them, drawn with gnuplot."""
    if shutil.which("gnuplot") is None:
        pytest.fail("ZKELECT_DASHBOARD_PNG set but gnuplot is not installed")
    d = tempfile.mkdtemp(prefix="zkit-plot-", dir="/tmp")
    series = [
        ("who leads (zkelect_is_leader)", "zkelect_is_leader", "instance"),
        ("epoch (zkelect_epoch)", "zkelect_epoch", "instance"),
        ("lease left, s (zkelect_lease_remaining_seconds)",
         "zkelect_lease_remaining_seconds", "instance"),
        ("transitions over 15 s", "sum by (instance) "
         "(increase(zkelect_transitions_total[15s]))", "instance"),
    ]
    names = {"127.0.0.1:%d" % p: "agent %d" % i for i, p in enumerate(ports)}
    plots = []
    for n, (title, q, label) in enumerate(series):
        res = prom.api("query_range", query=q, start="%.3f" % t0, end="%.3f" % t1,
                       step="0.5")["result"]
        lines = []
        # The election's agents only (the partitioned ones never lead it).
        res = [r for r in res if r["metric"].get(label, "") in names]
        for k, r in enumerate(sorted(res, key=lambda r: r["metric"].get(label, ""))):
            path = os.path.join(d, "s%d-%d.dat" % (n, k))
            with open(path, "w") as f:
                last = None
                for ts, v in r["values"]:
                    # A blank line breaks the line where the agent was not
                    # scraped (killed).
                    if last is not None and float(ts) - last > 1.5:
                        f.write("\n")
                    last = float(ts)
                    f.write("%.3f %s\n" % (float(ts) - t0, v))
            name = names.get(r["metric"].get(label, ""), r["metric"].get(label, ""))
            lines.append("'%s' using 1:2 with steps lw 2 title '%s'" % (path, name))
        plots.append((title, lines))
    script = ["set terminal pngcairo size 1000,900 font 'sans,10'",
              "set termoption noenhanced",
              "set output '%s'" % png, "set multiplot layout 4,1",
              "set key outside right", "set grid", "set xrange [0:%.1f]" % (t1 - t0)]
    for i, (title, lines) in enumerate(plots):
        script.append("set title \"%s\"" % title)
        script.append("set xlabel '%s'" % ("seconds into the run: the leader is killed "
                                           "(SIGKILL), another takes over, the killed "
                                           "one restarts and follows" if i == 3 else ""))
        script.append("plot " + ", ".join(lines))
    script.append("unset multiplot")
    r = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(d, ignore_errors=True)
