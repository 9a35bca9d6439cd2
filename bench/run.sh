#!/usr/bin/env bash
# bench/run.sh: the fencing benchmark, one runner for all of it.
#
#   sudo bench/run.sh            # full mode, about 13 minutes
#   sudo bench/run.sh --quick    # about 3 minutes
#
# Starts a throwaway cluster (initdb + pg_ctl in a temp directory, as user
# postgres), measures every contender side by side in that one cluster,
# alternating contenders over several rounds, and writes
# bench/out/report-<date>.md and bench/out/report-<date>.png.
# What is measured and why the settings are what they are: bench/README.md.
#
# Sections:
#   1 lease cycle (acquire + release, 1000 names, 8 clients): fencing,
#     fencing with fencing.notify = on, PL/pgSQL (bench/plpgsql_lease.sql),
#     plain SQL (bench/plain_lease.sql), pg_try_advisory_xact_lock
#   2 resource side: fence_allows vs fence < token, fence_guard trigger vs
#     none, fence_advance vs SET fence = token (the former
#     bench/run_resource.sh, with its interleaved "mixed" runs)
#   3 job queue: examples/job_queue.sql vs bench/plain_queue.sql
#   4 scale: the lease cycle with 1k, 100k and 1M existing leases
#   5 contention: 1, 8 and 64 clients on one lease name
#   6 handover latency: bench/wait/run.sh if it exists (owned elsewhere)
#   plus, in full mode: wait events of the lease contenders and the lease
#   cycle again with fsync = on.
#
# Every knob below can be set in the environment (ROUNDS_LEASE=8 ...).
set -euo pipefail
export LC_ALL=C

MODE=full
[ "${1:-}" = "--quick" ] && MODE=quick

if [ "$MODE" = quick ]; then
	: "${ROUNDS_LEASE:=2}" "${DUR_LEASE:=3}" "${MIX_LEASE:=5}"
	: "${ROUNDS_RES:=2}" "${DUR_RES:=2}" "${MIX_RES:=5}"
	: "${ROUNDS_JQ:=2}" "${DUR_JQ:=3}" "${MIX_JQ:=4}"
	: "${ROUNDS_SCALE:=2}" "${DUR_SCALE:=3}" "${SCALE_NOTIFY_ON:=0}"
	: "${ROUNDS_HOT:=1}" "${DUR_HOT:=3}"
	: "${DIAG:=0}" "${FSYNC_CHECK:=0}" "${WAIT_TIMEOUT:=60}"
	: "${ROUNDS_FSYNC:=1}" "${DUR_FSYNC:=3}"
	: "${JQ_HISTORY:=100000}" "${JQ_READY:=20000}" "${POPULATE:=insert}"
else
	: "${ROUNDS_LEASE:=5}" "${DUR_LEASE:=8}" "${MIX_LEASE:=12}"
	: "${ROUNDS_RES:=6}" "${DUR_RES:=4}" "${MIX_RES:=12}"
	: "${ROUNDS_JQ:=5}" "${DUR_JQ:=8}" "${MIX_JQ:=12}"
	: "${ROUNDS_SCALE:=3}" "${DUR_SCALE:=6}" "${SCALE_NOTIFY_ON:=0}"
	: "${ROUNDS_HOT:=2}" "${DUR_HOT:=8}"
	: "${DIAG:=1}" "${FSYNC_CHECK:=1}" "${WAIT_TIMEOUT:=240}"
	: "${ROUNDS_FSYNC:=3}" "${DUR_FSYNC:=5}"
	: "${JQ_HISTORY:=300000}" "${JQ_READY:=60000}" "${POPULATE:=api}"
fi
: "${POOL:=1000}"			# lease names of the lease cycle
: "${LEASE_CLIENTS:=8}"
: "${RES_CLIENTS:=2}"
: "${RES_ROWS:=100000}"
: "${JQ_CLIENTS:=8}"
: "${SCALE_SIZES:=1000 100000 1000000}"
: "${HOT_CLIENTS:=1 8 64}"
: "${SHARED_BUFFERS:=512MB}"
: "${FSYNC:=off}"			# the durability setting of the main runs
export ROUNDS_LEASE DUR_LEASE MIX_LEASE ROUNDS_RES DUR_RES MIX_RES ROUNDS_JQ \
	DUR_JQ MIX_JQ ROUNDS_SCALE DUR_SCALE SCALE_NOTIFY_ON ROUNDS_HOT DUR_HOT \
	DIAG FSYNC_CHECK ROUNDS_FSYNC DUR_FSYNC WAIT_TIMEOUT JQ_HISTORY JQ_READY POOL LEASE_CLIENTS \
	RES_CLIENTS RES_ROWS JQ_CLIENTS SCALE_SIZES HOT_CLIENTS SHARED_BUFFERS \
	FSYNC MODE POPULATE

