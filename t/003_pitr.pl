# Copyright: fencing extension authors
#
# 003_pitr.pl: point-in-time recovery to a point before tokens the
# original primary acknowledged.  The recovered cluster's counter is
# behind, but it ends recovery on a new timeline, so its first token enters
# a new band at the wall clock, above every token of the original.  A
# second PITR from the same base backup (another timeline: it finds the
# first one's history file in the shared archive) enters its band later
# and issues tokens above the first PITR's too.  t/008_double_failover.pl
# does the same without a shared archive, where the timelines are equal.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use Time::HiRes qw(usleep);

sub leases
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(name || ':' || holder || ':' || token, ',' ORDER BY name) FROM fencing.leases"
	);
}

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(has_archiving => 1, allows_streaming => 1);
$primary->append_conf('postgresql.conf', $FencingTest::count_tokens_conf);
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION fencing');

my @before = tokens($primary, 20);
my $p1 = acquire($primary, 'P1', 'A');

$primary->backup('b1');

push @before, tokens($primary, 50);
my $p2 = acquire($primary, 'P2', 'A');
push @before, $p1, $p2;
is(max(@before) - $before[0], 71,
	'72 consecutive tokens issued before the restore point');
$primary->safe_psql('postgres', "SELECT pg_create_restore_point('before')");

# acknowledged after the restore point: PITR to 'before' loses all of these
my @after = tokens($primary, 300);
my $p2_after = acquire($primary, 'P2', 'A');
my $p3_after = acquire($primary, 'P3', 'C');
push @after, tokens($primary, 20), $p2_after, $p3_after;
my $max_ack = max(@after);
is($max_ack - $before[0], 393,
	"the original primary acknowledged tokens up to $max_ack");
is(leases($primary), "P1:A:$p1,P2:A:$p2_after,P3:C:$p3_after",
	'leases on the original primary');

# archive everything, then the original primary goes away
my $walfile = $primary->safe_psql('postgres',
	'SELECT pg_walfile_name(pg_current_wal_lsn())');
$primary->safe_psql('postgres', 'SELECT pg_switch_wal()');
$primary->poll_query_until('postgres',
	"SELECT last_archived_wal >= '$walfile' FROM pg_stat_archiver")
  or die 'WAL was not archived';
$primary->stop;

my $archive = $primary->archive_dir;

# Restore b1, recover to 'before' and promote.  The restored node archives
# into the same archive as the original (as a real deployment with one
# backup repository would); that is how the next PITR learns about this
# node's timeline.
sub pitr
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init_from_backup($primary, 'b1', has_restoring => 1, standby => 0);
	$node->append_conf(
		'postgresql.conf', qq{
recovery_target_name = 'before'
recovery_target_action = 'promote'
archive_mode = on
archive_command = 'cp "%p" "$archive/%f"'
});
	$node->start;
	$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die "$name did not finish recovery";
	ok( $node->log_contains('recovery stopping at restore point "before"'),
		"$name: recovery stopped at restore point 'before'");

	# it really went back: the counter and the leases are those of 'before'
	my $seq = $node->safe_psql('postgres',
		'SELECT last_value FROM fencing.token_seq');
	cmp_ok($seq, '<', $max_ack,
		"$name: the recovered counter ($seq) is below the original's max acknowledged ($max_ack)"
	);
	is(leases($node), "P1:A:$p1,P2:A:$p2",
		"$name: leases as of 'before' (P2 with its old token, no P3)");
	return $node;
}

# ---------------------------------------------------------------------------
# first PITR: timeline 2, a new band

my $pitr1 = pitr('pitr1');
my @t1 = tokens($pitr1, 100);
cmp_ok($t1[0], '>', $max_ack, "pitr1: first token $t1[0] > $max_ack");
is(band_start($pitr1), $t1[0], 'pitr1: its first token starts its band');
my $p2_1 = acquire($pitr1, 'P2', 'A');
my $p3_1 = acquire($pitr1, 'P3', 'D');
cmp_ok($p2_1, '>', $p2_after,
	"pitr1: P2 re-acquired by its holder: $p2_1 > $p2_after (the original's lost acquire)");
cmp_ok($p3_1, '>', $p3_after,
	"pitr1: P3 (lost by the PITR) acquired by another holder: $p3_1 > $p3_after");
push @t1, $p2_1, $p3_1, tokens($pitr1, 20);
my @bad = grep { $_ <= $max_ack } @t1;
is_deeply(\@bad, [],
	"pitr1: all " . scalar(@t1) . " tokens > the original's max acknowledged $max_ack");

$pitr1->safe_psql('postgres', 'CHECKPOINT');
is($pitr1->safe_psql('postgres',
		'SELECT timeline_id FROM pg_control_checkpoint()'),
	'2', 'pitr1 is on timeline 2');
# wait for the archiver to copy the history file
for (my $i = 0; $i < 10 * $PostgreSQL::Test::Utils::timeout_default; $i++)
{
	last if -f "$archive/00000002.history";
	usleep(100_000);
}
ok(-f "$archive/00000002.history",
	'pitr1 archived its timeline history file into the shared archive');

# ---------------------------------------------------------------------------
# second PITR from the same backup: recovery_target_timeline is 'latest',
# so it follows timeline 1 up to 'before' (which lies before the point
# where timeline 2 branched off), stops there, and picks timeline 3, the
# first one not in the archive.  Its band starts later than pitr1's.
# (Had pitr1 not archived 00000002.history, pitr2 would pick timeline 2
# as well; its band would still start at its own, later, clock:
# t/008_double_failover.pl.)

my $pitr2 = pitr('pitr2');
my @t2 = tokens($pitr2, 100);
cmp_ok($t2[0], '>', max(@t1), "pitr2: first token $t2[0] > pitr1's");
is(band_start($pitr2), $t2[0], 'pitr2: its first token starts its band');
push @t2, acquire($pitr2, 'P2', 'A'), acquire($pitr2, 'P3', 'E');
$pitr2->safe_psql('postgres', 'CHECKPOINT');
is($pitr2->safe_psql('postgres',
		'SELECT timeline_id FROM pg_control_checkpoint()'),
	'3', 'pitr2 is on timeline 3');
@bad = grep { $_ <= $max_ack } @t2;
is_deeply(\@bad, [],
	"pitr2: all tokens > the original's max acknowledged $max_ack");
cmp_ok(min(@t2), '>', max(@t1),
	'pitr2: all tokens > every token pitr1 issued (' . min(@t2) . ' > '
	  . max(@t1) . ')');

# pitr1 keeps going in its own band, below pitr2's
my @t1b = tokens($pitr1, 10);
cmp_ok(max(@t1b), '<', min(@t2), 'pitr1 stays below pitr2\'s band');
cmp_ok(min(@t1b), '>', max(@t1), 'pitr1 keeps increasing');

$pitr1->stop;
$pitr2->stop;
done_testing();
