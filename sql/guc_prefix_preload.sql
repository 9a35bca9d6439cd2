--
-- A misspelt "fencing." name set before the library is loaded (SET, or
-- PGOPTIONS, postgresql.conf, ALTER ROLE ... SET made before): no check
-- can refuse it then.  When the library loads, PostgreSQL removes it with
-- a WARNING, so no write goes through as if the misspelt value had been a
-- token.
--
\c
SET fencing.tkn = '33';
\echo :SQLSTATE
-- the first fencing call loads the library
SELECT fencing.fence_allows(2, 1) IS NOT NULL AS loaded;
SHOW fencing.tkn;
\echo :SQLSTATE
CREATE TABLE guc_preload_t (id int PRIMARY KEY, v text, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON guc_preload_t
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
-- (a literal token, as another cluster's: docs/tokens.md)
SET fencing.refuse_old_band = off;
INSERT INTO guc_preload_t VALUES (1, 'one', 33);
RESET fencing.refuse_old_band;
UPDATE guc_preload_t SET v = 'unfenced' WHERE id = 1;
\echo :SQLSTATE
-- a declared token is used as always
BEGIN;
SET LOCAL fencing.token = '34';
SET LOCAL fencing.refuse_old_band = off;
UPDATE guc_preload_t SET v = 'by 34' WHERE id = 1 RETURNING *;
COMMIT;
DROP TABLE guc_preload_t;
