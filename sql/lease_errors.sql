-- Bad arguments, read-only transactions and internal entry points: each is
-- an error with its own SQLSTATE and message, and nothing changes.
\i sql/include/try.sql

-- all lease rows, exactly
CREATE FUNCTION pg_temp.all_leases() RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(ROW(l.*)::text, E'\n' ORDER BY l.name), '')
	  FROM fencing.leases AS l
$$;

SELECT fencing.lease_acquire('err', 'alice', '10 min') AS te \gset
-- its token, for the cases below (whose text must not show token numbers)
CREATE FUNCTION pg_temp.te() RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = 'err' $$;
SELECT pg_temp.all_leases() AS leases_before \gset
SELECT fencing.next_token() AS n0 \gset

-- lease_acquire (intervals of mixed or overflowing sign: lease_interval_sign)
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT fencing.lease_acquire(NULL, 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('err', NULL, '1 min')$$),
	($$SELECT fencing.lease_acquire('err', 'bob', NULL)$$),
	($$SELECT fencing.lease_acquire('err', 'bob', '1 min', NULL)$$),
	($$SELECT fencing.lease_acquire(NULL, NULL, NULL, NULL)$$),
	($$SELECT fencing.lease_acquire('', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('err', '', '1 min')$$),
	($$SELECT fencing.lease_acquire('', '', '1 min')$$),
	($$SELECT fencing.lease_acquire(repeat('n', 257), 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('err', repeat('h', 257), '1 min')$$),
	($$SELECT fencing.lease_acquire(repeat('é', 128) || 'x', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('err', repeat('é', 129), '1 min')$$),
	($$SELECT fencing.lease_acquire(repeat('€', 100), 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '0')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '-1 s')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '-1 microsecond')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 day -24 hours')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 day 1 microsecond')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '24:00:00.000001')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '2 days')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 month')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 year')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '178000000 years')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '2147483647 days')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', interval '2147483647 hours' + interval '414564141 hours')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 min', '1 day 1 microsecond')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 min', '1 year')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 min', '-1 s')$$),
	($$SELECT fencing.lease_acquire('never', 'bob', '1 min', '-1 month')$$),
	($$SELECT fencing.lease_acquire('err', 'bob', '1 min', '1 day 1 s')$$),
	($$SELECT fencing.lease_acquire('err', 'alice', '1 min', '-1 s')$$)
  ) AS v(q);

-- lease_renew
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT fencing.lease_renew(NULL, pg_temp.te(), '1 min')$$),
	($$SELECT fencing.lease_renew('err', NULL, '1 min')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te(), NULL)$$),
	($$SELECT fencing.lease_renew('', pg_temp.te(), '1 min')$$),
	($$SELECT fencing.lease_renew(repeat('n', 257), 1, '1 min')$$),
	($$SELECT fencing.lease_renew('err', 0, '1 min')$$),
	($$SELECT fencing.lease_renew('err', -1, '1 min')$$),
	($$SELECT fencing.lease_renew('err', -9223372036854775808, '1 min')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te(), '0')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te(), '-1 hour')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te(), '1 day 1 microsecond')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te(), '1 month')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te(), '178000000 years')$$)
  ) AS v(q);

-- lease_release
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT fencing.lease_release(NULL, pg_temp.te())$$),
	($$SELECT fencing.lease_release('err', NULL)$$),
	($$SELECT fencing.lease_release('', pg_temp.te())$$),
	($$SELECT fencing.lease_release(repeat('n', 257), pg_temp.te())$$),
	($$SELECT fencing.lease_release('err', 0)$$),
	($$SELECT fencing.lease_release('err', -42)$$)
  ) AS v(q);

-- lease_lock
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT fencing.lease_lock(NULL, pg_temp.te())$$),
	($$SELECT fencing.lease_lock('err', NULL)$$),
	($$SELECT fencing.lease_lock('', pg_temp.te())$$),
	($$SELECT fencing.lease_lock(repeat('n', 257), pg_temp.te())$$),
	($$SELECT fencing.lease_lock('err', 0)$$),
	($$SELECT fencing.lease_lock('err', -1)$$)
  ) AS v(q);

-- the messages and details as a client sees them
\set VERBOSITY default
SELECT fencing.lease_acquire('err', repeat('h', 257), '1 min');
SELECT fencing.lease_renew('err', -7, '1 min');
SELECT fencing.lease_acquire('never', 'bob', '1 min', '2 days');

-- nothing changed: same rows, no lease 'never', no token spent
SELECT pg_temp.all_leases() = :'leases_before' AS leases_unchanged;
SELECT count(*) AS never_rows FROM fencing.leases WHERE name = 'never';
SELECT fencing.next_token() = :n0 + 1 AS no_token_spent;
SELECT fencing.lease_lock('err', :te) AS te_still_live;

-- 256 bytes is the limit, counted in bytes, not characters
SELECT octet_length(repeat('é', 128)) AS bytes_128_e_acute;
SELECT fencing.lease_acquire(repeat('é', 128), repeat('€', 85) || 'x', '1 min')
	   IS NOT NULL AS bytes_256_ok;
SELECT octet_length(name) AS name_bytes, octet_length(holder) AS holder_bytes
  FROM fencing.leases WHERE name = repeat('é', 128);

-- a read-only transaction refuses every lease call and next_token
SELECT pg_temp.all_leases() AS leases_before \gset
BEGIN READ ONLY;
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT fencing.lease_acquire('ro_new', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('err', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('err', 'alice', '1 min')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te(), '1 min')$$),
	($$SELECT fencing.lease_renew('err', pg_temp.te() + 1000, '1 min')$$),
	($$SELECT fencing.lease_release('err', pg_temp.te())$$),
	($$SELECT fencing.lease_lock('err', pg_temp.te())$$),
	($$SELECT fencing.next_token()$$),
	($$SELECT fencing.fence_allows(1, pg_temp.te())$$)
  ) AS v(q);
COMMIT;
-- and plainly, the SQLSTATE as a client sees it
\set SHOW_CONTEXT never
BEGIN READ ONLY;
SELECT fencing.lease_acquire('err', 'alice', '1 min');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
SET default_transaction_read_only = on;
SELECT fencing.lease_renew('err', :te, '1 min');
\echo :LAST_ERROR_SQLSTATE
RESET default_transaction_read_only;
SELECT pg_temp.all_leases() = :'leases_before' AS leases_unchanged;
SELECT count(*) AS ro_new_rows FROM fencing.leases WHERE name = 'ro_new';
SELECT fencing.lease_lock('err', :te) AS te_still_live;

-- the install-time entry point refuses to run outside CREATE EXTENSION
SELECT fencing.next_token() AS n1 \gset
SELECT pg_temp.try('SELECT fencing._bind_token_origin()') AS bind;
SELECT fencing._bind_token_origin();
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.next_token() = :n1 + 1 AS token_band_unchanged;
