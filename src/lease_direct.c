/*-------------------------------------------------------------------------
 *
 * lease_direct.c
 *	  Take, renew and release a lease by direct index and heap access.
 *
 * These three statements are the lease cycle.  Run through SPI, each call
 * starts an executor for an UPDATE on top of the caller's own query, and
 * that made the C functions slower than the same UPDATE sent as plain SQL.
 * Here the row is found through the primary key, judged in C with one
 * clock reading, and rewritten with table_tuple_update(), which makes the
 * same HOT decision, takes the same row lock and waits for a concurrent
 * writer exactly as the executor's UPDATE does.
 *
 * The semantics are those of the SQL statements in lease_store.c:
 *	- the row is judged as the statement's snapshot sees it; a row that does
 *	  not qualify is left alone, unlocked (waiters never block holders);
 *	- when a concurrent transaction changed the row first, READ COMMITTED
 *	  looks again with a new snapshot and judges the new version (the
 *	  executor's EvalPlanQual recheck, but without keeping a lock on a row
 *	  that fails it), REPEATABLE READ and SERIALIZABLE raise 40001;
 *	- expiry is judged by the clock at the moment of each look.
 *
 * Only a table laid out as the install script made it qualifies: exactly
 * the expected columns, one btree primary key on "name", no triggers on
 * UPDATE, no CHECK constraints, no row security.  Anything else (an
 * administrator added an index or a trigger, say) falls back to the SPI
 * statements, which honour all of it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "lease.h"

/* the columns of fencing.leases this code reads or writes */
typedef enum LeaseColumn
{
	COL_NAME,
	COL_HOLDER,
	COL_HOLDER_ROLE,
	COL_TOKEN,
	COL_ACQUIRED_AT,
	COL_EXPIRES_AT,
	COL_RELEASED_AT,
	COL_LOCK_DELAY,
	COL_TAKEOVER,
	COL_HOLDER_CHANGES,
	COL_ACQUIRES,
	COL_RENEWALS,
	COL_RELEASES,
	COL_EXPIRED_TAKEOVERS,
	NUM_LEASE_COLUMNS
} LeaseColumn;

static const struct
{
	const char *name;
	Oid			type;
}			lease_columns[NUM_LEASE_COLUMNS] = {
	[COL_NAME] = {"name", TEXTOID},
	[COL_HOLDER] = {"holder", TEXTOID},
	[COL_HOLDER_ROLE] = {"holder_role", REGROLEOID},
	[COL_TOKEN] = {"token", INT8OID},
	[COL_ACQUIRED_AT] = {"acquired_at", TIMESTAMPTZOID},
	[COL_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID},
	[COL_RELEASED_AT] = {"released_at", TIMESTAMPTZOID},
	[COL_LOCK_DELAY] = {"lock_delay", INTERVALOID},
	[COL_TAKEOVER] = {"takeover", BOOLOID},
	[COL_HOLDER_CHANGES] = {"holder_changes", INT8OID},
	[COL_ACQUIRES] = {"acquires", INT8OID},
	[COL_RENEWALS] = {"renewals", INT8OID},
	[COL_RELEASES] = {"releases", INT8OID},
	[COL_EXPIRED_TAKEOVERS] = {"expired_takeovers", INT8OID},
};

/*
 * What we learned about fencing.leases, forgotten with the catalog on any
 * relcache invalidation of the table (ALTER TABLE, CREATE INDEX, ...).
 */
static struct
{
	uint64		generation;		/* of the catalog when we looked; 0: never */
	bool		usable;			/* laid out as the install script made it */
	Oid			leases_oid;
	Oid			pkey_oid;
	RegProcedure name_eq_proc;	/* the key's equality function */
	Oid			name_collation;
	int			att[NUM_LEASE_COLUMNS]; /* 0-based attribute numbers */
}			layout;

static bool
has_update_triggers(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	return td != NULL &&
		(td->trig_update_before_row || td->trig_update_after_row ||
		 td->trig_update_instead_row || td->trig_update_before_statement ||
		 td->trig_update_after_statement || td->trig_update_new_table ||
		 td->trig_update_old_table);
}

