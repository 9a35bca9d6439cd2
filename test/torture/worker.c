/*
 * worker.c: one torture worker for the fencing extension.
 *
 * Loops over random leases 'lease_0'..'lease_{M-1}': acquires one, makes
 * 1-3 fenced writes to the matching row of torture_resource with the token,
 * sometimes renews, sometimes sleeps (now and then for longer than the TTL),
 * then releases the lease or just walks away and lets it expire.  Every
 * request is one "op".  Every attempt and every outcome is appended to a
 * JSON-lines history file, one write(2) per line, so a SIGKILL loses at most
 * the line being formatted; each line carries CLOCK_MONOTONIC nanoseconds,
 * which is one clock for all processes on the machine (the driver and the
 * checker use it too).
 *
 * Outcomes:
 *   "ok"    the server answered with success (for a write: committed)
 *   "fail"  the server answered ERROR and the connection is fine: the
 *           transaction did not commit.  LF001 carries the row's fence
 *           parsed from the error detail.
 *   "info"  anything else (connection lost, FATAL, crash shutdown): the
 *           request may or may not have taken effect.
 * An attempt with no outcome line at all (the worker was killed) is
 * indeterminate too.
 *
 * usage: worker --conn CONNINFO --id N --inc K --ops N --leases M
 *               --hist FILE [--seed S] [--deadline-ns T] [--fence MODE]
 *               [--sync on|off] [--ttl-min MS] [--ttl-max MS]
 *               [--sleep-max MS] [--long-sleep-pct P]
 * MODE: guard    SET fence = $tok; the BEFORE trigger fence_guard checks
 *       advance  SET fence = fencing.fence_advance(fence, $tok, true)
 *       mixed    either, at random per write (the table has the trigger)
 *       none     SET fence = $tok on a table without the trigger: the
 *                negative control, stale writes are accepted
 * A session's second and third writes also declare the token, as SET LOCAL
 * fencing.token does: they leave the fence as it was, which fence_guard
 * judges by the declared token (without one it refuses them, LF004).
 *
 * Exit: 0 done (op budget or deadline), 2 usage, 1 I/O error on the history.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

enum fence_mode
{
	FENCE_GUARD,
	FENCE_ADVANCE,
	FENCE_MIXED,
	FENCE_NONE
};

static const char *conninfo;
static int	worker_id = -1;
static int	incarnation = 0;
static long ops_budget = -1;
static int	nleases = -1;
static const char *hist_path;
static uint64_t seed = 1;
static int64_t deadline_ns = 0;
static enum fence_mode fence_mode = FENCE_MIXED;
static bool sync_on = true;
static int	ttl_min = 200;
static int	ttl_max = 500;
static int	sleep_max = 20;
static int	long_sleep_pct = 5;

static int	hist_fd = -1;
static char holder[32];
static PGconn *conn;
static long ops_done = 0;
static long op_seq = 0;
static uint64_t rng;

/* ---- time, randomness ---- */

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t
rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * UINT64_C(2685821657736338717);
}

/* uniform in [lo, hi] */
static int
rnd_range(int lo, int hi)
{
	return lo + (int) (rnd() % (uint64_t) (hi - lo + 1));
}

static bool
chance(int pct)
{
	return (int) (rnd() % 100) < pct;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static bool
past_deadline(void)
{
	return deadline_ns > 0 && mono_ns() >= deadline_ns;
}

/* ---- history ---- */

static void
hist_write(const char *buf, size_t len)
{
	while (len > 0)
	{
		ssize_t		n = write(hist_fd, buf, len);

		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			perror("history write");
			exit(1);
		}
		buf += n;
		len -= (size_t) n;
	}
}

/* append s to buf as a JSON string (with quotes) */
static size_t
json_str(char *buf, size_t size, const char *s)
{
	size_t		n = 0;

	if (size < 3)
		return 0;
	buf[n++] = '"';
	for (; s && *s && n + 8 < size; s++)
	{
		unsigned char c = (unsigned char) *s;

		if (c == '"' || c == '\\')
		{
			buf[n++] = '\\';
			buf[n++] = (char) c;
		}
		else if (c < 0x20)
			n += (size_t) snprintf(buf + n, size - n, "\\u%04x", c);
		else
			buf[n++] = (char) c;
	}
	buf[n++] = '"';
	buf[n] = '\0';
	return n;
}

