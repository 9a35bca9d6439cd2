-- A role with no privilege but USAGE on the schema uses leases through the
-- functions only: the table and the sequences stay out of its reach.
\i sql/include/try.sql

CREATE ROLE regress_fencing_app LOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_app;
SELECT fencing.lease_acquire('priv_super', 'root-job', '10 min') AS t_super \gset
SELECT last_value AS seq_before FROM fencing.token_seq \gset

SET ROLE regress_fencing_app;
SELECT current_user;

-- the whole lease life cycle works
SELECT fencing.lease_acquire('priv', 'app-1', '10 min') AS t1 \gset
SELECT :t1 > :t_super AS issued;
SELECT fencing.lease_lock('priv', :t1) AS checked;
SELECT fencing.lease_renew('priv', :t1, '20 min') AS renewed;
SELECT fencing.lease_acquire('priv', 'app-1', '10 min') AS t2 \gset
SELECT :t2 > :t1 AS reacquired;
SELECT fencing.lease_acquire('priv', 'app-2', '10 min') IS NULL AS other_refused;
SELECT fencing.lease_acquire('priv_super', 'app-2', '10 min') IS NULL AS superusers_lease_refused;
SELECT name, holder, holder_role = 'regress_fencing_app'::regrole AS role_is_app,
	   token = :t2 AS current, state, holder_changes
  FROM fencing.lease_status WHERE name IN ('priv', 'priv_super') ORDER BY name;
SELECT fencing.lease_release('priv', :t2) AS released;
SELECT name, holder, holder_role, state FROM fencing.lease_status WHERE name = 'priv';
SELECT fencing.lease_acquire('priv', 'app-2', '10 min') AS t3 \gset
SELECT :t3 > :t2 AS taken_after_release;
SELECT fencing.fence_allows(:t2, :t3) AS fence_ok;

-- direct access to the table and the sequences is denied
SELECT q, pg_temp.try(q) AS result
  FROM (VALUES
	($$SELECT count(*) FROM fencing.leases$$),
	($$SELECT token FROM fencing.leases WHERE name = 'priv'$$),
	($$UPDATE fencing.leases SET expires_at = now() - interval '1 h'$$),
	($$UPDATE fencing.leases SET holder = 'app-1' WHERE name = 'priv'$$),
	($$DELETE FROM fencing.leases$$),
	($$INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at) VALUES ('forged', 'x', current_user::regrole, 1, now(), now())$$),
	($$TRUNCATE fencing.leases$$),
	($$SELECT setval('fencing.token_seq', 1)$$),
	($$SELECT nextval('fencing.token_seq')$$),
	($$SELECT last_value FROM fencing.token_seq$$),
	($$SELECT setval('fencing.token_base', 0)$$),
	($$SELECT setval('fencing.token_origin', 0)$$),
	($$ALTER SEQUENCE fencing.token_seq RESTART$$),
	($$SELECT fencing._bind_token_origin()$$)
  ) AS v(q);
-- as a client sees it
SELECT * FROM fencing.leases;
\echo :LAST_ERROR_SQLSTATE
UPDATE fencing.leases SET token = 1;
\echo :LAST_ERROR_SQLSTATE
SELECT setval('fencing.token_seq', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT nextval('fencing.token_seq');
\echo :LAST_ERROR_SQLSTATE

-- leave a live lease behind, then drop the role
SELECT fencing.lease_acquire('priv_left', 'app-3', '10 min') IS NOT NULL AS left_behind;
RESET ROLE;
SELECT current_user = session_user AS reset;

-- nothing was forged, and the counter only moved forward
SELECT name, holder, holder_role, token = :t3 AS current, state
  FROM fencing.lease_status WHERE name = 'priv';
SELECT count(*) AS forged FROM fencing.leases WHERE name = 'forged';
SELECT last_value > :seq_before AS counter_moved_forward FROM fencing.token_seq;
SELECT fencing.lease_lock('priv', :t3) AS still_live;
SELECT fencing.lease_release('priv', :t3) AS released,
	   fencing.lease_release('priv_left',
							 (SELECT token FROM fencing.leases WHERE name = 'priv_left')) AS released_left;

DROP OWNED BY regress_fencing_app;
DROP ROLE regress_fencing_app;
