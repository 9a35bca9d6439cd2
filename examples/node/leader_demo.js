'use strict';
// leader_demo.js: leader election with fencing_leader.js, two real processes.
//
//   node examples/node/leader_demo.js
//
// The story of examples/python/leader_demo.py, with node-postgres.
// Candidates A and B are child processes, each a LeaderElector for the
// election "demo-leader-node" (TTL 2 s).  A leads and writes row 1 of
// demo_leader_node with its token, then freezes (SIGSTOP) in the middle of
// a unit of work past its TTL.  B leads and writes with its newer token.  A
// resumes (SIGCONT); the write of its unit goes out with the old token and
// is refused (LF001); lead.signal is aborted, and lead.reason says
// taken_over, by B's token.  B resigns.  Exits 0 when the story went as
// told.  Connects with libpq's PG* environment variables.

const { spawn } = require('child_process');
const readline = require('readline');
const { Client } = require('pg');

const ELECTION = 'demo-leader-node';
const TTL = 2;

async function child(name) {
  const { DeadlineConnection, DeadlineExceeded, LeaderElector, sleep } =
    require('./fencing_leader');
  const emit = (event, fields) => console.log(JSON.stringify({ event, ...fields }));
  const elector = new LeaderElector({
    election: ELECTION, candidate: name, value: `host-${name.toLowerCase()}:8080`, ttl: TTL,
    onStartedLeading: async (lead) => {
      const conn = new DeadlineConnection();
      for (let unit = 1; !lead.signal.aborted; unit++) { // the cancellation, per unit
        emit('unit', { token: lead.token, unit });
        await sleep(unit === 1 ? 0.2 : 3); // the work; no check before its write
        try {
          await conn.query(
            'UPDATE demo_leader_node SET body = $1,' +
            ' fence = fencing.fence_advance(fence, $2, allow_same => true) WHERE id = 1',
            [`by ${name}`, lead.token], 1000);
          emit('wrote', { token: lead.token });
        } catch (e) {
          if (e instanceof DeadlineExceeded) {
            emit('unknown', { token: lead.token });
            continue;
          }
          emit('refused', { token: lead.token, sqlstate: e.code });
          await lead.refused(conn); // a newer leader exists: lost, and why
        }
      }
      conn.close();
    },
    onStoppedLeading: (lead) =>
      emit('stopped', { token: lead.token, reason: lead.reason, successor: lead.successor }),
    onNewLeader: (leader, value, token) => emit('view', { leader, value, token }),
    log: (event, fields) => { if (event === 'leading') emit(event, fields); },
  });
  process.on('SIGTERM', () => elector.stop());
  await elector.run();
  emit('exit', {});
}

class Child {
  constructor(name) {
    this.name = name;
    this.proc = spawn(process.execPath, [__filename, '--child', name],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    this.events = [];
    this.waiters = [];
    readline.createInterface({ input: this.proc.stdout }).on('line', (line) => {
      this.events.push(JSON.parse(line));
      this.waiters.forEach((w) => w());
    });
  }

  // the first event of this kind matching `match`, once it came
  wait(event, match = {}, timeout = 30) {
    const find = () => this.events.find((e) => e.event === event &&
      Object.entries(match).every(([k, v]) => e[k] === v));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(
        `FAIL: [${this.name}] no ${event} event ${JSON.stringify(match)} within ${timeout} s`)),
      timeout * 1000);
      const check = () => {
        const e = find();
        if (e) {
          clearTimeout(timer);
          this.waiters = this.waiters.filter((w) => w !== check);
          resolve(e);
        }
      };
      this.waiters.push(check);
      check();
    });
  }
}

const say = (who, text) => console.log(`[${who}] ${text}`);

async function main() {
  const db = new Client();
  await db.connect();
  await db.query('DROP TABLE IF EXISTS demo_leader_node');
  await db.query('CREATE TABLE demo_leader_node (id int PRIMARY KEY, body text, fence bigint)');
  await db.query("INSERT INTO demo_leader_node VALUES (1, 'empty', NULL)");
  say('setup', `table demo_leader_node ready, election ${ELECTION}, TTL ${TTL} s`);

  const a = new Child('A');
  const ta = (await a.wait('leading')).token;
  say('A', `leads with token ${ta}`);
  await a.wait('wrote', { token: ta });
  say('A', `wrote row 1 with token ${ta}`);
  const b = new Child('B');
  const v = await b.wait('view', { leader: 'A' });
  say('B', `campaigns, and follows A (value ${v.value})`);
  await a.wait('unit', { token: ta, unit: 2 });
  a.proc.kill('SIGSTOP');
  say('A', 'starts a unit of work, and freezes in it (SIGSTOP) past its TTL');
  const tb = (await b.wait('leading')).token;
  say('B', `leads with token ${tb} (A's lease expired)`);
  await b.wait('wrote', { token: tb });
  say('B', `wrote row 1 with token ${tb}`);
  a.proc.kill('SIGCONT');
  say('A', `resumes (SIGCONT); its unit's write goes out with token ${ta}`);
  const r = await a.wait('refused', { token: ta });
  say('A', `write REFUSED: ${r.sqlstate}`);
  const s = await a.wait('stopped', { token: ta });
  // what A's elector saw first depends on when its watcher last looked:
  // the expiry (the server answers at that moment, while A is frozen) or
  // B's takeover; the server's answer now is the takeover
  say('A', `stopped leading: ${s.reason === 'expired' ? 'expired'
    : s.reason === 'taken_over' && s.successor === tb ? "taken_over, successor B's token"
      : `${s.reason}, successor ${s.successor}`}`);
  const w = (await db.query('SELECT reason, successor FROM fencing.lease_watch($1, $2)',
    [ELECTION, ta])).rows[0];
  say('A', `lease_watch of its token: ${w.reason}, successor ${w.successor === tb ? "B's token" : w.successor}`);
  // A first: a candidate again, it would lead once B resigns
  a.proc.kill('SIGTERM');
  await a.wait('exit');
  b.proc.kill('SIGTERM');
  await b.wait('exit');
  say('B', 'stops: resigned');
  const row = (await db.query('SELECT body, fence FROM demo_leader_node WHERE id = 1')).rows[0];
  const { reason } = (await db.query('SELECT reason FROM fencing.lease_watch($1, $2)',
    [ELECTION, tb])).rows[0];
  say('result', `row 1 = '${row.body}', fence ${row.fence === tb ? "B's token" : row.fence}; ` +
    `B's token is ${reason}`);
  await db.end();
  const seen = s.reason === 'expired' || (s.reason === 'taken_over' && s.successor === tb);
  if (seen && row.body === 'by B' && row.fence === tb && r.sqlstate === 'LF001' &&
      w.reason === 'taken_over' && w.successor === tb && reason === 'released') {
    console.log("OK: the frozen leader's write was refused, and it learned why");
    return 0;
  }
  console.log('FAIL');
  return 1;
}

if (process.argv[2] === '--child') {
  child(process.argv[3]).catch((e) => { console.error(e); process.exit(1); });
} else {
  main().then((rc) => process.exit(rc), (e) => { console.error(e.message); process.exit(1); });
}
