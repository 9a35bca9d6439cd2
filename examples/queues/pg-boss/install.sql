-- Fencing for pg-boss 12 (tested with 12.38.0; schema pgboss, run after
-- pg-boss has created it).  One line per transition the worker makes:
--
-- 0. send(): a job whose data is not a JSON object (or NULL) is refused,
--    since its claim could not stamp it (fencing.claim_stampable).  The
--    trigger is on the partitioned pgboss.job, so every queue's partition,
--    also those created later, has it.
-- 1. The claim: pg-boss's fetch moves a job to 'active'.  The stamp goes
--    into the job's data, which the fetch returns to the handler as
--    job.data.fencing_token (a string: JavaScript numbers lose digits).
-- 2. complete(): 'active' -> 'completed', with the handler's result as
--    output.  The worker's shim (worker.js) puts the token in it.
-- 3. The heartbeat, touch(): heartbeat_on of an 'active' job moves.  The
--    shim runs it per job with SET LOCAL fencing.token.
-- 4. fail(): pg-boss deletes the job and inserts it again as 'retry' or
--    'failed', copying data (and so the stamp) and writing the failure as
--    output; the shim gives the error the token.  The supervisor's expiry
--    and heartbeat expiry write fixed outputs and are the queue's rescue,
--    not a delivery: the WHEN clause lets them through.
CREATE TRIGGER fencing_stampable BEFORE INSERT ON pgboss.job FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stampable('data->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON pgboss.job FOR EACH ROW
	WHEN (NEW.state = 'active' AND OLD.state <> 'active')
	EXECUTE FUNCTION fencing.claim_stamp('data->fencing_token');
CREATE TRIGGER fencing_complete BEFORE UPDATE ON pgboss.job FOR EACH ROW
	WHEN (NEW.state = 'completed' AND OLD.state = 'active')
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE ON pgboss.job FOR EACH ROW
	WHEN (NEW.state = 'active' AND OLD.state = 'active'
		  AND NEW.heartbeat_on IS DISTINCT FROM OLD.heartbeat_on)
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token');
CREATE TRIGGER fencing_fail BEFORE INSERT ON pgboss.job FOR EACH ROW
	WHEN (NEW.state IN ('retry', 'failed') AND NEW.started_on IS NOT NULL
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job timed out"}}'::jsonb
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job heartbeat timeout"}}'::jsonb)
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
