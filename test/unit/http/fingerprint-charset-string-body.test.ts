/**
 * The `charset` parameter and JSON string values in the fingerprint: the same bytes under another charset
 * (not UTF-8) are another request, UTF-8 spelled any way or left out is none; a string a parser made of a
 * JSON string body (`stringBody: 'value'`) is that string, not the JSON its text spells, while the JSON
 * text itself (the default, `'text'`) keeps the fingerprint it always had.
 */
import { describe, expect, it } from 'vitest';
import { charsetOf } from '../../../src/http/charset.js';
import { httpFingerprint } from '../../../src/http/fingerprint.js';
import { stringBodyKind } from '../../../src/http/string-body.js';

const request = { method: 'POST', path: '/orders', query: '' };
const json = (contentType: string, body: unknown) =>
  httpFingerprint({ ...request, contentType, body: Buffer.from(String(body)) });

describe('charsetOf', () => {
  it.each([
    [undefined, ''],
    ['application/json', ''],
    ['application/json; charset=utf-8', ''],
    ['application/json;CHARSET="UTF-8"', ''],
    ['application/json; charset=utf8', ''],
    ['text/plain; format=flowed; charset="ISO-8859-1"', 'iso-8859-1'],
    ['application/json; charset=utf-7', 'utf-7'],
    ['application/json; charset', ''],
  ])('%s → %j', (contentType, label) => {
    expect(charsetOf(contentType)).toBe(label);
  });
});

describe('httpFingerprint and the charset', () => {
  it('keeps one fingerprint for UTF-8, however it is spelled or left out', () => {
    const body = '{"a":1}';
    const plain = json('application/json', body);
    for (const type of ['application/json; charset=utf-8', 'Application/JSON;charset="UTF-8"']) {
      expect(json(type, body), type).toBe(plain);
    }
  });

  it('tells the same bytes apart under two other charsets', () => {
    const body = '{"a":"+AOk-"}';
    const utf7 = json('application/json; charset=utf-7', body);
    expect(utf7).not.toBe(json('application/json', body));
    expect(utf7).toBe(json('application/json; charset="UTF-7"', body));
    const text = (charset: string) =>
      httpFingerprint({
        ...request,
        contentType: `text/plain; charset=${charset}`,
        body: 'caf\xe9',
      });
    expect(text('iso-8859-1')).not.toBe(text('koi8-r'));
  });
});

describe('httpFingerprint of a string body under a JSON type', () => {
  const withString = (body: string, stringBody?: 'text' | 'value') =>
    httpFingerprint({ ...request, contentType: 'application/json', body, stringBody });
  const parsed = (body: unknown) =>
    httpFingerprint({ ...request, contentType: 'application/json', body });

  it('reads a string value as that string, not the JSON it spells', () => {
    expect(withString('123', 'value')).not.toBe(parsed(123));
    expect(withString('{"a":1}', 'value')).not.toBe(parsed({ a: 1 }));
    expect(withString('null', 'value')).not.toBe(parsed(null));
    expect(withString('123', 'value')).toBe(withString('123', 'value'));
  });

  it('never takes JSON text read as a value for the string body whose value that text is', () => {
    // `express.text()` reading a chunked or BOM-led `{"amount":100}` (classed a value: its length is not
    // the Content-Length) against the string body `"{\"amount\":100}"` sent with one (the text): once
    // both hashed as the JSON string `{"amount":100}`, and the second was replayed the first's answer.
    const text = '{"amount":100}';
    expect(withString(text, 'value')).not.toBe(withString(JSON.stringify(text), 'text'));
    expect(withString(text, 'value')).not.toBe(parsed(text));
  });

  it('reads the JSON text as JSON, as before (the default)', () => {
    expect(withString('{"b":1,"a":2}')).toBe(parsed({ a: 2, b: 1 }));
    expect(withString('{"b":1,"a":2}', 'text')).toBe(parsed({ a: 2, b: 1 }));
  });

  it('keeps the bytes of a string value that is not JSON text, as before', () => {
    expect(withString('hello', 'value')).toBe(withString('hello', 'text'));
  });

  it('prefers the text the app kept over the string value', () => {
    const kept = httpFingerprint({
      ...request,
      contentType: 'application/json',
      body: '123',
      rawBody: '"123"',
      stringBody: 'value',
    });
    expect(kept).toBe(json('application/json', '"123"'));
  });
});

describe('stringBodyKind', () => {
  const headers =
    (values: Record<string, string>) =>
    (name: string): string | undefined =>
      values[name];

  it('is the text when its UTF-8 length is the Content-Length', () => {
    expect(stringBodyKind('{"é":1}', headers({ 'content-length': '8' }))).toBe('text');
  });

  it('is a value when the body was longer, its length unknown, encoded or in another charset', () => {
    const body = '123';
    expect(stringBodyKind(body, headers({ 'content-length': '5' }))).toBe('value');
    expect(stringBodyKind(body, headers({}))).toBe('value');
    expect(
      stringBodyKind(body, headers({ 'content-length': '3', 'content-encoding': 'gzip' })),
    ).toBe('value');
    expect(
      stringBodyKind(
        body,
        headers({ 'content-length': '3', 'content-type': 'application/json; charset=utf-16le' }),
      ),
    ).toBe('value');
  });
});
