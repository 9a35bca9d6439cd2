# Copyright: fencing extension authors
#
# 901_redt_raise_cut.pl (red team, currently FAILS): the WAL ends between
# the two records of a raise (raise_to_clock writes token_origin, then
# token_witness; it flushes neither).  Any commit of another backend in
# between flushes the first without the second.
#
# A. An asynchronous standby received WAL up to that cut, and is promoted.
#    classify() sees witness != token_origin's page LSN: BAND_REPLACED, so
#    fencing_check_token_band() takes the database for a copy that never
#    issued a token and compares numbers only.  A holder whose token was
#    issued before the failover is accepted, over a newer holder's write
#    that the failover lost.  README: "in the database that issues the
#    tokens, a token issued before the current band (before the failover)
#    is refused ... with LF005" (t/012_lost_tail.pl, without the cut).
#
# B. The primary itself crashes at that cut (a backend killed, crash
#    recovery, no failover).  The next token enters a band, and a live
#    lease's current holder is refused with LF005 ("lost at failover").
#
# gdb stops the raising backend at its second setval() (the witness), after
# the first (token_origin) was inserted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

plan skip_all => 'gdb not installed' unless in_path('gdb');

# a psql session whose input we feed line by line
sub session
{
	my ($node) = @_;
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

sub send_wait
{
	my ($s, $sql, $re, $what) = @_;
	$s->{out} = $s->{err} = '';
	$s->{in} .= "$sql\n";
	wait_until($what, 120, sub {
		$s->{h}->pump_nb;
		return ($s->{out} . $s->{err}) =~ $re;
	});
	return $s->{out} . $s->{err};
}

# Session R draws a token after a pause (a raise); gdb holds R at the
# raise's second setval(), token_origin's record inserted, the witness's
# not.  Returns (session, gdb handle, gdb input ref, R's pid).
sub stop_raise_between_records
{
	my ($node) = @_;
	my $r = session($node);
	my ($pid) = send_wait($r, 'SELECT pg_backend_pid(), fencing.next_token();',
		qr/^(\d+)\|/, 'R to connect') =~ /^(\d+)/;
	my ($gin, $gout) = ('', '');
	my $gdb = IPC::Run::start(
		[ 'gdb', '-q', '-nx', '-iex', 'set debuginfod enabled off', '-p', $pid ],
		'<', \$gin, '>&', \$gout);
	$gin .= "set pagination off\nset confirm off\nbreak setval3_oid\ncontinue\n";
	wait_until('gdb to attach to R', 120, sub { $gdb->pump_nb; return $gout =~ /Continuing\./; });
	$r->{out} = $r->{err} = '';
	# 100 ms behind the clock: the draw raises the counter
	$r->{in} .= "SELECT pg_sleep(0.1); SELECT fencing.next_token();\n";
	wait_until('R at the raise\'s first setval (token_origin)', 120, sub {
		$gdb->pump_nb;
		$r->{h}->pump_nb;
		return $gout =~ /Breakpoint 1, [^\n]*setval3_oid/;
	});
	$gout = '';
	$gin .= "continue\n";
	wait_until('R at the raise\'s second setval (the witness)', 120, sub {
		$gdb->pump_nb;
		$r->{h}->pump_nb;
		return $gout =~ /Breakpoint 1, [^\n]*setval3_oid/;
	});
	return ($r, $gdb, \$gin, $pid);
}

# Another backend's commit (any write) flushes WAL past token_origin's new
# record (the WAL writer does too, every wal_writer_delay).
sub flush_past_origin
{
	my ($node) = @_;
	$node->safe_psql('postgres', 'INSERT INTO other VALUES (1)');
	is($node->safe_psql('postgres', q{SELECT pg_current_wal_flush_lsn() >=
			(SELECT lsn FROM page_header(get_raw_page('fencing.token_origin', 0)))
		AND (SELECT lsn FROM page_header(get_raw_page('fencing.token_origin', 0))) - '0/0'
			<> (SELECT last_value FROM fencing.token_witness)}),
		't', 'WAL is durable past the raise\'s token_origin record, and the witness is not written');
}

# ---------------- A: a standby promoted at the cut
my $p = PostgreSQL::Test::Cluster->new('p');
$p->init(allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', q{
CREATE EXTENSION fencing;
CREATE EXTENSION pageinspect;
CREATE TABLE other (i int);
CREATE TABLE res (id int PRIMARY KEY, fence bigint, writer text);
INSERT INTO res VALUES (1, NULL, NULL);
});
$p->backup('b');
my $s = PostgreSQL::Test::Cluster->new('s');
$s->init_from_backup($p, 'b', has_streaming => 1);
$s->start;

