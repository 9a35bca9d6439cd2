#!/usr/bin/python3
"""fairness.py: how fairly N clients contending for one lease are served.

Connects with libpq defaults (PGHOST, PGPORT, ... as test/tmp_cluster.sh
sets them) to a database with the fencing extension.  For each contender,
CLIENTS processes (one connection each, autocommit) start together and
loop for SECONDS:

    wait starts -> acquire -> hold HOLD_MS -> release

Contenders:
  fifo      fencing.lease_acquire(name, 'cN', '10 s', wait => '30 s'):
            fencing's waiting, served in arrival order
  poll      a retry loop of lease_acquire(..., wait => '0') with a random
            sleep of 1-10 ms between tries: what a user writes without
            a waiting acquire
  advisory  pg_advisory_lock(key) / pg_advisory_unlock(key): the lock
            manager's own queue, no lease row, no token (a lower bound)

Every time is taken by the client on CLOCK_MONOTONIC (time.monotonic_ns,
one clock for all processes of the machine):
  wait start    just before the acquire (the first try, for poll) is sent
  granted       the acquire that got the lease returned
  released      the release returned

Measures, over the grants of the run (those granted before SECONDS ran
out; the queue left then drains unmeasured):
  grants per client: min, max, Jain's fairness index (sum x)^2 / (n sum x^2)
  order inversions: a grant to a client while another client that had
      started to wait earlier still waited.  Counted per grant (grants with
      at least one) and per pair (clients overtaken), and also with a
      margin: only those who started waiting more than 1 ms / 10 ms
      earlier (client clocks see a send a little before the server does)
  wait time: granted - wait start (median, p99, max); waits that ran out
  handover: released (previous holder) -> granted (next holder), for
      consecutive grants
Grant order is the order of the granted times; for fifo and poll it is
checked against the token order (tokens are issued in acquire order).

Prints the report (markdown) on stdout, and the raw summary as JSON to
--json if given.
"""
import argparse
import bisect
import json
import multiprocessing as mp
import os
import platform
import random
import statistics
import sys
import time

import psycopg2

LEASE_TTL = "10 s"
LEASE_WAIT = "30 s"
# the server's clock, in ns: when it received the statement, and right
# after the acquire (the target list is evaluated left to right)
SRV_TIMES = ("(extract(epoch FROM statement_timestamp()) * 1e9)::bigint, "
             "(extract(epoch FROM clock_timestamp()) * 1e9)::bigint")


def connect(name):
    conn = psycopg2.connect(application_name=name)
    conn.autocommit = True
    return conn


def now_ns():
    return time.monotonic_ns()


def client(contender, idx, lease, key, hold_ms, start_at, stop_at, out_q, ready):
    """one contending client: loops until stop_at, then reports its log"""
    conn = connect(f"fair_{contender}_c{idx}")
    cur = conn.cursor()
    holder = f"c{idx}"
    hold_s = hold_ms / 1000.0
    rnd = random.Random(idx * 7919 + 17)
    # (wait start, acquire returned, release returned or None, token or
    # None when the wait ran out, tries)
    log = []
    errors = []
    ready.release()
    # all clients start at once
    while now_ns() < start_at:
        time.sleep(0.0005)
    try:
        while now_ns() < stop_at:
            tries = 1
            t_wait = now_ns()
            if contender == "fifo":
                cur.execute("SELECT fencing.lease_acquire(%s, %s, %s, %s), " + SRV_TIMES,
                            (lease, holder, LEASE_TTL, LEASE_WAIT))
                token, srv_s, srv_g = cur.fetchone()
            elif contender == "poll":
                srv_first = None
                while True:
                    cur.execute("SELECT fencing.lease_acquire(%s, %s, %s, '0'), " + SRV_TIMES,
                                (lease, holder, LEASE_TTL))
                    token, srv_s, srv_g = cur.fetchone()
                    if srv_first is None:
                        srv_first = srv_s
                    srv_s = srv_first
                    if token is not None:
                        break
                    if now_ns() - t_wait > 30_000_000_000:
                        break   # as the waiting acquire's 30 s
                    time.sleep(rnd.uniform(0.001, 0.010))
                    tries += 1
            else:
                cur.execute("SELECT pg_advisory_lock(%s) IS NULL, " + SRV_TIMES, (key,))
                _, srv_s, srv_g = cur.fetchone()
                token = 0
            t_got = now_ns()
            if token is None:
                log.append((t_wait, t_got, None, None, tries, srv_s, srv_g))
                continue
            time.sleep(hold_s)
            if contender == "advisory":
                cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
                ok = cur.fetchone()[0]
            else:
                cur.execute("SELECT fencing.lease_release(%s, %s)", (lease, token))
                ok = cur.fetchone()[0]
            t_rel = now_ns()
            if not ok:
                errors.append(f"release returned false at token {token}")
            log.append((t_wait, t_got, t_rel, token, tries, srv_s, srv_g))
    except Exception as e:   # reported in the result
        errors.append(repr(e))
    conn.close()
    out_q.put((idx, log, errors))


