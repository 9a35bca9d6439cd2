/*-------------------------------------------------------------------------
 *
 * fencing-lock.c
 *	  Run a command while holding a lease of the fencing extension.
 *
 *	  fencing-lock [OPTION]... NAME -- COMMAND [ARG]...
 *
 * Acquires lease NAME (fencing.lease_acquire), runs COMMAND with the token
 * in its environment (FENCING_TOKEN, FENCING_LEASE, FENCING_HOLDER),
 * renews the lease while COMMAND runs, and releases it when COMMAND ends.
 * When the lease is lost, or cannot be renewed before it could expire,
 * COMMAND is stopped: SIGTERM to it and every process it started, SIGKILL
 * after a grace period.  The exit statuses are listed in usage() and
 * docs/fencing-lock.md.
 *
 * Two processes do this.  The runner (the process that was started, whose
 * PID the caller knows) talks to the server, receives the signals and
 * exits with the status.  The supervisor, its child, starts COMMAND and
 * stops it.  The supervisor never calls libpq and never waits for output,
 * so nothing that blocks or stops the runner keeps COMMAND running past
 * its lease: a host name lookup inside libpq, a stderr nobody reads,
 * SIGSTOP.  The runner tells the supervisor of every renewal; the
 * supervisor stops COMMAND at the stop point by its own clock.  Either
 * process stops COMMAND should the other die: the supervisor when the
 * runner is gone, the runner (a subreaper, so the orphans come to it) when
 * the supervisor is.  Only both stopped at once (or the whole machine)
 * leave COMMAND running unsupervised: then the fenced writes are what
 * refuses it.
 *
 * Every call to the server has a deadline kept here, in the client: a
 * frozen or partitioned server never answers, and statement_timeout runs
 * on the server (docs/ha.md).  All timing uses a monotonic clock that also
 * counts time the machine spent suspended (CLOCK_BOOTTIME where there is
 * one), never the wall clock; both processes read the same clock.  Every
 * call is one statement in autocommit and nothing depends on the session,
 * so it works through pgbouncer in transaction mode.
 *
 * The lease's timeline, from the moment s at which the last renewal that
 * succeeded (or the acquisition) was sent, with T = --ttl,
 * R = --renew-every, D = --call-timeout, G = --grace, M = the kill margin
 * (T/20, at most 1 s):
 *
 *	 s + R			 the next renewal is sent; it is answered by s + R + D,
 *					 or counts as lost and is retried, on a new connection
 *					 if need be
 *	 s + T - M - G	 the stop point: not renewed by then, the lease counts
 *					 as lost, and COMMAND's processes get SIGTERM
 *	 s + T - M		 SIGKILL.  The server set the expiry at s + T or later
 *					 (the renewal ran after it was sent), so SIGKILL goes
 *					 out M before the lease can expire.
 *
 * Hence R + D + G + M <= T is required.  Only the rates of the two
 * clocks must agree, not their readings.
 *
 * COMMAND runs in a process group of its own, to which the signals the
 * runner gets are passed.  The supervisor is a subreaper: every process
 * COMMAND starts stays its descendant (a new process group or session,
 * timeout(1), a daemon's double fork), and all of them are stopped when
 * the lease is lost and when COMMAND ends, before the lease is released.
 *
 * Copyright: fencing extension authors
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <libpq-fe.h>

#ifndef FENCING_VERSION
#define FENCING_VERSION "unknown"
#endif

#if defined(__GNUC__)
#define attribute_printf(f, a) __attribute__((format(printf, f, a)))
#define attribute_noreturn __attribute__((noreturn))
#else
#define attribute_printf(f, a)
#define attribute_noreturn
#endif

/* exit statuses of fencing-lock's own (else: COMMAND's status) */
#define EXIT_HELD			120 /* another holder has the lease */
#define EXIT_LOST			121 /* the server refused to renew it */
#define EXIT_NOT_RENEWED	122 /* not renewed before the stop point */
#define EXIT_FAILED			125 /* usage, connection, server error */
#define EXIT_CANNOT_EXEC	126 /* COMMAND found but not executable */
#define EXIT_NOT_FOUND		127 /* COMMAND not found */

/* the server's type OIDs for the parameters (catalog/pg_type_d.h) */
#define TEXTOID			25
#define INT8OID			20
#define INTERVALOID		1186

/* SQLSTATE of lease_renew for a token from before the current band */
#define LOST_AT_FAILOVER "LF005"

typedef int64_t usec_t;			/* microseconds */

#define USECS_PER_MS	((usec_t) 1000)
#define USECS_PER_SEC	((usec_t) 1000000)
#define NEVER			INT64_MAX
#define MAX_DURATION	(86400 * USECS_PER_SEC) /* the server's bound on ttl, wait */
#define MIN_TTL			USECS_PER_SEC
#define DEFAULT_TTL		(30 * USECS_PER_SEC)
#define DEFAULT_CAP		(10 * USECS_PER_SEC)	/* of call timeout, grace */
#define KILL_MARGIN_CAP USECS_PER_SEC	/* of the kill margin, T/20 */
#define RETRY_PAUSE		(250 * USECS_PER_MS)	/* after a failed renewal */
#define TREE_POLL		(20 * USECS_PER_MS) /* while COMMAND's processes are stopped */
#define TTY_POLL		(100 * USECS_PER_MS)	/* while COMMAND waits for the terminal */
#define STALL_REPORTED	(500 * USECS_PER_MS)	/* this process did not run */
#define ACQUIRE_TIMEOUT (5 * USECS_PER_SEC) /* at least, beyond --wait */
#define SHOWN_NAME		64			/* bytes of a name that messages show */

typedef struct Options
{
	const char *lease;			/* NAME */
	char	  **command;		/* COMMAND [ARG]..., NULL-terminated */
	char	   *holder;
	usec_t		ttl;
	usec_t		wait;
	usec_t		renew_every;
	usec_t		call_timeout;
	usec_t		grace;
	usec_t		margin;			/* SIGKILL goes out this long before expiry */
	const char *dbname;			/* connection options */
	const char *host;
	const char *port;
	const char *username;
} Options;

typedef enum CallResult
{
	CALL_PENDING,				/* not finished yet */
	CALL_DONE,					/* answered: Server.result */
	CALL_FAILED,				/* no answer: Server.error */
	CALL_INTERRUPTED			/* a signal came first (call_wait) */
} CallResult;

/*
 * The connection to the server, and the one call in flight on it.  A call
 * connects first if there is no connection, and fails as a whole when its
 * deadline passes; a connection that failed is dropped, and the next call
 * makes a new one.
 */
typedef struct Server
{
	const char **keywords;
	const char **values;
	PGconn	   *conn;
	bool		connecting;		/* PQconnectPoll has not finished */
	PostgresPollingStatusType poll_for; /* what PQconnectPoll waits for */
	bool		busy;			/* a call is in flight */
	bool		flushing;		/* its statement is not all sent yet */
	CallResult	status;
	const char *sql;
	int			nparams;
	const Oid  *types;
	const char *params[4];
	usec_t		started;		/* when the call began */
	usec_t		sent_at;		/* when its statement was sent */
	usec_t		deadline;
	PGresult   *result;			/* CALL_DONE: the answer */
	char		error[1024];	/* CALL_FAILED: why */
	usec_t		blocked_for;	/* the last time libpq blocked in connecting */
	usec_t		blocked_at;		/* ... and when that ended */
} Server;

/*
 * What the runner tells the supervisor, and the supervisor the runner:
 * each time the whole state, so that only the latest one counts and one
 * that cannot be written at once (a full pipe) is simply written later.
 * Smaller than PIPE_BUF: written and read whole.
 */
typedef struct RunnerState
{
	bool		start;			/* start COMMAND (the lease is held) */
	char		token[32];
	usec_t		valid_until;	/* the lease is ours at least until then */
	int			lost;			/* 0, or EXIT_LOST, EXIT_NOT_RENEWED: stop now */
} RunnerState;

typedef enum StopReason
{
	STOP_NONE,
	STOP_LOST,					/* the runner: the lease is lost */
	STOP_NOT_RENEWED,			/* the stop point passed, not renewed */
	STOP_RUNNER_GONE,			/* the runner died */
	STOP_LEFTOVERS				/* COMMAND ended, processes it started did not */
} StopReason;

typedef struct SupervisorState
{
	pid_t		child;			/* COMMAND, once started */
	StopReason	stop_reason;	/* why its processes are being stopped */
	usec_t		term_at;		/* ... when SIGTERM went out */
	int			interrupted;	/* a signal that came before COMMAND started */
	bool		start_failed;	/* COMMAND could not be started (fork) */
	bool		done;			/* COMMAND and all it started are gone */
	int			status;			/* COMMAND's wait status */
} SupervisorState;

/* a set of process IDs */
typedef struct PidSet
{
	pid_t	   *pids;
	size_t		n;
	size_t		size;
} PidSet;

static const char *progname = "fencing-lock";
static bool verbose = false;

/* signals: what they were at start (COMMAND gets that back) */
static bool ignored_at_start[NSIG];
static sigset_t startup_mask;
static int	signal_pipe[2] = {-1, -1};
static pid_t my_pid;
/* the runner passes its signals on to the supervisor from the handler */
static volatile sig_atomic_t forward_to = 0;

/* messages, in the style of PostgreSQL's client programs */

static void log_line(const char *level, const char *fmt, va_list ap) attribute_printf(2, 0);
static void log_error(const char *fmt,...) attribute_printf(1, 2);
static void log_detail(const char *fmt,...) attribute_printf(1, 2);
static void log_hint(const char *fmt,...) attribute_printf(1, 2);
static void log_warning(const char *fmt,...) attribute_printf(1, 2);
static void log_info(const char *fmt,...) attribute_printf(1, 2);
static void log_verbose(const char *fmt,...) attribute_printf(1, 2);
static void usage_error(const char *fmt,...) attribute_printf(1, 2) attribute_noreturn;
static CallResult call_fail(Server *s, const char *fmt,...) attribute_printf(2, 3);

/*
 * stderr is written without ever waiting: a caller that stops reading it
 * (a full pipe, a terminal held with Ctrl-S) must not hold up a renewal or
 * the stopping of COMMAND.  A message that cannot be written at once is
 * dropped, and counted.  The caller's file description stays as it was
 * (COMMAND shares it): pipes and terminals are opened anew, non-blocking,
 * for our messages alone; sockets get MSG_DONTWAIT; files do not block.
 */
