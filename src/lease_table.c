/*-------------------------------------------------------------------------
 *
 * lease_table.c
 *	  The one file that reads and writes fencing.leases: the lease rules,
 *	  judged once, in C, on the lease row, and every change to a lease row;
 *	  creating a row and purging old ones are SQL, at the end of the file.
 *	  fencing_run_lease_statement is the entry for every statement.
 *
 * A statement finds the row through the primary key as its snapshot sees
 * it, judges it with one clock reading, and when it qualifies locks it
 * (table_tuple_lock) and, for a write, hands the new version to the
 * executor's single-row update, ExecSimpleRelationUpdate(), with an EState
 * and a ResultRelInfo, as logical replication's apply worker does.  So a
 * lease write gets what a plain UPDATE gets: NOT NULL and CHECK
 * constraints, stored generated columns, the replica identity check of a
 * published table, index maintenance, and row-level triggers.  What the
 * executor's single-row update cannot honour is refused with a clear
 * error (LF020) before anything changes: row security that applies to the
 * extension's owner, statement-level UPDATE triggers and transition
 * tables, and rewrite rules.
 *
 * As an UPDATE ... WHERE or SELECT ... FOR NO KEY UPDATE in READ COMMITTED
 * would:
 *	- a row that does not qualify is left alone and unlocked, so a waiter
 *	  never blocks the holder it waits for;
 *	- when a concurrent transaction changed the row first, READ COMMITTED
 *	  looks again with a new snapshot and judges the new version (the
 *	  executor's EvalPlanQual recheck, but without keeping a lock on a row
 *	  that fails it); REPEATABLE READ and SERIALIZABLE raise 40001;
 *	- a row the statement had to wait for is judged again once locked, by
 *	  a new clock reading (lock_waiting), and an acquire waits for it only
 *	  until its deadline.
 *
 * Two statements are SQL by nature: creating the row (INSERT ... ON
 * CONFLICT DO NOTHING) and purging old ones.  Each is prepared once per
 * backend and run as the extension's owner, every object and operator
 * named with its schema, so the caller's search_path cannot change what
 * runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/int.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#if PG_VERSION_NUM >= 160000
#include "parser/parse_relation.h"
#endif
#if PG_VERSION_NUM >= 180000
#include "rewrite/rewriteHandler.h"
#endif
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "lease.h"

/*
 * True while this file writes fencing.leases itself (the executor's update
 * or one of the SQL statements): the arrival trigger lets those rows be
 * (fencing_lease_table_writing).
 */
static bool writing_leases = false;

/* the columns of fencing.leases the lease rules read or write */
typedef enum LeaseColumn
{
	COL_NAME,
	COL_SLOT,
	COL_KIND,
	COL_SLOTS,
	COL_HOLDER,
	COL_HOLDER_ROLE,
	COL_TOKEN,
	COL_ACQUIRED_AT,
	COL_EXPIRES_AT,
	COL_RELEASED_AT,
	COL_LOCK_DELAY,
	COL_TAKEOVER,
	COL_VALUE,
	COL_END_REASON,
	COL_PREV_TOKEN,
	COL_PREV_END,
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
	[COL_SLOT] = {"slot", INT4OID},
	[COL_KIND] = {"kind", CHAROID},
	[COL_SLOTS] = {"slots", INT4OID},
	[COL_HOLDER] = {"holder", TEXTOID},
	[COL_HOLDER_ROLE] = {"holder_role", REGROLEOID},
	[COL_TOKEN] = {"token", INT8OID},
	[COL_ACQUIRED_AT] = {"acquired_at", TIMESTAMPTZOID},
	[COL_EXPIRES_AT] = {"expires_at", TIMESTAMPTZOID},
	[COL_RELEASED_AT] = {"released_at", TIMESTAMPTZOID},
	[COL_LOCK_DELAY] = {"lock_delay", INTERVALOID},
	[COL_TAKEOVER] = {"takeover", BOOLOID},
	[COL_VALUE] = {"value", TEXTOID},
	[COL_END_REASON] = {"end_reason", CHAROID},
	[COL_PREV_TOKEN] = {"prev_token", INT8OID},
	[COL_PREV_END] = {"prev_end", CHAROID},
	[COL_HOLDER_CHANGES] = {"holder_changes", INT8OID},
	[COL_ACQUIRES] = {"acquires", INT8OID},
	[COL_RENEWALS] = {"renewals", INT8OID},
	[COL_RELEASES] = {"releases", INT8OID},
	[COL_EXPIRED_TAKEOVERS] = {"expired_takeovers", INT8OID},
};

/*
 * Where the columns and the key of fencing.leases are, learned again
 * whenever the catalog is (any relcache invalidation of the table).
 */
static struct
{
	uint64		generation;		/* of the catalog when learned; 0: never */
	Oid			key_oid;		/* the primary key, on (name, slot) */
	RegProcedure name_eq_proc;	/* its equality functions */
	RegProcedure slot_eq_proc;
	Oid			name_collation;
	int			att[NUM_LEASE_COLUMNS]; /* 0-based attribute numbers */
}			layout;

/* The equality function of a key column's operator family, or InvalidOid. */
static RegProcedure
key_equality(Relation key, int col, Oid type)
{
	Oid			eq = get_opfamily_member(key->rd_opfamily[col], type, type,
										 BTEqualStrategyNumber);

	return OidIsValid(eq) ? get_opcode(eq) : InvalidOid;
}

static void
learn_layout(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Relation	key;
	bool		ok;

	for (int c = 0; c < NUM_LEASE_COLUMNS; c++)
		layout.att[c] = -1;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		for (int c = 0; c < NUM_LEASE_COLUMNS; c++)
		{
			if (strcmp(NameStr(att->attname), lease_columns[c].name) != 0)
				continue;
			if (att->atttypid != lease_columns[c].type)
				ereport(ERROR,
						(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
						 errmsg("column \"%s\" of fencing.leases has type %s, not %s",
								lease_columns[c].name,
								format_type_be(att->atttypid),
								format_type_be(lease_columns[c].type)),
						 errhint("Reinstall the extension.")));
			layout.att[c] = i;
		}
	}
	for (int c = 0; c < NUM_LEASE_COLUMNS; c++)
		if (layout.att[c] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
					 errmsg("fencing.leases has no column \"%s\"",
							lease_columns[c].name),
					 errhint("Reinstall the extension.")));

#if PG_VERSION_NUM >= 180000
	layout.key_oid = RelationGetPrimaryKeyIndex(rel, false);
#else
	layout.key_oid = RelationGetPrimaryKeyIndex(rel);
#endif
	ok = OidIsValid(layout.key_oid);
	if (ok)
	{
		key = index_open(layout.key_oid, AccessShareLock);
		ok = key->rd_rel->relam == BTREE_AM_OID &&
			key->rd_index->indnatts == 2 &&
			key->rd_index->indkey.values[0] == layout.att[COL_NAME] + 1 &&
			key->rd_index->indkey.values[1] == layout.att[COL_SLOT] + 1;
		if (ok)
		{
			layout.name_eq_proc = key_equality(key, 0, TEXTOID);
			layout.slot_eq_proc = key_equality(key, 1, INT4OID);
			layout.name_collation = key->rd_indcollation[0];
			ok = OidIsValid(layout.name_eq_proc) &&
				OidIsValid(layout.slot_eq_proc);
		}
		index_close(key, AccessShareLock);
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
				 errmsg("fencing.leases has no btree primary key on (name, slot)"),
				 errhint("Reinstall the extension.")));
}

/*
 * Open fencing.leases.  The relcache callback has fired by the time the
 * lock is held, so the catalog asked again then tells whether the table
 * changed since the layout was learned.
 */
static Relation
open_leases(LOCKMODE lockmode)
{
	Oid			relid = fencing_catalog()->leases_oid;
	Relation	rel = table_open(relid, lockmode);
	const FencingCatalog *cat = fencing_catalog();

	if (cat->leases_oid != relid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fencing.leases was replaced concurrently")));
	if (layout.generation != cat->generation)
	{
		layout.generation = 0;
		learn_layout(rel);
		layout.generation = cat->generation;
	}
	return rel;
}

static bool
has_update_rules(Relation rel)
{
	RuleLock   *rules = rel->rd_rules;

	for (int i = 0; rules != NULL && i < rules->numLocks; i++)
		if (rules->rules[i]->event == CMD_UPDATE)
			return true;
	return false;
}

/*
 * What the single-row update cannot do as an UPDATE statement would, it
 * refuses; reads refuse row security too, which would hide rows.
 */
static void
refuse_unsupported(Relation rel, bool writes)
{
	TriggerDesc *td = rel->trigdesc;

	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
				 errmsg("fencing.leases is not a plain table")));
	if (rel->rd_rel->relrowsecurity &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
				 errmsg("row-level security on fencing.leases is not supported"),
				 errdetail("The lease functions run as the extension's owner, whom forced row security would filter."),
				 errhint("Run ALTER TABLE fencing.leases NO FORCE ROW LEVEL SECURITY.")));
	if (!writes)
		return;
	if (td != NULL &&
		(td->trig_update_before_statement || td->trig_update_after_statement ||
		 td->trig_update_new_table || td->trig_update_old_table))
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
				 errmsg("statement-level UPDATE triggers on fencing.leases are not supported"),
				 errdetail("The lease functions update one row at a time and fire row-level triggers only."),
				 errhint("Use a FOR EACH ROW trigger without transition tables.")));
	if (has_update_rules(rel))
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_LEASES_UNSUPPORTED),
				 errmsg("UPDATE rules on fencing.leases are not supported"),
				 errdetail("The lease functions update the table itself; a rule would be bypassed."),
				 errhint("Use a trigger instead.")));
}

