-- ---- the summary of a file that uses sql/include/case_harness.sql,
-- included with \i where the file ends ----
-- how many cases, accepted and refused
CREATE FUNCTION pg_temp.case_counts(OUT cases bigint, OUT accepted bigint,
									OUT refused bigint)
LANGUAGE sql SET search_path = pg_catalog AS $$
	SELECT (SELECT s.last_value FROM pg_temp.case_seq AS s),
		   count(*) FILTER (WHERE c.result LIKE 'ok%'),
		   count(*) FILTER (WHERE c.result NOT LIKE 'ok%')
	  FROM pg_temp.cases AS c
$$;
-- refused cases that changed more than "allowed" (by default nothing)
CREATE FUNCTION pg_temp.refused_with_changes(
	allowed text[] DEFAULT ARRAY['unchanged'])
RETURNS TABLE (n bigint, label text, result text, changes text)
LANGUAGE sql SET search_path = pg_catalog AS $$
	SELECT c.n, c.label, c.result, c.changes FROM pg_temp.cases AS c
	 WHERE c.result NOT LIKE 'ok%' AND c.changes <> ALL (allowed)
	 ORDER BY c.n
$$;
-- ---- end of summary ----
