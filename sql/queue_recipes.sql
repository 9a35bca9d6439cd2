--
-- The transition audit of the recipes for River, Oban, Solid Queue, pgmq,
-- pg-boss 12 and graphile-worker 0.18 (examples/queues/, docs/queues.md):
-- each queue's tables as its migrations make them (cut down to the columns
-- its statements touch), each recipe exactly as shipped, and each
-- statement the queue and its worker library run against the job row or
-- its claim, as upstream has it (the commit is in each schema.sql), run
-- with a stale delivery's token.  For each queue: A claims, freezes past
-- the queue's rescue, the job is rescued and claimed again by B; A's
-- heartbeat, completion and every other end are refused (LF001), or are
-- shown harmless; B's are accepted.  The issue-31 reproductions and the
-- red team's (a stale write after the newer delivery ended its run, a
-- rewound stamp, a tokenless hand-back, the liveness traps) are here too,
-- each refused, with a control that runs the same statement with the
-- recipe's guards off (pg_temp.without_guards) and shows that it lands.
-- Tokens are shown relative to the first one this file takes (T0).
--
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE TEMP TABLE base AS SELECT fencing.next_token() AS t0;
\i sql/include/queue_try.sql
-- run q with fencing.token declared as t (SET LOCAL; none if t is NULL),
-- in a subtransaction
CREATE FUNCTION pg_temp.as_delivery(t bigint, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	PERFORM set_config('fencing.token', coalesce(t::text, ''), true);
	r := pg_temp.try(q);
	PERFORM set_config('fencing.token', '', true);
	RETURN r;
END $$;
-- the negative control: q as pg_temp.as_delivery runs it, on tbl (and its
-- partitions) with every fencing_ trigger but the claim's disabled, then
-- the probe query's row; all rolled back
CREATE FUNCTION pg_temp.without_guards(tbl regclass, t bigint, q text, probe text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
	p text;
	g record;
BEGIN
	BEGIN
		FOR g IN SELECT tgrelid::regclass AS rel, tgname FROM pg_trigger
				  WHERE (tgrelid = tbl OR tgrelid IN (SELECT relid FROM pg_partition_tree(tbl)))
					AND tgname LIKE 'fencing\_%' AND tgname <> 'fencing_claim'
				  ORDER BY tgrelid, tgname LOOP
			EXECUTE format('ALTER TABLE %s DISABLE TRIGGER %I', g.rel, g.tgname);
		END LOOP;
		r := pg_temp.as_delivery(t, q);
		EXECUTE probe INTO p;
		RAISE EXCEPTION 'rolled back' USING DETAIL = r || ' => ' || coalesce(p, 'no row');
	EXCEPTION WHEN raise_exception THEN
		GET STACKED DIAGNOSTICS r = PG_EXCEPTION_DETAIL;
		RETURN pg_temp.rel(r);
	END;
END $$;

-- ---- River -------------------------------------------------------------
\i examples/queues/river/schema.sql
\i examples/queues/river/install.sql
INSERT INTO river_job (kind) VALUES ('email');
-- a job whose metadata could not be stamped is refused at insert
SELECT pg_temp.try($$INSERT INTO river_job (kind, metadata) VALUES ('email', '[1]')$$) AS insert_array_metadata;
-- JobGetAvailable, as client A
WITH locked_jobs AS (
	SELECT id FROM river_job
	 WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE river_job SET state = 'running', attempt = river_job.attempt + 1,
	   attempted_at = now(), attempted_by = array_append(river_job.attempted_by, 'A')
  FROM locked_jobs WHERE river_job.id = locked_jobs.id
RETURNING river_job.id AS job, (metadata->>'fencing_token')::bigint AS t_a \gset
-- A heartbeats (the recipe's statement), with progress in metadata
SELECT pg_temp.as_delivery(:t_a, $$WITH u AS (UPDATE river_job SET attempted_at = now(), metadata = metadata || '{"progress": 10}' WHERE id = 1 AND state = 'running' RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$) AS a_heartbeat_live;
-- A freezes; an hour later (attempted_at aged) JobGetStuck finds the job
-- and JobRescueMany makes it retryable (no token: past the horizon), and
-- JobSchedule available again
-- (an hour passes: the test ages the row with the triggers off)
ALTER TABLE river_job DISABLE TRIGGER USER;
UPDATE river_job SET attempted_at = now() - interval '61 minutes' WHERE id = :job;
ALTER TABLE river_job ENABLE TRIGGER USER;
SELECT id FROM river_job WHERE state = 'running' AND id > 0 AND attempted_at < now() - interval '1 hour' ORDER BY id LIMIT 100;
SELECT pg_temp.try($$UPDATE river_job SET errors = array_append(errors, '{"error": "Stuck job rescued by Rescuer"}'::jsonb),
	finalized_at = updated_job.finalized_at, scheduled_at = updated_job.scheduled_at,
	metadata = river_job.metadata || jsonb_build_object('river:rescue_count', 1), state = updated_job.state
  FROM (SELECT unnest(ARRAY[1]::bigint[]) AS id, NULL::timestamptz AS finalized_at, now() AS scheduled_at,
			   'retryable'::river_job_state AS state) AS updated_job WHERE river_job.id = updated_job.id$$) AS rescue;
UPDATE river_job SET state = 'available' WHERE state IN ('retryable', 'scheduled') AND scheduled_at <= now();
-- JobGetAvailable, as client B
WITH locked_jobs AS (
	SELECT id FROM river_job
	 WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE river_job SET state = 'running', attempt = river_job.attempt + 1,
	   attempted_at = now(), attempted_by = array_append(river_job.attempted_by, 'B')
  FROM locked_jobs WHERE river_job.id = locked_jobs.id
RETURNING (metadata->>'fencing_token')::bigint AS t_b \gset
SELECT :t_b > :t_a AS newer_claim;
-- A wakes.  Its heartbeat, JobCompleteTx, and JobSetStateIfRunningMany as
-- the completer sends it for an error, a snooze (attempt - 1, River's
-- jobRow.Attempt - 1 of A's own row), a cancel and a discard: refused
SELECT pg_temp.as_delivery(:t_a, $$WITH u AS (UPDATE river_job SET attempted_at = now(), metadata = metadata || '{"progress": 50}' WHERE id = 1 AND state = 'running' RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$) AS a_heartbeat;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET finalized_at = now(), state = 'completed' WHERE id = 1 AND state = 'running'$$) AS a_completes;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET state = 'retryable', errors = array_append(errors, '{"error": "A failed"}'::jsonb), scheduled_at = now() WHERE id = 1 AND state = 'running'$$) AS a_errors;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET state = 'scheduled', attempt = 0, scheduled_at = now() + interval '1 minute' WHERE id = 1 AND state = 'running'$$) AS a_snoozes;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET state = 'cancelled', finalized_at = now() WHERE id = 1 AND state = 'running'$$) AS a_cancels;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE id = 1 AND state = 'running'$$) AS a_discards;
-- without a token the completer's end of a live job is refused too (LF004)
SELECT pg_temp.try($$UPDATE river_job SET finalized_at = now(), state = 'completed' WHERE id = 1 AND state = 'running'$$) AS tokenless;
-- an operator's JobCancel of a running job only marks it (metadata): passes
SELECT pg_temp.try($$UPDATE river_job SET metadata = jsonb_set(metadata, '{cancel_attempted_at}', '"2026-01-01T00:00:00Z"', true) WHERE id = 1 AND state NOT IN ('cancelled', 'completed', 'discarded')$$) AS operator_cancel;
-- JobUpdate (JobUpdateTx, and ResumableSetStepTx, which checks only the
-- in-memory job.State), run in A's own transaction after its SET LOCAL:
-- it merges A's step and output into the metadata of B's run (red team
-- H6); refused, whatever the state.  The control: without the guards it
-- lands, and B's next attempt would skip a step only A did
SELECT pg_temp.as_delivery(:t_a, $$WITH locked_job AS (SELECT id FROM river_job WHERE river_job.id = 1 FOR UPDATE)
	UPDATE river_job SET metadata = CASE WHEN true THEN metadata || '{"river:resumable_step": "step3", "output": {"by": "A"}}'::jsonb ELSE metadata END
	  FROM locked_job WHERE river_job.id = locked_job.id RETURNING river_job.state$$) AS a_job_update;
SELECT pg_temp.without_guards('river_job', :t_a, $$WITH locked_job AS (SELECT id FROM river_job WHERE river_job.id = 1 FOR UPDATE)
	UPDATE river_job SET metadata = CASE WHEN true THEN metadata || '{"river:resumable_step": "step3", "output": {"by": "A"}}'::jsonb ELSE metadata END
	  FROM locked_job WHERE river_job.id = locked_job.id RETURNING river_job.state$$,
	$$SELECT state || ', step ' || (metadata->>'river:resumable_step') FROM river_job WHERE id = 1$$) AS a_job_update_unguarded;
-- metadata written whole without the stamp (a write River does not make,
-- here an operator's): the stamp stays; with another stamp in it: LF012
SELECT pg_temp.try($$UPDATE river_job SET metadata = '{"note": "ops"}' WHERE id = 1 RETURNING metadata::text$$) AS operator_replaces_metadata;
SELECT pg_temp.try(format($$UPDATE river_job SET metadata = '{"fencing_token": "%s"}' WHERE id = 1$$, :t_a)) AS rewind_stamp;
-- JobDelete and JobRetry leave running jobs alone (their own state check)
SELECT pg_temp.try($$DELETE FROM river_job WHERE id = 1 AND state != 'running'$$) AS operator_delete;
SELECT pg_temp.try($$UPDATE river_job SET state = 'available', finalized_at = NULL WHERE id = 1 AND state != 'running'$$) AS operator_retry;
-- B heartbeats and completes
SELECT pg_temp.as_delivery(:t_b, $$WITH u AS (UPDATE river_job SET attempted_at = now(), metadata = metadata || '{"progress": 90}' WHERE id = 1 AND state = 'running' RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$) AS b_heartbeat;
SELECT pg_temp.as_delivery(:t_b, $$UPDATE river_job SET finalized_at = now(), state = 'completed' WHERE id = 1 AND state = 'running'$$) AS b_completes;
SELECT id, state, attempt, attempted_by, (metadata->>'fencing_token')::bigint = :t_b AS stamped_by_b,
	   metadata->'progress' AS progress, array_length(errors, 1) AS errors FROM river_job WHERE id = 1;
-- A's late heartbeat on the completed job: no row (LF003), A stops
SELECT pg_temp.as_delivery(:t_a, $$WITH u AS (UPDATE river_job SET attempted_at = now() WHERE id = 1 AND state = 'running' RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$) AS a_heartbeat_after;
-- A's JobUpdate after B completed: refused
SELECT pg_temp.as_delivery(:t_a, $$UPDATE river_job SET metadata = metadata || '{"output": {"by": "A"}}' WHERE id = 1 RETURNING state$$) AS a_job_update_after;
-- the control: without the recipe's guards A's snooze lands on B's
-- running job (River's state check passes: the job is running again)
ALTER TABLE river_job DISABLE TRIGGER USER;
UPDATE river_job SET state = 'running', finalized_at = NULL WHERE id = 1;
ALTER TABLE river_job ENABLE TRIGGER USER;
SELECT pg_temp.without_guards('river_job', :t_a, $$UPDATE river_job SET state = 'scheduled', attempt = 0, scheduled_at = now() + interval '1 minute' WHERE id = 1 AND state = 'running'$$,
	$$SELECT state || ', attempt ' || attempt FROM river_job WHERE id = 1$$) AS a_snoozes_unguarded;

-- ---- Oban --------------------------------------------------------------
\i examples/queues/oban/schema.sql
\i examples/queues/oban/install.sql
INSERT INTO oban_jobs (worker, args) VALUES ('MyApp.Mailer', '{"to": "a@example.com"}');
-- fetch_jobs, as node A (attempted_at from the node's utc_now())
WITH subset AS MATERIALIZED (
	SELECT id FROM oban_jobs WHERE state = 'available' AND queue = 'default'
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE oban_jobs AS j SET state = 'executing', attempted_at = timezone('UTC', now()),
	   attempted_by = ARRAY['node-a', 'uuid-a'], attempt = j.attempt + 1
  FROM subset WHERE j.id = subset.id AND j.attempt < j.max_attempts
RETURNING j.id AS job, (j.meta->>'fencing_token')::bigint AS t_a, j.meta AS meta_a \gset
-- A freezes for over an hour; Lifeline rescues the job (no token)
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET attempted_at = attempted_at - interval '61 minutes' WHERE id = :job;
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try($$UPDATE oban_jobs SET state = 'available'
	WHERE state = 'executing' AND attempted_at < timezone('UTC', now()) - interval '60 minutes' AND attempt < max_attempts$$) AS lifeline;
-- fetch_jobs, as node B
WITH subset AS MATERIALIZED (
	SELECT id FROM oban_jobs WHERE state = 'available' AND queue = 'default'
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE oban_jobs AS j SET state = 'executing', attempted_at = timezone('UTC', now()),
	   attempted_by = ARRAY['node-b', 'uuid-b'], attempt = j.attempt + 1
  FROM subset WHERE j.id = subset.id AND j.attempt < j.max_attempts
RETURNING (j.meta->>'fencing_token')::bigint AS t_b, j.meta AS meta_b \gset
SELECT :t_b > :t_a AS newer_claim;
-- A wakes: its heartbeat, complete_job, error_job, discard_job, cancel_job
-- (with an error), and snooze_job (issue 31: state 'scheduled', attempt -
-- 1, meta as A's job struct has it): all by id alone, refused
SELECT pg_temp.as_delivery(:t_a, $$WITH u AS (UPDATE oban_jobs SET attempted_at = timezone('UTC', now()), meta = meta || '{"progress": 50}' WHERE id = 1 AND state = 'executing' RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$) AS a_heartbeat;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = 1$$) AS a_completes;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "A failed"}') WHERE id = 1$$) AS a_errors;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'discarded', discarded_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "A gave up"}') WHERE id = 1$$) AS a_discards;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'cancelled', cancelled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "A cancels"}') WHERE id = 1$$) AS a_cancels;
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE oban_jobs SET state = 'scheduled', scheduled_at = timezone('UTC', now()) + interval '5 seconds', meta = %L::jsonb || '{"snoozed": 1}', attempt = attempt - 1 WHERE id = 1$$, :'meta_a')) AS a_snoozes;
-- an operator's cancel_all_jobs carries no token and passes; here on
-- another job, and Lifeline's discard of a job past its attempts
INSERT INTO oban_jobs (worker, state) VALUES ('MyApp.Other', 'available');
SELECT pg_temp.try($$UPDATE oban_jobs AS j SET state = 'cancelled', cancelled_at = timezone('UTC', now()) FROM (SELECT id FROM oban_jobs WHERE state NOT IN ('cancelled', 'completed', 'discarded') AND id = 2) AS x WHERE j.id = x.id$$) AS operator_cancel;
-- update_job from stale A (red team H3): Oban's progress pattern,
-- Oban.update_job(job, fn j -> %{meta: Map.put(j.meta, "progress", 50)} end)
-- (lib/oban.ex runs the fun on the caller's struct, basic.ex locks the
-- row and writes the fields that changed): meta written whole, with A's
-- stamp in it.  Through the wrapping engine (A's token declared): LF001;
-- with no token: the stamp would move back to A's, LF012.  The control:
-- without the guards it lands, and the stamp is A's again
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE oban_jobs SET meta = %L::jsonb || '{"progress": 50}' WHERE id IN (SELECT id FROM oban_jobs WHERE id = 1 FOR UPDATE SKIP LOCKED)$$, :'meta_a')) AS a_update_job;
SELECT pg_temp.as_delivery(NULL, format($$UPDATE oban_jobs SET meta = %L::jsonb || '{"progress": 50}' WHERE id IN (SELECT id FROM oban_jobs WHERE id = 1 FOR UPDATE SKIP LOCKED)$$, :'meta_a')) AS a_update_job_tokenless;
SELECT pg_temp.without_guards('oban_jobs', :t_a, format($$UPDATE oban_jobs SET meta = %L::jsonb || '{"progress": 50}' WHERE id IN (SELECT id FROM oban_jobs WHERE id = 1 FOR UPDATE SKIP LOCKED)$$, :'meta_a'),
	$$SELECT 'stamp ' || (meta->>'fencing_token') FROM oban_jobs WHERE id = 1$$) AS a_update_job_unguarded;
-- an operator's Oban.update_job(id, %{meta: %{batch_id: 456}}) on the
-- executing job (red team M3): meta written whole without the stamp; the
-- stamp stays, so B keeps its claim
SELECT pg_temp.try($$UPDATE oban_jobs SET meta = '{"batch_id": 456}' WHERE id = 1 RETURNING meta::text$$) AS operator_update_job;
-- B snoozes (snooze_job: meta from B's struct, attempt - 1); A's snooze
-- after it is a move into the same state (red team H4): refused.  The
-- control: without the guards the stamp goes back to A's, the attempt
-- down to 0, and scheduled_at to A's hour
SELECT pg_temp.as_delivery(:t_b, format($$UPDATE oban_jobs SET state = 'scheduled', scheduled_at = timezone('UTC', now()) + interval '60 seconds', meta = %L::jsonb || '{"snoozed": 1}', attempt = attempt - 1 WHERE id = 1$$, :'meta_b')) AS b_snoozes;
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE oban_jobs SET state = 'scheduled', scheduled_at = timezone('UTC', now()) + interval '1 hour', meta = %L::jsonb || '{"snoozed": 1}', attempt = attempt - 1 WHERE id = 1$$, :'meta_a')) AS a_snoozes_after_b;
SELECT pg_temp.without_guards('oban_jobs', :t_a, format($$UPDATE oban_jobs SET state = 'scheduled', scheduled_at = timezone('UTC', now()) + interval '1 hour', meta = %L::jsonb || '{"snoozed": 1}', attempt = attempt - 1 WHERE id = 1$$, :'meta_a'),
	$$SELECT state || ', attempt ' || attempt || ', stamp ' || (meta->>'fencing_token') || ', in an hour: ' || (scheduled_at > timezone('UTC', now()) + interval '30 minutes') FROM oban_jobs WHERE id = 1$$) AS a_snoozes_after_b_unguarded;
-- stage_jobs makes it available; node C fetches it, errors (retryable);
-- A's error_job after it (retryable -> retryable): refused; the control
-- appends A's error
SELECT pg_temp.try($$UPDATE oban_jobs SET state = 'available' WHERE id = 1 AND state IN ('scheduled', 'retryable')$$) AS stage_jobs;
WITH subset AS MATERIALIZED (
	SELECT id FROM oban_jobs WHERE state = 'available' AND queue = 'default'
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE oban_jobs AS j SET state = 'executing', attempted_at = timezone('UTC', now()),
	   attempted_by = ARRAY['node-c', 'uuid-c'], attempt = j.attempt + 1
  FROM subset WHERE j.id = subset.id AND j.attempt < j.max_attempts
RETURNING (j.meta->>'fencing_token')::bigint AS t_c \gset
SELECT pg_temp.as_delivery(:t_c, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "C failed"}') WHERE id = 1$$) AS c_errors;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()) + interval '1 day', errors = array_append(errors, '{"error": "A failed"}') WHERE id = 1$$) AS a_errors_after_c;
SELECT pg_temp.without_guards('oban_jobs', :t_a, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()) + interval '1 day', errors = array_append(errors, '{"error": "A failed"}') WHERE id = 1$$,
	$$SELECT state || ', ' || array_length(errors, 1) || ' errors' FROM oban_jobs WHERE id = 1$$) AS a_errors_after_c_unguarded;
-- node D fetches it, heartbeats and completes; then A (from the last hour:
-- no exemption for a token) tries error_job on the completed job: refused
-- at every age (issue 31, 2), and so is its complete_job of it
SELECT pg_temp.try($$UPDATE oban_jobs SET state = 'available' WHERE id = 1 AND state IN ('scheduled', 'retryable')$$) AS stage_jobs;
WITH subset AS MATERIALIZED (
	SELECT id FROM oban_jobs WHERE state = 'available' AND queue = 'default'
	 ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE oban_jobs AS j SET state = 'executing', attempted_at = timezone('UTC', now()),
	   attempted_by = ARRAY['node-d', 'uuid-d'], attempt = j.attempt + 1
  FROM subset WHERE j.id = subset.id AND j.attempt < j.max_attempts
RETURNING (j.meta->>'fencing_token')::bigint AS t_d \gset
SELECT pg_temp.as_delivery(:t_d, $$WITH u AS (UPDATE oban_jobs SET attempted_at = timezone('UTC', now()), meta = meta || '{"progress": 90}' WHERE id = 1 AND state = 'executing' RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$) AS d_heartbeat;
SELECT pg_temp.as_delivery(:t_d, $$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = 1$$) AS d_completes;
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET attempted_at = attempted_at - interval '2 hours' WHERE id = 1;
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "A failed late"}') WHERE id = 1$$) AS a_errors_late;
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE oban_jobs SET state = 'scheduled', scheduled_at = timezone('UTC', now()), meta = %L::jsonb, attempt = attempt - 1 WHERE id = 1$$, :'meta_a')) AS a_snoozes_late;
SELECT pg_temp.as_delivery(:t_a, $$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = 1$$) AS a_completes_completed;
-- and with no token, error_job of the completed job: LF004
SELECT pg_temp.try($$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "nobody"}') WHERE id = 1$$) AS tokenless_errors_late;
SELECT id, state, attempt, attempted_by, (meta->>'fencing_token')::bigint = :t_d AS stamped_by_d, meta->'progress' AS progress FROM oban_jobs ORDER BY id;
-- Lifeline's discard of a job executing past rescue_after, on its last
-- attempt, without a token: passes
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET state = 'executing', attempt = max_attempts, attempted_at = timezone('UTC', now()) - interval '61 minutes' WHERE id = 1;
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try($$UPDATE oban_jobs SET state = 'discarded', discarded_at = timezone('UTC', now()) WHERE state = 'executing' AND attempted_at < timezone('UTC', now()) - interval '60 minutes' AND attempt >= max_attempts$$) AS lifeline_discard;
-- the control: without the guards, A's late error_job lands on the
-- completed job
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET state = 'completed' WHERE id = 1;
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
SELECT pg_temp.without_guards('oban_jobs', :t_a, $$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()), errors = array_append(errors, '{"error": "A failed"}') WHERE id = 1$$,
	$$SELECT state FROM oban_jobs WHERE id = 1$$) AS a_errors_late_unguarded;
-- ---- Solid Queue (1.5) -------------------------------------------------
\i examples/queues/solid_queue/schema.sql
\i examples/queues/solid_queue/install.sql
INSERT INTO solid_queue_processes (kind, pid, name) VALUES ('Worker', 101, 'worker-a'), ('Worker', 102, 'worker-b');
INSERT INTO solid_queue_jobs (queue_name, class_name) VALUES ('default', 'MailerJob');
INSERT INTO solid_queue_ready_executions (job_id, queue_name) SELECT id, queue_name FROM solid_queue_jobs;
-- ReadyExecution.claim for process 1 (A): lock ready rows, insert the
-- claimed executions, load them, delete the ready ones
SELECT id FROM solid_queue_ready_executions WHERE queue_name = 'default' ORDER BY priority, job_id LIMIT 1 FOR UPDATE SKIP LOCKED;
INSERT INTO solid_queue_claimed_executions (job_id, process_id) VALUES (1, 1);
SELECT id AS claim_a, job_id AS job, fencing_token AS t_a FROM solid_queue_claimed_executions WHERE job_id IN (1) AND process_id = 1 \gset
DELETE FROM solid_queue_ready_executions WHERE id IN (1);
-- A stops heartbeating; the supervisor prunes process 1: its claims are
-- failed (ProcessPrunedError), by ClaimedExecution#failed_with as the
-- supervisor runs it (no token): lock the claim, insert the failed
-- execution, destroy the claim by id
BEGIN;
SELECT id FROM solid_queue_claimed_executions WHERE id = :claim_a FOR UPDATE;
INSERT INTO solid_queue_failed_executions (job_id, error) VALUES (1, 'ProcessPrunedError');
SELECT pg_temp.try(format($$DELETE FROM solid_queue_claimed_executions WHERE id = %s$$, :claim_a)) AS supervisor_fails_claim;
DELETE FROM solid_queue_processes WHERE id = 1;
COMMIT;
-- an operator retries the failed job (FailedExecution#retry), process 2 (B) claims it
BEGIN;
INSERT INTO solid_queue_ready_executions (job_id, queue_name) VALUES (1, 'default');
DELETE FROM solid_queue_failed_executions WHERE job_id = 1;
COMMIT;
INSERT INTO solid_queue_claimed_executions (job_id, process_id) VALUES (1, 2);
SELECT id AS claim_b, fencing_token AS t_b FROM solid_queue_claimed_executions WHERE job_id IN (1) AND process_id = 2 \gset
DELETE FROM solid_queue_ready_executions WHERE job_id = 1;
SELECT :t_b > :t_a AS newer_claim;
-- A wakes; its heartbeat finds its process row gone (Process#heartbeat:
-- with_lock, RecordNotFound: the worker stops)
SELECT pg_temp.try($$WITH l AS (SELECT id FROM solid_queue_processes WHERE id = 1 FOR UPDATE) SELECT count(*) FROM l$$) AS a_heartbeat_finds;
-- A finishes as 1.5 does (issue 31, 3): finalize locks its claim by id
-- first and does nothing when it is gone
SELECT pg_temp.as_delivery(:t_a, format($$WITH l AS (SELECT id FROM solid_queue_claimed_executions WHERE id = %s FOR UPDATE) SELECT count(*) FROM l$$, :claim_a)) AS a_finalize_finds;
-- A's end of the claim by job (a hand-written worker's form): refused
SELECT pg_temp.as_delivery(:t_a, $$WITH claim AS (DELETE FROM solid_queue_claimed_executions WHERE job_id = 1 RETURNING job_id)
	UPDATE solid_queue_jobs SET finished_at = now(), updated_at = now() WHERE id IN (SELECT job_id FROM claim) RETURNING id$$) AS a_finishes_by_job;
-- the control: before 1.5 (commit 95dc9b48) finished was job.finished! then
-- destroy! by id, with no lock first: the job is finished under B's claim
SELECT pg_temp.as_delivery(:t_a, format($$WITH f AS (UPDATE solid_queue_jobs SET finished_at = now(), updated_at = now() WHERE id = 1 RETURNING id),
	d AS (DELETE FROM solid_queue_claimed_executions WHERE id = %s RETURNING id)
	SELECT (SELECT count(*) FROM f) || ' finished, ' || (SELECT count(*) FROM d) || ' claims destroyed'$$, :claim_a)) AS a_finishes_before_1_5;
UPDATE solid_queue_jobs SET finished_at = NULL WHERE id = 1;
-- no write moves the stamp of a claim (a column the worker's role should
-- not be granted anyway): LF012
SELECT pg_temp.try(format($$UPDATE solid_queue_claimed_executions SET fencing_token = %s WHERE id = %s$$, :t_a, :claim_b)) AS rewind_claim;
SELECT pg_temp.try(format($$UPDATE solid_queue_claimed_executions SET fencing_token = NULL WHERE id = %s$$, :claim_b)) AS erase_claim;
-- B finishes as 1.5 does: lock its claim, finish the job, destroy the claim
BEGIN;
SELECT set_config('fencing.token', :'t_b', true) IS NOT NULL AS declared;
SELECT id = :claim_b AS b_claim_found FROM solid_queue_claimed_executions WHERE id = :claim_b FOR UPDATE;
UPDATE solid_queue_jobs SET finished_at = now(), updated_at = now() WHERE id = 1;
SELECT pg_temp.try(format($$DELETE FROM solid_queue_claimed_executions WHERE id = %s$$, :claim_b)) AS b_destroys_claim;
COMMIT;
SELECT id, finished_at IS NOT NULL AS finished,
	   (SELECT count(*) FROM solid_queue_claimed_executions) AS claims,
	   (SELECT count(*) FROM solid_queue_failed_executions) AS failures
  FROM solid_queue_jobs;

-- ---- pgmq (1.5) ---------------------------------------------------------
\i examples/queues/pgmq/schema.sql
\i examples/queues/pgmq/install.sql
-- pgmq.send('jobs', '{"task": 1}'); any message is accepted (the stamp goes
-- into the headers), but headers that could not be stamped are refused
INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp(), '{"task": 1}') RETURNING msg_id AS msg \gset
SELECT pg_temp.try($$INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp() + interval '1 hour', '[1, 2]') RETURNING msg_id$$) AS send_array_message;
SELECT pg_temp.try($$INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp() + interval '1 hour', '"text"') RETURNING msg_id$$) AS send_string_message;
SELECT pg_temp.try($$INSERT INTO pgmq.q_jobs (vt, message, headers) VALUES (clock_timestamp(), '{}', '[1]') RETURNING msg_id$$) AS send_array_headers;
-- pgmq.read('jobs', vt, 1) as reader A, whose visibility timeout (0 s
-- here) lapses before it is done
WITH cte AS (
	SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp()
	 ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp() + interval '0 seconds', read_ct = read_ct + 1
  FROM cte WHERE m.msg_id = cte.msg_id
RETURNING m.read_ct, (m.headers->>'fencing_token')::bigint AS t_a \gset
-- read again by B, with 30 s
WITH cte AS (
	SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp()
	 ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp() + interval '30 seconds', read_ct = read_ct + 1
  FROM cte WHERE m.msg_id = cte.msg_id
RETURNING m.read_ct, (m.headers->>'fencing_token')::bigint AS t_b, m.message AS message_b \gset
SELECT :t_b > :t_a AS newer_claim, :read_ct AS read_ct, :'message_b' AS message_untouched;
-- A wakes: set_vt (its heartbeat), delete, archive, each by msg_id: refused
SELECT pg_temp.as_delivery(:t_a, $$UPDATE pgmq.q_jobs SET vt = clock_timestamp() + interval '60 seconds' WHERE msg_id = 1 RETURNING msg_id$$) AS a_set_vt;
SELECT pg_temp.as_delivery(:t_a, $$DELETE FROM pgmq.q_jobs WHERE msg_id = 1 RETURNING msg_id$$) AS a_deletes;
SELECT pg_temp.as_delivery(:t_a, $$WITH archived AS (DELETE FROM pgmq.q_jobs WHERE msg_id = ANY (ARRAY[1]::bigint[]) RETURNING msg_id, vt, read_ct, enqueued_at, message, headers)
	INSERT INTO pgmq.a_jobs (msg_id, vt, read_ct, enqueued_at, message, headers) SELECT msg_id, vt, read_ct, enqueued_at, message, headers FROM archived RETURNING msg_id$$) AS a_archives;
-- without a token, while B holds it: refused (LF004)
SELECT pg_temp.try($$DELETE FROM pgmq.q_jobs WHERE msg_id = 1 RETURNING msg_id$$) AS tokenless;
-- B extends its visibility timeout (its heartbeat), then archives it
SELECT pg_temp.as_delivery(:t_b, $$UPDATE pgmq.q_jobs SET vt = clock_timestamp() + interval '60 seconds' WHERE msg_id = 1 RETURNING msg_id$$) AS b_set_vt;
SELECT pg_temp.as_delivery(:t_b, $$WITH archived AS (DELETE FROM pgmq.q_jobs WHERE msg_id = ANY (ARRAY[1]::bigint[]) RETURNING msg_id, vt, read_ct, enqueued_at, message, headers)
	INSERT INTO pgmq.a_jobs (msg_id, vt, read_ct, enqueued_at, message, headers) SELECT msg_id, vt, read_ct, enqueued_at, message, headers FROM archived RETURNING msg_id$$) AS b_archives;
SELECT (SELECT count(*) FROM pgmq.q_jobs) AS queued, msg_id, read_ct, (headers->>'fencing_token')::bigint = :t_b AS stamped_by_b, message FROM pgmq.a_jobs;
-- A's late set_vt finds nothing: set_vt returns no row, A stops
SELECT pg_temp.as_delivery(:t_a, $$WITH u AS (UPDATE pgmq.q_jobs SET vt = clock_timestamp() WHERE msg_id = 1 RETURNING msg_id) SELECT count(*) FROM u$$) AS a_set_vt_after;
-- pop() after a dead reader (issue 31, 6): a message read by C, whose
-- visibility timeout lapsed, is popped without a token
INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp(), '[3]');
WITH cte AS (SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp() ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp(), read_ct = read_ct + 1 FROM cte WHERE m.msg_id = cte.msg_id
RETURNING (m.headers->>'fencing_token')::bigint AS t_c \gset
SELECT pg_temp.try($$WITH cte AS (SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp() ORDER BY msg_id ASC LIMIT 1 FOR UPDATE SKIP LOCKED)
	DELETE FROM pgmq.q_jobs WHERE msg_id = (SELECT msg_id FROM cte) RETURNING message$$) AS pop_after_dead_reader;
-- a visible message: a reader that brings an older token is still refused
INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp(), '{"task": 4}');
WITH cte AS (SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp() ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp(), read_ct = read_ct + 1 FROM cte WHERE m.msg_id = cte.msg_id
RETURNING m.msg_id AS msg4, (m.headers->>'fencing_token')::bigint AS t_d \gset
WITH cte AS (SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp() ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp(), read_ct = read_ct + 1 FROM cte WHERE m.msg_id = cte.msg_id
RETURNING (m.headers->>'fencing_token')::bigint AS t_e \gset
SELECT pg_temp.as_delivery(:t_d, format($$DELETE FROM pgmq.q_jobs WHERE msg_id = %s RETURNING msg_id$$, :msg4)) AS stale_delete_visible;
SELECT pg_temp.as_delivery(:t_e, format($$DELETE FROM pgmq.q_jobs WHERE msg_id = %s RETURNING message$$, :msg4)) AS latest_delete_visible;

-- a live reader of two messages (pgmq.read('jobs', 30, 2): each is stamped
-- with a token of its own) ends them (red team M4).  delete() and
-- archive() of many (msg_ids bigint[]) are one statement, and one token
-- declared for it is only one message's: refused, as they must be (the
-- guard cannot tell a second message's newer token from a newer claim of
-- the first one), with no token LF004.  The reader ends them one call per
-- message, each after its own SET LOCAL, in one transaction
INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp(), '{"n": 5}'), (clock_timestamp(), '{"n": 6}');
WITH cte AS (SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp() ORDER BY msg_id ASC LIMIT 2 FOR UPDATE SKIP LOCKED),
	u AS (UPDATE pgmq.q_jobs m SET vt = clock_timestamp() + interval '30 seconds', read_ct = read_ct + 1
		  FROM cte WHERE m.msg_id = cte.msg_id RETURNING m.msg_id, (m.headers->>'fencing_token')::bigint AS tok)
SELECT min(msg_id) AS m5, max(msg_id) AS m6, min(tok) AS t5, max(tok) AS t6, count(*) AS read_two FROM u \gset
SELECT :read_two AS read_two, :t6 > :t5 AS two_stamps;
SELECT pg_temp.as_delivery(:t5, format($$DELETE FROM pgmq.q_jobs WHERE msg_id = ANY(ARRAY[%s, %s]::bigint[]) RETURNING msg_id$$, :m5, :m6)) AS batch_delete_first_token;
SELECT pg_temp.as_delivery(:t6, format($$DELETE FROM pgmq.q_jobs WHERE msg_id = ANY(ARRAY[%s, %s]::bigint[]) RETURNING msg_id$$, :m5, :m6)) AS batch_delete_second_token;
SELECT pg_temp.try(format($$DELETE FROM pgmq.q_jobs WHERE msg_id = ANY(ARRAY[%s, %s]::bigint[]) RETURNING msg_id$$, :m5, :m6)) AS batch_delete_tokenless;
BEGIN;
SELECT set_config('fencing.token', :'t5', true) IS NOT NULL AS declared;
SELECT pg_temp.try(format($$DELETE FROM pgmq.q_jobs WHERE msg_id = %s RETURNING msg_id = %s$$, :m5, :m5)) AS delete_first;
SELECT set_config('fencing.token', :'t6', true) IS NOT NULL AS declared;
SELECT pg_temp.try(format($$WITH archived AS (DELETE FROM pgmq.q_jobs WHERE msg_id = ANY (ARRAY[%s]::bigint[]) RETURNING msg_id, vt, read_ct, enqueued_at, message, headers)
	INSERT INTO pgmq.a_jobs (msg_id, vt, read_ct, enqueued_at, message, headers) SELECT msg_id, vt, read_ct, enqueued_at, message, headers FROM archived RETURNING msg_id = %s$$, :m6, :m6)) AS archive_second;
COMMIT;
SELECT count(*) AS left_of_the_two FROM pgmq.q_jobs WHERE msg_id IN (:m5, :m6);
-- an operator's set_vt('jobs', msg_id, 0) of a held message (red team L1)
-- makes it visible now: no token needed, the next reader claims it again.
-- The reader is still the message's latest claim until then, so its own
-- set_vt passes; set_vt that keeps a held message hidden without a token
-- (a heartbeat that does not follow the recipe) is refused: LF004
INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp(), '{"n": 7}');
WITH cte AS (SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp() ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED)
UPDATE pgmq.q_jobs AS m SET vt = clock_timestamp() + interval '30 seconds', read_ct = read_ct + 1 FROM cte WHERE m.msg_id = cte.msg_id
RETURNING m.msg_id AS m7, (m.headers->>'fencing_token')::bigint AS t7 \gset
SELECT pg_temp.try(format($$UPDATE pgmq.q_jobs SET vt = (clock_timestamp() + interval '0 seconds') WHERE msg_id = %s RETURNING vt <= clock_timestamp()$$, :m7)) AS operator_set_vt_0;
SELECT pg_temp.as_delivery(:t7, format($$UPDATE pgmq.q_jobs SET vt = clock_timestamp() + interval '30 seconds' WHERE msg_id = %s RETURNING msg_id = %s$$, :m7, :m7)) AS reader_set_vt_after;
SELECT pg_temp.try(format($$UPDATE pgmq.q_jobs SET vt = clock_timestamp() + interval '60 seconds' WHERE msg_id = %s RETURNING msg_id$$, :m7)) AS tokenless_set_vt_held;
-- ---- pg-boss 12 ---------------------------------------------------------
-- pgboss.job as pg-boss 12.38.0 creates it (src/plans.ts: createTableJob,
-- partitioned by name), cut down; the recipe as shipped
CREATE SCHEMA pgboss;
CREATE TYPE pgboss.job_state AS ENUM ('created', 'retry', 'active', 'completed', 'cancelled', 'failed');
CREATE TABLE pgboss.job (id uuid NOT NULL DEFAULT gen_random_uuid(), name text NOT NULL,
	data jsonb, state pgboss.job_state NOT NULL DEFAULT 'created', retry_count int NOT NULL DEFAULT 0,
	retry_limit int NOT NULL DEFAULT 2, started_on timestamptz, completed_on timestamptz,
	output jsonb, heartbeat_on timestamptz, heartbeat_seconds int) PARTITION BY LIST (name);
