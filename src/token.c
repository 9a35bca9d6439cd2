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
 * 2. Band entries.  Whenever this database's token history may have
 *	  diverged from another, the token source enters a new band: its next
 *	  token is
 *
 *		  max(counter + 1, wall clock at band entry in microseconds since
 *			  the Unix epoch + the current band's offset, any floor + 1)
 *
 *	  an HLC-style floor.  A band's offset is how far its start is above
 *	  the clock reading its entry used: 0 unless the counter or a floor was
 *	  ahead of the clock (fencing.advance_tokens() with a floor in the
 *	  future, lease rows from a node whose clock runs ahead).  A clock-mode
 *	  entry keeps at least the offset it leaves, so under the rate
 *	  assumption below every token of a band is at most the clock plus its
 *	  offset, also while the counter is ahead of the clock: a band entered
 *	  after it on another branch of the history (a promoted standby that
 *	  has the band, but not the tokens drawn after it) starts above them.
 *	  The history may have diverged when the insertion timeline changed (a
 *	  promotion, point-in-time recovery: the standby may have missed the
 *	  tail of the WAL, and a second standby promoted independently gets the
 *	  *same* timeline ID), when the state was restored or copied from
 *	  elsewhere, when lease rows arrived by logical replication or a
 *	  restore (fencing_token_history_arrived), on the first token of a
 *	  fresh installation, on fencing.advance_tokens(), and when
 *	  fencing.epoch_file is set or emptied (the mode follows the setting at
 *	  once: a band of the other mode is not current).  Two nodes that never
 *	  talked still issue disjoint tokens as long as node
 *	  clocks agree to better than the time between two promotions and a node
 *	  issues fewer than one token per microsecond on average since its band
 *	  entry: the earlier band's tokens then stay below the later band's
 *	  start.  Tokens stay below 2^53 (exact in JSON) until the year 2255,
 *	  less any offset a band carries.
 *
 * 3. The clock floor (clock mode).  Between band entries the counter never
 *	  lags the wall clock plus the band's offset by more than
 *	  fencing.max_clock_lag (100 ms): a draw further behind raises the
 *	  counter to the clock plus the offset first (raise_to_clock), at most
 *	  once per max_clock_lag of real time.  So a primary that was frozen
 *	  while a standby was promoted and issued tokens, and whose history then
 *	  went on instead of the standby's (a paused VM, an HA manager that
 *	  hands the role back), issues above the standby's tokens without a
 *	  promotion of its own: the standby's band has at least the primary's
 *	  offset, so its tokens are at most the clock plus that offset when
 *	  they are drawn.  A raise is not a band entry: tokens issued before it
 *	  stay valid.  A token above the counter was issued by no token source
 *	  of this history, and is refused like one from before the band.
 *
 *	  With fencing.epoch_file set, the floor comes from an epoch the HA
 *	  manager writes from its consensus store before promoting, and no clock
 *	  is involved: epoch e owns the tokens [e << 40, (e + 1) << 40).  A band
 *	  entry after a new timeline, a restore or a copy needs an epoch greater
 *	  than the band's (after a restore, pg_upgrade or a reinstall, also
 *	  greater than any this database entered a band with before); no token
 *	  is issued until the file has one.
 *
 * The state is kept only in non-transactional, WAL-logged sequences, never
 * in a table: an aborted transaction must not leave behind a band that
 * some other history computes differently.
 *
 *	C  fencing.token_seq		the counter (dumped)
 *	B  fencing.token_base		first token of the current band, 0: none yet
 *								(dumped)
 *	O  fencing.token_origin		hash of (system identifier, database OID)
 *								of the database that entered the band
 *								(dumped)
 *	N  fencing.token_band		the band's epoch and timeline, and two flags:
 *								PENDING, a band entry is due (history
 *								arrived, advance_tokens(), an entry under
 *								way), and RESTORED, the entry under way
 *								follows a restore or a first install
 *								(dumped)
 *	F  fencing.token_band_offset	B minus the wall clock the entry read
 *								(clock mode; 0 in epoch mode or before any
 *								band) (dumped)
 *	W  fencing.token_witness	the LSN of O's page as we last wrote it
 *								(not dumped)
 *
 * The state is this database's own ("ours") while O is our origin and W is
 * O's page LSN.  A restore into another database or cluster brings a
 * foreign O; one into the same database (or pg_upgrade, which dumps and
 * restores it) rewrites O's page, whose LSN then no longer matches W.  Only
 * a band entry that follows a restore or a first install writes O and W:
 * no other write of ours touches them, so none can make the state look
 * restored.
 *
 * N's page is the mark.  Every writer of the state holds the band lock
 * exclusively and writes N first (its own value, or with a flag), and only
 * then reads the counter it moves up; an issuer takes no lock, and
 * discards a value it drew if N's page LSN moved since it verified the
 * band.  A value drawn before the mark is counted in what the writer
 * reads, so setval() never moves the counter below a token someone was
 * given.  The records, in order:
 *
 *	band entry		N|PENDING[|RESTORED], O and W (only if not ours), F,
 *					C (if below the start), B, N = the new band (flags
 *					clear); WAL flushed before a token of the band is
 *					returned
 *	raise			N (unchanged), C
 *	history arrived	N|PENDING, C; WAL flushed
 *
 * classify() judges the state, first match wins:
 *
 *	B = 0						FIRST		no band yet: a fresh install
 *	not ours					REPLACED	restored or copied from elsewhere
 *	N's timeline is not ours	TIMELINE	a promotion or PITR
 *	RESTORED					REPLACED	an entry after a restore is under way
 *	N's mode is not the setting	MODE		fencing.epoch_file set or emptied
 *	PENDING						ARRIVED		history arrived, advance_tokens()
 *	otherwise					CURRENT
 *
 * The invariant under partial WAL: a crash-recovered primary (same
 * timeline), a promoted standby or a point-in-time recovery (new timeline)
 * may see any prefix of those records, and for each:
 *
 *	- a raise: its first record changes no value, its second only moves the
 *	  counter up.  classify() returns what it returned before the raise:
 *	  CURRENT after a crash (a live lease stays valid), TIMELINE on a new
 *	  timeline (our own history: tokens from before the failover are
 *	  refused).
 *	- a band entry: from the mark to the last record, the entry is due and
 *	  its reason is still there: N keeps the old timeline; B stays 0 on a
 *	  first install; a restored state stays not ours until the mark has
 *	  set RESTORED, which keeps it a restore once O and W are ours.  So
 *	  classify() returns the entry it did before (or TIMELINE, if the
 *	  prefix is seen on a new timeline), never CURRENT.  A state that was
 *	  ours stays ours at every prefix, so it keeps refusing tokens from
 *	  before its band (a promoted standby: all of them); one that was not
 *	  is still judged a restore (REPLACED, or TIMELINE on a new timeline,
 *	  which refuses more).  F comes before B: a prefix holds the old band's
 *	  offset or the new one, which is no smaller, so the repeated entry
 *	  starts above whatever the interrupted band issued elsewhere.  (The
 *	  clock reading itself, stored instead, would pair the new reading with
 *	  the old B and understate the offset.)
 *	- history arrived: ARRIVED, or the stronger entry the state was due.
 *
 * Why that is safe: no token of a band is returned before its last record
 * is flushed, and every token is flushed before it is returned, so a
 * prefix has handed out nothing of its own and its counter is at least
 * every token returned before it; a repeated entry starts above that
 * counter, in epoch mode needs at least the epoch the interrupted one
 * needed (RESTORED keeps a restore's floor, which the interrupted entry
 * already raised to its own epoch: one more is needed), and a token of its
 * band is above every token of the history it continues.
 *
 * Tokens issued before the current band entry may have fenced data that
 * the new band's history does not have (an asynchronous failover loses the
 * tail): fencing_check_token_band() refuses them for resources in this
 * database when the state is ours (CURRENT, ARRIVED, MODE: below B;
 * TIMELINE: all of them, until the band is entered), and tokens above the
 * counter too (another history's).  A database that never issued a token
 * (a resource-only database, a Citus worker) or whose state came from
 * elsewhere (FIRST, REPLACED) only compares numbers.
 *
 * Epoch mode keeps one more record outside the dumped state: the greatest
 * epoch each database entered a band with, in a file of the data directory
 * (fencing_epochs/<database name in hex>).  A restore, pg_upgrade or DROP and
 * CREATE EXTENSION brings back or forgets the dumped epoch; the file does
 * not go back with it, so the first band after one needs a greater epoch.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/fd.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "token.h"

/* the lease layer's: called once this backend has entered a new band */
static void (*band_entered_callback) (void) = NULL;

/* epoch e owns [e << EPOCH_SHIFT, (e + 1) << EPOCH_SHIFT) */
#define EPOCH_SHIFT			40
#define MAX_EPOCH			((INT64CONST(1) << (63 - EPOCH_SHIFT)) - 2)

/* token_band: flags << 56 | epoch << 32 | timeline */
#define BAND_TLI(b)			((TimeLineID) ((uint64) (b) & 0xFFFFFFFF))
#define BAND_EPOCH(b)		(((b) >> 32) & 0xFFFFFF)
#define BAND_VALUE(e, tli)	(((int64) (e) << 32) | (int64) (tli))
/* a band entry is due: history arrived, advance_tokens(), an entry under way */
#define BAND_PENDING		(INT64CONST(1) << 56)
/* the entry under way follows a restore or a first install */
#define BAND_RESTORED		(INT64CONST(1) << 57)

/* where epoch mode keeps the greatest epoch of each database's bands */
#define EPOCH_FLOOR_DIR		"fencing_epochs"

/*
 * Clock mode: a token lags the wall clock by at most fencing.max_clock_lag.
 * A draw further behind raises the counter to the clock first
 * (raise_to_clock): one raise per max_clock_lag of real time at most,
 * whatever the rate.
 */
#define CLOCK_LAG_USECS		((int64) max_clock_lag_ms * 1000)

/* what classify() finds: the band is current, or why one is entered */
typedef enum BandEntry
{
	BAND_CURRENT,				/* none needed */
	BAND_FIRST,					/* no band yet: a fresh installation */
	BAND_REPLACED,				/* state restored or copied from elsewhere */
	BAND_TIMELINE,				/* a promotion or PITR: new timeline */
	BAND_MODE,					/* fencing.epoch_file was set or emptied */
	BAND_ARRIVED				/* history arrived, or an explicit call */
} BandEntry;

typedef struct TokenState
{
	int64		counter;		/* last value of token_seq, 0 if unused */
	int64		start;
	int64		origin;
	int64		band;
	int64		witness;
	int64		offset;			/* the band's start above its entry's clock */
	XLogRecPtr	origin_lsn;		/* LSN of token_origin's page */
	XLogRecPtr	band_lsn;		/* LSN of token_band's page: the mark */
} TokenState;

/* the band this backend verified */
static struct
{
	bool		valid;
	TimeLineID	tli;			/* insertion timeline then */
	bool		epoch_mode;		/* fencing.epoch_file was set then */
	XLogRecPtr	band_lsn;		/* token_band's page LSN then */
	XLogRecPtr	origin_lsn;		/* token_origin's page LSN then */
	bool		issuer;			/* our own history: refuse tokens before it */
	bool		entry_due;		/* a band entry comes before the next token */
	int64		start;			/* an issuer refuses tokens below */
	int64		end;			/* tokens stay below */
	bool		clock_band;		/* the band follows the wall clock */
	int64		offset;			/* the counter follows clock + offset */
	int64		counter_seen;	/* the counter was at least this */
}			verified;

/* a floor this backend recorded for arrived history, and the LSN then */
static int64 arrived_floor = 0;
static XLogRecPtr arrived_lsn = InvalidXLogRecPtr;

/* GUCs */
static char *epoch_file = NULL;
static bool refuse_old_band = true;
static int	max_clock_lag_ms = 100;

FENCING_FUNCTION(fencing_next_token);
FENCING_FUNCTION(fencing_bind_token_origin);
FENCING_FUNCTION(fencing_advance_tokens);

void
fencing_token_init(void)
{
	DefineCustomStringVariable("fencing.epoch_file",
							   "File with the epoch that token bands derive from, instead of the clock.",
							   "A path relative to the data directory, holding one decimal integer "
							   "that the HA manager raises before each promotion. Empty: bands start "
							   "at the wall clock.",
							   &epoch_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);
	DefineCustomIntVariable("fencing.max_clock_lag",
							"How far the token counter may fall behind the wall clock in clock mode.",
							"A token drawn further behind raises the counter to the clock first, so that "
							"a primary that resumes after a freeze issues above the tokens of a member "
							"promoted meanwhile. Each raise flushes WAL; there is at most one per this "
							"interval.",
							&max_clock_lag_ms,
							100,
							1,
							INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("fencing.refuse_old_band",
							 "Refuse tokens issued before this database's last band entry.",
							 "Turn off where this database also guards resources with another database's tokens.",
							 &refuse_old_band,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);
}

static void
forget_token_band(void)
{
	verified.valid = false;
	arrived_floor = 0;
	arrived_lsn = InvalidXLogRecPtr;
}

/*
 * The extension's OIDs (fencing_catalog).  A reinstalled extension has a
 * new counter: what this backend verified of the old one's band is
 * forgotten, and the band checked again.
 */
static const FencingCatalog *
token_catalog(void)
{
	static Oid	known_token_seq = InvalidOid;
	const FencingCatalog *cat = fencing_catalog();

	if (cat->token_seq_oid != known_token_seq)
	{
		forget_token_band();
		known_token_seq = cat->token_seq_oid;
	}
	return cat;
}

/* epoch mode: fencing.epoch_file is set */
static bool
epoch_mode(void)
{
	return epoch_file != NULL && epoch_file[0] != '\0';
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
	return GetWALInsertionTimeLine();
}

static void
refuse_in_recovery(void)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot issue fencing tokens during recovery"),
				 errhint("Fencing tokens are issued only by a primary server.")));
}

