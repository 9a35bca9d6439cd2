--
-- fencing.fence_guard misused, and bad values of fencing.token.
-- A trigger is checked when it fires: no argument or three arguments is
-- 39P01, an unknown option 22023, a missing column 42703, a column that
-- is not bigint 42804, a trigger that is not BEFORE ... FOR EACH ROW 39P01.
-- fencing.token accepts a positive decimal bigint or '' only (22023).
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE TABLE resource_ge (id int PRIMARY KEY, fence bigint, small_fence int,
                          note text, gone bigint);
INSERT INTO resource_ge VALUES (1, 33, 33, 'one', 33);

-- no argument: 39P01 for INSERT, UPDATE and DELETE
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard();
INSERT INTO resource_ge VALUES (2, 34, 34, 'two', 34);
\echo :SQLSTATE
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DELETE FROM resource_ge WHERE id = 1;
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;

-- three arguments: 39P01
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence', 'allow_unfenced', 'more');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
INSERT INTO resource_ge VALUES (2, 34, 34, 'two', 34);
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;

-- an unknown option: 22023 (options are case-sensitive)
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence', 'allow_stale');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DELETE FROM resource_ge WHERE id = 1;
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence', 'ALLOW_UNFENCED');
UPDATE resource_ge SET note = 'changed' WHERE id = 1;
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence', '');
UPDATE resource_ge SET note = 'changed' WHERE id = 1;
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;

-- a column that does not exist: 42703 (names are case-sensitive, and
-- system columns do not count)
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('no_such_column');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
INSERT INTO resource_ge VALUES (2, 34, 34, 'two', 34);
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('Fence');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('xmin');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
-- a fence column dropped after the trigger was created
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('gone');
ALTER TABLE resource_ge DROP COLUMN gone;
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DELETE FROM resource_ge WHERE id = 1;
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;

-- a generated fence column: 42804 (the stamp would be overwritten)
ALTER TABLE resource_ge ADD COLUMN gen_fence bigint GENERATED ALWAYS AS (fence + 1) STORED;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('gen_fence');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DELETE FROM resource_ge WHERE id = 1;
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
ALTER TABLE resource_ge DROP COLUMN gen_fence;

-- a column that is not bigint: 42804
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('small_fence');
UPDATE resource_ge SET note = 'changed', small_fence = 40 WHERE id = 1;
\echo :SQLSTATE
INSERT INTO resource_ge VALUES (2, 34, 34, 'two');
\echo :SQLSTATE
DELETE FROM resource_ge WHERE id = 1;
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('note');
UPDATE resource_ge SET note = 'changed' WHERE id = 1;
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;

-- AFTER ... FOR EACH ROW: 39P01, and the statement is undone
CREATE TRIGGER guard AFTER INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
INSERT INTO resource_ge VALUES (2, 34, 34, 'two');
\echo :SQLSTATE
DELETE FROM resource_ge WHERE id = 1;
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;

-- BEFORE ... FOR EACH STATEMENT: 39P01, even when no row is touched
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge
    FOR EACH STATEMENT EXECUTE FUNCTION fencing.fence_guard('fence');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE false;
\echo :SQLSTATE
DELETE FROM resource_ge WHERE id = 1;
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;
-- AFTER ... FOR EACH STATEMENT, and BEFORE TRUNCATE (statement-level only)
CREATE TRIGGER guard AFTER UPDATE ON resource_ge
    FOR EACH STATEMENT EXECUTE FUNCTION fencing.fence_guard('fence');
UPDATE resource_ge SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DROP TRIGGER guard ON resource_ge;
CREATE TRIGGER guard BEFORE TRUNCATE ON resource_ge
    FOR EACH STATEMENT EXECUTE FUNCTION fencing.fence_guard('fence');
TRUNCATE resource_ge;
\echo :SQLSTATE
SELECT * FROM resource_ge ORDER BY id;
DROP TRIGGER guard ON resource_ge;

