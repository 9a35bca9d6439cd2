--
-- Writes checked against a lease in the same database:
--   UPDATE storage SET ... WHERE id = 1 AND fencing.lease_lock('storage', $token)
-- lease_lock is true only for the lease's current token while the lease
-- is live, and share-locks the lease row until the transaction ends.
--
-- Lease calls issue tokens.  They run in a database of their own, so the
-- token counter and the leases of the shared regression database stay as
-- the other tests expect them.
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_database() AS resource_regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS resource_lease_write;
RESET client_min_messages;
CREATE DATABASE resource_lease_write;
\c resource_lease_write
CREATE EXTENSION fencing;

CREATE TABLE storage (id int PRIMARY KEY, v text NOT NULL, fence bigint);
INSERT INTO storage VALUES (1, 'initial', NULL), (2, 'other', NULL);

-- holder A takes the lease
SELECT fencing.lease_acquire('storage', 'A', '1 hour') AS tok_a \gset
SELECT :tok_a > 0 AS issued;
-- a fresh holder's token passes
UPDATE storage SET v = 'written by A' WHERE id = 1 AND fencing.lease_lock('storage', :tok_a)
RETURNING id, v;
-- and again: lease_lock is not a one-shot
UPDATE storage SET v = 'written by A again' WHERE id = 1 AND fencing.lease_lock('storage', :tok_a)
RETURNING id, v;
-- any other token, or another lease name, writes nothing
UPDATE storage SET v = 'wrong token' WHERE id = 1 AND fencing.lease_lock('storage', :tok_a + 1000)
RETURNING id, v;
UPDATE storage SET v = 'wrong token' WHERE id = 1 AND fencing.lease_lock('storage', :tok_a + 1)
RETURNING id, v;
UPDATE storage SET v = 'wrong lease' WHERE id = 1 AND fencing.lease_lock('no_such_lease', :tok_a)
RETURNING id, v;
-- a bad token or name is an error, not a silent "0 rows"
UPDATE storage SET v = 'null token' WHERE id = 1 AND fencing.lease_lock('storage', NULL);
\echo :SQLSTATE
UPDATE storage SET v = 'zero token' WHERE id = 1 AND fencing.lease_lock('storage', 0);
\echo :SQLSTATE
UPDATE storage SET v = 'null name' WHERE id = 1 AND fencing.lease_lock(NULL, :tok_a);
\echo :SQLSTATE
UPDATE storage SET v = 'empty name' WHERE id = 1 AND fencing.lease_lock('', :tok_a);
\echo :SQLSTATE
SELECT * FROM storage ORDER BY id;

-- the check keeps the lease row share-locked by this transaction until it
-- ends (xmax names a locker: our transaction, or the subtransaction the
-- check ran in, which commits into it; specs/resource_lease_lock_write
-- shows a takeover waiting for it)
BEGIN;
UPDATE storage SET v = 'written by A in a transaction'
 WHERE id = 1 AND fencing.lease_lock('storage', :tok_a) RETURNING id, v;
SELECT l.xmax::text::bigint >= (pg_current_xact_id()::text::bigint % 4294967296) AS locked_by_us
  FROM fencing.leases l WHERE l.name = 'storage';
COMMIT;

-- while A's lease is live, B cannot take it
SELECT fencing.lease_acquire('storage', 'B', '1 hour') IS NULL AS refused_while_live;

-- A's lease runs out (renewed to a TTL that ends at once)
SELECT fencing.lease_renew('storage', :tok_a, '1 millisecond') AS renewed;
SELECT pg_sleep(0.05);
SELECT state FROM fencing.lease_status WHERE name = 'storage';
-- expired and not yet taken over: A's token no longer passes either
UPDATE storage SET v = 'A after expiry' WHERE id = 1 AND fencing.lease_lock('storage', :tok_a)
RETURNING id, v;

-- B takes over with a newer token
SELECT fencing.lease_acquire('storage', 'B', '1 hour') AS tok_b \gset
SELECT :tok_b > :tok_a AS newer;
-- the old token after the takeover: 0 rows
UPDATE storage SET v = 'A after takeover' WHERE id = 1 AND fencing.lease_lock('storage', :tok_a)
RETURNING id, v;
-- the new holder's token passes
UPDATE storage SET v = 'written by B' WHERE id = 1 AND fencing.lease_lock('storage', :tok_b)
RETURNING id, v;
SELECT * FROM storage ORDER BY id;

-- lease check and row fence together: the write also stamps the token
UPDATE storage SET v = 'written by B, fenced', fence = fencing.fence_advance(fence, :tok_b)
 WHERE id = 1 AND fencing.lease_lock('storage', :tok_b)
RETURNING id, v, fence = :tok_b AS fence_is_tok_b;

-- B releases: its token stops passing
SELECT fencing.lease_release('storage', :tok_b) AS released;
UPDATE storage SET v = 'B after release' WHERE id = 1 AND fencing.lease_lock('storage', :tok_b)
RETURNING id, v;
-- A comes back with a third token; the two older ones stay refused
SELECT fencing.lease_acquire('storage', 'A', '1 hour') AS tok_a2 \gset
SELECT :tok_a2 > :tok_b AS newer;
UPDATE storage SET v = 'stale' WHERE id = 1
   AND (fencing.lease_lock('storage', :tok_a) OR fencing.lease_lock('storage', :tok_b))
RETURNING id, v;
UPDATE storage SET v = 'written by A, second lease', fence = fencing.fence_advance(fence, :tok_a2)
 WHERE id = 1 AND fencing.lease_lock('storage', :tok_a2)
RETURNING id, v, fence = :tok_a2 AS fence_is_tok_a2;
SELECT id, v, fence = :tok_a2 AS fence_is_tok_a2 FROM storage ORDER BY id;

\c :resource_regress_db
DROP DATABASE resource_lease_write WITH (FORCE);
