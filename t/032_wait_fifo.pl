# Copyright: fencing extension authors
#
# 032_wait_fifo.pl: waiters of a lease are served in arrival order.  Five
# waiters queue one after the other (each one seen queued before the next
# starts, in pg_locks: the head holds the lease's queue lock, the others
# wait for it), then the lease comes free:
#   - by expiry: each waiter takes it with a TTL of 1 s and lets it expire,
#     so the next one takes over at expiry;
#   - by release: each waiter releases it as soon as it has it;
#   - with a waiter cancelled and one timed out while queued: the others
#     still come in order, and the two leave no lock behind.
# A newcomer that waits queues behind them; one with wait => '0' tries
# once and may take a free lease ahead of them (today's meaning).  A
# semaphore's waiters queue the same way for whichever slot comes free.
# Each round runs $ROUNDS times (FENCING_FIFO_ROUNDS).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);

my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $ROUNDS = $ENV{FENCING_FIFO_ROUNDS} // 2;
my $N = 5;

my $node = PostgreSQL::Test::Cluster->new('fifo');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# a psql session running $sql in the background, named $app
sub start_psql
{
	my ($app, $sql) = @_;
	my %s = (out => '', err => '', app => $app);
	my $file = $node->basedir . "/$app.sql";
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh $sql;
	close($fh);
	$s{h} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres') . " application_name=$app",
			'-f', $file
		],
		'<', \undef, '>', \$s{out}, '2>', \$s{err},
		IPC::Run::timeout($timeout));
	return \%s;
}

sub finish_psql
{
	my ($s) = @_;
	eval { $s->{h}->finish; 1 } or $s->{h}->kill_kill;
	chomp $s->{out};
	return $s->{out};
}

# the lease's queue tag (field 4 = 0x4646) and wake-up tag (0x4645)
sub tag
{
	my ($lease, $field4) = @_;
	return qq{l.locktype = 'advisory' AND l.objsubid = $field4
	  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	  AND l.classid = ((fencing._lease_lock_tag('$lease') >> 32) & 4294967295)::oid
	  AND l.objid = (fencing._lease_lock_tag('$lease') & 4294967295)::oid};
}

# the session (by application_name) is the head: holds the queue lock and
# sleeps registered for wake-ups
sub is_head
{
	my ($lease, $app) = @_;
	return qq{EXISTS (SELECT FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
		WHERE a.application_name = '$app' AND } . tag($lease, 17990) . qq{
		  AND l.mode = 'ExclusiveLock' AND l.granted)
	  AND EXISTS (SELECT FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
		WHERE a.application_name = '$app' AND } . tag($lease, 17989) . qq{
		  AND l.mode = 'ShareLock' AND l.granted
		  AND a.wait_event_type = 'Extension')};
}

# the session waits in the lease's queue
sub is_queued
{
	my ($lease, $app) = @_;
	return qq{EXISTS (SELECT FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid)
		WHERE a.application_name = '$app' AND } . tag($lease, 17990) . qq{
		  AND l.mode = 'ExclusiveLock' AND NOT l.granted)};
}

sub queue_locks
{
	my ($lease) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks AS l WHERE " . tag($lease, 17990) . " OR " . tag($lease, 17989));
}

# start waiter i of the round and wait until it is queued (or the head)
sub start_waiter
{
	my ($lease, $i, $sql) = @_;
	my $app = "${lease}_w$i";
	my $s = start_psql($app, $sql);
	my $cond = $i == 1 ? is_head($lease, $app) : is_queued($lease, $app);
	ok($node->poll_query_until('postgres', "SELECT $cond"),
		"$lease: w$i is queued" . ($i == 1 ? ' (the head)' : ''));
	return $s;
}

# the waiters' names in the order of the tokens they got
sub order_of
{
	my (%tok) = @_;
	return join(' ', sort { $tok{$a} <=> $tok{$b} } grep { $tok{$_} =~ /^\d+$/ } keys %tok);
}

my $expected = join(' ', map { "w$_" } 1 .. $N);
my @orders;

