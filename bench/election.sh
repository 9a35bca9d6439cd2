#!/usr/bin/env bash
# bench/election.sh: what election observers cost, and how fast they wake.
#
#   sudo bench/election.sh            # about 12 minutes
#   sudo bench/election.sh --quick    # about 4 minutes
#
# Runs a throwaway cluster (the settings of bench/cluster_settings.sh) with
# the fencing extension installed in the server first on PATH, as user
# postgres, and writes bench/out/election-<date>.md.
#
# Sections:
#   1 idle observers: OBSERVERS sessions, each observing one election in a
#     loop (passing on what it saw last, as a client would), for IDLE_S
#     seconds; once with a leader that never renews (nothing changes), once
#     with a leader that renews every second.  The CPU time of their
#     backends (/proc/PID/stat) and the WAL written in the window
#     (pg_waldump --stats=record), against the same window without them.
#   2 wake-up: WAKES trials each of "the leader resigns" and "the leader's
#     lease expires": the time from the resign statement's start, or from
#     expires_at, to the observer's return.
#   3 lease cycle (acquire + release, 1000 names, 8 clients, the
#     bench/run.sh script) alone and with OBSERVERS observers sleeping,
#     in alternating rounds; and the same with OBSERVERS sessions that
#     run pg_sleep(30) instead, the control for "a long statement".
#   4 next to etcd 3.4 (an etcd of its own, started here): FAILOVERS
#     trials each of a leader's process killed (-9) with a TTL of 2 s,
#     until the new leader's first fenced write and an observer's wake-up
#     (bench/elections/failover.py); in full mode also `etcdctl elect` as
#     shipped (60 s sessions); and OBSERVERS idle `etcdctl elect -l`
#     observers for IDLE_S seconds, the CPU of etcd and of the observers.
set -euo pipefail
export LC_ALL=C

MODE=${MODE:-full}
[ "${1:-}" = "--quick" ] && MODE=quick
if [ "$MODE" = quick ]; then
	: "${IDLE_S:=20}" "${WAKES:=5}" "${ROUNDS:=2}" "${DUR:=5}" "${FAILOVERS:=3}" "${CLI_ELECT_TRIAL:=}"
else
	: "${IDLE_S:=60}" "${WAKES:=20}" "${ROUNDS:=6}" "${DUR:=10}" "${FAILOVERS:=10}" "${CLI_ELECT_TRIAL:=1}"
fi
: "${OBSERVERS:=50}" "${SHARED_BUFFERS:=512MB}" "${FSYNC:=off}"
export MODE IDLE_S WAKES ROUNDS DUR OBSERVERS SHARED_BUFFERS FSYNC FAILOVERS CLI_ELECT_TRIAL

