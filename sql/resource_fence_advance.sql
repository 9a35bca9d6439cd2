--
-- The resource side, SET-list check and row count check:
--   fencing.fence_advance(fence, token, allow_same DEFAULT false) returns the
--     token, or raises LF001 when fence > token, or fence = token and not
--     allow_same.
--   fencing.expect_rows(affected, expected DEFAULT 1) raises LF003 when
--     affected < expected.
--
-- Error lines show message, DETAIL and HINT but no LOCATION; the SQLSTATE
-- of every failing statement is echoed right after it.
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\set VERBOSITY default
\set SHOW_CONTEXT never

-- fence_advance: the token comes back when the fence is NULL or older
SELECT fencing.fence_advance(NULL, 33) AS null_fence,
       fencing.fence_advance(32, 33) AS older_fence,
       fencing.fence_advance(-7, 33) AS negative_fence,
       fencing.fence_advance(33, 33, true) AS same_allowed,
       fencing.fence_advance(NULL, 33, false) AS null_fence_not_same,
       fencing.fence_advance(9223372036854775806, 9223372036854775807) AS max_token;

-- equal fence without allow_same: LF001 (the hint names the repeated write)
SELECT fencing.fence_advance(33, 33);
\echo :SQLSTATE
SELECT fencing.fence_advance(33, 33, false);
\echo :SQLSTATE
-- a NULL allow_same is an error like any NULL argument: 22004
SELECT fencing.fence_advance(33, 33, NULL);
\echo :SQLSTATE
SELECT fencing.fence_advance(NULL, 33, NULL);
\echo :SQLSTATE
-- newer fence: LF001 even with allow_same (the hint names the takeover)
SELECT fencing.fence_advance(34, 33);
\echo :SQLSTATE
SELECT fencing.fence_advance(34, 33, true);
\echo :SQLSTATE
SELECT fencing.fence_advance(9223372036854775807, 1, true);
\echo :SQLSTATE

-- NULL token: 22004; token <= 0: 22023 (before the fence is looked at)
SELECT fencing.fence_advance(1, NULL);
\echo :SQLSTATE
SELECT fencing.fence_advance(NULL, NULL, true);
\echo :SQLSTATE
SELECT fencing.fence_advance(1, 0);
\echo :SQLSTATE
SELECT fencing.fence_advance(NULL, -1, true);
\echo :SQLSTATE
SELECT fencing.fence_advance(99, 0);
\echo :SQLSTATE

-- In the SET list of an UPDATE
CREATE TABLE resource_adv (id int PRIMARY KEY, v text NOT NULL, fence bigint);
INSERT INTO resource_adv VALUES (1, 'one', NULL), (2, 'two', 33), (3, 'three', 40);

-- first write to a never-fenced row
UPDATE resource_adv SET v = 'one by 33', fence = fencing.fence_advance(fence, 33)
 WHERE id = 1 RETURNING *;
-- the same token again: LF001, the row is unchanged
UPDATE resource_adv SET v = 'one by 33 again', fence = fencing.fence_advance(fence, 33)
 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_adv WHERE id = 1;
-- ... unless allow_same
UPDATE resource_adv SET v = 'one by 33 again', fence = fencing.fence_advance(fence, 33, true)
 WHERE id = 1 RETURNING *;
-- an older token: LF001, unchanged
UPDATE resource_adv SET v = 'one by 32', fence = fencing.fence_advance(fence, 32)
 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
UPDATE resource_adv SET v = 'one by 32', fence = fencing.fence_advance(fence, 32, true)
 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_adv WHERE id = 1;
-- a newer token
UPDATE resource_adv SET v = 'one by 34', fence = fencing.fence_advance(fence, 34)
 WHERE id = 1 RETURNING *;

-- one stale row makes the whole statement fail: no row changes
UPDATE resource_adv SET v = v || ' by 39', fence = fencing.fence_advance(fence, 39)
 WHERE id IN (1, 2, 3) RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_adv ORDER BY id;
-- the statement aimed at the rows it may write succeeds
WITH u AS (
    UPDATE resource_adv SET v = v || ' by 39', fence = fencing.fence_advance(fence, 39)
     WHERE id IN (1, 2) RETURNING *)
