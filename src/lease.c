/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  lease_acquire, semaphore_acquire, lease_renew, lease_release and
 *	  lease_lock.
 *
 * A lease is slot 0 of its name; a semaphore of N slots is slots 0 to
 * N-1 of its name, each slot a lease of its own with its own holder and
 * token.  Renew, release and lock find a slot by its token, so they serve
 * both; acquiring a semaphore slot looks at all of the name's rows first
 * (fencing_survey_lease_slots).  Waiting is the same for both: one queue
 * per name, in arrival order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "lease.h"

#define LEASE_MAX_TTL_USECS		(INT64CONST(86400) * USECS_PER_SEC)
#define LEASE_MAX_WAIT_USECS	(INT64CONST(86400) * USECS_PER_SEC)
#define SEMAPHORE_MAX_SLOTS		1000
#define RENEW_ALL_MAX_LEASES	10000

/* "slots" of an acquire that is a lease's (slot 0 only), not a semaphore's */
#define LEASE_ONLY				0

FENCING_FUNCTION(fencing_lease_acquire);
FENCING_FUNCTION(fencing_semaphore_acquire);
FENCING_FUNCTION(fencing_lease_renew);
FENCING_FUNCTION(fencing_lease_renew_all);
FENCING_FUNCTION(fencing_lease_release);
FENCING_FUNCTION(fencing_lease_lock);

/* fencing.lock_delay, in milliseconds */
static int	lock_delay_ms = 0;

void
fencing_lease_init(void)
{
	DefineCustomIntVariable("fencing.lock_delay",
							"After a lease expires, how long other holders must wait before taking it.",
							"Recorded with each acquire; a clean release has no delay.",
							&lock_delay_ms,
							0, 0, 60 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

/* ---- who may act on a lease ---- */

/*
 * The role to act as on the lease of req->token: the caller, unless the
 * token is live and another role's; that is refused, unless the caller is
 * a lease admin, who then acts with the holder's role.
 */
static Oid
holder_role_for(LeaseRequest *req)
{
	Oid			caller = GetUserId();
	LeaseResult holder;

	req->role = caller;
	fencing_check_lease_snapshot(LEASE_HOLDER_ROLE, req);
	if (fencing_run_lease_statement(LEASE_HOLDER_ROLE, req, &holder) == 0 ||
		holder.holder_role == caller)
		return caller;
	if (!fencing_is_admin(caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("lease \"%s\" is held by another role",
						text_to_cstring(req->name)),
				 errdetail("Only the role that acquired a lease may renew, release or lock it, or proclaim or resign with it."),
				 errhint("Members of role fencing_admin may act on any lease.")));
	return holder.holder_role;
}

/*
 * Run a renew, release, check or proclaim statement as the calling role.
 * When it finds nothing, see whether the token is live but held by another
 * role: that is refused, unless the caller is a lease admin, who then acts
 * with the holder's role.
 *
 * A renew, check or proclaim that succeeds holds the lease's row until the
 * transaction ends, and counts only if that comes before the expiry it
 * found: else the commit fails (lease_wait.c).  A renew made in time must not
 * bring back, at a late commit, a lease that watchers saw expire.
 */
static uint64
run_as_holder(LeaseStatement stmt, LeaseRequest *req, LeaseResult *result)
{
	Oid			caller = GetUserId();
	LeaseResult own;
	uint64		processed;

	if (result == NULL)
		result = &own;
	req->role = caller;
	processed = fencing_run_lease_statement(stmt, req, result);
	if (processed == 0)
	{
		req->role = holder_role_for(req);
		if (req->role != caller)
			processed = fencing_run_lease_statement(stmt, req, result);
	}
	if (processed > 0 && (stmt == LEASE_RENEW || stmt == LEASE_LOCK ||
						  stmt == LEASE_PROCLAIM))
		fencing_keep_until_commit(VARDATA_ANY(req->name),
								  VARSIZE_ANY_EXHDR(req->name), req->token,
								  result->expires_at);
	return processed;
}

/* ---- acquiring ---- */

/* Has the acquire's deadline for waits on other transactions passed? */
static bool
lock_deadline_passed(const LeaseRequest *req)
{
	return req->lock_deadline != FENCING_DEADLINE_NONE &&
		req->lock_deadline <= fencing_monotonic_usecs();
}

/*
 * Wait for what held up the definition of the name (a transaction writing
 * one of its rows, or the lockers of one), until the acquire's deadline (a
 * try-once does not wait): false and res->locked if it has not given way
 * by then.  Called without the name lock.
 */
static bool
wait_for_writer(LeaseRequest *req, LeaseResult *res,
				const LeaseNameWriter *writer)
{
	if (lock_deadline_passed(req) ||
		!fencing_wait_for_name_writer(writer, req->lock_deadline))
	{
		res->locked = true;
		return false;
	}
	return true;
}

/*
 * The name's rows are of another kind or slot count than the request's:
 * make them the request's, which is refused (LF021) while one of them is
 * held (lease_table.c).  "again" says the attempt already did so and still
 * found another kind: under REPEATABLE READ and SERIALIZABLE that is the
 * transaction's snapshot, which cannot see the change.  The name lock, and
 * a transaction writing one of the free rows right now, are waited for
 * until the acquire's deadline, as a row lock is: false (and res->locked)
 * if they did not give way by then.
 */
static bool
define_name(LeaseRequest *req, LeaseResult *res, bool again)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);

	if (again && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of lease \"%s\"",
						text_to_cstring(req->name)),
				 errhint("The transaction might succeed if retried.")));
	for (;;)
	{
		LeaseNameWriter writer;
		bool		defined;

		if (!fencing_name_lock(nm, len, req->lock_deadline))
		{
			res->locked = true;
			return false;
		}
		defined = fencing_define_lease_name(req, &writer);
		fencing_name_unlock(nm, len);
		if (defined)
			return true;
		if (!wait_for_writer(req, res, &writer))
			return false;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Create the row of the request's slot, of the request's kind, under the
 * name lock and after making the name's other rows that kind (LF021 if one
 * of another kind is held).  False when the row exists.  When another
 * transaction is inserting it, or writing a free row of another kind,
 * wait for that one to end outside the name lock, as the insert's ON
 * CONFLICT would have, and look again.  Both waits, for the name lock and
 * for the other transaction, end at the acquire's deadline (a try-once
 * waits for neither): false and res->locked then.
 */
