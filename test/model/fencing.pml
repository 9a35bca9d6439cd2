/*
 * fencing.pml: the lease + fencing-token protocol of the fencing extension,
 * as a Promela model for spin.  It models the protocol, not the C code;
 * test/model/README.md maps every step to the function or SQL statement that
 * implements it.  test/model/check_model.sh runs every configuration below.
 *
 * Actors
 *   clock      a global discrete clock that ticks up to TMAX; a tick can
 *              come between any two steps of any worker.
 *   server     ships WAL to two standbys S1 and S2 (each a snapshot of the
 *              committed state, taken whenever the server likes, from the
 *              primary of the moment; S2 may never take one, a node whose
 *              state was lost) and fails over at most FAILOVERS times:
 *              first to S1, then to S2, losing the WAL tail after each
 *              one's snapshot.  S2 may never have seen S1's timeline (a
 *              quick double failover with no shared archive).
 *   worker(i)  NW workers.  Each loops: acquire the lease, then any number
 *              of {renew | check the lease, then write to the resource},
 *              then release.  A worker can be descheduled for any number
 *              of ticks between any two steps (there is no fairness), and
 *              can crash at those points: it restarts from scratch and
 *              forgets its token.
 *
 * Every SQL statement of the extension runs under the lease row's lock and
 * judges expiry by clock_timestamp() when it runs, so each is one atomic
 * step here and no tick happens inside one.
 *
 * Properties
 *   P1  "no stale write accepted": the resource never accepts a write
 *       whose token is lower than a token it accepted before (with the
 *       strict check fence < t: lower or equal).  An assertion.
 *   P2  "tokens strictly increase": every grant's token is larger than
 *       every earlier grant's token.  An assertion.
 *   P3  "fenced mutual exclusion": once the resource has accepted a write
 *       from the holder of grant g, it never again accepts a write from
 *       the holder of an earlier grant.  Grants are numbered in real-time
 *       order by a ghost counter, independently of the token values, so
 *       P3 also holds the token source to account.  An assertion, or with
 *       P3_LTL the LTL formula fenced_mutex.
 *
 * Variants (-D on the spin command line)
 *   (none)          the extension: strict fence_allows (fence < t)
 *   ALLOW_SAME      the non-strict check fence <= t (fence_allows and
 *                   fence_advance with allow_same => true, fence_guard)
 *   NO_FENCE        BROKEN: the resource accepts every write; the worker
 *                   checks the lease first, but may pause between check
 *                   and write.  spin finds a P1 violation.
 *   TOKEN_ROLLBACK  BROKEN: the token source is a plain sequence with no
 *                   bands; a failover to a standby that missed the WAL
 *                   tail takes the counter back.  spin finds a P2
 *                   violation, or with SKIP_P2 a P3 violation.
 *   CLOCK_BANDS     the band-entry rule of src/token.c with node clocks:
 *                   the first token after a failover (and on a fresh
 *                   install) is max(counter + 1, the node's clock).
 *                   Without it, a failover enters band "timeline" (the
 *                   rule before band entries): the same for one failover,
 *                   and BROKEN with FAILOVERS=2, where S2 gets S1's
 *                   timeline ID and spin finds a P2 violation.
 *   CLOCK_FLOOR     (CLOCK_BANDS) the clock floor of src/token.c: a token
 *                   drawn while the counter lags the node's clock plus the
 *                   band's offset by more than W units raises the counter
 *                   to the clock plus the offset first (not a band entry).
 *                   A band's offset is its start above the clock its entry
 *                   read; an entry starts at no less than the clock plus
 *                   the offset of the band it leaves.
 *   ADVANCE         (CLOCK_BANDS, not LOST_TAIL) the primary P may, once,
 *                   enter a band above a floor A units ahead of its clock
 *                   (fencing.advance_tokens(), or arrived history from a
 *                   node whose clock runs ahead): its counter is then
 *                   ahead of the clock, and no raise of the clock floor
 *                   comes.  S1 receives the entry; P's tokens after it
 *                   may be lost with the WAL tail.  Passes.
 *   NO_OFFSET       (ADVANCE) BROKEN: the rule before the offset: bands
 *                   and raises follow the clock alone.  A standby promoted
 *                   after P advanced starts at its copy's counter + 1, and
 *                   P's tokens after the copy (or after the resume, with
 *                   RESUME) are the same: spin finds a P2 violation.
 *   RESUME          (CLOCK_BANDS, FAILOVERS=1) the primary P is frozen
 *                   instead of dying: S1 is promoted meanwhile, then S1's
 *                   branch is discarded and P resumes, still primary, with
 *                   its own state and no band entry, at least a tick after
 *                   S1's last token.  The resource, outside the database,
 *                   keeps what S1's holders wrote.  With CLOCK_FLOOR it
 *                   passes; without it (the rule before the floor) P goes
 *                   on below S1's tokens and spin finds a P2 violation.
 *   LOST_TAIL       (CLOCK_BANDS, CLOCK_FLOOR, FAILOVERS=1) the resource is
 *                   in the database that issues the tokens (the job queue's
 *                   case): its fence is copied to the standby with the rest
 *                   and goes back at a failover, and the token state is
 *                   modeled record by record as in src/token.c (counter,
 *                   band start, band timeline, origin, witness, the
 *                   PENDING flag) with the band check of fence_advance: a
 *                   database whose state is its own history refuses
 *                   tokens from before its band (LF005), all of them while
 *                   a new timeline's entry is due.  Passes.
 *   NO_BAND_CHECK   (LOST_TAIL) BROKEN: no band check, numbers only: the
 *                   failover lost a newer holder's write, and a stale
 *                   holder's write is accepted.  spin finds a P1 violation.
 *   SPLIT_COPY      (LOST_TAIL) the standby's copy may stop between the
 *                   records of the last raise or band entry (another
 *                   backend's commit flushed the first ones).  Passes.
 *   OLD_MARK        (SPLIT_COPY) BROKEN: the records before the fix: a
 *                   raise writes token_origin, then the witness (OLD_RAISE);
 *                   an entry first sets token_origin to 0 (OLD_ENTRY).  A
 *                   copy that stops in between looks restored (or
 *                   pending), the promoted standby compares numbers only:
 *                   spin finds a P1 violation (red team item 1).  The
 *                   entry's needs FAILOVERS=2 (an entry on S1, copied to
 *                   S2).
 *   W=n             (CLOCK_FLOOR) the lag allowed, in units; W < U.
 *   A=n             (ADVANCE) how far above P's clock the floor is, in
 *                   units.
 *   SKEW=n          (CLOCK_BANDS) S2's clock runs n units behind.  Safe
 *                   while n is less than the gap between two band entries
 *                   (one tick, U units) minus the tokens issued in it (R);
 *                   with SKEW >= U - R spin finds a P2 violation.
 *   CHECK_IN_TXN    with NO_FENCE: lease_lock and the write run in one
 *                   transaction (the lease row stays share-locked), so no
 *                   takeover can come between them.  Passes.
 *   LEASE_IGNORED   acquire always succeeds, even while another holder's
 *                   lease is live: with the fence, P1-P3 still hold (the
 *                   lease is for efficiency, the fence for safety)
 *   P3_LTL          check P3 as an LTL claim instead of an assertion
 *   SKIP_P2         do not assert P2 (to show that P3 catches a token
 *                   source that goes backwards on its own)
 *   NO_GAPS         an acquire that got a token always commits (no burned
 *                   tokens)
 * and the bounds below (NW, TTL, TMAX, BANDSZ, MAXGRANTS, NWRITES,
 * FAILOVERS, LOCK_DELAY, U, R, SKEW).
 */

