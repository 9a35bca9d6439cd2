"""model.py: the sequential model of the lease API, with time.

The state of one lease name is a set of grants.  A grant is what an
acquire returned: its token, holder (holder name and role), capacity (1 for
lease_acquire, N for semaphore_acquire), kind (a lease, or a semaphore of N
slots: the name's kind, README "One kind per name"), TTL and lock delay,
and whether an open transaction holds its row locked (lease_lock in a
transaction, or a release or renew waiting for its COMMIT [PREPARED]).
Slots are not modelled: renew, release and lock find a grant by its
token, and an acquire only needs to know how many grants occupy the name.

Rules (README "Reference", docs/waiting.md):
  occupying(g, t)  g is locked, or t < expires(g) + lock_delay(g)
  live(g, t)       t < expires(g)          (g not released: released grants
                                            are removed)
  acquire(h, kind, cap)
                   granted iff no grant of another kind occupies at t (the
                   holder's own included), and, with O = the grants of
                   other holders that occupy at t, |O| + 1 <= cap and
                   |O| + 1 <= g.cap for every g in O (a lease, cap 1, is
                   exclusive; a semaphore of N admits N holders).  The
                   holder's own grant is replaced (a holder holds at most
                   one slot).  The token is larger than every token issued
                   before it.
                   Refused (NULL) iff not grantable at t, or the row is
                   locked by another transaction, or (allowed by the docs)
                   a semaphore try-once while another session of the same
                   holder acquires.
                   Refused with LF021 (nothing changes) iff a grant of
                   another kind occupies at t.
  renew/release/check(token)  true iff the token is a grant's, the caller
                   is its role (or an admin), the grant is live at t and
                   no other transaction holds its row; false iff the
                   grant is absent or not live; 42501 iff live and another
                   role's (caller not an admin).
  force_release    admin: ends every occupying grant; true iff there was one.

Time.  Every operation gets two points in the model, both inside
[invoke - eps, response + eps] on the client's CLOCK_MONOTONIC:
  L  its linearization point (the order; non-decreasing along the order),
  b  the clock reading its rules are judged by and expiry is counted from.
A write (grant, renew, release, check that locks) judges at b and becomes
visible at its commit L, so b <= L; a read (a refusal, false) sees a
snapshot at L and reads the clock after, so L <= b.  A successful write
judges after the previous writer of its row committed (it waited for the
row lock): b >= R, the last L of a write or unlock of that row.  Issue 23's
item 1 breaks exactly that.  The points are variables of a difference-bound
matrix (DBM, as in timed automata): a step adds constraints x - y <= c and
is possible iff they stay satisfiable, so the search never has to pick
concrete times.
"""

INF = float('inf')


class DBM:
    """x_i - x_j <= m[i][j]; variable 0 is the constant 0.  Kept closed
    (shortest paths), so projection is just dropping rows and columns."""
    __slots__ = ('n', 'm')

    def __init__(self, n, m):
        self.n = n
        self.m = m

    @staticmethod
    def zero(nvars):
        m = [[INF] * nvars for _ in range(nvars)]
        for i in range(nvars):
            m[i][i] = 0
        return DBM(nvars, m)

    def copy(self):
        return DBM(self.n, [r[:] for r in self.m])

    def add(self):
        n = self.n
        for r in self.m:
            r.append(INF)
        self.m.append([INF] * n + [0])
        self.n = n + 1
        return n

    def le(self, i, j, c):
        """add x_i - x_j <= c; False if that makes the zone empty"""
        m = self.m
        if c >= m[i][j]:
            return True
        if m[j][i] + c < 0:
            return False
        mj = m[j]
        rng = range(self.n)
        for a in rng:
            ai = m[a][i]
            if ai == INF:
                continue
            base = ai + c
            ra = m[a]
            for k in rng:
                v = base + mj[k]
                if v < ra[k]:
                    ra[k] = v
        return True

    def must_le(self, i, j, c):
        """does x_i - x_j <= c hold in the whole zone?"""
        return self.m[i][j] <= c

    def can_le(self, i, j, c):
        """does x_i - x_j <= c hold somewhere in the zone?"""
        return -self.m[j][i] <= c

    def project(self, idx):
        m = self.m
        return DBM(len(idx), [[m[a][b] for b in idx] for a in idx])

    def key(self):
        return tuple(x for r in self.m for x in r)


# variables: 0 the constant, 1 T (last L), 2 R of the name's only row
# (single-row names), then three per grant: base (its b: expires = base +
# ttl), R (last write or unlock of its row), pending base (a renew waiting
# for its transaction's commit)
V_T = 1
V_RN = 2
NFIX = 3


