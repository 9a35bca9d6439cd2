#!/usr/bin/env node
// demo.js: the fencing story with node-postgres (pg), two workers in one
// process.
//
//   npm ci --prefix examples/node
//   node examples/node/demo.js ['postgresql://user@host:port/db']
//
// Worker A takes the lease "demo-node" for one second and writes row 1 of
// the table demo_node with its token.  A "pauses" (a GC pause, a frozen VM)
// while worker B asks for the lease, waiting until A's lease runs out, and
// writes row 1 with its newer token.  A wakes up and writes again with its
// old token: the write is refused with SQLSTATE LF001, and B's write stands.
//
// The table is guarded by the fencing.fence_guard trigger: each writer
// declares its token for the transaction (SET LOCAL fencing.token, here
// through set_config(..., true) so it can be a parameter), and the trigger
// refuses a write older than the row's fence.  The UPDATE itself does not
// mention the fence at all.
//
// Connects with the URL given as the only argument, else with the PG*
// environment variables (PGHOST, PGPORT, PGDATABASE, PGUSER, ...).  The
// database needs CREATE EXTENSION fencing; the demo (re)creates its table
// demo_node.  Exits 0 when the story went as told, 1 otherwise.
'use strict';

const { Client } = require('pg');

const LEASE = 'demo-node';
const TABLE = 'demo_node';
const STALE_TOKEN = 'LF001'; // fence_guard: the token is older than the row's fence

function say(who, text) {
  console.log(`[${who}] ${text}`);
}

async function connect() {
  const url = process.argv[2];
  // a client-side deadline on every query (docs/ha.md): a frozen server
  // keeps the connection open, and statement_timeout runs on the server
  const client = new Client({ ...(url ? { connectionString: url } : {}), query_timeout: 20000 });
  await client.connect();
  return client;
}

// A token (a string: node-postgres returns bigint as text), or null while
// another holder's lease is live.
async function acquire(client, holder, ttlSeconds, waitSeconds = 0) {
  const res = await client.query(
    'SELECT fencing.lease_acquire($1, $2, make_interval(secs => $3), wait => make_interval(secs => $4)) AS token',
    [LEASE, holder, ttlSeconds, waitSeconds]);
  return res.rows[0].token;
}

// Write row 1 in a transaction that declares the token; rejects with
// err.code === 'LF001' if a newer token has written the row.
async function guardedWrite(client, body, token) {
  await client.query('BEGIN');
  try {
    await client.query("SELECT set_config('fencing.token', $1, true)", [token]);
    const res = await client.query(`UPDATE ${TABLE} SET body = $1 WHERE id = 1`, [body]);
    if (res.rowCount !== 1) throw new Error(`row 1 of ${TABLE} is missing`);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

async function main() {
  const a = await connect();
  const b = await connect();
  let ok = true;
  try {
    await a.query(`DROP TABLE IF EXISTS ${TABLE}`);
    await a.query(`CREATE TABLE ${TABLE} (id int PRIMARY KEY, body text, fence bigint)`);
    await a.query(`CREATE TRIGGER ${TABLE}_guard BEFORE INSERT OR UPDATE OR DELETE ON ${TABLE}
                     FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence')`);
    await a.query(`INSERT INTO ${TABLE} VALUES (1, 'empty', 0)`);
    say('setup', `table ${TABLE} (guarded by fencing.fence_guard) ready, lease ${LEASE}`);

    const ta = await acquire(a, 'A', 1);
    if (ta === null) {
      say('A', 'the lease is held by someone else; run the demo again later');
      return 1;
    }
    say('A', `acquired lease ${LEASE}: token ${ta} (ttl 1 s)`);
    await guardedWrite(a, 'written by A', ta);
    say('A', `wrote row 1 with token ${ta}`);
    say('A', 'pauses (a GC pause): its lease runs out meanwhile');

    const tb = await acquire(b, 'B', 30, 10);
    if (tb === null) {
      say('B', 'did not get the lease within 10 s');
      return 1;
    }
    say('B', `acquired lease ${LEASE}: token ${tb} (after waiting for A's lease to expire)`);
    await guardedWrite(b, 'written by B', tb);
    say('B', `wrote row 1 with token ${tb}`);

    say('A', `wakes up and writes row 1 with token ${ta}`);
    try {
      await guardedWrite(a, 'late write by A', ta);
      say('A', 'write ACCEPTED: the stale write went through (this must not happen)');
      ok = false;
    } catch (err) {
      // LF005: a token from before a failover; a holder acquires again
      if (err.code === 'LF005') {
        say('A', 'token from before a failover (LF005): acquire again');
        return 1;
      }
      if (err.code !== STALE_TOKEN) throw err;
      say('A', `write REFUSED: ${err.code} ${err.message} (${err.detail})`);
    }
    const renew = await a.query("SELECT fencing.lease_renew($1, $2, '30 seconds') AS renewed", [LEASE, ta]);
    const renewed = renew.rows[0].renewed;
    say('A', `renew with token ${ta}: ${renewed ? 'renewed' : 'lost the lease'}; stopping`);
    ok = ok && !renewed;

    const row = (await b.query(`SELECT body, fence FROM ${TABLE} WHERE id = 1`)).rows[0];
    say('result', `row 1 = '${row.body}', fence ${row.fence}`);
    ok = ok && row.body === 'written by B' && row.fence === tb && BigInt(tb) > BigInt(ta);
    await b.query('SELECT fencing.lease_release($1, $2)', [LEASE, tb]);
  } finally {
    await a.end();
    await b.end();
  }
  console.log(ok ? 'OK: the stale write was refused' : 'FAILED: the story did not go as told');
  return ok ? 0 : 1;
}

main().then(
  (code) => { process.exitCode = code; },
  (err) => {
    console.error(`ERROR ${err.code || ''}: ${err.message}`);
    process.exitCode = 1;
  });
