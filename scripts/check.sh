#!/bin/bash
# Every test, from a fresh clone: the gcc build, the clang ASan+UBSan build, then the valgrind set,
# then a short run of each fuzz target (make fuzz).
# Called by `make check` after the packages are installed; .ci/run calls `make check`.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

echo "== gcc build (-Werror)"
make -j"$jobs" all tests benches
echo "== clang ASan+UBSan build (-Werror)"
make -j"$jobs" SANITIZE=1 all tests

status=0
echo "== tests: gcc build"
scripts/run-tests.sh build || status=1
echo "== tests: ASan+UBSan build"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	scripts/run-tests.sh build-asan || status=1
echo "== tests: valgrind memcheck (gcc build, small scale)"
scripts/run-tests.sh build --valgrind || status=1
echo "== libFuzzer smoke run (clang, build-fuzz/, 15 s per target)"
make -j"$jobs" fuzz FUZZ_SECONDS=15 || status=1
exit $status
