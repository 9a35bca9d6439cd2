# Copyright: fencing extension authors
#
# 030_wait_interrupt.pl: a waiting lease_acquire (wait > 0) sleeps on its
# latch, registered as a share lock on the lease's advisory tag.  It must
# stop at once when
#   - statement_timeout fires,
#   - pg_cancel_backend() cancels it,
#   - pg_terminate_backend() terminates it,
#   - its client goes away (WL_SOCKET_CLOSED: the backend exits with FATAL),
# and in every case leave no share lock behind in pg_locks.  Idle waiters
# must cost (almost) no CPU, and they must not slow the holder down.
#
# Sessions are psql processes driven through IPC::Run, so that a client
# can be killed and a statement can run while the test does other things.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use POSIX ();
use Time::HiRes qw(time usleep);

# the worst case, not the usual one: a healthy run takes about 25 s
my $timeout =
  $PostgreSQL::Test::Utils::timeout_default < 120
  ? $PostgreSQL::Test::Utils::timeout_default
  : 120;
my $n_idle = 50;

my $node = PostgreSQL::Test::Cluster->new('waitint');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = " . ($n_idle + 20));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# ---------------------------------------------------------------------------
# sessions: psql reading commands from a pipe

my $session_no = 0;

sub start_session
{
	my ($name) = @_;
	my $s = { name => $name, in => '', out => '', err => '', mark => 0 };
	$s->{h} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=0',
			'-d', $node->connstr('postgres') . " application_name=$name"
		],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err},
		IPC::Run::timeout($timeout));
	$s->{pid} = run_sql($s, 'SELECT pg_backend_pid();');
	die "session $name: no backend pid: $s->{err}" unless $s->{pid} =~ /^\d+$/;
	return $s;
}

# send SQL (a lone ";" ends a statement that lacks one), followed by a
# marker that psql echoes once the SQL is done
sub send_sql
{
	my ($s, $sql) = @_;
	$s->{mark}++;
	$s->{out} = '';
	$s->{err} = '';
	$s->{in} .= "$sql\n;\n\\echo __done_$s->{mark}__\n";
	$s->{h}->pump_nb;
	return;
}

# wait for the marker, or for psql to exit (its connection was closed);
# the output before the marker (stdout), stderr in $s->{err}
sub finish_sql
{
	my ($s) = @_;
	my $mark = "__done_$s->{mark}__";
	eval {
		$s->{h}->pump until $s->{out} =~ /\Q$mark\E\n/;
		1;
	} or do {
		die $@ unless $@ =~ /process ended prematurely/;
		$s->{ended} = 1;
	};
	(my $out = $s->{out}) =~ s/\Q$mark\E\n//;
	chomp $out;
	return $out;
}

sub run_sql
{
	my ($s, $sql) = @_;
	send_sql($s, $sql);
	return finish_sql($s);
}

sub quit_session
{
	my ($s) = @_;
	$s->{in} .= "\\q\n" unless $s->{ended};
	eval { $s->{h}->finish; 1 } or $s->{h}->kill_kill;
	return;
}

# ---------------------------------------------------------------------------
# observing waiters from the outside

# the lease's advisory tag, as pg_locks shows it: field 4 is 0x4645, fields
# 2 and 3 a 64-bit hash of the lease name
# (17989 = 0x4645: the head of the lease's queue, registered for wake-ups;
# 17990 = 0x4646: the queue, its waiters wait for it)
sub tag_condition
{
	my ($lease, $field4) = @_;
	$field4 //= 17989;
	return qq{locktype = 'advisory' AND objsubid = $field4
	  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND classid = ((fencing._lease_lock_tag('$lease') >> 32) & 4294967295)::oid
	  AND objid = (fencing._lease_lock_tag('$lease') & 4294967295)::oid};
}

# the backend's share locks on any lease tag
sub wait_locks_of
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid IN (17989, 17990) AND pid = $pid"
	);
}

sub share_locks_on
{
	my ($lease) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE " . tag_condition($lease)
		  . " AND mode = 'ShareLock' AND granted");
}

# wait until the backends wait for the lease: the head of its queue
# sleeps registered (granted share lock on the lease's tag, wait event
# Extension), the others wait in the queue (for the queue tag)
sub wait_sleeping
{
	my ($lease, @pids) = @_;
	my $pids = join(',', @pids);
	my $n = scalar(@pids);
	return $node->poll_query_until('postgres', qq{
		SELECT count(DISTINCT l.pid) = $n
		  FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
		 WHERE l.pid IN ($pids)
		   AND ((} . tag_condition($lease) . qq{
				 AND l.mode = 'ShareLock' AND l.granted
				 AND a.wait_event_type = 'Extension' AND a.wait_event IN ('Extension', 'FencingLeaseWait'))
				OR (} . tag_condition($lease, 17990) . qq{ AND NOT l.granted))});
}

