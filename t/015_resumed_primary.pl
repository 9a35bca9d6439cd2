# Copyright: fencing extension authors
#
# 015_resumed_primary.pl: a primary that comes back (issue 24), with no HA
# manager.  Primary P streams to standby S.  Every process of P is frozen
# (SIGSTOP: a paused VM); S is promoted and its clients acquire leases and
# write with their tokens; S is stopped and its history discarded; P
# resumes, still primary, without a promotion of its own, and its clients
# acquire and write.  The clock floor (the counter never lags the wall
# clock by more than fencing.max_clock_lag) makes P's first token after
# the resume exceed everything S issued.
#
# Clients use four leases L0-L3 (and rows 0-3 of a table whose fence
# column they advance with fence_advance) plus rows 4 and 5 for the
# holders that stall.  Every call is recorded with its time before it was
# sent and after its answer; the checker reports, over the whole history:
#
#   - tokens below an acknowledged one: an acquire whose token is below a
#     token acknowledged (on either node) before the acquire was sent;
#   - writes accepted over a newer holder's: holder Y is newer than holder
#     X when Y's acquire was sent after X's was acknowledged (grant order in
#     real time, whatever the tokens say).  A write of X accepted by a
#     database is accepted over a newer holder's when a write of a newer
#     holder to the same row had been acknowledged, before X's was sent, in
#     that database's history.  S's history is P's up to the freeze and
#     S's own writes; P's is P's own writes, before the freeze and after
#     the resume.  S's writes are not in P's history: they were discarded
#     with S's branch.
#
# Both must be 0.  And, what holds for holders with a token from before
# the resume:
#   - a holder of a token from S's discarded branch is refused by P with
#     LF005 while P has issued no token since the resume (the token is
#     above P's counter: P never issued it), and loses to every token P
#     issues after the resume (LF001 once a newer holder has written);
#   - a holder of P's from before the freeze loses to every token issued
#     after the resume, but where none has written yet its write is
#     accepted, also over a write that S acknowledged and that was then
#     discarded with S's branch.  The test counts these ("accepted over a
#     discarded write"), as tokens.md states: exactly one, the case it
#     builds.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

sub mono { return clock_gettime(CLOCK_MONOTONIC); }

my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', q{
CREATE EXTENSION fencing;
CREATE TABLE res (id int PRIMARY KEY, fence bigint, writer text, n int NOT NULL DEFAULT 0);
INSERT INTO res (id) SELECT generate_series(0, 5);
});
$p->backup('b');
my $s = PostgreSQL::Test::Cluster->new('s');
$s->init_from_backup($p, 'b', has_streaming => 1);
$s->start;

my %node = (P => $p, S => $s);
my @hist;    # { client, kind, row, token, outcome, node, t0, t1 }

sub call
{
	my ($n, $client, $kind, $row, $token, $sql) = @_;
	my $t0 = mono();
	my ($ret, $out, $err) =
	  $node{$n}->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	my $t1 = mono();
	my $outcome;
	if ($ret == 0) { $outcome = $out eq '' ? 'null' : 'ok'; }
	elsif ($err =~ /ERROR:  (LF\d\d\d):/) { $outcome = "refused:$1"; }
	else { die "$n: $sql: $err"; }
	my $e = {
		client => $client, kind => $kind, row => $row,
		token => ($kind eq 'acq' ? $out : $token),
		outcome => $outcome, node => $n, t0 => $t0, t1 => $t1
	};
	push @hist, $e;
	return $e;
}

sub acquire_on
{
	my ($n, $client, $row, $ttl) = @_;
	my $e = call($n, $client, 'acq', $row, undef,
		"SELECT fencing.lease_acquire('L$row', '$client', '$ttl')");
	is($e->{outcome}, 'ok', "$n: $client acquires L$row") or return undef;
	return $e->{token};
}

sub write_on
{
	my ($n, $client, $row, $token) = @_;
	return call($n, $client, 'write', $row, $token,
		"UPDATE res SET fence = fencing.fence_advance(fence, $token), writer = '$client', n = n + 1"
		  . " WHERE id = $row RETURNING fence")->{outcome};
}

sub release_on
{
	my ($n, $row, $token) = @_;
	$node{$n}->safe_psql('postgres', "SELECT fencing.lease_release('L$row', $token)");
}

# a cycle: acquire, write, release
sub cycle
{
	my ($n, $client, $row) = @_;
	my $t = acquire_on($n, $client, $row, '1 min');
	is(write_on($n, $client, $row, $t), 'ok', "$n: $client writes row $row with its token");
	release_on($n, $row, $t);
	return $t;
}

