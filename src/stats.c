/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters for operators: lease events, refused writes, waits and a
 *	  distribution of wait times, per database, in shared memory.
 *
 * A refused write rolls back its transaction, so its count cannot live in
 * a table; it lives in shared memory, as 64-bit atomics that a count adds
 * to without a lock.  Where that memory comes from:
 *
 *	- with fencing in shared_preload_libraries, on every major: the main
 *	  shared memory, reserved at server start, which every process (parallel
 *	  workers too) has from its start;
 *	- without it, PostgreSQL 17 and later: a segment of the dynamic shared
 *	  memory registry (GetNamedDSMSegment), created by the first backend
 *	  that loads the library;
 *	- without it, 15 and 16: none.  Nothing counts, and
 *	  fencing_monitor.stats_info says so.
 *
 * Counters start at zero when the server starts (they are not saved across
 * a restart: Prometheus's rate() and increase() take a reset in their
 * stride), when stats_reset() is called, and when the extension is created
 * (its install script resets them); stats_info.stats_reset says since
 * when.  Each database has an entry of its own, claimed by its first count
 * or look; an entry of a dropped database is reused when the table is full.
 * A backend that found the table full tries again a second later.
 *
 * Lease events count when their transaction commits: they are kept per
 * (sub)transaction level until then, and dropped with an aborted
 * (sub)transaction.  Those of a prepared transaction wait in shared memory
 * with its XID, and count once COMMIT PREPARED has committed it (the next
 * read of the counters looks, whoever ran COMMIT PREPARED); ROLLBACK
 * PREPARED drops them.  Refusals and waits count at once.
 *
 * No count raises an error.  Attaching to the segment can fail (a full
 * /dev/shm), so a backend attaches in an internal subtransaction, and a
 * failure turns counting off for the backend with a WARNING instead of
 * replacing the caller's result or error.  It attaches when it loads the
 * library, which a backend does in a transaction before it runs anything
 * of it in parallel, and a parallel worker before its parallel operation
 * starts: a subtransaction cannot end in the leader of a parallel
 * operation that writes (CREATE TABLE AS), so a backend never attaches
 * there.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/transam.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "portability/instr_time.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"
#if PG_VERSION_NUM >= 170000
#include "storage/dsm_registry.h"
#endif

#include "fencing.h"

FENCING_FUNCTION(fencing_stats);
FENCING_FUNCTION(fencing_stats_wait_histogram);
FENCING_FUNCTION(fencing_stats_reset);

/* databases that count at once */
#define STATS_DATABASES		256

/* how long a backend that found the table full waits to try again */
#define TABLE_FULL_RETRY_USECS	USECS_PER_SEC

/*
 * Upper bounds of the wait-time buckets, in microseconds (1 ms to 5 min),
 * and one more bucket for longer waits
 */
#define WAIT_BOUNDS		10
#define WAIT_BUCKETS	(WAIT_BOUNDS + 1)
static const int64 wait_bucket_usecs[WAIT_BOUNDS] = {
	1000, 10000, 100000, 500000, 1000000, 5000000, 10000000, 30000000,
	60000000, 300000000
};

typedef struct StatsEntry
{
	pg_atomic_uint32 dboid;		/* InvalidOid: free */
	pg_atomic_uint64 stats_reset;	/* TimestampTz */
	pg_atomic_uint64 counters[FENCING_STAT_COUNT];
	pg_atomic_uint64 wait_buckets[WAIT_BUCKETS];	/* not cumulative */
	pg_atomic_uint64 wait_usecs;
} StatsEntry;

/*
 * The lease events of a prepared transaction, until it commits or rolls
 * back.  A slot goes FREE -> RESERVED (at PRE_PREPARE, by the preparing
 * backend) -> PREPARED (filled, at PREPARE) -> RESOLVING (by the one
 * backend that saw the transaction end) -> FREE.
 */
#define PREPARED_FREE		0
#define PREPARED_RESERVED	1
#define PREPARED_READY		2
#define PREPARED_RESOLVING	3

typedef struct PreparedEvents
{
	pg_atomic_uint32 state;
	Oid			dboid;
	FullTransactionId fxid;
	uint64		counts[FENCING_STAT_FIRST_AT_ONCE];
} PreparedEvents;

