/*-------------------------------------------------------------------------
 *
 * election.c
 *	  Leader election on top of leases: election_campaign, election_proclaim,
 *	  election_leader, election_observe and election_resign.
 *
 * An election is a lease of kind "election": slot 0 of its name, whose
 * holder (the candidate) is the leader while the lease is live, and whose
 * row carries the value the leader publishes (an endpoint, a shard map).
 * The shape is etcd's concurrency.Election (Campaign, Proclaim, Leader,
 * Observe, Resign) and client-go's leader election: leadership is a lease,
 * so the leader renews it with lease_renew, locks it with lease_lock,
 * learns why it lost it with lease_watch, and writes with its token, which
 * the resources fence as any other.  Nothing is kept per session.
 *
 * Observers wait (watch.c) until the leadership differs from what they
 * last saw: a committed campaign, proclaim, resign, force-release or
 * takeover wakes them (events.c), an expiry by its clock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "holder.h"
#include "stats.h"

/* documented limit on an election's value */
#define ELECTION_MAX_VALUE_BYTES	8192

FENCING_FUNCTION(fencing_election_campaign);
FENCING_FUNCTION(fencing_election_proclaim);
FENCING_FUNCTION(fencing_election_leader);
FENCING_FUNCTION(fencing_election_observe);
FENCING_FUNCTION(fencing_election_resign);

/* ---- arguments ---- */

static void
election_request(LeaseRequest *req, FunctionCallInfo fcinfo)
{
	req->name = fencing_name_arg(fcinfo, 0, "election name");
	req->kind = LEASE_KIND_ELECTION;
	req->slots = 1;
}

/* A value: not NULL (unless allow_null), at most ELECTION_MAX_VALUE_BYTES. */
static text *
value_arg(FunctionCallInfo fcinfo, int argno, const char *what,
		  bool allow_null)
{
	text	   *value;
	int			len;

	if (allow_null && PG_ARGISNULL(argno))
		return NULL;
	fencing_require_arg(fcinfo, argno, what);
	value = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(value);
	if (len > ELECTION_MAX_VALUE_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long", what),
				 errdetail("It is %d bytes long; the maximum is %d bytes.",
						   len, ELECTION_MAX_VALUE_BYTES)));
	return value;
}

/* ---- the leadership ---- */

/* Who leads, as one look at the election's row sees it. */
typedef struct Leadership
{
	bool		has_leader;
	char	   *candidate;
	char	   *value;
	int64		token;
	TimestampTz since;
	TimestampTz expires_at;
} Leadership;

/*
 * The leader: the live holder of the election's row.  An expired or
 * released row, or a name that is no election (now), has none.
 */
static void
read_leadership(text *name, bool latest, TimestampTz now, Leadership *l)
{
	LeaseRowState row;

	memset(l, 0, sizeof(Leadership));
	if (!fencing_read_lease_row(name, 0, 0, latest, now, &row) ||
		row.kind != LEASE_KIND_ELECTION || !row.live)
		return;
	l->has_leader = true;
	l->candidate = row.holder;
	l->value = row.value;
	l->token = row.token;
	l->since = row.acquired_at;
	l->expires_at = row.expires_at;
}

static bool
same_value(const char *a, const char *b)
{
	return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* Leadership as observers compare it: the leader's token and value. */
static bool
same_leadership(const Leadership *a, const Leadership *b)
{
	return a->has_leader == b->has_leader &&
		(!a->has_leader ||
		 (a->token == b->token && same_value(a->value, b->value)));
}

/*
 * The leader in a snapshot that REPEATABLE READ may hold: refused (40001)
 * when the latest committed row names another leader or value.
 */
static void
read_leadership_checked(text *name, Leadership *l)
{
	TimestampTz now = GetCurrentTimestamp();

	read_leadership(name, false, now, l);
	if (IsolationUsesXactSnapshot())
	{
		Leadership	latest;

		read_leadership(name, true, now, &latest);
		fencing_refuse_stale_answer(name, !same_leadership(l, &latest));
	}
}

/* (candidate, value, token, since, expires_at), all NULL without a leader */
static Datum
leadership_datum(FunctionCallInfo fcinfo, const Leadership *l)
{
	TupleDesc	desc;
	Datum		values[5] = {0};
	bool		nulls[5] = {true, true, true, true, true};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	if (l->has_leader)
	{
		values[0] = CStringGetTextDatum(l->candidate);
		nulls[0] = false;
		if (l->value != NULL)
		{
			values[1] = CStringGetTextDatum(l->value);
			nulls[1] = false;
		}
		values[2] = Int64GetDatum(l->token);
		values[3] = TimestampTzGetDatum(l->since);
		values[4] = TimestampTzGetDatum(l->expires_at);
		nulls[2] = nulls[3] = nulls[4] = false;
	}
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values,
											 nulls));
}

/* ---- the SQL functions ---- */

/*
 * election_campaign(election, candidate, value, ttl, wait): become the
 * leader, a lease of kind election, waiting up to "wait" in arrival order
 * as lease_acquire does; the leader's token, or NULL.  The candidate that
 * leads already gets a new token (its old one is stale) and publishes the
 * new value.
 */
