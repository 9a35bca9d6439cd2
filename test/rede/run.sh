#!/usr/bin/env bash
# test/rede/run.sh: run the red-team reproductions, each SQL script in a
# throwaway cluster of its own (test/tmp_cluster.sh), and the isolation
# spec with pg_isolation_regress.  Run as postgres, with the server's bin
# directory (with fencing installed) first on PATH, from the checkout's top:
#   PATH=<private install>/usr/lib/postgresql/15/bin:$PATH bash test/rede/run.sh
# Each reproduction exits non-zero while its finding stands.
set -uo pipefail
cd "$(dirname "$0")/../.."
export TMP_CLUSTER_CONF="shared_preload_libraries = 'fencing'"
setup="CREATE EXTENSION fencing; CREATE ROLE app LOGIN; CREATE ROLE app2 LOGIN;
GRANT USAGE ON SCHEMA fencing TO app, app2;"
failed=0
for f in band_entry_zombie_leader observe_lock_timeout candidate_role_hidden; do
	# a reproduction whose finding is fixed became a test of its own
	[ -f "test/rede/$f.sql" ] || continue
	if bash test/tmp_cluster.sh bash -c "psql -X -q -c \"$setup\" && psql -X -v ON_ERROR_STOP=1 -f test/rede/$f.sql" >/tmp/rede-$f.log 2>&1; then
		echo "ok     $f"
	else
		echo "FAILED $f (reproduced; /tmp/rede-$f.log)"
		failed=$((failed + 1))
	fi
done
if [ -f test/rede/late_renew_resurrects.spec ]; then
iso=$(pg_config --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress
work=$(mktemp -d)
mkdir -p "$work/specs" "$work/expected"
cp test/rede/late_renew_resurrects.spec "$work/specs/"
cp test/rede/late_renew_resurrects.out "$work/expected/"
if bash test/tmp_cluster.sh bash -c "psql -X -q -c \"$setup\" && cd $work && $iso --use-existing --inputdir=. --dbname=postgres late_renew_resurrects" >/tmp/rede-late_renew_resurrects.log 2>&1; then
	echo "ok     late_renew_resurrects"
else
	echo "FAILED late_renew_resurrects (reproduced; /tmp/rede-late_renew_resurrects.log)"
	cat "$work/regression.diffs" 2>/dev/null
	failed=$((failed + 1))
fi
rm -rf "$work"
fi
echo "rede: $failed of 4 reproductions fail"
[ "$failed" -eq 0 ]
