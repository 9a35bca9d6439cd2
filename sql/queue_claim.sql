--
-- fencing.claim_stamp and fencing.claim_guard: a token bound to each claim
-- by the queue's own claim statement, and completions refused unless they
-- bring that token.  Tokens are shown relative to the first one this file
-- takes (T0), since earlier files spend tokens too.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never
CREATE TEMP TABLE base AS SELECT fencing.next_token() AS t0;
\i sql/include/refusals.sql
\i sql/include/queue_try.sql

-- A queue in the shape most of them share: a state, an attempt counter,
-- and a bigint column for the stamp.
CREATE TABLE q_jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'available',
                     attempt int NOT NULL DEFAULT 0, fencing_token bigint,
                     result text);
CREATE TRIGGER fencing_claim BEFORE UPDATE ON q_jobs FOR EACH ROW
    WHEN (NEW.attempt > OLD.attempt)
    EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_guard BEFORE UPDATE ON q_jobs FOR EACH ROW
    WHEN (NEW.state IN ('completed', 'retryable', 'discarded') AND NEW.attempt = OLD.attempt)
    EXECUTE FUNCTION fencing.claim_guard('fencing_token');
INSERT INTO q_jobs (id) VALUES (1), (2);

-- claim: the row gets a fresh token, returned by the claim itself
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'running', attempt = attempt + 1 WHERE id = 1 RETURNING fencing_token$$) AS claim_a;
-- the claim cannot choose its token: what it writes is overwritten
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'running', attempt = attempt + 1, fencing_token = 9000000000000000000 WHERE id = 2 RETURNING fencing_token$$) AS claim_chooses;
-- rescue (back to available, no new attempt: no stamp, no guard) and re-claim
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'available' WHERE id = 1 RETURNING fencing_token$$) AS rescue;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'running', attempt = attempt + 1 WHERE id = 1 RETURNING fencing_token$$) AS claim_b;

-- the first delivery (T1) completes: stale, LF001, both tokens in the message
BEGIN;
SELECT set_config('fencing.token', (SELECT t0 + 1 FROM pg_temp.base)::text, true) IS NOT NULL AS declared;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed', result = 'by A' WHERE id = 1$$) AS stale_complete;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'retryable', result = 'A failed' WHERE id = 1$$) AS stale_fail;
COMMIT;
-- no token at all: LF004
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed', result = 'by nobody' WHERE id = 1$$) AS no_token;
-- a token newer than the claim's (any role can take one): LF010
BEGIN;
SELECT set_config('fencing.token', fencing.next_token()::text, true) IS NOT NULL AS declared;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed', result = 'by a forger' WHERE id = 1$$) AS newer_token;
COMMIT;
-- the live delivery (T3) completes: accepted
BEGIN;
SELECT set_config('fencing.token', (SELECT fencing_token FROM q_jobs WHERE id = 1)::text, true) IS NOT NULL AS declared;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed', result = 'by B' WHERE id = 1$$) AS live_complete;
COMMIT;
SELECT id, state, attempt, pg_temp.rel(fencing_token::text) AS stamp, result FROM q_jobs ORDER BY id;

-- a completion that moves the stamp: LF012
BEGIN;
SELECT set_config('fencing.token', (SELECT fencing_token FROM q_jobs WHERE id = 2)::text, true) IS NOT NULL AS declared;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed', fencing_token = fencing_token - 1 WHERE id = 2$$) AS rewind;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed', fencing_token = NULL WHERE id = 2$$) AS erase;
COMMIT;
-- a row never claimed with a stamp (claimed before the trigger existed): LF011
INSERT INTO q_jobs (id, state, attempt) VALUES (3, 'running', 1);
BEGIN;
SET LOCAL fencing.token = '5';
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed' WHERE id = 3$$) AS unstamped;
COMMIT;
-- writes the guard's WHEN does not name pass untouched
SELECT pg_temp.try($$UPDATE q_jobs SET result = 'note' WHERE id = 3$$) AS other_write;

