#!/usr/bin/env bash
# run.sh: install build dependencies, build with -Wall -Wextra -Werror,
# install, and run every suite: pg_regress, isolation specs, the
# documentation's code blocks (test/docs/doc_test.sh), TAP tests, the soak
# run's short mode (bench/soak.sh --short), the negative
# control and the model check on PostgreSQL 15; then the version matrix
# (test/matrix.sh: build, regress, isolation and the token TAP tests on
# 16, 17 and 18).
#
#   sudo test/run.sh                 # everything
#   FENCING_SUITES="regress isolation" sudo test/run.sh
#   FENCING_SUITES=docs sudo test/run.sh     # README.md, docs/, examples/
#   PROVE_TESTS=t/002_promotion.pl sudo test/run.sh
#   FENCING_MATRIX_MAJORS="16 18" sudo test/run.sh   # fewer other majors
#   FENCING_PRIVATE=1 sudo test/run.sh   # a private copy of the server
set -euo pipefail
cd "$(dirname "$0")/.."
. test/deps.sh
. test/citus.sh

suites=${FENCING_SUITES:-"regress isolation docs tap soak negative model matrix"}
# fencing_install_deps installs Patroni and etcd: here t/070_patroni.pl must
# not skip for want of them
export FENCING_REQUIRE_HA_TOOLS=1
top=$PWD

fencing_install_deps
# The matrix's servers are built (first run on a machine) or found cached
# in the background while the 15 suites run; test/matrix.sh waits for
# each one it needs.
matrix_majors=${FENCING_MATRIX_MAJORS:-16 17 18}
matrix_prep=
case " $suites " in
*" matrix "*)
	if [ "$(id -u)" -eq 0 ]; then
		matrix_prep_log=$(mktemp /tmp/fencing-matrix-prep.XXXXXX)
		# shellcheck disable=SC2086
		nice -n 10 bash test/matrix.sh --prepare $matrix_majors >"$matrix_prep_log" 2>&1 &
		matrix_prep=$!
	fi
	;;
esac
# npm packages of the TAP tests, installed once per lock file (postgres runs them)
if [ "$(id -u)" -eq 0 ]; then
	install -d -o postgres -g postgres /var/cache/fencing-npm
fi
private=
if [ -n "${FENCING_PRIVATE:-}" ]; then
	private=$(mktemp -d /tmp/fencing-inst.XXXXXX)
	chmod 755 "$private"	# postgres runs the copy
	fencing_private_install "$private"
	echo "== private server installation: $FENCING_PG_BINDIR"
fi
echo "== building with -Wall -Wextra -Werror ${FENCING_EXTRA_CFLAGS:-}"
# several checkouts on one machine share the server's directories
exec 9>/tmp/fencing-build.lock
flock 9
fencing_build_install "${FENCING_EXTRA_CFLAGS:-}"
# the layers of src/, from the objects just built (test/check_layers.sh)
bash test/check_layers.sh || { flock -u 9; exit 1; }
# Citus for t/071_citus.pl (test/citus.sh): built once into
# /var/cache/fencing-citus, installed into a private copy of the server only
export FENCING_CITUS_INSTALL= FENCING_CITUS_SKIP= FENCING_CITUS_COPY=
case " $suites " in
*" tap "*)
	case ${PROVE_TESTS:-citus} in
	*citus*) fencing_citus_prepare ;;
	esac
	;;
esac

work=$(fencing_copy_tree_for_postgres)
flock -u 9
# keep the actual outputs of failed runs for a look afterwards
# (FENCING_RESULTS: where; one directory per machine by default)
results_dir=${FENCING_RESULTS:-/tmp/fencing-results}
keep_results() {
	if [ "$status" -ne 0 ]; then
		rm -rf "$results_dir"
		mkdir -p "$results_dir"
		cp -r "$work"/results "$work"/output_iso/results "$results_dir/" 2>/dev/null || true
		echo "actual outputs of this run: $results_dir"
	fi
	rm -rf "$work"
	[ -z "$private" ] || rm -rf "$private"
	[ -z "$FENCING_CITUS_COPY" ] || rm -rf "$FENCING_CITUS_COPY"
}
status=0
trap keep_results EXIT
cd "$work"

passed=0
failed=0