/* ---- bounds ---- */
#ifndef NW
#define NW		2	/* workers, 1..3 */
#endif
#ifndef TTL
#define TTL		2	/* lease TTL in ticks */
#endif
#ifndef TMAX
#define TMAX	4	/* the clock stops here */
#endif
#ifndef BANDSZ
#define BANDSZ	3	/* without CLOCK_BANDS: tokens per timeline band */
#endif
#ifndef U
#define U		4	/* clock units (microseconds) per tick */
#endif
#ifndef R
#define R		1	/* the rate assumption: a node issues at most R tokens per
					 * tick since its band entry; R < U */
#endif
#ifndef SKEW
#define SKEW	0	/* S2's clock runs this many units behind */
#endif
#ifndef W
#define W		1	/* CLOCK_FLOOR: the counter may lag the clock by W units */
#endif
#ifndef A
#define A		6	/* ADVANCE: the floor is this far above P's clock */
#endif
#if defined(ADVANCE) && (!defined(CLOCK_BANDS) || defined(LOST_TAIL))
#error "ADVANCE needs CLOCK_BANDS, and is not modeled with LOST_TAIL"
#endif
#ifndef MAXGRANTS
#define MAXGRANTS 3	/* successful acquires in one run, at most 6 */
#endif
#ifndef NWRITES
#define NWRITES	2	/* writes per grant */
#endif
#ifndef FAILOVERS
#define FAILOVERS 1	/* failovers (promotions, PITR) in one run, 1..2 */
#endif
#ifndef LOCK_DELAY
#define LOCK_DELAY 0	/* fencing.lock_delay, in ticks */
#endif

