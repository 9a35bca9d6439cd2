#!/usr/bin/python3
"""run.py: a linearizability run of the lease API (see README.md).

Starts a throwaway cluster (or uses --connstr), makes a fresh database
with the extension and the roles, runs client processes (client.py) that
do random lease operations for --duration seconds, freezes random clients
with SIGSTOP and thaws them with SIGCONT, then runs check.py on the
recorded history.  Exit status is the checker's: 0 linearizable, 1
violations, 2 the run itself failed.

    sudo test/torture/lin/run.py --mode short                # CI size
    sudo test/torture/lin/run.py --mode long --duration 1200 # 20 minutes
    sudo test/torture/lin/run.py --families basic,txcheck    # what to exercise

Families (what the clients do besides acquire, renew, release and lock
on lease names, with short TTLs, waits and expiry):

    basic        always on
    sem          semaphores (2 and 3 slots) on names of their own
    mixed        lease_acquire and semaphore_acquire on the same name
    txcheck      BEGIN; lease_lock; hold past the TTL; [renew]; COMMIT
    2pc          lease_release in a prepared transaction, COMMIT PREPARED later
    force        an admin client calls lease_force_release
    purge        the admin client calls lease_purge('0') now and then
    freeze       SIGSTOP/SIGCONT of random clients, mid-call or between
    cancel       pg_cancel_backend() of random clients' statements (waits
                 in the queue included)
    lockdelay    some clients acquire with fencing.lock_delay > 0
    peek         clients read lease_status and use other holders' tokens
    sharedholder clients of one role share a holder name now and then
"""
import argparse
import json
import os
import pwd
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

FAMILIES = ['basic', 'sem', 'mixed', 'txcheck', '2pc', 'force', 'purge',
            'freeze', 'cancel', 'lockdelay', 'peek', 'sharedholder']

MODES = {
    'short': dict(duration=30, clients=6, ttl_min=80, ttl_max=400,
                  freeze_every=1.0),
    'long': dict(duration=600, clients=8, ttl_min=50, ttl_max=600,
                 freeze_every=0.7),
}


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def log(msg):
    print('[lin] ' + msg, flush=True)


class Events:
    def __init__(self, path):
        self.f = open(path, 'a')

    def __call__(self, ev, **kw):
        rec = {'t': mono_ns(), 'ev': ev}
        rec.update(kw)
        self.f.write(json.dumps(rec) + '\n')
        self.f.flush()
        return rec['t']


def pg_bindir(arg):
    if arg:
        return arg
    if os.environ.get('PG_BINDIR'):
        return os.environ['PG_BINDIR']
    pgc = shutil.which('pg_config')
    if pgc:
        return subprocess.check_output([pgc, '--bindir'], text=True).strip()
    return '/usr/lib/postgresql/15/bin'


