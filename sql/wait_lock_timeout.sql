-- The extension's bounded waits follow their "wait" argument, not the
-- session's lock_timeout: election_observe, lease_watch and a waiting
-- lease_acquire wait for a prepared transaction that changed the row
-- (XactLockTableWait), which lock_timeout used to cut short with 55P03.
-- 83fed51: 55P03 after 100 ms in each of the three calls.
\set VERBOSITY sqlstate
SELECT fencing.election_campaign('wlt', 'node-1', 'v', '1 hour') AS t \gset
BEGIN;
SELECT fencing.election_resign('wlt', :t) AS resigned;
PREPARE TRANSACTION 'wlt_resign';
SET lock_timeout = '100ms';
-- the unchanged leadership once the wait ran out
SELECT clock_timestamp() AS started \gset
SELECT candidate, token = :t AS same
  FROM fencing.election_observe('wlt', :t, 'v', '1 s');
SELECT clock_timestamp() - :'started' >= '0.95 s' AS waited_its_wait;
SELECT clock_timestamp() AS started \gset
SELECT reason FROM fencing.lease_watch('wlt', :t, '1 s');
SELECT clock_timestamp() - :'started' >= '0.95 s' AS waited_its_wait;
-- a waiting campaign: NULL once its wait ran out
SELECT clock_timestamp() AS started \gset
SELECT fencing.election_campaign('wlt', 'node-2', 'w', '1 hour', wait => '1 s') IS NULL AS not_leader;
SELECT clock_timestamp() - :'started' >= '0.95 s' AS waited_its_wait;
-- a renew waits as an UPDATE does: lock_timeout still bounds it
SELECT fencing.lease_renew('wlt', :t, '1 hour');
RESET lock_timeout;
ROLLBACK PREPARED 'wlt_resign';
SELECT fencing.election_resign('wlt', :t) AS resigned;
