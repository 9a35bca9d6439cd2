--
-- Bad input (b): lease names and holders.
--
-- A name or holder is any text of 1 to 256 bytes (bytes, not characters),
-- compared byte for byte: no trimming, no case folding, no Unicode
-- normalization.  Whitespace-only names are non-empty and so allowed; NFC
-- and NFD spellings of the same word are different leases (normalize in
-- the client, e.g. with normalize(name, NFC), if that matters).  NUL
-- cannot be part of a text value at all: PostgreSQL refuses it before any
-- function is called.
\i sql/include/case_harness.sql

SELECT fencing.lease_acquire('bi_b', 'alice', '10 min') > 0 AS acquired;
CREATE FUNCTION pg_temp.tok(lease text) RETURNS bigint
LANGUAGE sql AS $$ SELECT token FROM fencing.leases WHERE name = lease $$;

-- empty, 257 bytes, 10 kB, 1 MB: refused by every function, nothing changes
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire('', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_b', '', '1 min')$$),
	($$SELECT fencing.lease_renew('', 1, '1 min')$$),
	($$SELECT fencing.lease_release('', 1)$$),
	($$SELECT fencing.lease_lock('', 1)$$),
	($$SELECT fencing.lease_force_release('')$$),
	($$SELECT fencing.lease_acquire(repeat('n', 257), 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_b', repeat('h', 257), '1 min')$$),
	($$SELECT fencing.lease_renew(repeat('n', 257), 1, '1 min')$$),
	($$SELECT fencing.lease_release(repeat('n', 257), 1)$$),
	($$SELECT fencing.lease_lock(repeat('n', 257), 1)$$),
	($$SELECT fencing.lease_force_release(repeat('n', 257))$$),
	($$SELECT fencing.lease_acquire(repeat('n', 10240), 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_b', repeat('h', 10240), '1 min')$$),
	($$SELECT fencing.lease_renew(repeat('n', 10240), 1, '1 min')$$),
	($$SELECT fencing.lease_release(repeat('n', 10240), 1)$$),
	($$SELECT fencing.lease_lock(repeat('n', 10240), 1)$$),
	($$SELECT fencing.lease_force_release(repeat('n', 10240))$$),
	($$SELECT fencing.lease_acquire(repeat('n', 1048576), repeat('h', 1048576), '1 min')$$),
	($$SELECT fencing.lease_acquire(repeat('x', 255) || 'é', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire(repeat(chr(128274), 65), 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire('bi_b', repeat('€', 86), '1 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- NUL is not a character a text value can hold: refused by PostgreSQL
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire(chr(0), 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire(E'bi_b\0x', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire(U&'bi_b\0000', 'bob', '1 min')$$),
	($$SELECT fencing.lease_acquire(convert_from('\x62690062'::bytea, 'UTF8'), 'bob', '1 min')$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;

-- exactly 256 bytes is accepted, for names and holders alike; renew,
-- check and release take the 256-byte name too
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire(repeat('n', 256), repeat('h', 256), '1 min') > 0$$),
	($$SELECT fencing.lease_acquire(repeat('x', 254) || 'é', 'bob', '1 min') > 0$$),
	($$SELECT fencing.lease_acquire(repeat(chr(128274), 64), repeat('€', 85) || 'x', '1 min') > 0$$),
	($$SELECT fencing.lease_acquire(repeat('n', 256), repeat('h', 256), '1 min') > 0$$),
	($$SELECT fencing.lease_renew(repeat('n', 256), pg_temp.tok(repeat('n', 256)), '2 min')$$),
	($$SELECT fencing.lease_lock(repeat('n', 256), pg_temp.tok(repeat('n', 256)))$$),
	($$SELECT fencing.lease_release(repeat('n', 256), pg_temp.tok(repeat('n', 256)))$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT octet_length(name) AS name_bytes, char_length(name) AS name_chars,
	   octet_length(holder) AS holder_bytes, state, acquires
  FROM fencing.lease_status
 WHERE name IN (repeat('n', 256), repeat('x', 254) || 'é', repeat('🔒', 64))
 ORDER BY name COLLATE "C";

-- odd Unicode: combining marks, right-to-left text and overrides, emoji,
-- zero-width joiner and space, byte order mark, control characters, a
-- noncharacter; and names that look like SQL.  All are ordinary names.
CREATE TEMP TABLE odd (label text, name text);
INSERT INTO odd VALUES
	('combining acute (NFD e-acute)', 'bi_b_e' || U&'\0301'),
	('precomposed e-acute (NFC)', 'bi_b_' || U&'\00E9'),
	('Hebrew (RTL)', 'bi_b_' || U&'\05E9\05DC\05D5\05DD'),
	('Arabic (RTL)', 'bi_b_' || U&'\0645\0631\062D\0628\0627'),
	('right-to-left override', 'bi_b_' || U&'\202E' || 'gnp.exe'),
	('emoji', 'bi_b_' || U&'\+01F512'),
	('ZWJ sequence (woman technologist)', 'bi_b_' || U&'\+01F469\200D\+01F4BB'),
	('woman + technologist, no ZWJ', 'bi_b_' || U&'\+01F469\+01F4BB'),
	('zero-width space', 'bi_b_' || U&'\200B'),
	('byte order mark', U&'\FEFF' || 'bi_b'),
	('control characters', E'bi_b_\x01\n\t\r'),
	('noncharacter U+FFFF', 'bi_b_' || U&'\FFFF'),
	('SQL-looking', $$bi_b'); DELETE FROM fencing.leases; --$$),
	('LIKE wildcards', 'bi_b_%'),
	('JSON-looking', '{"lease": "bi_b", "token": 1}');
SELECT label, r.* FROM odd,
	LATERAL pg_temp.run(format('SELECT fencing.lease_acquire(%L, %L, %L) > 0',
							   name, 'holder ' || label, '10 min')) AS r;
-- each is its own lease, stored byte for byte, and works through its life
SELECT o.label, octet_length(o.name) AS bytes, l.name = o.name AS same_bytes,
	   l.state, fencing.lease_lock(o.name, l.token) AS checked,
	   fencing.lease_renew(o.name, l.token, '5 min') AS renewed
  FROM odd AS o JOIN fencing.lease_status AS l USING (name)
 ORDER BY o.label COLLATE "C";
SELECT count(*) AS odd_leases, count(DISTINCT token) AS distinct_tokens
  FROM fencing.lease_status WHERE name IN (SELECT name FROM odd);
SELECT label, r.* FROM odd,
	LATERAL pg_temp.run(format('SELECT fencing.lease_release(%L, %s)',
							   name, pg_temp.tok(name))) AS r;
-- the SQL-looking name did nothing but name a lease
SELECT count(*) AS leases_named_bi_b FROM fencing.leases WHERE name = 'bi_b';

-- NFC and NFD are different leases: both can be held at once by different
-- holders; normalize() makes them one name
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire(U&'bi_b_caf\00E9', 'nfc-holder', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(U&'bi_b_cafe\0301', 'nfd-holder', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(normalize(U&'bi_b_cafe\0301', NFC), 'nfd-holder', '10 min') IS NULL$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT octet_length(name) AS bytes, holder, state,
	   normalize(name, NFC) = U&'bi_b_caf\00E9' AS nfc_equal
  FROM fencing.lease_status WHERE name LIKE 'bi\_b\_caf%' ORDER BY holder;

-- whitespace: allowed, significant, and never trimmed
SELECT q, r.* FROM (VALUES
	($$SELECT fencing.lease_acquire(' ', 'alice', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire('  ', 'alice', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(E'\t', 'alice', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(E'\n', 'alice', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(U&'\00A0', 'alice', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(U&'\3000', 'alice', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(' ', 'bob', '10 min') IS NULL$$),
	($$SELECT fencing.lease_acquire('bi_b ', 'bob', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire(' bi_b', 'bob', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire('BI_B', 'bob', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire('bi_b_ws', ' ', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire('bi_b_ws', '  ', '10 min') IS NULL$$),
	($$SELECT fencing.lease_acquire('bi_b_ws', ' ', '10 min') > 0$$),
	($$SELECT fencing.lease_acquire('bi_b_ws', 'alice ', '10 min') IS NULL$$)
  ) AS v(q), LATERAL pg_temp.run(q) AS r;
SELECT (SELECT string_agg('U+' || upper(lpad(to_hex(ascii(c)), 4, '0')), ' ')
		  FROM regexp_split_to_table(name, '') AS c) AS code_points,
	   octet_length(name) AS bytes, '"' || holder || '"' AS holder, state, acquires
  FROM fencing.lease_status
 WHERE name IN (' ', '  ', E'\t', E'\n', U&'\00A0', U&'\3000',
				'bi_b ', ' bi_b', 'BI_B', 'bi_b', 'bi_b_ws')
 ORDER BY octet_length(name), name COLLATE "C";

-- the first lease is untouched and live
SELECT fencing.lease_lock('bi_b', pg_temp.tok('bi_b')) AS bi_b_live;

-- every case, and any refused case that changed something (a refused
-- stale write moves the stale-write counter: that is what it counts)
\i sql/include/case_summary.sql
SELECT * FROM pg_temp.case_counts();
SELECT * FROM pg_temp.refused_with_changes();
