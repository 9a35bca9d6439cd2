# scripts.sh DIR: writes the pgbench scripts of bench/queues/run.sh into
# DIR: <recipe>_fq.sql (with the recipe) and <recipe>_pq.sql (without),
# each one cycle of a worker: enqueue a job, claim one, heartbeat it twice,
# complete it, with the queue's own statements (the heartbeat: the queue's
# own where it has one, pg-boss's touchJobs and pgmq's set_vt, else the
# recipe's).  The fenced heartbeats and completion declare the claim's
# token in the same request, with SET LOCAL (\; joins them into one simple
# query, one implicit transaction); pg-boss's completion carries it in its
# output.  (A SELECT set_config(...) in its place costs a planned
# statement more: DECLARE=set_config measures that.)
set -euo pipefail
dir=$1
for S in fq pq; do
	if [ $S = pq ]; then
		decl=
	elif [ "${DECLARE:-set_local}" = set_config ]; then
		decl="SELECT set_config('fencing.token', :tok::text, true) \\; "
	else
		decl="SET LOCAL fencing.token = :tok \\; "
	fi
	cat >"$dir/boss_$S.sql" <<-SQL
		INSERT INTO $S.boss (data) VALUES ('{"n": 1}');
		WITH next AS (SELECT id FROM $S.boss WHERE state IN ('created', 'retry') ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) UPDATE $S.boss AS j SET state = 'active', started_on = now(), heartbeat_on = now(), retry_count = CASE WHEN j.started_on IS NOT NULL THEN j.retry_count + 1 ELSE j.retry_count END FROM next WHERE j.id = next.id RETURNING j.id, coalesce(j.data->>'fencing_token', '0') AS tok \\gset
		${decl}UPDATE $S.boss SET heartbeat_on = clock_timestamp() WHERE name = 'q' AND id = :id AND state = 'active';
		${decl}UPDATE $S.boss SET heartbeat_on = clock_timestamp() WHERE name = 'q' AND id = :id AND state = 'active';
		UPDATE $S.boss SET completed_on = now(), state = 'completed', output = jsonb_build_object('fencing_token', :tok::text) WHERE id = :id AND state = 'active';
	SQL
	cat >"$dir/gw_$S.sql" <<-SQL
		INSERT INTO $S.gw (payload) VALUES ('{}');
		WITH j AS (SELECT id FROM $S.gw WHERE locked_at IS NULL ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) UPDATE $S.gw AS jobs SET attempts = jobs.attempts + 1, locked_by = 'worker', locked_at = now() FROM j WHERE jobs.id = j.id RETURNING jobs.id, coalesce(jobs.fencing_token, 0) AS tok \\gset
		${decl}UPDATE $S.gw SET locked_at = clock_timestamp() WHERE id = :id;
		${decl}UPDATE $S.gw SET locked_at = clock_timestamp() WHERE id = :id;
		${decl}DELETE FROM $S.gw WHERE id = :id;
	SQL
	cat >"$dir/river_$S.sql" <<-SQL
		INSERT INTO $S.river (args) VALUES ('{}');
		WITH locked_jobs AS (SELECT id FROM $S.river WHERE state = 'available' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) UPDATE $S.river AS r SET state = 'running', attempt = r.attempt + 1, attempted_at = now(), attempted_by = array_append(r.attempted_by, 'client') FROM locked_jobs WHERE r.id = locked_jobs.id RETURNING r.id, coalesce(r.metadata->>'fencing_token', '0') AS tok \\gset
		${decl}UPDATE $S.river SET attempted_at = clock_timestamp(), metadata = metadata || '{"progress": 1}' WHERE id = :id AND state = 'running';
		${decl}UPDATE $S.river SET attempted_at = clock_timestamp(), metadata = metadata || '{"progress": 2}' WHERE id = :id AND state = 'running';
		${decl}UPDATE $S.river SET finalized_at = now(), state = 'completed' WHERE id = :id AND state = 'running';
	SQL
	cat >"$dir/oban_$S.sql" <<-SQL
		INSERT INTO $S.oban (args) VALUES ('{}');
		WITH subset AS MATERIALIZED (SELECT id FROM $S.oban WHERE state = 'available' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) UPDATE $S.oban AS j SET state = 'executing', attempted_at = timezone('UTC', now()), attempted_by = ARRAY['node', 'uuid'], attempt = j.attempt + 1 FROM subset WHERE j.id = subset.id AND j.attempt < j.max_attempts RETURNING j.id, coalesce(j.meta->>'fencing_token', '0') AS tok \\gset
		${decl}UPDATE $S.oban SET attempted_at = timezone('UTC', clock_timestamp()), meta = meta || '{"progress": 1}' WHERE id = :id AND state = 'executing';
		${decl}UPDATE $S.oban SET attempted_at = timezone('UTC', clock_timestamp()), meta = meta || '{"progress": 2}' WHERE id = :id AND state = 'executing';
		${decl}UPDATE $S.oban SET state = 'completed', completed_at = timezone('UTC', now()) WHERE id = :id;
	SQL
	# Solid Queue has no per-claim heartbeat (its process heartbeat is one
	# row per process, which the recipe leaves alone): claim + complete
	cat >"$dir/sq_$S.sql" <<-SQL
		WITH j AS (INSERT INTO $S.sq_jobs DEFAULT VALUES RETURNING id) INSERT INTO $S.sq_ready (job_id) SELECT id FROM j;
		WITH r AS (DELETE FROM $S.sq_ready WHERE id IN (SELECT id FROM $S.sq_ready ORDER BY priority, job_id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING job_id) INSERT INTO $S.sq_claimed (job_id, process_id) SELECT job_id, 1 FROM r RETURNING job_id AS id, coalesce(fencing_token, 0) AS tok \\gset
		${decl}WITH c AS (DELETE FROM $S.sq_claimed WHERE job_id = :id RETURNING job_id) UPDATE $S.sq_jobs SET finished_at = now() WHERE id IN (SELECT job_id FROM c);
	SQL
	cat >"$dir/pgmq_$S.sql" <<-SQL
		INSERT INTO $S.mq (message) VALUES ('{"n": 1}');
		WITH cte AS (SELECT msg_id FROM $S.mq WHERE vt <= clock_timestamp() ORDER BY msg_id LIMIT 1 FOR UPDATE SKIP LOCKED) UPDATE $S.mq AS m SET vt = clock_timestamp() + interval '30 seconds', read_ct = m.read_ct + 1 FROM cte WHERE m.msg_id = cte.msg_id RETURNING m.msg_id AS id, coalesce(m.headers->>'fencing_token', '0') AS tok \\gset
		${decl}UPDATE $S.mq SET vt = clock_timestamp() + interval '30 seconds' WHERE msg_id = :id;
		${decl}UPDATE $S.mq SET vt = clock_timestamp() + interval '30 seconds' WHERE msg_id = :id;
		${decl}DELETE FROM $S.mq WHERE msg_id = :id;
	SQL
done