# ---- P, before the freeze: cycles on every lease, and holders that stall
# (P's pre-freeze holders: zp0-zp3 after writing once, zp4 without writing)
cycle('P', "c$_", $_) for 0 .. 3;
my %zp;
for my $r (0 .. 3)
{
	$zp{$r} = acquire_on('P', "zp$r", $r, '1 s');
	is(write_on('P', "zp$r", $r, $zp{$r}), 'ok', "P: zp$r writes row $r");
}
$zp{4} = acquire_on('P', 'zp4', 4, '1 s');    # stalls before writing
cycle('P', 'c4', 5);
$p->wait_for_catchup($s);

my $n = signal_cluster($p, 'STOP');
my $t_freeze = mono();
note "P frozen: $n processes";

# ---- S promoted: cycles, and holders that stall (S's branch)
$s->promote;
$s->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'S did not finish its promotion';
# the pre-freeze holders' leases (TTL 1 s) expire on S
$s->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM fencing.lease_status WHERE holder LIKE 'zp%' AND state = 'held'")
  or die 'the pre-freeze leases did not expire on S';
my %zs;
for my $round (1 .. 2)
{
	cycle('S', "c$_", $_) for 0 .. 3;
}
cycle('S', 'c4', 4);    # S writes row 4: a write that will be discarded
for my $r (0 .. 3, 5)
{
	$zs{$r} = acquire_on('S', "zs$r", $r, '1 min');
	is(write_on('S', "zs$r", $r, $zs{$r}), 'ok', "S: zs$r writes row $r");
}
my @s_tokens = map { $_->{token} } grep { $_->{node} eq 'S' && $_->{kind} eq 'acq' } @hist;
$s->stop('immediate');
note sprintf('S acknowledged %d tokens, up to %s; its branch is discarded',
	scalar(@s_tokens), (sort { $b <=> $a } @s_tokens)[0]);

# ---- P resumes, still primary, without a promotion
signal_cluster($p, 'CONT');

# an S-branch holder before P issued a token: never issued by P
is(write_on('P', 'zs0', 0, $zs{0}), 'refused:LF005',
	'P refuses a token of the discarded branch above its counter (LF005)');

my %b;
$b{$_} = cycle('P', "c$_", $_) for 0 .. 3;
my ($below_s) = grep { $b{$_} <= (sort { $b <=> $a } @s_tokens)[0] } 0 .. 3;
ok(!defined $below_s, "P's tokens after the resume exceed every token of S ($b{0} ...)");

# holders from before the resume, on rows written since: they lose
for my $r (1 .. 3)
{
	is(write_on('P', "zs$r", $r, $zs{$r}), 'refused:LF001',
		"S-branch holder zs$r loses to the token written after the resume");
}
for my $r (0 .. 3)
{
	is(write_on('P', "zp$r", $r, $zp{$r}), 'refused:LF001',
		"pre-freeze holder zp$r loses to the token written after the resume");
}
# on rows nobody wrote since the resume, they are accepted: zp4 over S's
# discarded write of row 4, zs5 over P's older fence of row 5
is(write_on('P', 'zp4', 4, $zp{4}), 'ok',
	'pre-freeze holder zp4 writes row 4, which only S (discarded) wrote since');
is(write_on('P', 'zs5', 5, $zs{5}), 'ok',
	'S-branch holder zs5 writes row 5, which no token of after the resume wrote');
# ... and lose to the next holder
cycle('P', 'c5', 5);
cycle('P', 'c6', 4);
is(write_on('P', 'zs5', 5, $zs{5}), 'refused:LF001', 'zs5 then loses to the new holder of row 5');
is(write_on('P', 'zp4', 4, $zp{4}), 'refused:LF001', 'zp4 then loses to the new holder of row 4');

# ---- the checker
my @acks = grep { $_->{kind} eq 'acq' && $_->{outcome} eq 'ok' } @hist;
my %seen;
is(scalar(grep { $seen{ $_->{token} }++ } @acks), 0,
	'no token acknowledged twice (' . scalar(@acks) . ' tokens)');
my @below;
for my $e (@acks)
{
	push @below, $e
	  if grep { $_->{t1} < $e->{t0} && $_->{token} > $e->{token} } @acks;
}
is(scalar(@below), 0, 'tokens below an acknowledged one: 0')
  or diag join "\n", map { "$_->{node} $_->{client} L$_->{row} $_->{token}" } @below;

