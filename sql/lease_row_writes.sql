-- Take, renew, release and force-release write the lease row through the
-- executor's single-row update (src/lease_row.c), so the table's
-- constraints, indexes, row triggers, generated columns and replica
-- identity apply to them as to a plain UPDATE; what that update cannot
-- honour (statement triggers, rules) is refused with LF020 before anything
-- changes.  Each check below fails against a hand-rolled heap update.
CREATE EXTENSION amcheck;

-- 300 re-acquires by one holder in one statement: each call must see the
-- row version the call before it wrote (all but two fail otherwise),
-- and the versions, which no one can prune while the transaction is open,
-- overflow the row's page, so some updates are not HOT.
BEGIN;
SELECT count(fencing.lease_acquire('lr_one', 'h', '1 min')) AS acquired
  FROM generate_series(1, 300);
SELECT n_tup_upd >= 299 AS updated, n_tup_upd - n_tup_hot_upd > 0 AS some_not_hot
  FROM pg_stat_xact_user_tables WHERE relid = 'fencing.leases'::regclass;
SELECT acquires, holder_changes, state FROM fencing.lease_status WHERE name = 'lr_one';
COMMIT;

-- the key finds the newest version: renew and release by its token work
SELECT token AS lr_tok FROM fencing.leases WHERE name = 'lr_one' \gset
SELECT fencing.lease_renew('lr_one', :lr_tok, '2 min') AS renewed;
SELECT fencing.lease_release('lr_one', :lr_tok) AS released;
SELECT fencing.lease_release('lr_one', :lr_tok) AS released_again;
SELECT acquires, renewals, releases, state FROM fencing.lease_status WHERE name = 'lr_one';
-- and every row version has its key entry (heapallindexed)
SELECT true AS pkey_ok FROM bt_index_check('fencing.leases_pkey', true);

-- renew and release in the same statement as the acquire see it too
SELECT fencing.lease_release('lr_two', t) AS released_same_statement
  FROM (SELECT fencing.lease_acquire('lr_two', 'h', '1 min') AS t) AS a;
SELECT fencing.lease_renew('lr_two', t, '1 min') AS renewed_same_statement
  FROM (SELECT fencing.lease_acquire('lr_two', 'h', '1 min') AS t) AS a;

-- Index maintenance and AFTER ROW triggers: an administrator adds an index
-- and an audit trigger; the trigger fires for each write, and the index
-- has an entry for every row version.
CREATE TABLE lr_seen (op text, name text, token bigint);
CREATE FUNCTION lr_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.lr_seen VALUES (TG_ARGV[0], NEW.name, NEW.token);
	RETURN NEW;
END $$;
CREATE INDEX lr_holder ON fencing.leases (holder);
CREATE TRIGGER lr_audit AFTER UPDATE ON fencing.leases
	FOR EACH ROW EXECUTE FUNCTION lr_audit('update');

SELECT fencing.lease_acquire('lr_one', 'h2', '1 min') AS t1 \gset
SELECT fencing.lease_renew('lr_one', :t1, '1 min') AS renewed;
SELECT fencing.lease_release('lr_one', :t1) AS released;
-- 200 handovers: each acquire changes the indexed holder, so no update is HOT
SELECT count(*) FILTER (WHERE fencing.lease_release('lr_one',
			fencing.lease_acquire('lr_one', 'h' || g, '1 min'))) AS handovers
  FROM generate_series(3, 202) AS g;
SELECT count(*) AS trigger_fired, count(DISTINCT token) AS tokens
  FROM lr_seen WHERE name = 'lr_one';
SELECT true AS holder_index_ok FROM bt_index_check('fencing.lr_holder', true);
SELECT holder, acquires, renewals, releases, holder_changes
  FROM fencing.lease_status WHERE name = 'lr_one';
DROP TRIGGER lr_audit ON fencing.leases;
DROP INDEX fencing.lr_holder;
TRUNCATE lr_seen;

-- UPDATE OF triggers see which columns a call sets: an acquire and a
-- release set released_at, a renew does not
CREATE TRIGGER lr_released AFTER UPDATE OF released_at ON fencing.leases
	FOR EACH ROW EXECUTE FUNCTION lr_audit('released_at');