def v_base(gi):
    return NFIX + 3 * gi


def v_r(gi):
    return NFIX + 3 * gi + 1


def v_pbase(gi):
    return NFIX + 3 * gi + 2


# a grant: (token, holder, role, cap, ttl, delay, locked_by, pending, pttl,
# kind)
TOKEN, HOLDER, ROLE, CAP, TTL, DELAY, LOCKED, PENDING, PTTL, KIND = range(10)


def grant_sort_key(g):
    return (g[TOKEN] is None, g[TOKEN] or 0, g[HOLDER], g[ROLE])


class State:
    __slots__ = ('grants', 'maxtok', 'dbm', '_key')

    def __init__(self, grants, maxtok, dbm):
        self.grants = grants
        self.maxtok = maxtok
        self.dbm = dbm
        self._key = None

    @staticmethod
    def initial():
        return State((), 0, DBM.zero(NFIX))

    def key(self):
        if self._key is None:
            self._key = (self.grants, self.maxtok, self.dbm.key())
        return self._key

    def describe(self, t0=0, tn=str):
        """readable: grants with their expiry window (ms from t0)"""
        d = self.dbm
        out = []
        for gi, g in enumerate(self.grants):
            lo = -d.m[0][v_base(gi)]
            hi = d.m[v_base(gi)][0]
            exp = f'expires in [{fmt_ms(lo + g[TTL], t0)}, {fmt_ms(hi + g[TTL], t0)}]'
            extra = ''
            if g[DELAY]:
                extra += f' +delay {g[DELAY] / 1e6:g} ms'
            if g[LOCKED]:
                extra += f' locked by {g[LOCKED]}'
            if g[PENDING]:
                extra += f' ({g[PENDING]} pending)'
            tok = 'token ?' if g[TOKEN] is None else f'token {tn(g[TOKEN])}'
            kind = 'lease' if g[KIND][0] == 'l' else f'semaphore({g[CAP]})'
            out.append(f'{tok} held by {g[HOLDER]}/{g[ROLE]} {kind} '
                       f'ttl {g[TTL] / 1e6:g} ms {exp}{extra}')
        return out or ['(no grant)']


def fmt_ms(t, t0):
    if t in (INF, -INF):
        return '∞' if t > 0 else '-∞'
    return f'{(t - t0) / 1e6:.1f}'


class Ctx:
    """what a step needs besides the state"""
    __slots__ = ('eps', 'single_row', 'min_resp', 'watermark')

    def __init__(self, eps, single_row):
        self.eps = eps
        self.single_row = single_row
        self.min_resp = INF
        self.watermark = -INF


# ---- building a step ----

def open_point(st, op, ctx, write):
    """a copy of the zone with the op's L and b added; None if impossible"""
    d = st.dbm.copy()
    L = d.add()
    b = d.add()
    lo = op.inv - ctx.eps
    hi = op.resp + ctx.eps
    ok = (d.le(V_T, L, 0) and d.le(0, L, -lo) and
          d.le(L, 0, min(hi, ctx.min_resp + ctx.eps)) and
          d.le(0, b, -lo) and d.le(b, 0, hi))
    if ok:
        ok = d.le(b, L, 0) if write else d.le(L, b, 0)
    return (d, L, b) if ok else None


def close_point(st, d, L, grants, rn, maxtok, ctx):
    """the next state: T = L, R of the name = rn, and grants given as
    (grant, (base var, R var, pbase var)) with indices into d"""
    # drop grants that no future op can see occupying: free (expiry plus
    # lock delay) before the earliest clock reading any future op may have
    w = ctx.watermark
    kept = []
    for g, vs in grants:
        if (g[LOCKED] is None and
                d.m[vs[0]][0] <= w - g[TTL] - g[DELAY]):
            continue
        kept.append((g, vs))
    kept.sort(key=lambda x: grant_sort_key(x[0]))
    idx = [0, L, rn]
    for g, vs in kept:
        idx.extend(vs)
    return State(tuple(g for g, _ in kept), maxtok, d.project(idx))


def cur_grants(st):
    return [(g, (v_base(i), v_r(i), v_pbase(i)))
            for i, g in enumerate(st.grants)]


def occupy_options(d, g, vs, b):
    """possible statuses of g at b: True (occupying), False (free)"""
    if g[LOCKED] is not None:
        return (True,)
    span = g[TTL] + g[DELAY]
    base = vs[0]
    can_occ = d.can_le(b, base, span - 1)
    can_free = d.can_le(base, b, -span)
    return tuple(x for x, ok in ((True, can_occ), (False, can_free)) if ok)


