/*-------------------------------------------------------------------------
 *
 * events.c
 *	  Waking waiting acquirers, and NOTIFY for clients that watch leases.
 *
 * Waiters of a lease queue for it in the lock manager (see "the queue of
 * waiters" below); the head of the queue, and only it, waits for the
 * lease itself: it takes a share lock on an advisory lock tag derived from
 * the lease name and sleeps on its latch.  Observers of an election and
 * watchers of a token (the holder-side layer) register on the same tag.
 * Share locks never conflict with each other and nobody asks for a
 * stronger one, so waiters never block anyone; the lock manager only
 * serves as a registry of who waits for what.  When a transaction that
 * released a lease (or took one over, or changed an election) commits, it
 * asks the lock manager which backends hold that tag (GetLockConflicts,
 * which never waits) and sets their latches.  No shared_preload_libraries,
 * no polling: an idle waiter sleeps until it is woken or until the lease's
 * expiry, whichever comes first.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "common/hashfn.h"
#include "lib/stringinfo.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/proc.h"
#if PG_VERSION_NUM >= 170000
#include "storage/procarray.h"	/* ProcNumberGetProc */
#endif
#include "storage/sinvaladt.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/resowner.h"
#include "utils/memutils.h"

#include "lease.h"

/*
 * Advisory locks use 1 and 2 in field 4; 0x4645 ("FE": a lease's wake-up
 * registry), 0x4646 ("FF": its queue of waiters), 0x4647 ("FG": a
 * holder's acquire of a semaphore) and 0x4648 ("FH": creating a name's rows
 * or changing its kind) are ours alone.
 */
#define FENCING_LOCKTAG_FIELD4	0x4645
#define FENCING_QUEUE_LOCKTAG_FIELD4	0x4646
#define FENCING_HOLDER_LOCKTAG_FIELD4	0x4647
#define FENCING_NAME_LOCKTAG_FIELD4	0x4648

/* tags of leases released in the current transaction, to wake at commit */
static List *wake_at_commit = NIL;

static bool notify_enabled = false;

static void
lease_locktag(LOCKTAG *tag, const char *name, int len)
{
	uint64		h = hash_bytes_extended((const unsigned char *) name, len, 0);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_LOCKTAG_FIELD4);
}

void
fencing_waiter_register(const char *name, int len)
{
	LOCKTAG		tag;

	lease_locktag(&tag, name, len);
	(void) LockAcquire(&tag, ShareLock, false, false);
}

void
fencing_waiter_unregister(const char *name, int len)
{
	LOCKTAG		tag;

	lease_locktag(&tag, name, len);
	(void) LockRelease(&tag, ShareLock, false);
}

/*
 * Sleep until our latch is set or "timeout_ms" passes.  Errors out at
 * once on cancel, statement_timeout, termination, and (PostgreSQL 15+)
 * when the client has gone away.
 */
void
fencing_waiter_sleep(long timeout_ms)
{
	int			events = WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH;
	int			rc;

#if PG_VERSION_NUM >= 150000
	if (MyProcPort != NULL)
		events |= WL_SOCKET_CLOSED;
	rc = WaitLatchOrSocket(MyLatch, events,
						   MyProcPort != NULL ? MyProcPort->sock : PGINVALID_SOCKET,
						   timeout_ms, PG_WAIT_EXTENSION);
#else
	rc = WaitLatch(MyLatch, events, timeout_ms, PG_WAIT_EXTENSION);
#endif
	ResetLatch(MyLatch);
#if PG_VERSION_NUM >= 150000
	if (rc & WL_SOCKET_CLOSED)
		ereport(FATAL,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("connection to client lost while waiting for a lease")));
#else
	(void) rc;
#endif
	CHECK_FOR_INTERRUPTS();
}

/* ---- the queue of waiters ---- */

