--
-- The hostile-argument sweep, part two: every trigger function of the
-- extension (read from pg_proc, so a new one is swept without new test
-- code), attached by a superuser with hostile trigger arguments to tables
-- whose columns have odd types, and fired by an application role with
-- USAGE on schema fencing only, with hostile row values, with and without
-- a declared token.  Each write runs in a subtransaction that is rolled
-- back, and the extension's whole state is compared before and after.
--
-- Rules; a violation is listed at the end:
--   T1  an error carries a SQLSTATE of the README's table (not XX000)
--   T2  a write that fails changes nothing of the extension's state, a
--       refusal of fence_guard (LF001) or claim_guard (LF001, LF010, LF011,
--       LF012: docs/queues.md) included
--   T3  no trigger moves the token source's band (only advance_tokens()
--       may), whatever table it is attached to
--   T4  of the triggers, only claim_stamp spends tokens
--
-- Known defects: the expected output lists the violations this sweep
-- finds on 83fed51, so that a fix's diff shows them go: issue 23's item 12
-- (_leases_restored attached elsewhere: XX000 on a table without a column
-- token, T1; a float8 token 'NaN' read as the bits of a bigint moves the
-- band, T3, T4), and claim_stamp issuing its token before it finds that
-- the jsonb it writes into is not an object (42804 with a token spent, T2).
--
-- A database of its own, as sql/sweep_args.sql: a trigger that moved the
-- band would leave it moved (sequences do not roll back).
-- a mistake of the sweep itself stops it (and the output then differs)
\set ON_ERROR_STOP 1
SELECT current_database() AS sweep_home \gset
CREATE DATABASE regress_fencing_sweep_triggers;
\c regress_fencing_sweep_triggers
SET client_min_messages = warning;
CREATE EXTENSION fencing;
CREATE ROLE regress_sweep_trg;
GRANT USAGE ON SCHEMA fencing TO regress_sweep_trg;
SET statement_timeout = '60s';
\i sql/include/sweep.sql

-- a current token, for the rows and for fencing.token
CREATE TABLE sw_token AS SELECT fencing.next_token() AS t;
GRANT SELECT ON sw_token TO PUBLIC;
SELECT t AS tok FROM sw_token \gset

-- tables whose fence, token and stamp columns have one type each, and a
-- jsonb column doc; the hostile values of each type, in SQL
CREATE DOMAIN sw_dom AS bigint;
CREATE TEMP TABLE sw_table (tab text, typ text, vals text[], ord int);
INSERT INTO sw_table VALUES
	('sw_float8', 'float8', ARRAY['''NaN''', '''Infinity''', '''-Infinity''', '-1', '1e300', '0.5'], 1),
	('sw_int8', 'bigint', ARRAY['NULL', '-1', '0', '9223372036854775807', :'tok'], 2),
	('sw_text', 'text', ARRAY['''abc''', '''''', '''-1''', '''9223372036854775808'''], 3),
	('sw_domain', 'sw_dom', ARRAY['-1', '0', :'tok'], 4),
	('sw_array', 'bigint[]', ARRAY['''{}''', '''{1,2}''', '''{NULL}'''], 5),
	('sw_bare', NULL, '{}', 6);
DO $$
DECLARE
	t record;
	tok bigint := (SELECT s.t FROM sw_token AS s);
BEGIN
	FOR t IN SELECT * FROM pg_temp.sw_table LOOP
		IF t.typ IS NULL THEN
			EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, note text)', t.tab);
			EXECUTE format('INSERT INTO %I VALUES (1, %L)', t.tab, 'one');
		ELSE
			EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, fence %s, token %s, stamp %s, doc jsonb, note text)',
						   t.tab, t.typ, t.typ, t.typ);
			EXECUTE format('INSERT INTO %I VALUES (1, %s, %s, %s, %L, %L)', t.tab,
						   CASE t.typ WHEN 'bigint[]' THEN format('ARRAY[%s]', tok)
						   ELSE format('%L', tok) END,
						   CASE t.typ WHEN 'bigint[]' THEN format('ARRAY[%s]', tok)
						   ELSE format('%L', tok) END,
						   CASE t.typ WHEN 'bigint[]' THEN format('ARRAY[%s]', tok)
						   ELSE format('%L', tok) END,
						   jsonb_build_object('k', tok, 'd', tok), 'one');
		END IF;
		EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON %I TO regress_sweep_trg',
					   t.tab);
	END LOOP;