SELECT fencing.lease_acquire('lr_one', 'h3', '1 min') AS t2 \gset
SELECT fencing.lease_renew('lr_one', :t2, '1 min') AS renewed;
SELECT fencing.lease_release('lr_one', :t2) AS released;
SELECT op, token = :t2 AS this_token, count(*) FROM lr_seen GROUP BY 1, 2 ORDER BY 1;
DROP TRIGGER lr_released ON fencing.leases;
TRUNCATE lr_seen;

-- BEFORE ROW triggers: one that skips the row makes the call a no-op
-- that says so, as an UPDATE that touches 0 rows
CREATE FUNCTION lr_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN NULL;
END $$;
SELECT fencing.lease_acquire('lr_skipped', 'h', '1 min') AS t3 \gset
SELECT expires_at AS lr_expires FROM fencing.leases WHERE name = 'lr_skipped' \gset
CREATE TRIGGER lr_skip BEFORE UPDATE ON fencing.leases
	FOR EACH ROW WHEN (OLD.name = 'lr_skipped') EXECUTE FUNCTION lr_skip();
SELECT fencing.lease_renew('lr_skipped', :t3, '1 hour') AS renewed;
SELECT fencing.lease_release('lr_skipped', :t3) AS released;
SELECT expires_at = :'lr_expires' AS unchanged, released_at IS NULL AS not_released
  FROM fencing.leases WHERE name = 'lr_skipped';
DROP TRIGGER lr_skip ON fencing.leases;
SELECT fencing.lease_release('lr_skipped', :t3) AS released;

-- Statement-level UPDATE triggers and rules would be bypassed by a
-- one-row update: refused, nothing changed
\set VERBOSITY sqlstate
SELECT fencing.lease_acquire('lr_one', 'h4', '1 min') AS t4 \gset
CREATE TRIGGER lr_stmt AFTER UPDATE ON fencing.leases
	FOR EACH STATEMENT EXECUTE FUNCTION lr_audit('statement');
SELECT fencing.lease_renew('lr_one', :t4, '1 hour');
SELECT fencing.lease_acquire('lr_one', 'h5', '1 min');
DROP TRIGGER lr_stmt ON fencing.leases;
CREATE RULE lr_rule AS ON UPDATE TO fencing.leases DO ALSO NOTIFY lr_rule;
SELECT fencing.lease_release('lr_one', :t4);
DROP RULE lr_rule ON fencing.leases;
\set VERBOSITY default
SELECT holder, token = :t4 AS unchanged, state FROM fencing.lease_status WHERE name = 'lr_one';
SELECT fencing.lease_release('lr_one', :t4) AS released;

-- CHECK constraints: 23514, nothing changed
ALTER TABLE fencing.leases ADD CONSTRAINT lr_no_forbidden
	CHECK (holder OPERATOR(pg_catalog.<>) 'forbidden');
\set VERBOSITY sqlstate
SELECT fencing.lease_acquire('lr_one', 'forbidden', '1 min');
\set VERBOSITY default
SELECT holder, token = :t4 AS unchanged, state FROM fencing.lease_status WHERE name = 'lr_one';
SELECT fencing.lease_acquire('lr_one', 'allowed', '1 min') IS NOT NULL AS allowed;
-- a session keeps the constraints parsed (lease_row.c): one replaced by
-- another of the same name is the one checked, by this session too
SELECT token AS t6 FROM fencing.leases WHERE name = 'lr_one' \gset
SELECT fencing.lease_release('lr_one', :t6) AS released;
ALTER TABLE fencing.leases DROP CONSTRAINT lr_no_forbidden,
	ADD CONSTRAINT lr_no_forbidden CHECK (holder OPERATOR(pg_catalog.<>) 'forbidden2');
\set VERBOSITY sqlstate
SELECT fencing.lease_acquire('lr_one', 'forbidden2', '1 min');
\set VERBOSITY default
SELECT fencing.lease_acquire('lr_one', 'forbidden', '1 min') IS NOT NULL AS allowed;
ALTER TABLE fencing.leases DROP CONSTRAINT lr_no_forbidden;

