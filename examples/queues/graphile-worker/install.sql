-- Fencing for graphile-worker 0.16.6 (schema graphile_worker; run after
-- its migrations).  A column for the stamp, and two lines:
--
-- 1. The claim: get_job adds one to attempts and locks the job.  Its
--    RETURNING * hands the stamp to the task as helpers.job.fencing_token.
-- 2. The completion: graphile-worker's own completeJob is a DELETE by id
--    alone, sent after the task returns, and carries no token.  So the task
--    completes the job itself, in a transaction that declares its token
--    (SET LOCAL fencing.token) and deletes the row; graphile-worker's
--    DELETE then finds nothing.  A DELETE of a locked job without the
--    claim's token is refused.  (failJob already matches locked_by, the
--    worker's id: a stale worker's failure changes nothing.)
ALTER TABLE graphile_worker._private_jobs ADD COLUMN fencing_token bigint;
CREATE TRIGGER fencing_claim BEFORE UPDATE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (NEW.attempts > OLD.attempts)
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_complete BEFORE DELETE ON graphile_worker._private_jobs FOR EACH ROW
	WHEN (OLD.locked_by IS NOT NULL)
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
