#!/usr/bin/env bash
# bench/clock_floor.sh: what the clock floor of the token source costs
# (docs/tokens.md, "A primary that comes back").  Builds the extension
# twice, from a base commit (83fed51 by default: no clock floor, no band
# lock) and from this checkout, into two private copies of the server
# installation, and runs the same pgbench scripts against one cluster,
# restarted with one build or the other, alternating builds over rounds
# (so that drift of the machine falls on both alike), with fsync off and
# on.  The new build runs twice: with fencing.max_clock_lag at 10 ms
# ("after", the default until 0603db2) and at 100 ms ("after100", the
# default since).  Scripts, 8 clients, 1000 lease names:
#   cycle   acquire + release (the lease cycle of bench/run.sh)
#   write   acquire + a fenced write of the lease's row (fence_advance,
#           which checks the token's band) + release
# Besides tps it reports the server's CPU time per cycle (the postmaster
# and its children, those that exited included), which a loaded machine
# distorts far less than throughput.
# Writes bench/out/clock-floor-<date>.md.
#
#   sudo bench/clock_floor.sh                 # 5 rounds of 10 s each
#   ROUNDS=2 DUR=5 sudo bench/clock_floor.sh  # quick
#   BASE=<commit> sudo bench/clock_floor.sh
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
top=$PWD
. test/deps.sh

: "${BASE:=83fed51}" "${ROUNDS:=5}" "${DUR:=10}" "${CLIENTS:=8}" "${POOL:=1000}"
pgbin=/usr/lib/postgresql/$FENCING_PG_MAJOR
root=$(mktemp -d /tmp/fencing-clock-floor.XXXXXX)
trap 'fencing_as_postgres "$root/after$pgbin/bin/pg_ctl" -D "$root/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$root"' EXIT

# build NAME: the sources in $root/NAME.src, installed into $root/NAME
build() {
	local name=$1
	mkdir -p "$root/$name/usr/lib/postgresql" "$root/$name/usr/share/postgresql"
	cp -a "$pgbin" "$root/$name/usr/lib/postgresql/"
	cp -a "/usr/share/postgresql/$FENCING_PG_MAJOR" "$root/$name/usr/share/postgresql/"
	(cd "$root/$name.src" && make -s PG_CONFIG="$pgbin/bin/pg_config" \
		PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" &&
		make -s PG_CONFIG="$pgbin/bin/pg_config" DESTDIR="$root/$name" install) >/dev/null
}
head=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- src fencing--1.0.sql || head="$head with uncommitted changes"
mkdir -p "$root/before.src" "$root/after.src"
git archive "$BASE" | tar -x -C "$root/before.src"
tar --exclude=.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' -cf - . | tar -xf - -C "$root/after.src"
build before
build after
chown -R postgres:postgres "$root"

PORT=$((20000 + RANDOM % 10000))
W=$root
run() { fencing_as_postgres "$@"; }
run "$root/after$pgbin/bin/initdb" -D "$root/data" -A trust -U postgres --no-sync >/dev/null
cat >>"$root/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$root'
port = $PORT
max_connections = 50
shared_buffers = 256MB
synchronous_commit = on
max_wal_size = 8GB
checkpoint_timeout = 1h
log_min_messages = warning
EOF

inst() { echo "${1%100}"; }	# the installation a configuration runs
start() {	# start CONFIG FSYNC
	local opts=""
	sed -i "/^fsync = /d" "$root/data/postgresql.conf"
	echo "fsync = $2" >>"$root/data/postgresql.conf"
	[ "$1" = after ] && opts="-c fencing.max_clock_lag=10ms"
	[ "$1" = after100 ] && opts="-c fencing.max_clock_lag=100ms"
	run "$root/$(inst "$1")$pgbin/bin/pg_ctl" -D "$root/data" -l "$root/server.log" -o "$opts" -w start >/dev/null
}
stop() { run "$root/$(inst "$1")$pgbin/bin/pg_ctl" -D "$root/data" -w stop >/dev/null; }
psql_() { run "$pgbin/bin/psql" -X -q -h "$root" -p $PORT -U postgres -d postgres "$@"; }
# CPU ticks of the postmaster, of its children that exited, and of those
# that run
srv_cpu() {
	python3 - "$(head -n1 "$root/data/postmaster.pid")" <<'PY'
import os, sys
pm = sys.argv[1]
def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()
f = stat(pm)
total = sum(int(x) for x in f[11:15])	# utime stime cutime cstime
for pid in os.listdir("/proc"):
    if pid.isdigit() and pid != pm:
        try:
            g = stat(pid)
        except OSError:
            continue
        if g[1] == pm:
            total += int(g[11]) + int(g[12])
print(total)
PY
}

