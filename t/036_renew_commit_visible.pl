# Copyright: fencing extension authors
#
# 036_renew_commit_visible.pl: a renew counts only if its transaction
# commits before the lease's old expiry (LF022 otherwise), judged by a
# clock reading at PRE_COMMIT; but the commit becomes visible only later
# (here: it waits for a synchronous standby that never answers).  A
# watcher or an election_leader that finds the lease expired in between
# must wait for that commit and then see the renewed lease, not say
# "expired" (no leader) and then "current" (the leader) again with the
# same token.  83fed51 and a commit check without the keep lock: the
# watcher answered "expired" at once, and "current" after the commit.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $node = PostgreSQL::Test::Cluster->new('renewvis');
# a synchronous standby is waited for only where WAL senders may run
$node->init(allows_streaming => 1);
# only a session that asks for it (synchronous_commit = on) waits for the
# standby that does not exist
$node->append_conf('postgresql.conf', qq{
synchronous_standby_names = 'nosuch'
synchronous_commit = local
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

sub session
{
	my ($name) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->set_query_timer_restart;
	$s->query_safe("SET application_name = '$name'");
	return $s;
}

sub qs
{
	my ($s, $sql) = @_;
	my $out = $s->query_safe($sql);
	chomp $out;
	return $out;
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
	return ($out, $err);
}

# until the session waits for the name's keep tag (objsubid 17993)
sub waits_for_keep_lock
{
	my ($name) = @_;
	return $node->poll_query_until('postgres', qq{
		SELECT EXISTS (SELECT FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
						WHERE a.application_name = '$name' AND NOT l.granted
						  AND l.locktype = 'advisory' AND l.objsubid = 17993)});
}

my $t = $node->safe_psql('postgres',
	q{SELECT fencing.election_campaign('rv', 'node-1', 'v', '4 s')});
my $old_expiry = $node->safe_psql('postgres',
	q{SELECT expires_at FROM fencing.lease_status WHERE name = 'rv'});

my $r = session('renewer');
qs($r, 'SET synchronous_commit = on');
qs($r, 'BEGIN');
is(qs($r, "SELECT fencing.lease_renew('rv', $t, '1 hour')"),
	't', 'the renew comes before the expiry');
start_query($r, 'COMMIT');
ok( $node->poll_query_until('postgres', q{
		SELECT EXISTS (SELECT FROM pg_stat_activity
						WHERE application_name = 'renewer' AND wait_event = 'SyncRep')}),
	'the commit passed its clock reading and waits for the standby');
ok($node->poll_query_until('postgres', qq{SELECT clock_timestamp() > '$old_expiry'}),
	'the old expiry has passed while the commit waits');

my $w = session('watcher');
start_query($w, "SELECT reason FROM fencing.lease_watch('rv', $t)");
ok(waits_for_keep_lock('watcher'),
	'lease_watch, finding the lease expired, waits for the commit under way');
my $l = session('leader');
start_query($l, q{SELECT candidate FROM fencing.election_leader('rv')});
ok(waits_for_keep_lock('leader'), 'so does election_leader');

# the commit becomes visible: cancel its wait for the standby
$node->safe_psql('postgres', q{
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'renewer'});
my ($out, $err) = finish_query($r);
like($err, qr/committed locally/, 'the renew committed');
($out, $err) = finish_query($w);
is($out, 'current', 'the watcher sees the renewed token, never "expired"');
($out, $err) = finish_query($l);
is($out, 'node-1', 'election_leader sees the leader, never none');
is( $node->safe_psql('postgres',
		"SELECT reason FROM fencing.lease_watch('rv', $t)"),
	'current', 'and so does the next call');

$r->quit;
$w->quit;
$l->quit;
$node->stop;
done_testing();
