/*-------------------------------------------------------------------------
 *
 * token.c
 *	  The fencing token source: a bigint that never goes backwards.
 *
 * A token is the next value of the sequence fencing.token_seq, with two
 * additions that a plain nextval() lacks:
 *
 * 1. Durability before use.  nextval() WAL-logs ahead but does not flush,
 *	  so after a crash (with synchronous_commit = off, or before the
 *	  transaction commits) a value a client already saw is handed out again.
 *	  We flush WAL up to the sequence page's LSN before returning a token.
 *	  That costs a WAL flush once per 32 tokens at most.
 *
 * 2. Timeline bands.  A promoted asynchronous standby, or a cluster after
 *	  point-in-time recovery, may have missed the tail of the WAL of the
 *	  history it continues, so its copy of the counter can be far behind
 *	  tokens the old primary acknowledged.  Both start a new WAL timeline,
 *	  so we split the token space into bands of 2^44 values and give every
 *	  timeline its own band: band = timeline + K.  On a cluster never
 *	  promoted the band is 0 and tokens read 1, 2, 3, ...  After promotion
 *	  to timeline T+1, tokens start above every value band T could hold.
 *
 * K is kept only in non-transactional, WAL-logged state (two more
 * sequences), never in a table: an aborted transaction must not be able
 * to leave behind a band that some other history computes differently.
 * fencing.token_base holds (timeline << 20 | band) for the last band
 * entered and fencing.token_origin a hash of (system identifier, database
 * OID).  Changes are made in the order base, origin, counter, each before
 * any token of the new band is returned, so a standby's copy is always a
 * prefix of that history and computes the same or a higher band.
 *
 * A database restored by pg_dump, or copied to another database or
 * cluster, has a foreign origin; it jumps to a band above both the
 * restored base and the restored counter, so its tokens exceed every
 * token the source had issued in those bands, even after the dump.  The
 * origin also hashes a random number drawn at CREATE EXTENSION and kept
 * in fencing.token_install, which pg_dump does not dump, so a dump
 * restored into the very database it came from is foreign too.
 *
 * Each backend remembers the band it verified and the LSN of the
 * token_base page at that time; a changed LSN means someone (a restore,
 * advance_tokens) moved the state, and the band is verified again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xlog.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "token.h"
/* fencing_is_lease_admin, fencing_writing_leases: to go (issue 12) */
#include "lease.h"

#define TOKEN_BAND_BITS		44
#define BASE_BAND_BITS		20
#define BASE_BAND_MASK		((INT64CONST(1) << BASE_BAND_BITS) - 1)
#define MAX_TOKEN_BAND		((INT64CONST(1) << (63 - TOKEN_BAND_BITS)) - 1)

/* timeline whose band this backend has verified, the band's end, and
 * the LSN of the token_base page then */
static TimeLineID verified_timeline = 0;
static int64 verified_band_end = 0;
static XLogRecPtr verified_base_lsn = InvalidXLogRecPtr;

FENCING_FUNCTION(fencing_next_token);
FENCING_FUNCTION(fencing_bind_token_origin);
FENCING_FUNCTION(fencing_advance_tokens);
FENCING_FUNCTION(fencing_leases_restored);

void
fencing_forget_token_band(void)
{
	verified_timeline = 0;
	verified_band_end = 0;
	verified_base_lsn = InvalidXLogRecPtr;
}

/* LSN of the last WAL record that changed a sequence */
static XLogRecPtr
sequence_lsn(Oid seqoid)
{
	Relation	rel = relation_open(seqoid, AccessShareLock);
	Buffer		buf = ReadBuffer(rel, 0);
	XLogRecPtr	lsn;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	lsn = BufferGetLSNAtomic(buf);
	UnlockReleaseBuffer(buf);
	relation_close(rel, AccessShareLock);
	return lsn;
}

/*
 * The timeline new WAL is written on.  SQL can only see the timeline of the
 * last checkpoint, which lags right after promotion.
 */
static TimeLineID
insertion_timeline(void)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot issue fencing tokens during recovery"),
				 errhint("Fencing tokens are issued only by a primary server.")));
#if PG_VERSION_NUM >= 150000
	return GetWALInsertionTimeLine();
#else
	return ThisTimeLineID;
#endif
}

/*
 * Identity of this installation: cluster, database, and the random number
 * drawn at CREATE EXTENSION.  A restored or copied database has another.
 */
static int64
database_origin(int64 install_nonce)
{
	struct
	{
		uint64		sysid;
		uint64		nonce;
		Oid			dboid;
	}			id;

	memset(&id, 0, sizeof(id));
	id.sysid = GetSystemIdentifier();
	id.nonce = (uint64) install_nonce;
	id.dboid = MyDatabaseId;
	return (int64) hash_bytes_extended((const unsigned char *) &id,
									   sizeof(id), 0);
}

