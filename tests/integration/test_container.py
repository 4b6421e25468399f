# SPDX-License-Identifier: MIT
"""docker/Dockerfile, built and run with podman: the build stage holds only
build tools, the runtime image is small, non-root and runs the agents; two
agents in containers (host network, ZooKeeper on the host's loopback) elect
one leader, `podman stop` of the leader exits 0 and hands over at once, and
zkelectd as PID 1 reaps the orphans its hooks leave.

Skipped only where podman cannot run a container (podmanharness)."""

import os
import subprocess
import time
import uuid

import pytest

import podmanharness  # noqa: E402
from zkharness import poll, unix_request  # noqa: E402


@pytest.fixture(scope="module")
def podman():
    return podmanharness.podman_or_skip()


@pytest.fixture(scope="module")
def image(podman):
    tag, seconds = podmanharness.zkelect_image(podman)
    print("zkelect image built in %.1f s" % seconds)
    return tag


@pytest.fixture
def containers(podman):
    names = []
    yield names
    for n in names:
        podman.run("rm", "--force", "--time", "0", n, check=False)


def test_build_stage_has_only_build_tools(podman, image):
    r = podman.run("run", "--rm", "--network", "none", "--entrypoint", "sh",
                   podmanharness.BUILD_IMAGE, "-c",
                   "for t in cc meson ninja pkg-config java javac zkServer.sh clang "
                   "etcd nginx python3 valgrind; do command -v $t || echo no-$t; done")
    found = r.stdout.split()
    for tool in ("cc", "meson", "ninja", "pkg-config"):
        assert "no-" + tool not in found, r.stdout
    for tool in ("java", "javac", "zkServer.sh", "clang", "etcd", "nginx", "valgrind"):
        assert "no-" + tool in found, "build stage has %s: %s" % (tool, r.stdout)
    size = podman.image_size(podmanharness.BUILD_IMAGE)
    base = podman.image_size(podmanharness.BASE)
    print("build stage: %.0f MB (%.0f MB over its base)" % (size / 1e6, (size - base) / 1e6))


def test_runtime_image_is_small_and_non_root(podman, image):
    cfg = podman.run("image", "inspect", "-f",
                     "{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.StopSignal}}",
                     image).stdout.strip()
    user, entrypoint, stopsignal = cfg.split("|")
    assert user == "10001:10001", cfg
    assert entrypoint == '["/usr/local/bin/zkelectd"]', cfg
    assert "SIGTERM" in stopsignal, cfg
    r = podman.run("run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c",
                   "id -u; zkelectd --version; zkelectctl --version; "
                   "ldd /usr/local/bin/zkelectd /usr/local/bin/zkelectctl; "
                   "for t in cc gcc meson java python3 curl; do command -v $t; done; true")
    out = r.stdout
    assert out.splitlines()[0] == "10001", out
    assert "not found" not in out, out
    for tool in ("cc", "gcc", "meson", "java", "python3", "curl"):
        assert "/" + tool + "\n" not in out, "runtime image has %s:\n%s" % (tool, out)
    size = podman.image_size(image)
    base = podman.image_size(podmanharness.BASE_SLIM)
    print("runtime image: %.1f MB, %.1f MB over its base" % (size / 1e6, (size - base) / 1e6))
    # The layers zkelect adds: the five libraries, the user, two binaries.
    assert size - base < 10e6, "runtime image adds %d bytes to its base" % (size - base)


def run_agent(podman, image, containers, zk_hostport, election, agent_id, workdir,
              extra_yaml=""):
    """One agent in a container: host network, its socket directory and its
    configuration mounted from the host. Returns (name, socket path)."""
    d = os.path.join(workdir, agent_id)
    os.makedirs(d)
    os.chmod(d, 0o777)   # the image's user (10001) creates the socket here
    conf = os.path.join(workdir, agent_id + ".yaml")
    with open(conf, "w") as f:
        f.write("zookeeper:\n  servers: \"%s\"\n  session_timeout: 2s\n"
                "election:\n  path: %s\n  id: %s\n"
                "api:\n  socket: /run/zkelect/zkelect.sock\n"
                "log:\n  level: info\n%s" % (zk_hostport, election, agent_id, extra_yaml))
    os.chmod(conf, 0o644)
    name = "zkit-%s-%s" % (uuid.uuid4().hex[:8], agent_id)
    containers.append(name)
    podman.run("run", "-d", "--name", name, "--network", "host",
               "-v", "%s:/run/zkelect" % d,
               "-v", "%s:/etc/zkelect/zkelect.yaml:ro" % conf, image)
    return name, os.path.join(d, "zkelect.sock")


