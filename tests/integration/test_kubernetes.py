# SPDX-License-Identifier: MIT
"""examples/kubernetes/orders.yaml: what can be checked without a cluster.

- The manifest parses and says what the README promises: zkelectd is a
  native sidecar (an init container with restartPolicy: Always), the socket
  directory is an emptyDir both containers mount, the election id comes from
  the pod's name and the published value from its IP (downward API), every
  probe asks /v1/health on the agent's loopback listener (readiness too: a
  pod whose agent follows is Ready, or a rollout could never finish), the
  rollout adds a pod before it removes one, the grace period covers the
  graceful stop, and the ConfigMap's configuration is valid.
- The sidecar's command line, run as it stands (with the ConfigMap's
  configuration, only its ZooKeeper servers pointed at a ZooKeeper on
  loopback), starts an agent named after the pod, publishing the pod's
  address, which leads, and the probes' own commands pass against it.
- With podman, the whole pod as Kubernetes would run it: the image, its user,
  a read-only root, no capabilities, the ConfigMap and the emptyDir at their
  paths, the app's command beside the agent. As a rollout's new pod: it joins
  an election another agent (the old pod) leads, and is Ready while it
  follows; the old one stops, the pod leads, and its status names its own
  address as the leader's. Then deletion's order (app first, then the
  sidecar), within the grace period, exit status 0.
"""

import os
import re
import socket
import subprocess
import time
import uuid

import pytest

from zkharness import ZKELECTD, poll, unix_request  # noqa: E402

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(TOP, "examples", "kubernetes", "orders.yaml")
POD = "orders-7c9d5b8f4-x2k8q"       # a pod name as a Deployment makes them
POD_IP = "127.0.0.2"                 # its IP (only published, never connected to)

yaml = pytest.importorskip("yaml", reason="python3-yaml not installed "
                           "(scripts/install-deps.sh --test installs it)")


def manifest():
    docs = {d["kind"]: d for d in yaml.safe_load_all(open(MANIFEST))}
    cm, dep = docs["ConfigMap"], docs["Deployment"]
    spec = dep["spec"]["template"]["spec"]
    side = spec["initContainers"][0]
    app = spec["containers"][0]
    conf_text = cm["data"]["zkelect.yaml"]
    return cm, spec, side, app, conf_text, yaml.safe_load(conf_text)


def spec_of_deployment():
    docs = {d["kind"]: d for d in yaml.safe_load_all(open(MANIFEST))}
    return docs["Deployment"]["spec"]


def seconds(d):
    m = re.fullmatch(r"(\d+)(ms|s|m)", d)
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


def mount_path(container, volume):
    return [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume][0]


