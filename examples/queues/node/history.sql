-- history.sql: the experiment around the pg-boss and graphile-worker
-- recipes (t/080_queues_node.pl).  Not part of a recipe.
--
-- Every job has a row in qtest.domain, the resource its deliveries write.
-- qtest.history records, in commit order per job (a row lock orders
-- them): each claim (with the token the claim stamped), each write the
-- domain accepted, each heartbeat the queue accepted, and each completion
-- or failure the queue accepted, with the token of the delivery that sent
-- it.  Refusals roll back and
-- leave nothing here; the workers count them in their logs.
CREATE SCHEMA qtest;
CREATE TABLE qtest.domain (
	job			text PRIMARY KEY,
	fence		bigint,
	last_token	bigint,
	writes		int NOT NULL DEFAULT 0
);
CREATE TABLE qtest.history (
	seq			bigserial PRIMARY KEY,
	job			text NOT NULL,
	kind		text NOT NULL CHECK (kind IN ('claim', 'write', 'heartbeat', 'complete', 'fail')),
	token		bigint,
	step		int,
	worker		int,
	at			timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
CREATE INDEX ON qtest.history (job, seq);

-- The checker.  Per job: the accepted write tokens never go down (a write
-- accepted after a newer delivery wrote is a stale write), the domain row
-- carries the largest accepted token, and no heartbeat, completion or
-- failure was accepted from a delivery older than a claim made before it.
-- Per job also: how many times it was claimed (a job claimed again while
-- its first delivery was alive and heartbeating is what heartbeats are
-- there to prevent; the test knows which deliveries it froze).
CREATE FUNCTION qtest.check(OUT jobs bigint, OUT deliveries bigint,
							OUT writes bigint, OUT stale_writes bigint,
							OUT final_row_violations bigint,
							OUT stale_completions bigint,
							OUT stale_heartbeats bigint,
							OUT completed_jobs bigint,
							OUT redelivered_jobs text,
							OUT violations bigint)
LANGUAGE sql AS $$
	WITH w AS (
		SELECT h.job, h.token,
			   h.token < max(h.token) OVER (PARTITION BY h.job ORDER BY h.seq
											ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS stale
		  FROM qtest.history AS h WHERE h.kind = 'write'
	), c AS (
		SELECT h.job, h.kind,
			   h.token IS NULL OR h.token < (SELECT max(c.token) FROM qtest.history AS c
											  WHERE c.job = h.job AND c.kind = 'claim'
												AND c.seq < h.seq) AS stale
		  FROM qtest.history AS h WHERE h.kind IN ('heartbeat', 'complete', 'fail')
	)
	SELECT (SELECT count(*) FROM qtest.domain),
		   (SELECT count(*) FROM qtest.history WHERE kind = 'claim'),
		   (SELECT count(*) FROM w),
		   (SELECT count(*) FROM w WHERE stale),
		   (SELECT count(*) FROM qtest.domain AS d
			 WHERE d.last_token IS DISTINCT FROM
				   (SELECT max(w.token) FROM w WHERE w.job = d.job)),
		   (SELECT count(*) FROM c WHERE stale AND kind <> 'heartbeat'),
		   (SELECT count(*) FROM c WHERE stale AND kind = 'heartbeat'),
		   (SELECT count(DISTINCT job) FROM c WHERE kind = 'complete'),
		   (SELECT coalesce(string_agg(job, ',' ORDER BY job), '')
			  FROM (SELECT job FROM qtest.history WHERE kind = 'claim'
					 GROUP BY job HAVING count(*) > 1) AS r),
		   (SELECT count(*) FROM w WHERE stale)
		   + (SELECT count(*) FROM qtest.domain AS d
			   WHERE d.last_token IS DISTINCT FROM
					 (SELECT max(w.token) FROM w WHERE w.job = d.job))
		   + (SELECT count(*) FROM c WHERE stale)
$$;
