# Copyright: fencing extension authors
#
# 014_token_epoch.pl: the mode with no clock assumption.  With
# fencing.epoch_file set, each band entry reads one decimal integer (the
# epoch, which the HA manager's pre-promote hook writes atomically from a
# counter in its consensus store) and epoch e owns the tokens
# [e * 2^40, (e + 1) * 2^40).  The double failover of
# t/010_double_failover.pl, with S2 an hour behind (libfaketime): S1
# promoted with epoch 2, S2 with epoch 3, no token reissued.  S2 promoted
# without a new epoch issues nothing: the file unchanged (LF007), missing
# or garbage (LF006); once the hook has written epoch 3, it goes on.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my ($libfaketime) = grep { -e $_ } glob('/usr/lib/*/faketime/libfaketime.so.1');
BAIL_OUT('libfaketime is not installed (Debian: libfaketime)') unless $libfaketime;

my $E = 2**40;

# what a pre-promote hook does: write the file next to it, then rename
sub write_epoch
{
	my ($node, $text) = @_;
	my $path = $node->data_dir . '/fencing_epoch';
	open my $fh, '>', "$path.tmp" or die "$path.tmp: $!";
	print $fh $text;
	close $fh or die "$path.tmp: $!";
	rename "$path.tmp", $path or die "$path: $!";
}

my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
write_epoch($p, "1\n");
$p->start;
$p->safe_psql('postgres', 'CREATE EXTENSION fencing');
my @p_tokens = tokens($p, 50);
is($p_tokens[0], $E, 'a fresh install in epoch 1 starts at 2^40');
my $ta = $p->safe_psql('postgres', "SELECT fencing.lease_acquire('job', 'A', '1 hour')");
push @p_tokens, $ta;

$p->backup('b');
my $s1 = PostgreSQL::Test::Cluster->new('s1');
$s1->init_from_backup($p, 'b', has_streaming => 1);
$s1->start;
my $s2 = PostgreSQL::Test::Cluster->new('s2');
$s2->init_from_backup($p, 'b', has_streaming => 1);
{
	# no clock assumption: S2 runs an hour behind
	local $ENV{LD_PRELOAD} = $libfaketime;
	local $ENV{FAKETIME} = '-3600';
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = 1;
	$s2->start;
}
$p->wait_for_catchup($_) for ($s1, $s2);
$p->stop('immediate');
cmp_ok(time - $s2->safe_psql('postgres', 'SELECT extract(epoch FROM now())'),
	'>', 3000, 'S2 runs an hour behind');

# first failover: the hook writes epoch 2 on S1, then promotes
write_epoch($s1, '2');
$s1->promote;
$s1->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's1 did not finish its promotion';
my @s1_tokens = tokens($s1, 100);
is($s1_tokens[0], 2 * $E, 'S1 (epoch 2) starts at 2 * 2^40');
cmp_ok(max(@s1_tokens), '<', 3 * $E, 'and stays below epoch 3');
$s1->stop('immediate');

# second failover without a new epoch: no token
$s2->promote;
$s2->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 's2 did not finish its promotion';
my ($ret, $out, $err) = $s2->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT fencing.next_token()");
like($err, qr/ERROR:  LF007: fencing epoch 1 is not greater than the epoch 1 of the current token band/,
	'the epoch copied from P is not new: LF007');
like($err, qr/HINT:  The HA manager's pre-promote hook must write a greater epoch to "fencing_epoch"/,
	'with a hint for the HA manager');
($ret, $out, $err) = $s2->psql('postgres', "SELECT fencing.lease_lock('job', $ta)");
like($err, qr/fencing epoch 1 is not greater/,
	'a lease check needs the new band too, and refuses');
unlink $s2->data_dir . '/fencing_epoch';
($ret, $out, $err) = $s2->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT fencing.next_token()");
like($err, qr/ERROR:  LF006: could not open fencing epoch file "fencing_epoch": No such file/,
	'a missing file: LF006');
for my $bad ("three\n", "3 4\n", "0\n", "-3\n", '', "99999999999999999999\n")
{
	write_epoch($s2, $bad);
	($ret, $out, $err) = $s2->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT fencing.next_token()");
	(my $shown = $bad) =~ s/\n/\\n/g;
	like($err, qr/ERROR:  LF006: fencing epoch file "fencing_epoch" does not hold a valid epoch/,
		"a file holding \"$shown\": LF006");
}

