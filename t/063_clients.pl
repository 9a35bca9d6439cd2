# Copyright: fencing extension authors
#
# 063_clients.pl: the client examples, each run against a real server.
#
# Each example plays the fencing story with two sessions: A takes a lease
# for one second and writes, B waits for A's lease to run out, takes it
# over and writes with its newer token, A writes late with its old token
# and is refused (LF001), and B's write stands.
#   - Python, psycopg2: examples/python/lease_demo.py (fence_advance)
#   - Node.js, pg from npm: examples/node/demo.js after
#     npm ci --prefix examples/node (fence_guard and fencing.token)
#   - C, libpq: examples/c/worker.c, built by examples/c/Makefile with
#     -Wall -Wextra -Werror (fence_advance, SQLSTATE from PG_DIAG_SQLSTATE)
# For each: the exit code, the story in its output, and the table and the
# lease as the server sees them afterwards.
# The election helpers, examples/python/fencing_leader.py and
# examples/node/fencing_leader.js, through t/lib/leader_codes.{py,js}: every
# LF code of the README's table has an action; an election on a lease's name
# stops with LF021; a write's LF003 leaves the leadership; a write's LF001
# and a renew's LF005 (after advance_tokens) end it, with lease_watch's
# reason on the cancellation; stop() resigns.  An example whose toolchain is
# missing (or whose npm ci fails) is skipped, with the reason.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $started = time;

my $node = PostgreSQL::Test::Cluster->new('clients');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# the clients find the server through libpq's environment
local $ENV{PGHOST} = $node->host;
local $ENV{PGPORT} = $node->port;
local $ENV{PGDATABASE} = 'postgres';

# the story, as each client tells it
sub check_story
{
	my ($lang, $rc, $out) = @_;
	my $lease = "demo-$lang";
	my $table = "demo_$lang";
	is($rc, 0, "$lang: the example exits 0") or diag($out);
	my ($ta) = $out =~ /^\[A\] acquired lease \Q$lease\E: token (\d+) \(ttl 1 s\)$/m;
	my ($tb) = $out =~ /^\[B\] acquired lease \Q$lease\E: token (\d+) \(after waiting for A's lease to expire\)$/m;
	ok(defined $ta && defined $tb && $tb > $ta,
		"$lang: A got token " . ($ta // '?') . ", B took over with newer token " . ($tb // '?'))
	  or diag($out);
	$ta //= 'none';
	$tb //= 'none';
	like($out, qr/^\[B\] wrote row 1 with token $tb$/m, "$lang: B's write went through");
	like($out,
		qr/^\[A\] write REFUSED: LF001 fencing token $ta is stale \(The row (of "\Q$table\E" )?was already written with token $tb\.\)$/m,
		"$lang: A's late write with token $ta is refused with LF001");
	like($out, qr/^\[A\] renew with token $ta: lost the lease; stopping$/m,
		"$lang: A learns it lost the lease");
	like($out, qr/^\[result\] row 1 = 'written by B', fence $tb$/m, "$lang: B's write stands");
	like($out, qr/^OK: the stale write was refused$/m, "$lang: says OK");
	is($node->safe_psql('postgres', "SELECT body || ' ' || fence FROM $table WHERE id = 1"),
		"written by B $tb", "$lang: the server holds B's write");
	is($node->safe_psql('postgres',
			"SELECT holder || ' ' || state || ' ' || token FROM fencing.lease_status WHERE name = '$lease'"),
		"B free $tb", "$lang: B released the lease");
}

# t/lib/leader_codes.{py,js}: one line per check, all expected
sub check_leader_codes
{
	my ($lang, $rc, $out) = @_;
	is($rc, 0, "$lang leader helper: the checks exit 0") or diag($out);
	for my $c ('table', 'lf021', 'lf003', 'lf001', 'leads again', 'lf005',
		'leads in the new band', 'stop')
	{
		like($out, qr/^ok - \Q$c\E$/m, "$lang leader helper: $c") or diag($out);
	}
}

# ---------------------------------------------------------------------------
# Python

SKIP:
{
	my $python = '/usr/bin/python3';
	skip "python: $python not found", 1 unless -x $python;
	my ($prc, $pout) = run_cmd(30, $python, '-c', 'import psycopg2');
	skip "python: psycopg2 is not installed (python3-psycopg2): $pout", 1 if $prc != 0;

	my ($rc, $out) = run_cmd(60, $python, 'examples/python/lease_demo.py');
	note "python:\n$out";
	check_story('python', $rc, $out);

	($rc, $out) = run_cmd(120, $python, 't/lib/leader_codes.py', 'README.md');
	note "python leader helper:\n$out";
	check_leader_codes('python', $rc, $out);
}

# ---------------------------------------------------------------------------
# Node.js

SKIP:
{
	skip 'node: node or npm not found', 1 unless in_path('node') && in_path('npm');
	my ($vrc, $version) = run_cmd(30, 'node', '--version');
	skip "node: node --version failed: $version", 1 if $vrc != 0;
	note "node $version";

	my ($irc, $iout) = run_cmd(300, 'npm', 'ci', '--prefix', 'examples/node',
		'--no-audit', '--no-fund', '--prefer-offline');
	skip "node: npm ci failed (no registry?), last lines:\n"
	  . join("\n", (split /\n/, $iout)[-5 .. -1]), 1
	  if $irc != 0;
	ok(-d 'examples/node/node_modules/pg', 'node: npm ci installed pg from package-lock.json');
	my ($pg_version) = slurp_file('examples/node/node_modules/pg/package.json') =~ /"version"\s*:\s*"([^"]+)"/;
	my ($pinned) = slurp_file('examples/node/package.json') =~ /"pg"\s*:\s*"([^"]+)"/;
	is($pg_version, $pinned, "node: the installed pg is the pinned $pinned");

	my ($rc, $out) = run_cmd(60, 'node', 'examples/node/demo.js');
	note "node:\n$out";
	check_story('node', $rc, $out);

	($rc, $out) = run_cmd(120, 'node', 't/lib/leader_codes.js', 'README.md');
	note "node leader helper:\n$out";
	check_leader_codes('node', $rc, $out);
}

# ---------------------------------------------------------------------------
# C

SKIP:
{
	skip 'c: make or cc not found', 1 unless in_path('make') && (in_path('cc') || in_path('gcc'));
	# not the flags of the make that runs this test (-s would hide the command)
	local $ENV{MAKEFLAGS};
	local $ENV{MFLAGS};
	local $ENV{MAKELEVEL};
	delete @ENV{qw(MAKEFLAGS MFLAGS MAKELEVEL)};
	my ($brc, $bout) = run_cmd(120, 'make', '-C', 'examples/c', '-B', 'worker');
	is($brc, 0, 'c: worker.c builds with -Wall -Wextra -Werror') or diag($bout);
	like($bout, qr/-Wall -Wextra -Werror/, 'c: with those flags');
	unlike($bout, qr/warning:/, 'c: and without a warning');
	skip 'c: the worker did not build', 1 unless -x 'examples/c/worker';

	my ($rc, $out) = run_cmd(60, 'examples/c/worker');
	note "c:\n$out";
	check_story('c', $rc, $out);

	# a connection string as the argument works as well as the environment
	($rc, $out) = run_cmd(60, 'examples/c/worker', $node->connstr('postgres'));
	is($rc, 0, 'c: the worker also takes a conninfo argument') or diag($out);
	run_cmd(30, 'make', '-C', 'examples/c', 'clean');
}

$node->stop;
note sprintf('063_clients took %d s', time - $started);
done_testing();