# true once the query returns true, polled every 10 ms for at most $limit
# seconds
sub poll_until
{
	my ($limit, $sql) = @_;
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq 't';
		usleep(10_000);
	}
	return 0;
}

# seconds since $t0 until the backend is gone from pg_stat_activity
# (polled every 5 ms by the session $watch), or undef after $limit seconds
my $watch;

sub seconds_until_gone
{
	my ($pid, $t0, $limit) = @_;
	while (time - $t0 < $limit)
	{
		return time - $t0
		  if run_sql($watch, "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid") eq '0';
		usleep(5_000);
	}
	return undef;
}

# ---------------------------------------------------------------------------
# a lease held for the whole test

my $holder = start_session('holder');
$watch = start_session('watch');
my $tok = run_sql($holder,
	"SELECT fencing.lease_acquire('wait_i', 'holder', '10 min');");
like($tok, qr/^\d+$/, 'the holder has the lease');
my $acquire = "SELECT fencing.lease_acquire('wait_i', 'waiter', '1 min', '30 s');";

# "At once" means long before the 30 s wait would end; 5 s leaves room for
# the scheduling delays of a loaded machine.
my $AT_ONCE = 5.0;

# ---------------------------------------------------------------------------
# statement_timeout

my $w = start_session('w_timeout');
run_sql($w, "SET statement_timeout = '300ms';");
my $t0 = time;
run_sql($w, $acquire);
my $elapsed = time - $t0;
like($w->{err}, qr/canceling statement due to statement timeout/,
	'statement_timeout cancels the waiter');
cmp_ok($elapsed, '>=', 0.3, 'not before the timeout');
cmp_ok($elapsed, '<', $AT_ONCE,
	sprintf('at once: %.3f s for a 300 ms timeout and a 30 s wait', $elapsed));
is(wait_locks_of($w->{pid}), '0', 'no share lock left behind');
is(run_sql($w, 'RESET statement_timeout; SELECT 42;'), '42',
	'the session goes on');

# ---------------------------------------------------------------------------
# pg_cancel_backend

send_sql($w, $acquire);
ok(wait_sleeping('wait_i', $w->{pid}), 'the waiter sleeps, registered');
is(share_locks_on('wait_i'), '1',
	"pg_locks shows its share lock on the lease's advisory tag");
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w->{pid})");
finish_sql($w);
$elapsed = time - $t0;
like($w->{err}, qr/canceling statement due to user request/,
	'pg_cancel_backend cancels the waiter');
cmp_ok($elapsed, '<', $AT_ONCE, sprintf('at once: %.3f s', $elapsed));
is(wait_locks_of($w->{pid}), '0', 'no share lock left behind');
is(share_locks_on('wait_i'), '0', 'none on the lease at all');
is(run_sql($w, 'SELECT 43;'), '43', 'the session goes on');

# cancel inside a transaction block: the block is aborted, the lock gone
send_sql($w, "BEGIN; $acquire");
ok(wait_sleeping('wait_i', $w->{pid}), 'a waiter in a transaction block sleeps');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($w->{pid})");
finish_sql($w);
like($w->{err}, qr/canceling statement due to user request/,
	'cancelled in a transaction block');
is(wait_locks_of($w->{pid}), '0', 'no share lock left behind in the aborted block');
run_sql($w, 'ROLLBACK;');
quit_session($w);

# ---------------------------------------------------------------------------
# pg_terminate_backend

$w = start_session('w_terminate');
send_sql($w, $acquire);
ok(wait_sleeping('wait_i', $w->{pid}), 'the waiter sleeps');
$t0 = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($w->{pid})");
my $gone = seconds_until_gone($w->{pid}, $t0, 20);
ok(defined $gone && $gone < $AT_ONCE,
	sprintf('pg_terminate_backend ends the waiter at once: %s s',
		defined $gone ? sprintf('%.3f', $gone) : 'not within 20'));
is(wait_locks_of($w->{pid}), '0', 'no share lock left behind');
finish_sql($w);
like($w->{err}, qr/terminating connection due to administrator command/,
	'the client is told why');
quit_session($w);

