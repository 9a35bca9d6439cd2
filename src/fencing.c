/*-------------------------------------------------------------------------
 *
 * fencing.c
 *	  The module's entry: its magic block, and _PG_init, which only
 *	  initialises each layer (one *_init per file that needs one).
 *
 * The layers, bottom up, and their headers (docs/internals.md; checked by
 * test/check_layers.sh):
 *
 *	base	  fencing.h   catalog.c args.c guc_prefix.c stats.c
 *	tokens	  token.h	  token.c
 *	leases	  lease.h	  lease_table.c lease.c lease_admin.c lease_wait.c
 *						  lease_arrival.c
 *	resource  resource.h  fence.c guard.c claim.c
 *	holder	  holder.h	  election.c watch.c
 *
 * A file calls only its own layer and lower ones; resource and holder
 * stand side by side and call neither each other.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lease.h"
#include "resource.h"
#include "token.h"

#if PG_VERSION_NUM >= 180000
/* FENCING_VERSION: fencing.control's default_version, from the Makefile */
#ifndef FENCING_VERSION
#error "FENCING_VERSION is not defined: build with the Makefile"
#endif
PG_MODULE_MAGIC_EXT(.name = "fencing",.version = FENCING_VERSION);
#else
PG_MODULE_MAGIC;
#endif

void		_PG_init(void);

void
_PG_init(void)
{
	fencing_catalog_init();
	fencing_token_init();
	fencing_guard_init();
	fencing_lease_init();
	fencing_lease_wait_init();
	/* after every fencing.* parameter is defined */
	fencing_guc_prefix_init();
	fencing_stats_init();
}
