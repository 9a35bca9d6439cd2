-- fencing.notify (boolean, default off): with it off, lease calls send no
-- NOTIFY.  psql prints every notification this session receives, with the
-- sender's PID, so only the "off" case can be shown here: listening on
-- channel fencing, the session must receive nothing.  (The payloads, the
-- "on" case and other sessions: specs/wait_notify.spec.)

LOAD 'fencing';
SELECT name, setting, vartype, boot_val, context FROM pg_settings WHERE name = 'fencing.notify';
SHOW fencing.notify;
SET fencing.notify = 'maybe';
SET fencing.notify = off;
SHOW fencing.notify;

LISTEN fencing;
SELECT fencing.lease_acquire('op_notify', 'a', '1 min') AS t1 \gset
SELECT fencing.lease_renew('op_notify', :t1, '1 min') AS renewed;
SELECT fencing.lease_release('op_notify', :t1) AS released;
SELECT fencing.lease_acquire('op_notify', 'b', '1 min') AS t2 \gset
SELECT fencing.lease_force_release('op_notify') AS forced;
BEGIN;
SELECT fencing.lease_acquire('op_notify', 'c', '1 min') AS t3 \gset
SELECT fencing.lease_release('op_notify', :t3) AS released;
COMMIT;
UNLISTEN fencing;

-- the calls themselves worked as usual
SELECT holder, state, acquires, releases FROM fencing.lease_status WHERE name = 'op_notify';
RESET fencing.notify;
SHOW fencing.notify;
