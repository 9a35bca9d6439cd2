/* fencing--1.0.sql: leases with fencing tokens */

\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-- The schema belongs to the extension, so DROP EXTENSION removes it.  (A
-- "schema = fencing" line in fencing.control would have CREATE EXTENSION
-- create it outside the extension, and DROP EXTENSION leave it behind.)
CREATE SCHEMA fencing;

-- The token counter and the state that places it in a band (see
-- src/token.c).  All non-transactional on purpose.  The counter, the band's
-- first token, its origin, its epoch and timeline and its offset above the
-- clock are dumped by pg_dump, so a restore continues above them (in epoch
-- mode: only in a greater epoch); the witness is not.
CREATE SEQUENCE fencing.token_seq AS bigint
	MINVALUE 1 NO CYCLE CACHE 1;
CREATE SEQUENCE fencing.token_base AS bigint
	MINVALUE 0 NO CYCLE CACHE 1;
CREATE SEQUENCE fencing.token_origin AS bigint
	MINVALUE -9223372036854775808 MAXVALUE 9223372036854775807 START 0
	NO CYCLE CACHE 1;
CREATE SEQUENCE fencing.token_band AS bigint
	MINVALUE 0 NO CYCLE CACHE 1;
-- How far the band's first token is above the wall clock that its entry
-- read, in microseconds (clock mode; 0 in epoch mode or before any band).
CREATE SEQUENCE fencing.token_band_offset AS bigint
	MINVALUE 0 NO CYCLE CACHE 1;
-- The LSN of token_origin's page as the token source last wrote it.  Not
-- dumped, so a restored dump never matches the database it lands in.
CREATE SEQUENCE fencing.token_witness AS bigint
	MINVALUE 1 NO CYCLE CACHE 1;

-- One row per lease, written only by the lease functions.  A lease is
-- slot 0 of its name; a semaphore of N slots has rows for slots 0 to N-1
-- (created as they are first taken).  Only the primary key is indexed and
-- fillfactor leaves room, so every lease call is a HOT update.  Every row
-- of a name has the name's kind ('l' lease, 's' semaphore, 'e' election)
-- and number of slots: an acquire of another kind or slot count is refused
-- while any of them is held (src/lease_table.c, fencing_define_lease_name).
-- An election's leader publishes "value".  How the current token's tenure
-- ended ("end_reason": 'r' released, 'f' force-released, NULL not), and
-- the token before it and how that one ended ('t': taken over, expired or
-- not), are what lease_watch() tells a holder that lost its lease.
CREATE TABLE fencing.leases (
	name			text NOT NULL,
	slot			integer NOT NULL DEFAULT 0 CHECK (slot >= 0),
	kind			"char" NOT NULL DEFAULT 'l',
	slots			integer NOT NULL DEFAULT 1,
	holder			text NOT NULL,
	holder_role		pg_catalog.regrole NOT NULL,
	token			bigint NOT NULL,
	acquired_at		timestamptz NOT NULL,
	expires_at		timestamptz NOT NULL,
	released_at		timestamptz,
	lock_delay		interval NOT NULL DEFAULT '0',
	takeover		boolean NOT NULL DEFAULT false,
	value			text,
	end_reason		"char",
	prev_token		bigint,
	prev_end		"char",
	holder_changes	bigint NOT NULL DEFAULT 0,
	acquires		bigint NOT NULL DEFAULT 0,
	renewals		bigint NOT NULL DEFAULT 0,
	releases		bigint NOT NULL DEFAULT 0,
	expired_takeovers bigint NOT NULL DEFAULT 0,
	PRIMARY KEY (name, slot)
) WITH (fillfactor = 70);

COMMENT ON TABLE fencing.leases IS
	'Lease rows; written only through the fencing.lease_* functions';

-- Rows that arrive any other way come from elsewhere (a restore, COPY,
-- logical replication): the token source must go above their tokens (see
-- src/lease_arrival.c).  ALWAYS: it fires in replication apply too.
CREATE FUNCTION fencing._leases_restored()
RETURNS trigger
LANGUAGE C
AS 'MODULE_PATHNAME', 'fencing_leases_restored';

