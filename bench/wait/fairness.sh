#!/usr/bin/env bash
# bench/wait/fairness.sh: how fairly 64 clients contending for one lease
# are served: fencing's FIFO waiting against a retry loop of
# lease_acquire(wait => '0') with a random 1-10 ms backoff, and against
# pg_advisory_lock (bench/wait/fairness.py says what is measured).
#
#   sudo bench/wait/fairness.sh              # 60 s per contender, about 3.5 minutes
#   sudo bench/wait/fairness.sh --quick      # 10 s per contender
#   sudo bench/wait/fairness.sh --seconds 30 --clients 32 --hold-ms 2
#   sudo bench/wait/fairness.sh --contenders fifo,poll
#
# The extension is built and installed into a private copy of the server
# (test/deps.sh fencing_private_install), never into the system's, and
# measured in a throwaway cluster of that copy (test/tmp_cluster.sh, as
# user postgres).  Results: stdout and bench/out/wait-fairness-<date>.md (and .json:
# the summaries).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
. test/deps.sh
PYTHON=/usr/bin/python3

if [ "$(id -u)" -ne 0 ]; then
	echo "bench/wait/fairness.sh: run as root (it builds a private copy of the server)" >&2
	exit 1
fi
"$PYTHON" -c 'import psycopg2' 2>/dev/null || {
	echo "$PYTHON with psycopg2 is needed (Debian: python3-psycopg2)" >&2
	exit 1
}

fencing_install_deps
private=$(mktemp -d /tmp/fencing-inst.XXXXXX)
work=$(mktemp -d /tmp/fencing-bench-fair.XXXXXX)
trap 'rm -rf "$private" "$work"' EXIT
chmod 755 "$private"
fencing_private_install "$private"
echo "== private server installation: $FENCING_PG_BINDIR" >&2
exec 9>/tmp/fencing-build.lock
flock 9
fencing_build_install >/dev/null
flock -u 9
exec 9>&-

cp bench/wait/fairness.py test/tmp_cluster.sh "$work/"
cat >"$work/inner.sh" <<'EOF'
set -euo pipefail
cd "$(dirname "$0")"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION fencing"
/usr/bin/python3 fairness.py --json result.json "$@" >result.md
EOF
chown -R postgres:postgres "$work"

mkdir -p "${BENCH_OUT:-bench/out}"
result="${BENCH_OUT:-bench/out}/wait-fairness-$(date -u +%Y%m%d-%H%M%S).md"
status=0
fencing_as_postgres env PATH="$FENCING_PG_BINDIR:$PATH" \
	TMP_CLUSTER_CONF="max_connections = 200" \
	bash "$work/tmp_cluster.sh" bash "$work/inner.sh" "$@" || status=$?
if [ $status -ne 0 ] || [ ! -s "$work/result.md" ]; then
	echo "bench/wait/fairness.sh: FAILED (exit $status)" >&2
	exit 1
fi
cp "$work/result.md" "$result"
cp "$work/result.json" "${result%.md}.json"
echo
cat "$result"
echo
echo "(written to $result)"
