#!/bin/bash
# fencing-lock started with stdout and stderr closed: its signal pipe takes
# fds 1 and 2, so its own messages are written into the signal pipe and read
# back as "signals" ('f' = 102, ':' = 58 = SIGRTMIN+24, ' ' = 32, '\n' = SIGUSR1, ...)
. "$(dirname "$0")/env.sh"
psql -XAtqc "select fencing.lease_force_release('fds')" >/dev/null
fencing-lock -v fds -- sh -c 'echo command ran >$W/fds.out' >&- 2>&-
echo "with -v: rc=$? (230 = 128 + 102, the byte 'f'); command output: $(cat $W/fds.out 2>/dev/null || echo none)"
rm -f $W/fds.out
# without -v: any message (here the loss of the lease) becomes signals to the command group
(fencing-lock --ttl 3s fds -- sh -c 'trap "echo got USR1 >>$W/fds.out" USR1; trap "echo got TERM >>$W/fds.out; exit 1" TERM; for i in $(seq 60); do sleep 0.1; done' >&- 2>&-; echo "without -v: rc=$?") &
sleep 1; psql -XAtqc "select fencing.lease_force_release('fds')" >/dev/null; wait
cat $W/fds.out
