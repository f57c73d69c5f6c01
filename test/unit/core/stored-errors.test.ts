import { describe, expect, it } from 'vitest';
import { MAX_ERROR_MESSAGE_LENGTH } from '../../../src/core/describe-error.js';
import {
  createIdempotency,
  isReplayedError,
  memoryStore,
  type ReplayedError,
} from '../../../src/index.js';
import { ManualClock } from '../../helpers/clock.js';

function setup() {
  const clock = new ManualClock();
  const store = memoryStore({ clock });
  const idempotency = createIdempotency({ store, clock, extendLease: false, storeErrors: true });
  return { idempotency };
}

async function replayedOriginal(
  idempotency: ReturnType<typeof setup>['idempotency'],
  key: string,
): Promise<ReplayedError['original']> {
  let runs = 0;
  const replay = await idempotency
    .run({ key }, () => {
      runs++;
      return 'ran again';
    })
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  expect(runs).toBe(0);
  expect(isReplayedError(replay)).toBe(true);
  return (replay as ReplayedError).original;
}

describe('errors stored as final outcomes (storeErrors)', () => {
  it('stores a thrown null-prototype object, which String() cannot describe, instead of letting the claim expire', async () => {
    // Arrange: String(Object.create(null)) throws "Cannot convert object to primitive value".
    const { idempotency } = setup();
    const thrown = Object.assign(Object.create(null), { code: 'card_declined' });
    // Act
    await expect(idempotency.run({ key: 'null-proto' }, () => Promise.reject(thrown))).rejects.toBe(
      thrown,
    );
    // Assert: the retry replays the stored error; the handler does not run again.
    expect(await replayedOriginal(idempotency, 'null-proto')).toEqual({
      name: 'NonError',
      message: '{"code":"card_declined"}',
      code: 'card_declined',
    });
  });

  it('stores an error whose message getter throws', async () => {
    const { idempotency } = setup();
    const thrown = new Error('declined');
    Object.defineProperty(thrown, 'message', {
      get() {
        throw new Error('getter');
      },
    });
    await expect(idempotency.run({ key: 'getter' }, () => Promise.reject(thrown))).rejects.toBe(
      thrown,
    );
    expect((await replayedOriginal(idempotency, 'getter')).name).toBe('Error');
  });

  it('bounds a huge message, so one error cannot put megabytes into every record', async () => {
    const { idempotency } = setup();
    const thrown = new Error('x'.repeat(1_000_000));
    await expect(idempotency.run({ key: 'huge' }, () => Promise.reject(thrown))).rejects.toBe(
      thrown,
    );
    const original = await replayedOriginal(idempotency, 'huge');
    expect(original.message.startsWith('x'.repeat(MAX_ERROR_MESSAGE_LENGTH))).toBe(true);
    expect(original.message).toMatch(/… \[truncated, 995904 more characters\]$/);
  });

  it('keeps an Error’s own name, message and string code as before', async () => {
    const { idempotency } = setup();
    const thrown = Object.assign(new TypeError('Card declined'), { code: 'card_declined' });
    await expect(idempotency.run({ key: 'plain' }, () => Promise.reject(thrown))).rejects.toBe(
      thrown,
    );
    expect(await replayedOriginal(idempotency, 'plain')).toEqual({
      name: 'TypeError',
      message: 'Card declined',
      code: 'card_declined',
    });
  });
});
