--
-- The resource side, WHERE-clause predicates:
--   fencing.fence_allows(fence, token)  = fence IS NULL OR fence <  token
--   fencing.fence_allows(fence, token, true) = fence IS NULL OR fence <= token
-- A NULL token raises 22004, a token <= 0 raises 22023.  A true answer
-- for a token from before this database's band raises LF005 (at the end).
--
-- Error lines show message, DETAIL and HINT but no LOCATION; the SQLSTATE
-- of every failing statement is echoed right after it (:SQLSTATE is reset
-- to 00000 by a statement that succeeds).
\set VERBOSITY default
\set SHOW_CONTEXT never
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;

-- catalog properties of the resource-side functions: the predicates are
-- immutable, fence_advance and expect_rows volatile (never folded on
-- constants at plan time); all parallel safe and not strict (a NULL token
-- must raise, not yield NULL)
SELECT p.proname, pg_get_function_arguments(p.oid) AS arguments,
       format_type(p.prorettype, NULL) AS returns,
       p.provolatile, p.proparallel, p.proisstrict, p.prosecdef
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('fence_allows', 'fence_advance', 'expect_rows')
 ORDER BY p.proname;

-- truth table, including the bigint extremes
SELECT f.fence, t.token,
       fencing.fence_allows(f.fence, t.token) AS strict,
       fencing.fence_allows(f.fence, t.token, true) AS allow_same
  FROM (VALUES (NULL::bigint), (-9223372036854775808), (-1), (0), (1), (32),
               (33), (34), (9223372036854775807)) AS f(fence)
 CROSS JOIN (VALUES (1::bigint), (33), (9223372036854775807)) AS t(token)
 ORDER BY f.fence NULLS FIRST, t.token;

-- both agree with their definition over a grid of values (0 mismatches)
SELECT count(*) AS cases,
       count(*) FILTER (WHERE fencing.fence_allows(f, t)
                        IS DISTINCT FROM (f IS NULL OR f < t)) AS check_mismatches,
       count(*) FILTER (WHERE fencing.fence_allows(f, t, true)
                        IS DISTINCT FROM (f IS NULL OR f <= t)) AS allows_mismatches
  FROM (SELECT NULLIF(g, -5)::bigint AS f FROM generate_series(-5, 60) g) AS fences
 CROSS JOIN (SELECT g::bigint AS t FROM generate_series(1, 60) g) AS tokens;

-- NULL token: 22004, whatever the fence
SELECT fencing.fence_allows(33, NULL);
\echo :SQLSTATE
SELECT fencing.fence_allows(NULL, NULL);
\echo :SQLSTATE
SELECT fencing.fence_allows(33, NULL, true);
\echo :SQLSTATE
SELECT fencing.fence_allows(NULL, NULL, true);
\echo :SQLSTATE

-- token <= 0: 22023, whatever the fence
SELECT fencing.fence_allows(33, 0);
\echo :SQLSTATE
SELECT fencing.fence_allows(NULL, -1);
\echo :SQLSTATE
SELECT fencing.fence_allows(-5, -9223372036854775808);
\echo :SQLSTATE
SELECT fencing.fence_allows(33, 0, true);
\echo :SQLSTATE
SELECT fencing.fence_allows(NULL, -1, true);
\echo :SQLSTATE

-- the same errors at run time, with the token coming from a column
CREATE TABLE resource_fc_tokens (fence bigint, token bigint);
INSERT INTO resource_fc_tokens VALUES (10, 33), (10, NULL);
SELECT fence, token, fencing.fence_allows(fence, token) FROM resource_fc_tokens;
\echo :SQLSTATE
UPDATE resource_fc_tokens SET token = -3 WHERE token IS NULL;
SELECT fence, token, fencing.fence_allows(fence, token, true) FROM resource_fc_tokens;
\echo :SQLSTATE
DROP TABLE resource_fc_tokens;

-- In a WHERE clause: fence_allows admits the first write of a new token
-- only; with allow_same it also lets the same token write the row again.
CREATE TABLE resource_fc_rows (id int PRIMARY KEY, v text NOT NULL, fence bigint);
INSERT INTO resource_fc_rows VALUES (1, 'never written', NULL), (2, 'older', 32),
    (3, 'same', 33), (4, 'newer', 34);

WITH u AS (
    UPDATE resource_fc_rows SET v = v || ' / checked 33', fence = 33
     WHERE fencing.fence_allows(fence, 33)
     RETURNING id, v, fence)
SELECT * FROM u ORDER BY id;
-- a second write with 33: fence_allows(fence, 33) refuses every row now
UPDATE resource_fc_rows SET v = v || ' / checked 33 again', fence = 33
 WHERE fencing.fence_allows(fence, 33)
 RETURNING id, v, fence;
-- allow_same: the holder of 33 may write its rows again, not row 4
WITH u AS (
    UPDATE resource_fc_rows SET v = v || ' / allowed 33', fence = 33
     WHERE fencing.fence_allows(fence, 33, true)
     RETURNING id, v, fence)
