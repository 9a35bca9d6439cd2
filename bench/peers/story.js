'use strict';
// bench/peers/story.js: the seed's story, told to Redis and to fencing.
//
//   node story.js PG_PORT REDIS_PORT
//
// Holder A takes the lock with a short TTL and pauses (a GC pause, a
// stopped VM); the lock expires; B takes it; A resumes.  Both then write
// to a resource that keeps the highest token it has seen and refuses
// older ones, which is what a fence is.
//
// Redis, as users do it (SET NX PX, then INCR for the token): A's SET
// succeeds and A pauses before its INCR; B's SET and INCR run; A's INCR
// then returns the larger number.  The expired holder has the highest
// token, its write passes the fence and the live holder is locked out.
//
// fencing: the token comes with the grant, in one statement, so there is
// no gap to pause in; B's token is larger, and A's write is refused with
// LF001 inside the write's own transaction.
//
// Prints a transcript; exits 0 when both behave as described, 1 if not.

const Redis = require('ioredis');
const pg = require('pg');

const [pgPort, redisPort] = process.argv.slice(2).map(Number);
const PAUSE_MS = 800, TTL_MS = 300;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const say = (s) => process.stdout.write(s + '\n');

// the resource: keeps the highest token seen, refuses older or equal ones
function resource() {
	let highest = 0n, value = null;
	return {
		write(who, token) {
			if (token <= highest) {
				say(`    resource: ${who}'s write with token ${token} REFUSED (highest seen ${highest})`);
				return false;
			}
			highest = token;
			value = who;
			say(`    resource: ${who}'s write with token ${token} accepted`);
			return true;
		},
		get value() { return value; },
	};
}

async function redisStory() {
	const A = new Redis({ host: '127.0.0.1', port: redisPort });
	const B = new Redis({ host: '127.0.0.1', port: redisPort });
	await A.del('story', 'fence:story');
	say('Redis (SET story holder NX PX ttl, then INCR fence:story):');
	say(`  A: SET story A NX PX ${TTL_MS} -> ${await A.set('story', 'A', 'PX', TTL_MS, 'NX')}`);
	say(`  A pauses ${PAUSE_MS} ms (before its INCR)`);
	await sleep(PAUSE_MS);
	say(`  (the lock expired: PTTL story -> ${await B.pttl('story')})`);
	say(`  B: SET story B NX PX 30000 -> ${await B.set('story', 'B', 'PX', 30000, 'NX')}`);
	const tB = BigInt(await B.incr('fence:story'));
	say(`  B: INCR fence:story -> ${tB}`);
	const tA = BigInt(await A.incr('fence:story'));
	say(`  A resumes: INCR fence:story -> ${tA}`);
	say(`  GET story -> ${await A.get('story')} (B holds the lock; A holds the larger token)`);
	const res = resource();
	const bOk = res.write('B', tB);
	const aOk = res.write('A (expired)', tA);
	const bAgain = res.write('B', tB);
	A.disconnect();
	B.disconnect();
	const broken = tA > tB && aOk && !bAgain;
	say(`  => ${broken ? 'INCR is not a fence: the expired holder has the higher token; its write passed, the live holder is refused' : 'unexpected: the story did not unfold as described'}`);
	return broken && bOk;
}

async function fencingStory() {
	const conn = async () => {
		const c = new pg.Client({ host: '127.0.0.1', port: pgPort, user: 'postgres', database: 'bench' });
		await c.connect();
		return c;
	};
	const A = await conn(), B = await conn();
	await A.query(`DROP TABLE IF EXISTS story_files;
		CREATE TABLE story_files (id int PRIMARY KEY, body text, fence bigint);
		INSERT INTO story_files VALUES (1, 'initial', NULL);
		DELETE FROM fencing.leases WHERE name = 'story'`);
	say('fencing (lease_acquire, then writes with fence_advance in the SET list):');
	const tA = BigInt((await A.query("SELECT fencing.lease_acquire('story', 'A', $1::interval) AS t", [TTL_MS + ' ms'])).rows[0].t);
	say(`  A: lease_acquire('story', 'A', '${TTL_MS} ms') -> token ${tA}`);
	say(`  A pauses ${PAUSE_MS} ms`);
	await sleep(PAUSE_MS);
	const tB = BigInt((await B.query("SELECT fencing.lease_acquire('story', 'B', '30 s') AS t")).rows[0].t);
	say(`  B: lease_acquire('story', 'B', '30 s') -> token ${tB} (took over the expired lease)`);
	const write = async (c, who, t) => {
		try {
			await c.query('UPDATE story_files SET body = $1, fence = fencing.fence_advance(fence, $2) WHERE id = 1', [who, t.toString()]);
			say(`    ${who}: UPDATE story_files ... fence_advance(fence, ${t}) -> accepted`);
			return true;
		} catch (e) {
			say(`    ${who}: UPDATE story_files ... fence_advance(fence, ${t}) -> ERROR ${e.code}: ${e.message}`);
			return false;
		}
	};
	const bOk = await write(B, 'B', tB);
	say('  A resumes and writes with its token');
	const aOk = await write(A, 'A (expired)', tA);
	const body = (await A.query('SELECT body FROM story_files WHERE id = 1')).rows[0].body;
	say(`  story_files.body -> ${body}`);
	await A.query(`DROP TABLE story_files; DELETE FROM fencing.leases WHERE name = 'story'`);
	await A.end();
	await B.end();
	const fenced = tB > tA && bOk && !aOk && body === 'B';
	say(`  => ${fenced ? "a fence: B's token is larger, A's stale write is refused (LF001) and changes nothing" : 'unexpected: the story did not unfold as described'}`);
	return fenced;
}

(async () => {
	const r = await redisStory();
	say('');
	const f = await fencingStory();
	process.exit(r && f ? 0 : 1);
})().catch((e) => {
	say(`story.js: ${e && e.stack || e}`);
	process.exit(2);
});
