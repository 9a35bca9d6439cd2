#!/usr/bin/env bash
# matrix.sh: build fencing against every supported PostgreSQL major and run
# pg_regress, the isolation specs and the token-guarantee TAP tests
# (test/matrix/tap_tests) on each; fencing-lock is built by the same make
# and must run.
#
#   sudo test/matrix.sh               # 15 16 17 18
#   sudo test/matrix.sh 16 17         # some majors
#   sudo test/matrix.sh --prepare     # only obtain (build, cache) the servers
#
# Each server comes from test/pg_server.sh (cached under
# /var/cache/fencing-pg/NN).  Each major gets a private copy of its server
# installation and of this tree: fencing is built with -Wall -Wextra
# -Werror and installed into that copy only, never into the system's
# PostgreSQL nor the cache.  Prints a line per major and a closing line
# "matrix: N passed, N failed".  A major that cannot be obtained is
# reported loudly; it fails the run unless its source is absent from this
# machine (pg_server.sh exit status 3).
#
# FENCING_MATRIX_MAJORS: the majors when none are given.
# FENCING_MATRIX_SUITES: "regress isolation tap" by default.
# FENCING_MATRIX_TAP: TAP files (default: test/matrix/tap_tests).
# FENCING_MATRIX_JOBS: majors tested at a time (default 2).
# FENCING_MATRIX_KEEP=1: keep the per-major work directories.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
. test/deps.sh
. test/pg_server.sh

prepare_only=
if [ "${1:-}" = --prepare ]; then
	prepare_only=1
	shift
fi
majors=${*:-${FENCING_MATRIX_MAJORS:-15 16 17 18}}
suites=${FENCING_MATRIX_SUITES:-regress isolation tap}
tap_tests=${FENCING_MATRIX_TAP:-$(grep -v '^#' test/matrix/tap_tests | grep . | tr '\n' ' ')}

if [ -n "$prepare_only" ]; then
	status=0
	for m in $majors; do
		s=$SECONDS
		if bin=$(pg_server_bindir "$m"); then
			echo "matrix: PostgreSQL $m ready in $bin ($((SECONDS - s)) s)"
		else
			echo "matrix: PostgreSQL $m not obtained"
			status=1
		fi
	done
	exit $status
fi

[ "$(id -u)" -eq 0 ] || { echo "matrix.sh: run as root (it builds servers and runs tests as postgres)" >&2; exit 2; }

total_passed=0
total_failed=0
summary=()
status=0

# count_suite NAME LOG RC: sets p and f from a runner's output
count_suite() {
	local name=$1 log=$2 rc=$3
	case $name in
	tap)
		# prove's summary: "t/x.pl (Wstat: ... Tests: N Failed: M)" per bad
		# file; one that died without failing a subtest counts as one
		local tests sub bad
		tests=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\).*/\1/p' "$log" | tail -n1)
		sub=$(sed -n 's/^t\/.*(Wstat: .* Failed: \([0-9]*\)).*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
		bad=$(sed -n 's/^t\/.*(Wstat: .* Failed: \([0-9]*\)).*/\1/p' "$log" | awk '$1 == 0 {n++} END {print n + 0}')
		p=$((${tests:-0} - sub))
		f=$((sub + bad))
		;;
	*)
		p=$(grep -Ec '^(ok|test) +[0-9]* *[a-z_0-9]+ +\.\.\. ok|^ok +[0-9]+ +[-+] ' "$log" || true)
		f=$(grep -Ec '\.\.\. FAILED|^not ok ' "$log" || true)
		;;
	esac
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	return 0
}

