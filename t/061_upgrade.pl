# Copyright: fencing extension authors
#
# 061_upgrade.pl: updates, and DROP EXTENSION.
#
# Updates: for the first release (1.0) and every version that has an update
# path to fencing.control's default_version, test/upgrade/upgrade_check.sql
# installs that version, runs ALTER EXTENSION fencing UPDATE, and checks the
# version, the functions (against test/upgrade/expected_functions.sql) and
# that a lease and the token counter survive.  The updated installation
# must then be object for object what a fresh CREATE EXTENSION creates
# (test/upgrade/objects.sql), and pass a functional smoke test.  With no
# update script in the tree yet, the update is a no-op; the first
# fencing--A--B.sql is run by this test the day it appears.
#
# DROP EXTENSION: after a workout of the extension, with a user table that
# uses fence_guard, DROP EXTENSION is refused while the user's trigger
# depends on it; DROP EXTENSION ... CASCADE then leaves nothing behind: the
# catalogs hold what they held before CREATE EXTENSION (no schema, no
# functions, relations, types, sequences, triggers, dependencies, initial
# privileges or comments of the extension), and the extension can be
# created again, in the same session too.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $started = time;

my ($default_version) =
  slurp_file('fencing.control') =~ /^default_version\s*=\s*'([^']*)'/m;
my $first_release = '1.0';

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
# fencing preloaded: its counters count on every major
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
$node->start;

# psql with a file, as a human would run it; (ok, stdout, stderr)
sub psql_file
{
	my ($db, $file, @vars) = @_;
	my ($out, $err);
	my $ok = IPC::Run::run(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
			(map { ('-v', $_) } @vars),
			'-d', $node->connstr($db), '-f', $file
		],
		'<', \undef, '>', \$out, '2>', \$err);
	return ($ok, $out, $err);
}

sub objects
{
	my ($db) = @_;
	my ($ok, $out, $err) = psql_file($db, 'test/upgrade/objects.sql', 'QUIET=1');
	die "objects.sql failed in $db: $err" unless $ok;
	$out =~ s/^\s*\n//mg;
	return $out;
}

# ---------------------------------------------------------------------------
# updates

my @from = ($first_release);
push @from, grep { $_ ne $first_release } split /\n/,
  $node->safe_psql('postgres', qq{
	SELECT source FROM pg_extension_update_paths('fencing')
	 WHERE target = '$default_version' AND path IS NOT NULL
	 ORDER BY string_to_array(source, '.')::int[]});
note "update paths tested: " . join(', ', map { "$_ -> $default_version" } @from);

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION fencing');
my $fresh_objects = objects('fresh');
like($fresh_objects, qr/^member function fencing\.lease_acquire\(text,text,interval,interval\)$/m,
	'objects.sql lists the members of a fresh installation');

my $last_db;
for my $v (@from)
{
	my $db = "upgrade_from_" . ($v =~ s/\W/_/gr);
	$node->safe_psql('postgres', qq{CREATE DATABASE "$db"});
	my ($ok, $out, $err) = psql_file($db, 'test/upgrade/upgrade_check.sql', "from=$v");
	ok($ok, "upgrade_check.sql from $v passes") or diag("$out\n$err");
	like($out, qr/^upgrade_check: fencing \Q$v\E -> \Q$default_version\E: ok$/m,
		"fencing $v updated to $default_version with the expected functions, lease and tokens");
	my $objects = objects($db);
	is($objects, $fresh_objects,
		"after the update from $v, every object is what a fresh install of $default_version creates");
	$last_db = $db;
}

# the list of functions is the current version's: a fresh install matches it too
{
	my ($ok, $out, $err) = psql_file('fresh', 'test/upgrade/list_functions.sql', 'QUIET=1');
	ok($ok, 'list_functions.sql runs');
	my $expected = slurp_file('test/upgrade/expected_functions.sql');
	is($out, $expected,
		'test/upgrade/expected_functions.sql is up to date with the install script '
		  . '(else regenerate it with list_functions.sql)');
}

# ---------------------------------------------------------------------------
# a functional smoke test in the updated database

$node->safe_psql($last_db, q{
	CREATE TABLE docs (id int PRIMARY KEY, body text, fence bigint);
	INSERT INTO docs VALUES (1, 'new', NULL);
	CREATE TABLE notes (id int PRIMARY KEY, body text, fence bigint);
	CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON notes
		FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
	INSERT INTO notes VALUES (1, 'new', 0);
});
my $ta = $node->safe_psql($last_db, "SELECT fencing.lease_acquire('smoke', 'A', '1 second')");
like($ta, qr/^\d+$/, "after the update, A acquires with token $ta");
$node->safe_psql($last_db,
	"UPDATE docs SET body = 'A', fence = fencing.fence_advance(fence, $ta) WHERE id = 1");
# B waits for A's lease to run out
my $tb = $node->safe_psql($last_db,
	"SELECT fencing.lease_acquire('smoke', 'B', '1 hour', wait => '30 seconds')");
