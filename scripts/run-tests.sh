#!/bin/bash
# Run every test program under BUILD_DIR/tests. A test is a standalone program: exit 0 passes,
# 77 skips, anything else fails. Each runs with a timeout so a hang is a failure, not a stall.
#
#   scripts/run-tests.sh BUILD_DIR [--valgrind] [--jobs N] [PATTERN]
#
# --valgrind runs each test (and the msrd it starts, see tests/lib) under valgrind memcheck with
# HAECER_TEST_SCALE=small. PATTERN limits the run to tests whose path contains it.
#
# --jobs N runs up to N tests at once, except the tests that measure time, CPU time or energy
# on the simulated CPU in real time (SERIAL_TESTS below): those run one at a time after the
# others, alone on the machine, as every test did before. Under valgrind a test spends most of
# its time in memcheck's start-up and its own instrumented code (each tool and msrd it starts is
# instrumented too): 2 jobs on 2 cores took the valgrind pass from 580 s toward half of its
# parallel part.
set -u

build=${1:?usage: run-tests.sh BUILD_DIR [--valgrind] [--jobs N] [PATTERN]}
shift
valgrind=0
jobs=1
pattern=""
while [ $# -gt 0 ]; do
	case "$1" in
	--valgrind) valgrind=1 ;;
	--jobs) jobs=${2:?--jobs needs a count}; shift ;;
	*) pattern=$1 ;;
	esac
	shift
done

# Tests whose assertions relate real time, CPU time, the host's load or the energy of the
# simulated CPU (msrd's windows, the profiler's sampling, the regions' attribution, the follow
# of clients' load, the demo's busy and idle power, schedules and client timeouts): a second
# test beside them changes what they measure.
SERIAL_TESTS='^(prof/|region/|demo/)|attribution/test_real|mon/test_top_by|energy|sim_follow|sim_clock|sim_e2e|schedule|slow_client|perf_broker'
# Of those, the ones whose simulated CPU runs only in virtual time (--sim-virtual-time or a virtual
# backend: its time moves with register accesses and SIM_ADVANCE, not the host's clock), so what
# they assert does not depend on a test beside them: they run with the others.
VIRTUAL_TIME_TESTS='^(region/test_known_work|backend/test_sim_energy_wrap'
VIRTUAL_TIME_TESTS+='|libclient/test_energy_(region|wrap|accuracy)'
VIRTUAL_TIME_TESTS+='|server/test_(energy_above_max_power|stale_energy_reads|energy_totals)'
VIRTUAL_TIME_TESTS+='|server/test_(coarse_energy|sim_clock))$'

build=$(cd "$build" && pwd)
export HAECER_BUILD="$build"
export HAECER_SOURCE="$(cd "$(dirname "$0")/.." && pwd)"
timeout_seconds=${HAECER_TEST_TIMEOUT:-300}
runner=()
if [ "$valgrind" = 1 ]; then
	export HAECER_TEST_SCALE=small
	export HAECER_VALGRIND=1
	timeout_seconds=${HAECER_TEST_TIMEOUT:-600}
	# Valgrind's stacks leave out inlined frames (--read-inline-info=no, through VALGRIND_OPTS so
	# that the msrd and tools the tests start under valgrind take it too): each program starts
	# about a fifth faster (mon/test_errors, 31 programs: 14.8 -> 12.9 s). A finding's file and
	# line stay exact (the line table has the inlined code); only an inlined function's frame is
	# folded into its caller's. Set VALGRIND_OPTS (even empty) to choose otherwise.
	export VALGRIND_OPTS="${VALGRIND_OPTS---read-inline-info=no}"
	runner=(valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
		--trace-children=no --suppressions="$HAECER_SOURCE/tests/valgrind.supp")
fi

logdir="$build/test-logs"
mkdir -p "$logdir"
passed=0 failed=0 skipped=0 inner_skips=0
failures=()
start_all=$(date +%s)

log_of() {
	local name=$1
	echo "$logdir/${name//\//_}.log"
}

# Run one test; its exit status and time go to its log's .result file.
run_one() {
	local program=$1 log=$2 start status tenths
	start=$(date +%s%N)
	timeout --kill-after=10 "$timeout_seconds" "${runner[@]}" "$program" >"$log" 2>&1
	status=$?
	tenths=$(( ($(date +%s%N) - start) / 100000000 ))
	echo "$status $((tenths / 10)).$((tenths % 10))" >"$log.result"
}

# Say how a test ended and count it.
report() {
	local name=$1 log status seconds inner
	log=$(log_of "$name")
	read -r status seconds <"$log.result"
	rm -f "$log.result"
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
}

mapfile -t programs < <(find "$build/tests" -type f -name 'test_*' -perm -u+x | sort)
parallel=() serial=()
for program in "${programs[@]}"; do
	name=${program#"$build/tests/"}
	[ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
	if [ "$valgrind" = 1 ] && [ -f "$HAECER_SOURCE/tests/$name.novalgrind" ]; then
		continue
	fi
	if [ "$jobs" -gt 1 ] && { ! [[ "$name" =~ $SERIAL_TESTS ]] || [[ "$name" =~ $VIRTUAL_TIME_TESTS ]]; }; then
		parallel+=("$name")
	else
		serial+=("$name")
	fi
done

declare -A running=()
for name in "${parallel[@]}"; do
	while [ "${#running[@]}" -ge "$jobs" ]; do
		wait -n -p done_pid
		report "${running[$done_pid]}"
		unset "running[$done_pid]"
	done
	run_one "$build/tests/$name" "$(log_of "$name")" &
	running[$!]=$name
done
while [ "${#running[@]}" -gt 0 ]; do
	wait -n -p done_pid
	report "${running[$done_pid]}"
	unset "running[$done_pid]"
done
for name in "${serial[@]}"; do
	run_one "$build/tests/$name" "$(log_of "$name")"
	report "$name"
done

echo "---- $build: $passed passed ($inner_skips with tests skipped inside), $failed failed," \
	"$skipped skipped in $(( $(date +%s) - start_all ))s"
[ "$failed" -eq 0 ] || { printf 'failed: %s\n' "${failures[@]}"; exit 1; }
