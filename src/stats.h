/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  Counters for operators (stats.c): a bottom-layer service that every
 *	  layer may call and that calls none of them.
 *
 * Each count is one call at the place the event happens.  Lease events
 * (acquires, renewals, releases, force-releases, expirations, takeovers)
 * count when their transaction commits, so a rolled-back acquire counts
 * nothing; refusals and waits count at once, so a refused write counts
 * although its transaction rolls back.  No call ever raises an error:
 * where counting is not available it does nothing.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_STATS_H
#define FENCING_STATS_H

#include "fencing.h"

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

#endif							/* FENCING_STATS_H */
