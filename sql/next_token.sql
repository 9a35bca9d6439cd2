-- fencing.next_token(): strictly increasing across statements, sessions,
-- and rolled-back transactions.

SELECT bool_and(t > prev) AS strictly_increasing, count(DISTINCT t) AS distinct_tokens
  FROM (SELECT t, lag(t) OVER (ORDER BY i) AS prev
		  FROM (SELECT i, fencing.next_token() AS t
				  FROM generate_series(1, 1000) AS i) AS s) AS d;

-- rolled back: the token is gone for good
SELECT fencing.next_token() AS before \gset
BEGIN;
SELECT fencing.next_token() AS rolled_back \gset
ROLLBACK;
SELECT fencing.next_token() AS after \gset
SELECT :rolled_back > :before AND :after > :rolled_back AS never_reissued;

BEGIN;
SAVEPOINT s;
SELECT fencing.next_token() AS in_savepoint \gset
ROLLBACK TO SAVEPOINT s;
SELECT fencing.next_token() > :in_savepoint AS savepoint_never_reissued;
COMMIT;

-- a new session continues above every token seen so far
SELECT fencing.next_token() AS last_of_session \gset
\c
SELECT fencing.next_token() > :last_of_session AS new_session_above;

-- volatile: evaluated once per row, never folded or cached
SELECT provolatile, proparallel, prorettype::regtype
  FROM pg_proc WHERE oid = 'fencing.next_token()'::regprocedure;
