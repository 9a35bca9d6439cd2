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
// meanwhile.  The shim below gives every completion, failure and
// heartbeat pg-boss sends the delivery's token.  One line of JSON per
// event on stdout.
const path = require('path');
const { pathToFileURL } = require('url');
const { Pool, Client } = require('pg');

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
};
const log = (ev) => process.stdout.write(JSON.stringify({ pid: process.pid, ...ev }) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The token of each job this process is working on, by job id.
const tokens = new Map();

function withToken(data, token) {
  if (data instanceof Error) {
    data.fencing_token = token;
    return data;
  }
  if (data && typeof data === 'object' && !Array.isArray(data)) return { ...data, fencing_token: token };
  if (data === null || data === undefined) return { fencing_token: token };
  return { value: data, fencing_token: token };
}

// A db for pg-boss's options.db that runs each statement in a transaction
// declaring the token (SET LOCAL, so it works through a transaction pooler).
function tokenDb(token) {
  return {
    async executeSql(text, values) {
      const client = new Client(conn);
      await client.connect();
      try {
        await client.query('BEGIN');
        await client.query("SELECT set_config('fencing.token', $1, true)", [token]);
        const r = await client.query(text, values);
        await client.query('COMMIT');
        return r;
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
}

// pg-boss calls complete() with the handler's result, fail() with its
// error (or one of its own when the handler outlives the job's expiry),
// and touch() on every heartbeat, each for a whole batch.  The shim splits
// a batch into one call per job and gives each the job's token: complete()
// and fail() in the output, touch() declared.  A refused call is logged
// and reported as "not settled", which is what pg-boss reads as a lost
// claim (it aborts the job's signal).  Fenced, the shim passes pg-boss the
// job's id alone, not the job: pg-boss 12's own attempt fence (retry_count,
// which restore() resets) then stays out of the way and the claim stamp
// decides, with an error rather than a row count of 0; unfenced, pg-boss's
// own fence is left as it ships.  pg-boss does not export its Manager
// class; it is imported from its module beside index.js.
function installShim(Manager, fenced) {
  for (const op of ['complete', 'fail', 'touch']) {
    const original = Manager.prototype[op];
    Manager.prototype[op] = async function (name, id, ...rest) {
      const items = Array.isArray(id) ? id : [id];
      const keyOf = (item) => (typeof item === 'string' ? item : item.id);
      if (!items.every((item) => tokens.has(keyOf(item)))) return original.call(this, name, id, ...rest);
      const total = { jobs: [], requested: 0, affected: 0, settled: [] };
      for (const item of items) {
        const job = keyOf(item);
        const token = tokens.get(job);
        let args = rest;
        if (op === 'touch') args = [{ ...(rest[0] || {}), db: tokenDb(token) }];
        else args = [withToken(rest[0], token), ...rest.slice(1)];
        try {
          const r = await original.call(this, name, [fenced ? job : item], ...args);
          log({ ev: op === 'touch' ? 'heartbeat' : op, job, token, ok: true, affected: r.affected });
          total.affected += r.affected;
          total.settled.push(...(r.settled || []));
          if (op !== 'touch') tokens.delete(job);
        } catch (e) {
          log({ ev: op === 'touch' ? 'heartbeat' : op, job, token, ok: false, code: e.code, msg: e.message });
          if (op !== 'touch') tokens.delete(job);
        }
        total.jobs.push(job);
        total.requested++;
      }
      return total;
    };
  }
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
  } finally {
    client.release();
  }
}

async function main() {
  const bossPath = require.resolve('pg-boss');
  const { PgBoss } = await import(pathToFileURL(bossPath));
  const Manager = (await import(pathToFileURL(path.join(path.dirname(bossPath), 'manager.js')))).default;
  installShim(Manager, cmd === 'work' && arg !== 'unfenced');
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
        tokens.set(job.id, token);
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
