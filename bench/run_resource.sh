#!/usr/bin/env bash
# run_resource.sh: what the resource-side checks cost, measured with pgbench.
#
#   sudo bench/run_resource.sh          # about 4.5 minutes
#   ROUNDS=8 DURATION=4 MIXED=12 CLIENTS=2 ROWS=100000 sudo bench/run_resource.sh
#
# Three pairs of contenders, each a single-row UPDATE by primary key on a
# table of $ROWS rows:
#   (a) WHERE ... AND fencing.fence_check(fence, :tok)   vs  AND fence < :tok
#   (b) the same UPDATE on a table with the fence_guard trigger  vs  without
#   (c) SET fence = fencing.fence_advance(fence, :tok)   vs  SET fence = :tok
# Tokens always pass: every client writes only its own rows (id mod clients
# = client_id) with a per-client counter that only grows, on top of a base
# that grows with every pgbench run, so each write carries a token newer
# than the row's fence.  After each run the script checks that every
# transaction changed exactly one row.
#
# All contenders run in ONE throwaway cluster, in two ways:
#  1. separate pgbench runs of $DURATION s, alternating in every round (A B,
#     then B A, ...), $ROUNDS rounds.  Each contender is reported as the
#     median TPS over the rounds and min-max; each pair as the ratio of the
#     medians and the median of the per-round ratios (A and B of one round
#     ran back to back, so that one is less sensitive to load that drifts).
#  2. one pgbench run of $MIXED s per pair with both scripts (weight 1 each),
#     so that A and B transactions interleave and meet the same machine
#     load; per-transaction latencies from pgbench's log (microseconds),
#     reported as median and 5%-trimmed mean (the slowest and fastest 5%
#     left out) per contender and as latency ratios B / A
#     (comparable to a TPS ratio A / B).  On a machine that other work
#     shares, this is the number to trust.
#
# Run as root: the cluster runs as user postgres under pg_virtualenv, in a
# copy of bench/ that postgres owns.  The extension must be installed
# (scripts/test.sh does that); if it is not, it is built and installed here
# under the same lock scripts/test.sh takes.  Results: stdout and
# bench/results/resource-<date>.md.
set -euo pipefail
export LC_ALL=C

ROUNDS=${ROUNDS:-8}
DURATION=${DURATION:-4}
MIXED=${MIXED:-12}
CLIENTS=${CLIENTS:-2}
ROWS=${ROWS:-100000}

