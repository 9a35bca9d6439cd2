#!/usr/bin/python3
"""failover.py: a leader's death and an observer's wake-up, fencing next to etcd.

    failover.py --trials N --etcd http://127.0.0.1:PORT --out FILE.md

Run by bench/election.sh (section 4) in its throwaway cluster (libpq's
PG* environment) next to an etcd 3.4 it started.  For each system, N
trials of: three candidate processes campaign for a fresh election with a
TTL of 2 s, the leader writes to a fenced resource every 50 ms, an
observer process watches the leadership; the leader's process is killed
(SIGKILL), and the script records:

  failover   from the kill to the new leader's first fenced write
  observer   from the kill to the observer's wake-up (fencing: at the
             expiry, "no leader", or the new leader if a waiting campaign
             committed first; etcd: the new leader, since etcd's Observe
             does not report a deletion)
  expiry     fencing only: from the old lease's expires_at (read after
             the kill) to the observer's wake-up

fencing: the candidates are examples/python/fencing_leader.py electors
(renew every ttl/3); the fenced write is an UPDATE with fence_advance
whose row also goes to a history table with clock_timestamp().
etcd: the candidates use etcd's election service (Campaign, the
concurrency package's recipe) through etcd's JSON gateway, with a lease of
TTL 2 s kept alive every ttl/3; the fenced write is a transaction that
puts the resource only if the leader key still has the create revision
the campaign returned (etcd's own fence); the observer is `etcdctl elect
-l`.  (etcdctl elect itself always uses a 60 s session: see --etcdctl.)

--etcdctl also times `etcdctl elect` as shipped: two candidates, the
leader's etcdctl killed, until the other one prints its proposal.
"""

import argparse
import base64
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TTL = 2.0
WRITE_EVERY = 0.05


def emit(**kw):
    kw["at"] = time.time()
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


# ---- fencing --------------------------------------------------------------

def fencing_candidate(election, name):
    sys.path.insert(0, HERE)
    import psycopg2
    from fencing_leader import DeadlineConnection, DeadlineExceeded, LeaderElector

    def work(lead):
        conn = DeadlineConnection("")
        while not lead.lost.is_set():
            try:
                conn.query(
                    "WITH u AS (UPDATE fo_resource SET fence = fencing.fence_advance(fence, %s, true)"
                    " WHERE id = 1 RETURNING 1)"
                    " INSERT INTO fo_history (election, token, candidate) SELECT %s, %s, %s FROM u",
                    (lead.token, election, lead.token, name), timeout=0.5)
            except (DeadlineExceeded, psycopg2.Error):
                pass
            time.sleep(WRITE_EVERY)

    elector = LeaderElector("", election, name, value=name, ttl=TTL, on_started_leading=work,
                            log=lambda ev, **kw: emit(event=ev, **kw) if ev == "leading" else None)
    elector.run()


def fencing_observer(election):
    sys.path.insert(0, HERE)
    from fencing_leader import observe
    for cand, value, token in observe("", election, wait=10.0, call_timeout=1.0):
        emit(event="view", leader=cand, token=token)


# ---- etcd -----------------------------------------------------------------

def b64(s):
    return base64.b64encode(s.encode()).decode()