# ===========================================================================
# Part 2 (as postgres): the cluster and the measurements.  $1 = work dir (a
# copy of bench/ that postgres owns); data goes to $W/out.
# ===========================================================================
inner() {
	W=$1
	O=$W/out
	T=$W/tmp
	D=$W/data
	LOG=$W/server.log
	mkdir -p "$O" "$T"
	cd "$W"

	PORT=$((20000 + RANDOM % 20000))
	export PGHOST=$W PGPORT=$PORT PGUSER=postgres PGDATABASE=bench
	PSQL="psql -X -q -v ON_ERROR_STOP=1"
	Q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
	stamp() { date -u +%s.%N; }
	say() { printf '%s\n' "$*" >&2; }

	# ---- cluster -------------------------------------------------------
	initdb -D "$D" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
	. "$W/cluster_settings.sh"
	bench_cluster_settings "bench/run.sh" "100" >>"$D/postgresql.conf"
	pg_ctl -D "$D" -l "$LOG" -w -t 120 start >/dev/null
	trap 'pg_ctl -D "$D" -m immediate -w stop >/dev/null 2>&1 || true' EXIT

	Q -d postgres -c "CREATE DATABASE bench"
	say "== cluster up (fsync = $FSYNC, synchronous_commit = on); setting up"
	t_setup=$(stamp)

	# ---- objects of sections 1, 2, 3, 5 in database bench ----------------
	$PSQL -c "CREATE EXTENSION fencing" \
		-f "$W/plpgsql_lease.sql" -f "$W/plain_lease.sql" \
		-f "$W/plain_queue.sql" -f "$W/job_queue.sql" >/dev/null
	$PSQL >/dev/null <<-SQL
		SET fencing.notify = off;
		-- every pool name exists and is free in every lease table
		SELECT count(fencing.lease_release('l' || g, fencing.lease_acquire('l' || g, 'init', '1 minute')))
		  FROM generate_series(1, $POOL) g;
		SELECT count(plpgsql_lease.lease_release('l' || g, plpgsql_lease.lease_acquire('l' || g, 'init', '1 minute')))
		  FROM generate_series(1, $POOL) g;
		INSERT INTO plain_lease.leases
		SELECT 'l' || g, 'init', nextval('plain_lease.token_seq'), clock_timestamp()
		  FROM generate_series(1, $POOL) g;
		-- section 2: one table per contender pair
		CREATE FUNCTION pg_temp.mk(name text) RETURNS void LANGUAGE plpgsql AS \$\$
		BEGIN
			EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0,
			                 fence bigint NOT NULL, pad text NOT NULL) WITH (fillfactor = 80)', name);
			EXECUTE format('INSERT INTO %I (id, fence, pad)
			                SELECT g, 1, repeat(''x'', 40) FROM generate_series(1, $RES_ROWS) g', name);
		END \$\$;
		SELECT pg_temp.mk('bench_a');
		SELECT pg_temp.mk('bench_b_guard');
		SELECT pg_temp.mk('bench_b_plain');
		SELECT pg_temp.mk('bench_c');
		CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON bench_b_guard
			FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
		-- section 3: a queue with a history of finished jobs, then ready ones
		INSERT INTO job_queue.jobs (queue, payload, state, result, fence, attempts)
		SELECT 'q', jsonb_build_object('n', g), 'done', '{"ok": true}', g, 1
		  FROM generate_series(1, $JQ_HISTORY) g;
		INSERT INTO plain_queue.jobs (queue, payload, state, result, attempts)
		SELECT 'q', jsonb_build_object('n', g), 'done', '{"ok": true}', 1
		  FROM generate_series(1, $JQ_HISTORY) g;
		-- section 5: the one lease everybody wants
		SELECT fencing.lease_release('hot', fencing.lease_acquire('hot', 'init', '1 minute'));
	SQL
	jq_topup job_queue
	jq_topup plain_queue
	$PSQL -c "VACUUM ANALYZE" >/dev/null

	# ---- section 4: one database per size, populated through the API -----
	for n in $SCALE_SIZES; do
		db=$(scale_db "$n")
		Q -d postgres -c "CREATE DATABASE $db"
		Q -d "$db" -c "CREATE EXTENSION fencing"
		# through the API: batches of 100k in their own transactions, two
		# sessions at a time.  Or (quick mode) one INSERT as superuser with
		# tokens from next_token(); rows that do not come from the lease
		# functions count as a restore, so tokens jump a band (harmless).
		local lo=1 batch=100000 pids=()
		[ "$POPULATE" = insert ] && {
			Q -d "$db" -c "INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at, acquires)
				SELECT 's' || g, 'h', current_user::regrole, fencing.next_token(), clock_timestamp(),
				       clock_timestamp() + interval '1 day', 1 FROM generate_series(1, $n) g" >/dev/null
			lo=$((n + 1))
		}
		while [ "$lo" -le "$n" ]; do
			local hi=$((lo + batch - 1))
			[ "$hi" -gt "$n" ] && hi=$n
			Q -d "$db" -c "SET fencing.notify = off" \
				-c "SELECT count(fencing.lease_acquire('s' || g, 'h', '1 day')) FROM generate_series($lo, $hi) g" >/dev/null &
			pids+=($!)
			if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
			lo=$((hi + 1))
		done
		for p in "${pids[@]}"; do wait "$p"; done
		Q -d "$db" -c "SET fencing.notify = off" \
			-c "SELECT count(fencing.lease_release('l' || g, fencing.lease_acquire('l' || g, 'init', '1 minute'))) FROM generate_series(1, $POOL) g" >/dev/null
		Q -d "$db" -c "VACUUM ANALYZE fencing.leases"
		printf '%s\t%s\t%s\t%s\n' "$n" \
			"$(Q -d "$db" -c "SELECT count(*) FROM fencing.leases")" \
			"$(Q -d "$db" -c "SELECT pg_relation_size('fencing.leases')")" \
			"$(Q -d "$db" -c "SELECT pg_relation_size('fencing.leases_pkey')")" >>"$O/scale_sizes.tsv"
	done
	Q -c "CHECKPOINT"
	setup_s=$(awk -v a="$(stamp)" -v b="$t_setup" 'BEGIN { printf "%.1f", a - b }')
	say "== setup done in ${setup_s%.*} s"

	# ---- machine, settings ---------------------------------------------
	{
		echo "cpu_model	$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n1)"
		echo "nproc	$(nproc)"
		echo "mem_total	$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
		echo "kernel	$(uname -r)"
		echo "pg_version	$(Q -c 'SELECT version()')"
		echo "pgbench	$(pgbench --version)"
		echo "setup_s	$setup_s"
	} >"$O/machine.tsv"
	Q -F $'\t' -c "LOAD 'fencing'" -c "SELECT name, current_setting(name), source FROM pg_settings
		WHERE name IN ('shared_buffers', 'synchronous_commit', 'fsync', 'full_page_writes',
		               'wal_level', 'wal_sync_method', 'max_wal_size', 'checkpoint_timeout',
		               'autovacuum', 'jit', 'max_connections', 'fencing.notify',
		               'fencing.lock_delay', 'default_transaction_isolation', 'work_mem')
		ORDER BY name" >"$O/settings.tsv"

	# ---- the contenders --------------------------------------------------
	# script, database, clients, PGOPTIONS, counter (see count_*), check
	declare -gA SCRIPT DBN CLIENTS OPTS COUNTER
	def() { SCRIPT[$1]=$2 DBN[$1]=$3 CLIENTS[$1]=$4 OPTS[$1]=$5 COUNTER[$1]=$6; }
	local SYNC_OFF="-c synchronous_commit=off"
	def fencing        lease_fencing.sql   bench "$LEASE_CLIENTS" "" fencing
	def fencing_notify_on lease_fencing.sql bench "$LEASE_CLIENTS" "-c fencing.notify=on" fencing
	def plpgsql        lease_plpgsql.sql   bench "$LEASE_CLIENTS" "" plpgsql
	def plain_sql      lease_plain.sql     bench "$LEASE_CLIENTS" "" plain
	def advisory       lease_advisory.sql  bench "$LEASE_CLIENTS" "" none
	def a_check        res_a_check.sql   bench "$RES_CLIENTS" "$SYNC_OFF" sumv:bench_a
	def a_raw          res_a_raw.sql     bench "$RES_CLIENTS" "$SYNC_OFF" sumv:bench_a
	def b_guard        res_b_guard.sql   bench "$RES_CLIENTS" "$SYNC_OFF" sumv:bench_b_guard
	def b_plain        res_b_plain.sql   bench "$RES_CLIENTS" "$SYNC_OFF" sumv:bench_b_plain
	def c_advance      res_c_advance.sql bench "$RES_CLIENTS" "$SYNC_OFF" sumv:bench_c
	def c_raw          res_c_raw.sql     bench "$RES_CLIENTS" "$SYNC_OFF" sumv:bench_c
	def jq_fencing     jq_fencing.sql    bench "$JQ_CLIENTS" "" done:job_queue
	def jq_plain       jq_plain.sql      bench "$JQ_CLIENTS" "" done:plain_queue
	local scale_cs=() scale_nn=()
	for n in $SCALE_SIZES; do
		def "leases_$n" lease_fencing.sql "$(scale_db "$n")" "$LEASE_CLIENTS" "" fencing
		def "leases_${n}_notify_on" lease_fencing.sql "$(scale_db "$n")" "$LEASE_CLIENTS" "-c fencing.notify=on" fencing
		scale_cs+=("leases_$n")
		scale_nn+=("leases_${n}_notify_on")
	done
	local hot_cs=()
	for c in $HOT_CLIENTS; do
		def "hot_$c" lease_hot.sql bench "$c" "" fencing
		hot_cs+=("hot_$c")
	done
	write_scripts

	: >"$O/runs.tsv"
	: >"$O/mixed.tsv"
	: >"$O/sections.tsv"
	RUN=0
	# section 2's tokens start at a token of this database's current band:
	# fence_guard and fence_advance refuse older ones (LF005)
	TOKEN_BASE=$(Q -c "SELECT fencing.next_token()")

	# ---- 1 lease cycle -------------------------------------------------
	section 1 "lease cycle"
	for c in fencing fencing_notify_on plpgsql plain_sql advisory; do run_one warmup "$c" 0 1; done
	rounds S1 "$ROUNDS_LEASE" "$DUR_LEASE" fencing fencing_notify_on plpgsql plain_sql advisory
	mixed S1 defaults "$MIX_LEASE" "$LEASE_CLIENTS" "" fencing plpgsql plain_sql advisory
	section_end

	# ---- 2 resource side -----------------------------------------------
	section 2 "resource side"
	for c in a_check a_raw b_guard b_plain c_advance c_raw; do run_one warmup "$c" 0 1; done
	pair_rounds S2 "$ROUNDS_RES" "$DUR_RES" "a_check a_raw" "b_guard b_plain" "c_advance c_raw"
	mixed S2 a "$MIX_RES" "$RES_CLIENTS" "$SYNC_OFF" a_check a_raw
	mixed S2 b "$MIX_RES" "$RES_CLIENTS" "$SYNC_OFF" b_guard b_plain
	mixed S2 c "$MIX_RES" "$RES_CLIENTS" "$SYNC_OFF" c_advance c_raw
	section_end

	# ---- 3 job queue ---------------------------------------------------
	section 3 "job queue"
	for c in jq_fencing jq_plain; do run_one warmup "$c" 0 1; done
	pair_rounds S3 "$ROUNDS_JQ" "$DUR_JQ" "jq_fencing jq_plain"
	jq_prepare job_queue
	jq_prepare plain_queue
	mixed S3 jq "$MIX_JQ" "$JQ_CLIENTS" "" jq_fencing jq_plain
	section_end

	# ---- 4 scale -------------------------------------------------------
	section 4 "scale"
	for c in "${scale_cs[@]}"; do run_one warmup "$c" 0 1; done
	rounds S4 "$ROUNDS_SCALE" "$DUR_SCALE" "${scale_cs[@]}"
	if [ "$SCALE_NOTIFY_ON" = 1 ]; then
		rounds S4 "$ROUNDS_SCALE" "$DUR_SCALE" "${scale_nn[@]}"
	fi
	section_end

	# ---- 5 contention ----------------------------------------------------
	section 5 "contention"
	rounds S5 "$ROUNDS_HOT" "$DUR_HOT" "${hot_cs[@]}"
	section_end

	# ---- diagnostics -------------------------------------------------------
	if [ "$DIAG" = 1 ]; then
		section D "wait events"
		for c in fencing fencing_notify_on plpgsql plain_sql; do sample_waits "$c" 5; done
		section_end
	fi
	if [ "$FSYNC_CHECK" = 1 ]; then
		section F "fsync = on"
		Q -c "ALTER SYSTEM SET fsync = on" -c "SELECT pg_reload_conf()" >/dev/null
		sleep 1
		[ "$(Q -c 'SHOW fsync')" = on ] || { say "fsync did not turn on"; exit 1; }
		rounds S1F "$ROUNDS_FSYNC" "$DUR_FSYNC" fencing fencing_notify_on plpgsql plain_sql
		Q -c "ALTER SYSTEM RESET fsync" -c "SELECT pg_reload_conf()" >/dev/null
		section_end
	fi

	# ---- the end -----------------------------------------------------------
	Q -c "SELECT count(*) FROM fencing.leases" >/dev/null
	grep -E 'ERROR|FATAL|PANIC' "$LOG" | head -n 50 >"$O/server_errors.txt" || true
	pg_ctl -D "$D" -m fast -w stop >/dev/null
	trap - EXIT
}

