#!/usr/bin/env bash
# negative_control.sh: prove the guarantee tests can fail.  Each variant is
# a patch under test/negative/ that removes one guarantee: it is applied to
# a copy of the tree, built and installed into a private copy of the
# PostgreSQL installation, and the TAP tests of that guarantee run against
# it; the script succeeds only if every one of them FAILS.  The shared
# installation is never touched, and src/ never carries the variants.
#
#   plain_nextval     tokens from a plain nextval(): no WAL flush, no
#                     timeline bands (crash, promotion, PITR, restore tests)
#   no_durable_fence  fenced writes commit as synchronous_commit says
#                     (t/008_durable_fence.pl)
#   timeline_bands    the token rule before band entries: band = timeline +
#                     K, no clock, a fresh install starts at 1, no refusal
#                     of tokens from before the band, lease rows from
#                     replication apply unseen (double failover, logical
#                     switchover, lost tail, clock skew tests)
#   no_clock_floor    the token source of 83fed51: the counter is not raised
#                     to the clock between band entries and tokens above it
#                     are not refused (the primary that resumes after a
#                     freeze, t/015_resumed_primary.pl)
#   no_band_offset    the token source before 0d6fa7c: band entries and
#                     the clock floor ignore the band's offset above the
#                     clock (the counter ahead of the clock: the second
#                     scenario of t/015_resumed_primary.pl)
#
#   sudo test/negative/negative_control.sh
#   NEGATIVE_VARIANTS=no_durable_fence sudo test/negative/negative_control.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. test/deps.sh

# variant => the tests that must fail against it (add a variant: one line
# here, one test/negative/VARIANT.patch)
declare -A variant_tests=(
	[plain_nextval]="t/001_crash.pl t/002_promotion.pl t/003_pitr.pl t/004_dump_restore.pl t/006_restore_same_db.pl"
	[no_durable_fence]="t/008_durable_fence.pl t/021_same_token_crash.pl"
	[timeline_bands]="t/010_double_failover.pl t/011_logical_switchover.pl t/012_lost_tail.pl t/013_clock_skew.pl t/070_patroni.pl"
	[no_clock_floor]="t/015_resumed_primary.pl"
	[no_band_offset]="t/015_resumed_primary.pl"
)
# t/070_patroni.pl against a variant: its epoch scenario alone, a double
# failover under Patroni (about 35 s; it stops at the first broken check)
export FENCING_PATRONI_SCENARIOS=${FENCING_PATRONI_SCENARIOS:-epoch}
variants=${NEGATIVE_VARIANTS:-"plain_nextval no_durable_fence timeline_bands no_clock_floor no_band_offset"}
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

# build_variant VARIANT: a relocated copy of the installation in
# $root/VARIANT (postgres finds its share and lib directories relative to
# its own binary, so the copy loads the unsafe build and nobody else does),
# with the extension built from the tree with test/negative/VARIANT.patch
# applied installed into it.  A patch that no longer applies stops the run.
build_variant() {
	local v=$1 inst=$root/$1
	mkdir -p "$inst/usr/lib/postgresql" "$inst/usr/share/postgresql"
	cp -a "$pgbin" "$inst/usr/lib/postgresql/"
	cp -a "/usr/share/postgresql/$FENCING_PG_MAJOR" "$inst/usr/share/postgresql/"
	rm -rf "$root/build"
	cp -a "$root/src" "$root/build"
	(
		cd "$root/build"
		patch -p1 --batch --no-backup-if-mismatch <"test/negative/$v.patch" >/dev/null ||
			{ echo "test/negative/$v.patch does not apply" >&2; exit 1; }
		make -s clean >/dev/null
		make -s PG_CONFIG="$pgbin/bin/pg_config" \
			PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter"
		make -s PG_CONFIG="$pgbin/bin/pg_config" DESTDIR="$inst" install >/dev/null
	)
}

caught=0
missed=0
for v in $variants; do
	tests=${variant_tests[$v]:-}
	[ -n "$tests" ] || { echo "unknown variant $v" >&2; exit 2; }
	[ "$v" != plain_nextval ] || [ -z "${NEGATIVE_TESTS:-}" ] || tests=$NEGATIVE_TESTS
	build_variant "$v"
	chown -R postgres:postgres "$root" 2>/dev/null || true
	for t in $tests; do
		log="$root/$v.$(basename "$t").log"
		# a failed test leaves its data directories behind, and a test
		# that another variant ran before would bail out on them
		rm -rf "$root/src/tmp_check"
		if fencing_as_postgres env PATH="$root/$v$pgbin/bin:$PATH" \
			bash -c "cd '$root/src' && TESTDIR='$root/src' PGPORT=65432 \
				PG_REGRESS='$pgbin/lib/pgxs/src/test/regress/pg_regress' \
				prove -I '$pgbin/lib/pgxs/src/test/perl' '$t'" >"$log" 2>&1; then
			echo "MISSED: $t passed against $v.patch"
			missed=$((missed + 1))
		else
			echo "caught: $t fails against $v.patch:"
			{ grep -E "Failed test .|BAIL" "$log" || tail -n 5 "$log"; } | head -n 3 | sed "s/^/    /"
			caught=$((caught + 1))
		fi
	done
done
echo "negative control: $caught passed, $missed failed"
[ "$missed" -eq 0 ]