/* Identity of this database: cluster and database.  Never 0. */
static int64
database_origin(void)
{
	struct
	{
		uint64		sysid;
		Oid			dboid;
	}			id;

	memset(&id, 0, sizeof(id));
	id.sysid = GetSystemIdentifier();
	id.dboid = MyDatabaseId;
	return (int64) (hash_bytes_extended((const unsigned char *) &id,
										sizeof(id), 0) | 1);
}

static void
set_sequence(Oid seqoid, int64 value)
{
	DirectFunctionCall3(setval3_oid,
						ObjectIdGetDatum(seqoid),
						Int64GetDatum(value),
						BoolGetDatum(true));
}

/*
 * The band lock.  Whoever writes the token state (a band entry, a raise,
 * arrived history) holds it exclusively from its mark to its last write;
 * whoever caches what it reads holds it shared, so that it never pairs a
 * state half written with the page LSN that marks it.  Not a lock on a
 * sequence: setval() holds RowExclusiveLock on those to transaction end.
 */
static void
lock_token_state(const FencingCatalog *cat, LOCKMODE mode)
{
	LockDatabaseObject(RelationRelationId, cat->token_base_oid, 0, mode);
}

static void
unlock_token_state(const FencingCatalog *cat, LOCKMODE mode)
{
	UnlockDatabaseObject(RelationRelationId, cat->token_base_oid, 0, mode);
}

