-- fencing.fence_allows(fence, token): true iff fence IS NULL OR fence < token;
-- fence_allows(fence, token, true): fence IS NULL OR fence <= token.
-- It spends no token and writes nothing; a true answer refuses a token
-- from before this database's band (LF005, resource_fence_allows).
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\i sql/include/try.sql

-- the truth table, including the bigint edges
SELECT fence, token, fencing.fence_allows(fence, token) AS may_write,
	   fencing.fence_allows(fence, token) = (fence IS NULL OR fence < token) AS as_documented,
	   fencing.fence_allows(fence, token, false) = fencing.fence_allows(fence, token) AS same_as_false,
	   fencing.fence_allows(fence, token, true) AS may_write_again,
	   fencing.fence_allows(fence, token, true) = (fence IS NULL OR fence <= token) AS allow_same_as_documented
  FROM (VALUES (NULL::bigint, 1::bigint),
			   (NULL, 9223372036854775807),
			   (-9223372036854775808, 1),
			   (-1, 1),
			   (0, 1),
			   (1, 1),
			   (1, 2),
			   (2, 1),
			   (41, 42),
			   (42, 42),
			   (43, 42),
			   (9223372036854775806, 9223372036854775807),
			   (9223372036854775807, 9223372036854775807),
			   (9223372036854775807, 1)) AS v(fence, token)
 ORDER BY 1 NULLS FIRST, 2;

-- a NULL or non-positive token is an error, whatever the fence
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES ('SELECT fencing.fence_allows(1, NULL)'),
			   ('SELECT fencing.fence_allows(NULL, NULL)'),
			   ('SELECT fencing.fence_allows(NULL, 0)'),
			   ('SELECT fencing.fence_allows(0, 0)'),
			   ('SELECT fencing.fence_allows(NULL, -1)'),
			   ('SELECT fencing.fence_allows(-5, -1)'),
			   ('SELECT fencing.fence_allows(NULL, -9223372036854775808)'),
			   ('SELECT fencing.fence_allows(1, NULL, true)'),
			   ('SELECT fencing.fence_allows(1, 0, true)')) AS v(q);

-- a NULL allow_same is an error (22004), as fence_advance's, whatever the
-- fence; the token is judged first
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES ('SELECT fencing.fence_allows(1, 2, NULL)'),
			   ('SELECT fencing.fence_allows(NULL, 2, NULL)'),
			   ('SELECT fencing.fence_allows(3, 2, NULL)'),
			   ('SELECT fencing.fence_allows(1, NULL, NULL)'),
			   ('SELECT fencing.fence_advance(1, 2, NULL)')) AS v(q);

-- error text as the client sees it
\set VERBOSITY terse
SELECT fencing.fence_allows(7, NULL);
SELECT fencing.fence_allows(7, 0);
\set VERBOSITY default
SELECT fencing.fence_allows(7, -3);

-- as a guard of a conditional write: only a newer token may write, and it
-- raises the fence to itself
CREATE TEMP TABLE resource (id int PRIMARY KEY, val text, fence bigint);
INSERT INTO resource VALUES (1, 'initial', NULL);
UPDATE resource SET val = 'by 10', fence = 10
 WHERE id = 1 AND fencing.fence_allows(fence, 10);
UPDATE resource SET val = 'by 7 (stale)', fence = 7
 WHERE id = 1 AND fencing.fence_allows(fence, 7);
UPDATE resource SET val = 'by 10 again', fence = 10
 WHERE id = 1 AND fencing.fence_allows(fence, 10);
UPDATE resource SET val = 'by 11', fence = 11
 WHERE id = 1 AND fencing.fence_allows(fence, 11);
SELECT * FROM resource;

-- it writes nothing: usable in a read-only transaction; immutable, not strict
BEGIN READ ONLY;
SELECT fencing.fence_allows(NULL, 1) AS read_only_ok;
COMMIT;
SELECT provolatile, proisstrict, proparallel
  FROM pg_proc WHERE oid = 'fencing.fence_allows(bigint,bigint,boolean)'::regprocedure;
