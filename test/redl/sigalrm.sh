#!/bin/bash
# signals other than the six forwarded ones (SIGALRM, SIGVTALRM, SIGPROF,
# SIGXCPU, SIGXFSZ, SIGPWR, SIGSYS, SIGIO, real-time...) kill fencing-lock by
# their default action: no SIGTERM to the command, no release, leftovers live.
. "$(dirname "$0")/env.sh"
fencing-lock --ttl 30s alrm -- sh -c 'sleep 300 & trap "echo command got TERM" TERM; wait; wait' & a=$!
for i in $(seq 50); do c=$(pgrep -P $a) && break; sleep 0.1; done
sleep 0.3
kill -ALRM $a; wait $a; echo "fencing-lock rc=$? (142 = killed by SIGALRM itself)"
sleep 0.3
echo "left of the command's group $c:"; ps -eo pid=,pgid=,stat=,cmd= | awk -v g=$c '$2==g'
psql -XAtqc "select name, holder, state, expires_at - clock_timestamp() as left from fencing.lease_status where name='alrm'"
pkill -g $c 2>/dev/null; psql -XAtqc "select fencing.lease_force_release('alrm')" >/dev/null
