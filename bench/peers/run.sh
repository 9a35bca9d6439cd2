#!/usr/bin/env bash
# bench/peers/run.sh: fencing side by side with what users pick instead.
#
#   sudo bench/peers/run.sh            # full mode, about 17 minutes
#   sudo bench/peers/run.sh --quick    # about 4 minutes
#
# Lease cycles (acquire with a TTL and get a token, then release) against
# fencing, the plain-SQL lease of bench/plain_lease.sql, etcd, ZooKeeper and
# Redis, all servers started here on 127.0.0.1 in a temp directory as user
# postgres (PostgreSQL from a private copy of the installation, with the
# extension built from this tree), clients from npm (bench/peers/
# package-lock.json).  Cells: 8 and 64 clients x 1 and 1,000 names, durable
# defaults and without fsync.  Every round runs every system once per cell,
# back to back, the order rotating from round to round; ratios are taken
# within a round.  Then the seed's story against Redis and fencing
# (story.js).  Writes bench/out/peers-<UTC date>.md and .png.
# What is measured and why: bench/peers/README.md.
set -euo pipefail
export LC_ALL=C

MODE=full
[ "${1:-}" = "--quick" ] && MODE=quick
if [ "$MODE" = quick ]; then
	: "${ROUNDS:=1}" "${DUR:=2}" "${WARMUP:=0.5}" "${PREWARM:=3}"
else
	: "${ROUNDS:=3}" "${DUR:=5}" "${WARMUP:=1}" "${PREWARM:=5}"
fi
: "${SYSTEMS:=fencing plain etcd zookeeper redis}"
: "${CELLS:=8:1000 64:1000 8:1 64:1}"	# clients:names
: "${PHASES:=durable nofsync}"
: "${TTL_S:=30}"
export ROUNDS DUR WARMUP PREWARM SYSTEMS CELLS PHASES TTL_S MODE

# Debian packages of the peers (the PostgreSQL side comes from
# test/deps.sh).  Their services are stopped and disabled after the
# install: this script starts its own servers.
PEERS_DEB_PACKAGES=(etcd-server zookeeper redis-server default-jre-headless gnuplot-nox python3)
PEERS_SERVICES=(etcd zookeeper redis-server)

# ===========================================================================
# Part 2, as postgres: servers, runs.  $1 = work dir.
# ===========================================================================
inner() {
	W=$1
	O=$W/out
	mkdir -p "$O"
	cd "$W"
	say() { printf '%s\n' "$*" >&2; }
	base=$((20000 + RANDOM % 20000))
	PG_PORT=$base ETCD_PORT=$((base + 1)) ETCD_PEER=$((base + 2)) ZK_PORT=$((base + 3)) REDIS_PORT=$((base + 4))
	PIDS=()
	trap 'stop_all' EXIT

	{
		echo "cpu	$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n1)"
		echo "nproc	$(nproc)"
		echo "mem	$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
		echo "kernel	$(uname -r)"
		echo "postgres	$(postgres --version)"
		echo "etcd	$(etcd --version | head -n1)"
		echo "zookeeper	$(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null)"
		echo "redis	$(redis-server --version)"
		echo "java	$(java -version 2>&1 | head -n1)"
		echo "node	$(node --version)"
		echo "npm_clients	$(cd node && node -e 'const p=require("./package.json").dependencies; console.log(Object.entries(p).map(([k,v])=>k+"@"+v).join(" "))')"
	} >"$O/machine.tsv"

	for phase in $PHASES; do
		start_servers "$phase"
		say "== $phase: servers up (postgres :$PG_PORT, etcd :$ETCD_PORT, zookeeper :$ZK_PORT, redis :$REDIS_PORT)"
		if [ "$phase" = durable ] || [ "$PHASES" = nofsync ]; then
			say "== the seed's story (story.js)"
			node node/story.js "$PG_PORT" "$REDIS_PORT" >"$O/story.txt" 2>&1 || echo "story.js: exit $?" >>"$O/story.txt"
			cat "$O/story.txt" >&2
		fi
		# an unmeasured run of every system first: ZooKeeper's JVM compiles
		# its hot paths during its first seconds (its first measured run used
		# 3 to 4 times the CPU per cycle of later ones); every cache warms
		local s
		for s in $SYSTEMS; do
			TTL_S=$TTL_S timeout 120 node node/driver.js "$s" 8 1000 "$PREWARM" "$(port_of "$s")" 0.5 >/dev/null 2>&1 || true
		done
		for r in $(seq 1 "$ROUNDS"); do
			printf '%s\t%s\tbefore\t%s\t%s\n' "$phase" "$r" "$(date -u +%s)" "$(cat /proc/loadavg)" >>"$O/load.tsv"
			local -a sys=($SYSTEMS)
			local n=${#sys[@]} k=$(((r - 1) % ${#sys[@]}))
			local order=("${sys[@]:k}" "${sys[@]:0:k}")
			for cell in $CELLS; do
				local clients=${cell%%:*} names=${cell##*:}
				for s in "${order[@]}"; do
					run_one "$phase" "$r" "$s" "$clients" "$names"
				done
			done
			printf '%s\t%s\tafter\t%s\t%s\n' "$phase" "$r" "$(date -u +%s)" "$(cat /proc/loadavg)" >>"$O/load.tsv"
			say "== $phase round $r/$ROUNDS done; load $(cut -d' ' -f1-3 /proc/loadavg)"
		done
		stop_all
	done
}

port_of() {
	case $1 in
	fencing | plain) echo "$PG_PORT" ;;
	etcd) echo "$ETCD_PORT" ;;
	zookeeper) echo "$ZK_PORT" ;;
	redis) echo "$REDIS_PORT" ;;
	esac
}

