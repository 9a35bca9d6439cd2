#!/usr/bin/python3
"""run.py: a randomized torture run of the fencing extension.

Starts a throwaway cluster (or uses --connstr), creates the resource and
its audit log, runs N worker processes (test/torture/worker, C + libpq) over M
leases and M resource rows, and while they run injects faults:

  * SIGSTOP of a random worker for longer than the lease TTL, then SIGCONT
    (the paused holder wakes up and writes with a stale token);
  * SIGKILL of a random worker, which is restarted as a new incarnation;
  * with --crashes N: N server crashes, `pg_ctl stop -m immediate` and a
    restart, with synchronous_commit = off in the server's configuration.

It stops by itself after the op budget or the time limit, dumps the
resource, the audit log and fencing.leases, and runs check.py on the
result.  Exit status is the checker's: 0 OK, 1 safety violations, 2 the
run itself failed.

    sudo test/torture/run.py --mode short            # ~30 s, CI size
    sudo test/torture/run.py --mode long             # >= 100,000 ops
    sudo test/torture/run.py --mode short --fence none --crashes 0   # negative control

As root, the throwaway cluster runs as user postgres (initdb refuses
root); the workers and this script stay root.  To use an existing server
instead, pass --connstr (a superuser connection) and, for crashes,
--pgdata and --pglog of that server (run as the user owning it).
"""
import argparse
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

MODES = {
    # CI: 4 workers, 4 leases, 2000 ops, a few SIGSTOPs, one crash
    'short': dict(workers=4, leases=4, ops=2000, time_limit=45,
                  pause_every=1.2, kill_every=5.0, crashes=1,
                  sleep_max=20, long_sleep_pct=5),
    # >= 100,000 ops in at most 15 minutes
    'long': dict(workers=8, leases=8, ops=100000, time_limit=900,
                 pause_every=0.8, kill_every=6.0, crashes=12,
                 sleep_max=10, long_sleep_pct=3),
}


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def log(msg):
    print('[run] ' + msg, flush=True)


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


class Server:
    """Either a throwaway cluster we own, or one given by the caller."""

    def __init__(self, args, events):
        self.args = args
        self.events = events
        self.bindir = pg_bindir(args.pg_bindir)
        self.tmp = None
        self.own = False
        self.pgdata = args.pgdata
        self.pglog = args.pglog
        self.connstr = args.connstr
        self.as_postgres = []

    def pg(self, name):
        return os.path.join(self.bindir, name)

    def sh(self, cmd, **kw):
        return subprocess.run(self.as_postgres + cmd, check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, **kw)

    def create(self):
        self.own = True
        self.tmp = tempfile.mkdtemp(prefix='fencing-torture-')
        if os.geteuid() == 0:
            pw = pwd.getpwnam('postgres')
            os.chown(self.tmp, pw.pw_uid, pw.pw_gid)
            self.as_postgres = ['runuser', '-u', 'postgres', '--']
        os.chmod(self.tmp, 0o755)
        self.pgdata = os.path.join(self.tmp, 'data')
        self.pglog = os.path.join(self.tmp, 'server.log')
        port = free_port()
        self.sh([self.pg('initdb'), '-D', self.pgdata, '-A', 'trust',
                 '-U', 'postgres', '-E', 'UTF8', '--no-sync'])
        conf = f"""
port = {port}
listen_addresses = ''
unix_socket_directories = '{self.tmp}'
max_connections = 100
synchronous_commit = off
wal_writer_delay = {self.args.wal_writer_delay}ms
fsync = {self.args.fsync}
restart_after_crash = on
log_min_messages = warning
log_line_prefix = '%m [%p] '
"""
        cmd = self.as_postgres + ['tee', '-a',
                                  os.path.join(self.pgdata, 'postgresql.conf')]
        subprocess.run(cmd, input=conf, text=True, check=True,
                       stdout=subprocess.DEVNULL)
        self.start()
        self.connstr = (f'host={self.tmp} port={port} dbname=postgres '
                        'user=postgres')

    def start(self):
        self.sh([self.pg('pg_ctl'), '-D', self.pgdata, '-l', self.pglog,
                 '-w', '-t', '120', 'start'])

    def crash(self, rnd):
        """pg_ctl stop -m immediate, then start again."""
        t0 = self.events('crash_begin')
        self.sh([self.pg('pg_ctl'), '-D', self.pgdata, '-m', 'immediate',
                 '-w', 'stop'])
        self.events('crash_down')
        time.sleep(rnd.uniform(0, 0.5))
        self.start()
        t1 = self.events('restart_up')
        return (t1 - t0) / 1e9

    def stop(self):
        if self.own and self.pgdata:
            try:
                self.sh([self.pg('pg_ctl'), '-D', self.pgdata, '-m', 'fast',
                         '-w', 'stop'])
            except subprocess.CalledProcessError as e:
                log('stopping the server: ' + e.stdout)
            if not self.args.keep:
                shutil.rmtree(self.tmp, ignore_errors=True)
            else:
                log(f'kept the cluster in {self.tmp}')


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def connect(connstr, tries=100):
    import psycopg2
    for i in range(tries):
        try:
            c = psycopg2.connect(connstr)
            c.autocommit = True
            return c
        except psycopg2.OperationalError:
            if i == tries - 1:
                raise
            time.sleep(0.1)


