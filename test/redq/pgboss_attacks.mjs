// Red-team reproductions against the pg-boss 12 recipe
// (examples/queues/pg-boss/install.sql, as shipped), with the real pg-boss
// 12.38.0 from npm and its public API only.
//
//   NODE_PATH=.../node_modules node test/redq/pgboss_attacks.mjs
//
// Connection: PGHOST, PGPORT, PGDATABASE, PGUSER; the database has the
// fencing extension, pg-boss's schema with queue "q" (expireInSeconds 300,
// heartbeatSeconds 10, retryLimit 5, retryDelay 0), and the recipe.
// "A" is a delivery frozen past heartbeatSeconds; the test ages its
// heartbeat with the triggers off (session_replication_role) instead of
// waiting, then runs the supervisor's own expiry statement
// (plans.failJobsByHeartbeat, as boss.supervise() sends it; supervise()
// itself runs its maintenance at most once per interval).
import { createRequire } from 'module';
const require = createRequire(import.meta.url);
const { PgBoss } = await import(require.resolve('pg-boss'));
const plans = await import(require.resolve('pg-boss').replace(/index\.js$/, 'plans.js'));
const { Client } = require('pg');

const conn = { host: process.env.PGHOST, port: process.env.PGPORT, database: process.env.PGDATABASE,
               user: process.env.PGUSER || 'postgres' };
const Q = 'q';
const boss = new PgBoss({ ...conn, supervise: false, schedule: false, migrate: false });
await boss.start();
const sql = new Client(conn);
await sql.connect();
const row = async (id) => (await sql.query(
  `SELECT state, retry_count, data->>'fencing_token' AS stamp, output FROM pgboss.job WHERE id = $1`, [id])).rows[0];
const show = (label, v) => console.log(label.padEnd(34), JSON.stringify(v));
const attempt = async (label, f) => {
  try { show(label, await f()); } catch (e) { show(label, `${e.code}: ${e.message}`); }
};
// A freezes: its heartbeat is older than heartbeatSeconds; pg-boss's supervisor fails it (retry)
async function expire(id) {
  await sql.query(`SET session_replication_role = replica`);
  await sql.query(`UPDATE pgboss.job SET heartbeat_on = now() - interval '1 hour' WHERE id = $1`, [id]);
  await sql.query(`SET session_replication_role = origin`);
  const { table } = (await sql.query(`SELECT table_name AS table FROM pgboss.queue WHERE name = $1`, [Q])).rows[0];
  await sql.query(plans.failJobsByHeartbeat('pgboss', table, [Q], false));
}
// Manager.restore (not on the public PgBoss object in 12.38.0): the
// statement pg-boss's worker sends for the jobs of a fetched batch past
// localGroupConcurrency (manager.js, onFetch), plans.restoreJobs
async function restore(id) {
  const { table } = (await sql.query(`SELECT table_name AS table FROM pgboss.queue WHERE name = $1`, [Q])).rows[0];
  return (await sql.query(plans.restoreJobs('pgboss', table), [Q, [id]])).rowCount;
}
async function fetchOne() {
  const [job] = await boss.fetch(Q);
  return job;
}

// 1. complete(..., { includeQueued: true }) of a stale delivery, after the
//    newer delivery failed its run back to 'retry': fencing_complete asks for
//    OLD.state = 'active', completeJobs with includeQueued takes state < 'completed'.
{
  console.log('--- 1. stale complete with includeQueued');
  const id = await boss.send(Q, { n: 1 });
  const a = await fetchOne();
  await expire(id);
  const b = await fetchOne();
  show('newer claim', { a: a.data.fencing_token, b: b.data.fencing_token, same_job: a.id === b.id });
  await attempt('B fails (its token in the error)', () =>
    boss.fail(Q, b.id, { message: 'B failed', fencing_token: b.data.fencing_token }));
  show('row after B', await row(id));
  await attempt('A complete, no includeQueued', () =>
    boss.complete(Q, a.id, { by: 'A', fencing_token: a.data.fencing_token }));
  await attempt('A complete, includeQueued', () =>
    boss.complete(Q, a.id, { by: 'A', fencing_token: a.data.fencing_token }, { includeQueued: true }));
  show('row after A', await row(id));
}

// 2. restore of a stale delivery (the statement pg-boss's own worker sends
//    for jobs past localGroupConcurrency, manager.js onFetch):
//    restoreJobs has no state check and no trigger names it.  It takes the
//    job away from the newer delivery, whose completion then finds nothing,
//    and hands it to a third; after a completion it runs the job again.
{
  console.log('--- 2. stale restore');
  await sql.query(`DELETE FROM pgboss.job`);
  const id = await boss.send(Q, { n: 2 });
  const a = await fetchOne();
  await expire(id);
  const b = await fetchOne();
  show('newer claim', { a: a.data.fencing_token, b: b.data.fencing_token });
  await attempt('A restore', () => restore(a.id));
  show('row after A', await row(id));
  const c = await fetchOne();
  show('C gets it too', { c: c.data.fencing_token, retryCount: c.retryCount });
  await attempt('B complete (live, its token)', () =>
    boss.complete(Q, b.id, { by: 'B', fencing_token: b.data.fencing_token }));
  await attempt('C complete', () => boss.complete(Q, c.id, { by: 'C', fencing_token: c.data.fencing_token }));
  await attempt('A restore after completion', () => restore(a.id));
  show('row after A', await row(id));
}

// 3. with a restore in between (the case docs/queues.md names as the reason
//    the stamp decides), pg-boss's own attempt fence passes a stale
//    cancel() / deleteJob() given the job object; the recipe guards neither.
{
  console.log('--- 3. stale cancel / deleteJob after restore');
  await sql.query(`DELETE FROM pgboss.job`);
  const id = await boss.send(Q, { n: 3 });
  const a = await fetchOne();
  await restore(a.id);                   // localGroupConcurrency excess
  const b = await fetchOne();
  show('newer claim', { a: a.data.fencing_token, b: b.data.fencing_token, a_rc: a.retryCount, b_rc: b.retryCount });
  await attempt('A cancel(job object)', () => boss.cancel(Q, a));
  show('row after A', await row(id));
  await attempt('B complete (live, its token)', () =>
    boss.complete(Q, b.id, { by: 'B', fencing_token: b.data.fencing_token }));
  show('row after B', await row(id));
  const id2 = await boss.send(Q, { n: 3.5 });
  const a2 = await fetchOne();
  await restore(a2.id);
  const b2 = await fetchOne();
  await attempt('A deleteJob(job object)', () => boss.deleteJob(Q, a2));
  show('job row after A', (await row(id2)) ?? 'gone');
}

// 4. update() of a queued job with data that is not an object (pg-boss
//    does not check its shape): fencing_stampable is BEFORE INSERT only, so
//    the update passes, and every fetch of the queue then fails (42804):
//    the job stays first and nothing behind it is delivered.
{
  console.log('--- 4. update() with array data');
  await sql.query(`DELETE FROM pgboss.job`);
  const id1 = await boss.send(Q, { n: 4 });
  const id2 = await boss.send(Q, { n: 5 });
  await attempt('send([1,2]) (control)', () => boss.send(Q, [1, 2]));
  await attempt('update(id1, [1,2])', () => boss.update(Q, [1, 2], { id: id1 }));
  for (let i = 1; i <= 3; i++) await attempt(`fetch #${i}`, async () => (await boss.fetch(Q)).map((j) => j.id));
  show('job 2 still waiting', (await row(id2)).state);
}

await sql.end();
await boss.stop({ graceful: false, wait: true });
