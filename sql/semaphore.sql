--
-- Counting semaphores: semaphore_acquire(name, holder, slots, ttl, wait)
-- grants one of the first "slots" slots of a name; each slot is a lease
-- of its own, with its own holder and token, renewed, released and checked
-- by lease_renew, lease_release and lease_lock with the semaphore's name
-- and the slot's token.  A lease is slot 0 of its name.
--
CREATE FUNCTION pg_temp.slots(n text) RETURNS TABLE (slot integer, holder text, state text)
LANGUAGE sql AS $$
	SELECT slot, holder, state FROM fencing.lease_status WHERE name = n ORDER BY slot
$$;
-- wait (on a condition, not a duration) until a slot's lease has expired
CREATE FUNCTION pg_temp.wait_expired(n text, s integer) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	WHILE (SELECT state FROM fencing.lease_status WHERE name = n AND slot = s) = 'held' LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN (SELECT state FROM fencing.lease_status WHERE name = n AND slot = s);
END
$$;

-- two slots, three holders: the first two get a slot and a token each
SELECT fencing.semaphore_acquire('sem', 'a', 2, '1 min') AS ta \gset
SELECT fencing.semaphore_acquire('sem', 'b', 2, '1 min') AS tb \gset
SELECT fencing.semaphore_acquire('sem', 'c', 2, '1 min') IS NULL AS c_refused;
SELECT :tb > :ta AS tokens_increase;
SELECT * FROM pg_temp.slots('sem');
SELECT slot FROM fencing.lease_status WHERE name = 'sem' AND token = :tb;

-- each slot is renewed, checked and released by its own token
SELECT fencing.lease_renew('sem', :ta, '10 min') AS a_renewed,
	   fencing.lease_lock('sem', :tb) AS b_checked;
SELECT slot, renewals FROM fencing.lease_status WHERE name = 'sem' ORDER BY slot;
SELECT fencing.lease_release('sem', :tb) AS b_released;
SELECT fencing.lease_release('sem', :tb) AS b_released_again;
SELECT fencing.lease_renew('sem', :tb, '1 min') AS b_renew_after_release;
-- the freed slot goes to the next holder
SELECT fencing.semaphore_acquire('sem', 'c', 2, '1 min') AS tc \gset
SELECT :tc > :tb AS c_token_larger;
SELECT * FROM pg_temp.slots('sem');

-- a holder holds one slot: acquiring again re-grants its own slot with a
-- new token, and the old token is stale from then on
SELECT fencing.semaphore_acquire('sem', 'a', 2, '1 min') AS ta2 \gset
SELECT :ta2 > :ta AS new_token, slot
  FROM fencing.lease_status WHERE name = 'sem' AND token = :ta2;
SELECT fencing.lease_renew('sem', :ta, '1 min') AS old_token_renews,
	   fencing.lease_lock('sem', :ta) AS old_token_checks,
	   fencing.lease_release('sem', :ta) AS old_token_releases;
SELECT * FROM pg_temp.slots('sem');

-- a slot's stale holder is fenced like any other: d's slot expires, e takes
-- it over (an expired slot before a slot that has no row yet), and d's
-- write is refused where it lands
SELECT fencing.semaphore_acquire('sem3', 'd', 3, '10 ms') AS td \gset
SELECT pg_temp.wait_expired('sem3', 0);
SELECT fencing.semaphore_acquire('sem3', 'e', 3, '1 min') AS te \gset
SELECT slot, holder, token = :te AS current, takeover, expired_takeovers
  FROM fencing.lease_status WHERE name = 'sem3';
SELECT fencing.lease_renew('sem3', :td, '1 min') AS d_renews;
CREATE TABLE sem_partitions (slot integer PRIMARY KEY, fence bigint NOT NULL, val text);
INSERT INTO sem_partitions VALUES (0, 0, 'none');
UPDATE sem_partitions SET fence = :te, val = 'by e' WHERE slot = 0 AND fence < :te;
UPDATE sem_partitions SET fence = :td, val = 'by d' WHERE slot = 0 AND fence < :td;
\set VERBOSITY sqlstate
UPDATE sem_partitions SET fence = fencing.fence_advance(fence, :td), val = 'by d' WHERE slot = 0;
\set VERBOSITY default
SELECT slot, fence = :te AS fence_is_e, val FROM sem_partitions;
DROP TABLE sem_partitions;

-- with no free slot, the lowest slot that has no row yet
SELECT fencing.semaphore_acquire('sem3', 'f', 3, '1 min') AS tf \gset
SELECT * FROM pg_temp.slots('sem3');

-- a name has one kind and one number of slots while any of its slots is
-- held: a lease and a semaphore never share one, nor do semaphores of
-- different sizes (sql/lease_kinds.sql)
\set VERBOSITY terse
SELECT fencing.lease_acquire('sem3', 'f2', '1 min');
SELECT fencing.semaphore_acquire('sem3', 'f2', 2, '1 min');
\set VERBOSITY default

-- a forced release ends every slot of the name
SELECT fencing.lease_force_release('sem') AS forced;
SELECT fencing.lease_force_release('sem') AS forced_again;
SELECT * FROM pg_temp.slots('sem');
-- purge deletes the free slots only, not the name's other rows
SELECT fencing.lease_purge('0') >= 2 AS purged;
SELECT * FROM pg_temp.slots('sem');
SELECT * FROM pg_temp.slots('sem3');

