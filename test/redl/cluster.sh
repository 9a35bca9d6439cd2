#!/bin/bash
# as postgres: a persistent throwaway cluster in $W/pg with the extension
#   su postgres -c "REDL_BINDIR=... bash test/redl/cluster.sh"
set -e
. "$(dirname "$0")/env.sh"
D=$W/pg
rm -rf "$D"; mkdir -p "$D"
initdb -D "$D/data" -A trust -U postgres --no-sync -E UTF8 --locale=C >"$D/initdb.log" 2>&1
cat >>"$D/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$D'
port = 54329
fsync = off
CONF
pg_ctl -D "$D/data" -l "$D/server.log" -w start >/dev/null
psql -c 'CREATE EXTENSION fencing'
