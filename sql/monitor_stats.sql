--
-- fencing_monitor: the counters in shared memory, their reset, and who may
-- read and reset them (docs/operations.md).
--
-- They count on PostgreSQL 17 and later, and on 15 and 16 only with fencing
-- in shared_preload_libraries; otherwise they are NULL and stats_info says
-- why (expected/monitor_stats_1.out).  The first query fails both expected
-- files when a server counts where it should not, or the reverse.
--
SELECT counting = (current_setting('server_version_num')::int >= 170000
				   OR 'fencing' = ANY (string_to_array(replace(
						current_setting('shared_preload_libraries'), ' ', ''), ',')))
	   AS counting_as_documented,
	   counting, detail
  FROM fencing_monitor.stats_info;

-- this database's counters from zero: every value below is exact
SELECT r = (SELECT stats_reset FROM fencing_monitor.stats_info) AS reset_returns_stats_reset
  FROM fencing_monitor.stats_reset() AS r;
SELECT acquires, renewals, releases, force_releases, expirations, takeovers,
	   fence_advance_refusals, fence_guard_refusals, claim_guard_refusals,
	   old_band_refusals, waits, wait_timeouts, wait_time
  FROM fencing_monitor.stats;
SELECT count(*) AS buckets, sum(waits) AS waits FROM fencing_monitor.wait_histogram;
-- the gauges count the lease rows (other files' too)
SELECT leases = (SELECT count(*) FROM fencing.leases) AS leases,
	   held <= leases AS held
  FROM fencing_monitor.stats;

-- the counters that are not zero
CREATE FUNCTION pg_temp.counters() RETURNS TABLE (counter text, n bigint)
LANGUAGE sql AS $$
	SELECT key, value::bigint
	  FROM fencing_monitor.stats AS s, jsonb_each_text(to_jsonb(s))
	 WHERE key NOT IN ('leases', 'held', 'wait_time') AND value::bigint <> 0
	 ORDER BY key
$$;

-- ---- lease events count when their transaction commits ----
SELECT fencing.lease_acquire('ms_a', 'h1', '10 min') AS t \gset
SELECT fencing.lease_renew('ms_a', :t, '10 min') AS renewed;
SELECT fencing.lease_release('ms_a', :t) AS released;
-- a failed renew and release count nothing
SELECT fencing.lease_renew('ms_a', :t, '10 min') AS renewed_again,
	   fencing.lease_release('ms_a', :t) AS released_again;
-- rolled back: not counted
BEGIN;
SELECT fencing.lease_acquire('ms_b', 'h1', '10 min') IS NOT NULL AS acquired_in_rollback;
ROLLBACK;
-- a subtransaction rolled back: not counted; one released: counted
BEGIN;
SAVEPOINT s1;
SELECT fencing.lease_acquire('ms_b', 'h1', '10 min') IS NOT NULL AS acquired_in_savepoint;
ROLLBACK TO SAVEPOINT s1;
SAVEPOINT s2;
SELECT fencing.lease_acquire('ms_c', 'h1', '10 min') IS NOT NULL AS acquired_in_savepoint;
RELEASE SAVEPOINT s2;
-- not counted before the commit
SELECT * FROM pg_temp.counters();
COMMIT;
SELECT * FROM pg_temp.counters();

-- expirations: an expired term taken again by its holder, then by another
-- holder (a takeover); a live lease taken again by its holder is neither
SELECT fencing.lease_acquire('ms_d', 'h1', '1 ms') IS NOT NULL AS acquired;
SELECT pg_sleep(0.01);
SELECT fencing.lease_acquire('ms_d', 'h1', '1 ms') IS NOT NULL AS own_expired_again;
SELECT pg_sleep(0.01);
SELECT fencing.lease_acquire('ms_d', 'h2', '10 min') IS NOT NULL AS taken_over;
SELECT fencing.lease_acquire('ms_d', 'h2', '10 min') IS NOT NULL AS own_live_again;
SELECT takeover, expired_takeovers FROM fencing.lease_status WHERE name = 'ms_d';
-- force-release: a lease, and each live slot of a semaphore
SELECT fencing.semaphore_acquire('ms_sem', 'h' || i, 3, '10 min') IS NOT NULL AS slot
  FROM generate_series(1, 2) AS i;
SELECT fencing.lease_force_release('ms_d') AS forced, fencing.lease_force_release('ms_sem') AS forced_sem;
SELECT * FROM pg_temp.counters();
-- an election is a lease: a campaign counts as an acquire, a resignation
-- as a release, the leader's renewal as a renewal; a proclaim is none
CREATE TEMP TABLE ms_before AS SELECT * FROM fencing_monitor.stats;
SELECT fencing.election_campaign('ms_e', 'h1', 'v1', '10 min') AS e \gset
SELECT fencing.election_proclaim('ms_e', :e, 'v2') AS proclaimed;
SELECT fencing.lease_renew('ms_e', :e, '10 min') AS renewed;
SELECT fencing.election_resign('ms_e', :e) AS resigned;
SELECT s.acquires - b.acquires AS acquires, s.renewals - b.renewals AS renewals,
	   s.releases - b.releases AS releases
  FROM fencing_monitor.stats AS s, ms_before AS b;

-- ---- refused writes count at once, although they roll back ----
CREATE TABLE ms_rows (id int PRIMARY KEY, v text, fence bigint);
CREATE TABLE ms_guarded (id int PRIMARY KEY, v text, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON ms_guarded
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
SELECT fencing.next_token() AS old \gset
SELECT fencing.next_token() AS new \gset
INSERT INTO ms_rows VALUES (1, 'new', :new);
INSERT INTO ms_guarded VALUES (1, 'new', :new);
\set VERBOSITY sqlstate
-- fence_advance, in a transaction that rolls back
BEGIN;
UPDATE ms_rows SET v = 'old', fence = fencing.fence_advance(fence, :old) WHERE id = 1;
ROLLBACK;
-- fence_guard: a declared token, a fence set lower, a fence set to NULL
BEGIN;
SET LOCAL fencing.token = :'old';
UPDATE ms_guarded SET v = 'old' WHERE id = 1;
ROLLBACK;
UPDATE ms_guarded SET fence = :old WHERE id = 1;
UPDATE ms_guarded SET fence = NULL WHERE id = 1;
-- refused inside a PL/pgSQL block that catches the error
DO $$
BEGIN
	UPDATE ms_rows SET fence = fencing.fence_advance(fence, 1) WHERE id = 1;
EXCEPTION WHEN SQLSTATE 'LF001' THEN
	RAISE NOTICE 'caught %', SQLSTATE;
END $$;
-- claim_guard: a completion with a stale delivery
CREATE TABLE ms_jobs (id int PRIMARY KEY, state text, claim bigint);
CREATE TRIGGER stamp BEFORE UPDATE ON ms_jobs FOR EACH ROW
	WHEN (NEW.state = 'running' AND OLD.state = 'queued')
	EXECUTE FUNCTION fencing.claim_stamp('claim');
CREATE TRIGGER complete BEFORE UPDATE ON ms_jobs FOR EACH ROW
	WHEN (NEW.state = 'done')
	EXECUTE FUNCTION fencing.claim_guard('claim', '');
INSERT INTO ms_jobs VALUES (1, 'queued', NULL);
UPDATE ms_jobs SET state = 'running' WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = :'old';
UPDATE ms_jobs SET state = 'done' WHERE id = 1;
ROLLBACK;
-- LF005: a token issued before the database's current band, and one
-- above every token this database issued (another history's)
SELECT fencing.advance_tokens();
SELECT fencing.fence_advance(NULL, :new);
SELECT fencing.next_token() + 1000000000 AS alien \gset
SELECT fencing.fence_advance(NULL, :alien);
\set VERBOSITY default
SELECT * FROM pg_temp.counters();
SELECT v, fence = :new AS fence_unchanged FROM ms_rows;
SELECT v, fence = :new AS fence_unchanged FROM ms_guarded;

-- ---- waits: two that run out (specs/monitor_waits.spec: one that ends
-- with the lease, and the wait event) ----
SELECT fencing_monitor.stats_reset() IS NOT NULL AS reset;
SELECT fencing.lease_acquire('ms_w', 'h1', '10 min') IS NOT NULL AS held,
	   fencing.semaphore_acquire('ms_s', 'h1', 1, '10 min') IS NOT NULL AS held_slot;
SELECT fencing.lease_acquire('ms_w', 'h2', '10 min', '20 ms') IS NULL AS timed_out;
SELECT fencing.semaphore_acquire('ms_s', 'h2', 1, '10 min', '30 ms') IS NULL AS timed_out;
SELECT * FROM pg_temp.counters();
-- each wait lasted at least its bound (20 and 30 ms)
SELECT upper_ms, waits FROM fencing_monitor.wait_histogram
 WHERE upper_ms < 20 OR upper_ms = 'Infinity' ORDER BY upper_ms;
SELECT wait_time >= 50 AS wait_time_ms FROM fencing_monitor.stats;
-- a try-once acquire (wait => 0), an acquire free at once and a holder's
-- own lease do not wait
SELECT fencing.lease_acquire('ms_w', 'h3', '10 min') IS NULL AS busy,
	   fencing.lease_acquire('ms_w2', 'h3', '10 min', '1 min') IS NOT NULL AS free,
	   fencing.lease_acquire('ms_w', 'h1', '10 min', '1 min') IS NOT NULL AS own;
SELECT waits, wait_timeouts, acquires FROM fencing_monitor.stats;

-- ---- prepared transactions: lease events count at COMMIT PREPARED ----
SELECT fencing_monitor.stats_reset() IS NOT NULL AS reset;
SELECT fencing.lease_acquire('ms_p', 'h1', '1 ms') IS NOT NULL AS acquired;
SELECT pg_sleep(0.01);
-- a takeover of the expired lease, prepared and rolled back: nothing
BEGIN;
SELECT fencing.lease_acquire('ms_p', 'h2', '10 min') IS NOT NULL AS taken_over;
PREPARE TRANSACTION 'ms_p1';
SELECT * FROM pg_temp.counters();
ROLLBACK PREPARED 'ms_p1';
SELECT * FROM pg_temp.counters();
-- prepared and committed: counted once committed, not before
BEGIN;
SELECT fencing.lease_acquire('ms_p', 'h2', '10 min') IS NOT NULL AS taken_over;
PREPARE TRANSACTION 'ms_p2';
SELECT * FROM pg_temp.counters();
COMMIT PREPARED 'ms_p2';
SELECT * FROM pg_temp.counters();

-- ---- the reset ----
SELECT r = (SELECT stats_reset FROM fencing_monitor.stats_info) AS stats_reset_now,
	   r >= now() AS not_before_this_transaction
  FROM fencing_monitor.stats_reset() AS r;
CREATE TEMP TABLE ms_reset AS SELECT stats_reset FROM fencing_monitor.stats_info;
SELECT * FROM pg_temp.counters();
SELECT sum(waits) AS histogram_waits FROM fencing_monitor.wait_histogram;

-- ---- who may read and reset ----
CREATE ROLE regress_ms_monitor NOLOGIN IN ROLE pg_monitor;
CREATE ROLE regress_ms_plain NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_ms_plain;
SELECT r, has_schema_privilege(r, 'fencing', 'USAGE') AS fencing_usage,
	   has_schema_privilege(r, 'fencing_monitor', 'USAGE') AS monitor_usage,
	   has_function_privilege(r, 'fencing_monitor.stats_reset()', 'EXECUTE') AS may_reset
  FROM unnest(ARRAY['public', 'pg_monitor', 'regress_ms_monitor', 'regress_ms_plain']) AS r;
\set VERBOSITY terse
-- a member of pg_monitor, and nothing else, reads every view ...
SET ROLE regress_ms_monitor;
SELECT counting IS NOT NULL AS stats_info FROM fencing_monitor.stats_info;
SELECT leases > 0 AS stats FROM fencing_monitor.stats;
SELECT count(*) > 0 AS lease_status FROM fencing_monitor.lease_status;
SELECT count(*) >= 0 AS waiters FROM fencing_monitor.waiters;
SELECT count(*) >= 0 AS wait_histogram FROM fencing_monitor.wait_histogram;
-- ... but resets nothing, and uses no lease
SELECT fencing_monitor.stats_reset();
SELECT fencing.lease_acquire('ms_mon', 'mon', '1 min');
RESET ROLE;
-- an application role reads nothing of it, and resets nothing
SET ROLE regress_ms_plain;
SELECT * FROM fencing_monitor.stats;
SELECT fencing_monitor.stats_reset();
SELECT fencing.lease_acquire('ms_plain', 'app', '1 min') IS NOT NULL AS app_acquires;
RESET ROLE;
\set VERBOSITY default
-- nothing was reset by them
SELECT i.stats_reset IS NOT DISTINCT FROM r.stats_reset AS not_reset
  FROM fencing_monitor.stats_info AS i, ms_reset AS r;

DROP TABLE ms_rows, ms_guarded, ms_jobs;
SELECT fencing.lease_force_release(n) FROM unnest(ARRAY['ms_w', 'ms_w2', 'ms_s', 'ms_c', 'ms_plain', 'ms_p']) AS n;
DELETE FROM fencing.leases WHERE name LIKE 'ms\_%';
DROP ROLE regress_ms_monitor;
REVOKE USAGE ON SCHEMA fencing FROM regress_ms_plain;
DROP ROLE regress_ms_plain;

-- ---- in new sessions ----
\set regress_db :DBNAME
SELECT fencing.lease_acquire('ms_p', 'h1', '10 min') AS t \gset
-- a prepared release, committed by a session that never loaded fencing:
-- the next read counts it
BEGIN;
SELECT fencing.lease_release('ms_p', :t) AS released;
PREPARE TRANSACTION 'ms_p3';
SELECT COALESCE(releases, 0) AS releases_before FROM fencing_monitor.stats \gset
\c
COMMIT PREPARED 'ms_p3';
SELECT releases - :releases_before AS releases_counted FROM fencing_monitor.stats;

-- a refusal in a parallel worker counts: the worker attaches when it loads
-- the library, before its parallel operation starts
\c
CREATE TABLE ms_par (id int, fence bigint);
INSERT INTO ms_par SELECT g, 100 FROM generate_series(1, 10) AS g;
SELECT COALESCE(fence_advance_refusals, 0) AS refusals_before FROM fencing_monitor.stats \gset
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
					   THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
				  'on', false) AS parallel;
SET parallel_leader_participation = off;
\set VERBOSITY sqlstate
SELECT fencing.fence_advance(fence, 5) FROM ms_par;
\set VERBOSITY default
RESET parallel_leader_participation;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
					   THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
				  'off', false) AS serial;
SELECT fence_advance_refusals - :refusals_before AS worker_refusal_counted
  FROM fencing_monitor.stats;
DROP TABLE ms_par;

-- a new session's first read, planned in parallel where it could be (the
-- exporter's, over a large fencing.leases), counts: the functions behind
-- the counters are PARALLEL UNSAFE, so the read runs in the leader, outside
-- parallel mode
\c
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT i.counting = (s.acquires IS NOT NULL) AS read_consistent,
	   i.counting = (current_setting('server_version_num')::int >= 170000
					 OR 'fencing' = ANY (string_to_array(replace(
						 current_setting('shared_preload_libraries'), ' ', ''), ',')))
	   AS counting_as_documented
  FROM fencing_monitor.stats AS s, fencing_monitor.stats_info AS i;
SELECT p.proname, p.proparallel FROM pg_catalog.pg_proc AS p
 WHERE p.pronamespace = 'fencing_monitor'::regnamespace ORDER BY 1;
RESET ALL;

-- the counters start from zero with the extension (DROP EXTENSION leaves
-- them in shared memory)
CREATE DATABASE regress_ms_db;
\c regress_ms_db
CREATE EXTENSION fencing;
SELECT fencing.lease_acquire('ms_x', 'h1', '10 min') IS NOT NULL AS acquired;
SELECT COALESCE(stats_reset, '-infinity') AS first_reset FROM fencing_monitor.stats_info \gset
SELECT acquires FROM fencing_monitor.stats;
DROP EXTENSION fencing;
CREATE EXTENSION fencing;
SELECT acquires, leases FROM fencing_monitor.stats;
SELECT i.stats_reset > :'first_reset' OR NOT i.counting AS reset_at_create
  FROM fencing_monitor.stats_info AS i;
\c :regress_db
DROP DATABASE regress_ms_db;
DELETE FROM fencing.leases WHERE name = 'ms_p';
