#!/usr/bin/python3
"""worker.py: one fenced worker of the job queue in examples/job_queue.sql.

Claims one job from a queue, "works" on it for a while (a sleep), optionally
sending heartbeats, and completes it with the fencing token of its claim.
If the worker stalled long enough for its lease to run out and another
worker reclaimed the job, the completion is refused (SQLSTATE LF001) and
the newer worker's result stands.  A refused worker stops: it must not
retry, and must not repeat the job's side effects.

    /usr/bin/python3 examples/worker.py --dsn 'host=/tmp port=5432 dbname=app' \\
        --queue mail --lease 30 --work 5 --heartbeat 10 --name A

The DSN comes from --dsn, else from $JOB_QUEUE_DSN, else libpq's own
environment (PGHOST, PGPORT, PGDATABASE, ...).

Every call carries a client-side deadline (--deadline, shorter than the
lease): a frozen server keeps its connection open and statement_timeout
does not fire there (docs/ha.md).  When it passes, the worker drops the
connection and treats its claim as lost.  A token from before a failover
(LF005) is refused too: the worker drops the job and claims again.

Exit codes:
    0  the job was completed
    1  unexpected error (connection lost, SQL error, ...)
    2  usage error
    3  refused as stale (LF001): the claim was superseded by a newer one;
       the job belongs to another worker now
    4  no job to claim in the queue
    5  the job is gone (LF003) or not running any more (55000), or the
       token does not belong to it (22023)
    6  a call outlived its deadline: the claim is treated as lost

Safe behind pgbouncer in transaction pooling mode: every call is a single
autocommitted statement, psycopg2 sends parameters inline (no prepared
statements survive a transaction), and the worker sets no session state.

Needs psycopg2 (Debian: python3-psycopg2).
"""

import argparse
import json
import os
import re
import select
import sys
import time

import psycopg2
import psycopg2.extensions

EXIT_COMPLETED = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_STALE = 3
EXIT_NO_JOB = 4
EXIT_GONE = 5
EXIT_DEADLINE = 6

# SQLSTATEs the recipe raises
STALE_TOKEN = "LF001"  # fencing.fence_advance: the token is older than the fence
JOB_MISSING = "LF003"  # fencing.expect_rows: no such job
NOT_RUNNING = "55000"  # object_not_in_prerequisite_state: done, failed, dead
NOT_ISSUED = "22023"  # invalid_parameter_value: token not issued for this job
OLD_BAND = "LF005"  # a token issued before the last failover: claim again


class DeadlinePassed(Exception):
    """A call did not come back within its deadline; the connection is closed."""


def say(name, text):
    print(f"[{name}] {text}", flush=True)


def newer_token(err):
    """The token that superseded ours, from the LF001 detail
    ("The row was already written with token N."), or None."""
    detail = getattr(err.diag, "message_detail", None) or ""
    m = re.search(r"token (\d+)", detail)
    return int(m.group(1)) if m else None


def wait(conn, deadline):
    """Wait for an asynchronous connection, until the monotonic deadline."""
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            conn.close()
            raise DeadlinePassed()
        fd = conn.fileno()
        if state == psycopg2.extensions.POLL_READ:
            select.select([fd], [], [], left)
        else:
            select.select([], [fd], [], left)


def connect(dsn, seconds):
    conn = psycopg2.connect(dsn, async_=1)
    wait(conn, time.monotonic() + seconds)
    return conn


def call(conn, sql, params, seconds):
    """One statement, autocommitted (an asynchronous connection always is):
    its own transaction, with a client-side deadline."""
    cur = conn.cursor()
    cur.execute(sql, params)
    wait(conn, time.monotonic() + seconds)
    return cur.fetchone() if cur.description else None