/* ---- reading the row ---- */

#define COL(slot, c)		((slot)->tts_values[layout.att[c]])
#define COL_ISNULL(slot, c) ((slot)->tts_isnull[layout.att[c]])

/*
 * Scan the rows of one name as "snapshot" sees them, in slot order: all
 * of them, or (slot >= 0) that slot's.
 */
static IndexScanDesc
begin_name_scan(Relation rel, Relation key, Snapshot snapshot, text *name,
				int32 slot)
{
	ScanKeyData skeys[2];
	int			nkeys = slot >= 0 ? 2 : 1;
	IndexScanDesc scan;

	ScanKeyEntryInitialize(&skeys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   layout.name_collation, layout.name_eq_proc,
						   PointerGetDatum(name));
	ScanKeyEntryInitialize(&skeys[1], 0, 2, BTEqualStrategyNumber, InvalidOid,
						   InvalidOid, layout.slot_eq_proc,
						   Int32GetDatum(slot));
#if PG_VERSION_NUM >= 180000
	scan = index_beginscan(rel, key, snapshot, NULL, nkeys, 0);
#else
	scan = index_beginscan(rel, key, snapshot, nkeys, 0);
#endif
	index_rescan(scan, skeys, nkeys, NULL, 0);
	return scan;
}

static bool qualifies(LeaseStatement stmt, TupleTableSlot *row,
					  const LeaseRequest *req, TimestampTz now);

/* Does the statement find its row by the token, among the name's rows? */
static bool
finds_by_token(LeaseStatement stmt)
{
	return stmt == LEASE_RENEW || stmt == LEASE_RELEASE ||
		stmt == LEASE_LOCK || stmt == LEASE_HOLDER_ROLE ||
		stmt == LEASE_PROCLAIM;
}

/*
 * Find the statement's row as "snapshot" sees it.  Acquiring statements
 * name the slot; renew, release and lock find the slot that has the
 * token (tokens are never issued twice); a forced release, the first
 * slot it would end.
 */
static bool
find_lease_row(Relation rel, Relation key, Snapshot snapshot, LeaseStatement stmt,
	 const LeaseRequest *req, TimestampTz now, TupleTableSlot *slot)
{
	bool		by_token = finds_by_token(stmt);
	bool		by_slot = !by_token && stmt != LEASE_FORCE_RELEASE;
	IndexScanDesc scan;
	bool		found = false;

	scan = begin_name_scan(rel, key, snapshot, req->name,
						   by_slot ? req->slot : -1);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		slot_getallattrs(slot);
		if (by_slot ||
			(by_token ? DatumGetInt64(COL(slot, COL_TOKEN)) == req->token :
			 qualifies(stmt, slot, req, now)))
		{
			found = true;
			break;
		}
	}
	index_endscan(scan);
	return found;
}

static bool
text_equal(text *a, text *b)
{
	/* deterministic collations compare text equal iff the bytes are */
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
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

/* ---- the lease rules ---- */

static bool
same_holder(TupleTableSlot *row, const LeaseRequest *req)
{
	return !COL_ISNULL(row, COL_HOLDER_ROLE) && !COL_ISNULL(row, COL_HOLDER) &&
		DatumGetObjectId(COL(row, COL_HOLDER_ROLE)) == req->role &&
		text_equal(DatumGetTextPP(COL(row, COL_HOLDER)), req->holder);
}

/* When another holder may take it: expiry plus lock delay. */
static TimestampTz
free_at(TupleTableSlot *row)
{
	return plus_interval(DatumGetTimestampTz(COL(row, COL_EXPIRES_AT)),
						 COL(row, COL_LOCK_DELAY));
}

/* Not released and not expired. */
static bool
live(TupleTableSlot *row, TimestampTz now)
{
	return COL_ISNULL(row, COL_RELEASED_AT) &&
		DatumGetTimestampTz(COL(row, COL_EXPIRES_AT)) > now;
}

/*
 * An election whose leader's token is from before the current band: the
 * leader can no longer renew, proclaim or write (LF005), so the election
 * is free to the other candidates at once, not at expiry
 * (docs/elections.md).  Leases and semaphores stay held until expiry.
 */
static bool
lost_election(TupleTableSlot *row)
{
	return DatumGetChar(COL(row, COL_KIND)) == LEASE_KIND_ELECTION &&
		fencing_token_loss(DatumGetInt64(COL(row, COL_TOKEN))) != TOKEN_NOT_LOST;
}

/* Of the kind and slot count the acquire takes the name as. */
static bool
same_kind(TupleTableSlot *row, const LeaseRequest *req)
{
	return DatumGetChar(COL(row, COL_KIND)) == req->kind &&
		DatumGetInt32(COL(row, COL_SLOTS)) == req->slots;
}

static bool
current_token(TupleTableSlot *row, const LeaseRequest *req)
{
	return DatumGetInt64(COL(row, COL_TOKEN)) == req->token;
}

/* Does the row qualify for the statement, by the clock reading "now"? */
static bool
qualifies(LeaseStatement stmt, TupleTableSlot *row, const LeaseRequest *req,
		  TimestampTz now)
{
	switch (stmt)
	{
		case LEASE_TAKE:
		case LEASE_TAKEABLE:
			/* released, free after expiry and lock delay, or our own */
			return same_kind(row, req) &&
				(!COL_ISNULL(row, COL_RELEASED_AT) ||
				 free_at(row) <= now || same_holder(row, req) ||
				 lost_election(row));
		case LEASE_TAKE_OWN:
			/* not released and our own: others' queue does not stop us */
			return same_kind(row, req) &&
				COL_ISNULL(row, COL_RELEASED_AT) && same_holder(row, req);
		case LEASE_RENEW:
		case LEASE_RELEASE:
		case LEASE_LOCK:
			return current_token(row, req) &&
				DatumGetObjectId(COL(row, COL_HOLDER_ROLE)) == req->role &&
				live(row, now);
		case LEASE_HOLDER_ROLE:
			return current_token(row, req) && live(row, now);
		case LEASE_PROCLAIM:
			return current_token(row, req) &&
				DatumGetObjectId(COL(row, COL_HOLDER_ROLE)) == req->role &&
				live(row, now) &&
				DatumGetChar(COL(row, COL_KIND)) == LEASE_KIND_ELECTION;
		case LEASE_FORCE_RELEASE:
			/* a live lease, or an expired one's pending lock delay */
			return COL_ISNULL(row, COL_RELEASED_AT) && free_at(row) > now;
		case LEASE_AVAILABLE_AT:
			return true;
		default:
			elog(ERROR, "lease statement %d is not judged in C", (int) stmt);
	}
	return false;				/* keep the compiler quiet */
}

static bool
writes_row(LeaseStatement stmt)
{
	return stmt == LEASE_TAKE || stmt == LEASE_TAKE_OWN || stmt == LEASE_RENEW ||
		stmt == LEASE_RELEASE || stmt == LEASE_FORCE_RELEASE ||
		stmt == LEASE_PROCLAIM;
}

/* ---- writing the row ---- */

typedef struct RowChange
{
	TupleTableSlot *slot;		/* the new version */
	Bitmapset  *cols;			/* changed columns, as RTE updatedCols */
} RowChange;

static void
set_col(RowChange *ch, LeaseColumn c, Datum value, bool isnull)
{
	ch->slot->tts_values[layout.att[c]] = value;
	ch->slot->tts_isnull[layout.att[c]] = isnull;
	ch->cols = bms_add_member(ch->cols, layout.att[c] + 1 -
							  FirstLowInvalidHeapAttributeNumber);
}

/* counter + n; NULL stays NULL, as in SQL */
static void
add_to_counter(RowChange *ch, TupleTableSlot *old, LeaseColumn c, int64 n)
{
	int64		result;

	if (COL_ISNULL(old, c))
	{
		set_col(ch, c, (Datum) 0, true);
		return;
	}
	if (pg_add_s64_overflow(DatumGetInt64(COL(old, c)), n, &result))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("bigint out of range")));
	set_col(ch, c, Int64GetDatum(result), false);
}