start after off
psql_ -c "CREATE EXTENSION fencing" -c "CREATE TABLE res (id int PRIMARY KEY, fence bigint)" \
	-c "INSERT INTO res SELECT g, NULL FROM generate_series(1, $POOL) g"
stop after
cat >"$root/cycle.sql" <<EOF
\set n random(1, $POOL)
SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
SELECT fencing.lease_release('l' || :n, :tok) WHERE :tok > 0;
EOF
cat >"$root/write.sql" <<EOF
\set n random(1, $POOL)
SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
UPDATE res SET fence = fencing.fence_advance(fence, :tok, true) WHERE id = :n AND :tok > 0;
SELECT fencing.lease_release('l' || :n, :tok) WHERE :tok > 0;
EOF
chown postgres "$root"/*.sql

declare -A sum
out=$root/raw.txt
for fs in off on; do
	for r in $(seq 1 "$ROUNDS"); do
		# alternate which build goes first
		order="before after after100"
		[ $((r % 2)) -eq 0 ] && order="after100 after before"
		for b in $order; do
			start "$b" "$fs"
			for s in cycle write; do
				c0=$(srv_cpu)
				run "$pgbin/bin/pgbench" -n -h "$root" -p $PORT -U postgres -c "$CLIENTS" -j 2 \
					-T "$DUR" -f "$root/$s.sql" postgres >"$root/pgbench.out" 2>&1 || true
				sleep 1	# the backends exit and are reaped
				c1=$(srv_cpu)
				tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$root/pgbench.out")
				n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$root/pgbench.out")
				if [ -z "$tps" ] || grep -q 'aborted' "$root/pgbench.out"; then
					cat "$root/pgbench.out"
					exit 1
				fi
				# CPU microseconds per cycle (ticks are 1/100 s)
				us=$(awk -v c=$((c1 - c0)) -v n="$n" 'BEGIN { printf "%.1f", c * 10000 / n }')
				echo "$fs $s $r $b $tps $us" | tee -a "$out"
			done
			stop "$b"
		done
	done
done

date=$(date -u +%Y%m%d-%H%M%S)
mkdir -p "${BENCH_OUT:-$top/bench/out}"
report=${BENCH_OUT:-$top/bench/out}/clock-floor-$date.md
python3 - "$out" "$BASE" "$head" "$ROUNDS" "$DUR" "$CLIENTS" \
	"$(nproc)" "$(uptime | sed 's/.*load average: //')" >"$report" <<'PY'
import sys, statistics, collections
raw, base, head, rounds, dur, clients, cpus, load = sys.argv[1:]
d = collections.defaultdict(list)
cpu = collections.defaultdict(list)
for line in open(raw):
    fs, s, r, b, tps, us = line.split()
    d[(fs, s, b)].append(float(tps))
    cpu[(fs, s, b)].append(float(us))
print("# The clock floor: lease cycle before and after\n")
print(f"bench/clock_floor.sh: {rounds} rounds of {dur} s per build, script and fsync setting, "
      f"{clients} clients, builds alternating; before = {base}, after = {head}; "
      f"{cpus} CPUs, load average at the end {load}.\n")
print("| fsync | script | before | after (10 ms) | after / before | after100 (100 ms) | after100 / before | rounds: before; after; after100 |")
print("|---|---|---|---|---|---|---|---|")
for fs in ("off", "on"):
    for s in ("cycle", "write"):
        b, a, h = d[(fs, s, "before")], d[(fs, s, "after")], d[(fs, s, "after100")]
        mb, ma, mh = statistics.median(b), statistics.median(a), statistics.median(h)
        rounds = "; ".join(" ".join(f"{x:.0f}" for x in v) for v in (b, a, h))
        print(f"| {fs} | {s} | {mb:,.0f} | {ma:,.0f} | {ma / mb:.3f} | {mh:,.0f} | {mh / mb:.3f} | {rounds} |")
print("\ntps = lease cycles (or cycles with a write) per second, median of the rounds.\n")
print("Server CPU time per cycle, in microseconds (median of the rounds; lower is better):\n")
print("| fsync | script | before | after (10 ms) | after / before | after100 (100 ms) | after100 / before | rounds: before; after; after100 |")
print("|---|---|---|---|---|---|---|---|")
for fs in ("off", "on"):
    for s in ("cycle", "write"):
        b, a, h = cpu[(fs, s, "before")], cpu[(fs, s, "after")], cpu[(fs, s, "after100")]
        mb, ma, mh = statistics.median(b), statistics.median(a), statistics.median(h)
        rounds = "; ".join(" ".join(f"{x:.0f}" for x in v) for v in (b, a, h))
        print(f"| {fs} | {s} | {mb:,.0f} | {ma:,.0f} | {ma / mb:.3f} | {mh:,.0f} | {mh / mb:.3f} | {rounds} |")
PY
cat "$report"
echo "report: $report"