run_one() {
	local phase=$1 r=$2 s=$3 clients=$4 names=$5 port
	port=$(port_of "$s")
	local cpu0 cpu1 sync0 sync1 out
	sync0=$(sync_count "$s")
	cpu0=$(server_cpu "$s")
	if out=$(TTL_S=$TTL_S timeout $((60 + 2 * ${DUR%.*})) node node/driver.js "$s" "$clients" "$names" "$DUR" "$port" "$WARMUP" 2>"$O/driver.err"); then
		:
	else
		out="{\"system\":\"$s\",\"failed\":true,\"stderr\":$(tail -c 400 "$O/driver.err" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}"
	fi
	# PostgreSQL: its backends' CPU counts once they have exited
	if [ "$s" = fencing ] || [ "$s" = plain ]; then
		for _ in $(seq 1 50); do
			[ "$(pgrep -c -P "$(head -n1 "$W/pg/postmaster.pid")")" -le "$PG_AUX" ] && break
			sleep 0.1
		done
	fi
	cpu1=$(server_cpu "$s")
	sync1=$(sync_count "$s")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$r" "$s" "$clients" "$names" \
		"$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { print b - a }')" "$out" \
		"$([ -n "$sync0" ] && [ -n "$sync1" ] && echo $((sync1 - sync0)))" >>"$O/runs.tsv"
	printf '  %-8s %-9s %2s clients %4s names: %s\n' "$phase" "$s" "$clients" "$names" \
		"$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("FAILED " + d.get("stderr","") if d.get("failed") else "%.0f cycles/s, p99 %.2f ms, %d backwards, %d errors" % (d["cycles_per_s"], d["p99_ms"] or 0, d["backwards"], d["errors"]))')" >&2
}

# fsyncs (data syncs of the log) the server of system $1 has made so far,
# from its own statistics; Redis keeps no such count ("").
sync_count() {
	case $1 in
	fencing | plain)
		psql -X -At -h "$W" -p "$PG_PORT" -d bench -c "SELECT wal_sync FROM pg_stat_wal" 2>/dev/null || echo "" ;;
	etcd)
		python3 -c 'import sys, urllib.request
for l in urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().splitlines():
    if l.startswith("etcd_disk_wal_fsync_duration_seconds_count"):
        print(l.split()[-1])' "http://127.0.0.1:$ETCD_PORT/metrics" 2>/dev/null || echo "" ;;
	zookeeper)
		{ exec 3<>"/dev/tcp/127.0.0.1/$ZK_PORT" && echo mntr >&3 && awk '$1 == "zk_cnt_fsynctime" { print $2 }' <&3; exec 3<&-; } 2>/dev/null || echo "" ;;
	*) echo "" ;;
	esac
}

# CPU seconds (user + system) used so far by the server of system $1 and
# its children (PostgreSQL's backends are its children, and are waited
# for, so they count once they exit; the driver disconnects at the end of
# every run).
server_cpu() {
	local pid
	case $1 in
	fencing | plain) pid=$(head -n1 "$W/pg/postmaster.pid" 2>/dev/null) ;;
	*) pid=$(cat "$W/$1.pid" 2>/dev/null) ;;
	esac
	awk -v t="$(getconf CLK_TCK)" '{ print ($14 + $15 + $16 + $17) / t }' "/proc/$pid/stat" 2>/dev/null || echo 0
}