my $tw = acquire($p, 'L', 'W', '1 s');
$p->safe_psql('postgres', "UPDATE res SET fence = fencing.fence_advance(fence, $tw), writer = 'W' WHERE id = 1");
$p->safe_psql('postgres', "SELECT fencing.lease_release('L', $tw)");
my $tx = acquire($p, 'L', 'X', '1 s');    # X stalls before writing
$p->poll_query_until('postgres', "SELECT fencing.lease_acquire('L', 'Y', '1 h') IS NOT NULL")
  or die 'X\'s lease did not expire';
my $ty = $p->safe_psql('postgres', "SELECT token FROM fencing.leases WHERE name = 'L'");
cmp_ok($ty, '>', $tx, "Y holds L with $ty, newer than X's $tx");

my ($r, $gdb, $gin, $rpid) = stop_raise_between_records($p);
pass('R holds the band lock between its token_origin and witness records');
# another backend's commit flushes the first record; the standby gets it
flush_past_origin($p);
my $flushed = $p->safe_psql('postgres', 'SELECT pg_current_wal_flush_lsn()');
$p->wait_for_catchup($s, 'replay', $flushed);
sub state
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{SELECT (SELECT last_value FROM fencing.token_witness)::text || ' origin page ' ||
		(SELECT (lsn - '0/0')::text FROM page_header(get_raw_page('fencing.token_origin', 0)))});
}
diag('primary: witness ' . state($p));
diag('standby: witness ' . state($s));
# the tail the standby never receives
$s->append_conf('postgresql.conf', "primary_conninfo = ''");
$s->reload;
$s->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
  or die 'the WAL receiver did not stop';
$$gin .= "detach\nquit\n";
$gdb->finish;
wait_until('R to get its token', 120, sub { $r->{h}->pump_nb; return $r->{out} =~ /^\d+$/m; });
is($p->safe_psql('postgres',
		"UPDATE res SET fence = fencing.fence_advance(fence, $ty), writer = 'Y' WHERE id = 1 RETURNING writer"),
	'Y', "Y's write with $ty is acknowledged on the primary");
$r->{in} .= "\\q\n";
$r->{h}->finish;

diag('primary after: witness ' . state($p));
diag('standby before promotion: witness ' . state($s));
$p->stop('immediate');
$s->promote;
$s->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'promotion did not finish';
is($s->safe_psql('postgres', 'SELECT writer FROM res WHERE id = 1'), 'W',
	"the failover lost Y's write: the row is back at W's fence");
my ($ret, $out, $err) = $s->psql('postgres',
	"UPDATE res SET fence = fencing.fence_advance(fence, $tx), writer = 'X' WHERE id = 1 RETURNING writer");
like($err, qr/ERROR:  lease of fencing token $tx was lost at failover/,
	"X's token $tx, issued before the failover, is refused on the promoted standby (LF005)")
  or diag("X's write: ret=$ret out=[$out] err=[$err]");
$s->stop;

# ---------------- B: the primary crashes at the cut
my $c = PostgreSQL::Test::Cluster->new('c');
$c->init;
$c->append_conf('postgresql.conf', 'restart_after_crash = on');
$c->start;
$c->safe_psql('postgres', 'CREATE EXTENSION fencing; CREATE EXTENSION pageinspect; CREATE TABLE other (i int)');
my $th = acquire($c, 'M', 'H', '1 h');
is($c->safe_psql('postgres', "SELECT fencing.lease_check('M', $th)"), 't', "H holds M with $th");
($r, $gdb, $gin, $rpid) = stop_raise_between_records($c);
flush_past_origin($c);    # token_origin's record is durable, the witness's is not
diag('before the crash: witness ' . state($c));
kill 'KILL', $rpid;    # a backend dies: crash recovery, no failover
$$gin .= "quit\n";
$gdb->finish;
$r->{h}->kill_kill;
$c->poll_query_until('postgres', 'SELECT true')
  or die 'the server did not come back';
diag('after crash recovery: witness ' . state($c));
$c->safe_psql('postgres', 'SELECT fencing.next_token()');    # anyone's next token
($ret, $out, $err) = $c->psql('postgres', "SELECT fencing.lease_check('M', $th)");
is($out, 't', "after a crash (no failover), H's live lease still checks true")
  or diag("lease_check: ret=$ret err=[$err]");
$c->stop;
done_testing();
