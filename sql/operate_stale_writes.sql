-- Stale writes refused by the fence_guard trigger and by fence_advance,
-- as fencing_monitor.stats counts them (fence_guard_refusals,
-- fence_advance_refusals).  The refusing transaction rolls back; the count
-- must survive that rollback.  Compared as deltas (sql/include/refusals.sql;
-- the preload suite runs this file where PostgreSQL 15 and 16 count);
-- errors show only their SQLSTATE, since the messages carry token values.

\i sql/include/refusals.sql
\set VERBOSITY sqlstate

-- an old and a new holder of one lease
SELECT fencing.lease_acquire('op_sw', 'old', '1 min') AS t_old \gset
SELECT fencing.lease_release('op_sw', :t_old) AS released;
SELECT fencing.lease_acquire('op_sw', 'new', '1 min') AS t_new \gset
SELECT :t_new > :t_old AS newer;

CREATE TABLE op_sw_guarded (id int PRIMARY KEY, v text, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON op_sw_guarded
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE TABLE op_sw_plain (id int PRIMARY KEY, v text, fence bigint);
INSERT INTO op_sw_guarded VALUES (1, 'new', :t_new), (2, 'new', :t_new), (3, 'new', :t_new);
INSERT INTO op_sw_plain VALUES (1, 'new', :t_new), (2, 'new', :t_new);

-- writes that are allowed count nothing; the same fence again leaves the
-- fence as it was, so it carries no token (LF004), which counts nothing either
UPDATE op_sw_guarded SET v = 'new again', fence = :t_new WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = :t_new;
UPDATE op_sw_guarded SET v = 'new, declared' WHERE id = 1;
COMMIT;
UPDATE op_sw_plain SET v = 'new again', fence = fencing.fence_advance(fence, :t_new, true) WHERE id = 1;
-- fence_allows is a predicate: a stale token matches no
-- row, nothing is refused
UPDATE op_sw_plain SET v = 'old' WHERE id = 1 AND fencing.fence_allows(fence, :t_old);
UPDATE op_sw_plain SET v = 'old' WHERE id = 1 AND fencing.fence_allows(fence, :t_old, true);
-- an error that is no stale write
UPDATE op_sw_guarded SET v = 'no token' WHERE id = 1;
SELECT pg_temp.refusals_counted(0, 0) AS refused;

-- 1: the guard refuses an UPDATE that sets an older fence
UPDATE op_sw_guarded SET v = 'old', fence = :t_old WHERE id = 1;
SELECT pg_temp.refusals_counted(0, 1) AS refused;
-- 2: an UPDATE with an older declared token
BEGIN;
SET LOCAL fencing.token = :t_old;
UPDATE op_sw_guarded SET v = 'old, declared' WHERE id = 2;
ROLLBACK;
SELECT pg_temp.refusals_counted(0, 2) AS refused;
-- 3: a DELETE with an older declared token
BEGIN;
SET LOCAL fencing.token = :t_old;
DELETE FROM op_sw_guarded WHERE id = 3;
ROLLBACK;
SELECT pg_temp.refusals_counted(0, 3) AS refused;
-- 4: INSERT ... ON CONFLICT DO UPDATE with an older fence
INSERT INTO op_sw_guarded VALUES (1, 'old upsert', :t_old)
	ON CONFLICT (id) DO UPDATE SET v = excluded.v, fence = excluded.fence;
SELECT pg_temp.refusals_counted(0, 4) AS refused;
-- 5: fence_advance with an older token
UPDATE op_sw_plain SET v = 'old', fence = fencing.fence_advance(fence, :t_old) WHERE id = 1;
SELECT pg_temp.refusals_counted(1, 4) AS refused;
-- 6: fence_advance with the same token, not allowed
UPDATE op_sw_plain SET v = 'new twice', fence = fencing.fence_advance(fence, :t_new) WHERE id = 1;
SELECT pg_temp.refusals_counted(2, 4) AS refused;
-- 7: one statement over two rows stops at the first refusal: one count
UPDATE op_sw_plain SET v = 'old', fence = fencing.fence_advance(fence, :t_old) WHERE id IN (1, 2);
SELECT pg_temp.refusals_counted(3, 4) AS refused;
-- nothing was written
SELECT id, v, fence = :t_new AS new_fence FROM op_sw_guarded ORDER BY id;
SELECT id, v, fence = :t_new AS new_fence FROM op_sw_plain ORDER BY id;

-- the count survives the rollback of the refusing transaction, of a
-- transaction that went on after a refusal caught in a savepoint, and of
-- a subtransaction
BEGIN;
UPDATE op_sw_plain SET v = 'new in tx' WHERE id = 2;
UPDATE op_sw_plain SET fence = fencing.fence_advance(fence, :t_old) WHERE id = 2;
ROLLBACK;
SELECT pg_temp.refusals_counted(4, 4) AS refused;
BEGIN;
SAVEPOINT a;
UPDATE op_sw_guarded SET fence = :t_old WHERE id = 2;
ROLLBACK TO SAVEPOINT a;
SAVEPOINT b;
SELECT fencing.fence_advance(:t_new, :t_old) AS refused_in_select;
ROLLBACK TO SAVEPOINT b;
SELECT pg_temp.refusals_counted(5, 5) AS refused_seen_inside;
ROLLBACK;
SELECT pg_temp.refusals_counted(5, 5) AS refused;
-- a PL/pgSQL handler that catches the refusal: still counted
DO $$
BEGIN
	UPDATE op_sw_guarded SET fence = 1 WHERE id = 2;
EXCEPTION WHEN SQLSTATE 'LF001' THEN
	NULL;
END $$;
SELECT pg_temp.refusals_counted(5, 6) AS refused;

-- in a read-only transaction the refusal is raised all the same, and
-- counted (in shared memory, which a read-only transaction may write)
BEGIN READ ONLY;
SELECT fencing.fence_advance(:t_new, :t_old) AS refused_read_only;
ROLLBACK;
SELECT pg_temp.refusals_counted(6, 6) AS refused;

-- a role without any privilege on the counters (no pg_monitor) gets its
-- refusals counted, and cannot reset them
CREATE ROLE regress_op_sw_writer;
GRANT USAGE ON SCHEMA fencing TO regress_op_sw_writer;
GRANT SELECT, UPDATE, DELETE ON op_sw_guarded, op_sw_plain TO regress_op_sw_writer;
SET ROLE regress_op_sw_writer;
UPDATE op_sw_guarded SET fence = :t_old WHERE id = 2;
UPDATE op_sw_plain SET fence = fencing.fence_advance(fence, :t_old) WHERE id = 2;
SELECT fencing_monitor.stats_reset();
RESET ROLE;
SELECT pg_temp.refusals_counted(7, 7) AS refused;

\set VERBOSITY default
DROP TABLE op_sw_guarded, op_sw_plain;
REVOKE USAGE ON SCHEMA fencing FROM regress_op_sw_writer;
DROP ROLE regress_op_sw_writer;
SELECT fencing.lease_release('op_sw', :t_new) AS released;
