-- test/rede: after a band entry (a promotion, PITR, a restore; here
-- fencing.advance_tokens() as the superuser's stand-in for a failover), the
-- election keeps reporting the lost leader as its live leader for the rest
-- of its TTL (up to a day): election_leader and election_observe name
-- token T, which lease_watch calls lost_at_failover and which lease_renew,
-- election_proclaim and every resource refuse with LF005.  Observers are
-- never woken or told, and every other candidate is refused (NULL).
-- Expected (README "An election has at most one live leader, whose token
-- fences its writes; observers wake when the leadership changes"): the
-- reported leader is one whose token is current, i.e. no leader (or the
-- observe returns) once the leader's token is lost at failover.
-- Run as a superuser in a database with the extension and role app
-- (USAGE on schema fencing).  Fails (ERROR "BUG ...") while the bug is there.
\set ON_ERROR_STOP 0
SET ROLE app;
SELECT fencing.election_campaign('rede_zombie', 'node-1', 'host-1', '1 hour') AS t \gset
RESET ROLE;
SELECT fencing.advance_tokens();          -- a new band, as after a failover
SET ROLE app;
SELECT reason FROM fencing.lease_watch('rede_zombie', :t);              -- lost_at_failover
SELECT fencing.lease_renew('rede_zombie', :t, '1 hour');                -- LF005
SELECT fencing.election_proclaim('rede_zombie', :t, 'host-1b');         -- LF005
SELECT fencing.election_campaign('rede_zombie', 'node-2', 'host-2', '1 hour') IS NULL AS node2_refused;
-- an observer that knows (T, host-1) is not told anything, and waits out its wait
SELECT candidate, token = :t AS still_t
  FROM fencing.election_observe('rede_zombie', :t, 'host-1', '200 ms');
\set ON_ERROR_STOP 1
DO $$
DECLARE
	lt bigint := (SELECT token FROM fencing.election_leader('rede_zombie'));
	why text;
BEGIN
	why := (SELECT reason FROM fencing.lease_watch('rede_zombie', lt));
	IF lt IS NOT NULL AND why <> 'current' THEN
		RAISE EXCEPTION 'BUG: election_leader reports token % as the live leader, but lease_watch says %', lt, why;
	END IF;
END
$$;
RESET ROLE;
