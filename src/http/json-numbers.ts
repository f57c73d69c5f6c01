/**
 * JSON numbers a double would round. `JSON.parse` reads numbers as doubles, so
 * `{"account":12345678901234567891}` and `{"account":12345678901234567890}` parse to the same value (an
 * int64 id, a snowflake id), as do `1e400` and `2e400` (both `Infinity`) and `0.10000000000000001` and
 * `0.1`. A fingerprint over the parsed value would then let a key reused for another account replay the
 * first account's response instead of answering 422. The fingerprint asks {@link mayHoldRoundedNumber} of
 * a JSON text; for such a text (rare, but a client can send one on purpose) it reads it with
 * {@link parseJsonExactly}, which keeps every number that was rounded as an {@link ExactDecimal}. That
 * reading is CPU on the event loop a client chooses, up to the body limit: it patches the value JSON.parse
 * already made instead of building another, and decides most numbers from their digits alone
 * (`bench/json-numbers.ts`).
 * @module
 */

import { ExactDecimal } from '../core/exact-decimal.js';

const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const LOWER_T = 0x74;
const LOWER_F = 0x66;
const LOWER_N = 0x6e;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;

/** Significant digits a double holds for every decimal (`DBL_DIG`). */
const MAX_SIGNIFICANT_DIGITS = 15;
/** Decimal exponents well inside the normal range of doubles (about 1e-307 to 1.8e308). */
const MAX_DECIMAL_EXPONENT = 300;

/**
 * A number of more than 15 significant digits has 16 digits with at most a point among them, so a run of
 * at least 8: the cheap run filter comes first (most bodies fail it, or pass it with one timestamp). A
 * string holding such a run (a card number, a 19-digit id sent as text) matches too: that costs only the
 * exact reading, never a different fingerprint.
 */
const EIGHT_DIGITS = /\d{8}/;
const LONG_MANTISSA = /\d[\d.]{15}/;
/** Beyond the ±300 decimal exponents {@link numberParsesExactly} allows: a long mantissa, or this. */
const LONG_EXPONENT = /\d[eE][+-]?\d{3}/;

/**
 * Whether a JSON text may hold a number that does not parse exactly ({@link numberParsesExactly}): a
 * number `JSON.parse` may have read as the double another number is read as. Looks at the text, not at the
 * parsed doubles, so it also sees a long number whose double has a short form (`0.10000000000000001` is
 * read as `0.1`). `false` guarantees `parseJsonExactly(text)` would give what `JSON.parse(text)` gives.
 * @example
 * mayHoldRoundedNumber('{"account":9223372036854775807}'); // true
 * mayHoldRoundedNumber('{"amount":19.99,"qty":3}'); // false
 */
export function mayHoldRoundedNumber(text: string): boolean {
  return (EIGHT_DIGITS.test(text) && LONG_MANTISSA.test(text)) || LONG_EXPONENT.test(text);
}

/**
 * `true` when `lexeme`, a JSON number's text, parses to a double no other number parses to: at most 15
 * significant digits (`DBL_DIG`: such decimals survive a round trip through a double) and a decimal
 * exponent within ±300, inside the normal range of doubles; zero, however written, is exact.
 * @example
 * numberParsesExactly('19.99'); // true
 * numberParsesExactly('9223372036854775807'); // false
 */
export function numberParsesExactly(lexeme: string): boolean {
  const negative = lexeme.charCodeAt(0) === MINUS;
  return parsesExactly(lexeme, negative ? 1 : 0, lexeme.length);
}

// The index after the closing quote of a string whose content starts at `i`: the next quote not escaped
// (preceded by an even number of backslashes), found by indexOf rather than a loop over every character.
function afterString(text: string, i: number): number {
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote === -1) return text.length;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    i = quote + 1;
  }
}

// A JSON number without its sign, text[start, end): digits, an optional fraction, an optional exponent.
function parsesExactly(text: string, start: number, end: number): boolean {
  let significant = 0;
  // Digits seen before the decimal point, counted from the first non-zero digit (the value's magnitude);
  // for a value below 1, the zeros after the point before the first non-zero digit, negated.
  let magnitude = 0;
  let trailingZeros = 0;
  let seenPoint = false;
  let i = start;
  for (; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code === DOT) {
      seenPoint = true;
      continue;
    }
    if (code === LOWER_E || code === UPPER_E) break;
    if (significant === 0 && code === ZERO) {
      if (seenPoint) magnitude--;
      continue;
    }
    significant++;
    trailingZeros = code === ZERO ? trailingZeros + 1 : 0;
    if (!seenPoint) magnitude++;
  }
  // Zero, however written (`0`, `-0.000`, `0e999`), is exactly zero.
  if (significant === 0) return true;
  // Trailing zeros are significant only as a scale (`1200` is 12e2), which the magnitude already holds.
  if (significant - trailingZeros > MAX_SIGNIFICANT_DIGITS) return false;
  const exponent = i < end ? Number(text.slice(i + 1, end)) : 0;
  const decimalExponent = magnitude + exponent;
  return Math.abs(decimalExponent) <= MAX_DECIMAL_EXPONENT;
}