static void
set_sequence(Oid seqoid, int64 value)
{
	DirectFunctionCall3(setval3_oid,
						ObjectIdGetDatum(seqoid),
						Int64GetDatum(value),
						BoolGetDatum(true));
}

static int64
spi_int8_column(int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								  col, &isnull);

	return isnull ? 0 : DatumGetInt64(d);
}

/* Current values of the token sequences; an unused counter reads 0. */
static void
read_token_state(int64 *counter, int64 *base, int64 *origin, int64 *nonce)
{
	int			rc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	rc = SPI_execute("SELECT (SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END"
					 "          FROM fencing.token_seq AS s),"
					 "       (SELECT b.last_value FROM fencing.token_base AS b),"
					 "       (SELECT o.last_value FROM fencing.token_origin AS o),"
					 "       (SELECT i.last_value FROM fencing.token_install AS i)",
					 true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the fencing token state");
	*counter = spi_int8_column(1);
	*base = spi_int8_column(2);
	*origin = spi_int8_column(3);
	*nonce = spi_int8_column(4);
	SPI_finish();
}

static void
token_space_exhausted(TimeLineID tli)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_TOKEN_EXHAUSTED),
			 errmsg("fencing token space of timeline %u is exhausted", tli),
			 errdetail("Each timeline has 2^%d tokens.", TOKEN_BAND_BITS),
			 errhint("Promote a standby to move to a new timeline.")));
}

/*
 * Make sure the counter is inside the band of timeline "tli" and remember
 * the band's end.  Runs once per backend and timeline, as the owner.
 */
static void
verify_token_band(const FencingCatalog *cat, TimeLineID tli, int64 floor)
{
	int64		origin_now;
	int64		counter,
				base,
				origin,
				nonce;
	int64		base_tli,
				base_band,
				counter_band,
				band;

	/* one band check at a time; token issuers are not blocked */
	LockRelationOid(cat->token_base_oid, ShareUpdateExclusiveLock);

	read_token_state(&counter, &base, &origin, &nonce);
	origin_now = database_origin(nonce);
	base_tli = base >> BASE_BAND_BITS;
	base_band = base & BASE_BAND_MASK;
	counter_band = counter >> TOKEN_BAND_BITS;

	if (origin == origin_now && (int64) tli == base_tli)
		band = base_band;
	else if (origin == origin_now && (int64) tli > base_tli)
		band = base_band + ((int64) tli - base_tli);
	else
	{
		/* restored, copied, or the timeline went backwards: jump past all */
		band = Max(base_band, counter_band) + (int64) tli;
	}
	band = Max(band, counter_band);
	/* advance_tokens: everything issued from now on exceeds "floor" */
	band = Max(band, floor >> TOKEN_BAND_BITS);
	if (band > MAX_TOKEN_BAND)
		token_space_exhausted(tli);

	if (base != (((int64) tli << BASE_BAND_BITS) | band))
		set_sequence(cat->token_base_oid, ((int64) tli << BASE_BAND_BITS) | band);
	if (origin != origin_now)
		set_sequence(cat->token_origin_oid, origin_now);
	if (counter < Max(band << TOKEN_BAND_BITS, floor))
		set_sequence(cat->token_seq_oid, Max(band << TOKEN_BAND_BITS, floor));

	/*
	 * The new band must be durable before any token of it is returned. Our
	 * setval records end at XactLastRecEnd, and WAL is flushed in order.
	 * (Not GetXLogInsertRecPtr(): at a page boundary it points past a page
	 * header not yet written, and XLogFlush refuses it.)
	 */
	XLogFlush(XactLastRecEnd);

	/*
	 * The state is settled and durable: let the next backend check.  Held to
	 * transaction end, it would stall every other backend's first token
	 * behind a long transaction, such as a waiting lease_acquire.
	 */
	UnlockRelationOid(cat->token_base_oid, ShareUpdateExclusiveLock);

	verified_timeline = tli;
	verified_band_end = (band == MAX_TOKEN_BAND) ? PG_INT64_MAX :
		(band + 1) << TOKEN_BAND_BITS;
	verified_base_lsn = sequence_lsn(cat->token_base_oid);
}


/*
 * nextval() of the counter.  At the very top of the bigint range the
 * sequence itself runs out: report that as the token space being
 * exhausted, the same error as at the end of any other band.
 */
