-- PostgreSQL 17+: the exporter's "fencing" query plans a parallel count over
-- fencing.leases once the table is big enough (200,000 leases: 41 MB), and
-- _stats() then runs in parallel mode, where attach_guarded() cannot attach:
-- counting = 0 and every counter NULL (NaN), scrape after scrape.  Every
-- counter-based alert is silent; FencingCountersOff fires.
\set ON_ERROR_STOP 1
DROP ROLE IF EXISTS redm_exporter;
CREATE ROLE redm_exporter LOGIN IN ROLE pg_monitor;
SELECT count(fencing.lease_acquire('redm_job' || g, 'h', '1 h')) FROM generate_series(1, 200000) AS g;
ANALYZE fencing.leases;
-- a fresh session, as the exporter's
\c - redm_exporter
SELECT pg_catalog.current_database() AS datname,
       i.counting::int AS counting,
       s.acquires AS acquires_total
  FROM fencing_monitor.stats AS s, fencing_monitor.stats_info AS i \gset
\echo counting=:counting acquires_total=:acquires_total
\c - postgres
SELECT count(fencing.lease_force_release('redm_job' || g)) >= 0 AS released FROM generate_series(1, 200000) AS g;
SELECT fencing.lease_purge('0 s') >= 0 AS purged;
DROP ROLE redm_exporter;
SELECT :counting = 1 AS ok \gset
\if :ok
\echo PASS
\else
DO $$BEGIN RAISE EXCEPTION 'FAIL: the exporter''s scrape says counting = 0'; END$$;
\endif
