#!/bin/bash
# Run every libFuzzer target of BUILD_DIR/fuzz for SECONDS each (or only the NAMES given, comma
# or space separated: wire, ring, policy, import, batch).
#
#   fuzz/run.sh BUILD_DIR SECONDS [NAMES]
#
# Each target starts from the committed seeds in fuzz/corpus/NAME and adds what it finds to
# BUILD_DIR/corpus/NAME; a crash, leak, timeout or sanitizer report stops it, saves the input in
# BUILD_DIR/artifacts/ and makes this script exit 1. One summary line per target: executions,
# coverage, corpus size.
set -u
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/run.sh BUILD_DIR SECONDS [NAMES]}
seconds=${2:?usage: fuzz/run.sh BUILD_DIR SECONDS [NAMES]}
names=${3:-}
names=${names//,/ }
[ -n "$names" ] || names=$(ls fuzz/fuzz_*.c | sed 's|fuzz/fuzz_||; s|\.c$||' | tr '\n' ' ')

# Inputs larger than the default 4 KiB: whole policies, full batches, ring images with slots.
# Policies up to 16 KiB, four times the largest shipped one: parsing cost grows with the input,
# and a longer YAML text reaches no code a shorter one does not (the size limit has its test).
max_len() {
	case $1 in
	batch) echo 32768 ;;
	policy) echo 4096 ;; # 600 s: 11.0 M runs at 4 KiB (9.0 M before the account table), 4.9 M at 16 KiB
	import) echo 65536 ;;
	ring) echo 8192 ;;
	*) echo 33000 ;;
	esac
}

# One target per CPU at a time: each target is single-threaded, so on two cores five targets of
# 15 s take 45 s instead of 75 s, with the same time per target.
run_target() {
	local name=$1 binary="$build/fuzz/fuzz_$1" corpus="$build/corpus/$1" log="$build/fuzz-$1.log"
	[ -x "$binary" ] || { echo "fuzz: no $binary"; return 1; }
	mkdir -p "$corpus" "fuzz/corpus/$name"
	local dict=()
	[ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
	HAECER_SOURCE=$PWD ASAN_OPTIONS=detect_leaks=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$binary" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
		-max_len="$(max_len "$name")" -print_final_stats=1 "${dict[@]}" \
		-artifact_prefix="$build/artifacts/$name-" "$corpus" "fuzz/corpus/$name" \
		>"$log" 2>&1
	local result=$?
	local runs coverage units
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
	units=$(ls "$corpus" | wc -l)
	if [ "$result" -eq 0 ]; then
		printf 'fuzz %-8s %12s runs in %ss, %s, corpus %s\n' "$name" "${runs:-?}" \
			"$seconds" "${coverage:-cov: ?}" "$units"
		return 0
	fi
	printf 'fuzz %-8s FAILED (exit %d), log %s\n' "$name" "$result" "$log"
	grep -E 'ERROR|SUMMARY|Assertion|runtime error|artifact' "$log" | head -n 20 |
		sed 's/^/      | /'
	return 1
}

status=0
mkdir -p "$build/artifacts"
parallel=${FUZZ_JOBS:-$(nproc)}
names_started=()
for name in $names; do
	while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do
		wait -n
	done
	{ run_target "$name"; echo "exit $?"; } >"$build/fuzz-$name.summary" &
	names_started+=("$name")
done
wait
for name in "${names_started[@]}"; do
	grep -v '^exit ' "$build/fuzz-$name.summary"
	grep -qx 'exit 0' "$build/fuzz-$name.summary" || status=1
done
exit $status