static bool
create_row(LeaseRequest *req, LeaseResult *res)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);

	for (;;)
	{
		LeaseNameWriter writer;
		bool		created;

		if (!fencing_name_lock(nm, len, req->lock_deadline))
		{
			res->locked = true;
			return false;
		}
		if (fencing_define_lease_name(req, &writer))
		{
			created = fencing_run_lease_statement(LEASE_CREATE, req, res) == 1;
			fencing_name_unlock(nm, len);
			return created;
		}
		fencing_name_unlock(nm, len);
		if (!wait_for_writer(req, res, &writer))
			return false;
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * One attempt at a lease: take a free, expired or own row, else create
 * it.  A concurrent creator makes the creation do nothing: look once more,
 * since that creator may be the same holder in another session.  A row
 * seen and held by another needs neither; a row of another kind is made
 * ours if it is free, and refused if not.
 */
static bool
try_acquire_lease(LeaseRequest *req, LeaseResult *res)
{
	req->slot = 0;
	/* a few rounds: only kinds that keep changing under us need more */
	for (int round = 0; round < 4; round++)
	{
		if (fencing_run_lease_statement(LEASE_TAKE, req, res) == 1)
			return true;
		/* locked past the deadline: no use creating it */
		if (res->locked)
			return false;
		if (!res->row_seen)
		{
			if (create_row(req, res))
				return true;
			if (res->locked)
				return false;
			if (fencing_run_lease_statement(LEASE_TAKE, req, res) == 1)
				return true;
		}
		/* seen and held by another, or locked */
		if (!res->row_seen || !res->mismatch || res->locked)
			return false;
		if (!define_name(req, res, round > 0))
			return false;
	}
	return false;
}

/*
 * Take one of the slots the survey found: the free or expired ones, lowest
 * first, then the ones that have no row yet.  Concurrent acquirers see the
 * same slots: rather than queue behind each other on the lowest one's row
 * lock, each skips a slot whose row another transaction has locked or is
 * creating, as SKIP LOCKED would, and tries the next.  Only the last one
 * is waited for (until the acquire's deadline), so that a waiter does not
 * miss a slot whose taker then rolls back, and waits only when there is
 * nothing else to try.
 */
static bool
take_slot(LeaseRequest *req, const LeaseSurvey *survey, LeaseResult *res)
{
	int64		deadline = req->lock_deadline;
	int			n = survey->ntakeable + survey->nmissing;
	bool		taken = false;

	for (int i = 0; i < n && !taken; i++)
	{
		bool		exists = i < survey->ntakeable;

		req->slot = exists ? survey->takeable[i] :
			survey->missing[i - survey->ntakeable];
		req->lock_deadline = i < n - 1 ? FENCING_DEADLINE_NOW : deadline;
		if (exists)
			taken = fencing_run_lease_statement(LEASE_TAKE, req, res) == 1;
		else
			taken = create_row(req, res);
	}
	req->lock_deadline = deadline;
	return taken;
}

/*
 * One attempt at a semaphore slot: the holder's own slot if it holds one
 * (a holder holds at most one slot of a name, as it holds a lease once),
 * else the lowest free or expired slot, else the lowest slot that has no
 * row yet.  An attempt that loses its slots to concurrent acquires looks
 * again; a few rounds bound that, so that a trigger that skips the row
 * cannot keep us here.
 */
static bool
try_acquire_slot(LeaseRequest *req, int32 slots, LeaseResult *res,
				 TimestampTz *chance, TransactionId *prepared)
{
	bool		defined = false;

	/* lost every round: try again at once */
	*chance = 0;
	*prepared = InvalidTransactionId;
	for (int round = 0; round < slots + 2; round++)
	{
		LeaseSurvey survey;
		bool		taken;

		fencing_survey_lease_slots(req, slots, &survey);
		if (survey.mismatch)
		{
			/* rows of another kind or slot count: ours if all free */
			if (!define_name(req, res, defined))
				return false;
			defined = true;
			continue;
		}
		if (survey.own_slot >= 0)
		{
			req->slot = survey.own_slot;
			taken = fencing_run_lease_statement(LEASE_TAKE_OWN, req, res) == 1;
		}
		else if (survey.ntakeable + survey.nmissing > 0)
			taken = take_slot(req, &survey, res);
		else
		{
			/* every slot held: the next one comes free then */
			*chance = survey.free_at;
			*prepared = survey.prepared_xid;
			return false;
		}
		if (taken)
			return true;
		CHECK_FOR_INTERRUPTS();
	}
	return false;
}

/*
 * One attempt.  On failure, *chance says when to try again, on the wall
 * clock: 0 for at once, DT_NOEND for when a release wakes us; and
 * *prepared names a prepared transaction that changed the lease's row (a
 * release, say) and may free it at COMMIT PREPARED.  A semaphore's attempt
 * knows both from its survey; a lease's asks its row only when the caller
 * will wait (chance not NULL).
 */
static bool
try_acquire(LeaseRequest *req, int32 slots, LeaseResult *res,
			TimestampTz *chance, TransactionId *prepared)
{
	TimestampTz slot_chance;
	TransactionId slot_prepared;
	LeaseResult avail;

	if (slots != LEASE_ONLY)
	{
		if (try_acquire_slot(req, slots, res, &slot_chance, &slot_prepared))
			return true;
		if (chance != NULL)
		{
			*chance = slot_chance;
			*prepared = slot_prepared;
		}
		return false;
	}
	if (try_acquire_lease(req, res))
		return true;
	if (chance != NULL)
	{
		*chance = DT_NOEND;
		*prepared = InvalidTransactionId;
		if (fencing_run_lease_statement(LEASE_AVAILABLE_AT, req, &avail) == 1 &&
			!avail.available_now)
			*chance = avail.available_at;
		*prepared = avail.prepared_xid;
	}
	return false;
}

/* The holder's own slot again, whatever the queue, with a new token. */
static bool
take_own(LeaseRequest *req, int32 slots, LeaseResult *res)
{
	LeaseSurvey survey;

	if (slots == LEASE_ONLY)
		req->slot = 0;
	else
	{
		fencing_survey_lease_slots(req, slots, &survey);

		/*
		 * Held as another kind or slot count: refused, not queued.  Only
		 * judged here: a free name is made ours by the attempts, not
		 * before queueing, where its rows would stay locked by a waiter
		 * the head of the queue then waits for (40P01).
		 */
		if (survey.mismatch)
			fencing_refuse_held_kind(req);
		if (survey.own_slot < 0)
			return false;
		req->slot = survey.own_slot;
	}
	if (fencing_run_lease_statement(LEASE_TAKE_OWN, req, res) == 1)
		return true;
	if (res->row_seen && res->mismatch)
		fencing_refuse_held_kind(req);
	return false;
}

/*
 * As the head of the lease's queue, wait until the lease can be taken or
 * the deadline passes.  The head registers in the lock manager (lease_wait.c)
 * so a committed release wakes it; otherwise it sleeps until the lease's
 * expiry plus lock delay.  Each attempt is a statement of its own and
 * locks nothing it does not take, so the head never blocks the holder.
 * An attempt may wait for a row lock, until the deadline: a free or
 * expired lease whose row another transaction holds locked is taken when
 * that transaction ends.
 *
 * A release in a prepared transaction wakes the head at PREPARE; until
 * COMMIT PREPARED the head still sees the lease held, and waits for that
 * transaction to end instead of sleeping (a semaphore's head for a second
 * at most, then it looks at the other slots again).
 *
 * The deadline is on the monotonic clock; the time until the lease comes
 * free is a wall-clock difference, and only ever shortens a sleep.
 */
static bool
wait_and_acquire(LeaseRequest *req, int32 slots, int64 start, int64 deadline,
				 LeaseResult *res)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);
	bool		acquired = false;

	fencing_waiter_register(nm, len);
	for (;;)
	{
		int64		left;
		int64		sleep_usecs;
		TimestampTz chance;
		TransactionId prepared;

		/* registered first, so a release committed from now on wakes us */
		if (try_acquire(req, slots, res, &chance, &prepared))
		{
			acquired = true;
			break;
		}
		fencing_stats_wait_begin(start);
		left = deadline - fencing_monotonic_usecs();
		if (left <= 0)
			break;

		sleep_usecs = left;
		if (chance != DT_NOEND)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (chance <= now)
				sleep_usecs = 0;
			else if (chance - now < sleep_usecs)
				sleep_usecs = chance - now;
		}
		if (TransactionIdIsValid(prepared) && sleep_usecs > 0)
		{
			if (slots != LEASE_ONLY)
				sleep_usecs = Min(sleep_usecs, USECS_PER_SEC);
			(void) fencing_wait_for_xact(prepared,
										 fencing_monotonic_usecs() + sleep_usecs);
		}
		else if (sleep_usecs > 0)
			fencing_waiter_sleep((long) ((sleep_usecs + 999) / 1000));
		else
			CHECK_FOR_INTERRUPTS();
	}
	fencing_waiter_unregister(nm, len);
	return acquired;
}