REVOKE ALL ON FUNCTION fencing._leases_restored() FROM PUBLIC;

CREATE TRIGGER leases_restored
	BEFORE INSERT OR UPDATE ON fencing.leases
	FOR EACH ROW EXECUTE FUNCTION fencing._leases_restored();
ALTER TABLE fencing.leases ENABLE ALWAYS TRIGGER leases_restored;

SELECT pg_catalog.pg_extension_config_dump('fencing.leases', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_seq', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_base', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_origin', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_band', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_band_offset', '');

REVOKE ALL ON fencing.leases, fencing.token_seq, fencing.token_base,
	fencing.token_origin, fencing.token_band, fencing.token_band_offset,
	fencing.token_witness
	FROM PUBLIC;

CREATE FUNCTION fencing._bind_token_origin()
RETURNS void
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_bind_token_origin';

REVOKE ALL ON FUNCTION fencing._bind_token_origin() FROM PUBLIC;
SELECT fencing._bind_token_origin();

CREATE FUNCTION fencing.next_token()
RETURNS bigint
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_next_token';

COMMENT ON FUNCTION fencing.next_token() IS
	'A fresh fencing token: durable, larger than any issued before';

CREATE FUNCTION fencing.advance_tokens(floor bigint DEFAULT 0)
RETURNS void
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_advance_tokens';

COMMENT ON FUNCTION fencing.advance_tokens(bigint) IS
	'Enter a new token band now: every token issued from now on exceeds floor (superuser or fencing_admin)';

CREATE FUNCTION fencing.lease_acquire(name text, holder text, ttl interval,
									  wait interval DEFAULT '0')
RETURNS bigint
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_acquire';

COMMENT ON FUNCTION fencing.lease_acquire(text, text, interval, interval) IS
	'A new token if the lease is free, expired or held by this holder, waiting up to wait; else NULL';

-- A counting semaphore: up to "slots" holders at once, each with a token of
-- its own.  Renew, release and lock a slot with lease_renew,
-- lease_release and lease_lock, by the semaphore's name and the token.
CREATE FUNCTION fencing.semaphore_acquire(name text, holder text, slots integer,
										  ttl interval, wait interval DEFAULT '0')
RETURNS bigint
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_semaphore_acquire';

COMMENT ON FUNCTION fencing.semaphore_acquire(text, text, integer, interval, interval) IS
	'A new token for one of the semaphore''s slots: the holder''s own, else a free or expired one, waiting up to wait; else NULL';

CREATE FUNCTION fencing.lease_renew(name text, token bigint, ttl interval)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_renew';

COMMENT ON FUNCTION fencing.lease_renew(text, bigint, interval) IS
	'Extend a live lease held with this token to now + ttl';

-- Group keepalive: renew many leases of one holder in one call, each
-- judged by its own token and reported on its own row.  Rows are renewed
-- in name order (collation "C"), so two calls over overlapping sets lock
-- them in the same order and cannot deadlock.  An invoker's function: each
-- renew is lease_renew's, with its checks and its role rule (another
-- role's lease raises 42501, and the whole call changes nothing).
CREATE FUNCTION fencing.lease_renew_all(names text[], tokens bigint[], ttl interval)
RETURNS TABLE (name text, token bigint, renewed boolean)
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_renew_all';

COMMENT ON FUNCTION fencing.lease_renew_all(text[], bigint[], interval) IS
	'Renew many leases of one holder, each with its own token; one row per lease, in name order';

CREATE FUNCTION fencing.lease_release(name text, token bigint)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_release';

COMMENT ON FUNCTION fencing.lease_release(text, bigint) IS
	'Free a live lease held with this token';

-- The keyed hash of a lease name in its advisory lock tags (pg_locks:
-- classid = its high 32 bits, objid = its low 32 bits, objsubid 17989 and
-- 17990), for superusers who want to tell which lease a waiter waits for.
-- Keyed with a secret of the cluster, so that no role can craft a name that
-- shares another lease's queue; not granted to PUBLIC.
CREATE FUNCTION fencing._lease_lock_tag(name text)
RETURNS bigint
LANGUAGE C VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'fencing_lease_lock_tag';

REVOKE ALL ON FUNCTION fencing._lease_lock_tag(text) FROM PUBLIC;

CREATE FUNCTION fencing.lease_lock(name text, token bigint)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_lock';

COMMENT ON FUNCTION fencing.lease_lock(text, bigint) IS
	'True iff the token is current and the lease live; holds it until commit';

-- Why a token is no longer its lease's current one (a lease, a semaphore
-- slot or an election): at once, or (wait > 0) as soon as it stops being
-- current, expiry included.  Reasons: current, expired, taken_over,
-- released, force_released, lost_at_failover, unknown; "successor" is the
-- token that replaced it, when one did.
CREATE FUNCTION fencing.lease_watch(name text, token bigint,
									wait interval DEFAULT '0',
									OUT reason text, OUT successor bigint)
