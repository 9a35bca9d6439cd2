# Copyright: fencing extension authors
#
# 012_lost_tail.pl: the resource lives in the database that issues the
# tokens (the job-queue recipe's case), and an asynchronous failover loses
# the newest fenced write.  The row's fence moves back, so a stale holder
# whose token lies between the surviving fence and the lost one would be
# accepted by comparing numbers.  After the promotion every token issued
# before the new band is refused in that database (LF005, "lost at
# failover"), and the holders acquire again.  A database of the same
# cluster that never issued a token compares numbers only, and
# fencing.refuse_old_band = off turns the refusal off where a database
# also guards resources with another cluster's tokens.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', 'CREATE DATABASE resonly');
$p->safe_psql('resonly', 'CREATE EXTENSION fencing');
$p->safe_psql('postgres', q{
CREATE EXTENSION fencing;
CREATE TABLE jobs (id int PRIMARY KEY, state text, fence bigint);
INSERT INTO jobs VALUES (1, 'new', NULL);
CREATE TRIGGER guard BEFORE UPDATE ON jobs FOR EACH ROW
	EXECUTE FUNCTION fencing.fence_guard('fence');
});
$p->safe_psql('resonly', q{
CREATE TABLE r (id int PRIMARY KEY, fence bigint);
INSERT INTO r VALUES (1, NULL);
});

sub take_over
{
	my ($node, $holder) = @_;
	$node->safe_psql('postgres', "SELECT fencing.lease_force_release('job-1')");
	return acquire($node, 'job-1', $holder);
}

my $ta = acquire($p, 'job-1', 'A');
$p->safe_psql('postgres', "UPDATE jobs SET state = 'by A', fence = $ta WHERE id = 1");
$p->backup('b');
my $s = PostgreSQL::Test::Cluster->new('s');
$s->init_from_backup($p, 'b', has_streaming => 1);
$s->start;
$p->wait_for_catchup($s);

# the tail the standby never receives
$s->append_conf('postgresql.conf', "primary_conninfo = ''");
$s->reload;
$s->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
  or die 'the WAL receiver did not stop';
my $tc = take_over($p, 'C');    # C will stall before writing
my $tb = take_over($p, 'B');
is($p->safe_psql('postgres', "UPDATE jobs SET state = 'by B', fence = $tb WHERE id = 1 RETURNING state"),
	'by B', "B's write (token $tb) is acknowledged on the old primary");
my ($ret, $out, $err) = $p->psql('postgres',
	"UPDATE jobs SET state = 'by C', fence = $tc WHERE id = 1");
like($err, qr/fencing token $tc is stale/, 'C, stale, is refused there');
$p->stop('immediate');

$s->promote;
$s->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion did not finish';
is($s->safe_psql('postgres', 'SELECT fence FROM jobs WHERE id = 1'),
	$ta, "the failover lost B's write: the row's fence is back at A's $ta");
cmp_ok($tc, '>', $ta, "C's stale token $tc lies between the fence and the lost one");

# C wakes up and writes: comparing numbers would accept it
($ret, $out, $err) = $s->psql('postgres',
	"UPDATE jobs SET state = 'by C', fence = $tc WHERE id = 1");
like($err, qr/ERROR:  lease of fencing token $tc was lost at failover/,
	"C's write is refused after the failover (LF005)");
like($err, qr/DETAIL:  Token $tc was issued before this database's token band, which starts at (\d+)/,
	'the detail names the token and the band start');
my ($band) = $err =~ /which starts at (\d+)/;
like($err, qr/HINT:  Stop writing with this token and acquire the lease again/,
	'the hint says what to do');
($ret, $out, $err) = $s->psql('postgres',
	"UPDATE jobs SET state = 'by C', fence = fencing.fence_advance(fence, $tc) WHERE id = 1");
like($err, qr/lost at failover/, 'so is the same write through fence_advance');
($ret, $out, $err) = $s->psql('postgres',
	"SELECT fencing.lease_lock('job-1', $ta)");
like($err, qr/lease of fencing token $ta was lost at failover/,
	"A's lease row survived, but lease_lock refuses its token");
($ret, $out, $err) = $s->psql('postgres',
	"SELECT fencing.lease_renew('job-1', $ta, '1 hour')");
like($err, qr/lost at failover/, 'and lease_renew');
$s->psql('postgres',
	"DO \$\$ BEGIN PERFORM fencing.lease_lock('job-1', $ta); "
	  . "EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'sqlstate %', SQLSTATE; END \$\$",
	stderr => \my $notice);
like($notice, qr/sqlstate LF005/, 'SQLSTATE LF005');
is($s->safe_psql('postgres', 'SELECT state || \':\' || fence FROM jobs WHERE id = 1'),
	"by A:$ta", 'the row is unchanged');

# the holder acquires again and writes
my $ta2 = acquire($s, 'job-1', 'A');
cmp_ok($ta2, '>=', $band, "A acquires again: token $ta2 from the new band");
is($s->safe_psql('postgres', "UPDATE jobs SET state = 'by A again', fence = $ta2 WHERE id = 1 RETURNING state"),
	'by A again', 'and writes with it');
cmp_ok($ta2, '>', $tb, "above the lost token $tb too");

# a database that never issued a token compares numbers only
is($s->safe_psql('resonly', "UPDATE r SET fence = fencing.fence_advance(fence, $tc) WHERE id = 1 RETURNING fence"),
	$tc, 'a database of the same cluster that never issued a token accepts any newer token');
# the way out for a database that issues tokens and guards foreign ones
($ret, $out, $err) = $s->psql('postgres',
	"SELECT fencing.fence_advance(NULL, $tc)");
like($err, qr/lost at failover/, 'the issuing database refuses an old token by default');
is($s->safe_psql('postgres',
		"SET fencing.refuse_old_band = off; SELECT fencing.fence_advance(NULL, $tc)"),
	$tc, 'fencing.refuse_old_band = off makes it compare numbers only');

$s->stop;
done_testing();
