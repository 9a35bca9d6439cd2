/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  lease_acquire, lease_renew, lease_release and lease_check.
 *
 *-------------------------------------------------------------------------
 */
#include "fencing.h"

#include "access/xact.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

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

/* Superusers and members of the role fencing_admin, if it exists. */
bool
fencing_is_lease_admin(Oid roleid)
{
	Oid			admin;

	if (superuser_arg(roleid))
		return true;
	admin = get_role_oid("fencing_admin", true);
	return OidIsValid(admin) && has_privs_of_role(roleid, admin);
}

/*
 * Run a renew, release or check statement as the calling role.  When it
 * finds nothing, see whether the token is live but held by another role:
 * that is refused, unless the caller is a lease admin, who then acts with
 * the holder's role.  values[2] is the role slot.
 */
static uint64
run_as_holder(LeaseStatement stmt, Datum *values)
{
	Oid			caller = GetUserId();
	Datum		holder_role;
	bool		isnull;
	uint64		processed;

	values[2] = ObjectIdGetDatum(caller);
	processed = fencing_run_lease_statement(stmt, values, NULL, NULL, 0);
	if (processed > 0)
		return processed;
	fencing_check_lease_snapshot(LEASE_HOLDER_ROLE, values);
	if (fencing_run_lease_statement(LEASE_HOLDER_ROLE, values,
									&holder_role, &isnull, 1) == 0 ||
		DatumGetObjectId(holder_role) == caller)
		return processed;

	if (!fencing_is_lease_admin(caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("lease \"%s\" is held by another role",
						text_to_cstring(DatumGetTextPP(values[0]))),
				 errdetail("Only the role that acquired a lease may renew, release or check it."),
				 errhint("Members of role fencing_admin may act on any lease.")));
	values[2] = holder_role;
	return fencing_run_lease_statement(stmt, values, NULL, NULL, 0);
}

/* ---- acquiring ---- */

/*
 * One attempt: take a free, expired or own row, else create it.  A
 * concurrent creator makes the insert do nothing: look once more, since
 * that creator may be the same holder in another session.  A row seen and
 * held by another needs neither.
 */
static bool
try_acquire(Datum *values, int64 *token, bool *takeover)
{
	Datum		res[2];
	bool		isnull[2];
	bool		held = false;

	if (fencing_run_lease_statement_seen(LEASE_TAKE, values, res, isnull, 2,
										 &held) == 0)
	{
		/* seen and held by another: no need to try creating it */
		if (held)
			return false;
		if (fencing_run_lease_statement(LEASE_CREATE, values, res, isnull, 2) == 0 &&
			fencing_run_lease_statement(LEASE_TAKE, values, res, isnull, 2) == 0)
			return false;
	}
	*token = DatumGetInt64(res[0]);
	*takeover = DatumGetBool(res[1]);
	return true;
}

/*
 * Wait until the lease can be taken or the deadline passes.  The waiter
 * registers in the lock manager (events.c) so a committed release wakes
 * it; otherwise it sleeps until the lease's expiry plus lock delay.  Each
 * attempt is a statement of its own and locks nothing it does not take,
 * so waiters never block the holder.
 */
