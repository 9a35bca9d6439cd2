'use strict';
// Red-team reproduction against the graphile-worker 0.18 recipe
// (examples/queues/graphile-worker/install.sql, as shipped), with the real
// graphile-worker 0.18.0 from npm: a job in a named queue (queueName), whose
// task completes itself as the recipe says (SET LOCAL fencing.token, DELETE
// its row: examples/queues/graphile-worker/worker.js).  graphile-worker's
// completeJobs for a job with job_queue_id is one statement that deletes the
// job AND unlocks its named queue (WITH j AS (DELETE ... RETURNING *) UPDATE
// _private_job_queues ... FROM j); the task's own DELETE came first, so j is
// empty and the queue stays locked by the pool: the next job of the queue is
// not run until graphile-worker's rescue unlocks the queue (4 hours).
//
//   NODE_PATH=.../node_modules node test/redq/graphile_named_queue.cjs [control]
//
// "control": the task does not delete its job (graphile-worker completes
// it, as without the recipe's completion): both jobs of the queue run.
//
// Connection: PGHOST, PGPORT, PGDATABASE, PGUSER; a database with the
// fencing extension and nothing else (the script migrates and installs).
const fs = require('fs');
const path = require('path');
const { Pool } = require('pg');
const { run, makeWorkerUtils, Logger } = require('graphile-worker');

const conn = { host: process.env.PGHOST, port: process.env.PGPORT, database: process.env.PGDATABASE,
               user: process.env.PGUSER || 'postgres' };
const control = process.argv[2] === 'control';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
  const pool = new Pool({ ...conn, max: 4 });
  const utils = await makeWorkerUtils({ pgPool: pool });
  await utils.migrate();
  if (!control)
    await pool.query(fs.readFileSync(path.join(__dirname, '../../examples/queues/graphile-worker/install.sql'), 'utf8'));
  const ran = [];
  const runner = await run({
    pgPool: pool, concurrency: 1, noHandleSignals: true, pollInterval: 200,
    logger: new Logger(() => () => {}),
    taskList: {
      work: async (payload, helpers) => {
        const token = helpers.job.fencing_token;
        if (control) {
          ran.push({ n: payload.n });
          return;
        }
        const c = await pool.connect();
        try {
          await c.query('BEGIN');
          await c.query("SELECT set_config('fencing.token', $1, true)", [String(token)]);
          const r = await c.query('DELETE FROM graphile_worker._private_jobs WHERE id = $1::bigint', [helpers.job.id]);
          await c.query('COMMIT');
          ran.push({ n: payload.n, token: String(token), deleted: r.rowCount });
        } finally {
          c.release();
        }
      },
    },
  });
  // two jobs in the same named queue, and one in none (the control)
  await utils.addJob('work', { n: 1 }, { queueName: 'serial' });
  await utils.addJob('work', { n: 2 }, { queueName: 'serial' });
  await utils.addJob('work', { n: 3 });
  await sleep(5000);
  console.log('jobs run in 5 s:', JSON.stringify(ran));
  const { rows: q } = await pool.query(
    `SELECT queue_name, locked_by IS NOT NULL AS locked, is_available FROM graphile_worker._private_job_queues`);
  console.log('named queue:', JSON.stringify(q));
  const { rows: left } = await pool.query(
    `SELECT id, payload->>'n' AS n, attempts, locked_by FROM graphile_worker._private_jobs ORDER BY id`);
  console.log('jobs left:', JSON.stringify(left));
  await runner.stop();
  await utils.release();
  await pool.end();
})().catch((e) => { console.error(e); process.exit(1); });
