import { describe, expect, it } from 'vitest';
import { parseCli, UsageError } from '../../../src/cli/args.js';

const url = 'postgres://u@h/db';

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
    expect(parseCli(['inspect', 'abc', '--database-url', url], {})).toEqual({
      command: 'inspect',
      databaseUrl: url,
      storageKey: 'abc',
      json: false,
    });
    expect(parseCli(['inspect', '--json', 'abc'], { DATABASE_URL: url })).toMatchObject({
      storageKey: 'abc',
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
      parseCli(['inspect', 'k', '--redis-url', 'redis://h', '--prefix', 'p:'], {
        DATABASE_URL: url,
      }),
    ).toEqual({
      command: 'inspect',
      redisUrl: 'redis://h',
      prefix: 'p:',
      storageKey: 'k',
      json: false,
    });
  });

  it('returns help for -h whatever else is given', () => {
    // Act / Assert
    expect(parseCli(['-h'], {})).toEqual({ command: 'help' });
    expect(parseCli(['purge', '--help'], {})).toEqual({ command: 'help' });
  });

  it.each([
    [[], /missing command/],
    [['frob'], /unknown command 'frob' \(expected migrate, purge, inspect or stats\)/],
    [['migrate'], /missing --database-url/],
    [['migrate', '--database-url', url, 'extra'], /unexpected argument 'extra'/],
    [['migrate', '--database-url', url, '--limit', '5'], /purge only/],
    [['purge', '--database-url', url, '--limit=-1'], /--limit must be a positive integer/],
    [['purge', '--database-url', url, '--batches', '1.5'], /--batches must be a positive integer/],
    [['purge', '--database-url', url, '--nope'], /nope/],
    [['purge', '--database-url'], /database-url/],
    [['inspect', '--database-url', url], /inspect needs the storage key/],
    [['inspect', 'k', 'extra', '--database-url', url], /unexpected argument 'extra'/],
    [['stats', 'k', '--database-url', url], /unexpected argument 'k'/],
    [['migrate', '--json', '--database-url', url], /--json applies to inspect and stats only/],
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
    [['stats'], /missing --database-url \(or set DATABASE_URL\), --sqlite or --redis-url/],
    [['stats', '--limit', '5', '--database-url', url], /purge only/],
  ])('refuses %j with a UsageError', (argv, message) => {
    // Act
    const attempt = () => parseCli(argv as string[], {});
    // Assert
    expect(attempt).toThrow(UsageError);
    expect(attempt).toThrow(message);
  });
});
