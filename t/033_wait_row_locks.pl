# Copyright: fencing extension authors
#
# 033_wait_row_locks.pl: lease calls that meet the lease row locked by
# another transaction.
#
#   - An acquire's wait is bounded while another transaction holds the row
#     (a holder's lease_lock in an open transaction, past its TTL; an
#     uncommitted creation of the lease; a semaphore's last slot): a
#     try-once acquire returns NULL at once, one with a wait at its
#     deadline.  The holder's own renew and check are refused once its
#     lease has expired, although its transaction still holds the row.
#   - A renew, check, release or forced release that waited for the row
#     judges it again with the clock as it is once the row is its own: a
#     lease that expired while it waited is not renewed (nor its expiry
#     moved into the past), not reported live, and not kept locked.
#   - A release in a prepared transaction hands the lease to a waiter at
#     COMMIT PREPARED, not at the waiter's deadline; a watcher of the
#     token (lease_watch) and an observer of an election (election_observe)
#     learn of a change made in a prepared transaction at COMMIT PREPARED
#     too.
#
# Each waits for the condition it needs (a lock wait, a sleeping waiter, an
# expired lease), never for time to pass.  The calls that must not block
# have a statement_timeout of 30 s, so that where they do (83fed51) the
# test fails instead of hanging.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

# the node for everything but the clock steps: PostgreSQL's timers
# (lock_timeout, statement_timeout, the wait's deadline) do not fire under
# libfaketime with an offset, so they are tested with the real clock
my $node = PostgreSQL::Test::Cluster->new('rowlocks');
$node->init;
$node->append_conf('postgresql.conf', 'max_prepared_transactions = 10');
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# a session of its own, named (application_name) for pg_stat_activity
sub session
{
	my ($name) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->set_query_timer_restart;
	$s->query_safe("SET application_name = '$name'");
	return $s;
}

# one statement's output (without the newline some versions leave)
sub qs
{
	my ($s, $sql) = @_;
	my $out = $s->query_safe($sql);
	chomp $out;
	return $out;
}

# start a statement in a session and return at once
sub start_query
{
	my ($s, $sql) = @_;
	$s->query_until(qr/__started__\n/, "\\echo __started__\n$sql;\n");
	return;
}

# what the statement started last printed, and its error (or '')
sub finish_query
{
	my ($s) = @_;
	my $out = $s->query(';');
	my $err = $s->{stderr};
	$s->{stderr} = '';
	chomp $out;
	return ($out, $err);
}

# until the session waits for a heavyweight lock (a row's, a transaction's)
sub wait_for_lock_wait
{
	my ($name) = @_;
	return $node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE application_name = '$name' AND wait_event_type = 'Lock'});
}

# until the session sleeps in a lease wait (its latch)
sub wait_asleep
{
	my ($name) = @_;
	return $node->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE application_name = '$name'
		   AND wait_event_type = 'Extension'
		   AND wait_event IN ('Extension', 'FencingLeaseWait')});
}

# run one statement in a session, with its time; dies on a hang
sub timed
{
	my ($s, $sql) = @_;
	my $t0 = time;
	my ($out, $ret) = $s->query($sql);
	my $err = $s->{stderr};
	$s->{stderr} = '';
	chomp $out;
	return ($out, $err, time - $t0);
}

sub val
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

my $holder = session('holder');
my $other = session('other');
my $caller = session('caller');
# a call that blocks where it must not errors out instead of hanging
$_->query_safe("SET statement_timeout = '30s'") for ($other, $caller);

# ---------------------------------------------------------------------------
# item 3: an acquire's wait is bounded while another transaction holds the
# row

# until the lease has expired, by the server's clock
sub wait_expired
{
	my ($lease) = @_;
	return $node->poll_query_until('postgres', qq{
		SELECT expires_at < clock_timestamp() FROM fencing.leases
		 WHERE name = '$lease'});
}