/*
 * Wait in arrival order: queue behind the lease's waiters (lease_wait.c), and
 * wait for the lease once at the head; leaving the queue makes the next
 * waiter the head.  A holder re-acquiring its own lease does not queue.
 * A wait, counted, lasts from the call's start (start).
 */
static bool
acquire_waiting(LeaseRequest *req, int32 slots, int64 start, int64 deadline,
				LeaseResult *res)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);
	bool		acquired;

	if (!fencing_queue_try_enter(nm, len))
	{
		if (take_own(req, slots, res))
			return true;
		fencing_stats_wait_begin(start);
		if (!fencing_queue_enter(nm, len, deadline))
		{
			fencing_stats_wait_end(false);
			return false;
		}
	}
	acquired = wait_and_acquire(req, slots, start, deadline, res);
	fencing_queue_leave(nm, len);
	fencing_stats_wait_end(acquired);
	return acquired;
}

/*
 * The acquire common to lease_acquire and semaphore_acquire, once the
 * arguments are checked: a new token, or 0 when none could be had within
 * the wait.
 */
static int64
acquire(LeaseRequest *req, int32 slots, int64 wait_usecs)
{
	LeaseResult res = {0};
	int64		deadline = wait_usecs > 0 ?
		fencing_monotonic_usecs() + wait_usecs : FENCING_DEADLINE_NOW;

	/* a waiter needs fresh snapshots to see the lease come free */
	if (wait_usecs > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("waiting for a lease requires the READ COMMITTED isolation level"),
				 errhint("Acquire with wait => '0' and retry in a new transaction.")));

	/*
	 * One acquire of a semaphore per holder at a time (lease_wait.c); its wait
	 * counts against ours.  Busy with wait => '0': another session of this
	 * holder is acquiring right now, and a try-once gives up.
	 */
	if (slots != LEASE_ONLY &&
		!fencing_holder_lock(VARDATA_ANY(req->name),
							 VARSIZE_ANY_EXHDR(req->name),
							 VARDATA_ANY(req->holder),
							 VARSIZE_ANY_EXHDR(req->holder),
							 req->role, deadline))
		return 0;

	/*
	 * A row that another transaction has locked (a check, a renew, a
	 * concurrent acquire) or is creating: a try-once does not wait for it
	 * at all, and a waiter until its deadline.
	 */
	req->lock_deadline = deadline;
	if (wait_usecs == 0)
	{
		/* try once, whoever waits */
		if (!try_acquire(req, slots, &res, NULL, NULL))
		{
			for (int s = 0; s < Max(slots, 1); s++)
			{
				req->slot = s;
				fencing_check_lease_snapshot(LEASE_TAKEABLE, req);
			}
			return 0;
		}
	}
	else if (!acquire_waiting(req, slots, deadline - wait_usecs, deadline, &res))
		return 0;

	fencing_stats_acquired(res.takeover, res.lapsed);

	/*
	 * Wake at commit who watches the token this one replaced, and an
	 * election's observers; a lease taken after a release wakes nobody
	 * (the release did), so the lease cycle pays nothing for watchers.
	 */
	if (res.replaced || req->kind == LEASE_KIND_ELECTION)
		fencing_wake_waiters_at_commit(VARDATA_ANY(req->name),
									   VARSIZE_ANY_EXHDR(req->name));
	fencing_notify(res.takeover ? "takeover" : "acquire",
				   VARDATA_ANY(req->name), VARSIZE_ANY_EXHDR(req->name),
				   res.token, text_to_cstring(req->holder));
	/* an acknowledged lease survives a crash, whatever synchronous_commit */
	ForceSyncCommit();
	return res.token;
}

