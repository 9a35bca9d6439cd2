/*-------------------------------------------------------------------------
 *
 * lease_store.c
 *	  The statements that read and write fencing.leases.
 *
 * Each statement is prepared once per backend and run as the extension's
 * owner.  Expiry is judged with clock_timestamp() inside the statement, so
 * a call that waited for the row lock judges by the clock after the wait,
 * never by transaction start.  Every object and operator is named with
 * its schema, so the caller's search_path cannot change what runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "lease.h"

/* what a statement's $n and result columns are: fields of LeaseRequest */
typedef enum LeaseField
{
	F_NONE,
	F_NAME,
	F_HOLDER,
	F_ROLE,
	F_TOKEN,
	F_TTL,
	F_LOCK_DELAY,
	F_CUTOFF,
	F_TAKEOVER,
	F_AVAILABLE_AT
} LeaseField;

static const Oid field_types[] = {
	[F_NONE] = InvalidOid,
	[F_NAME] = TEXTOID,
	[F_HOLDER] = TEXTOID,
	[F_ROLE] = REGROLEOID,
	[F_TOKEN] = INT8OID,
	[F_TTL] = INTERVALOID,
	[F_LOCK_DELAY] = INTERVALOID,
	[F_CUTOFF] = TIMESTAMPTZOID,
	[F_TAKEOVER] = BOOLOID,
	[F_AVAILABLE_AT] = TIMESTAMPTZOID,
};

#define MAX_LEASE_PARAMS	5
#define MAX_LEASE_RESULTS	2

typedef struct LeaseStatementDef
{
	const char *sql;
	LeaseField	params[MAX_LEASE_PARAMS];	/* $1, $2, ... */
	LeaseField	results[MAX_LEASE_RESULTS]; /* columns of the first row */
} LeaseStatementDef;

#define EQ " OPERATOR(pg_catalog.=) "
/* on 13, access/xact.h brings utils/datetime.h, whose NOW means "now" */
#undef NOW
#define NOW "pg_catalog.clock_timestamp()"
#define PLUS " OPERATOR(pg_catalog.+) "
#define LIVE(alias) \
	alias ".released_at IS NULL AND " \
	alias ".expires_at OPERATOR(pg_catalog.>) " NOW
#define SAME_HOLDER(alias) \
	"(" alias ".holder" EQ "$2 AND " alias ".holder_role" EQ "$3)"
/* the old row was held by someone else and not released: it expired */
#define EXPIRED_TAKEOVER(alias) \
	"(" alias ".released_at IS NULL AND NOT " SAME_HOLDER(alias) ")"

/* $1 name, $2 holder, $3 role, $4 ttl, $5 lock delay */
#define ACQUIRE_ARGS \
	{F_NAME, F_HOLDER, F_ROLE, F_TTL, F_LOCK_DELAY}, {F_TOKEN, F_TAKEOVER}

