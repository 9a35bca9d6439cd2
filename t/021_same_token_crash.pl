# Copyright: fencing extension authors
#
# 021_same_token_crash.pl: a fenced write that keeps its row's fence (the
# holder writing again with the token the row is fenced with) is not forced
# to disk with synchronous_commit = off (issue 30), and losing it in a crash
# lets no stale holder in: the row is still fenced with the same token,
# which the write that moved the fence made durable.
#
# Setup as in 008_durable_fence.pl: synchronous_commit = off, a 10 s
# wal_writer_delay, no background writer, no checkpoint during the run, so
# WAL that no commit flushed is lost when the server stops with "pg_ctl
# stop -m immediate" (unless the WAL writer happened to write it).
#
# Per round: A takes lease L (token a, 1 s) and claims a job (1 s), both
# expire; B takes over (token b, claim jb) and moves the fence of a row of
# each form (flushed); then, in the same session, B writes each row again
# many times with b: fence_advance(fence, b, true), fence_guard stamping
# b declared with SET LOCAL, and the job-queue recipe's heartbeat and, last,
# its completion.  A queue fenced by claim_stamp and claim_guard takes the
# same path: A claims a job (stamp ca), B claims it again (cb, forced to
# disk), then delivers to it several times with cb (not forced).  Immediate
# stop right after, start.  Then:
#   - each row is fenced (stamped) with b (jb, cb), and holds one of B's
#     writes, in order (a prefix of them survived; none of A's);
#   - A's writes with a (ca) are refused (LF001 naming both tokens), in
#     each form;
#   - B writes again with b (cb), accepted.
# How many same-token writes the crash lost is reported, not asserted (the
# WAL writer may write some before the stop).
# test/negative/negative_control.sh applies test/negative/no_durable_fence.patch (no
# write forces its flush, B's moving write neither) and requires this test
# to fail.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $writes = 3;    # same-token writes per form and round

my $node = PostgreSQL::Test::Cluster->new('same_token_crash');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
synchronous_commit = off
wal_writer_delay = 10s
bgwriter_lru_maxpages = 0
checkpoint_timeout = 1h
max_wal_size = 4GB
restart_after_crash = on
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
	'postgres', q{
CREATE TABLE files   (id int PRIMARY KEY, fence bigint, val text);
CREATE TABLE guarded (id int PRIMARY KEY, fence bigint, val text);
CREATE TRIGGER g BEFORE INSERT OR UPDATE OR DELETE ON guarded
  FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO files   SELECT g, NULL, 'init' FROM generate_series(1, 4) g;
INSERT INTO guarded SELECT g, NULL, 'init' FROM generate_series(1, 4) g;
CREATE TABLE cjobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'ready',
  attempt int NOT NULL DEFAULT 0, tok bigint, val text);
CREATE TRIGGER a_stamp BEFORE UPDATE ON cjobs FOR EACH ROW
  WHEN (NEW.attempt > OLD.attempt) EXECUTE FUNCTION fencing.claim_stamp('tok');
CREATE TRIGGER b_guard BEFORE UPDATE ON cjobs FOR EACH ROW
  WHEN (NEW.attempt = OLD.attempt AND OLD.state = 'running')
  EXECUTE FUNCTION fencing.claim_guard('tok');
INSERT INTO cjobs (id) SELECT g FROM generate_series(1, 4) g;
});
is($node->safe_psql('postgres', 'SHOW synchronous_commit'),
	'off', 'synchronous_commit is off');

# psql -c, returning (rc, stdout, stderr)
sub run_sql
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql('postgres', $sql, stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	return ($rc, $out, $err);
}

sub refused_stale
{
	my ($sql, $a, $b, $what) = @_;
	my ($rc, $out, $err) = run_sql($sql);
	ok($rc != 0 && $err =~ /fencing token $a is stale/ && $err =~ /token $b\./,
		"$what: refused naming tokens $a and $b")
	  or diag("rc $rc: $out $err");
}