# run_major MAJOR RESULT: one major, its report on stdout; RESULT gets
# "passed failed status summary"
run_major() {
	local m=$1 result=$2
	local started rc bin ready root pgbin origin version line major_passed major_failed s log cmd s_started src
	echo "== matrix: PostgreSQL $m"
	started=$SECONDS
	rc=0
	bin=$(pg_server_bindir "$m") || rc=$?
	if [ $rc -ne 0 ]; then
		if [ $rc -eq 3 ]; then
			echo "!! matrix: PostgreSQL $m NOT TESTED: its source is not on this machine (see docs/versions.md)"
			echo "0 0 0 $m not tested (no source)" >"$result"
		else
			echo "!! matrix: PostgreSQL $m NOT TESTED: the server could not be obtained (exit $rc)"
			echo "0 1 1 $m FAILED to obtain" >"$result"
		fi
		return 0
	fi
	ready=$((SECONDS - started))
	root=$(mktemp -d /tmp/fencing-matrix-$m.XXXXXX)
	chmod 755 "$root"
	# the server: a private copy
	if [ "$m" = 15 ]; then
		FENCING_PG_MAJOR=15 fencing_private_install "$root/pg"
		pgbin=$FENCING_PG_BINDIR
		origin="Debian package postgresql-15"
	else
		cp -a "${bin%/bin}" "$root/pg"
		pgbin=$root/pg/bin
		origin=$(head -n1 "${bin%/bin}/.fencing-key" | cut -d' ' -f1-3 | sed 's/ sha[0-9]*[-:].*//')
	fi
	version=$("$pgbin/pg_config" --version)
	# the tree: a private copy, built and installed into the server's copy
	mkdir -p "$root/src"
	tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
		--exclude=tmp_check --exclude=results --exclude=output_iso --exclude=node_modules \
		-cf - . | tar -xf - -C "$root/src"
	line="matrix $m ($version):"
	if ! (cd "$root/src" && FENCING_PG_BINDIR=$pgbin fencing_build_install) >"$root/build.log" 2>&1; then
		cat "$root/build.log"
		echo "!! matrix: PostgreSQL $m: the -Werror build failed"
		echo "0 1 1 $m BUILD FAILED" >"$result"
		[ -n "${FENCING_MATRIX_KEEP:-}" ] || rm -rf "$root"
		return 0
	fi
	# fencing-lock, built by the same make: installed, and it runs with the
	# libpq it was linked against
	if ! "$pgbin/fencing-lock" --version >>"$root/build.log" 2>&1; then
		cat "$root/build.log"
		echo "!! matrix: PostgreSQL $m: fencing-lock was not installed or does not run"
		echo "0 1 1 $m BUILD FAILED (fencing-lock)" >"$result"
		[ -n "${FENCING_MATRIX_KEEP:-}" ] || rm -rf "$root"
		return 0
	fi
	line="$line fencing-lock $(ldd "$pgbin/fencing-lock" | sed -n 's/^[[:space:]]*libpq\.so[^ ]* => \([^ ]*\).*/\1/p' | sed "s|^$root/pg/|(this major's) |");"
	chown -R postgres:postgres "$root"
	major_passed=0
	major_failed=0
	local major_status=0
	for s in $suites; do
		log=$root/$s.log
		case $s in
		regress) cmd=(bash test/tmp_cluster.sh make -s installcheck ISOLATION= TAP_TESTS=) ;;
		isolation) cmd=(bash test/tmp_cluster.sh make -s installcheck REGRESS= TAP_TESTS=) ;;
		tap) cmd=(make -s installcheck REGRESS= ISOLATION= PROVE_TESTS="$tap_tests") ;;
		*)
			echo "unknown matrix suite $s" >&2
			exit 2
			;;
		esac
		s_started=$SECONDS
		src=0
		(cd "$root/src" && PATH="$pgbin:$PATH" fencing_as_postgres "${cmd[@]}") >"$log" 2>&1 || src=$?
		count_suite "$s" "$log" $src
		if [ $src -ne 0 ]; then
			cat "$log"
			for d in "$root/src/regression.diffs" "$root/src/output_iso/regression.diffs"; do
				[ -f "$d" ] && cat "$d"
			done
			for l in "$root"/src/tmp_check/log/regress_log_*; do
				[ -f "$l" ] && grep -q 'not ok' "$l" && { echo "---- $l (tail)"; tail -n 60 "$l"; }
			done
			major_status=1
		fi
		echo "matrix $m $s: $p passed, $f failed ($((SECONDS - s_started)) s)"
		line="$line $s $p/$((p + f))"
		major_passed=$((major_passed + p))
		major_failed=$((major_failed + f))
	done
	echo "$line; server $origin, ready in $ready s; $((SECONDS - started)) s in all"
	echo "$major_passed $major_failed $major_status $m $([ $major_failed -eq 0 ] && echo ok || echo FAILED) ($major_passed/$((major_passed + major_failed)))" >"$result"
	[ -n "${FENCING_MATRIX_KEEP:-}" ] || rm -rf "$root"
}

# FENCING_MATRIX_JOBS majors at a time (their tests mostly wait on
# servers); reports are printed in order, each whole
jobs=${FENCING_MATRIX_JOBS:-2}
out=$(mktemp -d /tmp/fencing-matrix-out.XXXXXX)
trap 'rm -rf "$out"' EXIT
pids=()
i=0
for m in $majors; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n || true
	done
	run_major "$m" "$out/$i.result" >"$out/$i.log" 2>&1 &
	pids+=($!)
	i=$((i + 1))
done
i=0
for m in $majors; do
	wait "${pids[$i]}" || true
	cat "$out/$i.log"
	if [ -s "$out/$i.result" ]; then
		read -r mp mf ms msum <"$out/$i.result"
	else
		mp=0 mf=1 ms=1 msum="$m FAILED (no result)"
	fi
	total_passed=$((total_passed + mp))
	total_failed=$((total_failed + mf))
	[ "$ms" -eq 0 ] || status=1
	summary+=("$msum")
	i=$((i + 1))
done

echo
echo "matrix: $total_passed passed, $total_failed failed; $(IFS=,; echo "${summary[*]}" | sed 's/,/, /g')"
exit $status
