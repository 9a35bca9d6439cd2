#!/usr/bin/env bash
# citus.sh: Citus, the distributed PostgreSQL engine, for the Citus tests
# (t/071_citus.pl) and bench/citus.sh.  Sourced after deps.sh.
#
# fencing_citus_build builds Citus from the release archive in
# ../shared/citus-sources (beside the clone) against the server headers and
# caches the installed files under /var/cache/fencing-citus/VERSION-pgMAJOR,
# rebuilding when the cache is missing or incomplete.
# fencing_citus_install copies the cached files into the installation that
# FENCING_PG_BINDIR points to (the private copy of test/run.sh); it
# refuses to write into the system's /usr/lib/postgresql.

fencing_citus_version() {
	case $FENCING_PG_MAJOR in
	15) echo 13.2.2 ;;
	16 | 17 | 18) echo 14.0.1 ;;
	*) return 1 ;;
	esac
}

fencing_citus_sources() {
	local d
	for d in "${FENCING_CITUS_SOURCES:-}" "$(fencing_shared_dir)/citus-sources"; do
		[ -n "$d" ] && [ -d "$d" ] && { echo "$d"; return 0; }
	done
	return 1
}

fencing_citus_cache() {
	echo "/var/cache/fencing-citus/$(fencing_citus_version)-pg$FENCING_PG_MAJOR"
}

# Build into the cache (as root).  Prints why and returns 1 if it cannot.
fencing_citus_build() {
	local version cache src tarball build pgc
	version=$(fencing_citus_version) || { echo "no Citus for PostgreSQL $FENCING_PG_MAJOR"; return 1; }
	cache=$(fencing_citus_cache)
	[ -f "$cache/.complete" ] && return 0
	src=$(fencing_citus_sources) || { echo "no citus-sources directory"; return 1; }
	tarball=$src/citus-$version.tar.xz
	[ -f "$tarball" ] || { echo "missing $tarball"; return 1; }
	pgc=/usr/lib/postgresql/$FENCING_PG_MAJOR/bin/pg_config
	(
		flock 7
		[ -f "$cache/.complete" ] && exit 0
		echo "== building Citus $version for PostgreSQL $FENCING_PG_MAJOR into $cache"
		build=$(mktemp -d /tmp/fencing-citus-build.XXXXXX)
		trap 'rm -rf "$build"' EXIT
		tar -xJf "$tarball" -C "$build"
		cd "$build/citus-$version"
		# Debian's 15.20 exports have_createdb_privilege(), which Citus
		# 13.2.2 also defines as a static function for PostgreSQL 15: rename
		# Citus's copy (the README of citus-sources describes the fix).
		if grep -q 'have_createdb_privilege' \
			"$("$pgc" --includedir-server)/commands/dbcommands.h" 2>/dev/null; then
			sed -i 's/^have_createdb_privilege(void)$/citus_have_createdb_privilege(void)\n#define have_createdb_privilege() citus_have_createdb_privilege()/' \
				src/include/pg_version_compat.h
		fi
		./configure -q PG_CONFIG="$pgc" --without-libcurl >configure.log 2>&1 ||
			{ tail -n 20 configure.log; exit 1; }
		make -s -j"$(nproc)" >make.log 2>&1 || { grep -E 'error' make.log | head -n 20; exit 1; }
		rm -rf "$cache.tmp"
		make -s DESTDIR="$cache.tmp" install >install.log 2>&1 || { tail -n 20 install.log; exit 1; }
		rm -rf "$cache"
		mv "$cache.tmp" "$cache"
		touch "$cache/.complete"
	) 7>>/tmp/fencing-citus.lock
}

# Copy the cached build into the installation of FENCING_PG_BINDIR.
fencing_citus_install() {
	local cache sysdir destdir
	cache=$(fencing_citus_cache)
	sysdir=/usr/lib/postgresql/$FENCING_PG_MAJOR
	destdir=${FENCING_PG_BINDIR%"$sysdir/bin"}
	if [ -z "$destdir" ] || [ "$destdir" = "$FENCING_PG_BINDIR" ]; then
		echo "Citus goes only into a private copy of the server (FENCING_PRIVATE=1), not into $FENCING_PG_BINDIR"
		return 1
	fi
	[ -f "$cache/.complete" ] || return 1
	cp -a "$cache/usr/lib/postgresql/$FENCING_PG_MAJOR/lib/." "$destdir$sysdir/lib/"
	cp -a "$cache/usr/share/postgresql/$FENCING_PG_MAJOR/extension/." \
		"$destdir/usr/share/postgresql/$FENCING_PG_MAJOR/extension/"
}

# fencing_citus_prepare: for test/run.sh, after the extension is built.
# Sets FENCING_CITUS_INSTALL to a server installation (the private copy of
# FENCING_PRIVATE=1, else a copy of its own under /tmp, with the extension
# installed into it) that has Citus, or FENCING_CITUS_SKIP to the reason it
# has none.  The Citus test skips, loudly, only then.
fencing_citus_prepare() {
	local out dir bindir=$FENCING_PG_BINDIR sysdir=/usr/lib/postgresql/$FENCING_PG_MAJOR
	FENCING_CITUS_INSTALL=
	FENCING_CITUS_SKIP=
	FENCING_CITUS_COPY=
	if ! out=$(fencing_citus_build 2>&1); then
		FENCING_CITUS_SKIP="Citus could not be built: $(echo "$out" | tail -n 5 | tr '\n' ' ')"
		echo "== $FENCING_CITUS_SKIP"
		return 0
	fi
	[ -z "$out" ] || echo "$out"
	if [ "$bindir" = "$sysdir/bin" ]; then
		# no private copy: make one for the Citus cluster alone
		dir=$(mktemp -d /tmp/fencing-citus-inst.XXXXXX)
		chmod 755 "$dir"
		fencing_private_install "$dir"
		make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null
		FENCING_CITUS_COPY=$dir
	fi
	fencing_citus_install || FENCING_CITUS_SKIP="Citus could not be installed into $FENCING_PG_BINDIR"
	[ -n "$FENCING_CITUS_SKIP" ] || FENCING_CITUS_INSTALL=${FENCING_PG_BINDIR%/bin}
	FENCING_PG_BINDIR=$bindir
	echo "== Citus $(fencing_citus_version): ${FENCING_CITUS_INSTALL:-none}"
}
