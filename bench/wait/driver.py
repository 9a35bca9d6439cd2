#!/usr/bin/python3
"""driver.py: measurements of the waiting lease_acquire, for bench/wait/run.sh.

Connects with libpq defaults (PGHOST, PGPORT, ... as pg_virtualenv sets
them) to a database with the fencing extension and prints one JSON object
with the raw samples and summaries:

  handover   a waiter asleep in lease_acquire(wait => '30 s'); the holder
             releases (autocommit).  Times, per handover (client clock,
             time.perf_counter, one process, two threads):
               from_commit   release statement returned -> waiter's acquire
                             returned
               from_start    release statement sent -> waiter's acquire
                             returned
             and on the server clock: released_at -> the waiter's
             acquired_at.  The two sessions swap roles after every
             handover.
  expiry     a lease of TTL ms; a waiter asleep until it expires.  Lateness
             of the waiter: its acquired_at (server) and the moment its
             acquire returned (client, wall clock) minus the old lease's
             expires_at.
  idle_cpu   N waiters asleep for DURATION s: utime + stime of their
             backends from /proc/<pid>/stat, as % of one core.
  renew      the holder's lease_renew latency (client, per statement),
             with 0 and with N waiters asleep on the same lease.
"""
import argparse
import json
import os
import statistics
import threading
import time

import psycopg2

CLK_TCK = os.sysconf("SC_CLK_TCK")


def connect(name):
    conn = psycopg2.connect(application_name=name)
    conn.autocommit = True
    return conn


def one(conn, sql, args=None):
    """the first row of the result (its only column, if just one)"""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        if cur.description is None:
            return None
        row = cur.fetchone()
        return row[0] if row is not None and len(row) == 1 else row


def pid_of(conn):
    return one(conn, "SELECT pg_backend_pid()")


def wait_asleep(mon, lease, pids, limit=30.0):
    """until all pids wait: the head of the lease's queue holds a share lock
    on the lease's tag (17989) and sleeps, the others wait for the queue
    tag (17990)"""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        n = one(mon, """
            SELECT count(DISTINCT l.pid)
              FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
             WHERE l.pid = ANY (%s)
               AND l.locktype = 'advisory' AND l.objsubid IN (17989, 17990)
               AND l.classid = ((fencing._lease_lock_tag(%s) >> 32) & 4294967295)::oid
               AND l.objid = (fencing._lease_lock_tag(%s) & 4294967295)::oid
               AND ((l.objsubid = 17989 AND l.granted
                     AND a.wait_event_type = 'Extension' AND a.wait_event IN ('Extension', 'FencingLeaseWait'))
                    OR (l.objsubid = 17990 AND NOT l.granted))
            """, (list(pids), lease, lease))
        if n == len(pids):
            return
        time.sleep(0.001)
    raise RuntimeError("waiters did not fall asleep")


def summary(values):
    v = sorted(values)
    n = len(v)

    def q(p):
        return v[min(n - 1, int(round(p * (n - 1))))]
    return {
        "n": n,
        "median": statistics.median(v),
        "p90": q(0.90),
        "p99": q(0.99),
        "min": v[0],
        "max": v[-1],
        "mean": statistics.fmean(v),
    }


class Waiter(threading.Thread):
    """runs one lease_acquire and notes when it returned"""

    def __init__(self, conn, lease, holder, ttl, wait):
        super().__init__(daemon=True)
        self.conn, self.lease, self.holder = conn, lease, holder
        self.ttl, self.wait = ttl, wait
        self.token = None
        self.returned = None
        self.returned_wall = None
        self.error = None

    def run(self):
        try:
            self.token = one(self.conn,
                             "SELECT fencing.lease_acquire(%s, %s, %s, %s)",
                             (self.lease, self.holder, self.ttl, self.wait))
            self.returned = time.perf_counter()
            self.returned_wall = time.time()
        except Exception as e:  # reported by the caller
            self.error = e


def bench_handover(n):
    lease = "bench_handover"
    a, b, mon = connect("bench_a"), connect("bench_b"), connect("bench_mon")
    pids = {id(a): pid_of(a), id(b): pid_of(b)}
    names = {id(a): "a", id(b): "b"}
    one(mon, "DELETE FROM fencing.leases WHERE name = %s", (lease,))
    holder, waiter = a, b
    token = one(holder, "SELECT fencing.lease_acquire(%s, 'a', '1 min')", (lease,))
    from_commit, from_start, server = [], [], []
    for _ in range(n):
        w = Waiter(waiter, lease, names[id(waiter)], "1 min", "30 s")
        w.start()
        wait_asleep(mon, lease, [pids[id(waiter)]])
        t_start = time.perf_counter()
        released, released_at = one(holder, """
            SELECT fencing.lease_release(%s, %s), extract(epoch FROM clock_timestamp()) * 1000
            """, (lease, token))
        t_commit = time.perf_counter()
        w.join(30)
        if not released or w.error or w.token is None:
            raise RuntimeError(f"handover failed: {released} {w.error} {w.token}")
        from_commit.append((w.returned - t_commit) * 1000)
        from_start.append((w.returned - t_start) * 1000)
        acquired_at = one(mon, """
            SELECT extract(epoch FROM acquired_at) * 1000 FROM fencing.lease_status WHERE name = %s
            """, (lease,))
        server.append(float(acquired_at) - float(released_at))
        token = w.token
        holder, waiter = waiter, holder
    one(holder, "SELECT fencing.lease_release(%s, %s)", (lease, token))
    for c in (a, b, mon):
        c.close()
    return {
        "from_commit_ms": summary(from_commit),
        "from_start_ms": summary(from_start),
        "server_ms": summary(server),
    }


