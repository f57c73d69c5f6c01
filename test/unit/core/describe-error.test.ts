import { describe, expect, it } from 'vitest';
import {
  describeError,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_ERROR_NAME_LENGTH,
} from '../../../src/core/describe-error.js';

describe('describeError', () => {
  it('describes an Error by its name, message and string code', () => {
    // Arrange
    const error = Object.assign(new TypeError('bad input'), { code: 'E_INPUT' });
    // Act
    const info = describeError(error);
    // Assert
    expect(info).toEqual({ name: 'TypeError', message: 'bad input', code: 'E_INPUT' });
  });

  it('describes a null-prototype object, which String() cannot convert, by its content', () => {
    // Arrange
    const thrown = Object.assign(Object.create(null), { code: 'E_DECLINED', message: 'declined' });
    // Act
    const info = describeError(thrown);
    // Assert
    expect(info).toEqual({
      name: 'NonError',
      message: '{"code":"E_DECLINED","message":"declined"}',
      code: 'E_DECLINED',
    });
  });

  it('describes a plain object as JSON rather than [object Object]', () => {
    // Arrange / Act
    const info = describeError({ code: 'card_declined', message: 'Your card was declined' });
    // Assert
    expect(info.message).toBe('{"code":"card_declined","message":"Your card was declined"}');
    expect(info.code).toBe('card_declined');
  });

  it('describes strings, undefined, symbols and cyclic objects', () => {
    // Arrange
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    // Act
    const infos = ['plain string', undefined, Symbol('s'), cyclic, 12n].map(describeError);
    // Assert
    expect(infos.map((info) => info.message)).toEqual([
      'plain string',
      'undefined',
      'Symbol(s)',
      '[object Object]',
      '12',
    ]);
    for (const info of infos) expect(info.name).toBe('NonError');
  });

  it('never throws: not for throwing getters, toPrimitive or a revoked Proxy', () => {
    // Arrange
    const getters = new Error('x');
    Object.defineProperty(getters, 'message', {
      get() {
        throw new Error('getter');
      },
    });
    const primitive = {
      [Symbol.toPrimitive]() {
        throw new Error('no');
      },
      toJSON() {
        throw new Error('no JSON either');
      },
    };
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    // Act
    const infos = [getters, primitive, proxy].map(describeError);
    // Assert
    expect(infos[0]).toEqual({ name: 'Error', message: 'undefined' });
    expect(infos[1]).toEqual({ name: 'NonError', message: '[object Object]' });
    expect(infos[2]).toEqual({ name: 'NonError', message: '[unprintable value]' });
  });

  it('bounds the message, name and code, marking what was cut', () => {
    // Arrange
    const error = Object.assign(new Error(`upstream 502: ${'x'.repeat(200_000)}`), {
      code: 'c'.repeat(1000),
    });
    error.name = 'N'.repeat(1000);
    // Act
    const info = describeError(error);
    // Assert
    expect(info.message.startsWith('upstream 502: xxx')).toBe(true);
    expect(info.message.length).toBeLessThan(MAX_ERROR_MESSAGE_LENGTH + 60);
    expect(info.message).toMatch(/… \[truncated, 195918 more characters\]$/);
    expect(info.name.length).toBeLessThan(MAX_ERROR_NAME_LENGTH + 60);
    expect(info.code?.length).toBeLessThan(MAX_ERROR_NAME_LENGTH + 60);
    expect(info.name).toMatch(/truncated/);
  });

  it('does not split a surrogate pair when it cuts', () => {
    // Arrange
    const message = `${'a'.repeat(MAX_ERROR_MESSAGE_LENGTH - 1)}😀😀`;
    // Act
    const info = describeError(new Error(message));
    // Assert
    expect(info.message.startsWith(`${'a'.repeat(MAX_ERROR_MESSAGE_LENGTH - 1)}…`)).toBe(true);
    expect(info.message).toMatch(/truncated, 4 more characters/);
  });
});