/*
 * The TTL (argument ttl_argno) and the wait (the next one) of an acquire,
 * with the session's lock delay, into *req; returns the wait.
 */
static int64
acquire_times_arg(FunctionCallInfo fcinfo, int ttl_argno, LeaseRequest *req)
{
	req->ttl = fencing_usecs_interval(fencing_duration_arg(fcinfo, ttl_argno,
														   "lease TTL",
														   LEASE_MAX_TTL_USECS,
														   "1 day", false));
	req->lock_delay = fencing_usecs_interval((int64) lock_delay_ms * 1000);
	return fencing_duration_arg(fcinfo, ttl_argno + 1, "wait interval",
								LEASE_MAX_WAIT_USECS, "1 day", true);
}

/*
 * lease_acquire(name, holder, ttl, wait) returns a new token, or NULL when
 * another holder's unexpired lease stands (after waiting up to "wait").
 * "Another holder" is a different holder name, or the same name acquired
 * by a different role.
 */
Datum
fencing_lease_acquire(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};
	int64		wait_usecs;
	int64		token;

	req.name = fencing_name_arg(fcinfo, 0, "lease name");
	req.holder = fencing_name_arg(fcinfo, 1, "lease holder");
	req.role = GetUserId();
	req.kind = LEASE_KIND_LEASE;
	req.slots = 1;
	wait_usecs = acquire_times_arg(fcinfo, 2, &req);
	PreventCommandIfReadOnly("fencing.lease_acquire()");

	token = acquire(&req, LEASE_ONLY, wait_usecs);
	if (token == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

/*
 * semaphore_acquire(name, holder, slots, ttl, wait): as lease_acquire, for
 * one of the first "slots" slots of the name.  Each holder gets a token of
 * its own; a semaphore of one slot is the lease of that name.
 */
Datum
fencing_semaphore_acquire(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};
	int32		slots;
	int64		wait_usecs;
	int64		token;

	req.name = fencing_name_arg(fcinfo, 0, "semaphore name");
	req.holder = fencing_name_arg(fcinfo, 1, "semaphore holder");
	req.role = GetUserId();
	fencing_require_arg(fcinfo, 2, "number of slots");
	slots = PG_GETARG_INT32(2);
	if (slots < 1 || slots > SEMAPHORE_MAX_SLOTS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of slots must be between 1 and %d", SEMAPHORE_MAX_SLOTS),
				 errdetail("It is %d.", slots)));
	req.kind = LEASE_KIND_SEMAPHORE;
	req.slots = slots;
	wait_usecs = acquire_times_arg(fcinfo, 3, &req);
	PreventCommandIfReadOnly("fencing.semaphore_acquire()");

	token = acquire(&req, slots, wait_usecs);
	if (token == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

Datum
fencing_lease_renew(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};
	LeaseResult res = {0};

	req.name = fencing_name_arg(fcinfo, 0, "lease name");
	req.token = fencing_token_arg(fcinfo, 1);
	req.ttl = fencing_usecs_interval(fencing_duration_arg(fcinfo, 2, "lease TTL",
														  LEASE_MAX_TTL_USECS,
														  "1 day", false));
	PreventCommandIfReadOnly("fencing.lease_renew()");

	if (run_as_holder(LEASE_RENEW, &req, &res) == 0)
		PG_RETURN_BOOL(false);
	fencing_stats_count(FENCING_STAT_RENEWALS);
	/* the lease comes free sooner than its waiters' head last saw */
	if (res.shortened)
		fencing_wake_waiters_at_commit(VARDATA_ANY(req.name),
									   VARSIZE_ANY_EXHDR(req.name));
	/* the lease is current here, but what it fenced may be lost */
	fencing_check_token_band(req.token);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

/* ---- group keepalive ---- */

/* One (name, token) pair of lease_renew_all, and where it was */
typedef struct RenewPair
{
	text	   *name;
	int64		token;
	int			pos;
} RenewPair;

/* name order, bytewise (COLLATE "C"), then array order */
static int
renew_pair_cmp(const void *a, const void *b)
{
	const RenewPair *x = (const RenewPair *) a;
	const RenewPair *y = (const RenewPair *) b;
	int			xlen = VARSIZE_ANY_EXHDR(x->name);
	int			ylen = VARSIZE_ANY_EXHDR(y->name);
	int			c = memcmp(VARDATA_ANY(x->name), VARDATA_ANY(y->name),
						   Min(xlen, ylen));

	if (c != 0)
		return c;
	if (xlen != ylen)
		return xlen < ylen ? -1 : 1;
	return x->pos - y->pos;
}

/*
 * Is the token from the current band, or would lease_renew refuse it with
 * LF005 (fencing_check_token_band)?  Asked in a subtransaction, which
 * writes nothing unless the check enters a new band.
 */
static bool
token_in_band(int64 token)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool in_band = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		fencing_check_token_band(token);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		if (edata->sqlerrcode != ERRCODE_FENCING_OLD_BAND)
			ReThrowError(edata);
		FreeErrorData(edata);
		in_band = false;
	}
	PG_END_TRY();
	return in_band;
}

