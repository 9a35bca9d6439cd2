--
-- fence_advance is IMMUTABLE (Citus sends only IMMUTABLE functions of a
-- row's columns to the workers with an UPDATE or ON CONFLICT DO UPDATE).
-- The planner folds an IMMUTABLE call only when every argument is a
-- constant; with the row's fence column as its first argument it is never
-- folded and runs for each row the statement writes, at execution, in the
-- transaction that commits the write.  These tests fail if it were folded,
-- hoisted or cached.
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
SELECT stale_writes_refused AS before FROM fencing.stats \gset
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
SELECT stale_writes_refused - :before AS refused FROM fencing.stats;
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
