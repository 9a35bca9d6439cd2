# Copyright: fencing extension authors
#
# 008_durable_fence.pl: a fenced write acknowledged with synchronous_commit
# = off survives a crash, so the stale holder it locked out stays locked out
# (issue 16).
#
# Setup as in 001_crash.pl: synchronous_commit = off, a 10 s
# wal_writer_delay, no background writer and no checkpoint during the run,
# so WAL that no commit flushed is really lost when the server stops with
# "pg_ctl stop -m immediate".
#
# Part 1, the issue's sequence, in every resource-side form at once: A takes
# lease L with token a (1 s) and lets it expire; B takes it with token b;
# B writes with b, acknowledged, through
#   files   fence_advance in the SET list,
#   checked fence_allows in the WHERE clause (SET fence = b),
#   guarded the fence_guard trigger (SET fence = b),
#   jobs    the job-queue recipe (A's claim expired, B reclaims, completes);
# immediate stop, start: B's writes are all there and every write of A's
# with token a is refused (LF001, both tokens named; 0 rows for
# fence_allows).  Played twice.
#
# Part 2, the same under concurrent fenced-write load, three crash cycles.
# Four writers (synchronous_commit = off) take fresh tokens with
# next_token() and write random rows of the three tables with them, each
# form in turn; a job worker claims, heartbeats and completes jobs; they
# race, so older tokens are refused (LF001 or 0 rows) all along.  Only what
# a client printed counts as acknowledged (autocommit: the server commits
# before it reports the command complete).  Each cycle also plays the
# sequence of part 1 on a row of its own and stops the server right after
# B's write.  After each restart:
#   - every row's fence is >= the highest token acknowledged on it (no
#     acknowledged fenced write lost), every acknowledged claim's fence is
#     there, and an acknowledged completion is there or its job is still
#     running under the same claim (a completion does not move the fence,
#     so it is as durable as synchronous_commit says);
#   - a write to each row with a token below that highest acknowledged
#     token is refused, in the row's own form: no stale write accepted.
# Part 3, on the quiet server between the two: a write that moves a row's
# fence, in each form, has its commit flushed when COMMIT returns.
# test/negative/negative_control.sh applies test/negative/no_durable_fence.patch
# (fenced writes commit as synchronous_commit says) and requires this test
# to fail.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $t_begin = time;
my $tmp     = PostgreSQL::Test::Utils::tempdir;
my $nrows   = 16;
my $cycles  = 3;

my $node = PostgreSQL::Test::Cluster->new('durable_fence');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
synchronous_commit = off
wal_writer_delay = 10s
bgwriter_lru_maxpages = 0
checkpoint_timeout = 1h
max_wal_size = 4GB
restart_after_crash = on
log_statement = none
max_connections = 30
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
$node->command_ok(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
		$node->connstr('postgres'), '-f', 'examples/job_queue.sql'
	],
	'job queue recipe loads');
$node->safe_psql(
	'postgres', qq{
CREATE TABLE files   (id int PRIMARY KEY, fence bigint, val text);
CREATE TABLE checked (id int PRIMARY KEY, fence bigint, val text);
CREATE TABLE guarded (id int PRIMARY KEY, fence bigint, val text);
CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON guarded
  FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO files   SELECT g, NULL, 'init' FROM generate_series(1, $nrows + 10) g;
INSERT INTO checked SELECT g, NULL, 'init' FROM generate_series(1, $nrows + 10) g;
INSERT INTO guarded SELECT g, NULL, 'init' FROM generate_series(1, $nrows + 10) g;
-- the write of each form, used by the clients and the checks; returns
-- 'accepted', or 'refused' with LF001 or 0 rows
CREATE FUNCTION fenced_write(form text, rid int, tok bigint, v text)
RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE n bigint;
BEGIN
  IF form = 'files' THEN
    UPDATE files SET val = v, fence = fencing.fence_advance(fence, tok)
     WHERE id = rid;
  ELSIF form = 'checked' THEN
    UPDATE checked SET val = v, fence = tok
     WHERE id = rid AND fencing.fence_allows(fence, tok);
  ELSE
    UPDATE guarded SET val = v, fence = tok WHERE id = rid;
  END IF;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN CASE WHEN n = 1 THEN 'accepted' ELSE 'refused' END;
EXCEPTION WHEN SQLSTATE 'LF001' THEN
  RETURN 'refused';
END \$\$;
});
is($node->safe_psql('postgres', 'SHOW synchronous_commit'),
	'off', 'synchronous_commit is off');