# ---------------------------------------------------------------------------
# the client goes away: the waiter notices (WL_SOCKET_CLOSED) and exits,
# long before its 30 s wait would end

$w = start_session('w_client_gone');
send_sql($w, $acquire);
ok(wait_sleeping('wait_i', $w->{pid}), 'the waiter sleeps');
my $log_offset = -s $node->logfile;
$t0 = time;
$w->{h}->kill_kill;    # SIGKILL to psql: its socket closes, nothing is sent
$gone = seconds_until_gone($w->{pid}, $t0, 20);
ok(defined $gone && $gone < $AT_ONCE,
	sprintf('a waiter whose client is killed is gone at once: %s s',
		defined $gone ? sprintf('%.3f', $gone) : 'not within 20'));
is(wait_locks_of($w->{pid}), '0', 'no share lock left behind');
ok( $node->wait_for_log(
		qr/\[$w->{pid}\] .*FATAL:  connection to client lost while waiting for a lease/,
		$log_offset),
	'the server log says why');

# ---------------------------------------------------------------------------
# after all that, the lease is untouched, and a waiter is still woken by
# a release

is( $node->safe_psql('postgres',
		"SELECT holder || ' ' || (token = $tok) || ' ' || state FROM fencing.lease_status WHERE name = 'wait_i'"
	),
	'holder true held',
	'the holder still holds the lease with its token');
is(share_locks_on('wait_i'), '0', 'no waiter registered any more');

$w = start_session('w_release');
send_sql($w, $acquire);
ok(wait_sleeping('wait_i', $w->{pid}), 'a new waiter sleeps');
$t0 = time;
is(run_sql($holder, "SELECT fencing.lease_release('wait_i', $tok);"),
	't', 'the holder releases');
my $got = finish_sql($w);
$elapsed = time - $t0;
ok($got =~ /^\d+$/ && $got > $tok, "the waiter gets a larger token ($got)");
cmp_ok($elapsed, '<', $AT_ONCE, sprintf('woken at once: %.3f s', $elapsed));
quit_session($w);

# ---------------------------------------------------------------------------
# $n_idle idle waiters: CPU use, and the holder's renew latency

my $clk_tck = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;

# utime + stime of the processes, in seconds
sub cpu_seconds
{
	my (@pids) = @_;
	my $ticks = 0;
	for my $pid (@pids)
	{
		open(my $fh, '<', "/proc/$pid/stat") or die "/proc/$pid/stat: $!";
		my $stat = <$fh>;
		close($fh);
		my ($rest) = $stat =~ /^\d+ \(.*\) (.*)$/s or die "bad stat: $stat";
		my @f = split / /, $rest;
		$ticks += $f[11] + $f[12];    # fields 14 and 15: utime, stime
	}
	return $ticks / $clk_tck;
}

# per-call latencies (ms) of $n renewals, as psql's \timing reports them
sub renew_latencies
{
	my ($lease, $token, $n) = @_;
	my $sql = "\\timing on\n"
	  . join('', map { "SELECT fencing.lease_renew('$lease', $token, '10 min');\n" } 1 .. $n)
	  . "\\timing off";
	my $out = run_sql($holder, $sql);
	my @ms = sort { $a <=> $b } ($out =~ /^Time: ([\d.]+) ms/mg);
	my $renewed = () = $out =~ /^t$/mg;
	is($renewed, $n, "all $n renewals succeeded");
	return @ms;
}