my @writes = grep { $_->{kind} eq 'write' && $_->{outcome} eq 'ok' } @hist;
my %acq_of = map { $_->{token} => $_ } @acks;
sub in_history
{
	my ($db, $w) = @_;
	return $w->{node} eq $db || ($db eq 'S' && $w->{node} eq 'P' && $w->{t1} < $t_freeze);
}
my (@over_newer, @over_discarded);
for my $w (@writes)
{
	my $x = $acq_of{ $w->{token} };
	my @newer = grep {
		$_->{row} == $w->{row} && $_->{t1} < $w->{t0}
		  && $acq_of{ $_->{token} }{t0} > $x->{t1}
	} @writes;
	push @over_newer, $w if grep { in_history($w->{node}, $_) } @newer;
	push @over_discarded, $w
	  if $w->{node} eq 'P' && grep { $_->{node} eq 'S' } @newer;
}
is(scalar(@over_newer), 0, 'writes accepted over a newer holder\'s: 0')
  or diag join "\n", map { "$_->{node} $_->{client} row $_->{row} $_->{token}" } @over_newer;
is_deeply([ map { $_->{client} } @over_discarded ], ['zp4'],
	'accepted over a write S acknowledged and that was discarded: only zp4, a pre-freeze holder');
diag sprintf('resumed primary: %d tokens (P %d, S %d), %d below an acknowledged one; '
	  . '%d writes accepted, %d over a newer holder\'s, %d over a discarded write; %d refused',
	scalar(@acks), scalar(grep { $_->{node} eq 'P' } @acks), scalar(@s_tokens),
	scalar(@below), scalar(@writes), scalar(@over_newer), scalar(@over_discarded),
	scalar(grep { $_->{outcome} =~ /^refused/ } @hist));

$p->stop;

# ---- The counter ahead of the clock (advance_tokens with a floor 10 min
# ahead; lease rows from a node whose clock runs ahead do the same).  P's
# band starts 600 s above its clock, so its counter never lags the clock
# and no raise of the clock floor comes.  S replicates P's band and a few
# tokens, then stops receiving; P issues more tokens that S never sees
# (more than a sequence logs ahead), and freezes.  S is promoted and
# issues tokens; S is stopped, P resumes.  S's band must start above every
# token P issued, replicated or not, and P's tokens after the resume must
# exceed S's: the band's offset above the clock is carried into S's band
# entry and into P's clock floor.
my $p2 = PostgreSQL::Test::Cluster->new('p2');
$p2->init(allows_streaming => 1);
$p2->start;
$p2->safe_psql('postgres', 'CREATE EXTENSION fencing');
$p2->backup('b2');
my $s2 = PostgreSQL::Test::Cluster->new('s2');
$s2->init_from_backup($p2, 'b2', has_streaming => 1);
$s2->start;

sub draw
{
	my ($node, $k) = @_;
	return split /\n/,
	  $node->safe_psql('postgres',
		"SELECT fencing.next_token() FROM generate_series(1, $k)");
}

$p2->safe_psql('postgres', q{
SELECT fencing.advance_tokens(
	(extract(epoch FROM clock_timestamp()) * 1e6)::bigint + 600000000)});
my @p2_before = draw($p2, 5);
$p2->wait_for_catchup($s2);
$s2->stop;
push @p2_before, draw($p2, 100);    # S never sees these
signal_cluster($p2, 'STOP');
$s2->start;
$s2->promote;
$s2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'S did not finish its promotion';
my @s2_tokens = draw($s2, 200);
$s2->stop('immediate');
signal_cluster($p2, 'CONT');
my @p2_after = draw($p2, 50);
my $s2_max = (sort { $b <=> $a } @s2_tokens)[0];
my $p2_min = (sort { $a <=> $b } @p2_after)[0];
diag "ahead of the clock: P before the freeze $p2_before[0] .. $p2_before[-1], "
  . "S $s2_tokens[0] .. $s2_max, P after the resume $p2_min .. $p2_after[-1]";
ok($s2_tokens[0] > $p2_before[-1],
	"counter ahead of the clock: S's band starts above every token P issued ($s2_tokens[0] > $p2_before[-1])");
ok($p2_min > $s2_max,
	"counter ahead of the clock: P's tokens after the resume exceed every token of S ($p2_min > $s2_max)");
my %seen2;
my @twice = grep { $seen2{$_}++ } @p2_before, @s2_tokens, @p2_after;
is(scalar(@twice), 0,
	'counter ahead of the clock: no token issued twice across P and S ('
	  . scalar(@twice) . ' duplicates)');
$p2->stop;
done_testing();
