-- objects.sql: describe every object of the installed fencing extension,
-- one line each, sorted: members, relations with their columns,
-- constraints, indexes, triggers, view definitions, sequence parameters,
-- privileges and comments, functions with their bodies, the tables whose
-- contents pg_dump dumps, and the schema.  t/061_upgrade.pl compares an
-- updated installation with a fresh one: an update script must leave
-- exactly what the install script of the new version creates.
--
--   psql -XAtq -d DB -f test/upgrade/objects.sql
\ir functions_view.sql
WITH ext AS (
	SELECT oid, extconfig, extcondition FROM pg_catalog.pg_extension WHERE extname = 'fencing'
), members AS (
	SELECT d.classid, d.objid, d.objsubid
	  FROM pg_catalog.pg_depend AS d, ext
	 WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
	   AND d.refobjid = ext.oid AND d.deptype = 'e'
), rels AS (
	SELECT c.* FROM pg_catalog.pg_class AS c
	  JOIN members AS m ON m.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND m.objid = c.oid
), acl(objoid, kind, acl, owner) AS (
	SELECT oid, 'r', relacl, relowner FROM rels
	UNION ALL
	SELECT p.oid, 'f', p.proacl, p.proowner FROM pg_catalog.pg_proc AS p
	  JOIN members AS m ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = p.oid
), acls AS (
	SELECT a.objoid, a.kind,
		   pg_catalog.string_agg(CASE WHEN x.grantee = 0 THEN 'PUBLIC'
									  WHEN x.grantee = a.owner THEN 'owner'
									  ELSE x.grantee::pg_catalog.regrole::text END
								 || ':' || x.privilege_type
								 || CASE WHEN x.is_grantable THEN '*' ELSE '' END,
								 ',' ORDER BY 1) AS privs
	  FROM acl AS a,
		   LATERAL pg_catalog.aclexplode(COALESCE(a.acl, pg_catalog.acldefault(
				CASE WHEN a.kind = 'f' THEN 'f'
					 WHEN (SELECT relkind FROM pg_catalog.pg_class WHERE oid = a.objoid) = 'S' THEN 's'
					 ELSE 'r' END::"char", a.owner))) AS x
	 GROUP BY a.objoid, a.kind
)
SELECT line FROM (
	SELECT 'member ' || pg_catalog.pg_describe_object(classid, objid, objsubid) AS line FROM members
	UNION ALL
	SELECT pg_catalog.format('relation %s kind %s options %s privileges %s comment %s',
							 c.oid::pg_catalog.regclass, c.relkind, c.reloptions, a.privs,
							 pg_catalog.obj_description(c.oid, 'pg_class'))
	  FROM rels AS c LEFT JOIN acls AS a ON a.objoid = c.oid AND a.kind = 'r'
	UNION ALL
	SELECT pg_catalog.format('column %s.%s %s%s%s comment %s',
							 c.oid::pg_catalog.regclass, t.attname,
							 pg_catalog.format_type(t.atttypid, t.atttypmod),
							 CASE WHEN t.attnotnull THEN ' NOT NULL' ELSE '' END,
							 COALESCE(' DEFAULT ' || pg_catalog.pg_get_expr(ad.adbin, ad.adrelid), ''),
							 pg_catalog.col_description(c.oid, t.attnum))
	  FROM rels AS c
	  JOIN pg_catalog.pg_attribute AS t ON t.attrelid = c.oid AND t.attnum > 0 AND NOT t.attisdropped
	  LEFT JOIN pg_catalog.pg_attrdef AS ad ON ad.adrelid = c.oid AND ad.adnum = t.attnum
	UNION ALL
	SELECT pg_catalog.format('constraint %s %s %s', co.conrelid::pg_catalog.regclass, co.conname,
							 pg_catalog.pg_get_constraintdef(co.oid))
	  FROM pg_catalog.pg_constraint AS co JOIN rels AS c ON c.oid = co.conrelid
	UNION ALL
	SELECT 'index ' || pg_catalog.pg_get_indexdef(i.indexrelid)
	  FROM pg_catalog.pg_index AS i JOIN rels AS c ON c.oid = i.indrelid
	UNION ALL
	SELECT 'trigger ' || pg_catalog.pg_get_triggerdef(tg.oid)
	  FROM pg_catalog.pg_trigger AS tg JOIN rels AS c ON c.oid = tg.tgrelid
	 WHERE NOT tg.tgisinternal
	UNION ALL
	SELECT pg_catalog.format('view %s %s', c.oid::pg_catalog.regclass, pg_catalog.pg_get_viewdef(c.oid))
	  FROM rels AS c WHERE c.relkind IN ('v', 'm')
	UNION ALL
	SELECT pg_catalog.format('sequence %s as %s start %s increment %s min %s max %s cache %s cycle %s',
							 s.seqrelid::pg_catalog.regclass, s.seqtypid::pg_catalog.regtype, s.seqstart,
							 s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
	  FROM pg_catalog.pg_sequence AS s JOIN rels AS c ON c.oid = s.seqrelid
	UNION ALL
	SELECT pg_catalog.format('function %s privileges %s language %s source %s binary %s comment %s',
							 f.signature, a.privs, l.lanname, p.prosrc, p.probin,
							 pg_catalog.obj_description(p.oid, 'pg_proc'))
	  FROM members AS m
	  JOIN pg_catalog.pg_proc AS p ON m.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND m.objid = p.oid
	  JOIN pg_catalog.pg_language AS l ON l.oid = p.prolang
	  JOIN pg_temp.fencing_functions AS f ON f.oid = p.oid
	  LEFT JOIN acls AS a ON a.objoid = p.oid AND a.kind = 'f'
	UNION ALL
	SELECT pg_catalog.format('dumped contents of %s where %L', cfg.rel::pg_catalog.regclass, cfg.cond)
	  FROM ext, LATERAL unnest(ext.extconfig, ext.extcondition) AS cfg(rel, cond)
	UNION ALL
	SELECT pg_catalog.format('schema %s privileges %s comment %s', n.nspname, n.nspacl,
							 pg_catalog.obj_description(n.oid, 'pg_namespace'))
	  FROM pg_catalog.pg_namespace AS n WHERE n.nspname = 'fencing'
) AS lines
ORDER BY 1;
DROP VIEW pg_temp.fencing_functions;
