-- Fencing for Solid Queue 1.5 or later (schema as in schema.sql).  A claim
-- is a row of solid_queue_claimed_executions: a column for the stamp and
-- two lines.
--
-- 1. The claim inserts the row (ClaimedExecution.claiming); the stamp is
--    written on INSERT and read back with the claimed execution (claiming
--    loads the rows it inserted: execution.fencing_token).
-- 2. Finishing or failing destroys the row, in the transaction that marks
--    the job finished or failed.  Since 1.5.0 (commit 4f263b2) that
--    transaction first locks the claim by its id and does nothing if it is
--    gone: a stale worker, whose claim was failed or released and claimed
--    again under a new id, finishes nothing.  The worker declares its
--    token (around perform: SET LOCAL fencing.token, or a session-level
--    set_config reset after perform on a direct connection) and its
--    DELETE, or any UPDATE of the claim, is checked; no write changes the
--    stamp.  The supervisor's release and its failure of a pruned
--    process's claims carry no token and pass.  Before 1.5.0 a stale
--    worker's finish and failure passed (docs/queues.md): upgrade.
ALTER TABLE solid_queue_claimed_executions ADD COLUMN IF NOT EXISTS fencing_token bigint;
CREATE TRIGGER fencing_claim BEFORE INSERT ON solid_queue_claimed_executions FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_guard BEFORE UPDATE OR DELETE ON solid_queue_claimed_executions FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('fencing_token', '', 'allow_unfenced');