-- group keepalive renews slots of several semaphores, each by its token
SELECT token AS te3 FROM fencing.lease_status WHERE name = 'sem3' AND holder = 'e' \gset
SELECT token AS tf3 FROM fencing.lease_status WHERE name = 'sem3' AND holder = 'f' \gset
SELECT name, renewed FROM fencing.lease_renew_all(ARRAY['sem3', 'sem3', 'one'],
												   ARRAY[:te3, :tf3, :td], '1 min');

-- waiting: a full semaphore hands the first freed slot to the waiter, and
-- one that stays full returns NULL at the end of the wait
SELECT fencing.semaphore_acquire('full2', 'k' || n, 2, '1 min') IS NOT NULL AS granted
  FROM generate_series(1, 2) AS n;
SELECT fencing.semaphore_acquire('full2', 'm', 2, '1 min', wait => '10 ms') IS NULL AS m_timed_out;
SELECT fencing.semaphore_acquire('full', 'n', 1, '20 ms') AS tn \gset
SELECT fencing.semaphore_acquire('full', 'o', 1, '1 min', wait => '1 min') AS to_ \gset
SELECT :to_ > :tn AS waited_until_expiry, slot, holder
  FROM fencing.lease_status WHERE name = 'full';

-- roles: a slot belongs to the role that acquired it; the same holder
-- name under another role is another holder, and another role's token is
-- refused (42501); members of fencing_admin act as the holder
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_admin')
	   AS admin_created_here \gset
\if :admin_created_here
CREATE ROLE fencing_admin NOLOGIN;
\endif
CREATE ROLE regress_sem_a NOLOGIN;
CREATE ROLE regress_sem_b NOLOGIN;
CREATE ROLE regress_sem_ops NOLOGIN IN ROLE fencing_admin;
GRANT USAGE ON SCHEMA fencing TO regress_sem_a, regress_sem_b, regress_sem_ops;
SET ROLE regress_sem_a;
SELECT fencing.semaphore_acquire('sem_roles', 'w', 2, '1 min') AS tra \gset
RESET ROLE;
SET ROLE regress_sem_b;
SELECT fencing.semaphore_acquire('sem_roles', 'w', 2, '1 min') AS trb \gset
SELECT fencing.semaphore_acquire('sem_roles', 'w2', 2, '1 min') IS NULL AS full_for_b;
\set VERBOSITY terse
SELECT fencing.lease_renew('sem_roles', :tra, '1 min');
SELECT fencing.lease_release('sem_roles', :tra);
SELECT fencing.lease_lock('sem_roles', :tra);
\set VERBOSITY default
RESET ROLE;
SELECT slot, holder, holder_role::text, token = :tra AS a_token, releases
  FROM fencing.lease_status WHERE name = 'sem_roles' ORDER BY slot;
SET ROLE regress_sem_ops;
SELECT fencing.lease_release('sem_roles', :tra) AS admin_released_a;
RESET ROLE;
SELECT slot, holder_role::text, state FROM fencing.lease_status
 WHERE name = 'sem_roles' ORDER BY slot;
DELETE FROM fencing.leases WHERE name = 'sem_roles';
REVOKE USAGE ON SCHEMA fencing FROM regress_sem_a, regress_sem_b, regress_sem_ops;
DROP ROLE regress_sem_a, regress_sem_b, regress_sem_ops;
\if :admin_created_here
DROP ROLE fencing_admin;
\endif

-- bad input: a clear error, and nothing changes
SELECT count(*) AS rows_before, max(token) AS max_before FROM fencing.leases \gset
\set VERBOSITY terse
SELECT fencing.semaphore_acquire(NULL, 'x', 2, '1 min');
SELECT fencing.semaphore_acquire('bad', NULL, 2, '1 min');
SELECT fencing.semaphore_acquire('bad', 'x', NULL, '1 min');
SELECT fencing.semaphore_acquire('bad', 'x', 2, NULL);
SELECT fencing.semaphore_acquire('bad', 'x', 2, '1 min', NULL);
SELECT fencing.semaphore_acquire('', 'x', 2, '1 min');
SELECT fencing.semaphore_acquire('bad', '', 2, '1 min');
SELECT fencing.semaphore_acquire(repeat('n', 257), 'x', 2, '1 min');
SELECT fencing.semaphore_acquire('bad', 'x', 0, '1 min');
SELECT fencing.semaphore_acquire('bad', 'x', -1, '1 min');
SELECT fencing.semaphore_acquire('bad', 'x', 1001, '1 min');
SELECT fencing.semaphore_acquire('bad', 'x', 2, '0');
SELECT fencing.semaphore_acquire('bad', 'x', 2, '2 days');
SELECT fencing.semaphore_acquire('bad', 'x', 2, '1 min', '-1 s');
SELECT fencing.semaphore_acquire('bad', 'x', 2, '1 min', '2 days');
BEGIN TRANSACTION READ ONLY;
SELECT fencing.semaphore_acquire('bad', 'x', 2, '1 min');
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT fencing.semaphore_acquire('bad', 'x', 2, '1 min', wait => '1 s');
ROLLBACK;
\set VERBOSITY default
SELECT count(*) = :rows_before AS rows_unchanged, max(token) = :max_before AS no_token_spent
  FROM fencing.leases;
SELECT fencing.semaphore_acquire('bad', 'x', 1000, '1 min') IS NOT NULL AS thousand_slots_ok;

DELETE FROM fencing.leases
 WHERE name IN ('sem', 'sem3', 'full2', 'full', 'bad');