class Cluster:
    """a throwaway cluster, run as postgres when we are root"""

    def __init__(self, bindir):
        self.bindir = bindir
        self.tmp = tempfile.mkdtemp(prefix='fencing-lin-')
        self.sudo = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam('postgres')
            os.chown(self.tmp, pw.pw_uid, pw.pw_gid)
            self.sudo = ['runuser', '-u', 'postgres', '--']
        os.chmod(self.tmp, 0o755)
        self.data = os.path.join(self.tmp, 'data')
        self.started = False

    def sh(self, *cmd, **kw):
        return subprocess.run(self.sudo + list(cmd), check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, **kw)

    def start(self):
        self.sh(os.path.join(self.bindir, 'initdb'), '-D', self.data, '-A',
                'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync')
        conf = f"""
listen_addresses = ''
unix_socket_directories = '{self.tmp}'
port = 5432
max_connections = 60
max_prepared_transactions = 30
fsync = off
log_min_messages = warning
log_line_prefix = '%m [%p] '
"""
        subprocess.run(self.sudo + ['tee', '-a', os.path.join(
            self.data, 'postgresql.conf')], input=conf, text=True, check=True,
            stdout=subprocess.DEVNULL)
        self.sh(os.path.join(self.bindir, 'pg_ctl'), '-D', self.data, '-l',
                os.path.join(self.tmp, 'server.log'), '-w', 'start')
        self.started = True
        return f'host={self.tmp} port=5432 dbname=postgres user=postgres'

    def stop(self, keep=False):
        if self.started:
            subprocess.run(self.sudo + [os.path.join(self.bindir, 'pg_ctl'),
                                        '-D', self.data, '-m', 'immediate',
                                        'stop'],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not keep:
            shutil.rmtree(self.tmp, ignore_errors=True)


def psql_connect(dsn, **kw):
    import psycopg2
    c = psycopg2.connect(dsn, **kw)
    c.autocommit = True
    return c


def setup(admin_dsn, dbname):
    """a fresh database with the extension; two application roles"""
    c = psql_connect(admin_dsn)
    cur = c.cursor()
    cur.execute('SELECT gid FROM pg_prepared_xacts WHERE database = %s',
                (dbname,))
    for (gid,) in cur.fetchall():
        cur.execute(f"ROLLBACK PREPARED '{gid}'")
    cur.execute(f'DROP DATABASE IF EXISTS {dbname}')
    cur.execute(f'CREATE DATABASE {dbname}')
    for r in ('lin_a', 'lin_b'):
        cur.execute('SELECT 1 FROM pg_roles WHERE rolname = %s', (r,))
        if not cur.fetchone():
            cur.execute(f'CREATE ROLE {r} LOGIN')
    c.close()
    dsn = dsn_with(admin_dsn, dbname=dbname)
    c = psql_connect(dsn)
    cur = c.cursor()
    cur.execute('CREATE EXTENSION fencing')
    cur.execute('GRANT USAGE ON SCHEMA fencing TO lin_a, lin_b')
    cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'fencing'")
    version = cur.fetchone()[0]
    cur.execute('SHOW server_version')
    server = cur.fetchone()[0]
    c.close()
    return dsn, version, server


def dsn_with(dsn, **kw):
    from psycopg2.extensions import make_dsn
    return make_dsn(dsn, **kw)


def plan_names(fams):
    """the lease names and what is done to them"""
    names = {'L0': dict(kind='lease'), 'L1': dict(kind='lease'),
             'L2': dict(kind='lease')}
    if 'sem' in fams:
        names['S2'] = dict(kind='sem', slots=2)
        names['S3'] = dict(kind='sem', slots=3)
    if 'mixed' in fams:
        names['M2'] = dict(kind='mixed', slots=2)
    return names


def plan_clients(a, fams, names, dsn, out):
    rnd = random.Random(a.seed)
    clients = []
    n_app = a.clients - (1 if 'force' in fams or 'purge' in fams else 0)
    for i in range(n_app):
        role = 'lin_a' if i % 2 == 0 else 'lin_b'
        delay = 0
        if 'lockdelay' in fams and i % 3 == 2:
            delay = rnd.choice([50, 100, 200])
        clients.append(dict(label=f'c{i}', role=role, admin=False,
                            holder=f'h{i}', shared_holder='shared',
                            delay_ms=delay))
    if 'force' in fams or 'purge' in fams:
        clients.append(dict(label=f'c{n_app}', role='postgres', admin=True,
                            holder='adm', shared_holder='adm', delay_ms=0))
    for c in clients:
        c.update(dsn=dsn, seed=a.seed, families=sorted(fams), names=names,
                 ttl_min=a.ttl_min, ttl_max=a.ttl_max, ops=a.ops,
                 history=os.path.join(out, 'history', f'{c["label"]}.jsonl'))
    return clients


class Driver:
    def __init__(self, a, clients, events, rnd):
        self.a = a
        self.clients = clients
        self.events = events
        self.rnd = rnd
        self.procs = {}
        self.frozen = {}        # label -> thaw time
        self.stats = dict(freezes=0, freeze_ms=[])

    def spawn(self, c, deadline):
        c['deadline'] = deadline
        path = os.path.join(self.a.out, 'config', f'{c["label"]}.json')
        with open(path, 'w') as f:
            json.dump(c, f)
        p = subprocess.Popen([sys.executable, os.path.join(HERE, 'client.py'),
                              path])
        self.procs[c['label']] = p
        self.events('spawn', worker=c['label'], pid=p.pid)

    def freeze(self, now):
        live = [l for l, p in self.procs.items()
                if p.poll() is None and l not in self.frozen]
        if not live or len(self.frozen) >= len(self.procs) // 2:
            return
        label = self.rnd.choice(live)
        ms = self.rnd.uniform(0.2, 3.0) * self.a.ttl_max
        self.procs[label].send_signal(signal.SIGSTOP)
        self.events('pause', worker=label, ms=round(ms, 1))
        self.frozen[label] = now + int(ms * 1e6)
        self.stats['freezes'] += 1
        self.stats['freeze_ms'].append(round(ms))

    def thaw(self, label):
        p = self.procs[label]
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
        self.events('resume', worker=label)
        del self.frozen[label]

    def cancel(self):
        """cancel whatever a random client's backend runs right now"""
        label = self.rnd.choice(sorted(self.procs))
        cur = self.admin.cursor()
        cur.execute('SELECT pg_cancel_backend(pid) FROM pg_stat_activity '
                    'WHERE application_name = %s AND state = %s',
                    (label, 'active'))
        hit = any(r[0] for r in cur.fetchall())
        self.events('cancel', worker=label, hit=hit)
        self.stats['cancels'] += hit

    def run(self, freezing, cancelling, dsn):
        a = self.a
        start = mono_ns()
        deadline = start + int(a.duration * 1e9)
        for c in self.clients:
            self.spawn(c, deadline)
        nxt = start + int(self.rnd.expovariate(1 / a.freeze_every) * 1e9)
        nxt_cancel = start + int(self.rnd.expovariate(1 / a.freeze_every) * 1e9)
        self.stats['cancels'] = 0
        if cancelling:
            self.admin = psql_connect(dsn)
        while True:
            now = mono_ns()
            for label, until in list(self.frozen.items()):
                if now >= until:
                    self.thaw(label)
            if all(p.poll() is not None for p in self.procs.values()):
                break
            if now > deadline + 90e9:
                raise RuntimeError('clients did not stop')
            if freezing and now >= nxt:
                if now < deadline:
                    self.freeze(now)
                nxt = now + int(self.rnd.expovariate(1 / a.freeze_every) * 1e9)
            if cancelling and now >= nxt_cancel:
                if now < deadline:
                    self.cancel()
                nxt_cancel = now + int(self.rnd.expovariate(
                    1 / a.freeze_every) * 1e9)
            time.sleep(0.005)
        for label, p in self.procs.items():
            if p.returncode != 0:
                raise RuntimeError(f'client {label} exited {p.returncode}')
        self.stats['seconds'] = round((mono_ns() - start) / 1e9, 1)

    def cleanup(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--mode', choices=sorted(MODES), default='short')
    p.add_argument('--duration', type=float, help='seconds of operations')
    p.add_argument('--clients', type=int)
    p.add_argument('--ops', type=int, default=10**9,
                   help='op budget per client')
    p.add_argument('--ttl-min', type=int, help='ms')
    p.add_argument('--ttl-max', type=int, help='ms')
    p.add_argument('--freeze-every', type=float,
                   help='mean seconds between SIGSTOPs')
    p.add_argument('--families', default='all',
                   help='comma-separated (see above), or "all"')
    p.add_argument('--seed', type=int)
    p.add_argument('--out', help='output directory (default: a new temp dir)')
    p.add_argument('--connstr', help='a superuser connection to use instead '
                   'of a throwaway cluster (needs max_prepared_transactions '
                   'for the 2pc family)')
    p.add_argument('--dbname', default='fencing_lin')
    p.add_argument('--pg-bindir')
    p.add_argument('--keep', action='store_true',
                   help='keep the throwaway cluster')
    p.add_argument('--no-check', action='store_true')
    p.add_argument('--check-args', default='',
                   help='extra arguments for check.py')
    a = p.parse_args()
    for k, v in MODES[a.mode].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.seed is None:
        a.seed = random.randrange(1, 2**31)
    fams = set(FAMILIES if a.families == 'all' else a.families.split(','))
    fams.add('basic')
    bad = fams - set(FAMILIES)
    if bad:
        p.error(f'unknown families: {", ".join(sorted(bad))}')
    if a.out is None:
        a.out = tempfile.mkdtemp(prefix='fencing-lin-out-')
    # a fresh history: the clients append
    for d in ('history', 'config'):
        shutil.rmtree(os.path.join(a.out, d), ignore_errors=True)
        os.makedirs(os.path.join(a.out, d))
    for f in os.listdir(a.out):
        if f in ('events.jsonl', 'run.json', 'summary.json') or \
                f.startswith('witness-'):
            os.unlink(os.path.join(a.out, f))

    def interrupted(signum, frame):
        raise KeyboardInterrupt(f'signal {signum}')
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)

    rnd = random.Random(a.seed)
    events = Events(os.path.join(a.out, 'events.jsonl'))
    cluster = None
    driver = None
    wall0 = time.time()
    try:
        dsn = a.connstr
        if not dsn:
            cluster = Cluster(pg_bindir(a.pg_bindir))
            dsn = cluster.start()
        dsn, version, server = setup(dsn, a.dbname)
        names = plan_names(fams)
        clients = plan_clients(a, fams, names, dsn, a.out)
        log(f'mode {a.mode}: {len(clients)} clients, names '
            f'{",".join(sorted(names))}, {a.duration:g} s, TTL '
            f'{a.ttl_min}-{a.ttl_max} ms, families '
            f'{",".join(sorted(fams))}, seed {a.seed}, out {a.out}')
        # the server judges expiry by CLOCK_REALTIME, the clients record
        # CLOCK_MONOTONIC: their difference must not change during the run
        off0 = time.clock_gettime_ns(time.CLOCK_REALTIME) - mono_ns()
        driver = Driver(a, clients, events, rnd)
        t0 = events('run_start')
        driver.run('freeze' in fams, 'cancel' in fams, dsn)
        t1 = events('run_end')
        off1 = time.clock_gettime_ns(time.CLOCK_REALTIME) - mono_ns()
        run = dict(seed=a.seed, mode=a.mode, duration=a.duration,
                   families=sorted(fams), names=names,
                   clients=[{k: c[k] for k in ('label', 'role', 'admin',
                                               'holder', 'delay_ms')}
                            for c in clients],
                   ttl_min=a.ttl_min, ttl_max=a.ttl_max,
                   extversion=version, server_version=server,
                   t_start=t0, t_end=t1, clock_offset_drift_ns=off1 - off0,
                   stats=driver.stats)
        with open(os.path.join(a.out, 'run.json'), 'w') as f:
            json.dump(run, f, indent=1)
        log(f'run finished in {driver.stats["seconds"]} s, '
            f'{driver.stats["freezes"]} freezes, '
            f'{driver.stats["cancels"]} cancels')
    except (Exception, KeyboardInterrupt) as e:
        log(f'run failed: {e!r}')
        if driver:
            driver.cleanup()
        if cluster:
            cluster.stop(a.keep)
        return 2
    if cluster:
        cluster.stop(a.keep)
    if a.no_check:
        return 0
    r = subprocess.run([sys.executable, os.path.join(HERE, 'check.py'),
                        a.out] + a.check_args.split())
    log(f'checker exit {r.returncode}; wall clock '
        f'{time.time() - wall0:.1f} s; outputs in {a.out}')
    return r.returncode


if __name__ == '__main__':
    sys.exit(main())
