-- observe.sql: records pg-boss's claims, completions and failures in
-- qtest.history (../node/history.sql), inside the statements that make
-- them.  Test instrumentation, not part of the recipe.
CREATE FUNCTION qtest.boss_observe() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
	IF TG_OP = 'UPDATE' AND NEW.state = 'active' AND OLD.state <> 'active' THEN
		INSERT INTO qtest.history (job, kind, token)
		VALUES ('boss:' || NEW.id, 'claim', (NEW.data->>'fencing_token')::bigint);
	ELSIF TG_OP = 'UPDATE' AND NEW.state = 'completed' AND OLD.state = 'active' THEN
		INSERT INTO qtest.history (job, kind, token)
		VALUES ('boss:' || NEW.id, 'complete', (NEW.output->>'fencing_token')::bigint);
	ELSIF TG_OP = 'UPDATE' AND NEW.state = 'active' AND OLD.state = 'active'
		  AND NEW.heartbeat_on IS DISTINCT FROM OLD.heartbeat_on THEN
		INSERT INTO qtest.history (job, kind, token)
		VALUES ('boss:' || NEW.id, 'heartbeat',
				nullif(pg_catalog.current_setting('fencing.token', true), '')::bigint);
	ELSIF TG_OP = 'INSERT' AND NEW.state IN ('retry', 'failed') AND NEW.started_on IS NOT NULL
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job timed out"}}'::jsonb
		  AND NEW.output IS DISTINCT FROM '{"value": {"message": "job heartbeat timeout"}}'::jsonb THEN
		INSERT INTO qtest.history (job, kind, token)
		VALUES ('boss:' || NEW.id, 'fail', (NEW.output->>'fencing_token')::bigint);
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER qtest_observe AFTER INSERT OR UPDATE ON pgboss.job
	FOR EACH ROW EXECUTE FUNCTION qtest.boss_observe();
