#!/usr/bin/env bash
# bench/wait/run.sh: how fast a waiting lease_acquire gets a lease, and
# what waiting costs.
#
#   sudo bench/wait/run.sh              # about 1.5 minutes
#   HANDOVERS=500 WAITERS=100 sudo bench/wait/run.sh
#
# In a throwaway cluster (pg_virtualenv, as user postgres) a Python driver
# (driver.py, psycopg2) measures:
#  1. handover latency: a waiter asleep in lease_acquire(wait => '30 s'),
#     the holder releases; from the moment the release statement (autocommit,
#     so including its COMMIT) returns to the moment the waiter's acquire
#     returns; also from the moment the release was sent, and on the server
#     clock (release -> the waiter's acquired_at).  $HANDOVERS handovers,
#     the two sessions swapping roles, after 20 uncounted ones;
#  2. wake at expiry: a lease of $TTL_MS ms and a waiter asleep until it
#     expires; the waiter's lateness against expires_at (+ lock_delay), on
#     the server clock (acquired_at) and the client's (acquire returned);
#     $EXPIRIES times, and a quarter of that with lock_delay = 100 ms;
#  3. idle CPU: $WAITERS waiters asleep on one lease for $IDLE_SECONDS s,
#     utime + stime of their backends from /proc/<pid>/stat;
#  4. the holder's lease_renew latency, $RENEWALS calls, with no waiter and
#     with the $WAITERS waiters asleep.
# Targets: handover median <= 1 ms and p99 <= 10 ms; the idle waiters
# < 5 % of one core.
#
# Results: stdout and bench/out/wait-<date>.md.
set -euo pipefail
export LC_ALL=C

HANDOVERS=${HANDOVERS:-200}
EXPIRIES=${EXPIRIES:-100}
TTL_MS=${TTL_MS:-100}
WAITERS=${WAITERS:-50}
IDLE_SECONDS=${IDLE_SECONDS:-10}
RENEWALS=${RENEWALS:-2000}
PYTHON=/usr/bin/python3

