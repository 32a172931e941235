#!/bin/sh
# The demo (`make demo`, after the dependencies are installed): build; start msrd in a private
# temporary directory with its own socket and the shipped policy (configs/policies/default.yaml),
# on the simulated CPU (--backend sim; HAECER_DEMO_BACKEND=auto uses the real MSR device, and
# fails saying why when none is usable);
# run examples/energy_phases (1 s busy / 1 s idle) and watch its package-energy ring live with
# `haecer-mon follow`, drawn as a bar per half second; summarise joules and watts per phase and
# what the monitor saw; show haecer-stat on a short command; stop msrd with SIGTERM. Exits 0
# when everything worked and msrd stopped cleanly.
#
# Environment: BUILD (build directory, default build), HAECER_DEMO_CYCLES (busy/idle pairs,
# default 4), HAECER_DEMO_BACKEND (msrd's --backend, default sim), HAECER_DEMO_NO_BUILD=1
# (use BUILD as it is; for tests), TMPDIR.
set -eu
cd "$(dirname "$0")/.."

build=${BUILD:-build}
cycles=${HAECER_DEMO_CYCLES:-4}
major=10
tmp=$(mktemp -d "${TMPDIR:-/tmp}/haecer-demo.XXXXXX")
msrd_pid=""
phases_pid=""

say() { printf '%s\n' "$*"; }
fail() { printf 'demo: %s\n' "$*" >&2; exit 1; }

cleanup() {
	status=$?
	[ -n "$phases_pid" ] && kill "$phases_pid" 2>/dev/null
	if [ -n "$msrd_pid" ]; then
		kill -TERM "$msrd_pid" 2>/dev/null && wait "$msrd_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

case $cycles in
'' | *[!0-9]* | 0) fail "HAECER_DEMO_CYCLES must be a positive number, not '$cycles'" ;;
esac

build_everything() {
	if [ "${HAECER_DEMO_NO_BUILD:-0}" = 1 ]; then
		say "build: using $build as it is"
		return
	fi
	printf 'build: make -j%s BUILD=%s ... ' "$(nproc)" "$build"
	if ! make -j"$(nproc)" BUILD="$build" all >"$tmp/build.log" 2>&1; then
		say "failed:"
		tail -n 20 "$tmp/build.log"
		exit 1
	fi
	say "done"
}

# Wait up to 20 s for a condition (a shell command).
wait_for() {
	tries=0
	until eval "$1"; do
		tries=$((tries + 1))
		[ "$tries" -le 200 ] || return 1
		sleep 0.1
	done
}

start_msrd() {
	install -m 0644 configs/policies/default.yaml "$tmp/policy.yaml"
	"$build/msrd" --backend "${HAECER_DEMO_BACKEND:-sim}" --socket "$tmp/msrd.sock" --policy "$tmp/policy.yaml" \
		--models-dir configs/models --foreground --log-level notice 2>"$tmp/msrd.log" &
	msrd_pid=$!
	if ! wait_for '[ -S "$tmp/msrd.sock" ] || ! kill -0 "$msrd_pid" 2>/dev/null' ||
	   ! kill -0 "$msrd_pid" 2>/dev/null; then
		cat "$tmp/msrd.log" >&2
		msrd_pid=""
		fail "msrd did not start"
	fi
	backend=$(sed -n 's/.*msrd\[notice\]: backend //p' "$tmp/msrd.log" | head -n 1)
	say "msrd: pid $msrd_pid, policy configs/policies/default.yaml, socket $tmp/msrd.sock"
	say "      backend ${backend:-(see its log)}"
	simulated=""
	case "$backend" in
	sim*) simulated=", simulated CPU: invented values"
	      say "      (the simulated CPU: every value below is invented, not measured)" ;;
	esac
	export HAECER_SOCKET="$tmp/msrd.sock"
}

