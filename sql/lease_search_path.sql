-- A hostile search_path: a clock that says "far in the future" and
-- comparison operators that always say "true" come before pg_catalog.
-- The lease functions and the status view must not use any of them.
CREATE SCHEMA evil;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '2999-01-01 00:00:00+00' $$;
CREATE FUNCTION evil.now() RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '2999-01-01 00:00:00+00' $$;
CREATE FUNCTION evil.yes(timestamptz, timestamptz) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION evil.no(timestamptz, timestamptz) RETURNS boolean
	LANGUAGE sql AS $$ SELECT false $$;
CREATE FUNCTION evil.yes(text, text) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION evil.yes(bigint, bigint) RETURNS boolean
	LANGUAGE sql AS $$ SELECT true $$;
CREATE FUNCTION evil.plus(timestamptz, interval) RETURNS timestamptz
	LANGUAGE sql AS $$ SELECT timestamptz '2999-01-01 00:00:00+00' $$;
CREATE OPERATOR evil.= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.yes);
CREATE OPERATOR evil.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.yes);
CREATE OPERATOR evil.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.yes);
CREATE OPERATOR evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.no);
CREATE OPERATOR evil.>= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.no);
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.yes);
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.yes);
CREATE OPERATOR evil.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = evil.plus);

-- before the attack: a live lease of alice, an expired one of alice
SELECT fencing.lease_acquire('sp_live', 'alice', '10 min') AS t_live \gset
SELECT fencing.lease_acquire('sp_expired', 'alice', '1 s') AS t_expired \gset
SELECT fencing.lease_acquire('sp_expired2', 'alice', '1 s') AS t_expired2 \gset
SELECT fencing.lease_acquire('sp_bystander', 'carol', '10 min') AS t_bystander \gset
SELECT pg_sleep(1.2);

SET search_path = evil, public, pg_catalog;
-- the attack is armed: unqualified names resolve to evil
SELECT clock_timestamp() > '2998-01-01' AS evil_clock,
	   'a'::text = 'b'::text AS evil_text_eq,
	   1::bigint = 2::bigint AS evil_bigint_eq,
	   timestamptz '2000-01-01' <= timestamptz '1999-01-01' AS evil_le;

-- with plans prepared earlier in this session
SELECT fencing.lease_acquire('sp_live', 'bob', '10 min') IS NULL AS live_refused;
SELECT fencing.lease_acquire('sp_expired', 'bob', '10 min') AS t_bob \gset
SELECT :t_bob > :t_expired AS expired_taken;
SELECT fencing.lease_lock('sp_live', :t_live) AS live_check,
	   fencing.lease_lock('sp_live', :t_bob) AS wrong_token_check,
	   fencing.lease_lock('sp_expired', :t_expired) AS stale_check,
	   fencing.lease_lock('sp_expired', :t_bob) AS bob_check;
SELECT fencing.lease_renew('sp_live', :t_bob, '10 min') AS wrong_token_renew,
	   fencing.lease_release('sp_live', :t_bob) AS wrong_token_release,
	   fencing.lease_renew('sp_expired', :t_expired, '10 min') AS stale_renew;
SELECT fencing.lease_renew('sp_live', :t_live, '5 min') AS live_renew;
SELECT name, holder, state, remaining BETWEEN '4 min 59 s' AND '5 min' AS remaining_5_min,
	   expires_at OPERATOR(pg_catalog.<) '2998-01-01' AS sane_expiry
  FROM fencing.lease_status
 WHERE name OPERATOR(pg_catalog.~~) 'sp\_%' ORDER BY name;
RESET search_path;

-- in a new session, where the plans are prepared under the hostile path
\c
SET search_path = evil, public, pg_catalog;
SELECT fencing.lease_acquire('sp_live', 'dave', '10 min') IS NULL AS live_refused;
SELECT fencing.lease_acquire('sp_bystander', 'dave', '10 min') IS NULL AS bystander_refused;
SELECT fencing.lease_lock('sp_live', :t_bob) AS wrong_token_check,
	   fencing.lease_renew('sp_live', :t_bob, '1 min') AS wrong_token_renew,
	   fencing.lease_release('sp_bystander', :t_live) AS wrong_token_release;
SELECT fencing.lease_acquire('sp_expired2', 'erin', '1 min') AS t_erin \gset
SELECT :t_erin > :t_bob AS expired_taken_fresh_session;
SELECT fencing.lease_release('sp_expired2', :t_erin) AS released;
SELECT fencing.lease_acquire('sp_expired2', 'frank', '1 min') AS t_frank \gset
SELECT :t_frank > :t_erin AS free_taken;
SELECT fencing.next_token() > :t_frank AS next_token_ok;
RESET search_path;
SELECT name, holder, state, holder_changes FROM fencing.lease_status
 WHERE name LIKE 'sp\_%' ORDER BY name;
SELECT fencing.lease_lock('sp_live', :t_live) AS alice_live,
	   fencing.lease_lock('sp_bystander', :t_bystander) AS carol_live;

SET client_min_messages = warning;
DROP SCHEMA evil CASCADE;
RESET client_min_messages;
