#!/bin/bash
# SIGTSTP (catchable) to fencing-lock is neither handled nor forwarded: the
# runner stops, its command runs on, and another holder takes the lease.
. "$(dirname "$0")/env.sh"
log=$W/tstp.log; : >$log
fencing-lock --ttl 3s tstp -- sh -c "while :; do echo \"A alive \$(date +%T.%N) token \$FENCING_TOKEN\" >>$log; sleep 0.5; done" 2>$W/tstp.err & a=$!
sleep 1
kill -TSTP $a; echo "TSTP to runner $a at $(date +%T.%N): state $(ps -o stat= -p $a)" >>$log
fencing-lock --ttl 3s --wait 10s tstp -- sh -c "echo \"B start \$(date +%T.%N) token \$FENCING_TOKEN\" >>$log; sleep 2; echo \"B end \$(date +%T.%N)\" >>$log"
echo "B rc=$?"
kill -CONT $a; wait $a; echo "A rc=$?"
cat $log; cat $W/tstp.err
