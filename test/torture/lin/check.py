#!/usr/bin/python3
"""check.py: is the history of a linearizability run linearizable?

    test/torture/lin/check.py OUTDIR [--eps-ms 1] [--live-slack-ms 1000]
                         [--mutate swap-tokens|shorten-ttl] [--json FILE]

OUTDIR is what run.py wrote: history/*.jsonl (one file per client),
events.jsonl (freezes), run.json.  The history is split by lease name (the
model has no rule that spans names), and for each name a search looks for
a linearization: an order of all its operations, each placed at one point
between its invocation and its response, in which every result is what the
sequential model (model.py) gives.  The search is Wing & Gong's with
Lowe's just-in-time linearization and memoization of (operations done,
model state), as Porcupine does; the model's time points are kept as a
difference-bound matrix, so expiry is judged exactly.

Safety (exit 1):
  linearizability  a name whose history has no linearization; the report
                   shows the shortest failing prefix, reduced, with the
                   model's states at the point where the search got stuck
  token-dup        a token granted twice (all names)
  token-order      a grant that began after another one ended has a
                   smaller token (all names)
  error            an SQLSTATE the model does not expect there (XX000,
                   40P01, ...)
  clock            CLOCK_REALTIME - CLOCK_MONOTONIC changed during the
                   run by more than eps (a stepped clock: times unusable)
Liveness (reported; exit 1 only with --strict-liveness):
  slow-acquire     an acquire returned later than its wait plus the slack
                   (not counting time its client was frozen)
  late-wake        a released lease stayed free for the wake slack while
                   waiters waited for it (every later grant has a larger
                   token, so none came before the first of them was
                   invoked)
Exit 2: the history could not be read, or a search ran out of budget.

eps (default 1 ms) widens every operation's window on both sides.  The
server reads CLOCK_REALTIME (gettimeofday) and stores microseconds; the
clients read CLOCK_MONOTONIC.  NTP slews both clocks alike, so their
difference only changes by a step, which is checked (error "clock"); what
is left is microsecond truncation and the two clock reads that measure
the difference.  Commit latency needs no slack: the model's points L and b
already separate a write's clock reading from its commit.
"""
import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict

import importlib.util

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import model  # noqa: E402
from model import INF, State, Ctx  # noqa: E402


