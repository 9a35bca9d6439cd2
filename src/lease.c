/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  lease_acquire, lease_renew, lease_release and lease_check.
 *
 * Each call is one or two statements on fencing.leases, prepared once per
 * backend and run as the extension's owner.  Expiry is judged with
 * clock_timestamp() inside the statement, so a call that waited for the
 * row lock judges by the clock after the wait, never by transaction start.
 * Every statement names its objects and operators with their schema, so
 * the caller's search_path cannot change what runs.
 *
 *-------------------------------------------------------------------------
 */
#include "fencing.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/* documented limits */
#define LEASE_MAX_NAME_BYTES	256
#define LEASE_MAX_TTL_USECS		(INT64CONST(86400) * USECS_PER_SEC) /* 1 day */

FENCING_FUNCTION(fencing_lease_acquire);
FENCING_FUNCTION(fencing_lease_renew);
FENCING_FUNCTION(fencing_lease_release);
FENCING_FUNCTION(fencing_lease_check);

typedef enum LeaseStatement
{
	STMT_TAKE,					/* take over an existing free row */
	STMT_CREATE,				/* insert a new lease */
	STMT_RENEW,
	STMT_RELEASE,
	STMT_CHECK,
	STMT_ROLE,					/* role holding a live lease with a token */
	NUM_LEASE_STATEMENTS
} LeaseStatement;

typedef struct LeaseStatementDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[4];
} LeaseStatementDef;

#define EQ " OPERATOR(pg_catalog.=) "
#define NOW "pg_catalog.clock_timestamp()"
#define PLUS " OPERATOR(pg_catalog.+) "
#define LIVE(alias) \
	alias ".released_at IS NULL AND " \
	alias ".expires_at OPERATOR(pg_catalog.>) " NOW

static const LeaseStatementDef lease_statements[NUM_LEASE_STATEMENTS] = {
	[STMT_TAKE] = {
		"UPDATE fencing.leases AS l"
		"   SET holder = $2, holder_role = $3,"
		"       token = fencing.next_token(),"
		"       acquired_at = " NOW ","
		"       expires_at = " NOW PLUS "$4,"
		"       released_at = NULL,"
		"       holder_changes = l.holder_changes" PLUS
		"           CASE WHEN l.holder" EQ "$2 AND l.holder_role" EQ "$3"
		"                THEN 0 ELSE 1 END"
		" WHERE l.name" EQ "$1"
		"   AND (l.released_at IS NOT NULL"
		"        OR l.expires_at OPERATOR(pg_catalog.<=) " NOW
		"        OR (l.holder" EQ "$2 AND l.holder_role" EQ "$3))"
		" RETURNING l.token",
		4, {TEXTOID, TEXTOID, REGROLEOID, INTERVALOID}
	},
	[STMT_CREATE] = {
		"INSERT INTO fencing.leases AS l"
		"       (name, holder, holder_role, token, acquired_at, expires_at)"
		" SELECT $1, $2, $3, fencing.next_token(), " NOW ", " NOW PLUS "$4"
		"  WHERE NOT EXISTS (SELECT FROM fencing.leases AS o"
		"                     WHERE o.name" EQ "$1)"
		" ON CONFLICT (name) DO NOTHING"
		" RETURNING l.token",
		4, {TEXTOID, TEXTOID, REGROLEOID, INTERVALOID}
	},
	[STMT_RENEW] = {
		"UPDATE fencing.leases AS l"
		"   SET expires_at = " NOW PLUS "$4"
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2"
		"   AND l.holder_role" EQ "$3 AND " LIVE("l"),
		4, {TEXTOID, INT8OID, REGROLEOID, INTERVALOID}
	},
	[STMT_RELEASE] = {
		"UPDATE fencing.leases AS l"
		"   SET released_at = " NOW
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2"
		"   AND l.holder_role" EQ "$3 AND " LIVE("l"),
		3, {TEXTOID, INT8OID, REGROLEOID}
	},
	[STMT_CHECK] = {
		"SELECT 1 FROM fencing.leases AS l"
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2"
		"   AND l.holder_role" EQ "$3 AND " LIVE("l")
		" FOR SHARE OF l",
		3, {TEXTOID, INT8OID, REGROLEOID}
	},
	[STMT_ROLE] = {
		"SELECT l.holder_role FROM fencing.leases AS l"
		" WHERE l.name" EQ "$1 AND l.token" EQ "$2 AND " LIVE("l"),
		2, {TEXTOID, INT8OID}
	},
};

