# Copyright: fencing extension authors
#
# 904_redt_epoch_old_dump.pl (red team, currently FAILS): epoch mode, an
# OLD dump restored with --clean into the same database after that
# database moved on to a greater epoch.  The restored band is the dump's
# (epoch 1); the file holds the epoch the database uses now (2), which is
# "greater than the dumped one", so band_floor() accepts it and the band
# starts at max(dumped counter + 1, 2 << 40) = 2 << 40: every token the
# database issued in epoch 2 before the restore is issued again.
#
# The epoch moves on here the way token_space_exhausted()'s hint says
# (write a greater epoch, call advance_tokens()); a promotion with the
# pre-promote hook does the same (a primary of epoch 1 dumped, a standby
# promoted with epoch 2 issues, the dump is restored into it).
#
# README: tokens never repeat within one database's history across dump
# and restore; docs/tokens.md: "after pg_restore (... or --clean into the
# same one) no token is issued until the file holds an epoch greater than
# the dumped one".
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

sub write_epoch
{
	my ($node, $text) = @_;
	my $path = $node->data_dir . '/fencing_epoch';
	open my $fh, '>', "$path.tmp" or die "$path.tmp: $!";
	print $fh $text;
	close $fh or die "$path.tmp: $!";
	rename "$path.tmp", $path or die "$path: $!";
}

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $d = PostgreSQL::Test::Cluster->new('d');
$d->init;
$d->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
write_epoch($d, "1\n");
$d->start;
$d->safe_psql('postgres', 'CREATE DATABASE app');
$d->safe_psql('app', 'CREATE EXTENSION fencing');
tokens($d, 3, 'app');
$d->command_ok([ 'pg_dump', '-Fc', '-d', 'app', '-f', "$tmp/old.dump" ], 'pg_dump -Fc in epoch 1');

# the database moves on to epoch 2
write_epoch($d, "2\n");
$d->safe_psql('app', 'SELECT fencing.advance_tokens()');
my @epoch2 = tokens($d, 3, 'app');
is($epoch2[0], 2 * 2**40, 'epoch 2 starts at 2 * 2^40');

$d->command_ok([ 'pg_restore', '--clean', '--if-exists', '-d', 'app', "$tmp/old.dump" ],
	'the old dump restored with --clean into the same database');
my ($ret, $out, $err) = $d->psql('app',
	"\\set VERBOSITY verbose\nSELECT fencing.next_token() FROM generate_series(1, 3)");
my %seen = map { $_ => 1 } @epoch2;
my @t = split /\n/, $out;
is_deeply([ grep { $seen{$_} } @t ], [],
	'no token the database issued before the restore is issued again')
  or diag("before the restore: @epoch2; after it: @t");
$d->stop;
done_testing();