/*
 * Waiters of a lease queue in the lock manager for its queue tag, in
 * ExclusiveLock mode: its wait queue is FIFO, and a newcomer whose mode
 * conflicts with a waiter's queues behind it instead of barging (the lock
 * manager checks a request against the wait mask as well as the granted
 * locks).  The holder of the queue lock is the head: the only waiter that
 * registers for wake-ups and tries to take the lease.  When it gets the
 * lease, gives up or is cancelled, the lock manager grants the queue lock
 * to the next in line.  pg_locks shows the queue (field 4 = 0x4646).
 */
static void
queue_locktag(LOCKTAG *tag, const char *name, int len)
{
	uint64		h = hash_bytes_extended((const unsigned char *) name, len, 0);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_QUEUE_LOCKTAG_FIELD4);
}

/*
 * The queue lock belongs to the current (sub)transaction's resource owner,
 * not to the portal's: that is where the lock taken in the internal
 * subtransaction of fencing_queue_enter goes when it commits, and so the
 * lock can be released by the owner that holds it, whichever way it was
 * taken.
 */
static bool
queue_lock(LOCKTAG *tag, bool acquire, bool dontWait)
{
	ResourceOwner save = CurrentResourceOwner;
	bool		ok;

	CurrentResourceOwner = CurTransactionResourceOwner;
	if (acquire)
		ok = LockAcquire(tag, ExclusiveLock, false, dontWait) != LOCKACQUIRE_NOT_AVAIL;
	else
		ok = LockRelease(tag, ExclusiveLock, false);
	CurrentResourceOwner = save;
	return ok;
}

/* Become the head at once if nobody queues; false if someone does. */
bool
fencing_queue_try_enter(const char *name, int len)
{
	LOCKTAG		tag;

	queue_locktag(&tag, name, len);
	return queue_lock(&tag, true, true);
}

/*
 * Wait for an ExclusiveLock on "tag" for at most timeout_usecs; true once
 * granted, false when the time ran out (we left the lock's wait queue).
 * The lock manager's wait is bounded by lock_timeout, set for the wait in
 * an internal subtransaction whose rollback takes us out of the wait
 * queue; a shorter lock_timeout of the caller's, a cancel or a deadlock is
 * the caller's error.  The lock goes to the current (sub)transaction.
 */
static bool
lock_within(LOCKTAG *tag, int64 timeout_usecs)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	int64		ms64 = (timeout_usecs + 999) / 1000;
	int			timeout_ms = (int) Min(Max(ms64, 1), INT_MAX);
	bool		ours = LockTimeout == 0 || timeout_ms <= LockTimeout;
	volatile bool entered = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		int			nestlevel = NewGUCNestLevel();

		if (ours)
		{
			char		value[32];

			snprintf(value, sizeof(value), "%d", timeout_ms);
			(void) set_config_option("lock_timeout", value, PGC_USERSET,
									 PGC_S_SESSION, GUC_ACTION_SAVE, true,
									 0, false);
		}
		(void) LockAcquire(tag, ExclusiveLock, false, false);
		/* the caller's lock_timeout again (an error: the rollback does it) */
		AtEOXact_GUC(true, nestlevel);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		entered = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		if (!ours || edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return entered;
}

/*
 * Queue behind the waiters before us for at most timeout_usecs; true once
 * we are the head, false when the time ran out (we left the queue).
 */
bool
fencing_queue_enter(const char *name, int len, int64 timeout_usecs)
{
	LOCKTAG		tag;

	queue_locktag(&tag, name, len);
	return lock_within(&tag, timeout_usecs);
}

/* Leave the queue (as its head): the next in line becomes the head. */
void
fencing_queue_leave(const char *name, int len)
{
	LOCKTAG		tag;

	queue_locktag(&tag, name, len);
	(void) queue_lock(&tag, false, false);
}

/* ---- one acquire of a semaphore per holder ---- */

/*
 * Two sessions of one holder (name and role) that acquire slots of one
 * semaphore at the same time could each take a slot, if another holder's
 * slot came free between their surveys: the holder would hold two.  So an
 * acquire of a semaphore's slot first takes this lock, on (semaphore,
 * holder, role), until its transaction ends: the second session waits
 * for the first to commit, and then finds the first one's slot, its own.
 * Waits for at most timeout_usecs (0: not at all); false if not granted.
 */