typedef enum LogMode
{
	LOG_POLL,					/* fd 2 after poll() said it takes one */
	LOG_FILE,					/* fd 2, a file */
	LOG_SOCKET,					/* fd 2, a socket */
	LOG_OWN					/* log_fd, our own non-blocking description */
} LogMode;

static LogMode log_mode = LOG_POLL;
static int	log_fd = 2;
static unsigned long log_dropped = 0;

static void
log_open(void)
{
	struct stat st;
	int			fd;

	if (fstat(2, &st) != 0)
		return;
	if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))
		log_mode = LOG_FILE;
	else if (S_ISSOCK(st.st_mode))
		log_mode = LOG_SOCKET;
	else if ((fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) >= 0)
	{
		log_fd = fd;
		log_mode = LOG_OWN;
	}
}

static bool
log_write(const char *buf, size_t len)
{
	ssize_t		r = -1;
	struct pollfd pfd;

	switch (log_mode)
	{
		case LOG_FILE:
			r = write(2, buf, len);
			break;
		case LOG_SOCKET:
			r = send(2, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
			break;
		case LOG_OWN:
			r = write(log_fd, buf, len);
			break;
		case LOG_POLL:
			pfd.fd = 2;
			pfd.events = POLLOUT;
			if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLOUT))
				r = write(2, buf, len);
			break;
	}
	if (r == (ssize_t) len)
		return true;
	log_dropped++;
	return false;
}

static void
log_line(const char *level, const char *fmt, va_list ap)
{
	/* at most PIPE_BUF: a line is written whole or not at all */
	char		msg[3072];
	char		line[4096];
	size_t		len;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* libpq's messages end with a newline */
	len = strlen(msg);
	while (len > 0 && msg[len - 1] == '\n')
		msg[--len] = '\0';
	if (log_dropped > 0)
	{
		unsigned long dropped = log_dropped;

		snprintf(line, sizeof(line), "%s: warning: %lu message%s could not be written: stderr was not read\n",
				 progname, dropped, dropped == 1 ? "" : "s");
		if (!log_write(line, strlen(line)))
			return;
		log_dropped -= dropped;
	}
	snprintf(line, sizeof(line), "%s: %s%s%s\n", progname, level ? level : "", level ? ": " : "", msg);
	log_write(line, strlen(line));
}

#define DEFINE_LOG(fn, level, cond) \
static void \
fn(const char *fmt,...) \
{ \
	va_list		ap; \
	if (!(cond)) \
		return; \
	va_start(ap, fmt); \
	log_line(level, fmt, ap); \
	va_end(ap); \
}

DEFINE_LOG(log_error, "error", true)
DEFINE_LOG(log_detail, "detail", true)
DEFINE_LOG(log_hint, "hint", true)
DEFINE_LOG(log_warning, "warning", true)
DEFINE_LOG(log_info, NULL, true)
DEFINE_LOG(log_verbose, NULL, verbose)

static void
usage_error(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	log_line("error", fmt, ap);
	va_end(ap);
	log_hint("Try \"%s --help\" for more information.", progname);
	exit(EXIT_FAILED);
}

/*
 * A name as messages show it: a long one (a lease name of 10 kB) is cut,
 * so that the rest of the message, the reason, is not.  Returns one of a
 * few static buffers.
 */
static const char *
shown(const char *name)
{
	static char bufs[4][SHOWN_NAME + 64];
	static int	next = 0;
	size_t		len = strlen(name);
	size_t		cut = SHOWN_NAME;
	char	   *buf;

	if (len <= SHOWN_NAME)
		return name;
	/* not inside a UTF-8 character */
	while (cut > 0 && ((unsigned char) name[cut] & 0xC0) == 0x80)
		cut--;
	buf = bufs[next++ % 4];
	snprintf(buf, sizeof(bufs[0]), "%.*s...(%zu bytes)", (int) cut, name, len);
	return buf;
}

static void
usage(void)
{
	printf("%s runs a command while it holds a lease of the fencing extension.\n\n", progname);
	printf("Usage:\n");
	printf("  %s [OPTION]... NAME -- COMMAND [ARG]...\n\n", progname);
	printf("It acquires lease NAME, runs COMMAND with FENCING_TOKEN, FENCING_LEASE and\n"
		   "FENCING_HOLDER in its environment, renews the lease while COMMAND runs,\n"
		   "stops COMMAND and every process it started (SIGTERM, then SIGKILL) if the\n"
		   "lease is lost or cannot be renewed in time, and releases the lease when\n"
		   "COMMAND and every process it started have ended.\n\n");
	printf("Options:\n");
	printf("      --ttl=DURATION           time to live of the lease (default: 30s)\n");
	printf("      --wait=DURATION          wait up to DURATION for the lease (default: 0,\n"
		   "                               try once)\n");
	printf("      --holder=NAME            holder name (default: HOST:PID:RANDOM, unique\n"
		   "                               to this run)\n");
	printf("      --renew-every=DURATION   renewal period (default: a third of the TTL)\n");
	printf("      --call-timeout=DURATION  deadline of each renewal and release (default:\n"
		   "                               a sixth of the TTL, at most 10s; at least 5s\n"
		   "                               for acquiring, beyond --wait)\n");
	printf("      --grace=DURATION         time from SIGTERM to SIGKILL when the lease is\n"
		   "                               lost (default: a sixth of the TTL, at most 10s)\n");
	printf("  -v, --verbose                report acquiring, renewing and releasing\n");
	printf("  -V, --version                output version information, then exit\n");
	printf("  -?, --help                   show this help, then exit\n\n");
	printf("Connection options:\n");
	printf("  -d, --dbname=DBNAME          database name or connection string\n");
	printf("  -h, --host=HOSTNAME          database server host or socket directory\n");
	printf("  -p, --port=PORT              database server port\n");
	printf("  -U, --username=USERNAME      user name to connect as\n\n");
	printf("DURATION is a number with a unit, ms, s, m or min, h, d (500ms, 30s, 5min);\n"
		   "a number alone is seconds; at most 1d.  The renewal period, the call\n"
		   "timeout, the grace period and the kill margin (a twentieth of the TTL, at\n"
		   "most 1s: SIGKILL goes out that long before the lease can expire) must add\n"
		   "up to at most the TTL; the TTL is 1s to 1d.\n\n");
	printf("Exit status:\n");
	printf("  COMMAND's exit status, or 128+N if signal N ended COMMAND\n");
	printf("  %d  the lease is held by another holder; COMMAND was not run\n", EXIT_HELD);
	printf("  %d  the lease was lost (the server refused to renew it); COMMAND was\n"
		   "       stopped\n", EXIT_LOST);
	printf("  %d  the lease could not be renewed in time; COMMAND was stopped\n", EXIT_NOT_RENEWED);
	printf("  %d  fencing-lock failed (usage, connection, server error); COMMAND was\n"
		   "       not run, or was stopped\n", EXIT_FAILED);
	printf("  %d  COMMAND could not be executed\n", EXIT_CANNOT_EXEC);
	printf("  %d  COMMAND was not found\n", EXIT_NOT_FOUND);
	printf("  128+N  a signal N came before COMMAND started\n");
	printf("A status of fencing-lock's own always comes with a message on stderr, but\n"
		   "120 without --verbose.\n");
}

/* time */

static usec_t
now_us(void)
{
	struct timespec ts;

#ifdef CLOCK_BOOTTIME
	/* monotonic, and counts the time the machine was suspended */
	if (clock_gettime(CLOCK_BOOTTIME, &ts) == 0)
		return (usec_t) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000;
#endif
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (usec_t) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000;
}

static usec_t
min_us(usec_t a, usec_t b)
{
	return a < b ? a : b;
}

/* milliseconds for poll() until wake, from now; -1 for never */
static int
poll_timeout(usec_t wake, usec_t now)
{
	if (wake == NEVER)
		return -1;
	if (wake <= now)
		return 0;
	return (int) min_us((wake - now + 999) / 1000, 3600 * 1000);
}

/*
 * A duration for messages: "30 s", "2.5 s", "166.667 ms".  Returns one of a
 * few static buffers, so a message can hold several.
 */
static const char *
fmt_duration(usec_t us)
{
	static char bufs[8][32];
	static int	next = 0;
	char	   *buf = bufs[next++ % 8];
	char	   *p;

	if (us < 0)
		us = 0;
	if (us % USECS_PER_SEC == 0)
	{
		snprintf(buf, sizeof(bufs[0]), "%" PRId64 " s", us / USECS_PER_SEC);
		return buf;
	}
	if (us >= USECS_PER_SEC)
		snprintf(buf, sizeof(bufs[0]), "%.3f", (double) us / USECS_PER_SEC);
	else
		snprintf(buf, sizeof(bufs[0]), "%.3f", (double) us / USECS_PER_MS);
	/* no trailing zeros */
	p = buf + strlen(buf) - 1;
	while (*p == '0')
		*p-- = '\0';
	if (*p == '.')
		*p = '\0';
	strcat(buf, us >= USECS_PER_SEC ? " s" : " ms");
	return buf;
}

/*
 * parse_duration: digits with an optional fraction, an optional space and
 * a unit (ms, s, m or min, h, d; none: seconds), in microseconds, rounded
 * down.  False for anything else.  Anything over MAX_DURATION comes out as
 * NEVER, and nothing overflows on the way: the options' checks see every
 * value as it was meant.
 */
static bool
parse_duration(const char *s, usec_t *out)
{
	static const struct
	{
		const char *name;
		usec_t		us;
	}			units[] = {
		{"", USECS_PER_SEC}, {"ms", USECS_PER_MS}, {"s", USECS_PER_SEC},
		{"m", 60 * USECS_PER_SEC}, {"min", 60 * USECS_PER_SEC},
		{"h", 3600 * USECS_PER_SEC}, {"d", 86400 * USECS_PER_SEC},
	};
	int64_t		whole = 0;
	int64_t		frac = 0;
	int64_t		scale = 1;
	bool		digits = false;
	bool		big = false;
	usec_t		unit = -1;
	usec_t		us;
	size_t		i;

	for (; *s >= '0' && *s <= '9'; s++)
	{
		digits = true;
		/* over a day in milliseconds, the smallest unit: too large anyway */
		if (whole > MAX_DURATION / USECS_PER_MS)
			big = true;
		else
			whole = whole * 10 + (*s - '0');
	}
	if (*s == '.')
	{
		/* nine digits: finer than a microsecond of the largest unit */
		for (s++; *s >= '0' && *s <= '9'; s++)
		{
			digits = true;
			if (scale < 1000000000)
			{
				frac = frac * 10 + (*s - '0');
				scale *= 10;
			}
		}
	}
	if (!digits)
		return false;
	if (*s == ' ')
		s++;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(s, units[i].name) == 0)
			unit = units[i].us;
	if (unit < 0)
		return false;
	if (big || whole > MAX_DURATION / unit)
	{
		*out = NEVER;
		return true;
	}
	/* frac * unit / scale, without the product: frac < scale <= 10^9 */
	us = whole * unit + frac * (unit / scale) + frac * (unit % scale) / scale;
	*out = us > MAX_DURATION ? NEVER : us;
	return true;
}

