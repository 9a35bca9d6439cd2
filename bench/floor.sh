#!/usr/bin/env bash
# bench/floor.sh: the lease cycle against the floor PostgreSQL allows
# (issue 30), in mixed pgbench runs: all contenders in ONE run (weight 1
# each), so that they meet the same load at the same moment, compared by
# their per-script latency.  Contenders, each on a random name out of
# POOL (20,000), holder 'c' || client_id:
#
#   lease   fencing.lease_acquire(name, holder, '1 minute') and, if
#           granted, fencing.lease_release(name, token): two statements,
#           two commits
#   plain   the plain-SQL lease of bench/plain_lease.sql (INSERT ... ON
#           CONFLICT DO UPDATE ... RETURNING, then UPDATE), as bench/run.sh
#           sends it
#   floor   two single-row UPDATEs by key, one per transaction, on a table
#           of plain_lease's shape (the least a durable lease cycle can
#           write: one row version per call, one commit per call)
#   rtt     two SELECT 1 (round trips and commits of nothing)
#   floor_tok  (optional) the floor, its first UPDATE also drawing a
#           token from a plain sequence (token = nextval(...)), on a table
#           of its own: the floor of a lease cycle that hands out a token
#   sem8    (optional, CONTENDERS) semaphore_acquire(name, holder, 8, ...)
#           + lease_release, names out of POOL / 8
#   claim, claim_plain  (optional) a job claimed (UPDATE ... SET state =
#           'running') and completed (an UPDATE after set_config(
#           'fencing.token', token, true), which is SET LOCAL as -M prepared
#           can send it), on a table with fencing's claim_stamp and
#           claim_guard triggers and on one without (at most 64 clients:
#           each has its own jobs)
#   claim_trig  (optional) claim_plain's cycle on a table with the same two
#           BEFORE ROW triggers and WHEN clauses as claim's, calling
#           PostgreSQL's own C trigger function
#           suppress_redundant_updates_trigger (which lets a changed row
#           through): what PostgreSQL's trigger machinery costs by itself,
#           the floor of any trigger-based claim fencing.  With claim,
#           claim_plain and claim_trig the report adds their ratios.
#
# For each fsync setting (FSYNCS: "off on"; synchronous_commit = on for
# every contender) and client count (CLIENTS: "8 64"), ROUNDS runs of DUR
# seconds.  Ratio of a contender = its mean latency / the lease cycle's
# mean latency in the same run: the lease cycle's speed relative to it (1.0
# = as fast; the goals are >= 1.0 against plain and >= 0.97 against
# floor).  Reported per cell: the median of the per-round ratios, their
# range, the mean, median and 5%-trimmed mean latencies.  Writes
# bench/out/floor-<date>.md and .png (gnuplot), and .tsv (raw).
#
#   sudo bench/floor.sh                          # about 6 minutes
#   ROUNDS=2 DUR=5 sudo bench/floor.sh           # quick
#   REF=c377ece sudo bench/floor.sh              # the extension of a commit
#   CONTENDERS="lease plain floor rtt sem8" sudo bench/floor.sh
#   CONF="fencing.max_clock_lag = '1h'" TAG=lag1h sudo bench/floor.sh
#                                                # extra postgresql.conf lines
#
# Builds this tree (or REF) into a private relocated copy of the server
# installation under the build lock, as bench/durable.sh does: one run
# measures one binary, whatever others install meanwhile.
set -euo pipefail
export LC_ALL=C
: "${FENCING_PG_MAJOR:=15}"
: "${ROUNDS:=3}" "${DUR:=10}" "${CLIENTS:=8 64}" "${FSYNCS:=off on}"
: "${POOL:=20000}" "${CONTENDERS:=lease plain floor rtt}" "${TAG:=}"
: "${SHARED_BUFFERS:=256MB}" "${CONF:=}"

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
		FSYNC=off
		initdb -D "$D" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
		. "$W/cluster_settings.sh"
		bench_cluster_settings "bench/floor.sh" 100 >>"$D/postgresql.conf"
		printf '%s\n' "$CONF" >>"$D/postgresql.conf"
		pg_ctl -D "$D" -l "$W/server.log" -w -t 120 start >/dev/null
		Q -f "$W/plain_lease.sql"
		Q <<-SQL
			CREATE EXTENSION fencing;
			CREATE TABLE floor_t (name text PRIMARY KEY, holder text NOT NULL,
			  token bigint NOT NULL, expires_at timestamptz NOT NULL) WITH (fillfactor = 70);
			INSERT INTO floor_t SELECT 'l' || g, 'init', g, clock_timestamp() FROM generate_series(1, $POOL) g;
			CREATE TABLE floor_k (LIKE floor_t INCLUDING ALL) WITH (fillfactor = 70);
			INSERT INTO floor_k SELECT * FROM floor_t;
			CREATE SEQUENCE floor_seq;
			INSERT INTO plain_lease.leases
			  SELECT 'l' || g, 'init', nextval('plain_lease.token_seq'), clock_timestamp()
			  FROM generate_series(1, $POOL) g;
			-- every lease row exists, as every plain and floor row does
			SELECT count(fencing.lease_release('l' || g,
			         fencing.lease_acquire('l' || g, 'init', '1 minute')))
			  FROM generate_series(1, $POOL) g;
			SELECT count(fencing.lease_release('s' || g,
			         fencing.semaphore_acquire('s' || g, 'init', 8, '1 minute')))
			  FROM generate_series(1, $POOL / 8) g;
			-- a queue's jobs, claimed and completed with an UPDATE each: with
			-- fencing's claim triggers (claim_stamp, claim_guard) and without
			CREATE TABLE jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
			  tok bigint, result text) WITH (fillfactor = 50);
			INSERT INTO jobs (id) SELECT g FROM generate_series(1, $POOL) g;
			CREATE TABLE jobs_plain (LIKE jobs INCLUDING ALL) WITH (fillfactor = 50);
			INSERT INTO jobs_plain (id) SELECT g FROM generate_series(1, $POOL) g;
			CREATE TRIGGER stamp BEFORE UPDATE ON jobs FOR EACH ROW
			  WHEN (NEW.state = 'running' AND OLD.state <> 'running')
			  EXECUTE FUNCTION fencing.claim_stamp('tok');
			CREATE TRIGGER guard BEFORE UPDATE ON jobs FOR EACH ROW
			  WHEN (OLD.state = 'running' AND NEW.state <> 'running')
			  EXECUTE FUNCTION fencing.claim_guard('tok');
			CREATE TABLE jobs_trig (LIKE jobs INCLUDING ALL) WITH (fillfactor = 50);
			INSERT INTO jobs_trig (id) SELECT g FROM generate_series(1, $POOL) g;
			CREATE TRIGGER stamp BEFORE UPDATE ON jobs_trig FOR EACH ROW
			  WHEN (NEW.state = 'running' AND OLD.state <> 'running')
			  EXECUTE FUNCTION suppress_redundant_updates_trigger();
			CREATE TRIGGER guard BEFORE UPDATE ON jobs_trig FOR EACH ROW
			  WHEN (OLD.state = 'running' AND NEW.state <> 'running')
			  EXECUTE FUNCTION suppress_redundant_updates_trigger();
		SQL
		Q -c "VACUUM ANALYZE" -c "CHECKPOINT"
		S=$W/scripts
		mkdir -p "$S"
		cat >"$S/lease.sql" <<-'EOF'
			\set n random(1, :pool)
			SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('l' || :n, :tok);
			\endif
		EOF
		cat >"$S/plain.sql" <<-'EOF'
			\set n random(1, :pool)
			WITH a AS (INSERT INTO plain_lease.leases AS l (name, holder, token, expires_at) VALUES ('l' || :n, 'c' || :client_id, nextval('plain_lease.token_seq'), clock_timestamp() + interval '1 minute') ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at WHERE l.expires_at <= clock_timestamp() OR l.holder = EXCLUDED.holder RETURNING l.token) SELECT coalesce((SELECT token FROM a), 0) AS tok \gset
			\if :tok > 0
			UPDATE plain_lease.leases SET expires_at = clock_timestamp() WHERE name = 'l' || :n AND token = :tok AND expires_at > clock_timestamp();
			\endif
		EOF
		cat >"$S/floor.sql" <<-'EOF'
			\set n random(1, :pool)
			UPDATE floor_t SET holder = 'c' || :client_id, expires_at = clock_timestamp() + interval '1 minute' WHERE name = 'l' || :n;
			UPDATE floor_t SET expires_at = clock_timestamp() WHERE name = 'l' || :n;
		EOF
		cat >"$S/floor_tok.sql" <<-'EOF'
			\set n random(1, :pool)
			UPDATE floor_k SET holder = 'c' || :client_id, token = nextval('floor_seq'), expires_at = clock_timestamp() + interval '1 minute' WHERE name = 'l' || :n;
			UPDATE floor_k SET expires_at = clock_timestamp() WHERE name = 'l' || :n;
		EOF
		cat >"$S/rtt.sql" <<-'EOF'
			SELECT 1;
			SELECT 1;
		EOF
		# a job of the client's own (ids apart by 64): a claim finds it ready
		cat >"$S/claim.sql" <<-'EOF'
			\set n random(0, :pool / 64 - 1) * 64 + :client_id + 1
			UPDATE jobs SET state = 'running' WHERE id = :n AND state = 'ready' RETURNING tok \gset
			BEGIN;
			SELECT set_config('fencing.token', :tok::text, true);
			UPDATE jobs SET state = 'ready', result = 'done' WHERE id = :n;
			COMMIT;
		EOF
		cat >"$S/claim_plain.sql" <<-'EOF'
			\set n random(0, :pool / 64 - 1) * 64 + :client_id + 1
			UPDATE jobs_plain SET state = 'running', tok = :n WHERE id = :n AND state = 'ready' RETURNING tok \gset
			BEGIN;
			SELECT set_config('fencing.token', :tok::text, true);
			UPDATE jobs_plain SET state = 'ready', result = 'done' WHERE id = :n;
			COMMIT;
		EOF
		cat >"$S/claim_trig.sql" <<-'EOF'
			\set n random(0, :pool / 64 - 1) * 64 + :client_id + 1
			UPDATE jobs_trig SET state = 'running', tok = :n WHERE id = :n AND state = 'ready' RETURNING tok \gset
			BEGIN;
			SELECT set_config('fencing.token', :tok::text, true);
			UPDATE jobs_trig SET state = 'ready', result = 'done' WHERE id = :n;
			COMMIT;
		EOF
		cat >"$S/sem8.sql" <<-'EOF'
			\set n random(1, :pool / 8)
			SELECT coalesce(fencing.semaphore_acquire('s' || :n, 'c' || :client_id, 8, '1 minute'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('s' || :n, :tok);
			\endif
		EOF
		;;
	run)
		# $4 fsync, $5 clients, $6 round
		Q -c "ALTER SYSTEM SET fsync = $4" -c "SELECT pg_reload_conf()" >/dev/null
		[ "$(Q -c 'SHOW fsync')" = "$4" ] || { sleep 1; [ "$(Q -c 'SHOW fsync')" = "$4" ]; }
		before=$(Q -c "SELECT coalesce(sum(acquires - releases), 0) FROM fencing.leases")
		rm -f "$W"/mix.*
		args=()
		for c in $CONTENDERS; do args+=(-f "$W/scripts/$c.sql@1"); done
		load0=$(cut -d' ' -f1 /proc/loadavg)
		pgbench -n -M prepared -c "$5" -j 2 -T "$DUR" -D pool="$POOL" \
			-l --log-prefix="$W/mix" "${args[@]}" >"$W/pgbench.out" 2>&1 ||
			{ cat "$W/pgbench.out" >&2; exit 1; }
		load1=$(cut -d' ' -f1 /proc/loadavg)
		if grep -q '^number of failed transactions: [1-9]' "$W/pgbench.out" ||
			grep -q 'aborted' "$W/pgbench.out"; then
			cat "$W/pgbench.out" >&2
			exit 1
		fi
		after=$(Q -c "SELECT coalesce(sum(acquires - releases), 0) FROM fencing.leases")
		# every granted lease was released
		[ "$before" = "$after" ] || { echo "acquires - releases moved from $before to $after" >&2; exit 1; }
		if grep -q ERROR "$W/server.log"; then
			grep ERROR "$W/server.log" >&2
			exit 1
		fi
		# per script: n, mean, median, 5%-trimmed mean, p99 (us)
		cat "$W"/mix.* | python3 -c '
import sys, statistics
names = sys.argv[1].split()
lat = {}
for line in sys.stdin:
    f = line.split()
    lat.setdefault(int(f[3]), []).append(int(f[2]))
for i, name in enumerate(names):
    v = sorted(lat.get(i, []))
    n = len(v)
    k = n // 20
    t = v[k:n - k] or v
    print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], name, str(n),
        "%.1f" % statistics.fmean(v), "%.1f" % statistics.median(v),
        "%.1f" % statistics.fmean(t), "%.1f" % v[min(n - 1, n * 99 // 100)],
        sys.argv[5]]))
