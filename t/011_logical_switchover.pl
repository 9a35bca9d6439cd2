# Copyright: fencing extension authors
#
# 011_logical_switchover.pl: a switchover by logical replication, the usual
# way to upgrade majors with little downtime.  The publisher publishes
# fencing.leases and a guarded table; the subscriber (its own installation
# of the extension, which never issued a token) receives them.  The lease
# rows' trigger is ENABLE ALWAYS, so it fires in replication apply too: the
# subscriber's token source moves above every token that arrives.  After
# the switchover the subscriber issues tokens above all of the publisher's
# (no regression), the stale holder is refused, holders of leases from
# before the switchover acquire again (LF005), and tokens that never
# reached fencing.leases (job claims in a table replicated on its own) are
# covered with fencing.advance_tokens(max claim).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $schema = q{
CREATE TABLE items (id int PRIMARY KEY, v text, fence bigint);
CREATE TRIGGER guard BEFORE UPDATE OR DELETE ON items FOR EACH ROW
	EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE TABLE claims (job int PRIMARY KEY, worker text, fence bigint);
};

my $pub = PostgreSQL::Test::Cluster->new('pub');
$pub->init(allows_streaming => 'logical');
$pub->start;
$pub->safe_psql('postgres', "CREATE EXTENSION fencing; $schema");
$pub->safe_psql('postgres',
	"INSERT INTO items SELECT i, 'initial', NULL FROM generate_series(1, 3) AS i");
$pub->safe_psql('postgres',
	'CREATE PUBLICATION p FOR TABLE fencing.leases, items; '
	  . 'CREATE PUBLICATION pc FOR TABLE claims');

# before the subscription: rows the initial copy brings
my $ta = $pub->safe_psql('postgres', "SELECT fencing.lease_acquire('writer', 'A', '1 hour')");
$pub->safe_psql('postgres', "UPDATE items SET v = 'by A', fence = $ta WHERE id = 1");

my $sub = PostgreSQL::Test::Cluster->new('sub');
$sub->init;
$sub->start;
$sub->safe_psql('postgres', "CREATE EXTENSION fencing; $schema");
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION p; "
	  . "CREATE SUBSCRIPTION sc CONNECTION '$connstr' PUBLICATION pc");
$sub->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')")
  or die 'the initial copy did not finish';

# after it: rows replication apply brings (INSERT and UPDATE)
my @pub_tokens = ($ta);
for my $i (1 .. 20)
{
	push @pub_tokens,
	  $pub->safe_psql('postgres', "SELECT fencing.lease_acquire('writer', 'A', '1 hour')");
}
my $ta_last = $pub_tokens[-1];
$pub->safe_psql('postgres', "UPDATE items SET v = 'by A again', fence = $ta_last WHERE id = 1");
my $tc = $pub->safe_psql('postgres', "SELECT fencing.lease_acquire('other', 'C', '1 hour')");
push @pub_tokens, $tc;
# job claims: tokens that never reach fencing.leases
for my $job (1 .. 5)
{
	my $t = $pub->safe_psql('postgres', 'SELECT fencing.next_token()');
	$pub->safe_psql('postgres', "INSERT INTO claims VALUES ($job, 'w$job', $t)");
	push @pub_tokens, $t;
}
push @pub_tokens, $pub->safe_psql('postgres',
	'SELECT fencing.next_token() FROM generate_series(1, 50)') =~ /(\d+)/g;
my $pub_max = max(@pub_tokens);
$pub->wait_for_catchup('s');
$pub->wait_for_catchup('sc');

is($sub->safe_psql('postgres', "SELECT holder || ':' || token FROM fencing.leases WHERE name = 'writer'"),
	"A:$ta_last", 'the subscriber has the lease rows');
is($sub->safe_psql('postgres', 'SELECT fence FROM items WHERE id = 1'),
	$ta_last, 'and the guarded rows');
is($sub->safe_psql('postgres', 'SELECT last_value FROM fencing.token_seq'),
	$tc, "apply moved the subscriber's counter up to the largest lease token ($tc)");

# ---- switchover: the publisher stops, writes go to the subscriber
$pub->stop;
$sub->safe_psql('postgres', 'ALTER SUBSCRIPTION s DISABLE; ALTER SUBSCRIPTION sc DISABLE');

# Until the subscriber issues a token of its own it only compares
# numbers: A's replicated lease is still A's
is($sub->safe_psql('postgres', "SELECT fencing.lease_lock('writer', $ta_last)"),
	't', 'before its first token the subscriber accepts the replicated lease');
my ($ret, $out, $err);

# a token above the replicated ones, without the extension seeing claims
$sub->safe_psql('postgres',
	'SELECT fencing.advance_tokens((SELECT max(fence) FROM claims))');
my @sub_tokens = split /\n/,
  $sub->safe_psql('postgres', 'SELECT fencing.next_token() FROM generate_series(1, 50)');
my @regressed = grep { $_ <= $pub_max } @sub_tokens;
is(scalar(@regressed), 0,
	"no token regression: all subscriber tokens > the publisher's max ($pub_max)");

# the lease is taken over on the subscriber; the stale holder is refused
$sub->safe_psql('postgres', "SELECT fencing.lease_force_release('writer')");
my $tb = $sub->safe_psql('postgres', "SELECT fencing.lease_acquire('writer', 'B', '1 hour')");
cmp_ok($tb, '>', $pub_max, "B acquires on the subscriber: $tb > $pub_max");
is($sub->safe_psql('postgres', "UPDATE items SET v = 'by B', fence = $tb WHERE id = 1 RETURNING v"),
	'by B', "B's fenced write is accepted");
my $refused = 0;
($ret, $out, $err) = $sub->psql('postgres',
	"UPDATE items SET v = 'by A, stale', fence = $ta_last WHERE id = 1");
like($err, qr/LF001|fencing token $ta_last is stale/, "A's stale write is refused");
$refused++ if $err =~ /stale/;
($ret, $out, $err) = $sub->psql('postgres',
	"UPDATE items SET v = 'by A, stale', fence = $ta_last WHERE id = 2");
like($err, qr/fencing token $ta_last was lost at failover|lease of fencing token $ta_last was lost/,
	"A's write to a row B never wrote is refused too: its token is from before the subscriber's band");
$refused++ if $err =~ /lost at failover/;
is($sub->safe_psql('postgres', "SELECT fencing.lease_lock('writer', $ta_last)"),
	'f', "A's token is not current on the subscriber");
($ret, $out, $err) = $sub->psql('postgres', "SELECT fencing.lease_renew('other', $tc, '1 hour')");
like($err, qr/lease of fencing token $tc was lost at failover/,
	"C's lease, replicated live, must be acquired again (LF005)");
$refused++ if $err =~ /lost at failover/;
my $tc2 = $sub->safe_psql('postgres', "SELECT fencing.lease_acquire('other', 'C', '1 hour')");
cmp_ok($tc2, '>', $pub_max, "C acquires again: $tc2");
is($sub->safe_psql('postgres', "SELECT fencing.lease_renew('other', $tc2, '1 hour')"),
	't', 'and renews with its new token');
is($sub->safe_psql('postgres',
		"SELECT v || ':' || coalesce(fence::text, '') FROM items ORDER BY id"),
	"by B:$tb\ninitial:\ninitial:", 'the subscriber holds only accepted writes');
diag sprintf('logical switchover: %d publisher tokens (max %d), %d subscriber tokens, '
	  . '%d regressed, %d stale writes and old-band tokens refused',
	scalar(@pub_tokens), $pub_max, scalar(@sub_tokens) + 2, scalar(@regressed), $refused);

$sub->stop;
done_testing();
