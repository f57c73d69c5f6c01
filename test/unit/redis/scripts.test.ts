import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadScript } from '../../../src/redis/script-runner.js';
import * as generated from '../../../src/redis/scripts.gen.js';

const dir = new URL('../../../src/redis/scripts/', import.meta.url);
const files = readdirSync(dir).filter((name) => name.endsWith('.lua'));

describe('redis Lua scripts', () => {
  it.each(files)('%s has a header listing its KEYS, ARGV and return value', (name) => {
    // Arrange: <name>-<numberOfKeys>.lua, or <name>-n.lua for a batch (one key per item).
    const source = readFileSync(new URL(name, dir), 'utf8');
    const count = /-(\d+|n)\.lua$/.exec(name)?.[1];
    const header = /^--\[\[([\s\S]*?)\]\]/.exec(source)?.[1] ?? '';
    // Act
    const declaredKeys = header.match(/KEYS\[\w+\]/g) ?? [];
    const body = source.slice(header.length);
    const usedKeys = new Set(body.match(/KEYS\[\d+\]/g));
    const usedArgs = new Set(body.match(/ARGV\[\d+\]/g));
    // Assert
    expect(header).toContain(name);
    expect(header).toMatch(/Returns/);
    if (count === 'n') {
      expect(declaredKeys).toEqual(['KEYS[i]']);
      expect(header).toMatch(/ARGV\[\d?i(-\d)?\]/);
    } else {
      expect(declaredKeys).toHaveLength(Number(count));
    }
    for (const key of usedKeys) expect(header).toContain(key);
    for (const arg of usedArgs) expect(header).toContain(arg);
  });

  it('never builds key names inside a script (Cluster: every key is passed in KEYS)', () => {
    // Arrange: the key argument of every redis.call that takes one.
    const keyArguments = files.flatMap((name) =>
      [
        ...readFileSync(new URL(name, dir), 'utf8').matchAll(
          /redis\.call\('(\w+)'(?:,\s*([^,)]+))?/g,
        ),
      ]
        .filter(([, command]) => command !== 'TIME')
        .map(([, command, key]) => ({ name, command, key: key?.trim() })),
    );
    // Act
    const offenders = keyArguments.filter(({ key }) => !/^(KEYS\[\d+\]|key)$/.test(key ?? ''));
    // Assert: KEYS[n] directly, or `key`, which the batch scripts bind to KEYS[i] only.
    expect(keyArguments.length).toBeGreaterThan(10);
    expect(offenders).toEqual([]);
    for (const name of files.filter((f) => f.endsWith('-n.lua'))) {
      expect(readFileSync(new URL(name, dir), 'utf8')).toMatch(/local key = KEYS\[i\]\n/);
    }
  });

  it('formats every number it writes with string.format, never tostring (14 significant digits)', () => {
    // Arrange + Act: concatenating a number variable calls tostring(); only strings may be concatenated.
    const code = (name: string) =>
      readFileSync(new URL(name, dir), 'utf8')
        .replace(/^--\[\[[\s\S]*?\]\]/, '')
        .replace(/--.*$/gm, '');
    const offenders = files.filter((name) =>
      /tostring\(|\.\.\s*(nowMs|token|leaseUntil|attempt|expiresAt|clockToken)\b/.test(code(name)),
    );
    // Assert
    expect(offenders).toEqual([]);
  });

  it('hashes each inlined script once with SHA1, as Redis names cached scripts', () => {
    // Arrange
    const claim = generated.claim;
    // Act
    const loaded = loadScript(claim);
    // Assert
    expect(loaded.sha).toBe(createHash('sha1').update(claim.source).digest('hex'));
    expect(loaded.numberOfKeys).toBe(2);
  });
});
