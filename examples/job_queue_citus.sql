-- examples/job_queue_citus.sql: the job-queue recipe with job_queue.jobs
-- distributed by Citus (docs/citus.md).
--
-- On the Citus coordinator, in a database that has both extensions:
--
--     \i examples/job_queue.sql
--     SELECT create_distributed_table('job_queue.jobs', 'id');
--     \i examples/job_queue_citus.sql
--
-- It replaces the functions of examples/job_queue.sql whose statements
-- Citus cannot run on a distributed table, and keeps their behaviour,
-- errors and fencing:
--   - Citus refuses VOLATILE functions in the SET list and WHERE clause of
--     an UPDATE of a distributed table: clock_timestamp() is read into a
--     variable first (still the clock at the moment of the call), and
--     fencing.next_token() is drawn on the coordinator, one statement
--     before the write that stores it; text || integer (STABLE) becomes
--     text || integer::text.  fence_advance is IMMUTABLE, so
--     Citus sends it to the worker with the row, where it refuses a stale
--     token with LF001; the coordinator returns that error as it is.
--   - Citus locks rows (FOR UPDATE) only in single-shard statements: a
--     claim first lists candidate jobs across all shards without locking
--     them, then locks and claims them one by one, each by its id (one
--     shard), skipping a job another claim holds (SKIP LOCKED) and
--     re-checking on the locked row that it is still claimable.
-- Tokens come from the coordinator's fencing.next_token() only; workers
-- never issue them.  enqueue, lock_claim, heartbeat's and complete's
-- diagnosis and fail keep their single-node text where Citus runs it as is
-- (router statements by id); only what differs is here.

-- claim: as in job_queue.sql (oldest claimable jobs of the queue, a fresh
-- token per job, two claims never return the same job), in single-shard
-- steps.
CREATE OR REPLACE FUNCTION job_queue.claim(queue text, n integer, lease interval)
RETURNS TABLE (id bigint, payload jsonb, token bigint, attempt integer)
LANGUAGE plpgsql
AS $$
DECLARE
	cand		bigint;
	t			bigint;
	ts			timestamptz;
	got			integer := 0;
BEGIN
	IF claim.n IS NULL OR claim.n < 1 THEN
		RAISE EXCEPTION 'number of jobs to claim must be at least 1'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF claim.lease IS NULL OR claim.lease <= interval '0' THEN
		RAISE EXCEPTION 'lease must be positive'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;

	-- candidates from every shard, oldest first, not locked yet: a few
	-- more than asked for, since some may be taken meanwhile
	FOR cand IN
		SELECT j.id
		  FROM job_queue.jobs AS j
		 WHERE j.queue = claim.queue
		   AND (j.state = 'ready'
				OR (j.state = 'running'
					AND j.lease_until < clock_timestamp()))
		   AND j.attempts < j.max_attempts
		 ORDER BY j.id
		 LIMIT claim.n * 4
	LOOP
		-- lock it (one shard); another claim holding it keeps it
		ts := pg_catalog.clock_timestamp();
		PERFORM 1
		   FROM job_queue.jobs AS j
		  WHERE j.id = cand
			AND (j.state = 'ready'
				 OR (j.state = 'running' AND j.lease_until < ts))
			AND j.attempts < j.max_attempts
			FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;

		-- a fresh token from the coordinator, then the claim on the row
		-- (locked: nothing changed it since the check)
		t := fencing.next_token();
		ts := pg_catalog.clock_timestamp();
		RETURN QUERY
		UPDATE job_queue.jobs AS j
		   SET state = 'running',
			   fence = fencing.fence_advance(j.fence, t),
			   lease_until = ts + claim.lease,
			   attempts = j.attempts + 1,
			   last_error = CASE WHEN j.state = 'running'
								 THEN 'lease of attempt ' || j.attempts::text || ' expired'
								 ELSE j.last_error END,
			   updated_at = ts
		 WHERE j.id = cand
		RETURNING j.id, j.payload, j.fence, j.attempts;
		got := got + 1;
		EXIT WHEN got >= claim.n;
	END LOOP;
END
$$;

-- heartbeat: as in job_queue.sql, the clock read first
CREATE OR REPLACE FUNCTION job_queue.heartbeat(id bigint, token bigint, lease interval)
RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
	deadline	timestamptz;
	changed		bigint;
	ts			timestamptz;
