--
-- The band's offset above the clock (docs/tokens.md, "What holds,
-- precisely").  A band that starts above the wall clock (advance_tokens()
-- with a floor ahead of it, or lease rows from a node whose clock runs
-- ahead) keeps its offset: the next band entry starts at the clock plus
-- that offset, and the clock floor raises a lagging counter to the clock
-- plus the offset, so a promoted standby, or a primary that resumes after
-- a freeze, issues above every token of the band.  Clock readings and
-- tokens vary: the checks compare them with the clock read around each
-- call.
--
CREATE FUNCTION pg_temp.usecs() RETURNS bigint LANGUAGE sql VOLATILE
	AS $$SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint$$;
CREATE FUNCTION pg_temp.band() RETURNS TABLE (base bigint, band_offset bigint)
	LANGUAGE sql VOLATILE
	AS $$SELECT (SELECT last_value FROM fencing.token_base),
				(SELECT last_value FROM fencing.token_band_offset)$$;

-- a band 10 minutes above the clock: it starts at the floor + 1, and its
-- offset is its start above the clock the entry read
SELECT pg_temp.usecs() AS c0, pg_temp.usecs() + 600000000 AS floor \gset
SELECT fencing.advance_tokens(:floor);
SELECT pg_temp.usecs() AS c1 \gset
SELECT base = :floor + 1 AS starts_at_the_floor,
	   band_offset BETWEEN :floor + 1 - :c1 AND :floor + 1 - :c0 AS offset_is_start_minus_clock
  FROM pg_temp.band();
SELECT band_offset AS off1 FROM pg_temp.band() \gset
SELECT fencing.next_token() = :floor + 1 AS first_token_starts_the_band;

-- the next band entry keeps the offset: it starts at the clock plus the
-- offset, though the counter is ahead of the clock
SELECT pg_temp.usecs() AS c0 \gset
SELECT fencing.advance_tokens();
SELECT pg_temp.usecs() AS c1 \gset
SELECT base BETWEEN :c0 + :off1 AND :c1 + :off1 AS starts_at_clock_plus_offset,
	   band_offset = :off1 AS offset_kept
  FROM pg_temp.band();
SELECT base AS base2 FROM pg_temp.band() \gset
SELECT fencing.next_token() = :base2 AS first_token_starts_the_band;

-- idle for longer than max_clock_lag (its minimum, 1 ms, for this part
-- only): the counter lags the clock plus the offset, and the next token
-- is raised to it, not to the clock alone (no band entry: the band and
-- its offset stay)
ALTER SYSTEM SET fencing.max_clock_lag = '1ms';
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
SHOW fencing.max_clock_lag;
SELECT pg_temp.usecs() AS c0 \gset
SELECT fencing.next_token() AS t \gset
SELECT pg_temp.usecs() AS c1 \gset
SELECT :t - 1 BETWEEN :c0 + :off1 AND :c1 + :off1 AS raised_to_clock_plus_offset,
	   base = :base2 AS same_band,
	   band_offset = :off1 AS offset_kept
  FROM pg_temp.band();
ALTER SYSTEM RESET fencing.max_clock_lag;
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
SHOW fencing.max_clock_lag;

-- a floor that arrives with lease rows (a node whose clock runs ahead by
-- more than the offset): the next token enters a band at it, and the
-- offset grows to the new start above the clock
SELECT pg_temp.usecs() + :off1 + 300000000 AS arrived \gset
INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at)
	VALUES ('to_arrived', 'Z', current_user::regrole, :arrived, now(), now() + '10 min');
SELECT pg_temp.usecs() AS c0 \gset
SELECT fencing.next_token() = :arrived + 1 AS above_the_arrived_token;
SELECT pg_temp.usecs() AS c1 \gset
SELECT base = :arrived + 1 AS band_at_the_arrived_floor,
	   band_offset BETWEEN :arrived + 1 - :c1 AND :arrived + 1 - :c0 AS offset_grew
  FROM pg_temp.band();
DELETE FROM fencing.leases WHERE name = 'to_arrived';

-- the offset is part of the dumped token state, and only the token
-- source writes it
SELECT c.relname
  FROM pg_extension AS e, unnest(e.extconfig) AS x(oid)
	   JOIN pg_class AS c ON c.oid = x.oid
 WHERE e.extname = 'fencing' AND c.relname = 'token_band_offset';
SELECT has_sequence_privilege('public', 'fencing.token_band_offset', 'UPDATE') AS public_may_update;
