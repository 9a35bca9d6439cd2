'use strict';
// t/queues/pgboss_stale.cjs MODE: the red team's pg-boss 12 reproductions
// (docs/queues.md, "The audit"), with the real pg-boss from npm.  A is a
// delivery frozen past heartbeatSeconds, B a newer delivery of the same job.
// Every PgBoss instance runs with the recipe's shim
// (examples/queues/pg-boss/fencing-shim.js), as the recipe's workers do.
//
//   MODE fenced     the database has the recipe (install.sql)
//   MODE unfenced   the recipe without its guards (the claim still stamps);
//                   the shim passes job objects, under pg-boss's own
//                   attempt fence: the control
//   MODE noshim     the recipe, and a worker without the shim (only the
//                   perJobResults case)
//
// Connection: PGHOST, PGPORT, PGDATABASE, PGUSER, a superuser (the test
// ages a heartbeat with session_replication_role instead of waiting);
// pg-boss's schema must exist.  One line of JSON per outcome on stdout, for
// t/080_queues_node.pl.  Waits are for conditions, never fixed sleeps.
const path = require('path');
const { pathToFileURL } = require('url');
const { Client } = require('pg');
const { installShim } = require('../../examples/queues/pg-boss/fencing-shim');

const mode = process.argv[2];
const conn = { host: process.env.PGHOST, port: process.env.PGPORT, database: process.env.PGDATABASE,
               user: process.env.PGUSER || process.env.USER, query_timeout: 10000 };
const out = (c, fields) => process.stdout.write(JSON.stringify({ case: c, ...fields }) + '\n');