CREATE TABLE pgboss.j1 (LIKE pgboss.job INCLUDING DEFAULTS);
ALTER TABLE pgboss.job ATTACH PARTITION pgboss.j1 FOR VALUES IN ('q1');
\i examples/queues/pg-boss/install.sql
-- create_queue after the recipe: CREATE TABLE ... LIKE, ATTACH PARTITION
-- (a CHECK constraint on pgboss.job would make the ATTACH fail)
CREATE TABLE pgboss.j2 (LIKE pgboss.job INCLUDING DEFAULTS);
ALTER TABLE pgboss.job ATTACH PARTITION pgboss.j2 FOR VALUES IN ('q2');
-- send() of data that is not an object (issue 31, 5): refused at send, in
-- either partition; an object or no data is accepted
SELECT pg_temp.try($$INSERT INTO pgboss.job (name, data) VALUES ('q1', '[1, 2]')$$) AS send_array;
SELECT pg_temp.try($$INSERT INTO pgboss.job (name, data) VALUES ('q2', '42')$$) AS send_number;
SELECT pg_temp.try($$INSERT INTO pgboss.job (name, data) VALUES ('q2', NULL)$$) AS send_null;
INSERT INTO pgboss.job (name, data) VALUES ('q1', '{"n": 1}');
-- fetchNextJob as worker A
CREATE FUNCTION pg_temp.boss_fetch() RETURNS TABLE (id uuid, retry_count int, tok bigint) LANGUAGE sql AS $$
	WITH next AS (SELECT j.id FROM pgboss.job j WHERE j.name = 'q1' AND j.state < 'active' ORDER BY j.id LIMIT 1 FOR UPDATE OF j SKIP LOCKED)
	UPDATE pgboss.job j SET state = 'active', started_on = now(), heartbeat_on = now(),
		retry_count = CASE WHEN started_on IS NOT NULL THEN retry_count + 1 ELSE retry_count END
	  FROM next WHERE name = 'q1' AND j.id = next.id
	RETURNING j.id, j.retry_count, (j.data->>'fencing_token')::bigint $$;