/* a sequence's last value, 0 before its first nextval() or setval() */
static int64
sequence_value(Oid seqoid)
{
	LOCAL_FCINFO(fcinfo, 1);
	Datum		d;

	InitFunctionCallInfoData(*fcinfo, NULL, 1, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = ObjectIdGetDatum(seqoid);
	fcinfo->args[0].isnull = false;
	d = pg_sequence_last_value(fcinfo);
	return fcinfo->isnull ? 0 : DatumGetInt64(d);
}

/* the counter's last value, 0 if unused */
static int64
read_counter(const FencingCatalog *cat)
{
	return sequence_value(cat->token_seq_oid);
}

/*
 * Current values of the token sequences; an unused counter reads 0.  The
 * caller holds the band lock, so no writer of ours is half way.
 */
static void
read_token_state(const FencingCatalog *cat, TokenState *st)
{
	st->counter = read_counter(cat);
	st->start = sequence_value(cat->token_base_oid);
	st->origin = sequence_value(cat->token_origin_oid);
	st->band = sequence_value(cat->token_band_oid);
	st->witness = sequence_value(cat->token_witness_oid);
	st->offset = sequence_value(cat->token_offset_oid);
	st->origin_lsn = sequence_lsn(cat->token_origin_oid);
	st->band_lsn = sequence_lsn(cat->token_band_oid);
}

/* This database's own history: our origin, and no restore since we wrote it */
static bool
state_is_ours(const TokenState *st)
{
	return st->origin == database_origin() &&
		st->witness == (int64) st->origin_lsn;
}

/* Does the stored band still describe this database's history? */
static BandEntry
classify(const TokenState *st, TimeLineID tli)
{
	if (st->start == 0)
		return BAND_FIRST;
	if (!state_is_ours(st))
		return BAND_REPLACED;
	if (BAND_TLI(st->band) != tli)
		return BAND_TIMELINE;
	if (st->band & BAND_RESTORED)
		return BAND_REPLACED;
	if ((BAND_EPOCH(st->band) > 0) != epoch_mode())
		return BAND_MODE;
	if (st->band & BAND_PENDING)
		return BAND_ARRIVED;
	return BAND_CURRENT;
}

/*
 * Does the entry continue a history that went back (a restore, pg_upgrade,
 * a reinstall)?  Then in epoch mode it must also exceed every epoch this
 * database used before.
 */
static bool
history_went_back(const TokenState *st, BandEntry entry)
{
	return entry == BAND_FIRST || entry == BAND_REPLACED ||
		(st->band & BAND_RESTORED) != 0;
}

/* microseconds since the Unix epoch */
static int64
unix_clock_usecs(void)
{
	return (int64) GetCurrentTimestamp() +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

/*
 * The clock a band follows: the wall clock plus the band's offset.  Past
 * the bigint range it is the range's end: the token space is exhausted.
 */
static int64
band_clock(int64 clock, int64 offset)
{
	int64		result;

	if (offset <= 0)
		return clock;
	if (pg_add_s64_overflow(clock, offset, &result))
		return PG_INT64_MAX;
	return result;
}

/* one decimal integer from 1 to MAX_EPOCH, a newline optional */
static bool
parse_epoch(const char *buf, size_t n, int64 *epoch_out)
{
	int64		epoch = 0;
	size_t		i = 0;

	while (i < n && buf[i] >= '0' && buf[i] <= '9' && epoch <= MAX_EPOCH)
		epoch = epoch * 10 + (buf[i++] - '0');
	if (i < n && (buf[i] == '\r' || buf[i] == '\n'))
		i += (buf[i] == '\r' && i + 1 < n && buf[i + 1] == '\n') ? 2 : 1;
	if (i == 0 || i != n || epoch < 1 || epoch > MAX_EPOCH)
		return false;
	*epoch_out = epoch;
	return true;
}

/*
 * The epoch in fencing.epoch_file: one decimal integer, newline optional.
 * Written atomically (rename) by the HA manager, so one read sees all of it.
 */
static int64
read_epoch_file(void)
{
	FILE	   *f;
	char		buf[32];
	size_t		n;
	int64		epoch = 0;

	f = AllocateFile(epoch_file, "r");
	if (f == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_NO_EPOCH),
				 errmsg("could not open fencing epoch file \"%s\": %m",
						epoch_file),
				 errdetail("fencing.epoch_file is set, so token bands derive from the epoch it holds."),
				 errhint("The HA manager's pre-promote hook must write the epoch from its consensus store before promoting; no token is issued until it does.")));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	if (ferror(f))
	{
		int			save_errno = errno;

		FreeFile(f);
		errno = save_errno;
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_NO_EPOCH),
				 errmsg("could not read fencing epoch file \"%s\": %m",
						epoch_file)));
	}
	FreeFile(f);
	buf[n] = '\0';

	if (n == sizeof(buf) - 1 || !parse_epoch(buf, n, &epoch))
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_NO_EPOCH),
				 errmsg("fencing epoch file \"%s\" does not hold a valid epoch",
						epoch_file),
				 errdetail("It must hold one decimal integer from 1 to %lld, optionally followed by a newline.",
						   (long long) MAX_EPOCH)));
	return epoch;
}