# the hook catches up: epoch 3, no newline
write_epoch($s2, '3');
my @s2_tokens = tokens($s2, 100);
is($s2_tokens[0], 3 * $E, 'S2 (epoch 3) starts at 3 * 2^40, whatever its clock says');
my %acked = map { $_ => 1 } @p_tokens, @s1_tokens;
my @dup = grep { $acked{$_} } @s2_tokens;
my @below = grep { $_ <= max(@p_tokens, @s1_tokens) } @s2_tokens;
is(scalar(@dup), 0, 'no token reissued');
is(scalar(@below), 0, 'none below one acknowledged before');
($ret, $out, $err) = $s2->psql('postgres', "SELECT fencing.lease_lock('job', $ta)");
like($err, qr/lease of fencing token $ta was lost at failover/,
	"A's lease from P must be acquired again on S2");
diag sprintf('epoch mode: %d tokens (P %d, S1 %d, S2 %d), %d reissued, %d below an acknowledged one',
	@p_tokens + @s1_tokens + @s2_tokens, scalar(@p_tokens), scalar(@s1_tokens),
	scalar(@s2_tokens), scalar(@dup), scalar(@below));

$s2->stop;

# ---- dump and restore (issue 23 item 2).  The band's epoch is dumped with
# the counter, so a restore into another database or into the same one
# (--clean) issues nothing until the file holds a greater epoch: the
# source went on issuing in its epoch after the dump.  A restore that
# leaves the band out still cannot go back: the counter's epoch is that of
# its last token.
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $d = PostgreSQL::Test::Cluster->new('d');
$d->init;
$d->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
write_epoch($d, "1\n");
$d->start;
$d->safe_psql('postgres', 'CREATE DATABASE app');
$d->safe_psql('app', 'CREATE EXTENSION fencing');
my @issued = tokens($d, 3, 'app');
$d->command_ok([ 'pg_dump', '-Fc', '-d', 'app', '-f', "$tmp/app.dump" ],
	'epoch mode: pg_dump -Fc after three tokens');
push @issued, tokens($d, 3, 'app');
is_deeply(\@issued, [ $E .. $E + 5 ], 'epoch 1: three tokens before the dump, three after');

$d->safe_psql('postgres', 'CREATE DATABASE copy');
$d->command_ok([ 'pg_restore', '-d', 'copy', '--exit-on-error', "$tmp/app.dump" ],
	'pg_restore into another database');
$d->command_ok(
	[ 'pg_restore', '--clean', '--if-exists', '-d', 'app', "$tmp/app.dump" ],
	'pg_restore --clean into the same database');
# a restore list without the band's entry
my ($rc, $list) = run_cmd(60, 'pg_restore', '-l', "$tmp/app.dump");
is($rc, 0, 'pg_restore -l');
open my $lf, '>', "$tmp/noband.list" or die $!;
print $lf join("\n", grep { !/SEQUENCE SET .*token_band/ } split /\n/, $list), "\n";
close $lf;
$d->safe_psql('postgres', 'CREATE DATABASE noband');
$d->command_ok(
	[ 'pg_restore', '-L', "$tmp/noband.list", '-d', 'noband', '--exit-on-error', "$tmp/app.dump" ],
	'pg_restore into a third database, without the band');
is($d->safe_psql('noband', 'SELECT last_value FROM fencing.token_band'), 0,
	'that restore left the band out');

for my $db (qw(copy app noband))
{
	($ret, $out, $err) = $d->psql($db, "\\set VERBOSITY verbose\nSELECT fencing.next_token()");
	like($err, qr/ERROR:  LF007: fencing epoch 1 is not greater than the epoch 1 of the current token band/,
		"$db: the restored state is in epoch 1: no token until the file holds a greater one (LF007)");
}
write_epoch($d, "2\n");
for my $db (qw(copy app noband))
{
	my @t = tokens($d, 3, $db);
	is_deeply(\@t, [ 2 * $E .. 2 * $E + 2 ], "$db: with epoch 2, tokens start at 2 * 2^40");
}
$d->stop;
done_testing();
