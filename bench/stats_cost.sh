#!/usr/bin/env bash
# bench/stats_cost.sh: what the counters of src/stats.c cost in the lease
# cycle.
#
#   sudo bench/stats_cost.sh [BASE]      # about 12 minutes
#
# Builds fencing twice, each into a private copy of the PostgreSQL 15
# server (never the system's): this checkout, whose counters count
# (fencing in shared_preload_libraries), and BASE (default 83fed51, the
# last commit without counters).  Then runs the lease cycle of bench/run.sh
# (acquire + release, 1000 names, pgbench -M prepared) against a throwaway
# cluster of each, one cluster at a time and alternating which goes first,
# at 8 and 64 clients, durable (fsync = on) and with fsync = off;
# synchronous_commit stays on, so every commit waits for its WAL flush.
# Writes bench/out/stats-cost-<date>.md: tps per run, the median of
# each side, and the ratio counters/base of each round (the two runs of a
# round are back to back, so a change of the machine's load between rounds
# cancels out of it) with their median and range.
#
# Throughput on a shared, loaded machine is noisy; so each side also runs
# a fixed number of lease cycles (CPU_TX, 8 clients, fsync = off) and the
# report gives the CPU time its backends used per cycle (the postmaster's
# reaped children's user + system time, /proc/PID/stat), which other load
# hardly changes.
#
# ROUNDS (default 8) and DUR (seconds, default 8) set the size; CPU_TX
# (default 40000) and CPU_ROUNDS (default 6) the CPU measure.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
top=$PWD
BASE=${1:-83fed51}
: "${ROUNDS:=8}" "${DUR:=8}" "${POOL:=1000}" "${CPU_TX:=40000}" "${CPU_ROUNDS:=6}"
export ROUNDS DUR POOL CPU_TX CPU_ROUNDS

[ "$(id -u)" -eq 0 ] || { echo "stats_cost.sh: run as root (it builds into private server copies and runs clusters as postgres)" >&2; exit 2; }
. test/deps.sh
fencing_install_deps

