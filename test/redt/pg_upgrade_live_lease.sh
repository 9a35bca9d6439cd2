#!/usr/bin/env bash
# pg_upgrade_live_lease.sh (red team, currently FAILS): after pg_upgrade
# (no failover, no restore of older state) the first token enters a band,
# because the new cluster has a new system identifier and token_origin
# hashes it: a live lease's current holder is then refused with LF005
# ("lost at failover").  No document mentions pg_upgrade.
#
# Run as a user initdb accepts, with the server's bin directory first on
# PATH (or PGBIN=...).  Exit 0 when the live lease still checks true.
set -euo pipefail
B=${PGBIN:-$(dirname "$(command -v pg_ctl)")}
W=$(mktemp -d /tmp/redt-upgrade.XXXXXX)
trap '"$B/pg_ctl" -D "$W/old" -m immediate stop >/dev/null 2>&1 || true
      "$B/pg_ctl" -D "$W/new" -m immediate stop >/dev/null 2>&1 || true
      rm -rf "$W"' EXIT
cd "$W"
for d in old new; do
	"$B/initdb" -D $d -A trust -U postgres --no-sync >/dev/null
	printf "listen_addresses = ''\nunix_socket_directories = '%s'\n" "$W" >>$d/postgresql.conf
done
q() { "$B/psql" -X -qAt -h "$W" -p "$1" -U postgres -d postgres -c "$2"; }
"$B/pg_ctl" -D old -o "-p 6101" -l old.log -w start >/dev/null
q 6101 "CREATE EXTENSION fencing"
T=$(q 6101 "SELECT fencing.lease_acquire('L', 'H', '1 hour')")
echo "H holds L with $T"
"$B/pg_ctl" -D old -w stop >/dev/null
"$B/pg_upgrade" -b "$B" -B "$B" -d old -D new -p 6101 -P 6102 -U postgres >upgrade.log 2>&1 ||
	{ tail upgrade.log; exit 2; }
"$B/pg_ctl" -D new -o "-p 6102" -l new.log -w start >/dev/null
echo "after pg_upgrade, lease_check: $(q 6102 "SELECT fencing.lease_check('L', $T)")"
echo "another client's next_token(): $(q 6102 "SELECT fencing.next_token()")"
if out=$(q 6102 "SELECT fencing.lease_check('L', $T)" 2>&1) && [ "$out" = t ]; then
	echo "PASS: H's live lease still checks true"
else
	echo "FAIL: H's live lease, no failover: $out"
	exit 1
fi
