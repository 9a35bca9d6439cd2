-- test/rede: election_observe and lease_watch, which lock nothing anyone
-- waits for (docs/waiting.md: "Never blocks anyone"; "Cancel,
-- statement_timeout and a client that went away end it"), fail with 55P03
-- "canceling statement due to lock timeout" as soon as the session has a
-- lock_timeout and a prepared transaction has changed the election's row:
-- they wait for that transaction with XactLockTableWait, which lock_timeout
-- bounds.  Expected: the unchanged leadership (and 'current') after the
-- wait, as without lock_timeout.  (A waiting lease_acquire does the same;
-- docs/waiting.md mentions lock_timeout for acquires only.)
-- Needs max_prepared_transactions > 0.
\set ON_ERROR_STOP 0
SET ROLE app;
SELECT fencing.election_campaign('rede_lt', 'node-1', 'v', '1 hour') AS t \gset
BEGIN;
SELECT fencing.election_resign('rede_lt', :t) AS resigned;
PREPARE TRANSACTION 'rede_lt';
SET lock_timeout = '100ms';
\set ON_ERROR_STOP 1
-- actual: ERROR 55P03; expected: node-1 | t after 1 s
SELECT candidate, token = :t AS same FROM fencing.election_observe('rede_lt', :t, 'v', '1 s');
-- actual: ERROR 55P03; expected: current
SELECT reason FROM fencing.lease_watch('rede_lt', :t, '1 s');
RESET lock_timeout;
RESET ROLE;
ROLLBACK PREPARED 'rede_lt';
SET ROLE app;
SET lock_timeout = '100ms';
-- without a prepared transaction the same calls are fine
SELECT reason FROM fencing.lease_watch('rede_lt', :t, '10 ms');
RESET lock_timeout;
SELECT fencing.election_resign('rede_lt', :t);
RESET ROLE;