/*
 * One history line: {"t":..,"w":"wN.K","ev":ev, <fields>}.  fields is a
 * printf format producing the rest of the object (starting with ',') or "".
 */
static void
hist(const char *ev, const char *fmt,...)
{
	char		line[2048];
	int			n;
	va_list		ap;

	n = snprintf(line, sizeof(line), "{\"t\":%" PRId64 ",\"w\":\"%s\",\"ev\":\"%s\"",
				 mono_ns(), holder, ev);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t) n - 3, fmt, ap);
	va_end(ap);
	if (n > (int) sizeof(line) - 3)
		n = (int) sizeof(line) - 3;
	line[n++] = '}';
	line[n++] = '\n';
	hist_write(line, (size_t) n);
}

/* ---- the connection ---- */

static const char *const SQL_ACQUIRE =
"SELECT fencing.lease_acquire($1, $2, $3::int * interval '1 millisecond')";
static const char *const SQL_RENEW =
"SELECT fencing.lease_renew($1, $2::bigint, $3::int * interval '1 millisecond')";
static const char *const SQL_RELEASE =
"SELECT fencing.lease_release($1, $2::bigint)";
/*
 * guard, and the negative control: the token goes straight into the row.
 * $5 is the declared token, or '' for none: set_config(..., true) is SET
 * LOCAL for the statement's own transaction, run by the WHERE clause
 * before the row reaches the trigger, and the write stays one round trip.
 */
static const char *const SQL_WRITE_PLAIN =
"UPDATE torture_resource SET fence = $2::bigint, value = $3, writer = $4"
" WHERE id = $1::int"
"   AND pg_catalog.set_config('fencing.token', $5, true) IS NOT NULL";
static const char *const SQL_WRITE_ADVANCE =
"UPDATE torture_resource"
"   SET fence = fencing.fence_advance(fence, $2::bigint, true),"
"       value = $3, writer = $4"
" WHERE id = $1::int"
"   AND pg_catalog.set_config('fencing.token', $5, true) IS NOT NULL";

/* server notices (a crash shutdown sends a WARNING) go to the history */
static void
notice_to_history(void *arg, const char *message)
{
	char		msg[600];

	(void) arg;
	json_str(msg, sizeof(msg), message);
	hist("notice", ",\"msg\":%s", msg);
}

static void
drop_conn(void)
{
	if (conn)
		PQfinish(conn);
	conn = NULL;
}

static bool
prepare(const char *name, const char *sql)
{
	PGresult   *res = PQprepare(conn, name, sql, 0, NULL);
	bool		ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
	{
		char		msg[600];

		json_str(msg, sizeof(msg), PQerrorMessage(conn));
		hist("connect", ",\"ok\":false,\"msg\":%s", msg);
	}
	PQclear(res);
	return ok;
}

/* connect, set up the session and prepare; false if the deadline passed */
static bool
ensure_conn(void)
{
	int			backoff = 20;

	while (conn == NULL)
	{
		if (past_deadline())
			return false;
		conn = PQconnectdb(conninfo);
		if (PQstatus(conn) == CONNECTION_OK)
		{
			PQsetNoticeProcessor(conn, notice_to_history, NULL);
			PGresult   *res = PQexec(conn, sync_on ? "SET synchronous_commit = on"
								 : "SET synchronous_commit = off");
			bool		ok = PQresultStatus(res) == PGRES_COMMAND_OK;

			PQclear(res);
			if (ok &&
				prepare("acquire", SQL_ACQUIRE) &&
				prepare("renew", SQL_RENEW) &&
				prepare("release", SQL_RELEASE) &&
				prepare("write_plain", SQL_WRITE_PLAIN) &&
				prepare("write_advance", SQL_WRITE_ADVANCE))
			{
				hist("connect", ",\"ok\":true,\"backend\":%d", PQbackendPID(conn));
				return true;
			}
		}
		else
		{
			char		msg[600];

			json_str(msg, sizeof(msg), PQerrorMessage(conn));
			hist("connect", ",\"ok\":false,\"msg\":%s", msg);
		}
		drop_conn();
		sleep_ms(backoff);
		if (backoff < 400)
			backoff *= 2;
	}
	return true;
}

/* ---- requests ---- */

typedef enum
{
	OUT_OK,
	OUT_FAIL,
	OUT_INFO
} Outcome;

