# Copyright: fencing extension authors
#
# 013_clock_skew.pl: the edge of the clock assumption.  A band starts at
# the wall clock of the node that enters it, so two standbys promoted
# independently (the same timeline ID, no shared archive) issue disjoint
# tokens as long as their clocks agree to better than the time between the
# two promotions.  Under libfaketime, standby S2 runs 1 s behind while the
# second promotion comes at least 2 s after the first: safe.  Standby S3
# runs an hour behind: its band starts below S1's tokens, which the test
# shows (and docs/tokens.md documents) as the assumption breaking.  The
# epoch mode, which needs no clock, is t/014_token_epoch.pl.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use Time::HiRes qw(time usleep);

my ($libfaketime) = grep { -e $_ } glob('/usr/lib/*/faketime/libfaketime.so.1');
BAIL_OUT('libfaketime is not installed (Debian: libfaketime)') unless $libfaketime;

sub clock_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT extract(epoch FROM clock_timestamp())');
}

my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', 'CREATE EXTENSION fencing');
my @p_tokens = tokens($p, 50);
$p->backup('b');

# skew in seconds (negative: behind the real clock)
my %skew = (s1 => 0, s2 => -1, s3 => -3600);
my %node;
for my $name (qw(s1 s2 s3))
{
	my $s = PostgreSQL::Test::Cluster->new($name);
	$s->init_from_backup($p, 'b', has_streaming => 1);
	{
		local $ENV{LD_PRELOAD} = $skew{$name} ? $libfaketime : $ENV{LD_PRELOAD};
		local $ENV{FAKETIME} = sprintf('%+d', $skew{$name});
		local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = 1;
		$s->start;
	}
	$node{$name} = $s;
}
$p->wait_for_catchup($_) for values %node;
$p->stop('immediate');

for my $name (qw(s2 s3))
{
	my $off = clock_of($node{$name}) - time;
	cmp_ok(abs($off - $skew{$name}), '<', 0.5,
		sprintf('%s runs %+.1f s off the real clock (wanted %+d)', $name, $off, $skew{$name}));
}

# first failover: S1 (true clock) enters its band and acknowledges tokens
$node{s1}->promote;
$node{s1}->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's1 did not finish its promotion';
my $s1_entry = time;
my @s1_tokens = tokens($node{s1}, 200);
cmp_ok(min(@s1_tokens), '>', max(@p_tokens), "S1's tokens are above P's");
$node{s1}->stop('immediate');
my $s1_max = max(@s1_tokens, @p_tokens);

# second failover: S2, 1 s behind, promoted at least 2 s after S1's band
# entry (a loaded machine may take longer; the skew stays below the gap)
usleep(50_000) while time < $s1_entry + 2;
$node{s2}->promote;
$node{s2}->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's2 did not finish its promotion';
my @s2_tokens = tokens($node{s2}, 200);
my $gap = time - $s1_entry;
my %acked = map { $_ => 1 } @s1_tokens, @p_tokens;
my @s2_dup = grep { $acked{$_} } @s2_tokens;
my @s2_below = grep { $_ <= $s1_max } @s2_tokens;
is(scalar(@s2_dup), 0,
	sprintf('skew 1 s < gap %.1f s between the promotions: no token reissued', $gap));
is(scalar(@s2_below), 0, 'and none below one S1 acknowledged');

# a third standby, an hour behind: the assumption does not hold
$node{s3}->promote;
$node{s3}->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's3 did not finish its promotion';
my @s3_tokens = tokens($node{s3}, 200);
my @s3_below = grep { $_ <= $s1_max } @s3_tokens;
is(scalar(@s3_below), scalar(@s3_tokens),
	'skew 3600 s > the gap: BROKEN as documented, every token of S3 is below S1\'s');
cmp_ok(max(@s3_tokens), '<', min(@s1_tokens),
	"S3's clock, an hour back, is below its counter: its band starts just above P's tokens, under S1's");
diag sprintf('clock skew: S2 (-1 s, gap %.1f s): %d tokens, %d reissued, %d below; '
	  . 'S3 (-3600 s): %d tokens, %d below S1\'s acknowledged',
	$gap, scalar(@s2_tokens), scalar(@s2_dup), scalar(@s2_below),
	scalar(@s3_tokens), scalar(@s3_below));

$node{$_}->stop for qw(s2 s3);
done_testing();
