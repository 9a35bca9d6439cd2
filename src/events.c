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

#include "access/subtrans.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "commands/async.h"
#if PG_VERSION_NUM >= 140000
#include "common/hmac.h"
#endif
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "libpq/libpq-be.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "pgstat.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/sinvaladt.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/resowner.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "lease.h"

/*
 * Advisory locks use 1 and 2 in field 4; 0x4645 ("FE": a lease's wake-up
 * registry), 0x4646 ("FF": its queue of waiters), 0x4647 ("FG": a
 * holder's acquire of a semaphore), 0x4648 ("FH": creating a name's rows
 * or changing its kind) and 0x4649 ("FI": a commit that keeps a lease) are
 * ours alone.
 */
#define FENCING_LOCKTAG_FIELD4	0x4645
#define FENCING_QUEUE_LOCKTAG_FIELD4	0x4646
#define FENCING_HOLDER_LOCKTAG_FIELD4	0x4647
#define FENCING_NAME_LOCKTAG_FIELD4	0x4648
#define FENCING_KEEP_LOCKTAG_FIELD4	0x4649

/* tags of leases released in the current transaction, to wake at commit */
static List *wake_at_commit = NIL;

/*
 * Leases this transaction renewed or checked (fencing_keep_until_commit),
 * in TopTransactionContext; NIL if none.
 */
typedef struct KeptLease
{
	LOCKTAG		tag;			/* the name's FENCING_KEEP_LOCKTAG_FIELD4 */
	int			nestlevel;		/* the (sub)transaction that kept it */
	int64		token;
	TimestampTz expires_at;		/* the commit must come before this */
	char		name[FLEXIBLE_ARRAY_MEMBER];
} KeptLease;

static List *kept_leases = NIL;

static bool notify_enabled = false;

FENCING_FUNCTION(fencing_lease_lock_tag);

/* ---- lock tags ---- */

/*
 * A lock tag has 64 bits for a name: a hash, so two names can share a tag,
 * and then their waiters one queue and one wake-up registry.  An unkeyed
 * hash (hash_bytes_extended with a known seed) lets anyone craft a name
 * that shares the tag of any given lease, in seconds: its last mixing
 * steps invert, so the last 12 bytes of a name can be solved for.  A role
 * with such a name could stand at the head of another lease's queue for a
 * day, and starve its waiters.  So the hash is keyed: SipHash-2-4, the
 * keyed hash made against such collisions, with a key derived from the
 * cluster's mock authentication nonce, 32 random bytes made at initdb,
 * stored in pg_control and shown to no role (SCRAM hashes it to answer for
 * roles that do not exist); standbys share it, pg_upgrade makes a new
 * one.  pg_locks shows tags, not the key: without it, a name that shares a
 * given tag takes some 2^64 tries.  See docs/security.md.
 */
#define TAG_NONCE_LEN	32		/* MOCK_AUTH_NONCE_LEN */
#define TAG_KEY_LEN		16		/* SipHash's */

static uint8 tag_key[TAG_KEY_LEN];
static bool tag_key_known = false;

/*
 * The key: the first 16 bytes of HMAC-SHA-256(nonce, a label of ours), so
 * that the nonce itself serves nothing but SCRAM.  Once per process.
 */
static void
learn_tag_key(void)
{
	static const char label[] = "fencing lock tags";
	const uint8 *nonce = (const uint8 *) GetMockAuthenticationNonce();
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
#if PG_VERSION_NUM >= 140000
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);

	if (ctx == NULL || pg_hmac_init(ctx, nonce, TAG_NONCE_LEN) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) label, strlen(label)) < 0 ||
		pg_hmac_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not derive the key of the lease lock tags");
	pg_hmac_free(ctx);
#else
	pg_sha256_ctx ctx;
	uint8		pad[PG_SHA256_BLOCK_LENGTH];
	uint8		inner[PG_SHA256_DIGEST_LENGTH];

	/* RFC 2104 HMAC, with a key shorter than the block */
	memset(pad, 0x36, sizeof(pad));
	for (int i = 0; i < TAG_NONCE_LEN; i++)
		pad[i] ^= nonce[i];
	pg_sha256_init(&ctx);
	pg_sha256_update(&ctx, pad, sizeof(pad));
	pg_sha256_update(&ctx, (const uint8 *) label, strlen(label));
	pg_sha256_final(&ctx, inner);
	memset(pad, 0x5c, sizeof(pad));
	for (int i = 0; i < TAG_NONCE_LEN; i++)
		pad[i] ^= nonce[i];
	pg_sha256_init(&ctx);
	pg_sha256_update(&ctx, pad, sizeof(pad));
	pg_sha256_update(&ctx, inner, sizeof(inner));
	pg_sha256_final(&ctx, digest);
