--
-- Security: no way around the functions.
--
-- A role that followed the recipe (USAGE on schema fencing, nothing else)
-- tries every direct way to forge a lease or a token, to rewind the token
-- counter, or to steal another role's lease: by writing the table, moving
-- the sequences, calling the internal functions, changing or dropping the
-- extension's objects, or putting objects of its own into schema fencing.
-- Every attempt fails with 42501 (or PostgreSQL's own refusal), and
-- nothing changes: not the lease rows, not the counters.
\i sql/include/case_harness.sql

CREATE ROLE regress_sec_forge NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_sec_forge;
SELECT fencing.lease_acquire('sec_f_su', 'superuser-job', '10 min') AS t_su \gset
SET ROLE regress_sec_forge;
SELECT fencing.lease_acquire('sec_f_app', 'app', '10 min') AS t_app \gset

-- the lease table (MERGE and COPY, which PostgreSQL refuses in words that
-- differ by major: security_forge_copy_merge)
SELECT q, r.* FROM (VALUES
	($$SELECT count(*) FROM fencing.leases$$),
	($$INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at) VALUES ('sec_f_forged', 'x', current_user::regrole, 9223372036854775806, now(), now() + '1 day')$$),
	($$INSERT INTO fencing.leases SELECT * FROM fencing.leases WHERE name = 'sec_f_su'$$),
	($$UPDATE fencing.leases SET token = token + 1000000 WHERE name = 'sec_f_app'$$),
	($$UPDATE fencing.leases SET holder_role = current_user::regrole WHERE name = 'sec_f_su'$$),
	($$UPDATE fencing.leases SET expires_at = now() - interval '1 hour' WHERE name = 'sec_f_su'$$),
	($$UPDATE fencing.leases SET token = 1$$),
	($$DELETE FROM fencing.leases WHERE name = 'sec_f_su'$$),
	($$TRUNCATE fencing.leases$$),
	($$LOCK TABLE fencing.leases IN ACCESS EXCLUSIVE MODE$$),
	($$SELECT name FROM fencing.lease_status FOR UPDATE$$),
	($$UPDATE fencing.lease_status SET token = 1$$),
	($$DELETE FROM fencing.lease_status$$),
	($$UPDATE pg_catalog.pg_class SET relacl = NULL WHERE oid = 'fencing.leases'::regclass$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the sequences: the token counter, its band and origin, the install
-- number (the counters of refused writes are in shared memory, reset only
-- by fencing_monitor.stats_reset(): sql/monitor_stats.sql)
SELECT q, r.* FROM (VALUES
	($$SELECT setval('fencing.token_seq', 1)$$),
	($$SELECT setval('fencing.token_seq', 9223372036854775806)$$),
	($$SELECT nextval('fencing.token_seq')$$),
	($$SELECT last_value FROM fencing.token_seq$$),
	($$ALTER SEQUENCE fencing.token_seq RESTART$$),
	($$ALTER SEQUENCE fencing.token_seq MAXVALUE 10$$),
	($$SELECT setval('fencing.token_base', 0)$$),
	($$SELECT nextval('fencing.token_base')$$),
	($$ALTER SEQUENCE fencing.token_base RESTART$$),
	($$SELECT setval('fencing.token_origin', 0)$$),
	($$SELECT nextval('fencing.token_origin')$$),
	($$ALTER SEQUENCE fencing.token_origin RESTART$$),
	($$SELECT setval('fencing.token_band', 0)$$),
	($$SELECT nextval('fencing.token_band')$$),
	($$ALTER SEQUENCE fencing.token_band RESTART$$),
	($$SELECT setval('fencing.token_band_offset', 0)$$),
	($$SELECT nextval('fencing.token_band_offset')$$),
	($$ALTER SEQUENCE fencing.token_band_offset RESTART$$),
	($$SELECT setval('fencing.token_witness', 1)$$),
	($$SELECT nextval('fencing.token_witness')$$),
	($$ALTER SEQUENCE fencing.token_witness RESTART$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the internal functions
SELECT q, r.* FROM (VALUES
	($$SELECT fencing._bind_token_origin()$$),
	($$SELECT fencing._leases_restored()$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- changing, dropping or taking over the extension's objects (a GRANT or
-- REVOKE of a privilege the role does not hold with grant option is a
-- warning and a no-op, as always in PostgreSQL)
SELECT q, r.* FROM (VALUES
	($$ALTER TABLE fencing.leases DISABLE TRIGGER leases_restored$$),
	($$ALTER TABLE fencing.leases ADD COLUMN x int$$),
	($$ALTER TABLE fencing.leases OWNER TO regress_sec_forge$$),
	($$ALTER TABLE fencing.leases RENAME TO leases_old$$),
	($$ALTER TABLE fencing.leases ENABLE ROW LEVEL SECURITY$$),
	($$CREATE TRIGGER forge BEFORE INSERT ON fencing.leases FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('token')$$),
	($$CREATE RULE forge AS ON UPDATE TO fencing.leases DO INSTEAD NOTHING$$),
	($$CREATE POLICY forge ON fencing.leases USING (true)$$),
	($$CREATE INDEX ON fencing.leases (token)$$),
	($$DROP TRIGGER leases_restored ON fencing.leases$$),
	($$DROP TABLE fencing.leases$$),
	($$DROP SEQUENCE fencing.token_seq$$),
	($$DROP VIEW fencing.lease_status$$),
	($$DROP FUNCTION fencing.next_token()$$),
	($$DROP SCHEMA fencing CASCADE$$),
	($$DROP EXTENSION fencing$$),
	($$ALTER EXTENSION fencing DROP FUNCTION fencing.next_token()$$),
	($$ALTER FUNCTION fencing.next_token() SECURITY DEFINER$$),
	($$ALTER FUNCTION fencing.next_token() RENAME TO next_token_old$$),
	($$ALTER FUNCTION fencing.lease_acquire(text, text, interval, interval) OWNER TO regress_sec_forge$$),
	($$ALTER VIEW fencing.lease_status RENAME TO lease_status_old$$),
	($$ALTER SCHEMA fencing OWNER TO regress_sec_forge$$),
	($$ALTER SCHEMA fencing RENAME TO fencing_old$$),
	($$COMMENT ON TABLE fencing.leases IS 'forged'$$),
	($$GRANT ALL ON fencing.leases TO regress_sec_forge$$),
	($$GRANT ALL ON SEQUENCE fencing.token_seq TO regress_sec_forge$$),
	($$GRANT CREATE ON SCHEMA fencing TO regress_sec_forge$$),
	($$GRANT EXECUTE ON FUNCTION fencing._bind_token_origin() TO regress_sec_forge$$),
	($$REVOKE EXECUTE ON FUNCTION fencing.lease_acquire(text, text, interval, interval) FROM PUBLIC$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- putting objects into schema fencing (it has no CREATE for anyone but
-- its owner): a replacement next_token, a shadowing overload, a table, an
-- operator the internal statements might pick up
SELECT q, r.* FROM (VALUES
	($$CREATE OR REPLACE FUNCTION fencing.next_token() RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'$$),
	($$CREATE OR REPLACE FUNCTION fencing.lease_acquire(name text, holder text, ttl interval, wait interval DEFAULT '0') RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'$$),
	($$CREATE FUNCTION fencing.next_token(int) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint'$$),
	($$CREATE FUNCTION fencing.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS 'SELECT now()'$$),
	($$CREATE TABLE fencing.leases2 (name text)$$),
	($$CREATE VIEW fencing.forged AS SELECT 1 AS one$$),
	($$CREATE SEQUENCE fencing.token_seq2$$),
	($$CREATE TYPE fencing.forged AS (a int)$$),
	($$CREATE DOMAIN fencing.forged_d AS bigint$$),
	($$CREATE OPERATOR fencing.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = int8eq)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- switching triggers off (which would let a restore-style insert pass
-- without a band jump) needs a superuser
SELECT q, r.* FROM (VALUES
	($$SET session_replication_role = replica$$),
	($$SELECT set_config('session_replication_role', 'replica', true)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- the functions still work for the role, on its own lease only
SELECT fencing.lease_renew('sec_f_app', :t_app, '10 min') AS own_renewed,
	   fencing.lease_acquire('sec_f_su', 'app', '10 min') IS NULL AS superusers_lease_refused;
RESET ROLE;

-- nothing was forged, rewound or stolen
SELECT name, holder,
	   CASE WHEN holder_role = current_user::regrole THEN '(superuser)'
			ELSE holder_role::text END AS holder_role,
	   state, token = CASE name WHEN 'sec_f_su' THEN :t_su ELSE :t_app END AS token_unchanged,
	   acquires, renewals
  FROM fencing.lease_status WHERE name LIKE 'sec\_f\_%' ORDER BY name;
-- the GRANT and REVOKE above "succeeded" with a warning and did nothing
SELECT has_schema_privilege('regress_sec_forge', 'fencing', 'CREATE') AS forge_may_create,
	   has_function_privilege('public', 'fencing.lease_acquire(text, text, interval, interval)',
							  'EXECUTE') AS public_may_still_acquire;
SELECT count(*) AS forged_rows FROM fencing.leases WHERE name = 'sec_f_forged';
SELECT fencing.next_token() > :t_app AS counter_moved_forward_only;
SELECT pg_get_userbyid(c.relowner) = current_user AS owner_unchanged,
	   c.relacl IS NOT NULL AS acl_kept,
	   (SELECT count(*) FROM pg_trigger WHERE tgrelid = c.oid AND NOT tgisinternal) AS triggers
  FROM pg_class AS c WHERE c.oid = 'fencing.leases'::regclass;
SELECT count(*) AS objects_in_schema_fencing_not_from_the_extension
  FROM pg_depend AS d RIGHT JOIN pg_class AS c ON d.classid = 'pg_class'::regclass
	   AND d.objid = c.oid AND d.deptype = 'e'
 WHERE c.relnamespace = 'fencing'::regnamespace AND d.objid IS NULL
   AND c.relkind IN ('r', 'S', 'v');

-- Issue 23, item 12 (superuser only): fencing._leases_restored() attached
-- to another table, or fired otherwise than BEFORE ROW INSERT or UPDATE on
-- fencing.leases, refuses to fire (39P01) before it reads the row: a
-- "token" column of another table (a float8 NaN, a huge bigint) never
-- becomes the token floor.
CREATE TABLE sec_f_tokens (token float8);
CREATE TABLE sec_f_big (token bigint);
CREATE TABLE sec_f_after (token bigint);
INSERT INTO sec_f_big VALUES (1);
CREATE TRIGGER leases_restored BEFORE INSERT ON sec_f_tokens
	FOR EACH ROW EXECUTE FUNCTION fencing._leases_restored();
CREATE TRIGGER leases_restored BEFORE INSERT OR UPDATE ON sec_f_big
	FOR EACH ROW EXECUTE FUNCTION fencing._leases_restored();
CREATE TRIGGER leases_restored AFTER INSERT ON sec_f_after
	FOR EACH ROW EXECUTE FUNCTION fencing._leases_restored();
SELECT q, r.* FROM (VALUES
	($$INSERT INTO sec_f_tokens VALUES ('NaN')$$),
	($$INSERT INTO sec_f_tokens VALUES ('9.2e18')$$),
	($$INSERT INTO sec_f_big VALUES (9223372036854775000)$$),
	($$UPDATE sec_f_big SET token = 9223372036854775000$$),
	($$INSERT INTO sec_f_after VALUES (9223372036854775000)$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT fencing.next_token() < 9000000000000000000 AS no_floor_taken;
DROP TABLE sec_f_tokens, sec_f_big, sec_f_after;

-- every case, and any refused case that changed something
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes(ARRAY['unchanged']);

SELECT fencing.lease_release('sec_f_su', :t_su) AS released_su,
	   fencing.lease_release('sec_f_app', :t_app) AS released_app;
REVOKE USAGE ON SCHEMA fencing FROM regress_sec_forge;
DROP ROLE regress_sec_forge;
