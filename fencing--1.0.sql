/* fencing--1.0.sql: leases with fencing tokens */

\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-- The schema belongs to the extension, so DROP EXTENSION removes it.  (A
-- "schema = fencing" line in fencing.control would have CREATE EXTENSION
-- create it outside the extension, and DROP EXTENSION leave it behind.)
CREATE SCHEMA fencing;

-- The token counter and the state that places it in a band (see
-- src/token.c).  All non-transactional on purpose.  The counter, the band's
-- first token and its origin are dumped by pg_dump, so a restore continues
-- above them; the band's epoch and timeline and the witness are not.
CREATE SEQUENCE fencing.token_seq AS bigint
	MINVALUE 1 NO CYCLE CACHE 1;
CREATE SEQUENCE fencing.token_base AS bigint
	MINVALUE 0 NO CYCLE CACHE 1;
CREATE SEQUENCE fencing.token_origin AS bigint
	MINVALUE -9223372036854775808 MAXVALUE 9223372036854775807 START 0
	NO CYCLE CACHE 1;
CREATE SEQUENCE fencing.token_band AS bigint
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
-- while any of them is held (src/lease_row.c, fencing_define_lease_name).
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

-- Stale writes refused by fence_guard and fence_advance.  A sequence,
-- because the refused transaction rolls back and a counter must not.
CREATE SEQUENCE fencing.stale_write_count AS bigint
	MINVALUE 1 NO CYCLE CACHE 1;

SELECT pg_catalog.pg_extension_config_dump('fencing.leases', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_seq', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_base', '');
SELECT pg_catalog.pg_extension_config_dump('fencing.token_origin', '');

REVOKE ALL ON fencing.leases, fencing.token_seq, fencing.token_base,
	fencing.token_origin, fencing.token_band, fencing.token_witness,
	fencing.stale_write_count
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
-- its own.  Renew, release and check a slot with lease_renew,
-- lease_release and lease_check, by the semaphore's name and the token.
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
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF names IS NULL OR tokens IS NULL OR ttl IS NULL THEN
		RAISE EXCEPTION 'lease names, tokens and TTL must not be null'
			USING ERRCODE = '22004';
	END IF;
	IF pg_catalog.array_ndims(names) > 1 OR pg_catalog.array_ndims(tokens) > 1 THEN
		RAISE EXCEPTION 'lease names and tokens must be one-dimensional arrays'
			USING ERRCODE = '22023';
	END IF;
	IF pg_catalog.cardinality(names) OPERATOR(pg_catalog.<>) pg_catalog.cardinality(tokens) THEN
		RAISE EXCEPTION 'got % lease names but % tokens',
			pg_catalog.cardinality(names), pg_catalog.cardinality(tokens)
			USING ERRCODE = '22023',
				  HINT = 'Pass one token per lease, in the same order.';
	END IF;
	IF pg_catalog.cardinality(names) OPERATOR(pg_catalog.>) 10000 THEN
		RAISE EXCEPTION 'at most 10000 leases per call, got %', pg_catalog.cardinality(names)
			USING ERRCODE = '22023';
	END IF;
	RETURN QUERY
		SELECT u.n, u.t, fencing.lease_renew(u.n, u.t, lease_renew_all.ttl)
		  FROM ROWS FROM (pg_catalog.unnest(names), pg_catalog.unnest(tokens))
			   WITH ORDINALITY AS u(n, t, i)
		 ORDER BY u.n COLLATE "C", u.i;
END
$$;

COMMENT ON FUNCTION fencing.lease_renew_all(text[], bigint[], interval) IS
	'Renew many leases of one holder, each with its own token; one row per lease, in name order';

CREATE FUNCTION fencing.lease_release(name text, token bigint)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_release';

COMMENT ON FUNCTION fencing.lease_release(text, bigint) IS
	'Free a live lease held with this token';

CREATE FUNCTION fencing.lease_check(name text, token bigint)
RETURNS boolean
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_lease_check';

COMMENT ON FUNCTION fencing.lease_check(text, bigint) IS
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
										OUT candidate text, OUT value text,
										OUT token bigint, OUT since timestamptz,
										OUT expires_at timestamptz)
RETURNS record
LANGUAGE C VOLATILE PARALLEL UNSAFE
AS 'MODULE_PATHNAME', 'fencing_election_leader';

COMMENT ON FUNCTION fencing.election_leader(text) IS
	'The current leader, or one row of NULLs';

CREATE FUNCTION fencing.election_observe(election text, known_token bigint,
										 known_value text, wait interval,
										 OUT candidate text, OUT value text,
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

CREATE FUNCTION fencing.fence_check(fence bigint, token bigint)
RETURNS boolean
LANGUAGE C IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'fencing_fence_check';

COMMENT ON FUNCTION fencing.fence_check(bigint, bigint) IS
	'True iff fence IS NULL OR fence < token: this token may write the row';

CREATE FUNCTION fencing.fence_allows(fence bigint, token bigint)
RETURNS boolean
LANGUAGE C IMMUTABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'fencing_fence_allows';

COMMENT ON FUNCTION fencing.fence_allows(bigint, bigint) IS
	'True iff fence IS NULL OR fence <= token: this token is not older than the row';

-- In the SET list: fence = fencing.fence_advance(fence, $token).  Runs only
-- for rows the statement updates, and raises LF001 for a stale token.
-- IMMUTABLE, because Citus sends a row's SET and ON CONFLICT expressions to
-- the workers only when their functions are: its answer depends on its
-- arguments alone.  The planner folds an IMMUTABLE call only when every
-- argument is a constant, never with the row's fence column as the first,
-- so it still runs per written row, at execution (sql/resource_folding.sql);
-- its side effects (counting a refusal, forcing a synchronous commit) then
-- happen in the transaction that makes the write.
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

-- Totals an operator can scrape.  Lease counters live in the lease rows,
-- so lease_purge removes the counts of the leases it deletes.
CREATE VIEW fencing.stats AS
SELECT pg_catalog.count(*) AS leases,
	   pg_catalog.count(*) FILTER (
		   WHERE l.released_at IS NULL
			 AND l.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
	   ) AS held,
	   COALESCE(pg_catalog.sum(l.acquires), 0)::bigint AS acquires,
	   COALESCE(pg_catalog.sum(l.renewals), 0)::bigint AS renewals,
	   COALESCE(pg_catalog.sum(l.releases), 0)::bigint AS releases,
	   COALESCE(pg_catalog.sum(l.expired_takeovers), 0)::bigint AS expired_takeovers,
	   (SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END
		  FROM fencing.stale_write_count AS s) AS stale_writes_refused
  FROM fencing.leases AS l;

COMMENT ON VIEW fencing.stats IS
	'Totals: leases, held, acquires, renewals, releases, expired takeovers, stale writes refused';

GRANT SELECT ON fencing.stats TO PUBLIC;