def status(sock):
    try:
        r = unix_request(sock, "GET", "/v1/status", timeout=1.0)
    except OSError:
        return None
    return r.json() if r.status == 200 else None


def leads(sock):
    try:
        return unix_request(sock, "GET", "/v1/leader", timeout=0.5).status == 200
    except OSError:
        return False


def zombie_children(pid):
    """PIDs of zombie processes whose parent is `pid` (host PID namespace)."""
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % e) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if fields[0] == "Z" and int(fields[1]) == pid:
            out.append(int(e))
    return out


def test_agents_in_containers_elect_and_hand_over_on_stop(podman, image, containers,
                                                          zk_hostport, election, tmp_path,
                                                          observer):
    # The on_leader hook leaves an orphan behind: a `sleep` whose parent (the
    # hook's shell) exits at once. In the container the orphan is re-parented
    # to PID 1, zkelectd, which must reap it.
    hook = ("notify:\n  on_leader: [\"/bin/sh\", \"-c\", \"sleep 0.3 & echo orphan $!\"]\n"
            "  hook_timeout: 5s\n")
    agents = {}
    for n in ("c1", "c2"):
        agents[n] = run_agent(podman, image, containers, zk_hostport, election, n,
                              str(tmp_path), hook)

    def one_leader():
        ls = [n for n, (_, sock) in agents.items() if leads(sock)]
        return ls[0] if len(ls) == 1 else None
    first = poll(one_leader, 60, what="one of two agents in containers to lead")
    second = "c2" if first == "c1" else "c1"
    s1 = status(agents[first][1])
    data, stat = observer.election_node(election)
    assert s1["id"] == first == data and s1["epoch"] == stat.mzxid, (s1, data, stat)
    poll(lambda: (status(agents[second][1]) or {}).get("role") == "follower"
         and status(agents[second][1])["leader"]["id"] == first, 20,
         what="%s to follow %s" % (second, first))

    # PID 1 reaps the hook's orphan: no zombie child stays behind.
    pid1 = podmanharness.container_pid(podman, agents[first][0])
    poll(lambda: "orphan" in podman.run("logs", agents[first][0]).stderr
         + podman.run("logs", agents[first][0]).stdout, 10, what="the hook to run")
    poll(lambda: not zombie_children(pid1), 10,
         what="zkelectd (PID 1) to reap the hook's orphan")

    # podman stop: SIGTERM to PID 1, a graceful stop, exit status 0, and the
    # other agent leads at once under a higher epoch.
    t0 = time.monotonic()
    stop = subprocess.Popen(["podman", "stop", "--time", "30", agents[first][0]],
                            env=podman.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    poll(lambda: leads(agents[second][1]), 10, interval=0.005,
         what="%s to lead after podman stop of %s" % (second, first))
    t1 = time.monotonic()
    out = stop.communicate(timeout=60)[0]
    t2 = time.monotonic()
    assert stop.returncode == 0, out
    state, code = podmanharness.container_exit(podman, agents[first][0])
    assert state == "exited" and code == 0, (state, code)
    s2 = status(agents[second][1])
    assert s2["epoch"] > s1["epoch"], (s1, s2)
    logs = podman.run("logs", agents[first][0])
    assert "stopping" in logs.stdout + logs.stderr, logs.stderr[-2000:]
    print("handover in containers: successor leads %.0f ms after `podman stop` began; "
          "podman stop returned after %.0f ms" % ((t1 - t0) * 1000, (t2 - t0) * 1000))
    # Nothing of the stopped agent is left in the election.
    poll(lambda: len(observer.contenders(election)) == 1, 10,
         what="the stopped agent's node to be gone")
