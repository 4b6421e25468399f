# SPDX-License-Identifier: MIT
"""scripts/install-deps.sh disables again what its install enabled, and
only that: the lists of links it compares before and after the install
(its functions enabled_links and new_links, sourced), on a tree of links
made here."""

import os
import subprocess

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIB = os.path.join(TOP, "scripts", "install-deps.sh")


def link(root, path, target="/dev/null"):
    p = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    os.symlink(target, p)


def links(root):
    """enabled_links, as install-deps.sh keeps it: $(...), no last newline."""
    r = subprocess.run(["bash", "-c", '. "$1"; l=$(enabled_links "$2"); echo "$l"', "test", LIB,
                        root],
                       capture_output=True, text=True, check=True)
    return r.stdout.rstrip("\n")


def test_an_install_that_enables_a_unit_leaves_the_init_scripts_alone(tmp_path):
    """A machine with an init script enabled (ssh) and a unit; the install
    adds a unit (etcd) and an init script (nginx). Only those two are new:
    the ssh script that was there before must not be taken for new (it
    was, while each part of the list was sorted alone: the install would
    have disabled the machine's ssh)."""
    root = str(tmp_path)
    link(root, "/etc/systemd/system/multi-user.target.wants/cron.service")
    link(root, "/etc/rc2.d/S01ssh")
    link(root, "/etc/rc3.d/S01ssh")
    before = links(root)
    link(root, "/etc/systemd/system/multi-user.target.wants/etcd.service")
    link(root, "/etc/rc2.d/S01nginx")
    after = links(root)
    r = subprocess.run(["bash", "-c", '. "$1"; new_links "$2" "$3"', "test", LIB, before, after],
                       capture_output=True, text=True)
    new = [x[len(root):] for x in r.stdout.split()]
    assert new == ["/etc/rc2.d/S01nginx",
                   "/etc/systemd/system/multi-user.target.wants/etcd.service"], new
    assert r.stderr == "", r.stderr
