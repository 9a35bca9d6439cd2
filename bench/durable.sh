#!/usr/bin/env bash
# bench/durable.sh: what making fenced writes durable costs (issue 16).
#
#   sudo bench/durable.sh              # about 4 minutes
#   ROUNDS=2 DUR=5 sudo bench/durable.sh
#
# Two builds of the extension, each in a private relocated copy of the
# server installation with a throwaway cluster of its own (fsync = on, the
# setting a durable server runs with): "durable" (this tree) and "unsafe"
# (test/negative/no_durable_fence.patch: fenced writes commit as synchronous_commit
# says: the behaviour before the fix).  In each cluster one pgbench run per
# round and setting runs two scripts interleaved (weight 1 each, so they
# meet the same load):
#   fenced  UPDATE t SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :id
#   plain   UPDATE t SET v = v + 1, fence = :tok WHERE id = :id
# with synchronous_commit = off and = on (PGOPTIONS), on rows of each
# client's own.  The clusters alternate round by round.  Reported: median
# and trimmed mean latency per script, and the ratio plain/fenced of the
# trimmed means (1.0 = free).  Figures are from a shared 2-vCPU machine:
# quote the ratios.  Writes bench/out/durable-<date>.md.
set -euo pipefail
export LC_ALL=C
: "${FENCING_PG_MAJOR:=15}"
: "${ROUNDS:=4}" "${DUR:=8}" "${CLIENTS:=2}" "${ROWS:=100000}"

if [ "${1:-}" = "--inner" ]; then
	# as postgres: $2 = work dir, $3 = build name, $4 = action
	W=$2 B=$3
	export PATH="$W/$B/usr/lib/postgresql/$FENCING_PG_MAJOR/bin:$PATH"
	D=$W/$B.data
	port=$(cat "$W/$B.port")
	export PGHOST=$W PGPORT=$port PGUSER=postgres PGDATABASE=postgres
	case $4 in
	start)
		initdb -D "$D" -U postgres -A trust --no-sync >/dev/null
		cat >>"$D/postgresql.conf" <<-EOF
			listen_addresses = ''
			unix_socket_directories = '$W'
			port = $port
			fsync = on
			synchronous_commit = on
			shared_buffers = 256MB
			max_wal_size = 8GB
			checkpoint_timeout = 1h
			jit = off
		EOF
		pg_ctl -D "$D" -l "$W/$B.log" -w -t 120 start >/dev/null
		psql -X -q -v ON_ERROR_STOP=1 <<-SQL
			CREATE EXTENSION fencing;
			CREATE TABLE t (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0, fence bigint)
			  WITH (fillfactor = 50);
			INSERT INTO t (id) SELECT generate_series(1, $ROWS);
			VACUUM ANALYZE t;
		SQL
		printf '%s\n' '\set id random(0, :rows / :clients - 1) * :clients + :client_id + 1' \
			'\set n :n + 1' '\set tok :base + :n' \
			'UPDATE t SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :id;' >"$W/fenced.sql"
		printf '%s\n' '\set id random(0, :rows / :clients - 1) * :clients + :client_id + 1' \
			'\set n :n + 1' '\set tok :base + :n' \
			'UPDATE t SET v = v + 1, fence = :tok WHERE id = :id;' >"$W/plain.sql"
		;;
	run)
		# $5 synchronous_commit, $6 round, $7 token base
		rm -f "$W"/mix.*
		PGOPTIONS="-c synchronous_commit=$5" pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
			-D rows="$ROWS" -D clients="$CLIENTS" -D n=0 -D base="$7" -T "$DUR" \
			-l --log-prefix="$W/mix" -f "$W/fenced.sql@1" -f "$W/plain.sql@1" >"$W/pgbench.out" 2>&1
		grep -q '^number of failed transactions: 0' "$W/pgbench.out" ||
			! grep -q '^number of failed transactions' "$W/pgbench.out" ||
			{ cat "$W/pgbench.out" >&2; exit 1; }
		for s in 0 1; do
			cat "$W"/mix.* | awk -v s=$s '$4 == s { print $3 }' | sort -n |
				awk -v B="$B" -v S="$5" -v R="$6" -v C="$([ $s = 0 ] && echo fenced || echo plain)" -v L="$(cut -d' ' -f1 /proc/loadavg)" '
				{ v[NR] = $1 } END {
					m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
					lo = int(NR * 0.05) + 1; hi = NR - int(NR * 0.05)
					for (i = lo; i <= hi; i++) { sum += v[i]; k++ }
					printf "%s\t%s\t%s\t%s\t%d\t%.1f\t%.2f\t%s\n", B, S, R, C, NR, m, sum / k, L }'
		done
		;;
	stop)
		pg_ctl -D "$D" -m fast -w stop >/dev/null || true
		;;
	esac
	exit 0
