-- lease_purge(older_than) deletes leases that have been free (released, or
-- expired past their lock delay) for longer than older_than, and returns
-- how many.  Held leases, and expired ones still inside their lock delay,
-- stay.  Tokens come from one counter, so a purged lease acquired again
-- gets a larger token than it ever had.  Superusers and members of role
-- fencing_admin only.
--
-- Purge works on all leases of the database, including those other files
-- left behind, so its count is compared with a count of the same
-- condition taken just before.

-- five leases in different states
SELECT fencing.lease_acquire('op_pg_released', 'a', '1 min') AS t_rel \gset
SELECT fencing.lease_release('op_pg_released', :t_rel) AS released;
SELECT fencing.lease_acquire('op_pg_expired', 'a', '100 ms') AS t_exp \gset
SET fencing.lock_delay = '3s';
SELECT fencing.lease_acquire('op_pg_delayed', 'a', '100 ms') AS t_del \gset
RESET fencing.lock_delay;
SELECT fencing.lease_acquire('op_pg_held', 'a', '1 min') AS t_held \gset
SELECT fencing.lease_acquire('op_pg_recent', 'a', '1 min') AS t_recent \gset
SELECT pg_sleep(0.8);
SELECT fencing.lease_release('op_pg_recent', :t_recent) AS released;
SELECT name, state FROM fencing.lease_status WHERE name LIKE 'op\_pg\_%' ORDER BY name;

-- free for longer than 300 ms: released and expired (without delay);
-- not: held, inside the lock delay, released just now
SELECT count(*) AS expected_purge FROM fencing.lease_status
 WHERE available_at < clock_timestamp() - interval '300 ms' \gset
SELECT fencing.lease_purge('300 ms') = :expected_purge AS purged_as_expected, :expected_purge >= 2 AS at_least_two;
SELECT name, state FROM fencing.lease_status WHERE name LIKE 'op\_pg\_%' ORDER BY name;
-- nothing is free that long any more
SELECT fencing.lease_purge('300 ms') AS purged_again;
SELECT fencing.lease_purge('1 day') AS purged_1_day;

-- a purged lease acquired again: a larger token than any it had, and its
-- counters start afresh
SELECT fencing.lease_acquire('op_pg_released', 'b', '1 min') AS t_again \gset
SELECT :t_again > :t_rel AS larger_than_its_own, :t_again > :t_recent AS larger_than_any_before,
	   holder, state, takeover, acquires, releases, holder_changes
  FROM fencing.lease_status WHERE name = 'op_pg_released';
SELECT fencing.fence_allows(:t_rel, :t_again) AS new_token_passes_old_fence;

-- the lease inside its lock delay is purged once the delay is over and it
-- has been free for longer than older_than
SELECT pg_sleep_until((SELECT available_at FROM fencing.lease_status WHERE name = 'op_pg_delayed') + interval '300 ms');
SELECT fencing.lease_purge('200 ms') >= 1 AS purged;
SELECT name, state FROM fencing.lease_status WHERE name LIKE 'op\_pg\_%' ORDER BY name;

-- held leases are never purged, however small older_than; zero is allowed
SELECT fencing.lease_purge('0') >= 0 AS purged_zero;
SELECT name, state FROM fencing.lease_status WHERE name IN ('op_pg_held', 'op_pg_released') ORDER BY name;

-- purge in a transaction that rolls back deletes nothing
SELECT fencing.lease_release('op_pg_held', :t_held) AS released;
BEGIN;
SELECT fencing.lease_purge('0') >= 1 AS purged_in_tx;
SELECT count(*) AS inside_tx FROM fencing.lease_status WHERE name = 'op_pg_held';
ROLLBACK;
SELECT count(*) AS after_rollback FROM fencing.lease_status WHERE name = 'op_pg_held';

-- the totals over fencing.lease_status lose the leases and their counts
SELECT count(*) AS leases_before, sum(acquires) AS acquires_before FROM fencing.lease_status \gset
SELECT sum(acquires) AS acquires_gone, count(*) AS leases_gone FROM fencing.lease_status
 WHERE name = 'op_pg_held' \gset
SELECT pg_sleep(0.1);
SELECT fencing.lease_purge('50 ms') >= 1 AS purged;
SELECT :leases_before - count(*) >= :leases_gone AS fewer_leases,
	   :acquires_before - sum(acquires) >= :acquires_gone AS fewer_acquires
  FROM fencing.lease_status;

-- argument checks
SELECT fencing.lease_purge(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_purge('-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_purge('1 mon -31 days');
\echo :LAST_ERROR_SQLSTATE
-- (very large ages: operate_purge_age.sql)

-- ordinary roles may not purge
CREATE ROLE regress_op_purger;
GRANT USAGE ON SCHEMA fencing TO regress_op_purger;
SET ROLE regress_op_purger;
SELECT fencing.lease_purge('1 day');
\echo :LAST_ERROR_SQLSTATE
-- the permission check comes first
SELECT fencing.lease_purge(NULL);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
REVOKE USAGE ON SCHEMA fencing FROM regress_op_purger;
DROP ROLE regress_op_purger;

SELECT fencing.lease_release('op_pg_released', :t_again) AS released;