/*
 * lease_renew_all(names, tokens, ttl): renew each lease with its own token,
 * as lease_renew does, in name order (so that overlapping calls lock rows
 * in one order and cannot deadlock); one row per pair, (name, token,
 * renewed).  The arguments are checked, every element included, before
 * anything is renewed; so are the roles, lease by lease (42501 fails the
 * whole call, as lease_renew would).  A token from before the current
 * band, which lease_renew refuses with LF005, gives renewed = false for
 * that lease alone: a group keepalive must not stop renewing the other
 * leases because one of them was lost at a failover.
 */
Datum
fencing_lease_renew_all(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType  *names_arr;
	ArrayType  *tokens_arr;
	Datum	   *names;
	bool	   *names_null;
	Datum	   *tokens;
	bool	   *tokens_null;
	int			nnames;
	int			ntokens;
	Datum		ttl;
	RenewPair  *pairs;
	int64		lowest_in_band = PG_INT64_MAX;
	int64		highest_before_band = 0;
	bool		renewed_any = false;
	TupleDesc	tupdesc;
	Tuplestorestate *store;
	MemoryContext oldcontext;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		(rsinfo->allowedModes & SFRM_Materialize) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease names, tokens and TTL must not be null")));
	names_arr = PG_GETARG_ARRAYTYPE_P(0);
	tokens_arr = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(names_arr) > 1 || ARR_NDIM(tokens_arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease names and tokens must be one-dimensional arrays")));
	nnames = ArrayGetNItems(ARR_NDIM(names_arr), ARR_DIMS(names_arr));
	ntokens = ArrayGetNItems(ARR_NDIM(tokens_arr), ARR_DIMS(tokens_arr));
	if (nnames != ntokens)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("got %d lease names but %d tokens", nnames, ntokens),
				 errhint("Pass one token per lease, in the same order.")));
	if (nnames > RENEW_ALL_MAX_LEASES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("at most %d leases per call, got %d",
						RENEW_ALL_MAX_LEASES, nnames)));
	/* the TTL as lease_renew checks it, however many leases there are */
	ttl = fencing_usecs_interval(fencing_duration_arg(fcinfo, 2, "lease TTL",
													  LEASE_MAX_TTL_USECS,
													  "1 day", false));
	deconstruct_array(names_arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &names, &names_null, &nnames);
	deconstruct_array(tokens_arr, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &tokens, &tokens_null, &ntokens);
	pairs = palloc(sizeof(RenewPair) * Max(nnames, 1));
	for (int i = 0; i < nnames; i++)
	{
		if (names_null[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("lease name must not be null")));
		if (tokens_null[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("fencing token must not be null")));
		pairs[i].name = DatumGetTextPP(names[i]);
		fencing_check_name(pairs[i].name, "lease name");
		pairs[i].token = DatumGetInt64(tokens[i]);
		fencing_check_token(pairs[i].token);
		pairs[i].pos = i;
		/* the band is a threshold: the smallest token tells for the rest */
		lowest_in_band = Min(lowest_in_band, pairs[i].token);
	}
	PreventCommandIfReadOnly("fencing.lease_renew_all()");
	qsort(pairs, nnames, sizeof(RenewPair), renew_pair_cmp);

	/*
	 * Tokens below a band's start are refused and none above (token.c): a
	 * token in the band vouches for every larger one, a token before it for
	 * every smaller one.  So one check usually does for all.
	 */
	if (nnames > 0 && !token_in_band(lowest_in_band))
	{
		highest_before_band = lowest_in_band;
		lowest_in_band = PG_INT64_MAX;
	}

	oldcontext = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	tupdesc = CreateTupleDescCopy(tupdesc);
	store = tuplestore_begin_heap(false, false, work_mem);
	MemoryContextSwitchTo(oldcontext);

	for (int i = 0; i < nnames; i++)
	{
		LeaseRequest req = {0};
		LeaseResult res = {0};
		Datum		values[3];
		bool		nulls[3] = {false, false, false};
		bool		in_band;
		bool		renewed = false;

		req.name = pairs[i].name;
		req.token = pairs[i].token;
		req.ttl = ttl;
		if (req.token >= lowest_in_band)
			in_band = true;
		else if (req.token <= highest_before_band)
			in_band = false;
		else if ((in_band = token_in_band(req.token)))
			lowest_in_band = req.token;
		else
			highest_before_band = req.token;

		if (!in_band)
			/* not renewed; but another role's lease fails the call */
			(void) holder_role_for(&req);
		else if (run_as_holder(LEASE_RENEW, &req, &res) > 0)
		{
			renewed = renewed_any = true;
			if (res.shortened)
				fencing_wake_waiters_at_commit(VARDATA_ANY(req.name),
											   VARSIZE_ANY_EXHDR(req.name));
		}
		values[0] = PointerGetDatum(req.name);
		values[1] = Int64GetDatum(req.token);
		values[2] = BoolGetDatum(renewed);
		tuplestore_putvalues(store, tupdesc, values, nulls);
	}
	if (renewed_any)
		ForceSyncCommit();

	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = store;
	rsinfo->setDesc = tupdesc;
	return (Datum) 0;
}

