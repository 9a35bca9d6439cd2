#!/usr/bin/python3
"""lease_demo.py: the fencing story with psycopg2, two workers in one process.

    /usr/bin/python3 examples/python/lease_demo.py ['host=/tmp port=5432 dbname=app']

Worker A takes the lease "demo-python" for one second and writes row 1 of
the table demo_python with its token.  Then A "pauses" (a GC pause, a frozen
VM) while worker B asks for the lease, waiting until A's lease runs out, and
writes row 1 with its newer token.  A wakes up and writes again with its old
token: the write is refused with SQLSTATE LF001, and B's write stands.

The write puts fencing.fence_advance(fence, token) in the SET list: it
raises LF001 for a stale token, so the refusal is an error, never a silent
"0 rows"; fencing.expect_rows raises LF003 if the row does not exist.

Every call has a client-side deadline (docs/ha.md): a frozen server keeps
the connection open, statement_timeout runs on the server and does not
fire, and TCP keepalives are answered by the kernel.  So the connections
are asynchronous and each call is waited for until its deadline; when it
passes, the worker drops the connection and treats its lease as lost
(exit 2).  A holder's deadline must be shorter than its lease; the demo's
one-second lease only keeps the story short, so its deadlines
(CALL_DEADLINE_S, and a lease_acquire's wait on top) are the generous ones
a loaded machine needs.

Connects with the DSN given as the only argument, else with libpq's
environment (PGHOST, PGPORT, PGDATABASE, PGUSER, ...).  The database needs
CREATE EXTENSION fencing; the demo (re)creates its table demo_python.
Exits 0 when the story went as told, 1 otherwise, 2 when a call outlived
its deadline.  Needs psycopg2 (Debian: python3-psycopg2).
"""

import select
import sys
import time

import psycopg2
import psycopg2.extensions

LEASE = "demo-python"
TABLE = "demo_python"
STALE_TOKEN = "LF001"  # fencing.fence_advance: the token is older than the row's fence
CALL_DEADLINE_S = 20  # every call's deadline, in seconds
EXIT_DEADLINE = 2


class DeadlinePassed(Exception):
    """A call did not come back within its deadline; the connection is closed."""


def say(who, text):
    print(f"[{who}] {text}", flush=True)


def wait(conn, seconds):
    """Wait for an asynchronous connection, for at most seconds."""
    deadline = time.monotonic() + seconds
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            conn.close()
            raise DeadlinePassed(seconds)
        if state == psycopg2.extensions.POLL_READ:
            select.select([conn.fileno()], [], [], left)
        else:
            select.select([], [conn.fileno()], [], left)


def connect(dsn):
    # an asynchronous connection is always autocommit: every call is its
    # own transaction
    conn = psycopg2.connect(dsn, async_=1)
    wait(conn, CALL_DEADLINE_S)
    return conn


def one(conn, sql, params=(), seconds=CALL_DEADLINE_S):
    cur = conn.cursor()
    cur.execute(sql, params)
    wait(conn, seconds)
    return cur.fetchone()[0] if cur.description else None


def acquire(conn, holder, ttl_s, wait_s=0):
    """A token, or None while another holder's lease is live.  The server
    may wait wait_s seconds for the lease: the deadline comes on top."""
    return one(conn,
               "SELECT fencing.lease_acquire(%s, %s, make_interval(secs => %s),"
               " wait => make_interval(secs => %s))",
               (LEASE, holder, ttl_s, wait_s), CALL_DEADLINE_S + wait_s)


def fenced_write(conn, body, token):
    """Write row 1 with this token; raises psycopg2.Error with pgcode LF001
    if a newer token has written the row."""
    return one(conn,
               f"WITH w AS (UPDATE {TABLE}"
               "               SET body = %s, fence = fencing.fence_advance(fence, %s)"
               "             WHERE id = 1 RETURNING 1)"
               " SELECT fencing.expect_rows(count(*)) FROM w",
               (body, token))


def main(argv):
    dsn = argv[1] if len(argv) > 1 else ""
    a = connect(dsn)
    b = connect(dsn)
    ok = True
    try:
        one(a, f"DROP TABLE IF EXISTS {TABLE}")
        one(a, f"CREATE TABLE {TABLE} (id int PRIMARY KEY, body text, fence bigint)")
        one(a, f"INSERT INTO {TABLE} VALUES (1, 'empty', NULL)")
        say("setup", f"table {TABLE} ready, lease {LEASE}")

        ta = acquire(a, "A", 1)
        if ta is None:
            say("A", "the lease is held by someone else; run the demo again later")
            return 1
        say("A", f"acquired lease {LEASE}: token {ta} (ttl 1 s)")
        fenced_write(a, "written by A", ta)
        say("A", f"wrote row 1 with token {ta}")
        say("A", "pauses (a GC pause): its lease runs out meanwhile")

        tb = acquire(b, "B", 30, wait_s=10)
        if tb is None:
            say("B", "did not get the lease within 10 s")
            return 1
        say("B", f"acquired lease {LEASE}: token {tb} (after waiting for A's lease to expire)")
        fenced_write(b, "written by B", tb)
        say("B", f"wrote row 1 with token {tb}")

        say("A", f"wakes up and writes row 1 with token {ta}")
        try:
            fenced_write(a, "late write by A", ta)
            say("A", "write ACCEPTED: the stale write went through (this must not happen)")
            ok = False
        except psycopg2.Error as e:
            if e.pgcode != STALE_TOKEN:
                raise
            say("A", f"write REFUSED: {e.pgcode} {e.diag.message_primary}"
                f" ({e.diag.message_detail})")
        renewed = one(a, "SELECT fencing.lease_renew(%s, %s, '30 seconds')", (LEASE, ta))
        say("A", f"renew with token {ta}: {'renewed' if renewed else 'lost the lease'}; stopping")
        ok = ok and not renewed

        cur = b.cursor()
        cur.execute(f"SELECT body, fence FROM {TABLE} WHERE id = 1")
        wait(b, CALL_DEADLINE_S)
        body, fence = cur.fetchone()
        say("result", f"row 1 = {body!r}, fence {fence}")
        ok = ok and body == "written by B" and fence == tb and tb > ta
        one(b, "SELECT fencing.lease_release(%s, %s)", (LEASE, tb))
    finally:
        a.close()
        b.close()
    print("OK: the stale write was refused" if ok else "FAILED: the story did not go as told",
          flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except DeadlinePassed as e:
        print(f"no answer within {e.args[0]:g} s: connection dropped, the lease is treated as lost",
              file=sys.stderr)
        sys.exit(EXIT_DEADLINE)
    except psycopg2.Error as e:
        print(f"ERROR {e.pgcode or ''}: {str(e).strip()}", file=sys.stderr)
        sys.exit(1)
