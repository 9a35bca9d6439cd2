-- Take, renew and release write fencing.leases directly (src/lease_direct.c)
-- instead of through SPI.  This file checks what that path must do by hand:
-- see the calls before it in the same statement, give a row version that
-- leaves its page a key entry of its own, and step aside for the SPI
-- statements when an administrator changed the table.
CREATE EXTENSION amcheck;

-- 300 re-acquires by one holder in one statement: each call must see the
-- row version the call before it wrote (all but two fail otherwise),
-- and the versions, which no one can prune while the transaction is open,
-- overflow the row's page, so some updates are not HOT.
BEGIN;
SELECT count(fencing.lease_acquire('dp_one', 'h', '1 min')) AS acquired
  FROM generate_series(1, 300);
SELECT n_tup_upd >= 299 AS updated, n_tup_upd - n_tup_hot_upd > 0 AS some_not_hot
  FROM pg_stat_xact_user_tables WHERE relid = 'fencing.leases'::regclass;
SELECT acquires, holder_changes, state FROM fencing.lease_status WHERE name = 'dp_one';
COMMIT;

-- the key finds the newest version: renew and release by its token work
SELECT token AS dp_tok FROM fencing.leases WHERE name = 'dp_one' \gset
SELECT fencing.lease_renew('dp_one', :dp_tok, '2 min') AS renewed;
SELECT fencing.lease_release('dp_one', :dp_tok) AS released;
SELECT fencing.lease_release('dp_one', :dp_tok) AS released_again;
SELECT acquires, renewals, releases, state FROM fencing.lease_status WHERE name = 'dp_one';
-- and every row version has its key entry (heapallindexed)
SELECT true AS pkey_ok FROM bt_index_check('fencing.leases_pkey', true);

-- renew and release in the same statement as the acquire see it too
SELECT fencing.lease_release('dp_two', t) AS released_same_statement
  FROM (SELECT fencing.lease_acquire('dp_two', 'h', '1 min') AS t) AS a;
SELECT fencing.lease_renew('dp_two', t, '1 min') AS renewed_same_statement
  FROM (SELECT fencing.lease_acquire('dp_two', 'h', '1 min') AS t) AS a;

-- An administrator adds an index and an UPDATE trigger.  The direct path
-- would maintain neither, so the calls must go through SPI: the trigger
-- fires for each write, and the new index has an entry for every version.
CREATE TABLE dp_seen (op text, name text, token bigint);
CREATE FUNCTION dp_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.dp_seen VALUES (TG_OP, NEW.name, NEW.token);
	RETURN NEW;
END $$;
CREATE INDEX dp_holder ON fencing.leases (holder);
CREATE TRIGGER dp_audit AFTER UPDATE ON fencing.leases
	FOR EACH ROW EXECUTE FUNCTION dp_audit();

SELECT fencing.lease_acquire('dp_one', 'h2', '1 min') AS t1 \gset
SELECT fencing.lease_renew('dp_one', :t1, '1 min') AS renewed;
SELECT fencing.lease_release('dp_one', :t1) AS released;
-- 200 handovers: each acquire changes the indexed holder, so no update is HOT
SELECT count(*) FILTER (WHERE fencing.lease_release('dp_one',
			fencing.lease_acquire('dp_one', 'h' || g, '1 min'))) AS handovers
  FROM generate_series(3, 202) AS g;
SELECT count(*) AS trigger_fired, count(DISTINCT token) AS tokens
  FROM dp_seen WHERE name = 'dp_one';
SELECT true AS holder_index_ok FROM bt_index_check('fencing.dp_holder', true);
SELECT holder, acquires, renewals, releases, holder_changes
  FROM fencing.lease_status WHERE name = 'dp_one';

-- dropped again: the direct path is back, the trigger is gone
DROP TRIGGER dp_audit ON fencing.leases;
DROP INDEX fencing.dp_holder;
SELECT fencing.lease_acquire('dp_one', 'h203', '1 min') AS t2 \gset
SELECT fencing.lease_release('dp_one', :t2) AS released;
SELECT holder, token = :t2 AS current, state FROM fencing.lease_status WHERE name = 'dp_one';
SELECT count(*) AS trigger_fired FROM dp_seen WHERE name = 'dp_one';
SELECT true AS pkey_ok FROM bt_index_check('fencing.leases_pkey', true);

-- a CHECK constraint: the direct path would not evaluate it, SPI does
ALTER TABLE fencing.leases ADD CONSTRAINT dp_no_forbidden
	CHECK (holder OPERATOR(pg_catalog.<>) 'forbidden');
\set VERBOSITY sqlstate
SELECT fencing.lease_acquire('dp_one', 'forbidden', '1 min');
\set VERBOSITY default
SELECT holder, token = :t2 AS unchanged, state FROM fencing.lease_status WHERE name = 'dp_one';
SELECT fencing.lease_acquire('dp_one', 'allowed', '1 min') IS NOT NULL AS allowed;
ALTER TABLE fencing.leases DROP CONSTRAINT dp_no_forbidden;

DROP TABLE dp_seen;
DROP FUNCTION dp_audit();
DELETE FROM fencing.leases WHERE name LIKE 'dp\_%';
DROP EXTENSION amcheck;
