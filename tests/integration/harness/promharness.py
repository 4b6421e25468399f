# SPDX-License-Identifier: MIT
"""A real Prometheus (Debian's `prometheus`) for the tests that read the
agents' metrics as an operator's Prometheus does: the dashboard's queries
(test_dashboard.py), the alert rules (test_alerts.py) and the scrape of
loopback-only agents through a per-host Prometheus agent
(test_scrape.py). It runs on a free loopback port with a data directory of
its own, and stops (and is removed) with stop()."""

import json
import os
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request

import yaml

from zkharness import free_port, poll


class Prometheus:
    """One prometheus process.

    targets: addresses scraped as job `zkelect` (None: only `jobs`);
    jobs: more scrape configs, as Prometheus takes them (a list of dicts);
    rules: rule files to load; interval: scrape and evaluation interval;
    agent: run in agent mode (scrape and remote-write only, no queries);
    remote_write: a URL to send every sample to;
    receiver: accept remote writes at /api/v1/write;
    config: a whole configuration (a dict) instead of the above."""

    def __init__(self, targets=None, interval="1s", jobs=(), rules=(), agent=False,
                 remote_write=None, receiver=False, config=None):
        self.dir = tempfile.mkdtemp(prefix="zkit-prom-", dir="/tmp")
        self.port = free_port()
        if config is not None:
            conf = config
        else:
            conf = {"global": {"scrape_interval": interval}, "scrape_configs": []}
            if not agent:
                conf["global"]["evaluation_interval"] = interval
            if targets is not None:
                conf["scrape_configs"].append({
                    "job_name": "zkelect", "static_configs": [{"targets": list(targets)}]})
            conf["scrape_configs"].extend(jobs)
            for job in conf["scrape_configs"]:
                # A scrape that hangs (an agent paused) must not outlast
                # the interval.
                job.setdefault("scrape_timeout", _timeout_for(interval))
            if rules:
                conf["rule_files"] = list(rules)
            if remote_write:
                conf["remote_write"] = [{"url": remote_write}]
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            yaml.safe_dump(conf, f, sort_keys=False)
        argv = ["prometheus", "--config.file=" + self.config,
                "--web.listen-address=127.0.0.1:%d" % self.port]
        if agent:
            argv += ["--enable-feature=agent",
                     "--storage.agent.path=" + os.path.join(self.dir, "data")]
        else:
            argv += ["--storage.tsdb.path=" + os.path.join(self.dir, "data")]
        if receiver:
            argv.append("--web.enable-remote-write-receiver")
        self.log_path = os.path.join(self.dir, "prometheus.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        poll(self.ready, 60, interval=0.2, what="prometheus ready")

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def ready(self):
        assert self.proc.poll() is None, "prometheus exited; see %s" % self.log_path
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path, **params):
        url = "%s/api/v1/%s?%s" % (self.url, path, urllib.parse.urlencode(params))
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, q):
        """The instant vector of q now: a list of (labels, value)."""
        return [(r["metric"], float(r["value"][1]))
                for r in self.api("query", query=q)["result"]]

    def alerts(self, state="firing"):
        """The active alerts in `state` (firing or pending): their labels."""
        return [a["labels"] for a in self.api("alerts")["alerts"] if a["state"] == state]

    def log_text(self, limit=20000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-limit:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.log.close()
        if os.environ.get("ZKELECT_TEST_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


def _timeout_for(interval):
    """90 % of a Prometheus duration such as "1s" or "500ms"."""
    ms = int(interval[:-2]) if interval.endswith("ms") else int(interval[:-1]) * 1000
    return "%dms" % (ms * 9 // 10)
