# Copyright: fencing extension authors
#
# 065_fencing_lock.pl: the fencing-lock program (src/bin/fencing-lock.c),
# installed beside the server's programs, run for real against a cluster.
#
# The command it runs is t/065's cmd.pl (written below): it records in a
# file what happens to it (start with its environment, signals, fenced
# writes with $FENCING_TOKEN and their SQLSTATE, end), and waits for a
# file of the test's before it ends.  Everything that depends on timing
# waits for what the command recorded, for pg_stat_activity or for
# lease_status, never for a fixed time.
#
# Sections: usage and bad input (exit 125, nothing changes); one run, its
# environment and exit status; two runners on one name (120, and waiting
# in arrival order); exec failures (126, 127); signals passed through,
# the second SIGINT, signals while waiting; the lease refused (121, also
# LF005) with SIGTERM then SIGKILL; the runner frozen with SIGSTOP past its
# TTL (its supervisor stops the command in time), and both frozen (the
# command's fenced write refused with LF001); a renewal that hangs; the
# server stopped under a command (stopped before the lease could expire);
# a restart with the lease intact; what the command leaves behind, in its
# group or not; fencing-lock killed (its command too) and the takeover
# time; the stop time; what holds up or kills one of fencing-lock's two
# processes (a stderr nobody reads, SIGTSTP, other signals, a zombie,
# timeout(1), PDEATHSIG cleared, a resolver that hangs, closed stdout and
# stderr) and a command's status that is one of fencing-lock's; pgbouncer
# in transaction mode; a terminal.

# FENCING_LOCK_RUNS (default 3): runs of each timing measurement, for each
# TTL in seconds of FENCING_LOCK_TTLS (default 2), reported with note().
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use IPC::Run;
use POSIX ();
use Fcntl ();
use Time::HiRes qw(time usleep);

my $prog = 'fencing-lock';
BAIL_OUT("$prog is not on PATH: make install puts it into pg_config --bindir")
  unless in_path($prog);
my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $runs = $ENV{FENCING_LOCK_RUNS} // 3;
my @ttls = split ' ', $ENV{FENCING_LOCK_TTLS} // '2';
my $tmp = PostgreSQL::Test::Utils::tempdir;

# processes the test leaves running on purpose: gone when it ends, however
my @leftovers;
END { kill 'KILL', @leftovers if @leftovers }

my $node = PostgreSQL::Test::Cluster->new('lock');
$node->init;
# TCP too: a host name to look up (the resolver that hangs)
$node->append_conf('postgresql.conf', "max_connections = 60\nlisten_addresses = '127.0.0.1'\n");
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION fencing;
	CREATE ROLE app LOGIN;
	GRANT USAGE ON SCHEMA fencing TO app;
	CREATE TABLE res (id int PRIMARY KEY, body text, fence bigint);
	INSERT INTO res VALUES (1, 'empty', NULL);
	GRANT SELECT, UPDATE ON res TO app;
	CREATE DATABASE noext;
});
# fencing-lock and its commands reach the node through libpq's environment
$ENV{PGHOST} = $node->host;
$ENV{PGPORT} = $node->port;
$ENV{PGDATABASE} = 'postgres';

# ---------------------------------------------------------------------------
# the command

my $cmd = "$tmp/cmd.pl";
append_to_file($cmd, <<'PERL');
# cmd.pl DIR TAG [OPTION]...: the command the test runs under fencing-lock.
#   write          a fenced write with $FENCING_TOKEN at start
#   write_loop     fenced writes every 100 ms (allow_same) until it ends
#   write_on=SIG   a fenced write on SIG
#   die_on=SIG,..  SIG kills it (default action); other signals are recorded only
#   exit_on=SIG:N  SIG makes it exit N
#   exit=N         its exit status once DIR/TAG.go exists
#   orphan=MODE    fork a child first (same group; MODE with setsid: a
#                  session of its own), which records its signals as
#                  "orphan_sig"; MODE with stubborn: it ignores SIGTERM
use strict;
use warnings;
use POSIX ();
use Time::HiRes qw(time usleep);

my ($dir, $tag, @opt) = @ARGV;
my %o = map { /^(\w+)=(.*)$/ ? ($1 => $2) : ($_ => 1) } @opt;
$| = 1;

sub rec
{
	my ($kind, $what) = @_;
	open(my $fh, '>>', "$dir/$tag.log") or die "$dir/$tag.log: $!";
	printf $fh "%s %.6f %s\n", $kind, time, $what // '';
	close $fh;
}

# a fenced write with this run's token: "ok", or the SQLSTATE it got
sub fenced_write
{
	my ($body, $same) = @_;
	$same = $same ? 'true' : 'false';
	my $out = `psql -XAtq -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "UPDATE res SET body = '$body', fence = fencing.fence_advance(fence, $ENV{FENCING_TOKEN}, $same) WHERE id = 1" 2>&1`;
	return 'ok' if $? == 0;
	return $out =~ /ERROR:\s+([0-9A-Z]{5})/ ? $1 : "failed: $out";
}

my @sigs = qw(TERM INT HUP QUIT USR1 USR2);
if ($o{orphan})
{
	my $pid = fork;
	if (!$pid)
	{
		# as a daemon does: not holding the output fencing-lock's caller reads
		open(STDOUT, '>', '/dev/null') or die;
		open(STDERR, '>', '/dev/null') or die;
		POSIX::setsid() if $o{orphan} =~ /setsid/;
		for my $sig (@sigs)
		{
			$SIG{$sig} = sub {
				rec('orphan_sig', $sig);
				exit 0 unless $o{orphan} =~ /stubborn/ && $sig eq 'TERM';
			};
		}
		rec('orphan', "$$ " . getpgrp());
		usleep(20_000) while 1;
	}
	usleep(10_000) until -e "$dir/$tag.log";    # the orphan is there
}

