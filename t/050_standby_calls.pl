# Copyright: fencing extension authors
#
# 050_standby_calls.pl: every function that issues a token or writes a
# lease row, called on a hot standby, fails with SQLSTATE 25006 and a
# message that says why, without waiting and without side effects; the
# functions that only compute (fence_allows, fence_advance,
# expect_rows) and the views work there; and nothing changes on the
# primary.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf',
	"fencing.max_clock_lag = '1h'\n");    # tokens counted one by one
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION fencing');

# leases in every state the calls below care about, a guarded table, and
# a refused stale write
my $t_held = $primary->safe_psql('postgres',
	"SELECT fencing.lease_acquire('held', 'alice', '1 hour')");
my $t_free = $primary->safe_psql('postgres',
	"SELECT fencing.lease_acquire('free', 'alice', '1 hour')");
$primary->safe_psql('postgres', "SELECT fencing.lease_release('free', $t_free)");
my $t_exp = $primary->safe_psql('postgres',
	"SELECT fencing.lease_acquire('expired', 'alice', '1 s')");
my $t_el = $primary->safe_psql('postgres',
	"SELECT fencing.election_campaign('elect', 'node-1', 'v1', '1 hour')");
$primary->safe_psql(
	'postgres', q{
	CREATE TABLE jobs (id int PRIMARY KEY, state text, fence bigint);
	CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON jobs
		FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
	-- a literal token, as another cluster's (docs/tokens.md)
	SET fencing.refuse_old_band = off;
	INSERT INTO jobs VALUES (1, 'new', 10);
	RESET fencing.refuse_old_band;
	CREATE ROLE app NOLOGIN;
	GRANT USAGE ON SCHEMA fencing TO app;
});
my ($rc) = $primary->psql('postgres', 'SELECT fencing.fence_advance(10, 5)');
isnt($rc, 0, 'a stale write refused on the primary');

$primary->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b1', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');
# the 1-second lease has expired (on both: they share the clock)
$primary->poll_query_until('postgres',
	"SELECT expires_at < clock_timestamp() FROM fencing.leases WHERE name = 'expired'"
) or die 'the 1-second lease did not expire';

# Everything a call could change, on either node.
sub state_of
{
	my ($node) = @_;
	return $node->safe_psql(
		'postgres', q{
		SELECT (SELECT string_agg(l::text, E'\n' ORDER BY l.name) FROM fencing.leases AS l)
			|| E'\n' || (SELECT s.last_value || ' ' || s.is_called FROM fencing.token_seq AS s)
			|| E'\n' || (SELECT s.last_value || ' ' || s.is_called FROM fencing.token_base AS s)
			|| E'\n' || (SELECT s.last_value || ' ' || s.is_called FROM fencing.token_origin AS s)
			|| E'\n' || (SELECT s.last_value || ' ' || s.is_called FROM fencing.token_band AS s)
			|| E'\n' || (SELECT s.last_value || ' ' || s.is_called FROM fencing.token_witness AS s)
			|| E'\n' || (SELECT string_agg(j::text, ' ' ORDER BY j.id) FROM jobs AS j)
	});
}
my $primary_before = state_of($primary);
my $standby_before = state_of($standby);
is($standby_before, $primary_before, 'the standby has replayed everything');

