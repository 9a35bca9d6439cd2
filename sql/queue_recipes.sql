--
-- The recipes for River, Oban, Solid Queue and pgmq (examples/queues/),
-- whose clients cannot run here: each queue's tables as its migrations
-- make them, and its claim, rescue and completion statements as it runs
-- them.  For each: A claims, freezes past the queue's rescue, the job is
-- rescued and claimed again by B; A's completion (and failure, and any
-- other end) is refused with LF001, B's is accepted.  Tokens are shown
-- relative to the first one this file takes (T0).
--
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE TEMP TABLE base AS SELECT fencing.next_token() AS t0;
\i sql/include/queue_try.sql
-- run q with fencing.token declared as t (SET LOCAL), in a subtransaction
CREATE FUNCTION pg_temp.as_delivery(t bigint, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	PERFORM set_config('fencing.token', t::text, true);
	r := pg_temp.try(q);
	PERFORM set_config('fencing.token', '', true);
	RETURN r;
END $$;

-- ---- River -------------------------------------------------------------
\i examples/queues/river/schema.sql
\i examples/queues/river/install.sql
INSERT INTO river_job (kind) VALUES ('email');
-- JobGetAvailable, as client A
WITH locked_jobs AS (
	SELECT id FROM river_job
	 WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE river_job SET state = 'running', attempt = river_job.attempt + 1,
	   attempted_at = now(), attempted_by = array_append(river_job.attempted_by, 'A')
  FROM locked_jobs WHERE river_job.id = locked_jobs.id
RETURNING river_job.id AS job, fencing_token AS t_a \gset
-- A freezes; an hour later (attempted_at aged) JobGetStuck finds the job
-- and JobRescueMany makes it retryable, JobSchedule available again
UPDATE river_job SET attempted_at = now() - interval '61 minutes' WHERE id = :job;
SELECT id FROM river_job WHERE state = 'running' AND attempted_at < now() - interval '1 hour' ORDER BY id;
SELECT pg_temp.try($$UPDATE river_job SET errors = array_append(errors, '{"error": "Stuck job rescued by Rescuer"}'::jsonb),
	finalized_at = NULL, scheduled_at = now(), state = 'retryable'
  FROM (SELECT unnest(ARRAY[1]::bigint[]) AS id) AS updated_job WHERE river_job.id = updated_job.id$$) AS rescue;
UPDATE river_job SET state = 'available' WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= now();
-- JobGetAvailable, as client B
WITH locked_jobs AS (
	SELECT id FROM river_job
	 WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE river_job SET state = 'running', attempt = river_job.attempt + 1,
	   attempted_at = now(), attempted_by = array_append(river_job.attempted_by, 'B')
  FROM locked_jobs WHERE river_job.id = locked_jobs.id
RETURNING fencing_token AS t_b \gset
SELECT :t_b > :t_a AS newer_claim;
-- A wakes: JobCompleteTx, and the completer's JobSetStateIfRunning for an
-- error, each with A's token: refused
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET finalized_at = now(), state = 'completed' WHERE id = 1 AND state = 'running'$$) AS a_completes;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET state = 'retryable', errors = array_append(errors, '{"error": "A failed"}'::jsonb), scheduled_at = now() WHERE id = 1 AND state = 'running'$$) AS a_errors;
-- without its token the completer is refused too
SELECT pg_temp.try($$UPDATE river_job SET finalized_at = now(), state = 'completed' WHERE id = 1 AND state = 'running'$$) AS tokenless;
-- B completes
SELECT pg_temp.as_delivery(:t_b, $$UPDATE river_job SET finalized_at = now(), state = 'completed' WHERE id = 1 AND state = 'running'$$) AS b_completes;
SELECT id, state, attempt, attempted_by, fencing_token = :t_b AS stamped_by_b, array_length(errors, 1) AS errors FROM river_job;

-- ---- Oban --------------------------------------------------------------
\i examples/queues/oban/schema.sql
\i examples/queues/oban/install.sql
INSERT INTO oban_jobs (worker, args) VALUES ('MyApp.Mailer', '{"to": "a@example.com"}');
-- fetch_jobs, as node A
WITH subset AS MATERIALIZED (
	SELECT id FROM oban_jobs WHERE state = 'available' AND queue = 'default'
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE oban_jobs AS j SET state = 'executing', attempted_at = timezone('UTC', now()),
	   attempted_by = ARRAY['node-a', 'uuid-a'], attempt = j.attempt + 1
  FROM subset WHERE j.id = subset.id AND j.attempt < j.max_attempts
RETURNING j.id AS job, j.fencing_token AS t_a \gset
-- A freezes for over an hour; Lifeline rescues the job
UPDATE oban_jobs SET attempted_at = attempted_at - interval '61 minutes' WHERE id = :job;
SELECT pg_temp.try($$UPDATE oban_jobs SET state = CASE WHEN attempt >= max_attempts THEN 'discarded'::oban_job_state ELSE 'available' END
	WHERE state = 'executing' AND attempted_at < timezone('UTC', now()) - interval '60 minutes'$$) AS lifeline;
-- fetch_jobs, as node B
WITH subset AS MATERIALIZED (
	SELECT id FROM oban_jobs WHERE state = 'available' AND queue = 'default'
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE oban_jobs AS j SET state = 'executing', attempted_at = timezone('UTC', now()),
	   attempted_by = ARRAY['node-b', 'uuid-b'], attempt = j.attempt + 1
  FROM subset WHERE j.id = subset.id AND j.attempt < j.max_attempts
RETURNING j.fencing_token AS t_b \gset
SELECT :t_b > :t_a AS newer_claim;
-- A wakes: complete_job, error_job, discard_job, all by id alone: refused
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = 1$$) AS a_completes;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "A failed"}') WHERE id = 1$$) AS a_errors;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'discarded', discarded_at = timezone('UTC', now()) WHERE id = 1$$) AS a_discards;
-- B completes
SELECT pg_temp.as_delivery(:t_b, $$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = 1$$) AS b_completes;
SELECT id, state, attempt, attempted_by, fencing_token = :t_b AS stamped_by_b FROM oban_jobs;
-- the control: without the guard, A's late error_job (by id alone, no
-- state check) turns B's completed job back into a retryable one
ALTER TABLE oban_jobs DISABLE TRIGGER fencing_complete;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "A failed"}') WHERE id = 1$$) AS a_errors_unguarded;
SELECT id, state FROM oban_jobs;
ALTER TABLE oban_jobs ENABLE TRIGGER fencing_complete;

