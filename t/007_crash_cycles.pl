# Copyright: fencing extension authors
#
# 007_crash_cycles.pl: ten crashes in a row, each under concurrent load of
# lease acquires, fenced writes and next_token() calls, with the token and
# resource guarantees checked after every restart.
#
# Setup (as in 001_crash.pl): synchronous_commit = off by default, a 10 s
# wal_writer_delay, no background writer, no checkpoint during the run, so
# WAL that no commit flushed is really lost at each crash.  (The test node
# runs with fsync = off, which changes nothing here: a crash of the server
# processes loses what was never written to the kernel, and a "flush" still
# writes.)  Odd cycles stop the node with "pg_ctl stop -m immediate" and
# start it again; even cycles SIGKILL one busy backend, after which the
# postmaster kills the others, reinitializes and runs crash recovery.  The
# log must show it each time.
#
# Four psql clients run during each cycle (about 2-3 s).  Only what a
# client printed counts as acknowledged: in autocommit the server commits
# before it sends CommandComplete, and psql prints a result only once it
# is complete.
#
#   w1, w2   resource writers, synchronous_commit = ON (SET in the script).
#            Each round: lease_acquire() of one of three shared leases r0..r2
#            (TTL 10 ms, so holders take them over from each other), two
#            fenced writes with that token to rows guarded by that lease,
#              UPDATE res SET val = ..., fence = fencing.fence_advance(fence, tok, true)
#            and one "late" write of the token this writer held on that lease
#            before (a stale holder: always refused, since the row's fence is
#            already >= the newer token).  The first round of a cycle uses a
#            token from before the crash as the late one.  Three rounds in four
#            end with lease_release(), the fourth lets the lease expire.
#   l1, l2   token/lease clients, synchronous_commit = OFF: next_token(),
#            lease_acquire() of their own leases (TTL 2 s) and of r0..r2
#            (TTL 10 ms), and inserts into a scratch table.
#
# Why the split: with synchronous_commit = off a COMMIT is acknowledged
# before its WAL is flushed, so an acknowledged write MAY be lost by a crash
# (the scratch inserts show it; their loss is only reported).  Lease
# acquires force a synchronous commit whatever the setting, and tokens are
# flushed before they are returned, so neither may ever be lost.  The
# fenced writes run with synchronous_commit = on, so every acknowledged one
# must survive.  res has the guard trigger fencing.fence_guard('fence') and
# an AFTER UPDATE trigger that appends (id, fence, val) to audit, in the
# same transaction: audit in seq order per id is the accepted order.
#
# After each restart (all cumulative over the cycles so far):
#   - all acknowledged tokens are distinct; each client's are increasing;
#   - tokens issued after the restart, from new sessions and by re-acquiring
#     a lease, are all > every token acknowledged before the crash;
#   - every acknowledged lease acquire is in fencing.leases with the same
#     token and holder, or a larger token (a later acquire);
#   - every acknowledged fenced write has its audit row (id, token, val),
#     and its row's fence is >= its token;
#   - per id, audit tokens never decrease in seq order, and res holds the
#     last audit row; no late (stale) write is in audit at all;
#   - a fresh fenced write after the restart is accepted and a write with
#     the largest token acknowledged before the crash is refused (LF001);
#   - the clients saw no error but LF001, and stale writes were refused.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $t_begin = time;
my $tmp     = PostgreSQL::Test::Utils::tempdir;

my $cycles   = 10;
my $nleases  = 3;     # shared leases r0..r2
my $per_lease = 4;    # lease rK guards rows 4K+1 .. 4K+4
my $nrows    = $nleases * $per_lease;

# fencing preloaded: its counters of refused writes count on every major
my $node = crash_node('crash_cycles', max_wal_size => '4GB',
	shared_preload_libraries => "'fencing'");