/* ---- the global state ---- */
mtype = { LF001, LF005 };
byte clock;			/* clock_timestamp(), in ticks */

/* token source: fencing.token_seq and the band */
byte node;			/* the primary: 0 P, 1 S1, 2 S2 */
byte counter;		/* token_seq.last_value; 0 = never called */
#if defined(LOST_TAIL)
/*
 * The database issued tokens before, in a band of timeline 0 that starts
 * at 1, and both standbys have that band (see Copy): one that never saw
 * the first band entry holds no token history at all, like a database
 * that never issued a token, and compares numbers only (docs/tokens.md,
 * Limits).
 */
byte bstart = 1;	/* token_base: first token of the band */
#elif defined(CLOCK_BANDS)
byte bstart;		/* token_base: first token of the band; 0 = entry pending */
#else
byte bstart = 1;	/* the band is entered at each failover */
#endif
byte entry;			/* tick of the band entry */
byte tl;			/* timeline; only TIMELINE_BANDS uses it */
#ifdef LOST_TAIL
byte rbase = 1;		/* the counter's floor at the last band entry or raise */
#else
byte rbase;			/* the counter's floor at the last band entry or raise */
#endif
byte rtick;			/* and the tick then */
byte boff;			/* token_band_offset: the band's start above its entry's clock */
#ifdef ADVANCE
bool advanced;		/* P advanced its tokens */
#endif
#ifdef LOST_TAIL
/*
 * The rest of the token state, record by record: token_band's timeline
 * and PENDING flag, token_origin (0: none yet, 1: this database's), and
 * whether token_witness matches token_origin's page LSN.
 */
byte btl;
bool pend;
byte origin = 1;
bool wok = true;
/*
 * The last raise or band entry (1, 2; 0: none yet), the state before it
 * (token state, lease row and fence: the acquire's own records come after
 * the raise's or the entry's), and its values: for a copy that stops
 * between its records.
 */
byte lop;
byte lpre_counter, lpre_bstart, lpre_btl, lpre_origin;
bool lpre_pend, lpre_wok;
byte lpre_holder, lpre_token, lpre_expires, lpre_fence;
byte lvalue;		/* the raise's counter, or the entry's band start */
byte lentry_tl;			/* the entry's timeline */
#endif

/* wall clock of a node, in units, at band entry */
#define CLK(n)		(U * (clock + 1) - ((n) == 2 -> SKEW : 0))
/* the clock a band follows: the node's clock plus the band's offset */
#ifdef NO_OFFSET
#define BCLK(n)		CLK(n)
#else
#define BCLK(n)		(CLK(n) + boff)
#endif
#ifdef OLD_MARK
#define OLD_RAISE
#define OLD_ENTRY
#endif
#ifdef LOST_TAIL
/*
 * classify() of src/token.c: this database's own history, and the band
 * current (before the fix, origin 0 meant "entry pending" and PENDING was
 * never set: the same test)
 */
#define OURS		(bstart != 0 && origin == 1 && wok)
#define CURRENT		(OURS && btl == tl && !pend)
#define ENTRY_DUE	(!CURRENT)
#else
#define ENTRY_DUE	(bstart == 0)
#endif
#ifdef CLOCK_FLOOR
/* the next token draws behind the clock by more than W: a raise first */
#define RAISE		(!ENTRY_DUE && counter + 1 + W < BCLK(node))
#else
#define RAISE		false
#endif
#ifdef CLOCK_BANDS
/*
 * the rate assumption: at most R tokens per tick since the band entry or
 * the raise that set the counter's floor
 */
#define CAN_ISSUE	(ENTRY_DUE || RAISE || counter + 1 <= rbase + R * (clock - rtick))
/*
 * promotions are at least a tick after the dead primary's band entry or
 * raise (the tick it last set its counter from its clock)
 */
#define MAY_FAIL_OVER	(ENTRY_DUE || clock > rtick)
#else
/* LF002 at the end of the timeline's band */
#define CAN_ISSUE	(counter < (tl + 1) * BANDSZ)
#define MAY_FAIL_OVER	true
#endif

/*
 * The lease row of fencing.leases (one lease name).  holder 0: no row, or
 * a released one; every statement treats the two alike (LEASE_TAKE or
 * LEASE_CREATE takes it, LIVE() is false), so they share one state.
 */