#endif
	memcpy(tag_key, digest, TAG_KEY_LEN);
	tag_key_known = true;
}

static inline uint64
load_le64(const uint8 *p)
{
	uint64		v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#define ROTL64(x, b)	(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND \
	do { \
		v0 += v1; v1 = ROTL64(v1, 13); v1 ^= v0; v0 = ROTL64(v0, 32); \
		v2 += v3; v3 = ROTL64(v3, 16); v3 ^= v2; \
		v0 += v3; v3 = ROTL64(v3, 21); v3 ^= v0; \
		v2 += v1; v1 = ROTL64(v1, 17); v1 ^= v2; v2 = ROTL64(v2, 32); \
	} while (0)

/* SipHash-2-4 (Aumasson and Bernstein, 2012), 64-bit output */
static uint64
siphash24(const uint8 *in, size_t len, const uint8 *key)
{
	uint64		k0 = load_le64(key);
	uint64		k1 = load_le64(key + 8);
	uint64		v0 = UINT64CONST(0x736f6d6570736575) ^ k0;
	uint64		v1 = UINT64CONST(0x646f72616e646f6d) ^ k1;
	uint64		v2 = UINT64CONST(0x6c7967656e657261) ^ k0;
	uint64		v3 = UINT64CONST(0x7465646279746573) ^ k1;
	uint64		last = ((uint64) len) << 56;
	size_t		whole = len - len % 8;

	for (size_t i = 0; i < whole; i += 8)
	{
		uint64		m = load_le64(in + i);

		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t i = whole; i < len; i++)
		last |= ((uint64) in[i]) << (8 * (i - whole));
	v3 ^= last;
	SIPROUND;
	SIPROUND;
	v0 ^= last;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static void
append_field(uint8 *buf, size_t *used, const void *data, uint32 len)
{
	memcpy(buf + *used, &len, sizeof(len));
	*used += sizeof(len);
	memcpy(buf + *used, data, len);
	*used += len;
}

/*
 * The 64-bit hash of a lease name (holder NULL) or of a (name, role,
 * holder) triple, each field with its length, so that no two inputs
 * spell the same message.
 */
static uint64
tag_hash(const char *name, int len, Oid role, const char *holder, int hlen)
{
	uint8		msg[4 * sizeof(uint32) + 1 + sizeof(Oid) +
					2 * FENCING_MAX_NAME_BYTES];
	size_t		used = 0;
	uint8		kind = holder == NULL ? 'L' : 'H';

	Assert(len <= FENCING_MAX_NAME_BYTES && hlen <= FENCING_MAX_NAME_BYTES);
	if (!tag_key_known)
		learn_tag_key();
	append_field(msg, &used, &kind, 1);
	append_field(msg, &used, name, len);
	if (holder != NULL)
	{
		append_field(msg, &used, &role, sizeof(role));
		append_field(msg, &used, holder, hlen);
	}
	return siphash24(msg, used, tag_key);
}

static void
lease_locktag(LOCKTAG *tag, const char *name, int len)
{
	uint64		h = tag_hash(name, len, InvalidOid, NULL, 0);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_LOCKTAG_FIELD4);
}

/*
 * fencing._lease_lock_tag(name): the hash in the lease's lock tags, as
 * pg_locks shows them (classid its high 32 bits, objid its low 32 bits;
 * objsubid 17989 and 17990), so that fencing_monitor.waiters can tell
 * whose waiters are whose.  Granted to pg_monitor, not to PUBLIC.
 */
Datum
fencing_lease_lock_tag(PG_FUNCTION_ARGS)
{
	text	   *name = fencing_name_arg(fcinfo, 0, "lease name");

	PG_RETURN_INT64((int64) tag_hash(VARDATA_ANY(name),
									 VARSIZE_ANY_EXHDR(name),
									 InvalidOid, NULL, 0));
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
 * The wait event a waiter at the head of a lease's queue sleeps in, as
 * pg_stat_activity shows it: Extension:FencingLeaseWait on PostgreSQL 17
 * and later, the generic Extension:Extension before (fencing_monitor.waiters
 * finds waiters on every major).  Looked up once per backend, before its
 * first sleep.
 */
static uint32 lease_wait_event = PG_WAIT_EXTENSION;

#if PG_VERSION_NUM >= 170000
/*
 * Register FencingLeaseWait, in an internal subtransaction: the table of
 * custom wait events is shared by every extension and holds 128 of them,
 * and a full one raises an error, which must not fail the acquire.  Then
 * this backend's waiters sleep in Extension:Extension.
 */
static void
look_up_wait_event(void)
{
	static bool looked_up = false;
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;

	if (looked_up)
		return;
	looked_up = true;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		lease_wait_event = WaitEventExtensionNew("FencingLeaseWait");
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ereport(LOG,
				(errmsg("fencing waiters of this session sleep in wait event Extension:Extension"),
				 errdetail("Registering wait event FencingLeaseWait failed: %s",
						   edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcontext);
	CurrentResourceOwner = oldowner;
}
#endif

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

#if PG_VERSION_NUM >= 170000
	look_up_wait_event();
#endif
#if PG_VERSION_NUM >= 150000
	if (MyProcPort != NULL)
		events |= WL_SOCKET_CLOSED;
	rc = WaitLatchOrSocket(MyLatch, events,
						   MyProcPort != NULL ? MyProcPort->sock : PGINVALID_SOCKET,
						   timeout_ms, lease_wait_event);
#else
	rc = WaitLatch(MyLatch, events, timeout_ms, lease_wait_event);
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
	uint64		h = tag_hash(name, len, InvalidOid, NULL, 0);

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

/* ---- waits with a deadline ---- */

/*
 * Microseconds on the monotonic clock (CLOCK_MONOTONIC on Linux), for
 * deadlines: a step of the wall clock (NTP, an operator) neither stretches
 * nor cuts a wait.  Expiry is judged by the wall clock, as stored in the
 * lease row.
 */
int64
fencing_monotonic_usecs(void)
{
	instr_time	t;

	INSTR_TIME_SET_CURRENT(t);
	return (int64) INSTR_TIME_GET_MICROSEC(t);
}

/*
 * The timer that ends a wait at its deadline, registered once per process
 * (after InitializeTimeouts, which forgets timers a preloading postmaster
 * would have registered).  When it fires it cancels the lock wait we are
 * in, as lock_timeout does, unlike which it bounds all the lock waits of
 * one call together (heap_lock_tuple may wait for the tuple lock, then for
 * the locker).
 */
static TimeoutId deadline_timeout;
static int	deadline_timeout_pid = 0;

/* the deadline the timer is armed for; FENCING_DEADLINE_NONE: not armed */
static int64 armed_deadline = FENCING_DEADLINE_NONE;

static void
deadline_timeout_handler(void)
{
	/* as StatementCancelHandler: the wait's CHECK_FOR_INTERRUPTS errors out */
	if (!proc_exit_inprogress)
	{
		InterruptPending = true;
		QueryCancelPending = true;
	}
	SetLatch(MyLatch);
}

/*
 * Arm the timer for "deadline", or disarm it (FENCING_DEADLINE_NONE).  A
 * wait inside another one (a trigger on fencing.leases that acquires)
 * arms it for the earlier of the two deadlines, and the outer one's is
 * armed again when it ends.
 */
static void
arm_deadline(int64 deadline)
{
	if (deadline_timeout_pid != MyProcPid)
	{
		deadline_timeout = RegisterTimeout(USER_TIMEOUT,
										   deadline_timeout_handler);
		deadline_timeout_pid = MyProcPid;
	}
	armed_deadline = deadline;
	if (deadline == FENCING_DEADLINE_NONE)
		disable_timeout(deadline_timeout, true);
	else
		/* the timer runs on the wall clock: aim it at what is left */
		enable_timeout_at(deadline_timeout,
						  GetCurrentTimestamp() +
						  (deadline - fencing_monotonic_usecs()));
}

/*
 * Run fn(arg), which may wait for locks held by other transactions, in an
 * internal subtransaction whose lock waits end at "deadline" (microseconds
 * on fencing_monotonic_usecs' clock):
 *	- FENCING_DEADLINE_NONE: no end, as a plain UPDATE waits;
 *	- a deadline that has passed: no waiting, or only for a moment
 *	  (lock_timeout at its least, 1 ms), for waits the call cannot refuse
 *	  up front (an INSERT meeting another transaction's uncommitted row);
 *	- else until then, whatever the session's lock_timeout: a bounded
 *	  wait is the call's own (its "wait" argument), and ends as such.
 * fn returns true to keep what it did: the subtransaction then commits into
 * the current (sub)transaction, which gets its locks; false rolls it back,
 * which releases the row locks it took, so that a caller that waited for a
 * row and found it no longer qualifying keeps no lock on it.  When the
 * deadline comes first, the subtransaction is rolled back too.  Any other
 * error (a cancel, statement_timeout, the caller's lock_timeout in a wait
 * without deadline, a deadlock) is raised again after the rollback.
 *
 * A subtransaction costs some microseconds, and an XID if fn writes: callers
 * use this only once they know they must wait, except to create a lease
 * row, which cannot know it in advance.
 */
FencingWaitOutcome
fencing_wait_within(bool (*fn) (void *arg), void *arg, int64 deadline)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	int64		outer = armed_deadline;
	bool		bounded = deadline != FENCING_DEADLINE_NONE;
	bool		timed = bounded && deadline > fencing_monotonic_usecs();
	bool		at_once = bounded && !timed;
	volatile bool armed = false;
	volatile FencingWaitOutcome outcome = FENCING_WAIT_TIMED_OUT;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		int			nestlevel = NewGUCNestLevel();
		bool		keep;

		if (at_once)
			(void) set_config_option("lock_timeout", "1", PGC_USERSET,
									 PGC_S_SESSION, GUC_ACTION_SAVE, true,
									 0, false);
		else if (timed)
		{
			/* the call's wait bounds it, not the session's lock_timeout */
			(void) set_config_option("lock_timeout", "0", PGC_USERSET,
									 PGC_S_SESSION, GUC_ACTION_SAVE, true,
									 0, false);
			if (outer == FENCING_DEADLINE_NONE || deadline < outer)
			{
				arm_deadline(deadline);
				armed = true;
			}
		}
		keep = fn(arg);
		if (armed)
			disable_timeout(deadline_timeout, true);
		/* a deadline that passed just now errors out here, not later */
		CHECK_FOR_INTERRUPTS();
		if (armed)
		{
			arm_deadline(outer);
			armed = false;
		}
		AtEOXact_GUC(true, nestlevel);
		if (keep)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;
		outcome = keep ? FENCING_WAIT_KEPT : FENCING_WAIT_UNDONE;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		fired = false;
		bool		ours;

		if (armed)
		{
			fired = get_timeout_indicator(deadline_timeout, true);
			arm_deadline(outer);
		}
		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcontext);
		CurrentResourceOwner = oldowner;

		/*
		 * Our timer cancels with "canceling statement due to user request";
		 * a real cancel or statement_timeout at the very same moment is
		 * taken for the deadline, which has come anyway.
		 */
		if (timed)
			ours = edata->sqlerrcode == ERRCODE_QUERY_CANCELED && fired;
		else
			ours = at_once && edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE;
		if (!ours)
			ReThrowError(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return outcome;
}

static bool
wait_for_xact(void *arg)
{
	XactLockTableWait(*(TransactionId *) arg, NULL, NULL, XLTW_None);
	return true;
}

/*
 * Wait until the transaction ends, or the deadline passes; true if it
 * ended.  For a prepared transaction, which no release wakes us for.
 */
bool
fencing_wait_for_xact(TransactionId xid, int64 deadline)
{
	return fencing_wait_within(wait_for_xact, &xid, deadline) ==
		FENCING_WAIT_KEPT &&
		!TransactionIdIsInProgress(xid);
}

/*
 * Is xid a prepared transaction, still waiting for COMMIT PREPARED or
 * ROLLBACK PREPARED?  Its top-level XID is in progress but no backend runs
 * it: a prepared transaction's is held by a PGPROC without a process.  The
 * XID must be one a snapshot of ours saw in progress.
 */
bool
fencing_xact_is_prepared(TransactionId xid)
{
	TransactionId top;

	if (!TransactionIdIsInProgress(xid))
		return false;
	top = SubTransGetTopmostTransaction(xid);
	return TransactionIdIsInProgress(top) && BackendXidGetPid(top) == 0;
}

static bool
lock_exclusive(void *arg)
{
	(void) LockAcquire((LOCKTAG *) arg, ExclusiveLock, false, false);
	return true;
}

/*
 * Wait for an ExclusiveLock on "tag" until the deadline; true once
 * granted, false when the time ran out (we left the lock's wait queue).
 * The lock goes to the current (sub)transaction.
 */
static bool
lock_within(LOCKTAG *tag, int64 deadline)
{
	return fencing_wait_within(lock_exclusive, tag, deadline) ==
		FENCING_WAIT_KEPT;
}

/*
 * Queue behind the waiters before us until the deadline; true once we are
 * the head, false when the time ran out (we left the queue).
 */
bool
fencing_queue_enter(const char *name, int len, int64 deadline)
{
	LOCKTAG		tag;

	queue_locktag(&tag, name, len);
	return lock_within(&tag, deadline);
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
 * Waits until the deadline (one that has passed: not at all); false if
 * not granted.
 */
bool
fencing_holder_lock(const char *name, int len, const char *holder, int hlen,
					Oid role, int64 deadline)
{
	LOCKTAG		tag;
	uint64		h = tag_hash(name, len, role, holder, hlen);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_HOLDER_LOCKTAG_FIELD4);
	if (LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL)
		return true;
	return deadline > fencing_monotonic_usecs() && lock_within(&tag, deadline);
}

/* ---- defining a name ---- */

/*
 * Creating a row of a name, and changing the kind or slot count of its
 * rows, look at all of the name's rows (committed or not) and then write:
 * this lock, held for that look and write only, makes the two one step
 * among those who define the name (lease_row.c, fencing_define_lease_name).
 * Acquires of existing rows of the right kind never take it.  Its tag is
 * keyed as the others are, so that no role can make another name's
 * definitions wait on its own.
 */
static void
name_locktag(LOCKTAG *tag, const char *name, int len)
{
	uint64		h = tag_hash(name, len, InvalidOid, NULL, 0);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_NAME_LOCKTAG_FIELD4);
}

/*
 * Take the name lock, waiting until the deadline as an acquire waits for a
 * row lock (one that has passed: not at all); false if not granted.  Like
 * the queue lock it belongs to the current transaction's resource owner,
 * so that fencing_name_unlock finds it however it was granted.
 */
bool
fencing_name_lock(const char *name, int len, int64 deadline)
{
	LOCKTAG		tag;

	name_locktag(&tag, name, len);
	if (queue_lock(&tag, true, true))
		return true;
	if (deadline != FENCING_DEADLINE_NONE &&
		deadline <= fencing_monotonic_usecs())
		return false;
	return lock_within(&tag, deadline);
}

void
fencing_name_unlock(const char *name, int len)
{
	LOCKTAG		tag;

	name_locktag(&tag, name, len);
	(void) queue_lock(&tag, false, false);
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

/* ---- leases kept until commit ---- */

/*
 * A renew, check or proclaim counts only if its transaction commits
 * before the lease it found live expired: else a watcher could be told
 * "expired" (no leader) and then see the same token current again, and
 * the holder's writes under a check would commit after its lease ended.
 * So each one is recorded, and the commit refuses (LF022) once the clock
 * has reached the earliest expiry recorded.  Between that clock reading
 * and the moment the commit becomes visible (a WAL flush, a synchronous
 * standby's answer) an observer would still see the old row: so the
 * commit first takes an exclusive lock on the name's "keep" tag, held
 * until the commit is visible, and an observer that finds the lease
 * expired takes that tag in share mode, then reads again
 * (fencing_wait_for_keeping_commit).  Whichever comes first decides: the
 * observer's clock reading precedes its share lock, the commit's follows
 * its exclusive lock.
 */
static void
keep_locktag(LOCKTAG *tag, const char *name, int len)
{
	uint64		h = tag_hash(name, len, InvalidOid, NULL, 0);

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) (h >> 32), (uint32) h,
						 FENCING_KEEP_LOCKTAG_FIELD4);
}

/*
 * This transaction renewed, checked or proclaimed lease "name" with
 * "token" while it was live until expires_at: its commit (or PREPARE)
 * fails if it comes later.
 */
void
fencing_keep_until_commit(const char *name, int len, int64 token,
						  TimestampTz expires_at)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	KeptLease  *k = palloc(offsetof(KeptLease, name) + len + 1);

	keep_locktag(&k->tag, name, len);
	k->nestlevel = GetCurrentTransactionNestLevel();
	k->token = token;
	k->expires_at = expires_at;
	memcpy(k->name, name, len);
	k->name[len] = '\0';
	kept_leases = lappend(kept_leases, k);
	MemoryContextSwitchTo(old);
}

