# Copyright: fencing extension authors
#
# 051_pgbouncer.pl: fencing through PgBouncer in transaction pooling mode,
# with a pool of two server connections shared by many clients.
#
# Nothing in the API depends on session state: a lease acquired through
# one server connection is renewed, checked and released through the
# other, by other clients.  The test pins a client's next transaction to a
# chosen server connection by keeping the other one busy, and asserts the
# backend PIDs.  Then: the fencing story; concurrent fenced writers (python
# psycopg2 processes) whose accepted writes are exactly the non-stale ones;
# fence_guard with SET LOCAL fencing.token, and why a plain SET is the
# wrong tool behind a transaction pooler; waiting acquires, and a pool
# exhausted by waiters.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use IPC::Run;
use Time::HiRes qw(time usleep);

my $python = '/usr/bin/python3';
plan skip_all => "$FencingTest::pgbouncer not found" unless -x $FencingTest::pgbouncer;
plan skip_all => 'pgbouncer does not run as root' if $> == 0;
plan skip_all => "$python with psycopg2 not found"
  unless system($python, '-c', 'import psycopg2') == 0;

my $timeout = $PostgreSQL::Test::Utils::timeout_default;

# ---------------------------------------------------------------------------
# a node, the recipe for an application role, and the tables

my $node = PostgreSQL::Test::Cluster->new('pgb');
$node->init;
$node->start;
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION fencing;
	CREATE ROLE app LOGIN;
	GRANT USAGE ON SCHEMA fencing TO app;
	CREATE SCHEMA appdata AUTHORIZATION app;
	SET ROLE app;
	CREATE TABLE appdata.story (id int PRIMARY KEY, state text, fence bigint);
	INSERT INTO appdata.story VALUES (1, 'new', NULL), (2, 'new', NULL);
	CREATE TABLE appdata.rows (id int PRIMARY KEY, fence bigint, writer text,
							   writes int NOT NULL DEFAULT 0);
	INSERT INTO appdata.rows (id) SELECT generate_series(1, 8);
	CREATE TABLE appdata.history (seq bigserial PRIMARY KEY, id int, token bigint,
								  writer text);
	CREATE TABLE appdata.guarded (id int PRIMARY KEY, state text, fence bigint);
	CREATE TRIGGER guard BEFORE INSERT OR UPDATE OR DELETE ON appdata.guarded
		FOR EACH ROW EXECUTE FUNCTION fencing.fence_guard('fence');
	INSERT INTO appdata.guarded VALUES (1, 'new', NULL);
});

# ---------------------------------------------------------------------------
# pgbouncer: transaction pooling, two server connections for everyone

my ($port, $dir, $bouncer_err, $bouncer) = start_pgbouncer($node,
	users => [ 'app', $superuser ], pool_size => 2, max_client_conn => 100);

my $up = 0;
for (1 .. 100)
{
	if (system('psql', '-XAtq', '-h', '127.0.0.1', '-p', $port, '-U', 'app',
			'-d', 'postgres', '-c', 'SELECT 1') == 0)
	{
		$up = 1;
		last;
	}
	usleep(100_000);
}
ok($up, "pgbouncer accepts connections on 127.0.0.1:$port")
  or BAIL_OUT("pgbouncer did not start: $$bouncer_err");

# ---------------------------------------------------------------------------
# clients: psql sessions through pgbouncer (see BouncerClient at the end)

sub client { return BouncerClient->new($_[0], $port, 'app', $timeout) }
sub sqlstate { return $_[0] =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : '' }

my %c = map { $_ => client($_) } qw(a b c d w w2 spare1 spare2);

# the two server connections, and a third transaction that must queue
my $p1 = $c{spare1}->query('BEGIN; SELECT pg_backend_pid();');
my $p2 = $c{spare2}->query('BEGIN; SELECT pg_backend_pid();');
isnt($p1, $p2, "two transactions at once use two server connections ($p1, $p2)");
$c{a}->send('BEGIN; SELECT pg_backend_pid();');
usleep(500_000);
ok(!$c{a}->ready, 'a third transaction waits: the pool has two connections');
$c{spare1}->query('COMMIT;');
my $p3 = $c{a}->result;
is($p3, $p1, 'it gets the connection the first one released');
$c{a}->query('COMMIT;');
$c{spare2}->query('COMMIT;');
my %backend = ($p1 => 1, $p2 => 1);

