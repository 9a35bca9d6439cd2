# Copyright: fencing extension authors
#
# contrib/prometheus against the real prometheus-postgres-exporter (Debian
# 12's, 0.11.1), and its alerting rules against promtool.
#
# A cluster with fencing in shared_preload_libraries gets a known set of
# events since a stats_reset(): leases acquired, renewed, released, taken
# over after expiry and force-released; stale writes refused by
# fence_advance, fence_guard and claim_guard, and one LF005; a wait that
# runs out, and two waiters still waiting (the head and one queued behind
# it).  The exporter, connected as a role that is only a member of
# pg_monitor and loaded with contrib/prometheus/queries.yaml, is scraped
# over HTTP: every metric of the file must be there with its type and its
# exact value.  Restarted without shared_preload_libraries, the same
# scrape says fencing_counting 0 and the counters are NaN.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
my $promtool = '/usr/bin/promtool';
my $contrib = "$FindBin::RealBin/../contrib/prometheus";

if (!-x $exporter || !-x $promtool)
{
	# test/run.sh installs both (test/deps.sh): there it must run
	die "$exporter or $promtool is missing"
	  if $ENV{FENCING_REQUIRE_HA_TOOLS};
	plan skip_all => 'prometheus-postgres-exporter or prometheus is not installed';
}

# ---- the rules ----
my ($rc, $out) = run_cmd(120, $promtool, 'check', 'rules', "$contrib/alerts.yaml");
is($rc, 0, 'promtool check rules alerts.yaml') or diag($out);
like($out, qr/SUCCESS: 7 rules found/, 'seven rules');
($rc, $out) = run_cmd(300, $promtool, 'test', 'rules', "$contrib/alerts_test.yaml");
is($rc, 0, 'promtool test rules alerts_test.yaml: each alert fires when it should, and only then')
  or diag($out);

# ---- a cluster with known events ----
my $node = PostgreSQL::Test::Cluster->new('prom');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION fencing;
	CREATE ROLE exporter LOGIN IN ROLE pg_monitor;
	SELECT fencing_monitor.stats_reset();
});

sub sql { return $node->safe_psql('postgres', $_[0]); }

# sql_error($query): the SQLSTATE a statement fails with
sub sql_error
{
	my ($q) = @_;
	my ($ret, $stdout, $stderr) =
	  $node->psql('postgres', "\\set VERBOSITY sqlstate\n$q");
	return $stderr =~ /ERROR:\s+(\w{5})/ ? $1 : "no error ($ret)";
}

# leases: l_held held; l_over taken over after expiry; l_cycle acquired,
# renewed and released; l_forced force-released
my $t_held = sql(q{SELECT fencing.lease_acquire('l_held', 'h1', '10 min')});
sql(q{SELECT fencing.lease_acquire('l_over', 'h1', '1 ms')});
sql(q{SELECT pg_sleep(0.01)});
sql(q{SELECT fencing.lease_acquire('l_over', 'h2', '10 min')});
my $t = sql(q{SELECT fencing.lease_acquire('l_cycle', 'h1', '10 min')});
sql("SELECT fencing.lease_renew('l_cycle', $t, '10 min')");
sql("SELECT fencing.lease_release('l_cycle', $t)");
sql(q{SELECT fencing.lease_acquire('l_forced', 'h1', '10 min')});
sql(q{SELECT fencing.lease_force_release('l_forced')});
is(sql(q{SELECT string_agg(name || ':' || state, ' ' ORDER BY name) FROM fencing.lease_status}),
	'l_cycle:free l_forced:free l_held:held l_over:held', 'the leases');

# refused writes: two by fence_advance, one by fence_guard, one by
# claim_guard, each in a transaction that rolls back
sql(q{
	CREATE TABLE files (id int PRIMARY KEY, fence bigint);
	CREATE TABLE guarded (id int PRIMARY KEY, v text, fence bigint);
	CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON guarded
		FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
	CREATE TABLE jobs (id int PRIMARY KEY, state text, claim bigint);
	CREATE TRIGGER stamp BEFORE UPDATE ON jobs FOR EACH ROW
		WHEN (NEW.state = 'running' AND OLD.state = 'queued')
		EXECUTE FUNCTION fencing.claim_stamp('claim');
	CREATE TRIGGER complete BEFORE UPDATE ON jobs FOR EACH ROW
		WHEN (NEW.state = 'done')
		EXECUTE FUNCTION fencing.claim_guard('claim', '');
	INSERT INTO jobs VALUES (1, 'queued', NULL);
	UPDATE jobs SET state = 'running';
});
my ($old, $new) = split /\n/, sql('SELECT fencing.next_token() FROM generate_series(1, 2)');
sql("INSERT INTO files VALUES (1, $new); INSERT INTO guarded VALUES (1, 'new', $new)");
is(sql_error("UPDATE files SET fence = fencing.fence_advance(fence, $old)"), 'LF001',
	'fence_advance refuses');
