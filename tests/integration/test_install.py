# SPDX-License-Identifier: MIT
"""`meson install` puts everything where it belongs, and the systemd units
verify cleanly and stay within the hardening budget (exposure <= 2.0)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from zkharness import ZKELECTD  # noqa: E402

BUILD = os.path.dirname(os.path.dirname(os.path.abspath(ZKELECTD)))


@pytest.fixture(scope="module")
def destdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("dest")
    r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", str(d), "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def installed(destdir, suffix):
    hits = [os.path.join(root, f) for root, _, files in os.walk(destdir) for f in files
            if os.path.join(root, f).endswith(suffix)]
    assert len(hits) == 1, "%s: %r" % (suffix, hits)
    return hits[0]


def test_install_layout(destdir):
    for suffix in ("/bin/zkelectd", "/bin/zkelectctl", "/etc/zkelect/zkelect.yaml",
                   "/man8/zkelectd.8", "/man1/zkelectctl.1", "/man5/zkelect.yaml.5",
                   "/lib/systemd/system/zkelectd.service",
                   "/lib/systemd/system/zkelectd@.service", "/lib/sysusers.d/zkelect.conf"):
        installed(destdir, suffix)
    conf = installed(destdir, "/etc/zkelect/zkelect.yaml")
    r = subprocess.run([installed(destdir, "/bin/zkelectd"), "-c", conf, "--check-config"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "configuration OK\n", r.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
@pytest.mark.parametrize("unit", ["zkelectd.service", "zkelectd@.service"])
def test_units_verify_and_security(destdir, tmp_path, unit):
    src = installed(destdir, "/lib/systemd/system/" + unit)
    binary = installed(destdir, "/bin/zkelectd")
    text = open(src).read()
    bindir = re.search(r"^ExecStart=(\S+)/zkelectd ", text, re.M).group(1)
    # Verify against the binary just installed, not one on this host.
    name = unit.replace("@.", "@test.")
    path = tmp_path / name
    path.write_text(text.replace(bindir + "/zkelectd", binary))
    env = dict(os.environ, MANPATH=os.path.dirname(os.path.dirname(
        installed(destdir, "/man8/zkelectd.8"))))
    r = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                       text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stderr.strip() == "", r.stderr
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(path)],
                       capture_output=True, text=True, cwd=str(tmp_path))
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    print("%s: exposure %s" % (unit, m.group(1)))
    assert float(m.group(1)) <= 2.0