/*
 * fencing_epochs/<database name in hex>, relative to the data directory.
 * By name: pg_restore --create, or DROP and CREATE DATABASE with a
 * restore, bring the same database back under a new OID.
 */
static void
epoch_floor_path(char *path, size_t size, const char *suffix)
{
	char	   *name = get_database_name(MyDatabaseId);
	char		hex[2 * NAMEDATALEN + 1];
	int			i;

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_DATABASE),
				 errmsg("database with OID %u does not exist", MyDatabaseId)));
	for (i = 0; name[i] != '\0' && i < NAMEDATALEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char) name[i]);
	hex[2 * i] = '\0';
	snprintf(path, size, "%s/%s%s", EPOCH_FLOOR_DIR, hex, suffix);
	pfree(name);
}

/*
 * The greatest epoch this database entered a band with, 0 if none.  Kept
 * in a file of the data directory, which no restore, pg_upgrade or DROP
 * EXTENSION takes back.
 */
static int64
read_epoch_floor(void)
{
	char		path[MAXPGPATH];
	FILE	   *f;
	char		buf[32];
	size_t		n;
	int64		epoch = 0;

	epoch_floor_path(path, sizeof(path), "");
	f = AllocateFile(path, "r");
	if (f == NULL)
	{
		if (errno == ENOENT)
			return 0;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	if (ferror(f))
	{
		int			save_errno = errno;

		FreeFile(f);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	}
	FreeFile(f);
	if (n == sizeof(buf) - 1 || !parse_epoch(buf, n, &epoch))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("fencing epoch floor file \"%s\" does not hold a valid epoch",
						path),
				 errdetail("It holds the greatest epoch this database entered a token band with, one decimal integer."),
				 errhint("Write that epoch into it. No token is issued until it is valid.")));
	return epoch;
}

