-- Fencing for pg-boss 10.4.2 (schema pgboss; run after pg-boss has
-- created it).  Three lines, one per transition:
--
-- 1. The claim: pg-boss's fetch moves a job to 'active'.  The stamp goes
--    into the job's data, which the fetch returns to the handler as
--    job.data.fencing_token (a string: JavaScript numbers lose digits).
-- 2. complete(): 'active' -> 'completed', with the handler's result as
--    output.  The handler returns { fencing_token: job.data.fencing_token }.
-- 3. fail(): pg-boss deletes the job and inserts it again as 'retry' or
--    'failed', copying data (and so the stamp) and writing the failure as
--    output; the error carries fencing_token.  Its own expiry (maintenance)
--    writes a fixed output and is the queue's rescue, not a delivery: the
--    WHEN clause lets it through.
CREATE TRIGGER fencing_claim BEFORE UPDATE ON pgboss.job FOR EACH ROW
	WHEN (NEW.state = 'active' AND OLD.state <> 'active')
	EXECUTE FUNCTION fencing.claim_stamp('data->fencing_token');
CREATE TRIGGER fencing_complete BEFORE UPDATE ON pgboss.job FOR EACH ROW
	WHEN (NEW.state = 'completed' AND OLD.state = 'active')
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
CREATE TRIGGER fencing_fail BEFORE INSERT ON pgboss.job FOR EACH ROW
	WHEN (NEW.state IN ('retry', 'failed') AND NEW.started_on IS NOT NULL
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job failed by timeout in active state"}}'::jsonb)
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