Datum
fencing_lease_release(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};

	req.name = fencing_name_arg(fcinfo, 0, "lease name");
	req.token = fencing_token_arg(fcinfo, 1);
	PreventCommandIfReadOnly("fencing.lease_release()");

	if (run_as_holder(LEASE_RELEASE, &req, NULL) == 0)
		PG_RETURN_BOOL(false);
	fencing_stats_count(FENCING_STAT_RELEASES);
	fencing_lease_freed(req.name, req.token, "release", NULL);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

/* A lease came free: wake its waiters at commit and tell listeners. */
void
fencing_lease_freed(text *name, int64 token, const char *event,
					const char *holder)
{
	fencing_wake_waiters_at_commit(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
	fencing_notify(event, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), token,
				   holder);
}

/*
 * True iff the token is the lease's current one and the lease is live.
 * The row stays locked (FOR NO KEY UPDATE, as strongly as a renew) until
 * the caller's transaction ends, so no takeover can commit in between:
 * "check, then write" is atomic, and a renew after it upgrades nothing.
 */
Datum
fencing_lease_lock(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};

	req.name = fencing_name_arg(fcinfo, 0, "lease name");
	req.token = fencing_token_arg(fcinfo, 1);
	/* it locks the row: a writing call */
	PreventCommandIfReadOnly("fencing.lease_lock()");

	if (run_as_holder(LEASE_LOCK, &req, NULL) != 1)
		PG_RETURN_BOOL(false);
	/* the lease is current here, but what it fenced may be lost */
	fencing_check_token_band(req.token);
	PG_RETURN_BOOL(true);
}

/* ---- for the holder-side layer (election.c, watch.c) ---- */

int64
fencing_acquire_times_arg(FunctionCallInfo fcinfo, int ttl_argno,
						  LeaseRequest *req)
{
	return acquire_times_arg(fcinfo, ttl_argno, req);
}

/* An acquire of a lease or an election (slot 0), once arguments are checked. */
int64
fencing_acquire(LeaseRequest *req, int64 wait_usecs)
{
	Assert(req->kind != LEASE_KIND_SEMAPHORE);
	return acquire(req, LEASE_ONLY, wait_usecs);
}

uint64
fencing_run_as_holder(LeaseStatement stmt, LeaseRequest *req,
					  LeaseResult *result)
{
	return run_as_holder(stmt, req, result);
}
