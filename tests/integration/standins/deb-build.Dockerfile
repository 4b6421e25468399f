# Debian 12 with what dpkg-buildpackage needs for debian/ (Build-Depends),
# and lintian. The tree is mounted at run time, not copied in.
FROM debian:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential fakeroot \
        debhelper meson ninja-build pkg-config \
        libevent-dev libyaml-dev libzookeeper-mt-dev libsystemd-dev lintian \
 && rm -rf /var/lib/apt/lists/*