# ---------------------------------------------------------------------------
# Part 2 (as postgres, inside pg_virtualenv): the measurements.
# ---------------------------------------------------------------------------
if [ "${1:-}" = "--inner" ]; then
	out=$2
	cd "$(dirname "$0")"
	PSQL="psql -X -q -v ON_ERROR_STOP=1"
	$PSQL -c "CREATE EXTENSION fencing"
	load_before=$(cut -d' ' -f1-3 /proc/loadavg)
	$PYTHON driver.py --handovers "$HANDOVERS" --expiries "$EXPIRIES" --ttl-ms "$TTL_MS" \
		--waiters "$WAITERS" --idle-seconds "$IDLE_SECONDS" --renewals "$RENEWALS" >result.json
	load_after=$(cut -d' ' -f1-3 /proc/loadavg)
	pg_version=$($PSQL -At -c "SELECT version()")
	settings=$($PSQL -At -F ' = ' -c "SELECT name, setting || coalesce(unit, '') FROM pg_settings
		WHERE name IN ('shared_buffers', 'synchronous_commit', 'fsync', 'wal_sync_method',
		               'max_connections', 'jit')
		ORDER BY name")
	export BENCH_DATE BENCH_CPU BENCH_NPROC BENCH_MEM BENCH_KERNEL BENCH_PG BENCH_PY
	export BENCH_LOAD_BEFORE=$load_before BENCH_LOAD_AFTER=$load_after BENCH_SETTINGS=$settings
	export HANDOVERS EXPIRIES TTL_MS WAITERS IDLE_SECONDS RENEWALS
	BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
	BENCH_CPU=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)
	BENCH_NPROC=$(nproc)
	BENCH_MEM=$(free -g | awk '/^Mem:/ { print $2 }')
	BENCH_KERNEL=$(uname -r)
	BENCH_HYPERVISOR=$(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -n1)
	export BENCH_HYPERVISOR
	BENCH_PG=$pg_version
	BENCH_PY="$($PYTHON --version 2>&1), psycopg2 $($PYTHON -c 'import psycopg2; print(psycopg2.__version__.split()[0])')"
	$PYTHON - result.json >"$out" <<-'PY'
		import json, os, sys
		r = json.load(open(sys.argv[1]))
		e = os.environ
		def row(name, s, target=None):
		    cells = [name, f"{s['median']:.3f}", f"{s['p90']:.3f}", f"{s['p99']:.3f}",
		             f"{s['min']:.3f} - {s['max']:.3f}", f"{s['mean']:.3f}", str(s['n'])]
		    if target is not None:
		        cells.append(target)
		    return "| " + " | ".join(cells) + " |"
		h = r["handover"]
		med, p99 = h["from_commit_ms"]["median"], h["from_commit_ms"]["p99"]
		idle = r["idle"]
		cpu_ok = idle["cpu_pct_of_one_core"] < 5
		print(f"# fencing: waiting lease_acquire, {e['BENCH_DATE']}")
		print()
		print("## Machine")
		print()
		hv = e.get("BENCH_HYPERVISOR", "")
		print(f"- CPU: {e['BENCH_CPU']}, nproc = {e['BENCH_NPROC']}"
		      + (f" (a {hv} guest: other guests may share the host)" if hv else ""))
		print(f"- memory: {e['BENCH_MEM']} GiB; kernel {e['BENCH_KERNEL']}")
		print(f"- {e['BENCH_PG']}")
		print(f"- driver: bench/wait/driver.py, {e['BENCH_PY']}, over the Unix socket")
		print(f"- load average before / after: {e['BENCH_LOAD_BEFORE']} / {e['BENCH_LOAD_AFTER']}")
		print()
		print("## Settings")
		print()
		print("- throwaway cluster started by pg_virtualenv, its postgresql.conf unchanged:")
		for line in e["BENCH_SETTINGS"].splitlines():
		    print(f"  - {line}")
		print("- fsync = off: the WAL flush that lease_release and lease_acquire force at commit "
		      "costs no disk sync here; with fsync on, 'from release sent' grows by one WAL "
		      "sync, 'from COMMIT returned' does not")
		print(f"- {e['HANDOVERS']} handovers (after 20 uncounted), {e['EXPIRIES']} expiries of a "
		      f"{e['TTL_MS']} ms lease (and {max(10, int(e['EXPIRIES']) // 4)} with lock_delay = 100 ms), "
		      f"{e['WAITERS']} idle waiters for {e['IDLE_SECONDS']} s, {e['RENEWALS']} renewals with "
		      f"0 and with {e['WAITERS']} waiters")
		print()
		print("## 1. Handover: release -> the waiting acquire returns (ms)")
		print()
		print("| measured | median | p90 | p99 | min - max | mean | n | target |")
		print("|---|---:|---:|---:|---:|---:|---:|---|")
		print(row("from the release's COMMIT returned (client)", h["from_commit_ms"],
		          f"median <= 1 ms: {'met' if med <= 1 else 'NOT met'}; "
		          f"p99 <= 10 ms: {'met' if p99 <= 10 else 'NOT met'}"))
		print(row("from the release statement sent (client)", h["from_start_ms"], ""))
		print(row("server clock: release -> waiter's acquired_at", h["server_ms"], ""))
		print()
		print("The waiter is woken in the releasing backend's commit callback, before the "
		      "release's result reaches its client, so the waiter's acquire can return "
		      "before the releasing client has read its own COMMIT: the negative times in "
		      "the first row.  Client times are time.perf_counter() in one Python process "
		      "(holder in the main thread, waiter in a second thread); the server row is "
		      "clock_timestamp() right after the release's UPDATE to the waiter's "
		      "acquired_at, so it leaves out both clients.")
		print()
		print("## 2. Wake at expiry: lateness after expires_at + lock_delay (ms)")
		print()
		print("| measured | median | p90 | p99 | min - max | mean | n |")
		print("|---|---:|---:|---:|---:|---:|---:|")
		print(row("lock_delay 0, server: acquired_at - expires_at", r["expiry"]["server_ms"]))
		print(row("lock_delay 0, client: acquire returned - expires_at", r["expiry"]["client_ms"]))
		print(row("lock_delay 100 ms, server", r["expiry_lock_delay"]["server_ms"]))
		print(row("lock_delay 100 ms, client", r["expiry_lock_delay"]["client_ms"]))
		print()
		print("## 3. Idle waiters")
		print()
		print(f"- {idle['waiters']} waiters asleep for {idle['wall_s']:.2f} s: "
		      f"{idle['cpu_s']:.3f} s CPU in their backends = "
		      f"{idle['cpu_pct_of_one_core']:.3f} % of one core "
		      f"(target < 5 %: {'met' if cpu_ok else 'NOT met'}; /proc counts in 1/{os.sysconf('SC_CLK_TCK')} s ticks)")
		print(f"- {idle['waiters_holding_an_xmin']} of the {idle['waiters']} waiters hold a snapshot "
		      "(backend_xmin) while they sleep: like any long-running statement they hold back "
		      "the xmin horizon of VACUUM and of HOT pruning for as long as they wait")
		print()
		print("## 4. The holder's lease_renew latency (ms, client, one statement each)")
		print()
		print("| waiters | median | p90 | p99 | min - max | mean | n | median of the last tenth |")
		print("|---|---:|---:|---:|---:|---:|---:|---:|")
		print(row("0", idle["renew_0_ms"], f"{idle['renew_0_last_tenth_median_ms']:.3f}"))
		print(row(str(idle["waiters"]), idle["renew_n_ms"], f"{idle['renew_n_last_tenth_median_ms']:.3f}"))
		print()
		print("## Targets")
		print()
		print(f"- handover median <= 1 ms: {'met' if med <= 1 else 'NOT met'} ({med:.3f} ms)")
		print(f"- handover p99 <= 10 ms: {'met' if p99 <= 10 else 'NOT met'} ({p99:.3f} ms)")
		print(f"- {idle['waiters']} idle waiters < 5 % of one core: {'met' if cpu_ok else 'NOT met'} "
		      f"({idle['cpu_pct_of_one_core']:.3f} %)")
	PY
	exit 0
