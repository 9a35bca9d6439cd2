--
-- A role with CREATEROLE and fencing_admin.  Before PostgreSQL 16,
-- CREATEROLE may grant any role that is not a superuser, fencing_admin
-- included: such a role can make itself a lease admin (docs/versions.md).
-- From 16 on it needs the ADMIN option on fencing_admin, which it does not
-- have.  Output for 16 and later: security_createrole_1.out.
--
\i sql/include/case_harness.sql

SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_admin')
	   AS admin_created_here \gset
\if :admin_created_here
CREATE ROLE fencing_admin NOLOGIN;
\endif
CREATE ROLE regress_sec_cr NOLOGIN CREATEROLE;
GRANT USAGE ON SCHEMA fencing TO regress_sec_cr;
SET ROLE regress_sec_cr;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_force_release('sec_cr_none')$$),
	($$GRANT fencing_admin TO regress_sec_cr$$),
	($$SELECT fencing.lease_force_release('sec_cr_none')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
-- (16 and later warn that there is nothing to revoke)
SET client_min_messages = error;
REVOKE fencing_admin FROM regress_sec_cr;
RESET client_min_messages;
REVOKE USAGE ON SCHEMA fencing FROM regress_sec_cr;
DROP ROLE regress_sec_cr;
\if :admin_created_here
DROP ROLE fencing_admin;
\endif