' "$CONTENDERS" "$4" "$5" "$6" "$load0-$load1"
		;;
	stop)
		pg_ctl -D "$D" -m fast -w stop >/dev/null 2>&1 || true
		;;
	esac
	exit 0
fi

cd "$(dirname "$0")/.."
top=$PWD
. test/deps.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (the cluster runs as postgres)" >&2; exit 1; }
command -v pgbench >/dev/null || fencing_install_deps
work=$(mktemp -d /tmp/fencing-floor-bench.XXXXXX)
chmod 755 "$work"
cleanup() {
	[ -f "$work/port" ] && fencing_as_postgres env CONTENDERS="$CONTENDERS" bash "$work/floor.sh" --inner "$work" stop
	rm -rf "$work"
}
trap cleanup EXIT
cp bench/floor.sh bench/cluster_settings.sh bench/plain_lease.sql "$work/"

# the extension of this tree (or of REF), into a private relocated copy
src=$work/src
mkdir -p "$src"
if [ -n "${REF:-}" ]; then
	git archive "$REF" | tar -x -C "$src"
	what="$(git rev-parse --short "$REF")"
else
	tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
		--exclude=tmp_check --exclude=results -cf - . | tar -xf - -C "$src"
	what="$(git describe --always --dirty 2>/dev/null || echo '?')"
