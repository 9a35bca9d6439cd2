--
-- Bad input (c), infinite intervals.  Before PostgreSQL 17 'infinity' is
-- not valid input for type interval (22007, raised before fencing is
-- called); from 17 on it is, and fencing refuses it as a TTL or a wait
-- (22023).  Either way nothing changes.  Output for 17 and later:
-- badinput_c_ttl_infinity_1.out.
--
\i sql/include/case_harness.sql

SELECT fencing.lease_acquire('bi_ci', 'alice', '10 min') > 0 AS acquired;
CREATE FUNCTION pg_temp.tok(lease text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = lease $$;

SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('bi_ci_x', 'bob', 'infinity')$$),
	($$SELECT fencing.lease_acquire('bi_ci_x', 'bob', '-infinity')$$),
	($$SELECT fencing.lease_renew('bi_ci', pg_temp.tok('bi_ci'), 'infinity')$$),
	($$SELECT fencing.lease_renew('bi_ci', pg_temp.tok('bi_ci'), '-infinity')$$),
	($$SELECT fencing.lease_acquire('bi_ci', 'bob', '1 min', 'infinity')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- alice's lease is as she took it
SELECT name, holder, state, acquires, renewals, releases
  FROM fencing.lease_status WHERE name LIKE 'bi\_ci%' ORDER BY name;
