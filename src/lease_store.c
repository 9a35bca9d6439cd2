/*-------------------------------------------------------------------------
 *
 * lease_store.c
 *	  Running a statement on fencing.leases: the lease rules and the row
 *	  writes they govern are C (lease_row.c); creating a lease row and
 *	  purging old ones are SQL, here.
 *
 * Each SQL statement is prepared once per backend and run as the
 * extension's owner.  Every object and operator is named with its schema,
 * so the caller's search_path cannot change what runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/timestamp.h"

#include "lease.h"

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

/* statements judged in C (lease_row.c) have no SQL */
static const LeaseStatementDef lease_statements[NUM_LEASE_STATEMENTS] = {
	/*
	 * Create a lease; spends no token when the row exists.  The values are
	 * those LEASE_TAKE writes for a first acquire.
	 */
	[LEASE_CREATE] = {
		"INSERT INTO fencing.leases AS l"
		"       (name, slot, kind, slots, holder, holder_role, token,"
		"        acquired_at, expires_at, lock_delay, value, acquires)"
		" SELECT $1, $6, $7, $8, $2, $3, fencing.next_token(), " NOW ","
		"        (" NOW PLUS "$4), $5, $9, 1"
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

/* true while one of our statements runs: see fencing_leases_restored */
bool		fencing_writing_leases = false;

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

	fencing_writing_leases = true;
	PG_TRY();
	{
		rc = SPI_execute_plan(lease_plan(stmt), values, nulls, false, 0);
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

	if (fencing_lease_row_statement(stmt))
		return fencing_run_lease_row(stmt, req, result);
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
