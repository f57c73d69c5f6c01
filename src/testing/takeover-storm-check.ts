/**
 * The conformance check on the takeover storm (`takeover-storm.ts`): across OS processes, exactly one
 * winner per key in each generation of takeovers, tokens that grow from one generation to the next, and
 * crashed holders fenced out once their lease has ended.
 * @module
 */
import assert from 'node:assert/strict';
import type { CrossProcessOptions } from './claim-storm.js';
import { runTakeoverStorm, type TakeoverStormResult } from './takeover-storm.js';

/** Judge a takeover storm's result; throws on the first violation, naming the generation and key. */
export function assertTakeoverStorm(result: TakeoverStormResult): void {
  assert.deepEqual(result.errors, [], 'no claim or completion of the takeover storm failed');
  let previous: Map<string, number[]> | undefined;
  for (const [index, generation] of result.generations.entries()) {
    const what = index === 0 ? 'claims of absent keys' : `takeover generation ${index}`;
    const multiple = [...generation.winners].filter(([, tokens]) => tokens.length !== 1);
    if (multiple.length > 0 && generation.durationMs >= result.leaseMs) {
      assert.fail(
        `${what} took ${Math.round(generation.durationMs)} ms, longer than the ${result.leaseMs} ms lease, ` +
          'so a key may rightly have been taken over twice: raise `crossProcess.takeovers.leaseMs`',
      );
    }
    assert.deepEqual(
      multiple.map(([key, tokens]) => `${key}: ${tokens.length} winners`),
      [],
      `exactly one winner per key among the ${what} of several processes: take a dead record over ` +
        'in one atomic operation of the backend (an in-process lock or a read, then a write, is not ' +
        'one across processes)',
    );
    if (previous !== undefined) {
      for (const [key, [token]] of generation.winners) {
        const [before] = previous.get(key) ?? [];
        assert.ok(
          token !== undefined && before !== undefined && token > before,
          `${what}: the takeover of ${key} got token ${token}, not above the crashed holder's ${before}: ` +
            "tokens strictly increase per key (rule 3), whichever process's store instance issues them",
        );
      }
    }
    const accepted = generation.staleCompletes.filter((completion) => completion.ok);
    assert.deepEqual(
      accepted.map(({ key, token }) => `${key} (token ${token})`),
      [],
      `${what}: a crashed holder completed after its lease had ended and other processes were taking ` +
        'the key over (rule 4: an expired lease is lost, and the store judges it atomically)',
    );
    previous = generation.winners;
  }
  const refused = result.finalCompletes.filter((completion) => !completion.ok);
  assert.deepEqual(
    refused.map(({ key, token }) => `${key} (token ${token})`),
    [],
    'the holders of the last generation complete their keys',
  );
  assert.equal(
    result.finalCompletes.length,
    result.generations.at(-1)?.winners.size ?? 0,
    'every key has a holder to complete it',
  );
}

/** Run the takeover storm of `options` (unless `takeovers: false`) on keys under `prefix`, and judge it. */
export async function checkTakeoverStorm(
  options: CrossProcessOptions,
  prefix: string,
): Promise<void> {
  const storm = options.takeovers === false ? undefined : (options.takeovers ?? {});
  if (storm === undefined) return;
  const keys = Array.from({ length: storm.keys ?? 16 }, (_, i) => `${prefix}${i}`);
  assertTakeoverStorm(await runTakeoverStorm(options, keys, storm));
}
