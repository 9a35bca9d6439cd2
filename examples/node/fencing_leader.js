'use strict';
// fencing_leader: leader election on the fencing extension, for node-postgres (pg).
//
// The same helper as examples/python/fencing_leader.py, in client-go's shape
// (lease duration, renew deadline, retry period, onStartedLeading /
// onStoppedLeading / onNewLeader), with an AbortSignal as the cancellation:
//
//   const { LeaderElector } = require('./fencing_leader');
//   const elector = new LeaderElector({
//     election: 'scheduler', candidate: 'node-1', value: 'host-1:8080', ttl: 10,
//     onStartedLeading: async (lead) => {        // lead.token, lead.signal
//       while (!lead.signal.aborted) { ... }     // write with lead.token: refused once stale
//     },
//     onStoppedLeading: (lead) => console.log('lost:', lead.reason, lead.successor),
//   });
//   await elector.run();                         // until elector.stop()
//
// - Every call has a deadline on the client (DeadlineConnection): a frozen
//   server never answers and statement_timeout runs on the server; a call
//   that misses its deadline destroys its connection (docs/ha.md).
// - The keepalive renews with lease_renew every ttl/3 and trusts its
//   leadership until renewDeadline (2/3 of the TTL) after the start of its
//   last successful renew or campaign; past that it is lost ('renew_deadline').
// - A watch on a second connection (lease_watch with a wait) returns the
//   moment the token stops being current; a false renew asks
//   lease_watch(name, token, '0') why.  On loss lead.signal is aborted (its
//   reason a LeadershipLost), and lead.reason and lead.successor say why.
// - Nothing is kept per session: every call is one autocommitted statement,
//   so it works through pgbouncer in transaction mode.
// - Every SQLSTATE of the README's table (LF001 to LF021) has one meaning
//   here (sqlstateAction): the leadership is lost, campaign again later,
//   stop (run() rejects with an ElectionError), or the caller's write failed.
// node-postgres returns bigint columns as strings: tokens are strings here.

const { Client } = require('pg');

class DeadlineExceeded extends Error {
  constructor() {
    super('deadline exceeded');
    this.name = 'DeadlineExceeded';
  }
}

class LeadershipLost extends Error {
  constructor(reason, successor) {
    super(`leadership lost: ${reason}`);
    this.name = 'LeadershipLost';
    this.reason = reason;
    this.successor = successor;
  }
}

// What each SQLSTATE of README.md#sqlstates means to an elector and to the
// writes of its leader.
// lost: a renew or a write with the token was refused: a newer token wrote,
// or the token is from before a failover (band), or the transaction that
// renewed it committed after its expiry.
const LOST = { LF001: 'refused', LF005: 'lost_at_failover', LF022: 'expired' };
// retry: no token now (epoch mode without a valid epoch file, or not yet a
// greater epoch after a promotion; a standby): campaign later.
const RETRY = new Set(['LF006', 'LF007', '25006']);
// fatal: nothing a retry changes (the class code, raised by nothing today; token space exhausted, fencing.leases
// altered, the name is a lease or a semaphore, another role's election,
// bad arguments): run() rejects with an ElectionError.
const FATAL = new Set(['LF000', 'LF002', 'LF020', 'LF021', '42501', '22023', '22004']);
// write: the caller's write itself (no such row, no declared token, a claim
// guard's refusals): not a verdict on the leadership.
const WRITE = new Set(['LF003', 'LF004', 'LF010', 'LF011', 'LF012']);

// 'lost', 'retry', 'fatal', 'write', or null (a transient error: log it and
// retry within the deadlines)
function sqlstateAction(code) {
  if (Object.prototype.hasOwnProperty.call(LOST, code)) return 'lost';
  if (RETRY.has(code)) return 'retry';
  if (FATAL.has(code)) return 'fatal';
  if (WRITE.has(code)) return 'write';
  return null;
}

class ElectionError extends Error {
  constructor(code, message) {
    super(`${code} ${message}`);
    this.name = 'ElectionError';
    this.code = code;
  }
}

const now = () => performance.now() / 1000; // seconds, monotonic

// resolves after `seconds`, or at once when `signal` aborts
function sleep(seconds, signal) {
  return new Promise((resolve) => {
    if (signal && signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      if (signal) signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, seconds) * 1000);
    if (signal) signal.addEventListener('abort', done, { once: true });
  });
}

