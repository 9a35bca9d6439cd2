--
-- Bad input (e): read-only transactions.
--
-- Every function that issues a token or writes a lease row refuses to run
-- in a read-only transaction (25006), whatever made it read-only: BEGIN
-- READ ONLY, SET TRANSACTION READ ONLY, default_transaction_read_only.
-- lease_lock is one of them, since it share-locks the lease row; a
-- waiting lease_acquire fails at once instead of waiting.  The predicates
-- (fence_allows, fence_advance, expect_rows), the views and
-- fence_guard on a temporary table work; a stale write is still refused
-- (LF001) but not counted, since counting would need a write.
-- (A hot standby is read-only too: t/050_standby_calls.pl.)
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\i sql/include/case_harness.sql

SELECT fencing.lease_acquire('bi_e', 'alice', '10 min') > 0 AS acquired;
SELECT fencing.lease_acquire('bi_e_free', 'alice', '10 min') AS t_free \gset
SELECT fencing.lease_release('bi_e_free', :t_free) AS released;
CREATE FUNCTION pg_temp.tok(lease text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = lease $$;

CREATE TEMP TABLE bi_e_rows (id int PRIMARY KEY, fence bigint, note text);
INSERT INTO bi_e_rows VALUES (1, 7, 'written by 7'), (2, NULL, 'never written');
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON bi_e_rows
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE OR REPLACE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql AS $$ SELECT string_agg(t::text, ' ' ORDER BY t.id) FROM pg_temp.bi_e_rows AS t $$;

-- every writing function, in BEGIN READ ONLY
BEGIN READ ONLY;
SELECT clock_timestamp() AS t0 \gset
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.next_token()$$),
	($$SELECT fencing.lease_acquire('bi_e_new', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_e_free', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_e', 'alice', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_e', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_e', 'bob', '1 min', '5 s')$$),
	($$SELECT fencing.lease_renew('bi_e', pg_temp.tok('bi_e'), '1 min')$$),
	($$SELECT fencing.lease_renew('bi_e', pg_temp.tok('bi_e') + 1000000, '1 min')$$),
	($$SELECT fencing.lease_release('bi_e', pg_temp.tok('bi_e'))$$),
	($$SELECT fencing.lease_release('bi_e_free', pg_temp.tok('bi_e_free'))$$),
	($$SELECT fencing.lease_lock('bi_e', pg_temp.tok('bi_e'))$$),
	($$SELECT fencing.lease_lock('bi_e', pg_temp.tok('bi_e') + 1000000)$$),
	($$SELECT fencing.lease_lock('bi_e_none', 1)$$),
	($$SELECT fencing.lease_force_release('bi_e')$$),
	($$SELECT fencing.lease_purge('0')$$),
	($$SELECT fencing.advance_tokens(0)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- the waiting acquire did not wait
SELECT clock_timestamp() - :'t0' < interval '4 s' AS did_not_wait;

-- what works in a read-only transaction
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.fence_allows(7, 8)$$),
	($$SELECT fencing.fence_allows(8, 7)$$),
	($$SELECT fencing.fence_allows(7, 7, true)$$),
	($$SELECT fencing.fence_advance(7, 8)$$),
	($$SELECT fencing.fence_advance(8, 7)$$),
	($$SELECT fencing.expect_rows(1)$$),
	($$SELECT fencing.expect_rows(0)$$),
	($$SELECT state FROM fencing.lease_status WHERE name = 'bi_e'$$),
	($$SELECT leases > 0 FROM fencing_monitor.stats$$),
	($$UPDATE bi_e_rows SET note = 'by 8', fence = 8 WHERE id = 1 RETURNING fence$$),
	($$UPDATE bi_e_rows SET note = 'by 6', fence = 6 WHERE id = 1 RETURNING fence$$),
	($$SELECT set_config('fencing.token', '9', true)$$),
	($$UPDATE bi_e_rows SET note = 'by 9' WHERE id = 1 RETURNING fence$$),
	($$SELECT set_config('fencing.token', '5', true)$$),
	($$DELETE FROM bi_e_rows WHERE id = 1 RETURNING fence$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
COMMIT;

-- the other ways into a read-only transaction
BEGIN;
SET TRANSACTION READ ONLY;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('bi_e', 'alice', '1 min')$$),
	($$SELECT fencing.lease_lock('bi_e', pg_temp.tok('bi_e'))$$),
	($$SELECT fencing.next_token()$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
COMMIT;
SET default_transaction_read_only = on;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('bi_e', pg_temp.tok('bi_e'), '1 min')$$),
	($$SELECT fencing.lease_release('bi_e', pg_temp.tok('bi_e'))$$),
	($$SELECT fencing.next_token()$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET default_transaction_read_only;
BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_lock('bi_e', pg_temp.tok('bi_e'))$$),
	($$SELECT fencing.lease_acquire('bi_e', 'alice', '1 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
COMMIT;

-- as a client sees it
BEGIN READ ONLY;
SELECT fencing.lease_lock('bi_e', pg_temp.tok('bi_e'));
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN READ ONLY;
SELECT fencing.next_token();
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- a read-write transaction afterwards: all works, the lease was untouched
SELECT name, holder, state, acquires, renewals, releases
  FROM fencing.lease_status WHERE name LIKE 'bi\_e%' ORDER BY name;
SELECT fencing.lease_lock('bi_e', pg_temp.tok('bi_e')) AS checked,
	   fencing.lease_renew('bi_e', pg_temp.tok('bi_e'), '5 min') AS renewed;
SELECT * FROM bi_e_rows ORDER BY id;

-- every case, and any refused case that changed something (a refused
-- stale write moves the stale-write counter: that is what it counts)
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();
