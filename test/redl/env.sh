# sourced by the reproductions: fencing-lock and psql on PATH, the cluster of cluster.sh
: "${REDL_BINDIR:?set REDL_BINDIR to the bin directory of the installation that has fencing-lock}"
W=${REDL_TMP:-/tmp/redl-work}
mkdir -p "$W"; chmod 777 "$W"
export W PATH=$REDL_BINDIR:$PATH PGHOST=${PGHOST:-$W/pg} PGPORT=${PGPORT:-54329} PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
