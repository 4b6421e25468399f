# SPDX-License-Identifier: MIT
"""ZooKeeper over TLS, the supported recipe: a ZooKeeper with only a
secureClientPort (Netty, keys made with keytool at test time, client
certificates required), and beside each agent a local stunnel in client mode
from examples/stunnel/zkelect-zookeeper.conf. The agents elect and hand over
through their tunnels; with a certificate the tunnel must not accept (the
server's, signed by another CA) or one the server refuses (the client's),
the agent stays unconnected and says so, in its log and its status.

Skipped where stunnel4, keytool or openssl are missing
(scripts/install-deps.sh --test installs them)."""

import os
import shutil
import uuid

import pytest

from zkharness import AgentSet, poll  # noqa: E402

for tool in ("keytool", "openssl"):
    if shutil.which(tool) is None:
        pytest.skip("%s not installed (scripts/install-deps.sh --test installs it)" % tool,
                    allow_module_level=True)
if shutil.which("stunnel4") is None and shutil.which("stunnel") is None:
    pytest.skip("stunnel4 not installed (scripts/install-deps.sh --test installs it)",
                allow_module_level=True)

import tlsharness  # noqa: E402


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def keys(workdir):
    d = os.path.join(workdir, "keys")
    os.makedirs(d)
    return tlsharness.Keys(d)


@pytest.fixture(scope="module")
def other_keys(workdir):
    """Another CA, with a server and a client certificate of its own."""
    d = os.path.join(workdir, "other")
    os.makedirs(d)
    return tlsharness.Keys(d, name="otherca")


@pytest.fixture(scope="module")
def tls_zk(keys):
    zk = tlsharness.TLSZooKeeper(keys)
    try:
        zk.start()
        yield zk
    finally:
        zk.cleanup()


@pytest.fixture
def tunnels(workdir, tls_zk):
    made = []

    def make(ca_pem, client_pem):
        t = tlsharness.Stunnel(workdir, tls_zk.port, ca_pem, client_pem)
        made.append(t)
        return t
    yield make
    for t in made:
        t.stop()


@pytest.fixture
def aset(request):
    s = AgentSet("127.0.0.1:1", "/zkelect/tls-" + uuid.uuid4().hex[:8])
    s.logs_in_report(request)
    yield s
    s.cleanup()


def test_elects_and_hands_over_through_tunnels(keys, tunnels, aset):
    ta = tunnels(keys.ca_pem, keys.client_pem)
    tb = tunnels(keys.ca_pem, keys.client_pem)
    a = aset.new("a", zk_hostport=ta.hostport)
    b = aset.new("b", zk_hostport=tb.hostport)
    leader = aset.wait_one_leader(60)
    follower = b if leader is a else a
    st = leader.status()
    assert st["session"]["state"] == "connected", st
    # srvr goes through the tunnel too and is answered (a standalone server
    # votes), unless the agent's probe (2 s) ran out first, say on a loaded
    # machine's first TLS handshake: then the agent says so once and takes
    # the server for a voting one (design.md). Either way, never observer.
    for agent in (a, b):
        s = poll(lambda: agent.status() if agent.status()["session"]["server"] != "unknown"
                 or "cannot tell whether" in agent.log_text() else None, 20,
                 what="%s knows what its server is" % agent.id)
        warned = agent.log_text().count("cannot tell whether")
        print("%s: session.server %s (srvr warning logged %d times)"
              % (agent.id, s["session"]["server"], warned))
        assert s["session"]["server"] in ("voting", "unknown"), s
        assert warned == (1 if s["session"]["server"] == "unknown" else 0)
    epoch = st["epoch"]
    poll(lambda: follower.status()["role"] == "follower", 30, what="the other follows")
    # A graceful stop hands over at once (no session timeout to wait for).
    leader.stop()
    new = aset.wait_one_leader(10, among=[follower], what="the follower takes over")
    assert new.status()["epoch"] > epoch
    assert "Certificate accepted" in ta.log() + tb.log()


