--
-- Bad input (c): TTLs, wait intervals, purge ages and lock delays.
--
-- A TTL is converted to plain microseconds (a month is 30 days, a day 24
-- hours) and must be > 0 and <= 1 day; its sign is that of the whole value,
-- so a mixed-sign interval is judged by its sum.  A wait must be >= 0 and
-- <= 1 day.  A purge age must be >= 0, with no upper bound.  Infinite
-- intervals, which only PostgreSQL 17 and later have: badinput_c_ttl_infinity.
\i sql/include/case_harness.sql

SELECT fencing.lease_acquire('bi_c', 'alice', '10 min') > 0 AS acquired;
CREATE FUNCTION pg_temp.tok(lease text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = lease $$;
-- the exact length of a lease: expires_at - acquired_at
CREATE FUNCTION pg_temp.len(lease text) RETURNS interval
LANGUAGE sql AS $$
	SELECT expires_at - acquired_at FROM fencing.leases WHERE name = lease
$$;

-- TTL of lease_acquire: refused
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '0')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '-1 s')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '-1 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '0.4 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '0.5 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '1 day 1 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '24:00:00.000001')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '1 mon')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '178000000 years')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '-178000000 years')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '2147483647 days 2147483647 hours')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '-2147483648 days')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '1 mon -30 days')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '1 day -24 hours')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '-1 day 24 hours -1 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c_x', 'bob', '1 mon -29 days 1 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'alice', '0')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'alice', '1 day 1 microsecond')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT count(*) AS bi_c_x_rows FROM fencing.leases WHERE name = 'bi_c_x';

-- TTL of lease_acquire: accepted, and the lease is that long (expires_at
-- and acquired_at are two readings of the clock, a few microseconds apart)
SELECT format('lease_acquire(%L, ''bob'', %L)', name, ttl) AS q, r.*,
	   pg_temp.len(name) - ttl::interval BETWEEN '0' AND '1 s' AS length_is_ttl
  FROM (VALUES
	('bi_c_1d', '1 day'),
	('bi_c_24h', '24:00:00'),
	('bi_c_1us', '1 microsecond'),
	('bi_c_mix1', '1 day -1 hour'),
	('bi_c_mix2', '-1 day 25 hours'),
	('bi_c_mix3', '1 mon -29 days'),
	('bi_c_mix4', '-1 mon 31 days'),
	('bi_c_mix5', '-1 year 361 days'),
	('bi_c_frac', '0.5 days'),
	('bi_c_frac2', '0.6 microsecond')
  ) AS v(name, ttl),
	LATERAL pg_temp.run(format('SELECT fencing.lease_acquire(%L, %L, %L) > 0',
							   name, 'bob', ttl)) AS r;
SELECT name, expires_at - acquired_at >= '1 day' AS one_day_or_more
  FROM fencing.leases WHERE name IN ('bi_c_mix3', 'bi_c_mix4', 'bi_c_mix5')
 ORDER BY name;
-- a 1-microsecond lease is over at once: anyone may take it
SELECT fencing.lease_acquire('bi_c_1us', 'carol', '1 min') > 0 AS one_us_lease_taken;

-- TTL of lease_renew: refused, the lease unchanged; accepted up to 1 day
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '0')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '-1 microsecond')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '-10 min')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '1 day 1 microsecond')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '178000000 years')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '-178000000 years')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '1 mon -30 days')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '1 day')$$),
	($$SELECT fencing.lease_renew('bi_c', pg_temp.tok('bi_c'), '1 mon -29 days -1 hour')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.len('bi_c') > '23 hours' AS renewed_to_23_hours_from_now;

-- wait of lease_acquire: refused below 0 and above 1 day; 0, and a sum of
-- 0, do not wait (the lease is held: NULL at once)
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '-1 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '-1 day')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '1 day 1 microsecond')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '178000000 years')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '-178000000 years')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '0')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '1 day -24 hours')$$),
	($$SELECT fencing.lease_acquire('bi_c', 'bob', '1 min', '1 mon -30 days')$$),
	($$SELECT fencing.lease_acquire('bi_c_w', 'bob', '1 min', '1 day') > 0$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- purge age (as a superuser): refused below 0; any non-negative age is
-- valid.  An age reaching back before the earliest timestamp (4713 BC)
-- purges nothing, since no lease is that old: it is not an error, and
-- computing now() - age must not overflow.
SELECT count(*) > 0 AS there_are_leases FROM fencing.leases;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_purge('-1 microsecond')$$),
	($$SELECT fencing.lease_purge('-178000000 years')$$),
	($$SELECT fencing.lease_purge('1 mon -31 days')$$),
	($$SELECT fencing.lease_purge('1 year')$$),
	($$SELECT fencing.lease_purge('1000 years')$$),
	($$SELECT fencing.lease_purge('10000 years')$$),
	($$SELECT fencing.lease_purge('178000000 years')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the lock delay (a setting, in milliseconds): 0 to 60 s (PostgreSQL 17
-- and later print the range with its unit: shown as 15 prints it)
SELECT fencing.next_token() > 0 AS library_loaded;
SELECT q, regexp_replace(r.result, '\(0 (ms )?\.\. 60000( ms)?\)', '(0 .. 60000)') AS result,
	   r.changes
  FROM (VALUES
	($$SELECT set_config('fencing.lock_delay', '-1', true)$$),
	($$SELECT set_config('fencing.lock_delay', '60001', true)$$),
	($$SELECT set_config('fencing.lock_delay', '1 day', true)$$),
	($$SELECT set_config('fencing.lock_delay', 'infinity', true)$$),
	($$SELECT set_config('fencing.lock_delay', '60 s', true)$$),
	($$SELECT set_config('fencing.lock_delay', '0', true)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- alice's lease was only ever renewed by the accepted case
SELECT name, holder, state, acquires, renewals, releases
  FROM fencing.lease_status WHERE name = 'bi_c';

-- every case, and any refused case that changed something (a refused
-- stale write moves the stale-write counter: that is what it counts)
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();
