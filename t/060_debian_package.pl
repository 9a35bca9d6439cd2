# Copyright: fencing extension authors
#
# 060_debian_package.pl: release metadata and the Debian package.
#
# 1. test/release_check.sh accepts the tree, and rejects copies whose
#    versions disagree (META.json vs fencing.control, CHANGELOG.md,
#    debian/changelog) or whose META.json breaks the PGXN spec.
# 2. The Debian package: test/debian/build_and_install.sh builds it with
#    dpkg-buildpackage from a copy of the tree (pg_buildext, control.in,
#    the pgxs_loop sequence) and unpacks it into a private root next to a
#    relocated copy of the server.  The package must hold exactly the
#    extension's files for this PostgreSQL major, identical to the tree's,
#    and a cluster run from the private root must CREATE EXTENSION from the
#    package's files (its fencing.so is the one mapped in the backend) and
#    play a lease and a fenced write; the package's fencing-lock (linked
#    against libpq, which the package depends on) runs a command under a
#    lease of that cluster.  The system's installation is never
#    touched.  Skipped, saying which, when the packaging tools are missing.
use strict;
use warnings;

use File::Copy;
use IPC::Run;
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $started = time;
my $tmp = PostgreSQL::Test::Utils::tempdir();

sub control_default_version
{
	my ($dir) = @_;
	my ($v) = slurp_file("$dir/fencing.control") =~ /^default_version\s*=\s*'([^']*)'/m;
	return $v;
}

my $default_version = control_default_version('.');
ok(defined $default_version, "fencing.control's default_version is $default_version");

# ---------------------------------------------------------------------------
# release_check.sh

my ($out, $err);
my $ok = IPC::Run::run([ 'bash', 'test/release_check.sh' ], '>', \$out, '2>', \$err);
ok($ok, 'test/release_check.sh accepts the tree') or diag("$out$err");
like($out, qr/release_check: ok \(fencing \d+\.\d+\.\d+, extension version \Q$default_version\E\)/,
	'and names the versions it checked');

# copies with one thing broken each
my @files = ('fencing.control', 'META.json', 'CHANGELOG.md', 'README.md',
	"fencing--$default_version.sql", 'debian/changelog', 'src/fencing.c');

sub broken_copy
{
	my ($name, $edit) = @_;
	my $dir = "$tmp/release_$name";
	make_path($dir);
	for my $f (@files)
	{
		next unless -e $f;
		my ($sub) = $f =~ m{^(.*)/};
		make_path("$dir/$sub") if $sub;
		copy($f, "$dir/$f") or die "copy $f: $!";
	}
	$edit->($dir);
	my ($o, $e);
	my $passed = IPC::Run::run([ 'bash', 'test/release_check.sh', $dir ],
		'>', \$o, '2>', \$e);
	return ($passed, "$o$e");
}

sub edit_file
{
	my ($path, $from, $to) = @_;
	my $text = slurp_file($path);
	$text =~ s/$from/$to/ or die "no $from in $path";
	open(my $fh, '>', $path) or die $!;
	print $fh $text;
	close($fh);
}

