#!/bin/bash
# Run every test program under BUILD_DIR/tests. A test is a standalone program: exit 0 passes,
# 77 skips, anything else fails. Each runs with a timeout so a hang is a failure, not a stall.
#
#   scripts/run-tests.sh BUILD_DIR [--valgrind] [PATTERN]
#
# --valgrind runs each test (and the msrd it starts, see tests/lib) under valgrind memcheck with
# HAECER_TEST_SCALE=small. PATTERN limits the run to tests whose path contains it.
set -u

build=${1:?usage: run-tests.sh BUILD_DIR [--valgrind] [PATTERN]}
shift
valgrind=0
pattern=""
for argument in "$@"; do
	case "$argument" in
	--valgrind) valgrind=1 ;;
	*) pattern=$argument ;;
	esac
done

build=$(cd "$build" && pwd)
export HAECER_BUILD="$build"
export HAECER_SOURCE="$(cd "$(dirname "$0")/.." && pwd)"
timeout_seconds=${HAECER_TEST_TIMEOUT:-300}
runner=()
if [ "$valgrind" = 1 ]; then
	export HAECER_TEST_SCALE=small
	export HAECER_VALGRIND=1
	timeout_seconds=${HAECER_TEST_TIMEOUT:-600}
	runner=(valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
		--trace-children=no --suppressions="$HAECER_SOURCE/tests/valgrind.supp")
fi

logdir="$build/test-logs"
mkdir -p "$logdir"
passed=0 failed=0 skipped=0 inner_skips=0
failures=()
start_all=$(date +%s)

mapfile -t programs < <(find "$build/tests" -type f -name 'test_*' -perm -u+x | sort)
for program in "${programs[@]}"; do
	name=${program#"$build/tests/"}
	[ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
	if [ "$valgrind" = 1 ] && [ -f "$HAECER_SOURCE/tests/$name.novalgrind" ]; then
		continue
	fi
	log="$logdir/${name//\//_}.log"
	start=$(date +%s%N)
	timeout --kill-after=10 "$timeout_seconds" "${runner[@]}" "$program" >"$log" 2>&1
	status=$?
	tenths=$(( ($(date +%s%N) - start) / 100000000 ))
	seconds="$((tenths / 10)).$((tenths % 10))"
	case $status in
	0) passed=$((passed + 1))
	   # cmocka exits 0 when some of a program's tests skipped themselves: say which.
	   inner=$(sed -n 's/^\[  SKIPPED \] \([A-Za-z_][A-Za-z0-9_]*\)$/\1/p' "$log" | sort -u | tr '\n' ' ')
	   printf 'PASS  %-50s %6ss%s\n' "$name" "$seconds" "${inner:+  (skipped inside: ${inner% })}"
	   [ -z "$inner" ] || inner_skips=$((inner_skips + 1)) ;;
	77) skipped=$((skipped + 1)); printf 'SKIP  %-50s %6ss  (%s)\n' "$name" "$seconds" "$(tail -n 1 "$log")" ;;
	*) failed=$((failed + 1)); failures+=("$name")
	   printf 'FAIL  %-50s %6ss  exit %d, log %s\n' "$name" "$seconds" "$status" "$log"
	   tail -n 30 "$log" | sed 's/^/      | /' ;;
	esac
done

echo "---- $build: $passed passed ($inner_skips with tests skipped inside), $failed failed," \
	"$skipped skipped in $(( $(date +%s) - start_all ))s"
[ "$failed" -eq 0 ] || { printf 'failed: %s\n' "${failures[@]}"; exit 1; }