/* lock tags in one order, so that two commits never wait for each other */
static int
kept_lease_cmp(const ListCell *a, const ListCell *b)
{
	const LOCKTAG *x = &((const KeptLease *) lfirst(a))->tag;
	const LOCKTAG *y = &((const KeptLease *) lfirst(b))->tag;

	if (x->locktag_field2 != y->locktag_field2)
		return x->locktag_field2 < y->locktag_field2 ? -1 : 1;
	if (x->locktag_field3 != y->locktag_field3)
		return x->locktag_field3 < y->locktag_field3 ? -1 : 1;
	return 0;
}

/*
 * At PRE_COMMIT ("locking") and PRE_PREPARE: refuse the commit if a kept
 * lease has expired.  A prepared transaction takes no lock: it would keep
 * observers waiting until COMMIT PREPARED, which is not judged again.
 */
static void
refuse_expired_keeps(bool locking)
{
	ListCell   *lc;
	TimestampTz now;

	if (locking)
	{
		list_sort(kept_leases, kept_lease_cmp);
		foreach(lc, kept_leases)
			(void) LockAcquire(&((KeptLease *) lfirst(lc))->tag,
							   ExclusiveLock, false, false);
	}
	now = GetCurrentTimestamp();
	foreach(lc, kept_leases)
	{
		KeptLease  *k = (KeptLease *) lfirst(lc);

		if (k->expires_at <= now)
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_LEASE_EXPIRED),
					 errmsg("lease \"%s\" expired before the transaction that renewed or checked it committed",
							k->name),
					 errdetail("Token " INT64_FORMAT " was live until %s; the transaction is rolled back, and nothing it wrote is committed.",
							   k->token, timestamptz_to_str(k->expires_at)),
					 errhint("Renew the lease and commit well before it expires.")));
	}
}

