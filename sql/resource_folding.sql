--
-- fence_advance is IMMUTABLE (Citus sends only IMMUTABLE functions of a
-- row's columns to the workers with an UPDATE or ON CONFLICT DO UPDATE).
-- The planner folds an IMMUTABLE call only when every argument is a
-- constant; with the row's fence column as its first argument it is never
-- folded and runs for each row the statement writes, at execution, in the
-- transaction that commits the write.  These tests fail if it were folded,
-- hoisted or cached.  A call whose arguments are all constants is folded,
-- once, at plan time; a cached plan holding its result is forgotten when
-- that transaction ends, so every later execution plans again and runs the
-- call again, with its band check and its synchronous commit (the end of
-- this file).
\set VERBOSITY default
\set SHOW_CONTEXT never
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;

SELECT p.provolatile, p.proparallel, p.proisstrict
  FROM pg_catalog.pg_proc AS p
 WHERE p.oid = 'fencing.fence_advance(bigint, bigint, boolean)'::pg_catalog.regprocedure;

CREATE TABLE fold (id int PRIMARY KEY, v text, fence bigint);
INSERT INTO fold VALUES (1, 'one', 10), (2, 'two', NULL), (3, 'three', 50);

-- the call stays in the plan, with the column as its argument
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE fold SET v = 'x', fence = fencing.fence_advance(fence, 20) WHERE id = 2;

-- a stale token for a row the statement does not write: no error
UPDATE fold SET v = 'x', fence = fencing.fence_advance(fence, 20) WHERE id = 99;
UPDATE fold SET v = 'x', fence = fencing.fence_advance(fence, 20) WHERE false;
UPDATE fold SET v = 'x', fence = fencing.fence_advance(fence, 20) WHERE id = 2 RETURNING *;

-- a generic plan (parameters, no constants) raises on every execution and
-- counts every refusal: nothing was evaluated once and kept
SET plan_cache_mode = force_generic_plan;
PREPARE w(int, bigint) AS
  UPDATE fold SET v = 'by ' || $2, fence = fencing.fence_advance(fence, $2)
   WHERE id = $1 RETURNING *;
\i sql/include/refusals.sql
EXECUTE w(1, 5);
\echo :SQLSTATE
EXECUTE w(1, 5);
\echo :SQLSTATE
EXECUTE w(1, 5);
\echo :SQLSTATE
EXECUTE w(1, 11);
EXECUTE w(1, 11);
\echo :SQLSTATE
EXECUTE w(1, 12);
SELECT pg_temp.refusals_counted(4, 0) AS refused;
-- the same through a custom plan, where the parameters are constants
SET plan_cache_mode = force_custom_plan;
EXECUTE w(1, 12);
\echo :SQLSTATE
EXECUTE w(1, 13);
RESET plan_cache_mode;
DEALLOCATE w;

-- a PL/pgSQL function's cached plan, six calls: every one is checked
CREATE FUNCTION fold_write(rid int, tok bigint) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE fold SET v = 'fn ' || tok, fence = fencing.fence_advance(fence, tok)
   WHERE id = rid;
  RETURN 'accepted';
EXCEPTION WHEN SQLSTATE 'LF001' THEN
  RETURN 'refused';
END $$;
SELECT g AS call, fold_write(3, CASE WHEN g % 2 = 0 THEN 40 ELSE 50 + g END)
  FROM generate_series(1, 6) g;
SELECT * FROM fold ORDER BY id;

-- The one difference from VOLATILE: a call whose arguments are all
-- constants reads no row, and is evaluated when the statement is planned.
-- With a constant stale fence it raises even if no row is written.
UPDATE fold SET v = 'x', fence = fencing.fence_advance(60, 20) WHERE id = 99;
\echo :SQLSTATE
EXPLAIN (VERBOSE, COSTS OFF)
UPDATE fold SET v = 'x', fence = fencing.fence_advance(NULL, 20) WHERE id = 2;

DROP FUNCTION fold_write(int, bigint);
DROP TABLE fold;

-- Issue 23, item 7: all-constant calls in cached generic plans, across
-- transactions.  The plan is made (and the call folded) in the first
-- transaction; after a band entry its token is from before the band.  The
-- later executions plan again and refuse it (LF005): before, they reused
-- the folded result and took the write.
\set VERBOSITY sqlstate
RESET fencing.refuse_old_band;
SELECT fencing.next_token() AS t \gset
CREATE TABLE fold_const (n serial PRIMARY KEY, fence bigint, ok boolean);
SET plan_cache_mode = force_generic_plan;
PREPARE ins_advance AS
  INSERT INTO fold_const (fence) VALUES (fencing.fence_advance(NULL, :t)) RETURNING n;
PREPARE ins_check AS
  INSERT INTO fold_const (fence, ok) SELECT :t, fencing.fence_allows(NULL, :t) RETURNING n;
PREPARE upd_allows AS
  UPDATE fold_const SET ok = true WHERE fencing.fence_allows(NULL, :t, true) RETURNING n;
EXECUTE ins_advance;
EXECUTE ins_check;
EXECUTE upd_allows;
-- each is folded in the plan: the call is gone, its result is a constant
CREATE FUNCTION pg_temp.plan_of(q text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF, VERBOSE) ' || q LOOP
		RETURN NEXT regexp_replace(line, '\d{9,}', 'T', 'g');
	END LOOP;
END $f$;
SELECT pg_temp.plan_of('EXECUTE ins_advance');
SELECT fencing.advance_tokens();
EXECUTE ins_advance;
\echo :SQLSTATE
EXECUTE ins_check;
\echo :SQLSTATE
EXECUTE upd_allows;
\echo :SQLSTATE
SELECT count(*) AS rows_written FROM fold_const;
-- a PL/pgSQL function's cached plan and simple expression, the same
SELECT set_config('fold.t2', fencing.next_token()::text, false) AS t2 \gset
DO $d$
BEGIN
	EXECUTE format($q$CREATE FUNCTION fold_const_write() RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
	f bigint;
BEGIN
	f := fencing.fence_advance(NULL, %s);
	INSERT INTO fold_const (fence) VALUES (fencing.fence_advance(NULL, %s));
	RETURN f;
END $f$$q$, current_setting('fold.t2'), current_setting('fold.t2'));
END $d$;
SELECT fold_const_write() = :t2 AS written;
SELECT fencing.advance_tokens();
SELECT fold_const_write();
\echo :SQLSTATE
SELECT count(*) AS rows_written FROM fold_const;
-- Within one transaction the folded result stands: planned and executed
-- there, it was checked and forces the synchronous commit there.  In a
-- later transaction with synchronous_commit = off the call runs again and
-- forces it: the commit is flushed before COMMIT returns.
SELECT fencing.next_token() AS t3 \gset
PREPARE ins_durable AS INSERT INTO fold_const (fence) VALUES (fencing.fence_advance(NULL, :t3));
EXECUTE ins_durable;
SET synchronous_commit = off;
BEGIN;
EXECUTE ins_durable;
SELECT pg_current_wal_insert_lsn() AS written_lsn \gset
COMMIT;
SELECT pg_current_wal_flush_lsn() >= :'written_lsn' AS flushed_at_commit;
RESET synchronous_commit;
RESET plan_cache_mode;
DEALLOCATE ALL;
DROP FUNCTION fold_const_write();
DROP TABLE fold_const;
SET fencing.refuse_old_band = off;
\set VERBOSITY default

