# Copyright: fencing extension authors
#
# 070_patroni.pl: tokens under real Patroni failovers.  Patroni 3 and etcd 3.4
# from Debian's archive, one etcd member and three Patroni members on
# 127.0.0.1, all running the server under test (pg_config on PATH, as
# Patroni's bin_dir), asynchronous streaming, no WAL archive: Patroni's
# default.  Four clients follow the leader (Patroni's REST API, then
# target_session_attrs=read-write) and run a fenced workload
# (t/patroni/workload.py): acquire a lease, write the lease's row with the
# token (fence_advance or the fence_guard trigger), release; one cycle in
# four a client stalls with its token and writes with it later, as a stale
# holder.  Every answer goes to a history file.
#
# Scenario "clock" (the default configuration), five failovers:
#   1. kill -9 of the leader (Patroni and PostgreSQL); it rejoins with
#      pg_rewind;
#   2. SIGSTOP of the leader (a frozen machine: a partition), SIGCONT once
#      another member leads; it is demoted and rejoins;
#   3. and 4. a double failover: the third member's Patroni is frozen, the
#      leader is killed, the second member is promoted, and killed as soon
#      as it acknowledged its first token; the third member, which never
#      received a byte from it, is promoted to the same timeline ID.  The
#      first leader rejoins with pg_rewind; the second is reinitialized
#      (Patroni sees the same timeline and would not rewind it);
#   5. kill -9 of the leader.
# Scenario "epoch" (fencing.epoch_file, contrib/patroni/fencing-epoch as
# Patroni's pre_promote, an etcd counter): the double failover again, with
# the clock of the member promoted first an hour ahead (libfaketime).
# Scenario "etcd3" (clock mode, Patroni's etcd3 module, which is what etcd
# 3.4 serves by default): the leader is frozen past its TTL until another
# member leads and its clients acknowledge tokens, then resumes.  Patroni
# 3.0.2's etcd3 module lets the resumed leader write its key back
# (patroni/patroni#2689) when its main loop runs before its watcher thread
# has caught up: it stays primary, and the member promoted meanwhile is
# demoted and rewound, its branch discarded.  That race goes either way,
# so the test writes the key back itself right before the resume, as the
# module does when it wins; the promoted member's Patroni can still write
# its own over it (the same unconditional write), and then the freeze is
# repeated, up to three times.  The clock floor keeps the resumed leader's
# tokens above the discarded branch's.
#
# After each failover and at the end, over the whole history: no token
# acknowledged twice; no token below one acknowledged before it was asked
# for (globally, and per lease); no write accepted (acknowledged, or in the
# audit table) with a token below one that had already written that row
# and that is still there (in the audit); the audit agrees with the
# answers.  Acknowledged writes lost with an asynchronous tail or a
# discarded branch are allowed and reported.  A write accepted below newer
# writes that were all lost is reported apart ("accepted over lost
# writes"): in the clock and epoch scenarios there must be none; in the
# etcd3 one they are the resumed leader's holders from before the freeze,
# over writes that only the discarded branch had (see docs/tokens.md).
#
# FENCING_PATRONI_SCENARIOS="clock epoch etcd3" (the default) picks scenarios;
# FENCING_PATRONI_STOP_ON_FAIL=0 runs on after a broken token check.
# Outside test/run.sh, the test is skipped when patroni, etcd or
# etcdctl are missing; under test/run.sh (FENCING_REQUIRE_HA_TOOLS=1),
# that is a failure.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Cwd qw(abs_path);
use File::Copy qw(copy);
use File::Path qw(rmtree);
use HTTP::Tiny;
use JSON::PP;
use POSIX qw(WNOHANG);
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC usleep);

sub mono { return clock_gettime(CLOCK_MONOTONIC); }

my $t_begin = mono();
# a backstop for a hung run, not a speed requirement: every wait has its own
# bound, and a loaded machine may take several times the quiet run's 130 s
my $budget  = $ENV{FENCING_PATRONI_BUDGET} // 1200;    # seconds, all scenarios

my %tool;
for my $t (qw(patroni etcd etcdctl))
{
	my $p = `command -v $t 2>/dev/null`;
	chomp $p;
	$tool{$t} = $p if $p ne '';
}
my @missing = grep { !$tool{$_} } qw(patroni etcd etcdctl);
if (@missing)
{
	if ($ENV{FENCING_REQUIRE_HA_TOOLS})
	{
		BAIL_OUT("@missing not found, although test/run.sh installs them "
			  . "(FENCING_DEB_PACKAGES: patroni, etcd-server, etcd-client)");
	}
	plan skip_all => "@missing not installed (Debian: patroni etcd-server etcd-client)";
}
my $python = -x '/usr/bin/python3' ? '/usr/bin/python3' : 'python3';
my $faketime = (grep { -e $_ } glob('/usr/lib/*/faketime/libfaketime.so.1'))[0];

my $bindir = `pg_config --bindir`;
chomp $bindir;
die "pg_config --bindir gave nothing" unless -x "$bindir/postgres";

