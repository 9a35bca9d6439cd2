#!/usr/bin/python3
"""check.py: the history checker of a torture run (see README.md).

    test/torture/check.py OUTDIR [--json FILE] [--max-report N]

OUTDIR is what run.py wrote: history/*.jsonl (one file per worker
incarnation), events.jsonl (pauses, kills, crashes), final.json (the audit
log torture_log, the rows of torture_resource and of fencing.leases after
the run) and run.json.  All times are CLOCK_MONOTONIC nanoseconds.

An op is an invoke line plus, if the worker lived to see it, one outcome
line: ok (the server answered success; for a write, the commit returned),
fail (an ERROR on a healthy connection: not committed) or info (the
connection broke: unknown).  Ops with no outcome are unknown too.

Safety (any violation: exit 1)
  order        per resource, audit tokens in seq order never decrease
               (the audit row is written by an AFTER UPDATE trigger under
               the row lock, so seq order is the commit order of the row)
  phantom      every audit row is a write some worker invoked, with the
               same resource and token, at most once, and not one that
               was refused (LF001) or failed
  final-row    the resource row is the last audit row for it
  lost-write   every acknowledged write is in the audit log; with the
               writer's synchronous_commit = off, a write acknowledged
               before a server crash may be lost (reported, allowed)
  stale-after-ack  no accepted write is older than a write to the same
               resource acknowledged before it was sent (catches what a
               lost audit row would hide)
  token-dup    tokens granted by lease_acquire are unique
  token-order  a grant that started after another grant completed has a
               larger token (database-wide, so per lease too)
  crash-token  tokens granted after a restart exceed every token
               acknowledged before the crash
  lease-lost   fencing.leases after the run holds at least the newest
               acknowledged grant of each lease, and an acknowledged
               release of it; its acquires, renewals and releases counters
               grew by the acknowledged successes (plus at most the calls
               with unknown outcome)
  exclusive    a lease granted to another holder only after the previous
               holder's lease could have ended (TTL from the invoke of its
               acquire or last acknowledged renew; 10 ms slack)
Liveness (reported, never an exit 1)
  false-refusal  LF001 whose reported fence is not above the token, or is
               no token written to that resource before the refusal
  refused-free   lease_acquire returned NULL although every other holder's
               lease had surely ended (released or past its TTL)
"""
import argparse
import bisect
import glob
import json
import os
import sys
from collections import defaultdict

SLACK_NS = 10_000_000
INF = float('inf')


class Op:
    __slots__ = ('id', 'op', 'w', 'lease', 'resource', 'token', 'ttl',
                 't_inv', 't_end', 'outcome', 'value', 'code', 'fence',
                 'path', 'msg')

    def __init__(self, rec):
        self.id = rec['id']
        self.op = rec['op']
        self.w = rec['w']
        self.lease = rec.get('lease')
        self.resource = rec.get('resource')
        self.token = rec.get('token')
        self.ttl = rec.get('ttl_ms')
        self.t_inv = rec['t']
        self.t_end = None
        self.outcome = None
        self.value = None
        self.code = None
        self.fence = None
        self.path = rec.get('path')
        self.msg = None


def load_jsonl(path, errors):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.endswith('\n'):
                errors.append(f'{path}:{n}: truncated last line ignored')
                break
            try:
                out.append(json.loads(line))
            except ValueError:
                errors.append(f'{path}:{n}: bad JSON ignored')
    return out