my ($passed, $msg) = broken_copy('control', sub {
	edit_file("$_[0]/fencing.control", qr/default_version = '[^']*'/, "default_version = '9.9'");
});
ok(!$passed, 'release_check rejects a default_version that META.json does not carry');
like($msg, qr/does not carry fencing.control's default_version 9\.9/, 'and says so');
like($msg, qr/fencing--9\.9\.sql .* does not exist/, 'and misses the install script');

($passed, $msg) = broken_copy('meta', sub {
	edit_file("$_[0]/META.json", qr/"license": "postgresql"/, '"license": "PostgreSQL License"');
	edit_file("$_[0]/META.json", qr/"release_status": "\w+"/, '"release_status": "final"');
});
ok(!$passed, 'release_check rejects META.json that breaks the PGXN spec');
like($msg, qr/license 'PostgreSQL License' is not one of the spec's names/, 'a bad license name');
like($msg, qr/release_status must be stable, testing or unstable/, 'a bad release status');

($passed, $msg) = broken_copy('changelog', sub {
	edit_file("$_[0]/CHANGELOG.md", qr/^## \d+\.\d+\.\d+/m, '## 0.9.0');
	edit_file("$_[0]/debian/changelog", qr/^fencing \([^)]*\)/, 'fencing (0.9.0-1)')
	  if -e "$_[0]/debian/changelog";
});
ok(!$passed, 'release_check rejects changelogs without this version');
like($msg, qr/CHANGELOG.md has no '## \d+\.\d+\.\d+' section/, 'CHANGELOG.md');
like($msg, qr{debian/changelog: version 0\.9\.0-1 is not}, 'debian/changelog');

# ---------------------------------------------------------------------------
# the Debian package

my $pg_config = `pg_config --bindir`;
chomp $pg_config;
my ($major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
my $package = "postgresql-$major-fencing";

my @missing;
for my $tool (qw(dpkg-buildpackage dpkg-deb dpkg-checkbuilddeps dh pg_buildext))
{
	push @missing, $tool
	  unless grep { -x "$_/$tool" } split(/:/, $ENV{PATH}), '/usr/bin';
}
push @missing, 'the pgxs_loop debhelper sequence (postgresql-server-dev-all)'
  unless -e '/usr/share/perl5/Debian/Debhelper/Sequence/pgxs_loop.pm';
my $builddeps = '';
if (!@missing)
{
	my ($o, $e);
	IPC::Run::run([ 'dpkg-checkbuilddeps', '-Pnocheck' ], '>', \$o, '2>', \$e)
	  or $builddeps = "$o$e";
}

SKIP:
{
	skip "packaging tools missing: @missing (apt-get install dpkg-dev debhelper postgresql-server-dev-all)", 1
	  if @missing;
	skip "build dependencies missing: $builddeps", 1 if $builddeps;

	my $work = "$tmp/deb";
	# a clean make environment for debian/rules, not that of the make
	# that runs this test
	local $ENV{MAKEFLAGS};
	local $ENV{MFLAGS};
	local $ENV{MAKELEVEL};
	delete @ENV{qw(MAKEFLAGS MFLAGS MAKELEVEL)};
	my ($bo, $be);
	my $built = IPC::Run::run([ 'bash', 'test/debian/build_and_install.sh', $work, $major ],
		'>', \$bo, '2>', \$be);
	ok($built, "dpkg-buildpackage built the packages and they unpacked")
	  or diag("$bo$be");
	note sprintf('package built and unpacked after %d s', time - $started);
	my ($root) = $bo =~ /^root=(.*)$/m;
	my ($deb) = $bo =~ /^deb=(.*)$/m;
	BAIL_OUT('no package to test') unless $built && $root && $deb;

	like($deb, qr{/\Q$package\E_[^/]*_[a-z0-9]+\.deb$}, "the binary package is $package");
	# one package per major that pg_buildext finds (debian/pgversions: 15+)
	my @majors = split ' ', `pg_buildext supported-versions`;
	ok(scalar(grep { $_ eq $major } @majors), "pg_buildext finds PostgreSQL $major (of: @majors)");
	for my $v (@majors)
	{
		my ($d) = $bo =~ /^deb_\Q$v\E=(.*)$/m;
		ok($d && -f $d, "a postgresql-$v-fencing package was built");
		my $fields_v = $d ? `dpkg-deb -f '$d' Depends` : '';
		like($fields_v, qr/(^|, )postgresql-$v( |,|$)/, "postgresql-$v-fencing depends on postgresql-$v");
	}

	# fields
	my %f;
	my $fields = `dpkg-deb -f '$deb'`;
	$f{$1} = $2 while $fields =~ /^(\S+): (.*)$/mg;
	is($f{Package}, $package, "Package: $package (from debian/control.in)");
	is($f{Source}, 'fencing', 'Source: fencing');
	my ($meta_version) = slurp_file('META.json') =~ /"version"\s*:\s*"([^"]+)"/;
	like($f{Version}, qr/^\Q$meta_version\E-\d+/, "Version $f{Version} carries META.json's $meta_version");
	like($f{Depends}, qr/(^|, )postgresql-$major( |,|$)/, "Depends on postgresql-$major");
	like($f{Depends}, qr/(^|, )libpq5( |,|$)/, 'Depends on libpq5 (fencing-lock)');

	# contents
	my @paths = map { (split / +/, $_, 6)[5] =~ s{^\./}{/}r } split /\n/, `dpkg-deb -c '$deb'`;
	s/ -> .*$// for @paths;
	my %has = map { $_ => 1 } @paths;
	for my $p ("/usr/lib/postgresql/$major/lib/fencing.so",
		"/usr/share/postgresql/$major/extension/fencing.control",
		"/usr/share/postgresql/$major/extension/fencing--$default_version.sql",
		"/usr/lib/postgresql/$major/bin/fencing-lock")
	{
		ok($has{$p}, "the package has $p");
	}
	my @stray = grep {
		!m{^/(usr/?|usr/lib/?|usr/share/?)?$}
		  && !m{^/usr/lib/postgresql/(\Q$major\E/?)?$}
		  && !m{^/usr/lib/postgresql/\Q$major\E/lib/}
		  && !m{^/usr/lib/postgresql/\Q$major\E/bin/(fencing-lock)?$}
		  && !m{^/usr/share/postgresql/(\Q$major\E/?)?$}
		  && !m{^/usr/share/postgresql/\Q$major\E/extension/}
		  && !m{^/usr/share/doc/?$}
		  && !m{^/usr/share/doc/\Q$package\E/}
	} @paths;
	is_deeply(\@stray, [], "nothing outside PostgreSQL ${major}'s directories and the package's docs");
	my @sql = sort grep { m{/extension/fencing--.*\.sql$} } @paths;
	my @tree_sql = sort map { "/usr/share/postgresql/$major/extension/$_" } glob('fencing--*.sql');
	is_deeply(\@sql, \@tree_sql, 'every install and update script of the tree is packaged');
	for my $f ('fencing.control', "fencing--$default_version.sql")
	{
		is(slurp_file("$root/usr/share/postgresql/$major/extension/$f"), slurp_file($f),
			"the packaged $f is the tree's");
	}

	# ---------------------------------------------------------------------
	# a fresh cluster run from the private root

	my $node = PostgreSQL::Test::Cluster->new('pkg',
		install_path => "$root/usr/lib/postgresql/$major");
	$node->init;
	# the package's library preloaded: its counters count on every major
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
	$node->start;
	is($node->safe_psql('postgres',
			"SELECT default_version FROM pg_available_extensions WHERE name = 'fencing'"),
		$default_version, 'the packaged extension is available');
	$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
	is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"),
		$default_version, "CREATE EXTENSION fencing installed version $default_version");

	my $maps = $node->safe_psql('postgres',
		"SELECT fencing.next_token(); SELECT pg_read_file('/proc/self/maps')");
	my @so = sort keys %{ { map { $_ => 1 } $maps =~ m{(\S*/fencing\.so)$}mg } };
	is_deeply(\@so, ["$root/usr/lib/postgresql/$major/lib/fencing.so"],
		"the backend mapped the package's fencing.so, and no other");

	# smoke test: a lease, a fenced write, a takeover, a refused stale write
	$node->safe_psql('postgres', q{
		CREATE TABLE docs (id int PRIMARY KEY, body text, fence bigint);
		INSERT INTO docs VALUES (1, 'empty', NULL);
		CREATE TABLE notes (id int PRIMARY KEY, body text, fence bigint);
		CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON notes
			FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
		INSERT INTO notes VALUES (1, 'empty', 0);
	});
	my $ta = $node->safe_psql('postgres', "SELECT fencing.lease_acquire('pkg', 'A', '1 hour')");
	like($ta, qr/^\d+$/, "A acquired lease pkg with token $ta");
	is($node->safe_psql('postgres', qq{
			WITH w AS (
			UPDATE docs SET body = 'by A', fence = fencing.fence_advance(fence, $ta)
			 WHERE id = 1 RETURNING 1)
			SELECT fencing.expect_rows(count(*)) FROM w}), '1', "A's fenced write went through");
	is($node->safe_psql('postgres', "SELECT fencing.lease_force_release('pkg')"), 't',
		'the lease is taken from A (force_release)');
	my $tb = $node->safe_psql('postgres', "SELECT fencing.lease_acquire('pkg', 'B', '1 hour')");
	cmp_ok($tb, '>', $ta, "B acquired it with a newer token $tb");
	$node->safe_psql('postgres', qq{
		UPDATE docs SET body = 'by B', fence = fencing.fence_advance(fence, $tb) WHERE id = 1;
		BEGIN; SET LOCAL fencing.token = '$tb'; UPDATE notes SET body = 'by B' WHERE id = 1; COMMIT;
	});
	my ($rc, $o2, $e2) = $node->psql('postgres', qq{\\set VERBOSITY verbose
		UPDATE docs SET body = 'late A', fence = fencing.fence_advance(fence, $ta) WHERE id = 1});
	like($e2, qr/LF001: fencing token $ta is stale/, "A's late write is refused with LF001");
	($rc, $o2, $e2) = $node->psql('postgres', qq{\\set VERBOSITY verbose
		BEGIN; SET LOCAL fencing.token = '$ta'; UPDATE notes SET body = 'late A' WHERE id = 1; COMMIT;});
	like($e2, qr/LF001: fencing token $ta is stale/, 'and so is its write through fence_guard');
	is($node->safe_psql('postgres',
			"SELECT d.body || '/' || d.fence || ' ' || n.body || '/' || n.fence FROM docs d, notes n"),
		"by B/$tb by B/$tb", "B's writes stand");
	is($node->safe_psql('postgres',
			"SELECT holder || ' ' || state || ' ' || token FROM fencing.lease_status WHERE name = 'pkg'"),
		"B held $tb", 'lease_status shows B holding the lease');
	is($node->safe_psql('postgres',
			'SELECT fence_advance_refusals, fence_guard_refusals FROM fencing_monitor.stats'),
		'1|1', 'fencing_monitor.stats counted the two refused writes');

	# the package's fencing-lock, against the package's extension
	my $lock = "$root/usr/lib/postgresql/$major/bin/fencing-lock";
	my ($lo, $le);
	IPC::Run::run([ $lock, '--version' ], '>', \$lo, '2>', \$le);
	is($lo, "fencing-lock (fencing) $default_version\n", "the package's fencing-lock runs");
	IPC::Run::run(
		[
			$lock, '-h', $node->host, '-p', $node->port, '-d', 'postgres',
			'pkg-lock', '--', 'sh', '-c', 'echo "$FENCING_LEASE $FENCING_TOKEN"'
		],
		'>', \$lo, '2>', \$le);
	my $pkg_token = $node->safe_psql('postgres',
		"SELECT state || ' ' || token FROM fencing.lease_status WHERE name = 'pkg-lock'");
	like("$lo|$pkg_token", qr/^pkg-lock (\d+)\n\|free \1$/,
		'and runs a command under a lease of the packaged extension, then releases it')
	  or diag("$lo$le");
	$node->stop;
	note sprintf('060_debian_package took %d s', time - $started);
}

done_testing();
