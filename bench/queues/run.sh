#!/usr/bin/env bash
# bench/queues/run.sh: what the queue recipes (examples/queues/) cost: each
# queue's enqueue + claim + two heartbeats + complete with and without
# fencing, side by side.
#
#   sudo bench/queues/run.sh                 # about 2 minutes
#   ROUNDS=3 DUR=10 CLIENTS=4 FSYNC=on sudo bench/queues/run.sh
#   DECLARE=set_config sudo bench/queues/run.sh   # the token declared by
#                                            # SELECT set_config, not SET LOCAL
#
# One throwaway cluster of a private relocated copy of the server
# installation with this tree's build (test/deps.sh).  bench/queues/
# setup.sql makes, for each of pg-boss, graphile-worker, River, Oban, Solid
# Queue and pgmq, the queue's table(s) twice: in schema fq with the
# recipe's triggers, in schema pq without.  Each round is one pgbench run
# of all twelve scripts (scripts.sh: enqueue, claim, complete, with the
# queue's statements) at weight 1, so both contenders of a queue meet the
# same load at the same time; the machine is shared, so quote the ratios.
# Ratio per queue and round: plain latency / fenced latency (1.0 = free;
# target >= 0.97, issue 30).  Writes bench/out/queues-<UTC date>.md.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
: "${FENCING_PG_MAJOR:=15}"
: "${ROUNDS:=5}" "${DUR:=15}" "${CLIENTS:=4}" "${FSYNC:=off}"
. test/deps.sh

if [ "${1:-}" = "--inner" ]; then
	# as postgres: $2 = work dir
	W=$2
	export PGHOST=$W PGPORT=$(cat "$W/port") PGUSER=postgres PGDATABASE=postgres
	initdb -D "$W/data" -U postgres -A trust --no-sync >/dev/null
	cat >>"$W/data/postgresql.conf" <<-EOF
		listen_addresses = ''
		unix_socket_directories = '$W'
		port = $PGPORT
		fsync = $FSYNC
		synchronous_commit = on
		shared_buffers = 256MB
		max_wal_size = 8GB
		checkpoint_timeout = 1h
		jit = off
	EOF
	pg_ctl -D "$W/data" -l "$W/server.log" -w -t 120 start >/dev/null
	trap 'pg_ctl -D "$W/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
	# the recipes as shipped, on the bench's tables
	for q in pg-boss graphile-worker river oban solid_queue pgmq; do
		sed -e 's/pgboss\.job\b/fq.boss/g' \
			-e 's/graphile_worker\._private_jobs\b/fq.gw/g' \
			-e 's/\briver_job\b/fq.river/g' \
			-e 's/\boban_jobs\b/fq.oban/g' \
			-e 's/\bsolid_queue_claimed_executions\b/fq.sq_claimed/g' \
			-e 's/pgmq\.q_jobs\b/fq.mq/g' "examples/queues/$q/install.sql"
	done >"$W/recipes.sql"
	psql -X -q -v ON_ERROR_STOP=1 -v recipes="$W/recipes.sql" -c 'CREATE EXTENSION fencing' -f bench/queues/setup.sql
	bash bench/queues/scripts.sh "$W"
	args=()
	for q in boss gw river oban sq pgmq; do
		args+=(-f "$W/${q}_fq.sql@1" -f "$W/${q}_pq.sql@1")
	done
	for r in $(seq 1 "$ROUNDS"); do
		psql -X -q -c 'VACUUM' >/dev/null
		pgbench -n -M simple -c "$CLIENTS" -j "$CLIENTS" -T "$DUR" "${args[@]}" >"$W/round$r.out" 2>&1 ||
			{ cat "$W/round$r.out" >&2; exit 1; }
		grep -q '^number of failed transactions: 0 ' "$W/round$r.out" ||
			{ cat "$W/round$r.out" >&2; exit 1; }
		# one line per script: round, file, transactions, latency average
		awk -v R="$r" -v L="$(cut -d' ' -f1 /proc/loadavg)" '
			/^SQL script [0-9]+:/ { f = $4; sub(".*/", "", f); sub("@.*", "", f) }
			/^ - [0-9]+ transactions/ { n = $2 }
			/^ - latency average/ { printf "%s\t%s\t%s\t%s\t%s\n", R, f, n, $5, L }' "$W/round$r.out"
	done >"$W/latency.tsv"
	# every fenced completion carried its claim's token, and none was refused
	psql -X -At -v ON_ERROR_STOP=1 >"$W/checks.txt" <<-SQL
		SELECT 'pg-boss completions with a token: ' || count(*) FILTER (WHERE output->>'fencing_token' = data->>'fencing_token') || ' of ' || count(*) FROM fq.boss WHERE state = 'completed';
		SELECT 'River completions stamped: ' || count(*) FILTER (WHERE metadata ? 'fencing_token') || ' of ' || count(*) FROM fq.river WHERE state = 'completed';
		SELECT 'refused: ' || coalesce((fence_advance_refusals + fence_guard_refusals + claim_guard_refusals)::text, 'not counted (fencing_monitor.stats_info)') FROM fencing_monitor.stats;
	SQL
	exit 0
