'use strict';
// A pg-boss 10 worker for the fencing recipe (see ../../../docs/queues.md).
//
//   node worker.js setup            create pg-boss's schema and the queue
//   node worker.js send N           send N jobs
//   node worker.js supervise        run pg-boss's maintenance (expiry) every second
//   node worker.js work fenced|unfenced
//
// Connection: PGHOST, PGPORT, PGDATABASE, PGUSER.  Modules: NODE_PATH
// pointing at examples/queues/node/node_modules (npm ci there).
//
// Each delivery writes the job's row of qtest.domain twice, a little
// apart, with the token its claim stamped (job.data.fencing_token):
// fenced, through fencing.fence_advance; unfenced, plainly.  Its result
// and its errors carry the token, so pg-boss's complete() and fail()
// bring it to the guard.  One line of JSON per event on stdout.
const path = require('path');
const PgBoss = require('pg-boss');
const { Pool } = require('pg');

const QUEUE = 'fencing-demo';
const [cmd, arg] = process.argv.slice(2);
const conn = {
  host: process.env.PGHOST,
  port: process.env.PGPORT,
  database: process.env.PGDATABASE,
  user: process.env.PGUSER || process.env.USER,
};
const log = (ev) => process.stdout.write(JSON.stringify({ pid: process.pid, ...ev }) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The token of each job this process is working on, by job id.
const tokens = new Map();

// pg-boss calls complete() with the handler's result, and fail() with its
// error, or with an error of its own when the handler outlives the job's
// expiry.  This shim adds the delivery's token to every one of them, so
// even pg-boss's own timeout failure is fenced.  (pg-boss does not export
// its Manager class; it is found among the loaded modules.)
function withToken(data, token) {
  if (data instanceof Error) {
    data.fencing_token = token;
    return data;
  }
  if (data && typeof data === 'object' && !Array.isArray(data)) return { ...data, fencing_token: token };
  if (data === null || data === undefined) return { fencing_token: token };
  return { value: data, fencing_token: token };
}
const managerModule = Object.values(require.cache)
  .find((m) => m.filename.endsWith(path.join('pg-boss', 'src', 'manager.js')));
for (const op of ['complete', 'fail']) {
  const original = managerModule.exports.prototype[op];
  managerModule.exports.prototype[op] = function (name, id, data, options) {
    const ids = Array.isArray(id) ? id : [id];
    const token = ids.length === 1 ? tokens.get(ids[0]) : undefined;
    if (token !== undefined) {
      data = withToken(data, token);
      tokens.delete(ids[0]);
    }
    return original.call(this, name, id, data, options).then(
      (r) => { log({ ev: op, job: ids[0], token, ok: true, affected: r.affected }); return r; },
      (e) => { log({ ev: op, job: ids[0], token, ok: false, code: e.code, msg: e.message }); return { affected: 0 }; });
  };
}

async function write(pool, fenced, job, token, step) {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(fenced
      ? `UPDATE qtest.domain SET fence = fencing.fence_advance(fence, $2, true),
                                 last_token = $2, writes = writes + 1 WHERE job = $1`
      : 'UPDATE qtest.domain SET last_token = $2, writes = writes + 1 WHERE job = $1',
    [`boss:${job}`, token]);
    await client.query(`INSERT INTO qtest.history (job, kind, token, step, worker)
                        VALUES ($1, 'write', $2, $3, $4)`, [`boss:${job}`, token, step, process.pid]);
    await client.query('COMMIT');
    log({ ev: 'write', job, token, step, ok: true });
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    log({ ev: 'write', job, token, step, ok: false, code: e.code, msg: e.message });
    throw e;
  } finally {
    client.release();
  }
}

async function main() {
  if (cmd === 'setup') {
    const boss = new PgBoss({ ...conn, supervise: false, schedule: false });
    await boss.start();
    await boss.createQueue(QUEUE, { expireInSeconds: 2, retryLimit: 50, retryDelay: 0 });
    await boss.stop({ graceful: false, wait: true });
    return;
  }
  if (cmd === 'send') {
    const boss = new PgBoss({ ...conn, supervise: false, schedule: false, migrate: false });
    await boss.start();
    for (let i = 0; i < Number(arg); i++) await boss.send(QUEUE, { n: i });
    await boss.stop({ graceful: false, wait: true });
    return;
  }
  if (cmd === 'supervise') {
    const boss = new PgBoss({ ...conn, supervise: true, schedule: false, migrate: false,
                              maintenanceIntervalSeconds: 1 });
    boss.on('error', (e) => log({ ev: 'error', msg: e.message }));
    await boss.start();
    log({ ev: 'supervising' });
    return;
  }
  if (cmd === 'work') {
    const fenced = arg !== 'unfenced';
    const pool = new Pool({ ...conn, max: 2 });
    const boss = new PgBoss({ ...conn, supervise: false, schedule: false, migrate: false });
    boss.on('error', (e) => log({ ev: 'error', msg: e.message }));
    await boss.start();
    await boss.work(QUEUE, { batchSize: 1, pollingIntervalSeconds: 0.5 }, async ([job]) => {
      const token = job.data.fencing_token;
      tokens.set(job.id, token);
      log({ ev: 'start', job: job.id, token });
      await write(pool, fenced, job.id, token, 1);
      await sleep(500 + Math.floor(Math.random() * 300));
      await write(pool, fenced, job.id, token, 2);
      await sleep(300);
      return { fencing_token: token };
    });
    log({ ev: 'working', fenced });
    return;
  }
  throw new Error(`unknown command ${cmd}`);
}

main().catch((e) => { log({ ev: 'fatal', msg: e.stack }); process.exit(1); });