static const LeaseStatementDef lease_statements[NUM_LEASE_STATEMENTS] = {
	/*
	 * Take a free row, one whose lease and lock delay have passed, or our
	 * own.  Returns the new token and whether this took over an expired lease
	 * of another holder.
	 */
	[LEASE_TAKE] = {
		"UPDATE fencing.leases AS l"
		"   SET holder = $2, holder_role = $3,"
		"       token = fencing.next_token(),"
		"       acquired_at = " NOW ","
		"       expires_at = (" NOW PLUS "$4),"
		"       released_at = NULL,"
		"       lock_delay = $5,"
		"       takeover = " EXPIRED_TAKEOVER("l") ","
		"       holder_changes = l.holder_changes" PLUS
		"           CASE WHEN " SAME_HOLDER("l") " THEN 0 ELSE 1 END,"
		"       acquires = l.acquires" PLUS "1,"
		"       expired_takeovers = l.expired_takeovers" PLUS
		"           CASE WHEN " EXPIRED_TAKEOVER("l") " THEN 1 ELSE 0 END"
		" WHERE l.name" EQ "$1"
		"   AND (l.released_at IS NOT NULL"
		"        OR (l.expires_at" PLUS "l.lock_delay)"
		"           OPERATOR(pg_catalog.<=) " NOW
		"        OR " SAME_HOLDER("l") ")"
		" RETURNING l.token, l.takeover",
		ACQUIRE_ARGS
	},
	/* Create a lease; spends no token when the row exists. */
	[LEASE_CREATE] = {
		"INSERT INTO fencing.leases AS l"
		"       (name, holder, holder_role, token, acquired_at, expires_at,"
		"        lock_delay, acquires)"
		" SELECT $1, $2, $3, fencing.next_token(), " NOW ", (" NOW PLUS "$4),"
		"        $5, 1"
		"  WHERE NOT EXISTS (SELECT FROM fencing.leases AS o"
		"                     WHERE o.name" EQ "$1)"
		" ON CONFLICT (name) DO NOTHING"
		" RETURNING l.token, l.takeover",
		ACQUIRE_ARGS
	},
	/* When may another holder take the lease?  NULL if free now. */
	[LEASE_AVAILABLE_AT] = {
		"SELECT CASE WHEN l.released_at IS NULL"
		"            THEN (l.expires_at" PLUS "l.lock_delay) END"
		"  FROM fencing.leases AS l WHERE l.name" EQ "$1",
		{F_NAME}, {F_AVAILABLE_AT}
	},
	/* $1 name, $2 token, $3 role, $4 ttl */
	[LEASE_RENEW] = {
		"UPDATE fencing.leases AS l"
		"   SET expires_at = (" NOW PLUS "$4),"
		"       renewals = l.renewals" PLUS "1"
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2"
		"   AND l.holder_role" EQ "$3 AND " LIVE("l"),
		{F_NAME, F_TOKEN, F_ROLE, F_TTL}
	},
	/* $1 name, $2 token, $3 role */
	[LEASE_RELEASE] = {
		"UPDATE fencing.leases AS l"
		"   SET released_at = " NOW ","
		"       releases = l.releases" PLUS "1"
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2"
		"   AND l.holder_role" EQ "$3 AND " LIVE("l"),
		{F_NAME, F_TOKEN, F_ROLE}
	},
	[LEASE_CHECK] = {
		"SELECT 1 FROM fencing.leases AS l"
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2"
		"   AND l.holder_role" EQ "$3 AND " LIVE("l")
		" FOR SHARE OF l",
		{F_NAME, F_TOKEN, F_ROLE}
	},
	/* the role holding a live lease with this token */
	[LEASE_HOLDER_ROLE] = {
		"SELECT l.holder_role FROM fencing.leases AS l"
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2 AND " LIVE("l"),
		{F_NAME, F_TOKEN}, {F_ROLE}
	},
	/* would LEASE_TAKE or LEASE_CREATE succeed?  $1 name, $2 holder, $3 role */
	[LEASE_TAKEABLE] = {
		"SELECT WHERE COALESCE("
		"   (SELECT l.released_at IS NOT NULL"
		"           OR (l.expires_at" PLUS "l.lock_delay)"
		"              OPERATOR(pg_catalog.<=) " NOW
		"           OR " SAME_HOLDER("l")
		"      FROM fencing.leases AS l WHERE l.name" EQ "$1),"
		"   true)",
		{F_NAME, F_HOLDER, F_ROLE}
	},
	/* $1 name: end a live lease, or a pending lock delay, whoever holds it */
	[LEASE_FORCE_RELEASE] = {
		"UPDATE fencing.leases AS l"
		"   SET released_at = " NOW ","
		"       releases = l.releases" PLUS "1"
		" WHERE l.name" EQ "$1 AND l.released_at IS NULL"
		"   AND (l.expires_at" PLUS "l.lock_delay)"
		"       OPERATOR(pg_catalog.>) " NOW
		" RETURNING l.token, l.holder",
		{F_NAME}, {F_TOKEN, F_HOLDER}
	},
	/* $1 cutoff: delete leases free (released, or expired) since before */
	[LEASE_PURGE] = {
		"DELETE FROM fencing.leases AS l"
		" WHERE COALESCE(l.released_at,"
		"                (l.expires_at" PLUS "l.lock_delay))"
		"       OPERATOR(pg_catalog.<) $1",
		{F_CUTOFF}
	},
};

