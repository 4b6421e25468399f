#!/usr/bin/env bash
# Runs every test suite: installs what is needed, builds zkelect twice
# (plain, and with AddressSanitizer + UndefinedBehaviorSanitizer), and runs
# the unit tests (Check) and the integration tests (pytest, against a real
# ZooKeeper on loopback and real agent processes) on both builds.
#   SKIP_INSTALL=1  do not run apt-get
#   SKIP_ASAN=1     plain build only
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SKIP_INSTALL:-}" != 1 ]; then
	scripts/install-deps.sh
fi

werror=false
[ "${CI:-}" = true ] && werror=true

builds=(build)
[ "${SKIP_ASAN:-}" = 1 ] || builds+=(build-asan)
status=0
for b in "${builds[@]}"; do
	opts=(-Dwerror=$werror)
	[ "$b" = build-asan ] && opts+=(-Db_sanitize=address,undefined -Db_lundef=false)
	if [ -d "$b" ]; then
		meson configure "$b" "${opts[@]}" >/dev/null
	else
		meson setup "$b" "${opts[@]}" >/dev/null
	fi
	ninja -C "$b"
	echo "== unit tests ($b)"
	meson test -C "$b" --suite unit --print-errorlogs || status=1
	echo "== integration tests ($b)"
	ZKELECTD="$PWD/$b/agent/zkelectd" ZKELECTCTL="$PWD/$b/ctl/zkelectctl" \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration || status=1
done
exit $status