/** Most significant digits a double's shortest form (`String(value)`) ever has. */
const MAX_SHORTEST_DIGITS = 17;
/** Decimal exponents (of `0.<digits> × 10^e`) past which a number's double is `Infinity`, or zero. */
const MAX_FINITE_EXPONENT = 309;
const MIN_NONZERO_EXPONENT = -324;

/** Where the number {@link roundedNumber} last read ends: a module variable, no object per number. */
let numberEndAt = 0;

/**
 * The number starting at `text[start]` as an {@link ExactDecimal} when a double would round it and it is
 * not its double's shortest form, else `undefined` (it is the double JSON.parse reads); sets
 * {@link numberEndAt}. The same decision as `String(value) === lexeme || numberParsesExactly(lexeme) ||
 * canonical(String(value)) === canonical(lexeme)`, mostly taken from one pass over the digits: a number
 * that parses exactly needs no string at all, and one of more than 17 significant digits, or past the range
 * of doubles, cannot be a double's shortest form, so it needs neither `Number` nor `String`. `parsed` is
 * JSON.parse's double for it when the caller has it (an array's item), which saves `Number`.
 */
function roundedNumber(text: string, start: number, parsed?: unknown): ExactDecimal | undefined {
  const length = text.length;
  let significant = 0;
  let trailingZeros = 0;
  // As in parsesExactly: the digits before the point from the first non-zero one, or for a value below 1
  // the zeros after the point before its first non-zero digit, negated.
  let magnitude = 0;
  let seenPoint = false;
  let i = text.charCodeAt(start) === MINUS ? start + 1 : start;
  for (; i < length; i++) {
    const code = text.charCodeAt(i);
    if (code >= ZERO && code <= NINE) {
      if (significant === 0 && code === ZERO) {
        if (seenPoint) magnitude--;
        continue;
      }
      significant++;
      trailingZeros = code === ZERO ? trailingZeros + 1 : 0;
      if (!seenPoint) magnitude++;
    } else if (code === DOT) seenPoint = true;
    else break;
  }
  // A written exponent of 16 digits or more is inexact as a double here, and far past ±300 either way.
  let exponent = 0;
  let code = text.charCodeAt(i);
  if (code === LOWER_E || code === UPPER_E) {
    code = text.charCodeAt(++i);
    const negative = code === MINUS;
    if (negative || code === PLUS) i++;
    for (; i < length; i++) {
      const digit = text.charCodeAt(i) - ZERO;
      if (digit < 0 || digit > 9) break;
      exponent = exponent * 10 + digit;
    }
    if (negative) exponent = -exponent;
  }
  numberEndAt = i;
  // Zero, however written, is exactly zero.
  if (significant === 0) return undefined;
  const digits = significant - trailingZeros;
  const decimalExponent = magnitude + exponent;
  if (digits <= MAX_SIGNIFICANT_DIGITS && Math.abs(decimalExponent) <= MAX_DECIMAL_EXPONENT) {
    return undefined;
  }
  if (
    digits > MAX_SHORTEST_DIGITS ||
    decimalExponent > MAX_FINITE_EXPONENT ||
    decimalExponent < MIN_NONZERO_EXPONENT
  ) {
    return ExactDecimal.fromJsonText(text, start, i);
  }
  // 16 or 17 digits, or near the ends of the range: a double's own shortest form (what JSON.stringify
  // writes: 0.30000000000000004) names one number and keeps the fingerprint it always had.
  const value = typeof parsed === 'number' ? parsed : Number(text.slice(start, i));
  const shortest = String(value);
  if (shortest.length === i - start && text.startsWith(shortest, start)) return undefined;
  const exact = ExactDecimal.fromJsonText(text, start, i);
  return Number.isFinite(value) && ExactDecimal.fromJson(shortest).canonical === exact.canonical
    ? undefined
    : exact;
}

/** Nesting past the fingerprint's own limit (256) is refused there too; this bounds the recursion. */
const MAX_DEPTH = 300;

