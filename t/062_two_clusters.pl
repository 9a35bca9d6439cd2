# Copyright: fencing extension authors
#
# 062_two_clusters.pl: leases in one cluster, the resource in another.
#
# Cluster "locks" hands out leases and tokens.  Cluster "data" holds the
# resource: a table guarded by fencing.fence_guard (writes declare their
# token with SET LOCAL fencing.token, or set the fence column) and a table
# written with fence_advance/expect_rows.  "data" has the extension only
# for these resource-side functions: it never issues a token.  Tokens
# travel with the client: this test plays two workers.
#
# 1. A acquires on "locks" and pauses past its TTL; B acquires (waiting for
#    A's lease to run out) and writes to "data" with its token; A wakes and
#    writes to "data" with its stale token: refused, LF001, on both tables.
# 2. "locks" fails over: an asynchronous standby that missed the tail of
#    its WAL is promoted (as in t/002_promotion.pl, briefly).  C took the
#    lease on the old primary in that tail and wrote to "data"; D takes the
#    lease on the promoted standby, whose copy of the lease table is behind.
#    D's token, from the new timeline's band, beats C's at "data"; C's next
#    write is refused.  The old primary, restarted alone (split brain),
#    still issues tokens, and in clock mode they follow its clock (the clock
#    floor, docs/tokens.md#a-primary-that-comes-back): above D's, so "data"
#    takes C's newest write and refuses D's next one.  The resource orders
#    the two histories by when each token was issued; it never takes a
#    token below one it has seen.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $started = time;

my $locks = PostgreSQL::Test::Cluster->new('locks');
$locks->init(allows_streaming => 1);
$locks->append_conf('postgresql.conf', 'checkpoint_timeout = 1h');
$locks->start;
$locks->safe_psql('postgres', 'CREATE EXTENSION fencing');

my $data = PostgreSQL::Test::Cluster->new('data');
$data->init;
# fencing preloaded: its counters count on every major
$data->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
$data->start;
$data->safe_psql('postgres', q{
	CREATE EXTENSION fencing;
	-- guarded: every write must carry a token not older than the row's fence
	CREATE TABLE files (path text PRIMARY KEY, content text, fence bigint);
	CREATE TRIGGER files_guard BEFORE INSERT OR UPDATE OR DELETE ON files
		FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
	INSERT INTO files VALUES ('/report', 'empty', 0);
	-- written with fence_advance in the SET list
	CREATE TABLE counters (id int PRIMARY KEY, n int NOT NULL, last_writer text, fence bigint);
	INSERT INTO counters VALUES (1, 0, NULL, NULL);
});

# a worker's session on "locks"
sub acquire
{
	my ($node, $holder, $ttl, $wait) = @_;
	$wait //= '0';
	return $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('report-writer', '$holder', '$ttl', wait => '$wait')");
}

# a worker's writes to "data", carrying its token; '' when accepted, else
# the error (with its SQLSTATE)
sub write_guarded
{
	my ($who, $token) = @_;
	my ($rc, $out, $err) = $data->psql('postgres', qq{\\set VERBOSITY verbose
		BEGIN;
		SET LOCAL fencing.token = '$token';
		UPDATE files SET content = 'written by $who' WHERE path = '/report';
		COMMIT;});
	return $rc == 0 ? '' : $err;
}

sub write_advance
{
	my ($who, $token) = @_;
	my ($rc, $out, $err) = $data->psql('postgres', qq{\\set VERBOSITY verbose
		WITH w AS (
			UPDATE counters
			   SET n = n + 1, last_writer = '$who',
				   fence = fencing.fence_advance(fence, $token, allow_same => true)
			 WHERE id = 1 RETURNING 1)
		SELECT fencing.expect_rows(count(*)) FROM w;});
	return $rc == 0 ? '' : $err;
}

sub resource_state
{
	return $data->safe_psql('postgres', q{
		SELECT f.content || ' (fence ' || f.fence || '); counter ' || c.n || ' by '
		       || c.last_writer || ' (fence ' || c.fence || ')'
		  FROM files f, counters c});
}

# ---------------------------------------------------------------------------
# 1. A pauses past its TTL, B takes over, A's late writes are refused

my $ta = acquire($locks, 'A', '1 second');
like($ta, qr/^\d+$/, "A acquired the lease on locks: token $ta");
is(write_guarded('A', $ta), '', 'A writes the guarded file on data with its token');
is(write_advance('A', $ta), '', 'A bumps the counter on data with its token');

# A pauses (a GC pause, a frozen VM); B waits on "locks" for the lease
my $tb = acquire($locks, 'B', '1 hour', '30 seconds');
cmp_ok($tb, '>', $ta, "B waited out A's lease and took it over: token $tb");
is($locks->safe_psql('postgres', "SELECT fencing.lease_lock('report-writer', $ta)"),
	'f', "A's token is no longer current on locks (A does not know)");
