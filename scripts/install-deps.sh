#!/usr/bin/env bash
# Installs what zkelect needs on Debian (12 or later), with apt-get, in one
# of three profiles, each the one before and more:
#   scripts/install-deps.sh --build   building zkelectd and zkelectctl: the
#                                     compiler, meson and the -dev libraries
#                                     (no recommends; docker/Dockerfile)
#   scripts/install-deps.sh --demo    building and trying it: the above, Check
#                                     (meson's default build has the unit tests),
#                                     ZooKeeper and a JRE, curl and python3
#                                     (no recommends; scripts/demo.sh)
#   scripts/install-deps.sh --test    every test suite, the benchmarks, containers,
#                                     the Debian package and the example clients
#                                     (scripts/test.sh)
# None leaves a daemon enabled or running: services that packages would
# start are not started (a policy-rc.d while apt runs), and units they
# enable are disabled again. Only what this run enabled is touched.
set -euo pipefail
# What is enabled now: every link systemctl enable or update-rc.d makes for
# something that starts a process (a service, socket, timer or path unit;
# an init script of a runlevel). Targets and rcS.d's boot-time scripts
# (kmod, procps: one-shots, no daemon) are left as packages set them.
# ROOT (default /) for the test. One list in C order, as comm needs: each
# part sorted alone and then joined is not, and comm then took links that
# were there before for new ones (the machine's own ssh script, say).
enabled_links() {
	local root=${1:-}
	{	# a directory the machine lacks lists nothing
		find "$root/etc/systemd/system" "$root/etc/systemd/user" -type l \
		    \( -name '*.service' -o -name '*.socket' -o -name '*.timer' \
		    -o -name '*.path' \) 2>/dev/null || true
		find "$root"/etc/rc[2-5].d -name 'S*' 2>/dev/null || true
	} | LC_ALL=C sort
}

# The lines of AFTER that BEFORE lacks (both lists from enabled_links).
new_links() {
	LC_ALL=C comm -13 <(printf '%s\n' "$1") <(printf '%s\n' "$2")
}

# Sourced (tests/integration/test_install_deps.py): the functions only.
[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0

usage() {
	echo "usage: $0 --build|--demo|--test"
	echo "  --build  what building zkelectd and zkelectctl needs"
	echo "  --demo   that, and what scripts/demo.sh and the README's by-hand"
	echo "           steps need: Check, ZooKeeper, a JRE, curl, python3"
	echo "  --test   everything the test suites, benchmarks and examples need"
	echo "No profile leaves a daemon enabled or running."
}
mode=
case "${1:-}" in
--build) mode=build ;;
--demo) mode=demo ;;
--test) mode=test ;;
-h|--help) usage; exit 0 ;;
"") echo "install-deps.sh: which profile? --build, --demo or --test" >&2; usage >&2; exit 1 ;;
*) echo "install-deps.sh: unknown argument '$1'" >&2; usage >&2; exit 1 ;;
esac
if [ $# -gt 1 ]; then
	echo "install-deps.sh: unexpected argument '$2'" >&2; usage >&2; exit 1
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive

# Compiler, build system and the libraries the agent links.
build=(build-essential meson ninja-build pkg-config
	libevent-dev libyaml-dev libzookeeper-mt-dev libsystemd-dev)

# The demo and the README's by-hand steps (one reason each):
demo=(
	check                                      # meson's default build has the unit tests
	zookeeper default-jre-headless             # the ZooKeeper zk-server.sh starts
	curl python3                               # the demo asks the agents; a free port
)

# Tests and tools (one reason each):
test=(
	git                                        # clones
	python3-pytest python3-kazoo python3-yaml  # the suite; YAML for the Kubernetes manifest
	libcurator-recipes-java default-jdk-headless       # Curator LeaderLatch; the Java client example
	golang-go                                  # the Go client example
	valgrind procps                            # the valgrind test, ps/kill
	systemd man-db                             # systemd-analyze verify (it runs man for Documentation=)
	clang libclang-rt-14-dev                   # libFuzzer
	etcd-server etcd-client wrk nginx-light    # benchmark references
	podman runc debootstrap podman-compose     # container image, compose demo
	stunnel4 openssl                           # ZooKeeper over TLS (test_tls.py)
	prometheus                                 # the Grafana dashboard's queries (test_dashboard.py)
	debhelper lintian                          # the Debian package (test_package.py)
)

case $mode in
build) pkgs=("${build[@]}"); opts=(--no-install-recommends) ;;
demo) pkgs=("${build[@]}" "${demo[@]}"); opts=(--no-install-recommends) ;;
test) pkgs=("${build[@]}" "${demo[@]}" "${test[@]}"); opts=() ;;
esac

before=$(enabled_links)

# No service starts while apt runs (invoke-rc.d and deb-systemd-invoke ask
# policy-rc.d; 101: action forbidden), unless the machine has a policy of
# its own, which is left as it is.
policy=/usr/sbin/policy-rc.d
ours=no
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# scripts/install-deps.sh: no service starts while it installs.\nexit 101\n' |
	    $SUDO tee "$policy" >/dev/null
	$SUDO chmod 755 "$policy"
	ours=yes
fi
cleanup() {
	if [ "$ours" = yes ]; then
		$SUDO rm -f "$policy"
	fi
}
trap cleanup EXIT

$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${opts[@]}" "${pkgs[@]}" >/dev/null
cleanup
ours=no

# Disable what this install enabled (and stop it, where systemd runs and
# a policy of the machine's own let it start).
live=no
[ -d /run/systemd/system ] && live=yes
units=() scripts=()
while read -r link; do
	[ -n "$link" ] || continue
	case $link in
	/etc/rc*.d/S*) scripts+=("${link##*/S[0-9][0-9]}"); continue ;;
	/etc/systemd/system/*/*|/etc/systemd/user/*/*) unit=${link##*/} ;;
	*) unit=$(basename "$(readlink "$link")") ;;	# an alias: its unit
	esac
	case $link in /etc/systemd/user/*) unit="--global $unit" ;; esac
	units+=("$unit")
done < <(new_links "$before" "$(enabled_links)")
for name in $(printf '%s\n' "${scripts[@]}" | sort -u); do
	echo "install-deps: disabling the init script $name, which the install enabled"
	$SUDO update-rc.d "$name" disable >/dev/null 2>&1 ||
	    $SUDO rm -f /etc/rc[2-5].d/S[0-9][0-9]"$name"
done
for unit in $(printf '%s\n' "${units[@]}" | grep -v -- '--global' | sort -u); do
	echo "install-deps: disabling $unit, which the install enabled"
	if command -v systemctl >/dev/null; then
		if [ "$live" = yes ]; then
			$SUDO systemctl disable --now --quiet "$unit"
		else
			$SUDO systemctl disable --quiet "$unit"
		fi
	else
		$SUDO deb-systemd-helper disable "$unit"
	fi
done
for unit in $(printf '%s\n' "${units[@]}" | sed -n 's/^--global //p' | sort -u); do
	echo "install-deps: disabling the user unit $unit, which the install enabled"
	$SUDO systemctl --global disable --quiet "$unit" 2>/dev/null ||
	    $SUDO deb-systemd-helper --user disable "$unit"
done
echo "install-deps: done ($mode)"
