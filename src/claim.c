/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  Fencing for job queues: a token bound to each claim, inside the
 *	  queue's own claim statement, and a guard that refuses the completion,
 *	  failure or retry of a delivery older than the last claim.
 *
 * CREATE TRIGGER fencing_claim BEFORE UPDATE OF attempt ON jobs FOR EACH ROW
 *	   WHEN (<the claim transition>)
 *	   EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
 * CREATE TRIGGER fencing_end BEFORE UPDATE OF state ON jobs FOR EACH ROW
 *	   WHEN (<ends that need the delivery's token>)
 *	   EXECUTE FUNCTION fencing.claim_guard('fencing_token');
 * CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON jobs
 *	   FOR EACH ROW
 *	   EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
 *
 * The stamp is a place in the row: a bigint column ('col'), or a key of a
 * jsonb column ('col->key', the token stored as a JSON string, which
 * JavaScript reads without losing digits).  claim_stamp writes a fresh
 * fencing token there whenever its WHEN clause matches; whatever the
 * statement put there is overwritten, so a claim cannot choose its token.
 *
 * claim_guard compares the token a write brings with the stamp of the row
 * as it was claimed (OLD for UPDATE and DELETE, NEW for INSERT, which is
 * how some queues re-insert a failed job).  The token travels with the
 * statement, so it works through a transaction-mode pooler: in a place of
 * the new row named by the second argument (a jsonb result the queue
 * writes, for example), when the statement writes that column and changes
 * the token there, or else in SET LOCAL fencing.token.  Whatever the row's state, a write that brings
 * a token must bring the stamp's: older is a stale delivery (LF001), newer
 * was not issued for this claim (LF010), no stamp means the row was never
 * claimed (LF011).  No write but the claim moves the stamp (LF012); a
 * jsonb column written whole without the stamp's key gets the key back,
 * and one that could not hold it (an array, a scalar) is refused (42804).
 * A write with no token is refused (LF004) unless the third argument is
 * 'allow_unfenced': the recipes attach one claim_guard with
 * 'allow_unfenced' and no WHEN clause, which checks every write, and name
 * the ends that need a token (completions, heartbeats) in a second one.
 *
 * A claim is not a delivery's write: claim_guard lets the row claim_stamp
 * has just stamped through.  Triggers of the same kind fire in name order,
 * so claim_stamp must sort first; it refuses a row claim_guard has
 * already checked (a trigger protocol error, at the first claim).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "nodes/bitmapset.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/rel.h"

#include "resource.h"

FENCING_FUNCTION(fencing_claim_stamp);
FENCING_FUNCTION(fencing_claim_guard);

/* a place in a row that holds a token: a bigint column or a jsonb key */
typedef struct ClaimPlace
{
	const char *spec;			/* as the trigger argument wrote it */
	int			attnum;
	char	   *key;			/* NULL for a bigint column */
} ClaimPlace;

/*
 * A row of a statement, as a trigger of this file saw it: claim_guard
 * knows the row claim_stamp has just stamped by it, and claim_stamp a row
 * claim_guard has already checked.  The old row's TID, the transaction
 * and the command tell one row of one statement from every other write.
 */
typedef struct RowMark
{
	Oid			relid;
	ItemPointerData tid;
	LocalTransactionId lxid;
	CommandId	cid;
	int64		token;			/* the stamp claim_stamp wrote */
} RowMark;

static RowMark last_claim;
static RowMark last_guarded;

static void
mark_row(RowMark *mark, Relation rel, HeapTuple old, int64 token)
{
	mark->relid = RelationGetRelid(rel);
	mark->tid = old->t_self;
	mark->lxid = FENCING_CURRENT_LXID;
	mark->cid = GetCurrentCommandId(false);
	mark->token = token;
}

static bool
is_marked(RowMark *mark, Relation rel, HeapTuple old)
{
	return mark->relid == RelationGetRelid(rel) &&
		ItemPointerEquals(&mark->tid, &old->t_self) &&
		mark->lxid == FENCING_CURRENT_LXID &&
		mark->cid == GetCurrentCommandId(false);
}

/* "col" or "col->key", resolved against the trigger's table */
static void
parse_place(Relation rel, const char *fname, const char *spec,
			ClaimPlace *place)
{
	const char *arrow = strstr(spec, "->");
	char	   *colname;
	Oid			atttype;

	place->spec = spec;
	if (arrow)
	{
		colname = pnstrdup(spec, arrow - spec);
		place->key = pstrdup(arrow + 2);
		if (place->key[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid token place \"%s\" for %s", spec, fname),
					 errhint("Name a bigint column, or a jsonb column and a key as 'column->key'.")));
	}
	else
	{
		colname = pstrdup(spec);
		place->key = NULL;
	}

	place->attnum = SPI_fnumber(RelationGetDescr(rel), colname);
	if (place->attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						colname, RelationGetRelationName(rel)),
				 errhint("The arguments of %s name columns of the table.", fname)));
	atttype = TupleDescAttr(RelationGetDescr(rel), place->attnum - 1)->atttypid;
	if (atttype != (place->key ? JSONBOID : INT8OID))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 place->key ?
				 errmsg("column \"%s\" of relation \"%s\" must be of type jsonb to hold key \"%s\"",
						colname, RelationGetRelationName(rel), place->key) :
				 errmsg("token column \"%s\" of relation \"%s\" must be of type bigint",
						colname, RelationGetRelationName(rel)),
				 errdetail("It is of type %s.", format_type_be(atttype))));
}