# ---------------------------------------------------------------------------
# as postgres, in a work directory: $1
inner() {
	W=$1
	D=$W/data
	cd "$W"
	PORT=$((20000 + RANDOM % 20000))
	export PGHOST=$W PGPORT=$PORT PGUSER=postgres PGDATABASE=bench
	Q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
	say() { printf '%s\n' "$*" >&2; }
	initdb -D "$D" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
	. "$W/cluster_settings.sh"
	bench_cluster_settings "bench/election.sh" "$((OBSERVERS * 2 + 40))" >>"$D/postgresql.conf"
	pg_ctl -D "$D" -l "$W/server.log" -w -t 120 start >/dev/null
	ETCD=
	trap 'stop_sessions; [ -z "$ETCD" ] || kill "$ETCD"; pg_ctl -D "$D" -m immediate -w stop >/dev/null 2>&1 || true' EXIT
	Q -d postgres -c "CREATE DATABASE bench"
	Q -c "CREATE EXTENSION fencing"
	Q -c "SELECT count(fencing.lease_release('l' || g, fencing.lease_acquire('l' || g, 'init', '1 minute')))
			FROM generate_series(1, 1000) AS g" >/dev/null
	cat >"$W/lease.sql" <<-'EOF'
		\set n random(1, 1000)
		SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
		\if :tok > 0
		SELECT fencing.lease_release('l' || :n, :tok);
		\endif
	EOF
	R=$W/report.md
	{
		echo "# Election observers: cost and wake-up ($(date -u '+%Y-%m-%d %H:%M UTC'))"
		echo
		echo "bench/election.sh, $MODE mode, $GITDESC;"
		echo "PostgreSQL $(Q -c 'SHOW server_version'), $(nproc) CPUs, load average at start $(cut -d' ' -f1-3 /proc/loadavg);"
		echo "fsync = $FSYNC, synchronous_commit = on, shared_buffers = $SHARED_BUFFERS."
		echo
	} >"$R"

	# ---- sessions in the background --------------------------------------
	PIDS=$W/pids
	: >"$PIDS"
	# an observer: one session, observing in a loop, passing on what it saw
	observer() {
		local e=$1 t=$2 v=$3
		{
			echo "\\set t $t"
			echo "\\set v '''$v'''"
			while :; do
				echo "SELECT coalesce(token::text, 'NULL') AS t, coalesce(quote_literal(value), 'NULL') AS v FROM fencing.election_observe('$e', :t, :v, '30 s') \\gset"
			done
		} | psql -X -q -At >/dev/null 2>&1 &
		echo $! >>"$PIDS"
	}
	sleeper() {
		{ while :; do echo "SELECT pg_sleep(30);"; done; } | psql -X -q -At >/dev/null 2>&1 &
		echo $! >>"$PIDS"
	}
	stop_sessions() {
		[ -s "$PIDS" ] || return 0
		Q -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			   WHERE (query LIKE '%election_observe(%' OR query LIKE '%pg_sleep(30)%')
				 AND pid <> pg_backend_pid()" >/dev/null 2>&1 || true
		local p
		while read -r p; do kill "$p" 2>/dev/null || true; done <"$PIDS"
		: >"$PIDS"
		sleep 1
	}
	backend_pids() {
		Q -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '%$1%' AND pid <> pg_backend_pid()"
	}
	ticks() {
		local t=0 p a b
		for p in $1; do
			read -r a b < <(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null || echo "0 0")
			t=$((t + a + b))
		done
		echo "$t"
	}
	# WAL written in a window of IDLE_S seconds: "bytes<TAB>record counts"
	wal_window() {
		local l0 l1
		Q -c "CHECKPOINT"
		sleep 1
		l0=$(Q -c "SELECT pg_current_wal_insert_lsn()")
		sleep "$IDLE_S"
		l1=$(Q -c "SELECT pg_current_wal_insert_lsn()")
		printf '%s\t%s\n' "$(Q -c "SELECT pg_wal_lsn_diff('$l1', '$l0')")" \
			"$(pg_waldump -p "$D/pg_wal" -s "$l0" -e "$l1" --stats=record 2>/dev/null |
				awk '$2 > 0 && $1 ~ /\// { printf "%s%s %s", sep, $1, $2; sep = ", " } END { if (sep == "") printf "none" }')"
	}

	# ---- 1 idle observers --------------------------------------------------
	say "== 1 idle observers ($OBSERVERS, ${IDLE_S}s windows)"
	Q -c "ALTER SYSTEM SET autovacuum = off" -c "SELECT pg_reload_conf()" >/dev/null
	{
		echo "## 1. Idle observers"
		echo
		echo "$OBSERVERS sessions each observe one election in a loop (wait 30 s), for ${IDLE_S} s;"
		echo "WAL of the window (after a CHECKPOINT; autovacuum off), and the CPU time of the"
		echo "observers' backends in it (ticks of 1/$(getconf CLK_TCK) s)."
		echo
		echo "| leader | WAL without observers | WAL with observers | observers' CPU |"
		echo "|---|---|---|---|"
	} >>"$R"
	for renew in 0 1; do
		local tok ttl lp="" w0 w1 pids c0 c1
		Q -c "DELETE FROM fencing.leases WHERE name = 'idle'"
		ttl="1 hour"
		[ $renew = 1 ] && ttl="10 s"
		tok=$(Q -c "SELECT fencing.election_campaign('idle', 'leader', 'v', '$ttl')")
		if [ $renew = 1 ]; then
			(while :; do Q -c "SELECT fencing.lease_renew('idle', $tok, '10 s')" >/dev/null; sleep 1; done) &
			lp=$!
		fi
		w0=$(wal_window)
		for _ in $(seq 1 "$OBSERVERS"); do observer idle "$tok" v; done
		sleep 3
		pids=$(backend_pids "election_observe(''idle''")
		c0=$(ticks "$pids")
		w1=$(wal_window)
		c1=$(ticks "$pids")
		stop_sessions
		[ -n "$lp" ] && kill "$lp"
		printf '| %s | %s B (%s) | %s B (%s) | %d ticks, %d backends |\n' \
			"$([ $renew = 1 ] && echo 'renews every 1 s' || echo 'never renews (nothing changes)')" \
			"$(cut -f1 <<<"$w0")" "$(cut -f2 <<<"$w0")" "$(cut -f1 <<<"$w1")" "$(cut -f2 <<<"$w1")" \
			$((c1 - c0)) "$(wc -w <<<"$pids")" >>"$R"
		tail -n 1 "$R" >&2
	done
	Q -c "ALTER SYSTEM RESET autovacuum" -c "SELECT pg_reload_conf()" >/dev/null
	echo >>"$R"

	# ---- 2 wake-up -----------------------------------------------------------
	say "== 2 wake-up ($WAKES trials each)"
	Q -c "CREATE TABLE wake (kind text, ms float8)"
	for kind in resign expiry; do
		for _ in $(seq 1 "$WAKES"); do
			local tok ttl t0
			Q -c "DELETE FROM fencing.leases WHERE name = 'wake'"
			ttl="1 hour"
			[ $kind = expiry ] && ttl="1 s"
			tok=$(Q -c "SELECT fencing.election_campaign('wake', 'leader', 'v', '$ttl')")
			psql -X -q -At -c "CREATE TEMP TABLE r AS SELECT clock_timestamp() AS at
								 FROM fencing.election_observe('wake', $tok, 'v', '60 s');
							   COPY r TO STDOUT" >"$W/ret" &
			local op=$!
			# until the observer sleeps
			Q -c "DO \$\$ BEGIN
					WHILE NOT EXISTS (SELECT FROM pg_stat_activity
									   WHERE query LIKE '%election_observe(''wake''%'
										 AND wait_event IN ('Extension', 'FencingLeaseWait')) LOOP
						PERFORM pg_sleep(0.001); PERFORM pg_stat_clear_snapshot();
					END LOOP; END \$\$"
			if [ $kind = resign ]; then
				t0=$(Q -c "SELECT clock_timestamp()")
				Q -c "SELECT fencing.election_resign('wake', $tok)" >/dev/null
			else
				t0=$(Q -c "SELECT expires_at FROM fencing.lease_status WHERE name = 'wake'")
			fi
			wait $op
			Q -c "INSERT INTO wake SELECT '$kind', extract(epoch FROM '$(cat "$W/ret")'::timestamptz - '$t0'::timestamptz) * 1000"
		done
	done
	{
		echo "## 2. Wake-up"
		echo
		echo "An observer blocked in election_observe (wait 60 s); the time from the start of"
		echo "the leader's resign statement (resign), or from the leader's expires_at (expiry),"
		echo "to the observer's return; $WAKES trials each."
		echo
		echo "| change | median ms | max ms |"
		echo "|---|---|---|"
		Q -F ' | ' -c "SELECT '| ' || kind, round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2),
							  round(max(ms)::numeric, 2) || ' |'
						 FROM wake GROUP BY kind ORDER BY kind"
		echo
	} >>"$R"
	tail -n 3 "$R" >&2

	# ---- 3 lease cycle with observers ----------------------------------------
	say "== 3 lease cycle with and without $OBSERVERS observers ($ROUNDS rounds of ${DUR}s)"
	cycle() {
		pgbench -n -c 8 -j 2 -T "$DUR" -f "$W/lease.sql" 2>/dev/null |
			sed -n 's/^tps = \([0-9.]*\).*/\1/p'
	}
	{
		echo "## 3. The lease cycle beside sleeping sessions"
		echo
		echo "The lease cycle (acquire + release, 1000 names, 8 clients) alone, and with"
		echo "$OBSERVERS sessions asleep beside it, in alternating rounds of ${DUR} s: observers"
		echo "(election_observe, wait 30 s), or, as the control, pg_sleep(30)."
		echo
		echo "| beside it | round | alone tps | beside tps | ratio |"
		echo "|---|---|---|---|---|"
	} >>"$R"
	Q -c "DELETE FROM fencing.leases WHERE name = 'cyc'"
	local ctok
	ctok=$(Q -c "SELECT fencing.election_campaign('cyc', 'leader', 'v', '1 hour')")
	for what in observers pg_sleep; do
		for r in $(seq 1 "$ROUNDS"); do
			local a b
			start() {
				for _ in $(seq 1 "$OBSERVERS"); do
					if [ $what = observers ]; then observer cyc "$ctok" v; else sleeper; fi
				done
				sleep 2
			}
			if [ $((r % 2)) -eq 1 ]; then
				a=$(cycle); start; b=$(cycle); stop_sessions
			else
				start; b=$(cycle); stop_sessions; a=$(cycle)
			fi
			printf '| %s | %d | %.0f | %.0f | %.3f |\n' "$what" "$r" "$a" "$b" "$(echo "$b / $a" | bc -l)" >>"$R"
			tail -n 1 "$R" >&2
		done
	done
	echo >>"$R"

	# ---- 4 next to etcd ----------------------------------------------------
	say "== 4 failover and wake-up next to etcd ($FAILOVERS trials each)"
	local eport=$((PORT + 1)) pport=$((PORT + 2)) ep t0
	etcd --name bench --data-dir "$W/etcd" \
		--listen-client-urls "http://127.0.0.1:$eport" --advertise-client-urls "http://127.0.0.1:$eport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "bench=http://127.0.0.1:$pport" >"$W/etcd.log" 2>&1 &
	ETCD=$!
	ep=127.0.0.1:$eport
	export ETCDCTL_API=3
	t0=$SECONDS
	until etcdctl --endpoints "$ep" endpoint health >/dev/null 2>&1; do
		[ $((SECONDS - t0)) -lt 60 ] || { say "etcd did not start"; cat "$W/etcd.log" >&2; exit 1; }
		sleep 0.2
	done
	{
		echo "## 4. Next to etcd: a leader's death, an observer's wake-up"
		echo
		echo "etcd $(etcd --version | sed -n 's/^etcd Version: //p') (one member, on this machine, fsync on), next to the"
		echo "cluster above. $FAILOVERS trials each: three candidate processes campaign (TTL 2 s, kept alive"
		echo "every 2/3 s), the leader writes to a fenced resource every 50 ms, an observer process"
		echo "watches; the leader's process is killed (-9). fencing: the candidates are"
		echo "examples/python/fencing_leader.py electors, the write an UPDATE with fence_advance, the"
		echo "observer election_observe. etcd: its election service (Campaign) through its JSON"
		echo "gateway, the write a transaction conditioned on the leader key's create revision, the"
		echo "observer \`etcdctl elect -l\`. Milliseconds, min / median / max"
		echo "(bench/elections/failover.py). Both wait out the TTL left at the kill (1.3 to 2 s); etcd's"
		echo "lessor looks for expired leases every 500 ms."
		echo
	} >>"$R"
	/usr/bin/python3 "$W/failover.py" --trials "$FAILOVERS" --etcd "http://$ep" --out "$W/failover.md" \
		${CLI_ELECT_TRIAL:+--etcdctl}
	cat "$W/failover.md" >>"$R"
	echo >>"$R"
	tail -n 6 "$W/failover.md" >&2

	# idle observers of etcd: a leader that never changes, OBSERVERS observers
	etcdctl --endpoints "$ep" elect idle leader >/dev/null 2>&1 &
	echo $! >>"$PIDS"
	until [ -n "$(etcdctl --endpoints "$ep" get --prefix --keys-only idle/ 2>/dev/null)" ]; do sleep 0.2; done
	local opids="" c0 c1 e0 e1
	for _ in $(seq 1 "$OBSERVERS"); do
		etcdctl --endpoints "$ep" elect -l idle >/dev/null 2>&1 &
		opids="$opids $!"
		echo $! >>"$PIDS"
	done
	sleep 3
	c0=$(ticks "$opids")
	e0=$(ticks "$ETCD")
	sleep "$IDLE_S"
	c1=$(ticks "$opids")
	e1=$(ticks "$ETCD")
	{
		echo "$OBSERVERS idle \`etcdctl elect -l\` observers of an election whose leader does not change,"
		echo "for ${IDLE_S} s: etcd used $((e1 - e0)) ticks of CPU, the observers $((c1 - c0)) ticks"
		echo "(section 1 has fencing's: the observers' backends)."
		echo
	} >>"$R"
	tail -n 3 "$R" >&2
	stop_sessions
	kill "$ETCD"
	wait "$ETCD" 2>/dev/null || true
	ETCD=
	echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)." >>"$R"
}

main() {
	cd "$(dirname "$0")/.."
	command -v pg_config >/dev/null || export PATH="/usr/lib/postgresql/15/bin:$PATH"
	[ -f "$(pg_config --sharedir)/extension/fencing.control" ] || {
		echo "the fencing extension is not installed in $(pg_config --bindir)'s server" >&2
		exit 1
	}
	local date
	date=$(date -u +%Y%m%d-%H%M%S)
	work=$(mktemp -d /tmp/fencing-election-bench.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	cp bench/election.sh bench/cluster_settings.sh bench/elections/failover.py \
		examples/python/fencing_leader.py "$work/"
	chmod 755 "$work"
	[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$work"
	local as=()
	[ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)
	"${as[@]}" env PATH="$PATH" GITDESC="$(git describe --always --dirty 2>/dev/null || echo '?')" \
		bash "$work/election.sh" --inner "$work"
	mkdir -p "${BENCH_OUT:-bench/out}"
	cp "$work/report.md" "${BENCH_OUT:-bench/out}/election-$date.md"
	echo "(report: ${BENCH_OUT:-bench/out}/election-$date.md)"
}

if [ "${1:-}" = "--inner" ]; then inner "$2"; else main "$@"; fi