/**
 * `JSON.parse(text)` for a text `JSON.parse` accepted, except that a number that does not parse exactly
 * ({@link numberParsesExactly}) and is not its double's shortest form is an {@link ExactDecimal}; every
 * other value is what `JSON.parse` gives, so a body's fingerprint changes only where a number was rounded.
 * @param parsed - `JSON.parse(text)`, when the caller has it already (the fingerprint does): changed in
 *   place and returned, its rounded numbers replaced (the top-level value itself is replaced when it is
 *   such a number), as is any object of it whose patched key the text repeats, or most of whose members
 *   are replaced, by one read afresh. Either way the result equals what a fresh reading would give.
 * @throws RangeError when the text nests deeper than 300 levels.
 * @example
 * parseJsonExactly('{"account":9223372036854775807}'); // { account: ExactDecimal('9223372036854775807e19') }
 */
export function parseJsonExactly(text: string, parsed: unknown = JSON.parse(text)): unknown {
  return new JsonPatcher(text).value(0, parsed);
}

/** Members replaced in one object past which, if they are a quarter of it, it is read afresh instead. */
const MANY_REPLACED = 32;

/**
 * Walks the text beside JSON.parse's value of it and replaces, in that value, the numbers a double rounded:
 * nothing is built or copied, and a member's name is read only where something is replaced or entered.
 * A repeated key breaks the match between the text's members and the value's (JSON.parse keeps the last,
 * so an earlier member's container is not in the value): when a member entered or replaced is named again
 * later in its object, that object is read afresh from its text by {@link ExactJsonReader} and replaces
 * the one JSON.parse made (so does a container that is not where it should be, which happens only inside
 * such an object's members, and is replaced with it). An object most of whose members are replaced is read
 * afresh too, once that is seen: its walk would cost as much as building it, and twice that if its last
 * member repeated a key. A member is entered only when it is the object's own, so a walk gone astray never
 * reaches a prototype.
 */
class JsonPatcher {
  private at = 0;

  constructor(private readonly text: string) {}

  /** Reads the value at `at`, whose JSON.parse value is `parsed`; returns what replaces it. */
  value(depth: number, parsed: unknown): unknown {
    if (depth > MAX_DEPTH) throw new RangeError('JSON nested too deeply');
    this.skipSpace();
    const text = this.text;
    const start = this.at;
    switch (text.charCodeAt(start)) {
      case OPEN_BRACE:
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
          return this.fresh(depth, start);
        }
        return this.object(depth, parsed as Record<string, unknown>);
      case OPEN_BRACKET:
        if (!Array.isArray(parsed)) return this.fresh(depth, start);
        this.array(depth, parsed);
        return parsed;
      case QUOTE:
        this.at = afterString(text, start + 1);
        return parsed;
      case LOWER_T:
      case LOWER_N:
        this.at += 4;
        return parsed;
      case LOWER_F:
        this.at += 5;
        return parsed;
      default: {
        const exact = roundedNumber(text, start, parsed);
        this.at = numberEndAt;
        return exact ?? parsed;
      }
    }
  }

  // The object at `at`, JSON.parse's `record` patched, or read afresh when a key repeats.
  private object(depth: number, record: Record<string, unknown>): Record<string, unknown> {
    const text = this.text;
    const start = this.at;
    this.at++;
    this.skipSpace();
    if (text.charCodeAt(this.at) === CLOSE_BRACE) {
      this.at++;
      return record;
    }
    // The names of the members entered or replaced so far: one named again later was not the member
    // JSON.parse kept. (Counting the record's keys instead costs more than the whole walk on a large
    // object: Object.keys of JSON.parse's 60,000-key object takes about as long as the parse itself.)
    let touched: Set<string> | undefined;
    let members = 0;
    for (;;) {
      members++;
      this.skipSpace();
      const nameAt = this.at;
      const nameEnd = afterString(text, nameAt + 1);
      this.at = nameEnd;
      this.skipSpace();
      this.at++; // ':'
      this.skipSpace();
      let name: string | undefined;
      if (touched !== undefined) {
        name = memberName(text, nameAt, nameEnd);
        if (touched.has(name)) return this.fresh(depth, start) as Record<string, unknown>;
      }
      const code = text.charCodeAt(this.at);
      if (code === OPEN_BRACE || code === OPEN_BRACKET) {
        name ??= memberName(text, nameAt, nameEnd);
        touched ??= new Set();
        touched.add(name);
        const member = Object.hasOwn(record, name) ? record[name] : undefined;
        const replaced = this.value(depth + 1, member);
        if (replaced !== member) setMember(record, name, replaced);
      } else if (code === QUOTE) {
        this.at = afterString(text, this.at + 1);
      } else if (code === LOWER_T || code === LOWER_N) {
        this.at += 4;
      } else if (code === LOWER_F) {
        this.at += 5;
      } else {
        const exact = roundedNumber(text, this.at);
        this.at = numberEndAt;
        if (exact !== undefined) {
          name ??= memberName(text, nameAt, nameEnd);
          touched ??= new Set();
          touched.add(name);
          setMember(record, name, exact);
          // Mostly replaced members (`{"a":1e400,"b":1e400,…}`): building the object costs no more than
          // patching it, and a key repeated at its end would have it read twice.
          if (touched.size > MANY_REPLACED && touched.size * 4 > members) {
            return this.fresh(depth, start) as Record<string, unknown>;
          }
        }
      }
      this.skipSpace();
      if (text.charCodeAt(this.at++) === CLOSE_BRACE) return record;
    }
  }

  // The value at `start`, read afresh (its text continues the walk after it).
  private fresh(depth: number, start: number): unknown {
    const reader = new ExactJsonReader(this.text, start);
    const value = reader.value(depth);
    this.at = reader.at;
    return value;
  }

  private array(depth: number, array: unknown[]): void {
    const text = this.text;
    this.at++;
    this.skipSpace();
    if (text.charCodeAt(this.at) === CLOSE_BRACKET) {
      this.at++;
      return;
    }
    for (let i = 0; ; i++) {
      const item = array[i];
      const replaced = this.value(depth + 1, item);
      if (replaced !== item) array[i] = replaced;
      this.skipSpace();
      if (text.charCodeAt(this.at++) === CLOSE_BRACKET) return;
    }
  }

  private skipSpace(): void {
    const text = this.text;
    let code = text.charCodeAt(this.at);
    while (code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09) {
      code = text.charCodeAt(++this.at);
    }
  }
}

