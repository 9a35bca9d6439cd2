-- observe.sql: records graphile-worker's claims and heartbeats in
-- qtest.history (../node/history.sql); the task records its own writes and
-- completions.  Test instrumentation, not part of the recipe.
CREATE FUNCTION qtest.gw_observe() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	IF NEW.attempts > OLD.attempts AND NEW.locked_by IS NOT NULL
	   AND NEW.locked_at IS DISTINCT FROM OLD.locked_at THEN
		INSERT INTO qtest.history (job, kind, token)
		VALUES ('gw:' || NEW.id, 'claim', NEW.fencing_token);
	ELSIF NEW.attempts = OLD.attempts AND OLD.locked_by IS NOT NULL
		  AND NEW.locked_by IS NOT DISTINCT FROM OLD.locked_by
		  AND NEW.locked_at IS DISTINCT FROM OLD.locked_at THEN
		INSERT INTO qtest.history (job, kind, token)
		VALUES ('gw:' || NEW.id, 'heartbeat',
				nullif(pg_catalog.current_setting('fencing.token', true), '')::bigint);
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER qtest_observe AFTER UPDATE ON graphile_worker._private_jobs
	FOR EACH ROW EXECUTE FUNCTION qtest.gw_observe();
