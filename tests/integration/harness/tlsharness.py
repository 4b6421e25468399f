# SPDX-License-Identifier: MIT
"""A ZooKeeper that accepts only TLS clients (secureClientPort, Netty, no
clientPort), keys and certificates made with keytool at test time, and a
local stunnel in client mode in front of it: the recipe of README's
"ZooKeeper over TLS" (examples/stunnel/zkelect-zookeeper.conf)."""

import os
import shutil
import subprocess
import tempfile

from zkharness import LOG4J, Process, free_port, poll, start_zookeeper

PASSWORD = "zkelect-test"
NETTY_CODEC = "/usr/share/java/netty-codec.jar"


def run(*argv):
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "%s: %s%s" % (" ".join(argv), r.stdout, r.stderr)
    return r.stdout


class Keys:
    """A CA, the server's key and certificate (signed by the CA, for
    localhost and 127.0.0.1) and a client's, all made with keytool; the
    client's exported to PEM (openssl) for stunnel."""

    def __init__(self, workdir, name="ca"):
        self.dir = workdir
        self.ca = self.keypair(name, "CN=zkelect test %s" % name, ca=True)
        self.ca_pem = self.export(self.ca, name)
        self.server = self.keypair("server", "CN=localhost", signer=name,
                                   san="dns:localhost,ip:127.0.0.1")
        self.client = self.keypair("client", "CN=zkelect-agent", signer=name)
        # The server trusts what the CA signed.
        self.truststore = os.path.join(self.dir, "trust.p12")
        run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", self.ca_pem,
            "-keystore", self.truststore, "-storetype", "PKCS12", "-storepass", PASSWORD)
        # The client's key and certificate for stunnel, as PEM.
        self.client_pem = os.path.join(self.dir, "client.pem")
        run("openssl", "pkcs12", "-in", self.client, "-passin", "pass:" + PASSWORD,
            "-nodes", "-out", self.client_pem)
        os.chmod(self.client_pem, 0o600)

    def keypair(self, alias, dname, ca=False, signer=None, san=None):
        store = os.path.join(self.dir, alias + ".p12")
        args = ["keytool", "-genkeypair", "-alias", alias, "-keyalg", "EC", "-groupname",
                "secp256r1", "-dname", dname, "-validity", "2", "-keystore", store,
                "-storetype", "PKCS12", "-storepass", PASSWORD]
        if ca:
            args += ["-ext", "bc:c"]
        run(*args)
        if signer:
            caks = os.path.join(self.dir, signer + ".p12")
            csr = os.path.join(self.dir, alias + ".csr")
            crt = os.path.join(self.dir, alias + ".crt")
            run("keytool", "-certreq", "-alias", alias, "-keystore", store,
                "-storepass", PASSWORD, "-file", csr)
            args = ["keytool", "-gencert", "-alias", signer, "-keystore", caks,
                    "-storepass", PASSWORD, "-infile", csr, "-outfile", crt, "-rfc",
                    "-validity", "2"]
            if san:
                args += ["-ext", "san=" + san]
            run(*args)
            run("keytool", "-importcert", "-noprompt", "-alias", signer, "-file",
                os.path.join(self.dir, signer + ".pem"), "-keystore", store,
                "-storepass", PASSWORD)
            run("keytool", "-importcert", "-noprompt", "-alias", alias, "-file", crt,
                "-keystore", store, "-storepass", PASSWORD)
        return store

    def export(self, store, alias):
        pem = os.path.join(self.dir, alias + ".pem")
        run("keytool", "-exportcert", "-rfc", "-alias", alias, "-keystore", store,
            "-storepass", PASSWORD, "-file", pem)
        return pem


