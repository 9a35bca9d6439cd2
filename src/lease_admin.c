/*-------------------------------------------------------------------------
 *
 * lease_admin.c
 *	  Operating leases: force-release and purge, for lease admins only
 *	  (superusers and members of role fencing_admin).
 *
 *-------------------------------------------------------------------------
 */
#include "fencing.h"

#include "access/xact.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

FENCING_FUNCTION(fencing_lease_force_release);
FENCING_FUNCTION(fencing_lease_purge);

static void
require_lease_admin(const char *what)
{
	if (!fencing_is_lease_admin(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for %s", what),
				 errdetail("Only superusers and members of role fencing_admin may call it.")));
}

/*
 * lease_force_release(name) ends a live lease whoever holds it, or the
 * lock delay of an expired one; true if there was one.  The holder's token is stale from then on, like after a
 * takeover.  Logged, since it overrides a holder.
 */
Datum
fencing_lease_force_release(PG_FUNCTION_ARGS)
{
	Datum		values[1];
	Datum		res[2];
	bool		isnull[2];
	text	   *name;
	char	   *holder;

	require_lease_admin("fencing.lease_force_release");
	PreventCommandIfReadOnly("fencing.lease_force_release()");
	name = fencing_name_arg(fcinfo, 0, "lease name");
	values[0] = PointerGetDatum(name);

	if (fencing_run_lease_statement(LEASE_FORCE_RELEASE, values,
									res, isnull, 2) == 0)
		PG_RETURN_BOOL(false);

	holder = TextDatumGetCString(res[1]);
	ereport(LOG,
			(errmsg("lease \"%s\" force-released by role \"%s\"",
					text_to_cstring(name), GetUserNameFromId(GetUserId(), false)),
			 errdetail("Holder \"%s\" with token %lld lost the lease.",
					   holder, (long long) DatumGetInt64(res[0]))));
	fencing_lease_freed(name, DatumGetInt64(res[0]), "force_release", holder);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

/*
 * lease_purge(older_than) deletes leases that have been free (released,
 * or expired past their lock delay) for longer than older_than; returns
 * how many.  Tokens come from one sequence, so a lease created again later
 * still gets a larger token than any it had.
 */
Datum
fencing_lease_purge(PG_FUNCTION_ARGS)
{
	Datum		values[1];
	int64		age;
	TimestampTz cutoff;

	require_lease_admin("fencing.lease_purge");
	PreventCommandIfReadOnly("fencing.lease_purge()");
	age = fencing_duration_arg(fcinfo, 0, "purge age", PG_INT64_MAX, "", true);

	/* an age beyond the calendar's start purges nothing, not an error */
	if (pg_sub_s64_overflow(GetCurrentTimestamp(), age, &cutoff) ||
		!IS_VALID_TIMESTAMP(cutoff))
		TIMESTAMP_NOBEGIN(cutoff);
	values[0] = TimestampTzGetDatum(cutoff);
	PG_RETURN_INT64((int64) fencing_run_lease_statement(LEASE_PURGE, values,
														NULL, NULL, 0));
}