$node->safe_psql(
	'postgres', qq{
CREATE TABLE res (id int PRIMARY KEY, fence bigint, val text);
INSERT INTO res SELECT g, NULL, 'init' FROM generate_series(1, $nrows) g;
CREATE TABLE audit (seq bigserial PRIMARY KEY, id int NOT NULL,
                    token bigint NOT NULL, val text NOT NULL);
CREATE FUNCTION audit_res() RETURNS trigger LANGUAGE plpgsql AS
\$\$BEGIN
  INSERT INTO audit (id, token, val) VALUES (NEW.id, NEW.fence, NEW.val);
  RETURN NULL;
END\$\$;
CREATE TRIGGER res_guard BEFORE INSERT OR UPDATE OR DELETE ON res
  FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
CREATE TRIGGER res_audit AFTER UPDATE ON res
  FOR EACH ROW EXECUTE FUNCTION audit_res();
CREATE TABLE scratch (v text PRIMARY KEY);
});
is($node->safe_psql('postgres', 'SHOW synchronous_commit'),
	'off', 'synchronous_commit is off by default');

# ---------------------------------------------------------------------------
# bookkeeping of everything acknowledged, over all cycles

my @all_tokens;        # every acknowledged token (T and L rows)
my $max_ack = 0;       # the largest of them
my %lease_ack;         # name => { token, holder }: largest acknowledged
my @writes;            # acknowledged fenced writes: [id, token, val]
my %old_tok;           # "w$j r$k" => last token writer j acknowledged on rK
my %scratch_ack;       # acknowledged sync-off scratch inserts
my ($total_refused, $total_scratch_lost) = (0, 0);

# ---------------------------------------------------------------------------
# client scripts

sub rows_of_lease
{
	my ($k) = @_;
	return map { $k * $per_lease + $_ } 1 .. $per_lease;
}