my @forms = qw(files checked guarded);

# psql -c, returning (rc, stdout, stderr)
sub run_sql
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', $sql, stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	return ($rc, $out, $err);
}

sub restart
{
	my ($what) = @_;
	$node->stop('immediate');
	$node->start;
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$what: server is back");
}

# ---------------------------------------------------------------------------
# the issue's sequence, in every form: set up A (expired) and B on lease $l

# A: lease (1 s) and a claim of a job of its own that expires too
sub story_a
{
	my ($l) = @_;
	my $a = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$l', 'A', '1 s')");
	my $job = $node->safe_psql('postgres',
		"SELECT job_queue.enqueue('$l', '{}')");
	my $ja = $node->safe_psql('postgres',
		"SELECT token FROM job_queue.claim('$l', 1, '1 s')");
	return { l => $l, a => $a, job => $job, ja => $ja };
}

# B, once A's lease and claim expired: take over, write, acknowledged
sub story_b
{
	my ($s, $rid) = @_;
	my $l = $s->{l};
	$node->poll_query_until('postgres',
		"SELECT state = 'expired' FROM fencing.lease_status WHERE name = '$l'")
	  or die "lease $l did not expire";
	$node->poll_query_until('postgres',
		"SELECT lease_until < clock_timestamp() FROM job_queue.jobs WHERE id = $s->{job}")
	  or die "claim of job $s->{job} did not expire";
	$s->{b} = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$l', 'B', '60 s')");
	$s->{jb} = $node->safe_psql('postgres',
		"SELECT token FROM job_queue.claim('$l', 1, '60 s')");
	$s->{rid} = $rid;
	# every write of B's in autocommit, with synchronous_commit = off
	my $out = $node->safe_psql(
		'postgres', qq{
SELECT 'jobs', job_queue.complete($s->{job}, $s->{jb}, '{"by": "B"}');
UPDATE files SET val = 'by B', fence = fencing.fence_advance(fence, $s->{b})
 WHERE id = $rid RETURNING 'files', fence;
UPDATE checked SET val = 'by B', fence = $s->{b}
 WHERE id = $rid AND fencing.fence_allows(fence, $s->{b}) RETURNING 'checked', fence;
UPDATE guarded SET val = 'by B', fence = $s->{b} WHERE id = $rid
 RETURNING 'guarded', fence;
});
	$s->{acked} = $out;
	return $s;
}

