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
extern bool fencing_token_before_band(int64 token);
extern void fencing_check_token_band(int64 token);
extern void fencing_token_history_arrived(int64 floor);

#endif							/* FENCING_TOKEN_H */
