-- Fencing for Oban, Basic engine (schema as in schema.sql, statements of
-- lib/oban/engines/basic.ex at commit 2939e313).  One line per transition:
--
-- 1. The claim (fetch_jobs) sets state 'executing' and adds one to
--    attempt.  The stamp goes into meta, which fetch_jobs returns with the
--    job (job.meta["fencing_token"]): an added column would not reach the
--    worker, whose Oban.Job schema lists Oban's own columns.
-- 2. Every write: a token it brings (SET LOCAL fencing.token) must be the
--    job's stamp, whatever the job's state, so a stale worker's end,
--    snooze or update_job is refused (LF001) also after the newer
--    delivery ended the job the same way.  No write but the claim changes
--    the stamp: meta written whole keeps it (update_job with a new meta
--    map), one written with another delivery's stamp (update_job or
--    snooze_job from a stale job struct) is refused (LF012), and meta
--    that is not a JSON object is refused (42804).
-- 3. The heartbeat (the recipe's statement: Oban's Basic engine has none):
--    attempted_at of an executing job moves forward, which keeps Lifeline
--    (rescue_after) away; progress goes into meta.
-- 4. The worker's ends: complete_job, error_job, snooze_job (state
--    'scheduled', attempt - 1), discard_job and cancel_job, all by id
--    alone and with no state check.  Each runs in a transaction that
--    declares the token: wrap the Basic engine in an engine of your own
--    whose complete_job, error_job, snooze_job, discard_job, cancel_job
--    and update_job run SET LOCAL fencing.token = job.meta["fencing_token"]
--    and then Basic's.  A move into 'completed', 'retryable', 'scheduled'
--    or 'discarded', and the heartbeat, need the token.
-- 5. Lifeline's rescue carries no token: 'available' is never guarded, and
--    its discard of a job executing for longer than rescue_after (60
--    minutes by default) passes.  An operator's cancel (cancel_all_jobs,
--    cancel_job without a token) passes.
CREATE TRIGGER fencing_claim BEFORE UPDATE OF attempt ON oban_jobs FOR EACH ROW
	WHEN (NEW.attempt > OLD.attempt AND NEW.state = 'executing')
	EXECUTE FUNCTION fencing.claim_stamp('meta->fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE OF state ON oban_jobs FOR EACH ROW
	WHEN (NEW.state IN ('completed', 'retryable', 'scheduled', 'discarded')
		  AND (OLD.state = 'executing' OR NEW.state <> OLD.state)
		  AND NOT (OLD.state = 'executing' AND NEW.state = 'discarded'
				   AND OLD.attempted_at < pg_catalog.timezone('UTC', pg_catalog.now()) - interval '60 minutes'))
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token');
CREATE TRIGGER fencing_heartbeat BEFORE UPDATE OF attempted_at ON oban_jobs FOR EACH ROW
	WHEN (OLD.state = 'executing' AND NEW.state = 'executing')
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token');
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON oban_jobs FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('meta->fencing_token', '', 'allow_unfenced');
