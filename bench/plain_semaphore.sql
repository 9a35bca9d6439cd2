-- bench/plain_semaphore.sql: the counting semaphore a user would write in
-- plain SQL, as a contender for bench/semaphore.sh.  One row per slot,
-- created up front; no functions: the client sends these two statements
-- itself (bench/semaphore.sh has them in its pgbench script, the acquire
-- wrapped in WITH a AS (...) SELECT coalesce((SELECT token FROM a), 0),
-- because pgbench's \gset needs a row where an application would simply
-- see none).
--
--   acquire (NULL when every one of the first $slots slots is live or
--   being taken; SKIP LOCKED passes over slots that another session is
--   taking or releasing at that moment):
--
--     UPDATE plain_sem.slots
--        SET holder = $holder, token = nextval('plain_sem.token_seq'),
--            expires_at = clock_timestamp() + $ttl
--      WHERE name = $name
--        AND slot = (SELECT slot FROM plain_sem.slots
--                     WHERE name = $name AND slot < $slots
--                       AND expires_at <= clock_timestamp()
--                     ORDER BY slot LIMIT 1
--                       FOR UPDATE SKIP LOCKED)
--     RETURNING token;
--
--   release (true when the token was current and the slot live), by name
--   and token as fencing.lease_release takes them:
--
--     UPDATE plain_sem.slots
--        SET expires_at = clock_timestamp()
--      WHERE name = $name AND token = $token
--        AND expires_at > clock_timestamp();
--
-- The outer UPDATE finds the row by its key, not by
-- "ctid = (SELECT ctid ...)": under READ COMMITTED the locking subquery
-- may hand back a row version newer than the statement's snapshot, which
-- a TID scan with that snapshot does not see, so the acquire would miss a
-- slot it had locked.  By key, the UPDATE follows the update chain to the
-- version the subquery locked.
--
-- What it does not do that fencing.semaphore_acquire does: give a holder
-- that already holds a slot that slot again (here it takes a second one),
-- create slots on demand, check its arguments, record a holder role or
-- counters, and keep tokens increasing across a restore.  The table has
-- the fillfactor of fencing.leases, so both get HOT updates.

CREATE SCHEMA plain_sem;
CREATE SEQUENCE plain_sem.token_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE plain_sem.slots (
	name		text NOT NULL,
	slot		integer NOT NULL,
	holder		text NOT NULL,
	token		bigint NOT NULL,
	expires_at	timestamptz NOT NULL,
	PRIMARY KEY (name, slot)
) WITH (fillfactor = 70);
