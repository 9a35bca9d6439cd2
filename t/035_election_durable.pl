# Copyright: fencing extension authors
#
# 035_election_durable.pl: every election call that writes forces a
# synchronous commit, as the lease functions do, so an acknowledged
# campaign, proclaim or resignation survives a crash whatever
# synchronous_commit says.
#
# crash_node() runs with synchronous_commit = off and a 10 s
# wal_writer_delay, so an ordinary commit's WAL stays unflushed for a
# while.  Right after each call, the flush LSN must have reached the
# insert LSN; a plain UPDATE of a table is the control, and must not have.
# Then an acknowledged proclaim followed by an immediate stop must be there
# after the restart, while an acknowledged plain UPDATE (the control) is
# lost.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $node = crash_node('eldur');
$node->safe_psql('postgres', q{
	CREATE TABLE ctl (id int PRIMARY KEY, v int);
	INSERT INTO ctl VALUES (1, 0);
	CHECKPOINT;
});

my $flushed = 'SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()';
my $out = $node->safe_psql('postgres', qq{
	SELECT fencing.election_campaign('dur', 'node-1', 'v1', '1 hour') AS t \\gset
	$flushed;
	UPDATE ctl SET v = v + 1;
	$flushed;
	SELECT fencing.election_proclaim('dur', :t, 'v2');
	$flushed;
	UPDATE ctl SET v = v + 1;
	$flushed;
	SELECT fencing.election_resign('dur', :t);
	$flushed;
	UPDATE ctl SET v = v + 1;
	$flushed;
	SELECT fencing.election_campaign('dur', 'node-2', 'v3', '1 hour', wait => '1 s') > :t;
	$flushed;
});
is($out, join("\n", qw(t f t t f t t f t t)),
	'campaign, proclaim, resign and a waiting campaign flush their commit; a plain UPDATE does not');

# an acknowledged proclaim survives an immediate stop; an acknowledged
# UPDATE of the control table, committed after it, does not
$node->safe_psql('postgres', 'CHECKPOINT');
my $before = $node->safe_psql('postgres', 'SELECT v FROM ctl');
$node->safe_psql('postgres', q{
	SELECT fencing.election_proclaim('dur', token, 'after the checkpoint')
	  FROM fencing.election_leader('dur');
});
$node->safe_psql('postgres', 'UPDATE ctl SET v = v + 1');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', q{SELECT candidate || ': ' || value FROM fencing.election_leader('dur')}),
	'node-2: after the checkpoint', 'the acknowledged proclaim survived the crash');
is($node->safe_psql('postgres', 'SELECT v FROM ctl'), $before,
	'control: the acknowledged plain UPDATE was lost (its commit was not flushed)');

$node->stop;
done_testing();
