#!/usr/bin/python3
# workload.py: the fenced workload of t/070_patroni.pl and its checker.
#
#   workload.py client --id N --members A:5432:8008,B:...  --history FILE
#                      --stop FILE [--leases 4] [--ttl '5 s'] [--deadline 2]
#   workload.py check --history DIR [--audit FILE]
#
# A client follows the leader: it asks each member's Patroni REST API for
# /primary (200 only on the member that holds the leader key, and only
# while that key is fresh, so a frozen old leader that wakes up answers
# 503) and connects there with target_session_attrs=read-write.  Every
# call has a client-side deadline shorter than the lease TTL (a SIGSTOPped
# server never answers; libpq has no timeout of its own for that), after
# which the connection is dropped and the leader looked up again.
#
# Each cycle: acquire one of the shared leases L0..L(n-1); write the row of
# that lease with the token (even leases: fence = fencing.fence_advance(),
# odd leases: fence = token under the fence_guard trigger); release.  One
# cycle in four the client "stalls" instead: it keeps the token without
# writing and, the next time it holds that lease, first writes with the
# old token: a stale holder, which must be refused if a newer token has
# written the row.  Each finished call is one line of the history file:
#
#   client kind lease token outcome node t0 t1 wid
#
# kind acq | write | zombie | rel; outcome ok | null | refused:SQLSTATE |
# error:SQLSTATE | unknown (no answer: connection lost or deadline); node
# the member that answered; t0/t1 CLOCK_MONOTONIC before sending and after
# the answer; wid the write's id (client:seq), also kept by the audit
# trigger on the server.  Only an "ok" line is acknowledged.
import argparse
import collections
import bisect
import json
import os
import random
import select
import signal
import sys
import time
import urllib.error
import urllib.request

HIST_FIELDS = ("client", "kind", "lease", "token", "outcome", "node", "t0", "t1", "wid")


class Deadline(Exception):
    pass


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


# ---------------------------------------------------------------------------
# client


def wait_ready(conn, deadline):
    import psycopg2.extensions as ext

    while True:
        state = conn.poll()
        if state == ext.POLL_OK:
            return
        left = deadline - now()
        if left <= 0:
            raise Deadline()
        if state == ext.POLL_READ:
            select.select([conn.fileno()], [], [], left)
        elif state == ext.POLL_WRITE:
            select.select([], [conn.fileno()], [], left)
        else:
            raise RuntimeError("unexpected poll state %r" % state)