def set_occupy(d, g, vs, b, occ):
    if g[LOCKED] is not None:
        return occ
    span = g[TTL] + g[DELAY]
    if occ:
        return d.le(b, vs[0], span - 1)
    return d.le(vs[0], b, -span)


def live_constraint(d, vs, ttl, b, live):
    if live:
        return d.le(b, vs[0], ttl - 1)
    return d.le(vs[0], b, -ttl)


def assignments(d, others, b):
    """every combination of occupancy statuses of the grants of others"""
    opts = [occupy_options(d, g, vs, b) for g, vs in others]
    res = [()]
    for o in opts:
        res = [r + (x,) for r in res for x in o]
    return res


# ---- the operations ----

def step(st, op, ctx):
    """every state the op can lead to when linearized next"""
    f = STEPS[op.kind]
    return f(st, op, ctx)


def outcomes(op):
    """the results the op may have had: its own, or all for unknown"""
    if op.outcome != 'unknown':
        return [(op.outcome, op.value, op.code)]
    return [('ok', UNKNOWN_TOKEN, None) if op.kind == 'acquire'
            else ('ok', True, None), ('none', None, None)]


UNKNOWN_TOKEN = object()


def step_acquire(st, op, ctx):
    res = []
    for outcome, value, code in outcomes(op):
        if outcome == 'none':
            # unknown: it may have done nothing
            p = open_point(st, op, ctx, write=False)
            if p:
                d, L, b = p
                res.append(close_point(st, d, L, cur_grants(st), V_RN,
                                       st.maxtok, ctx))
            continue
        if outcome == 'fail' and code == 'LF021':
            res.extend(acquire_kind_refused(st, op, ctx))
            continue
        if outcome == 'fail' and op.no_effect_error:
            # an error that changes nothing
            p = open_point(st, op, ctx, write=False)
            if p:
                d, L, b = p
                res.append(close_point(st, d, L, cur_grants(st), V_RN,
                                       st.maxtok, ctx))
            continue
        if value is None:
            res.extend(acquire_refused(st, op, ctx))
        else:
            res.extend(acquire_granted(st, op, ctx, value))
    return res


def acquire_kind_refused(st, op, ctx):
    """LF021: a grant of another kind occupies the name at b (its holder
    may be the caller)"""
    p = open_point(st, op, ctx, write=False)
    if not p:
        return []
    d0, L, b = p
    grants = cur_grants(st)
    res = []
    for g, vs in grants:
        if g[KIND] == op.shape or True not in occupy_options(d0, g, vs, b):
            continue
        d = d0.copy()
        if set_occupy(d, g, vs, b, True):
            res.append(close_point(st, d, L, grants, V_RN, st.maxtok, ctx))
    return res


def acquire_granted(st, op, ctx, token):
    known = token is not UNKNOWN_TOKEN
    if known:
        if token <= st.maxtok:
            return []
        if any(g[TOKEN] == token for g in st.grants):
            return []
    p = open_point(st, op, ctx, write=True)
    if not p:
        return []
    d0, L, b = p
    who = (op.holder, op.role)
    own = []
    others = []
    for g, vs in cur_grants(st):
        (own if (g[HOLDER], g[ROLE]) == who else others).append((g, vs))
    for g, vs in own:
        # its row is locked by another transaction: the take would wait
        if g[LOCKED] is not None:
            return []
        if not d0.le(vs[1], b, 0):
            return []
        # the holder's own grant of another kind must be free (else LF021)
        if g[KIND] != op.shape and not set_occupy(d0, g, vs, b, False):
            return []
    if ctx.single_row and not d0.le(V_RN, b, 0):
        return []
    res = []
    for asg in assignments(d0, others, b):
        occ = [x for x, o in zip(others, asg) if o]
        n = len(occ) + 1
        if n > op.cap or any(n > g[CAP] for g, _ in occ):
            continue
        # a grant of another kind occupies: LF021, not a grant
        if any(g[KIND] != op.shape for g, _ in occ):
            continue
        d = d0.copy()
        ok = True
        for (g, vs), o in zip(others, asg):
            if not set_occupy(d, g, vs, b, o):
                ok = False
                break
        if not ok:
            continue
        pb = d.add()
        new = (None if not known else token, op.holder, op.role, op.cap,
               op.ttl, op.delay, None, None, 0, op.shape)
        # a single row: the grant replaces whatever was there; several:
        # free grants of others may keep their rows
        grants = [] if ctx.single_row else [x for x, o in zip(others, asg)
                                            if not o]
        grants += [x for x, o in zip(others, asg) if o]
        grants.append((new, (b, L, pb)))
        rn = L if ctx.single_row else V_RN
        res.append(close_point(st, d, L, grants, rn,
                               token if known else st.maxtok, ctx))
    return res


