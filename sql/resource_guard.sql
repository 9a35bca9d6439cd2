--
-- fencing.fence_guard('fence' [, 'allow_unfenced']): a BEFORE row trigger
-- that makes a table refuse stale writes.  It judges the row's values:
--   UPDATE changing the fence: the new fence is the write's token; NULL or
--     lower than the old fence is LF001.
--   UPDATE leaving the fence as it was (SET fence = fence, the same value,
--     NULL to NULL, or not naming it): the token declared with SET LOCAL
--     fencing.token must be >= the fence and is stamped into it; no token
--     is LF004 unless 'allow_unfenced'.
--   DELETE: declared token >= fence; no token is LF004 unless 'allow_unfenced'.
--   INSERT: a NULL fence is stamped with the declared token.
--   A declared token is checked against the row's fence in every UPDATE
--   and DELETE, also when the write sets the fence itself.
-- After every refused write the row is shown unchanged.  Every write path
-- (MERGE, COPY, partitions, ...) against a table of expected outcomes:
-- resource_write_paths.
-- Literal tokens here stand for another cluster's: this database issues
-- tokens too, so it turns off the refusal of tokens from before its band
-- (fencing.refuse_old_band, docs/tokens.md).
SET fencing.refuse_old_band = off;
\set VERBOSITY default
\set SHOW_CONTEXT never

