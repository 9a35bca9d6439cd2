# Copyright: fencing extension authors
#
# 001_crash.pl: tokens never go backwards across a crash, even with
# synchronous_commit = off and WAL that was never written at crash time.
#
# The setup makes unwritten WAL real: synchronous_commit = off, a 10 s
# wal_writer_delay (the WAL writer then writes only completed WAL pages
# between its 10 s rounds), no background writer and no checkpoint during
# the load.  Several psql clients call fencing.next_token() and
# fencing.lease_acquire() in autocommit; every row a client printed is an
# acknowledged result (the server commits before it sends CommandComplete,
# and psql prints a result only once it is complete).
#
# Why this catches a plain nextval(): a sequence WAL-logs 32 values ahead
# in one record and writes no WAL at all for the next 31 calls.  With
# synchronous_commit = off nothing flushes that record, so a crash that
# loses the last partial WAL page restarts the sequence below values
# clients already saw.  A control phase runs the very same load against a
# plain sequence and asserts that it does go backwards here; cycle 1 then
# crashes in a window where only next_token() runs (no lease_acquire,
# whose forced synchronous commit would flush that WAL as a side effect),
# i.e. exactly the control's conditions.  Cycle 2 kills one backend with
# SIGKILL (the postmaster then runs crash recovery) in a window where only
# lease_acquire() runs, which would lose acknowledged leases if their
# commit were not forced synchronous.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $tmp = PostgreSQL::Test::Utils::tempdir;

my $node = crash_node('crash');
$node->safe_psql('postgres', 'CREATE SEQUENCE ctl_seq');
# Make the setup durable: from 17 on, the WAL writer leaves asynchronously
# committed WAL unwritten until wal_writer_flush_after (1MB) of it piles up
# or its 10 s round, so a crash now would lose the setup too.
$node->safe_psql('postgres', 'CHECKPOINT');
is($node->safe_psql('postgres', 'SHOW synchronous_commit'),
	'off', 'synchronous_commit is off');

# ---------------------------------------------------------------------------
# load clients

my $nclients = 0;

# A psql client running @lines that stops at the first error: fencing_$tag$n
sub client
{
	my ($tag, @lines) = @_;
	$nclients++;
	my $c = start_client($node, $tmp, "$tag$nclients", \@lines,
		on_error_stop => 1);
	@$c{qw(tag n)} = ($tag, $nclients);
	return $c;
}

# Wait for a client to exit; return its acknowledged results.
sub client_rows
{
	my ($c) = @_;
	my (undef, $rows) = finish_client($c);
	return $rows;
}

sub token_lines
{
	my ($n) = @_;
	return ("SELECT 'T', fencing.next_token();") x $n;
}

# Client $j's lease calls: its own 20 leases (holder h$j, one holder per
# lease) and, every 4th call, a lease shared by all clients with a TTL
# short enough that holders take it over from each other.
sub lease_lines
{
	my ($j, $n) = @_;
	my @l;
	for my $k (1 .. $n)
	{
		my $name = "c${j}_" . ($k % 20);
		push @l,
		  "SELECT 'L', '$name', 'h$j', fencing.lease_acquire('$name', 'h$j', '1 hour');";
		push @l,
		  "SELECT 'L', 'shared', 'h$j', fencing.lease_acquire('shared', 'h$j', '1 millisecond');"
		  if $k % 4 == 0;
	}
	return @l;
}

sub seq_value
{
	my ($seq) = @_;
	return $node->safe_psql('postgres', "SELECT last_value FROM $seq");
}

# Wait until sequence $seq has moved $delta past where it is now.
sub wait_for_progress
{
	my ($seq, $delta) = @_;
	my $target = seq_value($seq) + $delta;
	$node->poll_query_until('postgres',
		"SELECT last_value >= $target FROM $seq")
	  or die "load made no progress on $seq";
}

my $log_offset;

# ---------------------------------------------------------------------------
# control: the same load on a plain sequence loses acknowledged values

my ($ctl_regressed, $ctl_attempts) = (0, 0);
while (!$ctl_regressed && $ctl_attempts < 3)
{
	$ctl_attempts++;
	my @c = map {
		client('ctl', ("SELECT 'C', nextval('ctl_seq');") x 50000)
	} 1 .. 4;
	wait_for_clients($node, map { $_->{name} } @c);
	wait_for_progress('ctl_seq', 3000);
	$log_offset = -s $node->logfile;
	$node->stop('immediate');
	my $max = 0;
	for my $c (@c)
	{
		for my $r (@{ client_rows($c) })
		{
			$max = $r->[1] if $r->[0] eq 'C' && $r->[1] > $max;
		}
	}
	$node->start;
	my $next = $node->safe_psql('postgres', "SELECT nextval('ctl_seq')");
	note "control attempt $ctl_attempts: max acknowledged $max, nextval after crash $next";
	$ctl_regressed = 1 if $next <= $max;
}
ok($ctl_regressed,
	"control: a plain sequence reissues acknowledged values after this crash (attempts: $ctl_attempts)"
);

