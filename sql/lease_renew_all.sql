--
-- Group keepalive: lease_renew_all(names, tokens, ttl) renews each lease
-- with its own token and reports each on its own row, in name order.
-- Bad input fails the whole call and changes nothing, whatever the arrays
-- hold; so does another role's lease (42501); members of fencing_admin act
-- as the holder.  A token from before the current band (LF005 for
-- lease_renew) is reported on its own row, not renewed.
--
SELECT fencing.lease_acquire('ra_1', 'node', '1 min') AS t1 \gset
SELECT fencing.lease_acquire('ra_2', 'node', '1 min') AS t2 \gset
SELECT fencing.lease_acquire('ra_3', 'node', '1 min') AS t3 \gset
CREATE FUNCTION pg_temp.renewals() RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(name || '=' || renewals, ' ' ORDER BY name)
	  FROM fencing.lease_status WHERE name LIKE 'ra\_%'
$$;

-- every lease renewed, each by its token, rows in name order
SELECT name, token = CASE name WHEN 'ra_1' THEN :t1 WHEN 'ra_2' THEN :t2 ELSE :t3 END AS own_token,
	   renewed
  FROM fencing.lease_renew_all(ARRAY['ra_3', 'ra_1', 'ra_2'], ARRAY[:t3, :t1, :t2], '10 min');
SELECT pg_temp.renewals();
SELECT bool_and(expires_at > now() + interval '9 min') AS extended
  FROM fencing.lease_status WHERE name LIKE 'ra\_%';

-- a stale token is reported for its lease only; an unknown lease too
SELECT name, renewed
  FROM fencing.lease_renew_all(ARRAY['ra_1', 'ra_2', 'ra_none'], ARRAY[:t1, :t2 + 1000000, 5], '10 min');
SELECT pg_temp.renewals();

-- empty arrays: nothing to do
SELECT count(*) FROM fencing.lease_renew_all('{}', '{}', '1 min');

-- bad input: an error, and nothing renewed
\set VERBOSITY terse
SELECT * FROM fencing.lease_renew_all(NULL, ARRAY[:t1], '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1'], NULL, '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1'], ARRAY[:t1], NULL);
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1', 'ra_2'], ARRAY[:t1], '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY[['ra_1'], ['ra_2']], ARRAY[[:t1], [:t2]], '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1', NULL], ARRAY[:t1, :t2], '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1', 'ra_2'], ARRAY[:t1, NULL], '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1', ''], ARRAY[:t1, :t2], '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1', 'ra_2'], ARRAY[:t1, 0], '1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1'], ARRAY[:t1], '0');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1'], ARRAY[:t1], '-1 min');
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_1'], ARRAY[:t1], '2 days');
SELECT * FROM fencing.lease_renew_all(array_fill('ra_1'::text, ARRAY[10001]),
									  array_fill(:t1::bigint, ARRAY[10001]), '1 min');
-- the TTL is checked whatever the arrays hold: empty ones too
SELECT * FROM fencing.lease_renew_all('{}', '{}', '-1 s');
SELECT * FROM fencing.lease_renew_all('{}', '{}', '0');
SELECT * FROM fencing.lease_renew_all('{}', '{}', '2 days');
SELECT * FROM fencing.lease_renew_all(ARRAY[]::text[], ARRAY[]::bigint[], NULL);
\set VERBOSITY default
SELECT pg_temp.renewals() AS unchanged;

-- roles: another role's lease fails the whole call and renews nothing
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_admin')
	   AS admin_created_here \gset
\if :admin_created_here
CREATE ROLE fencing_admin NOLOGIN;
\endif
CREATE ROLE regress_ra_a NOLOGIN;
CREATE ROLE regress_ra_b NOLOGIN;
CREATE ROLE regress_ra_ops NOLOGIN IN ROLE fencing_admin;
GRANT USAGE ON SCHEMA fencing TO regress_ra_a, regress_ra_b, regress_ra_ops;
SET ROLE regress_ra_a;
SELECT fencing.lease_acquire('ra_a', 'node', '1 min') AS ta \gset
RESET ROLE;
SET ROLE regress_ra_b;
SELECT fencing.lease_acquire('ra_b', 'node', '1 min') AS tb \gset
-- B with A's token, among its own lease: refused, B's own not renewed
\set VERBOSITY terse
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_b', 'ra_a'], ARRAY[:tb, :ta], '10 min');
\set VERBOSITY default
RESET ROLE;
SELECT pg_temp.renewals() AS none_renewed;
-- A renews its own
SET ROLE regress_ra_a;
SELECT name, renewed FROM fencing.lease_renew_all(ARRAY['ra_a'], ARRAY[:ta], '10 min');
RESET ROLE;
-- a fencing_admin member acts as each holder
SET ROLE regress_ra_ops;
SELECT name, renewed FROM fencing.lease_renew_all(ARRAY['ra_a', 'ra_b'], ARRAY[:ta, :tb], '10 min');
RESET ROLE;
SELECT pg_temp.renewals() AS after_roles;
SELECT name, holder_role::text FROM fencing.lease_status WHERE name IN ('ra_a', 'ra_b') ORDER BY name;

-- a token from before the current band (as after a failover: here a new
-- band entered by hand) is not renewed, and reported on its row; the other
-- leases of the call are renewed
SET ROLE regress_ra_a;
SELECT fencing.lease_acquire('ra_old', 'node', '1 min') AS told \gset
RESET ROLE;
SELECT fencing.advance_tokens();
SET ROLE regress_ra_a;
SELECT fencing.lease_acquire('ra_new', 'node', '1 min') AS tnew \gset
SELECT name, token = :told AS old_token, renewed
  FROM fencing.lease_renew_all(ARRAY['ra_new', 'ra_old'], ARRAY[:tnew, :told], '10 min');
RESET ROLE;
SELECT name, renewals, expires_at > now() + interval '9 min' AS extended
  FROM fencing.lease_status WHERE name IN ('ra_old', 'ra_new') ORDER BY name;
-- lease_renew refuses it as an error, and renews nothing either
SET ROLE regress_ra_a;
\set VERBOSITY sqlstate
SELECT fencing.lease_renew('ra_old', :told, '10 min');
-- another role's lease is refused (42501) first, old band or not
RESET ROLE;
SET ROLE regress_ra_b;
\set VERBOSITY terse
SELECT * FROM fencing.lease_renew_all(ARRAY['ra_old'], ARRAY[:told], '10 min');
\set VERBOSITY default
RESET ROLE;
SELECT name, renewals FROM fencing.lease_status WHERE name IN ('ra_old', 'ra_new') ORDER BY name;

DELETE FROM fencing.leases WHERE name LIKE 'ra\_%';
REVOKE USAGE ON SCHEMA fencing FROM regress_ra_a, regress_ra_b, regress_ra_ops;
DROP ROLE regress_ra_a, regress_ra_b, regress_ra_ops;
\if :admin_created_here
DROP ROLE fencing_admin;
\endif
