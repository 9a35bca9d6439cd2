/*-------------------------------------------------------------------------
 *
 * fencing.h
 *	  Shared declarations of the fencing extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_H
#define FENCING_H

#include "postgres.h"

#include "fmgr.h"

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
#define ERRCODE_FENCING_STALE_TOKEN			MAKE_SQLSTATE('L','F','0','0','1')
#define ERRCODE_FENCING_TOKEN_EXHAUSTED		MAKE_SQLSTATE('L','F','0','0','2')
#define ERRCODE_FENCING_ROW_NOT_FOUND		MAKE_SQLSTATE('L','F','0','0','3')
#define ERRCODE_FENCING_MISSING_TOKEN		MAKE_SQLSTATE('L','F','0','0','4')
/* job queues (claim.c) */
#define ERRCODE_FENCING_CLAIM_MISMATCH		MAKE_SQLSTATE('L','F','0','1','0')
#define ERRCODE_FENCING_NOT_CLAIMED			MAKE_SQLSTATE('L','F','0','1','1')
#define ERRCODE_FENCING_STAMP_CHANGED		MAKE_SQLSTATE('L','F','0','1','2')

/* documented limit on lease names and holders */
#define FENCING_MAX_NAME_BYTES	256

/*
 * OIDs of the extension's own objects, looked up once per backend and
 * forgotten on any relcache invalidation of them (DROP/CREATE EXTENSION).
 */
typedef struct FencingCatalog
{
	Oid			namespace_oid;
	Oid			leases_oid;		/* fencing.leases */
	Oid			token_seq_oid;	/* fencing.token_seq: the counter */
	Oid			token_base_oid; /* fencing.token_base: (timeline, band) */
	Oid			token_origin_oid;	/* fencing.token_origin: database identity */
	Oid			token_install_oid;	/* fencing.token_install: random, not dumped */
	Oid			stale_count_oid;	/* fencing.stale_write_count */
	Oid			owner_oid;		/* owner of fencing.leases */
} FencingCatalog;

extern const FencingCatalog *fencing_catalog(void);

/* Run internal SQL as the extension's owner, not as the caller. */
typedef struct FencingOwnerScope
{
	Oid			saved_userid;
	int			saved_sec_context;
} FencingOwnerScope;

extern void fencing_become_owner(FencingOwnerScope *scope);
extern void fencing_restore_user(const FencingOwnerScope *scope);

/* args.c */
extern void fencing_require_arg(FunctionCallInfo fcinfo, int argno,
								const char *what);
extern text *fencing_name_arg(FunctionCallInfo fcinfo, int argno,
							  const char *what);
extern int64 fencing_duration_arg(FunctionCallInfo fcinfo, int argno,
								  const char *what, int64 max_usecs,
								  const char *max_text, bool allow_zero);
extern Datum fencing_usecs_interval(int64 usecs);
extern int64 fencing_token_arg(FunctionCallInfo fcinfo, int argno);

/* lease_store.c */
typedef enum LeaseStatement
{
	LEASE_TAKE,
	LEASE_CREATE,
	LEASE_AVAILABLE_AT,
	LEASE_RENEW,
	LEASE_RELEASE,
	LEASE_CHECK,
	LEASE_HOLDER_ROLE,
	LEASE_TAKEABLE,
	LEASE_FORCE_RELEASE,
	LEASE_PURGE,
	NUM_LEASE_STATEMENTS
} LeaseStatement;

extern uint64 fencing_run_lease_statement(LeaseStatement stmt, Datum *values,
										  Datum *results, bool *isnull,
										  int nresults);
extern uint64 fencing_run_lease_statement_seen(LeaseStatement stmt,
											   Datum *values, Datum *results,
											   bool *isnull, int nresults,
											   bool *row_seen);
extern void fencing_check_lease_snapshot(LeaseStatement probe, Datum *values);
extern bool fencing_writing_leases;

/* lease_direct.c */
typedef enum LeaseDirectResult
{
	LEASE_DIRECT_UNSUPPORTED,	/* the table does not qualify: use SPI */
	LEASE_DIRECT_UPDATED,
	LEASE_DIRECT_UNCHANGED,		/* the row was seen and did not qualify */
	LEASE_DIRECT_MISSING		/* no row was seen */
} LeaseDirectResult;

extern void fencing_lease_direct_init(void);
extern LeaseDirectResult fencing_lease_update_direct(LeaseStatement stmt,
													 const Datum *values,
													 Datum *results,
													 bool *isnull,
													 int nresults);

/* lease.c */
extern void fencing_lease_init(void);
extern bool fencing_is_lease_admin(Oid roleid);
extern void fencing_lease_freed(text *name, int64 token, const char *event,
								const char *holder);

/* events.c */
extern void fencing_events_init(void);
extern void fencing_waiter_register(const char *name, int len);
extern void fencing_waiter_unregister(const char *name, int len);
extern void fencing_waiter_sleep(long timeout_ms);
extern void fencing_wake_waiters_at_commit(const char *name, int len);
extern void fencing_notify(const char *event, const char *name, int len,
						   int64 token, const char *holder);

/* token.c */
extern int64 fencing_issue_token(void);
extern void fencing_forget_token_band(void);

/* guard.c */
extern void fencing_define_token_guc(void);
extern void fencing_report_stale(int64 token, int64 fence, const char *relname);

#endif							/* FENCING_H */