static SPIPlanPtr lease_plans[NUM_LEASE_STATEMENTS];

/* true while one of our statements runs: see fencing_leases_restored */
bool		fencing_writing_leases = false;

static int
count_fields(const LeaseField *fields, int max)
{
	int			n = 0;

	while (n < max && fields[n] != F_NONE)
		n++;
	return n;
}

static SPIPlanPtr
lease_plan(LeaseStatement stmt)
{
	const LeaseStatementDef *def = &lease_statements[stmt];

	if (lease_plans[stmt] == NULL)
	{
		int			nargs = count_fields(def->params, MAX_LEASE_PARAMS);
		Oid			argtypes[MAX_LEASE_PARAMS];
		SPIPlanPtr	plan;

		for (int i = 0; i < nargs; i++)
			argtypes[i] = field_types[def->params[i]];
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
request_params(LeaseStatement stmt, const LeaseRequest *req, Datum *values)
{
	const LeaseStatementDef *def = &lease_statements[stmt];

	for (int i = 0; i < MAX_LEASE_PARAMS && def->params[i] != F_NONE; i++)
	{
		switch (def->params[i])
		{
			case F_NAME:
				values[i] = PointerGetDatum(req->name);
				break;
			case F_HOLDER:
				values[i] = PointerGetDatum(req->holder);
				break;
			case F_ROLE:
				values[i] = ObjectIdGetDatum(req->role);
				break;
			case F_TOKEN:
				values[i] = Int64GetDatum(req->token);
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
			default:
				elog(ERROR, "fencing statement %d has a bad parameter %d",
					 (int) stmt, (int) def->params[i]);
		}
	}
}

/* The first row's columns into *result; text is copied into "cxt". */
static void
store_results(LeaseStatement stmt, LeaseResult *result, MemoryContext cxt)
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
			case F_HOLDER:
				result->holder = isnull ? NULL :
					MemoryContextStrdup(cxt, TextDatumGetCString(d));
				break;
			case F_ROLE:
				result->holder_role = isnull ? InvalidOid : DatumGetObjectId(d);
				break;
			case F_AVAILABLE_AT:
				result->available_now = isnull;
				result->available_at = isnull ? 0 : DatumGetTimestampTz(d);
				break;
			default:
				elog(ERROR, "fencing statement %d has a bad result %d",
					 (int) stmt, (int) def->results[i]);
		}
	}
}

/*
 * Does the read-only statement find a row, in the transaction's snapshot
 * or in the latest one?
 */
static bool
lease_probe(LeaseStatement stmt, const LeaseRequest *req, bool latest)
{
	FencingOwnerScope scope;
	Datum		values[MAX_LEASE_PARAMS];
	int			rc;
	bool		found;

	request_params(stmt, req, values);
	fencing_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (latest)
		rc = SPI_execute_snapshot(lease_plan(stmt), values, NULL,
								  GetLatestSnapshot(), InvalidSnapshot,
								  true, false, 1);
	else
		rc = SPI_execute_plan(lease_plan(stmt), values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing probe %d failed: %s",
			 (int) stmt, SPI_result_code_string(rc));
	found = SPI_processed > 0;
	SPI_finish();
	fencing_restore_user(&scope);
	return found;
}