RETURNS record
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_watch';

COMMENT ON FUNCTION fencing.lease_watch(text, bigint, interval) IS
	'Why the token is not current (or "current"), waiting up to wait for it to stop being current';

-- Leader election (src/election.c): an election is a lease of kind
-- election, renewed with lease_renew; its leader publishes a value.
CREATE FUNCTION fencing.election_campaign(election text, candidate text,
										  value text, ttl interval,
										  wait interval DEFAULT '0')
RETURNS bigint
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_election_campaign';

COMMENT ON FUNCTION fencing.election_campaign(text, text, text, interval, interval) IS
	'Become the leader with this value, waiting up to wait in arrival order: the leader''s token, or NULL';

CREATE FUNCTION fencing.election_proclaim(election text, token bigint, value text)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_election_proclaim';

COMMENT ON FUNCTION fencing.election_proclaim(text, bigint, text) IS
	'The leader publishes a new value; false for a token that is not the live leader''s';

CREATE FUNCTION fencing.election_leader(election text,
										OUT candidate text,
										OUT candidate_role name, OUT value text,
										OUT token bigint, OUT since timestamptz,
										OUT expires_at timestamptz)
RETURNS record
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_election_leader';

COMMENT ON FUNCTION fencing.election_leader(text) IS
	'The current leader, or one row of NULLs';

CREATE FUNCTION fencing.election_observe(election text, known_token bigint,
										 known_value text, wait interval,
										 OUT candidate text,
										 OUT candidate_role name, OUT value text,
										 OUT token bigint, OUT since timestamptz,
										 OUT expires_at timestamptz)
RETURNS record
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_election_observe';

COMMENT ON FUNCTION fencing.election_observe(text, bigint, text, interval) IS
	'The leadership once it differs from (known_token, known_value), waiting up to wait; else unchanged';

CREATE FUNCTION fencing.election_resign(election text, token bigint)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_election_resign';

COMMENT ON FUNCTION fencing.election_resign(text, bigint) IS
	'The leader steps down; false for a token that is not the live leader''s';

-- In a WHERE clause: AND fencing.fence_allows(fence, $token).  The same
-- choice as fence_advance: a token newer than the fence, or (allow_same)
-- the token the row is fenced with, for a holder that writes a row again.
CREATE FUNCTION fencing.fence_allows(fence bigint, token bigint,
									 allow_same boolean DEFAULT false)
RETURNS boolean
LANGUAGE C IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'fencing_fence_allows';

COMMENT ON FUNCTION fencing.fence_allows(bigint, bigint, boolean) IS
	'True iff fence IS NULL OR fence < token (<= with allow_same): this token may write the row';

-- In the SET list: fence = fencing.fence_advance(fence, $token).  Runs only
-- for rows the statement updates, and raises LF001 for a stale token.
-- IMMUTABLE, as fence_allows, because Citus sends a row's
-- SET, WHERE and ON CONFLICT expressions to the workers only when their
-- functions are (docs/citus.md).  The planner folds an IMMUTABLE call only
-- when every argument is a constant, never with the row's fence column as
-- an argument, so it still runs per written row, at execution
-- (sql/resource_folding.sql); its side effects (counting a refusal, the
-- band check, forcing a synchronous commit) then happen in the transaction
-- that makes the write.  A folded call marks its transaction, whose end
-- invalidates the session's cached plans (src/fence.c).
CREATE FUNCTION fencing.fence_advance(fence bigint, token bigint,
									  allow_same boolean DEFAULT false)
