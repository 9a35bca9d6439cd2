--
-- Band entries, and tokens issued before them (docs/tokens.md).
--
-- advance_tokens() with no argument re-enters a band now, as the token
-- source does by itself after a promotion, a restore or lease rows that
-- arrived by replication.  Tokens issued before it are refused in this
-- database by lease_lock, lease_renew, fence_advance and fence_guard
-- (LF005: the data they fenced may be gone), lease_release still frees a
-- lease, and fencing.refuse_old_band = off (superuser) compares numbers
-- only.  Tokens and band starts vary: the helper shows them as N.
--
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
	hint text;
	r text;
BEGIN
	EXECUTE q INTO r;
	RETURN 'ok: ' || coalesce(regexp_replace(r, '\d{9,}', 'N', 'g'), '');
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '\d{9,}', 'N', 'g')
		|| coalesce(E'\n  DETAIL: ' || nullif(regexp_replace(detail, '\d{9,}', 'N', 'g'), ''), '')
		|| coalesce(E'\n  HINT: ' || nullif(hint, ''), '');
END $$;

SELECT fencing.lease_acquire('tb', 'A', '10 min') AS t_old \gset
SELECT fencing.lease_acquire('tb2', 'A', '10 min') AS t_old2 \gset
CREATE TABLE tb_rows (id int PRIMARY KEY, fence bigint);
INSERT INTO tb_rows VALUES (1, NULL), (2, NULL);
CREATE TRIGGER guard BEFORE UPDATE OR DELETE ON tb_rows
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
UPDATE tb_rows SET fence = :t_old WHERE id = 1;

-- a band entry: the next token starts the band, above everything before
SELECT last_value AS band_before FROM fencing.token_base \gset
SELECT fencing.advance_tokens();
SELECT last_value AS band FROM fencing.token_base \gset
SELECT :band > :band_before AND :band > :t_old2 AS new_band;
SELECT fencing.next_token() = :band AS first_token_starts_the_band;

-- tokens from before it
SELECT pg_temp.try(format('SELECT fencing.lease_lock(%L, %s)', 'tb', :t_old)) AS lease_lock;
SELECT pg_temp.try(format('SELECT fencing.lease_renew(%L, %s, %L)', 'tb', :t_old, '10 min')) AS lease_renew;
SELECT pg_temp.try(format('SELECT fencing.fence_advance(NULL, %s)', :t_old)) AS fence_advance;
SELECT pg_temp.try(format('UPDATE tb_rows SET fence = %s WHERE id = 2 RETURNING fence', :t_old)) AS guard_set;
BEGIN;
SET LOCAL fencing.token = :'t_old';
SELECT pg_temp.try('UPDATE tb_rows SET id = 1 WHERE id = 1 RETURNING fence') AS guard_declared;
ROLLBACK;
-- a token that is not the lease's current one is just not current
SELECT fencing.lease_lock('tb', :t_old2) AS other_lease_token;
-- stale by number is still LF001, checked first
SELECT pg_temp.try(format('SELECT fencing.fence_advance(%s, %s)', :t_old2, :t_old)) AS stale_first;
-- releasing frees the lease; nothing is written with the token
SELECT fencing.lease_release('tb2', :t_old2) AS released;
SELECT fence = :t_old AS row_unchanged FROM tb_rows WHERE id = 1;

-- the holder acquires again, and its new token works everywhere
SELECT fencing.lease_acquire('tb', 'A', '10 min') AS t_new \gset
SELECT :t_new > :band AS from_the_new_band;
SELECT fencing.lease_lock('tb', :t_new) AS checked,
	   fencing.lease_renew('tb', :t_new, '10 min') AS renewed,
	   fencing.fence_advance(:t_old, :t_new) = :t_new AS advanced;
UPDATE tb_rows SET fence = :t_new WHERE id = 1 RETURNING fence = :t_new AS written;

-- a database that also guards resources with another database's tokens
SET fencing.refuse_old_band = off;
SELECT fencing.fence_advance(NULL, :t_old) = :t_old AS compares_numbers_only;
RESET fencing.refuse_old_band;
CREATE ROLE regress_tb_plain;
SET ROLE regress_tb_plain;
SELECT pg_temp.try('SET fencing.refuse_old_band = off') AS plain_role_may_not;
RESET ROLE;
DROP ROLE regress_tb_plain;

-- lease rows that arrive with a token above the counter make a band entry
-- due; until the next token enters it, this database's band still holds:
-- tokens from before it stay refused, the live lease stays valid
INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at)
	VALUES ('tb_arrived', 'Z', current_user::regrole,
			(SELECT last_value FROM fencing.token_seq) + 1000, now(), now() + '10 min');
SELECT pg_temp.try(format('SELECT fencing.fence_advance(NULL, %s)', :t_old)) AS still_refused;
SELECT fencing.lease_lock('tb', :t_new) AS still_current;
SELECT fencing.next_token() > (SELECT token FROM fencing.leases WHERE name = 'tb_arrived')
	AS above_the_arrived_token;
SELECT pg_temp.try(format('SELECT fencing.lease_lock(%L, %s)', 'tb', :t_new)) AS entered_a_band;
DELETE FROM fencing.leases WHERE name = 'tb_arrived';

-- the epoch file is set in the server's configuration only
SHOW fencing.epoch_file;
SELECT pg_temp.try('SET fencing.epoch_file = ''epoch''') AS epoch_file_in_session;

DROP TABLE tb_rows;
SELECT fencing.lease_release('tb', :t_new);
