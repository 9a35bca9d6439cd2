# Copyright: fencing extension authors
#
# 031_wait_clock_step.pl: the wait of lease_acquire(..., wait => ...) is
# measured on a monotonic clock, so stepping the server's wall clock
# during a wait does not stretch it; expiry stays judged by the wall clock.
#
# The server runs under libfaketime with its offset read from a file on
# every clock call (FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE), and the
# monotonic clock left alone (FAKETIME_DONT_FAKE_MONOTONIC): as an NTP
# step or an operator's `date -s` would, it moves the wall clock only.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $faketime = (grep { -e $_ } glob('/usr/lib/*/faketime/libfaketime.so.1'))[0];
if (!defined $faketime)
{
	# test/deps.sh installs it for CI (Debian: libfaketime)
	plan skip_all => 'libfaketime not installed';
}

my $node = PostgreSQL::Test::Cluster->new('clockstep');
$node->init;
my $offset_file = $node->basedir . '/faketime_offset';

sub step_clock
{
	my ($offset) = @_;
	open(my $fh, '>', "$offset_file.new") or die "$offset_file.new: $!";
	print $fh "$offset\n";
	close($fh);
	rename("$offset_file.new", $offset_file) or die "rename: $!";
	return;
}
step_clock('+0');
{
	# only the server runs under libfaketime; psql and pg_ctl are not
	# affected by the offset anyway, since it is +0 until a step
	local $ENV{LD_PRELOAD} = $faketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $offset_file;
	local $ENV{FAKETIME_NO_CACHE} = '1';
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = '1';
	local $ENV{FAKETIME_DONT_RESET} = '1';
	$node->start;
}
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# the server's clock against ours: the offset file is read
step_clock('-1h');
my $skew = $node->safe_psql('postgres',
	"SELECT round(extract(epoch FROM pg_catalog.clock_timestamp()) - " . time() . ")");
step_clock('+0');
cmp_ok($skew, '<=', -3500, "libfaketime steps the server's wall clock ($skew s)");

my $timeout = $PostgreSQL::Test::Utils::timeout_default;

# a waiter in the background; returns what it printed, and how long it took
sub start_waiter
{
	my ($lease, $wait) = @_;
	my %w = (out => '', err => '');
	$w{t0} = time;
	$w{h} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres') . ' application_name=clock_waiter',
			'-c', "SET statement_timeout = '60s'",
			'-c', "SELECT coalesce(fencing.lease_acquire('$lease', 'waiter', '1 min', '$wait')::text, 'null')"
		],
		'>', \$w{out}, '2>', \$w{err}, IPC::Run::timeout($timeout));
	return \%w;
}

sub finish_waiter
{
	my ($w) = @_;
	$w->{h}->finish;
	$w->{elapsed} = time - $w->{t0};
	chomp $w->{out};
	return $w;
}

# wait until the waiter sleeps in the lease wait (wait event Extension)
sub wait_asleep
{
	return $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE application_name = 'clock_waiter'
		   AND wait_event_type = 'Extension' AND wait_event IN ('Extension', 'FencingLeaseWait')});
}

# ---------------------------------------------------------------------------
# a step back: the 3 s wait still ends after about 3 s, with NULL

my $tok = $node->safe_psql('postgres',
	"SELECT fencing.lease_acquire('clk_back', 'holder', '10 min')");
like($tok, qr/^\d+$/, 'the holder has the lease');
my $w = start_waiter('clk_back', '3 s');
ok(wait_asleep(), 'the waiter sleeps');
step_clock('-1h');
finish_waiter($w);
step_clock('+0');
is($w->{out}, 'null', 'the waiter gives up with NULL, not an error')
  or diag($w->{err});
is($w->{err}, '', 'no statement_timeout');
cmp_ok($w->{elapsed}, '>=', 3, sprintf('not before its 3 s (%.2f s)', $w->{elapsed}));
# 60 s is the statement_timeout a wall-clock deadline would run into
cmp_ok($w->{elapsed}, '<', 30,
	sprintf('with the clock stepped back an hour: %.2f s for a 3 s wait', $w->{elapsed}));
is($node->safe_psql('postgres',
		"SELECT holder || ' ' || (token = $tok) FROM fencing.lease_status WHERE name = 'clk_back'"),
	'holder true', 'the holder keeps its lease');

# ---------------------------------------------------------------------------
# a step forward: expiry is judged by the wall clock, so the 10 min lease
# has expired an hour later and the waiter takes it over, at its next look
# (the latest at the end of its wait)

$tok = $node->safe_psql('postgres',
	"SELECT fencing.lease_acquire('clk_fwd', 'holder', '10 min')");
$w = start_waiter('clk_fwd', '3 s');
ok(wait_asleep(), 'the waiter sleeps');
step_clock('+1h');
finish_waiter($w);
like($w->{out}, qr/^\d+$/, 'with the clock stepped forward an hour the waiter takes over')
  or diag($w->{err});
cmp_ok($w->{out}, '>', $tok, 'with a larger token');
is($node->safe_psql('postgres',
		"SELECT holder || ' ' || takeover FROM fencing.lease_status WHERE name = 'clk_fwd'"),
	'waiter true', 'a takeover of the expired lease');
step_clock('+0');

$node->stop;
done_testing();