def etcd_call(endpoint, path, body, timeout=None):
    req = urllib.request.Request(endpoint + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def etcd_candidate(endpoint, election, name):
    lease = etcd_call(endpoint, "/v3/lease/grant", {"TTL": int(TTL)})["ID"]
    lost = threading.Event()

    def keepalive():
        while not lost.is_set():
            try:
                r = etcd_call(endpoint, "/v3/lease/keepalive", {"ID": lease}, timeout=TTL / 4)
                if int(r.get("result", {}).get("TTL", 0)) <= 0:
                    lost.set()
            except Exception:
                pass
            lost.wait(TTL / 3)

    threading.Thread(target=keepalive, daemon=True).start()
    # Campaign blocks until this candidate's key is the oldest under the prefix
    leader = etcd_call(endpoint, "/v3/election/campaign",
                       {"name": b64(election), "lease": lease, "value": b64(name)})["leader"]
    emit(event="leading", key=leader["key"], rev=leader["rev"])
    while not lost.is_set():
        r = etcd_call(endpoint, "/v3/kv/txn", {
            "compare": [{"target": "CREATE", "key": leader["key"], "result": "EQUAL",
                         "create_revision": leader["rev"]}],
            "success": [{"requestPut": {"key": b64(election + "-resource"), "value": b64(name)}}],
        }, timeout=0.5)
        if r.get("succeeded"):
            emit(event="wrote")
        time.sleep(WRITE_EVERY)


def etcd_observer(endpoint, election):
    host = endpoint.split("//", 1)[1]
    p = subprocess.Popen(["etcdctl", "--endpoints", host, "elect", "-l", election],
                         stdout=subprocess.PIPE, text=True, env=dict(os.environ, ETCDCTL_API="3"))
    lines = 0
    for line in p.stdout:
        lines += 1
        if lines % 2 == 0:  # a leader is printed as its key, then its value
            emit(event="view", leader=line.strip())


# ---- the driver -----------------------------------------------------------

class Proc:
    def __init__(self, *args):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + list(args),
                                  stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.events = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.events.append(json.loads(line))

    def kill(self, sig=signal.SIGKILL):
        try:
            os.killpg(self.p.pid, sig)
        except ProcessLookupError:
            pass
        self.p.wait()


def wait_for(what, cond, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for " + what)
        time.sleep(0.005)


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql],
                          check=True, capture_output=True, text=True).stdout.strip()


def trial(system, n, endpoint):
    election = "fo-%s-%d" % (system, n)
    if system == "fencing":
        obs = Proc("fencing-observer", election)
        cands = [Proc("fencing-candidate", election, "c%d" % i) for i in range(3)]
    else:
        obs = Proc("etcd-observer", endpoint, election)
        cands = [Proc("etcd-candidate", endpoint, election, "c%d" % i) for i in range(3)]
    try:
        leader = wait_for("a leader", lambda: next(
            (c for c in cands if any(e["event"] == "leading" for e in c.events)), None))
        wait_for("the leader's writes", lambda: (
            sum(1 for e in leader.events if e["event"] == "wrote") >= 5
            if system == "etcd" else
            int(psql("SELECT count(*) FROM fo_history WHERE election = '%s'" % election)) >= 5))
        wait_for("the observer's view", lambda: any(e["event"] == "view" for e in obs.events))
        time.sleep(0.7)  # a steady state: a keepalive since the first writes
        old_token = None
        if system == "fencing":
            old_token = next(e["token"] for e in leader.events if e["event"] == "leading")
        killed = time.time()
        leader.kill()
        r = {}
        if system == "fencing":
            r["expires_at"] = float(psql(
                "SELECT extract(epoch FROM expires_at) FROM fencing.lease_status"
                " WHERE name = '%s' AND token = %d" % (election, old_token)) or "nan")
            first = wait_for("the new leader's write", lambda: psql(
                "SELECT extract(epoch FROM min(at)) FROM fo_history"
                " WHERE election = '%s' AND token > %d" % (election, old_token)))
            r["failover"] = float(first) - killed
            # the first change it sees: "no leader" at the expiry, or the new
            # leader if a waiting campaign committed before the observer looked
            first = wait_for("the observer's wake-up", lambda: next(
                (e for e in obs.events if e["at"] > killed), None))
            new = wait_for("the observer's new leader", lambda: next(
                (e for e in obs.events if e["at"] > killed and e["leader"] is not None), None))
            r["observer"] = first["at"] - killed
            r["observer_new"] = new["at"] - killed
            r["expiry"] = first["at"] - r["expires_at"]
        else:
            def first_write():
                ts = [e["at"] for c in cands if c is not leader for e in c.events
                      if e["event"] == "wrote" and e["at"] > killed]
                return min(ts) if ts else None
            r["failover"] = wait_for("the new leader's write", first_write) - killed
            new = wait_for("the observer's new leader", lambda: next(
                (e for e in obs.events if e["at"] > killed), None))
            r["observer"] = r["observer_new"] = new["at"] - killed
        return r
    finally:
        for p in cands + [obs]:
            p.kill()


