# Copyright: fencing extension authors
#
# 019_mode_switch.pl: fencing.epoch_file is reloadable, and the token
# source follows the setting at once, in every session, not from the next
# band entry on (the stored band of the other mode is not current):
#
#   - epoch mode to clock mode: the next token enters a band at the clock,
#     and the clock floor holds from then on, so the resumed-primary history
#     of t/015 issues above what the promoted member acknowledged;
#   - clock mode to epoch mode: no token until the file holds an epoch
#     above the counter's (LF007), then tokens of that epoch, consecutive,
#     never raised to the clock again.
#
# A switch is a band entry: a lease held across it is refused (LF005) and
# acquired again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $E = 2**40;

sub write_epoch
{
	my ($node, $text) = @_;
	my $path = $node->data_dir . '/fencing_epoch';
	open my $fh, '>', "$path.tmp" or die "$path.tmp: $!";
	print $fh $text;
	close $fh or die "$path.tmp: $!";
	rename "$path.tmp", $path or die "$path: $!";
	return;
}

sub set_epoch_file
{
	my ($node, $value) = @_;
	$node->append_conf('postgresql.conf', "fencing.epoch_file = '$value'");
	$node->reload;
	$node->poll_query_until('postgres', "SELECT current_setting('fencing.epoch_file') = '$value'")
	  or die 'the reload did not take';
	return;
}

# ---- epoch mode to clock mode, then a freeze
my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
write_epoch($p, "1\n");
$p->start;
$p->safe_psql('postgres', 'CREATE EXTENSION fencing');
my $live = $p->background_psql('postgres');
my $t0 = $live->query_safe('SELECT fencing.next_token()');
chomp $t0;
is($t0, $E, 'epoch mode: the first token is 2^40');
my $th = acquire($p, 'L', 'H');

set_epoch_file($p, '');
my $t1 = $live->query_safe('SELECT fencing.next_token()');
chomp $t1;
cmp_ok($t1, '>', 1700000000000000,
	"after the switch to clock mode, the same session's next token is at the clock ($t1)");
is($t1, band_start($p), 'it starts a band');
my ($ret, $out, $err) = $p->psql('postgres', "SELECT fencing.lease_lock('L', $th)");
like($err, qr/lease of fencing token $th was lost at failover/,
	'a lease held across the switch is refused (LF005)');
$live->quit;

$p->backup('b');
my $s = PostgreSQL::Test::Cluster->new('s');
$s->init_from_backup($p, 'b', has_streaming => 1);
$s->start;
$p->safe_psql('postgres', 'SELECT fencing.next_token()');
$p->wait_for_catchup($s);
signal_cluster($p, 'STOP');
$s->promote;
$s->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion did not finish';
my $ts = acquire($s, 'K', 'B', '1 min');
$s->stop('immediate');
signal_cluster($p, 'CONT');
my $tp = acquire($p, 'K', 'C', '1 min');
cmp_ok($tp, '>', $ts,
	"P, frozen and resumed in clock mode, issues above the token the promoted S acknowledged (P: $tp, S: $ts)");
$p->stop;

# ---- clock mode to epoch mode
my $c = PostgreSQL::Test::Cluster->new('c');
$c->init;
$c->append_conf('postgresql.conf', "fencing.max_clock_lag = '1ms'");
$c->start;
$c->safe_psql('postgres', 'CREATE EXTENSION fencing');
$live = $c->background_psql('postgres', on_error_stop => 0);
my $tc = $live->query_safe('SELECT fencing.next_token()');
chomp $tc;
my $counter_epoch = int($tc / $E);
write_epoch($c, "$counter_epoch\n");
set_epoch_file($c, 'fencing_epoch');
$live->query('SELECT fencing.next_token()');
like($live->{stderr}, qr/fencing epoch $counter_epoch is not greater than the epoch $counter_epoch of the current token band/,
	"the same session, after the switch to epoch mode: LF007 while the file holds the counter's epoch $counter_epoch");
$live->{stderr} = '';
my $e = $counter_epoch + 1;
write_epoch($c, "$e\n");
my $te = $live->query_safe('SELECT fencing.next_token()');
chomp $te;
is($te, $e * $E, "with epoch $e, the next token is $e * 2^40");
# more than max_clock_lag later: no raise to the clock in epoch mode
$c->poll_query_until('postgres',
	"SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint > $tc + 5000")
  or die 'the clock did not move';
my $te2 = $live->query_safe('SELECT fencing.next_token()');
chomp $te2;
is($te2, $te + 1, 'the next token follows it, not the clock');
$live->quit;
$c->stop;
done_testing();
