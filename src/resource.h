/*-------------------------------------------------------------------------
 *
 * resource.h
 *	  The resource layer (fence.c, guard.c, claim.c): what refuses stale
 *	  writes.  It may call the token and base layers; they never call it.
 *	  It uses nothing of the lease layer: a resource judges tokens, not
 *	  leases, and may live in another database than the leases.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_RESOURCE_H
#define FENCING_RESOURCE_H

#include "token.h"

/*
 * This transaction's local ID (MyProc: storage/proc.h), which tells a row
 * version a trigger marked from the same TID in a later transaction.
 */
#if PG_VERSION_NUM >= 170000
#define FENCING_CURRENT_LXID (MyProc->vxid.lxid)
#else
#define FENCING_CURRENT_LXID (MyProc->lxid)
#endif

/* fence.c */
extern void fencing_report_stale(int64 token, int64 fence,
								 const char *relname);
extern void fencing_fenced_write_durable(void);

/* guard.c */
extern void fencing_guard_init(void);
extern bool fencing_declared_token(int64 *token);
extern void fencing_check_row_trigger(FunctionCallInfo fcinfo,
									  const char *fname);

#endif							/* FENCING_RESOURCE_H */
