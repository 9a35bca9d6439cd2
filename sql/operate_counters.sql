-- Counters of fencing.lease_status (per lease) and their totals.  The
-- database is shared with the other files, so the totals are compared as
-- deltas against a baseline, and exact counts are asserted only for this
-- file's own, fresh lease names.  (fencing_monitor.stats counts events
-- in shared memory: sql/monitor_stats.sql.)

CREATE FUNCTION pg_temp.totals(OUT leases bigint, OUT held bigint,
	OUT acquires bigint, OUT renewals bigint, OUT releases bigint,
	OUT expired_takeovers bigint)
LANGUAGE sql AS $$
	SELECT count(*), count(*) FILTER (WHERE state = 'held'),
		   coalesce(sum(acquires), 0), coalesce(sum(renewals), 0),
		   coalesce(sum(releases), 0), coalesce(sum(expired_takeovers), 0)
	  FROM fencing.lease_status
$$;
SELECT * FROM pg_temp.totals() \gset before_
\i sql/include/refusals.sql

-- a fresh lease: one acquire
SELECT fencing.lease_acquire('op_cnt', 'alice', '1 min') AS a1 \gset
SELECT holder, state, takeover, acquires, renewals, releases, expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- two renewals; a renewal with a token that is not the lease's counts nothing
SELECT fencing.lease_renew('op_cnt', :a1, '1 min') AS renewed;
SELECT fencing.lease_renew('op_cnt', :a1, '2 min') AS renewed;
SELECT fencing.lease_renew('op_cnt', :a1 + 1000000, '1 min') AS wrong_token_renewed;
-- checks and refused acquires count nothing either
SELECT fencing.lease_lock('op_cnt', :a1) AS checked;
SELECT fencing.lease_acquire('op_cnt', 'bob', '1 min') IS NULL AS bob_refused;
SELECT fencing.lease_acquire('op_cnt', 'bob', '1 min', '50 ms') IS NULL AS bob_refused_after_waiting;
SELECT holder, acquires, renewals, releases, expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- re-acquire by the same holder: an acquire, no holder change
SELECT fencing.lease_acquire('op_cnt', 'alice', '1 min') AS a2 \gset
SELECT holder, token = :a2 AS current, takeover, acquires, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- release; a second release of the same token is false and counts nothing
SELECT fencing.lease_release('op_cnt', :a2) AS released;
SELECT fencing.lease_release('op_cnt', :a2) AS released_again;
SELECT fencing.lease_release('op_cnt', :a1) AS old_token_released;
SELECT state, acquires, renewals, releases, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- another holder after a release: a holder change, not a takeover
SELECT fencing.lease_acquire('op_cnt', 'bob', '1 min') AS b1 \gset
SELECT holder, takeover, acquires, releases, expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- bob's lease runs out; renewing it now is false and counts nothing
SELECT fencing.lease_renew('op_cnt', :b1, '100 ms') AS renewed_short;
SELECT pg_sleep_until((SELECT expires_at FROM fencing.lease_status WHERE name = 'op_cnt'));
SELECT fencing.lease_renew('op_cnt', :b1, '1 min') AS renewed_after_expiry;
SELECT state, renewals FROM fencing.lease_status WHERE name = 'op_cnt';

-- carol takes the expired lease over: an expired takeover
SELECT fencing.lease_acquire('op_cnt', 'carol', '1 min') AS c1 \gset
SELECT holder, takeover, acquires, expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';
-- her re-acquire is no takeover; the count of takeovers stays
SELECT fencing.lease_acquire('op_cnt', 'carol', '1 min') AS c2 \gset
SELECT holder, takeover, acquires, expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- the same holder re-acquiring its own expired lease is no takeover
SELECT fencing.lease_renew('op_cnt', :c2, '100 ms') AS renewed_short;
SELECT pg_sleep_until((SELECT expires_at FROM fencing.lease_status WHERE name = 'op_cnt'));
SELECT fencing.lease_acquire('op_cnt', 'carol', '1 min') AS c3 \gset
SELECT holder, takeover, acquires, renewals, expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- a force-release counts as a release
SELECT fencing.lease_force_release('op_cnt') AS forced;
SELECT state, releases FROM fencing.lease_status WHERE name = 'op_cnt';

-- a rolled-back acquire, renew and release count nothing
SELECT fencing.lease_acquire('op_cnt', 'dave', '1 min') AS d1 \gset
BEGIN;
SELECT fencing.lease_renew('op_cnt', :d1, '1 min') AS renewed;
SELECT fencing.lease_release('op_cnt', :d1) AS released;
SELECT fencing.lease_acquire('op_cnt', 'erin', '1 min') IS NOT NULL AS erin_got;
ROLLBACK;
SELECT holder, token = :d1 AS current, state, takeover, acquires, renewals, releases,
	   expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt';

-- a second fresh lease
SELECT fencing.lease_acquire('op_cnt2', 'frank', '1 min') AS f1 \gset
SELECT fencing.lease_renew('op_cnt2', :f1, '1 min') AS renewed;
SELECT holder, acquires, renewals, releases, expired_takeovers, holder_changes
  FROM fencing.lease_status WHERE name = 'op_cnt2';

-- the totals moved by exactly this file's counts: 2 new leases,
-- 7 + 1 acquires, 4 + 1 renewals, 2 releases, 1 expired takeover; no
-- stale write was refused
SELECT leases - :before_leases AS leases,
	   acquires - :before_acquires AS acquires,
	   renewals - :before_renewals AS renewals,
	   releases - :before_releases AS releases,
	   expired_takeovers - :before_expired_takeovers AS expired_takeovers
  FROM pg_temp.totals();
SELECT pg_temp.refusals_counted(0, 0, 0) AS stale_writes_refused;
-- both of this file's live leases count as held
SELECT count(*) FILTER (WHERE state = 'held') AS held_here
  FROM fencing.lease_status WHERE name IN ('op_cnt', 'op_cnt2');

-- everybody with USAGE on schema fencing may read the view
CREATE ROLE regress_op_counters;
GRANT USAGE ON SCHEMA fencing TO regress_op_counters;
SET ROLE regress_op_counters;
SELECT sum(acquires) - :before_acquires AS acquires FROM fencing.lease_status;
SELECT name, acquires FROM fencing.lease_status WHERE name = 'op_cnt2';
RESET ROLE;
REVOKE USAGE ON SCHEMA fencing FROM regress_op_counters;
DROP ROLE regress_op_counters;

SELECT fencing.lease_release('op_cnt', :d1) AS released,
	   fencing.lease_release('op_cnt2', :f1) AS released2;
