/*
 * semaphore.pml: fencing.semaphore_acquire, a counting semaphore of N
 * slots, each slot a lease row of its own, as a Promela model for spin.
 * It models the protocol, not the C code; test/model/README.md ("Counting
 * semaphores") maps every step to the function that implements it, and
 * test/model/check_model.sh runs every configuration below.  The token
 * source, crashes of the server and failovers are test/model/fencing.pml's:
 * here tokens come from one counter that only goes up.
 *
 * Actors
 *   clock      a global discrete clock that ticks up to TMAX; a tick can
 *              come between any two steps of any worker.
 *   worker(i)  NW workers, each a session with a holder name (HOLDER(i);
 *              with SAME_HOLDER workers A and B are two sessions of one
 *              holder).  Each loops: acquire a slot, then any number of
 *              {renew | check the slot, then write to the slot's
 *              resource}, then release.  A worker can be descheduled for
 *              any number of ticks between any two steps, and can crash
 *              while it holds a slot: it forgets its token, and its lease
 *              stays until it expires or its holder takes it again.
 *              A worker that learns its slot is gone forgets its token.
 *
 * An acquire is two kinds of step.  The survey (fencing_survey_lease_slots)
 * reads every row of the name with one snapshot and one clock reading and
 * takes no lock: the own slot (a row of this holder, not released, any
 * slot), else the lowest takeable slot below N (released, or expired past
 * the lock delay), else the lowest slot below N that has no row.  Then one
 * statement on that slot (LEASE_TAKE_OWN, LEASE_TAKE, LEASE_CREATE) judges
 * the row again, under its row lock and with a clock reading of its own;
 * it is one atomic step.  Between the survey and the statement anything can
 * happen.  A statement that changes no row sends the worker back to the
 * survey, at most ROUNDS times in all (N + 2, as try_acquire_slot); then
 * the acquire returns NULL.
 *
 * Every worker asks for the same N slots: a name has one kind and one
 * number of slots while any slot is held (LF021), so the kind columns of
 * the rows never differ here.  Changing a name's kind is not modeled (see
 * test/model/README.md, "One kind per name").
 *
 * Properties (assertions; each names what it checks)
 *   P1  one_holder_per_slot: a grant never replaces another holder's live
 *       lease on the slot.  A holder's grant is live while it is the
 *       row's current version, not released, and clock < expires_at
 *       (renewals push that on), so this is "at most one live holder per
 *       slot".  slot_below_n: every grant is for a slot below N.  With one
 *       row per slot, the two give "at most N holders at once".
 *   P2  one_slot_per_holder: when a slot is granted, its holder has no
 *       other live slot row (not released, not expired) of the name.
 *   P3  fenced_per_slot: the resource of slot s (its own fence column)
 *       never accepts a write from the holder of an earlier grant on s
 *       once it accepted one from a later grant on s.  Grants on each
 *       slot are numbered in real-time order by a ghost counter, as in
 *       fencing.pml.
 *
 * Variants (-D on the spin command line)
 *   (none)        the extension, strict fence_allows (fence < t)
 *   SAME_HOLDER   workers A and B are two sessions of one holder name;
 *                 the holder lock makes them acquire one after the
 *                 other, and P1, P2 and P3 hold.
 *   NO_RECHECK    BROKEN: the statement takes the slot on the survey's
 *                 judgement (LEASE_TAKE and LEASE_TAKE_OWN do not judge
 *                 the row again under the lock).  spin finds a P1
 *                 violation: two holders on one slot.
 *   NO_FENCE      BROKEN: the slot's resource accepts every write; the
 *                 worker checks the slot first, but may pause between the
 *                 check and the write.  spin finds a P3 violation.
 *   NO_HOLDER_LOCK BROKEN: an acquire does not first take the lock on
 *                 (name, holder, role) that the extension holds to the
 *                 acquire's commit (src/lease_wait.c fencing_holder_lock).
 *                 With SAME_HOLDER spin finds a P2 violation: two
 *                 sessions of one holder acquire at once and take two
 *                 slots.  With SKIP_P2 too, P1 and P3 still hold.
 *   SKIP_P2       do not assert P2
 * and the bounds below (N, NW, TTL, TMAX, MAXGRANTS, NWRITES, LOCK_DELAY,
 * ROUNDS).
 */