class TLSZooKeeper(Process):
    """A standalone ZooKeeper with only a secureClientPort on 127.0.0.1."""

    def __init__(self, keys, tick_ms=200):
        self.keys = keys
        self.dir = tempfile.mkdtemp(prefix="zkit-tlszk-", dir="/tmp")
        self.port = free_port()
        self.tick_ms = tick_ms

    @property
    def log_path(self):
        return os.path.join(self.dir, "zookeeper.log")

    def start(self, timeout=90):
        conf = os.path.join(self.dir, "conf")
        data = os.path.join(self.dir, "data")
        os.makedirs(conf)
        os.makedirs(data)
        with open(os.path.join(conf, "log4j.properties"), "w") as f:
            f.write(LOG4J)
        cfg = os.path.join(self.dir, "zoo.cfg")
        k = self.keys
        with open(cfg, "w") as f:
            f.write("tickTime=%d\ndataDir=%s\n" % (self.tick_ms, data))
            f.write("secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n" % self.port)
            f.write("serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n")
            f.write("ssl.keyStore.location=%s\nssl.keyStore.password=%s\n"
                    "ssl.keyStore.type=PKCS12\n" % (k.server, PASSWORD))
            f.write("ssl.trustStore.location=%s\nssl.trustStore.password=%s\n"
                    "ssl.trustStore.type=PKCS12\n" % (k.truststore, PASSWORD))
            f.write("authProvider.x509=org.apache.zookeeper.server.auth."
                    "X509AuthenticationProvider\n")
            f.write("minSessionTimeout=400\nmaxSessionTimeout=10000\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n")
        # Debian's zookeeper.jar names netty's buffer, common, handler and
        # transport jars in its Class-Path, not netty-codec, which the Netty
        # server's TLS handler needs (NoClassDefFoundError: io/netty/
        # handler/codec/ByteToMessageDecoder at the first connection).
        self.proc, self.out = start_zookeeper(self.dir, conf, cfg,
                                               extra_jars=[NETTY_CODEC])

        def listening():
            assert self.proc.poll() is None, "ZooKeeper exited; see %s" % self.log_path
            try:
                with open(self.log_path) as f:
                    return "binding to port" in f.read() and self._port_open()
            except OSError:
                return False
        poll(listening, timeout, interval=0.2, what="TLS ZooKeeper listening")
        return self

    def _port_open(self):
        import socket
        s = socket.socket()
        s.settimeout(1)
        try:
            s.connect(("127.0.0.1", self.port))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def cleanup(self):
        self.kill()
        if os.environ.get("ZKELECT_TEST_KEEP") is None:
            shutil.rmtree(self.dir, ignore_errors=True)


def port_open(port):
    """Something accepts connections on 127.0.0.1:PORT."""
    import socket
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


STUNNEL_EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), "examples/stunnel/zkelect-zookeeper.conf")


class Stunnel:
    """stunnel in client mode on 127.0.0.1:PORT to the TLS ZooKeeper, from
    the example configuration with its paths and ports filled in (and its
    log in a file of its own); run as the example says, in the foreground."""

    def __init__(self, workdir, zk_port, ca_pem, client_pem):
        self.dir = tempfile.mkdtemp(prefix="stunnel-", dir=workdir)
        self.port = free_port()
        with open(STUNNEL_EXAMPLE) as f:
            text = f.read()
        text = (text.replace("127.0.0.1:2182", "127.0.0.1:%d" % zk_port)
                .replace("127.0.0.1:2181", "127.0.0.1:%d" % self.port)
                .replace("/etc/zkelect/zookeeper-ca.pem", ca_pem)
                .replace("/etc/zkelect/zookeeper-client.pem", client_pem))
        self.conf = os.path.join(self.dir, "stunnel.conf")
        with open(self.conf, "w") as f:
            # Global options come before the first section.
            f.write("output = %s\n" % os.path.join(self.dir, "stunnel.log") + text)
        self.log_path = os.path.join(self.dir, "stunnel.log")
        self.proc = subprocess.Popen([shutil.which("stunnel4") or "stunnel", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        poll(self._listening, 30, interval=0.1, what="stunnel listening")

    def _listening(self):
        assert self.proc.poll() is None, "stunnel exited: %s" % self.log()
        import socket
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", self.port))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    @property
    def hostport(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
