# Copyright: fencing extension authors
#
# 903_redt_epoch_to_clock.pl (red team, currently FAILS): a database
# switched from epoch mode to clock mode (fencing.epoch_file emptied and
# reloaded, as docs/tokens.md allows: "reloadable; empty, the default, is
# clock mode") keeps an epoch band until its next band entry, and
# verified.clock_band comes from the stored band's epoch, not from the
# setting: no clock floor.  The resumed-primary history of
# t/015_resumed_primary.pl then goes backwards: S, promoted in clock mode,
# issues tokens at its clock; P resumes and issues at its old counter
# (epoch 1: about 1.1e12), far below.
#
# README ("What is guaranteed"): "a primary that was frozen while a
# standby was promoted, and then resumed as primary ... issues above every
# token the standby acknowledged, with or without an HA manager" (clock
# mode); docs/tokens.md names no precondition for leaving epoch mode.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

sub signal_all
{
	my ($node, $sig) = @_;
	my $pm = $node->{_pid} or die 'no postmaster pid';
	kill $sig, $pm;
	my @kids;
	for my $stat (glob('/proc/[0-9]*/stat'))
	{
		open my $fh, '<', $stat or next;
		my $l = <$fh> // next;
		push @kids, $1 if $l =~ /^(\d+) \(.*\) [A-Za-z] (\d+) / && $2 == $pm;
	}
	kill $sig, @kids;
	return 1 + @kids;
}

my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
PostgreSQL::Test::Utils::append_to_file($p->data_dir . '/fencing_epoch', "1\n");
$p->start;
$p->safe_psql('postgres', 'CREATE EXTENSION fencing');
my $t0 = $p->safe_psql('postgres', 'SELECT fencing.next_token()');
is($t0, 2**40, 'epoch mode: the first token is 2^40');

# leave epoch mode: the default, clock mode, on both members
$p->append_conf('postgresql.conf', "fencing.epoch_file = ''");
$p->reload;
$p->poll_query_until('postgres', "SELECT current_setting('fencing.epoch_file') = ''")
  or die 'reload';
$p->backup('b');
my $s = PostgreSQL::Test::Cluster->new('s');
$s->init_from_backup($p, 'b', has_streaming => 1);
$s->start;
my $t1 = $p->safe_psql('postgres', 'SELECT fencing.next_token()');
$p->wait_for_catchup($s);

signal_all($p, 'STOP');
$s->promote;
$s->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'promotion';
my $ts = acquire($s, 'L', 'B', '1 min');
note "S, promoted in clock mode, acknowledged $ts";
$s->stop('immediate');
signal_all($p, 'CONT');

my $tp = acquire($p, 'L', 'C', '1 min');
cmp_ok($tp, '>', $ts,
	"P, resumed in clock mode, issues above the token S acknowledged (P: $tp, S: $ts)");
$p->stop;
done_testing();
