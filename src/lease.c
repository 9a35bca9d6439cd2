/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  lease_acquire, semaphore_acquire, lease_renew, lease_release and
 *	  lease_check.
 *
 * A lease is slot 0 of its name; a semaphore of N slots is slots 0 to
 * N-1 of its name, each slot a lease of its own with its own holder and
 * token.  Renew, release and check find a slot by its token, so they serve
 * both; acquiring a semaphore slot looks at all of the name's rows first
 * (fencing_survey_lease_slots).  Waiting is the same for both: one queue
 * per name, in arrival order.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "lease.h"

#define LEASE_MAX_TTL_USECS		(INT64CONST(86400) * USECS_PER_SEC)
#define LEASE_MAX_WAIT_USECS	(INT64CONST(86400) * USECS_PER_SEC)
#define SEMAPHORE_MAX_SLOTS		1000

/* "slots" of an acquire that is a lease's (slot 0 only), not a semaphore's */
#define LEASE_ONLY				0

FENCING_FUNCTION(fencing_lease_acquire);
FENCING_FUNCTION(fencing_semaphore_acquire);
FENCING_FUNCTION(fencing_lease_renew);
FENCING_FUNCTION(fencing_lease_release);
FENCING_FUNCTION(fencing_lease_check);

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
 * Run a renew, release or check statement as the calling role.  When it
 * finds nothing, see whether the token is live but held by another role:
 * that is refused, unless the caller is a lease admin, who then acts with
 * the holder's role.
 */
static uint64
run_as_holder(LeaseStatement stmt, LeaseRequest *req, LeaseResult *result)
{
	Oid			caller = GetUserId();
	LeaseResult holder;
	uint64		processed;

	req->role = caller;
	processed = fencing_run_lease_statement(stmt, req, result);
	if (processed > 0)
		return processed;
	fencing_check_lease_snapshot(LEASE_HOLDER_ROLE, req);
	if (fencing_run_lease_statement(LEASE_HOLDER_ROLE, req, &holder) == 0 ||
		holder.holder_role == caller)
		return processed;

	if (!fencing_is_admin(caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("lease \"%s\" is held by another role",
						text_to_cstring(req->name)),
				 errdetail("Only the role that acquired a lease may renew, release or check it."),
				 errhint("Members of role fencing_admin may act on any lease.")));
	req->role = holder.holder_role;
	return fencing_run_lease_statement(stmt, req, result);
}

/* ---- acquiring ---- */

/*
 * The name's rows are of another kind or slot count than the request's:
 * make them the request's, which is refused (LF021) while one of them is
 * held (lease_row.c).  "again" says the attempt already did so and still
 * found another kind: under REPEATABLE READ and SERIALIZABLE that is the
 * transaction's snapshot, which cannot see the change.
 */
static void
define_name(LeaseRequest *req, bool again)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);

	if (again && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of lease \"%s\"",
						text_to_cstring(req->name)),
				 errhint("The transaction might succeed if retried.")));
	fencing_name_lock(nm, len);
	(void) fencing_define_lease_name(req);
	fencing_name_unlock(nm, len);
}

/*
 * Create the row of the request's slot, of the request's kind, under the
 * name lock and after making the name's other rows that kind (LF021 if one
 * of another kind is held).  False when the row exists.  When another
 * transaction is inserting it, wait for that one to end outside the name
 * lock, as the insert's ON CONFLICT would have, and look again.
 */
static bool
create_row(LeaseRequest *req, LeaseResult *res)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);

	for (;;)
	{
		TransactionId inserting;
		bool		created;

		fencing_name_lock(nm, len);
		inserting = fencing_define_lease_name(req);
		if (!TransactionIdIsValid(inserting))
		{
			created = fencing_run_lease_statement(LEASE_CREATE, req, res) == 1;
			fencing_name_unlock(nm, len);
			return created;
		}
		fencing_name_unlock(nm, len);
		XactLockTableWait(inserting, NULL, NULL, XLTW_None);
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
		if (!res->row_seen &&
			(create_row(req, res) ||
			 fencing_run_lease_statement(LEASE_TAKE, req, res) == 1))
			return true;
		/* seen and held by another */
		if (!res->row_seen || !res->mismatch)
			return false;
		define_name(req, round > 0);
	}
	return false;
}