# ---------------------------------------------------------------------------
# bookkeeping of everything acknowledged

my @all_tokens;       # every acknowledged token
my %lease_ack;        # name => { token => max acknowledged, holder => ... }
my $max_ack = 0;

sub record_rows
{
	my ($c, $rows) = @_;
	my $prev    = 0;
	my $ordered = 1;
	my $count   = 0;
	for my $r (@$rows)
	{
		my $t;
		if ($r->[0] eq 'T')
		{
			$t = $r->[1];
		}
		elsif ($r->[0] eq 'L')
		{
			next if $r->[3] eq '';    # lease held by another: NULL
			$t = $r->[3];
			my $a = $lease_ack{ $r->[1] };
			$lease_ack{ $r->[1] } = { token => $t, holder => $r->[2] }
			  if !defined $a || $t > $a->{token};
		}
		else
		{
			die "unexpected output row: @$r";
		}
		$ordered = 0 if $t <= $prev;
		$prev = $t;
		push @all_tokens, $t;
		$max_ack = $t if $t > $max_ack;
		$count++;
	}
	ok($ordered,
		"client $c->{n} ($c->{tag}): its $count tokens are strictly increasing");
	return $count;
}

sub check_after_restart
{
	my ($what) = @_;

	check_distinct($what, \@all_tokens);
	check_leases_survived(
		$node, $what,
		\%lease_ack,
		sub {
			my ($name, $holder) = @_;
			my $acked = $lease_ack{$name}{holder};
			return $name ne 'shared' && $holder ne $acked
			  ? "holder $holder, acknowledged to $acked"
			  : undef;
		});
	my @after = check_tokens_after_restart($node, $what, $max_ack, 3, 40);

	# a lease re-acquired by its holder gets a token above all acknowledged
	my ($name) = grep { $_ ne 'shared' } sort keys %lease_ack;
	my $holder = $lease_ack{$name}{holder};
	my $t = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$name', '$holder', '1 hour')");
	cmp_ok($t, '>', $max_ack,
		"$what: re-acquired lease $name gets token $t > $max_ack");
	push @all_tokens, @after, $t;
	$max_ack = $t;
	return;
}

# ---------------------------------------------------------------------------
# cycle 1: immediate shutdown while only next_token() runs

{
	my @tc = map { client('tok', token_lines(50000)) } 1 .. 3;
	my @lc = map { client('lease', lease_lines($_, 400)) } 1 .. 2;
	# the lease clients finish; their forced commits flush WAL no more
	record_rows($_, client_rows($_)) for @lc;
	wait_for_clients($node, map { $_->{name} } @tc);
	wait_for_progress('fencing.token_seq', 3000);
	$log_offset = -s $node->logfile;
	$node->stop('immediate');
	my $n = 0;
	$n += record_rows($_, client_rows($_)) for @tc;
	# the seq moved 3000 past a point where all clients had begun; at most
	# one call per client was in flight
	cmp_ok($n, '>=', 3000 - 3, "cycle 1: $n tokens acknowledged to next_token() clients");
	$node->start;
	ok( $node->log_contains(
			'database system was not properly shut down; automatic recovery in progress',
			$log_offset),
		'cycle 1: the restart ran crash recovery');
	check_after_restart('cycle 1 (immediate shutdown)');
}

# ---------------------------------------------------------------------------
# cycle 2: SIGKILL of one backend while only lease_acquire() runs

{
	my @tc = map { client('tok', token_lines(2000)) } 1 .. 2;
	my @lc = map { client('lease', lease_lines($_ + 2, 50000)) } 1 .. 3;
	record_rows($_, client_rows($_)) for @tc;
	# the lease clients have all begun and acquired 600 more leases
	wait_for_clients($node, map { $_->{name} } @lc);
	my $acquires = q{(SELECT coalesce(sum(acquires), 0) FROM fencing.leases
	                   WHERE name ~ '^(c[345]_|shared$)')};
	my $target = $node->safe_psql('postgres', "SELECT $acquires + 600");
	$node->poll_query_until('postgres', "SELECT $acquires >= $target")
	  or die 'lease clients made no progress';

	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'fencing\\_lease%' LIMIT 1"
	);
	like($pid, qr/^\d+$/, 'cycle 2: found a lease client backend');
	$log_offset = -s $node->logfile;
	is(kill('KILL', $pid), 1, "cycle 2: sent SIGKILL to backend $pid");

	my $n = 0;
	$n += record_rows($_, client_rows($_)) for @lc;
	cmp_ok($n, '>', 500, "cycle 2: $n lease acquires acknowledged");
	$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'node did not come back after the backend crash';
	ok( $node->log_contains(
			'all server processes terminated; reinitializing', $log_offset),
		'cycle 2: the postmaster reinitialized after the backend crash');
	ok( $node->log_contains(
			'database system was interrupted', $log_offset),
		'cycle 2: and ran crash recovery');
	check_after_restart('cycle 2 (backend SIGKILL)');
}

$node->stop;
done_testing();
