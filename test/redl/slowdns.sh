#!/bin/bash
# a resolver that hangs (here: getaddrinfo takes 30 s) while fencing-lock
# reconnects for a renewal: its loop is blocked, the stop point passes, the
# command runs on while another holder has the lease.
. "$(dirname "$0")/env.sh"
rm -f /tmp/redl-dns-slow
psql -XAtqc "select fencing.lease_force_release('dns')" >/dev/null
log=$W/dns.log; : >$log
gcc -shared -fPIC -o $W/slowdns.so "$(dirname "$0")/slowdns.c" -ldl
LD_PRELOAD=$W/slowdns.so fencing-lock -h localhost -p 54329 --ttl 3s dns -- sh -c "while :; do echo \"A alive \$(date +%T.%N)\" >>$log; sleep 0.5; done" 2>$W/dns.err & a=$!
sleep 1
touch /tmp/redl-dns-slow
psql -XAtqc "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name='fencing-lock'" >/dev/null
echo "DNS hangs, A's connection dropped at $(date +%T.%N)" >>$log
fencing-lock --ttl 3s --wait 10s dns -- sh -c "echo \"B start \$(date +%T.%N)\" >>$log; sleep 2; echo \"B end \$(date +%T.%N)\" >>$log"
echo "B rc=$?"
echo "A's runner: $(ps -o stat=,wchan= -p $a)"
kill -TERM $a; wait $a; echo "A rc=$? (after our own SIGTERM)"
rm -f /tmp/redl-dns-slow
cat $log; cat $W/dns.err
