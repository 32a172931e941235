#!/bin/sh
# Install the Debian packages haecer needs, only those missing. Idempotent: when everything is
# present it touches nothing and needs no network. The only list of packages in the project.
set -eu

PACKAGES="
build-essential
clang
libclang-rt-14-dev
pkg-config
valgrind
liburing-dev
libcyaml-dev
libcmocka-dev
libck-dev
libpfm4-dev
libseccomp-dev
libcap-dev
libdw-dev
gnuplot-nox
prometheus
curl
strace
chromium
python3
python3-pytest
python3-pandas
python3-matplotlib
libslurm-dev
slurmctld
slurmd
munge
abigail-tools
libmicrohttpd-dev
"

missing=""
for package in $PACKAGES; do
	if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $package"
	fi
done

[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
else
	SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
# The prometheus package starts a system service on install; tests run their own on loopback.
if command -v systemctl >/dev/null 2>&1; then
	$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
	# Likewise Slurm's and munge's: tests/slurm starts its own cluster in a temp dir.
	$SUDO systemctl disable --now slurmctld slurmd munge >/dev/null 2>&1 || true
fi
