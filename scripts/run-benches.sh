#!/bin/bash
# Run every benchmark under BUILD/bench/ one after the other (never in parallel: each measures
# against a baseline taken in the same run, and a neighbour would skew both), print each one's
# output, then a summary of their machine-readable last lines.
#
#   scripts/run-benches.sh BUILD [NAME...]    e.g. scripts/run-benches.sh build ring msrd
#
# The soak benchmark (bench/soak) runs for minutes and is left out unless named; `make soak`
# runs it alone. Benchmarks are not tests: nothing here fails because the machine is slow, only
# because a benchmark could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/run-benches.sh BUILD [NAME...]}
shift
export HAECER_BUILD=$PWD/$build HAECER_SOURCE=$PWD

if [ $# -gt 0 ]; then
	names=("$@")
else
	names=()
	for path in "$build"/bench/*; do
		name=${path##*/}
		[ -x "$path" ] && [ -f "$path" ] && [ "$name" != soak ] && [[ $name != *.o ]] && names+=("$name")
	done
	# Python benchmarks (bench/NAME.py), run with Debian's python3 over $build's library.
	for path in bench/*.py; do
		[ -f "$path" ] || continue
		name=${path##*/}
		names+=("${name%.py}")
	done
fi

status=0
summary=()
for name in "${names[@]}"; do
	echo "== bench/$name"
	if [ -f "bench/$name.py" ]; then
		output=$(/usr/bin/python3 "bench/$name.py" 2>&1 | tee /dev/stderr)
	else
		output=$("$build/bench/$name" 2>&1 | tee /dev/stderr)
	fi
	code=$?
	if [ $code -ne 0 ]; then
		echo "bench/$name: exit $code" >&2
		status=1
		continue
	fi
	summary+=("$name: $(printf '%s\n' "$output" | tail -n 1)")
done
echo "== summary (machine-readable last lines)"
printf '%s\n' "${summary[@]}"
exit $status
