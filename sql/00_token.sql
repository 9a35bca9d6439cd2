-- fencing.next_token(): strictly increasing, starting at 1 on a fresh install
-- (named 00_ so that it runs before every file that spends tokens)
SELECT fencing.next_token() AS first;
SELECT fencing.next_token() > 1 AS increasing;