class Client:
    def __init__(self, args):
        self.id = args.id
        self.name = "c%d" % args.id
        self.members = []
        for m in args.members.split(","):
            name, pg, rest = m.split(":")
            self.members.append((name, int(pg), int(rest)))
        self.leases = ["L%d" % i for i in range(args.leases)]
        self.ttl = args.ttl
        self.deadline = args.deadline
        self.stop = args.stop
        self.pause = args.pause
        self.rng = random.Random(args.id * 7919 + os.getpid())
        self.hist = open(args.history, "a", buffering=1)
        self.conn = None
        self.node = None
        self.wseq = 0
        self.zombie = {}  # lease -> token kept without writing

    def record(self, kind, lease, token, outcome, t0, t1, wid=""):
        self.hist.write(
            "\t".join(
                str(x)
                for x in (self.name, kind, lease, token if token is not None else "",
                          outcome, self.node or "-", "%.6f" % t0, "%.6f" % t1, wid)
            )
            + "\n"
        )

    def drop(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = None
        self.node = None

    def find_leader(self):
        for name, pg, rest in self.members:
            try:
                with urllib.request.urlopen(
                    "http://127.0.0.1:%d/primary" % rest, timeout=0.5
                ) as r:
                    if r.status == 200:
                        return name, pg
            except (urllib.error.URLError, OSError, ValueError):
                pass
        return None

    def connect(self):
        import psycopg2

        while not os.path.exists(self.stop):
            leader = self.find_leader()
            if leader is None:
                time.sleep(0.1)
                continue
            name, port = leader
            try:
                conn = psycopg2.connect(
                    "host=127.0.0.1 port=%d dbname=postgres user=postgres "
                    "target_session_attrs=read-write connect_timeout=2 "
                    "application_name=%s" % (port, self.name),
                    async_=1,
                )
                wait_ready(conn, now() + self.deadline)
                self.conn = conn
                self.node = name
                return True
            except (Deadline, psycopg2.Error):
                try:
                    conn.close()
                except Exception:
                    pass
                time.sleep(0.1)
        return False

    def query(self, sql, params):
        """(outcome, value): ok/value, refused:/error: SQLSTATE, or unknown"""
        import psycopg2

        cur = self.conn.cursor()
        try:
            cur.execute(sql, params)
            wait_ready(self.conn, now() + self.deadline)
            row = cur.fetchone() if cur.description else None
            return "ok", (row[0] if row else None), cur.rowcount
        except Deadline:
            self.drop()
            return "unknown", None, 0
        except (OSError, ValueError):
            self.drop()
            return "unknown", None, 0
        except psycopg2.Error as e:
            code = e.pgcode
            if code is None or code[:2] in ("57", "08") or self.conn.closed:
                # connection lost or terminated: the outcome is not known
                self.drop()
                return "unknown", None, 0
            if code.startswith("LF"):
                return "refused:" + code, None, 0
            if code == "25006":  # this server is no longer the primary
                self.drop()
            return "error:" + code, None, 0

    def write(self, kind, lease, token):
        self.wseq += 1
        wid = "%s:%d" % (self.name, self.wseq)
        lid = int(lease[1:])
        if lid % 2 == 0:
            sql = ("UPDATE fencing_test.res SET val = val + 1, writer = %s, "
                   "fence = fencing.fence_advance(fence, %s) WHERE id = %s RETURNING fence")
        else:  # the guard trigger checks the new fence against the old
            sql = ("UPDATE fencing_test.res SET val = val + 1, writer = %s, "
                   "fence = %s WHERE id = %s RETURNING fence")
        t0 = now()
        outcome, _, rows = self.query(sql, (wid, token, lid))
        if outcome == "ok" and rows != 1:
            outcome = "error:rows%d" % rows
        self.record(kind, lease, token, outcome, t0, now(), wid)
        return outcome

    def cycle(self):
        lease = self.rng.choice(self.leases)
        t0 = now()
        outcome, token, _ = self.query(
            "SELECT fencing.lease_acquire(%s, %s, %s::interval)", (lease, self.name, self.ttl)
        )
        if outcome == "ok" and token is None:
            outcome = "null"
        self.record("acq", lease, token, outcome, t0, now())
        if outcome != "ok" or self.conn is None:
            return
        old = self.zombie.pop(lease, None)
        if old is not None:
            self.write("zombie", lease, old)
            if self.conn is None:
                return
        if self.rng.random() < 0.25:
            self.zombie[lease] = token  # stall: keep the token, do not write
        else:
            self.write("write", lease, token)
            if self.conn is None:
                return
        t0 = now()
        outcome, ok, _ = self.query("SELECT fencing.lease_release(%s, %s)", (lease, token))
        if outcome == "ok":
            outcome = "ok" if ok else "null"
        self.record("rel", lease, token, outcome, t0, now())

    def run(self):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while not os.path.exists(self.stop):
            if self.conn is None and not self.connect():
                break
            self.cycle()
            if self.pause:
                time.sleep(self.rng.uniform(0, 2 * self.pause))
        self.drop()


# ---------------------------------------------------------------------------
# checker


def read_history(path):
    files = [path]
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".tsv"))
    events = []
    for f in files:
        with open(f) as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != len(HIST_FIELDS):
                    continue  # a line cut by a killed client
                e = dict(zip(HIST_FIELDS, parts))
                e["t0"] = float(e["t0"])
                e["t1"] = float(e["t1"])
                e["token"] = int(e["token"]) if e["token"] else None
                events.append(e)
    return events


def below_earlier(acks):
    """acks: events; those whose token is below a token acknowledged
    before they were requested (strictly: t1 of the other < t0 of this)"""
    by_t1 = sorted(acks, key=lambda e: e["t1"])
    t1s = [e["t1"] for e in by_t1]
    prefmax = []
    best = None
    for e in by_t1:
        if best is None or e["token"] > best["token"]:
            best = e
        prefmax.append(best)
    bad = []
    for e in acks:
        i = bisect.bisect_left(t1s, e["t0"])
        if i > 0 and prefmax[i - 1]["token"] > e["token"]:
            bad.append((e, prefmax[i - 1]))
    return bad


def fmt(e):
    return "%s %s %s token %s %s on %s [%.3f..%.3f]%s" % (
        e["client"], e["kind"], e["lease"], e["token"], e["outcome"], e["node"],
        e["t0"], e["t1"], (" " + e["wid"]) if e["wid"] else "")