/* interval text for the server: exact, whatever its IntervalStyle */
static void
interval_text(char *buf, size_t size, usec_t us)
{
	snprintf(buf, size, "%" PRId64 " microseconds", us);
}

static const char *
signal_name(int signo)
{
	static const struct
	{
		int			signo;
		const char *name;
	}			names[] = {
		{SIGHUP, "SIGHUP"}, {SIGINT, "SIGINT"}, {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
		{SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"},
		{SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
		{SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGCHLD, "SIGCHLD"},
		{SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"}, {SIGTTIN, "SIGTTIN"},
		{SIGTTOU, "SIGTTOU"}, {SIGURG, "SIGURG"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
		{SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGSYS, "SIGSYS"},
#ifdef SIGIO
		{SIGIO, "SIGIO"},
#endif
#ifdef SIGPWR
		{SIGPWR, "SIGPWR"},
#endif
#ifdef SIGSTKFLT
		{SIGSTKFLT, "SIGSTKFLT"},
#endif
	};
	static char buf[32];
	size_t		i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].signo == signo)
			return names[i].name;
#ifdef SIGRTMIN
	if (signo >= SIGRTMIN && signo <= SIGRTMAX)
	{
		snprintf(buf, sizeof(buf), "SIGRTMIN+%d", signo - SIGRTMIN);
		return buf;
	}
#endif
	snprintf(buf, sizeof(buf), "signal %d", signo);
	return buf;
}

/* "exited with status 3", "was killed by SIGTERM": for a wait status */
static const char *
describe_status(int status)
{
	static char buf[64];

	if (WIFEXITED(status))
		snprintf(buf, sizeof(buf), "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, sizeof(buf), "was killed by %s", signal_name(WTERMSIG(status)));
	else
		snprintf(buf, sizeof(buf), "ended with wait status %d", status);
	return buf;
}

/* the exit status a shell reports for a wait status */
static int
shell_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_FAILED;
}

/* options */

enum
{
	OPT_TTL = 256,
	OPT_WAIT,
	OPT_HOLDER,
	OPT_RENEW_EVERY,
	OPT_CALL_TIMEOUT,
	OPT_GRACE,
	OPT_HELP
};

static usec_t
duration_arg(const char *option, const char *value)
{
	usec_t		us;

	if (!parse_duration(value, &us))
	{
		log_error("invalid value \"%s\" for option %s", shown(value), option);
		log_hint("A duration is a number with a unit, ms, s, m or min, h, d, as in 500ms, 30s, 5min.");
		exit(EXIT_FAILED);
	}
	return us;
}

/* every duration but the TTL: at most a day (the server's bound) */
static void
check_at_most_a_day(const char *option, usec_t us)
{
	if (us > MAX_DURATION)
	{
		log_error("%s must be at most 1 day", option);
		exit(EXIT_FAILED);
	}
}

/* HOST:PID:RANDOM: meaningful in lease_status, and never another run's */
static char *
default_holder(void)
{
	static char holder[256 + 32];
	char		host[256];
	unsigned int nonce = 0;
	int			fd;

	if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
		strcpy(host, "localhost");
	host[sizeof(host) - 1] = '\0';
	/*
	 * Containers often share a host name and all have PID 1: the random part
	 * keeps two of them from being one holder, which would take the lease
	 * from each other.
	 */
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &nonce, sizeof(nonce)) != (ssize_t) sizeof(nonce))
		nonce = (unsigned int) now_us() ^ ((unsigned int) getpid() << 16);
	if (fd >= 0)
		close(fd);
	snprintf(holder, sizeof(holder), "%s:%d:%08x", host, (int) getpid(), nonce);
	return holder;
}

static void
parse_options(int argc, char **argv, Options *opt)
{
	static const struct option long_options[] = {
		{"dbname", required_argument, NULL, 'd'},
		{"host", required_argument, NULL, 'h'},
		{"port", required_argument, NULL, 'p'},
		{"username", required_argument, NULL, 'U'},
		{"ttl", required_argument, NULL, OPT_TTL},
		{"wait", required_argument, NULL, OPT_WAIT},
		{"holder", required_argument, NULL, OPT_HOLDER},
		{"renew-every", required_argument, NULL, OPT_RENEW_EVERY},
		{"call-timeout", required_argument, NULL, OPT_CALL_TIMEOUT},
		{"grace", required_argument, NULL, OPT_GRACE},
		{"verbose", no_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0}
	};
	int			dashdash;
	int			c;
	bool		have_renew = false;
	bool		have_timeout = false;
	bool		have_grace = false;

	memset(opt, 0, sizeof(*opt));
	opt->ttl = DEFAULT_TTL;

	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0))
	{
		usage();
		exit(0);
	}
	if (argc > 1 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0))
	{
		printf("%s (fencing) %s\n", progname, FENCING_VERSION);
		exit(0);
	}

	/* options and NAME come before "--", COMMAND after it */
	for (dashdash = 1; dashdash < argc; dashdash++)
		if (strcmp(argv[dashdash], "--") == 0)
			break;

	opterr = 0;
	while ((c = getopt_long(dashdash, argv, ":d:h:p:U:vV", long_options, NULL)) != -1)
	{
		switch (c)
		{
			case 'd':
				opt->dbname = optarg;
				break;
			case 'h':
				opt->host = optarg;
				break;
			case 'p':
				opt->port = optarg;
				break;
			case 'U':
				opt->username = optarg;
				break;
			case OPT_TTL:
				opt->ttl = duration_arg("--ttl", optarg);
				break;
			case OPT_WAIT:
				opt->wait = duration_arg("--wait", optarg);
				break;
			case OPT_HOLDER:
				opt->holder = optarg;
				break;
			case OPT_RENEW_EVERY:
				opt->renew_every = duration_arg("--renew-every", optarg);
				have_renew = true;
				break;
			case OPT_CALL_TIMEOUT:
				opt->call_timeout = duration_arg("--call-timeout", optarg);
				have_timeout = true;
				break;
			case OPT_GRACE:
				opt->grace = duration_arg("--grace", optarg);
				have_grace = true;
				break;
			case 'v':
				verbose = true;
				break;
			case 'V':
				printf("%s (fencing) %s\n", progname, FENCING_VERSION);
				exit(0);
			case OPT_HELP:
				usage();
				exit(0);
			case ':':
				usage_error("option \"%s\" requires an argument", shown(argv[optind - 1]));
				break;
			default:
				if (optopt != 0)
					usage_error("invalid option \"-%c\"", optopt);
				usage_error("unrecognized option \"%s\"", shown(argv[optind - 1]));
		}
	}

	if (optind >= dashdash)
		usage_error("no lease name given");
	if (dashdash - optind > 1)
		usage_error("too many arguments before \"--\": \"%s\" after the lease name \"%s\"",
					shown(argv[optind + 1]), shown(argv[optind]));
	opt->lease = argv[optind];
	if (dashdash >= argc)
		usage_error("no command given: put it after \"--\"");
	if (dashdash + 1 >= argc)
		usage_error("no command given after \"--\"");
	opt->command = argv + dashdash + 1;

	/* the lease's timing: every value in range, then how they fit */
	if (opt->ttl < MIN_TTL || opt->ttl > MAX_DURATION)
	{
		log_error("--ttl must be from 1 s to 1 day");
		log_detail("A shorter lease cannot be kept by a process that the machine may not schedule for a while; the server takes at most a day.");
		exit(EXIT_FAILED);
	}
	check_at_most_a_day("--wait", opt->wait);
	check_at_most_a_day("--renew-every", opt->renew_every);
	check_at_most_a_day("--call-timeout", opt->call_timeout);
	check_at_most_a_day("--grace", opt->grace);
	if (!have_renew)
		opt->renew_every = opt->ttl / 3;
	if (!have_timeout)
		opt->call_timeout = min_us(opt->ttl / 6, DEFAULT_CAP);
	if (!have_grace)
		opt->grace = min_us(opt->ttl / 6, DEFAULT_CAP);
	opt->margin = min_us(opt->ttl / 20, KILL_MARGIN_CAP);
	if (opt->renew_every <= 0)
	{
		log_error("--renew-every must be greater than zero");
		exit(EXIT_FAILED);
	}
	if (opt->call_timeout <= 0)
	{
		log_error("--call-timeout must be greater than zero");
		exit(EXIT_FAILED);
	}
	/* each at most a day: the sum cannot overflow */
	if (opt->renew_every + opt->call_timeout + opt->grace + opt->margin > opt->ttl)
	{
		log_error("--renew-every (%s), --call-timeout (%s) and --grace (%s) add up to more than --ttl (%s) less the kill margin (%s)",
				  fmt_duration(opt->renew_every), fmt_duration(opt->call_timeout),
				  fmt_duration(opt->grace), fmt_duration(opt->ttl), fmt_duration(opt->margin));
		log_detail("A renewal sent at the end of each period must be answered within the call timeout, before the grace period that ends the kill margin before the lease's expiry; the margin is a twentieth of the TTL, at most 1 s.");
		exit(EXIT_FAILED);
	}

	if (opt->holder == NULL)
		opt->holder = default_holder();
}

/* the connection options, in the order psql gives them to libpq */
static void
connection_options(const Options *opt, const char **keywords, const char **values)
{
	int			n = 0;

	if (opt->host)
	{
		keywords[n] = "host";
		values[n++] = opt->host;
	}
	if (opt->port)
	{
		keywords[n] = "port";
		values[n++] = opt->port;
	}
	if (opt->username)
	{
		keywords[n] = "user";
		values[n++] = opt->username;
	}
	/* a connection string here overrides the options before it */
	if (opt->dbname)
	{
		keywords[n] = "dbname";
		values[n++] = opt->dbname;
	}
	keywords[n] = "fallback_application_name";
	values[n++] = progname;
	keywords[n] = NULL;
	values[n] = NULL;
}
/* calls to the server, each with a deadline */

