-- fencing.next_token(): strictly increasing.  The first token of a fresh
-- install enters its first band: the wall clock in microseconds since the
-- Unix epoch, so it lies between the clock read before and after it, and
-- below 2^53 (exact in JSON) until the year 2255.
-- (named 00_ so that it runs before every file that spends tokens)
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS before \gset
SELECT fencing.next_token() AS first \gset
SELECT ceil(extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS after \gset
SELECT :first BETWEEN :before AND :after AS first_is_the_clock,
	   :first < 2::numeric ^ 53 AS exact_in_json;
-- within a band, one by one
SELECT fencing.next_token() = :first + 1 AS next_is_first_plus_one;
-- the band's first token, as the token source keeps it
SELECT last_value = :first AS band_starts_at_first FROM fencing.token_base;
