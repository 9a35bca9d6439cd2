-- lease_renew, lease_release and lease_lock with current, stale, foreign
-- and unknown tokens.

SELECT fencing.lease_acquire('rr', 'alice', '10 s') AS t1 \gset
SELECT fencing.lease_acquire('rr_other', 'bob', '10 min') AS t_other \gset
SELECT acquired_at AS acquired_1 FROM fencing.lease_status WHERE name = 'rr' \gset

-- renew: true, expires_at = now + ttl; token and acquired_at unchanged;
-- no token is spent
SELECT fencing.next_token() AS n0 \gset
SELECT fencing.lease_renew('rr', :t1, '10 min') AS renewed;
SELECT token = :t1 AS same_token, acquired_at = :'acquired_1' AS same_acquired_at,
	   expires_at - clock_timestamp() BETWEEN '9 min 59 s' AND '10 min' AS expires_in_10_min,
	   state, holder_changes
  FROM fencing.lease_status WHERE name = 'rr';
-- renew may shorten the lease too
SELECT fencing.lease_renew('rr', :t1, '30 s') AS renewed_shorter;
SELECT expires_at - clock_timestamp() BETWEEN '29 s' AND '30 s' AS expires_in_30_s
  FROM fencing.lease_status WHERE name = 'rr';
SELECT fencing.lease_renew('rr', :t1, '1 day') AS renewed_one_day;
SELECT expires_at - clock_timestamp() BETWEEN '23:59:59' AND '24:00:00' AS expires_in_1_day
  FROM fencing.lease_status WHERE name = 'rr';
SELECT fencing.next_token() = :n0 + 1 AS no_token_spent;

-- wrong tokens: stale, foreign, never issued; unknown lease
SELECT expires_at AS expires_before FROM fencing.lease_status WHERE name = 'rr' \gset
SELECT fencing.lease_renew('rr', :t_other, '1 min') AS foreign_token,
	   fencing.lease_renew('rr', :t1 + 1000000, '1 min') AS future_token,
	   fencing.lease_renew('rr', 1, '1 min') AS token_1,
	   fencing.lease_renew('rr_unknown', :t1, '1 min') AS unknown_lease,
	   fencing.lease_renew('RR', :t1, '1 min') AS names_case_sensitive;
SELECT fencing.lease_lock('rr', :t_other) AS foreign_token,
	   fencing.lease_lock('rr', :t1 + 1000000) AS future_token,
	   fencing.lease_lock('rr_unknown', :t1) AS unknown_lease;
SELECT fencing.lease_release('rr', :t_other) AS foreign_token,
	   fencing.lease_release('rr', :t1 + 1000000) AS future_token,
	   fencing.lease_release('rr_unknown', :t1) AS unknown_lease;
SELECT expires_at = :'expires_before' AS expiry_unchanged, state, released_at IS NULL AS not_released
  FROM fencing.lease_status WHERE name = 'rr';
SELECT count(*) AS unknown_rows FROM fencing.leases WHERE name IN ('rr_unknown', 'RR');
SELECT fencing.lease_lock('rr', :t1) AS t1_live, fencing.lease_lock('rr_other', :t_other) AS other_live;

-- re-acquire makes t1 stale
SELECT fencing.lease_acquire('rr', 'alice', '10 min') AS t2 \gset
SELECT fencing.lease_renew('rr', :t1, '1 min') AS stale_renew,
	   fencing.lease_release('rr', :t1) AS stale_release,
	   fencing.lease_lock('rr', :t1) AS stale_check;
SELECT token = :t2 AS t2_current, state FROM fencing.lease_status WHERE name = 'rr';

-- release: true once; the lease is free at once
SELECT fencing.lease_release('rr', :t2) AS released;
SELECT state, released_at IS NOT NULL AS has_released_at, remaining IS NULL AS no_remaining,
	   token = :t2 AS token_kept
  FROM fencing.lease_status WHERE name = 'rr';
SELECT fencing.lease_release('rr', :t2) AS released_twice,
	   fencing.lease_renew('rr', :t2, '1 min') AS renew_released,
	   fencing.lease_lock('rr', :t2) AS check_released;
SELECT state FROM fencing.lease_status WHERE name = 'rr';
SELECT fencing.lease_acquire('rr', 'bob', '10 min') AS t3 \gset
SELECT :t3 > :t2 AS bob_token_larger, fencing.lease_lock('rr', :t3) AS bob_live;
SELECT holder, state, holder_changes, released_at IS NULL AS not_released
  FROM fencing.lease_status WHERE name = 'rr';

-- bob's current token works for renew and release, alice's old ones never
SELECT fencing.lease_renew('rr', :t2, '1 min') AS alice_renew,
	   fencing.lease_renew('rr', :t3, '1 min') AS bob_renew;
SELECT fencing.lease_release('rr', :t2) AS alice_release,
	   fencing.lease_release('rr', :t3) AS bob_release;
SELECT state FROM fencing.lease_status WHERE name = 'rr';

-- all of this left the other lease alone
SELECT fencing.lease_lock('rr_other', :t_other) AS other_live;
SELECT fencing.lease_release('rr_other', :t_other) AS other_released;