byte l_holder;
byte l_token;
byte l_expires;

/* the standbys' copies: the committed state up to the WAL each received */
typedef Copy {
	byte holder;
	byte token;
	byte expires;
	byte counter;
	byte boff;
	byte tl
#ifdef LOST_TAIL
	;
	byte fence;
	byte bstart = 1;
	byte btl;
	bool pend;
	byte origin = 1;
	bool wok = true
#endif
};
Copy r[2];			/* r[0]: S1, r[1]: S2 */
/* the copy's counter matters to a rule that can fall back on it */
#if FAILOVERS > 1 || defined(CLOCK_BANDS) || defined(TOKEN_ROLLBACK)
#define COPY_COUNTER(i)	r[i].counter = counter; r[i].boff = boff
#else
#define COPY_COUNTER(i)	skip
#endif
#ifdef LOST_TAIL
#define COPY_TOKEN_STATE(i) \
	r[i].fence = fence; r[i].bstart = bstart; r[i].btl = btl; \
	r[i].pend = pend; r[i].origin = origin; r[i].wok = wok
#define COPY_RESET(i) \
	r[i].fence = 0; r[i].bstart = 0; r[i].btl = 0; \
	r[i].pend = false; r[i].origin = 0; r[i].wok = false
#else
#define COPY_TOKEN_STATE(i)	skip
#define COPY_RESET(i)		skip
#endif
byte failovers;
#ifdef RESUME
Copy fz;			/* P's own state, frozen: its lease row and counter */
byte fz_bstart;
byte fz_entry;
byte fz_rbase;
byte fz_rtick;
byte fz_boff;
bool resumed;
byte lastissue;		/* ghost: tick of the last token issued */
#endif

/* the resource: one item with its fence column; 0 = NULL */
byte fence;

/* ghosts, for the properties only */
byte maxGranted;	/* highest token granted so far */
byte ngrants;		/* grants so far; grant numbers are 1..ngrants */
byte hiAcc;			/* highest token the resource accepted */
byte accGrant;		/* grant number of the last accepted write; 0 = none */

/* LEASE_TAKE / LEASE_CREATE: free (no row or released), expired, or own */
#ifdef LEASE_IGNORED
#define TAKEABLE(me)	(true)
#else
#define TAKEABLE(me) \
	(l_holder == 0 || l_expires + LOCK_DELAY <= clock || \
	 l_holder == me)
#endif

/* LIVE() in lease_table.c, with the token test of renew/release/check */
#define LIVE(t) \
	(l_holder != 0 && l_token == (t) && clock < l_expires)

/* the resource's predicate for a write with token t */
#if defined(NO_FENCE)
#define ACCEPTS(t)	true
#elif defined(ALLOW_SAME)
#define ACCEPTS(t)	(fence <= (t))		/* allow_same; NULL is 0 here */
#else
#define ACCEPTS(t)	(fence < (t))		/* fence_allows(f, t) */
#endif

/*
 * fencing_check_token_band(): a database whose state is its own history
 * refuses tokens from before its band, every token while a new timeline's
 * entry is due (LF005); otherwise it compares numbers only
 */
#if defined(LOST_TAIL) && !defined(NO_BAND_CHECK)
#define BAND_REFUSES(t)	(OURS && (btl != tl || (t) < bstart))
#else
#define BAND_REFUSES(t)	false
#endif

#if defined(NO_FENCE) || defined(ALLOW_SAME)
#define P1(t)		assert((t) >= hiAcc)	/* accepted tokens never decrease */
#else
#define P1(t)		assert((t) > hiAcc)		/* ... and strictly increase */
#endif

#ifdef SKIP_P2
#define P2(t)		skip
#else
#define P2(t)		assert((t) > maxGranted)
#endif

/*
 * P3.  accGrant is the grant number of the last accepted write, so P3 says
 * accGrant never decreases.  By default it is an assertion at each
 * accepted write (the new write's grant is not older than the last one's);
 * with P3_LTL it is the LTL formula below instead: for every g, once
 * accGrant >= g, it stays >= g.  The claim makes pan's search about twice
 * as large, so test/model/check_model.sh uses it in two runs only.
 */
