-- lease_purge(older_than) accepts any non-negative age.  An age larger
-- than the timestamp range reaches back further than any lease exists:
-- nothing is free for that long, so nothing is purged.  (It must not fail
-- with "timestamp out of range" from the internal DELETE.)

SELECT fencing.lease_acquire('op_pga', 'a', '1 min') AS t1 \gset
SELECT fencing.lease_release('op_pga', :t1) AS released;

SELECT fencing.lease_purge('1000 years') AS purged_1000_years;
SELECT fencing.lease_purge('6000 years') AS purged_6000_years;
SELECT fencing.lease_purge('10000 years') AS purged_10000_years;
SELECT fencing.lease_purge('290000 years') AS purged_290000_years;
SELECT fencing.lease_purge('178000000 years') AS purged_178000000_years;

-- still there
SELECT name, state FROM fencing.lease_status WHERE name = 'op_pga';
