-- A renew, check or proclaim counts only if its transaction commits before
-- the expiry the lease had when it was renewed, checked or proclaimed:
-- later, COMMIT (and PREPARE TRANSACTION) fails with LF022, and nothing the
-- transaction wrote is committed.  COMMIT PREPARED is not judged again.
-- Each case gives the lease 3 s to live, renews or checks it at once, and
-- waits (polling the clock) until that expiry has passed.
\set VERBOSITY sqlstate
CREATE TABLE lce_work (note text);
CREATE FUNCTION lce_wait_past(t timestamptz) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	WHILE clock_timestamp() <= t LOOP
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN true;
END $$;

-- renew: LF022 at COMMIT, and the lease stays expired with its token
SELECT fencing.lease_acquire('lce', 'h', '3 s') AS t \gset
SELECT expires_at AS old_expiry FROM fencing.lease_status WHERE name = 'lce' \gset
BEGIN;
SELECT fencing.lease_renew('lce', :t, '1 hour') AS renewed;
INSERT INTO lce_work VALUES ('under the renew');
SELECT lce_wait_past(:'old_expiry') AS expired_meanwhile;
COMMIT;
SELECT state, token = :t AS same_token FROM fencing.lease_status WHERE name = 'lce';
SELECT reason FROM fencing.lease_watch('lce', :t);
SELECT count(*) AS committed_work FROM lce_work;

-- lease_renew_all: the same
SELECT fencing.lease_acquire('lce', 'h', '3 s') AS t \gset
SELECT expires_at AS old_expiry FROM fencing.lease_status WHERE name = 'lce' \gset
BEGIN;
SELECT renewed FROM fencing.lease_renew_all(ARRAY['lce'], ARRAY[:t], '1 hour');
SELECT lce_wait_past(:'old_expiry') AS expired_meanwhile;
COMMIT;
SELECT reason FROM fencing.lease_watch('lce', :t);

-- check, then write: the write is not committed
SELECT fencing.lease_acquire('lce', 'h', '3 s') AS t \gset
SELECT expires_at AS old_expiry FROM fencing.lease_status WHERE name = 'lce' \gset
BEGIN;
INSERT INTO lce_work SELECT 'under the check' WHERE fencing.lease_lock('lce', :t);
SELECT lce_wait_past(:'old_expiry') AS expired_meanwhile;
COMMIT;
SELECT count(*) AS committed_work FROM lce_work;

-- election_proclaim: the new value is not published
SELECT fencing.election_campaign('lce_el', 'node-1', 'v1', '3 s') AS e \gset
SELECT expires_at AS old_expiry FROM fencing.lease_status WHERE name = 'lce_el' \gset
BEGIN;
SELECT fencing.election_proclaim('lce_el', :e, 'v2') AS proclaimed;
SELECT lce_wait_past(:'old_expiry') AS expired_meanwhile;
COMMIT;
SELECT value FROM fencing.lease_status WHERE name = 'lce_el';

-- PREPARE TRANSACTION is judged too: no prepared transaction is left
SELECT fencing.lease_acquire('lce', 'h', '3 s') AS t \gset
SELECT expires_at AS old_expiry FROM fencing.lease_status WHERE name = 'lce' \gset
BEGIN;
SELECT fencing.lease_renew('lce', :t, '1 hour') AS renewed;
SELECT lce_wait_past(:'old_expiry') AS expired_meanwhile;
PREPARE TRANSACTION 'lce_late';
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'lce_late';

-- prepared in time, COMMIT PREPARED after the expiry: not judged again
-- (no callback of an extension runs there); the renew stands
SELECT fencing.lease_acquire('lce', 'h', '3 s') AS t \gset
SELECT expires_at AS old_expiry FROM fencing.lease_status WHERE name = 'lce' \gset
BEGIN;
SELECT fencing.lease_renew('lce', :t, '1 hour') AS renewed;
PREPARE TRANSACTION 'lce_in_time';
SELECT lce_wait_past(:'old_expiry') AS expired_meanwhile;
SELECT reason FROM fencing.lease_watch('lce', :t);
COMMIT PREPARED 'lce_in_time';
SELECT reason FROM fencing.lease_watch('lce', :t);

-- a commit in time, the control: renewed, and the work committed
BEGIN;
SELECT fencing.lease_renew('lce', :t, '1 hour') AS renewed;
INSERT INTO lce_work VALUES ('in time');
COMMIT;
SELECT note FROM lce_work;

SELECT fencing.lease_release('lce', :t) AS released;
SELECT fencing.lease_force_release('lce_el');
DROP FUNCTION lce_wait_past(timestamptz);
DROP TABLE lce_work;
