"""fencing_leader: leader election on the fencing extension, for psycopg2.

A candidate campaigns; once it leads it gets a token, keeps its leadership
alive, and learns the moment it is lost, and why.  The shape is client-go's
LeaderElector (lease duration, renew deadline, retry period,
on_started_leading / on_stopped_leading / on_new_leader):

    from fencing_leader import LeaderElector

    def work(lead):                       # runs in a thread of its own
        while not lead.lost.is_set():     # the cancellation
            ...                           # write with lead.token: the resource refuses it once stale

    elector = LeaderElector(dsn, "scheduler", "node-1", value="host-1:8080", ttl=10,
                            on_started_leading=work,
                            on_stopped_leading=lambda lead: print("lost:", lead.reason))
    elector.run()                         # campaigns, leads, campaigns again; stop() ends it

What it does, and why:

- Every call has a deadline on the client (DeadlineConnection).  A frozen
  server, or a frozen network, never answers, and statement_timeout runs
  on the server, so it never fires; a call that misses its deadline closes
  its connection (docs/ha.md).
- The keepalive renews with lease_renew every ttl/3 (renew_every).  The
  leader trusts its leadership until renew_deadline (2/3 of the TTL) after
  the *start* of its last successful renew (or campaign): the lease cannot
  have expired on the server before then.  Past that, it counts as lost
  ("renew_deadline") even if no call ever answered.
- A watch on a second connection (lease_watch with a wait) returns the
  moment the token stops being current: expired, taken over (with the
  taker's token), released, force-released, lost at a failover.  A renew
  that answers false asks lease_watch(name, token, '0') why.
- On loss, lead.lost is set (the work's cancellation), lead.reason and
  lead.successor say why, and on_stopped_leading runs once.  Stopping the
  work does not make its writes safe by itself: a write already on its way
  (a process paused between its check and its write) is refused by the
  resource, because it carries the token.
- Nothing is kept per session: every call is one statement in autocommit,
  so it works through pgbouncer in transaction mode, and a recycled server
  connection changes nothing.
- Every SQLSTATE of the README's table (LF000 to LF022) has one meaning
  here (sqlstate_action): the leadership is lost, campaign again later,
  stop (run() raises ElectionError), or the caller's own write failed.

Needs psycopg2 (Debian: python3-psycopg2).
"""

import select
import threading
import time

import psycopg2
import psycopg2.extensions

__all__ = ["DeadlineConnection", "DeadlineExceeded", "ElectionError", "LeaderElector",
           "Leadership", "observe", "sqlstate_action"]

# What each SQLSTATE of README.md#sqlstates means to an elector and to the
# writes of its leader.
LOST = {"LF001": "refused", "LF005": "lost_at_failover", "LF022": "expired"}
"""A renew or a write with the token was refused: a newer token wrote, or
the token is from before a failover (band), or the transaction that renewed
it committed after its expiry.  The leadership is over."""
RETRY = frozenset(["LF006", "LF007", "25006"])
"""No token now: epoch mode without a valid epoch file, or not yet a
greater epoch after a promotion; a standby (read-only).  Campaign later."""
FATAL = frozenset(["LF000", "LF002", "LF020", "LF021", "42501", "22023", "22004"])
"""Nothing a retry changes: the class code itself (raised by nothing
today), token space exhausted, fencing.leases altered,
the name is a lease or a semaphore, another role's election, bad
arguments.  run() raises ElectionError."""
WRITE = frozenset(["LF003", "LF004", "LF010", "LF011", "LF012"])
"""The caller's write itself (no such row, no declared token, a claim
guard's refusals): not a verdict on the leadership; raised to the caller."""


def sqlstate_action(code):
    """'lost', 'retry', 'fatal', 'write', or None (anything else: a
    transient error; log it and retry within the deadlines)."""
    if code in LOST:
        return "lost"
    for action, codes in (("retry", RETRY), ("fatal", FATAL), ("write", WRITE)):
        if code in codes:
            return action
    return None


class ElectionError(Exception):
    """The elector stopped on an error no retry changes (FATAL); .pgcode."""

    def __init__(self, pgcode, message):
        super().__init__("%s %s" % (pgcode, message))
        self.pgcode = pgcode


class DeadlineExceeded(Exception):
    """A call did not answer in time; its connection was closed."""


