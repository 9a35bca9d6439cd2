-- Fencing for graphile-worker 0.18 (tested with 0.18.0; schema
-- graphile_worker, run after its migrations).  A column for the stamp,
-- and one line per transition:
--
-- 1. The claim: get_job adds one to attempts and sets locked_at and
--    locked_by.  Its RETURNING * hands the stamp to the task as
--    helpers.job.fencing_token.  add_job and remove_job also raise
--    attempts (to max_attempts) of a locked job whose key they take over,
--    but leave its lock alone: not a claim.
-- 2. Every write: a token it brings (SET LOCAL fencing.token) must be the
--    job's stamp, whatever the job's state, so a stale task's heartbeat or
--    completion is refused (LF001) also once the newer delivery failed the
--    job and unlocked it.  No write but the claim changes the stamp.
-- 3. The heartbeat: the task moves locked_at forward (graphile-worker
--    rescues a lock older than 4 hours), in a transaction that declares
--    its token; setting locked_at outside a claim needs the token.
-- 4. The completion: graphile-worker's own completeJob is a DELETE by id
--    alone, sent after the task returns, with nothing of the task in it.
--    So the task completes the job itself, in a transaction that declares
--    its token, with graphile-worker's own statement (which also unlocks
--    the job's named queue, if it has one); graphile-worker's DELETE then
--    finds nothing.  A DELETE of a locked job without a token is refused,
--    unless its lock is older than graphile-worker's 4 hours: then it is
--    the rescue or an operator's removal.
-- 5. Unlocking a job (failJob, returnJobs at shutdown,
--    force_unlock_workers, the rescue) carries no token from
--    graphile-worker and passes.
ALTER TABLE graphile_worker._private_jobs ADD COLUMN IF NOT EXISTS fencing_token bigint;
CREATE TRIGGER fencing_claim BEFORE UPDATE OF attempts ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (NEW.attempts > OLD.attempts AND NEW.locked_by IS NOT NULL
		  AND NEW.locked_at IS DISTINCT FROM OLD.locked_at)
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE OF locked_at ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (NEW.locked_at IS NOT NULL AND NEW.locked_at IS DISTINCT FROM OLD.locked_at)
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
CREATE TRIGGER fencing_end_delete BEFORE DELETE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL AND OLD.locked_at >= pg_catalog.now() - interval '4 hours')
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
CREATE TRIGGER fencing_guard BEFORE UPDATE OR DELETE ON graphile_worker._private_jobs FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
