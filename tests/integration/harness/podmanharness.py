# SPDX-License-Identifier: MIT
"""Podman for the container tests: its own configuration and image store, a
local Debian base image, and the zkelect image built from this tree.

Everything podman keeps lives in one cache directory, ZKELECT_TEST_PODMAN_CACHE
(default /var/tmp/zkelect-test-podman as root, ~/.cache/zkelect-test-podman
otherwise): containers.conf, storage.conf, the image store (the Debian base
made with debootstrap once, the zkelect image and its build layers, the
stand-in images of the compose test), network definitions and podman's
runtime state. The user's own podman store is never touched. Delete the
directory to drop the cache (`podman --root DIR/storage system reset` first
if a run was killed half-way and left a container mounted).

Settings: runc with cgroupfs (crun refuses
hybrid cgroup hierarchies; default ulimits cannot be set everywhere), builds
with chroot isolation and the host's network, nothing pulled from a registry.

Tests call podman_or_skip(): it skips, saying why, where podman cannot run a
container at all (not installed, no cgroup filesystem as in a chroot, a
runtime error), and fails on anything else.
"""

import atexit
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
IMAGE = "localhost/zkelect:latest"        # what compose.yaml's `image: zkelect` names
BUILD_IMAGE = "localhost/zkelect-build:latest"
BASE = "docker.io/library/debian:bookworm"
BASE_SLIM = "docker.io/library/debian:bookworm-slim"


def _default_cache():
    if os.geteuid() == 0:
        return "/var/tmp/zkelect-test-podman"
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                        "zkelect-test-podman")


CACHE = os.environ.get("ZKELECT_TEST_PODMAN_CACHE") or _default_cache()


class PodmanUnavailable(Exception):
    """podman cannot run containers here (the reason is the message)."""


