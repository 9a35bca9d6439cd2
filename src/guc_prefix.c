/*-------------------------------------------------------------------------
 *
 * guc_prefix.c
 *	  The "fencing." prefix of configuration parameters is reserved: a
 *	  misspelt name such as fencing.tokens is an error, not a placeholder
 *	  that fence_guard never reads (the write would go through as if no
 *	  token had been declared).
 *
 * PostgreSQL does this for us (MarkGUCPrefixReserved): a placeholder set
 * before the library loaded draws a warning and is removed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"

#include "fencing.h"

#define FENCING_GUC_PREFIX "fencing"

/* Called from _PG_init, after the library's parameters are defined. */
void
fencing_guc_prefix_init(void)
{
	MarkGUCPrefixReserved(FENCING_GUC_PREFIX);
}