# the holder's open transaction keeps the row locked (FOR NO KEY UPDATE,
# the lock lease_lock takes, taken here by hand so that the lease can
# expire under it without a race against the clock) past the lease's TTL
my $tok = val("SELECT fencing.lease_acquire('rl', 'A', '1 s')");
$holder->query_safe('BEGIN');
is(qs($holder, "SELECT holder FROM fencing.leases WHERE name = 'rl' FOR NO KEY UPDATE"),
	'A', 'the holder\'s transaction has the row locked');
ok(wait_expired('rl'), 'the lease expires while that transaction is open');

my ($out, $err, $el) =
  timed($caller, "SELECT coalesce(fencing.lease_acquire('rl', 'B', '1 min')::text, 'null')");
is($out . $err, 'null', 'a try-once takeover of the locked row: NULL');
cmp_ok($el, '<', 5, sprintf('at once (%.2f s), not when the holder commits', $el));

($out, $err, $el) = timed($caller,
	"SELECT coalesce(fencing.lease_acquire('rl', 'B', '1 min', wait => '1 s')::text, 'null')");
is($out . $err, 'null', 'with wait => 1 s: NULL');
cmp_ok($el, '>=', 1, sprintf('not before its deadline (%.2f s)', $el));
cmp_ok($el, '<', 6, sprintf('at its deadline (%.2f s), not when the holder commits', $el));

# a waiter with time to spare gets the lease when the holder's transaction
# ends, with a lease that runs from then on
start_query($other,
	"SELECT fencing.lease_acquire('rl', 'C', '1 h', wait => '1 min') > $tok");
