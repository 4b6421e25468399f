#!/usr/bin/env bash
# Installs what zkelect needs to build, run and test on Debian (12 or later).
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq \
	build-essential meson ninja-build pkg-config git \
	libevent-dev libyaml-dev libzookeeper-mt-dev check libsystemd-dev \
	zookeeper default-jre-headless \
	python3 python3-pytest python3-kazoo \
	libcurator-recipes-java \
	default-jdk-headless \
	curl valgrind procps clang libclang-rt-14-dev \
	etcd-server etcd-client wrk nginx-light >/dev/null
echo "install-deps: done"
