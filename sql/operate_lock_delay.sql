-- fencing.lock_delay: recorded with each acquire.  After the lease EXPIRES
-- (not after a clean release) no other holder may take it until
-- expires_at + lock_delay; the same holder may re-acquire at once.
--
-- Leases of 200 ms and a delay of 1 s keep the file short.  Every
-- "refused inside the delay" also checks, in the same statement, that the
-- clock really was inside the delay, so a slow machine cannot make a
-- refusal look right for the wrong reason.

-- the GUC exists once the library is loaded
LOAD 'fencing';
SELECT name, setting, unit, min_val, max_val, boot_val, vartype, context
  FROM pg_settings WHERE name = 'fencing.lock_delay';
SHOW fencing.lock_delay;
SET fencing.lock_delay = 300;
SHOW fencing.lock_delay;
SET fencing.lock_delay = '1.5s';
SHOW fencing.lock_delay;
SET fencing.lock_delay = '1min';
SHOW fencing.lock_delay;
SET fencing.lock_delay = 60001;
SET fencing.lock_delay = '61s';
SET fencing.lock_delay = -1;
SET fencing.lock_delay = 'soon';
SHOW fencing.lock_delay;
RESET fencing.lock_delay;
SHOW fencing.lock_delay;

-- the delay is recorded at acquire; the session's later setting does not
-- matter
SET fencing.lock_delay = '1s';
SELECT fencing.lease_acquire('op_ld', 'alice', '200 ms') AS a1 \gset
RESET fencing.lock_delay;
SELECT holder, state, lock_delay, available_at = expires_at + lock_delay AS available_after_delay
  FROM fencing.lease_status WHERE name = 'op_ld';

-- expired, but inside the delay: another holder is refused
SELECT pg_sleep_until((SELECT expires_at FROM fencing.lease_status WHERE name = 'op_ld'));
SELECT state, clock_timestamp() < available_at AS inside_delay_before,
	   fencing.lease_acquire('op_ld', 'bob', '1 min') IS NULL AS bob_refused,
	   clock_timestamp() < available_at AS inside_delay_after
  FROM fencing.lease_status WHERE name = 'op_ld';
-- a waiter that gives up before the delay ends is refused too
SELECT fencing.lease_acquire('op_ld', 'bob', '1 min', '100 ms') IS NULL AS bob_waited_refused,
	   clock_timestamp() < (SELECT available_at FROM fencing.lease_status WHERE name = 'op_ld') AS inside_delay;

-- the same holder re-acquires at once, inside the delay
SET fencing.lock_delay = '1s';
SELECT fencing.lease_acquire('op_ld', 'alice', '200 ms') AS a2 \gset
SELECT :a2 > :a1 AS newer_token, holder, state, takeover, lock_delay, holder_changes
  FROM fencing.lease_status WHERE name = 'op_ld';

-- alice's second lease expires: bob is refused until expires_at + delay,
-- then takes over
SELECT pg_sleep_until((SELECT expires_at FROM fencing.lease_status WHERE name = 'op_ld'));
SELECT fencing.lease_acquire('op_ld', 'bob', '1 min') IS NULL AS bob_refused,
	   clock_timestamp() < (SELECT available_at FROM fencing.lease_status WHERE name = 'op_ld') AS inside_delay;
SELECT available_at AS ld_available FROM fencing.lease_status WHERE name = 'op_ld' \gset
SELECT pg_sleep_until(:'ld_available');
SELECT fencing.lease_acquire('op_ld', 'bob', '1 min') AS b1 \gset
SELECT :b1 > :a2 AS newer_token, clock_timestamp() >= :'ld_available' AS after_delay,
	   holder, state, takeover, holder_changes, expired_takeovers,
	   lock_delay AS bobs_lock_delay
  FROM fencing.lease_status WHERE name = 'op_ld';

-- a clean release has no delay, whatever lock_delay was recorded
SELECT fencing.lease_release('op_ld', :b1) AS released;
SELECT state, available_at = released_at AS available_at_release
  FROM fencing.lease_status WHERE name = 'op_ld';
SELECT fencing.lease_acquire('op_ld', 'carol', '1 min') AS c1 \gset
SELECT :c1 > :b1 AS newer_token, holder, state, takeover, lock_delay
  FROM fencing.lease_status WHERE name = 'op_ld';
SELECT fencing.lease_release('op_ld', :c1) AS released;
RESET fencing.lock_delay;

-- without a delay another holder takes an expired lease at once
SELECT fencing.lease_acquire('op_ld0', 'dave', '100 ms') AS d1 \gset
SELECT lock_delay, available_at = expires_at AS available_at_expiry
  FROM fencing.lease_status WHERE name = 'op_ld0';
SELECT pg_sleep_until((SELECT expires_at FROM fencing.lease_status WHERE name = 'op_ld0'));
SELECT fencing.lease_acquire('op_ld0', 'erin', '1 min') AS e1 \gset
SELECT :e1 > :d1 AS newer_token, holder, takeover FROM fencing.lease_status WHERE name = 'op_ld0';
SELECT fencing.lease_release('op_ld0', :e1) AS released;

-- renew keeps the delay recorded at acquire, and moves available_at with
-- the expiry
SET fencing.lock_delay = '2s';
SELECT fencing.lease_acquire('op_ld_renew', 'frank', '10 s') AS f1 \gset
RESET fencing.lock_delay;
SELECT fencing.lease_renew('op_ld_renew', :f1, '1 min') AS renewed;
SELECT lock_delay, available_at = expires_at + interval '2 s' AS available_after_delay,
	   remaining > interval '50 s' AS renewed_to_1_min
  FROM fencing.lease_status WHERE name = 'op_ld_renew';
-- a re-acquire records the holder's current setting
SELECT fencing.lease_acquire('op_ld_renew', 'frank', '1 min') AS f2 \gset
SELECT :f2 > :f1 AS newer_token, lock_delay FROM fencing.lease_status WHERE name = 'op_ld_renew';
SELECT fencing.lease_release('op_ld_renew', :f2) AS released;

-- the largest delay is accepted and recorded
SET fencing.lock_delay = 60000;
SELECT fencing.lease_acquire('op_ld_max', 'gina', '1 min') AS g1 \gset
SELECT lock_delay FROM fencing.lease_status WHERE name = 'op_ld_max';
SELECT fencing.lease_release('op_ld_max', :g1) AS released;
RESET fencing.lock_delay;
