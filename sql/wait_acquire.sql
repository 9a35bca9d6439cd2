-- lease_acquire(name, holder, ttl, wait): with wait > 0 it blocks until the
-- lease can be taken or the wait elapses (then NULL).  One session cannot
-- release while it waits, so here the lease comes free by expiry (and lock
-- delay); wake-up by a release from another session is covered by the
-- isolation specs wait_*.spec and t/030_wait_interrupt.pl.
--
-- Timings are asserted with generous bounds: "at once" is under 0.5 s, and
-- a wait that elapses returns between the wait and the wait + 0.5 s.

CREATE FUNCTION pg_temp.ms(a timestamptz, b timestamptz) RETURNS float8
LANGUAGE sql AS $$ SELECT extract(epoch FROM b - a) * 1000 $$;

-- how this backend's waiter registration looks in pg_locks: our advisory
-- tag, share mode
CREATE FUNCTION pg_temp.my_wait_locks() RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(*) FROM pg_locks
	 WHERE locktype = 'advisory' AND objsubid = 17989 AND pid = pg_backend_pid()
$$;

-- argument checks
SELECT fencing.lease_acquire('wait_args', 'a', '1 min', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_acquire('wait_args', 'a', '1 min', '-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_acquire('wait_args', 'a', '1 min', '-1 us');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_acquire('wait_args', 'a', '1 min', '1 day 1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_acquire('wait_args', 'a', '1 min', '25 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_acquire('wait_args', 'a', '1 min', '1 mon');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS nothing_created FROM fencing.lease_status WHERE name = 'wait_args';

-- a free lease: at once, even with the longest wait
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_free', 'alice', '1 min', '1 day') AS f1 \gset
SELECT pg_temp.ms(:'t0', clock_timestamp()) < 500 AS at_once, holder, state
  FROM fencing.lease_status WHERE name = 'wait_free';
-- one's own lease: at once, a new token
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_free', 'alice', '1 min', '10 s') AS f2 \gset
SELECT pg_temp.ms(:'t0', clock_timestamp()) < 500 AS at_once, :f2 > :f1 AS newer_token;
SELECT pg_temp.my_wait_locks() AS wait_locks_left;

-- held by another holder, no wait (the default): NULL at once
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_free', 'bob', '1 min') IS NULL AS refused,
	   pg_temp.ms(:'t0', clock_timestamp()) < 500 AS at_once;
SELECT fencing.lease_acquire('wait_free', 'bob', '1 min', '0') IS NULL AS refused;

-- held, and the wait elapses: NULL after about the wait
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_free', 'bob', '1 min', '700 ms') IS NULL AS refused;
SELECT pg_temp.ms(:'t0', clock_timestamp()) AS elapsed_ms \gset
SELECT :elapsed_ms >= 700 AS waited_the_wait, :elapsed_ms < 1200 AS not_much_longer;
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_free', 'bob', '1 min', '50 ms') IS NULL AS refused;
SELECT pg_temp.ms(:'t0', clock_timestamp()) AS elapsed_ms \gset
SELECT :elapsed_ms >= 50 AS waited_the_wait, :elapsed_ms < 550 AS not_much_longer;
-- the registration is gone once the waiter returns, also inside a
-- transaction
BEGIN;
SELECT fencing.lease_acquire('wait_free', 'bob', '1 min', '100 ms') IS NULL AS refused;
SELECT pg_temp.my_wait_locks() AS wait_locks_left;
COMMIT;
SELECT holder, token = :f2 AS alice_still_current, acquires FROM fencing.lease_status WHERE name = 'wait_free';

-- waiting needs READ COMMITTED: REPEATABLE READ and SERIALIZABLE refuse
-- with 0A000, even for a free lease; without a wait they work
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencing.lease_acquire('wait_rr', 'alice', '1 min', '1 s');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencing.lease_acquire('wait_rr', 'alice', '1 min', '1 s');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT fencing.lease_acquire('wait_rr', 'alice', '1 min', '1 us');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SET default_transaction_isolation = 'repeatable read';
SELECT fencing.lease_acquire('wait_rr', 'alice', '1 min', '1 s');
\echo :LAST_ERROR_SQLSTATE
RESET default_transaction_isolation;
SELECT count(*) AS nothing_created FROM fencing.lease_status WHERE name = 'wait_rr';
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencing.lease_acquire('wait_rr', 'alice', '1 min', '0') IS NOT NULL AS got_without_wait;
COMMIT;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT fencing.lease_acquire('wait_rr', 'bob', '1 min') IS NULL AS refused_without_wait;
COMMIT;
-- an explicit READ COMMITTED transaction may wait
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT fencing.lease_acquire('wait_rr', 'bob', '1 min', '100 ms') IS NULL AS refused_after_wait;
COMMIT;

-- a waiter takes over at expiry: a 300 ms lease, a 2 s wait
SELECT fencing.lease_acquire('wait_expiry', 'alice', '300 ms') AS e1 \gset
SELECT expires_at AS e1_expires FROM fencing.lease_status WHERE name = 'wait_expiry' \gset
SELECT coalesce(sum(expired_takeovers), 0) AS before_expired_takeovers,
	   coalesce(sum(acquires), 0) AS before_acquires
  FROM fencing.lease_status \gset
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_expiry', 'bob', '1 min', '2 s') AS e2 \gset
SELECT clock_timestamp() AS t1 \gset
SELECT :e2 > :e1 AS newer_token,
	   :'t1'::timestamptz >= :'e1_expires' AS not_before_expiry,
	   pg_temp.ms(:'e1_expires', :'t1') < 500 AS soon_after_expiry,
	   pg_temp.ms(:'t0', :'t1') < 1500 AS well_before_the_wait_ends,
	   acquired_at >= :'e1_expires' AS acquired_after_expiry,
	   holder, state, takeover, expired_takeovers, holder_changes, acquires
  FROM fencing.lease_status WHERE name = 'wait_expiry';
SELECT sum(expired_takeovers) - :before_expired_takeovers AS expired_takeovers,
	   sum(acquires) - :before_acquires AS acquires
  FROM fencing.lease_status;
SELECT pg_temp.my_wait_locks() AS wait_locks_left;

-- in an explicit transaction too; the new lease is visible to others
-- once the transaction commits
SELECT fencing.lease_renew('wait_expiry', :e2, '300 ms') AS renewed_short;
BEGIN;
SELECT fencing.lease_acquire('wait_expiry', 'carol', '1 min', '2 s') AS e3 \gset
SELECT pg_temp.my_wait_locks() AS wait_locks_left;
SELECT holder, takeover FROM fencing.lease_status WHERE name = 'wait_expiry';
COMMIT;
SELECT :e3 > :e2 AS newer_token, holder, takeover, expired_takeovers
  FROM fencing.lease_status WHERE name = 'wait_expiry';

-- a waiter respects the lock delay: it gets the lease at expires_at +
-- lock_delay, not at expiry
SET fencing.lock_delay = '800ms';
SELECT fencing.lease_acquire('wait_delay', 'alice', '200 ms') AS d1 \gset
RESET fencing.lock_delay;
SELECT expires_at AS d1_expires, available_at AS d1_available
  FROM fencing.lease_status WHERE name = 'wait_delay' \gset
SELECT fencing.lease_acquire('wait_delay', 'bob', '1 min', '3 s') AS d2 \gset
SELECT clock_timestamp() AS t1 \gset
SELECT :d2 > :d1 AS newer_token,
	   pg_temp.ms(:'d1_expires', :'d1_available') AS delay_ms,
	   :'t1'::timestamptz >= :'d1_available' AS not_before_delay_ends,
	   pg_temp.ms(:'d1_available', :'t1') < 500 AS soon_after_delay_ends,
	   acquired_at >= :'d1_available' AS acquired_after_delay,
	   holder, takeover, expired_takeovers
  FROM fencing.lease_status WHERE name = 'wait_delay';
-- a wait that ends inside the lock delay: NULL
SET fencing.lock_delay = '2s';
SELECT fencing.lease_acquire('wait_delay', 'bob', '100 ms') AS d3 \gset
RESET fencing.lock_delay;
SELECT pg_sleep_until((SELECT expires_at FROM fencing.lease_status WHERE name = 'wait_delay'));
SELECT fencing.lease_acquire('wait_delay', 'carol', '1 min', '300 ms') IS NULL AS refused,
	   clock_timestamp() < (SELECT available_at FROM fencing.lease_status WHERE name = 'wait_delay') AS inside_delay;
-- the holder itself, waiting or not, re-acquires inside the delay at once
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_delay', 'bob', '1 min', '10 s') AS d4 \gset
SELECT :d4 > :d3 AS newer_token, pg_temp.ms(:'t0', clock_timestamp()) < 500 AS at_once,
	   holder, takeover
  FROM fencing.lease_status WHERE name = 'wait_delay';

-- statement_timeout interrupts a waiter at once; the registration goes
-- with the aborted statement.  (The cancel may land in the sleep or in a
-- retry's internal statement, so the error's CONTEXT is not shown.)
\set SHOW_CONTEXT never
SET statement_timeout = '300ms';
SELECT clock_timestamp() AS t0 \gset
SELECT fencing.lease_acquire('wait_delay', 'carol', '1 min', '30 s');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
SELECT pg_temp.ms(:'t0', clock_timestamp()) AS elapsed_ms \gset
SELECT :elapsed_ms >= 300 AS after_timeout, :elapsed_ms < 1000 AS at_once;
SELECT pg_temp.my_wait_locks() AS wait_locks_left;
-- and the same in a transaction block, with a savepoint
BEGIN;
SAVEPOINT w;
SET LOCAL statement_timeout = '200ms';
SELECT fencing.lease_acquire('wait_delay', 'carol', '1 min', '30 s');
ROLLBACK TO SAVEPOINT w;
SELECT pg_temp.my_wait_locks() AS wait_locks_left;
COMMIT;
\set SHOW_CONTEXT errors
SELECT holder, token = :d4 AS bob_still_current FROM fencing.lease_status WHERE name = 'wait_delay';

-- clean up
SELECT fencing.lease_release('wait_free', :f2) AS released,
	   fencing.lease_release('wait_expiry', :e3) AS released2,
	   fencing.lease_release('wait_delay', :d4) AS released3;
