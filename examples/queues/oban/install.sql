-- Fencing for Oban, Basic engine (schema as in schema.sql, statements of
-- lib/oban/engines/basic.ex at commit 2939e313).  One line per transition:
--
-- 0. A job whose meta is not a JSON object is refused at insert.
-- 1. The claim (fetch_jobs) sets state 'executing' and adds one to
--    attempt.  The stamp goes into meta, which fetch_jobs returns with the
--    job (job.meta["fencing_token"]): an added column would not reach the
--    worker, whose Oban.Job schema lists Oban's own columns.
-- 2. The heartbeat (the recipe's statement: Oban's Basic engine has none):
--    attempted_at of an executing job moves forward, which keeps Lifeline
--    (rescue_after) away; progress goes into meta.
-- 3. The worker's ends: complete_job, error_job, snooze_job (state
--    'scheduled', attempt - 1), discard_job and cancel_job, all by id
--    alone and with no state check, so a stale worker's call lands on
--    whatever the job is now.  Each runs in a transaction that declares
--    the token: wrap the Basic engine in an engine of your own whose
--    complete_job, error_job, snooze_job, discard_job and cancel_job run
--    SET LOCAL fencing.token = job.meta["fencing_token"] and then Basic's.
--    An end that does not change the state (complete_job of a completed
--    job) changes only a timestamp and passes.
-- 4. Lifeline's rescue carries no token: 'available' is never guarded, and
--    its discard of a job executing for longer than rescue_after (60
--    minutes by default) passes without a token; any end that brings a
--    token is checked at every age.  An operator's cancel (cancel_all_jobs)
--    carries no token and passes; a worker's cancel brings one.
CREATE TRIGGER fencing_stampable BEFORE INSERT ON oban_jobs FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stampable('meta->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON oban_jobs FOR EACH ROW
	WHEN (NEW.attempt > OLD.attempt AND NEW.state = 'executing')
	EXECUTE FUNCTION fencing.claim_stamp('meta->fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE ON oban_jobs FOR EACH ROW
	WHEN (OLD.state = 'executing' AND NEW.state = 'executing' AND NEW.attempt = OLD.attempt
		  AND NEW.attempted_at IS DISTINCT FROM OLD.attempted_at)
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE ON oban_jobs FOR EACH ROW
	WHEN (NEW.attempt <= OLD.attempt AND NEW.state IN ('completed', 'retryable', 'scheduled', 'discarded')
		  AND (OLD.state = 'executing' OR NEW.state <> OLD.state)
		  AND NOT (OLD.state = 'executing' AND NEW.state = 'discarded'
				   AND OLD.attempted_at < pg_catalog.timezone('UTC', pg_catalog.now()) - interval '60 minutes'))
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token');
CREATE TRIGGER fencing_end_rescued BEFORE UPDATE ON oban_jobs FOR EACH ROW
	WHEN (OLD.state = 'executing' AND NEW.state = 'discarded'
		  AND OLD.attempted_at < pg_catalog.timezone('UTC', pg_catalog.now()) - interval '60 minutes')
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_cancel BEFORE UPDATE ON oban_jobs FOR EACH ROW
	WHEN (NEW.state = 'cancelled' AND OLD.state <> 'cancelled')
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token', '', 'allow_unfenced');
