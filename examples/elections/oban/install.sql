-- Oban's oban_peers table, kept by fencing elections, one per Oban
-- instance name ('public.oban_peers:' || name).  Oban's own statements
-- (the election's delete_expired_peers and upsert, Oban.Peers.Database,
-- 2.23.0 and 2.23.1 alike) run unchanged; the trigger makes each one the
-- election call it means.  The lease is the truth: logged (the table is
-- UNLOGGED by default), expiry judged by the server's clock (Oban judges
-- it by each node's own clock), a token.  The trigger's argument is the
-- TTL: Oban's peer interval (30 s by default).
--
-- INSERT (every election round): refused (counts 0: not the leader) while
--   another node leads; a node without a leader campaigns; the leading
--   node's own round renews, through the conflict's UPDATE below, or here
--   if its row was lost (emptied table).
-- UPDATE (ON CONFLICT DO UPDATE: the renewal): renews the lease of the
--   node whose row it is, if that node still leads; else updates nothing.
-- DELETE is left alone: a row deleted by a node whose clock runs ahead,
--   or by the leader at shutdown, leaves the election as it is.
CREATE FUNCTION oban_peers_fencing() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	ttl interval := TG_ARGV[0]::interval;
	election text;
	l record;
	ok boolean;
	mine boolean;
BEGIN
	IF TG_OP = 'INSERT' THEN
		election := TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME || ':' || NEW.name;
		SELECT * INTO l FROM fencing.election_leader(election);
		IF l.token IS NOT NULL AND l.candidate <> NEW.node THEN
			RETURN NULL;				-- another node leads
		ELSIF l.token IS NOT NULL THEN
			EXECUTE format('SELECT EXISTS (SELECT FROM %I.%I WHERE name = $1 AND node = $2'
						   ' AND started_at = $3)', TG_TABLE_SCHEMA, TG_TABLE_NAME)
				INTO mine USING NEW.name, NEW.node, l.since AT TIME ZONE 'UTC';
			IF mine THEN
				RETURN NEW;				-- the conflict renews it
			END IF;
			BEGIN
				ok := fencing.lease_renew(election, l.token, ttl);
			EXCEPTION WHEN SQLSTATE 'LF005' THEN
				ok := false;
			END;
		ELSE
			ok := fencing.election_campaign(election, NEW.node, NEW.node, ttl) IS NOT NULL;
		END IF;
		IF NOT ok THEN
			RETURN NULL;
		END IF;
		EXECUTE format('DELETE FROM %I.%I WHERE name = $1', TG_TABLE_SCHEMA, TG_TABLE_NAME)
			USING NEW.name;
		SELECT since AT TIME ZONE 'UTC', expires_at AT TIME ZONE 'UTC'
		  INTO NEW.started_at, NEW.expires_at FROM fencing.election_leader(election);
		RETURN NEW;
	END IF;
	-- UPDATE: only the renewal of the row's own node (Oban sets expires_at)
	IF NEW.name IS DISTINCT FROM OLD.name OR NEW.node IS DISTINCT FROM OLD.node THEN
		RETURN NULL;
	END IF;
	election := TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME || ':' || OLD.name;
	SELECT * INTO l FROM fencing.election_leader(election);
	IF l.token IS NULL OR l.candidate <> OLD.node
	   OR l.since AT TIME ZONE 'UTC' <> OLD.started_at THEN
		RETURN NULL;
	END IF;
	BEGIN
		ok := fencing.lease_renew(election, l.token, ttl);
	EXCEPTION WHEN SQLSTATE 'LF005' THEN
		ok := false;
	END;
	IF NOT ok THEN
		RETURN NULL;
	END IF;
	NEW.started_at := OLD.started_at;
	SELECT expires_at AT TIME ZONE 'UTC' INTO NEW.expires_at FROM fencing.election_leader(election);
	RETURN NEW;
END
$$;
CREATE TRIGGER oban_peers_fencing BEFORE INSERT OR UPDATE ON oban_peers
	FOR EACH ROW EXECUTE FUNCTION oban_peers_fencing('30 s');