is(sql_error("UPDATE files SET fence = fencing.fence_advance(fence, $new)"), 'LF001',
	'fence_advance refuses an equal token');
is(sql_error("BEGIN; SET LOCAL fencing.token = '$old'; UPDATE guarded SET v = 'old'; COMMIT;"),
	'LF001', 'fence_guard refuses');
# a delivery older than the claim
is(sql_error("BEGIN; SET LOCAL fencing.token = '$t_held'; UPDATE jobs SET state = 'done'; COMMIT;"),
	'LF001', 'claim_guard refuses');

# a wait that runs out
is(sql(q{SELECT fencing.lease_acquire('l_held', 'w0', '1 min', '20 ms') IS NULL}), 't',
	'a wait runs out');

# and two waiters that stay: the head, and one queued behind it
my @waiters;
for my $w (1, 2)
{
	my ($o, $e) = ('', '');
	push @waiters, IPC::Run::start(
		[
			'psql', '-XAtq', '-d', $node->connstr('postgres'),
			'-c', "SELECT fencing.lease_acquire('l_held', 'w$w', '1 min', '10 min')"
		],
		'<', \undef, '>', \$o, '2>', \$e);
	# the second only once the first waits, so that the first is the head
	$node->poll_query_until('postgres',
		"SELECT count(*) = $w FROM fencing_monitor.waiters WHERE lease = 'l_held'")
	  or die "waiter $w does not wait";
}
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM fencing_monitor.waiters
	 WHERE lease = 'l_held' AND head AND wait_event_type = 'Extension'})
  or die 'the head does not sleep';

# LF005: a token from before the database's current band (last: it makes
# every earlier token old)
sql('SELECT fencing.advance_tokens()');
is(sql_error("SELECT fencing.fence_advance(NULL, $new)"), 'LF005', 'LF005');

# ---- the queries cannot be hijacked ----
# The exporter runs queries.yaml as a member of pg_monitor, with the default
# search_path ("$user", public).  Each operator and function must be named
# with its schema, each constant cast to the operator's exact type: an
# operator in public that matches an unqualified one's arguments better
# than pg_catalog's (float8 / integer has none there) would run as the
# exporter.  Checked on the text of each query ...
my $yaml = slurp_file("$contrib/queries.yaml");
my %queries;
while ($yaml =~ /^(\w+):\n  query: \|\n((?:    .*\n)+)/mg)
{
	$queries{$1} = $2;
}
is_deeply([ sort keys %queries ], [qw(fencing fencing_lease fencing_stale_writes fencing_wait)],
	'the queries of queries.yaml');
