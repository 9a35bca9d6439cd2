-- Leases and transactions: rollback, savepoints, several calls in one
-- transaction.  A rolled-back token is never issued again.

-- ROLLBACK TO SAVEPOINT undoes the acquire; the token is not reused
BEGIN;
SAVEPOINT a;
SELECT fencing.lease_acquire('tx_sp', 'alice', '1 min') AS t_rolled \gset
SELECT state FROM fencing.lease_status WHERE name = 'tx_sp';
ROLLBACK TO SAVEPOINT a;
SELECT count(*) AS rows_after_rollback_to FROM fencing.lease_status WHERE name = 'tx_sp';
SELECT fencing.lease_acquire('tx_sp', 'bob', '1 min') AS t_bob \gset
SELECT :t_bob > :t_rolled AS token_gap;
COMMIT;
SELECT holder, token = :t_bob AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'tx_sp';
SELECT fencing.lease_lock('tx_sp', :t_rolled) AS rolled_back_token_invalid;

-- the same with an existing row: a takeover in a rolled-back savepoint
SELECT fencing.lease_release('tx_sp', :t_bob) AS released;
BEGIN;
SAVEPOINT b;
SELECT fencing.lease_acquire('tx_sp', 'carol', '1 min') AS t_carol \gset
RELEASE SAVEPOINT b;
SAVEPOINT c;
SELECT fencing.lease_acquire('tx_sp', 'carol', '1 min') AS t_carol2 \gset
ROLLBACK TO SAVEPOINT c;
SELECT holder, token = :t_carol AS first_token_current, state
  FROM fencing.lease_status WHERE name = 'tx_sp';
COMMIT;
SELECT :t_carol2 > :t_carol AS second_larger,
	   fencing.lease_lock('tx_sp', :t_carol) AS carol_live,
	   fencing.lease_lock('tx_sp', :t_carol2) AS rolled_back_invalid;

-- a whole transaction rolled back: new lease gone, token never reissued
BEGIN;
SELECT fencing.lease_acquire('tx_rb', 'alice', '1 min') AS t_rb \gset
SELECT fencing.next_token() AS t_rb_next \gset
ROLLBACK;
SELECT count(*) AS rows_after_rollback FROM fencing.leases WHERE name = 'tx_rb';
SELECT fencing.lease_acquire('tx_rb', 'alice', '1 min') AS t_rb2 \gset
SELECT :t_rb2 > :t_rb_next AND :t_rb_next > :t_rb AS never_reissued;

-- rolled-back release and renew leave the lease as it was
SELECT expires_at AS exp_before FROM fencing.leases WHERE name = 'tx_rb' \gset
BEGIN;
SELECT fencing.lease_renew('tx_rb', :t_rb2, '10 min') AS renewed;
SELECT fencing.lease_release('tx_rb', :t_rb2) AS released;
SELECT state FROM fencing.lease_status WHERE name = 'tx_rb';
ROLLBACK;
SELECT state, expires_at = :'exp_before' AS expiry_unchanged
  FROM fencing.lease_status WHERE name = 'tx_rb';
SELECT fencing.lease_lock('tx_rb', :t_rb2) AS still_live;

-- an error after an acquire rolls the acquire back too
BEGIN;
SELECT fencing.lease_acquire('tx_err', 'alice', '1 min') AS t_err \gset
SELECT fencing.lease_acquire('tx_err', 'alice', '-1 min');
ROLLBACK;
SELECT count(*) AS rows_after_error FROM fencing.leases WHERE name = 'tx_err';

-- a whole life cycle inside one transaction sees its own changes
BEGIN;
SELECT fencing.lease_acquire('tx_one', 'alice', '1 min') AS o1 \gset
SELECT fencing.lease_acquire('tx_one', 'bob', '1 min') IS NULL AS bob_refused;
SELECT fencing.lease_lock('tx_one', :o1) AS o1_live;
SELECT fencing.lease_renew('tx_one', :o1, '2 min') AS o1_renewed;
SELECT fencing.lease_release('tx_one', :o1) AS o1_released;
SELECT fencing.lease_acquire('tx_one', 'bob', '1 min') AS o2 \gset
SELECT fencing.lease_lock('tx_one', :o1) AS o1_stale, fencing.lease_lock('tx_one', :o2) AS o2_live;
COMMIT;
SELECT holder, token = :o2 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name = 'tx_one';

-- a function that calls next_token in a subtransaction that fails
SELECT fencing.next_token() AS n0 \gset
DO $$
BEGIN
	BEGIN
		PERFORM fencing.next_token();
		RAISE EXCEPTION 'boom';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
END $$;
SELECT fencing.next_token() = :n0 + 2 AS rolled_back_token_skipped;
