--
-- lease_watch(name, token, wait): why a token is no longer the current
-- token of its lease, semaphore slot or election, as (reason, successor).
-- With wait => '0' it answers at once (the companion of a false
-- lease_renew); with a wait it returns as soon as the token stops being
-- current.  The wake-ups are in specs/lease_watch_wakeup.spec.
--
\i sql/include/case_harness.sql
\set VERBOSITY default
-- wait (on a condition, not a duration) until a lease's current token expired
CREATE FUNCTION pg_temp.wait_expired(n text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	WHILE (SELECT state FROM fencing.lease_status WHERE name = n) <> 'expired' LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
CREATE FUNCTION pg_temp.watch(n text, t bigint, w interval DEFAULT '0')
RETURNS TABLE (reason text, successor bigint, fast boolean)
LANGUAGE plpgsql AS $$
DECLARE
	start timestamptz := clock_timestamp();
BEGIN
	RETURN QUERY SELECT x.reason, x.successor, clock_timestamp() - start < interval '20 s'
				   FROM fencing.lease_watch(n, t, w) AS x;
END
$$;

-- current, for as long as the wait lasts
SELECT fencing.lease_acquire('lw_a', 'A', '1 min') AS a1 \gset
SELECT * FROM fencing.lease_watch('lw_a', :a1);
SELECT reason, successor FROM fencing.lease_watch('lw_a', :a1, wait => '10 ms');

-- released: at once, even with a wait; then the next holder's token is
-- its successor
SELECT fencing.lease_release('lw_a', :a1) AS released;
SELECT * FROM pg_temp.watch('lw_a', :a1, '1 min');
SELECT fencing.lease_acquire('lw_a', 'B', '1 min') AS b1 \gset
SELECT reason, successor = :b1 AS successor_b1 FROM fencing.lease_watch('lw_a', :a1);

-- taken over: B's holder acquires its live lease again (another session
-- of it, say); the old token's successor is the new one
SELECT fencing.lease_acquire('lw_a', 'B', '1 min') AS b2 \gset
SELECT reason, successor = :b2 AS successor_b2 FROM fencing.lease_watch('lw_a', :b1);
-- a token older than the one before the current one: unknown
SELECT * FROM fencing.lease_watch('lw_a', :a1);

-- force-released, and then taken by another holder
SELECT fencing.lease_force_release('lw_a') AS forced;
SELECT * FROM pg_temp.watch('lw_a', :b2, '1 min');
SELECT fencing.lease_acquire('lw_a', 'C', '50 ms') AS c1 \gset
SELECT reason, successor = :c1 AS successor_c1 FROM fencing.lease_watch('lw_a', :b2);

-- expired: nobody took it yet; then taken over, by the taker's token
SELECT pg_temp.wait_expired('lw_a');
SELECT * FROM pg_temp.watch('lw_a', :c1, '1 min');
SELECT fencing.lease_renew('lw_a', :c1, '1 min') AS c_renewed;
SELECT fencing.lease_acquire('lw_a', 'D', '1 min') AS d1 \gset
SELECT reason, successor = :d1 AS successor_d1 FROM fencing.lease_watch('lw_a', :c1);
SELECT takeover FROM fencing.lease_status WHERE name = 'lw_a';

-- a name or token never seen: unknown (a token issued here, but to no
-- lease of that name)
SELECT fencing.next_token() AS spare \gset
SELECT * FROM fencing.lease_watch('lw_none', :d1);
SELECT * FROM fencing.lease_watch('lw_a', :spare);
-- a token above every token this database issued: another history issued
-- it, which LF005 refuses (fence_allows here) as lost at failover; so does
-- lease_watch
SELECT :spare + 1000000000 AS alien \gset
SELECT * FROM fencing.lease_watch('lw_a', :alien);
SELECT left(r.result, 6) AS fence_allows FROM pg_temp.run($$SELECT fencing.fence_allows(NULL, $$ || :alien || $$)$$) AS r;

