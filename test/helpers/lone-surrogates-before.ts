/**
 * `generalisedUtf8` and `codeUnitsHex` as they were before they were made linear and native
 * (`src/core/lone-surrogates.ts` at commit 3ddda6f), kept as the oracle of the property test that proves
 * the bytes unchanged (`test/unit/core/lone-surrogates.property.test.ts`) and as the "before" rows of
 * `bench/lone-surrogates.ts`. Their logic is verbatim; only the names differ.
 */

import { isWellFormed } from '../../src/core/lone-surrogates.js';

/** `generalisedUtf8` before: two Buffers per lone surrogate, all concatenated at the end. */
export function generalisedUtf8Before(value: string): Buffer {
  if (isWellFormed(value)) return Buffer.from(value, 'utf8');
  const chunks: Buffer[] = [];
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    const next = value.charCodeAt(i + 1);
    if (unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      i++; // a pair: UTF-8 writes it as it is
      continue;
    }
    chunks.push(
      Buffer.from(value.slice(start, i), 'utf8'),
      Buffer.from([0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)]),
    );
    start = i + 1;
  }
  chunks.push(Buffer.from(value.slice(start), 'utf8'));
  return Buffer.concat(chunks);
}

/** `codeUnitsHex` before: a string built code unit by code unit. */
export function codeUnitsHexBefore(value: string): string {
  let hex = '';
  for (let i = 0; i < value.length; i++) hex += value.charCodeAt(i).toString(16).padStart(4, '0');
  return hex;
}
