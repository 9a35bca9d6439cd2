-- Fencing for pg-boss 12 (tested with 12.38.0; schema pgboss, run after
-- pg-boss has created it).  The triggers are on the partitioned pgboss.job,
-- so every queue's partition, also those created later, has them.
--
-- 1. The claim: pg-boss's fetch moves a job to 'active'.  The stamp goes
--    into the job's data, which the fetch returns to the handler as
--    job.data.fencing_token (a string: JavaScript numbers lose digits).
-- 2. Every write: a token it brings (in the output it writes, or declared
--    with SET LOCAL fencing.token) must be the job's stamp, whatever the
--    job's state, so a stale delivery's complete(), fail(), touch(),
--    cancel(), deleteJob() or restore() is refused (LF001) also after the
--    job was failed back to 'retry' or completed.  No write but the claim
--    changes the stamp; data written whole keeps it (update()), and data
--    that could not hold it (an array, a number) is refused at send() and
--    at update() (42804).
-- 3. The ends a delivery must bring its token to: complete() of an active
--    job, touch() (heartbeat_on of an active job), restore() (back to
--    'created', which pg-boss's worker sends for the jobs it fetched past
--    localGroupConcurrency), and fail(), which deletes the job and inserts
--    it again as 'retry' or 'failed' with the failure as output.  The
--    worker's shim (worker.js) gives each its job's token.  Tokenless:
--    the supervisor's two expiries (fixed outputs: the queue's rescue),
--    and the operator's cancel(), deleteJob(), resume() and retry().
CREATE TRIGGER fencing_claim BEFORE UPDATE OF state ON pgboss.job FOR EACH ROW
	WHEN (NEW.state = 'active' AND OLD.state <> 'active')
	EXECUTE FUNCTION fencing.claim_stamp('data->fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE OF state ON pgboss.job FOR EACH ROW
	WHEN ((OLD.state = 'active' AND NEW.state = 'completed')
		  OR (NEW.state = 'created' AND OLD.state NOT IN ('created', 'cancelled')))
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE OF heartbeat_on ON pgboss.job FOR EACH ROW
	WHEN (OLD.state = 'active' AND NEW.state = 'active')
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token');
CREATE TRIGGER fencing_fail BEFORE INSERT ON pgboss.job FOR EACH ROW
	WHEN (NEW.state IN ('retry', 'failed') AND NEW.started_on IS NOT NULL
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job timed out"}}'::jsonb
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job heartbeat timeout"}}'::jsonb)
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON pgboss.job FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token', 'allow_unfenced');