def _torture_check():
    # the torture run's checker, for its reader of JSON-lines histories
    spec = importlib.util.spec_from_file_location(
        'torture_check', os.path.join(os.path.dirname(HERE), 'check.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


load_jsonl = _torture_check().load_jsonl


class Op:
    __slots__ = ('id', 'w', 'kind', 'op', 'name', 'holder', 'role', 'admin',
                 'cap', 'ttl', 'wait', 'delay', 'token', 'txn', 'commits',
                 'inv', 'resp', 'outcome', 'value', 'code', 'no_effect_error',
                 'null_excused', 'prev', 'rec', 'seq', 'ttl_ms', 'msg',
                 'ends', 'out_rec', 'shape')

    def copy(self):
        o = Op()
        for k in Op.__slots__:
            setattr(o, k, getattr(self, k, None))
        return o


MODEL_KINDS = {'acquire': 'acquire', 'renew': 'renew', 'release': 'release',
               'check': 'check', 'force_release': 'force', 'commit': 'commit',
               'prepare': 'prepare', 'purge': 'purge'}
# errors that change nothing, wherever they come: a cancel
NO_EFFECT_CODES = {'57014'}


class History:
    def __init__(self, outdir, eps):
        self.outdir = outdir
        self.eps = eps
        self.notes = []
        with open(os.path.join(outdir, 'run.json')) as f:
            self.run = json.load(f)
        self.events = load_jsonl(os.path.join(outdir, 'events.jsonl'),
                                 self.notes)
        self.clients = {c['label']: c for c in self.run['clients']}
        self.t0 = self.run.get('t_start', 0)
        self.ops = []
        self.peeks = []
        byid = {}
        seq = 0
        hdir = os.path.join(outdir, 'history')
        for fn in sorted(os.listdir(hdir)):
            for rec in load_jsonl(os.path.join(hdir, fn), self.notes):
                ev = rec['ev']
                if ev == 'invoke':
                    o = Op()
                    o.id = rec['id']
                    o.w = rec['w']
                    o.op = rec['op']
                    o.rec = rec
                    o.inv = rec['t']
                    o.resp = INF
                    o.outcome = 'unknown'
                    o.value = o.code = o.msg = o.out_rec = None
                    o.seq = seq
                    seq += 1
                    if o.id in byid:
                        raise ValueError(f'operation {o.id} invoked twice')
                    byid[o.id] = o
                    if o.op == 'peek':
                        self.peeks.append(o)
                    elif o.op in MODEL_KINDS:
                        self.ops.append(o)
                elif ev in ('ok', 'fail', 'info'):
                    o = byid.get(rec['id'])
                    if o is None:
                        self.notes.append(f'outcome without invoke: {rec}')
                        continue
                    o.out_rec = rec
                    if ev != 'info':
                        o.resp = rec['t']
                        o.outcome = ev
                        o.value = rec.get('value')
                        o.code = rec.get('code')
                    o.msg = rec.get('msg')
        self.freezes = defaultdict(list)
        open_ = {}
        for e in self.events:
            if e['ev'] == 'pause':
                open_[e['worker']] = e['t']
            elif e['ev'] == 'resume' and e['worker'] in open_:
                self.freezes[e['worker']].append((open_.pop(e['worker']),
                                                  e['t']))
        for w, t in open_.items():
            self.freezes[w].append((t, INF))
        self.prepare_ops()

    def prepare_ops(self):
        out = []
        for o in self.ops:
            r = o.rec
            c = self.clients.get(o.w, {})
            o.name = r.get('lease')
            o.admin = bool(c.get('admin'))
            o.role = r.get('role') or c.get('role')
            o.holder = r.get('holder')
            o.txn = r.get('txn')
            o.token = r.get('token')
            o.ttl_ms = r.get('ttl_ms')
            o.ttl = int(r['ttl_ms'] * 1e6) if r.get('ttl_ms') is not None else 0
            o.wait = int(r.get('wait_ms') or 0) * 1_000_000
            o.delay = int(r.get('delay_ms') or 0) * 1_000_000
            o.cap = r.get('slots') or 1
            # the kind the call takes the name as: a lease, or a semaphore
            # of N slots
            o.shape = ('l', 1) if r.get('slots') is None else ('s', o.cap)
            o.commits = False
            o.ends = True
            o.no_effect_error = False
            o.null_excused = False
            o.kind = MODEL_KINDS[o.op]
            if o.kind == 'prepare':
                # a prepared transaction ends at COMMIT PREPARED; a PREPARE
                # that rolled back ends it here
                if o.outcome == 'ok' and o.value == 'PREPARE TRANSACTION':
                    continue
                o.kind = 'commit'
                o.commits = False
                if o.outcome == 'fail':
                    o.outcome = 'ok'
            elif o.kind == 'commit':
                o.commits = o.outcome == 'ok' and o.value in (
                    'COMMIT', 'COMMIT PREPARED')
                if o.outcome == 'fail':
                    # a failed COMMIT ends the transaction (rolled back); a
                    # failed COMMIT PREPARED leaves it prepared
                    o.ends = r.get('how') != 'commit_prepared'
                    o.outcome = 'ok'
            if o.outcome == 'fail':
                if o.kind == 'acquire':
                    o.no_effect_error = True
                elif o.kind in ('renew', 'release', 'check', 'force'):
                    o.no_effect_error = o.code != '42501'
            out.append(o)
        self.ops = out

    def rel(self, t):
        return (t - self.t0) / 1e6

    def frozen_overlap(self, w, a, b):
        tot = 0
        for s, e in self.freezes.get(w, []):
            lo, hi = max(a, s), min(b, e)
            if hi > lo:
                tot += hi - lo
        return tot

    def frozen_during(self, w, a, b):
        return any(min(b, e) > max(a, s) for s, e in self.freezes.get(w, []))


# ---- the search ----

class Verdict:
    def __init__(self, ok, steps, seconds, best=None, stuck=None):
        self.ok = ok            # True, False, or None (budget)
        self.steps = steps
        self.seconds = seconds
        self.best = best        # (ops done, one state) at the deepest point
        self.stuck = stuck      # ops that could come next there


def link_program_order(ops):
    last = {}
    for i, o in enumerate(ops):
        o.prev = last.get(o.w, -1)
        last[o.w] = i


def search(ops, eps, single_row, max_steps=2_000_000, max_seconds=600,
           record=None):
    """Wing & Gong / Lowe: depth-first over (ops done, state), memoized.
    ops must be sorted by invocation, with .prev linked.  record: a dict
    that gets, for each k, the states in which exactly ops[:k] are done."""
    t_start = time.monotonic()
    n = len(ops)
    inv = [o.inv for o in ops]
    resp = [o.resp for o in ops]
    prev = [o.prev for o in ops]
    ctx = Ctx(eps, single_row)
    stack = [(0, frozenset(), State.initial())]
    seen = set()
    steps = 0
    best_depth = -1
    best = None
    while stack:
        k, extra, st = stack.pop()
        while k in extra:
            extra = extra - {k}
            k += 1
        if k == n:
            return Verdict(True, steps, time.monotonic() - t_start)
        key = (k, extra, st.key())
        if key in seen:
            continue
        seen.add(key)
        if record is not None and not extra:
            record.setdefault(k, {})[st.key()] = st
        steps += 1
        if steps > max_steps or (steps % 4096 == 0 and
                                 time.monotonic() - t_start > max_seconds):
            return Verdict(None, steps, time.monotonic() - t_start,
                           best=best)
        depth = k + len(extra)
        cands = []
        m = INF
        i = k
        while i < n and inv[i] - eps <= m + eps:
            if i not in extra:
                p = prev[i]
                if p < k or p in extra:
                    cands.append(i)
                if resp[i] < m:
                    m = resp[i]
            i += 1
        if depth > best_depth:
            best_depth = depth
            best = (k, extra, st, list(cands))
        ctx.min_resp = m
        # the earliest invocation among what is left after each candidate
        after_k = k + 1
        while after_k < n and after_k in extra:
            after_k += 1
        for c in sorted(cands, key=lambda i: resp[i], reverse=True):
            w = inv[k] if c != k else (inv[after_k] if after_k < n else INF)
            ctx.watermark = w - eps
            for st2 in model.step(st, ops[c], ctx):
                stack.append((k, extra | {c}, st2))
    secs = time.monotonic() - t_start
    return Verdict(False, steps, secs, best=best,
                   stuck=best[3] if best else None)


def check_partition(ops, eps, single_row, **kw):
    ops = sorted(ops, key=lambda o: (o.inv, o.seq))
    link_program_order(ops)
    return ops, search(ops, eps, single_row, **kw)


# ---- shrinking a failing history (only by steps that keep it failing if
# the full one fails: a prefix with pending ops made unknown, and removing
# operations that change nothing) ----

def prefix(ops, x):
    """the ops invoked up to ops[x]'s invocation; those still pending then
    get an unknown outcome (linearizability is prefix-closed)"""
    t = ops[x].inv
    out = []
    for o in ops:
        if o.inv > t:
            continue
        if o.resp > t:
            o = o.copy()
            o.outcome = 'unknown'
            o.resp = INF
            o.value = o.code = None
            o.no_effect_error = False
        out.append(o)
    return out


def no_effect(o):
    if o.outcome == 'fail':
        return True
    if o.outcome != 'ok':
        return False
    if o.kind == 'acquire':
        return o.value is None
    if o.kind in ('renew', 'release', 'check', 'force'):
        return not o.value and o.txn is None
    return False


def run_search(ops, eps, single_row, budget):
    ops = sorted(ops, key=lambda o: (o.inv, o.seq))
    link_program_order(ops)
    v = search(ops, eps, single_row, max_steps=budget, max_seconds=30)
    stuck = {ops[c].id for c in v.stuck} if v.ok is False else set()
    return v.ok, stuck


def fails(ops, eps, single_row, budget):
    return run_search(ops, eps, single_row, budget)[0] is False


def ddmin(cur, keep, test, t_end):
    """drop chunks of removable ops (keep(o) false) while test() holds"""
    chunk = max(1, len(cur) // 2)
    while chunk >= 1 and time.monotonic() < t_end:
        i = 0
        changed = False
        while i < len(cur) and time.monotonic() < t_end:
            part = [o for o in cur[i:i + chunk] if not keep(o)]
            if part:
                ids = {id(o) for o in part}
                trial = [o for o in cur if id(o) not in ids]
                if test(trial):
                    cur = trial
                    changed = True
                    continue
            i += chunk
        if not changed:
            chunk //= 2
    return cur


def shrink(ops, eps, single_row, seconds=60, budget=200_000):
    """a failing sub-history, made only by steps that keep a failing
    history failing, so it proves the violation by itself: the shortest
    failing prefix (pending operations made unknown), without the
    operations that changed nothing"""
    t_end = time.monotonic() + seconds
    ops = sorted(ops, key=lambda o: (o.inv, o.seq))
    lo, hi = 0, len(ops) - 1
    # smallest failing prefix (monotone: a prefix of a linearizable history
    # is linearizable)
    while lo < hi and time.monotonic() < t_end:
        mid = (lo + hi) // 2
        if fails(prefix(ops, mid), eps, single_row, budget):
            hi = mid
        else:
            lo = mid + 1
    cur = prefix(ops, hi)
    witness = ddmin(cur, lambda o: not no_effect(o),
                    lambda t: fails(t, eps, single_row, budget), t_end)
    return witness


def window(ops, eps, single_row, budget, tail=12):
    """where to start showing a failing history: the latest point at least
    `tail` operations before the end at which the search had done exactly
    the operations before it, and the model states it had there"""
    ops = sorted(ops, key=lambda o: (o.inv, o.seq))
    link_program_order(ops)
    record = {}
    search(ops, eps, single_row, max_steps=budget, max_seconds=30,
           record=record)
    for j in range(max(0, len(ops) - tail), -1, -1):
        if j in record:
            return ops, j, list(record[j].values())
    return ops, 0, [State.initial()]


# ---- reporting ----

class Names:
    """short names for tokens: t1, t2, ... in order of value"""

    def __init__(self, ops):
        toks = set()
        for o in ops:
            if o.token is not None:
                toks.add(o.token)
            if o.kind == 'acquire' and isinstance(o.value, int):
                toks.add(o.value)
        self.map = {t: f't{i + 1}' for i, t in enumerate(sorted(toks))}

    def __call__(self, t):
        return self.map.get(t, str(t))


def describe(h, o, tn):
    r = o.rec
    if o.kind == 'acquire':
        what = ('lease_acquire' if r.get('slots') is None else
                f'semaphore_acquire({r["slots"]} slots)')
        args = (f'{o.name} holder {o.holder}/{o.role} ttl {r["ttl_ms"]} '
                f'wait {r.get("wait_ms", 0)}'
                + (f' delay {r["delay_ms"]}' if r.get('delay_ms') else ''))
    elif o.kind in ('renew', 'release', 'check'):
        what = 'lease_lock' if o.kind == 'check' else f'lease_{o.kind}'
        args = f'{o.name} {tn(o.token)}' + (
            f' ttl {r["ttl_ms"]}' if o.kind == 'renew' else '')
        if o.txn:
            args += f' [in {o.txn}]'
    elif o.kind == 'force':
        what = 'lease_force_release'
        args = o.name
    else:
        what = r.get('how', 'rollback') if o.op == 'commit' else 'prepare'
        args = f'{o.txn}'
    if o.outcome == 'unknown':
        res = '?'
    elif o.outcome == 'fail':
        res = f'ERROR {o.code}'
    elif o.kind == 'acquire':
        res = 'NULL' if o.value is None else tn(o.value)
    else:
        res = str(o.value)
    end = '       ?' if o.resp == INF else f'{h.rel(o.resp):9.1f}'
    who = f'{o.w}{" (admin)" if o.admin else ""}'
    frz = ' (frozen)' if h.frozen_during(o.w, o.inv, o.resp) else ''
    return (f'{h.rel(o.inv):9.1f} ..{end} ms  {who:<4} {what} {args} '
            f'-> {res}{frz}')


# ---- the other checks ----

def check_tokens(h, violations):
    grants = [o for o in h.ops if o.kind == 'acquire' and o.outcome == 'ok'
              and o.value is not None]
    seen = {}
    for g in grants:
        if g.value in seen:
            violations['token-dup'].append(
                f'token {g.value} granted twice: {seen[g.value].id} and {g.id}')
        seen[g.value] = g
    by_end = sorted(grants, key=lambda o: o.resp)
    best = None
    i = 0
    for g in sorted(grants, key=lambda o: o.inv):
        while i < len(by_end) and by_end[i].resp + 2 * h.eps < g.inv:
            if best is None or by_end[i].value > best.value:
                best = by_end[i]
            i += 1
        if best is not None and best.value >= g.value:
            violations['token-order'].append(
                f'{g.id} ({g.name}) got {g.value} after {best.id} '
                f'({best.name}) had been granted {best.value}')
    return len(grants)


def check_errors(h, mixed_names, violations, info):
    for o in h.ops:
        if o.outcome != 'fail':
            continue
        if o.code in NO_EFFECT_CODES:
            info['cancelled'][o.op] += 1
            continue
        if o.kind == 'acquire' and o.name in mixed_names and \
                o.code == 'LF021':
            info['kind_refusals'][o.op] += 1
            continue            # judged by the model
        if o.code == '42501' and o.kind in ('renew', 'release', 'check',
                                            'force'):
            continue            # judged by the model
        if o.code == '42704' and o.rec.get('how') == 'commit_prepared':
            continue            # committed by an attempt that was cancelled
        violations['error'].append(
            f'{o.id} {o.op} {o.name}: {o.code} {o.msg or ""}'.strip())
    for o in h.ops:
        if o.kind == 'commit' and o.op == 'commit' and o.outcome == 'ok' and \
                o.ends and not o.commits and \
                o.rec.get('how') == 'commit_prepared':
            violations['error'].append(f'{o.id}: COMMIT PREPARED said {o.value}')


def check_liveness(h, parts, single, slack, wake_slack, live):
    # an acquire that returned long after its wait (item 3: a row lock
    # held by a stalled holder's open transaction is waited for unbounded)
    for o in h.ops:
        if o.kind != 'acquire' or o.resp == INF:
            continue
        took = o.resp - o.inv - h.frozen_overlap(o.w, o.inv, o.resp)
        if took > o.wait + slack:
            live['slow-acquire'].append(
                f'{o.id} {o.name} wait {o.wait // 1_000_000} ms took '
                f'{took / 1e6:.0f} ms (-> {"NULL" if o.value is None else "token"})')
    # a released lease that nobody took for the slack although waiters
    # waited for it (item 9: a release committed by COMMIT PREPARED wakes
    # no waiter).  Every grant after the release has a larger token, so
    # none comes before the invocation of the first of them in token
    # order: the lease was surely free until then.
    for name, ops in parts.items():
        if not single[name]:
            continue
        released = {o.txn: o.token for o in ops if o.kind == 'release' and
                    o.txn and o.outcome == 'ok' and o.value}
        frees = []
        for o in ops:
            if o.resp == INF or o.outcome != 'ok':
                continue
            if o.kind == 'release' and o.value and not o.txn:
                frees.append((o.resp, o.token, o))
            elif o.kind == 'commit' and o.commits and o.txn in released:
                frees.append((o.resp, released[o.txn], o))
        acqs = [o for o in ops if o.kind == 'acquire']
        grants = sorted((o for o in acqs if o.outcome == 'ok' and
                         o.value is not None), key=lambda o: o.value)
        unknown = [o for o in acqs if o.outcome == 'unknown']
        for r, tok, fo in frees:
            nxt = next((g for g in grants if g.value > tok), None)
            f = max(r, nxt.inv) if nxt else h.run.get('t_end', r)
            if f - r < wake_slack:
                continue
            if any(x.inv < f and x.resp > r for x in unknown):
                continue
            waiters = [w for w in acqs if w.wait > 0 and w.inv < r and
                       w.inv + w.wait > r + wake_slack and
                       w.resp > r + wake_slack and
                       not h.frozen_during(w.w, r, w.resp)]
            if not waiters:
                continue
            live['late-wake'].append(
                f'{name}: {fo.id} ({fo.rec.get("how", fo.op)}) freed it at {h.rel(r):.1f} ms; '
                f'nobody took it for {(f - r) / 1e6:.0f} ms while '
                + ', '.join(f'{w.id} (wait {w.wait // 1_000_000} ms from '
                            f'{h.rel(w.inv):.0f} ms)' for w in waiters[:3])
                + (' ...' if len(waiters) > 3 else '') + ' waited')


# ---- mutations: the checker must reject these ----

def mutate(h, kind, seed):
    rnd = random.Random(seed)
    eps = h.eps
    parts = defaultdict(list)
    for o in h.ops:
        if o.name is not None:
            parts[o.name].append(o)
    names = sorted(parts)
    rnd.shuffle(names)
    for name in names:
        ops = sorted(parts[name], key=lambda o: o.inv)
        grants = [o for o in ops if o.kind == 'acquire' and o.outcome == 'ok'
                  and o.value is not None]
        if kind == 'swap-tokens':
            pairs = [(a, b) for a in grants for b in grants
                     if a.resp + 4 * eps < b.inv]
            if not pairs:
                continue
            a, b = rnd.choice(pairs)
            ta, tb = a.value, b.value
            for o in h.ops:
                for f in ('value', 'token'):
                    v = getattr(o, f)
                    if o.kind == 'acquire' or f == 'token':
                        if v == ta:
                            setattr(o, f, tb)
                        elif v == tb:
                            setattr(o, f, ta)
            return (f'{name}: swapped the tokens of {a.id} and {b.id} '
                    f'(and of every operation that used them)')
        if kind == 'shorten-ttl':
            cands = []
            for g in grants:
                users = [o for o in ops if o.token == g.value]
                if not users:
                    continue
                first = min(users, key=lambda o: o.inv)
                if (first.kind in ('renew', 'check', 'release') and
                        first.outcome == 'ok' and first.value is True and
                        first.txn is None and
                        first.inv > g.resp + 2_000_000 + 2 * eps):
                    cands.append((g, first))
            if not cands:
                continue
            g, first = rnd.choice(cands)
            g.ttl = 1_000_000
            g.rec = dict(g.rec, ttl_ms=1)
            return (f'{name}: {g.id} now has a TTL of 1 ms; {first.id} '
                    f'({first.kind}) still answered true '
                    f'{(first.inv - g.resp) / 1e6:.1f} ms after it')
    return None


def save_witness(h, ops, d):
    """a history directory with only these operations (those made
    unknown get no outcome line), and the run's settings and events"""
    os.makedirs(os.path.join(d, 'history'), exist_ok=True)
    with open(os.path.join(d, 'run.json'), 'w') as f:
        json.dump(h.run, f, indent=1)
    with open(os.path.join(d, 'events.jsonl'), 'w') as f:
        for e in h.events:
            if e['ev'] in ('run_start', 'run_end', 'pause', 'resume'):
                f.write(json.dumps(e) + '\n')
    lines = defaultdict(list)
    for o in sorted(ops, key=lambda o: (o.inv, o.seq)):
        lines[o.w].append(o.rec)
        if o.outcome != 'unknown' and o.out_rec is not None:
            lines[o.w].append(o.out_rec)
    for w, recs in lines.items():
        with open(os.path.join(d, 'history', f'{w}.jsonl'), 'w') as f:
            for r in recs:
                f.write(json.dumps(r) + '\n')


# ---- main ----

def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('outdir')
    p.add_argument('--eps-ms', type=float, default=1.0)
    p.add_argument('--live-slack-ms', type=float, default=1000,
                   help='slow-acquire: how much longer than its wait')
    p.add_argument('--wake-slack-ms', type=float, default=250,
                   help='late-wake: how long a released lease may stay '
                   'free while waiters wait')
    p.add_argument('--strict-liveness', action='store_true')
    p.add_argument('--mutate', choices=['swap-tokens', 'shorten-ttl'])
    p.add_argument('--mutate-seed', type=int, default=1)
    p.add_argument('--max-steps', type=int, default=3_000_000)
    p.add_argument('--max-seconds', type=float, default=600)
    p.add_argument('--shrink-seconds', type=float, default=60)
    p.add_argument('--max-report', type=int, default=5)
    p.add_argument('--report', help='where summary.json and the witnesses '
                   'go (default OUTDIR)')
    p.add_argument('--save-witness', metavar='DIR',
                   help='also write each failing sub-history as a history '
                   'directory of its own, DIR/NAME (a fixture for check.py)')
    a = p.parse_args()
    eps = int(a.eps_ms * 1e6)
    t_start = time.monotonic()
    report = a.report or a.outdir
    os.makedirs(report, exist_ok=True)
    try:
        h = History(a.outdir, eps)
    except (OSError, KeyError, ValueError) as e:
        print(f'check.py: cannot read {a.outdir}: {e!r}')
        return 2
    P = print
    summary = dict(outdir=a.outdir, eps_ms=a.eps_ms, seed=h.run.get('seed'),
                   families=h.run.get('families'))
    if a.mutate:
        what = mutate(h, a.mutate, a.mutate_seed)
        if what is None:
            P(f'mutation {a.mutate}: nothing in this history to mutate')
            return 2
        P(f'MUTATED ({a.mutate}): {what}')
        summary['mutation'] = what
    violations = defaultdict(list)
    live = defaultdict(list)
    info = defaultdict(lambda: defaultdict(int))

    drift = h.run.get('clock_offset_drift_ns', 0)
    if abs(drift) > eps:
        violations['clock'].append(
            f'CLOCK_REALTIME - CLOCK_MONOTONIC moved by {drift / 1e6:.3f} ms '
            'during the run: the clock was stepped, times are unusable')

    parts = defaultdict(list)
    for o in h.ops:
        # lease_purge deletes rows nobody holds: nothing the model sees
        if o.kind != 'purge':
            parts[o.name].append(o)
    single = {n: all(o.cap == 1 for o in ops if o.kind == 'acquire')
              for n, ops in parts.items()}
    mixed = {n for n, ops in parts.items()
             if len({o.cap for o in ops if o.kind == 'acquire'}) > 1 or
             any(o.kind == 'acquire' and o.rec.get('slots') is not None
                 for o in ops) and any(o.kind == 'acquire' and
                                       o.rec.get('slots') is None
                                       for o in ops)}
    # a semaphore try-once gives up while another session of the same
    # holder acquires the same name (docs/waiting.md)
    for n, ops in parts.items():
        sem = [o for o in ops if o.kind == 'acquire' and
               o.rec.get('slots') is not None]
        for o in sem:
            o.null_excused = any(x is not o and x.w != o.w and
                                (x.holder, x.role) == (o.holder, o.role) and
                                x.inv < o.resp and o.inv < x.resp for x in sem)
    # a waiting newcomer queues behind the waiters already there, even
    # while the lease is free for a moment (docs/waiting.md): its NULL
    # needs no holder when an earlier waiter was waiting all along (how
    # long such moments last is the liveness check's business)
    for n, ops in parts.items():
        waits = [o for o in ops if o.kind == 'acquire' and o.wait > 0]
        for o in waits:
            if o.outcome == 'ok' and o.value is None:
                o.null_excused = o.null_excused or any(
                    x.inv + eps < o.inv and x.resp > o.resp for x in waits)
    # a try-once acquire does not wait for another transaction that has a
    # row of the name locked or is taking, creating or releasing it: NULL
    # at once (README, lease_acquire; docs/waiting.md).  The model marks
    # rows locked only by lease_lock and by renews and releases waiting for
    # their COMMIT; a forced release, another acquire or a release still
    # running in another client locks rows too, so a NULL overlapping one
    # of them needs no holder.
    # A purge (of every name; not in a name's own history) locks the free
    # rows it deletes: a try-once overlapping one may meet such a row.
    writers = ('acquire', 'renew', 'release', 'check', 'force')
    purges = [o for o in h.ops if o.kind == 'purge']
    for n, ops in parts.items():
        for o in ops:
            if (o.kind == 'acquire' and o.wait == 0 and o.outcome == 'ok'
                    and o.value is None and not o.null_excused):
                o.null_excused = any(
                    x is not o and x.w != o.w and
                    (x.kind in writers or x.kind == 'purge') and
                    x.inv < o.resp and o.inv < x.resp for x in ops + purges)
    # LF021 is never excused by a concurrent call: an acquire that finds a
    # row of another kind being written waits for that transaction and
    # judges the row afterwards (docs/leases.md, "One kind per name"; the
    # excuse this replaced hid a wrong refusal, issue 30)
    # tokens nobody was told about (an acquire with unknown outcome):
    # leave out the operations that use them, and say so
    for n, ops in parts.items():
        known = {o.value for o in ops if o.kind == 'acquire' and
                 o.outcome == 'ok' and o.value is not None}
        unk = [o for o in ops if o.token is not None and o.token not in known]
        if unk:
            h.notes.append(f'{n}: {len(unk)} operations use tokens of '
                           'acquires with unknown outcome; left out')
            ids = {id(o) for o in unk}
            parts[n] = [o for o in ops if id(o) not in ids]

    ngrants = check_tokens(h, violations)
    check_errors(h, mixed, violations, info)
    check_liveness(h, parts, single, int(a.live_slack_ms * 1e6),
                   int(a.wake_slack_ms * 1e6), live)

    P(f'linearizability check: {a.outdir}')
    P(f'  run: seed {h.run.get("seed")}, {h.run.get("duration")} s, '
      f'families {",".join(h.run.get("families", []))}, fencing '
      f'{h.run.get("extversion")} on PostgreSQL {h.run.get("server_version")}')
    counts = defaultdict(lambda: defaultdict(int))
    for o in h.ops:
        if o.outcome == 'ok':
            r = ('granted' if o.kind == 'acquire' and o.value is not None else
                 'NULL' if o.kind == 'acquire' else str(o.value))
        else:
            r = o.outcome if o.outcome != 'fail' else o.code
        counts[o.op][r] += 1
    for k in sorted(counts):
        P(f'  {k}: ' + ', '.join(f'{v} {r}' for r, v in
                                 sorted(counts[k].items())))
    P(f'  freezes: {len(h.events and [e for e in h.events if e["ev"] == "pause"])}')
    summary['counts'] = {k: dict(v) for k, v in counts.items()}
    summary['grants'] = ngrants
    summary['partitions'] = {}
    budget_out = False
    for name in sorted(parts):
        pops, v = check_partition(parts[name], eps, single[name],
                                  max_steps=a.max_steps,
                                  max_seconds=a.max_seconds)
        kind = 'one row' if single[name] else 'slots'
        summary['partitions'][name] = dict(
            ops=len(pops), steps=v.steps, seconds=round(v.seconds, 2),
            ok=v.ok, single_row=single[name], mixed=name in mixed)
        verdict = {True: 'linearizable', False: 'NOT LINEARIZABLE',
                   None: 'UNDECIDED (search budget)'}[v.ok]
        P(f'  {name} ({kind}{", mixed kinds" if name in mixed else ""}): '
          f'{len(pops)} ops, {v.steps} search steps, {v.seconds:.1f} s: '
          f'{verdict}')
        if v.ok is None:
            budget_out = True
        if v.ok is not False:
            continue
        tn = Names(pops)
        k, extra, st, cands = v.best
        done = k + len(extra)
        lines = [f'{name}: no linearization; the search linearized at most '
                 f'{done} of {len(pops)} operations']
        lines.append('  model state there (one of them): ' +
                     '; '.join(st.describe(h.t0, tn)))
        lines.append('  and none of these could come next:')
        for c in cands:
            lines.append('    ' + describe(h, pops[c], tn))
        witness = shrink(pops, eps, single[name], seconds=a.shrink_seconds)
        wfile = os.path.join(report, f'witness-{name}.txt')
        with open(wfile, 'w') as f:
            for o in sorted(witness, key=lambda o: (o.inv, o.seq)):
                f.write(describe(h, o, tn) + '\n')
        wops, j, states = window(witness, eps, single[name], 200_000)
        lines.append(f'  a failing sub-history of {len(witness)} operations '
                     '(times in ms from the start of the run), from its '
                     f'operation {j + 1} on:')
        descr = sorted({' and '.join(s.describe(h.t0, tn)) for s in states})
        lines.append(f'    the model before it, in {len(descr)} possible '
                     'state(s): ' + ' | '.join(descr[:4])
                     + (' | ...' if len(descr) > 4 else ''))
        for o in wops[j:]:
            lines.append('    ' + describe(h, o, tn))
        lines.append(f'  (the whole sub-history, which fails by itself: '
                     f'{wfile})')
        violations['linearizability'].append('\n'.join(lines))
        summary['partitions'][name]['witness'] = [o.id for o in witness]
        if a.save_witness:
            save_witness(h, witness, os.path.join(a.save_witness, name))
    nsafe = sum(len(x) for x in violations.values())
    nlive = sum(len(x) for x in live.values())
    if info['cancelled']:
        P('  cancelled (57014, changed nothing): ' + ', '.join(
            f'{k} x{n}' for k, n in sorted(info['cancelled'].items())))
    if info['kind_refusals']:
        P('  acquires refused with LF021, the name being of another kind: ' +
          ', '.join(f'{c} x{n}' for c, n in
                    sorted(info['kind_refusals'].items())))
    for n in h.notes[:5]:
        P(f'  note: {n}')
    if nlive:
        P(f'  LIVENESS: {nlive} ' + ', '.join(
            f'{k}={len(v)}' for k, v in sorted(live.items())))
        for k, v in sorted(live.items()):
            for m in v[:a.max_report]:
                P(f'    {k}: {m}')
            if len(v) > a.max_report:
                P(f'    {k}: ... {len(v) - a.max_report} more')
    else:
        P('  liveness: no slow acquire, no waiter left waiting')
    if nsafe:
        P(f'  SAFETY VIOLATIONS: {nsafe} ' + ', '.join(
            f'{k}={len(v)}' for k, v in sorted(violations.items())))
        for k, v in sorted(violations.items()):
            for m in v[:a.max_report]:
                P(f'    {k}: {m}')
            if len(v) > a.max_report:
                P(f'    {k}: ... {len(v) - a.max_report} more')
    P(f'  checked in {time.monotonic() - t_start:.1f} s')
    summary.update(
        violations={k: len(v) for k, v in violations.items()},
        liveness={k: len(v) for k, v in live.items()},
        examples={k: v[:a.max_report] for k, v in violations.items()},
        liveness_examples={k: v[:a.max_report] for k, v in live.items()},
        safety_violations=nsafe, liveness_findings=nlive,
        undecided=budget_out, seconds=round(time.monotonic() - t_start, 1))
    with open(os.path.join(report, 'summary.json'), 'w') as f:
        json.dump(summary, f, indent=1)
    if nsafe or (a.strict_liveness and nlive):
        P('FAIL')
        return 1
    if budget_out:
        P('UNDECIDED')
        return 2
    P('OK')
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except Exception:
        import traceback
        traceback.print_exc()
        print('check.py: internal error')
        sys.exit(2)
