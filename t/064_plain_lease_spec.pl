# Copyright: fencing extension authors
#
# 064_plain_lease_spec.pl: bench/plain_lease.sql, the hand-written lease
# that the benchmarks compare with, is the single source of its own
# definition.  specs/plain_lease_token_order.spec shows why its tokens can
# go backwards; a spec cannot include a file, so it carries the file
# verbatim as its first setup block, and its steps use the file's acquire
# and release statements (written out in the file's header comment) with
# values in place of the $parameters.  This checks both, without a server.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;

my $source = 'bench/plain_lease.sql';
my $spec = 'specs/plain_lease_token_order.spec';

my $text = slurp_file($source);
unlike($text, qr/\}/,
	"$source has no closing brace, so a spec setup block can hold it");
unlike($text, qr/^\\/m, "$source has no psql meta-command");
(my $body = $text) =~ s/\n+\z//;

my $spec_text = slurp_file($spec);
my ($setup) = $spec_text =~ /^setup\n\{\n(.*?)\n\}/ms;
ok(defined $setup && $setup eq $body,
	"$spec: first setup block is $source verbatim");

# The statements of the header comment: "--     " lines, from the line
# that starts a statement to the line that ends in a semicolon.
my (@statements, $cur);
for my $line (split /\n/, $text)
{
	next unless $line =~ /^--\s{3,}(\S.*)$/;
	my $l = $1;
	$cur = '' if !defined $cur && $l =~ /^(INSERT|UPDATE)\b/;
	next unless defined $cur;
	$cur .= " $l";
	if ($l =~ /;\s*$/)
	{
		push @statements, $cur;
		undef $cur;
	}
}
is(scalar(@statements), 2, "$source documents two statements (acquire, release)");

# whitespace-insensitive; each $parameter stands for any expression
sub pattern
{
	my ($stmt) = @_;
	$stmt =~ s/;\s*$//;
	$stmt =~ s/^\s+|\s+$//g;
	my @parts = split /(\$[a-z]+)/, $stmt;
	my $re = join '',
	  map {
		/^\$[a-z]+$/
		  ? '.+?'
		  : join('\s*', map { quotemeta } split(/\s+/, $_))
	  } @parts;
	return qr/$re/s;
}

my %uses = (0 => 'acquire', 1 => 'release');
for my $i (0 .. $#statements)
{
	my $re = pattern($statements[$i]);
	my @found = $spec_text =~ /$re/g;
	ok(scalar(@found) >= 1,
		"$spec uses the $uses{$i} statement of $source");
}

# the spec's acquire steps, exactly: two sessions draw tokens through it
my $acq = pattern($statements[0]);
my $n = () = $spec_text =~ /$acq/g;
is($n, 2, "$spec: both plain acquire steps are the file's statement");

done_testing();
