--
-- The hostile-argument sweep: every function of the extension, every
-- argument, hostile values of the argument's type.
--
-- The functions are read from pg_proc (schema fencing, trigger functions
-- are sql/sweep_triggers.sql's), so a new function is swept without new
-- test code.  Each argument in turn gets every hostile value of its type
-- while the others keep a valid value ("baseline"; arrays have two, empty
-- and one element, so there are variants).  Each call runs in a
-- subtransaction that is rolled back, once as an application role with
-- USAGE on schema fencing only and once as a superuser, and the
-- extension's whole state (every table and sequence of schema fencing,
-- read from the catalog) is compared before and after.
--
-- Rules; a violation is listed at the end:
--   R1  an error carries a SQLSTATE of the README's table (not XX000)
--   R2  a call that fails changes nothing, a refused stale write (LF001)
--       included
--   R3  a NULL argument is refused with 22004 (the application role may
--       get 42501 first for an admin function), except the documented
--       ones: "fence" (never written), and election_observe's known
--       leader (none)
--   R4  whether a value of an argument is refused with 22004, 22023 or
--       0A000 does not depend on the other arguments
--   R5  the documented limits of arguments by name (docs/reference.md "Limits",
--       "Reference"): name, election, holder and candidate 1 to 256
--       bytes, an election's value at most 8192 bytes, TTL above 0 and at
--       most 1 day, wait 0 to 1 day, purge age not negative, slots 1 to
--       1000, tokens above 0, arrays of group keepalive one-dimensional
--       without NULL; a new function with such an argument is held to them
--   R6  only advance_tokens() moves the token source's band, and only
--       functions that issue tokens spend one
-- Infinite intervals exist from PostgreSQL 17 on: R4 and R5 are listed
-- without them, so that every version prints the same (their refusal as
-- TTLs and waits is sql/badinput_c_ttl_infinity.sql's).
--
-- Known defects (issue 23): the expected output lists the violations this
-- sweep finds on 83fed51, item 10 (lease_renew_all accepts any TTL with
-- empty arrays: R4, R5), so that the fix's diff shows them go.
--
-- The sweep runs in a database of its own: advance_tokens() with a floor
-- near 2^63 uses up its token space for good (sequences do not roll back).
-- a mistake of the sweep itself stops it (and the output then differs)
\set ON_ERROR_STOP 1
SELECT current_database() AS sweep_home \gset
CREATE DATABASE regress_fencing_sweep_args;
\c regress_fencing_sweep_args
SET client_min_messages = warning;
CREATE EXTENSION fencing;
CREATE ROLE regress_sweep_app;
GRANT USAGE ON SCHEMA fencing TO regress_sweep_app;
SET statement_timeout = '60s';
\i sql/include/sweep.sql

-- valid values; "%F" becomes the function's name, so each function has
-- lease names of its own, per role
CREATE TEMP TABLE sw_base (argname text, typ regtype, variant int, expr text,
						   card int);
INSERT INTO sw_base (argname, typ, variant, expr) VALUES
	(NULL, 'text', 1, $$'sw_' || current_user || '_%F'$$),
	('holder', 'text', 1, $$'sw_holder'$$),
	('candidate', 'text', 1, $$'sw_holder'$$),
	(NULL, 'bigint', 1, $$1$$),
	(NULL, 'bigint', 2, $$coalesce((SELECT max(s.token) FROM fencing.lease_status AS s WHERE s.name = 'sw_' || current_user || '_%F'), 1)$$),
	(NULL, 'integer', 1, $$2$$),
	(NULL, 'interval', 1, $$'10 s'$$),
	('wait', 'interval', 1, $$'0'$$),
	('older_than', 'interval', 1, $$'1 day'$$),
	(NULL, 'boolean', 1, $$false$$),
	(NULL, 'text[]', 1, $$'{}'$$),
	(NULL, 'text[]', 2, $$ARRAY['sw_' || current_user || '_%F']$$),
	(NULL, 'bigint[]', 1, $$'{}'$$),
	(NULL, 'bigint[]', 2, $$ARRAY[coalesce((SELECT max(s.token) FROM fencing.lease_status AS s WHERE s.name = 'sw_' || current_user || '_%F'), 1)]$$);
-- how many elements an array value has: a value of an array argument is
-- judged against the variants whose baseline has as many (group keepalive
-- wants as many names as tokens)
UPDATE sw_base SET card = variant - 1 WHERE typ::text LIKE '%[]';

-- hostile values by type
CREATE TEMP TABLE sw_val (typ regtype, label text, expr text, card int,
						  ord serial, PRIMARY KEY (typ, label));
INSERT INTO sw_val (typ, label, expr) VALUES
	('text', 'NULL', $$NULL$$),
	('text', 'empty', $$''$$),
	('text', 'space', $$' '$$),
	('text', 'tab', $$E'\t'$$),
	('text', 'a x256', $$repeat('a', 256)$$),
	('text', 'a x257', $$repeat('a', 257)$$),
	('text', 'é x128 (256 bytes)', $$repeat(U&'\00E9', 128)$$),
	('text', 'é x129 (258 bytes)', $$repeat(U&'\00E9', 129)$$),
	('text', '100000 chars', $$repeat('x', 100000)$$),
	('text', 'control char', $$'a' || chr(1) || 'b'$$),
	('text', 'DEL', $$chr(127)$$),
	('text', 'U+FFFD', $$U&'\FFFD'$$),
	('text', 'zero width', $$U&'a\200Bb'$$),
	('text', 'NFC café', $$U&'caf\00E9'$$),
	('text', 'NFD café', $$U&'cafe\0301'$$),
	('text', 'emoji', $$U&'\+01F600'$$),
	('text', 'quote', $$'a''b'$$),
	('text', 'backslash', $$E'\\'$$),
	('bigint', 'NULL', $$NULL$$),
	('bigint', '0', $$0$$),
	('bigint', '-1', $$-1$$),
	('bigint', '1', $$1$$),
	('bigint', 'min', $$'-9223372036854775808'$$),
	('bigint', 'max', $$9223372036854775807$$),
	('bigint', 'max-1', $$9223372036854775806$$),
	('integer', 'NULL', $$NULL$$),
	('integer', '0', $$0$$),
	('integer', '-1', $$-1$$),
	('integer', '1', $$1$$),
	('integer', '1000', $$1000$$),
	('integer', '1001', $$1001$$),
	('integer', 'min', $$'-2147483648'$$),
	('integer', 'max', $$2147483647$$),
	('interval', 'NULL', $$NULL$$),
	('interval', '0', $$'0'$$),
	('interval', '-1 s', $$'-1 s'$$),
	('interval', '-1 us', $$'-1 microsecond'$$),
	('interval', '1 us', $$'1 microsecond'$$),
	('interval', '1 day', $$'1 day'$$),
	('interval', '1 day 1 us', $$'1 day 1 microsecond'$$),
	('interval', '1 mon', $$'1 mon'$$),
	('interval', '1 mon -29 days', $$'1 mon -29 days'$$),
	('interval', '-1 mon 31 days', $$'-1 mon 31 days'$$),
	('interval', '1 day -24 hours', $$'1 day -24 hours'$$),
	('interval', '178000000 years', $$'178000000 years'$$),
	('interval', '-178000000 years', $$'-178000000 years'$$),
	('interval', 'int max days', $$'2147483647 days'$$),
	('interval', 'int min days', $$'-2147483648 days'$$),
	('boolean', 'NULL', $$NULL$$),
	('boolean', 'true', $$true$$),
	('text[]', 'NULL', $$NULL$$),
	('text[]', 'empty', $$'{}'$$),
	('text[]', '{NULL}', $$'{NULL}'$$),
	('text[]', '2-D', $$'{{a},{b}}'$$),
	('text[]', 'lower bound 0', $$'[0:0]={x}'$$),
	('text[]', '{"",x}', $$'{"",x}'$$),
	('text[]', '{x,x}', $$'{x,x}'$$),
	('text[]', '10001 names', $$array_fill('x'::text, ARRAY[10001])$$),
	('bigint[]', 'NULL', $$NULL$$),
	('bigint[]', 'empty', $$'{}'$$),
	('bigint[]', '{NULL}', $$'{NULL}'$$),
	('bigint[]', '2-D', $$'{{1},{2}}'$$),
	('bigint[]', 'lower bound 0', $$'[0:0]={1}'$$),
	('bigint[]', '{0}', $$'{0}'$$),
	('bigint[]', '{-1}', $$'{-1}'$$),
	('bigint[]', '{1,1}', $$'{1,1}'$$),
	('bigint[]', '10001 tokens', $$array_fill(1::bigint, ARRAY[10001])$$);
DO $$
DECLARE
	v record;
	n int;
BEGIN
	FOR v IN SELECT * FROM pg_temp.sw_val WHERE typ::text LIKE '%[]' AND label <> 'NULL' LOOP
		EXECUTE format('SELECT cardinality((%s)::%s)', v.expr, v.typ) INTO n;
		UPDATE pg_temp.sw_val SET card = n WHERE typ = v.typ AND label = v.label;
	END LOOP;
END $$;
-- infinite intervals exist from PostgreSQL 17 on
DO $$
BEGIN
	PERFORM 'infinity'::interval;
	INSERT INTO pg_temp.sw_val (typ, label, expr) VALUES
		('interval', 'infinity', $i$'infinity'$i$),
		('interval', '-infinity', $i$'-infinity'$i$);
EXCEPTION WHEN invalid_datetime_format THEN
	NULL;
END $$;

-- R5: the documented verdicts, by argument name
CREATE TEMP TABLE sw_expect (argname text, label text, want text,
							 PRIMARY KEY (argname, label));
INSERT INTO sw_expect
SELECT a, l, w FROM (VALUES ('name'), ('holder'), ('election'), ('candidate')) AS n(a),
	(VALUES ('NULL', '22004'), ('empty', '22023'), ('a x256', 'ok'),
			('a x257', '22023'), ('é x128 (256 bytes)', 'ok'),
			('é x129 (258 bytes)', '22023'), ('100000 chars', '22023')) AS v(l, w);
INSERT INTO sw_expect VALUES
	('ttl', 'NULL', '22004'), ('ttl', '0', '22023'), ('ttl', '-1 s', '22023'),
	('ttl', '-1 us', '22023'), ('ttl', '1 us', 'ok'), ('ttl', '1 day', 'ok'),
	('ttl', '1 day 1 us', '22023'), ('ttl', '1 mon', '22023'),
	('ttl', '1 mon -29 days', 'ok'), ('ttl', '1 day -24 hours', '22023'),
	('ttl', '178000000 years', '22023'), ('ttl', '-178000000 years', '22023'),
	('ttl', 'infinity', '22023'), ('ttl', '-infinity', '22023'),
	('wait', 'NULL', '22004'), ('wait', '0', 'ok'), ('wait', '-1 s', '22023'),
	('wait', '-1 us', '22023'), ('wait', '1 day 1 us', '22023'),
	('wait', '178000000 years', '22023'), ('wait', 'infinity', '22023'),
	('wait', '-infinity', '22023'),
	('older_than', 'NULL', '22004'), ('older_than', '-1 s', '22023'),
	('older_than', '0', 'ok'), ('older_than', '178000000 years', 'ok'),
	('slots', 'NULL', '22004'), ('slots', '0', '22023'), ('slots', '-1', '22023'),
	('slots', '1001', '22023'), ('slots', 'min', '22023'), ('slots', 'max', '22023'),
	('slots', '1000', 'ok'), ('slots', '1', 'ok'),
	('token', 'NULL', '22004'), ('token', '0', '22023'), ('token', '-1', '22023'),
	('token', 'min', '22023'),
	('names', 'NULL', '22004'), ('names', '2-D', '22023'), ('names', '{NULL}', '22004'),
	('names', '10001 names', '22023'),
	('tokens', 'NULL', '22004'), ('tokens', '2-D', '22023'), ('tokens', '{NULL}', '22004'),
	('tokens', '{0}', '22023'), ('tokens', '{-1}', '22023'),
	('tokens', '10001 tokens', '22023'),
	('value', 'NULL', '22004'), ('value', 'empty', 'ok'),
	('value', '100000 chars', '22023'),
	('known_value', 'NULL', 'ok'), ('known_value', '100000 chars', '22023'),
	('known_token', 'NULL', 'ok');
-- R3's documented exceptions
CREATE TEMP TABLE sw_nullable (argname text PRIMARY KEY);
INSERT INTO sw_nullable VALUES ('fence'), ('known_token'), ('known_value');
-- R6: the functions that issue tokens
CREATE TEMP TABLE sw_issuers (fn text PRIMARY KEY);
INSERT INTO sw_issuers VALUES ('next_token'), ('lease_acquire'),
	('semaphore_acquire'), ('election_campaign'), ('advance_tokens');

-- the functions, and every combination of baselines of their arguments
CREATE TEMP TABLE sw_fn AS
SELECT p.oid AS fn, p.proname::text AS name,
	   format('%I.%I', n.nspname, p.proname) AS qname, p.pronargs AS nargs,
	   coalesce((SELECT array_agg(t::regtype ORDER BY i)
				   FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS u(t, i)),
				'{}') AS types,
	   coalesce(p.proargnames[1:p.pronargs], '{}') AS argnames
  FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
 WHERE n.nspname = 'fencing' AND p.prorettype <> 'trigger'::regtype;
CREATE TEMP TABLE sw_variant AS
WITH RECURSIVE arg AS (
	SELECT f.fn, i AS pos, f.types[i] AS typ, f.argnames[i] AS argname
	  FROM sw_fn AS f, generate_series(1, f.nargs) AS i),
base AS (
	SELECT a.fn, a.pos, b.expr, b.card
	  FROM arg AS a JOIN sw_base AS b ON b.typ = a.typ
	 WHERE b.argname = a.argname
		OR (b.argname IS NULL AND NOT EXISTS (
				SELECT FROM sw_base AS x WHERE x.typ = a.typ AND x.argname = a.argname))),
v (fn, pos, exprs, cards) AS (
	SELECT f.fn, 0, '{}'::text[], '{}'::int[] FROM sw_fn AS f
	UNION ALL
	SELECT v.fn, v.pos + 1, v.exprs || b.expr, v.cards || b.card
	  FROM v JOIN base AS b ON b.fn = v.fn AND b.pos = v.pos + 1)
SELECT v.fn, row_number() OVER (PARTITION BY v.fn ORDER BY v.exprs::text COLLATE "C") AS variant,
	   v.exprs, v.cards
  FROM v JOIN sw_fn AS f ON f.fn = v.fn AND v.pos = f.nargs;

-- every call: argno 0 is the baseline of a variant
CREATE TEMP TABLE sw_case (fn oid, name text, who text, variant bigint,
						   argno int, argname text, label text, q text,
						   result text, changes text[], msg text,
						   same_shape boolean);
CREATE FUNCTION pg_temp.sw_call(f sw_fn, exprs text[]) RETURNS text
LANGUAGE sql AS $$
	SELECT format('SELECT * FROM %s(%s)', f.qname,
				  coalesce(string_agg(replace(e, '%F', f.name) || '::' || f.types[i]::text,
									  ', ' ORDER BY i), ''))
	  FROM unnest(exprs) WITH ORDINALITY AS u(e, i)
$$;
DO $$
DECLARE
	f pg_temp.sw_fn;
	v record;
	h record;
	who text;
	q text;
	ex text[];
	r record;
BEGIN
	-- advance_tokens goes last: a floor near 2^63 uses up the token space
	FOR f IN SELECT * FROM pg_temp.sw_fn ORDER BY name = 'advance_tokens', name COLLATE "C" LOOP
		FOREACH who IN ARRAY ARRAY['regress_sweep_app', 'super'] LOOP
			-- a live lease (or leadership) of the function's own name, so
			-- that its token is current; an election's value is none of the
			-- values swept, so that an observer that knows the leader does
			-- not wait.  lease_watch's lease has expired, so that a watch of
			-- its token does not wait either.  semaphore_acquire sweeps a
			-- free name: a held one keeps its number of slots (LF021), and
			-- every count swept must be judged on its own.
			IF who <> 'super' THEN
				EXECUTE format('SET ROLE %I', who);
			END IF;
			IF f.name LIKE 'semaphore%' THEN
				NULL;
			ELSIF f.name LIKE 'election%' THEN
				PERFORM fencing.election_campaign('sw_' || current_user || '_' || f.name, 'sw_holder', 'sw_value', '1 day');
			ELSIF f.name = 'lease_watch' THEN
				PERFORM fencing.lease_acquire('sw_' || current_user || '_' || f.name, 'sw_holder', '1 microsecond');
			ELSE
				PERFORM fencing.lease_acquire('sw_' || current_user || '_' || f.name, 'sw_holder', '1 day');
			END IF;
			RESET ROLE;
			FOR v IN SELECT * FROM pg_temp.sw_variant WHERE fn = f.fn ORDER BY variant LOOP
				q := pg_temp.sw_call(f, v.exprs);
				r := pg_temp.sw_try(q, who);
				INSERT INTO pg_temp.sw_case VALUES (f.fn, f.name, who, v.variant, 0,
					NULL, 'baseline', q, r.result, r.changes, r.msg, true);
				FOR h IN SELECT a.i, f.argnames[a.i] AS argname, x.label, x.expr,
								x.card IS NULL OR v.cards[a.i] IS NULL OR
								x.card = v.cards[a.i] AS same_shape
						   FROM generate_series(1, f.nargs) AS a(i)
						   JOIN pg_temp.sw_val AS x ON x.typ = f.types[a.i]
						  ORDER BY a.i, x.ord LOOP
					ex := v.exprs;
					ex[h.i] := h.expr;
					q := pg_temp.sw_call(f, ex);
					r := pg_temp.sw_try(q, who);
					INSERT INTO pg_temp.sw_case VALUES (f.fn, f.name, who, v.variant,
						h.i, h.argname, h.label, q, r.result, r.changes, r.msg,
						h.same_shape);
				END LOOP;
			END LOOP;
		END LOOP;
	END LOOP;
END $$;

-- what was swept: per function and role, the calls and their results
-- (infinite intervals, from PostgreSQL 17 on, are swept but not counted
-- here, so that every version prints the same)
SELECT name, CASE who WHEN 'super' THEN 'superuser' ELSE 'app' END AS role,
	   sum(n) AS calls,
	   string_agg(result || ' ' || n, ', ' ORDER BY result COLLATE "C") AS results
  FROM (SELECT name, who, result, count(*) AS n FROM sw_case
		 WHERE label NOT LIKE '%infinity'
		 GROUP BY name, who, result) AS c
 GROUP BY name, who ORDER BY name COLLATE "C", who = 'super';

-- the violations
-- the variants whose baseline call was accepted
CREATE TEMP VIEW sw_ok_variant AS
	SELECT fn, who, variant FROM sw_case WHERE argno = 0 AND result = 'ok';
CREATE TEMP VIEW sw_violation AS
SELECT 'R1 undocumented SQLSTATE' AS rule, c.name, c.who, c.argname, c.label,
	   c.result || ': ' || c.msg AS detail
  FROM sw_case AS c
 WHERE c.result <> 'ok' AND c.result NOT IN (SELECT code FROM sw_documented)
UNION ALL
SELECT 'R2 failed, changed ' || array_to_string(c.changes, ', '), c.name, c.who,
	   c.argname, c.label, c.result
  FROM sw_case AS c
 WHERE c.result <> 'ok' AND c.changes <> '{}'
UNION ALL
SELECT 'R3 NULL not refused with 22004', c.name, c.who, c.argname, c.label,
	   c.result
  FROM sw_case AS c
 WHERE c.label = 'NULL' AND c.argname NOT IN (SELECT argname FROM sw_nullable)
   AND c.result <> '22004'
   AND NOT (c.who <> 'super' AND c.result = '42501')
UNION ALL
SELECT 'R4 verdict depends on the other arguments', c.name, c.who,
	   c.argname, c.label, string_agg(DISTINCT c.result, ' or ')
  FROM sw_case AS c JOIN sw_ok_variant AS o USING (fn, who, variant)
 WHERE c.argno > 0 AND c.same_shape
 GROUP BY c.fn, c.name, c.who, c.argno, c.argname, c.label
HAVING bool_or(c.result IN ('22004', '22023', '0A000'))
   AND bool_or(c.result = 'ok')
UNION ALL
SELECT DISTINCT 'R5 documented limit not kept (want ' || e.want || ')', c.name,
	   c.who, c.argname, c.label, c.result
  FROM sw_case AS c JOIN sw_ok_variant AS o USING (fn, who, variant)
  JOIN sw_expect AS e ON e.argname = c.argname AND e.label = c.label
 WHERE c.same_shape AND c.result <> e.want
   AND NOT (e.want = 'ok' AND c.result NOT IN ('22004', '22023', '0A000'))
UNION ALL
SELECT 'R6 moved the band', c.name, c.who, c.argname, c.label, c.result
  FROM sw_case AS c
 WHERE c.name <> 'advance_tokens'
   AND c.changes && (SELECT array_agg(rel) FROM sw_band)
UNION ALL
SELECT 'R6 spent a token', c.name, c.who, c.argname, c.label, c.result
  FROM sw_case AS c
 WHERE c.result = 'ok' AND c.name NOT IN (SELECT fn FROM sw_issuers)
   AND 'fencing.token_seq' = ANY (c.changes);
SELECT rule, name, CASE who WHEN 'super' THEN 'superuser' ELSE 'app' END AS role,
	   argname, string_agg(DISTINCT detail, '; ') AS result,
	   string_agg(label, ', ' ORDER BY label COLLATE "C") AS "values"
  FROM sw_violation
 WHERE NOT (label LIKE '%infinity' AND rule ~ '^R[45]')
 GROUP BY rule, name, who, argname
 ORDER BY rule COLLATE "C", name COLLATE "C", who = 'super', argname COLLATE "C";

\c :sweep_home
DROP DATABASE regress_fencing_sweep_args;
DROP ROLE regress_sweep_app;
