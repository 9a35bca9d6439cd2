--
-- Security: no role can forge or rewind a claim stamp.
--
-- A worker role may run the queue's statements (claim, complete) and has
-- column privileges for exactly the columns those statements write; the
-- stamp column is not among them.  The stamp is still written on its
-- claims (a trigger's change to NEW is not a column the statement names),
-- but the worker cannot write the stamp itself, cannot make claim_stamp
-- write a token of its choosing, cannot complete with a token it took
-- from next_token(), a stale one, or one it declares, cannot drop or
-- disable the triggers, and cannot call the trigger functions directly.
--
\i sql/include/case_harness.sql
CREATE ROLE regress_sec_claim NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_sec_claim;
CREATE TABLE sec_jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'available',
                       attempt int NOT NULL DEFAULT 0, fencing_token bigint,
                       data jsonb NOT NULL DEFAULT '{}', output jsonb);
CREATE TRIGGER fencing_claim BEFORE UPDATE ON sec_jobs FOR EACH ROW
    WHEN (NEW.attempt > OLD.attempt)
    EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_claim_data BEFORE UPDATE ON sec_jobs FOR EACH ROW
    WHEN (NEW.attempt > OLD.attempt)
    EXECUTE FUNCTION fencing.claim_stamp('data->fencing_token');
CREATE TRIGGER fencing_guard BEFORE UPDATE ON sec_jobs FOR EACH ROW
    WHEN (NEW.state IN ('completed', 'failed') AND NEW.attempt = OLD.attempt)
    EXECUTE FUNCTION fencing.claim_guard('fencing_token', 'output->fencing_token');
GRANT SELECT, UPDATE (state, attempt, output) ON sec_jobs TO regress_sec_claim;
INSERT INTO sec_jobs (id) VALUES (1);
CREATE OR REPLACE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
	SELECT string_agg(format('%s %s %s', j.id, j.state, j.attempt), ';' ORDER BY j.id)
	  FROM public.sec_jobs AS j $$;
GRANT EXECUTE ON FUNCTION pg_temp.resource() TO PUBLIC;

SET ROLE regress_sec_claim;
-- the worker claims, through the queue's statement: the row is stamped
UPDATE sec_jobs SET state = 'running', attempt = attempt + 1 WHERE id = 1
    RETURNING fencing_token AS t_a, (data->>'fencing_token')::bigint > fencing_token AS data_later \gset
-- each trigger draws its own token, in trigger-name order
SELECT :'data_later' AS data_stamp_drawn_second;
-- writing the stamp directly: column privileges refuse it (42501)
SELECT q, r.* FROM (VALUES
	($$UPDATE sec_jobs SET fencing_token = 9223372036854775000 WHERE id = 1$$),
	($$UPDATE sec_jobs SET fencing_token = 1 WHERE id = 1$$),
	($$UPDATE sec_jobs SET data = '{"fencing_token": "1"}' WHERE id = 1$$),
	($$UPDATE sec_jobs SET state = 'completed', fencing_token = fencing_token WHERE id = 1$$),
	($$INSERT INTO sec_jobs (id, state, fencing_token) VALUES (2, 'running', 5)$$),
	($$DELETE FROM sec_jobs$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- the triggers: only the table's owner may drop or disable them (42501)
SELECT q, r.* FROM (VALUES
	($$ALTER TABLE sec_jobs DISABLE TRIGGER fencing_guard$$),
	($$DROP TRIGGER fencing_guard ON sec_jobs$$),
	($$ALTER TABLE sec_jobs DISABLE TRIGGER ALL$$),
	($$SET session_replication_role = replica$$),
	($$SELECT fencing.claim_stamp()$$),
	($$SELECT fencing.claim_guard()$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
-- the job is rescued and claimed again (by the queue's own maintenance)
UPDATE sec_jobs SET state = 'available' WHERE id = 1;
UPDATE sec_jobs SET state = 'running', attempt = attempt + 1 WHERE id = 1
    RETURNING fencing_token AS t_b \gset
SET ROLE regress_sec_claim;
SELECT :t_b > :t_a AS newer_claim;
-- completing with the first claim's token, a token of its own, or a
-- declared one: refused, and nothing changes (LF001, LF010)
SELECT fencing.next_token() AS t_own \gset
SELECT r.result ~ '^LF001: ' AS stale_refused, r.changes FROM pg_temp.run(format(
	$$UPDATE sec_jobs SET state = 'completed', output = '{"fencing_token": %s}' WHERE id = 1$$, :t_a)) AS r;
SELECT r.result ~ '^LF010: ' AS own_refused, r.changes FROM pg_temp.run(format(
	$$UPDATE sec_jobs SET state = 'completed', output = '{"fencing_token": %s}' WHERE id = 1$$, :t_own)) AS r;
BEGIN;
SELECT set_config('fencing.token', :'t_own', true) IS NOT NULL AS declared;
SELECT r.result ~ '^LF010: ' AS declared_refused, r.changes FROM pg_temp.run(
	$$UPDATE sec_jobs SET state = 'failed' WHERE id = 1$$) AS r;
COMMIT;
-- a claim by the worker cannot carry a token it chose, and every claim
-- moves the stamp forward
SELECT r.result, r.changes FROM pg_temp.run(
	$$UPDATE sec_jobs SET state = 'running', attempt = attempt + 1, output = '{"fencing_token": 1}' WHERE id = 1$$) AS r;
SELECT fencing_token > :t_own AS claim_moves_forward, (data->>'fencing_token')::bigint > fencing_token AS data_stamp_drawn_second
  FROM sec_jobs WHERE id = 1;
RESET ROLE;
SELECT n, result ~ '^(ok|42501|39P01|LF001|LF010)' AS expected, changes FROM pg_temp.cases ORDER BY n;
SELECT id, state, attempt FROM sec_jobs;
DROP TABLE sec_jobs;
DROP OWNED BY regress_sec_claim;
DROP ROLE regress_sec_claim;
