#!/usr/bin/env bash
# bench/citus.sh: fenced router UPDATEs on a Citus distributed table
# against the same UPDATE without a check (issue 18).
#
#   sudo bench/citus.sh               # about 3 minutes
#   ROUNDS=2 DUR=5 sudo bench/citus.sh
#
# Builds the extension into a private relocated copy of the server with
# Citus (test/citus.sh: the cached build), starts a coordinator and two
# workers on 127.0.0.1 (fsync = off, as the main runs of bench/run.sh:
# this measures what the check costs, not the disk), a table of ROWS rows
# distributed over 32 shards, and in each round one pgbench run through
# the coordinator with two scripts interleaved (weight 1 each):
#   fenced    UPDATE files SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :id
#   unfenced  UPDATE files SET v = v + 1, fence = :tok WHERE id = :id
# on rows of each client's own.  Reported: median and trimmed mean latency
# per script and their ratio.  Writes bench/out/citus-<date>.md.
set -euo pipefail
export LC_ALL=C
: "${FENCING_PG_MAJOR:=15}"
: "${ROUNDS:=4}" "${DUR:=8}" "${CLIENTS:=4}" "${ROWS:=100000}"

if [ "${1:-}" = "--inner" ]; then
	# as postgres: $2 = work dir, $3 = action
	W=$2
	export PATH="$W/inst/usr/lib/postgresql/$FENCING_PG_MAJOR/bin:$PATH"
	base=$(cat "$W/port")
	export PGHOST=127.0.0.1 PGPORT=$base PGUSER=postgres PGDATABASE=postgres
	case $3 in
	start)
		for n in 0 1 2; do
			initdb -D "$W/n$n" -U postgres -A trust --no-sync >/dev/null
			cat >>"$W/n$n/postgresql.conf" <<-EOF
				listen_addresses = '127.0.0.1'
				port = $((base + n))
				unix_socket_directories = '$W'
				shared_preload_libraries = 'citus'
				fsync = off
				shared_buffers = 128MB
				max_connections = 100
				max_prepared_transactions = 50
				jit = off
			EOF
			pg_ctl -D "$W/n$n" -l "$W/n$n.log" -w -t 120 start >/dev/null
			psql -X -q -p $((base + n)) -c "CREATE EXTENSION citus"
		done
		psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<-SQL
			SELECT citus_set_coordinator_host('127.0.0.1', $base);
			SELECT citus_add_node('127.0.0.1', $((base + 1)));
			SELECT citus_add_node('127.0.0.1', $((base + 2)));
			CREATE EXTENSION fencing;
			SET citus.shard_count = 32;
			CREATE TABLE files (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0, fence bigint);
			SELECT create_distributed_table('files', 'id');
			INSERT INTO files (id) SELECT generate_series(1, $ROWS);
			VACUUM ANALYZE files;
		SQL
		head='\set id random(0, :rows / :clients - 1) * :clients + :client_id + 1
\set n :n + 1
\set tok :base + :n'
		printf '%s\n%s\n' "$head" 'UPDATE files SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :id;' >"$W/fenced.sql"
		printf '%s\n%s\n' "$head" 'UPDATE files SET v = v + 1, fence = :tok WHERE id = :id;' >"$W/unfenced.sql"
		;;
	run)
		# $4 round, $5 token base
		rm -f "$W"/mix.*
		pgbench -n -M prepared -c "$CLIENTS" -j 2 -D rows="$ROWS" -D clients="$CLIENTS" \
			-D n=0 -D base="$5" -T "$DUR" -l --log-prefix="$W/mix" \
			-f "$W/fenced.sql@1" -f "$W/unfenced.sql@1" >"$W/pgbench.out" 2>&1 ||
			{ cat "$W/pgbench.out" >&2; exit 1; }
		grep -q '^number of failed transactions: 0' "$W/pgbench.out" ||
			! grep -q '^number of failed transactions' "$W/pgbench.out" ||
			{ cat "$W/pgbench.out" >&2; exit 1; }
		for s in 0 1; do
			cat "$W"/mix.* | awk -v s=$s '$4 == s { print $3 }' | sort -n |
				awk -v R="$4" -v C="$([ $s = 0 ] && echo fenced || echo unfenced)" -v L="$(cut -d' ' -f1 /proc/loadavg)" '
				{ v[NR] = $1 } END {
					m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
					lo = int(NR * 0.05) + 1; hi = NR - int(NR * 0.05)
					for (i = lo; i <= hi; i++) { sum += v[i]; k++ }
					printf "%s\t%s\t%d\t%.1f\t%.2f\t%s\n", R, C, NR, m, sum / k, L }'
		done
		;;
	check)
		psql -X -At -c "SELECT sum(v) FROM files"
		;;
	stop)
		for n in 2 1 0; do pg_ctl -D "$W/n$n" -m fast -w stop >/dev/null 2>&1 || true; done
		;;
	esac
	exit 0
