/*-------------------------------------------------------------------------
 *
 * fencing.h
 *	  What every layer of the fencing extension shares: the function
 *	  declaration macro, our SQLSTATEs, the cache of the extension's OIDs,
 *	  running as the extension's owner, argument checks and counters.
 *
 * The base layer (catalog.c, args.c, guc_prefix.c, stats.c), which calls
 * no other.  Like core's headers this does not include postgres.h: every
 * .c file includes postgres.h first.  The layers have one header each and
 * point one way: fencing.h <- token.h <- lease.h <- resource.h, and
 * lease.h <- holder.h (src/fencing.c lists them).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_H
#define FENCING_H

#include "fmgr.h"

/* VARSIZE_ANY_EXHDR and friends left postgres.h for varatt.h in 16 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/* PGDLLEXPORT is implied by PG_FUNCTION_INFO_V1 from PostgreSQL 16 on */
#if PG_VERSION_NUM >= 160000
#define FENCING_FUNCTION(name) PG_FUNCTION_INFO_V1(name)
#else
#define FENCING_FUNCTION(name) PGDLLEXPORT PG_FUNCTION_INFO_V1(name)
#endif

/*
 * SQLSTATEs of our own, class "LF" (lease and fence): an implementation-
 * defined class, outside those the SQL standard reserves for itself (0-4,
 * A-H).  Standard codes are used wherever one fits; these cover
 * conditions only this extension has.
 */
/* the class's own code, for what no more specific code fits */
#define ERRCODE_FENCING_ERROR				MAKE_SQLSTATE('L','F','0','0','0')
#define ERRCODE_FENCING_STALE_TOKEN			MAKE_SQLSTATE('L','F','0','0','1')
#define ERRCODE_FENCING_TOKEN_EXHAUSTED		MAKE_SQLSTATE('L','F','0','0','2')
#define ERRCODE_FENCING_ROW_NOT_FOUND		MAKE_SQLSTATE('L','F','0','0','3')
#define ERRCODE_FENCING_MISSING_TOKEN		MAKE_SQLSTATE('L','F','0','0','4')
/* token source and high availability (token.c) */
#define ERRCODE_FENCING_OLD_BAND			MAKE_SQLSTATE('L','F','0','0','5')
#define ERRCODE_FENCING_NO_EPOCH			MAKE_SQLSTATE('L','F','0','0','6')
#define ERRCODE_FENCING_STALE_EPOCH			MAKE_SQLSTATE('L','F','0','0','7')
/* job queues (claim.c) */
#define ERRCODE_FENCING_CLAIM_MISMATCH		MAKE_SQLSTATE('L','F','0','1','0')
#define ERRCODE_FENCING_NOT_CLAIMED			MAKE_SQLSTATE('L','F','0','1','1')
#define ERRCODE_FENCING_STAMP_CHANGED		MAKE_SQLSTATE('L','F','0','1','2')
/* lease layer */
#define ERRCODE_FENCING_LEASES_UNSUPPORTED	MAKE_SQLSTATE('L','F','0','2','0')
#define ERRCODE_FENCING_KIND_MISMATCH		MAKE_SQLSTATE('L','F','0','2','1')
#define ERRCODE_FENCING_LEASE_EXPIRED		MAKE_SQLSTATE('L','F','0','2','2')

/* documented limit on lease names and holders */
#define FENCING_MAX_NAME_BYTES	256

/* catalog.c */

/*
 * OIDs of the extension's own objects, looked up once per backend and
 * forgotten on any relcache invalidation of them (DROP/CREATE EXTENSION,
 * ALTER TABLE, CREATE INDEX ...).  "generation" counts the lookups, so a
 * layer that caches more about one of these objects can tell when to look
 * again without a relcache callback of its own.
 */
typedef struct FencingCatalog
{
	Oid			namespace_oid;
	Oid			leases_oid;		/* fencing.leases */
	Oid			token_seq_oid;	/* fencing.token_seq: the counter */
	Oid			token_base_oid; /* fencing.token_base: first token of the band */
	Oid			token_origin_oid;	/* fencing.token_origin: who entered it */
	Oid			token_band_oid; /* fencing.token_band: epoch and timeline */
	Oid			token_witness_oid;	/* fencing.token_witness: not dumped */
	Oid			token_offset_oid;	/* fencing.token_band_offset: above the
									 * clock */
	Oid			owner_oid;		/* owner of fencing.leases */
	uint64		generation;
} FencingCatalog;

extern void fencing_catalog_init(void);
extern const FencingCatalog *fencing_catalog(void);
extern bool fencing_is_admin(Oid roleid);

/* Run internal SQL as the extension's owner, not as the caller. */
typedef struct FencingOwnerScope
{
	Oid			saved_userid;
	int			saved_sec_context;
} FencingOwnerScope;

extern void fencing_become_owner(FencingOwnerScope *scope);
extern void fencing_restore_user(const FencingOwnerScope *scope);

/* guc_prefix.c */
extern void fencing_guc_prefix_init(void);

/* args.c */
extern void fencing_require_arg(FunctionCallInfo fcinfo, int argno,
								const char *what);
extern text *fencing_name_arg(FunctionCallInfo fcinfo, int argno,
							  const char *what);
extern void fencing_check_name(text *t, const char *what);
extern int64 fencing_duration_arg(FunctionCallInfo fcinfo, int argno,
								  const char *what, int64 max_usecs,
								  const char *max_text, bool allow_zero);
extern Datum fencing_usecs_interval(int64 usecs);
extern int64 fencing_token_arg(FunctionCallInfo fcinfo, int argno);
extern void fencing_check_token(int64 token);
extern bool fencing_parse_token(const char *s, int64 *value);

/*
 * stats.c: counters for operators, which every layer may call.
 *
 * Each count is one call at the place the event happens.  Lease events
 * (acquires, renewals, releases, force-releases, expirations, takeovers)
 * count when their transaction commits, so a rolled-back acquire counts
 * nothing; refusals and waits count at once, so a refused write counts
 * although its transaction rolls back.  No call ever raises an error:
 * where counting is not available it does nothing.
 */
typedef enum FencingStat
{
	/* lease events: counted when the transaction commits */
	FENCING_STAT_ACQUIRES,
	FENCING_STAT_RENEWALS,
	FENCING_STAT_RELEASES,
	FENCING_STAT_FORCE_RELEASES,
	FENCING_STAT_EXPIRATIONS,	/* an expired term taken again, by anyone */
	FENCING_STAT_TAKEOVERS,		/* ... by another holder */
	/* counted at once */
	FENCING_STAT_FENCE_ADVANCE_REFUSALS,
	FENCING_STAT_FENCE_GUARD_REFUSALS,
	FENCING_STAT_CLAIM_GUARD_REFUSALS,
	FENCING_STAT_OLD_BAND_REFUSALS, /* LF005 */
	FENCING_STAT_WAITS,
	FENCING_STAT_WAIT_TIMEOUTS,
	FENCING_STAT_COUNT
} FencingStat;

#define FENCING_STAT_FIRST_AT_ONCE	FENCING_STAT_FENCE_ADVANCE_REFUSALS

extern void fencing_stats_init(void);
extern void fencing_stats_count(FencingStat stat);
extern void fencing_stats_acquired(bool takeover, bool expired);
extern void fencing_stats_wait_begin(int64 start_usecs);
extern void fencing_stats_wait_end(bool acquired);

#endif							/* FENCING_H */
