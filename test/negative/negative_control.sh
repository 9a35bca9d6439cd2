#!/usr/bin/env bash
# negative_control.sh: prove the guarantee tests can fail.  Each variant
# builds the extension with one compile flag that removes one guarantee
# into a private copy of the PostgreSQL installation, runs the TAP tests of
# that guarantee against it, and succeeds only if every one of them FAILS.
# The shared installation is never touched.  The flags exist for this
# script only; a release is never built with them.
#
#   FENCING_PLAIN_NEXTVAL     tokens from a plain nextval(): no WAL flush,
#                             no timeline bands (crash, promotion, PITR,
#                             restore tests)
#   FENCING_NO_DURABLE_FENCE  fenced writes commit as synchronous_commit
#                             says (t/008_durable_fence.pl)
#   FENCING_TIMELINE_BANDS    the token rule before band entries: band =
#                             timeline + K, no clock, a fresh install starts
#                             at 1, no refusal of tokens from before the
#                             band, lease rows from replication apply unseen
#                             (double failover, logical switchover, lost
#                             tail, clock skew tests)
#   FENCING_NO_CLOCK_FLOOR    the token source of 83fed51: the counter is
#                             not raised to the clock between band entries
#                             and tokens above it are not refused (the
#                             primary that resumes after a freeze,
#                             t/015_resumed_primary.pl)
#
#   sudo test/negative/negative_control.sh
#   NEGATIVE_VARIANTS=FENCING_NO_DURABLE_FENCE sudo test/negative/negative_control.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/deps.sh

# variant => the tests that must fail against it (add a variant: one line
# here, one #ifdef in the C)
declare -A variant_tests=(
	[FENCING_PLAIN_NEXTVAL]="t/001_crash.pl t/002_promotion.pl t/003_pitr.pl t/004_dump_restore.pl t/006_restore_same_db.pl"
	[FENCING_NO_DURABLE_FENCE]="t/008_durable_fence.pl t/021_same_token_crash.pl"
	[FENCING_TIMELINE_BANDS]="t/010_double_failover.pl t/011_logical_switchover.pl t/012_lost_tail.pl t/013_clock_skew.pl t/070_patroni.pl"
	[FENCING_NO_CLOCK_FLOOR]="t/015_resumed_primary.pl"
)
# t/070_patroni.pl against a variant: its epoch scenario alone, a double
# failover under Patroni (about 35 s; it stops at the first broken check)
export FENCING_PATRONI_SCENARIOS=${FENCING_PATRONI_SCENARIOS:-epoch}
variants=${NEGATIVE_VARIANTS:-"FENCING_PLAIN_NEXTVAL FENCING_NO_DURABLE_FENCE FENCING_TIMELINE_BANDS FENCING_NO_CLOCK_FLOOR"}
pgbin=/usr/lib/postgresql/$FENCING_PG_MAJOR

root=$(mktemp -d /tmp/fencing-negative.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$root"' EXIT

# another checkout may be building in this tree's copy: wait for it
if [ -w /tmp/fencing-build.lock ] || [ ! -e /tmp/fencing-build.lock ]; then
	exec 9>>/tmp/fencing-build.lock
	flock 9
fi
tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=tmp_check --exclude=results -cf - . |
	(mkdir -p "$root/src" && tar -xf - -C "$root/src")
flock -u 9 2>/dev/null || true

# build_variant FLAG: a relocated copy of the installation in $root/FLAG
# (postgres finds its share and lib directories relative to its own binary,
# so the copy loads the unsafe build and nobody else does), with the
# extension built with -DFLAG installed into it.
build_variant() {
	local flag=$1 inst=$root/$1
	mkdir -p "$inst/usr/lib/postgresql" "$inst/usr/share/postgresql"
	cp -a "$pgbin" "$inst/usr/lib/postgresql/"
	cp -a "/usr/share/postgresql/$FENCING_PG_MAJOR" "$inst/usr/share/postgresql/"
	(
		cd "$root/src"
		make -s clean >/dev/null
		make -s PG_CONFIG="$pgbin/bin/pg_config" \
			PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -D$flag"
		make -s PG_CONFIG="$pgbin/bin/pg_config" DESTDIR="$inst" install >/dev/null
	)
}

caught=0
missed=0
for v in $variants; do
	tests=${variant_tests[$v]:-}
	[ -n "$tests" ] || { echo "unknown variant $v" >&2; exit 2; }
	[ "$v" != FENCING_PLAIN_NEXTVAL ] || [ -z "${NEGATIVE_TESTS:-}" ] || tests=$NEGATIVE_TESTS
	build_variant "$v"
	chown -R postgres:postgres "$root" 2>/dev/null || true
	for t in $tests; do
		log="$root/$v.$(basename "$t").log"
		if fencing_as_postgres env PATH="$root/$v$pgbin/bin:$PATH" \
			bash -c "cd '$root/src' && TESTDIR='$root/src' PGPORT=65432 \
				PG_REGRESS='$pgbin/lib/pgxs/src/test/regress/pg_regress' \
				prove -I '$pgbin/lib/pgxs/src/test/perl' '$t'" >"$log" 2>&1; then
			echo "MISSED: $t passed against -D$v"
			missed=$((missed + 1))
		else
			echo "caught: $t fails against -D$v:"
			{ grep -E "Failed test .|BAIL" "$log" || tail -n 5 "$log"; } | head -n 3 | sed "s/^/    /"
			caught=$((caught + 1))
		fi
	done
done
echo "negative control: $caught passed, $missed failed"
[ "$missed" -eq 0 ]