/*
 * An observer found lease "name" expired: wait for a commit that renews or
 * checks it and has passed its clock reading, then read again.
 */
void
fencing_wait_for_keeping_commit(const char *name, int len)
{
	LOCKTAG		tag;

	keep_locktag(&tag, name, len);
	(void) LockAcquire(&tag, ShareLock, false, false);
	LockRelease(&tag, ShareLock, false);
}

/* A subtransaction ends: what it kept goes to its parent, or away. */
static void
events_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (kept_leases == NIL)
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, kept_leases)
		{
			KeptLease  *k = (KeptLease *) lfirst(lc);

			if (k->nestlevel >= level)
				k->nestlevel = level - 1;
		}
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, kept_leases)
		{
			if (((KeptLease *) lfirst(lc))->nestlevel >= level)
				kept_leases = foreach_delete_current(kept_leases, lc);
		}
	}
}

static void
events_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (kept_leases != NIL)
				refuse_expired_keeps(event == XACT_EVENT_PRE_COMMIT &&
									 !RecoveryInProgress());
			break;
			/*
			 * At PREPARE TRANSACTION too: no callback of ours runs at COMMIT
			 * PREPARED, which may come from any session.  The head wakes
			 * now, finds the lease's row changed by a prepared transaction
			 * and waits for that transaction to end (lease.c).
			 */
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			foreach(lc, wake_at_commit)
				wake_waiters((LOCKTAG *) lfirst(lc));
			wake_at_commit = NIL;
			kept_leases = NIL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* list memory goes with TopTransactionContext */
			wake_at_commit = NIL;
			kept_leases = NIL;
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
	RegisterSubXactCallback(events_subxact_callback, NULL);
	DefineCustomBoolVariable("fencing.notify",
							 "Send NOTIFY fencing on lease acquire, takeover and release.",
							 "Off by default: every notifying commit takes the notification queue's lock.",
							 &notify_enabled,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}