def acquire_refused(st, op, ctx):
    p = open_point(st, op, ctx, write=False)
    if not p:
        return []
    d0, L, b = p
    same = cur_grants(st)
    ok_states = []

    def done(d):
        ok_states.append(close_point(st, d, L, same, V_RN, st.maxtok, ctx))

    if op.null_excused:
        done(d0)
        return ok_states
    who = (op.holder, op.role)
    own = [(g, vs) for g, vs in same if (g[HOLDER], g[ROLE]) == who]
    others = [(g, vs) for g, vs in same if (g[HOLDER], g[ROLE]) != who]
    # a row locked by another transaction: the take waits for the lock,
    # and a bounded wait may give up
    if any(g[LOCKED] is not None for g, _ in own):
        done(d0)
        return ok_states
    if ctx.single_row and any(g[LOCKED] is not None for g, _ in others):
        done(d0)
        return ok_states
    d1 = d0
    if own:
        # the holder's own row is taken again, unless another holder
        # took it over (several rows only)
        if ctx.single_row:
            return []
        d1 = d0.copy()
        if not all(set_occupy(d1, g, vs, b, False) for g, vs in own):
            return []
    # not grantable: enough grants of others occupy at b
    for asg in assignments(d1, others, b):
        occ = [x for x, o in zip(others, asg) if o]
        n = len(occ) + 1
        if not (n > op.cap or any(n > g[CAP] for g, _ in occ)):
            continue
        d = d1.copy()
        if all(set_occupy(d, g, vs, b, True) for g, vs in occ):
            done(d)
            # one witness is enough for this refusal; the zones differ,
            # so keep the others too (they constrain the future less or
            # differently)
    return ok_states


def find(st, token):
    for gi, g in enumerate(st.grants):
        if g[TOKEN] is not None and g[TOKEN] == token:
            return gi, g
    return None, None


def step_token_op(st, op, ctx):
    """renew, release, check (in a transaction or not)"""
    res = []
    gi, g = find(st, op.token)
    for outcome, value, code in outcomes(op):
        if outcome == 'none' or (outcome == 'fail' and op.no_effect_error):
            p = open_point(st, op, ctx, write=False)
            if p:
                d, L, b = p
                res.append(close_point(st, d, L, cur_grants(st), V_RN,
                                       st.maxtok, ctx))
            continue
        if outcome == 'fail':
            if code == '42501' and g is not None and not op.admin and \
                    g[ROLE] != op.role:
                # another role's live lease
                p = open_point(st, op, ctx, write=False)
                if p:
                    d, L, b = p
                    if live_constraint(d, (v_base(gi),), g[TTL], b, True):
                        res.append(close_point(st, d, L, cur_grants(st),
                                               V_RN, st.maxtok, ctx))
            continue
        if value:
            res.extend(token_op_true(st, op, ctx, gi, g))
        else:
            p = open_point(st, op, ctx, write=False)
            if not p:
                continue
            d, L, b = p
            if g is not None:
                if not live_constraint(d, (v_base(gi),), g[TTL], b, False):
                    continue
            res.append(close_point(st, d, L, cur_grants(st), V_RN,
                                   st.maxtok, ctx))
    return res


def token_op_true(st, op, ctx, gi, g):
    if g is None:
        return []
    if g[ROLE] != op.role and not op.admin:
        return []
    if g[LOCKED] is not None and g[LOCKED] != op.txn:
        return []           # it would wait for that transaction
    p = open_point(st, op, ctx, write=True)
    if not p:
        return []
    d, L, b = p
    vb, vr, vp = v_base(gi), v_r(gi), v_pbase(gi)
    if not live_constraint(d, (vb,), g[TTL], b, True):
        return []
    if not d.le(vr, b, 0):
        return []
    if ctx.single_row and not d.le(V_RN, b, 0):
        return []
    grants = cur_grants(st)
    rn = L if ctx.single_row else V_RN
    k = op.kind
    if op.txn is not None:
        # locked until the transaction ends; effects at its commit
        if k == 'release':
            ng = g[:LOCKED] + (op.txn, 'release', 0) + g[PTTL + 1:]
            grants[gi] = (ng, (vb, vr, vp))
        elif k == 'renew':
            ng = g[:LOCKED] + (op.txn, 'renew', op.ttl) + g[PTTL + 1:]
            grants[gi] = (ng, (vb, vr, b))
        else:
            ng = g[:LOCKED] + (op.txn, g[PENDING], g[PTTL]) + g[PTTL + 1:]
            grants[gi] = (ng, (vb, vr, vp))
        return [close_point(st, d, L, grants, V_RN, st.maxtok, ctx)]
    if k == 'release':
        del grants[gi]
    elif k == 'renew':
        ng = g[:TTL] + (op.ttl,) + g[TTL + 1:]
        grants[gi] = (ng, (b, L, vp))
    else:
        grants[gi] = (g, (vb, L, vp))
    return [close_point(st, d, L, grants, rn, st.maxtok, ctx)]


