#!/usr/bin/env bash
# deps.sh: install what building and testing fencing needs, from Debian's
# archive.  Sourced by examples/demo.sh and test/run.sh; does nothing when all is there.
set -euo pipefail

FENCING_PG_MAJOR=${FENCING_PG_MAJOR:-15}
# The server to build against and test with: the system's by default, or a
# private relocated copy (fencing_private_install) or another major's
# installation (test/matrix.sh).
FENCING_PG_BINDIR=${FENCING_PG_BINDIR:-/usr/lib/postgresql/$FENCING_PG_MAJOR/bin}
FENCING_DEB_PACKAGES=(
	make gcc
	"postgresql-$FENCING_PG_MAJOR"
	"postgresql-server-dev-$FENCING_PG_MAJOR"
	postgresql-common
	libipc-run-perl
	libio-pty-perl
	libkrb5-dev
	python3-psycopg2
	pgbouncer
	spin
	dpkg-dev
	debhelper
	postgresql-server-dev-all
	libpq-dev
	gnuplot-nox
	patroni
	etcd-server
	etcd-client
	libfaketime
	gdb
	bison flex libssl-dev zlib1g-dev bzip2 xz-utils
	liblz4-dev
	libzstd-dev
	prometheus-postgres-exporter
	prometheus
)
# Node.js for examples/node (t/063_clients.pl).  A nodejs that bundles its
# own npm (NodeSource's) conflicts with Debian's npm package: ask for
# Debian's only where there is no npm.
command -v npm >/dev/null 2>&1 || FENCING_DEB_PACKAGES+=(nodejs npm)

fencing_install_deps() {
	local missing=()
	local p
	for p in "${FENCING_DEB_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages: ${missing[*]}; run as root or install them" >&2
		return 1
	fi
	echo "== installing ${missing[*]}"
	# The server package would create and start a default cluster; we use
	# throwaway clusters only.
	mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/fencing-no-main.conf
	# one apt at a time, whoever else on this machine installs
	(
		flock 8
		# etcd-server and patroni come with services that would start a
		# system-wide etcd (on port 2379) and a Patroni, and so do
		# prometheus and prometheus-postgres-exporter (ports 9090, 9187):
		# the tests start their own, so no service may start during the
		# installation.
		local policy=
		if [ ! -e /usr/sbin/policy-rc.d ]; then
			policy=/usr/sbin/policy-rc.d
			printf '#!/bin/sh\n# fencing deps.sh: start no service during apt-get install\nexit 101\n' >"$policy"
			chmod 755 "$policy"
		fi
		local rc=0
		apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null &&
			DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 \
				install -y -q --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
		[ -z "$policy" ] || rm -f "$policy"
		# and none at the next boot either (systemd only; never stopped
		# here: whatever runs was started by someone else)
		if [ -d /run/systemd/system ]; then
			systemctl disable etcd.service patroni.service prometheus.service \
				prometheus-postgres-exporter.service >/dev/null 2>&1 || true
		fi
		exit $rc
	) 8>>/tmp/fencing-apt.lock
}

# libkrb5-dev: the server's libpq-be.h includes <gssapi/gssapi.h>.
# libio-pty-perl: IPC::Run's pseudo-terminals (t/065_fencing_lock.pl).
# pgbouncer: the transaction-pooling tests.  spin: the protocol model.
# dpkg-dev, debhelper, postgresql-server-dev-all (pg_buildext, the pgxs_loop
# debhelper sequence): the Debian package test, t/060_debian_package.pl.
# libpq-dev: examples/c (also pulled in by postgresql-server-dev-N).
# gnuplot-nox: the plot of bench/run.sh.
# patroni, etcd-server, etcd-client: t/070_patroni.pl, a three-member Patroni
# cluster on etcd (the test runs its own etcd and Patroni processes; the
# packaged services are never started).  libfaketime: its skewed-clock member,
# and the skewed clocks of t/013_clock_skew.pl and t/014_token_epoch.pl.
# gdb: t/016_band_check_race.pl stops a backend at a breakpoint.
# bison, flex, libssl-dev, zlib1g-dev, bzip2, xz-utils: the PostgreSQL
# servers that test/pg_server.sh builds for the version matrix.
# liblz4-dev, libzstd-dev: building Citus (test/citus.sh, t/071_citus.pl),
# configured --without-libcurl.
# prometheus-postgres-exporter: t/090_prometheus.pl runs it against a test
# cluster with contrib/prometheus/queries.yaml; prometheus: its promtool
# checks contrib/prometheus/alerts.yaml (neither service is started).

# fencing_shared_dir: the shared directory beside the repository, with the
# sources the matrix and Citus are built from (CI: ../shared relative to the
# top of the clone; a worktree: beside the main checkout).  FENCING_SHARED_DIR
# overrides.
fencing_shared_dir() {
	local d top
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	if [ -n "${FENCING_SHARED_DIR:-}" ]; then
		echo "$FENCING_SHARED_DIR"
		return
	fi
	for d in "$top/../shared" \
		"$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)/../shared" \
		"$(dirname "$(cd "$top" && cd "$(git rev-parse --git-common-dir 2>/dev/null || echo .)" && pwd)")/../shared"; do
		if [ -d "$d/postgresql-sources" ] || [ -d "$d/citus-sources" ]; then
			(cd "$d" && pwd)
			return
		fi
	done
	echo "$top/../shared"
}

# Build with warnings as errors and install into the server's directories.
# Server headers trip -Wunused-parameter, so that one warning stays off.
fencing_build_install() {
	local extra=${1:-}
	export PATH="$FENCING_PG_BINDIR:$PATH"
	make -s clean PG_CONFIG="$FENCING_PG_BINDIR/pg_config" >/dev/null
	make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" \
		PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter $extra"
	make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null
}

# fencing_private_install DIR: a relocated copy of the system's server
# installation under DIR (postgres finds its share and lib directories
# relative to its own binary), so that building and testing here never
# touches what other checkouts on this machine use.  Sets FENCING_PG_BINDIR.
fencing_private_install() {
	local dir=$1 pgdir=/usr/lib/postgresql/$FENCING_PG_MAJOR
	mkdir -p "$dir/usr/lib/postgresql" "$dir/usr/share/postgresql"
	cp -a "$pgdir" "$dir/usr/lib/postgresql/"
	cp -a "/usr/share/postgresql/$FENCING_PG_MAJOR" "$dir/usr/share/postgresql/"
	# headers are only read: share them
	mkdir -p "$dir/usr/include"
	ln -s /usr/include/postgresql "$dir/usr/include/postgresql"
	FENCING_PG_BINDIR=$dir$pgdir/bin
	[ "$("$FENCING_PG_BINDIR/pg_config" --pkglibdir)" = "$dir$pgdir/lib" ] || {
		echo "the private installation in $dir is not relocated" >&2
		return 1
	}
}

# initdb refuses root: throwaway clusters run as postgres, in a copy of the
# tree that postgres owns.
fencing_copy_tree_for_postgres() {
	local dir
	dir=$(mktemp -d /tmp/fencing-test.XXXXXX)
	tar --exclude=.git -cf - . | tar -xf - -C "$dir"
	chown -R postgres:postgres "$dir"
	echo "$dir"
}

fencing_as_postgres() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- env PATH="$PATH" "$@"
	else
		"$@"
	fi
}
