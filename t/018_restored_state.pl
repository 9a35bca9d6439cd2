# Copyright: fencing extension authors
#
# 018_restored_state.pl: the token state comes back from a dump, in epoch
# mode, and through pg_upgrade.
#
# Epoch mode must never issue a token of an epoch a database used before,
# whatever state a restore brings back:
#
#   - a dump taken while a band entry was due (lease rows had arrived with
#     a token above the counter, and no token was issued since), restored
#     with --clean into the same database and into another one: the
#     restored state is a restore like any other, LF007 until a greater
#     epoch, no token issued after the dump comes again;
#   - an old dump restored with --clean after the database moved on to a
#     greater epoch (the LF002 hint's procedure, as a promotion through the
#     hook does): the epoch the database used last is not in the dump, and
#     the restore must not go back to it;
#   - the same dump restored with --create (a new database of the same
#     name), and DROP EXTENSION and CREATE EXTENSION: the new installation
#     must not start in the epoch the old one used; another database of
#     the cluster is not held back by it.
#
# pg_upgrade dumps and restores the token state, and starts a cluster with
# a new system identifier: the first token after it enters a band above
# every token before (clock mode), leases held across it are refused
# (LF005) and acquired again, and in epoch mode no token is issued until
# the file holds a greater epoch (docs/tokens.md).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $E = 2**40;
my $tmp = PostgreSQL::Test::Utils::tempdir;

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

# ($tokens, $stderr) of n next_token() calls, verbose errors
sub try_tokens
{
	my ($node, $db, $n) = @_;
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSELECT fencing.next_token() FROM generate_series(1, $n)");
	return ([ split /\n/, $out ], $err);
}

sub repeated
{
	my ($before, $after) = @_;
	my %seen = map { $_ => 1 } @$before;
	return [ grep { $seen{$_} } @$after ];
}

my $d = PostgreSQL::Test::Cluster->new('d');
$d->init;
$d->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'\n"
	  . $FencingTest::count_tokens_conf);
write_epoch($d, "1\n");
$d->start;
for my $db (qw(app app2))
{
	$d->safe_psql('postgres', "CREATE DATABASE $db");
	$d->safe_psql($db, 'CREATE EXTENSION fencing');
	is_deeply([ tokens($d, 2, $db) ], [ $E, $E + 1 ],
		"$db: a fresh install in epoch 1 starts at 2^40 (each database has its own epochs)");
}

# ---- a dump taken while a band entry is due
$d->safe_psql('app', q{
INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at)
VALUES ('arrived', 'x', 'postgres', (SELECT last_value FROM fencing.token_seq) + 1000,
        now(), now() + '1 hour')});
$d->command_ok([ 'pg_dump', '-Fc', '-d', 'app', '-f', "$tmp/due.dump" ],
	'pg_dump while a band entry is due (a lease row arrived above the counter)');
my @after_dump = tokens($d, 3, 'app');
is($after_dump[0], $E + 1002, 'the entry that was due starts above the arrived token, in epoch 1');
$d->safe_psql('postgres', 'CREATE DATABASE copy');
$d->command_ok([ 'pg_restore', '-d', 'copy', '--exit-on-error', "$tmp/due.dump" ],
	'restored into another database');
$d->command_ok([ 'pg_restore', '--clean', '--if-exists', '-d', 'app', "$tmp/due.dump" ],
	'restored with --clean into the same database');
for my $db (qw(app copy))
{
	my ($t, $err) = try_tokens($d, $db, 3);
	is_deeply($t, [], "$db: no token from the restored state in epoch 1");
	like($err, qr/LF007: fencing epoch 1 is not greater than the epoch 1 of the current token band/,
		"$db: LF007 until the file holds a greater epoch");
}
write_epoch($d, "2\n");
for my $db (qw(app copy))
{
	my @t = tokens($d, 3, $db);
	is_deeply(\@t, [ 2 * $E .. 2 * $E + 2 ], "$db: with epoch 2, tokens start at 2 * 2^40");
	is_deeply(repeated(\@after_dump, \@t), [], "$db: no token issued after the dump comes again");
}

# ---- an old dump restored after the database moved on to a greater epoch
$d->command_ok([ 'pg_dump', '-Fc', '-d', 'app', '-f', "$tmp/old.dump" ], 'pg_dump in epoch 2');
write_epoch($d, "3\n");
$d->safe_psql('app', 'SELECT fencing.advance_tokens()');
my @epoch3 = tokens($d, 3, 'app');
is_deeply(\@epoch3, [ 3 * $E .. 3 * $E + 2 ], 'the database moves on to epoch 3 (advance_tokens)');
$d->command_ok([ 'pg_restore', '--clean', '--if-exists', '-d', 'app', "$tmp/old.dump" ],
	'the epoch-2 dump restored with --clean into the same database');
my ($t, $err) = try_tokens($d, 'app', 3);
is_deeply($t, [], 'no token in epoch 3, which the database used before the restore');
like($err, qr/LF007: fencing epoch 3 is not greater than the epoch 3 this database used before/,
	'LF007 names the epoch the database used');
