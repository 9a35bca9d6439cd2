/*
 * worker.c: the fencing story with libpq, two workers in one process.
 *
 *     make -C examples/c
 *     examples/c/worker ['host=/tmp port=5432 dbname=app']
 *
 * Worker A takes the lease "demo-c" for one second and writes row 1 of the
 * table demo_c with its token.  A "pauses" (a GC pause, a frozen VM) while
 * worker B asks for the lease, waiting until A's lease runs out, and writes
 * row 1 with its newer token.  A wakes up and writes again with its old
 * token: the write is refused with SQLSTATE LF001, and B's write stands.
 *
 * The write puts fencing.fence_advance(fence, token) in the SET list, so a
 * stale token is an error (LF001), never a silent "0 rows", and
 * fencing.expect_rows raises LF003 if the row does not exist.  A worker
 * tells a refusal from other errors by the SQLSTATE (PG_DIAG_SQLSTATE).
 *
 * Every call has a client-side deadline (docs/ha.md): a frozen server keeps
 * the connection open, statement_timeout runs on the server and does not
 * fire, and TCP keepalives are answered by the kernel.  So each statement
 * is sent asynchronously and waited for with poll() until its deadline;
 * when it passes, the worker drops the connection and treats its lease as
 * lost (exit 2).  A holder's deadline must be shorter than its lease; the
 * demo's one-second lease only keeps the story short, so its deadlines
 * (CALL_DEADLINE_S, and a lease_acquire's wait on top) are the generous
 * ones a loaded machine needs.
 *
 * Connects with the conninfo given as the only argument, else with libpq's
 * environment (PGHOST, PGPORT, PGDATABASE, PGUSER, ...), within
 * connect_timeout.  The database needs CREATE EXTENSION fencing; the demo
 * (re)creates its table demo_c.  Exits 0 when the story went as told, 1
 * otherwise, 2 when a call outlived its deadline.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#define LEASE "demo-c"
#define TABLE "demo_c"
#if defined(__GNUC__)
#define pg_attribute_printf(f, a) __attribute__((format(printf, f, a)))
#else
#define pg_attribute_printf(f, a)
#endif

#define STALE_TOKEN "LF001"		/* fence_advance: older than the row's fence */
#ifndef CALL_DEADLINE_S
#define CALL_DEADLINE_S 20		/* every call's deadline, in seconds */
#endif
#define EXIT_DEADLINE 2

typedef struct Worker
{
	const char *name;
	PGconn	   *conn;
	char		token[32];		/* as text: what the client carries */
} Worker;

static void say(const char *who, const char *fmt,...) pg_attribute_printf(2, 3);