scale_db() {
	case $1 in
	*000000) echo "scale_$(($1 / 1000000))m" ;;
	*000) echo "scale_$(($1 / 1000))k" ;;
	*) echo "scale_$1" ;;
	esac
}

# the pgbench scripts, one per contender
write_scripts() {
	local S=$W/scripts
	mkdir -p "$S"
	cat >"$S/lease_fencing.sql" <<-'EOF'
		\set n random(1, :pool)
		SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
		\if :tok > 0
		SELECT fencing.lease_release('l' || :n, :tok);
		\endif
	EOF
	cat >"$S/lease_plpgsql.sql" <<-'EOF'
		\set n random(1, :pool)
		SELECT coalesce(plpgsql_lease.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
		\if :tok > 0
		SELECT plpgsql_lease.lease_release('l' || :n, :tok);
		\endif
	EOF
	# the statements of bench/plain_lease.sql; the acquire wrapped in a CTE
	# so that "no row" (held by another) reads as 0, as pgbench needs a row
	cat >"$S/lease_plain.sql" <<-'EOF'
		\set n random(1, :pool)
		WITH a AS (INSERT INTO plain_lease.leases AS l (name, holder, token, expires_at) VALUES ('l' || :n, 'c' || :client_id, nextval('plain_lease.token_seq'), clock_timestamp() + interval '1 minute') ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at WHERE l.expires_at <= clock_timestamp() OR l.holder = EXCLUDED.holder RETURNING l.token) SELECT coalesce((SELECT token FROM a), 0) AS tok \gset
		\if :tok > 0
		UPDATE plain_lease.leases SET expires_at = clock_timestamp() WHERE name = 'l' || :n AND token = :tok AND expires_at > clock_timestamp();
		\endif
	EOF
	# an xact lock is held while the transaction is open: BEGIN, lock, (work), COMMIT
	cat >"$S/lease_advisory.sql" <<-'EOF'
		\set n random(1, :pool)
		BEGIN;
		SELECT pg_try_advisory_xact_lock(hashtext('l' || :n));
		END;
	EOF
	cat >"$S/lease_hot.sql" <<-'EOF'
		SELECT coalesce(fencing.lease_acquire('hot', 'c' || :client_id, '1 minute'), 0) AS tok \gset
		\if :tok > 0
		SELECT fencing.lease_release('hot', :tok);
		\endif
	EOF
	# resource side: a row of this client's own and the client's next token
	local head='\set id random(0, :rows / :clients - 1) * :clients + :client_id + 1
\set n :n + 1
\set tok :base + :n'
	printf '%s\n%s\n' "$head" 'UPDATE bench_a SET v = v + 1, fence = :tok WHERE id = :id AND fencing.fence_allows(fence, :tok);' >"$S/res_a_check.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_a SET v = v + 1, fence = :tok WHERE id = :id AND fence < :tok;' >"$S/res_a_raw.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_b_guard SET v = v + 1, fence = :tok WHERE id = :id;' >"$S/res_b_guard.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_b_plain SET v = v + 1, fence = :tok WHERE id = :id;' >"$S/res_b_plain.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_c SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :id;' >"$S/res_c_advance.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_c SET v = v + 1, fence = :tok WHERE id = :id;' >"$S/res_c_raw.sql"
	cat >"$S/jq_fencing.sql" <<-'EOF'
		SELECT c.id AS jid, c.token AS jtok FROM job_queue.claim('q', 1, '5 minutes') AS c \gset
		SELECT job_queue.complete(:jid, :jtok, '{"ok": true}');
	EOF
	cat >"$S/jq_plain.sql" <<-'EOF'
		SELECT c.id AS jid, c.token AS jtok FROM plain_queue.claim('q', 1, '5 minutes') AS c \gset
		SELECT plain_queue.complete(:jid, :jtok, '{"ok": true}');
	EOF
}

# keep JQ_READY ready jobs in a queue
jq_topup() {
	Q -c "INSERT INTO $1.jobs (queue, payload)
		SELECT 'q', jsonb_build_object('n', g)
		  FROM generate_series(1, greatest(0, $JQ_READY -
		       (SELECT count(*) FROM $1.jobs WHERE state = 'ready'))) g" >/dev/null
}
# before every run on a queue: the same starting state for both contenders
jq_prepare() {
	Q -c "VACUUM $1.jobs" >/dev/null
	jq_topup "$1"
}

# counters read before and after a run: "a b"
count() {
	local spec=$1 db=$2
	case $spec in
	fencing) Q -d "$db" -c "SELECT coalesce(sum(acquires), 0) || ' ' || coalesce(sum(releases), 0) FROM fencing.lease_status" ;;
	plpgsql) Q -d "$db" -c "SELECT coalesce(sum(acquires), 0) || ' ' || coalesce(sum(releases), 0) FROM plpgsql_lease.leases" ;;
	plain)
		# no counters in the plain table: rows inserted + updated, from the
		# statistics, after pgbench's backends have gone and flushed them
		wait_backends_gone "$db"
		Q -d "$db" -c "SELECT n_tup_ins + n_tup_upd || ' 0' FROM pg_stat_user_tables WHERE relid = 'plain_lease.leases'::regclass" ;;
	sumv:*) Q -d "$db" -c "SELECT sum(v) || ' 0' FROM ${spec#sumv:}" ;;
	done:*) Q -d "$db" -c "SELECT count(*) || ' ' || count(*) FILTER (WHERE state = 'running') FROM ${spec#done:}.jobs WHERE state IN ('done', 'running')" ;;
	*) echo "0 0" ;;
	esac
}
wait_backends_gone() {
	local i
	for i in $(seq 1 50); do
		[ "$(Q -d "$1" -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" = 0 ] && break
		sleep 0.1
	done
	sleep 0.3
}

