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
--
-- THE FLAW: this lease's tokens can go backwards.  nextval() runs when the
-- VALUES row is built, before the statement finds and locks the lease
-- row.  When the row is locked (by the holder's release, or another
-- acquire), the statement waits, and when the row changed meanwhile it
-- tries again with the token it drew before waiting, while other clients
-- went through grants with larger tokens: a later grant carries a smaller
-- token, and a resource that keeps the highest token it has seen refuses
-- the new holder (or, with "token <> last", accepts the old one).
-- specs/plain_lease_token_order.spec shows it with an exact schedule, and
-- the same schedule against fencing.lease_acquire, whose token is drawn
-- again after a wait; bench/peers/ counts it under load.
--
-- This file is plain SQL, without psql meta-commands and without a
-- closing brace character: specs/plain_lease_token_order.spec carries it
-- verbatim as its first setup block (a spec cannot include a file), and
-- t/064_plain_lease_spec.pl checks that the two stay identical.

CREATE SCHEMA plain_lease;
CREATE SEQUENCE plain_lease.token_seq AS bigint MINVALUE 1 NO CYCLE;
CREATE TABLE plain_lease.leases (
	name		text PRIMARY KEY,
	holder		text NOT NULL,
	token		bigint NOT NULL,
	expires_at	timestamptz NOT NULL
) WITH (fillfactor = 70);