def bench_expiry(n, ttl_ms, lock_delay_ms):
    lease = "bench_expiry"
    h, w_conn, mon = connect("bench_exp_h"), connect("bench_exp_w"), connect("bench_mon")
    one(mon, "DELETE FROM fencing.leases WHERE name = %s", (lease,))
    one(h, "SELECT set_config('fencing.lock_delay', %s, false)", (str(lock_delay_ms),))
    server, client = [], []
    for i in range(n):
        one(h, "SELECT fencing.lease_acquire(%s, %s, %s)",
            (lease, f"h{i}", f"{ttl_ms} ms"))
        expires = one(mon, """
            SELECT extract(epoch FROM expires_at + lock_delay) FROM fencing.lease_status WHERE name = %s
            """, (lease,))
        w = Waiter(w_conn, lease, f"w{i}", "1 min", "10 s")
        w.start()
        w.join(15)
        if w.error or w.token is None:
            raise RuntimeError(f"expiry wake failed: {w.error}")
        acquired = one(mon, """
            SELECT extract(epoch FROM acquired_at) FROM fencing.lease_status WHERE name = %s
            """, (lease,))
        server.append((float(acquired) - float(expires)) * 1000)
        client.append((w.returned_wall - float(expires)) * 1000)
        one(mon, "DELETE FROM fencing.leases WHERE name = %s", (lease,))
    for c in (h, w_conn, mon):
        c.close()
    return {"server_ms": summary(server), "client_ms": summary(client)}


def cpu_seconds(pids):
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        ticks += int(rest[11]) + int(rest[12])  # fields 14, 15
    return ticks / CLK_TCK


def renew_latencies(conn, lease, token, n):
    out = []
    with conn.cursor() as cur:
        for _ in range(n):
            t0 = time.perf_counter()
            cur.execute("SELECT fencing.lease_renew(%s, %s, '10 min')", (lease, token))
            ok = cur.fetchone()[0]
            out.append((time.perf_counter() - t0) * 1000)
            if not ok:
                raise RuntimeError("renew refused")
    return out


def bench_idle(n_waiters, duration, n_renew):
    lease = "bench_idle"
    h, mon = connect("bench_idle_h"), connect("bench_mon")
    one(mon, "DELETE FROM fencing.leases WHERE name = %s", (lease,))
    token = one(h, "SELECT fencing.lease_acquire(%s, 'holder', '10 min')", (lease,))
    renew0 = renew_latencies(h, lease, token, n_renew)

    conns = [connect(f"bench_idle_{i}") for i in range(n_waiters)]
    pids = [pid_of(c) for c in conns]
    waiters = [Waiter(c, lease, f"w{i}", "10 min", "600 s") for i, c in enumerate(conns)]
    for w in waiters:
        w.start()
    wait_asleep(mon, lease, pids, limit=60)
    xmins = one(mon, """
        SELECT count(*) FILTER (WHERE backend_xmin IS NOT NULL)
          FROM pg_stat_activity WHERE pid = ANY (%s)""", (pids,))

    c0, t0 = cpu_seconds(pids), time.monotonic()
    time.sleep(duration)
    c1, t1 = cpu_seconds(pids), time.monotonic()
    wait_asleep(mon, lease, pids, limit=5)
    cpu = c1 - c0
    wall = t1 - t0

    renew50 = renew_latencies(h, lease, token, n_renew)
    wait_asleep(mon, lease, pids, limit=5)

    # end: terminate the waiters (no handover, so that nothing races)
    one(mon, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid = ANY (%s)",
        (pids,))
    for w in waiters:
        w.join(10)
    for c in conns:
        try:
            c.close()
        except Exception:
            pass
    one(h, "SELECT fencing.lease_release(%s, %s)", (lease, token))
    h.close()
    mon.close()
    k = max(1, n_renew // 10)
    return {
        "waiters": n_waiters,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_pct_of_one_core": 100 * cpu / wall,
        "waiters_holding_an_xmin": xmins,
        "renew_0_ms": summary(renew0),
        "renew_n_ms": summary(renew50),
        "renew_n_last_tenth_median_ms": statistics.median(renew50[-k:]),
        "renew_0_last_tenth_median_ms": statistics.median(renew0[-k:]),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--handovers", type=int, default=200)
    p.add_argument("--expiries", type=int, default=100)
    p.add_argument("--ttl-ms", type=int, default=100)
    p.add_argument("--waiters", type=int, default=50)
    p.add_argument("--idle-seconds", type=float, default=10)
    p.add_argument("--renewals", type=int, default=2000)
    args = p.parse_args()

    result = {}
    # warm-up: every session prepares its plans and checks the token band
    # on its first call; 20 handovers, not counted
    bench_handover(20)
    result["handover"] = bench_handover(args.handovers)
    result["expiry"] = bench_expiry(args.expiries, args.ttl_ms, 0)
    result["expiry_lock_delay"] = bench_expiry(max(10, args.expiries // 4), args.ttl_ms, 100)
    result["idle"] = bench_idle(args.waiters, args.idle_seconds, args.renewals)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