# after the restart: B's writes are there, A's are refused
sub story_check
{
	my ($s, $what) = @_;
	my ($a, $b, $rid) = @{$s}{qw(a b rid)};
	ok($a > 0 && $b > $a && $s->{jb} > $s->{ja},
		"$what: A got token $a, B took over with $b");
	is($s->{acked}, "jobs|\nfiles|$b\nchecked|$b\nguarded|$b",
		"$what: B's four writes were acknowledged");
	for my $t (@forms)
	{
		is($node->safe_psql('postgres', "SELECT val, fence FROM $t WHERE id = $rid"),
			"by B|$b", "$what: $t: B's acknowledged write survived the crash");
	}
	is( $node->safe_psql('postgres',
			"SELECT state, result->>'by', fence FROM job_queue.jobs WHERE id = $s->{job}"),
		"done|B|$s->{jb}",
		"$what: jobs: B's acknowledged completion survived the crash");

	my ($rc, $out, $err) = run_sql(
		"UPDATE files SET val = 'by A (stale)', fence = fencing.fence_advance(fence, $a) WHERE id = $rid");
	ok($rc != 0 && $err =~ /fencing token $a is stale/ && $err =~ /token $b\./,
		"$what: files: A's stale write is refused naming tokens $a and $b")
	  or diag("rc $rc: $out $err");
	($rc, $out, $err) = run_sql(
		"UPDATE checked SET val = 'by A (stale)', fence = $a WHERE id = $rid AND fencing.fence_allows(fence, $a)");
	is("$rc $out", "0 ", "$what: checked: A's stale write matches no row");
	($rc, $out, $err) = run_sql(
		"UPDATE guarded SET val = 'by A (stale)', fence = $a WHERE id = $rid");
	ok($rc != 0 && $err =~ /fencing token $a is stale/ && $err =~ /token $b\./,
		"$what: guarded: A's stale write is refused naming tokens $a and $b")
	  or diag("rc $rc: $out $err");
	($rc, $out, $err) = run_sql(
		"SELECT job_queue.complete($s->{job}, $s->{ja}, '{\"by\": \"A\"}')");
	ok($rc != 0 && $err =~ /fencing token $s->{ja} is stale/,
		"$what: jobs: A's stale completion is refused")
	  or diag("rc $rc: $out $err");
	for my $t (@forms)
	{
		is($node->safe_psql('postgres', "SELECT val, fence FROM $t WHERE id = $rid"),
			"by B|$b", "$what: $t: B's write stands");
	}
}

# ---------------------------------------------------------------------------
# part 1: the sequence alone, twice

for my $round (1 .. 2)
{
	my $rid = $nrows + $round;
	my $s = story_b(story_a("solo$round"), $rid);
	restart("sequence $round");
	story_check($s, "sequence $round");
}

# ---------------------------------------------------------------------------
# part 3 (on the quiet server, before the load): a write that moves a
# row's fence still flushes at commit with synchronous_commit = off, in
# each form; the commit's WAL is on disk when COMMIT returns.  (A write
# that leaves the fence where it is no longer forces the flush: lost, it
# leaves the row fenced as before; the jobs of part 2 show it.)

sub flushed_at_commit
{
	my ($sql) = @_;
	return $node->safe_psql(
		'postgres', qq{
BEGIN;
$sql;
SELECT pg_current_wal_insert_lsn() AS lsn \\gset
COMMIT;
SELECT pg_current_wal_flush_lsn() >= :'lsn';});
}

{
	my $rid = $nrows + 10;
	my @tok = map { $node->safe_psql('postgres', 'SELECT fencing.next_token()') } 1 .. 3;
	my %moves = (
		"files: fence_advance from NULL" =>
		  "UPDATE files SET val = 'f1', fence = fencing.fence_advance(fence, $tok[0]) WHERE id = $rid",
		"files: fence_advance to a newer token, allow_same" =>
		  "UPDATE files SET val = 'f2', fence = fencing.fence_advance(fence, $tok[1], true) WHERE id = $rid",
		"checked: fence_allows true" =>
		  "UPDATE checked SET val = 'c1', fence = $tok[0] WHERE id = $rid AND fencing.fence_allows(fence, $tok[0])",
		"guarded: a token put in the fence" =>
		  "UPDATE guarded SET val = 'g1', fence = $tok[0] WHERE id = $rid",
		"guarded: a newer declared token stamped" =>
		  "SET LOCAL fencing.token = $tok[1]; UPDATE guarded SET val = 'g2' WHERE id = $rid",
		"guarded: INSERT with a token" =>
		  "INSERT INTO guarded VALUES ($nrows + 100, $tok[2], 'g3')");
	# in this order: each one moves the fence its row had
	for my $what (
		"files: fence_advance from NULL",
		"files: fence_advance to a newer token, allow_same",
		"checked: fence_allows true",
		"guarded: a token put in the fence",
		"guarded: a newer declared token stamped",
		"guarded: INSERT with a token")
	{
		is(flushed_at_commit($moves{$what}), 't',
			"flush forced at commit when the fence moves: $what");
	}
}

# ---------------------------------------------------------------------------
# part 2: under load