static int64
next_counter_value(Oid seqoid, TimeLineID tli)
{
	MemoryContext cxt = CurrentMemoryContext;
	int64		value = 0;

	PG_TRY();
	{
		value = nextval_internal(seqoid, false);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED)
			PG_RE_THROW();
		FlushErrorState();
		token_space_exhausted(tli);
	}
	PG_END_TRY();
	return value;
}

int64
fencing_issue_token(void)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;
	TimeLineID	tli;
	int64		token;

#ifdef FENCING_PLAIN_NEXTVAL

	/*
	 * Negative control for the test suite only: a plain nextval() with no
	 * flush and no timeline band, the design the crash, promotion, PITR and
	 * restore tests must catch.  Never build a release with this.
	 */
	cat = fencing_catalog();
	fencing_become_owner(&scope);
	token = nextval_internal(cat->token_seq_oid, false);
	fencing_restore_user(&scope);
	return token;
#endif

	tli = insertion_timeline();
	PreventCommandIfReadOnly("fencing.next_token()");
	PreventCommandIfParallelMode("fencing.next_token()");

	cat = fencing_catalog();
	fencing_become_owner(&scope);
	if (tli != verified_timeline ||
		sequence_lsn(cat->token_base_oid) != verified_base_lsn)
		verify_token_band(cat, tli, 0);
	token = next_counter_value(cat->token_seq_oid, tli);
	fencing_restore_user(&scope);

	if (token >= verified_band_end)
		token_space_exhausted(tli);
	/* WAL up to the record that covers this value, before anyone sees it */
	XLogFlush(sequence_lsn(cat->token_seq_oid));
	return token;
}

Datum
fencing_next_token(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(fencing_issue_token());
}

/*
 * Called once by the install script: this database, on this timeline,
 * starts in band 0.  pg_restore overwrites it with the source's state.
 */
Datum
fencing_bind_token_origin(PG_FUNCTION_ARGS)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;
	TimeLineID	tli;
	int64		nonce;

	if (!creating_extension)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s can only be called by CREATE EXTENSION",
						"fencing._bind_token_origin()")));

	tli = insertion_timeline();
	cat = fencing_catalog();
	if (!pg_strong_random(&nonce, sizeof(nonce)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random number")));
	nonce = (nonce & PG_INT64_MAX) | 1;

	fencing_become_owner(&scope);
	set_sequence(cat->token_install_oid, nonce);
	set_sequence(cat->token_base_oid, (int64) tli << BASE_BAND_BITS);
	set_sequence(cat->token_origin_oid, database_origin(nonce));
	fencing_restore_user(&scope);
	fencing_forget_token_band();
	PG_RETURN_VOID();
}

/*
 * Statement trigger on fencing.leases: rows inserted by anything but the
 * lease functions come from a restore (pg_restore, psql of a dump).  The
 * restore also brings back older sequence values, possibly of this very
 * installation, so draw a new install number: the origin no longer
 * matches, and the next token jumps to a band above everything restored.
 */
Datum
fencing_leases_restored(PG_FUNCTION_ARGS)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;
	int64		nonce;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be called as a trigger",
						"fencing._leases_restored()")));
	if (fencing_writing_leases)
		return PointerGetDatum(NULL);

	if (!pg_strong_random(&nonce, sizeof(nonce)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random number")));
	cat = fencing_catalog();
	fencing_become_owner(&scope);
	set_sequence(cat->token_install_oid, (nonce & PG_INT64_MAX) | 1);
	fencing_restore_user(&scope);
	fencing_forget_token_band();
	return PointerGetDatum(NULL);
}

/*
 * advance_tokens(floor): every token issued from now on exceeds "floor".
 * For a database whose resources carry fences from before its token
 * history was lost: DROP EXTENSION, a physical copy started without
 * recovery, a restore of an older dump.  Never moves tokens backwards.
 */
Datum
fencing_advance_tokens(PG_FUNCTION_ARGS)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;
	TimeLineID	tli;
	int64		floor;

	if (!fencing_is_lease_admin(GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for fencing.advance_tokens"),
				 errdetail("Only superusers and members of role fencing_admin may call it.")));
	fencing_require_arg(fcinfo, 0, "token floor");
	floor = PG_GETARG_INT64(0);
	if (floor < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("token floor must not be negative")));
	if (floor == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("token floor must be below the largest bigint"),
				 errdetail("No token could be issued above it.")));

	tli = insertion_timeline();
	PreventCommandIfReadOnly("fencing.advance_tokens()");
	cat = fencing_catalog();
	fencing_become_owner(&scope);
	verify_token_band(cat, tli, floor);
	fencing_restore_user(&scope);
	PG_RETURN_VOID();
}
