-- Lease events of a prepared transaction count at PREPARE and stay counted
-- after ROLLBACK PREPARED: four takeovers that never happened fire
-- FencingLeasesExpiring (> 3 in 15 min).  Needs max_prepared_transactions > 0.
\set ON_ERROR_STOP 1
SELECT fencing_monitor.stats_reset() IS NOT NULL AS reset;
SELECT fencing.lease_acquire('redm_2pc', 'A', '1 ms') > 0 AS a_holds;
SELECT pg_sleep(0.01);
BEGIN; SELECT fencing.lease_acquire('redm_2pc', 'B', '10 min') > 0; PREPARE TRANSACTION 'redm1'; ROLLBACK PREPARED 'redm1';
BEGIN; SELECT fencing.lease_acquire('redm_2pc', 'B', '10 min') > 0; PREPARE TRANSACTION 'redm1'; ROLLBACK PREPARED 'redm1';
BEGIN; SELECT fencing.lease_acquire('redm_2pc', 'B', '10 min') > 0; PREPARE TRANSACTION 'redm1'; ROLLBACK PREPARED 'redm1';
BEGIN; SELECT fencing.lease_acquire('redm_2pc', 'B', '10 min') > 0; PREPARE TRANSACTION 'redm1'; ROLLBACK PREPARED 'redm1';
SELECT holder, holder_changes, acquires FROM fencing.lease_status WHERE name = 'redm_2pc';
SELECT acquires, expirations, takeovers FROM fencing_monitor.stats;
SELECT acquires = 1 AND expirations = 0 AND takeovers = 0 AS ok FROM fencing_monitor.stats \gset
\if :ok
\echo PASS
\else
DO $$BEGIN RAISE EXCEPTION 'FAIL: rolled-back prepared acquires were counted'; END$$;
\endif
