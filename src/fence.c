/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  The resource side: predicates for conditional writes.
 *
 *-------------------------------------------------------------------------
 */
#include "fencing.h"

FENCING_FUNCTION(fencing_fence_check);

/*
 * fence_check(fence, token): may a writer holding "token" write a row whose
 * highest token so far is "fence"?  True iff fence IS NULL OR fence < token.
 * A NULL or non-positive token is an error, not a silent "no rows": such a
 * token was never issued, and NULL would make the WHERE clause quietly false.
 */
Datum
fencing_fence_check(PG_FUNCTION_ARGS)
{
	int64		token;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fencing token must not be null")));
	token = PG_GETARG_INT64(1);
	if (token <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fencing token must be positive"),
				 errdetail("Tokens are issued from 1 upwards; %lld was never issued.",
						   (long long) token)));
	if (PG_ARGISNULL(0))
		PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(PG_GETARG_INT64(0) < token);
}
