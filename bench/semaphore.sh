#!/usr/bin/env bash
# bench/semaphore.sh: what a counting semaphore costs, against the lease
# cycle and against the semaphore a user would write in plain SQL.
#
#   sudo bench/semaphore.sh            # full mode, about 5 minutes
#   sudo bench/semaphore.sh --quick    # about 2 minutes
#
# Builds this tree into a private, relocated copy of the server
# installation (never the system's), starts a throwaway cluster with the
# settings of bench/run.sh (fsync = off unless FSYNC=on, synchronous_commit
# = on), and runs groups.  A group is a number of slots N and ONE pgbench
# run in which every contender has clients of its own: one script
# dispatches on :client_id, so each contender's clients meet the same
# machine load at the same moment, and each contender sees exactly the
# contention it is given.  Contenders, each a cycle of two statements
# (two commits), acquire for 1 minute and release if granted:
#   lease      fencing.lease_acquire + lease_release, a random name out of
#              POOL (1000): the lease cycle of bench/run.sh
#   lease_one  the same on one name (a semaphore of one slot is a lease)
#   sem        fencing.semaphore_acquire(name, holder, N, ttl) +
#              lease_release, all clients on one name
#   plain      bench/plain_semaphore.sql: N slot rows, UPDATE ... WHERE
#              slot = (SELECT ... FOR UPDATE SKIP LOCKED), UPDATE to release
#   advisory   pg_try_advisory_lock over N keys + pg_advisory_unlock
#              (session locks: no WAL, no token, no durability: the floor)
# A NULL result (every slot taken) is an attempt like any other.  Per
# contender: transactions, median and 5%-trimmed mean latency from
# pgbench's log, grants from the rows' counters.  Groups rotate over
# ROUNDS rounds; a ratio is the median of the per-round ratios.  Writes
# bench/out/semaphore-<UTC date>.md.  bench/README.md says more.
set -euo pipefail
export LC_ALL=C
: "${FENCING_PG_MAJOR:=15}"

MODE=full
[ "${1:-}" = "--quick" ] && MODE=quick
if [ "$MODE" = quick ]; then
	: "${ROUNDS:=2}" "${DUR:=5}"
else
	: "${ROUNDS:=4}" "${DUR:=10}"
fi
: "${POOL:=1000}"
: "${FSYNC:=off}"
: "${SHARED_BUFFERS:=256MB}"
# group = id:slots:contender=clients,...  (see the header)
: "${GROUPS_SPEC:=1:1:lease=1,sem=1,plain=1,advisory=1
2:1:lease=4,lease_one=4,sem=4,plain=4,advisory=4
3:8:lease=8,sem=8,plain=8,advisory=8
4:8:lease=8,sem=24,plain=24,advisory=8
5:64:lease=8,sem=8,plain=8,advisory=8
6:64:lease=8,sem=128,plain=128,advisory=8}"
export MODE ROUNDS DUR POOL FSYNC SHARED_BUFFERS GROUPS_SPEC FENCING_PG_MAJOR