cmp_ok($tb, '>', $ta, "B waited for A's lease to expire and took it over with $tb");
$node->safe_psql($last_db, qq{
	UPDATE docs SET body = 'B', fence = fencing.fence_advance(fence, $tb) WHERE id = 1;
	BEGIN; SET LOCAL fencing.token = '$tb'; UPDATE notes SET body = 'B' WHERE id = 1; COMMIT;
});
my ($rc, $out, $err) = $node->psql($last_db, qq{\\set VERBOSITY verbose
	UPDATE docs SET body = 'late A', fence = fencing.fence_advance(fence, $ta) WHERE id = 1});
like($err, qr/LF001: fencing token $ta is stale/, "A's stale write is refused (fence_advance)");
($rc, $out, $err) = $node->psql($last_db, qq{\\set VERBOSITY verbose
	BEGIN; SET LOCAL fencing.token = '$ta'; DELETE FROM notes WHERE id = 1; COMMIT;});
like($err, qr/LF001: fencing token $ta is stale/, "A's stale delete is refused (fence_guard)");
is($node->safe_psql($last_db, "SELECT fencing.lease_renew('smoke', $ta, '1 hour')"),
	'f', "A's renew fails");
is($node->safe_psql($last_db,
		"SELECT d.body || d.fence || ' ' || n.body || n.fence FROM docs d, notes n"),
	"B$tb B$tb", "B's writes stand");
is($node->safe_psql($last_db,
		"SELECT holder || ' ' || state || ' ' || holder_changes FROM fencing.lease_status WHERE name = 'smoke'"),
	'B held 1', 'lease_status: B holds the lease, one change of holder');
is($node->safe_psql($last_db,
		'SELECT fence_advance_refusals, fence_guard_refusals FROM fencing_monitor.stats'),
	'1|1', 'fencing_monitor.stats: two stale writes refused');

# ---------------------------------------------------------------------------
# DROP EXTENSION leaves nothing behind

# Every row of the catalogs that an extension's objects occupy, described;
# database-wide, so anything left over shows.
my $catalog_snapshot = q{
	SELECT 'pg_namespace ' || nspname FROM pg_namespace
	UNION ALL SELECT 'pg_class ' || c.relnamespace::regnamespace || '.' || c.relname || ' ' || c.relkind::text
	  FROM pg_class c
	UNION ALL SELECT 'pg_type ' || t.typnamespace::regnamespace || '.' || t.typname FROM pg_type t
	UNION ALL SELECT 'pg_proc ' || p.pronamespace::regnamespace || '.' || p.proname || ' '
	  || coalesce(p.probin, '') FROM pg_proc p
	UNION ALL SELECT 'pg_trigger ' || tgrelid::regclass || ' ' || tgname FROM pg_trigger
	UNION ALL SELECT 'pg_constraint ' || conname || ' ' || conrelid::regclass FROM pg_constraint
	UNION ALL SELECT 'pg_attrdef ' || adrelid::regclass || ' ' || adnum FROM pg_attrdef
	UNION ALL SELECT 'pg_rewrite ' || ev_class::regclass || ' ' || rulename FROM pg_rewrite
	UNION ALL SELECT 'pg_sequence ' || seqrelid::regclass FROM pg_sequence
	UNION ALL SELECT 'pg_extension ' || extname FROM pg_extension
	UNION ALL SELECT 'pg_event_trigger ' || evtname FROM pg_event_trigger
	UNION ALL SELECT 'pg_operator ' || oprname FROM pg_operator
	UNION ALL SELECT 'pg_cast ' || castsource::regtype || ' ' || casttarget::regtype FROM pg_cast
	UNION ALL SELECT 'pg_depend count ' || count(*) FROM pg_depend
	UNION ALL SELECT 'pg_init_privs count ' || count(*) FROM pg_init_privs
	UNION ALL SELECT 'pg_description count ' || count(*) FROM pg_description
	UNION ALL SELECT 'pg_shdepend count ' || count(*) FROM pg_shdepend
	  WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
	UNION ALL SELECT 'pg_roles ' || rolname FROM pg_roles
	ORDER BY 1};

$node->safe_psql('postgres', 'CREATE DATABASE dropcheck');
# a user table from before the extension; it must survive the extension
$node->safe_psql('dropcheck', 'CREATE TABLE app (id int PRIMARY KEY, v text, fence bigint)');
my $before = $node->safe_psql('dropcheck', $catalog_snapshot);

$node->safe_psql('dropcheck', q{
	CREATE EXTENSION fencing;
	SELECT fencing.lease_acquire('L' || i, 'h', '1 hour') FROM generate_series(1, 5) AS i;
	SELECT fencing.lease_release('L1', (SELECT token FROM fencing.leases WHERE name = 'L1'));
	SELECT fencing.next_token() FROM generate_series(1, 40);
	CREATE TRIGGER app_guard BEFORE INSERT OR UPDATE OR DELETE ON app
		FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
	INSERT INTO app VALUES (1, 'x', fencing.next_token());
});
my ($rc2, $o2, $e2) = $node->psql('dropcheck', 'UPDATE app SET v = $$y$$, fence = 1');
like($e2, qr/is stale/, 'the extension is in use: a guarded stale write was refused');
my $max_token = $node->safe_psql('dropcheck', 'SELECT fencing.next_token()');

