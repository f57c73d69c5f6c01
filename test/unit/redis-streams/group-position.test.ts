import { describe, expect, it } from 'vitest';
import { lastDeliveredId } from '../../../src/redis-streams/group-position.js';

/** A client whose every command answers `reply` (or rejects with it, when an Error). */
const answering = (reply: unknown) => ({
  sendCommand: async () => {
    if (reply instanceof Error) throw reply;
    return reply;
  },
});

const group = (name: string, last: string) => [
  'name',
  name,
  'consumers',
  1,
  'pending',
  0,
  'last-delivered-id',
  last,
];

describe('lastDeliveredId', () => {
  it("reads the group's last-delivered id from RESP2 pairs, among other groups", async () => {
    const reply = [group('other', '9-0'), group('workers', '5-1')];
    expect(await lastDeliveredId(answering(reply), 's', 'workers')).toBe('5-1');
  });

  it('reads RESP3 maps and objects, and ids as Buffers', async () => {
    const map = new Map<unknown, unknown>([
      ['name', Buffer.from('workers')],
      ['last-delivered-id', Buffer.from('7-0')],
    ]);
    expect(await lastDeliveredId(answering([map]), 's', 'workers')).toBe('7-0');
    const object = { name: 'workers', 'last-delivered-id': '8-2' };
    expect(await lastDeliveredId(answering([object]), 's', 'workers')).toBe('8-2');
  });

  it('knows nothing of a group that delivered nothing, is missing, or cannot be read', async () => {
    expect(await lastDeliveredId(answering([group('workers', '0-0')]), 's', 'workers')).toBe(
      undefined,
    );
    expect(await lastDeliveredId(answering([group('other', '3-0')]), 's', 'workers')).toBe(
      undefined,
    );
    expect(await lastDeliveredId(answering(new Error('NOPERM')), 's', 'workers')).toBe(undefined);
    expect(await lastDeliveredId(answering('OK'), 's', 'workers')).toBe(undefined);
  });
});