SELECT id AS boss_job, retry_count AS rc_a, tok AS t_a FROM pg_temp.boss_fetch() \gset
-- A's heartbeat, as the worker's shim runs touchJobs (token declared)
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE pgboss.job SET heartbeat_on = now() WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :'boss_job')) AS a_touch_live;
-- A freezes; the supervisor's failJobsByHeartbeat: delete and re-insert as
-- retry with its fixed output (no token)
SELECT pg_temp.try(format($$WITH d AS (DELETE FROM pgboss.job WHERE name = 'q1' AND id = %L AND state = 'active' RETURNING *)
	INSERT INTO pgboss.job (id, name, data, state, retry_count, retry_limit, started_on, output, heartbeat_seconds)
	SELECT id, name, data, 'retry', retry_count, retry_limit, started_on, '{ "value": { "message": "job heartbeat timeout" } }', heartbeat_seconds FROM d RETURNING state$$, :'boss_job')) AS supervisor_heartbeat_expiry;
SELECT id AS boss_job_b, retry_count AS rc_b, tok AS t_b FROM pg_temp.boss_fetch() \gset
SELECT :t_b > :t_a AS newer_claim;
-- A wakes: touchJobs, completeJobs (the shim's output carries A's token),
-- failJobsById (the error carries it): refused, also when pg-boss's own
-- attempt fence is left out (a plain id: the fence is pg-boss's only for
-- job objects with retryCount)
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE pgboss.job SET heartbeat_on = now() WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :'boss_job')) AS a_touch;
SELECT pg_temp.try(format($$UPDATE pgboss.job SET completed_on = now(), state = 'completed', output = '{"fencing_token": "%s"}' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :t_a, :'boss_job')) AS a_completes;
SELECT pg_temp.try(format($$WITH d AS (DELETE FROM pgboss.job WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state < 'completed' RETURNING *)
	INSERT INTO pgboss.job (id, name, data, state, retry_count, retry_limit, started_on, output)
	SELECT id, name, data, 'retry', retry_count, retry_limit, started_on, '{"message": "A failed", "fencing_token": "%s"}' FROM d RETURNING state$$, :'boss_job', :t_a)) AS a_fails;
