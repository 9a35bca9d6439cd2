--
-- The election recipes for River's river_leader and Oban's oban_peers
-- (examples/elections/), with each queue's own statements as it runs them
-- (River's sqlc queries, Oban's as Ecto renders them; parameters written
-- as literals).  Each story runs twice: on the table as the queue makes it
-- (schema *_plain: what goes wrong) and on the table with the recipe's
-- trigger (schema public: what the recipe changes).
--
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET client_min_messages = warning;
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
CREATE TABLE recipe_resource (id int PRIMARY KEY, body text, fence bigint);
INSERT INTO recipe_resource VALUES (1, 'empty', NULL);

-- ---- River ---------------------------------------------------------------
CREATE SCHEMA river_plain;
SET search_path = river_plain;
\i examples/elections/river/schema.sql
RESET search_path;
\i examples/elections/river/schema.sql
\i examples/elections/river/install.sql

-- the story on River's own table: client A is elected (LeaderDeleteExpired,
-- LeaderAttemptElect), B is not
DELETE FROM river_plain.river_leader WHERE expires_at < coalesce(NULL::timestamptz, now());
INSERT INTO river_plain.river_leader (leader_id, elected_at, expires_at)
VALUES ('A', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id;
INSERT INTO river_plain.river_leader (leader_id, elected_at, expires_at)
VALUES ('B', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id;
-- the server crashes: crash recovery empties an UNLOGGED table (a promoted
-- standby has it empty too); A still trusts its term (River: until its
-- last election's start + TTL - 1 s)
TRUNCATE river_plain.river_leader;
-- B's next round is elected at once: two clients lead
DELETE FROM river_plain.river_leader WHERE expires_at < coalesce(NULL::timestamptz, now());
INSERT INTO river_plain.river_leader (leader_id, elected_at, expires_at)
VALUES ('B', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id AS b_elected_too;

-- the same with the recipe: A is elected, with the lease's since as its
-- term, and a token
DELETE FROM river_leader WHERE expires_at < coalesce(NULL::timestamptz, now());
INSERT INTO river_leader (leader_id, elected_at, expires_at)
VALUES ('A', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id, elected_at AS a_elected_at \gset
SELECT :'leader_id' AS elected, e.candidate, e.since = :'a_elected_at' AS same_term,
	   e.expires_at - e.since AS ttl
  FROM fencing.election_leader('public.river_leader') AS e;
-- A's token, for its leader-only work, read once at the start of its term
SELECT token AS a_token FROM fencing.election_leader('public.river_leader') WHERE candidate = 'A' \gset
UPDATE recipe_resource SET body = 'by A', fence = fencing.fence_advance(fence, :a_token) WHERE id = 1;
INSERT INTO river_leader (leader_id, elected_at, expires_at)
VALUES ('B', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id AS b_elected;
-- LeaderAttemptReelect of A's term renews its lease
UPDATE river_leader
SET expires_at = coalesce(NULL::timestamptz, now()) + make_interval(secs => 10)
WHERE elected_at = :'a_elected_at'::timestamptz
	AND expires_at >= coalesce(NULL::timestamptz, now())
	AND leader_id = 'A'
RETURNING leader_id AS reelected, expires_at = (SELECT expires_at FROM fencing.election_leader('public.river_leader')) AS lease_expiry;
-- the crash empties the table: B is still not elected; the lease says A leads
TRUNCATE river_leader;
INSERT INTO river_leader (leader_id, elected_at, expires_at)
VALUES ('B', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id AS b_elected_after_crash;
SELECT candidate FROM fencing.election_leader('public.river_leader');
-- A's re-election finds no row (River steps down); its next election gets
-- its term back, renewed
UPDATE river_leader
SET expires_at = coalesce(NULL::timestamptz, now()) + make_interval(secs => 10)
WHERE elected_at = :'a_elected_at'::timestamptz
	AND expires_at >= coalesce(NULL::timestamptz, now())
	AND leader_id = 'A'
RETURNING leader_id AS reelected_after_crash;
INSERT INTO river_leader (leader_id, elected_at, expires_at)
VALUES ('A', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id AS a_back, elected_at = :'a_elected_at' AS same_term;
-- A freezes past its TTL; B's rounds elect it once the lease expired (by
-- the server's clock), with a new term and a larger token.  (Here A's
-- lease is cut to 100 ms first, so as not to wait out its 10 s.)
SELECT fencing.lease_renew('public.river_leader', :a_token, '100 ms') AS cut;
SELECT pg_temp.wait_no_leader('public.river_leader');
DELETE FROM river_leader WHERE expires_at < coalesce(NULL::timestamptz, now());
INSERT INTO river_leader (leader_id, elected_at, expires_at)
VALUES ('B', coalesce(NULL::timestamptz, now()), coalesce(NULL::timestamptz, now()) + make_interval(secs => 10))
ON CONFLICT (name) DO NOTHING RETURNING leader_id AS b_elected, elected_at AS b_elected_at \gset
SELECT :'b_elected' AS b_elected, token > :a_token AS larger_token
  FROM fencing.election_leader('public.river_leader');
SELECT token AS b_token FROM fencing.election_leader('public.river_leader') WHERE candidate = 'B' \gset
UPDATE recipe_resource SET body = 'by B', fence = fencing.fence_advance(fence, :b_token) WHERE id = 1;
-- A wakes: its re-election is refused, lease_watch says why, and its
-- leader-only write, already on its way, is refused by the resource
UPDATE river_leader
SET expires_at = coalesce(NULL::timestamptz, now()) + make_interval(secs => 10)
WHERE elected_at = :'a_elected_at'::timestamptz
	AND expires_at >= coalesce(NULL::timestamptz, now())
	AND leader_id = 'A'
RETURNING leader_id AS a_reelected_late;
SELECT reason, successor = :b_token AS successor_is_b FROM fencing.lease_watch('public.river_leader', :a_token);
\set VERBOSITY sqlstate
UPDATE recipe_resource SET body = 'late A', fence = fencing.fence_advance(fence, :a_token) WHERE id = 1;
\set VERBOSITY terse
SELECT body, fence = :b_token AS fenced_by_b FROM recipe_resource;
-- LeaderGetElectedLeader, then LeaderResign of B's term: the lease is
-- released at once
SELECT leader_id, elected_at = :'b_elected_at' AS b_term FROM river_leader;
WITH currently_held_leaders AS (
    SELECT *
    FROM river_leader
    WHERE
        elected_at = :'b_elected_at'::timestamptz
        AND leader_id = 'B'::text
    FOR UPDATE
),
notified_resignations AS (
    SELECT pg_notify(
        concat(coalesce(NULL::text, current_schema()), '.', 'river_leadership'::text),
        json_build_object('leader_id', leader_id, 'action', 'resigned')::text
    )
    FROM currently_held_leaders
)
DELETE FROM river_leader USING notified_resignations;
SELECT * FROM fencing.election_leader('public.river_leader');
SELECT reason FROM fencing.lease_watch('public.river_leader', :b_token);
SELECT count(*) AS rows_left FROM river_leader;

-- ---- Oban ----------------------------------------------------------------
CREATE SCHEMA oban_plain;
SET search_path = oban_plain;
\i examples/elections/oban/schema.sql
RESET search_path;
\i examples/elections/oban/schema.sql
\i examples/elections/oban/install.sql
-- a TTL of 10 s here, not Oban's 30
DROP TRIGGER oban_peers_fencing ON oban_peers;
CREATE TRIGGER oban_peers_fencing BEFORE INSERT OR UPDATE ON oban_peers
	FOR EACH ROW EXECUTE FUNCTION oban_peers_fencing('10 s');
-- each node's clock (Oban computes started_at and expires_at, and judges
-- expiry, with DateTime.utc_now() of the node that runs the statement)
SELECT now() AT TIME ZONE 'UTC' AS t0 \gset

-- The story of oban#1488 on Oban's own table, with 2.23.0's statements:
-- node A is elected
DELETE FROM "oban_plain"."oban_peers" AS o0 WHERE ((o0."name" = 'Oban') AND (o0."expires_at" < :'t0'));
INSERT INTO "oban_plain"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '30 s', 'Oban', 'a', :'t0') ON CONFLICT ("name") DO NOTHING;
\echo a_inserted :ROW_COUNT
-- A's election rounds fail for a while (it keeps leader? = true in 2.23.0);
-- 40 s later its row has expired by B's clock: B deletes it and is elected
DELETE FROM "oban_plain"."oban_peers" AS o0 WHERE ((o0."name" = 'Oban') AND (o0."expires_at" < :'t0'::timestamp + interval '40 s'));
INSERT INTO "oban_plain"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '70 s', 'Oban', 'b', :'t0'::timestamp + interval '40 s') ON CONFLICT ("name") DO NOTHING;
\echo b_inserted :ROW_COUNT
-- A's next round as leader renews "whichever row it found": B's
INSERT INTO "oban_plain"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '75 s', 'Oban', 'a', :'t0'::timestamp + interval '45 s') ON CONFLICT ("name") DO UPDATE SET "expires_at" = :'t0'::timestamp + interval '75 s';
\echo a_still_leader :ROW_COUNT
SELECT node FROM "oban_plain"."oban_peers" AS o0 WHERE (o0."name" = 'Oban');

-- the same with the recipe: A is elected
DELETE FROM "public"."oban_peers" AS o0 WHERE ((o0."name" = 'Oban') AND (o0."expires_at" < :'t0'));
INSERT INTO "public"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '30 s', 'Oban', 'a', :'t0') ON CONFLICT ("name") DO NOTHING;
\echo a_inserted :ROW_COUNT
SELECT candidate, token AS oa_token FROM fencing.election_leader('public.oban_peers:Oban') \gset
SELECT :'candidate' AS leader, started_at = (SELECT since AT TIME ZONE 'UTC' FROM fencing.election_leader('public.oban_peers:Oban')) AS started_at_is_since
  FROM oban_peers;
-- B's clock runs 40 s ahead: its delete_expired removes A's row, but its
-- insert is refused (counts 0): by the server's clock A leads
DELETE FROM "public"."oban_peers" AS o0 WHERE ((o0."name" = 'Oban') AND (o0."expires_at" < :'t0'::timestamp + interval '40 s'));
INSERT INTO "public"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '70 s', 'Oban', 'b', :'t0'::timestamp + interval '40 s') ON CONFLICT ("name") DO NOTHING;
\echo b_inserted :ROW_COUNT
-- A's round (2.23.1's statement) renews its lease, and puts its row back
INSERT INTO "public"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '30 s', 'Oban', 'a', :'t0') ON CONFLICT ("name") DO UPDATE SET "expires_at" = :'t0'::timestamp + interval '30 s' WHERE (o0."node" = 'a');
\echo a_renewed :ROW_COUNT
SELECT node, expires_at = (SELECT expires_at AT TIME ZONE 'UTC' FROM fencing.election_leader('public.oban_peers:Oban')) AS expiry_is_lease
  FROM oban_peers;
