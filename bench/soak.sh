#!/usr/bin/env bash
# bench/soak.sh: does the cost stay flat over time?  (issue 30)
#
# 64 pgbench clients (one run, weighted scripts) for WINDOWS windows of
# WINDOW seconds, mixing everything a lease database does all day:
#   cycle   lease_acquire (TTL 2 s, no wait) + lease_release, names out of
#           2,000; one grant in ten is left to expire (taken over later);
#           one cycle in 4,000 also runs lease_purge('10 s'), which deletes
#           the leases free for 10 s (they are created again later)
#   wait    lease_acquire with wait => '200 ms' on 20 names, + release
#   renew   acquire, lease_renew twice, release
#   sem     semaphore_acquire(name, holder, 8, '2 s') on 50 names + release
#   write   acquire (names out of 1,000), then in one transaction a fenced
#           UPDATE (fence_advance) of the name's row and a ledger row with
#           the token, then release
#   floor   two single-row UPDATEs by key, one per transaction (the anchor
#           against which machine load cancels out)
#   plain   the plain-SQL lease of bench/plain_lease.sql (INSERT ... ON
#           CONFLICT + UPDATE) on names out of 2,000, one grant in ten left
#           to expire, and one cycle in 4,000 deletes the leases free for
#           10 s: the table a user would write instead, with the same churn
#           (the anchor for the lease table's size)
# and a sampler that records, at the end of every window, the lease
# table's and its indexes' sizes, live and dead tuples, autovacuum runs,
# WAL written, and pg_stat_statements' counters (calls, buffers touched).
# Per window: those, and per script the throughput and p50/p99 latency
# (pgbench's per-transaction log).
#
# Checks (window 1 is the warm-up, window 2 the reference):
#   - nothing lost, no errors: pgbench reports no failed transaction and no
#     aborted client, the server log has no ERROR, FATAL or PANIC; every
#     fenced write in the ledger is in its row (the row's count of writes
#     equals its ledger rows and its fence is the highest ledger token) and
#     no token is in the ledger twice;
#   - sizes flat: the lease table's heap and its indexes, in every window
#     after the second, within 20% of window 2;
#   - autovacuum keeps up: no autovacuum of fencing.leases (each is logged:
#     the table's log_autovacuum_min_duration is 0) left more dead row
#     versions it could not yet remove than the table has live rows, and
#     at least one ran.  The dead tuples at a window's end are reported,
#     not checked: they count what accumulated since the last autovacuum,
#     and the window's end falls anywhere in that minute (the report shows
#     how long after the last autovacuum each sample was taken);
#   - buffers touched per call of each lease statement and of the fenced
#     UPDATE (pg_stat_statements: shared hits + reads), which bloat would
#     grow, within 20% (+ 1 buffer) of window 2.  Latency is reported, not
#     asserted: on a shared machine a load spike moves it more than bloat
#     would; buffers per call are what bloat grows, and they do not depend
#     on load.  The p99 of the lease cycle relative to the floor's p99 in
#     the same window (machine load cancels out) is reported beside it.
#
#   sudo bench/soak.sh            # 20 windows of 60 s: about 21 minutes;
#                                 # writes bench/out/soak-<date>.md/.png
#   sudo bench/soak.sh --short    # 5 windows of 30 s, about 3 minutes (CI):
#                                 # the same checks, "soak: N passed, N failed"
#   LOG_AUTOVACUUM=0 sudo bench/soak.sh
#                                 # also logs every autovacuum run and keeps
#                                 # the server log: bench/out/soak-server.log
#   FILLFACTOR=40 sudo bench/soak.sh
#                                 # fencing.leases at another fillfactor (the
#                                 # extension creates it at 70)
#   PURGE=0 sudo bench/soak.sh    # no lease_purge: no deletes, and no
#                                 # inserts once every name exists
# The report also counts, per window, the updates that were not HOT and
# the inserts and deletes of the lease table and of the plain-SQL lease
# table, and the heaps of those two and of the floor's table (all three
# at fillfactor 70).
set -euo pipefail
export LC_ALL=C
MODE=long
[ "${1:-}" = "--short" ] && MODE=short
if [ "$MODE" = short ]; then
	: "${WINDOW:=30}" "${WINDOWS:=5}" "${NAPTIME:=10s}"
