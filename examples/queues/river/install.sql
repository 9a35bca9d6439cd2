-- Fencing for River (schema as in schema.sql, statements of river_job.sql
-- at commit fdf6cdf1).  One line per transition:
--
-- 1. The claim (JobGetAvailable) sets state 'running' and adds one to
--    attempt.  The stamp goes into metadata, which the claim returns to
--    the worker (job.Metadata, key fencing_token; River's generated
--    queries list River's own columns, so an added column would not reach
--    the worker).
-- 2. Every write: a token it brings (SET LOCAL fencing.token) must be the
--    job's stamp, whatever the job's state, so a stale worker's
--    JobCompleteTx, JobUpdateTx or ResumableSetStepTx is refused (LF001)
--    also on a job running under a newer delivery.  No write but the
--    claim changes the stamp: metadata written whole keeps it, and
--    metadata that is not a JSON object is refused at insert (42804).
-- 3. The heartbeat (the recipe's statement: River has none of its own):
--    attempted_at of a running job moves forward, which keeps the rescuer
--    (RescueStuckJobsAfter) away; progress goes into metadata.
-- 4. Leaving 'running' (JobCompleteTx, JobSetStateIfRunningMany for a
--    completion, an error, a snooze, a cancel, a discard) and the
--    heartbeat need the token: the worker ends its job in its own
--    transaction after SET LOCAL fencing.token.  River's snooze and its
--    soft-stop cancel give attempt back (attempt - 1), which is an end,
--    not a claim.  The rescuer (JobGetStuck + JobRescueMany) carries no
--    token and only moves jobs whose attempted_at is older than
--    RescueStuckJobsAfter (1 hour by default); past that horizon a write
--    without a token passes.  Keep the interval equal to the client's
--    RescueStuckJobsAfter.
CREATE TRIGGER fencing_claim BEFORE UPDATE OF attempt ON river_job FOR EACH ROW
	WHEN (NEW.attempt > OLD.attempt AND NEW.state = 'running')
	EXECUTE FUNCTION fencing.claim_stamp('metadata->fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE OF state ON river_job FOR EACH ROW
	WHEN (OLD.state = 'running' AND NEW.state <> 'running'
		  AND OLD.attempted_at >= pg_catalog.now() - interval '1 hour')
	EXECUTE FUNCTION fencing.claim_guard('metadata->fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE OF attempted_at ON river_job FOR EACH ROW
	WHEN (OLD.state = 'running' AND NEW.state = 'running')
	EXECUTE FUNCTION fencing.claim_guard('metadata->fencing_token');
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON river_job FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('metadata->fencing_token', '', 'allow_unfenced');