END $$;
-- jsonb of every kind, for the places that name a key of doc
CREATE TEMP TABLE sw_doc (doc text, ord serial);
INSERT INTO sw_doc (doc) VALUES ('null'), ('"s"'), ('[]'), ('{}'),
	('{"k": null}'), ('{"k": "1"}'), ('{"k": 1.5}'), ('{"k": -1}'),
	('{"k": 1e30}'), ('{"k": true}'), ('{"k": {"x": 1}}');
INSERT INTO sw_doc (doc) SELECT jsonb_build_object('k', t, 'd', t)::text FROM sw_token;

-- trigger arguments: none, empty, each column, missing ones, jsonb keys,
-- options, too many, very long
CREATE TEMP TABLE sw_args (args text[], ord serial);
INSERT INTO sw_args (args) VALUES ('{}'), ('{""}'), ('{fence}'), ('{stamp}'),
	('{note}'), ('{nosuch}'), ('{doc->k}'), ('{doc->}'), ('{->k}'),
	('{doc->k->x}'), ('{fence,allow_unfenced}'), ('{fence,bogus}'),
	('{fence,allow_unfenced,x}'), ('{stamp,token}'), ('{stamp,doc->d}'),
	('{stamp,token,allow_unfenced}'), ('{doc->k,doc->d,allow_unfenced}');
INSERT INTO sw_args (args) VALUES (ARRAY[repeat('x', 300)]);

-- the writes: an INSERT per hostile value into the columns, or per jsonb
-- value into doc when an argument names a key; an UPDATE of another
-- column, of the named columns and of doc; a DELETE.  Updates and deletes
-- run without a declared token and with the current one.
CREATE TEMP TABLE sw_tcase (fn text, args text[], tab text, q text,
							token text, result text, changes text[], msg text);

CREATE FUNCTION pg_temp.sw_writes(t pg_temp.sw_table, args text[])
RETURNS TABLE (q text, token text)
LANGUAGE plpgsql AS $$
DECLARE
	v text;
	tok text := (SELECT s.t::text FROM sw_token AS s);
	cols text := 'fence, token, stamp';
BEGIN
	IF t.typ IS NULL THEN
		q := format('INSERT INTO %I VALUES (2, %L)', t.tab, 'two');
		token := '';
		RETURN NEXT;
	ELSIF array_to_string(args, ',') LIKE '%->%' THEN
		FOR v IN SELECT d.doc FROM pg_temp.sw_doc AS d ORDER BY d.ord LOOP
			q := format('INSERT INTO %I (id, doc) VALUES (2, %L)', t.tab, v);
			token := '';
			RETURN NEXT;
		END LOOP;
	ELSE
		FOREACH v IN ARRAY t.vals LOOP
			q := format('INSERT INTO %I (id, %s) VALUES (2, %s, %s, %s)',
						t.tab, cols, v, v, v);
			token := '';
			RETURN NEXT;
		END LOOP;
	END IF;
	FOREACH token IN ARRAY ARRAY['', tok] LOOP
		q := format('UPDATE %I SET note = %L WHERE id = 1', t.tab, 'updated');
		RETURN NEXT;
		IF t.typ IS NOT NULL THEN
			q := format('UPDATE %I SET fence = %s, token = %s, stamp = %s WHERE id = 1',
						t.tab, t.vals[1], t.vals[1], t.vals[1]);
			RETURN NEXT;
			q := format('UPDATE %I SET doc = %L WHERE id = 1', t.tab, '{"k": 5}');
			RETURN NEXT;
		END IF;
		q := format('DELETE FROM %I WHERE id = 1', t.tab);
		RETURN NEXT;
	END LOOP;
END $$;
-- attached as they must not be: AFTER, per statement, INSTEAD OF a view's
-- write, on TRUNCATE (with the argument stamp, a column of sw_int8)
CREATE VIEW sw_view AS SELECT * FROM sw_int8;
GRANT SELECT, INSERT ON sw_view TO regress_sweep_trg;
CREATE TEMP TABLE sw_timing (tab text, spec text, q text, ord serial);
INSERT INTO sw_timing (tab, spec, q) VALUES
	('sw_int8', 'AFTER INSERT ON sw_int8 FOR EACH ROW', 'INSERT INTO sw_int8 (id) VALUES (2)'),
	('sw_int8', 'BEFORE INSERT ON sw_int8 FOR EACH STATEMENT', 'INSERT INTO sw_int8 (id) VALUES (2)'),
	('sw_int8', 'AFTER DELETE ON sw_int8 FOR EACH STATEMENT', 'DELETE FROM sw_int8'),
	('sw_int8', 'BEFORE TRUNCATE ON sw_int8 FOR EACH STATEMENT', 'TRUNCATE sw_int8'),
	('sw_view', 'INSTEAD OF INSERT ON sw_view FOR EACH ROW', 'INSERT INTO sw_view (id) VALUES (2)');
