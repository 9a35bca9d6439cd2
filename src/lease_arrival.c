/*-------------------------------------------------------------------------
 *
 * lease_arrival.c
 *	  Lease rows that arrive from elsewhere.
 *
 * Only the lease functions write fencing.leases.  A row inserted or
 * updated any other way came from another history: pg_restore or psql of
 * a dump, COPY, or logical replication apply (the trigger is ENABLE
 * ALWAYS, so it fires there too).  Its token was issued by that history,
 * so the token source must issue above it from now on, in a new band:
 * fencing_token_history_arrived().  The lease functions' own writes return
 * at once: lease_table.c says when it is writing the table itself
 * (fencing_lease_table_writing).
 *
 * Only a superuser can attach the function elsewhere, but a token floor
 * read from another table would be permanent (sequences do not roll
 * back): it refuses to fire for anything but a BEFORE ROW INSERT or UPDATE
 * trigger on fencing.leases, before it reads the row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/rel.h"

#include "lease.h"

FENCING_FUNCTION(fencing_leases_restored);

Datum
fencing_leases_restored(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	tuple;
	int			attnum;
	bool		isnull;
	Datum		token;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
		  TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be called as a BEFORE ROW INSERT or UPDATE trigger",
						"fencing._leases_restored()")));
	if (RelationGetRelid(trigdata->tg_relation) != fencing_catalog()->leases_oid)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s fires only on fencing.leases, not on \"%s\"",
						"fencing._leases_restored()",
						RelationGetRelationName(trigdata->tg_relation))));
	tuple = TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event) ?
		trigdata->tg_newtuple : trigdata->tg_trigtuple;
	if (fencing_lease_table_writing())
		return PointerGetDatum(tuple);

	attnum = SPI_fnumber(RelationGetDescr(trigdata->tg_relation), "token");
	if (attnum <= 0 ||
		TupleDescAttr(RelationGetDescr(trigdata->tg_relation),
					  attnum - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
				 errmsg("fencing.leases has no bigint column \"token\""),
				 errhint("Reinstall the extension with DROP EXTENSION fencing; CREATE EXTENSION fencing.")));
	token = heap_getattr(tuple, attnum, RelationGetDescr(trigdata->tg_relation),
						 &isnull);
	fencing_token_history_arrived(isnull ? 0 : Max(DatumGetInt64(token), 0));
	return PointerGetDatum(tuple);
}
