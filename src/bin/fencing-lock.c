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
 * COMMAND is stopped: SIGTERM to its process group, SIGKILL after a grace
 * period.  The exit statuses are listed in usage() and docs/fencing-lock.md.
 *
 * Every call to the server has a deadline kept here, in the client: a
 * frozen or partitioned server never answers, and statement_timeout runs
 * on the server (docs/ha.md).  All timing uses a monotonic clock that also
 * counts time the machine spent suspended (CLOCK_BOOTTIME where there is
 * one), never the wall clock.  Every call is one statement in autocommit
 * and nothing depends on the session, so it works through pgbouncer in
 * transaction mode.
 *
 * The lease's timeline, from the moment s at which the last renewal that
 * succeeded (or the acquisition) was sent, with T = --ttl,
 * R = --renew-every, D = --call-timeout, G = --grace:
 *
 *	 s + R		 the next renewal is sent; it is answered by s + R + D, or
 *				 counts as lost and is retried, on a new connection if need be
 *	 s + T - G	 the stop point: not renewed by then, the lease counts as
 *				 lost, and COMMAND gets SIGTERM
 *	 s + T		 SIGKILL.  The server set the expiry at s + T or later (the
 *				 renewal ran after it was sent), so COMMAND is stopped before
 *				 the lease can expire.
 *
 * Hence R + D + G <= T is required.  Only the rates of the two clocks must
 * agree, not their readings.
 *
 * COMMAND runs in a process group of its own; signals are passed to the
 * whole group, and whatever is left of the group when COMMAND exits is
 * stopped (SIGTERM, then SIGKILL) before the lease is released.  On Linux
 * fencing-lock is the subreaper of COMMAND's descendants (so it reaps the
 * group's orphans itself), and COMMAND gets SIGKILL should fencing-lock
 * die without stopping it.
 *
 * Copyright: fencing extension authors
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

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
#define RETRY_PAUSE		(250 * USECS_PER_MS)	/* after a failed renewal */
#define GROUP_POLL		(20 * USECS_PER_MS) /* while the group outlives COMMAND */
#define STALL_REPORTED	(500 * USECS_PER_MS)	/* this process did not run */
#define ACQUIRE_TIMEOUT (5 * USECS_PER_SEC) /* at least, beyond --wait */

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
} Server;

/* one run: the lease, COMMAND, and how it ends */
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
	bool		started;		/* COMMAND was started */
	pid_t		child;			/* COMMAND, leader of its process group */
	int			exec_error_fd;	/* COMMAND's exec errno comes here */
	int			tty_fd;			/* the terminal COMMAND got, or -1 */
	bool		child_done;
	int			child_status;
	bool		group_gone;		/* nothing is left of COMMAND's group */
	int			interrupted;	/* signal that came before COMMAND started */
	int			sigints;		/* SIGINTs passed on */
	int			lost;			/* 0, EXIT_LOST or EXIT_NOT_RENEWED */
	usec_t		term_sent_at;	/* SIGTERM went to the group then */
	usec_t		kill_at;		/* SIGKILL goes to the group then */
	bool		kill_sent;
	bool		grant_unknown;	/* the acquisition was sent, not answered */
} Run;

static const char *progname = "fencing-lock";
static bool verbose = false;

/* signals passed on to COMMAND; those ignored at start stay ignored */
static const int forwarded_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
static bool forwarding[NSIG];
static struct sigaction saved_sigpipe;
static struct sigaction saved_sigttou;
static sigset_t startup_mask;
static int	signal_pipe[2] = {-1, -1};

/* messages, in the style of PostgreSQL's client programs */

static void log_line(const char *level, const char *fmt, va_list ap) attribute_printf(2, 0);
static void log_error(const char *fmt,...) attribute_printf(1, 2);
static void log_detail(const char *fmt,...) attribute_printf(1, 2);
static void log_hint(const char *fmt,...) attribute_printf(1, 2);
static void log_warning(const char *fmt,...) attribute_printf(1, 2);
static void log_info(const char *fmt,...) attribute_printf(1, 2);
static void log_verbose(const char *fmt,...) attribute_printf(1, 2);
static void usage_error(const char *fmt,...) attribute_printf(1, 2) attribute_noreturn;
static void lose(Run *run, int status, const char *fmt,...) attribute_printf(3, 4);
static CallResult call_fail(Server *s, const char *fmt,...) attribute_printf(2, 3);