#ifdef P3_LTL
#define P3(g)		skip
#define SINCE(g)	([] ((accGrant >= g) -> [] (accGrant >= g)))
#if MAXGRANTS <= 2
#define P3_ALL	SINCE(2)
#elif MAXGRANTS == 3
#define P3_ALL	SINCE(2) && SINCE(3)
#elif MAXGRANTS == 4
#define P3_ALL	SINCE(2) && SINCE(3) && SINCE(4)
#elif MAXGRANTS == 5
#define P3_ALL	SINCE(2) && SINCE(3) && SINCE(4) && SINCE(5)
#else
#define P3_ALL	SINCE(2) && SINCE(3) && SINCE(4) && SINCE(5) && SINCE(6)
#endif
ltl fenced_mutex { P3_ALL }
#else
#define P3(g)		assert((g) >= accGrant)
#endif

active proctype clock_ticks()
{
	do
	:: d_step { clock < TMAX -> clock++; printf("MSC: t=%d tick\n", clock) }
	:: else -> break
	od
}

/*
 * The server side of crashes and failovers.  A crash of the primary that
 * loses no acknowledged WAL changes nothing durable: tokens are flushed
 * before they are returned and lease changes commit synchronously.  (An
 * acquire whose transaction dies after nextval() is the burned-token
 * branch in the worker.)  What can lose acknowledged state is a promotion
 * of a standby that missed the WAL tail, or a PITR: the lease row and the
 * counter go back to the standby's copy.
 */
#if defined(CLOCK_BANDS) && !defined(LOST_TAIL)
/*
 * A band entry of src/token.c above "floor": max(counter + 1, floor + 1,
 * the node's clock plus the offset of the band it leaves); the new band's
 * offset is its start above the clock
 */
inline enter_band_above(floor)
{
	bstart = (counter + 1 > BCLK(node) -> counter + 1 : BCLK(node));
	if
	:: bstart < (floor) + 1 -> bstart = (floor) + 1
	:: else
	fi;
#ifndef NO_OFFSET
	boff = bstart - CLK(node);
#endif
	if
	:: counter < bstart - 1 -> counter = bstart - 1
	:: else
	fi;
	entry = clock;
	rbase = bstart; rtick = clock;
	printf("MSC: t=%d node %d enters a band at %d, offset %d\n", clock, node, bstart, boff)
}
#endif

#ifdef SPLIT_COPY
/*
 * The first k records of the last raise or band entry, applied to r[i]
 * (which holds the state before it), in the order src/token.c writes
 * them.  k = 0: none; k past the last: all of them, and none of what
 * followed (the acquire's own row).
 */
inline copy_records(i)
{
	select(k : 0 .. 6);
	n = 0;
	if
#ifdef OLD_RAISE
	:: lop == 1 ->
		/* before the fix: token_origin (same value, new LSN), token_witness, token_seq */
		if :: k > 0 -> r[i].wok = false :: else fi;
		if :: k > 1 -> r[i].wok = true :: else fi;
		if :: k > 2 -> r[i].counter = lvalue :: else fi
#else
	:: lop == 1 ->
		/* token_band (its own value: the mark), token_seq */
		if :: k > 1 -> r[i].counter = lvalue :: else fi
#endif
#ifdef OLD_ENTRY
	:: lop == 2 ->
		/*
		 * before the fix: token_origin = 0, token_seq, token_base,
		 * token_band, token_origin, token_witness
		 */
		if :: k > 0 -> r[i].origin = 0; r[i].wok = false :: else fi;
		if :: k > 1 && r[i].counter < lvalue - 1 -> r[i].counter = lvalue - 1 :: else fi;
		if :: k > 2 -> r[i].bstart = lvalue :: else fi;
		if :: k > 3 -> r[i].btl = lentry_tl :: else fi;
		if :: k > 4 -> r[i].origin = 1 :: else fi;
		if :: k > 5 -> r[i].wok = true :: else fi
#else
	:: lop == 2 ->
		/* token_band with PENDING (the mark) */
		if :: k > n -> r[i].pend = true :: else fi;
		n++;
		if
		:: !(lpre_bstart != 0 && lpre_origin == 1 && lpre_wok) ->
			/* not ours (a first install): token_origin, token_witness */
			if :: k > n -> r[i].origin = 1; r[i].wok = false :: else fi;
			n++;
			if :: k > n -> r[i].wok = true :: else fi;
			n++
		:: else
		fi;
		/* token_seq, token_base, token_band: the new band, flags clear */
		if :: k > n && r[i].counter < lvalue - 1 -> r[i].counter = lvalue - 1 :: else fi;
		n++;
		if :: k > n -> r[i].bstart = lvalue :: else fi;
		n++;
		if :: k > n -> r[i].btl = lentry_tl; r[i].pend = false :: else fi
#endif
	fi;
	if
	:: lop == 1 ->
		printf("MSC: t=%d S%d's WAL ends %d records into node %d's last raise\n",
			   clock, i + 1, k, node)
	:: else ->
		printf("MSC: t=%d S%d's WAL ends %d records into node %d's last band entry\n",
			   clock, i + 1, k, node)
	fi
}