/* The new version of a qualifying row, for a writing statement. */
static void
change_row(LeaseStatement stmt, TupleTableSlot *old, const LeaseRequest *req,
		   TimestampTz now, RowChange *ch)
{
	TupleTableSlot *new = ch->slot;

	ExecClearTuple(new);
	memcpy(new->tts_values, old->tts_values,
		   new->tts_tupleDescriptor->natts * sizeof(Datum));
	memcpy(new->tts_isnull, old->tts_isnull,
		   new->tts_tupleDescriptor->natts * sizeof(bool));
	ch->cols = NULL;

	switch (stmt)
	{
		case LEASE_TAKE:
		case LEASE_TAKE_OWN:
			{
				bool		own = same_holder(old, req);
				bool		released = !COL_ISNULL(old, COL_RELEASED_AT);
				bool		takeover = !released && !own;
				char		prev_end = LEASE_END_TAKEN_OVER;

				/* how the token we replace ended, for lease_watch */
				if (released && !COL_ISNULL(old, COL_END_REASON))
					prev_end = DatumGetChar(COL(old, COL_END_REASON));
				else if (released)
					prev_end = LEASE_END_RELEASED;
				set_col(ch, COL_PREV_TOKEN, COL(old, COL_TOKEN), false);
				set_col(ch, COL_PREV_END, CharGetDatum(prev_end), false);
				if (!COL_ISNULL(old, COL_END_REASON))
					set_col(ch, COL_END_REASON, (Datum) 0, true);
				if (req->value != NULL || !COL_ISNULL(old, COL_VALUE))
					set_col(ch, COL_VALUE, PointerGetDatum(req->value),
							req->value == NULL);

				set_col(ch, COL_HOLDER, PointerGetDatum(req->holder), false);
				set_col(ch, COL_HOLDER_ROLE, ObjectIdGetDatum(req->role), false);
				/* issued with the row locked: no token spent on a lost race */
				set_col(ch, COL_TOKEN, Int64GetDatum(fencing_issue_token()), false);
				set_col(ch, COL_ACQUIRED_AT, TimestampTzGetDatum(now), false);
				set_col(ch, COL_EXPIRES_AT,
						TimestampTzGetDatum(plus_interval(now, req->ttl)), false);
				set_col(ch, COL_RELEASED_AT, (Datum) 0, true);
				set_col(ch, COL_LOCK_DELAY, req->lock_delay, false);
				set_col(ch, COL_TAKEOVER, BoolGetDatum(takeover), false);
				add_to_counter(ch, old, COL_HOLDER_CHANGES, own ? 0 : 1);
				add_to_counter(ch, old, COL_ACQUIRES, 1);
				add_to_counter(ch, old, COL_EXPIRED_TAKEOVERS, takeover ? 1 : 0);
				break;
			}
		case LEASE_RENEW:
			set_col(ch, COL_EXPIRES_AT,
					TimestampTzGetDatum(plus_interval(now, req->ttl)), false);
			add_to_counter(ch, old, COL_RENEWALS, 1);
			break;
		case LEASE_RELEASE:
		case LEASE_FORCE_RELEASE:
			set_col(ch, COL_RELEASED_AT, TimestampTzGetDatum(now), false);
			set_col(ch, COL_END_REASON,
					CharGetDatum(stmt == LEASE_RELEASE ? LEASE_END_RELEASED :
								 LEASE_END_FORCE_RELEASED), false);
			add_to_counter(ch, old, COL_RELEASES, 1);
			break;
		case LEASE_PROCLAIM:
			set_col(ch, COL_VALUE, PointerGetDatum(req->value), false);
			break;
		default:
			elog(ERROR, "lease statement %d does not write", (int) stmt);
	}
	ExecStoreVirtualTuple(new);
	/* own the values: the old version's buffer is only pinned by "old" */
	ExecMaterializeSlot(new);
}

#if PG_VERSION_NUM >= 180000
#define ri_CheckExprs ri_CheckConstraintExprs
#else
#define ri_CheckExprs ri_ConstraintExprs
#endif

/*
 * The CHECK constraints of fencing.leases, parsed: the executor parses
 * each one's text (stringToNode) for every new ResultRelInfo, which for a
 * single-row update is every write, and that was a tenth of a lease
 * cycle's instructions.  Kept per backend as the relcache keeps an index's
 * expressions, and parsed again when the catalog generation or a
 * constraint's text changes.
 */
static struct
{
	uint64		generation;		/* layout.generation when parsed; 0: never */
	int			ncheck;
	char	  **ccbin;			/* each constraint's text, as parsed */
	Node	  **exprs;			/* NULL for a constraint not enforced */
	MemoryContext cxt;
}			checks;

static bool
checks_current(TupleConstr *constr)
{
	if (checks.generation != layout.generation ||
		checks.ncheck != constr->num_check)
		return false;
	for (int i = 0; i < constr->num_check; i++)
	{
		if (strcmp(checks.ccbin[i], constr->check[i].ccbin) != 0)
			return false;
#if PG_VERSION_NUM >= 180000
		if ((checks.exprs[i] != NULL) != constr->check[i].ccenforced)
			return false;
#endif
	}
	return true;
}

static void
parse_checks(Relation rel, TupleConstr *constr)
{
	MemoryContext old;

	checks.generation = 0;
	if (checks.cxt == NULL)
		checks.cxt = AllocSetContextCreate(CacheMemoryContext,
										   "fencing.leases CHECK constraints",
										   ALLOCSET_SMALL_SIZES);
	MemoryContextReset(checks.cxt);
	old = MemoryContextSwitchTo(checks.cxt);
	checks.ncheck = constr->num_check;
	checks.ccbin = palloc(sizeof(char *) * constr->num_check);
	checks.exprs = palloc0(sizeof(Node *) * constr->num_check);
	for (int i = 0; i < constr->num_check; i++)
	{
		checks.ccbin[i] = pstrdup(constr->check[i].ccbin);
#if PG_VERSION_NUM >= 180000
		/* as ExecRelCheck: one not enforced is not checked */
		if (!constr->check[i].ccenforced)
			continue;
		checks.exprs[i] = expand_generated_columns_in_expr(stringToNode(checks.ccbin[i]),
														   rel, 1);
#else
		checks.exprs[i] = stringToNode(checks.ccbin[i]);
#endif
	}
	MemoryContextSwitchTo(old);
	checks.generation = layout.generation;
}

/*
 * What ExecRelCheck does when it first meets the ResultRelInfo, from the
 * parsed constraints: each planned and initialized for this write, as the
 * executor would, so a function a constraint calls is looked up anew.
 * Leaves it to the executor when the relation's constraints are not
 * what the catalog says (it raises then).
 */
static void
prepare_checks(ResultRelInfo *rri, Relation rel, EState *estate)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	MemoryContext old;

	if (constr == NULL || constr->num_check == 0 ||
		constr->num_check != rel->rd_rel->relchecks)
		return;
	if (!checks_current(constr))
		parse_checks(rel, constr);
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	rri->ri_CheckExprs = palloc0(sizeof(ExprState *) * checks.ncheck);
	for (int i = 0; i < checks.ncheck; i++)
		if (checks.exprs[i] != NULL)
			rri->ri_CheckExprs[i] = ExecPrepareExpr((Expr *) copyObject(checks.exprs[i]),
													estate);
	MemoryContextSwitchTo(old);
}

/*
 * The function of the extension's own trigger on fencing.leases,
 * leases_restored, which lets the extension's writes be (lease_arrival.c),
 * as found in the catalog generation learned.
 */
static struct
{
	uint64		generation;		/* layout.generation when found; 0: never */
	Oid			fn;				/* InvalidOid: not there */
}			arrival;

/*
 * Are all the triggers of fencing.leases the extension's leases_restored?
 * Then a lease write need not fire them: they would let it be, and firing
 * a BEFORE ROW trigger fetches and locks the old row version again, which
 * cost a lease cycle 5% of its instructions.  A table with triggers of
 * its own fires them all, ours included.
 */
static bool
only_arrival_triggers(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	if (td == NULL)
		return true;
	if (arrival.generation != layout.generation)
	{
		Oid			nsp = fencing_catalog()->namespace_oid;

		arrival.fn = InvalidOid;
		for (int i = 0; i < td->numtriggers && !OidIsValid(arrival.fn); i++)
		{
			Oid			fn = td->triggers[i].tgfoid;
			char	   *name = get_func_name(fn);

			if (name != NULL && strcmp(name, "_leases_restored") == 0 &&
				get_func_namespace(fn) == nsp)
				arrival.fn = fn;
		}
		arrival.generation = layout.generation;
	}
	if (!OidIsValid(arrival.fn))
		return false;
	for (int i = 0; i < td->numtriggers; i++)
		if (td->triggers[i].tgfoid != arrival.fn)
			return false;
	return true;
}

/*
 * Store the new version of the locked row through the executor's
 * single-row update.  False if a BEFORE ROW trigger skipped it.
 */
static bool
update_row(Relation rel, Snapshot snapshot, TupleTableSlot *old,
		   RowChange *ch)
{
	EState	   *estate = CreateExecutorState();
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	EPQState	epqstate;
	bool		updated;

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
	{
		List	   *perminfos = NIL;
		RTEPermissionInfo *perminfo = addRTEPermissionInfo(&perminfos, rte);

		/* for UPDATE OF triggers and the index "unchanged" hint */
		perminfo->updatedCols = ch->cols;
#if PG_VERSION_NUM >= 180000
		ExecInitRangeTable(estate, list_make1(rte), perminfos,
						   bms_make_singleton(1));
#else
		ExecInitRangeTable(estate, list_make1(rte), perminfos);
#endif
	}
#else
	rte->updatedCols = ch->cols;
	ExecInitRangeTable(estate, list_make1(rte));
#endif

	InitResultRelInfo(rri, rel, 1, NULL, 0);
	prepare_checks(rri, rel, estate);
	if (only_arrival_triggers(rel))
		rri->ri_TrigDesc = NULL;
	estate->es_opened_result_relations = list_make1(rri);
	estate->es_output_cid = GetCurrentCommandId(true);
	estate->es_snapshot = snapshot;
	ExecOpenIndices(rri, false);
#if PG_VERSION_NUM >= 160000
	EvalPlanQualInit(&epqstate, estate, NULL, NIL, -1, NIL);
#else
	EvalPlanQualInit(&epqstate, estate, NULL, NIL, -1);
#endif

	AfterTriggerBeginQuery();
	/* the update sets it; a BEFORE trigger that skips the row does not */
	ItemPointerSetInvalid(&ch->slot->tts_tid);
	/* our own write: the arrival trigger (lease_arrival.c) lets it be */
	writing_leases = true;
	PG_TRY();
	{
		ExecSimpleRelationUpdate(rri, estate, &epqstate, old, ch->slot);
	}
	PG_FINALLY();
	{
		writing_leases = false;
	}
	PG_END_TRY();
	updated = ItemPointerIsValid(&ch->slot->tts_tid);
	AfterTriggerEndQuery(estate);

	EvalPlanQualEnd(&epqstate);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	return updated;
}

