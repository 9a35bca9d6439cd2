-- job_queue: the recipe of examples/job_queue.sql, and the stale worker
-- story in job terms.  Token values depend on the files run before this
-- one, so tokens are compared, or shown by name (tA, tB, ...), never
-- printed.  Leases that must run out are 10 ms long, followed by a 50 ms
-- sleep; leases that must not run out are a minute long.
--
-- pg_regress feeds this file to psql on stdin, so \i and \ir both resolve
-- from the directory pg_regress runs in: the root of the tree.
\set ECHO none
\i examples/job_queue.sql
\set ECHO all

-- ---------------------------------------------------------------------------
-- test helpers (temporary)

-- token values by name
CREATE TEMP TABLE token_names (name text PRIMARY KEY, value bigint NOT NULL UNIQUE);
CREATE FUNCTION pg_temp.tok(n text) RETURNS bigint
LANGUAGE sql STABLE AS $$ SELECT t.value FROM token_names AS t WHERE t.name = n $$;

-- claim as a named worker: its tokens get the worker's name (numbered when
-- it claims several jobs), and the claim is shown with the names
CREATE FUNCTION pg_temp.claim_as(worker text, q text, n integer, lease interval)
RETURNS TABLE (job bigint, token text, attempt integer)
LANGUAGE plpgsql AS $$
DECLARE
	r record;
	k integer := 0;
BEGIN
	FOR r IN SELECT c.id, c.token, c.attempt FROM job_queue.claim(q, n, lease) AS c LOOP
		k := k + 1;
		INSERT INTO token_names
			VALUES (CASE WHEN n = 1 THEN worker ELSE worker || k END, r.token);
		job := r.id;
		token := CASE WHEN n = 1 THEN worker ELSE worker || k END;
		attempt := r.attempt;
		RETURN NEXT;
	END LOOP;
END
$$;

-- the whole table as text, timestamps included: any write changes it
CREATE FUNCTION pg_temp.table_image() RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce(string_agg(j::text, E'\n' ORDER BY j.id), '') FROM job_queue.jobs AS j
$$;

