/**
 * Child of the purge test: while the parent purges in a loop, claims live leases, leaves dead leases and
 * short-lived outcomes behind, takes over dead keys, and checks after every step that each live lease it
 * holds is still there (its token can extend it). Reports every violation.
 * @module
 */
import { setImmediate } from 'node:timers/promises';
import { isStoreUnavailableError } from '../../../src/index.js';
import { sqliteStore } from '../../../src/sqlite/index.js';
import { barrier, report } from './children.js';

const [file, name, rounds] = process.argv.slice(2) as [string, string, string];
const store = sqliteStore({ database: file });
const held = new Map<string, number>();
const deadUntil = new Map<string, number>();
const violations: string[] = [];
let claims = 0;

let busy = 0;

// SQLite's busy handler is not fair: under this much write load a writer can wait past the busy timeout
// and get StoreUnavailableError, as a user would (fail closed). Such a call changed nothing: retry it.
async function retrying<T>(operation: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (!isStoreUnavailableError(error) || attempt === 5) throw error;
      busy++;
    }
  }
}

async function claim(key: string, leaseMs: number): Promise<number | undefined> {
  claims++;
  const result = await retrying(() => store.claim(key, { fingerprint: 'fp', leaseMs }));
  return result.claimed ? result.token : undefined;
}

async function checkHeld(): Promise<void> {
  for (const [key, token] of held) {
    if (!(await retrying(() => store.extend(key, token, 60_000)))) {
      violations.push(`live lease ${key} lost its record`);
    }
  }
}

await barrier();
for (let i = 0; i < Number(rounds); i++) {
  // A live lease, which purge must never touch.
  const live = `${name}:live:${i}`;
  const token = await claim(live, 60_000);
  if (token === undefined) violations.push(`fresh key ${live} not claimed`);
  else held.set(live, token);
  // A lease that dies at once and an outcome whose retention ends at once: purge fodder.
  const dead = `${name}:dead:${i}`;
  if ((await claim(dead, 1)) !== undefined) deadUntil.set(dead, Date.now() + 1);
  const done = `${name}:done:${i}`;
  const doneToken = await claim(done, 60_000);
  if (doneToken !== undefined) {
    await retrying(() => store.complete(done, doneToken, Buffer.from('x'), 1));
  }
  // Take over (or re-create, if purge got there first) a key that died a few rounds ago: live again.
  if (i >= 5) {
    const again = `${name}:dead:${i - 5}`;
    // On a fast disk five rounds can take under a millisecond: wait until that lease is really over.
    while (Date.now() <= (deadUntil.get(again) ?? 0)) await setImmediate();
    const takeover = await claim(again, 60_000);
    if (takeover === undefined) violations.push(`dead key ${again} not claimable`);
    else held.set(again, takeover);
  }
  if (i % 25 === 0) await checkHeld();
}
await checkHeld();
await store.close();
report({ violations, claims, busy, held: held.size });