/* ---- bounds ---- */
#ifndef N
#define N		2	/* slots of the semaphore, 1..3 */
#endif
#ifndef NW
#define NW		3	/* workers, 1..3 */
#endif
#ifndef TTL
#define TTL		2	/* lease TTL in ticks */
#endif
#ifndef TMAX
#define TMAX	2	/* the clock stops here */
#endif
#ifndef MAXGRANTS
#define MAXGRANTS 2	/* an acquire starts only while there were fewer
					 * grants than this, so up to MAXGRANTS + NW - 1 */
#endif
#ifndef NWRITES
#define NWRITES	1	/* writes per grant */
#endif
#ifndef LOCK_DELAY
#define LOCK_DELAY 0	/* fencing.lock_delay, in ticks */
#endif
#ifndef ROUNDS
#define ROUNDS	(N + 2)	/* surveys per acquire (try_acquire_slot) */
#endif

/*
 * holder names: with SAME_HOLDER, workers NW and NW - 1 (A and B in the
 * stories) are two sessions of holder NW (a)
 */
#ifdef SAME_HOLDER
#define HOLDER(i)	((i) == NW - 1 -> NW : (i))
#else
#define HOLDER(i)	(i)
#endif

/* ---- the global state ---- */
byte clock;			/* clock_timestamp(), in ticks */
byte counter;		/* the token source: the last token issued */

/*
 * The rows of fencing.leases for the semaphore's name, one per slot.
 * tk 0: no row yet.  A released row has holder 0 and token REL: every
 * statement treats a released row alike whatever its holder and token
 * (LEASE_TAKE takes it; LIVE() is false, so renew, release and lock by a
 * token find nothing), so they share one state.
 */
#define REL		255
byte h[N];			/* holder; 0 = released */
byte tk[N];			/* token; 0 = no row, REL = released */
byte ex[N];			/* expires_at, in ticks */

#ifndef NO_HOLDER_LOCK
byte hlock[NW + 1];	/* the worker that holds holder i's lock; 0 = none */
#define LOCK_HOLDER		hlock[HOLDER(me)] == 0 && 
#define TAKE_LOCK		hlock[HOLDER(me)] = me
#define DROP_LOCK		hlock[HOLDER(me)] = 0
#else
#define LOCK_HOLDER
#define TAKE_LOCK		skip
#define DROP_LOCK		skip
#endif

/* the resource: one item per slot, with its fence column; 0 = NULL */
byte fence[N];

/* ghosts, for the properties only */
byte ngrants;		/* grants so far, all slots */
byte sgrants[N];	/* grants of each slot so far, numbered 1.. */
byte accGrant[N];	/* grant number of the last accepted write on a slot */

/* LIVE() in lease_table.c with the token test of renew/release/check */
#define LIVE(s, t)	(h[s] != 0 && tk[s] == (t) && clock < ex[s])

/* LEASE_TAKE's judgement: released, expired past the lock delay, or own */
#define TAKEABLE(s, me) \
	(tk[s] != 0 && (h[s] == 0 || ex[s] + LOCK_DELAY <= clock || \
					h[s] == HOLDER(me)))
/* LEASE_TAKE_OWN's: not released, and this holder's */
#define OWN(s, me)	(tk[s] != 0 && h[s] == HOLDER(me))
/* LEASE_CREATE's: no row (WHERE NOT EXISTS, ON CONFLICT DO NOTHING) */
#define MISSING(s)	(tk[s] == 0)

/* the resource's predicate for a write with token t to slot s */
#if defined(NO_FENCE)
#define ACCEPTS(s, t)	true
#else
#define ACCEPTS(s, t)	(fence[s] < (t))	/* fence_allows(f, t) */
#endif

active proctype clock_ticks()
{
	do
	:: d_step { clock < TMAX -> clock++; printf("MSC: t=%d tick\n", clock) }
	:: else -> break
	od
}

/* worker and holder names, for the stories */
#define NAME	('A' + NW - me)
#define HNAME	('a' + NW - HOLDER(me))

