-- Fencing for a pgmq queue (pgmq 1.5 or later; here pgmq.q_jobs, made by
-- pgmq.create('jobs')).  One line per transition:
--
-- 1. The claim: pgmq.read() adds one to read_ct and hides the message for
--    vt seconds, and returns msg_id, read_ct, enqueued_at, vt, message and
--    headers: the stamp goes into the headers (headers->>'fencing_token').
--    The message itself is never touched; headers that are not a JSON
--    object (or NULL) are refused at send (42804).
-- 2. Every write: a token it brings (SET LOCAL fencing.token) must be the
--    message's stamp, so a reader whose visibility timeout lapsed and
--    whose message was read again is refused (LF001).  No write but the
--    claim changes the stamp.
-- 3. pgmq.delete(), pgmq.archive() (a DELETE) of a message still hidden,
--    and pgmq.set_vt() that keeps it hidden (the heartbeat), need the
--    reader's token: it declares it with SET LOCAL fencing.token in the
--    transaction that calls them.  A batch (msg_ids bigint[]) holds
--    messages with a token each: end them one call per message, each after
--    its own SET LOCAL, in one transaction if you like.
-- 4. Without a token: pgmq.pop() of a visible message (its last reader's
--    vt lapsed), set_vt() that makes a message visible now (an operator's
--    set_vt(queue, msg_id, 0)), and pgmq.purge_queue() (a TRUNCATE, no row
--    trigger).
CREATE TRIGGER fencing_claim BEFORE UPDATE OF read_ct ON pgmq.q_jobs FOR EACH ROW
	WHEN (NEW.read_ct > OLD.read_ct)
	EXECUTE FUNCTION fencing.claim_stamp('headers->fencing_token');
CREATE TRIGGER fencing_end BEFORE UPDATE OF vt ON pgmq.q_jobs FOR EACH ROW
	WHEN (OLD.read_ct > 0 AND OLD.vt > pg_catalog.clock_timestamp()
		  AND NEW.vt > pg_catalog.clock_timestamp())
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token');
CREATE TRIGGER fencing_end_delete BEFORE DELETE ON pgmq.q_jobs FOR EACH ROW
	WHEN (OLD.read_ct > 0 AND OLD.vt > pg_catalog.clock_timestamp())
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token');
CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON pgmq.q_jobs FOR EACH ROW
	EXECUTE FUNCTION fencing.claim_guard('headers->fencing_token', '', 'allow_unfenced');
