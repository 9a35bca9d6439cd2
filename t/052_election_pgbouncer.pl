# Copyright: fencing extension authors
#
# 052_election_pgbouncer.pl: five candidates elect a leader through
# PgBouncer in transaction mode, with server connections recycled every
# second (server_lifetime = 1), while the test freezes leaders, kills one,
# and fails the lease database over.
#
# Each candidate is a real process (t/lib/election_candidate.py) using the
# client helper examples/python/fencing_leader.py: it campaigns (TTL 2 s),
# renews with a client-side deadline, watches its token, observes the
# leadership, and while it leads writes to a fenced resource with its token.
# The resource is in the lease database (elect.resource, one row written
# with fence_advance; elect.history records each accepted write in the same
# statement), so it fails over with it; the standby is synchronous, so no
# acknowledged write or campaign is lost with the old primary.
#
#   1. Twice, the leader is frozen (SIGSTOP) past its TTL; its successor is
#      elected and writes; the leader is resumed (SIGCONT) and its pending
#      write goes out with its old token.  Then a leader is killed (SIGKILL).
#      Then PgBouncer is frozen: the leader counts its leadership lost by
#      its renew deadline with no call answering, while a renew without a
#      client-side deadline (statement_timeout set) waits past the expiry.
#   2. The primary crashes (immediate stop) under a writing leader; the
#      synchronous standby is promoted; PgBouncer is pointed at it (RELOAD).
#   3. t/lib/election_check.py checks the whole history: accepted tokens
#      never decrease (at most one leader's writes at any point of the token
#      order), every acknowledged write is there, every frozen leader's late
#      write was refused (and at least one was made), and no candidate's
#      view of the leader went backwards.
#   4. Negative control: the same candidates writing their token without
#      fence_advance, one freeze: the checker must report violations.  And
#      the checker's own checks, each fed a history that breaks it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use IPC::Run;
use JSON::PP;
use Time::HiRes qw(time usleep);

my $python = '/usr/bin/python3';
plan skip_all => "$FencingTest::pgbouncer not found" unless -x $FencingTest::pgbouncer;
plan skip_all => 'pgbouncer does not run as root' if $> == 0;
plan skip_all => "$python with psycopg2 not found"
  unless system($python, '-c', 'import psycopg2') == 0;

my $started = time;
my $lib = "$FindBin::RealBin/lib";
my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $json = JSON::PP->new;
my $ttl = 2;

# ---------------------------------------------------------------------------
# the lease database: a primary and a synchronous standby

