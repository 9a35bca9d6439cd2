#!/usr/bin/env bash
# bench/sync_off.sh: fenced writes with synchronous_commit = off, before
# and after "force the flush only when the fence moves" (issue 30).
#
# Two builds of the extension, each in a private relocated copy of the
# server with a throwaway cluster of its own (fsync = on, the setting a
# durable server runs with): "before" (REF, c377ece by default: every
# fenced write flushes at commit) and "after" (this tree).  In each
# cluster, one pgbench run per round (PGOPTIONS synchronous_commit = off,
# CLIENTS clients, weight 1 each, so the scripts meet the same load):
#   plain  UPDATE t SET v = v + 1 WHERE id = :id (unfenced)
#   beat   the same with fence = fence_advance(fence, T, true), the row
#          already fenced with T: a holder writing again with its token
#   hb     the job-queue recipe's heartbeat (examples/job_queue.sql) of a
#          job the client claimed at setup
#   move   the same UPDATE with fence = fence_advance(fence,
#          fencing.next_token()): a write that moves the fence
# on rows of each client's own.  The clusters alternate round by round.
# Ratio: plain's 5%-trimmed mean latency / the script's (1.0 = as fast as
# an unfenced asynchronous UPDATE).  Writes bench/out/sync-off-<date>.md.
#
#   sudo bench/sync_off.sh              # about 3 minutes
#   ROUNDS=2 DUR=5 sudo bench/sync_off.sh
set -euo pipefail
export LC_ALL=C
: "${FENCING_PG_MAJOR:=15}"
: "${ROUNDS:=4}" "${DUR:=8}" "${CLIENTS:=2}" "${ROWS:=10000}" "${REF:=c377ece}"

if [ "${1:-}" = "--inner" ]; then
	# as postgres: $2 = work dir, $3 = build, $4 = action
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
			shared_buffers = 128MB
			max_wal_size = 8GB
			checkpoint_timeout = 1h
			jit = off
		EOF
		pg_ctl -D "$D" -l "$W/$B.log" -w -t 120 start >/dev/null
		psql -X -q -v ON_ERROR_STOP=1 -f "$W/job_queue.sql" >/dev/null
		psql -X -q -v ON_ERROR_STOP=1 <<-SQL
			CREATE EXTENSION IF NOT EXISTS fencing;
			CREATE TABLE t (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0, fence bigint)
			  WITH (fillfactor = 50);
			INSERT INTO t (id) SELECT generate_series(1, $ROWS);
			CREATE TABLE u (LIKE t INCLUDING ALL) WITH (fillfactor = 50);
			CREATE TABLE m (LIKE t INCLUDING ALL) WITH (fillfactor = 50);
			INSERT INTO u (id) SELECT generate_series(1, $ROWS);
			INSERT INTO m (id) SELECT generate_series(1, $ROWS);
			SELECT fencing.next_token() AS tok \gset
			UPDATE u SET fence = :tok;
			CREATE TABLE beat_token AS SELECT :tok::bigint AS tok;
			SELECT count(job_queue.enqueue('hb', '{}')) FROM generate_series(1, $CLIENTS);
			-- job of client c: its row's id is c + 1 (pgbench counts from 0)
			CREATE TABLE hb_jobs AS
			  SELECT row_number() OVER (ORDER BY id) - 1 AS client, id, token
			    FROM job_queue.claim('hb', $CLIENTS, '1 day');
			VACUUM ANALYZE;
		SQL
		echo "$(psql -X -At -c 'SELECT tok FROM beat_token')" >"$W/$B.tok"
		;;
	run)
		# $5 round
		rm -f "$W"/mix.*
		S=$W/scripts
		PGOPTIONS="-c synchronous_commit=off" pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" \
			-D rows="$ROWS" -D clients="$CLIENTS" -D tok="$(cat "$W/$B.tok")" -T "$DUR" \
			-l --log-prefix="$W/mix" -f "$S/plain.sql@1" -f "$S/beat.sql@1" \
			-f "$S/hb.sql@1" -f "$S/move.sql@1" >"$W/pgbench.out" 2>&1 ||
			{ cat "$W/pgbench.out" >&2; exit 1; }
		if grep -q '^number of failed transactions: [1-9]' "$W/pgbench.out" ||
			grep -q aborted "$W/pgbench.out"; then
			cat "$W/pgbench.out" >&2
			exit 1
		fi
		cat "$W"/mix.* | python3 -c '
import sys, statistics
names = ["plain", "beat", "hb", "move"]
lat = {}
for line in sys.stdin:
    f = line.split()
    lat.setdefault(int(f[3]), []).append(int(f[2]))
for i, name in enumerate(names):
    v = sorted(lat[i]); n = len(v); k = n // 20
    print("\t".join([sys.argv[1], sys.argv[2], name, str(n), "%.1f" % statistics.median(v),
                     "%.1f" % statistics.fmean(v[k:n - k])]))