is(write_guarded('B', $tb), '', "B writes the guarded file on data with its token");
is(write_advance('B', $tb), '', 'B bumps the counter on data');
is(write_advance('B', $tb), '', 'B writes again with the same token (allow_same)');

# A wakes up and writes, not knowing it lost the lease
like(write_guarded('A', $ta), qr/ERROR:  LF001: fencing token $ta is stale/,
	"A's late write to the guarded table is refused: LF001");
like(write_advance('A', $ta), qr/ERROR:  LF001: fencing token $ta is stale/,
	"A's late counter update is refused: LF001");
my ($rc, $out, $err) = $data->psql('postgres', q{\set VERBOSITY verbose
	UPDATE files SET content = 'no token' WHERE path = '/report'});
like($err, qr/LF004: UPDATE on fenced table "files" carries no fencing token/,
	'a write without a token is refused too: LF004');
is(resource_state(), "written by B (fence $tb); counter 3 by B (fence $tb)",
	"data holds B's writes only");
is($data->safe_psql('postgres',
		'SELECT fence_advance_refusals + fence_guard_refusals FROM fencing_monitor.stats'),
	'2', "data's fencing_monitor.stats count the two refused stale writes");
is($data->safe_psql('postgres',
		"SELECT count(*) FROM fencing.leases"), '0',
	'data holds no lease: it only checks tokens');
is($locks->safe_psql('postgres',
		"SELECT holder || ' ' || state FROM fencing.lease_status WHERE name = 'report-writer'"),
	'B held', 'locks: B holds the lease');

# ---------------------------------------------------------------------------
# 2. "locks" fails over to an asynchronous standby that missed its WAL tail

$locks->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('locks_standby');
$standby->init_from_backup($locks, 'b1', has_streaming => 1);
$standby->start;
$locks->wait_for_catchup($standby);

# B releases; its release reaches the standby
is($locks->safe_psql('postgres', "SELECT fencing.lease_release('report-writer', $tb)"),
	't', 'B releases the lease');
$locks->wait_for_catchup($standby);

# cut the standby off: what follows is the tail it never receives
$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->reload;
$standby->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
  or die 'the WAL receiver did not stop';
$locks->safe_psql('postgres', 'SELECT fencing.next_token() FROM generate_series(1, 300)');
my $tc = acquire($locks, 'C', '1 hour');
cmp_ok($tc, '>', $tb + 300, "C acquired the lease on the old primary: token $tc");
is(write_guarded('C', $tc), '', 'C writes to data with it');
is(write_advance('C', $tc), '', 'C bumps the counter');
$locks->stop('immediate');

my $standby_seq = $standby->safe_psql('postgres', 'SELECT last_value FROM fencing.token_seq');
cmp_ok($standby_seq, '<', $tc,
	"the standby missed the tail: its counter $standby_seq < C's token $tc");
is($standby->safe_psql('postgres',
		"SELECT holder || ' ' || state FROM fencing.lease_status WHERE name = 'report-writer'"),
	'B free', "the standby's lease table never saw C's lease");

$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion did not finish';

my $td = acquire($standby, 'D', '1 hour');
cmp_ok($td, '>', $tc, "D acquired on the promoted standby: token $td > C's $tc");
is($td, $standby->safe_psql('postgres', 'SELECT last_value FROM fencing.token_base'),
	"D's token starts the promoted standby's new band");
is(write_guarded('D', $td), '', "D's write to the guarded table on data is accepted");
is(write_advance('D', $td), '', "D's counter update is accepted");
like(write_guarded('C', $tc), qr/LF001: fencing token $tc is stale/,
	"C's next write (old primary's token) is refused");
like(write_advance('C', $tc), qr/LF001: fencing token $tc is stale/,
	"and so is its counter update");

# split brain: the old primary comes back alone and keeps issuing tokens
$locks->start;
my $split = acquire($locks, 'C', '1 hour');
like($split, qr/^\d+$/,
	"C, still on the old primary, re-acquires its lease there: token $split");
cmp_ok($split, '>', $td,
	"the old primary's new token ($split) follows its clock: above D's ($td)");
is(write_guarded('C', $split), '', "data takes C's write with the newer token");
like(write_guarded('D', $td), qr/LF001: fencing token $td is stale/,
	"and refuses D's next write, now older");
like(write_guarded('C', $tc), qr/LF001: fencing token $tc is stale/,
	"C's token from before the failover stays refused");
is(resource_state(), "written by C (fence $split); counter 5 by D (fence $td)",
	"data holds C's newest write and D's counter");
is($data->safe_psql('postgres',
		'SELECT fence_advance_refusals + fence_guard_refusals FROM fencing_monitor.stats'),
	'6', "data counted six refused stale writes");

$locks->stop;
$standby->stop;
$data->stop;
note sprintf('062_two_clusters took %d s', time - $started);
done_testing();
