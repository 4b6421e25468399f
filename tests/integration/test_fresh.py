# SPDX-License-Identifier: MIT
"""What a new user's machine keeps after the demo (issue 32, item 1): on a
fresh Debian 12 with systemd as PID 1 (podman; the minimal image, systemd,
systemd-sysv and dbus), `tests/fresh/no-new-daemons.sh ./scripts/demo.sh`
run in a copy of this tree: the demo installs its profile
(install-deps.sh --demo), builds and runs, and afterwards no unit or init
script is newly enabled, no socket newly listening, no process or unit
newly running. It prints how long it took and what it installed.

The same script runs on CI's kind of machine, a chroot without systemd:
    /work/shared/tools/fresh-machine 'tests/fresh/no-new-daemons.sh ./scripts/demo.sh'
(or any fresh Debian 12). This test downloads the demo's packages each
time (about 260), so it takes minutes; it skips where podman cannot run
a container."""

import os
import re
import subprocess

import podmanharness

TOP = podmanharness.TOP


def test_demo_leaves_no_daemon_under_systemd(tmp_path):
    p = podmanharness.podman_or_skip()
    image = podmanharness.systemd_image(p, package=False)
    m = podmanharness.SystemdMachine(p, image)
    try:
        # This tree as a new user's clone has it: no .git, no build.
        tar = str(tmp_path / "project.tar")
        subprocess.run(["tar", "-C", TOP, "-cf", tar, "--exclude=./build*", "--exclude=./.git",
                        "--exclude=./obj-*", "."], check=True)
        p.run("cp", tar, "%s:/root/project.tar" % m.name)
        m.sh("mkdir -p /root/project && tar -C /root/project -xf /root/project.tar && "
             "rm /root/project.tar")
        r = m.sh("cd /root/project && tests/fresh/no-new-daemons.sh ./scripts/demo.sh 2>&1",
                 check=False, timeout=1800)
        out = r.stdout
        took = re.search(r"no-new-daemons: .* took .*", out)
        print(took.group(0) if took else out[-3000:])
        assert r.returncode == 0, out[-6000:]
        assert "left nothing enabled, listening or running" in out, out[-6000:]
        # The demo itself ran: a handover and a failover.
        assert "graceful handover" in out and "crash failover" in out, out[-6000:]
    finally:
        m.remove()