typedef struct StatsShared
{
	slock_t		mutex;			/* claiming and freeing entries */
	int			nprepared;		/* slots in prepared[] */
	pg_atomic_uint32 prepared_used; /* slots not FREE, to skip looking */
	StatsEntry	entries[STATS_DATABASES];
	PreparedEvents prepared[FLEXIBLE_ARRAY_MEMBER];
} StatsShared;

static StatsShared *shared = NULL;

/* this backend's database's entry, once found */
static StatsEntry *entry = NULL;

/* why this backend does not count, once it knows it never will */
static const char *off_reason = NULL;

/* the table was full: when this backend may look again (statement start) */
static bool table_full = false;
static TimestampTz table_full_retry_at;

/* lease events of the open transaction, per subtransaction level */
typedef struct PendingFrame
{
	int			level;
	uint64		counts[FENCING_STAT_FIRST_AT_ONCE];
} PendingFrame;

static PendingFrame *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;

/* the slot reserved for the events of the transaction being prepared */
static PreparedEvents *reserved = NULL;

/* the wait in progress: when its call started, on the monotonic clock */
static bool wait_started = false;
static int	wait_level;
static int64 wait_start_usecs;

static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;

/* ---- the shared table ---- */

/*
 * One slot per transaction that can be prepared at once
 * (max_prepared_transactions, the same in every process of a server).
 */
static Size
shared_size(void)
{
	return add_size(offsetof(StatsShared, prepared),
					mul_size(Max(max_prepared_xacts, 1),
							 sizeof(PreparedEvents)));
}

static void
init_shared(void *ptr)
{
	StatsShared *sh = (StatsShared *) ptr;

	SpinLockInit(&sh->mutex);
	for (int i = 0; i < STATS_DATABASES; i++)
	{
		StatsEntry *e = &sh->entries[i];

		pg_atomic_init_u32(&e->dboid, InvalidOid);
		pg_atomic_init_u64(&e->stats_reset, 0);
		for (int c = 0; c < FENCING_STAT_COUNT; c++)
			pg_atomic_init_u64(&e->counters[c], 0);
		for (int b = 0; b < WAIT_BUCKETS; b++)
			pg_atomic_init_u64(&e->wait_buckets[b], 0);
		pg_atomic_init_u64(&e->wait_usecs, 0);
	}
	sh->nprepared = Max(max_prepared_xacts, 1);
	pg_atomic_init_u32(&sh->prepared_used, 0);
	for (int i = 0; i < sh->nprepared; i++)
		pg_atomic_init_u32(&sh->prepared[i].state, PREPARED_FREE);
}

static void
reset_entry(StatsEntry *e, TimestampTz now)
{
	for (int c = 0; c < FENCING_STAT_COUNT; c++)
		pg_atomic_write_u64(&e->counters[c], 0);
	for (int b = 0; b < WAIT_BUCKETS; b++)
		pg_atomic_write_u64(&e->wait_buckets[b], 0);
	pg_atomic_write_u64(&e->wait_usecs, 0);
	pg_atomic_write_u64(&e->stats_reset, (uint64) now);
}

static void
stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shared_size());
}

static void
stats_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("fencing stats", shared_size(), &found);
	if (!found)
		init_shared(shared);
	LWLockRelease(AddinShmemInitLock);
}

#if PG_VERSION_NUM >= 170000
/*
 * Attach to the shared table, creating it if it is not there yet.  May
 * raise an error: called only by attach_guarded.
 */
static void
attach_shared(void)
{
	bool		found;

	shared = GetNamedDSMSegment("fencing stats", shared_size(),
								init_shared, &found);
}

/*
 * attach_shared in an internal subtransaction, so that an error becomes a
 * WARNING and "not counting".  Only where a subtransaction can start and
 * end: in a transaction, not in parallel mode (where the subtransaction's
 * end fails if the parallel operation writes).  False if it could not try
 * now.
 */
