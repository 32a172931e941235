#!/bin/bash
# make bench-report: run every benchmark (scripts/run-benches.sh, not the soak), then write
# docs/PERFORMANCE.md from their last lines and copy its headline rows into the README.
#
#   scripts/bench-report.sh [BUILD [NAME...]]
#
# With NAMEs (make bench-report BENCHES="msrd fidelity") only those run; the others keep the
# previous report's figures, each section saying when its figures were measured.
# Benchmarks compare against baselines measured in the same run, but a loaded host still
# scatters them: this warns when the load average is high, and the report records it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
names=("$@")
carry=()
[ ${#names[@]} -eq 0 ] || carry=(--carry)
cpus=$(nproc)
load=$(cut -d' ' -f1 /proc/loadavg)
if awk -v load="$load" -v cpus="$cpus" 'BEGIN { exit !(load > 0.25 * cpus) }'; then
	echo "bench-report: warning: load average $load on $cpus CPUs; figures from a busy host" \
	     "scatter (the report records the load)" >&2
fi
mkdir -p "$build/bench-report"
log="$build/bench-report/run.log"
status=0
scripts/run-benches.sh "$build" "${names[@]}" 2>&1 | tee "$log" || status=$?
sed -n '/^== summary/,$p' "$log" | tail -n +2 > "$build/bench-report/summary.txt"
scripts/bench-report.py "$build/bench-report/summary.txt" --readme README.md --load "$load" \
	"${carry[@]}"
exit $status