sub writer_script
{
	my ($j, $cycle, $rounds) = @_;
	my @l = ('\set VERBOSITY sqlstate');
	for my $n (1 .. $rounds)
	{
		my $form = $forms[ ($n + $j) % 3 ];
		my $rid  = 1 + int(rand($nrows));
		push @l,
		  "SELECT fencing.next_token() AS tok \\gset",
		  "SELECT 'W', '$form', $rid, :tok, fenced_write('$form', $rid, :tok, 'w$j.c$cycle.n$n');";
	}
	return @l;
}

sub jobs_script
{
	my ($cycle, $rounds) = @_;
	my @l = ('\set VERBOSITY sqlstate');
	for my $n (1 .. $rounds)
	{
		push @l,
		  "SELECT job_queue.enqueue('load$cycle', '{}');",
		  "SELECT id AS job, token AS tok FROM job_queue.claim('load$cycle', 1, '1 hour') \\gset",
		  "SELECT 'J', :job, :tok;",
		  "SELECT 'H', :job, :tok, job_queue.heartbeat(:job, :tok, '1 hour') IS NOT NULL;",
		  "SELECT 'C', :job, :tok, job_queue.complete(:job, :tok, '{\"n\": $n}');";
	}
	return @l;
}

sub start_client
{
	my ($name, @lines) = @_;
	my $base = "$tmp/$name";
	open my $fh, '>', "$base.sql" or die "$base.sql: $!";
	print $fh "$_\n" for @lines;
	close $fh;
	my $h = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d',
			$node->connstr('postgres'), '-f', "$base.sql"
		],
		'<', \undef, '>', "$base.out", '2>', "$base.err");
	return { h => $h, base => $base };
}

sub finish_client
{
	my ($c) = @_;
	$c->{h}->finish;
	my (@rows, $err);
	open my $fh, '<', "$c->{base}.out" or die "$c->{base}.out: $!";
	while (my $l = <$fh>)
	{
		chomp $l;
		push @rows, [ split /\|/, $l, -1 ];
	}
	close $fh;
	$err = slurp_file("$c->{base}.err");
	return (\@rows, $err);
}

my %high;    # "form id" => highest token acknowledged as accepted
my %jobs;    # job => [token, completed]
my ($n_acc, $n_ref, $n_jobs_done, $n_lost, $n_stale_tried, $n_stale_acc) =
  (0, 0, 0, 0, 0, 0);
my $n_completions_lost = 0;    # asynchronous ones, still claimed