// An error the server answered with (the connection is fine), not a broken
// or lost connection (class 08, 57P: the server went away).
function serverError(e) {
  return typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) &&
    !e.code.startsWith('08') && !e.code.startsWith('57P');
}

// One connection, used by one loop at a time; connecting and every
// statement wait at most timeoutMs.  A call that misses its deadline, or
// whose connection broke, destroys the connection; the next call opens one.
class DeadlineConnection {
  constructor(config) {
    this.config = config || {};
    this.client = null;
  }

  close() {
    const c = this.client;
    this.client = null;
    if (!c) return;
    if (c.connection && c.connection.stream) c.connection.stream.destroy();
    c.end().catch(() => {});
  }

  async query(text, values, timeoutMs) {
    let timer;
    const deadline = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineExceeded()), timeoutMs);
    });
    const run = (async () => {
      if (!this.client) {
        const c = new Client(this.config);
        c.on('error', () => {}); // a dead connection is found by the next call
        this.client = c;
        await c.connect();
      }
      return (await this.client.query(text, values)).rows;
    })();
    run.catch(() => {}); // when the deadline wins, the late outcome is nobody's
    try {
      return await Promise.race([run, deadline]);
    } catch (e) {
      if (!serverError(e)) this.close();
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }
}

// One term of leadership: its token, and its end.
class Leadership {
  constructor(elector, token, trustedUntil) {
    this.elector = elector;
    this.token = token;
    this.trustedUntil = trustedUntil;
    this.controller = new AbortController();
    this.signal = this.controller.signal; // aborted the moment leadership is lost
    this.reason = null;    // expired, taken_over, released, force_released, lost_at_failover,
    this.successor = null; // unknown (lease_watch), renew_deadline, refused, stopped, error
  }

  get lost() {
    return this.signal.aborted;
  }

  // A cheap local check before a side effect; the fence closes the window.
  leading() {
    return !this.lost && now() < this.trustedUntil;
  }

  lose(reason, successor = null) {
    if (this.lost) return false;
    this.reason = reason;
    this.successor = successor;
    this.controller.abort(new LeadershipLost(reason, successor));
    this.elector._log('lost', { token: this.token, reason, successor });
    return true;
  }

  // A write with this token threw `error`.  If its SQLSTATE says the token is
  // stale (LOST: LF001, LF005) the leadership is lost: ask why (refused) and
  // resolve true; otherwise (WRITE codes, anything else) false: the error
  // is the caller's.
  async writeFailed(error, conn) {
    if (sqlstateAction(error && error.code) !== 'lost') return false;
    await this.refused(conn);
    return true;
  }

  // A write with this token was refused (LF001, LF005): ask lease_watch
  // why, on the caller's own DeadlineConnection, and lose the leadership.
  async refused(conn) {
    let reason = 'unknown';
    let successor = null;
    try {
      const rows = await conn.query(
        'SELECT reason, successor FROM fencing.lease_watch($1, $2)',
        [this.elector.election, this.token], this.elector.callTimeout * 1000);
      ({ reason, successor } = rows[0]);
    } catch (e) { /* unknown */ }
    if (reason === 'current') reason = 'refused';
    return this.lose(reason, successor);
  }
}

class LeaderElector {
  // options: connection (a pg config; default: libpq's PG* environment),
  // election, candidate, value, ttl (s), renewDeadline (s, default 2/3 ttl),
  // renewEvery (s, default ttl/3), retryPeriod (s, default ttl/2: how long
  // a follower's campaign waits in the server), callTimeout (s, default
  // ttl/4), watchWait (s), onStartedLeading(lead), onStoppedLeading(lead),
  // onNewLeader(candidate, value, token), log(event, fields).
  constructor(o) {
    this.connection = o.connection || {};
    this.election = o.election;
    this.candidate = o.candidate;
    this.value = o.value === undefined ? '' : o.value;
    this.ttl = o.ttl || 10;
    this.renewDeadline = o.renewDeadline || this.ttl * 2 / 3;
    this.renewEvery = o.renewEvery || this.ttl / 3;
    this.retryPeriod = o.retryPeriod || this.ttl / 2;
    this.callTimeout = o.callTimeout || this.ttl / 4;
    this.watchWait = o.watchWait || Math.max(this.ttl, 1);
    if (!(this.renewEvery > 0 && this.renewEvery < this.renewDeadline &&
          this.renewDeadline < this.ttl)) {
      throw new RangeError('need 0 < renewEvery < renewDeadline < ttl');
    }
    this.onStartedLeading = o.onStartedLeading;
    this.onStoppedLeading = o.onStoppedLeading;
    this.onNewLeader = o.onNewLeader;
    this.logf = o.log;
    this.stopController = new AbortController();
    this.conn = new DeadlineConnection(this.connection);
    this.current = null;
    this.error = null;
  }

