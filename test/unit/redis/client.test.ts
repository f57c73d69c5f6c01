import { describe, expect, it } from 'vitest';
import { isInvalidOptionsError } from '../../../src/core/errors.js';
import { RedisClientKind, toCommander } from '../../../src/redis/client.js';

// Structural stand-ins: these tests check shape detection and argument passing only, no I/O.
function nodeRedisClient(calls: unknown[][]) {
  return {
    sendCommand: async (args: ReadonlyArray<string | Buffer>, options?: object) => {
      calls.push([args, options]);
      return 'ok';
    },
  };
}

describe('redis client detection', () => {
  it('detects a node-redis client, asks for Buffer bulk replies and leaves timeouts to the store', async () => {
    // Arrange
    const calls: unknown[][] = [];
    const commander = toCommander(nodeRedisClient(calls));
    // Act
    await commander.send('k', ['GET', 'k']);
    // Assert
    expect(commander.kind).toBe(RedisClientKind.NodeRedis);
    const [args, options] = calls[0] as [
      unknown,
      { typeMapping: Record<number, unknown>; timeout: number },
    ];
    expect(args).toEqual(['GET', 'k']);
    expect(options.typeMapping[36]).toBe(Buffer);
    // node-redis's own per-command timer is off: the store's `timeoutMs` bounds every call instead.
    expect(options.timeout).toBe(0);
  });

  it('detects a node-redis cluster and routes by the first key', async () => {
    // Arrange
    const calls: unknown[][] = [];
    const node = nodeRedisClient([]);
    const cluster = {
      masters: [{ id: 'a' }, { id: 'b' }],
      nodeClient: () => node,
      sendCommand: async (...args: unknown[]) => {
        calls.push(args);
        return 1;
      },
    };
    const commander = toCommander(cluster);
    // Act
    await commander.send('p{k}', ['DEL', 'p{k}']);
    const masters = await commander.masters();
    // Assert
    expect(commander.kind).toBe(RedisClientKind.NodeRedisCluster);
    expect(calls[0]?.slice(0, 3)).toEqual(['p{k}', false, ['DEL', 'p{k}']]);
    expect(masters).toHaveLength(2);
  });

  it('detects ioredis and its cluster client and uses callBuffer', async () => {
    // Arrange
    const calls: unknown[][] = [];
    const io = { callBuffer: async (...args: unknown[]) => calls.push(args), options: {} };
    const cluster = { ...io, isCluster: true, nodes: () => [io, io, io] };
    // Act
    const single = toCommander(io);
    const clustered = toCommander(cluster);
    await single.send('k', ['EVALSHA', 'sha', '1', 'k']);
    // Assert
    expect(single.kind).toBe(RedisClientKind.IoRedis);
    expect(clustered.kind).toBe(RedisClientKind.IoRedisCluster);
    expect(calls[0]).toEqual(['EVALSHA', ['sha', '1', 'k']]);
    expect(await clustered.masters()).toHaveLength(3);
  });

  it('refuses values that are not clients, and ioredis keyPrefix', () => {
    // Arrange
    const prefixed = { callBuffer: async () => 0, options: { keyPrefix: 'app:' } };
    // Act + Assert
    expect(() => toCommander({} as never)).toThrow(
      expect.objectContaining({ code: 'invalid_options' }),
    );
    expect(() => toCommander(null as never)).toThrow(
      expect.objectContaining({ code: 'invalid_options' }),
    );
    let error: unknown;
    try {
      toCommander(prefixed);
    } catch (e) {
      error = e;
    }
    expect(isInvalidOptionsError(error)).toBe(true);
  });
});
