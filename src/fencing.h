/*-------------------------------------------------------------------------
 *
 * fencing.h
 *	  What every layer of the fencing extension shares: the function
 *	  declaration macro, our SQLSTATEs, the cache of the extension's OIDs,
 *	  running as the extension's owner, and argument checks.
 *
 * Like core's headers this does not include postgres.h: every .c file
 * includes postgres.h first.  The layers have one header each and point
 * one way: token.h <- lease.h <- resource.h, and lease.h <- holder.h.
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

/* fencing.c */

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
	Oid			stale_count_oid;	/* fencing.stale_write_count */
	Oid			owner_oid;		/* owner of fencing.leases */
	uint64		generation;
} FencingCatalog;

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
extern void fencing_reserve_guc_prefix(void);
extern void fencing_refuse_guc_placeholders(void);

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

#endif							/* FENCING_H */
