# Copyright: fencing extension authors
#
# 040_torture.pl: the randomized torture run (test/torture/, see its README.md)
# in its short mode, and its negative control.
#
# test/torture/run.py drives 4 C worker processes (test/torture/worker, libpq) over 4
# leases and 4 fenced rows for about 2000 operations, and meanwhile stops
# random workers with SIGSTOP for longer than the lease TTL, kills some with
# SIGKILL (they are restarted), and crashes this node once with
# "pg_ctl stop -m immediate" and restarts it, with synchronous_commit = off.
# Every attempt and outcome is recorded; test/torture/check.py then checks the
# histories against the audit log that an AFTER UPDATE trigger kept, the
# resource rows and fencing.leases.  The short run must pass with a
# non-trivial history: stale writes refused (LF001) and pauses longer than
# the TTL.  The negative control writes without any fence (no trigger, no
# fence_advance); the checker must catch the stale writes it accepts.
#
# The seed is random and printed; TORTURE_SEED=N repeats a run's choices
# (the interleaving still differs).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use JSON::PP;

my $python  = '/usr/bin/python3';
my $started = time;

plan skip_all => "$python not found" unless -x $python;
plan skip_all => 'python3-psycopg2 not installed'
  unless system($python, '-c', 'import psycopg2') == 0;

# the worker: C and libpq, warnings are errors
my ($mout, $merr) = ('', '');
my $built = IPC::Run::run([ 'make', '-s', '-C', 'test/torture' ],
	'<', \undef, '>', \$mout, '2>', \$merr);
ok($built, 'the torture worker builds with -Wall -Wextra -Werror')
  or BAIL_OUT("make -C test/torture failed: $mout$merr");

my $tmp = PostgreSQL::Test::Utils::tempdir;

my $node = PostgreSQL::Test::Cluster->new('torture');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
synchronous_commit = off
wal_writer_delay = 200ms
restart_after_crash = on
max_connections = 50
log_min_messages = warning
});
$node->start;

my $seed = $ENV{TORTURE_SEED} // int(rand(2**31 - 1)) + 1;
note "torture seed $seed";

# run the driver; returns (exit code, output, summary)
sub torture
{
	my ($name, @args) = @_;
	my $out = '';
	my $dir = "$tmp/$name";
	my @cmd = (
		$python, 'test/torture/run.py',
		'--connstr', $node->connstr('postgres'),
		'--pgdata', $node->data_dir,
		'--pglog', $node->logfile,
		'--seed', $seed,
		'--out', $dir, @args);
	my $t0 = time;
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>&1',
		IPC::Run::timeout(120));
	my $rc = $? >> 8;
	note "$name: exit $rc after " . (time - $t0) . " s:\n$out";
	my $summary = {};
	if (-f "$dir/summary.json")
	{
		$summary = decode_json(slurp_file("$dir/summary.json"));
	}
	return ($rc, $out, $summary);
}

# ---------------------------------------------------------------------------
# short mode: must pass, with a history worth the name

my ($rc, $out, $s) = torture('short', '--mode', 'short');
is($rc, 0, 'short torture run: the checker finds no safety violation')
  or diag($out);
like($out, qr/^OK$/m, 'the checker says OK');
is($s->{safety_violations}, 0, 'summary: 0 safety violations');
cmp_ok($s->{ops} // 0, '>=', 1500, "at least 1500 ops ($s->{ops})");
cmp_ok($s->{counts}{acquire}{granted} // 0,
	'>=', 100, "leases granted: $s->{counts}{acquire}{granted}");
cmp_ok($s->{counts}{acquire}{refused} // 0,
	'>=', 1, "acquires refused while held: $s->{counts}{acquire}{refused}");
cmp_ok($s->{counts}{write}{accepted} // 0,
	'>=', 100, "fenced writes accepted: $s->{counts}{write}{accepted}");
cmp_ok($s->{counts}{write}{stale} // 0,
	'>=', 1, "stale writes refused with LF001: $s->{counts}{write}{stale}");
cmp_ok($s->{pauses_over_ttl} // 0,
	'>=', 1, "SIGSTOP pauses longer than the TTL: $s->{pauses_over_ttl}");
is($s->{crashes}, 1, 'one server crash (immediate stop) and restart');
cmp_ok($s->{info}{exclusive_pairs_checked} // 0,
	'>=', 1, 'lease takeovers were checked for exclusivity');
is($node->safe_psql('postgres', 'SHOW synchronous_commit'),
	'off', 'the node ran with synchronous_commit = off');
is( $node->safe_psql('postgres',
		'SELECT count(*) FROM torture_log l LEFT JOIN torture_resource r ON r.id = l.resource WHERE r.id IS NULL'),
	'0',
	'every audit row belongs to a resource');

# ---------------------------------------------------------------------------
# negative control: no fence at all; stale writes get in and are caught

($rc, $out, $s) = torture(
	'negative', '--mode', 'short', '--fence', 'none',
	'--crashes', '0', '--ops', '600', '--time-limit', '15',
	'--long-sleep-pct', '20');
is($rc, 1, 'negative control: the checker fails (exit 1)') or diag($out);
like($out, qr/^FAIL$/m, 'the checker says FAIL');
cmp_ok($s->{safety}{order} // 0,
	'>=', 1, 'it reports tokens going backwards in the audit log: '
	  . ($s->{safety}{order} // 0));
is($s->{counts}{write}{stale} // -1, 0, 'no write was refused');
my $late = 0;
$late += $s->{stale_accepted}{$_} // 0 for qw(after_pause after_long_sleep);
cmp_ok($late, '>=', 1,
	"stale writes accepted after a pause or a sleep past the TTL: $late");

$node->stop;
note sprintf('040_torture took %d s', time - $started);

done_testing();
