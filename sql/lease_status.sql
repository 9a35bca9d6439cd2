-- fencing.lease_status: one row per lease with state, remaining time and
-- the number of holder changes.

SELECT attname, format_type(atttypid, atttypmod) AS type
  FROM pg_attribute
 WHERE attrelid = 'fencing.lease_status'::regclass AND attnum > 0
 ORDER BY attnum;

-- held
SELECT fencing.lease_acquire('st', 'alice', '10 s') AS t1 \gset
SELECT name, holder, holder_role = current_user::regrole AS role_is_caller,
	   token = :t1 AS current, released_at IS NULL AS not_released, state,
	   remaining BETWEEN '9 s' AND '10 s' AS remaining_about_10_s,
	   expires_at - acquired_at BETWEEN '9.99 s' AND '10.01 s' AS ttl_10_s,
	   holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- re-acquire by the same holder does not count as a holder change
SELECT acquired_at AS acquired_1 FROM fencing.lease_status WHERE name = 'st' \gset
SELECT fencing.lease_acquire('st', 'alice', '20 s') AS t2 \gset
SELECT token = :t2 AS current, acquired_at > :'acquired_1' AS acquired_again, state,
	   expires_at - acquired_at BETWEEN '19.99 s' AND '20.01 s' AS ttl_20_s,
	   holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- renew moves expires_at only
SELECT acquired_at AS acquired_2 FROM fencing.lease_status WHERE name = 'st' \gset
SELECT fencing.lease_renew('st', :t2, '1 min') AS renewed;
SELECT token = :t2 AS same_token, acquired_at = :'acquired_2' AS same_acquired_at, state,
	   remaining BETWEEN '59 s' AND '1 min' AS remaining_about_1_min, holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- held -> free
SELECT fencing.lease_release('st', :t2) AS released;
SELECT holder, token = :t2 AS token_kept, state, remaining,
	   released_at BETWEEN acquired_at AND clock_timestamp() AS released_at_set,
	   released_at < expires_at AS released_before_expiry, holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- acquire after one's own release: no holder change
SELECT fencing.lease_acquire('st', 'alice', '1 min') AS t3 \gset
SELECT holder, token = :t3 AS current, state, released_at IS NULL AS not_released, holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- another holder after a release: one change
SELECT fencing.lease_release('st', :t3) AS released;
SELECT fencing.lease_acquire('st', 'bob', '1 min') AS t4 \gset
SELECT holder, token = :t4 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- back and forth: bob -> alice -> alice -> bob
SELECT fencing.lease_release('st', :t4) AS released;
SELECT fencing.lease_acquire('st', 'alice', '1 min') AS t5 \gset
SELECT fencing.lease_acquire('st', 'alice', '1 min') AS t6 \gset
SELECT fencing.lease_release('st', :t6) AS released;
SELECT fencing.lease_acquire('st', 'bob', '1 min') AS t7 \gset
SELECT holder, token = :t7 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- a refused acquire changes nothing, not even the count
SELECT fencing.lease_acquire('st', 'carol', '1 min') IS NULL AS refused;
SELECT holder, token = :t7 AS current, holder_changes
  FROM fencing.lease_status WHERE name = 'st';

-- held -> expired, and expired -> held by another holder
SELECT fencing.lease_renew('st', :t7, '1 s') AS renewed_short;
SELECT fencing.lease_acquire('st_own', 'dave', '1 s') AS t_own \gset
SELECT pg_sleep(1.2);
SELECT name, holder, state, remaining, released_at IS NULL AS not_released,
	   expires_at < clock_timestamp() AS past_expiry, holder_changes
  FROM fencing.lease_status WHERE name IN ('st', 'st_own') ORDER BY name;
SELECT fencing.lease_acquire('st', 'carol', '1 min') AS t8 \gset
SELECT holder, token = :t8 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'st';
-- expired -> held by the same holder: no change
SELECT fencing.lease_acquire('st_own', 'dave', '1 min') AS t_own2 \gset
SELECT holder, token = :t_own2 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'st_own';

-- the view is readable by everybody, the table by nobody but the owner
SELECT has_table_privilege('public', 'fencing.lease_status', 'SELECT') AS view_public,
	   has_table_privilege('public', 'fencing.leases', 'SELECT') AS table_public;

-- tokens of this file, in order of issue
SELECT :t1 < :t2 AND :t2 < :t3 AND :t3 < :t4 AND :t4 < :t5 AND :t5 < :t6
	   AND :t6 < :t7 AND :t7 < :t_own AND :t_own < :t8 AND :t8 < :t_own2 AS in_order;
