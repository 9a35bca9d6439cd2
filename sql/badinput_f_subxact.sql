--
-- Bad input (f): subtransactions that roll back.
--
-- A lease change made in a subtransaction that rolls back (ROLLBACK TO
-- SAVEPOINT, or an error caught by a PL/pgSQL EXCEPTION block) is undone
-- like any other row change.  Tokens come from a sequence, which does not
-- roll back: the only trace is a gap, and the rolled-back token is never
-- valid -- it is never current for any lease, and never issued again.
-- Caution: the row lock taken by lease_lock is released with the
-- subtransaction that took it; check again after ROLLBACK TO.
\i sql/include/case_harness.sql

CREATE FUNCTION pg_temp.tok(lease text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = lease $$;
CREATE FUNCTION pg_temp.lease(lease text) RETURNS text
LANGUAGE sql AS $$
	SELECT l::text FROM fencing.leases AS l WHERE l.name = lease
$$;
CREATE FUNCTION pg_temp.counter() RETURNS bigint
LANGUAGE sql AS $$ SELECT last_value FROM fencing.token_seq $$;

-- 1. acquire of a new lease, rolled back: no row; the token is a gap
BEGIN;
SAVEPOINT s;
SELECT fencing.lease_acquire('bi_f_new', 'alice', '10 min') AS t_rb \gset
SELECT pg_temp.check('acquire in a savepoint creates the lease',
					 pg_temp.tok('bi_f_new') = :t_rb);
ROLLBACK TO SAVEPOINT s;
SELECT pg_temp.check('rolled-back acquire: no lease row',
					 NOT EXISTS (SELECT FROM fencing.leases WHERE name = 'bi_f_new'));
SELECT pg_temp.check('rolled-back acquire: the counter keeps the token',
					 pg_temp.counter() >= :t_rb);
COMMIT;
SELECT fencing.lease_acquire('bi_f_new', 'bob', '10 min') AS t_next \gset
SELECT pg_temp.check('the next token is larger than the rolled-back one', :t_next > :t_rb);
SELECT pg_temp.check('the rolled-back token does not renew',
					 NOT fencing.lease_renew('bi_f_new', :t_rb, '1 min'));
SELECT pg_temp.check('the rolled-back token does not check',
					 NOT fencing.lease_lock('bi_f_new', :t_rb));
SELECT pg_temp.check('the rolled-back token does not release',
					 NOT fencing.lease_release('bi_f_new', :t_rb));
SELECT pg_temp.check('bob holds the lease with the next token',
					 fencing.lease_lock('bi_f_new', :t_next));

-- 2. re-acquire by the holder, rolled back: the old token stays current
SELECT fencing.lease_acquire('bi_f_re', 'alice', '10 min') AS t_a \gset
SELECT pg_temp.lease('bi_f_re') AS row_before \gset
BEGIN;
SAVEPOINT s;
SELECT fencing.lease_acquire('bi_f_re', 'alice', '10 min') AS t_b \gset
ROLLBACK TO s;
SELECT pg_temp.check('rolled-back re-acquire: the row is as before',
					 pg_temp.lease('bi_f_re') = :'row_before');
COMMIT;
SELECT pg_temp.check('rolled-back re-acquire: the old token is still current',
					 fencing.lease_lock('bi_f_re', :t_a));
SELECT pg_temp.check('rolled-back re-acquire: its token is not',
					 NOT fencing.lease_lock('bi_f_re', :t_b));

-- 3. takeover of an expired lease by another holder, rolled back
SELECT fencing.lease_acquire('bi_f_take', 'alice', '0.2 s') AS t_alice \gset
SELECT pg_sleep(0.3);
SELECT pg_temp.lease('bi_f_take') AS row_before \gset
BEGIN;
SAVEPOINT s;
SELECT fencing.lease_acquire('bi_f_take', 'bob', '10 min') AS t_bob \gset
SELECT pg_temp.check('takeover in a savepoint', :t_bob > :t_alice);
ROLLBACK TO s;
SELECT pg_temp.check('rolled-back takeover: the row is as before (alice, expired)',
					 pg_temp.lease('bi_f_take') = :'row_before');
COMMIT;
SELECT holder, state, holder_changes, expired_takeovers
  FROM fencing.lease_status WHERE name = 'bi_f_take';
SELECT pg_temp.check('rolled-back takeover: bob''s token is not current',
					 NOT fencing.lease_lock('bi_f_take', :t_bob));

-- 4. renew, rolled back: the expiry is as before
SELECT fencing.lease_acquire('bi_f_renew', 'alice', '1 min') AS t_r \gset
SELECT pg_temp.lease('bi_f_renew') AS row_before \gset
BEGIN;
SAVEPOINT s;
SELECT pg_temp.check('renew in a savepoint', fencing.lease_renew('bi_f_renew', :t_r, '1 day'));
ROLLBACK TO s;
SELECT pg_temp.check('rolled-back renew: expiry and counters as before',
					 pg_temp.lease('bi_f_renew') = :'row_before');
COMMIT;
SELECT remaining <= '1 min' AS still_one_minute, renewals
  FROM fencing.lease_status WHERE name = 'bi_f_renew';

-- 5. release, rolled back: the lease is still held with the same token
SELECT pg_temp.lease('bi_f_renew') AS row_before \gset
BEGIN;
SAVEPOINT s;
SELECT pg_temp.check('release in a savepoint', fencing.lease_release('bi_f_renew', :t_r));
SELECT pg_temp.check('released inside the savepoint',
					 fencing.lease_acquire('bi_f_renew', 'bob', '1 min') > :t_r);
ROLLBACK TO s;
SELECT pg_temp.check('rolled-back release (and bob''s acquire): row as before',
					 pg_temp.lease('bi_f_renew') = :'row_before');
SELECT pg_temp.check('rolled-back release: the token is current in the same transaction',
					 fencing.lease_lock('bi_f_renew', :t_r));
COMMIT;
SELECT pg_temp.check('rolled-back release: bob cannot take it',
					 fencing.lease_acquire('bi_f_renew', 'bob', '1 min') IS NULL);

-- 6. nested savepoints: only the inner one rolls back
BEGIN;
SAVEPOINT outer_sp;
SELECT fencing.lease_acquire('bi_f_nest', 'alice', '10 min') AS t_outer \gset
SAVEPOINT inner_sp;
SELECT pg_temp.check('inner: renew', fencing.lease_renew('bi_f_nest', :t_outer, '1 min'));
SELECT pg_temp.check('inner: release', fencing.lease_release('bi_f_nest', :t_outer));
ROLLBACK TO inner_sp;
RELEASE outer_sp;
COMMIT;
SELECT pg_temp.check('nested: the outer acquire stays, the inner renew and release do not',
					 (SELECT state = 'held' AND renewals = 0 AND releases = 0
						AND token = :t_outer
					   FROM fencing.lease_status WHERE name = 'bi_f_nest'));

-- 7. an error inside a PL/pgSQL EXCEPTION block undoes the lease calls
-- made in the block; the tokens they used are gaps
SELECT pg_temp.counter() AS c0 \gset
DO $$
DECLARE
	t bigint;
BEGIN
	BEGIN
		t := fencing.lease_acquire('bi_f_exc', 'alice', '10 min');
		PERFORM fencing.lease_renew('bi_f_nest', (SELECT token FROM fencing.leases
												   WHERE name = 'bi_f_nest'), '1 day');
		RAISE EXCEPTION 'worker failed after acquiring token %', t;
	EXCEPTION WHEN raise_exception THEN
		RAISE NOTICE 'caught: %', regexp_replace(SQLERRM, '\d+', 'N');
	END;
END $$;
SELECT pg_temp.check('exception block: no lease bi_f_exc',
					 NOT EXISTS (SELECT FROM fencing.leases WHERE name = 'bi_f_exc'));
SELECT pg_temp.check('exception block: the renew of bi_f_nest is undone',
					 (SELECT renewals = 0 AND remaining <= '10 min'
					    FROM fencing.lease_status WHERE name = 'bi_f_nest'));
SELECT pg_temp.check('exception block: the token it spent is a gap',
					 pg_temp.counter() = :c0 + 1);

-- 8. an error raised by a lease function itself, caught: nothing to undo
SELECT pg_temp.lease('bi_f_nest') AS row_before \gset
DO $$
BEGIN
	PERFORM fencing.lease_renew('bi_f_nest', 0, '1 min');
EXCEPTION WHEN invalid_parameter_value THEN
	RAISE NOTICE 'caught % (%)', SQLSTATE, SQLERRM;
END $$;
DO $$
BEGIN
	PERFORM fencing.lease_acquire('bi_f_nest', 'bob', '2 days');
EXCEPTION WHEN invalid_parameter_value THEN
	RAISE NOTICE 'caught % (%)', SQLSTATE, SQLERRM;
END $$;
SELECT pg_temp.check('caught argument errors: the lease is as before',
					 pg_temp.lease('bi_f_nest') = :'row_before');

-- 9. a lease taken in a subtransaction that commits (RELEASE SAVEPOINT)
-- and an outer transaction that rolls back: all undone
BEGIN;
SAVEPOINT s;
SELECT fencing.lease_acquire('bi_f_outer', 'alice', '10 min') AS t_o \gset
RELEASE s;
ROLLBACK;
SELECT pg_temp.check('outer rollback undoes a released savepoint''s acquire',
					 NOT EXISTS (SELECT FROM fencing.leases WHERE name = 'bi_f_outer'));
SELECT pg_temp.check('and its token stays unused for good',
					 fencing.lease_acquire('bi_f_outer', 'alice', '10 min') > :t_o);

-- 10. many rolled-back acquires: each leaves one gap, no token is reused
SELECT pg_temp.counter() AS c0 \gset
DO $$
BEGIN
	FOR i IN 1..20 LOOP
		BEGIN
			PERFORM fencing.lease_acquire('bi_f_many', 'alice', '10 min');
			RAISE EXCEPTION 'roll back';
		EXCEPTION WHEN raise_exception THEN
			NULL;
		END;
	END LOOP;
END $$;
SELECT pg_temp.check('20 rolled-back acquires left 20 gaps and no lease',
					 pg_temp.counter() = :c0 + 20
					 AND NOT EXISTS (SELECT FROM fencing.leases WHERE name = 'bi_f_many'));
SELECT pg_temp.check('the next token comes after all of them',
					 fencing.next_token() = :c0 + 21);

-- every case (those made inside rolled-back savepoints are counted, though
-- their rows in pg_temp.cases rolled back with them)
SELECT last_value AS cases FROM pg_temp.case_seq;
SELECT n, label, result FROM pg_temp.cases WHERE result <> 'ok';
