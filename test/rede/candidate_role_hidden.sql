-- test/rede: a candidate is (role, name) (docs/security.md: "the same
-- candidate name from another role is another candidate"), but
-- election_leader and election_observe return the candidate's name only.
-- Any role with USAGE may campaign under another role's candidate name
-- once the election is free, and followers see exactly what they saw for
-- the real candidate: the same name, a value of the impostor's choosing.
-- Expected: the leader's role in election_leader / election_observe (as
-- lease_status shows holder_role), or docs that say followers must not
-- trust the candidate name.  Low: reported as a doc/API gap.
SET ROLE app;
SELECT fencing.election_campaign('rede_who', 'node-1', 'host-1:8080', '1 hour') AS t \gset
SELECT * FROM fencing.election_leader('rede_who') \gset real_
SELECT fencing.election_resign('rede_who', :t);
SET ROLE app2;
SELECT fencing.election_campaign('rede_who', 'node-1', 'evil:8080', '1 hour') AS t2 \gset
SELECT candidate, value FROM fencing.election_leader('rede_who');
RESET ROLE;
SELECT name, holder, holder_role FROM fencing.lease_status WHERE name = 'rede_who';
\set ON_ERROR_STOP 1
SELECT CASE WHEN candidate = :'real_candidate' THEN 'BUG: another role leads as candidate ' || candidate || ', indistinguishable in election_leader' END AS problem
  FROM fencing.election_leader('rede_who');
DO $$ BEGIN
  IF (SELECT candidate FROM fencing.election_leader('rede_who')) = 'node-1'
     AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                      WHERE p.proname = 'election_leader'
                        AND 'role' = ANY (p.proargnames)) THEN
    RAISE EXCEPTION 'BUG: election_leader hides which role leads';
  END IF;
END $$;
SELECT fencing.lease_force_release('rede_who');
