-- ---- the write-path matrix of fence_guard, included with \i by
-- resource_write_paths.sql and resource_write_paths_merge.sql ----
--
-- Every case is one write path (a statement template) crossed with one
-- token variant.  The outcome it must have comes from a table of
-- expectations by the path's kind (what the guard sees: an UPDATE, a
-- DELETE, an INSERT, ...) and the variant, never from the case itself:
-- adding a path is one line, and its expected outcomes follow from its
-- kind.  Each case runs in a subtransaction that is rolled back after the
-- rows are read, so every case starts from the same rows: row 1 with
-- fence CUR (OLD < CUR < NEW, all of the current band; OB is from before
-- it).  A case prints its SQLSTATE and the rows after it, tokens by name.
--
-- Token variants:
--   none                  no declared token; the statement leaves the fence
--   stale_declared        SET LOCAL fencing.token = OLD
--   current_declared      SET LOCAL fencing.token = NEW
--   stale_fence           the statement sets the fence column to OLD
--   current_fence         the statement sets the fence column to NEW
--   oldband_declared      fencing.token = OB
--   oldband_fence         the fence column set to OB
--   stale_declared_current_fence   fencing.token = OLD, fence set to NEW
SET fencing.refuse_old_band = on;
SELECT fencing.next_token() AS wp_ob \gset
SELECT fencing.advance_tokens();
SELECT fencing.next_token() AS wp_old \gset
SELECT fencing.next_token() AS wp_cur \gset
SELECT fencing.next_token() AS wp_new \gset
CREATE TEMP TABLE wp_tokens (name text PRIMARY KEY, token bigint NOT NULL);
INSERT INTO wp_tokens VALUES ('OB', :wp_ob), ('OLD', :wp_old), ('CUR', :wp_cur),
	('NEW', :wp_new);