static void
server_disconnect(Server *s)
{
	if (s->conn)
		PQfinish(s->conn);
	s->conn = NULL;
	s->connecting = false;
}

/*
 * libpq looks host names up synchronously (getaddrinfo), inside
 * PQconnectStartParams and PQconnectPoll: a resolver that hangs blocks the
 * runner there, and no deadline of ours can end that.  The supervisor
 * stops COMMAND in time all the same; this notes how long the runner was
 * held, for the message that says why the lease was not renewed.
 */
static void
connect_blocked(Server *s, usec_t before)
{
	usec_t		after = now_us();

	if (after - before >= STALL_REPORTED)
	{
		s->blocked_for = after - before;
		s->blocked_at = after;
	}
}

static CallResult
call_fail(Server *s, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(s->error, sizeof(s->error), fmt, ap);
	va_end(ap);
	s->busy = false;
	s->status = CALL_FAILED;
	server_disconnect(s);
	return CALL_FAILED;
}

static CallResult
call_send(Server *s)
{
	int			r;

	if (!PQsendQueryParams(s->conn, s->sql, s->nparams, s->types, s->params, NULL, NULL, 0))
		return call_fail(s, "%s", PQerrorMessage(s->conn));
	s->sent_at = now_us();
	r = PQflush(s->conn);
	if (r < 0)
		return call_fail(s, "%s", PQerrorMessage(s->conn));
	s->flushing = (r == 1);
	return CALL_PENDING;
}

/*
 * Begin a call: the statement with text parameters, answered before
 * deadline or failed.  Connects first if need be.
 */
static void
call_begin(Server *s, const char *sql, int nparams, const Oid *types,
		   const char *const *params, usec_t deadline)
{
	int			i;

	/* one call at a time: one still in flight is given up */
	if (s->busy)
		call_fail(s, "abandoned");
	if (s->result)
		PQclear(s->result);
	s->result = NULL;
	s->error[0] = '\0';
	s->busy = true;
	s->status = CALL_PENDING;
	s->flushing = false;
	s->sql = sql;
	s->nparams = nparams;
	s->types = types;
	for (i = 0; i < nparams; i++)
		s->params[i] = params[i];
	s->started = now_us();
	s->sent_at = 0;
	s->deadline = deadline;

	/* a connection the server closed meanwhile (a restart) shows here */
	if (s->conn && (!PQconsumeInput(s->conn) || PQstatus(s->conn) != CONNECTION_OK))
		server_disconnect(s);
	if (s->conn == NULL)
	{
		usec_t		before = now_us();

		/* a host name is looked up in here, unbounded (see connect_blocked) */
		s->conn = PQconnectStartParams(s->keywords, s->values, 1);
		connect_blocked(s, before);
		if (s->conn == NULL)
		{
			call_fail(s, "out of memory");
			return;
		}
		if (PQstatus(s->conn) == CONNECTION_BAD)
		{
			call_fail(s, "%s", PQerrorMessage(s->conn));
			return;
		}
		s->connecting = true;
		s->poll_for = PGRES_POLLING_WRITING;
		return;
	}
	call_send(s);
}

/* what to poll the connection's socket for */
static short
call_events(const Server *s)
{
	if (s->connecting)
		return s->poll_for == PGRES_POLLING_READING ? POLLIN : POLLOUT;
	return POLLIN | (s->flushing ? POLLOUT : 0);
}

/* Move the call on as far as it goes without waiting. */
static CallResult
call_step(Server *s)
{
	if (!s->busy)
		return s->status;
	if (s->connecting)
	{
		usec_t		before = now_us();
		PostgresPollingStatusType st = PQconnectPoll(s->conn);

		connect_blocked(s, before);

		if (st == PGRES_POLLING_FAILED)
			return call_fail(s, "%s", PQerrorMessage(s->conn));
		if (st != PGRES_POLLING_OK)
		{
			s->poll_for = st;
			return CALL_PENDING;
		}
		s->connecting = false;
		if (PQsetnonblocking(s->conn, 1) != 0)
			return call_fail(s, "%s", PQerrorMessage(s->conn));
		if (call_send(s) == CALL_FAILED)
			return CALL_FAILED;
	}
	if (!PQconsumeInput(s->conn))
		return call_fail(s, "%s", PQerrorMessage(s->conn));
	if (s->flushing)
	{
		int			r = PQflush(s->conn);

		if (r < 0)
			return call_fail(s, "%s", PQerrorMessage(s->conn));
		s->flushing = (r == 1);
		if (s->flushing)
			return CALL_PENDING;
	}
	while (!PQisBusy(s->conn))
	{
		PGresult   *res = PQgetResult(s->conn);

		if (res == NULL)
		{
			s->busy = false;
			if (s->result == NULL)
				return call_fail(s, "no answer from the server");
			s->status = CALL_DONE;
			/* an error that ended the connection (a shutdown): drop it */
			if (PQstatus(s->conn) != CONNECTION_OK)
				server_disconnect(s);
			return CALL_DONE;
		}
		if (s->result == NULL)
			s->result = res;
		else
			PQclear(res);
	}
	return CALL_PENDING;
}

/* the deadline passed: the call is lost, and so is its connection */
static CallResult
call_expire(Server *s)
{
	return call_fail(s, "no answer from the server within %s",
					 fmt_duration(s->deadline - s->started));
}

/* a server error as one line: message and SQLSTATE */
static const char *
result_error(const PGresult *res)
{
	static char buf[1024];
	const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	if (primary == NULL)
		snprintf(buf, sizeof(buf), "%s", PQresultErrorMessage(res));
	else
		snprintf(buf, sizeof(buf), "%s (SQLSTATE %s)", primary, sqlstate ? sqlstate : "unknown");
	return buf;
}

/* the one value of an answer, or NULL for an error or an SQL NULL */
static const char *
result_value(const PGresult *res)
{
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
		PQnfields(res) < 1 || PQgetisnull(res, 0, 0))
		return NULL;
	return PQgetvalue(res, 0, 0);
}


/* signals */

static bool
is_fault(int signo)
{
	return signo == SIGSEGV || signo == SIGBUS || signo == SIGILL || signo == SIGFPE ||
		signo == SIGTRAP || signo == SIGSYS;
}

/*
 * Every signal that can be caught comes here, in the runner and in the
 * supervisor, and is noted in the signal pipe for the main loop.  The
 * runner passes it on to the supervisor from here, at once: a runner held
 * up in libpq passes signals on all the same.
 */
static void
on_signal(int signo, siginfo_t *info, void *context)
{
	int			save_errno = errno;
	unsigned char b = (unsigned char) signo;

	(void) context;
	if (info && info->si_code > 0 && is_fault(signo))
	{
		/* a fault of this process's own: die of it (the other stops COMMAND) */
		signal(signo, SIG_DFL);
		raise(signo);
		errno = save_errno;
		return;
	}
	/* this process's own doing (abort(), a write to a closed pipe) */
	if (info && info->si_code <= 0 && info->si_pid == my_pid)
	{
		errno = save_errno;
		return;
	}
	if (forward_to > 0 && signo != SIGCHLD && signo != SIGTSTP && signo != SIGCONT)
		kill((pid_t) forward_to, signo);
	if (write(signal_pipe[1], &b, 1) < 0)
	{
		/* full: enough signals are pending to wake the loop */
	}
	errno = save_errno;
}