-- NOT NULL added by an administrator: an acquire stores released_at NULL,
-- so it fails with 23502 like the plain UPDATE, and changes nothing
SELECT token AS t5 FROM fencing.leases WHERE name = 'lr_one' \gset
SELECT fencing.lease_release('lr_one', :t5) AS released;
BEGIN;
-- every lease released, so that the column can be made NOT NULL
UPDATE fencing.leases SET released_at = pg_catalog.now() WHERE released_at IS NULL;
ALTER TABLE fencing.leases ALTER COLUMN released_at SET NOT NULL;
\set VERBOSITY sqlstate
SAVEPOINT s;
UPDATE fencing.leases SET released_at = NULL WHERE name = 'lr_one';
ROLLBACK TO s;
SELECT fencing.lease_acquire('lr_one', 'h6', '1 min');
ROLLBACK TO s;
\set VERBOSITY default
SELECT holder, token = :t5 AS unchanged, state FROM fencing.lease_status WHERE name = 'lr_one';
ROLLBACK;

-- Stored generated columns are computed for every write
BEGIN;
ALTER TABLE fencing.leases
	ADD COLUMN lr_twice bigint GENERATED ALWAYS AS (token * 2) STORED;
SELECT fencing.lease_acquire('lr_one', 'h7', '1 min') AS t6 \gset
SELECT lr_twice = 2 * :t6 AS computed FROM fencing.leases WHERE name = 'lr_one';
ROLLBACK;

-- Replica identity: in a publication that publishes updates, with
-- REPLICA IDENTITY NOTHING, a plain UPDATE fails with 55000, and so does
-- every lease write (a subscriber could not apply it); nothing changes
SELECT fencing.lease_acquire('lr_one', 'h8', '1 min') AS t7 \gset
BEGIN;
SET LOCAL client_min_messages = error;	-- no wal_level warning
CREATE PUBLICATION lr_pub FOR TABLE fencing.leases;
RESET client_min_messages;
-- with the default identity (the primary key) the writes work
SELECT fencing.lease_renew('lr_one', :t7, '1 min') AS renewed;
ALTER TABLE fencing.leases REPLICA IDENTITY NOTHING;
\set VERBOSITY sqlstate
SAVEPOINT s;
UPDATE fencing.leases SET renewals = renewals + 1 WHERE name = 'lr_one';
ROLLBACK TO s;
SELECT fencing.lease_renew('lr_one', :t7, '1 hour');
ROLLBACK TO s;
SELECT fencing.lease_acquire('lr_one', 'h8', '1 min');
ROLLBACK TO s;
SELECT fencing.lease_release('lr_one', :t7);
ROLLBACK TO s;
SELECT fencing.lease_force_release('lr_one');
ROLLBACK TO s;
\set VERBOSITY default
SELECT holder, token = :t7 AS unchanged, renewals, state
  FROM fencing.lease_status WHERE name = 'lr_one';
ROLLBACK;

-- Row security: the functions run as the extension's owner.  Here that is
-- a superuser, whom no policy filters, so a forced policy that hides every
-- row changes nothing, as for the owner's own SELECT.
BEGIN;
ALTER TABLE fencing.leases ENABLE ROW LEVEL SECURITY;
ALTER TABLE fencing.leases FORCE ROW LEVEL SECURITY;
CREATE POLICY lr_none ON fencing.leases USING (false);
SELECT count(*) > 0 AS owner_sees_rows FROM fencing.leases;
SELECT fencing.lease_renew('lr_one', :t7, '1 min') AS renewed;
ROLLBACK;

SELECT fencing.lease_release('lr_one', :t7) AS released;
SELECT true AS pkey_ok FROM bt_index_check('fencing.leases_pkey', true);
DROP TABLE lr_seen;
DROP FUNCTION lr_audit();
DROP FUNCTION lr_skip();
DELETE FROM fencing.leases WHERE name LIKE 'lr\_%';
DROP EXTENSION amcheck;
