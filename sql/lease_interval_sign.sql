-- The sign of a TTL or wait interval is the sign of its whole value
-- (months of 30 days, days of 24 hours), as interval comparison has it,
-- not the sign of one of its fields; an interval too large to convert to
-- microseconds keeps its sign too.
\i sql/include/try.sql

SELECT i, i::interval > interval '0' AS positive, i::interval < interval '0' AS negative
  FROM (VALUES ('-1 day 25 hours'), ('1 mon -29 days'), ('1 day -1 hour'),
			   ('1 day -24 hours'), ('-178000000 years'), ('-2147483648 days'),
			   ('-1 day 1 hour')) AS v(i);

-- TTL
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT fencing.lease_acquire('sign_ttl_a', 'bob', '-1 day 25 hours') > 0$$),
	($$SELECT fencing.lease_acquire('sign_ttl_b', 'bob', '1 mon -29 days') > 0$$),
	($$SELECT fencing.lease_acquire('sign_ttl_c', 'bob', '1 mon -29 days 1 microsecond') > 0$$),
	($$SELECT fencing.lease_acquire('sign_ttl_c', 'bob', '1 day -24 hours') > 0$$),
	($$SELECT fencing.lease_acquire('sign_ttl_c', 'bob', '-1 day 1 hour') > 0$$),
	($$SELECT fencing.lease_acquire('sign_ttl_c', 'bob', '178000000 years') > 0$$),
	($$SELECT fencing.lease_acquire('sign_ttl_c', 'bob', '-178000000 years') > 0$$),
	($$SELECT fencing.lease_acquire('sign_ttl_c', 'bob', '-2147483648 days') > 0$$),
	($$SELECT fencing.lease_renew('sign_ttl_a', 1, '-178000000 years')$$)
  ) AS v(q);

-- wait: judged by its whole value; a free lease is taken at once whatever the wait; negative is 22023, over 1 day 22023
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT fencing.lease_acquire('sign_wait', 'bob', '1 min', '1 day -24 hours') > 0$$),
	($$SELECT fencing.lease_acquire('sign_wait', 'bob', '1 min', '1 mon -30 days') > 0$$),
	($$SELECT fencing.lease_acquire('sign_wait', 'bob', '1 min', '1 day -1 hour') > 0$$),
	($$SELECT fencing.lease_acquire('sign_wait', 'bob', '1 min', '-1 day 25 hours') > 0$$),
	($$SELECT fencing.lease_acquire('sign_wait', 'bob', '1 min', '1 mon -1 day') > 0$$),
	($$SELECT fencing.lease_acquire('sign_wait', 'bob', '1 min', '-1 day 1 hour') > 0$$),
	($$SELECT fencing.lease_acquire('sign_wait', 'bob', '1 min', '1 day -25 hours') > 0$$)
  ) AS v(q);

SELECT name, holder, state FROM fencing.lease_status WHERE name LIKE 'sign\_%' ORDER BY name;
