# Copyright: fencing extension authors
#
# 071_citus.pl: fenced resources on Citus distributed tables (issue 18).
#
# A Citus cluster on 127.0.0.1: a coordinator that holds the leases and
# issues the tokens, and two workers that hold the shards of the
# resources.  CREATE EXTENSION fencing on the coordinator reaches the
# workers by itself.  Citus comes from test/citus.sh (built once into
# /var/cache/fencing-citus, installed into a private copy of the server);
# without it the test skips, loudly.
#
#   1. The seed's story across shards, in every resource-side form: router
#      UPDATE with fence_advance, fence_allows, INSERT ... ON CONFLICT DO
#      UPDATE with fence_advance, the fence_guard trigger (explicit fence,
#      and the declared token with citus.propagate_set_commands = local),
#      the job-queue recipe with its table distributed
#      (examples/job_queue_citus.sql).  Each stale write is refused on the
#      worker (LF001, both tokens) and the coordinator returns that error.
#   2. A multi-shard fenced UPDATE (two-phase commit across both workers),
#      and one that meets a single stale row: refused, and no shard changed.
#   3. Concurrent writers on 32 shards (64 rows), fresh tokens from the
#      coordinator, racing, each write followed by a late one with the
#      writer's previous token (a holder that lost its lease); every
#      accepted write appends its token to the row's history in the same
#      UPDATE.  The checker: each row's history
#      strictly increases (no stale write accepted anywhere), every
#      acknowledged write is in it, the fence is its last token, and the
#      refusals the clients saw are the refusals the workers counted.
#   3b. A worker with synchronous_commit = off crashes (immediate stop):
#      the acknowledged fenced writes on its shards are there after restart.
#   4. A worker fails over to an asynchronous standby that missed the tail:
#      the shard's fence moves back to what the standby had, so a holder
#      whose token lies between is accepted once, exactly as in the
#      single-server lost-tail case (what holds and what does not:
#      docs/citus.md).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $t_begin = time;
my $inst    = $ENV{FENCING_CITUS_INSTALL} // '';
if ($inst eq '' || !-f "$inst/lib/citus.so")
{
	my $why = $ENV{FENCING_CITUS_SKIP}
	  || 'FENCING_CITUS_INSTALL names no installation with Citus (run through test/run.sh)';
	diag("SKIPPING t/071_citus.pl: $why");
	plan skip_all => $why;
}
my $tmp = PostgreSQL::Test::Utils::tempdir;

sub new_node
{
	my ($name, %init) = @_;
	my $n = PostgreSQL::Test::Cluster->new($name, install_path => $inst);
	$n->init(%init);
	$n->append_conf(
		'postgresql.conf', q{
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'citus,fencing'
max_prepared_transactions = 50
max_connections = 100
log_statement = none
});
	return $n;
}

my $coord = new_node('coord');
my $w1    = new_node('w1', allows_streaming => 1);
my $w2    = new_node('w2');
$_->start for $coord, $w1, $w2;
$_->safe_psql('postgres', 'CREATE EXTENSION citus') for $coord, $w1, $w2;
$coord->safe_psql(
	'postgres', qq{
SELECT citus_set_coordinator_host('127.0.0.1', ${\ $coord->port});
SELECT citus_add_node('127.0.0.1', ${\ $w1->port});
SELECT citus_add_node('127.0.0.1', ${\ $w2->port});
CREATE EXTENSION fencing;
});
for my $w ($w1, $w2)
{
	is($w->safe_psql('postgres',
			"SELECT extversion FROM pg_extension WHERE extname = 'fencing'"),
		'1.0', 'CREATE EXTENSION fencing on the coordinator reached worker ' . $w->port);
}

$coord->safe_psql(
	'postgres', q{
SET citus.shard_count = 32;
CREATE TABLE files (id int PRIMARY KEY, body text, fence bigint,
                    hist bigint[] NOT NULL DEFAULT '{}');
SELECT create_distributed_table('files', 'id');
INSERT INTO files (id, body) SELECT g, 'init' FROM generate_series(1, 64) g;
});
is( $coord->safe_psql('postgres',
		"SELECT count(DISTINCT nodeport) || ' nodes, ' || count(*) || ' shards' FROM citus_shards WHERE table_name = 'files'::regclass"),
	'2 nodes, 32 shards',
	'files: 32 shards on the two workers');