fi

[ "$(id -u)" -eq 0 ] || { echo "run as root (private installation)" >&2; exit 1; }
fencing_install_deps
W=$(mktemp -d /tmp/fencing-bench-queues.XXXXXX)
chmod 755 "$W"
fencing_private_install "$W/inst"
exec 9>/tmp/fencing-build.lock
flock 9
fencing_build_install ""
flock -u 9
echo $((20000 + RANDOM % 20000)) >"$W/port"
chown -R postgres "$W"
runuser -u postgres -- env PATH="$FENCING_PG_BINDIR:$PATH" ROUNDS="$ROUNDS" DUR="$DUR" \
	CLIENTS="$CLIENTS" FSYNC="$FSYNC" DECLARE="${DECLARE:-set_local}" bash bench/queues/run.sh --inner "$W"
make -s clean PG_CONFIG="$FENCING_PG_BINDIR/pg_config" >/dev/null

mkdir -p "${BENCH_OUT:-bench/out}"
out=${BENCH_OUT:-bench/out}/queues-$(date -u +%Y%m%d-%H%M%S).md
python3 - "$W/latency.tsv" "$W/checks.txt" "$out" "$ROUNDS" "$DUR" "$CLIENTS" "$FSYNC" "${DECLARE:-set_local}" <<'PY'
import statistics, sys, collections
tsv, checks, out, rounds, dur, clients, fsync, declare = sys.argv[1:]
lat = collections.defaultdict(dict)
loads = {}
for line in open(tsv):
    r, f, n, ms, load = line.split('\t')
    q, s = f[:-len('.sql')].rsplit('_', 1)
    lat[q].setdefault(int(r), {})[s] = float(ms)
    loads[int(r)] = load.strip()
names = {'boss': 'pg-boss 12', 'gw': 'graphile-worker 0.18', 'river': 'River',
         'oban': 'Oban', 'sq': 'Solid Queue', 'pgmq': 'pgmq'}
rows = []
for q in ['boss', 'gw', 'river', 'oban', 'sq', 'pgmq']:
    per = [lat[q][r]['pq'] / lat[q][r]['fq'] for r in sorted(lat[q])]
    fq = statistics.median(lat[q][r]['fq'] for r in lat[q])
    pq = statistics.median(lat[q][r]['pq'] for r in lat[q])
    med = statistics.median(per)
    rows.append((names[q], pq, fq, med, min(per), max(per)))
with open(out, 'w') as o:
    o.write('# Queue recipes: claim + heartbeats + complete with and without fencing\n\n')
    o.write(f'bench/queues/run.sh: {rounds} rounds of {dur} s, {clients} clients, one pgbench run per round '
            f'with all twelve scripts at weight 1 (mixed: both contenders of a queue under the same load); '
            f'fsync = {fsync}, synchronous_commit = on; load average at the end of each round: '
            + ', '.join(loads[r] for r in sorted(loads)) + '. A cycle is enqueue + claim + two heartbeats + complete, '
            'five transactions, with the queue\'s own statements; fenced = the recipe\'s triggers '
            '(examples/queues/<queue>/install.sql as shipped) and the token sent with the heartbeats and '
            'the completion (declared with '
            + ('SELECT set_config' if declare == 'set_config' else 'SET LOCAL')
            + ' in the same request; pg-boss\'s completion carries it in its output).\n\n')
    o.write('| queue | plain (ms per cycle, median) | fenced | ratio plain/fenced (median) | rounds |\n|---|---|---|---|---|\n')
    for name, pq, fq, med, lo, hi in rows:
        o.write(f'| {name} | {pq:.3f} | {fq:.3f} | **{med:.3f}×** | {lo:.3f}–{hi:.3f} |\n')
    o.write('\nTarget: ≥ 0.97× (issue 30).\n\nChecks after the run:\n\n')
    for line in open(checks):
        o.write(f'- {line.strip()}\n')
print(open(out).read())
PY
rm -rf "$W"
