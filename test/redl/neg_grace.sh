#!/bin/bash
# --grace 0.200000000d overflows to a negative grace and is accepted: the
# command is not stopped at the stop point when renewals get no answer.
. "$(dirname "$0")/env.sh"
psql -XAtqc "select fencing.lease_force_release('ng')" >/dev/null
python3 "$(dirname "$0")/proxy.py" 54400 $PGHOST/.s.PGSQL.54329 & proxy=$!
sleep 0.5
log=$W/ng.log; : >$log
fencing-lock -h 127.0.0.1 -p 54400 --ttl 3s --grace 0.200000000d ng -- sh -c "while :; do echo \"A alive \$(date +%T.%N)\" >>$log; sleep 0.5; done" 2>$W/ng.err & a=$!
sleep 1
kill -STOP $proxy; echo "partitioned A from the server at $(date +%T.%N)" >>$log
fencing-lock --ttl 3s --wait 10s ng -- sh -c "echo \"B start \$(date +%T.%N) token \$FENCING_TOKEN\" >>$log; sleep 3; echo \"B end \$(date +%T.%N)\" >>$log"
echo "B rc=$?"
kill -0 $a && echo "A's runner still running $(date +%T.%N)"
kill -TERM $a; wait $a; echo "A rc=$? (after our SIGTERM)"
kill -CONT $proxy; kill $proxy
cat $log; cat $W/ng.err