/* Record that this database enters a band of "epoch", durably. */
static void
record_epoch_floor(int64 epoch)
{
	char		path[MAXPGPATH];
	char		tmp[MAXPGPATH];
	char		buf[32];
	int			fd;
	int			len;

	if (read_epoch_floor() >= epoch)
		return;

	if (MakePGDirectory(EPOCH_FLOOR_DIR) == 0)
	{
		fsync_fname(EPOCH_FLOOR_DIR, true);
		fsync_fname(".", true);
	}
	else if (errno != EEXIST)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create directory \"%s\": %m",
						EPOCH_FLOOR_DIR)));

	epoch_floor_path(path, sizeof(path), "");
	epoch_floor_path(tmp, sizeof(tmp), ".tmp");
	len = snprintf(buf, sizeof(buf), "%lld\n", (long long) epoch);
	fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
	errno = 0;
	if (write(fd, buf, len) != len)
	{
		int			save_errno = errno ? errno : ENOSPC;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
	}
	if (CloseTransientFile(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", tmp)));
	/* fsyncs the file and the directory */
	durable_rename(tmp, path, ERROR);
}

static void
token_space_exhausted(int64 epoch)
{
	if (epoch > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_TOKEN_EXHAUSTED),
				 errmsg("fencing token space of epoch %lld is exhausted",
						(long long) epoch),
				 errdetail("Epoch e owns the tokens from e * 2^%d to (e + 1) * 2^%d - 1.",
						   EPOCH_SHIFT, EPOCH_SHIFT),
				 errhint("Write a greater epoch to fencing.epoch_file, then call fencing.advance_tokens().")));
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_TOKEN_EXHAUSTED),
			 errmsg("fencing token space is exhausted"),
			 errdetail("Tokens are bigints and never wrap.")));
}

/*
 * Remember what the band check found.  "issuer": our own history, which
 * refuses tokens below "start" (PG_INT64_MAX: every token, until a new
 * timeline enters its band) and above the counter.
 */
static void
remember_band(TimeLineID tli, const TokenState *st, bool issuer,
			  bool entry_due, int64 start, int64 band)
{
	int64		epoch = BAND_EPOCH(band);

	verified.valid = true;
	verified.tli = tli;
	verified.epoch_mode = epoch_mode();
	verified.band_lsn = st->band_lsn;
	verified.origin_lsn = st->origin_lsn;
	verified.issuer = issuer;
	verified.entry_due = entry_due;
	verified.start = start;
	verified.end = PG_INT64_MAX;
	verified.clock_band = (epoch == 0);
	verified.offset = (epoch == 0) ? Max(st->offset, 0) : 0;
	verified.counter_seen = 0;
	if (epoch > 0)
		verified.end = (epoch + 1) << EPOCH_SHIFT;
}

/*
 * Where the new band starts, and its epoch (0: clock mode).  "floor" is a
 * value every token of the band must exceed.  In clock mode "*clock_out"
 * is the clock reading the start was computed from (0 in epoch mode).
 *
 * Clock mode starts at the clock plus the current band's offset: under the
 * rate assumption the current band's tokens, replicated or not, are at
 * most that, also while its counter is ahead of the clock.
 */
