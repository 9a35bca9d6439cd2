# Copyright: fencing extension authors
#
# The counters' table holds 256 databases (src/stats.c).  A session that
# finds it full does not count, and says so in stats_info; once entries are
# freed (their databases dropped) it looks again a second later and counts,
# as a pooled session that never reconnects must.  Until 83fed51 a session
# that once found the table full never counted again, while every new
# session (the exporter's) said the counters count.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('full');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
$node->start;

# 256 databases with the extension, and app, copied from a template
my $strategy = $node->pg_version >= 15 ? ' STRATEGY FILE_COPY' : '';
$node->safe_psql('postgres', 'CREATE DATABASE tpl');
$node->safe_psql('tpl', 'CREATE EXTENSION fencing');
$node->safe_psql('postgres',
	join('', map { "CREATE DATABASE d$_ TEMPLATE tpl$strategy;\n" } 1 .. 256)
	  . "CREATE DATABASE app TEMPLATE tpl$strategy;\n");

# each looks at its counters, which claims an entry, until the table is
# full (tpl took one when its install script reset its counters)
my $looks = $node->safe_psql('postgres',
	join('',
		map { "\\c d$_\nSELECT 'd$_ ' || counting FROM fencing_monitor.stats_info;\n" }
		  1 .. 256));
my @full = grep { / false$/ } split /\n/, $looks;
ok(@full > 0, 'the table fills up before 256 more databases have counted');
my $counting_dbs = grep { / true$/ } split /\n/, $looks;
cmp_ok($counting_dbs, '>=', 250, "$counting_dbs databases got an entry");

# the pooled session: finds the table full, refuses a stale write (not
# counted), drops some databases, and a second later refuses another
my ($rc, $out, $err) = $node->psql('app', join("\n",
	q{SELECT 'first look: ' || counting || ', ' || detail FROM fencing_monitor.stats_info;},
	q{CREATE TABLE files (id int PRIMARY KEY, fence bigint);},
	q{INSERT INTO files VALUES (1, 100);},
	q{\set VERBOSITY sqlstate},
	q{\set ON_ERROR_STOP 0},
	q{UPDATE files SET fence = fencing.fence_advance(fence, 5);},
	(map { "DROP DATABASE d$_;" } 250 .. 256),
	q{SELECT pg_sleep(1.1);},
	q{UPDATE files SET fence = fencing.fence_advance(fence, 6);},
	q{SELECT 'second look: ' || counting FROM fencing_monitor.stats_info;}),
	on_error_stop => 0);
is(scalar(() = $err =~ /ERROR:  LF001/g), 2, 'both stale writes are refused') or diag($err);
like($out, qr/^first look: false, Every entry of the counters' table is taken by other databases\.$/m,
	'the pooled session finds the table full, and says so');
like($out, qr/^second look: true$/m, 'a second later it counts');

is($node->safe_psql('app',
		'SELECT i.counting, s.fence_advance_refusals FROM fencing_monitor.stats AS s, fencing_monitor.stats_info AS i'),
	't|1', "the pooled session's refusal after the drop is counted, the one before is not");

$node->stop;
done_testing();
