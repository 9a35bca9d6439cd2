'use strict';
// A graphile-worker 0.18 worker for the fencing recipe (see
// ../../../docs/queues.md).
//
//   node worker.js setup            run graphile-worker's migrations
//   node worker.js send N [QUEUE]   add N jobs of task "work" (in a named queue)
//   node worker.js work fenced|unfenced
//
// Connection: PGHOST, PGPORT, PGDATABASE, PGUSER.  Modules: NODE_PATH
// pointing at examples/queues/node/node_modules (npm ci there);
// graphile-worker 0.18 needs Node.js 22.18 or later.
//
// Each delivery is a long job: it writes the job's row of qtest.domain
// three times, a second or more apart, with the token its claim stamped
// (helpers.job.fencing_token), and heartbeats every HEARTBEAT_MS meanwhile
// (locked_at moves forward, with the token declared); then it completes
// the job itself: SET LOCAL fencing.token and graphile-worker's own
// completion statement (delete the job, unlock its named queue), in one
// transaction.  Fenced, the writes go through fencing.fence_advance and
// the heartbeat and the DELETE through the claim_guard triggers; unfenced,
// plainly.  One line of JSON per event on stdout.
const { Pool } = require('pg');
const { run, makeWorkerUtils } = require('graphile-worker');

const [cmd, arg] = process.argv.slice(2);
const conn = {
  host: process.env.PGHOST,
  port: process.env.PGPORT,
  database: process.env.PGDATABASE,
  user: process.env.PGUSER || process.env.USER,
  // a client-side deadline on every statement (docs/ha.md)
  query_timeout: 10000,
  // names this process's connections (t/080 freezes a worker only when
  // none of them is inside a transaction)
  application_name: `qtest-${process.pid}`,
};
const HEARTBEAT_MS = Number(process.env.HEARTBEAT_MS || 500);
const STEP_MS = Number(process.env.STEP_MS || 1000);
const log = (ev) => process.stdout.write(JSON.stringify({ pid: process.pid, ...ev }) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function inTransaction(pool, token, fn) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    if (token !== null) await client.query("SELECT set_config('fencing.token', $1, true)", [token]);
    const r = await fn(client);
    await client.query('COMMIT');
    return r;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

async function write(pool, fenced, job, token, step) {
  try {
    await inTransaction(pool, null, async (c) => {
      await c.query(fenced
        ? `UPDATE qtest.domain SET fence = fencing.fence_advance(fence, $2, true),
                                   last_token = $2, writes = writes + 1 WHERE job = $1`
        : 'UPDATE qtest.domain SET last_token = $2, writes = writes + 1 WHERE job = $1',
      [`gw:${job}`, token]);
      await c.query(`INSERT INTO qtest.history (job, kind, token, step, worker)
                     VALUES ($1, 'write', $2, $3, $4)`, [`gw:${job}`, token, step, process.pid]);
    });
    log({ ev: 'write', job, token, step, ok: true });
  } catch (e) {
    log({ ev: 'write', job, token, step, ok: false, code: e.code, msg: e.message });
    throw e;
  }
}

// The completion graphile-worker would send (complete_job_q: delete the
// job and unlock its named queue, if it has one, held by the job's own
// locked_by), sent by the task with its token declared.  graphile-worker's
// own completion after it finds nothing.
const COMPLETE_JOB = `
  WITH j AS (DELETE FROM graphile_worker._private_jobs WHERE id = $1::bigint
             RETURNING job_queue_id, locked_by),
       q AS (UPDATE graphile_worker._private_job_queues AS job_queues
                SET locked_by = NULL, locked_at = NULL
               FROM j
              WHERE job_queues.id = j.job_queue_id AND job_queues.locked_by = j.locked_by)
  SELECT count(*)::int AS n FROM j`;

async function complete(pool, fenced, job, token) {
  try {
    const n = await inTransaction(pool, fenced ? token : null, async (c) => {
      const r = await c.query(COMPLETE_JOB, [job]);
      if (r.rows[0].n === 1) {
        await c.query(`INSERT INTO qtest.history (job, kind, token, worker)
                       VALUES ($1, 'complete', $2, $3)`, [`gw:${job}`, token, process.pid]);
      }
      return r.rows[0].n;
    });
    log({ ev: 'complete', job, token, ok: true, affected: n });
    if (n === 0) throw new Error(`job ${job} was already completed by a newer delivery`);
  } catch (e) {
    if (e.code) log({ ev: 'complete', job, token, ok: false, code: e.code, msg: e.message });
    throw e;
  }
}

// The heartbeat: locked_at of the delivery's own job moves forward, with
// the token declared.  It changes one row or raises: a refusal (LF001) or
// a job that is gone (LF003) both mean that this delivery is over.
async function heartbeat(pool, job, token) {
  try {
    await inTransaction(pool, token, (c) => c.query(
      `WITH u AS (UPDATE graphile_worker._private_jobs SET locked_at = now() WHERE id = $1::bigint RETURNING 1)
       SELECT fencing.expect_rows(count(*)) FROM u`,
      [job]));
    log({ ev: 'heartbeat', job, token, ok: true });
    return true;
  } catch (e) {
    log({ ev: 'heartbeat', job, token, ok: false, code: e.code, msg: e.message });
    return false;
  }
}

async function main() {
  const pool = new Pool({ ...conn, max: 4 });
  if (cmd === 'setup') {
    const utils = await makeWorkerUtils({ pgPool: pool });
    await utils.migrate();
    await utils.release();
    await pool.end();
    return;
  }
  if (cmd === 'send') {
    const utils = await makeWorkerUtils({ pgPool: pool });
    const queueName = process.argv[4];
    for (let i = 0; i < Number(arg); i++) await utils.addJob('work', { n: i }, queueName ? { queueName } : {});
    await utils.release();
    await pool.end();
    return;
  }
  if (cmd === 'work') {
    const fenced = arg !== 'unfenced';
    const runner = await run({
      pgPool: pool,
      concurrency: 1,
      noHandleSignals: true,
      pollInterval: 200,
      // graphile-worker's rescue of jobs locked for over 4 hours, every
      // 0.3 to 0.6 s instead of 8 to 10 minutes
      minResetLockedInterval: 300,
      maxResetLockedInterval: 600,
      logger: new (require('graphile-worker').Logger)(() => () => {}),
      taskList: {
        work: async (payload, helpers) => {
          const job = helpers.job.id;
          const token = helpers.job.fencing_token;
          log({ ev: 'start', job, token });
          let beating = true;
          const beats = (async () => {
            while (beating) {
              await sleep(HEARTBEAT_MS);
              if (beating) await heartbeat(pool, job, token);
            }
          })();
          try {
            for (let step = 1; step <= 3; step++) {
              await write(pool, fenced, job, token, step).catch(() => {});
              await sleep(STEP_MS + Math.floor(Math.random() * 300));
            }
            // (a worker would stop once a heartbeat was refused; this one
            // carries on, the worst case, to be refused)
            await complete(pool, fenced, job, token);
          } finally {
            beating = false;
            await beats;
          }
        },
      },
    });
    log({ ev: 'working', fenced });
    await runner.promise;
    return;
  }
  throw new Error(`unknown command ${cmd}`);
}

main().catch((e) => { log({ ev: 'fatal', msg: e.stack }); process.exit(1); });
