--
-- Security: no way around the functions (security_forge), the two
-- statements that PostgreSQL refuses in words that differ by major: COPY
-- from a file (a server-file privilege; its message changed in 16), and
-- MERGE.  Every attempt fails and nothing changes.  Outputs: 15: .out, 16
-- and later: _1.out.
--
\i sql/include/case_harness.sql

CREATE ROLE regress_sec_forge_cm NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_sec_forge_cm;
SELECT fencing.lease_acquire('sec_fcm_su', 'superuser-job', '10 min') > 0 AS acquired;
SET ROLE regress_sec_forge_cm;
SELECT q, r.* FROM (VALUES
	($$MERGE INTO fencing.leases AS l USING (SELECT 'sec_fcm_su' AS name) AS s ON l.name = s.name WHEN MATCHED THEN DELETE$$),
	($$COPY fencing.leases FROM '/dev/null'$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
SELECT name, holder, state FROM fencing.lease_status WHERE name = 'sec_fcm_su';
REVOKE USAGE ON SCHEMA fencing FROM regress_sec_forge_cm;
DROP ROLE regress_sec_forge_cm;
