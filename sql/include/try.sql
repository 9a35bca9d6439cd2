-- ---- pg_temp.try(q), included with \i: run one statement that returns
-- one value and show "ok: <value>" or "ERROR <SQLSTATE>: <message>", so a
-- file can list cases and their outcomes in one result ----
CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r text;
BEGIN
	EXECUTE q INTO r;
	RETURN 'ok: ' || coalesce(r, 'NULL');
EXCEPTION WHEN OTHERS THEN
	RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- ---- end of pg_temp.try ----