static bool
attach_guarded(void)
{
	MemoryContext oldcontext = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;

	if (!IsTransactionState() || IsInParallelMode())
		return false;
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcontext);
	PG_TRY();
	{
		attach_shared();
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcontext);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		shared = NULL;
		off_reason = "The counters' shared memory could not be attached in this session.";
		ereport(WARNING,
				(errmsg("fencing counters are off in this session"),
				 errdetail("Attaching their shared memory failed: %s",
						   edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcontext);
	CurrentResourceOwner = oldowner;
	return true;
}
#endif

/* Free the entries of databases that no longer exist. */
static void
free_dropped_entries(void)
{
	for (int i = 0; i < STATS_DATABASES; i++)
	{
		StatsEntry *e = &shared->entries[i];
		Oid			db = pg_atomic_read_u32(&e->dboid);

		if (OidIsValid(db) &&
			!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(db)))
		{
			SpinLockAcquire(&shared->mutex);
			if (pg_atomic_read_u32(&e->dboid) == db)
				pg_atomic_write_u32(&e->dboid, InvalidOid);
			SpinLockRelease(&shared->mutex);
		}
	}
}

/* The entry of database "db", if it has one. */
static StatsEntry *
find_entry(Oid db)
{
	for (int i = 0; i < STATS_DATABASES; i++)
		if (pg_atomic_read_u32(&shared->entries[i].dboid) == db)
			return &shared->entries[i];
	return NULL;
}

/* This database's entry, claiming a free one; NULL if the table is full. */
static StatsEntry *
claim_entry(void)
{
	TimestampTz now = GetCurrentTimestamp();
	StatsEntry *found = find_entry(MyDatabaseId);
	StatsEntry *free_entry = NULL;

	if (found != NULL)
		return found;
	SpinLockAcquire(&shared->mutex);
	for (int i = 0; i < STATS_DATABASES && found == NULL; i++)
	{
		StatsEntry *e = &shared->entries[i];
		Oid			db = pg_atomic_read_u32(&e->dboid);

		if (db == MyDatabaseId)
			found = e;
		else if (db == InvalidOid && free_entry == NULL)
			free_entry = e;
	}
	if (found == NULL && free_entry != NULL)
	{
		reset_entry(free_entry, now);
		/* zeroed before anyone can find it, and add to it */
		pg_write_barrier();
		pg_atomic_write_u32(&free_entry->dboid, MyDatabaseId);
		found = free_entry;
	}
	SpinLockRelease(&shared->mutex);
	return found;
}

/*
 * This database's entry, or NULL when this backend does not count now
 * (off_reason says why, when it never will).  A full table is looked at
 * again a second later, at the first count or look of a statement.
 */
static StatsEntry *
my_entry(void)
{
	if (entry != NULL)
		return entry;
	if (off_reason != NULL && !table_full)
		return NULL;
	if (!OidIsValid(MyDatabaseId))
		return NULL;
	if (table_full &&
		GetCurrentStatementStartTimestamp() < table_full_retry_at)
		return NULL;
#if PG_VERSION_NUM >= 170000
	if (shared == NULL && !attach_guarded())
		return NULL;
#endif
	if (shared == NULL)
	{
		if (off_reason == NULL)
			off_reason = "PostgreSQL 15 and 16 count only with fencing in shared_preload_libraries.";
		return NULL;
	}
	entry = claim_entry();
	if (entry == NULL && IsTransactionState())
	{
		free_dropped_entries();
		entry = claim_entry();
	}
	table_full = entry == NULL;
	if (table_full)
	{
		off_reason = "Every entry of the counters' table is taken by other databases.";
		table_full_retry_at = GetCurrentStatementStartTimestamp() +
			TABLE_FULL_RETRY_USECS;
	}
	else
		off_reason = NULL;
	return entry;
}

/* ---- counting ---- */

static void
add_now(FencingStat stat, uint64 n)
{
	StatsEntry *e = my_entry();

	if (e != NULL)
		pg_atomic_fetch_add_u64(&e->counters[stat], n);
}

/* A lease event, kept with the current (sub)transaction level. */
static void
add_at_commit(FencingStat stat)
{
	int			level = GetCurrentTransactionNestLevel();

	/* attached now, while we are in the transaction */
	if (my_entry() == NULL)
		return;
	if (npending == 0 || pending[npending - 1].level < level)
	{
		if (npending == maxpending)
		{
			maxpending = Max(8, maxpending * 2);
			if (pending == NULL)
				pending = MemoryContextAlloc(TopMemoryContext,
											 maxpending * sizeof(PendingFrame));
			else
				pending = repalloc(pending, maxpending * sizeof(PendingFrame));
		}
		memset(&pending[npending], 0, sizeof(PendingFrame));
		pending[npending].level = level;
		npending++;
	}
	pending[npending - 1].counts[stat]++;
}

