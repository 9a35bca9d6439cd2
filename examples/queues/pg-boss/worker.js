'use strict';
// A pg-boss 12 worker for the fencing recipe (see ../../../docs/queues.md).
//
//   node worker.js setup            create pg-boss's schema and the queue
//   node worker.js send N           send N jobs
//   node worker.js supervise        run pg-boss's supervisor (expiry) every second
//   node worker.js work fenced|unfenced
//
// Connection: PGHOST, PGPORT, PGDATABASE, PGUSER.  Modules: NODE_PATH
// pointing at examples/queues/node/node_modules (npm ci there); pg-boss 12
// needs Node.js 22.12 or later.
//
// Each delivery is a long job: it writes the job's row of qtest.domain
// three times, over longer than the queue's heartbeatSeconds, with the
// token its claim stamped (job.data.fencing_token): fenced, through
// fencing.fence_advance; unfenced, plainly.  pg-boss heartbeats the job
// meanwhile.  The shim (fencing-shim.js) gives every completion, failure
// and heartbeat pg-boss sends the delivery's token.  One line of JSON per
// event on stdout.
const path = require('path');
const { pathToFileURL } = require('url');
const { Pool } = require('pg');
const { installShim } = require('./fencing-shim');

const QUEUE = 'fencing-demo';
const HEARTBEAT_SECONDS = 10; // pg-boss's minimum
const [cmd, arg] = process.argv.slice(2);
const conn = {
  host: process.env.PGHOST,
  port: process.env.PGPORT,
  database: process.env.PGDATABASE,
  user: process.env.PGUSER || process.env.USER,
  // a client-side deadline on every statement (docs/ha.md): a frozen
  // server does not answer, and statement_timeout would not fire there
  query_timeout: 10000,
  // names this process's connections (t/080 freezes a worker only when
  // none of them is inside a transaction)
  application_name: `qtest-${process.pid}`,
};
const log = (ev) => process.stdout.write(JSON.stringify({ pid: process.pid, ...ev }) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
  } finally {
    client.release();
  }
}

async function main() {
  const bossPath = require.resolve('pg-boss');
  const { PgBoss } = await import(pathToFileURL(bossPath));
  const Manager = (await import(pathToFileURL(path.join(path.dirname(bossPath), 'manager.js')))).default;
  // every call pg-boss makes for a claimed job brings the job's token
  // (fencing-shim.js); fenced, as plain ids, unfenced (the control) as job
  // objects, under pg-boss's own attempt fence
  const event = (r) => (r.op === 'touch' ? 'heartbeat' : r.op);
  installShim(Manager, {
    conn,
    passJobs: !(cmd === 'work' && arg !== 'unfenced'),
    onSettled: (r) => log({ ev: event(r), job: r.job, token: r.token, ok: true, affected: r.affected }),
    onRefused: (r) => log({ ev: event(r), job: r.job, token: r.token, ok: false, code: r.code, msg: r.message }),
  });
  const base = { ...conn, schedule: false };
  if (cmd === 'setup') {
    const boss = new PgBoss({ ...base, supervise: false });
    await boss.start();
    await boss.createQueue(QUEUE, { expireInSeconds: 300, heartbeatSeconds: HEARTBEAT_SECONDS,
                                    retryLimit: 50, retryDelay: 0 });
    await boss.stop({ graceful: false, wait: true });
    return;
  }
  if (cmd === 'send') {
    const boss = new PgBoss({ ...base, supervise: false, migrate: false });
    await boss.start();
    for (let i = 0; i < Number(arg); i++) await boss.send(QUEUE, { n: i });
    await boss.stop({ graceful: false, wait: true });
    return;
  }
  if (cmd === 'supervise') {
    const boss = new PgBoss({ ...base, supervise: true, migrate: false, superviseIntervalSeconds: 1 });
    boss.on('error', (e) => log({ ev: 'error', msg: e.message }));
    await boss.start();
    log({ ev: 'supervising' });
    return;
  }
  if (cmd === 'work') {
    const fenced = arg !== 'unfenced';
    const pool = new Pool({ ...conn, max: 2 });
    const boss = new PgBoss({ ...base, supervise: false, migrate: false });
    boss.on('error', (e) => log({ ev: 'error', msg: e.message }));
    await boss.start();
    await boss.work(QUEUE, { batchSize: 1, pollingIntervalSeconds: 0.5, heartbeatRefreshSeconds: 1 },
      async ([job]) => {
        const token = job.data.fencing_token;
        log({ ev: 'start', job: job.id, token });
        // a long job: longer than heartbeatSeconds, alive by its heartbeats
        for (let step = 1; step <= 3; step++) {
          await write(pool, fenced, job.id, token, step);
          await sleep(HEARTBEAT_SECONDS * 1000 / 3 + Math.floor(Math.random() * 300));
        }
        // (a worker that minds job.signal stops here once a heartbeat was
        // refused; this one carries on, the worst case, to be refused)
        return { done: true };
      });
    log({ ev: 'working', fenced });
    return;
  }
  throw new Error(`unknown command ${cmd}`);
}

main().catch((e) => { log({ ev: 'fatal', msg: e.stack }); process.exit(1); });
