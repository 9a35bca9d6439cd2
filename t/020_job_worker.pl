# Copyright: fencing extension authors
#
# 020_job_worker.pl: the job queue recipe (examples/job_queue.sql) with real
# worker processes (examples/worker.py) and a real stall.
#
# Worker A claims a job and is frozen with SIGSTOP, the way a long GC pause,
# a swapped-out VM or a stopped container freezes a worker.  Its lease runs
# out; worker B reclaims the job with a newer token and completes it.  A is
# resumed with SIGCONT, tries to complete, is refused (LF001) and exits 3;
# the job keeps B's result and B's token.  A second round shows heartbeats
# keeping a claim alive, and a refused heartbeat stopping a resumed worker.
#
# Also checks that the isolation specs' setup blocks are the recipe,
# verbatim (a spec cannot include a file, so they carry a copy).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my $python = '/usr/bin/python3';
my $worker = 'examples/worker.py';
my $recipe = 'examples/job_queue.sql';
my $started = time;

# the worst case, not the usual one: a healthy run takes seconds
my $timeout =
  $PostgreSQL::Test::Utils::timeout_default < 60
  ? $PostgreSQL::Test::Utils::timeout_default
  : 60;

plan skip_all => "$python not found" unless -x $python;

# ---------------------------------------------------------------------------
# the specs carry the recipe verbatim

my $recipe_text = slurp_file($recipe);
unlike($recipe_text, qr/\}/,
	'the recipe has no closing brace, so a spec setup block can hold it');
my @specs = sort glob('specs/job_queue_*.spec');
ok(scalar(@specs) >= 2, 'job_queue isolation specs exist');
(my $recipe_body = $recipe_text) =~ s/\n+\z//;
for my $spec (@specs)
{
	my ($setup) = slurp_file($spec) =~ /^setup\n\{\n(.*?)\n\}/ms;
	ok(defined $setup && $setup eq $recipe_body,
		"$spec: first setup block is $recipe verbatim");
}

# ---------------------------------------------------------------------------
# a node with the extension and the recipe

my $node = PostgreSQL::Test::Cluster->new('jobs');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
$node->command_ok(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
		'-d', $node->connstr('postgres'), '-f', $recipe
	],
	'the recipe loads with psql');

my $dsn = $node->connstr('postgres');

sub enqueue
{
	my ($queue, $payload) = @_;
	return $node->safe_psql('postgres',
		"SELECT job_queue.enqueue('$queue', '$payload')");
}

sub job_row
{
	my ($job) = @_;
	return $node->safe_psql('postgres',
		"SELECT state, result, fence, attempts FROM job_queue.jobs WHERE id = $job"
	);
}

# start a worker in the background; its output accumulates in $w->{out}
sub start_worker
{
	my ($name, @args) = @_;
	my $w = { name => $name, out => '' };
	# a deadline far above what a loaded machine takes, unless the test
	# sets one
	push @args, '--deadline', '60' unless grep { $_ eq '--deadline' } @args;
	$w->{h} = IPC::Run::start(
		[ $python, $worker, '--dsn', "$dsn application_name=$name", '--name', $name, @args ],
		'<', \undef, '>', \$w->{out}, '2>&1',
		IPC::Run::timeout($timeout));
	return $w;
}

# wait until the worker printed something matching $re
sub wait_for_output
{
	my ($w, $re) = @_;
	my $ok = eval {
		$w->{h}->pump until $w->{out} =~ $re;
		1;
	};
	diag("$w->{name} did not print $re: " . ($@ || '') . "output:\n$w->{out}")
	  unless $ok;
	return $ok ? $w->{out} =~ $re : undef;
}

# wait for the worker to exit; its exit code
sub finish_worker
{
	my ($w) = @_;
	my $ok = eval { $w->{h}->finish; 1 };
	unless ($ok)
	{
		diag("$w->{name} did not finish: $@output:\n$w->{out}");
		$w->{h}->kill_kill;
		return -1;
	}
	my $rc = ($w->{h}->results)[0];
	note("worker $w->{name} exited $rc:\n$w->{out}");
	return $rc;
}

# run a worker to its end: exit code and output
sub run_worker
{
	my $w = start_worker(@_);
	my $rc = finish_worker($w);
	return ($rc, $w->{out});
}

