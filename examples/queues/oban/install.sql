-- Fencing for Oban, Basic engine (schema as in schema.sql).  A column for
-- the stamp and two lines:
--
-- 1. The claim (fetch_jobs) sets state 'executing' and adds one to
--    attempt; the returned job carries the stamp (add the field to your
--    Oban.Job schema, or read it with the job).
-- 2. Ending the job as completed, retryable or discarded (complete_job,
--    error_job, discard_job: all keyed by id alone, with no state check, so
--    a stale worker's error_job would make a completed job retryable).  The
--    worker ends its job inside its own transaction, after SET LOCAL
--    fencing.token.  Cancelling is an operator's decision and not fenced.
--    The Lifeline plugin rescues jobs executing for longer than
--    rescue_after (60 minutes by default), and is left to it by the WHEN
--    clause: keep the two intervals equal.
ALTER TABLE oban_jobs ADD COLUMN fencing_token bigint;
CREATE TRIGGER fencing_claim BEFORE UPDATE ON oban_jobs FOR EACH ROW
	WHEN (NEW.attempt > OLD.attempt)
	EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
CREATE TRIGGER fencing_complete BEFORE UPDATE ON oban_jobs FOR EACH ROW
	WHEN (NEW.state IN ('completed', 'retryable', 'discarded') AND NEW.attempt = OLD.attempt
		  AND OLD.attempted_at >= pg_catalog.timezone('UTC', pg_catalog.now()) - interval '60 minutes')
	EXECUTE FUNCTION fencing.claim_guard('fencing_token');
