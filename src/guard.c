/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  fence_guard: a row trigger that makes a table refuse stale writes,
 *	  and the transaction-local token a writer may declare for it.
 *
 * CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON t
 *	   FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
 *
 * UPDATE that sets the fence column: the new value must not be NULL and
 *	 not lower than the row's fence (equal is a repeated write by the same
 *	 holder).
 * UPDATE that does not set it, and DELETE: the writer's token is the one
 *	 declared with SET LOCAL fencing.token; it must not be lower than the
 *	 row's fence, and an UPDATE stamps it into the fence column.  With no
 *	 declared token the write is refused, unless the trigger was created
 *	 with the second argument 'allow_unfenced'.
 * INSERT: a NULL fence is stamped with the declared token, if any.
 *
 * Every write it lets through with a token (or a fence) is made durable
 * before it is acknowledged (fencing_fenced_write_durable, fence.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "nodes/bitmapset.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "resource.h"
#include "stats.h"

FENCING_FUNCTION(fencing_fence_guard);

static char *declared_token_string = NULL;

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
fencing_define_token_guc(void)
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
static bool
declared_token(int64 *token)
{
	if (declared_token_string == NULL || declared_token_string[0] == '\0')
		return false;
	return fencing_parse_token(declared_token_string, token);
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
	const char *colname;
	int64		old_fence = 0,
				new_fence = 0,
				token;
	bool		has_old,
				has_new,
				has_token;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard must be called as a trigger")));
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event) || !TRIGGER_FIRED_FOR_ROW(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard must be fired BEFORE, FOR EACH ROW")));

	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	attnum = guard_column(trigdata, &allow_unfenced);
	colname = trigdata->tg_trigger->tgargs[0];
	has_token = declared_token(&token);
	/* a newer fence may have been lost at failover */
	if (has_token)
		fencing_check_token_band(token);

	if (TRIGGER_FIRED_BY_INSERT(event))
	{
		HeapTuple	tuple = trigdata->tg_trigtuple;

		if (fence_value(tuple, desc, attnum, &new_fence))
		{
			fencing_fenced_write_durable();
			return PointerGetDatum(tuple);
		}
		if (!has_token)
		{
			/* an unfenced row: not for a misspelt fencing.token (13, 14) */
			fencing_refuse_guc_placeholders();
			return PointerGetDatum(tuple);
		}
		fencing_fenced_write_durable();
		return PointerGetDatum(stamp_fence(tuple, desc, attnum, token));
	}

	has_old = fence_value(trigdata->tg_trigtuple, desc, attnum, &old_fence);

	if (TRIGGER_FIRED_BY_DELETE(event))
	{
		if (!has_token)
		{
			if (!allow_unfenced)
				report_unfenced(rel, colname, "DELETE");
			fencing_refuse_guc_placeholders();
		}
		else
		{
			if (has_old && token < old_fence)
				fencing_report_stale(token, old_fence,
									 RelationGetRelationName(rel));
			/* a lost DELETE would bring back the row and its older fence */
			fencing_fenced_write_durable();
		}
		return PointerGetDatum(trigdata->tg_trigtuple);
	}

	if (!TRIGGER_FIRED_BY_UPDATE(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fence_guard must be fired for INSERT, UPDATE or DELETE")));

	has_new = fence_value(trigdata->tg_newtuple, desc, attnum, &new_fence);

	/* the statement set the fence column: that is its token */
	if (bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber,
					  trigdata->tg_updatedcols))
	{
		if (!has_new)
		{
			if (has_old)
			{
				fencing_count_stale_write();
				fencing_stats_count(FENCING_STAT_FENCE_GUARD_REFUSALS);
				ereport(ERROR,
						(errcode(ERRCODE_FENCING_STALE_TOKEN),
						 errmsg("fence of a row of \"%s\" cannot be set to NULL",
								RelationGetRelationName(rel)),
						 errdetail("The row was already written with token %lld.",
								   (long long) old_fence)));
			}
		}
		else
		{
			if (has_old && new_fence < old_fence)
				fencing_report_stale(new_fence, old_fence,
									 RelationGetRelationName(rel));
			fencing_check_token_band(new_fence);
			fencing_fenced_write_durable();
		}
		return PointerGetDatum(trigdata->tg_newtuple);
	}

	/* otherwise the declared token, stamped into the row */
	if (!has_token)
	{
		if (!allow_unfenced)
			report_unfenced(rel, colname, "UPDATE");
		fencing_refuse_guc_placeholders();
		return PointerGetDatum(trigdata->tg_newtuple);
	}
	if (has_old && token < old_fence)
		fencing_report_stale(token, old_fence, RelationGetRelationName(rel));
	fencing_fenced_write_durable();
	return PointerGetDatum(stamp_fence(trigdata->tg_newtuple, desc, attnum,
									   token));
}
