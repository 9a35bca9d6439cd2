-- fencing.next_token(): strictly increasing, starting at 1 on a fresh install
SELECT fencing.next_token() AS first;
SELECT fencing.next_token() > 1 AS increasing;
