#!/bin/bash
# a process leaves the command's group after forking a child that exits
# unreaped: the zombie keeps kill(-pgid, 0) succeeding, fencing-lock waits
# for "the group" forever (SIGTERM/SIGKILL do nothing to a zombie) and
# renews the lease forever.
. "$(dirname "$0")/env.sh"
psql -XAtqc "select fencing.lease_force_release('zomb')" >/dev/null
timeout -s KILL 20 fencing-lock -v --ttl 3s zomb -- python3 -c '
import os, time
if os.fork() == 0:            # Y: forks Z in the group, then leaves it
    if os.fork() == 0: os._exit(0)   # Z exits; Y never reaps it
    os.setsid(); time.sleep(60); os._exit(0)
time.sleep(0.5)               # the command itself ends here
' 2>&1 | grep -v "renewed lease" | head -20
echo "timeout rc=${PIPESTATUS[0]} (137: fencing-lock was still running after 20 s, the command ended after 0.5 s)"
psql -XAtqc "select name, state, holder from fencing.lease_status where name='zomb'"
pkill -f 'time.sleep\(60\)'; psql -XAtqc "select fencing.lease_force_release('zomb')" >/dev/null