  // An error no retry changes: stop, and let run() reject with it.
  _fatal(e, lead) {
    this._log('fatal', { error: describe(e) });
    this.error = e instanceof ElectionError ? e : new ElectionError(e.code, e.message);
    if (lead) lead.lose('error');
    this.stopController.abort();
  }

  _log(event, fields) {
    if (this.logf) this.logf(event, fields || {});
  }

  get stopped() {
    return this.stopController.signal.aborted;
  }

  // Stop campaigning; a leader resigns (best effort, within callTimeout).
  stop() {
    this.stopController.abort();
  }

  // Campaign, lead, and campaign again after a loss, until stop().
  async run() {
    let observing = null;
    if (this.onNewLeader) {
      observing = (async () => {
        for await (const l of observe(this.connection, this.election, {
          wait: this.watchWait, callTimeout: this.callTimeout,
          signal: this.stopController.signal, log: (ev, f) => this._log(ev, f),
        })) this.onNewLeader(l.candidate, l.value, l.token);
      })().catch((e) => this._fatal(e, this.current));
    }
    while (!this.stopped) {
      const lead = await this._campaign();
      if (!lead) continue;
      this.current = lead;
      this._log('leading', { token: lead.token });
      this._watch(lead); // ends by itself once the leadership is lost
      if (this.onStartedLeading) {
        Promise.resolve().then(() => this.onStartedLeading(lead))
          .catch((e) => this._log('work_error', { error: String(e) }));
      }
      await this._keepalive(lead);
      if (this.onStoppedLeading) await this.onStoppedLeading(lead);
    }
    this.conn.close();
    if (observing) await observing;
    if (this.error) throw this.error;
  }

  async _campaign() {
    const t0 = now();
    let rows;
    try {
      rows = await this.conn.query(
        'SELECT fencing.election_campaign($1, $2, $3, make_interval(secs => $4),' +
        ' wait => make_interval(secs => $5)) AS token',
        [this.election, this.candidate, this.value, this.ttl, this.retryPeriod],
        (this.retryPeriod + this.callTimeout) * 1000);
    } catch (e) {
      const action = sqlstateAction(e.code);
      if (action === 'fatal') {
        this._fatal(e);
        return null;
      }
      this._log('campaign_error', { error: describe(e) });
      await sleep(action === 'retry' ? this.retryPeriod : this.callTimeout,
        this.stopController.signal);
      return null;
    }
    const token = rows[0].token;
    if (token === null) return null;
    // the lease expires ttl after the grant, which came after t0
    return new Leadership(this, token, t0 + this.renewDeadline);
  }

  async _keepalive(lead) {
    let lastOk = lead.trustedUntil - this.renewDeadline;
    while (!lead.lost) {
      if (this.stopped) {
        await this._resign(lead);
        return;
      }
      const nextAt = lastOk + this.renewEvery;
      const t = now();
      if (t < nextAt) {
        await sleep(Math.min(nextAt - t, 0.2), lead.signal);
        continue;
      }
      if (t >= lead.trustedUntil) {
        // stop now; then ask whether the server knows more (a successor)
        lead.lose('renew_deadline');
        const [reason, successor] = await this._why(lead, this.callTimeout / 2);
        if (reason !== 'current' && reason !== 'unknown') {
          lead.reason = reason;
          lead.successor = successor;
        }
        break;
      }
      let rows;
      try {
        rows = await this.conn.query(
          'SELECT fencing.lease_renew($1, $2, make_interval(secs => $3)) AS ok',
          [this.election, lead.token, this.ttl],
          Math.min(this.callTimeout, lead.trustedUntil - t) * 1000);
      } catch (e) {
        const action = sqlstateAction(e.code);
        if (action === 'lost') {
          lead.lose(LOST[e.code]);
          break;
        }
        if (action === 'fatal') {
          this._fatal(e, lead);
          break;
        }
        this._log(e instanceof DeadlineExceeded ? 'renew_timeout' : 'renew_error',
          { token: lead.token, error: describe(e) });
        if (!(e instanceof DeadlineExceeded)) {
          await sleep(Math.min(this.renewEvery / 4, Math.max(lead.trustedUntil - t, 0)),
            lead.signal);
        }
        continue;
      }
      if (rows[0].ok) {
        lastOk = t;
        lead.trustedUntil = t + this.renewDeadline;
        continue;
      }
      const [reason, successor] = await this._why(lead);
      lead.lose(reason, successor);
    }
  }

