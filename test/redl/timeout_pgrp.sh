#!/bin/bash
# coreutils timeout(1) inside the command puts itself and its child in a new
# process group: on lease loss SIGTERM/SIGKILL go to the command's group only,
# and the job under timeout runs on after fencing-lock has exited 121.
. "$(dirname "$0")/env.sh"
psql -XAtqc "select fencing.lease_force_release('tmo')" >/dev/null
log=$W/tmo.log; : >$log
fencing-lock --ttl 3s tmo -- sh -c "echo start; timeout 1h sh -c 'while :; do echo \"job alive \$(date +%T.%N)\" >>$log; sleep 0.5; done'; echo done" & a=$!
sleep 1
echo "force_release $(psql -XAtqc "select fencing.lease_force_release('tmo')") at $(date +%T.%N)" >>$log
wait $a; echo "fencing-lock rc=$? at $(date +%T.%N)" >>$log
fencing-lock --ttl 3s tmo -- sh -c "echo \"B start \$(date +%T.%N)\" >>$log; sleep 2; echo \"B end \$(date +%T.%N)\" >>$log"
cat $log
ps -eo pid,ppid,pgid,cmd | grep '[t]imeout 1h'
pkill -f 'timeout 1h sh -c'