fi

cd "$(dirname "$0")/.."
. test/deps.sh
. test/citus.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (the cluster runs as postgres)" >&2; exit 1; }
fencing_install_deps
fencing_citus_build
work=$(mktemp -d /tmp/fencing-citus-bench.XXXXXX)
chmod 755 "$work"
trap 'fencing_as_postgres bash "$work/citus.sh" --inner "$work" stop; rm -rf "$work"' EXIT
cp bench/citus.sh "$work/citus.sh"
exec 9>>/tmp/fencing-build.lock
flock 9
mkdir -p "$work/src"
tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=tmp_check --exclude=results -cf - . | tar -xf - -C "$work/src"
flock -u 9
fencing_private_install "$work/inst"
(cd "$work/src" && make -s clean >/dev/null &&
	make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" PG_CFLAGS="-Wno-unused-parameter" &&
	make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null)
fencing_citus_install
echo $((30000 + RANDOM % 20000)) >"$work/port"
chown -R postgres:postgres "$work"
fencing_as_postgres env ROWS="$ROWS" bash "$work/citus.sh" --inner "$work" start

tsv=$work/runs.tsv
base=1000000000
for r in $(seq 1 "$ROUNDS"); do
	base=$((base + 1000000000))
	fencing_as_postgres env ROWS="$ROWS" DUR="$DUR" CLIENTS="$CLIENTS" \
		bash "$work/citus.sh" --inner "$work" run "$r" "$base" | tee -a "$tsv" >&2
done
total=$(fencing_as_postgres bash "$work/citus.sh" --inner "$work" check)
tx=$(awk -F'\t' '{ s += $3 } END { print s }' "$tsv")

date=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "${BENCH_OUT:-bench/out}"
out=${BENCH_OUT:-bench/out}/citus-$date.md
{
	echo "# bench/citus.sh, $date"
	echo
	echo "$(nproc) vCPUs, PostgreSQL $("$FENCING_PG_BINDIR/pg_config" --version | awk '{ print $2 }'), Citus $(fencing_citus_version): a coordinator and two workers on one machine, 32 shards, $ROWS rows, fsync = off, $CLIENTS clients through the coordinator, $ROUNDS rounds of $DUR s, git $(git describe --always --dirty 2>/dev/null || echo '?')."
	echo "Load average during the runs: $(cut -f6 "$tsv" | sort -n | head -n1)–$(cut -f6 "$tsv" | sort -n | tail -n1) (the machine is shared)."
	echo "Transactions: $tx, rows changed: $total."
	echo
	echo "| router UPDATE | median (us) | trimmed mean (us) |"
	echo "|---|---|---|"
	for c in fenced unfenced; do
		awk -F'\t' -v C=$c '$2 == C { m += $4; t += $5; n++ } END { printf "| %s | %.0f | %.0f |\n", C, m / n, t / n }' "$tsv"
	done
	awk -F'\t' '$2 == "fenced" { f[$1] = $5 } $2 == "unfenced" { u[$1] = $5 } END {
		lst = ""; for (r = 1; r in f; r++) { sf += f[r]; su += u[r]; lst = lst (r > 1 ? ", " : "") sprintf("%.3f", u[r] / f[r]) }
		printf "\nFenced throughput ÷ unfenced (unfenced ÷ fenced trimmed mean): **%.3f×** (rounds: %s).\n", su / sf, lst }' "$tsv"
	echo
	echo '```text'
	cat "$tsv"
	echo '```'
} >"$out"
[ "$total" = "$tx" ] || echo "rows changed ($total) differ from transactions ($tx)" | tee -a "$out" >&2
cat "$out"
