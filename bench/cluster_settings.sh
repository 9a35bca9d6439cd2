# bench/cluster_settings.sh: the postgresql.conf lines of the benchmark
# clusters, sourced by bench/run.sh and bench/semaphore.sh so that their
# figures are taken under one set of settings.
#
#   bench_cluster_settings TITLE MAX_CONNECTIONS >>"$D/postgresql.conf"
#
# Uses the caller's W (socket directory), PORT, SHARED_BUFFERS and FSYNC.
bench_cluster_settings() {
	cat <<-EOF
		# $1
		listen_addresses = ''
		unix_socket_directories = '$W'
		port = $PORT
		max_connections = $2
		shared_buffers = $SHARED_BUFFERS
		fsync = $FSYNC
		synchronous_commit = on
		full_page_writes = on
		wal_level = replica
		max_wal_size = 16GB
		checkpoint_timeout = 1h
		jit = off
		autovacuum = on
		log_min_messages = warning
		log_min_error_statement = error
		log_line_prefix = '%m [%p] '
	EOF
}
