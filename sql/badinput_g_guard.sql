--
-- Bad input (g): fence_guard attached wrongly.
--
-- CREATE TRIGGER cannot check a trigger function's arguments, so a
-- misconfigured fence_guard is accepted when it is created and reports
-- the mistake the first time it fires.  It then refuses every write it
-- fires for, so the mistake fails closed: no argument or too many
-- (39P01), an unknown option (22023), a column that does not exist
-- (42703), a fence column that is not bigint (42804), an AFTER,
-- statement-level, INSTEAD OF or TRUNCATE trigger (39P01).
--
-- Mistakes it cannot see fail open: a guard that does not fire for every
-- one of INSERT, UPDATE and DELETE, a guard limited to some columns
-- (UPDATE OF), or one with a WHEN condition.  The last cases show writes
-- such a table accepts although they carry a stale token.
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\i sql/include/case_harness.sql

CREATE TABLE bi_g (id int PRIMARY KEY, fence bigint, fence_int int,
				   fence_num numeric, fence_text text, fence_small smallint,
				   fence_arr bigint[], note text);
CREATE DOMAIN bi_g_fence AS bigint CHECK (VALUE > 0);
ALTER TABLE bi_g ADD COLUMN fence_dom bi_g_fence;
INSERT INTO bi_g VALUES (1, 10, 10, 10, '10', 10, '{10}', 'written by 10', 10);
CREATE OR REPLACE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(t::text, ' ' ORDER BY t.id) FROM public.bi_g AS t
$$;

-- three writes through a trigger: an UPDATE with a newer token in the
-- fence column, a DELETE and an INSERT, each with a newer declared token
CREATE FUNCTION pg_temp.writes(label text)
RETURNS TABLE (trig text, q text, result text, changes text)
LANGUAGE plpgsql AS $$
DECLARE
	w text;
BEGIN
	FOREACH w IN ARRAY ARRAY[
		'UPDATE bi_g SET note = ''by 20'', fence = 20 WHERE id = 1',
		'DELETE FROM bi_g WHERE id = 1',
		'INSERT INTO bi_g (id, note) VALUES (2, ''new'')']
	LOOP
		trig := label;
		q := w;
		SELECT r.result, r.changes INTO result, changes FROM pg_temp.run(w) AS r;
		RETURN NEXT;
	END LOOP;
END $$;

