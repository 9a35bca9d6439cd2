-- bench/queues/setup.sql: one table per recipe and contender.  Schema fq
-- has the recipe's triggers (examples/queues/<queue>/install.sql as
-- shipped, with the table names of this file: psql -v recipes=FILE), schema
-- pq is the queue as it ships.  Columns reduced to those the queues'
-- statements and the recipes' WHEN clauses touch.
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

-- the recipes: examples/queues/<queue>/install.sql as shipped, on the
-- tables of schema fq (run.sh renames the tables; recipes.sql)
\i :recipes

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