static void
say(const char *who, const char *fmt,...)
{
	va_list		ap;

	printf("[%s] ", who);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void
die(Worker *w, const char *what, PGresult *res)
{
	fprintf(stderr, "[%s] %s failed: %s", w->name, what,
			res ? PQresultErrorMessage(res) : PQerrorMessage(w->conn));
	exit(1);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * A statement with text parameters, sent asynchronously and waited for
 * until "seconds" have passed; its (last) result, which the caller clears.
 * A call that outlives its deadline drops the connection: the worker
 * cannot tell whether it ran, and must treat its lease as lost.
 */
static PGresult *
run_within(Worker *w, double seconds, const char *sql, int nparams,
		   const char *const *params)
{
	double		deadline = now_s() + seconds;
	PGresult   *last = NULL;

	if (!PQsendQueryParams(w->conn, sql, nparams, NULL, params, NULL, NULL, 0))
		die(w, sql, NULL);
	for (;;)
	{
		struct pollfd pfd;
		double		left;
		int			rc;

		if (!PQconsumeInput(w->conn))
			die(w, sql, NULL);
		while (!PQisBusy(w->conn))
		{
			PGresult   *res = PQgetResult(w->conn);

			if (res == NULL)
				return last;
			PQclear(last);
			last = res;
		}
		left = deadline - now_s();
		if (left <= 0)
		{
			fprintf(stderr, "[%s] no answer within %g s: connection dropped, the lease is treated as lost\n",
					w->name, seconds);
			PQfinish(w->conn);
			exit(EXIT_DEADLINE);
		}
		pfd.fd = PQsocket(w->conn);
		pfd.events = POLLIN;
		rc = poll(&pfd, 1, (int) (left * 1000) + 1);
		if (rc < 0 && errno != EINTR)
			die(w, "poll", NULL);
	}
}

static PGresult *
run(Worker *w, const char *sql, int nparams, const char *const *params)
{
	return run_within(w, CALL_DEADLINE_S, sql, nparams, params);
}

static void
run_ok(Worker *w, const char *sql)
{
	PGresult   *res = run(w, sql, 0, NULL);

	if (PQresultStatus(res) != PGRES_COMMAND_OK &&
		PQresultStatus(res) != PGRES_TUPLES_OK)
		die(w, sql, res);
	PQclear(res);
}

/*
 * lease_acquire: 1 with w->token set, 0 if another holder's lease is live.
 * The server may wait wait_s seconds for the lease: the call's deadline
 * comes on top of that.
 */
static int
acquire(Worker *w, const char *ttl, int wait_s)
{
	char		wait[32];
	const char *params[4] = {LEASE, w->name, ttl, wait};
	PGresult   *res;

	snprintf(wait, sizeof(wait), "%d seconds", wait_s);
	res = run_within(w, CALL_DEADLINE_S + wait_s,
					 "SELECT fencing.lease_acquire($1, $2, $3::interval, wait => $4::interval)",
					 4, params);
	int			got;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die(w, "lease_acquire", res);
	got = !PQgetisnull(res, 0, 0);
	if (got)
		snprintf(w->token, sizeof(w->token), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return got;
}

/*
 * Write row 1 with the worker's token.  Returns NULL when the write went
 * through, else the error's result (the caller reads its SQLSTATE and
 * clears it).
 */
static PGresult *
fenced_write(Worker *w, const char *body)
{
	const char *params[2] = {body, w->token};
	PGresult   *res = run(w,
						  "WITH w AS (UPDATE " TABLE
						  "              SET body = $1, fence = fencing.fence_advance(fence, $2::bigint)"
						  "            WHERE id = 1 RETURNING 1)"
						  " SELECT fencing.expect_rows(count(*)) FROM w",
						  2, params);

	if (PQresultStatus(res) == PGRES_TUPLES_OK)
	{
		PQclear(res);
		return NULL;
	}
	return res;
}

static void
connect_worker(Worker *w, const char *name, const char *conninfo)
{
	/* the conninfo's settings, then a connect_timeout over them */
	const char *keywords[] = {"dbname", "connect_timeout", NULL};
	const char *values[] = {conninfo, "10", NULL};

	w->name = name;
	w->token[0] = '\0';
	w->conn = PQconnectdbParams(keywords, values, 1);
	if (PQstatus(w->conn) != CONNECTION_OK)
		die(w, "connection", NULL);
}

int
main(int argc, char **argv)
{
	const char *conninfo = argc > 1 ? argv[1] : "";
	Worker		a;
	Worker		b;
	Worker		setup;
	PGresult   *res;
	int			ok = 1;

	connect_worker(&a, "A", conninfo);
	connect_worker(&b, "B", conninfo);
	setup = a;
	setup.name = "setup";

	run_ok(&setup, "SET client_min_messages = warning");
	run_ok(&setup, "DROP TABLE IF EXISTS " TABLE);
	run_ok(&setup, "CREATE TABLE " TABLE " (id int PRIMARY KEY, body text, fence bigint)");
	run_ok(&setup, "INSERT INTO " TABLE " VALUES (1, 'empty', NULL)");
	say("setup", "table %s ready, lease %s", TABLE, LEASE);

	if (!acquire(&a, "1 second", 0))
	{
		say("A", "the lease is held by someone else; run the demo again later");
		return 1;
	}
	say("A", "acquired lease %s: token %s (ttl 1 s)", LEASE, a.token);
	if ((res = fenced_write(&a, "written by A")) != NULL)
		die(&a, "write", res);
	say("A", "wrote row 1 with token %s", a.token);
	say("A", "pauses (a GC pause): its lease runs out meanwhile");

	if (!acquire(&b, "30 seconds", 10))
	{
		say("B", "did not get the lease within 10 s");
		return 1;
	}
	say("B", "acquired lease %s: token %s (after waiting for A's lease to expire)",
		LEASE, b.token);
	if ((res = fenced_write(&b, "written by B")) != NULL)
		die(&b, "write", res);
	say("B", "wrote row 1 with token %s", b.token);

	say("A", "wakes up and writes row 1 with token %s", a.token);
	res = fenced_write(&a, "late write by A");
	if (res == NULL)
	{
		say("A", "write ACCEPTED: the stale write went through (this must not happen)");
		ok = 0;
	}
	else
	{
		const char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
		const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);

		if (sqlstate == NULL || strcmp(sqlstate, STALE_TOKEN) != 0)
			die(&a, "write", res);
		printf("[A] write REFUSED: %s %s (%s)\n", sqlstate, primary ? primary : "",
			   detail ? detail : "");
		PQclear(res);
	}

	{
		const char *params[2] = {LEASE, a.token};

		res = run(&a, "SELECT fencing.lease_renew($1, $2::bigint, '30 seconds')", 2, params);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die(&a, "lease_renew", res);
		say("A", "renew with token %s: %s; stopping", a.token,
			strcmp(PQgetvalue(res, 0, 0), "t") == 0 ? "renewed" : "lost the lease");
		if (strcmp(PQgetvalue(res, 0, 0), "f") != 0)
			ok = 0;
		PQclear(res);
	}

	res = run(&b, "SELECT body, fence FROM " TABLE " WHERE id = 1", 0, NULL);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die(&b, "read", res);
	printf("[result] row 1 = '%s', fence %s\n", PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
	if (strcmp(PQgetvalue(res, 0, 0), "written by B") != 0 ||
		strcmp(PQgetvalue(res, 0, 1), b.token) != 0 ||
		strtoll(b.token, NULL, 10) <= strtoll(a.token, NULL, 10))
		ok = 0;
	PQclear(res);

	{
		const char *params[2] = {LEASE, b.token};

		res = run(&b, "SELECT fencing.lease_release($1, $2::bigint)", 2, params);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die(&b, "lease_release", res);
		PQclear(res);
	}

	PQfinish(a.conn);
	PQfinish(b.conn);
	puts(ok ? "OK: the stale write was refused" : "FAILED: the story did not go as told");
	return ok ? 0 : 1;
}
