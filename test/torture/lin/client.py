#!/usr/bin/python3
"""client.py: one client process of a linearizability run (see README.md).

    client.py CONFIG.json

Does random lease operations on a few names with one connection, as one
role, and appends every operation to a JSON-lines history: an "invoke" line
just before the request and an "ok", "fail" (an ERROR; the statement or
transaction did nothing) or "info" (the connection broke: unknown outcome)
line just after the reply.  Times are CLOCK_MONOTONIC nanoseconds, the same
clock for every process on the machine.  Each line is one write(2) to an
O_APPEND file, so a SIGSTOP or SIGKILL never leaves half a line behind.

The choices (names, operations, TTLs, waits, hold times) come from a
random generator seeded with the run's seed and the client's number, so a
seed repeats the schedule of operations; their timing, and so their
results, differ from run to run.
"""
import json
import os
import random
import sys
import time

import psycopg2


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Client:
    def __init__(self, cfg):
        self.cfg = cfg
        self.label = cfg['label']
        self.rnd = random.Random(f'{cfg["seed"]}/{self.label}')
        self.fam = set(cfg['families'])
        self.fd = os.open(cfg['history'],
                          os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.seq = 0
        self.ntxn = 0
        self.conn = None
        self.mine = {}          # name -> (token, holder): what we believe we hold
        self.old = {}           # name -> tokens we held before
        self.ops = 0

    # -- history --

    def rec(self, **kw):
        kw['t'] = mono_ns()
        kw['w'] = self.label
        os.write(self.fd, (json.dumps(kw) + '\n').encode())

    def connect(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
        c = self.cfg
        self.conn = psycopg2.connect(c['dsn'], user=c['role'],
                                     application_name=self.label)
        self.conn.autocommit = True
        cur = self.conn.cursor()
        # the setting exists before the library is loaded, as a placeholder
        cur.execute('SET fencing.lock_delay = %s', (str(c['delay_ms']),))
        cur.execute("SET statement_timeout = '60s'")
        self.rec(ev='connect', role=c['role'], delay_ms=c['delay_ms'])

    def call(self, op, sql, args, **fields):
        """one request: returns ('ok', value) | ('fail', sqlstate) |
        ('info', None)"""
        self.seq += 1
        self.ops += 1
        oid = f'{self.label}-{self.seq}'
        self.rec(ev='invoke', id=oid, op=op, **fields)
        try:
            cur = self.conn.cursor()
            cur.execute(sql, args)
            if cur.description is not None:
                rows = cur.fetchall()
                v = rows if op == 'peek' else rows[0][0]
            else:
                v = cur.statusmessage
        except psycopg2.Error as e:
            if self.conn.closed or e.pgcode is None:
                self.rec(ev='info', id=oid, msg=str(e).strip()[:200])
                self.reconnect()
                return 'info', None
            self.rec(ev='fail', id=oid, code=e.pgcode,
                     msg=(e.pgerror or '').strip().split('\n')[0][:200])
            return 'fail', e.pgcode
        self.rec(ev='ok', id=oid, value=v)
        return 'ok', v

    def reconnect(self):
        while True:
            try:
                self.connect()
                return
            except psycopg2.Error:
                time.sleep(0.05)

    def raw(self, sql):
        """a statement that is no operation of the model (BEGIN)"""
        try:
            self.conn.cursor().execute(sql)
            return True
        except psycopg2.Error:
            self.reconnect()
            return False

    def sleep(self, s, why):
        self.rec(ev='sleep', ms=round(s * 1000, 3), why=why)
        time.sleep(s)

    # -- choices --

    def ttl_ms(self):
        return self.rnd.randint(self.cfg['ttl_min'], self.cfg['ttl_max'])

    def wait_ms(self):
        r = self.rnd.random()
        if r < 0.5:
            return 0
        if r < 0.6:
            # long enough for the liveness checks to tell a waiter that
            # was woken from one that ran into its deadline
            return self.rnd.randint(1500, 3000)
        return self.rnd.randint(20, int(1.5 * self.cfg['ttl_max']))

    def holder(self):
        c = self.cfg
        if 'sharedholder' in self.fam and self.rnd.random() < 0.25:
            return c['shared_holder']
        return c['holder']

    # -- operations --

    def acquire(self, name):
        spec = self.cfg['names'][name]
        kind = spec['kind']
        if kind == 'mixed':
            kind = self.rnd.choice(['lease', 'sem'])
        ttl = self.ttl_ms()
        wait = self.wait_ms()
        h = self.holder()
        if kind == 'lease':
            r, v = self.call('acquire',
                             'SELECT fencing.lease_acquire(%s, %s, %s::interval, %s::interval)',
                             (name, h, f'{ttl} ms', f'{wait} ms'),
                             lease=name, holder=h, role=self.cfg['role'],
                             ttl_ms=ttl, wait_ms=wait, slots=None,
                             delay_ms=self.cfg['delay_ms'])
        else:
            n = spec['slots']
            r, v = self.call('acquire',
                             'SELECT fencing.semaphore_acquire(%s, %s, %s, %s::interval, %s::interval)',
                             (name, h, n, f'{ttl} ms', f'{wait} ms'),
                             lease=name, holder=h, role=self.cfg['role'],
                             ttl_ms=ttl, wait_ms=wait, slots=n,
                             delay_ms=self.cfg['delay_ms'])
        if r == 'ok' and v is not None:
            if name in self.mine:
                self.old.setdefault(name, []).append(self.mine[name][0])
            self.mine[name] = (v, h)
        elif r == 'ok':
            self.sleep(self.rnd.uniform(0, 0.03), 'refused')

    def token_op(self, op, name, token, txn=None, ttl=None):
        fields = dict(lease=name, token=token)
        if txn is not None:
            fields['txn'] = txn
        if op == 'renew':
            ttl = ttl or self.ttl_ms()
            return self.call('renew',
                             'SELECT fencing.lease_renew(%s, %s, %s::interval)',
                             (name, token, f'{ttl} ms'), ttl_ms=ttl, **fields)
        # the history's kind 'check' is a call of lease_lock
        fn = 'lock' if op == 'check' else op
        return self.call(op, f'SELECT fencing.lease_{fn}(%s, %s)',
                         (name, token), **fields)

    def drop(self, name):
        tok = self.mine.pop(name, None)
        if tok is not None:
            self.old.setdefault(name, []).append(tok[0])

    def held_op(self, name):
        """something with the token we hold on name"""
        tok = self.mine[name][0]
        rnd = self.rnd
        acts = [('renew', 25), ('check', 15), ('release', 15),
                ('reacquire', 5), ('sleep_renew', 10), ('stale', 5)]
        if 'peek' in self.fam:
            acts.append(('peek', 5))
        if 'txcheck' in self.fam:
            acts.append(('txcheck', 15))
        if '2pc' in self.fam:
            acts.append(('rel2pc', 5))
        act = rnd.choices([a for a, _ in acts], [w for _, w in acts])[0]
        if act in ('renew', 'check', 'release'):
            r, v = self.token_op(act, name, tok)
            if act == 'release' or (r == 'ok' and v is False):
                self.drop(name)
        elif act == 'reacquire':
            self.acquire(name)
        elif act == 'sleep_renew':
            ttl = self.cfg['ttl_max']
            self.sleep(rnd.uniform(0.3, 1.5) * ttl / 1000, 'before renew')
            r, v = self.token_op('renew', name, tok)
            if r == 'ok' and v is False:
                self.drop(name)
        elif act == 'stale':
            self.stale_op(name)
        elif act == 'peek':
            self.peek_op(name)
        elif act == 'txcheck':
            self.txcheck(name, tok)
        elif act == 'rel2pc':
            self.rel2pc(name, tok)

    def stale_op(self, name):
        olds = self.old.get(name)
        if not olds:
            return
        tok = self.rnd.choice(olds[-5:])
        self.token_op(self.rnd.choice(['renew', 'check', 'release']), name, tok)

    def peek_op(self, name):
        r, rows = self.call('peek',
                            'SELECT token, holder, holder_role::text FROM fencing.lease_status WHERE name = %s',
                            (name,), lease=name)
        if r != 'ok' or not rows:
            return
        mine = {t for t, _ in self.mine.values()}
        rows = [x for x in rows if x[0] not in mine]
        if not rows:
            return
        tok = self.rnd.choice(rows)[0]
        op = self.rnd.choices(['renew', 'check', 'release'], [4, 4, 1])[0]
        self.token_op(op, name, tok)

    def txn_id(self):
        self.ntxn += 1
        return f'{self.label}-x{self.ntxn}'

    def txcheck(self, name, tok):
        """BEGIN; lease_lock; hold (maybe past the TTL); [renew]; COMMIT"""
        txn = self.txn_id()
        if not self.raw('BEGIN'):
            return
        r, v = self.token_op('check', name, tok, txn=txn)
        if r == 'info':
            self.drop(name)
            return
        ttl = self.cfg['ttl_max']
        self.sleep(self.rnd.uniform(0.2, 5.0) * ttl / 1000, "in transaction")
        if r == 'ok' and v and self.rnd.random() < 0.3:
            r2, v2 = self.token_op('renew', name, tok, txn=txn)
            if r2 == 'info':
                self.drop(name)
                return
        self.call('commit', 'COMMIT', None, lease=name, txn=txn, how='commit')
        if not (r == 'ok' and v):
            self.drop(name)

    def rel2pc(self, name, tok):
        """BEGIN; lease_release; PREPARE TRANSACTION; hold; COMMIT PREPARED"""
        # a long lease first: a waiter must then be woken by the commit,
        # not by the lease's expiry
        r, v = self.token_op('renew', name, tok, ttl=2500)
        if not (r == 'ok' and v):
            self.drop(name)
            return
        txn = self.txn_id()
        gid = f'lin-{self.cfg["seed"]}-{txn}'
        if not self.raw('BEGIN'):
            return
        r, v = self.token_op('release', name, tok, txn=txn)
        self.drop(name)
        if r == 'info':
            return
        r, v = self.call('prepare', f"PREPARE TRANSACTION '{gid}'", None,
                         lease=name, txn=txn)
        if r != 'ok' or v != 'PREPARE TRANSACTION':
            return
        ttl = self.cfg['ttl_max']
        self.sleep(self.rnd.uniform(0.1, 1.5) * ttl / 1000, 'prepared')
        # a prepared transaction outlives a cancel or a broken connection:
        # end it, whatever it takes
        while True:
            r, v = self.call('commit', f"COMMIT PREPARED '{gid}'", None,
                             lease=name, txn=txn, how='commit_prepared')
            if r == 'ok' or v == '42704':
                break

    def purge_op(self):
        self.call('purge', "SELECT fencing.lease_purge('0')", None)

    def force_op(self, name):
        self.call('force_release', 'SELECT fencing.lease_force_release(%s)',
                  (name,), lease=name)

    # -- the loop --

    def step(self):
        rnd = self.rnd
        names = sorted(self.cfg['names'])
        name = rnd.choice(names)
        if self.cfg['admin'] and 'force' in self.fam and rnd.random() < 0.25:
            self.force_op(name)
        elif self.cfg['admin'] and 'purge' in self.fam and rnd.random() < 0.05:
            self.purge_op()
        elif (not self.cfg['admin'] and 'force' in self.fam and
              rnd.random() < 0.01):
            self.force_op(name)         # not an admin: 42501
        elif name in self.mine:
            self.held_op(name)
        elif 'peek' in self.fam and rnd.random() < 0.1:
            self.peek_op(name)
        else:
            self.acquire(name)
        if rnd.random() < 0.3:
            self.sleep(rnd.uniform(0, 0.01), 'pause')

    def run(self):
        c = self.cfg
        self.rec(ev='start', role=c['role'], admin=c['admin'],
                 holder=c['holder'], families=sorted(self.fam))
        self.reconnect()
        while mono_ns() < c['deadline'] and self.ops < c['ops']:
            self.step()
        self.rec(ev='stop', ops=self.ops)


def main():
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    Client(cfg).run()


if __name__ == '__main__':
    main()
