--
-- A candidate is its role and its name: election_leader and
-- election_observe name both (candidate_role, candidate), so that
-- followers can tell another role that campaigns under the same candidate
-- name, once the election is free, from the candidate they knew
-- (docs/security.md).
--
CREATE ROLE regress_elr_a NOLOGIN;
CREATE ROLE regress_elr_b NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_elr_a, regress_elr_b;

-- the columns, in order
SELECT p.proname, pg_catalog.array_to_string(p.proargnames, ', ') AS args
  FROM pg_catalog.pg_proc AS p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('election_leader', 'election_observe')
 ORDER BY p.proname;

SET ROLE regress_elr_a;
SELECT fencing.election_campaign('elr', 'node-1', 'host-1:8080', '1 min') AS ta \gset
SELECT candidate, candidate_role, value, token = :ta AS is_ta
  FROM fencing.election_leader('elr');
SELECT candidate, candidate_role, value
  FROM fencing.election_observe('elr', NULL, NULL, '0');
SELECT fencing.election_resign('elr', :ta) AS a_resigned;
-- no leader: the role is NULL with the rest
SELECT candidate, candidate_role, value, token FROM fencing.election_leader('elr');
RESET ROLE;

-- another role, the same candidate name: followers see whose it is
SET ROLE regress_elr_b;
SELECT fencing.election_campaign('elr', 'node-1', 'evil:8080', '1 min') AS tb \gset
RESET ROLE;
SELECT candidate, candidate_role, value, token = :tb AS is_tb
  FROM fencing.election_leader('elr');
-- an observer that knew (ta, host-1:8080) is told of the new leader and its role
SELECT candidate, candidate_role, value
  FROM fencing.election_observe('elr', :ta, 'host-1:8080', '1 min');
SELECT candidate_role = holder_role::regrole::name AS as_lease_status
  FROM fencing.election_leader('elr'), fencing.lease_status
 WHERE name = 'elr';

-- a dropped role's leader: the role is NULL, the rest stays
SELECT fencing.lease_force_release('elr') AS freed;
CREATE ROLE regress_elr_gone NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_elr_gone;
SET ROLE regress_elr_gone;
SELECT fencing.election_campaign('elr', 'node-9', 'v9', '1 min') IS NOT NULL AS gone_leads;
RESET ROLE;
REVOKE USAGE ON SCHEMA fencing FROM regress_elr_gone;
DROP ROLE regress_elr_gone;
SELECT candidate, candidate_role IS NULL AS role_null, value
  FROM fencing.election_leader('elr');
SELECT fencing.lease_force_release('elr') AS freed;

REVOKE USAGE ON SCHEMA fencing FROM regress_elr_a, regress_elr_b;
DROP ROLE regress_elr_a, regress_elr_b;
