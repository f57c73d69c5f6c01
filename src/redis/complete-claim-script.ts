/**
 * The script behind the Redis store's `completeAndClaimMany`: `complete-many-n.lua`, then
 * `claim-many-n.lua`, in one call. It is composed from the two files rather than written a third time, so
 * the two batch paths and the combined one can never drift apart: each source becomes a local function
 * whose parameters shadow `KEYS` and `ARGV`, and a short prologue hands each function its share.
 * @module
 */

import type { ScriptSource } from './script-runner.js';
import { claimMany, completeMany } from './scripts.gen.js';

/**
 * Wrap a variadic script's source as a Lua function of its own `KEYS` and `ARGV`. The sources end with a
 * `return`, which is legal as the last statement of a function body, and declare their locals inside it.
 */
function asFunction(name: string, source: string): string {
  return `local ${name} = function(KEYS, ARGV)\n${source}\nend\n`;
}

/**
 * `complete-claim-many` (variadic):
 *
 * KEYS[1..c]     the completions' record keys, then the claims' record keys, then the claims' steps keys
 * ARGV[1]        c, the number of completions
 * ARGV[2]        a, the number of complete-many-n.lua's arguments
 * ARGV[3..a+2]   complete-many-n.lua's arguments; the rest are claim-many-n.lua's
 *
 * Returns `{ complete-many's reply, claim-many's reply }`.
 */
export const completeClaimMany: ScriptSource = {
  source: [
    '-- complete-claim-many: complete-many-n.lua, then claim-many-n.lua, in one call (composed by',
    '-- src/redis/complete-claim-script.ts; see there for KEYS and ARGV).',
    asFunction('completeMany', completeMany.source),
    asFunction('claimMany', claimMany.source),
    'local completeCount, completeArgCount = tonumber(ARGV[1]), tonumber(ARGV[2])',
    'local completeKeys, completeArgs, claimKeys, claimArgs = {}, {}, {}, {}',
    'for i = 1, completeCount do completeKeys[i] = KEYS[i] end',
    'for i = completeCount + 1, #KEYS do claimKeys[i - completeCount] = KEYS[i] end',
    'for i = 1, completeArgCount do completeArgs[i] = ARGV[i + 2] end',
    'for i = completeArgCount + 3, #ARGV do claimArgs[i - completeArgCount - 2] = ARGV[i] end',
    'return { completeMany(completeKeys, completeArgs), claimMany(claimKeys, claimArgs) }',
    '',
  ].join('\n'),
  numberOfKeys: null,
};
