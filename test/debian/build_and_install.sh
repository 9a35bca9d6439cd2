#!/usr/bin/env bash
# build_and_install.sh: build the Debian packages from a copy of this tree
# and install them into a private root, next to a relocated copy of the
# PostgreSQL server, so the package can be tried without touching the
# system's installation (no dpkg -i, no root needed).
#
#   test/debian/build_and_install.sh OUTDIR [PGMAJOR]
#
# OUTDIR gets:
#   src/                        the copy of the tree the packages are built from
#   build.log                   dpkg-buildpackage's output
#   *.deb, *.changes, ...       what dpkg-buildpackage made
#   root/usr/lib/postgresql/N   a copy of the server's binaries and libraries ...
#   root/usr/share/postgresql/N ... and share directory, with any fencing files
#                               of the system's installation removed and the
#                               package's files unpacked (dpkg -x) in their place
# A server started from root/usr/lib/postgresql/N/bin finds its share and
# lib directories relative to its own binary, so it loads the package's
# files and nothing else.  t/060_debian_package.pl uses this.
#
# The build is binary-only and skips the package's own test step
# (DEB_BUILD_OPTIONS=nocheck, profile nocheck); the checks are the caller's.
# Needs dpkg-dev, debhelper and postgresql-server-dev-all (pg_buildext and
# the pgxs_loop debhelper sequence).
set -euo pipefail

out=${1:?usage: $0 OUTDIR [PGMAJOR]}
major=${2:-15}
top=$(cd "$(dirname "$0")/../.." && pwd)
pgbin=/usr/lib/postgresql/$major

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/src" "$out/root"
mkdir -p "$out/src"

# the tree as committed work sees it: no build products, test outputs or
# the examples' downloaded modules
(cd "$top" && tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=tmp_check --exclude=tmp_check_iso --exclude=results \
	--exclude=output_iso --exclude=log --exclude=node_modules \
	--exclude=regression.diffs --exclude=regression.out -cf - .) |
	tar -xf - -C "$out/src"

echo "== dpkg-buildpackage -us -uc -b in $out/src"
# One binary package per PostgreSQL major that pg_buildext finds (debian/
# pgversions, 15+, and the postgresql-server-dev-NN installed):
# PG_UPDATECONTROL regenerates debian/control from control.in for them, as
# PGDG builds do.
if ! (cd "$out/src" && PG_UPDATECONTROL=yes \
	DEB_BUILD_OPTIONS="nocheck${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}" \
		dpkg-buildpackage -us -uc -b -Pnocheck) >"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	echo "dpkg-buildpackage failed: see $out/build.log" >&2
	exit 1
fi
ls "$out"/*.deb
for v in $(cd "$out/src" && pg_buildext supported-versions); do
	d=$(ls "$out"/postgresql-"$v"-fencing_*.deb 2>/dev/null | head -n1)
	[ -n "$d" ] || { echo "no postgresql-$v-fencing package was built" >&2; exit 1; }
	echo "deb_$v=$d"
done

deb=$(ls "$out"/postgresql-"$major"-fencing_*.deb 2>/dev/null | head -n1)
if [ -z "$deb" ]; then
	echo "no postgresql-$major-fencing package was built" >&2
	exit 1
fi

echo "== relocated server in $out/root, package unpacked into it"
mkdir -p "$out/root/usr/lib/postgresql" "$out/root/usr/share/postgresql"
cp -a "$pgbin" "$out/root/usr/lib/postgresql/"
cp -a "/usr/share/postgresql/$major" "$out/root/usr/share/postgresql/"
# whatever a make install put into the system's directories must not
# stand in for a file the package lacks
rm -rf "$out/root/usr/lib/postgresql/$major/lib/fencing.so" \
	"$out/root/usr/lib/postgresql/$major/lib/bitcode/fencing" \
	"$out/root/usr/lib/postgresql/$major/lib/bitcode/fencing.index.bc"
rm -f "$out/root/usr/lib/postgresql/$major/bin/fencing-lock"
rm -f "$out/root/usr/share/postgresql/$major/extension"/fencing.control \
	"$out/root/usr/share/postgresql/$major/extension"/fencing--*.sql
dpkg-deb -x "$deb" "$out/root"
echo "root=$out/root"
echo "deb=$deb"
