'use strict';
// bench/peers/driver.js: N clients run lease cycles against one system for
// a bounded time and print one JSON line of results.
//
//   node driver.js SYSTEM CLIENTS NAMES SECONDS PORT [WARMUP_S]
//   node driver.js setup-zookeeper NAMES PORT
//
// SYSTEM: fencing | plain | etcd | zookeeper | redis.  Every client has
// its own connection (or session, or client object), as N processes of an
// application would.  One cycle = pick a name at random out of NAMES,
// acquire it with a TTL (TTL_S, 30 s) and get a token; if granted, release
// it.  Throughput counts attempts (granted or not); a refusal is normal
// when another client holds the name.
//
// Token order: for every grant, the token is compared with the previous
// grant's token on the same name; a token <= the previous one is counted
// in "backwards".  All clients share this one event loop, and a name's next
// grant can only be decided after its holder's release, which comes after
// that holder received its grant, so the order in which grants arrive here
// is the order in which they were made.
//
// How each system is used is what a user would write with its npm client;
// bench/peers/README.md says why each is done this way.

const TTL_S = Number(process.env.TTL_S || 30);
const HOST = '127.0.0.1';

// ---- the systems -------------------------------------------------------
// connect(i) -> client; acquire(c, name) -> {token: BigInt, h} or null;
// release(c, name, grant) -> boolean; close(c).

function pgSystem(port, acquireSql, releaseSql, tokenOf) {
	const pg = require('pg');
	return {
		async connect(i) {
			const c = new pg.Client({ host: HOST, port, user: 'postgres', database: 'bench' });
			await c.connect();
			c.holder = 'c' + i;
			return c;
		},
		async acquire(c, name) {
			const r = await c.query(acquireSql, [name, c.holder, TTL_S + ' seconds']);
			const t = tokenOf(r);
			return t === null ? null : { token: BigInt(t) };
		},
		async release(c, name, g) {
			const r = await c.query(releaseSql, [name, g.token.toString()]);
			return r.rows.length === 1 ? r.rows[0].ok === true : r.rowCount === 1;
		},
		async close(c) { await c.end(); },
	};
}

const SYSTEMS = {
	// the extension: one call each way
	fencing: (port) => pgSystem(port,
		'SELECT fencing.lease_acquire($1, $2, $3::interval) AS t',
		'SELECT fencing.lease_release($1, $2) AS ok',
		(r) => r.rows[0].t),

	// bench/plain_lease.sql's two statements, as written there
	plain: (port) => pgSystem(port,
		`INSERT INTO plain_lease.leases AS l (name, holder, token, expires_at)
		 VALUES ($1, $2, nextval('plain_lease.token_seq'), clock_timestamp() + $3::interval)
		 ON CONFLICT (name) DO UPDATE
		    SET holder = EXCLUDED.holder, token = EXCLUDED.token,
		        expires_at = EXCLUDED.expires_at
		  WHERE l.expires_at <= clock_timestamp() OR l.holder = EXCLUDED.holder
		 RETURNING l.token`,
		`UPDATE plain_lease.leases
		    SET expires_at = clock_timestamp()
		  WHERE name = $1 AND token = $2
		    AND expires_at > clock_timestamp()`,
		(r) => (r.rows.length ? r.rows[0].token : null)),

	// etcd3's Lock, written out so that the token can be read: a lease
	// with the TTL, a transaction that puts the key with the lease if it
	// does not exist; the token is that transaction's revision (etcd: "the
	// fencing token is the revision number").  Release revokes the lease,
	// which deletes the key, as Lock.release() does.
	etcd: (port) => {
		const { Etcd3 } = require('etcd3');
		return {
			async connect(i) {
				const c = new Etcd3({ hosts: `http://${HOST}:${port}` });
				c.holder = 'c' + i;
				await c.get('warmup').string();
				return c;
			},
			async acquire(c, name) {
				const lease = c.lease(TTL_S, { autoKeepAlive: false });
				const id = await lease.grant();
				const r = await c.if(name, 'Create', '==', 0)
					.then(c.put(name).value(c.holder).lease(id))
					.commit();
				if (r.succeeded)
					return { token: BigInt(r.header.revision), h: lease };
				await lease.revoke();
				return null;
			},
			async release(c, name, g) {
				await g.h.revoke();
				return true;
			},
			async close(c) { c.close(); },
		};
	},

	// the ZooKeeper lock recipe (Curator's InterProcessMutex, try-lock
	// form): an ephemeral sequential node under the lock's node; the lowest
	// one holds the lock, else it removes its node.  The token is the
	// sequence number, a per-lock counter.  The TTL is the session timeout
	// (ZooKeeper has no per-acquire TTL; each client has its own session).
	zookeeper: (port) => {
		const zk = require('node-zookeeper-client');
		const call = (fn) => new Promise((res, rej) => fn((e, v) => (e ? rej(e) : res(v))));
		return {
			async connect(i) {
				const c = zk.createClient(`${HOST}:${port}`, { sessionTimeout: TTL_S * 1000, retries: 0 });
				await new Promise((res, rej) => {
					const t = setTimeout(() => rej(new Error('zookeeper connect timeout')), 20000);
					c.once('connected', () => { clearTimeout(t); res(); });
					c.connect();
				});
				c.holder = Buffer.from('c' + i);
				return c;
			},
			async acquire(c, name) {
				const dir = '/locks/' + name;
				const path = await call((cb) => c.create(dir + '/lock-', c.holder, zk.CreateMode.EPHEMERAL_SEQUENTIAL, cb));
				const mine = path.slice(dir.length + 1);
				const kids = await call((cb) => c.getChildren(dir, cb));
				kids.sort();
				if (kids[0] === mine)
					return { token: BigInt(parseInt(mine.slice(5), 10)), h: path };
				await call((cb) => c.remove(path, -1, cb));
				return null;
			},
			async release(c, name, g) {
				await call((cb) => c.remove(g.h, -1, cb));
				return true;
			},
			async close(c) { c.close(); },
		};
	},

	// Redis as its docs and users do it: SET key holder NX PX ttl; then
	// INCR a counter for the token; release with the documented
	// compare-and-delete script.
	redis: (port) => {
		const Redis = require('ioredis');
		const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
		return {
			async connect(i) {
				const c = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0 });
				await c.connect();
				c.defineCommand('releaseLock', { numberOfKeys: 1, lua: RELEASE });
				c.holder = 'c' + i;
				return c;
			},
			async acquire(c, name) {
				const ok = await c.set(name, c.holder, 'PX', TTL_S * 1000, 'NX');
				if (ok !== 'OK')
					return null;
				return { token: BigInt(await c.incr('fence:' + name)) };
			},
			async release(c, name) {
				return (await c.releaseLock(name, c.holder)) === 1;
			},
			async close(c) { c.disconnect(); },
		};
	},
};