static SPIPlanPtr lease_plans[NUM_LEASE_STATEMENTS];

/*
 * Run one statement as the owner; returns the number of rows it touched
 * and, when "result" is given, the first column it returned.
 */
static uint64
run_lease_statement(LeaseStatement stmt, Datum *values, Datum *result)
{
	const LeaseStatementDef *def = &lease_statements[stmt];
	FencingOwnerScope scope;
	uint64		processed;
	int			rc;

	fencing_become_owner(&scope);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	if (lease_plans[stmt] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(def->sql, def->nargs,
									   (Oid *) def->argtypes);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for fencing statement %d: %s",
				 (int) stmt, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		lease_plans[stmt] = plan;
	}

	rc = SPI_execute_plan(lease_plans[stmt], values, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "fencing statement %d failed: %s",
			 (int) stmt, SPI_result_code_string(rc));
	processed = SPI_processed;

	/* by-value results only (bigint, regrole): safe after SPI_finish */
	if (result != NULL && processed == 1)
	{
		bool		isnull;

		*result = SPI_getbinval(SPI_tuptable->vals[0],
								SPI_tuptable->tupdesc, 1, &isnull);
	}

	SPI_finish();
	fencing_restore_user(&scope);
	return processed;
}

/* ---- argument checks: every bad argument is an error, nothing changes ---- */

static void
require_not_null(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
}

static Datum
checked_identifier(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;
	int			len;

	require_not_null(fcinfo, argno, what);
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > LEASE_MAX_NAME_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", what),
				 errdetail("It is %d bytes long; the maximum is %d bytes.",
						   len, LEASE_MAX_NAME_BYTES)));
	return PointerGetDatum(t);
}

/*
 * A TTL is a positive, finite duration of at most one day.  Months count
 * 30 days and days 24 hours; the result is a plain number of microseconds,
 * so daylight-saving changes never stretch or shrink a lease.
 */