section() {
	SECTION_ID=$1
	SECTION_T0=$(stamp)
	SECTION_LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
	say "== section $1: $2"
}
section_end() {
	printf '%s\t%s\t%s\t%s\n' "$SECTION_ID" "$(awk -v a="$(stamp)" -v b="$SECTION_T0" 'BEGIN { printf "%.1f", a - b }')" \
		"$SECTION_LOAD0" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$O/sections.tsv"
}

# the common pgbench arguments of a contender, in PGB; every run gets a
# token base of its own (section 2's tokens only grow)
pgbench_args() {
	local c=$1 n=${2:-${CLIENTS[$1]}} j
	j=$n
	[ "$j" -gt 2 ] && j=2
	RUN=$((RUN + 1))
	PGB=(-n -M prepared -c "$n" -j "$j"
		-D pool="$POOL" -D rows="$RES_ROWS" -D clients="$n"
		-D n=0 -D base=$((TOKEN_BASE + RUN * 1000000000)))
}

# one pgbench run of one contender: a line in runs.tsv
# section contender round tps transactions granted errors failed_checks duration clients load1
run_one() {
	# (the words of one "local" are expanded before any is assigned: $2, not $c)
	local s=$1 c=$2 r=$3 dur=$4 db=${DBN[$2]}
	local before after logpos rc=0 tps tx failed aborted errs granted bad=""
	local spec=${COUNTER[$c]}
	case $spec in done:*) jq_prepare "${spec#done:}" ;; esac
	before=$(count "$spec" "$db")
	logpos=$(stat -c %s "$LOG")
	pgbench_args "$c"
	PGOPTIONS="${OPTS[$c]}" pgbench "${PGB[@]}" -T "$dur" \
		-f "$W/scripts/${SCRIPT[$c]}" "$db" >"$T/run.log" 2>&1 || rc=$?
	after=$(count "$spec" "$db")
	errs=$(tail -c +$((logpos + 1)) "$LOG" | grep -c 'ERROR:' || true)
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$T/run.log")
	tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$T/run.log")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$T/run.log")
	aborted=$(grep -c 'aborted' "$T/run.log" || true)
	: "${tps:=0}" "${tx:=0}" "${failed:=0}"
	[ "$rc" -ne 0 ] && bad="pgbench exit $rc;"
	[ "$aborted" -gt 0 ] && bad="$bad $aborted clients aborted;"
	[ "$failed" -gt 0 ] && bad="$bad $failed failed transactions;"
	set -- $before
	local b1=$1 b2=$2
	set -- $after
	local a1=$1 a2=$2
	case $spec in
	fencing | plpgsql)
		granted=$((a1 - b1))
		[ $((a2 - b2)) -ne "$granted" ] && bad="$bad $granted acquired but $((a2 - b2)) released;"
		;;
	plain)
		granted=$(((a1 - b1) / 2))
		;;
	sumv:*)
		granted=$((a1 - b1))
		[ "$granted" -ne "$tx" ] && bad="$bad $tx transactions but $granted rows changed;"
		;;
	done:*)
		granted=$((a1 - b1))
		[ "$granted" -ne "$tx" ] && bad="$bad $tx transactions but $granted jobs claimed;"
		[ $((a2 - b2)) -ne 0 ] && bad="$bad $((a2 - b2)) jobs left running;"
		;;
	*) granted=-1 ;;
	esac
	if [ -n "$bad" ] || [ "$errs" -gt 0 ]; then
		say "  !! $s $c round $r: $bad $errs server errors"
		sed 's/^/     /' "$T/run.log" | tail -n 20 >&2
		{ echo "== $s $c round $r: $bad $errs server errors"; tail -n 20 "$T/run.log"; } >>"$O/problems.txt"
	fi
	[ "$s" = warmup ] && return 0
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$c" "$r" "$tps" "$tx" "$granted" \
		"$errs" "${bad:-ok}" "$dur" "${CLIENTS[$c]}" "$(cut -d' ' -f1 /proc/loadavg)" >>"$O/runs.tsv"
	printf '  %-4s round %d  %-24s %10.1f tps  %8d tx  granted %s  errors %s  (%s)\n' \
		"$s" "$r" "$c" "$tps" "$tx" "$granted" "$errs" "$db" >&2
}

