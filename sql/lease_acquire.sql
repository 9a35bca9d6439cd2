-- fencing.lease_acquire(name, holder, ttl, wait): a new token when the lease
-- is free, expired or already held by this holder; NULL otherwise.
-- Tokens are compared with each other, never with absolute values.

-- the row of a lease, without the columns that move with the clock
CREATE FUNCTION pg_temp.lease_row(n text) RETURNS text
LANGUAGE sql AS $$
	SELECT ROW(s.name, s.holder, s.holder_role, s.token, s.acquired_at,
			   s.expires_at, s.released_at, s.holder_changes)::text
	  FROM fencing.lease_status AS s WHERE s.name = n
$$;

-- a lease never seen before
SELECT fencing.lease_acquire('acq', 'alice', '10 s') AS t1 \gset
SELECT :t1 > 0 AS issued;
SELECT holder, token = :t1 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'acq';
SELECT fencing.lease_lock('acq', :t1) AS t1_live;

-- another holder is refused while the lease stands, and nothing changes:
-- no row is touched and no token is spent
SELECT pg_temp.lease_row('acq') AS row_before \gset
SELECT fencing.next_token() AS n1 \gset
SELECT fencing.lease_acquire('acq', 'bob', '10 s') IS NULL AS bob_refused;
SELECT fencing.lease_acquire('acq', 'bob', '1 day', '0') IS NULL AS bob_refused_again;
SELECT fencing.lease_acquire('acq', 'Alice', '10 s') IS NULL AS holders_are_case_sensitive;
SELECT fencing.lease_acquire('acq', 'alice ', '10 s') IS NULL AS trailing_space_is_another_holder;
SELECT pg_temp.lease_row('acq') = :'row_before' AS row_unchanged;
SELECT fencing.next_token() = :n1 + 1 AS no_token_spent;
SELECT fencing.lease_lock('acq', :t1) AS t1_still_live;

-- re-acquire by the same holder: always a new, larger token; the old one
-- is stale for renew, release and lock from then on
SELECT fencing.lease_acquire('acq', 'alice', '10 s') AS t2 \gset
SELECT :t2 > :t1 AS t2_larger, :t2 > :n1 AS t2_above_earlier_tokens;
SELECT fencing.lease_lock('acq', :t1) AS t1_check,
	   fencing.lease_renew('acq', :t1, '10 s') AS t1_renew,
	   fencing.lease_release('acq', :t1) AS t1_release;
SELECT fencing.lease_lock('acq', :t2) AS t2_check;
SELECT holder, token = :t2 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'acq';

-- two more re-acquires: distinct, increasing tokens; only the last is current
SELECT fencing.lease_acquire('acq', 'alice', '10 s') AS t3 \gset
SELECT fencing.lease_acquire('acq', 'alice', '10 s') AS t4 \gset
SELECT :t2 < :t3 AND :t3 < :t4 AS strictly_increasing;
SELECT fencing.lease_lock('acq', :t3) AS t3_check, fencing.lease_lock('acq', :t4) AS t4_check;

-- released: free at once for another holder, with a larger token
SELECT fencing.lease_release('acq', :t4) AS released;
SELECT fencing.lease_acquire('acq', 'bob', '10 s') AS t5 \gset
SELECT :t5 > :t4 AS t5_larger;
SELECT holder, token = :t5 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'acq';
SELECT fencing.lease_lock('acq', :t4) AS alice_stale, fencing.lease_lock('acq', :t5) AS bob_live;
SELECT fencing.lease_acquire('acq', 'alice', '10 s') IS NULL AS alice_refused_now;

-- released, then taken again by the same holder
SELECT fencing.lease_release('acq', :t5) AS released;
SELECT fencing.lease_acquire('acq', 'bob', '10 s') AS t6 \gset
SELECT :t6 > :t5 AS t6_larger, fencing.lease_lock('acq', :t6) AS t6_live;

-- leases are independent of each other; a token belongs to one lease only
SELECT fencing.lease_acquire('acq_other', 'alice', '10 s') AS o1 \gset
SELECT :o1 > :t6 AS o1_larger;
SELECT fencing.lease_lock('acq_other', :o1) AS o1_live,
	   fencing.lease_lock('acq', :o1) AS o1_not_for_acq,
	   fencing.lease_lock('acq_other', :t6) AS t6_not_for_other;
SELECT fencing.lease_lock('acq', :t6) AS t6_still_live;

-- the wait argument: default, zero and named notation
SELECT fencing.lease_acquire('acq_wait', 'carol', '1 min', '0') IS NOT NULL AS wait_zero;
SELECT fencing.lease_acquire('acq_wait', 'carol', '1 min', '0 days 0 s') IS NOT NULL AS wait_zero_days;
SELECT fencing.lease_acquire(name => 'acq_wait', holder => 'carol', ttl => '1 min',
							 wait => '0') IS NOT NULL AS named_args;
SELECT fencing.lease_acquire(ttl => '1 min', holder => 'dave', name => 'acq_wait')
	   IS NULL AS named_args_refused;

-- names and holders are arbitrary text up to 256 bytes
SELECT fencing.lease_acquire('a lease/with:odd chars''"', 'h @ host:5432', '1 min')
	   IS NOT NULL AS odd_text;
SELECT fencing.lease_acquire(repeat('n', 256), repeat('h', 256), '1 min')
	   IS NOT NULL AS max_length;
SELECT octet_length(name) AS name_bytes, octet_length(holder) AS holder_bytes, state
  FROM fencing.lease_status WHERE name = repeat('n', 256);

-- TTL bounds: one microsecond and exactly one day are accepted
SELECT fencing.lease_acquire('acq_ttl_min', 'erin', '1 microsecond') IS NOT NULL AS tiny_ttl;
SELECT fencing.lease_acquire('acq_ttl_max', 'erin', '1 day') IS NOT NULL AS one_day;
SELECT fencing.lease_acquire('acq_ttl_mix', 'erin', '1 mon -29 days') IS NOT NULL AS one_day_mixed;
SELECT fencing.lease_acquire('acq_ttl_mix2', 'erin', '-1 day 25 hours') IS NOT NULL AS one_hour_mixed;
-- exactly: a new lease's times come from one clock reading
SELECT name, expires_at - acquired_at AS ttl
  FROM fencing.lease_status WHERE name LIKE 'acq\_ttl\_%' ORDER BY name;
-- a one-microsecond lease is over at once: anyone may take it
SELECT fencing.lease_acquire('acq_ttl_min', 'frank', '1 min') IS NOT NULL AS taken_over;

-- every token handed out above is distinct
SELECT count(DISTINCT token) = count(*) AS tokens_distinct FROM fencing.lease_status;

-- a new lease lasts exactly its TTL: acquired_at and expires_at are one
-- clock reading apart by the TTL, never by the time between two readings
-- (before issue 30 the first acquire of a name read the clock twice)
SELECT count(*) AS grants FROM (
	SELECT fencing.lease_acquire('acq_exact_' || i, 'erin', '10 s')
	  FROM generate_series(1, 2000) AS i) AS g;
SELECT count(*) AS leases,
	   count(*) FILTER (WHERE expires_at - acquired_at <> '10 s') AS not_exact
  FROM fencing.lease_status WHERE name LIKE 'acq\_exact\_%';
SELECT count(*) FILTER (WHERE fencing.lease_release(name, token)) AS released
  FROM fencing.lease_status WHERE name LIKE 'acq\_exact\_%';