# ===========================================================================
# Part 2 (as postgres): the cluster and the runs.  $2 = work dir.
# ===========================================================================
inner() {
	W=$1
	O=$W/out
	D=$W/data
	LOG=$W/server.log
	S=$W/scripts
	mkdir -p "$O" "$S"
	cd "$W"
	PORT=$((20000 + RANDOM % 20000))
	export PGHOST=$W PGPORT=$PORT PGUSER=postgres PGDATABASE=bench
	Q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
	say() { printf '%s\n' "$*" >&2; }

	local maxc=20 line gid n spec c k
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		spec=${line#*:*:}
		k=0
		for c in ${spec//,/ }; do k=$((k + ${c#*=})); done
		[ $((k + 10)) -gt "$maxc" ] && maxc=$((k + 10))
	done <<<"$GROUPS_SPEC"

	initdb -D "$D" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
	. "$W/cluster_settings.sh"
	bench_cluster_settings "bench/semaphore.sh (the settings of bench/run.sh)" "$maxc" >>"$D/postgresql.conf"
	pg_ctl -D "$D" -l "$LOG" -w -t 120 start >/dev/null
	trap 'pg_ctl -D "$D" -m immediate -w stop >/dev/null 2>&1 || true' EXIT
	Q -d postgres -c "CREATE DATABASE bench"
	say "== cluster up (fsync = $FSYNC, synchronous_commit = on, max_connections = $maxc)"

	# every name and slot exists and is free before the first run
	Q -c "CREATE EXTENSION fencing" -f "$W/plain_semaphore.sql" >/dev/null
	Q -c "SELECT count(fencing.lease_release('l' || g, fencing.lease_acquire('l' || g, 'init', '1 minute')))
	        FROM generate_series(1, $POOL) g" >/dev/null
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		IFS=: read -r gid n spec <<<"$line"
		Q -c "SELECT fencing.lease_release('one$gid', fencing.lease_acquire('one$gid', 'init', '1 minute'))" \
			-c "CREATE TEMP TABLE t AS
			      SELECT fencing.semaphore_acquire('s$gid', 'init' || g, $n, '1 minute') AS t
			        FROM generate_series(1, $n) g" \
			-c "SELECT count(fencing.lease_release('s$gid', t)) FROM t" \
			-c "INSERT INTO plain_sem.slots SELECT 'p$gid', g, 'init', nextval('plain_sem.token_seq'),
			      clock_timestamp() FROM generate_series(0, $n - 1) g" >/dev/null
		[ "$(Q -c "SELECT count(*) FROM fencing.leases WHERE name = 's$gid'")" = "$n" ] ||
			{ say "semaphore s$gid does not have $n slots"; exit 1; }
		write_script "$gid" "$n" "$spec"
	done <<<"$GROUPS_SPEC"
	Q -c "VACUUM ANALYZE" -c "CHECKPOINT"

	{
		echo "cpu_model	$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n1)"
		echo "nproc	$(nproc)"
		echo "mem_total	$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
		echo "kernel	$(uname -r)"
		echo "pg_version	$(Q -c 'SELECT version()')"
	} >"$O/machine.tsv"
	Q -F $'\t' -c "SELECT name, current_setting(name) FROM pg_settings
		WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'wal_level',
		               'wal_sync_method', 'max_connections', 'jit', 'autovacuum',
		               'full_page_writes', 'default_transaction_isolation')
		ORDER BY name" >"$O/settings.tsv"

	: >"$O/runs.tsv"
	: >"$O/problems.txt"
	: >"$O/plain_tokens.tsv"
	local r i ng
	mapfile -t groups < <(grep -v '^$' <<<"$GROUPS_SPEC")
	ng=${#groups[@]}
	# warm-up: a second of every group, not measured
	for line in "${groups[@]}"; do run_group "$line" 0 1; done
	for r in $(seq 1 "$ROUNDS"); do
		for i in $(seq 0 $((ng - 1))); do
			run_group "${groups[$(((i + r - 1) % ng))]}" "$r" "$DUR"
		done
	done
	cp "$LOG" "$O/server.log"
}

# one script per group: contender i runs on clients [lo_i, hi_i)
write_script() {
	local gid=$1 n=$2 spec=$3 c k lo=0 kw=\\if f=$S/g$1.sql
	: >"$f"
	for c in ${spec//,/ }; do
		k=${c#*=}
		c=${c%=*}
		printf '%s :client_id < %d\n' "$kw" $((lo + k)) >>"$f"
		kw=\\elif
		lo=$((lo + k))
		case $c in
		lease) cat >>"$f" <<-'EOF' ;;
			\set n random(1, :pool)
			SELECT coalesce(fencing.lease_acquire('l' || :n, 'c' || :client_id, '1 minute'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('l' || :n, :tok);
			\endif
		EOF
		lease_one) cat >>"$f" <<-'EOF' ;;
			SELECT coalesce(fencing.lease_acquire('one' || :g, 'c' || :client_id, '1 minute'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('one' || :g, :tok);
			\endif
		EOF
		sem) cat >>"$f" <<-'EOF' ;;
			SELECT coalesce(fencing.semaphore_acquire('s' || :g, 'c' || :client_id, :slots, '1 minute'), 0) AS tok \gset
			\if :tok > 0
			SELECT fencing.lease_release('s' || :g, :tok);
			\endif
		EOF
		plain) cat >>"$f" <<-'EOF' ;;
			WITH a AS (UPDATE plain_sem.slots SET holder = 'c' || :client_id, token = nextval('plain_sem.token_seq'), expires_at = clock_timestamp() + interval '1 minute' WHERE name = 'p' || :g AND slot = (SELECT slot FROM plain_sem.slots WHERE name = 'p' || :g AND slot < CAST(:slots AS int) AND expires_at <= clock_timestamp() ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING token) SELECT coalesce((SELECT token FROM a), 0) AS tok \gset
			\if :tok > 0
			UPDATE plain_sem.slots SET expires_at = clock_timestamp() WHERE name = 'p' || :g AND token = :tok AND expires_at > clock_timestamp();
			\endif
		EOF
		advisory) cat >>"$f" <<-'EOF' ;;
			SELECT coalesce((SELECT k FROM generate_series(1, CAST(:slots AS int)) AS k WHERE pg_try_advisory_lock(CAST(:g AS int), k) LIMIT 1), 0) AS tok \gset
			\if :tok > 0
			SELECT pg_advisory_unlock(CAST(:g AS int), CAST(:tok AS int));
			\endif
		EOF
		*) echo "unknown contender $c" >&2; exit 1 ;;
		esac
	done
	echo '\endif' >>"$f"
}

# grants of a contender so far: "acquires releases"
counters() {
	local gid=$1 c=$2
	case $c in
	lease) Q -c "SELECT sum(acquires) || ' ' || sum(releases) FROM fencing.leases WHERE name LIKE 'l%'" ;;
	lease_one) Q -c "SELECT sum(acquires) || ' ' || sum(releases) FROM fencing.leases WHERE name = 'one$gid'" ;;
	sem) Q -c "SELECT sum(acquires) || ' ' || sum(releases) FROM fencing.leases WHERE name = 's$gid'" ;;
	# no counters in the plain table: the table's updates (an acquire that
	# found a slot and its release: two; from the statistics, once the
	# backends have exited) and the group's slots still held.  Not the
	# tokens drawn: an acquire that meets a concurrent update of the row it
	# locked evaluates its SET list (nextval) again, so tokens have gaps.
	plain) Q -c "SELECT (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = 'plain_sem.slots'::regclass)
	               || ' ' || count(*) FILTER (WHERE expires_at > clock_timestamp())
	               || ' ' || (SELECT last_value FROM plain_sem.token_seq)
	               FROM plain_sem.slots WHERE name = 'p$gid'" ;;
	*) echo "0 0" ;;
	esac
}

