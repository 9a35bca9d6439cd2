# Copyright: fencing extension authors
#
# 005_wal_switch.pl: the first token of a session must not fail when the
# WAL insert position sits exactly at a WAL page boundary, as it always
# does right after a WAL segment switch (pg_switch_wal(), the end of
# pg_basebackup, archive_timeout) until some other WAL is written.
#
# Regression test: the band check in src/token.c used to flush to
# GetXLogInsertRecPtr().  At a page boundary that function returns the
# position just past the page header that has not been written yet
# (segment start + 40 bytes after a switch), which is beyond the end of
# WAL, so XLogFlush() raised
#   ERROR:  xlog flush request 0/3000028 is not satisfied --- flushed only to 0/3000000
# in every new session until another backend wrote WAL.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('walswitch');
$node->init;
$node->append_conf('postgresql.conf',
	"fencing.max_clock_lag = '1h'\n");    # tokens counted one by one
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
my $first = $node->safe_psql('postgres', 'SELECT fencing.next_token()');
like($first, qr/^\d+$/, "first token $first");

my ($insert, $end) = split /\|/,
  $node->safe_psql('postgres',
	'SELECT pg_switch_wal(), pg_current_wal_insert_lsn()');
like($end, qr{^0/\w+028$},
	"after the switch the insert position $end is a segment start + header");

my ($ret, $out, $err) =
  $node->psql('postgres', 'SELECT fencing.next_token()');
is($out, $first + 1, 'a new session gets the next token right after a WAL switch');
is($err, '', 'and no error');

$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT fencing.lease_acquire('L', 'A', '1 hour')");
is($out, $first + 2, 'lease_acquire in a new session right after a WAL switch works too');
is($err, '', 'and no error');

# a band entry (it writes and flushes the band) right after a switch
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
($ret, $out, $err) = $node->psql('postgres',
	'SELECT fencing.advance_tokens(); SELECT fencing.next_token()');
my @lines = split /\n/, $out;
cmp_ok($lines[-1], '>', $first + 2, 'a band entry right after a WAL switch works');
is($err, '', 'and no error');

$node->stop;
done_testing();