-- A jsonb stamp, a delivery token in a jsonb result, and a failure that
-- re-inserts the row (pg-boss's shape): the guard reads both places.
CREATE TABLE q_boss (id int, state text NOT NULL DEFAULT 'created',
                     data jsonb, output jsonb);
CREATE TRIGGER fencing_claim BEFORE UPDATE ON q_boss FOR EACH ROW
    WHEN (NEW.state = 'active' AND OLD.state <> 'active')
    EXECUTE FUNCTION fencing.claim_stamp('data->fencing_token');
CREATE TRIGGER fencing_complete BEFORE UPDATE ON q_boss FOR EACH ROW
    WHEN (NEW.state = 'completed')
    EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
CREATE TRIGGER fencing_fail BEFORE INSERT ON q_boss FOR EACH ROW
    WHEN (NEW.state IN ('retry', 'failed'))
    EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
INSERT INTO q_boss (id, data) VALUES (1, '{"n": 1}'), (2, NULL), (3, '[1]');
SELECT pg_temp.try($$UPDATE q_boss SET state = 'active' WHERE id = 1 RETURNING data$$) AS claim_a;
SELECT pg_temp.try($$UPDATE q_boss SET state = 'active' WHERE id = 2 RETURNING data$$) AS claim_null_data;
SELECT pg_temp.try($$UPDATE q_boss SET state = 'active' WHERE id = 3 RETURNING data$$) AS claim_array_data;
-- expiry: delete and re-insert as retry (no delivery token: maintenance
-- is the queue's own, so its WHEN would exclude it; here it is refused)
SELECT pg_temp.try($$WITH d AS (DELETE FROM q_boss WHERE id = 1 RETURNING *) INSERT INTO q_boss SELECT id, 'retry', data, '{"value": "timeout"}' FROM d RETURNING state$$) AS expire_unfenced;
ALTER TABLE q_boss DISABLE TRIGGER fencing_fail;
SELECT pg_temp.try($$WITH d AS (DELETE FROM q_boss WHERE id = 1 RETURNING *) INSERT INTO q_boss SELECT id, 'retry', data, '{"value": "timeout"}' FROM d RETURNING state$$) AS expire;
ALTER TABLE q_boss ENABLE TRIGGER fencing_fail;
SELECT pg_temp.try($$UPDATE q_boss SET state = 'active' WHERE id = 1 RETURNING data$$) AS claim_b;
-- A (token T5, a JSON string as stamped) fails: the re-insert is refused
SELECT pg_temp.try(format($$WITH d AS (DELETE FROM q_boss WHERE id = 1 RETURNING *) INSERT INTO q_boss SELECT id, 'retry', data, %L FROM d RETURNING state$$,
    jsonb_build_object('message', 'A failed', 'fencing_token', ((SELECT t0 FROM pg_temp.base) + 5)::text))) AS stale_fail;
-- A completes, with the token as a JSON number: refused
SELECT pg_temp.try(format($$UPDATE q_boss SET state = 'completed', output = %L WHERE id = 1$$,
    jsonb_build_object('fencing_token', (SELECT t0 FROM pg_temp.base) + 5))) AS stale_complete;
-- B completes: accepted
SELECT pg_temp.try($$UPDATE q_boss SET state = 'completed', output = jsonb_build_object('fencing_token', data->'fencing_token', 'value', 'by B') WHERE id = 1$$) AS live_complete;
-- malformed delivery tokens: 22023, nothing written
SELECT pg_temp.try($$UPDATE q_boss SET state = 'completed', output = '{"fencing_token": "12abc"}' WHERE id = 2$$) AS bad_string;
SELECT pg_temp.try($$UPDATE q_boss SET state = 'completed', output = '{"fencing_token": 1.5}' WHERE id = 2$$) AS bad_number;
SELECT pg_temp.try($$UPDATE q_boss SET state = 'completed', output = '{"fencing_token": -3}' WHERE id = 2$$) AS negative;
SELECT pg_temp.try($$UPDATE q_boss SET state = 'completed', output = '{"fencing_token": [1]}' WHERE id = 2$$) AS not_scalar;
-- a JSON null or a missing key is no token; then fencing.token counts
SELECT pg_temp.try($$UPDATE q_boss SET state = 'completed', output = '{"fencing_token": null}' WHERE id = 2$$) AS json_null;
BEGIN;
SELECT set_config('fencing.token', (SELECT data->>'fencing_token' FROM q_boss WHERE id = 2), true) IS NOT NULL AS declared;
SELECT pg_temp.try($$UPDATE q_boss SET state = 'completed', output = '{"value": 2}' WHERE id = 2$$) AS declared_complete;
COMMIT;
SELECT id, state, pg_temp.rel(data::text) AS data, pg_temp.rel(output::text) AS output FROM q_boss ORDER BY id;

-- Deletes as completion (graphile-worker's shape), 'allow_unfenced', and
-- a stamp on INSERT (Solid Queue claims by inserting a row).
CREATE TABLE q_claims (id int PRIMARY KEY, job int UNIQUE, fencing_token bigint);
CREATE TRIGGER fencing_claim BEFORE INSERT ON q_claims FOR EACH ROW
    EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_guard BEFORE DELETE ON q_claims FOR EACH ROW
    EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
SELECT pg_temp.try($$INSERT INTO q_claims VALUES (1, 10, 1) RETURNING fencing_token$$) AS insert_claim;
BEGIN;
SET LOCAL fencing.token = '1';
SELECT pg_temp.try($$DELETE FROM q_claims WHERE id = 1$$) AS stale_delete;
COMMIT;
BEGIN;
SELECT set_config('fencing.token', (SELECT fencing_token FROM q_claims WHERE id = 1)::text, true) IS NOT NULL AS declared;
SELECT pg_temp.try($$DELETE FROM q_claims WHERE id = 1 RETURNING job$$) AS live_delete;
ROLLBACK;
-- allow_unfenced: a delete with no token passes (an operator's cleanup)
SELECT pg_temp.try($$DELETE FROM q_claims WHERE id = 1$$) AS unfenced_delete;

-- One guard for every write, beside the claim: 'allow_unfenced' and no
-- WHEN clause.  The claim passes it, also with a stale token declared (a
-- claim is not a delivery's write); any write that brings a token is
-- checked, whatever the row's state; a write with no token passes; no
-- write moves the stamp, and a jsonb column written whole keeps it.
CREATE TABLE q_any (id int PRIMARY KEY, state text NOT NULL DEFAULT 'available',
                    attempt int NOT NULL DEFAULT 0, meta jsonb, output jsonb);
CREATE TRIGGER fencing_claim BEFORE UPDATE OF attempt ON q_any FOR EACH ROW
    WHEN (NEW.attempt > OLD.attempt)
    EXECUTE FUNCTION fencing.claim_stamp('meta->fencing_token');
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON q_any FOR EACH ROW
    EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token', 'output->fencing_token', 'allow_unfenced');
INSERT INTO q_any (id, meta) VALUES (1, '{}'), (2, NULL), (3, '{"n": 3}');
SELECT pg_temp.try($$INSERT INTO q_any (id, meta) VALUES (4, '[4]')$$) AS insert_array;
SELECT pg_temp.try($$UPDATE q_any SET state = 'running', attempt = attempt + 1 WHERE id = 1 RETURNING meta->>'fencing_token'$$) AS claim_a;
SELECT meta->>'fencing_token' AS a_token FROM q_any WHERE id = 1 \gset
BEGIN;
SET LOCAL fencing.token = '1';
SELECT pg_temp.try($$UPDATE q_any SET state = 'running', attempt = attempt + 1 WHERE id = 1 RETURNING meta->>'fencing_token'$$) AS claim_b_token_declared;
COMMIT;
-- B ends the job with its token in the output (the delivery place)
SELECT pg_temp.try($$UPDATE q_any SET state = 'done', output = jsonb_build_object('fencing_token', meta->'fencing_token') WHERE id = 1$$) AS b_done;
-- a later write that does not write the output is not B's: its token is
-- the declared one, and with none it passes
SELECT pg_temp.try($$UPDATE q_any SET state = 'archived' WHERE id = 1$$) AS tokenless_after;
-- A brings its token after B's end, in the output or declared: refused,
-- as an UPDATE or a DELETE
SELECT pg_temp.try(format($$UPDATE q_any SET output = '{"fencing_token": %s}' WHERE id = 1$$, :'a_token')) AS a_output_after;
BEGIN;
SELECT set_config('fencing.token', :'a_token', true) IS NOT NULL AS declared;
SELECT pg_temp.try($$UPDATE q_any SET state = 'done by A' WHERE id = 1$$) AS a_update_after;
SELECT pg_temp.try($$DELETE FROM q_any WHERE id = 1$$) AS a_delete_after;
-- a row never claimed: LF011
SELECT pg_temp.try($$UPDATE q_any SET state = 'x' WHERE id = 3$$) AS unclaimed;
-- an INSERT is a new row: a token declared for the transaction does not
-- apply to it
SELECT pg_temp.try($$INSERT INTO q_any (id) VALUES (5) RETURNING id$$) AS insert_with_token_declared;
COMMIT;
-- the stamp: meta written whole without it keeps it; another value, or a
-- value where none was, is refused; a value that could not hold it too
SELECT pg_temp.try($$UPDATE q_any SET meta = '{"note": 1}' WHERE id = 1 RETURNING meta::text$$) AS meta_replaced;
SELECT pg_temp.try($$UPDATE q_any SET meta = meta - 'fencing_token' WHERE id = 1 RETURNING meta::text$$) AS key_removed;
SELECT pg_temp.try($$UPDATE q_any SET meta = NULL WHERE id = 1 RETURNING meta::text$$) AS meta_null;
SELECT pg_temp.try(format($$UPDATE q_any SET meta = '{"fencing_token": "%s"}' WHERE id = 1$$, :'a_token')) AS stamp_rewound;
SELECT pg_temp.try($$UPDATE q_any SET meta = '{"fencing_token": "9000000000000000000"}' WHERE id = 3$$) AS stamp_forged;
SELECT pg_temp.try($$UPDATE q_any SET meta = '[1]' WHERE id = 1$$) AS meta_array;
SELECT pg_temp.try($$UPDATE q_any SET meta = '"s"' WHERE id = 3$$) AS unclaimed_meta_scalar;
-- a tokenless DELETE passes
SELECT pg_temp.try($$DELETE FROM q_any WHERE id = 2$$) AS tokenless_delete;
SELECT id, state, attempt, pg_temp.rel(meta::text) AS meta, pg_temp.rel(output::text) AS output FROM q_any ORDER BY id;

-- claim_stamp fires first: triggers of one kind fire in name order, and a
-- guard that sorts before the claim would take the claim for a
-- delivery's write.  The first claim says so (39P01) and changes nothing.
CREATE TABLE q_order (id int PRIMARY KEY, attempt int NOT NULL DEFAULT 0, tok bigint);
CREATE TRIGGER b_claim BEFORE UPDATE ON q_order FOR EACH ROW
    WHEN (NEW.attempt > OLD.attempt)
    EXECUTE FUNCTION fencing.claim_stamp('tok');
CREATE TRIGGER a_guard BEFORE UPDATE ON q_order FOR EACH ROW
    EXECUTE FUNCTION fencing.claim_guard('tok', '', 'allow_unfenced');
INSERT INTO q_order VALUES (1, 0, NULL);
SELECT pg_temp.try($$UPDATE q_order SET attempt = attempt + 1 RETURNING tok$$) AS claim_guard_first;
DROP TRIGGER a_guard ON q_order;
CREATE TRIGGER c_guard BEFORE UPDATE ON q_order FOR EACH ROW
    EXECUTE FUNCTION fencing.claim_guard('tok', '', 'allow_unfenced');
SELECT pg_temp.try($$UPDATE q_order SET attempt = attempt + 1 RETURNING tok IS NOT NULL$$) AS claim_stamp_first;

-- Durability with synchronous_commit = off: a claim moves the stamp, so
-- its WAL is flushed before COMMIT returns; a delivery keeps the stamp and
-- is as durable as synchronous_commit says (lost in a crash, the row is
-- still claimed by the same token).
INSERT INTO q_jobs (id) VALUES (4);
SET synchronous_commit = off;
BEGIN;
UPDATE q_jobs SET state = 'running', attempt = attempt + 1 WHERE id = 4;
SELECT pg_current_wal_insert_lsn() AS claim_lsn \gset
COMMIT;
SELECT pg_current_wal_flush_lsn() >= :'claim_lsn' AS claim_flushed_at_commit;
BEGIN;
SELECT set_config('fencing.token', (SELECT fencing_token FROM q_jobs WHERE id = 4)::text, true) IS NOT NULL AS declared;
SELECT pg_temp.try($$UPDATE q_jobs SET state = 'completed', result = 'async' WHERE id = 4$$) AS async_complete;
COMMIT;
RESET synchronous_commit;

-- every refusal above was counted as a refusal of claim_guard
SELECT pg_temp.refusals_counted(0, 0, 15) AS refusals_counted;
DROP TABLE q_jobs, q_boss, q_claims, q_any, q_order;
