-- The part of Solid Queue's schema the recipe touches, as its schema
-- creates it (rails/solid_queue, lib/generators/solid_queue/install/
-- templates/db/queue_schema.rb, and app/models/solid_queue/
-- claimed_execution.rb at commit 29e818d9, 2026-07-24, after v1.5.0),
-- reduced to the columns its
-- claim, release and finish use.
CREATE TABLE solid_queue_jobs (
	id				bigserial PRIMARY KEY,
	queue_name		varchar NOT NULL,
	class_name		varchar NOT NULL,
	arguments		text,
	priority		integer NOT NULL DEFAULT 0,
	finished_at		timestamp(6),
	created_at		timestamp(6) NOT NULL DEFAULT now(),
	updated_at		timestamp(6) NOT NULL DEFAULT now()
);
CREATE TABLE solid_queue_processes (
	id				bigserial PRIMARY KEY,
	kind			varchar NOT NULL,
	last_heartbeat_at timestamp(6) NOT NULL DEFAULT now(),
	pid				integer NOT NULL,
	name			varchar NOT NULL
);
CREATE TABLE solid_queue_ready_executions (
	id				bigserial PRIMARY KEY,
	job_id			bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
	queue_name		varchar NOT NULL,
	priority		integer NOT NULL DEFAULT 0,
	created_at		timestamp(6) NOT NULL DEFAULT now()
);
CREATE TABLE solid_queue_claimed_executions (
	id				bigserial PRIMARY KEY,
	job_id			bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
	process_id		bigint,
	created_at		timestamp(6) NOT NULL DEFAULT now()
);
CREATE TABLE solid_queue_failed_executions (
	id				bigserial PRIMARY KEY,
	job_id			bigint NOT NULL UNIQUE REFERENCES solid_queue_jobs ON DELETE CASCADE,
	error			text,
	created_at		timestamp(6) NOT NULL DEFAULT now()
);
