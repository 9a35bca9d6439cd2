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

extern int64 fencing_issue_token(void);
extern void fencing_forget_token_band(void);

#endif							/* FENCING_TOKEN_H */
