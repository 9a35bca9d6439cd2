--
-- Red-team reproductions against the queue recipes exactly as shipped
-- (examples/queues/*/install.sql), in the style of sql/queue_recipes.sql:
-- each queue's tables cut down, each statement as the queue (or its worker
-- library, or the recipe's own worker) sends it.  Run from the checkout's
-- top directory, in a database with the fencing extension:
--
--   psql -X -d DB -f test/redq/queue_attacks.sql
--
-- Every "LANDS" line below is a write the recipe should have refused (a
-- stale delivery changing the job after a newer claim), or a live
-- delivery refused: see each section.  Tokens are shown relative to T0.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE TEMP TABLE base AS SELECT fencing.next_token() AS t0;
\i sql/include/queue_try.sql
CREATE FUNCTION pg_temp.as_delivery(t bigint, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	PERFORM set_config('fencing.token', t::text, true);
	r := pg_temp.try(q);
	PERFORM set_config('fencing.token', '', true);
	RETURN r;
END $$;

-- ==== graphile-worker 0.18: a stale delivery on a job that is not locked ====
-- The recipe's guards all ask for OLD.locked_by IS NOT NULL.  Once a newer
-- delivery (B) has failed the job (graphile-worker's failJobs unlocks it
-- for a retry), the job is unlocked, and the stale delivery A's heartbeat
-- (the recipe's own statement, worker.js) and its completion (the task's
-- DELETE, worker.js) are not checked at all.
CREATE SCHEMA graphile_worker;
CREATE TABLE graphile_worker._private_jobs (id bigserial PRIMARY KEY, task_id int NOT NULL DEFAULT 1,
	payload json NOT NULL DEFAULT '{}', attempts smallint NOT NULL DEFAULT 0, max_attempts smallint NOT NULL DEFAULT 25,
	locked_at timestamptz, locked_by text, key text UNIQUE, last_error text,
	run_at timestamptz NOT NULL DEFAULT now(), priority int NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now(),
	is_available boolean GENERATED ALWAYS AS (locked_at IS NULL AND attempts < max_attempts) STORED);
\i examples/queues/graphile-worker/install.sql
INSERT INTO graphile_worker._private_jobs DEFAULT VALUES;
-- get_job (dist/sql/getJobs.js, batchSize 1, no named queue)
CREATE FUNCTION pg_temp.gw_get_job(pool text) RETURNS TABLE (id bigint, tok bigint) LANGUAGE sql AS $$
	WITH j AS (SELECT jobs.id FROM graphile_worker._private_jobs AS jobs WHERE jobs.is_available = true AND run_at <= now()
			   ORDER BY priority asc, run_at asc LIMIT 1 FOR UPDATE SKIP LOCKED)
	UPDATE graphile_worker._private_jobs AS jobs SET attempts = jobs.attempts + 1, locked_by = pool, locked_at = now()
	  FROM j WHERE jobs.id = j.id RETURNING jobs.id, jobs.fencing_token $$;
SELECT id AS gw_job, tok AS gw_a FROM pg_temp.gw_get_job('pool-a') \gset
-- A freezes for over 4 hours; resetLockedAt unlocks (no token, passes)
ALTER TABLE graphile_worker._private_jobs DISABLE TRIGGER USER;
UPDATE graphile_worker._private_jobs SET locked_at = now() - interval '5 hours' WHERE id = :gw_job;
ALTER TABLE graphile_worker._private_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try($$UPDATE graphile_worker._private_jobs AS jobs SET locked_at = null, locked_by = null, run_at = greatest(run_at, now())
	WHERE locked_at < now() - interval '4 hours'$$) AS gw_reset_locked_at;
-- B (another process) claims it, its task throws: failJobs (no token, passes)
SELECT id AS gw_job_b, tok AS gw_b FROM pg_temp.gw_get_job('pool-b') \gset
SELECT :gw_b > :gw_a AS gw_newer_claim;
SELECT pg_temp.try(format($$UPDATE graphile_worker._private_jobs AS jobs SET last_error = 'B failed',
	run_at = greatest(now(), run_at) + (exp(least(attempts, 10)) * interval '1 second'), locked_by = null, locked_at = null
	WHERE id = any(ARRAY[%s]::bigint[]) AND locked_by = 'pool-b'$$, :gw_job)) AS gw_b_fails;
-- A wakes: its heartbeat (worker.js's statement, A's token declared): LANDS,
-- and hides the job (locked_at set, locked_by NULL: is_available false)
SELECT pg_temp.as_delivery(:gw_a, format($$WITH u AS (UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = %s RETURNING 1)
	SELECT fencing.expect_rows(count(*)) FROM u$$, :gw_job)) AS gw_a_stale_heartbeat;
SELECT attempts, locked_by, locked_at IS NOT NULL AS locked_at_set, is_available, fencing_token = :gw_b AS stamp_is_b
  FROM graphile_worker._private_jobs;
-- the retry is due (run_at passes): no worker gets it (A's heartbeat keeps it hidden)
UPDATE graphile_worker._private_jobs SET run_at = now() WHERE id = :gw_job;
SELECT count(*) AS gw_c_claims FROM pg_temp.gw_get_job('pool-c');
-- A completes (worker.js: DELETE with A's token declared): LANDS
SELECT pg_temp.as_delivery(:gw_a, format($$DELETE FROM graphile_worker._private_jobs WHERE id = %s$$, :gw_job)) AS gw_a_stale_complete;
SELECT count(*) AS gw_jobs_left FROM graphile_worker._private_jobs;

-- ==== Oban: a stale end of the same state as the newer delivery's end ====
-- fencing_end asks for OLD.state = 'executing' OR NEW.state <> OLD.state.
-- After B ended its delivery (retryable, scheduled, discarded), A's
-- error_job / snooze_job / discard_job writes the same state: unchecked.
\i examples/queues/oban/schema.sql
\i examples/queues/oban/install.sql
INSERT INTO oban_jobs (worker) VALUES ('MyApp.Mailer');
CREATE FUNCTION pg_temp.oban_fetch(node text) RETURNS TABLE (id bigint, tok bigint, meta jsonb) LANGUAGE sql AS $$
	WITH subset AS MATERIALIZED (SELECT id FROM oban_jobs WHERE state = 'available' AND queue = 'default'
		AND attempt < max_attempts ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
	UPDATE oban_jobs AS j SET state = 'executing', attempted_at = timezone('UTC', now()), attempted_by = ARRAY[node],
		attempt = j.attempt + 1 FROM subset WHERE j.id = subset.id
	RETURNING j.id, (j.meta->>'fencing_token')::bigint, j.meta $$;
SELECT id AS ob_job, tok AS ob_a, meta AS ob_meta_a FROM pg_temp.oban_fetch('node-a') \gset
-- A freezes over rescue_after; Lifeline makes it available; B fetches it
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET attempted_at = attempted_at - interval '61 minutes';
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
UPDATE oban_jobs SET state = 'available' WHERE state = 'executing' AND attempted_at < timezone('UTC', now()) - interval '60 minutes';
SELECT id, tok AS ob_b, meta AS ob_meta_b FROM pg_temp.oban_fetch('node-b') \gset
-- B snoozes (snooze_job as basic.ex at 2939e313: meta from B's struct, attempt - 1)
SELECT pg_temp.as_delivery(:ob_b, format($$UPDATE oban_jobs SET state = 'scheduled', scheduled_at = timezone('UTC', now()) + interval '60 seconds',
	meta = %L::jsonb || '{"snoozed": 1}', attempt = attempt - 1 WHERE id = %s$$, :'ob_meta_b', :ob_job)) AS ob_b_snoozes;
SELECT state, attempt, (meta->>'fencing_token')::bigint = :ob_b AS stamp_is_b FROM oban_jobs;
-- A wakes and snoozes too (its engine declares A's token): LANDS.  The
-- stamp is rewound to A's token, the attempt goes down again, scheduled_at moves
SELECT pg_temp.as_delivery(:ob_a, format($$UPDATE oban_jobs SET state = 'scheduled', scheduled_at = timezone('UTC', now()) + interval '1 hour',
	meta = %L::jsonb || '{"snoozed": 1}', attempt = attempt - 1 WHERE id = %s$$, :'ob_meta_a', :ob_job)) AS ob_a_stale_snooze;
SELECT state, attempt, (meta->>'fencing_token')::bigint = :ob_a AS stamp_rewound_to_a,
	   scheduled_at > timezone('UTC', now()) + interval '30 minutes' AS rescheduled_by_a FROM oban_jobs;
-- same with error_job after B's error_job (retryable -> retryable): LANDS
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET state = 'retryable', attempt = 2, meta = :'ob_meta_b'::jsonb, errors = '{}';
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
SELECT pg_temp.as_delivery(:ob_a, format($$UPDATE oban_jobs SET state = 'retryable', scheduled_at = timezone('UTC', now()) + interval '1 day',
	errors = errors || ARRAY['{"attempt": 1, "error": "A failed"}'::jsonb] WHERE id = %s$$, :ob_job)) AS ob_a_stale_error;
SELECT state, errors FROM oban_jobs;

-- ==== Oban: update_job rewinds the stamp of an executing job ====
-- Oban.update_job(job, fn job -> %{meta: Map.put(job.meta, "progress", 50)} end)
-- (lib/oban.ex: the fun runs on the caller's struct, basic.ex: lock, then
-- Repo.update of the changed fields) writes meta whole.  From a stale
-- delivery it writes back its own stamp; no trigger's WHEN clause names it.
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET state = 'executing', attempt = 2, meta = :'ob_meta_b'::jsonb, attempted_at = timezone('UTC', now());
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
SELECT pg_temp.as_delivery(:ob_a, format($$UPDATE oban_jobs SET meta = %L::jsonb || '{"progress": 50}'
	WHERE id IN (SELECT id FROM oban_jobs WHERE id = %s FOR UPDATE SKIP LOCKED)$$, :'ob_meta_a', :ob_job)) AS ob_a_stale_update_job;
-- now the live delivery B is refused and the stale A is accepted
SELECT pg_temp.as_delivery(:ob_b, format($$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = %s$$, :ob_job)) AS ob_b_live_complete;
SELECT pg_temp.as_delivery(:ob_a, format($$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = %s$$, :ob_job)) AS ob_a_stale_complete;
-- an operator's Oban.update_job(id, %{meta: %{batch_id: 456}}) on an
-- executing job (the example in Oban's own docs) drops the stamp: the live
-- delivery can then never end its job (LF011)
ALTER TABLE oban_jobs DISABLE TRIGGER USER;
UPDATE oban_jobs SET state = 'executing', meta = :'ob_meta_b'::jsonb;
ALTER TABLE oban_jobs ENABLE TRIGGER USER;
SELECT pg_temp.try(format($$UPDATE oban_jobs SET meta = '{"batch_id": 456}' WHERE id = %s$$, :ob_job)) AS ob_operator_update_job;
SELECT pg_temp.as_delivery(:ob_b, format($$UPDATE oban_jobs SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = %s$$, :ob_job)) AS ob_b_live_complete_after;

-- ==== River: a stale delivery writes its metadata into the newer run ====
-- JobUpdate (river_job.sql), sent by JobUpdateTx and by
-- ResumableSetStepTx / ResumableSetStepCursorTx (resumable_step_tx.go:
-- it checks only the in-memory job.State) merges into metadata of a job
-- that is running under B.  fencing_end asks for a state change or a
-- moved attempted_at: a metadata-only update is not checked.
\i examples/queues/river/schema.sql
\i examples/queues/river/install.sql
INSERT INTO river_job (kind) VALUES ('report');
CREATE FUNCTION pg_temp.river_get(client text) RETURNS TABLE (id bigint, tok bigint) LANGUAGE sql AS $$
	WITH locked_jobs AS (SELECT id FROM river_job WHERE state = 'available' AND queue = 'default' AND scheduled_at <= now()
		ORDER BY priority, scheduled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
	UPDATE river_job SET state = 'running', attempt = river_job.attempt + 1, attempted_at = now(),
		attempted_by = array_append(river_job.attempted_by, client)
	  FROM locked_jobs WHERE river_job.id = locked_jobs.id
	RETURNING river_job.id, (metadata->>'fencing_token')::bigint $$;
SELECT id AS rv_job, tok AS rv_a FROM pg_temp.river_get('A') \gset
ALTER TABLE river_job DISABLE TRIGGER USER;
UPDATE river_job SET attempted_at = now() - interval '61 minutes';
ALTER TABLE river_job ENABLE TRIGGER USER;
UPDATE river_job SET state = 'retryable', errors = ARRAY['{"error": "Stuck job rescued by Rescuer"}'::jsonb] WHERE state = 'running';
UPDATE river_job SET state = 'available' WHERE state = 'retryable';
SELECT id, tok AS rv_b FROM pg_temp.river_get('B') \gset
SELECT pg_temp.as_delivery(:rv_a, format($$WITH locked_job AS (SELECT id FROM river_job WHERE river_job.id = %s FOR UPDATE)
	UPDATE river_job SET metadata = CASE WHEN true THEN metadata || '{"river:resumable_step": "step3", "output": {"by": "A"}}'::jsonb ELSE metadata END
	  FROM locked_job WHERE river_job.id = locked_job.id RETURNING river_job.state$$, :rv_job)) AS rv_a_stale_job_update;
SELECT state, attempt, (metadata->>'fencing_token')::bigint = :rv_b AS stamp_is_b, metadata->>'river:resumable_step' AS step,
	   metadata->'output' AS output FROM river_job;

-- ==== pgmq: a live reader cannot end a batch it read ====
-- read(qty > 1) stamps each message with its own token; delete() and
-- archive() of many (msg_ids bigint[]) run in one statement, with one
-- declared token: every batch end of the live reader is refused.
\i examples/queues/pgmq/schema.sql
\i examples/queues/pgmq/install.sql
INSERT INTO pgmq.q_jobs (vt, message) VALUES (clock_timestamp(), '{"n": 1}'), (clock_timestamp(), '{"n": 2}');
-- pgmq.read('jobs', 30, 2) as one live reader
WITH cte AS (SELECT msg_id FROM pgmq.q_jobs WHERE vt <= clock_timestamp() ORDER BY msg_id ASC LIMIT 2 FOR UPDATE SKIP LOCKED),
	u AS (UPDATE pgmq.q_jobs m SET vt = clock_timestamp() + interval '30 seconds', read_ct = read_ct + 1
		  FROM cte WHERE m.msg_id = cte.msg_id RETURNING m.msg_id, (m.headers->>'fencing_token')::bigint AS tok)
SELECT min(tok) AS pq_t1, max(tok) AS pq_t2, count(*) AS pq_read FROM u \gset
SELECT :pq_read AS pq_read, :pq_t2 > :pq_t1 AS pq_two_stamps;
SELECT pg_temp.as_delivery(:pq_t1, $$DELETE FROM pgmq.q_jobs WHERE msg_id = ANY(ARRAY[1, 2]::bigint[]) RETURNING msg_id$$) AS pq_live_batch_delete;
SELECT pg_temp.as_delivery(:pq_t2, $$DELETE FROM pgmq.q_jobs WHERE msg_id = ANY(ARRAY[1, 2]::bigint[]) RETURNING msg_id$$) AS pq_live_batch_delete_t2;
SELECT pg_temp.try($$DELETE FROM pgmq.q_jobs WHERE msg_id = ANY(ARRAY[1, 2]::bigint[]) RETURNING msg_id$$) AS pq_live_batch_delete_tokenless;
-- an operator's set_vt(queue, msg_id, 0) (make a held message visible now): LF004
SELECT pg_temp.try($$UPDATE pgmq.q_jobs SET vt = (clock_timestamp() + interval '0 seconds') WHERE msg_id = 1 RETURNING msg_id$$) AS pq_operator_set_vt;