def setup_schema(connstr, leases, fence):
    c = connect(connstr)
    cur = c.cursor()
    cur.execute('CREATE EXTENSION IF NOT EXISTS fencing')
    cur.execute("""
DROP TABLE IF EXISTS torture_resource, torture_log;
DROP FUNCTION IF EXISTS torture_audit();
CREATE TABLE torture_resource (
    id int PRIMARY KEY, fence bigint, value text, writer text);
-- append-only: the accepted order of writes is the seq order
CREATE TABLE torture_log (
    seq bigserial PRIMARY KEY, resource int NOT NULL, token bigint,
    opid text, writer text,
    logged_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION torture_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO torture_log (resource, token, opid, writer)
    VALUES (NEW.id, NEW.fence, NEW.value, NEW.writer);
    RETURN NULL;
END $$;
CREATE TRIGGER torture_audit AFTER UPDATE ON torture_resource
    FOR EACH ROW EXECUTE FUNCTION torture_audit();
""")
    if fence in ('guard', 'mixed'):
        cur.execute("""
CREATE TRIGGER torture_guard BEFORE UPDATE ON torture_resource
    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence')""")
    cur.execute('INSERT INTO torture_resource (id) '
                'SELECT g FROM generate_series(0, %s) g', (leases - 1,))
    # tokens of earlier runs in this database are below this one
    cur.execute('SELECT fencing.next_token()')
    floor = cur.fetchone()[0]
    cur.execute('SHOW synchronous_commit')
    sc = cur.fetchone()[0]
    # the counters of leases left by earlier runs in this database
    cur.execute("""
SELECT name, acquires, renewals, releases FROM fencing.leases
 WHERE name = ANY(%s)""", (['lease_%d' % i for i in range(leases)],))
    before = {r[0]: dict(acquires=r[1], renewals=r[2], releases=r[3])
              for r in cur.fetchall()}
    c.close()
    return floor, sc, before


def dump_final(connstr, leases):
    c = connect(connstr)
    cur = c.cursor()
    out = {}
    cur.execute('SELECT seq, resource, token, opid, writer '
                'FROM torture_log ORDER BY seq')
    out['log'] = [dict(seq=r[0], resource=r[1], token=r[2], opid=r[3],
                       writer=r[4]) for r in cur.fetchall()]
    cur.execute('SELECT id, fence, value, writer FROM torture_resource '
                'ORDER BY id')
    out['resource'] = [dict(id=r[0], fence=r[1], value=r[2], writer=r[3])
                       for r in cur.fetchall()]
    names = ['lease_%d' % i for i in range(leases)]
    cur.execute("""
SELECT name, holder, token, released_at IS NOT NULL,
       expires_at > clock_timestamp(), acquires, renewals, releases,
       expired_takeovers, holder_changes
  FROM fencing.leases WHERE name = ANY(%s) ORDER BY name""", (names,))
    out['leases'] = [dict(name=r[0], holder=r[1], token=r[2], released=r[3],
                          live=r[4], acquires=r[5], renewals=r[6],
                          releases=r[7], expired_takeovers=r[8],
                          holder_changes=r[9]) for r in cur.fetchall()]
    # since the server last started (shared memory); NULL where the
    # counters are off (fencing_monitor.stats_info)
    cur.execute('SELECT fence_advance_refusals + fence_guard_refusals'
                ' + claim_guard_refusals FROM fencing_monitor.stats')
    out['stale_writes_refused'] = cur.fetchone()[0]
    cur.execute('SELECT fencing.next_token()')
    out['next_token'] = cur.fetchone()[0]
    c.close()
    return out


