-- The part of River's schema the recipe touches: river_job and its state
-- type, as River's migrations create them (riverqueue/river,
-- riverdriver/riverpgxv5/internal/dbsqlc/river_job.sql at commit fdf6cdf1,
-- 2026-08-07, after v0.43.0), reduced to the columns its claim, rescue,
-- completion and operator statements use.
CREATE TYPE river_job_state AS ENUM ('available', 'cancelled', 'completed',
	'discarded', 'pending', 'retryable', 'running', 'scheduled');
CREATE TABLE river_job (
	id				bigserial PRIMARY KEY,
	args			jsonb NOT NULL DEFAULT '{}',
	attempt			smallint NOT NULL DEFAULT 0,
	attempted_at	timestamptz,
	attempted_by	text[],
	errors			jsonb[],
	finalized_at	timestamptz,
	kind			text NOT NULL,
	max_attempts	smallint NOT NULL DEFAULT 25,
	metadata		jsonb NOT NULL DEFAULT '{}',
	priority		smallint NOT NULL DEFAULT 1,
	queue			text NOT NULL DEFAULT 'default',
	state			river_job_state NOT NULL DEFAULT 'available',
	scheduled_at	timestamptz NOT NULL DEFAULT now()
);