/* a copy whose WAL ends inside the last raise or band entry */
inline split_copy(i)
{
	r[i].holder = lpre_holder; r[i].token = lpre_token;
	r[i].expires = lpre_expires; r[i].fence = lpre_fence;
	r[i].counter = lpre_counter; r[i].bstart = lpre_bstart;
	r[i].btl = lpre_btl; r[i].pend = lpre_pend;
	r[i].origin = lpre_origin; r[i].wok = lpre_wok; r[i].tl = tl;
	copy_records(i)
}
#endif

active proctype server()
{
#ifdef SPLIT_COPY
	byte k, n;
#endif
	do
	:: failovers < FAILOVERS && node == 0 ->
		/* S1 replays P's WAL up to now */
		d_step {
			r[0].holder = l_holder; r[0].token = l_token;
			r[0].expires = l_expires; COPY_COUNTER(0); r[0].tl = tl;
			COPY_TOKEN_STATE(0)
		}
#ifdef SPLIT_COPY
	:: failovers < FAILOVERS && node == 0 && lop != 0 ->
		/*
		 * S1's WAL ends between two records of the last raise or band
		 * entry: the state before it, and the first k of its records
		 */
		atomic { split_copy(0) }
	:: failovers < FAILOVERS && node <= 1 && FAILOVERS > 1 && lop != 0 ->
		/* the same for S2, from the primary of the moment */
		atomic { split_copy(1) }
#endif
	:: failovers < FAILOVERS && node <= 1 && FAILOVERS > 1 ->
		/* S2 replays the primary's WAL up to now (or never: state lost) */
		d_step {
			r[1].holder = l_holder; r[1].token = l_token;
			r[1].expires = l_expires; COPY_COUNTER(1); r[1].tl = tl;
			COPY_TOKEN_STATE(1)
		}
	::
		/*
		 * The primary dies and the next standby is promoted, at least a
		 * tick after the dead one's band entry (promotions are that far
		 * apart).  TOKEN_ROLLBACK: a plain sequence, back to the copy's
		 * value.  Otherwise the band entry is pending: the next token enters
		 * one (see the worker).
		 */
		atomic {
			failovers < FAILOVERS && MAY_FAIL_OVER ->
#ifdef RESUME
			/* P does not die: it freezes with its state */
			fz.holder = l_holder; fz.token = l_token; fz.expires = l_expires;
			fz.counter = counter; fz.tl = tl;
			fz_bstart = bstart; fz_entry = entry;
			fz_rbase = rbase; fz_rtick = rtick; fz_boff = boff;
#endif
			l_holder = r[failovers].holder; l_token = r[failovers].token;
			l_expires = r[failovers].expires;
#if FAILOVERS > 1 || defined(CLOCK_BANDS) || defined(TOKEN_ROLLBACK)
			counter = r[failovers].counter;
			boff = r[failovers].boff;
#endif
			tl = r[failovers].tl + 1;
#ifdef LOST_TAIL
			fence = r[failovers].fence; bstart = r[failovers].bstart;
			btl = r[failovers].btl; pend = r[failovers].pend;
			origin = r[failovers].origin; wok = r[failovers].wok;
			lop = 0;
#endif
			failovers++;
			node = failovers;
#if defined(TOKEN_ROLLBACK)
			entry = clock;
#elif defined(LOST_TAIL)
			/* the copied band's timeline is not the new one: an entry is due */
			skip;
#elif defined(CLOCK_BANDS)
			bstart = 0;
#else
			/* band "timeline": above what the copy's timeline could hold */
			if
			:: counter < tl * BANDSZ -> counter = tl * BANDSZ
			:: else
			fi;
#endif
			printf("MSC: t=%d failover to S%d: the lease row is back to token %d (0: free), counter %d, timeline %d\n",
				   clock, node, l_token, counter, tl);
#ifdef LOST_TAIL
			printf("MSC: t=%d   the fence is back to %d; token state: band start %d, band timeline %d, origin %d, witness %d, pending %d\n",
				   clock, fence, bstart, btl, origin, wok, pend);
#endif
			/* the promoted standby's copy is spent */
			r[node - 1].holder = 0; r[node - 1].token = 0;
			r[node - 1].expires = 0; r[node - 1].counter = 0;
			r[node - 1].boff = 0; r[node - 1].tl = 0;
			COPY_RESET(node - 1)
		}
#ifdef RESUME
	::
		/*
		 * S1's branch is discarded; P resumes, still primary, with the state
		 * it froze with: no promotion, no band entry.  Real time passes
		 * between S1's last token and P's first after the resume: a tick.
		 */
		atomic {
			failovers == 1 && node == 1 && !resumed && clock > lastissue ->
			l_holder = fz.holder; l_token = fz.token; l_expires = fz.expires;
			counter = fz.counter; tl = fz.tl;
			bstart = fz_bstart; entry = fz_entry;
			rbase = fz_rbase; rtick = fz_rtick; boff = fz_boff;
			node = 0;
			resumed = true;
			printf("MSC: t=%d S1 is stopped, P resumes: the lease row is back to token %d, counter %d\n",
				   clock, l_token, counter)
		}
#endif
#ifdef ADVANCE
	::
		/*
		 * fencing.advance_tokens(F) on P, F A units above its clock (or a
		 * floor that arrived from a node whose clock runs ahead): a band
		 * entry at max(counter + 1, F + 1, clock + offset).  S1 replays it
		 * (the caller waits for that): a standby that never received the
		 * entry knows no offset, and a clock cannot tell it about tokens
		 * above the clock (docs/tokens.md).  P's tokens after it may
		 * reach S1 or not.
		 */
		atomic {
			!advanced && node == 0 && failovers == 0 ->
			advanced = true;
			printf("MSC: t=%d node %d advances its tokens above %d; S1 replays it\n",
				   clock, node, CLK(node) + A);
			enter_band_above(CLK(node) + A);
			r[0].holder = l_holder; r[0].token = l_token;
			r[0].expires = l_expires; COPY_COUNTER(0); r[0].tl = tl
		}
#endif
	:: failovers >= FAILOVERS -> break
	od
}

