--
-- The write-path matrix of fence_guard (sql/include/write_paths.sql) for
-- MERGE: every action kind (UPDATE, DELETE, INSERT, DO NOTHING) and
-- several actions with conditions, whose UPDATE actions name different
-- columns (a MERGE's updated columns are those of all its UPDATE actions,
-- so the guard judges values, not column lists).
--
\set VERBOSITY terse
\i sql/include/write_paths.sql

-- merge1(): a MERGE on row 1 of the table, with the given actions
CREATE FUNCTION pg_temp.merge1(tbl text, actions text) RETURNS text
LANGUAGE sql AS $$
	SELECT format('MERGE INTO %s AS t USING (VALUES (1, 2)) AS s(id, other) ON t.id = s.id ', tbl)
		|| actions
$$;
INSERT INTO wp_paths (path, kind, shown, q, q_fence, after) VALUES
	('merge: update', 'update', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED THEN UPDATE SET v = 'w'$$),
		pg_temp.merge1('wp_plain', $$WHEN MATCHED THEN UPDATE SET v = 'w', fence = %T$$), '1:w:%F'),
	('merge: delete', 'delete', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED THEN DELETE$$), NULL, ''),
	('merge: insert', 'insert', 'wp_plain',
		$$MERGE INTO wp_plain AS t USING (VALUES (2)) AS s(id) ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'w', NULL)$$,
		$$MERGE INTO wp_plain AS t USING (VALUES (2)) AS s(id) ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'w', %T)$$,
		'1:orig:CUR 2:w:%F'),
	('merge: do nothing', 'nothing', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED THEN DO NOTHING WHEN NOT MATCHED THEN DO NOTHING$$),
		NULL, '1:orig:%F'),
	-- issue 23, item 4: a dead action that sets the fence
	('merge: dead UPDATE SET fence = NULL, then UPDATE', 'update', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED AND false THEN UPDATE SET fence = NULL WHEN MATCHED THEN UPDATE SET v = 'w'$$),
		pg_temp.merge1('wp_plain', $$WHEN MATCHED AND false THEN UPDATE SET fence = NULL WHEN MATCHED THEN UPDATE SET v = 'w', fence = %T$$),
		'1:w:%F'),
	('merge: dead UPDATE SET fence = fence, then UPDATE', 'update', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED AND s.other = 0 THEN UPDATE SET fence = fence WHEN MATCHED THEN UPDATE SET v = 'w'$$),
		NULL, '1:w:%F'),
	('merge: live UPDATE SET fence = fence', 'update', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED AND s.other = 2 THEN UPDATE SET v = 'w', fence = fence WHEN MATCHED THEN DELETE$$),
		NULL, '1:w:%F'),
	('merge: dead DELETE, then UPDATE', 'update', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED AND t.v = 'nope' THEN DELETE WHEN MATCHED THEN UPDATE SET v = 'w'$$),
		pg_temp.merge1('wp_plain', $$WHEN MATCHED AND t.v = 'nope' THEN DELETE WHEN MATCHED THEN UPDATE SET v = 'w', fence = %T$$),
		'1:w:%F'),
	('merge: dead UPDATE SET fence, then DELETE', 'delete', 'wp_plain',
		pg_temp.merge1('wp_plain', $$WHEN MATCHED AND t.v = 'nope' THEN UPDATE SET fence = 1 WHEN MATCHED THEN DELETE$$),
		NULL, ''),
	('merge: update and insert', 'update', 'wp_plain',
		$$MERGE INTO wp_plain AS t USING (VALUES (1), (2)) AS s(id) ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'w' WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'w', NULL)$$,
		$$MERGE INTO wp_plain AS t USING (VALUES (1), (2)) AS s(id) ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'w', fence = %T WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'w', %T)$$,
		'1:w:%F 2:w:%F'),
	('merge: partitioned, update moving the row', 'update', 'wp_part',
		pg_temp.merge1('wp_part', $$WHEN MATCHED THEN UPDATE SET id = 101, v = 'w'$$),
		pg_temp.merge1('wp_part', $$WHEN MATCHED THEN UPDATE SET id = 101, v = 'w', fence = %T$$), '101:w:%F'),
	('merge: move, later PL/pgSQL trigger', 'update', 'wp_mv_touch',
		pg_temp.merge1('wp_mv_touch', $$WHEN MATCHED THEN UPDATE SET id = 101, v = 'w'$$),
		pg_temp.merge1('wp_mv_touch', $$WHEN MATCHED THEN UPDATE SET id = 101, v = 'w', fence = fencing.fence_advance(t.fence, %T)$$),
		'101:w:%F'),
	('merge: move, trigger writes a row', 'update', 'wp_mv_nested',
		pg_temp.merge1('wp_mv_nested', $$WHEN MATCHED THEN UPDATE SET id = 101, v = 'w'$$),
		pg_temp.merge1('wp_mv_nested', $$WHEN MATCHED THEN UPDATE SET id = 101, v = 'w', fence = %T$$), '101:w:%F'),
	('merge: fenced row, SET fence = 0', 'update', 'wp_zfenced',
		pg_temp.merge1('wp_zfenced', $$WHEN MATCHED THEN UPDATE SET v = 'w', fence = 0$$), NULL, '1:w:%F'),
	('merge: inheritance child with its own guard', 'update', 'wp_inh',
		pg_temp.merge1('wp_inh', $$WHEN MATCHED THEN UPDATE SET v = 'w'$$),
		pg_temp.merge1('wp_inh', $$WHEN MATCHED THEN UPDATE SET v = 'w', fence = %T$$), '1:w:%F 2:orig:CUR');

SELECT * FROM pg_temp.wp_run('.');
SELECT count(*) AS cases,
	   count(*) FILTER (WHERE expected <> 'as expected') AS unexpected
  FROM pg_temp.wp_run('.');

DEALLOCATE ALL;
RESET plan_cache_mode;
DROP VIEW wp_view;
DROP TABLE wp_plain, wp_unfenced, wp_zero, wp_zfenced, wp_part, wp_inh_guarded, wp_inh_bare, wp_inh,
	wp_restore, wp_nulled, wp_late, wp_fk, wp_fk_parent, wp_mv_touch, wp_mv_predel, wp_mv_nested,
	wp_side;
DROP FUNCTION wp_put_back_fence(), wp_null_fence(), wp_static(bigint),
	wp_dynamic(bigint), wp_sql(bigint), wp_touch(), wp_note_delete(), wp_write_side();