else
	: "${WINDOW:=60}" "${WINDOWS:=20}" "${NAPTIME:=1min}"
fi
: "${FENCING_PG_MAJOR:=15}" "${CLIENTS:=64}" "${FSYNC:=off}" "${SHARED_BUFFERS:=256MB}"
: "${POOL:=2000}" "${LOG_AUTOVACUUM:=-1}" "${FILLFACTOR:=}" "${PURGE:=1}"
export WINDOW WINDOWS NAPTIME CLIENTS FSYNC SHARED_BUFFERS POOL FENCING_PG_MAJOR MODE LOG_AUTOVACUUM FILLFACTOR PURGE

if [ "${1:-}" = "--inner" ]; then
	# as postgres: $2 = work dir, $3 = action
	W=$2
	export PATH="$W/inst/usr/lib/postgresql/$FENCING_PG_MAJOR/bin:$PATH"
	D=$W/data
	PORT=$(cat "$W/port")
	export PGHOST=$W PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
	Q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
	case $3 in
	start)
		initdb -D "$D" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
		. "$W/cluster_settings.sh"
		{
			bench_cluster_settings "bench/soak.sh" 100
			echo "shared_preload_libraries = 'pg_stat_statements'"
			echo "pg_stat_statements.max = 1000"
			echo "autovacuum_naptime = $NAPTIME"
			echo "log_autovacuum_min_duration = $LOG_AUTOVACUUM"
		} >>"$D/postgresql.conf"
		pg_ctl -D "$D" -l "$W/server.log" -w -t 120 start >/dev/null
		Q <<-SQL
			CREATE EXTENSION pg_stat_statements;
			CREATE EXTENSION fencing;
			${FILLFACTOR:+ALTER TABLE fencing.leases SET (fillfactor = $FILLFACTOR);}
			ALTER TABLE fencing.leases SET (log_autovacuum_min_duration = 0);
			CREATE TABLE floor_t (name text PRIMARY KEY, holder text NOT NULL,
			  token bigint NOT NULL, expires_at timestamptz NOT NULL) WITH (fillfactor = 70);
			INSERT INTO floor_t SELECT 'f' || g, 'init', g, clock_timestamp() FROM generate_series(1, $POOL) g;
			CREATE TABLE res (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0, fence bigint)
			  WITH (fillfactor = 50);
			INSERT INTO res (id) SELECT g FROM generate_series(1, 1000) g;
			CREATE TABLE ledger (id int NOT NULL, tok bigint NOT NULL);
			\i $W/plain_lease.sql
			INSERT INTO plain_lease.leases
			  SELECT 'p' || g, 'init', nextval('plain_lease.token_seq'), clock_timestamp()
			    FROM generate_series(1, $POOL) g;
			SELECT count(fencing.lease_release(n, fencing.lease_acquire(n, 'init', '1 minute')))
			  FROM (SELECT 'l' || g FROM generate_series(1, $POOL) g
			        UNION ALL SELECT 'r' || g FROM generate_series(1, $POOL) g
			        UNION ALL SELECT 'w' || g FROM generate_series(1, 1000) g
			        UNION ALL SELECT 'q' || g FROM generate_series(1, 20) g) AS x(n);
			VACUUM ANALYZE;
			CHECKPOINT;
		SQL
		S=$W/scripts
		mkdir -p "$S"
		cat >"$S/cycle.sql" <<-'EOF'
			\set n random(1, :pool)
			SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '2 s'), 0) AS tok \gset
			\set keep random(1, 10)
			\if :tok > 0 AND :keep > 1
			SELECT fencing.lease_release('l' || :n, :tok);
			\endif
			\set p random(1, 4000)
			\if :p = 1 AND :purge = 1
			SELECT fencing.lease_purge('10 s');
			\endif
		EOF
		cat >"$S/wait.sql" <<-'EOF'
			\set n random(1, 20)
			SELECT coalesce(fencing.lease_acquire('q' || :n, 'c' || :client_id, '2 s', wait => '200 ms'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('q' || :n, :tok);
			\endif
		EOF
		cat >"$S/renew.sql" <<-'EOF'
			\set n random(1, :pool)
			SELECT coalesce(fencing.lease_acquire('r' || :n, 'c' || :client_id, '2 s'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_renew('r' || :n, :tok, '2 s');
			SELECT fencing.lease_renew('r' || :n, :tok, '2 s');
			SELECT fencing.lease_release('r' || :n, :tok);
			\endif
		EOF
		cat >"$S/sem.sql" <<-'EOF'
			\set n random(1, 50)
			SELECT coalesce(fencing.semaphore_acquire('s' || :n, 'c' || :client_id, 8, '2 s'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('s' || :n, :tok);
			\endif
		EOF
		# TTL 1 minute and always released: no takeover can make the write stale
		cat >"$S/write.sql" <<-'EOF'
			\set n random(1, 1000)
			SELECT coalesce(fencing.lease_acquire('w' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
			\if :tok > 0
			BEGIN;
			UPDATE res SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :n;
			INSERT INTO ledger VALUES (:n, :tok);
			COMMIT;
			SELECT fencing.lease_release('w' || :n, :tok);
			\endif
		EOF
		cat >"$S/floor.sql" <<-'EOF'
			\set n random(1, :pool)
			UPDATE floor_t SET holder = 'c' || :client_id, expires_at = clock_timestamp() + interval '2 s' WHERE name = 'f' || :n;
			UPDATE floor_t SET expires_at = clock_timestamp() WHERE name = 'f' || :n;
		EOF
		cat >"$S/plain.sql" <<-'EOF'
			\set n random(1, :pool)
			WITH a AS (INSERT INTO plain_lease.leases AS l (name, holder, token, expires_at) VALUES ('p' || :n, 'c' || :client_id, nextval('plain_lease.token_seq'), clock_timestamp() + interval '2 s') ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at WHERE l.expires_at <= clock_timestamp() OR l.holder = EXCLUDED.holder RETURNING l.token) SELECT coalesce((SELECT token FROM a), 0) AS tok \gset
			\set keep random(1, 10)
			\if :tok > 0 AND :keep > 1
			UPDATE plain_lease.leases SET expires_at = clock_timestamp() WHERE name = 'p' || :n AND token = :tok AND expires_at > clock_timestamp();
			\endif
			\set p random(1, 4000)
			\if :p = 1 AND :purge = 1
			DELETE FROM plain_lease.leases WHERE expires_at <= clock_timestamp() - interval '10 s';
			\endif
		EOF
		Q -c "SELECT pg_stat_statements_reset()" >/dev/null
		;;
	sample)
		# one line: epoch, heap, indexes, live, dead, autovacuums, WAL lsn
		# (bytes), per statement kind calls and buffers, then the lease
		# table's updates and HOT updates, the floor table's heap, updates
		# and HOT updates, the lease table's inserts and deletes, the
		# plain-SQL lease table's heap, inserts, deletes, updates and HOT
		# updates, seconds since the lease table's last autovacuum
		Q -F $'\t' <<-'SQL'
			SELECT extract(epoch FROM clock_timestamp()),
			       pg_relation_size('fencing.leases'), pg_indexes_size('fencing.leases'),
			       s.n_live_tup, s.n_dead_tup, s.autovacuum_count,
			       pg_current_wal_lsn() - '0/0'::pg_lsn,
			       (SELECT string_agg(k || '=' || c || ':' || b, ',' ORDER BY k) FROM (
			          SELECT CASE WHEN query LIKE '%lease_acquire%' THEN 'acquire'
			                      WHEN query LIKE '%semaphore_acquire%' THEN 'sem_acquire'
			                      WHEN query LIKE '%lease_release%' THEN 'release'
			                      WHEN query LIKE '%lease_renew%' THEN 'renew'
			                      WHEN query LIKE '%fence_advance%' THEN 'fenced_update'
			                      WHEN query LIKE '%UPDATE floor_t%' THEN 'floor_update' END AS k,
			                 sum(calls) AS c, sum(shared_blks_hit + shared_blks_read) AS b
			            FROM pg_stat_statements GROUP BY 1) x WHERE k IS NOT NULL)
			       , s.n_tup_upd, s.n_tup_hot_upd, pg_relation_size('floor_t'),
			       f.n_tup_upd, f.n_tup_hot_upd, s.n_tup_ins, s.n_tup_del,
			       pg_relation_size('plain_lease.leases'), p.n_tup_ins, p.n_tup_del,
			       p.n_tup_upd, p.n_tup_hot_upd,
			       coalesce(extract(epoch FROM clock_timestamp() - s.last_autovacuum), -1)
			  FROM pg_stat_user_tables s, pg_stat_user_tables f, pg_stat_user_tables p
			 WHERE s.relid = 'fencing.leases'::regclass AND f.relid = 'floor_t'::regclass
			   AND p.relid = 'plain_lease.leases'::regclass;
		SQL
		;;
	run)
		rm -f "$W"/log.*
		S=$W/scripts
		pgbench -n -M prepared -c "$CLIENTS" -j 2 -T $((WINDOW * WINDOWS)) -D pool="$POOL" -D purge="$PURGE" \
			-l --log-prefix="$W/log" \
			-f "$S/cycle.sql@4" -f "$S/wait.sql@1" -f "$S/renew.sql@1" -f "$S/sem.sql@1" \
			-f "$S/write.sql@2" -f "$S/floor.sql@2" -f "$S/plain.sql@4" >"$W/pgbench.out" 2>&1 || true
		;;
	check)
		# nothing lost: each fenced write is in its row, no token twice
		Q -F $'\t' <<-'SQL'
			SELECT (SELECT count(*) FROM ledger),
			       (SELECT count(*) FROM res r
			          LEFT JOIN (SELECT id, count(*) AS c, max(tok) AS m FROM ledger GROUP BY id) l USING (id)
			         WHERE r.v <> coalesce(l.c, 0) OR r.fence IS DISTINCT FROM l.m),
			       (SELECT count(*) - count(DISTINCT tok) FROM ledger);
		SQL
		;;
	stop)
		pg_ctl -D "$D" -m fast -w stop >/dev/null 2>&1 || true
		;;
	esac
	exit 0
fi

cd "$(dirname "$0")/.."
. test/deps.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (the cluster runs as postgres)" >&2; exit 1; }
command -v pgbench >/dev/null || fencing_install_deps
work=$(mktemp -d /tmp/fencing-soak.XXXXXX)
chmod 755 "$work"
cleanup() {
	[ -f "$work/port" ] && fencing_as_postgres bash "$work/soak.sh" --inner "$work" stop
	# LOG_AUTOVACUUM=0: keep the server log, which then says what autovacuum did
	[ "$LOG_AUTOVACUUM" = -1 ] || cp "$work/server.log" "${BENCH_OUT:-bench/out}/soak-server.log" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
cp bench/soak.sh bench/cluster_settings.sh bench/plain_lease.sql "$work/"
src=$work/src
mkdir -p "$src"
tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=tmp_check --exclude=results -cf - . | tar -xf - -C "$src"
exec 9>>/tmp/fencing-build.lock
flock 9
fencing_private_install "$work/inst"
flock -u 9
(cd "$src" && make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" \
	PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" >/dev/null &&
	make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null)
echo $((20000 + RANDOM % 20000)) >"$work/port"
chown -R postgres:postgres "$work"
inner() { fencing_as_postgres bash "$work/soak.sh" --inner "$work" "$@"; }
echo "== soak ($MODE): $CLIENTS clients, $WINDOWS windows of $WINDOW s" >&2
inner start >/dev/null

samples=$work/samples.tsv
inner sample >"$samples"
inner run &
runner=$!
t0=$(date +%s)
for w in $(seq 1 "$WINDOWS"); do
	# wait for the end of the window (not a sleep that assumes: the clock)
	while [ "$(date +%s)" -lt $((t0 + w * WINDOW)) ]; do sleep 1; done
	inner sample >>"$samples"
	echo "window $w/$WINDOWS: $(tail -n1 "$samples" | cut -f2-6)" >&2
done
wait "$runner"
check=$(inner check)

date=$(date -u +%Y%m%d-%H%M%S)
if [ "$MODE" = long ]; then
	mkdir -p "${BENCH_OUT:-bench/out}"
	base=${BENCH_OUT:-bench/out}/soak-$date
else
	base=$work/soak-$date
fi
what=$(git describe --always --dirty 2>/dev/null || echo '?')
set +e
python3 - "$work" "$samples" "$work/pgbench.out" "$work/server.log" "$check" \
	"$base" "$WINDOW" "$WINDOWS" "$CLIENTS" "$MODE" "$what" "$(nproc)" "$FSYNC" "$NAPTIME" <<'PY'
import sys, statistics, collections, subprocess, os, re, glob
(work, samples, pgb_out, server_log, check, base, window, windows, clients, mode, what,
 cpus, fsync, naptime) = sys.argv[1:]
window, windows = int(window), int(windows)
names = ["cycle", "wait", "renew", "sem", "write", "floor", "plain"]
S = []
for line in open(samples):
    f = line.rstrip("\n").split("\t")
    st = {}
    for kv in (f[7].split(",") if len(f) > 7 and f[7] else []):
        k, v = kv.split("=")
        c, b = v.split(":")
        st[k] = (int(c), int(b))
    S.append(dict(t=float(f[0]), heap=int(f[1]), idx=int(f[2]), live=int(f[3]),
                  dead=int(f[4]), av=int(f[5]), wal=int(f[6]), st=st,
                  upd=int(f[8]), hot=int(f[9]), fheap=int(f[10]), fupd=int(f[11]), fhot=int(f[12]),
                  ins=int(f[13]), dele=int(f[14]), pheap=int(f[15]), pins=int(f[16]),
                  pdel=int(f[17]), pupd=int(f[18]), phot=int(f[19]), since_av=float(f[20])))
t0 = S[0]["t"]
lat = collections.defaultdict(lambda: collections.defaultdict(list))
for line in (l for fn in glob.glob(os.path.join(work, "log.*")) for l in open(fn)):
    f = line.split()
    epoch = int(f[4]) + int(f[5]) / 1e6
    w = int((epoch - t0) // window) + 1
    if 1 <= w <= windows:
        lat[w][names[int(f[3])]].append(int(f[2]))
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, len(v) * p // 100)] if v else float("nan")
rows = []
for w in range(1, min(windows, len(S) - 1) + 1):
    a, b = S[w - 1], S[w]
    r = dict(w=w, heap=b["heap"], idx=b["idx"], live=b["live"], dead=b["dead"],
             av=b["av"] - a["av"], since_av=b["since_av"], wal=(b["wal"] - a["wal"]) / 1e6, dt=b["t"] - a["t"],
             fheap=b["fheap"],
             nonhot=(b["upd"] - a["upd"]) - (b["hot"] - a["hot"]),
             hotpct=100 * (b["hot"] - a["hot"]) / max(1, b["upd"] - a["upd"]),
             fnonhot=(b["fupd"] - a["fupd"]) - (b["fhot"] - a["fhot"]),
             fhotpct=100 * (b["fhot"] - a["fhot"]) / max(1, b["fupd"] - a["fupd"]),
             ins=b["ins"] - a["ins"], dele=b["dele"] - a["dele"], pheap=b["pheap"],
             pins=b["pins"] - a["pins"], pdel=b["pdel"] - a["pdel"],
             pnonhot=(b["pupd"] - a["pupd"]) - (b["phot"] - a["phot"]))
    r["tps"] = sum(len(v) for v in lat[w].values()) / window
    for n in names:
        v = lat[w][n]
        r[n] = (len(v) / window, pct(v, 50) / 1000, pct(v, 99) / 1000)
    r["bpc"] = {}
    for k in b["st"]:
        c1, b1 = b["st"][k]
        c0, b0 = a["st"].get(k, (0, 0))
        if c1 > c0:
            r["bpc"][k] = (b1 - b0) / (c1 - c0)
    rows.append(r)
kinds = ["acquire", "release", "renew", "sem_acquire", "fenced_update", "floor_update"]

checks = []
def check_(ok, what):
    checks.append((bool(ok), what))
# nothing lost, no errors
out = open(pgb_out).read()
failed = re.search(r"number of failed transactions: (\d+)", out)
why = [l.strip() for l in out.splitlines() if re.search(r"aborted|error|ERROR|failed transactions: [1-9]", l)]
check_(re.search(r"number of transactions actually processed: \d+", out) and
       (failed is None or failed.group(1) == "0") and "aborted" not in out,
       "pgbench: no failed transaction, no aborted client" + (f" (first: {why[0][:200]})" if why else ""))
errs = [l for l in open(server_log) if re.search(r"\b(ERROR|FATAL|PANIC):", l)
        and "canceling autovacuum task" not in l]
check_(not errs, f"server log: no ERROR, FATAL or PANIC ({len(errs)}" +
       (f"; first: {errs[0].strip()[:200]}" if errs else "") + ")")
nledger, bad_rows, dup = (int(x) for x in check.split("\t"))
check_(nledger > 0 and bad_rows == 0,
       f"every fenced write is in its row: {nledger} ledger rows, {bad_rows} rows disagree")
check_(dup == 0, f"no token in the ledger twice ({dup})")
ref = rows[1] if len(rows) > 1 else rows[0]
later = rows[2:]
check_(all(r["heap"] <= 1.2 * ref["heap"] for r in later),
       "lease table heap within 20% of window 2: " + ", ".join(f"{r['heap'] // 1024}" for r in rows) + " kB")
check_(all(r["idx"] <= 1.2 * ref["idx"] for r in later),
       "lease table indexes within 20% of window 2: " + ", ".join(f"{r['idx'] // 1024}" for r in rows) + " kB")
# each autovacuum of the lease table: removed, remain, dead but not yet removable
vacs = [tuple(int(x) for x in m.groups()) for m in re.finditer(
    r'automatic vacuum of table "[^"]*\.fencing\.leases":[^\n]*\n(?:\t[^\n]*\n)*?'
    r'\ttuples: (\d+) removed, (\d+) remain, (\d+) are dead but not yet removable',
    open(server_log).read())]
live = min(r["live"] for r in rows)
check_(vacs and all(v[2] <= live for v in vacs),
       f"autovacuum keeps up: {len(vacs)} autovacuums of fencing.leases, none left more dead row versions "
       f"it could not yet remove than the table's {live} live rows (at most {max((v[2] for v in vacs), default=0)})")
for k in kinds:
    if k not in ref["bpc"]:
        continue
    vals = [r["bpc"].get(k) for r in rows]
    check_(all(r["bpc"].get(k, 0) <= 1.2 * ref["bpc"][k] + 1 for r in later),
           f"buffers per call of {k} within 20% (+1) of window 2: " +
           ", ".join("-" if v is None else f"{v:.1f}" for v in vals))
npass = sum(ok for ok, _ in checks)
nfail = len(checks) - npass

o = []
p = o.append
p(f"# Soak run, {os.path.basename(base)}\n")
p(f"bench/soak.sh ({mode} mode): extension {what}, {clients} clients, {windows} windows of "
  f"{window} s, fsync = {fsync}, synchronous_commit = on, autovacuum_naptime = {naptime}, "
  f"{cpus} CPUs, fencing.leases fillfactor {os.environ.get('FILLFACTOR') or '70 (as installed)'}, "
  f"lease_purge {'on' if os.environ.get('PURGE', '1') != '0' else 'off (PURGE=0)'}. "
  f"Window 1 is the warm-up, window 2 the reference.\n")
p("## Checks\n")
for ok, w in checks:
    p(f"- {'PASS' if ok else '**FAIL**'}: {w}")
def growth(key):
    return ", ".join(f"{r[key] // 1024}" for r in rows) + \
        f" kB ({max(r[key] for r in later) / max(1, ref[key]) - 1:+.0%} at most against window 2)" if later else "-"
if vacs:
    med = lambda xs: sorted(xs)[len(xs) // 2]
    p(f"\nEach autovacuum of fencing.leases ({len(vacs)}) removed {min(v[0] for v in vacs)}-{max(v[0] for v in vacs)} "
      f"dead row versions (median {med([v[0] for v in vacs])}) and left {min(v[2] for v in vacs)}-{max(v[2] for v in vacs)} "
      f"that were dead but not yet removable (median {med([v[2] for v in vacs])}).")
p(f"\nFor comparison, not checked: the heap of the plain-SQL lease table (same churn) {growth('pheap')}; "
  f"of the floor's table (no inserts) {growth('fheap')}.")
p("\n## Per window\n")
p("| window | heap kB | index kB | live | dead (s after the last autovacuum) | autovacuums in the window | WAL MB | tx/s | cycle p50 / p99 ms | floor p50 / p99 ms | cycle p99 / floor p99 (÷ window 2) | write p99 ms | wait p99 ms | sem p99 ms |")
p("|" + "---:|" * 14)
rr = ref["cycle"][2] / ref["floor"][2]
for r in rows:
    ratio = r["cycle"][2] / r["floor"][2]
    p(f"| {r['w']} | {r['heap'] // 1024} | {r['idx'] // 1024} | {r['live']} | {r['dead']} ({r['since_av']:.0f}) | {r['av']} | "
      f"{r['wal']:.0f} | {r['tps']:.0f} | {r['cycle'][1]:.1f} / {r['cycle'][2]:.1f} | "
      f"{r['floor'][1]:.1f} / {r['floor'][2]:.1f} | {ratio:.2f} ({ratio / rr:.2f}) | "
      f"{r['write'][2]:.1f} | {r['wait'][2]:.1f} | {r['sem'][2]:.1f} |")
p("\nRow churn per window: updates that were not HOT (each leaves an index entry and a line pointer only VACUUM frees), "
  "inserts and deletes (lease_purge, or the plain-SQL lease's DELETE, deletes; a later acquire inserts: new rows go "
  "where the free space map says there is room, or to new pages), and the heap: the lease table, the plain-SQL "
  "lease table with the same churn, and the floor's table (updated by key, never inserted into); all three at "
  "fillfactor 70 unless the header says otherwise:\n")
p("| window | leases: not HOT | HOT % | inserts | deletes | heap kB | plain-SQL leases: not HOT | inserts | deletes | heap kB | floor table: not HOT | heap kB |")
p("|" + "---:|" * 12)
for r in rows:
    p(f"| {r['w']} | {r['nonhot']} | {r['hotpct']:.2f} | {r['ins']} | {r['dele']} | {r['heap'] // 1024} | "
      f"{r['pnonhot']} | {r['pins']} | {r['pdel']} | {r['pheap'] // 1024} | {r['fnonhot']} | {r['fheap'] // 1024} |")
p("\nBuffers touched per call (pg_stat_statements, shared hits + reads), per window:\n")
p("| window | " + " | ".join(kinds) + " |")
p("|" + "---:|" * (len(kinds) + 1))
for r in rows:
    p(f"| {r['w']} | " + " | ".join(f"{r['bpc'][k]:.1f}" if k in r["bpc"] else "-" for k in kinds) + " |")
p("\nTransactions per second and p99 (ms) per script, per window:\n")
p("| window | " + " | ".join(names) + " |")
p("|" + "---:|" * (len(names) + 1))
for r in rows:
    p(f"| {r['w']} | " + " | ".join(f"{r[n][0]:.0f}, {r[n][2]:.1f}" for n in names) + " |")
p(f"\n{npass} checks passed, {nfail} failed.")
open(base + ".md", "w").write("\n".join(o) + "\n")
print("\n".join(o))
dat = base + ".dat"
with open(dat, "w") as f:
    for r in rows:
        f.write(f"{r['w']} {r['heap'] / 1024:.0f} {r['idx'] / 1024:.0f} {r['dead']} {r['tps']:.0f} "
                f"{r['wal']:.1f} {r['cycle'][1]:.2f} {r['cycle'][2]:.2f} {r['floor'][1]:.2f} {r['floor'][2]:.2f}\n")
gp = f"""set terminal png size 1000,900
set output '{base}.png'
set multiplot layout 3,1 title 'bench/soak.sh: {os.path.basename(base)}'
set grid
set xlabel 'window ({window} s)'
set ylabel 'kB'
set y2label 'dead tuples'
set y2tics
set key outside right
plot '{dat}' using 1:2 with linespoints title 'leases heap', '' using 1:3 with linespoints title 'leases indexes', '' using 1:4 axes x1y2 with linespoints title 'dead tuples'
set ylabel 'ms'
unset y2label
unset y2tics
set logscale y
plot '{dat}' using 1:7 with linespoints title 'cycle p50', '' using 1:8 with linespoints title 'cycle p99', '' using 1:9 with linespoints title 'floor p50', '' using 1:10 with linespoints title 'floor p99'
unset logscale y
set ylabel 'tx/s'
set y2label 'WAL MB'
set y2tics
plot '{dat}' using 1:5 with linespoints title 'tx/s (all scripts)', '' using 1:6 axes x1y2 with linespoints title 'WAL MB per window'
unset multiplot
"""
if mode == "long":
    try:
        subprocess.run(["gnuplot"], input=gp, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"no plot: {e}", file=sys.stderr)
os.unlink(dat)
print(f"\nsoak: {npass} passed, {nfail} failed")
sys.exit(1 if nfail else 0)
PY
status=$?
set -e
[ "$MODE" = long ] && echo "report: $base.md" >&2
exit $status