/* Does the UPDATE's SET list name the column of this place? */
static bool
column_written(TriggerData *trigdata, const ClaimPlace *place)
{
	return bms_is_member(place->attnum - FirstLowInvalidHeapAttributeNumber,
						 trigdata->tg_updatedcols);
}

/* A JSON number or string that spells a token, as read_place reads it. */
static bool
json_token(const JsonbValue *v, int64 *token)
{
	char	   *s;

	if (v->type == jbvString)
		s = pnstrdup(v->val.string.val, v->val.string.len);
	else if (v->type == jbvNumeric)
		s = DatumGetCString(DirectFunctionCall1(numeric_out,
												NumericGetDatum(v->val.numeric)));
	else
		return false;
	return fencing_parse_token(s, token);
}

/*
 * Does the new row hold at this place the token the old row held there?
 * Then the write did not bring it, even though its statement names the
 * column: a MERGE names the columns of all its UPDATE actions, and a
 * full-row update sends back what it read.  Compared as tokens, so that
 * the same token sent back re-encoded ("5" read, 5 written, as a client
 * that parses and serializes the JSON does) is still the one it read.
 */
static bool
place_kept(Relation rel, HeapTuple oldtup, HeapTuple newtup,
		   const ClaimPlace *place)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		oldnull;
	bool		newnull;
	Datum		o = heap_getattr(oldtup, place->attnum, desc, &oldnull);
	Datum		n = heap_getattr(newtup, place->attnum, desc, &newnull);
	Jsonb	   *ojb;
	Jsonb	   *njb;
	JsonbValue	ov;
	JsonbValue	nv;
	int64		otok;
	int64		ntok;

	if (oldnull || newnull)
		return false;
	if (place->key == NULL)
		return DatumGetInt64(o) == DatumGetInt64(n);
	ojb = DatumGetJsonbP(o);
	njb = DatumGetJsonbP(n);
	if (!JB_ROOT_IS_OBJECT(ojb) || JB_ROOT_IS_SCALAR(ojb) ||
		!JB_ROOT_IS_OBJECT(njb) || JB_ROOT_IS_SCALAR(njb) ||
		getKeyJsonValueFromContainer(&ojb->root, place->key,
									 strlen(place->key), &ov) == NULL ||
		getKeyJsonValueFromContainer(&njb->root, place->key,
									 strlen(place->key), &nv) == NULL)
		return false;
	if (json_token(&ov, &otok) && json_token(&nv, &ntok))
		return otok == ntok;
	/* not a token: kept only as it was, and read_place judges it */
	if (ov.type != nv.type)
		return false;
	if (ov.type == jbvString)
		return ov.val.string.len == nv.val.string.len &&
			memcmp(ov.val.string.val, nv.val.string.val,
				   ov.val.string.len) == 0;
	if (ov.type == jbvNumeric)
		return DatumGetInt32(DirectFunctionCall2(numeric_cmp,
												 NumericGetDatum(ov.val.numeric),
												 NumericGetDatum(nv.val.numeric))) == 0;
	return false;
}

static void
report_bad_token(Relation rel, const ClaimPlace *place, const char *shown)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("\"%s\" of a row of \"%s\" is not a fencing token",
					place->spec, RelationGetRelationName(rel)),
			 place->key ?
			 errdetail("It holds %s; a token is a positive bigint, as a JSON number or string.",
					   shown) :
			 errdetail("It holds %s; a token is a positive bigint.", shown)));
}

