/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  fence_guard: a row trigger that makes a table refuse stale writes,
 *	  and the transaction-local token a writer may declare for it.
 *
 * CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON t
 *	   FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
 *
 * It judges each row by its values, never by which columns the statement
 * names: a MERGE's updated columns are those of all its UPDATE actions,
 * and a BEFORE trigger that fired earlier may have rewritten the row.
 *
 * Tokens are positive: a fence of 0 or less, like NULL, is no token.
 * UPDATE that puts a token in the fence, other than the one there: that is
 *	 the write's token.  It must be above the old fence.
 * UPDATE that sets the fence to NULL on a row that has a token: refused.
 * Any other UPDATE (the fence stays as it was, NULL to NULL included, or
 *	 it becomes 0 or less), and DELETE: the write's token is the one
 *	 declared with SET LOCAL fencing.token; it must not be lower than the
 *	 row's fence, and an UPDATE stamps it into the fence column.  With no
 *	 declared token the write is refused, unless the trigger was created
 *	 with the second argument 'allow_unfenced', which still refuses an
 *	 UPDATE that would take a token out of the fence.
 * INSERT: a fence that is no token is stamped with the declared token, if
 *	 any.
 * A declared token is always checked against the row's fence, whichever
 * token the write carries, and every token the guard accepts, declared or
 * in the fence column, goes through the band check (LF005).
 *
 * Every write it lets through with a token (or a fence) is made durable
 * before it is acknowledged (fencing_fenced_write_durable, fence.c), but
 * an UPDATE that leaves the row's fence at the token it carries: lost in a
 * crash, it leaves the row fenced as before (fence.c says why).
 *
 * In logical replication apply (only if the trigger is ENABLE ALWAYS or
 * ENABLE REPLICA: by default triggers do not fire there) the publisher
 * has judged the write: only an applied UPDATE that would move the fence
 * back or to NULL is refused, as older than the row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "replication/logicalworker.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "resource.h"

FENCING_FUNCTION(fencing_fence_guard);

static char *declared_token_string = NULL;

/*
 * An UPDATE that moves a row to another partition is carried out as a
 * DELETE from the old partition and an INSERT into the new one.  The old
 * partition's BEFORE DELETE triggers fire after its BEFORE UPDATE triggers,
 * for the same row version, in the same executor run and through the same
 * ResultRelInfo, so with the same FmgrInfo: the guard keeps there
 * (fn_extra) the row version of the UPDATE it last admitted, and the DELETE
 * of that version carries the UPDATE's token, which was judged against
 * that very version (locked by this transaction since).  Triggers that run
 * in between (one that sets updated_at, one that writes other guarded
 * rows) run their statements in executor runs of their own, and may bump
 * the command counter: neither matters here.
 */
typedef struct AdmittedUpdate
{
	bool		valid;
	ItemPointerData tid;
	LocalTransactionId lxid;
	SubTransactionId subxid;
} AdmittedUpdate;

static bool
check_declared_token(char **newval, void **extra, GucSource source)
{
	int64		value;

	if (*newval == NULL || (*newval)[0] == '\0')
		return true;
	if (!fencing_parse_token(*newval, &value))
	{
		GUC_check_errdetail("fencing.token must be a positive bigint, or empty.");
		return false;
	}
	return true;
}

void
fencing_guard_init(void)
{
	DefineCustomStringVariable("fencing.token",
							   "The fencing token this transaction writes with.",
							   "Read by fencing.fence_guard for writes that do not set the fence column. Set it with SET LOCAL.",
							   &declared_token_string,
							   "",
							   PGC_USERSET,
							   0,
							   check_declared_token,
							   NULL,
							   NULL);
}

/* The token declared with SET [LOCAL] fencing.token, if any. */
bool
fencing_declared_token(int64 *token)
{
	if (declared_token_string == NULL || declared_token_string[0] == '\0')
		return false;
	return fencing_parse_token(declared_token_string, token);
}

/* Our triggers fire BEFORE, FOR EACH ROW (fence_guard, claim_*). */
void
fencing_check_row_trigger(FunctionCallInfo fcinfo, const char *fname)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be called as a trigger", fname)));
	if (!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be fired BEFORE, FOR EACH ROW", fname)));
}

