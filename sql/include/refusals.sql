-- ---- refusals counted by fencing_monitor, included with \i ----
-- pg_temp.refusals_counted(advance, guard, claim): whether exactly so many
-- refusals of fence_advance, fence_guard and claim_guard were counted
-- since this include or the last pg_temp.refusals_mark(); a WARNING shows
-- the counts when not.  True where the counters are off (PostgreSQL 15
-- and 16 without fencing in shared_preload_libraries, stats_info.counting):
-- the preload suite of test/run.sh runs this file with them on.
\set ECHO none
CREATE TEMP TABLE refusals_base (advance bigint, guard bigint, claim bigint);
CREATE FUNCTION pg_temp.refusals_mark() RETURNS void
LANGUAGE sql AS $$
	DELETE FROM pg_temp.refusals_base;
	INSERT INTO pg_temp.refusals_base
	SELECT fence_advance_refusals, fence_guard_refusals, claim_guard_refusals
	  FROM fencing_monitor.stats;
$$;
CREATE FUNCTION pg_temp.refusals_counted(advance bigint, guard bigint,
										 claim bigint DEFAULT 0)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	n	record;
BEGIN
	IF NOT (SELECT i.counting FROM fencing_monitor.stats_info AS i) THEN
		RETURN true;
	END IF;
	SELECT s.fence_advance_refusals - b.advance AS advance,
		   s.fence_guard_refusals - b.guard AS guard,
		   s.claim_guard_refusals - b.claim AS claim
	  INTO n
	  FROM fencing_monitor.stats AS s, pg_temp.refusals_base AS b;
	IF (n.advance, n.guard, n.claim) = (advance, guard, claim) THEN
		RETURN true;
	END IF;
	RAISE WARNING 'counted: fence_advance %, fence_guard %, claim_guard %',
		n.advance, n.guard, n.claim;
	RETURN false;
END $$;
SELECT pg_temp.refusals_mark() AS refusals_marked \gset
\set ECHO all
-- ---- end of refusals ----