CREATE TABLE resource_guarded (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');

--
-- INSERT
--
-- without a declared token the fence is stored as given, NULL included
INSERT INTO resource_guarded VALUES (1, 'one', 33), (2, 'two', NULL) RETURNING *;
-- (fencing.token exists once the trigger has loaded the library; see
-- resource_guard_errors for a session that has not loaded it yet)
SHOW fencing.token;
-- a declared token stamps a NULL fence and leaves a given fence alone
BEGIN;
SET LOCAL fencing.token = '40';
INSERT INTO resource_guarded VALUES (3, 'three', NULL), (4, 'four', 35) RETURNING *;
INSERT INTO resource_guarded (id, v) VALUES (5, 'five') RETURNING *;
COMMIT;
-- SET LOCAL ends with the transaction
SHOW fencing.token;
INSERT INTO resource_guarded (id, v) VALUES (6, 'six') RETURNING *;
SELECT * FROM resource_guarded ORDER BY id;

--
-- UPDATE that sets the fence column
--
-- to NULL: LF001, unchanged
UPDATE resource_guarded SET v = 'one nulled', fence = NULL WHERE id = 1 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded WHERE id = 1;
-- lower: LF001, unchanged
UPDATE resource_guarded SET v = 'one by 32', fence = 32 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded WHERE id = 1;
-- equal: the fence stays, so the write carries the declared token, and
-- without one it is refused (LF004); the same holder writing again
-- declares its token
UPDATE resource_guarded SET v = 'one by 33 again', fence = 33 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '33';
UPDATE resource_guarded SET v = 'one by 33 again', fence = 33 WHERE id = 1 RETURNING *;
COMMIT;
-- higher
UPDATE resource_guarded SET v = 'one by 34', fence = 34 WHERE id = 1 RETURNING *;
-- the fence column alone
UPDATE resource_guarded SET fence = 35 WHERE id = 1 RETURNING *;
-- a row never fenced may take a first fence; "fence = NULL" on it leaves
-- the fence as it was, so that write needs a token (issue 23, item 8)
UPDATE resource_guarded SET v = 'two by 20', fence = 20 WHERE id = 2 RETURNING *;
UPDATE resource_guarded SET v = 'six still unfenced', fence = NULL WHERE id = 6 RETURNING *;
\echo :SQLSTATE
UPDATE resource_guarded SET v = 'six still unfenced' WHERE id = 6 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded WHERE id = 6;
-- "SET fence = fence" leaves the fence: no token, no write
UPDATE resource_guarded SET v = 'one, fence kept', fence = fence WHERE id = 1 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded WHERE id = 1;
-- fence_advance in the SET list works on a guarded table as well
UPDATE resource_guarded SET v = 'one by 36', fence = fencing.fence_advance(fence, 36)
 WHERE id = 1 RETURNING *;
-- a fence set in the statement is stored, and judged, whatever token is
-- declared; the declared token is judged too
BEGIN;
SET LOCAL fencing.token = '50';
UPDATE resource_guarded SET v = 'one by 37', fence = 37 WHERE id = 1 RETURNING *;
UPDATE resource_guarded SET v = 'one by 30', fence = 30 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '35';
UPDATE resource_guarded SET v = 'one by 37, declared 35', fence = 37 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded WHERE id = 1;
-- one refused row fails the whole statement: rows 1 (fence 36) and 2
-- (fence 20) with 30
UPDATE resource_guarded SET v = v || ' by 30', fence = 30 WHERE id IN (1, 2) RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded WHERE id IN (1, 2) ORDER BY id;

--
-- UPDATE that does not set the fence column
--
-- no declared token: LF004, unchanged
UPDATE resource_guarded SET v = 'one unfenced' WHERE id = 1 RETURNING *;
\echo :SQLSTATE
-- an empty fencing.token is no token
BEGIN;
SET LOCAL fencing.token = '';
UPDATE resource_guarded SET v = 'one unfenced' WHERE id = 1 RETURNING *;
\echo :SQLSTATE
ROLLBACK;
-- even a row that was never fenced needs a token
UPDATE resource_guarded SET v = 'six unfenced' WHERE id = 6 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded WHERE id IN (1, 6) ORDER BY id;
-- declared token lower than the fence: LF001, unchanged
BEGIN;
SET LOCAL fencing.token = '35';
UPDATE resource_guarded SET v = 'one by 35' WHERE id = 1 RETURNING *;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded WHERE id = 1;
-- equal: allowed, the fence stays
BEGIN;
SET LOCAL fencing.token = '36';
UPDATE resource_guarded SET v = 'one by 36 again' WHERE id = 1 RETURNING *;
COMMIT;
-- higher: allowed, and stamped into the fence; a never-fenced row too
BEGIN;
SET LOCAL fencing.token = '38';
WITH u AS (
    UPDATE resource_guarded SET v = v || ' / 38' WHERE id IN (1, 6) RETURNING *)
SELECT * FROM u ORDER BY id;
COMMIT;
-- one row with a newer fence (row 3 has 40) fails the whole statement
BEGIN;
SET LOCAL fencing.token = '39';
UPDATE resource_guarded SET v = v || ' / 39' WHERE id IN (1, 3) RETURNING *;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded WHERE id IN (1, 3) ORDER BY id;
-- a session-wide SET works as well, and so does set_config(..., true)
SET fencing.token = '39';
UPDATE resource_guarded SET v = 'one by 39' WHERE id = 1 RETURNING *;
RESET fencing.token;
BEGIN;
SELECT set_config('fencing.token', '40', true);
UPDATE resource_guarded SET v = 'one by 40' WHERE id = 1 RETURNING *;
COMMIT;
SHOW fencing.token;
-- a declared token rolled back with its savepoint is gone
BEGIN;
SET LOCAL fencing.token = '41';
SAVEPOINT s;
SET LOCAL fencing.token = '42';
ROLLBACK TO SAVEPOINT s;
SHOW fencing.token;
UPDATE resource_guarded SET v = 'one by 41' WHERE id = 1 RETURNING *;
COMMIT;

--
-- DELETE
--
SELECT * FROM resource_guarded WHERE id IN (3, 4, 6) ORDER BY id;
-- no declared token: LF004, the row stays
DELETE FROM resource_guarded WHERE id = 4 RETURNING *;
\echo :SQLSTATE
-- declared token lower than the fence (35): LF001, the row stays
BEGIN;
SET LOCAL fencing.token = '34';
DELETE FROM resource_guarded WHERE id = 4 RETURNING *;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded WHERE id = 4;
-- one refused row keeps all rows of the statement
BEGIN;
SET LOCAL fencing.token = '39';
DELETE FROM resource_guarded WHERE id IN (3, 4) RETURNING *;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded WHERE id IN (3, 4) ORDER BY id;
-- equal and higher tokens delete
BEGIN;
SET LOCAL fencing.token = '35';
DELETE FROM resource_guarded WHERE id = 4 RETURNING *;
COMMIT;
BEGIN;
SET LOCAL fencing.token = '45';
DELETE FROM resource_guarded WHERE id = 3 RETURNING *;
COMMIT;
-- a row never fenced: any token deletes it, no token does not
INSERT INTO resource_guarded VALUES (7, 'seven', NULL);
DELETE FROM resource_guarded WHERE id = 7;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '1';
DELETE FROM resource_guarded WHERE id = 7 RETURNING *;
COMMIT;
SELECT * FROM resource_guarded ORDER BY id;

--
-- 'allow_unfenced': writes without a token pass; a token is still checked
--
CREATE TABLE resource_guarded_lax (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_lax
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence', 'allow_unfenced');
INSERT INTO resource_guarded_lax VALUES (1, 'one', 33), (2, 'two', 34), (3, 'three', NULL);
-- without a token: UPDATE passes and leaves the fence, DELETE passes
UPDATE resource_guarded_lax SET v = 'one unfenced' WHERE id = 1 RETURNING *;
UPDATE resource_guarded_lax SET v = 'three unfenced' WHERE id = 3 RETURNING *;
DELETE FROM resource_guarded_lax WHERE id = 2 RETURNING *;
-- a declared token is checked and stamped
BEGIN;
SET LOCAL fencing.token = '32';
UPDATE resource_guarded_lax SET v = 'one by 32' WHERE id = 1 RETURNING *;
\echo :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '32';
DELETE FROM resource_guarded_lax WHERE id = 1 RETURNING *;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded_lax ORDER BY id;
BEGIN;
SET LOCAL fencing.token = '40';
WITH u AS (
    UPDATE resource_guarded_lax SET v = v || ' / 40' WHERE id IN (1, 3) RETURNING *)
SELECT * FROM u ORDER BY id;
COMMIT;
-- setting the fence column is checked as on a strict table
UPDATE resource_guarded_lax SET v = 'one by 39', fence = 39 WHERE id = 1 RETURNING *;
\echo :SQLSTATE
UPDATE resource_guarded_lax SET v = 'one nulled', fence = NULL WHERE id = 1 RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded_lax ORDER BY id;
UPDATE resource_guarded_lax SET v = 'one by 41', fence = 41 WHERE id = 1 RETURNING *;
-- INSERT stamps with a declared token here too
BEGIN;
SET LOCAL fencing.token = '42';
INSERT INTO resource_guarded_lax VALUES (4, 'four', NULL) RETURNING *;
COMMIT;
DROP TABLE resource_guarded_lax;

--
-- INSERT ... ON CONFLICT DO UPDATE on a guarded table
--
CREATE TABLE resource_guarded_upsert (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_upsert
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
-- DO UPDATE that sets the fence column
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 33', 33)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, fence = EXCLUDED.fence RETURNING *;
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 34', 34)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, fence = EXCLUDED.fence RETURNING *;
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 32', 32)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, fence = EXCLUDED.fence RETURNING *;
\echo :SQLSTATE
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a nulled', NULL)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, fence = EXCLUDED.fence RETURNING *;
\echo :SQLSTATE
SELECT * FROM resource_guarded_upsert ORDER BY id;
-- the same fence again leaves it: needs the declared token
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 34 again', 34)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, fence = EXCLUDED.fence RETURNING *;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '34';
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 34 again', 34)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, fence = EXCLUDED.fence RETURNING *;
COMMIT;
-- DO UPDATE that does not set it: needs the declared token
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a unfenced', NULL)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v RETURNING *;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '33';
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 33', NULL)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v RETURNING *;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded_upsert ORDER BY id;
-- a new row is stamped by the INSERT, a conflicting one by the UPDATE
BEGIN;
SET LOCAL fencing.token = '35';
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 35', NULL), (2, 'b by 35', NULL)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v RETURNING *;
COMMIT;
-- EXCLUDED carries the fence the INSERT stamped
BEGIN;
SET LOCAL fencing.token = '36';
INSERT INTO resource_guarded_upsert AS t VALUES (1, 'a by 36', NULL)
    ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, fence = EXCLUDED.fence RETURNING *;
COMMIT;
-- guard and fence_advance together
INSERT INTO resource_guarded_upsert AS t VALUES (2, 'b by 34', 34)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence) RETURNING *;
\echo :SQLSTATE
INSERT INTO resource_guarded_upsert AS t VALUES (2, 'b by 37', 37)
    ON CONFLICT (id) DO UPDATE
    SET v = EXCLUDED.v, fence = fencing.fence_advance(t.fence, EXCLUDED.fence) RETURNING *;
SELECT * FROM resource_guarded_upsert ORDER BY id;
DROP TABLE resource_guarded_upsert;

--
-- a fence column with another name
--
CREATE TABLE resource_guarded_epoch (id int PRIMARY KEY, v text NOT NULL, "Epoch" bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_epoch
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('Epoch');
INSERT INTO resource_guarded_epoch VALUES (1, 'one', 33);
UPDATE resource_guarded_epoch SET v = 'one by 32', "Epoch" = 32 WHERE id = 1;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '34';
UPDATE resource_guarded_epoch SET v = 'one by 34' WHERE id = 1 RETURNING *;
COMMIT;
DROP TABLE resource_guarded_epoch;

--
-- Tokens from before this database's band (issue 23, item 8): every token
-- the guard accepts is band-checked, a fence given in an INSERT too
--
\set VERBOSITY sqlstate
RESET fencing.refuse_old_band;
\i sql/include/refusals.sql
SELECT fencing.next_token() AS before_band \gset
SELECT fencing.advance_tokens();
SELECT fencing.next_token() AS in_band \gset
INSERT INTO resource_guarded VALUES (20, 'old band', :before_band);
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = :'before_band';
INSERT INTO resource_guarded VALUES (20, 'old band, declared', NULL);
\echo :SQLSTATE
ROLLBACK;
INSERT INTO resource_guarded VALUES (20, 'in band', :in_band);
UPDATE resource_guarded SET v = 'old band', fence = :before_band WHERE id = 2;
\echo :SQLSTATE
SELECT id, v, fence = :in_band AS in_band FROM resource_guarded WHERE id IN (2, 20) ORDER BY id;
-- LF005 is not counted as a stale write (old_band_refusals counts it)
SELECT pg_temp.refusals_counted(0, 0) AS counted;
SET fencing.refuse_old_band = off;
\set VERBOSITY default

DROP TABLE resource_guarded;

--
-- An UPDATE that moves a row to another partition is carried out as a
-- DELETE from the old partition and an INSERT into the new one.  That
-- DELETE carries the UPDATE's token, also when other triggers run in
-- between: here a PL/pgSQL trigger that sets updated_at and bumps the
-- command counter (an outside review found such moves refused with LF004).
-- Only that DELETE: any other DELETE needs a token of its own, also one of
-- the same row in the same transaction or made by a trigger in between.
--
\set VERBOSITY sqlstate
CREATE TABLE resource_guarded_moves (id int, part int, v text NOT NULL, fence bigint,
    updated_at timestamptz, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE resource_guarded_moves_1 PARTITION OF resource_guarded_moves FOR VALUES IN (1);
CREATE TABLE resource_guarded_moves_2 PARTITION OF resource_guarded_moves FOR VALUES IN (2);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_moves
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE FUNCTION resource_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := now();
    CASE NEW.v
        WHEN 'skipped' THEN
            RETURN NULL;
        WHEN 'deletes row 2' THEN
            DELETE FROM resource_guarded_moves WHERE id = 2;
        WHEN 'deletes itself' THEN
            DELETE FROM resource_guarded_moves WHERE id = OLD.id;
            RETURN NULL;
        ELSE
            NULL;
    END CASE;
    RETURN NEW;
END $$;
CREATE TRIGGER touch BEFORE UPDATE ON resource_guarded_moves
    FOR EACH ROW EXECUTE FUNCTION resource_touch();
INSERT INTO resource_guarded_moves (id, part, v, fence) VALUES (1, 1, 'one', 10), (2, 1, 'two', 10);
-- a current writer moves row 1, its token in the fence column
UPDATE resource_guarded_moves SET part = 2, v = 'one moved', fence = fencing.fence_advance(fence, 11)
 WHERE id = 1 RETURNING tableoid::regclass AS partition, id, v, fence, updated_at IS NOT NULL AS touched;
-- and back, its token declared
BEGIN;
SET LOCAL fencing.token = '12';
UPDATE resource_guarded_moves SET part = 1, v = 'one moved back' WHERE id = 1
 RETURNING tableoid::regclass AS partition, id, v, fence;
COMMIT;
-- a stale writer, and one without a token: refused
UPDATE resource_guarded_moves SET part = 2, fence = fencing.fence_advance(fence, 11) WHERE id = 1;
\echo :SQLSTATE
UPDATE resource_guarded_moves SET part = 2 WHERE id = 1;
\echo :SQLSTATE
-- after a move, a DELETE of the row in the same transaction carries no token
BEGIN;
UPDATE resource_guarded_moves SET part = 2, fence = 13 WHERE id = 1 RETURNING tableoid::regclass, fence;
DELETE FROM resource_guarded_moves WHERE id = 1;
\echo :SQLSTATE
ROLLBACK;
-- an UPDATE the guard admitted but a later trigger skipped: a DELETE of
-- that row version afterwards carries no token
BEGIN;
UPDATE resource_guarded_moves SET v = 'skipped', fence = 13 WHERE id = 1;
DELETE FROM resource_guarded_moves WHERE id = 1;
\echo :SQLSTATE
ROLLBACK;
-- a DELETE made by a trigger while the row moves carries no token either:
-- of another row, or of the very row version the UPDATE was admitted for
UPDATE resource_guarded_moves SET part = 2, v = 'deletes row 2', fence = 13 WHERE id = 1;
\echo :SQLSTATE
UPDATE resource_guarded_moves SET part = 2, v = 'deletes itself', fence = 13 WHERE id = 1;
\echo :SQLSTATE
SELECT tableoid::regclass AS partition, id, v, fence FROM resource_guarded_moves ORDER BY id;
DROP TABLE resource_guarded_moves;
DROP FUNCTION resource_touch();

--
-- A fence of 0 or less is no token (tokens are positive): an UPDATE that
-- puts one on a row fenced with a token carries the declared token, which
-- is judged and stamped.  Without one it is refused as carrying none
-- (LF004, not counted as a stale write), also with 'allow_unfenced': no
-- write takes a token out of the fence.  (An outside review found a reset
-- to DEFAULT 0 refused as stale, LF001, whatever the declared token.)
--
SELECT pg_temp.refusals_mark() AS refusals_marked \gset
CREATE TABLE resource_guarded_zero (id int PRIMARY KEY, v text NOT NULL,
    fence bigint NOT NULL DEFAULT 0);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_zero
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE TABLE resource_guarded_zero_lax (LIKE resource_guarded_zero INCLUDING ALL);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_zero_lax
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence', 'allow_unfenced');
INSERT INTO resource_guarded_zero VALUES (1, 'one', 20), (2, 'two', DEFAULT);
INSERT INTO resource_guarded_zero_lax VALUES (1, 'one', 20), (2, 'two', DEFAULT);
UPDATE resource_guarded_zero SET v = 'reset', fence = DEFAULT WHERE id = 1;
\echo :SQLSTATE
UPDATE resource_guarded_zero SET v = 'reset', fence = -1 WHERE id = 1;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '19';
UPDATE resource_guarded_zero SET v = 'reset', fence = DEFAULT WHERE id = 1;
\echo :SQLSTATE
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '20';
UPDATE resource_guarded_zero SET v = 'reset by 20', fence = DEFAULT WHERE id = 1 RETURNING *;
COMMIT;
BEGIN;
SET LOCAL fencing.token = '21';
UPDATE resource_guarded_zero SET v = 'reset by 21', fence = -5 WHERE id = 1 RETURNING *;
COMMIT;
UPDATE resource_guarded_zero_lax SET v = 'reset', fence = DEFAULT WHERE id = 1;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '21';
UPDATE resource_guarded_zero_lax SET v = 'reset by 21', fence = DEFAULT WHERE id = 1 RETURNING *;
COMMIT;
-- a row that never had a token: 'allow_unfenced' lets it through as it is
UPDATE resource_guarded_zero_lax SET v = 'two unfenced', fence = -1 WHERE id = 2 RETURNING *;
UPDATE resource_guarded_zero SET v = 'two unfenced', fence = -1 WHERE id = 2;
\echo :SQLSTATE
-- only the declared token 19 was stale
SELECT pg_temp.refusals_counted(0, 1) AS counted;
SELECT 'strict' AS guard, * FROM resource_guarded_zero
UNION ALL
SELECT 'allow_unfenced', * FROM resource_guarded_zero_lax ORDER BY 1, 2;
-- NULL put on a row whose fence is no token is no token either
CREATE TABLE resource_guarded_null (id int PRIMARY KEY, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_null
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO resource_guarded_null VALUES (1, 0);
UPDATE resource_guarded_null SET fence = NULL WHERE id = 1;
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '22';
UPDATE resource_guarded_null SET fence = NULL WHERE id = 1 RETURNING *;
COMMIT;
DROP TABLE resource_guarded_zero, resource_guarded_zero_lax, resource_guarded_null;

--
-- A DELETE ends the row and its fence: the guard keeps nothing per key, so
-- the key can be inserted again by any token, an older one too (a
-- documented limit, docs/reference.md "The guard trigger"; an outside review showed a
-- stale upsert bringing back a row a newer token had deleted).  A key that
-- must stay fenced is deleted softly: an UPDATE that marks the row
-- deleted, which the guard judges and stamps, and the row stays as a
-- tombstone that refuses older tokens.
--
CREATE TABLE resource_guarded_files (id int PRIMARY KEY, body text,
    deleted boolean NOT NULL DEFAULT false, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_files
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
-- A (token 30) writes row 7, B (token 31) deletes it: A's upsert brings it back
INSERT INTO resource_guarded_files (id, body, fence) VALUES (7, 'by A', 30);
BEGIN;
SET LOCAL fencing.token = '31';
DELETE FROM resource_guarded_files WHERE id = 7;
COMMIT;
INSERT INTO resource_guarded_files AS f (id, body, fence) VALUES (7, 'late A', 30)
    ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, fence = fencing.fence_advance(f.fence, 30)
    RETURNING *;
-- the soft delete: B marks the row deleted, with its token
BEGIN;
SET LOCAL fencing.token = '31';
UPDATE resource_guarded_files SET deleted = true, body = NULL WHERE id = 7 RETURNING *;
COMMIT;
-- A's upsert, INSERT, COPY and undelete are refused now
INSERT INTO resource_guarded_files AS f (id, body, fence) VALUES (7, 'late A', 30)
    ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, fence = fencing.fence_advance(f.fence, 30);
\echo :SQLSTATE
INSERT INTO resource_guarded_files (id, body, fence) VALUES (7, 'late A', 30);
\echo :SQLSTATE
COPY resource_guarded_files (id, body, fence) FROM stdin;
7	late A	30
\.
\echo :SQLSTATE
BEGIN;
SET LOCAL fencing.token = '30';
INSERT INTO resource_guarded_files (id, body) VALUES (7, 'late A')
    ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, deleted = false;
\echo :SQLSTATE
ROLLBACK;
SELECT * FROM resource_guarded_files;
-- readers skip tombstones; a newer token brings the key back
SELECT count(*) AS live_files FROM resource_guarded_files WHERE NOT deleted;
BEGIN;
SET LOCAL fencing.token = '32';
INSERT INTO resource_guarded_files (id, body) VALUES (7, 'by C')
    ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, deleted = false RETURNING *;
COMMIT;
DROP TABLE resource_guarded_files;

--
-- The guard is not access control (docs/security.md): a role that may add
-- a trigger to the table may add one that fires after the guard and undoes
-- its stamp, or TRUNCATE it.  The writers' privileges of the recipe
-- (SELECT, INSERT, UPDATE, DELETE) include neither; GRANT ALL includes
-- both, and then such a trigger, even on a function in pg_temp, fires for
-- every writer, as that writer (for other sessions, while it exists:
-- specs/resource_guard_trigger_privilege.spec).
--
CREATE ROLE regress_guard_writer;
GRANT USAGE ON SCHEMA fencing TO regress_guard_writer;
CREATE TABLE resource_guarded_acl (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON resource_guarded_acl
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO resource_guarded_acl VALUES (1, 'one', 40);
GRANT SELECT, INSERT, UPDATE, DELETE ON resource_guarded_acl TO regress_guard_writer;
SELECT p, has_table_privilege('regress_guard_writer', 'resource_guarded_acl', p) AS granted
  FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRIGGER', 'TRUNCATE']) AS p;
SET ROLE regress_guard_writer;
CREATE FUNCTION pg_temp.undo_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fence := OLD.fence;
    NEW.v := NEW.v || ' (as ' || current_user || ')';
    RETURN NEW;
END $$;
CREATE TRIGGER zz_undo_stamp BEFORE UPDATE ON resource_guarded_acl
    FOR EACH ROW EXECUTE FUNCTION pg_temp.undo_stamp();
\echo :SQLSTATE
TRUNCATE resource_guarded_acl;
\echo :SQLSTATE
RESET ROLE;
-- the negative control: with GRANT ALL the trigger goes in, and a stale
-- token gets in after it
GRANT ALL ON resource_guarded_acl TO regress_guard_writer;
SET ROLE regress_guard_writer;
CREATE TRIGGER zz_undo_stamp BEFORE UPDATE ON resource_guarded_acl
    FOR EACH ROW EXECUTE FUNCTION pg_temp.undo_stamp();
RESET ROLE;
CREATE ROLE regress_guard_other;
GRANT USAGE ON SCHEMA fencing TO regress_guard_other;
GRANT SELECT, UPDATE ON resource_guarded_acl TO regress_guard_other;
SET ROLE regress_guard_other;
BEGIN;
SET LOCAL fencing.token = '41';
UPDATE resource_guarded_acl SET v = 'by 41' WHERE id = 1 RETURNING *;
COMMIT;
BEGIN;
SET LOCAL fencing.token = '40';
UPDATE resource_guarded_acl SET v = 'by 40, stale' WHERE id = 1 RETURNING *;
COMMIT;
RESET ROLE;
DROP TABLE resource_guarded_acl;
DROP FUNCTION pg_temp.undo_stamp();
REVOKE USAGE ON SCHEMA fencing FROM regress_guard_writer, regress_guard_other;
DROP ROLE regress_guard_writer, regress_guard_other;
\set VERBOSITY default
