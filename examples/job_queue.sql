-- examples/job_queue.sql: a job queue whose stale workers are fenced.
--
-- Load it with psql into a database that has the extension:
--
--     CREATE EXTENSION fencing;
--     \i examples/job_queue.sql
--
-- Every claim of a job gets a fresh fencing token, stored in the job's
-- fence column.  Heartbeat, complete and fail must present that token:
-- a worker whose claim expired and was taken over by another worker holds
-- an older token, and its writes are refused with SQLSTATE LF001 instead
-- of overwriting the newer worker's result.  Claims, heartbeats,
-- completions and failures all write through fencing.fence_advance; a claim,
-- which moves the fence, is durable before it is acknowledged even with
-- synchronous_commit = off, and the others, which keep it, are as durable
-- as synchronous_commit says (lost in a crash, the job is still claimed).
-- See examples/README.md.
--
-- Errors a worker can get back:
--   LF001  its token is stale: the job was reclaimed by a newer claim
--   LF003  the job does not exist
--   55000  the job is no longer running (its own claim, but already
--          completed, failed or reaped)
--   22023  the token was never issued for this job, or a bad argument
--
-- This file is plain SQL, without psql meta-commands and without a closing
-- brace character, so that it can be pasted as it is into the setup block
-- of an isolation spec (specs/job_queue_*.spec do so).  The recipe's and
-- the extension's objects are always schema-qualified (built-ins come from
-- pg_catalog).  Deadlines use clock_timestamp(), so expiry is judged by the
-- clock at the moment of the call, not at the start of a transaction.

CREATE SCHEMA job_queue;

COMMENT ON SCHEMA job_queue IS
	'A job queue whose workers are fenced with fencing tokens (examples/job_queue.sql)';

CREATE TABLE job_queue.jobs (
	id				bigserial PRIMARY KEY,
	queue			text NOT NULL,
	-- ready: waiting for a worker; running: claimed until lease_until;
	-- done: completed; failed: failed without retry; dead: out of attempts
	state			text NOT NULL DEFAULT 'ready'
					CHECK (state IN ('ready', 'running', 'done', 'failed', 'dead')),
	payload			jsonb NOT NULL,
	result			jsonb,
	-- token of the latest claim: only the holder of this token may write
	fence			bigint,
	lease_until		timestamptz,
	attempts		integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	max_attempts	integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
	last_error		text,
	created_at		timestamptz NOT NULL DEFAULT clock_timestamp(),
	updated_at		timestamptz NOT NULL DEFAULT clock_timestamp(),
	-- a running job always has a claim and a deadline
	CHECK (state <> 'running' OR (fence IS NOT NULL AND lease_until IS NOT NULL))
);

-- Claimable jobs are ready, or running with a lease that may have expired
-- (expiry depends on the clock, so it cannot be part of an index
-- predicate).  Finished jobs drop out of the index.
CREATE INDEX jobs_claimable ON job_queue.jobs (queue, id)
	WHERE state IN ('ready', 'running');

-- enqueue: a new job, ready to be claimed.
CREATE FUNCTION job_queue.enqueue(queue text, payload jsonb,
								  max_attempts integer DEFAULT 3)
RETURNS bigint
LANGUAGE sql
AS $$
	-- the defaults make it 'ready', never claimed (fence NULL), 0 attempts
	INSERT INTO job_queue.jobs AS j (queue, payload, max_attempts)
	VALUES (enqueue.queue, enqueue.payload, enqueue.max_attempts)
	RETURNING j.id
$$;