write_epoch($d, "4\n");
my @t = tokens($d, 3, 'app');
is_deeply(\@t, [ 4 * $E .. 4 * $E + 2 ], 'with epoch 4, tokens start at 4 * 2^40');
is_deeply(repeated(\@epoch3, \@t), [], 'no token of epoch 3 comes again');
is(slurp_file($d->data_dir . '/fencing_epochs/' . unpack('H*', 'app')),
	"4\n", 'the data directory keeps the greatest epoch the database used, by its name');

# ---- the same dump restored with --create: a new database of the same name
$d->command_ok([ 'pg_restore', '--clean', '--create', '-d', 'postgres', "$tmp/old.dump" ],
	'the epoch-2 dump restored with --clean --create (DROP and CREATE DATABASE)');
($t, $err) = try_tokens($d, 'app', 1);
like($err, qr/LF007: fencing epoch 4 is not greater than the epoch 4 this database used before/,
	'the recreated database does not go back to epoch 4 either');

# ---- DROP EXTENSION, CREATE EXTENSION
$d->safe_psql('app', 'DROP EXTENSION fencing; CREATE EXTENSION fencing');
($t, $err) = try_tokens($d, 'app', 1);
like($err, qr/LF007: fencing epoch 4 is not greater than the epoch 4 this database used before/,
	'after DROP and CREATE EXTENSION: LF007, not epoch 4 again');
$d->safe_psql('app2', 'DROP EXTENSION fencing; CREATE EXTENSION fencing');
write_epoch($d, "5\n");
is_deeply([ tokens($d, 1, 'app') ], [ 5 * $E ], 'with epoch 5: 5 * 2^40');
is_deeply([ tokens($d, 1, 'app2') ], [ 5 * $E ],
	'app2, reinstalled too, starts in epoch 5, which it never used');

# a damaged record is an error, not a lower floor
my $app2 = unpack('H*', 'app2');
PostgreSQL::Test::Utils::append_to_file($d->data_dir . "/fencing_epochs/$app2", 'x');
$d->safe_psql('app2', 'DROP EXTENSION fencing; CREATE EXTENSION fencing');
($t, $err) = try_tokens($d, 'app2', 1);
like($err, qr/XX001: fencing epoch floor file "fencing_epochs\/$app2" does not hold a valid epoch/,
	'a damaged epoch floor file: XX001, no token');
$d->stop;

# ---- pg_upgrade
sub upgrade
{
	my ($name, $epoch) = @_;
	my $old = PostgreSQL::Test::Cluster->new("${name}_old");
	$old->init;
	if ($epoch)
	{
		$old->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
		write_epoch($old, "1\n");
	}
	$old->start;
	$old->safe_psql('postgres', 'CREATE EXTENSION fencing');
	my $th = acquire($old, 'L', 'H');
	my @before = (tokens($old, 3), $th);
	$old->stop;

	my $new = PostgreSQL::Test::Cluster->new("${name}_new");
	$new->init;
	# the binaries the test runs (13 has no config_data)
	my ($bindir) = grep { -x "$_/pg_upgrade" } split /:/, $ENV{PATH};
	my (undef, $help) = run_cmd(60, 'pg_upgrade', '--help');
	my $no_sync = $help =~ /--no-sync/ ? '--no-sync' : '';
	my $cwd = PostgreSQL::Test::Utils::tempdir;
	my ($rc, $log) = run_cmd(600, 'sh', '-c',
		qq{cd "$cwd" && pg_upgrade $no_sync -b "$bindir" -B "$bindir" }
		  . qq{-d "} . $old->data_dir . qq{" -D "} . $new->data_dir . qq{" }
		  . qq{-p } . $old->port . qq{ -P } . $new->port . qq{ -s "} . $old->host . qq{"});
	is($rc, 0, "$name: pg_upgrade") or diag($log);
	if ($epoch)
	{
		$new->append_conf('postgresql.conf', "fencing.epoch_file = 'fencing_epoch'");
		write_epoch($new, "1\n");
	}
	$new->start;
	return ($new, $th, @before);
}

my ($new, $th, @before) = upgrade('clock', 0);
is($new->safe_psql('postgres', "SELECT fencing.lease_lock('L', $th)"), 't',
	'clock mode, after pg_upgrade: before any token, the lease held across it checks true (numbers only)');
my @after = tokens($new, 3);
cmp_ok($after[0], '>', (sort { $b <=> $a } @before)[0],
	'the first token after pg_upgrade is above every token before it');
is($after[0], band_start($new), 'it starts a band: pg_upgrade restores the token state');
my ($ret, $out);
($ret, $out, $err) = $new->psql('postgres', "SELECT fencing.lease_lock('L', $th)");
like($err, qr/lease of fencing token $th was lost at failover/,
	'the lease held across pg_upgrade is refused from then on (LF005)');
my $tn = acquire($new, 'L', 'H');
is($new->safe_psql('postgres', "SELECT fencing.lease_lock('L', $tn)"), 't',
	'and its holder acquires it again');
$new->stop;

($new, $th, @before) = upgrade('epoch', 1);
($t, $err) = try_tokens($new, 'postgres', 1);
like($err, qr/LF007: fencing epoch 1 is not greater than the epoch 1 of the current token band/,
	'epoch mode, after pg_upgrade: LF007 until the file holds a greater epoch');
write_epoch($new, "2\n");
is_deeply([ tokens($new, 2) ], [ 2 * $E, 2 * $E + 1 ], 'with epoch 2: 2 * 2^40');
$new->stop;
done_testing();