for my $round (1 .. $ROUNDS)
{
	# ---- handed over by expiry: each takes it for 1 s
	my $lease = "fifo_exp_$round";
	my $tok = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$lease', 'holder', '10 min')");
	my @w;
	for my $i (1 .. $N)
	{
		push @w, start_waiter($lease, $i,
			"SELECT fencing.lease_acquire('$lease', 'w$i', '1 s', '120 s');\n");
	}
	$node->safe_psql('postgres', "SELECT fencing.lease_release('$lease', $tok)");
	my %got = map { ("w$_" => finish_psql($w[ $_ - 1 ])) } 1 .. $N;
	my $order = order_of(%got);
	push @orders, "expiry: $order";
	is($order, $expected, "round $round, handed over by expiry: $order")
	  or diag(join("\n", map { "w$_: $w[$_-1]{err}" } 1 .. $N));
	is($node->safe_psql('postgres',
			"SELECT expired_takeovers FROM fencing.lease_status WHERE name = '$lease'"),
		$N - 1, 'w2..w5 took over at expiry');
	is(queue_locks($lease), '0', 'no queue or wake-up lock left');

	# ---- handed over by release
	$lease = "fifo_rel_$round";
	$tok = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$lease', 'holder', '10 min')");
	@w = ();
	for my $i (1 .. $N)
	{
		push @w, start_waiter($lease, $i,
			"SELECT fencing.lease_acquire('$lease', 'w$i', '1 min', '120 s') AS t \\gset\n"
			  . "\\echo :t\n"
			  . "SELECT fencing.lease_release('$lease', :t) AS released \\gset\n");
	}
	# a newcomer with wait => '0' does not queue: held, so NULL
	is($node->safe_psql('postgres',
			"SELECT fencing.lease_acquire('$lease', 'barger', '1 min', '0') IS NULL"),
		't', 'a newcomer with wait => 0 tries once and does not queue');
	$node->safe_psql('postgres', "SELECT fencing.lease_release('$lease', $tok)");
	%got = map { ("w$_" => finish_psql($w[ $_ - 1 ])) } 1 .. $N;
	$order = order_of(%got);
	push @orders, "release: $order";
	is($order, $expected, "round $round, handed over by release: $order")
	  or diag(join("\n", map { "w$_: $w[$_-1]{err}" } 1 .. $N));
	is($node->safe_psql('postgres',
			"SELECT state || ' ' || releases FROM fencing.lease_status WHERE name = '$lease'"),
		'free ' . ($N + 1), 'each released it');
	is(queue_locks($lease), '0', 'no queue or wake-up lock left');
}

# ---- a waiter cancelled and one timed out while queued leave cleanly
{
	my $lease = 'fifo_leave';
	my $tok = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('$lease', 'holder', '10 min')");
	my @w;
	for my $i (1 .. $N)
	{
		my $wait = $i == 4 ? '5 s' : '120 s';
		push @w, start_waiter($lease, $i,
			"SELECT coalesce(fencing.lease_acquire('$lease', 'w$i', '1 s', '$wait')::text, 'null');\n");
	}
	$node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '${lease}_w2'");
	finish_psql($w[1]);
	like($w[1]{err}, qr/canceling statement due to user request/, 'w2 is cancelled while queued');
	my $t0 = time;
	is(finish_psql($w[3]), 'null', 'w4 gives up while queued: NULL, not an error')
	  or diag($w[3]{err});
	my $el = time - $t0;
	cmp_ok($el, '<', 60, sprintf('w4 gave up in time (%.2f s after w2)', $el));
	ok($node->poll_query_until('postgres', "SELECT NOT (" . is_queued($lease, "${lease}_w2")
		  . ") AND NOT (" . is_queued($lease, "${lease}_w4") . ")"),
		'w2 and w4 left the queue');
	ok($node->poll_query_until('postgres', "SELECT " . is_head($lease, "${lease}_w1")
		  . " AND " . is_queued($lease, "${lease}_w3") . " AND " . is_queued($lease, "${lease}_w5")),
		'w1 is still the head, w3 and w5 queue');
	# a newcomer that waits queues behind them
	my $late = start_waiter($lease, 6,
		"SELECT fencing.lease_acquire('$lease', 'w6', '1 s', '120 s');\n");
	$node->safe_psql('postgres', "SELECT fencing.lease_release('$lease', $tok)");
	my %got = map { ("w$_" => finish_psql($w[ $_ - 1 ])) } (1, 3, 5);
	$got{w6} = finish_psql($late);
	my $order = order_of(%got);
	push @orders, "leave: $order";
	is($order, 'w1 w3 w5 w6', "without the two that left, in order: $order");
	is(queue_locks($lease), '0', 'no queue or wake-up lock left');
}

# ---- a semaphore's waiters: the same queue, whichever slot comes free.
# Two slots, both held; the waiters take a slot for 1 s each, so each freed
# slot (by release first, then by expiry) goes to the head of the queue.
for my $round (1 .. $ROUNDS)
{
	my $sem = "fifo_sem_$round";
	my @held = map {
		$node->safe_psql('postgres',
			"SELECT fencing.semaphore_acquire('$sem', 'holder$_', 2, '10 min')")
	} (1, 2);
	my @w;
	for my $i (1 .. $N)
	{
		push @w, start_waiter($sem, $i,
			"SELECT fencing.semaphore_acquire('$sem', 'w$i', 2, '1 s', '120 s');\n");
	}
	$node->safe_psql('postgres', "SELECT fencing.lease_release('$sem', $_)") for @held;
	my %got = map { ("w$_" => finish_psql($w[ $_ - 1 ])) } 1 .. $N;
	my $order = order_of(%got);
	push @orders, "semaphore: $order";
	is($order, $expected, "round $round, a semaphore's freed slots: $order")
	  or diag(join("\n", map { "w$_: $w[$_-1]{err}" } 1 .. $N));
	is($node->safe_psql('postgres',
			"SELECT count(*) || ' slots, ' || sum(acquires) || ' acquires' FROM fencing.lease_status WHERE name = '$sem'"),
		'2 slots, ' . ($N + 2) . ' acquires', 'two slots served the two holders and all waiters');
	is(queue_locks($sem), '0', 'no queue or wake-up lock left');
}

note("orders: " . join('; ', @orders));
$node->stop;
done_testing();