void
fencing_stats_count(FencingStat stat)
{
	if (stat < FENCING_STAT_FIRST_AT_ONCE)
		add_at_commit(stat);
	else
		add_now(stat, 1);
}

/* An acquire got its token: at commit, an acquire, maybe an expiry. */
void
fencing_stats_acquired(bool takeover, bool expired)
{
	fencing_stats_count(FENCING_STAT_ACQUIRES);
	if (expired)
		fencing_stats_count(FENCING_STAT_EXPIRATIONS);
	if (takeover)
		fencing_stats_count(FENCING_STAT_TAKEOVERS);
}

/*
 * An acquire that started at start_usecs (INSTR_TIME microseconds, the
 * monotonic clock) has to wait; its wait lasts from then on.  Once per
 * call: later calls do nothing.
 */
void
fencing_stats_wait_begin(int64 start_usecs)
{
	if (wait_started || my_entry() == NULL)
		return;
	add_now(FENCING_STAT_WAITS, 1);
	wait_started = true;
	wait_level = GetCurrentTransactionNestLevel();
	wait_start_usecs = start_usecs;
}

/*
 * The wait ends with the lease or with its time run out: observe its
 * duration.  A wait that an error ends is dropped by the abort.
 */
void
fencing_stats_wait_end(bool acquired)
{
	instr_time	now;
	int64		usecs;
	int			b = 0;

	if (!wait_started)
		return;
	wait_started = false;
	INSTR_TIME_SET_CURRENT(now);
	usecs = Max((int64) INSTR_TIME_GET_MICROSEC(now) - wait_start_usecs, 0);
	while (b < WAIT_BOUNDS && usecs > wait_bucket_usecs[b])
		b++;
	if (!acquired)
		add_now(FENCING_STAT_WAIT_TIMEOUTS, 1);
	pg_atomic_fetch_add_u64(&entry->wait_buckets[b], 1);
	pg_atomic_fetch_add_u64(&entry->wait_usecs, (uint64) usecs);
}

/* ---- prepared transactions ---- */

/* A FREE slot made RESERVED, or NULL if there is none. */
static PreparedEvents *
reserve_slot(void)
{
	for (int i = 0; i < shared->nprepared; i++)
	{
		PreparedEvents *p = &shared->prepared[i];
		uint32		expected = PREPARED_FREE;

		if (pg_atomic_read_u32(&p->state) == PREPARED_FREE &&
			pg_atomic_compare_exchange_u32(&p->state, &expected,
										   PREPARED_RESERVED))
		{
			pg_atomic_fetch_add_u32(&shared->prepared_used, 1);
			return p;
		}
	}
	return NULL;
}

static void
free_slot(PreparedEvents *p)
{
	pg_atomic_write_u32(&p->state, PREPARED_FREE);
	pg_atomic_fetch_sub_u32(&shared->prepared_used, 1);
}

/*
 * Count the events of prepared transactions that have committed since, in
 * their databases' entries, and drop those of the ones that rolled back
 * (or are too old for pg_xact to say).  Any backend may do it, for every
 * database: the one that moves a slot from PREPARED to RESOLVING counts
 * it.  Needs a transaction (pg_xact_status looks at the procarray and at
 * pg_xact).
 */
static void
resolve_prepared(void)
{
	if (shared == NULL || pg_atomic_read_u32(&shared->prepared_used) == 0)
		return;
	for (int i = 0; i < shared->nprepared; i++)
	{
		PreparedEvents *p = &shared->prepared[i];
		uint32		expected = PREPARED_READY;
		LOCAL_FCINFO(fcinfo, 1);
		Datum		status;
		bool		committed;
		StatsEntry *e;

		if (pg_atomic_read_u32(&p->state) != PREPARED_READY)
			continue;
		pg_read_barrier();
		InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = FullTransactionIdGetDatum(p->fxid);
		fcinfo->args[0].isnull = false;
		status = pg_xact_status(fcinfo);
		if (!fcinfo->isnull &&
			strcmp(TextDatumGetCString(status), "in progress") == 0)
			continue;
		committed = !fcinfo->isnull &&
			strcmp(TextDatumGetCString(status), "committed") == 0;
		if (!pg_atomic_compare_exchange_u32(&p->state, &expected,
											PREPARED_RESOLVING))
			continue;
		e = committed ? find_entry(p->dboid) : NULL;
		for (int c = 0; c < FENCING_STAT_FIRST_AT_ONCE && e != NULL; c++)
			if (p->counts[c] > 0)
				pg_atomic_fetch_add_u64(&e->counters[c], p->counts[c]);
		free_slot(p);
	}
}

