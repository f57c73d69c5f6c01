import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadScript } from '../../../src/redis/script-runner.js';
import * as generated from '../../../src/redis/scripts.gen.js';

const dir = new URL('../../../src/redis/scripts/', import.meta.url);
const files = readdirSync(dir).filter((name) => name.endsWith('.lua'));

describe('redis Lua scripts', () => {
  it.each(files)('%s has a header listing its KEYS, ARGV and return value', (name) => {
    // Arrange
    const source = readFileSync(new URL(name, dir), 'utf8');
    const numberOfKeys = Number(/-(\d+)\.lua$/.exec(name)?.[1]);
    const header = /^--\[\[([\s\S]*?)\]\]/.exec(source)?.[1] ?? '';
    // Act
    const declaredKeys = header.match(/KEYS\[\d+\]/g) ?? [];
    const usedKeys = new Set(source.slice(header.length).match(/KEYS\[\d+\]/g));
    const usedArgs = new Set(source.slice(header.length).match(/ARGV\[\d+\]/g));
    // Assert
    expect(header).toContain(name);
    expect(header).toMatch(/Returns/);
    expect(declaredKeys).toHaveLength(numberOfKeys);
    for (const key of usedKeys) expect(header).toContain(key);
    for (const arg of usedArgs) expect(header).toContain(arg);
  });

  it('never builds key names inside a script (Cluster: every key is passed in KEYS)', () => {
    // Arrange + Act
    const offenders = files.filter((name) =>
      /\.\.\s*['"]|KEYS\[\d+\]\s*\.\./.test(readFileSync(new URL(name, dir), 'utf8')),
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
    expect(loaded.numberOfKeys).toBe(1);
  });
});