/* The token at a place of a row; false if the place is empty. */
static bool
read_place(Relation rel, HeapTuple tuple, const ClaimPlace *place,
		   int64 *token)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, place->attnum, RelationGetDescr(rel),
								 &isnull);
	Jsonb	   *jb;
	JsonbValue	v;
	char	   *s = NULL;

	if (isnull)
		return false;
	if (place->key == NULL)
	{
		*token = DatumGetInt64(d);
		if (*token <= 0)
			report_bad_token(rel, place, psprintf("%lld", (long long) *token));
		return true;
	}

	jb = DatumGetJsonbP(d);
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb))
		return false;
	if (getKeyJsonValueFromContainer(&jb->root, place->key,
									 strlen(place->key), &v) == NULL ||
		v.type == jbvNull)
		return false;
	if (v.type == jbvString)
		s = pnstrdup(v.val.string.val, v.val.string.len);
	else if (v.type == jbvNumeric)
		s = DatumGetCString(DirectFunctionCall1(numeric_out,
												NumericGetDatum(v.val.numeric)));
	else
		report_bad_token(rel, place, "a JSON value that is neither a number nor a string");
	if (!fencing_parse_token(s, token))
	{
		StringInfoData shown;

		initStringInfo(&shown);
		escape_json(&shown, s);
		report_bad_token(rel, place, shown.data);
	}
	return true;
}

/* A jsonb place can take a stamp only in an object (or a NULL column). */
static void
check_stampable(Relation rel, const ClaimPlace *place, Jsonb *jb)
{
	if (JB_ROOT_IS_OBJECT(jb) && !JB_ROOT_IS_SCALAR(jb))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("cannot stamp key \"%s\" into column \"%s\" of relation \"%s\"",
					place->key,
					NameStr(TupleDescAttr(RelationGetDescr(rel), place->attnum - 1)->attname),
					RelationGetRelationName(rel)),
			 errdetail("The column holds a JSON %s, not an object.",
					   JB_ROOT_IS_ARRAY(jb) && !JB_ROOT_IS_SCALAR(jb) ?
					   "array" : "scalar"),
			 errhint("A claim stamps its token into this column; send a JSON object or NULL.")));
}

/* The row with a token written at a place. */
static HeapTuple
write_place(Relation rel, HeapTuple tuple, const ClaimPlace *place,
			int64 token)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			attnum = place->attnum;
	Datum		value;
	bool		isnull = false;

	if (place->key == NULL)
		value = Int64GetDatum(token);
	else
	{
		StringInfoData obj;
		Datum		stamp;
		Datum		old = heap_getattr(tuple, attnum, desc, &isnull);

		initStringInfo(&obj);
		appendStringInfoChar(&obj, '{');
		escape_json(&obj, place->key);
		appendStringInfo(&obj, ": \"%lld\"}", (long long) token);
		stamp = DirectFunctionCall1(jsonb_in, CStringGetDatum(obj.data));
		if (isnull)
			value = stamp;
		else
		{
			Jsonb	   *jb = DatumGetJsonbP(old);

			check_stampable(rel, place, jb);
			value = DirectFunctionCall2(jsonb_concat, old, stamp);
		}
		isnull = false;
	}
	return heap_modify_tuple_by_cols(tuple, desc, 1, &attnum, &value, &isnull);
}

/*
 * claim_stamp('place'): BEFORE INSERT OR UPDATE ... FOR EACH ROW WHEN
 * (<claim>).  Writes a fresh token at the place.  The claim's commit is
 * made synchronous: a worker acts on the claim once it returns, and the
 * stamp must not vanish in a crash while the worker holds its token.
 */
Datum
fencing_claim_stamp(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	ClaimPlace	place;
	HeapTuple	tuple;
	int64		token;
	bool		is_update;

	fencing_check_row_trigger(fcinfo, "claim_stamp");
	rel = trigdata->tg_relation;
	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("claim_stamp must be fired for INSERT or UPDATE"),
				 errhint("A claim writes the row it claims; attach claim_guard to deletes.")));
	if (trigdata->tg_trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("claim_stamp on \"%s\" needs one argument, the place of the token",
						RelationGetRelationName(rel)),
				 errhint("Use EXECUTE FUNCTION fencing.claim_stamp('column') or fencing.claim_stamp('column->key').")));
	parse_place(rel, "claim_stamp", trigdata->tg_trigger->tgargs[0], &place);

	is_update = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event);
	/* a guard that saw the claim first took it for a delivery's write */
	if (is_update && is_marked(&last_guarded, rel, trigdata->tg_trigtuple))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("claim_guard fired before claim_stamp on a row of \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("A claim is stamped first, then checked."),
				 errhint("Triggers of the same kind fire in name order: give the claim_stamp trigger a name that sorts before the names of the claim_guard triggers.")));

	tuple = is_update ? trigdata->tg_newtuple : trigdata->tg_trigtuple;
	/* refuse a place that cannot take a stamp before a token is spent */
	if (place.key != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, place.attnum,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			check_stampable(rel, &place, DatumGetJsonbP(d));
	}
	token = fencing_issue_token();
	tuple = write_place(rel, tuple, &place, token);
	if (is_update)
		mark_row(&last_claim, rel, trigdata->tg_trigtuple, token);
	ForceSyncCommit();
	return PointerGetDatum(tuple);
}