/*
 * PRE_PREPARE: reserve a slot for the transaction's lease events, making
 * room by resolving the slots of transactions that have ended.  None left
 * (more prepared transactions at once than max_prepared_transactions
 * allows, which PREPARE refuses anyway): the events are dropped.
 */
static void
reserve_for_prepare(void)
{
	if (npending == 0 || entry == NULL || shared == NULL)
		return;
	reserved = reserve_slot();
	if (reserved == NULL)
	{
		resolve_prepared();
		reserved = reserve_slot();
	}
}

/* PREPARE: the transaction is prepared; its events wait in its slot. */
static void
fill_prepared(void)
{
	PreparedEvents *p = reserved;
	FullTransactionId fxid = GetTopFullTransactionIdIfAny();

	reserved = NULL;
	if (p == NULL)
		return;
	if (!FullTransactionIdIsValid(fxid))
	{
		free_slot(p);
		return;
	}
	p->dboid = MyDatabaseId;
	p->fxid = fxid;
	memset(p->counts, 0, sizeof(p->counts));
	for (int f = 0; f < npending; f++)
		for (int c = 0; c < FENCING_STAT_FIRST_AT_ONCE; c++)
			p->counts[c] += pending[f].counts[c];
	pg_write_barrier();
	pg_atomic_write_u32(&p->state, PREPARED_READY);
}

static void
stats_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
			for (int f = 0; f < npending && entry != NULL; f++)
				for (int c = 0; c < FENCING_STAT_FIRST_AT_ONCE; c++)
					if (pending[f].counts[c] > 0)
						pg_atomic_fetch_add_u64(&entry->counters[c],
												pending[f].counts[c]);
			npending = 0;
			wait_started = false;
			break;
		case XACT_EVENT_PRE_PREPARE:
			reserve_for_prepare();
			break;
		case XACT_EVENT_PREPARE:
			fill_prepared();
			npending = 0;
			wait_started = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			if (reserved != NULL)
				free_slot(reserved);
			reserved = NULL;
			npending = 0;
			wait_started = false;
			break;
		default:
			break;
	}
}

/*
 * A committed subtransaction's events go to its parent's level; an
 * aborted one's are dropped.  Frames below the subtransaction's level are
 * its ancestors' and stay.
 */
static void
stats_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	PendingFrame *top = npending > 0 ? &pending[npending - 1] : NULL;

	switch (event)
	{
		case SUBXACT_EVENT_COMMIT_SUB:
			if (top == NULL || top->level != level)
				break;
			if (npending >= 2 && pending[npending - 2].level == level - 1)
			{
				for (int c = 0; c < FENCING_STAT_FIRST_AT_ONCE; c++)
					pending[npending - 2].counts[c] += top->counts[c];
				npending--;
			}
			else
				top->level = level - 1;
			break;
		case SUBXACT_EVENT_ABORT_SUB:
			if (top != NULL && top->level == level)
				npending--;
			if (wait_started && wait_level >= level)
				wait_started = false;
			break;
		default:
			break;
	}
}

/*
 * At library load: with shared_preload_libraries, reserve the table in the
 * main shared memory; else (17+) attach to its segment now, where a
 * backend loads us: in a transaction, before anything of ours runs in
 * parallel mode.
 */
void
fencing_stats_init(void)
{
	RegisterXactCallback(stats_xact_callback, NULL);
	RegisterSubXactCallback(stats_subxact_callback, NULL);
	if (process_shared_preload_libraries_in_progress)
	{
		prev_shmem_request_hook = shmem_request_hook;
		shmem_request_hook = stats_shmem_request;
		prev_shmem_startup_hook = shmem_startup_hook;
		shmem_startup_hook = stats_shmem_startup;
		return;
	}
#if PG_VERSION_NUM >= 170000
	if (IsUnderPostmaster && shared == NULL)
		(void) attach_guarded();
#endif
}