# ---------------------------------------------------------------------------
# Part 2 (as postgres, inside pg_virtualenv): the measurements.
# ---------------------------------------------------------------------------
if [ "${1:-}" = "--inner" ]; then
	out=$2
	cd "$(dirname "$0")"
	T=$(mktemp -d /tmp/fencing-bench.XXXXXX)
	trap 'rm -rf "$T"' EXIT
	PSQL="psql -X -q -v ON_ERROR_STOP=1"

	# CPU-bound measurements: commit without waiting for the WAL flush, so
	# fsync latency does not drown the cost of the checks
	$PSQL -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null
	$PSQL <<-SQL
		CREATE EXTENSION fencing;
		CREATE FUNCTION pg_temp.mk(name text) RETURNS void LANGUAGE plpgsql AS \$\$
		BEGIN
			EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 0,
			                 fence bigint NOT NULL, pad text NOT NULL) WITH (fillfactor = 80)', name);
			EXECUTE format('INSERT INTO %I (id, fence, pad)
			                SELECT g, 1, repeat(''x'', 40) FROM generate_series(1, $ROWS) g', name);
		END \$\$;
		SELECT pg_temp.mk('bench_a');
		SELECT pg_temp.mk('bench_b_guard');
		SELECT pg_temp.mk('bench_b_plain');
		SELECT pg_temp.mk('bench_c');
		CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON bench_b_guard
			FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
		VACUUM ANALYZE;
	SQL

	# every script: a row of this client's own, and the client's next token
	head='\set id random(0, :rows / :clients - 1) * :clients + :client_id + 1
\set n :n + 1
\set tok :base + :n'
	printf '%s\n%s\n' "$head" 'UPDATE bench_a SET v = v + 1, fence = :tok WHERE id = :id AND fencing.fence_check(fence, :tok);' >"$T/a_check.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_a SET v = v + 1, fence = :tok WHERE id = :id AND fence < :tok;' >"$T/a_raw.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_b_guard SET v = v + 1, fence = :tok WHERE id = :id;' >"$T/b_guard.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_b_plain SET v = v + 1, fence = :tok WHERE id = :id;' >"$T/b_plain.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_c SET v = v + 1, fence = fencing.fence_advance(fence, :tok) WHERE id = :id;' >"$T/c_advance.sql"
	printf '%s\n%s\n' "$head" 'UPDATE bench_c SET v = v + 1, fence = :tok WHERE id = :id;' >"$T/c_raw.sql"

	declare -A table=([a_check]=bench_a [a_raw]=bench_a [b_guard]=bench_b_guard
		[b_plain]=bench_b_plain [c_advance]=bench_c [c_raw]=bench_c)
	pairs=("a_check a_raw" "b_guard b_plain" "c_advance c_raw")
	run=0
	: >"$T/tps"
	load_before=$(cut -d' ' -f1-3 /proc/loadavg)

	run_one() {
		local c=$1 round=$2 before after tx tps
		run=$((run + 1))
		before=$($PSQL -At -c "SELECT sum(v) FROM ${table[$c]}")
		pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$DURATION" \
			-D rows="$ROWS" -D clients="$CLIENTS" -D n=0 \
			-D base=$((run * 1000000000)) \
			-f "$T/$c.sql" >"$T/$c.$round.log" 2>&1 || {
			cat "$T/$c.$round.log" >&2
			return 1
		}
		after=$($PSQL -At -c "SELECT sum(v) FROM ${table[$c]}")
		tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$T/$c.$round.log")
		tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$T/$c.$round.log")
		if [ -z "$tx" ] || [ -z "$tps" ] || [ $((after - before)) -ne "$tx" ]; then
			echo "contender $c round $round: $tx transactions but $((after - before)) rows changed" >&2
			cat "$T/$c.$round.log" >&2
			return 1
		fi
		grep -q '^number of failed transactions: 0 ' "$T/$c.$round.log" || {
			echo "contender $c round $round: failed transactions" >&2
			cat "$T/$c.$round.log" >&2
			return 1
		}
		echo "$c $round $tps $tx" >>"$T/tps"
		printf '  round %d  %-10s %10.1f tps  (%d transactions, each changed 1 row)\n' "$round" "$c" "$tps" "$tx" >&2
	}

	for round in $(seq 1 "$ROUNDS"); do
		for p in "${pairs[@]}"; do
			set -- $p
			# alternate the order: A B in odd rounds, B A in even ones
			if [ $((round % 2)) -eq 1 ]; then
				run_one "$1" "$round"; run_one "$2" "$round"
			else
				run_one "$2" "$round"; run_one "$1" "$round"
			fi
		done
	done

	# both scripts of a pair in one run; per-transaction log
	sum_v() {
		local t sum=0 x
		for t in $(printf '%s\n' "$@" | sort -u); do
			x=$($PSQL -At -c "SELECT sum(v) FROM $t")
			sum=$((sum + x))
		done
		echo $sum
	}
	for p in "${pairs[@]}"; do
		set -- $p
		run=$((run + 1))
		before=$(sum_v "${table[$1]}" "${table[$2]}")
		pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$MIXED" \
			-D rows="$ROWS" -D clients="$CLIENTS" -D n=0 \
			-D base=$((run * 1000000000)) \
			-l --log-prefix="$T/mixlog_$1" \
			-f "$T/$1.sql@1" -f "$T/$2.sql@1" >"$T/mix_$1.log" 2>&1 || {
			cat "$T/mix_$1.log" >&2
			exit 1
		}
		after=$(sum_v "${table[$1]}" "${table[$2]}")
		tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$T/mix_$1.log")
		if [ -z "$tx" ] || [ $((after - before)) -ne "$tx" ] ||
			! grep -q '^number of failed transactions: 0 ' "$T/mix_$1.log"; then
			echo "mixed run $1 / $2: $tx transactions but $((after - before)) rows changed" >&2
			cat "$T/mix_$1.log" >&2
			exit 1
		fi
		# log line: client_id transaction_no latency_us script_no epoch_s epoch_us
		for i in 0 1; do
			cat "$T"/mixlog_"$1".* | awk -v s=$i '$4 == s { print $3 }' | sort -n |
				awk '{ v[NR] = $1 } END {
					m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
					lo = int(NR * 0.05) + 1; hi = NR - int(NR * 0.05)
					for (i = lo; i <= hi; i++) { sum += v[i]; k++ }
					printf "%d %.1f %.2f\n", NR, m, sum / k }'
		done | paste -sd' ' | sed "s/^/$1 $2 /" >>"$T/mixed"
		read -r _ _ n1 med1 mean1 n2 med2 mean2 < <(tail -n1 "$T/mixed")
		printf '  mixed    %-10s %d tx, median %s us, trimmed mean %s us | %-10s %d tx, median %s us, trimmed mean %s us\n' \
			"$1" "$n1" "$med1" "$mean1" "$2" "$n2" "$med2" "$mean2" >&2
		rm -f "$T"/mixlog_"$1".*
	done
	load_after=$(cut -d' ' -f1-3 /proc/loadavg)

	# median, min, max per contender
	stats() {
		awk -v c="$1" '$1 == c { print $3 }' "$T/tps" | sort -n |
			awk '{ v[NR] = $1 } END {
				m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
				printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'
	}
	pg_version=$($PSQL -At -c "SELECT version()")
	settings=$($PSQL -At -F ' = ' -c "SELECT name, setting || coalesce(unit, '') FROM pg_settings
		WHERE name IN ('shared_buffers', 'synchronous_commit', 'fsync', 'wal_level',
		               'max_wal_size', 'autovacuum', 'jit', 'max_connections')
		ORDER BY name")
	{
		echo "# fencing: resource-side benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
		echo
		echo "## Machine"
		echo
		echo "- CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), nproc = $(nproc)"
		echo "- memory: $(free -g | awk '/^Mem:/ { print $2 }') GiB; kernel $(uname -r)"
		echo "- $pg_version"
		echo "- $(pgbench --version)"
		echo "- load average before / after: $load_before / $load_after"
		echo
		echo "## Settings"
		echo
		echo "- throwaway cluster started by pg_virtualenv (its postgresql.conf, which has fsync = off), plus ALTER SYSTEM SET synchronous_commit = off"
		echo "- tables: $ROWS rows each (id int primary key, v bigint, fence bigint, pad text(40)), fillfactor 80, VACUUM ANALYZE before the runs"
		echo "- separate runs: pgbench -n -M prepared -c $CLIENTS -j $CLIENTS -T $DURATION -f <contender>, one run per contender per round, $ROUNDS rounds, contenders alternating (A B / B A)"
		echo "- mixed runs: pgbench -n -M prepared -c $CLIENTS -j $CLIENTS -T $MIXED -l -f <A>@1 -f <B>@1, one per pair, after the rounds"
		echo "- each transaction: one UPDATE of a random row of the client's own (id mod $CLIENTS = client_id) with a token newer than the row's fence; checked after every run that each transaction changed exactly one row"
		echo "- server settings:"
		echo "$settings" | sed 's/^/  - /'
		echo
		echo "## Statements"
		echo
		for c in a_check a_raw b_guard b_plain c_advance c_raw; do
			printf -- '- %s: `%s`\n' "$c" "$(tail -n1 "$T/$c.sql")"
		done
		echo "- b_guard's table has: \`CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence')\`"
		echo
		echo "## Results (TPS)"
		echo
		echo "| pair | contender | median | min - max | per round |"
		echo "|---|---|---:|---:|---|"
		for p in "${pairs[@]}"; do
			set -- $p
			for c in "$1" "$2"; do
				read -r med lo hi < <(stats "$c")
				rounds=$(awk -v c="$c" '$1 == c { printf "%s%.0f", sep, $3; sep = ", " }' "$T/tps")
				echo "| ${p%% *} vs ${p##* } | $c | $med | $lo - $hi | $rounds |"
			done
		done
		echo
		echo "| pair | ratio of medians | median of per-round ratios | target |"
		echo "|---|---:|---:|---|"
		for p in "${pairs[@]}"; do
			set -- $p
			read -r m1 _ _ < <(stats "$1")
			read -r m2 _ _ < <(stats "$2")
			ratio=$(awk -v a="$m1" -v b="$m2" 'BEGIN { printf "%.3f", a / b }')
			paired=$(awk -v a="$1" -v b="$2" '$1 == a { x[$2] = $3 } $1 == b { y[$2] = $3 }
				END { for (r in x) print x[r] / y[r] }' "$T/tps" | sort -n |
				awk '{ v[NR] = $1 } END {
					printf "%.3f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
			case $1 in
			a_check) target="fence_check / raw >= 0.98: $(awk -v r="$ratio" 'BEGIN { print (r >= 0.98) ? "met" : "NOT met" }')" ;;
			b_guard) target="trigger overhead <= 5% (ratio >= 0.95): $(awk -v r="$ratio" 'BEGIN { print (r >= 0.95) ? "met" : "NOT met" }'), overhead $(awk -v r="$ratio" 'BEGIN { printf "%.1f%%", (1 - r) * 100 }')" ;;
			c_advance) target="(no target) overhead $(awk -v r="$ratio" 'BEGIN { printf "%.1f%%", (1 - r) * 100 }')" ;;
			esac
			echo "| $1 / $2 | $ratio | $paired | $target |"
		done
		echo
		echo "## Mixed runs: both contenders of a pair in one pgbench run (per-transaction latency, microseconds)"
		echo
		echo "| pair | A: transactions | A: median | A: trimmed mean | B: transactions | B: median | B: trimmed mean | B / A median | B / A trimmed mean | target |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
		while read -r a b n1 med1 mean1 n2 med2 mean2; do
			rm=$(awk -v x="$med1" -v y="$med2" 'BEGIN { printf "%.3f", y / x }')
			ra=$(awk -v x="$mean1" -v y="$mean2" 'BEGIN { printf "%.3f", y / x }')
			case $a in
			a_check) target="fence_check / raw >= 0.98: $(awk -v r="$ra" 'BEGIN { print (r >= 0.98) ? "met" : "NOT met" }') (trimmed mean)" ;;
			b_guard) target="trigger overhead <= 5%: $(awk -v r="$ra" 'BEGIN { print (r >= 0.95) ? "met" : "NOT met" }'), overhead $(awk -v r="$ra" 'BEGIN { printf "%.1f%%", (1 / r - 1) * 100 }') (trimmed mean)" ;;
			c_advance) target="(no target) overhead $(awk -v r="$ra" 'BEGIN { printf "%.1f%%", (1 / r - 1) * 100 }') (trimmed mean)" ;;
			esac
			echo "| A = $a, B = $b | $n1 | $med1 | $mean1 | $n2 | $med2 | $mean2 | $rm | $ra | $target |"
		done <"$T/mixed"
		echo
		echo "B / A below 1 means A (the fenced statement) takes longer; overhead = A / B - 1 (trimmed means)."
	} >"$out"
	exit 0