/* ---- statements ---- */

/* The row was there but did not qualify: is it of another kind? */
static void
saw_row(LeaseStatement stmt, TupleTableSlot *row, const LeaseRequest *req,
		LeaseResult *result)
{
	if (result == NULL)
		return;
	slot_getallattrs(row);
	result->row_seen = true;
	result->mismatch = (stmt == LEASE_TAKE || stmt == LEASE_TAKE_OWN) &&
		!same_kind(row, req);
}

static void
store_result(LeaseStatement stmt, TupleTableSlot *row, LeaseResult *result)
{
	if (result == NULL)
		return;
	switch (stmt)
	{
		case LEASE_TAKE:
		case LEASE_TAKE_OWN:
			/* as stored, whatever a BEFORE trigger did */
			slot_getallattrs(row);
			result->token = DatumGetInt64(COL(row, COL_TOKEN));
			result->takeover = DatumGetBool(COL(row, COL_TAKEOVER));
			result->replaced = !COL_ISNULL(row, COL_PREV_END) &&
				DatumGetChar(COL(row, COL_PREV_END)) == LEASE_END_TAKEN_OVER;
			break;
		case LEASE_FORCE_RELEASE:
			result->token = DatumGetInt64(COL(row, COL_TOKEN));
			result->holder = TextDatumGetCString(COL(row, COL_HOLDER));
			break;
		case LEASE_HOLDER_ROLE:
			result->holder_role = DatumGetObjectId(COL(row, COL_HOLDER_ROLE));
			break;
		case LEASE_RENEW:
		case LEASE_LOCK:
		case LEASE_PROCLAIM:
			/* the row as found, before the statement changed it */
			result->expires_at = DatumGetTimestampTz(COL(row, COL_EXPIRES_AT));
			break;
		case LEASE_AVAILABLE_AT:
			result->available_now = !COL_ISNULL(row, COL_RELEASED_AT) ||
				lost_election(row);
			result->available_at = result->available_now ? 0 : free_at(row);
			break;
		default:
			break;
	}
}

/* A wait for the lock on a row that another transaction has locked */
typedef struct RowWait
{
	Relation	rel;
	TupleTableSlot *row;		/* the judged version; then the locked one */
	Snapshot	snapshot;
	LeaseStatement stmt;
	const LeaseRequest *req;
	TimestampTz now;			/* the clock once the lock is ours */
	TM_Result	tm;
	TM_FailureData tmfd;
} RowWait;

/*
 * In fencing_wait_within's subtransaction: lock the row, waiting for the
 * transaction that has it, and judge the locked version again with a new
 * clock reading, as EvalPlanQual rechecks a row it waited for: time went
 * by, and the lease may have expired meanwhile.  Keep the lock only if the
 * row still qualifies.
 */
static bool
lock_and_judge_again(void *arg)
{
	RowWait    *w = (RowWait *) arg;
	bool		keep;

	w->tm = table_tuple_lock(w->rel, &w->row->tts_tid, w->snapshot, w->row,
							 GetCurrentCommandId(true),
							 LockTupleNoKeyExclusive, LockWaitBlock, 0,
							 &w->tmfd);
	keep = w->tm == TM_Ok;
	if (keep)
	{
		w->now = GetCurrentTimestamp();
		slot_getallattrs(w->row);
		keep = qualifies(w->stmt, w->row, w->req, w->now);
	}
	/* the buffer pin is this subtransaction's: keep a copy of the row */
	ExecMaterializeSlot(w->row);
	return keep;
}

/* Does the statement wait for a row lock only until req->lock_deadline? */
static bool
acquires(LeaseStatement stmt)
{
	return stmt == LEASE_TAKE || stmt == LEASE_TAKE_OWN ||
		stmt == LEASE_CREATE;
}

/*
 * The row "old", judged by the clock reading *now, is locked by another
 * transaction.  Wait for it, an acquire until its deadline and the other
 * statements as long as an UPDATE would, and return what table_tuple_lock
 * did, or TM_WouldBlock if the row was still locked at the deadline.  On
 * TM_Ok, "old" holds the locked version, judged again by a new clock
 * reading, *now: if it qualifies, it stays locked and *lapsed is false; if
 * not, it is left unlocked and *lapsed is true.
 *
 * The wait runs in a subtransaction (fencing_wait_within), so that a row
 * that no longer qualifies is not kept locked: a renew that waited past
 * the lease's expiry must not hold up the takeover it lost to.  Only
 * calls that have to wait pay for it; the others lock with LockWaitSkip at
 * no extra cost.  The subtransaction's XID stays with the transaction when
 * the lock is kept.
 */
static TM_Result
lock_waiting(Relation rel, TupleTableSlot *old, Snapshot snapshot,
			 LeaseStatement stmt, const LeaseRequest *req, TimestampTz *now,
			 bool *lapsed)
{
	RowWait		w = {0};
	int64		deadline = acquires(stmt) ? req->lock_deadline :
		FENCING_DEADLINE_NONE;
	FencingWaitOutcome outcome;

	/* a try-once acquire does not wait at all */
	if (deadline != FENCING_DEADLINE_NONE &&
		deadline <= fencing_monotonic_usecs())
		return TM_WouldBlock;
	w.rel = rel;
	w.row = old;
	w.snapshot = snapshot;
	w.stmt = stmt;
	w.req = req;

	/* let go of the scan's buffer pin before the subtransaction starts */
	ExecMaterializeSlot(old);
	outcome = fencing_wait_within(lock_and_judge_again, &w, deadline);
	if (outcome == FENCING_WAIT_TIMED_OUT)
		return TM_WouldBlock;
	*now = w.now;
	*lapsed = outcome == FENCING_WAIT_UNDONE && w.tm == TM_Ok;
	return w.tm;
}

/*
 * A transaction, not ours, that is changing one of the name's rows (slot
 * >= 0: that slot's) and has not committed or rolled back yet:
 * InvalidTransactionId if none.  A dirty snapshot shows it: as inserter
 * (xmin) of a row a snapshot does not see yet, or as updater or deleter
 * (xmax) of one it does.  Transactions that only lock a row are not shown,
 * and need not be: only a change frees a lease or creates it.  With
 * "prepared", only a prepared transaction counts.
 */
static TransactionId
row_changer(Relation rel, Relation key, text *name, int32 slot,
			TupleTableSlot *row, bool prepared)
{
	SnapshotData dirty;
	IndexScanDesc scan;
	TransactionId found = InvalidTransactionId;

	InitDirtySnapshot(dirty);
	scan = begin_name_scan(rel, key, &dirty, name, slot);
	while (!TransactionIdIsValid(found) &&
		   index_getnext_slot(scan, ForwardScanDirection, row))
	{
		TransactionId xid = TransactionIdIsValid(dirty.xmin) ? dirty.xmin :
			dirty.xmax;

		if (TransactionIdIsValid(xid) &&
			(!prepared || fencing_xact_is_prepared(xid)))
			found = xid;
	}
	index_endscan(scan);
	return found;
}

/*
 * Run a statement on the lease row.  "latest" reads with the latest
 * snapshot and without seeing this command's own changes anew: for the
 * read-only probes of fencing_check_lease_snapshot.
 */