# all contenders once per round; the order rotates by one every round, so
# every contender runs in every position
rounds() {
	local s=$1 n=$2 dur=$3 r i k
	shift 3
	local cs=("$@")
	k=${#cs[@]}
	for r in $(seq 1 "$n"); do
		for i in $(seq 0 $((k - 1))); do
			run_one "$s" "${cs[$(((i + r - 1) % k))]}" "$r" "$dur"
		done
	done
}
# pairs back to back: A B in odd rounds, B A in even ones
pair_rounds() {
	local s=$1 n=$2 dur=$3 r p a b
	shift 3
	local pairs=("$@")
	for r in $(seq 1 "$n"); do
		for p in "${pairs[@]}"; do
			read -r a b <<<"$p"
			if [ $((r % 2)) -eq 1 ]; then
				run_one "$s" "$a" "$r" "$dur"; run_one "$s" "$b" "$r" "$dur"
			else
				run_one "$s" "$b" "$r" "$dur"; run_one "$s" "$a" "$r" "$dur"
			fi
		done
	done
}

# all contenders' scripts in ONE pgbench run (weight 1 each), so their
# transactions interleave and meet the same load; per-transaction latency
# per script from pgbench's log: a line in mixed.tsv
# section group contender transactions median_us trimmed_mean_us
mixed() {
	local s=$1 g=$2 dur=$3 clients=$4 opts=$5 c i=0 rc=0 logpos errs fs=() specs=()
	shift 5
	local cs=("$@")
	for c in "${cs[@]}"; do fs+=(-f "$W/scripts/${SCRIPT[$c]}@1"); done
	local before="" after=""
	for c in "${cs[@]}"; do
		case ${COUNTER[$c]} in done:*) jq_prepare "${COUNTER[$c]#done:}" ;; esac
	done
	# the row counters of the tables involved, each once (a pair may share one)
	for c in "${cs[@]}"; do case ${COUNTER[$c]} in sumv:* | done:*) specs+=("${COUNTER[$c]}") ;; esac; done
	[ ${#specs[@]} -gt 0 ] && mapfile -t specs < <(printf '%s\n' "${specs[@]}" | sort -u)
	for c in "${specs[@]}"; do before="$before $(count "$c" bench | cut -d' ' -f1)"; done
	logpos=$(stat -c %s "$LOG")
	rm -f "$T"/mixlog.*
	pgbench_args "${cs[0]}" "$clients"
	PGOPTIONS="$opts" pgbench "${PGB[@]}" -T "$dur" \
		-l --log-prefix="$T/mixlog" "${fs[@]}" bench >"$T/mix.log" 2>&1 || rc=$?
	for c in "${specs[@]}"; do after="$after $(count "$c" bench | cut -d' ' -f1)"; done
	errs=$(tail -c +$((logpos + 1)) "$LOG" | grep -c 'ERROR:' || true)
	local tx failed
	tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$T/mix.log")
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$T/mix.log")
	local changed=0 x
	for x in $after; do changed=$((changed + x)); done
	for x in $before; do changed=$((changed - x)); done
	if [ "$rc" -ne 0 ] || [ "${failed:-1}" -ne 0 ] || [ "$errs" -gt 0 ] ||
		{ [ -n "$before" ] && [ "$changed" -ne "${tx:-0}" ]; }; then
		say "  !! mixed $s $g: pgbench exit $rc, failed ${failed:-?}, server errors $errs, $tx tx, $changed rows/jobs"
		tail -n 20 "$T/mix.log" >&2
		{ echo "== mixed $s $g: exit $rc failed ${failed:-?} errors $errs tx $tx changed $changed"; tail -n 20 "$T/mix.log"; } >>"$O/problems.txt"
	fi
	# log line: client_id transaction_no latency_us script_no epoch_s epoch_us
	for c in "${cs[@]}"; do
		cat "$T"/mixlog.* | awk -v s=$i '$4 == s && $3 ~ /^[0-9]+$/ { print $3 }' | sort -n |
			awk -v S="$s" -v G="$g" -v C="$c" '{ v[NR] = $1 } END {
				if (NR == 0) { printf "%s\t%s\t%s\t0\t0\t0\n", S, G, C; exit }
				m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
				lo = int(NR * 0.05) + 1; hi = NR - int(NR * 0.05)
				for (i = lo; i <= hi; i++) { sum += v[i]; k++ }
				printf "%s\t%s\t%s\t%d\t%.1f\t%.2f\n", S, G, C, NR, m, sum / k }' >>"$O/mixed.tsv"
		i=$((i + 1))
	done
	rm -f "$T"/mixlog.*
	tail -n ${#cs[@]} "$O/mixed.tsv" | awk -F'\t' '{ printf "  %-4s mixed %-10s %-18s %8d tx  median %8.1f us  trimmed mean %8.2f us\n", $1, $2, $3, $4, $5, $6 }' >&2
}

# what the backends of one contender wait for: 250 samples of
# pg_stat_activity and pg_locks, 20 ms apart, during a run that is not
# measured.  A line per wait event in waits.tsv: contender event samples
sample_waits() {
	local c=$1 dur=$2
	pgbench_args "$c"
	PGOPTIONS="${OPTS[$c]}" pgbench "${PGB[@]}" -T "$dur" \
		-f "$W/scripts/${SCRIPT[$c]}" "${DBN[$c]}" >"$T/diag.log" 2>&1 &
	local pid=$!
	sleep 0.5
	Q -d "${DBN[$c]}" -F $'\t' <<-SQL | sed "s/^/$c\t/" >>"$O/waits.tsv"
		CREATE TEMP TABLE w (ev text);
		DO \$\$
		BEGIN
			FOR i IN 1..200 LOOP
				INSERT INTO w
				SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU (no wait event)')
				  FROM pg_stat_activity AS a
				 WHERE a.application_name = 'pgbench' AND a.state = 'active';
				-- the NOTIFY queue lock: a heavyweight lock on pg_database, object 0
				INSERT INTO w
				SELECT 'of those: waiting for the NOTIFY commit lock (pg_locks: object pg_database/0)'
				  FROM pg_locks AS l
				 WHERE l.locktype = 'object' AND l.classid = 'pg_database'::regclass
				   AND l.objid = 0 AND NOT l.granted;
				PERFORM pg_stat_clear_snapshot();
				PERFORM pg_sleep(0.02);
			END LOOP;
		END \$\$;
		SELECT ev, count(*) FROM w GROUP BY ev ORDER BY count(*) DESC;
	SQL
	wait "$pid" || true
	say "  waits of $c: $(awk -F'\t' -v c="$c" '$1 == c { printf "%s %s; ", $2, $3 }' "$O/waits.tsv")"
}

# ===========================================================================
# Part 1 (root or postgres): the extension, a work dir postgres owns, the
# run, bench/wait/run.sh, the report.  In a function, and called on the
# script's last line, so that editing this file while it runs cannot
# change what runs.
# ===========================================================================
main() {
	cd "$(dirname "$0")/.."
	. test/deps.sh
	export PATH="/usr/lib/postgresql/$FENCING_PG_MAJOR/bin:$PATH"
	T0=$(date +%s)

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
	command -v gnuplot >/dev/null ||
		echo "== gnuplot is not installed (apt-get install gnuplot-nox): no PNG this time" >&2
	command -v python3 >/dev/null || { echo "python3 is needed for the report" >&2; exit 1; }

	date=$(date -u +%Y%m%d-%H%M%S)
	mkdir -p "${BENCH_OUT:-bench/out}"
	work=$(mktemp -d /tmp/fencing-bench.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	# Others reinstall the extension while they test: run a private,
	# relocated copy of the installation (postgres finds its share and lib
	# directories relative to its binary, as in test/negative/negative_control.sh),
	# copied under the build lock, so the whole run measures one binary.
	local pgbin=/usr/lib/postgresql/$FENCING_PG_MAJOR orig_path=$PATH
	mkdir -p "$work/inst/usr/lib/postgresql" "$work/inst/usr/share/postgresql"
	if [ -w /tmp/fencing-build.lock ] || [ ! -e /tmp/fencing-build.lock ]; then
		exec 9>>/tmp/fencing-build.lock
		flock 9
	fi
	cp -a "$pgbin" "$work/inst/usr/lib/postgresql/"
	cp -a "/usr/share/postgresql/$FENCING_PG_MAJOR" "$work/inst/usr/share/postgresql/"
	flock -u 9 2>/dev/null || true
	exec 9>&-
	local so=$work/inst$pgbin/lib/fencing.so
	so_before="$(sha256sum "$so" | cut -c1-16) $(stat -c %y "$so")"
	export PATH="$work/inst$pgbin/bin:$PATH"
	[ "$(pg_config --pkglibdir)" = "$work/inst$pgbin/lib" ] || echo "== warning: the private installation is not relocated" >&2
	so_shared="$(sha256sum "$pkglibdir/fencing.so" | cut -c1-16)"
	# the runner, the contenders' SQL and the job queue recipe; not bench/wait/
	cp bench/run.sh bench/cluster_settings.sh bench/report.py bench/plpgsql_lease.sql bench/plain_lease.sql \
		bench/plain_queue.sql examples/job_queue.sql "$work/"
	[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$work"

	echo "== bench/run.sh, $MODE mode; work dir $work" >&2
	status=0
	fencing_as_postgres env PATH="$PATH" bash "$work/run.sh" --inner "$work" || status=$?
	so_after="$(sha256sum "$so" | cut -c1-16) $(stat -c %y "$so")"
	so_shared_after="$(sha256sum "$pkglibdir/fencing.so" | cut -c1-16) $(stat -c %y "$pkglibdir/fencing.so")"
	if [ $status -ne 0 ]; then
		tail -n 40 "$work/server.log" >&2 || true
		echo "bench/run.sh: FAILED (exit $status)" >&2
		exit 1
	fi
	printf 'so_before\t%s\nso_after\t%s\nso_shared_before\t%s\nso_shared_after\t%s\ngit\t%s\n' \
		"$so_before" "$so_after" "$so_shared" "$so_shared_after" \
		"$(git describe --always --dirty 2>/dev/null || echo '?')" >>"$work/out/machine.tsv"
	T1=$(date +%s)

	# ---- 6 handover latency: the colleague's bench/wait/run.sh, if present ----
	wait_status=absent
	if [ -f bench/wait/run.sh ]; then
		echo "== section 6: bench/wait/run.sh (timeout ${WAIT_TIMEOUT}s)" >&2
		wait_status=0
		# its own knobs (bench/wait/run.sh's header); smaller in quick mode
		local wait_env=()
		[ "$MODE" = quick ] && wait_env=(HANDOVERS=50 EXPIRIES=20 IDLE_SECONDS=3 RENEWALS=500)
		env PATH="$orig_path" "${wait_env[@]}" timeout "$WAIT_TIMEOUT" bash bench/wait/run.sh \
			>"$work/out/wait.txt" 2>&1 || wait_status=$?
		tail -n 15 "$work/out/wait.txt" >&2
	fi
	echo "$wait_status" >"$work/out/wait_status"
	T2=$(date +%s)
	printf 'main_s\t%s\nwait_s\t%s\n' $((T1 - T0)) $((T2 - T1)) >>"$work/out/machine.tsv"

	python3 bench/report.py "$work/out" "${BENCH_OUT:-bench/out}/report-$date" "$MODE"
	echo
	echo "(report: ${BENCH_OUT:-bench/out}/report-$date.md$([ -f "${BENCH_OUT:-bench/out}/report-$date.png" ] && echo ", plot: ${BENCH_OUT:-bench/out}/report-$date.png"); $((T2 - T0)) s in all)"
}

if [ "${1:-}" = "--inner" ]; then inner "$2"; exit 0; else main "$@"; exit $?; fi