static int
guard_column(TriggerData *trigdata, bool *allow_unfenced)
{
	Trigger    *trigger = trigdata->tg_trigger;
	Relation	rel = trigdata->tg_relation;
	const char *colname;
	int			attnum;
	Oid			atttype;

	if (trigger->tgnargs < 1 || trigger->tgnargs > 2)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard on \"%s\" needs the fence column name as its argument",
						RelationGetRelationName(rel)),
				 errhint("Use EXECUTE FUNCTION fencing.fence_guard('fence') or fencing.fence_guard('fence', 'allow_unfenced').")));
	colname = trigger->tgargs[0];
	*allow_unfenced = false;
	if (trigger->tgnargs == 2)
	{
		if (strcmp(trigger->tgargs[1], "allow_unfenced") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid fence_guard option \"%s\"", trigger->tgargs[1]),
					 errhint("The only option is \"allow_unfenced\".")));
		*allow_unfenced = true;
	}

	attnum = SPI_fnumber(RelationGetDescr(rel), colname);
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						colname, RelationGetRelationName(rel)),
				 errhint("The argument of fence_guard names the table's fence column.")));
	atttype = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;
	if (atttype != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("fence column \"%s\" of relation \"%s\" must be of type bigint",
						colname, RelationGetRelationName(rel)),
				 errdetail("It is of type %s.", format_type_be(atttype))));
	/* the guard's stamp would be overwritten by the generation expression */
	if (TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attgenerated != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("fence column \"%s\" of relation \"%s\" must not be a generated column",
						colname, RelationGetRelationName(rel))));
	return attnum;
}

static bool
fence_value(HeapTuple tuple, TupleDesc desc, int attnum, int64 *value)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, attnum, desc, &isnull);

	if (!isnull)
		*value = DatumGetInt64(d);
	return !isnull;
}

/* the row with its fence column set to "token" */
static HeapTuple
stamp_fence(HeapTuple tuple, TupleDesc desc, int attnum, int64 token)
{
	Datum		value = Int64GetDatum(token);
	bool		isnull = false;

	return heap_modify_tuple_by_cols(tuple, desc, 1, &attnum, &value, &isnull);
}

static void
remember_admitted_update(FunctionCallInfo fcinfo, HeapTuple oldtuple)
{
	AdmittedUpdate *admitted = (AdmittedUpdate *) fcinfo->flinfo->fn_extra;

	if (admitted == NULL)
	{
		admitted = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt,
									  sizeof(AdmittedUpdate));
		fcinfo->flinfo->fn_extra = admitted;
	}
	admitted->valid = true;
	admitted->tid = oldtuple->t_self;
	admitted->lxid = FENCING_CURRENT_LXID;
	admitted->subxid = GetCurrentSubTransactionId();
}

/*
 * Is this DELETE the first half of the admitted UPDATE that moves this row
 * version?  The match is used up.
 */
static bool
deletes_admitted_update(FunctionCallInfo fcinfo, HeapTuple oldtuple)
{
	AdmittedUpdate *admitted = (AdmittedUpdate *) fcinfo->flinfo->fn_extra;

	if (admitted == NULL || !admitted->valid ||
		!ItemPointerEquals(&admitted->tid, &oldtuple->t_self) ||
		admitted->lxid != FENCING_CURRENT_LXID ||
		admitted->subxid != GetCurrentSubTransactionId())
		return false;
	admitted->valid = false;
	return true;
}

static void
report_null_fence(Relation rel, int64 old_fence)
{
	fencing_stats_count(FENCING_STAT_FENCE_GUARD_REFUSALS);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_STALE_TOKEN),
			 errmsg("fence of a row of \"%s\" cannot be set to NULL",
					RelationGetRelationName(rel)),
			 errdetail("The row was already written with token %lld.",
					   (long long) old_fence)));
}

static void
report_unfenced(Relation rel, const char *colname, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_MISSING_TOKEN),
			 errmsg("%s on fenced table \"%s\" carries no fencing token",
					what, RelationGetRelationName(rel)),
			 errhint("Set column \"%s\" to your token, or run SET LOCAL fencing.token first.",
					 colname)));
}

