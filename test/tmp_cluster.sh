#!/usr/bin/env bash
# tmp_cluster.sh: run a command against a throwaway PostgreSQL cluster made
# with the initdb and pg_ctl found first on PATH (any major, the system's
# server or a private copy), reached over a Unix socket of its own.
# Exports PGHOST, PGPORT, PGUSER and PGDATABASE for the command, and removes
# the cluster afterwards.  The exit status is the command's.  Must run as a
# user initdb accepts (not root).
#
# Why not pg_virtualenv (postgresql-common): it finds servers by major under
# /usr/lib/postgresql/NN, so it cannot run a private copy of the
# installation (FENCING_PRIVATE=1, the negative control) nor the matrix's
# own builds of 16, 17 and 18; this runs whatever initdb is first on PATH.
#
#   test/tmp_cluster.sh make installcheck
#   TMP_CLUSTER_CONF='max_prepared_transactions = 10' test/tmp_cluster.sh psql
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }
[ "$(id -u)" -ne 0 ] || { echo "tmp_cluster.sh: initdb refuses root; run as postgres" >&2; exit 2; }

dir=$(mktemp -d /tmp/fencing-cluster.XXXXXX)
started=
cleanup() {
	[ -n "$started" ] && pg_ctl -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$dir"
}
trap cleanup EXIT

initdb -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
	{ cat "$dir/initdb.log" >&2; exit 1; }
cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$dir'
port = 5432
fsync = off
max_connections = 100
max_prepared_transactions = 10
log_line_prefix = '%m [%p] '
# the expected outputs count tokens from one another: no raise to the
# clock between them (t/015_resumed_primary.pl tests the raise)
fencing.max_clock_lag = '1h'
${TMP_CLUSTER_CONF:-}
CONF
if ! pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 120 start >/dev/null; then
	cat "$dir/server.log" >&2
	exit 1
fi
started=1
export PGHOST=$dir PGPORT=5432 PGUSER=postgres PGDATABASE=postgres
status=0
"$@" || status=$?
if [ $status -ne 0 ] && [ -n "${TMP_CLUSTER_SHOW_LOG:-}" ]; then
	tail -n 50 "$dir/server.log" >&2
fi
exit $status
