#!/usr/bin/env bash
# negative_control.sh: prove the token tests can fail.  Builds the
# extension with -DFENCING_PLAIN_NEXTVAL (tokens from a plain nextval(): no
# WAL flush, no timeline bands) into a private copy of the PostgreSQL
# installation, runs the crash, promotion, PITR and restore TAP tests
# against it, and succeeds only if every one of them FAILS.  The shared
# installation is never touched.
#
#   sudo scripts/negative_control.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh

tests=${NEGATIVE_TESTS:-"t/001_crash.pl t/002_promotion.pl t/003_pitr.pl t/004_dump_restore.pl t/006_restore_same_db.pl"}
pgbin=/usr/lib/postgresql/$FENCING_PG_MAJOR

root=$(mktemp -d /tmp/fencing-negative.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$root"' EXIT
# A relocated copy: postgres finds its share and lib directories relative
# to its own binary, so the copy loads the unsafe build and nobody else does.
mkdir -p "$root/inst/usr/lib/postgresql" "$root/inst/usr/share/postgresql"
cp -a "$pgbin" "$root/inst/usr/lib/postgresql/"
cp -a "/usr/share/postgresql/$FENCING_PG_MAJOR" "$root/inst/usr/share/postgresql/"

# another checkout may be building in this tree's copy: wait for it
if [ -w /tmp/fencing-build.lock ] || [ ! -e /tmp/fencing-build.lock ]; then
	exec 9>>/tmp/fencing-build.lock
	flock 9
fi
tar --exclude=.git --exclude='*.o' --exclude='*.bc' --exclude='*.so' \
	--exclude=tmp_check --exclude=results -cf - . |
	(mkdir -p "$root/src" && tar -xf - -C "$root/src")
flock -u 9 2>/dev/null || true
(
	cd "$root/src"
	make -s clean >/dev/null
	make -s PG_CONFIG="$pgbin/bin/pg_config" \
		PG_CFLAGS="-Wall -Wextra -Werror -Wno-unused-parameter -DFENCING_PLAIN_NEXTVAL"
	make -s PG_CONFIG="$pgbin/bin/pg_config" DESTDIR="$root/inst" install >/dev/null
)
chown -R postgres:postgres "$root" 2>/dev/null || true

caught=0
missed=0
for t in $tests; do
	log="$root/$(basename "$t").log"
	if fencing_as_postgres env PATH="$root/inst$pgbin/bin:$PATH" \
		bash -c "cd '$root/src' && TESTDIR='$root/src' PGPORT=65432 \
			PG_REGRESS='$pgbin/lib/pgxs/src/test/regress/pg_regress' \
			prove -I '$pgbin/lib/pgxs/src/test/perl' '$t'" >"$log" 2>&1; then
		echo "MISSED: $t passed against plain nextval()"
		missed=$((missed + 1))
	else
		echo "caught: $t fails against plain nextval():"
		{ grep -E "Failed test .|BAIL" "$log" || tail -n 5 "$log"; } | head -n 3 | sed "s/^/    /"
		caught=$((caught + 1))
	fi
done
echo "negative control: $caught passed, $missed failed"
[ "$missed" -eq 0 ]
