# Copyright: fencing extension authors
#
# 081_queues_pgbouncer.pl: the queue triggers (claim_stamp, claim_guard)
# through PgBouncer in transaction pooling mode, with one server connection
# shared by every client, so that each statement of a delivery may run on
# the server connection another client used last.
#
# The claim returns its token; a stale delivery's completion declared with
# SET LOCAL (River's shape) and one that carries its token in the
# statement (pg-boss's shape) are refused with LF001, the live ones are
# accepted; a SET LOCAL leaves nothing behind for the next client on the
# same server connection (its tokenless completion is refused, LF004).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;
use IPC::Run;
use Time::HiRes qw(usleep);

plan skip_all => "$FencingTest::pgbouncer not found" unless -x $FencingTest::pgbouncer;
plan skip_all => 'pgbouncer does not run as root' if $> == 0;

my $node = PostgreSQL::Test::Cluster->new('qpgb');
$node->init;
$node->start;
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
$node->safe_psql('postgres', q{
	CREATE EXTENSION fencing;
	CREATE TABLE river_job (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'available',
							attempt smallint NOT NULL DEFAULT 0, attempted_at timestamptz,
							fencing_token bigint);
	CREATE TRIGGER fencing_claim BEFORE UPDATE ON river_job FOR EACH ROW
		WHEN (NEW.attempt > OLD.attempt)
		EXECUTE FUNCTION fencing.claim_stamp('fencing_token');
	CREATE TRIGGER fencing_complete BEFORE UPDATE ON river_job FOR EACH ROW
		WHEN (OLD.state = 'running' AND NEW.state <> 'running' AND NEW.attempt = OLD.attempt)
		EXECUTE FUNCTION fencing.claim_guard('fencing_token');
	INSERT INTO river_job (id) VALUES (1), (2);
	CREATE TABLE boss_job (id bigint PRIMARY KEY, state text NOT NULL DEFAULT 'created',
						   data jsonb NOT NULL DEFAULT '{}', output jsonb);
	CREATE TRIGGER fencing_claim BEFORE UPDATE ON boss_job FOR EACH ROW
		WHEN (NEW.state = 'active' AND OLD.state <> 'active')
		EXECUTE FUNCTION fencing.claim_stamp('data->fencing_token');
	CREATE TRIGGER fencing_complete BEFORE UPDATE ON boss_job FOR EACH ROW
		WHEN (NEW.state = 'completed' AND OLD.state = 'active')
		EXECUTE FUNCTION fencing.claim_guard('data->fencing_token', 'output->fencing_token');
	INSERT INTO boss_job (id) VALUES (1);
});

my ($port, $dir, $bouncer_err) = start_pgbouncer($node,
	users => [$superuser], pool_size => 1, max_client_conn => 20);

# one client: one psql run through pgbouncer; returns (stdout, stderr)
sub through
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-h', '127.0.0.1', '-p', $port, '-U', $superuser,
			'-d', 'postgres', '-v', 'VERBOSITY=default', '-c', $sql ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60));
	chomp $out;
	return ($out, $err);
}

my $up = 0;
for (1 .. 100)
{
	my ($out) = through('SELECT 1');
	if ($out eq '1') { $up = 1; last; }
	usleep(100_000);
}
ok($up, 'pgbouncer accepts connections') or BAIL_OUT("pgbouncer did not start: $$bouncer_err");

# River's shape: the token declared with SET LOCAL in the completion
my ($t_a) = through(q{UPDATE river_job SET state = 'running', attempt = attempt + 1,
	attempted_at = now() WHERE id = 1 RETURNING fencing_token});
through(q{UPDATE river_job SET state = 'available' WHERE id = 1});
my ($t_b) = through(q{UPDATE river_job SET state = 'running', attempt = attempt + 1,
	attempted_at = now() WHERE id = 1 RETURNING fencing_token});
ok($t_a =~ /^\d+$/ && $t_b =~ /^\d+$/ && $t_b > $t_a, "claims through pgbouncer return tokens $t_a < $t_b");

my ($out, $err) = through("BEGIN; SELECT set_config('fencing.token', '$t_a', true); "
	  . "UPDATE river_job SET state = 'completed' WHERE id = 1 AND state = 'running'; COMMIT;");
like($err, qr/ERROR:  fencing token $t_a is stale\nDETAIL:  The row of "river_job" holds a newer claim, with token $t_b\./,
	'the stale delivery (SET LOCAL) is refused with both tokens');
# B's claim of job 2, and a client that forgets its token, on the same
# server connection right after a SET LOCAL: nothing was left behind
my ($t_c) = through(q{UPDATE river_job SET state = 'running', attempt = attempt + 1,
	attempted_at = now() WHERE id = 2 RETURNING fencing_token});
# (a client that leaves in a failed transaction costs pgbouncer its server
# connection: take the pid of the one B's completion will use)
my ($pid) = through('SELECT pg_backend_pid()');
($out, $err) = through("BEGIN; SELECT set_config('fencing.token', '$t_b', true); "
	  . "UPDATE river_job SET state = 'completed' WHERE id = 1 AND state = 'running'; COMMIT;");
is($err, '', 'the live delivery (SET LOCAL) is accepted');
($out, $err) = through(q{SELECT current_setting('fencing.token', true) = '', pg_backend_pid()});
is($out, "t|$pid", 'the next client on the same server connection sees no token');
($out, $err) = through(q{UPDATE river_job SET state = 'completed' WHERE id = 2 AND state = 'running'});
like($err, qr/ERROR:  UPDATE of a claimed row of "river_job" carries no fencing token/,
	'so its tokenless completion is refused (LF004)');
is($node->safe_psql('postgres', 'SELECT id, state, fencing_token FROM river_job ORDER BY id'),
	"1|completed|$t_b\n2|running|$t_c", 'job 1 completed by B, job 2 still running');

# pg-boss's shape: the token in the completion statement itself
my ($a2) = through(q{UPDATE boss_job SET state = 'active' WHERE id = 1 RETURNING data->>'fencing_token'});
through(q{UPDATE boss_job SET state = 'retry' WHERE id = 1});
my ($b2) = through(q{UPDATE boss_job SET state = 'active' WHERE id = 1 RETURNING data->>'fencing_token'});
($out, $err) = through(qq{UPDATE boss_job SET state = 'completed', output = '{"fencing_token": "$a2"}' WHERE id = 1 AND state = 'active'});
like($err, qr/ERROR:  fencing token $a2 is stale/, 'the stale delivery (token in the statement) is refused');
($out, $err) = through(qq{UPDATE boss_job SET state = 'completed', output = '{"fencing_token": "$b2"}' WHERE id = 1 AND state = 'active'});
is($err, '', 'the live one is accepted');
is($node->safe_psql('postgres', q{SELECT state, output->>'fencing_token' FROM boss_job}),
	"completed|$b2", 'the job is completed by the live delivery');

$node->stop;
done_testing();
