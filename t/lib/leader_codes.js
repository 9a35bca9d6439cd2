'use strict';
// leader_codes.js README.md: examples/node/fencing_leader.js and its SQLSTATEs.
//
// The checks of t/lib/leader_codes.py, for the Node.js helper (run by
// t/063_clients.pl with libpq's PG* environment, as a superuser: it calls
// advance_tokens).  Prints "ok - NAME" or "not ok - NAME: why" per check;
// exits 0 when all passed.  The signal's reason is checked too: a
// LeadershipLost with lease_watch's reason.
const fs = require('fs');
const path = require('path');

const helper = path.join(__dirname, '..', '..', 'examples', 'node', 'fencing_leader');
const { DeadlineConnection, ElectionError, LeaderElector, LeadershipLost, sqlstateAction } =
  require(helper);

const WAIT = 60000;
let failed = 0;

function check(name, ok, why) {
  if (ok) {
    console.log(`ok - ${name}`);
  } else {
    failed += 1;
    console.log(`not ok - ${name}: ${why}`);
  }
}

async function until(cond, timeoutMs = WAIT) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

async function codeOf(p) {
  try {
    await p;
  } catch (e) {
    return e;
  }
  return null;
}

// the loss, as the work sees it: the abort event of lead.signal
function lostReason(lead, timeoutMs = WAIT) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      const r = lead.signal.reason;
      resolve(r instanceof LeadershipLost ? r.reason : `not a LeadershipLost: ${r}`);
    };
    const timer = setTimeout(() => resolve('no abort'), timeoutMs);
    if (lead.signal.aborted) done();
    else lead.signal.addEventListener('abort', done, { once: true });
  });
}

async function main() {
  const admin = new DeadlineConnection({});
  const q = (sql, values) => admin.query(sql, values || [], WAIT);

  // table
  const readme = fs.readFileSync(process.argv[2], 'utf8');
  const codes = [...new Set([...readme.matchAll(/^\| `(LF\d{3})` \|/mg)].map((m) => m[1]))];
  const missing = codes.filter((c) => sqlstateAction(c) === null);
  check('table', codes.length >= 12 && missing.length === 0,
    `${codes.length} codes, no action for ${missing}`);

  // lf021: an election on a lease's name
  await q("SELECT fencing.lease_acquire('codes-lease-js', 'someone', '1 hour')");
  let el = new LeaderElector({ election: 'codes-lease-js', candidate: 'c1', ttl: 10 });
  const e21 = await Promise.race([codeOf(el.run()),
    new Promise((r) => setTimeout(() => r('still campaigning'), WAIT))]);
  check('lf021', e21 instanceof ElectionError && e21.code === 'LF021', `run() ended with ${e21}`);

  // one elector for the rest: it campaigns again after each loss
  await q('CREATE TABLE codes_js (id int PRIMARY KEY, fence bigint)');
  await q('INSERT INTO codes_js VALUES (1, NULL)');
  const leads = [];
  el = new LeaderElector({
    election: 'codes-js', candidate: 'c1', ttl: 10,
    onStartedLeading: (lead) => { leads.push(lead); },
  });
  const running = codeOf(el.run());
  await until(() => leads.length >= 1);
  let lead = leads[0];
  const w = new DeadlineConnection({});
  const write = 'UPDATE codes_js SET fence = fencing.fence_advance(fence, $1) WHERE id = $2';

  // lf003: the caller's error, not the leadership's
  let err = await codeOf(w.query(`WITH u AS (${write} RETURNING 1)` +
    ' SELECT fencing.expect_rows(count(*)) FROM u', [lead.token, 2], WAIT));
  const mine = err ? await lead.writeFailed(err, w) : null;
  check('lf003', err && err.code === 'LF003' && mine === false && !lead.lost,
    `error ${err && err.code}, writeFailed ${mine}, lost ${lead.lost}`);

  // lf001: a newer token wrote the row first
  const newer = (await q('SELECT fencing.next_token() AS t'))[0].t;
  await q(write, [newer, 1]);
  const aborted = lostReason(lead);
  err = await codeOf(w.query(write, [lead.token, 1], WAIT));
  const lost = err ? await lead.writeFailed(err, w) : null;
  const r1 = await aborted;
  check('lf001', err && err.code === 'LF001' && lost === true && r1 === 'refused',
    `error ${err && err.code}, writeFailed ${lost}, signal reason ${r1}`);

  // lf005: a new band, as after a promotion
  check('leads again', await until(() => leads.length >= 2), 'no second leadership');
  lead = leads[leads.length - 1];
  await q('SELECT fencing.advance_tokens()');
  const r5 = await lostReason(lead);
  check('lf005', r5 === 'lost_at_failover', `signal reason ${r5}`);
  check('leads in the new band',
    await until(() => leads.length >= 3 && BigInt(leads[leads.length - 1].token) > BigInt(lead.token)),
    `tokens ${leads.map((l) => l.token)}`);

  // stop: the leader resigns
  lead = leads[leads.length - 1];
  el.stop();
  const result = await Promise.race([running,
    new Promise((r) => setTimeout(() => r('still running'), WAIT))]);
  const left = (await q("SELECT token FROM fencing.election_leader('codes-js')"))[0].token;
  check('stop', result === null && lead.reason === 'stopped' && left === null,
    `run() ended with ${result}, reason ${lead.reason}, leader token ${left}`);

  admin.close();
  w.close();
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`not ok - crashed: ${e.stack}`);
  process.exit(1);
});