/* ---- reading and resetting ---- */

#define STATS_COLS	(3 + FENCING_STAT_COUNT + 1)

/*
 * fencing._stats(): counting, detail, stats_reset, the counters in the
 * order of FencingStat, and the total wait time in milliseconds; the
 * counters are NULL when this database does not count.
 */
Datum
fencing_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[STATS_COLS];
	bool		nulls[STATS_COLS];
	StatsEntry *e = my_entry();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE ||
		tupdesc->natts != STATS_COLS)
		elog(ERROR, "fencing._stats() must return %d columns", STATS_COLS);
	if (e != NULL)
		resolve_prepared();
	memset(nulls, e == NULL, sizeof(nulls));
	values[0] = BoolGetDatum(e != NULL);
	nulls[0] = false;
	if (e == NULL)
	{
		values[1] = CStringGetTextDatum(off_reason ? off_reason :
										"The counters cannot be attached in this transaction.");
		nulls[1] = false;
	}
	else
	{
		nulls[1] = true;
		values[2] = TimestampTzGetDatum((TimestampTz) pg_atomic_read_u64(&e->stats_reset));
		for (int c = 0; c < FENCING_STAT_COUNT; c++)
			values[3 + c] = Int64GetDatum((int64) pg_atomic_read_u64(&e->counters[c]));
		values[STATS_COLS - 1] =
			Float8GetDatum((double) pg_atomic_read_u64(&e->wait_usecs) / 1000.0);
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * fencing._stats_wait_histogram(): one row per bucket, (upper_ms, waits),
 * waits cumulative as in Prometheus; no rows when not counting.
 */
Datum
fencing_stats_wait_histogram(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	uint64	   *cumulative;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext oldcontext;
		TupleDesc	tupdesc;
		StatsEntry *e = my_entry();
		uint64		sum = 0;

		funcctx = SRF_FIRSTCALL_INIT();
		oldcontext = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		funcctx->tuple_desc = BlessTupleDesc(tupdesc);
		cumulative = palloc(WAIT_BUCKETS * sizeof(uint64));
		for (int b = 0; b < WAIT_BUCKETS && e != NULL; b++)
		{
			sum += pg_atomic_read_u64(&e->wait_buckets[b]);
			cumulative[b] = sum;
		}
		funcctx->user_fctx = cumulative;
		funcctx->max_calls = e != NULL ? WAIT_BUCKETS : 0;
		MemoryContextSwitchTo(oldcontext);
	}
	funcctx = SRF_PERCALL_SETUP();
	cumulative = funcctx->user_fctx;
	if (funcctx->call_cntr < funcctx->max_calls)
	{
		int			b = (int) funcctx->call_cntr;
		Datum		values[2];
		bool		nulls[2] = {false, false};

		values[0] = Float8GetDatum(b < WAIT_BOUNDS ?
								   (double) wait_bucket_usecs[b] / 1000.0 :
								   get_float8_infinity());
		values[1] = Int64GetDatum((int64) cumulative[b]);
		SRF_RETURN_NEXT(funcctx, HeapTupleGetDatum(heap_form_tuple(funcctx->tuple_desc,
																	 values, nulls)));
	}
	SRF_RETURN_DONE(funcctx);
}

/*
 * fencing.stats_reset(): this database's counters back to zero; returns
 * the new stats_reset.  Not transactional, as pg_stat_statements_reset().
 * Not open to PUBLIC (the install script revokes it).
 */
Datum
fencing_stats_reset(PG_FUNCTION_ARGS)
{
	StatsEntry *e = my_entry();
	TimestampTz now = GetCurrentTimestamp();

	if (e == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fencing counters are off"),
				 errdetail("%s", off_reason ? off_reason :
						   "The counters cannot be attached in this transaction."),
				 errhint("See fencing_monitor.stats_info.")));
	/* prepared transactions committed before now count before the reset */
	resolve_prepared();
	reset_entry(e, now);
	PG_RETURN_TIMESTAMPTZ(now);
}
