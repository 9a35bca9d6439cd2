-- contrib/prometheus/queries.yaml runs unqualified operators as the exporter
-- (a pg_monitor member) with its default search_path.  "float8 / integer"
-- has no exact operator in pg_catalog, so one in schema public wins: any
-- role that may CREATE in public (PUBLIC on 13 and 14; the database owner
-- on 15+) runs code as the exporter.  This runs the fencing_wait query.
\set ON_ERROR_STOP 1
DROP ROLE IF EXISTS redm_exporter; DROP ROLE IF EXISTS redm_evil;
CREATE ROLE redm_exporter LOGIN IN ROLE pg_monitor;
CREATE ROLE redm_evil LOGIN;
GRANT CREATE ON SCHEMA public TO redm_evil;
SET ROLE redm_evil;
CREATE TABLE public.redm_loot(who text, what text);
GRANT INSERT ON public.redm_loot TO PUBLIC;
CREATE FUNCTION public.redm_div(float8, integer) RETURNS float8 LANGUAGE plpgsql AS $f$
BEGIN
  INSERT INTO public.redm_loot SELECT current_user, pg_catalog.current_setting('data_directory');
  RETURN $1 OPERATOR(pg_catalog./) $2::float8;
END $f$;
CREATE OPERATOR public./ (LEFTARG = float8, RIGHTARG = integer, FUNCTION = public.redm_div);
SET ROLE redm_exporter;
-- contrib/prometheus/queries.yaml, fencing_wait, verbatim
SELECT pg_catalog.current_database() AS datname,
       ARRAY(SELECT h.upper_ms / 1000 FROM fencing_monitor.wait_histogram AS h
              WHERE h.upper_ms < 'Infinity' ORDER BY h.upper_ms) AS seconds,
       ARRAY(SELECT h.waits FROM fencing_monitor.wait_histogram AS h
              WHERE h.upper_ms < 'Infinity' ORDER BY h.upper_ms) AS seconds_bucket,
       s.wait_time / 1000 AS seconds_sum,
       (SELECT h.waits FROM fencing_monitor.wait_histogram AS h
         WHERE h.upper_ms = 'Infinity') AS seconds_count
  FROM fencing_monitor.stats AS s, fencing_monitor.stats_info AS i
 WHERE i.counting \g /dev/null
RESET ROLE;
SELECT who, what, count(*) FROM public.redm_loot GROUP BY 1, 2;
SELECT NOT EXISTS (SELECT FROM public.redm_loot) AS ok \gset
DROP OPERATOR public./ (float8, integer); DROP FUNCTION public.redm_div(float8, integer);
DROP TABLE public.redm_loot; REVOKE CREATE ON SCHEMA public FROM redm_evil;
DROP ROLE redm_evil; DROP ROLE redm_exporter;
\if :ok
\echo PASS
\else
DO $$BEGIN RAISE EXCEPTION 'FAIL: redm_evil''s operator ran as the exporter'; END$$;
\endif