RETURNS bigint
LANGUAGE C IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'fencing_fence_advance';

COMMENT ON FUNCTION fencing.fence_advance(bigint, bigint, boolean) IS
	'The token, as the row''s new fence; raises LF001 if older than the fence';

CREATE FUNCTION fencing.expect_rows(affected bigint, expected bigint DEFAULT 1)
RETURNS bigint
LANGUAGE C VOLATILE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'fencing_expect_rows';

COMMENT ON FUNCTION fencing.expect_rows(bigint, bigint) IS
	'Raises LF003 when a fenced write changed fewer rows than expected';

CREATE FUNCTION fencing.fence_guard()
RETURNS trigger
LANGUAGE C
AS 'MODULE_PATHNAME', 'fencing_fence_guard';

COMMENT ON FUNCTION fencing.fence_guard() IS
	'Row trigger: refuse writes older than the row''s fence column (argument)';

-- Job queues: claim_stamp writes a fresh token into the row the queue's
-- own claim statement claims (the trigger's WHEN clause names the claim);
-- claim_guard refuses a completion, failure or retry whose token is not
-- the row's stamp (LF001 older, LF010 newer, LF011 no stamp, LF012 the
-- write moves the stamp, LF004 no token).  Token places are a bigint
-- column 'col' or a jsonb key 'col->key'.
CREATE FUNCTION fencing.claim_stamp()
RETURNS trigger
LANGUAGE C
AS 'MODULE_PATHNAME', 'fencing_claim_stamp';

COMMENT ON FUNCTION fencing.claim_stamp() IS
	'Row trigger: write a fresh fencing token at the place named by its argument, on the claim its WHEN clause names';

CREATE FUNCTION fencing.claim_guard()
RETURNS trigger
LANGUAGE C
AS 'MODULE_PATHNAME', 'fencing_claim_guard';

COMMENT ON FUNCTION fencing.claim_guard() IS
	'Row trigger: refuse a completion whose token (a place of the new row, or fencing.token) is not the row''s claim stamp';

CREATE FUNCTION fencing.lease_force_release(name text)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_force_release';

COMMENT ON FUNCTION fencing.lease_force_release(text) IS
	'End a live lease whoever holds it (superuser or fencing_admin; logged)';

CREATE FUNCTION fencing.lease_purge(older_than interval)
RETURNS bigint
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_purge';

COMMENT ON FUNCTION fencing.lease_purge(interval) IS
	'Delete leases free for longer than older_than (superuser or fencing_admin)';

CREATE VIEW fencing.lease_status AS
SELECT l.name,
	   l.slot,
	   CASE
		   WHEN l.kind OPERATOR(pg_catalog.=) 'l' THEN 'lease'
		   WHEN l.kind OPERATOR(pg_catalog.=) 's' THEN 'semaphore'
		   WHEN l.kind OPERATOR(pg_catalog.=) 'e' THEN 'election'
	   END AS kind,
	   l.slots,
	   l.holder,
	   l.holder_role,
	   l.token,
	   l.acquired_at,
	   l.expires_at,
	   l.released_at,
	   CASE
		   WHEN l.released_at IS NOT NULL THEN 'free'
		   WHEN l.expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp() THEN 'expired'
		   ELSE 'held'
	   END AS state,
	   CASE
		   WHEN l.released_at IS NULL
			AND l.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
		   THEN l.expires_at OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()
	   END AS remaining,
	   l.holder_changes,
	   l.lock_delay,
	   CASE
		   WHEN l.released_at IS NOT NULL THEN l.released_at
		   ELSE l.expires_at OPERATOR(pg_catalog.+) l.lock_delay
	   END AS available_at,
	   l.takeover,
	   l.value,
	   l.acquires,
	   l.renewals,
	   l.releases,
	   l.expired_takeovers
  FROM fencing.leases AS l;

COMMENT ON VIEW fencing.lease_status IS
	'One row per lease and per semaphore slot: holder, token, times, state, holder changes and counters';

GRANT SELECT ON fencing.lease_status TO PUBLIC;

