--
-- fencing.claim_stamp and fencing.claim_guard misused.  A trigger is
-- checked when it fires: a wrong number of arguments, a trigger that is
-- not BEFORE ... FOR EACH ROW, claim_stamp on DELETE and a direct call are
-- 39P01; an unknown option or an empty key 22023; a missing column 42703;
-- a column of the wrong type 42804.  Each refusal changes nothing: not
-- the row, not the token counter (pg_temp.resource() is the table).
--
\i sql/include/case_harness.sql
SET client_min_messages = warning;
CREATE TABLE bi_claim (id int PRIMARY KEY, state text, tok bigint, small int,
                       doc jsonb, note text);
INSERT INTO bi_claim VALUES (1, 'ready', NULL, NULL, '{}', NULL);
GRANT ALL ON bi_claim TO PUBLIC;
CREATE OR REPLACE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql AS $$ SELECT string_agg(b::text, ';' ORDER BY b.id) FROM public.bi_claim AS b $$;
CREATE FUNCTION pg_temp.attach(fn text, args text, timing text DEFAULT 'BEFORE',
                               events text DEFAULT 'INSERT OR UPDATE OR DELETE',
                               level text DEFAULT 'ROW')
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	DROP TRIGGER IF EXISTS t ON bi_claim;
	EXECUTE format('CREATE TRIGGER t %s %s ON bi_claim FOR EACH %s EXECUTE FUNCTION fencing.%s(%s)',
				   timing, events, level, fn, args);
END $$;

-- claim_stamp
SELECT pg_temp.attach('claim_stamp', '', 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'tok', 'doc'$$, 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'nosuch'$$, 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'small'$$, 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'note->k'$$, 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'doc'$$, 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'doc->'$$, 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'->k'$$, 'BEFORE', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'tok'$$, 'AFTER', 'INSERT OR UPDATE');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'tok'$$, 'BEFORE', 'INSERT OR UPDATE', 'STATEMENT');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'claimed'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_stamp', $$'tok'$$, 'BEFORE', 'DELETE');
SELECT q, r.* FROM (VALUES ($$DELETE FROM bi_claim$$)) AS v(q), LATERAL pg_temp.run(q) AS r;

-- claim_guard (the row is stamped first, by hand, with the trigger off)
DROP TRIGGER t ON bi_claim;
UPDATE bi_claim SET tok = 7, doc = '{"t": "7"}';
SELECT pg_temp.attach('claim_guard', '');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'done'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'tok', '', 'allow_unfenced', 'x'$$);
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'done'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'tok', '', 'ALLOW_UNFENCED'$$);
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'done'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'tok', 'nosuch->k'$$);
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'done'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'tok', 'note'$$);
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'done'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'doc'$$);
SELECT q, r.* FROM (VALUES ($$DELETE FROM bi_claim$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'tok'$$, 'AFTER');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'done'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'tok'$$, 'BEFORE', 'UPDATE', 'STATEMENT');
SELECT q, r.* FROM (VALUES ($$UPDATE bi_claim SET state = 'done'$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
-- a bad token in the delivery place, or a negative stamp: 22023 ("007"
-- is token 7, the stamp: accepted)
SELECT pg_temp.attach('claim_guard', $$'doc->t', 'doc->d'$$);
SELECT q, r.* FROM (VALUES
	($$UPDATE bi_claim SET state = 'done', doc = doc || '{"d": "0"}'$$),
	($$UPDATE bi_claim SET state = 'done', doc = doc || '{"d": "007"}'$$),
	($$UPDATE bi_claim SET state = 'done', doc = doc || '{"d": " 7"}'$$),
	($$UPDATE bi_claim SET state = 'done', doc = doc || '{"d": "9223372036854775808"}'$$),
	($$UPDATE bi_claim SET state = 'done', doc = doc || '{"d": true}'$$),
	($$UPDATE bi_claim SET state = 'done', doc = doc || '{"d": {"x": 1}}'$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.attach('claim_guard', $$'tok'$$);
ALTER TABLE bi_claim DISABLE TRIGGER t;
UPDATE bi_claim SET tok = -1;
ALTER TABLE bi_claim ENABLE TRIGGER t;
SELECT q, r.* FROM (VALUES ($$DELETE FROM bi_claim$$)) AS v(q), LATERAL pg_temp.run(q) AS r;
-- a bad fencing.token is refused by SET itself
SELECT q, r.* FROM (VALUES
	($$SELECT set_config('fencing.token', 'abc', true)$$),
	($$SELECT set_config('fencing.token', '-7', true)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- called directly
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.claim_stamp()$$),
	($$SELECT fencing.claim_guard()$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

SELECT * FROM bi_claim;
DROP TABLE bi_claim;