-- semaphore slots: each token has its own fate
SELECT fencing.semaphore_acquire('lw_sem', 'E', 2, '1 min') AS e1 \gset
SELECT fencing.semaphore_acquire('lw_sem', 'F', 2, '1 min') AS f1 \gset
SELECT fencing.lease_release('lw_sem', :e1) AS e_released;
SELECT (SELECT reason FROM fencing.lease_watch('lw_sem', :e1)) AS e,
	   (SELECT reason FROM fencing.lease_watch('lw_sem', :f1)) AS f;
SELECT fencing.semaphore_acquire('lw_sem', 'G', 2, '1 min') AS g1 \gset
SELECT reason, successor = :g1 AS successor_g1 FROM fencing.lease_watch('lw_sem', :e1);

-- an election's leader learns why it lost: here, it resigned
SELECT fencing.election_campaign('lw_el', 'node-1', 'v', '1 min') AS l1 \gset
SELECT fencing.election_resign('lw_el', :l1) AS resigned;
SELECT * FROM fencing.lease_watch('lw_el', :l1);

-- any role may watch; it is a read that changes nothing, also in a
-- read-only transaction
CREATE ROLE regress_lw NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_lw;
SET ROLE regress_lw;
BEGIN TRANSACTION READ ONLY;
SELECT reason FROM fencing.lease_watch('lw_a', :d1);
ROLLBACK;
RESET ROLE;
REVOKE USAGE ON SCHEMA fencing FROM regress_lw;
DROP ROLE regress_lw;

-- REPEATABLE READ: without a wait it answers from the transaction's
-- snapshot, or 40001 if the lease changed since (specs/election_isolation.spec);
-- a wait needs fresh snapshots (0A000)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT reason FROM fencing.lease_watch('lw_a', :d1);
SELECT r.result FROM pg_temp.run($$SELECT reason FROM fencing.lease_watch('lw_a', 1, '1 s')$$) AS r;
ROLLBACK;

-- bad input: a clear error, and nothing changes
SELECT q, r.* FROM (VALUES
	($$SELECT reason FROM fencing.lease_watch(NULL, 1)$$),
	($$SELECT reason FROM fencing.lease_watch('lw_a', NULL)$$),
	($$SELECT reason FROM fencing.lease_watch('lw_a', 1, NULL)$$),
	($$SELECT reason FROM fencing.lease_watch('', 1)$$),
	($$SELECT reason FROM fencing.lease_watch(repeat('n', 257), 1)$$),
	($$SELECT reason FROM fencing.lease_watch('lw_a', 0)$$),
	($$SELECT reason FROM fencing.lease_watch('lw_a', -1)$$),
	($$SELECT reason FROM fencing.lease_watch('lw_a', 1, '-1 s')$$),
	($$SELECT reason FROM fencing.lease_watch('lw_a', 1, '2 days')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the companion of a false lease_renew: lost at failover.  A token from
-- before this database's band (here entered with advance_tokens, as a
-- promotion or a restore would) is refused by lease_renew with LF005;
-- lease_watch gives that as a reason.  A recorded ending says more.
SELECT fencing.lease_acquire('lw_band', 'H', '1 min') AS h1 \gset
SELECT fencing.lease_acquire('lw_band2', 'H', '1 min') AS h2 \gset
SELECT fencing.lease_release('lw_band2', :h2) AS released;
SELECT fencing.advance_tokens();
SELECT * FROM fencing.lease_watch('lw_band', :h1);
SELECT * FROM fencing.lease_watch('lw_band', :h1, wait => '1 min');
SELECT * FROM fencing.lease_watch('lw_band2', :h2);
-- a token of a row lost at the failover (no row knows it)
SELECT * FROM fencing.lease_watch('lw_none', :h1);
SELECT left(r.result, 6) AS renew FROM pg_temp.run($$SELECT fencing.lease_renew('lw_band', $$ || :h1 || $$, '1 min')$$) AS r;

\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();

DELETE FROM fencing.leases WHERE name LIKE 'lw\_%';
