-- lease_force_release(name) ends a live lease, whoever holds it.  Only
-- superusers and members of role fencing_admin (when that role exists) may
-- call it; others get 42501.  The holder's token is stale from then on,
-- the lease is free at once (a release has no lock delay), and the call is
-- logged (shown once below, with client_min_messages = log and terse
-- verbosity, which leaves out the DETAIL with the token).

CREATE ROLE regress_op_app;
CREATE ROLE regress_op_ops;
GRANT USAGE ON SCHEMA fencing TO regress_op_app, regress_op_ops;

-- an application role holds a lease, with a lock delay
SET ROLE regress_op_app;
SET fencing.lock_delay = '10s';
SELECT fencing.lease_acquire('op_fr', 'app-1', '1 min') AS t1 \gset
RESET fencing.lock_delay;

-- the application may not force-release, not even its own lease
SELECT fencing.lease_force_release('op_fr');
\echo :LAST_ERROR_SQLSTATE
-- nor may another ordinary role, whether or not role fencing_admin exists
SET ROLE regress_op_ops;
SELECT fencing.lease_force_release('op_fr');
\echo :LAST_ERROR_SQLSTATE
-- the permission check comes before the argument checks
SELECT fencing.lease_force_release(NULL);
RESET ROLE;
SELECT holder, token = :t1 AS current, state FROM fencing.lease_status WHERE name = 'op_fr';

-- a rolled-back force-release changes nothing
BEGIN;
SELECT fencing.lease_force_release('op_fr') AS forced;
ROLLBACK;
SELECT holder, token = :t1 AS current, state, releases FROM fencing.lease_status WHERE name = 'op_fr';

-- a superuser force-releases the application's lease
SELECT fencing.lease_force_release('op_fr') AS forced;
SELECT holder, holder_role, token = :t1 AS token_kept, state, remaining,
	   released_at IS NOT NULL AS released, available_at = released_at AS available_now,
	   releases, acquires
  FROM fencing.lease_status WHERE name = 'op_fr';

-- the holder's token is stale now: renew, check and release are false
SET ROLE regress_op_app;
SELECT fencing.lease_renew('op_fr', :t1, '1 min') AS renewed,
	   fencing.lease_lock('op_fr', :t1) AS checked,
	   fencing.lease_release('op_fr', :t1) AS released;
RESET ROLE;

-- another holder takes the lease at once, despite the lock delay recorded
-- with the forced lease; it is no expired takeover
SET ROLE regress_op_ops;
SELECT fencing.lease_acquire('op_fr', 'ops-1', '1 min') AS t2 \gset
RESET ROLE;
SELECT :t2 > :t1 AS newer_token, holder, holder_role, state, takeover, holder_changes,
	   expired_takeovers
  FROM fencing.lease_status WHERE name = 'op_fr';
SELECT fencing.fence_allows(:t1, :t2) AS new_token_passes_old_fence,
	   fencing.fence_allows(:t2, :t1) AS old_token_passes_new_fence;

-- force-releasing what is not live is false and changes nothing: a free
-- lease, an unknown lease, an expired lease
SELECT fencing.lease_acquire('op_fr_free', 'x', '1 min') AS tf \gset
SELECT fencing.lease_release('op_fr_free', :tf) AS released;
SELECT fencing.lease_acquire('op_fr_expired', 'x', '100 ms') AS te \gset
SELECT pg_sleep_until((SELECT expires_at FROM fencing.lease_status WHERE name = 'op_fr_expired'));
SELECT fencing.lease_force_release('op_fr_free') AS free_forced,
	   fencing.lease_force_release('op_fr_unknown') AS unknown_forced,
	   fencing.lease_force_release('op_fr_expired') AS expired_forced;
SELECT name, state, releases FROM fencing.lease_status
 WHERE name IN ('op_fr_free', 'op_fr_unknown', 'op_fr_expired') ORDER BY name;

-- argument checks
SELECT fencing.lease_force_release(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT fencing.lease_force_release('');
\echo :LAST_ERROR_SQLSTATE

-- role fencing_admin (cluster-wide: created here only if missing, and then
-- dropped at the end)
CREATE TEMP TABLE op_fr_admin_role AS
	SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_admin') AS created_here;
DO $$
BEGIN
	IF (SELECT created_here FROM op_fr_admin_role) THEN
		CREATE ROLE fencing_admin NOLOGIN;
	END IF;
END $$;
-- existing is not enough: ops is no member yet
SET ROLE regress_op_ops;
SELECT fencing.lease_force_release('op_fr');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- a member of fencing_admin may force-release any lease (here the
-- superuser's), and purge; the LOG names the lease and the role
GRANT fencing_admin TO regress_op_ops;
SELECT fencing.lease_acquire('op_fr_super', 'root-1', '1 min') AS t3 \gset
SET ROLE regress_op_ops;
SET client_min_messages = log;
\set VERBOSITY terse
SELECT fencing.lease_force_release('op_fr_super') AS forced;
\set VERBOSITY default
RESET client_min_messages;
SELECT fencing.lease_purge('1 day') >= 0 AS purged;
RESET ROLE;
SELECT holder, state, releases FROM fencing.lease_status WHERE name = 'op_fr_super';
SELECT fencing.lease_renew('op_fr_super', :t3, '1 min') AS superuser_renewed;

-- membership revoked: refused again
REVOKE fencing_admin FROM regress_op_ops;
SET ROLE regress_op_ops;
SELECT fencing.lease_force_release('op_fr');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT holder, token = :t2 AS current, state FROM fencing.lease_status WHERE name = 'op_fr';

-- an expired lease in its lock delay: force_release ends the delay, so
-- another holder can take it at once; a lease past its delay is free
-- already, and there is nothing to end
SET fencing.lock_delay = '1 min';
SELECT fencing.lease_acquire('op_fr_delay', 'a', '1 millisecond') AS td \gset
SELECT pg_sleep(0.01);
SELECT fencing.lease_acquire('op_fr_delay', 'b', '1 min') IS NULL AS delayed;
SELECT fencing.lease_force_release('op_fr_delay') AS delay_ended;
SELECT fencing.lease_acquire('op_fr_delay', 'b', '1 min') > :td AS taken_at_once;
RESET fencing.lock_delay;
SELECT fencing.lease_acquire('op_fr_gone', 'a', '1 millisecond') IS NOT NULL AS acquired;
SELECT pg_sleep(0.01);
SELECT fencing.lease_force_release('op_fr_gone') AS nothing_to_end;

-- clean up
SELECT fencing.lease_force_release('op_fr') AS forced;
DO $$
BEGIN
	IF (SELECT created_here FROM op_fr_admin_role) THEN
		DROP ROLE fencing_admin;
	END IF;
END $$;
REVOKE USAGE ON SCHEMA fencing FROM regress_op_app, regress_op_ops;
DROP ROLE regress_op_app, regress_op_ops;
