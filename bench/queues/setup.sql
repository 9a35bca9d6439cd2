-- bench/queues/setup.sql: one table per recipe and contender.  Schema fq
-- has the recipe's triggers (examples/queues/<queue>/install.sql, on the
-- same shapes), schema pq is the queue as it ships.  Columns reduced to
-- those the claim and completion touch.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
DO $$
DECLARE
	s text;
BEGIN
	FOREACH s IN ARRAY ARRAY['fq', 'pq'] LOOP
		EXECUTE format($f$
		CREATE SCHEMA %1$I;
		-- pg-boss 12: job, data jsonb, output jsonb, heartbeat_on
		CREATE TABLE %1$I.boss (id bigserial PRIMARY KEY, name text NOT NULL DEFAULT 'q',
			state text NOT NULL DEFAULT 'created', data jsonb, output jsonb,
			started_on timestamptz, completed_on timestamptz, retry_count int NOT NULL DEFAULT 0,
			heartbeat_on timestamptz);
		CREATE INDEX ON %1$I.boss (id) WHERE state IN ('created', 'retry');
		-- graphile-worker 0.18: _private_jobs
		CREATE TABLE %1$I.gw (id bigserial PRIMARY KEY, task_id int NOT NULL DEFAULT 1,
			payload json NOT NULL DEFAULT '{}', attempts smallint NOT NULL DEFAULT 0,
			locked_at timestamptz, locked_by text, fencing_token bigint);
		CREATE INDEX ON %1$I.gw (id) WHERE locked_at IS NULL;
		-- River: river_job
		CREATE TABLE %1$I.river (id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'available',
			attempt smallint NOT NULL DEFAULT 0, attempted_at timestamptz, attempted_by text[],
			finalized_at timestamptz, args jsonb NOT NULL DEFAULT '{}', metadata jsonb NOT NULL DEFAULT '{}');
		CREATE INDEX ON %1$I.river (id) WHERE state = 'available';
		-- Oban: oban_jobs
		CREATE TABLE %1$I.oban (id bigserial PRIMARY KEY, state text NOT NULL DEFAULT 'available',
			attempt int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 20,
			attempted_at timestamp, attempted_by text[], completed_at timestamp,
			args jsonb NOT NULL DEFAULT '{}', meta jsonb NOT NULL DEFAULT '{}');
		CREATE INDEX ON %1$I.oban (id) WHERE state = 'available';
		-- Solid Queue: jobs, ready and claimed executions
		CREATE TABLE %1$I.sq_jobs (id bigserial PRIMARY KEY, queue_name text NOT NULL DEFAULT 'default',
			finished_at timestamp);
		CREATE TABLE %1$I.sq_ready (id bigserial PRIMARY KEY, job_id bigint NOT NULL UNIQUE,
			priority int NOT NULL DEFAULT 0);
		CREATE TABLE %1$I.sq_claimed (id bigserial PRIMARY KEY, job_id bigint NOT NULL UNIQUE,
			process_id bigint, fencing_token bigint);
		-- pgmq: q_jobs
		CREATE TABLE %1$I.mq (msg_id bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
			read_ct int NOT NULL DEFAULT 0, enqueued_at timestamptz NOT NULL DEFAULT now(),
			vt timestamptz NOT NULL DEFAULT now(), message jsonb, headers jsonb);
		CREATE INDEX ON %1$I.mq (vt);
		$f$, s);
	END LOOP;
END $$;