CREATE FUNCTION pg_temp.tok(name text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT token FROM pg_temp.wp_tokens WHERE wp_tokens.name = tok.name $$;
CREATE FUNCTION pg_temp.tok_name(fence bigint) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT coalesce((SELECT name FROM pg_temp.wp_tokens WHERE token = fence),
					CASE WHEN fence IS NULL THEN 'NULL' ELSE fence::text END)
$$;

CREATE TEMP TABLE wp_variants (variant text PRIMARY KEY, ord int NOT NULL,
	declared text,				-- the token declared, by name
	fence text);				-- the token set in the fence column, by name
INSERT INTO wp_variants VALUES
	('none', 1, NULL, NULL),
	('stale_declared', 2, 'OLD', NULL),
	('current_declared', 3, 'NEW', NULL),
	('stale_fence', 4, NULL, 'OLD'),
	('current_fence', 5, NULL, 'NEW'),
	('oldband_declared', 6, 'OB', NULL),
	('oldband_fence', 7, NULL, 'OB'),
	('stale_declared_current_fence', 8, 'OLD', 'NEW');

-- The expectations: by the kind of write the guard sees, for each variant,
-- "ok:T" (accepted, the row's fence ends as T), "ok" (accepted, the row is
-- gone or unchanged) or the SQLSTATE of the refusal.
CREATE TEMP TABLE wp_expect (kind text PRIMARY KEY, what text NOT NULL,
	none text, stale_declared text, current_declared text,
	stale_fence text, current_fence text,
	oldband_declared text, oldband_fence text,
	stale_declared_current_fence text);
INSERT INTO wp_expect VALUES
	('update', 'an UPDATE of a fenced row',
		'LF004', 'LF001', 'ok:NEW', 'LF001', 'ok:NEW', 'LF005', 'LF001', 'LF001'),
	('delete', 'a DELETE of a fenced row',
		'LF004', 'LF001', 'ok', NULL, NULL, 'LF005', NULL, NULL),
	('update_unfenced', 'an UPDATE of a row never fenced: any token, but a token',
		'LF004', 'ok:OLD', 'ok:NEW', 'ok:OLD', 'ok:NEW', 'LF005', 'LF005', 'ok:NEW'),
	('delete_unfenced', 'a DELETE of a row never fenced: any token, but a token',
		'LF004', 'ok', 'ok', NULL, NULL, 'LF005', NULL, NULL),
	('insert_zero', 'an INSERT whose fence defaults to 0, which is no token',
		'ok:0', 'ok:OLD', 'ok:NEW', 'ok:OLD', 'ok:NEW', 'LF005', 'LF005', 'ok:NEW'),
	('insert', 'an INSERT of a new row: nothing to compare with; its token is band-checked',
		'ok:NULL', 'ok:OLD', 'ok:NEW', 'ok:OLD', 'ok:NEW', 'LF005', 'LF005', 'ok:NEW'),
	('upsert', 'INSERT ... ON CONFLICT DO UPDATE: the proposed row as an INSERT, then the UPDATE',
		'LF004', 'LF001', 'ok:NEW', 'LF001', 'ok:NEW', 'LF005', 'LF005', 'LF001'),
	('conflict_nothing', 'ON CONFLICT DO NOTHING: the proposed row as an INSERT, then nothing',
		'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:CUR', 'LF005', 'LF005', 'ok:CUR'),
	('nothing', 'no row trigger fires: nothing is written',
		'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:CUR'),
	('fence_restored', 'an UPDATE whose fence an earlier BEFORE trigger puts back: judged by the declared token',
		'LF004', 'LF001', 'ok:NEW', 'LF004', 'LF004', 'LF005', 'LF004', 'LF001'),
	('fence_nulled', 'an UPDATE whose fence an earlier BEFORE trigger sets to NULL',
		'LF001', 'LF001', 'LF001', 'LF001', 'LF001', 'LF005', 'LF001', 'LF001'),
	('late_rewrite', 'NOT COVERED: a BEFORE trigger firing after the guard puts the old fence back',
		'LF004', 'LF001', 'ok:CUR', 'LF001', 'ok:CUR', 'LF005', 'LF001', 'LF001'),
	('unguarded_update', 'NOT COVERED: an UPDATE the guard does not fire for',
		'ok:CUR', 'ok:CUR', 'ok:CUR', 'ok:OLD', 'ok:NEW', 'ok:CUR', 'ok:OB', 'ok:NEW'),
	('unguarded_delete', 'NOT COVERED: a DELETE the guard does not fire for',
		'ok', 'ok', 'ok', NULL, NULL, 'ok', NULL, NULL);

-- the expected outcome of one case
CREATE FUNCTION pg_temp.wp_expected(kind text, variant text) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE variant
		WHEN 'none' THEN e.none
		WHEN 'stale_declared' THEN e.stale_declared
		WHEN 'current_declared' THEN e.current_declared
		WHEN 'stale_fence' THEN e.stale_fence
		WHEN 'current_fence' THEN e.current_fence
		WHEN 'oldband_declared' THEN e.oldband_declared
		WHEN 'oldband_fence' THEN e.oldband_fence
		WHEN 'stale_declared_current_fence' THEN e.stale_declared_current_fence
		END
	  FROM pg_temp.wp_expect AS e WHERE e.kind = wp_expected.kind
$$;

-- The paths: a statement without the fence (q) and one that sets it to
-- %T (q_fence; NULL where the path cannot set it), the relation whose rows
-- are shown, and those rows when the write is accepted, with %F for the
-- fence it ends with.  Rows are "id:v:fence".
CREATE TEMP TABLE wp_paths (path text PRIMARY KEY, ord serial, kind text NOT NULL
	REFERENCES pg_temp.wp_expect, shown text NOT NULL, q text NOT NULL,
	q_fence text, after text NOT NULL);

-- the fixtures, each guarded (trigger "guard") unless said otherwise
CREATE TABLE wp_plain (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TABLE wp_unfenced (id int PRIMARY KEY, v text NOT NULL, fence bigint);
-- 0 for "never written": a fence of 0 or less is no token
CREATE TABLE wp_zero (id int PRIMARY KEY, v text NOT NULL,
	fence bigint NOT NULL DEFAULT 0);
CREATE TABLE wp_part (id int PRIMARY KEY, v text NOT NULL, fence bigint)
	PARTITION BY RANGE (id);
CREATE TABLE wp_part_low PARTITION OF wp_part FOR VALUES FROM (0) TO (100);
CREATE TABLE wp_part_high PARTITION OF wp_part FOR VALUES FROM (100) TO (200);
-- a fence of 0 ("never written") put on a row fenced with a token
CREATE TABLE wp_zfenced (id int PRIMARY KEY, v text NOT NULL,
	fence bigint NOT NULL DEFAULT 0);
-- rows moving between partitions while other triggers run in between: a
-- PL/pgSQL BEFORE UPDATE trigger firing after the guard (it bumps the
-- command counter), a PL/pgSQL BEFORE DELETE trigger firing before it, and
-- a BEFORE UPDATE trigger that writes another guarded row
CREATE TABLE wp_mv_touch (id int PRIMARY KEY, v text NOT NULL, fence bigint,
	touched timestamptz) PARTITION BY RANGE (id);
CREATE TABLE wp_mv_predel (id int PRIMARY KEY, v text NOT NULL, fence bigint)
	PARTITION BY RANGE (id);
CREATE TABLE wp_mv_nested (id int PRIMARY KEY, v text NOT NULL, fence bigint)
	PARTITION BY RANGE (id);
CREATE TABLE wp_side (id int PRIMARY KEY, n int NOT NULL, fence bigint);
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['wp_mv_touch', 'wp_mv_predel', 'wp_mv_nested']
	LOOP
		EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (0) TO (100)',
					   t || '_low', t);
		EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (100) TO (200)',
					   t || '_high', t);
	END LOOP;