static bool
wait_and_acquire(Datum *values, int64 wait_usecs, int64 *token,
				 bool *takeover)
{
	text	   *name = DatumGetTextPP(values[0]);
	const char *nm = VARDATA_ANY(name);
	int			len = VARSIZE_ANY_EXHDR(name);
	TimestampTz deadline = GetCurrentTimestamp() + wait_usecs;
	bool		acquired = false;

	fencing_waiter_register(nm, len);
	for (;;)
	{
		TimestampTz now;
		TimestampTz wake;
		Datum		available_at;
		bool		isnull = true;

		/* registered first, so a release committed from now on wakes us */
		if (try_acquire(values, token, takeover))
		{
			acquired = true;
			break;
		}
		now = GetCurrentTimestamp();
		if (now >= deadline)
			break;

		wake = deadline;
		if (fencing_run_lease_statement(LEASE_AVAILABLE_AT, values,
										&available_at, &isnull, 1) == 1 &&
			!isnull && DatumGetTimestampTz(available_at) < wake)
			wake = DatumGetTimestampTz(available_at);
		if (wake > now)
			fencing_waiter_sleep((long) ((wake - now + 999) / 1000));
		else
			CHECK_FOR_INTERRUPTS();
	}
	fencing_waiter_unregister(nm, len);
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
	Datum		values[5];
	int64		wait_usecs;
	int64		token;
	bool		takeover;
	text	   *name;
	text	   *holder;

	name = fencing_name_arg(fcinfo, 0, "lease name");
	holder = fencing_name_arg(fcinfo, 1, "lease holder");
	values[0] = PointerGetDatum(name);
	values[1] = PointerGetDatum(holder);
	values[2] = ObjectIdGetDatum(GetUserId());
	values[3] = fencing_usecs_interval(fencing_duration_arg(fcinfo, 2, "lease TTL",
															LEASE_MAX_TTL_USECS,
															"1 day", false));
	values[4] = fencing_usecs_interval((int64) lock_delay_ms * 1000);
	wait_usecs = fencing_duration_arg(fcinfo, 3, "wait interval",
									  LEASE_MAX_WAIT_USECS, "1 day", true);
	PreventCommandIfReadOnly("fencing.lease_acquire()");

	/* a waiter needs fresh snapshots to see the lease come free */
	if (wait_usecs > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("waiting for a lease requires the READ COMMITTED isolation level"),
				 errhint("Acquire with wait => '0' and retry in a new transaction.")));

	if (!try_acquire(values, &token, &takeover))
	{
		if (wait_usecs == 0)
		{
			fencing_check_lease_snapshot(LEASE_TAKEABLE, values);
			PG_RETURN_NULL();
		}
		if (!wait_and_acquire(values, wait_usecs, &token, &takeover))
			PG_RETURN_NULL();
	}

	fencing_notify(takeover ? "takeover" : "acquire",
				   VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name), token,
				   text_to_cstring(holder));
	/* an acknowledged lease survives a crash, whatever synchronous_commit */
	ForceSyncCommit();
	PG_RETURN_INT64(token);
}

Datum
fencing_lease_renew(PG_FUNCTION_ARGS)
{
	Datum		values[4];

	values[0] = PointerGetDatum(fencing_name_arg(fcinfo, 0, "lease name"));
	values[1] = Int64GetDatum(fencing_token_arg(fcinfo, 1));
	values[3] = fencing_usecs_interval(fencing_duration_arg(fcinfo, 2, "lease TTL",
															LEASE_MAX_TTL_USECS,
															"1 day", false));
	PreventCommandIfReadOnly("fencing.lease_renew()");

	if (run_as_holder(LEASE_RENEW, values) == 0)
		PG_RETURN_BOOL(false);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

Datum
fencing_lease_release(PG_FUNCTION_ARGS)
{
	Datum		values[3];
	text	   *name;
	int64		token;

	name = fencing_name_arg(fcinfo, 0, "lease name");
	token = fencing_token_arg(fcinfo, 1);
	PreventCommandIfReadOnly("fencing.lease_release()");

	values[0] = PointerGetDatum(name);
	values[1] = Int64GetDatum(token);

	if (run_as_holder(LEASE_RELEASE, values) == 0)
		PG_RETURN_BOOL(false);
	fencing_lease_freed(name, token, "release", NULL);
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
 * The row stays share-locked until the caller's transaction ends, so no
 * takeover can commit in between: "check, then write" is atomic.
 */
Datum
fencing_lease_check(PG_FUNCTION_ARGS)
{
	Datum		values[3];

	values[0] = PointerGetDatum(fencing_name_arg(fcinfo, 0, "lease name"));
	values[1] = Int64GetDatum(fencing_token_arg(fcinfo, 1));
	/* it locks the row: a writing call */
	PreventCommandIfReadOnly("fencing.lease_check()");

	PG_RETURN_BOOL(run_as_holder(LEASE_CHECK, values) == 1);
}
