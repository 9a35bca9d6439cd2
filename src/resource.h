/*-------------------------------------------------------------------------
 *
 * resource.h
 *	  The resource layer (fence.c, guard.c): what refuses stale writes.
 *	  It may call the lease and token layers; they never call it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_RESOURCE_H
#define FENCING_RESOURCE_H

#include "lease.h"

/* fence.c */
extern void fencing_count_stale_write(void);
extern void fencing_report_stale(int64 token, int64 fence,
								 const char *relname);
extern void fencing_fenced_write_durable(void);

/* guard.c */
extern void fencing_define_token_guc(void);

#endif							/* FENCING_RESOURCE_H */