# process state from /proc: T when stopped
sub process_state
{
	my ($w) = @_;
	my $pid = $w->{h}{KIDS}[0]{PID};
	open(my $fh, '<', "/proc/$pid/stat") or return '?';
	my $stat = <$fh>;
	close($fh);
	return $stat =~ /^\d+ \(.*\) (\S)/ ? $1 : '?';
}

sub lease_expired
{
	my ($job) = @_;
	return $node->poll_query_until('postgres',
		"SELECT lease_until < clock_timestamp() FROM job_queue.jobs WHERE id = $job"
	);
}

# ---------------------------------------------------------------------------
# round 1: A stalls past its lease, B reclaims and completes, A's
# completion is refused

my $job = enqueue('mail', '{"to": "ann@example.com"}');

my $wa = start_worker('A', '--queue', 'mail', '--lease', '1', '--work', '2',
	'--result', '{"sent_by": "A"}');
my ($a_job, $a_token) =
  wait_for_output($wa, qr/claimed job (\d+) with token (\d+)/);
is($a_job, $job, 'A claimed the job');

# freeze A; it cannot heartbeat or complete while stopped
$wa->{h}->signal('STOP');
my $state;
for (1 .. 100)
{
	$state = process_state($wa);
	last if $state eq 'T';
	usleep(10_000);
}
is($state, 'T', 'A is stopped');

ok(lease_expired($job), "A's lease ran out while A was stopped");

my ($b_rc, $b_out) = run_worker('B', '--queue', 'mail', '--lease', '30',
	'--work', '0', '--result', '{"sent_by": "B"}');
