/**
 * The Lua scripts the Redis store runs, each loaded once per process (its SHA1 computed at import), so
 * that every call is an `EVALSHA` and no call hashes a source.
 * @module
 */
import { completeClaimMany } from './complete-claim-script.js';
import { loadScript } from './script-runner.js';
import {
  claim,
  claimMany,
  complete,
  completeMany,
  extend,
  get,
  inspect,
  loadSteps,
  release,
  remove,
  saveStep,
} from './scripts.gen.js';

/** Every script of the store, by the call it serves. */
export const scripts = {
  claim: loadScript(claim),
  claimMany: loadScript(claimMany),
  complete: loadScript(complete),
  completeMany: loadScript(completeMany),
  completeClaimMany: loadScript(completeClaimMany),
  release: loadScript(release),
  extend: loadScript(extend),
  get: loadScript(get),
  inspect: loadScript(inspect),
  remove: loadScript(remove),
  saveStep: loadScript(saveStep),
  loadSteps: loadScript(loadSteps),
} as const;