END $$;
CREATE FUNCTION wp_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.touched := clock_timestamp();
	RETURN NEW;
END $$;
CREATE FUNCTION wp_note_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	seen timestamptz;
BEGIN
	seen := clock_timestamp();
	RETURN OLD;
END $$;
CREATE FUNCTION wp_write_side() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE wp_side SET n = n + 1, fence = NEW.fence WHERE id = 1;
	RETURN NEW;
END $$;
CREATE TRIGGER zz_touch BEFORE UPDATE ON wp_mv_touch
	FOR EACH ROW EXECUTE FUNCTION wp_touch();
CREATE TRIGGER a_note BEFORE DELETE ON wp_mv_predel
	FOR EACH ROW EXECUTE FUNCTION wp_note_delete();
CREATE TRIGGER zz_side BEFORE UPDATE ON wp_mv_nested
	FOR EACH ROW EXECUTE FUNCTION wp_write_side();
-- inheritance: the parent's trigger does not fire for rows of a child
CREATE TABLE wp_inh (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TABLE wp_inh_guarded (PRIMARY KEY (id)) INHERITS (wp_inh);
CREATE TABLE wp_inh_bare (PRIMARY KEY (id)) INHERITS (wp_inh);
CREATE VIEW wp_view AS SELECT id, v, fence FROM wp_plain;
-- BEFORE triggers that rewrite the row, firing before the guard ("a_")
-- and after it ("zz_"): triggers fire in name order
CREATE TABLE wp_restore (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TABLE wp_nulled (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TABLE wp_late (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE FUNCTION wp_put_back_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.v := upper(NEW.v);
	NEW.fence := OLD.fence;
	RETURN NEW;
END $$;
CREATE FUNCTION wp_null_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.fence := NULL;
	RETURN NEW;
END $$;
CREATE TRIGGER a_put_back BEFORE UPDATE ON wp_restore
	FOR EACH ROW EXECUTE FUNCTION wp_put_back_fence();
CREATE TRIGGER a_null BEFORE UPDATE ON wp_nulled
	FOR EACH ROW EXECUTE FUNCTION wp_null_fence();
CREATE TRIGGER zz_put_back BEFORE UPDATE ON wp_late
	FOR EACH ROW EXECUTE FUNCTION wp_put_back_fence();
-- foreign keys: the cascaded write is a write on the guarded table
CREATE TABLE wp_fk_parent (id int PRIMARY KEY);
CREATE TABLE wp_fk (id int PRIMARY KEY, v text NOT NULL, fence bigint,
	parent int REFERENCES wp_fk_parent ON DELETE CASCADE ON UPDATE CASCADE);
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['wp_plain', 'wp_unfenced', 'wp_zero', 'wp_zfenced', 'wp_part', 'wp_inh',
							 'wp_inh_guarded', 'wp_restore', 'wp_nulled', 'wp_late', 'wp_fk',
							 'wp_mv_touch', 'wp_mv_predel', 'wp_mv_nested', 'wp_side']
	LOOP
		EXECUTE format('CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON %I '
					   'FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard(''fence'')', t);
	END LOOP;
END $$;
-- the rows every case starts from (inserted with a declared token: fence
-- CUR), and a row never fenced
INSERT INTO wp_unfenced VALUES (1, 'orig', NULL);
INSERT INTO wp_zero (id, v) VALUES (1, 'orig');
BEGIN;
SELECT set_config('fencing.token', :'wp_cur', true) IS NOT NULL AS declared;
INSERT INTO wp_plain VALUES (1, 'orig', NULL);
INSERT INTO wp_part VALUES (1, 'orig', NULL);
INSERT INTO wp_zfenced VALUES (1, 'orig', DEFAULT);
INSERT INTO wp_mv_touch VALUES (1, 'orig', NULL);
INSERT INTO wp_mv_predel VALUES (1, 'orig', NULL);
INSERT INTO wp_mv_nested VALUES (1, 'orig', NULL);
INSERT INTO wp_side VALUES (1, 0, NULL);
INSERT INTO wp_inh_guarded VALUES (1, 'orig', NULL);
INSERT INTO wp_inh_bare VALUES (2, 'orig', :wp_cur);
INSERT INTO wp_restore VALUES (1, 'orig', NULL);
INSERT INTO wp_nulled VALUES (1, 'orig', NULL);
INSERT INTO wp_late VALUES (1, 'orig', NULL);
INSERT INTO wp_fk_parent VALUES (1);
INSERT INTO wp_fk VALUES (1, 'orig', NULL, 1);
COMMIT;

-- PL/pgSQL (static SQL: cached plans; dynamic SQL), and a SQL function
CREATE FUNCTION wp_static(tok bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF tok IS NULL THEN
		UPDATE wp_plain SET v = 'w' WHERE id = 1;
	ELSE
		UPDATE wp_plain SET v = 'w', fence = tok WHERE id = 1;
	END IF;
END $$;
CREATE FUNCTION wp_dynamic(tok bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF tok IS NULL THEN
		EXECUTE format('UPDATE %I SET v = %L WHERE id = 1', 'wp_plain', 'w');
	ELSE
		EXECUTE 'UPDATE wp_plain SET v = $1, fence = $2 WHERE id = 1' USING 'w', tok;
	END IF;
END $$;
CREATE FUNCTION wp_sql(tok bigint) RETURNS void LANGUAGE sql AS $$
	UPDATE wp_plain SET v = 'w', fence = coalesce(tok, fence) WHERE id = 1
$$;
-- cached generic plans
SET plan_cache_mode = force_generic_plan;
PREPARE wp_gp_update AS UPDATE wp_plain SET v = 'w' WHERE id = 1;
PREPARE wp_gp_update_fence(bigint) AS UPDATE wp_plain SET v = 'w', fence = $1 WHERE id = $2;
PREPARE wp_gp_delete(int) AS DELETE FROM wp_plain WHERE id = $1;
PREPARE wp_gp_insert(bigint) AS INSERT INTO wp_plain VALUES (2, 'w', $1);

-- run one case in a subtransaction, read the rows, roll it all back
CREATE FUNCTION pg_temp.wp_case(q text, declared bigint, shown text,
								OUT state text, OUT rows_after text)
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		PERFORM set_config('fencing.token', coalesce(declared::text, ''), true);
		BEGIN
			EXECUTE q;
			state := 'ok';
		EXCEPTION WHEN OTHERS THEN
			state := SQLSTATE;
		END;
		PERFORM set_config('fencing.token', '', true);
		EXECUTE format($q$SELECT coalesce(string_agg(format('%%s:%%s:%%s', id, v,
							   pg_temp.tok_name(fence)), ' ' ORDER BY id), '')
						   FROM %s$q$, shown) INTO rows_after;
		RAISE EXCEPTION USING ERRCODE = 'ZZ001';
	EXCEPTION WHEN SQLSTATE 'ZZ001' THEN
		NULL;
	END;
END $$;

-- every applicable case of the paths whose name matches the pattern
CREATE FUNCTION pg_temp.wp_run(pattern text)
RETURNS TABLE (path text, variant text, result text, rows_after text,
			   expected text)
LANGUAGE plpgsql AS $$
DECLARE
	c record;
	exp text;
	before_rows text;
BEGIN
	FOR c IN
		SELECT p.*, v.variant AS var, v.declared, v.fence AS fence_name,
			   pg_temp.wp_expected(p.kind, v.variant) AS e
		  FROM pg_temp.wp_paths AS p CROSS JOIN pg_temp.wp_variants AS v
		 WHERE p.path ~ pattern
		   AND (v.fence IS NULL OR p.q_fence IS NOT NULL)
		   AND pg_temp.wp_expected(p.kind, v.variant) IS NOT NULL
		 ORDER BY p.ord, v.ord
	LOOP
		SELECT x.rows_after INTO before_rows
		  FROM pg_temp.wp_case('SELECT 1', NULL, c.shown) AS x;
		SELECT x.state, x.rows_after INTO result, rows_after
		  FROM pg_temp.wp_case(
				CASE WHEN c.fence_name IS NULL THEN c.q
					 ELSE replace(c.q_fence, '%T', pg_temp.tok(c.fence_name)::text) END,
				pg_temp.tok(c.declared), c.shown) AS x;
		-- the rows the expectation says: unchanged when refused
		IF c.e LIKE 'ok%' THEN
			exp := 'ok | ' || replace(c.after, '%F', split_part(c.e, ':', 2));
		ELSE
			exp := c.e || ' | ' || before_rows;
		END IF;
		path := c.path;
		variant := c.var;
		expected := CASE WHEN result || ' | ' || rows_after = exp THEN 'as expected'
						 ELSE 'EXPECTED ' || exp END;
		RETURN NEXT;
	END LOOP;
END $$;
-- ---- end of the write-path matrix ----