/*
 * The band entry of fencing_issue_token(): pending after a failover and on
 * a fresh install; the next token is max(counter + 1, the node's clock).
 */
#ifdef LOST_TAIL
/* the state before a raise or band entry, for a copy that stops inside it */
inline save_pre(kind)
{
	lop = kind;
	lpre_counter = counter; lpre_bstart = bstart; lpre_btl = btl;
	lpre_pend = pend; lpre_origin = origin; lpre_wok = wok;
	lpre_holder = l_holder; lpre_token = l_token; lpre_expires = l_expires;
	lpre_fence = fence
}

/*
 * fencing_issue_token(): a band entry when classify() finds one due, or
 * a raise; the records themselves are in copy_records()
 */
inline enter_band()
{
	if
	:: ENTRY_DUE ->
		save_pre(2);
		bstart = (counter + 1 > CLK(node) -> counter + 1 : CLK(node));
		if
		:: counter < bstart - 1 -> counter = bstart - 1
		:: else
		fi;
		btl = tl; pend = false; origin = 1; wok = true;
		lvalue = bstart; lentry_tl = tl;
		entry = clock;
		rbase = bstart; rtick = clock;
		printf("MSC: t=%d node %d enters a band at %d\n", clock, node, bstart)
	:: RAISE ->
		save_pre(1);
		counter = CLK(node) - 1;
		lvalue = counter;
		rbase = CLK(node); rtick = clock;
		printf("MSC: t=%d node %d raises its counter to the clock: next token %d\n",
			   clock, node, rbase)
	:: else
	fi
}
#else
inline enter_band()
{
	if
	:: bstart == 0 ->
#ifdef CLOCK_BANDS
		enter_band_above(0)
#else
		bstart = (counter + 1 > tl * BANDSZ + 1 -> counter + 1 : tl * BANDSZ + 1);
		if
		:: counter < bstart - 1 -> counter = bstart - 1
		:: else
		fi;
		entry = clock;
		printf("MSC: t=%d node %d enters a band at %d\n", clock, node, bstart)
#endif
#ifdef CLOCK_FLOOR
	:: RAISE ->
		/* the clock floor: the next token is the node's clock plus the offset */
		counter = BCLK(node) - 1;
		rbase = BCLK(node); rtick = clock;
		printf("MSC: t=%d node %d raises its counter to the clock: next token %d\n",
			   clock, node, rbase)
#endif
	:: else
	fi
}
#endif

/* worker names: A is the one that spin's breadth-first search runs first */
#define NAME	('A' + NW - me)

/* a worker that crashes or gives up forgets its token */
#define FORGET	tok = 0; grant = 0; w = 0

