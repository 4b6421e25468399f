#!/usr/bin/env bash
# Installs what zkelect needs on Debian (12 or later), with apt-get.
#   scripts/install-deps.sh           everything: build, run every test suite,
#                                     the benchmarks, containers and the example clients
#   scripts/install-deps.sh --build   only what building zkelectd and zkelectctl needs
#                                     (no recommends; used by docker/Dockerfile)
set -euo pipefail
mode=all
usage() {
	echo "usage: $0 [--build]"
	echo "  (no argument)  everything the tests, benchmarks and examples need"
	echo "  --build        only what building zkelectd and zkelectctl needs"
}
case "${1:-}" in
"") ;;
--build) mode=build ;;
-h|--help) usage; exit 0 ;;
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

# Tests and tools (one reason each):
test=(
	git check                                  # clones; unit tests (Check)
	zookeeper default-jre-headless             # a real ZooKeeper for every integration test
	python3 python3-pytest python3-kazoo python3-yaml  # the suite; YAML for the Kubernetes manifest
	libcurator-recipes-java default-jdk-headless       # Curator LeaderLatch; the Java client example
	golang-go                                  # the Go client example
	curl valgrind procps                       # scripts, the valgrind test, ps/kill
	systemd man-db                             # systemd-analyze verify (it runs man for Documentation=)
	clang libclang-rt-14-dev                   # libFuzzer
	etcd-server etcd-client wrk nginx-light    # benchmark references
	podman runc debootstrap podman-compose     # container image, compose demo
	stunnel4 openssl                           # ZooKeeper over TLS (test_tls.py)
	prometheus                                 # the Grafana dashboard's queries (test_dashboard.py)
	debhelper lintian                          # the Debian package (test_package.py)
)

$SUDO apt-get update -qq
if [ "$mode" = build ]; then
	$SUDO apt-get install -y -qq --no-install-recommends "${build[@]}" >/dev/null
else
	$SUDO apt-get install -y -qq "${build[@]}" "${test[@]}" >/dev/null
fi
echo "install-deps: done ($mode)"
