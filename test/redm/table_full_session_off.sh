#!/usr/bin/env bash
# A backend that once found the counters' table full (256 databases counting)
# never counts again, even after entries are freed: a new session (the
# exporter reconnecting) frees the dropped databases' entries and reports
# counting = 1, FencingCountersOff clears, and the old (pooled) session's
# refused stale writes are never counted.
# PSQL: psql command for the cluster as a superuser (default "psql -X").
# Creates template redm_tpl, databases redm_d1..redm_d256, and redm_app.
set -euo pipefail
export PSQL=${PSQL:-psql -X}
$PSQL -qc "CREATE DATABASE redm_tpl"
$PSQL -d redm_tpl -qc "CREATE EXTENSION fencing"
for i in $(seq 1 256); do echo "CREATE DATABASE redm_d$i TEMPLATE redm_tpl STRATEGY FILE_COPY;"; done | $PSQL -q
$PSQL -qc "CREATE DATABASE redm_app TEMPLATE redm_tpl"
# claim entries until the table is full (other databases may hold some)
for i in $(seq 1 256); do
	[ "$($PSQL -d redm_d$i -qAtc "SELECT counting FROM fencing_monitor.stats_info")" = t ] || break
done
out=$($PSQL -d redm_app -qAt <<'SQL'
\set VERBOSITY terse
SELECT 'pooled session: ' || counting FROM fencing_monitor.stats_info;
SELECT pg_catalog.format('DROP DATABASE redm_d%s', g) FROM generate_series(250, 256) g \gexec
\! $PSQL -d redm_app -qAtc "SELECT 'exporter session: ' || counting FROM fencing_monitor.stats_info"
CREATE TABLE g(id int PRIMARY KEY, fence bigint);
INSERT INTO g VALUES (1, 100);
UPDATE g SET fence = fencing.fence_advance(fence, 5) WHERE id = 1;
UPDATE g SET fence = fencing.fence_advance(fence, 6) WHERE id = 1;
\! $PSQL -d redm_app -qAtc "SELECT 'exporter: counting ' || i.counting || ', fence_advance_refusals ' || s.fence_advance_refusals FROM fencing_monitor.stats s, fencing_monitor.stats_info i"
SQL
) 2>&1 || true
echo "$out"
for i in $(seq 1 249); do echo "DROP DATABASE IF EXISTS redm_d$i;"; done | $PSQL -q
$PSQL -qc "DROP DATABASE redm_app" -c "DROP DATABASE redm_tpl"
grep -q 'fence_advance_refusals 2' <<<"$out" || { echo "FAIL: two refused stale writes, not counted, while counting says true"; exit 1; }