static uint64
run_row_statement(LeaseStatement stmt, const LeaseRequest *req,
				  LeaseResult *result, bool probe, bool latest)
{
	bool		writes = writes_row(stmt);
	LOCKMODE	lockmode = writes ? RowExclusiveLock :
		stmt == LEASE_LOCK ? RowShareLock : AccessShareLock;
	FencingOwnerScope scope;
	Relation	rel;
	Relation	key;
	TupleTableSlot *old;
	RowChange	ch = {0};
	uint64		processed = 0;

	if (result != NULL)
	{
		result->row_seen = result->mismatch = result->locked =
			result->shortened = result->lapsed = result->replaced = false;
		result->prepared_xid = InvalidTransactionId;
	}
	fencing_become_owner(&scope);
	rel = open_leases(lockmode);
	refuse_unsupported(rel, writes);
	key = index_open(layout.key_oid, lockmode);
	old = table_slot_create(rel, NULL);
	if (writes)
		ch.slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
										   &TTSOpsVirtual);

	/* see what this transaction did so far, as each SQL statement does */
	if (!probe)
		CommandCounterIncrement();
	for (;;)
	{
		Snapshot	snapshot;
		TimestampTz now;
		TM_FailureData tmfd;
		TM_Result	tm;
		bool		again = false;

		snapshot = RegisterSnapshot(latest ? GetLatestSnapshot() :
									GetTransactionSnapshot());
		now = GetCurrentTimestamp();
		if (!find_lease_row(rel, key, snapshot, stmt, req, now, old))
		{
			/* TAKEABLE: a lease that does not exist may be created */
			processed = stmt == LEASE_TAKEABLE ? 1 : 0;
		}
		else if (!qualifies(stmt, old, req, now))
		{
			saw_row(stmt, old, req, result);
		}
		else if (!writes && stmt != LEASE_LOCK)
		{
			store_result(stmt, old, result);
			processed = 1;
		}
		else
		{
			/*
			 * Lock the row, if another transaction has it after waiting for
			 * that (lock_waiting).  A check locks as strongly as the renew
			 * or release that may follow it in the same transaction: a share
			 * lock would have to be upgraded, and two sessions of one holder
			 * that check, then renew, would deadlock.
			 */
			bool		lapsed = false;

			tm = table_tuple_lock(rel, &old->tts_tid, snapshot, old,
								  GetCurrentCommandId(true),
								  LockTupleNoKeyExclusive, LockWaitSkip, 0,
								  &tmfd);
			if (tm == TM_WouldBlock)
				tm = lock_waiting(rel, old, snapshot, stmt, req, &now,
								  &lapsed);
			switch (tm)
			{
				case TM_WouldBlock:
					/* locked by another transaction past our deadline */
					if (result != NULL)
						result->locked = true;
					break;
				case TM_Ok:
					if (lapsed)
					{
						/*
						 * Waited, and the locked row no longer qualifies.  A
						 * forced release looks for the next slot it would
						 * end, as an UPDATE goes on to its next row.
						 */
						if (stmt == LEASE_FORCE_RELEASE)
							again = true;
						else
							saw_row(stmt, old, req, result);
					}
					else if (!writes)
					{
						slot_getallattrs(old);
						store_result(stmt, old, result);
						processed = 1;
					}
					else
					{
						slot_getallattrs(old);
						change_row(stmt, old, req, now, &ch);
						if (update_row(rel, snapshot, old, &ch))
						{
							store_result(stmt, stmt == LEASE_TAKE ||
										 stmt == LEASE_TAKE_OWN ? ch.slot : old,
										 result);
							if (stmt == LEASE_RENEW && result != NULL)
								result->shortened =
									DatumGetTimestampTz(COL(ch.slot, COL_EXPIRES_AT)) <
									DatumGetTimestampTz(COL(old, COL_EXPIRES_AT));
							if ((stmt == LEASE_TAKE || stmt == LEASE_TAKE_OWN) &&
								result != NULL)
								result->lapsed = COL_ISNULL(old, COL_RELEASED_AT) &&
									!live(old, now);
							processed = 1;
						}
					}
					break;
				case TM_SelfModified:
					/* as the executor: our own command's change stands */
					break;
				case TM_Updated:
				case TM_Deleted:
					/* the same errors as the executor's */
					if (IsolationUsesXactSnapshot())
						ereport(ERROR,
								(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
								 tm == TM_Updated ?
								 errmsg("could not serialize access due to concurrent update") :
								 errmsg("could not serialize access due to concurrent delete")));
					/* READ COMMITTED: judge the new version, if any */
					again = true;
					break;
				default:
					elog(ERROR, "unexpected table_tuple_lock status: %d",
						 (int) tm);
			}
		}
		UnregisterSnapshot(snapshot);
		if (!again)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	if (writes)
		CommandCounterIncrement();
	if (stmt == LEASE_AVAILABLE_AT && result != NULL)
		result->prepared_xid = row_changer(rel, key, req->name, req->slot,
										   old, true);

	if (ch.slot != NULL)
		ExecDropSingleTupleTableSlot(ch.slot);
	ExecDropSingleTupleTableSlot(old);
	index_close(key, NoLock);
	table_close(rel, NoLock);
	fencing_restore_user(&scope);
	return processed;
}

/* ---- the kind of a name ---- */

/* "a lease", "a semaphore of 3 slots": what a name is, for messages */
static char *
describe_kind(char kind, int32 slots)
{
	switch (kind)
	{
		case LEASE_KIND_LEASE:
			return pstrdup("a lease");
		case LEASE_KIND_SEMAPHORE:
			return psprintf(slots == 1 ? "a semaphore of %d slot" :
							"a semaphore of %d slots", slots);
		case LEASE_KIND_ELECTION:
			return pstrdup("an election");
		default:
			return psprintf("a name of unknown kind \"%c\"", kind);
	}
}

/*
 * Refuse a request for a name that is something else: held (or in its
 * lock delay) as another kind or slot count, or being written or locked
 * right now by another transaction ("busy").
 */
static void
refuse_kind(const LeaseRequest *req, char kind, int32 slots, bool busy)
{
	char	   *name = text_to_cstring(req->name);

	if (busy)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_KIND_MISMATCH),
				 errmsg("lease name \"%s\" is being acquired as %s",
						name, describe_kind(kind, slots)),
				 errdetail("This call asks for %s; another transaction is acquiring or changing the name right now.",
						   describe_kind(req->kind, req->slots)),
				 errhint("Try again, or use another name.")));
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_KIND_MISMATCH),
			 errmsg("lease name \"%s\" is in use as %s",
					name, describe_kind(kind, slots)),
			 errdetail("This call asks for %s. A name keeps its kind and number of slots while any of its slots is held or in its lock delay.",
					   describe_kind(req->kind, req->slots)),
			 errhint("Acquire \"%s\" as %s, or use another name.",
					 name, describe_kind(kind, slots))));
}

/* Released, or expired past its lock delay: nobody holds it. */
static bool
free_now(TupleTableSlot *row, TimestampTz now)
{
	return !COL_ISNULL(row, COL_RELEASED_AT) || free_at(row) <= now;
}

/* the rows fencing_define_lease_name rewrites, in a subtransaction */
typedef struct KindRewrite
{
	const LeaseRequest *req;
	Relation	rel;
	TupleTableSlot *row;
	List	   *tids;			/* of the rows to rewrite */
	TimestampTz now;
	char		other_kind;
	int32		other_slots;
	LeaseNameWriter *writer;	/* out: a row locked by others */
} KindRewrite;

/*
 * In fencing_wait_within's subtransaction: lock every row, without
 * waiting, and only then rewrite them to the request's kind.  A row that
 * other transactions locked or wrote since the scan rolls everything back
 * (false) and names the row, for the caller to wait for its lockers: no
 * row of the name changes kind unless all of them do, so an acquire that
 * gives up waiting leaves no row of its kind beside one of the other.
 */
static bool
lock_and_rewrite_kind(void *arg)
{
	KindRewrite *kr = (KindRewrite *) arg;
	const LeaseRequest *req = kr->req;
	Relation	rel = kr->rel;
	TupleTableSlot *row = kr->row;
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	List	   *locked = NIL;
	ListCell   *lc;

	foreach(lc, kr->tids)
	{
		TM_FailureData tmfd;
		TM_Result	tm;

		tm = table_tuple_lock(rel, (ItemPointer) lfirst(lc), snapshot, row,
							  GetCurrentCommandId(true),
							  LockTupleNoKeyExclusive, LockWaitSkip, 0, &tmfd);
		if (tm == TM_Deleted)
			continue;			/* purged meanwhile: nothing to change */
		if (tm == TM_WouldBlock || tm == TM_Updated)
		{
			/* locked or written since the scan: undo, wait, look again */
			ItemPointerCopy((ItemPointer) lfirst(lc), &kr->writer->tid);
			ExecClearTuple(row);
			UnregisterSnapshot(snapshot);
			return false;
		}
		if (tm != TM_Ok)
			refuse_kind(req, kr->other_kind, kr->other_slots, true);
		slot_getallattrs(row);
		if (!free_now(row, kr->now))
			refuse_kind(req, kr->other_kind, kr->other_slots, false);
		locked = lappend(locked, lfirst(lc));
	}

	foreach(lc, locked)
	{
		RowChange	ch = {0};
		TM_FailureData tmfd;

		/* locked by us above: this fetches the version we locked */
		if (table_tuple_lock(rel, (ItemPointer) lfirst(lc), snapshot, row,
							 GetCurrentCommandId(true),
							 LockTupleNoKeyExclusive, LockWaitSkip, 0,
							 &tmfd) != TM_Ok)
			refuse_kind(req, kr->other_kind, kr->other_slots, true);
		slot_getallattrs(row);
		ch.slot = MakeSingleTupleTableSlot(RelationGetDescr(rel),
										   &TTSOpsVirtual);
		ExecClearTuple(ch.slot);
		memcpy(ch.slot->tts_values, row->tts_values,
			   ch.slot->tts_tupleDescriptor->natts * sizeof(Datum));
		memcpy(ch.slot->tts_isnull, row->tts_isnull,
			   ch.slot->tts_tupleDescriptor->natts * sizeof(bool));
		set_col(&ch, COL_KIND, CharGetDatum(req->kind), false);
		set_col(&ch, COL_SLOTS, Int32GetDatum(req->slots), false);
		if (!COL_ISNULL(row, COL_VALUE))
			set_col(&ch, COL_VALUE, (Datum) 0, true);
		ExecStoreVirtualTuple(ch.slot);
		ExecMaterializeSlot(ch.slot);
		/* a BEFORE trigger that skips it leaves the name as it was */
		if (!update_row(rel, snapshot, row, &ch))
			refuse_kind(req, kr->other_kind, kr->other_slots, true);
		ExecDropSingleTupleTableSlot(ch.slot);
	}
	/* the buffer pin is this subtransaction's */
	ExecClearTuple(row);
	UnregisterSnapshot(snapshot);
	return true;
}