fi
exec 9>>/tmp/fencing-build.lock
flock 9
fencing_private_install "$work/inst"
flock -u 9
(cd "$src" && make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" \
	PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" >/dev/null &&
	make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null)
echo $((20000 + RANDOM % 20000)) >"$work/port"
chown -R postgres:postgres "$work"
inner() {
	fencing_as_postgres env POOL="$POOL" DUR="$DUR" CONTENDERS="$CONTENDERS" \
		SHARED_BUFFERS="$SHARED_BUFFERS" FENCING_PG_MAJOR="$FENCING_PG_MAJOR" CONF="$CONF" \
		bash "$work/floor.sh" --inner "$work" "$@"
}
echo "== setting up ($POOL names per contender)" >&2
inner start
date=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "${BENCH_OUT:-bench/out}"
base=${BENCH_OUT:-bench/out}/floor-$date${TAG:+-$TAG}
tsv=$base.tsv
: >"$tsv"
for fs in $FSYNCS; do
	for c in $CLIENTS; do
		# a short warm-up run, not measured
		inner run "$fs" "$c" 0 >/dev/null
		for r in $(seq 1 "$ROUNDS"); do
			inner run "$fs" "$c" "$r" | tee -a "$tsv" >&2
		done
	done
done

python3 - "$tsv" "$base" "$what" "$ROUNDS" "$DUR" "$POOL" "$CONTENDERS" \
	"$(nproc)" "$("$FENCING_PG_BINDIR/pg_config" --version)" "$CONF" <<'PY'
