-- bench/plpgsql_lease.sql: the fencing lease API written in PL/pgSQL, as a
-- contender for bench/run.sh (what a careful user could write instead of
-- the C extension).
--
-- Same calls, results and semantics as fencing.lease_acquire and
-- fencing.lease_release (fencing--1.0.sql, src/lease.c, src/lease_table.c):
--
--  * a lease table made LIKE fencing.leases (so CREATE EXTENSION fencing
--    comes first), with the same fillfactor; the same three statements
--    for an acquire (take a free, released, expired or own row; else
--    create it; else look once more) and the same release;
--  * expiry judged by clock_timestamp() inside each statement, never by the
--    start of the transaction;
--  * a new token from a sequence for every acquire (plain nextval(): no WAL
--    flush and no timeline band, the part of src/token.c this skips);
--  * the same argument checks with the same SQLSTATEs (22004 NULL, 22023
--    bad name, holder, TTL or token);
--  * callers get no privileges on the table: SECURITY DEFINER with a fixed
--    search_path, as the C functions switch to the extension owner.
--
-- Not reproduced (none of it is on the path the benchmark measures):
-- waiting acquire (wait > 0 is 0A000 here), NOTIFY fencing (bench/run.sh
-- measures fencing with fencing.notify = off as well, which is the
-- like-for-like comparison), the RR/SERIALIZABLE stale-row 40001, the
-- fencing_admin role.  The holder's role is session_user: inside a
-- SECURITY DEFINER function current_user is the owner.

CREATE SCHEMA plpgsql_lease;

CREATE SEQUENCE plpgsql_lease.token_seq AS bigint MINVALUE 1 NO CYCLE;

-- the lease table's layout is fencing.leases' own (columns, defaults, key);
-- LIKE copies no storage parameter, so the fillfactor is set again
CREATE TABLE plpgsql_lease.leases (LIKE fencing.leases INCLUDING ALL)
	WITH (fillfactor = 70);

REVOKE ALL ON plpgsql_lease.leases, plpgsql_lease.token_seq FROM PUBLIC;

CREATE FUNCTION plpgsql_lease.lease_acquire(name text, holder text, ttl interval,
											wait interval DEFAULT '0')
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me		regrole := session_user::regrole;
	ttl_us	numeric;
	d		interval;
	tok		bigint;
BEGIN
	IF lease_acquire.name IS NULL OR lease_acquire.holder IS NULL
	   OR lease_acquire.ttl IS NULL OR lease_acquire.wait IS NULL THEN
		RAISE EXCEPTION 'lease arguments must not be NULL' USING ERRCODE = '22004';
	END IF;
	IF octet_length(lease_acquire.name) NOT BETWEEN 1 AND 256 THEN
		RAISE EXCEPTION 'lease name must be 1 to 256 bytes long' USING ERRCODE = '22023';
	END IF;
	IF octet_length(lease_acquire.holder) NOT BETWEEN 1 AND 256 THEN
		RAISE EXCEPTION 'lease holder must be 1 to 256 bytes long' USING ERRCODE = '22023';
	END IF;
	-- a month is 30 days and a day 24 hours, as in src/args.c
	ttl_us := extract(epoch FROM lease_acquire.ttl) * 1000000;
	IF ttl_us <= 0 OR ttl_us > 86400000000 THEN
		RAISE EXCEPTION 'lease TTL must be positive and at most 1 day' USING ERRCODE = '22023';
	END IF;
	IF lease_acquire.wait < interval '0' THEN
		RAISE EXCEPTION 'wait interval must not be negative' USING ERRCODE = '22023';
	END IF;
	IF lease_acquire.wait > interval '0' THEN
		RAISE EXCEPTION 'waiting is not supported by this version' USING ERRCODE = '0A000';
	END IF;
	d := make_interval(secs => ttl_us / 1000000);

	-- a second round when a concurrent creator won: it may be this holder
	-- in another session
	FOR attempt IN 1 .. 2 LOOP
		-- take a free, released, expired (past its lock delay) or own row
		UPDATE plpgsql_lease.leases AS l
		   SET holder = lease_acquire.holder, holder_role = me,
			   token = nextval('plpgsql_lease.token_seq'),
			   acquired_at = clock_timestamp(),
			   expires_at = clock_timestamp() + d,
			   released_at = NULL,
			   lock_delay = interval '0',
			   takeover = (l.released_at IS NULL
						   AND NOT (l.holder = lease_acquire.holder AND l.holder_role = me)),
			   holder_changes = l.holder_changes +
				   CASE WHEN l.holder = lease_acquire.holder AND l.holder_role = me THEN 0 ELSE 1 END,
			   acquires = l.acquires + 1,
			   expired_takeovers = l.expired_takeovers +
				   CASE WHEN l.released_at IS NULL
						 AND NOT (l.holder = lease_acquire.holder AND l.holder_role = me)
						THEN 1 ELSE 0 END
		 WHERE l.name = lease_acquire.name
		   AND (l.released_at IS NOT NULL
				OR l.expires_at + l.lock_delay <= clock_timestamp()
				OR (l.holder = lease_acquire.holder AND l.holder_role = me))
		RETURNING l.token INTO tok;
		IF FOUND OR attempt = 2 THEN
			RETURN tok;		-- NULL: another holder's lease is live
		END IF;

		-- a new lease; spends no token when the row exists
		INSERT INTO plpgsql_lease.leases AS l
			   (name, holder, holder_role, token, acquired_at, expires_at, acquires)
		SELECT lease_acquire.name, lease_acquire.holder, me,
			   nextval('plpgsql_lease.token_seq'), clock_timestamp(),
			   clock_timestamp() + d, 1
		 WHERE NOT EXISTS (SELECT FROM plpgsql_lease.leases AS o
							WHERE o.name = lease_acquire.name)
		ON CONFLICT ON CONSTRAINT leases_pkey DO NOTHING
		RETURNING l.token INTO tok;
		IF FOUND THEN
			RETURN tok;
		END IF;
	END LOOP;
END
$$;

CREATE FUNCTION plpgsql_lease.lease_release(name text, token bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me		regrole := session_user::regrole;
	owner	regrole;
BEGIN
	IF lease_release.name IS NULL OR lease_release.token IS NULL THEN
		RAISE EXCEPTION 'lease arguments must not be NULL' USING ERRCODE = '22004';
	END IF;
	IF octet_length(lease_release.name) NOT BETWEEN 1 AND 256 THEN
		RAISE EXCEPTION 'lease name must be 1 to 256 bytes long' USING ERRCODE = '22023';
	END IF;
	IF lease_release.token <= 0 THEN
		RAISE EXCEPTION 'fencing token must be positive' USING ERRCODE = '22023';
	END IF;

	UPDATE plpgsql_lease.leases AS l
	   SET released_at = clock_timestamp(),
		   releases = l.releases + 1
	 WHERE l.name = lease_release.name AND l.token = lease_release.token
	   AND l.holder_role = me
	   AND l.released_at IS NULL AND l.expires_at > clock_timestamp();
	IF FOUND THEN
		RETURN true;
	END IF;

	-- live with this token, but another role's: refused
	SELECT l.holder_role INTO owner
	  FROM plpgsql_lease.leases AS l
	 WHERE l.name = lease_release.name AND l.token = lease_release.token
	   AND l.released_at IS NULL AND l.expires_at > clock_timestamp();
	IF FOUND AND owner <> me THEN
		RAISE EXCEPTION 'lease "%" is held by another role', lease_release.name
			USING ERRCODE = '42501';
	END IF;
	RETURN false;
END
$$;