# Keep the server connection other than $pid busy with an open
# transaction; return the client that holds it.
sub occupy_other
{
	my ($pid) = @_;
	my $held = $c{spare1}->query('BEGIN; SELECT pg_backend_pid();');
	return $c{spare1} if $held != $pid;
	my $other = $c{spare2}->query('BEGIN; SELECT pg_backend_pid();');
	$c{spare1}->query('COMMIT;');
	die "pool has more than two connections ($other)" unless $backend{$other};
	return $c{spare2};
}

# Run $sql as the next transaction of client $name, on backend $pid.
sub on_backend
{
	my ($name, $pid, $sql) = @_;
	my $blocker = occupy_other($pid);
	my ($out, $err) = $c{$name}->query($sql);
	$blocker->query('COMMIT;');
	return wantarray ? ($out, $err) : $out;
}

# ---------------------------------------------------------------------------
# nothing depends on the session: one lease, four clients, two backends

my ($t, $pid) = split /\|/,
  on_backend('a', $p1,
	"SELECT fencing.lease_acquire('pgb_shared', 'worker', '1 min'), pg_backend_pid()");
is($pid, $p1, 'client a acquires through backend 1');
is( on_backend(
		'b', $p2,
		"SELECT fencing.lease_renew('pgb_shared', $t, '1 min'), pg_backend_pid()"),
	"t|$p2",
	'client b renews it through backend 2');
is( on_backend(
		'c', $p1, qq{
	BEGIN;
	SELECT fencing.lease_lock('pgb_shared', $t);
	WITH u AS (UPDATE appdata.story SET state = 'by worker', fence = $t
				WHERE id = 2 AND fencing.fence_allows(fence, $t) RETURNING 1)
	SELECT count(*) FROM u;
	SELECT pg_backend_pid();
	COMMIT;}),
	"t\n1\n$p1",
	'client c checks it and writes with its token in one transaction, through backend 1');
is( on_backend(
		'a', $p2,
		"SELECT fencing.lease_release('pgb_shared', $t), pg_backend_pid()"),
	"t|$p2",
	'client a releases it through backend 2: not the one it acquired through');
is( on_backend(
		'd', $p1,
		"SELECT fencing.lease_renew('pgb_shared', $t, '1 min'), pg_backend_pid()"),
	"f|$p1",
	'client d sees the release through backend 1');