-- claim: take up to n jobs of a queue, each with its own fresh token.
-- A job is claimable when it is ready, or running with an expired lease
-- (its worker stalled or died: this is the reclaim), and has attempts left.
CREATE FUNCTION job_queue.claim(queue text, n integer, lease interval)
RETURNS TABLE (id bigint, payload jsonb, token bigint, attempt integer)
LANGUAGE plpgsql
AS $$
BEGIN
	-- a claim that is born expired, or no claim at all, is a caller's bug
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
		-- the oldest claimable jobs, locked; SKIP LOCKED passes over jobs
		-- another worker is claiming or writing right now instead of
		-- waiting for them, so two claims never return the same job.  A
		-- job changed since our snapshot is re-checked on its newest
		-- version before it is locked.
		SELECT j.id
		  FROM job_queue.jobs AS j
		 WHERE j.queue = claim.queue
		   AND (j.state = 'ready'
				OR (j.state = 'running'
					AND j.lease_until < clock_timestamp()))
		   AND j.attempts < j.max_attempts
		 ORDER BY j.id
		 LIMIT claim.n
		   FOR UPDATE SKIP LOCKED
	), issued AS (
		-- one fresh token per job, issued in job order: a token is larger
		-- than every token issued before, so it supersedes the old claim
		SELECT p.id, fencing.next_token() AS token
		  FROM picked AS p
		 ORDER BY p.id
	), claimed AS (
		-- the claim itself; fence_advance refuses to move the fence
		-- backwards (it cannot happen with fresh tokens: it is the
		-- invariant, checked)
		UPDATE job_queue.jobs AS j
		   SET state = 'running',
			   fence = fencing.fence_advance(j.fence, i.token),
			   lease_until = clock_timestamp() + claim.lease,
			   attempts = j.attempts + 1,
			   -- a reclaim records why the previous attempt ended
			   last_error = CASE WHEN j.state = 'running'
								 THEN 'lease of attempt ' || j.attempts || ' expired'
								 ELSE j.last_error END,
			   updated_at = clock_timestamp()
		  FROM issued AS i
		 WHERE j.id = i.id
		RETURNING j.id, j.payload, j.fence, j.attempts
	)
	SELECT c.id, c.payload, c.fence, c.attempts
	  FROM claimed AS c
	 ORDER BY c.id;
END
$$;

