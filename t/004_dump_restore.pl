# Copyright: fencing extension authors
#
# 004_dump_restore.pl: a database restored from pg_dump (custom or plain
# format), into another cluster or into another database of the same
# cluster, keeps its leases with their tokens and issues tokens above
# every token the source ever issued, including tokens the source issued
# after the dump was taken: the restored state has a foreign origin, so
# the first token enters a new band at the wall clock.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $tmp  = PostgreSQL::Test::Utils::tempdir;

# the lease rows, everything but timestamps
my $LEASES = q{
SELECT string_agg(format('%s:%s:%s:%s:%s:%s', name, holder, holder_role,
                         token, released_at IS NOT NULL, holder_changes),
                  ',' ORDER BY name)
  FROM fencing.leases};

my $node_a = PostgreSQL::Test::Cluster->new('a');
$node_a->init;
$node_a->append_conf('postgresql.conf', $FencingTest::count_tokens_conf);
$node_a->start;
$node_a->safe_psql('postgres', 'CREATE DATABASE src');
$node_a->safe_psql('src', 'CREATE EXTENSION fencing');

# ---------------------------------------------------------------------------
# source: tokens and leases in several states

my @src = tokens($node_a, 100, 'src');
my $l1 = acquire($node_a, 'L1', 'A', '1 hour', 'src');
my $l2 = acquire($node_a, 'L2', 'B', '1 hour', 'src');
is($node_a->safe_psql('src', "SELECT fencing.lease_release('L2', $l2)"),
	't', 'L2 released');
my $l3 = acquire($node_a, 'L3', 'C', '1 hour', 'src');
is($node_a->safe_psql('src', "SELECT fencing.lease_renew('L3', $l3, '2 hours')"),
	't', 'L3 renewed');
# L4 changes holder: E, then (after release) F
my $l4 = acquire($node_a, 'L4', 'E', '1 hour', 'src');
$node_a->safe_psql('src', "SELECT fencing.lease_release('L4', $l4)");
$l4 = acquire($node_a, 'L4', 'F', '1 hour', 'src');
push @src, $l1, $l2, $l3, $l4;
my $t0 = $src[0] - 1;
is(max(@src) - $t0, 105, 'source issued 105 consecutive tokens');

my $leases_at_dump = $node_a->safe_psql('src', $LEASES);
is( $leases_at_dump,
	sprintf("L1:A:postgres:%d:f:0,L2:B:postgres:%d:t:0,"
		  . "L3:C:postgres:%d:f:0,L4:F:postgres:%d:f:1",
		$t0 + 101, $t0 + 102, $t0 + 103, $t0 + 105),
	'source leases');

$node_a->command_ok([ 'pg_dump', '-Fc', '-d', 'src', '-f', "$tmp/src.dump" ],
	'pg_dump -Fc');
$node_a->command_ok([ 'pg_dump', '-d', 'src', '-f', "$tmp/src.sql" ],
	'pg_dump plain format');

# the source goes on after the dump: the restored copies never saw these
push @src, tokens($node_a, 500, 'src'), acquire($node_a, 'L1', 'A', '1 hour', 'src');
my $src_max = max(@src);
is($src_max - $t0, 606, "source issued tokens up to $src_max, 501 of them after the dump");

# Check a restored database: same leases, new tokens above all of the
# source's, leases usable.
sub check_restored
{
	my ($node, $db, $what) = @_;
	is($node->safe_psql($db, $LEASES),
		$leases_at_dump, "$what: leases restored with their tokens");
	my @t = tokens($node, 50, $db);
	is($t[0], band_start($node, $db), "$what: first token starts a new band");
	my $l1n = acquire($node, 'L1', 'A', '1 hour', $db);
	my $l5n = acquire($node, 'L5', 'G', '1 hour', $db);
	push @t, $l1n, $l5n;
	my @bad = grep { $_ <= $src_max } @t;
	is_deeply(\@bad, [],
		"$what: all " . scalar(@t) . " new tokens > every source token ($src_max)");
	is(acquire($node, 'L3', 'X', '1 hour', $db), '',
		"$what: restored lease L3 is still held by C");
	is($node->safe_psql($db, "SELECT fencing.lease_lock('L1', $l1n)"),
		't', "$what: L1's new token is current");
	is($node->safe_psql($db, "SELECT fencing.lease_lock('L1', $l1)"),
		'f', "$what: L1's restored token is not");
	return @t;
}

# ---------------------------------------------------------------------------
# custom format into a new cluster

my $node_b = PostgreSQL::Test::Cluster->new('b');
$node_b->init;
$node_b->append_conf('postgresql.conf', $FencingTest::count_tokens_conf);
$node_b->start;
$node_b->safe_psql('postgres', 'CREATE DATABASE dst');
$node_b->command_ok([ 'pg_restore', '-d', 'dst', '--exit-on-error', "$tmp/src.dump" ],
	'pg_restore into a new cluster');
isnt(
	$node_b->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	$node_a->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	'the new cluster has another system identifier');
my @b_tokens = check_restored($node_b, 'dst', 'new cluster');

# ---------------------------------------------------------------------------
# custom format into another database of the source cluster

$node_a->safe_psql('postgres', 'CREATE DATABASE copy');
$node_a->command_ok(
	[ 'pg_restore', '-d', 'copy', '--exit-on-error', "$tmp/src.dump" ],
	'pg_restore into a second database of the source cluster');
check_restored($node_a, 'copy', 'second database');

# ---------------------------------------------------------------------------
# plain format, through psql

$node_b->safe_psql('postgres', 'CREATE DATABASE plain');
$node_b->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'plain', '-f', "$tmp/src.sql" ],
	'plain dump restored with psql');
check_restored($node_b, 'plain', 'plain format');

# ---------------------------------------------------------------------------
# a restore of a restore: the copy enters a band above the restored one

$node_b->command_ok([ 'pg_dump', '-Fc', '-d', 'dst', '-f', "$tmp/dst.dump" ],
	'pg_dump of the restored database');
push @b_tokens, tokens($node_b, 10, 'dst');
$node_a->safe_psql('postgres', 'CREATE DATABASE copy2');
$node_a->command_ok(
	[ 'pg_restore', '-d', 'copy2', '--exit-on-error', "$tmp/dst.dump" ],
	'pg_restore of it back into the source cluster');
my @c2 = tokens($node_a, 10, 'copy2');
is($c2[0], band_start($node_a, 'copy2'),
	'restore of a restore: first token starts a new band');
cmp_ok(min(@c2), '>', max(@b_tokens),
	'restore of a restore: above every token of the database it was dumped from');

# the source itself is unaffected
my @after = tokens($node_a, 10, 'src');
is_deeply(\@after, [ $src_max + 1 .. $src_max + 10 ],
	'the source continues where it was, in its own band');

$node_a->stop;
$node_b->stop;
done_testing();