# one pgbench run of a group; a line per contender in runs.tsv:
# group slots round contender clients tx median_us trimmed_us p95_us grants load1 dur
run_group() {
	local line=$1 r=$2 dur=$3 gid n spec c k lo=0 rc=0 logpos errs failed aborted total=0
	IFS=: read -r gid n spec <<<"$line"
	local -A before after
	local cs=()
	for c in ${spec//,/ }; do total=$((total + ${c#*=})); cs+=("${c%=*}"); done
	# the plain table's statistics come from backends that have exited
	wait_backends_gone
	for c in "${cs[@]}"; do before[$c]=$(counters "$gid" "$c"); done
	logpos=$(stat -c %s "$LOG")
	rm -f "$W"/mixlog.*
	pgbench -n -M prepared -c "$total" -j 2 -T "$dur" -D pool="$POOL" -D g="$gid" -D slots="$n" \
		-l --log-prefix="$W/mixlog" -f "$S/g$gid.sql" bench >"$W/pgbench.out" 2>&1 || rc=$?
	wait_backends_gone
	for c in "${cs[@]}"; do after[$c]=$(counters "$gid" "$c"); done
	errs=$(tail -c +$((logpos + 1)) "$LOG" | grep -c 'ERROR:' || true)
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$W/pgbench.out")
	aborted=$(grep -c 'aborted' "$W/pgbench.out" || true)
	local load
	load=$(cut -d' ' -f1 /proc/loadavg)
	if [ "$rc" -ne 0 ] || [ "${failed:-0}" -ne 0 ] || [ "$aborted" -gt 0 ] || [ "$errs" -gt 0 ]; then
		say "  !! group $gid round $r: pgbench exit $rc, failed ${failed:-?}, aborted $aborted, server errors $errs"
		tail -n 20 "$W/pgbench.out" >&2
		{ echo "== group $gid round $r: exit $rc failed ${failed:-?} aborted $aborted errors $errs"
		  tail -n 20 "$W/pgbench.out"; tail -c +$((logpos + 1)) "$LOG" | grep 'ERROR:' | head -n 5; } >>"$O/problems.txt"
	fi
	[ "$r" = 0 ] && { rm -f "$W"/mixlog.*; return 0; }
	# log line: client_id transaction_no latency_us script_no epoch_s epoch_us
	for c in ${spec//,/ }; do
		k=${c#*=}
		c=${c%=*}
		local b a grants
		read -r -a b <<<"${before[$c]}"
		read -r -a a <<<"${after[$c]}"
		case $c in
		lease | lease_one | sem)
			grants=$((a[0] - b[0]))
			[ $((a[1] - b[1])) -ne "$grants" ] && problem "group $gid round $r: $c granted $grants, released $((a[1] - b[1]))" ;;
		plain)
			grants=$(((a[0] - b[0]) / 2))
			[ $(((a[0] - b[0]) % 2)) -ne 0 ] && problem "group $gid round $r: plain: an odd number of updates, $((a[0] - b[0]))"
			[ "${a[1]}" -ne 0 ] && problem "group $gid round $r: plain: ${a[1]} slots still held after the run"
			printf '%s\t%s\t%s\t%s\n' "$gid" "$r" "$grants" $((a[2] - b[2])) >>"$O/plain_tokens.tsv" ;;
		*) grants=-1 ;;
		esac
		cat "$W"/mixlog.* | awk -v lo=$lo -v hi=$((lo + k)) '$1 >= lo && $1 < hi && $3 ~ /^[0-9]+$/ { print $3 }' | sort -n |
			awk -v G="$gid" -v N="$n" -v R="$r" -v C="$c" -v K="$k" -v GR="$grants" -v L="$load" -v DUR="$dur" '
			{ v[NR] = $1 } END {
				if (NR == 0) { printf "%s\t%s\t%s\t%s\t%s\t0\t0\t0\t0\t%s\t%s\t%s\n", G, N, R, C, K, GR, L, DUR; exit }
				m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
				lo = int(NR * 0.05) + 1; hi = NR - int(NR * 0.05)
				for (i = lo; i <= hi; i++) { sum += v[i]; j++ }
				p = v[int(NR * 0.95) > 0 ? int(NR * 0.95) : 1]
				printf "%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t%.2f\t%.1f\t%s\t%s\t%s\n", G, N, R, C, K, NR, m, sum / j, p, GR, L, DUR }' >>"$O/runs.tsv"
		lo=$((lo + k))
	done
	rm -f "$W"/mixlog.*
	tail -n ${#cs[@]} "$O/runs.tsv" | awk -F'\t' '{
		printf "  group %s (N=%s) round %s  %-9s %3d clients %8d tx  median %8.1f us  trimmed %8.1f us  grants %s\n",
		       $1, $2, $3, $4, $5, $6, $7, $8, $10 }' >&2
}
problem() {
	say "  !! $*"
	echo "== $*" >>"$O/problems.txt"
}
wait_backends_gone() {
	local i
	for i in $(seq 1 100); do
		[ "$(Q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'")" = 0 ] && break
		sleep 0.1
	done
	# a backend's table statistics reach the shared stats when it exits
	Q -c "SELECT pg_stat_force_next_flush()" >/dev/null
	sleep 0.2
}

