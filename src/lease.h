/*-------------------------------------------------------------------------
 *
 * lease.h
 *	  The lease layer (lease_table.c, lease.c, lease_admin.c, lease_wait.c,
 *	  lease_arrival.c): leases on top of tokens.  It may call the token
 *	  and base layers; they never call it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_LEASE_H
#define FENCING_LEASE_H

#include "token.h"

#include "datatype/timestamp.h"
#include "storage/itemptr.h"

/*
 * What a name is, stored in each of its rows (column "kind"): a name has
 * one kind and one number of slots while any of its slots is held.
 */
#define LEASE_KIND_LEASE		'l'
#define LEASE_KIND_SEMAPHORE	's'
#define LEASE_KIND_ELECTION		'e'

/* how a token's tenure ended (columns end_reason and prev_end) */
#define LEASE_END_RELEASED		'r'
#define LEASE_END_FORCE_RELEASED	'f'
#define LEASE_END_TAKEN_OVER	't'

/* lease_table.c: the statements on fencing.leases */
typedef enum LeaseStatement
{
	LEASE_TAKE,
	LEASE_TAKE_OWN,
	LEASE_CREATE,
	LEASE_AVAILABLE_AT,
	LEASE_RENEW,
	LEASE_RELEASE,
	LEASE_LOCK,
	LEASE_HOLDER_ROLE,
	LEASE_TAKEABLE,
	LEASE_FORCE_RELEASE,
	LEASE_PROCLAIM,
	LEASE_PURGE,
	NUM_LEASE_STATEMENTS
} LeaseStatement;

/*
 * The arguments of a lease statement, by name.  Each statement reads the
 * fields it needs (lease_table.c says which) and ignores the others.
 */
typedef struct LeaseRequest
{
	text	   *name;			/* the lease */
	int32		slot;			/* TAKE, TAKE_OWN, CREATE, AVAILABLE_AT,
								 * TAKEABLE: 0 for a lease, or a semaphore's */
	text	   *holder;			/* TAKE, TAKE_OWN, CREATE, TAKEABLE */
	char		kind;			/* TAKE, TAKE_OWN, CREATE, TAKEABLE: */
	int32		slots;			/* what the acquire takes the name as */
	Oid			role;			/* the holder's role */
	int64		token;			/* RENEW, RELEASE, CHECK, HOLDER_ROLE,
								 * PROCLAIM */
	text	   *value;			/* an election's: TAKE, TAKE_OWN, CREATE,
								 * PROCLAIM (NULL for other kinds) */
	Datum		ttl;			/* interval: TAKE, TAKE_OWN, CREATE, RENEW */
	Datum		lock_delay;		/* interval: TAKE, TAKE_OWN, CREATE */
	TimestampTz cutoff;			/* PURGE */
	int64		lock_deadline;	/* until when to wait for a row another
								 * transaction has locked or is creating;
								 * then result->locked (lease_wait.c) */
} LeaseRequest;

/* What a statement found out, from its first row. */
typedef struct LeaseResult
{
	int64		token;			/* TAKE, CREATE, FORCE_RELEASE */
	bool		takeover;		/* TAKE, CREATE: took over an expired lease */
	char	   *holder;			/* FORCE_RELEASE: who lost the lease */
	Oid			holder_role;	/* HOLDER_ROLE */
	bool		available_now;	/* AVAILABLE_AT: free now */
	TimestampTz available_at;	/* AVAILABLE_AT: else from then on */
	bool		row_seen;		/* saw the row, which did not qualify */
	bool		mismatch;		/* TAKE, TAKE_OWN, with row_seen: the row is
								 * of another kind or slot count */
	bool		locked;			/* another transaction had the row locked
								 * past lock_deadline */
	bool		shortened;		/* RENEW: the lease now expires sooner */
	bool		lapsed;			/* TAKE, TAKE_OWN: the term taken over had
								 * expired, not been released */
	bool		replaced;		/* TAKE, TAKE_OWN: the previous token was
								 * not released (its holder may watch it) */
	TransactionId prepared_xid; /* AVAILABLE_AT: a prepared transaction
								 * changed the row, not yet committed */
	TimestampTz expires_at;		/* RENEW, CHECK, PROCLAIM: the expiry the
								 * row had, by which the transaction must
								 * commit (fencing_keep_until_commit) */
} LeaseResult;

/*
 * One lease row as read, without a lock, by the holder-side calls
 * (election_leader, election_observe, lease_watch): fencing_read_lease_row.
 */
typedef struct LeaseRowState
{
	bool		found;
	TimestampTz now;			/* the clock reading it was judged by */
	char		kind;
	int32		slot;
	char	   *holder;
	Oid			holder_role;
	int64		token;
	char	   *value;			/* NULL if none */
	TimestampTz acquired_at;
	TimestampTz expires_at;
	bool		released;
	bool		live;			/* not released and not expired */
	char		end_reason;		/* when released: LEASE_END_*, else 0 */
	int64		prev_token;		/* 0 if none */
	char		prev_end;		/* LEASE_END_*, 0 if none */
} LeaseRowState;