/*
 * Take one of the free or expired slots the survey found, lowest first.
 * Concurrent acquirers see the same slots free: rather than queue behind
 * each other on the lowest one's row lock, each skips a slot whose row
 * another transaction has locked, as SKIP LOCKED would, and takes the
 * next.  The last one is waited for, so that a slot that is being taken
 * by a transaction that then rolls back is not missed.
 */
static bool
take_free_slot(LeaseRequest *req, const LeaseSurvey *survey, LeaseResult *res)
{
	bool		taken = false;

	for (int i = 0; i < survey->ntakeable && !taken; i++)
	{
		req->slot = survey->takeable[i];
		req->skip_locked = i < survey->ntakeable - 1;
		taken = fencing_run_lease_statement(LEASE_TAKE, req, res) == 1;
	}
	req->skip_locked = false;
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
				 TimestampTz *chance)
{
	bool		defined = false;

	/* lost every round: try again at once */
	*chance = 0;
	for (int round = 0; round < slots + 2; round++)
	{
		LeaseSurvey survey;
		bool		taken;

		fencing_survey_lease_slots(req, slots, &survey);
		if (survey.mismatch)
		{
			/* rows of another kind or slot count: ours if all free */
			define_name(req, defined);
			defined = true;
			continue;
		}
		if (survey.own_slot >= 0)
		{
			req->slot = survey.own_slot;
			taken = fencing_run_lease_statement(LEASE_TAKE_OWN, req, res) == 1;
		}
		else if (survey.ntakeable > 0)
			taken = take_free_slot(req, &survey, res);
		else if (survey.missing_slot >= 0)
		{
			req->slot = survey.missing_slot;
			taken = create_row(req, res);
		}
		else
		{
			/* every slot held: the next one comes free then */
			*chance = survey.free_at;
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
 * clock: 0 for at once, DT_NOEND for when a release wakes us.  A
 * semaphore's attempt knows it from its survey; a lease's asks its row
 * only when the caller will wait (chance not NULL).
 */
static bool
try_acquire(LeaseRequest *req, int32 slots, LeaseResult *res,
			TimestampTz *chance)
{
	TimestampTz slot_chance;
	LeaseResult avail;

	if (slots != LEASE_ONLY)
	{
		if (try_acquire_slot(req, slots, res, &slot_chance))
			return true;
		if (chance != NULL)
			*chance = slot_chance;
		return false;
	}
	if (try_acquire_lease(req, res))
		return true;
	if (chance != NULL)
	{
		*chance = DT_NOEND;
		if (fencing_run_lease_statement(LEASE_AVAILABLE_AT, req, &avail) == 1 &&
			!avail.available_now)
			*chance = avail.available_at;
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
		/* held as another kind or slot count: refused, not queued */
		if (survey.mismatch)
			define_name(req, false);
		if (survey.own_slot < 0)
			return false;
		req->slot = survey.own_slot;
	}
	if (fencing_run_lease_statement(LEASE_TAKE_OWN, req, res) == 1)
		return true;
	if (res->row_seen && res->mismatch)
		define_name(req, false);
	return false;
}

/*
 * Microseconds on the monotonic clock (CLOCK_MONOTONIC on Linux), for
 * deadlines: a step of the wall clock (NTP, an operator) neither stretches
 * nor cuts a wait.  Expiry is judged by the wall clock, as stored in the
 * lease row.
 */
static int64
monotonic_usecs(void)
{
	instr_time	t;

	INSTR_TIME_SET_CURRENT(t);
	return (int64) INSTR_TIME_GET_MICROSEC(t);
}

/*
 * As the head of the lease's queue, wait until the lease can be taken or
 * the deadline (start + wait_usecs) passes.  The head registers in the
 * lock manager (events.c) so a committed release wakes it; otherwise it
 * sleeps until the lease's expiry plus lock delay.  Each attempt is a
 * statement of its own and locks nothing it does not take, so the head
 * never blocks the holder.
 *
 * The deadline is on the monotonic clock; the time until the lease comes
 * free is a wall-clock difference, and only ever shortens a sleep.
 */
static bool
wait_and_acquire(LeaseRequest *req, int32 slots, int64 start,
				 int64 wait_usecs, LeaseResult *res)
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

		/* registered first, so a release committed from now on wakes us */
		if (try_acquire(req, slots, res, &chance))
		{
			acquired = true;
			break;
		}
		left = wait_usecs - (monotonic_usecs() - start);
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
		if (sleep_usecs > 0)
			fencing_waiter_sleep((long) ((sleep_usecs + 999) / 1000));
		else
			CHECK_FOR_INTERRUPTS();
	}
	fencing_waiter_unregister(nm, len);
	return acquired;
}

/*
 * Wait in arrival order: queue behind the lease's waiters (events.c), and
 * wait for the lease once at the head; leaving the queue makes the next
 * waiter the head.  A holder re-acquiring its own lease does not queue.
 */
static bool
acquire_waiting(LeaseRequest *req, int32 slots, int64 wait_usecs,
				LeaseResult *res)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);
	int64		start = monotonic_usecs();
	bool		acquired;

	if (!fencing_queue_try_enter(nm, len))
	{
		if (take_own(req, slots, res))
			return true;
		if (!fencing_queue_enter(nm, len,
								 wait_usecs - (monotonic_usecs() - start)))
			return false;
	}
	acquired = wait_and_acquire(req, slots, start, wait_usecs, res);
	fencing_queue_leave(nm, len);
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

	/* a waiter needs fresh snapshots to see the lease come free */
	if (wait_usecs > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("waiting for a lease requires the READ COMMITTED isolation level"),
				 errhint("Acquire with wait => '0' and retry in a new transaction.")));

	/*
	 * One acquire of a semaphore per holder at a time (events.c); its wait
	 * counts against ours.  Busy with wait => '0': another session of this
	 * holder is acquiring right now, and a try-once gives up.
	 */
	if (slots != LEASE_ONLY)
	{
		int64		start = monotonic_usecs();

		if (!fencing_holder_lock(VARDATA_ANY(req->name),
								 VARSIZE_ANY_EXHDR(req->name),
								 VARDATA_ANY(req->holder),
								 VARSIZE_ANY_EXHDR(req->holder),
								 req->role, wait_usecs))
			return 0;
		if (wait_usecs > 0)
			wait_usecs = Max(wait_usecs - (monotonic_usecs() - start), 1);
	}

	if (wait_usecs == 0)
	{
		/* try once, whoever waits */
		if (!try_acquire(req, slots, &res, NULL))
		{
			for (int s = 0; s < Max(slots, 1); s++)
			{
				req->slot = s;
				fencing_check_lease_snapshot(LEASE_TAKEABLE, req);
			}
			return 0;
		}
	}
	else if (!acquire_waiting(req, slots, wait_usecs, &res))
		return 0;

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
	/* the lease comes free sooner than its waiters' head last saw */
	if (res.shortened)
		fencing_wake_waiters_at_commit(VARDATA_ANY(req.name),
									   VARSIZE_ANY_EXHDR(req.name));
	/* the lease is current here, but what it fenced may be lost */
	fencing_check_token_band(req.token);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
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
fencing_lease_check(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};

	req.name = fencing_name_arg(fcinfo, 0, "lease name");
	req.token = fencing_token_arg(fcinfo, 1);
	/* it locks the row: a writing call */
	PreventCommandIfReadOnly("fencing.lease_check()");

	if (run_as_holder(LEASE_CHECK, &req, NULL) != 1)
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

int64
fencing_monotonic_usecs(void)
{
	return monotonic_usecs();
}