/* Is the open table (and its key) the one the install script made? */
static bool
layout_is_usable(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *indexes;
	Relation	idx;
	bool		ok;

	if (rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_rel->relrowsecurity ||
		has_update_triggers(rel) ||
		(desc->constr != NULL && desc->constr->num_check > 0))
		return false;

	for (int c = 0; c < NUM_LEASE_COLUMNS; c++)
		layout.att[c] = -1;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (att->attgenerated != '\0')
			return false;
		for (int c = 0; c < NUM_LEASE_COLUMNS; c++)
			if (strcmp(NameStr(att->attname), lease_columns[c].name) == 0)
			{
				if (att->atttypid != lease_columns[c].type)
					return false;
				layout.att[c] = i;
			}
	}
	for (int c = 0; c < NUM_LEASE_COLUMNS; c++)
		if (layout.att[c] < 0)
			return false;

	/* one index, the btree primary key on name alone */
	indexes = RelationGetIndexList(rel);
#if PG_VERSION_NUM >= 180000
	layout.pkey_oid = RelationGetPrimaryKeyIndex(rel, false);
#else
	layout.pkey_oid = RelationGetPrimaryKeyIndex(rel);
#endif
	ok = list_length(indexes) == 1 && OidIsValid(layout.pkey_oid) &&
		linitial_oid(indexes) == layout.pkey_oid;
	list_free(indexes);
	if (!ok)
		return false;

	idx = index_open(layout.pkey_oid, AccessShareLock);
	ok = idx->rd_rel->relam == BTREE_AM_OID &&
		idx->rd_index->indnatts == 1 &&
		idx->rd_index->indkey.values[0] == layout.att[COL_NAME] + 1 &&
		idx->rd_index->indisunique && idx->rd_index->indimmediate &&
		idx->rd_index->indisvalid && idx->rd_index->indisready;
	if (ok)
	{
		Oid			eq = get_opfamily_member(idx->rd_opfamily[0], TEXTOID,
											 TEXTOID, BTEqualStrategyNumber);

		layout.name_eq_proc = OidIsValid(eq) ? get_opcode(eq) : InvalidOid;
		layout.name_collation = idx->rd_indcollation[0];
		ok = OidIsValid(layout.name_eq_proc);
	}
	index_close(idx, AccessShareLock);
	return ok;
}

/*
 * Open fencing.leases for writing and say whether this path may handle
 * it.  The relcache callback has fired by the time the lock is held, so
 * the catalog asked again then tells whether the table changed.
 */
static Relation
open_leases(bool *usable)
{
	Oid			relid = fencing_catalog()->leases_oid;
	Relation	rel = table_open(relid, RowExclusiveLock);
	const FencingCatalog *cat = fencing_catalog();

	if (layout.generation != cat->generation || layout.leases_oid != relid)
	{
		layout.leases_oid = relid;
		layout.pkey_oid = InvalidOid;
		layout.usable = cat->leases_oid == relid && layout_is_usable(rel);
		layout.generation = cat->generation;
	}
	*usable = layout.usable;
	return rel;
}

#ifdef FENCING_SPI_LEASES
/* for benchmarks: measure the SPI statements instead */
#define DIRECT_PATH_BUILT false
#else
#define DIRECT_PATH_BUILT true
#endif

static bool
text_equal(Datum a, Datum b)
{
	text	   *ta = DatumGetTextPP(a);
	text	   *tb = DatumGetTextPP(b);

	/* deterministic collations compare text equal iff the bytes are */
	return VARSIZE_ANY_EXHDR(ta) == VARSIZE_ANY_EXHDR(tb) &&
		memcmp(VARDATA_ANY(ta), VARDATA_ANY(tb), VARSIZE_ANY_EXHDR(ta)) == 0;
}

static TimestampTz
plus_interval(TimestampTz t, Datum interval)
{
	Interval   *iv = DatumGetIntervalP(interval);

	if (iv->month == 0 && iv->day == 0 && iv->time == 0)
		return t;
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(t),
												   interval));
}

static Datum
counter_plus(Datum counter, int64 n)
{
	int64		result;

	if (pg_add_s64_overflow(DatumGetInt64(counter), n, &result))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bigint out of range")));
	return Int64GetDatum(result);
}

/* The holder columns equal the request's holder and role? */
static bool
same_holder(const Datum *row, const LeaseRequest *req)
{
	return DatumGetObjectId(row[layout.att[COL_HOLDER_ROLE]]) == req->role &&
		text_equal(row[layout.att[COL_HOLDER]], PointerGetDatum(req->holder));
}

