# Copyright: fencing extension authors
#
# 902_redt_epoch_pending_dump.pl (red team, currently FAILS): epoch mode,
# a dump taken while token_origin is 0 ("pending": lease rows arrived from
# elsewhere with tokens above the counter, and no token was issued since;
# logical apply, COPY and a superuser's INSERT take the same path,
# lease_arrival.c).  The dumped origin is 0, so after pg_restore classify()
# never sees a foreign origin nor a witness mismatch (both are checked only
# for origin != 0): the state is BAND_ARRIVED, which band_floor() lets stay
# in the same epoch (needs_new = false).  The restored database reissues
# the tokens the source issued after the dump: in the same database
# (pg_restore --clean) and in another one.  t/014_token_epoch.pl covers the
# same restore with origin != 0 (LF007 there).
#
# README: "Tokens never repeat and never go backwards within one database's
# history: across ... dump and restore"; docs/tokens.md: "after pg_restore
# (into another database, or --clean into the same one) no token is issued
# until the file holds an epoch greater than the dumped one".
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $d = PostgreSQL::Test::Cluster->new('d');
$d->init;
$d->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
PostgreSQL::Test::Utils::append_to_file($d->data_dir . '/fencing_epoch', "1\n");
$d->start;
$d->safe_psql('postgres', 'CREATE DATABASE app');
$d->safe_psql('app', 'CREATE EXTENSION fencing');
my @before = tokens($d, 3, 'app');

# a lease row arrives with a token above the counter (as from a publisher)
$d->safe_psql('app', q{
INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at)
VALUES ('arrived', 'x', 'postgres',
        (SELECT last_value FROM fencing.token_seq) + 1000, now(), now() + '1 hour')});
is($d->safe_psql('app', 'SELECT last_value FROM fencing.token_origin'), '0',
	'token_origin is pending after the arrival');
$d->command_ok([ 'pg_dump', '-Fc', '-d', 'app', '-f', "$tmp/app.dump" ], 'pg_dump -Fc');
my @after_dump = tokens($d, 3, 'app');
note "tokens before the dump: @before; after it: @after_dump";

$d->safe_psql('postgres', 'CREATE DATABASE copy');
$d->command_ok([ 'pg_restore', '-d', 'copy', '--exit-on-error', "$tmp/app.dump" ],
	'pg_restore into another database');
$d->command_ok([ 'pg_restore', '--clean', '--if-exists', '-d', 'app', "$tmp/app.dump" ],
	'pg_restore --clean into the same database');

for my $db (qw(app copy))
{
	my ($ret, $out, $err) = $d->psql($db,
		"\\set VERBOSITY verbose\nSELECT fencing.next_token() FROM generate_series(1, 3)");
	my @t = split /\n/, $out;
	my %seen = map { $_ => 1 } @after_dump;
	my @repeated = grep { $seen{$_} } @t;
	is_deeply(\@repeated, [], "$db: no token issued after the dump is issued again")
	  or diag("$db issued @t");
	like($err, qr/LF007/, "$db: the restored state is in epoch 1: no token until a greater epoch (LF007)");
}
$d->stop;
done_testing();