def etcdctl_trial(endpoint):
    """etcdctl elect as shipped: its session TTL is 60 s."""
    host = endpoint.split("//", 1)[1]
    env = dict(os.environ, ETCDCTL_API="3")
    procs, outs = [], []
    for i in range(2):
        p = subprocess.Popen(["etcdctl", "--endpoints", host, "elect", "fo-etcdctl", "p%d" % i],
                             stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
        procs.append(p)
        out = []
        outs.append(out)
        threading.Thread(target=lambda p=p, out=out: [out.append((time.time(), l))
                                                      for l in p.stdout], daemon=True).start()
        # the first one leads before the second campaigns
        wait_for("etcdctl elect p%d" % i, lambda: outs[0], 30)
    killed = time.time()
    os.killpg(procs[0].pid, signal.SIGKILL)
    t = wait_for("etcdctl's second candidate", lambda: outs[1] and outs[1][0][0], 120)
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return t - killed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--etcd", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--etcdctl", action="store_true")
    opt = ap.parse_args()
    psql("CREATE TABLE IF NOT EXISTS fo_resource (id int PRIMARY KEY, fence bigint);"
         "INSERT INTO fo_resource VALUES (1, NULL) ON CONFLICT DO NOTHING;"
         "CREATE TABLE IF NOT EXISTS fo_history (election text, token bigint, candidate text,"
         " at timestamptz DEFAULT clock_timestamp())")
    res = {"fencing": [], "etcd": []}
    for n in range(opt.trials):
        for system in ("fencing", "etcd"):
            r = trial(system, n, opt.etcd)
            res[system].append(r)
            print("%s trial %d: %s" % (system, n + 1,
                                      ", ".join("%s %.0f ms" % (k, v * 1000) for k, v in r.items()
                                                if k != "expires_at")), file=sys.stderr)

    def cell(system, key):
        v = [r[key] * 1000 for r in res[system] if key in r]
        if not v:
            return "–"
        return "%.0f / %.0f / %.0f" % (min(v), statistics.median(v), max(v))

    with open(opt.out, "w") as f:
        f.write("| from the kill (-9) of the leader's process to | fencing | etcd 3.4 election |\n")
        f.write("|---|---|---|\n")
        f.write("| the new leader's first fenced write | %s | %s |\n"
                % (cell("fencing", "failover"), cell("etcd", "failover")))
        f.write("| an observer's first wake-up | %s (no leader, or the new one) | %s (the new leader) |\n"
                % (cell("fencing", "observer"), cell("etcd", "observer")))
        f.write("| an observer learning the new leader | %s | %s |\n"
                % (cell("fencing", "observer_new"), cell("etcd", "observer_new")))
        f.write("| fencing: from the old lease's expires_at to the observer's wake-up | %s | – |\n"
                % cell("fencing", "expiry"))
        if opt.etcdctl:
            f.write("\n`etcdctl elect` as shipped (its session TTL is 60 s, not settable in 3.4):"
                    " from the kill of the leading etcdctl to the other one's election: %.1f s.\n"
                    % etcdctl_trial(opt.etcd))


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "fencing-candidate":
        fencing_candidate(sys.argv[2], sys.argv[3])
    elif cmd == "fencing-observer":
        fencing_observer(sys.argv[2])
    elif cmd == "etcd-candidate":
        etcd_candidate(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "etcd-observer":
        etcd_observer(sys.argv[2], sys.argv[3])
    else:
        main()
