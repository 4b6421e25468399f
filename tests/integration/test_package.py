# SPDX-License-Identifier: MIT
"""The Debian package: built from this tree with dpkg-buildpackage (debian/)
in a Debian 12 container, lintian clean but for the tags debian/README.Debian
explains, and installed with `apt install ./zkelect_*.deb` on a fresh Debian
12 (the local debootstrap image): the files land, the example config is a
conffile, `zkelectd --version` runs, and nothing is enabled or started.

The container tests skip only where podman cannot run a container
(podmanharness); CI's fresh machine is a chroot without cgroups, so they
skip there. test_builds_here builds the package on this machine instead
(dpkg-buildpackage and lintian from scripts/install-deps.sh --test; about 30 s),
so CI checks debian/ too."""

import os
import re
import shutil
import subprocess

import pytest

import podmanharness  # noqa: E402

TOP = podmanharness.TOP


@pytest.fixture(scope="module")
def podman():
    return podmanharness.podman_or_skip()


@pytest.fixture(scope="module")
def deb(podman):
    out, version, seconds = podmanharness.zkelect_deb(podman)
    print("zkelect %s built in %.1f s" % (version, seconds))
    return out, version


def lintian_tags_explained(text):
    tags = re.findall(r"^([EWIPX]): zkelect[^:]*: (\S+)", text, re.M)
    print("lintian:", tags or "clean")
    explained = open(os.path.join(TOP, "debian/README.Debian")).read()
    for level, tag in tags:
        assert level not in ("E", "W"), "lintian %s: %s\n%s" % (level, tag, text)
        assert tag in explained, "lintian tag %s not explained in debian/README.Debian" % tag


def project_version():
    with open(os.path.join(TOP, "meson.build")) as f:
        return re.search(r"version : '([^']+)'", f.read()).group(1)


def test_lintian_tags_are_explained(deb):
    out, version = deb
    assert version == project_version(), "debian/changelog says %s, meson.build %s" % (
        version, project_version())
    lintian_tags_explained(open(os.path.join(out, "lintian.txt")).read())


FILES = ["/usr/bin/zkelectd", "/usr/bin/zkelectctl",
         "/lib/systemd/system/zkelectd.service", "/lib/systemd/system/zkelectd@.service",
         "/usr/lib/sysusers.d/zkelect.conf", "/etc/zkelect/zkelect.yaml",
         "/usr/share/man/man8/zkelectd.8.gz", "/usr/share/man/man1/zkelectctl.1.gz",
         "/usr/share/man/man5/zkelect.yaml.5.gz",
         "/usr/share/bash-completion/completions/zkelectctl",
         "/usr/share/doc/zkelect/README.Debian", "/usr/share/doc/zkelect/copyright"]


def test_apt_install_on_fresh_debian(podman, deb):
    out, version = deb
    script = (
        "set -e; cd /debs; apt-get update -qq; "
        "apt-get install -y -qq ./zkelect_%s_amd64.deb >/tmp/apt.log 2>&1 "
        "|| { cat /tmp/apt.log; exit 1; }; "
        "echo '== version'; zkelectd --version; zkelectctl --version; "
        "echo '== files'; for f in %s; do test -e $f && echo ok $f || echo missing $f; done; "
        "echo '== conffiles'; dpkg-query -W -f='${Conffiles}\\n' zkelect; "
        "echo '== check'; zkelectd -c /etc/zkelect/zkelect.yaml --check-config; "
        "echo '== enabled'; ls /etc/systemd/system/*.wants 2>/dev/null | grep zkelect || echo none; "
        "echo '== running'; for p in /proc/[0-9]*; do cat $p/comm; done | grep -c zkelectd || true"
        % (version, " ".join(FILES)))
    r = podman.run("run", "--rm", "--network", "host", "-v", out + ":/debs:ro",
                   podmanharness.BASE, "sh", "-c", script, timeout=900)
    text = r.stdout
    print(text)
    sections = dict(re.findall(r"== (\w+)\n(.*?)(?=\n== |\Z)", text, re.S))
    assert sections["version"].split() == ["zkelectd", version, "zkelectctl", version], \
        sections["version"]
    missing = [l for l in sections["files"].splitlines() if not l.startswith("ok ")]
    assert not missing, missing
    assert "/etc/zkelect/zkelect.yaml" in sections["conffiles"]
    assert sections["check"].strip() == "configuration OK"
    assert sections["enabled"].strip() == "none"
    assert sections["running"].strip() == "0"


@pytest.mark.skipif(shutil.which("dh") is None or shutil.which("lintian") is None,
                    reason="debhelper or lintian not installed (scripts/install-deps.sh --test)")
def test_builds_here(tmp_path):
    """dpkg-buildpackage -b in a copy of the tree on this machine: the
    package holds every file, the config is a conffile, lintian is clean but
    for the tags explained."""
    src = tmp_path / "src"
    tar = subprocess.Popen(["tar", "-C", TOP, "-c", "--exclude=./build*", "--exclude=./.git",
                            "--exclude=./obj-*", "."], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-C", str(tmp_path), "-x", "--one-top-level=src"],
                   stdin=tar.stdout, check=True)
    tar.stdout.close()
    assert tar.wait() == 0
    r = subprocess.run(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=str(src),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    version = project_version()
    deb = tmp_path / ("zkelect_%s_%s.deb" % (version, subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()))
    assert deb.exists(), os.listdir(str(tmp_path))
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    paths = {line.split()[5].lstrip(".") for line in listing.splitlines()}
    missing = [f for f in FILES if f not in paths]
    assert not missing, missing
    conffiles = subprocess.run(["dpkg-deb", "-f", str(deb), "Conffiles"],
                               capture_output=True, text=True).stdout
    info = subprocess.run(["dpkg-deb", "-I", str(deb), "conffiles"], capture_output=True,
                          text=True).stdout
    assert "/etc/zkelect/zkelect.yaml" in conffiles + info
    changes = [f for f in os.listdir(str(tmp_path)) if f.endswith(".changes")]
    r = subprocess.run(["lintian", "--pedantic", "-I", str(tmp_path / changes[0])],
                       capture_output=True, text=True, timeout=600)
    lintian_tags_explained(r.stdout + r.stderr)
