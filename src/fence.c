/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  The resource side: predicates and checks for fenced writes.
 *
 * A fenced row keeps the highest token that wrote it in a bigint column
 * (the fence).  fence_allows is the WHERE-clause predicate;
 * fence_advance belongs in the SET list, where it runs only for the rows
 * the statement really updates, whatever plan the planner picks, and
 * raises instead of letting a stale write turn into a silent "0 rows".
 *
 * Every fenced write that moves a row's fence is made durable before it is
 * acknowledged, whatever synchronous_commit says
 * (fencing_fenced_write_durable): a write lost in a crash after its client
 * was told it succeeded would move the row's fence back, and the stale
 * holder the fence refused would get in.  A write that leaves the fence
 * where it is (the holder writing again with the token the row is fenced
 * with) needs no flush: lost, it leaves the row fenced with the same token,
 * made durable by the write that put it there before anyone saw it, and
 * its own data is as durable as synchronous_commit says.
 *
 * The two are IMMUTABLE, which Citus needs to send them to its workers
 * with an UPDATE's SET list, WHERE clause or ON CONFLICT DO UPDATE.  The
 * planner therefore evaluates a call whose arguments are all constants
 * once, when it plans the statement, and keeps the result in the plan
 * (evaluate_function() runs before any support function, so nothing can
 * stop it).  The checks of such a call must not be skipped by a cached
 * plan used again in a later transaction: see forget_folded_plans().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "utils/plancache.h"

#include "resource.h"

FENCING_FUNCTION(fencing_fence_allows);
FENCING_FUNCTION(fencing_fence_advance);
FENCING_FUNCTION(fencing_expect_rows);

/* a call was evaluated at plan time in this transaction */
static bool folded_in_xact = false;
static bool folded_callback_registered = false;

/* fence_guard reports with its table's name, fence_advance without */
void
fencing_report_stale(int64 token, int64 fence, const char *relname)
{
	fencing_stats_count(relname != NULL ? FENCING_STAT_FENCE_GUARD_REFUSALS :
						FENCING_STAT_FENCE_ADVANCE_REFUSALS);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_STALE_TOKEN),
			 errmsg("fencing token %lld is stale", (long long) token),
			 relname ?
			 errdetail("The row of \"%s\" was already written with token %lld.",
					   relname, (long long) fence) :
			 errdetail("The row was already written with token %lld.",
					   (long long) fence),
			 token == fence ?
			 errhint("Each token writes a row once; a holder that writes the same row again must allow an equal fence.") :
			 errhint("A newer holder has taken over; stop writing and re-acquire.")));
}

/*
 * The transaction that makes this fenced write commits synchronously, as
 * the lease functions' do.  ForceSyncCommit() only sets a flag that commit
 * reads: with synchronous_commit = on, which flushes anyway, it costs
 * nothing; with off, a fenced write waits for its WAL flush, and writes
 * without a token do not.  A transaction that wrote nothing flushes
 * nothing.  Only a remote standby's confirmation is still governed by
 * synchronous_commit.
 */
void
fencing_fenced_write_durable(void)
{
	ForceSyncCommit();
}

/*
 * At the end of a transaction that evaluated one of our functions at plan
 * time, invalidate every cached plan of this backend, as DISCARD PLANS
 * does: prepared statements, PL/pgSQL's and SQL functions' plans.  The
 * next execution of a plan that folded the call plans again, in its own
 * transaction, and so runs the call again there, with its band check and
 * its forced synchronous commit.  Within the transaction that folded it,
 * the call's effects already hold.  Calls with the row's fence column as
 * an argument are never folded and never get here.
 */
static void
forget_folded_plans(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (folded_in_xact)
			{
				folded_in_xact = false;
				ResetPlanCache();
			}
			break;
		default:
			break;
	}
}

/*
 * Note a call that the planner's constant folding evaluates, for
 * forget_folded_plans(): only a call whose arguments are all constants is
 * folded, and the executor never evaluates such a call itself (the planner
 * has folded it first).
 */
static void
note_plan_time_call(FunctionCallInfo fcinfo)
{
	Node	   *expr = fcinfo->flinfo ? fcinfo->flinfo->fn_expr : NULL;
	List	   *args;
	ListCell   *lc;

	if (expr == NULL)
		return;
	if (IsA(expr, FuncExpr))
		args = ((FuncExpr *) expr)->args;
	else if (IsA(expr, OpExpr))
		args = ((OpExpr *) expr)->args;
	else
		return;
	foreach(lc, args)
	{
		if (!IsA(lfirst(lc), Const))
			return;
	}
	if (!folded_callback_registered)
	{
		RegisterXactCallback(forget_folded_plans, NULL);
		folded_callback_registered = true;
	}
	folded_in_xact = true;
}

/*
 * A predicate's true answer lets the row be written with the token: a
 * token from before this database's band is refused there (LF005), as
 * fence_advance refuses it, and the write is made durable.  A false answer
 * needs neither: nothing is written.
 */
static bool
predicate_answer(FunctionCallInfo fcinfo, bool allowed, int64 token)
{
	note_plan_time_call(fcinfo);
	if (allowed)
	{
		fencing_check_token_band(token);
		fencing_fenced_write_durable();
	}
	return allowed;
}

/*
 * fence_allows(fence, token, allow_same): fence IS NULL OR fence < token,
 * or fence <= token with allow_same, the choice fence_advance makes.
 */
Datum
fencing_fence_allows(PG_FUNCTION_ARGS)
{
	int64		token = fencing_token_arg(fcinfo, 1);
	bool		allow_same;

	fencing_require_arg(fcinfo, 2, "allow_same");
	allow_same = PG_GETARG_BOOL(2);
	PG_RETURN_BOOL(predicate_answer(fcinfo,
									PG_ARGISNULL(0) ||
									PG_GETARG_INT64(0) < token ||
									(allow_same && PG_GETARG_INT64(0) == token),
									token));
}

/*
 * fence_advance(fence, token, allow_same) returns the token to store as the
 * row's new fence, or raises LF001 when the token is older than the fence
 * (or equal to it, unless allow_same).
 */
Datum
fencing_fence_advance(PG_FUNCTION_ARGS)
{
	int64		token = fencing_token_arg(fcinfo, 1);
	bool		allow_same;
	bool		moves = true;

	fencing_require_arg(fcinfo, 2, "allow_same");
	allow_same = PG_GETARG_BOOL(2);
	note_plan_time_call(fcinfo);

	if (!PG_ARGISNULL(0))
	{
		int64		fence = PG_GETARG_INT64(0);

		if (fence > token || (fence == token && !allow_same))
			fencing_report_stale(token, fence, NULL);
		moves = fence != token;
	}
	/* the row's newer fence may have been lost at failover */
	fencing_check_token_band(token);
	/* the fence stays: a lost write lets no stale holder in (above) */
	if (moves)
		fencing_fenced_write_durable();
	PG_RETURN_INT64(token);
}

/*
 * expect_rows(affected, expected) raises LF003 when a fenced write touched
 * fewer rows than it aimed at: with fence_advance in the SET list a stale
 * token has already raised, so fewer rows means the rows do not exist.
 */
Datum
fencing_expect_rows(PG_FUNCTION_ARGS)
{
	int64		affected;
	int64		expected;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("row counts must not be null")));
	affected = PG_GETARG_INT64(0);
	expected = PG_GETARG_INT64(1);
	if (affected < expected)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_ROW_NOT_FOUND),
				 errmsg("fenced write changed %lld of %lld rows",
						(long long) affected, (long long) expected),
				 errdetail("The rows it was aimed at do not exist.")));
	PG_RETURN_INT64(affected);
}
