#!/usr/bin/python3
"""leader_demo.py: leader election with fencing_leader.py, two real processes.

    /usr/bin/python3 examples/python/leader_demo.py ['host=/tmp port=5432 dbname=app']

Candidates A and B are child processes of this one, each a LeaderElector
(fencing_leader.py) for the election "demo-leader" with a TTL of 2 s.  A
leads and writes row 1 of demo_leader with its token.  Then A starts a
unit of work and freezes in the middle of it (SIGSTOP, as a stop-the-world
pause would) past its TTL.  B, waiting in its campaign, leads, and writes
with its newer token.  A resumes (SIGCONT): its keepalive finds its renew
deadline passed, and the write of the unit it was in goes out anyway, with
the old token: the row refuses it (LF001), and A's on_stopped_leading hears
why from lease_watch (taken over, by B's token).  B resigns.

This process only starts, freezes and resumes the children and tells the
story from their events (JSON lines).  Exits 0 when the story went as told.
Needs psycopg2 (Debian: python3-psycopg2).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

ELECTION = "demo-leader"
TTL = 2.0


def child(name, dsn):
    """A candidate: lead, and while leading, write row 1 once per unit of work."""
    import psycopg2
    from fencing_leader import DeadlineConnection, DeadlineExceeded, LeaderElector

    out = threading.Lock()

    def emit(event, **kw):
        kw["event"] = event
        with out:  # one whole line at a time, from several threads
            sys.stdout.write(json.dumps(kw) + "\n")
            sys.stdout.flush()

    def work(lead):
        conn = DeadlineConnection(dsn)
        unit = 0
        while not lead.lost.is_set():       # the cancellation, checked per unit
            unit += 1
            emit("unit", token=lead.token, unit=unit)
            time.sleep(0.2 if unit == 1 else 3.0)   # the work; no check before its write
            try:
                conn.query("UPDATE demo_leader SET body = %s,"
                           " fence = fencing.fence_advance(fence, %s, allow_same => true)"
                           " WHERE id = 1", ("by " + name, lead.token), timeout=1.0)
                emit("wrote", token=lead.token)
            except psycopg2.Error as e:
                emit("refused", token=lead.token, sqlstate=e.pgcode)
                lead.refused(conn)          # a newer leader exists: lost, and why
            except DeadlineExceeded:
                emit("unknown", token=lead.token)
        conn.close()

    elector = LeaderElector(
        dsn, ELECTION, name, value="host-%s:8080" % name.lower(), ttl=TTL,
        on_started_leading=work,
        on_stopped_leading=lambda lead: emit("stopped", token=lead.token, reason=lead.reason,
                                             successor=lead.successor),
        on_new_leader=lambda cand, value, token: emit("view", leader=cand, value=value,
                                                      token=token),
        log=lambda event, **kw: emit(event, **kw) if event == "leading" else None)
    signal.signal(signal.SIGTERM, lambda *a: elector.stop())
    elector.run()
    emit("exit")


class Child:
    def __init__(self, name, dsn):
        self.name = name
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", name,
                                      dsn], stdout=subprocess.PIPE, text=True)
        self.events = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.events.append(json.loads(line))
                self.cv.notify_all()

    def wait(self, event, timeout=30, **match):
        """The first event of this kind matching `match`, once it came."""
        def found():
            for e in self.events:
                if e["event"] == event and all(e.get(k) == v for k, v in match.items()):
                    return e
            return None
        with self.cv:
            if not self.cv.wait_for(found, timeout):
                raise SystemExit("FAIL: [%s] no %s event %r within %d s"
                                 % (self.name, event, match, timeout))
            return found()


def say(who, text):
    print("[%s] %s" % (who, text), flush=True)


def main():
    dsn = sys.argv[1] if len(sys.argv) > 1 else ""
    import psycopg2
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS demo_leader")
    cur.execute("CREATE TABLE demo_leader (id int PRIMARY KEY, body text, fence bigint)")
    cur.execute("INSERT INTO demo_leader VALUES (1, 'empty', NULL)")
    say("setup", "table demo_leader ready, election %s, TTL %d s" % (ELECTION, TTL))

    a = Child("A", dsn)
    ta = a.wait("leading")["token"]
    say("A", "leads with token %d" % ta)
    a.wait("wrote", token=ta)
    say("A", "wrote row 1 with token %d" % ta)
    b = Child("B", dsn)
    v = b.wait("view", leader="A")
    say("B", "campaigns, and follows A (value %s)" % v["value"])
    a.wait("unit", token=ta, unit=2)
    a.proc.send_signal(signal.SIGSTOP)
    say("A", "starts a unit of work, and freezes in it (SIGSTOP) past its TTL")
    tb = b.wait("leading")["token"]
    say("B", "leads with token %d (A's lease expired)" % tb)
    b.wait("wrote", token=tb)
    say("B", "wrote row 1 with token %d" % tb)
    a.proc.send_signal(signal.SIGCONT)
    say("A", "resumes (SIGCONT); its unit's write goes out with token %d" % ta)
    r = a.wait("refused", token=ta)
    say("A", "write REFUSED: %s" % r["sqlstate"])
    s = a.wait("stopped", token=ta)
    # what A's elector saw first depends on when its watcher last looked:
    # the expiry (the server answers at that moment, while A is frozen) or
    # B's takeover; the server's answer now is the takeover
    say("A", "stopped leading: %s" % (
        "expired" if s["reason"] == "expired" else
        "taken_over, successor B's token" if s["successor"] == tb else
        "%s, successor %s" % (s["reason"], s["successor"])))
    cur.execute("SELECT reason, successor FROM fencing.lease_watch(%s, %s)", (ELECTION, ta))
    wa, ws = cur.fetchone()
    say("A", "lease_watch of its token: %s, successor %s" % (wa, "B's token" if ws == tb else ws))
    # A first: a candidate again, it would lead once B resigns
    a.proc.send_signal(signal.SIGTERM)
    a.wait("exit")
    b.proc.send_signal(signal.SIGTERM)
    b.wait("exit")
    say("B", "stops: resigned")
    for c in (a, b):
        c.proc.wait(timeout=30)
    cur.execute("SELECT body, fence FROM demo_leader WHERE id = 1")
    body, fence = cur.fetchone()
    cur.execute("SELECT reason FROM fencing.lease_watch(%s, %s)", (ELECTION, tb))
    reason = cur.fetchone()[0]
    say("result", "row 1 = %r, fence %s; B's token is %s" % (
        body, "B's token" if fence == tb else fence, reason))
    seen = s["reason"] == "expired" or (s["reason"], s["successor"]) == ("taken_over", tb)
    if seen and (body, fence, r["sqlstate"], wa, ws, reason) == \
            ("by B", tb, "LF001", "taken_over", tb, "released"):
        print("OK: the frozen leader's write was refused, and it learned why", flush=True)
        return 0
    print("FAIL", flush=True)
    return 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
    else:
        sys.exit(main())