/*
 * Judge the row as a statement of lease_store.c would, and if it
 * qualifies write the new values into row[] and nulls[].  TAKE returns
 * the new token and whether it took over an expired lease in *result.
 */
static bool
judge_and_change(LeaseStatement stmt, Datum *row, bool *nulls,
				 const LeaseRequest *req, LeaseResult *result)
{
	const int  *att = layout.att;
	TimestampTz now = GetCurrentTimestamp();
	bool		released = !nulls[att[COL_RELEASED_AT]];
	TimestampTz expires_at = DatumGetTimestampTz(row[att[COL_EXPIRES_AT]]);

	if (stmt == LEASE_TAKE)
	{
		bool		own = same_holder(row, req);
		bool		takeover = !released && !own;

		if (!released && !own &&
			plus_interval(expires_at, row[att[COL_LOCK_DELAY]]) > now)
			return false;

		row[att[COL_HOLDER]] = PointerGetDatum(req->holder);
		row[att[COL_HOLDER_ROLE]] = ObjectIdGetDatum(req->role);
		row[att[COL_TOKEN]] = Int64GetDatum(fencing_issue_token());
		row[att[COL_ACQUIRED_AT]] = TimestampTzGetDatum(now);
		row[att[COL_EXPIRES_AT]] =
			TimestampTzGetDatum(plus_interval(now, req->ttl));
		row[att[COL_RELEASED_AT]] = (Datum) 0;
		nulls[att[COL_RELEASED_AT]] = true;
		row[att[COL_LOCK_DELAY]] = req->lock_delay;
		row[att[COL_TAKEOVER]] = BoolGetDatum(takeover);
		row[att[COL_HOLDER_CHANGES]] =
			counter_plus(row[att[COL_HOLDER_CHANGES]], own ? 0 : 1);
		row[att[COL_ACQUIRES]] = counter_plus(row[att[COL_ACQUIRES]], 1);
		row[att[COL_EXPIRED_TAKEOVERS]] =
			counter_plus(row[att[COL_EXPIRED_TAKEOVERS]], takeover ? 1 : 0);

		if (result != NULL)
		{
			result->token = DatumGetInt64(row[att[COL_TOKEN]]);
			result->takeover = takeover;
		}
		return true;
	}

	/* RENEW and RELEASE: the current token and role, and live */
	if (DatumGetInt64(row[att[COL_TOKEN]]) != req->token ||
		DatumGetObjectId(row[att[COL_HOLDER_ROLE]]) != req->role ||
		released || expires_at <= now)
		return false;

	if (stmt == LEASE_RENEW)
	{
		row[att[COL_EXPIRES_AT]] =
			TimestampTzGetDatum(plus_interval(now, req->ttl));
		row[att[COL_RENEWALS]] = counter_plus(row[att[COL_RENEWALS]], 1);
	}
	else
	{
		row[att[COL_RELEASED_AT]] = TimestampTzGetDatum(now);
		nulls[att[COL_RELEASED_AT]] = false;
		row[att[COL_RELEASES]] = counter_plus(row[att[COL_RELEASES]], 1);
	}
	return true;
}

/* A new row version that is not heap-only needs its own key entry. */
static void
insert_key(Relation rel, Relation idx, TupleTableSlot *slot)
{
	Datum		key = slot->tts_values[layout.att[COL_NAME]];
	bool		keynull = false;
	IndexInfo  *info = BuildIndexInfo(idx);

	index_insert(idx, &key, &keynull, &slot->tts_tid, rel, UNIQUE_CHECK_YES,
#if PG_VERSION_NUM >= 140000
				 true,			/* the key did not change */
#endif
				 info);
}

/*
 * One look at the lease row under "snapshot" and, if it qualifies, the
 * update.  *again is set when a concurrent change committed first.
 */