class DeadlineConnection:
    """One connection, used by one thread, in psycopg2's asynchronous mode:
    connecting and every statement wait at most `timeout` seconds, on the
    monotonic clock.  A call that misses its deadline, or whose connection
    broke, closes the connection; the next call opens a new one."""

    def __init__(self, dsn, application_name=None):
        self.dsn = dsn
        self.application_name = application_name
        self.conn = None

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
            self.conn = None

    def _wait(self, deadline):
        while True:
            state = self.conn.poll()
            if state == psycopg2.extensions.POLL_OK:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlineExceeded()
            fd = self.conn.fileno()
            if state == psycopg2.extensions.POLL_READ:
                select.select([fd], [], [], left)
            elif state == psycopg2.extensions.POLL_WRITE:
                select.select([], [fd], [], left)

    def query(self, sql, params=(), timeout=5.0):
        """The rows of one statement (autocommit), within `timeout` seconds.
        Raises DeadlineExceeded, or psycopg2.Error (e.pgcode: its SQLSTATE)."""
        deadline = time.monotonic() + timeout
        try:
            if self.conn is None or self.conn.closed:
                kw = {"async_": 1}
                if self.application_name:
                    kw["application_name"] = self.application_name
                self.conn = psycopg2.connect(self.dsn, **kw)
                self._wait(deadline)
            cur = self.conn.cursor()
            cur.execute(sql, params)
            self._wait(deadline)
            return cur.fetchall() if cur.description is not None else []
        except (DeadlineExceeded, psycopg2.OperationalError, psycopg2.InterfaceError):
            # no answer, or no connection: whatever state it is in, drop it
            self.close()
            raise
        except psycopg2.Error:
            # the server answered with an error; the connection is fine
            raise
        except BaseException:
            self.close()
            raise


def _secs(seconds):
    return "%.6f s" % seconds


class Leadership:
    """One term of leadership: its token, and its end.

    lost         threading.Event, set the moment the leadership is lost
    reason       why: expired, taken_over, released, force_released,
                 lost_at_failover, unknown (lease_watch's reasons), or
                 renew_deadline (no renew answered in time), refused (a
                 write refused before the server saw the token replaced),
                 stopped (stop()), error (a FATAL SQLSTATE: run() raises)
    successor    the token that replaced this one, when the server knows it
    """

    def __init__(self, elector, token, trusted_until):
        self.elector = elector
        self.token = token
        self.trusted_until = trusted_until
        self.lost = threading.Event()
        self.reason = None
        self.successor = None
        self._lock = threading.Lock()

    def leading(self):
        """A cheap local check before a side effect: not lost, and within
        the renew deadline.  It narrows the window; the fence closes it."""
        return not self.lost.is_set() and time.monotonic() < self.trusted_until

    def write_failed(self, error, conn):
        """A write with this token raised `error`.  If its SQLSTATE says the
        token is stale (LOST: LF001, LF005), the leadership is lost: ask
        why (refused) and return True; otherwise (WRITE codes, anything
        else) return False, and the error is the caller's."""
        if sqlstate_action(getattr(error, "pgcode", None)) != "lost":
            return False
        self.refused(conn)
        return True

    def wait_lost(self, timeout=None):
        """Block until the leadership is lost (or timeout): its reason, or None."""
        return self.reason if self.lost.wait(timeout) else None

    def refused(self, conn):
        """A write with this token was refused (LF001, LF005): a newer
        leader exists.  Ask lease_watch why, on the caller's own
        DeadlineConnection, and mark the leadership lost."""
        try:
            rows = conn.query("SELECT reason, successor FROM fencing.lease_watch(%s, %s)",
                              (self.elector.election, self.token),
                              timeout=self.elector.call_timeout)
            reason, successor = rows[0]
        except (DeadlineExceeded, psycopg2.Error):
            reason, successor = "unknown", None
        if reason == "current":
            reason = "refused"  # the resource saw a newer token first
        return self.lose(reason, successor)

    def lose(self, reason, successor=None):
        """Mark the leadership lost (once); True if this call did it."""
        with self._lock:
            if self.lost.is_set():
                return False
            self.reason = reason
            self.successor = successor
            self.lost.set()
        self.elector._log("lost", token=self.token, reason=reason, successor=successor)
        return True


