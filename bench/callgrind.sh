#!/usr/bin/env bash
# bench/callgrind.sh: instructions per cycle, counted by callgrind, which
# the load of a shared machine does not change: for comparing two builds
# of the extension, and for a profile of where a cycle's instructions go.
#
# The server runs under valgrind --tool=callgrind (every process it forks
# is followed); one pgbench client (-M prepared, fixed random seed) runs a
# contender's script N1 times in one session and N2 times in another, and
# (Ir of the second backend - Ir of the first) / (N2 - N1) is the cost of
# one cycle, without the session's start and end.  Per function likewise:
# inclusive and self Ir per cycle from callgrind_annotate of both.
#
# fencing.max_clock_lag is 1 hour: at valgrind's speed the clock floor's
# raises (token.c) would come every few cycles, depending on the load.
#
# Contenders (names out of POOL, autovacuum off, one client):
#   lease   lease_acquire + lease_release, as bench/floor.sh
#   plain   the plain-SQL lease, as bench/floor.sh
#   floor   two single-row UPDATEs by key, one per transaction
#   rtt     two SELECT 1
#   write   lease_acquire + a fenced UPDATE (fence_advance) + lease_release
#   beat    a holder's heartbeat: UPDATE ... SET fence =
#           fence_advance(fence, token, true) with the token the row was
#           already fenced with (the fence does not move)
#   sem8    semaphore_acquire(name, holder, 8, ...) + lease_release
#   claim, claim_plain  a job claimed and completed with an UPDATE each, on a
#           table with fencing's claim_stamp and claim_guard triggers and on
#           one without
#
#   sudo bench/callgrind.sh                    # this tree, PostgreSQL 15
#   BASE=c377ece sudo bench/callgrind.sh       # and that commit, compared
#   PG=18 sudo bench/callgrind.sh              # the matrix's server build
#                                              # (not stripped: static
#                                              # functions have names)
#   CONTENDERS="lease floor" PROFILE=lease sudo bench/callgrind.sh
#
# Writes bench/out/callgrind-<date>.md.
set -euo pipefail
export LC_ALL=C
: "${PG:=15}" "${N1:=200}" "${N2:=1200}" "${POOL:=20000}"
: "${CONTENDERS:=lease plain floor rtt write beat sem8 claim claim_plain}" "${PROFILE:=lease}"
: "${TOP:=45}" "${TAG:=}" "${FUNCS:=}"

if [ "${1:-}" = "--inner" ]; then
	# as postgres: $2 = work dir, $3 = build, $4 = action
	W=$2 B=$3
	export PATH="$W/$B/bin:$PATH"
	D=$W/data
	PORT=$(cat "$W/port")
	export PGHOST=$W PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
	Q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
	case $4 in
	init)
		initdb -D "$D" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
		cat >>"$D/postgresql.conf" <<-EOF
			listen_addresses = ''
			unix_socket_directories = '$W'
			port = $PORT
			fsync = off
			synchronous_commit = on
			shared_buffers = 256MB
			max_wal_size = 8GB
			checkpoint_timeout = 1h
			autovacuum = off
			jit = off
			log_min_messages = warning
			log_connections = on
			log_line_prefix = '[%p] '
			# under valgrind a cycle takes milliseconds, and the token
			# counter would lag the clock by 10 ms every few cycles: no
			# raise to the clock here (at full speed, one per 10 ms of real
			# time is one per hundreds of cycles)
			fencing.max_clock_lag = '1h'
		EOF
		pg_ctl -D "$D" -l "$W/server.log" -w -t 120 start >/dev/null
		Q -f "$W/plain_lease.sql"
		Q <<-SQL
			CREATE EXTENSION fencing;
			CREATE TABLE floor_t (name text PRIMARY KEY, holder text NOT NULL,
			  token bigint NOT NULL, expires_at timestamptz NOT NULL) WITH (fillfactor = 70);
			INSERT INTO floor_t SELECT 'l' || g, 'init', g, clock_timestamp() FROM generate_series(1, $POOL) g;
			INSERT INTO plain_lease.leases
			  SELECT 'l' || g, 'init', nextval('plain_lease.token_seq'), clock_timestamp()
			  FROM generate_series(1, $POOL) g;
			CREATE TABLE res (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0, fence bigint) WITH (fillfactor = 50);
			INSERT INTO res (id) SELECT g FROM generate_series(1, $POOL) g;
			CREATE TABLE beat_res (LIKE res INCLUDING ALL) WITH (fillfactor = 50);
			INSERT INTO beat_res (id) SELECT g FROM generate_series(1, $POOL) g;
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
			-- the heartbeat's lease, held for the whole run
			CREATE TABLE beat_token AS SELECT fencing.lease_acquire('beat', 'b', '1 day') AS tok;
			UPDATE beat_res SET fence = (SELECT tok FROM beat_token);
		SQL
		Q -c "VACUUM ANALYZE" -c "CHECKPOINT"
		Q -c "SELECT tok FROM beat_token" >"$W/beat_token"
		pg_ctl -D "$D" -w stop >/dev/null
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
		cat >"$S/rtt.sql" <<-'EOF'
			SELECT 1;
			SELECT 1;
		EOF
		cat >"$S/write.sql" <<-'EOF'
			\set n random(1, :pool)
			SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
			UPDATE res SET v = v + 1, fence = fencing.fence_advance(fence, :tok, true) WHERE id = :n;
			SELECT fencing.lease_release('l' || :n, :tok);
		EOF
		cat >"$S/beat.sql" <<-'EOF'
			\set n random(1, :pool)
			UPDATE beat_res SET v = v + 1, fence = fencing.fence_advance(fence, :tok, true) WHERE id = :n;
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
		cat >"$S/sem8.sql" <<-'EOF'
			\set n random(1, :pool / 8)
			SELECT coalesce(fencing.semaphore_acquire('s' || :n, 'c' || :client_id, 8, '1 minute'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('s' || :n, :tok);
			\endif
		EOF
		;;
	start)
		valgrind --tool=callgrind --callgrind-out-file="$W/cg/$B.%p" \
			postgres -D "$D" >"$W/server.log" 2>&1 &
		for _ in $(seq 1 300); do
			pg_isready -q -h "$W" -p "$PORT" && break
			sleep 0.5
		done
		pg_isready -q -h "$W" -p "$PORT"
		# pg_isready's backends have written their files
		sleep 5
		;;
	run)
		# $5 contender, $6 transactions
		PGAPPNAME=cg_$5_$6 pgbench -n -M prepared -c 1 -t "$6" --random-seed=1 -D pool="$POOL" -D tok="$(cat "$W/beat_token")" \
			-f "$W/scripts/$5.sql" >"$W/pgbench.out" 2>&1 || { cat "$W/pgbench.out" >&2; exit 1; }
		grep -q "^number of transactions actually processed: $6/$6" "$W/pgbench.out" ||
			{ cat "$W/pgbench.out" >&2; exit 1; }
		# the backend that ran them: pgbench's last connection
		sed -n "s/^\[\([0-9]*\)\] LOG:  connection authorized: .*application_name=cg_$5_$6\$/\1/p" \
			"$W/server.log" | tail -n1
		;;
	stop)
		pg_ctl -D "$D" -w -t 300 stop >/dev/null 2>&1 || true
		;;
	esac
	exit 0