my @tokens;
for my $i (0 .. 9)
{
	my $name = (qw(a b c d))[ $i % 4 ];
	my $want = $i % 2 ? $p2 : $p1;
	my ($tok, $got) = split /\|/,
	  on_backend($name, $want, 'SELECT fencing.next_token(), pg_backend_pid()');
	push @tokens, $tok;
	die "backend $got, not $want" unless $got == $want;
}
ok((!grep { $tokens[$_] <= $tokens[ $_ - 1 ] } 1 .. $#tokens),
	'next_token from alternating clients and backends: strictly increasing');

# ---------------------------------------------------------------------------
# the story: A's lease runs out while it sleeps, B takes over and writes,
# A's late write is refused

my $t_a = $c{a}->query("SELECT fencing.lease_acquire('pgb_story', 'A', '1 s')");
like($t_a, qr/^\d+$/, "A acquires with token $t_a, for 1 second");
usleep(1_500_000);
my $t_b = $c{b}->query("SELECT fencing.lease_acquire('pgb_story', 'B', '10 s')");
cmp_ok($t_b, '>', $t_a, "after 1.5 s B takes over with token $t_b");
is( $c{b}->query(
		"WITH u AS (UPDATE appdata.story SET state = 'written by B', fence = $t_b "
		  . "WHERE id = 1 AND fencing.fence_allows(fence, $t_b) RETURNING 1) "
		  . 'SELECT count(*) FROM u'),
	'1',
	'B writes: 1 row');
is($c{a}->query("SELECT fencing.lease_renew('pgb_story', $t_a, '1 s')"),
	'f', "A wakes up: its renew says it lost the lease");
is( $c{a}->query(
		"WITH u AS (UPDATE appdata.story SET state = 'written by A', fence = $t_a "
		  . "WHERE id = 1 AND fencing.fence_allows(fence, $t_a) RETURNING 1) "
		  . 'SELECT count(*) FROM u'),
	'0',
	"A's fenced write (fence_allows) changes 0 rows");
my ($out, $err) = $c{a}->query(
	"UPDATE appdata.story SET state = 'written by A', "
	  . "fence = fencing.fence_advance(fence, $t_a) WHERE id = 1");
is(sqlstate($err), 'LF001', "A's fenced write (fence_advance) is refused with LF001");
like($err, qr/fencing token $t_a is stale/, '... naming its stale token');
is($node->safe_psql('postgres', 'SELECT state, fence FROM appdata.story WHERE id = 1'),
	"written by B|$t_b", "the row keeps B's write");

# ---------------------------------------------------------------------------
# concurrent fenced writers: python processes, each with its own lease and
# its own client connection, all through the same two server connections

my $worker = "$dir/fenced_writer.py";
append_to_file($worker, <<'PY');
import json, random, sys
import psycopg2

w, port, rounds, nrows = (int(a) for a in sys.argv[1:5])
conn = psycopg2.connect(host='127.0.0.1', port=port, user='app', dbname='postgres')
conn.autocommit = True
cur = conn.cursor()
rnd = random.Random(w)
lease, holder = 'pgb_w%d' % w, 'worker-%d' % w
prev = None

def log(**kw):
    print(json.dumps(kw), flush=True)

for r in range(rounds):
    cur.execute("SELECT fencing.lease_acquire(%s, %s, '30 s'), pg_backend_pid()",
                (lease, holder))
    token, pid = cur.fetchone()
    log(kind='acquire', w=w, token=token, pid=pid)
    ids = list(range(1, nrows + 1))
    rnd.shuffle(ids)
    for i in ids:
        cur.execute(
            "WITH u AS (UPDATE appdata.rows SET fence = %(t)s, writer = %(h)s,"
            "                  writes = writes + 1"
            "            WHERE id = %(i)s AND fencing.fence_allows(fence, %(t)s)"
            "            RETURNING id, fence)"
            " INSERT INTO appdata.history (id, token, writer)"
            " SELECT id, fence, %(h)s FROM u RETURNING pg_backend_pid()",
            {'t': token, 'h': holder, 'i': i})
        row = cur.fetchone()
        log(kind='write', w=w, row=i, token=token, accepted=row is not None,
            pid=row[0] if row else None)
        # now the row's fence is >= token: the same token again, or an older
        # one, must be refused
        if prev is not None and rnd.random() < 0.5:
            try:
                cur.execute(
                    "UPDATE appdata.rows SET writer = %s,"
                    "       fence = fencing.fence_advance(fence, %s)"
                    " WHERE id = %s RETURNING pg_backend_pid()", (holder, prev, i))
                log(kind='stale', w=w, row=i, token=prev, accepted=True,
                    pid=cur.fetchone()[0])
            except psycopg2.Error as e:
                log(kind='stale', w=w, row=i, token=prev, accepted=False,
                    sqlstate=e.pgcode)
        else:
            cur.execute(
                "UPDATE appdata.rows SET writer = %s WHERE id = %s"
                " AND fencing.fence_allows(fence, %s) RETURNING pg_backend_pid()",
                (holder, i, token))
            log(kind='again', w=w, row=i, token=token, accepted=cur.rowcount == 1)
    cur.execute("SELECT fencing.lease_renew(%s, %s, '30 s'), pg_backend_pid()",
                (lease, token))
    ok, pid = cur.fetchone()
    log(kind='renew', w=w, token=token, ok=ok, pid=pid)
    prev = token
cur.execute("SELECT fencing.lease_release(%s, %s)", (lease, prev))
log(kind='release', w=w, ok=cur.fetchone()[0])
PY

my ($workers, $rounds, $nrows) = (6, 5, 8);
my @runs;
for my $w (1 .. $workers)
{
	my %io = (out => '', err => '');
	push @runs,
	  [
		IPC::Run::start(
			[ $python, $worker, $w, $port, $rounds, $nrows ],
			'>', \$io{out}, '2>', \$io{err},
			IPC::Run::timeout($timeout)),
		\%io
	  ];
}
my @log;
my $all_exit_0 = 1;
for my $run (@runs)
{
	my ($h, $io) = @$run;
	$h->finish;
	if ($h->result != 0)
	{
		$all_exit_0 = 0;
		diag("worker failed: $io->{err}");
	}
	push @log, map { decode_line($_) } grep { /\S/ } split /\n/, $io->{out};
}
ok($all_exit_0, "$workers concurrent writer processes finished");

# Tiny JSON reader for the flat objects the workers print.
sub decode_line
{
	my ($line) = @_;
	my %h;
	while ($line =~ /"(\w+)":\s*("([^"]*)"|-?\d+|true|false|null)/g)
	{
		my ($k, $v) = ($1, defined $3 ? $3 : $2);
		$v = 1 if $v eq 'true';
		$v = 0 if $v eq 'false';
		$v = undef if $v eq 'null';
		$h{$k} = $v;
	}
	return \%h;
}

my @writes = grep { $_->{kind} eq 'write' } @log;
my @stale = grep { $_->{kind} eq 'stale' } @log;
my @again = grep { $_->{kind} eq 'again' } @log;
my @renew = grep { $_->{kind} eq 'renew' } @log;
is(scalar(@writes), $workers * $rounds * $nrows, 'every worker made every write');
ok((grep { $_->{accepted} } @writes), 'some writes were accepted ...');
ok((grep { !$_->{accepted} } @writes), '... and some refused, as newer tokens got there first');
ok(!(grep { $_->{accepted} || $_->{sqlstate} ne 'LF001' } @stale),
	scalar(@stale) . ' writes with an older token: all refused with LF001');
ok(!(grep { $_->{accepted} } @again),
	scalar(@again) . ' repeated writes with the same token: all refused (0 rows)');
ok(!(grep { !$_->{ok} } @renew), 'every worker kept its lease through its rounds');
my %pids = map { $_->{pid} => 1 } grep { defined $_->{pid} } @log;
ok(keys(%pids) <= 2 && !(grep { !$backend{$_} } keys %pids),
	"$workers clients shared the two server connections: "
	  . join(', ', sort keys %pids));

# the history of each row: accepted writes in the order they happened
my %history;
for (split /\n/,
	$node->safe_psql('postgres',
		'SELECT id, token, writer FROM appdata.history ORDER BY seq'))
{
	my ($id, $token, $writer) = split /\|/;
	push @{ $history{$id} }, [ $token, $writer ];
}
my %final = map { my ($id, $f, $wr, $n) = split /\|/; $id => [ $f, $wr, $n ] }
  split /\n/,
  $node->safe_psql('postgres', 'SELECT id, fence, writer, writes FROM appdata.rows');
my $ordered = 1;
my $final_ok = 1;
for my $id (1 .. $nrows)
{
	my @h = @{ $history{$id} || [] };
	$ordered &&= !(grep { $h[$_][0] <= $h[ $_ - 1 ][0] } 1 .. $#h);
	$final_ok &&= @h
	  && $final{$id}[0] == $h[-1][0]
	  && $final{$id}[2] == scalar(@h);
}
ok($ordered, 'each row was written with strictly increasing tokens: no stale write accepted');
ok($final_ok, "each row's fence is the token of its last accepted write, and it counts its writes");
my %accepted = map { ("$_->{row}:$_->{token}" => 1) } grep { $_->{accepted} } @writes;
my %in_history;
for my $id (keys %history) { $in_history{"$id:$_->[0]"} = 1 for @{ $history{$id} } }
is_deeply(\%in_history, \%accepted,
	'the writes the workers saw accepted are exactly those in the history');
my $explained = 1;
for my $w (grep { !$_->{accepted} } @writes)
{
	$explained = 0
	  unless grep { $_->[0] > $w->{token} } @{ $history{ $w->{row} } };
}
ok($explained, 'every refused write was refused because a newer token had written the row');

# ---------------------------------------------------------------------------
# fence_guard: SET LOCAL (or set_config(..., true)) is per transaction and
# works; a plain SET stays on the server connection, not with the client

my $t_g = $c{a}->query("SELECT fencing.lease_acquire('pgb_guard', 'g', '1 min')");
is( $c{a}->query(
		"BEGIN; SET LOCAL fencing.token = '$t_g'; "
		  . "UPDATE appdata.guarded SET state = 'by g' WHERE id = 1; "
		  . 'SELECT fence FROM appdata.guarded WHERE id = 1; COMMIT;'),
	$t_g,
	'SET LOCAL fencing.token in a transaction: the guard stamps the row');
($out, $err) = $c{b}->query(
	"BEGIN; SELECT set_config('fencing.token', '" . ($t_g - 1) . "', true); "
	  . "UPDATE appdata.guarded SET state = 'stale' WHERE id = 1; ROLLBACK;");
is(sqlstate($err), 'LF001', 'an older declared token is refused (LF001)');
is(on_backend('c', $p1, 'SHOW fencing.token'),
	'', 'no declared token is left on backend 1 ...');
is(on_backend('c', $p2, 'SHOW fencing.token'), '', '... nor on backend 2');

my $t_s = $c{d}->query("SELECT fencing.lease_acquire('pgb_set', 's', '1 min')");
is(on_backend('d', $p1, "SET fencing.token = '$t_s'; SELECT pg_backend_pid();"),
	$p1, "client d runs a plain SET fencing.token = $t_s (lands on backend 1)");
($out, $err) = on_backend('b', $p1,
	"UPDATE appdata.guarded SET state = 'by b, no token' WHERE id = 1 RETURNING fence");
is($out, $t_s,
	"client b declared nothing, yet its write on backend 1 went through with d's token"
);
($out, $err) = on_backend('d', $p2,
	"UPDATE appdata.guarded SET state = 'by d' WHERE id = 1 RETURNING fence");
is(sqlstate($err), 'LF004',
	"client d's own next transaction, on backend 2, has no token: LF004");
like($err, qr/carries no fencing token/, '... "carries no fencing token"');
on_backend('d', $p1, 'RESET fencing.token');
is(on_backend('c', $p1, 'SHOW fencing.token'), '', 'the plain SET is undone');
is( $c{d}->query(
		"BEGIN; SELECT set_config('fencing.token', '$t_s', true) IS NOT NULL; "
		  . "UPDATE appdata.guarded SET state = 'by d' WHERE id = 1 RETURNING fence; COMMIT;"),
	"t\n$t_s",
	"set_config('fencing.token', ..., true) is the same as SET LOCAL");

# ---------------------------------------------------------------------------
# waiting acquires through pgbouncer

my $t_w1 = $c{a}->query("SELECT fencing.lease_acquire('pgb_wait', 'h1', '30 s')");
my $start = time;
$c{w}->send("SELECT fencing.lease_acquire('pgb_wait', 'h2', '30 s', '20 s')");
usleep(500_000);
ok(!$c{w}->ready, 'a waiting acquire waits, holding one server connection');
is($c{a}->query("SELECT fencing.lease_release('pgb_wait', $t_w1)"),
	't', 'the holder releases through the other connection');
my $t_w2 = $c{w}->result;
my $waited = time - $start;
cmp_ok($t_w2, '>', $t_w1, "the waiter gets the lease (token $t_w2)");
cmp_ok($waited, '<', 10, sprintf('... when it is released (%.1f s)', $waited));

$c{a}->query("SELECT fencing.lease_acquire('pgb_wait2', 'h1', '1 s')");
$start = time;
my $t_w3 =
  $c{w}->query("SELECT fencing.lease_acquire('pgb_wait2', 'h2', '30 s', '10 s')");
$waited = time - $start;
like($t_w3, qr/^\d+$/, 'a waiter gets a lease that expires');
ok($waited > 0.1 && $waited < 8,
	sprintf('... when it expires (%.1f s)', $waited));

# two waiters hold both server connections: the holder's release queues in
# pgbouncer until one waiter gives up; then it runs, and wakes the other
my $t_x = $c{a}->query("SELECT fencing.lease_acquire('pgb_wait3', 'h1', '30 s')");
$c{w}->send("SELECT fencing.lease_acquire('pgb_wait3', 'h2', '30 s', '2 s')");
$c{w2}->send("SELECT fencing.lease_acquire('pgb_wait3', 'h3', '30 s', '20 s')");
usleep(500_000);
$start = time;
$c{a}->send("SELECT fencing.lease_release('pgb_wait3', $t_x)");
usleep(500_000);
ok(!$c{a}->ready, 'with both connections held by waiters, the release waits in the pooler');
is($c{w}->result, '', 'the waiter with the shorter wait gives up (NULL)');
is($c{a}->result, 't', 'only then does the release run');
my $late = time - $start;
cmp_ok($late, '>', 1, sprintf('... %.1f s late', $late));
my $t_x2 = $c{w2}->result;
cmp_ok($t_x2, '>', $t_x, 'and the other waiter gets the lease');
cmp_ok(time - $start, '<', 10, '... long before its own wait is over');

# ---------------------------------------------------------------------------

$_->quit for values %c;
$bouncer->kill_kill;
undef $bouncer;
like(slurp_file("$dir/pgbouncer.log"), qr/process up/, 'pgbouncer ran');
done_testing();

# ---------------------------------------------------------------------------
# A psql session through pgbouncer that takes one query at a time.

package BouncerClient;

sub new
{
	my ($class, $name, $port, $user, $timeout) = @_;
	my $self = bless {
		name => $name,
		stdin => '',
		stdout => '',
		stderr => '',
		n => 0,
		secs => $timeout,
	}, $class;
	$self->{run} = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'VERBOSITY=verbose', '-h', '127.0.0.1',
			'-p', $port, '-U', $user, '-d', 'postgres', '-f', '-'
		],
		'<', \$self->{stdin}, '>', \$self->{stdout}, '2>', \$self->{stderr});
	$self->query('SELECT 1');
	return $self;
}