/*
 * Make every row of the request's name of the kind and slot count the
 * request takes it as, before an acquire creates a row of the name, and
 * when it found a row of another kind.  The caller holds the name lock
 * (fencing_name_lock), so no other call of this runs for the name, and
 * rows of a name are created only under it; an acquire of an existing row
 * takes no name lock, but judges the row's kind and locks the row.
 *
 * Every row of the name is looked at as a dirty snapshot sees it, that is
 * with what other transactions are writing right now.  A row of another
 * kind refuses the request (LF021) when its committed version is held or
 * in its lock delay, whatever another transaction is doing to it.  A row
 * of another kind that cannot be judged yet, because another transaction
 * is inserting it, or writing or locking its free committed version (it
 * may be converting the name to the request's own kind, or taking it, or
 * rolling back), or has written an uncommitted version of another kind
 * over a committed one of the request's kind (converting the name away),
 * changes nothing: false, and *writer says what to wait for before
 * looking again, as a row lock would make the caller wait.
 * Otherwise every such row is free: all are locked, without waiting, and
 * then rewritten, in a subtransaction that is undone if one of them
 * cannot be locked.  A concurrent acquire of one of them either locked it
 * first (then we wait for it too) or waits for our lock and judges the
 * rewritten row.  So the rows of a name never have two kinds, and no held
 * slot coexists with a row of another kind.
 *
 * Also false, with the inserter in *writer, when another transaction is
 * inserting the request's own slot.  True when nothing held it up.
 */
bool
fencing_define_lease_name(const LeaseRequest *req, LeaseNameWriter *writer)
{
	FencingOwnerScope scope;
	Relation	rel;
	Relation	key;
	TupleTableSlot *row;
	SnapshotData dirty;
	IndexScanDesc scan;
	KindRewrite kr = {0};

	writer->xid = InvalidTransactionId;
	ItemPointerSetInvalid(&writer->tid);

	fencing_become_owner(&scope);
	rel = open_leases(RowExclusiveLock);
	refuse_unsupported(rel, true);
	key = index_open(layout.key_oid, RowExclusiveLock);
	row = table_slot_create(rel, NULL);

	kr.req = req;
	kr.rel = rel;
	kr.row = row;
	kr.writer = writer;
	CommandCounterIncrement();
	InitDirtySnapshot(dirty);
	kr.now = GetCurrentTimestamp();
	scan = begin_name_scan(rel, key, &dirty, req->name, -1);
	while (index_getnext_slot(scan, ForwardScanDirection, row))
	{
		slot_getallattrs(row);
		if (same_kind(row, req))
		{
			if (TransactionIdIsValid(dirty.xmin) &&
				DatumGetInt32(COL(row, COL_SLOT)) == req->slot)
				writer->xid = dirty.xmin;
			continue;
		}
		kr.other_kind = DatumGetChar(COL(row, COL_KIND));
		kr.other_slots = DatumGetInt32(COL(row, COL_SLOTS));
		if (TransactionIdIsValid(dirty.xmin))
		{
			/*
			 * Not committed: a fresh insert, or a new version (a conversion
			 * of a name that is still ours in its committed version, say),
			 * which cannot be judged until its transaction ends.  A held
			 * committed version, which the scan also returns, refuses.
			 */
			writer->xid = dirty.xmin;
			continue;
		}
		if (!free_now(row, kr.now))
			refuse_kind(req, kr.other_kind, kr.other_slots, false);
		if (TransactionIdIsValid(dirty.xmax))
		{
			/* free, and being written: taken, released or converted */
			writer->xid = dirty.xmax;
			continue;
		}
		/* a snapshot that cannot see the row cannot judge it */
		if (IsolationUsesXactSnapshot() &&
			!table_tuple_satisfies_snapshot(rel, row, GetTransactionSnapshot()))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update of lease \"%s\"",
							text_to_cstring(req->name)),
					 errhint("The transaction might succeed if retried.")));
		kr.tids = lappend(kr.tids, palloc(sizeof(ItemPointerData)));
		ItemPointerCopy(&row->tts_tid, (ItemPointer) llast(kr.tids));
	}
	index_endscan(scan);
	ExecClearTuple(row);

	/* every row is judged first: a held one refuses, even beside a busy one */
	if (!TransactionIdIsValid(writer->xid) && kr.tids != NIL &&
		fencing_wait_within(lock_and_rewrite_kind, &kr,
							FENCING_DEADLINE_NONE) == FENCING_WAIT_KEPT)
		CommandCounterIncrement();

	ExecDropSingleTupleTableSlot(row);
	index_close(key, NoLock);
	table_close(rel, NoLock);
	fencing_restore_user(&scope);
	return !TransactionIdIsValid(writer->xid) &&
		!ItemPointerIsValid(&writer->tid);
}

/* the row whose lockers fencing_wait_for_name_writer waits for */
typedef struct RowLockers
{
	Relation	rel;
	TupleTableSlot *row;
	ItemPointerData tid;
} RowLockers;

/*
 * In fencing_wait_within's subtransaction: wait until the row can be
 * locked, as an UPDATE would, then let go of it (false: rolled back).
 * PostgreSQL waits for every locker, one or a MultiXact of several.
 */
static bool
wait_for_row_lockers(void *arg)
{
	RowLockers *w = (RowLockers *) arg;
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	TM_FailureData tmfd;

	(void) table_tuple_lock(w->rel, &w->tid, snapshot, w->row,
							GetCurrentCommandId(true),
							LockTupleNoKeyExclusive, LockWaitBlock, 0, &tmfd);
	ExecClearTuple(w->row);
	UnregisterSnapshot(snapshot);
	return false;
}

/*
 * Wait, until the deadline, for what held up fencing_define_lease_name:
 * the transaction writing a row of the name, or the lockers of a row.
 * True if it gave way (look again), false if the deadline came first.
 * Call it without the name lock: the writer may need it.
 */
bool
fencing_wait_for_name_writer(const LeaseNameWriter *writer, int64 deadline)
{
	FencingOwnerScope scope;
	RowLockers	w;
	FencingWaitOutcome outcome;

	if (TransactionIdIsValid(writer->xid))
		return fencing_wait_for_xact(writer->xid, deadline);
	if (deadline != FENCING_DEADLINE_NONE &&
		deadline <= fencing_monotonic_usecs())
		return false;

	fencing_become_owner(&scope);
	w.rel = open_leases(RowShareLock);
	w.row = table_slot_create(w.rel, NULL);
	ItemPointerCopy(&writer->tid, &w.tid);
	outcome = fencing_wait_within(wait_for_row_lockers, &w, deadline);
	ExecDropSingleTupleTableSlot(w.row);
	table_close(w.rel, NoLock);
	fencing_restore_user(&scope);
	return outcome != FENCING_WAIT_TIMED_OUT;
}

/*
 * Refuse (LF021) a call for a name that is held, or inside its lock delay,
 * as another kind or slot count than the request's: the election calls
 * that take no slot (proclaim, resign, leader, observe) check their name
 * so, and a waiting acquire before it queues (lease.c, take_own).  A free
 * name may become anything, and is no election's yet.
 */
void
fencing_refuse_held_kind(const LeaseRequest *req)
{
	FencingOwnerScope scope;
	Relation	rel;
	Relation	key;
	TupleTableSlot *row;
	Snapshot	snapshot;
	IndexScanDesc scan;
	TimestampTz now;

	fencing_become_owner(&scope);
	rel = open_leases(AccessShareLock);
	refuse_unsupported(rel, false);
	key = index_open(layout.key_oid, AccessShareLock);
	row = table_slot_create(rel, NULL);

	snapshot = RegisterSnapshot(GetLatestSnapshot());
	now = GetCurrentTimestamp();
	scan = begin_name_scan(rel, key, snapshot, req->name, -1);
	while (index_getnext_slot(scan, ForwardScanDirection, row))
	{
		slot_getallattrs(row);
		if (!same_kind(row, req) && !free_now(row, now))
			refuse_kind(req, DatumGetChar(COL(row, COL_KIND)),
						DatumGetInt32(COL(row, COL_SLOTS)), false);
	}
	index_endscan(scan);
	UnregisterSnapshot(snapshot);

	ExecDropSingleTupleTableSlot(row);
	index_close(key, NoLock);
	table_close(rel, NoLock);
	fencing_restore_user(&scope);
}

/*
 * Read one row of a name without locking it: the row of "slot" (slot >=
 * 0), or the row whose current or previous token is "token" (slot < 0).
 * With the latest snapshot ("latest"), else the statement's (the
 * transaction's under REPEATABLE READ), judged by the clock reading "now".
 * False if there is no such row.
 *
 * A row that looks expired may be renewed by a commit under way, which
 * read its clock before "now" but is not visible yet: wait for such a
 * commit (lease_wait.c) and read again, so that "expired" is never followed
 * by the same token live.
 */