my $member_oids = $node->safe_psql('dropcheck', q{
	SELECT string_agg(objid::text, ',') FROM pg_depend
	 WHERE refclassid = 'pg_extension'::regclass
	   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')});
my $ext_oid = $node->safe_psql('dropcheck',
	"SELECT oid FROM pg_extension WHERE extname = 'fencing'");
is($node->safe_psql('dropcheck', q{
	SELECT count(*) FROM pg_depend
	 WHERE classid = 'pg_namespace'::regclass AND objid = 'fencing'::regnamespace
	   AND refclassid = 'pg_extension'::regclass AND deptype = 'e'}),
	'1', 'schema fencing is a member of the extension');

my ($rc3, $o3, $e3) = $node->psql('dropcheck', "\\set VERBOSITY verbose\nDROP EXTENSION fencing");
like($e3, qr/2BP01: cannot drop extension fencing because other objects depend on it/,
	"DROP EXTENSION is refused while the user's trigger uses fence_guard");
like($e3, qr/trigger app_guard on table app depends on function fencing\.fence_guard\(\)/,
	'and names the trigger');

($rc3, $o3, $e3) = $node->psql('dropcheck', 'DROP EXTENSION fencing CASCADE');
is($rc3, 0, 'DROP EXTENSION fencing CASCADE');
like($e3, qr/drop cascades to trigger app_guard on table app/, 'it drops the user\'s trigger');
is($node->safe_psql('dropcheck', 'SELECT count(*) FROM app'), '1', 'and keeps the user\'s table');

is($node->safe_psql('dropcheck', q{
	SELECT count(*) FROM pg_extension WHERE extname = 'fencing'}), '0', 'no extension');
is($node->safe_psql('dropcheck', q{
	SELECT count(*) FROM pg_proc
	 WHERE probin LIKE '%fencing%' OR pronamespace::regnamespace::text = 'fencing'}),
	'0', 'no function of the extension');
is($node->safe_psql('dropcheck', q{
	SELECT count(*) FROM pg_class WHERE relnamespace::regnamespace::text = 'fencing'}),
	'0', 'no table, view, sequence or index of the extension');
is($node->safe_psql('dropcheck', q{
	SELECT count(*) FROM pg_type WHERE typnamespace::regnamespace::text = 'fencing'}),
	'0', 'no type of the extension');
is($node->safe_psql('dropcheck', q{
	SELECT count(*) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
	 WHERE p.probin LIKE '%fencing%'}),
	'0', 'no trigger calling a function of the extension');
is($node->safe_psql('dropcheck', qq{
	SELECT count(*) FROM pg_depend
	 WHERE (refclassid = 'pg_extension'::regclass AND refobjid = $ext_oid)
	    OR objid IN ($member_oids) OR refobjid IN ($member_oids)}),
	'0', 'no dependency on the extension or its objects');
is($node->safe_psql('dropcheck', qq{
	SELECT (SELECT count(*) FROM pg_init_privs WHERE objoid IN ($member_oids))
	     + (SELECT count(*) FROM pg_description WHERE objoid IN ($member_oids))}),
	'0', 'no initial privileges or comments of its objects');

is($node->safe_psql('dropcheck',
		"SELECT count(*) FROM pg_namespace WHERE nspname = 'fencing'"),
	'0', 'no schema fencing: it belongs to the extension');
is($node->safe_psql('dropcheck', $catalog_snapshot), $before,
	'the catalogs hold what they held before CREATE EXTENSION');

# created again, used, dropped and created again in one session
my $again = $node->safe_psql('dropcheck', q{
	CREATE EXTENSION fencing;
	SELECT fencing.lease_acquire('again', 'h', '1 hour') IS NOT NULL;
	DROP EXTENSION fencing;
	CREATE EXTENSION fencing;
	SELECT fencing.lease_acquire('again', 'h', '1 hour') IS NOT NULL;
	SELECT extversion FROM pg_extension WHERE extname = 'fencing';
});
is($again, "t\nt\n$default_version",
	'the extension can be created again after DROP, twice in one session');
{
	my ($ok, $o, $e) = psql_file('dropcheck', 'test/upgrade/objects.sql', 'QUIET=1');
	$o =~ s/^\s*\n//mg;
	is($o, $fresh_objects, 'the re-created extension is a fresh installation, object for object');
}

# A new installation starts a new token history: tokens from before the DROP
# are not known to it.  advance_tokens is the way to carry a floor over.
my $restart = $node->safe_psql('dropcheck', 'SELECT fencing.next_token()');
note "after DROP and CREATE EXTENSION the next token is $restart (before DROP: $max_token)";
$node->safe_psql('dropcheck', "SELECT fencing.advance_tokens($max_token)");
cmp_ok($node->safe_psql('dropcheck', 'SELECT fencing.next_token()'), '>', $max_token,
	'advance_tokens(max before DROP) puts new tokens above the old history');

$node->stop;
note sprintf('061_upgrade took %d s', time - $started);
done_testing();