def test_manifest_parses_and_wires_the_sidecar(tmp_path):
    cm, spec, side, app, conf_text, conf = manifest()
    # A native sidecar: restartPolicy Always on an init container.
    assert side["restartPolicy"] == "Always", side
    # The socket's directory is an emptyDir that both containers mount.
    vols = {v["name"]: v for v in spec["volumes"]}
    sock_dir = os.path.dirname(conf["api"]["socket"])
    run = [n for n, v in vols.items() if "emptyDir" in v]
    assert len(run) == 1
    assert mount_path(side, run[0]) == mount_path(app, run[0]) == sock_dir
    assert {"name": "ZKELECT_SOCKET", "value": conf["api"]["socket"]} in app["env"]
    # The configuration comes from the ConfigMap, the id from the pod's name.
    cfg = [n for n, v in vols.items() if v.get("configMap", {}).get("name")
           == cm["metadata"]["name"]]
    assert len(cfg) == 1
    env = {e["name"]: e for e in side["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert conf["election"]["id"] == "@POD_NAME@"
    # The leader's address for the followers' apps: the pod's IP.
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert conf["election"]["value"].startswith("@POD_IP@:")
    assert '"s/@POD_NAME@/$POD_NAME/; s/@POD_IP@/$POD_IP/"' in side["command"][-1]
    # Probes: exec, on the loopback listener the configuration opens, all
    # asking whether the agent is healthy: the app's readiness too, since a
    # rollout's new pod (a follower) must become Ready for it to go on.
    port = conf["api"]["listen"].rsplit(":", 1)[1]
    for c, probe in ((side, "startupProbe"), (side, "livenessProbe"),
                     (app, "readinessProbe")):
        cmd = c[probe]["exec"]["command"][-1]
        assert "/dev/tcp/127.0.0.1/%s" % port in cmd and "GET /v1/health " in cmd, cmd
    # A rollout adds a pod before it removes one (none is lost meanwhile).
    roll = spec_of_deployment()["strategy"]
    assert roll["type"] == "RollingUpdate", roll
    assert roll["rollingUpdate"]["maxSurge"] >= 1 and roll["rollingUpdate"]["maxUnavailable"] == 0
    # The grace period covers the agent's graceful stop (hook_timeout, the
    # 2 s kill grace, 5 s for ZooKeeper to confirm the delete) after the
    # app's (zkelectctl run stops its command within the lease, 2/3 T).
    need = (seconds(conf["notify"]["hook_timeout"]) + 2 + 5
            + seconds(conf["zookeeper"]["session_timeout"]) * 2 / 3)
    assert spec["terminationGracePeriodSeconds"] >= need + 5, need
    # The pod runs as the image's user, which the socket's mode lets in.
    user = re.search(r"^USER (\d+):(\d+)$", open(os.path.join(TOP, "docker/Dockerfile")).read(),
                     re.M)
    sc = spec["securityContext"]
    assert (sc["runAsUser"], sc["runAsGroup"]) == (int(user.group(1)), int(user.group(2)))
    assert sc["runAsNonRoot"] is True
    # And the configuration itself is valid, once the pod's name is in.
    f = tmp_path / "zkelect.yaml"
    f.write_text(conf_text.replace("@POD_NAME@", POD))
    r = subprocess.run([ZKELECTD, "-c", str(f), "--check-config"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout == "configuration OK\n", r.stdout + r.stderr


def loopback_config(conf_text, zk_hostport):
    """The ConfigMap's configuration with only its servers replaced."""
    out, n = re.subn(r'(?m)^(\s*servers:\s*)".*"$', r'\g<1>"%s"' % zk_hostport, conf_text)
    assert n == 1
    return out


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def get(sock, target):
    try:
        return unix_request(sock, "GET", target, timeout=1.0)
    except OSError:
        return None


def test_sidecar_command_line_starts_an_agent_named_after_the_pod(zk_hostport, tmp_path,
                                                                  election):
    _, spec, side, app, conf_text, conf = manifest()
    port = int(conf["api"]["listen"].rsplit(":", 1)[1])
    if not port_free(port):
        pytest.fail("127.0.0.1:%d is taken; the manifest's listener needs it" % port)
    # The pod's paths, moved under tmp_path (the only change to the command).
    cfg_dir = mount_path(side, "zkelect-config")
    run_dir = mount_path(side, "zkelect-run")
    moved = {cfg_dir: str(tmp_path / "config"), run_dir: str(tmp_path / "run")}
    os.makedirs(moved[cfg_dir])
    os.makedirs(moved[run_dir])

    def move(s):
        for a, b in moved.items():
            s = s.replace(a, b)
        return s
    text = loopback_config(conf_text, zk_hostport).replace(conf["election"]["path"], election)
    with open(os.path.join(moved[cfg_dir], "zkelect.yaml"), "w") as f:
        f.write(move(text))
    argv = [move(a) for a in side["command"]]
    env = dict(os.environ, POD_NAME=POD, POD_IP=POD_IP,
               PATH=os.path.dirname(ZKELECTD) + ":" + os.environ["PATH"])
    log = open(tmp_path / "agent.log", "wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    sock = move(conf["api"]["socket"])
    try:
        def leads():
            if proc.poll() is not None:
                raise AssertionError("the sidecar's command exited with %s: %s" % (
                    proc.returncode, open(tmp_path / "agent.log").read()))
            r = get(sock, "/v1/status")
            return r is not None and r.json()["is_leader"] and r.json()
        s = poll(leads, 30, what="the sidecar's agent to lead")
        assert s["id"] == POD, s
        assert s["leader"]["value"] == conf["election"]["value"].replace("@POD_IP@", POD_IP), s
        # The probes' commands, as the kubelet would run them.
        for probe in (side["startupProbe"], side["livenessProbe"], app["readinessProbe"]):
            r = subprocess.run(probe["exec"]["command"], capture_output=True, text=True,
                               timeout=10)
            assert r.returncode == 0, (probe, r.stderr)
    finally:
        proc.terminate()
        code = proc.wait(30)
        log.close()
    assert code == 0, open(tmp_path / "agent.log").read()
    # A stopped agent fails the liveness probe.
    r = subprocess.run(side["livenessProbe"]["exec"]["command"], capture_output=True, timeout=10)
    assert r.returncode != 0


def test_pod_runs_in_podman_as_kubernetes_would_run_it(zk_hostport, tmp_path, election,
                                                       agents):
    import podmanharness
    p = podmanharness.podman_or_skip()
    image, _ = podmanharness.zkelect_image(p)
    _, spec, side, app, conf_text, conf = manifest()
    port = int(conf["api"]["listen"].rsplit(":", 1)[1])
    if not port_free(port):
        pytest.fail("127.0.0.1:%d is taken; the manifest's listener needs it" % port)
    sc = spec["securityContext"]
    uid, gid = sc["runAsUser"], sc["runAsGroup"]
    cfg, run = tmp_path / "config", tmp_path / "run"
    cfg.mkdir()
    run.mkdir()
    (cfg / "zkelect.yaml").write_text(
        loopback_config(conf_text, zk_hostport).replace(conf["election"]["path"], election))
    os.chmod(cfg / "zkelect.yaml", 0o644)
    os.chown(run, uid, gid)      # an emptyDir with fsGroup: the pod's group may write
    tag = uuid.uuid4().hex[:8]
    names = {"side": "zkit-%s-zkelectd" % tag, "app": "zkit-%s-app" % tag}

    def container(c, name, extra):
        sec = c["securityContext"]
        assert sec["readOnlyRootFilesystem"] and sec["capabilities"]["drop"] == ["ALL"]
        mounts = []
        for m in c["volumeMounts"]:
            src = cfg if m["name"] == "zkelect-config" else run
            mounts += ["-v", "%s:%s%s" % (src, m["mountPath"], ":ro" if m.get("readOnly") else "")]
        downward = {"metadata.name": POD, "status.podIP": POD_IP}
        envs = []
        for e in c.get("env", []):
            v = downward[e["valueFrom"]["fieldRef"]["fieldPath"]] if "valueFrom" in e \
                else e["value"]
            envs += ["-e", "%s=%s" % (e["name"], v)]
        p.run("run", "-d", "--name", name, "--network", "host", "--hostname", POD,
              "--user", "%d:%d" % (uid, gid), "--read-only", "--cap-drop", "ALL",
              "--security-opt", "no-new-privileges", *mounts, *envs, *extra,
              "--entrypoint", c["command"][0], image, *c["command"][1:])

    # The old pod of a rollout: an agent of the same election that leads
    # before this pod starts (on this machine, outside podman: two pods on
    # the host's network would share the listener's port).
    old = agents.new("orders-old-pod")
    old.wait_for(lambda st: st["is_leader"], 30, what="the old pod's agent leads")
    try:
        t0 = time.monotonic()
        container(side, names["side"], [])
        sock = str(run / os.path.basename(conf["api"]["socket"]))
        # The startup probe gates the app, as the kubelet does.
        probe = side["startupProbe"]["exec"]["command"]
        poll(lambda: p.run("exec", names["side"], *probe, check=False).returncode == 0,
             side["startupProbe"]["failureThreshold"] * side["startupProbe"]["periodSeconds"],
             interval=0.2, what="the startup probe to pass")
        print("pod in podman: sidecar ready %.1f s after start" % (time.monotonic() - t0))
        container(app, names["app"], [])
        s = poll(lambda: (get(sock, "/v1/status") or None) and get(sock, "/v1/status").json(),
                 10, what="the agent's status")
        # A new pod of a rollout: its agent follows the old pod's, and the
        # pod is Ready, so the rollout may go on and stop the old pod.
        s = poll(lambda: get(sock, "/v1/status").json()["role"] == "follower"
                 and get(sock, "/v1/status").json(), 30, what="the pod's agent to follow")
        assert s["leader"]["id"] == old.id, s
        ready = app["readinessProbe"]["exec"]["command"]
        assert p.run("exec", names["app"], *ready, check=False).returncode == 0, \
            "a following pod is not Ready: a rollout would never finish"
        # The old pod goes (a graceful stop): this pod leads, and its status
        # names its own address as the leader's, for the followers' apps.
        old.stop()
        s = poll(lambda: get(sock, "/v1/leader").status == 200 and get(sock, "/v1/status").json(),
                 30, what="the pod's agent to lead")
        assert s["id"] == POD, s
        assert s["leader"]["value"] == conf["election"]["value"].replace("@POD_IP@", POD_IP), s
        poll(lambda: "leading, epoch %d" % s["epoch"] in p.run("logs", names["app"]).stdout,
             20, what="the app's command to run under epoch %d" % s["epoch"])
        assert p.run("exec", names["app"], *ready, check=False).returncode == 0
        # Deletion: the app first, then the sidecar, all within the grace period.
        grace = spec["terminationGracePeriodSeconds"]
        t0 = time.monotonic()
        p.run("stop", "--time", str(grace), names["app"], timeout=grace + 30)
        p.run("stop", "--time", str(grace), names["side"], timeout=grace + 30)
        took = time.monotonic() - t0
        for n in names.values():
            state, code = podmanharness.container_exit(p, n)
            assert state == "exited", (n, state, code)
        assert podmanharness.container_exit(p, names["side"])[1] == 0
        print("pod in podman: app and sidecar stopped in %.1f s (grace %d s)" % (took, grace))
        assert took < grace
    finally:
        for n in names.values():
            p.run("rm", "--force", "--time", "0", n, check=False)
