--
-- Security: a hostile search_path.
--
-- A schema ahead of pg_catalog in the caller's search_path brings its own
-- now(), clock_timestamp(), nextval(), setval() and next_token(), and
-- comparison and arithmetic operators (= < <= > >= + -) on every type the
-- lease statements use (text, bigint, regrole, oid, timestamptz,
-- interval), all of them lying; a table and a sequence named like the
-- extension's shadow them.  Temporary objects (pg_temp) of the same names
-- come first of all for relations.  The lease functions schema-qualify
-- every name and operator, so they behave exactly as under a clean path:
-- the same tokens, one apart, the same answers, the same expiry times.
-- Calls are made under the hostile path; the assertions run after RESET
-- search_path, since they use plain operators themselves.
\i sql/include/case_harness.sql

CREATE SCHEMA regress_sec_evil;
SET search_path = regress_sec_evil;
CREATE FUNCTION regress_sec_evil.now() RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '2999-01-01 00:00:00+00' $$;
CREATE FUNCTION regress_sec_evil.clock_timestamp() RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '2999-01-01 00:00:00+00' $$;
CREATE FUNCTION regress_sec_evil.nextval(regclass) RETURNS bigint
	LANGUAGE sql AS $$ SELECT 1::bigint $$;
CREATE FUNCTION regress_sec_evil.setval(regclass, bigint) RETURNS bigint
	LANGUAGE sql AS $$ SELECT 1::bigint $$;
CREATE FUNCTION regress_sec_evil.next_token() RETURNS bigint
	LANGUAGE sql AS $$ SELECT 1::bigint $$;
CREATE FUNCTION regress_sec_evil.yes(text, text) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION regress_sec_evil.yes(bigint, bigint) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION regress_sec_evil.yes(regrole, regrole) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION regress_sec_evil.yes(oid, oid) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION regress_sec_evil.yes(timestamptz, timestamptz) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION regress_sec_evil.no(timestamptz, timestamptz) RETURNS boolean
	LANGUAGE sql AS $$ SELECT false $$;
CREATE FUNCTION regress_sec_evil.yes(interval, interval) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION regress_sec_evil.future(timestamptz, interval) RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '2999-01-01 00:00:00+00' $$;
CREATE FUNCTION regress_sec_evil.past(timestamptz, interval) RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '1999-01-01 00:00:00+00' $$;
CREATE FUNCTION regress_sec_evil.ages(timestamptz, timestamptz) RETURNS interval
	LANGUAGE sql AS $$ SELECT interval '1000 years' $$;
CREATE FUNCTION regress_sec_evil.zero(bigint, integer) RETURNS bigint
	LANGUAGE sql AS $$ SELECT 0::bigint $$;
CREATE FUNCTION regress_sec_evil.zero(bigint, bigint) RETURNS bigint
	LANGUAGE sql AS $$ SELECT 0::bigint $$;
CREATE OPERATOR regress_sec_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.= (LEFTARG = regrole, RIGHTARG = regrole, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.> (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_sec_evil.no);
CREATE OPERATOR regress_sec_evil.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_sec_evil.no);
CREATE OPERATOR regress_sec_evil.< (LEFTARG = interval, RIGHTARG = interval, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.> (LEFTARG = interval, RIGHTARG = interval, FUNCTION = regress_sec_evil.yes);
CREATE OPERATOR regress_sec_evil.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = regress_sec_evil.future);
CREATE OPERATOR regress_sec_evil.- (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = regress_sec_evil.past);
CREATE OPERATOR regress_sec_evil.- (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = regress_sec_evil.ages);
CREATE OPERATOR regress_sec_evil.+ (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = regress_sec_evil.zero);
CREATE OPERATOR regress_sec_evil.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_sec_evil.zero);
-- tables and sequences named like the extension's
CREATE TABLE regress_sec_evil.leases (LIKE fencing.leases INCLUDING DEFAULTS);
INSERT INTO regress_sec_evil.leases (name, holder, holder_role, token, acquired_at, expires_at)
VALUES ('sec_sp_a', 'mallory', 'pg_monitor', 1, '2000-01-01', '2999-01-01');
CREATE SEQUENCE regress_sec_evil.token_seq;
RESET search_path;
CREATE TEMP TABLE leases AS SELECT * FROM regress_sec_evil.leases;
CREATE TEMP SEQUENCE token_seq;
CREATE FUNCTION pg_temp.clock_timestamp() RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '2999-01-01 00:00:00+00' $$;
CREATE ROLE regress_sec_sp NOLOGIN;
GRANT USAGE ON SCHEMA fencing, regress_sec_evil TO regress_sec_sp;
-- a lease to see expire under the hostile path
SELECT fencing.lease_acquire('sec_sp_exp', 'alice', '0.3 s') AS t_exp \gset

-- ---- part 1: this session prepared its statements under a clean path ----
SELECT fencing.lease_acquire('sec_sp_warmup', 'alice', '1 min') AS t0 \gset
SELECT fencing.lease_release('sec_sp_warmup', :t0) AS warmed_up;