typedef struct
{
	Outcome		outcome;
	PGresult   *res;			/* for OUT_OK and OUT_FAIL, else NULL */
	char		sqlstate[6];
	char		msg[700];		/* JSON-quoted message, for FAIL and INFO */
} Reply;

static void
run(const char *stmt, int nparams, const char *const *params, Reply *r)
{
	PGresult   *res;
	ExecStatusType st;

	ops_done++;
	memset(r, 0, sizeof(*r));
	res = PQexecPrepared(conn, stmt, nparams, params, NULL, NULL, 0);
	st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
	{
		r->outcome = OUT_OK;
		r->res = res;
		return;
	}
	if (res)
	{
		const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

		if (code)
			snprintf(r->sqlstate, sizeof(r->sqlstate), "%s", code);
		json_str(r->msg, sizeof(r->msg), PQresultErrorMessage(res));
		/* a plain ERROR on a healthy connection: the transaction aborted */
		if (st == PGRES_FATAL_ERROR && sev && strcmp(sev, "ERROR") == 0 &&
			PQstatus(conn) == CONNECTION_OK && code)
		{
			r->outcome = OUT_FAIL;
			r->res = res;
			return;
		}
		PQclear(res);
	}
	else
		json_str(r->msg, sizeof(r->msg), PQerrorMessage(conn));
	r->outcome = OUT_INFO;
	drop_conn();
}

static void
report_error(const char *op, const char *id, Reply *r)
{
	hist(r->outcome == OUT_FAIL ? "fail" : "info",
		 ",\"op\":\"%s\",\"id\":\"%s\",\"code\":\"%s\",\"msg\":%s",
		 op, id, r->sqlstate, r->msg[0] ? r->msg : "\"\"");
	if (r->res)
		PQclear(r->res);
}

static void
next_opid(char *buf, size_t size)
{
	snprintf(buf, size, "%s-%ld", holder, ++op_seq);
}

/* acquire: the token, 0 when refused, -1 on error */
static int64_t
do_acquire(const char *lease, int ttl)
{
	char		id[96];
	char		ttlbuf[16];
	const char *params[3] = {lease, holder, ttlbuf};
	Reply		r;
	int64_t		token;

	next_opid(id, sizeof(id));
	snprintf(ttlbuf, sizeof(ttlbuf), "%d", ttl);
	hist("invoke", ",\"op\":\"acquire\",\"id\":\"%s\",\"lease\":\"%s\",\"ttl_ms\":%d",
		 id, lease, ttl);
	run("acquire", 3, params, &r);
	if (r.outcome != OUT_OK)
	{
		report_error("acquire", id, &r);
		return -1;
	}
	if (PQgetisnull(r.res, 0, 0))
	{
		hist("ok", ",\"op\":\"acquire\",\"id\":\"%s\",\"token\":null", id);
		token = 0;
	}
	else
	{
		token = strtoll(PQgetvalue(r.res, 0, 0), NULL, 10);
		hist("ok", ",\"op\":\"acquire\",\"id\":\"%s\",\"token\":%" PRId64, id, token);
	}
	PQclear(r.res);
	return token;
}

/* renew or release: 1 true, 0 false, -1 error */
static int
do_bool(const char *op, const char *lease, int64_t token, int ttl)
{
	char		id[96];
	char		tokbuf[24];
	char		ttlbuf[16];
	const char *params[3] = {lease, tokbuf, ttlbuf};
	Reply		r;
	int			v;

	next_opid(id, sizeof(id));
	snprintf(tokbuf, sizeof(tokbuf), "%" PRId64, token);
	snprintf(ttlbuf, sizeof(ttlbuf), "%d", ttl);
	if (ttl > 0)
		hist("invoke", ",\"op\":\"%s\",\"id\":\"%s\",\"lease\":\"%s\",\"token\":%" PRId64 ",\"ttl_ms\":%d",
			 op, id, lease, token, ttl);
	else
		hist("invoke", ",\"op\":\"%s\",\"id\":\"%s\",\"lease\":\"%s\",\"token\":%" PRId64,
			 op, id, lease, token);
	run(op, ttl > 0 ? 3 : 2, params, &r);
	if (r.outcome != OUT_OK)
	{
		report_error(op, id, &r);
		return -1;
	}
	v = strcmp(PQgetvalue(r.res, 0, 0), "t") == 0;
	hist("ok", ",\"op\":\"%s\",\"id\":\"%s\",\"value\":%s", op, id, v ? "true" : "false");
	PQclear(r.res);
	return v;
}