/*
 * What one look at a semaphore's rows found (lease_table.c): the slot to try
 * first, and when the next one comes free.  Slots are -1 when none.
 */
#define LEASE_SURVEY_TAKEABLE	8

typedef struct LeaseSurvey
{
	int32		own_slot;		/* held (not released) by the requester */
	int			ntakeable;		/* the lowest takeable slots below "slots" */
	int32		takeable[LEASE_SURVEY_TAKEABLE];	/* (released, or free after
													 * expiry and lock delay) */
	int			nmissing;		/* the lowest slots below "slots" that have */
	int32		missing[LEASE_SURVEY_TAKEABLE]; /* no row yet */
	TimestampTz free_at;		/* else: the earliest a slot comes free */
	TransactionId prepared_xid; /* else: a prepared transaction changed a
								 * slot's row, not yet committed */
	bool		mismatch;		/* a row is of another kind or slot count */
} LeaseSurvey;

/* lease_table.c: every read and write of fencing.leases */
extern uint64 fencing_run_lease_statement(LeaseStatement stmt,
										  const LeaseRequest *req,
										  LeaseResult *result);
extern bool fencing_lease_table_writing(void);
extern void fencing_check_lease_snapshot(LeaseStatement probe,
										 const LeaseRequest *req);
extern void fencing_survey_lease_slots(const LeaseRequest *req, int32 slots,
									   LeaseSurvey *survey);
extern bool fencing_lease_row_busy(const LeaseRequest *req);
extern TransactionId fencing_lease_row_prepared(text *name, int32 slot);
/*
 * What holds up fencing_define_lease_name: a transaction inserting or
 * writing a row of the name (xid), or other transactions' locks on a row
 * (tid, with no xid: a row lock can be shared by several).  Wait for it
 * (fencing_wait_for_name_writer) and look again.
 */
typedef struct LeaseNameWriter
{
	TransactionId xid;
	ItemPointerData tid;
} LeaseNameWriter;

extern bool fencing_define_lease_name(const LeaseRequest *req,
									  LeaseNameWriter *writer);
extern bool fencing_wait_for_name_writer(const LeaseNameWriter *writer,
										 int64 deadline);
extern void fencing_refuse_held_kind(const LeaseRequest *req);
extern bool fencing_read_lease_row(text *name, int32 slot, int64 token,
								   bool latest, TimestampTz now,
								   LeaseRowState *state);

/* lease.c */
extern void fencing_lease_init(void);
extern int64 fencing_acquire_times_arg(FunctionCallInfo fcinfo, int ttl_argno,
									   LeaseRequest *req);
extern int64 fencing_acquire(LeaseRequest *req, int64 wait_usecs);
extern uint64 fencing_run_as_holder(LeaseStatement stmt, LeaseRequest *req,
									LeaseResult *result);
extern void fencing_lease_freed(text *name, int64 token, const char *event,
								const char *holder);

/*
 * lease_wait.c: deadlines of waits, in microseconds on fencing_monotonic_usecs'
 * clock, or one of these.
 */
#define FENCING_DEADLINE_NONE	INT64CONST(0)	/* as long as it takes */
#define FENCING_DEADLINE_NOW	INT64CONST(1)	/* long past: do not wait */

typedef enum FencingWaitOutcome
{
	FENCING_WAIT_KEPT,			/* done, and kept */
	FENCING_WAIT_UNDONE,		/* done, and rolled back as asked */
	FENCING_WAIT_TIMED_OUT		/* the deadline came first: rolled back */
} FencingWaitOutcome;

extern int64 fencing_monotonic_usecs(void);
extern FencingWaitOutcome fencing_wait_within(bool (*fn) (void *arg),
											  void *arg, int64 deadline);
extern bool fencing_wait_for_xact(TransactionId xid, int64 deadline);
extern bool fencing_xact_is_prepared(TransactionId xid);

/* lease_wait.c */
extern void fencing_lease_wait_init(void);
extern void fencing_waiter_register(const char *name, int len);
extern void fencing_waiter_unregister(const char *name, int len);
extern void fencing_waiter_sleep(long timeout_ms);
extern bool fencing_queue_try_enter(const char *name, int len);
extern bool fencing_queue_enter(const char *name, int len, int64 deadline);
extern void fencing_queue_leave(const char *name, int len);
extern bool fencing_holder_lock(const char *name, int len, const char *holder,
								int hlen, Oid role, int64 deadline);
extern bool fencing_name_lock(const char *name, int len, int64 deadline);
extern void fencing_name_unlock(const char *name, int len);
extern void fencing_wake_waiters_at_commit(const char *name, int len);
extern void fencing_keep_until_commit(const char *name, int len, int64 token,
									  TimestampTz expires_at);
extern void fencing_wait_for_keeping_commit(const char *name, int len);
extern void fencing_notify(const char *event, const char *name, int len,
						   int64 token, const char *holder);

#endif							/* FENCING_LEASE_H */
