# SPDX-License-Identifier: MIT
"""pytest fixtures for the zkelect integration suite.

  zk_server   session-scoped ZooKeeper (or ZKELECT_TEST_ZK=host:port)
  zk_hostport "host:port" of that server
  election    a fresh, unique election path for one test
  agents      AgentSet factory for that path; every process is killed at teardown
  observer    kazoo client reading ZooKeeper directly
  recorder    StatusRecorder over `agents` (not started: call .start())
  proxies     factory of ZKProxy (default upstream: zk_hostport); all closed
              at teardown

On a failing test, each agent's log is attached to the report.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness"))

import zkharness  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for aset in getattr(item, "_zkelect_agent_sets", []):
            for a in aset.agents:
                rep.sections.append(("zkelectd %s log (%s)" % (a.id, a.log_path),
                                     a.log_text()))
        zk = getattr(item, "_zkelect_zk_log", None)
        if zk:
            try:
                with open(zk, "rb") as f:
                    tail = f.read()[-4000:].decode(errors="replace")
            except OSError:
                tail = ""
            rep.sections.append(("zookeeper log tail (%s)" % zk, tail))


@pytest.fixture(scope="session")
def zk_server():
    ext = os.environ.get("ZKELECT_TEST_ZK")
    if ext:
        yield ext
        return
    srv = zkharness.ZooKeeperServer()
    try:
        srv.start()
    except Exception:
        srv.cleanup()
        raise
    try:
        yield srv
    finally:
        srv.cleanup()


@pytest.fixture
def zk_hostport(zk_server, request):
    if isinstance(zk_server, str):
        return zk_server
    request.node._zkelect_zk_log = zk_server.log_path
    return zk_server.hostport


@pytest.fixture
def election():
    return zkharness.new_election_path()


@pytest.fixture
def agents(zk_hostport, election, request):
    if not os.access(zkharness.ZKELECTD, os.X_OK):
        pytest.fail("zkelectd not built: %s (set ZKELECTD)" % zkharness.ZKELECTD)
    aset = zkharness.AgentSet(zk_hostport, election)
    aset.logs_in_report(request)
    try:
        yield aset
    finally:
        aset.cleanup()


@pytest.fixture
def observer(zk_hostport):
    obs = zkharness.Observer(zk_hostport)
    try:
        yield obs
    finally:
        obs.close()


@pytest.fixture
def recorder(agents):
    rec = zkharness.StatusRecorder(agents)
    try:
        yield rec
    finally:
        rec.stop()


@pytest.fixture
def proxies(zk_hostport):
    from zkproxy import ZKProxy
    made = []

    def make(upstream=None):
        p = ZKProxy(upstream or zk_hostport)
        made.append(p)
        return p
    try:
        yield make
    finally:
        for p in made:
            p.close()