/* the fence value in LF001's detail: "... already written with token N." */
static long long
stale_fence(PGresult *res)
{
	const char *d = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	const char *p = d ? strstr(d, "with token ") : NULL;

	return p ? strtoll(p + strlen("with token "), NULL, 10) : -1;
}

/*
 * write: 1 accepted, 0 refused as stale, -1 other error; "declare": the
 * token is declared as well (a write the session repeats)
 */
static int
do_write(int resource, int64_t token, bool declare)
{
	char		id[96];
	char		resbuf[16];
	char		tokbuf[24];
	const char *params[5] = {resbuf, tokbuf, id, holder, NULL};
	const char *path;
	Reply		r;
	long		rows;

	switch (fence_mode)
	{
		case FENCE_GUARD:
			path = "guard";
			break;
		case FENCE_ADVANCE:
			path = "advance";
			break;
		case FENCE_NONE:
			path = "none";
			break;
		default:
			path = chance(50) ? "guard" : "advance";
			break;
	}
	next_opid(id, sizeof(id));
	snprintf(resbuf, sizeof(resbuf), "%d", resource);
	snprintf(tokbuf, sizeof(tokbuf), "%" PRId64, token);
	params[4] = declare ? tokbuf : "";
	hist("invoke", ",\"op\":\"write\",\"id\":\"%s\",\"resource\":%d,\"token\":%" PRId64 ",\"path\":\"%s\",\"declared\":%s",
		 id, resource, token, path, declare ? "true" : "false");
	run(strcmp(path, "advance") == 0 ? "write_advance" : "write_plain", 5,
		params, &r);
	if (r.outcome == OUT_FAIL && strcmp(r.sqlstate, "LF001") == 0)
	{
		hist("fail", ",\"op\":\"write\",\"id\":\"%s\",\"code\":\"LF001\",\"fence\":%lld",
			 id, stale_fence(r.res));
		PQclear(r.res);
		return 0;
	}
	if (r.outcome != OUT_OK)
	{
		report_error("write", id, &r);
		return -1;
	}
	rows = strtol(PQcmdTuples(r.res), NULL, 10);
	PQclear(r.res);
	if (rows != 1)
	{
		hist("fail", ",\"op\":\"write\",\"id\":\"%s\",\"code\":\"rows\",\"rows\":%ld", id, rows);
		return -1;
	}
	hist("ok", ",\"op\":\"write\",\"id\":\"%s\"", id);
	return 1;
}

/* sleep, usually briefly; now and then for longer than the lease's TTL */
static void
maybe_sleep(int ttl)
{
	int			ms;

	if (chance(long_sleep_pct))
		ms = rnd_range(ttl + ttl / 5, 2 * ttl);
	else if (chance(50) && sleep_max > 0)
		ms = rnd_range(1, sleep_max);
	else
		return;
	hist("sleep", ",\"ms\":%d", ms);
	sleep_ms(ms);
}

static bool
more_ops(void)
{
	return ops_done < ops_budget && !past_deadline();
}

/* one lease session: acquire, 1-3 writes, renewals, sleeps, the end */
static void
session(void)
{
	int			li = rnd_range(0, nleases - 1);
	char		lease[32];
	int			ttl = rnd_range(ttl_min, ttl_max);
	int64_t		token;
	int			writes;
	bool		repeat = false;

	snprintf(lease, sizeof(lease), "lease_%d", li);
	token = do_acquire(lease, ttl);
	if (token <= 0)
	{
		/* held by someone else, or an error: back off a little */
		if (sleep_max > 0)
			sleep_ms(rnd_range(0, sleep_max));
		return;
	}

	writes = rnd_range(1, 3);
	while (writes > 0 && more_ops())
	{
		int			rc;

		maybe_sleep(ttl);
		if (!more_ops() || !ensure_conn())
			return;
		if (chance(20))
		{
			rc = do_bool("renew", lease, token, ttl);
			if (rc != 1)
				return;			/* lost the lease, or an error: stop */
			continue;
		}
		rc = do_write(li, token, repeat);
		if (rc != 1)
			return;				/* refused: a newer holder exists; stop */
		repeat = true;
		writes--;
	}
	if (!more_ops() || !ensure_conn())
		return;
	maybe_sleep(ttl);
	if (!more_ops() || !ensure_conn())
		return;
	if (chance(50))
		(void) do_bool("release", lease, token, 0);
	else
		hist("abandon", ",\"lease\":\"%s\",\"token\":%" PRId64, lease, token);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: worker --conn CONNINFO --id N --inc K --ops N --leases M --hist FILE\n"
			"              [--seed S] [--deadline-ns T] [--fence guard|advance|mixed|none]\n"
			"              [--sync on|off] [--ttl-min MS] [--ttl-max MS]\n"
			"              [--sleep-max MS] [--long-sleep-pct P]\n");
	exit(2);
}