fi

cd "$(dirname "$0")/.."
. test/deps.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (the cluster runs as postgres)" >&2; exit 1; }
command -v valgrind >/dev/null || apt-get install -y valgrind >/dev/null
work=$(mktemp -d /tmp/fencing-callgrind.XXXXXX)
chmod 755 "$work"
builds="head${BASE:+ base}"
cleanup() {
	for b in $builds; do
		[ -d "$work/$b" ] && fencing_as_postgres bash "$work/callgrind.sh" --inner "$work" "$b" stop
	done
	[ -n "${KEEP:-}" ] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
cp bench/callgrind.sh bench/plain_lease.sql "$work/"
mkdir -p "$work/cg"

# each build: a private copy of the server with the extension installed
for b in $builds; do
	mkdir -p "$work/$b.src"
	if [ "$b" = base ]; then
		git archive "$BASE" | tar -x -C "$work/$b.src"
	else
		tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
			--exclude=tmp_check --exclude=results -cf - . | tar -xf - -C "$work/$b.src"
	fi
	if [ "$PG" = 15 ]; then
		exec 9>>/tmp/fencing-build.lock
		flock 9
		fencing_private_install "$work/$b.inst"
		flock -u 9
		ln -s "$work/$b.inst/usr/lib/postgresql/15" "$work/$b"
	else
		cp -a "/var/cache/fencing-pg/$PG" "$work/$b"
	fi
	(cd "$work/$b.src" && make -s PG_CONFIG="$work/$b/bin/pg_config" \
		PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -g" >/dev/null &&
		make -s PG_CONFIG="$work/$b/bin/pg_config" install >/dev/null)
done
head_what=$(git describe --always --dirty 2>/dev/null || echo '?')
base_what=${BASE:+$(git rev-parse --short "$BASE")}
echo $((20000 + RANDOM % 20000)) >"$work/port"
chown -R postgres:postgres "$work"
inner() { fencing_as_postgres env POOL="$POOL" bash "$work/callgrind.sh" --inner "$work" "$@"; }
echo "== setting up" >&2
inner head init

# a backend's file appears when it exits: wait for it to be complete
backend_file() {	# $1 = build, $2 = pid
	local f=$work/cg/$1.$2
	for _ in $(seq 1 600); do
		grep -q '^totals:' "$f" 2>/dev/null && { echo "$f"; return; }
		sleep 0.5
	done
	echo "no callgrind output for backend $2" >&2
	return 1
}

tsv=$work/ir.tsv
: >"$tsv"
for b in $builds; do
	inner "$b" start
	for c in $CONTENDERS; do
		for n in "$N1" "$N2"; do
			pid=$(inner "$b" run "$c" "$n")
			f=$(backend_file "$b" "$pid")
			cp "$f" "$work/cg/keep.$b.$c.$n"
			ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$f")
			printf '%s\t%s\t%s\t%s\n' "$b" "$c" "$n" "$ir" | tee -a "$tsv" >&2
		done
	done
	inner "$b" stop
done

date=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "${BENCH_OUT:-bench/out}"
out=${BENCH_OUT:-bench/out}/callgrind-$date${TAG:+-$TAG}.md
for b in $builds; do
	for n in "$N1" "$N2"; do
		f=$work/cg/keep.$b.$PROFILE.$n
		[ -f "$f" ] || continue
		callgrind_annotate --auto=no --inclusive=yes --threshold=100 "$f" >"$f.incl" 2>/dev/null || true
		callgrind_annotate --auto=no --inclusive=no --threshold=100 "$f" >"$f.self" 2>/dev/null || true
	done
done
python3 - "$tsv" "$work/cg" "$N1" "$N2" "$PROFILE" "$TOP" "$head_what" "$base_what" \
	"$("$work/head/bin/pg_config" --version)" "$CONTENDERS" "$FUNCS" >"$out" <<'PY'
import sys, re, os, collections
tsv, cg, n1, n2, prof, top, head, base, pgv, contenders, funcs = sys.argv[1:]
n1, n2, top = int(n1), int(n2), int(top)
ir = collections.defaultdict(dict)
for line in open(tsv):
    b, c, n, v = line.split()
    ir[(b, c)][int(n)] = int(v)
per = {k: (v[n2] - v[n1]) / (n2 - n1) for k, v in ir.items()}
builds = ["head"] + (["base"] if base else [])
print(f"# Instructions per cycle (callgrind), {pgv}\n")
print(f"bench/callgrind.sh: head = {head}" + (f", base = {base}" if base else "") +
      f"; one client, -M prepared, (Ir({n2} cycles) - Ir({n1} cycles)) / {n2 - n1} of the "
      f"backend; fsync off, synchronous_commit on, names out of a pool.\n")
print("| contender | " + " | ".join(f"{b} Ir/cycle" for b in builds) +
      (" | head / base |" if base else " |") + " head / floor |")
print("|---|" + "---|" * (len(builds) + (2 if base else 1)))
for c in contenders.split():
    cells = [f"{per[(b, c)]:,.0f}" for b in builds]
    if base:
        cells.append(f"{per[('head', c)] / per[('base', c)]:.4f}")
    cells.append(f"{per[('head', c)] / per[('head', 'floor')]:.3f}" if ('head', 'floor') in per else "")
    print(f"| {c} | " + " | ".join(cells) + " |")

def parse(path):
    d = {}
    if not os.path.exists(path):
        return d
    for line in open(path):
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)(?:\s+\[.*\])?\s*$", line)
        if m and ":" in m.group(2):
            d[m.group(2)] = d.get(m.group(2), 0) + int(m.group(1).replace(",", ""))
    return d