def cannot_connect(agent, tunnel):
    """The agent runs, answers, is not connected and does not lead; its log
    says it cannot reach ZooKeeper."""
    st = poll(lambda: agent.status(), 20, what="the agent answers")
    assert st["role"] == "unknown" and st["session"]["state"] != "connected", st
    poll(lambda: len([line for line in agent.log_text().splitlines()
                      if "zookeeper: not connected to" in line]) >= 2, 30,
         what="the agent logs that it cannot connect")
    st = agent.status()
    assert st["role"] == "unknown" and not st["is_leader"], st
    assert agent.running()
    lines = [line for line in agent.log_text().splitlines()
             if "zookeeper: not connected to %s for" % tunnel.hostport in line]
    print("agent: %s\nagent status: %s" % (lines[-1], st["session"]))
    # The reason is the failure itself, not the client's pause between
    # rounds of attempts ("Delaying connection after exhaustively trying
    # all servers", which it logs after each failure).
    for text in (lines[-1], st["session"]["last_error"]):
        assert "Delaying connection" not in text and "no answer yet" not in text, text
    return lines


def test_server_certificate_from_another_ca(keys, other_keys, tunnels, aset):
    # The tunnel trusts only the other CA: the real server's certificate is
    # refused by stunnel, which closes the agent's connection.
    t = tunnels(other_keys.ca_pem, keys.client_pem)
    a = aset.new("wrong-ca", zk_hostport=t.hostport)
    cannot_connect(a, t)
    poll(lambda: "certificate verify failed" in t.log(), 20, what="stunnel's reason")


def test_client_certificate_the_server_refuses(keys, other_keys, tunnels, aset):
    # The client certificate is signed by a CA ZooKeeper does not trust.
    t = tunnels(keys.ca_pem, other_keys.client_pem)
    a = aset.new("wrong-client", zk_hostport=t.hostport)
    cannot_connect(a, t)


def test_stunnel_unit_as_the_example_says(keys, tls_zk):
    """The recipe as README and examples/stunnel give it, under a real
    systemd (podman, systemd as PID 1, stunnel4 and the package from this
    tree): the example configuration installed as
    /etc/stunnel/zkelect-zookeeper.conf with only its two ports changed
    (this machine's are taken by others), the CA and the client
    certificate at the paths it names, `systemctl enable --now
    stunnel@zkelect-zookeeper`, then an agent under zkelectd@orders
    pointed at the tunnel leads. (Debian's stunnel@.service is
    Type=simple: an example with `foreground = no` forked, its unit ended
    at once and nothing listened.)"""
    import podmanharness
    from zkharness import free_port
    p = podmanharness.podman_or_skip()
    image = podmanharness.systemd_image(p, extra=("stunnel4",))
    m = podmanharness.SystemdMachine(p, image)
    try:
        port = free_port()
        with open(tlsharness.STUNNEL_EXAMPLE) as f:
            text = f.read()
        assert "127.0.0.1:2181" in text and "127.0.0.1:2182" in text, text
        m.write("/etc/stunnel/zkelect-zookeeper.conf",
                text.replace("127.0.0.1:2182", "127.0.0.1:%d" % tls_zk.port)
                .replace("127.0.0.1:2181", "127.0.0.1:%d" % port))
        with open(keys.ca_pem) as f:
            m.write("/etc/zkelect/zookeeper-ca.pem", f.read())
        with open(keys.client_pem) as f:
            m.write("/etc/zkelect/zookeeper-client.pem", f.read(), mode="0600")
        m.sh("systemctl enable --now stunnel@zkelect-zookeeper")

        def listening():
            state = m.sh("systemctl show -p ActiveState --value stunnel@zkelect-zookeeper",
                         check=False).stdout.strip()
            assert state in ("active", "activating"), "stunnel@zkelect-zookeeper is %s:\n%s" % (
                state, m.sh("journalctl --no-pager -u stunnel@zkelect-zookeeper",
                            check=False).stdout[-3000:])
            return tlsharness.port_open(port)
        poll(listening, 30, interval=0.2, what="the tunnel listening on 127.0.0.1:%d" % port)
        m.config("orders", "127.0.0.1:%d" % port, "/zkelect/tls-" + uuid.uuid4().hex[:8],
                 "orders-1")
        m.sh("systemctl enable --now zkelectd@orders")
        st = poll(lambda: (m.status("orders") or {}).get("role") == "leader"
                  and m.status("orders"), 60, interval=0.2, what="orders-1 leads through the tunnel")
        assert st["session"]["state"] == "connected", st
        log = m.sh("journalctl --no-pager -u stunnel@zkelect-zookeeper").stdout
        assert "Certificate accepted" in log, log
        print("stunnel@zkelect-zookeeper: %s; orders-1 leads, epoch %d"
              % (m.show_unit("stunnel@zkelect-zookeeper", "ActiveState"), st["epoch"]))
    finally:
        m.remove()
