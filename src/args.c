/*-------------------------------------------------------------------------
 *
 * args.c
 *	  Argument checks shared by the SQL-callable functions.  Every bad
 *	  argument is an error with a documented SQLSTATE, raised before
 *	  anything changes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "datatype/timestamp.h"
#include "utils/timestamp.h"

#include "fencing.h"

void
fencing_require_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
}

/* A lease name or holder: 1 to FENCING_MAX_NAME_BYTES bytes. */
text *
fencing_name_arg(FunctionCallInfo fcinfo, int argno, const char *what)
{
	text	   *t;

	fencing_require_arg(fcinfo, argno, what);
	t = PG_GETARG_TEXT_PP(argno);
	fencing_check_name(t, what);
	return t;
}

/* fencing_name_arg's checks on a value not null, from an array say */
void
fencing_check_name(text *t, const char *what)
{
	int			len = VARSIZE_ANY_EXHDR(t);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be empty", what)));
	if (len > FENCING_MAX_NAME_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", what),
				 errdetail("It is %d bytes long; the maximum is %d bytes.",
						   len, FENCING_MAX_NAME_BYTES)));
}

/*
 * A duration as plain microseconds: months count 30 days and days 24
 * hours, so daylight-saving changes never stretch or shrink it.  Must be
 * finite, at most max_usecs, and positive (or zero, if allow_zero).
 */
int64
fencing_duration_arg(FunctionCallInfo fcinfo, int argno, const char *what,
					 int64 max_usecs, const char *max_text, bool allow_zero)
{
	Interval   *iv;
	int64		total;
	int64		part;
	bool		overflow;

	fencing_require_arg(fcinfo, argno, what);
	iv = PG_GETARG_INTERVAL_P(argno);

#ifdef INTERVAL_NOT_FINITE
	if (INTERVAL_NOT_FINITE(iv))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be finite", what)));
#endif

	overflow = pg_mul_s64_overflow((int64) iv->month * DAYS_PER_MONTH,
								   USECS_PER_DAY, &total) ||
		pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &part) ||
		pg_add_s64_overflow(total, part, &total) ||
		pg_add_s64_overflow(total, iv->time, &total);
	if (overflow)
	{
		/* only the sign matters now: a double has the range for it */
		double		approx = ((double) iv->month * DAYS_PER_MONTH +
							  (double) iv->day) * USECS_PER_DAY + iv->time;

		total = approx > 0 ? PG_INT64_MAX : PG_INT64_MIN;
	}

	if (total < 0 || (total == 0 && !allow_zero))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 allow_zero ?
				 errmsg("%s must not be negative", what) :
				 errmsg("%s must be positive", what)));
	if (total > max_usecs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at most %s", what, max_text)));
	return total;
}

Datum
fencing_usecs_interval(int64 usecs)
{
	Interval   *iv = palloc0(sizeof(Interval));

	iv->time = usecs;
	return IntervalPGetDatum(iv);
}

/*
 * A token argument: NULL or non-positive is an error, not a quiet false;
 * such a token was never issued, and NULL would make a WHERE clause
 * silently match nothing.
 */
int64
fencing_token_arg(FunctionCallInfo fcinfo, int argno)
{
	fencing_require_arg(fcinfo, argno, "fencing token");
	fencing_check_token(PG_GETARG_INT64(argno));
	return PG_GETARG_INT64(argno);
}

/* fencing_token_arg's check on a value not null */
void
fencing_check_token(int64 token)
{
	if (token <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fencing token must be positive"),
				 errdetail("Tokens are issued from 1 upwards; %lld was never issued.",
						   (long long) token)));
}

/*
 * A token written as text (a setting, a JSON string): a positive decimal
 * bigint, nothing else: no sign, no spaces, no leading "+".
 */
bool
fencing_parse_token(const char *s, int64 *value)
{
	char	   *end;
	long long	v;

	if (s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v <= 0)
		return false;
	*value = (int64) v;
	return true;
}