# a resource writer: synchronous_commit on
sub writer_script
{
	my ($j, $cycle, $rounds) = @_;
	my @l = ('SET synchronous_commit = on;', '\set VERBOSITY sqlstate');
	for my $k (0 .. $nleases - 1)
	{
		push @l, "\\set old_r$k " . ($old_tok{"w$j r$k"} // 0);
	}
	for my $n (1 .. $rounds)
	{
		my $k    = ($n + $j) % $nleases;
		my @ids  = rows_of_lease($k);
		my $ia   = int(rand($per_lease));
		my $ib   = ($ia + 1 + int(rand($per_lease - 1))) % $per_lease;
		my ($a, $b) = @ids[ $ia, $ib ];
		my $tag  = "w$j.c$cycle.n$n";
		push @l,
		  '\set tok 0',
		  "SELECT coalesce(fencing.lease_acquire('r$k', 'w$j', '10 milliseconds'), 0) AS tok \\gset",
		  "\\echo L|r$k|w$j|:tok",
		  "UPDATE res SET val = '$tag.a', fence = fencing.fence_advance(fence, :tok, true) WHERE id = $a AND :tok > 0 RETURNING 'W', id, fence, val;",
		  "UPDATE res SET val = '$tag.b', fence = fencing.fence_advance(fence, :tok, true) WHERE id = $b AND :tok > 0 RETURNING 'W', id, fence, val;",
		  # the stale holder: this writer's previous token on rK, on row a
		  "UPDATE res SET val = '$tag.late', fence = fencing.fence_advance(fence, :old_r$k, true) WHERE id = $a AND :tok > 0 AND :old_r$k > 0 RETURNING 'W', id, fence, val;",
		  "SELECT CASE WHEN :tok > 0 THEN :tok ELSE :old_r$k END AS old_r$k \\gset";
		# hand the lease over on most rounds: a writer that only re-acquired
		# would keep all three leases live and starve the other one
		push @l,
		  "SELECT CASE WHEN :tok > 0 THEN fencing.lease_release('r$k', :tok) END AS released \\gset"
		  if $n % 4 != 0;
	}
	return @l;
}

# a token/lease client: synchronous_commit off
sub token_script
{
	my ($j, $cycle, $rounds) = @_;
	my @l = ('SET synchronous_commit = off;', '\set VERBOSITY sqlstate');
	for my $n (1 .. $rounds)
	{
		my $own = "c${j}_" . ($n % 5);
		push @l, "SELECT 'T', fencing.next_token();",
		  "SELECT 'L', '$own', 'l$j', coalesce(fencing.lease_acquire('$own', 'l$j', '2 s'), 0);",
		  "SELECT 'T', fencing.next_token();",
		  "INSERT INTO scratch VALUES ('l$j.c$cycle.n$n') RETURNING 'N', v;";
		if ($n % 3 == 0)
		{
			my $k = $n % $nleases;
			push @l,
			  "SELECT 'L', 'r$k', 'l$j', coalesce(fencing.lease_acquire('r$k', 'l$j', '10 milliseconds'), 0);";
		}
	}
	return @l;
}

sub progress
{
	return split /\|/,
	  $node->safe_psql(
		'postgres', q{
SELECT (SELECT count(*) FROM audit),
       (SELECT fence_advance_refusals + fence_guard_refusals FROM fencing_monitor.stats),
       (SELECT last_value FROM fencing.token_seq),
       (SELECT count(*) FROM scratch)});
}

# ---------------------------------------------------------------------------
# checks after a restart

sub query_rows
{
	my ($sql) = @_;
	return map { [ split /\|/, $_, -1 ] } split /\n/,
	  $node->safe_psql('postgres', $sql);
}

sub check_after_restart
{
	my ($what, $cycle) = @_;

	check_distinct($what, \@all_tokens);
	check_leases_survived(
		$node, $what,
		\%lease_ack,
		sub {
			my ($name, $holder) = @_;
			return $name =~ /^c(\d)_/ && $holder ne "l$1"
			  ? "holder $holder, only l$1 acquires it"
			  : undef;
		});
	my @after = check_tokens_after_restart($node, $what, $max_ack, 3, 20);
	my $max_before = $max_ack;

	# a holder re-acquires its own lease
	my $t = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('c1_0', 'l1', '2 s')");
	cmp_ok($t, '>', $max_before,
		"$what: lease c1_0 re-acquired by l1 gets token $t > $max_before");
	$lease_ack{c1_0} = { token => $t, holder => 'l1' };

	# a new holder takes a shared lease (expired during the restart) and writes
	my $k = $cycle % $nleases;
	my $id = (rows_of_lease($k))[ $cycle % $per_lease ];
	my $t2 = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('r$k', 'checker', '10 milliseconds', '5 s')");
	cmp_ok($t2, '>', $t, "$what: lease r$k taken by checker with token $t2 > $t");
	$lease_ack{"r$k"} = { token => $t2, holder => 'checker' };
	push @all_tokens, @after, $t, $t2;
	$max_ack = $t2;

	my $w = $node->safe_psql('postgres',
		"UPDATE res SET val = 'checker.c$cycle', fence = fencing.fence_advance(fence, $t2, true) WHERE id = $id RETURNING id, fence, val"
	);
	is($w, "$id|$t2|checker.c$cycle",
		"$what: a fenced write with token $t2 to row $id is accepted");
	push @writes, [ $id, $t2, "checker.c$cycle" ];
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY sqlstate\nUPDATE res SET val = 'checker.c$cycle.stale', fence = fencing.fence_advance(fence, $max_before, true) WHERE id = $id RETURNING id"
	);
	ok($ret != 0 && $out eq '' && $err =~ /ERROR:\s+LF001/,
		"$what: a write to row $id with pre-crash token $max_before is refused with LF001"
	) or diag("ret $ret, out '$out', err '$err'");

	# the resource: audit order, res = last audit row, acknowledged writes
	my (%audit, %last, %dec);
	my $late = 0;
	for my $r (query_rows('SELECT seq, id, token, val FROM audit ORDER BY seq'))
	{
		my ($seq, $rid, $tok, $val) = @$r;
		$audit{"$rid|$tok|$val"} = 1;
		$late++ if $val =~ /\.(late|stale)$/;
		$dec{$rid}++ if defined $last{$rid} && $tok < $last{$rid}[0];
		$last{$rid} = [ $tok, $val ];
	}
	is_deeply(\%dec, {},
		"$what: per row, audit tokens never decrease in seq order ("
		  . scalar(keys %audit) . ' audit rows)');
	is($late, 0, "$what: no late (stale) write was ever accepted");

	my @mismatch;
	my %fence;
	for my $r (query_rows('SELECT id, fence, val FROM res ORDER BY id'))
	{
		my ($rid, $f, $val) = @$r;
		$fence{$rid} = $f;
		my $l = $last{$rid};
		push @mismatch, "row $rid: res ($f, $val), last audit "
		  . (defined $l ? "($l->[0], $l->[1])" : 'none')
		  unless defined $l ? ($f eq $l->[0] && $val eq $l->[1])
		  : ($f eq '' && $val eq 'init');
	}
	is_deeply(\@mismatch, [], "$what: every res row is its last audit row");

	my @missing;
	for my $wr (@writes)
	{
		my ($rid, $tok, $val) = @$wr;
		push @missing, "$rid|$tok|$val: no audit row"
		  unless $audit{"$rid|$tok|$val"};
		push @missing, "$rid|$tok|$val: row fence $fence{$rid} < $tok"
		  unless $fence{$rid} ne '' && $fence{$rid} >= $tok;
	}
	is_deeply(\@missing, [],
		"$what: all " . scalar(@writes) . ' acknowledged fenced writes are present');

	# synchronous_commit = off inserts may be lost: only reported
	my %have = map { $_->[0] => 1 } query_rows('SELECT v FROM scratch');
	my @gone = grep { !$have{$_} } keys %scratch_ack;
	note "$what: " . scalar(@gone)
	  . ' acknowledged synchronous_commit=off scratch inserts lost (allowed)';
	$total_scratch_lost += @gone;
	delete @scratch_ack{@gone};
	return;
}