# haecer-mon follow's CSV (type,seconds,timestamp,counter_id,counter,value,joules,watts,lost)
# as one bar per half second: the energy of the window over its time (records close together
# see RAPL's 1 ms steps, so their own watts are noisy), one '#' per watt. mawk (Debian's awk)
# reads its input in blocks unless told it is interactive: the bars would come all at the end.
draw_power() {
	live=""
	if awk -W version 2>/dev/null | grep -q mawk; then
		live="-W interactive"
	fi
	# shellcheck disable=SC2086
	awk $live -F, -v width=60 '
		function bar(at, seconds, joules) {
			w = (joules - window_joules) / (seconds - window_start)
			length_ = int(w + 0.5); if (length_ > width) length_ = width
			line = ""; for (i = 0; i < length_; i++) line = line "#"
			printf "  %5.1f s %7.2f W  %s\n", at, w, line
			fflush(); window_start = seconds; window_joules = joules
		}
		$1 == "lost" { printf "    lost %s records\n", $9; next }
		$1 != "record" || $7 == "" { next }
		{
			if (start == "") { start = window_start = $2; window_joules = $7 }
			last_seconds = $2; last_joules = $7
			if ($2 - start >= next_mark + 0.5) {
				next_mark += 0.5
				bar(next_mark, $2, $7)
			}
		}
		END {
			if (last_seconds - window_start > 0.05)
				bar(last_seconds - start, last_seconds, last_joules)
		}'
}

ring_listed() {
	"$build/haecer-mon" list 2>/dev/null |
		awk -v major="$major" '$1 == major && $2 == 0 { found = 1 } END { exit !found }'
}

run_phases() {
	say ""
	say "example: $build/examples/energy_phases $cycles $major ($cycles x 1 s busy + 1 s idle;" \
	    "every domain sampled each 100 ms into ring ($major, domain))"
	"$build/examples/energy_phases" "$cycles" "$major" >"$tmp/phases.log" 2>&1 &
	phases_pid=$!
	# msrd lists the ring as soon as energy_phases created it (its own output is buffered).
	wait_for 'ring_listed || ! kill -0 "$phases_pid" 2>/dev/null' || true
	if ! ring_listed; then
		cat "$tmp/phases.log" >&2
		fail "energy_phases did not publish its package-energy ring"
	fi
	say "monitor: haecer-mon follow $major 0 (package energy, live; mean power per 0.5 s$simulated):"
	"$build/haecer-mon" follow --format csv "$major" 0 2>"$tmp/follow.log" | draw_power
	phases_status=0
	wait "$phases_pid" || phases_status=$?
	phases_pid=""
	[ "$phases_status" -eq 0 ] || { cat "$tmp/phases.log" >&2; fail "energy_phases failed"; }
}

summarise() {
	say ""
	say "per phase (energy_phases, package domain$simulated):"
	awk '$2 == "busy" || $2 == "idle" { printf "  cycle %s  %s  %s J  %s W\n", $1, $2, $3, $5 }
	     /^mean/ { mean = $0 }
	     END { if (mean != "") print "  " mean }' "$tmp/phases.log"
	say "  monitor: $(sed 's/^haecer-mon: //' "$tmp/follow.log")"
}

show_stat() {
	say ""
	say "haecer-stat -r 3 on a short shell loop:"
	"$build/haecer-stat" -r 3 -- sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done' 2>&1 |
		sed '/^$/d'
}

stop_msrd() {
	msrd_status=0
	kill -TERM "$msrd_pid"
	wait "$msrd_pid" || msrd_status=$?
	msrd_pid=""
	if [ "$msrd_status" -ne 0 ]; then
		cat "$tmp/msrd.log" >&2
		fail "msrd exited with status $msrd_status"
	fi
	say ""
	say "msrd stopped (SIGTERM, exit 0)."
}

say "haecer demo: the energy of a program's busy and idle phases, measured through msrd"
build_everything
start_msrd
run_phases
summarise
show_stat
stop_msrd
