-- Expiry: judged by clock_timestamp() at each call, never by the start of
-- the transaction.  One short sleep serves every case in this file.

-- leases with a 1 s TTL, all to be expired after the sleep below
SELECT fencing.lease_acquire('exp_renew', 'alice', '1 s') AS t_renew \gset
SELECT fencing.lease_acquire('exp_release', 'alice', '1 s') AS t_release \gset
SELECT fencing.lease_acquire('exp_check', 'alice', '1 s') AS t_check \gset
SELECT fencing.lease_acquire('exp_other', 'alice', '1 s') AS t_other \gset
SELECT fencing.lease_acquire('exp_own', 'alice', '1 s') AS t_own \gset
SELECT fencing.lease_acquire('exp_live', 'alice', '1 min') AS t_live \gset
SELECT name, state, remaining > '0' AS has_remaining
  FROM fencing.lease_status WHERE name LIKE 'exp\_%' ORDER BY name;

-- in ONE transaction: a 1 s lease, a sleep, then another holder takes it;
-- now() stays at the transaction's start, the lease functions do not
BEGIN;
SELECT fencing.lease_acquire('exp_tx', 'alice', '1 s') AS t_tx \gset
SELECT fencing.lease_acquire('exp_tx', 'bob', '1 s') IS NULL AS bob_refused_while_live;
SELECT fencing.lease_lock('exp_tx', :t_tx) AS live_before_sleep;
SELECT pg_sleep(1.2);
SELECT expires_at > now() AS not_expired_by_now, state
  FROM fencing.lease_status WHERE name = 'exp_tx';
SELECT fencing.lease_lock('exp_tx', :t_tx) AS check_after_expiry,
	   fencing.lease_renew('exp_tx', :t_tx, '1 min') AS renew_after_expiry;
SELECT fencing.lease_acquire('exp_tx', 'bob', '1 min') AS t_tx_bob \gset
SELECT :t_tx_bob > :t_tx AS bob_token_larger;
SELECT holder, token = :t_tx_bob AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'exp_tx';
-- but alice's check in this transaction holds its commit to alice's
-- expiry, which has passed: the commit fails (LF022), bob's takeover with it
\set VERBOSITY sqlstate
COMMIT;
\set VERBOSITY default
SELECT count(*) AS rolled_back_rows
  FROM fencing.lease_status WHERE name = 'exp_tx';

-- every 1 s lease is now expired: no remaining time, not free
SELECT name, state, remaining IS NULL AS no_remaining, released_at IS NULL AS not_released
  FROM fencing.lease_status WHERE name LIKE 'exp\_%' ORDER BY name;

-- the holder of an expired lease can no longer renew, release or lock it
SELECT fencing.lease_renew('exp_renew', :t_renew, '1 min') AS renew_expired;
SELECT fencing.lease_release('exp_release', :t_release) AS release_expired;
SELECT fencing.lease_lock('exp_check', :t_check) AS check_expired;
SELECT name, state, released_at IS NULL AS not_released
  FROM fencing.lease_status
 WHERE name IN ('exp_renew', 'exp_release', 'exp_check') ORDER BY name;

-- another holder takes an expired lease, with a larger token
SELECT fencing.lease_acquire('exp_other', 'bob', '1 min') AS t_other_bob \gset
SELECT :t_other_bob > :t_other AS larger,
	   fencing.lease_lock('exp_other', :t_other) AS alice_stale,
	   fencing.lease_lock('exp_other', :t_other_bob) AS bob_live;
SELECT holder, state, holder_changes FROM fencing.lease_status WHERE name = 'exp_other';

-- the same holder takes its own expired lease back, with a larger token
SELECT fencing.lease_acquire('exp_own', 'alice', '1 min') AS t_own2 \gset
SELECT :t_own2 > :t_own AS larger, fencing.lease_lock('exp_own', :t_own) AS old_stale;
SELECT holder, state, holder_changes FROM fencing.lease_status WHERE name = 'exp_own';

-- a 1 min lease is untouched by all this
SELECT fencing.lease_lock('exp_live', :t_live) AS live_still_live;
SELECT fencing.lease_acquire('exp_live', 'bob', '1 min') IS NULL AS bob_refused;

-- A TTL is a plain duration: '1 day' is 86400 s even across a DST change.
-- Put a daylight-saving start between now and now + 1 day (a POSIX zone,
-- UTC in winter, whose summer starts on the hour 11-12 hours from now), so
-- that timestamptz + '1 day' would be only 23 hours.  (Not at midnight:
-- run in the hour after midnight, now + 1 day would land in the skipped
-- hour and be 24 hours after all.)
SELECT set_config('timezone',
				  format('XST0XDT,%s/%s,%s/0', n, h, (n + 180) % 365), false) IS NOT NULL AS tz_set
  FROM (SELECT extract(doy FROM s)::int - 1 AS n, extract(hour FROM s)::int AS h
		  FROM (SELECT (clock_timestamp() AT TIME ZONE 'UTC') + interval '12 hours' AS s) AS t) AS d;
SELECT now() + interval '1 day' - now() = interval '23 hours' AS calendar_day_is_23_hours;
SELECT fencing.lease_acquire('exp_dst', 'alice', '1 day') AS t_dst \gset
SELECT expires_at - acquired_at BETWEEN '23:59:59.99' AND '24:00:00.01' AS acquire_ttl_86400_s
  FROM fencing.lease_status WHERE name = 'exp_dst';
SELECT fencing.lease_renew('exp_dst', :t_dst, '1 day') AS renewed;
SELECT expires_at - clock_timestamp() BETWEEN '23:59:59' AND '24:00:00' AS renew_ttl_86400_s,
	   remaining BETWEEN '23:59:59' AND '24:00:00' AS remaining_86400_s
  FROM fencing.lease_status WHERE name = 'exp_dst';
SELECT fencing.lease_renew('exp_dst', :t_dst, '1 mon -29 days') AS renewed_mixed;
SELECT expires_at - clock_timestamp() BETWEEN '23:59:59' AND '24:00:00' AS mixed_ttl_86400_s
  FROM fencing.lease_status WHERE name = 'exp_dst';
RESET timezone;