static int64
band_floor(const TokenState *st, BandEntry entry, TimeLineID tli,
		   int64 floor, int64 *epoch_out, int64 *clock_out)
{
	int64		start = Max(st->counter, floor);

	if (start == PG_INT64_MAX)
		token_space_exhausted(0);
	start++;

	*clock_out = 0;
	if (!epoch_mode())
	{
		int64		clock = unix_clock_usecs();

		*epoch_out = 0;
		*clock_out = clock;
		return Max(start, band_clock(clock, st->offset));
	}
	else
	{
		int64		epoch = read_epoch_file();

		/*
		 * The counter's epoch is that of the last token issued: a state
		 * restored without its band (or one switched from clock mode) still
		 * cannot go back to an epoch it used.  After a restore or a
		 * reinstall, neither can go back to one this database used before.
		 */
		int64		band_epoch = Max(BAND_EPOCH(st->band),
									 st->counter >> EPOCH_SHIFT);
		int64		used_epoch = history_went_back(st, entry) ?
			read_epoch_floor() : 0;
		int64		prev_epoch = Max(band_epoch, used_epoch);
		bool		needs_new = (entry != BAND_ARRIVED);

		if (epoch < prev_epoch || (needs_new && epoch == prev_epoch))
		{
			if (used_epoch > band_epoch)
				ereport(ERROR,
						(errcode(ERRCODE_FENCING_STALE_EPOCH),
						 errmsg("fencing epoch %lld is not greater than the epoch %lld this database used before",
								(long long) epoch, (long long) used_epoch),
						 errdetail("The token state was restored, upgraded or reinstalled, and this database had entered a token band of epoch %lld before; its tokens need a new epoch.",
								   (long long) used_epoch),
						 errhint("Write a greater epoch from the consensus store to \"%s\"; no token is issued until it holds one.",
								 epoch_file)));
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_STALE_EPOCH),
					 errmsg("fencing epoch %lld is not greater than the epoch %lld of the current token band",
							(long long) epoch, (long long) prev_epoch),
					 entry == BAND_TIMELINE ?
					 errdetail("A promotion or point-in-time recovery started timeline %u; its tokens need a new epoch.",
							   tli) :
					 entry == BAND_MODE ?
					 errdetail("fencing.epoch_file was set while the counter is in epoch %lld; the tokens of epoch mode need an epoch of their own.",
							   (long long) (st->counter >> EPOCH_SHIFT)) :
					 errdetail("The token state was restored or copied from elsewhere; its tokens need a new epoch."),
					 errhint("The HA manager's pre-promote hook must write a greater epoch to \"%s\"; no token is issued until it does.",
							 epoch_file)));
		}
		*epoch_out = epoch;
		start = Max(start, epoch << EPOCH_SHIFT);
		if (start >= (epoch + 1) << EPOCH_SHIFT)
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_TOKEN_EXHAUSTED),
					 errmsg("fencing epoch %lld has no tokens left above %lld",
							(long long) epoch, (long long) (start - 1)),
					 errdetail("Epoch e owns the tokens from e * 2^%d to (e + 1) * 2^%d - 1.",
							   EPOCH_SHIFT, EPOCH_SHIFT),
					 errhint("Write an epoch of at least %lld to \"%s\".",
							 (long long) (((start - 1) >> EPOCH_SHIFT) + 1),
							 epoch_file)));
		return start;
	}
}

/*
 * Verify the stored band and, if the history may have diverged (or
 * "force"), enter a new one above "floor".  Runs as the owner.
 *
 * The records are written in the order of the header comment, so that a
 * crash or a standby's copy that stops at any of them leaves the entry due
 * for the same reason (see there).
 */
static void
verify_band(const FencingCatalog *cat, TimeLineID tli, int64 floor,
			bool force)
{
	TokenState	st;
	BandEntry	entry;
	bool		went_back;
	int64		start;
	int64		epoch;
	int64		clock;
	int64		offset;
	int64		counter;

	if (!force)
	{
		/* usually the band is current: readers need not queue */
		lock_token_state(cat, ShareLock);
		read_token_state(cat, &st);
		unlock_token_state(cat, ShareLock);
		if (classify(&st, tli) == BAND_CURRENT)
		{
			remember_band(tli, &st, true, false, st.start, st.band);
			return;
		}
	}

	/* one writer at a time; token issuers are not blocked */
	lock_token_state(cat, ExclusiveLock);

	read_token_state(cat, &st);
	entry = classify(&st, tli);
	if (force && entry == BAND_CURRENT)
		entry = BAND_ARRIVED;
	if (entry == BAND_CURRENT)
	{
		unlock_token_state(cat, ExclusiveLock);
		remember_band(tli, &st, true, false, st.start, st.band);
		return;
	}
	went_back = history_went_back(&st, entry);

	/* refuses (a missing or stale epoch) before anything changes */
	start = band_floor(&st, entry, tli, floor, &epoch, &clock);
	if (epoch > 0)
		record_epoch_floor(epoch);

	/* the mark: issuers draw again; the entry is due, with its reason */
	set_sequence(cat->token_band_oid,
				 st.band | BAND_PENDING | (went_back ? BAND_RESTORED : 0));
	if (!state_is_ours(&st))
	{
		set_sequence(cat->token_origin_oid, database_origin());
		set_sequence(cat->token_witness_oid,
					 (int64) sequence_lsn(cat->token_origin_oid));
	}
	counter = read_counter(cat);
	if (counter >= start)
	{
		start = counter + 1;
		if (epoch > 0 && start >= (epoch + 1) << EPOCH_SHIFT)
			token_space_exhausted(epoch);
	}

	/*
	 * The new band's offset, before its start: a prefix that ends between
	 * the two repeats the entry with an offset no smaller than this one,
	 * so above whatever the interrupted band issued on another branch.
	 */
	offset = (clock > 0) ? start - clock : 0;
	set_sequence(cat->token_offset_oid, offset);
	if (start - 1 > counter)
		set_sequence(cat->token_seq_oid, start - 1);
	set_sequence(cat->token_base_oid, start);
	set_sequence(cat->token_band_oid, BAND_VALUE(epoch, tli));

	/*
	 * The new band must be durable before any token of it is returned. Our
	 * setval records end at XactLastRecEnd, and WAL is flushed in order.
	 * (Not GetXLogInsertRecPtr(): at a page boundary it points past a page
	 * header not yet written, and XLogFlush refuses it.)
	 */
	XLogFlush(XactLastRecEnd);

	/*
	 * Held to transaction end, the lock would stall every other backend's
	 * band check behind a long transaction, such as a waiting lease_acquire.
	 */
	read_token_state(cat, &st);
	unlock_token_state(cat, ExclusiveLock);
	remember_band(tli, &st, true, false, start, st.band);
	/* the tokens before it are lost now: whoever waits on one must look */
	if (band_entered_callback != NULL)
		band_entered_callback();
}