rec('start',
	join(' ',
		$$, getpgrp(),
		map { $ENV{$_} // '' } qw(FENCING_TOKEN FENCING_LEASE FENCING_HOLDER)));
rec('ignored', join(',', grep { ($SIG{$_} // '') eq 'IGNORE' } @sigs));
rec('write', fenced_write("by $tag")) if $o{write};
for my $sig (@sigs)
{
	$SIG{$sig} = sub {
		rec('sig', $sig);
		rec('write', fenced_write("late $tag")) if ($o{write_on} // '') eq $sig;
		if (grep { $_ eq $sig } split /,/, $o{die_on} // '')
		{
			$SIG{$sig} = 'DEFAULT';
			kill $sig, $$;
		}
		for (split /,/, $o{exit_on} // '')
		{
			my ($s, $n) = split /:/;
			exit $n if $s eq $sig;
		}
	};
}
until (-e "$dir/$tag.go")
{
	if ($o{write_loop})
	{
		rec('write', fenced_write("loop $tag", 1));
		usleep(100_000);
	}
	else
	{
		usleep(20_000);
	}
}
rec('end');
exit($o{exit} // 0);
PERL

# events($tag): what the command recorded, [kind, time, rest] each
sub events
{
	my ($tag) = @_;
	my $f = "$tmp/$tag.log";
	return () unless -e $f;
	return map { [ split / /, $_, 3 ] } split /\n/, slurp_file($f);
}

# event($tag, $kind [, $rest_re]): the first such event, or undef
sub event
{
	my ($tag, $kind, $re) = @_;
	my ($e) = grep { $_->[0] eq $kind && (!defined $re || ($_->[2] // '') =~ $re) }
	  events($tag);
	return $e;
}

sub wait_event
{
	my ($tag, $kind, $re) = @_;
	my $e;
	wait_until("$tag: $kind", $timeout, sub { $e = event($tag, $kind, $re) });
	return $e;
}

sub go { append_to_file("$tmp/$_[0].go", '') }

# start_lock(\@options, $tag, @cmd_options): fencing-lock running cmd.pl
# as $tag; with cmd => [...] instead of a tag, that command.  As role app
# unless user => given.
sub start_lock
{
	my ($args, $tag, @copt) = @_;
	my %o;
	%o = @copt if $tag eq 'cmd';
	my @command =
	  $tag eq 'cmd' ? @{ $o{cmd} } : ($^X, $cmd, $tmp, $tag, @copt);
	my ($out, $err) = ('', '');
	local $ENV{PGUSER} = 'app';
	my $t0 = time;
	my $h = IPC::Run::start([ $prog, @$args, '--', @command ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout));
	return {
		h => $h,
		pid => $h->{KIDS}[0]{PID},
		out => \$out,
		err => \$err,
		tag => $tag,
		t0 => $t0
	};
}

# finish_lock($r): (exit status, stdout, stderr); the exit status is -N if
# fencing-lock itself was killed by signal N
sub finish_lock
{
	my ($r) = @_;
	eval { $r->{h}->finish };
	diag("fencing-lock did not finish: $@") if $@;
	my $st = $r->{h}->full_result(0);
	my $rc = !defined $st ? -999 : ($st & 127) ? -($st & 127) : $st >> 8;
	$r->{t1} = time;
	return ($rc, ${ $r->{out} }, ${ $r->{err} });
}

sub run_lock { return finish_lock(start_lock(@_)) }

sub lease
{
	my ($name, $cols) = @_;
	return $node->safe_psql('postgres',
		"SELECT $cols FROM fencing.lease_status WHERE name = '$name' AND slot = 0");
}

# alive($pid): the process exists and is no zombie
sub alive
{
	my ($pid) = @_;
	return 0 unless kill(0, $pid) || $!{EPERM};
	my $stat = eval { slurp_file("/proc/$pid/stat") } // '';
	return $stat !~ /^\d+ \(.*\) Z /;
}

sub stats
{
	my @x = sort { $a <=> $b } @_;
	return sprintf('min %.2f s, median %.2f s, max %.2f s (%d runs)',
		$x[0], $x[ $#x / 2 ], $x[-1], scalar @x);
}

# ---------------------------------------------------------------------------
# --help, --version, bad input: exit 125, the command does not run, and no
# lease is taken

my ($rc, $out, $err) = run_cmd($timeout, $prog, '--help');
is($rc, 0, '--help exits 0');
like($out, qr/^Usage:\n  fencing-lock \[OPTION\]\.\.\. NAME -- COMMAND \[ARG\]\.\.\.$/m,
	'--help: usage');
like($out, qr/^  $_  /m, "--help documents exit status $_") for 120, 121, 122, 125, 126, 127;
my ($extversion) = slurp_file("$FindBin::RealBin/../fencing.control") =~
  /^default_version\s*=\s*'([^']*)'/m;
($rc, $out) = run_cmd($timeout, $prog, '--version');
is("$rc $out", "0 fencing-lock (fencing) $extversion\n", '--version');

my @bad = (
	[ [], 'no lease name given' ],
	[ ['bad'], 'no command given: put it after "--"' ],
	[ [ 'bad', '--' ], 'no command given after "--"' ],
	[ [ 'bad', 'extra', '--', 'true' ], 'too many arguments before "--": "extra"' ],
	[ [ '--bogus', 'bad', '--', 'true' ], 'unrecognized option "--bogus"' ],
	[ [ 'bad', '--ttl' ], 'option "--ttl" requires an argument' ],
	[ [ '--ttl', '5x', 'bad', '--', 'true' ], 'invalid value "5x" for option --ttl' ],
	[ [ '--ttl', '-5s', 'bad', '--', 'true' ], 'invalid value "-5s" for option --ttl' ],
	[ [ '--ttl', '0', 'bad', '--', 'true' ], '--ttl must be from 1 s to 1 day' ],
	[ [ '--ttl', '999ms', 'bad', '--', 'true' ], '--ttl must be from 1 s to 1 day' ],
	[ [ '--ttl', '1441min', 'bad', '--', 'true' ], '--ttl must be from 1 s to 1 day' ],
	[ [ '--ttl', '99999999999999s', 'bad', '--', 'true' ], '--ttl must be from 1 s to 1 day' ],
	[ [ '--wait', '25h', 'bad', '--', 'true' ], '--wait must be at most 1 day' ],
	[ [ '--renew-every', '0', 'bad', '--', 'true' ], '--renew-every must be greater than zero' ],
	[ [ '--call-timeout', '0s', 'bad', '--', 'true' ], '--call-timeout must be greater than zero' ],
	[
		[ '--ttl', '30s', '--renew-every', '25s', 'bad', '--', 'true' ],
		'--renew-every (25 s), --call-timeout (5 s) and --grace (5 s) add up to more than --ttl (30 s)'
	],
	# durations that overflowed 64 bits on the way in (to a negative grace)
	[
		[ '--ttl', '3s', '--grace', '0.200000000d', 'bad', '--', 'true' ],
		'--renew-every (1 s), --call-timeout (500 ms) and --grace (17280 s) add up to more than --ttl (3 s)'
	],
	[ [ '--grace', '99999999999999999999d', 'bad', '--', 'true' ], '--grace must be at most 1 day' ],
	[ [ '--grace', '0.99999999999999999999999d', 'bad', '--', 'true' ], '--renew-every (10 s), --call-timeout (5 s) and --grace (86400 s) add up to more than --ttl (30 s)' ],
	[ [ '--grace', '-1s', 'bad', '--', 'true' ], 'invalid value "-1s" for option --grace' ],
	[
		[ '--ttl', '1s', '--grace', '0.6s', 'bad', '--', 'true' ],
		'--renew-every (333.333 ms), --call-timeout (166.666 ms) and --grace (600 ms) add up to more than --ttl (1 s)'
	],);
for my $case (@bad)
{
	my ($args, $msg) = @$case;
	local $ENV{PGUSER} = 'app';
	($rc, $out) = run_cmd($timeout, $prog, @$args);
	ok($rc == 125 && index($out, "fencing-lock: error: $msg") >= 0,
		"fencing-lock @$args: exit 125, \"$msg\"")
	  or diag("exit $rc: $out");
}
like($out, qr/^fencing-lock: detail: A renewal sent at the end of each period/m,
	'... with a detail that says why');
($rc, $out) = run_cmd($timeout, $prog, 'bad');
like($out, qr/^fencing-lock: hint: Try "fencing-lock --help" for more information\.$/m,
	'usage errors end with the hint to --help');
is($node->safe_psql('postgres', "SELECT count(*) FROM fencing.lease_status WHERE name = 'bad'"),
	'0', 'bad input took no lease');

# errors of the connection and the server: 125, the command is not run
($rc, $out, $err) = run_lock([ '-p', '1', '-h', '127.0.0.1', 'conn' ], 'conn');
# libpq's wording: "connection to server ... failed" (14+), "could not connect to server" (13)
my $no_connection = qr/connection to server .* failed|could not connect to server/;
ok($rc == 125 && $err =~ /^fencing-lock: error: could not acquire lease "conn": (?:$no_connection)/m,
	'no server: exit 125, "could not acquire lease ...: connection to server ... failed"')
  or diag("exit $rc: $err");
($rc, $out, $err) = run_lock([ '-d', 'noext', 'conn' ], 'conn');
ok($rc == 125 && $err =~ /could not acquire lease "conn": .*fencing.* \(SQLSTATE (3F000|42883)\)/,
	'a database without the extension: exit 125 with the server error and its SQLSTATE')
  or diag("exit $rc: $err");
($rc, $out, $err) = run_lock([ '--holder', 'h' x 257, 'conn' ], 'conn');
ok($rc == 125 && $err =~ /\(SQLSTATE 22023\)/, 'a holder name too long for the server: exit 125, 22023')
  or diag("exit $rc: $err");
ok(!-e "$tmp/conn.log", '... and the command never ran');

# the extremes of --ttl that are allowed
($rc, $out, $err) = run_lock([ '--ttl', '1s', 'ttl1' ], 'cmd', cmd => [ 'true' ]);
is($rc, 0, '--ttl 1s: runs') or diag($err);
my $r = start_lock([ '--ttl', '1d', 'ttl1d' ], 'ttl1d');
wait_event('ttl1d', 'start');
is(lease('ttl1d', q{state, expires_at > now() + '23 hours 59 min'}), 'held|t',
	'--ttl 1d: the lease is held for a day');
go('ttl1d');
($rc) = finish_lock($r);
is($rc, 0, '... and the run ends normally');

# ---------------------------------------------------------------------------
# one run: the environment, the lease while it runs, the exit status, the
# release

$r = start_lock([ '--ttl', '3s', 'one' ], 'one', 'exit=3');
my $start = wait_event('one', 'start');
my (undef, $pgid, $token, $lname, $holder) = split / /, $start->[2];
like($token, qr/^\d+$/, "FENCING_TOKEN is the token ($token)");
is($lname, 'one', 'FENCING_LEASE is the lease name');
like($holder, qr/^[^:]+:$r->{pid}:[0-9a-f]{8}$/,
	"FENCING_HOLDER: the default holder is HOST:PID:RANDOM, fencing-lock's PID ($holder)");
is(lease('one', 'holder, holder_role, token, state'), "$holder|app|$token|held",
	'lease_status: held by that holder, as role app, with that token');
my $renewals = lease('one', 'renewals');
$node->poll_query_until('postgres',
	"SELECT renewals > $renewals FROM fencing.lease_status WHERE name = 'one'")
  or die 'no renewal';
pass('it is renewed while the command runs');
isnt($pgid, getpgrp(), 'the command runs in a process group of its own');
is((split / /, $start->[2])[0], $pgid, '... which it leads');
go('one');
($rc, $out, $err) = finish_lock($r);
is($rc, 3, "fencing-lock exits with the command's status (3)");
is($err, '', 'and says nothing');
is(lease('one', 'state, releases'), 'free|1', 'the lease is released when the command ends');

($rc, $out, $err) = run_lock([ '--holder', 'my holder', 'one' ], 'cmd',
	cmd => [ 'sh', '-c', 'echo "$FENCING_HOLDER"; kill -KILL $$' ]);
is("$rc $out", "137 my holder\n", '--holder names the holder; killed by SIGKILL: exit 128+9');
is(lease('one', 'state, holder'), 'free|my holder', 'released also then');

# ---------------------------------------------------------------------------
# two runners on one name: the second does not run (120), or waits its turn

my ($ra, $rb) = (start_lock([ '--ttl', '3s', 'two' ], 'two_a'));
wait_event('two_a', 'start');
my $t = time;
($rc, $out, $err) = run_lock([ 'two' ], 'two_b');
is($rc, 120, 'a second runner without --wait exits 120');
is($err, '', '... silently (cron would mail it)');
ok(!-e "$tmp/two_b.log", '... and its command never ran');
($rc, $out, $err) = run_lock([ '-v', '--wait', '300ms', 'two' ], 'two_b');
is($rc, 120, 'with --wait 300ms: 120 too');
like($err, qr/^fencing-lock: lease "two" is held by another holder, also after waiting 300 ms; the command was not run$/m,
	'... and with --verbose it says so');

# two waiters: served in arrival order, one command at a time
my $c = start_lock([ '--wait', '60s', '--ttl', '3s', '-d', 'application_name=lock_c', 'two' ], 'two_c');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'lock_c' AND query LIKE '%lease_acquire%' AND state = 'active'")
  or die 'c does not wait';
my $d = start_lock([ '--wait', '60s', '--ttl', '3s', '-d', 'application_name=lock_d', 'two' ], 'two_d');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'lock_d' AND query LIKE '%lease_acquire%' AND state = 'active'")
  or die 'd does not wait';
ok(!-e "$tmp/two_c.log" && !-e "$tmp/two_d.log", 'two more runners wait with --wait');
go('two_a');
is((finish_lock($ra))[0], 0, 'the first runner ends');
my $c_start = wait_event('two_c', 'start');
ok(!-e "$tmp/two_d.log", 'the first waiter runs; the second still waits');
go('two_c');
is((finish_lock($c))[0], 0, 'the first waiter ends');
my $d_start = wait_event('two_d', 'start');
go('two_d');
is((finish_lock($d))[0], 0, 'then the second waiter runs and ends');
my @runs = map { [ event($_, 'start')->[1], event($_, 'end')->[1], (split / /, event($_, 'start')->[2])[2] ] }
  qw(two_a two_c two_d);
ok($runs[0][1] < $runs[1][0] && $runs[1][1] < $runs[2][0],
	'the three commands ran one after the other, in arrival order');
ok($runs[0][2] < $runs[1][2] && $runs[1][2] < $runs[2][2], '... with increasing tokens');

# the same --holder is the same holder: the later run takes the lease over
# (a new token), and the earlier run's command is stopped at its next renewal
$ra = start_lock([ '--ttl', '3s', '--holder', 'me', 'same' ], 'same_a', 'die_on=TERM');
my $ta = (split / /, wait_event('same_a', 'start')->[2])[2];
$rb = start_lock([ '--ttl', '3s', '--holder', 'me', 'same' ], 'same_b');
my $tb = (split / /, wait_event('same_b', 'start')->[2])[2];
cmp_ok($tb, '>', $ta, 'a second run with the same --holder gets the lease at once, with a new token');
($rc, $out, $err) = finish_lock($ra);
is($rc, 121, '... and the first run loses it: exit 121');
go('same_b');
is((finish_lock($rb))[0], 0, 'the second run ends normally');

# ---------------------------------------------------------------------------
# a command that cannot run: 127, 126; the lease is released

($rc, $out, $err) = run_lock([ 'exec' ], 'cmd', cmd => [ "$tmp/no-such-command" ]);
is($rc, 127, 'a command that does not exist: exit 127');
like($err, qr/^fencing-lock: error: could not execute command ".*no-such-command": No such file or directory$/m,
	'... "could not execute command"');
append_to_file("$tmp/not-executable", "#!/bin/sh\n");
($rc, $out, $err) = run_lock([ 'exec' ], 'cmd', cmd => [ "$tmp/not-executable" ]);
is($rc, 126, 'a command that is not executable: exit 126');
like($err, qr/could not execute command ".*not-executable": Permission denied/, '... "Permission denied"');
is(lease('exec', 'state, releases'), 'free|2', 'the lease was released both times');

# ---------------------------------------------------------------------------
# signals: passed on to the command, whose status fencing-lock exits with

my %signo = (HUP => 1, INT => 2, QUIT => 3, USR1 => 10, USR2 => 12, TERM => 15);
for my $sig (qw(TERM INT HUP QUIT USR1 USR2))
{
	$r = start_lock([ 'sig' ], "sig_$sig", "die_on=$sig");
	wait_event("sig_$sig", 'start');
	kill $sig, $r->{pid};
	wait_event("sig_$sig", 'sig', qr/^$sig$/);
	($rc) = finish_lock($r);
	is($rc, 128 + $signo{$sig}, "SIG$sig to fencing-lock reaches the command, which it ends: exit 128+$signo{$sig}");
}
$r = start_lock([ 'sig' ], 'sig_hup7', 'exit_on=HUP:7');
wait_event('sig_hup7', 'start');
kill 'HUP', $r->{pid};
is((finish_lock($r))[0], 7, 'a command that handles SIGHUP and exits 7: exit 7');

# the second SIGINT kills the command
$r = start_lock([ 'sig' ], 'sig_int2');
wait_event('sig_int2', 'start');
kill 'INT', $r->{pid};
wait_event('sig_int2', 'sig', qr/^INT$/);
ok(alive($r->{pid}), 'a command that ignores SIGINT keeps running');
kill 'INT', $r->{pid};
($rc, $out, $err) = finish_lock($r);
is($rc, 137, 'the second SIGINT kills it: exit 137');
like($err, qr/^fencing-lock: second SIGINT: killing the command \(SIGKILL\)$/m, '... and says so');
is(lease('sig', 'state'), 'free', 'the lease was released every time');

# a signal ignored when fencing-lock starts (nohup) stays ignored
{
	my ($o2, $e2) = ('', '');
	local $ENV{PGUSER} = 'app';
	my $h = IPC::Run::start([ $prog, 'sig', '--', $^X, $cmd, $tmp, 'sig_nohup' ],
		init => sub { $SIG{HUP} = 'IGNORE' },
		'<', \undef, '>', \$o2, '2>', \$e2, IPC::Run::timeout($timeout));
	wait_event('sig_nohup', 'start');
	is(event('sig_nohup', 'ignored')->[2], 'HUP', 'SIGHUP ignored at start: the command inherits that');
	go('sig_nohup');
	$h->finish;
}

# a signal while waiting for the lease: the command is not run, nothing held
my $holder_run = start_lock([ 'sigwait' ], 'sigwait_a');
wait_event('sigwait_a', 'start');
$r = start_lock([ '--wait', '60s', '--holder', 'waiter', '-d', 'application_name=lock_w', 'sigwait' ], 'sigwait_b');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'lock_w' AND state = 'active'")
  or die 'no waiter';
kill 'TERM', $r->{pid};
($rc, $out, $err) = finish_lock($r);
is($rc, 143, 'SIGTERM while waiting for the lease: exit 143');
like($err, qr/interrupted by SIGTERM before the lease was acquired; the command was not run/, '... and says so');
ok(!-e "$tmp/sigwait_b.log", '... the command never ran');
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'lock_w'")
  or die 'the waiter stays';
go('sigwait_a');
finish_lock($holder_run);
is(lease('sigwait', 'state, holder <> \'waiter\''), 'free|t',
	'... and once its wait ended on the server, the lease is released to no one');

# ---------------------------------------------------------------------------
# the lease refused: 121; SIGTERM, and SIGKILL after the grace period for a
# command that ignores it

$r = start_lock([ '--ttl', '3s', '--grace', '1s', 'refused' ], 'refused');
wait_event('refused', 'start');
$node->safe_psql('postgres', "SELECT fencing.lease_force_release('refused')");
my $term = wait_event('refused', 'sig', qr/^TERM$/);
($rc, $out, $err) = finish_lock($r);
is($rc, 121, 'lease force-released: the next renewal is refused, exit 121');
like($err, qr/^fencing-lock: error: lease "refused" lost: the server refused to renew it/m,
	'... "lost: the server refused to renew it"');
like($err, qr/^fencing-lock: the command was killed by SIGKILL after the lease was lost$/m,
	'the command ignored SIGTERM: SIGKILL after the grace period');
ok(!event('refused', 'end'), '... it never reached its end');
cmp_ok($r->{t1} - $term->[1], '>=', 0.5, sprintf('... %.2f s after SIGTERM (grace 1 s)', $r->{t1} - $term->[1]));

$r = start_lock([ '--ttl', '3s', 'band' ], 'band', 'die_on=TERM');
wait_event('band', 'start');
$node->safe_psql('postgres', 'SELECT fencing.advance_tokens()');
($rc, $out, $err) = finish_lock($r);
is($rc, 121, 'a new token band (as after a failover): the renewal raises LF005, exit 121');
like($err, qr/lease "band" lost: lost at a failover of the server: .*\(SQLSTATE LF005\)/, '... and says so');
like($err, qr/the command was killed by SIGTERM after the lease was lost/, 'the command stopped at SIGTERM');

# ---------------------------------------------------------------------------
# the runner frozen (SIGSTOP) past its TTL: its supervisor stops the
# command by its own clock, before the lease can expire, and another
# takes over.  Both processes frozen (the documented limit): the command
# writes on, and the fence refuses it.

# supervisor_of($runner): the supervisor, the runner's child
sub supervisor_of
{
	my ($pid) = @_;
	my $sv;
	wait_until("the supervisor of $pid", $timeout, sub {
		($sv) = split ' ', (eval { slurp_file("/proc/$pid/task/$pid/children") } // '');
		defined $sv;
	});
	return $sv;
}

$r = start_lock([ '--ttl', '2s', '--grace', '500ms', 'frozen' ], 'frozen_a', 'write_loop');
is(wait_event('frozen_a', 'write')->[2], 'ok', "A's command writes with its token, again and again");
my ($apid) = split / /, event('frozen_a', 'start')->[2];
kill 'STOP', $r->{pid};
my $a_expires = lease('frozen', 'extract(epoch FROM expires_at)');
$rb = start_lock([ '--ttl', '5s', '--wait', '60s', 'frozen' ], 'frozen_b', 'write');
my $a_term = wait_event('frozen_a', 'sig', qr/^TERM$/);
ok($a_term->[1] < $a_expires,
	sprintf("A's runner frozen: its command gets SIGTERM all the same, %.2f s before A's lease could expire",
		$a_expires - $a_term->[1]));
wait_until("A's command is killed", $timeout, sub { !alive($apid) });
pass("... ignores it, and is killed (SIGKILL) while A's runner is still frozen");
is(wait_event('frozen_b', 'write')->[2], 'ok', 'B takes the lease over when A\'s expires, and writes');
is(lease('frozen', 'takeover'), 't', '... a takeover of an expired lease');
my $b_write = event('frozen_b', 'write')->[1];
ok(!(grep { $_->[0] eq 'write' && $_->[1] > $b_write } events('frozen_a')),
	"A's command wrote nothing after B's write");
kill 'CONT', $r->{pid};
($rc, $out, $err) = finish_lock($r);
is($rc, 122, "A's runner resumes and exits 122");
like($err, qr/lease "frozen" lost: not renewed in time: fencing-lock itself did not run for .* s \(it was stopped, or not scheduled\)/,
	'... "fencing-lock itself did not run"');
like($err, qr/the command was killed by SIGKILL after the lease was lost/,
	"... and its command was killed by SIGKILL");
is($node->safe_psql('postgres', 'SELECT body FROM res WHERE id = 1'), 'by frozen_b', "B's write stands");
go('frozen_b');
is((finish_lock($rb))[0], 0, 'B ends normally');

# both frozen: nothing stops the command; the fence refuses its writes
$r = start_lock([ '--ttl', '2s', '--grace', '500ms', 'frozen2' ], 'frozen2_a', 'write_loop');
is(wait_event('frozen2_a', 'write')->[2], 'ok', "A's command writes");
my $sv = supervisor_of($r->{pid});
kill 'STOP', $sv, $r->{pid};
$rb = start_lock([ '--ttl', '5s', '--wait', '60s', 'frozen2' ], 'frozen2_b', 'write');
is(wait_event('frozen2_b', 'write')->[2], 'ok', 'runner and supervisor frozen: B takes over and writes');
my $refused = wait_event('frozen2_a', 'write', qr/^LF/);
is($refused->[2], 'LF001', "A's command writes on, unstopped, and is refused: LF001");
kill 'CONT', $sv, $r->{pid};
($rc, $out, $err) = finish_lock($r);
is($rc, 122, 'both resumed: exit 122');
like($err, qr/SIGKILL now, the kill point having passed/, '... the command is killed at once');
ok(!event('frozen2_a', 'sig'), '... without SIGTERM first');
ok(!(grep { $_->[0] eq 'write' && $_->[2] eq 'ok' && $_->[1] > $refused->[1] } events('frozen2_a')),
	"none of A's writes after B's went through");
go('frozen2_b');
is((finish_lock($rb))[0], 0, 'B ends normally');

# ---------------------------------------------------------------------------
# a renewal that hangs (its lease row locked): no answer before the
# deadline; the command is stopped before the lease can expire

$r = start_lock([ '--ttl', '3s', 'hang' ], 'hang', 'die_on=TERM');
wait_event('hang', 'start');
my $locker = $node->background_psql('postgres');
$locker->query_safe("BEGIN; SELECT 1 FROM fencing.leases WHERE name = 'hang' FOR UPDATE");
($rc, $out, $err) = finish_lock($r);
my $expires = $locker->query_safe(
	"SELECT extract(epoch FROM expires_at) FROM fencing.leases WHERE name = 'hang'");
$locker->query_safe('ROLLBACK');
$locker->quit;
is($rc, 122, 'renewals hang: exit 122');
like($err, qr/lease "hang" lost: not renewed in time: .* since then: no answer from the server within [\d.]+ m?s/,
	'... "no answer from the server within ..."');
$term = event('hang', 'sig', qr/^TERM$/);
ok($term && $term->[1] < $expires,
	sprintf('the command got SIGTERM %.2f s before the lease could expire', $expires - ($term ? $term->[1] : 0)));

# ---------------------------------------------------------------------------
# the server stopped under a running command

$r = start_lock([ '--ttl', '3s', 'down' ], 'down', 'die_on=TERM');
wait_event('down', 'start');
my $stopped = time;
$node->stop('fast');
($rc, $out, $err) = finish_lock($r);
$node->start;
is($rc, 122, 'the server stopped: exit 122');
like($err, qr/lease "down" lost: not renewed in time: .* since then: (?:$no_connection)/,
	'... and says that it could not connect');
$expires = lease('down', 'extract(epoch FROM expires_at)');
$term = event('down', 'sig', qr/^TERM$/);
ok($term && $term->[1] < $expires,
	sprintf('the command was stopped %.2f s after the server, %.2f s before the lease could expire',
		($term ? $term->[1] : 0) - $stopped, $expires - ($term ? $term->[1] : 0)));

# ---------------------------------------------------------------------------
# a restart with the lease intact: renewals resume, the command runs on

$r = start_lock([ '--ttl', '20s', '--renew-every', '500ms', 'restart' ], 'restart');
wait_event('restart', 'start');
$node->restart;
$renewals = lease('restart', 'renewals');
$node->poll_query_until('postgres',
	"SELECT renewals > $renewals FROM fencing.lease_status WHERE name = 'restart'")
  or die 'no renewal after the restart';
pass('the server restarts: the lease is renewed again on a new connection');
ok(!event('restart', 'sig'), 'the command saw no signal');
go('restart');
($rc, $out, $err) = finish_lock($r);
is($rc, 0, 'and ends normally') or diag($err);
is(lease('restart', 'state'), 'free', 'the lease is released');

# ---------------------------------------------------------------------------
# what the command leaves behind is stopped before the release: in its
# process group, and also what left the group (setsid, a daemon's double
# fork): the supervisor is their subreaper

for my $mode (qw(plain stubborn setsid setsid_stubborn))
{
	my $tag = "orphan_$mode";
	go($tag);    # the command ends at once, its child stays
	$r = start_lock([ '--ttl', '3s', '--grace', '1s', $tag ], $tag, "orphan=$mode");
	($rc, $out, $err) = finish_lock($r);
	is($rc, 0, "a command that exits, leaving a child ($mode) behind: exit 0");
	my ($opid, $opgrp) = split / /, event($tag, 'orphan')->[2];
	push @leftovers, $opid;
	my $start_pgid = (split / /, event($tag, 'start')->[2])[1];
	ok(($mode =~ /setsid/) == ($opgrp != $start_pgid),
		$mode =~ /setsid/ ? '... in a session of its own' : '... in its process group');
	my $osig = event($tag, 'orphan_sig');
	is($osig && $osig->[2], 'TERM', '... the child got SIGTERM');
	ok(!alive($opid), $mode =~ /stubborn/
		? '... ignored it, and was killed after the grace period'
		: '... and is gone');
	ok(lease($tag, 'extract(epoch FROM released_at)') > $osig->[1],
		'... before the lease was released');
}

# ---------------------------------------------------------------------------
# fencing-lock killed (SIGKILL): its command dies with it (Linux), and a
# waiting runner takes over once the lease expires.  Takeover time: from
# the SIGKILL to the start of the waiting runner's command.

my ($first_kill, @all) = (1);
for my $ttl (@ttls)
{
	my @takeover;
	for my $i (1 .. $runs)
	{
		my $tag = "killed_${ttl}_$i";
		my $ka = start_lock([ '--ttl', "${ttl}s", 'killed' ], "${tag}_a");
		my ($apid) = split / /, wait_event("${tag}_a", 'start')->[2];
		my $kb = start_lock(
			[ '--wait', '60s', '--ttl', "${ttl}s", '-d', "application_name=lock_$tag", 'killed' ],
			"${tag}_b");
		$node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'lock_$tag' AND state = 'active'")
		  or die 'no waiter';
		my $t0 = time;
		kill 'KILL', $ka->{pid};
		my $bs = wait_event("${tag}_b", 'start');
		push @takeover, $bs->[1] - $t0;
		finish_lock($ka);
		wait_until('the command of the killed runner dies', $timeout, sub { !alive($apid) });
		if ($first_kill)
		{
			pass("fencing-lock killed: its command $apid is killed too");
			is(lease('killed', 'takeover'), 't', 'the waiting runner took the expired lease over');
			$first_kill = 0;
		}
		go("${tag}_b");
		finish_lock($kb);
	}
	note("takeover time (TTL $ttl s, runner SIGKILLed, waiter with --wait): " . stats(@takeover));

	# Stop time: from the loss (force release) to SIGTERM at a command
	# that stops at SIGTERM; it comes with the next renewal, TTL/3 at most.
	my @stop;
	for my $i (1 .. $runs)
	{
		my $tag = "stop_${ttl}_$i";
		my $s = start_lock([ '--ttl', "${ttl}s", 'stoptime' ], $tag, 'die_on=TERM');
		wait_event($tag, 'start');
		my $t0 = time;
		$node->safe_psql('postgres', "SELECT fencing.lease_force_release('stoptime')");
		my $sig = wait_event($tag, 'sig');
		push @stop, $sig->[1] - $t0;
		finish_lock($s);
	}
	note("stop time (TTL $ttl s, renewal every TTL/3, lease force-released): " . stats(@stop));
	push @all, @takeover, @stop;
}
ok((!grep { $_ > 30 } @all), 'takeover and stop times measured');

# ---------------------------------------------------------------------------
# pgbouncer in transaction mode

SKIP:
{
	skip "$FencingTest::pgbouncer not found", 8 unless -x $FencingTest::pgbouncer;
	skip 'pgbouncer does not run as root', 8 if $> == 0;
	my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
	my ($bport) = start_pgbouncer($node, users => [ 'app', $superuser ], pool_size => 2,
		max_client_conn => 50);
	my @via = ('-h', '127.0.0.1', '-p', $bport, '-d', 'postgres');
	wait_until('pgbouncer', $timeout,
		sub { (run_cmd(10, 'psql', '-XAtq', @via, '-U', 'app', '-c', 'SELECT 1'))[0] == 0 });

	my $pa = start_lock([ @via, '--ttl', '3s', 'bouncer' ], 'bouncer_a');
	wait_event('bouncer_a', 'start');
	my $pb = start_lock([ @via, '--ttl', '3s', '--wait', '60s', 'bouncer' ], 'bouncer_b');
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE '%lease_acquire%' AND state = 'active' AND pid <> pg_backend_pid()")
	  or die 'no waiter';
	my $rn = lease('bouncer', 'renewals');
	$node->poll_query_until('postgres',
		"SELECT renewals >= $rn + 2 FROM fencing.lease_status WHERE name = 'bouncer'")
	  or die 'no renewals';
	pass('through pgbouncer (2 server connections): the holder renews while another runner waits');
	is($node->safe_psql('postgres',
			"SELECT count(*) <= 2 FROM pg_stat_activity WHERE usename = 'app'"),
		't', '... over at most two server connections');
	go('bouncer_a');
	is((finish_lock($pa))[0], 0, 'the holder ends and releases');
	wait_event('bouncer_b', 'start');
	go('bouncer_b');
	is((finish_lock($pb))[0], 0, 'the waiter runs then');
	ok(event('bouncer_a', 'end')->[1] < event('bouncer_b', 'start')->[1], '... after the holder ended');

	# one server connection, taken by a waiter: the holder's renewals queue
	# in pgbouncer, its deadline passes, and it stops its command in time
	my ($bport1) = start_pgbouncer($node, users => [ 'app', $superuser ], pool_size => 1,
		max_client_conn => 50);
	my @via1 = ('-h', '127.0.0.1', '-p', $bport1, '-d', 'postgres');
	wait_until('pgbouncer', $timeout,
		sub { (run_cmd(10, 'psql', '-XAtq', @via1, '-U', 'app', '-c', 'SELECT 1'))[0] == 0 });
	$pa = start_lock([ @via1, '--ttl', '2s', 'starved' ], 'starved_a', 'die_on=TERM');
	wait_event('starved_a', 'start');
	$pb = start_lock([ @via1, '--ttl', '3s', '--wait', '60s', 'starved' ], 'starved_b');
	($rc, $out, $err) = finish_lock($pa);
	is($rc, 122, 'one server connection held by a waiter: the holder cannot renew, exit 122');
	like($err, qr/no answer from the server within/, '... its calls time out in the pooler');
	wait_event('starved_b', 'start');
	ok(event('starved_a', 'sig')->[1] < event('starved_b', 'start')->[1],
		'the waiter runs after the holder stopped its command');
	go('starved_b');
	finish_lock($pb);
}

# ---------------------------------------------------------------------------
# nothing that holds up or kills one of fencing-lock's processes keeps the
# command running past its lease (the red team's findings)

# spawn_lock(\@options, $tag, FH, @cmd_options): fencing-lock with its
# stderr on FH, in a process group of its own whose parent (this test) is
# in another: not an orphaned group, so SIGTSTP would stop it as it stops
# a job of a shell; reap_lock($pid): its exit status
sub spawn_lock
{
	my ($args, $tag, $errfh, @copt) = @_;
	my $pid = fork // die "fork: $!";
	if ($pid == 0)
	{
		setpgrp(0, 0);
		open(STDIN, '<', '/dev/null') or die;
		open(STDOUT, '>', '/dev/null') or die;
		open(STDERR, '>&', $errfh) or die;
		$ENV{PGUSER} = 'app';
		exec($prog, @$args, '--', $^X, $cmd, $tmp, $tag, @copt) or POSIX::_exit(99);
	}
	return $pid;
}

sub reap_lock
{
	my ($pid) = @_;
	my $st;
	wait_until("fencing-lock $pid ends", $timeout,
		sub { waitpid($pid, POSIX::WNOHANG()) == $pid or return 0; $st = $?; 1 });
	return ($st & 127) ? -($st & 127) : $st >> 8;
}

# a stderr nobody reads (a full pipe): the loss stops the command all the
# same; the messages are dropped, not waited for
{
	pipe(my $rd, my $wr) or die "pipe: $!";
	my $flags = fcntl($wr, Fcntl::F_GETFL(), 0);
	fcntl($wr, Fcntl::F_SETFL(), $flags | Fcntl::O_NONBLOCK());
	my $filled = 0;
	while (1)
	{
		my $n = syswrite($wr, 'x' x 4096);
		last unless defined $n;
		$filled += $n;
	}
	fcntl($wr, Fcntl::F_SETFL(), $flags);
	my $pid = spawn_lock([ '-v', '--ttl', '3s', 'blocked' ], 'blocked', $wr, 'die_on=TERM');
	close $wr;
	wait_event('blocked', 'start');
	$node->safe_psql('postgres', "SELECT fencing.lease_force_release('blocked')");
	wait_event('blocked', 'sig', qr/^TERM$/);
	pass("stderr a full pipe ($filled bytes unread): the lost lease's command gets SIGTERM");
	is(reap_lock($pid), 121, '... and fencing-lock exits 121, its stderr still unread');
	fcntl($rd, Fcntl::F_SETFL(), Fcntl::O_NONBLOCK());
	my ($buf, $all) = ('', '');
	$all .= $buf while sysread($rd, $buf, 65536);
	is(length($all), $filled, '... the messages were dropped, not written late');
	close $rd;
}

# SIGTSTP to fencing-lock: refused (a stopped runner would renew nothing)
{
	open(my $efh, '>', "$tmp/tstp.err") or die;
	my $pid = spawn_lock([ '--ttl', '2s', 'tstp' ], 'tstp', $efh);
	close $efh;
	wait_event('tstp', 'start');
	kill 'TSTP', $pid;
	$renewals = lease('tstp', 'renewals');
	$node->poll_query_until('postgres',
		"SELECT renewals >= $renewals + 2 FROM fencing.lease_status WHERE name = 'tstp'")
	  or die 'no renewals after SIGTSTP';
	my $state = (split ' ', (slurp_file("/proc/$pid/stat") =~ s/^.*\) //sr))[0];
	isnt($state, 'T', 'SIGTSTP to fencing-lock: it does not stop, and renews the lease on');
	ok(!event('tstp', 'sig'), '... the command saw nothing');
	go('tstp');
	is(reap_lock($pid), 0, '... and ends normally');
	like(slurp_file("$tmp/tstp.err"),
		qr/^fencing-lock: warning: fencing-lock cannot be suspended while it holds a lease or waits for one: SIGTSTP ignored$/m,
		'... with a warning');
}

# signals beyond the usual six: passed on too; none ends fencing-lock by
# its default action (leaving the command running, the lease unreleased)
for my $sig ('ALRM', 'VTALRM', 'PROF', 'RTMIN+2')
{
	my $signo = $sig eq 'RTMIN+2' ? POSIX::SIGRTMIN() + 2 : eval "POSIX::SIG$sig()";
	my $tag = "sig_$sig" =~ s/\+/_/r;
	$r = start_lock([ 'sigmore' ], $tag);
	wait_event($tag, 'start');
	kill $signo, $r->{pid};
	($rc, $out, $err) = finish_lock($r);
	is($rc, 128 + $signo, "SIG$sig to fencing-lock ends the command (its default action): exit 128+$signo");
	is(lease('sigmore', 'state'), 'free', '... and the lease is released');
}

# a zombie left behind by a process that left the command's group: no
# hang waiting for it
$t = time;
($rc, $out, $err) = run_lock([ '--ttl', '3s', 'zombie' ], 'cmd',
	cmd => [ $^X, '-e', q{
		use POSIX ();
		if (!fork) {
			POSIX::_exit(0) if !fork;    # a child it never waits for
			POSIX::setsid();
			open(my $f, '>', $ARGV[0]); print $f "$$\n"; close $f;
			sleep 100; POSIX::_exit(0);
		}
		sleep 1 until -s $ARGV[0];
	}, "$tmp/zombie.pid" ]);
my $zpid = slurp_file("$tmp/zombie.pid") =~ s/\s+//r;
push @leftovers, $zpid;
is($rc, 0, 'a command that leaves a process (with an unreaped child) in a session of its own: exit 0');
ok(!alive($zpid) && time - $t < 100, '... that process stopped, its zombie no hang');

# timeout(1) in the command: a process group of its own; stopped too
$r = start_lock([ '--ttl', '3s', 'tmo' ], 'cmd',
	cmd => [ 'sh', '-c', "timeout 1h $^X $cmd $tmp tmo; echo done" ]);
wait_event('tmo', 'start');
my ($tpid) = split / /, event('tmo', 'start')->[2];
$node->safe_psql('postgres', "SELECT fencing.lease_force_release('tmo')");
($rc, $out, $err) = finish_lock($r);
is($rc, 121, 'a command under timeout(1), the lease lost: exit 121');
ok(event('tmo', 'sig', qr/^TERM$/) && !alive($tpid), '... the command under timeout(1) got SIGTERM and is gone');

# the runner SIGKILLed, the command with no PDEATHSIG (as after a change of
# uid): the supervisor stops it; the supervisor SIGKILLed: the runner does
for my $victim (qw(runner supervisor))
{
	my $tag = "pd_$victim";
	$r = start_lock([ '--ttl', '3s', '--grace', '500ms', $tag ], 'cmd',
		cmd => [ 'setpriv', '--pdeathsig', 'clear', '--', $^X, $cmd, $tmp, $tag ]);
	wait_event($tag, 'start');
	my ($ppid) = split / /, event($tag, 'start')->[2];
	my $expires = lease($tag, 'extract(epoch FROM expires_at)');
	kill 'KILL', $victim eq 'runner' ? $r->{pid} : supervisor_of($r->{pid});
	wait_until("the command of the killed $victim dies", $timeout, sub { !alive($ppid) });
	($rc, $out, $err) = finish_lock($r);
	if ($victim eq 'runner')
	{
		my $sig = event($tag, 'sig', qr/^TERM$/);
		ok($sig && $sig->[1] < $expires,
			sprintf('runner SIGKILLed, PDEATHSIG cleared: the command gets SIGTERM (%.2f s before the lease could expire), then SIGKILL',
				$expires - ($sig ? $sig->[1] : 0)));
	}
	else
	{
		is($rc, 125, 'supervisor SIGKILLed, PDEATHSIG cleared: the runner kills the command, exit 125');
		like($err, qr/the supervisor process \(\d+\) was killed by SIGKILL while the command ran: killing what is left/,
			'... and says so');
		is(lease($tag, 'state'), 'free', '... and releases the lease once nothing is left');
	}
}
SKIP:
{
	skip 'a change of uid needs root', 1 unless $> == 0;
	$r = start_lock([ '--ttl', '3s', 'pd_uid' ], 'cmd',
		cmd => [ 'setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', 'sleep', '300' ]);
	my $sv = supervisor_of($r->{pid});
	my $spid;
	wait_until('sleep runs', $timeout, sub {
		($spid) = split ' ', (eval { slurp_file("/proc/$sv/task/$sv/children") } // '');
		defined $spid && slurp_file("/proc/$spid/cmdline") =~ /^sleep/;
	});
	kill 'KILL', $r->{pid};
	wait_until('the command as nobody dies', $timeout, sub { !alive($spid) });
	pass('runner SIGKILLed, the command running as another uid: stopped');
	finish_lock($r);
}

# a host name lookup that hangs inside libpq: the runner is held up, the
# supervisor stops the command in time
SKIP:
{
	my $cc = $ENV{CC} // 'cc';
	my $flag = "$tmp/dns-hangs";
	append_to_file("$tmp/slowdns.c", <<"C");
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <unistd.h>
int
getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
	int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **) = dlsym(RTLD_NEXT, "getaddrinfo");
	int i;

	for (i = 0; i < 6000 && access("$flag", F_OK) == 0; i++)
		usleep(20000);
	return real(node, service, hints, res);
}
C
	skip 'no C compiler for the resolver shim', 5
	  unless system($cc, '-shared', '-fPIC', '-o', "$tmp/slowdns.so", "$tmp/slowdns.c", '-ldl') == 0;
	{
		local $ENV{LD_PRELOAD} = "$tmp/slowdns.so";
		$r = start_lock([ '-h', 'localhost', '-d', 'application_name=lock_dns', '--ttl', '3s', 'dns' ],
			'dns', 'die_on=TERM');
	}
	wait_event('dns', 'start');
	append_to_file($flag, '');
	$node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lock_dns'");
	my $sig = wait_event('dns', 'sig', qr/^TERM$/);
	# no renewal since the connection went, and no one else took the lease
	my $expires = lease('dns', 'extract(epoch FROM expires_at)');
	ok($sig->[1] < $expires,
		sprintf('the resolver hangs: the command gets SIGTERM %.2f s before the lease could expire', $expires - $sig->[1]));
	ok(alive($r->{pid}), '... while the runner is still held up in the lookup');
	$rb = start_lock([ '--ttl', '3s', '--wait', '60s', 'dns' ], 'dns_b');
	my $bstart = wait_event('dns_b', 'start');
	ok($sig->[1] < $bstart->[1], '... and the next holder runs after that');
	unlink $flag;
	($rc, $out, $err) = finish_lock($r);
	is($rc, 122, 'the lookup returns: exit 122');
	like($err, qr/not renewed in time: fencing-lock was held up for .* inside libpq, connecting to the server/,
		'... "held up ... inside libpq"');
	go('dns_b');
	finish_lock($rb);
}

# started with stdout and stderr closed: messages do not end up in the
# signal pipe (as signals to the command)
sub start_sh
{
	my ($script) = @_;
	local $ENV{PGUSER} = 'app';
	my $h = IPC::Run::start([ 'sh', '-c', $script ], '<', \undef, '>', \my $o, '2>', \my $e,
		IPC::Run::timeout($timeout));
	return { h => $h, out => \$o, err => \$e };
}
go('fds_v');
($rc) = finish_lock(start_sh("exec $prog -v fds -- $^X $cmd $tmp fds_v exit=4 >&- 2>&-"));
is($rc, 4, 'stdout and stderr closed, --verbose: the command runs, its status comes back (4)');
$r = start_sh("exec $prog --ttl 3s fds -- $^X $cmd $tmp fds die_on=TERM >&- 2>&-");
wait_event('fds', 'start');
$node->safe_psql('postgres', "SELECT fencing.lease_force_release('fds')");
($rc) = finish_lock($r);
is($rc, 121, 'stdout and stderr closed, the lease lost: exit 121');
is(join(',', map { $_->[2] } grep { $_->[0] eq 'sig' } events('fds')), 'TERM',
	'... the command got SIGTERM and no other signal');

# the command's own status can be one of fencing-lock's: only fencing-lock's
# come with a message (documented)
($rc, $out, $err) = run_lock([ 'collide' ], 'cmd', cmd => [ 'sh', '-c', 'exit 121' ]);
is("$rc [$err]", '121 []', "a command that exits 121: exit 121, and no message (fencing-lock's 121 has one)");

# ---------------------------------------------------------------------------
# a terminal: the command gets it (reads it, gets Ctrl-C)

{
	my ($in, $tout, $terr) = ('', '', '');
	local $ENV{PGUSER} = 'app';
	my $h = IPC::Run::start(
		[ $prog, 'tty', '--', 'sh', '-c', 'read line; echo "read: $line"; read line' ],
		'<pty<', \$in, '>pty>', \$tout, '2>', \$terr, IPC::Run::timeout($timeout));
	wait_until('the command runs', $timeout, sub { lease('tty', 'state') eq 'held' });
	$in .= "\x1a";    # Ctrl-Z
	$h->pump until $terr =~ /cannot be suspended/;
	like($terr, qr/^fencing-lock: warning: the command cannot be suspended while it holds a lease; resuming it$/m,
		'Ctrl-Z: the command is resumed at once, with a warning');
	$in .= "hello\n";
	$h->pump until $tout =~ /read: hello/;
	pass('under a terminal, the command reads it');
	$in .= "\x03";
	$h->finish;
	is($h->result, 130, 'Ctrl-C reaches the command: exit 130');
}

# a background job of an interactive shell whose command reads the
# terminal: stopped by SIGTTIN, it gets the terminal at "fg"
{
	my ($in, $tout) = ('', '');
	local $ENV{PGUSER} = 'app';
	local $ENV{PS1} = 'prompt$ ';
	my $h = IPC::Run::start([ 'bash', '--norc', '--noprofile', '-i' ],
		'<pty<', \$in, '>pty>', \$tout, IPC::Run::timeout($timeout));
	$in .= qq{$prog -v --ttl 3s ttin -- sh -c 'read line; echo "got: \$line"' &\n};
	$h->pump until $tout =~ /stopped by SIGTTIN: it wants the terminal/;
	pass('a background job reads the terminal: its command is stopped by SIGTTIN, with a warning');
	is(lease('ttin', 'state'), 'held', '... the lease is held (renewed) meanwhile');
	$in .= "fg\n";
	$h->pump until $tout =~ /the command has the terminal now/;
	$in .= "hello\n";
	$h->pump until $tout =~ /got: hello/;
	pass('"fg": the command gets the terminal, and reads it');
	$in .= "echo \"status \$?\"\n";
	$h->pump until $tout =~ /status (\d+)/;
	is($1, 0, '... and fencing-lock ends with its status (0)');
	$in .= "exit\n";
	$h->finish;
}

$node->stop;
done_testing();
