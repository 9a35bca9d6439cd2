#!/bin/bash
# as root: a command that changes its uid (setpriv, su, runuser, gosu) loses
# PR_SET_PDEATHSIG: fencing-lock SIGKILLed (OOM), the command runs on.
. "$(dirname "$0")/env.sh"
for cmd in "sleep 300" "setpriv --reuid=nobody --regid=nogroup --clear-groups sleep 300"; do
  fencing-lock --ttl 3s pd -- $cmd & a=$!
  for i in $(seq 50); do c=$(pgrep -P $a) && break; sleep 0.1; done
  kill -KILL $a; wait $a 2>/dev/null
  sleep 0.5
  st=$(ps -o stat= -p $c); if [ -n "$st" ] && [ "${st#Z}" = "$st" ]; then echo "[$cmd] runner SIGKILLed: command $c STILL RUNNING: $(ps -o user=,stat=,cmd= -p $c)"; kill $c
  else echo "[$cmd] runner SIGKILLed: command gone"; fi
  psql -XAtqc "select fencing.lease_force_release('pd')" >/dev/null
done