/*
 * Clock mode: raise the counter to the wall clock plus the band's offset,
 * when it lags that by more than fencing.max_clock_lag.  Without it a
 * primary that was frozen (a paused VM) while a standby was promoted and
 * issued tokens, and whose history then went on instead of the standby's,
 * would continue below those tokens.
 *
 * Not a band entry: tokens issued before stay valid, since an idle
 * database lags the clock just as a frozen one does.  It marks token_band
 * with its own value (a new page LSN, no new value), then reads the
 * counter, so that a value drawn concurrently is either counted in what we
 * read or discarded by its drawer; setval() then moves the counter only up.
 * Neither record changes what classify() finds, wherever WAL ends.
 */
static void
raise_to_clock(const FencingCatalog *cat)
{
	int64		clock;

	lock_token_state(cat, ExclusiveLock);
	/* no other entry or raise since our band was verified */
	if (sequence_lsn(cat->token_band_oid) == verified.band_lsn)
	{
		clock = band_clock(unix_clock_usecs(), verified.offset);
		if (read_counter(cat) < clock - CLOCK_LAG_USECS)
		{
			set_sequence(cat->token_band_oid,
						 sequence_value(cat->token_band_oid));
			verified.band_lsn = sequence_lsn(cat->token_band_oid);
			if (read_counter(cat) < clock)
				set_sequence(cat->token_seq_oid, clock);
		}
	}
	unlock_token_state(cat, ExclusiveLock);

	/*
	 * No flush here: the token drawn next is flushed up to token_seq's page
	 * LSN before it is returned (fencing_issue_token), which covers both
	 * records, the counter's last.
	 */
}

void
fencing_token_on_band_entry(void (*callback) (void))
{
	band_entered_callback = callback;
}

/*
 * Nothing moved since this backend verified the band: no band entry, raise
 * or arrival (token_band's page), no restore (it rewrites token_band, and
 * token_origin), the same timeline and mode.
 */
static bool
band_is_verified(const FencingCatalog *cat, TimeLineID tli)
{
	return verified.valid && verified.tli == tli &&
		verified.epoch_mode == epoch_mode() &&
		sequence_lsn(cat->token_band_oid) == verified.band_lsn &&
		sequence_lsn(cat->token_origin_oid) == verified.origin_lsn;
}

/*
 * nextval() of the counter.  At the very top of the bigint range the
 * sequence itself runs out: report that as the token space being
 * exhausted, the same error as at the end of an epoch.
 */
static int64
next_counter_value(Oid seqoid)
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
		token_space_exhausted(0);
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

	refuse_in_recovery();
	tli = insertion_timeline();
	PreventCommandIfReadOnly("fencing.next_token()");
	PreventCommandIfParallelMode("fencing.next_token()");

	cat = token_catalog();
	fencing_become_owner(&scope);
	/*
	 * token_band's page is compared after the draw below; token_origin's
	 * here, for a restore that left token_band out
	 */
	if (!verified.valid || verified.tli != tli ||
		verified.epoch_mode != epoch_mode() ||
		!verified.issuer || verified.entry_due ||
		sequence_lsn(cat->token_origin_oid) != verified.origin_lsn)
		verify_band(cat, tli, 0, false);
	for (;;)
	{
		token = next_counter_value(cat->token_seq_oid);
		if (sequence_lsn(cat->token_band_oid) != verified.band_lsn)
		{
			/* a band entry, a raise or a restore began meanwhile: draw again */
			verify_band(cat, tli, 0, false);
			continue;
		}
		if (verified.clock_band &&
			token < band_clock(unix_clock_usecs(), verified.offset) -
			CLOCK_LAG_USECS)
		{
			/* behind the clock (idle, or frozen): raise, draw again */
			raise_to_clock(cat);
			continue;
		}
		break;
	}
	fencing_restore_user(&scope);
	/* this backend's band checks need not read the counter for it */
	verified.counter_seen = Max(verified.counter_seen, token);

	if (token >= verified.end)
		token_space_exhausted(verified.end == PG_INT64_MAX ? 0 :
							  (verified.end >> EPOCH_SHIFT) - 1);
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
 * Was "token" lost at a failover, as this database sees it (LF005's
 * conditions)?  Only a database whose state is its own history can tell
 * (see the header comment): one that never issued a token, or whose state
 * came from elsewhere, compares numbers only.
 *	- TOKEN_BEFORE_BAND: issued before the current band.  A new timeline
 *	  that has not issued a token yet enters its band first: every token of
 *	  the old history is from before it.
 *	- TOKEN_ABOVE_COUNTER (clock floor only): above every token this
 *	  history issued, so another history issued it.
 * lease_watch reports both as "lost_at_failover"; fencing_check_token_band
 * refuses them.
 */