static void
set_cloexec_nonblock(int fd)
{
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static bool
make_pipe(int fds[2])
{
	if (pipe(fds) != 0)
	{
		log_error("could not create a pipe: %s", strerror(errno));
		return false;
	}
	set_cloexec_nonblock(fds[0]);
	set_cloexec_nonblock(fds[1]);
	return true;
}

/*
 * Catch every signal that can be caught, so that none ends this process
 * without COMMAND being stopped: all are passed on to COMMAND, but SIGCHLD,
 * SIGTSTP (refused: see runner_signals), SIGCONT, and SIGPIPE, SIGTTIN,
 * SIGTTOU, which are ignored (libpq writes to sockets the server may have
 * closed; the supervisor hands the terminal to COMMAND from the
 * background).  A signal ignored at start (nohup) stays ignored, also in
 * COMMAND.
 */
static void
setup_signals(void)
{
	struct sigaction sa;
	struct sigaction ign;
	struct sigaction old;
	sigset_t	none;
	int			signo;

	my_pid = getpid();
	if (!make_pipe(signal_pipe))
		exit(EXIT_FAILED);
	sigprocmask(SIG_SETMASK, NULL, &startup_mask);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_signal;
	sigfillset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	for (signo = 1; signo < NSIG; signo++)
	{
		if (signo == SIGKILL || signo == SIGSTOP)
			continue;
		/* the C library's own (glibc's 32 and 33) cannot be had */
		if (sigaction(signo, NULL, &old) != 0)
			continue;
		ignored_at_start[signo] = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN;
		if (signo == SIGPIPE || signo == SIGTTIN || signo == SIGTTOU)
			sigaction(signo, &ign, NULL);
		else if (!ignored_at_start[signo] || signo == SIGCHLD)
			sigaction(signo, &sa, NULL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* in COMMAND before exec: the signals as fencing-lock got them */
static void
restore_signals(void)
{
	int			signo;

	for (signo = 1; signo < NSIG; signo++)
		if (signo != SIGKILL && signo != SIGSTOP)
			signal(signo, ignored_at_start[signo] ? SIG_IGN : SIG_DFL);
	sigprocmask(SIG_SETMASK, &startup_mask, NULL);
}

/* the next signal from the pipe, or 0 */
static int
next_signal(void)
{
	unsigned char b;

	if (read(signal_pipe[0], &b, 1) == 1)
		return b;
	return 0;
}

/*
 * Started with stdin, stdout or stderr closed, the pipes made below would
 * get their numbers, and a message meant for stderr would go into one (and
 * come back as signals).  /dev/null fills the gap, close-on-exec, so that
 * COMMAND gets them closed, as they were given.
 */
static void
open_standard_fds(void)
{
	int			fd;

	for (fd = 0; fd <= 2; fd++)
	{
		int			got;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* the lowest number free: this one */
		got = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
		if (got != fd)
			exit(EXIT_FAILED);
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
}

/* the states the two processes send each other */

/* Write a whole state; false if the pipe is full (write it again later). */
static bool
send_state(int fd, const void *state, size_t size)
{
	ssize_t		r = write(fd, state, size);

	/* EPIPE: the reader is gone, and the loss of it is seen elsewhere */
	return r == (ssize_t) size || (r < 0 && errno != EAGAIN && errno != EINTR);
}

/* Read the latest state written, if any; *gone at the end of the pipe. */
static bool
receive_state(int fd, void *state, size_t size, bool *gone)
{
	char		buf[256];
	bool		got = false;

	for (;;)
	{
		ssize_t		r = read(fd, buf, size);

		if (r == (ssize_t) size)
		{
			memcpy(state, buf, size);
			got = true;
			continue;
		}
		if (r == 0)
			*gone = true;
		else if (r < 0 && errno == EINTR)
			continue;
		return got;
	}
}

/*
 * The processes COMMAND started: the descendants of the supervisor (a
 * subreaper, so that orphans come back to it rather than to init), found
 * in /proc: through each thread's children file where the kernel has them
 * (CONFIG_PROC_CHILDREN), else by reading every process's parent.
 * Zombies do not count: they are gone but for their parent's wait.
 */

static bool children_files = false;

static void
pidset_add(PidSet *set, pid_t pid)
{
	if (set->n == set->size)
	{
		size_t		size = set->size ? set->size * 2 : 64;
		pid_t	   *pids = realloc(set->pids, size * sizeof(pid_t));

		if (pids == NULL)
		{
			log_error("out of memory");
			abort();
		}
		set->pids = pids;
		set->size = size;
	}
	set->pids[set->n++] = pid;
}

static bool
pidset_has(const PidSet *set, pid_t pid)
{
	size_t		i;

	for (i = 0; i < set->n; i++)
		if (set->pids[i] == pid)
			return true;
	return false;
}

/* /proc/.../stat: the state letter and the parent; false if gone */
static bool
read_stat(const char *path, char *state, pid_t *ppid)
{
	char		buf[512];
	int			fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t		n;
	char	   *p;
	int			parent;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* after the command name, which may hold anything */
	p = strrchr(buf, ')');
	if (p == NULL || sscanf(p + 1, " %c %d", state, &parent) != 2)
		return false;
	*ppid = parent;
	return true;
}

static bool
state_alive(char state)
{
	return state != 'Z' && state != 'X' && state != 'x';
}

/* the numbers in a children file, added to set */
static void
read_pid_list(const char *path, PidSet *set)
{
	char		buf[4096];
	int			fd = open(path, O_RDONLY | O_CLOEXEC);
	long		pid = -1;
	ssize_t		n;

	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
	{
		ssize_t		i;

		for (i = 0; i < n; i++)
		{
			if (buf[i] >= '0' && buf[i] <= '9')
				pid = (pid < 0 ? 0 : pid * 10) + (buf[i] - '0');
			else if (pid >= 0)
			{
				if (!pidset_has(set, (pid_t) pid))
					pidset_add(set, (pid_t) pid);
				pid = -1;
			}
		}
	}
	if (pid >= 0 && !pidset_has(set, (pid_t) pid))
		pidset_add(set, (pid_t) pid);
	close(fd);
}

/*
 * Whether a process is alive, that is one of its threads is no zombie (a
 * process whose first thread ended shows as one); its children, of every
 * thread, are added to kids.
 */
static bool
alive_with_children(pid_t pid, PidSet *kids)
{
	char		path[96];
	DIR		   *dir;
	struct dirent *e;
	bool		alive = false;

	snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
	dir = opendir(path);
	if (dir == NULL)
		return false;
	while ((e = readdir(dir)) != NULL)
	{
		char		state;
		pid_t		ppid;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", (int) pid, e->d_name);
		if (read_stat(path, &state, &ppid) && state_alive(state))
			alive = true;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", (int) pid, e->d_name);
		read_pid_list(path, kids);
	}
	closedir(dir);
	return alive;
}

/* without children files: every process's parent, from /proc/PID/stat */
static void
scan_descendants(pid_t root, PidSet *alive)
{
	typedef struct
	{
		pid_t		pid;
		pid_t		ppid;
		char		state;
	}			Proc;
	Proc	   *procs = NULL;
	size_t		n = 0;
	size_t		size = 0;
	PidSet		tree = {0};
	DIR		   *dir = opendir("/proc");
	struct dirent *e;
	bool		more = true;
	size_t		i;

	if (dir == NULL)
		return;
	while ((e = readdir(dir)) != NULL)
	{
		char		path[64];
		Proc		p;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		p.pid = (pid_t) atol(e->d_name);
		snprintf(path, sizeof(path), "/proc/%.16s/stat", e->d_name);
		if (!read_stat(path, &p.state, &p.ppid))
			continue;
		if (n == size)
		{
			Proc	   *grown;

			size = size ? size * 2 : 256;
			grown = realloc(procs, size * sizeof(Proc));
			if (grown == NULL)
			{
				log_error("out of memory");
				abort();
			}
			procs = grown;
		}
		procs[n++] = p;
	}
	closedir(dir);
	pidset_add(&tree, root);
	while (more)
	{
		more = false;
		for (i = 0; i < n; i++)
			if (!pidset_has(&tree, procs[i].pid) && pidset_has(&tree, procs[i].ppid))
			{
				pidset_add(&tree, procs[i].pid);
				if (state_alive(procs[i].state))
					pidset_add(alive, procs[i].pid);
				more = true;
			}
	}
	free(tree.pids);
	free(procs);
}

/* The live descendants of root (this process), into alive. */
static void
descendants(pid_t root, PidSet *alive)
{
	PidSet		queue = {0};
	size_t		i;

	alive->n = 0;
	if (!children_files)
	{
		scan_descendants(root, alive);
		return;
	}
	alive_with_children(root, &queue);
	for (i = 0; i < queue.n; i++)
		if (alive_with_children(queue.pids[i], &queue))
			pidset_add(alive, queue.pids[i]);
	free(queue.pids);
}

static void
find_children_files(void)
{
	char		path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) my_pid, (int) my_pid);
	children_files = access(path, R_OK) == 0;
}

/*
 * The supervisor: starts COMMAND when the runner says so, passes the
 * signals the runner got on to COMMAND's process group, and stops
 * everything COMMAND started when the lease is lost, when the stop point
 * passes without a renewal the runner told of, when the runner is gone,
 * and when COMMAND has ended.  It tells the runner once nothing is left.
 */
typedef struct Supervisor
{
	const Options *opt;
	pid_t		runner;
	pid_t		runner_pgrp;	/* the caller's job, which may own the terminal */
	int			from_runner;
	int			to_runner;
	bool		runner_gone;
	RunnerState rs;				/* the runner's latest */
	SupervisorState ss;			/* ours */
	bool		report;			/* ss changed since it was written */
	bool		started;
	pid_t		child;			/* COMMAND, leader of its process group */
	int			exec_error_fd;	/* COMMAND's exec errno comes here */
	bool		child_done;
	int			tty_fd;			/* our controlling terminal, or -1 */
	bool		tty_given;		/* COMMAND's group was given the terminal */
	bool		tty_waiting;	/* COMMAND is stopped, wanting the terminal */
	int			sigints;		/* SIGINTs passed on */
	PidSet		tree;			/* COMMAND's live processes, last looked */
	PidSet		termed;			/* those that got SIGTERM */
	bool		killing;		/* SIGKILL went out */
	usec_t		next_look;		/* look at the processes again then */
} Supervisor;

/* in the child: become COMMAND; never returns */
static void
exec_command(const Supervisor *sv, pid_t parent, int error_fd)
{
	int			e;

	setpgid(0, 0);
	if (sv->tty_given)
		tcsetpgrp(sv->tty_fd, getpid());
#ifdef PR_SET_PDEATHSIG
	/* the supervisor killed: no one would stop COMMAND but the runner */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(EXIT_FAILED);
#endif
	restore_signals();
	execvp(sv->opt->command[0], sv->opt->command);
	e = errno;
	if (write(error_fd, &e, sizeof(e)) < 0)
	{
		/* the supervisor reports the exit status alone */
	}
	_exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

static void
start_command(Supervisor *sv)
{
	int			error_pipe[2];
	sigset_t	all;
	sigset_t	old;
	pid_t		pid;

	setenv("FENCING_LEASE", sv->opt->lease, 1);
	setenv("FENCING_TOKEN", sv->rs.token, 1);
	setenv("FENCING_HOLDER", sv->opt->holder, 1);
	sv->report = true;
	if (!make_pipe(error_pipe))
	{
		sv->ss.start_failed = sv->ss.done = true;
		return;
	}
	/*
	 * A terminal: COMMAND's group gets it if the caller's job has it now,
	 * so that COMMAND reads it and gets its signals (Ctrl-C) as it would
	 * without us; else when the job is brought to the foreground.
	 */
	sv->tty_fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (sv->tty_fd >= 0 && tcgetpgrp(sv->tty_fd) == sv->runner_pgrp)
		sv->tty_given = true;

	/* no handler of ours may run in the child before exec */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid == 0)
		exec_command(sv, my_pid, error_pipe[1]);
	if (pid > 0)
	{
		/* as in the child: whichever runs first */
		setpgid(pid, pid);
		if (sv->tty_given)
			tcsetpgrp(sv->tty_fd, pid);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(error_pipe[1]);
	if (pid < 0)
	{
		log_error("could not start the command: %s", strerror(errno));
		close(error_pipe[0]);
		sv->ss.start_failed = sv->ss.done = true;
		return;
	}
	sv->child = sv->ss.child = pid;
	sv->started = true;
	sv->exec_error_fd = error_pipe[0];
	log_verbose("started the command (process %d)", (int) pid);
}

/* why exec failed, as the child reported it */
static void
report_exec_error(Supervisor *sv)
{
	int			e;

	if (sv->exec_error_fd < 0)
		return;
	if (read(sv->exec_error_fd, &e, sizeof(e)) == (ssize_t) sizeof(e))
		log_error("could not execute command \"%s\": %s", shown(sv->opt->command[0]), strerror(e));
	close(sv->exec_error_fd);
	sv->exec_error_fd = -1;
}

/* The job was brought to the foreground: COMMAND gets the terminal. */
static void
hand_terminal(Supervisor *sv)
{
	if (!sv->tty_waiting || sv->child_done || tcgetpgrp(sv->tty_fd) != sv->runner_pgrp)
		return;
	tcsetpgrp(sv->tty_fd, sv->child);	/* SIGTTOU is ignored */
	sv->tty_given = true;
	sv->tty_waiting = false;
	kill(-sv->child, SIGCONT);
	log_verbose("the command has the terminal now");
}

/* take the terminal back from COMMAND's group, if it still has it */
static void
reclaim_terminal(Supervisor *sv)
{
	if (sv->tty_given && tcgetpgrp(sv->tty_fd) == sv->child)
		tcsetpgrp(sv->tty_fd, sv->runner_pgrp);
	sv->tty_given = false;
	sv->tty_waiting = false;
}

static void
command_stopped(Supervisor *sv, int signo)
{
	if ((signo == SIGTTIN || signo == SIGTTOU) && !sv->tty_given && sv->tty_fd >= 0)
	{
		/*
		 * A background job's COMMAND wants the terminal: it gets it once
		 * the job is in the foreground (fg), which no signal tells, so
		 * hand_terminal() looks every TTY_POLL.
		 */
		if (!sv->tty_waiting)
			log_warning("the command was stopped by %s: it wants the terminal; it gets it when fencing-lock's job is brought to the foreground (the lease is renewed meanwhile)",
						signal_name(signo));
		sv->tty_waiting = true;
		hand_terminal(sv);
	}
	else if (signo == SIGTSTP || signo == SIGTTIN || signo == SIGTTOU)
	{
		/*
		 * Ctrl-Z at COMMAND's terminal stops its group, and the shell
		 * waits for us, not for it: a stopped COMMAND could be resumed by
		 * no one, so it is resumed at once.
		 */
		log_warning("the command cannot be suspended while it holds a lease; resuming it");
		kill(-sv->child, SIGCONT);
	}
	else
		log_verbose("the command was stopped by %s; the lease is still renewed", signal_name(signo));
}

static void
supervisor_reap(Supervisor *sv)
{
	int			status;
	pid_t		pid;

	while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0)
	{
		if (!sv->started || pid != sv->child || sv->child_done)
			continue;			/* an orphan of COMMAND's: reaped */
		if (WIFSTOPPED(status))
		{
			command_stopped(sv, WSTOPSIG(status));
			continue;
		}
		sv->child_done = true;
		sv->ss.status = status;
		sv->next_look = 0;
		reclaim_terminal(sv);
		report_exec_error(sv);
		log_verbose("the command %s", describe_status(status));
	}
}

/* Pass the signals that came on to COMMAND's group, and reap children. */
static void
supervisor_signals(Supervisor *sv)
{
	int			signo;

	while ((signo = next_signal()) != 0)
	{
		if (signo == SIGCHLD || signo == SIGTSTP || signo == SIGCONT)
			continue;			/* SIGCONT: the runner wakes us, if stopped */
		if (!sv->started)
		{
			/* before COMMAND runs: it is not run */
			if (!sv->ss.interrupted && !sv->ss.done)
			{
				sv->ss.interrupted = signo;
				sv->ss.done = sv->report = true;
			}
			continue;
		}
		if (signo == SIGINT && ++sv->sigints >= 2)
		{
			log_info("second SIGINT: killing the command (SIGKILL)");
			kill(-sv->child, SIGKILL);
			continue;
		}
		log_verbose("passing %s on to the command", signal_name(signo));
		if (kill(-sv->child, signo) != 0 && errno != ESRCH)
			log_warning("could not send %s to the command: %s", signal_name(signo), strerror(errno));
	}
	supervisor_reap(sv);
}

/* when SIGKILL goes out, stopping */
static usec_t
kill_point(const Supervisor *sv)
{
	usec_t		at = sv->ss.term_at + sv->opt->grace;

	/* lost at the server (121): the grace period is all that is left */
	if (sv->ss.stop_reason != STOP_LOST)
		at = min_us(at, sv->rs.valid_until - sv->opt->margin);
	return at;
}

/*
 * While stopping: SIGTERM (and SIGCONT, should it be stopped) once to
 * each of COMMAND's processes as they are found, SIGKILL to all from the
 * kill point on.  A process that may not be signalled (a setuid program)
 * is waited for.
 */
static void
signal_tree(Supervisor *sv, usec_t now)
{
	bool		killing = now >= kill_point(sv);
	size_t		i;

	sv->killing |= killing;
	for (i = 0; i < sv->tree.n; i++)
	{
		pid_t		pid = sv->tree.pids[i];

		if (killing)
			kill(pid, SIGKILL);
		else if (!pidset_has(&sv->termed, pid))
		{
			kill(pid, SIGTERM);
			kill(pid, SIGCONT);
			pidset_add(&sv->termed, pid);
		}
	}
}

static void
begin_stop(Supervisor *sv, StopReason reason, usec_t now)
{
	const char *lease = shown(sv->opt->lease);
	usec_t		kill_in;
	char		how[128];

	sv->ss.stop_reason = reason;
	sv->ss.term_at = now;
	sv->report = true;
	/* SIGTERM first, the message after */
	descendants(my_pid, &sv->tree);
	signal_tree(sv, now);
	sv->next_look = now + TREE_POLL;
	kill_in = kill_point(sv) - now;
	/* found late (we did not run): past the kill point, no SIGTERM at all */
	if (kill_in <= 0)
		snprintf(how, sizeof(how), "SIGKILL now, the kill point having passed %s ago",
				 fmt_duration(-kill_in));
	else
		snprintf(how, sizeof(how), "SIGTERM now, SIGKILL in %s", fmt_duration(kill_in));
	switch (reason)
	{
		case STOP_NONE:
			break;
		case STOP_LOST:
			log_info("stopping the command and every process it started: %s", how);
			break;
		case STOP_NOT_RENEWED:
			log_info("lease \"%s\" not renewed by the stop point: stopping the command and every process it started: %s (the kill point is %s before the lease can expire)",
					 lease, how, fmt_duration(sv->opt->margin));
			break;
		case STOP_RUNNER_GONE:
			log_error("fencing-lock (process %d) ended while the command ran: stopping the command and every process it started: %s",
					  (int) sv->runner, how);
			log_detail("Lease \"%s\" is not released: it expires by itself.", lease);
			break;
		case STOP_LEFTOVERS:
			log_verbose("the command left processes behind: stopping them: %s", how);
			break;
	}
}

/* COMMAND runs, or what it started: stop it when the time comes */
static void
supervise_tree(Supervisor *sv, usec_t now)
{
	if (sv->ss.stop_reason == STOP_NONE)
	{
		if (sv->rs.lost)
			begin_stop(sv, sv->rs.lost == EXIT_LOST ? STOP_LOST : STOP_NOT_RENEWED, now);
		else if (sv->runner_gone)
			begin_stop(sv, STOP_RUNNER_GONE, now);
		else if (now >= sv->rs.valid_until - sv->opt->margin - sv->opt->grace)
			begin_stop(sv, STOP_NOT_RENEWED, now);
	}
	if (!sv->child_done && sv->ss.stop_reason == STOP_NONE)
		return;
	/* look at COMMAND's processes again, now and then, and at the kill point */
	if (now < sv->next_look &&
		(sv->ss.stop_reason == STOP_NONE || sv->killing || now < kill_point(sv)))
		return;
	descendants(my_pid, &sv->tree);
	sv->next_look = now + TREE_POLL;
	if (sv->child_done && sv->tree.n == 0)
	{
		sv->ss.done = sv->report = true;
		return;
	}
	if (sv->ss.stop_reason == STOP_NONE)
		begin_stop(sv, STOP_LEFTOVERS, now);
	else
		signal_tree(sv, now);
}

static void
supervisor_read(Supervisor *sv)
{
	RunnerState rs;
	bool		gone = false;

	if (receive_state(sv->from_runner, &rs, sizeof(rs), &gone))
	{
		/* never shorter: the runner's are in order anyway */
		if (rs.valid_until < sv->rs.valid_until)
			rs.valid_until = sv->rs.valid_until;
		sv->rs = rs;
	}
	if (gone || getppid() != sv->runner)
		sv->runner_gone = true;
}

static void attribute_noreturn
supervisor_main(Supervisor *sv)
{
	for (;;)
	{
		struct pollfd pfd[3];
		int			nfds = 0;
		usec_t		now;
		usec_t		wake = NEVER;

		supervisor_read(sv);
		supervisor_signals(sv);
		now = now_us();
		if (!sv->started && !sv->ss.done)
		{
			if (sv->runner_gone)
				_exit(0);
			if (sv->rs.start)
				start_command(sv);
		}
		if (sv->started && !sv->ss.done)
			supervise_tree(sv, now);
		if (sv->report)
			sv->report = !send_state(sv->to_runner, &sv->ss, sizeof(sv->ss));
		if (sv->ss.done && (!sv->report || sv->runner_gone))
			_exit(0);

		if (sv->started && !sv->ss.done)
		{
			if (sv->ss.stop_reason == STOP_NONE)
				wake = sv->rs.valid_until - sv->opt->margin - sv->opt->grace;
			else if (sv->killing)
				wake = sv->next_look;
			else
				wake = min_us(sv->next_look, kill_point(sv));
			if (sv->child_done)
				wake = min_us(wake, sv->next_look);
			if (sv->tty_waiting)
			{
				hand_terminal(sv);
				wake = min_us(wake, now + TTY_POLL);
			}
		}
		pfd[nfds].fd = signal_pipe[0];
		pfd[nfds++].events = POLLIN;
		if (!sv->runner_gone)
		{
			pfd[nfds].fd = sv->from_runner;
			pfd[nfds++].events = POLLIN;
		}
		if (sv->report)
		{
			pfd[nfds].fd = sv->to_runner;
			pfd[nfds++].events = POLLOUT;
		}
		if (poll(pfd, nfds, poll_timeout(wake, now)) < 0 && errno != EINTR)
		{
			/* cannot wait: look again soon rather than spin */
			usleep(10000);
		}
	}
}

/*
 * The runner: acquires, renews and releases the lease, and tells the
 * supervisor.
 */
typedef struct Run
{
	const Options *opt;
	Server		server;
	char		token[32];		/* as the server printed it */
	usec_t		valid_until;	/* the lease is ours at least until then */
	usec_t		next_renew;
	char		renew_error[1024];	/* why the last renewal failed */
	usec_t		stalled_for;	/* the last time this process did not run */
	usec_t		stalled_at;
	pid_t		supervisor;
	int			to_supervisor;
	int			from_supervisor;
	bool		supervisor_eof;
	bool		supervisor_gone;	/* it exited, and was reaped */
	int			supervisor_status;
	RunnerState rs;				/* ours */
	bool		rs_unsent;		/* rs changed since it was written */
	SupervisorState ss;			/* the supervisor's latest */
	bool		started;		/* the supervisor was told to start COMMAND */
	int			interrupted;	/* signal that came before COMMAND started */
	int			lost;			/* 0, EXIT_LOST or EXIT_NOT_RENEWED */
	bool		grant_unknown;	/* the acquisition was sent, not answered */
	bool		orphaned;		/* the supervisor died: what it left is ours */
	PidSet		tree;
} Run;

static void lose(Run *run, int status, const char *fmt,...) attribute_printf(3, 4);

static usec_t
stop_point(const Run *run)
{
	return run->valid_until - run->opt->margin - run->opt->grace;
}

static void
tell_supervisor(Run *run)
{
	run->rs_unsent = !send_state(run->to_supervisor, &run->rs, sizeof(run->rs));
}

static void
start_supervisor(Run *run)
{
	int			to_sv[2];
	int			from_sv[2];
	sigset_t	all;
	sigset_t	old;
	pid_t		runner = getpid();
	pid_t		pid;

	if (!make_pipe(to_sv) || !make_pipe(from_sv))
		exit(EXIT_FAILED);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0)
	{
		Supervisor	sv;

		memset(&sv, 0, sizeof(sv));
		sv.opt = run->opt;
		sv.runner = runner;
		sv.runner_pgrp = getpgrp();
		sv.from_runner = to_sv[0];
		sv.to_runner = from_sv[1];
		sv.tty_fd = -1;
		sv.exec_error_fd = -1;
		close(to_sv[1]);
		close(from_sv[0]);
		my_pid = getpid();
		forward_to = 0;
		close(signal_pipe[0]);
		close(signal_pipe[1]);
		if (!make_pipe(signal_pipe))
			_exit(EXIT_FAILED);
		/* not in the caller's job: job control does not stop it */
		setpgid(0, 0);
#ifdef PR_SET_CHILD_SUBREAPER
		/* orphans of COMMAND's come to us, to be stopped and waited for */
		prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
		sigprocmask(SIG_SETMASK, &old, NULL);
		supervisor_main(&sv);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0)
	{
		log_error("could not start the supervisor process: %s", strerror(errno));
		exit(EXIT_FAILED);
	}
	close(to_sv[0]);
	close(from_sv[1]);
	run->supervisor = pid;
	run->to_supervisor = to_sv[1];
	run->from_supervisor = from_sv[0];
}

/* reap the supervisor, or the orphans it left */
static void
runner_reap(Run *run)
{
	for (;;)
	{
		siginfo_t	info;
		int			status;

		memset(&info, 0, sizeof(info));
		if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0)
			return;
		/* the handler must not signal its PID once it can be reused */
		if (info.si_pid == run->supervisor)
			forward_to = 0;
		if (waitpid(info.si_pid, &status, WNOHANG) != info.si_pid)
			return;
		if (info.si_pid == run->supervisor)
		{
			run->supervisor_gone = true;
			run->supervisor_status = status;
		}
	}
}

static void
runner_signals(Run *run)
{
	int			signo;

	while ((signo = next_signal()) != 0)
	{
		if (signo == SIGCHLD || signo == SIGCONT)
			continue;
		if (signo == SIGTSTP)
		{
			/* stopped, it would renew no lease */
			log_warning("fencing-lock cannot be suspended while it holds a lease or waits for one: SIGTSTP ignored");
			continue;
		}
		/* once COMMAND started, the handler passed it on */
		if (!run->started && !run->interrupted)
			run->interrupted = signo;
	}
	runner_reap(run);
}

static void
runner_read(Run *run)
{
	receive_state(run->from_supervisor, &run->ss, sizeof(run->ss), &run->supervisor_eof);
}

/* the lease */

static void
lose(Run *run, int status, const char *fmt,...)
{
	char		why[1536];
	va_list		ap;

	if (run->lost)
		return;
	run->lost = status;
	if (run->server.busy)
		call_fail(&run->server, "abandoned");
	if (run->started)
	{
		/* the supervisor stops COMMAND: tell it first, say why after */
		run->rs.lost = status;
		tell_supervisor(run);
		/* should someone have stopped it */
		if (!run->supervisor_gone)
			kill(run->supervisor, SIGCONT);
	}
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_error("lease \"%s\" lost: %s", shown(run->opt->lease), why);
}

static void renewal_done(Run *run);

static void
start_renewal(Run *run, usec_t now)
{
	static const Oid types[3] = {TEXTOID, INT8OID, INTERVALOID};
	char		ttl[64];
	const char *params[3];
	usec_t		deadline = now + run->opt->call_timeout;

	interval_text(ttl, sizeof(ttl), run->opt->ttl);
	params[0] = run->opt->lease;
	params[1] = run->token;
	params[2] = ttl;
	/* no later than the stop point: an answer after it changes nothing */
	if (run->started)
		deadline = min_us(deadline, stop_point(run));
	call_begin(&run->server, "SELECT fencing.lease_renew($1, $2, $3)", 3, types, params,
			   deadline);
	if (!run->server.busy)
		renewal_done(run);		/* failed at once: could not connect */
}

/* A renewal finished: extend the lease, or note why not. */
static void
renewal_done(Run *run)
{
	Server	   *s = &run->server;
	const char *value;
	const char *sqlstate;

	if (s->status == CALL_DONE)
	{
		value = result_value(s->result);
		if (value && strcmp(value, "t") == 0)
		{
			/* the server ran it after it was sent */
			if (s->sent_at + run->opt->ttl > run->valid_until)
				run->valid_until = s->sent_at + run->opt->ttl;
			run->next_renew = s->sent_at + run->opt->renew_every;
			run->renew_error[0] = '\0';
			if (run->started)
			{
				run->rs.valid_until = run->valid_until;
				tell_supervisor(run);
			}
			log_verbose("renewed lease \"%s\" for %s", shown(run->opt->lease), fmt_duration(run->opt->ttl));
			return;
		}
		if (value)
		{
			lose(run, EXIT_LOST, "the server refused to renew it: another holder has taken it over, or it was released or had expired");
			return;
		}
		sqlstate = PQresultErrorField(s->result, PG_DIAG_SQLSTATE);
		if (sqlstate && strcmp(sqlstate, LOST_AT_FAILOVER) == 0)
		{
			lose(run, EXIT_LOST, "lost at a failover of the server: %s", result_error(s->result));
			return;
		}
		snprintf(run->renew_error, sizeof(run->renew_error), "lease_renew failed: %s",
				 result_error(s->result));
	}
	else
		snprintf(run->renew_error, sizeof(run->renew_error), "%s", s->error);
	if (!run->started)
	{
		lose(run, EXIT_NOT_RENEWED, "acquired, but not renewed before the command could start: %s",
			 run->renew_error);
		return;
	}
	log_verbose("renewal failed; retrying: %s", run->renew_error);
	run->next_renew = now_us() + min_us(RETRY_PAUSE, run->opt->renew_every);
}

/* The stop point passed without a renewal: say why. */
static void
lose_not_renewed(Run *run, usec_t now)
{
	usec_t		last_sent = run->valid_until - run->opt->ttl;
	const Server *s = &run->server;

	if (s->blocked_for >= STALL_REPORTED && s->blocked_at > last_sent)
		lose(run, EXIT_NOT_RENEWED,
			 "not renewed in time: fencing-lock was held up for %s inside libpq, connecting to the server (a host name lookup, which cannot be interrupted), and the last renewal that succeeded was sent %s ago",
			 fmt_duration(s->blocked_for), fmt_duration(now - last_sent));
	else if (run->stalled_for >= STALL_REPORTED && run->stalled_at > last_sent)
		lose(run, EXIT_NOT_RENEWED,
			 "not renewed in time: fencing-lock itself did not run for %s (it was stopped, or not scheduled), and the last renewal was sent %s ago",
			 fmt_duration(run->stalled_for), fmt_duration(now - last_sent));
	else if (run->renew_error[0])
		lose(run, EXIT_NOT_RENEWED, "not renewed in time: the last renewal that succeeded was sent %s ago; since then: %s",
			 fmt_duration(now - last_sent), run->renew_error);
	else
		lose(run, EXIT_NOT_RENEWED, "not renewed in time: the last renewal that succeeded was sent %s ago",
			 fmt_duration(now - last_sent));
}

/*
 * Wait for the call in flight, watching the signals.  With interruptible,
 * a signal ends the wait (CALL_INTERRUPTED, the signal in
 * run->interrupted); else signals are noted and ignored.
 */
static CallResult
call_wait(Run *run, bool interruptible)
{
	Server	   *s = &run->server;

	for (;;)
	{
		struct pollfd pfd[2];
		CallResult	r;
		usec_t		now;
		int			nfds = 0;

		runner_signals(run);
		if (interruptible && run->interrupted)
		{
			call_fail(s, "interrupted");
			return CALL_INTERRUPTED;
		}
		r = call_step(s);
		if (r != CALL_PENDING)
			return r;
		now = now_us();
		if (now >= s->deadline)
			return call_expire(s);
		pfd[nfds].fd = signal_pipe[0];
		pfd[nfds++].events = POLLIN;
		pfd[nfds].fd = PQsocket(s->conn);
		pfd[nfds++].events = call_events(s);
		if (poll(pfd, nfds, poll_timeout(s->deadline, now)) < 0 && errno != EINTR)
			return call_fail(s, "poll failed: %s", strerror(errno));
	}
}

/*
 * Acquire the lease.  Returns 0 with run->token set, else the exit status
 * (the reason reported).
 */
static int
acquire(Run *run)
{
	static const Oid types[4] = {TEXTOID, TEXTOID, INTERVALOID, INTERVALOID};
	const Options *opt = run->opt;
	char		ttl[64];
	char		wait[64];
	const char *params[4];
	const char *value;
	CallResult	r;

	interval_text(ttl, sizeof(ttl), opt->ttl);
	interval_text(wait, sizeof(wait), opt->wait);
	params[0] = opt->lease;
	params[1] = opt->holder;
	params[2] = ttl;
	params[3] = wait;

	/*
	 * The server ends the wait itself; the rest (connecting first) may take
	 * longer than a short TTL's call timeout, and the lease's validity is
	 * counted from the sending anyway.
	 */
	call_begin(&run->server, "SELECT fencing.lease_acquire($1, $2, $3, $4)", 4, types, params,
			   now_us() + opt->wait +
			   (opt->call_timeout > ACQUIRE_TIMEOUT ? opt->call_timeout : ACQUIRE_TIMEOUT));
	r = call_wait(run, true);
	if (r == CALL_INTERRUPTED || r == CALL_FAILED)
		run->grant_unknown = run->server.sent_at != 0;
	if (r == CALL_INTERRUPTED)
		return 128 + run->interrupted;
	if (r == CALL_FAILED)
	{
		log_error("could not acquire lease \"%s\": %s", shown(opt->lease), run->server.error);
		return EXIT_FAILED;
	}
	if (PQresultStatus(run->server.result) != PGRES_TUPLES_OK)
	{
		log_error("could not acquire lease \"%s\": %s", shown(opt->lease), result_error(run->server.result));
		return EXIT_FAILED;
	}
	value = result_value(run->server.result);
	if (value == NULL)
	{
		if (opt->wait > 0)
			log_verbose("lease \"%s\" is held by another holder, also after waiting %s; the command was not run",
						shown(opt->lease), fmt_duration(opt->wait));
		else
			log_verbose("lease \"%s\" is held by another holder; the command was not run", shown(opt->lease));
		return EXIT_HELD;
	}
	snprintf(run->token, sizeof(run->token), "%s", value);
	/* granted after it was sent, at the latest when answered */
	run->valid_until = run->server.sent_at + opt->ttl;
	run->next_renew = run->server.sent_at + opt->renew_every;
	log_verbose("acquired lease \"%s\" as holder \"%s\": token %s, ttl %s",
				shown(opt->lease), shown(opt->holder), run->token, fmt_duration(opt->ttl));
	return 0;
}

/*
 * The acquisition did not finish (a signal, no answer): the server may
 * have granted it all the same.  Release what this holder holds of the
 * lease, as far as the server answers in time.
 */
static void
release_unknown_grant(Run *run)
{
	static const Oid types[2] = {TEXTOID, TEXTOID};
	const char *params[2];

	params[0] = run->opt->lease;
	params[1] = run->opt->holder;
	call_begin(&run->server,
			   "SELECT fencing.lease_release(name, token) FROM fencing.lease_status"
			   " WHERE name = $1 AND slot = 0 AND holder = $2 AND state = 'held'",
			   2, types, params, now_us() + run->opt->call_timeout);
	call_wait(run, false);
}

/* Release the lease (COMMAND has ended): best effort, with a deadline. */
static void
release(Run *run)
{
	static const Oid types[2] = {TEXTOID, INT8OID};
	const char *params[2];
	usec_t		deadline;
	CallResult	r = CALL_FAILED;
	int			attempt;

	/*
	 * A renewal still in flight goes first, whatever it answers: the
	 * command has ended, and the release tells whether the lease was still
	 * held.
	 */
	if (run->server.busy)
		call_wait(run, false);
	deadline = now_us() + run->opt->call_timeout;
	params[0] = run->opt->lease;
	params[1] = run->token;
	/* a second try on a new connection, if the first failed at once */
	for (attempt = 0; attempt < 2 && now_us() < deadline; attempt++)
	{
		call_begin(&run->server, "SELECT fencing.lease_release($1, $2)", 2, types, params, deadline);
		r = call_wait(run, false);
		if (r == CALL_DONE)
			break;
	}
	if (run->lost)
		return;					/* said already */
	if (r == CALL_DONE && PQresultStatus(run->server.result) == PGRES_TUPLES_OK)
	{
		const char *value = result_value(run->server.result);

		if (value && strcmp(value, "t") == 0)
			log_verbose("released lease \"%s\"", shown(run->opt->lease));
		else
			log_warning("lease \"%s\" was no longer held when the command ended: it was lost after the last renewal",
						shown(run->opt->lease));
		return;
	}
	log_warning("could not release lease \"%s\": %s", shown(run->opt->lease),
				r == CALL_DONE ? result_error(run->server.result) : run->server.error);
	log_detail("It expires by itself within %s.", fmt_duration(run->opt->ttl));
}

/*
 * The supervisor died while COMMAND ran (SIGKILL): COMMAND got SIGKILL
 * with it (PR_SET_PDEATHSIG), and what it started came to us, the
 * subreaper.  SIGKILL to all of it, until nothing is left.
 */
static bool
stop_orphans(Run *run)
{
	size_t		i;

	descendants(my_pid, &run->tree);
	for (i = 0; i < run->tree.n; i++)
		kill(run->tree.pids[i], SIGKILL);
	return run->tree.n == 0;
}

/*
 * Keep the lease while COMMAND runs, until the supervisor says that
 * COMMAND and all it started are gone (or, before COMMAND started, until
 * a signal or the lease's loss).
 */
static void
keep_lease(Run *run)
{
	for (;;)
	{
		struct pollfd pfd[4];
		int			nfds = 0;
		usec_t		now;
		usec_t		wake;
		usec_t		expected;
		int			timeout;

		runner_signals(run);
		runner_read(run);
		/* a signal that reached the supervisor before COMMAND started */
		if (!run->started && run->ss.interrupted && !run->interrupted)
			run->interrupted = run->ss.interrupted;
		if (run->server.busy && call_step(&run->server) != CALL_PENDING)
			renewal_done(run);
		now = now_us();
		if (run->server.busy && now >= run->server.deadline)
		{
			call_expire(&run->server);
			renewal_done(run);
		}
		/* the supervisor reached the stop point before we did: we were held up */
		if (!run->lost && run->ss.stop_reason == STOP_NOT_RENEWED)
			lose_not_renewed(run, now);
		if (!run->lost && run->started && now >= stop_point(run))
			lose_not_renewed(run, now);
		if (run->ss.done)
			return;
		if (run->supervisor_gone && !run->orphaned)
		{
			/* its last word may still be in the pipe */
			runner_read(run);
			if (run->ss.done)
				return;
			if (!run->started)
				return;
			run->orphaned = true;
			log_error("the supervisor process (%d) %s while the command ran: killing what is left of the command (SIGKILL)",
					  (int) run->supervisor, describe_status(run->supervisor_status));
		}
		if (run->orphaned && stop_orphans(run))
			return;
		if (!run->lost && !run->server.busy && now >= run->next_renew)
			start_renewal(run, now);

		if (!run->started)
		{
			if (run->interrupted || run->lost)
				return;

			/*
			 * The grant came at some time between sending the acquisition
			 * and its answer: after a long wait, only a renewal tells how
			 * long the lease is ours, and the command waits for it.
			 */
			if (!run->server.busy && now < run->next_renew)
			{
				/* from now on the handler passes signals on */
				forward_to = run->supervisor;
				run->started = true;
				run->rs.start = true;
				snprintf(run->rs.token, sizeof(run->rs.token), "%s", run->token);
				run->rs.valid_until = run->valid_until;
				tell_supervisor(run);
			}
		}
		if (run->rs_unsent)
			tell_supervisor(run);

		/* sleep until the next thing to do */
		wake = NEVER;
		if (!run->lost)
		{
			if (run->started)
				wake = min_us(wake, stop_point(run));
			if (!run->server.busy)
				wake = min_us(wake, run->next_renew);
		}
		if (run->server.busy)
			wake = min_us(wake, run->server.deadline);
		if (run->orphaned)
			wake = min_us(wake, now + TREE_POLL);
		timeout = poll_timeout(wake, now);

		pfd[nfds].fd = signal_pipe[0];
		pfd[nfds++].events = POLLIN;
		if (!run->supervisor_eof)
		{
			pfd[nfds].fd = run->from_supervisor;
			pfd[nfds++].events = POLLIN;
		}
		if (run->rs_unsent)
		{
			pfd[nfds].fd = run->to_supervisor;
			pfd[nfds++].events = POLLOUT;
		}
		if (run->server.busy)
		{
			pfd[nfds].fd = PQsocket(run->server.conn);
			pfd[nfds++].events = call_events(&run->server);
		}
		expected = timeout < 0 ? NEVER : now + (usec_t) timeout * USECS_PER_MS;
		if (poll(pfd, nfds, timeout) < 0 && errno != EINTR)
		{
			/* the supervisor stops COMMAND when it sees us gone */
			log_error("poll failed: %s", strerror(errno));
			exit(EXIT_FAILED);
		}
		/* a wake-up long after the time asked for: we were stopped */
		now = now_us();
		if (expected != NEVER && now - expected >= STALL_REPORTED)
		{
			run->stalled_for = now - expected;
			run->stalled_at = now;
		}
	}
}

int
main(int argc, char **argv)
{
	Options		opt;
	Run			run;
	const char *keywords[8];
	const char *values[8];
	int			status;

	open_standard_fds();
	log_open();
	parse_options(argc, argv, &opt);
	memset(&run, 0, sizeof(run));
	run.opt = &opt;
	connection_options(&opt, keywords, values);
	run.server.keywords = keywords;
	run.server.values = values;
	setup_signals();
	find_children_files();
#ifdef PR_SET_CHILD_SUBREAPER
	/* should the supervisor die, what it supervised comes to us */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
	start_supervisor(&run);

	status = acquire(&run);
	if (status != 0)
	{
		if (status > 128)
			log_info("interrupted by %s before the lease was acquired; the command was not run",
					 signal_name(status - 128));
		if (run.grant_unknown)
			release_unknown_grant(&run);
	}
	else
	{
		keep_lease(&run);
		if (!run.started && run.interrupted)
		{
			log_info("interrupted by %s before the command started; it was not run",
					 signal_name(run.interrupted));
			status = 128 + run.interrupted;
		}
		else if (!run.started && run.lost)
		{
			if (run.lost != EXIT_FAILED)
				log_detail("The command was not run.");
			status = run.lost;
		}
		else if (!run.started || run.ss.start_failed)
		{
			if (!run.started)
				log_error("the supervisor process (%d) %s before the command started; it was not run",
						  (int) run.supervisor, describe_status(run.supervisor_status));
			status = EXIT_FAILED;
		}
		else if (run.ss.interrupted)
		{
			log_info("interrupted by %s before the command started; it was not run",
					 signal_name(run.ss.interrupted));
			status = 128 + run.ss.interrupted;
		}
		else if (run.orphaned)
			status = run.lost ? run.lost : EXIT_FAILED;
		else if (run.lost)
		{
			log_info("the command %s after the lease was lost", describe_status(run.ss.status));
			status = run.lost;
		}
		else
			status = shell_status(run.ss.status);
		if (run.lost != EXIT_LOST)
			release(&run);
	}

	/* the supervisor, if it still waits for COMMAND's start, ends now */
	close(run.to_supervisor);
	server_disconnect(&run.server);
	if (run.server.result)
		PQclear(run.server.result);
	return status;
}
