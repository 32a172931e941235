#!/bin/bash
# Every test, from a fresh clone: the gcc build, the clang ASan+UBSan build, the threaded tests
# in a clang ThreadSanitizer build, then the valgrind set, then a short run of each fuzz target
# (make fuzz). The three passes run as many tests at once as there are CPUs, but the tests that
# measure time or energy run alone after the others (scripts/run-tests.sh, SERIAL_TESTS).
# Called by `make check` after the packages are installed; .ci/run calls `make check`.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# Each phase says when it began, so that the suite's time budget can be kept by its parts.
phase() { echo "== $* [at ${SECONDS} s]"; }

phase "layering (scripts/check-layering.sh)"
status=0
scripts/check-layering.sh || status=1
phase "gcc build (-Werror)"
make -j"$jobs" all tests benches
phase "libhaecer's ABI against its soname's record (scripts/check-abi.sh, libabigail)"
scripts/check-abi.sh build || status=1
phase "clang ASan+UBSan build (-Werror)"
make -j"$jobs" SANITIZE=1 all tests

phase "tests: gcc build"
scripts/run-tests.sh build --jobs "$jobs" || status=1
phase "tests: the Python package (pytest, Debian's python3, over build/libhaecer.so)"
HAECER_BUILD="$PWD/build" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python || status=1
phase "tests: ASan+UBSan build"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	scripts/run-tests.sh build-asan --jobs "$jobs" || status=1
phase "tests: ThreadSanitizer build (clang, build-tsan/), the threaded code only"
# The code where threads share memory: the rings (threads pushing and consuming), the library
# (contexts and regions used from many threads, the public ring API posting beside reads) and
# haecer-mon following a ring. Only these tests and what they start are built: the build and the
# runs add 7 s on two idle cores (13-25 s measured with the machine shared).
tsan_tests=(shm/test_ring_threads shm/test_ring_stress shm/test_ring_hostile
	    region/test_threads events/test_pfm_threads libclient/test_ring_api mon/test_follow)
tsan_targets=(build-tsan/msrd build-tsan/haecer-mon)
for test in "${tsan_tests[@]}"; do
	[ -f "tests/$test.c" ] || continue
	tsan_targets+=("build-tsan/tests/$test")
	for helper in tests/"${test%%/*}"/helper_*.c; do
		[ -f "$helper" ] && tsan_targets+=("build-tsan/${helper%.c}")
	done
done
if make -j"$jobs" SANITIZE=thread $(printf '%s\n' "${tsan_targets[@]}" | sort -u); then
	for test in "${tsan_tests[@]}"; do
		[ -f "tests/$test.c" ] || continue
		TSAN_OPTIONS=halt_on_error=1 HAECER_TEST_SCALE=small \
			scripts/run-tests.sh build-tsan "$test" || status=1
	done
else
	status=1
fi
phase "tests: valgrind memcheck (gcc build, small scale)"
scripts/run-tests.sh build --valgrind --jobs "$jobs" || status=1
phase "libFuzzer smoke run (clang, build-fuzz/, 10 s per target, one target per CPU)"
make -j"$jobs" fuzz FUZZ_SECONDS=10 || status=1
phase "done"
exit $status