SELECT * FROM u ORDER BY id;
-- an older token matches nothing, with either predicate
UPDATE resource_fc_rows SET v = 'stale', fence = 32
 WHERE fencing.fence_allows(fence, 32) OR fencing.fence_allows(fence, 32, true)
 RETURNING id, v, fence;
SELECT * FROM resource_fc_rows ORDER BY id;
DROP TABLE resource_fc_rows;

-- The predicates do not get in the way of an index on the key: with enough
-- rows and fresh statistics, "id = $1 AND fence_allows(fence, $2)" is an
-- Index Scan with the key as Index Cond and the check as a Filter.
CREATE TABLE resource_fc_idx (id int PRIMARY KEY, v text NOT NULL, fence bigint);
INSERT INTO resource_fc_idx
SELECT g, 'row ' || g, g FROM generate_series(1, 20000) g;
ANALYZE resource_fc_idx;

PREPARE resource_fc_select(int, bigint) AS
    SELECT id, fence FROM resource_fc_idx
     WHERE id = $1 AND fencing.fence_allows(fence, $2);
PREPARE resource_fc_update(int, bigint) AS
    UPDATE resource_fc_idx SET v = 'written', fence = $2
     WHERE id = $1 AND fencing.fence_allows(fence, $2)
    RETURNING id, v, fence;
PREPARE resource_fa_update(int, bigint) AS
    UPDATE resource_fc_idx SET v = 'written again', fence = $2
     WHERE id = $1 AND fencing.fence_allows(fence, $2, true)
    RETURNING id, v, fence;

-- generic plans, with the parameters in the plan
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE resource_fc_select(500, 1000);
EXPLAIN (COSTS OFF) EXECUTE resource_fc_update(500, 1000);
EXPLAIN (COSTS OFF) EXECUTE resource_fa_update(500, 1000);
-- custom plans, with the values folded in
SET plan_cache_mode = force_custom_plan;
EXPLAIN (COSTS OFF) EXECUTE resource_fc_select(500, 1000);
EXPLAIN (COSTS OFF) EXECUTE resource_fc_update(500, 1000);
-- the plain statements too
EXPLAIN (COSTS OFF)
SELECT id FROM resource_fc_idx WHERE id = 500 AND fencing.fence_allows(fence, 1000);
EXPLAIN (COSTS OFF)
UPDATE resource_fc_idx SET fence = 1000
 WHERE id = 500 AND fencing.fence_allows(fence, 1000, true);
RESET plan_cache_mode;

-- and they give the right answers: row 500 has fence 500
EXECUTE resource_fc_select(500, 501);
EXECUTE resource_fc_select(500, 500);
EXECUTE resource_fc_update(500, 500);
EXECUTE resource_fc_update(500, 1000);
EXECUTE resource_fc_update(500, 1000);
EXECUTE resource_fa_update(500, 1000);
EXECUTE resource_fa_update(500, 999);
-- a NULL token raises through the prepared statement as well
EXECUTE resource_fc_select(500, NULL);
\echo :SQLSTATE
EXECUTE resource_fc_update(500, 0);
\echo :SQLSTATE
SELECT id, v, fence FROM resource_fc_idx WHERE id BETWEEN 499 AND 501 ORDER BY id;

DEALLOCATE resource_fc_select;
DEALLOCATE resource_fc_update;
DEALLOCATE resource_fa_update;
DROP TABLE resource_fc_idx;

-- Tokens from before this database's band (issue 23, item 11): a lease
-- lost at failover is refused here too, as by fence_advance: where the
-- answer would be true the predicate raises LF005 instead; where it is
-- false (the row was written by a newer token) it stays false.
\set VERBOSITY sqlstate
RESET fencing.refuse_old_band;
SELECT fencing.next_token() AS before_band \gset
SELECT fencing.advance_tokens();
SELECT fencing.next_token() AS in_band \gset
CREATE TABLE resource_fc_band (id int PRIMARY KEY, v text NOT NULL, fence bigint);
INSERT INTO resource_fc_band VALUES (1, 'never written', NULL), (2, 'in band', :in_band);
SELECT fencing.fence_allows(NULL, :before_band);
\echo :SQLSTATE
SELECT fencing.fence_allows(NULL, :before_band, true);
\echo :SQLSTATE
SELECT fencing.fence_allows(:in_band, :before_band) AS check_newer_row,
	   fencing.fence_allows(:in_band, :before_band, true) AS allows_newer_row;
UPDATE resource_fc_band SET v = 'old band', fence = :before_band
 WHERE id = 1 AND fencing.fence_allows(fence, :before_band);
\echo :SQLSTATE
UPDATE resource_fc_band SET v = 'old band', fence = :before_band
 WHERE fencing.fence_allows(fence, :before_band, true);
\echo :SQLSTATE
UPDATE resource_fc_band SET v = 'in band again', fence = :in_band
 WHERE id = 2 AND fencing.fence_allows(fence, :in_band, true);
SELECT id, v, fence = :in_band AS fenced_in_band FROM resource_fc_band ORDER BY id;
DROP TABLE resource_fc_band;
SET fencing.refuse_old_band = off;
\set VERBOSITY default
