# SPDX-License-Identifier: MIT
"""A central Prometheus and agents whose API listens on loopback only
(issue 32, item 5; README, "Metrics"). What the agent allows: api.listen
must be a loopback address (the configuration is refused otherwise), and
over TCP the API answers what it answers on the socket except POST
/v1/resign, refused with 403 unless api.allow_tcp_resign. So a central
Prometheus cannot scrape an agent; a Prometheus in agent mode on the host
(examples/prometheus/zkelect-agent.yml, run here as shipped but for its
targets, host name, central address and interval) scrapes it on loopback
and remote-writes to the central one, where the dashboard's queries work
and each host's agents keep their own `instance`.

Skipped where prometheus is not installed (scripts/install-deps.sh)."""

import http.client
import json
import os
import shutil
import subprocess

import pytest
import yaml

from promharness import Prometheus
from zkharness import ZKELECTD, free_port, poll

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENT_YML = os.path.join(TOP, "examples/prometheus/zkelect-agent.yml")
DASHBOARD = os.path.join(TOP, "examples/grafana/zkelect.json")


def test_a_listener_off_loopback_is_refused(tmp_path):
    for addr in ("0.0.0.0:8471", "10.0.0.5:8471", "[::]:8471", "zk1.example:8471"):
        conf = tmp_path / "a.yaml"
        conf.write_text("zookeeper:\n  servers: 127.0.0.1:2181\nelection:\n  path: /e\n"
                        "api:\n  socket: %s/a.sock\n  listen: \"%s\"\n" % (tmp_path, addr))
        r = subprocess.run([ZKELECTD, "-c", str(conf), "--check-config"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 1, (addr, r)
        assert "is not a loopback address" in r.stdout + r.stderr, (addr, r)


def leader_query():
    with open(DASHBOARD) as f:
        panels = json.load(f)["panels"]
    (expr,) = [t["expr"] for p in panels if p["title"] == "Leader" for t in p["targets"]]
    return expr.replace('"$job"', '".*"').replace('"$election"', '".*"')


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="prometheus not installed "
                    "(scripts/install-deps.sh installs Debian's package)")
def test_a_central_prometheus_gets_loopback_agents_through_a_local_agent(agents):
    ports = [free_port() for _ in range(2)]
    ag = [agents.new("h%d" % i, listen="127.0.0.1:%d" % p) for i, p in enumerate(ports)]
    leader = agents.wait_one_leader(30)
    epoch = leader.status()["epoch"]

    # What a local client reaches over TCP: everything GET, no resign.
    c = http.client.HTTPConnection("127.0.0.1", ports[ag.index(leader)], timeout=5)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read().decode()
    assert r.status == 200 and "zkelect_info{" in body
    c.request("POST", "/v1/resign")
    r = c.getresponse()
    assert r.status == 403 and b"api.allow_tcp_resign" in r.read()
    c.close()
    st = leader.status()
    assert st["is_leader"] and st["epoch"] == epoch, st

    central = Prometheus(receiver=True)
    local = None
    try:
        with open(AGENT_YML) as f:
            conf = yaml.safe_load(f)
        conf["global"]["scrape_interval"] = "1s"
        (job,) = conf["scrape_configs"]
        job["scrape_timeout"] = "900ms"
        job["static_configs"] = [{"targets": ["127.0.0.1:%d" % p for p in ports]}]
        for rl in job["relabel_configs"]:
            rl["replacement"] = rl["replacement"].replace("HOST", "host-a")
        conf["remote_write"][0]["url"] = central.url + "/api/v1/write"
        local = Prometheus(agent=True, config=conf)

        def arrived():
            got = {m["instance"]: m["id"] for m, _ in central.query("zkelect_info")}
            return got == {"host-a:%d" % p: a.id for p, a in zip(ports, ag)}
        poll(arrived, 60, interval=0.5, what="both agents' zkelect_info at the central "
             "Prometheus as host-a:PORT")
        poll(lambda: [m["id"] for m, _ in central.query(leader_query())] == [leader.id],
             30, interval=0.5, what="the dashboard's Leader panel naming %s" % leader.id)
    finally:
        if local is not None:
            local.stop()
        central.stop()