-- run a statement that must fail: its SQLSTATE, message and detail, with
-- "token <value>" replaced by "token <name>", and whether the table is
-- unchanged
CREATE FUNCTION pg_temp.attempt(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	before text := pg_temp.table_image();
	st text;
	msg text;
	det text;
	t record;
BEGIN
	BEGIN
		EXECUTE stmt;
		RETURN 'NO ERROR';
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
								det = PG_EXCEPTION_DETAIL;
	END;
	msg := st || ': ' || msg || CASE WHEN det <> '' THEN ' / ' || det ELSE '' END;
	FOR t IN SELECT * FROM token_names LOOP
		msg := regexp_replace(msg, '\mtoken ' || t.value || '\M', 'token ' || t.name, 'g');
	END LOOP;
	RETURN msg || CASE WHEN pg_temp.table_image() = before
					   THEN ' / table unchanged' ELSE ' / TABLE CHANGED' END;
END
$$;

-- a job row, with the fence by name and the lease judged by the clock
CREATE FUNCTION pg_temp.job_row(jid bigint)
RETURNS TABLE (state text, result jsonb, fence text, attempts integer,
			   max_attempts integer, lease text, last_error text)
LANGUAGE sql AS $$
	SELECT j.state, j.result,
		   CASE WHEN j.fence IS NOT NULL
				THEN coalesce((SELECT t.name FROM token_names AS t WHERE t.value = j.fence),
							  'unnamed token') END,
		   j.attempts, j.max_attempts,
		   CASE WHEN j.lease_until IS NULL THEN 'none'
				WHEN j.lease_until > clock_timestamp() THEN 'live'
				ELSE 'expired' END,
		   j.last_error
	  FROM job_queue.jobs AS j WHERE j.id = jid
$$;

-- ---------------------------------------------------------------------------
-- the story: worker A stalls past its lease, B reclaims and completes, A
-- wakes up and tries to complete

SELECT job_queue.enqueue('mail', '{"to": "ann@example.com"}') AS job;
SELECT * FROM pg_temp.claim_as('tA', 'mail', 1, '10 ms');
SELECT pg_sleep(0.05);
-- A is paused; its lease ran out
SELECT * FROM pg_temp.job_row(1);

-- B reclaims the expired job with a newer token
SELECT * FROM pg_temp.claim_as('tB', 'mail', 1, '1 min');
SELECT pg_temp.tok('tB') > pg_temp.tok('tA') AS tb_newer;
SELECT * FROM pg_temp.job_row(1);

-- A's heartbeat is refused: its claim was superseded
SELECT pg_temp.attempt($$SELECT job_queue.heartbeat(1, pg_temp.tok('tA'), '1 min')$$);

-- B completes
SELECT job_queue.complete(1, pg_temp.tok('tB'), '{"sent_by": "B"}');

-- A wakes up and completes: refused, B's result stands
SELECT pg_temp.attempt($$SELECT job_queue.complete(1, pg_temp.tok('tA'), '{"sent_by": "A"}')$$);
SELECT * FROM pg_temp.job_row(1);
-- nor may A fail the job, or extend it
SELECT pg_temp.attempt($$SELECT job_queue.fail(1, pg_temp.tok('tA'), 'timeout')$$);
SELECT pg_temp.attempt($$SELECT job_queue.heartbeat(1, pg_temp.tok('tA'), '1 min')$$);

-- B's token is current, but the job is done: no second completion, no
-- failure, no heartbeat
SELECT pg_temp.attempt($$SELECT job_queue.complete(1, pg_temp.tok('tB'), '{"sent_by": "B again"}')$$);
SELECT pg_temp.attempt($$SELECT job_queue.fail(1, pg_temp.tok('tB'), 'oops')$$);
SELECT pg_temp.attempt($$SELECT job_queue.heartbeat(1, pg_temp.tok('tB'), '1 min')$$);
-- a done job is never claimed again
SELECT * FROM pg_temp.claim_as('tZ', 'mail', 1, '1 min');
SELECT * FROM pg_temp.job_row(1);

-- ---------------------------------------------------------------------------
-- heartbeat: keeps a claim alive; even a late heartbeat (lease already run
-- out, job not reclaimed yet) is the current claimant's right

SELECT job_queue.enqueue('mail', '{"to": "bob@example.com"}') AS job;
SELECT * FROM pg_temp.claim_as('tC', 'mail', 1, '10 ms');
SELECT pg_sleep(0.05);
SELECT lease FROM pg_temp.job_row(2);
SELECT job_queue.heartbeat(2, pg_temp.tok('tC'), '1 min') > clock_timestamp() AS extended;
SELECT lease FROM pg_temp.job_row(2);
-- nobody can reclaim it now
SELECT * FROM pg_temp.claim_as('tD', 'mail', 1, '1 min');
-- a lease must be positive
SELECT pg_temp.attempt($$SELECT job_queue.heartbeat(2, pg_temp.tok('tC'), '0 s')$$);
SELECT pg_temp.attempt($$SELECT job_queue.heartbeat(2, pg_temp.tok('tC'), '-1 s')$$);
SELECT job_queue.complete(2, pg_temp.tok('tC'), '"ok"');
SELECT * FROM pg_temp.job_row(2);

-- ---------------------------------------------------------------------------
-- fail: retried until max_attempts, then dead

SELECT job_queue.enqueue('resize', '{"image": 7}', max_attempts => 2) AS job;
SELECT * FROM pg_temp.claim_as('tE1', 'resize', 1, '1 min');
SELECT job_queue.fail(3, pg_temp.tok('tE1'), 'disk full') AS new_state;
SELECT * FROM pg_temp.job_row(3);
-- E1's claim is over: failing or completing again is refused
SELECT pg_temp.attempt($$SELECT job_queue.fail(3, pg_temp.tok('tE1'), 'disk full')$$);
SELECT pg_temp.attempt($$SELECT job_queue.complete(3, pg_temp.tok('tE1'), '"late"')$$);
-- second and last attempt
SELECT * FROM pg_temp.claim_as('tE2', 'resize', 1, '1 min');
SELECT pg_temp.tok('tE2') > pg_temp.tok('tE1') AS te2_newer;
-- E1's failure, now stale
SELECT pg_temp.attempt($$SELECT job_queue.fail(3, pg_temp.tok('tE1'), 'disk full')$$);
SELECT job_queue.fail(3, pg_temp.tok('tE2'), 'disk still full') AS new_state;
SELECT * FROM pg_temp.job_row(3);
-- dead: not claimable, not writable
SELECT * FROM pg_temp.claim_as('tZ', 'resize', 1, '1 min');
SELECT pg_temp.attempt($$SELECT job_queue.complete(3, pg_temp.tok('tE2'), '"late"')$$);

-- a failure no retry can fix: 'failed' at once, attempts left or not
SELECT job_queue.enqueue('resize', '{"image": 8}') AS job;
SELECT * FROM pg_temp.claim_as('tF', 'resize', 1, '1 min');
SELECT job_queue.fail(4, pg_temp.tok('tF'), 'not an image', retry => false) AS new_state;
SELECT * FROM pg_temp.job_row(4);
SELECT * FROM pg_temp.claim_as('tZ', 'resize', 1, '1 min');

-- ---------------------------------------------------------------------------
-- claim of several jobs: in id order, each with its own token, increasing

SELECT job_queue.enqueue('batch', to_jsonb(i)) AS job FROM generate_series(1, 3) AS i;
SELECT * FROM pg_temp.claim_as('tG', 'batch', 5, '1 min');
SELECT pg_temp.tok('tG1') < pg_temp.tok('tG2')
	   AND pg_temp.tok('tG2') < pg_temp.tok('tG3') AS increasing;
SELECT id, payload, state, (SELECT t.name FROM token_names AS t WHERE t.value = j.fence) AS fence
  FROM job_queue.jobs AS j WHERE queue = 'batch' ORDER BY id;
-- each token writes its own job only: tG3 is newer than job 5's claim, but
-- was not issued for it
SELECT pg_temp.attempt($$SELECT job_queue.complete(5, pg_temp.tok('tG3'), '"mixed up"')$$);
SELECT pg_temp.attempt($$SELECT job_queue.complete(6, pg_temp.tok('tG1'), '"mixed up"')$$);
-- queues are separate; a bad count or lease is refused
SELECT * FROM pg_temp.claim_as('tZ', 'no such queue', 5, '1 min');
SELECT pg_temp.attempt($$SELECT job_queue.claim('batch', 0, '1 min')$$);
SELECT pg_temp.attempt($$SELECT job_queue.claim('batch', 1, '0 s')$$);

-- ---------------------------------------------------------------------------
-- missing jobs, never-claimed jobs, tokens never issued

SELECT pg_temp.attempt($$SELECT job_queue.complete(999, pg_temp.tok('tB'), '"x"')$$);
SELECT pg_temp.attempt($$SELECT job_queue.fail(999, pg_temp.tok('tB'), 'x')$$);
SELECT pg_temp.attempt($$SELECT job_queue.heartbeat(999, pg_temp.tok('tB'), '1 min')$$);
SELECT job_queue.enqueue('idle', '"never claimed"') AS job;
SELECT pg_temp.attempt($$SELECT job_queue.complete(8, pg_temp.tok('tB'), '"x"')$$);
SELECT pg_temp.attempt($$SELECT job_queue.complete(1, NULL, '"x"')$$);
SELECT pg_temp.attempt($$SELECT job_queue.complete(1, 0, '"x"')$$);

-- ---------------------------------------------------------------------------
-- reap: an expired claim with no attempts left is dead; others are not

SELECT job_queue.enqueue('once', '"last chance"', max_attempts => 1) AS job;
SELECT * FROM pg_temp.claim_as('tH', 'once', 1, '10 ms');
SELECT job_queue.enqueue('once', '"still running"', max_attempts => 1) AS job;
SELECT * FROM pg_temp.claim_as('tI', 'once', 1, '1 min');
SELECT job_queue.enqueue('twice', '"will be retried"', max_attempts => 2) AS job;
SELECT * FROM pg_temp.claim_as('tJ', 'twice', 1, '10 ms');
SELECT pg_sleep(0.05);
-- job 9 expired on its last attempt: claim passes it over
SELECT * FROM pg_temp.claim_as('tZ', 'once', 1, '1 min');
SELECT * FROM job_queue.reap() AS dead;
SELECT * FROM pg_temp.job_row(9);
-- job 10's lease is live, job 11 has an attempt left
SELECT id, state FROM job_queue.jobs WHERE id IN (10, 11) ORDER BY id;
-- H wakes up: its token is still the job's latest, but the job is dead
SELECT pg_temp.attempt($$SELECT job_queue.complete(9, pg_temp.tok('tH'), '"late"')$$);
SELECT * FROM job_queue.reap() AS dead;
-- job 11 is reclaimed instead, and J is fenced out
SELECT * FROM pg_temp.claim_as('tK', 'twice', 1, '1 min');
SELECT pg_temp.attempt($$SELECT job_queue.complete(11, pg_temp.tok('tJ'), '"late"')$$);
SELECT * FROM pg_temp.job_row(11);

-- every claim above issued exactly one token: no token was ever shared
SELECT count(*) AS claims, count(DISTINCT value) AS distinct_tokens FROM token_names;

SET client_min_messages = warning;
DROP SCHEMA job_queue CASCADE;
RESET client_min_messages;
