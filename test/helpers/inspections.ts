/**
 * Inspection fixtures for the CLI report tests: what `inspectKey` / `listCrashedKeys` return for a
 * crashed claim, with one recorded step.
 */
import type { KeyInspection } from '../../src/index.js';

/** A crashed key at `now`: its lease ended 10 s ago, reserved for its request for another hour. */
export function crashedInspection(storageKey: string, now: number): KeyInspection {
  return {
    storageKey,
    state: 'crashed',
    now,
    source: 'inspect',
    record: {
      status: 'in_progress',
      fingerprint: 'fp',
      token: 7,
      attempt: 1,
      createdAt: now - 40_000,
      leaseUntil: now - 10_000,
      reservedUntil: now + 3_600_000,
      steps: { charge: Uint8Array.of(1, 2, 3) },
    },
  };
}