class Worker:
    def __init__(self, wid):
        self.id = wid
        self.inc = -1
        self.proc = None
        self.paused_until = None
        self.files = []
        self.restart_at = None
        self.done = False

    @property
    def label(self):
        return f'w{self.id}.{self.inc}'


class Driver:
    def __init__(self, args, server, events, rnd):
        self.a = args
        self.server = server
        self.events = events
        self.rnd = rnd
        self.workers = [Worker(i) for i in range(args.workers)]
        self.hist_dir = os.path.join(args.out, 'history')
        os.makedirs(self.hist_dir, exist_ok=True)
        self.offsets = {}
        self.invokes = {}
        self.deadline = mono_ns() + int(args.time_limit * 1e9)
        base, extra = divmod(args.ops, args.workers)
        self.budget = {w.id: base + (1 if w.id < extra else 0)
                       for w in self.workers}
        self.stats = dict(pauses=0, pauses_over_ttl=0, kills=0, crashes=0,
                          restarts=0, crash_seconds=[])

    def sync_for(self, wid):
        if self.a.sync == 'mixed':
            return 'on' if wid % 2 == 0 else 'off'
        return self.a.sync

    def spawn(self, w):
        w.inc += 1
        path = os.path.join(self.hist_dir, f'{w.label}.jsonl')
        w.files.append(path)
        left = self.budget[w.id] - sum(self.invokes.get(p, 0)
                                       for p in w.files)
        if left <= 0 or mono_ns() >= self.deadline:
            w.done = True
            w.proc = None
            return
        cmd = [self.a.worker, '--conn', self.server.connstr,
               '--id', str(w.id), '--inc', str(w.inc), '--ops', str(left),
               '--leases', str(self.a.leases), '--hist', path,
               '--seed', str(self.a.seed), '--deadline-ns', str(self.deadline),
               '--fence', self.a.fence, '--sync', self.sync_for(w.id),
               '--ttl-min', str(self.a.ttl_min), '--ttl-max', str(self.a.ttl_max),
               '--sleep-max', str(self.a.sleep_max),
               '--long-sleep-pct', str(self.a.long_sleep_pct)]
        w.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        w.paused_until = None
        w.restart_at = None
        self.events('spawn', worker=w.label, pid=w.proc.pid, ops=left)

    def progress(self):
        """ops invoked so far, from the history files (read incrementally)"""
        for w in self.workers:
            for p in w.files:
                try:
                    with open(p, 'rb') as f:
                        f.seek(self.offsets.get(p, 0))
                        data = f.read()
                except FileNotFoundError:
                    continue
                cut = data.rfind(b'\n') + 1
                self.offsets[p] = self.offsets.get(p, 0) + cut
                self.invokes[p] = (self.invokes.get(p, 0) +
                                   data[:cut].count(b'"ev":"invoke"'))
        return sum(self.invokes.values())

    def live(self):
        return [w for w in self.workers if w.proc is not None
                and w.proc.poll() is None]

    def pause(self, now):
        cands = [w for w in self.live() if w.paused_until is None]
        npaused = sum(1 for w in self.live() if w.paused_until is not None)
        if not cands or npaused >= max(1, self.a.workers // 2):
            return
        w = self.rnd.choice(cands)
        # the first pause is always longer than the TTL
        if (self.stats['pauses_over_ttl'] > 0 and
                self.rnd.random() < self.a.short_pause_frac):
            ms = self.rnd.uniform(self.a.ttl_min / 4, self.a.ttl_min / 2)
        else:
            ms = self.rnd.uniform(self.a.pause_min, self.a.pause_max)
        w.proc.send_signal(signal.SIGSTOP)
        w.paused_until = now + int(ms * 1e6)
        self.events('pause', worker=w.label, pid=w.proc.pid, ms=round(ms, 1))
        self.stats['pauses'] += 1
        if ms > self.a.ttl_max:
            self.stats['pauses_over_ttl'] += 1

    def resume(self, w):
        if w.proc is not None and w.proc.poll() is None:
            w.proc.send_signal(signal.SIGCONT)
            self.events('resume', worker=w.label, pid=w.proc.pid)
        w.paused_until = None

    def kill(self, now):
        cands = self.live()
        if not cands:
            return
        w = self.rnd.choice(cands)
        w.proc.send_signal(signal.SIGKILL)
        w.proc.wait()
        self.events('kill', worker=w.label, pid=w.proc.pid,
                    was_paused=w.paused_until is not None)
        w.paused_until = None
        w.proc = None
        w.restart_at = now + int(self.rnd.uniform(0, 0.2) * 1e9)
        self.stats['kills'] += 1

    def run(self):
        a = self.a
        for w in self.workers:
            self.spawn(w)
        rnd = self.rnd
        start = mono_ns()
        next_pause = start + int(rnd.expovariate(1 / a.pause_every) * 1e9) \
            if a.pause_every > 0 else None
        next_kill = start + int(rnd.uniform(0.5, 1.5) * a.kill_every * 1e9) \
            if a.kill_every > 0 else None
        crash_marks = [(k + 1) / (a.crashes + 1) for k in range(a.crashes)]
        last_report = start
        while True:
            now = mono_ns()
            done_ops = self.progress()
            for w in self.workers:
                if w.paused_until is not None and now >= w.paused_until:
                    self.resume(w)
                if w.restart_at is not None and now >= w.restart_at:
                    self.spawn(w)
                    self.stats['restarts'] += 1
                if (w.proc is not None and w.paused_until is None and
                        w.proc.poll() is not None):
                    self.events('exit', worker=w.label, pid=w.proc.pid,
                                rc=w.proc.returncode)
                    if w.proc.returncode != 0:
                        raise RuntimeError(f'worker {w.label} exited '
                                           f'{w.proc.returncode}')
                    w.proc = None
                    w.done = True
            if all(w.done for w in self.workers):
                break
            if now > self.deadline + int(10e9):
                log('workers overran the deadline; killing them')
                for w in self.live():
                    w.proc.send_signal(signal.SIGCONT)
                    w.proc.kill()
                raise RuntimeError('workers did not stop by the deadline')
            in_time = now < self.deadline - int(1e9)
            if next_pause is not None and now >= next_pause:
                if in_time:
                    self.pause(now)
                next_pause = now + int(rnd.expovariate(1 / a.pause_every) * 1e9)
            if next_kill is not None and now >= next_kill:
                if in_time:
                    self.kill(now)
                next_kill = now + int(rnd.uniform(0.5, 1.5) * a.kill_every * 1e9)
            frac = max(done_ops / a.ops, (now - start) / (a.time_limit * 0.8e9))
            if crash_marks and frac >= crash_marks[0] and in_time:
                crash_marks.pop(0)
                log(f'crash {self.stats["crashes"] + 1} at {done_ops} ops')
                self.stats['crash_seconds'].append(
                    round(self.server.crash(rnd), 2))
                self.stats['crashes'] += 1
            if now - last_report > 10e9:
                last_report = now
                log(f'{done_ops} ops, {(now - start) / 1e9:.0f} s, '
                    f'{self.stats["pauses"]} pauses, {self.stats["kills"]} '
                    f'kills, {self.stats["crashes"]} crashes')
            time.sleep(0.01)
        self.stats['ops_invoked'] = self.progress()
        self.stats['seconds'] = round((mono_ns() - start) / 1e9, 1)

    def cleanup(self):
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is None:
                w.proc.send_signal(signal.SIGCONT)
                w.proc.kill()
                w.proc.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--mode', choices=sorted(MODES), default='short')
    p.add_argument('--workers', type=int)
    p.add_argument('--leases', type=int)
    p.add_argument('--ops', type=int, help='total op budget (requests)')
    p.add_argument('--time-limit', type=float, help='seconds')
    p.add_argument('--crashes', type=int, help='server crashes (0: none)')
    p.add_argument('--pause-every', type=float,
                   help='mean seconds between SIGSTOPs (0: none)')
    p.add_argument('--kill-every', type=float,
                   help='mean seconds between SIGKILLs (0: none)')
    p.add_argument('--pause-min', type=float, help='ms, default 2 x ttl-max')
    p.add_argument('--pause-max', type=float, help='ms, default 4 x ttl-max')
    p.add_argument('--short-pause-frac', type=float, default=0.2,
                   help='fraction of pauses shorter than the TTL')
    p.add_argument('--ttl-min', type=int, default=200)
    p.add_argument('--ttl-max', type=int, default=500)
    p.add_argument('--sleep-max', type=int)
    p.add_argument('--long-sleep-pct', type=int)
    p.add_argument('--fence', default='mixed',
                   choices=['guard', 'advance', 'mixed', 'none'],
                   help='none: the negative control, no fence at all')
    p.add_argument('--sync', default='mixed', choices=['on', 'off', 'mixed'],
                   help='synchronous_commit of the writers (mixed: by parity)')
    p.add_argument('--seed', type=int)
    p.add_argument('--out', help='output directory (default: a new temp dir)')
    p.add_argument('--connstr', help='use this server (superuser)')
    p.add_argument('--pgdata', help='data directory of --connstr, for crashes')
    p.add_argument('--pglog', help='log file for restarts after a crash')
    p.add_argument('--pg-bindir')
    p.add_argument('--fsync', default='on', choices=['on', 'off'],
                   help='fsync of the throwaway cluster')
    p.add_argument('--wal-writer-delay', type=int, default=200, help='ms')
    p.add_argument('--worker', default=os.path.join(HERE, 'worker'))
    p.add_argument('--keep', action='store_true',
                   help='keep the throwaway cluster')
    p.add_argument('--no-check', action='store_true')
    a = p.parse_args()

    for k, v in MODES[a.mode].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.pause_min is None:
        a.pause_min = 2.0 * a.ttl_max
    if a.pause_max is None:
        a.pause_max = 4.0 * a.ttl_max
    if a.seed is None:
        a.seed = random.randrange(1, 2**31)
    if a.out is None:
        a.out = tempfile.mkdtemp(prefix='fencing-torture-out-')
    os.makedirs(a.out, exist_ok=True)
    if a.crashes and a.connstr and not a.pgdata:
        p.error('--crashes with --connstr needs --pgdata (and --pglog)')
    if a.pgdata and not a.pglog:
        a.pglog = os.path.join(a.out, 'server.log')
    if not os.access(a.worker, os.X_OK):
        subprocess.run(['make', '-s', '-C', HERE], check=True)

    # on SIGTERM or SIGHUP, stop the workers and the throwaway cluster too
    def interrupted(signum, frame):
        raise KeyboardInterrupt(f'signal {signum}')
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)

    rnd = random.Random(a.seed)
    events = Events(os.path.join(a.out, 'events.jsonl'))
    server = Server(a, events)
    driver = None
    status = 2
    wall0 = time.time()
    try:
        if not a.connstr:
            server.create()
        floor, server_sc, counters_before = setup_schema(server.connstr, a.leases, a.fence)
        log(f'mode {a.mode}: {a.workers} workers, {a.leases} leases, '
            f'{a.ops} ops, limit {a.time_limit:g} s, fence {a.fence}, '
            f'writer sync {a.sync}, server synchronous_commit {server_sc}, '
            f'{a.crashes} crashes, seed {a.seed}, out {a.out}')
        driver = Driver(a, server, events, rnd)
        t0 = events('run_start')
        driver.run()
        t1 = events('run_end')
        final = dump_final(server.connstr, a.leases)
        with open(os.path.join(a.out, 'final.json'), 'w') as f:
            json.dump(final, f)
        run = {k: v for k, v in vars(a).items()}
        run.update(token_floor=floor, server_synchronous_commit=server_sc,
                   lease_counters_before=counters_before,
                   t_start=t0, t_end=t1, stats=driver.stats,
                   sync_by_worker={w.id: driver.sync_for(w.id)
                                   for w in driver.workers})
        with open(os.path.join(a.out, 'run.json'), 'w') as f:
            json.dump(run, f, indent=1)
        log(f'run finished in {driver.stats["seconds"]} s: '
            f'{driver.stats["ops_invoked"]} ops invoked, '
            f'{driver.stats["pauses"]} pauses '
            f'({driver.stats["pauses_over_ttl"]} > TTL), '
            f'{driver.stats["kills"]} kills, {driver.stats["crashes"]} crashes '
            f'(down {driver.stats["crash_seconds"]} s)')
    except (Exception, KeyboardInterrupt) as e:
        if isinstance(e, subprocess.CalledProcessError) and e.stdout:
            log(e.stdout)
        log(f'run failed: {e!r}')
        if driver:
            driver.cleanup()
        server.stop()
        return 2
    server.stop()
    if a.no_check:
        return 0
    r = subprocess.run([sys.executable, os.path.join(HERE, 'check.py'), a.out])
    status = r.returncode
    log(f'checker exit {status}; wall clock {time.time() - wall0:.1f} s; '
        f'outputs in {a.out}')
    return status


if __name__ == '__main__':
    sys.exit(main())