static void
log_line(const char *level, const char *fmt, va_list ap)
{
	char		msg[2048];
	size_t		len;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* libpq's messages end with a newline */
	len = strlen(msg);
	while (len > 0 && msg[len - 1] == '\n')
		msg[--len] = '\0';
	fprintf(stderr, "%s: %s%s%s\n", progname, level ? level : "", level ? ": " : "", msg);
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

static void
usage(void)
{
	printf("%s runs a command while it holds a lease of the fencing extension.\n\n", progname);
	printf("Usage:\n");
	printf("  %s [OPTION]... NAME -- COMMAND [ARG]...\n\n", progname);
	printf("It acquires lease NAME, runs COMMAND with FENCING_TOKEN, FENCING_LEASE and\n"
		   "FENCING_HOLDER in its environment, renews the lease while COMMAND runs,\n"
		   "stops COMMAND (SIGTERM, then SIGKILL) if the lease is lost or cannot be\n"
		   "renewed in time, and releases the lease when COMMAND ends.\n\n");
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
		   "a number alone is seconds.  The renewal period, the call timeout and the\n"
		   "grace period must add up to at most the TTL; the TTL is 1s to 1d.\n\n");
	printf("Exit status:\n");
	printf("  COMMAND's exit status, or 128+N if signal N ended COMMAND\n");
	printf("  %d  the lease is held by another holder; COMMAND was not run\n", EXIT_HELD);
	printf("  %d  the lease was lost (the server refused to renew it); COMMAND was\n"
		   "       stopped\n", EXIT_LOST);
	printf("  %d  the lease could not be renewed in time; COMMAND was stopped\n", EXIT_NOT_RENEWED);
	printf("  %d  fencing-lock failed (usage, connection, server error); COMMAND was\n"
		   "       not run\n", EXIT_FAILED);
	printf("  %d  COMMAND could not be executed\n", EXIT_CANNOT_EXEC);
	printf("  %d  COMMAND was not found\n", EXIT_NOT_FOUND);
	printf("  128+N  a signal N came before COMMAND started\n");
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
 * a unit (ms, s, m or min, h, d; none: seconds).  False for anything else;
 * values too large for the checks' ranges come out as NEVER.
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
	size_t		i;

	for (; *s >= '0' && *s <= '9'; s++)
	{
		digits = true;
		if (whole > 100000000)	/* over 3 years in seconds: too large anyway */
			big = true;
		else
			whole = whole * 10 + (*s - '0');
	}
	if (*s == '.')
	{
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
	if (big || whole > 100000000)
		*out = NEVER;
	else
		*out = whole * unit + frac * unit / scale;
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
	static char buf[32];

	switch (signo)
	{
		case SIGHUP:
			return "SIGHUP";
		case SIGINT:
			return "SIGINT";
		case SIGQUIT:
			return "SIGQUIT";
		case SIGKILL:
			return "SIGKILL";
		case SIGTERM:
			return "SIGTERM";
		case SIGUSR1:
			return "SIGUSR1";
		case SIGUSR2:
			return "SIGUSR2";
		case SIGTSTP:
			return "SIGTSTP";
		case SIGTTIN:
			return "SIGTTIN";
		case SIGTTOU:
			return "SIGTTOU";
		case SIGSTOP:
			return "SIGSTOP";
		case SIGPIPE:
			return "SIGPIPE";
		case SIGSEGV:
			return "SIGSEGV";
		case SIGABRT:
			return "SIGABRT";
	}
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
		log_error("invalid value \"%s\" for option %s", value, option);
		log_hint("A duration is a number with a unit, ms, s, m or min, h, d, as in 500ms, 30s, 5min.");
		exit(EXIT_FAILED);
	}
	return us;
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
				usage_error("option \"%s\" requires an argument", argv[optind - 1]);
				break;
			default:
				if (optopt != 0)
					usage_error("invalid option \"-%c\"", optopt);
				usage_error("unrecognized option \"%s\"", argv[optind - 1]);
		}
	}

	if (optind >= dashdash)
		usage_error("no lease name given");
	if (dashdash - optind > 1)
		usage_error("too many arguments before \"--\": \"%s\" after the lease name \"%s\"",
					argv[optind + 1], argv[optind]);
	opt->lease = argv[optind];
	if (dashdash >= argc)
		usage_error("no command given: put it after \"--\"");
	if (dashdash + 1 >= argc)
		usage_error("no command given after \"--\"");
	opt->command = argv + dashdash + 1;

	/* the lease's timing */
	if (opt->ttl < MIN_TTL || opt->ttl > MAX_DURATION)
	{
		log_error("--ttl must be from 1 s to 1 day");
		log_detail("A shorter lease cannot be kept by a process that the machine may not schedule for a while; the server takes at most a day.");
		exit(EXIT_FAILED);
	}
	if (opt->wait > MAX_DURATION)
	{
		log_error("--wait must be at most 1 day");
		exit(EXIT_FAILED);
	}
	if (!have_renew)
		opt->renew_every = opt->ttl / 3;
	if (!have_timeout)
		opt->call_timeout = min_us(opt->ttl / 6, DEFAULT_CAP);
	if (!have_grace)
		opt->grace = min_us(opt->ttl / 6, DEFAULT_CAP);
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
	if (opt->renew_every > MAX_DURATION || opt->call_timeout > MAX_DURATION ||
		opt->grace > MAX_DURATION ||
		opt->renew_every + opt->call_timeout + opt->grace > opt->ttl)
	{
		log_error("--renew-every (%s), --call-timeout (%s) and --grace (%s) add up to more than --ttl (%s)",
				  opt->renew_every > MAX_DURATION ? "over 1 day" : fmt_duration(opt->renew_every),
				  opt->call_timeout > MAX_DURATION ? "over 1 day" : fmt_duration(opt->call_timeout),
				  opt->grace > MAX_DURATION ? "over 1 day" : fmt_duration(opt->grace),
				  fmt_duration(opt->ttl));
		log_detail("A renewal sent at the end of each period must be answered within the call timeout, before the grace period that ends at the lease's expiry begins.");
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
		s->conn = PQconnectStartParams(s->keywords, s->values, 1);
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
		PostgresPollingStatusType st = PQconnectPoll(s->conn);

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

static void
on_signal(int signo)
{
	int			save_errno = errno;
	unsigned char b = (unsigned char) signo;

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

static void
setup_signals(void)
{
	struct sigaction sa;
	struct sigaction old;
	struct sigaction ign;
	sigset_t	unblock;
	size_t		i;

	if (pipe(signal_pipe) != 0)
	{
		log_error("could not create a pipe: %s", strerror(errno));
		exit(EXIT_FAILED);
	}
	set_cloexec_nonblock(signal_pipe[0]);
	set_cloexec_nonblock(signal_pipe[1]);
	sigprocmask(SIG_SETMASK, NULL, &startup_mask);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigfillset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
	{
		int			signo = forwarded_signals[i];

		/* ignored at start (nohup, a background job): COMMAND inherits that */
		sigaction(signo, NULL, &old);
		if (old.sa_handler == SIG_IGN)
			continue;
		forwarding[signo] = true;
		sigaction(signo, &sa, NULL);
	}
	sigaction(SIGCHLD, &sa, NULL);

	/* libpq writes to sockets the server may have closed; the terminal */
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &ign, &saved_sigpipe);
	sigaction(SIGTTOU, &ign, &saved_sigttou);
	sigemptyset(&unblock);
	for (i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
		sigaddset(&unblock, forwarded_signals[i]);
	sigaddset(&unblock, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &unblock, NULL);

#ifdef PR_SET_CHILD_SUBREAPER
	/* orphans of COMMAND's group come to us, to be reaped and waited for */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif
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

/* COMMAND */

static bool
group_alive(pid_t pgid)
{
	return kill(-pgid, 0) == 0 || errno == EPERM;
}

static void
signal_group(Run *run, int signo)
{
	if (!run->started || run->group_gone)
		return;
	if (kill(-run->child, signo) != 0 && errno != ESRCH)
		log_warning("could not send %s to the command: %s", signal_name(signo), strerror(errno));
}

/*
 * Our controlling terminal, if we are in its foreground: COMMAND gets it
 * for its own group, so that it reads the terminal and gets the
 * terminal's signals (Ctrl-C) as it would without us.
 */
static int
foreground_terminal(void)
{
	int			fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (tcgetpgrp(fd) != getpgrp())
	{
		close(fd);
		return -1;
	}
	return fd;
}

/* in the child: become COMMAND; never returns */
static void
exec_command(const Run *run, pid_t parent, int error_fd)
{
	int			e;
	size_t		i;

	setpgid(0, 0);
	if (run->tty_fd >= 0)
		tcsetpgrp(run->tty_fd, getpid());
#ifdef PR_SET_PDEATHSIG
	/* if fencing-lock dies (SIGKILL), nothing renews the lease: stop too */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(EXIT_FAILED);
#endif
	for (i = 0; i < sizeof(forwarded_signals) / sizeof(forwarded_signals[0]); i++)
		if (forwarding[forwarded_signals[i]])
			signal(forwarded_signals[i], SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigaction(SIGPIPE, &saved_sigpipe, NULL);
	sigaction(SIGTTOU, &saved_sigttou, NULL);
	sigprocmask(SIG_SETMASK, &startup_mask, NULL);

	execvp(run->opt->command[0], run->opt->command);
	e = errno;
	if (write(error_fd, &e, sizeof(e)) < 0)
	{
		/* the parent reports the exit status alone */
	}
	_exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC);
}

static bool
start_command(Run *run)
{
	int			error_pipe[2];
	sigset_t	all;
	sigset_t	old;
	pid_t		parent = getpid();
	pid_t		pid;

	setenv("FENCING_LEASE", run->opt->lease, 1);
	setenv("FENCING_TOKEN", run->token, 1);
	setenv("FENCING_HOLDER", run->opt->holder, 1);
	if (pipe(error_pipe) != 0)
	{
		log_error("could not create a pipe: %s", strerror(errno));
		return false;
	}
	set_cloexec_nonblock(error_pipe[0]);
	set_cloexec_nonblock(error_pipe[1]);
	run->tty_fd = foreground_terminal();

	/* no handler of ours may run in the child before exec */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0)
		exec_command(run, parent, error_pipe[1]);
	if (pid > 0)
	{
		/* as in the child: whichever runs first */
		setpgid(pid, pid);
		if (run->tty_fd >= 0)
			tcsetpgrp(run->tty_fd, pid);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(error_pipe[1]);
	if (pid < 0)
	{
		log_error("could not start the command: %s", strerror(errno));
		close(error_pipe[0]);
		return false;
	}
	run->child = pid;
	run->started = true;
	run->exec_error_fd = error_pipe[0];
	log_verbose("started the command (process %d)", (int) pid);
	return true;
}

/* take the terminal back from COMMAND's group */
static void
reclaim_terminal(Run *run)
{
	if (run->tty_fd < 0)
		return;
	tcsetpgrp(run->tty_fd, getpgrp());	/* SIGTTOU is ignored */
	close(run->tty_fd);
	run->tty_fd = -1;
}

static void
reap_children(Run *run)
{
	int			status;
	pid_t		pid;

	while ((pid = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0)
	{
		if (!run->started || pid != run->child)
			continue;			/* an orphan of the group's: reaped */
		if (WIFSTOPPED(status))
		{
			/*
			 * Ctrl-Z at COMMAND's terminal stops its group, and the shell
			 * waits for us, not for it: a stopped COMMAND could be resumed
			 * by no one, so it is resumed at once.
			 */
			if (WSTOPSIG(status) == SIGTSTP && run->tty_fd >= 0)
			{
				log_warning("the command cannot be suspended while it holds a lease; resuming it");
				kill(-run->child, SIGCONT);
			}
			else
				log_verbose("the command was stopped by %s; the lease is still renewed",
							signal_name(WSTOPSIG(status)));
			continue;
		}
		run->child_done = true;
		run->child_status = status;
		reclaim_terminal(run);
		log_verbose("the command %s", describe_status(status));
	}
}

/* Pass the signals that came on to COMMAND's group, and reap children. */
static void
handle_signals(Run *run)
{
	int			signo;

	while ((signo = next_signal()) != 0)
	{
		if (signo == SIGCHLD)
		{
			reap_children(run);
			continue;
		}
		if (!run->started)
		{
			/* before COMMAND runs: stop here */
			if (!run->interrupted)
				run->interrupted = signo;
			continue;
		}
		if (run->group_gone)
			continue;
		if (signo == SIGINT && ++run->sigints >= 2)
		{
			log_info("second SIGINT: killing the command (SIGKILL)");
			signal_group(run, SIGKILL);
			continue;
		}
		log_verbose("passing %s on to the command", signal_name(signo));
		signal_group(run, signo);
	}
	reap_children(run);
}

/* the lease */

static void
lose(Run *run, int status, const char *fmt,...)
{
	char		why[1536];
	va_list		ap;
	usec_t		now = now_us();

	if (run->lost)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	run->lost = status;
	if (run->server.busy)
		call_fail(&run->server, "abandoned");
	log_error("lease \"%s\" lost: %s", run->opt->lease, why);
	if (!run->started)
		return;
	if (run->group_gone)
		return;
	if (run->term_sent_at == 0)
	{
		log_detail("Stopping the command: SIGTERM now, SIGKILL in %s.", fmt_duration(run->opt->grace));
		signal_group(run, SIGTERM);
		run->term_sent_at = now;
		run->kill_at = now + run->opt->grace;
	}
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
		deadline = min_us(deadline, run->valid_until - run->opt->grace);
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
			log_verbose("renewed lease \"%s\" for %s", run->opt->lease, fmt_duration(run->opt->ttl));
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

	if (run->stalled_for >= STALL_REPORTED && run->stalled_at > last_sent)
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
 * a signal to pass on ends the wait (CALL_INTERRUPTED, the signal in
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

		handle_signals(run);
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
		if (poll(pfd, nfds, (int) min_us((s->deadline - now + 999) / 1000, INT_MAX)) < 0 &&
			errno != EINTR)
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
		log_error("could not acquire lease \"%s\": %s", opt->lease, run->server.error);
		return EXIT_FAILED;
	}
	if (PQresultStatus(run->server.result) != PGRES_TUPLES_OK)
	{
		log_error("could not acquire lease \"%s\": %s", opt->lease, result_error(run->server.result));
		return EXIT_FAILED;
	}
	value = result_value(run->server.result);
	if (value == NULL)
	{
		if (opt->wait > 0)
			log_verbose("lease \"%s\" is held by another holder, also after waiting %s; the command was not run",
						opt->lease, fmt_duration(opt->wait));
		else
			log_verbose("lease \"%s\" is held by another holder; the command was not run", opt->lease);
		return EXIT_HELD;
	}
	snprintf(run->token, sizeof(run->token), "%s", value);
	/* granted after it was sent, at the latest when answered */
	run->valid_until = run->server.sent_at + opt->ttl;
	run->next_renew = run->server.sent_at + opt->renew_every;
	log_verbose("acquired lease \"%s\" as holder \"%s\": token %s, ttl %s",
				opt->lease, opt->holder, run->token, fmt_duration(opt->ttl));
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
			log_verbose("released lease \"%s\"", run->opt->lease);
		else
			log_warning("lease \"%s\" was no longer held when the command ended: it was lost after the last renewal",
						run->opt->lease);
		return;
	}
	log_warning("could not release lease \"%s\": %s", run->opt->lease,
				r == CALL_DONE ? result_error(run->server.result) : run->server.error);
	log_detail("It expires by itself within %s.", fmt_duration(run->opt->ttl));
}

/*
 * Run COMMAND while the lease is renewed, until COMMAND and whatever is
 * left of its process group are gone (or, before COMMAND started, until a
 * signal or the lease's loss).
 */
static void
supervise(Run *run)
{
	const Options *opt = run->opt;

	for (;;)
	{
		struct pollfd pfd[2];
		int			nfds = 0;
		usec_t		now;
		usec_t		wake;
		usec_t		expected;
		int			timeout;

		handle_signals(run);
		if (run->server.busy && call_step(&run->server) != CALL_PENDING)
			renewal_done(run);
		now = now_us();
		if (run->server.busy && now >= run->server.deadline)
		{
			call_expire(&run->server);
			renewal_done(run);
		}
		if (!run->lost && run->started && now >= run->valid_until - opt->grace)
			lose_not_renewed(run, now);
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
			if (!run->server.busy && now < run->next_renew && !start_command(run))
			{
				run->lost = EXIT_FAILED;
				return;
			}
		}
		if (run->child_done && !run->group_gone)
		{
			if (!group_alive(run->child))
				run->group_gone = true;
			else if (run->term_sent_at == 0)
			{
				/* nothing of the command runs on after the release */
				log_verbose("the command left processes behind in its process group: stopping them (SIGTERM, SIGKILL in %s)",
							fmt_duration(opt->grace));
				signal_group(run, SIGTERM);
				run->term_sent_at = now;
				run->kill_at = now + opt->grace;
			}
		}
		if (run->started && run->child_done && run->group_gone)
			return;
		if (run->kill_at && !run->kill_sent && now >= run->kill_at)
		{
			signal_group(run, SIGKILL);
			run->kill_sent = true;
		}

		/* sleep until the next thing to do */
		wake = NEVER;
		if (!run->lost)
		{
			if (run->started)
				wake = min_us(wake, run->valid_until - opt->grace);
			if (!run->server.busy)
				wake = min_us(wake, run->next_renew);
		}
		if (run->server.busy)
			wake = min_us(wake, run->server.deadline);
		if (run->kill_at && !run->kill_sent)
			wake = min_us(wake, run->kill_at);
		if (run->child_done)
			wake = min_us(wake, now + GROUP_POLL);	/* its members are not all ours */
		timeout = wake == NEVER ? -1 : (int) min_us((wake - now + 999) / 1000, 3600 * 1000);
		if (timeout < 0 && wake != NEVER)
			timeout = 0;

		pfd[nfds].fd = signal_pipe[0];
		pfd[nfds++].events = POLLIN;
		if (run->server.busy)
		{
			pfd[nfds].fd = PQsocket(run->server.conn);
			pfd[nfds++].events = call_events(&run->server);
		}
		expected = timeout < 0 ? NEVER : now + (usec_t) timeout * USECS_PER_MS;
		if (poll(pfd, nfds, timeout) < 0 && errno != EINTR)
		{
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

/* why exec failed, as the child reported it */
static void
report_exec_error(Run *run)
{
	int			e;

	if (run->exec_error_fd < 0)
		return;
	if (read(run->exec_error_fd, &e, sizeof(e)) == (ssize_t) sizeof(e))
		log_error("could not execute command \"%s\": %s", run->opt->command[0], strerror(e));
	close(run->exec_error_fd);
	run->exec_error_fd = -1;
}

int
main(int argc, char **argv)
{
	Options		opt;
	Run			run;
	const char *keywords[8];
	const char *values[8];
	int			status;

	parse_options(argc, argv, &opt);
	memset(&run, 0, sizeof(run));
	run.opt = &opt;
	run.exec_error_fd = -1;
	run.tty_fd = -1;
	connection_options(&opt, keywords, values);
	run.server.keywords = keywords;
	run.server.values = values;
	setup_signals();

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
		supervise(&run);
		report_exec_error(&run);
		if (!run.started && run.interrupted)
		{
			log_info("interrupted by %s before the command started; it was not run",
					 signal_name(run.interrupted));
			status = 128 + run.interrupted;
		}
		else if (!run.started)
		{
			if (run.lost != EXIT_FAILED)
				log_detail("The command was not run.");
			status = run.lost;
		}
		else if (run.lost)
		{
			log_info("the command %s after the lease was lost", describe_status(run.child_status));
			status = run.lost;
		}
		else
			status = shell_status(run.child_status);
		if (run.lost != EXIT_LOST)
			release(&run);
	}

	server_disconnect(&run.server);
	if (run.server.result)
		PQclear(run.server.result);
	return status;
}
