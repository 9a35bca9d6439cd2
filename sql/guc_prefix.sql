--
-- The "fencing." prefix of configuration parameters is reserved, on every
-- supported major (15 and later: core's MarkGUCPrefixReserved; 13 and 14:
-- the extension's own check): a misspelt name is an error, never a
-- placeholder that fence_guard would not read.
--
SELECT fencing.fence_allows(2, 1) IS NOT NULL AS library_loaded;
SET fencing.tokens = '33';
\echo :SQLSTATE
SET fencing.Tokens TO '33';
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.tkn = '33';
\echo :SQLSTATE
ROLLBACK;
RESET fencing.tokens;
\echo :SQLSTATE
SET fencing.tokens TO DEFAULT;
\echo :SQLSTATE
ALTER ROLE CURRENT_USER SET fencing.tokens = '33';
\echo :SQLSTATE
CREATE ROLE regress_guc_prefix;
ALTER ROLE regress_guc_prefix IN DATABASE postgres SET fencing.tokens = '33';
\echo :SQLSTATE
DROP ROLE regress_guc_prefix;
-- nothing of it was stored
SELECT count(*) AS stored FROM pg_catalog.pg_db_role_setting
 WHERE pg_catalog.array_to_string(setconfig, ',') ~* 'fencing\.tokens';

-- the extension's own parameters are not affected
SET fencing.token = '5';
SHOW fencing.token;
RESET fencing.token;
SET fencing.lock_delay = 0;
SHOW fencing.lock_delay;
RESET fencing.lock_delay;
ALTER ROLE CURRENT_USER SET fencing.lock_delay = 0;
ALTER ROLE CURRENT_USER RESET fencing.lock_delay;
-- other prefixes are not ours
SET fencing_other.x = '1';
SHOW fencing_other.x;

--
-- set_config() with a misspelt name: whichever statement refuses (core's
-- set_config on 15 and later, the guard on 13 and 14), no write goes
-- through as if no token had been declared.
--
CREATE TABLE guc_prefix_t (id int PRIMARY KEY, v text, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON guc_prefix_t
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence', 'allow_unfenced');
-- (a literal token, as another cluster's: docs/tokens.md)
SET fencing.refuse_old_band = off;
INSERT INTO guc_prefix_t VALUES (1, 'one', 40);
RESET fencing.refuse_old_band;
CREATE FUNCTION pg_temp.misspelt(name text, write text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_catalog.set_config(name, '41', true);
	EXECUTE write;
	RETURN 'written';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
SELECT w AS write, pg_temp.misspelt('fencing.tokn', w) AS result FROM (VALUES
	('UPDATE guc_prefix_t SET v = ''by 41'' WHERE id = 1'),
	('DELETE FROM guc_prefix_t WHERE id = 1'),
	('INSERT INTO guc_prefix_t VALUES (2, ''two'', NULL)')
  ) AS c(w);
SELECT * FROM guc_prefix_t ORDER BY id;
-- with the token declared under its right name, the writes go through
BEGIN;
SET LOCAL fencing.token = '41';
-- (a literal token, as another cluster's: docs/tokens.md)
SET LOCAL fencing.refuse_old_band = off;
UPDATE guc_prefix_t SET v = 'by 41' WHERE id = 1;
INSERT INTO guc_prefix_t VALUES (2, 'two', NULL);
COMMIT;
SELECT * FROM guc_prefix_t ORDER BY id;
DROP TABLE guc_prefix_t;