# Run one call on the standby; return (SQLSTATE, message, hint, seconds).
sub on_standby
{
	my ($sql) = @_;
	my $start = time;
	my ($ret, $out, $err) = $standby->psql('postgres',
		"\\set VERBOSITY verbose\n$sql", on_error_stop => 0);
	my $secs = time - $start;
	my ($state, $msg) = $err =~ /ERROR:\s+([0-9A-Z]{5}): ([^\n]*)/;
	my ($hint) = $err =~ /HINT:\s+([^\n]*)/;
	return ($state // 'none', $msg // $out, $hint // '', $secs);
}

my $not_tokens = 'cannot issue fencing tokens during recovery';
my $hint_tokens = 'Fencing tokens are issued only by a primary server.';
my @refused = (
	[ 'SELECT fencing.next_token()', $not_tokens, $hint_tokens ],
	[
		"SELECT fencing.lease_acquire('new', 'bob', '1 min')",
		'cannot execute fencing.lease_acquire() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_acquire('held', 'alice', '1 min')",
		'cannot execute fencing.lease_acquire() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_acquire('held', 'bob', '1 min')",
		'cannot execute fencing.lease_acquire() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_acquire('free', 'bob', '1 min')",
		'cannot execute fencing.lease_acquire() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_acquire('expired', 'bob', '1 min')",
		'cannot execute fencing.lease_acquire() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_acquire('held', 'bob', '1 min', '10 s')",
		'cannot execute fencing.lease_acquire() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_renew('held', $t_held, '1 min')",
		'cannot execute fencing.lease_renew() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_renew('held', $t_held + 1000, '1 min')",
		'cannot execute fencing.lease_renew() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_release('held', $t_held)",
		'cannot execute fencing.lease_release() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_release('expired', $t_exp)",
		'cannot execute fencing.lease_release() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_lock('held', $t_held)",
		'cannot execute fencing.lease_lock() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_lock('expired', $t_exp)",
		'cannot execute fencing.lease_lock() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_force_release('held')",
		'cannot execute fencing.lease_force_release() in a read-only transaction'
	],
	[
		"SELECT fencing.lease_purge('0')",
		'cannot execute fencing.lease_purge() in a read-only transaction'
	],
	[
		"SELECT fencing.election_campaign('elect', 'node-2', 'v2', '1 min')",
		'cannot execute fencing.election_campaign() in a read-only transaction'
	],
	[
		"SELECT fencing.election_proclaim('elect', $t_el, 'v2')",
		'cannot execute fencing.election_proclaim() in a read-only transaction'
	],
	[
		"SELECT fencing.election_resign('elect', $t_el)",
		'cannot execute fencing.election_resign() in a read-only transaction'
	],
	[ 'SELECT fencing.advance_tokens(1000000)', $not_tokens, $hint_tokens ],
	[ 'SELECT fencing.advance_tokens(0)',       $not_tokens, $hint_tokens ],);
for my $case (@refused)
{
	my ($sql, $want_msg, $want_hint) = @$case;
	my ($state, $msg, $hint, $secs) = on_standby($sql);
	is($state, '25006', "standby: $sql: SQLSTATE 25006");
	is($msg, $want_msg, "standby: $sql: message");
	is($hint, $want_hint, "standby: $sql: hint") if defined $want_hint;
	cmp_ok($secs, '<', 5, "standby: $sql: fails at once, without waiting");
}

# the arguments are still checked first, and the admin check too
my ($state, $msg) = on_standby("SELECT fencing.lease_acquire('', 'bob', '1 min')");
is("$state $msg", '22023 lease name must not be empty',
	'standby: a bad argument is reported as such');
($state, $msg) = on_standby("SET ROLE app; SELECT fencing.lease_purge('0')");
is("$state $msg", '42501 permission denied for fencing.lease_purge',
	'standby: a non-admin role is refused before recovery is noticed');
($state, $msg) = on_standby(
	"SET ROLE app; SELECT fencing.lease_renew('held', $t_held, '1 min')");
is("$state $msg", '25006 cannot execute fencing.lease_renew() in a read-only transaction',
	'standby: another role with the right token: read-only comes first');

# what works on a standby
is( $standby->safe_psql(
		'postgres',
		'SELECT fencing.fence_allows(1, 2), fencing.fence_allows(2, 1), '
		  . 'fencing.fence_allows(2, 2, true), fencing.fence_advance(1, 2), '
		  . 'fencing.fence_advance(2, 2, true), fencing.expect_rows(1)'),
	't|f|t|2|2|1',
	'standby: fence_allows, fence_advance and expect_rows work');
($state, $msg) = on_standby('SELECT fencing.fence_advance(10, 5)');
is("$state $msg", 'LF001 fencing token 5 is stale',
	'standby: a stale fence_advance is refused (LF001)');
($state, $msg) = on_standby('SELECT fencing.expect_rows(0)');
is("$state $msg", 'LF003 fenced write changed 0 of 1 rows',
	'standby: expect_rows reports missing rows');
is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(name || ':' || holder || ':' || state || ':' || token, ',' ORDER BY name) "
		  . 'FROM fencing.lease_status'),
	"elect:node-1:held:$t_el,expired:alice:expired:$t_exp,free:alice:free:$t_free,held:alice:held:$t_held",
	'standby: lease_status is readable and judges expiry');
is( $standby->safe_psql(
		'postgres',
		'SELECT leases, held FROM fencing_monitor.stats'),
	'4|2',
	'standby: fencing_monitor.stats is readable');
is( $standby->safe_psql(
		'postgres',
		"BEGIN; SET LOCAL fencing.token = '42'; SELECT current_setting('fencing.token'); COMMIT;"),
	'42',
	'standby: fencing.token can be declared (there is nothing to write)');
# reading an election and watching a token work without a wait; a wait
# is refused, since no commit on a standby wakes a waiter
is( $standby->safe_psql(
		'postgres',
		"SELECT candidate || ':' || value || ':' || token FROM fencing.election_leader('elect');"
		  . "SELECT candidate FROM fencing.election_observe('elect', NULL, NULL, '0');"
		  . "SELECT reason FROM fencing.lease_watch('held', $t_held);"
		  . "SELECT reason FROM fencing.lease_watch('free', $t_free);"),
	"node-1:v1:$t_el\nnode-1\ncurrent\nreleased",
	'standby: election_leader, election_observe and lease_watch answer without a wait');
for my $sql (
	"SELECT fencing.election_observe('elect', $t_el, 'v1', '1 min')",
	"SELECT fencing.lease_watch('held', $t_held, '1 min')")
{
	my ($state, $msg, $hint, $secs) = on_standby($sql);
	is("$state $msg", '0A000 cannot wait for a lease to change during recovery',
		"standby: $sql: refused");
	cmp_ok($secs, '<', 5, "standby: $sql: at once, without waiting");
}
($state, $msg) = on_standby("UPDATE jobs SET state = 'x' WHERE id = 1");
is("$state $msg", '25006 cannot execute UPDATE in a read-only transaction',
	'standby: a guarded table is read-only like any other');

# nothing changed, on either node
is(state_of($standby), $standby_before, 'nothing changed on the standby');
is(state_of($primary), $primary_before, 'nothing changed on the primary');
my $counter = $primary->safe_psql('postgres',
	'SELECT last_value FROM fencing.token_seq');
is($primary->safe_psql('postgres', 'SELECT fencing.next_token()'),
	$counter + 1, 'the primary issues the very next token: none was used up');
is($primary->safe_psql('postgres', "SELECT fencing.lease_lock('held', $t_held)"),
	't', "the primary's lease is still held with its token");
my $t_after = $primary->safe_psql('postgres',
	"SELECT fencing.lease_acquire('after', 'bob', '1 min')");
cmp_ok($t_after, '>', $counter + 1, 'the primary acquires a lease as before');
$primary->wait_for_catchup($standby);
is( $standby->safe_psql('postgres',
		"SELECT holder || ':' || token FROM fencing.lease_status WHERE name = 'after'"),
	"bob:$t_after", 'the standby replays it as before');

done_testing();