run_suite() {
	local name=$1
	shift
	local log="$work/$name.log"
	echo "== $name"
	if ${RUN_AS:-fencing_as_postgres} "$@" >"$log" 2>&1; then
		cat "$log"
	else
		cat "$log"
		status=1
		[ -f regression.diffs ] && cat regression.diffs
		[ -f output_iso/regression.diffs ] && cat output_iso/regression.diffs
		# the logs of the TAP files that failed, not of every file
		for t in $(sed -n 's|^t/\([^ ]*\)\.pl  *(Wstat.*|\1|p' "$log"); do
			f=tmp_check/log/regress_log_$t
			[ -f "$f" ] && { echo "---- $f (failed lines and tail)"; grep -n -A60 '^\[[0-9:.]*\]([0-9.]*s) not ok' "$f" | head -n 200; tail -n 40 "$f"; }
		done
	fi
	# count what the runners report
	local p f
	p=$(grep -Ec '^(ok|test) .* ok( |$)|^ok [0-9]+ ' "$log" || true)
	case $name in
	negative | model | docs | matrix | soak)
		p=$(sed -n 's/^[a-z ]*: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' "$log" | tail -n1)
		f=$(sed -n 's/^[a-z ]*: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' "$log" | tail -n1)
		p=${p:-0}
		f=${f:-0}
		;;
	tap)
		p=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\).*/\1/p' "$log" | tail -n1)
		f=$(grep -Ec '^not ok' "$log" || true)
		[ -n "$p" ] || p=0
		p=$((p - f))
		;;
	*)
		p=$(grep -Ec '^(ok|test) +[0-9]* *[a-z_0-9]+ +\.\.\. ok|^ok +[0-9]+ +[-+] ' "$log" || true)
		f=$(grep -Ec '\.\.\. FAILED|^not ok ' "$log" || true)
		;;
	esac
	passed=$((passed + p))
	failed=$((failed + f))
}

run_suite_as_root() {
	RUN_AS=command run_suite "$@"
}

PGX="bash $work/test/tmp_cluster.sh"
for s in $suites; do
	case $s in
	regress)
		[ -n "$(ls sql/*.sql 2>/dev/null)" ] &&
			run_suite regress $PGX make -s installcheck ISOLATION= TAP_TESTS=
		# the counters of fencing_monitor, which on 15 and 16 count only
		# with shared_preload_libraries (off above: monitor_stats_1.out,
		# and the files of sql/include/refusals.sql check no counts)
		run_suite preload env TMP_CLUSTER_CONF="shared_preload_libraries = 'fencing'" \
			$PGX make -s installcheck ISOLATION=monitor_waits TAP_TESTS= \
			REGRESS="monitor_stats operate_counters operate_stale_writes queue_claim resource_folding resource_guard"
		;;
	isolation)
		[ -n "$(ls specs/*.spec 2>/dev/null)" ] &&
			run_suite isolation $PGX make -s installcheck REGRESS= TAP_TESTS=
		;;
	docs)
		# every SQL block of README.md and docs/, every command of the
		# examples' READMEs, run as written in a throwaway cluster
		run_suite docs bash test/docs/doc_test.sh
		;;
	tap)
		[ -n "$(ls t/*.pl 2>/dev/null)" ] &&
			run_suite tap make -s installcheck REGRESS= ISOLATION= ${PROVE_TESTS:+PROVE_TESTS="$PROVE_TESTS"}
		;;
	matrix)
		# as root: it builds servers, then runs its suites as postgres
		if [ "$(id -u)" -ne 0 ]; then
			echo "== matrix: NOT RUN, needs root"
			failed=$((failed + 1))
			status=1
			continue
		fi
		export FENCING_MATRIX_MAJORS=$matrix_majors
		run_suite_as_root matrix bash "$top/test/matrix.sh"
		if [ -n "$matrix_prep" ]; then
			wait "$matrix_prep" || true
			if [ -f "$matrix_prep_log" ] && grep -q 'not obtained' "$matrix_prep_log"; then
				cat "$matrix_prep_log"
			fi
			rm -f "$matrix_prep_log"
		fi
		;;
	soak)
		# bench/soak.sh --short: 64 clients for 2.5 minutes; sizes, dead
		# tuples and buffers per call stay flat, nothing lost, no errors
		run_suite_as_root soak bash "$top/bench/soak.sh" --short
		;;
	negative)
		# the token tests must fail against a plain nextval()
		run_suite negative bash test/negative/negative_control.sh
		;;
	model)
		[ -x test/model/check_model.sh ] &&
			run_suite model bash test/model/check_model.sh
		;;
	*)
		echo "unknown suite $s" >&2
		exit 2
		;;
	esac
done

[ $status -ne 0 ] && [ $failed -eq 0 ] && failed=1
echo
echo "fencing: $passed passed, $failed failed"
exit $status