def pct(v, p):
    """nearest-rank percentile of a sorted list"""
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]


def stats_ms(values_ns):
    v = sorted(x / 1e6 for x in values_ns)
    if not v:
        return {"n": 0, "median": float("nan"), "p99": float("nan"),
                "max": float("nan"), "min": float("nan"), "mean": float("nan")}
    return {"n": len(v), "median": statistics.median(v), "p99": pct(v, 0.99),
            "max": v[-1], "min": v[0], "mean": statistics.fmean(v)}


def inversions(waits, grants):
    """waits: {idx: [(start, end)]} sorted by start; grants: [(granted,
    start, idx)].  A grant is inverted when another client had started to
    wait before the grantee and still waited then."""
    starts = {idx: [a for (a, _) in iv] for idx, iv in waits.items()}
    margins = (0, 1_000_000, 10_000_000)
    inv_grants = {m: 0 for m in margins}
    inv_pairs = {m: 0 for m in margins}
    worst = 0
    for (g, s, idx) in grants:
        over = {m: 0 for m in margins}
        for other, iv in waits.items():
            if other == idx:
                continue
            # the other's wait that began last before this grant
            j = bisect.bisect_right(starts[other], g) - 1
            if j < 0:
                continue
            os_, oe = iv[j]
            if oe > g and os_ < s:
                for m in margins:
                    if s - os_ > m:
                        over[m] += 1
                worst = max(worst, s - os_)
        for m in margins:
            if over[m]:
                inv_grants[m] += 1
                inv_pairs[m] += over[m]
    return {
        "grants": {f"{m // 1_000_000}ms": inv_grants[m] for m in margins},
        "pairs": {f"{m // 1_000_000}ms": inv_pairs[m] for m in margins},
        "worst_ms": worst / 1e6,
    }


def analyse(logs, clients, start_at, stop_at):
    """logs: {idx: [(wait start, returned, released, token, tries,
    server wait start, server returned), ...]}"""
    grants = []         # (granted, released, wait start, idx, token, srv start, srv granted)
    timeouts = 0
    tries = 0
    for idx, log in logs.items():
        for (s, g, r, tok, n, ss, sg) in log:
            tries += n
            if tok is None:
                if s < stop_at:
                    timeouts += 1
                continue
            if g <= stop_at:
                grants.append((g, r, s, idx, tok, ss, sg))
    grants.sort()
    n = len(grants)
    counts = [0] * clients
    for gr in grants:
        counts[gr[3]] += 1
    jain = (sum(counts) ** 2) / (clients * sum(c * c for c in counts)) if n else float("nan")

    # each client's waits, by start: (start, end), end = the acquire
    # returned (granted, or the wait ran out); on the client's clock and on
    # the server's
    wc = {idx: sorted((e[0], e[1]) for e in log) for idx, log in logs.items()}
    ws = {idx: sorted((e[5], e[6]) for e in log) for idx, log in logs.items()}
    inv_client = inversions(wc, [(gr[0], gr[2], gr[3]) for gr in grants])
    inv_server = inversions(ws, [(gr[6], gr[5], gr[3]) for gr in grants])

    handover = [grants[i + 1][0] - grants[i][1] for i in range(n - 1)]
    wait = [gr[0] - gr[2] for gr in grants]
    token_order_ok = None
    toks = [gr[4] for gr in grants]
    if toks and toks[0]:
        token_order_ok = all(a < b for a, b in zip(toks, toks[1:]))
    overlap = sum(1 for i in range(n - 1) if grants[i + 1][0] < grants[i][1])
    secs = (stop_at - start_at) / 1e9
    return {
        "grants": n,
        "grants_per_s": n / secs,
        "tries": tries,
        "timeouts": timeouts,
        "count_min": min(counts) if counts else 0,
        "count_max": max(counts) if counts else 0,
        "count_median": statistics.median(counts) if counts else 0,
        "clients_never_granted": sum(1 for c in counts if c == 0),
        "jain": jain,
        "inv_client": inv_client,
        "inv_server": inv_server,
        "wait_ms": stats_ms(wait),
        "handover_ms": stats_ms(handover),
        "token_order_matches_grant_order": token_order_ok,
        "grants_before_previous_release": overlap,
    }