def step_commit(st, op, ctx):
    res = []
    if not op.ends:
        return step_nothing(st, op, ctx)
    locked = [i for i, g in enumerate(st.grants) if g[LOCKED] == op.txn]
    for outcome, value, code in outcomes(op):
        # unknown: it may have committed, or rolled back
        committed = outcome == 'ok' and (op.commits or
                                         op.outcome == 'unknown')
        p = open_point(st, op, ctx, write=True)
        if not p:
            continue
        d, L, b = p
        grants = cur_grants(st)
        rn = V_RN
        for gi in reversed(locked):
            g, (vb, vr, vp) = grants[gi]
            if committed and g[PENDING] == 'release':
                del grants[gi]
            elif committed and g[PENDING] == 'renew':
                ng = (g[:TTL] + (g[PTTL],) + g[TTL + 1:LOCKED] +
                      (None, None, 0) + g[PTTL + 1:])
                grants[gi] = (ng, (vp, L, vp))
            else:
                ng = g[:LOCKED] + (None, None, 0) + g[PTTL + 1:]
                grants[gi] = (ng, (vb, L, vp))
            if ctx.single_row:
                rn = L
        res.append(close_point(st, d, L, grants, rn, st.maxtok, ctx))
    return res


def step_force(st, op, ctx):
    res = []
    for outcome, value, code in outcomes(op):
        if outcome == 'none' or outcome == 'fail':
            if outcome == 'fail' and not (op.no_effect_error or
                                          (code == '42501' and not op.admin)):
                continue
            p = open_point(st, op, ctx, write=False)
            if p:
                d, L, b = p
                res.append(close_point(st, d, L, cur_grants(st), V_RN,
                                       st.maxtok, ctx))
            continue
        if not op.admin:
            continue
        p = open_point(st, op, ctx, write=bool(value))
        if not p:
            continue
        d0, L, b = p
        grants = cur_grants(st)
        for asg in assignments_by_time(d0, grants, b):
            if bool(value) != any(asg):
                continue
            # an occupying row locked by another transaction: it waits
            if any(o and g[LOCKED] is not None for (g, _), o in zip(grants, asg)):
                continue
            d = d0.copy()
            if not all(set_occupy_time(d, g, vs, b, o)
                       for (g, vs), o in zip(grants, asg)):
                continue
            if value and ctx.single_row and not d.le(V_RN, b, 0):
                continue
            kept = [x for x, o in zip(grants, asg) if not o]
            rn = L if (value and ctx.single_row) else V_RN
            res.append(close_point(st, d, L, kept, rn, st.maxtok, ctx))
    return res


def assignments_by_time(d, grants, b):
    """occupancy by the clock alone (a force release judges time)"""
    opts = []
    for g, vs in grants:
        span = g[TTL] + g[DELAY]
        o = tuple(x for x, ok in (
            (True, d.can_le(b, vs[0], span - 1)),
            (False, d.can_le(vs[0], b, -span))) if ok)
        opts.append(o)
    res = [()]
    for o in opts:
        res = [r + (x,) for r in res for x in o]
    return res


def set_occupy_time(d, g, vs, b, occ):
    span = g[TTL] + g[DELAY]
    if occ:
        return d.le(b, vs[0], span - 1)
    return d.le(vs[0], b, -span)


def step_nothing(st, op, ctx):
    """an operation that changes nothing the model knows (lease_purge
    deletes only rows nobody holds)"""
    p = open_point(st, op, ctx, write=False)
    if not p:
        return []
    d, L, b = p
    return [close_point(st, d, L, cur_grants(st), V_RN, st.maxtok, ctx)]


STEPS = {
    'purge': step_nothing,
    'acquire': step_acquire,
    'renew': step_token_op,
    'release': step_token_op,
    'check': step_token_op,
    'commit': step_commit,
    'force': step_force,
}
