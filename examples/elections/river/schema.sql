-- River's leader table, as River declares it (riverqueue/river,
-- riverdriver/riverpgxv5/internal/dbsqlc/river_leader.sql at commit
-- e3fc3c2a, "refactor leader election around DB-issued terms", in River
-- 0.35 and later).
CREATE UNLOGGED TABLE river_leader(
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    leader_id text NOT NULL,
    name text PRIMARY KEY DEFAULT 'default' CHECK (name = 'default'),
    CONSTRAINT name_length CHECK (name = 'default'),
    CONSTRAINT leader_id_length CHECK (char_length(leader_id) > 0 AND char_length(leader_id) < 128)
);