SELECT * FROM u ORDER BY id;

-- fence_advance runs only for the rows the UPDATE really changes, whatever
-- the plan: 5000 rows with a high fence, one target row with fence 10, and
-- a sequential scan that reads them all.
CREATE TABLE resource_adv_many (id int PRIMARY KEY, v text NOT NULL, fence bigint);
INSERT INTO resource_adv_many
SELECT g, 'row ' || g, 1000000 FROM generate_series(1, 5000) g;
UPDATE resource_adv_many SET fence = 10 WHERE id = 2500;
ANALYZE resource_adv_many;

BEGIN;
SET LOCAL enable_indexscan = off;
SET LOCAL enable_bitmapscan = off;
EXPLAIN (COSTS OFF)
UPDATE resource_adv_many SET v = 'written by 33', fence = fencing.fence_advance(fence, 33)
 WHERE id = 2500;
-- the scan reads 5000 rows and removes 4999 by the filter, without a raise
-- (numbers from EXPLAIN's JSON: its text form differs between majors)
CREATE FUNCTION pg_temp.scan_counts(q text) RETURNS TABLE (node text, actual_rows numeric, removed_by_filter numeric)
LANGUAGE plpgsql AS $$
DECLARE
	plan json;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON) ' || q INTO plan;
	RETURN QUERY
	SELECT p->>'Node Type', round((p->>'Actual Rows')::numeric), (p->>'Rows Removed by Filter')::numeric
	  FROM (SELECT plan->0->'Plan' AS p
			UNION ALL
			SELECT json_array_elements(plan->0->'Plan'->'Plans')) AS n;
END
$$;
SELECT * FROM pg_temp.scan_counts($$
UPDATE resource_adv_many SET v = 'written by 33', fence = fencing.fence_advance(fence, 33)
 WHERE id = 2500$$);
ROLLBACK;

BEGIN;
SET LOCAL enable_indexscan = off;
SET LOCAL enable_bitmapscan = off;
UPDATE resource_adv_many SET v = 'written by 33', fence = fencing.fence_advance(fence, 33)
 WHERE id = 2500 RETURNING *;
-- the same through a generic plan of a prepared statement
SET LOCAL plan_cache_mode = force_generic_plan;
PREPARE resource_adv_write(int, bigint) AS
    UPDATE resource_adv_many SET v = 'written by ' || $2, fence = fencing.fence_advance(fence, $2)
     WHERE id = $1 RETURNING *;
EXPLAIN (COSTS OFF) EXECUTE resource_adv_write(2500, 34);
EXECUTE resource_adv_write(2500, 34);
-- a stale token still raises for the target row under the same plan
EXECUTE resource_adv_write(2500, 34);
\echo :SQLSTATE
ROLLBACK;
DEALLOCATE resource_adv_write;
-- the first UPDATE of the rolled-back transaction is gone; redo it and
-- check that every other row is untouched
SET enable_indexscan = off;
SET enable_bitmapscan = off;
UPDATE resource_adv_many SET v = 'written by 33', fence = fencing.fence_advance(fence, 33)
 WHERE id = 2500 RETURNING *;
RESET enable_indexscan;
RESET enable_bitmapscan;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE fence = 1000000 AND v = 'row ' || id) AS untouched,
       count(*) FILTER (WHERE id = 2500 AND fence = 33 AND v = 'written by 33') AS written
  FROM resource_adv_many;
DROP TABLE resource_adv_many;

-- expect_rows, called directly
SELECT fencing.expect_rows(1) AS one,
       fencing.expect_rows(3, 3) AS three_of_three,
       fencing.expect_rows(5, 3) AS more_than_expected,
       fencing.expect_rows(0, 0) AS zero_of_zero;
SELECT fencing.expect_rows(0);
\echo :SQLSTATE
SELECT fencing.expect_rows(2, 3);
\echo :SQLSTATE
SELECT fencing.expect_rows(NULL);
\echo :SQLSTATE
SELECT fencing.expect_rows(1, NULL);
\echo :SQLSTATE