sub send
{
	my ($self, $sql) = @_;
	$self->{banner} = "--done $self->{name} " . ++$self->{n} . '--';
	# no empty statement after a trailing semicolon: psql would send it,
	# and behind pgbouncer even an empty query waits for a server
	$sql .= ';' unless $sql =~ /;\s*$/;
	$self->{stdin} .= "$sql\n\\echo '$self->{banner}'\n\\warn '$self->{banner}'\n";
	$self->{run}->pump_nb;
	return;
}

sub _done
{
	my ($self) = @_;
	my $b = quotemeta $self->{banner};
	return $self->{stdout} =~ /$b\n/ && $self->{stderr} =~ /$b\n/;
}

sub ready
{
	my ($self) = @_;
	$self->{run}->pump_nb;
	return $self->_done;
}

sub result
{
	my ($self) = @_;
	my $deadline = Time::HiRes::time() + $self->{secs};
	until ($self->_done)
	{
		die "query timed out on client $self->{name}: $self->{stderr}"
		  if Time::HiRes::time() > $deadline;
		$self->{run}->pump_nb;
		Time::HiRes::usleep(5_000);
	}
	my $b = quotemeta $self->{banner};
	(my $out = $self->{stdout}) =~ s/$b\n//;
	(my $err = $self->{stderr}) =~ s/$b\n//;
	$self->{stdout} = $self->{stderr} = '';
	chomp $out;
	return wantarray ? ($out, $err) : $out;
}

sub query
{
	my ($self, $sql) = @_;
	$self->send($sql);
	return $self->result;
}

sub quit
{
	my ($self) = @_;
	$self->{stdin} .= "\\q\n";
	$self->{run}->finish;
	return;
}
