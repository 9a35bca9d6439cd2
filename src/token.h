/*-------------------------------------------------------------------------
 *
 * token.h
 *	  The token layer (token.c): the bottom one, which calls no other.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_TOKEN_H
#define FENCING_TOKEN_H

#include "fencing.h"

extern void fencing_token_init(void);
extern int64 fencing_issue_token(void);
extern void fencing_forget_token_band(void);

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

/* called once this backend has entered a new band (set by events.c) */
extern void (*fencing_band_entered_hook) (void);

#endif							/* FENCING_TOKEN_H */