for my $name (sort keys %queries)
{
	(my $t = $queries{$name}) =~ s/'(?:[^']|'')*'/ /g;
	$t =~ s/OPERATOR\(pg_catalog\.[^)\s]+\)/ /g;
	$t =~ s/::pg_catalog\.\w+/ /g;
	$t =~ s/\bAS\s+\w+\s*\(/ /gi;
	$t =~ s/count\(\*\)/count()/g;
	my @ops = $t =~ m{([-+*/<>=~!@#%^&|`?:]+)}g;
	is_deeply(\@ops, [], "$name: every operator and cast names pg_catalog");
	my @calls = grep { !/^(pg_catalog\.\w+|ARRAY|COALESCE|VALUES|LATERAL|JOIN)$/i }
	  ($t =~ /([\w.]+)\s*\(/g);
	is_deeply(\@calls, [], "$name: every function names its schema");
}

# ... and by planting operators in public that would win over pg_catalog's
# for unqualified ones: a role that may create in public (PUBLIC on 13 and
# 14, the database owner on 15+) must not run code as the exporter.
sql(q{
	CREATE ROLE evil;
	GRANT CREATE ON SCHEMA public TO evil;
	CREATE TABLE public.loot (who text, op text);
	GRANT INSERT ON public.loot TO PUBLIC;
	SET ROLE evil;
	DO $$
	DECLARE
		o record;
	BEGIN
		FOR o IN SELECT * FROM (VALUES
				('/', 'float8', 'integer', 'float8'), ('/', 'float8', 'bigint', 'float8'),
				('/', 'float8', 'numeric', 'float8'), ('/', 'numeric', 'integer', 'numeric'),
				('<', 'float8', 'integer', 'boolean'), ('=', 'float8', 'integer', 'boolean'),
				('=', 'integer', 'bigint', 'boolean'), ('=', 'text', 'name', 'boolean'),
				('->>', 'jsonb', 'varchar', 'text')) AS v(op, l, r, res)
		LOOP
			EXECUTE format($f$
				CREATE FUNCTION public.%s(%s, %s) RETURNS %s LANGUAGE plpgsql AS $b$
				BEGIN
					INSERT INTO public.loot VALUES (current_user, %L);
					RETURN NULL;
				END $b$
				$f$,
				'trojan_' || md5(o.op || o.l || o.r), o.l, o.r, o.res, o.op || '(' || o.l || ', ' || o.r || ')');
			EXECUTE format('CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.%s)',
						   o.op, o.l, o.r, 'trojan_' || md5(o.op || o.l || o.r));
		END LOOP;
	END $$;
	RESET ROLE;
	-- the trap springs for a query that does not name pg_catalog
	SET ROLE exporter;
	SELECT 1.5::float8 / 2;
	RESET ROLE;
});
is(sql(q{SELECT string_agg(who || ' ran ' || op, ', ') FROM public.loot}),
	'exporter ran /(float8, integer)', 'the planted operator runs as the exporter, unqualified');
sql(q{TRUNCATE public.loot});

# ---- the exporter ----
my $port = PostgreSQL::Test::Cluster::get_free_port();
my ($exp_out, $exp_err) = ('', '');
local $ENV{DATA_SOURCE_NAME} = sprintf(
	'host=%s port=%d user=exporter dbname=postgres sslmode=disable',
	$node->host, $node->port);
my $exp = IPC::Run::start(
	[
		$exporter, "--web.listen-address=127.0.0.1:$port",
		"--extend.query-path=$contrib/queries.yaml", '--log.level=warn'
	],
	'<', \undef, '>', \$exp_out, '2>', \$exp_err);
END { $exp->kill_kill if $exp && $exp->pumpable; }

# scrape(): metric => value, and family => type, of one scrape of
# /metrics, without the label "server" (the exporter's name of the DSN)
sub scrape
{
	my $res = HTTP::Tiny->new(timeout => 30)->get("http://127.0.0.1:$port/metrics");
	return undef unless $res->{success};
	my (%v, %type);
	for my $line (split /\n/, $res->{content})
	{
		if ($line =~ /^# TYPE (\S+) (\S+)$/)
		{
			$type{$1} = $2;
		}
		elsif ($line =~ /^(fencing\w*|pg_exporter\w*)(?:\{(.*)\})? (\S+)$/)
		{
			my ($name, $labels, $value) = ($1, $2 // '', $3);
			my @l = sort grep { !/^server=/ } ($labels =~ /(\w+="[^"]*")/g);
			$v{ $name . (@l ? '{' . join(',', @l) . '}' : '') } = $value;
		}
	}
	return { v => \%v, type => \%type };
}

my $m;
wait_until('the exporter to serve fencing metrics', 120, sub {
	$m = scrape();
	return $m && exists $m->{v}{'fencing_counting{datname="postgres"}'};
});
diag($exp_err) if $exp_err ne '';

my $db = 'datname="postgres"';
my %expected = (
	"fencing_counting{$db}" => 1,
	"fencing_leases{$db}" => 4,
	"fencing_leases_held{$db}" => 2,
	# l_held, l_over twice, l_cycle, l_forced
	"fencing_acquires_total{$db}" => 5,
	"fencing_renewals_total{$db}" => 1,
	"fencing_releases_total{$db}" => 1,
	"fencing_force_releases_total{$db}" => 1,
	"fencing_expirations_total{$db}" => 1,
	"fencing_takeovers_total{$db}" => 1,
	"fencing_old_band_refusals_total{$db}" => 1,
	"fencing_stale_writes_refused_total{check=\"fence_advance\",$db}" => 2,
	"fencing_stale_writes_refused_total{check=\"fence_guard\",$db}" => 1,
	"fencing_stale_writes_refused_total{check=\"claim_guard\",$db}" => 1,
	# w0, w1, w2; only w0's has ended
	"fencing_waits_total{$db}" => 3,
	"fencing_wait_timeouts_total{$db}" => 1,
	"fencing_wait_seconds_bucket{$db,le=\"0.001\"}" => 0,
	"fencing_wait_seconds_bucket{$db,le=\"0.01\"}" => 0,
	"fencing_wait_seconds_bucket{$db,le=\"300\"}" => 1,
	"fencing_wait_seconds_bucket{$db,le=\"+Inf\"}" => 1,
	"fencing_wait_seconds_count{$db}" => 1,
	'pg_exporter_last_scrape_error' => 0,
);
for my $lease (qw(l_cycle l_forced l_held l_over))
{
	my $l = "$db,kind=\"lease\",lease=\"$lease\",slot=\"0\"";
	$expected{"fencing_lease_held{$l}"} = $lease =~ /held|over/ ? 1 : 0;
	$expected{"fencing_lease_waiters{$l}"} = $lease eq 'l_held' ? 2 : 0;
	# the holders after the first
	$expected{"fencing_lease_holder_changes_total{$l}"} =
	  $lease eq 'l_over' ? 1 : 0;
}
for my $k (sort keys %expected)
{
	is($m->{v}{$k}, $expected{$k}, "$k $expected{$k}");
}
is(sql(q{SELECT count(*) FROM public.loot}), 0,
	'no planted operator ran during the scrape');

# nothing else of ours, and each family with its type
my @ours = grep { /^fencing/ } keys %{ $m->{v} };
my $remaining = grep { /^fencing_lease_remaining_seconds/ } @ours;
is($remaining, 4, 'fencing_lease_remaining_seconds for each lease');
cmp_ok($m->{v}{"fencing_lease_remaining_seconds{$db,kind=\"lease\",lease=\"l_held\",slot=\"0\"}"},
	'>', 0, 'the held lease has time left');
is($m->{v}{"fencing_lease_remaining_seconds{$db,kind=\"lease\",lease=\"l_cycle\",slot=\"0\"}"},
	0, 'the free lease has none');
cmp_ok($m->{v}{"fencing_wait_seconds_sum{$db}"}, '>=', 0.02, 'the wait lasted its 20 ms');
my $reset = sql(q{SELECT EXTRACT(EPOCH FROM stats_reset) FROM fencing_monitor.stats_info});
cmp_ok(abs($m->{v}{"fencing_stats_reset_timestamp_seconds{$db}"} - $reset), '<', 0.001,
	'fencing_stats_reset_timestamp_seconds is stats_info.stats_reset');
my @unexpected = grep {
	!exists $expected{$_}
	  && !/^fencing_lease_remaining_seconds\{/
	  && !/^fencing_wait_seconds_(bucket|sum)\{/
	  && !/^fencing_stats_reset_timestamp_seconds\{/
} @ours;
is_deeply(\@unexpected, [], 'no other fencing metric');
my %types = (
	fencing_counting => 'gauge',
	fencing_stats_reset_timestamp_seconds => 'gauge',
	fencing_leases => 'gauge',
	fencing_leases_held => 'gauge',
	fencing_lease_held => 'gauge',
	fencing_lease_remaining_seconds => 'gauge',
	fencing_lease_waiters => 'gauge',
	fencing_wait_seconds => 'histogram',
	map { ("fencing_${_}_total" => 'counter') }
	  qw(acquires renewals releases force_releases expirations takeovers
	  old_band_refusals waits wait_timeouts stale_writes_refused
	  lease_holder_changes));
is_deeply({ map { $_ => $m->{type}{$_} } grep { /^fencing/ } keys %{ $m->{type} } },
	\%types, 'each metric family has its type');

# the waiters end; the held lease is free once its holder releases it
$node->safe_psql('postgres', q{
	SELECT pg_terminate_backend(pid) FROM fencing_monitor.waiters});
$_->finish for @waiters;

# ---- without shared_preload_libraries the counters are off on 13 to 16,
# and say so ----
if ($node->pg_version >= 17)
{
	$exp->kill_kill;
	$node->stop;
	done_testing();
	exit 0;
}
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->restart;
wait_until('the exporter to scrape the restarted server', 120, sub {
	$m = scrape();
	return $m && defined $m->{v}{"fencing_counting{$db}"}
	  && $m->{v}{"fencing_counting{$db}"} eq '0';
});
is($m->{v}{"fencing_acquires_total{$db}"}, 'NaN', 'counters are NaN when off');
is($m->{v}{"fencing_stale_writes_refused_total{check=\"fence_guard\",$db}"}, 'NaN',
	'refusals too');
is($m->{v}{"fencing_leases{$db}"}, 4, 'the lease gauges still count');
is(scalar(grep { /^fencing_wait_seconds/ } keys %{ $m->{v} }), 0, 'no wait histogram');
like(sql(q{SELECT detail FROM fencing_monitor.stats_info}),
	qr/shared_preload_libraries/, 'stats_info says why');
is(sql(q{SELECT count(*) FROM public.loot}), 0,
	'no planted operator ran during the scrapes');

$exp->kill_kill;
$node->stop;
done_testing();