-- a batch completion without a token (batchSize > 1 before the shim
-- split it): refused, not silently accepted
SELECT pg_temp.try(format($$UPDATE pgboss.job SET completed_on = now(), state = 'completed', output = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :'boss_job')) AS batch_complete_tokenless;
-- restoreJobs (red team H2: no state check; pg-boss's worker sends it for
-- the jobs it fetched past localGroupConcurrency): as A's pg-boss sends
-- it, with no token, LF004; through the shim, with A's token, LF001.  The
-- control: without the guards it takes the job away from B (created), and
-- a third worker claims it too
SELECT pg_temp.try(format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job')) AS a_restores;
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job')) AS a_restores_with_token;
SELECT pg_temp.without_guards('pgboss.job', NULL, format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job'),
	$$SELECT state::text FROM pgboss.job$$) AS a_restores_unguarded;
-- B heartbeats, and fails (failJobsById: its token in the error): retry
SELECT pg_temp.as_delivery(:t_b, format($$UPDATE pgboss.job SET heartbeat_on = now() WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :'boss_job')) AS b_touch;
SELECT pg_temp.try(format($$WITH d AS (DELETE FROM pgboss.job WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state < 'completed' RETURNING *)
	INSERT INTO pgboss.job (id, name, data, state, retry_count, retry_limit, started_on, output)
	SELECT id, name, data, 'retry', retry_count, retry_limit, started_on, '{"message": "B failed", "fencing_token": "%s"}' FROM d RETURNING state$$, :'boss_job', :t_b)) AS b_fails;
-- complete(..., { includeQueued: true }) of A (red team H1: its state
-- check is state < 'completed', which the job in retry passes; A's token
-- in the output): refused, whatever the state.  The control: without the
-- guards the job is completed with A's output while the stamp is B's
SELECT pg_temp.try(format($$UPDATE pgboss.job SET completed_on = now(), state = 'completed', output = '{"by": "A", "fencing_token": "%s"}' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state < 'completed'$$, :t_a, :'boss_job')) AS a_completes_queued;
SELECT pg_temp.without_guards('pgboss.job', NULL, format($$UPDATE pgboss.job SET completed_on = now(), state = 'completed', output = '{"by": "A", "fencing_token": "%s"}' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state < 'completed'$$, :t_a, :'boss_job'),
	$$SELECT state || ', output ' || output::text || ', stamp ' || (data->>'fencing_token') FROM pgboss.job$$) AS a_completes_queued_unguarded;
-- and its restore of the job in retry, with no token: LF004
SELECT pg_temp.try(format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job')) AS a_restores_retry;
-- C claims it and restores it at once (live: its own claim, past its
-- localGroupConcurrency, through the shim): created again.  restore()
-- clears started_on, so D's claim does not raise retry_count, and
-- pg-boss's attempt fence cannot tell C's job object from D's: C's late
-- cancel(job) and deleteJob(job) (through the shim, C's token) are
-- refused by the stamp; the control shows C's cancel landing
SELECT id AS boss_job_c, retry_count AS rc_c, tok AS t_c FROM pg_temp.boss_fetch() \gset
SELECT pg_temp.as_delivery(:t_c, format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job')) AS c_restores_own_claim;
SELECT id AS boss_job_d, retry_count AS rc_d, tok AS t_d FROM pg_temp.boss_fetch() \gset
SELECT :rc_d = :rc_c AS same_retry_count, :t_d > :t_c AS newer_claim;
SELECT pg_temp.as_delivery(:t_c, format($$UPDATE pgboss.job SET completed_on = now(), state = 'cancelled' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state < 'completed' AND state = 'active' AND (id::text || ':' || retry_count::text) = ANY(ARRAY['%s:%s'])$$, :'boss_job', :'boss_job', :rc_c)) AS c_cancels;
SELECT pg_temp.as_delivery(:t_c, format($$DELETE FROM pgboss.job WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active' AND (id::text || ':' || retry_count::text) = ANY(ARRAY['%s:%s'])$$, :'boss_job', :'boss_job', :rc_c)) AS c_deletes;
SELECT pg_temp.without_guards('pgboss.job', :t_c, format($$UPDATE pgboss.job SET completed_on = now(), state = 'cancelled' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state < 'completed' AND state = 'active' AND (id::text || ':' || retry_count::text) = ANY(ARRAY['%s:%s'])$$, :'boss_job', :'boss_job', :rc_c),
	$$SELECT state::text FROM pgboss.job$$) AS c_cancels_unguarded;
-- D heartbeats and completes
SELECT pg_temp.as_delivery(:t_d, format($$UPDATE pgboss.job SET heartbeat_on = now() WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :'boss_job')) AS d_touch;
SELECT pg_temp.try(format($$UPDATE pgboss.job SET completed_on = now(), state = 'completed', output = '{"fencing_token": "%s"}' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :t_d, :'boss_job')) AS d_completes;
-- a restore after the completion would run the job again (red team H2):
-- with no token LF004, with A's LF001; the control lands
SELECT pg_temp.try(format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job')) AS a_restores_completed;
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job')) AS a_restores_completed_with_token;
SELECT pg_temp.without_guards('pgboss.job', NULL, format($$UPDATE pgboss.job SET state = 'created', started_on = NULL, heartbeat_on = NULL WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job'),
	$$SELECT state::text FROM pgboss.job$$) AS a_restores_completed_unguarded;
SELECT state, retry_count, (data->>'fencing_token')::bigint = :t_d AS stamped_by_d, (output->>'fencing_token')::bigint = :t_d AS completed_by_d FROM pgboss.job WHERE id = :'boss_job';
-- the operator's cancel() and deleteJob() by plain id carry no token and
-- pass, on an active job too: the live delivery's complete() then finds
-- nothing to complete (pg-boss's state check), so the job is not run twice
INSERT INTO pgboss.job (name, data) VALUES ('q1', '{"n": 2}');
SELECT id AS boss_job_e, tok AS t_e FROM pg_temp.boss_fetch() \gset
SELECT pg_temp.try(format($$UPDATE pgboss.job SET completed_on = now(), state = 'cancelled' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state < 'completed'$$, :'boss_job_e')) AS operator_cancels_active;
SELECT pg_temp.try(format($$UPDATE pgboss.job SET completed_on = now(), state = 'completed', output = '{"fencing_token": "%s"}' WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[]) AND state = 'active'$$, :t_e, :'boss_job_e')) AS e_completes_after;
SELECT pg_temp.try(format($$DELETE FROM pgboss.job WHERE name = 'q1' AND id = ANY(ARRAY[%L]::uuid[])$$, :'boss_job_e')) AS operator_deletes;
-- update() of a queued job (updateJob: data written whole, state <
-- 'active'): data that could not hold a stamp is refused (red team M1:
-- the fetch after it would fail with 42804 for good); an object keeps
-- the stamp of the job's last claim; a stamp that is not a token is
-- refused at send
INSERT INTO pgboss.job (name, data) VALUES ('q1', '{"n": 3}');
SELECT id AS boss_job_f, tok AS t_f FROM pg_temp.boss_fetch() \gset
SELECT pg_temp.try(format($$WITH d AS (DELETE FROM pgboss.job WHERE name = 'q1' AND id = %L AND state = 'active' RETURNING *)
	INSERT INTO pgboss.job (id, name, data, state, retry_count, retry_limit, started_on, output)
	SELECT id, name, data, 'retry', retry_count, retry_limit, started_on, '{"value": {"message": "job timed out"}}' FROM d RETURNING state$$, :'boss_job_f')) AS supervisor_expiry;
SELECT pg_temp.try(format($$UPDATE pgboss.job SET data = '[1, 2]' WHERE name = 'q1' AND id = %L AND state < 'active'$$, :'boss_job_f')) AS update_array_data;
SELECT pg_temp.without_guards('pgboss.job', NULL, format($$UPDATE pgboss.job SET data = '[1, 2]' WHERE name = 'q1' AND id = %L AND state < 'active'$$, :'boss_job_f'),
	$$SELECT 'next fetch: ' || pg_temp.try('SELECT tok::text FROM pg_temp.boss_fetch()')$$) AS update_array_data_unguarded;
SELECT pg_temp.try(format($$UPDATE pgboss.job SET data = '{"n": 4}' WHERE name = 'q1' AND id = %L AND state < 'active' RETURNING data::text$$, :'boss_job_f')) AS update_object_data;
SELECT pg_temp.try($$INSERT INTO pgboss.job (name, data) VALUES ('q1', '{"fencing_token": "soon"}') RETURNING state$$) AS send_bad_stamp;
-- ---- graphile-worker 0.18 -----------------------------------------------
-- _private_jobs as graphile-worker 0.18.0 makes it (sql/000001-000020),
-- cut down; the recipe as shipped
CREATE SCHEMA graphile_worker;
CREATE TABLE graphile_worker._private_jobs (id bigserial PRIMARY KEY, task_id int NOT NULL DEFAULT 1,
	payload json NOT NULL DEFAULT '{}', attempts smallint NOT NULL DEFAULT 0, max_attempts smallint NOT NULL DEFAULT 25,
	locked_at timestamptz, locked_by text, key text UNIQUE, last_error text, job_queue_id int,
	run_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
	is_available boolean GENERATED ALWAYS AS (locked_at IS NULL AND attempts < max_attempts) STORED);
CREATE TABLE graphile_worker._private_job_queues (id serial PRIMARY KEY, queue_name text NOT NULL UNIQUE,
	locked_at timestamptz, locked_by text,
	is_available boolean GENERATED ALWAYS AS (locked_at IS NULL) STORED);
\i examples/queues/graphile-worker/install.sql
INSERT INTO graphile_worker._private_jobs (key) VALUES ('report-1');
CREATE FUNCTION pg_temp.gw_get_job(pool text) RETURNS TABLE (id bigint, tok bigint) LANGUAGE sql AS $$
	WITH j AS (SELECT jobs.id, jobs.job_queue_id FROM graphile_worker._private_jobs AS jobs
			   WHERE jobs.is_available = true AND run_at <= now()
				 AND (jobs.job_queue_id IS NULL OR jobs.job_queue_id IN (SELECT q.id FROM graphile_worker._private_job_queues AS q WHERE q.is_available))
			   ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED),
	q AS (UPDATE graphile_worker._private_job_queues AS job_queues SET locked_by = pool, locked_at = now()
		  FROM j WHERE job_queues.id = j.job_queue_id)
	UPDATE graphile_worker._private_jobs AS jobs SET attempts = jobs.attempts + 1, locked_by = pool, locked_at = now()
	  FROM j WHERE jobs.id = j.id RETURNING jobs.id, jobs.fencing_token $$;
SELECT id AS gw_job, tok AS t_a FROM pg_temp.gw_get_job('pool-a') \gset
-- add_job and remove_job with the running job's key (issue 31, 4): they
-- take the key over and raise attempts to max_attempts, which is not a
-- claim: the stamp stays A's, and A's completion is not refused by it
SELECT pg_temp.try($$DELETE FROM graphile_worker._private_jobs AS jobs WHERE key = 'report-1' AND (locked_at IS NULL OR locked_at < now() - interval '4 hours') RETURNING id$$) AS remove_job_delete_branch;
SELECT pg_temp.try($$UPDATE graphile_worker._private_jobs AS jobs SET key = null, attempts = jobs.max_attempts, updated_at = now() WHERE key = 'report-1' RETURNING fencing_token$$) AS remove_job_running_key;
ALTER TABLE graphile_worker._private_jobs DISABLE TRIGGER USER;
UPDATE graphile_worker._private_jobs SET key = 'report-1', attempts = 1 WHERE id = :gw_job;
ALTER TABLE graphile_worker._private_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try($$UPDATE graphile_worker._private_jobs AS jobs SET key = null, attempts = jobs.max_attempts, updated_at = now()
	WHERE jobs.key = 'report-1' AND is_available IS NOT TRUE RETURNING fencing_token$$) AS add_job_same_key;
SELECT pg_temp.try($$INSERT INTO graphile_worker._private_jobs (key) VALUES ('report-1') RETURNING id$$) AS add_job_inserts;
SELECT fencing_token = :t_a AS still_stamped_by_a FROM graphile_worker._private_jobs WHERE id = :gw_job;
-- A heartbeats (the recipe's statement), then freezes past the lock
-- timeout; the rescue (resetLockedAt) unlocks it without a token
ALTER TABLE graphile_worker._private_jobs DISABLE TRIGGER USER;
UPDATE graphile_worker._private_jobs SET attempts = 1, max_attempts = 25 WHERE id = :gw_job;
ALTER TABLE graphile_worker._private_jobs ENABLE TRIGGER USER;
SELECT pg_temp.as_delivery(:t_a, format($$WITH u AS (UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = %s RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$, :gw_job)) AS a_heartbeat_live;
ALTER TABLE graphile_worker._private_jobs DISABLE TRIGGER USER;
UPDATE graphile_worker._private_jobs SET locked_at = now() - interval '5 hours' WHERE id = :gw_job;
ALTER TABLE graphile_worker._private_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try($$UPDATE graphile_worker._private_jobs SET locked_at = null, locked_by = null, run_at = greatest(run_at, now()) WHERE locked_at < now() - interval '4 hours'$$) AS rescue;
SELECT id AS gw_job_b, tok AS t_b FROM pg_temp.gw_get_job('pool-a') \gset
SELECT :t_b > :t_a AS newer_claim;
-- A wakes (same pool: locked_by does not tell the deliveries apart): its
-- heartbeat, its completion (the task's DELETE), its failJob with its
-- token, and graphile-worker's own completeJob after it (no token): refused
SELECT pg_temp.as_delivery(:t_a, format($$WITH u AS (UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = %s RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$, :gw_job)) AS a_heartbeat;
SELECT pg_temp.as_delivery(:t_a, format($$DELETE FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_job)) AS a_completes;
SELECT pg_temp.as_delivery(:t_a, format($$UPDATE graphile_worker._private_jobs AS jobs SET last_error = 'A failed', run_at = greatest(now(), run_at), locked_by = null, locked_at = null WHERE id = ANY(ARRAY[%s]::bigint[]) AND locked_by = 'pool-a'$$, :gw_job)) AS a_fails;
SELECT pg_temp.try(format($$DELETE FROM graphile_worker._private_jobs AS jobs USING unnest(ARRAY[%s]::bigint[]) n(n) WHERE id = n$$, :gw_job)) AS library_complete_tokenless;
-- B heartbeats and completes; graphile-worker's DELETE after it finds nothing
SELECT pg_temp.as_delivery(:t_b, format($$WITH u AS (UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = %s RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$, :gw_job)) AS b_heartbeat;
SELECT pg_temp.as_delivery(:t_b, format($$DELETE FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_job)) AS b_completes;
SELECT pg_temp.try(format($$DELETE FROM graphile_worker._private_jobs AS jobs WHERE id = %s$$, :gw_job)) AS library_complete_after;
-- a stale task on a job that is not locked (red team H5): A (pool-a)
-- claims, freezes past the rescue; B (pool-b) claims, its task throws, and
-- graphile-worker's failJobs unlocks the job for a retry.  A wakes: its
-- heartbeat (A's token declared) is refused whatever the job's lock (the
-- control: it lands, and hides the job: locked_at set, locked_by NULL,
-- not available); a heartbeat with no token that would lock the unlocked
-- job: LF004; A's completion: refused (the control: the job is gone).
-- The retry is claimed by C when due
INSERT INTO graphile_worker._private_jobs DEFAULT VALUES;
SELECT id AS gw_job_h, tok AS t_ha FROM pg_temp.gw_get_job('pool-a') \gset
ALTER TABLE graphile_worker._private_jobs DISABLE TRIGGER USER;
UPDATE graphile_worker._private_jobs SET locked_at = now() - interval '5 hours' WHERE id = :gw_job_h;
ALTER TABLE graphile_worker._private_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try($$UPDATE graphile_worker._private_jobs SET locked_at = null, locked_by = null, run_at = greatest(run_at, now()) WHERE locked_at < now() - interval '4 hours'$$) AS rescue;
SELECT id AS gw_job_hb, tok AS t_hb FROM pg_temp.gw_get_job('pool-b') \gset
SELECT :gw_job_hb = :gw_job_h AS same_job, :t_hb > :t_ha AS newer_claim;
SELECT pg_temp.try(format($$UPDATE graphile_worker._private_jobs AS jobs SET last_error = 'B failed', run_at = greatest(now(), run_at) + (exp(least(attempts, 10)) * interval '1 second'),
	locked_by = null, locked_at = null WHERE id = ANY(ARRAY[%s]::bigint[]) AND locked_by = 'pool-b'$$, :gw_job_h)) AS b_fails;
SELECT pg_temp.as_delivery(:t_ha, format($$WITH u AS (UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = %s RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$, :gw_job_h)) AS a_heartbeat_unlocked;
SELECT pg_temp.without_guards('graphile_worker._private_jobs', :t_ha, format($$WITH u AS (UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = %s RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u$$, :gw_job_h),
	format($$SELECT 'locked_at set: ' || (locked_at IS NOT NULL) || ', locked_by: ' || coalesce(locked_by, 'NULL') || ', available: ' || is_available FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_job_h)) AS a_heartbeat_unlocked_unguarded;
SELECT pg_temp.try(format($$UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = %s$$, :gw_job_h)) AS tokenless_lock;
SELECT pg_temp.as_delivery(:t_ha, format($$DELETE FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_job_h)) AS a_completes_unlocked;
SELECT pg_temp.without_guards('graphile_worker._private_jobs', :t_ha, format($$DELETE FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_job_h),
	format($$SELECT count(*) || ' jobs left' FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_job_h)) AS a_completes_unlocked_unguarded;
UPDATE graphile_worker._private_jobs SET run_at = now() WHERE id = :gw_job_h;
SELECT id = :gw_job_h AS c_claims_the_retry, tok > :t_hb AS newer_claim FROM pg_temp.gw_get_job('pool-c');
-- a job in a named queue (red team M2): get_job locks the queue as well;
-- graphile-worker's completion of such a job is one statement that
-- deletes the job and unlocks its queue (complete_job_q).  The task's
-- completion is that statement, with its token declared and the job's own
-- locked_by: the queue is unlocked, and its next job can run.  The old
-- recipe's completion (the task deletes its row alone): graphile-worker's
-- complete_job_q after it (RETURNING added, to show what it unlocks)
-- deletes nothing and leaves the queue locked until the rescue
SELECT pg_temp.try($$DELETE FROM graphile_worker._private_jobs WHERE locked_at IS NULL RETURNING key$$) AS remove_unlocked_jobs;
INSERT INTO graphile_worker._private_job_queues (queue_name) VALUES ('serial');
INSERT INTO graphile_worker._private_jobs (job_queue_id) SELECT id FROM graphile_worker._private_job_queues WHERE queue_name = 'serial';
INSERT INTO graphile_worker._private_jobs (job_queue_id) SELECT id FROM graphile_worker._private_job_queues WHERE queue_name = 'serial';
SELECT id AS gw_q1, tok AS t_q1 FROM pg_temp.gw_get_job('pool-q') \gset
SELECT count(*) AS next_in_queue_while_locked FROM pg_temp.gw_get_job('pool-r');
SELECT pg_temp.as_delivery(:t_q1, format($$WITH j AS (DELETE FROM graphile_worker._private_jobs WHERE id = %s RETURNING job_queue_id, locked_by),
	q AS (UPDATE graphile_worker._private_job_queues AS job_queues SET locked_by = null, locked_at = null FROM j
		  WHERE job_queues.id = j.job_queue_id AND job_queues.locked_by = j.locked_by RETURNING 1)
	SELECT (SELECT count(*) FROM j) || ' deleted, ' || (SELECT count(*) FROM q) || ' unlocked'$$, :gw_q1)) AS task_completes_in_queue;
SELECT id AS gw_q2, tok AS t_q2 FROM pg_temp.gw_get_job('pool-r') \gset
SELECT pg_temp.as_delivery(:t_q2, format($$DELETE FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_q2)) AS old_task_completion;
SELECT pg_temp.try(format($$WITH j AS (DELETE FROM graphile_worker._private_jobs AS jobs USING unnest(ARRAY[%s]::bigint[]) n(n) WHERE id = n RETURNING *)
	UPDATE graphile_worker._private_job_queues AS job_queues SET locked_by = null, locked_at = null FROM j
	WHERE job_queues.id = j.job_queue_id AND job_queues.locked_by = 'pool-r' RETURNING job_queues.queue_name$$, :gw_q2)) AS complete_job_q_after;
SELECT queue_name, locked_by, is_available FROM graphile_worker._private_job_queues;
UPDATE graphile_worker._private_job_queues SET locked_by = null, locked_at = null;
-- an operator's remove_job of a job locked by a dead worker (lock older
-- than 4 hours): no token, passes
INSERT INTO graphile_worker._private_jobs DEFAULT VALUES;
SELECT id AS gw_job_c, tok AS t_c FROM pg_temp.gw_get_job('pool-c') \gset
ALTER TABLE graphile_worker._private_jobs DISABLE TRIGGER USER;
UPDATE graphile_worker._private_jobs SET locked_at = now() - interval '5 hours', key = 'report-2' WHERE id = :gw_job_c;
ALTER TABLE graphile_worker._private_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try($$DELETE FROM graphile_worker._private_jobs AS jobs WHERE key = 'report-2' AND (locked_at IS NULL OR locked_at < now() - interval '4 hours') RETURNING id$$) AS remove_job_dead_lock;
SELECT count(*) AS jobs_left FROM graphile_worker._private_jobs;

DROP TABLE river_job, oban_jobs, solid_queue_failed_executions, solid_queue_claimed_executions,
	solid_queue_ready_executions, solid_queue_processes, solid_queue_jobs;
DROP TYPE river_job_state, oban_job_state;
DROP SCHEMA pgmq, pgboss, graphile_worker CASCADE;
