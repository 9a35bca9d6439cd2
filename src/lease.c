/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  lease_acquire, lease_renew, lease_release and lease_check.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "lease.h"

#define LEASE_MAX_TTL_USECS		(INT64CONST(86400) * USECS_PER_SEC)
#define LEASE_MAX_WAIT_USECS	(INT64CONST(86400) * USECS_PER_SEC)

FENCING_FUNCTION(fencing_lease_acquire);
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
run_as_holder(LeaseStatement stmt, LeaseRequest *req)
{
	Oid			caller = GetUserId();
	LeaseResult holder;
	uint64		processed;

	req->role = caller;
	processed = fencing_run_lease_statement(stmt, req, NULL);
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
	return fencing_run_lease_statement(stmt, req, NULL);
}

/* ---- acquiring ---- */

/*
 * One attempt: take a free, expired or own row, else create it.  A
 * concurrent creator makes the insert do nothing: look once more, since
 * that creator may be the same holder in another session.  A row seen and
 * held by another needs neither.
 */
static bool
try_acquire(const LeaseRequest *req, LeaseResult *res)
{
	if (fencing_run_lease_statement(LEASE_TAKE, req, res) == 0)
	{
		/* seen and held by another: no need to try creating it */
		if (res->row_seen)
			return false;
		if (fencing_run_lease_statement(LEASE_CREATE, req, res) == 0 &&
			fencing_run_lease_statement(LEASE_TAKE, req, res) == 0)
			return false;
	}
	return true;
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
wait_and_acquire(const LeaseRequest *req, int64 start, int64 wait_usecs,
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
		LeaseResult avail;

		/* registered first, so a release committed from now on wakes us */
		if (try_acquire(req, res))
		{
			acquired = true;
			break;
		}
		left = wait_usecs - (monotonic_usecs() - start);
		if (left <= 0)
			break;

		sleep_usecs = left;
		if (fencing_run_lease_statement(LEASE_AVAILABLE_AT, req, &avail) == 1 &&
			!avail.available_now)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (avail.available_at <= now)
				sleep_usecs = 0;
			else if (avail.available_at - now < sleep_usecs)
				sleep_usecs = avail.available_at - now;
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
acquire_waiting(const LeaseRequest *req, int64 wait_usecs, LeaseResult *res)
{
	const char *nm = VARDATA_ANY(req->name);
	int			len = VARSIZE_ANY_EXHDR(req->name);
	int64		start = monotonic_usecs();
	bool		acquired;

	if (!fencing_queue_try_enter(nm, len))
	{
		if (fencing_run_lease_statement(LEASE_TAKE_OWN, req, res) == 1)
			return true;
		if (!fencing_queue_enter(nm, len,
								 wait_usecs - (monotonic_usecs() - start)))
			return false;
	}
	acquired = wait_and_acquire(req, start, wait_usecs, res);
	fencing_queue_leave(nm, len);
	return acquired;
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
	LeaseResult res = {0};
	int64		wait_usecs;

	req.name = fencing_name_arg(fcinfo, 0, "lease name");
	req.holder = fencing_name_arg(fcinfo, 1, "lease holder");
	req.role = GetUserId();
	req.ttl = fencing_usecs_interval(fencing_duration_arg(fcinfo, 2, "lease TTL",
														  LEASE_MAX_TTL_USECS,
														  "1 day", false));
	req.lock_delay = fencing_usecs_interval((int64) lock_delay_ms * 1000);
	wait_usecs = fencing_duration_arg(fcinfo, 3, "wait interval",
									  LEASE_MAX_WAIT_USECS, "1 day", true);
	PreventCommandIfReadOnly("fencing.lease_acquire()");

	/* a waiter needs fresh snapshots to see the lease come free */
	if (wait_usecs > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("waiting for a lease requires the READ COMMITTED isolation level"),
				 errhint("Acquire with wait => '0' and retry in a new transaction.")));

	if (wait_usecs == 0)
	{
		/* try once, whoever waits */
		if (!try_acquire(&req, &res))
		{
			fencing_check_lease_snapshot(LEASE_TAKEABLE, &req);
			PG_RETURN_NULL();
		}
	}
	else if (!acquire_waiting(&req, wait_usecs, &res))
		PG_RETURN_NULL();

	fencing_notify(res.takeover ? "takeover" : "acquire",
				   VARDATA_ANY(req.name), VARSIZE_ANY_EXHDR(req.name),
				   res.token, text_to_cstring(req.holder));
	/* an acknowledged lease survives a crash, whatever synchronous_commit */
	ForceSyncCommit();
	PG_RETURN_INT64(res.token);
}

Datum
fencing_lease_renew(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};

	req.name = fencing_name_arg(fcinfo, 0, "lease name");
	req.token = fencing_token_arg(fcinfo, 1);
	req.ttl = fencing_usecs_interval(fencing_duration_arg(fcinfo, 2, "lease TTL",
														  LEASE_MAX_TTL_USECS,
														  "1 day", false));
	PreventCommandIfReadOnly("fencing.lease_renew()");

	if (run_as_holder(LEASE_RENEW, &req) == 0)
		PG_RETURN_BOOL(false);
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

	if (run_as_holder(LEASE_RELEASE, &req) == 0)
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

	if (run_as_holder(LEASE_CHECK, &req) != 1)
		PG_RETURN_BOOL(false);
	/* the lease is current here, but what it fenced may be lost */
	fencing_check_token_band(req.token);
	PG_RETURN_BOOL(true);
}