def run_contender(contender, clients, seconds, hold_ms):
    lease = f"fairness_{contender}"
    key = 4242
    admin = connect("fair_admin")
    with admin.cursor() as cur:
        cur.execute("DELETE FROM fencing.leases WHERE name = %s", (lease,))
    ctx = mp.get_context("fork")
    out_q = ctx.Queue()
    ready = ctx.Semaphore(0)
    procs = []
    # a start time far enough ahead for every process to connect
    start_at = now_ns() + int(2e9 + clients * 50e6)
    stop_at = start_at + int(seconds * 1e9)
    for i in range(clients):
        p = ctx.Process(target=client,
                        args=(contender, i, lease, key, hold_ms, start_at, stop_at,
                              out_q, ready))
        p.start()
        procs.append(p)
    for _ in range(clients):
        if not ready.acquire(timeout=120):
            raise RuntimeError("clients did not connect")
    late = now_ns() > start_at
    logs, errors = {}, []
    for _ in range(clients):
        idx, log, errs = out_q.get(timeout=seconds + 120)
        logs[idx] = log
        errors.extend(errs)
    for p in procs:
        p.join(30)
    with admin.cursor() as cur:
        cur.execute("DELETE FROM fencing.leases WHERE name = %s", (lease,))
    admin.close()
    r = analyse(logs, clients, start_at, stop_at)
    r["errors"] = errors[:10]
    r["error_count"] = len(errors)
    r["started_late"] = late
    return r


def machine(conn):
    def q(sql):
        with conn.cursor() as cur:
            cur.execute(sql)
            return cur.fetchall()
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "psycopg2": psycopg2.__version__.split()[0],
        "server": q("SELECT version()")[0][0],
        "settings": q("""SELECT name, setting || coalesce(unit, '') FROM pg_settings
                          WHERE name IN ('fsync', 'synchronous_commit', 'max_connections',
                                         'shared_buffers')
                          ORDER BY name"""),
        "fencing": q("SELECT extversion FROM pg_extension WHERE extname = 'fencing'")[0][0],
    }


def fmt(x, d=3):
    return f"{x:.{d}f}"


def ratio(a, b):
    # a ratio of a negative median (the waiter returned before the
    # releasing client did) means nothing
    if not b or b != b or a != a or a <= 0 or b <= 0:
        return "n/a"
    return f"{a / b:.2f}x"


