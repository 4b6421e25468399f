#!/usr/bin/env bash
# Runs every test suite: installs what is needed, builds zkelect twice
# (plain, and with AddressSanitizer + UndefinedBehaviorSanitizer), and runs
# the unit tests (Check) and the integration tests (pytest, against a real
# ZooKeeper on loopback and real agent processes) on both builds.
#   --quick         the everyday tier instead: the plain build, the unit
#                   tests with a few hundred simulator seeds (meson's
#                   'quick' suite) and the core integration files; no
#                   install (run scripts/install-deps.sh --test once)
#   SKIP_INSTALL=1  do not run apt-get
#   SKIP_ASAN=1     plain build only
#   SKIP_FUZZ=1     no libFuzzer build and short fuzzing run
#   FUZZ_SECONDS=N  how long each fuzz target runs (default 20)
set -euo pipefail
usage() {
	echo "usage: $0 [--quick] [-h|--help]"
	echo "Builds zkelect (plain and ASan/UBSan) and runs every test suite."
	echo "  --quick         the everyday tier: plain build, unit tests and a few"
	echo "                  hundred simulator seeds, the core integration tests"
	echo "                  (tests/README.md says what each tier covers)"
	echo "  SKIP_INSTALL=1  do not run apt-get"
	echo "  SKIP_ASAN=1     plain build only"
	echo "  SKIP_FUZZ=1     no libFuzzer build and short fuzzing run"
	echo "  FUZZ_SECONDS=N  how long each fuzz target runs (default 20)"
}
quick=no
case "${1:-}" in
"") ;;
--quick) quick=yes ;;
-h|--help) usage; exit 0 ;;
*) echo "test.sh: unknown argument '$1'" >&2; usage >&2; exit 1 ;;
esac
if [ $# -gt 1 ]; then
	echo "test.sh: unexpected argument '$2'" >&2; usage >&2; exit 1
fi
cd "$(dirname "$0")/.."

# The quick tier's integration tests: the election, the API, zkelectctl
# (its one-liners and members too), hooks and the child, partitions' core,
# what a new user meets, the docs, completion and operations; the three
# longest tests of hooks after a lapsed or dropped term (30 s) are left to
# the full run.
QUICK_TESTS=(tests/integration/test_election.py tests/integration/test_api.py
	tests/integration/test_ctl.py tests/integration/test_lock.py
	tests/integration/test_members_zk.py tests/integration/test_notify.py
	tests/integration/test_child.py tests/integration/test_partitions_core.py
	tests/integration/test_newuser.py tests/integration/test_docs.py
	tests/integration/test_completion.py tests/integration/test_operations.py
	tests/integration/test_harness.py)
QUICK_LEFT_OUT=(-k "not test_release_after_lapsed_term_waits_for_hook and not test_stop_after_dropped_term_waits_for_child")

if [ "$quick" = yes ]; then
	t0=$(date +%s)
	[ -d build ] || meson setup build >/dev/null
	ninja -C build
	status=0
	echo "== unit tests and simulator seeds (meson suite quick)"
	meson test -C build --suite quick --print-errorlogs || status=1
	echo "== core integration tests"
	ZKELECTD="$PWD/build/agent/zkelectd" ZKELECTCTL="$PWD/build/ctl/zkelectctl" \
		/usr/bin/python3 -m pytest -q -rs -p no:cacheprovider "${QUICK_LEFT_OUT[@]}" \
		"${QUICK_TESTS[@]}" || status=1
	echo "== quick tier: $(( $(date +%s) - t0 )) s, $([ $status = 0 ] && echo passed || echo FAILED)"
	exit $status
fi

if [ "${SKIP_INSTALL:-}" != 1 ]; then
	scripts/install-deps.sh --test
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
		/usr/bin/python3 -m pytest -q -rs -p no:cacheprovider tests/integration || status=1
done
if [ "${SKIP_FUZZ:-}" != 1 ]; then
	echo "== fuzzing: the saved corpus, then ${FUZZ_SECONDS:-20}s per target (clang libFuzzer)"
	if [ ! -d build-fuzz ]; then
		CC=clang meson setup build-fuzz -Dfuzz=true -Dsystemd=disabled \
			-Db_sanitize=address,undefined -Db_lundef=false >/dev/null
	fi
	ninja -C build-fuzz
	meson test -C build-fuzz --suite fuzz --print-errorlogs || status=1
	for t in http config; do
		work=$(mktemp -d)
		build-fuzz/tests/fuzz/fuzz-$t -max_total_time="${FUZZ_SECONDS:-20}" \
			-max_len=4096 -artifact_prefix="$work/" "$work" "tests/fuzz/corpus/$t" \
			>"$work.log" 2>&1 || {
			status=1
			tail -30 "$work.log"
			echo "fuzz-$t found a crash: keep it in tests/fuzz/corpus/$t/:"
			ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null || true
		}
		rm -rf "$work" "$work.log"
	done
fi
exit $status
