# Copyright: fencing extension authors
#
# FencingTest: what the crash tests share.  Load clients are psql
# processes running a script of ours; only what a client printed counts as
# acknowledged (in autocommit the server commits before it sends
# CommandComplete, and psql prints a result only once it is complete).
# Everything that depends on timing waits for the condition it needs, with
# a deadline, instead of assuming it happened.
#
#   use FindBin;
#   use lib "$FindBin::RealBin/lib";
#   use FencingTest;
package FencingTest;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils ();
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(crash_node start_client finish_client wait_until
  wait_for_clients check_distinct check_leases_survived
  check_tokens_after_restart tokens acquire band_start run_cmd in_path
  start_pgbouncer signal_cluster);

# For tests that count tokens one by one (consecutive tokens, "no token
# used up"): the counter is not raised to the wall clock between them.
# The raise (fencing.max_clock_lag, 10 ms by default) is
# t/015_resumed_primary.pl's; t/010-t/014 run with it.
our $count_tokens_conf = "fencing.max_clock_lag = '1h'\n";

# tokens($node, $n [, $db]): $n fresh tokens, drawn by one statement
sub tokens
{
	my ($node, $n, $db) = @_;
	return split /\n/,
	  $node->safe_psql($db // 'postgres',
		"SELECT fencing.next_token() FROM generate_series(1, $n)");
}

# acquire($node, $name, $holder [, $ttl [, $db]]): the token, or '' when
# the lease is taken
sub acquire
{
	my ($node, $name, $holder, $ttl, $db) = @_;
	$ttl //= '1 hour';
	return $node->safe_psql($db // 'postgres',
		"SELECT fencing.lease_acquire('$name', '$holder', '$ttl')");
}

our $pgbouncer = '/usr/sbin/pgbouncer';
my @bouncers;

