#!/usr/bin/python3
"""leader_codes.py README.md: examples/python/fencing_leader.py and its SQLSTATEs.

Run by t/063_clients.pl against a test server (libpq's PG* environment, a
superuser: it calls advance_tokens).  Prints "ok - NAME" or "not ok - NAME:
why" per check; exits 0 when all passed.

  table     every LFnnn of the README's SQLSTATE table has an action
  lf021     an election on a lease's name: run() raises ElectionError LF021
            at once instead of campaigning forever
  lf003     a leader's write that changes no row (LF003): write_failed says
            it is the caller's error; the leadership stands
  lf001     a leader's write refused for a newer token (LF001): write_failed
            loses the leadership, reason "refused"
  lf005     after advance_tokens (a failover's band), the leader's renew is
            refused (LF005): reason "lost_at_failover", and it leads again
            with a token of the new band
  stop      stop(): the leader resigns, reason "stopped"
"""

import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "examples", "python"))
import psycopg2  # noqa: E402
from fencing_leader import (DeadlineConnection, ElectionError, LeaderElector,  # noqa: E402
                            sqlstate_action)

WAIT = 60.0
failed = 0


def check(name, ok, why=""):
    global failed
    if ok:
        print("ok - " + name, flush=True)
    else:
        failed += 1
        print("not ok - %s: %s" % (name, why), flush=True)


def until(cond, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def pgcode(f):
    try:
        f()
    except psycopg2.Error as e:
        return e.pgcode
    return None


admin = DeadlineConnection("")
q = lambda sql, params=(): admin.query(sql, params, timeout=WAIT)  # noqa: E731

# table
codes = sorted(set(re.findall(r"^\| `(LF\d{3})` \|", open(sys.argv[1]).read(), re.M)))
missing = [c for c in codes if sqlstate_action(c) is None]
check("table", len(codes) >= 12 and not missing,
      "%d codes, no action for %s" % (len(codes), missing))

# lf021
q("SELECT fencing.lease_acquire('codes-lease', 'someone', '1 hour')")
el = LeaderElector("", "codes-lease", "c1", ttl=10)
box = {}
t = threading.Thread(target=lambda: box.update(r=_run(el)), daemon=True)


def _run(elector):
    try:
        elector.run()
        return None
    except ElectionError as e:
        return e


t.start()
t.join(WAIT)
e = box.get("r")
check("lf021", isinstance(e, ElectionError) and e.pgcode == "LF021",
      "run() ended with %r" % (e,) if not t.is_alive() else "run() still campaigning")

# one elector for the rest: it campaigns again after each loss
q("CREATE TABLE codes_r (id int PRIMARY KEY, fence bigint)")
q("INSERT INTO codes_r VALUES (1, NULL)")
leads = []
el = LeaderElector("", "codes", "c1", ttl=10, on_started_leading=leads.append)
box = {}
t = threading.Thread(target=lambda: box.update(r=_run(el)), daemon=True)
t.start()
until(lambda: leads)
lead = leads[0]
w = DeadlineConnection("")
write = "UPDATE codes_r SET fence = fencing.fence_advance(fence, %s) WHERE id = %s"

# lf003
try:
    w.query("WITH u AS (" + write + " RETURNING 1) SELECT fencing.expect_rows(count(*)) FROM u",
            (lead.token, 2), timeout=WAIT)
    err = None
except psycopg2.Error as x:
    err = x
check("lf003", err is not None and err.pgcode == "LF003" and not lead.write_failed(err, w)
      and not lead.lost.is_set(),
      "error %s, lost %s" % (getattr(err, "pgcode", None), lead.lost.is_set()))

# lf001: a newer token wrote the row first
newer = q("SELECT fencing.next_token()")[0][0]
q(write, (newer, 1))
err = None
try:
    w.query(write, (lead.token, 1), timeout=WAIT)
except psycopg2.Error as x:
    err = x
lost = err is not None and lead.write_failed(err, w)
check("lf001", err is not None and err.pgcode == "LF001" and lost and lead.lost.is_set()
      and lead.reason == "refused",
      "error %s, write_failed %s, reason %s" % (getattr(err, "pgcode", None), lost, lead.reason))

# lf005: a new band, as after a promotion
check("leads again", until(lambda: len(leads) >= 2), "no second leadership")
lead = leads[-1]
q("SELECT fencing.advance_tokens()")
reason = lead.wait_lost(WAIT)
check("lf005", reason == "lost_at_failover", "reason %s" % reason)
check("leads in the new band", until(lambda: len(leads) >= 3 and leads[-1].token > lead.token),
      "tokens %s" % [x.token for x in leads])

# stop
lead = leads[-1]
el.stop()
t.join(WAIT)
check("stop", not t.is_alive() and box.get("r") is None and lead.reason == "stopped"
      and q("SELECT token FROM fencing.election_leader('codes')")[0][0] is None,
      "alive %s, result %r, reason %s" % (t.is_alive(), box.get("r"), lead.reason))

sys.exit(1 if failed else 0)
