# Copyright: fencing extension authors
#
# 066_issuing_resource_database.pl: a resource database that issues a
# token of its own (docs/tokens.md, "Which databases refuse, which compare
# numbers").
#
# Database "locks" hands out leases; database "res", in the same cluster,
# holds the resource and has the extension for fence_advance only.  While
# "res" never issued a token it compares "locks"'s tokens by number.  From
# its first token on it judges every token as one of its own history:
#
#   - a token "locks" issued before that first token is from before "res"'s
#     band: LF005;
#   - a token "locks" issued after it, at the clock, is above every token
#     "res" issued: LF005 as well;
#   - with fencing.refuse_old_band = off for the session, both compare by
#     number again (the documented way out).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use FencingTest;

my $n = PostgreSQL::Test::Cluster->new('n');
$n->init;
# a raise of the counter to the clock as soon as it lags by 1 ms
$n->append_conf('postgresql.conf', "fencing.max_clock_lag = '1ms'");
$n->start;
for my $db (qw(locks res))
{
	$n->safe_psql('postgres', "CREATE DATABASE $db");
	$n->safe_psql($db, 'CREATE EXTENSION fencing');
}
$n->safe_psql('res', q{
CREATE TABLE r (id int PRIMARY KEY, fence bigint);
INSERT INTO r VALUES (1, NULL), (2, NULL);
});

sub write_res
{
	my ($id, $token, $setting) = @_;
	my ($ret, $out, $err) = $n->psql('res',
		($setting // '')
		  . "\\set VERBOSITY verbose\n"
		  . "UPDATE r SET fence = fencing.fence_advance(fence, $token) WHERE id = $id RETURNING fence");
	return ($out, $err);
}

sub counter_lags
{
	my ($db) = @_;
	$n->poll_query_until($db,
		"SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint - last_value > 5000 FROM fencing.token_seq")
	  or die "the counter of $db did not fall behind the clock";
	return;
}

my $t1 = acquire($n, 'L', 'A', '1 hour', 'locks');
my ($out, $err) = write_res(1, $t1);
is($out, $t1, "res, which never issued a token, takes A's token $t1 by number");

# "res" issues its first token, above $t1 (the clock has moved on)
counter_lags('locks');
my $tr = $n->safe_psql('res', 'SELECT fencing.next_token()');
cmp_ok($tr, '>', $t1, "res's first token $tr is above $t1");

# "locks" issues after it, raised to the clock: above $tr
counter_lags('res');
$n->safe_psql('locks', "SELECT fencing.lease_force_release('L')");
my $t2 = acquire($n, 'L', 'B', '1 hour', 'locks');
cmp_ok($t2, '>', $tr, "locks's next token $t2 is above res's counter $tr");

($out, $err) = write_res(1, $t2);
is($out, '', "res refuses $t2");
like($err,
	qr/ERROR:  LF005: lease of fencing token $t2 was lost at failover\nDETAIL:  Token $t2 is above every token this database has issued: another history issued it, such as a member whose history was discarded after a failover, or another database\./,
	'LF005: above every token res issued');

# row 2 has no fence yet: nothing but the band refuses $t1 there
($out, $err) = write_res(2, $t1);
like($err,
	qr/ERROR:  LF005: lease of fencing token $t1 was lost at failover\nDETAIL:  Token $t1 was issued before this database's token band, which starts at \d+ /,
	"LF005: $t1 is from before res's band");
my ($start) = $err =~ /which starts at (\d+) /;
ok(defined $start && $start > $t1 && $start <= $tr,
	"res's band starts above $t1, at most at its first token $tr ("
	  . ($start // 'none') . ')');

# the way out the hint names
($out, $err) = write_res(1, $t2, "SET fencing.refuse_old_band = off;\n");
is($out, $t2, "with fencing.refuse_old_band = off, res takes $t2 by number");
($out, $err) = write_res(1, $t1, "SET fencing.refuse_old_band = off;\n");
like($err, qr/ERROR:  LF001: /, "and refuses $t1 as stale (LF001), not LF005");
is($n->safe_psql('res', 'SELECT fence FROM r WHERE id = 1'), $t2, "row 1's fence is $t2");
($out, $err) = write_res(2, $t1, "SET fencing.refuse_old_band = off;\n");
is($out, $t1, "and row 2, with no fence yet, takes $t1 by number");

$n->stop;
done_testing();
