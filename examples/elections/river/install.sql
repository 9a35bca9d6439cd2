-- River's river_leader table, kept by a fencing election.  River's own
-- statements (LeaderAttemptElect, LeaderAttemptReelect, LeaderResign,
-- LeaderDeleteExpired, LeaderGetElectedLeader, LeaderInsert) run unchanged;
-- this trigger makes each one the election call it means.  The election
-- is named after the table ('public.river_leader'); its leader is the
-- candidate River calls leader_id, its term is (leader_id, elected_at) as
-- in River, and elected_at is the lease's "since".  The lease is the truth:
-- it is logged (the table is UNLOGGED: a crash or a failover empties it),
-- its expiry is judged by the server's clock, and it has a token.
--
-- INSERT (a campaign): elected only if nobody leads; River's TTL is
--   expires_at - elected_at.  A client that still leads by the election
--   but lost its row (emptied table) gets its term back, renewed.
-- UPDATE (a re-election): renews the lease of the term (leader_id,
--   elected_at); a term that is over (expired, taken over, lost at a
--   failover) updates nothing, so River steps down.
-- DELETE: the term's own row resigns its lease (LeaderResign); an expired
--   row (LeaderDeleteExpired) just goes.
CREATE FUNCTION river_leader_fencing() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	election text := TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME;
	l record;
	ok boolean;
	mine boolean;
BEGIN
	SELECT * INTO l FROM fencing.election_leader(election);
	IF TG_OP = 'INSERT' THEN
		IF l.token IS NOT NULL AND l.candidate <> NEW.leader_id THEN
			RETURN NULL;				-- another client leads: not elected
		ELSIF l.token IS NOT NULL THEN
			EXECUTE format('SELECT EXISTS (SELECT FROM %I.%I WHERE leader_id = $1'
						   ' AND elected_at = $2)', TG_TABLE_SCHEMA, TG_TABLE_NAME)
				INTO mine USING NEW.leader_id, l.since;
			IF mine THEN
				RETURN NULL;			-- it leads already: River's own conflict
			END IF;
			BEGIN
				ok := fencing.lease_renew(election, l.token, NEW.expires_at - NEW.elected_at);
			EXCEPTION WHEN SQLSTATE 'LF005' THEN
				ok := false;			-- lost at a failover
			END;
		ELSE
			ok := fencing.election_campaign(election, NEW.leader_id, NEW.leader_id,
											NEW.expires_at - NEW.elected_at) IS NOT NULL;
		END IF;
		IF NOT ok THEN
			RETURN NULL;
		END IF;
		-- a row of an earlier term would conflict: it is over
		EXECUTE format('DELETE FROM %I.%I WHERE name = $1', TG_TABLE_SCHEMA, TG_TABLE_NAME)
			USING NEW.name;
		SELECT since, expires_at INTO NEW.elected_at, NEW.expires_at
		  FROM fencing.election_leader(election);
		RETURN NEW;
	ELSIF TG_OP = 'UPDATE' THEN
		IF l.token IS NULL OR l.candidate <> OLD.leader_id OR l.since <> OLD.elected_at THEN
			RETURN NULL;				-- the term is over
		END IF;
		BEGIN
			ok := fencing.lease_renew(election, l.token, NEW.expires_at - now());
		EXCEPTION WHEN SQLSTATE 'LF005' THEN
			ok := false;
		END;
		IF NOT ok THEN
			RETURN NULL;
		END IF;
		NEW.leader_id := OLD.leader_id;
		NEW.elected_at := OLD.elected_at;
		SELECT expires_at INTO NEW.expires_at FROM fencing.election_leader(election);
		RETURN NEW;
	ELSE
		IF l.token IS NOT NULL AND l.candidate = OLD.leader_id AND l.since = OLD.elected_at THEN
			BEGIN
				PERFORM fencing.election_resign(election, l.token);
			EXCEPTION WHEN SQLSTATE 'LF005' THEN
				NULL;
			END;
		END IF;
		RETURN OLD;
	END IF;
END
$$;
CREATE TRIGGER river_leader_fencing BEFORE INSERT OR UPDATE OR DELETE ON river_leader
	FOR EACH ROW EXECUTE FUNCTION river_leader_fencing();
