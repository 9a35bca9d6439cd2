'use strict';
// The client half of the pg-boss 12 recipe (install.sql, ../../../docs/queues.md):
// every call a worker's pg-boss makes for a job it claimed brings that
// claim's token, so the database can refuse the call once the job was
// claimed again.
//
//   const { installShim } = require('./fencing-shim');
//   installShim(Manager, { onRefused });   // before new PgBoss(...)
//
// pg-boss does not export its Manager class; import it from its module
// beside index.js (see worker.js).  What the shim does, per PgBoss instance:
//
// - It learns each claim's token from the fetch that made it (the claim
//   stamps job.data.fencing_token, and the fetch returns data), so it knows
//   the tokens of the jobs pg-boss hands back unprocessed too (restore(),
//   for jobs past localGroupConcurrency).
// - complete() and fail() get the token in their output (the delivery
//   place of install.sql); touch(), restore(), cancel() and deleteJob() run
//   in a transaction that declares it (SET LOCAL).  A batch is split into
//   one call per job.  A job object's own data.fencing_token counts too,
//   for a job this instance did not fetch.
// - A perJobResults handler's results get the token in each output, and a
//   job the handler left out is failed with it (pg-boss settles those with
//   private methods the shim cannot reach).
// - A refused call (LF0xx) is reported to onRefused and counts as not
//   settled, which is what pg-boss reads as a lost claim (it aborts the
//   job's signal).  With no token known (an operator's cancel by id), the
//   call goes to pg-boss unchanged.
//
// The shim passes pg-boss plain ids, not job objects: pg-boss 12's own
// attempt fence (retry_count, which restore() resets) then stays out of the
// way and the claim stamp decides, with an error rather than a row count
// of 0.  passJobs: true leaves pg-boss's fence as it ships (t/080's control,
// which records the tokens but has no guard).
const { Client } = require('pg');

// fetchNextJob's UPDATE (pg-boss 12 plans.js): the claim
const CLAIM_STATEMENT = /\bSET\s+state = 'active',\s+started_on = /;
const SHIMMED = Symbol('fencing shim');

const tokensByManager = new WeakMap();
function tokensOf(manager) {
  let tokens = tokensByManager.get(manager);
  if (!tokens) {
    tokens = new Map();
    tokensByManager.set(manager, tokens);
  }
  return tokens;
}

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
// of its own connection that declares the token (SET LOCAL, so it works
// through a transaction pooler).
function tokenDb(conn, token) {
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

function installShim(Manager, { conn, onRefused = () => {}, onSettled = () => {}, passJobs = false } = {}) {
  if (Manager.prototype[SHIMMED]) return;
  Manager.prototype[SHIMMED] = true;

  // learn the tokens of the claims this instance makes
  const assertDb = Manager.prototype.assertDb;
  Manager.prototype.assertDb = function (options) {
    const db = assertDb.call(this, options);
    const tokens = tokensOf(this);
    return new Proxy(db, {
      get(target, prop) {
        if (prop === 'executeSql') {
          return async (text, values) => {
            const r = await target.executeSql(text, values);
            if (CLAIM_STATEMENT.test(text)) {
              for (const row of r.rows || []) {
                const token = row.data && row.data.fencing_token;
                if (token) tokens.set(row.id, String(token));
              }
            }
            return r;
          };
        }
        const v = target[prop];
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
  };

  const tokenOf = (manager, item) => {
    const id = typeof item === 'string' ? item : item.id;
    const own = tokensOf(manager).get(id);
    if (own) return own;
    const carried = typeof item === 'object' && item.data && item.data.fencing_token;
    return carried ? String(carried) : undefined;
  };

  const ops = {
    complete: 'output', fail: 'output', touch: 'declared', restore: 'declared',
    cancel: 'declared', deleteJob: 'declared',
  };
  for (const [op, how] of Object.entries(ops)) {
    const original = Manager.prototype[op];
    Manager.prototype[op] = async function (name, id, ...rest) {
      const items = Array.isArray(id) ? id : [id];
      const manager = this;
      if (!items.every((item) => tokenOf(manager, item))) return original.call(this, name, id, ...rest);
      const total = { jobs: [], requested: 0, affected: 0, settled: [] };
      for (const item of items) {
        const job = typeof item === 'string' ? item : item.id;
        const token = tokenOf(manager, item);
        let args;
        if (how === 'declared') {
          const options = op === 'touch' || op === 'restore' || op === 'cancel' || op === 'deleteJob' ? rest[0] : undefined;
          args = [{ ...(options || {}), db: tokenDb(conn || manager.config, token) }];
        } else {
          args = [withToken(rest[0], token), ...rest.slice(1)];
        }
        try {
          const r = await original.call(this, name, [passJobs ? item : job], ...args);
          onSettled({ op, job, token, affected: r ? r.affected : undefined });
          if (r) {
            total.affected += r.affected || 0;
            total.settled.push(...(r.settled || []));
          }
          if (op !== 'touch') tokensOf(manager).delete(job);
        } catch (e) {
          // (the token stays: a later call of this instance for the job is
          // as stale, also one by plain id)
          if (!/^LF0/.test(e.code || '')) throw e;
          onRefused({ op, job, token, code: e.code, message: e.message });
        }
        total.jobs.push(job);
        total.requested++;
      }
      return total;
    };
  }

  // perJobResults: the token in each result's output
  const work = Manager.prototype.work;
  Manager.prototype.work = function (name, ...args) {
    const manager = this;
    const options = args.find((a) => a && typeof a === 'object') || {};
    if (!options.perJobResults) return work.call(this, name, ...args);
    const wrapped = args.map((a) => (typeof a !== 'function' ? a : async (jobs, ...more) => {
      const result = await a(jobs, ...more);
      if (!Array.isArray(result)) return result;
      const byId = new Map(jobs.map((job) => [job.id, job]));
      const seen = new Set();
      const out = result.map((item) => {
        if (!item || !byId.has(item.id)) return item;
        const token = tokenOf(manager, byId.get(item.id));
        if (!token) return item;
        seen.add(item.id);
        return { ...item, output: withToken(item.output, token) };
      });
      for (const job of jobs) {
        const token = tokenOf(manager, job);
        if (!seen.has(job.id) && token) {
          out.push({ id: job.id, status: 'failed',
                     output: withToken(new Error('no disposition returned by handler'), token) });
        }
      }
      return out;
    }));
    return work.call(this, name, ...wrapped);
  };
}

module.exports = { installShim, withToken, tokenDb };