FencingTokenLoss
fencing_token_loss(int64 token)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;
	TimeLineID	tli;

	if (!refuse_old_band || RecoveryInProgress())
		return TOKEN_NOT_LOST;
	tli = insertion_timeline();
	cat = token_catalog();
	fencing_become_owner(&scope);
	if (!band_is_verified(cat, tli))
	{
		TokenState	st;

		lock_token_state(cat, ShareLock);
		read_token_state(cat, &st);
		unlock_token_state(cat, ShareLock);
		switch (classify(&st, tli))
		{
			case BAND_CURRENT:
				remember_band(tli, &st, true, false, st.start, st.band);
				break;
			case BAND_ARRIVED:
			case BAND_MODE:
				/* our own band still holds until the entry that is due */
				remember_band(tli, &st, true, true, st.start, st.band);
				break;
			case BAND_TIMELINE:
				/* our own history on a new timeline: its band comes first */
				if (XactReadOnly || IsInParallelMode())
					remember_band(tli, &st, true, true, PG_INT64_MAX,
								  st.band);
				else
					verify_band(cat, tli, 0, false);
				break;
			case BAND_FIRST:
			case BAND_REPLACED:
				remember_band(tli, &st, false, true, 0, st.band);
				break;
		}
	}
	/* above every token this history issued: from another history */
	if (verified.issuer && verified.start != PG_INT64_MAX &&
		token > verified.counter_seen)
		verified.counter_seen = read_counter(cat);
	fencing_restore_user(&scope);

	if (verified.issuer && verified.start != PG_INT64_MAX &&
		token > verified.counter_seen)
		return TOKEN_ABOVE_COUNTER;
	if (verified.issuer && token < verified.start)
		return TOKEN_BEFORE_BAND;
	return TOKEN_NOT_LOST;
}

/* Refuse a token that was lost at a failover (LF005). */
void
fencing_check_token_band(int64 token)
{
	FencingTokenLoss loss = fencing_token_loss(token);

	if (loss != TOKEN_NOT_LOST)
		fencing_stats_count(FENCING_STAT_OLD_BAND_REFUSALS);
	if (loss == TOKEN_ABOVE_COUNTER)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_OLD_BAND),
				 errmsg("lease of fencing token %lld was lost at failover",
						(long long) token),
				 errdetail("Token %lld is above every token this database has issued: another history issued it, such as a member whose history was discarded after a failover, or another database.",
						   (long long) token),
				 errhint("Stop writing with this token and acquire the lease again. "
						 "A database that also guards resources with another database's tokens can set fencing.refuse_old_band = off.")));
	if (loss == TOKEN_BEFORE_BAND)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_OLD_BAND),
				 errmsg("lease of fencing token %lld was lost at failover",
						(long long) token),
				 verified.start == PG_INT64_MAX ?
				 errdetail("Token %lld was issued before this database's last promotion, and no token has been issued since.",
						   (long long) token) :
				 errdetail("Token %lld was issued before this database's token band, which starts at %lld (entered at a promotion, a restore, or when lease rows arrived from elsewhere).",
						   (long long) token, (long long) verified.start),
				 errhint("Stop writing with this token and acquire the lease again. "
						 "A database that also guards resources with another database's tokens can set fencing.refuse_old_band = off.")));
}

/*
 * History arrived from elsewhere (lease rows by logical replication or a
 * restore): every token issued from now on must exceed "floor".  A floor
 * above the counter means tokens this database did not issue: the next
 * token enters a new band above it.  Cheap when nothing new arrived.
 */
void
fencing_token_history_arrived(int64 floor)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;
	TokenState	st;

	if (RecoveryInProgress())
		return;
	cat = token_catalog();
	fencing_become_owner(&scope);
	if (floor <= arrived_floor &&
		sequence_lsn(cat->token_band_oid) == arrived_lsn)
	{
		fencing_restore_user(&scope);
		return;
	}

	lock_token_state(cat, ExclusiveLock);
	read_token_state(cat, &st);
	if (floor > st.counter)
	{
		/* mark first, then move the counter up: as in verify_band */
		set_sequence(cat->token_band_oid, st.band | BAND_PENDING);
		st.counter = read_counter(cat);
		if (floor > st.counter)
			set_sequence(cat->token_seq_oid, floor);
		XLogFlush(XactLastRecEnd);
	}
	unlock_token_state(cat, ExclusiveLock);

	verified.valid = false;
	arrived_floor = Max(floor, st.counter);
	arrived_lsn = sequence_lsn(cat->token_band_oid);
	fencing_restore_user(&scope);
}

/*
 * Called once by the install script: no band yet, so the first token
 * enters one.  pg_restore overwrites the dumped part with the source's.
 */
Datum
fencing_bind_token_origin(PG_FUNCTION_ARGS)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;

	if (!creating_extension)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("%s can only be called by CREATE EXTENSION",
						"fencing._bind_token_origin()")));

	cat = token_catalog();
	fencing_become_owner(&scope);
	set_sequence(cat->token_base_oid, 0);
	set_sequence(cat->token_origin_oid, 0);
	set_sequence(cat->token_band_oid, 0);
	set_sequence(cat->token_offset_oid, 0);
	fencing_restore_user(&scope);
	forget_token_band();
	PG_RETURN_VOID();
}

/*
 * advance_tokens(floor DEFAULT 0): enter a new band now, above "floor".
 * For histories the extension cannot see: DROP EXTENSION, a physical copy
 * started without recovery, fences written with tokens that never reached
 * fencing.leases (job claims) and replicated without it.  Never moves
 * tokens backwards.
 */
Datum
fencing_advance_tokens(PG_FUNCTION_ARGS)
{
	const FencingCatalog *cat;
	FencingOwnerScope scope;
	TimeLineID	tli;
	int64		floor;

	if (!fencing_is_admin(GetUserId()))
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

	refuse_in_recovery();
	tli = insertion_timeline();
	PreventCommandIfReadOnly("fencing.advance_tokens()");
	cat = token_catalog();
	fencing_become_owner(&scope);
	verify_band(cat, tli, floor, true);
	fencing_restore_user(&scope);
	PG_RETURN_VOID();
}