class LeaderElector:
    """Campaign, lead, keep leading, learn the loss; again, until stop().

    dsn                 libpq connection string (pgbouncer in transaction mode is fine)
    election, candidate, value
                        as election_campaign; each process needs a
                        candidate name of its own
    ttl                 the lease's TTL, seconds (client-go: LeaseDuration)
    renew_deadline      the leader stops leading when no renew started
                        within this many seconds has succeeded (client-go:
                        RenewDeadline); default 2/3 of ttl; must be < ttl
    renew_every         keepalive period, default ttl/3
    retry_period        a follower's campaign waits this long (in the server,
                        first come first served) before trying again;
                        default ttl/2 (client-go: RetryPeriod)
    call_timeout        client-side deadline of a call without a wait;
                        default ttl/4
    watch_wait          how long one lease_watch or election_observe waits in
                        the server; keep it below pgbouncer's query_timeout
    on_started_leading(lead)   run in a new thread when leadership starts
    on_stopped_leading(lead)   run once it is lost (lead.reason says why)
    on_new_leader(candidate, value, token)
                        if given, an observer thread calls it for every
                        leadership it sees (None, None, None: no leader)
    log(event, **fields)       optional, for tracing
    """

    def __init__(self, dsn, election, candidate, value="", ttl=10.0, renew_deadline=None,
                 renew_every=None, retry_period=None, call_timeout=None, watch_wait=None,
                 on_started_leading=None, on_stopped_leading=None, on_new_leader=None,
                 log=None):
        self.dsn = dsn
        self.election = election
        self.candidate = candidate
        self.value = value
        self.ttl = float(ttl)
        self.renew_deadline = renew_deadline if renew_deadline is not None else self.ttl * 2 / 3
        self.renew_every = renew_every if renew_every is not None else self.ttl / 3
        self.retry_period = retry_period if retry_period is not None else self.ttl / 2
        self.call_timeout = call_timeout if call_timeout is not None else self.ttl / 4
        self.watch_wait = watch_wait if watch_wait is not None else max(self.ttl, 1.0)
        if not 0 < self.renew_every < self.renew_deadline < self.ttl:
            raise ValueError("need 0 < renew_every < renew_deadline < ttl")
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._logf = log
        self.stopped = threading.Event()
        self.current = None
        self.error = None
        self._conn = DeadlineConnection(dsn, "fencing_leader keepalive")

    def _log(self, event, **fields):
        if self._logf:
            self._logf(event, **fields)

    # ---- the loop ---------------------------------------------------------

    def run(self):
        """Block: campaign, lead, and campaign again after a loss, until stop()."""
        if self.on_new_leader:
            threading.Thread(target=self._observe, daemon=True).start()
        while not self.stopped.is_set():
            lead = self._campaign()
            if lead is None:
                continue
            self.current = lead
            self._log("leading", token=lead.token)
            watch = threading.Thread(target=self._watch, args=(lead,), daemon=True)
            watch.start()
            if self.on_started_leading:
                threading.Thread(target=self.on_started_leading, args=(lead,),
                                 daemon=True).start()
            self._keepalive(lead)
            if self.on_stopped_leading:
                self.on_stopped_leading(lead)
        self._conn.close()
        if self.error is not None:
            raise self.error

    def stop(self):
        """Stop campaigning; a leader resigns (best effort, within call_timeout)."""
        self.stopped.set()

    def _fatal(self, e, lead=None):
        """An error no retry changes: stop, and let run() raise it."""
        self._log("fatal", error=_describe(e))
        self.error = ElectionError(e.pgcode, _describe(e))
        if lead is not None:
            lead.lose("error")
        self.stopped.set()

    def _campaign(self):
        t0 = time.monotonic()
        try:
            rows = self._conn.query(
                "SELECT fencing.election_campaign(%s, %s, %s, %s::interval, wait => %s::interval)",
                (self.election, self.candidate, self.value, _secs(self.ttl),
                 _secs(self.retry_period)),
                timeout=self.retry_period + self.call_timeout)
        except (DeadlineExceeded, psycopg2.Error) as e:
            action = sqlstate_action(getattr(e, "pgcode", None))
            if action == "fatal":
                self._fatal(e)
                return None
            self._log("campaign_error", error=_describe(e))
            self.stopped.wait(self.retry_period if action == "retry" else self.call_timeout)
            return None
        token = rows[0][0]
        if token is None:
            return None
        # the lease expires ttl after the grant, which came after t0
        return Leadership(self, token, t0 + self.renew_deadline)

    def _keepalive(self, lead):
        last_ok = lead.trusted_until - self.renew_deadline
        while not lead.lost.is_set():
            if self.stopped.is_set():
                self._resign(lead)
                return
            next_at = last_ok + self.renew_every
            now = time.monotonic()
            if now < next_at:
                # wake for the renew, at once when the watch saw the loss,
                # and now and then to notice stop()
                lead.lost.wait(min(next_at - now, 0.2))
                continue
            if now >= lead.trusted_until:
                # stop now; then ask whether the server knows more (a successor)
                lead.lose("renew_deadline")
                reason, successor = self._why(lead, self.call_timeout / 2)
                if reason not in ("current", "unknown"):
                    lead.reason, lead.successor = reason, successor
                break
            try:
                rows = self._conn.query(
                    "SELECT fencing.lease_renew(%s, %s, %s::interval)",
                    (self.election, lead.token, _secs(self.ttl)),
                    timeout=min(self.call_timeout, lead.trusted_until - now))
            except DeadlineExceeded:
                self._log("renew_timeout", token=lead.token)
                continue
            except psycopg2.Error as e:
                action = sqlstate_action(e.pgcode)
                if action == "lost":
                    lead.lose(LOST[e.pgcode])
                    break
                if action == "fatal":
                    self._fatal(e, lead)
                    break
                self._log("renew_error", token=lead.token, error=_describe(e))
                lead.lost.wait(min(self.renew_every / 4, max(lead.trusted_until - now, 0)))
                continue
            if rows[0][0]:
                last_ok = now
                lead.trusted_until = now + self.renew_deadline
                continue
            reason, successor = self._why(lead)
            lead.lose(reason, successor)

    def _why(self, lead, timeout=None):
        """lease_watch(name, token, '0'): why this token is no longer current."""
        try:
            rows = self._conn.query("SELECT reason, successor FROM fencing.lease_watch(%s, %s)",
                                    (self.election, lead.token),
                                    timeout=timeout or self.call_timeout)
            return rows[0][0], rows[0][1]
        except (DeadlineExceeded, psycopg2.Error) as e:
            self._log("watch_error", token=lead.token, error=_describe(e))
            return "unknown", None

    def _watch(self, lead):
        """The second connection: a blocking lease_watch, in a loop."""
        conn = DeadlineConnection(self.dsn, "fencing_leader watch")
        try:
            while not lead.lost.is_set():
                try:
                    rows = conn.query(
                        "SELECT reason, successor FROM fencing.lease_watch(%s, %s, %s::interval)",
                        (self.election, lead.token, _secs(self.watch_wait)),
                        timeout=self.watch_wait + self.call_timeout)
                except DeadlineExceeded:
                    continue
                except psycopg2.Error as e:
                    action = sqlstate_action(e.pgcode)
                    if action == "lost":
                        lead.lose(LOST[e.pgcode])
                        break
                    if action == "fatal":
                        self._fatal(e, lead)
                        break
                    lead.lost.wait(self.call_timeout)
                    continue
                reason, successor = rows[0]
                if reason != "current":
                    lead.lose(reason, successor)
        finally:
            conn.close()

    def _resign(self, lead):
        # stopped first: the work stops while the lease is still held, and
        # the watcher, woken by the resignation, finds the reason set
        lead.lose("stopped")
        try:
            self._conn.query("SELECT fencing.election_resign(%s, %s)",
                             (self.election, lead.token), timeout=self.call_timeout)
        except (DeadlineExceeded, psycopg2.Error) as e:
            self._log("resign_error", token=lead.token, error=_describe(e))

    def _observe(self):
        try:
            for leader in observe(self.dsn, self.election, self.watch_wait, self.call_timeout,
                                  stopped=self.stopped, log=self._log):
                self.on_new_leader(*leader)
        except ElectionError as e:
            self._log("fatal", error=str(e))
            self.error = e
            if self.current is not None:
                self.current.lose("error")
            self.stopped.set()


