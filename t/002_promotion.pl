# Copyright: fencing extension authors
#
# 002_promotion.pl: an asynchronous standby that missed the tail of the
# primary's WAL is promoted; every token it issues must exceed every token
# the old primary acknowledged, although its copy of the counter is behind.
# Its first token enters a new band at the wall clock.  The old primary,
# restarted alone (split brain, still on timeline 1), keeps issuing tokens
# below all of the new primary's.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', $FencingTest::count_tokens_conf);
# No checkpoint (or restartpoint) but the ones the test causes; the standby
# inherits this through the base backup.
$primary->append_conf('postgresql.conf', 'checkpoint_timeout = 1h');
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION fencing');

# microseconds since the Unix epoch, by the node's clock
sub clock_usecs
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint');
}

# ---------------------------------------------------------------------------
# tokens the standby will see

my @seen = tokens($primary, 50);
my $t0 = $seen[0];
is_deeply(\@seen, [ $t0 .. $t0 + 49 ],
	"within its band a primary issues consecutive tokens ($t0, ...)");
is(band_start($primary), $t0, 'the first token started the band');
my $l1_seen = acquire($primary, 'L1', 'A', '1 hour');
my $l2_seen = acquire($primary, 'L2', 'A', '2 seconds');
is($l1_seen, $t0 + 50, 'lease L1 acquired with the next token');
is($l2_seen, $t0 + 51, 'lease L2 acquired with the one after');

$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;
push @seen, tokens($primary, 10);
$primary->wait_for_catchup($standby);
is( $standby->safe_psql('postgres',
		"SELECT holder || ':' || token FROM fencing.leases WHERE name = 'L1'"),
	"A:$l1_seen",
	'the standby replayed lease L1');
my $standby_seq_caught_up =
  $standby->safe_psql('postgres', 'SELECT last_value FROM fencing.token_seq');
cmp_ok($standby_seq_caught_up, '>=', max(@seen),
	"caught-up standby's counter ($standby_seq_caught_up) covers every token so far");

# ---------------------------------------------------------------------------
# the tail the standby never receives

# Cut the standby off while it keeps running: with primary_conninfo empty
# its WAL receiver stops and is not restarted, and it has no
# restore_command, so it never sees what follows.
$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->reload;
$standby->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
  or die 'the WAL receiver did not stop';
my @tail = tokens($primary, 500);
my $l1_tail = acquire($primary, 'L1', 'A', '1 hour');
my $l3_tail = acquire($primary, 'L3', 'C', '1 hour');
push @tail, tokens($primary, 100), $l1_tail, $l3_tail;
my $old_max = max(@seen, @tail);
cmp_ok($l1_tail, '>', $l1_seen, "L1 re-acquired on the old primary: token $l1_tail");
is($old_max, $t0 + 663, "the old primary acknowledged tokens up to $old_max");
$primary->stop('immediate');

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'standby is in recovery');
my $standby_seq =
  $standby->safe_psql('postgres', 'SELECT last_value FROM fencing.token_seq');
cmp_ok($standby_seq, '<', $old_max,
	"the standby missed the tail: its counter $standby_seq < old primary's max acknowledged $old_max"
);
is( $standby->safe_psql('postgres',
		"SELECT string_agg(name || ':' || holder || ':' || token, ',' ORDER BY name) FROM fencing.leases"
	),
	"L1:A:$l1_seen,L2:A:$l2_seen",
	'the standby has the leases as of before the tail (L1 old token, no L3)');

# A session open on the standby before the promotion: no tokens in recovery,
# then a token from the new timeline's band in the same session.
my $session = $standby->background_psql('postgres', on_error_stop => 0);
my ($out, $err) = $session->query('SELECT fencing.next_token()');
like($session->{stderr}, qr/cannot issue fencing tokens during recovery/,
	'next_token() refuses to run during recovery');
$session->{stderr} = '';

