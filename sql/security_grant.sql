--
-- Security: the GRANT recipe for an application role.
--
-- CREATE EXTENSION (by a superuser) creates schema fencing; PUBLIC has no
-- USAGE on it, so an ordinary role can call nothing.  The whole recipe is
--     GRANT USAGE ON SCHEMA fencing TO app;
-- after which the role, with no other privilege at all, can use every
-- function meant for applications, read the views, and guard its own
-- tables with fence_guard -- while it holds no privilege on any table or
-- sequence of the extension.  The admin functions stay refused.
\i sql/include/case_harness.sql

CREATE ROLE regress_sec_app NOLOGIN;
CREATE SCHEMA regress_sec_app_s AUTHORIZATION regress_sec_app;

-- ---- before the grant: the schema is closed to PUBLIC ----
SELECT has_schema_privilege('public', 'fencing', 'USAGE') AS public_usage,
	   has_schema_privilege('public', 'fencing', 'CREATE') AS public_create,
	   has_schema_privilege('regress_sec_app', 'fencing', 'USAGE') AS app_usage;
SET ROLE regress_sec_app;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.next_token()$$),
	($$SELECT fencing.lease_acquire('sec_g', 'app', '1 min')$$),
	($$SELECT fencing.lease_lock('sec_g', 1)$$),
	($$SELECT fencing.fence_allows(1, 2)$$),
	($$SELECT count(*) FROM fencing.lease_status$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;

-- ---- the recipe ----
GRANT USAGE ON SCHEMA fencing TO regress_sec_app;

-- the role has no privilege on any table or sequence of the extension,
-- may read the views, and may execute every function but the internal ones
SELECT count(*) FILTER (WHERE c.relkind = 'r') AS tables,
	   count(*) FILTER (WHERE c.relkind = 'S') AS sequences,
	   count(*) FILTER (WHERE has_table_privilege('regress_sec_app', c.oid,
			'SELECT,INSERT,UPDATE,DELETE,TRUNCATE,REFERENCES,TRIGGER')) AS with_any_privilege
  FROM pg_class AS c
 WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind IN ('r', 'S');
SELECT c.relname, has_table_privilege('regress_sec_app', c.oid, 'SELECT') AS app_may_read
  FROM pg_class AS c
 WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind = 'v'
   AND c.relname IN ('lease_status', 'stats')
 ORDER BY c.relname;
SELECT p.oid::regprocedure AS not_executable
  FROM pg_proc AS p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND NOT has_function_privilege('regress_sec_app', p.oid, 'EXECUTE')
 ORDER BY p.proname;

-- ---- as the application role: the whole lease life cycle ----
SET ROLE regress_sec_app;
SELECT current_user, session_user <> current_user AS switched;
SELECT fencing.lease_acquire('sec_g', 'app-1', '10 min') AS t1 \gset
SELECT pg_temp.check('acquire', :t1 > 0);
SELECT pg_temp.check('check', fencing.lease_lock('sec_g', :t1));
SELECT pg_temp.check('renew', fencing.lease_renew('sec_g', :t1, '20 min'));
SELECT fencing.lease_acquire('sec_g', 'app-1', '10 min') AS t2 \gset
SELECT pg_temp.check('re-acquire by the same holder: a newer token', :t2 > :t1);
SELECT pg_temp.check('the older token is stale now', NOT fencing.lease_lock('sec_g', :t1));
SELECT pg_temp.check('another holder is refused while the lease is live',
					 fencing.lease_acquire('sec_g', 'app-2', '10 min') IS NULL);
SELECT pg_temp.check('release', fencing.lease_release('sec_g', :t2));
SELECT fencing.lease_acquire('sec_g', 'app-2', '10 min') AS t3 \gset
SELECT pg_temp.check('another holder takes the released lease', :t3 > :t2);
SELECT fencing.next_token() AS n1 \gset
SELECT pg_temp.check('next_token', :n1 > :t3);

-- the resource-side functions
SELECT pg_temp.check('fence_allows', fencing.fence_allows(:t2, :t3) AND NOT fencing.fence_allows(:t3, :t2));
SELECT pg_temp.check('fence_allows allow_same', fencing.fence_allows(:t3, :t3, true) AND NOT fencing.fence_allows(:t3, :t2, true));
SELECT pg_temp.check('fence_advance', fencing.fence_advance(:t2, :t3) = :t3);
SELECT pg_temp.check('expect_rows', fencing.expect_rows(1, 1) = 1);

-- the views
SELECT name, holder, holder_role, state, remaining > '9 min' AS remaining_ok,
	   token = :t3 AS token_current, holder_changes, acquires, renewals, releases
  FROM fencing.lease_status WHERE name = 'sec_g';

-- fence_guard on the role's own table refuses the role's stale write
CREATE TABLE regress_sec_app_s.jobs (id int PRIMARY KEY, state text, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON regress_sec_app_s.jobs
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO regress_sec_app_s.jobs VALUES (1, 'new', NULL);
WITH u AS (UPDATE regress_sec_app_s.jobs SET state = 'by t3', fence = :t3
			WHERE id = 1 RETURNING 1)
SELECT pg_temp.check('guarded write with the current token',
					 (SELECT count(*) = 1 FROM u));
RESET ROLE;
CREATE OR REPLACE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(t::text, ' ' ORDER BY t.id) FROM regress_sec_app_s.jobs AS t
$$;
SET ROLE regress_sec_app;
-- (token numbers in the message shown as N)
SELECT q, regexp_replace(r.result, 'token \d+', 'token N', 'g') AS result, r.changes FROM (VALUES
	($$UPDATE regress_sec_app_s.jobs SET state = 'stale', fence = fence - 1 WHERE id = 1$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT pg_temp.check('the stale write left the row as it was',
					 (SELECT state = 'by t3' AND fence = :t3 FROM regress_sec_app_s.jobs WHERE id = 1));
BEGIN;
SELECT set_config('fencing.token', :'n1', true) = :'n1' AS declared;
UPDATE regress_sec_app_s.jobs SET state = 'by n1' WHERE id = 1;
COMMIT;
SELECT pg_temp.check('SET LOCAL fencing.token stamps the row',
					 (SELECT fence = :n1 FROM regress_sec_app_s.jobs WHERE id = 1));

-- waiting: for a lease of the same role, and for one of another role;
-- the waiter's lease starts when the old one ended, not before
SELECT fencing.lease_acquire('sec_g_wait', 'app-1', '0.4 s') > 0 AS short_lease;
SELECT expires_at AS e0 FROM fencing.lease_status WHERE name = 'sec_g_wait' \gset
SELECT fencing.lease_acquire('sec_g_wait', 'app-2', '1 min', '5 s') AS tw \gset
SELECT pg_temp.check('waiting acquire: taken when the lease expired',
					 (SELECT :tw > :n1 AND acquired_at >= :'e0'
						FROM fencing.lease_status WHERE name = 'sec_g_wait'));
RESET ROLE;
SELECT fencing.lease_acquire('sec_g_wait_su', 'superuser-job', '0.4 s') > 0 AS short_lease;
SET ROLE regress_sec_app;
SELECT expires_at AS e0 FROM fencing.lease_status WHERE name = 'sec_g_wait_su' \gset
SELECT fencing.lease_acquire('sec_g_wait_su', 'app-1', '1 min', '5 s') AS tw2 \gset
SELECT pg_temp.check('waiting acquire: takes over another role''s expired lease',
					 (SELECT :tw2 > :tw AND acquired_at >= :'e0'
						FROM fencing.lease_status WHERE name = 'sec_g_wait_su'));
SELECT clock_timestamp() AS w0 \gset
SELECT pg_temp.check('waiting acquire: gives up after the wait',
					 fencing.lease_acquire('sec_g', 'app-1', '1 min', '0.3 s') IS NULL
					 AND clock_timestamp() - :'w0' >= '0.3 s');
SELECT name, holder, holder_role, state, takeover FROM fencing.lease_status
 WHERE name LIKE 'sec\_g\_wait%' ORDER BY name;

-- the admin functions are not part of the recipe
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_force_release('sec_g')$$),
	($$SELECT fencing.lease_purge('1 hour')$$),
	($$SELECT fencing.advance_tokens(1)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
SELECT last_value AS first_cases FROM pg_temp.case_seq \gset
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.refused_with_changes();

-- a new session: the first statement of a transaction declares the token,
-- before the library is even loaded in that backend
\c
SET ROLE regress_sec_app;
SELECT fencing.lease_acquire('sec_g', 'app-2', '10 min') AS t4 \gset
\c
SET ROLE regress_sec_app;
BEGIN;
SET LOCAL fencing.token = :t4;
UPDATE regress_sec_app_s.jobs SET state = 'by t4' WHERE id = 1;
COMMIT;
SELECT state, fence = :t4 AS stamped_with_t4 FROM regress_sec_app_s.jobs;
SELECT fencing.lease_release('sec_g', :t4) AS released;
RESET ROLE;

-- every case: those of the first session, and the two just above
SELECT :first_cases + 2 AS cases;

DROP SCHEMA regress_sec_app_s CASCADE;
REVOKE USAGE ON SCHEMA fencing FROM regress_sec_app;
DROP ROLE regress_sec_app;