/* what the survey chose */
#define NONE	0
#define K_OWN	1	/* LEASE_TAKE_OWN */
#define K_TAKE	2	/* LEASE_TAKE */
#define K_NEW	3	/* LEASE_CREATE */

/*
 * fencing_survey_lease_slots: one snapshot and one clock reading, no
 * lock.  Sets kind and sl; NONE when every slot below N is held by
 * another holder (the acquire returns NULL).
 */
inline survey()
{
	kind = NONE;
	s = 0;
	do
	:: s < N && OWN(s, me) -> kind = K_OWN; sl = s; break
	:: s < N && !OWN(s, me) -> s++
	:: s == N -> break
	od;
	s = 0;
	do
	:: kind != NONE || s == N -> break
	:: else ->
		if
		:: TAKEABLE(s, me) -> kind = K_TAKE; sl = s
		:: else -> s++
		fi
	od;
	s = 0;
	do
	:: kind != NONE || s == N -> break
	:: else ->
		if
		:: MISSING(s) -> kind = K_NEW; sl = s
		:: else -> s++
		fi
	od;
	s = 0;
	if
	:: kind == NONE -> printf("MSC: t=%d worker %c (holder %c) surveys: no slot\n", clock, NAME, HNAME)
	:: kind == K_OWN -> printf("MSC: t=%d worker %c (holder %c) surveys: its own slot %d\n", clock, NAME, HNAME, sl)
	:: kind == K_TAKE -> printf("MSC: t=%d worker %c (holder %c) surveys: slot %d is takeable\n", clock, NAME, HNAME, sl)
	:: kind == K_NEW -> printf("MSC: t=%d worker %c (holder %c) surveys: slot %d has no row\n", clock, NAME, HNAME, sl)
	fi
}

/*
 * The properties checked at each grant of slot sl to HOLDER(me), before
 * the row changes.  A holder's grant is live while it is the row's
 * current version and clock < expires_at (renewals push that on), so P1
 * is: the version replaced is not another holder's live lease.
 */
inline check_grant()
{
	slot_below_n = (sl < N);
	assert(slot_below_n);
	one_holder_per_slot = !(h[sl] != 0 && h[sl] != HOLDER(me) && clock < ex[sl]);
	assert(one_holder_per_slot);
#ifndef SKIP_P2
	/* P2: the holder has no other live slot row */
	s = 0;
	do
	:: s == N -> break
	:: else ->
		one_slot_per_holder = !(s != sl && h[s] == HOLDER(me) && clock < ex[s]);
		assert(one_slot_per_holder);
		s++
	od;
	s = 0
#endif
}

/* a worker that crashes, gives up or learns it lost its slot forgets */
#define FORGET	tok = 0; grant = 0; w = 0; sl = 0

/*
 * The write to slot sl's resource: UPDATE ... SET fence = tok WHERE slot =
 * sl AND fencing.fence_allows(fence, tok).  Accepted: back to "held".
 * Refused: the worker stops and releases (which fails if the slot moved on).
 */
inline fenced_write()
{
	w++;
	if
	:: ACCEPTS(sl, tok) ->
		printf("MSC: t=%d worker %c writes slot %d's resource with token %d: accepted\n",
			   clock, NAME, sl, tok);
		fenced_per_slot = (grant >= accGrant[sl]);
		assert(fenced_per_slot);
#ifndef NO_FENCE
		fence[sl] = tok;
#endif
		accGrant[sl] = grant;
		fenced_per_slot = true;
		goto held
	:: else ->
		printf("MSC: t=%d worker %c writes slot %d's resource with token %d: refused, fence %d\n",
			   clock, NAME, sl, tok, fence[sl]);
		goto release
	fi
}