DO $$
DECLARE
	f record;
	a record;
	t pg_temp.sw_table;
	w record;
	r record;
BEGIN
	FOR f IN SELECT format('%I.%I', n.nspname, p.proname) AS qname, p.proname::text AS name
			   FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
			  WHERE n.nspname = 'fencing' AND p.prorettype = 'trigger'::regtype
			  -- internal ones last: one that moves the band moves it for good
			  ORDER BY p.proname LIKE '\_%', p.proname LOOP
		FOR a IN SELECT * FROM pg_temp.sw_args ORDER BY ord LOOP
			FOR t IN SELECT * FROM pg_temp.sw_table ORDER BY ord LOOP
				EXECUTE format('CREATE TRIGGER sw BEFORE INSERT OR UPDATE OR DELETE ON %I FOR EACH ROW EXECUTE FUNCTION %s(%s)',
							   t.tab, f.qname,
							   (SELECT coalesce(string_agg(quote_literal(x), ', '), '')
								  FROM unnest(a.args) AS x));
				FOR w IN SELECT * FROM pg_temp.sw_writes(t, a.args) LOOP
					r := pg_temp.sw_try(w.q, 'regress_sweep_trg',
						format('SELECT set_config(%L, %L, true)', 'fencing.token', w.token));
					INSERT INTO pg_temp.sw_tcase VALUES (f.name, a.args, t.tab, w.q,
						w.token, r.result, r.changes, r.msg);
				END LOOP;
				EXECUTE format('DROP TRIGGER sw ON %I', t.tab);
			END LOOP;
		END LOOP;
		FOR w IN SELECT * FROM pg_temp.sw_timing ORDER BY ord LOOP
			EXECUTE format('CREATE TRIGGER sw %s EXECUTE FUNCTION %s(%L)',
						   w.spec, f.qname, 'stamp');
			r := pg_temp.sw_try(w.q, 'regress_sweep_trg');
			INSERT INTO pg_temp.sw_tcase VALUES (f.name, '{stamp}', w.spec, w.q,
				'', r.result, r.changes, r.msg);
			EXECUTE format('DROP TRIGGER sw ON %I', w.tab);
		END LOOP;
	END LOOP;
END $$;

-- what was swept: per trigger function, the writes and their results
SELECT fn, sum(n) AS writes,
	   string_agg(result || ' ' || n, ', ' ORDER BY result COLLATE "C") AS results
  FROM (SELECT fn, result, count(*) AS n FROM sw_tcase GROUP BY fn, result) AS c
 GROUP BY fn ORDER BY fn COLLATE "C";

-- the violations: the rule, where, and the first write that broke it
-- (the current token written T)
CREATE TEMP VIEW sw_tviolation AS
SELECT 'T1 undocumented SQLSTATE ' || c.result || ': ' || c.msg AS rule, c.*
  FROM sw_tcase AS c
 WHERE c.result <> 'ok' AND c.result NOT IN (SELECT code FROM sw_documented)
UNION ALL
SELECT 'T2 failed (' || c.result || '), changed ' || array_to_string(c.changes, ', '), c.*
  FROM sw_tcase AS c
 WHERE c.result <> 'ok' AND c.changes <> '{}'
UNION ALL
SELECT 'T3 moved the band (' || c.result || ')', c.*
  FROM sw_tcase AS c
 WHERE c.changes && (SELECT array_agg(rel) FROM sw_band)
UNION ALL
SELECT 'T4 spent a token', c.*
  FROM sw_tcase AS c
 WHERE c.result = 'ok' AND c.fn <> 'claim_stamp'
   AND 'fencing.token_seq' = ANY (c.changes);
SELECT v.rule, v.fn, v.tab, count(DISTINCT v.args) AS arglists,
	   count(*) AS writes,
	   (SELECT format('(%s) %s', array_to_string(x.args, ', '), replace(x.q, :'tok', 'T'))
		  FROM sw_tviolation AS x
		 WHERE (x.rule, x.fn, x.tab) = (v.rule, v.fn, v.tab)
		 ORDER BY x.args::text COLLATE "C", x.q COLLATE "C" LIMIT 1) AS example
  FROM sw_tviolation AS v GROUP BY v.rule, v.fn, v.tab
 ORDER BY v.rule COLLATE "C", v.fn COLLATE "C", v.tab COLLATE "C";

\c :sweep_home
DROP DATABASE regress_fencing_sweep_triggers;
DROP ROLE regress_sweep_trg;