class Checker:
    def __init__(self, outdir, max_report):
        self.outdir = outdir
        self.max_report = max_report
        self.notes = []
        self.safety = defaultdict(list)
        self.liveness = defaultdict(list)
        self.info = defaultdict(int)
        with open(os.path.join(outdir, 'run.json')) as f:
            self.run = json.load(f)
        with open(os.path.join(outdir, 'final.json')) as f:
            self.final = json.load(f)
        self.events = load_jsonl(os.path.join(outdir, 'events.jsonl'),
                                 self.notes)
        self.ops = {}
        self.sync = {}          # worker label -> synchronous_commit on?
        self.sleeps = defaultdict(list)
        for path in sorted(glob.glob(os.path.join(outdir, 'history',
                                                  '*.jsonl'))):
            for rec in load_jsonl(path, self.notes):
                ev = rec['ev']
                if ev == 'invoke':
                    if rec['id'] in self.ops:
                        self.violate('phantom', f'op id {rec["id"]} invoked twice')
                    self.ops[rec['id']] = Op(rec)
                elif ev in ('ok', 'fail', 'info'):
                    op = self.ops.get(rec['id'])
                    if op is None or op.outcome is not None:
                        self.notes.append(f'outcome without invoke: {rec}')
                        continue
                    op.outcome = ev
                    op.t_end = rec['t']
                    op.code = rec.get('code')
                    op.fence = rec.get('fence')
                    op.msg = rec.get('msg')
                    if op.op == 'acquire' and ev == 'ok':
                        op.value = rec['token']
                    elif op.op in ('renew', 'release') and ev == 'ok':
                        op.value = rec['value']
                elif ev == 'start':
                    self.sync[rec['w']] = rec['sync']
                elif ev == 'sleep':
                    self.sleeps[rec['w']].append((rec['t'], rec['ms']))
        # (began, server down, server up again)
        self.crashes = []
        begin = down = None
        for e in self.events:
            if e['ev'] == 'crash_begin':
                begin = e['t']
            elif e['ev'] == 'crash_down':
                down = e['t']
            elif e['ev'] == 'restart_up' and begin is not None:
                self.crashes.append((begin, down or e['t'], e['t']))
                begin = down = None
        self.pauses = defaultdict(list)     # worker -> [(stop, cont, ms)]
        open_pause = {}
        for e in self.events:
            if e['ev'] == 'pause':
                open_pause[e['worker']] = e
            elif e['ev'] in ('resume', 'kill') and e['worker'] in open_pause:
                p = open_pause.pop(e['worker'])
                self.pauses[e['worker']].append((p['t'], e['t'], p['ms']))
        for w, p in open_pause.items():
            self.pauses[w].append((p['t'], INF, p['ms']))

    # -- reporting --

    def violate(self, kind, msg):
        self.safety[kind].append(msg)

    def slow(self, kind, msg):
        self.liveness[kind].append(msg)

    # -- helpers --

    def by_op(self, kind):
        return [o for o in self.ops.values() if o.op == kind]

    # -- the checks --

    def check_audit(self):
        self.acquire_of = {}
        for op in self.by_op('acquire'):
            if op.outcome == 'ok' and op.value is not None:
                self.acquire_of[(op.w, op.value)] = op
        self.stale_accepted = defaultdict(int)
        log = self.final['log']
        self.info['audit_rows'] = len(log)
        last = {}
        seen = {}
        self.logged = {}
        for row in log:
            r, tok, opid = row['resource'], row['token'], row['opid']
            prev = last.get(r)
            if prev is not None and (tok is None or tok < prev['token']):
                if opid in self.ops:
                    self.stale_accepted[self.stale_cause(self.ops[opid])] += 1
                self.violate('order',
                             f'resource {r}: seq {row["seq"]} token {tok} '
                             f'({opid}) accepted after seq {prev["seq"]} '
                             f'token {prev["token"]} ({prev["opid"]})')
            last[r] = row
            if opid in seen:
                self.violate('phantom', f'op {opid} is in the audit log twice '
                             f'(seq {seen[opid]} and {row["seq"]})')
            seen[opid] = row['seq']
            self.logged[opid] = row
            op = self.ops.get(opid)
            if op is None or op.op != 'write':
                self.violate('phantom', f'audit seq {row["seq"]}: {opid} is '
                             'no write any worker invoked')
                continue
            if op.resource != r or op.token != tok:
                self.violate('phantom', f'audit seq {row["seq"]}: {opid} '
                             f'wrote resource {r} token {tok}, but was sent '
                             f'for resource {op.resource} token {op.token}')
            if op.outcome == 'fail':
                self.violate('phantom', f'audit seq {row["seq"]}: {opid} '
                             f'committed, but the worker was told {op.code}')
        for row in self.final['resource']:
            want = last.get(row['id'])
            got = (row['fence'], row['value'])
            exp = (want['token'], want['opid']) if want else (None, None)
            if got != exp:
                self.violate('final-row', f'resource {row["id"]} ends as '
                             f'{got}, its last audit row says {exp}')

    def crash_after(self, t):
        """did the server go down after time t?"""
        return any(d > t for _, d, _ in self.crashes)

    def check_acknowledged_writes(self):
        lost_allowed = []
        for op in self.by_op('write'):
            if op.outcome != 'ok' or op.id in self.logged:
                continue
            if not self.sync.get(op.w, True) and self.crash_after(op.t_end):
                lost_allowed.append(op)
            else:
                self.violate('lost-write', f'{op.id} (resource {op.resource} '
                             f'token {op.token}, writer synchronous_commit '
                             f'{"on" if self.sync.get(op.w, True) else "off"}) '
                             'was acknowledged but is not in the audit log')
        self.lost_allowed = {o.id for o in lost_allowed}
        self.info['writes_lost_async'] = len(lost_allowed)

        # stale-after-ack: per resource, sweep the acknowledged writes by
        # completion and the accepted ones by invocation
        acked = defaultdict(list)
        accepted = defaultdict(list)
        for op in self.by_op('write'):
            if op.outcome == 'ok':
                acked[op.resource].append(op)
            if op.id in self.logged:
                accepted[op.resource].append(op)
        after_lost = 0
        for r in accepted:
            done = sorted(acked[r], key=lambda o: o.t_end)
            best = None
            i = 0
            for b in sorted(accepted[r], key=lambda o: o.t_inv):
                while i < len(done) and done[i].t_end < b.t_inv:
                    if best is None or done[i].token > best.token:
                        best = done[i]
                    i += 1
                if best is not None and best.token > b.token:
                    if best.id in self.lost_allowed:
                        after_lost += 1
                    else:
                        self.violate('stale-after-ack',
                                     f'resource {r}: {b.id} token {b.token} '
                                     f'was accepted although {best.id} token '
                                     f'{best.token} had been acknowledged '
                                     'before it was sent')
        self.info['accepted_after_lost_async_write'] = after_lost

        # not a violation, and what fencing is about: a holder whose lease
        # was already granted anew may still write until its successor
        # does; count such writes
        grants = defaultdict(list)
        for g in self.acquire_of.values():
            grants[int(g.lease.split('_')[1])].append(g)
        superseded = 0
        for r, gs in grants.items():
            gs.sort(key=lambda g: g.t_end)
            ends = [g.t_end for g in gs]
            best = []
            m = 0
            for g in gs:
                m = max(m, g.value)
                best.append(m)
            for b in accepted.get(r, []):
                k = bisect.bisect_left(ends, b.t_inv)
                if k and best[k - 1] > b.token:
                    superseded += 1
        self.info['accepted_from_superseded_holder'] = superseded

    def check_refusals(self):
        writes_by_res_tok = defaultdict(list)
        for op in self.by_op('write'):
            writes_by_res_tok[(op.resource, op.token)].append(op)
        kinds = defaultdict(int)
        for op in self.by_op('write'):
            if op.outcome != 'fail' or op.code != 'LF001':
                continue
            f = op.fence
            if f is None or f <= op.token:
                self.slow('false-refusal', f'{op.id} token {op.token} '
                          f'refused with fence {f}')
                continue
            cands = [x for x in writes_by_res_tok.get((op.resource, f), [])
                     if x.t_inv < op.t_end]
            if not cands:
                self.slow('false-refusal', f'{op.id} token {op.token} refused '
                          f'with fence {f}: no write of token {f} to resource '
                          f'{op.resource} was sent before the refusal')
            elif not any(x.id in self.logged for x in cands):
                kinds['explained_by_unlogged_write'] += 1
            kinds[self.stale_cause(op)] += 1
        self.refusal_kinds = dict(kinds)

    def stale_cause(self, op):
        """why a write's holder was stale: a pause (SIGSTOP) or a long
        sleep of its worker between its acquire and the write, or neither
        (a race: the lease ran out under load, or a short pause)"""
        acq = self.acquire_of.get((op.w, op.token))
        start = acq.t_end if acq else 0
        ttl = (acq.ttl if acq else 0) * 1_000_000
        for (ps, pe, ms) in self.pauses.get(op.w, []):
            if ps < op.t_inv and pe > start:
                return 'after_pause' if ms * 1e6 > ttl else 'after_short_pause'
        for (t, ms) in self.sleeps.get(op.w, []):
            if start <= t <= op.t_inv and ms * 1_000_000 > ttl:
                return 'after_long_sleep'
        return 'race'

    def check_tokens(self):
        floor = self.run.get('token_floor', 0)
        grants = [o for o in self.by_op('acquire')
                  if o.outcome == 'ok' and o.value is not None]
        seen = {}
        for g in grants:
            if g.value in seen:
                self.violate('token-dup', f'token {g.value} granted twice: '
                             f'{seen[g.value].id} ({seen[g.value].lease}) and '
                             f'{g.id} ({g.lease})')
            seen[g.value] = g
            if g.value <= floor:
                self.violate('token-order', f'{g.id} got token {g.value}, not '
                             f'above the token before the run ({floor})')
        # real-time order: grants completed before b was sent are below b
        by_end = sorted(grants, key=lambda o: o.t_end)
        best = None
        i = 0
        for b in sorted(grants, key=lambda o: o.t_inv):
            while i < len(by_end) and by_end[i].t_end < b.t_inv:
                if best is None or by_end[i].value > best.value:
                    best = by_end[i]
                i += 1
            if best is not None and best.value >= b.value:
                self.violate('token-order', f'{b.id} ({b.lease}) got token '
                             f'{b.value} after {best.id} ({best.lease}) had '
                             f'been granted {best.value}')
        nt = self.final.get('next_token')
        if grants and nt is not None and nt <= max(g.value for g in grants):
            self.violate('token-order', f'next_token() after the run is {nt}, '
                         'not above every granted token')
        # crashes
        self.crash_figures = []
        for (b, _, u) in self.crashes:
            before = [g.value for g in grants if g.t_end < b]
            after = [g.value for g in grants if g.t_inv > u]
            mb = max(before) if before else None
            ma = min(after) if after else None
            self.crash_figures.append((mb, ma))
            if mb is not None and ma is not None and ma <= mb:
                self.violate('crash-token', f'crash at {b}: token {ma} granted '
                             f'after the restart, but {mb} was acknowledged '
                             'before the crash')
        # the lease table keeps the newest acknowledged grant and release
        rel_ok = {(o.lease, o.token) for o in self.by_op('release')
                  if o.outcome == 'ok' and o.value}
        unknown_acq = defaultdict(int)
        for o in self.by_op('acquire'):
            if o.outcome in (None, 'info'):
                unknown_acq[o.lease] += 1
        newest = {}
        for g in grants:
            if g.lease not in newest or g.value > newest[g.lease].value:
                newest[g.lease] = g
        rows = {r['name']: r for r in self.final['leases']}
        for name, g in newest.items():
            row = rows.get(name)
            if row is None or row['token'] < g.value:
                self.violate('lease-lost', f'{name}: {g.id} was granted '
                             f'{g.value}, the lease row holds '
                             f'{row and row["token"]}')
                continue
            if row['token'] == g.value:
                if (name, g.value) in rel_ok and not row['released']:
                    self.violate('lease-lost', f'{name}: the release of token '
                                 f'{g.value} was acknowledged, the row is not '
                                 'released')
                if row['holder'] != g.w:
                    self.violate('lease-lost', f'{name}: token {g.value} was '
                                 f'granted to {g.w}, the row says '
                                 f'{row["holder"]}')
            elif not unknown_acq[name]:
                self.violate('lease-lost', f'{name}: the row holds token '
                             f'{row["token"]}, which no acquire could have '
                             'returned')

    def check_lease_counters(self):
        """lease_acquire, lease_renew and lease_release that succeed commit
        synchronously, and count themselves in the lease row: the counters
        after the run lie between the acknowledged successes and those plus
        the calls with unknown outcome, crashes or not"""
        before = self.run.get('lease_counters_before', {})
        rows = {r['name']: r for r in self.final['leases']}
        col = dict(acquire='acquires', renew='renewals', release='releases')
        for kind, column in col.items():
            lo = defaultdict(int)
            hi = defaultdict(int)
            for o in self.by_op(kind):
                if o.outcome == 'ok' and o.value not in (None, False):
                    lo[o.lease] += 1
                    hi[o.lease] += 1
                elif o.outcome in (None, 'info'):
                    hi[o.lease] += 1
            for name in set(lo) | set(hi):
                row = rows.get(name)
                n = (row[column] if row else 0) - \
                    before.get(name, {}).get(column, 0)
                if not lo[name] <= n <= hi[name]:
                    self.violate('lease-lost', f'{name}: {column} counter '
                                 f'grew by {n}, the histories say '
                                 f'{lo[name]}..{hi[name]}')

    def lease_windows(self):
        """per (lease, token): acked-true renews, release invocations"""
        renews = defaultdict(list)
        releases = defaultdict(list)
        unknown_renew = set()
        for o in self.by_op('renew'):
            if o.outcome == 'ok' and o.value:
                renews[(o.lease, o.token)].append(o)
            elif o.outcome in (None, 'info'):
                unknown_renew.add((o.lease, o.token))
        for o in self.by_op('release'):
            releases[(o.lease, o.token)].append(o)
        return renews, releases, unknown_renew

    def check_exclusive(self):
        renews, releases, unknown_renew = self.lease_windows()
        acqs = defaultdict(list)
        for o in self.by_op('acquire'):
            acqs[o.lease].append(o)
        checked = 0
        for lease, ops in acqs.items():
            grants = sorted((o for o in ops
                             if o.outcome == 'ok' and o.value is not None),
                            key=lambda o: o.value)
            unknown = [o for o in ops if o.outcome in (None, 'info')]
            for g1, g2 in zip(grants, grants[1:]):
                if g1.w == g2.w:
                    continue
                key = (lease, g1.value)
                if any(r.t_inv < g2.t_end for r in releases.get(key, [])):
                    continue
                # an unknown re-acquire by the same holder may have set
                # a shorter expiry
                if any(u.w == g1.w and g1.t_inv < u.t_inv < g2.t_end
                       for u in unknown):
                    continue
                lb = g1.t_inv + g1.ttl * 1_000_000
                for r in renews.get(key, []):
                    lb = max(lb, r.t_inv + r.ttl * 1_000_000)
                checked += 1
                if g2.t_end + SLACK_NS < lb:
                    self.violate('exclusive', f'{lease}: {g2.id} took over '
                                 f'with {g2.value} {(lb - g2.t_end) / 1e6:.1f} '
                                 f'ms before {g1.id}\'s lease ({g1.value}) '
                                 'could have expired')
        self.info['exclusive_pairs_checked'] = checked

    def check_refused_acquires(self):
        renews, releases, unknown_renew = self.lease_windows()
        acqs = defaultdict(list)
        for o in self.by_op('acquire'):
            acqs[o.lease].append(o)
        for lease, ops in acqs.items():
            holds = []          # (t_inv, end upper bound, holder)
            for o in ops:
                if o.outcome == 'ok' and o.value is not None:
                    key = (lease, o.value)
                    rel = [r.t_end for r in releases.get(key, [])
                           if r.outcome == 'ok' and r.value]
                    if rel:
                        end = min(rel)
                    elif key in unknown_renew:
                        end = INF
                    else:
                        end = o.t_end + o.ttl * 1_000_000
                        for r in renews.get(key, []):
                            end = max(end, r.t_end + r.ttl * 1_000_000)
                    holds.append((o.t_inv, end, o.w))
                elif o.outcome in (None, 'info'):
                    holds.append((o.t_inv, INF, o.w))
            holds.sort()
            refused = sorted((o for o in ops
                              if o.outcome == 'ok' and o.value is None),
                             key=lambda o: o.t_end)
            best = (-INF, None)
            second = -INF
            i = 0
            for a in refused:
                while i < len(holds) and holds[i][0] < a.t_end:
                    _, end, h = holds[i]
                    if h == best[1]:
                        best = (max(best[0], end), h)
                    elif end > best[0]:
                        second = best[0]
                        best = (end, h)
                    else:
                        second = max(second, end)
                    i += 1
                latest = second if best[1] == a.w else best[0]
                if latest + SLACK_NS < a.t_inv:
                    self.slow('refused-free', f'{a.id} ({lease}) refused, but '
                              'every other holder\'s lease had ended '
                              f'{(a.t_inv - latest) / 1e6:.1f} ms before')

    # -- summary --

    def count(self):
        c = {}
        for kind in ('acquire', 'write', 'renew', 'release'):
            ops = self.by_op(kind)
            c[kind] = dict(
                invoked=len(ops),
                ok=sum(1 for o in ops if o.outcome == 'ok'),
                fail=sum(1 for o in ops if o.outcome == 'fail'),
                unknown=sum(1 for o in ops if o.outcome in (None, 'info')))
        acq = self.by_op('acquire')
        c['acquire']['granted'] = sum(1 for o in acq if o.outcome == 'ok'
                                      and o.value is not None)
        c['acquire']['refused'] = sum(1 for o in acq if o.outcome == 'ok'
                                      and o.value is None)
        wr = self.by_op('write')
        c['write']['accepted'] = sum(1 for o in wr if o.outcome == 'ok')
        c['write']['stale'] = sum(1 for o in wr if o.outcome == 'fail'
                                  and o.code == 'LF001')
        c['write']['committed_per_log'] = len(self.logged)
        for kind in ('renew', 'release'):
            ops = self.by_op(kind)
            c[kind]['true'] = sum(1 for o in ops if o.outcome == 'ok' and o.value)
            c[kind]['false'] = sum(1 for o in ops if o.outcome == 'ok'
                                   and not o.value)
        return c

    def check(self):
        self.check_audit()
        self.check_acknowledged_writes()
        self.check_refusals()
        self.check_tokens()
        self.check_exclusive()
        self.check_lease_counters()
        self.check_refused_acquires()

    def report(self, json_path):
        c = self.count()
        st = self.run.get('stats', {})
        ev = defaultdict(int)
        for e in self.events:
            ev[e['ev']] += 1
        ttl_max = self.run.get('ttl_max', 0)
        pauses_over = sum(1 for w in self.pauses.values()
                          for (_, _, ms) in w if ms > ttl_max)
        nsafety = sum(len(v) for v in self.safety.values())
        nlive = sum(len(v) for v in self.liveness.values())
        ops_total = len(self.ops)
        unknown = sum(1 for o in self.ops.values() if o.outcome in (None, 'info'))
        P = print
        P(f'torture check: {self.outdir}')
        P(f'  run: mode {self.run.get("mode")}, {self.run.get("workers")} '
          f'workers, {self.run.get("leases")} leases, fence '
          f'{self.run.get("fence")}, writer sync {self.run.get("sync")}, '
          f'server synchronous_commit '
          f'{self.run.get("server_synchronous_commit")}, seed '
          f'{self.run.get("seed")}, {st.get("seconds")} s')
        P(f'  ops: {ops_total} ({unknown} with unknown outcome)')
        a = c['acquire']
        P(f'  acquire: {a["invoked"]}: {a["granted"]} granted, {a["refused"]} '
          f'refused (held), {a["fail"]} errors, {a["unknown"]} unknown')
        w = c['write']
        rk = ', '.join(f'{v} {k.replace("_", " ")}'
                       for k, v in sorted(self.refusal_kinds.items()))
        P(f'  write: {w["invoked"]}: {w["accepted"]} accepted, {w["stale"]} '
          f'refused stale (LF001{": " + rk if rk else ""}), '
          f'{w["fail"] - w["stale"]} other errors, {w["unknown"]} unknown; '
          f'{w["committed_per_log"]} in the audit log')
        for k in ('renew', 'release'):
            x = c[k]
            P(f'  {k}: {x["invoked"]}: {x["true"]} true, {x["false"]} false, '
              f'{x["fail"]} errors, {x["unknown"]} unknown')
        P(f'  faults: {ev["pause"]} pauses ({pauses_over} longer than the '
          f'max TTL {ttl_max} ms), {ev["kill"]} kills, {len(self.crashes)} '
          f'server crashes')
        for k, (mb, ma) in enumerate(self.crash_figures, 1):
            P(f'    crash {k}: newest token acknowledged before {mb}, oldest '
              f'granted after {ma}')
        if self.stale_accepted:
            P('  stale writes ACCEPTED out of order: ' + ', '.join(
                f'{v} {k.replace("_", " ")}'
                for k, v in sorted(self.stale_accepted.items())))
        P(f'  accepted writes from a superseded holder (a newer grant of '
          f'the lease had completed; no newer write had reached the row): '
          f'{self.info["accepted_from_superseded_holder"]}')
        P(f'  durability: {self.info["writes_lost_async"]} acknowledged writes '
          'with synchronous_commit=off lost in a crash (allowed); '
          f'{self.info["accepted_after_lost_async_write"]} accepted writes '
          'older than such a lost write')
        P(f'  lease exclusivity: {self.info["exclusive_pairs_checked"]} '
          'takeovers checked')
        swr = self.final.get('stale_writes_refused')
        P(f'  fencing_monitor.stats refusals: {swr} (LF001 seen by the '
          f'workers: {w["stale"]}'
          + (f'; the counters restart from zero with the server'
             if self.crashes and swr != w['stale'] else '') + ')')
        self.info['stats_stale_writes_refused'] = swr
        for n in self.notes[:5]:
            P(f'  note: {n}')
        if nlive:
            P(f'  LIVENESS: {nlive} ' + ', '.join(
                f'{k}={len(v)}' for k, v in sorted(self.liveness.items())))
            for k, v in sorted(self.liveness.items()):
                for m in v[:self.max_report]:
                    P(f'    {k}: {m}')
        else:
            P('  liveness: no false refusals, no acquire refused while free')
        if nsafety:
            P(f'  SAFETY VIOLATIONS: {nsafety} ' + ', '.join(
                f'{k}={len(v)}' for k, v in sorted(self.safety.items())))
            for k, v in sorted(self.safety.items()):
                for m in v[:self.max_report]:
                    P(f'    {k}: {m}')
                if len(v) > self.max_report:
                    P(f'    {k}: ... {len(v) - self.max_report} more')
            P('FAIL')
        else:
            P('  safety violations: 0')
            P('OK')
        summary = dict(
            ops=ops_total, unknown=unknown, counts=c,
            refusals=self.refusal_kinds,
            stale_accepted=dict(self.stale_accepted), pauses=ev['pause'],
            pauses_over_ttl=pauses_over, kills=ev['kill'],
            crashes=len(self.crashes), crash_tokens=self.crash_figures,
            info=dict(self.info),
            safety={k: len(v) for k, v in self.safety.items()},
            liveness={k: len(v) for k, v in self.liveness.items()},
            safety_violations=nsafety, liveness_violations=nlive,
            examples={k: v[:self.max_report] for k, v in self.safety.items()},
            seconds=st.get('seconds'), ok=nsafety == 0)
        with open(json_path, 'w') as f:
            json.dump(summary, f, indent=1)
        return nsafety


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('outdir')
    p.add_argument('--json', help='summary file (default OUTDIR/summary.json)')
    p.add_argument('--max-report', type=int, default=5)
    a = p.parse_args()
    try:
        ch = Checker(a.outdir, a.max_report)
        ch.check()
    except (OSError, KeyError, ValueError) as e:
        print(f'check.py: cannot check {a.outdir}: {e!r}')
        return 2
    n = ch.report(a.json or os.path.join(a.outdir, 'summary.json'))
    return 1 if n else 0


if __name__ == '__main__':
    sys.exit(main())