// The name of the member whose quoted name is text[start, end): escapes are decoded by JSON.parse itself.
function memberName(text: string, start: number, end: number): string {
  const raw = text.slice(start + 1, end - 1);
  return raw.includes('\\') ? (JSON.parse(text.slice(start, end)) as string) : raw;
}

// A `__proto__` member is a plain member, as JSON.parse makes it (an assignment would set the prototype);
// an object made without a prototype would be slow in every other case.
function setMember(record: Record<string, unknown>, name: string, member: unknown): void {
  if (name === '__proto__') {
    Object.defineProperty(record, name, {
      value: member,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else record[name] = member;
}

// A recursive descent over a text already known to be valid JSON, so nothing is validated twice: builds
// a value afresh from `at`, for an object whose keys repeat ({@link JsonPatcher}).
class ExactJsonReader {
  constructor(
    private readonly text: string,
    public at: number,
  ) {}

  value(depth: number): unknown {
    if (depth > MAX_DEPTH) throw new RangeError('JSON nested too deeply');
    this.skipSpace();
    const text = this.text;
    const start = this.at;
    switch (text.charCodeAt(start)) {
      case OPEN_BRACE:
        return this.object(depth);
      case OPEN_BRACKET:
        return this.array(depth);
      case QUOTE: {
        const end = afterString(text, start + 1);
        this.at = end;
        return memberName(text, start, end);
      }
      case LOWER_T:
        this.at += 4;
        return true;
      case LOWER_F:
        this.at += 5;
        return false;
      case LOWER_N:
        this.at += 4;
        return null;
      default: {
        const exact = roundedNumber(text, start);
        const end = numberEndAt;
        this.at = end;
        return exact ?? Number(text.slice(start, end));
      }
    }
  }

  private object(depth: number): Record<string, unknown> {
    const object: Record<string, unknown> = {};
    const text = this.text;
    this.at++;
    this.skipSpace();
    if (text.charCodeAt(this.at) === CLOSE_BRACE) {
      this.at++;
      return object;
    }
    for (;;) {
      this.skipSpace();
      const nameAt = this.at;
      const nameEnd = afterString(text, nameAt + 1);
      this.at = nameEnd;
      this.skipSpace();
      this.at++; // ':'
      setMember(object, memberName(text, nameAt, nameEnd), this.value(depth + 1));
      this.skipSpace();
      if (text.charCodeAt(this.at++) === CLOSE_BRACE) return object;
    }
  }

  private array(depth: number): unknown[] {
    const array: unknown[] = [];
    this.at++;
    this.skipSpace();
    if (this.text.charCodeAt(this.at) === CLOSE_BRACKET) {
      this.at++;
      return array;
    }
    for (;;) {
      array.push(this.value(depth + 1));
      this.skipSpace();
      if (this.text.charCodeAt(this.at++) === CLOSE_BRACKET) return array;
    }
  }

  private skipSpace(): void {
    const text = this.text;
    let code = text.charCodeAt(this.at);
    while (code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09) {
      code = text.charCodeAt(++this.at);
    }
  }
}