Datum
fencing_fence_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	TupleDesc	desc;
	TriggerEvent event;
	int			attnum;
	bool		allow_unfenced;
	bool		applying;
	const char *colname;
	HeapTuple	oldtuple;
	HeapTuple	newtuple;
	int64		old_fence = 0,
				new_fence = 0,
				token = 0;
	bool		has_old,
				has_new,
				has_token,
				fence_changes,
				old_is_token;

	fencing_check_row_trigger(fcinfo, "fence_guard");
	event = trigdata->tg_event;

	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	attnum = guard_column(trigdata, &allow_unfenced);
	colname = trigdata->tg_trigger->tgargs[0];

	/*
	 * Replication apply: the write was judged where it was made, and it
	 * carries no declared token; its band is the publisher's.  Refuse only
	 * a row older than the one it replaces.
	 */
	applying = IsLogicalWorker();
	if (applying)
	{
		if (!TRIGGER_FIRED_BY_UPDATE(event))
			return PointerGetDatum(trigdata->tg_trigtuple);
		has_old = fence_value(trigdata->tg_trigtuple, desc, attnum, &old_fence);
		has_new = fence_value(trigdata->tg_newtuple, desc, attnum, &new_fence);
		if (has_old && !has_new)
			report_null_fence(rel, old_fence);
		if (has_old && new_fence < old_fence)
			fencing_report_stale(new_fence, old_fence,
								 RelationGetRelationName(rel));
		return PointerGetDatum(trigdata->tg_newtuple);
	}

	has_token = fencing_declared_token(&token);
	/* a newer fence may have been lost at failover */
	if (has_token)
		fencing_check_token_band(token);

	if (TRIGGER_FIRED_BY_INSERT(event))
	{
		newtuple = trigdata->tg_trigtuple;
		if (fence_value(newtuple, desc, attnum, &new_fence) && new_fence > 0)
		{
			/* the row's fence is its token */
			fencing_check_token_band(new_fence);
			fencing_fenced_write_durable();
			return PointerGetDatum(newtuple);
		}
		if (!has_token)
			return PointerGetDatum(newtuple);	/* an unfenced row */
		fencing_fenced_write_durable();
		return PointerGetDatum(stamp_fence(newtuple, desc, attnum, token));
	}

	oldtuple = trigdata->tg_trigtuple;
	has_old = fence_value(oldtuple, desc, attnum, &old_fence);

	/* a declared token is judged whatever the write carries */
	if (has_token && has_old && token < old_fence)
		fencing_report_stale(token, old_fence, RelationGetRelationName(rel));

	if (TRIGGER_FIRED_BY_DELETE(event))
	{
		bool		moving = deletes_admitted_update(fcinfo, oldtuple);

		if (has_token || moving)
		{
			/* a lost DELETE would bring back the row and its older fence */
			fencing_fenced_write_durable();
		}
		else if (!allow_unfenced)
			report_unfenced(rel, colname, "DELETE");
		return PointerGetDatum(oldtuple);
	}

	if (!TRIGGER_FIRED_BY_UPDATE(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard must be fired for INSERT, UPDATE or DELETE")));

	newtuple = trigdata->tg_newtuple;
	has_new = fence_value(newtuple, desc, attnum, &new_fence);

	fence_changes = has_new != has_old || new_fence != old_fence;
	old_is_token = has_old && old_fence > 0;

	if (fence_changes && has_new && new_fence > 0)
	{
		/* the write puts a token in the fence: that is its token */
		if (old_is_token && new_fence < old_fence)
			fencing_report_stale(new_fence, old_fence,
								 RelationGetRelationName(rel));
		fencing_check_token_band(new_fence);
		fencing_fenced_write_durable();
		remember_admitted_update(fcinfo, oldtuple);
		return PointerGetDatum(newtuple);
	}
	if (fence_changes && !has_new && old_is_token)
		report_null_fence(rel, old_fence);

	/*
	 * The fence stays, or the write puts no token there (0 or less, or NULL
	 * on a row that has none): the write carries the declared token, which
	 * is stamped.  Without one, 'allow_unfenced' lets the write through,
	 * but never one that takes a token out of the fence.
	 */
	if (!has_token)
	{
		if (!allow_unfenced || (fence_changes && old_is_token))
			report_unfenced(rel, colname, "UPDATE");
		return PointerGetDatum(newtuple);
	}
	/* stamped with the token the row is fenced with, the fence stays */
	if (!has_old || old_fence != token)
		fencing_fenced_write_durable();
	remember_admitted_update(fcinfo, oldtuple);
	return PointerGetDatum(stamp_fence(newtuple, desc, attnum, token));
}
