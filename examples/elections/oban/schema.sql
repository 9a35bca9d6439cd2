-- Oban's peers table, as its migration V11 makes it (oban-bg/oban,
-- lib/oban/migrations/postgres/v11.ex; "unlogged: true", Oban's default,
-- makes it UNLOGGED).
CREATE UNLOGGED TABLE oban_peers (
	name text NOT NULL PRIMARY KEY,
	node text NOT NULL,
	started_at timestamp without time zone NOT NULL,
	expires_at timestamp without time zone NOT NULL
);
