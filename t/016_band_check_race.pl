# Copyright: fencing extension authors
#
# 016_band_check_race.pl: a band entry that lands while a backend verifies
# the band (issue 23 item 6).  A backend that checks a token reads the
# token state and the page LSN of fencing.token_origin, which marks every
# change of that state, and caches the band until the LSN moves.  Read
# without a lock, a band entry that lands between the two reads left the
# backend with the old band's start and the new LSN: it accepted tokens
# from before the entry (no LF005) until the next one, while any fresh
# session refused them.
#
# Deterministic: gdb stops backend A inside its read of the state (at
# SPI_finish, where 83fed51 read it with a query, or at the first
# pg_sequence_last_value, where it is read directly), while session B calls
# advance_tokens().  With the band lock, B
# waits for A; either way A is let go, B finishes, and A must then refuse
# a token from before B's band entry.  Skipped when gdb is missing (outside
# test/run.sh, which installs it).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

if (!in_path('gdb'))
{
	BAIL_OUT('gdb not found, although test/run.sh installs it')
	  if $ENV{FENCING_REQUIRE_HA_TOOLS};
	plan skip_all => 'gdb not installed (Debian: gdb)';
}

my $node = PostgreSQL::Test::Cluster->new('race');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
my $old = $node->safe_psql('postgres', 'SELECT fencing.next_token()');

# a psql session whose input we feed line by line
sub session
{
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

# send $sql, wait until stdout or stderr match $re
sub send_wait
{
	my ($s, $sql, $re, $what) = @_;
	$s->{out} = $s->{err} = '';
	$s->{in} .= "$sql\n";
	wait_until($what, 120, sub {
		$s->{h}->pump_nb;
		return ($s->{out} . $s->{err}) =~ $re;
	});
	return $s->{out} . $s->{err};
}

my $a = session();
my ($pid) = send_wait($a, 'SELECT pg_backend_pid();', qr/^(\d+)\n/, 'A to connect')
  =~ /^(\d+)/;

# gdb stops A in the band check, inside its read of the token state, before
# it reads token_origin's page LSN
my ($gin, $gout) = ('', '');
my $gdb = IPC::Run::start(
	[
		'gdb', '-q', '-nx', '-iex', 'set debuginfod enabled off',
		'-p', $pid
	],
	'<', \$gin, '>&', \$gout);
$gin .= "set pagination off\nset confirm off\nbreak SPI_finish\n"
  . "break pg_sequence_last_value\ncontinue\n";
eval {
	wait_until('gdb to attach to A', 120, sub {
		$gdb->pump_nb;
		return $gout =~ /Continuing\./;
	});
	1;
} or BAIL_OUT("gdb could not attach to backend $pid:\n$gout");
pass("gdb holds backend $pid");

$a->{out} = $a->{err} = '';
$a->{in} .= "SELECT fencing.fence_advance(NULL, $old);\n";
wait_until('A to stop at the breakpoint', 120, sub {
	$gdb->pump_nb;
	$a->{h}->pump_nb;
	return $gout =~ /Breakpoint \d+, .*(SPI_finish|pg_sequence_last_value)/;
});
pass('A stopped inside its band check');

# B enters a band: with the band lock it waits for A, without it lands now
my $b = session();
send_wait($b, 'SELECT pg_backend_pid();', qr/^\d+\n/, 'B to connect');
my ($b_pid) = $b->{out} =~ /^(\d+)/;
$b->{out} = $b->{err} = '';
$b->{in} .= "SELECT fencing.advance_tokens(); SELECT 'advanced';\n";
my $b_state;
wait_until('B to finish or to wait for a lock', 120, sub {
	$b->{h}->pump_nb;
	return $b_state = 'finished' if $b->{out} =~ /advanced/;
	my $w = $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE pid = $b_pid AND NOT granted");
	return $b_state = ($w > 0 ? 'waiting' : 0);
});
is($b_state, 'waiting', 'the band entry waits for the band check under way');

# let A go; B finishes
$gin .= "detach\nquit\n";
$gdb->finish;
wait_until('A to answer', 120, sub {
	$a->{h}->pump_nb;
	return ($a->{out} . $a->{err}) =~ /\n/;
});
is($a->{out}, "$old\n", "A's check, begun before the band entry, accepts token $old");
wait_until('B to finish', 120, sub { $b->{h}->pump_nb; return $b->{out} =~ /advanced/; });

# A's next check must see the band entry
my $out = send_wait($a, "SELECT fencing.fence_advance(NULL, $old);", qr/\n/,
	'A to check again');
like($out, qr/lease of fencing token $old was lost at failover/,
	'A then refuses the token from before the band entry (LF005)');
my ($ret, $o, $err) = $node->psql('postgres', "SELECT fencing.fence_advance(NULL, $old)");
like($err, qr/lease of fencing token $old was lost at failover/,
	'as a fresh session does');

$a->{in} .= "\\q\n";
$b->{in} .= "\\q\n";
$a->{h}->finish;
$b->{h}->finish;
$node->stop;
done_testing();