/*
 * Under REPEATABLE READ and SERIALIZABLE a statement sees the lease as of
 * the transaction's snapshot.  When it answered "no" but the latest
 * committed row says "yes" (probe finds a row now that the snapshot does
 * not), the answer came from a stale row: raise a serialization failure,
 * as PostgreSQL does for a write to such a row.
 */
void
fencing_check_lease_snapshot(LeaseStatement probe, const LeaseRequest *req)
{
	if (!IsolationUsesXactSnapshot())
		return;
	if (lease_probe(probe, req, true) && !lease_probe(probe, req, false))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of lease \"%s\"",
						text_to_cstring(req->name)),
				 errhint("The transaction might succeed if retried.")));
}

/*
 * Run one statement as the owner.  Returns the number of rows it touched;
 * the first row's result columns go to *result, if not NULL.
 */
static uint64
run_statement(LeaseStatement stmt, const LeaseRequest *req,
			  LeaseResult *result)
{
	MemoryContext cxt = CurrentMemoryContext;
	FencingOwnerScope scope;
	Datum		values[MAX_LEASE_PARAMS];
	uint64		processed;
	int			rc;

	request_params(stmt, req, values);
	fencing_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	fencing_writing_leases = true;
	PG_TRY();
	{
		rc = SPI_execute_plan(lease_plan(stmt), values, NULL, false, 0);
	}
	PG_FINALLY();
	{
		fencing_writing_leases = false;
	}
	PG_END_TRY();
	if (rc < 0)
		elog(ERROR, "fencing statement %d failed: %s",
			 (int) stmt, SPI_result_code_string(rc));
	processed = SPI_processed;
	if (result != NULL && processed > 0)
		store_results(stmt, result, cxt);

	SPI_finish();
	fencing_restore_user(&scope);
	return processed;
}

/*
 * Statements that lock the lease row and may find it does not qualify.
 * When an UPDATE or SELECT FOR SHARE meets a row that a concurrent
 * transaction changed, PostgreSQL locks the newest version before it
 * rechecks the WHERE clause, and keeps that lock when the recheck fails.
 * A waiter that lost a handover would then block the winner's renew and
 * release for as long as it keeps waiting.  So each such statement runs in
 * a subtransaction that is rolled back when it touched nothing.
 */
static bool
locks_rows(LeaseStatement stmt)
{
	switch (stmt)
	{
		case LEASE_TAKE:
		case LEASE_RENEW:
		case LEASE_RELEASE:
		case LEASE_CHECK:
		case LEASE_FORCE_RELEASE:
			return true;
		default:
			return false;
	}
}

/*
 * Run a statement on fencing.leases.  Returns the number of rows it
 * touched; *result (if not NULL) gets what the first one returned, and
 * result->row_seen tells whether the statement saw the lease row and left
 * it alone because it did not qualify (only the direct path knows; through
 * SPI it stays false).
 */
uint64
fencing_run_lease_statement(LeaseStatement stmt, const LeaseRequest *req,
							LeaseResult *result)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	uint64		processed = 0;

	if (result != NULL)
		result->row_seen = false;
	if (stmt == LEASE_TAKE || stmt == LEASE_RENEW || stmt == LEASE_RELEASE)
	{
		switch (fencing_lease_update_direct(stmt, req, result))
		{
			case LEASE_DIRECT_UPDATED:
				return 1;
			case LEASE_DIRECT_UNCHANGED:
				if (result != NULL)
					result->row_seen = true;
				return 0;
			case LEASE_DIRECT_MISSING:
				return 0;
			case LEASE_DIRECT_UNSUPPORTED:
				break;
		}
	}

	if (!locks_rows(stmt))
		return run_statement(stmt, req, result);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		processed = run_statement(stmt, req, result);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* leave the caller's subtransactions to the caller: end ours */
		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		ReThrowError(edata);
	}
	PG_END_TRY();

	if (processed > 0)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(oldcontext);
	CurrentResourceOwner = oldowner;
	return processed;
}