fi

cd "$(dirname "$0")/.."
. test/deps.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (the clusters run as postgres)" >&2; exit 1; }
fencing_install_deps
work=$(mktemp -d /tmp/fencing-durable-bench.XXXXXX)
chmod 755 "$work"
cleanup() {
	for b in durable unsafe; do
		[ -f "$work/$b.port" ] && fencing_as_postgres bash "$work/durable.sh" --inner "$work" "$b" stop
	done
	rm -rf "$work"
}
trap cleanup EXIT
cp bench/durable.sh "$work/durable.sh"

# the two builds, each into its own relocated copy, under the build lock
exec 9>>/tmp/fencing-build.lock
flock 9
src=$work/src
mkdir -p "$src"
tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=tmp_check --exclude=results -cf - . | tar -xf - -C "$src"
flock -u 9
for b in durable unsafe; do
	fencing_private_install "$work/$b"
	# unsafe: the negative control's patch (test/negative/no_durable_fence.patch)
	[ "$b" = unsafe ] && (cd "$src" && patch -p1 --batch --no-backup-if-mismatch <test/negative/no_durable_fence.patch >/dev/null)
	(cd "$src" && make -s clean >/dev/null &&
		make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" \
			PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" &&
		make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null)
	echo $((30000 + RANDOM % 20000)) >"$work/$b.port"
done
chown -R postgres:postgres "$work"
for b in durable unsafe; do
	fencing_as_postgres env ROWS="$ROWS" bash "$work/durable.sh" --inner "$work" "$b" start
done

tsv=$work/runs.tsv
base=1000000000
for r in $(seq 1 "$ROUNDS"); do
	for sc in off on; do
		order="durable unsafe"
		[ $((r % 2)) -eq 0 ] && order="unsafe durable"
		for b in $order; do
			base=$((base + 1000000000))
			fencing_as_postgres env ROWS="$ROWS" DUR="$DUR" CLIENTS="$CLIENTS" \
				bash "$work/durable.sh" --inner "$work" "$b" run "$sc" "$r" "$base" | tee -a "$tsv" >&2
		done
	done
done

date=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "${BENCH_OUT:-bench/out}"
out=${BENCH_OUT:-bench/out}/durable-$date.md
{
	echo "# bench/durable.sh, $date"
	echo
	echo "$(nproc) vCPUs, $(awk '/MemTotal/ { printf "%.1f GB", $2 / 1048576 }' /proc/meminfo), PostgreSQL $("$FENCING_PG_BINDIR/pg_config" --version | awk '{ print $2 }'), fsync = on, $CLIENTS clients, $ROUNDS rounds of $DUR s per build and setting, git $(git describe --always --dirty 2>/dev/null || echo '?')."
	echo "Load average during the runs: $(cut -f8 "$tsv" | sort -n | head -n1)–$(cut -f8 "$tsv" | sort -n | tail -n1) (the machine is shared)."
	echo
	echo "| build | synchronous_commit | fenced: median / trimmed mean (us) | plain: median / trimmed mean (us) | fenced throughput ÷ plain (plain ÷ fenced trimmed mean; per round) |"
	echo "|---|---|---|---|---|"
	for b in durable unsafe; do
		for sc in off on; do
			awk -F'\t' -v B=$b -v S=$sc '$1 == B && $2 == S {
				if ($4 == "fenced") { fm[$3] = $6; ft[$3] = $7 } else { pm[$3] = $6; pt[$3] = $7 } }
				END {
					n = 0; lst = ""
					for (r = 1; r in ft; r++) { n++; sfm += fm[r]; sft += ft[r]; spm += pm[r]; spt += pt[r]
						lst = lst (n > 1 ? ", " : "") sprintf("%.2f", pt[r] / ft[r]) }
					printf "| %s | %s | %.0f / %.0f | %.0f / %.0f | **%.2f×** (%s) |\n", B, S, sfm / n, sft / n, spm / n, spt / n, spt / sft, lst }' "$tsv"
		done
	done
	echo
	echo "durable = this tree; unsafe = test/negative/no_durable_fence.patch (fenced writes commit as synchronous_commit says, as before issue 16)."
	echo
	echo '```text'
	cat "$tsv"
	echo '```'
} >"$out"
cat "$out"
