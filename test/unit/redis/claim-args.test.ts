import { describe, expect, it } from 'vitest';
import { redisStore } from '../../../src/redis/index.js';

// The arguments the store sends to claim-2.lua and claim-many-n.lua (and the combined script), without a
// server: a structural node-redis stand-in records every command and answers a won claim per item.
type Args = ReadonlyArray<string | Buffer>;

function recordingStore() {
  const sent: Args[] = [];
  const client = {
    sendCommand: async (args: Args) => {
      sent.push(args);
      const keyCount = Number(args[2]);
      // A single claim: its record key and its steps key.
      if (keyCount === 2 && String(args[4]) === `${String(args[3])}:s`) return 1_000_000;
      // The combined script (the tests' only completion key is 'done'): its first ARGV is the number of
      // completions. Each claim of a batch sends two keys (its record's, then its steps').
      if (String(args[3]).includes('done')) {
        const completes = Number(args[3 + keyCount]);
        const claims = Array.from({ length: (keyCount - completes) / 2 }, () => 1_000_000);
        return [Array.from({ length: completes }, () => 1), claims];
      }
      return Array.from({ length: keyCount / 2 }, () => 1_000_000);
    },
  };
  const store = redisStore({ client, prefix: 'p:', checkEvictionPolicy: false });
  /** The script's ARGV of the last call (after EVALSHA, sha, numkeys and the keys). */
  const argv = () => {
    const args = sent.at(-1) ?? [];
    return args.slice(3 + Number(args[2])).map(String);
  };
  return { store, sent, argv };
}

describe('redis claim arguments', () => {
  it('sends a single claim its fingerprint, lease and reservation, 0 when none is asked', async () => {
    // Arrange
    const { store, argv } = recordingStore();
    // Act + Assert
    await store.claim('k', { fingerprint: 'fp', leaseMs: 1000, reserveMs: 86_400_000 });
    expect(argv()).toEqual(['fp', '1000', '86400000']);
    await store.claim('k', { fingerprint: 'fp', leaseMs: 1000 });
    expect(argv()).toEqual(['fp', '1000', '0']);
    await store.claim('k', { fingerprint: 'fp', leaseMs: 999.2, reserveMs: 1500.5 });
    expect(argv()).toEqual(['fp', '1000', '1501']);
  });

  it('sends one (lease, reservation) pair for a batch that shares them, else one pair per item', async () => {
    // Arrange
    const { store, argv } = recordingStore();
    const keys = ['a', 'b', 'c'];
    // Act + Assert: shared, n + 2 arguments.
    await store.claimMany(
      keys.map((key) => ({ key, fingerprint: `f${key}`, leaseMs: 1000, reserveMs: 5000 })),
    );
    expect(argv()).toEqual(['fa', 'fb', 'fc', '1000', '5000']);
    // Same leases, different reservations: per item, 3n arguments.
    await store.claimMany(
      keys.map((key, i) => ({ key, fingerprint: `f${key}`, leaseMs: 1000, reserveMs: i * 100 })),
    );
    expect(argv()).toEqual(['fa', 'fb', 'fc', '1000', '0', '1000', '100', '1000', '200']);
    // Different leases, one reservation (absent for all): per item too.
    await store.claimMany(keys.map((key, i) => ({ key, fingerprint: 'f', leaseMs: 1000 + i })));
    expect(argv()).toEqual(['f', 'f', 'f', '1000', '0', '1001', '0', '1002', '0']);
    // Two items: the layouts (4 and 6 arguments) never meet.
    await store.claimMany([
      { key: 'a', fingerprint: 'f', leaseMs: 1000, reserveMs: 9000 },
      { key: 'b', fingerprint: 'f', leaseMs: 1000 },
    ]);
    expect(argv()).toEqual(['f', 'f', '1000', '9000', '1000', '0']);
  });

  it('sends each claim its steps key after the record keys, for a takeover to keep the steps alive', async () => {
    // Arrange
    const { store, sent } = recordingStore();
    const keysOf = () => {
      const args = sent.at(-1) ?? [];
      return args.slice(3, 3 + Number(args[2])).map(String);
    };
    // Act + Assert: a single claim (claim-2.lua), then a batch (claim-many-n.lua: KEYS[i], KEYS[n+i]).
    await store.claim('k', { fingerprint: 'fp', leaseMs: 1000 });
    expect(keysOf()).toEqual(['p:{k}', 'p:{k}:s']);
    await store.claimMany(['a', 'b', 'c'].map((key) => ({ key, fingerprint: 'f', leaseMs: 1000 })));
    expect(keysOf()).toEqual(['p:{a}', 'p:{b}', 'p:{c}', 'p:{a}:s', 'p:{b}:s', 'p:{c}:s']);
  });

  it('passes the claims of the combined script in the same layout, a single claim included', async () => {
    // Arrange
    const { store, sent } = recordingStore();
    // Act
    const result = await store.completeAndClaimMany(
      [{ key: 'done', token: 7, outcome: Uint8Array.of(1), retentionMs: 3000 }],
      [{ key: 'next', fingerprint: 'fp', leaseMs: 1000, reserveMs: 3000 }],
    );
    // Assert: KEYS = the completion's key, then the claim's, then the claim's steps key; ARGV = the split,
    // complete-many's arguments (token, outcome, retention), then claim-many's for n = 1 (fingerprint,
    // lease, reservation).
    const args = sent.at(-1) ?? [];
    expect(args.slice(2, 6).map(String)).toEqual(['3', 'p:{done}', 'p:{next}', 'p:{next}:s']);
    expect(args.slice(6, 9).map(String)).toEqual(['1', '3', '7']);
    expect(args.slice(10).map(String)).toEqual(['3000', 'fp', '1000', '3000']);
    expect(result.claimed[0]?.claimed).toBe(true);
  });

  it('refuses a negative or non-finite reserveMs with InvalidOptionsError, sending nothing', async () => {
    // Arrange
    const { store, sent } = recordingStore();
    // Act + Assert
    for (const reserveMs of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(
        store.claim('k', { fingerprint: 'fp', leaseMs: 1000, reserveMs }),
      ).rejects.toMatchObject({ code: 'invalid_options' });
      await expect(
        store.claimMany([
          { key: 'a', fingerprint: 'fp', leaseMs: 1000 },
          { key: 'b', fingerprint: 'fp', leaseMs: 1000, reserveMs },
        ]),
      ).rejects.toMatchObject({ code: 'invalid_options' });
    }
    expect(sent).toEqual([]);
  });
});