-- each wrong trigger in turn: created without complaint, refuses writes
CREATE TEMP TABLE wrong (n int, label text, ddl text);
INSERT INTO wrong VALUES
	(1, 'no argument',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard()'),
	(2, 'three arguments',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence'', ''allow_unfenced'', ''x'')'),
	(3, 'unknown option',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence'', ''allow_stale'')'),
	(4, 'option in the wrong case',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence'', ''ALLOW_UNFENCED'')'),
	(5, 'column and option swapped',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''allow_unfenced'', ''fence'')'),
	(6, 'no such column',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''nope'')'),
	(7, 'column name in the wrong case',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''FENCE'')'),
	(8, 'empty column name',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('''')'),
	(9, 'system column',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''xmin'')'),
	(10, 'integer column',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence_int'')'),
	(11, 'numeric column',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence_num'')'),
	(12, 'text column',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence_text'')'),
	(13, 'smallint column',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence_small'')'),
	(14, 'bigint[] column',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence_arr'')'),
	(15, 'domain over bigint',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence_dom'')'),
	(16, 'AFTER ... FOR EACH ROW',
		'AFTER INSERT OR UPDATE OR DELETE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence'')'),
	(17, 'BEFORE ... FOR EACH STATEMENT',
		'BEFORE INSERT OR UPDATE OR DELETE ON bi_g FOR EACH STATEMENT EXECUTE FUNCTION fencing.fence_guard(''fence'')'),
	(18, 'AFTER ... FOR EACH STATEMENT',
		'AFTER INSERT OR UPDATE OR DELETE ON bi_g FOR EACH STATEMENT EXECUTE FUNCTION fencing.fence_guard(''fence'')');
-- create the trigger, make the three writes, drop the trigger
CREATE FUNCTION pg_temp.with_trigger(label text, ddl text)
RETURNS TABLE (trig text, q text, result text, changes text)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'CREATE TRIGGER wrong ' || ddl;
	RETURN QUERY SELECT * FROM pg_temp.writes(label);
	EXECUTE 'DROP TRIGGER wrong ON bi_g';
END $$;
BEGIN;
SELECT set_config('fencing.token', '20', true) AS declared_token;
SELECT w.n, x.* FROM wrong AS w, LATERAL pg_temp.with_trigger(w.label, w.ddl) AS x
 ORDER BY w.n;
COMMIT;

-- a column dropped after the trigger was created
ALTER TABLE bi_g ADD COLUMN fence_gone bigint;
CREATE TRIGGER wrong BEFORE INSERT OR UPDATE OR DELETE ON bi_g
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence_gone');
ALTER TABLE bi_g DROP COLUMN fence_gone;
BEGIN;
SELECT set_config('fencing.token', '20', true) AS declared_token;
SELECT * FROM pg_temp.writes('column dropped later');
COMMIT;
DROP TRIGGER wrong ON bi_g;

-- a fence column whose type was changed after the trigger was created
CREATE TRIGGER wrong BEFORE INSERT OR UPDATE OR DELETE ON bi_g
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence_small');
ALTER TABLE bi_g ALTER COLUMN fence_small TYPE bigint;
BEGIN;
SELECT set_config('fencing.token', '20', true) AS declared_token;
SELECT * FROM pg_temp.writes('smallint column altered to bigint: now right');
COMMIT;
SELECT id, fence, fence_small, note FROM bi_g ORDER BY id;
DROP TRIGGER wrong ON bi_g;
UPDATE bi_g SET note = 'written by 10', fence = 10 WHERE id = 1;
DELETE FROM bi_g WHERE id = 2;
INSERT INTO bi_g (id, fence, note) VALUES (1, 10, 'written by 10') ON CONFLICT DO NOTHING;

-- not a table trigger at all
CREATE VIEW bi_g_view AS SELECT id, fence, note FROM bi_g;
CREATE TRIGGER wrong INSTEAD OF UPDATE ON bi_g_view
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_g_view SET fence = 20 WHERE id = 1$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
DROP VIEW bi_g_view;
CREATE TRIGGER wrong BEFORE TRUNCATE ON bi_g
	FOR EACH STATEMENT EXECUTE FUNCTION fencing.fence_guard('fence');
SELECT q, r.* FROM (VALUES
	($$TRUNCATE bi_g$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
DROP TRIGGER wrong ON bi_g;
-- called as a function, declared as a row trigger PostgreSQL refuses, or
-- a function that is not a trigger function
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.fence_guard()$$),
	($$CREATE TRIGGER wrong BEFORE TRUNCATE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence')$$),
	($$CREATE TRIGGER wrong BEFORE UPDATE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(fence)$$),
	($$CREATE TRIGGER wrong BEFORE UPDATE ON bi_g FOR EACH ROW EXECUTE FUNCTION fencing.fence_allows('fence')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- (an unquoted argument is a string too: fence_guard(fence) is right)
SELECT tgname, encode(tgargs, 'escape') AS tgargs FROM pg_trigger
 WHERE tgrelid = 'bi_g'::regclass AND NOT tgisinternal;
DROP TRIGGER wrong ON bi_g;

-- the right trigger, for comparison: the stale write is refused (LF001)
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON bi_g
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_g SET note = 'by 5', fence = 5 WHERE id = 1$$),
	($$UPDATE bi_g SET note = 'by 20', fence = 20 WHERE id = 1 RETURNING fence$$),
	($$UPDATE bi_g SET note = 'by 10', fence = 10 WHERE id = 1$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
DROP TRIGGER guard ON bi_g;

-- fail-open mistakes the guard cannot see: stale writes get through.
-- Rows 11 to 13 were written with token 20; every write below carries 5.
INSERT INTO bi_g (id, fence, note) VALUES
	(11, 20, 'written by 20'), (12, 20, 'written by 20'), (13, 20, 'written by 20');
CREATE TRIGGER partial BEFORE INSERT OR UPDATE ON bi_g
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_g SET note = 'by 5', fence = 5 WHERE id = 11$$),
	($$DELETE FROM bi_g WHERE id = 11 RETURNING fence$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
DROP TRIGGER partial ON bi_g;
CREATE TRIGGER partial BEFORE INSERT OR UPDATE OF note OR DELETE ON bi_g
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_g SET note = 'by 5', fence = 5 WHERE id = 12$$),
	($$UPDATE bi_g SET fence = 5 WHERE id = 12 RETURNING fence$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
DROP TRIGGER partial ON bi_g;
CREATE TRIGGER partial BEFORE UPDATE ON bi_g
	FOR EACH ROW WHEN (OLD.note IS DISTINCT FROM NEW.note)
	EXECUTE FUNCTION fencing.fence_guard('fence');
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_g SET note = 'by 5', fence = 5 WHERE id = 13$$),
	($$UPDATE bi_g SET fence = 5 WHERE id = 13 RETURNING fence$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
DROP TRIGGER partial ON bi_g;

SELECT * FROM bi_g ORDER BY id;

-- every case, and any refused case that changed something (a refused
-- stale write moves the stale-write counter: that is what it counts)
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();

DROP TABLE bi_g;
DROP DOMAIN bi_g_fence;