-- ---- Monitoring: schema fencing_monitor ----
--
-- What an operator's monitoring reads (docs/operations.md).  A schema of
-- its own, so that pg_monitor can read it without USAGE on schema fencing,
-- which would let it call every lease function.  It holds views and the
-- functions behind them, nothing that changes a lease; stats_reset() is
-- not open to PUBLIC, nor to pg_monitor.
CREATE SCHEMA fencing_monitor;

COMMENT ON SCHEMA fencing_monitor IS
	'Counters, waiters and lease state for monitoring; readable by pg_monitor';

GRANT USAGE ON SCHEMA fencing_monitor TO pg_monitor;

-- This database's counters in shared memory (src/stats.c), NULL when they
-- are off (detail says why); wait_time in milliseconds.  PARALLEL UNSAFE:
-- a query that reads them (a count over a large fencing.leases) runs in
-- the leader outside parallel mode, where a backend can always attach.
CREATE FUNCTION fencing_monitor._stats(
	OUT counting boolean, OUT detail text, OUT stats_reset timestamptz,
	OUT acquires bigint, OUT renewals bigint, OUT releases bigint,
	OUT force_releases bigint, OUT expirations bigint, OUT takeovers bigint,
	OUT fence_advance_refusals bigint, OUT fence_guard_refusals bigint,
	OUT claim_guard_refusals bigint, OUT old_band_refusals bigint,
	OUT waits bigint, OUT wait_timeouts bigint,
	OUT wait_time double precision)
RETURNS record
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_stats';

CREATE FUNCTION fencing_monitor._stats_wait_histogram(
	OUT upper_ms double precision, OUT waits bigint)
RETURNS SETOF record
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 11
AS 'MODULE_PATHNAME', 'fencing_stats_wait_histogram';

CREATE FUNCTION fencing_monitor.stats_reset()
RETURNS timestamptz
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_stats_reset';

COMMENT ON FUNCTION fencing_monitor.stats_reset() IS
	'Set this database''s counters to zero; returns the new stats_reset (superuser, or whom it is granted to)';

REVOKE ALL ON FUNCTION fencing_monitor._stats(),
	fencing_monitor._stats_wait_histogram(), fencing_monitor.stats_reset()
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing_monitor._stats(),
	fencing_monitor._stats_wait_histogram() TO pg_monitor;
-- fencing_monitor.waiters maps lock tags to leases with it; with the key
-- unknown, computing tags finds a name sharing a given lease's tag no
-- sooner than 2^64 tries
GRANT EXECUTE ON FUNCTION fencing._lease_lock_tag(text) TO pg_monitor;

CREATE VIEW fencing_monitor.stats AS
SELECT l.leases,
	   l.held,
	   s.acquires,
	   s.renewals,
	   s.releases,
	   s.force_releases,
	   s.expirations,
	   s.takeovers,
	   s.fence_advance_refusals,
	   s.fence_guard_refusals,
	   s.claim_guard_refusals,
	   s.old_band_refusals,
	   s.waits,
	   s.wait_timeouts,
	   s.wait_time
  FROM fencing_monitor._stats() AS s,
	   (SELECT pg_catalog.count(*) AS leases,
			   pg_catalog.count(*) FILTER (
				   WHERE r.released_at IS NULL
					 AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
			   ) AS held
		  FROM fencing.leases AS r) AS l;

COMMENT ON VIEW fencing_monitor.stats IS
	'Leases and held leases now; lease events, refused writes and waits since stats_info.stats_reset';

CREATE VIEW fencing_monitor.stats_info AS
SELECT s.stats_reset,
	   s.counting,
	   s.detail
  FROM fencing_monitor._stats() AS s;

COMMENT ON VIEW fencing_monitor.stats_info IS
	'Since when the counters count, and whether they do (detail says why not)';

CREATE VIEW fencing_monitor.wait_histogram AS
SELECT h.upper_ms,
	   h.waits
  FROM fencing_monitor._stats_wait_histogram() AS h;

COMMENT ON VIEW fencing_monitor.wait_histogram IS
	'Waits that lasted at most upper_ms milliseconds, cumulative, as in a Prometheus histogram';

