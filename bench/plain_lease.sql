-- bench/plain_lease.sql: the lease a user would write in plain SQL, as a
-- contender for bench/run.sh.  No functions: the client sends these two
-- statements itself (bench/run.sh has them in its pgbench scripts; there
-- the acquire is wrapped in WITH a AS (...) SELECT coalesce((SELECT token
-- FROM a), 0), because pgbench's \gset needs a row where an application
-- would simply see none).
--
--   acquire (NULL when another holder's lease is live; burns a sequence
--   value either way, since VALUES is evaluated before the conflict):
--
--     INSERT INTO plain_lease.leases AS l (name, holder, token, expires_at)
--     VALUES ($name, $holder, nextval('plain_lease.token_seq'),
--             clock_timestamp() + $ttl)
--     ON CONFLICT (name) DO UPDATE
--        SET holder = EXCLUDED.holder, token = EXCLUDED.token,
--            expires_at = EXCLUDED.expires_at
--      WHERE l.expires_at <= clock_timestamp() OR l.holder = EXCLUDED.holder
--     RETURNING l.token;
--
--   release (true when the token was current and the lease live):
--
--     UPDATE plain_lease.leases
--        SET expires_at = clock_timestamp()
--      WHERE name = $name AND token = $token
--        AND expires_at > clock_timestamp();
--
-- The table has the same fillfactor as fencing.leases, so both get HOT
-- updates; the comparison is about the code path, not table tuning.

CREATE SCHEMA plain_lease;
CREATE SEQUENCE plain_lease.token_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE plain_lease.leases (
	name		text PRIMARY KEY,
	holder		text NOT NULL,
	token		bigint NOT NULL,
	expires_at	timestamptz NOT NULL
) WITH (fillfactor = 70);
