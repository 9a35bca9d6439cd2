/*-------------------------------------------------------------------------
 *
 * holder.h
 *	  The holder-side layer (election.c, watch.c): leader election, and a
 *	  holder learning when and why its token stopped being current, on top
 *	  of leases.  It may call the lease and token layers; they never call
 *	  it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_HOLDER_H
#define FENCING_HOLDER_H

#include "lease.h"

/* watch.c */

/*
 * Has the lease row changed from what the caller waits on?  Reads the row
 * afresh; when it has not changed, *until may say when it changes without
 * a writer (its expiry), as a wall-clock time, and *slot which row of the
 * name it waits on (-1: none yet).
 */
typedef bool (*FencingRowChanged) (void *arg, TimestampTz *until,
								   int32 *slot);

extern int64 fencing_watch_wait_arg(FunctionCallInfo fcinfo, int argno);
extern void fencing_wait_for_change(text *name, int64 wait_usecs,
									FencingRowChanged changed, void *arg);
extern void fencing_refuse_stale_answer(text *name, bool differs);

#endif							/* FENCING_HOLDER_H */
