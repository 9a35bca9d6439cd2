--
-- A band entry (a promotion, a restore; here fencing.advance_tokens(), the
-- superuser's stand-in for a failover) ends the leadership of a leader
-- whose token is from before it.  That token is refused everywhere
-- (LF005: renew, proclaim, every resource), so it is no live leader:
-- election_leader has none, election_observe returns at once to an
-- observer that knows it, and another candidate's campaign takes the
-- election at once instead of at the old leader's expiry.  A plain lease
-- stays held until its expiry (docs/elections.md).  The wake-up of waiters
-- at a band entry is in specs/election_band_entry_wakeup.spec.
--
\set VERBOSITY sqlstate
SELECT fencing.election_campaign('elb', 'node-1', 'host-1', '1 hour') AS t1 \gset
SELECT candidate, value, token = :t1 AS is_t1 FROM fencing.election_leader('elb');
SELECT fencing.advance_tokens();          -- a new band, as after a failover

-- the lost leader's token: lost_at_failover, refused with LF005
SELECT reason, successor FROM fencing.lease_watch('elb', :t1);
SELECT fencing.lease_renew('elb', :t1, '1 hour');
SELECT fencing.election_proclaim('elb', :t1, 'host-1b');
SELECT fencing.lease_lock('elb', :t1);

-- no live leader
SELECT * FROM fencing.election_leader('elb');
-- an observer that knows (t1, host-1) returns at once, with a wait, and
-- one that knows no leader is told none without waiting out its wait
SELECT candidate, value, token FROM fencing.election_observe('elb', :t1, 'host-1', '5 s');
SELECT candidate, value, token FROM fencing.election_observe('elb', NULL, NULL, '10 ms');
SELECT name, holder, state FROM fencing.lease_status WHERE name = 'elb';

-- another candidate takes the election at once, with a token of the new
-- band; the lost leader's token was taken over
SELECT fencing.election_campaign('elb', 'node-2', 'host-2', '1 hour') AS t2 \gset
SELECT :t2 > :t1 AS newer, candidate, value, token = :t2 AS is_t2
  FROM fencing.election_leader('elb');
SELECT reason, successor = :t2 AS successor_t2 FROM fencing.lease_watch('elb', :t1);
SELECT fencing.election_resign('elb', :t1) AS old_resigns;
SELECT fencing.election_resign('elb', :t2) AS resigned;

-- the lost leader itself campaigns again and leads with a new token
SELECT fencing.election_campaign('elc', 'node-1', 'host-1', '1 hour') AS c1 \gset
SELECT fencing.advance_tokens();
SELECT fencing.election_campaign('elc', 'node-1', 'host-1', '1 hour') AS c1b \gset
SELECT :c1b > :c1 AS newer, candidate, token = :c1b AS is_c1b
  FROM fencing.election_leader('elc');
SELECT fencing.election_resign('elc', :c1b) AS resigned;

-- resign with the lost token is a release, and a release frees a lease
-- whatever band its token is from (docs/tokens.md): true, no leader
SELECT fencing.election_campaign('eld', 'node-1', 'host-1', '1 hour') AS d1 \gset
SELECT fencing.advance_tokens();
SELECT fencing.election_resign('eld', :d1) AS lost_resigns;
SELECT reason FROM fencing.lease_watch('eld', :d1);
SELECT candidate FROM fencing.election_leader('eld');

-- a plain lease is not an election: held until its expiry, though its
-- holder's token is refused (LF005) and lease_watch says so
SELECT fencing.lease_acquire('elb_lease', 'w1', '1 hour') AS l1 \gset
SELECT fencing.advance_tokens();
SELECT fencing.lease_acquire('elb_lease', 'w2', '1 hour') IS NULL AS w2_refused;
SELECT reason FROM fencing.lease_watch('elb_lease', :l1);
SELECT fencing.lease_release('elb_lease', :l1) AS released;

SELECT fencing.lease_force_release(n) FROM unnest(ARRAY['elb', 'elc', 'eld']) AS n;