my $lost_total = 0;
for my $round (1 .. 2)
{
	my $l   = "L$round";
	my $rid = $round;
	my $a = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$l', 'A', '1 s')");
	my $job = $node->safe_psql('postgres',
		"SELECT job_queue.enqueue('$l', '{}')");
	my $ja = $node->safe_psql('postgres',
		"SELECT token FROM job_queue.claim('$l', 1, '1 s')");
	$node->poll_query_until('postgres',
		"SELECT state = 'expired' FROM fencing.lease_status WHERE name = '$l'")
	  or die "lease $l did not expire";
	$node->poll_query_until('postgres',
		"SELECT lease_until < clock_timestamp() FROM job_queue.jobs WHERE id = $job")
	  or die "claim of job $job did not expire";
	my $b = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$l', 'B', '60 s')");
	my $jb = $node->safe_psql('postgres',
		"SELECT token FROM job_queue.claim('$l', 1, '60 s')");
	ok($a > 0 && $b > $a && $jb > $ja,
		"round $round: A got $a (claim $ja), B took over with $b (claim $jb)");
	my $ca = $node->safe_psql('postgres',
		"UPDATE cjobs SET state = 'running', attempt = attempt + 1, val = 'A' WHERE id = $rid RETURNING tok");
	my $cb = $node->safe_psql('postgres',
		"UPDATE cjobs SET state = 'running', attempt = attempt + 1, val = 'B0' WHERE id = $rid RETURNING tok");
	ok($cb > $ca, "round $round: claim_stamp: A claimed with $ca, B with $cb");

	# Make the WAL writer write nothing of what follows before the stop:
	# writes to the pages B will write (no full-page image follows), the
	# last one asynchronous, which it flushes (its wal_writer_delay starts
	# again: it flushes nothing more for 10 s, but pages it sees full), a
	# WAL switch, so that B's writes below fit in the new segment's first
	# page, which no write completes.
	my $lsn = $node->safe_psql(
		'postgres', qq{
UPDATE guarded SET val = 'warm', fence = $b WHERE id > 2;
UPDATE files SET val = 'warm' WHERE id > 2;
UPDATE cjobs SET val = 'warm' WHERE id > 2;
SELECT pg_current_wal_insert_lsn();});
	$node->poll_query_until('postgres',
		"SELECT pg_current_wal_flush_lsn() >= '$lsn'")
	  or die "WAL up to $lsn not flushed";
	$node->safe_psql('postgres', 'SELECT pg_switch_wal()');

	# B moves the fences (forced to disk), then writes again with the same
	# token (not forced), autocommit, one session
	my @sql = (
		"UPDATE files SET val = 'B0', fence = fencing.fence_advance(fence, $b) WHERE id = $rid;",
		"UPDATE guarded SET val = 'B0', fence = $b WHERE id = $rid;");
	for my $i (1 .. $writes)
	{
		push @sql,
		  "UPDATE files SET val = 'B$i', fence = fencing.fence_advance(fence, $b, true) WHERE id = $rid;",
		  "BEGIN; SET LOCAL fencing.token = $b; UPDATE guarded SET val = 'B$i' WHERE id = $rid; COMMIT;",
		  "SELECT job_queue.heartbeat($job, $jb, '60 s');",
		  "BEGIN; SET LOCAL fencing.token = $cb; UPDATE cjobs SET val = 'B$i' WHERE id = $rid; COMMIT;";
	}
	push @sql, "SELECT job_queue.complete($job, $jb, '{\"by\": \"B\"}');",
	  "SELECT pg_current_wal_insert_lsn() > pg_current_wal_flush_lsn();";
	my $unflushed = $node->safe_psql('postgres', join("\n", @sql));
	$unflushed = (split /\n/, $unflushed)[-1];
	$node->stop('immediate');
	$node->start;
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "round $round: server is back");

	my $lost = 0;
	for my $t (qw(files guarded))
	{
		my ($val, $fence) = split /\|/,
		  $node->safe_psql('postgres', "SELECT val, fence FROM $t WHERE id = $rid");
		is($fence, $b, "round $round: $t: still fenced with B's token $b");
		ok($val =~ /^B(\d+)$/ && $1 <= $writes,
			"round $round: $t: holds one of B's writes ($val)");
		$lost += $writes - $1 if $val =~ /^B(\d+)$/;
	}
	my ($state, $jfence) = split /\|/,
	  $node->safe_psql('postgres', "SELECT state, fence FROM job_queue.jobs WHERE id = $job");
	is($jfence, $jb, "round $round: job: still fenced with B's claim $jb");
	ok($state eq 'running' || $state eq 'done',
		"round $round: job: running or done ($state)");
	$lost++ if $state eq 'running';
	my ($cval, $ctok) = split /\|/,
	  $node->safe_psql('postgres', "SELECT val, tok FROM cjobs WHERE id = $rid");
	is($ctok, $cb, "round $round: claimed job: still stamped with B's claim $cb");
	ok($cval =~ /^B(\d+)$/ && $1 <= $writes,
		"round $round: claimed job: holds one of B's deliveries ($cval)");
	$lost += $writes - $1 if $cval =~ /^B(\d+)$/;
	$lost_total += $lost;
	note("round $round: WAL unflushed before the stop: $unflushed; "
		  . "$lost of B's same-token writes lost");

	refused_stale(
		"UPDATE files SET val = 'A', fence = fencing.fence_advance(fence, $a, true) WHERE id = $rid",
		$a, $b, "round $round: files: A's stale write");
	refused_stale(
		"BEGIN; SET LOCAL fencing.token = $a; UPDATE guarded SET val = 'A' WHERE id = $rid; COMMIT;",
		$a, $b, "round $round: guarded: A's stale write");
	my ($rc, $out, $err) =
	  run_sql("SELECT job_queue.complete($job, $ja, '{\"by\": \"A\"}')");
	ok($rc != 0 && $err =~ /fencing token $ja is stale/,
		"round $round: job: A's stale completion is refused")
	  or diag("rc $rc: $out $err");
	refused_stale(
		"BEGIN; SET LOCAL fencing.token = $ca; UPDATE cjobs SET val = 'A' WHERE id = $rid; COMMIT;",
		$ca, $cb, "round $round: claimed job: A's stale delivery");

	is( $node->safe_psql(
			'postgres', qq{
UPDATE files SET val = 'B again', fence = fencing.fence_advance(fence, $b, true) WHERE id = $rid;
BEGIN; SET LOCAL fencing.token = $b; UPDATE guarded SET val = 'B again' WHERE id = $rid; COMMIT;
BEGIN; SET LOCAL fencing.token = $cb; UPDATE cjobs SET val = 'B again' WHERE id = $rid; COMMIT;
SELECT string_agg(val || ':' || fence, ' ') FROM (SELECT val, fence FROM files WHERE id = $rid
  UNION ALL SELECT val, fence FROM guarded WHERE id = $rid
  UNION ALL SELECT val, tok - $cb + $b FROM cjobs WHERE id = $rid) s;}),
		"B again:$b B again:$b B again:$b",
		"round $round: B writes again with its token after the crash");
}
diag("figures: $lost_total same-token writes lost in 2 crashes, none let a stale holder in");

$node->stop;
done_testing();