start_servers() {
	local phase=$1 d=$W/$1
	rm -rf "$W/pg"
	mkdir -p "$d"

	# ---- PostgreSQL: defaults but for fsync off / synchronous_commit off
	initdb -D "$W/pg" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$d/initdb.log"
	cat >>"$W/pg/postgresql.conf" <<-EOF
		listen_addresses = '127.0.0.1'
		unix_socket_directories = '$W'
		port = $PG_PORT
		max_connections = 150
		log_line_prefix = '%m [%p] '
	EOF
	if [ "$phase" = nofsync ]; then
		printf 'fsync = off\nsynchronous_commit = off\n' >>"$W/pg/postgresql.conf"
	fi
	pg_ctl -D "$W/pg" -l "$d/postgres.log" -w -t 120 start >/dev/null
	sleep 0.5
	PG_AUX=$(pgrep -c -P "$(head -n1 "$W/pg/postmaster.pid")")
	psql -X -q -h "$W" -p "$PG_PORT" -d postgres -c "CREATE DATABASE bench"
	psql -X -q -v ON_ERROR_STOP=1 -h "$W" -p "$PG_PORT" -d bench >/dev/null <<-SQL
		CREATE EXTENSION fencing;
		\i $W/plain_lease.sql
		-- every name exists and is free, in both lease tables
		SELECT count(fencing.lease_release('l' || g, fencing.lease_acquire('l' || g, 'init', '1 minute')))
		  FROM generate_series(1, 1000) g;
		INSERT INTO plain_lease.leases
		SELECT 'l' || g, 'init', nextval('plain_lease.token_seq'), clock_timestamp()
		  FROM generate_series(1, 1000) g;
		VACUUM ANALYZE;
		CHECKPOINT;
	SQL
	psql -X -At -h "$W" -p "$PG_PORT" -d bench -F $'\t' -c "SELECT '$phase', name, setting FROM pg_settings
		WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'shared_buffers', 'max_wal_size')" >>"$O/settings.tsv"

	# ---- etcd: defaults, a single member
	local etcd_extra=()
	[ "$phase" = nofsync ] && etcd_extra=(--unsafe-no-fsync)
	etcd --name peers --data-dir "$d/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
		--initial-cluster "peers=http://127.0.0.1:$ETCD_PEER" \
		"${etcd_extra[@]}" >"$d/etcd.log" 2>&1 &
	echo $! >"$W/etcd.pid"
	printf '%s\tetcd\t%s\n' "$phase" "defaults, single member${etcd_extra:+, ${etcd_extra[*]}}" >>"$O/settings.tsv"

	# ---- ZooKeeper: standalone, the example zoo.cfg's values
	mkdir -p "$d/zk/data" "$d/zkconf"
	cat >"$d/zkconf/zoo.cfg" <<-EOF
		tickTime=2000
		dataDir=$d/zk/data
		clientPort=$ZK_PORT
		clientPortAddress=127.0.0.1
		# 64 clients from one address: the default limit is 60
		maxClientCnxns=0
		admin.enableServer=false
		# mntr: the fsync count of the report
		4lw.commands.whitelist=mntr
		forceSync=$([ "$phase" = nofsync ] && echo no || echo yes)
	EOF
	printf 'log4j.rootLogger=WARN, CONSOLE\nlog4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\nlog4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\nlog4j.appender.CONSOLE.layout.ConversionPattern=%%d %%p %%m%%n\n' >"$d/zkconf/log4j.properties"
	java -Dzookeeper.log.dir="$d" -cp "$d/zkconf:/usr/share/java/zookeeper.jar" \
		org.apache.zookeeper.server.ZooKeeperServerMain "$d/zkconf/zoo.cfg" >"$d/zookeeper.log" 2>&1 &
	echo $! >"$W/zookeeper.pid"
	printf '%s\tzookeeper\t%s\n' "$phase" "standalone, tickTime=2000, maxClientCnxns=0, forceSync=$([ "$phase" = nofsync ] && echo no || echo yes)" >>"$O/settings.tsv"

	# ---- Redis: append-only file, fsync at every write or never
	local fs=always
	[ "$phase" = nofsync ] && fs=no
	mkdir -p "$d/redis"
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$d/redis" --daemonize no \
		--appendonly yes --appendfsync "$fs" --save '' --logfile "$d/redis.log" &
	echo $! >"$W/redis.pid"
	printf '%s\tredis\t%s\n' "$phase" "appendonly yes, appendfsync $fs, save ''" >>"$O/settings.tsv"

	# ready?
	local i
	for i in $(seq 1 300); do
		etcdctl --endpoints "http://127.0.0.1:$ETCD_PORT" endpoint health >/dev/null 2>&1 &&
			redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 &&
			node node/driver.js setup-zookeeper 1000 "$ZK_PORT" 2>/dev/null && return 0
		sleep 0.2
	done
	say "servers did not come up"
	tail -n 20 "$d"/*.log >&2
	return 1
}

stop_all() {
	local f pid
	for f in "$W"/etcd.pid "$W"/zookeeper.pid "$W"/redis.pid; do
		[ -f "$f" ] || continue
		pid=$(cat "$f")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
		rm -f "$f"
	done
	[ -f "$W/pg/postmaster.pid" ] && pg_ctl -D "$W/pg" -m fast -w stop >/dev/null 2>&1 || true
}

# ===========================================================================
# Part 1, as root: packages, the private installation with the extension
# built from this tree, npm clients, then part 2 as postgres, the report.
# ===========================================================================
main() {
	cd "$(dirname "$0")/../.."
	. test/deps.sh
	T0=$(date +%s)
	if [ "$(id -u)" -ne 0 ]; then
		echo "run it as root (sudo): it installs packages and runs the servers as user postgres" >&2
		exit 1
	fi
	fencing_install_deps
	local saved=("${FENCING_DEB_PACKAGES[@]}")
	FENCING_DEB_PACKAGES=("${PEERS_DEB_PACKAGES[@]}")
	command -v npm >/dev/null 2>&1 || FENCING_DEB_PACKAGES+=(nodejs npm)
	fencing_install_deps
	FENCING_DEB_PACKAGES=("${saved[@]}")
	# the packages start their services (where policy-rc.d allows): stop
	# and disable them; this script runs its own servers
	local svc
	for svc in "${PEERS_SERVICES[@]}"; do
		if [ -d /run/systemd/system ]; then
			systemctl disable --now "$svc" >/dev/null 2>&1 || true
		elif [ -x "/etc/init.d/$svc" ]; then
			"/etc/init.d/$svc" stop >/dev/null 2>&1 || true
			update-rc.d "$svc" disable >/dev/null 2>&1 || true
		fi
	done

	date=$(date -u +%Y%m%d-%H%M%S)
	work=$(mktemp -d /tmp/fencing-peers.XXXXXX)
	chmod 755 "$work"
	[ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
	echo "== bench/peers, $MODE mode; work dir $work" >&2

	# PostgreSQL: a private relocated copy of the installation, and the
	# extension built from a copy of this tree into it
	fencing_private_install "$work/inst"
	mkdir -p "$work/src"
	tar --exclude=.git --exclude=node_modules --exclude=bench/results --exclude=bench/out -cf - . | tar -xf - -C "$work/src"
	(cd "$work/src" && fencing_build_install) >"$work/build.log" 2>&1 || {
		tail -n 30 "$work/build.log" >&2
		exit 1
	}
	local git
	git=$(git describe --always --dirty 2>/dev/null || echo '?')

	# npm clients, exactly as package-lock.json pins them
	mkdir -p "$work/node"
	cp bench/peers/package.json bench/peers/package-lock.json bench/peers/driver.js bench/peers/story.js "$work/node/"
	(cd "$work/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || {
		echo "npm ci failed" >&2
		exit 1
	}
	cp bench/peers/run.sh bench/plain_lease.sql "$work/"
	chown -R postgres:postgres "$work"

	status=0
	runuser -u postgres -- env PATH="$FENCING_PG_BINDIR:$PATH" HOME="$work" \
		ROUNDS="$ROUNDS" DUR="$DUR" WARMUP="$WARMUP" PREWARM="$PREWARM" SYSTEMS="$SYSTEMS" CELLS="$CELLS" \
		PHASES="$PHASES" TTL_S="$TTL_S" MODE="$MODE" \
		bash "$work/run.sh" --inner "$work" || status=$?
	if [ $status -ne 0 ]; then
		for f in "$work"/*/*.log; do echo "---- $f" >&2; tail -n 15 "$f" >&2; done
		echo "bench/peers/run.sh: FAILED (exit $status)" >&2
		exit 1
	fi
	T1=$(date +%s)
	printf 'git\t%s\nmode\t%s\nrounds\t%s\ndur\t%s\nwarmup\t%s\nprewarm\t%s\nttl_s\t%s\ntotal_s\t%s\n' \
		"$git" "$MODE" "$ROUNDS" "$DUR" "$WARMUP" "$PREWARM" "$TTL_S" $((T1 - T0)) >>"$work/out/machine.tsv"
	mkdir -p "${BENCH_OUT:-bench/out}"
	python3 bench/peers/report.py "$work/out" "${BENCH_OUT:-bench/out}/peers-$date"
	echo
	echo "(report: ${BENCH_OUT:-bench/out}/peers-$date.md$([ -f "${BENCH_OUT:-bench/out}/peers-$date.png" ] && echo ", plot: ${BENCH_OUT:-bench/out}/peers-$date.png"); $((T1 - T0)) s in all)"
}

if [ "${1:-}" = "--inner" ]; then inner "$2"; exit 0; else main "$@"; exit $?; fi