# The first token after promotion must come from the new timeline's band
# before any checkpoint has run on it: the timeline SQL can see
# (pg_control_checkpoint()) is that of the last checkpoint, and the
# checkpoint a promotion requests runs asynchronously.  To make that window
# deterministic the checkpointer is stopped (SIGSTOP) across the promotion;
# the promotion itself (end-of-recovery record, control file update) is
# done by the startup process and does not wait for it.
my $ckpt_pid = $standby->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'");
like($ckpt_pid, qr/^\d+$/, 'found the standby\'s checkpointer');
is(kill('STOP', $ckpt_pid), 1, 'checkpointer stopped');

my $clock_before = clock_usecs($standby);
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion did not finish';

my ($first, $ckpt_tli) = split /\|/,
  $standby->safe_psql('postgres',
	'SELECT fencing.next_token(), (pg_control_checkpoint()).timeline_id');
note "first token after promotion: $first (checkpoint timeline then: $ckpt_tli)";
is(kill('CONT', $ckpt_pid), 1, 'checkpointer continued');
is($ckpt_tli, 1,
	'the first token was issued while the last checkpoint was still on timeline 1');
is($first, band_start($standby),
	'the first token after promotion starts a new band (timeline 2)');
cmp_ok($first, '>=', $clock_before,
	'the band starts at the clock at band entry');
cmp_ok($first, '>', $old_max,
	"first token after promotion $first > old primary's max acknowledged $old_max");

my $in_session = $session->query_safe('SELECT fencing.next_token()');
chomp $in_session;    # 16's BackgroundPsql keeps the newline
is($in_session, $first + 1,
	'a session opened during recovery issues tokens of the new band after promotion');
$session->quit;

my @new = ($first, $in_session, tokens($standby, 200));
my @bad = grep { $_ <= $old_max } @new;
is_deeply(\@bad, [], 'every token of the promoted node exceeds the old primary\'s');

$standby->safe_psql('postgres', 'CHECKPOINT');
is($standby->safe_psql('postgres', 'SELECT timeline_id FROM pg_control_checkpoint()'),
	'2', 'the promoted node is on timeline 2');

# leases: the one re-acquired on the old primary gets a larger token again
my $l1_new = acquire($standby, 'L1', 'A', '1 hour');
cmp_ok($l1_new, '>', $l1_tail,
	"L1 re-acquired by its holder after promotion: $l1_new > $l1_tail (old primary's)");
is(acquire($standby, 'L1', 'B', '1 hour'), '',
	'L1 is still held by A: another holder gets NULL');
is($standby->safe_psql('postgres', "SELECT fencing.lease_lock('L1', $l1_tail)"),
	'f', 'the old primary\'s L1 token is not valid on the new primary');
is($standby->safe_psql('postgres', "SELECT fencing.lease_lock('L1', $l1_new)"),
	't', 'the new L1 token is');

# L3 exists only on the old primary; here it is created anew.
my $l3_new = acquire($standby, 'L3', 'D', '1 hour');
cmp_ok($l3_new, '>', $l3_tail,
	"L3 (lost with the tail) acquired by another holder: $l3_new > $l3_tail");

# L2 expires; a new holder takes it over.
$standby->poll_query_until('postgres',
	"SELECT state = 'expired' FROM fencing.lease_status WHERE name = 'L2'")
  or die 'L2 did not expire';
my $l2_new = acquire($standby, 'L2', 'B', '1 hour');
cmp_ok($l2_new, '>', $old_max, "expired L2 taken over by B with $l2_new > $old_max");
is( $standby->safe_psql('postgres',
		"SELECT holder || ':' || token || ':' || holder_changes FROM fencing.lease_status WHERE name = 'L2'"
	),
	"B:$l2_new:1",
	'lease_status shows the takeover');
push @new, $l1_new, $l3_new, $l2_new;

# ---------------------------------------------------------------------------
# split brain: the old primary comes back alone, still on timeline 1

$primary->start;
my @split = (tokens($primary, 100), acquire($primary, 'L1', 'A', '1 hour'));
cmp_ok(min(@split), '>', $old_max,
	'the restarted old primary continues above its own acknowledged tokens');
cmp_ok(max(@split), '<', min(@new),
	'and all its tokens are below every token of the new primary ('
	  . max(@split) . ' < ' . min(@new) . ')');
is(band_start($primary), $t0, 'the old primary stays in its own band');

$primary->stop;
$standby->stop;
done_testing();
