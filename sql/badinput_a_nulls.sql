--
-- Bad input (a): NULL in each argument of each function.
--
-- A NULL argument is an error (22004) raised before anything changes,
-- with one deliberate exception: the fence argument of fence_allows
-- and fence_advance, where NULL means "never written with a
-- token".  next_token() takes no argument.  fence_guard's
-- arguments are trigger arguments, which cannot be NULL: NULL in CREATE
-- TRIGGER is the string 'null'.
--
-- Every case records its result and what it changed (see the harness).
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\i sql/include/case_harness.sql

SELECT fencing.lease_acquire('bi_a', 'alice', '10 min') > 0 AS acquired;
CREATE FUNCTION pg_temp.tok() RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = 'bi_a' $$;

-- the lease functions
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire(NULL, 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_a', NULL, '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_a', 'bob', NULL)$$),
	($$SELECT fencing.lease_acquire('bi_a', 'bob', '1 min', NULL)$$),
	($$SELECT fencing.lease_acquire('bi_a_new', 'bob', '1 min', NULL)$$),
	($$SELECT fencing.lease_acquire('bi_a', 'alice', '1 min', NULL)$$),
	($$SELECT fencing.lease_acquire(NULL, NULL, NULL, NULL)$$),
	($$SELECT fencing.lease_renew(NULL, pg_temp.tok(), '1 min')$$),
	($$SELECT fencing.lease_renew('bi_a', NULL, '1 min')$$),
	($$SELECT fencing.lease_renew('bi_a', pg_temp.tok(), NULL)$$),
	($$SELECT fencing.lease_renew(NULL, NULL, NULL)$$),
	($$SELECT fencing.lease_release(NULL, pg_temp.tok())$$),
	($$SELECT fencing.lease_release('bi_a', NULL)$$),
	($$SELECT fencing.lease_release(NULL, NULL)$$),
	($$SELECT fencing.lease_lock(NULL, pg_temp.tok())$$),
	($$SELECT fencing.lease_lock('bi_a', NULL)$$),
	($$SELECT fencing.lease_lock(NULL, NULL)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the admin functions (as a superuser, so the argument is what fails)
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_force_release(NULL)$$),
	($$SELECT fencing.lease_purge(NULL)$$),
	($$SELECT fencing.advance_tokens(NULL)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the resource side: NULL fence is "never written", NULL token an error
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.fence_allows(NULL, 5)$$),
	($$SELECT fencing.fence_allows(5, NULL)$$),
	($$SELECT fencing.fence_allows(NULL, NULL)$$),
	($$SELECT fencing.fence_allows(NULL, 5, true)$$),
	($$SELECT fencing.fence_allows(5, NULL, true)$$),
	($$SELECT fencing.fence_allows(NULL, NULL, true)$$),
	($$SELECT fencing.fence_advance(NULL, 5)$$),
	($$SELECT fencing.fence_advance(5, NULL)$$),
	($$SELECT fencing.fence_advance(NULL, NULL)$$),
	($$SELECT fencing.fence_advance(4, 5, NULL)$$),
	($$SELECT fencing.fence_advance(5, 5, NULL)$$),
	($$SELECT fencing.fence_advance(NULL, 5, NULL)$$),
	($$SELECT fencing.expect_rows(NULL, 1)$$),
	($$SELECT fencing.expect_rows(1, NULL)$$),
	($$SELECT fencing.expect_rows(NULL)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- a NULL token in a real WHERE clause is an error, not a quiet "0 rows"
CREATE TABLE bi_a_rows (id int PRIMARY KEY, fence bigint, note text);
INSERT INTO bi_a_rows VALUES (1, NULL, 'never written'), (2, 7, 'written by 7');
CREATE OR REPLACE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql AS $$ SELECT string_agg(t::text, ' ' ORDER BY t.id) FROM public.bi_a_rows AS t $$;
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_a_rows SET note = 'x' WHERE fencing.fence_allows(fence, NULL) RETURNING id$$),
	($$UPDATE bi_a_rows SET note = 'x', fence = fencing.fence_advance(fence, NULL) RETURNING id$$),
	($$UPDATE bi_a_rows SET note = 'x' WHERE fencing.fence_allows(fence, NULL::bigint, true) RETURNING id$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- fence_guard: NULL in CREATE TRIGGER is the argument 'null', a column that
-- does not exist; NULL for fencing.token (set_config) resets it to "no
-- token", which the guard refuses; a fenced row's fence cannot become NULL
CREATE TRIGGER guard_null BEFORE INSERT OR UPDATE OR DELETE ON bi_a_rows
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(NULL);
SELECT tgnargs, encode(tgargs, 'escape') AS tgargs FROM pg_trigger WHERE tgname = 'guard_null';
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_a_rows SET note = 'x', fence = 8 WHERE id = 2 RETURNING id$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
DROP TRIGGER guard_null ON bi_a_rows;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON bi_a_rows
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
BEGIN;
SELECT set_config('fencing.token', '9', true) AS declared;
SELECT set_config('fencing.token', NULL, true) AS declared_null;
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_a_rows SET note = 'x' WHERE id = 2 RETURNING id$$),
	($$DELETE FROM bi_a_rows WHERE id = 2 RETURNING id$$),
	($$UPDATE bi_a_rows SET note = 'x', fence = NULL WHERE id = 2 RETURNING id$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
COMMIT;

-- a NULL returned by lease_acquire always means "held by someone else"
SELECT fencing.lease_acquire('bi_a', 'bob', '1 min') IS NULL AS held_by_alice;

-- as a client sees it
\set VERBOSITY default
SELECT fencing.lease_renew('bi_a', NULL, '1 min');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse

-- alice's lease is untouched and live
SELECT name, holder, state, acquires, renewals, releases
  FROM fencing.lease_status WHERE name LIKE 'bi\_a%' ORDER BY name;
SELECT fencing.lease_lock('bi_a', pg_temp.tok()) AS still_live;
SELECT * FROM bi_a_rows ORDER BY id;

-- every case, and any that changed something it should not have
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();

DROP TABLE bi_a_rows;