-- The full pattern: fence_advance in the SET list, expect_rows over the
-- rows returned.  Success returns 1, a stale token raises LF001 and a
-- missing row raises LF003; the row is unchanged after each refusal.
SELECT * FROM resource_adv WHERE id = 1;
WITH w AS (
    UPDATE resource_adv SET v = 'one by 41', fence = fencing.fence_advance(fence, 41)
     WHERE id = 1 RETURNING 1)
SELECT fencing.expect_rows(count(*)) AS written FROM w;
SELECT * FROM resource_adv WHERE id = 1;
WITH w AS (
    UPDATE resource_adv SET v = 'one by 40', fence = fencing.fence_advance(fence, 40)
     WHERE id = 1 RETURNING 1)
SELECT fencing.expect_rows(count(*)) AS written FROM w;
\echo :SQLSTATE
WITH w AS (
    UPDATE resource_adv SET v = 'one by 41 again', fence = fencing.fence_advance(fence, 41)
     WHERE id = 1 RETURNING 1)
SELECT fencing.expect_rows(count(*)) AS written FROM w;
\echo :SQLSTATE
SELECT * FROM resource_adv WHERE id = 1;
WITH w AS (
    UPDATE resource_adv SET v = 'ninety-nine', fence = fencing.fence_advance(fence, 42)
     WHERE id = 99 RETURNING 1)
SELECT fencing.expect_rows(count(*)) AS written FROM w;
\echo :SQLSTATE
-- several rows: expected = 2
WITH w AS (
    UPDATE resource_adv SET v = v || ' by 42', fence = fencing.fence_advance(fence, 42)
     WHERE id IN (1, 2) RETURNING 1)
SELECT fencing.expect_rows(count(*), 2) AS written FROM w;
WITH w AS (
    UPDATE resource_adv SET v = v || ' by 43', fence = fencing.fence_advance(fence, 43)
     WHERE id IN (1, 99) RETURNING 1)
SELECT fencing.expect_rows(count(*), 2) AS written FROM w;
\echo :SQLSTATE
-- LF003 rolls back what the statement did write
SELECT * FROM resource_adv ORDER BY id;

-- INSERT ... ON CONFLICT DO UPDATE with fence_advance(t.fence, EXCLUDED.fence)
CREATE TABLE resource_upsert (id int PRIMARY KEY, v text NOT NULL, fence bigint);
INSERT INTO resource_upsert AS t VALUES (1, 'a by 33', 33)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
    RETURNING *;
INSERT INTO resource_upsert AS t VALUES (1, 'a by 34', 34)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
    RETURNING *;
-- late write of an older token: LF001, unchanged
INSERT INTO resource_upsert AS t VALUES (1, 'a by 33 late', 33)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
    RETURNING *;
\echo :SQLSTATE
-- the same token again: LF001 unless allow_same
INSERT INTO resource_upsert AS t VALUES (1, 'a by 34 again', 34)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
    RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_upsert ORDER BY id;
INSERT INTO resource_upsert AS t VALUES (1, 'a by 34 again', 34)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence, true)
    RETURNING *;
-- a conflicting row with a NULL token: 22004, unchanged
INSERT INTO resource_upsert AS t VALUES (1, 'a by nobody', NULL)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
    RETURNING *;
\echo :SQLSTATE
-- several rows: one stale conflict fails them all, inserts included
INSERT INTO resource_upsert AS t VALUES (2, 'b by 35', 35), (1, 'a by 30', 30)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
    RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_upsert ORDER BY id;
INSERT INTO resource_upsert AS t VALUES (2, 'b by 35', 35), (1, 'a by 35', 35)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
    RETURNING *;
-- with expect_rows around it
WITH w AS (
    INSERT INTO resource_upsert AS t VALUES (1, 'a by 36', 36)
        ON CONFLICT (id) DO UPDATE
        SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence)
        RETURNING 1)
SELECT fencing.expect_rows(count(*)) AS written FROM w;
SELECT * FROM resource_upsert ORDER BY id;

DROP TABLE resource_upsert;
DROP TABLE resource_adv;