bool
fencing_read_lease_row(text *name, int32 slot, int64 token, bool latest,
					   TimestampTz now, LeaseRowState *state)
{
	FencingOwnerScope scope;
	Relation	rel;
	Relation	key;
	TupleTableSlot *row;
	Snapshot	snapshot;
	IndexScanDesc scan;
	bool		waited = false;

	memset(state, 0, sizeof(LeaseRowState));
	state->now = now;
	fencing_become_owner(&scope);
	rel = open_leases(AccessShareLock);
	refuse_unsupported(rel, false);
	key = index_open(layout.key_oid, AccessShareLock);
	row = table_slot_create(rel, NULL);

	/* see what this transaction did so far, as each SQL statement does */
	if (!latest)
		CommandCounterIncrement();
	for (;;)
	{
		snapshot = RegisterSnapshot(latest ? GetLatestSnapshot() :
									GetTransactionSnapshot());
		scan = begin_name_scan(rel, key, snapshot, name, slot);
		while (index_getnext_slot(scan, ForwardScanDirection, row))
		{
			slot_getallattrs(row);
			if (slot >= 0 ||
				DatumGetInt64(COL(row, COL_TOKEN)) == token ||
				(!COL_ISNULL(row, COL_PREV_TOKEN) &&
				 DatumGetInt64(COL(row, COL_PREV_TOKEN)) == token))
			{
				state->found = true;
				break;
			}
		}
		if (waited || !state->found || !COL_ISNULL(row, COL_RELEASED_AT) ||
			live(row, now) || RecoveryInProgress())
			break;
		index_endscan(scan);
		UnregisterSnapshot(snapshot);
		state->found = false;
		fencing_wait_for_keeping_commit(VARDATA_ANY(name),
										VARSIZE_ANY_EXHDR(name));
		waited = true;
	}
	if (state->found)
	{
		state->kind = DatumGetChar(COL(row, COL_KIND));
		state->slot = DatumGetInt32(COL(row, COL_SLOT));
		state->holder = TextDatumGetCString(COL(row, COL_HOLDER));
		state->holder_role = DatumGetObjectId(COL(row, COL_HOLDER_ROLE));
		state->token = DatumGetInt64(COL(row, COL_TOKEN));
		if (!COL_ISNULL(row, COL_VALUE))
			state->value = TextDatumGetCString(COL(row, COL_VALUE));
		state->acquired_at = DatumGetTimestampTz(COL(row, COL_ACQUIRED_AT));
		state->expires_at = DatumGetTimestampTz(COL(row, COL_EXPIRES_AT));
		state->released = !COL_ISNULL(row, COL_RELEASED_AT);
		state->live = live(row, now);
		if (state->released)
			state->end_reason = COL_ISNULL(row, COL_END_REASON) ?
				LEASE_END_RELEASED : DatumGetChar(COL(row, COL_END_REASON));
		if (!COL_ISNULL(row, COL_PREV_TOKEN))
			state->prev_token = DatumGetInt64(COL(row, COL_PREV_TOKEN));
		if (!COL_ISNULL(row, COL_PREV_END))
			state->prev_end = DatumGetChar(COL(row, COL_PREV_END));
	}
	index_endscan(scan);
	UnregisterSnapshot(snapshot);

	ExecDropSingleTupleTableSlot(row);
	index_close(key, NoLock);
	table_close(rel, NoLock);
	fencing_restore_user(&scope);
	return state->found;
}

/* Is the statement judged here in C?  The others are SQL (below). */
static bool
judged_in_c(LeaseStatement stmt)
{
	switch (stmt)
	{
		case LEASE_TAKE:
		case LEASE_TAKE_OWN:
		case LEASE_TAKEABLE:
		case LEASE_RENEW:
		case LEASE_RELEASE:
		case LEASE_LOCK:
		case LEASE_HOLDER_ROLE:
		case LEASE_FORCE_RELEASE:
		case LEASE_AVAILABLE_AT:
		case LEASE_PROCLAIM:
			return true;
		default:
			return false;
	}
}

/*
 * Under REPEATABLE READ and SERIALIZABLE a statement sees the lease as of
 * the transaction's snapshot.  When it answered "no" but the latest
 * committed row says "yes" (the probe qualifies now and did not in the
 * snapshot), the answer came from a stale row: raise a serialization
 * failure, as PostgreSQL does for a write to such a row.
 */
void
fencing_check_lease_snapshot(LeaseStatement probe, const LeaseRequest *req)
{
	Assert(!writes_row(probe) && probe != LEASE_LOCK);
	if (!IsolationUsesXactSnapshot())
		return;
	if (run_row_statement(probe, req, NULL, true, true) > 0 &&
		run_row_statement(probe, req, NULL, true, false) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of lease \"%s\"",
						text_to_cstring(req->name)),
				 errhint("The transaction might succeed if retried.")));
}

/*
 * Look at all the rows of a semaphore's name at once, with one snapshot
 * and one clock reading, as an acquire would judge them: which slot the
 * requester should try to take (its own, wherever it is; else the lowest
 * takeable ones below "slots"; else the lowest missing ones), and when the
 * next of the others comes free.  Takes no lock: the statement that then takes the
 * slot judges it again, locked.
 */
void
fencing_survey_lease_slots(const LeaseRequest *req, int32 slots,
						   LeaseSurvey *survey)
{
	FencingOwnerScope scope;
	Relation	rel;
	Relation	key;
	TupleTableSlot *row;
	Snapshot	snapshot;
	IndexScanDesc scan;
	TimestampTz now;
	int32		next = 0;		/* the lowest slot not seen yet */

	survey->own_slot = -1;
	survey->ntakeable = survey->nmissing = 0;
	survey->mismatch = false;
	TIMESTAMP_NOEND(survey->free_at);
	survey->prepared_xid = InvalidTransactionId;

	fencing_become_owner(&scope);
	rel = open_leases(AccessShareLock);
	refuse_unsupported(rel, false);
	key = index_open(layout.key_oid, AccessShareLock);
	row = table_slot_create(rel, NULL);

	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	now = GetCurrentTimestamp();
	scan = begin_name_scan(rel, key, snapshot, req->name, -1);
	while (index_getnext_slot(scan, ForwardScanDirection, row))
	{
		int32		s;

		slot_getallattrs(row);
		s = DatumGetInt32(COL(row, COL_SLOT));
		if (!same_kind(row, req))
			survey->mismatch = true;
		if (survey->own_slot < 0 && qualifies(LEASE_TAKE_OWN, row, req, now))
			survey->own_slot = s;
		if (s >= slots)
			continue;
		for (; next < s && survey->nmissing < LEASE_SURVEY_TAKEABLE; next++)
			survey->missing[survey->nmissing++] = next;
		next = s + 1;
		if (qualifies(LEASE_TAKE, row, req, now))
		{
			if (survey->ntakeable < LEASE_SURVEY_TAKEABLE)
				survey->takeable[survey->ntakeable++] = s;
		}
		else if (free_at(row) < survey->free_at)
			survey->free_at = free_at(row);
	}
	for (; next < slots && survey->nmissing < LEASE_SURVEY_TAKEABLE; next++)
		survey->missing[survey->nmissing++] = next;
	index_endscan(scan);
	UnregisterSnapshot(snapshot);
	/* all held: is a prepared transaction releasing one? */
	if (survey->own_slot < 0 && survey->ntakeable == 0 &&
		survey->nmissing == 0)
		survey->prepared_xid = row_changer(rel, key, req->name, -1, row, true);

	ExecDropSingleTupleTableSlot(row);
	index_close(key, NoLock);
	table_close(rel, NoLock);
	fencing_restore_user(&scope);
}

/*
 * A prepared transaction that is changing the row (name, slot) and has not
 * been committed or rolled back yet: InvalidTransactionId if none.  Its
 * COMMIT PREPARED wakes nobody (lease_wait.c): a waiter that sees the row
 * unchanged waits for that transaction to end instead of sleeping.
 */
TransactionId
fencing_lease_row_prepared(text *name, int32 slot)
{
	FencingOwnerScope scope;
	Relation	rel;
	Relation	key;
	TupleTableSlot *row;
	TransactionId prepared;

	fencing_become_owner(&scope);
	rel = open_leases(AccessShareLock);
	refuse_unsupported(rel, false);
	key = index_open(layout.key_oid, AccessShareLock);
	row = table_slot_create(rel, NULL);
	prepared = row_changer(rel, key, name, slot, row, true);
	ExecDropSingleTupleTableSlot(row);
	index_close(key, NoLock);
	table_close(rel, NoLock);
	fencing_restore_user(&scope);
	return prepared;
}

/*
 * Is another transaction creating, updating or deleting the row (name,
 * slot) right now?  A create that must not wait asks first: its INSERT
 * would wait for that transaction, and no statement can tell it not to.
 */
bool
fencing_lease_row_busy(const LeaseRequest *req)
{
	FencingOwnerScope scope;
	Relation	rel;
	Relation	key;
	TupleTableSlot *row;
	bool		busy;

	fencing_become_owner(&scope);
	rel = open_leases(AccessShareLock);
	refuse_unsupported(rel, false);
	key = index_open(layout.key_oid, AccessShareLock);
	row = table_slot_create(rel, NULL);
	busy = TransactionIdIsValid(row_changer(rel, key, req->name, req->slot,
											row, false));
	ExecDropSingleTupleTableSlot(row);
	index_close(key, NoLock);
	table_close(rel, NoLock);
	fencing_restore_user(&scope);
	return busy;
}

/* ---- the statements that are SQL: creating a row, purging old ones ---- */

/* what a statement's $n and result columns are: fields of LeaseRequest */
typedef enum LeaseField
{
	F_NONE,
	F_NAME,
	F_SLOT,
	F_HOLDER,
	F_ROLE,
	F_TTL,
	F_LOCK_DELAY,
	F_CUTOFF,
	F_TOKEN,
	F_TAKEOVER,
	F_KIND,
	F_SLOTS,
	F_VALUE
} LeaseField;