static LeaseDirectResult
look_and_update(Relation rel, Relation idx, LeaseStatement stmt,
				Snapshot snapshot, const LeaseRequest *req,
				LeaseResult *result, bool *again)
{
	TupleDesc	desc = RelationGetDescr(rel);
	ScanKeyData key;
	IndexScanDesc scan;
	TupleTableSlot *oldslot = table_slot_create(rel, NULL);
	TupleTableSlot *newslot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	LeaseDirectResult look = LEASE_DIRECT_MISSING;

	ScanKeyEntryInitialize(&key, 0, 1, BTEqualStrategyNumber, InvalidOid,
						   layout.name_collation, layout.name_eq_proc,
						   PointerGetDatum(req->name));
#if PG_VERSION_NUM >= 180000
	scan = index_beginscan(rel, idx, snapshot, NULL, 1, 0);
#else
	scan = index_beginscan(rel, idx, snapshot, 1, 0);
#endif
	index_rescan(scan, &key, 1, NULL, 0);

	if (index_getnext_slot(scan, ForwardScanDirection, oldslot))
	{
		look = LEASE_DIRECT_UNCHANGED;
		slot_getallattrs(oldslot);
		ExecClearTuple(newslot);
		memcpy(newslot->tts_values, oldslot->tts_values,
			   desc->natts * sizeof(Datum));
		memcpy(newslot->tts_isnull, oldslot->tts_isnull,
			   desc->natts * sizeof(bool));

		if (judge_and_change(stmt, newslot->tts_values, newslot->tts_isnull,
							 req, result))
		{
			TM_FailureData tmfd;
			LockTupleMode lockmode;
			TM_Result	result;
#if PG_VERSION_NUM >= 160000
			TU_UpdateIndexes update_indexes;
#else
			bool		update_indexes;
#endif

			ExecStoreVirtualTuple(newslot);
			result = table_tuple_update(rel, &oldslot->tts_tid, newslot,
										GetCurrentCommandId(true), snapshot,
										InvalidSnapshot, true, &tmfd,
										&lockmode, &update_indexes);
			switch (result)
			{
				case TM_Ok:
#if PG_VERSION_NUM >= 160000
					if (update_indexes == TU_All)
#else
					if (update_indexes)
#endif
						insert_key(rel, idx, newslot);
					look = LEASE_DIRECT_UPDATED;
					break;
				case TM_SelfModified:
					/* as the executor: ignore our own command's change */
					if (tmfd.cmax != GetCurrentCommandId(false))
						ereport(ERROR,
								(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
								 errmsg("lease row was already modified by an operation triggered by the current command")));
					break;
				case TM_Updated:
				case TM_Deleted:
					*again = true;
					break;
				default:
					elog(ERROR, "unexpected table_tuple_update status: %d",
						 (int) result);
			}
		}
	}

	index_endscan(scan);
	ExecDropSingleTupleTableSlot(newslot);
	ExecDropSingleTupleTableSlot(oldslot);
	return look;
}

/*
 * Run TAKE, RENEW or RELEASE directly.  Returns LEASE_DIRECT_UNSUPPORTED
 * when the table does not qualify (the caller then uses SPI), else
 * whether a row was updated, seen but left alone, or not seen at all.
 */
LeaseDirectResult
fencing_lease_update_direct(LeaseStatement stmt, const LeaseRequest *req,
							LeaseResult *result)
{
	Relation	rel;
	Relation	idx;
	bool		usable;
	LeaseDirectResult outcome;

	Assert(stmt == LEASE_TAKE || stmt == LEASE_RENEW || stmt == LEASE_RELEASE);
	if (!DIRECT_PATH_BUILT)
		return LEASE_DIRECT_UNSUPPORTED;

	rel = open_leases(&usable);
	if (!usable)
	{
		table_close(rel, NoLock);
		return LEASE_DIRECT_UNSUPPORTED;
	}
	idx = index_open(layout.pkey_oid, RowExclusiveLock);

	/* see what this transaction did so far, as each SQL statement does */
	CommandCounterIncrement();
	for (;;)
	{
		Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
		bool		again = false;

		outcome = look_and_update(rel, idx, stmt, snapshot, req, result,
								  &again);
		UnregisterSnapshot(snapshot);
		if (!again)
			break;

		/*
		 * A concurrent transaction changed the row first and committed.  The
		 * error is the executor's, so the SPI fallback raises the same.
		 */
		if (IsolationUsesXactSnapshot())
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
		/* READ COMMITTED: judge the new version with a new snapshot */
		CHECK_FOR_INTERRUPTS();
	}
	CommandCounterIncrement();

	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return outcome;
}
