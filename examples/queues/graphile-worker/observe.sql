-- observe.sql: records graphile-worker's claims in qtest.history
-- (../node/history.sql); the task records its own writes and completions.
-- Test instrumentation, not part of the recipe.
CREATE FUNCTION qtest.gw_observe() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO qtest.history (job, kind, token)
	VALUES ('gw:' || NEW.id, 'claim', NEW.fencing_token);
	RETURN NULL;
END $$;
CREATE TRIGGER qtest_observe AFTER UPDATE ON graphile_worker._private_jobs
	FOR EACH ROW WHEN (NEW.attempts > OLD.attempts)
	EXECUTE FUNCTION qtest.gw_observe();