def report(res, args, info, load_before, load_after, date):
    out = []
    p = out.append
    p(f"# fencing: fairness of waiting for one lease, {date}")
    p("")
    p("## Machine and run")
    p("")
    p(f"- CPU: {info['cpu']}, nproc = {info['nproc']}; kernel {info['kernel']}")
    p(f"- {info['server']}; fencing {info['fencing']}")
    p("- settings: " + ", ".join(f"{n} = {v}" for n, v in info["settings"]))
    p(f"- driver: bench/wait/fairness.py, Python {info['python']}, psycopg2 {info['psycopg2']}, "
      f"one process and one connection per client, over the Unix socket")
    p(f"- load average before / after: {load_before} / {load_after}")
    p(f"- {args.clients} clients on one lease, {args.seconds:g} s per contender, "
      f"hold {args.hold_ms:g} ms; lease TTL {LEASE_TTL}, wait {LEASE_WAIT}; "
      f"poll: retry with wait => '0' after a random 1-10 ms sleep")
    p("")
    names = [c for c in args.contenders if c in res]
    label = {"fifo": "fencing, wait => '30 s' (FIFO)",
             "poll": "poll: wait => '0' + 1-10 ms backoff",
             "advisory": "pg_advisory_lock"}
    p("## Results")
    p("")
    p("| measure | " + " | ".join(label[c] for c in names) + " |")
    p("|---|" + "---:|" * len(names))

    def row(title, f):
        p(f"| {title} | " + " | ".join(f(res[c]) for c in names) + " |")
    row("grants (per s)", lambda r: f"{r['grants']} ({r['grants_per_s']:.0f}/s)")
    row("acquire calls (poll: tries)", lambda r: str(r["tries"]))
    row("grants per client: min / median / max",
        lambda r: f"{r['count_min']} / {r['count_median']:g} / {r['count_max']}")
    row("clients never granted", lambda r: str(r["clients_never_granted"]))
    row("Jain's fairness index", lambda r: fmt(r["jain"], 4))
    for clock in ("client", "server"):
        k = "inv_" + clock
        row(f"{clock} clock: grants with an order inversion",
            lambda r: f"{r[k]['grants']['0ms']} ({100 * r[k]['grants']['0ms'] / max(1, r['grants']):.1f} %)")
        row("... overtaking one that started > 1 ms earlier", lambda r: str(r[k]["grants"]["1ms"]))
        row("... > 10 ms earlier", lambda r: str(r[k]["grants"]["10ms"]))
        row("... clients overtaken (pairs, > 10 ms)", lambda r: str(r[k]["pairs"]["10ms"]))
        row("... worst: overtook one that started (ms) earlier", lambda r: fmt(r[k]["worst_ms"], 1))
    row("wait median (ms)", lambda r: fmt(r["wait_ms"]["median"]))
    row("wait p99 (ms)", lambda r: fmt(r["wait_ms"]["p99"]))
    row("wait max (ms)", lambda r: fmt(r["wait_ms"]["max"]))
    row("waits that ran out (30 s)", lambda r: str(r["timeouts"]))
    row("handover median (ms)", lambda r: fmt(r["handover_ms"]["median"]))
    row("handover p99 (ms)", lambda r: fmt(r["handover_ms"]["p99"]))
    row("handover mean (ms)", lambda r: fmt(r["handover_ms"]["mean"]))
    row("token order = grant order",
        lambda r: {True: "yes", False: "**NO**", None: "-"}[r["token_order_matches_grant_order"]])
    row("errors", lambda r: str(r["error_count"]))
    p("")
    if "fifo" in res:
        f = res["fifo"]
        p("## Ratios (the alternative / fencing FIFO)")
        p("")
        p("| measure | " + " | ".join(label[c] for c in names if c != "fifo") + " |")
        p("|---|" + "---:|" * (len(names) - 1))
        for title, g in (("grants per s", lambda r: r["grants_per_s"]),
                         ("wait median", lambda r: r["wait_ms"]["median"]),
                         ("wait p99", lambda r: r["wait_ms"]["p99"]),
                         ("wait max", lambda r: r["wait_ms"]["max"]),
                         ("handover median", lambda r: r["handover_ms"]["median"]),
                         ("handover p99", lambda r: r["handover_ms"]["p99"]),
                         ("handover mean", lambda r: r["handover_ms"]["mean"]),
                         ("max/min grants per client",
                          lambda r: r["count_max"] / r["count_min"] if r["count_min"] else float("inf"))):
            p(f"| {title} | " + " | ".join(ratio(g(res[c]), g(f)) for c in names if c != "fifo") + " |")
        p("")
    p("## How to read it")
    p("")
    p("- Times are the clients' (CLOCK_MONOTONIC, shared by all client processes). "
      "A wait starts just before the acquire is sent; a grant is the moment the "
      "acquire that got the lease returned; handover is from the previous holder's "
      "release returned to the next holder's acquire returned (negative when the "
      "waiter, woken at the release's commit, returns before the releasing client "
      "has read its result).")
    p("- An order inversion: a grant while another client that had started to wait "
      "earlier was still waiting. With 64 processes on few cores a client can be "
      "descheduled between taking its start time and sending, so inversions by less "
      "than a millisecond or so are noise of the measurement; the > 1 ms and > 10 ms "
      "rows leave those out. The server clock rows use statement_timestamp() (the "
      "server received the acquire; for poll, its first try) and clock_timestamp() "
      "right after the acquire, returned with it: they leave out the clients' "
      "scheduling, not the backends'.")
    p("- Grants after the run's end (the queue draining) are not counted.")
    p("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--hold-ms", type=float, default=1.0)
    ap.add_argument("--contenders", default="fifo,poll,advisory")
    ap.add_argument("--quick", action="store_true", help="10 s per contender")
    ap.add_argument("--json", help="write the summaries here")
    args = ap.parse_args()
    if args.quick:
        args.seconds = 10
    args.contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    for c in args.contenders:
        if c not in ("fifo", "poll", "advisory"):
            ap.error(f"unknown contender {c}")
    conn = connect("fair_info")
    info = machine(conn)
    conn.close()
    load_before = " ".join(open("/proc/loadavg").read().split()[:3])
    res = {}
    for c in args.contenders:
        print(f"== {c}: {args.clients} clients, {args.seconds:g} s", file=sys.stderr, flush=True)
        res[c] = run_contender(c, args.clients, args.seconds, args.hold_ms)
        r = res[c]
        print(f"   {r['grants']} grants, Jain {r['jain']:.4f}, inversions > 1 ms "
              f"client {r['inv_client']['grants']['1ms']} server {r['inv_server']['grants']['1ms']}, wait p99 {r['wait_ms']['p99']:.1f} ms, "
              f"handover median {r['handover_ms']['median']:.3f} ms", file=sys.stderr, flush=True)
    load_after = " ".join(open("/proc/loadavg").read().split()[:3])
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(report(res, args, info, load_before, load_after, date))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "info": info, "results": res}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
