--
-- Security: leases belong to roles.
--
-- A lease records the role that acquired it (holder_role).  Renew, release
-- and check with the right token by another role fail with 42501 and
-- change nothing -- knowing the token (every role can read it in
-- lease_status) is not enough.  The holder name does not identify a
-- holder across roles: the same name from another role is another holder.
-- Superusers and members of role fencing_admin (if it exists) act as the
-- holder; they alone may call lease_force_release, lease_purge and
-- advance_tokens.  The token a transaction declares for fence_guard
-- (fencing.token) is not checked against anything: tokens are not
-- credentials, and fencing keeps out stale holders, not malicious ones.
\i sql/include/case_harness.sql

SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_admin')
	   AS admin_created_here \gset
CREATE ROLE regress_sec_a NOLOGIN;
CREATE ROLE regress_sec_b NOLOGIN;
CREATE ROLE regress_sec_ops NOLOGIN;
CREATE ROLE regress_sec_noinh NOLOGIN NOINHERIT;
CREATE ROLE regress_sec_nested NOLOGIN;
CREATE ROLE regress_sec_creator NOLOGIN CREATEROLE;
CREATE ROLE regress_sec_gone NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_sec_a, regress_sec_b, regress_sec_ops,
	regress_sec_noinh, regress_sec_nested, regress_sec_creator, regress_sec_gone;
