# Copyright: fencing extension authors
#
# 008_double_failover.pl: a quick second failover with no shared WAL
# archive (Patroni's default).  Three clusters: primary P and two
# asynchronous standbys S1 and S2.  P dies; S1 is promoted (timeline 2)
# and acknowledges tokens and leases; S1 dies before S2 ever followed it;
# S2 is promoted and, having no 00000002.history, gets timeline 2 as well.
# Every token S2 issues must be new and above every token S1 (or P)
# acknowledged: S2's band starts at its own, later, clock.  In S2's
# database the lease rows from before its band entry may have lost what
# they fenced (S1's writes are gone): their tokens are refused there with
# LF005, and their holders acquire again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', 'CREATE EXTENSION fencing');
$p->safe_psql('postgres',
	'CREATE TABLE items (id int PRIMARY KEY, v text, fence bigint);'
	  . ' INSERT INTO items VALUES (1, \'initial\', NULL);'
	  . ' CREATE TRIGGER guard BEFORE UPDATE ON items FOR EACH ROW'
	  . " EXECUTE FUNCTION fencing.fence_guard('fence')");

my @p_tokens = tokens($p, 100);
my $ta = acquire($p, 'job', 'A');
push @p_tokens, $ta;
$p->safe_psql('postgres', "UPDATE items SET v = 'by A', fence = $ta WHERE id = 1");

$p->backup('b');
my @standbys;
for my $name ('s1', 's2')
{
	my $s = PostgreSQL::Test::Cluster->new($name);
	$s->init_from_backup($p, 'b', has_streaming => 1);
	$s->start;
	push @standbys, $s;
}
my ($s1, $s2) = @standbys;
$p->wait_for_catchup($_) for @standbys;
$p->stop('immediate');

# ---- first failover: S1, timeline 2
$s1->promote;
$s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's1 did not finish its promotion';
my @s1_tokens = tokens($s1, 100);
cmp_ok(min(@s1_tokens), '>', max(@p_tokens),
	"S1's tokens are above P's");
$s1->safe_psql('postgres', "SELECT fencing.lease_force_release('job')");
my $tb = acquire($s1, 'job', 'B');
cmp_ok($tb, '>', $ta, "on S1, B took over the job lease: token $tb");
is($s1->safe_psql('postgres', "UPDATE items SET v = 'by B', fence = $tb WHERE id = 1 RETURNING v"),
	'by B', "B's fenced write on S1 is acknowledged");
push @s1_tokens, $tb;
# A on S1: its token is from before S1's band
my ($ret, $out, $err) = $s1->psql('postgres', "SELECT fencing.lease_lock('job', $ta)");
is($out, 'f', "A's token is not current on S1 (B holds the lease)");
$s1->stop('immediate');

# ---- second failover: S2, which never saw timeline 2
$s2->promote;
$s2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's2 did not finish its promotion';
$s2->safe_psql('postgres', 'CHECKPOINT');
is($s2->safe_psql('postgres', 'SELECT timeline_id FROM pg_control_checkpoint()'),
	'2', 'S2 got timeline 2 as well: the same timeline ID as S1');
is($s2->safe_psql('postgres', "SELECT holder || ':' || token FROM fencing.leases WHERE name = 'job'"),
	"A:$ta", "S2's lease table never saw B's takeover");
is($s2->safe_psql('postgres', 'SELECT fence FROM items WHERE id = 1'),
	$ta, "S2 lost B's fenced write (the tail S1 acknowledged)");

# lost tail: A's lease row survived, but what it fenced may not have
my $refusals = 0;
($ret, $out, $err) = $s2->psql('postgres', "SELECT fencing.lease_lock('job', $ta)");
like($err, qr/ERROR:  lease of fencing token $ta was lost at failover/,
	"S2 refuses A's lease_lock: its token is from before S2's band");
$refusals++ if $err =~ /lost at failover/;
like($err, qr/DETAIL:  Token $ta was issued before this database's token band, which starts at \d+/,
	'the detail names the token and the band start');
($ret, $out, $err) = $s2->psql('postgres', "SELECT fencing.lease_renew('job', $ta, '1 hour')");
like($err, qr/lost at failover/, "and A's lease_renew");
$refusals++ if $err =~ /lost at failover/;
($ret, $out, $err) = $s2->psql('postgres',
	"UPDATE items SET v = 'by A, late', fence = fencing.fence_advance(fence, $ta, true) WHERE id = 1");
like($err, qr/LF005|lost at failover/, "and A's fence_advance");
$refusals++ if $err =~ /lost at failover/;
($ret, $out, $err) = $s2->psql('postgres',
	"BEGIN; SET LOCAL fencing.token = '$ta'; UPDATE items SET v = 'by A, late' WHERE id = 1; COMMIT;");
like($err, qr/lost at failover/, "and A's write through fence_guard");
$refusals++ if $err =~ /lost at failover/;
($ret, $out, $err) = $s2->psql('postgres',
	"UPDATE items SET v = 'by B, from S1', fence = $tb WHERE id = 1");
# B's token came from S1: it exceeds the fence S2 has, but it is below
# S2's band.  S2 issued no token yet when the guard sees it: the guard
# enters the band first, then refuses.
like($err, qr/lost at failover/, "B's S1 token is refused on S2 too");
$refusals++ if $err =~ /lost at failover/;
is($s2->safe_psql('postgres', 'SELECT v || \':\' || fence FROM items WHERE id = 1'),
	"by A:$ta", 'the row is unchanged');

my @s2_tokens = tokens($s2, 100);
my $ta2 = acquire($s2, 'job', 'A');
push @s2_tokens, $ta2;
cmp_ok(min(@s2_tokens), '>=', band_start($s2), "S2's tokens are in its band");

my %s1 = map { $_ => 1 } @s1_tokens, @p_tokens;
my @reissued = grep { $s1{$_} } @s2_tokens;
is(scalar(@reissued), 0, 'no token of S1 or P is reissued by S2');
my $max_ack = max(@s1_tokens, @p_tokens);
my @below = grep { $_ <= $max_ack } @s2_tokens;
is(scalar(@below), 0, "none of S2's tokens is below one acknowledged before ($max_ack)");
is($s2->safe_psql('postgres', "SELECT fencing.lease_lock('job', $ta2)"),
	't', 'A, re-acquired on S2, holds the lease with its new token');
is($s2->safe_psql('postgres', "UPDATE items SET v = 'by A again', fence = $ta2 WHERE id = 1 RETURNING v"),
	'by A again', "and writes with it");
diag sprintf('double failover: %d tokens (P %d, S1 %d, S2 %d), %d reissued, '
	  . '%d below an acknowledged one, %d old-band tokens refused on S2',
	@p_tokens + @s1_tokens + @s2_tokens, scalar(@p_tokens), scalar(@s1_tokens),
	scalar(@s2_tokens), scalar(@reissued), scalar(@below), $refusals);

$s2->stop;
done_testing();