sub quantile
{
	my ($q, @sorted) = @_;
	return $sorted[ int($q * $#sorted + 0.5) ];
}

my $itok = run_sql($holder,
	"SELECT fencing.lease_acquire('wait_idle', 'holder', '10 min');");
my @base = renew_latencies('wait_idle', $itok, 200);

my @idle;
for my $i (1 .. $n_idle)
{
	my $s = start_session("idle_$i");
	send_sql($s,
		"SELECT fencing.lease_acquire('wait_idle', 'idle_$i', '10 min', '120 s');");
	push @idle, $s;
}
my @idle_pids = map { $_->{pid} } @idle;
ok(wait_sleeping('wait_idle', @idle_pids), "$n_idle waiters sleep");

my $cpu0 = cpu_seconds(@idle_pids);
my $w0 = time;
sleep(5);
my $cpu1 = cpu_seconds(@idle_pids);
my $wall = time - $w0;
my $cpu = $cpu1 - $cpu0;
note(sprintf('%d idle waiters: %.3f s of CPU in %.2f s (%.2f%% of one core)',
	$n_idle, $cpu, $wall, 100 * $cpu / $wall));
cmp_ok($cpu, '<', 0.05 * $wall,
	sprintf('%d idle waiters use < 5%% of one core: %.3f s CPU in %.2f s',
		$n_idle, $cpu, $wall));
ok(wait_sleeping('wait_idle', @idle_pids), 'they all still sleep');

my @with = renew_latencies('wait_idle', $itok, 200);
my ($b50, $b95, $bmax) =
  (quantile(0.5, @base), quantile(0.95, @base), $base[-1]);
my ($w50, $w95, $wmax) =
  (quantile(0.5, @with), quantile(0.95, @with), $with[-1]);
note(sprintf('renew latency, 0 waiters: median %.3f ms, p95 %.3f ms, max %.3f ms',
	$b50, $b95, $bmax));
note(sprintf('renew latency, %d waiters: median %.3f ms, p95 %.3f ms, max %.3f ms',
	$n_idle, $w50, $w95, $wmax));
# against the latency without waiters, measured just before on the same
# (possibly loaded) machine: waiters must not make a renew wait
cmp_ok($w50, '<', 50 + 5 * $b50,
	sprintf('renew with %d waiters: median %.3f ms (%.3f ms without)', $n_idle, $w50, $b50));
cmp_ok($w95, '<', 50 + 5 * $b95,
	sprintf('renew with %d waiters: p95 %.3f ms (%.3f ms without)', $n_idle, $w95, $b95));
is( run_sql($holder,
		"SELECT fencing.lease_lock('wait_idle', $itok);"),
	't', 'the holder checks its lease while they wait');

# the holder releases: one waiter gets the lease, the others sleep again
$t0 = time;
is(run_sql($holder, "SELECT fencing.lease_release('wait_idle', $itok);"),
	't', 'the holder releases');
ok( $node->poll_query_until('postgres',
		"SELECT state = 'held' AND holder LIKE 'idle\\_%' FROM fencing.lease_status WHERE name = 'wait_idle'"
	),
	'one of them gets the lease');
my ($winner, $wtok) = split /\|/,
  $node->safe_psql('postgres',
	"SELECT holder, token FROM fencing.lease_status WHERE name = 'wait_idle'");
my @losers = grep { $_->{name} ne $winner } @idle;
is(scalar(@losers), $n_idle - 1, "the winner is one of them ($winner)");

# The others must wait on, and the new holder must not be held up by them:
# a failed attempt locks no row (src/lease_row.c locks only a row version
# it judged to qualify).  See also specs/wait_race_loser.spec.  The
# deadline is for a loaded machine.  The new head sleeps (Extension), the
# others wait in the lease's queue (a lock wait on its queue tag, which
# blocks nobody but later waiters).
{
	my $loser_pids = join(',', map { $_->{pid} } @losers);
	my $asleep = poll_until(30, qq{
		SELECT count(*) = } . scalar(@losers) . qq{
		  FROM pg_stat_activity AS a
		 WHERE pid IN ($loser_pids)
		   AND ((wait_event_type = 'Extension' AND wait_event IN ('Extension', 'FencingLeaseWait'))
				OR EXISTS (SELECT FROM pg_locks AS l WHERE l.pid = a.pid AND NOT l.granted
							AND } . tag_condition('wait_idle', 17990) . qq{))});
	ok($asleep, 'the other ' . scalar(@losers) . ' sleep again')
	  or diag('the others wait in: ' . $node->safe_psql('postgres', qq{
		SELECT string_agg(w || ' x ' || n, ', ' ORDER BY w)
		  FROM (SELECT coalesce(wait_event_type, '-') || ':' || coalesce(wait_event, '-') AS w,
					   count(*) AS n
				  FROM pg_stat_activity WHERE pid IN ($loser_pids) GROUP BY 1) AS s}));
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"SET lock_timeout = '1s'; SELECT fencing.lease_renew('wait_idle', $wtok, '10 min');"
	);
	is($stdout, 't', 'the new holder renews at once while the others wait')
	  or diag($stderr);
}

# end the waiters: they are gone, and so are their share locks
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'idle\\_%'"
);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name LIKE 'idle\\_%'"),
	'the waiters are terminated');
is(share_locks_on('wait_idle'), '0', 'no share lock left behind');
for my $s (@idle)
{
	eval { $s->{h}->finish; 1 } or $s->{h}->kill_kill;
}

quit_session($holder);
quit_session($watch);
$node->stop;
done_testing();
