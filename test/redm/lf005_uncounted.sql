-- LF005 "above every token this database has issued" (a token of a discarded
-- history after a failover) is not counted in old_band_refusals; docs say
-- old_band_refusals counts LF005 refusals, and FencingOldBandRefusals relies on it.
\set ON_ERROR_STOP 0
\set VERBOSITY sqlstate
SELECT fencing_monitor.stats_reset() IS NOT NULL AS reset;
SELECT fencing.next_token() > 0 AS issued;
SELECT fencing.fence_advance(NULL, 9000000000000000000);   -- LF005
\set ON_ERROR_STOP 1
\set VERBOSITY default
SELECT old_band_refusals FROM fencing_monitor.stats;
SELECT old_band_refusals = 1 AS ok FROM fencing_monitor.stats \gset
\if :ok
\echo PASS
\else
DO $$BEGIN RAISE EXCEPTION 'FAIL: an LF005 refusal was not counted in old_band_refusals'; END$$;
\endif