-- INSTEAD OF on a view: 39P01
CREATE VIEW resource_ge_view AS SELECT id, fence, note FROM resource_ge;
CREATE TRIGGER guard INSTEAD OF UPDATE ON resource_ge_view
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
UPDATE resource_ge_view SET note = 'changed', fence = 40 WHERE id = 1;
\echo :SQLSTATE
DROP VIEW resource_ge_view;

-- not as a trigger at all: 39P01
SELECT fencing.fence_guard();
\echo :SQLSTATE

-- the row survived every misuse
SELECT * FROM resource_ge ORDER BY id;
DROP TABLE resource_ge;

--
-- fencing.token: a positive decimal bigint, or empty
--
SET fencing.token = 'abc';
\echo :SQLSTATE
SET fencing.token = '0';
\echo :SQLSTATE
SET fencing.token = '-1';
\echo :SQLSTATE
SET fencing.token = '+5';
\echo :SQLSTATE
SET fencing.token = ' 5';
\echo :SQLSTATE
SET fencing.token = '5 ';
\echo :SQLSTATE
SET fencing.token = '5abc';
\echo :SQLSTATE
SET fencing.token = '1.5';
\echo :SQLSTATE
SET fencing.token = '0x10';
\echo :SQLSTATE
SET fencing.token = '9223372036854775808';
\echo :SQLSTATE
SET fencing.token = -1;
\echo :SQLSTATE
SET fencing.token = 0;
\echo :SQLSTATE
SELECT set_config('fencing.token', '-1', false);
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = 'abc';
\echo :SQLSTATE
ROLLBACK;
BEGIN;
SELECT set_config('fencing.token', '0', true);
\echo :SQLSTATE
ROLLBACK;
-- nothing was set by the refused values
SHOW fencing.token;
-- accepted values
SET fencing.token = '1';
SHOW fencing.token;
SET fencing.token = 33;
SHOW fencing.token;
SET fencing.token = '007';
SHOW fencing.token;
SET fencing.token = '9223372036854775807';
SHOW fencing.token;
SET fencing.token = '';
SHOW fencing.token;
-- a refused value keeps the previous one
SET fencing.token = '33';
SET fencing.token = 'abc';
\echo :SQLSTATE
SHOW fencing.token;
RESET fencing.token;
SHOW fencing.token;
-- the "fencing." prefix is reserved: a misspelt name is an error, not a
-- placeholder that the guard would silently ignore
SET fencing.tokens = '33';
\echo :SQLSTATE
-- (set_config(), ALTER ROLE ... SET and the rest: guc_prefix.sql)

--
-- A session that has not loaded the fencing library yet.  fencing.token is
-- defined when the library loads (on the first call of any fencing
-- function), so before that PostgreSQL treats it as an unknown placeholder:
-- SHOW fails, and SET accepts any value and any misspelt "fencing." name
-- without an error.  When the library loads, such values are dropped with a
-- WARNING, and a guarded write then carries no token: it fails closed.
-- (Load the library at session start, e.g. session_preload_libraries =
-- 'fencing', to have bad values refused at SET time in every session.)
--
\c
SHOW fencing.token;
\echo :SQLSTATE
SET fencing.token = 'abc';
\echo :SQLSTATE
-- the first fencing call loads the library
SELECT fencing.fence_allows(2, 1) IS NOT NULL AS loaded;
SHOW fencing.token;
-- (a misspelt name set before the library loads: guc_prefix_preload.sql)
\c
SET fencing.token = '0';
SET fencing.refuse_old_band = off;
CREATE TABLE resource_ge_fresh (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_ge_fresh
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO resource_ge_fresh VALUES (1, 'one', 33);
UPDATE resource_ge_fresh SET v = 'one by token 0' WHERE id = 1;
\echo :SQLSTATE
SELECT * FROM resource_ge_fresh;
-- a valid value set before the library loads is kept and used
\c
BEGIN;
SET LOCAL fencing.token = '34';
SET LOCAL fencing.refuse_old_band = off;
UPDATE resource_ge_fresh SET v = 'one by 34' WHERE id = 1 RETURNING *;
COMMIT;
DROP TABLE resource_ge_fresh;