import sys, statistics, collections, subprocess, os
tsv, base, what, rounds, dur, pool, contenders, cpus, pgv, conf = sys.argv[1:]
contenders = contenders.split()
rows = [l.rstrip("\n").split("\t") for l in open(tsv) if l.strip()]
# (fsync, clients, round) -> contender -> (n, mean, median, trimmed, p99)
runs = collections.defaultdict(dict)
loads = []
for fs, c, r, name, n, mean, med, trim, p99, load in rows:
    runs[(fs, int(c), int(r))][name] = (int(n), float(mean), float(med), float(trim), float(p99))
    loads.append(load)
cells = sorted({(fs, c) for fs, c, r in runs}, key=lambda x: (x[0] != "off", x[1]))
others = [c for c in contenders if c != "lease"]
out = []
p = out.append
p(f"# The lease cycle against the floor, {os.path.basename(base)}\n")
p(f"bench/floor.sh: extension {what}, {pgv}, {cpus} CPUs; mixed pgbench runs "
  f"(-M prepared, weight 1 per contender), {rounds} rounds of {dur} s per cell after a "
  f"warm-up run, random names out of {pool}; synchronous_commit = on; "
  + (f"extra settings: {conf!r}; " if conf.strip() else "") +
  f"load average (start-end of each run): {', '.join(loads)}.\n")
p("Speed of the lease cycle relative to each contender: the contender's mean latency "
  "/ the lease cycle's, in the same run (1.00 = as fast, above = faster). Median of the "
  "per-round ratios, then min-max. Goals: >= 1.00 against plain, >= 0.97 against floor.\n")
