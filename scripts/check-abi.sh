#!/bin/bash
# libhaecer.so's ABI against the one recorded for its soname (libclient/abi/SONAME.abi, written
# by libabigail's abidw from the library's DWARF, filtered to the installed headers). An
# application built against an earlier libhaecer.so.N must keep working with this one: a
# removed or changed function, or a struct of the public headers that grew or moved a field
# (the caller allocates haecer_energy_result and friends), fails the check until the soname is
# bumped (libclient/module.mk, haecer.map's version node) and a new baseline recorded. Added
# functions pass, and are listed so that the baseline can be refreshed.
#
#   scripts/check-abi.sh BUILD            compare
#   scripts/check-abi.sh BUILD --update   record BUILD's ABI as its soname's baseline
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/check-abi.sh BUILD [--update]}
library="$build/libhaecer.so"
soname=$(readelf -d "$library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
baseline="libclient/abi/$soname.abi"
current="$build/$soname.abi"
abidw --headers-dir libclient/include/haecer --drop-private-types --no-corpus-path \
	--no-comp-dir-path --no-show-locs "$library" \
	>"$current"
if [ "${2:-}" = --update ]; then
	mkdir -p libclient/abi
	cp "$current" "$baseline"
	echo "check-abi: recorded $baseline"
	exit 0
fi
if [ ! -f "$baseline" ]; then
	echo "check-abi: no baseline $baseline for soname $soname: record one with" \
	     "scripts/check-abi.sh $build --update" >&2
	exit 1
fi
report="$build/abi-report.txt"
status=0
abidiff --no-added-syms "$baseline" "$current" >"$report" || status=$?
if [ "$status" -eq 0 ]; then
	# abidiff exits non-zero on added functions too: under pipefail that would end the script.
	added=$({ abidiff "$baseline" "$current" || true; } | sed -n 's/^Functions changes summary: .* \([0-9]*\) Added.*/\1/p')
	echo "check-abi: $soname unchanged${added:+ ($added added functions)}"
	exit 0
fi
cat "$report" >&2
echo "check-abi: libhaecer's ABI changed under soname $soname: an application built against" \
     "the recorded one would break. Bump the soname (libclient/module.mk) or undo the change." >&2
exit 1
