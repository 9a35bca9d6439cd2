-- Fencing for a pgmq queue (here pgmq.q_jobs, made by pgmq.create('jobs')).
-- Three lines:
--
-- 1. The claim: pgmq.read() adds one to read_ct and hides the message for
--    vt seconds.  read() returns msg_id, read_ct, enqueued_at, vt and
--    message, so the stamp goes into the message (message->>'fencing_token').
-- 2. pgmq.delete(), pgmq.archive() (a DELETE) and pgmq.set_vt() (an UPDATE
--    of vt alone) are keyed by msg_id: the reader declares its token with
--    SET LOCAL fencing.token in the transaction that calls them.  A reader
--    whose visibility timeout lapsed and whose message was read again is
--    refused.  (pgmq.purge_queue() truncates and fires no row trigger.)
CREATE TRIGGER fencing_claim BEFORE UPDATE ON pgmq.q_jobs FOR EACH ROW
	WHEN (NEW.read_ct > OLD.read_ct)
	EXECUTE FUNCTION fencing.claim_stamp('message->fencing_token');
CREATE TRIGGER fencing_ack BEFORE DELETE ON pgmq.q_jobs FOR EACH ROW
	WHEN (OLD.read_ct > 0)
	EXECUTE FUNCTION fencing.claim_guard('message->fencing_token');
CREATE TRIGGER fencing_set_vt BEFORE UPDATE ON pgmq.q_jobs FOR EACH ROW
	WHEN (NEW.read_ct = OLD.read_ct AND OLD.read_ct > 0)
	EXECUTE FUNCTION fencing.claim_guard('message->fencing_token');