static void
report_claim_refusal(Relation rel, int64 delivery, int64 stamp)
{
	fencing_stats_count(FENCING_STAT_CLAIM_GUARD_REFUSALS);
	if (delivery < stamp)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_STALE_TOKEN),
				 errmsg("fencing token %lld is stale", (long long) delivery),
				 errdetail("The row of \"%s\" holds a newer claim, with token %lld.",
						   RelationGetRelationName(rel), (long long) stamp),
				 errhint("Stop working on the row if it was claimed again; to end several claims, end each in a statement of its own, with its token.")));
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_CLAIM_MISMATCH),
			 errmsg("fencing token %lld was not issued for this claim",
					(long long) delivery),
			 errdetail("The row of \"%s\" was claimed with token %lld.",
					   RelationGetRelationName(rel), (long long) stamp),
			 errhint("Send the token the claim returned.")));
}

/*
 * No write but a claim moves the stamp.  A jsonb column written whole
 * without the stamp's key (an application that replaces a job's metadata)
 * gets the key back, so the live delivery keeps its claim; a jsonb column
 * written with a value that could not hold it is refused (42804); any
 * other change of the stamp is refused (LF012).
 */
static HeapTuple
keep_stamp(TriggerData *trigdata, const ClaimPlace *place, bool has_stamp,
		   int64 stamp, HeapTuple newtuple)
{
	Relation	rel = trigdata->tg_relation;
	int64		new_stamp = 0;
	bool		has_new_stamp = read_place(rel, newtuple, place, &new_stamp);

	if (has_new_stamp ? (!has_stamp || new_stamp != stamp) :
		(has_stamp && place->key == NULL))
	{
		fencing_stats_count(FENCING_STAT_CLAIM_GUARD_REFUSALS);
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_STAMP_CHANGED),
				 errmsg("claim stamp \"%s\" of a row of \"%s\" cannot be changed by this write",
						place->spec, RelationGetRelationName(rel)),
				 has_stamp ?
				 errdetail("The row was claimed with token %lld.", (long long) stamp) :
				 errdetail("The row carries no claim stamp; only a claim writes one."),
				 errhint("Only fencing.claim_stamp writes the stamp; leave it out of the write.")));
	}
	if (has_stamp && !has_new_stamp)
		return write_place(rel, newtuple, place, stamp);
	if (place->key != NULL && column_written(trigdata, place))
	{
		bool		isnull;
		Datum		d = heap_getattr(newtuple, place->attnum,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			check_stampable(rel, place, DatumGetJsonbP(d));
	}
	return newtuple;
}

/*
 * claim_guard('stamp place' [, 'delivery place' [, 'allow_unfenced']]):
 * BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW.  With a WHEN clause
 * that names the writes a delivery must bring its token to; with
 * 'allow_unfenced' and no WHEN clause, the check of every other write.
 * An empty delivery place means SET LOCAL fencing.token only.
 */