' "$B" "$5"
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
work=$(mktemp -d /tmp/fencing-sync-off.XXXXXX)
chmod 755 "$work"
cleanup() {
	for b in before after; do
		[ -f "$work/$b.port" ] && fencing_as_postgres bash "$work/sync_off.sh" --inner "$work" "$b" stop
	done
	rm -rf "$work"
}
trap cleanup EXIT
cp bench/sync_off.sh examples/job_queue.sql "$work/"
S=$work/scripts
mkdir -p "$S"
id='\set id random(0, :rows / :clients - 1) * :clients + :client_id + 1'
printf '%s\n' "$id" 'UPDATE t SET v = v + 1 WHERE id = :id;' >"$S/plain.sql"
printf '%s\n' "$id" 'UPDATE u SET v = v + 1, fence = fencing.fence_advance(fence, :tok, true) WHERE id = :id;' >"$S/beat.sql"
printf '%s\n' 'SELECT job_queue.heartbeat(id, token, '"'1 day'"') FROM hb_jobs WHERE client = :client_id;' >"$S/hb.sql"
printf '%s\n' "$id" 'UPDATE m SET v = v + 1, fence = fencing.fence_advance(fence, fencing.next_token()) WHERE id = :id;' >"$S/move.sql"

for b in before after; do
	mkdir -p "$work/$b.src"
	if [ "$b" = before ]; then
		git archive "$REF" | tar -x -C "$work/$b.src"
	else
		tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
			--exclude=tmp_check --exclude=results -cf - . | tar -xf - -C "$work/$b.src"
	fi
	exec 9>>/tmp/fencing-build.lock
	flock 9
	fencing_private_install "$work/$b"
	flock -u 9
	(cd "$work/$b.src" && make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" \
		PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" >/dev/null &&
		make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null)
	echo $((30000 + RANDOM % 20000)) >"$work/$b.port"
done
chown -R postgres:postgres "$work"
inner() { fencing_as_postgres env ROWS="$ROWS" DUR="$DUR" CLIENTS="$CLIENTS" bash "$work/sync_off.sh" --inner "$work" "$@"; }
for b in before after; do inner "$b" start; done

tsv=$work/runs.tsv
: >"$tsv"
for r in $(seq 1 "$ROUNDS"); do
	order="before after"
	[ $((r % 2)) -eq 0 ] && order="after before"
	for b in $order; do
		inner "$b" run "$r" | tee -a "$tsv" >&2
	done
done

date=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "${BENCH_OUT:-bench/out}"
out=${BENCH_OUT:-bench/out}/sync-off-$date.md
python3 - "$tsv" "$REF" "$(git describe --always --dirty 2>/dev/null || echo '?')" \
	"$ROUNDS" "$DUR" "$CLIENTS" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" >"$out" <<'PY'
import sys, statistics, collections
tsv, ref, head, rounds, dur, clients, cpus, load = sys.argv[1:]
d = collections.defaultdict(dict)
for line in open(tsv):
    b, r, name, n, med, trim = line.split("\t")
    d[(b, int(r))][name] = (int(n), float(med), float(trim))
print(f"# Fenced writes with synchronous_commit = off: before and after\n")
print(f"bench/sync_off.sh: before = {ref} (every fenced write flushes), after = {head} "
      f"(only writes that move the fence); fsync = on, synchronous_commit = off, "
      f"{clients} clients, {rounds} rounds of {dur} s per build, builds alternating; "
      f"{cpus} CPUs, load average at the end {load}.\n")
print("Throughput relative to the unfenced UPDATE in the same run (plain's trimmed mean "
      "latency / the script's; median of the rounds, then min-max), and trimmed mean latency:\n")
print("| build | beat: same token, allow_same | hb: recipe heartbeat | move: new token | plain (us) |")
print("|---|---|---|---|---|")
for b in ("before", "after"):
    rs = sorted(r for (bb, r) in d if bb == b)
    cells = []
    for name in ("beat", "hb", "move"):
        ratios = [d[(b, r)]["plain"][2] / d[(b, r)][name][2] for r in rs]
        lat = statistics.median(d[(b, r)][name][2] for r in rs)
        cells.append(f"**{statistics.median(ratios):.2f}x** ({min(ratios):.2f}-{max(ratios):.2f}); {lat:.0f} us")
    plain = statistics.median(d[(b, r)]["plain"][2] for r in rs)
    print(f"| {b} | " + " | ".join(cells) + f" | {plain:.0f} |")
print("\nRaw (build, round, script, transactions, median, trimmed mean in us):\n")
print("```text")
print(open(tsv).read().rstrip())
print("```")
PY
cat "$out"
echo "report: $out" >&2
