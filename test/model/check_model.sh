#!/usr/bin/env bash
# check_model.sh: verify the Promela models of the lease and fencing protocol
# (test/model/fencing.pml) and of counting semaphores (test/model/semaphore.pml),
# described in test/model/README.md, with spin.
#
# The correct configurations must verify with 0 errors, exhaustively.  The
# broken ones (no fence, a token source that goes backwards, a slot taken
# without judging it again) and the semaphore without its holder lock (two sessions of one
# holder taking two slots) must be caught, each by the
# property it is meant to break; their counterexample trails are printed
# as stories.  Exits non-zero if a correct configuration fails or a
# broken one is not caught.  Everything spin and pan write goes to a
# temporary directory.
#
# Needs spin and gcc (Debian: apt-get install spin gcc).
# FENCING_MODEL_JOBS (default 2) runs that many verifications at once.
# FENCING_MODEL_DEEP=1 adds larger configurations (3 workers with a
# failover, about 10 million states; the fence with the lease ignored;
# semaphores with more grants, more ticks, a lock delay): a minute or more.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${FENCING_MODEL_JOBS:-2}

for tool in spin gcc; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "check_model.sh: $tool not found (Debian: apt-get install -y spin gcc)" >&2
		exit 2
	fi
done

tmp=$(mktemp -d /tmp/fencing-model.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# name | expect (pass, or the property to be violated) | spin -D flags | what
# [| model file in test/model/, default fencing.pml]
checks=(
	"strict|pass||strict fence_allows (fence < t), 2 workers, gaps, 1 failover; also invalid end states"
	"strict_ltl|pass|-DP3_LTL -DNO_GAPS|the same with P3 as the LTL claim, no gaps"
	"allow_same|pass|-DALLOW_SAME|non-strict fence_allows / fence_advance with allow_same / fence_guard (fence <= t)"
	"check_in_txn|pass|-DNO_FENCE -DCHECK_IN_TXN -DFAILOVERS=0|no fence, but lease_lock and the write in one transaction"
	"three_workers|pass|-DNW=3 -DFAILOVERS=0 -DMAXGRANTS=4|strict fence_allows, 3 workers, 4 grants, no failover"
	"no_fence|P1|-DNO_FENCE -DFAILOVERS=0|BROKEN: no fence; the pause comes between lease_lock and the write"
	"no_fence_failover|P1|-DNO_FENCE|BROKEN: no fence, with a failover that loses the WAL tail"
	"double_failover|pass|-DCLOCK_BANDS -DCLOCK_FLOOR -DFAILOVERS=2 -DSKEW=2 -DNW=1 -DTMAX=3|band entries at the node's clock, and the clock floor: two failovers, S2 may never have seen S1's (or any) WAL, its clock 2 units behind (less than the gap minus the tokens issued in it)"
	"clock_skew|P2|-DCLOCK_BANDS -DCLOCK_FLOOR -DFAILOVERS=2 -DSKEW=4 -DNW=1 -DTMAX=3|BROKEN: band entries at the node's clock, S2's clock a whole gap between promotions behind"
	"resume|pass|-DCLOCK_BANDS -DCLOCK_FLOOR -DRESUME -DNW=2 -DTMAX=3|the clock floor: P frozen, S1 promoted and issuing, S1's branch discarded, P resumes as primary without a promotion; 2 workers"
	"resume_no_floor|P2|-DCLOCK_BANDS -DRESUME -DNW=2 -DTMAX=3|BROKEN: the rule before the clock floor: the resumed P goes on below S1's tokens"
	"advance|pass|-DCLOCK_BANDS -DCLOCK_FLOOR -DRESUME -DADVANCE -DNW=2 -DTMAX=3|the band's offset above the clock: P advances its tokens above its clock (advance_tokens, arrived history), S1 is promoted from a copy that may miss P's last tokens, P resumes; entries start at the clock plus the offset of the band they leave, the clock floor raises to the clock plus the band's offset"
	"advance_no_offset|P2|-DCLOCK_BANDS -DCLOCK_FLOOR -DRESUME -DADVANCE -DNO_OFFSET -DNW=2 -DTMAX=3|BROKEN: the rule before the offset: with P's counter ahead of the clock, S1 starts at its copy's counter + 1, below P's tokens it never received (and a resumed P would raise nothing): a token is issued twice"
	"lost_tail|pass|-DCLOCK_BANDS -DCLOCK_FLOOR -DLOST_TAIL -DNW=2 -DTMAX=3|the resource in the issuing database: a failover takes its fence back with the WAL tail, the band check refuses tokens from before the band (LF005)"
	"lost_tail_no_band_check|P1|-DCLOCK_BANDS -DCLOCK_FLOOR -DLOST_TAIL -DNO_BAND_CHECK -DNW=2 -DTMAX=3|BROKEN: the same, numbers only: a token from before the failover is accepted where the fence went back"
	"partial_copy|pass|-DCLOCK_BANDS -DCLOCK_FLOOR -DLOST_TAIL -DSPLIT_COPY -DNW=2 -DTMAX=3|the standby's copy may end between the records of a raise (src/token.c's order): the promoted standby still refuses tokens from before the failover"
	"partial_copy_old_mark|P1|-DCLOCK_BANDS -DCLOCK_FLOOR -DLOST_TAIL -DSPLIT_COPY -DOLD_MARK -DNW=2 -DTMAX=3|BROKEN: the records before the fix (token_origin, then the witness): a copy that ends between them looks restored, numbers only (red team item 1)"
	"partial_copy_old_entry|P1|-DCLOCK_BANDS -DCLOCK_FLOOR -DLOST_TAIL -DSPLIT_COPY -DOLD_ENTRY -DFAILOVERS=2 -DNW=1 -DTMAX=3|BROKEN: a band entry's records before the fix (token_origin = 0 first): S2's copy ends inside S1's entry and looks pending, numbers only"
	"timeline_double_failover|P2|-DFAILOVERS=2 -DNW=1 -DTMAX=3|BROKEN: the rule before band entries, band = timeline: S2 gets S1's timeline ID and reissues its tokens"
	"token_rollback|P2|-DTOKEN_ROLLBACK|BROKEN: plain sequence, no timeline band; failover takes the counter back"
	"token_rollback_p3|P3|-DTOKEN_ROLLBACK -DSKIP_P2|BROKEN: the same with P2 not asserted: P3 catches it"
	"token_rollback_ltl|P3_LTL|-DTOKEN_ROLLBACK -DSKIP_P2 -DP3_LTL|BROKEN: the same: the LTL form of P3 catches it"
	"token_rollback_allow_same|P3|-DTOKEN_ROLLBACK -DSKIP_P2 -DALLOW_SAME|BROKEN: the same with fence <= t"
	"semaphore|pass||semaphore: 2 slots, 3 holders, expiry, crashes, a fenced resource per slot|semaphore.pml"
	"semaphore_same_holder|pass|-DSAME_HOLDER|semaphore: two of the 3 workers are sessions of one holder; the holder lock keeps them to one slot (P1, P2, P3)|semaphore.pml"
	"semaphore_no_holder_lock|SEM_P2|-DSAME_HOLDER -DNO_HOLDER_LOCK|BROKEN: no holder lock: two sessions of one holder acquire at once and take two slots|semaphore.pml"
	"semaphore_no_holder_lock_p13|pass|-DSAME_HOLDER -DNO_HOLDER_LOCK -DSKIP_P2|semaphore without the holder lock: one holder per slot and fencing still hold (P2 not asserted)|semaphore.pml"
	"semaphore_no_recheck|SEM_P1|-DNO_RECHECK|BROKEN: the statement takes the slot on the survey's judgement: two holders on one slot|semaphore.pml"
	"semaphore_no_fence|SEM_P3|-DNO_FENCE|BROKEN: semaphore without a fence per slot; the pause between lease_lock and the write|semaphore.pml"
)
if [ "${FENCING_MODEL_DEEP:-0}" = 1 ]; then
	checks=(
		"three_workers_failover|pass|-DNW=3|deep: strict fence_allows, 3 workers, 1 failover"
		"resume_tmax4|pass|-DCLOCK_BANDS -DCLOCK_FLOOR -DRESUME -DNW=2|deep: the resumed primary, the clock runs to 4"
		"partial_copy_double|pass|-DCLOCK_BANDS -DCLOCK_FLOOR -DLOST_TAIL -DSPLIT_COPY -DFAILOVERS=2 -DNW=1 -DTMAX=3|deep: copies that end inside a raise or a band entry, through two failovers (53 million states, 5.6 GB)"
		"lease_ignored|pass|-DLEASE_IGNORED|deep: acquire always succeeds; the fence alone keeps P1-P3"
		"semaphore_grants3|pass|-DMAXGRANTS=3|deep: semaphore, acquires start while fewer than 3 grants|semaphore.pml"
		"semaphore_tmax3|pass|-DTMAX=3|deep: semaphore, the clock runs to 3|semaphore.pml"
		"semaphore_lock_delay|pass|-DLOCK_DELAY=1 -DTMAX=3|deep: semaphore with a lock delay of one tick|semaphore.pml"
		"${checks[@]}"
	)
fi

# what pan prints for a violation of each property
declare -A pattern=(
	[P1]='assertion violated \(tok>=?hiAcc\)'
	[P2]='assertion violated \(counter>maxGranted\)'
	[P3]='assertion violated \(grant>=accGrant\)'
	[P3_LTL]='assertion violated +!\( *!\(\(accGrant>='
	[SEM_P1]='assertion violated one_holder_per_slot'
	[SEM_P2]='assertion violated one_slot_per_holder'
	[SEM_P3]='assertion violated fenced_per_slot'
)

run_check() {
	local name=$1 expect=$2 flags=$3 what=$4 pml=${5:-fencing.pml}
	local dir=$tmp/$name report=$tmp/$name.report
	local ccflags="-O1 -DSAFETY -DMEMLIM=8192"
	local start end secs errors states trans depth

	mkdir -p "$dir"
	cp "$root/test/model/$pml" "$dir/$pml"
	cd "$dir" || return 1
	{
		echo "== $name: $what"
		echo "   spin -a ${flags:-(no flags)} $pml; expect $([ "$expect" = pass ] && echo '0 errors' || echo "a $expect violation")"
	} >"$report"

	# a broken variant is searched breadth-first, for the shortest trail;
	# its search is small, so pan is not worth optimizing
	[ "$expect" != pass ] && ccflags="-O0 -DSAFETY -DMEMLIM=8192 -DBFS"

	# shellcheck disable=SC2086
	if ! spin $flags -a "$pml" >spin.out 2>&1; then
		{ echo "   FAILED: spin -a"; sed 's/^/   | /' spin.out; } >>"$report"
		echo fail >"$tmp/$name.status"
		return 0
	fi
	# shellcheck disable=SC2086
	if ! gcc $ccflags -o pan pan.c >gcc.out 2>&1; then
		{ echo "   FAILED: gcc $ccflags pan.c"; sed 's/^/   | /' gcc.out; } >>"$report"
		echo fail >"$tmp/$name.status"
		return 0
	fi
	start=$(date +%s.%N)
	./pan -m200000 -w24 >pan.out 2>&1
	end=$(date +%s.%N)
	secs=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')

	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
	states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -1)
	trans=$(sed -n 's/^ *\([0-9.e+]*\) transitions.*/\1/p' pan.out | head -1)
	depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out | head -1)
	echo "   pan ($ccflags): ${states:-?} states stored, ${trans:-?} transitions, depth ${depth:-?}, ${secs}s, errors: ${errors:-?}" >>"$report"

	if [ "$expect" = pass ]; then
		# vacuity: with a fence, every statement of the worker must be
		# reachable (acquire, gap, check, pause, accepted and refused
		# writes, renew, release, crash)
		local unreached=""
		[[ $flags == *NO_FENCE* ]] ||
			unreached=$(awk '/^unreached in proctype worker/ { f = 1; next }
				/^unreached in/ { f = 0 }
				f && /state [0-9]+,/ && !/"-end-"/' pan.out)
		if [ "${errors:-x}" = 0 ] && ! grep -q "max search depth too small" pan.out &&
			! grep -q "Search not completed" pan.out && [ -z "$unreached" ]; then
			echo "   ok: verified exhaustively$([[ $flags == *NO_FENCE* ]] || echo ', every worker statement reached')" >>"$report"
			echo pass >"$tmp/$name.status"
		else
			{
				if [ -n "$unreached" ]; then
					echo "   FAILED: vacuous, worker statements never reached:"
					while IFS= read -r line; do echo "   | $line"; done <<<"$unreached"
				else
					echo "   FAILED: expected 0 errors and a complete search"
				fi
				grep -E "^pan:[0-9]|errors: [1-9]|too small|not completed" pan.out | sed 's/^/   | /'
				if [ -f "$pml.trail" ]; then
					echo "   trail:"
					# shellcheck disable=SC2086
					spin -t -T $flags "$pml" 2>&1 |
						sed -n 's/^MSC: /     /p; s/^spin: \(.*\)/     spin: \1/p'
				fi
			} >>"$report"
			echo fail >"$tmp/$name.status"
		fi
		return 0
	fi

	local violation
	violation=$(grep -m1 '^pan:1:' pan.out)
	if [ "${errors:-0}" -ge 1 ] 2>/dev/null && grep -qE "${pattern[$expect]}" pan.out; then
		{
			echo "   ok: caught: ${violation#pan:1: }"
			echo "   trail:"
			# shellcheck disable=SC2086
			spin -t -T $flags "$pml" 2>&1 | sed -n 's/^MSC: /     /p'
		} >>"$report"
		echo pass >"$tmp/$name.status"
	else
		{
			echo "   FAILED: expected spin to find a $expect violation"
			[ -n "$violation" ] && echo "   found instead: ${violation#pan:1: }"
		} >>"$report"
		echo fail >"$tmp/$name.status"
	fi
}

echo "model: $(spin -V 2>&1 | head -1); $(gcc --version | head -1)"
t0=$(date +%s.%N)
running=0
for c in "${checks[@]}"; do
	IFS='|' read -r name expect flags what pml <<<"$c"
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	run_check "$name" "$expect" "$flags" "$what" "$pml" &
	running=$((running + 1))
done
wait

passed=0
failed=0
for c in "${checks[@]}"; do
	IFS='|' read -r name _ <<<"$c"
	cat "$tmp/$name.report"
	if [ "$(cat "$tmp/$name.status" 2>/dev/null)" = pass ]; then
		passed=$((passed + 1))
	else
		[ -f "$tmp/$name.status" ] || echo "   FAILED: no result"
		failed=$((failed + 1))
	fi
done
t1=$(date +%s.%N)
echo "model: wall time $(awk -v s="$t0" -v e="$t1" 'BEGIN { printf "%.1f", e - s }')s"
echo "model: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
