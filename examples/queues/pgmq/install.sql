-- Fencing for a pgmq queue (pgmq 1.5 or later; here pgmq.q_jobs, made by
-- pgmq.create('jobs')).  One line per transition:
--
-- 0. send() with headers that are not a JSON object (or NULL) is refused:
--    the claim could not stamp them.  The message itself is never touched.
-- 1. The claim: pgmq.read() adds one to read_ct and hides the message for
--    vt seconds, and returns msg_id, read_ct, enqueued_at, vt, message and
--    headers: the stamp goes into the headers (headers->>'fencing_token').
-- 2. pgmq.delete(), pgmq.archive() (a DELETE) and pgmq.set_vt() (an UPDATE
--    of vt alone: the heartbeat) are keyed by msg_id: the reader declares
--    its token with SET LOCAL fencing.token in the transaction that calls
--    them.  A reader whose visibility timeout lapsed and whose message was
--    read again is refused.
-- 3. pgmq.pop() deletes a visible message (its last reader's vt lapsed)
--    and carries no token: a DELETE of a visible message without a token
--    passes; one that brings a token is still checked.  (pgmq.purge_queue()
--    truncates and fires no row trigger.)
CREATE TRIGGER fencing_stampable BEFORE INSERT OR UPDATE OF headers ON pgmq.q_jobs FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_stampable('headers->fencing_token');
CREATE TRIGGER fencing_claim BEFORE UPDATE ON pgmq.q_jobs FOR EACH ROW
	WHEN (NEW.read_ct > OLD.read_ct)
	EXECUTE FUNCTION fencing.claim_stamp('headers->fencing_token');
CREATE TRIGGER fencing_ack BEFORE DELETE ON pgmq.q_jobs FOR EACH ROW
	WHEN (OLD.read_ct > 0 AND OLD.vt > pg_catalog.clock_timestamp())
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token');
CREATE TRIGGER fencing_ack_visible BEFORE DELETE ON pgmq.q_jobs FOR EACH ROW
	WHEN (OLD.read_ct > 0 AND OLD.vt <= pg_catalog.clock_timestamp())
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token', '', 'allow_unfenced');
CREATE TRIGGER fencing_set_vt BEFORE UPDATE ON pgmq.q_jobs FOR EACH ROW
	WHEN (NEW.read_ct = OLD.read_ct AND OLD.read_ct > 0)
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token');
