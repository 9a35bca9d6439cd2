/*-------------------------------------------------------------------------
 *
 * watch.c
 *	  lease_watch: why a token is no longer its lease's current one, at
 *	  once or as soon as it stops being current; and the wait that
 *	  lease_watch and election_observe share.
 *
 * A token stops being current when its lease is released, force-released
 * or taken over (committed writes, which wake the watchers at commit:
 * lease_wait.c), or when it expires, which has no writer: the watcher sleeps
 * until the lease's expires_at at the latest, and looks again.  In between
 * it sleeps on its latch and costs nothing.  Each lease row keeps how its
 * current token's tenure ended and the token before it with how that one
 * ended (lease_table.c), so the reason is known for the current token and
 * the one it replaced; for older tokens it is "unknown".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "holder.h"

#define WATCH_MAX_WAIT_USECS	(INT64CONST(86400) * USECS_PER_SEC)

FENCING_FUNCTION(fencing_lease_watch);

/*
 * The wait of lease_watch and election_observe: 0 to 1 day.  A wait
 * needs fresh snapshots (READ COMMITTED) and commits that wake it (not a
 * standby, where nothing commits).
 */
int64
fencing_watch_wait_arg(FunctionCallInfo fcinfo, int argno)
{
	int64		wait_usecs = fencing_duration_arg(fcinfo, argno, "wait interval",
												  WATCH_MAX_WAIT_USECS,
												  "1 day", true);

	if (wait_usecs > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("waiting for a lease to change requires the READ COMMITTED isolation level"),
				 errhint("Call it with wait => '0', or outside this transaction.")));
	if (wait_usecs > 0 && RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot wait for a lease to change during recovery"),
				 errdetail("Lease changes are committed on the primary, and only wake waiters there."),
				 errhint("Wait on the primary, or call it with wait => '0'.")));
	return wait_usecs;
}

/*
 * Under REPEATABLE READ and SERIALIZABLE an answer read with the
 * transaction's snapshot may be stale: when the latest committed row
 * gives another answer ("differs"), raise a serialization failure rather
 * than answer from the old row, as the lease functions do.
 */
void
fencing_refuse_stale_answer(text *name, bool differs)
{
	if (differs)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of lease \"%s\"",
						text_to_cstring(name)),
				 errhint("The transaction might succeed if retried.")));
}

/*
 * Wait until changed() says the lease row changed, or until wait_usecs
 * have passed on the monotonic clock.  Registered for wake-ups first
 * (lease_wait.c), so a change committed after any look wakes us; otherwise we
 * sleep until the time changed() names (an expiry, on the wall clock,
 * which only shortens the sleep), or the deadline.
 *
 * A change made in a prepared transaction wakes us at PREPARE, but nothing
 * wakes us at its COMMIT PREPARED: when changed() names such a transaction
 * (the row unchanged as committed, but a prepared transaction changing
 * it), we wait for that transaction to end instead of sleeping, as the
 * head of a lease's queue does (lease.c).
 */
void
fencing_wait_for_change(text *name, int64 wait_usecs,
						FencingRowChanged changed, void *arg)
{
	const char *nm = VARDATA_ANY(name);
	int			len = VARSIZE_ANY_EXHDR(name);
	int64		deadline = fencing_monotonic_usecs() + wait_usecs;

	fencing_waiter_register(nm, len);
	for (;;)
	{
		TimestampTz until = DT_NOEND;
		int32		slot = -1;
		int64		left;
		int64		sleep_usecs;
		TransactionId prepared;

		if (changed(arg, &until, &slot))
			break;
		left = deadline - fencing_monotonic_usecs();
		if (left <= 0)
			break;
		sleep_usecs = left;
		if (until != DT_NOEND)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (until <= now)
				sleep_usecs = 0;
			else if (until - now < sleep_usecs)
				sleep_usecs = until - now;
		}
		prepared = sleep_usecs > 0 && slot >= 0 ?
			fencing_lease_row_prepared(name, slot) : InvalidTransactionId;
		if (TransactionIdIsValid(prepared))
			(void) fencing_wait_for_xact(prepared,
										 fencing_monotonic_usecs() + sleep_usecs);
		else if (sleep_usecs > 0)
			fencing_waiter_sleep((long) ((sleep_usecs + 999) / 1000));
		else
			CHECK_FOR_INTERRUPTS();
	}
	fencing_waiter_unregister(nm, len);
}

/* ---- lease_watch ---- */

