# Copyright: fencing extension authors
#
# 006_restore_same_db.pl: histories that come back into the same database.
# A dump restored into the database it was taken from (pg_restore --clean,
# or --data-only with sessions still connected, with or without
# --disable-triggers) must not reissue tokens the database issued after the
# dump; a session that issued tokens before such a restore must notice it.
# DROP EXTENSION loses the history: the new installation's first band
# starts at the clock, above it; fencing.advance_tokens(floor) adds a floor
# by hand.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use List::Util qw(max min);
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $tmp  = PostgreSQL::Test::Utils::tempdir;

my $node = PostgreSQL::Test::Cluster->new('same');
$node->init;
$node->append_conf('postgresql.conf', $FencingTest::count_tokens_conf);
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION fencing');

sub max_token
{
	my ($n) = @_;
	return $node->safe_psql('app',
		"SELECT max(fencing.next_token()) FROM generate_series(1, $n)");
}

# ---- pg_restore --clean into the same database
my $at_dump = max_token(100);
$node->command_ok([ 'pg_dump', '-Fc', '-d', 'app', '-f', "$tmp/app.dump" ],
	"dump taken at token $at_dump");
my $after_dump = max_token(100);
is($after_dump, $at_dump + 100, 'the database issued 100 more after the dump');

$node->command_ok(
	[ 'pg_restore', '--clean', '--if-exists', '-d', 'app', "$tmp/app.dump" ],
	'pg_restore --clean into the same database');
my $first = $node->safe_psql('app', 'SELECT fencing.next_token()');
cmp_ok($first, '>', $after_dump,
	'after restoring into its own database, tokens exceed those issued after the dump');
is($first, band_start($node, 'app'), 'the restored history starts a new band');

# ---- a data-only restore while a session that issued tokens stays connected
my $live = $node->background_psql('app');
my $live_max = $live->query_safe(
	'SELECT max(fencing.next_token()) FROM generate_series(1, 10)');
chomp $live_max;
$node->command_ok(
	[ 'pg_dump', '-Fc', '--data-only', '-d', 'app', '-f', "$tmp/data.dump" ],
	'data-only dump');
my $before_restore = max_token(300);
$node->command_ok(
	[ 'pg_restore', '--data-only', '-d', 'app', "$tmp/data.dump" ],
	'pg_restore --data-only into the same database, session still connected');
my $live_next = $live->query_safe('SELECT fencing.next_token()');
chomp $live_next;    # 16's BackgroundPsql keeps the newline
cmp_ok($live_next, '>', $before_restore,
	'the connected session notices the restore and does not reissue tokens');
is($live_next, band_start($node, 'app'), 'it moved on to yet another band');
my $other = $node->safe_psql('app', 'SELECT fencing.next_token()');
cmp_ok($other, '>', $live_next, 'a new session continues above it');
$live->quit;

# ---- the same with --disable-triggers: the lease rows arrive unseen, but
# the restore rewrites the token state, which the witness notices
$node->safe_psql('app', "SELECT fencing.lease_acquire('dt', 'A', '1 hour')");
$node->command_ok(
	[ 'pg_dump', '-Fc', '--data-only', '-d', 'app', '-f', "$tmp/data2.dump" ],
	'data-only dump with a lease');
$node->safe_psql('app', 'DELETE FROM fencing.leases');
my $before_dt = max_token(200);
$node->command_ok(
	[ 'pg_restore', '--data-only', '--disable-triggers', '-d', 'app', "$tmp/data2.dump" ],
	'pg_restore --data-only --disable-triggers into the same database');
my $dt_next = $node->safe_psql('app', 'SELECT fencing.next_token()');
cmp_ok($dt_next, '>', $before_dt,
	'after a restore with triggers disabled, tokens exceed those issued after the dump');
is($dt_next, band_start($node, 'app'), 'a new band');

# ---- DROP EXTENSION loses the history; advance_tokens restores the floor
my $high = $node->safe_psql('app', 'SELECT fencing.next_token()');
$node->safe_psql('app', 'DROP EXTENSION fencing');
$node->safe_psql('app', 'CREATE EXTENSION fencing');
cmp_ok($node->safe_psql('app', 'SELECT fencing.next_token()'),
	'>', $high, 'a new installation starts its first band above the old history');
$node->safe_psql('app', "SELECT fencing.advance_tokens($high + 1000000000)");
cmp_ok($node->safe_psql('app', 'SELECT fencing.next_token()'),
	'>', $high + 1000000000, 'after advance_tokens(floor), tokens exceed the floor');
my $now = $node->safe_psql('app', 'SELECT fencing.next_token()');
$node->safe_psql('app', 'SELECT fencing.advance_tokens(5)');
cmp_ok($node->safe_psql('app', 'SELECT fencing.next_token()'),
	'>', $now, 'advance_tokens never moves tokens backwards');

# only admins may move the floor
$node->safe_psql('app', 'CREATE ROLE plain LOGIN; GRANT USAGE ON SCHEMA fencing TO plain');
my ($ret, $out, $err) = $node->psql('app',
	"SET ROLE plain; SELECT fencing.advance_tokens(1)");
like($err, qr/permission denied for fencing.advance_tokens/,
	'a plain role cannot call advance_tokens');

done_testing();
