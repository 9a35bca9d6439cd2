-- ---- helpers of the queue_* files, included with \i (needs pg_temp.base(t0)) ----
-- run a statement, report "ok: <rows|value>" or "SQLSTATE: message [detail]"
-- with every token written as T<n>
CREATE FUNCTION pg_temp.rel(s text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	b bigint := (SELECT t0 FROM pg_temp.base);
	m text[];
	out text := '';
	rest text := s;
BEGIN
	LOOP
		m := regexp_match(rest, '^(.*?)(\d{1,19})(.*)$');
		EXIT WHEN m IS NULL;
		out := out || m[1] || CASE WHEN m[2]::numeric >= b AND m[2]::numeric < b + 1000
			THEN 'T' || (m[2]::numeric - b) ELSE m[2] END;
		rest := m[3];
	END LOOP;
	RETURN out || rest;
END $$;
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text;
	n bigint;
	detail text;
BEGIN
	IF q ~* '^\s*(SELECT|WITH)\M' OR q ~* '\mRETURNING\M' THEN
		EXECUTE q INTO r;
		RETURN pg_temp.rel('ok: ' || coalesce(r, 'NULL'));
	END IF;
	EXECUTE q;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN 'ok: ' || n || ' rows';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN pg_temp.rel(SQLSTATE || ': ' || SQLERRM || coalesce(' [' || nullif(detail, '') || ']', ''));
END $$;
-- ---- end of helpers ----
