--
-- A name has one kind (lease or semaphore) and one number of slots,
-- stored in each of its rows.  An acquire of another kind, or of a
-- semaphore with another number of slots, is refused with LF021 and
-- changes nothing while any slot of the name is held or inside its lock
-- delay; once every slot is free (released, or expired past its lock
-- delay), the next acquire gives the name its own kind and slot count.
-- (Issue 23, item 5: a lease and a semaphore shared a name; the races are
-- in specs/lease_kind_race.spec.)
--
\i sql/include/case_harness.sql
\set VERBOSITY default
CREATE FUNCTION pg_temp.rows_of(n text)
RETURNS TABLE (slot integer, kind text, slots integer, holder text, state text)
LANGUAGE sql AS $$
	SELECT slot, kind, slots, holder, state FROM fencing.lease_status
	 WHERE name = n ORDER BY slot
$$;
-- wait (on a condition, not a duration) until a slot is in a state
CREATE FUNCTION pg_temp.wait_state(n text, s integer, st text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
	WHILE (SELECT state FROM fencing.lease_status WHERE name = n AND slot = s)
		  IS DISTINCT FROM st LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN st;
END
$$;
-- wait until a slot is free for others: expired past its lock delay
CREATE FUNCTION pg_temp.wait_available(n text, s integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	WHILE (SELECT available_at FROM fencing.lease_status WHERE name = n AND slot = s)
		  > clock_timestamp() LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	RETURN true;
END
$$;
CREATE ROLE regress_kind_a NOLOGIN;
CREATE ROLE regress_kind_b NOLOGIN;
GRANT USAGE ON SCHEMA fencing TO regress_kind_a, regress_kind_b;

-- the review's case: A's lease "printer" has expired but is inside its
-- 60 s lock delay.  Another role's lease_acquire gets NULL; its
-- semaphore_acquire used to get slot 1, a second live holder.  Now it is
-- refused, and changes nothing.
SET ROLE regress_kind_a;
SET fencing.lock_delay = '60s';
SELECT fencing.lease_acquire('kd_printer', 'A', '50 ms') AS pa \gset
RESET fencing.lock_delay;
SELECT pg_temp.wait_state('kd_printer', 0, 'expired');
RESET ROLE;
SET ROLE regress_kind_b;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('kd_printer', 'B', '30 s')$$),
	($$SELECT fencing.semaphore_acquire('kd_printer', 'B', 2, '30 s')$$),
	($$SELECT fencing.semaphore_acquire('kd_printer', 'B', 2, '30 s', wait => '1 min')$$),
	($$SELECT fencing.semaphore_acquire('kd_printer', 'B', 1, '30 s')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
RESET ROLE;
SELECT * FROM pg_temp.rows_of('kd_printer');
-- the full message
SET ROLE regress_kind_b;
SELECT fencing.semaphore_acquire('kd_printer', 'B', 2, '30 s');
RESET ROLE;

-- a lease on a semaphore's name: h holds slot 1, slot 0 is free.  The
-- lease used to give h slot 0 as well, a second slot of one holder.
SELECT fencing.semaphore_acquire('kd_sem', 'g', 2, '1 min') AS tg \gset
SELECT fencing.semaphore_acquire('kd_sem', 'h', 2, '1 min') AS th \gset
SELECT fencing.lease_release('kd_sem', :tg) AS g_released;
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('kd_sem', 'h', '1 min')$$),
	($$SELECT fencing.lease_acquire('kd_sem', 'other', '1 min')$$),
	-- waiting changes nothing: refused at once, not after the wait
	($$SELECT fencing.lease_acquire('kd_sem', 'other', '1 min', wait => '1 min')$$),
	-- another number of slots, more or fewer, for a new holder or h itself
	($$SELECT fencing.semaphore_acquire('kd_sem', 'other', 3, '1 min')$$),
	($$SELECT fencing.semaphore_acquire('kd_sem', 'other', 1, '1 min')$$),
	($$SELECT fencing.semaphore_acquire('kd_sem', 'h', 3, '1 min')$$),
	($$SELECT fencing.semaphore_acquire('kd_sem', 'h', 3, '1 min', wait => '1 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT * FROM pg_temp.rows_of('kd_sem');
-- the semaphore itself still works, with its slot count
SELECT fencing.semaphore_acquire('kd_sem', 'i', 2, '1 min') AS ti \gset
SELECT * FROM pg_temp.rows_of('kd_sem');

-- a semaphore on a held lease's name, and on its own name with another
-- slot count, whoever asks
SELECT fencing.lease_acquire('kd_lease', 'j', '1 min') AS tj \gset
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.semaphore_acquire('kd_lease', 'j', 2, '1 min')$$),
	($$SELECT fencing.semaphore_acquire('kd_lease', 'k', 1, '1 min')$$),
	-- the holder's own lease again: still a lease, a new token
	($$SELECT fencing.lease_acquire('kd_lease', 'j', '1 min') > 0$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT * FROM pg_temp.rows_of('kd_lease');

-- once no slot is held, the next acquire decides: every row of the name
-- takes its kind and slot count.  Slots above a smaller count are not
-- handed out again.
SELECT fencing.lease_release('kd_sem', token) AS released
  FROM fencing.lease_status WHERE name = 'kd_sem' AND state = 'held';
SELECT fencing.semaphore_acquire('kd_sem', 'l', 3, '1 min') AS tl \gset
SELECT * FROM pg_temp.rows_of('kd_sem');
SELECT fencing.lease_release('kd_sem', :tl) AS released;
SELECT fencing.lease_acquire('kd_sem', 'm', '1 min') AS tm \gset
SELECT * FROM pg_temp.rows_of('kd_sem');
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.semaphore_acquire('kd_sem', 'n', 3, '1 min')$$),
	($$SELECT fencing.semaphore_acquire('kd_sem', 'n', 1, '1 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT fencing.lease_release('kd_sem', :tm) AS released;
SELECT fencing.semaphore_acquire('kd_sem', 'n', 1, '1 min') AS tn \gset
SELECT fencing.semaphore_acquire('kd_sem', 'o', 1, '1 min') IS NULL AS one_slot_full;
SELECT * FROM pg_temp.rows_of('kd_sem');

-- a lease that expired is free for another kind once its lock delay is
-- over, not before
SET fencing.lock_delay = '60s';
SELECT fencing.lease_acquire('kd_delay', 'p', '50 ms') AS tp \gset
SET fencing.lock_delay = '100ms';
SELECT fencing.lease_acquire('kd_delay2', 'p', '50 ms') AS tp2 \gset
RESET fencing.lock_delay;
SELECT pg_temp.wait_state('kd_delay', 0, 'expired');
SELECT r.result, r.changes
  FROM pg_temp.run($$SELECT fencing.semaphore_acquire('kd_delay', 'q', 2, '1 min') IS NOT NULL$$) AS r;
SELECT pg_temp.wait_available('kd_delay2', 0);
SELECT fencing.semaphore_acquire('kd_delay2', 'q', 2, '1 min') > :tp2 AS q_took_it_over;
SELECT * FROM pg_temp.rows_of('kd_delay2');

-- a forced release frees every slot: an admin can change a name's kind
SELECT fencing.lease_force_release('kd_lease') AS forced;
SELECT fencing.semaphore_acquire('kd_lease', 'r', 2, '1 min') IS NOT NULL AS r_slot;
SELECT * FROM pg_temp.rows_of('kd_lease');

-- slot 0 purged while slot 1 stays held: a lease is still refused
SELECT fencing.semaphore_acquire('kd_purged', 's', 2, '1 min') AS ts \gset
SELECT fencing.semaphore_acquire('kd_purged', 't', 2, '1 min') AS tt \gset
SELECT fencing.lease_release('kd_purged', :ts) AS released;
SELECT fencing.lease_purge('0') >= 1 AS purged;
SELECT * FROM pg_temp.rows_of('kd_purged');
SELECT r.result, r.changes
  FROM pg_temp.run($$SELECT fencing.lease_acquire('kd_purged', 'u', '1 min')$$) AS r;
-- and the semaphore creates slot 0 again
SELECT fencing.semaphore_acquire('kd_purged', 'u', 2, '1 min') > :tt AS u_slot0;
SELECT * FROM pg_temp.rows_of('kd_purged');

-- in a transaction that rolls back, a change of kind is undone with it
SELECT fencing.lease_release('kd_purged', token) AS released
  FROM fencing.lease_status WHERE name = 'kd_purged' AND state = 'held';
BEGIN;
SELECT fencing.lease_acquire('kd_purged', 'v', '1 min') IS NOT NULL AS v_took_it;
SELECT * FROM pg_temp.rows_of('kd_purged');
ROLLBACK;
SELECT * FROM pg_temp.rows_of('kd_purged');

\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();

DELETE FROM fencing.leases WHERE name LIKE 'kd\_%';
REVOKE USAGE ON SCHEMA fencing FROM regress_kind_a, regress_kind_b;
DROP ROLE regress_kind_a, regress_kind_b;