work=$(mktemp -d /tmp/fencing-stats-cost.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

# two private installations, each with its build
for side in counters base; do
	(
		mkdir -p "$work/$side/inst" "$work/$side/src"
		if [ $side = counters ]; then
			tar --exclude=.git -cf - . | tar -xf - -C "$work/$side/src"
		else
			git archive "$BASE" | tar -xf - -C "$work/$side/src"
		fi
		fencing_private_install "$work/$side/inst"
		cd "$work/$side/src"
		fencing_build_install "" >/dev/null
		echo "$FENCING_PG_BINDIR" >"$work/$side/bindir"
	)
done
commit=$(git rev-parse --short HEAD)
base_commit=$(git rev-parse --short "$BASE")
chown -R postgres:postgres "$work"

inner() {
	set -euo pipefail
	local W=$1 PORT side fsync round clients order tps
	cd "$W"
	. "$2/bench/cluster_settings.sh"
	SHARED_BUFFERS=512MB
	cat >"$W/lease.sql" <<-'EOF'
		\set n random(1, :pool)
		SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
		\if :tok > 0
		SELECT fencing.lease_release('l' || :n, :tok);
		\endif
	EOF
	printf 'fsync\tclients\tround\tside\ttps\n' >"$W/runs.tsv"
	for fsync in on off; do
		FSYNC=$fsync
		PORT=5432
		for side in counters base; do
			local bin D
			bin=$(cat "$W/$side/bindir")
			D=$W/$side/data
			rm -rf "$D"
			"$bin/initdb" -D "$D" -A trust -U postgres --no-sync -E UTF8 --locale=C >/dev/null
			bench_cluster_settings "stats_cost $side" 100 >>"$D/postgresql.conf"
			[ $side = counters ] && echo "shared_preload_libraries = 'fencing'" >>"$D/postgresql.conf"
		done
		for round in $(seq 1 "$ROUNDS"); do
			for clients in 8 64; do
				order="counters base"
				[ $((round % 2)) = 0 ] && order="base counters"
				for side in $order; do
					local bin D
					bin=$(cat "$W/$side/bindir")
					D=$W/$side/data
					"$bin/pg_ctl" -D "$D" -l "$W/$side/server.log" -w start >/dev/null
					if [ ! -f "$W/$side/ready.$fsync" ]; then
						"$bin/psql" -X -q -h "$W" -p $PORT -d postgres -c "CREATE EXTENSION fencing" \
							-c "SELECT count(fencing.lease_release('l' || g, fencing.lease_acquire('l' || g, 'init', '1 minute'))) FROM generate_series(1, $POOL) g" >/dev/null
						touch "$W/$side/ready.$fsync"
					fi
					tps=$("$bin/pgbench" -h "$W" -p $PORT -n -M prepared -c "$clients" -j 2 -D pool="$POOL" \
						-T "$DUR" -f "$W/lease.sql" postgres 2>&1 |
						sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p')
					printf '%s\t%s\t%s\t%s\t%s\n' "$fsync" "$clients" "$round" "$side" "${tps:-0}" >>"$W/runs.tsv"
					"$bin/pg_ctl" -D "$D" -m fast -w stop >/dev/null
				done
			done
		done
	done
	# CPU per lease cycle: the backends' CPU time, reaped by the postmaster
	printf 'round\tside\tcpu_us_per_tx\n' >"$W/cpu.tsv"
	local ticks
	ticks=$(getconf CLK_TCK)
	for round in $(seq 1 "$CPU_ROUNDS"); do
		order="counters base"
		[ $((round % 2)) = 0 ] && order="base counters"
		for side in $order; do
			local bin D pm c0 c1
			bin=$(cat "$W/$side/bindir")
			D=$W/$side/data
			"$bin/pg_ctl" -D "$D" -l "$W/$side/server.log" -w start >/dev/null
			pm=$(head -n1 "$D/postmaster.pid")
			c0=$(awk '{ print $16 + $17 }' "/proc/$pm/stat")
			"$bin/pgbench" -h "$W" -p 5432 -n -M prepared -c 8 -j 2 -D pool="$POOL" \
				-t $((CPU_TX / 8)) -f "$W/lease.sql" postgres >/dev/null 2>&1
			# the backends have exited and been reaped once none is left
			until [ "$("$bin/psql" -X -At -h "$W" -p 5432 -d postgres -c \
				"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" = 0 ]; do
				sleep 0.1
			done
			sleep 0.5
			c1=$(awk '{ print $16 + $17 }' "/proc/$pm/stat")
			printf '%s\t%s\t%s\n' "$round" "$side" \
				"$(awk -v a="$c0" -v b="$c1" -v t="$ticks" -v n="$CPU_TX" 'BEGIN { printf "%.1f", (b - a) / t * 1e6 / n }')" >>"$W/cpu.tsv"
			"$bin/pg_ctl" -D "$D" -m fast -w stop >/dev/null
		done
	done

	# the counters counted: a check that the build under test really counts
	local bin
	bin=$(cat "$W/counters/bindir")
	"$bin/pg_ctl" -D "$W/counters/data" -l "$W/counters/server.log" -w start >/dev/null
	"$bin/psql" -X -q -h "$W" -p 5432 -d postgres -c "SELECT fencing.lease_acquire('check', 'c', '1 s') IS NOT NULL" >/dev/null
	"$bin/psql" -X -At -h "$W" -p 5432 -d postgres -c "SELECT counting AND acquires = 1 FROM fencing_monitor.stats_info, fencing_monitor.stats" >"$W/counted"
	"$bin/pg_ctl" -D "$W/counters/data" -m fast -w stop >/dev/null
}

export -f inner
runuser -u postgres -- bash -c "inner '$work' '$top'"

[ "$(cat "$work/counted")" = t ] || { echo "stats_cost.sh: the counters build did not count" >&2; exit 1; }

mkdir -p "${BENCH_OUT:-bench/out}"
out=${BENCH_OUT:-bench/out}/stats-cost-$(date -u +%Y%m%d-%H%M%S).md
python3 - "$work/runs.tsv" "$commit" "$base_commit" "$ROUNDS" "$DUR" "$work/cpu.tsv" "$CPU_TX" >"$out" <<'PY'
import csv, statistics, sys, datetime, os
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
commit, base, rounds, dur = sys.argv[2:6]
cpu = list(csv.DictReader(open(sys.argv[6]), delimiter='\t'))
cpu_tx = sys.argv[7]
print(f"# What the counters cost: the lease cycle with and without them\n")
print(f"Run of bench/stats_cost.sh on {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, "
      f"{os.cpu_count()} CPUs, load average at the end {open('/proc/loadavg').read().split()[0]}. "
      f"PostgreSQL 15; counters = this checkout ({commit}) with fencing in "
      f"shared_preload_libraries; base = {base}, without counters. "
      f"{rounds} rounds of {dur} s per cell, the two sides alternating; "
      f"lease cycle = acquire + release over 1000 names, synchronous_commit = on.\n")
print("| fsync | clients | counters tps (median) | base tps (median) | ratio of medians | ratio per round: median (min-max) | runs counters | runs base |")
print("|---|---|---|---|---|---|---|---|")
for fsync in ("on", "off"):
    for clients in ("8", "64"):
        side = {s: {r["round"]: float(r["tps"]) for r in rows
                    if r["fsync"] == fsync and r["clients"] == clients and r["side"] == s}
                for s in ("counters", "base")}
        mc, mb = statistics.median(side["counters"].values()), statistics.median(side["base"].values())
        ratios = [side["counters"][k] / side["base"][k] for k in side["base"] if side["base"][k] > 0]
        print(f"| {fsync} | {clients} | {mc:.0f} | {mb:.0f} | {mc / mb:.3f} | "
              f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
              f"{', '.join(f'{x:.0f}' for x in side['counters'].values())} | "
              f"{', '.join(f'{x:.0f}' for x in side['base'].values())} |")
c = {s: [float(r["cpu_us_per_tx"]) for r in cpu if r["side"] == s] for s in ("counters", "base")}
mc, mb = statistics.median(c["counters"]), statistics.median(c["base"])
print(f"\nCPU time of the backends per lease cycle ({cpu_tx} cycles a run, 8 clients, fsync = off):\n")
print("| counters µs (median) | base µs (median) | ratio | runs counters | runs base |")
print("|---|---|---|---|---|")
print(f"| {mc:.1f} | {mb:.1f} | {mc / mb:.3f} | {', '.join(f'{x:.1f}' for x in c['counters'])} | "
      f"{', '.join(f'{x:.1f}' for x in c['base'])} |")
PY
cat "$out"
echo "wrote $out"
