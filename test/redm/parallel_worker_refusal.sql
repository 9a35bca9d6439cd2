-- PostgreSQL 17+: a refusal in a parallel worker is never counted, even
-- after its leader counted (docs: "before its leader counted anything").
\set ON_ERROR_STOP 0
\set VERBOSITY sqlstate
CREATE TABLE redm_ft(id int, fence bigint);
INSERT INTO redm_ft SELECT g, 100 FROM generate_series(1, 10) g;
SELECT fencing_monitor.stats_reset() IS NOT NULL AS reset;
SELECT fencing.fence_advance(100, 5);      -- the leader counts: 1
SET debug_parallel_query = on; SET parallel_leader_participation = off;
SELECT fencing.fence_advance(fence, 5) FROM redm_ft;   -- in a worker: LF001
RESET debug_parallel_query; RESET parallel_leader_participation;
DROP TABLE redm_ft;
\set ON_ERROR_STOP 1
\set VERBOSITY default
SELECT fence_advance_refusals FROM fencing_monitor.stats;
SELECT fence_advance_refusals = 2 AS ok FROM fencing_monitor.stats \gset
\if :ok
\echo PASS
\else
DO $$BEGIN RAISE EXCEPTION 'FAIL: the parallel worker''s refusal was not counted'; END$$;
\endif