-- A's rounds fail until its lease expires (cut to 100 ms here); B is
-- elected; A's next round as leader (2.23.0's statement, no WHERE) counts
-- 0: A steps down
SELECT fencing.lease_renew('public.oban_peers:Oban', :oa_token, '100 ms') AS cut;
SELECT pg_temp.wait_no_leader('public.oban_peers:Oban');
DELETE FROM "public"."oban_peers" AS o0 WHERE ((o0."name" = 'Oban') AND (o0."expires_at" < :'t0'::timestamp + interval '40 s'));
INSERT INTO "public"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '70 s', 'Oban', 'b', :'t0'::timestamp + interval '40 s') ON CONFLICT ("name") DO NOTHING;
\echo b_inserted :ROW_COUNT
INSERT INTO "public"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '75 s', 'Oban', 'a', :'t0'::timestamp + interval '45 s') ON CONFLICT ("name") DO UPDATE SET "expires_at" = :'t0'::timestamp + interval '75 s';
\echo a_still_leader :ROW_COUNT
SELECT node FROM "public"."oban_peers" AS o0 WHERE (o0."name" = 'Oban');
SELECT candidate, token > :oa_token AS larger_token FROM fencing.election_leader('public.oban_peers:Oban');
SELECT reason FROM fencing.lease_watch('public.oban_peers:Oban', :oa_token);
-- B's renewal (2.23.1) keeps it leading; an UPDATE that would hand the
-- row to another node changes nothing
INSERT INTO "public"."oban_peers" AS o0 ("expires_at","name","node","started_at")
VALUES (:'t0'::timestamp + interval '80 s', 'Oban', 'b', :'t0'::timestamp + interval '50 s') ON CONFLICT ("name") DO UPDATE SET "expires_at" = :'t0'::timestamp + interval '80 s' WHERE (o0."node" = 'b');
\echo b_renewed :ROW_COUNT
UPDATE oban_peers SET node = 'c';
\echo c_took_row :ROW_COUNT
SELECT node FROM oban_peers;

DROP TABLE recipe_resource, river_leader, oban_peers;
DROP FUNCTION river_leader_fencing(), oban_peers_fencing();
DROP SCHEMA river_plain, oban_plain CASCADE;
DELETE FROM fencing.leases WHERE name LIKE 'public.%';