my $primary = PostgreSQL::Test::Cluster->new('el_primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "max_connections = 80\n");
$primary->start;
my $superuser = $primary->safe_psql('postgres', 'SELECT current_user');
my $schema_sql = q{
	CREATE TABLE %1$s.resource (id int PRIMARY KEY, fence bigint,
								writes bigint NOT NULL DEFAULT 0);
	INSERT INTO %1$s.resource VALUES (1, NULL, 0);
	CREATE TABLE %1$s.history (seq bigserial PRIMARY KEY, token bigint NOT NULL,
							   candidate text NOT NULL,
							   at timestamptz NOT NULL DEFAULT clock_timestamp());
};
$primary->safe_psql(
	'postgres', qq{
	CREATE EXTENSION fencing;
	CREATE ROLE app LOGIN;
	GRANT USAGE ON SCHEMA fencing TO app;
	CREATE SCHEMA elect AUTHORIZATION app;
	CREATE SCHEMA unfenced AUTHORIZATION app;
	SET ROLE app;
} . sprintf($schema_sql, 'elect') . sprintf($schema_sql, 'unfenced'));

$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('el_standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;
# after the backup, so that the promoted standby waits for nobody
$primary->safe_psql('postgres',
	"ALTER SYSTEM SET synchronous_standby_names = 'el_standby'; SELECT pg_reload_conf();");
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'el_standby'")
  or die 'the standby did not become synchronous';
pass('primary with a synchronous standby');

# ---------------------------------------------------------------------------
# PgBouncer: transaction pooling; a server connection lives one second;
# after a failed login (the crashed primary) it tries again after a second

my ($port, $bdir) = start_pgbouncer(
	$primary,
	users => [ 'app', $superuser ],
	pool_size => 30,
	max_client_conn => 200,
	extra => "server_lifetime = 1\nserver_idle_timeout = 1\nserver_login_retry = 1\n");
wait_until('pgbouncer', 30, sub {
	system('psql', '-XAtq', '-h', '127.0.0.1', '-p', $port, '-U', 'app', '-d', 'postgres',
		'-c', 'SELECT 1') == 0
});
my $dsn = "host=127.0.0.1 port=$port user=app dbname=postgres";

# ---------------------------------------------------------------------------
# candidates

my $db = $primary;    # where the test looks (the primary of the moment)
my %cand;             # name => { h, log, err }
my @logs;

sub start_candidate
{
	my ($name, @opt) = @_;
	my $log = "$bdir/$name.log";
	my $err = "$bdir/$name.err";
	my $h = IPC::Run::start(
		[
			$python, "$lib/election_candidate.py", '--dsn', $dsn, '--name', $name,
			'--ttl', $ttl, @opt
		],
		'<', \undef, '>', $log, '2>', $err);
	$cand{$name} = { h => $h, log => $log, err => $err };
	push @logs, $log;
	return;
}

sub events
{
	my ($name) = @_;
	open my $fh, '<', $cand{$name}{log} or return ();
	my @e = map { $json->decode($_) } grep { /^\{/ } <$fh>;
	close $fh;
	return @e;
}

# SIGTERM: a candidate stops campaigning, a leader resigns, and it exits
sub stop_candidates
{
	my (@names) = @_;
	for my $n (@names)
	{
		$cand{$n}{h}->signal('CONT');
		$cand{$n}{h}->signal('TERM');
	}
	for my $n (@names)
	{
		my $t0 = time;
		usleep(50_000)
		  until (grep { $_->{event} eq 'exit' } events($n)) || time - $t0 > $timeout;
		$cand{$n}{h}->kill_kill;
		$cand{$n}{h}->finish;
		delete $cand{$n};
	}
	return;
}

# the live leader whose token has written five times, as (candidate, token, pid)
sub writing_leader
{
	my ($election, $schema) = @_;
	my ($c, $t);
	wait_until("a leader of $election that has written", $timeout, sub {
		($c, $t) = split /\|/,
		  $db->safe_psql('postgres', qq{
			SELECT l.candidate, l.token FROM fencing.election_leader('$election') AS l
			 WHERE (SELECT count(*) FROM $schema.history AS h WHERE h.token = l.token) >= 5});
		return defined $t && $t ne '';
	});
	my $pid;
	wait_until("$c logs its leadership", $timeout, sub {
		($pid) = map { $_->{pid} }
		  grep { $_->{event} eq 'leading' && $_->{token} == $t } events($c);
		return defined $pid;
	});
	return ($c, $t, $pid);
}

sub successor_wrote
{
	my ($schema, $token) = @_;
	return $db->safe_psql('postgres',
		"SELECT count(*) > 0 FROM $schema.history WHERE token > $token") eq 't';
}

# Freeze the writing leader past its TTL, in the middle of a unit of work
# (its log ends with "unit": it sleeps before its write); wait until its
# successor wrote; resume it; wait until it knows it lost.  Returns the
# freeze record, and whether the frozen leader attempted a write after its
# resume (it does unless the freeze missed the unit: then the caller
# freezes again).
sub freeze_round
{
	my ($election, $schema) = @_;
	my ($c, $t, $pid) = writing_leader($election, $schema);
	wait_until("$c starts a unit of work", $timeout, sub {
		my @e = grep { $_->{pid} == $pid && $_->{event} =~ /^(unit|attempt|write)$/ } events($c);
		return @e && $e[-1]{event} eq 'unit' && $e[-1]{token} == $t;
	});
	kill 'STOP', $pid;
	my $stopped_at = time;
	wait_until("a successor of $c writes", $timeout, sub { successor_wrote($schema, $t) });
	my $resumed_at = time;
	kill 'CONT', $pid;
	wait_until("$c stops leading", $timeout, sub {
		grep { $_->{event} eq 'stopped' && $_->{token} == $t } events($c)
	});
	my ($stop) = grep { $_->{event} eq 'stopped' && $_->{token} == $t } events($c);
	my $late = grep {
		$_->{event} eq 'attempt' && $_->{token} == $t && $_->{at} >= $resumed_at
	} events($c);
	note sprintf('%s (token %s) frozen %.1f s; it learned: %s, successor %s; late writes: %d',
		$c, $t, $resumed_at - $stopped_at, $stop->{reason}, $stop->{successor} // 'none', $late);
	return ({ c => $c, pid => $pid, token => $t, resumed_at => $resumed_at }, $late);
}

# freeze rounds until $n frozen leaders attempted a late write (at most $max)
sub freezes
{
	my ($election, $schema, $n, $max) = @_;
	my @f;
	my $with_late = 0;
	for (1 .. $max)
	{
		my ($f, $late) = freeze_round($election, $schema);
		push @f, $f;
		$with_late++ if $late;
		last if $with_late >= $n;
	}
	return @f;
}

# run the checker; (exit code, summary, stderr)
sub check_history
{
	my ($schema, $freezes, @logfiles) = @_;
	my $hist = "$bdir/$schema.history";
	my $fz = "$bdir/$schema.freezes";
	append_to_file($hist,
		$db->safe_psql('postgres',
			"SELECT seq, token, candidate, extract(epoch FROM at) FROM $schema.history ORDER BY seq")
		  . "\n");
	append_to_file($fz, join('', map { $json->encode($_) . "\n" } @$freezes));
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, "$lib/election_check.py", '--history', $hist, '--freezes', $fz,
		@logfiles ], '<', \undef, '>', \$out, '2>', \$err);
	my $rc = $? >> 8;
	my $summary = eval { $json->decode($out) } // {};
	return ($rc, $summary, $err);
}

my @names = map { "c$_" } 1 .. 5;
start_candidate($_) for @names;

# ---------------------------------------------------------------------------
# 1. freezes and a kill, through pgbouncer

my @freezes;
push @freezes, freezes('e', 'elect', 2, 6);
pass(scalar(@freezes) . ' leaders frozen past their TTL, each followed by a writing successor');

{
	my ($c, $t, $pid) = writing_leader('e', 'elect');
	kill 'KILL', $pid;
	my $killed_at = time;
	wait_until("a successor of the killed $c writes", $timeout,
		sub { successor_wrote('elect', $t) });
	note sprintf('leader %s (token %s) killed; a successor wrote %.1f s later',
		$c, $t, time - $killed_at);
	$cand{$c}{h}->finish;
	delete $cand{$c};
	start_candidate('c6');
	pass("leader $c killed; a successor took over; c6 replaces it");
}

# The pooler freezes (SIGSTOP): no call answers, and statement_timeout,
# which runs on the server, never fires.  The leader's keepalive must
# count its leadership lost by its renew deadline all the same; a renew
# without a client-side deadline (the control) is still waiting when the
# lease has expired.
{
	my ($c, $t, $pid) = writing_leader('e', 'elect');
	my %io = (in => '', out => '');
	my $naive = IPC::Run::start(
		[
			$python, '-c', q{
import sys, time, psycopg2
conn = psycopg2.connect(sys.argv[1]); conn.autocommit = True
cur = conn.cursor(); cur.execute("SET statement_timeout = '1s'")
print("ready", flush=True); sys.stdin.readline()
cur.execute("SELECT fencing.lease_renew('e', %s, '2 s')", (int(sys.argv[2]),))
print("answered %s %.3f" % (cur.fetchone()[0], time.time()), flush=True)
}, $dsn, $t
		],
		'<', \$io{in}, '>', \$io{out}, IPC::Run::timeout($timeout));
	$naive->pump until $io{out} =~ /ready/;
	my $bpid = slurp_file("$bdir/pgbouncer.pid");
	chomp $bpid;
	kill 'STOP', $bpid;
	my $frozen_at = time;
	$io{in} .= "go\n";
	$naive->pump_nb;
	my $expires = $db->safe_psql('postgres',
		"SELECT extract(epoch FROM expires_at) FROM fencing.lease_status WHERE name = 'e' AND token = $t");
	wait_until("$c counts its leadership lost", $timeout, sub {
		grep { $_->{event} eq 'lost' && $_->{token} == $t } events($c)
	});
	my ($lost) = grep { $_->{event} eq 'lost' && $_->{token} == $t } events($c);
	is($lost->{reason}, 'renew_deadline',
		"pooler frozen: the leader $c counts its leadership lost (renew_deadline) with no answer");
	note sprintf('... %.2f s after the freeze, %.2f s before its lease expired at the server',
		$lost->{at} - $frozen_at, $expires - $lost->{at});
	wait_until('the lease expired', $timeout, sub { time > $expires + 1 });
	$naive->pump_nb;
	unlike($io{out}, qr/answered/,
		'a renew without a client-side deadline (statement_timeout 1 s) is still waiting'
		  . ' 1 s after the lease expired');
	kill 'CONT', $bpid;
	my $resumed_at = time;
	$naive->pump until $io{out} =~ /answered/;
	$naive->finish;
	my ($answer, $at) = $io{out} =~ /answered (\w+) ([\d.]+)/;
	note sprintf('the control renew answered "%s" only after the pooler resumed, %.1f s after the expiry',
		$answer, $at - $expires);
	cmp_ok($at, '>=', $resumed_at, '... and answered only once the pooler resumed');
}

my $recycled = () = slurp_file("$bdir/pgbouncer.log") =~ /lifetime/g;
cmp_ok($recycled, '>', 0,
	"pgbouncer recycled server connections meanwhile ($recycled closed for server_lifetime)");

# ---------------------------------------------------------------------------
# 2. the lease database fails over under a writing leader

{
	my ($c, $t, $pid) = writing_leader('e', 'elect');
	my $crash_at = time;
	$primary->stop('immediate');
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'promotion did not finish';
	$db = $standby;
	# point pgbouncer at the new primary
	my $ini = slurp_file("$bdir/pgbouncer.ini");
	my ($host, $nport) = ($standby->host, $standby->port);
	$ini =~ s/^postgres = .*$/postgres = host=$host port=$nport dbname=postgres/m;
	open my $fh, '>', "$bdir/pgbouncer.ini" or die $!;
	print $fh $ini;
	close $fh;
	my $bpid = slurp_file("$bdir/pgbouncer.pid");
	chomp $bpid;
	kill 'HUP', $bpid;
	# the new primary's band (entered by its first token)
	$standby->safe_psql('postgres', 'SELECT fencing.next_token()');
	my $band = band_start($standby);
	wait_until('a leader of the new band writes', $timeout, sub {
		$db->safe_psql('postgres', "SELECT count(*) > 0 FROM elect.history WHERE token >= $band")
		  eq 't'
	});
	my $first = $db->safe_psql('postgres',
		"SELECT candidate || ' ' || extract(epoch FROM min(at)) FROM elect.history"
		  . " WHERE token >= $band GROUP BY candidate ORDER BY min(at) LIMIT 1");
	my ($new, $at) = split / /, $first;
	note sprintf('failover: %s led at the crash; %s wrote with a new-band token %.1f s after it',
		$c, $new, $at - $crash_at);
	wait_until("$c stops leading", $timeout, sub {
		grep { $_->{event} eq 'stopped' && $_->{token} == $t } events($c)
	});
	my ($stop) = grep { $_->{event} eq 'stopped' && $_->{token} == $t } events($c);
	like($stop->{reason}, qr/^(lost_at_failover|renew_deadline|expired|taken_over)$/,
		"the leader at the crash learned it lost: $stop->{reason}");
	# and one more freeze on the new primary
	push @freezes, freezes('e', 'elect', 1, 3);
}

stop_candidates(sort keys %cand);

# ---------------------------------------------------------------------------
# 3. the checker

my ($rc, $sum, $err) = check_history('elect', \@freezes, @logs);
is($rc, 0, 'the history checker finds no violation') or diag($err);
note 'checker: ' . $json->canonical->encode($sum);
cmp_ok($sum->{leaders}, '>=', 5, "$sum->{leaders} leaders wrote, in increasing token order");
cmp_ok($sum->{writes_accepted}, '>', 0, "$sum->{writes_accepted} writes accepted");
cmp_ok($sum->{writes_refused}, '>', 0,
	"$sum->{writes_refused} writes refused (" . join(', ', @{ $sum->{refused_sqlstates} }) . ')');
is($sum->{frozen_leaders}, scalar(@freezes), scalar(@freezes) . ' leaders were frozen');
cmp_ok($sum->{frozen_leaders_refused}, '>=', 3,
	"$sum->{frozen_leaders_refused} of them wrote after their resume"
	  . " ($sum->{frozen_late_attempts} writes), all refused");
cmp_ok($sum->{view_observations}, '>', 20,
	"$sum->{view_observations} leadership observations by $sum->{view_processes} processes");
is($sum->{view_backwards}, 0, 'no view went backwards');

# ---------------------------------------------------------------------------
# 4. negative control: the same candidates without the fence

@logs = ();
start_candidate("u$_", '--election', 'u', '--schema', 'unfenced', '--unfenced') for 1 .. 3;
my @ufreezes = freezes('u', 'unfenced', 1, 4);
stop_candidates(sort keys %cand);
($rc, $sum, $err) = check_history('unfenced', \@ufreezes, @logs);
is($rc, 1, 'unfenced candidates: the checker reports violations');
like($err, qr/VIOLATION order: /, '... a second leader\'s write after a newer token\'s');
like($err, qr/VIOLATION frozen: /, '... the frozen leader\'s late write was accepted');
note "unfenced: $err";

# the checker's other checks, each fed a history that breaks it
{
	my $d = "$bdir/selftest";
	mkdir $d;
	my $ev = sub { $json->encode({ at => 1, pid => 1, c => 'x', @_ }) . "\n" };
	append_to_file("$d/h", "1|10|x|1\n2|10|x|2\n4|10|x|3\n");
	append_to_file("$d/f", '');
	append_to_file("$d/log",
		$ev->(event => 'leading', token => 10)
		  . $ev->(event => 'attempt', token => 10)
		  . $ev->(event => 'write', token => 10, outcome => 'accepted', seq => 1)
		  . $ev->(event => 'attempt', token => 10)
		  . $ev->(event => 'write', token => 10, outcome => 'accepted', seq => 3)
		  . $ev->(event => 'view', token => 12, at => 2)
		  . $ev->(event => 'view', token => 11, at => 3));
	my ($out, $e2) = ('', '');
	IPC::Run::run([ $python, "$lib/election_check.py", '--history', "$d/h", '--freezes', "$d/f",
		"$d/log" ], '<', \undef, '>', \$out, '2>', \$e2);
	like($e2, qr/VIOLATION acked: .*seq 3/, 'checker: an acknowledged write missing from the history');
	like($e2, qr/VIOLATION acked: history has 3 writes of token 10 by x; it saw 2/,
		'checker: a history row nobody saw accepted');
	like($e2, qr/VIOLATION view: .*saw token 11 after 12/, 'checker: a view going backwards');
	append_to_file("$d/h2", "1|10|x|1\n2|11|y|2\n");
	($out, $e2) = ('', '');
	IPC::Run::run([ $python, "$lib/election_check.py", '--history', "$d/h2", '--freezes', "$d/f",
		"$d/log" ], '<', \undef, '>', \$out, '2>', \$e2);
	like($e2, qr/VIOLATION owner: token 11 wrote for \['y'\], which no campaign/,
		'checker: a write with a token no campaign issued');
}

$standby->stop;
note sprintf('052_election_pgbouncer took %d s', time - $started);
done_testing();