ok(wait_for_lock_wait('other'), 'a waiting takeover waits for the row');
my $mark = qs($holder, "SELECT pg_catalog.clock_timestamp()");
$holder->query_safe('COMMIT');
($out, $err) = finish_query($other);
is($out . $err, 't', 'and takes the lease over once the holder commits');
is(val("SELECT holder || ' ' || (acquired_at >= '$mark' AND expires_at > timestamptz '$mark' + interval '59 min')
		  FROM fencing.leases WHERE name = 'rl'"),
	'C true', 'its lease runs from the end of its wait');

# a lease being created by a transaction still open
$holder->query_safe('BEGIN');
like(qs($holder, "SELECT fencing.lease_acquire('rl_new', 'A', '1 h')"),
	qr/^\d+$/, 'a lease created in an open transaction');
($out, $err, $el) = timed($caller,
	"SELECT coalesce(fencing.lease_acquire('rl_new', 'B', '1 min')::text, 'null')");
is($out . $err, 'null', 'a try-once acquire of it: NULL');
cmp_ok($el, '<', 5, sprintf('at once (%.2f s)', $el));
($out, $err, $el) = timed($caller,
	"SELECT coalesce(fencing.lease_acquire('rl_new', 'B', '1 min', wait => '1 s')::text, 'null')");
is($out . $err, 'null', 'with wait => 1 s: NULL');
cmp_ok($el, '<', 6, sprintf('at its deadline (%.2f s)', $el));
$holder->query_safe('COMMIT');

# a semaphore: slot 0 held, slot 1 expired under an open transaction
val("SELECT fencing.semaphore_acquire('rl_sem', 'X', 2, '1 h')");
$tok = val("SELECT fencing.semaphore_acquire('rl_sem', 'Y', 2, '1 s')");
$holder->query_safe('BEGIN');
is(qs($holder, "SELECT holder FROM fencing.leases WHERE name = 'rl_sem' AND slot = 1 FOR NO KEY UPDATE"),
	'Y', 'a semaphore slot\'s row locked');
ok($node->poll_query_until('postgres', qq{
	SELECT expires_at < clock_timestamp() FROM fencing.leases
	 WHERE name = 'rl_sem' AND slot = 1}), 'and expired');
($out, $err, $el) = timed($caller,
	"SELECT coalesce(fencing.semaphore_acquire('rl_sem', 'B', 2, '1 min')::text, 'null')");
is($out . $err, 'null', 'a try-once acquire of the semaphore: NULL');
cmp_ok($el, '<', 5, sprintf('at once (%.2f s)', $el));
($out, $err, $el) = timed($caller,
	"SELECT coalesce(fencing.semaphore_acquire('rl_sem', 'B', 2, '1 min', wait => '1 s')::text, 'null')");
is($out . $err, 'null', 'with wait => 1 s: NULL');
cmp_ok($el, '<', 6, sprintf('at its deadline (%.2f s)', $el));
$holder->query_safe('COMMIT');

# ---------------------------------------------------------------------------
# item 9: a release in a prepared transaction

my $admin = session('admin');

# (a) the waiter sleeps when the release is prepared
$tok = val("SELECT fencing.lease_acquire('rp', 'H', '10 h')");
start_query($caller,
	"SELECT fencing.lease_acquire('rp', 'W', '1 h', wait => '25 s') > $tok");
ok(wait_asleep('caller'), 'a waiter sleeps');
$holder->query_safe("BEGIN; SELECT fencing.lease_release('rp', $tok); PREPARE TRANSACTION 'rp_release'");
ok(wait_for_lock_wait('caller'),
	'PREPARE wakes it, and it waits for the prepared transaction');
my $t0 = time;
$admin->query_safe("COMMIT PREPARED 'rp_release'");
($out, $err) = finish_query($caller);
$el = time - $t0;
is($out . $err, 't', 'COMMIT PREPARED hands it the lease');
cmp_ok($el, '<', 10, sprintf('at once (%.2f s), not at its deadline', $el));

# (b) the waiter comes while the release is prepared
$tok = val("SELECT fencing.lease_acquire('rq', 'H', '10 h')");
$holder->query_safe("BEGIN; SELECT fencing.lease_release('rq', $tok); PREPARE TRANSACTION 'rq_release'");
start_query($caller,
	"SELECT fencing.lease_acquire('rq', 'W', '1 h', wait => '25 s') > $tok");
ok(wait_for_lock_wait('caller'), 'a waiter that comes later waits for it too');
$t0 = time;
$admin->query_safe("COMMIT PREPARED 'rq_release'");
($out, $err) = finish_query($caller);
$el = time - $t0;
is($out . $err, 't', 'and gets the lease at COMMIT PREPARED');
cmp_ok($el, '<', 10, sprintf('at once (%.2f s)', $el));

# (c) ROLLBACK PREPARED: the lease stays the holder's
$tok = val("SELECT fencing.lease_acquire('rs', 'H', '10 h')");
$holder->query_safe("BEGIN; SELECT fencing.lease_release('rs', $tok); PREPARE TRANSACTION 'rs_release'");
start_query($caller,
	"SELECT coalesce(fencing.lease_acquire('rs', 'W', '1 h', wait => '3 s')::text, 'null')");
ok(wait_for_lock_wait('caller'), 'a waiter waits for a prepared release');
$admin->query_safe("ROLLBACK PREPARED 'rs_release'");
($out, $err) = finish_query($caller);
is($out . $err, 'null', 'ROLLBACK PREPARED: it goes back to waiting, and gives up');
is(val("SELECT holder || ' ' || (token = $tok) FROM fencing.lease_status WHERE name = 'rs'"),
	'H true', 'the holder keeps its lease');

# (d) a semaphore, every slot held, one released in a prepared transaction
val("SELECT fencing.semaphore_acquire('rt', 'X', 2, '10 h')");
$tok = val("SELECT fencing.semaphore_acquire('rt', 'Y', 2, '10 h')");
start_query($caller,
	"SELECT fencing.semaphore_acquire('rt', 'W', 2, '1 h', wait => '25 s') > $tok");
ok(wait_asleep('caller'), 'a semaphore waiter sleeps');
$holder->query_safe("BEGIN; SELECT fencing.lease_release('rt', $tok); PREPARE TRANSACTION 'rt_release'");
$t0 = time;
$admin->query_safe("COMMIT PREPARED 'rt_release'");
($out, $err) = finish_query($caller);
$el = time - $t0;
is($out . $err, 't', 'COMMIT PREPARED hands it the slot');
cmp_ok($el, '<', 10, sprintf('soon (%.2f s), not at its deadline', $el));
is(val("SELECT string_agg(holder, ' ' ORDER BY slot) FROM fencing.lease_status WHERE name = 'rt'"),
	'X W', 'the slot that came free');

# (e) a watcher of a token: PREPARE wakes it, it still sees the token
# current and waits for the prepared transaction, which no COMMIT PREPARED
# would wake it from
$tok = val("SELECT fencing.lease_acquire('ru', 'H', '10 h')");
start_query($caller,
	"SELECT reason FROM fencing.lease_watch('ru', $tok, wait => '25 s')");
ok(wait_asleep('caller'), 'a watcher sleeps');
$holder->query_safe("BEGIN; SELECT fencing.lease_release('ru', $tok); PREPARE TRANSACTION 'ru_release'");
ok(wait_for_lock_wait('caller'),
	'PREPARE wakes the watcher, and it waits for the prepared transaction');
$t0 = time;
$admin->query_safe("COMMIT PREPARED 'ru_release'");
($out, $err) = finish_query($caller);
$el = time - $t0;
is($out . $err, 'released', 'COMMIT PREPARED: the watcher learns of the release');
cmp_ok($el, '<', 10, sprintf('at once (%.2f s), not at its deadline', $el));

# (f) an observer of an election, the leader resigning in a prepared
# transaction
$tok = val("SELECT fencing.election_campaign('rv', 'H', 'v1', '10 h')");
start_query($caller,
	"SELECT coalesce(candidate, 'none') FROM fencing.election_observe('rv', $tok, 'v1', '25 s')");
ok(wait_asleep('caller'), 'an observer sleeps');
$holder->query_safe("BEGIN; SELECT fencing.election_resign('rv', $tok); PREPARE TRANSACTION 'rv_resign'");
ok(wait_for_lock_wait('caller'),
	'PREPARE wakes the observer, and it waits for the prepared transaction');
$t0 = time;
$admin->query_safe("COMMIT PREPARED 'rv_resign'");
($out, $err) = finish_query($caller);
$el = time - $t0;
is($out . $err, 'none', 'COMMIT PREPARED: the observer sees no leader');
cmp_ok($el, '<', 10, sprintf('at once (%.2f s), not at its deadline', $el));

$_->quit for ($holder, $other, $caller, $admin);
$node->stop;

# ---------------------------------------------------------------------------
# item 1: a call that waited for the row judges it again, by the clock as
# it is once the row is its own.  The lease expires while the call waits:
# the server runs under libfaketime with its offset read from a file (as
# in t/031_wait_clock_step.pl), and the test steps its wall clock forward.
# None of these calls has a deadline (their waits are an UPDATE's), so the
# timers that libfaketime's offset upsets are not needed.

my $faketime = (grep { -e $_ } glob('/usr/lib/*/faketime/libfaketime.so.1'))[0];
SKIP:
{
	# test/deps.sh installs it for CI (Debian: libfaketime)
	skip 'libfaketime not installed', 18 unless defined $faketime;

	$node = PostgreSQL::Test::Cluster->new('clockstep');
	$node->init;
	my $offset_file = $node->basedir . '/faketime_offset';
	my $offset_hours = 0;
	my $step_clock = sub {
		my ($hours) = @_;
		$offset_hours += $hours;
		open(my $fh, '>', "$offset_file.new") or die "$offset_file.new: $!";
		print $fh "+${offset_hours}h\n";
		close($fh);
		rename("$offset_file.new", $offset_file) or die "rename: $!";
	};
	$step_clock->(0);
	{
		local $ENV{LD_PRELOAD} = $faketime;
		local $ENV{FAKETIME_TIMESTAMP_FILE} = $offset_file;
		local $ENV{FAKETIME_NO_CACHE} = '1';
		local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = '1';
		local $ENV{FAKETIME_DONT_RESET} = '1';
		$node->start;
	}
	$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
	$holder = session('holder');
	$other = session('other');
	$caller = session('caller');

	# the holder's first session keeps the row locked with a check; the
	# call in $caller (the holder's second session, or an admin) waits for
	# it; the lease expires; the check's transaction ends
	my $lock_then_expire = sub {
		my ($lease, $call) = @_;
		my $t = val("SELECT fencing.lease_acquire('$lease', 'A', '1 h')");
		$holder->query_safe('BEGIN');
		$holder->query_safe("SELECT fencing.lease_lock('$lease', $t)");
		start_query($caller, sprintf($call, $t));
		ok(wait_for_lock_wait('caller'), "$lease: the call waits for the row");
		$step_clock->(2);
		return $t;
	};

	# the holder's transaction checked the lease, which has expired since:
	# its COMMIT fails (LF022), and ends the transaction all the same
	my $holder_commit_refused = sub {
		$holder->query('COMMIT');
		like($holder->{stderr}, qr/expired before the transaction that renewed or checked it committed/,
			'the check\'s transaction cannot commit after the expiry');
		$holder->{stderr} = '';
	};

	# the holder's own renew and check, in the transaction that holds the
	# row, once the lease has expired
	$tok = $lock_then_expire->('rj', "SELECT fencing.lease_renew('rj', %s, '1 h')");
	is(qs($holder, "SELECT fencing.lease_renew('rj', $tok, '1 h')"),
		'f', 'the holder\'s renew in the transaction that holds the row: false');
	is(qs($holder, "SELECT fencing.lease_lock('rj', $tok)"),
		'f', 'and its check: the row lock does not keep the lease');
	$holder_commit_refused->();
	($out, $err) = finish_query($caller);
	is($out . $err, 'f', 'a renew that waited past the expiry: false');
	is(val("SELECT renewals || ' ' || (expires_at < clock_timestamp()) FROM fencing.leases WHERE name = 'rj'"),
		'0 true', 'and the lease is as it was: not renewed, expired');

	$caller->query_safe('BEGIN');
	$tok = $lock_then_expire->('rk', "SELECT fencing.lease_lock('rk', %s)");
	$holder_commit_refused->();
	($out, $err) = finish_query($caller);
	is($out . $err, 'f', 'a check that waited past the expiry: false');
	($out, $err) = timed($other,
		"SELECT fencing.lease_acquire('rk', 'B', '1 h') IS NOT NULL");
	is($out . $err, 't',
		'and its transaction, still open, keeps no lock: a takeover goes through');
	$caller->query_safe('COMMIT');

	$tok = $lock_then_expire->('rr', "SELECT fencing.lease_release('rr', %s)");
	$holder_commit_refused->();
	($out, $err) = finish_query($caller);
	is($out . $err, 'f', 'a release that waited past the expiry: false');
	is(val("SELECT releases || ' ' || (released_at IS NULL) FROM fencing.leases WHERE name = 'rr'"),
		'0 true', 'and nothing was released');

	$tok = $lock_then_expire->('rf', "SELECT fencing.lease_force_release('rf')");
	$holder_commit_refused->();
	($out, $err) = finish_query($caller);
	is($out . $err, 'f', 'a forced release that waited past the expiry: nothing to end');
	is(val("SELECT releases FROM fencing.leases WHERE name = 'rf'"),
		'0', 'and nothing was released');

	$_->quit for ($holder, $other, $caller);
	$node->stop;
}

done_testing();
