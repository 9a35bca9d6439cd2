#!/usr/bin/env python3
"""bench/peers/report.py OUT_DIR PREFIX: the markdown report (PREFIX.md)
and the plot (PREFIX.png, with gnuplot) of a bench/peers/run.sh run."""

import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

out, prefix = sys.argv[1], sys.argv[2]
NAMES = {'fencing': 'fencing', 'plain': 'plain SQL', 'etcd': 'etcd',
         'zookeeper': 'ZooKeeper', 'redis': 'Redis SET NX + INCR'}
PHASE = {'durable': 'durable (fsync on)', 'nofsync': 'no fsync'}
FENCE = {'fencing': 'yes', 'plain': '**no** (goes backwards)', 'etcd': 'yes (revision)',
         'zookeeper': 'yes (sequence number)', 'redis': '**no** (INCR after SET)'}


def tsv(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [line.rstrip('\n').split('\t') for line in f if line.strip()]


machine = {r[0]: r[1] for r in tsv('machine.tsv') if len(r) >= 2}
runs = []
for r in tsv('runs.tsv'):
    phase, rnd, system, clients, names, cpu, js = r[:7]
    d = json.loads(js)
    d.update(phase=phase, round=int(rnd), system=system, clients=int(clients),
             names=int(names), server_cpu_s=float(cpu),
             syncs=int(r[7]) if len(r) > 7 and r[7].strip() else None)
    runs.append(d)

phases = [p for p in ['durable', 'nofsync'] if any(r['phase'] == p for r in runs)]
systems = [s for s in ['fencing', 'plain', 'etcd', 'zookeeper', 'redis'] if any(r['system'] == s for r in runs)]
cells = []
for r in runs:
    c = (r['clients'], r['names'])
    if c not in cells:
        cells.append(c)
rounds = sorted({r['round'] for r in runs})
ok = [r for r in runs if not r.get('failed')]
by = {(r['phase'], r['round'], r['system'], r['clients'], r['names']): r for r in ok}
dur = float(machine.get('dur', '0') or 0)
warm = float(machine.get('warmup', '0') or 0)


def cell_label(c):
    return f"{c[0]} clients, {c[1]:,} name{'s' if c[1] != 1 else ''}"


def med(xs):
    return statistics.median(xs) if xs else None


def vals(phase, system, cell, key):
    return [by[(phase, rr, system) + cell][key] for rr in rounds if (phase, rr, system) + cell in by]


def fmt(x, nd=0):
    if x is None:
        return 'n/a'
    return f"{x:,.{nd}f}"


def ratios(phase, a, b, cell, key='cycles_per_s'):
    rs = []
    for rr in rounds:
        ka, kb = (phase, rr, a) + cell, (phase, rr, b) + cell
        if ka in by and kb in by and by[kb][key]:
            rs.append(by[ka][key] / by[kb][key])
    return rs


def rfmt(rs):
    if not rs:
        return 'n/a'
    m = med(rs)
    if len(rs) == 1:
        return f"{m:.2f}x"
    return f"{m:.2f}x ({min(rs):.2f}-{max(rs):.2f})"


L = []
w = L.append
date = os.path.basename(prefix).replace('peers-', '')
w('# bench/peers: fencing side by side with etcd, ZooKeeper, Redis and plain SQL')
w('')
w(f"Run {date} UTC, {machine.get('mode', '?')} mode: {len(rounds)} round(s); in every round each "
  f"system runs each cell once for {machine.get('dur')} s (after {machine.get('warmup')} s of "
  f"warm-up), back to back, the order of the systems rotating from round to round"
  + (f"; each durability phase starts with an unmeasured {machine['prewarm']} s run of every system "
     "(8 clients, 1,000 names) that warms the JVM, caches and connections. " if 'prewarm' in machine else ". ") +
  f"Tree `{machine.get('git', '?')}`; {machine.get('total_s', '?')} s in all. "
  f"Produced by `sudo bench/peers/run.sh` ([bench/peers/README.md](../peers/README.md)).")
w('')
w('A cycle: pick one of the names at random, acquire it with a TTL of '
  f"{machine.get('ttl_s', '30')} s and get a token, release it if granted. Throughput counts "
  'attempts per second (a refusal, because another client holds the name, is a normal outcome '
  'and counts); p99 is the 99th percentile of the cycle time as the client sees it. '
  'Every client has its own connection (session, client object).')
w('')
w('Ratios are the **median of the per-round ratios** (min-max over rounds): the two runs of a '
  'ratio ran one after the other in the same round, on a machine whose load drifts (see '
  '[Load](#load)). ')
w('')

failed = [r for r in runs if r.get('failed')]
errs = [r for r in ok if r['errors'] or r['release_failed']]
if failed or errs:
    w('## Problems')
    w('')
    for r in failed:
        w(f"- {r['phase']} round {r['round']} {r['system']} {cell_label((r['clients'], r['names']))}: "
          f"FAILED: `{r.get('stderr', '').strip()[:300]}`")
    for r in errs:
        w(f"- {r['phase']} round {r['round']} {r['system']} {cell_label((r['clients'], r['names']))}: "
          f"{r['errors']} errors, {r['release_failed']} failed releases; first: {r.get('first_errors')}")
    w('')

# ---- the summary --------------------------------------------------------
goal = []
for phase in phases:
    w(f"## {PHASE[phase]}: cycles/s (median over rounds)")
    w('')
    w('| cell | ' + ' | '.join(NAMES[s] for s in systems) + ' |')
    w('|---|' + '---|' * len(systems))
    for c in cells:
        w(f"| {cell_label(c)} | " + ' | '.join(fmt(med(vals(phase, s, c, 'cycles_per_s'))) for s in systems) + ' |')
    w('')
    w('grants/s (median over rounds; on one name, grants are bounded by the holder\'s '
      'acquire-and-release, durable writes, one holder at a time):')
    w('')
    w('| cell | ' + ' | '.join(NAMES[s] for s in systems) + ' |')
    w('|---|' + '---|' * len(systems))
    for c in cells:
        w(f"| {cell_label(c)} | " + ' | '.join(fmt(med(vals(phase, s, c, 'grants_per_s'))) for s in systems) + ' |')
    w('')
    if phase == 'durable':
        def syncs_per(s, c):
            xs = []
            for rr in rounds:
                k = (phase, rr, s) + c
                if k in by and by[k]['syncs'] is not None and by[k]['attempts']:
                    xs.append(1e3 * by[k]['syncs'] / (by[k]['attempts'] * ((dur + warm) / dur if dur else 1)))
            return med(xs)
        w('fsyncs of the server\'s log per 1,000 cycles (median over rounds; fewer means more '
          'commits share one fsync; Redis keeps no count):')
        w('')
        w('| cell | ' + ' | '.join(NAMES[s] for s in systems) + ' |')
        w('|---|' + '---|' * len(systems))
        for c in cells:
            w(f"| {cell_label(c)} | " + ' | '.join(fmt(syncs_per(s, c)) for s in systems) + ' |')
        w('')
    w('p99 of the cycle time, ms (median over rounds):')
    w('')
    w('| cell | ' + ' | '.join(NAMES[s] for s in systems) + ' |')
    w('|---|' + '---|' * len(systems))
    for c in cells:
        w(f"| {cell_label(c)} | " + ' | '.join(fmt(med(vals(phase, s, c, 'p99_ms')), 1) for s in systems) + ' |')
    w('')
    if 'fencing' in systems:
        others = [s for s in systems if s != 'fencing']
        w('fencing / other, cycles/s, median of per-round ratios (min-max):')
        w('')
        w('| cell | ' + ' | '.join('fencing / ' + NAMES[s] for s in others) + ' |')
        w('|---|' + '---|' * len(others))
        for c in cells:
            w(f"| {cell_label(c)} | " + ' | '.join(rfmt(ratios(phase, 'fencing', s, c)) for s in others) + ' |')
            for s in ('etcd', 'zookeeper'):
                rs = ratios(phase, 'fencing', s, c)
                if rs:
                    goal.append((phase, c, s, rs))
        w('')

# ---- the goal -------------------------------------------------------------
if goal:
    w('## The goal: ahead of every system that issues a real fencing token')
    w('')
    w('fencing against etcd and ZooKeeper, in every cell, at equal durability (a goal to measure '
      'against, not a test). "ahead" when the median per-round ratio is above 1; the rounds say '
      'whether every round agrees.')
    w('')
    w('| durability | cell | vs | ratio | rounds ahead | verdict |')
    w('|---|---|---|---|---|---|')
    for phase, c, s, rs in goal:
        ahead = sum(1 for x in rs if x > 1)
        m = med(rs)
        verdict = 'ahead' if m > 1 and ahead == len(rs) else ('ahead, within the noise' if m > 1 else '**behind**')
        w(f"| {PHASE[phase]} | {cell_label(c)} | {NAMES[s]} | {rfmt(rs)} | {ahead}/{len(rs)} | {verdict} |")
    w('')

# ---- token order ------------------------------------------------------------
w('## Token order: grants whose token is not larger than the previous grant\'s on the same name')
w('')
w('Counted by the client for every grant of every run (the driver compares each grant\'s '
  'token with the previous grant\'s on that name). Summed over the rounds: backwards / grants.')
w('')
w('| durability | cell | ' + ' | '.join(NAMES[s] for s in systems) + ' |')
w('|---|---|' + '---|' * len(systems))
for phase in phases:
    for c in cells:
        row = []
        for s in systems:
            g = sum(vals(phase, s, c, 'grants'))
            b = sum(vals(phase, s, c, 'backwards'))
            row.append(f"{b:,} / {g:,}" + (f" (**{100.0 * b / g:.2f} %**)" if b and g else ''))
        w(f"| {PHASE[phase]} | {cell_label(c)} | " + ' | '.join(row) + ' |')
w('')

# ---- the story ---------------------------------------------------------------
story = os.path.join(out, 'story.txt')
if os.path.exists(story):
    w("## The seed's story: a holder pauses, its lease expires, another takes it")
    w('')
    w('`bench/peers/story.js`, run once against the durable servers of this run:')
    w('')
    w('```text')
    with open(story) as f:
        w(f.read().rstrip('\n'))
    w('```')
    w('')

# ---- load -----------------------------------------------------------------------
w('## Load')
w('')
w(f"The machine has {machine.get('nproc', '?')} cores and was shared with other work while this ran "
  '(builds and test suites of other checkouts). /proc/loadavg before and after each round:')
w('')
w('| durability | round | before (1, 5, 15 min) | after |')
w('|---|---|---|---|')
load = defaultdict(dict)
for r in tsv('load.tsv'):
    load[(r[0], r[1])][r[2]] = ' '.join(r[4].split()[:3])
for (phase, rr), d in load.items():
    w(f"| {PHASE.get(phase, phase)} | {rr} | {d.get('before', '')} | {d.get('after', '')} |")
w('')
w('What that means: the absolute numbers are this shared, loaded 2-core VM\'s and move from '
  'round to round (the durable ones also with the disk\'s fsync latency, which other '
  'people\'s work changes). The client (one Node.js process) runs on the same cores as the '
  'server. A ratio compares two runs made one after the other in the same round, so a drift '
  'of the load hits both alike; the spread of the per-round ratios shows how much it did not.')
w('')

# ---- settings ------------------------------------------------------------------------
w('## Servers and clients')
w('')
w('| | |')
w('|---|---|')
for k in ('cpu', 'nproc', 'mem', 'kernel', 'postgres', 'etcd', 'zookeeper', 'redis', 'java', 'node', 'npm_clients'):
    if k in machine:
        w(f"| {k} | {machine[k]} |")
w('')
w('Settings (everything else is the server\'s default):')
w('')
w('| durability | server | settings |')
w('|---|---|---|')
pgset = defaultdict(list)
for r in tsv('settings.tsv'):
    if len(r) == 3 and r[1] in ('etcd', 'zookeeper', 'redis'):
        w(f"| {PHASE.get(r[0], r[0])} | {r[1]} | {r[2]} |")
    elif len(r) == 3:
        pgset[r[0]].append(f"{r[1]}={r[2]}")
for phase, s in pgset.items():
    w(f"| {PHASE.get(phase, phase)} | postgres | {', '.join(s)} |")
w('')

# ---- every run --------------------------------------------------------------------------
w('## Every run')
w('')
w('Server CPU: user + system seconds of the server process (for PostgreSQL, its backends) '
  'over the whole run including connecting and the warm-up, per 1,000 measured cycles '
  f"scaled by {dur:g} / {dur + warm:g} s; client CPU: the driver\'s, measured window only.")
w('')
w('fsyncs / 1k cycles: the server\'s own count of log syncs (PostgreSQL `pg_stat_wal.wal_sync`, '
  'etcd `etcd_disk_wal_fsync_duration_seconds_count`, ZooKeeper `zk_cnt_fsynctime`; Redis has '
  'none), scaled like the server CPU.')
w('')
w('| durability | round | cell | system | cycles/s | grants/s | p50 ms | p99 ms | backwards | errors | server CPU ms / 1k cycles | fsyncs / 1k cycles | client CPU % |')
w('|---|---|---|---|---|---|---|---|---|---|---|---|---|')
for r in sorted(ok, key=lambda r: (phases.index(r['phase']), r['round'], cells.index((r['clients'], r['names'])), systems.index(r['system']))):
    cyc = r['attempts'] * (dur + warm) / dur if dur else r['attempts']
    cpu_per = 1e6 * r['server_cpu_s'] / cyc if cyc else None
    sync_per = 1e3 * r['syncs'] / cyc if cyc and r['syncs'] is not None else None
    w(f"| {r['phase']} | {r['round']} | {cell_label((r['clients'], r['names']))} | {r['system']} | "
      f"{fmt(r['cycles_per_s'])} | {fmt(r['grants_per_s'])} | {fmt(r['p50_ms'], 2)} | {fmt(r['p99_ms'], 2)} | "
      f"{r['backwards']} | {r['errors']} | {fmt(cpu_per, 1)} | {fmt(sync_per, 0)} | {fmt(100 * r.get('client_cpu_s', 0) / r['seconds'])} |")
w('')

# ---- plot -----------------------------------------------------------------------------------
png = prefix + '.png'
dat = prefix + '.dat'
have_gnuplot = subprocess.call(['sh', '-c', 'command -v gnuplot >/dev/null']) == 0
if have_gnuplot and phases and systems:
    with open(dat, 'w') as f:
        for phase in phases:
            f.write(f"# {phase}\n")
            for c in cells:
                f.write(f"\"{c[0]}c/{c[1]}n\" " + ' '.join(
                    str(med(vals(phase, s, c, 'cycles_per_s')) or 0) for s in systems) + '\n')
            f.write('\n\n')
    cols = ' , '.join(
        f"'{dat}' index {{i}} using {j + 2}:xtic(1) title '{NAMES[s]}'" for j, s in enumerate(systems))
    plots = '\n'.join(
        f"set title '{PHASE[p]}: cycles/s, median over rounds (log scale)'\nplot " + cols.replace('{i}', str(i))
        for i, p in enumerate(phases))
    gp = f"""set terminal pngcairo size 1100,{420 * len(phases)} font ',10'
set output '{png}'
set multiplot layout {len(phases)},1
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set yrange [10:*]
set grid ytics
set key outside right top
{plots}
unset multiplot
"""
    try:
        subprocess.run(['gnuplot'], input=gp, text=True, check=True)
    except Exception as e:  # the report stands without the plot
        print(f"report.py: gnuplot failed: {e}", file=sys.stderr)
    finally:
        os.remove(dat)
if os.path.exists(png):
    L.insert(2, f"![cycles/s per system and cell]({os.path.basename(png)})\n")

with open(prefix + '.md', 'w') as f:
    f.write('\n'.join(L) + '\n')

# ---- stdout: the headline -------------------------------------------------------------------
for phase in phases:
    print(f"{PHASE[phase]}:")
    for c in cells:
        print(f"  {cell_label(c):24} " + '  '.join(
            f"{s} {fmt(med(vals(phase, s, c, 'cycles_per_s')))}" for s in systems))
for phase, c, s, rs in goal:
    print(f"goal {PHASE[phase]}, {cell_label(c)}: fencing / {s} {rfmt(rs)}")