is($b_rc, 0, 'B exited 0 (completed)') or diag($b_out);
my ($b_job, $b_token) = $b_out =~ /claimed job (\d+) with token (\d+)/;
is($b_job, $job, 'B reclaimed the same job');
ok(defined $b_token && $b_token > $a_token,
	'B got a newer token than A (' . ($b_token // 'none') . " > $a_token)");
like($b_out, qr/\[B\] completed job $job with token $b_token\n/,
	'B says it completed');
unlike($wa->{out}, qr/completed|REFUSED/, 'A has done nothing since its claim');

# wake A up: its completion is refused, it exits 3 and says why
$wa->{h}->signal('CONT');
my $a_rc = finish_worker($wa);
is($a_rc, 3, 'A exited 3 (refused as stale)') or diag($wa->{out});
like(
	$wa->{out},
	qr/\[A\] completion REFUSED: token $a_token is stale \(job was reclaimed with token $b_token\)\n/,
	'A says its completion was refused, and by which token');
unlike($wa->{out}, qr/\[A\] completed/, 'A never says it completed');

is(job_row($job), qq(done|{"sent_by": "B"}|$b_token|2),
	"the job holds B's result and B's token, after 2 attempts");

# nothing is left to claim
my ($c_rc, $c_out) = run_worker('C', '--queue', 'mail');
is($c_rc, 4, 'a third worker finds no job (exit 4)') or diag($c_out);
like($c_out, qr/\[C\] no job to claim in queue 'mail'/, 'and says so');

# ---------------------------------------------------------------------------
# round 2: heartbeats keep a claim alive past its lease; once stopped, the
# claim is taken over and the resumed worker's heartbeat is refused

$job = enqueue('reports', '{"report": 7}');
my $wh = start_worker('H', '--queue', 'reports', '--lease', '5', '--work',
	'60', '--heartbeat', '0.2', '--result', '{"by": "H"}');
my ($h_job, $h_token) =
  wait_for_output($wh, qr/claimed job (\d+) with token (\d+)/);
is($h_job, $job, 'H claimed the job');
my $claimed = $node->safe_psql('postgres', 'SELECT clock_timestamp()');

# The claim was made before H printed it, so its first lease ends before
# $claimed + 5 s; only a heartbeat moves it past that.  Wait for it (a
# loaded machine may run H late) instead of sleeping and assuming.
ok( $node->poll_query_until(
		'postgres',
		"SELECT lease_until > '$claimed'::timestamptz + interval '5 s' FROM job_queue.jobs WHERE id = $job"
	),
	"H's heartbeats extend its claim past its first lease of 5 s");
ok(wait_for_output($wh, qr/\[H\] heartbeat: lease of job $job extended/),
	'H sent heartbeats');
my ($d_rc, $d_out) = run_worker('D', '--queue', 'reports');
is($d_rc, 4, "H's heartbeats kept the job from being reclaimed (D exit 4)")
  or diag($d_out);

$wh->{h}->signal('STOP');
ok(lease_expired($job), "H's lease ran out while H was stopped");
my ($e_rc, $e_out) = run_worker('E', '--queue', 'reports', '--work', '0',
	'--result', '{"by": "E"}');
is($e_rc, 0, 'E reclaimed and completed the job') or diag($e_out);
my ($e_token) = $e_out =~ /claimed job $job with token (\d+)/;
ok(defined $e_token && $e_token > $h_token, 'E got a newer token than H');

$wh->{h}->signal('CONT');
my $h_rc = finish_worker($wh);
is($h_rc, 3, 'H exited 3 (refused as stale)') or diag($wh->{out});
like(
	$wh->{out},
	qr/\[H\] heartbeat REFUSED: token $h_token is stale \(job was reclaimed with token $e_token\)\n/,
	"H's next heartbeat was refused");
unlike($wh->{out}, qr/completion|completed/, 'H never tried to complete');
is(job_row($job), qq(done|{"by": "E"}|$e_token|2),
	"the job holds E's result and E's token");

# ---------------------------------------------------------------------------
# round 3: a failover between claim and completion (here advance_tokens,
# which enters a new token band as a promotion does): the completion is
# refused with LF005, and the worker drops the job and claims again, not
# exit 1.  The job it dropped is still under its lease, so it finds none.

$job = enqueue('invoices', '{"invoice": 9}');
my $wf = start_worker('F', '--queue', 'invoices', '--lease', '30', '--work', '5');
my ($f_job, $f_token) =
  wait_for_output($wf, qr/claimed job (\d+) with token (\d+)/);
is($f_job, $job, 'F claimed the job');
# F is held while the failover happens, so it completes only after it
$wf->{h}->signal('STOP');
$node->safe_psql('postgres', 'SELECT fencing.advance_tokens()');
$wf->{h}->signal('CONT');
my $f_rc = finish_worker($wf);
is($f_rc, 4, 'F, refused with LF005, claimed again and found no job (exit 4)')
  or diag($wf->{out});
like($wf->{out},
	qr/\[F\] completion REFUSED: token $f_token was issued before a failover \(LF005\)\n\[F\] dropping job $job; claiming again\n\[F\] no job to claim/,
	'F says why it dropped the job and claims again');
unlike($wf->{out}, qr/ERROR/, 'F did not take LF005 for an unexpected error');

# ---------------------------------------------------------------------------
# round 4: a frozen server backend (SIGSTOP) answers nothing; the worker's
# client-side deadline passes, it drops the connection and stops (exit 6)

$job = enqueue('audit', '{"audit": 1}');
my $wg = start_worker('G', '--queue', 'audit', '--lease', '30', '--work', '5',
	'--deadline', '2');
wait_for_output($wg, qr/\[G\] working on job/);
# G is held while its backend is frozen, so its completion finds it frozen
$wg->{h}->signal('STOP');
my $g_backend = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE application_name = 'G'");
ok($g_backend =~ /^\d+$/, "G's backend is $g_backend");
kill 'STOP', $g_backend;
$wg->{h}->signal('CONT');
my $g_rc = finish_worker($wg);
kill 'CONT', $g_backend;
is($g_rc, 6, 'G gave up on a call that outlived its deadline (exit 6)')
  or diag($wg->{out});
like($wg->{out}, qr/\[G\] a call took longer than 2 s: connection dropped, the claim is treated as lost; stopping/,
	'G says so');

# ---------------------------------------------------------------------------
# usage errors exit 2, connection errors 1

my ($u_rc) = run_worker('U', '--lease', '0');
is($u_rc, 2, 'a bad argument exits 2');

$node->stop;
my ($x_rc, $x_out) = run_worker('X', '--queue', 'mail');
is($x_rc, 1, 'no server: exit 1');
like($x_out, qr/\[X\] ERROR: /, 'and an error line');

note sprintf('020_job_worker took %d s', time - $started);

done_testing();