BEGIN
	IF heartbeat.lease IS NULL OR heartbeat.lease <= interval '0' THEN
		RAISE EXCEPTION 'lease must be positive'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	ts := pg_catalog.clock_timestamp();
	UPDATE job_queue.jobs AS j
	   SET fence = fencing.fence_advance(j.fence, heartbeat.token, true),
		   lease_until = ts + heartbeat.lease,
		   updated_at = ts
	 WHERE j.id = heartbeat.id AND j.fence = heartbeat.token
	   AND j.state = 'running'
	RETURNING j.lease_until INTO deadline;
	IF FOUND THEN
		RETURN deadline;
	END IF;

	PERFORM job_queue.lock_claim(heartbeat.id, heartbeat.token, 'heartbeat');

	ts := pg_catalog.clock_timestamp();
	UPDATE job_queue.jobs AS j
	   SET fence = fencing.fence_advance(j.fence, heartbeat.token, true),
		   lease_until = ts + heartbeat.lease,
		   updated_at = ts
	 WHERE j.id = heartbeat.id
	RETURNING j.lease_until INTO deadline;
	GET DIAGNOSTICS changed = ROW_COUNT;
	PERFORM fencing.expect_rows(changed);
	RETURN deadline;
END
$$;

-- complete: as in job_queue.sql, the clock read first
CREATE OR REPLACE FUNCTION job_queue.complete(id bigint, token bigint, result jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	changed		bigint;
	ts			timestamptz := pg_catalog.clock_timestamp();
BEGIN
	UPDATE job_queue.jobs AS j
	   SET fence = fencing.fence_advance(j.fence, complete.token, true),
		   state = 'done',
		   result = complete.result,
		   lease_until = NULL,
		   updated_at = ts
	 WHERE j.id = complete.id AND j.fence = complete.token
	   AND j.state = 'running';
	IF FOUND THEN
		RETURN;
	END IF;

	PERFORM job_queue.lock_claim(complete.id, complete.token, 'completion');

	ts := pg_catalog.clock_timestamp();
	UPDATE job_queue.jobs AS j
	   SET fence = fencing.fence_advance(j.fence, complete.token, true),
		   state = 'done',
		   result = complete.result,
		   lease_until = NULL,
		   updated_at = ts
	 WHERE j.id = complete.id;
	GET DIAGNOSTICS changed = ROW_COUNT;
	PERFORM fencing.expect_rows(changed);
END
$$;

-- fail: as in job_queue.sql, the clock read first
CREATE OR REPLACE FUNCTION job_queue.fail(id bigint, token bigint, error text,
										  retry boolean DEFAULT true)
RETURNS text
LANGUAGE plpgsql
AS $$
DECLARE
	new_state	text;
	changed		bigint;
	ts			timestamptz;
BEGIN
	PERFORM job_queue.lock_claim(fail.id, fail.token, 'failure');

	ts := pg_catalog.clock_timestamp();
	UPDATE job_queue.jobs AS j
	   SET fence = fencing.fence_advance(j.fence, fail.token, true),
		   state = CASE WHEN NOT fail.retry THEN 'failed'
						WHEN j.attempts < j.max_attempts THEN 'ready'
						ELSE 'dead' END,
		   last_error = fail.error,
		   lease_until = NULL,
		   updated_at = ts
	 WHERE j.id = fail.id
	RETURNING j.state INTO new_state;
	GET DIAGNOSTICS changed = ROW_COUNT;
	PERFORM fencing.expect_rows(changed);
	RETURN new_state;
END
$$;

-- reap: as in job_queue.sql (a multi-shard UPDATE), the clock read first
CREATE OR REPLACE FUNCTION job_queue.reap()
RETURNS SETOF bigint
LANGUAGE plpgsql
AS $$
DECLARE
	ts			timestamptz := pg_catalog.clock_timestamp();
BEGIN
	RETURN QUERY
	UPDATE job_queue.jobs AS j
	   SET state = 'dead',
		   last_error = 'lease of attempt ' || j.attempts::text || ' expired; no attempts left',
		   lease_until = NULL,
		   updated_at = ts
	 WHERE j.state = 'running'
	   AND j.lease_until < ts
	   AND j.attempts >= j.max_attempts
	RETURNING j.id;
END
$$;