fi

# ---------------------------------------------------------------------------
# Part 1: find the extension, start a throwaway cluster as postgres.
# ---------------------------------------------------------------------------
cd "$(dirname "$0")/.."
. scripts/deps.sh
export PATH="/usr/lib/postgresql/$FENCING_PG_MAJOR/bin:$PATH"

sharedir=$(pg_config --sharedir)
pkglibdir=$(pg_config --pkglibdir)
if [ ! -f "$sharedir/extension/fencing.control" ] || [ ! -f "$pkglibdir/fencing.so" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "the fencing extension is not installed; run scripts/test.sh (as root) first" >&2
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

mkdir -p bench/results
result="bench/results/resource-$(date -u +%Y%m%d-%H%M%S).md"
work=$(mktemp -d /tmp/fencing-bench-run.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp bench/run_resource.sh "$work/"
[ "$(id -u)" -eq 0 ] && chown -R postgres:postgres "$work"

echo "== $ROUNDS rounds x 6 contenders x $DURATION s, then 3 mixed runs x $MIXED s; $CLIENTS clients, $ROWS rows per table" >&2
status=0
for try in 1 2 3 4 5; do
	status=0
	fencing_as_postgres env ROUNDS="$ROUNDS" DURATION="$DURATION" MIXED="$MIXED" CLIENTS="$CLIENTS" ROWS="$ROWS" \
		pg_virtualenv -v "$FENCING_PG_MAJOR" \
		bash "$work/run_resource.sh" --inner "$work/result.md" \
		2> >(tee "$work/stderr" | grep --line-buffered '^  round ' >&2) >/dev/null || status=$?
	# several checkouts start clusters at once: retry a port clash
	grep -q 'Port conflict' "$work/stderr" || break
	sleep $((RANDOM % 5 + 1))
done
if [ $status -ne 0 ] || [ ! -s "$work/result.md" ]; then
	cat "$work/stderr" >&2
	echo "run_resource.sh: FAILED (exit $status)" >&2
	exit 1
fi
cp "$work/result.md" "$result"
echo
cat "$result"
echo
echo "(written to $result)"