(async () => {
  const bossPath = require.resolve('pg-boss');
  const { PgBoss } = await import(pathToFileURL(bossPath));
  const dist = path.dirname(bossPath);
  const Manager = (await import(pathToFileURL(path.join(dist, 'manager.js')))).default;
  const plans = await import(pathToFileURL(path.join(dist, 'plans.js')));
  const refused = [];
  const settled = [];
  if (mode !== 'noshim')
    installShim(Manager, { conn, passJobs: mode === 'unfenced',
                           onRefused: (r) => refused.push(r), onSettled: (r) => settled.push(r) });
  // the Manager behind a PgBoss (restore() is the Manager's in 12.38.0;
  // pg-boss's worker calls it for the jobs past localGroupConcurrency)
  const managers = new Map();
  const fetch = Manager.prototype.fetch;
  Manager.prototype.fetch = function (...args) {
    managers.set(this.config.__instance, this);
    return fetch.apply(this, args);
  };
  const sql = new Client(conn);
  await sql.connect();
  const instance = async (name) => {
    const boss = new PgBoss({ ...conn, supervise: false, schedule: false, migrate: false, __instance: name });
    boss.on('error', () => {});
    await boss.start();
    return boss;
  };
  const A = await instance('A');
  const B = await instance('B');
  const C = await instance('C');
  const tableOf = async (q) => (await sql.query('SELECT table_name FROM pgboss.queue WHERE name = $1', [q])).rows[0].table_name;
  const row = async (id) => (await sql.query(
    `SELECT state, retry_count, data->>'fencing_token' AS stamp, output FROM pgboss.job WHERE id = $1`, [id])).rows[0];
  // one call: "ok <affected>", or the code it was refused or failed with
  const call = async (f) => {
    const before = refused.length;
    try {
      const r = await f();
      if (refused.length > before) return refused[refused.length - 1].code;
      if (typeof r === 'number') return `ok ${r}`;
      if (r && r.updated !== undefined) return `ok ${r.updated}`;
      return r && r.affected !== undefined ? `ok ${r.affected}` : 'ok';
    } catch (e) {
      return e.code || e.message;
    }
  };
  const fetchOne = async (boss, q) => (await boss.fetch(q))[0];
  // A freezes: the supervisor fails its job for a lost heartbeat
  // (plans.failJobsByHeartbeat, as supervise() sends it)
  const expire = async (q, id) => {
    await sql.query('SET session_replication_role = replica');
    await sql.query(`UPDATE pgboss.job SET heartbeat_on = now() - interval '1 hour' WHERE id = $1`, [id]);
    await sql.query('SET session_replication_role = origin');
    await sql.query(plans.failJobsByHeartbeat('pgboss', await tableOf(q), [q], false));
  };
  // pg-boss's restoreJobs as its worker sends it, with no token
  const rawRestore = async (q, id) => (await sql.query(plans.restoreJobs('pgboss', await tableOf(q)), [q, [id]])).rowCount;
  const until = async (what, f, seconds = 60) => {
    const deadline = Date.now() + seconds * 1000;
    for (;;) {
      if (await f()) return true;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const queue = async (q, options = {}) =>
    A.createQueue(q, { expireInSeconds: 300, heartbeatSeconds: 10, retryLimit: 5, retryDelay: 0, ...options });

  if (mode !== 'noshim') {
    // H1: complete(.., { includeQueued: true }) of A, after B failed the job back to retry
    {
      const q = 'h1';
      await queue(q);
      const id = await A.send(q, { n: 1 });
      const a = await fetchOne(A, q);
      await expire(q, id);
      const b = await fetchOne(B, q);
      out('h1', { step: 'newer claim', same_job: a.id === b.id && b.id === id,
                  newer: BigInt(b.data.fencing_token) > BigInt(a.data.fencing_token) });
      out('h1', { step: 'B fails', result: await call(() => B.fail(q, b.id, new Error('B failed'))) });
      out('h1', { step: 'A completes, includeQueued',
                  result: await call(() => A.complete(q, a.id, { by: 'A' }, { includeQueued: true })) });
      const r = await row(id);
      out('h1', { step: 'row', state: r.state, by: r.output && r.output.by ? r.output.by : null });
    }
    // H2: restore of A after B's claim, and after the job was completed
    {
      const q = 'h2';
      await queue(q);
      const id = await A.send(q, { n: 2 });
      const a = await fetchOne(A, q);
      await expire(q, id);
      const b = await fetchOne(B, q);
      const mA = managers.get('A');
      out('h2', { step: 'A restores (shim, its token)', result: await call(() => mA.restore(q, a.id)) });
      out('h2', { step: 'A restores (raw, no token)', result: await call(() => rawRestore(q, id)) });
      const c = await fetchOne(C, q);
      out('h2', { step: 'C claims too', claimed: !!c });
      out('h2', { step: 'B completes', result: await call(() => B.complete(q, b.id, { by: 'B' })) });
      if (c) await call(() => C.complete(q, c.id, { by: 'C' }));
      out('h2', { step: 'A restores the completed job (raw)', result: await call(() => rawRestore(q, id)) });
      out('h2', { step: 'A restores the completed job (shim)', result: await call(() => mA.restore(q, a.id)) });
      out('h2', { step: 'row', state: (await row(id)).state });
    }
    // H2, after a restore: A's cancel(job) and deleteJob(job) pass pg-boss's
    // attempt fence (restore() cleared started_on: B's claim did not raise
    // retry_count)
    {
      const q = 'h2r';
      await queue(q);
      const id = await A.send(q, { n: 3 });
      const a = await fetchOne(A, q);
      await call(() => managers.get('A').restore(q, a.id));
      out('h2r', { step: 'A restores its own claim (live)', state: (await row(id)).state });
      const b = await fetchOne(B, q);
      out('h2r', { step: 'newer claim', same_job: b.id === id, same_retry_count: a.retryCount === b.retryCount });
      out('h2r', { step: 'A cancels (job object)', result: await call(() => A.cancel(q, a)) });
      out('h2r', { step: 'A deletes (job object)', result: await call(() => A.deleteJob(q, a)) });
      out('h2r', { step: 'B completes', result: await call(() => B.complete(q, b.id, { by: 'B' })) });
      const r = await row(id);
      out('h2r', { step: 'row', state: r ? r.state : 'gone' });
    }
    // M1: update() with data a claim could not stamp
    {
      const q = 'm1';
      await queue(q);
      const id1 = await A.send(q, { n: 4 });
      const id2 = await A.send(q, { n: 5 });
      out('m1', { step: 'update with array data', result: await call(() => A.update(q, [1, 2], { id: id1 })) });
      const fetched = [];
      for (let i = 0; i < 3; i++) {
        try {
          const jobs = await A.fetch(q);
          fetched.push(jobs.length ? 'job' : 'none');
        } catch (e) {
          fetched.push(e.code);
        }
      }
      out('m1', { step: 'three fetches', fetched, second_job: (await row(id2)).state });
    }
    // localGroupConcurrency: pg-boss's worker restores the jobs past it,
    // with the token the shim learnt from the fetch; both jobs run
    {
      const q = 'lgc';
      await queue(q);
      const ids = [await A.send(q, { n: 6 }, { group: { id: 'g' } }), await A.send(q, { n: 7 }, { group: { id: 'g' } })];
      const before = refused.length;
      await A.work(q, { batchSize: 2, localGroupConcurrency: 1, pollingIntervalSeconds: 0.5 }, async () => ({ done: true }));
      await until('both grouped jobs completed', async () =>
        (await sql.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE id = ANY($1) AND state = 'completed'`, [ids])).rows[0].n === 2);
      out('lgc', { step: 'both completed', refused: refused.length - before,
                   restored: settled.filter((r) => r.op === 'restore' && ids.includes(r.job)).length });
      await A.offWork(q);
    }
  }
  // M5: perJobResults settles with pg-boss's private #completeWithOutputs
  // and #failWithOutputs; the shim gives each output its token (and fails a
  // job the handler left out with it).  Without the shim: LF004, and the
  // jobs stay active until their heartbeat expires
  {
    const q = 'm5';
    await queue(q);
    const ids = [await A.send(q, { n: 8 }), await A.send(q, { n: 9 })];
    const errors = [];
    A.on('error', (e) => errors.push(e.code || e.message));
    await A.work(q, { batchSize: 2, perJobResults: true, pollingIntervalSeconds: 0.5 },
      async (jobs) => [{ id: jobs.find((j) => j.data.n === 8).id, status: 'completed', output: { ok: 1 } }]);
    await until('both jobs settled, or a settle refused', async () =>
      errors.some((e) => /^LF0/.test(e)) ||
      (await sql.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE id = ANY($1) AND state <> 'active' AND state <> 'created'`, [ids])).rows[0].n === 2);
    await A.offWork(q);
    const rows = (await sql.query(
      `SELECT data->>'n' AS n, state, output->>'fencing_token' = data->>'fencing_token' AS token_in_output
         FROM pgboss.job WHERE id = ANY($1) ORDER BY data->>'n'`, [ids])).rows;
    out('m5', { step: 'settled', rows, refused: errors.filter((e) => /^LF0/.test(e)).slice(0, 1) });
  }

  await sql.end();
  for (const boss of [A, B, C]) await boss.stop({ graceful: false, wait: true });
})().catch((e) => {
  process.stdout.write(JSON.stringify({ case: 'fatal', msg: e.stack }) + '\n');
  process.exit(1);
});