if funcs:
    # the named functions' inclusive cost per cycle, build by build
    per_build = {}
    for b in builds:
        a = parse(f"{cg}/keep.{b}.{prof}.{n1}.incl")
        z = parse(f"{cg}/keep.{b}.{prof}.{n2}.incl")
        short = {}
        for k in set(a) | set(z):
            fn = k.split(":", 1)[1]
            short[fn] = short.get(fn, 0) + (z.get(k, 0) - a.get(k, 0)) / (n2 - n1)
        per_build[b] = short
    print(f"\n## {prof}: inclusive Ir per cycle of chosen functions\n")
    print("| function | " + " | ".join(builds) + " |")
    print("|---|" + "---:|" * len(builds))
    for fn in funcs.split():
        print(f"| `{fn}` | " + " | ".join(f"{per_build[b].get(fn, 0):,.0f}" for b in builds) + " |")

for b in builds:
    for kind, title in (("incl", "inclusive"), ("self", "self")):
        a = parse(f"{cg}/keep.{b}.{prof}.{n1}.{kind}")
        z = parse(f"{cg}/keep.{b}.{prof}.{n2}.{kind}")
        if not z:
            continue
        diff = {k: (z.get(k, 0) - a.get(k, 0)) / (n2 - n1) for k in z}
        rows = sorted(diff.items(), key=lambda x: -x[1])[:top]
        print(f"\n## {prof}, {b}: {title} Ir per cycle, top {top}\n")
        print("| Ir/cycle | function |")
        print("|---:|---|")
        for k, v in rows:
            k = re.sub(r"^.*/", "", k)
            print(f"| {v:,.0f} | `{k}` |")
PY
cat "$out"
echo "report: $out" >&2