// ---- the run -------------------------------------------------------------

async function setupZookeeper(names, port) {
	const sys = SYSTEMS.zookeeper(port);
	const zk = require('node-zookeeper-client');
	const c = await sys.connect(0);
	const call = (fn) => new Promise((res, rej) => fn((e, v) => (e && e.getCode && e.getCode() !== zk.Exception.NODE_EXISTS ? rej(e) : res(v))));
	await call((cb) => c.create('/locks', cb));
	const batch = [];
	for (let n = 1; n <= names; n++) {
		batch.push(call((cb) => c.create('/locks/l' + n, cb)));
		if (batch.length >= 200)
			await Promise.all(batch.splice(0));
	}
	await Promise.all(batch);
	await sys.close(c);
}

async function main() {
	const [system, clientsS, namesS, secondsS, portS, warmS] = process.argv.slice(2);
	if (system === 'setup-zookeeper') {
		await setupZookeeper(Number(clientsS), Number(namesS));
		return;
	}
	const clients = Number(clientsS), names = Number(namesS);
	const seconds = Number(secondsS), warmup = Number(warmS || 1);
	const sys = SYSTEMS[system](Number(portS));

	const conns = [];
	for (let i = 0; i < clients; i++)
		conns.push(await sys.connect(i + 1));

	const last = new Map();		// name -> token of its latest grant
	let recording = false, stopping = false;
	const st = { attempts: 0, grants: 0, released: 0, release_failed: 0, errors: 0, backwards: 0 };
	let lat = new Float64Array(1 << 20), nlat = 0;
	const firstErrors = [];

	async function loop(c) {
		while (!stopping) {
			const name = 'l' + (1 + Math.floor(Math.random() * names));
			const t0 = process.hrtime.bigint();
			const rec = recording;
			try {
				const g = await sys.acquire(c, name);
				if (g !== null) {
					const prev = last.get(name);
					const back = prev !== undefined && g.token <= prev;
					last.set(name, g.token);
					const ok = await sys.release(c, name, g);
					if (rec && recording) {
						st.grants++;
						if (back) st.backwards++;
						if (ok) st.released++; else st.release_failed++;
					}
				}
				if (rec && recording) {
					st.attempts++;
					if (nlat === lat.length) {
						const bigger = new Float64Array(lat.length * 2);
						bigger.set(lat);
						lat = bigger;
					}
					lat[nlat++] = Number(process.hrtime.bigint() - t0) / 1000;
				}
			} catch (e) {
				st.errors++;
				if (firstErrors.length < 3) firstErrors.push(String(e && e.message || e));
				if (st.errors > 1000) stopping = true;
			}
		}
	}

	const loops = conns.map(loop);
	await new Promise((r) => setTimeout(r, warmup * 1000));
	recording = true;
	const t0 = process.hrtime.bigint();
	const cpu0 = process.cpuUsage();
	await new Promise((r) => setTimeout(r, seconds * 1000));
	recording = false;
	const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;
	const cpu = process.cpuUsage(cpu0);
	stopping = true;
	await Promise.all(loops);
	for (const c of conns)
		await sys.close(c);

	const l = lat.subarray(0, nlat).sort();
	const q = (p) => (nlat ? l[Math.min(nlat - 1, Math.floor(p * nlat))] / 1000 : null);
	const out = {
		system, clients, names, seconds: elapsed,
		...st,
		cycles_per_s: st.attempts / elapsed,
		grants_per_s: st.grants / elapsed,
		client_cpu_s: (cpu.user + cpu.system) / 1e6,
		p50_ms: q(0.5), p99_ms: q(0.99), max_ms: nlat ? l[nlat - 1] / 1000 : null,
		first_errors: firstErrors,
	};
	process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), (e) => {
	process.stderr.write(`driver: ${e && e.stack || e}\n`);
	process.exit(1);
});
