# Copyright: fencing extension authors
#
# 017_partial_wal.pl: the token state when WAL ends part-way through one of
# its changes.  A raise of the counter to the clock, history that arrives
# (a lease row with a token above the counter) and a band entry
# (advance_tokens) each write several sequence records; a standby that is
# promoted, or the primary after a crash, may have WAL up to any one of
# them (another backend's commit, or the WAL writer, flushes the first
# records of a change that has not flushed its last).  src/token.c's header
# comment states what classify() must find for every such prefix; this
# test builds every prefix of the three changes and checks what it
# promises:
#
#   promoted (a new timeline): the database still knows the history as its
#   own, so a holder whose token was issued before the failover is refused
#   (LF005), also where the failover lost a newer holder's write and the
#   fence went back (comparing numbers would accept the stale write);
#
#   crash recovery (the same timeline): tokens go on above every token
#   returned before the crash, and a raise is no band entry: a live lease
#   still checks true after it, and after the next token.
#
# And in epoch mode, the band entry that follows a restore (the first
# token after pg_restore --clean): after a crash at any of its records the
# state is still a restore, so with the epoch file back at the dump's
# epoch no token of the source's is issued again (LF007).
#
# The prefixes are made exactly: pg_waldump lists the records, and a copy
# of the stopped primary's data directory has its WAL zeroed from the
# record where the prefix ends (no background writer and no checkpoint
# after the change, so the data files hold none of the records cut off).
# The copy is then started as a standby and promoted, or started as is.
use strict;
use warnings;

use File::Path qw(rmtree);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->append_conf('postgresql.conf', q{
fencing.max_clock_lag = '1ms'
bgwriter_lru_maxpages = 0
checkpoint_timeout = '1h'
max_wal_size = '1GB'
autovacuum = off
});
$p->start;
$p->safe_psql('postgres', q{
CREATE EXTENSION fencing;
CREATE TABLE res (id int PRIMARY KEY, fence bigint, writer text);
INSERT INTO res VALUES (1, NULL, NULL);
});

sub write_res
{
	my ($node, $token, $writer) = @_;
	return $node->psql('postgres',
		"UPDATE res SET fence = fencing.fence_advance(fence, $token), writer = '$writer' WHERE id = 1 RETURNING writer"
	);
}

sub take_over
{
	my ($holder) = @_;
	$p->safe_psql('postgres', "SELECT fencing.lease_force_release('L')");
	return acquire($p, 'L', $holder);
}

# W writes; X takes the lease over and stalls before its write; H holds a
# lease of its own for the whole test
my $tw = acquire($p, 'L', 'W');
my ($ret, $out, $err) = write_res($p, $tw, 'W');
is($out, 'W', "W writes with $tw");
my $tx = take_over('X');
my $th = acquire($p, 'M', 'H');
my @returned = ($tw, $tx, $th);
$p->safe_psql('postgres', 'CHECKPOINT');

