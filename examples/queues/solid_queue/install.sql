-- Fencing for Solid Queue (schema as in schema.sql).  A claim is a row of
-- solid_queue_claimed_executions: a column for the stamp and two lines.
--
-- 1. The claim inserts the row (ClaimedExecution.claiming); the stamp is
--    written on INSERT and read back with the claimed execution.
-- 2. Finishing or failing destroys the row, in the transaction that marks
--    the job finished or failed.  The worker declares its token (SET LOCAL
--    fencing.token) and destroys the claim first; a delivery whose claim
--    was released and claimed again is refused.  The supervisor's release
--    of a dead process's claims carries no token: 'allow_unfenced' lets
--    it through.
ALTER TABLE solid_queue_claimed_executions ADD COLUMN fencing_token bigint;
CREATE TRIGGER fencing_claim BEFORE INSERT ON solid_queue_claimed_executions FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_finish BEFORE DELETE ON solid_queue_claimed_executions FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