# start_pgbouncer($node, users => [...], pool_size => N, max_client_conn => N):
# a PgBouncer in transaction pooling mode in front of $node's database
# postgres, on a free port of 127.0.0.1, trusting the users named, with
# pool_size server connections at most; extra => "name = value\n..." adds
# settings of [pgbouncer].  Returns (port, its directory, a
# reference to its stderr, its IPC::Run handle).  It is stopped when the
# test ends, whatever happened.
sub start_pgbouncer
{
	my ($node, %o) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my ($host, $nport) = ($node->host, $node->port);
	PostgreSQL::Test::Utils::append_to_file("$dir/userlist.txt",
		join('', map { qq{"$_" ""\n} } @{ $o{users} }));
	PostgreSQL::Test::Utils::append_to_file("$dir/pgbouncer.ini", qq{
[databases]
postgres = host=$host port=$nport dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $o{pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_db_connections = $o{pool_size}
max_client_conn = $o{max_client_conn}
server_reset_query =
ignore_startup_parameters = extra_float_digits
query_wait_timeout = 120
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
} . ($o{extra} // ''));
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
		'<', \undef, '>', \$out, '2>', \$err);
	push @bouncers, $h;
	return ($port, $dir, \$err, $h);
}

END
{
	# its exit status is not the test's
	local $?;
	for my $h (@bouncers)
	{
		$h->kill_kill if $h->pumpable;
	}
}

# run_cmd($timeout_s, @cmd): run a program, stdin empty; (exit code or -1
# if it timed out or could not start, stdout and stderr together)
sub run_cmd
{
	my ($timeout, @cmd) = @_;
	my $out = '';
	my $ok = eval {
		IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>&1', IPC::Run::timeout($timeout));
	};
	$out .= "\n(timed out or failed to start: $@)" if $@;
	my $rc = defined $ok && $? != -1 ? $? >> 8 : -1;
	return ($rc, $out);
}

# in_path($prog): whether $prog is an executable in PATH
sub in_path
{
	my ($prog) = @_;
	return grep { -x "$_/$prog" } split /:/, $ENV{PATH};
}

# signal_cluster($node, $sig): send $sig to the postmaster (first: it forks
# no more), then to every child of it; STOP freezes the whole server (a
# paused VM), CONT resumes it.  Returns how many processes were signalled.
sub signal_cluster
{
	my ($node, $sig) = @_;
	my $pm = $node->{_pid} or die 'no postmaster pid';
	kill $sig, $pm;
	my @kids;
	for my $stat (glob('/proc/[0-9]*/stat'))
	{
		open my $fh, '<', $stat or next;
		my $l = <$fh> // next;
		push @kids, $1 if $l =~ /^(\d+) \(.*\) [A-Za-z] (\d+) / && $2 == $pm;
	}
	kill $sig, @kids;
	return 1 + @kids;
}

# band_start($node [, $db]): the first token of the current band
sub band_start
{
	my ($node, $db) = @_;
	return $node->safe_psql($db // 'postgres',
		'SELECT last_value FROM fencing.token_base');
}

# crash_node($name, %conf): a started node with the extension, set up so
# that WAL no commit flushed is really lost at a crash:
# synchronous_commit = off, a 10 s wal_writer_delay (the WAL writer then
# writes only completed WAL pages between its rounds), no background
# writer, no checkpoint during the test; restart_after_crash on.  %conf
# adds or overrides settings (max_wal_size => '4GB').
sub crash_node
{
	my ($name, %conf) = @_;
	my %c = (
		synchronous_commit => 'off',
		wal_writer_delay => '10s',
		bgwriter_lru_maxpages => '0',
		checkpoint_timeout => '1h',
		max_wal_size => '1GB',
		restart_after_crash => 'on',
		log_statement => 'none',
		max_connections => '30',
		%conf);
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		join('', map { "$_ = $c{$_}\n" } sort keys %c));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
	return $node;
}

# start_client($node, $dir, $name, \@lines, %opt): a psql client named
# fencing_$name (its application_name) running @lines; its stdout and
# stderr go to files in $dir.  on_error_stop => 1 stops it at an error.
sub start_client
{
	my ($node, $dir, $name, $lines, %opt) = @_;
	my $base = "$dir/$name";
	open my $fh, '>', "$base.sql" or die "$base.sql: $!";
	print $fh "$_\n" for @$lines;
	close $fh;
	my $connstr =
	  $node->connstr('postgres') . " application_name=fencing_$name";
	my $h = IPC::Run::start(
		[
			'psql', '-XAtq', '-v',
			'ON_ERROR_STOP=' . ($opt{on_error_stop} ? 1 : 0),
			'-d', $connstr, '-f', "$base.sql"
		],
		'<', \undef, '>', "$base.out", '2>', "$base.err");
	return { h => $h, name => $name, base => $base };
}

# finish_client($c): wait for the client to exit; (exit code, rows split
# on "|", stderr lines)
sub finish_client
{
	my ($c) = @_;
	$c->{h}->finish;
	my $rc = $c->{h}->result(0);
	my (@rows, @err);
	open my $fh, '<', "$c->{base}.out" or die "$c->{base}.out: $!";
	while (my $l = <$fh>)
	{
		chomp $l;
		push @rows, [ split /\|/, $l, -1 ];
	}
	close $fh;
	open $fh, '<', "$c->{base}.err" or die "$c->{base}.err: $!";
	chomp(@err = <$fh>);
	close $fh;
	return ($rc, \@rows, \@err);
}

# wait_until($what, $timeout_s, $sub): call $sub every 100 ms until it
# returns true; die with $what after $timeout_s seconds.
sub wait_until
{
	my ($what, $timeout, $sub) = @_;
	my $t0 = time;
	until ($sub->())
	{
		die "timed out after ${timeout} s waiting for $what"
		  if time - $t0 > $timeout;
		usleep(100_000);
	}
	return;
}

# wait_for_clients($node, @names): until every client fencing_$name has a
# backend that has run a query (a client that connects late would run its
# script after the crash the test is about to cause).
sub wait_for_clients
{
	my ($node, @names) = @_;
	my $list = join(', ', map { "'fencing_$_'" } @names);
	$node->poll_query_until('postgres',
		"SELECT count(DISTINCT application_name) = " . scalar(@names)
		  . " FROM pg_stat_activity WHERE application_name IN ($list)"
		  . " AND query_start IS NOT NULL")
	  or die "clients @names did not all connect";
	return;
}

# check_distinct($what, \@tokens)
sub check_distinct
{
	my ($what, $tokens) = @_;
	my %seen;
	my @dup = grep { $seen{$_}++ } @$tokens;
	is(scalar(@dup), 0,
		"$what: all " . scalar(@$tokens) . ' acknowledged tokens are distinct');
	return;
}

# check_leases_survived($node, $what, \%ack, $holder_rule): every
# acknowledged lease (name => { token, holder }) is in fencing.leases with
# the same token and holder, or a larger token.  $holder_rule, if given,
# returns a complaint for a row (name, holder) whose holder is impossible.
sub check_leases_survived
{
	my ($node, $what, $ack, $holder_rule) = @_;
	my %rows = map { my @f = split /\|/, $_, -1; ($f[0] => [ @f[ 1, 2 ] ]) }
	  split /\n/,
	  $node->safe_psql('postgres',
		'SELECT name, holder, token FROM fencing.leases');
	my @lost;
	for my $name (sort keys %$ack)
	{
		my $a = $ack->{$name};
		my $r = $rows{$name};
		if (!defined $r)
		{
			push @lost, "$name: row missing";
		}
		elsif ($r->[1] < $a->{token})
		{
			push @lost, "$name: token $r->[1] < acknowledged $a->{token}";
		}
		elsif ($r->[1] == $a->{token} && $r->[0] ne $a->{holder})
		{
			push @lost,
			  "$name: token $r->[1] held by $r->[0], acknowledged to $a->{holder}";
		}
		elsif ($holder_rule && (my $why = $holder_rule->($name, $r->[0])))
		{
			push @lost, "$name: $why";
		}
	}
	is_deeply(\@lost, [],
		"$what: all " . scalar(keys %$ack) . ' acknowledged leases survived');
	return;
}

# check_tokens_after_restart($node, $what, $max_ack, $sessions, $per):
# tokens from $sessions new sessions, $per each, are all above $max_ack;
# returns them
sub check_tokens_after_restart
{
	my ($node, $what, $max_ack, $sessions, $per) = @_;
	my @after;
	for my $i (1 .. $sessions)
	{
		push @after, split /\n/,
		  $node->safe_psql('postgres',
			"SELECT fencing.next_token() FROM generate_series(1, $per)");
	}
	my @bad = grep { $_ <= $max_ack } @after;
	is_deeply(\@bad, [],
		"$what: " . scalar(@after)
		  . " tokens after restart (first $after[0]) all > max acknowledged $max_ack");
	return @after;
}

1;