class Podman:
    def __init__(self, cache):
        self.cache = cache
        self.env = dict(os.environ,
                        CONTAINERS_CONF=os.path.join(cache, "containers.conf"),
                        CONTAINERS_STORAGE_CONF=os.path.join(cache, "storage.conf"),
                        BUILDAH_ISOLATION="chroot")
        self._lock = None

    def run(self, *args, check=True, timeout=120, input=None):
        """podman ARGS...; returns the CompletedProcess (text)."""
        r = subprocess.run(["podman"] + list(args), capture_output=True, text=True,
                           env=self.env, timeout=timeout, input=input,
                           stdin=None if input is not None else subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError("podman %s: exit %d\n%s%s" % (
                " ".join(args), r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
        return r

    def exists(self, image):
        return self.run("image", "exists", image, check=False).returncode == 0

    # -- setup --------------------------------------------------------------
    def setup(self):
        os.makedirs(self.cache, exist_ok=True)
        # One test session at a time uses the cache (it removes what it finds).
        self._lock = open(os.path.join(self.cache, "lock"), "w")
        deadline = time.monotonic() + 1800
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("%s stayed locked by another test run" % self.cache)
                time.sleep(1)
        with open(self.env["CONTAINERS_CONF"], "w") as f:
            f.write('[containers]\ndefault_ulimits = []\n'
                    '[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\n'
                    'tmp_dir = "%s/tmp"\nevents_logger = "file"\n'
                    '[network]\nnetwork_config_dir = "%s/networks"\n'
                    % (self.cache, self.cache))
        with open(self.env["CONTAINERS_STORAGE_CONF"], "w") as f:
            f.write('[storage]\ndriver = "overlay"\ngraphroot = "%s/storage"\n'
                    'runroot = "%s/run"\n' % (self.cache, self.cache))
        # Containers a killed earlier run left behind (this store is ours alone).
        self.run("rm", "--all", "--force", "--time", "0", check=False)
        self.run("volume", "prune", "--force", check=False)

    def probe(self):
        """Run a container from a three-file root (/bin/true and its libraries):
        raises PodmanUnavailable with podman's own words if it cannot."""
        root = tempfile.mkdtemp(prefix="probe-", dir=self.cache)
        try:
            true = shutil.which("true") or "/bin/true"
            files = [true] + re.findall(r"(/\S+) \(0x", subprocess.run(
                ["ldd", true], capture_output=True, text=True).stdout)
            for f in files:
                dst = os.path.join(root, f.lstrip("/"))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy(f, dst)
            r = self.run("run", "--rm", "--network", "host", "--rootfs", root, true,
                         check=False, timeout=120)
            if r.returncode != 0:
                lines = [l for l in r.stderr.strip().splitlines() if l.strip()]
                raise PodmanUnavailable("podman cannot run a container here: %s"
                                        % (lines[-1] if lines else "exit %d" % r.returncode))
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def ensure_base(self):
        """debian:bookworm (and -slim) in the store: made once with debootstrap,
        as registries may be out of reach; kept in the cache afterwards."""
        if self.exists(BASE) and self.exists(BASE_SLIM):
            return
        if not shutil.which("debootstrap"):
            raise AssertionError("debootstrap not found (scripts/install-deps.sh --test installs it)")
        mirror = "http://deb.debian.org/debian"
        try:
            with open("/etc/apt/sources.list.d/debian.sources") as f:
                m = re.search(r"^URIs:\s*(\S+)", f.read(), re.M)
                if m:
                    mirror = m.group(1)
        except OSError:
            pass
        root = tempfile.mkdtemp(prefix="debootstrap-", dir=self.cache)
        try:
            r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root, mirror],
                               capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, "debootstrap failed:\n" + r.stdout[-2000:] + r.stderr[-2000:]
            # As Debian's own images: no package lists or caches.
            for d in ("var/lib/apt/lists", "var/cache/apt", "var/log"):
                p = os.path.join(root, d)
                for e in os.listdir(p):
                    q = os.path.join(p, e)
                    if os.path.isdir(q) and not os.path.islink(q):
                        shutil.rmtree(q)
                    else:
                        os.unlink(q)
            os.makedirs(os.path.join(root, "var/lib/apt/lists/partial"))
            os.makedirs(os.path.join(root, "var/cache/apt/archives/partial"))
            tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
            r = subprocess.run(["podman", "import", "--change", 'CMD ["bash"]', "-", BASE],
                               stdin=tar.stdout, capture_output=True, text=True,
                               env=self.env, timeout=600)
            tar.stdout.close()
            tar.wait()
            assert r.returncode == 0, "podman import: " + r.stderr
            self.run("tag", BASE, BASE_SLIM)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def build(self, tag, dockerfile, context=TOP, target=None, timeout=1800):
        """podman build, as docker/README.md shows it; returns seconds taken."""
        args = ["build", "--isolation", "chroot", "--network", "host", "--pull=never",
                "--format", "docker", "-f", dockerfile, "-t", tag]
        if target:
            args += ["--target", target]
        t0 = time.monotonic()
        self.run(*(args + [context]), timeout=timeout)
        return time.monotonic() - t0

    def image_size(self, image):
        return int(self.run("image", "inspect", "-f", "{{.Size}}", image).stdout.strip())

    def close(self):
        """Drop images that newer builds left untagged, unmount the store,
        release the lock. Containers are removed by the tests themselves."""
        if self._lock is None:
            return
        self.run("image", "prune", "--force", check=False)
        overlay = os.path.join(self.cache, "storage", "overlay")
        if os.path.ismount(overlay):
            subprocess.run(["umount", overlay], capture_output=True)
        self._lock.close()
        self._lock = None


_podman = None
_failure = None
_built = {}


def podman_or_skip():
    """The session's Podman, set up once; skips where containers cannot run."""
    global _podman, _failure
    if _failure is not None:
        pytest.skip(_failure)
    if _podman is not None:
        return _podman
    for tool in ("podman", "runc"):
        if not shutil.which(tool):
            _failure = "%s not installed (scripts/install-deps.sh --test installs it)" % tool
            pytest.skip(_failure)
    with open("/proc/self/mountinfo") as f:
        if not re.search(r" - cgroup2? ", f.read()):
            _failure = ("podman cannot run containers here: no cgroup filesystem is "
                        "mounted (a chroot?), and runc needs one")
            pytest.skip(_failure)
    p = Podman(CACHE)
    p.setup()
    atexit.register(p.close)
    try:
        p.probe()
    except PodmanUnavailable as e:
        _failure = str(e)
        p.close()
        pytest.skip(_failure)
    p.ensure_base()
    _podman = p
    return p


def zkelect_image(p):
    """Build the zkelect image from this tree once per session; returns
    (image, seconds). The build stage is tagged too (BUILD_IMAGE), which keeps
    its layers (the apt-get step above all) in the cache when close() prunes
    what older builds left: an unchanged tree rebuilds in seconds."""
    if "zkelect" not in _built:
        dockerfile = os.path.join(TOP, "docker/Dockerfile")
        t = p.build(BUILD_IMAGE, dockerfile, target="build")
        _built["zkelect"] = t + p.build(IMAGE, dockerfile)
    return IMAGE, _built["zkelect"]


def container_pid(p, name):
    """The host PID of a running container's PID 1."""
    return int(p.run("inspect", "-f", "{{.State.Pid}}", name).stdout.strip())


def container_exit(p, name):
    out = p.run("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", name).stdout.split()
    return out[0], int(out[1])


DEB_BUILD_IMAGE = "localhost/zkelect-debbuild:latest"


def zkelect_deb(p):
    """Build the Debian package from this tree once per session, in a Debian
    12 container (dpkg-buildpackage -b -us -uc, then lintian --pedantic);
    returns (directory holding zkelect_*.deb and lintian.txt, version,
    seconds). The tree is copied inside the container without .git and
    build directories, so the host's tree is left as it was."""
    if "deb" not in _built:
        t0 = time.monotonic()
        p.build(DEB_BUILD_IMAGE, os.path.join(TOP, "tests/integration/standins/deb-build.Dockerfile"),
                context=os.path.join(TOP, "tests/integration/standins"))
        out = tempfile.mkdtemp(prefix="deb-", dir=p.cache)
        atexit.register(shutil.rmtree, out, True)
        script = (
            "set -e; mkdir /tmp/b /tmp/b/src; cd /src; "
            "tar -c --exclude='./build*' --exclude=./.git --exclude='./obj-*' . "
            "| tar -C /tmp/b/src -x; cd /tmp/b/src; "
            "dpkg-buildpackage -b -us -uc >/out/build.log 2>&1 "
            "|| { tail -40 /out/build.log; exit 1; }; "
            "lintian --pedantic -I ../*.changes >/out/lintian.txt 2>&1 || true; "
            "cp ../zkelect_*.deb /out/; rm -f /out/zkelect-dbgsym_*.deb")
        p.run("run", "--rm", "--network", "none", "-v", TOP + ":/src:ro", "-v", out + ":/out",
              DEB_BUILD_IMAGE, "sh", "-c", script, timeout=1200)
        debs = [f for f in os.listdir(out) if f.startswith("zkelect_") and f.endswith(".deb")]
        assert len(debs) == 1, os.listdir(out)
        version = debs[0].split("_")[1]
        _built["deb"] = (out, version, time.monotonic() - t0)
    return _built["deb"]


# -- a Debian 12 with systemd as PID 1 and the package installed ------------

SD_IMAGE = "localhost/zkelect-systemd:latest"


def systemd_image(p, extra=(), package=True):
    """An image of the minimal Debian 12 (debootstrap minbase) with systemd
    as PID 1 and the package built from this tree installed: systemd,
    systemd-sysv and dbus, nothing else (no procps), as a small server
    would have; EXTRA packages on top (the image then has a tag of its
    own). With package=False, without the package: a fresh machine with
    systemd. Built once per session; returns its name."""
    if not package:
        name = "localhost/zkelect-bare-systemd:latest"
        if name not in _built:
            d = tempfile.mkdtemp(prefix="bare-", dir=p.cache)
            try:
                with open(os.path.join(d, "Dockerfile"), "w") as f:
                    f.write("FROM debian:bookworm\n"
                            "RUN apt-get update && apt-get install -y --no-install-recommends "
                            "systemd systemd-sysv dbus && rm -rf /var/lib/apt/lists/*\n"
                            'CMD ["/sbin/init"]\n')
                p.build(name, os.path.join(d, "Dockerfile"), context=d)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            _built[name] = True
        return name
    out, version, _ = zkelect_deb(p)
    name = SD_IMAGE if not extra else "localhost/zkelect-systemd-%s:latest" % "-".join(extra)
    if name in _built:
        return name
    dockerfile = os.path.join(out, "Dockerfile" + "".join("." + e for e in extra))
    with open(dockerfile, "w") as f:
        f.write("FROM debian:bookworm\n"
                "RUN apt-get update && apt-get install -y --no-install-recommends "
                "systemd systemd-sysv dbus %s && rm -rf /var/lib/apt/lists/*\n"
                "COPY zkelect_%s_amd64.deb /tmp/\n"
                "RUN apt-get update && apt-get install -y /tmp/zkelect_%s_amd64.deb "
                "&& rm -rf /var/lib/apt/lists/* /tmp/*.deb\n"
                'CMD ["/sbin/init"]\n' % (" ".join(extra), version, version))
    p.build(name, dockerfile, context=out)
    print("image %s: Debian 12, systemd as PID 1, zkelect %s" % (name, version))
    _built[name] = True
    return name


class SystemdMachine:
    """One container with systemd as PID 1, on the host's network (so a
    ZooKeeper on the host's loopback is its loopback too)."""

    def __init__(self, p, image):
        import json
        import uuid
        from zkharness import poll
        self._json = json
        self.podman = p
        self.name = "zkelect-sd-" + uuid.uuid4().hex[:8]
        p.run("run", "-d", "--name", self.name, "--systemd=always", "--network", "host",
              image)
        poll(lambda: self.sh("systemctl is-system-running", check=False).stdout.strip()
             in ("running", "degraded"), 60, interval=0.5, what="systemd running")

    def sh(self, script, check=True, timeout=120, input=None):
        args = ["exec"] + (["-i"] if input is not None else []) + [self.name, "sh", "-c", script]
        r = self.podman.run(*args, check=False, timeout=timeout, input=input)
        if check:
            assert r.returncode == 0, "%s: %s\n%s%s" % (self.name, script, r.stdout, r.stderr)
        return r

    def write(self, path, text, mode="0644"):
        self.sh("cat > %s && chmod %s %s" % (path, mode, path), input=text)

    def config(self, unit, zk, path, agent_id, extra=""):
        self.write("/etc/zkelect/%s.yaml" % unit,
                   "zookeeper:\n  servers: \"%s\"\n  session_timeout: 2s\n"
                   "election:\n  path: %s\n  id: %s\n"
                   "api:\n  socket: /run/zkelect/%s.sock\n"
                   "log:\n  level: info\n%s" % (zk, path, agent_id, unit, extra))

    def show(self, unit, prop):
        return self.show_unit("zkelectd@" + unit, prop)

    def show_unit(self, unit, prop):
        return self.sh("systemctl show -p %s --value %s" % (prop, unit)).stdout.strip()

    def status(self, unit):
        r = self.sh("zkelectctl -s /run/zkelect/%s.sock status --json" % unit, check=False)
        return self._json.loads(r.stdout) if r.returncode == 0 else None

    def journal(self, unit, *args):
        return self.sh("journalctl --no-pager -u zkelectd@%s %s" % (unit, " ".join(args))).stdout

    def main_pid(self, unit):
        return int(self.show(unit, "MainPID"))

    def remove(self):
        self.podman.run("rm", "--force", "--time", "0", self.name, check=False)