# worker port of a row of files
sub node_of
{
	my ($table, $id) = @_;
	return $coord->safe_psql('postgres',
		"SELECT nodeport FROM citus_shards WHERE shardid = get_shard_id_for_distribution_column('$table', $id)");
}

sub psql_coord
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $coord->psql('postgres', $sql, stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	return ($rc, $out, $err);
}

# the stale write must fail with LF001 naming both tokens, raised on a worker
sub refused_on_worker
{
	my ($sql, $stale, $fence, $what) = @_;
	my ($rc, $out, $err) = psql_coord("\\set VERBOSITY verbose\n$sql");
	my ($port) = $err =~ /while executing command on 127\.0\.0\.1:(\d+)/;
	ok( $rc != 0
		  && $err =~ /ERROR:  LF001: fencing token $stale is stale/
		  && $err =~ /already written with token $fence\./
		  && defined $port,
		"$what: LF001 naming tokens $stale and $fence, raised on worker "
		  . ($port // '?'))
	  or diag("rc $rc\n$out\n$err");
	return $port // 0;
}

# ---------------------------------------------------------------------------
# 1. the seed's story across shards

my $a = $coord->safe_psql('postgres',
	"SELECT fencing.lease_acquire('storage', 'worker-a', '1 s')");
$coord->poll_query_until('postgres',
	"SELECT state = 'expired' FROM fencing.lease_status WHERE name = 'storage'")
  or die 'lease did not expire';
my $b = $coord->safe_psql('postgres',
	"SELECT fencing.lease_acquire('storage', 'worker-b', '60 s')");
ok($b > $a, "A got token $a, B took over with $b");

my @story_ids = (1 .. 8);
my %ports = map { node_of('files', $_) => 1 } @story_ids;
is(scalar(keys %ports), 2, 'the story rows lie on both workers');

for my $id (@story_ids)
{
	is( $coord->safe_psql('postgres',
			"UPDATE files SET body = 'by b', fence = fencing.fence_advance(fence, $b) WHERE id = $id RETURNING fence"),
		$b, "row $id: B's router UPDATE with fence_advance is accepted");
}
my %seen;
for my $id (@story_ids)
{
	$seen{ refused_on_worker(
		"UPDATE files SET body = 'by a (stale)', fence = fencing.fence_advance(fence, $a) WHERE id = $id",
		$a, $b, "row $id: A's stale router UPDATE") } = 1;
}
is(scalar(grep { $_ } keys %seen), 2, 'refusals came back from both workers');
is( $coord->safe_psql('postgres',
		"SELECT count(*) FROM files WHERE id <= 8 AND body = 'by b' AND fence = $b"),
	'8', "B's writes stand on every row");

# fence_allows: 0 rows for A
my ($rc, $out, $err) = psql_coord(
	"UPDATE files SET body = 'by a (stale)', fence = $a WHERE id = 2 AND fencing.fence_allows(fence, $a)");
is("$rc|$out", '0|', 'fence_allows: A matches no row');
is( $coord->safe_psql('postgres',
		"UPDATE files SET body = 'by b, check', fence = $b WHERE id = 9 AND fencing.fence_allows(fence, $b) RETURNING fence"),
	$b, 'fence_allows: B writes a row of its own');

# INSERT ... ON CONFLICT DO UPDATE with fence_advance
is( $coord->safe_psql('postgres',
		"WITH u AS (INSERT INTO files (id, body, fence) VALUES (3, 'upsert by b', $b), (100, 'new by b', $b)
		 ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body,
		   fence = fencing.fence_advance(files.fence, EXCLUDED.fence, true)
		 RETURNING 1) SELECT count(*) FROM u"),
	'2', 'INSERT ... ON CONFLICT with fence_advance: B upserts');
refused_on_worker(
	"INSERT INTO files (id, body, fence) VALUES (3, 'upsert by a (stale)', $a)
	 ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body,
	   fence = fencing.fence_advance(files.fence, EXCLUDED.fence, true)",
	$a, $b, "INSERT ... ON CONFLICT: A's stale upsert");
is($coord->safe_psql('postgres', 'SELECT body, fence FROM files WHERE id = 3'),
	"upsert by b|$b", "B's upsert stands");

# the guard trigger
($rc, $out, $err) = psql_coord(
	q{CREATE TABLE g (id int PRIMARY KEY, body text, fence bigint);
	  SET citus.shard_count = 8;
	  SELECT create_distributed_table('g', 'id');
	  CREATE TRIGGER g_guard BEFORE INSERT OR UPDATE OR DELETE ON g
	    FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');});
like($err, qr/triggers are not supported on distributed tables/,
	'fence_guard: Citus refuses triggers on distributed tables by default');
$coord->safe_psql(
	'postgres', q{
SET citus.enable_unsafe_triggers = on;
CREATE TRIGGER g_guard BEFORE INSERT OR UPDATE OR DELETE ON g
  FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
INSERT INTO g SELECT x, 'init', NULL FROM generate_series(1, 16) x;
});
is( $coord->safe_psql('postgres',
		"SELECT count(*) FROM run_command_on_shards('g', \$\$SELECT count(*) FROM pg_trigger WHERE tgrelid = '%s'::regclass AND tgname LIKE 'g_guard%%'\$\$) WHERE result = '1'"),
	$coord->safe_psql('postgres', "SELECT count(*) FROM citus_shards WHERE table_name = 'g'::regclass"),
	'fence_guard: with citus.enable_unsafe_triggers the trigger is on every shard (named g_guard_<shard>)');
is( $coord->safe_psql('postgres',
		"WITH u AS (UPDATE g SET body = 'by b', fence = $b WHERE id IN (1, 2, 3, 4) RETURNING 1) SELECT count(*) FROM u"),
	'4', 'fence_guard: B sets the fence');
refused_on_worker("UPDATE g SET body = 'by a (stale)', fence = $a WHERE id = 2",
	$a, $b, "fence_guard: A's stale UPDATE");
# the declared token travels to the workers only with propagate_set_commands
($rc, $out, $err) = psql_coord(
	"BEGIN; SET LOCAL fencing.token = '$b'; UPDATE g SET body = 'declared' WHERE id = 1; COMMIT;");
like($err, qr/LF004|carries no fencing token/,
	'fence_guard: SET LOCAL fencing.token does not reach the worker by default: refused (LF004), fails closed');
($rc, $out, $err) = psql_coord(
	"SET citus.propagate_set_commands = 'local';
	 BEGIN; SET LOCAL fencing.token = '$b'; UPDATE g SET body = 'declared by b' WHERE id = 1; COMMIT;");
is($rc, 0, "fence_guard: with citus.propagate_set_commands = 'local' B's declared token is used")
  or diag($err);
refused_on_worker(
	"SET citus.propagate_set_commands = 'local';
	 BEGIN; SET LOCAL fencing.token = '$a'; UPDATE g SET body = 'declared by a' WHERE id = 1; COMMIT;",
	$a, $b, "fence_guard: A's stale declared token");
is($coord->safe_psql('postgres', 'SELECT body, fence FROM g WHERE id = 1'),
	"declared by b|$b", 'fence_guard: B\'s declared write stands');

# the job-queue recipe, its table distributed
$coord->command_ok(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d',
		$coord->connstr('postgres'), '-f', 'examples/job_queue.sql', '-c',
		"SET citus.shard_count = 8; SELECT create_distributed_table('job_queue.jobs', 'id')", '-f',
		'examples/job_queue_citus.sql'
	],
	'job queue: recipe loaded, jobs distributed, Citus functions loaded');
my $job = $coord->safe_psql('postgres',
	"SELECT job_queue.enqueue('mail', '{\"to\": \"ann\"}')");
$coord->safe_psql('postgres', "SELECT job_queue.enqueue('mail', '{}') FROM generate_series(1, 5)");
my ($jid, $ja) = split /\|/, $coord->safe_psql('postgres',
	"SELECT id, token FROM job_queue.claim('mail', 1, '1 s')");
is($jid, $job, "job queue: A claims job $job with token $ja");
$coord->poll_query_until('postgres',
	"SELECT lease_until < clock_timestamp() FROM job_queue.jobs WHERE id = $job")
  or die 'claim did not expire';
my ($jid2, $jb) = split /\|/, $coord->safe_psql('postgres',
	"SELECT id, token FROM job_queue.claim('mail', 1, '1 min')");
ok($jid2 == $job && $jb > $ja, "job queue: B reclaims job $job with token $jb");
$coord->safe_psql('postgres', "SELECT job_queue.heartbeat($job, $jb, '1 min')");
$coord->safe_psql('postgres',
	"SELECT job_queue.complete($job, $jb, '{\"sent_by\": \"B\"}')");
refused_on_worker("SELECT job_queue.complete($job, $ja, '{\"sent_by\": \"A\"}')",
	$ja, $jb, "job queue: A's stale completion");
refused_on_worker("SELECT job_queue.heartbeat($job, $ja, '1 min')",
	$ja, $jb, "job queue: A's stale heartbeat");
is( $coord->safe_psql('postgres',
		"SELECT state, result->>'sent_by', fence FROM job_queue.jobs WHERE id = $job"),
	"done|B|$jb", "job queue: the job keeps B's result");
# two claims never return the same job; the rest of the recipe runs
is( $coord->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT token) FROM job_queue.claim('mail', 3, '1 min')"),
	'3|3', 'job queue: a claim of 3 jobs across shards, 3 tokens');
is( $coord->safe_psql('postgres',
		"SELECT count(*) FROM job_queue.claim('mail', 5, '1 min')"),
	'2', 'job queue: the next claim gets the 2 jobs left');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM job_queue.reap()'),
	'0', 'job queue: reap runs (nothing to reap)');

# ---------------------------------------------------------------------------
# 2. multi-shard fenced UPDATE

my $m1 = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
is( $coord->safe_psql('postgres',
		"WITH u AS (UPDATE files SET body = 'all', fence = fencing.fence_advance(fence, $m1), hist = hist || ${m1}::bigint RETURNING 1) SELECT count(*) FROM u"),
	'65', "multi-shard UPDATE with fence_advance($m1): all 65 rows on both workers");
refused_on_worker(
	"UPDATE files SET body = 'all by a (stale)', fence = fencing.fence_advance(fence, $a)",
	$a, $m1, 'multi-shard UPDATE with a stale token');
my $m2 = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
my $m3 = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
$coord->safe_psql('postgres',
	"UPDATE files SET body = 'one', fence = fencing.fence_advance(fence, $m3), hist = hist || ${m3}::bigint WHERE id = 40");
refused_on_worker(
	"UPDATE files SET body = 'all by m2', fence = fencing.fence_advance(fence, $m2), hist = hist || ${m2}::bigint",
	$m2, $m3, 'multi-shard UPDATE meeting one newer row');
is( $coord->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE body = 'all' AND fence = $m1) || '/' || count(*) FILTER (WHERE id = 40 AND fence = $m3) FROM files"),
	'64/1', 'the refused multi-shard UPDATE changed no row on any shard');

# ---------------------------------------------------------------------------
# 3. concurrent writers on many shards, and the checker

my $nwriters = 4;
my $rounds   = 250;
my $refused_before = $coord->safe_psql('postgres',
	"SELECT sum(result::bigint) FROM run_command_on_workers('SELECT fence_advance_refusals + fence_guard_refusals FROM fencing_monitor.stats')");
my @clients;
for my $j (1 .. $nwriters)
{
	my @l = ('\set VERBOSITY sqlstate', '\set prev 1');
	for my $n (1 .. $rounds)
	{
		my $rid = 1 + int(rand(64));
		# a fresh token and its write, racing the other writers; then, as
		# a holder that lost its lease, this writer's previous token on the
		# same row (always refused: the row's fence is at least :tok)
		push @l, 'SELECT fencing.next_token() AS tok \gset',
		  "UPDATE files SET body = 'w$j.$n', fence = fencing.fence_advance(fence, :tok), hist = hist || :tok::bigint WHERE id = $rid RETURNING 'W', id, fence;",
		  "UPDATE files SET body = 'w$j.$n.late', fence = fencing.fence_advance(fence, :prev), hist = hist || :prev::bigint WHERE id = $rid RETURNING 'W', id, fence;",
		  '\set prev :tok';
	}
	my $base = "$tmp/w$j";
	open my $fh, '>', "$base.sql" or die;
	print $fh "$_\n" for @l;
	close $fh;
	push @clients,
	  {
		base => $base,
		h    => IPC::Run::start(
			[
				'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d',
				$coord->connstr('postgres'), '-f', "$base.sql"
			],
			'<', \undef, '>', "$base.out", '2>', "$base.err",
			IPC::Run::timeout(600))
	  };
}
my (%acked, $nacked, $nrefused, @other);
for my $c (@clients)
{
	$c->{h}->finish;
	for my $l (split /\n/, slurp_file("$c->{base}.out"))
	{
		my (undef, $id, $tok) = split /\|/, $l;
		$acked{"$id $tok"} = 1;
		$nacked++;
	}
	for my $l (split /\n/, slurp_file("$c->{base}.err"))
	{
		if ($l =~ /ERROR:  LF001$/) { $nrefused++; }
		else                        { push @other, $l; }
	}
}
is(scalar(@other), 0, 'writers saw no error but LF001')
  or diag(join "\n", @other[ 0 .. ($#other < 9 ? $#other : 9) ]);
my ($bad_order, $missing, $bad_fence, $pairs) = (0, 0, 0, 0);
my %hist;
for my $l (split /\n/,
	$coord->safe_psql('postgres', "SELECT id, fence, array_to_string(hist, ',') FROM files WHERE id <= 64"))
{
	my ($id, $fence, $h) = split /\|/, $l;
	my @h = split /,/, $h;
	for my $i (1 .. $#h)
	{
		$pairs++;
		$bad_order++ unless $h[$i] > $h[ $i - 1 ];
	}
	$bad_fence++ unless @h && $h[-1] == $fence;
	$hist{$id} = { map { $_ => 1 } @h };
}
for my $k (keys %acked)
{
	my ($id, $tok) = split / /, $k;
	$missing++ unless $hist{$id}{$tok};
}
my $refused_workers = $coord->safe_psql('postgres',
	"SELECT sum(result::bigint) FROM run_command_on_workers('SELECT fence_advance_refusals + fence_guard_refusals FROM fencing_monitor.stats')")
  - $refused_before;
ok($nacked > 0 && $nrefused > 0,
	"$nwriters writers on 32 shards: $nacked writes acknowledged, $nrefused stale writes refused");
is($bad_order, 0,
	"checker: every row's accepted tokens strictly increase ($pairs successive pairs): 0 stale writes accepted");
is($missing, 0, 'checker: every acknowledged write is in its row\'s history');
is($bad_fence, 0, 'checker: every fence is its row\'s last accepted token');
is($refused_workers, $nrefused,
	"the workers counted the $nrefused refusals (fencing_monitor.stats on each worker)");
diag(sprintf(
		"citus checker: %d writers, 32 shards, 64 rows, %d writes acknowledged, %d stale refused, %d accepted stale",
		$nwriters, $nacked, $nrefused, $bad_order));

# ---------------------------------------------------------------------------
# 3b. durability on a worker: with synchronous_commit = off on the worker
# (and WAL that no commit flushes really lost by an immediate stop), the
# acknowledged fenced writes survive the worker's crash

$w2->append_conf('postgresql.conf', qq{
synchronous_commit = off
wal_writer_delay = 10s
bgwriter_lru_maxpages = 0
});
$w2->reload;
$w2->poll_query_until('postgres', "SELECT current_setting('synchronous_commit') = 'off'")
  or die 'w2: synchronous_commit did not turn off';
my @w2rows = grep { node_of('files', $_) == $w2->port } 1 .. 64;
my %dur;
for my $id (@w2rows[ 0 .. 5 ])
{
	my $t = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
	is( $coord->safe_psql('postgres',
			"UPDATE files SET body = 'durable', fence = fencing.fence_advance(fence, $t), hist = hist || ${t}::bigint WHERE id = $id RETURNING fence"),
		$t, "row $id on worker ${\ $w2->port} (synchronous_commit = off): fenced write with $t acknowledged");
	$dur{$id} = $t;
}
$w2->stop('immediate');
$w2->start;
for my $id (sort { $a <=> $b } keys %dur)
{
	is($coord->safe_psql('postgres', "SELECT body, fence FROM files WHERE id = $id"),
		"durable|$dur{$id}", "row $id: the acknowledged write survived the worker's crash");
}
my ($id0) = sort { $a <=> $b } keys %dur;
refused_on_worker(
	"UPDATE files SET body = 'stale after crash', fence = fencing.fence_advance(fence, " . ($dur{$id0} - 1) . ") WHERE id = $id0",
	$dur{$id0} - 1, $dur{$id0}, "row $id0: a token below it is refused after the worker's crash");

# ---------------------------------------------------------------------------
# 4. worker failover that loses the tail

my $r   = (grep { node_of('files', $_) == $w1->port } 41 .. 64)[0];
my $c1  = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
$coord->safe_psql('postgres',
	"UPDATE files SET body = 'c1', fence = fencing.fence_advance(fence, $c1) WHERE id = $r");
$w1->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('w1_standby', install_path => $inst);
$standby->init_from_backup($w1, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'");
# Citus made a self-signed certificate; the backup's copy lost its mode
my $key = $standby->data_dir . '/server.key';
chmod 0600, $key if -f $key;
$standby->start;
$w1->wait_for_catchup($standby, 'replay', $w1->lsn('flush'));
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', "worker ${\ $w1->port} has an asynchronous standby ${\ $standby->port}");
# the standby stops receiving; a newer holder writes, acknowledged
$standby->stop('fast');
my $c2 = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
my $c3 = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
is( $coord->safe_psql('postgres',
		"UPDATE files SET body = 'c3', fence = fencing.fence_advance(fence, $c3) WHERE id = $r RETURNING fence"),
	$c3, "row $r: the holder of $c3 writes (acknowledged; the standby misses it)");
refused_on_worker(
	"UPDATE files SET body = 'c2 (stale)', fence = fencing.fence_advance(fence, $c2) WHERE id = $r",
	$c2, $c3, "row $r before the failover: $c2 is stale");
# the worker dies; its standby is promoted and takes its place
$w1->stop('immediate');
$standby->start;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'standby not promoted';
$coord->safe_psql('postgres',
	"SELECT citus_update_node(nodeid, '127.0.0.1', ${\ $standby->port}) FROM pg_dist_node WHERE nodeport = ${\ $w1->port}");
is( $coord->safe_psql('postgres', "SELECT body, fence FROM files WHERE id = $r"),
	"c1|$c1",
	"after the worker's failover row $r is back at fence $c1: the acknowledged write of $c3 is lost");
# what does not hold: a token between the lost fence and the standby's
is( $coord->safe_psql('postgres',
		"UPDATE files SET body = 'c2 after failover', fence = fencing.fence_advance(fence, $c2) WHERE id = $r RETURNING fence"),
	$c2, "lost tail: the stale holder of $c2 (< $c3) is accepted once, as on a single server");
# what holds: older tokens stay refused, newer ones work, the fence climbs
refused_on_worker(
	"UPDATE files SET body = 'c1 (stale)', fence = fencing.fence_advance(fence, $c1) WHERE id = $r",
	$c1, $c2, "after the failover a token below the surviving fence is refused");
is( $coord->safe_psql('postgres',
		"UPDATE files SET body = 'c3 again', fence = fencing.fence_advance(fence, $c3) WHERE id = $r RETURNING fence"),
	$c3, "the holder of $c3 writes again; from here $c2 is refused again");
refused_on_worker(
	"UPDATE files SET body = 'c2 (stale)', fence = fencing.fence_advance(fence, $c2) WHERE id = $r",
	$c2, $c3, "row $r: $c2 is stale again");
# the remedy after a worker failover that may have lost WAL: raise every
# fence on the worker's shards above every token issued so far (all
# holders re-acquire)
my $f = $coord->safe_psql('postgres', 'SELECT fencing.next_token()');
my $nfenced = $coord->safe_psql('postgres',
	"WITH u AS (UPDATE files SET fence = fencing.fence_advance(fence, $f, true) WHERE fence IS NOT NULL RETURNING 1) SELECT count(*) FROM u");
ok($nfenced > 60, "re-fence after the failover: $nfenced rows raised to $f");
refused_on_worker(
	"UPDATE files SET body = 'c3 after re-fence', fence = fencing.fence_advance(fence, $c3) WHERE id = $r",
	$c3, $f, "after the re-fence every earlier token is refused, $c3 too");
is( $coord->safe_psql('postgres',
		"SELECT count(*) FROM files WHERE id <> $r AND id <= 64 AND fence IS NOT NULL"),
	'63', 'the other rows are all still readable through the coordinator');

diag(sprintf('t/071_citus.pl: %.0f s', time - $t_begin));
$_->stop for $coord, $w2, $standby;
done_testing();