static long long
num_arg(const char *s)
{
	char	   *end;
	long long	v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s)
		usage();
	return v;
}

int
main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
	{
		const char *a = argv[i];
		const char *v;

		if (i + 1 >= argc)
			usage();
		v = argv[++i];
		if (strcmp(a, "--conn") == 0)
			conninfo = v;
		else if (strcmp(a, "--id") == 0)
			worker_id = (int) num_arg(v);
		else if (strcmp(a, "--inc") == 0)
			incarnation = (int) num_arg(v);
		else if (strcmp(a, "--ops") == 0)
			ops_budget = (long) num_arg(v);
		else if (strcmp(a, "--leases") == 0)
			nleases = (int) num_arg(v);
		else if (strcmp(a, "--hist") == 0)
			hist_path = v;
		else if (strcmp(a, "--seed") == 0)
			seed = (uint64_t) num_arg(v);
		else if (strcmp(a, "--deadline-ns") == 0)
			deadline_ns = (int64_t) num_arg(v);
		else if (strcmp(a, "--ttl-min") == 0)
			ttl_min = (int) num_arg(v);
		else if (strcmp(a, "--ttl-max") == 0)
			ttl_max = (int) num_arg(v);
		else if (strcmp(a, "--sleep-max") == 0)
			sleep_max = (int) num_arg(v);
		else if (strcmp(a, "--long-sleep-pct") == 0)
			long_sleep_pct = (int) num_arg(v);
		else if (strcmp(a, "--sync") == 0)
		{
			if (strcmp(v, "on") == 0)
				sync_on = true;
			else if (strcmp(v, "off") == 0)
				sync_on = false;
			else
				usage();
		}
		else if (strcmp(a, "--fence") == 0)
		{
			if (strcmp(v, "guard") == 0)
				fence_mode = FENCE_GUARD;
			else if (strcmp(v, "advance") == 0)
				fence_mode = FENCE_ADVANCE;
			else if (strcmp(v, "mixed") == 0)
				fence_mode = FENCE_MIXED;
			else if (strcmp(v, "none") == 0)
				fence_mode = FENCE_NONE;
			else
				usage();
		}
		else
			usage();
	}
	if (!conninfo || worker_id < 0 || ops_budget < 0 || nleases < 1 ||
		!hist_path || ttl_min < 1 || ttl_max < ttl_min || sleep_max < 0 ||
		long_sleep_pct < 0 || long_sleep_pct > 100)
		usage();

	snprintf(holder, sizeof(holder), "w%d.%d", worker_id, incarnation);
	rng = seed * UINT64_C(0x9E3779B97F4A7C15) ^
		((uint64_t) worker_id << 32) ^ (uint64_t) incarnation ^ UINT64_C(0x2545F4914F6CDD1D);
	if (rng == 0)
		rng = 1;

	hist_fd = open(hist_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (hist_fd < 0)
	{
		perror(hist_path);
		return 1;
	}
	hist("start", ",\"pid\":%d,\"id\":%d,\"inc\":%d,\"ops\":%ld,\"fence\":\"%s\",\"sync\":%s",
		 (int) getpid(), worker_id, incarnation, ops_budget,
		 fence_mode == FENCE_GUARD ? "guard" :
		 fence_mode == FENCE_ADVANCE ? "advance" :
		 fence_mode == FENCE_NONE ? "none" : "mixed",
		 sync_on ? "true" : "false");

	while (more_ops())
	{
		if (!ensure_conn())
			break;
		session();
	}
	hist("stop", ",\"ops\":%ld", ops_done);
	drop_conn();
	close(hist_fd);
	return 0;
}
