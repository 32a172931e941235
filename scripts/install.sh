#!/bin/sh
# Install haecer from a build directory. `make install PREFIX=/usr/local DESTDIR=/staging` runs
#
#   scripts/install.sh BUILD_DIR DEST_PREFIX          (DEST_PREFIX = $DESTDIR$PREFIX)
#
# make passes DESTDIR and PREFIX joined; it also exports them when they were given on its
# command line, which tells the run-time prefix (written into haecer.pc and the systemd units)
# from the staging directory. Idempotent: running it again installs the same files again, and
# an existing policy (etc/haecer/policy.yaml) is never overwritten.
#
# Layout under PREFIX: sbin/msrd, bin/haecer-*, lib/libhaecer.{a,so*}, lib/pkgconfig/haecer.pc,
# include/haecer/*.h, share/man/man{1,3,8}, share/haecer/{models,policies},
# lib/systemd/system/{msrd,haecer-mon}.service, lib/sysusers.d/haecer.conf,
# lib/modules-load.d/haecer-msr.conf, lib/python3/dist-packages/haecer/; the policy in
# /etc/haecer when PREFIX is /usr, else in PREFIX/etc/haecer. LIBDIR, SYSCONFDIR, SYSTEMDUNITDIR,
# PYTHONDIR and HAECER_VERSION override.
set -eu

build=${1:?usage: install.sh BUILD_DIR DEST_PREFIX}
dest=${2:?usage: install.sh BUILD_DIR DEST_PREFIX}
source=$(cd "$(dirname "$0")/.." && pwd)
# The version is the top Makefile's VERSION (make install passes it); asked from make otherwise.
version=${HAECER_VERSION:-$(make -s -C "$source" --no-print-directory print-version 2>/dev/null || echo unknown)}

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: %s\n' "$*" >&2; exit 1; }

[ -d "$build" ] || die "no build directory $build (run make first)"
[ -x "$build/msrd" ] || die "$build/msrd is missing (run make first)"
[ -f "$build/libhaecer.a" ] || die "$build/libhaecer.a is missing (run make first)"

