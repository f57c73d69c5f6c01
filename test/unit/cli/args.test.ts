import { describe, expect, it } from 'vitest';
import { parseCli, UsageError } from '../../../src/cli/args.js';
import { HELP } from '../../../src/cli/global-help.js';
import { separatedStorageKey, storageKey } from '../../../src/core/key.js';

const url = 'postgres://u@h/db';
/** A storage key as `inspect` takes it: 64 lowercase hex digits. */
const key = 'ab'.repeat(32);

describe('parseCli', () => {
  it('parses migrate with schema and table', () => {
    // Act
    const command = parseCli(
      ['migrate', '--database-url', url, '--schema', 's', '--table', 't'],
      {},
    );
    // Assert
    expect(command).toEqual({ command: 'migrate', databaseUrl: url, schema: 's', table: 't' });
  });

  it('reads DATABASE_URL when --database-url is absent', () => {
    // Act
    const command = parseCli(['purge'], { DATABASE_URL: url });
    // Assert
    expect(command).toEqual({
      command: 'purge',
      databaseUrl: url,
      limit: 1000,
      batches: Number.MAX_SAFE_INTEGER,
    });
  });

  it('parses purge limits', () => {
    // Act
    const command = parseCli(
      ['purge', '--database-url', url, '--limit', '50', '--batches', '3'],
      {},
    );
    // Assert
    expect(command).toMatchObject({ limit: 50, batches: 3 });
  });

  it('parses inspect with its storage key, and stats, each with --json', () => {
    // Act / Assert
    expect(parseCli(['inspect', key, '--database-url', url], {})).toEqual({
      command: 'inspect',
      databaseUrl: url,
      storageKey: key,
      json: false,
    });
    expect(parseCli(['inspect', '--json', key], { DATABASE_URL: url })).toMatchObject({
      storageKey: key,
      json: true,
    });
    expect(parseCli(['stats', '--json', '--table', 't'], { DATABASE_URL: url })).toEqual({
      command: 'stats',
      databaseUrl: url,
      table: 't',
      json: true,
    });
  });

  it('names SQLite or Redis instead of PostgreSQL, ignoring DATABASE_URL then', () => {
    // Act / Assert
    expect(parseCli(['stats', '--sqlite', 'x.db', '--table', 't'], { DATABASE_URL: url })).toEqual({
      command: 'stats',
      sqliteFile: 'x.db',
      table: 't',
      json: false,
    });
    expect(parseCli(['purge', '--sqlite', 'x.db'], {})).toMatchObject({ sqliteFile: 'x.db' });
    expect(
      parseCli(['inspect', key, '--redis-url', 'redis://h', '--prefix', 'p:'], {
        DATABASE_URL: url,
      }),
    ).toEqual({
      command: 'inspect',
      redisUrl: 'redis://h',
      prefix: 'p:',
      storageKey: key,
      json: false,
    });
    expect(
      parseCli(
        ['stats', '--redis-url', 'redis://h:7000', '--redis-cluster', '--redis-client', 'ioredis'],
        {},
      ),
    ).toEqual({
      command: 'stats',
      redisUrl: 'redis://h:7000',
      redisCluster: true,
      redisClient: 'ioredis',
      json: false,
    });
  });

  it('parses list --crashed with its page size and start, on every store', () => {
    // Act / Assert
    expect(parseCli(['list', '--crashed'], { DATABASE_URL: url })).toEqual({
      command: 'list',
      databaseUrl: url,
      crashed: true,
      limit: 100,
      json: false,
    });
    expect(
      parseCli(['list', '--crashed', '--limit', '5', '--after', 'k1', '--sqlite', 'x.db'], {}),
    ).toEqual({
      command: 'list',
      sqliteFile: 'x.db',
      crashed: true,
      limit: 5,
      after: 'k1',
      json: false,
    });
    expect(
      parseCli(
        [
          'list',
          '--json',
          '--crashed',
          '--redis-url',
          'redis://h',
          '--prefix',
          'p:',
          '--after',
          '0:96:k',
        ],
        {},
      ),
    ).toEqual({
      command: 'list',
      redisUrl: 'redis://h',
      prefix: 'p:',
      crashed: true,
      limit: 100,
      after: '0:96:k',
      json: true,
    });
  });

  it('parses health on every store, and --timeout as a duration or a number of ms on any command', () => {
    // Act / Assert
    expect(
      parseCli(['health', '--redis-url', 'redis://h', '--timeout', '500ms', '--json'], {}),
    ).toEqual({
      command: 'health',
      redisUrl: 'redis://h',
      timeoutMs: 500,
      json: true,
    });
    expect(parseCli(['health'], { DATABASE_URL: url })).toEqual({
      command: 'health',
      databaseUrl: url,
      json: false,
    });
    expect(parseCli(['stats', '--sqlite', 'x.db', '--timeout', '2s'], {})).toMatchObject({
      timeoutMs: 2000,
    });
    expect(parseCli(['migrate', '--database-url', url, '--timeout', '1500'], {})).toMatchObject({
      timeoutMs: 1500,
    });
  });

  it("derives inspect's storage key from --key, --namespace and --scope as the engine does", () => {
    // Act
    const consumer = parseCli(
      [
        'inspect',
        '--key',
        'msg-7',
        '--namespace',
        'shipping',
        '--scope',
        'consumer:ship',
        '--json',
      ],
      { DATABASE_URL: url },
    );
    const plain = parseCli(['inspect', '--key', 'order-42', '--sqlite', 'x.db'], {});
    // Assert
    expect(consumer).toEqual({
      command: 'inspect',
      databaseUrl: url,
      storageKey: storageKey('shipping', 'consumer:ship', 'msg-7'),
      derived: { namespace: 'shipping', scope: 'consumer:ship' },
      json: true,
    });
    expect(plain).toMatchObject({
      storageKey: storageKey('default', '', 'order-42'),
      derived: { namespace: 'default', scope: '' },
    });
  });

  it("derives an HTTP route's key with --http, as the middleware keys a reserved-looking scope", () => {
    // Act
    const http = parseCli(
      [
        'inspect',
        '--key',
        'order-42',
        '--namespace',
        'payments',
        '--scope',
        'consumer:acme',
        '--http',
      ],
      { DATABASE_URL: url },
    );
    const plainScope = parseCli(
      ['inspect', '--key', 'order-42', '--scope', 'acme', '--http', '--sqlite', 'x.db'],
      {},
    );
    // Assert: apart from consumer acme's records; any other scope keyed as without --http.
    expect(http).toEqual({
      command: 'inspect',
      databaseUrl: url,
      storageKey: separatedStorageKey('payments', 'http', 'consumer:acme', 'order-42'),
      derived: { namespace: 'payments', scope: 'consumer:acme', http: true },
      json: false,
    });
    expect(http).not.toMatchObject({
      storageKey: storageKey('payments', 'consumer:acme', 'order-42'),
    });
    expect(plainScope).toMatchObject({
      storageKey: storageKey('default', 'acme', 'order-42'),
      derived: { namespace: 'default', scope: 'acme', http: true },
    });
  });

  it.each([
    [['inspect', key, '--http', '--sqlite', 'x.db'], /--http applies with --key only/],
    [['stats', '--http', '--sqlite', 'x.db'], /--http applies to inspect --key only/],
    [['inspect', '--key', 'k', '--http=yes', '--sqlite', 'x.db'], /http/],
  ])('refuses %j', (argv, message) => {
    // Act / Assert
    expect(() => parseCli(argv, {})).toThrow(UsageError);
    expect(() => parseCli(argv, {})).toThrow(message);
  });

  it('parses --lock-timeout and --lock-retries on migrate, as migrate()’s lockTimeoutMs and lockRetries', () => {
    // Act / Assert
    expect(
      parseCli(['migrate', '--lock-timeout', '500ms', '--lock-retries', '0'], {
        DATABASE_URL: url,
      }),
    ).toEqual({ command: 'migrate', databaseUrl: url, lockTimeoutMs: 500, lockRetries: 0 });
    expect(parseCli(['migrate', '--database-url', url, '--lock-timeout', '3s'], {})).toEqual({
      command: 'migrate',
      databaseUrl: url,
      lockTimeoutMs: 3000,
    });
    expect(parseCli(['migrate', '--database-url', url], {})).toEqual({
      command: 'migrate',
      databaseUrl: url,
    });
  });

  it('rounds --lock-timeout up to whole ms, as lock_timeout takes it (migrate() refuses a fraction)', () => {
    // Act / Assert
    expect(parseCli(['migrate', '--database-url', url, '--lock-timeout', '1.5'], {})).toEqual({
      command: 'migrate',
      databaseUrl: url,
      lockTimeoutMs: 2,
    });
  });

  it.each([
    [
      ['migrate', '--database-url', url, '--lock-timeout', 'soon'],
      /--lock-timeout: 'soon' is not a duration/,
    ],
    [
      ['migrate', '--database-url', url, '--lock-timeout', '0'],
      /--lock-timeout: must be a positive duration/,
    ],
    [
      ['migrate', '--database-url', url, '--lock-retries=-1'],
      /--lock-retries must be a whole number/,
    ],
    [
      ['migrate', '--database-url', url, '--lock-retries', '1.5'],
      /--lock-retries must be a whole number/,
    ],
    [
      ['migrate', '--database-url', url, '--lock-retries', '01'],
      /--lock-retries must be a whole number/,
    ],
    [['migrate', '--sqlite', 'x.db', '--lock-timeout', '1s'], /apply to PostgreSQL only/],
    [['purge', '--database-url', url, '--lock-retries', '2'], /apply to migrate only/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseCli(argv, {})).toThrow(UsageError);
    expect(() => parseCli(argv, {})).toThrow(message);
  });

  it('parses --statement-timeout on the PostgreSQL commands but health', () => {
    // Act / Assert
    expect(
      parseCli(['purge', '--database-url', url, '--statement-timeout', '2m'], {}),
    ).toMatchObject({ command: 'purge', statementTimeoutMs: 120_000 });
    expect(parseCli(['migrate', '--statement-timeout', '500'], { DATABASE_URL: url })).toEqual({
      command: 'migrate',
      databaseUrl: url,
      statementTimeoutMs: 500,
    });
    expect(parseCli(['stats', '--database-url', url], {})).not.toHaveProperty('statementTimeoutMs');
  });

  it.each([
    ['a client key', 'order-42'],
    ['upper-case hex', 'AB'.repeat(32)],
    ['hex one digit short', 'a'.repeat(63)],
    ['a key_hash with a prefix', `sha256:${key}`],
  ])(
    'refuses inspect with %s, saying what a storage key is and where to get one',
    (_what, given) => {
      // Act
      const parse = () => parseCli(['inspect', given, '--sqlite', 'x.db'], {});
      // Assert: looked up as is, it would be reported absent whatever the key's state
      expect(parse).toThrow(UsageError);
      expect(parse).toThrow(
        `inspect takes a storage key, not "${given}": the 64 lowercase hex digits`,
      );
      expect(parse).toThrow(/idempotency\.key_hash .*storageKeyFor\(key, scope\)/);
    },
  );

  it('names, in the help for --redis-url, every command that takes a Redis store', () => {
    // Arrange: the commands the parser accepts --redis-url for
    const accepted = ['migrate', 'purge', 'inspect', 'stats', 'list', 'health'].filter(
      (command) => {
        const extra = command === 'inspect' ? [key] : command === 'list' ? ['--crashed'] : [];
        try {
          parseCli([command, ...extra, '--redis-url', 'redis://127.0.0.1:6379'], {});
          return true;
        } catch {
          return false;
        }
      },
    );
    // Act: the help's --redis-url entry, up to the next option
    const entry = /--redis-url <url>[\s\S]*?(?=\n\n|\n {2}--)/.exec(HELP)?.[0] ?? '';
    // Assert
    expect(accepted).toEqual(['inspect', 'stats', 'list', 'health']);
    for (const command of accepted) expect(entry, command).toContain(command);
  });

  it.each([
    [['stats', '--sqlite', 'a.db', '--sqlite', 'b.db'], '--sqlite'],
    [['purge', '--database-url', url, '--schema', 'billing', '--schema', 'public'], '--schema'],
    [['list', '--crashed', '--crashed', '--sqlite', 'a.db'], '--crashed'],
  ])('refuses an option given twice (%j): the last value would win in silence', (argv, option) => {
    // Act / Assert
    expect(() => parseCli(argv, {})).toThrow(UsageError);
    expect(() => parseCli(argv, {})).toThrow(`${option} is given more than once`);
  });

  it('returns help for -h whatever else is given; after a command, that command’s help', () => {
    // Act / Assert
    expect(parseCli(['-h'], {})).toEqual({ command: 'help' });
    expect(parseCli(['purge', '--help'], {})).toEqual({ command: 'help', topic: 'purge' });
  });

  it.each([[['help']], [['help', '--json']]])(
    'returns help for the help command (%j), as for --help: it used to be an unknown command',
    (argv) => {
      // Act / Assert
      expect(parseCli(argv, {})).toEqual({ command: 'help' });
    },
  );

  it.each([
    [[], /missing command/],
    [
      ['frob'],
      /unknown command 'frob' \(expected migrate, purge, inspect, stats, list or health\)/,
    ],
    [['migrate'], /missing --database-url/],
    [['migrate', '--database-url', url, 'extra'], /unexpected argument 'extra'/],
    [['migrate', '--database-url', url, '--limit', '5'], /--limit applies to purge and list only/],
    [['purge', '--database-url', url, '--limit=-1'], /--limit must be a positive integer/],
    [['purge', '--database-url', url, '--batches', '1.5'], /--batches must be a positive integer/],
    [['purge', '--database-url', url, '--nope'], /nope/],
    [['purge', '--database-url'], /database-url/],
    [['inspect', '--database-url', url], /inspect needs the storage key/],
    [['inspect', key, '--key', 'k', '--database-url', url], /a storage key or --key, not both/],
    [
      ['inspect', key, '--scope', 's', '--database-url', url],
      /--namespace and --scope apply with --key only/,
    ],
    [
      ['inspect', '--key', 'x'.repeat(256), '--database-url', url],
      /--key must be at most 255 characters/,
    ],
    [
      ['inspect', '--key', 'caf\u00e9', '--database-url', url],
      /--key must contain only printable ASCII/,
    ],
    [
      ['stats', '--key', 'k', '--database-url', url],
      /--key, --namespace and --scope apply to inspect only/,
    ],
    [['inspect', 'k', 'extra', '--database-url', url], /unexpected argument 'extra'/],
    [['stats', 'k', '--database-url', url], /unexpected argument 'k'/],
    [
      ['migrate', '--json', '--database-url', url],
      /--json applies to inspect, stats, list and health only/,
    ],
    [
      ['health', '--redis-url', 'redis://h', '--timeout', 'soon'],
      /--timeout: 'soon' is not a duration/,
    ],
    [['stats', '--sqlite', 'x.db', '--timeout', '0'], /--timeout: must be a positive duration/],
    // Past 2^31-1 ms Node fires a timer at once: every connection would "time out" immediately.
    [['stats', '--redis-url', 'redis://h', '--timeout', '30d'], /--timeout: must be at most 24 d/],
    [
      ['stats', '--sqlite', 'x.db', '--statement-timeout', '5s'],
      /--statement-timeout applies to PostgreSQL only/,
    ],
    [
      ['stats', '--redis-url', 'redis://h', '--statement-timeout', '5s'],
      /--statement-timeout applies to PostgreSQL only/,
    ],
    [
      ['health', '--database-url', url, '--statement-timeout', '5s'],
      /--statement-timeout does not apply to health/,
    ],
    [
      ['purge', '--database-url', url, '--statement-timeout', 'never'],
      /--statement-timeout: 'never' is not a duration/,
    ],
    [['health', 'k', '--sqlite', 'x.db'], /unexpected argument 'k'/],
    [['stats', '--database-url', url, '--sqlite', 'x.db'], /give one store/],
    [['stats', '--sqlite', 'x.db', '--redis-url', 'redis://h'], /give one store/],
    [['stats', '--sqlite', 'x.db', '--schema', 's'], /--schema applies to PostgreSQL only/],
    [
      ['stats', '--redis-url', 'redis://h', '--table', 't'],
      /--table applies to PostgreSQL and SQLite/,
    ],
    [['stats', '--database-url', url, '--prefix', 'p:'], /--prefix applies to Redis only/],
    [['migrate', '--redis-url', 'redis://h'], /migrate does not apply to Redis/],
    [['purge', '--redis-url', 'redis://h'], /purge does not apply to Redis/],
    [['stats', '--sqlite', 'x.db', '--redis-cluster'], /--redis-cluster applies to Redis only/],
    [
      ['stats', '--database-url', url, '--redis-client', 'ioredis'],
      /--redis-client applies to Redis only/,
    ],
    [
      ['stats', '--redis-url', 'redis://h', '--redis-client', 'redis'],
      /--redis-client must be node-redis or ioredis, got 'redis'/,
    ],
    [['stats'], /missing --database-url \(or set DATABASE_URL\), --sqlite or --redis-url/],
    [['stats', '--limit', '5', '--database-url', url], /--limit applies to purge and list only/],
    [['list', '--database-url', url], /list needs what to list: --crashed/],
    [['list', '--crashed', 'k', '--database-url', url], /unexpected argument 'k'/],
    [
      ['list', '--crashed', '--limit', '0', '--database-url', url],
      /--limit must be a positive integer/,
    ],
    [
      ['list', '--crashed', '--limit', '2x', '--sqlite', 'x.db'],
      /--limit must be a positive integer/,
    ],
    [
      ['list', '--crashed', '--after', '', '--sqlite', 'x.db'],
      /--after needs a previous page's next/,
    ],
    [['list', '--crashed', '--after', '--sqlite', 'x.db'], /after/],
    [
      ['list', '--crashed', '--batches', '2', '--sqlite', 'x.db'],
      /--batches applies to purge only/,
    ],
    [
      ['list', '--crashed', '--schema', 's', '--sqlite', 'x.db'],
      /--schema applies to PostgreSQL only/,
    ],
    [
      ['list', '--crashed', '--prefix', 'p:', '--database-url', url],
      /--prefix applies to Redis only/,
    ],
    [['list', '--crashed'], /missing --database-url/],
    [
      ['inspect', 'k', '--crashed', '--database-url', url],
      /--crashed and --after apply to list only/,
    ],
    [['stats', '--after', 'k', '--database-url', url], /--crashed and --after apply to list only/],
    [
      ['purge', '--batches', '1', '--crashed', '--database-url', url],
      /--crashed and --after apply to list only/,
    ],
  ])('refuses %j with a UsageError', (argv, message) => {
    // Act
    const attempt = () => parseCli(argv as string[], {});
    // Assert
    expect(attempt).toThrow(UsageError);
    expect(attempt).toThrow(message);
  });
});