sub insert_lsn
{
	my ($node, $db) = @_;
	return $node->safe_psql($db // 'postgres', 'SELECT pg_current_wal_insert_lsn()');
}

sub lsn_value
{
	my ($hi, $lo) = split m{/}, shift;
	return hex($hi) * 2**32 + hex($lo);
}

# the token state's records between two LSNs: [ LSN, sequence ]
sub token_records
{
	my ($node, $db, $from, $to) = @_;
	my %relfilenode = map {
		($node->safe_psql($db, "SELECT pg_relation_filenode('fencing.$_')") => $_)
	} qw(token_seq token_base token_origin token_band token_band_offset token_witness);
	my ($rc, $dump) = run_cmd(60, 'pg_waldump', '-p', $node->data_dir . '/pg_wal',
		'-s', $from, '-e', $to);
	is($rc, 0, "pg_waldump lists the records from $from to $to") or diag($dump);
	my @records;
	for my $line (split /\n/, $dump)
	{
		next unless $line =~ /rmgr: Sequence .*lsn: ([0-9A-F]+\/[0-9A-F]+).* rel \d+\/\d+\/(\d+)/;
		push @records, [ $1, $relfilenode{$2} ] if $relfilenode{$2};
	}
	note 'token state records: ' . join(', ', map { "$_->[0] $_->[1]" } @records);
	return @records;
}

# every prefix: WAL ends just before each record, or after the last one
sub cuts_of
{
	my ($node, $records, $end, $after) = @_;
	my @cuts;
	for my $c ((map { $_->[0] } @$records), $end)
	{
		my ($file, $offset) = split /\|/,
		  $node->safe_psql('postgres', "SELECT file_name, file_offset FROM pg_walfile_name_offset('$c')");
		my $what = lsn_value($c) >= lsn_value($end) ? $after
		  : 'before the ' . (grep { $_->[0] eq $c } @$records)[0]->[1] . ' record at ' . $c;
		push @cuts, { lsn => $c, file => $file, offset => $offset, what => $what };
	}
	return @cuts;
}

# 1. a raise: the counter lags the clock by more than max_clock_lag
my $lsn0 = insert_lsn($p);
$p->poll_query_until('postgres',
	"SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint - last_value > 5000 FROM fencing.token_seq")
  or die 'the counter did not fall behind the clock';
my $tr = $p->safe_psql('postgres', 'SELECT fencing.next_token()');
my $raise_end = insert_lsn($p);
# 2. history arrives: a lease row with a token above the counter
$p->safe_psql('postgres', q{
INSERT INTO fencing.leases (name, holder, holder_role, token, acquired_at, expires_at)
VALUES ('arrived', 'Z', 'postgres', (SELECT last_value FROM fencing.token_seq) + 1000,
        now(), now() + '1 hour')});
my $arrived = $p->safe_psql('postgres', "SELECT token FROM fencing.leases WHERE name = 'arrived'");
# 3. a band entry
$p->safe_psql('postgres', 'SELECT fencing.advance_tokens()');
my $ops_end = insert_lsn($p);
# Y takes the lease over and writes: every prefix above loses this
my $ty = take_over('Y');
($ret, $out, $err) = write_res($p, $ty, 'Y');
is($out, 'Y', "Y, in the new band, writes with $ty on the primary");

# the records of the three changes that touch the token state
my @records = token_records($p, 'postgres', $lsn0, $ops_end);
cmp_ok(scalar(@records), '>=', 7, 'the three changes wrote at least 7 token state records');
my @cuts = cuts_of($p, \@records, $ops_end, 'after all three changes');
$p->stop('immediate');
my $pristine = "$tmp/pristine";
copy_dir($p->data_dir, $pristine);

# cp -a: PostgreSQL::Test::RecursiveCopy is not in 13's test modules
sub copy_dir
{
	my ($from, $to) = @_;
	my ($rc, $out) = run_cmd(120, 'cp', '-a', $from, $to);
	die "cp -a $from $to: $out" if $rc != 0;
	return;
}

# $node's data directory as a crash at $cut left it
sub restore_cut
{
	my ($node, $pristine, $cut) = @_;
	rmtree($node->data_dir);
	copy_dir($pristine, $node->data_dir);
	my $wal = $node->data_dir . '/pg_wal';
	opendir(my $dh, $wal) or die "$wal: $!";
	for my $f (readdir $dh)
	{
		unlink "$wal/$f" or die "$wal/$f: $!"
		  if $f =~ /^[0-9A-F]{24}$/ && $f gt $cut->{file};
	}
	closedir $dh;
	my $seg = "$wal/$cut->{file}";
	my $size = -s $seg;
	open my $fh, '+<', $seg or die "$seg: $!";
	binmode $fh;
	seek($fh, $cut->{offset}, 0) or die "$seg: $!";
	print $fh "\0" x ($size - $cut->{offset});
	close $fh or die "$seg: $!";
	return;
}

sub returned_before
{
	my ($cut) = @_;
	my @t = @returned;
	# a token is returned once WAL is flushed past its records
	push @t, $tr if lsn_value($cut->{lsn}) >= lsn_value($raise_end);
	return @t;
}

sub max_of { my $m = shift; for (@_) { $m = $_ if $_ > $m } return $m; }

# the arrival's first record: from there on a band entry is due
my ($arrival_mark) = grep { lsn_value($_) >= lsn_value($raise_end) }
  map { $_->[1] eq 'token_band' ? $_->[0] : () } @records;
# the band entry's new start: refused below from there on
my ($entry_base) = map { $_->[1] eq 'token_base' ? $_->[0] : () } @records;

for my $cut (@cuts)
{
	# ---- a standby whose WAL ends here is promoted
	restore_cut($p, $pristine, $cut);
	PostgreSQL::Test::Utils::append_to_file($p->data_dir . '/standby.signal', '');
	$p->start;
	$p->promote;
	$p->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'promotion did not finish';
	is($p->safe_psql('postgres', 'SELECT writer FROM res WHERE id = 1'), 'W',
		"promoted, WAL ends $cut->{what}: the failover lost Y's write");
	($ret, $out, $err) = write_res($p, $tx, 'X');
	like($err, qr/ERROR:  lease of fencing token $tx was lost at failover/,
		"promoted, WAL ends $cut->{what}: X's token from before the failover is refused (LF005)");
	my $next = $p->safe_psql('postgres', 'SELECT fencing.next_token()');
	my $max = max_of(returned_before($cut));
	cmp_ok($next, '>', $max, "promoted, WAL ends $cut->{what}: the next token $next exceeds $max");
	$p->stop;

	# ---- the primary recovers from a crash with WAL ending here
	restore_cut($p, $pristine, $cut);
	$p->start;
	my $lost = qr/lease of fencing token $th was lost at failover/;
	($ret, $out, $err) = $p->psql('postgres', "SELECT fencing.lease_lock('M', $th)");
	if (lsn_value($cut->{lsn}) > lsn_value($entry_base))
	{
		like($err, $lost,
			"crash, WAL ends $cut->{what}: advance_tokens() wrote its band's start (LF005)");
	}
	else
	{
		is($out, 't', "crash, WAL ends $cut->{what}: H's live lease checks true");
	}
	$next = $p->safe_psql('postgres', 'SELECT fencing.next_token()');
	cmp_ok($next, '>', $max, "crash, WAL ends $cut->{what}: the next token $next exceeds $max");
	($ret, $out, $err) = $p->psql('postgres', "SELECT fencing.lease_lock('M', $th)");
	if (lsn_value($cut->{lsn}) <= lsn_value($arrival_mark))
	{
		# inside the raise, or before or after it: no band entry was due
		is($out, 't',
			"crash, WAL ends $cut->{what}: a raise is no band entry, H's lease still checks true after the next token");
	}
	else
	{
		like($err, $lost,
			"crash, WAL ends $cut->{what}: history had arrived, so the next token entered a band (LF005)");
	}
	$p->stop;
}

# ---- epoch mode: the band entry that follows a restore
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
my $e = PostgreSQL::Test::Cluster->new('e');
$e->init(allows_streaming => 1);
$e->append_conf('postgresql.conf', qq{
fencing.epoch_file = 'fencing_epoch'
bgwriter_lru_maxpages = 0
checkpoint_timeout = '1h'
max_wal_size = '1GB'
autovacuum = off
});
write_epoch($e, "1\n");
$e->start;
$e->safe_psql('postgres', 'CREATE DATABASE app');
$e->safe_psql('app', 'CREATE EXTENSION fencing');
tokens($e, 3, 'app');
$e->command_ok([ 'pg_dump', '-Fc', '-d', 'app', '-f', "$tmp/app.dump" ], 'epoch 1: pg_dump');
my @after_dump = tokens($e, 3, 'app');
$e->command_ok([ 'pg_restore', '--clean', '--if-exists', '-d', 'app', "$tmp/app.dump" ],
	'pg_restore --clean into the same database');
write_epoch($e, "2\n");
$e->safe_psql('postgres', 'CHECKPOINT');
$lsn0 = insert_lsn($e, 'app');
my $first = $e->safe_psql('app', 'SELECT fencing.next_token()');
is($first, 2 * 2**40, 'with epoch 2, the first token after the restore enters a band at 2 * 2^40');
my $entry_end = insert_lsn($e, 'app');
$e->safe_psql('app', 'SELECT fencing.next_token()');    # flushes WAL past the entry
@records = token_records($e, 'app', $lsn0, $entry_end);
cmp_ok(scalar(@records), '>=', 6, 'the band entry after the restore wrote at least 6 records');
@cuts = cuts_of($e, \@records, $entry_end, 'after the band entry');
$e->stop('immediate');
my $pristine_e = "$tmp/pristine_e";
copy_dir($e->data_dir, $pristine_e);
my %after_dump = map { $_ => 1 } @after_dump;
# the entry's last record: token_band, the new band
my ($entry_last) = (reverse map { $_->[1] eq 'token_band' ? $_->[0] : () } @records);
for my $cut (@cuts)
{
	restore_cut($e, $pristine_e, $cut);
	# the epoch file goes back to the dump's epoch
	write_epoch($e, "1\n");
	$e->start;
	($ret, $out, $err) = $e->psql('app',
		"\\set VERBOSITY verbose\nSELECT fencing.next_token() FROM generate_series(1, 3)");
	is_deeply([ grep { $after_dump{$_} } split /\n/, $out ], [],
		"crash, WAL ends $cut->{what}: no token the source issued after the dump comes again");
	if (lsn_value($cut->{lsn}) > lsn_value($entry_last))
	{
		like($out, qr/^\d+/, "crash, WAL ends $cut->{what}: the band of epoch 2 goes on");
	}
	else
	{
		like($err, qr/LF007/,
			"crash, WAL ends $cut->{what}: still a restore, no token in epoch 1 (LF007)");
	}
	$e->stop;
}
done_testing();