if [ "${1:-}" = "--inner" ]; then inner "$2"; exit 0; fi

# ===========================================================================
# Part 1 (root): a private build, the run as postgres, the report.
# ===========================================================================
cd "$(dirname "$0")/.."
. test/deps.sh
[ "$(id -u)" -eq 0 ] || { echo "run as root (the cluster runs as postgres)" >&2; exit 1; }
T0=$(date +%s)
date=$(date -u +%Y%m%d-%H%M%S)
git_desc=$(git describe --always --dirty 2>/dev/null || echo '?')
work=$(mktemp -d /tmp/fencing-sem-bench.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

# this tree, built into a private relocated copy of the installation: the
# system's installation may be another tree's (or lack semaphore_acquire)
exec 9>>/tmp/fencing-build.lock
flock 9
mkdir -p "$work/src"
tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=tmp_check --exclude=results -cf - . | tar -xf - -C "$work/src"
fencing_private_install "$work/inst"
flock -u 9
exec 9>&-
(cd "$work/src" && make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" \
	PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter" >/dev/null &&
	make -s PG_CONFIG="$FENCING_PG_BINDIR/pg_config" install >/dev/null)
so=$("$FENCING_PG_BINDIR/pg_config" --pkglibdir)/fencing.so
so_id="$(sha256sum "$so" | cut -c1-16)"
cp bench/semaphore.sh bench/cluster_settings.sh bench/plain_semaphore.sql "$work/"
chown -R postgres:postgres "$work"
echo "== bench/semaphore.sh, $MODE mode, $ROUNDS rounds of $DUR s; work dir $work" >&2
fencing_as_postgres env PATH="$FENCING_PG_BINDIR:$PATH" bash "$work/semaphore.sh" --inner "$work" ||
	{ tail -n 40 "$work/server.log" >&2 || true; echo "bench/semaphore.sh: FAILED" >&2; exit 1; }
printf 'so\t%s\ngit\t%s\nseconds\t%s\n' "$so_id" "$git_desc" $(($(date +%s) - T0)) >>"$work/out/machine.tsv"

mkdir -p "${BENCH_OUT:-bench/out}"
out=${BENCH_OUT:-bench/out}/semaphore-$date.md
python3 bench/semaphore_report.py "$work/out" "$out" "$MODE" "$ROUNDS" "$DUR" "$POOL"
echo
echo "(report: $out; $(($(date +%s) - T0)) s in all)"