for my $cycle (1 .. $cycles)
{
	my $what = "load cycle $cycle";
	my $s = story_a("story$cycle");
	my $t0 = $node->safe_psql('postgres', 'SELECT fencing.next_token()');
	my @c = (
		(map { start_client("w$_.c$cycle", writer_script($_, $cycle, 20000)) } 1 .. 4),
		start_client("jobs.c$cycle", jobs_script($cycle, 10000)));
	# enough acknowledged writes, and A's lease and claim expired
	$node->poll_query_until('postgres',
		"SELECT fencing.next_token() > $t0 + 400")
	  or die "$what: no progress";
	story_b($s, $nrows + 2 + $cycle);
	$node->stop('immediate');
	my @err;
	for my $c (@c)
	{
		my ($rows, $err) = finish_client($c);
		push @err, $err;
		for my $r (@$rows)
		{
			if ($r->[0] eq 'W')
			{
				my ($form, $rid, $tok, $res) = @$r[ 1 .. 4 ];
				if ($res eq 'accepted')
				{
					$n_acc++;
					$high{"$form $rid"} = $tok
					  if $tok > ($high{"$form $rid"} // 0);
				}
				else { $n_ref++; }
			}
			elsif ($r->[0] eq 'J') { $jobs{ $r->[1] } = [ $r->[2], 0 ]; }
			elsif ($r->[0] eq 'C')
			{
				$jobs{ $r->[1] }[1] = 1;
			}
		}
	}
	my $errors = join '', @err;
	# the crash: 57P01 from 14 on; 13 says 57P02 (crash shutdown), a WARNING
	my @other = grep { !/(ERROR|WARNING|FATAL):  (LF001|57P01|57P02)$/ && !/server closed|connection to server|terminated abnormally|before or while processing|lost synchronization|no connection|connection refused|could not connect|Is the server running|^\s*$/ } split /\n/, $errors;
	is(scalar(@other), 0, "$what: clients saw no error but LF001 and the crash")
	  or diag(join "\n", @other[ 0 .. ($#other < 9 ? $#other : 9) ]);
	$node->start;
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$what: server is back");

	story_check($s, "$what, the sequence");

	# no acknowledged fenced write lost: each row's fence >= its highest
	my @lost;
	for my $form (@forms)
	{
		my %fence = map { split /\|/ } split /\n/,
		  $node->safe_psql('postgres', "SELECT id, coalesce(fence, 0) FROM $form");
		for my $rid (1 .. $nrows)
		{
			my $h = $high{"$form $rid"} // next;
			push @lost, "$form $rid: fence $fence{$rid} < acknowledged $h"
			  if $fence{$rid} < $h;
		}
	}
	my %job_now = map { my @f = split /\|/; ($f[0] => [ @f[ 1, 2 ] ]) }
	  split /\n/,
	  $node->safe_psql('postgres',
		"SELECT id, coalesce(fence, 0), state FROM job_queue.jobs WHERE queue LIKE 'load_'");
	# a completion leaves the fence at the claim's token, so it is as
	# durable as synchronous_commit says: one lost in the crash leaves the
	# job running under the same claim, which no older token can complete
	for my $job (sort { $a <=> $b } keys %jobs)
	{
		my ($tok, $done) = @{ $jobs{$job} };
		my $now = $job_now{$job} // [ 0, 'missing' ];
		push @lost, "job $job: fence $now->[0] < acknowledged claim $tok"
		  if $now->[0] < $tok;
		push @lost, "job $job: acknowledged completion turned into $now->[1]"
		  if $done && $now->[1] ne 'done'
		  && !($now->[1] eq 'running' && $now->[0] == $tok);
		$n_completions_lost++
		  if $done && $now->[1] eq 'running' && $now->[0] == $tok;
	}
	$n_jobs_done = grep { $_->[1] } values %jobs;
	$n_lost += @lost;
	is(scalar(@lost), 0,
		"$what: every acknowledged fenced write and job claim survived")
	  or diag(join "\n", @lost[ 0 .. ($#lost < 9 ? $#lost : 9) ]);

	# no stale write accepted: each row refuses a token below its highest
	my @values;
	for my $k (sort keys %high)
	{
		my ($form, $rid) = split / /, $k;
		push @values, "('$form', $rid, $high{$k} - 1)" if $high{$k} > 1;
	}
	my $accepted = $node->safe_psql(
		'postgres', qq{
SELECT coalesce(string_agg(form || ' ' || rid || ' with ' || tok, ', '), '')
  FROM (VALUES @{[ join ', ', @values ]}) AS v(form, rid, tok)
 WHERE fenced_write(form, rid, tok, 'stale') = 'accepted'});
	$n_stale_tried += @values;
	$n_stale_acc += scalar(split /, /, $accepted);
	is($accepted, '',
		"$what: a token below the highest acknowledged is refused on all "
		  . scalar(@values) . ' rows');
	note("$what: $n_acc writes accepted, $n_ref refused so far, "
		  . scalar(keys %jobs) . " jobs claimed, $n_jobs_done completed");
}

ok($n_acc > 0 && $n_ref > 0,
	"writers raced: $n_acc acknowledged fenced writes, $n_ref refused");
ok($n_jobs_done > 0, "$n_jobs_done acknowledged job completions checked");
diag(sprintf(
		"figures: %d cycles, %d writes acknowledged, %d refused under load, %d jobs completed (%d of them lost in a crash, the job still claimed), %d stale writes tried after crashes, %d lost, %d stale accepted, %.0f s",
		$cycles, $n_acc, $n_ref, $n_jobs_done, $n_completions_lost,
		$n_stale_tried, $n_lost, $n_stale_acc, time - $t_begin));

$node->stop;
done_testing();