hdr = "| fsync | clients | " + " | ".join(f"vs {o}" for o in others) + " |"
p(hdr)
p("|" + "---|" * (2 + len(others)))
summary = {}
for fs, c in cells:
    rs = sorted(r for (f2, c2, r) in runs if (f2, c2) == (fs, c))
    cols = []
    for o in others:
        ratios = [runs[(fs, c, r)][o][1] / runs[(fs, c, r)]["lease"][1] for r in rs]
        m = statistics.median(ratios)
        summary[(fs, c, o)] = (m, min(ratios), max(ratios))
        goal = {"plain": 1.0, "floor": 0.97}.get(o)
        mark = "" if goal is None else (" met" if m >= goal else " **missed**")
        cols.append(f"{m:.3f} ({min(ratios):.3f}-{max(ratios):.3f}){mark}")
    p(f"| {'off' if fs == 'off' else 'on (durable)'} | {c} | " + " | ".join(cols) + " |")
p("\nLatency per cycle in microseconds, median over the rounds: mean / median / 5%-trimmed mean / p99, and cycles per run:\n")
p("| fsync | clients | " + " | ".join(contenders) + " |")
p("|" + "---|" * (2 + len(contenders)))
for fs, c in cells:
    rs = sorted(r for (f2, c2, r) in runs if (f2, c2) == (fs, c))
    cols = []
    for name in contenders:
        v = [runs[(fs, c, r)][name] for r in rs]
        med = lambda i: statistics.median(x[i] for x in v)
        cols.append(f"{med(1):.0f} / {med(2):.0f} / {med(3):.0f} / {med(4):.0f}; {med(0):.0f}")
    p(f"| {fs} | {c} | " + " | ".join(cols) + " |")
if all(x in contenders for x in ("claim", "claim_plain", "claim_trig")):
    p("\nThe claim cycle with fencing's triggers (claim) against the same queue without "
      "triggers (claim_plain; goal >= 0.97) and with two triggers of the same WHEN clauses "
      "calling PostgreSQL's suppress_redundant_updates_trigger (claim_trig: PostgreSQL's "
      "trigger machinery alone); and claim_trig against claim_plain. Contender latency / "
      "the other's, median of the rounds (min-max):\n")
    p("| fsync | clients | claim vs claim_plain | claim vs claim_trig | claim_trig vs claim_plain |")
    p("|---|---|---|---|---|")
    for fs, c in cells:
        rs = sorted(r for (f2, c2, r) in runs if (f2, c2) == (fs, c))
        cols = []
        for num, den in (("claim_plain", "claim"), ("claim_trig", "claim"), ("claim_plain", "claim_trig")):
            ratios = [runs[(fs, c, r)][num][1] / runs[(fs, c, r)][den][1] for r in rs]
            cols.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")
        p(f"| {fs} | {c} | " + " | ".join(cols) + " |")
p("\nEvery round: lease-cycle mean latency and each ratio:\n")
for (fs, c, r), d in sorted(runs.items(), key=lambda x: (x[0][0] != "off", x[0][1], x[0][2])):
    p(f"- fsync {fs}, {c} clients, round {r}: lease {d['lease'][1]:.0f} us; " +
      ", ".join(f"{o} {d[o][1] / d['lease'][1]:.3f}" for o in others))
open(base + ".md", "w").write("\n".join(out) + "\n")
print("\n".join(out))
# the plot: ratio per cell and contender, with the goals
dat = base + ".dat"
with open(dat, "w") as f:
    for fs, c in cells:
        f.write(f"\"fsync {fs}, {c} cl\" " +
                " ".join(f"{summary[(fs, c, o)][0]:.4f} {summary[(fs, c, o)][1]:.4f} {summary[(fs, c, o)][2]:.4f}"
                         for o in others) + "\n")
gp = ["set terminal png size 900,500",
      f"set output '{base}.png'",
      "set title 'lease cycle speed relative to each contender (contender latency / lease latency)'",
      "set style data histogram", "set style histogram errorbars gap 2 lw 1",
      "set style fill solid 0.6 border -1", "set yrange [0:1.3]", "set grid ytics",
      "set key outside right",
      "set arrow from graph 0, first 1.0 to graph 1, first 1.0 nohead dt 2 lc rgb 'black'",
      "set arrow from graph 0, first 0.97 to graph 1, first 0.97 nohead dt 3 lc rgb 'red'"]
plots = [f"'{dat}' using {2 + 3 * i}:{3 + 3 * i}:{4 + 3 * i}:xtic(1) title 'vs {o}'" for i, o in enumerate(others)]
gp.append("plot " + ", ".join(plots))
try:
    subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)
    os.unlink(dat)
except (OSError, subprocess.CalledProcessError) as e:
    print(f"no plot: {e}", file=sys.stderr)
PY
echo "report: $base.md" >&2