SET search_path = pg_temp, regress_sec_evil, pg_catalog, public;
-- the attack is armed: unqualified names resolve to it
SELECT clock_timestamp() > '2998-01-01' AS evil_clock,
	   'a'::text = 'b'::text AS evil_text_eq,
	   1::bigint = 2::bigint AS evil_bigint_eq,
	   2::bigint < 1::bigint AS evil_bigint_lt,
	   (1::bigint + 1) = 0::bigint AS evil_plus,
	   timestamptz '2000-01-01' <= timestamptz '1999-01-01' AS evil_le,
	   nextval('fencing.token_seq') AS evil_nextval,
	   next_token() AS evil_next_token,
	   (SELECT holder FROM leases WHERE name OPERATOR(pg_catalog.=) 'sec_sp_a') AS leases_is_the_temp_table;
SELECT fencing.lease_acquire('sec_sp_a', 'alice', '10 min') AS t1 \gset
SELECT fencing.lease_acquire('sec_sp_a', 'bob', '10 min') IS NULL AS bob_refused \gset
SELECT fencing.lease_acquire('sec_sp_a', 'alice', '10 min') AS t2 \gset
SELECT fencing.next_token() AS n1 \gset
SELECT fencing.lease_renew('sec_sp_a', :t1, '5 min') AS renew_stale \gset
SELECT fencing.lease_renew('sec_sp_a', :t2, '5 min') AS renew_current \gset
SELECT fencing.lease_lock('sec_sp_a', :t1) AS check_stale,
	   fencing.lease_lock('sec_sp_a', :t2) AS check_current,
	   fencing.lease_lock('sec_sp_none', :t2) AS check_none \gset
SELECT fencing.lease_release('sec_sp_a', :t1) AS release_stale \gset
SELECT pg_sleep(0.3);
SELECT fencing.lease_acquire('sec_sp_exp', 'bob', '10 min') AS t_takeover \gset
SELECT fencing.lease_acquire('sec_sp_exp', 'carol', '10 min') IS NULL AS carol_refused \gset
SELECT fencing.lease_lock('sec_sp_exp', :t_exp) AS expired_check \gset
SELECT fencing.lease_acquire('sec_sp_w', 'alice', '0.3 s') AS t_w1 \gset
SELECT expires_at AS w_expiry FROM fencing.lease_status
 WHERE name OPERATOR(pg_catalog.=) 'sec_sp_w' \gset
SELECT fencing.lease_acquire('sec_sp_w', 'bob', '1 min', '5 s') AS t_w2 \gset
SELECT acquired_at AS w_acquired FROM fencing.lease_status
 WHERE name OPERATOR(pg_catalog.=) 'sec_sp_w' \gset
SELECT fencing.lease_force_release('sec_sp_w') AS forced \gset
SELECT fencing.lease_purge('1 hour') AS purged \gset
SELECT fencing.fence_allows(:t1, :t2) AS fc1, fencing.fence_allows(:t2, :t1) AS fc2,
	   fencing.fence_allows(:t2, :t2, true) AS fa, fencing.fence_advance(:t1, :t2) AS fadv \gset
-- a band entry: tokens issued before it are refused from now on
SELECT fencing.advance_tokens(:t_w2 OPERATOR(pg_catalog.+) 5) AS advanced \gset
SELECT fencing.next_token() AS n2 \gset
SELECT state AS state_a, acquires AS acquires_a, renewals AS renewals_a,
	   releases AS releases_a, holder_changes AS changes_a,
	   (expires_at OPERATOR(pg_catalog.-) acquired_at) AS len_a
  FROM fencing.lease_status WHERE name OPERATOR(pg_catalog.=) 'sec_sp_a' \gset
SELECT leases AS stats_leases FROM fencing_monitor.stats \gset
SELECT fencing.lease_release('sec_sp_a', :t2) AS release_current \gset
RESET search_path;

SELECT pg_temp.check('acquire', :t1 > :t0);
SELECT pg_temp.check('another holder is refused', :'bob_refused'::boolean);
SELECT pg_temp.check('re-acquire: exactly the next token', :t2 = :t1 + 1);
SELECT pg_temp.check('next_token: exactly the next token', :n1 = :t2 + 1);
SELECT pg_temp.check('renew with the stale token: false', NOT :'renew_stale'::boolean);
SELECT pg_temp.check('renew with the current token: true', :'renew_current'::boolean);
SELECT pg_temp.check('check: stale false, current true, unknown lease false',
					 NOT :'check_stale'::boolean AND :'check_current'::boolean AND NOT :'check_none'::boolean);
