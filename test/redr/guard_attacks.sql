-- Red-team reproductions against fence_guard (README "The guard trigger"),
-- as of main 846b916.  Each case prints what happens; the expected output of
-- today's code is guard_attacks.out, and every "DEFECT" line in it is a
-- defect (it fails the README's claim quoted above the case).
--
--   psql -X -v ON_ERROR_STOP=0 -d DB -f test/redr/guard_attacks.sql
--
-- DB: a scratch database where the caller is a superuser; the script makes
-- the extension, a role redr_app (GRANT USAGE ON SCHEMA fencing, the
-- README's recipe, plus table privileges) and its tables, and drops them.
\set VERBOSITY sqlstate
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS fencing;
DROP SCHEMA IF EXISTS redr CASCADE;
DROP ROLE IF EXISTS redr_app;
CREATE ROLE redr_app;
GRANT USAGE ON SCHEMA fencing TO redr_app;
CREATE SCHEMA redr;
GRANT USAGE ON SCHEMA redr TO redr_app;
SET search_path = redr, public;

-- A verdict helper: prints "held" or "DEFECT: ..." from a boolean.
CREATE FUNCTION redr.verdict(ok boolean, what text) RETURNS text
LANGUAGE sql AS $$ SELECT CASE WHEN ok THEN 'held: ' ELSE 'DEFECT: ' END || what $$;
GRANT EXECUTE ON FUNCTION redr.verdict(boolean, text) TO redr_app;

-- ===================================================================
-- 1. (medium, liveness) A current writer's UPDATE that moves a row to
-- another partition, with its token in the fence column (the README's
-- "normal choice": SET fence = fencing.fence_advance(fence, $t)), is
-- refused with LF004 as soon as the table has any PL/pgSQL BEFORE UPDATE
-- trigger that sorts after the guard, even one that only sets updated_at.
-- README: "An UPDATE that moves a row to another partition is judged as an
-- UPDATE; the DELETE from the old partition that carries it out carries
-- its token."  Cause: guard.c remembers the admitted UPDATE by command id
-- (GetCurrentCommandId), and a PL/pgSQL trigger that runs in between
-- increments the command counter, so the DELETE half no longer matches.
-- ===================================================================
CREATE TABLE redr.pt (id int, part int, body text, fence bigint,
	updated_at timestamptz, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE redr.pt1 PARTITION OF redr.pt FOR VALUES IN (1);
CREATE TABLE redr.pt2 PARTITION OF redr.pt FOR VALUES IN (2);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON redr.pt
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE FUNCTION redr.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.updated_at := now();
	RETURN NEW;
END $$;
GRANT SELECT, INSERT, UPDATE, DELETE ON redr.pt TO redr_app;
SET ROLE redr_app;
SELECT fencing.next_token() AS t1 \gset
INSERT INTO redr.pt VALUES (1, 1, 'one', :t1), (2, 1, 'two', :t1);
-- control: without the touch trigger the move is accepted
SELECT fencing.next_token() AS t2 \gset
UPDATE redr.pt SET part = 2, body = 'moved', fence = fencing.fence_advance(fence, :t2) WHERE id = 1;
SELECT redr.verdict(tableoid = 'redr.pt2'::regclass AND fence = :t2,
	'1 control: a row move with the token in the fence column') FROM redr.pt WHERE id = 1;
RESET ROLE;
CREATE TRIGGER touch BEFORE UPDATE ON redr.pt FOR EACH ROW EXECUTE FUNCTION redr.touch();
SET ROLE redr_app;
SELECT fencing.next_token() AS t3 \gset
UPDATE redr.pt SET part = 1, body = 'moved back', fence = fencing.fence_advance(fence, :t3) WHERE id = 1;
SELECT redr.verdict(tableoid = 'redr.pt1'::regclass AND fence = :t3,
	'1: a current writer moves a row (fence_advance in SET) with an updated_at trigger') FROM redr.pt WHERE id = 1;
-- the same refusal through MERGE
MERGE INTO redr.pt USING (VALUES (1)) AS s(id) ON pt.id = s.id
	WHEN MATCHED THEN UPDATE SET part = 3 - part, fence = fencing.fence_advance(pt.fence, :t3);
SELECT redr.verdict(tableoid = 'redr.pt1'::regclass AND fence = :t3,
	'1: the same row move by MERGE') FROM redr.pt WHERE id = 1;
-- a move that stays in its partition, and the same move with the token
-- declared as well, are accepted
UPDATE redr.pt SET body = 'stays', fence = fencing.fence_advance(fence, :t3) WHERE id = 2;
BEGIN;
SET LOCAL fencing.token = :'t3';
UPDATE redr.pt SET part = 1, fence = fencing.fence_advance(fence, :t3, allow_same => true) WHERE id = 1;
COMMIT;
SELECT redr.verdict(count(*) = 2, '1 control: no move, or a declared token') FROM redr.pt
 WHERE fence = :t3 AND tableoid = 'redr.pt1'::regclass;
RESET ROLE;

-- ===================================================================
-- 2. (medium, liveness / docs) An UPDATE that puts a fence of 0 (DEFAULT 0,
-- "never written") on a fenced row is refused as "fencing token 0 is
-- stale" (LF001, counted in stale_writes_refused) even with a current
-- declared token.  README: "Tokens are positive, so a fence of 0 or less
-- (DEFAULT 0 for "never written") is no token: ... an UPDATE that puts one
-- carries the declared token."
-- ===================================================================
CREATE TABLE redr.jobs (id int PRIMARY KEY, state text, fence bigint NOT NULL DEFAULT 0);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON redr.jobs
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
GRANT SELECT, INSERT, UPDATE, DELETE ON redr.jobs TO redr_app;
SET ROLE redr_app;
INSERT INTO redr.jobs (id, state) VALUES (1, 'new');
SELECT fencing.next_token() AS a \gset
UPDATE redr.jobs SET state = 'running', fence = :a WHERE id = 1;
SELECT fencing.next_token() AS b \gset
BEGIN;
SET LOCAL fencing.token = :'b';
UPDATE redr.jobs SET state = 'new', fence = DEFAULT WHERE id = 1;
COMMIT;
SELECT redr.verdict(state = 'new', '2: a current declared token resets the fence to DEFAULT 0') FROM redr.jobs;
-- control: the same with a NULL-able table and no fence in the SET list
BEGIN;
SET LOCAL fencing.token = :'b';
UPDATE redr.jobs SET state = 'new' WHERE id = 1;
COMMIT;
SELECT redr.verdict(state = 'new' AND fence = :b, '2 control: the same writer without fence = DEFAULT') FROM redr.jobs;
RESET ROLE;

-- ===================================================================
-- 3. (high by the brief's definition; the README half-says it) A stale
-- writer brings back a row that a newer token deleted: INSERT has no older
-- row to compare with, so the stale token's upsert lands.  README: "A
-- stale write changes nothing"; DELETE is "judged"; for INSERT "(there is
-- no older row to compare with)".  No tombstone, no warning that a DELETE
-- does not fence the key.
-- ===================================================================
CREATE TABLE redr.files (id int PRIMARY KEY, body text, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON redr.files
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
GRANT SELECT, INSERT, UPDATE, DELETE ON redr.files TO redr_app;
SET ROLE redr_app;
SELECT fencing.next_token() AS a \gset
INSERT INTO redr.files VALUES (7, 'by A', :a);
SELECT fencing.next_token() AS b \gset
-- control: while the row exists, A's upsert is refused (LF001)
BEGIN;
SET LOCAL fencing.token = :'b';
UPDATE redr.files SET body = 'by B' WHERE id = 7;
COMMIT;
INSERT INTO redr.files VALUES (7, 'late A', :a)
	ON CONFLICT (id) DO UPDATE SET body = excluded.body, fence = fencing.fence_advance(files.fence, :a);
SELECT redr.verdict(body = 'by B', '3 control: stale upsert over the newer row') FROM redr.files WHERE id = 7;
-- B deletes the row with its token; A's upsert (or MERGE, COPY, INSERT) brings it back
BEGIN;
SET LOCAL fencing.token = :'b';
DELETE FROM redr.files WHERE id = 7;
COMMIT;
INSERT INTO redr.files VALUES (7, 'late A', :a)
	ON CONFLICT (id) DO UPDATE SET body = excluded.body, fence = fencing.fence_advance(files.fence, :a);
SELECT redr.verdict(count(*) = 0, '3: a stale upsert after a newer DELETE') FROM redr.files WHERE id = 7;
RESET ROLE;

DROP SCHEMA redr CASCADE;
DROP OWNED BY redr_app;
DROP ROLE redr_app;
