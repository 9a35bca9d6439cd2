-- Fencing for graphile-worker 0.18 (tested with 0.18.0; schema
-- graphile_worker, run after its migrations).  A column for the stamp,
-- and one line per transition:
--
-- 1. The claim: get_job adds one to attempts and sets locked_at and
--    locked_by.  Its RETURNING * hands the stamp to the task as
--    helpers.job.fencing_token.  add_job and remove_job also raise
--    attempts (to max_attempts) of a locked job whose key they take over,
--    but leave its lock alone: not a claim.
-- 2. The heartbeat: the task moves locked_at forward (graphile-worker
--    rescues a lock older than 4 hours), in a transaction that declares
--    its token.
-- 3. The completion: graphile-worker's own completeJob is a DELETE by id
--    alone, sent after the task returns, with nothing of the task in it.
--    So the task completes the job itself, in a transaction that declares
--    its token (SET LOCAL fencing.token) and deletes the row;
--    graphile-worker's DELETE then finds nothing.  A DELETE of a locked
--    job without the claim's token is refused, unless its lock is older
--    than graphile-worker's 4 hours: then it is the rescue or an
--    operator's removal, and only a DELETE that brings a token is checked.
-- 4. Unlocking a locked job (failJob, returnJobs at shutdown,
--    force_unlock_workers, the rescue) carries no token from
--    graphile-worker and passes; one that brings a token is checked.
ALTER TABLE graphile_worker._private_jobs ADD COLUMN fencing_token bigint;
CREATE TRIGGER fencing_claim BEFORE UPDATE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (NEW.attempts > OLD.attempts AND NEW.locked_by IS NOT NULL
		  AND NEW.locked_at IS DISTINCT FROM OLD.locked_at)
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (NEW.attempts = OLD.attempts AND OLD.locked_by IS NOT NULL
		  AND NEW.locked_by IS NOT DISTINCT FROM OLD.locked_by
		  AND NEW.locked_at IS DISTINCT FROM OLD.locked_at)
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
CREATE TRIGGER fencing_unlock BEFORE UPDATE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL AND NEW.locked_by IS NULL AND NEW.attempts <= OLD.attempts)
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_complete BEFORE DELETE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL AND OLD.locked_at >= pg_catalog.now() - interval '4 hours')
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
CREATE TRIGGER fencing_complete_dead_lock BEFORE DELETE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL AND OLD.locked_at < pg_catalog.now() - interval '4 hours')
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
