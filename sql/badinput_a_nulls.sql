--
-- Bad input (a): NULL in each argument of each function.
--
-- A NULL argument is an error (22004) raised before anything changes,
-- with two deliberate exceptions: the fence argument of fence_check,
-- fence_allows and fence_advance, where NULL means "never written with a
-- token", and allow_same of fence_advance, where NULL counts as false
-- (the stricter choice).  next_token() takes no argument.  fence_guard's
-- arguments are trigger arguments, which cannot be NULL: NULL in CREATE
-- TRIGGER is the string 'null'.
--
-- Every case records its result and what it changed (see the harness).
-- ---- harness (the same in every badinput_* and security_* file) ----
-- A case runs one statement in a subtransaction and records its result:
-- "ok: <value of the first column>", "ok: <n> rows" (a DML statement with
-- no RETURNING), "ok: done" (any other statement), or "<SQLSTATE>:
-- <message> [<detail>]"; and what it changed
-- among the lease rows, the token counter, the stale-write counter and the
-- file's own resource table (pg_temp.resource()).  Cases are numbered by a
-- sequence, which counts the cases made in subtransactions that rolled
-- back too.
\set VERBOSITY terse
\set SHOW_CONTEXT never
CREATE TEMP SEQUENCE case_seq;
CREATE TEMP TABLE cases (n bigint PRIMARY KEY DEFAULT nextval('pg_temp.case_seq'),
						 label text NOT NULL, result text NOT NULL,
						 changes text NOT NULL);
GRANT ALL ON cases, case_seq TO PUBLIC;
CREATE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql AS $$ SELECT '' $$;
CREATE FUNCTION pg_temp.state() RETURNS text[]
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
	SELECT ARRAY[
		coalesce((SELECT string_agg(l::text, E'\n' ORDER BY l.name)
					FROM fencing.leases AS l), ''),
		(SELECT s.last_value || ' ' || s.is_called FROM fencing.token_seq AS s),
		(SELECT s.last_value || ' ' || s.is_called FROM fencing.stale_write_count AS s),
		pg_temp.resource()]
$$;
CREATE FUNCTION pg_temp.changes(before text[]) RETURNS text
LANGUAGE sql SET search_path = pg_catalog AS $$
	SELECT coalesce(nullif(concat_ws(', ',
		CASE WHEN a[1] IS DISTINCT FROM before[1] THEN 'leases' END,
		CASE WHEN a[2] IS DISTINCT FROM before[2] THEN 'token spent' END,
		CASE WHEN a[3] IS DISTINCT FROM before[3] THEN 'stale write counted' END,
		CASE WHEN a[4] IS DISTINCT FROM before[4] THEN 'resource' END), ''),
		'unchanged')
	  FROM (SELECT pg_temp.state() AS a) AS s
$$;
CREATE FUNCTION pg_temp.run(q text, OUT result text, OUT changes text)
LANGUAGE plpgsql AS $$
DECLARE
	before text[] := pg_temp.state();
	r text;
	rows bigint;
	detail text;
BEGIN
	BEGIN
		IF q ~* '^\s*(SELECT|VALUES|WITH)\M' OR q ~* '\mRETURNING\M' THEN
			EXECUTE q INTO r;
			result := 'ok: ' || coalesce(r, 'NULL');
		ELSIF q ~* '^\s*(INSERT|UPDATE|DELETE)\M' THEN
			EXECUTE q;
			GET DIAGNOSTICS rows = ROW_COUNT;
			result := 'ok: ' || rows || ' rows';
		ELSE
			EXECUTE q;
			result := 'ok: done';
		END IF;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
		result := SQLSTATE || ': ' || SQLERRM
			|| coalesce(' [' || nullif(detail, '') || ']', '');
	END;
	changes := pg_temp.changes(before);
	INSERT INTO pg_temp.cases (label, result, changes) VALUES (q, result, changes);
END $$;
-- a case checked by a condition over several statements
CREATE FUNCTION pg_temp.check(label text, ok boolean) RETURNS text
LANGUAGE sql SET search_path = pg_catalog AS $$
	INSERT INTO pg_temp.cases (label, result, changes)
	VALUES (label, CASE WHEN ok THEN 'ok' ELSE 'FAILED' END, '-')
	RETURNING result
$$;
-- ---- end of harness ----

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
	($$SELECT fencing.lease_check(NULL, pg_temp.tok())$$),
	($$SELECT fencing.lease_check('bi_a', NULL)$$),
	($$SELECT fencing.lease_check(NULL, NULL)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the admin functions (as a superuser, so the argument is what fails)
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_force_release(NULL)$$),
	($$SELECT fencing.lease_purge(NULL)$$),
	($$SELECT fencing.advance_tokens(NULL)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the resource side: NULL fence is "never written", NULL token an error
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.fence_check(NULL, 5)$$),
	($$SELECT fencing.fence_check(5, NULL)$$),
	($$SELECT fencing.fence_check(NULL, NULL)$$),
	($$SELECT fencing.fence_allows(NULL, 5)$$),
	($$SELECT fencing.fence_allows(5, NULL)$$),
	($$SELECT fencing.fence_allows(NULL, NULL)$$),
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
	($$UPDATE bi_a_rows SET note = 'x' WHERE fencing.fence_check(fence, NULL) RETURNING id$$),
	($$UPDATE bi_a_rows SET note = 'x', fence = fencing.fence_advance(fence, NULL) RETURNING id$$),
	($$UPDATE bi_a_rows SET note = 'x' WHERE fencing.fence_allows(fence, NULL::bigint) RETURNING id$$)
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
SELECT fencing.lease_check('bi_a', pg_temp.tok()) AS still_live;
SELECT * FROM bi_a_rows ORDER BY id;

-- every case, and any that changed something it should not have
SELECT (SELECT last_value FROM pg_temp.case_seq) AS cases,
	   count(*) FILTER (WHERE result LIKE 'ok%') AS accepted,
	   count(*) FILTER (WHERE result NOT LIKE 'ok%') AS refused
  FROM pg_temp.cases;
SELECT n, label, result, changes FROM pg_temp.cases
 WHERE result NOT LIKE 'ok%'
   AND changes NOT IN ('unchanged', 'stale write counted');

DROP TABLE bi_a_rows;