Datum
fencing_election_campaign(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};
	int64		wait_usecs;
	int64		token;

	election_request(&req, fcinfo);
	req.holder = fencing_name_arg(fcinfo, 1, "candidate");
	req.value = value_arg(fcinfo, 2, "election value", false);
	req.role = GetUserId();
	wait_usecs = fencing_acquire_times_arg(fcinfo, 3, &req);
	PreventCommandIfReadOnly("fencing.election_campaign()");

	/* wakes the election's observers at commit */
	token = fencing_acquire(&req, wait_usecs);
	if (token == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(token);
}

/*
 * election_proclaim(election, token, value): the leader publishes a new
 * value.  False for a token that is not the live leader's; 42501 for
 * another role's leader, as lease_renew.
 */
Datum
fencing_election_proclaim(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};

	election_request(&req, fcinfo);
	req.token = fencing_token_arg(fcinfo, 1);
	req.value = value_arg(fcinfo, 2, "election value", false);
	PreventCommandIfReadOnly("fencing.election_proclaim()");
	fencing_refuse_held_kind(&req);

	if (fencing_run_as_holder(LEASE_PROCLAIM, &req, NULL) == 0)
		PG_RETURN_BOOL(false);
	fencing_wake_waiters_at_commit(VARDATA_ANY(req.name),
								   VARSIZE_ANY_EXHDR(req.name));
	fencing_notify("proclaim", VARDATA_ANY(req.name),
				   VARSIZE_ANY_EXHDR(req.name), req.token, NULL);
	/* the leader is current here, but what it fenced may be lost */
	fencing_check_token_band(req.token);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

/*
 * election_resign(election, token): the leader steps down; the election
 * is free at once, and its waiting candidates and observers are woken at
 * commit.  False for a token that is not the live leader's.
 */
Datum
fencing_election_resign(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};

	election_request(&req, fcinfo);
	req.token = fencing_token_arg(fcinfo, 1);
	PreventCommandIfReadOnly("fencing.election_resign()");
	fencing_refuse_held_kind(&req);

	if (fencing_run_as_holder(LEASE_RELEASE, &req, NULL) == 0)
		PG_RETURN_BOOL(false);
	/* a resignation is a release, and counted as one */
	fencing_stats_count(FENCING_STAT_RELEASES);
	fencing_lease_freed(req.name, req.token, "release", NULL);
	ForceSyncCommit();
	PG_RETURN_BOOL(true);
}

/* election_leader(election): the leader now, or one row of NULLs. */
Datum
fencing_election_leader(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};
	Leadership	l;

	election_request(&req, fcinfo);
	fencing_refuse_held_kind(&req);
	read_leadership_checked(req.name, &l);
	PG_RETURN_DATUM(leadership_datum(fcinfo, &l));
}

typedef struct ObserveState
{
	text	   *name;
	bool		known_leader;	/* known_token was not NULL */
	int64		known_token;
	char	   *known_value;	/* NULL if NULL */
	Leadership	current;
} ObserveState;

/* Does the leadership differ from what the observer knows? */
static bool
differs_from_known(const ObserveState *o)
{
	const Leadership *l = &o->current;

	if (l->has_leader != o->known_leader)
		return true;
	if (l->has_leader && l->token != o->known_token)
		return true;
	return !same_value(l->has_leader ? l->value : NULL, o->known_value);
}

static bool
leadership_changed(void *arg, TimestampTz *until, int32 *slot)
{
	ObserveState *o = (ObserveState *) arg;

	read_leadership(o->name, false, GetCurrentTimestamp(), &o->current);
	if (differs_from_known(o))
		return true;
	if (o->current.has_leader)
		*until = o->current.expires_at;
	*slot = 0;
	return false;
}

/*
 * election_observe(election, known_token, known_value, wait): the
 * leadership as soon as it differs from (known_token, known_value), the
 * leader the caller last saw (NULL, NULL: none): a new leader, a new value
 * (proclaim), a resignation or an expiry.  Waits up to "wait"; then
 * returns the unchanged leadership.  A renew is no change.
 */
Datum
fencing_election_observe(PG_FUNCTION_ARGS)
{
	LeaseRequest req = {0};
	ObserveState o = {0};
	text	   *known_value;
	int64		wait_usecs;

	election_request(&req, fcinfo);
	o.name = req.name;
	o.known_leader = !PG_ARGISNULL(1);
	if (o.known_leader)
		o.known_token = fencing_token_arg(fcinfo, 1);
	known_value = value_arg(fcinfo, 2, "known value", true);
	if (known_value != NULL)
		o.known_value = text_to_cstring(known_value);
	wait_usecs = fencing_watch_wait_arg(fcinfo, 3);
	fencing_refuse_held_kind(&req);

	read_leadership_checked(o.name, &o.current);
	if (!differs_from_known(&o) && wait_usecs > 0)
		fencing_wait_for_change(o.name, wait_usecs, leadership_changed, &o);
	PG_RETURN_DATUM(leadership_datum(fcinfo, &o.current));
}