SELECT pg_temp.check('release with the stale token: false', NOT :'release_stale'::boolean);
SELECT pg_temp.check('release with the current token: true', :'release_current'::boolean);
SELECT pg_temp.check('expired lease taken over', :t_takeover = :n1 + 1);
SELECT pg_temp.check('the new holder''s lease is live', :'carol_refused'::boolean);
SELECT pg_temp.check('the expired token is not current', NOT :'expired_check'::boolean);
SELECT pg_temp.check('waiting acquire: taken at expiry',
					 :t_w2 = :t_w1 + 1 AND :'w_acquired'::timestamptz >= :'w_expiry'::timestamptz);
SELECT pg_temp.check('force_release', :'forced'::boolean);
SELECT pg_temp.check('purge: nothing free for an hour', :purged = 0);
SELECT pg_temp.check('advance_tokens: above the floor', :n2 > :t_w2 + 5);
SELECT pg_temp.check('fence predicates', :'fc1'::boolean AND NOT :'fc2'::boolean AND :'fa'::boolean AND :fadv = :t2);
SELECT pg_temp.check('lease_status: state, counters, length',
					 :'state_a' = 'held' AND :acquires_a = 2 AND :renewals_a = 1
					 AND :releases_a = 0 AND :changes_a = 0
					 AND :'len_a'::interval BETWEEN '5 min' AND '5 min 1 s');
SELECT pg_temp.check('stats', :stats_leases >= 4);
SELECT name, holder, state, remaining IS NULL AS no_remaining, acquires, renewals,
	   releases, holder_changes, expired_takeovers, takeover,
	   expires_at < '2100-01-01' AS sane_expiry
  FROM fencing.lease_status WHERE name LIKE 'sec\_sp\_%' ORDER BY name;
-- the look-alike objects were never used
SELECT (SELECT count(*) FROM regress_sec_evil.leases) AS evil_rows,
	   (SELECT count(*) FROM pg_temp.leases) AS temp_rows,
	   (SELECT is_called FROM regress_sec_evil.token_seq) AS evil_seq_called,
	   (SELECT is_called FROM pg_temp.token_seq) AS temp_seq_called;

-- ---- part 2: a new session, an ordinary role, the hostile path set
-- before the first call: every statement is prepared under it ----
SELECT last_value AS part1_cases FROM pg_temp.case_seq \gset
\c
SET ROLE regress_sec_sp;
CREATE TEMP TABLE leases (name text, token bigint);
INSERT INTO leases VALUES ('sec_sp_a', 1);
SET search_path = pg_temp, regress_sec_evil, pg_catalog;
SELECT 'a'::text = 'b'::text AS evil_text_eq;
SELECT fencing.lease_acquire('sec_sp_a', 'app', '10 min') AS u1 \gset
SELECT fencing.lease_acquire('sec_sp_a', 'mallory', '10 min') IS NULL AS mallory_refused \gset
SELECT fencing.lease_acquire('sec_sp_a', 'app', '10 min') AS u2 \gset
SELECT fencing.lease_renew('sec_sp_a', :u1, '5 min') AS renew_stale,
	   fencing.lease_renew('sec_sp_a', :u2, '5 min') AS renew_current,
	   fencing.lease_lock('sec_sp_a', :u1) AS check_stale,
	   fencing.lease_lock('sec_sp_a', :u2) AS check_current \gset
SELECT fencing.lease_acquire('sec_sp_exp', 'app', '10 min') IS NULL AS bobs_lease_refused \gset
SELECT fencing.lease_release('sec_sp_a', :u1) AS release_stale,
	   fencing.lease_release('sec_sp_a', :u2) AS release_current \gset
SELECT fencing.next_token() AS u3 \gset
RESET search_path;
SELECT label, CASE WHEN ok THEN 'ok' ELSE 'FAILED' END AS result FROM (VALUES
	('acquire', :u1 > :t_w2),
	('another holder is refused', :'mallory_refused'::boolean),
	('re-acquire: exactly the next token', :u2 = :u1 + 1),
	('renew with the stale token: false', NOT :'renew_stale'::boolean),
	('renew with the current token: true', :'renew_current'::boolean),
	('check with the stale token: false', NOT :'check_stale'::boolean),
	('check with the current token: true', :'check_current'::boolean),
	('another role''s live lease is refused', :'bobs_lease_refused'::boolean),
	('release with the stale token: false', NOT :'release_stale'::boolean),
	('release with the current token: true', :'release_current'::boolean),
	('next_token: exactly the next token', :u3 = :u2 + 1)
  ) AS v(label, ok);
SELECT name, holder, holder_role, state, acquires, renewals, releases
  FROM fencing.lease_status WHERE name = 'sec_sp_a';
SELECT count(*) AS temp_rows FROM pg_temp.leases;
RESET ROLE;

-- every case: part 1, and the 11 of part 2
SELECT :part1_cases + 11 AS cases;

SELECT fencing.lease_release('sec_sp_exp', :t_takeover) AS released;
SET client_min_messages = warning;
DROP SCHEMA regress_sec_evil CASCADE;
RESET client_min_messages;
REVOKE USAGE ON SCHEMA fencing FROM regress_sec_sp;
DROP OWNED BY regress_sec_sp;
DROP ROLE regress_sec_sp;
