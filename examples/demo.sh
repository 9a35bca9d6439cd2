#!/usr/bin/env bash
# demo.sh: show, with two real concurrent database sessions, why a lease
# alone does not protect a shared resource and how a fencing token does.
#
#   sudo examples/demo.sh
#
# Installs build dependencies if missing, builds and installs the
# extension, starts a throwaway PostgreSQL cluster (pg_virtualenv) and
# plays the story.  Exits 0 when the story ends as expected (the paused
# worker's stale write is refused), non-zero otherwise.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

# ---------------------------------------------------------------------------
# Part 1 (as root): dependencies, build, install, throwaway cluster.
# ---------------------------------------------------------------------------
if [ "${1:-}" != "--story" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "demo.sh installs packages and the extension: run it as root (sudo examples/demo.sh)" >&2
		exit 1
	fi
	. test/deps.sh
	echo "== checking build dependencies"
	fencing_install_deps
	echo "== building and installing the fencing extension"
	# several checkouts on one machine share the server's directories
	exec 9>/tmp/fencing-build.lock
	flock 9
	fencing_build_install
	work=$(fencing_copy_tree_for_postgres)
	flock -u 9
	exec 9>&-
	trap 'rm -rf "$work"' EXIT
	cd "$work"
	echo "== starting a throwaway PostgreSQL $FENCING_PG_MAJOR cluster (pg_virtualenv)"
	# pg_virtualenv's own chatter goes to a log, shown only on failure;
	# the story prints on fd 3.
	status=0
	fencing_as_postgres pg_virtualenv -v "$FENCING_PG_MAJOR" \
		bash examples/demo.sh --story 3>&1 >"$work/pg_virtualenv.log" 2>&1 || status=$?
	if [ $status -ne 0 ]; then
		echo
		echo "---- pg_virtualenv output"
		cat "$work/pg_virtualenv.log"
		echo "demo.sh: FAILED (exit $status)"
	fi
	exit $status
fi

# ---------------------------------------------------------------------------
# Part 2 (as postgres, inside pg_virtualenv): the story.
# ---------------------------------------------------------------------------
exec 1>&3 2>&3 3>&-
set +e
trap '' PIPE				# a dead session must not kill the demo silently

T=$(mktemp -d /tmp/fencing-demo.XXXXXX)
LEASE=storage
A_TTL=2						# seconds
A_PAUSE=3					# seconds
WORKER_PASSWORD=demo-$$-$RANDOM

declare -A SESS_FD SESS_PID SESS_N

a_pid=
cleanup() {
	local name
	# after a failure in B, do not wait for A to wake up
	[ -n "$a_pid" ] && kill "$a_pid" 2>/dev/null
	for name in "${!SESS_FD[@]}"; do
		eval "exec ${SESS_FD[$name]}>&-"	# EOF: psql exits
	done
	for name in "${!SESS_PID[@]}"; do
		wait "${SESS_PID[$name]}" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT

START=${EPOCHREALTIME/./}

# say WHO TEXT...: one line of the story, with the seconds since the start;
# WHO "" continues the previous line
say() {
	local who=$1 now tenths
	shift
	if [ -z "$who" ]; then
		printf '%11s%s\n' "" "$*"
		return
	fi
	now=${EPOCHREALTIME/./}
	tenths=$(((now - START) / 100000))
	printf '%3d.%ds  %s: %s\n' $((tenths / 10)) $((tenths % 10)) "$who" "$*"
}

fail() {
	echo
	echo "UNEXPECTED: $*"
	echo "demo.sh: the story did not go as expected"
	touch "$T/failed"
	exit 1
}

# sess_open NAME USER PASSWORD: a psql session that stays connected.
# Statements go in through a FIFO; results come back in a file.
sess_open() {
	local name=$1 user=$2 password=$3 fd
	mkfifo "$T/$name.in"
	: >"$T/$name.out"
	PGUSER=$user PGPASSWORD=$password PGAPPNAME="demo worker $name" \
		psql -X -q -A -t -v ON_ERROR_STOP=0 -v VERBOSITY=terse \
		<"$T/$name.in" >"$T/$name.out" 2>&1 &
	SESS_PID[$name]=$!
	exec {fd}>"$T/$name.in"
	SESS_FD[$name]=$fd
	SESS_N[$name]=0
	sess_sql "$name" "SELECT 'connected';"
	[ "$R" = connected ] ||
		fail "session $name could not connect: $(cat "$T/$name.out")"
}

# sess_sql NAME SQL: run SQL in session NAME; what psql printed goes to $R
# (no command substitution: the statement counter must survive)
sess_sql() {
	local name=$1 sql=$2 n out before deadline
	n=$((SESS_N[$name] + 1))
	SESS_N[$name]=$n
	out="$T/$name.out"
	before=$(wc -l <"$out")
	R="(session $name is gone)"
	printf '%s\n\\echo @@%d@@\n' "$sql" "$n" >&"${SESS_FD[$name]}" || return 1
	deadline=$((SECONDS + 20))
	until grep -qx "@@$n@@" "$out"; do
		kill -0 "${SESS_PID[$name]}" 2>/dev/null || return 1
		if [ $SECONDS -ge $deadline ]; then
			R="(session $name did not answer)"
			return 1
		fi
		sleep 0.02
	done
	R=$(sed -n "$((before + 1)),\$p" "$out" | sed "/^@@$n@@\$/,\$d")
}

# sess_write NAME CONTENT TOKEN: the fenced write; psql's command tag to $R
sess_write() {
	sess_sql "$1" "\\set QUIET off
UPDATE demo.files SET content = '$2', fence = $3 WHERE id = 1 AND fencing.fence_allows(fence, $3);
\\set QUIET on"
}

admin_psql() {
	psql -X -v ON_ERROR_STOP=1 -v VERBOSITY=terse "$@"
}

# ---- setup ----------------------------------------------------------------
admin_psql -q >"$T/setup.log" 2>&1 <<SQL || { cat "$T/setup.log"; fail "setup failed"; }
CREATE EXTENSION fencing;
CREATE ROLE demo_worker LOGIN PASSWORD '$WORKER_PASSWORD';
GRANT USAGE ON SCHEMA fencing TO demo_worker;
CREATE SCHEMA demo;
CREATE TABLE demo.files (id int PRIMARY KEY, content text NOT NULL, fence bigint);
INSERT INTO demo.files VALUES (1, 'first draft', NULL);
GRANT USAGE ON SCHEMA demo TO demo_worker;
GRANT SELECT, UPDATE ON demo.files TO demo_worker;
SQL

cat <<EOF

The setup
---------
Table demo.files stands for any shared resource (a file, an object in a
bucket, a row other systems read).  Row 1 holds 'first draft'.  Its column
"fence" remembers the highest fencing token that has written the row.

Two workers, A and B, each with its own database session, want to write
row 1.  The rule: only the holder of lease '$LEASE' may write.  A lease
expires unless renewed.  Every write is conditional:

  UPDATE demo.files SET content = ..., fence = <my token>
   WHERE id = 1 AND fencing.fence_allows(fence, <my token>)

fence_allows is true only if the row was never written with a token
(fence IS NULL) or only with older ones (fence < my token).

The story (seconds since the start on the left)
---------
EOF

sess_open A demo_worker "$WORKER_PASSWORD"
sess_open B demo_worker "$WORKER_PASSWORD"
START=${EPOCHREALTIME/./}

# ---- worker A: a background process with its own session ------------------
(
	say A "asks for lease '$LEASE' for $A_TTL seconds"
	sess_sql A "SELECT fencing.lease_acquire('$LEASE', 'worker A', '$A_TTL seconds');"
	tok=$R
	[[ $tok =~ ^[0-9]+$ ]] || fail "A did not get the lease: $tok"
	echo "$tok" >"$T/a.token"
	say A "got the lease with token $tok"
	sess_sql A "SELECT fencing.lease_lock('$LEASE', $tok);"
	ok=$R
	[ "$ok" = t ] || fail "A's fresh lease did not check out: $ok"
	say A "checks the lease before writing: lease_lock('$LEASE', $tok) = true"
	say A "...and right then A's process stalls for $A_PAUSE seconds (think: a long"
	say "" "garbage-collection pause, a frozen VM, a network stall).  It"
	say "" "really sleeps; its session stays open.  It cannot renew the lease."
	touch "$T/a.paused"
	sleep "$A_PAUSE"
	# On a very slow machine B might not be done yet; keep the order of
	# events the story is about.
	for _ in $(seq 200); do
		[ -e "$T/b.done" ] && break
		sleep 0.05
	done
	say A "wakes up.  As far as A knows, nothing happened: it still has"
	say "" "token $tok and believes it holds the lease, so it writes:"
	say A "UPDATE demo.files SET content = 'report by A', fence = $tok"
	say "" " WHERE id = 1 AND fencing.fence_allows(fence, $tok)"
	sess_write A 'report by A' "$tok"
	tag=$R
	[[ $tag =~ ^UPDATE\ ([0-9]+)$ ]] || fail "A's write failed: $tag"
	echo "${BASH_REMATCH[1]}" >"$T/a.rows"
	if [ "${BASH_REMATCH[1]}" = 0 ]; then
		say A "-> $tag: no row changed"
	else
		say A "-> $tag: A's stale write went through"
	fi
) &
a_pid=$!

# ---- worker B: the foreground process, with its own session ---------------
for _ in $(seq 200); do
	[ -e "$T/a.paused" ] || [ -e "$T/failed" ] && break
	sleep 0.02
done
[ -e "$T/a.token" ] || { wait $a_pid; fail "worker A did not start"; }
a_tok=$(cat "$T/a.token")

say B "asks for lease '$LEASE' for 10 seconds"
sess_sql B "SELECT fencing.lease_acquire('$LEASE', 'worker B', '10 seconds');"
res=$R
[ -z "$res" ] || fail "B got the lease while A held it: $res"
say B "-> NULL: someone else holds it.  B retries every 0.2 s."

b_tok=
for _ in $(seq 100); do
	sleep 0.2
	sess_sql B "SELECT fencing.lease_acquire('$LEASE', 'worker B', '10 seconds');"
	res=$R
	if [[ $res =~ ^[0-9]+$ ]]; then
		b_tok=$res
		break
	fi
	[ -z "$res" ] || fail "B's lease_acquire failed: $res"
done
[ -n "$b_tok" ] || fail "B never got the lease"
say B "-> token $b_tok: A's lease expired ($A_TTL s without renewal), so B gets it"
[ "$b_tok" -gt "$a_tok" ] || fail "B's token $b_tok is not greater than A's $a_tok"

say B "UPDATE demo.files SET content = 'report by B', fence = $b_tok"
say "" " WHERE id = 1 AND fencing.fence_allows(fence, $b_tok)"
sess_write B 'report by B' "$b_tok"
tag=$R
[ "$tag" = "UPDATE 1" ] || fail "B's write did not change exactly one row: $tag"
say B "-> $tag: B's write went through, the row now has fence = $b_tok"
touch "$T/b.done"

wait $a_pid || fail "worker A stopped early"
a_rows=$(cat "$T/a.rows")
[ "$a_rows" = 0 ] ||
	fail "A's write with the stale token $a_tok was ACCEPTED ($a_rows row(s))"

echo
echo "A's write was REFUSED: the row was already written with token $b_tok."
echo "fence_allows(fence => $b_tok, token => $a_tok) is false: the row's fence $b_tok is"
echo "not below A's token $a_tok.  So A's UPDATE matched no row and changed nothing."
echo "A learns from the 0 that its lease is gone and should drop its work."

echo
echo "Row 1 now (B's content, B's token):"
admin_psql -P footer=off -c "SELECT id, content, fence FROM demo.files WHERE id = 1" |
	sed 's/^/  /; s/ *$//'
row=$(admin_psql -A -t -c "SELECT content || '|' || fence FROM demo.files WHERE id = 1")
[ "$row" = "report by B|$b_tok" ] || fail "row 1 is not B's write: $row"

echo "The lease, as fencing.lease_status shows it:"
admin_psql -x -P footer=off -c "SELECT * FROM fencing.lease_status" | sed 's/^/  /; s/ *$//'
st=$(admin_psql -A -t -c "SELECT holder || '|' || token || '|' || state || '|' || holder_changes
                            FROM fencing.lease_status WHERE name = '$LEASE'")
[ "$st" = "worker B|$b_tok|held|1" ] || fail "unexpected lease status: $st"

cat <<EOF
Why this matters
----------------
A did everything "right": it held a lease and even checked it before
writing.  The pause came after the check, and no TTL can rule out a pause.
Only the resource can tell a stale writer apart: it compares the writer's
token with the newest one it has seen.  Without the fence_allows condition,
A's UPDATE would have silently overwritten B's work.

demo.sh: OK, the story went as expected.
EOF
exit 0