static const Oid field_types[] = {
	[F_NONE] = InvalidOid,
	[F_NAME] = TEXTOID,
	[F_SLOT] = INT4OID,
	[F_HOLDER] = TEXTOID,
	[F_ROLE] = REGROLEOID,
	[F_TTL] = INTERVALOID,
	[F_LOCK_DELAY] = INTERVALOID,
	[F_CUTOFF] = TIMESTAMPTZOID,
	[F_TOKEN] = INT8OID,
	[F_TAKEOVER] = BOOLOID,
	[F_KIND] = CHAROID,
	[F_SLOTS] = INT4OID,
	[F_VALUE] = TEXTOID,
};

#define MAX_LEASE_PARAMS	9
#define MAX_LEASE_RESULTS	2

typedef struct LeaseStatementDef
{
	const char *sql;
	LeaseField	params[MAX_LEASE_PARAMS];	/* $1, $2, ... */
	LeaseField	results[MAX_LEASE_RESULTS]; /* columns of the first row */
} LeaseStatementDef;

#define EQ " OPERATOR(pg_catalog.=) "
#define NOW "pg_catalog.clock_timestamp()"
#define PLUS " OPERATOR(pg_catalog.+) "

/* statements judged in C (above) have no SQL */
static const LeaseStatementDef lease_statements[NUM_LEASE_STATEMENTS] = {
	/*
	 * Create a lease; spends no token when the row exists.  The values are
	 * those LEASE_TAKE writes for a first acquire: one clock reading, read
	 * before the token is issued, for acquired_at and expires_at alike.
	 */
	[LEASE_CREATE] = {
		"WITH c AS MATERIALIZED (SELECT " NOW " AS now)"
		" INSERT INTO fencing.leases AS l"
		"       (name, slot, kind, slots, holder, holder_role, token,"
		"        acquired_at, expires_at, lock_delay, value, acquires)"
		" SELECT $1, $6, $7, $8, $2, $3, fencing.next_token(), c.now,"
		"        (c.now" PLUS "$4), $5, $9, 1"
		"   FROM c"
		"  WHERE NOT EXISTS (SELECT FROM fencing.leases AS o"
		"                     WHERE o.name" EQ "$1 AND o.slot" EQ "$6)"
		" ON CONFLICT (name, slot) DO NOTHING"
		" RETURNING l.token, l.takeover",
		{F_NAME, F_HOLDER, F_ROLE, F_TTL, F_LOCK_DELAY, F_SLOT, F_KIND,
		F_SLOTS, F_VALUE},
		{F_TOKEN, F_TAKEOVER}
	},
	/*
	 * $1 cutoff: delete leases free since before it, released or expired
	 * past their lock delay.  A set operation, so SQL: no lease can be
	 * acquired through a row deleted here, so it judges no holder's claim.
	 * It never waits for a row lock, so it takes part in no deadlock (with
	 * another purge, or a transaction acquiring several leases): a row
	 * locked by another transaction is in use right now, and left to the
	 * next purge.
	 */
	[LEASE_PURGE] = {
		"DELETE FROM fencing.leases AS l"
		" USING (SELECT f.name, f.slot FROM fencing.leases AS f"
		"         WHERE COALESCE(f.released_at,"
		"                        (f.expires_at" PLUS "f.lock_delay))"
		"               OPERATOR(pg_catalog.<) $1"
		"           FOR UPDATE OF f SKIP LOCKED) AS d"
		" WHERE l.name" EQ "d.name AND l.slot" EQ "d.slot",
		{F_CUTOFF}
	},
};

static SPIPlanPtr lease_plans[NUM_LEASE_STATEMENTS];

static SPIPlanPtr
lease_plan(LeaseStatement stmt)
{
	const LeaseStatementDef *def = &lease_statements[stmt];

	if (def->sql == NULL)
		elog(ERROR, "fencing statement %d has no SQL", (int) stmt);
	if (lease_plans[stmt] == NULL)
	{
		Oid			argtypes[MAX_LEASE_PARAMS];
		int			nargs = 0;
		SPIPlanPtr	plan;

		while (nargs < MAX_LEASE_PARAMS && def->params[nargs] != F_NONE)
		{
			argtypes[nargs] = field_types[def->params[nargs]];
			nargs++;
		}
		plan = SPI_prepare(def->sql, nargs, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for fencing statement %d: %s",
				 (int) stmt, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		lease_plans[stmt] = plan;
	}
	return lease_plans[stmt];
}

/* The statement's $1, $2, ... from the request. */
static void
request_params(LeaseStatement stmt, const LeaseRequest *req, Datum *values,
			   char *nulls)
{
	const LeaseStatementDef *def = &lease_statements[stmt];

	for (int i = 0; i < MAX_LEASE_PARAMS && def->params[i] != F_NONE; i++)
	{
		nulls[i] = ' ';
		switch (def->params[i])
		{
			case F_NAME:
				values[i] = PointerGetDatum(req->name);
				break;
			case F_SLOT:
				values[i] = Int32GetDatum(req->slot);
				break;
			case F_HOLDER:
				values[i] = PointerGetDatum(req->holder);
				break;
			case F_ROLE:
				values[i] = ObjectIdGetDatum(req->role);
				break;
			case F_TTL:
				values[i] = req->ttl;
				break;
			case F_LOCK_DELAY:
				values[i] = req->lock_delay;
				break;
			case F_CUTOFF:
				values[i] = TimestampTzGetDatum(req->cutoff);
				break;
			case F_KIND:
				values[i] = CharGetDatum(req->kind);
				break;
			case F_SLOTS:
				values[i] = Int32GetDatum(req->slots);
				break;
			case F_VALUE:
				values[i] = PointerGetDatum(req->value);
				nulls[i] = req->value == NULL ? 'n' : ' ';
				break;
			default:
				elog(ERROR, "fencing statement %d has a bad parameter %d",
					 (int) stmt, (int) def->params[i]);
		}
	}
}

/* The first row's columns into *result. */
static void
store_results(LeaseStatement stmt, LeaseResult *result)
{
	const LeaseStatementDef *def = &lease_statements[stmt];

	for (int i = 0; i < MAX_LEASE_RESULTS && def->results[i] != F_NONE; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0],
									  SPI_tuptable->tupdesc, i + 1, &isnull);

		switch (def->results[i])
		{
			case F_TOKEN:
				result->token = isnull ? 0 : DatumGetInt64(d);
				break;
			case F_TAKEOVER:
				result->takeover = !isnull && DatumGetBool(d);
				break;
			default:
				elog(ERROR, "fencing statement %d has a bad result %d",
					 (int) stmt, (int) def->results[i]);
		}
	}
}

/* Run one SQL statement as the owner; the number of rows it touched. */
static uint64
run_sql(LeaseStatement stmt, const LeaseRequest *req, LeaseResult *result)
{
	FencingOwnerScope scope;
	Datum		values[MAX_LEASE_PARAMS];
	char		nulls[MAX_LEASE_PARAMS];
	uint64		processed;
	int			rc;

	request_params(stmt, req, values, nulls);
	fencing_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	writing_leases = true;
	PG_TRY();
	{
		rc = SPI_execute_plan(lease_plan(stmt), values, nulls, false, 0);
	}
	PG_FINALLY();
	{
		writing_leases = false;
	}
	PG_END_TRY();
	if (rc < 0)
		elog(ERROR, "fencing statement %d failed: %s",
			 (int) stmt, SPI_result_code_string(rc));
	processed = SPI_processed;
	if (result != NULL && processed > 0)
		store_results(stmt, result);

	SPI_finish();
	fencing_restore_user(&scope);
	return processed;
}

typedef struct SqlRun
{
	LeaseStatement stmt;
	const LeaseRequest *req;
	LeaseResult *result;
	uint64		processed;
} SqlRun;

static bool
run_sql_kept(void *arg)
{
	SqlRun	   *r = (SqlRun *) arg;

	r->processed = run_sql(r->stmt, r->req, r->result);
	return true;
}

/*
 * Run a statement on fencing.leases.  Returns the number of rows it
 * touched (for a read: found qualifying); *result (if not NULL) gets what
 * the first one returned, and result->row_seen tells whether the lease
 * row was there but did not qualify.
 *
 * An INSERT that meets another transaction's uncommitted row of the same
 * key waits for that transaction, and no statement can ask it not to.  So
 * a create whose deadline has passed (a try-once acquire) first looks for
 * such a row, and does not insert if there is one (result->locked); and
 * every create waits in a subtransaction that ends at req->lock_deadline
 * (result->locked then), for a row that comes between the look and the
 * INSERT, so that an acquire's wait stays bounded.
 */
uint64
fencing_run_lease_statement(LeaseStatement stmt, const LeaseRequest *req,
							LeaseResult *result)
{
	SqlRun		r = {0};

	if (judged_in_c(stmt))
		return run_row_statement(stmt, req, result, false, false);
	if (result != NULL)
		result->row_seen = result->locked = false;
	if (stmt != LEASE_CREATE)
		return run_sql(stmt, req, result);
	if (req->lock_deadline != FENCING_DEADLINE_NONE &&
		req->lock_deadline <= fencing_monotonic_usecs() &&
		fencing_lease_row_busy(req))
	{
		if (result != NULL)
			result->locked = true;
		return 0;
	}
	r.stmt = stmt;
	r.req = req;
	r.result = result;
	if (fencing_wait_within(run_sql_kept, &r, req->lock_deadline) ==
		FENCING_WAIT_TIMED_OUT)
	{
		if (result != NULL)
			result->locked = true;
		return 0;
	}
	return r.processed;
}

/* Is this file writing fencing.leases right now?  (lease_arrival.c) */
bool
fencing_lease_table_writing(void)
{
	return writing_leases;
}