/* why a token is not current, or that it is */
typedef enum TokenFate
{
	FATE_CURRENT,
	FATE_EXPIRED,
	FATE_TAKEN_OVER,
	FATE_RELEASED,
	FATE_FORCE_RELEASED,
	FATE_LOST_AT_FAILOVER,
	FATE_UNKNOWN
} TokenFate;

static const char *const fate_names[] = {
	[FATE_CURRENT] = "current",
	[FATE_EXPIRED] = "expired",
	[FATE_TAKEN_OVER] = "taken_over",
	[FATE_RELEASED] = "released",
	[FATE_FORCE_RELEASED] = "force_released",
	[FATE_LOST_AT_FAILOVER] = "lost_at_failover",
	[FATE_UNKNOWN] = "unknown",
};

typedef struct WatchState
{
	text	   *name;
	int64		token;
	int32		slot;			/* the row that knows the token, -1 if none */
	TokenFate	fate;
	int64		successor;		/* the token that replaced it, 0 if none */
	TimestampTz expires_at;		/* FATE_CURRENT: its expiry */
} WatchState;

static TokenFate
ended_by(char end)
{
	switch (end)
	{
		case LEASE_END_RELEASED:
			return FATE_RELEASED;
		case LEASE_END_FORCE_RELEASED:
			return FATE_FORCE_RELEASED;
		case LEASE_END_TAKEN_OVER:
			return FATE_TAKEN_OVER;
		default:
			return FATE_UNKNOWN;
	}
}

/* The token's fate as a snapshot (the latest, or the statement's) sees it. */
static void
judge_token(WatchState *w, bool latest, TimestampTz now)
{
	LeaseRowState row;

	w->fate = FATE_UNKNOWN;
	w->successor = 0;
	w->slot = -1;
	if (fencing_read_lease_row(w->name, -1, w->token, latest, now, &row))
	{
		w->slot = row.slot;
		if (row.token == w->token)
		{
			w->expires_at = row.expires_at;
			w->fate = row.released ? ended_by(row.end_reason) :
				row.live ? FATE_CURRENT : FATE_EXPIRED;
		}
		else
		{
			/* its successor is the row's token */
			w->fate = ended_by(row.prev_end);
			w->successor = row.token;
		}
	}
}

/*
 * A token that LF005 refuses was lost at a failover, whatever its row says
 * now: one from before this database's band, or one above every token it
 * issued (another history's, which no row here knows).  The row's own
 * record of a release or a takeover says more, so it only replaces
 * "current" and "unknown".
 */
static void
judge_band(WatchState *w)
{
	if ((w->fate == FATE_CURRENT || w->fate == FATE_UNKNOWN) &&
		fencing_token_loss(w->token) != TOKEN_NOT_LOST)
		w->fate = FATE_LOST_AT_FAILOVER;
}

static bool
token_changed(void *arg, TimestampTz *until, int32 *slot)
{
	WatchState *w = (WatchState *) arg;

	judge_token(w, false, GetCurrentTimestamp());
	/* a band entry wakes us too (events.c) */
	judge_band(w);
	if (w->fate != FATE_CURRENT)
		return true;
	*until = w->expires_at;
	*slot = w->slot;
	return false;
}

/*
 * lease_watch(name, token, wait) returns (reason, successor): why the
 * token is not the current token of its lease (or semaphore slot, or
 * election), or "current" when it still is once "wait" has passed.  With
 * wait > 0 it returns as soon as the token stops being current: a release,
 * force-release or takeover wakes it at commit, an expiry by its clock.
 * "successor" is the token that replaced it, when one did.  A read: any
 * role may watch any token; nothing changes.
 */
Datum
fencing_lease_watch(PG_FUNCTION_ARGS)
{
	WatchState	w = {0};
	int64		wait_usecs;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	TimestampTz now;

	w.name = fencing_name_arg(fcinfo, 0, "lease name");
	w.token = fencing_token_arg(fcinfo, 1);
	wait_usecs = fencing_watch_wait_arg(fcinfo, 2);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	now = GetCurrentTimestamp();
	judge_token(&w, false, now);
	if (IsolationUsesXactSnapshot())
	{
		WatchState	latest = w;

		judge_token(&latest, true, now);
		fencing_refuse_stale_answer(w.name, latest.fate != w.fate ||
									latest.successor != w.successor);
	}
	judge_band(&w);
	if (w.fate == FATE_CURRENT && wait_usecs > 0)
	{
		fencing_wait_for_change(w.name, wait_usecs, token_changed, &w);
		judge_band(&w);
	}

	values[0] = CStringGetTextDatum(fate_names[w.fate]);
	values[1] = Int64GetDatum(w.successor);
	nulls[1] = w.successor == 0;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc),
													  values, nulls)));
}