GRANT regress_sec_ops TO regress_sec_nested;
-- the current token of a lease, as anyone can read it in lease_status
CREATE FUNCTION pg_temp.tok(lease text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.lease_status WHERE name = lease $$;
CREATE FUNCTION pg_temp.role_of(lease text) RETURNS text
LANGUAGE sql AS $$
	SELECT CASE WHEN holder_role::text LIKE 'regress\_%' THEN holder_role::text
				WHEN holder_role::text ~ '^[0-9]+$' THEN '(dropped role)'
				ELSE '(superuser)' END
	  FROM fencing.lease_status WHERE name = lease
$$;

-- ---- A's lease, and B with A's token ----
SET ROLE regress_sec_a;
SELECT fencing.lease_acquire('sec_r', 'worker', '10 min') AS t_a \gset
SET ROLE regress_sec_b;
SELECT pg_temp.tok('sec_r') = :t_a AS b_can_read_the_token;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '1 day')$$),
	($$SELECT fencing.lease_release('sec_r', pg_temp.tok('sec_r'))$$),
	($$SELECT fencing.lease_lock('sec_r', pg_temp.tok('sec_r'))$$),
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r') + 1000000, '1 day')$$),
	($$SELECT fencing.lease_release('sec_r', pg_temp.tok('sec_r') + 1000000)$$),
	($$SELECT fencing.lease_lock('sec_r_none', pg_temp.tok('sec_r'))$$),
	($$SELECT fencing.lease_acquire('sec_r', 'worker', '10 min')$$),
	($$SELECT fencing.lease_acquire('sec_r', 'worker', '10 min', '0.2 s')$$),
	($$SELECT fencing.lease_force_release('sec_r')$$),
	($$SELECT fencing.lease_purge('0')$$),
	($$SELECT fencing.advance_tokens(0)$$),
	($$SELECT fencing.advance_tokens(9223372036854775000)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- as a client sees it
\set VERBOSITY default
SELECT fencing.lease_release('sec_r', pg_temp.tok('sec_r'));
\set VERBOSITY terse
SET ROLE regress_sec_a;
SELECT name, holder, pg_temp.role_of(name) AS holder_role, state, token = :t_a AS a_token,
	   acquires, renewals, releases
  FROM fencing.lease_status WHERE name = 'sec_r';
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_lock('sec_r', pg_temp.tok('sec_r'))$$),
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '10 min')$$),
	($$SELECT fencing.lease_acquire('sec_r', 'worker', '10 min') > 0$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;

-- ---- lease admins ----
-- not yet a member of fencing_admin: refused like any role
SET ROLE regress_sec_ops;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '10 min')$$),
	($$SELECT fencing.lease_force_release('sec_r')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
\if :admin_created_here
CREATE ROLE fencing_admin NOLOGIN;
\endif
GRANT fencing_admin TO regress_sec_ops, regress_sec_noinh;

-- a member acts as the holder: the lease keeps A as its role
SET ROLE regress_sec_ops;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_lock('sec_r', pg_temp.tok('sec_r'))$$),
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '5 min')$$),
	($$SELECT fencing.lease_release('sec_r', pg_temp.tok('sec_r'))$$),
	($$SELECT fencing.lease_lock('sec_r', pg_temp.tok('sec_r'))$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT name, holder, pg_temp.role_of(name) AS holder_role, state, renewals, releases
  FROM fencing.lease_status WHERE name = 'sec_r';
-- ... but is not the holder when it acquires: a lease of its own role
SELECT fencing.lease_acquire('sec_r', 'worker', '10 min') AS t_ops \gset
SELECT pg_temp.role_of('sec_r') AS holder_role, holder_changes
  FROM fencing.lease_status WHERE name = 'sec_r';
SELECT fencing.lease_release('sec_r', :t_ops) AS released;
RESET ROLE;
SET ROLE regress_sec_a;
SELECT fencing.lease_acquire('sec_r', 'worker', '10 min') AS t_a \gset
RESET ROLE;

-- the admin functions
SET ROLE regress_sec_ops;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_force_release('sec_r')$$),
	($$SELECT fencing.lease_force_release('sec_r')$$),
	($$SELECT fencing.lease_force_release('sec_r_none')$$),
	($$SELECT fencing.lease_purge('1 hour')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
SET ROLE regress_sec_a;
SELECT pg_temp.check('after force_release A''s token is stale',
					 NOT fencing.lease_renew('sec_r', :t_a, '1 min'));
RESET ROLE;
CREATE TEMP TABLE adv AS SELECT last_value + 10 AS floor FROM fencing.token_seq;
GRANT SELECT ON adv TO PUBLIC;
SET ROLE regress_sec_ops;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.advance_tokens((SELECT floor FROM adv))$$),
	($$SELECT fencing.next_token() > (SELECT floor FROM adv)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;

-- a NOINHERIT member does not have the admin's privileges ...
SET ROLE regress_sec_a;
SELECT fencing.lease_acquire('sec_r', 'worker', '10 min') AS t_a \gset
SET ROLE regress_sec_noinh;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '10 min')$$),
	($$SELECT fencing.lease_force_release('sec_r')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- ... the role fencing_admin itself has, once it may use the schema
SELECT has_schema_privilege('fencing_admin', 'fencing', 'USAGE') AS admin_had_usage \gset
SET client_min_messages = error;
REVOKE USAGE ON SCHEMA fencing FROM fencing_admin;
RESET client_min_messages;
SET ROLE fencing_admin;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '10 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
GRANT USAGE ON SCHEMA fencing TO fencing_admin;
SET ROLE fencing_admin;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '10 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
\if :admin_had_usage
\else
REVOKE USAGE ON SCHEMA fencing FROM fencing_admin;
\endif
-- a member of a member inherits it
SET ROLE regress_sec_nested;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_lock('sec_r', pg_temp.tok('sec_r'))$$),
	($$SELECT fencing.lease_purge('1 hour')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- a superuser needs no membership
RESET ROLE;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '10 min')$$),
	($$SELECT fencing.lease_lock('sec_r', pg_temp.tok('sec_r'))$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT name, holder, pg_temp.role_of(name) AS holder_role, state
  FROM fencing.lease_status WHERE name = 'sec_r';

-- (a role with CREATEROLE: security_createrole, whose outcome depends on
-- the major)

-- ---- a dropped role's live lease ----
SET ROLE regress_sec_gone;
SELECT fencing.lease_acquire('sec_r_gone', 'worker', '10 min') AS t_gone \gset
RESET ROLE;
REVOKE USAGE ON SCHEMA fencing FROM regress_sec_gone;
DROP ROLE regress_sec_gone;
SELECT name, pg_temp.role_of(name) AS holder_role, state
  FROM fencing.lease_status WHERE name = 'sec_r_gone';
SET ROLE regress_sec_b;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('sec_r_gone', 'worker', '10 min')$$),
	($$SELECT fencing.lease_renew('sec_r_gone', pg_temp.tok('sec_r_gone'), '10 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SET ROLE regress_sec_ops;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_lock('sec_r_gone', pg_temp.tok('sec_r_gone'))$$),
	($$SELECT fencing.lease_force_release('sec_r_gone')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SET ROLE regress_sec_b;
SELECT fencing.lease_acquire('sec_r_gone', 'worker', '10 min') > :t_gone AS b_takes_it;
RESET ROLE;

-- ---- a renamed role keeps its leases (they record the role's OID) ----
ALTER ROLE regress_sec_a RENAME TO regress_sec_a_renamed;
SELECT pg_temp.role_of('sec_r') AS holder_role;
SET ROLE regress_sec_a_renamed;
SELECT pg_temp.check('a renamed role renews its lease',
					 fencing.lease_renew('sec_r', pg_temp.tok('sec_r'), '10 min'));
RESET ROLE;
ALTER ROLE regress_sec_a_renamed RENAME TO regress_sec_a;

-- ---- one role, several holders: by design they can act on each
-- other's leases, since the token is readable.  Give workers that must
-- not do that roles of their own. ----
SET ROLE regress_sec_a;
SELECT fencing.lease_acquire('sec_r_shared', 'worker-1', '10 min') > 0 AS worker_1;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_release('sec_r_shared', pg_temp.tok('sec_r_shared'))$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;

-- ---- fencing.token is a claim, not a credential ----
-- A's table is guarded; B may write it.  B declares the largest token
-- there is: this database, which issues the tokens, never issued it, so
-- the guard refuses it (LF005), and A's writes go through.  Writing the
-- fence column directly is the same.  B could still declare a token that
-- was issued (tokens are readable): fencing refuses stale holders; a
-- client with write access that lies about its token is outside what it
-- can prevent.
CREATE SCHEMA regress_sec_r_s AUTHORIZATION regress_sec_a;
SET ROLE regress_sec_a;
CREATE TABLE regress_sec_r_s.jobs (id int PRIMARY KEY, state text, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON regress_sec_r_s.jobs
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO regress_sec_r_s.jobs VALUES (1, 'new', NULL), (2, 'new', NULL);
GRANT USAGE ON SCHEMA regress_sec_r_s TO regress_sec_b;
GRANT SELECT, UPDATE ON regress_sec_r_s.jobs TO regress_sec_b;
RESET ROLE;
CREATE OR REPLACE FUNCTION pg_temp.resource() RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(t::text, ' ' ORDER BY t.id) FROM regress_sec_r_s.jobs AS t
$$;
SET ROLE regress_sec_b;
BEGIN;
SET LOCAL fencing.token = '9223372036854775807';
SELECT q, r.* FROM (VALUES
	($$UPDATE regress_sec_r_s.jobs SET state = 'claimed by b' WHERE id = 1 RETURNING fence$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
COMMIT;
SELECT q, r.* FROM (VALUES
	($$UPDATE regress_sec_r_s.jobs SET state = 'claimed by b', fence = 9223372036854775807 WHERE id = 2 RETURNING fence$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SET ROLE regress_sec_a;
SELECT fencing.lease_acquire('sec_r_jobs', 'worker', '10 min') AS t_jobs \gset
BEGIN;
SELECT set_config('fencing.token', :'t_jobs', true) = :'t_jobs' AS declared;
SELECT q, regexp_replace(r.result, 'token \d+ is', 'token N is') AS result, r.changes FROM (VALUES
	($$UPDATE regress_sec_r_s.jobs SET state = 'done by a' WHERE id = 1$$),
	($$UPDATE regress_sec_r_s.jobs SET state = 'done by a' WHERE id = 2$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
COMMIT;
RESET ROLE;
SELECT id, state, fence = :'t_jobs' AS fenced_by_a FROM regress_sec_r_s.jobs ORDER BY id;

-- every case, and any refused case that changed something
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();

-- clean up
SELECT fencing.lease_release(name, token) AS released
  FROM fencing.lease_status
 WHERE name IN ('sec_r', 'sec_r_gone', 'sec_r_jobs') AND state = 'held'
 ORDER BY name;
SET client_min_messages = warning;
DROP SCHEMA regress_sec_r_s CASCADE;
RESET client_min_messages;
REVOKE USAGE ON SCHEMA fencing FROM regress_sec_a, regress_sec_b, regress_sec_ops,
	regress_sec_noinh, regress_sec_nested, regress_sec_creator;
DROP ROLE regress_sec_a, regress_sec_b, regress_sec_ops, regress_sec_noinh,
	regress_sec_nested, regress_sec_creator;
\if :admin_created_here
DROP ROLE fencing_admin;
\endif