# ---------------------------------------------------------------------------
# the cycles

srand(7);
for my $cycle (1 .. $cycles)
{
	my $kill = $cycle % 2 == 0;
	my $what = "cycle $cycle (" . ($kill ? 'backend SIGKILL' : 'immediate stop') . ')';

	my @p0 = progress();
	my $dir = "$tmp/c$cycle";
	mkdir $dir or die "$dir: $!";
	# A client that gets through its script before the crash (an idle
	# machine is fast) stays connected, asleep, so that the crash cuts off
	# every client whatever the machine's speed.
	my @clients = (
		(map { start_client($node, $dir, "w$_", [ writer_script($_, $cycle, 4000), 'SELECT pg_sleep(300) \g /dev/null' ]) } 1 .. 2),
		(map { start_client($node, $dir, "l$_", [ token_script($_, $cycle, 25000), 'SELECT pg_sleep(300) \g /dev/null' ]) } 1 .. 2));

	# Under load a client may start late.  Crash only once every client
	# runs and has committed work of its own (acknowledged, then, but for
	# the few statements in flight), after at least 2 s of load with real
	# progress of every kind: a client that connected after the crash would
	# run its script against the restarted server.
	wait_for_clients($node, qw(w1 w2 l1 l2));
	my $per_client = qq{
SELECT (SELECT count(*) FROM audit WHERE val LIKE 'w1.c$cycle.%') >= 3
   AND (SELECT count(*) FROM audit WHERE val LIKE 'w2.c$cycle.%') >= 3
   AND (SELECT count(*) FROM scratch WHERE v LIKE 'l1.c$cycle.%') >= 3
   AND (SELECT count(*) FROM scratch WHERE v LIKE 'l2.c$cycle.%') >= 3};
	my $t0 = time;
	my @p;
	wait_until(
		"$what: progress of every kind and of every client",
		120,
		sub {
			@p = progress();
			return
				 time - $t0 >= 2
			  && $p[0] - $p0[0] >= 20
			  && $p[1] - $p0[1] >= 2
			  && $p[2] - $p0[2] >= 200
			  && $p[3] - $p0[3] >= 20
			  && $node->safe_psql('postgres', $per_client) eq 't';
		});
	my ($connected, $unflushed) = split /\|/,
	  $node->safe_psql(
		'postgres', q{
SELECT (SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'fencing\_%'),
       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn())});
	is($connected, 4, "$what: all 4 clients connected just before the crash");
	note "$what: $unflushed bytes of WAL inserted but not flushed just before the crash";

	my $log_offset = -s $node->logfile;
	my $pid;
	if ($kill)
	{
		my $victim = ('w1', 'l1', 'w2', 'l2')[ ($cycle / 2 - 1) % 4 ];
		$pid = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE application_name = 'fencing_$victim'"
		);
		like($pid, qr/^\d+$/, "$what: backend of client $victim is $pid");
		is(kill('KILL', $pid), 1, "$what: sent SIGKILL to backend $pid");
	}
	else
	{
		$node->stop('immediate');
	}

	# collect what the clients were told
	my (@unordered, @errors, @rc);
	my ($cycle_refused, $cycle_writes, $cycle_late, %acked) = (0, 0, 0);
	for my $c (@clients)
	{
		my ($rc, $rows, $err) = finish_client($c);
		push @rc, "$c->{name}:$rc";
		my $prev = 0;
		for my $r (@$rows)
		{
			my $type = $r->[0];
			my $t;
			if ($type eq 'T')
			{
				$t = $r->[1];
			}
			elsif ($type eq 'L')
			{
				my ($name, $holder, $tok) = @$r[ 1 .. 3 ];
				next if $tok == 0;    # held by another: NULL
				$t = $tok;
				$old_tok{"$holder $name"} = $tok if $holder =~ /^w/;
				my $a = $lease_ack{$name};
				$lease_ack{$name} = { token => $tok, holder => $holder }
				  if !defined $a || $tok > $a->{token};
			}
			elsif ($type eq 'W')
			{
				push @writes, [ @$r[ 1 .. 3 ] ];
				$cycle_writes++;
				$cycle_late++ if $r->[3] =~ /\.late$/;
				$acked{ $c->{name} }++;
				next;
			}
			elsif ($type eq 'N')
			{
				$scratch_ack{ $r->[1] } = 1;
				next;
			}
			else
			{
				die "$c->{name}: unexpected output row: @$r";
			}
			push @unordered, "$c->{name}: $t after $prev" if $t <= $prev;
			$prev = $t;
			push @all_tokens, $t;
			$max_ack = $t if $t > $max_ack;
			$acked{ $c->{name} }++ if $c->{name} =~ /^l/;
		}
		for my $e (@$err)
		{
			next unless $e =~ /\bERROR:\s+(\S+)/;
			if ($1 eq 'LF001') { $cycle_refused++ }
			else               { push @errors, "$c->{name}: $e" }
		}
	}
	$total_refused += $cycle_refused;

	is(join(' ', @rc), 'w1:2 w2:2 l1:2 l2:2',
		"$what: every client was cut off by the crash (psql exit code 2)");
	is_deeply([ map { $acked{$_} ? () : $_ } qw(w1 w2 l1 l2) ], [],
		"$what: every client had results acknowledged ("
		  . join(', ', map { "$_ " . ($acked{$_} // 0) } qw(w1 w2 l1 l2)) . ')');
	is_deeply(\@unordered, [], "$what: each client's tokens are strictly increasing");
	is_deeply(\@errors, [], "$what: the clients saw no error but LF001");
	cmp_ok($cycle_refused, '>', 0, "$what: $cycle_refused stale writes refused with LF001");
	is($cycle_late, 0, "$what: no late write was acknowledged");

	if ($kill)
	{
		$node->wait_for_log(qr/database system is ready to accept connections/,
			$log_offset);
		$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
		  or die "$what: node did not come back";
		ok( $node->log_contains(
				qr/server process \(PID $pid\) was terminated by signal 9/,
				$log_offset),
			"$what: the log shows backend $pid killed by signal 9");
		ok( $node->log_contains(
				'all server processes terminated; reinitializing', $log_offset),
			"$what: the postmaster reinitialized");
	}
	else
	{
		$node->start;
	}
	ok( $node->log_contains(
			qr/database system was not properly shut down; automatic recovery in progress(?s:.*)redo done at/,
			$log_offset),
		"$what: the restart ran crash recovery and redid WAL");

	check_after_restart($what, $cycle);
}

note sprintf(
	'%d cycles: %d tokens acknowledged, %d leases, %d fenced writes acknowledged, '
	  . '%d stale writes refused, %d synchronous_commit=off scratch inserts lost, %.1f s',
	$cycles, scalar(@all_tokens), scalar(keys %lease_ack), scalar(@writes),
	$total_refused, $total_scratch_lost, time - $t_begin);

$node->stop;
done_testing();
