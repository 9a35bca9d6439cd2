-- upgrade_check.sql: install an old version of fencing, update it to the
-- default version, and check the result (in the manner of PostgreSQL's
-- contrib oldextversions tests).  Run as a superuser in an empty database:
--
--   psql -X -d DB -v from=1.0 -f test/upgrade/upgrade_check.sql
--
-- from: the version to start from (default 1.0, the first release).  With
-- no update script yet, ALTER EXTENSION ... UPDATE is a no-op; the day
-- fencing--1.0--1.1.sql appears, this runs it.  t/061_upgrade.pl runs this
-- for every version that has an update path to the default version.
--
-- Checks, each raising an error when it fails:
--   1. extversion is the default version of fencing.control;
--   2. the functions are exactly those of expected_functions.sql, with the
--      same signatures, defaults, results, volatility, parallel safety and
--      EXECUTE for PUBLIC (regenerate with list_functions.sql);
--   3. state survives the update: a lease taken before it is still held
--      with its token, and tokens issued after it are larger.
\set ON_ERROR_STOP 1
\if :{?from}
\else
\set from 1.0
\endif

CREATE EXTENSION fencing VERSION :'from';
SELECT extversion AS installed_version FROM pg_catalog.pg_extension WHERE extname = 'fencing' \gset
\echo upgrade_check: installed fencing :installed_version

-- state the update must carry over
SELECT fencing.lease_acquire('upgrade-check', 'before-update', '1 hour') AS token_before \gset

ALTER EXTENSION fencing UPDATE;

-- 1. the version
SELECT e.extversion AS updated_version, a.default_version
  FROM pg_catalog.pg_extension AS e, pg_catalog.pg_available_extensions AS a
 WHERE e.extname = 'fencing' AND a.name = 'fencing' \gset
SELECT (:'updated_version' = :'default_version') AS version_ok \gset
\if :version_ok
\echo upgrade_check: updated to :updated_version (the default version)
\else
\echo upgrade_check: FAILED: extversion is :updated_version after ALTER EXTENSION fencing UPDATE, default_version is :default_version
SELECT 1/0 AS version_check_failed;
\endif

-- 2. the functions
\ir functions_view.sql
CREATE TEMPORARY TABLE fencing_expected_functions (signature text PRIMARY KEY);
\ir expected_functions.sql
DO $check$
DECLARE
	missing text;
	extra text;
BEGIN
	SELECT pg_catalog.string_agg(signature, E'\n' ORDER BY signature) INTO missing
	  FROM (SELECT signature FROM pg_temp.fencing_expected_functions
			EXCEPT SELECT signature FROM pg_temp.fencing_functions) AS m;
	SELECT pg_catalog.string_agg(signature, E'\n' ORDER BY signature) INTO extra
	  FROM (SELECT signature FROM pg_temp.fencing_functions
			EXCEPT SELECT signature FROM pg_temp.fencing_expected_functions) AS x;
	IF missing IS NOT NULL OR extra IS NOT NULL THEN
		RAISE EXCEPTION 'the functions after the update differ from test/upgrade/expected_functions.sql'
			USING DETAIL = pg_catalog.format(E'expected but missing or different:\n%s\nnot expected:\n%s',
											COALESCE(missing, '(none)'), COALESCE(extra, '(none)')),
				  HINT = 'If the change is intended, regenerate the list with test/upgrade/list_functions.sql.';
	END IF;
END
$check$;
SELECT pg_catalog.count(*) AS function_count FROM pg_temp.fencing_functions \gset
\echo upgrade_check: all :function_count functions as expected

-- 3. state
SELECT fencing.lease_lock('upgrade-check', :token_before) AS lease_kept,
	   fencing.next_token() > :token_before AS tokens_grow \gset
\if :lease_kept
\else
\echo upgrade_check: FAILED: the lease taken before the update is not held with token :token_before any more
SELECT 1/0 AS lease_lock_failed;
\endif
\if :tokens_grow
\else
\echo upgrade_check: FAILED: a token issued after the update is not larger than :token_before
SELECT 1/0 AS token_check_failed;
\endif
\echo upgrade_check: fencing :installed_version -> :updated_version: ok