/*
 * The write to the resource: UPDATE ... SET fence = tok WHERE
 * fencing.fence_allows(fence, tok) (or fence_allows(fence, tok, true),
 * fence_advance, fence_guard).  Accepted: back to "held".  Refused: the worker learns that
 * its token is stale and stops (lease_release, which fails if the lease
 * is gone).
 */
inline fenced_write()
{
	w++;
	if
	:: ACCEPTS(tok) && !BAND_REFUSES(tok) ->
		printf("MSC: t=%d worker %c writes with token %d: accepted\n", clock, NAME, tok);
		P1(tok);
		P3(grant);
#ifndef NO_FENCE
		fence = tok;
#endif
		if
		:: tok > hiAcc -> hiAcc = tok
		:: else
		fi;
		accGrant = grant;
		goto held
	:: else ->
		printf("MSC: t=%d worker %c writes with token %d: refused (%e), fence %d\n",
			   clock, NAME, tok, (ACCEPTS(tok) -> LF005 : LF001), fence);
		goto release
	fi
}

proctype worker(byte me)
{
	byte tok;		/* the token this worker believes it holds; 0 = none */
	byte grant;		/* ghost: the grant number tok came from */
	byte w;			/* writes attempted with tok */

	/*
	 * lease_acquire(name, holder = me, TTL), wait => 0.  An attempt that
	 * returns NULL (held by another) or raises LF002 (band used up)
	 * changes nothing, so it is left out: the worker waits here instead,
	 * which is a valid end state.
	 */
end_idle:
	do
	:: atomic {
		ngrants < MAXGRANTS && TAKEABLE(me) && CAN_ISSUE ->
		enter_band();
		counter++;				/* fencing_issue_token(), flushed */
#ifdef RESUME
		lastissue = clock;
#endif
		if
		:: true ->
			printf("MSC: t=%d worker %c acquires: token %d, expires at %d\n",
				   clock, NAME, counter, clock + TTL);
			P2(counter);
			if
			:: counter > maxGranted -> maxGranted = counter
			:: else
			fi;
			ngrants++;
			l_holder = me; l_token = counter;
			l_expires = clock + TTL;
			tok = counter; grant = ngrants;
			break
#ifndef NO_GAPS
		:: true ->
			/* the transaction died after nextval(): a gap, no grant */
			printf("MSC: t=%d worker %c burns token %d\n", clock, NAME, counter)
#endif
		fi
	   }
	od;

held:
	/* any number of ticks may pass here */
	if
	:: w < NWRITES -> goto check
	:: goto renew
	:: goto release
	:: atomic { FORGET; goto end_idle }		/* crash */
	fi;

check:
#ifdef CHECK_IN_TXN
	/*
	 * BEGIN; lease_lock(); the write; COMMIT.  lease_lock() share-locks
	 * the lease row, and a takeover waits for that lock, so no other grant
	 * can come between the check and the write: one atomic step.
	 */
	atomic {
		if
		:: LIVE(tok) ->
			printf("MSC: t=%d worker %c: lease_lock(%d) = true\n", clock, NAME, tok);
			fenced_write()
		:: else ->
			printf("MSC: t=%d worker %c: lease_lock(%d) = false\n", clock, NAME, tok);
			FORGET; goto end_idle
		fi
	};
#else
	/* lease_lock(), a statement (and transaction) of its own */
	atomic {
		if
		:: LIVE(tok) ->
			printf("MSC: t=%d worker %c: lease_lock(%d) = true\n", clock, NAME, tok)
		:: else ->
			printf("MSC: t=%d worker %c: lease_lock(%d) = false\n", clock, NAME, tok);
			FORGET; goto end_idle
		fi
	};
	/* the pause between check and write: any number of ticks */
	if
	:: goto write
	:: atomic { FORGET; goto end_idle }		/* crash */
	fi;

write:
	atomic { fenced_write() };
#endif

renew:
	/* lease_renew(name, tok, TTL) */
	atomic {
		if
		:: LIVE(tok) -> l_expires = clock + TTL; goto held
		:: else -> FORGET; goto end_idle
		fi
	};

release:
	/* lease_release(name, tok) */
	atomic {
		if
		:: LIVE(tok) -> l_holder = 0; l_token = 0; l_expires = 0;
			printf("MSC: t=%d worker %c releases token %d\n", clock, NAME, tok)
		:: else
		fi;
		FORGET; goto end_idle
	}
}

init
{
	atomic {
		byte i = 1;
		do
		:: i <= NW -> run worker(i); i++
		:: else -> break
		od
	}
}