-- lock_claim: the checks shared by heartbeat, complete and fail, before
-- their fenced write.  Locks the job row and refuses, with a clear error,
-- the holder of the job's current token when the job is no longer running,
-- and a token newer than the job's claim.  A stale (older) token is left to
-- the fenced write, which raises LF001; a missing job likewise (LF003).
CREATE FUNCTION job_queue.lock_claim(id bigint, token bigint, action text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	cur_state	text;
	cur_fence	bigint;
BEGIN
	-- a NULL or non-positive token was never issued: fence_allows raises
	PERFORM fencing.fence_allows(NULL, lock_claim.token);

	-- Lock the job.  If another worker's reclaim of it is in flight, this
	-- waits until that commits and then reads the row it wrote: the
	-- checks here and the write that follows see the newest fence, and
	-- nothing can change the row between them.
	SELECT j.state, j.fence INTO cur_state, cur_fence
	  FROM job_queue.jobs AS j
	 WHERE j.id = lock_claim.id
	   FOR UPDATE;

	-- no such job, or an older token: the fenced write reports it
	IF NOT FOUND OR cur_fence > lock_claim.token THEN
		RETURN;
	END IF;

	-- Only the token of the job's latest claim may write.  A newer one
	-- belongs to another job's claim: accepting it would advance this
	-- job's fence and lock out its real worker.
	IF cur_fence IS NULL OR cur_fence < lock_claim.token THEN
		RAISE EXCEPTION 'fencing token % was not issued for job %',
			lock_claim.token, lock_claim.id
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = CASE WHEN cur_fence IS NULL
							   THEN format('Job %s was never claimed.', lock_claim.id)
							   ELSE format('Job %s was last claimed with token %s.',
										   lock_claim.id, cur_fence) END;
	END IF;

	-- The current claimant, but the job was already completed or failed
	-- (or reaped): a second write would undo the first.
	IF cur_state <> 'running' THEN
		RAISE EXCEPTION 'job % is not running', lock_claim.id
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('It is %s; only a running job accepts a %s.',
								  cur_state, lock_claim.action);
	END IF;
END
$$;

-- heartbeat: extend the lease of a running job; returns the new deadline.
-- A worker whose claim was superseded gets LF001: it must stop working.
CREATE FUNCTION job_queue.heartbeat(id bigint, token bigint, lease interval)
RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
	deadline	timestamptz;
	changed		bigint;
BEGIN
	IF heartbeat.lease IS NULL OR heartbeat.lease <= interval '0' THEN
		RAISE EXCEPTION 'lease must be positive'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- Fast path: the current claimant of a running job, one statement.
	-- fence_advance cannot refuse here (the fence equals the token), and
	-- the fence stays: the write is as durable as synchronous_commit says
	-- (lost in a crash, the job is still claimed by the same token).
	UPDATE job_queue.jobs AS j
	   SET fence = fencing.fence_advance(j.fence, heartbeat.token, true),
		   lease_until = clock_timestamp() + heartbeat.lease,
		   updated_at = clock_timestamp()
	 WHERE j.id = heartbeat.id AND j.fence = heartbeat.token
	   AND j.state = 'running'
	RETURNING j.lease_until INTO deadline;
	IF FOUND THEN
		RETURN deadline;
	END IF;

	-- Otherwise find out why, with the right error: lock the job, refuse
	-- a job that is not running any more, then the fenced write.
	PERFORM job_queue.lock_claim(heartbeat.id, heartbeat.token, 'heartbeat');

	-- The fenced write: fence_advance in the SET list runs for the row
	-- the UPDATE changes and raises LF001 if the token is older than the
	-- fence (allow_same: the claimant writes its own job again and again).
	-- expect_rows raises LF003 when no row was changed: no such job.
	WITH w AS (
		UPDATE job_queue.jobs AS j
		   SET fence = fencing.fence_advance(j.fence, heartbeat.token, true),
			   lease_until = clock_timestamp() + heartbeat.lease,
			   updated_at = clock_timestamp()
		 WHERE j.id = heartbeat.id
		RETURNING j.lease_until
	)
	SELECT max(w.lease_until), fencing.expect_rows(count(*))
	  INTO deadline, changed
	  FROM w;
	RETURN deadline;
END
$$;

-- complete: store the result of a running job; the job is done.
-- A worker whose claim was superseded gets LF001 and nothing changes:
-- the newer worker's claim or result stands.
CREATE FUNCTION job_queue.complete(id bigint, token bigint, result jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	changed		bigint;
BEGIN
	-- Fast path: the current claimant of a running job, one statement
	-- (fence_advance keeps the fence, as in heartbeat).
	UPDATE job_queue.jobs AS j
	   SET fence = fencing.fence_advance(j.fence, complete.token, true),
		   state = 'done',
		   result = complete.result,
		   lease_until = NULL,
		   updated_at = clock_timestamp()
	 WHERE j.id = complete.id AND j.fence = complete.token
	   AND j.state = 'running';
	IF FOUND THEN
		RETURN;
	END IF;

	-- Otherwise find out why, with the right error: lock the job, refuse
	-- a job that is not running any more, then the fenced write.
	PERFORM job_queue.lock_claim(complete.id, complete.token, 'completion');

	-- the fenced write (see heartbeat): LF001 if stale, LF003 if missing
	WITH w AS (
		UPDATE job_queue.jobs AS j
		   SET fence = fencing.fence_advance(j.fence, complete.token, true),
			   state = 'done',
			   result = complete.result,
			   lease_until = NULL,
			   updated_at = clock_timestamp()
		 WHERE j.id = complete.id
		RETURNING 1
	)
	SELECT fencing.expect_rows(count(*)) INTO changed
	  FROM w;
END
$$;

-- fail: report a failed attempt.  The job goes back to 'ready' while it
-- has attempts left, else it is 'dead'; with retry => false it is 'failed'
-- at once (an error no retry can fix).  Returns the job's new state.
-- Fenced like complete: a superseded worker's failure changes nothing.
CREATE FUNCTION job_queue.fail(id bigint, token bigint, error text,
							   retry boolean DEFAULT true)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
	new_state	text;
	changed		bigint;
BEGIN
	-- lock the job; refuse a job that is not running any more
	PERFORM job_queue.lock_claim(fail.id, fail.token, 'failure');

	-- the fenced write (see heartbeat): LF001 if stale, LF003 if missing.
	-- The fence keeps this token: it is the job's latest claim until the
	-- next claim issues a newer one.
	WITH w AS (
		UPDATE job_queue.jobs AS j
		   SET fence = fencing.fence_advance(j.fence, fail.token, true),
			   state = CASE WHEN NOT fail.retry THEN 'failed'
							WHEN j.attempts < j.max_attempts THEN 'ready'
							ELSE 'dead' END,
			   last_error = fail.error,
			   lease_until = NULL,
			   updated_at = clock_timestamp()
		 WHERE j.id = fail.id
		RETURNING j.state
	)
	SELECT max(w.state), fencing.expect_rows(count(*))
	  INTO new_state, changed
	  FROM w;
	RETURN new_state;
END
$$;

-- reap: jobs whose last allowed attempt expired are 'dead' (claim no
-- longer takes them, so without this they would stay 'running' forever).
-- Returns their ids.  A worker that wakes up after that gets 55000.
CREATE FUNCTION job_queue.reap()
RETURNS SETOF bigint
LANGUAGE sql
AS $$
	-- A heartbeat or completion in flight holds the row lock: the UPDATE
	-- waits for it and re-checks state and deadline on the newest row, so
	-- a job its worker just extended or completed is left alone.
	UPDATE job_queue.jobs AS j
	   SET state = 'dead',
		   last_error = 'lease of attempt ' || j.attempts || ' expired; no attempts left',
		   lease_until = NULL,
		   updated_at = clock_timestamp()
	 WHERE j.state = 'running'
	   AND j.lease_until < clock_timestamp()
	   AND j.attempts >= j.max_attempts
	RETURNING j.id
$$;