Datum
fencing_claim_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Trigger    *trigger;
	Relation	rel;
	TriggerEvent event;
	ClaimPlace	stamp_place;
	ClaimPlace	delivery_place;
	bool		has_delivery_place = false;
	bool		allow_unfenced = false;
	HeapTuple	claimed;
	HeapTuple	result;
	int64		stamp = 0;
	int64		delivery = 0;
	bool		has_stamp;
	bool		has_delivery = false;
	bool		kept = false;
	int64		kept_token = 0;

	fencing_check_row_trigger(fcinfo, "claim_guard");
	trigger = trigdata->tg_trigger;
	rel = trigdata->tg_relation;
	event = trigdata->tg_event;
	if (trigger->tgnargs < 1 || trigger->tgnargs > 3)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("claim_guard on \"%s\" needs one to three arguments",
						RelationGetRelationName(rel)),
				 errhint("Use EXECUTE FUNCTION fencing.claim_guard('stamp place' [, 'delivery place' [, 'allow_unfenced']]).")));
	parse_place(rel, "claim_guard", trigger->tgargs[0], &stamp_place);
	if (trigger->tgnargs >= 2 && trigger->tgargs[1][0] != '\0')
	{
		parse_place(rel, "claim_guard", trigger->tgargs[1], &delivery_place);
		has_delivery_place = true;
	}
	if (trigger->tgnargs == 3)
	{
		if (strcmp(trigger->tgargs[2], "allow_unfenced") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid claim_guard option \"%s\"", trigger->tgargs[2]),
					 errhint("The only option is \"allow_unfenced\".")));
		allow_unfenced = true;
	}

	if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		int64		new_stamp;

		claimed = trigdata->tg_trigtuple;
		result = trigdata->tg_newtuple;
		/* the row claim_stamp has just stamped: a claim, not a delivery */
		if (is_marked(&last_claim, rel, claimed) &&
			read_place(rel, result, &stamp_place, &new_stamp) &&
			new_stamp == last_claim.token)
			return PointerGetDatum(result);
		mark_row(&last_guarded, rel, claimed, 0);
	}
	else
		claimed = result = trigdata->tg_trigtuple;

	/*
	 * The delivery's token: at the delivery place of the new row, if the
	 * statement wrote it and changed it (a value left there by an earlier
	 * write is not this one's), else declared.  An INSERT is a new row, not
	 * the delivery's job, unless a guard without 'allow_unfenced' names it
	 * (a re-insert): a token declared for the transaction does not apply to
	 * it.
	 */
	if (has_delivery_place &&
		(TRIGGER_FIRED_BY_INSERT(event) ||
		 (TRIGGER_FIRED_BY_UPDATE(event) &&
		  column_written(trigdata, &delivery_place))))
	{
		has_delivery = read_place(rel, result, &delivery_place, &delivery);
		if (has_delivery && TRIGGER_FIRED_BY_UPDATE(event) &&
			place_kept(rel, claimed, result, &delivery_place))
		{
			kept = true;
			kept_token = delivery;
			has_delivery = false;
		}
	}
	if (!has_delivery && !(TRIGGER_FIRED_BY_INSERT(event) && allow_unfenced))
		has_delivery = fencing_declared_token(&delivery);

	/* (a tokenless DELETE that may pass needs no stamp) */
	has_stamp = (has_delivery || !allow_unfenced ||
				 !TRIGGER_FIRED_BY_DELETE(event)) &&
		read_place(rel, claimed, &stamp_place, &stamp);

	/*
	 * A token sent back as it was, with none declared: a stale one is
	 * refused as before, but the stamp itself proves nothing (whoever read
	 * the row has it), so the write counts as bringing no token.
	 */
	if (!has_delivery && kept && (!has_stamp || kept_token != stamp))
	{
		has_delivery = true;
		delivery = kept_token;
	}

	/* a stale delivery is told so first, whatever else its write does */
	if (has_delivery)
	{
		if (!has_stamp)
		{
			fencing_stats_count(FENCING_STAT_CLAIM_GUARD_REFUSALS);
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_NOT_CLAIMED),
					 errmsg("row of \"%s\" carries no claim stamp",
							RelationGetRelationName(rel)),
					 errdetail("The delivery brings token %lld; \"%s\" is empty.",
							   (long long) delivery, stamp_place.spec),
					 errhint("Rows are stamped by fencing.claim_stamp when they are claimed; declare a token only for the writes of its own claim.")));
		}
		if (delivery != stamp)
			report_claim_refusal(rel, delivery, stamp);
	}

	if (TRIGGER_FIRED_BY_UPDATE(event))
		result = keep_stamp(trigdata, &stamp_place, has_stamp, stamp, result);
	else if (TRIGGER_FIRED_BY_INSERT(event) && stamp_place.key != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(result, stamp_place.attnum,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			check_stampable(rel, &stamp_place, DatumGetJsonbP(d));
	}

	if (!has_delivery)
	{
		if (allow_unfenced)
			return PointerGetDatum(result);
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_MISSING_TOKEN),
				 errmsg("%s of a claimed row of \"%s\" carries no fencing token",
						TRIGGER_FIRED_BY_INSERT(event) ? "INSERT" :
						TRIGGER_FIRED_BY_UPDATE(event) ? "UPDATE" : "DELETE",
						RelationGetRelationName(rel)),
				 has_delivery_place ?
				 errhint("Put the token the claim returned in \"%s\", or run SET LOCAL fencing.token first.",
						 delivery_place.spec) :
				 errhint("Run SET LOCAL fencing.token to the token the claim returned first.")));
	}

	/*
	 * Not forced durable: a delivery carries the claim's own token and
	 * keeps the stamp, so a crash that loses it leaves the row claimed by
	 * that token, which claim_stamp made durable (as fence_guard does for a
	 * write that keeps its row's fence).
	 */
	return PointerGetDatum(result);
}
