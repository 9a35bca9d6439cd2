-- Fencing for River (schema as in schema.sql).  A column for the stamp
-- and two lines:
--
-- 1. The claim (JobGetAvailable) sets state 'running' and adds one to
--    attempt; its RETURNING river_job.* hands the stamp to the worker
--    (job.fencing_token, through a custom column read).
-- 2. Leaving 'running' (JobSetStateIfRunning/-Many, JobCompleteTx): the
--    worker completes inside its own transaction (JobCompleteTx) after
--    SET LOCAL fencing.token.  The rescuer (JobGetStuck + JobRescueMany)
--    only moves jobs whose attempted_at is older than RescueStuckJobsAfter
--    (1 hour by default): the WHEN clause leaves those to it.  Keep its
--    interval equal to the client's RescueStuckJobsAfter.
ALTER TABLE river_job ADD COLUMN fencing_token bigint;
CREATE TRIGGER fencing_claim BEFORE UPDATE ON river_job FOR EACH ROW
	WHEN (NEW.attempt > OLD.attempt)
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_complete BEFORE UPDATE ON river_job FOR EACH ROW
	WHEN (OLD.state = 'running' AND NEW.state <> 'running' AND NEW.attempt = OLD.attempt
		  AND OLD.attempted_at >= pg_catalog.now() - interval '1 hour')
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
