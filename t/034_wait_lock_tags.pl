# Copyright: fencing extension authors
#
# 034_wait_lock_tags.pl: the waiters of a lease queue in the lock manager
# under a 64-bit hash of its name.  Two names with one hash share a queue,
# so a name crafted to share another lease's hash lets its waiter stand at
# the head of that lease's queue, and the lease's own waiters time out
# while it is free.  The hash is keyed with a secret of the cluster, so no
# role can craft such a name (docs/security.md).
#
# 'mallory-0001,/>{oUD]#r}#' was solved for, in a few seconds, to have the
# hash of 'coll_victim' under 83fed51's hash_bytes_extended(name, 0) (the
# last 12 bytes of a name invert its final mixing), which is what this
# test shows failing there: checked with
#   SELECT hashtextextended('coll_victim', 0)
#        = hashtextextended('mallory-0001,/>{oUD]#r}#', 0);   -- true
# on a little-endian machine.  With a keyed hash the two names are two
# leases like any other.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('locktags');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

my $victim = 'coll_victim';
my $crafted = 'mallory-0001,/>{oUD]#r}#';

sub session
{
	my ($name) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->set_query_timer_restart;
	$s->query_safe("SET application_name = '$name'");
	return $s;
}

sub start_query
{
	my ($s, $sql) = @_;
	$s->query_until(qr/__started__\n/, "\\echo __started__\n$sql;\n");
	return;
}

sub finish_query
{
	my ($s) = @_;
	my $out = $s->query(';');
	my $err = $s->{stderr};
	$s->{stderr} = '';
	chomp $out;
	return $out . $err;
}

isnt(
	$node->safe_psql('postgres',
		"SELECT fencing._lease_lock_tag('$victim') = fencing._lease_lock_tag('$crafted')"),
	't', 'the crafted name does not share the lease\'s hash');
is( $node->safe_psql('postgres',
		"SELECT has_function_privilege('public', 'fencing._lease_lock_tag(text)', 'EXECUTE')"),
	'f', 'the hash is not shown to PUBLIC');

# the crafted name's holder, and a waiter for it that waits long: on a
# shared queue it would be the head for its whole wait
my $mallory = $node->safe_psql('postgres',
	"SELECT fencing.lease_acquire('$crafted', 'mallory', '1 h')");
my $squatter = session('squatter');
start_query($squatter,
	"SELECT fencing.lease_acquire('$crafted', 'squatter', '1 min', wait => '60 s')");
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE application_name = 'squatter'
		   AND wait_event_type = 'Extension' AND wait_event = 'Extension'}),
	'a waiter for the crafted name sleeps at the head of its queue');

# the victim's lease, and its waiter
my $held = $node->safe_psql('postgres',
	"SELECT fencing.lease_acquire('$victim', 'holder', '1 h')");
my $waiter = session('waiter');
start_query($waiter,
	"SELECT fencing.lease_acquire('$victim', 'waiter', '1 min', wait => '20 s') IS NOT NULL");
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE application_name = 'waiter' AND wait_event_type IN ('Extension', 'Lock')}),
	'the lease\'s waiter waits');

my $t0 = time;
is($node->safe_psql('postgres', "SELECT fencing.lease_release('$victim', $held)"),
	't', 'the lease is released');
is(finish_query($waiter), 't', 'its waiter gets it');
my $el = time - $t0;
cmp_ok($el, '<', 10,
	sprintf('at once (%.2f s), not behind the other name\'s waiter', $el));

$node->safe_psql('postgres', "SELECT fencing.lease_release('$crafted', $mallory)");
like(finish_query($squatter), qr/^\d+$/, 'the other name\'s waiter is served too');
$_->quit for ($squatter, $waiter);
$node->stop;
done_testing();
