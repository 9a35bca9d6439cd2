#!/usr/bin/python3
"""election_candidate.py: one candidate of t/052_election_pgbouncer.pl.

A real process using the client helper examples/python/fencing_leader.py:
it campaigns for an election, and while it leads it does units of work,
each one "work for --unit seconds, then write the result with the token"
(the write of a unit started before a pause goes out after it, as in
Kleppmann's story).  An observer thread records every leadership it sees.
Every event is a JSON line on stdout, with the wall clock (time.time()).

    election_candidate.py --dsn DSN --name c1 [--ttl 2] [--unit 0.3]
                          [--election e] [--schema elect] [--unfenced]

--unfenced writes the token without fence_advance: the negative control,
whose history the checker must reject.  SIGTERM stops it: a leader resigns.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples", "python"))
import psycopg2  # noqa: E402

from fencing_leader import DeadlineConnection, DeadlineExceeded, LeaderElector  # noqa: E402

args = argparse.ArgumentParser()
args.add_argument("--dsn", required=True)
args.add_argument("--name", required=True)
args.add_argument("--election", default="e")
args.add_argument("--schema", default="elect")
args.add_argument("--ttl", type=float, default=2.0)
args.add_argument("--unit", type=float, default=0.3)
args.add_argument("--unfenced", action="store_true")
opt = args.parse_args()

out_lock = threading.Lock()


def log(event, **fields):
    fields.update(event=event, c=opt.name, at=time.time(), pid=os.getpid())
    line = json.dumps(fields)
    with out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


if opt.unfenced:
    # what a leader without fencing writes: its token is recorded, never checked
    WRITE = ("WITH u AS (UPDATE {s}.resource SET fence = %(t)s, writes = writes + 1"
             "            WHERE id = 1 RETURNING fence)"
             " INSERT INTO {s}.history (token, candidate) SELECT %(t)s, %(c)s FROM u"
             " RETURNING seq").format(s=opt.schema)
else:
    WRITE = ("WITH u AS (UPDATE {s}.resource"
             "              SET fence = fencing.fence_advance(fence, %(t)s, allow_same => true),"
             "                  writes = writes + 1"
             "            WHERE id = 1 RETURNING fence)"
             " INSERT INTO {s}.history (token, candidate) SELECT %(t)s, %(c)s FROM u"
             " RETURNING seq").format(s=opt.schema)


def work(lead):
    """Units of work while leading; each ends with a write carrying the token."""
    conn = DeadlineConnection(opt.dsn, "candidate work")
    try:
        while not lead.lost.is_set():
            log("unit", token=lead.token)
            time.sleep(opt.unit)
            # no check between the work and its write: a pause in the unit
            # (SIGSTOP) sends this write late, and only the fence stops it
            log("attempt", token=lead.token)
            try:
                rows = conn.query(WRITE, {"t": lead.token, "c": opt.name},
                                  timeout=elector.call_timeout)
                log("write", token=lead.token, outcome="accepted", seq=rows[0][0])
            except DeadlineExceeded:
                log("write", token=lead.token, outcome="unknown", error="deadline")
            except psycopg2.Error as e:
                if e.pgcode is None:
                    log("write", token=lead.token, outcome="unknown", error=str(e).strip())
                    continue
                log("write", token=lead.token, outcome="refused", sqlstate=e.pgcode)
                if e.pgcode in ("LF001", "LF005"):
                    # the resource says a newer leader exists: stop at once
                    lead.refused(conn)
                    break
    finally:
        conn.close()
        log("work_done", token=lead.token)


def stopped_leading(lead):
    log("stopped", token=lead.token, reason=lead.reason, successor=lead.successor)


def new_leader(candidate, value, token):
    log("view", leader=candidate, value=value, token=token)


elector = LeaderElector(opt.dsn, opt.election, opt.name, value="value-of-" + opt.name,
                        ttl=opt.ttl, watch_wait=1.0,
                        on_started_leading=work, on_stopped_leading=stopped_leading,
                        on_new_leader=new_leader, log=log)
signal.signal(signal.SIGTERM, lambda *a: elector.stop())
log("start")
elector.run()
log("exit")