-- The same rows as fencing.lease_status.
CREATE VIEW fencing_monitor.lease_status AS
SELECT s.*
  FROM fencing.lease_status AS s;

COMMENT ON VIEW fencing_monitor.lease_status IS
	'fencing.lease_status, for monitoring';

-- Backends waiting for a lease or a semaphore of this database, found on
-- every major by the queue's advisory lock (src/lease_wait.c): field 4 =
-- 0x4646 (objsubid 17990), fields 2 and 3 the keyed 64-bit hash of the
-- name, fencing._lease_lock_tag(name) (classid its high 32 bits, objid its
-- low ones).  The head of a queue holds that lock and sleeps in wait event
-- Extension:FencingLeaseWait (Extension:Extension before PostgreSQL 17);
-- the others wait for it (Lock:advisory).  Names are hashed only while
-- someone waits: first the held ones, then, for waiters none of them
-- matches, the others (a lease taken again in a transaction still open is
-- free in its committed row).  A waiter for a name that has no committed
-- row yet (created in a transaction still open) shows with lease NULL.
CREATE VIEW fencing_monitor.waiters AS
WITH q AS MATERIALIZED (
	SELECT l.pid, l.granted, l.classid, l.objid
	  FROM pg_catalog.pg_locks AS l
	 WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory'
	   AND l.objsubid OPERATOR(pg_catalog.=) 17990
	   AND l.database OPERATOR(pg_catalog.=)
			 (SELECT d.oid FROM pg_catalog.pg_database AS d
			   WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
), held AS MATERIALIZED (
	SELECT DISTINCT r.name, fencing._lease_lock_tag(r.name) AS h
	  FROM fencing.leases AS r
	 WHERE r.released_at IS NULL
	   AND EXISTS (SELECT FROM q)
), matched AS MATERIALIZED (
	SELECT q.pid, n.name
	  FROM q
	  JOIN held AS n
		ON q.classid OPERATOR(pg_catalog.=)
			 ((n.h OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295)::pg_catalog.oid
	   AND q.objid OPERATOR(pg_catalog.=)
			 (n.h OPERATOR(pg_catalog.&) 4294967295)::pg_catalog.oid
), free AS MATERIALIZED (
	SELECT DISTINCT r.name, fencing._lease_lock_tag(r.name) AS h
	  FROM fencing.leases AS r
	 WHERE r.released_at IS NOT NULL
	   AND EXISTS (SELECT FROM q
				   WHERE q.pid OPERATOR(pg_catalog.<>) ALL (SELECT m.pid FROM matched AS m))
)
SELECT COALESCE(m.name, f.name) AS lease,
	   q.pid,
	   q.granted AS head,
	   a.usename,
	   a.application_name,
	   a.wait_event_type,
	   a.wait_event,
	   a.query_start
  FROM q
  LEFT JOIN matched AS m
	ON m.pid OPERATOR(pg_catalog.=) q.pid
  LEFT JOIN free AS f
	ON m.pid IS NULL
   AND q.classid OPERATOR(pg_catalog.=)
		 ((f.h OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295)::pg_catalog.oid
   AND q.objid OPERATOR(pg_catalog.=)
		 (f.h OPERATOR(pg_catalog.&) 4294967295)::pg_catalog.oid
  LEFT JOIN pg_catalog.pg_stat_activity AS a
	ON a.pid OPERATOR(pg_catalog.=) q.pid;

COMMENT ON VIEW fencing_monitor.waiters IS
	'Backends waiting in lease_acquire, semaphore_acquire or election_campaign: the lease (NULL for a name not committed yet), and whether the backend is the head of its queue';

GRANT SELECT ON fencing_monitor.stats, fencing_monitor.stats_info,
	fencing_monitor.wait_histogram, fencing_monitor.lease_status,
	fencing_monitor.waiters TO pg_monitor;

-- The counters of this database start from zero with the extension: those
-- of an earlier CREATE EXTENSION, dropped since, stay in shared memory
-- until the server restarts.
DO $$
BEGIN
	IF (SELECT i.counting FROM fencing_monitor.stats_info AS i) THEN
		PERFORM fencing_monitor.stats_reset();
	END IF;
END
$$;
