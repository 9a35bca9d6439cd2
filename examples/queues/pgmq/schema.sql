-- A pgmq queue table, as pgmq.create('jobs') makes it (pgmq/pgmq,
-- pgmq-extension/sql/pgmq.sql at commit c8575e31, 2025-05-12, after
-- v1.5.1; headers since 1.5.0): the queue pgmq.q_jobs and its archive
-- pgmq.a_jobs.
CREATE SCHEMA pgmq;
CREATE TABLE pgmq.q_jobs (
	msg_id			bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
	read_ct			integer NOT NULL DEFAULT 0,
	enqueued_at		timestamptz NOT NULL DEFAULT now(),
	vt				timestamptz NOT NULL,
	message			jsonb,
	headers			jsonb
);
CREATE TABLE pgmq.a_jobs (
	msg_id			bigint PRIMARY KEY,
	read_ct			integer NOT NULL DEFAULT 0,
	enqueued_at		timestamptz NOT NULL DEFAULT now(),
	archived_at		timestamptz NOT NULL DEFAULT now(),
	vt				timestamptz NOT NULL,
	message			jsonb,
	headers			jsonb
);