-- the recipes of examples/queues/, on these tables
CREATE TRIGGER fencing_stampable BEFORE INSERT ON fq.boss FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stampable('data->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON fq.boss FOR EACH ROW
	WHEN (NEW.state = 'active' AND OLD.state <> 'active')
	EXECUTE FUNCTION fencing.claim_stamp('data->fencing_token');
CREATE TRIGGER fencing_complete BEFORE UPDATE ON fq.boss FOR EACH ROW
	WHEN (NEW.state = 'completed' AND OLD.state = 'active')
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE ON fq.boss FOR EACH ROW
	WHEN (NEW.state = 'active' AND OLD.state = 'active'
		  AND NEW.heartbeat_on IS DISTINCT FROM OLD.heartbeat_on)
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token');
CREATE TRIGGER fencing_fail BEFORE INSERT ON fq.boss FOR EACH ROW
	WHEN (NEW.state IN ('retry', 'failed') AND NEW.started_on IS NOT NULL
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job timed out"}}'::jsonb
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job heartbeat timeout"}}'::jsonb)
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON fq.gw FOR EACH ROW
	WHEN (NEW.attempts > OLD.attempts AND NEW.locked_by IS NOT NULL
		  AND NEW.locked_at IS DISTINCT FROM OLD.locked_at)
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE ON fq.gw FOR EACH ROW
	WHEN (NEW.attempts = OLD.attempts AND OLD.locked_by IS NOT NULL
		  AND NEW.locked_by IS NOT DISTINCT FROM OLD.locked_by
		  AND NEW.locked_at IS DISTINCT FROM OLD.locked_at)
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
CREATE TRIGGER fencing_unlock BEFORE UPDATE ON fq.gw FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL AND NEW.locked_by IS NULL AND NEW.attempts <= OLD.attempts)
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_complete BEFORE DELETE ON fq.gw FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL AND OLD.locked_at >= pg_catalog.now() - interval '4 hours')
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
CREATE TRIGGER fencing_complete_dead_lock BEFORE DELETE ON fq.gw FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL AND OLD.locked_at < pg_catalog.now() - interval '4 hours')
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_stampable BEFORE INSERT ON fq.river FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stampable('metadata->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON fq.river FOR EACH ROW
	WHEN (NEW.attempt > OLD.attempt AND NEW.state = 'running')
	EXECUTE FUNCTION fencing.claim_stamp('metadata->fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE ON fq.river FOR EACH ROW
	WHEN (OLD.state = 'running' AND NEW.attempt <= OLD.attempt
		  AND (NEW.state <> 'running' OR NEW.attempted_at IS DISTINCT FROM OLD.attempted_at)
		  AND OLD.attempted_at >= pg_catalog.now() - interval '1 hour')
	EXECUTE FUNCTION fencing.claim_guard('metadata->fencing_token');
CREATE TRIGGER fencing_end_stuck BEFORE UPDATE ON fq.river FOR EACH ROW
	WHEN (OLD.state = 'running' AND NEW.attempt <= OLD.attempt
		  AND (NEW.state <> 'running' OR NEW.attempted_at IS DISTINCT FROM OLD.attempted_at)
		  AND OLD.attempted_at < pg_catalog.now() - interval '1 hour')
	EXECUTE FUNCTION fencing.claim_guard('metadata->fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_stampable BEFORE INSERT ON fq.oban FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stampable('meta->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON fq.oban FOR EACH ROW
	WHEN (NEW.attempt > OLD.attempt AND NEW.state = 'executing')
	EXECUTE FUNCTION fencing.claim_stamp('meta->fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE ON fq.oban FOR EACH ROW
	WHEN (OLD.state = 'executing' AND NEW.state = 'executing' AND NEW.attempt = OLD.attempt
		  AND NEW.attempted_at IS DISTINCT FROM OLD.attempted_at)
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE ON fq.oban FOR EACH ROW
	WHEN (NEW.attempt <= OLD.attempt AND NEW.state IN ('completed', 'retryable', 'scheduled', 'discarded')
		  AND (OLD.state = 'executing' OR NEW.state <> OLD.state)
		  AND NOT (OLD.state = 'executing' AND NEW.state = 'discarded'
				   AND OLD.attempted_at < pg_catalog.timezone('UTC', pg_catalog.now()) - interval '60 minutes'))
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token');
CREATE TRIGGER fencing_end_rescued BEFORE UPDATE ON fq.oban FOR EACH ROW
	WHEN (OLD.state = 'executing' AND NEW.state = 'discarded'
		  AND OLD.attempted_at < pg_catalog.timezone('UTC', pg_catalog.now()) - interval '60 minutes')
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_cancel BEFORE UPDATE ON fq.oban FOR EACH ROW
	WHEN (NEW.state = 'cancelled' AND OLD.state <> 'cancelled')
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_claim BEFORE INSERT ON fq.sq_claimed FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_finish BEFORE DELETE ON fq.sq_claimed FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_stampable BEFORE INSERT OR UPDATE OF headers ON fq.mq FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stampable('headers->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON fq.mq FOR EACH ROW
	WHEN (NEW.read_ct > OLD.read_ct)
	EXECUTE FUNCTION fencing.claim_stamp('headers->fencing_token');
CREATE TRIGGER fencing_ack BEFORE DELETE ON fq.mq FOR EACH ROW
	WHEN (OLD.read_ct > 0 AND OLD.vt > pg_catalog.clock_timestamp())
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token');
CREATE TRIGGER fencing_ack_visible BEFORE DELETE ON fq.mq FOR EACH ROW
	WHEN (OLD.read_ct > 0 AND OLD.vt <= pg_catalog.clock_timestamp())
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_set_vt BEFORE UPDATE ON fq.mq FOR EACH ROW
	WHEN (NEW.read_ct = OLD.read_ct AND OLD.read_ct > 0)
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token');

-- a backlog, so a claim always finds a job
DO $$
DECLARE
	s text;
BEGIN
	FOREACH s IN ARRAY ARRAY['fq', 'pq'] LOOP
		EXECUTE format($f$
		INSERT INTO %1$I.boss (data) SELECT '{"n": 1}' FROM generate_series(1, 5000);
		INSERT INTO %1$I.gw (payload) SELECT '{}' FROM generate_series(1, 5000);
		INSERT INTO %1$I.river (args) SELECT '{}' FROM generate_series(1, 5000);
		INSERT INTO %1$I.oban (args) SELECT '{}' FROM generate_series(1, 5000);
		INSERT INTO %1$I.sq_jobs (queue_name) SELECT 'default' FROM generate_series(1, 5000);
		INSERT INTO %1$I.sq_ready (job_id) SELECT id FROM %1$I.sq_jobs;
		INSERT INTO %1$I.mq (message) SELECT '{"n": 1}' FROM generate_series(1, 5000);
		$f$, s);
	END LOOP;
END $$;
VACUUM ANALYZE;
