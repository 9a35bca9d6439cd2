-- The part of Oban's schema the recipe touches: oban_jobs, as Oban's
-- migrations create it (oban-bg/oban, lib/oban/migrations/postgres, and the
-- Basic engine's queries in lib/oban/engines/basic.ex at commit 2939e313,
-- 2026-08-18, after v2.23.0), reduced to the columns its fetch, Lifeline
-- rescue, completion and operator statements use.
CREATE TYPE oban_job_state AS ENUM ('available', 'scheduled', 'executing',
	'retryable', 'completed', 'discarded', 'cancelled');
CREATE TABLE oban_jobs (
	id				bigserial PRIMARY KEY,
	state			oban_job_state NOT NULL DEFAULT 'available',
	queue			text NOT NULL DEFAULT 'default',
	worker			text NOT NULL,
	args			jsonb NOT NULL DEFAULT '{}',
	meta			jsonb NOT NULL DEFAULT '{}',
	errors			jsonb[] NOT NULL DEFAULT '{}',
	attempt			integer NOT NULL DEFAULT 0,
	max_attempts	integer NOT NULL DEFAULT 20,
	priority		integer NOT NULL DEFAULT 0,
	inserted_at		timestamp NOT NULL DEFAULT timezone('UTC', now()),
	scheduled_at	timestamp NOT NULL DEFAULT timezone('UTC', now()),
	attempted_at	timestamp,
	attempted_by	text[],
	completed_at	timestamp,
	discarded_at	timestamp,
	cancelled_at	timestamp
);
