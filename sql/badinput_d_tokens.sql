--
-- Bad input (d): tokens.
--
-- A token argument must be a positive bigint: 0, negative and NULL are
-- errors (22023, 22004), because no such token is ever issued and a quiet
-- "false" or "0 rows" would hide a client bug.  A positive token that is
-- not the lease's current one -- never issued, bigint max, stale, or
-- another lease's -- is simply not current: renew, release and lock
-- return false.  The fence of a row is not an argument to validate: any
-- value, even a negative one, compares.  advance_tokens(floor) takes any
-- floor >= 0 and never moves tokens backwards.
--
-- The last part runs in a scratch database: advance_tokens to the top of
-- the bigint range uses up the token space for good, which must then be
-- reported as LF002 by every call that needs a token.
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\i sql/include/case_harness.sql

SELECT fencing.lease_acquire('bi_d', 'alice', '10 min') > 0 AS acquired;
SELECT fencing.lease_acquire('bi_d_other', 'bob', '10 min') > 0 AS acquired_other;
CREATE FUNCTION pg_temp.tok(lease text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = lease $$;
-- a token far above anything issued so far, never issued in this database
CREATE FUNCTION pg_temp.unissued() RETURNS bigint
LANGUAGE sql AS $$ SELECT last_value + 1000000 FROM fencing.token_seq $$;

-- renew, release and lock: invalid tokens are errors, other wrong
-- tokens are "false"; the lease is never touched
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('bi_d', 0, '1 min')$$),
	($$SELECT fencing.lease_renew('bi_d', -1, '1 min')$$),
	($$SELECT fencing.lease_renew('bi_d', -9223372036854775808, '1 min')$$),
	($$SELECT fencing.lease_renew('bi_d', NULL, '1 min')$$),
	($$SELECT fencing.lease_renew('bi_d', pg_temp.unissued(), '1 min')$$),
	($$SELECT fencing.lease_renew('bi_d', 9223372036854775807, '1 min')$$),
	($$SELECT fencing.lease_renew('bi_d', pg_temp.tok('bi_d_other'), '1 min')$$),
	($$SELECT fencing.lease_renew('bi_d_none', pg_temp.tok('bi_d'), '1 min')$$),
	($$SELECT fencing.lease_release('bi_d', 0)$$),
	($$SELECT fencing.lease_release('bi_d', -1)$$),
	($$SELECT fencing.lease_release('bi_d', -9223372036854775808)$$),
	($$SELECT fencing.lease_release('bi_d', NULL)$$),
	($$SELECT fencing.lease_release('bi_d', pg_temp.unissued())$$),
	($$SELECT fencing.lease_release('bi_d', 9223372036854775807)$$),
	($$SELECT fencing.lease_release('bi_d', pg_temp.tok('bi_d_other'))$$),
	($$SELECT fencing.lease_lock('bi_d', 0)$$),
	($$SELECT fencing.lease_lock('bi_d', -1)$$),
	($$SELECT fencing.lease_lock('bi_d', -9223372036854775808)$$),
	($$SELECT fencing.lease_lock('bi_d', NULL)$$),
	($$SELECT fencing.lease_lock('bi_d', pg_temp.unissued())$$),
	($$SELECT fencing.lease_lock('bi_d', 9223372036854775807)$$),
	($$SELECT fencing.lease_lock('bi_d', pg_temp.tok('bi_d_other'))$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- a stale token, after alice re-acquired: false everywhere, the new one true
CREATE TEMP TABLE saved AS SELECT pg_temp.tok('bi_d') AS t_old;
SELECT fencing.lease_acquire('bi_d', 'alice', '10 min') AS t_new \gset
SELECT :t_new > t_old AS reacquired FROM saved;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('bi_d', (SELECT t_old FROM saved), '1 min')$$),
	($$SELECT fencing.lease_release('bi_d', (SELECT t_old FROM saved))$$),
	($$SELECT fencing.lease_lock('bi_d', (SELECT t_old FROM saved))$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT fencing.lease_lock('bi_d', :t_new) AS current_token_checks;

-- the resource side: tokens must be positive; fences compare as they are
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.fence_allows(1, 0)$$),
	($$SELECT fencing.fence_allows(NULL, -1)$$),
	($$SELECT fencing.fence_allows(-5, -9223372036854775808)$$),
	($$SELECT fencing.fence_allows(1, NULL)$$),
	($$SELECT fencing.fence_allows(-5, 1)$$),
	($$SELECT fencing.fence_allows(0, 1)$$),
	($$SELECT fencing.fence_allows(-9223372036854775808, 1)$$),
	($$SELECT fencing.fence_allows(9223372036854775806, 9223372036854775807)$$),
	($$SELECT fencing.fence_allows(9223372036854775807, 9223372036854775807)$$),
	($$SELECT fencing.fence_allows(NULL, 9223372036854775807)$$),
	($$SELECT fencing.fence_allows(1, 0, true)$$),
	($$SELECT fencing.fence_allows(NULL, -1, true)$$),
	($$SELECT fencing.fence_allows(1, NULL, true)$$),
	($$SELECT fencing.fence_allows(9223372036854775807, 9223372036854775807, true)$$),
	($$SELECT fencing.fence_allows(9223372036854775807, 9223372036854775806, true)$$),
	($$SELECT fencing.fence_advance(1, 0)$$),
	($$SELECT fencing.fence_advance(NULL, -1)$$),
	($$SELECT fencing.fence_advance(1, -9223372036854775808)$$),
	($$SELECT fencing.fence_advance(1, NULL)$$),
	($$SELECT fencing.fence_advance(-5, 1)$$),
	($$SELECT fencing.fence_advance(9223372036854775806, 9223372036854775807)$$),
	($$SELECT fencing.fence_advance(9223372036854775807, 9223372036854775807)$$),
	($$SELECT fencing.fence_advance(9223372036854775807, 9223372036854775807, true)$$),
	($$SELECT fencing.fence_advance(9223372036854775807, 1)$$),
	($$SELECT fencing.expect_rows(0)$$),
	($$SELECT fencing.expect_rows(-1, 0)$$),
	($$SELECT fencing.expect_rows(1, -1)$$),
	($$SELECT fencing.expect_rows(9223372036854775807, 9223372036854775807)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- fencing.token, the token a transaction declares for fence_guard: a
-- positive decimal bigint or empty, nothing else
SELECT q, r.* FROM (VALUES
	($$SELECT set_config('fencing.token', '0', true)$$),
	($$SELECT set_config('fencing.token', '-1', true)$$),
	($$SELECT set_config('fencing.token', '+1', true)$$),
	($$SELECT set_config('fencing.token', ' 1', true)$$),
	($$SELECT set_config('fencing.token', '1 ', true)$$),
	($$SELECT set_config('fencing.token', '0x10', true)$$),
	($$SELECT set_config('fencing.token', '1e3', true)$$),
	($$SELECT set_config('fencing.token', '9223372036854775808', true)$$),
	($$SELECT set_config('fencing.token', '9223372036854775807', true)$$),
	($$SELECT set_config('fencing.token', '007', true)$$),
	($$SELECT set_config('fencing.token', '', true)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- advance_tokens (as a superuser): the floor must not be negative; a floor
-- at or below the counter still enters a new band (tokens move up to the
-- clock); a higher one moves them above it
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.advance_tokens(-1)$$),
	($$SELECT fencing.advance_tokens(-9223372036854775808)$$),
	($$SELECT fencing.advance_tokens(0)$$),
	($$SELECT fencing.advance_tokens(1)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
CREATE TEMP TABLE floor AS SELECT last_value + 100 AS floor FROM fencing.token_seq;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.advance_tokens((SELECT floor FROM floor))$$),
	($$SELECT fencing.next_token() > (SELECT floor FROM floor)$$),
	($$SELECT fencing.advance_tokens((SELECT floor FROM floor))$$),
	($$SELECT fencing.next_token() > (SELECT floor + 1 FROM floor)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- alice's lease: only the re-acquire touched it
SELECT name, holder, state, acquires, renewals, releases
  FROM fencing.lease_status WHERE name LIKE 'bi\_d%' ORDER BY name;
SELECT fencing.lease_lock('bi_d', :t_new) AS bi_d_live;

SELECT last_value AS regress_cases FROM pg_temp.case_seq \gset
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.refused_with_changes();

-- ---- the top of the token space, in a scratch database ----
SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_fencing_exhausted;
\c regress_fencing_exhausted
SET client_min_messages = warning;
CREATE EXTENSION fencing;
RESET client_min_messages;
\i sql/include/case_harness.sql
-- advance_tokens enters a band, and tokens from before a band entry are
-- refused: the lease is taken in the new band, 9223372036854775805
SELECT fencing.advance_tokens(9223372036854775804);
SELECT fencing.lease_acquire('bi_d_top', 'alice', '10 min') AS t_top \gset
-- (what a call that fails changes is not shown: it depends on where the
-- check is made; the answer must be LF002, every time)
SELECT q, r.result FROM (VALUES
	($$SELECT fencing.next_token()$$),
	($$SELECT fencing.next_token()$$),
	($$SELECT fencing.next_token()$$),
	($$SELECT fencing.lease_acquire('bi_d_top2', 'alice', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_d_top', 'alice', '1 min')$$),
	($$SELECT fencing.next_token()$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- the lease and its token are still good: renew needs no new token
SELECT fencing.lease_renew('bi_d_top', :t_top, '1 min') AS renewed,
	   fencing.lease_lock('bi_d_top', :t_top) AS checked;
SELECT last_value AS scratch_cases FROM pg_temp.case_seq \gset
\c :regress_db
DROP DATABASE regress_fencing_exhausted;

SELECT :regress_cases + :scratch_cases AS cases;