static Datum
checked_ttl(FunctionCallInfo fcinfo, int argno)
{
	Interval   *ttl;
	Interval   *usecs;
	int64		total;
	int64		part;
	bool		overflow;

	require_not_null(fcinfo, argno, "lease TTL");
	ttl = PG_GETARG_INTERVAL_P(argno);

#ifdef INTERVAL_NOT_FINITE
	if (INTERVAL_NOT_FINITE(ttl))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease TTL must be finite")));
#endif

	overflow = pg_mul_s64_overflow((int64) ttl->month * DAYS_PER_MONTH,
								   USECS_PER_DAY, &total);
	overflow = overflow ||
		pg_mul_s64_overflow((int64) ttl->day, USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(total, part, &total) ||
		pg_add_s64_overflow(total, ttl->time, &total);

	if (overflow)
	{
		/* only the sign matters now: a double has the range for it */
		double		approx = ((double) ttl->month * DAYS_PER_MONTH +
							  (double) ttl->day) * USECS_PER_DAY + ttl->time;

		total = approx > 0 ? PG_INT64_MAX : 0;
	}
	if (total <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease TTL must be positive")));
	if (total > LEASE_MAX_TTL_USECS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease TTL must be at most 1 day")));

	usecs = palloc0(sizeof(Interval));
	usecs->time = total;
	return IntervalPGetDatum(usecs);
}

static Datum
checked_token(FunctionCallInfo fcinfo, int argno)
{
	int64		token;

	require_not_null(fcinfo, argno, "fencing token");
	token = PG_GETARG_INT64(argno);
	if (token <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fencing token must be positive"),
				 errdetail("Tokens are issued from 1 upwards; %lld was never issued.",
						   (long long) token)));
	return Int64GetDatum(token);
}

/* ---- who may act on a lease ---- */

/* Superusers and members of the role fencing_admin, if it exists. */
static bool
is_lease_admin(Oid roleid)
{
	Oid			admin;

	if (superuser_arg(roleid))
		return true;
	admin = get_role_oid("fencing_admin", true);
	return OidIsValid(admin) && has_privs_of_role(roleid, admin);
}

/*
 * Run a renew, release or check statement as the calling role.  When it
 * finds nothing, see whether the token is live but held by another role:
 * that is refused, unless the caller is a lease admin, who then acts with
 * the holder's role.  values[2] is the role slot.
 */
static uint64
run_as_holder(LeaseStatement stmt, Datum *values)
{
	Oid			caller = GetUserId();
	Datum		holder_role;
	uint64		processed;

	values[2] = ObjectIdGetDatum(caller);
	processed = run_lease_statement(stmt, values, NULL);
	if (processed > 0 ||
		run_lease_statement(STMT_ROLE, values, &holder_role) == 0 ||
		DatumGetObjectId(holder_role) == caller)
		return processed;

	if (!is_lease_admin(caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("lease \"%s\" is held by another role",
						text_to_cstring(DatumGetTextPP(values[0]))),
				 errdetail("Only the role that acquired a lease may renew, release or check it."),
				 errhint("Members of role fencing_admin may act on any lease.")));
	values[2] = holder_role;
	return run_lease_statement(stmt, values, NULL);
}

/* ---- the SQL-callable functions ---- */

/*
 * lease_acquire(name, holder, ttl, wait) returns a new token, or NULL when
 * another holder's unexpired lease stands.  "Another holder" is a different
 * holder name, or the same name acquired by a different role.
 */
Datum
fencing_lease_acquire(PG_FUNCTION_ARGS)
{
	Datum		values[4];
	Datum		token = (Datum) 0;
	Interval   *wait;

	values[0] = checked_identifier(fcinfo, 0, "lease name");
	values[1] = checked_identifier(fcinfo, 1, "lease holder");
	values[2] = ObjectIdGetDatum(GetUserId());
	values[3] = checked_ttl(fcinfo, 2);

	require_not_null(fcinfo, 3, "wait interval");
	wait = PG_GETARG_INTERVAL_P(3);
	if (wait->month < 0 || wait->day < 0 || wait->time < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait interval must not be negative")));
	if (wait->month != 0 || wait->day != 0 || wait->time != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("waiting for a lease is not supported yet"),
				 errhint("Call fencing.lease_acquire with wait => '0' and retry.")));

	/*
	 * Take a free, expired or own row; else create it (no token is spent
	 * when the row exists).  A concurrent creator makes the insert do
	 * nothing: look once more, since that creator may be the same holder
	 * in another session, then give up.
	 */
	if (run_lease_statement(STMT_TAKE, values, &token) == 0 &&
		run_lease_statement(STMT_CREATE, values, &token) == 0 &&
		run_lease_statement(STMT_TAKE, values, &token) == 0)
		PG_RETURN_NULL();

	/* an acknowledged lease survives a crash, whatever synchronous_commit */
	ForceSyncCommit();
	PG_RETURN_DATUM(token);
}

Datum
fencing_lease_renew(PG_FUNCTION_ARGS)
{
	Datum		values[4];

	values[0] = checked_identifier(fcinfo, 0, "lease name");
	values[1] = checked_token(fcinfo, 1);
	values[3] = checked_ttl(fcinfo, 2);

	if (run_as_holder(STMT_RENEW, values) == 0)
		PG_RETURN_BOOL(false);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

Datum
fencing_lease_release(PG_FUNCTION_ARGS)
{
	Datum		values[3];

	values[0] = checked_identifier(fcinfo, 0, "lease name");
	values[1] = checked_token(fcinfo, 1);

	if (run_as_holder(STMT_RELEASE, values) == 0)
		PG_RETURN_BOOL(false);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

/*
 * True iff the token is the lease's current one and the lease is live.
 * The row stays share-locked until the caller's transaction ends, so no
 * takeover can commit in between: "check, then write" is atomic.
 */
Datum
fencing_lease_check(PG_FUNCTION_ARGS)
{
	Datum		values[3];

	values[0] = checked_identifier(fcinfo, 0, "lease name");
	values[1] = checked_token(fcinfo, 1);

	PG_RETURN_BOOL(run_as_holder(STMT_CHECK, values) == 1);
}
