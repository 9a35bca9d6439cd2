-- ---- the hostile-argument sweep's harness, included with \i by
-- sql/sweep_args.sql and sql/sweep_triggers.sql (see there) ----
--
-- pg_temp.sw_state(): the extension's whole state, read from the catalog
-- so that a new table or sequence is covered without new code: every row
-- of every table of schema fencing, last_value and is_called of every
-- sequence.
--
-- pg_temp.sw_try(q, role [, pre]): runs statement pre, if any, and q as
-- role ('super' for the current superuser) in a subtransaction that is
-- always rolled back, so every case starts from the same state; returns
-- "ok" or the SQLSTATE, and what changed: for "ok", seen inside the
-- subtransaction; for an error, what is left after its rollback
-- (sequences do not roll back).
\set VERBOSITY terse
\set SHOW_CONTEXT never
-- the whole state in one view, made from the catalog, so that its plan
-- is made once
DO $$
BEGIN
	EXECUTE (
	SELECT 'CREATE OR REPLACE TEMP VIEW sw_state_v AS SELECT ARRAY[' || string_agg(
			format('%L || (%s)', x.rel::text || '=',
				   CASE WHEN x.relkind = 'S'
				   THEN format('SELECT s.last_value || %L || s.is_called FROM %s AS s',
							   ' ', x.rel)
				   ELSE format('SELECT coalesce(string_agg(t::text, %L ORDER BY t::text), %L) FROM %s AS t',
							   E'\n', '', x.rel)
				   END), ', ' ORDER BY x.rel::text) || '] AS st'
	  FROM (SELECT c.oid::regclass AS rel, c.relkind
			  FROM pg_class AS c
			 WHERE c.relnamespace = 'fencing'::regnamespace
			   AND c.relkind IN ('r', 'S')) AS x);
END $$;
CREATE FUNCTION pg_temp.sw_state() RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
	RETURN (SELECT v.st FROM pg_temp.sw_state_v AS v);
END $$;
CREATE FUNCTION pg_temp.sw_diff(a text[], b text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
	SELECT coalesce(array_agg(split_part(x, '=', 1) ORDER BY 1), '{}')
	  FROM (SELECT unnest(a) EXCEPT SELECT unnest(b)) AS d(x)
$$;
CREATE FUNCTION pg_temp.sw_try(q text, who text, pre text DEFAULT NULL,
							   OUT result text, OUT changes text[],
							   OUT msg text)
LANGUAGE plpgsql AS $$
DECLARE
	before text[] := pg_temp.sw_state();
	inside text[];
	st text;
BEGIN
	BEGIN
		IF who <> 'super' THEN
			EXECUTE format('SET ROLE %I', who);
		END IF;
		IF pre IS NOT NULL THEN
			EXECUTE pre;
		END IF;
		EXECUTE q;
		RESET ROLE;
		inside := pg_temp.sw_state();
		RAISE SQLSTATE 'SWOK0';
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		IF st = 'SWOK0' THEN
			result := 'ok';
			msg := NULL;
			changes := pg_temp.sw_diff(inside, before);
		ELSE
			result := st;
			changes := pg_temp.sw_diff(pg_temp.sw_state(), before);
		END IF;
	END;
END $$;
-- the SQLSTATEs the README documents ("SQLSTATEs"); anything else from a
-- function of the extension (XX000 above all) is a defect
CREATE TEMP TABLE sw_documented (code text PRIMARY KEY);
INSERT INTO sw_documented VALUES
	('LF001'), ('LF002'), ('LF003'), ('LF004'), ('LF005'), ('LF006'),
	('LF007'), ('LF010'), ('LF011'), ('LF012'), ('LF020'), ('LF021'),
	('22004'), ('22023'), ('0A000'), ('25006'), ('40001'), ('42501'),
	('55000'), ('39P01'), ('42703'), ('42804'), ('57014'), ('08006');
-- the token source's band: only advance_tokens() may move it
CREATE TEMP TABLE sw_band (rel text PRIMARY KEY);
INSERT INTO sw_band VALUES ('fencing.token_base'), ('fencing.token_origin'),
	('fencing.token_band'), ('fencing.token_band_offset'),
	('fencing.token_witness');
-- ---- end of the sweep's harness ----