my @scenarios = split ' ', ($ENV{FENCING_PATRONI_SCENARIOS} // 'clock epoch etcd3');
my $srcdir   = abs_path($ENV{TESTDIR} // '.');
my $workload = "$srcdir/t/patroni/workload.py";
my $epochcmd = "$srcdir/contrib/patroni/fencing-epoch";
-f $workload && -x $epochcmd or die "missing $workload or $epochcmd";
my $tmp = PostgreSQL::Test::Utils::tempdir;
note "server under test: $bindir; work directory $tmp";

my $http = HTTP::Tiny->new(timeout => 1);
my (@children, %member, $etcd);
my $scenario;    # the running one: { name, dir, members => [names], ... }

# ---------------------------------------------------------------------------
# processes

# start a command in its own process group, output to $log
sub spawn
{
	my ($log, $env, @cmd) = @_;
	my $pid = fork;
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		POSIX::setsid();
		open STDIN,  '<',  '/dev/null';
		open STDOUT, '>>', $log or POSIX::_exit(126);
		open STDERR, '>&', \*STDOUT;
		$ENV{$_} = $env->{$_} for keys %$env;
		exec @cmd or POSIX::_exit(127);
	}
	push @children, $pid;
	return $pid;
}

sub reap { 1 while waitpid(-1, WNOHANG) > 0; }

sub alive
{
	my ($pid) = @_;
	return 0 unless $pid;
	reap();
	open my $fh, '<', "/proc/$pid/stat" or return 0;
	my $stat = <$fh>;
	return $stat =~ /^\d+ \(.*\) ([A-Za-z])/ && $1 ne 'Z';
}

sub slurp_first_line
{
	my ($f) = @_;
	open my $fh, '<', $f or return undef;
	my $l = <$fh>;
	chomp $l if defined $l;
	return $l;
}

sub postmaster_pid
{
	my ($m) = @_;
	my $pid = slurp_first_line("$m->{data}/postmaster.pid");
	return ($pid && $pid =~ /^\d+$/ && alive($pid)) ? $pid : undef;
}

# the postmaster and its children (each child runs in a session of its own,
# so the postmaster's process group does not reach them)
sub pg_processes
{
	my ($pm) = @_;
	my @kids;
	for my $stat (glob('/proc/[0-9]*/stat'))
	{
		open my $fh, '<', $stat or next;
		my $l = <$fh> // next;
		push @kids, $1 if $l =~ /^(\d+) \(.*\) [A-Za-z] (\d+) / && $2 == $pm;
	}
	return @kids;
}

# signal a member's Patroni, and with $pg its PostgreSQL: the postmaster
# first (so that it forks no more), then every backend, walsender,
# walreceiver, auxiliary process
sub signal_member
{
	my ($m, $sig, $pg) = @_;
	my @pg;
	if ($pg && (my $pm = postmaster_pid($m)))
	{
		kill $sig, $pm;
		@pg = ($pm, pg_processes($pm));
		kill $sig, @pg[ 1 .. $#pg ];
		# children forked while the postmaster got the signal
		my %seen = map { $_ => 1 } @pg;
		my @late = grep { !$seen{$_} } pg_processes($pm);
		kill $sig, @late;
		push @pg, @late;
	}
	kill $sig, $m->{pid} if $m->{pid};
	if ($sig eq 'KILL')
	{
		my $until = mono() + 10;
		usleep(20_000) while grep({ alive($_) } $m->{pid}, @pg) && mono() < $until;
		$m->{pid} = undef;
	}
	elsif ($sig eq 'STOP')
	{
		# make sure it is really frozen: every process stopped
		my @running;
		my $until = mono() + 5;
		while (1)
		{
			@running = grep { state_of($_) !~ /^[TtZX]?$/ } $m->{pid} // (), @pg;
			last if !@running || mono() > $until;
			usleep(10_000);
		}
		give_up("$m->{name}: processes @running did not stop") if @running;
	}
	return scalar @pg;
}

sub state_of
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/stat" or return '';
	my $l = <$fh> // '';
	return $l =~ /^\d+ \(.*\) ([A-Za-z])/ ? $1 : '';
}

sub start_member
{
	my ($m) = @_;
	# not the test framework's PGAPPNAME: walreceivers must show member names
	my %env = (PATH => "$bindir:$ENV{PATH}", PGAPPNAME => $m->{name});
	$m->{pid} = spawn($m->{log}, \%env, $tool{patroni}, $m->{conf});
	$m->{starts}++;
}

# Patroni's bin_dir for a member whose PostgreSQL sees a skewed clock:
# postgres runs under libfaketime, every other program is the real one
sub faketime_bindir
{
	my ($m) = @_;
	my $dir = "$m->{dir}/bin";
	mkdir $dir;
	for my $prog (glob("$bindir/*"))
	{
		my $base = (split m{/}, $prog)[-1];
		next if $base eq 'postgres';
		symlink($prog, "$dir/$base") or die "symlink $prog: $!";
	}
	write_file("$dir/postgres",
		"#!/bin/sh\nLD_PRELOAD=$faketime FAKETIME='$m->{faketime}' FAKETIME_DONT_RESET=1 "
		  . "exec $bindir/postgres \"\$@\"\n", 0755);
	return $dir;
}

sub stop_everything
{
	for my $name (sort keys %member)
	{
		my $m = $member{$name};
		kill 'CONT', $m->{pid} if $m->{pid};
		signal_member($m, 'CONT', 1);
		signal_member($m, 'KILL', 1);
	}
	kill 'KILL', $etcd if $etcd;
	kill 'KILL', $_ for @children;
	reap();
}
END
{
	local $?;    # reaping children must not change the test's exit status
	stop_everything() if %member || $etcd;
}

sub remaining { return $budget - (mono() - $t_begin); }

sub tail_file
{
	my ($f, $n) = @_;
	open my $fh, '<', $f or return "($f: $!)\n";
	my @l = <$fh>;
	splice @l, 0, @l - $n if @l > $n;
	return join '', @l;
}

# what a reader needs when something fails
sub dump_logs
{
	my ($why) = @_;
	diag "==== $why: logs follow";
	diag "---- etcd ($tmp/etcd.log)\n" . tail_file("$tmp/etcd.log", 40);
	for my $name (sort keys %member)
	{
		my $m = $member{$name};
		diag "---- Patroni $name ($m->{log})\n" . tail_file($m->{log}, 80);
		my @pg = sort glob("$m->{dir}/pglog/*.log");
		diag "---- PostgreSQL $name ($pg[-1])\n" . tail_file($pg[-1], 60) if @pg;
	}
}

# fail with a diagnosis, dump logs, stop
sub give_up
{
	my ($msg) = @_;
	fail($msg);
	dump_logs($msg);
	stop_everything();
	done_testing();
	exit 1;
}

# poll $cond (returns true when done) every 0.1 s for at most $secs
sub wait_until
{
	my ($what, $secs, $cond) = @_;
	my $until = mono() + $secs;
	$until = mono() + remaining() if remaining() < $secs;
	while (1)
	{
		my $r = $cond->();
		return $r if $r;
		give_up("timed out waiting for $what ("
			  . ($secs < remaining() ? "$secs s" : 'time budget') . ')')
		  if mono() > $until;
		usleep(100_000);
	}
}

# ---------------------------------------------------------------------------
# Patroni and PostgreSQL

sub rest
{
	my ($m, $path) = @_;
	my $r = $http->get("http://127.0.0.1:$m->{rest}$path");
	my $body = $r->{content} // '';
	my $json = eval { decode_json($body) };
	return ($r->{status}, $json);
}

sub psql
{
	my ($m, $sql, %opt) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			"$bindir/psql", '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
			'-h', '127.0.0.1', '-p', $m->{pg}, '-U', 'postgres', '-d', 'postgres',
			'-c', $sql
		],
		'>', \$stdout, '2>', \$stderr,
		IPC::Run::timeout($opt{timeout} // 10));
	chomp $stdout if defined $stdout;
	return $ok ? $stdout : undef;
}

# the member whose Patroni holds the leader key and whose PostgreSQL takes
# writes (undef if none)
sub current_leader
{
	for my $name (@{ $scenario->{members} })
	{
		my $m = $member{$name};
		next unless $m->{pid} && alive($m->{pid});
		my ($code) = rest($m, '/primary');
		next unless $code && $code == 200;
		my $ro = psql($m, 'SELECT pg_is_in_recovery()', timeout => 3);
		return $name if defined $ro && $ro eq 'f';
	}
	return undef;
}

sub wait_leader
{
	my ($what, @not) = @_;
	my %skip = map { $_ => 1 } @not;
	return wait_until("a new leader ($what)", 60, sub {
		my $l = current_leader();
		return ($l && !$skip{$l}) ? $l : undef;
	});
}

# $name streams from $leader, and Patroni calls it a running replica
sub streaming
{
	my ($leader, $name) = @_;
	my ($code) = rest($member{$name}, '/replica');
	return 0 unless $code && $code == 200;
	my $s = psql($member{$leader},
		"SELECT state FROM pg_stat_replication WHERE application_name = '$name'",
		timeout => 3);
	return defined $s && $s =~ /streaming/;
}

sub wait_streaming
{
	my ($leader, @names) = @_;
	for my $name (@names)
	{
		wait_until("$name to stream from $leader", 60, sub { streaming($leader, $name) });
	}
}

# whether $name streams from $leader within $secs, without failing
sub streams_within
{
	my ($leader, $name, $secs) = @_;
	my $until = mono() + $secs;
	while (mono() < $until)
	{
		return 1 if streaming($leader, $name);
		usleep(100_000);
	}
	return 0;
}

# reinitialize members (kill, empty data directory, start) until each
# streams from $leader.  Under load, Patroni 3.0.2 sometimes leaves a
# reinitialized replica with no WAL receiver ("waiting for WAL to become
# available" for good, while it reports following the leader); a member
# gets three tries of 60 s, as an operator would reinitialize it again.
sub reinit_until_streaming
{
	my ($leader, @names) = @_;
	for my $name (@names)
	{
		my $m = $member{$name};
		for my $try (1 .. 3)
		{
			signal_member($m, 'KILL', 1);
			# whatever still runs on its configuration or data directory (a
			# Patroni whose pid was lost, a postmaster it restarted): seen
			# starting the old data again over the emptied directory
			for (1 .. 50)
			{
				system('pkill', '-KILL', '-f', $_) for ($m->{conf}, $m->{data});
				last unless system('pgrep', '-f', $m->{data}) == 0
				  || system('pgrep', '-f', $m->{conf}) == 0;
				usleep(100_000);
			}
			rmtree($m->{data});
			start_member($m);
			last if streams_within($leader, $name, 60);
			if ($try == 3)
			{
				# the member's infrastructure, not the token guarantee this
				# scenario checks: leave it out of the rest of the scenario
				diag "$name did not stream from $leader after 3 reinitializations: left out of the rest of the scenario";
				signal_member($m, 'KILL', 1);
				@{ $scenario->{members} } = grep { $_ ne $name } @{ $scenario->{members} };
				last;
			}
			note "$name reinitialized, not streaming after 60 s: reinitialized again";
		}
	}
}

sub timeline_of
{
	my ($m) = @_;
	my @h = sort glob("$m->{data}/pg_wal/*.history");
	return 1 unless @h;
	return hex(substr((split m{/}, $h[-1])[-1], 0, 8));
}

sub rewinds
{
	my ($m) = @_;
	open my $fh, '<', $m->{log} or return 0;
	return scalar grep { /pg_rewind exit code=0/ } <$fh>;
}

# ---------------------------------------------------------------------------
# history

# acknowledged tokens per node since $since (monotonic seconds); the
# history files are read incrementally
sub acked_since
{
	my ($since, $node) = @_;
	my $acks = $scenario->{acks} //= [];
	for my $f (glob("$scenario->{hist}/*.tsv"))
	{
		open my $fh, '<', $f or next;
		seek $fh, $scenario->{offset}{$f} // 0, 0;
		while (my $l = <$fh>)
		{
			last unless $l =~ /\n$/;    # a line still being written
			$scenario->{offset}{$f} += length $l;
			my @c = split /\t/, $l;
			push @$acks, [ $c[5], $c[6] ] if @c == 9 && $c[1] eq 'acq' && $c[4] eq 'ok';
		}
	}
	return scalar grep { $_->[1] >= $since && (!defined $node || $_->[0] eq $node) } @$acks;
}

sub check_history
{
	my ($label, $leader) = @_;
	my $audit = "$scenario->{dir}/audit.tsv";
	my $t_audit = mono();
	my $rows = psql($member{$leader},
		"COPY (SELECT writer, id, token FROM fencing_test.audit) TO STDOUT", timeout => 20);
	give_up("could not read the audit table on $leader") unless defined $rows;
	open my $fh, '>', $audit or die $!;
	print $fh $rows, ($rows eq '' ? '' : "\n");
	close $fh;
	my $out = `$python $workload check --history $scenario->{hist} --audit $audit --audit-time $t_audit`;
	my $r = eval { decode_json($out) };
	give_up("the checker failed: $out") unless $r;
	my $ex = $r->{examples};
	my $bad = 0;
	{
		is($r->{duplicates}, 0, "$label: no token acknowledged twice ($r->{tokens} tokens)")
		  or $bad++, diag "duplicates:\n  " . join("\n  ", @{ $ex->{duplicates} });
		is($r->{below_acknowledged}, 0,
			"$label: no token below one acknowledged before it was requested")
		  or $bad++, diag "below:\n  " . join("\n  ", @{ $ex->{below_acknowledged} });
		is($r->{below_acknowledged_per_lease}, 0, "$label: none per lease either")
		  or $bad++;
		is($r->{stale_accepted}, 0,
			"$label: no write accepted with a token below one that had written the row")
		  or $bad++, diag "stale accepted:\n  " . join("\n  ", @{ $ex->{stale_accepted} });
		if ($scenario->{name} ne 'etcd3')
		{
			is($r->{stale_accepted_over_lost}, 0,
				"$label: none either below writes that were lost")
			  or $bad++, diag "accepted over lost writes:\n  "
			  . join("\n  ", @{ $ex->{stale_accepted_over_lost} });
		}
	}
	is($r->{audit_mismatch}, 0, "$label: the audit agrees with the answers")
	  or diag "mismatch:\n  " . join("\n  ", @{ $ex->{audit_mismatch} });
	note sprintf(
		"%s: %d tokens (max %d), %d writes acknowledged, %d lost, %d stale writes refused (%d by stalled holders), "
		  . "%d accepted over lost writes, codes %s, unknown outcomes %d, errors %s, tokens per node %s",
		$label, $r->{tokens}, $r->{max_token}, $r->{writes_acknowledged},
		$r->{lost_acknowledged_writes}, $r->{stale_refused}, $r->{stale_refused_zombie},
		$r->{stale_accepted_over_lost},
		encode_json($r->{refused_codes}), $r->{unknown}, encode_json($r->{errors}),
		encode_json($r->{tokens_per_node}));
	note "lost acknowledged writes: " . join("; ", @{ $ex->{lost} }) if @{ $ex->{lost} };
	note "accepted over lost writes: " . join("; ", @{ $ex->{stale_accepted_over_lost} })
	  if @{ $ex->{stale_accepted_over_lost} };
	# a broken guarantee is diagnosed above: stop there rather than run the
	# remaining failovers (FENCING_PATRONI_STOP_ON_FAIL=0 runs them all)
	give_up("$label: the token guarantee failed")
	  if $bad && ($ENV{FENCING_PATRONI_STOP_ON_FAIL} // 1);
	return $r;
}

# after a failover: the clients made progress on the new leader, then check
sub checkpoint
{
	my ($label, $leader, $since) = @_;
	wait_until("clients to acknowledge tokens from $leader", 60,
		sub { acked_since($since, $leader) >= 10 });
	$scenario->{failovers}++ unless $label =~ / (start|end)$/;
	note sprintf("%s: leader %s, %.1f s since the failover began, %.0f s in",
		$label, $leader, mono() - $since, mono() - $t_begin);
	return check_history($label, $leader);
}

# ---------------------------------------------------------------------------
# setup

my $etcd_client = PostgreSQL::Test::Cluster::get_free_port();
my $etcd_peer   = PostgreSQL::Test::Cluster::get_free_port();
my $etcd_url    = "http://127.0.0.1:$etcd_client";
# Run a copy of etcd: "/etc/init.d/etcd stop" (start-stop-daemon --exec
# /usr/bin/etcd), run by whoever on this machine, must not stop ours.
mkdir "$tmp/bin";
copy($tool{etcd}, "$tmp/bin/etcd") or die "copy etcd: $!";
chmod 0755, "$tmp/bin/etcd";
$etcd = spawn(
	"$tmp/etcd.log", {}, "$tmp/bin/etcd",
	'--name' => 'e1',
	'--data-dir' => "$tmp/etcd",
	'--listen-client-urls' => $etcd_url,
	'--advertise-client-urls' => $etcd_url,
	'--listen-peer-urls' => "http://127.0.0.1:$etcd_peer",
	'--initial-advertise-peer-urls' => "http://127.0.0.1:$etcd_peer",
	'--initial-cluster' => "e1=http://127.0.0.1:$etcd_peer",
	'--initial-cluster-state' => 'new',
	# Patroni talks to it with the v2 protocol (see the member configuration)
	'--enable-v2=true');
$ENV{ETCDCTL_API} = 3;
wait_until('etcd to answer', 30, sub {
	system("$tool{etcdctl} --endpoints=$etcd_url --dial-timeout=1s endpoint health >/dev/null 2>&1") == 0;
});
pass("etcd runs on $etcd_url");

my $setup_sql = <<'SQL';
CREATE EXTENSION fencing;
CREATE SCHEMA fencing_test;
CREATE TABLE fencing_test.res (id int PRIMARY KEY, val bigint NOT NULL, writer text, fence bigint);
INSERT INTO fencing_test.res SELECT g, 0, NULL, NULL FROM generate_series(0, 3) g;
CREATE TABLE fencing_test.audit (seq bigserial PRIMARY KEY, writer text NOT NULL,
                                 id int NOT NULL, token bigint NOT NULL);
CREATE FUNCTION fencing_test.audit_res() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN
  INSERT INTO fencing_test.audit (writer, id, token) VALUES (NEW.writer, NEW.id, NEW.fence);
  RETURN NULL;
END$$;
CREATE TRIGGER res_guard BEFORE INSERT OR UPDATE OR DELETE ON fencing_test.res
  FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE TRIGGER res_audit AFTER UPDATE ON fencing_test.res
  FOR EACH ROW EXECUTE FUNCTION fencing_test.audit_res();
SQL

sub write_file
{
	my ($f, $content, $mode) = @_;
	open my $fh, '>', $f or die "$f: $!";
	print $fh $content;
	close $fh;
	chmod $mode, $f if $mode;
}

sub epoch_command
{
	my ($m) = @_;
	return "$epochcmd --endpoints $etcd_url --key /fencing/$scenario->{scope}/epoch "
	  . "--pgdata $m->{data} --file fencing_epoch --timeout 3";
}

sub configure_member
{
	my ($name, $mode, $faketime_spec) = @_;
	my $m = $member{$name} = {
		faketime => $faketime_spec,
		name => $name,
		pg   => PostgreSQL::Test::Cluster::get_free_port(),
		rest => PostgreSQL::Test::Cluster::get_free_port(),
		dir  => "$scenario->{dir}/$name",
	};
	$m->{data} = "$m->{dir}/data";
	$m->{conf} = "$m->{dir}/patroni.yml";
	$m->{log}  = "$m->{dir}/patroni.log";
	mkdir $m->{dir};
	my $member_bindir = $m->{faketime} ? faketime_bindir($m) : $bindir;
	mkdir "$m->{dir}/pglog";
	my $epoch = $mode eq 'epoch';
	my $post_init = "$m->{dir}/post_init.sh";
	write_file("$scenario->{dir}/setup.sql", $setup_sql);
	write_file(
		$post_init, "#!/bin/sh\nset -e\n"
		  . ($epoch ? epoch_command($m) . "\n" : '')
		  . qq{"$bindir/psql" -X -q -v ON_ERROR_STOP=1 -d "\$1" -f "$scenario->{dir}/setup.sql"\n},
		0755);
	my $epoch_param = $epoch ? "        fencing.epoch_file: fencing_epoch\n" : '';
	my $pre_promote = $epoch ? "  pre_promote: " . epoch_command($m) . "\n" : '';
	my $dcs = $mode eq 'etcd3' ? 'etcd3' : 'etcd';
	write_file($m->{conf}, <<"YAML");
scope: $scenario->{scope}
namespace: /service/
name: $name
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$m->{rest}
  connect_address: 127.0.0.1:$m->{rest}
# etcd: the v2 protocol.  Patroni 3.0.2's etcd3 module (Debian 12's, the
# etcd3 scenario) renews an expired leader lease by writing the leader key
# unconditionally, so a leader frozen for longer than ttl takes the key back
# from the member promoted meanwhile (fixed in Patroni 3.0.3,
# patroni/patroni#2689).  Its etcd (v2) module compares and swaps.
$dcs:
  hosts: 127.0.0.1:$etcd_client
bootstrap:
  dcs:
    ttl: $scenario->{ttl}
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: 'on'
        wal_keep_size: 256MB
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 40
        fsync: 'off'
        checkpoint_timeout: 300
$epoch_param  initdb:
    - encoding: UTF8
    - locale: C
  post_init: $post_init
postgresql:
  listen: 127.0.0.1:$m->{pg}
  connect_address: 127.0.0.1:$m->{pg}
  data_dir: $m->{data}
  bin_dir: $member_bindir
  pgpass: $m->{dir}/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: '$m->{dir}'
    logging_collector: 'on'
    log_directory: '$m->{dir}/pglog'
    log_filename: 'postgresql-%H%M%S.log'
    log_line_prefix: '%m [%p] '
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
$pre_promote  basebackup:
    - checkpoint: fast
watchdog:
  mode: 'off'
YAML
	return $m;
}

sub start_clients
{
	my $members = join ',',
	  map { "$_:$member{$_}{pg}:$member{$_}{rest}" } @{ $scenario->{members} };
	for my $i (1 .. 4)
	{
		push @{ $scenario->{clients} },
		  spawn("$scenario->{dir}/client$i.log", {}, $python, $workload, 'client',
			'--id' => $i, '--members' => $members,
			'--history' => "$scenario->{hist}/c$i.tsv", '--stop' => "$scenario->{dir}/stop",
			'--ttl' => '5 s', '--deadline' => 2, '--pause' => 0.01);
	}
}

sub stop_clients
{
	write_file("$scenario->{dir}/stop", '');
	my $until = mono() + 15;
	for my $pid (@{ $scenario->{clients} })
	{
		usleep(50_000) while alive($pid) && mono() < $until;
		kill 'KILL', $pid if alive($pid);
	}
	reap();
}

# a cluster of three members: the first bootstraps, the other two are
# started as soon as it holds the initialize key, and copy it
my %scenarios;

sub prepare_cluster
{
	my ($mode, %opt) = @_;
	$scenario = $scenarios{$mode} = {
		name => $mode, scope => "fencing-$mode", dir => "$tmp/$mode",
		ttl => 8, members => [ map { "$mode$_" } qw(A B C) ], failovers => 0,
		clients => [],
	};
	mkdir $scenario->{dir};
	$scenario->{hist} = "$scenario->{dir}/hist";
	mkdir $scenario->{hist};
	my ($a, $b, $c) = map { configure_member($_, $mode, $_ eq "${mode}B" ? $opt{skew_b} : undef) }
	  @{ $scenario->{members} };
	start_member($a);
	wait_until("$a->{name} to take the initialize key", 60, sub {
		if ($mode eq 'etcd3')
		{
			my $v = `$tool{etcdctl} --endpoints=$etcd_url get /service/$scenario->{scope}/initialize --print-value-only 2>/dev/null`;
			return $v ne '';
		}
		my $r = $http->get("$etcd_url/v2/keys/service/$scenario->{scope}/initialize");
		return $r->{status} == 200;
	});
	start_member($_) for $b, $c;
}

# the bootstrapped cluster is up, clients start
sub start_cluster
{
	my ($mode) = @_;
	$scenario = $scenarios{$mode};
	my ($a, $b, $c) = map { $member{$_} } @{ $scenario->{members} };
	wait_until("$a->{name} to bootstrap", 60, sub {
		my $l = current_leader();
		return $l && $l eq $a->{name}
		  && defined psql($a, 'SELECT count(*) FROM fencing_test.res', timeout => 3);
	});
	wait_streaming($a->{name}, $b->{name}, $c->{name});
	pass("$mode: $a->{name} leads, $b->{name} and $c->{name} stream from it");
	my $since = mono();
	start_clients();
	checkpoint("$mode start", $a->{name}, $since);
}

# a failover by kill -9 of the leader; the old leader is started again
# (it rejoins with pg_rewind) unless $no_rejoin
sub failover_kill
{
	my ($label, $no_rejoin) = @_;
	my $old = current_leader() // give_up('no leader before the failover');
	my $since = mono();
	signal_member($member{$old}, 'KILL', 1);
	my $new = wait_leader("after kill -9 of $old", $old);
	checkpoint("$label (kill -9 of $old, $new leads)", $new, $since);
	start_member($member{$old}) unless $no_rejoin;
	return ($old, $new);
}

# the leader freezes (SIGSTOP of Patroni and every PostgreSQL process) for
# as long as it takes another member to lead, then wakes up
sub failover_freeze
{
	my ($label) = @_;
	my $old = current_leader() // give_up('no leader before the failover');
	my $since = mono();
	my $n = signal_member($member{$old}, 'STOP', 1);
	note "$label: $old frozen (Patroni and $n PostgreSQL processes)";
	my $new = wait_leader("while $old is frozen", $old);
	checkpoint("$label (SIGSTOP of $old, $new leads)", $new, $since);
	signal_member($member{$old}, 'CONT', 1);
	return ($old, $new);
}

# the leader freezes past its TTL until another member leads and its
# clients acknowledge tokens, then resumes; the cluster settles on one
# leader with the other two streaming from it
sub freeze_and_resume
{
	my ($label) = @_;
	my $old = current_leader() // give_up('no leader before the freeze');
	my $since = mono();
	my $n = signal_member($member{$old}, 'STOP', 1);
	note "$label: $old frozen (Patroni and $n PostgreSQL processes)";
	my $new = wait_leader("while $old is frozen", $old);
	checkpoint("$label (SIGSTOP of $old past its TTL, $new leads)", $new, $since);
	# Patroni 3.0.2's etcd3 module, on the resume: the leader key written
	# for $old, unconditionally
	system("$tool{etcdctl} --endpoints=$etcd_url put /service/$scenario->{scope}/leader $old >/dev/null 2>&1") == 0
	  or give_up("could not write the leader key for $old");
	my $resumed = mono();
	signal_member($member{$old}, 'CONT', 1);
	my $leader;
	wait_until("one leader after $old resumed", 60, sub {
		my @l = grep {
			my ($code) = rest($member{$_}, '/primary');
			my $ro = $code && $code == 200 ? psql($member{$_}, 'SELECT pg_is_in_recovery()', timeout => 3) : undef;
			defined $ro && $ro eq 'f';
		} @{ $scenario->{members} };
		my @ro = grep { my $r = psql($member{$_}, 'SELECT pg_is_in_recovery()', timeout => 3); defined $r && $r eq 't' } @{ $scenario->{members} };
		return 0 unless @l == 1 && @ro == 2;
		$leader = $l[0];
		return 1;
	});
	if ($leader eq $old)
	{
		# the other two followed $new onto its timeline, ahead of the resumed
		# leader's: Patroni 3.0.2 rewinds a demoted leader but not a replica
		# (and not always the former either), so both are reinitialized, as
		# after the double failover
		reinit_until_streaming($leader, grep { $_ ne $old } @{ $scenario->{members} });
		wait_streaming($leader, grep { $_ ne $leader } @{ $scenario->{members} });
	}
	else
	{
		# $new kept the key; the demoted $old is not always rewound either
		# (seen under load: no WAL receiver for good), so it gets 60 s to
		# stream and is reinitialized otherwise
		for my $name (grep { $_ ne $leader } @{ $scenario->{members} })
		{
			next if streams_within($leader, $name, 60);
			note "$name not streaming from $leader 60 s after the resume: reinitialized";
			reinit_until_streaming($leader, $name);
		}
	}
	$scenario->{took_back} = $leader eq $old ? 1 : 0;
	note sprintf('%s: %s resumed %.1f s after it froze; %s leads', $label, $old, $resumed - $since, $leader);
	checkpoint("$label ($old resumed, $leader leads)", $leader, $resumed);
	return ($old, $new, $leader);
}

# the double failover: X leads, Z's Patroni is frozen, X is killed, Y is
# promoted and killed right after its first acknowledged token, Z is
# promoted without ever having seen Y's WAL
sub failover_double
{
	my ($label) = @_;
	my $x = current_leader() // give_up('no leader before the failover');
	my @rep = grep { $_ ne $x } @{ $scenario->{members} };
	# the member with the skewed clock, if any, is promoted first
	@rep = reverse @rep if $member{ $rep[1] }{faketime};
	my ($y, $z) = @rep;
	my $since = mono();
	signal_member($member{$z}, 'STOP', 0);
	signal_member($member{$x}, 'KILL', 1);
	# Y is the only candidate; as soon as it issued a token (only a primary
	# does), it dies.  No leader lookup in between: Z's frozen REST API
	# would delay it.
	my $until = mono() + 60;
	until (acked_since($since, $y) >= 1)
	{
		give_up("no token acknowledged by $y within 60 s after $x was killed")
		  if mono() > $until;
		usleep(10_000);
	}
	my $y_first = mono();
	my $tli_y = timeline_of($member{$y});
	signal_member($member{$y}, 'KILL', 1);
	my $y_tokens = acked_since($since, $y);
	note sprintf("%s: %s acknowledged %d tokens as leader (timeline %d), killed %.2f s after the first",
		$label, $y, $y_tokens, $tli_y, mono() - $y_first);
	is(acked_since($since, $z), 0, "$label: $y led after $x was killed, $z issued nothing");
	$scenario->{failovers}++;    # X -> Y
	signal_member($member{$z}, 'CONT', 0);
	my $new = wait_leader("after kill -9 of $y, $z awake", $x, $y);
	is($new, $z, "$label: $z leads after $y was killed");
	my $tli_z = wait_until("$z to write its timeline history", 30, sub { timeline_of($member{$z}) > 1 && timeline_of($member{$z}) });
	is($tli_z, $tli_y,
		"$label: $z was promoted to the same timeline ID as $y ($tli_z), without the history of $y");
	checkpoint("$label (kill -9 of $x then $y, $z leads)", $z, $since);
	return ($x, $y, $z);
}

# fencing-epoch on its own, against the test's etcd: concurrent promotions
# get distinct epochs; an unreachable etcd, a corrupt counter or a corrupt
# file fail and leave the file alone
sub epoch_hook_checks
{
	my $d = "$tmp/epoch-hook";
	mkdir $d;
	my $cmd = "$epochcmd --endpoints $etcd_url --key /fencing/hook-test/epoch --timeout 3";
	my @pids = map { spawn("$d/run$_.log", {}, 'sh', '-c', "$cmd --file $d/e$_") } 1 .. 6;
	for my $pid (@pids) { waitpid($pid, 0); }
	my @got = sort { $a <=> $b } map { slurp_first_line("$d/e$_") // 'none' } 1 .. 6;
	is("@got", '1 2 3 4 5 6', 'fencing-epoch: six concurrent runs drew six distinct epochs');
	write_file("$d/keep", "41\n");
	is(system("$cmd --file $d/keep >/dev/null 2>&1"), 0, 'fencing-epoch: runs again');
	is(slurp_first_line("$d/keep"), 42, 'fencing-epoch: above the epoch already in the file (41 > counter 6)');
	isnt(system("$epochcmd --endpoints http://127.0.0.1:1 --key /fencing/hook-test/epoch --timeout 1 --file $d/keep >/dev/null 2>&1"),
		0, 'fencing-epoch: fails when etcd cannot be reached');
	write_file("$d/bad", "x7\n");
	isnt(system("$cmd --file $d/bad >/dev/null 2>&1"), 0, 'fencing-epoch: fails on a corrupt epoch file');
	is(slurp_first_line("$d/keep") . '/' . slurp_first_line("$d/bad"), '42/x7',
		'fencing-epoch: a failed run leaves the file as it was');
	system("$tool{etcdctl} --endpoints=$etcd_url put /fencing/hook-test/epoch garbage >/dev/null 2>&1");
	isnt(system("$cmd --file $d/keep >/dev/null 2>&1"), 0, 'fencing-epoch: fails on a corrupt counter in etcd');
}

# ---------------------------------------------------------------------------
# the scenarios

my %ran;
for my $mode (@scenarios)
{
	die "unknown scenario $mode" unless $mode =~ /^(clock|epoch|etcd3)$/;
	# the epoch mode's member B runs an hour ahead
	prepare_cluster($mode, skew_b => ($mode eq 'epoch' && $faketime ? '+1h' : undef));
}
for my $mode (@scenarios)
{
	start_cluster($mode);
	if ($mode eq 'epoch')
	{
		my $b = $member{epochB};
		if ($faketime)
		{
			my $skew = psql($b, 'SELECT round(extract(epoch FROM now()) - ' . time() . ')');
			cmp_ok($skew, '>', 3500, "epoch: epochB's clock is an hour ahead ($skew s)");
		}
		else
		{
			note 'libfaketime not installed: the epoch scenario runs with true clocks';
		}
		my ($x, $y, $z) = failover_double('epoch: double failover');
		my $key = `$tool{etcdctl} --endpoints=$etcd_url get /fencing/$scenario->{scope}/epoch --print-value-only`;
		chomp $key;
		my %file = map { $_ => slurp_first_line("$member{$_}{data}/fencing_epoch") // '' } ($x, $y, $z);
		is($key, 3, 'epoch: three epochs drawn from etcd (bootstrap, two promotions)');
		is_deeply([ @file{ $x, $y, $z } ], [ 1, 2, 3 ],
			"epoch: epoch files of $x, $y, $z hold 1, 2, 3");
		epoch_hook_checks();
	}
	elsif ($mode eq 'etcd3')
	{
		# the key the test writes has no lease: a Patroni 3.0.2 of $new that
		# still believes it leads writes its own back over it, unconditionally
		# too (seen under load), and $new stays leader.  That history is
		# checked as well, and the freeze is repeated (three tries) until the
		# resumed leader wins, the case this scenario is about.
		my ($old, $new, $leader);
		for my $try (1 .. 3)
		{
			($old, $new, $leader) = freeze_and_resume("etcd3: freeze $try past the TTL");
			last if $leader eq $old;
			note "etcd3: $new kept its leader key over the one written for $old: frozen again";
		}
		is($leader, $old,
			"etcd3: the resumed $old took its leader key back, ${new}'s branch is discarded (Patroni 3.0.2)");
	}
	else
	{
		my ($old1, $l1) = failover_kill('clock failover 1');
		wait_streaming($l1, grep { $_ ne $l1 } @{ $scenario->{members} });
		my ($old2, $l2) = failover_freeze('clock failover 2');
		wait_streaming($l2, grep { $_ ne $l2 } @{ $scenario->{members} });
		is(current_leader() // '', $l2, "clock failover 2: $old2 woke up and follows $l2");
		my ($x, $y, $z) = failover_double('clock failovers 3 and 4');
		start_member($member{$x});
		# Y shares its timeline ID with Z, so Patroni would not rewind it:
		# reinitialize it
		reinit_until_streaming($z, $y);
		wait_streaming($z, $x);
		failover_kill('clock failover 5', 1);
		my $rw = 0;
		$rw += rewinds($member{$_}) for @{ $scenario->{members} };
		cmp_ok($rw, '>=', 2, "clock: members rejoined with pg_rewind ($rw times)");
		is($scenario->{failovers}, 5, 'clock: five failovers');
	}
	my $leader = current_leader() // give_up('no leader at the end');
	stop_clients();
	my $r = check_history("$mode end", $leader);
	cmp_ok($r->{stale_refused}, '>', 0, "$mode: stale writes were refused ($r->{stale_refused})");
	$ran{$mode} = sprintf(
		"%s: %d failovers, %d tokens, %d duplicates, %d below acknowledged, %d acknowledged writes lost of %d, %d stale writes refused, %d accepted (%d over lost writes only)",
		$mode, $scenario->{failovers}, $r->{tokens}, $r->{duplicates}, $r->{below_acknowledged},
		$r->{lost_acknowledged_writes}, $r->{writes_acknowledged}, $r->{stale_refused},
		$r->{stale_accepted}, $r->{stale_accepted_over_lost});
	signal_member($member{$_}, 'KILL', 1) for @{ $scenario->{members} };
}
dump_logs('a check failed') unless Test::More->builder->is_passing;
diag "$ran{$_}" for sort keys %ran;
diag sprintf('wall time %.0f s', mono() - $t_begin);
done_testing();