-- ---- Solid Queue -------------------------------------------------------
\i examples/queues/solid_queue/schema.sql
\i examples/queues/solid_queue/install.sql
INSERT INTO solid_queue_processes (kind, pid, name) VALUES ('Worker', 101, 'worker-a'), ('Worker', 102, 'worker-b');
INSERT INTO solid_queue_jobs (queue_name, class_name) VALUES ('default', 'MailerJob');
INSERT INTO solid_queue_ready_executions (job_id, queue_name) SELECT id, queue_name FROM solid_queue_jobs;
-- ReadyExecution.claim for process 1 (A): lock ready rows, insert the
-- claimed executions, delete the ready ones
WITH ready AS (
	DELETE FROM solid_queue_ready_executions
	 WHERE id IN (SELECT id FROM solid_queue_ready_executions WHERE queue_name = 'default'
				  ORDER BY priority, job_id LIMIT 1 FOR UPDATE SKIP LOCKED)
	RETURNING job_id)
INSERT INTO solid_queue_claimed_executions (job_id, process_id) SELECT job_id, 1 FROM ready
RETURNING job_id AS job, fencing_token AS t_a \gset
-- A stops heartbeating; the supervisor prunes process 1 and releases its
-- claims (ClaimedExecution#release: dispatch again, destroy the claim)
UPDATE solid_queue_processes SET last_heartbeat_at = now() - interval '10 minutes' WHERE id = 1;
BEGIN;
INSERT INTO solid_queue_ready_executions (job_id, queue_name, priority)
	SELECT j.id, j.queue_name, j.priority FROM solid_queue_jobs AS j
	  JOIN solid_queue_claimed_executions AS c ON c.job_id = j.id WHERE c.process_id = 1;
SELECT pg_temp.try($$DELETE FROM solid_queue_claimed_executions WHERE process_id = 1$$) AS release;
DELETE FROM solid_queue_processes WHERE id = 1 AND last_heartbeat_at < now() - interval '5 minutes';
COMMIT;
-- claimed again, by process 2 (B)
WITH ready AS (
	DELETE FROM solid_queue_ready_executions
	 WHERE id IN (SELECT id FROM solid_queue_ready_executions WHERE queue_name = 'default'
				  ORDER BY priority, job_id LIMIT 1 FOR UPDATE SKIP LOCKED)
	RETURNING job_id)
INSERT INTO solid_queue_claimed_executions (job_id, process_id) SELECT job_id, 2 FROM ready
RETURNING fencing_token AS t_b \gset
SELECT :t_b > :t_a AS newer_claim;
-- A wakes and finishes: destroy its claim (by job), mark the job finished,
-- in one transaction: refused at the claim, so the job is not finished
SELECT pg_temp.as_delivery(:t_a, $$WITH claim AS (DELETE FROM solid_queue_claimed_executions WHERE job_id = 1 RETURNING job_id)
	UPDATE solid_queue_jobs SET finished_at = now(), updated_at = now() WHERE id IN (SELECT job_id FROM claim) RETURNING id$$) AS a_finishes;
SELECT pg_temp.as_delivery(:t_a, $$WITH claim AS (DELETE FROM solid_queue_claimed_executions WHERE job_id = 1 RETURNING job_id)
	INSERT INTO solid_queue_failed_executions (job_id, error) SELECT job_id, 'A failed' FROM claim RETURNING job_id$$) AS a_fails;
-- B finishes
SELECT pg_temp.as_delivery(:t_b, $$WITH claim AS (DELETE FROM solid_queue_claimed_executions WHERE job_id = 1 RETURNING job_id)
	UPDATE solid_queue_jobs SET finished_at = now(), updated_at = now() WHERE id IN (SELECT job_id FROM claim) RETURNING id$$) AS b_finishes;
SELECT id, finished_at IS NOT NULL AS finished,
	   (SELECT count(*) FROM solid_queue_claimed_executions) AS claims,
	   (SELECT count(*) FROM solid_queue_failed_executions) AS failures
  FROM solid_queue_jobs;

-- ---- pgmq --------------------------------------------------------------
\i examples/queues/pgmq/schema.sql
\i examples/queues/pgmq/install.sql
-- pgmq.send('jobs', '{"task": 1}')
INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp(), '{"task": 1}') RETURNING msg_id AS msg \gset
-- pgmq.read('jobs', vt, 1) as reader A, whose visibility timeout (0 s
-- here) lapses before it is done
WITH cte AS (
	SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp()
	 ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp() + interval '0 seconds', read_ct = read_ct + 1
  FROM cte WHERE m.msg_id = cte.msg_id
RETURNING m.read_ct, (m.message->>'fencing_token')::bigint AS t_a \gset
-- read again by B, with 30 s
WITH cte AS (
	SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp()
	 ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp() + interval '30 seconds', read_ct = read_ct + 1
  FROM cte WHERE m.msg_id = cte.msg_id
RETURNING m.read_ct, (m.message->>'fencing_token')::bigint AS t_b \gset
SELECT :t_b > :t_a AS newer_claim, :read_ct AS read_ct;
-- A wakes: set_vt, delete, archive, each by msg_id: refused
SELECT pg_temp.as_delivery(:t_a, $$UPDATE pgmq.q_jobs SET vt = clock_timestamp() + interval '60 seconds' WHERE msg_id = 1 RETURNING msg_id$$) AS a_set_vt;
SELECT pg_temp.as_delivery(:t_a, $$DELETE FROM pgmq.q_jobs WHERE msg_id = 1 RETURNING msg_id$$) AS a_deletes;
SELECT pg_temp.as_delivery(:t_a, $$WITH archived AS (DELETE FROM pgmq.q_jobs WHERE msg_id = ANY (ARRAY[1]::bigint[]) RETURNING msg_id, vt, read_ct, enqueued_at, message)
	INSERT INTO pgmq.a_jobs (msg_id, vt, read_ct, enqueued_at, message) SELECT msg_id, vt, read_ct, enqueued_at, message FROM archived RETURNING msg_id$$) AS a_archives;
-- without a token: refused (LF004)
SELECT pg_temp.try($$DELETE FROM pgmq.q_jobs WHERE msg_id = 1 RETURNING msg_id$$) AS tokenless;
-- B archives it
SELECT pg_temp.as_delivery(:t_b, $$WITH archived AS (DELETE FROM pgmq.q_jobs WHERE msg_id = ANY (ARRAY[1]::bigint[]) RETURNING msg_id, vt, read_ct, enqueued_at, message)
	INSERT INTO pgmq.a_jobs (msg_id, vt, read_ct, enqueued_at, message) SELECT msg_id, vt, read_ct, enqueued_at, message FROM archived RETURNING msg_id$$) AS b_archives;
SELECT (SELECT count(*) FROM pgmq.q_jobs) AS queued, msg_id, read_ct, (message->>'fencing_token')::bigint = :t_b AS stamped_by_b FROM pgmq.a_jobs;

DROP TABLE river_job, oban_jobs, solid_queue_failed_executions, solid_queue_claimed_executions,
	solid_queue_ready_executions, solid_queue_processes, solid_queue_jobs;
DROP TYPE river_job_state, oban_job_state;
DROP SCHEMA pgmq CASCADE;
