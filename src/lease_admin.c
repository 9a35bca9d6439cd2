/*-------------------------------------------------------------------------
 *
 * lease_admin.c
 *	  Operating leases: force-release and purge, for lease admins only
 *	  (superusers and members of role fencing_admin).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "lease.h"

FENCING_FUNCTION(fencing_lease_force_release);
FENCING_FUNCTION(fencing_lease_purge);

static void
require_lease_admin(const char *what)
{
	if (!fencing_is_admin(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for %s", what),
				 errdetail("Only superusers and members of role fencing_admin may call it.")));
}

/*
 * lease_force_release(name) ends a live lease whoever holds it, or the
 * lock delay of an expired one, and so every slot of a semaphore; true if
 * there was one.  The holder's token is stale from then on, like after a
 * takeover.  Logged, since it overrides a holder.
 */
Datum
fencing_lease_force_release(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};
	LeaseResult res = {0};
	bool		released = false;

	require_lease_admin("fencing.lease_force_release");
	PreventCommandIfReadOnly("fencing.lease_force_release()");
	req.name = fencing_name_arg(fcinfo, 0, "lease name");

	/* each slot of a semaphore, one at a time; a lease has one */
	while (fencing_run_lease_statement(LEASE_FORCE_RELEASE, &req, &res) == 1)
	{
		ereport(LOG,
				(errmsg("lease \"%s\" force-released by role \"%s\"",
						text_to_cstring(req.name),
						GetUserNameFromId(GetUserId(), false)),
				 errdetail("Holder \"%s\" with token %lld lost the lease.",
						   res.holder, (long long) res.token)));
		fencing_lease_freed(req.name, res.token, "force_release", res.holder);
		fencing_stats_count(FENCING_STAT_FORCE_RELEASES);
		released = true;
	}
	if (released)
		ForceSyncCommit();
	PG_RETURN_BOOL(released);
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
	LeaseRequest req = {0};
	int64		age;

	require_lease_admin("fencing.lease_purge");
	PreventCommandIfReadOnly("fencing.lease_purge()");
	age = fencing_duration_arg(fcinfo, 0, "purge age", PG_INT64_MAX, "", true);

	/* an age beyond the calendar's start purges nothing, not an error */
	if (pg_sub_s64_overflow(GetCurrentTimestamp(), age, &req.cutoff) ||
		!IS_VALID_TIMESTAMP(req.cutoff))
		TIMESTAMP_NOBEGIN(req.cutoff);
	PG_RETURN_INT64((int64) fencing_run_lease_statement(LEASE_PURGE, &req,
														NULL));
}