bool
fencing_holder_lock(const char *name, int len, const char *holder, int hlen,
					Oid role, int64 timeout_usecs)
{
	LOCKTAG		tag;
	uint64		h = hash_bytes_extended((const unsigned char *) name, len, role);

	h = hash_combine64(h, hash_bytes_extended((const unsigned char *) holder,
											  hlen, 0));
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_HOLDER_LOCKTAG_FIELD4);
	if (LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL)
		return true;
	return timeout_usecs > 0 && lock_within(&tag, timeout_usecs);
}

/* ---- defining a name ---- */

/*
 * Creating a row of a name, and changing the kind or slot count of its
 * rows, look at all of the name's rows (committed or not) and then write:
 * this lock, held for that look and write only, makes the two one step
 * among those who define the name (lease_row.c, fencing_define_lease_name).
 * Acquires of existing rows of the right kind never take it.
 */
static void
name_locktag(LOCKTAG *tag, const char *name, int len)
{
	uint64		h = hash_bytes_extended((const unsigned char *) name, len, 0);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_NAME_LOCKTAG_FIELD4);
}

void
fencing_name_lock(const char *name, int len)
{
	LOCKTAG		tag;

	name_locktag(&tag, name, len);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

void
fencing_name_unlock(const char *name, int len)
{
	LOCKTAG		tag;

	name_locktag(&tag, name, len);
	(void) LockRelease(&tag, ExclusiveLock, false);
}

/* ---- waking ---- */

static void
wake_waiters(LOCKTAG *tag)
{
	VirtualTransactionId *vxids;
	int			n = 0;

	vxids = GetLockConflicts(tag, AccessExclusiveLock, &n);
	for (int i = 0; i < n; i++)
	{
		PGPROC	   *proc;

#if PG_VERSION_NUM >= 170000
		proc = ProcNumberGetProc(vxids[i].procNumber);
#else
		proc = BackendIdGetProc(vxids[i].backendId);
#endif
		if (proc != NULL)
			SetLatch(&proc->procLatch);
	}
}

static void
events_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			foreach(lc, wake_at_commit)
				wake_waiters((LOCKTAG *) lfirst(lc));
			wake_at_commit = NIL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* list memory goes with TopTransactionContext */
			wake_at_commit = NIL;
			break;
		default:
			break;
	}
}

/* Wake the lease's waiters once this transaction has committed. */
void
fencing_wake_waiters_at_commit(const char *name, int len)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	LOCKTAG    *tag = palloc(sizeof(LOCKTAG));

	lease_locktag(tag, name, len);
	wake_at_commit = lappend(wake_at_commit, tag);
	MemoryContextSwitchTo(old);
}

/*
 * NOTIFY fencing, '{"event": ..., "lease": ..., "token": ..., "holder": ...}'
 * delivered, like any NOTIFY, when the transaction commits.
 */
void
fencing_notify(const char *event, const char *name, int len, int64 token,
			   const char *holder)
{
	StringInfoData buf;
	char	   *cname;

	if (!notify_enabled)
		return;
	cname = pnstrdup(name, len);
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"event\": ");
	escape_json(&buf, event);
	appendStringInfoString(&buf, ", \"lease\": ");
	escape_json(&buf, cname);
	appendStringInfo(&buf, ", \"token\": " INT64_FORMAT, token);
	if (holder != NULL)
	{
		appendStringInfoString(&buf, ", \"holder\": ");
		escape_json(&buf, holder);
	}
	appendStringInfoChar(&buf, '}');
	Async_Notify("fencing", buf.data);
	pfree(buf.data);
	pfree(cname);
}

void
fencing_events_init(void)
{
	RegisterXactCallback(events_xact_callback, NULL);
	DefineCustomBoolVariable("fencing.notify",
							 "Send NOTIFY fencing on lease acquire, takeover and release.",
							 "Off by default: every notifying commit takes the notification queue's lock.",
							 &notify_enabled,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}
