--
-- claim_guard and a delivery place that the write names but leaves as it
-- was.  A MERGE's updated columns are those of all its UPDATE actions, and
-- a full-row update sends back what it read: either can name the delivery
-- place while the row keeps the token an earlier write left there.  That
-- token is not the write's: a stale one is refused as before, the stamp
-- itself proves nothing (the write then brings the declared token, or
-- none), as fence_guard judges its fence by value.  Tokens are shown
-- relative to the first one this file takes (T0).
--
\set VERBOSITY terse
\set SHOW_CONTEXT never
CREATE TEMP TABLE base AS SELECT fencing.next_token() AS t0;
\i sql/include/queue_try.sql

CREATE TABLE m_jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
                     tok bigint, result jsonb);
CREATE TRIGGER fencing_claim BEFORE UPDATE OF state ON m_jobs FOR EACH ROW
    WHEN (NEW.state = 'running' AND OLD.state <> 'running')
    EXECUTE FUNCTION fencing.claim_stamp('tok');
CREATE TRIGGER fencing_end BEFORE UPDATE ON m_jobs FOR EACH ROW
    WHEN (NEW.state IN ('done', 'failed'))
    EXECUTE FUNCTION fencing.claim_guard('tok', 'result->token');
INSERT INTO m_jobs (id) VALUES (1);

-- A claims (T1); rescued; B claims (T2) and records its token in the result
SELECT pg_temp.try($$UPDATE m_jobs SET state = 'running' WHERE id = 1 RETURNING tok$$) AS claim_a;
SELECT pg_temp.try($$UPDATE m_jobs SET state = 'ready' WHERE id = 1 RETURNING tok$$) AS rescue;
SELECT pg_temp.try($$UPDATE m_jobs SET state = 'running' WHERE id = 1 RETURNING tok$$) AS claim_b;
SELECT pg_temp.try(format($$UPDATE m_jobs SET result = jsonb_build_object('token', %s::text) WHERE id = 1$$,
                          (SELECT t0 + 2 FROM pg_temp.base))) AS b_progress;

-- stale A, declaring T1, fails the job with a MERGE whose other action
-- writes the result: the taken action leaves B's T2 there.  LF001.
BEGIN;
SELECT set_config('fencing.token', (SELECT t0 + 1 FROM pg_temp.base)::text, true) IS NOT NULL AS declared_t1;
SELECT pg_temp.try($$MERGE INTO m_jobs j USING (VALUES (1, false)) v(id, ok) ON j.id = v.id
    WHEN MATCHED AND v.ok THEN UPDATE SET state = 'done', result = '{"token": "1"}'
    WHEN MATCHED THEN UPDATE SET state = 'failed'$$) AS stale_merge_declared;
COMMIT;
-- the same MERGE with nothing declared: no token, LF004
SELECT pg_temp.try($$MERGE INTO m_jobs j USING (VALUES (1, false)) v(id, ok) ON j.id = v.id
    WHEN MATCHED AND v.ok THEN UPDATE SET state = 'done', result = '{"token": "1"}'
    WHEN MATCHED THEN UPDATE SET state = 'failed'$$) AS stale_merge_undeclared;
-- a full-row update sending back the result it read: no token, LF004
SELECT pg_temp.try($$UPDATE m_jobs AS j SET state = 'failed', result = r.result
    FROM (SELECT id, result FROM m_jobs) r WHERE j.id = r.id AND j.id = 1$$) AS sent_back;
-- the row is untouched
SELECT pg_temp.rel(format('%s %s %s', state, tok, result->>'token')) AS row_after FROM m_jobs;

-- a stale token sent back as it was is still judged by it: LF001
UPDATE m_jobs SET result = jsonb_build_object('token', (SELECT t0 + 1 FROM pg_temp.base)::text);
SELECT pg_temp.try($$UPDATE m_jobs SET state = 'failed', result = result WHERE id = 1$$) AS stale_sent_back;

-- B's token sent back re-encoded (read as the string "T2", written as the
-- number, as a client that parses and serializes the JSON does) is still
-- the token that was there, not the write's: no token, LF004 (before
-- issue 30: taken for B's, and the stale write accepted)
UPDATE m_jobs SET result = jsonb_build_object('token', (SELECT t0 + 2 FROM pg_temp.base)::text);
SELECT pg_temp.try($$UPDATE m_jobs SET state = 'failed',
    result = jsonb_set(result, '{token}', to_jsonb((result->>'token')::bigint))
    WHERE id = 1$$) AS reencoded;

-- B, declaring T2, with the same MERGE: accepted, and so is B's own
-- result written with its token (declared: the place already holds it)
BEGIN;
SELECT set_config('fencing.token', (SELECT t0 + 2 FROM pg_temp.base)::text, true) IS NOT NULL AS declared_t2;
SELECT pg_temp.try($$MERGE INTO m_jobs j USING (VALUES (1, false)) v(id, ok) ON j.id = v.id
    WHEN MATCHED AND v.ok THEN UPDATE SET state = 'done', result = '{"token": "1"}'
    WHEN MATCHED THEN UPDATE SET state = 'failed'$$) AS b_merge_declared;
ROLLBACK;
BEGIN;
SELECT set_config('fencing.token', (SELECT t0 + 2 FROM pg_temp.base)::text, true) IS NOT NULL AS declared_t2;
SELECT pg_temp.try(format($$UPDATE m_jobs SET state = 'done', result = jsonb_build_object('token', %s, 'v', 42) WHERE id = 1$$,
                          (SELECT t0 + 2 FROM pg_temp.base))) AS b_done;
COMMIT;
SELECT pg_temp.rel(format('%s %s %s', state, tok, result)) AS row_done FROM m_jobs;