def refused(name, what, job, token, err):
    """Report a refusal in plain words; returns the exit code."""
    if err.pgcode == STALE_TOKEN:
        newer = newer_token(err)
        by = f"job was reclaimed with token {newer}" if newer else "job was reclaimed"
        say(name, f"{what} REFUSED: token {token} is stale ({by})")
        say(name, f"stopping: job {job} belongs to a newer worker; not retrying")
        return EXIT_STALE
    if err.pgcode == OLD_BAND:
        say(name, f"{what} REFUSED: token {token} was issued before a failover (LF005)")
        say(name, f"dropping job {job}; claiming again")
        return None
    if err.pgcode in (JOB_MISSING, NOT_RUNNING, NOT_ISSUED):
        say(name, f"{what} REFUSED: {err.diag.message_primary}"
            + (f" ({err.diag.message_detail})" if err.diag.message_detail else ""))
        return EXIT_GONE
    raise err


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Claim one job, work on it, complete it with its fencing token.",
        epilog="Exit codes: 0 completed, 1 error, 2 usage, 3 refused as stale, "
               "4 no job, 5 job gone or not running.")
    p.add_argument("--dsn", default=os.environ.get("JOB_QUEUE_DSN", ""),
                   help="libpq connection string (default: $JOB_QUEUE_DSN, then PG* variables)")
    p.add_argument("--queue", default="default", help="queue to claim from")
    p.add_argument("--lease", type=float, default=30.0,
                   help="lease of the claim, in seconds (default 30)")
    p.add_argument("--work", type=float, default=1.0,
                   help="how long the work takes, in seconds (default 1)")
    p.add_argument("--heartbeat", type=float, default=0.0,
                   help="extend the lease every this many seconds while working (0: never)")
    p.add_argument("--result", default=None,
                   help="JSON result to complete with (default: {\"worker\": NAME})")
    p.add_argument("--deadline", type=float, default=None,
                   help="client-side deadline of every call, in seconds (default: a third of --lease)")
    p.add_argument("--name", default=f"worker-{os.getpid()}",
                   help="name printed in front of every line")
    args = p.parse_args(argv)
    if args.lease <= 0 or args.work < 0 or args.heartbeat < 0:
        p.error("--lease must be positive, --work and --heartbeat not negative")
    if args.deadline is None:
        args.deadline = max(args.lease / 3, 1.0)
    if args.deadline <= 0:
        p.error("--deadline must be positive")
    if args.result is None:
        args.result = json.dumps({"worker": args.name})
    else:
        try:
            json.loads(args.result)
        except ValueError as e:
            p.error(f"--result is not JSON: {e}")
    return args


def run(args):
    while True:
        code = run_once(args)
        if code is not None:
            return code


def run_once(args):
    """One claim and its job; None to claim again."""
    name = args.name
    # Autocommit (an asynchronous connection is): each call below is one
    # statement in its own transaction, which is what transaction pooling
    # needs, and no lock is held while the worker works.
    try:
        conn = connect(args.dsn, args.deadline)
    except DeadlinePassed:
        say(name, f"could not connect within {args.deadline:g} s")
        return EXIT_DEADLINE
    try:
        return work(args, conn)
    except DeadlinePassed:
        say(name, f"a call took longer than {args.deadline:g} s: connection dropped, "
            "the claim is treated as lost; stopping")
        return EXIT_DEADLINE
    finally:
        conn.close()


def work(args, conn):
    name = args.name
    if True:
        row = call(conn,
                   "SELECT c.id, c.token, c.attempt"
                   "  FROM job_queue.claim(%s, 1, make_interval(secs => %s)) AS c",
                   (args.queue, args.lease), args.deadline)
        if row is None:
            say(name, f"no job to claim in queue {args.queue!r}")
            return EXIT_NO_JOB
        job, token, attempt = row
        say(name, f"claimed job {job} with token {token} (attempt {attempt}, lease {args.lease:g} s)")

        # The work.  A real worker does its side effects here; a paused or
        # slow worker may outlive its lease without knowing it.
        say(name, f"working on job {job} for {args.work:g} s")
        deadline = time.monotonic() + args.work
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if args.heartbeat <= 0:
                time.sleep(left)
                continue
            time.sleep(min(left, args.heartbeat))
            if time.monotonic() >= deadline:
                break
            try:
                call(conn,
                     "SELECT job_queue.heartbeat(%s, %s, make_interval(secs => %s))",
                     (job, token, args.lease), args.deadline)
            except psycopg2.Error as e:
                return refused(name, "heartbeat", job, token, e)
            say(name, f"heartbeat: lease of job {job} extended (token {token})")

        try:
            call(conn, "SELECT job_queue.complete(%s, %s, %s::jsonb)",
                 (job, token, args.result), args.deadline)
        except psycopg2.Error as e:
            return refused(name, "completion", job, token, e)
        say(name, f"completed job {job} with token {token}")
        return EXIT_COMPLETED


def main(argv):
    args = parse_args(argv)
    try:
        return run(args)
    except psycopg2.Error as e:
        msg = (e.diag.message_primary if e.diag and e.diag.message_primary
               else str(e).strip())
        code = f" {e.pgcode}" if e.pgcode else ""
        say(args.name, f"ERROR{code}: {msg}")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
