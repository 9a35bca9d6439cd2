-- bench/plain_queue.sql: the job queue of examples/job_queue.sql without
-- fencing, as the baseline for bench/run.sh: the same table (less the fence
-- column), the same index, the same SKIP LOCKED claim, and a complete that
-- writes unconditionally (no token, no lock_claim, no fence_advance, no
-- expect_rows).  Both are PL/pgSQL functions with the same signatures, so
-- the difference measured is what fencing adds.

CREATE SCHEMA plain_queue;

CREATE TABLE plain_queue.jobs (
	id				bigserial PRIMARY KEY,
	queue			text NOT NULL,
	state			text NOT NULL DEFAULT 'ready'
					CHECK (state IN ('ready', 'running', 'done', 'failed', 'dead')),
	payload			jsonb NOT NULL,
	result			jsonb,
	lease_until		timestamptz,
	attempts		integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts	integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	last_error		text,
	created_at		timestamptz NOT NULL DEFAULT clock_timestamp(),
	updated_at		timestamptz NOT NULL DEFAULT clock_timestamp(),
	CHECK (state <> 'running' OR lease_until IS NOT NULL)
);

CREATE INDEX jobs_claimable ON plain_queue.jobs (queue, id)
	WHERE state IN ('ready', 'running');

-- claim: up to n jobs; the token column is the attempt number, so that the
-- result has the same shape as job_queue.claim
CREATE FUNCTION plain_queue.claim(queue text, n integer, lease interval)
RETURNS TABLE (id bigint, payload jsonb, token bigint, attempt integer)
LANGUAGE plpgsql
AS $$
BEGIN
	IF claim.n IS NULL OR claim.n < 1 THEN
		RAISE EXCEPTION 'number of jobs to claim must be at least 1'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF claim.lease IS NULL OR claim.lease <= interval '0' THEN
		RAISE EXCEPTION 'lease must be positive'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;

	RETURN QUERY
	WITH picked AS (
		SELECT j.id
		  FROM plain_queue.jobs AS j
		 WHERE j.queue = claim.queue
		   AND (j.state = 'ready'
				OR (j.state = 'running'
					AND j.lease_until < clock_timestamp()))
		   AND j.attempts < j.max_attempts
		 ORDER BY j.id
		 LIMIT claim.n
		   FOR UPDATE SKIP LOCKED
	), claimed AS (
		UPDATE plain_queue.jobs AS j
		   SET state = 'running',
			   lease_until = clock_timestamp() + claim.lease,
			   attempts = j.attempts + 1,
			   last_error = CASE WHEN j.state = 'running'
								 THEN 'lease of attempt ' || j.attempts || ' expired'
								 ELSE j.last_error END,
			   updated_at = clock_timestamp()
		  FROM picked AS p
		 WHERE j.id = p.id
		RETURNING j.id, j.payload, j.attempts
	)
	SELECT c.id, c.payload, c.attempts::bigint, c.attempts
	  FROM claimed AS c
	 ORDER BY c.id;
END
$$;

-- complete: unconditional; a stale worker overwrites whatever is there
CREATE FUNCTION plain_queue.complete(id bigint, token bigint, result jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	UPDATE plain_queue.jobs AS j
	   SET state = 'done',
		   result = complete.result,
		   lease_until = NULL,
		   updated_at = clock_timestamp()
	 WHERE j.id = complete.id;
END
$$;
