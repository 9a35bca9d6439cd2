# Copyright: fencing extension authors
#
# 009_guard_apply.pl: fence_guard and logical replication apply (the
# write-path matrix's replication row; the other paths are in
# sql/resource_write_paths*.sql).
#
# One cluster, two databases: "pub" publishes two guarded tables, "sub"
# subscribes to them (copy_data off, a slot made beforehand: a subscription
# to the same cluster cannot make its own).  On the subscriber, "acc" keeps
# its guard as created (ENABLE: triggers do not fire in apply) and
# "acc_always" has it ENABLE ALWAYS.  The subscriber issues tokens of its
# own too, so the publisher's tokens are from before its band.
#
#   1. Applied INSERT, UPDATE (a new token, and the same token again: the
#      fence stays), DELETE: accepted in both tables, with no declared
#      token and no band check (the publisher judged them).
#   2. A newer local write on the subscriber, then an older one from the
#      publisher: "acc" takes the older row (apply is not judged there);
#      "acc_always" refuses it (LF001 in the apply worker, which retries)
#      and keeps the newer row.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('apply');
$node->init(allows_streaming => 'logical');
$node->start;

my $schema = q{
CREATE EXTENSION fencing;
CREATE TABLE acc (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TABLE acc_always (id int PRIMARY KEY, v text NOT NULL, fence bigint);
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON acc
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON acc_always
	FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
};
for my $db ('pub', 'sub')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, $schema);
}
$node->safe_psql('sub', 'ALTER TABLE acc_always ENABLE ALWAYS TRIGGER guard');

my @t = map { $node->safe_psql('pub', 'SELECT fencing.next_token()') } 1 .. 5;
# the subscriber's own band starts above every token of the publisher
my $sub_token = $node->safe_psql('sub', 'SELECT fencing.next_token()');
cmp_ok($sub_token, '>', $t[-1], 'the subscriber issues tokens above the publisher\'s');

$node->safe_psql('pub',
	"CREATE PUBLICATION p FOR TABLE acc, acc_always;
	 SELECT pg_create_logical_replication_slot('s', 'pgoutput');");
my $connstr = $node->connstr . ' dbname=pub';
$node->safe_psql('sub',
	"CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION p
	 WITH (create_slot = false, slot_name = 's', copy_data = false)");

sub on_pub
{
	my ($token, $sql) = @_;
	$node->safe_psql('pub',
		"BEGIN; SET LOCAL fencing.token = '$token'; $sql; COMMIT;");
	$node->wait_for_catchup('s');
}

sub rows
{
	my ($table) = @_;
	my %name = (map({ $t[$_] => "t$_" } 0 .. $#t), '' => 'NULL');
	my $out = $node->safe_psql('sub',
		"SELECT string_agg(id || ':' || v || ':' || coalesce(fence::text, ''), ' ' ORDER BY id) FROM $table");
	$out =~ s/:(\d*)(?= |$)/':' . ($name{$1} \/\/ $1)/ge;
	return $out;
}

# 1. applied writes, each judged by the publisher only
on_pub($t[0], 'INSERT INTO acc VALUES (1, \'one\', NULL), (2, \'two\', NULL);
	 INSERT INTO acc_always VALUES (1, \'one\', NULL), (2, \'two\', NULL)');
is(rows('acc') . ' / ' . rows('acc_always'), '1:one:t0 2:two:t0 / 1:one:t0 2:two:t0',
	'applied INSERT: both tables, stamped with the publisher\'s token');
on_pub($t[1], 'UPDATE acc SET v = \'one by t1\' WHERE id = 1;
	 UPDATE acc_always SET v = \'one by t1\' WHERE id = 1');
is(rows('acc_always'), '1:one by t1:t1 2:two:t0',
	'applied UPDATE with a newer fence: accepted in apply (ENABLE ALWAYS), no declared token, no band check');
on_pub($t[1], 'UPDATE acc SET v = \'one by t1 again\' WHERE id = 1;
	 UPDATE acc_always SET v = \'one by t1 again\' WHERE id = 1');
is(rows('acc_always'), '1:one by t1 again:t1 2:two:t0',
	'applied UPDATE that leaves the fence: accepted in apply');
on_pub($t[1], 'DELETE FROM acc WHERE id = 2; DELETE FROM acc_always WHERE id = 2');
is(rows('acc') . ' / ' . rows('acc_always'), '1:one by t1 again:t1 / 1:one by t1 again:t1',
	'applied DELETE: accepted in both tables');

# the same writes made locally on the subscriber are judged, band included
my ($rc, $out, $err) = $node->psql('sub',
	"BEGIN; SET LOCAL fencing.token = '$t[2]'; UPDATE acc_always SET v = 'local' WHERE id = 1; COMMIT;");
like($err, qr/lease of fencing token $t[2] was lost at failover/,
	'a local write with a publisher token on the subscriber: LF005 (its band)');

# 2. a newer local write on the subscriber (a resource fenced by the
# publisher's tokens: refuse_old_band off), then an older applied one
$node->safe_psql('sub',
	"SET fencing.refuse_old_band = off;
	 UPDATE acc SET v = 'local by t4', fence = $t[4] WHERE id = 1;
	 UPDATE acc_always SET v = 'local by t4', fence = $t[4] WHERE id = 1;");
on_pub($t[3], 'UPDATE acc SET v = \'pub by t3\' WHERE id = 1');
is(rows('acc'), '1:pub by t3:t3',
	'ENABLE (the default): the applied row with the older fence t3 replaces the local t4 row: apply is not judged');

my $log_offset = -s $node->logfile;
$node->safe_psql('pub',
	"BEGIN; SET LOCAL fencing.token = '$t[3]'; UPDATE acc_always SET v = 'pub by t3' WHERE id = 1; COMMIT;");
$node->wait_for_log(qr/ERROR:  fencing token $t[3] is stale/, $log_offset);
pass('ENABLE ALWAYS: the apply worker refuses the older row (LF001)');
is(rows('acc_always'), '1:local by t4:t4', 'and the subscriber keeps the newer row');

$node->safe_psql('sub', 'ALTER SUBSCRIPTION s DISABLE');
$node->poll_query_until('pub',
	"SELECT NOT active FROM pg_replication_slots WHERE slot_name = 's'")
  or die 'the apply worker did not stop';
$node->safe_psql('sub',
	'ALTER SUBSCRIPTION s SET (slot_name = NONE); DROP SUBSCRIPTION s');
$node->safe_psql('pub', "SELECT pg_drop_replication_slot('s')");
$node->stop;
done_testing();