def observe(dsn, election, wait=10.0, call_timeout=2.5, stopped=None, log=None):
    """Yield (candidate, value, token) each time the leadership differs from
    what was seen last ((None, None, None): no leader), starting with the
    current one.  election_observe blocks in the server until a change
    (expiry included), so this does not poll; each call passes on what the
    last one returned, so it survives reconnects and recycled connections.
    Raises ElectionError on a FATAL SQLSTATE (LF021: the name is a lease)."""
    conn = DeadlineConnection(dsn, "fencing_leader observe")
    known = None
    try:
        while stopped is None or not stopped.is_set():
            token, value = (known[2], known[1]) if known else (None, None)
            try:
                rows = conn.query(
                    "SELECT candidate, value, token FROM"
                    " fencing.election_observe(%s, %s, %s, %s::interval)",
                    (election, token, value, _secs(wait if known else 0)),
                    timeout=wait + call_timeout)
            except (DeadlineExceeded, psycopg2.Error) as e:
                if sqlstate_action(getattr(e, "pgcode", None)) == "fatal":
                    raise ElectionError(e.pgcode, _describe(e))
                if log:
                    log("observe_error", error=_describe(e))
                if stopped is not None:
                    stopped.wait(call_timeout)
                else:
                    time.sleep(call_timeout)
                continue
            seen = tuple(rows[0])
            if seen != known:
                known = seen
                yield seen
    finally:
        conn.close()


def _describe(e):
    if isinstance(e, DeadlineExceeded):
        return "deadline exceeded"
    code = getattr(e, "pgcode", None)
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return "%s %s" % (code, text) if code else text
