-- ---- harness of the badinput_* and security_* files, included with \i ----
-- A case runs one statement in a subtransaction and records its result:
-- "ok: <value of the first column>", "ok: <n> rows" (a DML statement with
-- no RETURNING), "ok: done" (any other statement), or "<SQLSTATE>:
-- <message> [<detail>]"; and what it changed
-- among the lease rows, the token counter and the file's own resource
-- table (pg_temp.resource()).  Cases are numbered by a
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
		pg_temp.resource()]
$$;
CREATE FUNCTION pg_temp.changes(before text[]) RETURNS text
LANGUAGE sql SET search_path = pg_catalog AS $$
	SELECT coalesce(nullif(concat_ws(', ',
		CASE WHEN a[1] IS DISTINCT FROM before[1] THEN 'leases' END,
		CASE WHEN a[2] IS DISTINCT FROM before[2] THEN 'token spent' END,
		CASE WHEN a[3] IS DISTINCT FROM before[3] THEN 'resource' END), ''),
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
