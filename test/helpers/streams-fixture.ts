/**
 * The shared setup of the Redis Streams consumer tests that run against a real Redis: a run id for names
 * of their own, an admin client (node-redis, direct) to add entries and read what the consumers did, the
 * streams to delete and the cleanups to run once the file is done. Call it inside `describe`: it
 * registers the `beforeAll`/`afterAll` that open and close them.
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'redis';
import { afterAll, beforeAll } from 'vitest';
import { env, requireService } from './env.js';

/** A direct node-redis client. */
export type StreamsAdminClient = ReturnType<typeof createClient>;

const clientAt = (url: string) => createClient({ url });

/** A node-redis client connected as a user of the test's own (see `userWithoutScripts`). */
export type StreamsUserClient = ReturnType<typeof clientAt>;

/** What {@link streamsFixture} gives a test file. */
export interface StreamsFixture {
  /** A short id, unique to this file's run: put it in stream and consumer names. */
  run: string;
  /** Streams to delete after the file (push each stream a test creates, and its DLQ). */
  streams: string[];
  /** Run after the file, last pushed first (consumers to close, clients to destroy). */
  cleanups: Array<() => Promise<unknown> | unknown>;
  /** The admin client, connected from `beforeAll` on. */
  readonly admin: StreamsAdminClient;
  /** Add an entry keyed `key` (field `x-idempotency-key`) to `stream`. */
  add(stream: string, key: string): Promise<unknown>;
  /**
   * Add an entry keyed `key`, have consumer `crashed` of group `workers` read it (it stays pending, as a
   * crashed consumer leaves it), then delete it: an entry deleted while pending. Resolves to its id.
   */
  addDeletedWhilePending(stream: string, key: string): Promise<string>;
  /**
   * A client connected as ACL user `name` of this run, denied `EVAL`/`EVALSHA` (`-@scripting`): the
   * consumer's path without scripts. The user is deleted and the client destroyed after the file.
   */
  userWithoutScripts(name: string): Promise<StreamsUserClient>;
  /**
   * A client for one of the consumer's two paths: `'without scripts'`, one of {@link userWithoutScripts}
   * (user `name`), or `'with scripts'`, a plain one. Destroyed after the file.
   */
  clientFor(mode: ScriptsMode, name: string): Promise<StreamsUserClient>;
  /** How many entries of `stream` are pending in group `workers`. */
  pendingCount(stream: string): Promise<number>;
  /** Field `field` (an `x-idempotency-*` one, say) of each letter of `stream` (`${stream}:dlq`), in order. */
  letterField(stream: string, field: string): Promise<Array<string | undefined>>;
}

/** The consumer's two paths: its Lua scripts run, or Redis refuses them (an ACL user without `EVAL`). */
export type ScriptsMode = 'with scripts' | 'without scripts';

/** Register the file's setup and teardown, and return what the tests use (see the module's comment). */
export function streamsFixture(): StreamsFixture {
  let admin: StreamsAdminClient | undefined;
  const fixture: StreamsFixture = {
    run: randomUUID().slice(0, 8),
    streams: [],
    cleanups: [],
    get admin() {
      if (admin === undefined)
        throw new Error('streamsFixture: the admin client opens in beforeAll');
      return admin;
    },
    add: (stream, key) =>
      fixture.admin.sendCommand(['XADD', stream, '*', 'x-idempotency-key', key]),
    addDeletedWhilePending: async (stream, key) => {
      const id = String(await fixture.add(stream, key));
      await fixture.admin.sendCommand([
        'XREADGROUP',
        'GROUP',
        'workers',
        'crashed',
        'STREAMS',
        stream,
        '>',
      ]);
      await fixture.admin.sendCommand(['XDEL', stream, id]);
      return id;
    },
    userWithoutScripts: async (name) => {
      const { admin: root, run, cleanups } = fixture;
      await root.sendCommand(['ACL', 'SETUSER', name, 'reset', 'on', `>${run}`, '~*', '&*']);
      await root.sendCommand(['ACL', 'SETUSER', name, '+@all', '-@scripting']);
      cleanups.push(() => root.sendCommand(['ACL', 'DELUSER', name]));
      const url = new URL(env.redisUrl);
      url.username = name;
      url.password = run;
      const client = clientAt(url.toString());
      client.on('error', () => {});
      await client.connect();
      cleanups.push(() => client.destroy());
      return client;
    },
    clientFor: async (mode, name) => {
      if (mode === 'without scripts') return fixture.userWithoutScripts(name);
      const client = clientAt(env.redisUrl);
      await client.connect();
      fixture.cleanups.push(() => client.destroy());
      return client;
    },
    pendingCount: async (stream) =>
      Number(((await fixture.admin.sendCommand(['XPENDING', stream, 'workers'])) as [number])[0]),
    letterField: async (stream, field) =>
      (
        (await fixture.admin.sendCommand(['XRANGE', `${stream}:dlq`, '-', '+'])) as Array<
          [string, string[]]
        >
      ).map(([, fields]) => fields[fields.indexOf(field) + 1]),
  };
  beforeAll(async () => {
    await requireService('Redis', env.redisUrl);
    admin = createClient({ url: env.redisUrl });
    await admin.connect();
  });
  afterAll(async () => {
    for (const cleanup of fixture.cleanups.reverse()) {
      await Promise.resolve(cleanup()).catch(() => {});
    }
    if (admin === undefined) return;
    if (fixture.streams.length > 0) await admin.sendCommand(['DEL', ...fixture.streams]);
    admin.destroy();
  });
  return fixture;
}
