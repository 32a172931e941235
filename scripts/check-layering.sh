#!/bin/bash
# Which directory may include which: the layering HACKING.md states, checked on every #include
# "dir/..." of the tree (the quoted form is how this project names its own headers; <...> is
# the system's). A lower layer never includes a higher one, product code never includes tests/,
# harness/ or bench/, and benchmarks never include tests/. `haecer/` is libhaecer's installed
# API (libclient/include/haecer/), open to every program built on the library.
#
#   scripts/check-layering.sh        prints each violation as file:line: include, exits 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A allowed=(
	[common]="common"
	[hw]="hw"
	[shm]="shm common"
	[proto]="proto common"
	[policy]="policy common hw"
	[attribution]="attribution haecer common hw"
	[slurm]="slurm attribution haecer common hw"
	[backend]="backend common hw"
	[server]="server backend policy proto shm common hw"
	[libclient]="libclient haecer proto shm common hw"
	[tools]="tools attribution haecer shm proto common hw"
	[prof]="prof tools haecer shm proto common hw"
	[examples]="haecer shm common"
	[fuzz]="fuzz server backend policy proto shm libclient common hw"
	[harness]="harness libclient haecer proto shm common hw"
	[bench]="bench harness prof attribution haecer proto shm common hw"
	[tests]="tests harness server backend policy proto shm libclient haecer tools prof attribution common hw"
)

violations=0
while IFS= read -r -d '' file; do
	top=${file%%/*}
	[ -n "${allowed[$top]+set}" ] || continue
	while IFS=: read -r line include; do
		target=${include#*\"}
		target=${target%%/*}
		# The harness sees inside libhaecer in one file only: the simulator's control, which
		# speaks on the library's connection and is not its API (harness/sim_control.h).
		if [ "$top/$target" = harness/libclient ] && [ "$file" != harness/sim_control.c ]; then
			target="libclient (only harness/sim_control.c may)"
		fi
		# What a description of the machine holds is listed once, in a leaf header of the
		# installed API that includes nothing of ours: every layer spells its struct from it.
		[ "${include#*\"}" = 'haecer/machine_fields.h"' ] && continue
		case " ${allowed[$top]} " in
		*" $target "*) ;;
		*)
			echo "$file:$line: $top/ may not include $target/ ($include)"
			violations=$((violations + 1))
			;;
		esac
	done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[A-Za-z0-9_.-]+/' "$file" |
		 sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]+/\1:/')
done < <(git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h')

if [ "$violations" -gt 0 ]; then
	echo "check-layering: $violations include(s) break the layering (HACKING.md, Layering)" >&2
	exit 1
fi
echo "check-layering: every #include follows the layering"