  // lease_watch(name, token, '0'): why this token is no longer current
  async _why(lead, timeout) {
    try {
      const rows = await this.conn.query(
        'SELECT reason, successor FROM fencing.lease_watch($1, $2)',
        [this.election, lead.token], (timeout || this.callTimeout) * 1000);
      return [rows[0].reason, rows[0].successor];
    } catch (e) {
      this._log('watch_error', { token: lead.token, error: describe(e) });
      return ['unknown', null];
    }
  }

  // the second connection: a blocking lease_watch, in a loop
  async _watch(lead) {
    const conn = new DeadlineConnection(this.connection);
    try {
      while (!lead.lost) {
        let rows;
        try {
          rows = await conn.query(
            'SELECT reason, successor FROM fencing.lease_watch($1, $2, make_interval(secs => $3))',
            [this.election, lead.token, this.watchWait],
            (this.watchWait + this.callTimeout) * 1000);
        } catch (e) {
          const action = sqlstateAction(e.code);
          if (action === 'lost') {
            lead.lose(LOST[e.code]);
            break;
          }
          if (action === 'fatal') {
            this._fatal(e, lead);
            break;
          }
          if (!(e instanceof DeadlineExceeded)) await sleep(this.callTimeout, lead.signal);
          continue;
        }
        if (rows[0].reason !== 'current') lead.lose(rows[0].reason, rows[0].successor);
      }
    } finally {
      conn.close();
    }
  }

  async _resign(lead) {
    // stopped first: the work stops while the lease is still held, and the
    // watcher, woken by the resignation, finds the reason set
    lead.lose('stopped');
    try {
      await this.conn.query('SELECT fencing.election_resign($1, $2)',
        [this.election, lead.token], this.callTimeout * 1000);
    } catch (e) {
      this._log('resign_error', { token: lead.token, error: describe(e) });
    }
  }
}

// Yields {candidate, value, token} each time the leadership differs from
// what was seen last (all null: no leader), starting with the current one.
// election_observe blocks in the server until a change (expiry included);
// each call passes on what the last one returned.
async function* observe(connection, election, o = {}) {
  const wait = o.wait || 10;
  const callTimeout = o.callTimeout || 2.5;
  const conn = new DeadlineConnection(connection);
  let known = null;
  try {
    while (!(o.signal && o.signal.aborted)) {
      let rows;
      try {
        rows = await conn.query(
          'SELECT candidate, value, token FROM' +
          ' fencing.election_observe($1, $2, $3, make_interval(secs => $4))',
          [election, known ? known.token : null, known ? known.value : null, known ? wait : 0],
          (wait + callTimeout) * 1000);
      } catch (e) {
        if (sqlstateAction(e.code) === 'fatal') throw new ElectionError(e.code, e.message);
        if (o.log) o.log('observe_error', { error: describe(e) });
        await sleep(callTimeout, o.signal);
        continue;
      }
      const seen = rows[0];
      if (!known || seen.token !== known.token || seen.value !== known.value ||
          seen.candidate !== known.candidate) {
        known = seen;
        yield seen;
      }
    }
  } finally {
    conn.close();
  }
}

function describe(e) {
  if (e instanceof DeadlineExceeded) return 'deadline exceeded';
  return e.code ? `${e.code} ${e.message}` : e.message;
}

module.exports = { DeadlineConnection, DeadlineExceeded, ElectionError, LeaderElector,
  Leadership, LeadershipLost, observe, sleep, sqlstateAction, LOST, RETRY, FATAL, WRITE };
