-- functions_view.sql: a temporary view, fencing_functions, with one row
-- per function of the installed fencing extension: name, arguments (names,
-- types, defaults), result, volatility, parallel safety, strictness,
-- security, and whether PUBLIC may execute it.  Included by
-- list_functions.sql and upgrade_check.sql.
SELECT pg_catalog.set_config('intervalstyle', 'postgres', false) IS NOT NULL AS _ \gset
CREATE TEMPORARY VIEW fencing_functions AS
SELECT p.oid, pg_catalog.format('%s.%s(%s) RETURNS %s %s PARALLEL %s%s%s%s',
			  n.nspname, p.proname,
			  pg_catalog.pg_get_function_arguments(p.oid),
			  pg_catalog.pg_get_function_result(p.oid),
			  CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END,
			  CASE p.proparallel WHEN 's' THEN 'SAFE' WHEN 'r' THEN 'RESTRICTED' ELSE 'UNSAFE' END,
			  CASE WHEN p.proisstrict THEN ' STRICT' ELSE '' END,
			  CASE WHEN p.prosecdef THEN ' SECURITY DEFINER' ELSE '' END,
			  CASE WHEN EXISTS (SELECT 1
								  FROM pg_catalog.aclexplode(COALESCE(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
								 WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
				   THEN '' ELSE ' (no EXECUTE for PUBLIC)' END) AS signature
  FROM pg_catalog.pg_proc AS p
  JOIN pg_catalog.pg_namespace AS n ON n.oid = p.pronamespace
  JOIN pg_catalog.pg_depend AS d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
									AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_catalog.pg_extension AS e ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
									   AND d.refobjid = e.oid
 WHERE e.extname = 'fencing';