def check(args):
    events = read_history(args.history)
    acks = [e for e in events if e["kind"] == "acq" and e["outcome"] == "ok"]
    writes = [e for e in events if e["kind"] in ("write", "zombie")]
    by_wid = {e["wid"]: e for e in writes}

    counts = collections.Counter(e["token"] for e in acks)
    dups = {t: c for t, c in counts.items() if c > 1}
    dup_examples = []
    for t in sorted(dups)[:5]:
        dup_examples.append(" | ".join(fmt(e) for e in acks if e["token"] == t))

    below = below_earlier(acks)
    below_lease = []
    for lease in sorted({e["lease"] for e in acks}):
        below_lease += below_earlier([e for e in acks if e["lease"] == lease])

    audit = None
    if args.audit:
        audit = {}
        with open(args.audit) as fh:
            for line in fh:
                wid, rid, token = line.rstrip("\n").split("\t")
                audit[wid] = (int(rid), int(token))

    # accepted writes: acknowledged ones, and in-doubt ones the audit shows
    acked_writes = [e for e in writes if e["outcome"] == "ok"]
    accepted = list(acked_writes)
    if audit is not None:
        accepted += [e for e in writes if e["outcome"] != "ok" and e["wid"] in audit]
    # A write accepted below a newer one on the surviving history is a
    # broken fence.  One accepted below newer writes that were all lost
    # (not in the audit: a discarded branch, a lost tail) is counted apart:
    # the database that accepted it never had them.
    def survived(e):
        return audit is None or e["wid"] in audit or e["t1"] >= args.audit_time

    def stale_over(candidates):
        found = []
        for lease in sorted({e["lease"] for e in writes}):
            acked = sorted((e for e in candidates if e["lease"] == lease), key=lambda e: e["t1"])
            t1s = [e["t1"] for e in acked]
            prefmax, best = [], None
            for e in acked:
                if best is None or e["token"] > best["token"]:
                    best = e
                prefmax.append(best)
            for e in accepted:
                if e["lease"] != lease:
                    continue
                i = bisect.bisect_left(t1s, e["t0"])
                if i > 0 and prefmax[i - 1]["token"] > e["token"]:
                    found.append((e, prefmax[i - 1]))
        return found

    stale_accepted = stale_over([e for e in acked_writes if survived(e)])
    stale_any = stale_over(acked_writes)
    seen_stale = {id(e) for e, _ in stale_accepted}
    stale_over_lost = [(e, b) for e, b in stale_any if id(e) not in seen_stale]

    refused = [e for e in writes if e["outcome"].startswith("refused:")]
    refused_codes = collections.Counter(e["outcome"].split(":", 1)[1] for e in refused)
    errors = collections.Counter(e["outcome"] for e in events
                                 if e["outcome"].startswith("error:"))
    lost, refused_in_audit = [], []
    if audit is not None:
        # acknowledged before the audit was read, and not in it
        lost = [e for e in acked_writes
                if e["wid"] not in audit and e["t1"] < args.audit_time]
        refused_in_audit = [e for e in refused if e["wid"] in audit]
        for wid, (rid, token) in audit.items():
            e = by_wid.get(wid)
            if e is not None and e["token"] != token:
                refused_in_audit.append(e)  # the audit shows another token
    per_node = collections.Counter(e["node"] for e in acks)

    out = {
        "events": len(events),
        "tokens": len(acks),
        "distinct_tokens": len(counts),
        "duplicates": sum(c - 1 for c in dups.values()),
        "below_acknowledged": len(below),
        "below_acknowledged_per_lease": len(below_lease),
        "writes_acknowledged": len(acked_writes),
        "stale_accepted": len(stale_accepted),
        "stale_accepted_over_lost": len(stale_over_lost),
        "stale_refused": len(refused),
        "stale_refused_zombie": sum(1 for e in refused if e["kind"] == "zombie"),
        "refused_codes": dict(refused_codes),
        "lost_acknowledged_writes": len(lost) if audit is not None else None,
        "audit_rows": len(audit) if audit is not None else None,
        "audit_mismatch": len(refused_in_audit),
        "errors": dict(errors),
        "tokens_per_node": dict(per_node),
        "unknown": sum(1 for e in events if e["outcome"] == "unknown"),
        "max_token": max((e["token"] for e in acks), default=0),
        "examples": {
            "duplicates": dup_examples,
            "below_acknowledged": ["%s  after  %s" % (fmt(a), fmt(b)) for a, b in below[:5]],
            "stale_accepted": ["%s  after  %s" % (fmt(a), fmt(b)) for a, b in stale_accepted[:5]],
            "stale_accepted_over_lost": ["%s  after  %s" % (fmt(a), fmt(b))
                                         for a, b in stale_over_lost[:5]],
            "lost": [fmt(e) for e in lost[:5]],
            "audit_mismatch": [fmt(e) for e in refused_in_audit[:5]],
        },
    }
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("client")
    c.add_argument("--id", type=int, required=True)
    c.add_argument("--members", required=True)
    c.add_argument("--history", required=True)
    c.add_argument("--stop", required=True)
    c.add_argument("--leases", type=int, default=4)
    c.add_argument("--ttl", default="5 s")
    c.add_argument("--deadline", type=float, default=2.0)
    c.add_argument("--pause", type=float, default=0.01)
    k = sub.add_parser("check")
    k.add_argument("--history", required=True)
    k.add_argument("--audit")
    k.add_argument("--audit-time", type=float, default=float("inf"),
                   help="CLOCK_MONOTONIC when the audit was read")
    args = p.parse_args()
    if args.cmd == "client":
        Client(args).run()
    else:
        check(args)


if __name__ == "__main__":
    main()