# The run-time prefix: DEST_PREFIX without the staging directory.
destdir=${DESTDIR:-}
destdir=${destdir%/}
case $dest in
"$destdir"/*) prefix=${dest#"$destdir"} ;;
*) prefix=$dest; destdir="" ;;
esac
prefix=${prefix%/}
case $prefix in
/*) ;;
*) die "PREFIX must be an absolute path, not '$prefix'" ;;
esac

bindir=$prefix/bin
sbindir=$prefix/sbin
libdir=${LIBDIR:-$prefix/lib}
includedir=$prefix/include
mandir=$prefix/share/man
datadir=$prefix/share/haecer
if [ "$prefix" = /usr ]; then
	sysconfdir=${SYSCONFDIR:-/etc}
else
	sysconfdir=${SYSCONFDIR:-$prefix/etc}
fi
unitdir=${SYSTEMDUNITDIR:-$prefix/lib/systemd/system}
sysusersdir=$prefix/lib/sysusers.d
modulesloaddir=$prefix/lib/modules-load.d

# install FILE into the staged directory DIR with MODE
put() {
	install -D -m "$3" "$1" "$destdir$2/$(basename "$1")"
}

# A template with @PLACEHOLDERS@ filled in, installed as DIR/NAME.
fill() {
	mkdir -p "$destdir$2"
	sed -e "s|@PREFIX@|$prefix|g; s|@prefix@|$prefix|g; s|@exec_prefix@|$prefix|g" \
	    -e "s|@BINDIR@|$bindir|g; s|@SBINDIR@|$sbindir|g; s|@SYSCONFDIR@|$sysconfdir|g" \
	    -e "s|@LIBDIR@|$libdir|g; s|@libdir@|$libdir|g" \
	    -e "s|@INCLUDEDIR@|$includedir|g; s|@includedir@|$includedir|g" \
	    -e "s|@VERSION@|$version|g; s|@version@|$version|g" "$1" >"$destdir$2/$3.tmp"
	chmod 0644 "$destdir$2/$3.tmp"
	mv -f "$destdir$2/$3.tmp" "$destdir$2/$3"
	if grep -q '@[A-Za-z_]*@' "$destdir$2/$3"; then
		die "$1 has a placeholder this script does not know"
	fi
}

install_programs() {
	put "$build/msrd" "$sbindir" 0755
	for tool in "$build"/haecer-*; do
		[ -f "$tool" ] && [ -x "$tool" ] || continue
		put "$tool" "$bindir" 0755
	done
}

# The shared library under its soname, with the development symlink.
install_libraries() {
	put "$build/libhaecer.a" "$libdir" 0644
	[ -f "$build/libhaecer.so" ] || return 0
	soname=$(readelf -d "$build/libhaecer.so" 2>/dev/null |
		sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
	soname=${soname:-libhaecer.so.1}
	install -D -m 0755 "$build/libhaecer.so" "$destdir$libdir/$soname.0.0"
	ln -sfn "$soname.0.0" "$destdir$libdir/$soname"
	ln -sfn "$soname" "$destdir$libdir/libhaecer.so"
	# haecer-prof's -finstrument-functions runtime, for LD_PRELOAD
	[ -f "$build/libhaecer-instrument.so" ] &&
		put "$build/libhaecer-instrument.so" "$libdir" 0755
	# haecer-prof's timer sampler, preloaded by record (found in ../lib from haecer-prof)
	[ -f "$build/libhaecer-prof-agent.so" ] &&
		put "$build/libhaecer-prof-agent.so" "$libdir" 0755
	return 0
}

install_development() {
	for header in "$source"/libclient/include/haecer/*.h; do
		put "$header" "$includedir/haecer" 0644
	done
	if [ -f "$source/libclient/haecer.pc.in" ]; then
		fill "$source/libclient/haecer.pc.in" "$libdir/pkgconfig" haecer.pc
		return
	fi
	mkdir -p "$destdir$libdir/pkgconfig"
	# Relative to ${prefix} where they are, so pkg-config's sysroot and relocation work.
	cat >"$destdir$libdir/pkgconfig/haecer.pc" <<EOF
prefix=$prefix
libdir=$(printf '%s' "$libdir" | sed "s|^$prefix/|\\\${prefix}/|")
includedir=\${prefix}/include

Name: haecer
Description: energy and hardware-counter measurement without privileges, through msrd
Version: $version
Libs: -L\${libdir} -lhaecer
Libs.private: -lpfm -lm -pthread
Cflags: -I\${includedir}
EOF
}

# The Python package (pure Python over libhaecer.so) in Debian's layout, told where the library
# it wraps was installed.
install_python() {
	pythondir=${PYTHONDIR:-$prefix/lib/python3/dist-packages}
	[ -f "$build/libhaecer.so" ] || return 0
	for module in "$source"/python/haecer/*.py; do
		put "$module" "$pythondir/haecer" 0644
	done
	printf '"""Written by make install: where libhaecer was installed."""\nLIBRARY = "%s"\n' \
		"$libdir/$soname" >"$destdir$pythondir/haecer/_installed.py"
	chmod 0644 "$destdir$pythondir/haecer/_installed.py"
}

install_manuals() {
	for page in "$source"/man/*.[138]; do
		[ -f "$page" ] || continue
		section=${page##*.}
		put "$page" "$mandir/man$section" 0644
	done
}

install_configuration() {
	for model in "$source"/configs/models/*.yaml; do
		put "$model" "$datadir/models" 0644
	done
	for policy in "$source"/configs/policies/*.yaml; do
		put "$policy" "$datadir/policies" 0644
	done
	if [ -e "$destdir$sysconfdir/haecer/policy.yaml" ]; then
		say "keeping the existing $sysconfdir/haecer/policy.yaml"
	else
		install -D -m 0644 "$source/configs/policies/default.yaml" \
			"$destdir$sysconfdir/haecer/policy.yaml"
	fi
}

install_system_files() {
	fill "$source/dist/msrd.service.in" "$unitdir" msrd.service
	fill "$source/dist/haecer-mon.service.in" "$unitdir" haecer-mon.service
	install -D -m 0644 "$source/dist/haecer.sysusers" "$destdir$sysusersdir/haecer.conf"
	install -D -m 0644 "$source/dist/haecer-msr.modules-load" \
		"$destdir$modulesloaddir/haecer-msr.conf"
}

# Only for a live install as root: the group the unit runs msrd under, the linker cache.
finish_live_install() {
	[ -z "$destdir" ] && [ "$(id -u)" -eq 0 ] || return 0
	if ! getent group haecer >/dev/null 2>&1 && command -v groupadd >/dev/null 2>&1; then
		groupadd --system haecer && say "created system group haecer"
	fi
	if command -v ldconfig >/dev/null 2>&1; then
		ldconfig
	fi
}

install_programs
install_libraries
install_development
install_python
install_manuals
install_configuration
install_system_files
finish_live_install
say "installed haecer $version into ${destdir:+$destdir (staging) for }$prefix"
