/*-------------------------------------------------------------------------
 *
 * token.h
 *	  The token layer (token.c): tokens on top of the base layer
 *	  (fencing.h), which it may call; it calls no layer above.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_TOKEN_H
#define FENCING_TOKEN_H

#include "fencing.h"

extern void fencing_token_init(void);
extern int64 fencing_issue_token(void);

/* was a token lost at a failover (LF005's conditions)? */
typedef enum FencingTokenLoss
{
	TOKEN_NOT_LOST,
	TOKEN_BEFORE_BAND,			/* issued before the current band */
	TOKEN_ABOVE_COUNTER			/* above every token this history issued */
} FencingTokenLoss;

extern FencingTokenLoss fencing_token_loss(int64 token);
extern void fencing_check_token_band(int64 token);
extern void fencing_token_history_arrived(int64 floor);

/*
 * Called once this backend has entered a new band: the lease layer wakes
 * the waiters whose tokens it made stale.
 */
extern void fencing_token_on_band_entry(void (*callback) (void));

#endif							/* FENCING_TOKEN_H */