fi

# ---------------------------------------------------------------------------
# Part 1: find the extension, start a throwaway cluster as postgres.
# ---------------------------------------------------------------------------
cd "$(dirname "$0")/../.."
. test/deps.sh
export PATH="/usr/lib/postgresql/$FENCING_PG_MAJOR/bin:$PATH"

sharedir=$(pg_config --sharedir)
pkglibdir=$(pg_config --pkglibdir)
if [ ! -f "$sharedir/extension/fencing.control" ] || [ ! -f "$pkglibdir/fencing.so" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "the fencing extension is not installed; run test/run.sh (as root) first" >&2
		exit 1
	fi
	echo "== the extension is not installed: building and installing it" >&2
	fencing_install_deps
	exec 9>/tmp/fencing-build.lock
	flock 9
	fencing_build_install
	flock -u 9
	exec 9>&-
fi
[ -x "$PYTHON" ] && "$PYTHON" -c 'import psycopg2' 2>/dev/null || {
	echo "$PYTHON with psycopg2 is needed (Debian: python3-psycopg2)" >&2
	exit 1
}

mkdir -p "${BENCH_OUT:-bench/out}"
result="${BENCH_OUT:-bench/out}/wait-$(date -u +%Y%m%d-%H%M%S).md"
work=$(mktemp -d /tmp/fencing-bench-wait.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp bench/wait/run.sh bench/wait/driver.py "$work/"
[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$work"

echo "== $HANDOVERS handovers, $EXPIRIES expiries, $WAITERS idle waiters for $IDLE_SECONDS s, $RENEWALS renewals" >&2
status=0
for try in 1 2 3 4 5; do
	status=0
	fencing_as_postgres env HANDOVERS="$HANDOVERS" EXPIRIES="$EXPIRIES" TTL_MS="$TTL_MS" \
		WAITERS="$WAITERS" IDLE_SECONDS="$IDLE_SECONDS" RENEWALS="$RENEWALS" \
		pg_virtualenv -v "$FENCING_PG_MAJOR" \
		bash "$work/run.sh" --inner "$work/result.md" \
		2>"$work/stderr" >/dev/null || status=$?
	# several checkouts start clusters at once: retry a port clash
	grep -q 'Port conflict' "$work/stderr" || break
	sleep $((RANDOM % 5 + 1))
done
if [ $status -ne 0 ] || [ ! -s "$work/result.md" ]; then
	cat "$work/stderr" >&2
	echo "bench/wait/run.sh: FAILED (exit $status)" >&2
	exit 1
fi
cp "$work/result.md" "$result"
echo
cat "$result"
echo
echo "(written to $result)"
