--
-- Leader election: election_campaign, election_proclaim, election_leader,
-- election_observe, election_resign.  An election is a lease of kind
-- "election" whose holder leads; it is renewed and checked with the lease
-- functions, and its token fences the leader's writes.  The wake-ups of
-- observers are in specs/election_observe.spec.
--
\i sql/include/case_harness.sql
\set VERBOSITY default
CREATE FUNCTION pg_temp.leader(e text)
RETURNS TABLE (candidate text, value text, has_token boolean, since_ok boolean,
			   expires_ok boolean)
LANGUAGE sql AS $$
	SELECT candidate, value, token IS NOT NULL,
		   since <= clock_timestamp(), expires_at > since
	  FROM fencing.election_leader(e)
$$;
-- wait (on a condition, not a duration) until an election has no leader
CREATE FUNCTION pg_temp.wait_no_leader(e text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	WHILE (SELECT token FROM fencing.election_leader(e)) IS NOT NULL LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;

-- no election yet: one row of NULLs
SELECT * FROM fencing.election_leader('el_a');

-- the first candidate leads and publishes its value; the next one gets NULL
SELECT fencing.election_campaign('el_a', 'node-1', 'host-1:5432', '1 min') AS t1 \gset
SELECT * FROM pg_temp.leader('el_a');
SELECT token = :t1 AS is_t1 FROM fencing.election_leader('el_a');
SELECT fencing.election_campaign('el_a', 'node-2', 'host-2:5432', '1 min') IS NULL AS node2_refused;
SELECT name, kind, slots, holder, value, state FROM fencing.lease_status WHERE name = 'el_a';

-- leadership is a lease: renewed and checked with the lease functions;
-- the leader's token fences its writes
SELECT fencing.lease_renew('el_a', :t1, '2 min') AS renewed,
	   fencing.lease_lock('el_a', :t1) AS checked;
CREATE TABLE el_res (id int PRIMARY KEY, v text, fence bigint);
INSERT INTO el_res VALUES (1, 'none', NULL);
UPDATE el_res SET v = 'by node-1', fence = fencing.fence_advance(fence, :t1) WHERE id = 1;

-- proclaim: the leader publishes a new value; a stale token is refused
SELECT fencing.election_proclaim('el_a', :t1, 'host-1:6432') AS proclaimed;
SELECT * FROM pg_temp.leader('el_a');
SELECT fencing.election_proclaim('el_a', :t1 - 1, 'stale') AS stale_proclaimed;
SELECT value FROM fencing.election_leader('el_a');

-- observe, without waiting: the leadership as it is
SELECT candidate, value, token = :t1 AS is_t1
  FROM fencing.election_observe('el_a', :t1, 'host-1:6432', '0');
-- a known state that differs in token, in value or in having a leader
-- returns at once, even with a wait: what the caller saw may be older than
-- several changes
SELECT candidate, value FROM fencing.election_observe('el_a', :t1, 'host-1:5432', '1 min');
SELECT candidate, value FROM fencing.election_observe('el_a', :t1 - 1, 'host-1:6432', '1 min');
SELECT candidate, value FROM fencing.election_observe('el_a', NULL, NULL, '1 min');
-- unchanged: returned when the wait runs out
SELECT candidate, value, token = :t1 AS is_t1
  FROM fencing.election_observe('el_a', :t1, 'host-1:6432', '10 ms');

-- the same candidate campaigning again gets a new token and publishes its
-- new value; the old token is stale
SELECT fencing.election_campaign('el_a', 'node-1', 'host-1:7432', '1 min') AS t1b \gset
SELECT :t1b > :t1 AS newer, value FROM fencing.election_leader('el_a');
SELECT fencing.election_proclaim('el_a', :t1, 'old') AS old_token_proclaims,
	   fencing.election_resign('el_a', :t1) AS old_token_resigns;
SELECT reason, successor = :t1b AS successor_t1b FROM fencing.lease_watch('el_a', :t1);

-- resign: no leader at once; the next candidate campaigns and leads
SELECT fencing.election_resign('el_a', :t1b) AS resigned;
SELECT fencing.election_resign('el_a', :t1b) AS resigned_again;
SELECT * FROM fencing.election_leader('el_a');
SELECT fencing.election_campaign('el_a', 'node-2', 'host-2:5432', '50 ms') AS t2 \gset
SELECT candidate, value, token = :t2 AS is_t2 FROM fencing.election_leader('el_a');
-- node-1's old writes are fenced off by node-2's
UPDATE el_res SET v = 'by node-2', fence = fencing.fence_advance(fence, :t2) WHERE id = 1;
\set VERBOSITY sqlstate
UPDATE el_res SET v = 'late node-1', fence = fencing.fence_advance(fence, :t1) WHERE id = 1;
\set VERBOSITY default
SELECT v, fence = :t2 AS fenced_by_t2 FROM el_res;

-- an expired leader is no leader; it cannot proclaim
SELECT pg_temp.wait_no_leader('el_a');
SELECT * FROM fencing.election_leader('el_a');
SELECT fencing.election_proclaim('el_a', :t2, 'late') AS expired_proclaims;
SELECT name, holder, value, state FROM fencing.lease_status WHERE name = 'el_a';

-- a candidate waits for the leader to go, in arrival order like
-- lease_acquire: here until node-3's short lease expires
SELECT fencing.election_campaign('el_b', 'node-3', 'v3', '100 ms') AS t3 \gset
SELECT fencing.election_campaign('el_b', 'node-4', 'v4', '1 min', wait => '1 min') > :t3 AS node4_leads;
SELECT candidate, value FROM fencing.election_leader('el_b');

-- roles: only the role that campaigned may proclaim and resign (42501),
-- as for renew and release; members of fencing_admin act as the leader
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_admin')
	   AS admin_created_here \gset
\if :admin_created_here
CREATE ROLE fencing_admin NOLOGIN;
\endif
CREATE ROLE regress_el_a NOLOGIN;
CREATE ROLE regress_el_b NOLOGIN;
CREATE ROLE regress_el_ops NOLOGIN IN ROLE fencing_admin;
GRANT USAGE ON SCHEMA fencing TO regress_el_a, regress_el_b, regress_el_ops;
SET ROLE regress_el_a;
SELECT fencing.election_campaign('el_roles', 'node-a', 'va', '1 min') AS ta \gset
RESET ROLE;
SET ROLE regress_el_b;
-- another role, same candidate name: another candidate, not the leader
SELECT fencing.election_campaign('el_roles', 'node-a', 'vb', '1 min') IS NULL AS b_refused;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.election_proclaim('el_roles', (SELECT token FROM fencing.lease_status WHERE name = 'el_roles'), 'by b')$$),
	($$SELECT fencing.election_resign('el_roles', (SELECT token FROM fencing.lease_status WHERE name = 'el_roles'))$$),
	-- reading is anyone's
	($$SELECT candidate || ' ' || value FROM fencing.election_leader('el_roles')$$),
	($$SELECT candidate FROM fencing.election_observe('el_roles', NULL, NULL, '0')$$),
	($$SELECT reason FROM fencing.lease_watch('el_roles', (SELECT token FROM fencing.lease_status WHERE name = 'el_roles'))$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
SET ROLE regress_el_ops;
SELECT fencing.election_proclaim('el_roles', :ta, 'by ops') AS ops_proclaimed;
SELECT fencing.election_resign('el_roles', :ta) AS ops_resigned;
RESET ROLE;
SELECT name, holder, holder_role::text, value, state FROM fencing.lease_status WHERE name = 'el_roles';
REVOKE USAGE ON SCHEMA fencing FROM regress_el_a, regress_el_b, regress_el_ops;
DROP ROLE regress_el_a, regress_el_b, regress_el_ops;
\if :admin_created_here
DROP ROLE fencing_admin;
\endif

-- names shared between kinds (LF021): an election is no lease and no
-- semaphore while it is held, and the reverse; a free name may become
-- either
SELECT fencing.election_campaign('el_kind', 'node-1', 'v', '1 min') AS tk \gset
SELECT fencing.lease_acquire('el_lease', 'x', '1 min') AS tl \gset
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('el_kind', 'node-1', '1 min')$$),
	($$SELECT fencing.semaphore_acquire('el_kind', 'node-9', 2, '1 min')$$),
	($$SELECT fencing.election_campaign('el_lease', 'x', 'v', '1 min')$$),
	($$SELECT fencing.election_campaign('el_lease', 'x', 'v', '1 min', wait => '1 min')$$),
	($$SELECT fencing.election_proclaim('el_lease', (SELECT token FROM fencing.lease_status WHERE name = 'el_lease'), 'v')$$),
	($$SELECT fencing.election_resign('el_lease', (SELECT token FROM fencing.lease_status WHERE name = 'el_lease'))$$),
	($$SELECT candidate FROM fencing.election_leader('el_lease')$$),
	($$SELECT candidate FROM fencing.election_observe('el_lease', NULL, NULL, '1 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT fencing.lease_release('el_lease', :tl) AS released;
SELECT * FROM fencing.election_leader('el_lease');
SELECT fencing.election_campaign('el_lease', 'x', 'now an election', '1 min') IS NOT NULL AS campaigned;
SELECT name, kind, holder, value FROM fencing.lease_status WHERE name = 'el_lease';

-- bad input: a clear error, and nothing changes
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.election_campaign(NULL, 'c', 'v', '1 min')$$),
	($$SELECT fencing.election_campaign('el_bad', NULL, 'v', '1 min')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', NULL, '1 min')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', 'v', NULL)$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '1 min', NULL)$$),
	($$SELECT fencing.election_campaign('', 'c', 'v', '1 min')$$),
	($$SELECT fencing.election_campaign('el_bad', '', 'v', '1 min')$$),
	($$SELECT fencing.election_campaign(repeat('n', 257), 'c', 'v', '1 min')$$),
	($$SELECT fencing.election_campaign('el_bad', repeat('c', 257), 'v', '1 min')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', repeat('v', 8193), '1 min')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '0')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '-1 s')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '2 days')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '1 min', '-1 s')$$),
	($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '1 min', '2 days')$$),
	($$SELECT fencing.election_proclaim(NULL, 1, 'v')$$),
	($$SELECT fencing.election_proclaim('el_a', NULL, 'v')$$),
	($$SELECT fencing.election_proclaim('el_a', 1, NULL)$$),
	($$SELECT fencing.election_proclaim('el_a', 0, 'v')$$),
	($$SELECT fencing.election_proclaim('el_a', -1, 'v')$$),
	($$SELECT fencing.election_proclaim('', 1, 'v')$$),
	($$SELECT fencing.election_proclaim('el_kind', (SELECT token FROM fencing.lease_status WHERE name = 'el_kind'), repeat('v', 8193))$$),
	($$SELECT fencing.election_resign(NULL, 1)$$),
	($$SELECT fencing.election_resign('el_a', NULL)$$),
	($$SELECT fencing.election_resign('el_a', 0)$$),
	($$SELECT fencing.election_resign(repeat('n', 257), 1)$$),
	($$SELECT candidate FROM fencing.election_leader(NULL)$$),
	($$SELECT candidate FROM fencing.election_leader('')$$),
	($$SELECT candidate FROM fencing.election_observe(NULL, NULL, NULL, '0')$$),
	($$SELECT candidate FROM fencing.election_observe('el_a', 0, NULL, '0')$$),
	($$SELECT candidate FROM fencing.election_observe('el_a', NULL, repeat('v', 8193), '0')$$),
	($$SELECT candidate FROM fencing.election_observe('el_a', NULL, NULL, NULL)$$),
	($$SELECT candidate FROM fencing.election_observe('el_a', NULL, NULL, '-1 s')$$),
	($$SELECT candidate FROM fencing.election_observe('el_a', NULL, NULL, '2 days')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
-- exactly 8192 bytes is a value
SELECT fencing.election_proclaim('el_kind', :tk, repeat('v', 8192)) AS proclaimed_8192;
SELECT octet_length(value) FROM fencing.election_leader('el_kind');

-- read-only transactions refuse the writing calls (25006); reading works
BEGIN TRANSACTION READ ONLY;
SELECT r.* FROM pg_temp.run($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '1 min')$$) AS r;
SELECT r.* FROM pg_temp.run($$SELECT fencing.election_proclaim('el_kind', $$ || :tk || $$, 'v')$$) AS r;
SELECT r.* FROM pg_temp.run($$SELECT fencing.election_resign('el_kind', $$ || :tk || $$)$$) AS r;
SELECT candidate FROM fencing.election_leader('el_kind');
SELECT candidate FROM fencing.election_observe('el_kind', NULL, NULL, '0');
ROLLBACK;

-- REPEATABLE READ: waiting needs fresh snapshots (0A000); without a wait
-- every call works
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT r.* FROM pg_temp.run($$SELECT fencing.election_campaign('el_bad', 'c', 'v', '1 min', wait => '1 s')$$) AS r;
SELECT r.* FROM pg_temp.run($$SELECT candidate FROM fencing.election_observe('el_kind', NULL, NULL, '1 s')$$) AS r;
SELECT candidate FROM fencing.election_observe('el_kind', NULL, NULL, '0');
SELECT fencing.election_proclaim('el_kind', :tk, 'in rr') AS rr_proclaimed;
SELECT value FROM fencing.election_leader('el_kind');
COMMIT;

\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();

DROP TABLE el_res;
DELETE FROM fencing.leases WHERE name LIKE 'el\_%';