proctype worker(byte me)
{
	byte tok;		/* the token this worker believes it holds; 0 = none */
	byte sl;		/* its slot, or the slot the survey chose */
	byte grant;		/* ghost: tok's grant number on slot sl */
	byte w;			/* writes attempted with tok */
	byte kind;		/* what the survey chose */
	byte round;		/* surveys in this acquire */
	byte s;			/* a loop index, 0 between steps */
	bool ok;
	bool one_holder_per_slot = true;
	bool one_slot_per_holder = true;
	bool slot_below_n = true;
	bool fenced_per_slot = true;

	/*
	 * semaphore_acquire(name, HOLDER(me), N, TTL), wait => 0.  An acquire
	 * whose survey finds no slot returns NULL and changes nothing, so it
	 * is left out: the worker waits here instead, which is a valid end
	 * state.
	 */
end_idle:
	do
	:: d_step {
			LOCK_HOLDER ngrants < MAXGRANTS &&
			(OWN(0, me) || TAKEABLE(0, me) || MISSING(0)
#if N > 1
			 || OWN(1, me) || TAKEABLE(1, me) || MISSING(1)
#endif
#if N > 2
			 || OWN(2, me) || TAKEABLE(2, me) || MISSING(2)
#endif
			) ->
			TAKE_LOCK;
			round = 1;
			survey()
		};
		break
	od;

	/*
	 * Between the survey and the statement: any number of steps.  The
	 * statement is LEASE_TAKE_OWN, LEASE_TAKE or LEASE_CREATE on slot sl,
	 * which judges the row again (NO_RECHECK: does not).
	 */
	do
	:: d_step {
			if
			:: kind == K_OWN ->
#ifdef NO_RECHECK
				ok = true
#else
				ok = OWN(sl, me)
#endif
			:: kind == K_TAKE ->
#ifdef NO_RECHECK
				ok = true
#else
				ok = TAKEABLE(sl, me)
#endif
			:: kind == K_NEW -> ok = MISSING(sl)
			fi;
			if
			:: ok ->
				/* the row's new version, with a new token */
				counter++;
				check_grant();
				h[sl] = HOLDER(me); tk[sl] = counter; ex[sl] = clock + TTL;
				ngrants++;
				sgrants[sl]++;
				tok = counter; grant = sgrants[sl];
				printf("MSC: t=%d worker %c (holder %c) takes slot %d: token %d, expires at %d\n",
					   clock, NAME, HNAME, sl, tok, clock + TTL);
				kind = NONE; round = 0; DROP_LOCK
			:: else ->
				/* 0 rows: survey again, or give up */
				printf("MSC: t=%d worker %c loses slot %d (round %d)\n",
					   clock, NAME, sl, round)
			fi;
			ok = false
		};
		if
		:: tok != 0 -> break
		:: else
		fi;
		/* the next survey is a statement of its own */
		d_step {
			if
			:: round < ROUNDS -> round++; survey()
			:: else -> kind = NONE
			fi;
			if
			:: kind == NONE -> round = 0; sl = 0; DROP_LOCK;
				printf("MSC: t=%d worker %c gives up: NULL\n", clock, NAME)
			:: else
			fi
		};
		if
		:: kind == NONE -> goto end_idle		/* NULL */
		:: else
		fi
	od;

held:
	/* any number of ticks may pass here */
	if
	:: w < NWRITES -> goto check
	:: goto renew
	:: goto release
	:: atomic { FORGET; goto end_idle }		/* crash: the lease stays */
	fi;

check:
	/* lease_lock(name, tok), a statement (and transaction) of its own */
	atomic {
		if
		:: LIVE(sl, tok) ->
			printf("MSC: t=%d worker %c: lease_lock(%d) = true\n", clock, NAME, tok)
		:: else ->
			printf("MSC: t=%d worker %c: lease_lock(%d) = false\n", clock, NAME, tok);
			FORGET; goto end_idle
		fi
	};
	/* the pause between check and write: any number of ticks */
write:
	atomic { fenced_write() };

renew:
	/* lease_renew(name, tok, TTL) */
	atomic {
		if
		:: LIVE(sl, tok) ->
			ex[sl] = clock + TTL;
			printf("MSC: t=%d worker %c renews token %d: expires at %d\n",
				   clock, NAME, tok, clock + TTL);
			goto held
		:: else -> FORGET; goto end_idle
		fi
	};

release:
	/* lease_release(name, tok) */
	atomic {
		if
		:: LIVE(sl, tok) -> h[sl] = 0; tk[sl] = REL; ex[sl] = 0;
			printf("MSC: t=%d worker %c releases slot %d (token %d)\n", clock, NAME, sl, tok)
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
